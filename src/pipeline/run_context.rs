//! What every step of a run's batches reads: the request, the checkpoint, the schema
//! store, telemetry and the decode options.

use crate::checkpoint::Checkpoint;
use crate::formats::DecodeOptions;
use crate::pipeline::{IngestRequest, Progress};
use crate::schema::store::SchemaStore;
use crate::telemetry::Telemetry;

pub(crate) struct RunContext<'a> {
    pub(crate) req: &'a IngestRequest,
    pub(crate) telemetry: &'a Telemetry,
    pub(crate) opts: &'a DecodeOptions,
    pub(crate) app_id: &'a str,
    pub(crate) checkpoint: &'a Checkpoint,
    pub(crate) store: &'a SchemaStore,
    pub(crate) progress: &'a dyn Progress,
}
