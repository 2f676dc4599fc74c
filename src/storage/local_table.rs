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

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

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
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
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
            let (store, p, o) = (Arc::clone(&inner), prefix.clone(), offset.clone());
            let listed = tokio::task::spawn_blocking(move || flat_listing(&store, &p, &o)).await;
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
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
