//! An S3 (or S3-compatible) prefix; credentials and endpoint from the standard AWS
//! environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
//! `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`). An object is complete once it is listed.

use std::sync::Arc;

use futures::future::BoxFuture;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use url::Url;

use super::{FileLocation, FileRef, FileSource, Overlap, SourceError, is_hidden, overlap_of_paths};
use crate::location::Location;
use std::path::PathBuf;

use crate::storage::object_dir::{RemoteError, s3_store};
use crate::storage::{RemoteObject, StorageSettings, explain_s3_failure, has_s3_credentials};

/// How far before `modifiedAfter` an object-store file is still taken: S3 times have
/// second precision and mark when an upload started, so a file written across the boundary
/// must not be lost (the ingested-file index keeps it from being taken twice).
pub(super) const OBJECT_STORE_GRACE_MS: i64 = 2_000;

/// The objects under an S3 prefix.
#[derive(Debug, Clone)]
pub struct S3Prefix {
    /// `s3://bucket/prefix/`, for display and lineage.
    url: String,
    store: Arc<dyn ObjectStore>,
    bucket: String,
    prefix: ObjectPath,
    /// Where objects are fetched to before they are decoded.
    fetch_dir: PathBuf,
    /// Whether the configuration gave credentials (see [`explain_s3_failure`]).
    credentials_given: bool,
}

impl S3Prefix {
    /// Opens `s3://bucket/prefix` (nothing is read yet).
    pub fn open(location: &Url, storage: &StorageSettings) -> Result<S3Prefix, SourceError> {
        let arg = location.as_str();
        let (store, bucket, prefix) = s3_store(arg, &storage.s3).map_err(|e| match e {
            RemoteError::Invalid { reason, .. } => SourceError::InvalidS3 {
                url: arg.to_string(),
                reason,
            },
            RemoteError::Store { reason, .. } => SourceError::ObjectStore {
                url: arg.to_string(),
                reason,
            },
        })?;
        let url = if prefix.as_ref().is_empty() {
            format!("s3://{bucket}/")
        } else {
            format!("s3://{bucket}/{prefix}/")
        };
        Ok(S3Prefix {
            url,
            store,
            bucket,
            prefix,
            fetch_dir: storage.temp_dir.clone(),
            credentials_given: has_s3_credentials(&storage.s3),
        })
    }
}

impl S3Prefix {
    /// The bucket.
    pub(super) fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The key prefix (`""`: the bucket's root), without a trailing `/`.
    pub(super) fn prefix(&self) -> &str {
        self.prefix.as_ref()
    }

    /// A key's size and time as a listing gives them (so a file found by an event and by
    /// a listing is one file), or `None` when the object does not exist.
    pub(super) async fn head(&self, key: &str) -> Result<Option<FileRef>, SourceError> {
        let FileLocation::Object(object) = self.locate(key) else {
            unreachable!("an S3 key is an object")
        };
        match object_store::ObjectStoreExt::head(self.store.as_ref(), &object.location).await {
            Ok(meta) => Ok(Some(FileRef {
                key: key.to_string(),
                size: meta.size,
                mtime_ms: meta.last_modified.timestamp_millis(),
            })),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(SourceError::ObjectStore {
                url: self.uri(key),
                reason: explain_s3_failure(self.credentials_given, e.to_string()),
            }),
        }
    }
}

impl FileSource for S3Prefix {
    fn describe(&self) -> String {
        self.url.clone()
    }

    fn uri(&self, key: &str) -> String {
        format!("{}{key}", self.url)
    }

    fn locate(&self, key: &str) -> FileLocation {
        let location = if self.prefix.as_ref().is_empty() {
            crate::storage::object_path(key)
        } else {
            crate::storage::object_path(&format!("{}/{key}", self.prefix))
        };
        FileLocation::Object(RemoteObject {
            store: Arc::clone(&self.store),
            location,
            handle: tokio::runtime::Handle::try_current().ok(),
            fetch_dir: self.fetch_dir.clone(),
        })
    }

    fn list_files<'a>(
        &'a self,
        after: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<FileRef>, SourceError>> {
        Box::pin(async move {
            list_object_store(&self.url, self.store.as_ref(), &self.prefix, after)
                .await
                .map_err(|e| match e {
                    // A missing bucket is a wrong argument, as a missing local folder is.
                    SourceError::ObjectStore { url, reason }
                        if crate::storage::s3_error_code(&reason)
                            .is_some_and(|(code, _)| code == "NoSuchBucket") =>
                    {
                        SourceError::Usage(format!(
                            "source {url}: the bucket {} does not exist",
                            self.bucket
                        ))
                    }
                    SourceError::ObjectStore { url, reason } => SourceError::ObjectStore {
                        url,
                        reason: explain_s3_failure(self.credentials_given, reason),
                    },
                    other => other,
                })
        })
    }

    fn lists_incrementally(&self) -> bool {
        true
    }

    fn complete_when_listed(&self) -> bool {
        true
    }

    fn modified_after_grace_ms(&self) -> i64 {
        OBJECT_STORE_GRACE_MS
    }

    fn clean<'a>(
        &'a self,
        file: &'a FileRef,
        action: &'a crate::options::CleanAction,
    ) -> BoxFuture<'a, Result<super::Cleaned, SourceError>> {
        Box::pin(super::clean::s3(
            self.store.as_ref(),
            &self.bucket,
            &self.prefix,
            file,
            action,
        ))
    }

    fn overlap(&self, location: &Location) -> Overlap {
        match location {
            Location::S3(url) if url.host_str() == Some(self.bucket.as_str()) => {
                overlap_of_paths(self.prefix.as_ref(), url.path().trim_matches('/'))
            }
            _ => Overlap::Apart,
        }
    }
}

/// Lists objects under a prefix: paginated and streamed by object_store, keyed relative to
/// the prefix, hidden and temporary names skipped.
async fn list_object_store(
    url: &str,
    store: &dyn ObjectStore,
    prefix: &ObjectPath,
    after: Option<&str>,
) -> Result<Vec<FileRef>, SourceError> {
    use futures::StreamExt;
    let mut out = Vec::new();
    let base = if prefix.as_ref().is_empty() {
        String::new()
    } else {
        format!("{prefix}/")
    };
    let mut stream = match after {
        Some(key) => store.list_with_offset(
            Some(prefix),
            &crate::storage::object_path(&format!("{base}{key}")),
        ),
        None => store.list(Some(prefix)),
    };
    while let Some(item) = stream.next().await {
        let meta = item.map_err(|e| SourceError::ObjectStore {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
        let full = meta.location.to_string();
        let Some(key) = full.strip_prefix(&base) else {
            continue;
        };
        if key.starts_with("_delta_log/") {
            return Err(super::table_as_files(url));
        }
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
