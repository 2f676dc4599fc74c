//! Storage below the pipeline: durable writes of small state files (create-only local
//! writes, a folder of objects on S3 with create-only puts), and objects to fetch.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;

pub mod atomic;
pub mod object_dir;

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
