//! What a run is asked to do and what it answers: the request, its errors, its summary, progress hooks and the stop flag. Every step of the pipeline reads these; they use none of the steps.

use crate::checkpoint::CheckpointError;
use crate::flow::{FlowError, FlowSpec, definition};
use crate::formats::DecodeError;
use crate::formats::detect::FormatChoiceError;
use crate::location::Location;
use crate::options::Settings;
use crate::pipeline::{FirstWriter, OnceFlow};
use crate::record::TableLayout;
use crate::schema::evolution::AddedField;
use crate::schema::store::SchemaStoreError;
use crate::source::{Source, SourceError};
use crate::storage::StorageSettings;
use crate::target::TargetError;
use arrow_schema::SchemaRef;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Files cleaned (`cloudFiles.cleanSource`) per pass, so a watcher goes back to new files
/// between passes.
pub(crate) const CLEAN_BUDGET: u64 = 500;

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Schema(#[from] SchemaStoreError),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Format(#[from] FormatChoiceError),
    #[error(
        "new columns {} in {} (cloudFiles.schemaEvolutionMode=failOnNewColumns); nothing of this batch \
         was committed: add them with cloudFiles.schemaHints or the schema option, or choose another mode",
        added.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        files.join(", ")
    )]
    NewColumnsRejected {
        files: Vec<String>,
        added: Vec<AddedField>,
    },
    #[error(
        "the schema changed: wrote version {version} adding {}; run again to continue \
         (cloudFiles.stopOnSchemaChange=true)",
        added.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    SchemaChanged {
        version: u64,
        added: Vec<AddedField>,
    },
    /// The source and the stream's own table, checkpoint or schema location overlap in a
    /// way that cannot be left out of the listing.
    #[error("{0}")]
    OwnOutput(String),
    #[error(
        "the checkpoint {checkpoint} started with cloudFiles.schemaLocation={recorded}, and this run \
         gives {given}: a checkpoint keeps one schema location (another would infer a fresh \
         _schemas/0); pass {recorded} again, or give a new checkpoint to use {given}"
    )]
    SchemaLocationChanged {
        checkpoint: String,
        recorded: String,
        given: String,
    },
    #[error(transparent)]
    TableTypeClash(Box<TableTypeClash>),
    /// The flow's definition changed in a way that needs a full refresh.
    #[error(transparent)]
    DefinitionChanged(Box<definition::NeedsRefresh>),
    /// The flow's `columns`, `except_columns` or `where` do not fit the stream's schema.
    #[error(transparent)]
    Flow(#[from] FlowError),
    /// A `fail` expectation failed a row: nothing of the batch was committed.
    #[error(transparent)]
    ExpectationFailed(Box<ExpectationFailure>),
    /// A computed column or a condition could not be computed for a row.
    #[error(transparent)]
    ComputeFailed(Box<ComputeFailure>),
    #[error("internal error: {0}")]
    Internal(String),
}

/// The row a `fail` expectation stopped the flow on.
#[derive(Debug, thiserror::Error)]
#[error(
    "expectation \"{rule}\" failed in {file}, record {record}: \"{check}\" is not true for \
     {values}. Nothing of this batch was committed and its files stay unconsumed: fix the \
     file or the rule and run again (on_violation = \"quarantine\" keeps such rows aside \
     instead)"
)]
pub struct ExpectationFailure {
    pub rule: String,
    pub check: String,
    pub file: String,
    /// The record's number in its file, from 1.
    pub record: u64,
    pub values: String,
}

/// The row a computed column or a condition could not be computed for (Spark's ANSI mode).
#[derive(Debug, thiserror::Error)]
#[error(
    "{what} failed in {file}, {}: {message}. Nothing of this batch was committed and its \
     files stay unconsumed: fix the file or the expression and run again",
    match record { Some(r) => format!("record {r}"), None => "a record of this batch".into() }
)]
pub struct ComputeFailure {
    pub what: String,
    pub file: String,
    /// The record's number in its file, from 1, when known.
    pub record: Option<u64>,
    pub message: String,
}

/// A column this stream pins to a type that the shared table holds with another.
#[derive(Debug, thiserror::Error)]
#[error(
    "stream {stream}: column {column} is {ours} here but {theirs} in the table {table}, which \
     other streams write too ({why}): make it {theirs} in this stream's hints or schema (values \
     that do not fit land in the rescued data), or give this stream a table of its own"
)]
pub struct TableTypeClash {
    pub stream: String,
    pub table: String,
    pub column: String,
    pub ours: String,
    pub theirs: String,
    pub why: String,
}

/// What one run should do.
#[derive(Debug, Clone)]
pub struct IngestRequest {
    /// The stream's name in events, alerts and metrics.
    pub name: String,
    pub source: Source,
    pub table: Location,
    pub checkpoint: Location,
    pub settings: Settings,
    /// How storage is reached (S3 configuration, cache folder, lease, state I/O).
    pub storage: StorageSettings,
    /// Its place among the streams of one run that share its table.
    pub first_writer: FirstWriter,
    /// Delta table properties declared for the table (`[[table]]`), applied each run.
    pub table_properties: Vec<(String, String)>,
    /// The table's `optimize` section (`[[table]]`): auto compaction and how often.
    pub auto_compact: Option<crate::table::optimize::AutoCompact>,
    /// Which columns and rows reach the table (default: all).
    pub flow: FlowSpec,
    /// Streams of the same run whose table this stream reads (a Delta source): with
    /// `--once` it starts after they finish, so one run carries bronze into silver.
    pub upstream: Vec<String>,
    /// APPLY CHANGES settings: the batches are applied to the table by key, not appended.
    pub cdc: Option<crate::flow::cdc::CdcSpec>,
    /// A snapshot flow (`[stream.snapshot]`, `-o snapshot.KEY=VALUE`): each unit of the
    /// listing is a whole snapshot of the source, compared with the last one.
    pub snapshot: Option<crate::flow::snapshot::SnapshotSpec>,
    /// `once = true`: a ONCE flow (`once.rs`), run to completion once.
    pub once: Option<OnceFlow>,
    /// `--worker`: one of several competing workers on this stream, in a slot of its own
    /// (`checkpoint/claims.rs`). `None`: the stream's only process.
    pub worker: Option<crate::checkpoint::claims::Worker>,
    /// Where rows a `quarantine` expectation keeps out go (default: beside the
    /// checkpoint, `target::quarantine::default_location`).
    pub quarantine_table: Option<Location>,
}

impl IngestRequest {
    /// The checkpoint a stream of `table` keeps when none is given: `TABLE/_autoloader`
    /// (Delta readers ignore `_` folders), or `TABLE/_autoloader/NAME` for a named stream
    /// of a config file, so several streams can share the table.
    pub fn default_checkpoint(table: &Location, stream: Option<&str>) -> Location {
        crate::checkpoint::default_location(table, stream)
    }

    /// Where this stream's quarantined rows go, when one of its rules quarantines.
    pub fn quarantine_location(&self) -> Option<Location> {
        let quarantines = self
            .flow
            .expectations
            .iter()
            .any(|e| e.on_violation == crate::flow::expect::OnViolation::Quarantine);
        quarantines.then(|| {
            self.quarantine_table
                .clone()
                .unwrap_or_else(|| crate::target::quarantine::default_location(&self.checkpoint))
        })
    }

    /// The columns a table written with `layout` holds: the layout's, projected by the
    /// flow. Binding the flow here is what checks it against the schema, before a table
    /// is created or a batch read.
    pub(crate) fn table_schema(&self, layout: &TableLayout) -> Result<SchemaRef, IngestError> {
        if let Some(stamps) = &layout.stamps
            && let Some(c) = [&stamps.ingested_at, &stamps.snapshot_id]
                .into_iter()
                .find(|c| layout.data.field(c).is_some())
        {
            return Err(IngestError::Config(format!(
                "the data already has a column {c}, which the snapshot flow would stamp: \
                 name the stamp otherwise (snapshot.ingest_time_column / \
                 snapshot.snapshot_id_column)"
            )));
        }
        let schema = self.flow.table_schema(
            &layout.arrow_schema(),
            &layout.trailing_names(),
            self.settings.time_zone,
        )?;
        if let Some(cdc) = &self.cdc {
            cdc.check(&schema, self.settings.time_zone)
                .map_err(|e| IngestError::Config(e.to_string()))?;
        }
        Ok(schema)
    }

    /// [`Self::table_schema`] for a schema inferred from the files `sample`: a CDC setting
    /// that does not fit (a preset on records of another envelope) names the files.
    pub(crate) fn table_schema_read_from(
        &self,
        layout: &TableLayout,
        sample: &[crate::source::FileRef],
    ) -> Result<SchemaRef, IngestError> {
        self.table_schema(layout).map_err(|e| match e {
            IngestError::Config(msg) if self.cdc.is_some() && !sample.is_empty() => {
                let mut files: Vec<&str> = sample.iter().take(5).map(|f| f.key.as_str()).collect();
                let more = sample.len().saturating_sub(files.len());
                let more = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                files.sort_unstable();
                IngestError::Config(format!(
                    "{msg} (the records read from {}{more})",
                    files.join(", ")
                ))
            }
            other => other,
        })
    }

    /// The name of the stream of `table` when none is given: the table's folder name.
    pub fn default_name(table: &Location) -> String {
        crate::checkpoint::default_stream_name(table)
    }

    /// What `reset` needs of this stream.
    pub fn as_configured_flow(&self) -> crate::table::reset::ConfiguredFlow {
        crate::table::reset::ConfiguredFlow {
            name: self.name.clone(),
            table: self.table.clone(),
            checkpoint: self.checkpoint.clone(),
            source: self.source.clone(),
            settings: self.settings.clone(),
            once: self.once.is_some(),
        }
    }
}

/// What a run did (`--json` prints it, camelCase).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub batches: u64,
    pub files: u64,
    pub rows: u64,
    pub bytes: u64,
    pub rescued_rows: u64,
    /// Rows read but left out by the flow's `where` (not in `rows`).
    pub filtered_rows: u64,
    /// Rows a `drop` expectation left out (not in `rows`).
    pub dropped_rows: u64,
    /// Rows a `quarantine` expectation sent to the quarantine table (not in `rows`).
    pub quarantined_rows: u64,
    /// Per expectation: rows passed, failed, dropped, quarantined.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expectations: Vec<crate::flow::expect::ExpectationCounts>,
    pub skipped_files: u64,
    /// Files quarantined this run (they crashed the process every time they were read).
    pub quarantined_files: u64,
    /// Snapshots not appended again: their files equal their last snapshot's.
    pub unchanged_snapshots: u64,
    /// `--once`: files still being written (open for writing, or where that cannot be
    /// told, modified within `cloudFiles.settleTime`), left for the next run.
    pub unsettled_files: u64,
    pub schema_version: Option<u64>,
    pub seconds: f64,
    pub table_version: Option<u64>,
    /// Schema versions this run wrote by evolution, described.
    pub evolutions: Vec<String>,
    /// A ONCE flow: what became of it (ran, or skipped and why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub once: Option<String>,
    /// A CDC flow: what its changes did to the table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<crate::target::ChangeCounts>,
}

/// Table versions between fresh loads of the table state (see [`DeltaAppend::reload`]).
pub(crate) const RELOAD_EVERY_VERSIONS: u64 = 50;

/// How long a finishing run waits at most for its queued alerts to be sent (one attempt
/// each, no backoff); what is left is kept for the next run (`telemetry/alerts.rs`).
pub(crate) const ALERT_DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Progress reporting hooks (a terminal bar in the CLI, nothing in tests).
pub trait Progress: Send + Sync {
    fn start(&self, _files: u64, _bytes: u64) {}
    fn file_done(&self, _bytes: u64) {}
    fn finish(&self) {}
}

/// No progress output.
pub struct NoProgress;
impl Progress for NoProgress {}

/// Set by a signal handler: the stream stops between batches (a batch in flight finishes).
#[derive(Debug, Default, Clone)]
pub struct StopFlag(Arc<StopInner>);

#[derive(Debug, Default)]
pub(crate) struct StopInner {
    stopped: AtomicBool,
    notify: tokio::sync::Notify,
}

impl StopFlag {
    pub fn new() -> Self {
        StopFlag::default()
    }

    pub fn stop(&self) {
        self.0.stopped.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    pub fn is_stopped(&self) -> bool {
        self.0.stopped.load(Ordering::SeqCst)
    }

    /// Completes once [`StopFlag::stop`] has been called.
    pub async fn stopped(&self) {
        let notified = self.0.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.is_stopped() {
            return;
        }
        notified.await;
    }
}
