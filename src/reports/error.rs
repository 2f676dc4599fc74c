//! Why a report could not be made.

use crate::schema::store::SchemaStoreError;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Schema(#[from] SchemaStoreError),
    #[error("no schema versions under {0}")]
    NoSchemas(String),
    #[error("schema version {0} does not exist")]
    NoVersion(u64),
    #[error("cannot read the table {path}: {reason}")]
    Table { path: String, reason: String },
    #[error("cannot read the table {path}: not a Delta table (no _delta_log)")]
    NotATable { path: String },
    #[error(transparent)]
    Checkpoint(#[from] crate::checkpoint::CheckpointError),
    #[error("{path} is not a checkpoint (nothing was ever ingested with it)")]
    NotACheckpoint { path: String },
    #[error(
        "{path} is not a checkpoint, and no stream's checkpoint is under it ({path}/_autoloader, or {path}/_autoloader/NAME for a config stream); for a stream whose checkpoint is elsewhere, pass --checkpoint DIR"
    )]
    NoCheckpoint { path: String },
    #[error("no stream {stream:?} writes {path}; its streams: {known}")]
    NoSuchStream {
        path: String,
        stream: String,
        known: String,
    },
    #[error("{path} has several streams ({known}): pick one with --stream NAME")]
    SeveralStreams { path: String, known: String },
    #[error(
        "--since {0:?}: expected a time (2026-03-15T00:00:00Z) or how long ago, a number with a unit: s, m, h, d or w (90s, 15m, 24h, 7d, 2w)"
    )]
    Since(String),
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}
