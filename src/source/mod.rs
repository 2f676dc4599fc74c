//! Finding the files of a source: listing, filtering (hidden names, `pathGlobFilter`,
//! `modifiedAfter`/`modifiedBefore`), Hive-style partition values, and the set of new files
//! against the checkpoint's index.
//!
//! A [`Source`] is an enum so that object stores slot in beside local folders: each lists
//! into the same [`FileRef`] shape, keyed by the path relative to the source root.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;

use tracing::warn;
use url::Url;

use crate::location::Location;
use crate::options::Settings;

pub mod incremental;

#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("source {path} does not exist or is not a directory")]
    NotADirectory { path: PathBuf },
    #[error("cannot list {path}: {source}")]
    List {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot use {url}: {reason}")]
    ObjectStore { url: String, reason: String },
}

/// Where files land.
#[derive(Debug, Clone)]
pub enum Source {
    Local {
        root: PathBuf,
    },
    /// An S3 (or S3-compatible) prefix; credentials and endpoint from the standard AWS
    /// environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
    /// `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`). An object is complete once it is listed.
    S3 {
        /// `s3://bucket/prefix/`, for display and lineage.
        url: String,
        store: Arc<dyn ObjectStore>,
        prefix: ObjectPath,
    },
}

/// An object to read: where to get it from, and the runtime to fetch it with (decoders run
/// on plain threads).
#[derive(Debug, Clone)]
pub struct RemoteObject {
    pub store: Arc<dyn ObjectStore>,
    pub location: ObjectPath,
    pub handle: Option<tokio::runtime::Handle>,
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

impl Source {
    /// Opens the source at `location`: a local folder must exist.
    pub fn open(location: &Location) -> Result<Source, DiscoveryError> {
        match location {
            Location::Local(path) => Source::local(path),
            Location::S3(url) => Source::s3(url.as_str()),
        }
    }

    fn local(path: &Path) -> Result<Source, DiscoveryError> {
        let root = std::fs::canonicalize(path).map_err(|_| DiscoveryError::NotADirectory {
            path: path.to_path_buf(),
        })?;
        if !root.is_dir() {
            return Err(DiscoveryError::NotADirectory { path: root });
        }
        Ok(Source::Local { root })
    }

    fn s3(arg: &str) -> Result<Source, DiscoveryError> {
        let (store, bucket, prefix) =
            crate::storage::object_dir::s3_store(arg).map_err(|e| DiscoveryError::ObjectStore {
                url: arg.to_string(),
                reason: match e {
                    crate::storage::object_dir::RemoteError::Invalid { reason, .. }
                    | crate::storage::object_dir::RemoteError::Store { reason, .. } => reason,
                },
            })?;
        let url = if prefix.as_ref().is_empty() {
            format!("s3://{bucket}/")
        } else {
            format!("s3://{bucket}/{prefix}/")
        };
        Ok(Source::S3 { url, store, prefix })
    }

    /// A display form of the source.
    pub fn describe(&self) -> String {
        match self {
            Source::Local { root } => root.display().to_string(),
            Source::S3 { url, .. } => url.clone(),
        }
    }

    /// Where a key can be read: a local path, or an object to fetch first.
    pub fn locate(&self, key: &str) -> (PathBuf, Option<RemoteObject>) {
        match self {
            Source::Local { root } => (root.join(key), None),
            Source::S3 { store, prefix, .. } => {
                let location = if prefix.as_ref().is_empty() {
                    ObjectPath::from(key)
                } else {
                    ObjectPath::from(format!("{prefix}/{key}"))
                };
                let handle = tokio::runtime::Handle::try_current().ok();
                (
                    PathBuf::new(),
                    Some(RemoteObject {
                        store: Arc::clone(store),
                        location,
                        handle,
                    }),
                )
            }
        }
    }

    /// The URI recorded as the file's lineage (`_metadata.file_path`, `_file_path`).
    pub fn uri(&self, key: &str) -> String {
        match self {
            Source::Local { root } => Url::from_file_path(root.join(key))
                .map_or_else(|()| root.join(key).display().to_string(), |u| u.to_string()),
            Source::S3 { url, .. } => format!("{url}{key}"),
        }
    }

    /// Lists every candidate file under the source, filtered by the settings, sorted by
    /// (modification time, key) so batches are deterministic.
    pub async fn list(&self, settings: &Settings) -> Result<Vec<FileRef>, DiscoveryError> {
        self.list_after(settings, None).await
    }

    /// Like [`Source::list`], but an object store lists only keys after `after` (the
    /// listing starts there on the server): Auto Loader's incremental listing. A local
    /// folder is always walked whole.
    pub async fn list_after(
        &self,
        settings: &Settings,
        after: Option<&str>,
    ) -> Result<Vec<FileRef>, DiscoveryError> {
        let mut files = match self {
            Source::Local { root } => list_local(root)?,
            Source::S3 { url, store, prefix } => {
                list_object_store(url, store.as_ref(), prefix, after).await?
            }
        };
        let grace_ms = match self {
            Source::Local { .. } => 0,
            Source::S3 { .. } => OBJECT_STORE_GRACE_MS,
        };
        files.retain(|f| accept(f, settings, grace_ms));
        files.sort_by(|a, b| (a.mtime_ms, &a.key).cmp(&(b.mtime_ms, &b.key)));
        Ok(files)
    }
}

/// Lists objects under a prefix: paginated and streamed by object_store, keyed relative to
/// the prefix, hidden and temporary names skipped.
async fn list_object_store(
    url: &str,
    store: &dyn ObjectStore,
    prefix: &ObjectPath,
    after: Option<&str>,
) -> Result<Vec<FileRef>, DiscoveryError> {
    use futures::StreamExt;
    let mut out = Vec::new();
    let base = if prefix.as_ref().is_empty() {
        String::new()
    } else {
        format!("{prefix}/")
    };
    let mut stream = match after {
        Some(key) => {
            store.list_with_offset(Some(prefix), &ObjectPath::from(format!("{base}{key}")))
        }
        None => store.list(Some(prefix)),
    };
    while let Some(item) = stream.next().await {
        let meta = item.map_err(|e| DiscoveryError::ObjectStore {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
        let full = meta.location.to_string();
        let Some(key) = full.strip_prefix(&base) else {
            continue;
        };
        if key.is_empty() || key.split('/').any(is_hidden) {
            continue;
        }
        out.push(FileRef {
            key: key.to_string(),
            size: meta.size,
            mtime_ms: meta.last_modified.timestamp_millis(),
        });
    }
    Ok(out)
}

fn list_local(root: &Path) -> Result<Vec<FileRef>, DiscoveryError> {
    let mut out = Vec::new();
    let walker = walkdir::WalkDir::new(root)
        .min_depth(1)
        .follow_links(false)
        .into_iter()
        .filter_entry(|e| !is_hidden(&e.file_name().to_string_lossy()));
    for entry in walker {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                // An unreadable folder is reported, not silently skipped, and not fatal.
                warn!(error = %e, "Cannot list part of the source.");
                continue;
            }
        };
        if entry.file_type().is_symlink() {
            // Links are not followed (a loop, or a path outside the source, cannot be
            // reached through them); say so rather than skip in silence.
            warn!(path = %entry.path().display(), "Skipping a symbolic link: links are not followed.");
            continue;
        }
        if !entry.file_type().is_file() {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        let Some(key) = rel
            .to_str()
            .map(|s| s.replace(std::path::MAIN_SEPARATOR, "/"))
        else {
            warn!(path = %entry.path().display(), "Skipping a file whose name is not UTF-8.");
            continue;
        };
        let meta = match entry.metadata() {
            Ok(m) => m,
            Err(e) => {
                warn!(path = %entry.path().display(), error = %e, "Cannot stat file.");
                continue;
            }
        };
        let mtime_ms = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        out.push(FileRef {
            key,
            size: meta.len(),
            mtime_ms,
        });
    }
    Ok(out)
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

/// How far before `modifiedAfter` an object-store file is still taken: S3 times have
/// second precision and mark when an upload started, so a file written across the boundary
/// must not be lost (the ingested-file index keeps it from being taken twice).
const OBJECT_STORE_GRACE_MS: i64 = 2_000;

fn accept(f: &FileRef, s: &Settings, grace_ms: i64) -> bool {
    let name = f.key.rsplit('/').next().unwrap_or(&f.key);
    if let Some(glob) = &s.path_glob_filter
        && !glob.is_match(name)
    {
        return false;
    }
    if s.modified_after_ms
        .is_some_and(|after| f.mtime_ms <= after - grace_ms)
    {
        return false;
    }
    if s.modified_before_ms
        .is_some_and(|before| f.mtime_ms >= before)
    {
        return false;
    }
    true
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

fn percent_decode(s: &str) -> String {
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
            accept(&f, &s, OBJECT_STORE_GRACE_MS),
            "an object at the boundary is kept"
        );
        let old = FileRef {
            mtime_ms: boundary - 60_000,
            ..f
        };
        assert!(!accept(&old, &s, OBJECT_STORE_GRACE_MS));
    }

    #[test]
    fn hidden_and_temporary_names() {
        assert!(is_hidden("_SUCCESS"));
        assert!(is_hidden(".part-0001.json"));
        assert!(is_hidden("upload.json.tmp"));
        assert!(!is_hidden("orders.json"));
    }
}
