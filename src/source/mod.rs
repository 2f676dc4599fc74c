//! Where a stream's files come from: the [`FileSource`] seam and what every source shares
//! (`file.rs`: filtering by hidden names, `pathGlobFilter`, `modifiedAfter`/`modifiedBefore`,
//! ordering, Hive-style partition values), its implementations (a local folder, an S3
//! prefix, a notification queue, a Delta table), and [`Source`], the one a stream opens.
//!
//! Adding a source: one file implementing [`FileSource`], chosen in [`Source::open`].

use std::sync::Arc;

use crate::location::Location;
use crate::options::Settings;
use crate::storage::StorageSettings;

pub mod clean;
mod delta;
mod file;
pub mod incremental;
mod local;
mod s3;
mod sqs;

pub use delta::DeltaTableSource;
pub use file::{
    Cleaned, FileLocation, FileRef, FileSource, LeftMessage, Overlap, QueueTally, SourceError,
    SourceFormat, filtered_by, infer_partition_columns, is_hidden, partition_pairs,
    partition_values,
};
pub(crate) use file::{
    accept, is_under, mtime_ms, overlap_of_paths, percent_decode, table_as_files,
};
pub use local::LocalFolder;
pub(crate) use local::map_on_cores;
pub use s3::S3Prefix;
pub use sqs::SqsNotifications;

/// A stream's source: one [`FileSource`], shared by the stream's tasks; its methods are
/// the source's, plus the shared filtering and ordering of [`Source::list`].
#[derive(Debug, Clone)]
pub struct Source {
    inner: Arc<dyn FileSource>,
    /// Key prefixes never listed: the stream's own table, checkpoint or schema location
    /// when they lie inside the source.
    left_out: Arc<[String]>,
}

impl std::ops::Deref for Source {
    type Target = dyn FileSource;

    fn deref(&self) -> &(dyn FileSource + 'static) {
        self.inner.as_ref()
    }
}

impl Source {
    /// Opens the source at `location` (a local folder of files must exist; a Delta table
    /// may be created later, by another stream).
    pub fn open(
        location: &Location,
        storage: &StorageSettings,
        format: SourceFormat,
        settings: &Settings,
    ) -> Result<Source, SourceError> {
        if let Some(notifications) = &settings.notifications {
            // Notification mode reads loose files of an S3 prefix; a table is read by commits.
            if format == SourceFormat::Delta || holds_delta_log(location, storage)? {
                return Err(SourceError::Usage(format!(
                    "cloudFiles.useNotifications=true reads new files of an S3 prefix; {location} \
                     is a Delta table, read commit by commit: leave notification mode out"
                )));
            }
            return Ok(Source::new(sqs::open(
                location,
                storage,
                settings,
                notifications,
            )?));
        }
        let is_table = match format {
            SourceFormat::Delta => true,
            SourceFormat::Files | SourceFormat::Detect => holds_delta_log(location, storage)?,
        };
        if is_table && format == SourceFormat::Files {
            return Err(table_as_files(&location.to_string()));
        }
        if !is_table {
            return Source::open_files(location, storage);
        }
        if format == SourceFormat::Detect {
            tracing::info!(source = %location, "The source holds a _delta_log/: reading it as a Delta table.");
        }
        let files = match location {
            // Another stream of the run creates the table: nothing is created here (a dry
            // run writes nothing), and it is listed once it exists.
            Location::Local(path) if settings.delta.created_by_run && !path.exists() => {
                Source::new(LocalFolder::not_yet_created(path)?)
            }
            _ => Source::open_files(location, storage)?,
        };
        Ok(Source::new(DeltaTableSource::open(
            location,
            files.inner,
            storage,
            &settings.delta,
        )))
    }

    /// A Delta table's files are Parquet, whatever `cloudFiles.format` says: the settings
    /// are made to say so, and another format given is refused.
    pub fn fix_format(&self, settings: &mut Settings) -> Result<(), SourceError> {
        if !self.reads_delta() {
            return Ok(());
        }
        match settings.format {
            None | Some(crate::options::Format::Parquet) => {
                settings.format = Some(crate::options::Format::Parquet);
                Ok(())
            }
            Some(other) => Err(SourceError::Usage(format!(
                "cloudFiles.format={other} cannot read the Delta table {}: its files are \
                 Parquet; leave the option out",
                self.describe()
            ))),
        }
    }

    /// Opens the files at `location` as loose files.
    fn open_files(location: &Location, storage: &StorageSettings) -> Result<Source, SourceError> {
        Ok(match location {
            Location::Local(path) => Source::new(LocalFolder::open(path)?),
            Location::S3(url) => Source::new(S3Prefix::open(url, storage)?),
        })
    }

    pub fn new(source: impl FileSource + 'static) -> Source {
        Source {
            inner: Arc::new(source),
            left_out: Arc::from([]),
        }
    }

    /// The same source, never listing keys under the given prefixes.
    pub fn leaving_out(&self, prefixes: Vec<String>) -> Source {
        Source {
            inner: self.inner.clone(),
            left_out: prefixes.into(),
        }
    }

    /// Lists every candidate file under the source, filtered by the settings, sorted by
    /// (modification time, key) so batches are deterministic.
    pub async fn list(&self, settings: &Settings) -> Result<Vec<FileRef>, SourceError> {
        self.list_after(settings, None).await
    }

    /// Like [`Source::list`], but a source that lists incrementally lists only keys after
    /// `after` (Auto Loader's incremental listing).
    pub async fn list_after(
        &self,
        settings: &Settings,
        after: Option<&str>,
    ) -> Result<Vec<FileRef>, SourceError> {
        let files = self.inner.list_files(after).await?;
        Ok(self.filtered(files, settings))
    }

    /// The files at `keys` (a folder's key: every file under it), filtered and ordered as
    /// a listing is, for a watcher told by file events which keys changed; `None` for a
    /// source that can only be listed.
    pub fn stat(&self, settings: &Settings, keys: &[String]) -> Option<Vec<FileRef>> {
        let files = self.inner.stat_files(keys)?;
        Some(self.filtered(files, settings))
    }

    /// What a listing keeps: the settings' filters, never the stream's own output, in
    /// ingestion order.
    fn filtered(&self, mut files: Vec<FileRef>, settings: &Settings) -> Vec<FileRef> {
        let grace_ms = self.inner.modified_after_grace_ms();
        files.retain(|f| {
            accept(f, settings, grace_ms) && !self.left_out.iter().any(|p| is_under(&f.key, p))
        });
        if !self.inner.keeps_order() {
            files.sort_by(|a, b| (a.mtime_ms, &a.key).cmp(&(b.mtime_ms, &b.key)));
        }
        files
    }
}

/// Whether `location` holds a `_delta_log/`. A local check is a stat; an S3 check is one
/// listing request, made on a runtime of its own when there is none to use (opening
/// happens before the stream's runtime starts).
fn holds_delta_log(location: &Location, storage: &StorageSettings) -> Result<bool, SourceError> {
    match location {
        Location::Local(path) => Ok(path.join("_delta_log").is_dir()),
        Location::S3(_) => {
            if tokio::runtime::Handle::try_current().is_ok() {
                // Inside a runtime nothing may block: the listing refuses a table's log instead.
                return Ok(false);
            }
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| SourceError::ObjectStore {
                    url: location.to_string(),
                    reason: e.to_string(),
                })?;
            runtime.block_on(delta::is_delta_table(location, storage))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_parse_hive_folders() {
        assert_eq!(
            partition_pairs("date=2026-03-15/region=kr/f.json"),
            vec![
                ("date".into(), Some("2026-03-15".into())),
                ("region".into(), Some("kr".into()))
            ]
        );
        assert_eq!(partition_pairs("a/b/f.json"), vec![]);
        assert_eq!(
            partition_pairs("c=Serbia%2Fsrb%25/f"),
            vec![("c".into(), Some("Serbia/srb%".into()))]
        );
        assert_eq!(
            partition_pairs("c=__HIVE_DEFAULT_PARTITION__/f"),
            vec![("c".into(), None)]
        );
        let keys = ["date=1/region=kr/a", "date=2/region=us/b"];
        assert_eq!(
            infer_partition_columns(keys.iter().copied()),
            vec!["date", "region"]
        );
        let mixed = ["date=1/a", "x/b"];
        assert!(infer_partition_columns(mixed.iter().copied()).is_empty());
        assert_eq!(
            partition_values("date=1/f", &["date".to_string(), "hour".to_string()]),
            vec![Some("1".into()), None]
        );
    }

    #[test]
    fn modified_after_keeps_a_grace_window_on_object_stores() {
        let (s, _) = crate::options::resolve(
            &[("modifiedAfter".into(), "2026-03-15T00:00:00Z".into())],
            &crate::location::Location::Local("/c".into()),
        )
        .unwrap();
        let boundary = s.modified_after_ms.unwrap();
        // S3 reports the upload's start, to the second: just before the boundary.
        let f = FileRef {
            key: "a.json".into(),
            size: 1,
            mtime_ms: boundary - 1000,
        };
        assert!(!accept(&f, &s, 0), "local times are exact");
        assert!(
            accept(&f, &s, s3::OBJECT_STORE_GRACE_MS),
            "an object at the boundary is kept"
        );
        let old = FileRef {
            mtime_ms: boundary - 60_000,
            ..f
        };
        assert!(!accept(&old, &s, s3::OBJECT_STORE_GRACE_MS));
    }

    #[test]
    fn overlaps_of_paths() {
        assert_eq!(
            overlap_of_paths("a/in", "a/in/t"),
            Overlap::Inside("t".into())
        );
        assert_eq!(
            overlap_of_paths("a/in", "a/in"),
            Overlap::Inside(String::new())
        );
        assert_eq!(overlap_of_paths("", "t/x"), Overlap::Inside("t/x".into()));
        assert_eq!(overlap_of_paths("a/in", "a"), Overlap::Contains);
        assert_eq!(overlap_of_paths("a/in", "a/inbox"), Overlap::Apart);
        assert_eq!(overlap_of_paths("a/inbox", "a/in"), Overlap::Apart);
        assert!(is_under("t/part-0.parquet", "t"));
        assert!(!is_under("tx/part-0.parquet", "t"));
    }

    #[test]
    fn hidden_and_temporary_names() {
        assert!(is_hidden("_SUCCESS"));
        assert!(is_hidden(".part-0001.json"));
        assert!(is_hidden("upload.json.tmp"));
        assert!(!is_hidden("orders.json"));
    }
}
