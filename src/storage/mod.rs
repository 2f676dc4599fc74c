//! Storage below the pipeline: durable writes of small state files (create-only local
//! writes, a folder of objects on S3 with create-only puts), and objects to fetch.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;

pub mod atomic;
pub mod local_table;
pub mod object_dir;

/// The object path of an S3 key as S3 holds it. object_store's `Path::from` percent-encodes
/// what it takes for unsafe (`%`, `{`, every non-ASCII byte), which names another key: a
/// listed `land/주문.json` was asked for as `land/%EC%A3%BC...`, and never found. `parse`
/// takes the key as it is; a key it refuses (an empty or relative segment) falls back.
pub fn object_path(key: &str) -> ObjectPath {
    ObjectPath::parse(key).unwrap_or_else(|_| ObjectPath::from(key))
}

/// An object to read: where to get it from, and the runtime to fetch it with (decoders run
/// on plain threads).
#[derive(Debug, Clone)]
pub struct RemoteObject {
    pub store: Arc<dyn ObjectStore>,
    pub location: ObjectPath,
    pub handle: Option<tokio::runtime::Handle>,
    /// The folder it is fetched into ([`StorageSettings::temp_dir`]).
    pub fetch_dir: PathBuf,
}

/// How the library reaches storage, resolved at the edge from the environment and handed
/// in: the library reads no variable of its own.
#[derive(Debug, Clone)]
pub struct StorageSettings {
    /// S3 client configuration as the AWS environment spells it (`AWS_REGION`,
    /// `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, credentials, ...), for sources, state and
    /// tables alike. Names object_store does not know are ignored.
    pub s3: Vec<(String, String)>,
    /// Where an object is fetched to before it is decoded (the platform's temp folder).
    pub temp_dir: PathBuf,
    /// The folder under which an S3 checkpoint keeps its local cache (and event log).
    pub cache_root: PathBuf,
    /// How long a lease on an S3 checkpoint lasts without renewal: a crashed holder
    /// blocks others this long at most. It is renewed every third of it.
    pub lease: Duration,
    /// The runtime that S3 state I/O runs on. Checkpoint and schema-store calls are short,
    /// rare and synchronous; they hop to this runtime from a scoped thread, so they work
    /// from inside or outside an async context without blocking the caller's runtime.
    /// `None`: only local state can be opened.
    pub io: Option<tokio::runtime::Handle>,
}

/// The lease length when none is set.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

impl StorageSettings {
    /// Local state only, with S3 caches under `cache_root` (tests and tools).
    pub fn local(cache_root: PathBuf) -> StorageSettings {
        StorageSettings {
            s3: Vec::new(),
            temp_dir: cache_root.join("tmp"),
            cache_root,
            lease: DEFAULT_LEASE,
            io: None,
        }
    }
}

/// A mistake in the S3 configuration, refused before any request is sent.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error(
        "{var}={endpoint} is a plain-HTTP endpoint, refused by default: set AWS_ALLOW_HTTP=true \
         to use it (or give an https:// endpoint)"
    )]
    HttpEndpoint { var: String, endpoint: String },
}

/// The value of an environment-style S3 setting (`AWS_...`, any case).
fn s3_setting<'a>(config: &'a [(String, String)], name: &str) -> Option<&'a str> {
    config
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// A table's data file, read by byte ranges (for S3, ranged GETs of the footer and the one
/// column read, not the whole object).
pub struct RangedFile {
    pub store: std::sync::Arc<dyn object_store::ObjectStore>,
    pub path: object_store::path::Path,
    pub size: u64,
}

impl parquet::arrow::async_reader::AsyncFileReader for RangedFile {
    fn get_bytes(
        &mut self,
        range: std::ops::Range<u64>,
    ) -> futures::future::BoxFuture<'_, parquet::errors::Result<bytes::Bytes>> {
        Box::pin(async move {
            object_store::ObjectStoreExt::get_range(self.store.as_ref(), &self.path, range)
                .await
                .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
        })
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a parquet::arrow::arrow_reader::ArrowReaderOptions>,
    ) -> futures::future::BoxFuture<
        'a,
        parquet::errors::Result<std::sync::Arc<parquet::file::metadata::ParquetMetaData>>,
    > {
        Box::pin(async move {
            let size = self.size;
            let metadata = parquet::file::metadata::ParquetMetaDataReader::new()
                .with_arrow_reader_options(options)
                .load_and_finish(&mut *self, size)
                .await?;
            Ok(std::sync::Arc::new(metadata))
        })
    }
}

/// The Delta table at `location`, not loaded yet (nothing is read): a local folder's, or an
/// S3 prefix's with the S3 configuration `s3`. The one place a table handle is built, for
/// targets and Delta sources alike.
pub fn unloaded_table(
    location: &crate::location::Location,
    s3: &[(String, String)],
) -> Result<deltalake::DeltaTable, String> {
    use crate::location::Location;
    let url = match location {
        Location::Local(path) => {
            let abs = std::fs::canonicalize(path)
                .or_else(|_| std::path::absolute(path))
                .map_err(|e| e.to_string())?;
            url::Url::from_directory_path(&abs).map_err(|()| "not an absolute path".to_string())?
        }
        Location::S3(url) => {
            static REGISTER: std::sync::Once = std::sync::Once::new();
            REGISTER.call_once(|| deltalake::aws::register_handlers(None));
            check_s3_settings(s3).map_err(|e| e.to_string())?;
            url::Url::parse(&format!("{}/", url.as_str().trim_end_matches('/')))
                .map_err(|e| e.to_string())?
        }
    };
    let options: std::collections::HashMap<String, String> = match location {
        Location::S3(_) => s3.iter().cloned().collect(),
        Location::Local(_) => Default::default(),
    };
    table_at(url, options).map_err(|e| e.to_string())
}

/// The table handle at `url`: a local table goes through [`local_table::LocalTableStore`]
/// (a listing of `_delta_log` that stats only the entries past its offset) and
/// [`local_table::LocalLogStore`] (the latest version without a listing), an S3 one through
/// delta-rs' own store with `options`.
pub fn table_at(
    url: url::Url,
    options: std::collections::HashMap<String, String>,
) -> Result<deltalake::DeltaTable, deltalake::DeltaTableError> {
    let builder = deltalake::DeltaTableBuilder::from_url(url.clone())?;
    if url.scheme() == "file" {
        let log_store = builder
            .with_storage_backend(Arc::new(local_table::LocalTableStore::new()), url)
            .build_storage()?;
        return Ok(deltalake::DeltaTable::new(Arc::new(
            local_table::LocalLogStore::new(log_store),
        )));
    }
    builder.with_storage_options(options).build()
}

/// Checks the S3 configuration for mistakes the S3 client would report obscurely (a
/// plain-HTTP endpoint without `AWS_ALLOW_HTTP` fails every request with "builder error").
pub fn check_s3_settings(config: &[(String, String)]) -> Result<(), StorageError> {
    let allow_http = s3_setting(config, "AWS_ALLOW_HTTP").is_some_and(|v| {
        ["true", "1", "yes", "on", "y"]
            .iter()
            .any(|t| v.trim().eq_ignore_ascii_case(t))
    });
    if allow_http {
        return Ok(());
    }
    for var in ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"] {
        if let Some(endpoint) = s3_setting(config, var)
            && endpoint
                .trim()
                .get(..7)
                .is_some_and(|s| s.eq_ignore_ascii_case("http://"))
        {
            return Err(StorageError::HttpEndpoint {
                var: var.to_string(),
                endpoint: endpoint.to_string(),
            });
        }
    }
    Ok(())
}

/// Variables through which the S3 client gets credentials without asking the instance
/// metadata service.
const CREDENTIAL_SETTINGS: [&str; 5] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_SKIP_SIGNATURE",
];

/// Whether the S3 configuration gives credentials (or says none are needed), so that the
/// client does not ask the instance metadata service.
pub fn has_s3_credentials(config: &[(String, String)]) -> bool {
    CREDENTIAL_SETTINGS
        .iter()
        .any(|k| s3_setting(config, k).is_some())
}

/// An S3 failure's reason, explained when it is a missing-credentials mistake: with no
/// credentials in the environment (`credentials_given` false, see [`has_s3_credentials`])
/// the client asks the instance metadata service (169.254.169.254), and off EC2 that
/// fails with an error naming its token or credentials path.
pub fn explain_s3_failure(credentials_given: bool, reason: String) -> String {
    // S3's error document, raw XML in object_store's message, said in a sentence.
    let reason = match (s3_error_code(&reason), reason.find("<?xml")) {
        (Some((code, message)), Some(at)) => {
            format!("{}S3 says {code}: {message}", &reason[..at])
        }
        _ => reason,
    };
    let from_metadata =
        reason.contains("/latest/api/token") || reason.contains("/latest/meta-data");
    if credentials_given || !from_metadata {
        return reason;
    }
    format!(
        "no AWS credentials: none is set in the environment, and the instance metadata \
         service gave none; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and \
         AWS_SESSION_TOKEN for temporary credentials), or AWS_WEB_IDENTITY_TOKEN_FILE and \
         AWS_ROLE_ARN ({reason})"
    )
}

/// The `<Code>` and `<Message>` of an S3 error document in `reason`, if it has one.
pub fn s3_error_code(reason: &str) -> Option<(&str, &str)> {
    let between = |open: &str, close: &str| {
        let start = reason.find(open)? + open.len();
        let end = reason[start..].find(close)? + start;
        Some(&reason[start..end])
    };
    Some((
        between("<Code>", "</Code>")?,
        between("<Message>", "</Message>").unwrap_or(""),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_error_documents_are_said_in_a_sentence() {
        let raw = "Error performing GET http://h/b: 404 Not Found: <?xml version=\"1.0\"?>\n\
                   <Error><Code>NoSuchBucket</Code><Message>The specified bucket does not \
                   exist</Message><RequestId>x</RequestId></Error>";
        let said = explain_s3_failure(true, raw.to_string());
        assert_eq!(
            said,
            "Error performing GET http://h/b: 404 Not Found: S3 says NoSuchBucket: The \
             specified bucket does not exist"
        );
        assert_eq!(s3_error_code(raw).unwrap().0, "NoSuchBucket");
    }

    fn config(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_plain_http_endpoint_needs_allow_http() {
        let http = [("AWS_ENDPOINT_URL", "http://127.0.0.1:5000")];
        let err = check_s3_settings(&config(&http)).unwrap_err().to_string();
        assert!(err.contains("set AWS_ALLOW_HTTP=true"), "{err}");
        assert!(
            err.contains("AWS_ENDPOINT_URL=http://127.0.0.1:5000"),
            "{err}"
        );
        let allowed = [http[0], ("AWS_ALLOW_HTTP", "TRUE")];
        assert!(check_s3_settings(&config(&allowed)).is_ok());
        let https = [("AWS_ENDPOINT_URL", "https://s3.example.com")];
        assert!(check_s3_settings(&config(&https)).is_ok());
        let refused = [http[0], ("AWS_ALLOW_HTTP", "false")];
        assert!(check_s3_settings(&config(&refused)).is_err());
    }

    #[test]
    fn a_metadata_failure_without_credentials_says_what_to_set() {
        let reason =
            "Error performing PUT http://169.254.169.254/latest/api/token: 403".to_string();
        let text = explain_s3_failure(has_s3_credentials(&[]), reason.clone());
        assert!(
            text.contains("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
            "{text}"
        );
        assert!(text.contains(&reason), "{text}");
        let keyed = config(&[("AWS_ACCESS_KEY_ID", "x")]);
        assert_eq!(
            explain_s3_failure(has_s3_credentials(&keyed), reason.clone()),
            reason
        );
        assert_eq!(explain_s3_failure(false, "timeout".into()), "timeout");
    }
}
