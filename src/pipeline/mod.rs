//! The ingest pipeline of one stream: recover, discover, infer or load the schema, then for
//! each batch plan → read → write → commit → mark (ARCHITECTURE.md says who owns which
//! guarantee).
//!
//! Files of a batch are decoded on blocking threads (one per core). In a large batch each
//! thread also encodes its rows into its own Parquet files, so encoding uses every core; a
//! small batch streams its Arrow batches to one writer, so it stays one Parquet file. Either
//! way memory stays bounded by a few batches, and all files land in one commit.

mod adopt;
mod ahead;
mod batch;
mod clean;
pub mod definition;

mod dry_run;
mod first_writer;
mod generation;
mod once;
mod own_output;
mod plan;
mod pool;
mod precheck;
mod read;
mod request;
mod run_context;
mod run_once;
mod schema;
mod shared_table;
mod snapshots;
mod spec;
mod stream;
mod supervisor;
mod unsettled;
pub mod watch;
pub(crate) use request::{ALERT_DRAIN, CLEAN_BUDGET, RELOAD_EVERY_VERSIONS};
pub use request::{
    ComputeFailure, ExpectationFailure, IngestError, IngestRequest, NoProgress, Progress, StopFlag,
    Summary, TableTypeClash,
};

pub use crate::flow::once::OnceFlow;
pub use crate::telemetry::Hooks;
pub use dry_run::{DryFile, DryRun, DrySchema, dry_run};
pub use first_writer::FirstWriter;
pub use precheck::precheck;
pub use run_once::run_once;
pub use spec::{SpecError, StreamSpec};
pub use stream::StreamRun;
pub use supervisor::{RunMode, run_stream, run_streams};

use std::sync::Arc;
use std::time::Instant;

use crate::formats::DecodeError;
