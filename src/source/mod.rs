//! Where a stream's files come from: the [`FileSource`] seam, its implementations (a local
//! folder, an S3 prefix; a notification queue or a Delta table plug in the same way), and
//! what every source shares: filtering (hidden names, `pathGlobFilter`,
//! `modifiedAfter`/`modifiedBefore`), ordering, and Hive-style partition values.
//!
//! Adding a source: one file implementing [`FileSource`], and one arm in [`Source::open`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::location::Location;
use crate::options::Settings;
use crate::storage::{RemoteObject, StorageSettings};

pub mod clean;
mod delta;
pub mod incremental;
mod local;
mod s3;
mod sqs;

pub use delta::DeltaTableSource;
pub use local::LocalFolder;
pub use s3::S3Prefix;
pub use sqs::{LeftMessage, QueueTally, SqsNotifications};

#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("source {path} does not exist (a source is a folder, or a single file)")]
    NotADirectory { path: PathBuf },
    #[error("cannot list {path}: {source}")]
    List {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot use {url}: {reason}")]
    ObjectStore { url: String, reason: String },
    /// Deleting or moving an ingested file (`cloudFiles.cleanSource`) failed.
    #[error("cannot clean {path}: {source}")]
    Clean {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The S3 location or configuration is wrong (nothing was sent).
    #[error("cannot use {url}: {reason}")]
    InvalidS3 { url: String, reason: String },
    /// A Delta table source cannot be read on (its log, a removing commit, a feature).
    #[error("Delta source {table}: {reason}")]
    DeltaSource { table: String, reason: String },
    #[error("{0}")]
    Usage(String),
}

/// What a stream's source holds: loose files, or a Delta table read incrementally
/// (`source_format = "delta"`). Left unsaid, a folder holding a `_delta_log/` is a table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SourceFormat {
    #[default]
    Detect,
    Files,
    Delta,
}

impl SourceFormat {
    pub fn from_name(name: &str) -> Option<SourceFormat> {
        match name.trim().to_ascii_lowercase().as_str() {
            "delta" => Some(SourceFormat::Delta),
            "files" => Some(SourceFormat::Files),
            _ => None,
        }
    }
}

/// Where a key is read from.
#[derive(Debug, Clone)]
pub enum FileLocation {
    /// A local file, read in place.
    Local(PathBuf),
    /// An object, fetched before it is decoded.
    Object(RemoteObject),
}

/// One kind of source. Keys are `/`-separated paths relative to the source's root; the
/// listing is the truth about what exists (file events and queue messages are only hints).
pub trait FileSource: std::fmt::Debug + Send + Sync {
    /// A display form, recorded as the lineage of every commit (recovery matches on it).
    fn describe(&self) -> String;

    /// The URI of a key (`_metadata.file_path`, messages).
    fn uri(&self, key: &str) -> String;

    /// Where a key is read from.
    fn locate(&self, key: &str) -> FileLocation;

    /// Every file under the source, unfiltered and in any order; with `after`, only keys
    /// after it (a source that cannot start there lists everything). [`Source::list`]
    /// filters and orders them.
    fn list_files<'a>(
        &'a self,
        after: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<FileRef>, DiscoveryError>>;

    /// Whether [`FileSource::list`] can start after a key on the server, so the stream may
    /// list incrementally (`cloudFiles.useIncrementalListing`).
    fn lists_incrementally(&self) -> bool {
        false
    }

    /// How far before `modifiedAfter` a file is still taken (listed times may lag).
    fn modified_after_grace_ms(&self) -> i64 {
        0
    }

    /// Whether a listed file is complete (an object store's objects are), so a watcher need
    /// not wait for it to settle.
    fn complete_when_listed(&self) -> bool {
        false
    }

    /// The files at these keys, unfiltered (a key naming a folder: every file below it; a
    /// key that is gone: nothing), for a watcher whose file events say which keys changed,
    /// so it need not list everything. `None`: this source can only be listed.
    fn stat_files(&self, _keys: &[String]) -> Option<Vec<FileRef>> {
        None
    }

    /// The local folder a watcher can take file events from, if there is one.
    fn local_root(&self) -> Option<&Path> {
        None
    }

    /// Called once `files` are durably owned by a written plan: a queue source deletes
    /// their messages here. Nothing to do for a listed source.
    fn planned<'a>(&'a self, _files: &'a [FileRef]) -> BoxFuture<'a, Result<(), DiscoveryError>> {
        Box::pin(async { Ok(()) })
    }

    /// Cleans an ingested file (`cloudFiles.cleanSource`), if it is still the file that
    /// was ingested. A source whose files are not its own to clean (a Delta table) refuses.
    fn clean<'a>(
        &'a self,
        _file: &'a FileRef,
        _action: &'a crate::options::CleanAction,
    ) -> BoxFuture<'a, Result<clean::Cleaned, DiscoveryError>> {
        Box::pin(async {
            Err(DiscoveryError::Usage(
                "cloudFiles.cleanSource applies to files in a folder or an S3 prefix".into(),
            ))
        })
    }

    /// Called after each discovery with the files the stream will plan (`taken`): every
    /// other file the last listing gave is already owned (ingested, in an unfinished
    /// plan) or left out by the stream, so a queue source deletes their messages here.
    fn discovered<'a>(
        &'a self,
        _taken: &'a [FileRef],
    ) -> BoxFuture<'a, Result<(), DiscoveryError>> {
        Box::pin(async { Ok(()) })
    }

    /// A queue source: what became of its messages since the last call (reported as
    /// events and metrics by the stream). `None` for a listed source.
    fn queue_tally(&self) -> Option<QueueTally> {
        None
    }

    /// A queue source whose last listing stopped at its limit: more files are waiting
    /// (`--once` lists again until none are).
    fn more_queued(&self) -> bool {
        false
    }

    /// Where `location` lies relative to this source, so a stream never reads its own
    /// table, checkpoint or schema location as input.
    fn overlap(&self, location: &Location) -> Overlap;

    /// Whether the listing's order is the order to ingest in (a table's commits), rather
    /// than (modification time, key).
    fn keeps_order(&self) -> bool {
        false
    }

    /// Whether the files are a Delta table's (read as Parquet, never as loose files).
    fn reads_delta(&self) -> bool {
        false
    }

    /// A source with a position of its own (a Delta table's next version) takes back the
    /// one saved in the stream's checkpoint.
    fn resume(&self, _saved: Option<&str>) -> Result<(), DiscoveryError> {
        Ok(())
    }

    /// The position to save in the checkpoint: fixed by the first listing before any plan
    /// (so a restart reads the same snapshot), and moved by [`FileSource::advance`].
    fn position(&self) -> Option<String> {
        None
    }

    /// Every file of the last listing is planned or ingested: the position moves past them.
    fn advance(&self) {}
}

/// Where a location lies relative to a source's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlap {
    /// Neither holds the other.
    Apart,
    /// Inside the source, under this key prefix (`""`: the source's root itself).
    Inside(String),
    /// The source lies inside the location.
    Contains,
}

/// Where path `inner` lies relative to folder `outer`, both `/`-separated, without trailing
/// slashes.
pub(crate) fn overlap_of_paths(outer: &str, inner: &str) -> Overlap {
    let under = |a: &str, b: &str| a == b || b.is_empty() || a.starts_with(&format!("{b}/"));
    if under(inner, outer) {
        let rest = inner[outer.len()..].trim_start_matches('/');
        Overlap::Inside(rest.to_string())
    } else if under(outer, inner) {
        Overlap::Contains
    } else {
        Overlap::Apart
    }
}

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
    ) -> Result<Source, DiscoveryError> {
        if let Some(notifications) = &settings.notifications {
            // Notification mode reads loose files of an S3 prefix; a table is read by commits.
            if format == SourceFormat::Delta || holds_delta_log(location, storage)? {
                return Err(DiscoveryError::Usage(format!(
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
        if let Location::Local(path) = location
            && settings.delta.created_by_run
        {
            // Another stream of the run creates the table.
            std::fs::create_dir_all(path).map_err(|source| DiscoveryError::List {
                path: path.clone(),
                source,
            })?;
        }
        let files = Source::open_files(location, storage)?;
        Ok(Source::new(DeltaTableSource::open(
            location,
            files,
            storage,
            &settings.delta,
        )))
    }

    /// A Delta table's files are Parquet, whatever `cloudFiles.format` says: the settings
    /// are made to say so, and another format given is refused.
    pub fn fix_format(&self, settings: &mut Settings) -> Result<(), DiscoveryError> {
        if !self.reads_delta() {
            return Ok(());
        }
        match settings.format {
            None | Some(crate::options::Format::Parquet) => {
                settings.format = Some(crate::options::Format::Parquet);
                Ok(())
            }
            Some(other) => Err(DiscoveryError::Usage(format!(
                "cloudFiles.format={other} cannot read the Delta table {}: its files are \
                 Parquet; leave the option out",
                self.describe()
            ))),
        }
    }

    /// Opens the files at `location` as loose files.
    fn open_files(
        location: &Location,
        storage: &StorageSettings,
    ) -> Result<Source, DiscoveryError> {
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
    pub async fn list(&self, settings: &Settings) -> Result<Vec<FileRef>, DiscoveryError> {
        self.list_after(settings, None).await
    }

    /// Like [`Source::list`], but a source that lists incrementally lists only keys after
    /// `after` (Auto Loader's incremental listing).
    pub async fn list_after(
        &self,
        settings: &Settings,
        after: Option<&str>,
    ) -> Result<Vec<FileRef>, DiscoveryError> {
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

/// A Delta table given as loose files: refused, since reading a table's Parquet files
/// would bring back rows it has removed.
pub(crate) fn table_as_files(source: &str) -> DiscoveryError {
    DiscoveryError::Usage(format!(
        "source {source} is a Delta table (it holds a _delta_log/): its files are never read \
         as loose files, which would bring removed rows back; set source_format = \"delta\" \
         (--source-format delta) to read it incrementally"
    ))
}

/// Whether `location` holds a `_delta_log/`. A local check is a stat; an S3 check is one
/// listing request, made on a runtime of its own when there is none to use (opening
/// happens before the stream's runtime starts).
fn holds_delta_log(location: &Location, storage: &StorageSettings) -> Result<bool, DiscoveryError> {
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
                .map_err(|e| DiscoveryError::ObjectStore {
                    url: location.to_string(),
                    reason: e.to_string(),
                })?;
            runtime.block_on(delta::is_delta_table(location, storage))
        }
    }
}

/// A file's identity, as listing finds it and as plans, the file index and the table's
/// commit records keep it: its key under the source root with its size and modification
/// time. A file whose size or time changes is a changed file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileRef {
    /// Path relative to the source root, `/`-separated.
    pub key: String,
    pub size: u64,
    pub mtime_ms: i64,
}

impl FileRef {
    /// The file's name: the key's last segment.
    pub fn name(&self) -> &str {
        self.key.rsplit('/').next().unwrap_or(&self.key)
    }
}

/// Names starting with `_` or `.` are never data (Spark and Auto Loader skip them), and
/// neither are temporary upload names.
pub fn is_hidden(name: &str) -> bool {
    name.starts_with('_')
        || name.starts_with('.')
        || name.ends_with(".tmp")
        || name.ends_with(".crdownload")
        || name.ends_with(".part")
}

/// Whether `key` is `prefix` or lies below it.
fn is_under(key: &str, prefix: &str) -> bool {
    key.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn accept(f: &FileRef, s: &Settings, grace_ms: i64) -> bool {
    filtered_by(f, s, grace_ms).is_none()
}

/// The option that leaves `f` out of the listing, if one does.
pub fn filtered_by(f: &FileRef, s: &Settings, grace_ms: i64) -> Option<&'static str> {
    if let Some(glob) = &s.path_glob_filter
        && !glob.is_match(f.name())
    {
        return Some("pathGlobFilter");
    }
    if s.modified_after_ms
        .is_some_and(|after| f.mtime_ms <= after - grace_ms)
    {
        return Some("modifiedAfter");
    }
    if s.modified_before_ms
        .is_some_and(|before| f.mtime_ms >= before)
    {
        return Some("modifiedBefore");
    }
    None
}

/// Hive-style `key=value` folders of a key, in order, values unescaped
/// (`__HIVE_DEFAULT_PARTITION__` is null).
pub fn partition_pairs(key: &str) -> Vec<(String, Option<String>)> {
    let mut parts: Vec<&str> = key.split('/').collect();
    parts.pop();
    parts
        .into_iter()
        .filter_map(|dir| {
            let (k, v) = dir.split_once('=')?;
            if k.is_empty() {
                return None;
            }
            let value = percent_decode(v);
            let value = (value != "__HIVE_DEFAULT_PARTITION__").then_some(value);
            Some((percent_decode(k), value))
        })
        .collect()
}

/// Partition columns common to all given keys (same names, same order), or none when the
/// layouts disagree or are not Hive-style.
pub fn infer_partition_columns<'a>(keys: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut common: Option<Vec<String>> = None;
    for key in keys {
        let names: Vec<String> = partition_pairs(key).into_iter().map(|(k, _)| k).collect();
        match &common {
            None => common = Some(names),
            Some(c) if *c == names => {}
            Some(_) => return Vec::new(),
        }
    }
    common.unwrap_or_default()
}

/// Values of the given partition columns for a key (null when absent).
pub fn partition_values(key: &str, columns: &[String]) -> Vec<Option<String>> {
    let pairs = partition_pairs(key);
    columns
        .iter()
        .map(|c| {
            pairs
                .iter()
                .find(|(k, _)| k == c)
                .and_then(|(_, v)| v.clone())
        })
        .collect()
}

pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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
