//! A folder on an object store (S3) holding small state objects: a checkpoint's plans and
//! commits, a schema location's `_schemas/N`. Writes that must never be repeated are
//! create-only puts (S3 conditional writes, `If-None-Match: *`), so two writers cannot both
//! believe they wrote the same plan or schema version.
//!
//! The calls are blocking: checkpoint and schema-store operations are short, rare (a few per
//! batch) and called from synchronous code. Each runs on the state runtime the edge hands
//! in ([`super::StorageSettings::io`]) from a scoped thread, so it works from inside or
//! outside an async context alike.

use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use url::Url;

use super::{StorageSettings, check_s3_settings, explain_s3_failure, has_s3_credentials};

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("cannot use {url}: {reason}")]
    Invalid { url: String, reason: String },
    #[error("{url}: {reason}")]
    Store { url: String, reason: String },
}

/// An S3 store for `url`'s bucket, configured with `config` (credentials, region,
/// endpoint: see [`super::StorageSettings::s3`]), and the prefix `url` names inside it.
pub fn s3_store(
    url: &str,
    config: &[(String, String)],
) -> Result<(Arc<dyn ObjectStore>, String, ObjectPath), RemoteError> {
    let invalid = |reason: String| RemoteError::Invalid {
        url: url.to_string(),
        reason,
    };
    check_s3_settings(config).map_err(|e| invalid(e.to_string()))?;
    let parsed = Url::parse(url).map_err(|e| invalid(e.to_string()))?;
    let bucket = parsed
        .host_str()
        .filter(|b| !b.is_empty())
        .ok_or_else(|| invalid("no bucket".into()))?
        .to_string();
    let mut builder = object_store::aws::AmazonS3Builder::new();
    for (key, value) in config {
        if let Ok(key) = key
            .to_ascii_lowercase()
            .parse::<object_store::aws::AmazonS3ConfigKey>()
        {
            builder = builder.with_config(key, value);
        }
    }
    let store = builder
        .with_bucket_name(&bucket)
        .build()
        .map_err(|e| invalid(e.to_string()))?;
    // The URL's path is percent-encoded (`s3://lake/land/주문` is `land/%EC%A3%BC...`).
    let prefix = ObjectPath::from_url_path(parsed.path().trim_matches('/'))
        .map_err(|e| invalid(e.to_string()))?;
    Ok((Arc::new(store), bucket, prefix))
}

/// A folder of small objects under an S3 prefix.
#[derive(Clone)]
pub struct RemoteDir {
    url: String,
    io: tokio::runtime::Handle,
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    /// Whether the configuration gave credentials (see [`explain_s3_failure`]).
    credentials_given: bool,
}

impl std::fmt::Debug for RemoteDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteDir").field("url", &self.url).finish()
    }
}

impl RemoteDir {
    /// Opens `s3://bucket/prefix` (nothing is read yet).
    pub fn open(url: &Url, state: &StorageSettings) -> Result<RemoteDir, RemoteError> {
        let url = url.as_str();
        let io = state.io.clone().ok_or_else(|| RemoteError::Invalid {
            url: url.to_string(),
            reason: "no runtime was given for S3 state I/O".into(),
        })?;
        let (store, bucket, prefix) = s3_store(url, &state.s3)?;
        let shown = if prefix.as_ref().is_empty() {
            format!("s3://{bucket}")
        } else {
            format!("s3://{bucket}/{prefix}")
        };
        Ok(RemoteDir {
            url: shown,
            io,
            store,
            prefix,
            credentials_given: has_s3_credentials(&state.s3),
        })
    }

    /// `s3://bucket/prefix`, for messages.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL of one object, for messages.
    pub fn url_of(&self, name: &str) -> String {
        format!("{}/{name}", self.url)
    }

    fn path(&self, name: &str) -> ObjectPath {
        if self.prefix.as_ref().is_empty() {
            ObjectPath::from(name)
        } else {
            ObjectPath::from(format!("{}/{name}", self.prefix))
        }
    }

    fn err(&self, name: &str, e: impl std::fmt::Display) -> RemoteError {
        RemoteError::Store {
            url: self.url_of(name),
            reason: explain_s3_failure(self.credentials_given, e.to_string()),
        }
    }

    /// Runs `fut` to completion on the state runtime, from a scoped thread so that no
    /// caller's runtime is blocked or re-entered.
    fn block<T: Send>(&self, fut: impl std::future::Future<Output = T> + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| self.io.block_on(fut))
                .join()
                .expect("state I/O thread does not panic")
        })
    }

    /// The object's bytes, or `None` when it does not exist.
    pub fn get(&self, name: &str) -> Result<Option<Vec<u8>>, RemoteError> {
        let path = self.path(name);
        let store = &self.store;
        let result = self.block(async move {
            match store.get(&path).await {
                Ok(r) => r.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        });
        result
            .map(|b| b.map(|b| b.to_vec()))
            .map_err(|e| self.err(name, e))
    }

    /// Writes the object only if it does not exist. `Ok(false)`: it already existed.
    pub fn put_new(&self, name: &str, bytes: Vec<u8>) -> Result<bool, RemoteError> {
        let path = self.path(name);
        let store = &self.store;
        let opts = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        let result =
            self.block(async move { store.put_opts(&path, PutPayload::from(bytes), opts).await });
        match result {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(self.err(name, e)),
        }
    }

    /// Writes (or replaces) the object.
    pub fn put(&self, name: &str, bytes: Vec<u8>) -> Result<(), RemoteError> {
        let path = self.path(name);
        let store = &self.store;
        self.block(async move { store.put(&path, PutPayload::from(bytes)).await })
            .map(|_| ())
            .map_err(|e| self.err(name, e))
    }

    /// Deletes the object (absent is fine).
    pub fn delete(&self, name: &str) -> Result<(), RemoteError> {
        let path = self.path(name);
        let store = &self.store;
        match self.block(async move { store.delete(&path).await }) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.err(name, e)),
        }
    }

    /// Names of the folders (common prefixes) directly under this one, ascending.
    pub fn subdirs(&self) -> Result<Vec<String>, RemoteError> {
        let prefix = self.prefix.clone();
        let store = &self.store;
        let listed = self.block(async move {
            store
                .list_with_delimiter((!prefix.as_ref().is_empty()).then_some(&prefix))
                .await
        });
        let listed = listed.map_err(|e| self.err("", e))?;
        let mut names: Vec<String> = listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Names of the objects directly under `dir` whose name sorts after `after`, ascending.
    /// Listing starts after `after` on the server, so a long history is not re-read.
    pub fn list(&self, dir: &str, after: Option<&str>) -> Result<Vec<String>, RemoteError> {
        use futures::StreamExt;
        let prefix = self.path(dir);
        let offset = after.map(|a| self.path(&format!("{dir}/{a}")));
        let store = &self.store;
        let base = format!("{prefix}/");
        let result = self.block(async move {
            let mut stream = match &offset {
                Some(o) => store.list_with_offset(Some(&prefix), o),
                None => store.list(Some(&prefix)),
            };
            let mut names = Vec::new();
            while let Some(item) = stream.next().await {
                let meta = item?;
                let full = meta.location.to_string();
                if let Some(name) = full.strip_prefix(&base).filter(|n| !n.contains('/')) {
                    names.push(name.to_string());
                }
            }
            Ok::<_, object_store::Error>(names)
        });
        let mut names = result.map_err(|e| self.err(dir, e))?;
        names.sort();
        Ok(names)
    }
}
