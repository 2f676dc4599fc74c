//! The ingest pipeline of one stream: recover, discover, infer or load the schema, then for
//! each batch plan → read → write → commit → mark (ARCHITECTURE.md says who owns which
//! guarantee).
//!
//! Files of a batch are decoded on blocking threads (one per core). In a large batch each
//! thread also encodes its rows into its own Parquet files, so encoding uses every core; a
//! small batch streams its Arrow batches to one writer, so it stays one Parquet file. Either
//! way memory stays bounded by a few batches, and all files land in one commit.

mod adopt;
mod batch;
mod clean;
pub mod definition;

/// Files cleaned (`cloudFiles.cleanSource`) per pass, so a watcher goes back to new files
/// between passes.
pub(crate) const CLEAN_BUDGET: u64 = 500;
mod dry_run;
mod generation;
mod once;
mod own_output;
mod plan;
mod pool;
mod precheck;
mod read;
mod schema;
mod shared_table;
mod snapshots;
mod spec;
mod stream;
mod supervisor;
mod unsettled;
pub mod watch;

pub use crate::telemetry::Hooks;
pub use dry_run::{DryFile, DryRun, DrySchema, dry_run};
pub use once::OnceFlow;
pub use precheck::precheck;
pub use shared_table::FirstWriter;
pub use spec::{SpecError, StreamSpec};
pub use stream::StreamRun;
pub use supervisor::{RunMode, run_stream, run_streams};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use arrow_schema::SchemaRef;

use crate::checkpoint::CheckpointError;
use crate::flow::{FlowError, FlowSpec};
use crate::formats::DecodeError;
use crate::formats::detect::FormatChoiceError;
use crate::location::Location;
use crate::options::Settings;
use crate::record::TableLayout;
use crate::schema::evolution::AddedField;
use crate::schema::store::SchemaStoreError;
use crate::source::{DiscoveryError, Source};
use crate::storage::StorageSettings;
use crate::target::SinkError;

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    #[error(transparent)]
    Schema(#[from] SchemaStoreError),
    #[error(transparent)]
    Sink(#[from] SinkError),
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
    #[error("internal error: {0}")]
    Internal(String),
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
}

impl IngestRequest {
    /// The checkpoint a stream of `table` keeps when none is given: `TABLE/_autoloader`
    /// (Delta readers ignore `_` folders), or `TABLE/_autoloader/NAME` for a named stream
    /// of a config file, so several streams can share the table.
    pub fn default_checkpoint(table: &Location, stream: Option<&str>) -> Location {
        let base = table.join("_autoloader");
        match stream {
            Some(name) => base.join(name),
            None => base,
        }
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
        table.file_name().unwrap_or_else(|| "stream".to_string())
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
const RELOAD_EVERY_VERSIONS: u64 = 50;

/// How long a finishing run waits at most for its queued alerts to be sent (one attempt
/// each, no backoff); what is left is kept for the next run (`telemetry/alerts.rs`).
const ALERT_DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Progress reporting hooks (a terminal bar in the CLI, nothing in tests).
pub trait Progress: Send + Sync {
    fn start(&self, _files: u64, _bytes: u64) {}
    fn file_done(&self, _bytes: u64) {}
    fn finish(&self) {}
}

/// No progress output.
pub struct NoProgress;
impl Progress for NoProgress {}

/// Runs the stream once over every file present now (Auto Loader's AvailableNow), stopping
/// between batches when `stop` is set.
pub async fn run_once(
    req: &IngestRequest,
    progress: &dyn Progress,
    stop: &StopFlag,
    hooks: &Hooks,
) -> Result<Summary, IngestError> {
    let started = Instant::now();
    adopt::adopt_orphans(req, progress, stop, hooks, usize::MAX).await?;
    let mut stream = StreamRun::open(req, progress, hooks).await?;
    let mut still_written = 0;
    let result = async {
        let files = stream.discover().await?;
        let (files, unsettled) = unsettled::split(req, files, crate::clock::now_ms());
        if !unsettled.is_empty() {
            let shown: Vec<&str> = unsettled.iter().take(5).map(|f| f.key.as_str()).collect();
            tracing::warn!(
                files = unsettled.len(),
                first = %shown.join(", "),
                "Files still being written (open for writing, or where that cannot be told, \
                 modified within cloudFiles.settleTime) are left for the next run."
            );
        }
        still_written = unsettled.len() as u64;
        let total_files = files.len() as u64 + stream.pending_files();
        let total_bytes = files.iter().map(|f| f.size).sum::<u64>() + stream.pending_bytes();
        stream.set_pending(total_files);
        progress.start(total_files, total_bytes);
        stream.ingest(files, stop).await?;
        // A queue holding more than one discovery takes: drained until it is empty.
        while stream.more_queued() && !stop.is_stopped() {
            let files = stream.discover().await?;
            stream.ingest(files, stop).await?;
        }
        // cleanSource: at the end of the run, everything due.
        while !stop.is_stopped() && stream.clean_source(CLEAN_BUDGET).await? {}
        progress.finish();
        Ok(())
    }
    .await;
    let mut summary = stream.finish(result, started).await?;
    summary.unsettled_files = still_written;
    drop(stream);
    // A drain leaves no slot's batch unfinished: those of workers that died meanwhile too.
    adopt::adopt_orphans(req, progress, stop, hooks, usize::MAX).await?;
    Ok(summary)
}

/// Set by a signal handler: the stream stops between batches (a batch in flight finishes).
#[derive(Debug, Default, Clone)]
pub struct StopFlag(Arc<StopInner>);

#[derive(Debug, Default)]
struct StopInner {
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
