//! The ingest pipeline of one stream: recover, discover, infer or load the schema, then for
//! each batch plan → read → write → commit → mark (see `shared/reference/reliability.md` §4).
//!
//! Files of a batch are decoded on blocking threads (one per core). In a large batch each
//! thread also encodes its rows into its own Parquet files, so encoding uses every core; a
//! small batch streams its Arrow batches to one writer, so it stays one Parquet file. Either
//! way memory stays bounded by a few batches, and all files land in one commit.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arrow_array::RecordBatch;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::alerts::{AlertSettings, Alerter};
use crate::checkpoint::{Checkpoint, CheckpointError, CommitSummary, Plan, PlannedFile, now_ms};
use crate::discovery::{self, DiscoveryError, ListedFile, Source};
use crate::events::{EventLog, Severity, kind};
use crate::failpoint;
use crate::formats::{self, DecodeError, DecodeOptions, FileStats, SourceFile};
use crate::metrics::StreamMetrics;
use crate::options::{EvolutionMode, Format, IncrementalListing, Settings};
use crate::rows::RescueKind;
use crate::rows::{FileMeta, Layout, METADATA_COLUMN};
use crate::schema::evolution::{self, AddedField, Outcome};
use crate::schema::hints::{apply_hints, parse_hints};
use crate::schema::infer::SchemaInferrer;
use crate::schema::store::{SchemaStore, SchemaStoreError, SchemaVersion, VersionInfo};
use crate::schema::{DataType, Field, Schema};
use crate::sink::{BatchWriters, DeltaSink, SinkError};

/// A stream's event log, alerts and metrics.
pub struct Telemetry {
    events: Arc<EventLog>,
    alerter: Alerter,
    metrics: Arc<StreamMetrics>,
    /// Overwritten files already reported, so a watcher reports each once.
    overwritten_reported: std::collections::HashSet<(String, u64, i64)>,
}

impl Telemetry {
    fn start(req: &IngestRequest, hooks: &Hooks) -> Telemetry {
        let events = Arc::new(EventLog::open(
            &crate::checkpoint::local_dir(&req.checkpoint),
            &req.name,
        ));
        Telemetry {
            alerter: Alerter::start(hooks.alerts.clone(), Arc::clone(&events)),
            events,
            metrics: hooks.metrics.clone().unwrap_or_default(),
            overwritten_reported: std::collections::HashSet::new(),
        }
    }

    /// Records an event and alerts on it when it is alert-worthy.
    fn emit(&self, severity: Severity, kind: &str, fields: serde_json::Value) {
        let event = self.events.emit(severity, kind, fields);
        self.alerter.consider(&event);
    }
}

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
    #[error("internal error: {0}")]
    Internal(String),
}

/// What one run should do.
#[derive(Debug, Clone)]
pub struct IngestRequest {
    /// The stream's name in events, alerts and metrics.
    pub name: String,
    pub source: Source,
    pub table: PathBuf,
    pub checkpoint: PathBuf,
    pub settings: Settings,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub batches: u64,
    pub files: u64,
    pub rows: u64,
    pub bytes: u64,
    pub rescued_rows: u64,
    pub skipped_files: u64,
    /// Files quarantined this run (they crashed the process every time they were read).
    pub quarantined_files: u64,
    pub schema_version: Option<u64>,
    pub seconds: f64,
    pub table_version: Option<u64>,
    /// Schema versions this run wrote by evolution, described.
    pub evolutions: Vec<String>,
}

/// Table versions between fresh loads of the table state (see [`DeltaSink::reload`]).
const RELOAD_EVERY_VERSIONS: u64 = 50;

/// How long a finishing run waits for its queued alerts to be sent.
const ALERT_DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Where a stream reports besides its event log: alert webhooks and metrics.
#[derive(Default, Clone)]
pub struct Hooks {
    pub alerts: AlertSettings,
    pub metrics: Option<Arc<StreamMetrics>>,
}

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
    let mut stream = Stream::open(req, progress, hooks).await?;
    let result = async {
        let files = stream.discover().await?;
        let total_files = files.len() as u64 + stream.pending_files();
        let total_bytes = files.iter().map(|f| f.size).sum::<u64>() + stream.pending_bytes();
        stream.set_pending(total_files);
        progress.start(total_files, total_bytes);
        stream.ingest(files, stop).await?;
        progress.finish();
        Ok(())
    }
    .await;
    stream.finish(result, started).await
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

/// Checkpoint metadata: when the source was last listed in full (ms since the epoch).
const META_LAST_FULL_LISTING: &str = "lastFullListingMs";
/// Checkpoint metadata: whether the last full listing's new keys all sorted after the
/// ingested ones.
const META_LEXICAL_ORDER: &str = "lexicalOrder";

/// A batch whose reading died with the process (a crash, not a reported error) this many
/// times has its files retried one per batch; a single file that does it again this many
/// times is quarantined: recorded, reported, and not read again.
const MAX_CRASHED_ATTEMPTS: u32 = 3;
/// Checkpoint metadata: for the unfinished plan being re-run, how many processes died
/// reading it. Written only when a plan is re-run or ends with a reported error, never on
/// the normal path: a plan found unfinished at start-up without a record died once.
const META_IN_FLIGHT: &str = "inFlight";
/// Checkpoint metadata: files of a crashing batch, to be planned one per batch.
const META_SUSPECTS: &str = "suspectFiles";
/// Checkpoint metadata: quarantined files (JSON list).
const META_QUARANTINED: &str = "quarantinedFiles";

/// Deaths counted against one plan (a plan made again gets a new `planned_at_ms`, so an old
/// record never counts against it).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct InFlight {
    batch: u64,
    #[serde(default)]
    planned_at_ms: i64,
    attempts: u32,
}

fn set_deaths(checkpoint: &Checkpoint, plan: &Plan, deaths: u32) -> Result<(), IngestError> {
    let record = InFlight {
        batch: plan.batch,
        planned_at_ms: plan.created_at_ms,
        attempts: deaths,
    };
    checkpoint.set_meta(
        META_IN_FLIGHT,
        &serde_json::to_string(&record).expect("serializes"),
    )?;
    Ok(())
}

/// How many processes died reading `plan`, found unfinished at start-up: the one that
/// planned it, unless a record says otherwise.
fn crashed_attempts(checkpoint: &Checkpoint, plan: &Plan) -> Result<u32, IngestError> {
    let record: Option<InFlight> = checkpoint
        .meta(META_IN_FLIGHT)?
        .and_then(|v| serde_json::from_str(&v).ok());
    Ok(match record {
        Some(r) if r.batch == plan.batch && r.planned_at_ms == plan.created_at_ms => r.attempts,
        _ => 1,
    })
}

fn json_list(checkpoint: &Checkpoint, key: &str) -> Result<Vec<serde_json::Value>, IngestError> {
    Ok(checkpoint
        .meta(key)?
        .and_then(|v| serde_json::from_str(&v).ok())
        .unwrap_or_default())
}

/// Files planned one per batch because a batch holding them crashed the process.
fn suspects(checkpoint: &Checkpoint) -> Result<std::collections::HashSet<String>, IngestError> {
    Ok(json_list(checkpoint, META_SUSPECTS)?
        .into_iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect())
}

/// The quarantined files recorded in the checkpoint.
pub fn quarantined(checkpoint: &Checkpoint) -> Result<Vec<serde_json::Value>, IngestError> {
    json_list(checkpoint, META_QUARANTINED)
}

/// One stream, open: its locked checkpoint, its table, and (once files have been seen)
/// its format and schema.
pub struct Stream<'a> {
    req: &'a IngestRequest,
    telemetry: Telemetry,
    checkpoint: Checkpoint,
    app_id: String,
    sink: DeltaSink,
    store: SchemaStore,
    progress: &'a dyn Progress,
    opts: Option<DecodeOptions>,
    schema: Option<StreamSchema>,
    /// Plans left unfinished by an earlier run; replayed before anything new.
    pending: Vec<Plan>,
    /// Set when an unfinished plan was discarded and its files need planning again.
    replanned: bool,
    summary: Summary,
}

impl<'a> Stream<'a> {
    /// Locks the checkpoint, opens the table, and records the first start.
    pub async fn open(
        req: &'a IngestRequest,
        progress: &'a dyn Progress,
        hooks: &Hooks,
    ) -> Result<Stream<'a>, IngestError> {
        let settings = &req.settings;
        let mut checkpoint = Checkpoint::open(&req.checkpoint)?;
        let sink = DeltaSink::open(&req.table).await?;
        let store = SchemaStore::open(&settings.schema_location)?;
        if checkpoint.is_fresh()? && sink.exists() {
            recover_from_table(req, &mut checkpoint, &sink, &store).await?;
        }
        let app_id = checkpoint.app_id();
        if checkpoint.meta("initialized")?.is_none() {
            if !settings.include_existing_files {
                let listed = req.source.list(settings).await?;
                if !listed.is_empty() {
                    let existing = Plan {
                        batch: u64::MAX,
                        files: planned(&listed),
                        created_at_ms: now_ms(),
                    };
                    checkpoint.mark_existing(&existing)?;
                    info!(
                        files = listed.len(),
                        "Not ingesting files present at the first start (cloudFiles.includeExistingFiles=false)."
                    );
                }
            }
            checkpoint.set_meta("initialized", &now_ms().to_string())?;
        }
        let (_, pending) = checkpoint.pending_plans()?;
        let schema = store.latest()?.map(|v| v.version);
        let telemetry = Telemetry::start(req, hooks);
        telemetry.emit(
            Severity::Info,
            kind::STREAM_STARTED,
            json!({
                "source": req.source.describe(),
                "table": req.table.display().to_string(),
                "checkpoint": checkpoint.describe(),
                "streamId": checkpoint.stream_id(),
                "schemaVersion": schema,
            }),
        );
        if let Some(v) = schema {
            telemetry.metrics.schema_version.store(v, Ordering::Relaxed);
        }
        Ok(Stream {
            req,
            telemetry,
            checkpoint,
            app_id,
            sink,
            store,
            progress,
            opts: None,
            schema: None,
            pending,
            replanned: false,
            summary: Summary {
                schema_version: schema,
                ..Summary::default()
            },
        })
    }

    /// The source's files that are neither ingested nor in an unfinished plan.
    pub async fn discover(&mut self) -> Result<Vec<ListedFile>, IngestError> {
        // Only an object store is listed incrementally; a local walk needs no high-water mark.
        let high_water = match self.req.source {
            Source::S3 { .. } => self.checkpoint.highest_key()?,
            Source::Local { .. } => None,
        };
        let after = self.incremental_start(high_water.as_deref())?;
        let listed = self
            .req
            .source
            .list_after(&self.req.settings, after.as_deref())
            .await?;
        let seen = self.checkpoint.seen_files()?;
        let (mut new, overwritten) = discovery::new_files(listed, &seen, &self.req.settings)?;
        if after.is_none() && matches!(self.req.source, Source::S3 { .. }) {
            self.note_full_listing(&new, high_water.as_deref())?;
        }
        for f in overwritten {
            // One event per file and content, however often it is listed.
            if self
                .telemetry
                .overwritten_reported
                .insert((f.key.clone(), f.size, f.mtime_ms))
            {
                self.telemetry.emit(
                    Severity::Warning,
                    kind::OVERWRITTEN_FILE_IGNORED,
                    json!({ "file": self.req.source.uri(&f.key), "size": f.size, "mtimeMs": f.mtime_ms }),
                );
            }
        }
        new.retain(|f| {
            !self
                .pending
                .iter()
                .any(|p| p.files.iter().any(|pf| pf.key == f.key))
        });
        Ok(new)
    }

    /// A batch that crashed the process [`MAX_CRASHED_ATTEMPTS`] times: its files are
    /// planned again one per batch, or, when it held one file, that file is quarantined
    /// (marked seen without its rows, recorded, reported as an error event and alert).
    /// Returns how many files were quarantined.
    fn isolate_or_quarantine(&self, plan: &Plan) -> Result<u64, IngestError> {
        let mut suspects = json_list(&self.checkpoint, META_SUSPECTS)?;
        if plan.files.len() > 1 {
            warn!(
                batch = plan.batch,
                files = plan.files.len(),
                attempts = MAX_CRASHED_ATTEMPTS,
                "This batch crashed the process every time it was read; its files are now read one per batch to find the one at fault."
            );
            suspects.extend(plan.files.iter().map(|f| json!(f.key)));
            self.checkpoint.set_meta(
                META_SUSPECTS,
                &serde_json::Value::Array(suspects).to_string(),
            )?;
            self.checkpoint.discard_plan(plan.batch)?;
            return Ok(0);
        }
        let mut quarantined = quarantined(&self.checkpoint)?;
        for f in &plan.files {
            let uri = self.req.source.uri(&f.key);
            tracing::error!(
                file = %uri, attempts = MAX_CRASHED_ATTEMPTS,
                "Quarantined: this file crashed the process every time it was read. It is not ingested; fix or replace it under a new name to ingest it."
            );
            self.telemetry.emit(
                Severity::Error,
                kind::FILE_QUARANTINED,
                json!({ "file": uri, "size": f.size, "mtimeMs": f.mtime_ms, "attempts": MAX_CRASHED_ATTEMPTS, "batch": plan.batch }),
            );
            quarantined.push(
                json!({ "path": f.key, "size": f.size, "mtimeMs": f.mtime_ms, "atMs": now_ms() }),
            );
            suspects.retain(|k| k.as_str() != Some(f.key.as_str()));
        }
        self.checkpoint.set_meta(
            META_QUARANTINED,
            &serde_json::Value::Array(quarantined).to_string(),
        )?;
        self.checkpoint.set_meta(
            META_SUSPECTS,
            &serde_json::Value::Array(suspects).to_string(),
        )?;
        self.checkpoint.mark_existing(&Plan {
            batch: u64::MAX,
            files: plan.files.clone(),
            created_at_ms: now_ms(),
        })?;
        self.checkpoint.discard_plan(plan.batch)?;
        Ok(plan.files.len() as u64)
    }

    /// Where an incremental listing starts (`None`: list everything). Only object stores
    /// are listed incrementally, and a full listing still runs every
    /// `cloudFiles.fullListingInterval` to catch a key that arrived out of order.
    fn incremental_start(&self, high_water: Option<&str>) -> Result<Option<String>, IngestError> {
        let settings = &self.req.settings;
        if !matches!(self.req.source, Source::S3 { .. })
            || settings.incremental_listing == IncrementalListing::Never
        {
            return Ok(None);
        }
        let last_full = self
            .checkpoint
            .meta(META_LAST_FULL_LISTING)?
            .and_then(|v| v.parse::<i64>().ok());
        let interval_ms =
            i64::try_from(settings.full_listing_interval.as_millis()).unwrap_or(i64::MAX);
        if last_full.is_none_or(|t| now_ms().saturating_sub(t) >= interval_ms) {
            return Ok(None);
        }
        if settings.incremental_listing == IncrementalListing::Auto
            && self.checkpoint.meta(META_LEXICAL_ORDER)?.as_deref() != Some("true")
        {
            return Ok(None);
        }
        Ok(high_water.map(str::to_string))
    }

    /// Records a full listing: when, and whether its new keys all sort after the ones
    /// already ingested (what `useIncrementalListing=auto` relies on).
    fn note_full_listing(
        &self,
        new: &[ListedFile],
        high_water: Option<&str>,
    ) -> Result<(), IngestError> {
        let mode = self.req.settings.incremental_listing;
        if mode == IncrementalListing::Never {
            return Ok(());
        }
        let late: Vec<&str> = new
            .iter()
            .filter(|f| high_water.is_some_and(|h| f.key.as_str() <= h))
            .map(|f| f.key.as_str())
            .collect();
        let was = self.checkpoint.meta(META_LEXICAL_ORDER)?;
        // Order is judged only on evidence: new keys after an existing high-water mark.
        let ordered = match (high_water, new.is_empty(), late.is_empty()) {
            (_, _, false) => false,
            (Some(_), false, true) => true,
            _ => was.as_deref() == Some("true"),
        };
        if was.as_deref() != Some(if ordered { "true" } else { "false" }) {
            self.checkpoint
                .set_meta(META_LEXICAL_ORDER, if ordered { "true" } else { "false" })?;
            if mode == IncrementalListing::Auto {
                if ordered {
                    info!(
                        "New keys arrive in lexical order: listing incrementally between full listings."
                    );
                } else {
                    info!(late = ?late.iter().take(3).collect::<Vec<_>>(), "New keys sort before ingested ones: listing the whole source each time.");
                }
            }
        }
        if !late.is_empty() && was.as_deref() == Some("true") {
            warn!(files = late.len(), first = %late[0], "A full listing found files that incremental listing had skipped (their keys sort before ingested ones); ingesting them now.");
        }
        // Only worth recording when the next listings may be incremental.
        if ordered || mode == IncrementalListing::Always {
            self.checkpoint
                .set_meta(META_LAST_FULL_LISTING, &now_ms().to_string())?;
        }
        Ok(())
    }

    fn pending_files(&self) -> u64 {
        self.pending.iter().map(|p| p.files.len() as u64).sum()
    }

    fn pending_bytes(&self) -> u64 {
        self.pending
            .iter()
            .flat_map(|p| &p.files)
            .map(|f| f.size)
            .sum()
    }

    /// Sets the files-pending gauge.
    pub fn set_pending(&self, files: u64) {
        self.telemetry
            .metrics
            .files_pending
            .store(files, Ordering::Relaxed);
    }

    /// Ends a run: records `stream_stopped` or `stream_failed` and returns the summary.
    pub async fn finish(
        &self,
        result: Result<(), IngestError>,
        started: Instant,
    ) -> Result<Summary, IngestError> {
        let outcome = self.finish_events(result, started);
        self.telemetry.alerter.close(ALERT_DRAIN).await;
        outcome
    }

    fn finish_events(
        &self,
        result: Result<(), IngestError>,
        started: Instant,
    ) -> Result<Summary, IngestError> {
        let mut summary = self.summary();
        summary.seconds = started.elapsed().as_secs_f64();
        match result {
            Ok(()) => {
                self.telemetry.emit(
                    Severity::Info,
                    kind::STREAM_STOPPED,
                    json!({ "files": summary.files, "rows": summary.rows, "seconds": summary.seconds }),
                );
                Ok(summary)
            }
            Err(e) => {
                let severity = if matches!(e, IngestError::SchemaChanged { .. }) {
                    Severity::Warning
                } else {
                    Severity::Error
                };
                self.telemetry.emit(
                    severity,
                    kind::STREAM_FAILED,
                    json!({ "error": e.to_string() }),
                );
                Err(e)
            }
        }
    }

    /// What the stream has done so far.
    pub fn summary(&self) -> Summary {
        let mut s = self.summary.clone();
        s.schema_version = self
            .schema
            .as_ref()
            .map(|st| st.version.version)
            .or(s.schema_version);
        s.table_version = self.sink.version();
        s
    }

    /// Loads (or infers, from `files` and the pending plans) the format and schema.
    /// Returns false when there is nothing to learn them from yet.
    async fn ensure_schema(&mut self, files: &[ListedFile]) -> Result<bool, IngestError> {
        if self.schema.is_some() {
            return Ok(true);
        }
        let settings = &self.req.settings;
        let Some(format) = resolve_format(&self.checkpoint, settings, files, &self.pending)? else {
            return Ok(false);
        };
        let opts = DecodeOptions::new(format, settings);
        let version = match self.store.latest()? {
            Some(v) => v,
            None => {
                let sample = inference_sample(files, &self.pending, settings);
                if sample.is_empty() && settings.user_schema.is_none() {
                    return Ok(false);
                }
                if let Some(state) = self.speculate(&opts, &sample)? {
                    // The table is created once the first batch has settled the schema.
                    self.opts = Some(opts);
                    self.schema = Some(state);
                    return Ok(true);
                }
                let v =
                    create_first_version(self.req, &self.checkpoint, &self.store, &opts, &sample)?;
                failpoint::hit("after-schema-write");
                announce_first_version(&self.telemetry, &v);
                v
            }
        };
        let before = version.version;
        let version = reconcile(&self.store, version, settings, self.checkpoint.stream_id())?;
        if version.version != before {
            self.telemetry.emit(
                Severity::Warning,
                kind::SCHEMA_EVOLVED,
                json!({
                    "oldVersion": before,
                    "newVersion": version.version,
                    "reason": version.info.reason,
                    "addedColumns": evolution::merge(&self.store.read(before)?.data, &version.data, &[]).1.iter().map(ToString::to_string).collect::<Vec<_>>(),
                }),
            );
        }
        self.telemetry
            .metrics
            .schema_version
            .store(version.version, Ordering::Relaxed);
        let state = StreamSchema::new(version, settings);
        self.sink
            .ensure_created(&state.layout.arrow_schema(), self.checkpoint.stream_id())
            .await?;
        self.opts = Some(opts);
        self.schema = Some(state);
        Ok(true)
    }

    /// A provisional first version for a large JSON-lines or CSV sample, inferred from the
    /// sample's first files only (see [`Speculation`]); `None` where reading the sample
    /// twice is cheap, or the provisional schema cannot be drafted.
    fn speculate(
        &self,
        opts: &DecodeOptions,
        sample: &[ListedFile],
    ) -> Result<Option<StreamSchema>, IngestError> {
        let settings = &self.req.settings;
        let bytes: u64 = sample.iter().map(|f| f.size).sum();
        let one_pass_format = match opts.format {
            Format::Json => !opts.multi_line,
            Format::Csv => true,
            Format::Parquet => false,
        };
        if settings.user_schema.is_some() || !one_pass_format || bytes < SPECULATE_MIN_BYTES {
            return Ok(None);
        }
        let started = Instant::now();
        let mut prefix_bytes = 0u64;
        let prefix: Vec<ListedFile> = sample
            .iter()
            .take_while(|f| {
                let take = prefix_bytes < SPECULATE_PREFIX_BYTES;
                prefix_bytes += f.size;
                take
            })
            .cloned()
            .collect();
        if prefix.len() == sample.len() {
            // The prefix would be the whole sample: inferring first reads no more.
            return Ok(None);
        }
        let inferrer = infer_parallel(self.req, opts, &prefix)?;
        let Ok(draft) = draft_first_version(self.req, &self.checkpoint, Some(inferrer), sample)
        else {
            return Ok(None);
        };
        info!(
            files = prefix.len(),
            sampled_files = sample.len(),
            "Inferred a provisional schema from the first files; the first batch confirms it as it is read."
        );
        let mut state = StreamSchema::new(draft, settings);
        state.speculation = Some(Speculation {
            sample: sample.to_vec(),
            started,
        });
        Ok(Some(state))
    }

    /// Replays unfinished plans, then ingests `files` in batches, checking `stop` between
    /// batches (files not reached are left for the next run).
    pub async fn ingest(
        &mut self,
        files: Vec<ListedFile>,
        stop: &StopFlag,
    ) -> Result<(), IngestError> {
        if !self.ensure_schema(&files).await? {
            if !files.is_empty() || !self.pending.is_empty() {
                info!("No schema can be inferred from these files yet.");
            }
            return Ok(());
        }
        let opts = self.opts.clone().expect("ensure_schema sets the options");
        let mut state = self.schema.take().expect("ensure_schema sets the schema");
        let mut result = self.ingest_with(&opts, &mut state, files, stop).await;
        if result.is_ok() && std::mem::take(&mut self.replanned) {
            // Files of a discarded plan are new again: take them in this run too.
            result = match self.discover().await {
                Ok(again) => self.ingest_with(&opts, &mut state, again, stop).await,
                Err(e) => Err(e),
            };
        }
        self.schema = Some(state);
        result
    }

    async fn ingest_with(
        &mut self,
        opts: &DecodeOptions,
        state: &mut StreamSchema,
        files: Vec<ListedFile>,
        stop: &StopFlag,
    ) -> Result<(), IngestError> {
        let ctx = RunContext {
            req: self.req,
            telemetry: &self.telemetry,
            opts,
            app_id: &self.app_id,
            checkpoint: &self.checkpoint,
            store: &self.store,
            progress: self.progress,
        };
        while let Some(plan) = self.pending.first().cloned() {
            if stop.is_stopped() {
                return Ok(());
            }
            self.sink.refresh().await?;
            if self
                .sink
                .committed_batch(&self.app_id)
                .await?
                .is_some_and(|v| v >= as_i64(plan.batch))
            {
                info!(
                    batch = plan.batch,
                    "Batch had been committed to the table before a restart; marking it done."
                );
                let table_version = self.sink.version().unwrap_or_default();
                self.checkpoint.mark_committed(
                    &plan,
                    &CommitSummary {
                        table_version,
                        ..CommitSummary::default()
                    },
                )?;
                for f in &plan.files {
                    self.progress.file_done(f.size);
                }
            } else if let Some(changed) = changed_since_planned(self.req, &plan) {
                // An exact replay is impossible and nothing of the batch landed: plan again.
                warn!(
                    batch = plan.batch, file = %changed,
                    "A file of an unfinished batch changed since it was planned; the batch is planned again from the current files."
                );
                self.checkpoint.discard_plan(plan.batch)?;
                self.replanned = true;
            } else {
                let deaths = crashed_attempts(&self.checkpoint, &plan)?;
                if deaths >= MAX_CRASHED_ATTEMPTS {
                    self.summary.quarantined_files += self.isolate_or_quarantine(&plan)?;
                    self.replanned = true;
                } else {
                    // Counted before the re-run: if this process dies too, the count says so.
                    set_deaths(&self.checkpoint, &plan, deaths + 1)?;
                    info!(
                        batch = plan.batch,
                        files = plan.files.len(),
                        "Re-running an unfinished batch exactly as planned."
                    );
                    execute(&ctx, state, &mut self.sink, &plan, &mut self.summary).await?;
                }
            }
            self.pending.remove(0);
        }
        let first = self.checkpoint.next_batch()?;
        let suspects = suspects(&self.checkpoint)?;
        for (batch, files) in (first..).zip(split_batches(&files, &self.req.settings, &suspects)) {
            if stop.is_stopped() {
                info!("Stopping between batches; the remaining files are left for the next run.");
                return Ok(());
            }
            let plan = Plan {
                batch,
                files: planned(files),
                created_at_ms: now_ms(),
            };
            self.checkpoint.write_plan(&plan)?;
            failpoint::hit("after-plan");
            execute(&ctx, state, &mut self.sink, &plan, &mut self.summary).await?;
        }
        Ok(())
    }
}

/// The first local file of a plan whose size or modification time differs from the plan
/// (a vanished file is left to `ignoreMissingFiles`).
fn changed_since_planned(req: &IngestRequest, plan: &Plan) -> Option<String> {
    plan.files.iter().find_map(|f| {
        let (path, remote) = req.source.locate(&f.key);
        if remote.is_some() || !path.exists() {
            return None;
        }
        let meta = FileMeta {
            path: String::new(),
            name: String::new(),
            size: f.size,
            mtime_ms: f.mtime_ms,
            partition_values: Vec::new(),
        };
        (!formats::unchanged(&path, &meta)).then(|| req.source.uri(&f.key))
    })
}

/// Rebuilds a lost or damaged checkpoint from the table: finds this stream's earlier
/// identity (the stream id in the surviving `_schemas/N`, else the commits whose recorded
/// source is this source), adopts it so `txn` versions continue, and marks every file those
/// commits hold as ingested. Nothing is ingested twice.
async fn recover_from_table(
    req: &IngestRequest,
    checkpoint: &mut Checkpoint,
    sink: &DeltaSink,
    store: &SchemaStore,
) -> Result<(), IngestError> {
    let commits = sink.autoloader_commits().await?;
    if commits.is_empty() {
        return Ok(());
    }
    let from_schema = store.latest()?.map(|v| v.info.stream_id);
    let source = req.source.describe();
    let stream_of = |c: &serde_json::Value| {
        c.get("streamId")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    let ours: Vec<String> = match &from_schema {
        Some(id)
            if commits
                .iter()
                .any(|(_, c)| stream_of(c).as_deref() == Some(id)) =>
        {
            vec![id.clone()]
        }
        _ => {
            let mut ids: Vec<String> = commits
                .iter()
                .filter(|(_, c)| {
                    c.get("source").and_then(serde_json::Value::as_str) == Some(source.as_str())
                })
                .filter_map(|(_, c)| stream_of(c))
                .collect();
            ids.dedup();
            ids
        }
    };
    let Some(adopt) = ours.last().cloned() else {
        return Ok(());
    };
    let mut files = 0usize;
    let mut batches = 0usize;
    for (_, c) in &commits {
        let Some(id) = stream_of(c) else { continue };
        if !ours.contains(&id) {
            continue;
        }
        // The table's creation commit names the stream but holds no batch.
        let Some(batch) = c.get("batch").and_then(serde_json::Value::as_u64) else {
            continue;
        };
        let planned: Vec<PlannedFile> = c
            .get("files")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| {
                Some(PlannedFile {
                    key: f.get("path")?.as_str()?.to_string(),
                    size: f.get("size")?.as_u64()?,
                    mtime_ms: f.get("mtimeMs")?.as_i64()?,
                })
            })
            .collect();
        files += planned.len();
        batches += 1;
        let plan = Plan {
            batch,
            files: planned,
            created_at_ms: now_ms(),
        };
        // Batches of an older identity are only needed for their files.
        if id == adopt {
            checkpoint.restore_batch(&plan, &CommitSummary::default())?;
        } else {
            checkpoint.mark_existing(&Plan {
                batch: u64::MAX,
                ..plan
            })?;
        }
    }
    checkpoint.adopt_stream_id(&adopt)?;
    checkpoint.set_meta("initialized", &now_ms().to_string())?;
    warn!(
        stream_id = %adopt, batches, files,
        "Checkpoint rebuilt from the table's commit history; those files will not be ingested again."
    );
    Ok(())
}

struct RunContext<'a> {
    req: &'a IngestRequest,
    telemetry: &'a Telemetry,
    opts: &'a DecodeOptions,
    app_id: &'a str,
    checkpoint: &'a Checkpoint,
    store: &'a SchemaStore,
    progress: &'a dyn Progress,
}

/// The schema version batches are read with, and its table layout.
struct StreamSchema {
    version: SchemaVersion,
    layout: Arc<Layout>,
    /// Set while `version` is a provisional first version, not yet written.
    speculation: Option<Speculation>,
}

impl StreamSchema {
    fn new(version: SchemaVersion, settings: &Settings) -> Self {
        let layout = Arc::new(layout_for(&version, settings));
        StreamSchema {
            version,
            layout,
            speculation: None,
        }
    }
}

/// From this much sampled data on, the first schema version is inferred in one pass with
/// the first batch (see [`Speculation`]); below it, reading the sample twice costs little.
const SPECULATE_MIN_BYTES: u64 = 64 << 20;
/// How much of the sample (its first files) the provisional schema is inferred from.
const SPECULATE_PREFIX_BYTES: u64 = 32 << 20;

/// A first schema version inferred from the sample's first files only, to be confirmed
/// or corrected by the types the first batch observes while it is read.
///
/// Auto Loader infers from the whole sample (up to 1,000 files / 50 GB) before it reads
/// a row, so a first run reads its data twice. Here the first batch is read with the
/// provisional schema while every record's types are observed, exactly as inference
/// would; then the schema is settled from the whole sample (files outside the batch, or
/// not read to the end, are inferred on their own), merged in sample order, and written
/// as `_schemas/0`. The same schema as inferring first, so: if it matches the provisional
/// one the batch is committed as read, otherwise the batch is read again with it.
struct Speculation {
    sample: Vec<ListedFile>,
    started: Instant,
}

/// Settles a provisional first version: merges what the batch observed (`observed`, by
/// file key) with inference of the sample's other files, in sample order; writes it as
/// `_schemas/0`, announces it, and creates the table. Also returns whether this call
/// created the table.
async fn settle_first_version(
    ctx: &RunContext<'_>,
    sink: &mut DeltaSink,
    spec: Speculation,
    mut observed: HashMap<String, SchemaInferrer>,
) -> Result<(SchemaVersion, bool), IngestError> {
    let missing: Vec<ListedFile> = spec
        .sample
        .iter()
        .filter(|f| !observed.contains_key(&f.key))
        .cloned()
        .collect();
    let mut inferred_missing = infer_files(ctx.req, ctx.opts, &missing)?.into_iter();
    let mut merged = SchemaInferrer::new();
    for f in &spec.sample {
        let one = match observed.remove(&f.key) {
            Some(o) => Some(o),
            None => inferred_missing.next().flatten(),
        };
        if let Some(o) = one {
            merged.merge(o);
        }
    }
    info!(
        files = spec.sample.len(),
        read_by_the_batch = spec.sample.len() - missing.len(),
        "Settled the schema inferred while reading the first batch."
    );
    let draft = draft_first_version(ctx.req, ctx.checkpoint, Some(merged), &spec.sample)?;
    log_inferred(&draft, spec.started);
    let v = write_first_version(ctx.store, draft)?;
    failpoint::hit("after-schema-write");
    announce_first_version(ctx.telemetry, &v);
    ctx.telemetry
        .metrics
        .schema_version
        .store(v.version, Ordering::Relaxed);
    let layout = layout_for(&v, &ctx.req.settings);
    let created = sink
        .ensure_created(&layout.arrow_schema(), ctx.checkpoint.stream_id())
        .await?;
    Ok((v, created))
}

/// The `schema_inferred` event of a first version.
fn announce_first_version(telemetry: &Telemetry, v: &SchemaVersion) {
    telemetry.emit(
        Severity::Info,
        kind::SCHEMA_INFERRED,
        json!({
            "version": v.version,
            "reason": v.info.reason,
            "columns": v.data.fields.iter().map(|f| format!("{} {}", f.name, f.data_type)).collect::<Vec<_>>(),
            "partitionColumns": v.partition.names().collect::<Vec<_>>(),
            "sampledFiles": v.info.sampled_files,
            "sampledRecords": v.info.sampled_records,
        }),
    );
}

fn log_inferred(v: &SchemaVersion, started: Instant) {
    info!(
        files = v.info.sampled_files, records = v.info.sampled_records,
        seconds = started.elapsed().as_secs_f64(), schema = %v.data,
        "Inferred schema."
    );
}

/// Columns that stay last in the data schema (rescued data, corrupt record).
fn reserved(settings: &Settings) -> Vec<&str> {
    [
        &settings.rescued_data_column,
        &settings.corrupt_record_column,
    ]
    .into_iter()
    .flatten()
    .map(String::as_str)
    .collect()
}

/// Brings the stored schema up to date with the options of this run: columns that new
/// hints (or a changed `schema` option) add, and a rescued-data or corrupt-record column
/// configured since, become the next version. A change of an existing column's type cannot
/// be applied to the table and is refused.
fn reconcile(
    store: &SchemaStore,
    version: SchemaVersion,
    settings: &Settings,
    stream_id: &str,
) -> Result<SchemaVersion, IngestError> {
    let reserved = reserved(settings);
    let (desired, reason) = if let Some(user) = &settings.user_schema {
        (user.clone(), "provided")
    } else if let Some(h) = &settings.schema_hints {
        let hints = parse_hints(h).map_err(|e| IngestError::Config(e.to_string()))?;
        let mut desired = version.data.clone();
        apply_hints(&mut desired, &hints).map_err(IngestError::Config)?;
        (desired, "hints")
    } else {
        (version.data.clone(), "options")
    };
    let conflicts = evolution::type_conflicts(&version.data, &desired);
    if !conflicts.is_empty() {
        return Err(IngestError::Config(format!(
            "the options change the type of stored columns ({}) in {}; a Delta table cannot \
             change a column's type: keep the stored types, or start a new table and checkpoint",
            conflicts.join(", "),
            store.describe_version(version.version).display()
        )));
    }
    let (mut merged, added) = evolution::merge(&version.data, &desired, &reserved);
    let mut changes: Vec<String> = added.iter().map(ToString::to_string).collect();
    for column in &reserved {
        if merged.field(column).is_none() {
            merged.fields.push(Field::new(*column, DataType::String));
            changes.push(format!("{column} STRING"));
        }
    }
    if changes.is_empty() {
        return Ok(version);
    }
    let next = version.version + 1;
    let info = VersionInfo {
        stream_id: stream_id.to_string(),
        created_at_ms: now_ms(),
        reason: reason.to_string(),
        sampled_files: None,
        sampled_records: None,
        sampled_bytes: None,
    };
    let v = store.write(next, &merged, &version.partition, info)?;
    info!(version = next, added = %changes.join(", "), "Schema options add columns; wrote a new schema version.");
    Ok(v)
}

fn as_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn planned(files: &[ListedFile]) -> Vec<PlannedFile> {
    files
        .iter()
        .map(|f| PlannedFile {
            key: f.key.clone(),
            size: f.size,
            mtime_ms: f.mtime_ms,
        })
        .collect()
}

/// The stream's format: the option, else what the checkpoint recorded, else the one the
/// files' extensions agree on. `None` when there is nothing to ingest and nothing known.
fn resolve_format(
    checkpoint: &Checkpoint,
    settings: &Settings,
    candidates: &[ListedFile],
    pending: &[Plan],
) -> Result<Option<Format>, IngestError> {
    let recorded = checkpoint.meta("format")?;
    let format = if let Some(f) = settings.format {
        f
    } else if let Some(r) = recorded.as_deref() {
        match r {
            "json" => Format::Json,
            "csv" => Format::Csv,
            _ => Format::Parquet,
        }
    } else {
        let keys = candidates.iter().map(|f| f.key.as_str()).chain(
            pending
                .iter()
                .flat_map(|p| p.files.iter().map(|f| f.key.as_str())),
        );
        let mut found: Option<Format> = None;
        for key in keys {
            let name = key.rsplit('/').next().unwrap_or(key);
            match (Format::from_file_name(name), found) {
                (None, _) => {
                    return Err(IngestError::Config(format!(
                        "cannot tell the format of {key}; set -o cloudFiles.format=json|csv|parquet (and pathGlobFilter to choose files)"
                    )));
                }
                (Some(f), None) => found = Some(f),
                (Some(f), Some(g)) if f != g => {
                    return Err(IngestError::Config(format!(
                        "the source mixes {g} and {f} files ({key}); set -o cloudFiles.format and pathGlobFilter"
                    )));
                }
                _ => {}
            }
        }
        match found {
            Some(f) => f,
            None => return Ok(None),
        }
    };
    if recorded.as_deref() != Some(&format.to_string()) {
        checkpoint.set_meta("format", &format.to_string())?;
    }
    Ok(Some(format))
}

/// The most recently modified files, up to the sample limits (Auto Loader samples the
/// newest files).
fn inference_sample(
    candidates: &[ListedFile],
    pending: &[Plan],
    settings: &Settings,
) -> Vec<ListedFile> {
    let mut all: Vec<ListedFile> = pending
        .iter()
        .flat_map(|p| &p.files)
        .map(|f| ListedFile {
            key: f.key.clone(),
            size: f.size,
            mtime_ms: f.mtime_ms,
        })
        .chain(candidates.iter().cloned())
        .collect();
    all.sort_by(|a, b| (b.mtime_ms, &b.key).cmp(&(a.mtime_ms, &a.key)));
    let mut bytes = 0u64;
    let mut out = Vec::new();
    for f in all {
        if out.len() >= settings.sample_files || (bytes >= settings.sample_bytes && !out.is_empty())
        {
            break;
        }
        bytes += f.size;
        out.push(f);
    }
    out
}

fn source_file(
    source: &Source,
    key: &str,
    size: u64,
    mtime_ms: i64,
    partition_columns: &[String],
) -> SourceFile {
    let (local_path, remote) = source.locate(key);
    SourceFile {
        local_path,
        remote,
        meta: Arc::new(FileMeta {
            path: source.uri(key),
            name: key.rsplit('/').next().unwrap_or(key).to_string(),
            size,
            mtime_ms,
            partition_values: discovery::partition_values(key, partition_columns),
        }),
    }
}

/// Infers (or takes the user's) schema and writes `_schemas/0`.
fn create_first_version(
    req: &IngestRequest,
    checkpoint: &Checkpoint,
    store: &SchemaStore,
    opts: &DecodeOptions,
    sample: &[ListedFile],
) -> Result<SchemaVersion, IngestError> {
    let started = Instant::now();
    let inferred = if req.settings.user_schema.is_some() {
        None
    } else {
        Some(infer_parallel(req, opts, sample)?)
    };
    let draft = draft_first_version(req, checkpoint, inferred, sample)?;
    if draft.info.sampled_records.is_some() {
        log_inferred(&draft, started);
    }
    write_first_version(store, draft)
}

/// Writes a drafted first version as `_schemas/0`.
fn write_first_version(
    store: &SchemaStore,
    draft: SchemaVersion,
) -> Result<SchemaVersion, IngestError> {
    let v = store.write(0, &draft.data, &draft.partition, draft.info)?;
    info!(location = %store.describe(), version = 0, "Wrote schema version.");
    Ok(v)
}

/// The first schema version (not yet written): the user's schema, or what `inferred`
/// observed over `sample`, with hints applied, the rescued-data and corrupt-record columns
/// added, and partition columns from the paths.
fn draft_first_version(
    req: &IngestRequest,
    checkpoint: &Checkpoint,
    inferred: Option<SchemaInferrer>,
    sample: &[ListedFile],
) -> Result<SchemaVersion, IngestError> {
    let settings = &req.settings;
    let (mut data, reason, records) = match (&settings.user_schema, inferred) {
        (Some(user), _) => (user.clone(), "provided", None),
        (None, None) => {
            return Err(IngestError::Internal(
                "no schema was given or inferred".into(),
            ));
        }
        (None, Some(inferrer)) => {
            let records = inferrer.records;
            let mut data = inferrer.finish();
            if let Some(h) = &settings.schema_hints {
                let hints = parse_hints(h).map_err(|e| IngestError::Config(e.to_string()))?;
                apply_hints(&mut data, &hints).map_err(IngestError::Config)?;
            }
            if data.fields.is_empty() && settings.rescued_data_column.is_none() {
                return Err(IngestError::Config(
                    "no columns could be inferred from the sampled files; provide a schema or hints"
                        .into(),
                ));
            }
            (data, "inferred", Some(records))
        }
    };
    for extra in [
        &settings.rescued_data_column,
        &settings.corrupt_record_column,
    ]
    .into_iter()
    .flatten()
    {
        match data.fields.iter().find(|f| &f.name == extra) {
            Some(f) if f.data_type != DataType::String => {
                return Err(IngestError::Config(format!(
                    "column {extra} must be STRING, the data has it as {}",
                    f.data_type
                )));
            }
            Some(_) => {}
            None => data
                .fields
                .push(Field::new(extra.clone(), DataType::String)),
        }
    }
    let partition_names: Vec<String> = if settings.recursive_file_lookup {
        Vec::new()
    } else if let Some(cols) = &settings.partition_columns {
        cols.clone()
    } else {
        discovery::infer_partition_columns(sample.iter().map(|f| f.key.as_str()))
    };
    let partition = Schema::new(
        partition_names
            .into_iter()
            .filter(|p| {
                let clash = data.fields.iter().any(|f| f.name.eq_ignore_ascii_case(p));
                if clash {
                    warn!(column = %p, "A data column has the partition column's name; the data column wins.");
                }
                !clash
            })
            .map(|p| Field::new(p, DataType::String))
            .collect(),
    );
    let info = VersionInfo {
        stream_id: checkpoint.stream_id().to_string(),
        created_at_ms: now_ms(),
        reason: reason.to_string(),
        sampled_files: records.map(|_| sample.len() as u64),
        sampled_records: records,
        sampled_bytes: records.map(|_| sample.iter().map(|f| f.size).sum()),
    };
    Ok(SchemaVersion {
        version: 0,
        data,
        partition,
        info,
    })
}

/// Infers over the sample on all cores; per-file results merge in sample order.
fn infer_parallel(
    req: &IngestRequest,
    opts: &DecodeOptions,
    sample: &[ListedFile],
) -> Result<SchemaInferrer, IngestError> {
    let mut merged = SchemaInferrer::new();
    for inferrer in infer_files(req, opts, sample)?.into_iter().flatten() {
        merged.merge(inferrer);
    }
    Ok(merged)
}

/// Infers each file on all cores: one result per file, `None` for a file skipped under
/// `ignoreCorruptFiles` / `ignoreMissingFiles`.
fn infer_files(
    req: &IngestRequest,
    opts: &DecodeOptions,
    files: &[ListedFile],
) -> Result<Vec<Option<SchemaInferrer>>, IngestError> {
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(files.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<SchemaInferrer, DecodeError>>>> =
        Mutex::new((0..files.len()).map(|_| None).collect());
    let typed = req.settings.infer_column_types;
    let handle = tokio::runtime::Handle::try_current().ok();
    // These threads may fetch objects on the runtime: let it move its other work off the
    // worker that waits here.
    let in_place = |f: &mut dyn FnMut()| match &handle {
        Some(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f);
        }
        _ => f(),
    };
    in_place(&mut || {
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    // Object-store sources fetch on this runtime from these plain threads.
                    let _runtime = handle.as_ref().map(tokio::runtime::Handle::enter);
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        let Some(f) = files.get(i) else { break };
                        let file = source_file(&req.source, &f.key, f.size, f.mtime_ms, &[]);
                        let mut inferrer = SchemaInferrer::new();
                        let r =
                            formats::infer_file(&file, opts, typed, &mut inferrer).map(|records| {
                                inferrer.records = records;
                                inferrer
                            });
                        results
                            .lock()
                            .expect("no worker panics while holding the lock")[i] = Some(r);
                    }
                });
            }
        })
    });
    let mut out = Vec::with_capacity(files.len());
    for r in results.into_inner().expect("workers are done") {
        match r {
            Some(Ok(inferrer)) => out.push(Some(inferrer)),
            Some(Err(e)) if skippable(&e, &req.settings) => {
                warn!(error = %e, "Skipping a file during inference.");
                out.push(None);
            }
            Some(Err(e)) => return Err(e.into()),
            None => out.push(None),
        }
    }
    Ok(out)
}

fn skippable(e: &DecodeError, settings: &Settings) -> bool {
    (settings.ignore_corrupt_files && e.is_corrupt_file())
        || (settings.ignore_missing_files && matches!(e, DecodeError::Missing { .. }))
}

/// The table layout of a schema version.
fn layout_for(version: &SchemaVersion, settings: &Settings) -> Layout {
    let include_metadata =
        settings.include_metadata && version.data.field(METADATA_COLUMN).is_none();
    if settings.include_metadata && !include_metadata {
        warn!("The data has its own _metadata column; it wins over the lineage column.");
    }
    Layout {
        data: version.data.clone(),
        partition: version.partition.clone(),
        rescued: settings
            .rescued_data_column
            .clone()
            .filter(|c| version.data.field(c).is_some()),
        corrupt: settings
            .corrupt_record_column
            .clone()
            .filter(|c| version.data.field(c).is_some()),
        include_metadata,
    }
}

fn split_batches<'a>(
    files: &'a [ListedFile],
    settings: &Settings,
    suspects: &std::collections::HashSet<String>,
) -> Vec<&'a [ListedFile]> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < files.len() {
        // A file suspected of crashing the process goes alone.
        if suspects.contains(&files[start].key) {
            out.push(&files[start..=start]);
            start += 1;
            continue;
        }
        let mut end = start;
        let mut bytes = 0u64;
        while end < files.len()
            && end - start < settings.max_files_per_trigger
            && !suspects.contains(&files[end].key)
        {
            if settings
                .max_bytes_per_trigger
                .is_some_and(|max| bytes >= max)
            {
                break;
            }
            bytes += files[end].size;
            end += 1;
        }
        out.push(&files[start..end]);
        start = end;
    }
    out
}

enum Msg {
    /// Decoded rows for the shared writer, with their share of [`IN_FLIGHT_MIB`].
    Batch(RecordBatch, tokio::sync::OwnedSemaphorePermit),
    Done {
        index: usize,
        stats: FileStats,
    },
    Failed {
        index: usize,
        error: DecodeError,
    },
    /// A decoding thread's own writer failed (a full disk): the batch cannot be written.
    WriteFailed(SinkError),
}

/// What reading a batch's files gave: stats per file, or the first file that failed.
type ReadOutcome = Result<Vec<FileStats>, (usize, DecodeError)>;

/// Decoded rows (MiB of Arrow memory) that may wait for the shared writer at once; a
/// larger batch takes the whole budget, so it waits alone.
const IN_FLIGHT_MIB: usize = 64;

/// From this many bytes in a batch, each decoding thread encodes its own Parquet files.
const PARALLEL_ENCODE_BYTES: u64 = 64 << 20;

/// Reads, writes and commits one planned batch, then marks it done. A reported error
/// records that no process died on this plan: only deaths count towards quarantine (see
/// [`MAX_CRASHED_ATTEMPTS`]).
async fn execute(
    ctx: &RunContext<'_>,
    state: &mut StreamSchema,
    sink: &mut DeltaSink,
    plan: &Plan,
    summary: &mut Summary,
) -> Result<(), IngestError> {
    let result = execute_counted(ctx, state, sink, plan, summary).await;
    if result.is_err()
        && let Err(e) = set_deaths(ctx.checkpoint, plan, 0)
    {
        // The batch's own error is the one to report (a full disk fails both).
        warn!(error = %e, "Cannot record that the batch ended with an error.");
    }
    result
}

async fn execute_counted(
    ctx: &RunContext<'_>,
    state: &mut StreamSchema,
    sink: &mut DeltaSink,
    plan: &Plan,
    summary: &mut Summary,
) -> Result<(), IngestError> {
    let started = Instant::now();
    let partition_columns: Vec<String> =
        state.layout.partition.names().map(str::to_string).collect();
    let files: Vec<SourceFile> = plan
        .files
        .iter()
        .map(|f| {
            source_file(
                &ctx.req.source,
                &f.key,
                f.size,
                f.mtime_ms,
                &partition_columns,
            )
        })
        .collect();
    let mut skip: Vec<bool> = vec![false; files.len()];
    let mut skipped_reasons: Vec<String> = Vec::new();
    // A file skipped under ignoreCorruptFiles/ignoreMissingFiles may have emitted rows
    // before it failed: the batch is then rewritten without it.
    let settings = &ctx.req.settings;
    let evolving = matches!(
        settings.evolution_mode,
        EvolutionMode::AddNewColumns | EvolutionMode::FailOnNewColumns
    );
    // While evolving, a read stops at the first new field, so the batch that meets new
    // columns is not read in full twice (once for nothing). Turned off if that read finds
    // nothing to evolve after all, so the batch is then read in full.
    let mut stop_at_new_fields = evolving;
    if let Some(spec) = &state.speculation {
        // One pass pays only when the batch holds most of the sample.
        let planned: std::collections::HashSet<&str> =
            plan.files.iter().map(|f| f.key.as_str()).collect();
        let sampled: u64 = spec.sample.iter().map(|f| f.size).sum();
        let in_batch: u64 = spec
            .sample
            .iter()
            .filter(|f| planned.contains(f.key.as_str()))
            .map(|f| f.size)
            .sum();
        if in_batch * 2 < sampled {
            let spec = state.speculation.take().expect("checked above");
            let (v, _) = settle_first_version(ctx, sink, spec, HashMap::new()).await?;
            *state = StreamSchema::new(v, settings);
        }
    }
    let (writer, stats) = loop {
        let observe = state.speculation.is_some();
        // Writers for a table not created yet take the layout's schema as the table's.
        let table_was_missing = !sink.exists();
        let (writer, read) = read_files(
            ctx,
            &state.layout,
            &files,
            &skip,
            sink,
            stop_at_new_fields,
            observe,
        )
        .await?;
        if let Some(spec) = state.speculation.take() {
            let observed: HashMap<String, SchemaInferrer> = match &read {
                Ok(stats) => plan
                    .files
                    .iter()
                    .zip(stats)
                    .filter_map(|(f, s)| s.observed.clone().map(|o| (f.key.clone(), o)))
                    .collect(),
                Err(_) => HashMap::new(),
            };
            let (v, created) = settle_first_version(ctx, sink, spec, observed).await?;
            if v.data != state.version.data || v.partition != state.version.partition {
                info!(
                    "The whole sample's schema differs from the provisional one; reading the batch again."
                );
                writer.abort();
                *state = StreamSchema::new(v, settings);
                continue;
            }
            if table_was_missing && !created {
                // Another stream created the table meanwhile, with its own schema: write
                // again with writers made for that table.
                writer.abort();
                state.version = v;
                continue;
            }
            state.version = v;
        }
        match read {
            Ok(stats) => {
                if !evolving || !stats.iter().any(|s| s.new_fields) {
                    break (writer, stats);
                }
                // Some file has fields the schema lacks: infer those files and decide.
                let flagged: Vec<ListedFile> = plan
                    .files
                    .iter()
                    .zip(&stats)
                    .filter(|(_, s)| s.new_fields)
                    .map(|(f, _)| ListedFile {
                        key: f.key.clone(),
                        size: f.size,
                        mtime_ms: f.mtime_ms,
                    })
                    .collect();
                let observed = infer_parallel(ctx.req, ctx.opts, &flagged)?.finish();
                let reserved = reserved(settings);
                match evolution::decide(
                    &state.version.data,
                    &observed,
                    settings.evolution_mode,
                    &reserved,
                ) {
                    Outcome::Unchanged if stop_at_new_fields => {
                        writer.abort();
                        stop_at_new_fields = false;
                        continue;
                    }
                    Outcome::Unchanged => break (writer, stats),
                    Outcome::Reject { added } => {
                        writer.abort();
                        let files: Vec<String> =
                            flagged.iter().map(|f| ctx.req.source.uri(&f.key)).collect();
                        ctx.telemetry.emit(
                            Severity::Error,
                            kind::NEW_COLUMNS_REJECTED,
                            json!({
                                "version": state.version.version,
                                "addedColumns": added.iter().map(ToString::to_string).collect::<Vec<_>>(),
                                "files": files,
                            }),
                        );
                        return Err(IngestError::NewColumnsRejected { files, added });
                    }
                    Outcome::Evolve { schema, added } => {
                        writer.abort();
                        let next = state.version.version + 1;
                        let info = VersionInfo {
                            stream_id: ctx.checkpoint.stream_id().to_string(),
                            created_at_ms: now_ms(),
                            reason: "evolved".into(),
                            sampled_files: Some(flagged.len() as u64),
                            sampled_records: None,
                            sampled_bytes: Some(flagged.iter().map(|f| f.size).sum()),
                        };
                        let v = ctx
                            .store
                            .write(next, &schema, &state.version.partition, info)?;
                        failpoint::hit("after-schema-evolve");
                        let added_text: Vec<String> =
                            added.iter().map(ToString::to_string).collect();
                        warn!(
                            version = next, added = %added_text.join(", "),
                            file = %ctx.req.source.uri(&flagged[0].key),
                            "Schema evolved: new columns added."
                        );
                        summary
                            .evolutions
                            .push(format!("version {next}: +{}", added_text.join(", +")));
                        ctx.telemetry.emit(
                            Severity::Warning,
                            kind::SCHEMA_EVOLVED,
                            json!({
                                "oldVersion": state.version.version,
                                "newVersion": next,
                                "reason": "evolved",
                                "addedColumns": added_text,
                                "file": ctx.req.source.uri(&flagged[0].key),
                                "batch": plan.batch,
                            }),
                        );
                        ctx.telemetry
                            .metrics
                            .schema_version
                            .store(next, Ordering::Relaxed);
                        *state = StreamSchema::new(v, settings);
                        if settings.stop_on_schema_change {
                            return Err(IngestError::SchemaChanged {
                                version: next,
                                added,
                            });
                        }
                        // Read the batch again with the new schema.
                        continue;
                    }
                }
            }
            Err((index, error)) => {
                writer.abort();
                if skippable(&error, &ctx.req.settings) {
                    warn!(error = %error, "Skipping file and rewriting the batch without it.");
                    ctx.telemetry.emit(
                        Severity::Warning,
                        kind::CORRUPT_FILE_SKIPPED,
                        json!({ "file": files[index].meta.path, "error": error.to_string(), "batch": plan.batch }),
                    );
                    ctx.telemetry
                        .metrics
                        .corrupt_files
                        .fetch_add(1, Ordering::Relaxed);
                    skip[index] = true;
                    skipped_reasons.push(error.to_string());
                    continue;
                }
                return Err(error.into());
            }
        }
    };
    let rows: u64 = stats.iter().map(|s| s.rows).sum();
    let rescued_rows: u64 = stats.iter().map(|s| s.rescued_rows).sum();
    let dropped: u64 = stats.iter().map(|s| s.dropped_values).sum();
    let bytes: u64 = plan
        .files
        .iter()
        .zip(&skip)
        .filter(|(_, s)| !**s)
        .map(|(f, _)| f.size)
        .sum();
    if dropped > 0 {
        warn!(
            values = dropped,
            "Values did not fit the schema and no rescuedDataColumn is set; they were dropped."
        );
    }
    let mut unknown: Vec<&str> = stats
        .iter()
        .flat_map(|s| s.unknown_names.iter().map(String::as_str))
        .collect();
    unknown.sort_unstable();
    unknown.dedup();
    if !unknown.is_empty() {
        warn!(columns = %unknown.join(", "), "Columns not in the schema were kept in the rescued data.");
    }
    let info = json!({
        "streamId": ctx.checkpoint.stream_id(),
        "source": ctx.req.source.describe(),
        "batch": plan.batch,
        "schemaVersion": state.version.version,
        "rows": rows,
        "rescuedRows": rescued_rows,
        "files": plan.files.iter().zip(&skip).map(|(f, s)| json!({
            "path": f.key, "size": f.size, "mtimeMs": f.mtime_ms, "skipped": *s,
        })).collect::<Vec<_>>(),
    });
    let table_version = sink.commit(writer, ctx.app_id, plan.batch, info).await?;
    if table_version % RELOAD_EVERY_VERSIONS == 0 {
        sink.reload().await?;
    }
    let commit = CommitSummary {
        table_version,
        rows,
        rescued_rows,
        bytes,
        schema_version: state.version.version,
        skipped: skipped_reasons,
    };
    ctx.checkpoint.mark_committed(plan, &commit)?;
    failpoint::hit("after-mark");
    let skipped = skip.iter().filter(|s| **s).count() as u64;
    info!(
        batch = plan.batch,
        files = plan.files.len(),
        rows,
        rescued_rows,
        skipped,
        version = table_version,
        seconds = started.elapsed().as_secs_f64(),
        "Committed batch."
    );
    let seconds = started.elapsed().as_secs_f64();
    let files_done = plan.files.len() as u64 - skipped;
    ctx.telemetry
        .metrics
        .batch(files_done, rows, bytes, rescued_rows, seconds);
    ctx.telemetry.emit(
        Severity::Info,
        kind::BATCH_COMMITTED,
        json!({
            "batch": plan.batch, "files": files_done, "rows": rows, "bytes": bytes,
            "rescuedRows": rescued_rows, "skippedFiles": skipped, "seconds": seconds,
            "tableVersion": table_version, "schemaVersion": state.version.version,
        }),
    );
    report_rescue(ctx, plan, &files, &stats, rows, rescued_rows, state);
    summary.batches += 1;
    summary.files += plan.files.len() as u64 - skipped;
    summary.skipped_files += skipped;
    summary.rows += rows;
    summary.bytes += bytes;
    summary.rescued_rows += rescued_rows;
    Ok(())
}

/// Records what a batch rescued: one `rescued_data_seen` event (keys, share, first file)
/// and one `type_mismatch` event per column whose values did not fit.
fn report_rescue(
    ctx: &RunContext<'_>,
    plan: &Plan,
    files: &[SourceFile],
    stats: &[FileStats],
    rows: u64,
    rescued_rows: u64,
    state: &StreamSchema,
) {
    let mut all = crate::rows::RescueStats::default();
    for s in stats {
        all.merge(&s.rescue);
    }
    if all.keys.is_empty() {
        return;
    }
    let first_file = stats
        .iter()
        .position(|s| !s.rescue.keys.is_empty())
        .map(|i| files[i].meta.path.clone());
    let has_rescue_column = state.layout.rescued.is_some();
    let mismatches = all.keys_of(RescueKind::TypeMismatch);
    if rescued_rows > 0 {
        ctx.telemetry.emit(
            Severity::Warning,
            kind::RESCUED_DATA_SEEN,
            json!({
                "batch": plan.batch,
                "rows": rows,
                "rescuedRows": rescued_rows,
                "share": if rows == 0 { 0.0 } else { rescued_rows as f64 / rows as f64 },
                "keys": all.keys.keys().collect::<Vec<_>>(),
                "newColumns": all.keys_of(RescueKind::NewColumn),
                "typeMismatches": mismatches,
                "caseMismatches": all.keys_of(RescueKind::CaseMismatch),
                "malformedRecords": all.keys.get(crate::options::CORRUPT_RECORD).map_or(0, |(_, n)| *n),
                "file": first_file,
            }),
        );
    }
    for column in mismatches {
        let n = all.keys.get(column).map_or(0, |(_, n)| *n);
        let file = stats
            .iter()
            .position(|s| s.rescue.keys.contains_key(column))
            .map(|i| files[i].meta.path.clone());
        let expected = state
            .version
            .data
            .field(column)
            .map(|f| f.data_type.to_string());
        ctx.telemetry.emit(
            if has_rescue_column {
                Severity::Warning
            } else {
                Severity::Error
            },
            kind::TYPE_MISMATCH,
            json!({
                "batch": plan.batch, "column": column, "expectedType": expected, "rows": n,
                "rescued": has_rescue_column, "file": file,
            }),
        );
    }
}

/// Reads the files of a batch in parallel and writes their rows, returning the writers
/// that hold them (to commit or abort) and per-file stats; the inner error is the first
/// file that failed (the caller decides whether to skip it). With `stop_at_new_fields`,
/// reading stops at the first field the schema lacks (no further file is started, and
/// that file stops there): the stats are then partial, and the caller evolves and reads
/// the batch again.
///
/// A large batch of several files gives each decoding thread its own writer, so Parquet
/// encoding runs on every core; a small one streams into one writer on the async side, so
/// it still becomes one Parquet file.
async fn read_files(
    ctx: &RunContext<'_>,
    layout: &Arc<Layout>,
    files: &[SourceFile],
    skip: &[bool],
    sink: &DeltaSink,
    stop_at_new_fields: bool,
    observe_types: bool,
) -> Result<(BatchWriters, ReadOutcome), IngestError> {
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(files.len().max(1));
    let bytes: u64 = files
        .iter()
        .zip(skip)
        .filter(|(_, s)| !**s)
        .map(|(f, _)| f.meta.size)
        .sum();
    let encode_in_workers = workers > 1 && bytes >= PARALLEL_ENCODE_BYTES;
    let schema = layout.arrow_schema();
    let partition_columns: Vec<String> = layout.partition.names().map(str::to_string).collect();
    let mut shared = sink.writer(&schema, &partition_columns)?;
    let (tx, mut rx) = mpsc::channel::<Msg>(workers * 2);
    let next = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let files_arc: Arc<Vec<SourceFile>> = Arc::new(files.to_vec());
    let skip_arc: Arc<Vec<bool>> = Arc::new(skip.to_vec());
    let runtime = tokio::runtime::Handle::current();
    let in_flight = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT_MIB));
    let mut handles = Vec::new();
    for _ in 0..workers {
        let (tx, next, stop, files, skip, runtime, in_flight) = (
            tx.clone(),
            Arc::clone(&next),
            Arc::clone(&stop),
            Arc::clone(&files_arc),
            Arc::clone(&skip_arc),
            runtime.clone(),
            Arc::clone(&in_flight),
        );
        let mut own = if encode_in_workers {
            Some(sink.writer(&schema, &partition_columns)?)
        } else {
            None
        };
        let mut opts = ctx.opts.clone();
        opts.stop_at_new_fields = stop_at_new_fields;
        opts.observe_types =
            observe_types.then(|| ctx.opts.infer_options(ctx.req.settings.infer_column_types));
        let layout = Arc::clone(layout);
        handles.push(tokio::task::spawn_blocking(move || {
            loop {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let index = next.fetch_add(1, Ordering::SeqCst);
                let Some(file) = files.get(index) else { break };
                if skip[index] {
                    if tx
                        .blocking_send(Msg::Done {
                            index,
                            stats: FileStats::default(),
                        })
                        .is_err()
                    {
                        break;
                    }
                    continue;
                }
                if failpoint::armed() {
                    failpoint::hit(&failpoint::read_point(&file.meta.name));
                }
                let mut write_error = None;
                let mut emit = |b: RecordBatch| match own.as_mut() {
                    // A blocking thread may wait on the runtime: the write encodes here,
                    // and only its file I/O goes through the runtime.
                    Some(w) => match runtime.block_on(w.write(b)) {
                        Ok(()) => true,
                        Err(e) => {
                            write_error = Some(e);
                            false
                        }
                    },
                    None => {
                        // Decoded batches wait for the writer within a memory budget, so a
                        // file of huge records does not queue several of them.
                        let mib = (b.get_array_memory_size() >> 20).clamp(1, IN_FLIGHT_MIB);
                        match runtime
                            .block_on(Arc::clone(&in_flight).acquire_many_owned(mib as u32))
                        {
                            Ok(permit) => tx.blocking_send(Msg::Batch(b, permit)).is_ok(),
                            Err(_) => false,
                        }
                    }
                };
                let decoded = formats::decode_file(file, &opts, &layout, &mut emit);
                let msg = match (decoded, write_error) {
                    (_, Some(error)) => Msg::WriteFailed(error),
                    (Ok(stats), None) => {
                        if stop_at_new_fields && stats.new_fields {
                            stop.store(true, Ordering::SeqCst);
                        }
                        Msg::Done { index, stats }
                    }
                    (Err(error), None) => Msg::Failed { index, error },
                };
                if tx.blocking_send(msg).is_err() {
                    break;
                }
            }
            own
        }));
    }
    drop(tx);
    let mut stats: Vec<FileStats> = vec![FileStats::default(); files.len()];
    let mut failure: Option<(usize, DecodeError)> = None;
    let mut write_failure: Option<SinkError> = None;
    let mut written_batches = 0u64;
    while let Some(msg) = rx.recv().await {
        match msg {
            Msg::Batch(b, _permit) => {
                if failure.is_none() && write_failure.is_none() {
                    if let Err(e) = shared.write(b).await {
                        write_failure = Some(e);
                        stop.store(true, Ordering::SeqCst);
                        continue;
                    }
                    written_batches += 1;
                    if written_batches == 1 {
                        failpoint::hit("mid-read");
                    }
                }
            }
            Msg::Done { index, stats: s } => {
                ctx.progress.file_done(files[index].meta.size);
                stats[index] = s;
            }
            Msg::Failed { index, error } => {
                if failure.is_none() {
                    failure = Some((index, error));
                    stop.store(true, Ordering::SeqCst);
                }
            }
            Msg::WriteFailed(e) => {
                if write_failure.is_none() {
                    write_failure = Some(e);
                    stop.store(true, Ordering::SeqCst);
                }
            }
        }
    }
    let mut writers = BatchWriters(vec![shared]);
    for h in handles {
        let own = h
            .await
            .map_err(|e| IngestError::Internal(format!("decoder thread failed: {e}")))?;
        writers.0.extend(own);
    }
    if let Some(e) = write_failure {
        writers.abort();
        return Err(e.into());
    }
    if encode_in_workers {
        // The rows are in the writers' files, not committed: what "mid-read" tests.
        failpoint::hit("mid-read");
    }
    Ok((
        writers,
        match failure {
            Some(f) => Err(f),
            None => Ok(stats),
        },
    ))
}
