//! autoloader: Databricks Auto Loader semantics without Databricks. Landing folders are
//! discovered, decoded with schema inference, versioning and rescue, and appended to Delta
//! Lake tables exactly once. `ARCHITECTURE.md` maps the modules to the stages.

pub mod checkpoint;
pub mod clock;
pub mod config;
pub mod error;
pub mod expr;
pub mod flow;
pub mod formats;
pub mod location;
pub mod memory;
pub mod options;
pub mod parse;
pub mod pipeline;
pub mod record;
pub mod reports;
pub mod schema;
pub mod source;
pub mod storage;
pub mod table;
pub mod target;
pub mod telemetry;
pub mod testing;

pub use error::{Error, ErrorClass, Result};
pub use location::Location;
