//! The object store a local Delta table is read and written through: object_store's
//! `LocalFileSystem`, with a cheaper listing from an offset.
//!
//! delta-rs and its kernel list `_delta_log` from an offset (the commits after a version)
//! several times a batch. `LocalFileSystem` walks the folder and turns every entry into an
//! object path before it compares it with the offset, so each listing cost time in the
//! number of versions the table has: at 5,000 versions that path work was most of a
//! one-file batch's CPU, and a watcher slowed batch after batch. Here a flat folder is read
//! by name, compared with the offset as text, and only the entries past it are stat'ed.
//! Anything else (a subfolder, a name an object path would encode) is left to
//! `LocalFileSystem`'s own walk, so the results are the same.
//!
//! Every file operation of `LocalFileSystem` is a task on tokio's blocking pool, and
//! delta-kernel reads the commits of a log replay up to 1,000 at a time: the pool grew a
//! thread for each commit read at once, and a watcher kept them all (tokio wakes its idle
//! threads in turn, so none lives out its keep-alive). Each thread holds its own glibc
//! cache of freed chunks (up to 7 of each size to 1 KiB) and its stack pages, so a
//! watcher's memory stepped up with every new high of concurrent reads (73 to 86 threads
//! between 21,000 and 24,000 one-file batches). Operations here wait for one of
//! [`IO_SLOTS`]'s permits instead, shared by every local table of the process; waiting
//! for a permit holds no thread.

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use bytes::Bytes;
use deltalake::DeltaResult;
use deltalake::kernel::Version;
use deltalake::kernel::transaction::TransactionError;
use deltalake::logstore::{
    CommitOrBytes, LogStore, LogStoreConfig, LogStoreRef, commit_uri_from_version,
};
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::ObjectStoreExt as _;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};
use tokio::sync::{Semaphore, SemaphorePermit};
use uuid::Uuid;

/// File operations on local tables at once, process-wide: two per core, at least 8.
/// Reading small files from a local disk gains nothing from more.
static IO_SLOTS: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(io_slots()));

fn io_slots() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (2 * cores).max(8)
}

/// Deletes a delete stream keeps in flight, as `LocalFileSystem` does; each also waits
/// for a slot.
const DELETES_AT_ONCE: usize = 10;

/// A read this small is done under its permit and handed back as bytes; a larger one
/// is left to the caller's own (chunked) reads of the open file.
const READ_WHOLE_BYTES: u64 = 8 << 20;

async fn io_slot() -> SemaphorePermit<'static> {
    IO_SLOTS
        .acquire()
        .await
        .expect("the local table I/O semaphore is never closed")
}

/// `LocalFileSystem` rooted at `/`, as delta-rs builds it for a `file://` table.
#[derive(Debug)]
pub struct LocalTableStore {
    inner: Arc<LocalFileSystem>,
}

impl LocalTableStore {
    pub fn new() -> Self {
        Self {
            inner: Arc::new(LocalFileSystem::new()),
        }
    }
}

impl Default for LocalTableStore {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for LocalTableStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LocalTableStore({})", self.inner)
    }
}

/// The entries of the flat folder `prefix` past `offset`, or `None` when the folder is not
/// one this listing can answer exactly (it holds a subfolder or a link, or a name an object
/// path would spell differently).
fn flat_listing(
    inner: &LocalFileSystem,
    prefix: &Path,
    offset: &Path,
) -> Result<Option<Vec<ObjectMeta>>> {
    let io = |source: std::io::Error| object_store::Error::Generic {
        store: "LocalFileSystem",
        source: Box::new(source),
    };
    let dir = inner.path_to_filesystem(prefix)?;
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Some(Vec::new())),
        Err(_) => return Ok(None),
    };
    let offset = offset.as_ref();
    // `prefix/name` against the offset, by the name alone when the offset is inside this
    // folder (no path built for each of the folder's entries, most of them before it).
    let folder = format!("{}/", prefix.as_ref());
    let offset_name = offset.strip_prefix(folder.as_str());
    let past_offset = |name: &str| match offset_name {
        Some(after) => name > after,
        None => format!("{folder}{name}").as_str() > offset,
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Ok(None);
        };
        // An upload in progress (`name#1`), which LocalFileSystem never lists either.
        if let Some((_, suffix)) = name.split_once('#')
            && !suffix.is_empty()
            && suffix.bytes().all(|b| b.is_ascii_digit())
        {
            continue;
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-=".contains(&b))
        {
            return Ok(None);
        }
        let kind = entry.file_type().map_err(io)?;
        if !kind.is_file() {
            return Ok(None);
        }
        if !past_offset(name) {
            continue;
        }
        let location = format!("{folder}{name}");
        let meta = match entry.metadata() {
            Ok(meta) => meta,
            // Deleted since the folder was read (a log cleanup).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(e)),
        };
        let modified = meta.modified().map_err(io)?;
        found.push(ObjectMeta {
            location: Path::parse(&location)?,
            last_modified: modified.into(),
            size: meta.len(),
            e_tag: Some(etag(&meta, modified)),
            version: None,
        });
    }
    Ok(Some(found))
}

/// The e-tag `LocalFileSystem` gives the same file (inode, mtime, size).
fn etag(meta: &std::fs::Metadata, modified: std::time::SystemTime) -> String {
    use std::os::unix::fs::MetadataExt;
    let mtime = modified
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    format!("{:x}-{mtime:x}-{:x}", meta.ino(), meta.len())
}

#[async_trait]
impl ObjectStore for LocalTableStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let _slot = io_slot().await;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let _slot = io_slot().await;
        let head = options.head;
        let got = self.inner.get_opts(location, options).await?;
        if head
            || !matches!(got.payload, GetResultPayload::File(..))
            || got.range.end - got.range.start > READ_WHOLE_BYTES
        {
            return Ok(got);
        }
        let (meta, range, attributes) =
            (got.meta.clone(), got.range.clone(), got.attributes.clone());
        let bytes = got.bytes().await?;
        Ok(GetResult {
            payload: GetResultPayload::Stream(futures::stream::once(async { Ok(bytes) }).boxed()),
            meta,
            range,
            attributes,
        })
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let _slot = io_slot().await;
        self.inner.get_ranges(location, ranges).await
    }

    /// Each delete under a slot: a log cleanup deletes hundreds of expired commits, which
    /// `LocalFileSystem` does ten at a time, each on a blocking thread of its own.
    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let inner = Arc::clone(&self.inner);
        locations
            .map(move |location| {
                let inner = Arc::clone(&inner);
                async move {
                    let location = location?;
                    let _slot = io_slot().await;
                    let one = futures::stream::once(async { Ok(location) }).boxed();
                    inner.delete_stream(one).next().await.unwrap_or_else(|| {
                        Err(object_store::Error::Generic {
                            store: "LocalFileSystem",
                            source: "a delete went unanswered".into(),
                        })
                    })
                }
            })
            .buffered(DELETES_AT_ONCE)
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let Some(prefix) = prefix.cloned() else {
            return self.inner.list_with_offset(None, offset);
        };
        let (inner, offset) = (Arc::clone(&self.inner), offset.clone());
        futures::stream::once(async move {
            let slot = io_slot().await;
            let (store, p, o) = (Arc::clone(&inner), prefix.clone(), offset.clone());
            let listed = tokio::task::spawn_blocking(move || flat_listing(&store, &p, &o)).await;
            drop(slot);
            match listed {
                Ok(Ok(Some(found))) => futures::stream::iter(found.into_iter().map(Ok)).boxed(),
                Ok(Err(e)) => futures::stream::once(async move { Err(e) }).boxed(),
                Ok(Ok(None)) | Err(_) => inner.list_with_offset(Some(&prefix), &offset),
            }
        })
        .flatten()
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let _slot = io_slot().await;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        let _slot = io_slot().await;
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        let _slot = io_slot().await;
        self.inner.rename_opts(from, to, options).await
    }
}

/// The log store of a local table: delta-rs' own, except for the latest version.
///
/// Before every commit delta-rs asks for the table's latest version, to check the commits
/// made since its snapshot for conflicts, and its answer lists `_delta_log` whole: the
/// folder holds a file per version (logs are kept 30 days), so a commit cost time in the
/// table's age (about 2 ms a listing at 5,000 versions on ext4, read twice a batch by a
/// CDC flow). Commits are numbered without gaps, so the latest version is found by asking
/// for the next commit files one by one, as many reads as there are new commits.
#[derive(Debug)]
pub struct LocalLogStore {
    inner: LogStoreRef,
}

impl LocalLogStore {
    pub fn new(inner: LogStoreRef) -> Self {
        Self { inner }
    }

    async fn has_commit(&self, version: Version) -> DeltaResult<bool> {
        let store = self.inner.object_store(None);
        match store.head(&commit_uri_from_version(Some(version))).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

#[async_trait]
impl LogStore for LocalLogStore {
    // delta-rs hands a default store's commits over as bytes (no temporary file), by name.
    fn name(&self) -> String {
        self.inner.name()
    }

    async fn refresh(&self) -> DeltaResult<()> {
        self.inner.refresh().await
    }

    async fn read_commit_entry(&self, version: Version) -> DeltaResult<Option<Bytes>> {
        self.inner.read_commit_entry(version).await
    }

    async fn write_commit_entry(
        &self,
        version: Version,
        commit_or_bytes: CommitOrBytes,
        operation_id: Uuid,
    ) -> std::result::Result<(), TransactionError> {
        self.inner
            .write_commit_entry(version, commit_or_bytes, operation_id)
            .await
    }

    async fn abort_commit_entry(
        &self,
        version: Version,
        commit_or_bytes: CommitOrBytes,
        operation_id: Uuid,
    ) -> std::result::Result<(), TransactionError> {
        self.inner
            .abort_commit_entry(version, commit_or_bytes, operation_id)
            .await
    }

    async fn get_latest_version(&self, start_version: Version) -> DeltaResult<Version> {
        // A start with no commit file (cleaned up, or no table): delta-rs' listing, and
        // its errors.
        if !self.has_commit(start_version).await? {
            return self.inner.get_latest_version(start_version).await;
        }
        let mut latest = start_version;
        while self.has_commit(latest + 1).await? {
            latest += 1;
        }
        Ok(latest)
    }

    fn object_store(&self, operation_id: Option<Uuid>) -> Arc<dyn ObjectStore> {
        self.inner.object_store(operation_id)
    }

    fn root_object_store(&self, operation_id: Option<Uuid>) -> Arc<dyn ObjectStore> {
        self.inner.root_object_store(operation_id)
    }

    fn config(&self) -> &LogStoreConfig {
        self.inner.config()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads of many commits at once (delta-kernel asks for up to 1,000), and a cleanup's
    /// deletes, wait for a slot instead of growing tokio's blocking pool a thread per file,
    /// and read and delete the same files.
    #[test]
    fn many_reads_at_once_use_few_threads_and_read_the_right_bytes() {
        use futures::TryStreamExt;
        const NAME: &str = "lts-read-test";
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(NAME)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        for v in 0..300u64 {
            std::fs::write(
                dir.path().join(format!("{v:020}.json")),
                format!("{{\"v\":{v}}}"),
            )
            .unwrap();
        }
        let prefix = Path::from_absolute_path(dir.path()).unwrap();
        let store = Arc::new(LocalTableStore::new());
        let texts: Vec<String> = runtime.block_on(async {
            futures::stream::iter(0..300u64)
                .map(|v| {
                    let (store, path) = (
                        Arc::clone(&store),
                        prefix.clone().join(format!("{v:020}.json")),
                    );
                    async move {
                        let got = store.get_opts(&path, GetOptions::default()).await?;
                        let bytes = got.bytes().await?;
                        Ok::<_, object_store::Error>(String::from_utf8(bytes.to_vec()).unwrap())
                    }
                })
                .buffered(1000)
                .try_collect()
                .await
                .unwrap()
        });
        for (v, text) in texts.iter().enumerate() {
            assert_eq!(text, &format!("{{\"v\":{v}}}"));
        }
        // A log cleanup's deletes: every file gone, each reported once.
        let mut deleted: Vec<String> = runtime.block_on(async {
            let paths: Vec<Result<Path>> = (0..300u64)
                .filter(|v| v % 3 != 0)
                .map(|v| Ok(prefix.clone().join(format!("{v:020}.json"))))
                .collect();
            store
                .delete_stream(futures::stream::iter(paths).boxed())
                .map_ok(|p| p.to_string())
                .try_collect()
                .await
                .unwrap()
        });
        assert_eq!(deleted.len(), 200);
        deleted.sort();
        deleted.dedup();
        assert_eq!(deleted.len(), 200, "a delete reported twice");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 100);
        // A range is read as asked.
        let path = prefix.clone().join(format!("{:020}.json", 123));
        let got = runtime.block_on(async {
            let opts = GetOptions {
                range: Some((2..5).into()),
                ..GetOptions::default()
            };
            store
                .get_opts(&path, opts)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
        });
        assert_eq!(&got[..], b"v\":");
        // A head request answers the file's size without reading it.
        let head = runtime.block_on(async {
            let opts = GetOptions {
                head: true,
                ..GetOptions::default()
            };
            let got = store.get_opts(&path, opts).await.unwrap();
            assert!(matches!(got.payload, GetResultPayload::File(..)));
            got.meta
        });
        assert_eq!(head.size, 9);
        let threads = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter(|t| {
                let comm = t.as_ref().unwrap().path().join("comm");
                std::fs::read_to_string(comm).is_ok_and(|c| c.trim() == NAME)
            })
            .count();
        // A read is two blocking tasks in a row (open, then read), and a thread that just
        // finished one may not be idle yet when the next is handed out: some slack (28 to
        // 47 threads with 8 slots on the 2-core machine, against about 160 without them).
        let slots = io_slots();
        assert!(
            threads <= 2 + 8 * slots,
            "{threads} runtime threads after 300 reads at once, with {slots} I/O slots"
        );
    }

    /// The same entries as LocalFileSystem's own walk, for offsets before, inside and
    /// after the folder's names; and the fallback for a folder with a subfolder.
    #[tokio::test]
    async fn lists_what_local_file_system_lists() {
        use futures::TryStreamExt;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("_delta_log");
        std::fs::create_dir(&log).unwrap();
        for v in 0..30u64 {
            std::fs::write(log.join(format!("{v:020}.json")), b"{}").unwrap();
        }
        std::fs::write(log.join(format!("{:020}.checkpoint.parquet", 9)), b"x").unwrap();
        std::fs::write(log.join("_last_checkpoint"), b"{}").unwrap();
        std::fs::write(log.join(format!("{:020}.json#1", 30)), b"{}").unwrap();
        let ours = LocalTableStore::new();
        let theirs = LocalFileSystem::new();
        let prefix = Path::from_absolute_path(&log).unwrap();
        let listed = |store: &dyn ObjectStore, offset: &Path| {
            let stream = store.list_with_offset(Some(&prefix), offset);
            async move {
                let mut got: Vec<(String, u64, Option<String>)> = stream
                    .map_ok(|m| (m.location.to_string(), m.size, m.e_tag))
                    .try_collect()
                    .await
                    .unwrap();
                got.sort();
                got
            }
        };
        for offset in [
            prefix.clone(),
            prefix.clone().join(format!("{:020}.json", 0)),
            prefix.clone().join(format!("{:020}", 9)),
            prefix.clone().join(format!("{:020}.json", 17)),
            prefix.clone().join(format!("{:020}.json", 40)),
        ] {
            let want = listed(&theirs, &offset).await;
            assert_eq!(listed(&ours, &offset).await, want, "from {offset}");
        }
        assert_eq!(
            listed(&ours, &prefix.clone().join(format!("{:020}.json", 17)))
                .await
                .len(),
            13
        );
        // A subfolder: LocalFileSystem's walk answers, entries inside it included.
        std::fs::create_dir(log.join("_commits")).unwrap();
        std::fs::write(log.join("_commits").join("a.json"), b"{}").unwrap();
        let offset = prefix.clone().join(format!("{:020}.json", 25));
        let got = listed(&ours, &offset).await;
        assert_eq!(got, listed(&theirs, &offset).await);
        assert!(
            got.iter().any(|(p, ..)| p.ends_with("_commits/a.json")),
            "{got:?}"
        );
    }

    /// The latest version as delta-rs' own listing finds it: from every start, with
    /// commits another handle made since, and delta-rs' error for a start with no commit.
    #[tokio::test]
    async fn latest_version_is_the_one_the_listing_finds() {
        use crate::location::Location;
        use crate::storage::StorageSettings;
        use crate::target::delta::DeltaAppend;
        let dir = tempfile::tempdir().unwrap();
        let location = Location::Local(dir.path().to_path_buf());
        let storage = StorageSettings::local(dir.path().join("cache"));
        let schema = Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
            "id",
            arrow_schema::DataType::Int64,
            false,
        )]));
        let mut table = DeltaAppend::open(&location, &storage).await.unwrap();
        table.ensure_created(&schema, "test").await.unwrap();
        for n in 0..4 {
            table
                .commit_record(serde_json::json!({ "n": n }))
                .await
                .unwrap();
        }
        let ours = table.table().log_store();
        assert!(ours.any_ref().downcast_ref::<LocalLogStore>().is_some());
        let url = url::Url::from_directory_path(dir.path().canonicalize().unwrap()).unwrap();
        let theirs = deltalake::DeltaTableBuilder::from_url(url)
            .unwrap()
            .build_storage()
            .unwrap();
        for start in 0..5 {
            assert_eq!(
                ours.get_latest_version(start).await.unwrap(),
                4,
                "from {start}"
            );
            assert_eq!(theirs.get_latest_version(start).await.unwrap(), 4);
        }
        // Commits by another handle are seen, the first handle's snapshot notwithstanding,
        // and its next commit lands after them.
        let mut other = DeltaAppend::open(&location, &storage).await.unwrap();
        for n in 0..3 {
            other
                .commit_record(serde_json::json!({ "other": n }))
                .await
                .unwrap();
        }
        assert_eq!(ours.get_latest_version(2).await.unwrap(), 7);
        assert_eq!(
            table
                .commit_record(serde_json::json!({ "n": 4 }))
                .await
                .unwrap(),
            8
        );
        // No commit at the start: delta-rs' answer, an error in both.
        assert!(ours.get_latest_version(40).await.is_err());
        assert!(theirs.get_latest_version(40).await.is_err());
    }
}
