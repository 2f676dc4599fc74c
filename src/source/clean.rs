//! `cloudFiles.cleanSource`: an ingested file deleted, or moved out of the source, once
//! its rows are committed (`pipeline/clean.rs` decides when). Only the file that was
//! ingested is cleaned: one replaced since (another size or modification time) is left,
//! so a file not yet ingested is never touched.

use crate::source::Cleaned;
use std::path::Path;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

use super::{FileRef, SourceError};
use crate::location::Location;
use crate::options::CleanAction;

fn io_err(path: &Path, source: std::io::Error) -> SourceError {
    SourceError::Clean {
        path: path.to_path_buf(),
        source,
    }
}

/// Cleans `file` of the local folder `root`.
pub(super) fn local(
    root: &Path,
    file: &FileRef,
    action: &CleanAction,
) -> Result<Cleaned, SourceError> {
    let path = root.join(&file.key);
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Cleaned::Gone),
        Err(e) => return Err(io_err(&path, e)),
    };
    if meta.len() != file.size || super::mtime_ms(&meta) != file.mtime_ms {
        return Ok(Cleaned::Replaced);
    }
    match action {
        CleanAction::Delete => match std::fs::remove_file(&path) {
            Ok(()) => Ok(Cleaned::Done),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Cleaned::Gone),
            Err(e) => Err(io_err(&path, e)),
        },
        CleanAction::Move(destination) => {
            let Some(dir) = destination.as_local() else {
                return Err(SourceError::Usage(format!(
                    "cloudFiles.cleanSource.moveDestination {destination} is not a local folder, \
                     as the source is"
                )));
            };
            let target = dir.join(&file.key);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
            }
            match std::fs::rename(&path, &target) {
                Ok(()) => Ok(Cleaned::Done),
                Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => {
                    // Another file system: a copy under a temporary name, renamed into
                    // place, then the source removed (a kill leaves at most a spare copy).
                    let partial = target.with_extension("cleaning.tmp");
                    std::fs::copy(&path, &partial).map_err(|e| io_err(&partial, e))?;
                    std::fs::rename(&partial, &target).map_err(|e| io_err(&target, e))?;
                    std::fs::remove_file(&path).map_err(|e| io_err(&path, e))?;
                    Ok(Cleaned::Done)
                }
                Err(e) => Err(io_err(&path, e)),
            }
        }
    }
}

/// Cleans `file` of the S3 prefix `prefix` of `bucket`. A move copies within the bucket,
/// then deletes.
pub(super) async fn s3(
    store: &dyn ObjectStore,
    bucket: &str,
    prefix: &ObjectPath,
    file: &FileRef,
    action: &CleanAction,
) -> Result<Cleaned, SourceError> {
    let under = |p: &str, key: &str| {
        if p.is_empty() {
            crate::storage::object_path(key)
        } else {
            crate::storage::object_path(&format!("{p}/{key}"))
        }
    };
    let source = under(prefix.as_ref(), &file.key);
    let err = |reason: String| SourceError::ObjectStore {
        url: format!("s3://{bucket}/{source}"),
        reason,
    };
    let meta = match store.head(&source).await {
        Ok(m) => m,
        Err(object_store::Error::NotFound { .. }) => return Ok(Cleaned::Gone),
        Err(e) => return Err(err(e.to_string())),
    };
    if meta.size != file.size || meta.last_modified.timestamp_millis() != file.mtime_ms {
        return Ok(Cleaned::Replaced);
    }
    if let CleanAction::Move(destination) = action {
        let Location::S3(url) = destination else {
            return Err(SourceError::Usage(format!(
                "cloudFiles.cleanSource.moveDestination {destination} is not on S3, as the source is"
            )));
        };
        if url.host_str() != Some(bucket) {
            return Err(SourceError::Usage(format!(
                "cloudFiles.cleanSource.moveDestination {destination} is in another bucket than \
                 the source (s3://{bucket}/): files are moved by a copy within the bucket"
            )));
        }
        let target = under(url.path().trim_matches('/'), &file.key);
        store
            .copy(&source, &target)
            .await
            .map_err(|e| err(format!("copying to {target}: {e}")))?;
    }
    match store.delete(&source).await {
        Ok(()) => Ok(Cleaned::Done),
        Err(object_store::Error::NotFound { .. }) => Ok(Cleaned::Gone),
        Err(e) => Err(err(e.to_string())),
    }
}
