//! A file of a source and what every source shares: the `FileSource` seam, a file's
//! reference and location, the filters and partition parsing every listing applies, and
//! the errors. The sources (`local.rs`, `s3.rs`, `sqs.rs`, `delta.rs`) implement the seam;
//! this file uses none of them.

use crate::location::Location;
use crate::options::Settings;
use crate::storage::RemoteObject;
use futures::future::BoxFuture;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
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
    ) -> BoxFuture<'a, Result<Vec<FileRef>, SourceError>>;

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
    fn planned<'a>(&'a self, _files: &'a [FileRef]) -> BoxFuture<'a, Result<(), SourceError>> {
        Box::pin(async { Ok(()) })
    }

    /// Cleans an ingested file (`cloudFiles.cleanSource`), if it is still the file that
    /// was ingested. A source whose files are not its own to clean (a Delta table) refuses.
    fn clean<'a>(
        &'a self,
        _file: &'a FileRef,
        _action: &'a crate::options::CleanAction,
    ) -> BoxFuture<'a, Result<Cleaned, SourceError>> {
        Box::pin(async {
            Err(SourceError::Usage(
                "cloudFiles.cleanSource applies to files in a folder or an S3 prefix".into(),
            ))
        })
    }

    /// Called after each discovery with the files the stream will plan (`taken`): every
    /// other file the last listing gave is already owned (ingested, in an unfinished
    /// plan) or left out by the stream, so a queue source deletes their messages here.
    fn discovered<'a>(&'a self, _taken: &'a [FileRef]) -> BoxFuture<'a, Result<(), SourceError>> {
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
    fn resume(&self, _saved: Option<&str>) -> Result<(), SourceError> {
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

/// A Delta table given as loose files: refused, since reading a table's Parquet files
/// would bring back rows it has removed.
pub(crate) fn table_as_files(source: &str) -> SourceError {
    SourceError::Usage(format!(
        "source {source} is a Delta table (it holds a _delta_log/): its files are never read \
         as loose files, which would bring removed rows back; set source_format = \"delta\" \
         (--source-format delta) to read it incrementally"
    ))
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
pub(crate) fn is_under(key: &str, prefix: &str) -> bool {
    key.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

pub(crate) fn accept(f: &FileRef, s: &Settings, grace_ms: i64) -> bool {
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

/// What cleaning a file found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleaned {
    /// Deleted, or moved to the destination.
    Done,
    /// Not there any more (cleaned before a restart, or removed by someone else).
    Gone,
    /// Another file is there now (replaced since it was ingested): left alone.
    Replaced,
}

/// What became of the messages received since the last [`FileSource::queue_tally`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueTally {
    /// Messages received (a redelivery counts again).
    pub received: u64,
    /// Deleted once a plan owned their files.
    pub planned: u64,
    /// Deleted: their files were already ingested, planned, or left out by the stream.
    pub already_taken: u64,
    /// Deleted: `s3:TestEvent`.
    pub test_events: u64,
    /// Deleted: another bucket, outside the prefix, or a hidden or temporary name.
    pub outside_source: u64,
    /// Deleted: the name does not match `pathGlobFilter`.
    pub filtered: u64,
    /// Deleted: older than `cloudFiles.maxFileAge` by the event's time.
    pub too_old: u64,
    /// Deleted: not an `ObjectCreated` event.
    pub not_created: u64,
    /// Left in the queue (its redrive policy moves them to the dead-letter queue).
    pub left: Vec<LeftMessage>,
}

impl QueueTally {
    /// Messages deleted without a plan of their own.
    pub fn skipped(&self) -> u64 {
        self.already_taken
            + self.test_events
            + self.outside_source
            + self.filtered
            + self.too_old
            + self.not_created
    }

    pub fn is_empty(&self) -> bool {
        *self == QueueTally::default()
    }
}

/// A message not deleted, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftMessage {
    pub message_id: String,
    /// How often the queue has handed it out (`ApproximateReceiveCount`).
    pub receive_count: u64,
    /// `unparseable` or `missing_object`.
    pub reason: &'static str,
    /// What is wrong, naming the object when there is one.
    pub detail: String,
}

/// A file's modification time in milliseconds since the epoch (0 when unknown).
pub(crate) fn mtime_ms(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
