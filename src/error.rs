//! The crate's error, and the one place where every error is classified into the kinds
//! the command line turns into its documented exit codes.

use crate::checkpoint::CheckpointError;
use crate::config::ConfigError;
use crate::location::LocationError;
use crate::options::OptionsError;
use crate::pipeline::IngestError;
use crate::reports::ReportError;
use crate::source::SourceError;
use crate::storage::StorageError;
use crate::telemetry::alerts::AlertError;

/// What kind of failure an error is, as the exit code tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Invalid arguments, options, config or location: nothing was done (exit 2).
    Usage,
    /// Another process holds the checkpoint (exit 75, EX_TEMPFAIL).
    Locked,
    /// A new schema version was written and `cloudFiles.stopOnSchemaChange=true` asked to
    /// stop: run again to continue with it (exit 3).
    SchemaChanged,
    /// A reset named a table with `pipelines.reset.allowed=false`: nothing was changed
    /// (exit 4).
    Guarded,
    /// Anything else: bad input, I/O, the table (exit 1). The error names the file.
    Failed,
}

/// Any error of the library's entry points.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(transparent)]
    Location(#[from] LocationError),
    #[error(transparent)]
    Options(#[from] OptionsError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Alert(#[from] AlertError),
    #[error(transparent)]
    Ingest(#[from] IngestError),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error(transparent)]
    Table(#[from] crate::table::properties::TableError),
    #[error(transparent)]
    Reset(#[from] crate::table::reset::ResetError),
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Cdc(#[from] crate::flow::cdc::CdcError),
    /// `optimize` and `vacuum`.
    #[error(transparent)]
    Maintenance(#[from] crate::table::optimize::MaintenanceError),
    /// `quarantine replay`.
    #[error(transparent)]
    Replay(#[from] crate::table::replay::ReplayError),
    /// An I/O failure outside any stream (the async runtime, the metrics listener).
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    /// Streams of a config file failed; each has printed its own error. `class` is theirs
    /// when they all failed alike (one stream refused its options is exit 2, as from
    /// `ingest`), else `Failed`.
    #[error("{} of the streams failed: {}", failed.len(), failed.join(", "))]
    StreamsFailed {
        failed: Vec<String>,
        class: ErrorClass,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::Location(_)
            | Error::Options(_)
            | Error::Config(_)
            | Error::Alert(_)
            | Error::Storage(_)
            | Error::Cdc(_) => ErrorClass::Usage,
            Error::Ingest(e) => e.class(),
            Error::Source(e) => e.class(),
            Error::Checkpoint(e) => e.class(),
            Error::Report(e) => report_class(e),
            Error::Table(crate::table::properties::TableError::Target(_)) => ErrorClass::Failed,
            Error::Table(crate::table::properties::TableError::Report(e)) => report_class(e),
            Error::Table(_) => ErrorClass::Usage,
            Error::Reset(e) => reset_class(e),
            Error::StreamsFailed { class, .. } => *class,
            Error::Maintenance(e) if e.is_usage() => ErrorClass::Usage,
            Error::Maintenance(_) => ErrorClass::Failed,
            Error::Replay(crate::table::replay::ReplayError::Checkpoint(e)) => e.class(),
            Error::Replay(crate::table::replay::ReplayError::Table(e)) if e.is_usage() => {
                ErrorClass::Usage
            }
            Error::Replay(_) => ErrorClass::Failed,
            Error::Io { .. } => ErrorClass::Failed,
        }
    }
}

fn reset_class(e: &crate::table::reset::ResetError) -> ErrorClass {
    use crate::table::reset::ResetError;
    match e {
        ResetError::Guarded { .. } => ErrorClass::Guarded,
        ResetError::WorkerRunning { .. } => ErrorClass::Locked,
        ResetError::NotATable { .. } | ResetError::Usage(_) => ErrorClass::Usage,
        ResetError::Checkpoint(e) => e.class(),
        ResetError::Report(e) => report_class(e),
        ResetError::Source(e) => e.class(),
        ResetError::Target(_) => ErrorClass::Failed,
    }
}

/// A path that is not a checkpoint or a table, or a version that is not there, is a wrong
/// argument; anything else a report meets is a failure.
fn report_class(e: &ReportError) -> ErrorClass {
    match e {
        ReportError::NotACheckpoint { .. }
        | ReportError::NoCheckpoint { .. }
        | ReportError::NoSuchStream { .. }
        | ReportError::SeveralStreams { .. }
        | ReportError::NotATable { .. }
        | ReportError::NoSchemas(_)
        | ReportError::NoVersion(_)
        | ReportError::Since(_) => ErrorClass::Usage,
        _ => ErrorClass::Failed,
    }
}

impl IngestError {
    pub fn class(&self) -> ErrorClass {
        match self {
            IngestError::Config(_)
            | IngestError::Format(_)
            | IngestError::OwnOutput(_)
            | IngestError::SchemaLocationChanged { .. }
            | IngestError::TableTypeClash(_)
            | IngestError::DefinitionChanged(_)
            | IngestError::Flow(_) => ErrorClass::Usage,
            IngestError::SchemaChanged { .. } => ErrorClass::SchemaChanged,
            IngestError::Checkpoint(e) => e.class(),
            IngestError::Source(e) => e.class(),
            IngestError::Schema(_)
            | IngestError::Target(_)
            | IngestError::Decode(_)
            | IngestError::NewColumnsRejected { .. }
            | IngestError::ExpectationFailed(_)
            | IngestError::ComputeFailed(_)
            | IngestError::Internal(_) => ErrorClass::Failed,
        }
    }
}

impl CheckpointError {
    pub fn class(&self) -> ErrorClass {
        match self {
            CheckpointError::Locked { .. } => ErrorClass::Locked,
            _ => ErrorClass::Failed,
        }
    }
}

impl SourceError {
    pub fn class(&self) -> ErrorClass {
        match self {
            // A source that is not there, or an S3 setting that cannot work, is a wrong
            // argument: nothing was done (ingest and run agree).
            SourceError::NotADirectory { .. } | SourceError::InvalidS3 { .. } => ErrorClass::Usage,
            SourceError::Usage(_) => ErrorClass::Usage,
            SourceError::List { .. }
            | SourceError::Clean { .. }
            | SourceError::ObjectStore { .. }
            | SourceError::DeltaSource { .. } => ErrorClass::Failed,
        }
    }
}

impl From<crate::pipeline::SpecError> for Error {
    fn from(e: crate::pipeline::SpecError) -> Error {
        match e {
            crate::pipeline::SpecError::Options(e) => e.into(),
            crate::pipeline::SpecError::Cdc(e) => e.into(),
            crate::pipeline::SpecError::Storage(e) => e.into(),
            crate::pipeline::SpecError::Source(e) => e.into(),
        }
    }
}
