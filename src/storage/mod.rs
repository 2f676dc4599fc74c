//! Storage below the pipeline: durable writes of small state files (create-only local
//! writes, a folder of objects on S3 with create-only puts), and objects to fetch.

use std::sync::Arc;

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
}
