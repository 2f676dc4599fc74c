//! autoloader: Databricks Auto Loader semantics without Databricks. Landing folders are
//! discovered, decoded with schema inference, versioning and rescue, and appended to Delta
//! Lake tables exactly once.

pub mod alerts;
pub mod checkpoint;
pub mod config;
pub mod discovery;
pub mod events;
pub mod failpoint;
pub mod formats;
pub mod fsutil;
/// Entry points for `cargo fuzz` and the `fuzz_smoke` tests; not a stable API.
#[doc(hidden)]
pub mod fuzzing;
pub mod ingest;
pub mod jv;
pub mod lease;
pub mod memory;
pub mod metrics;
pub mod options;
pub mod remote;
pub mod reports;
pub mod rows;
pub mod schema;
pub mod sink;
pub mod values;
pub mod watch;
