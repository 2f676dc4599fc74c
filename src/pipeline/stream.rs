//! One stream, open: recovery, discovery, replay of unfinished plans, then new batches.

use crate::pipeline::ahead::Ahead;
use crate::pipeline::batch::execute;
use crate::pipeline::plan::{as_i64, changed_since_planned, new_files, split_batches};
use crate::pipeline::run_context::RunContext;
use crate::pipeline::schema::first_version::{
    announce_first_version, create_first_version, inference_sample, reconcile, resolve_format,
};
use crate::pipeline::schema::one_pass::provisional_first_version;
use crate::pipeline::schema::{ActiveSchema, layout_for};
use crate::pipeline::shared_table::align_to_current_table;
use crate::pipeline::{
    ALERT_DRAIN, IngestError, IngestRequest, Progress, StopFlag, Summary, own_output,
};
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::json;
use tracing::{debug, info, warn};

use crate::checkpoint::claims::{self, Claim, Claimed, Claims, Worker};
use crate::checkpoint::crash::MAX_CRASHED_ATTEMPTS;
use crate::checkpoint::{Checkpoint, CommitSummary, Plan, SOURCE_POSITION};

/// Checkpoint metadata: when a snapshot flow last took a snapshot (ms since the epoch).
const SNAPSHOT_LAST_TAKEN: &str = "snapshotLastTakenMs";
use crate::clock::now_ms;
use crate::formats::DecodeOptions;
use crate::options::{Format, IncrementalListing};
use crate::schema::evolution;
use crate::schema::store::{SchemaStore, SchemaVersion, VersionInfo};
use crate::source::incremental::{self, ListingState};
use crate::source::{FileRef, Source};
use crate::target::{CdcTarget, DeltaAppend, Target};
use crate::telemetry::events::{Severity, kind};
use crate::telemetry::{Hooks, Telemetry};
use crate::testing::failpoint;

/// One stream, open: its locked checkpoint, its table, and (once files have been seen)
/// its format and schema.
pub struct StreamRun<'a> {
    req: &'a IngestRequest,
    /// The request's source, leaving out the stream's own locations.
    source: Source,
    telemetry: Telemetry,
    checkpoint: Checkpoint,
    app_id: String,
    sink: Box<dyn Target>,
    store: SchemaStore,
    progress: &'a dyn Progress,
    opts: Option<DecodeOptions>,
    schema: Option<ActiveSchema>,
    /// Plans left unfinished by an earlier run; replayed before anything new.
    pending: Vec<Plan>,
    /// Set when an unfinished plan was discarded and its files need planning again.
    replanned: bool,
    /// Whether the declared table properties are on the table (once it exists).
    properties_applied: bool,
    /// Whether the source has been listed yet in this run.
    listed: bool,
    /// Snapshot flows: the units taken in this run, and those found unchanged.
    snapshots_taken: std::collections::HashSet<String>,
    snapshots_unchanged: std::collections::HashSet<String>,
    /// The overdue snapshot last reported: (last snapshot time, intervals missed).
    overdue_reported: Option<(i64, i64)>,
    summary: Summary,
    /// Auto compaction (`optimize.autoCompact`): the one running in the background, and
    /// the stream's batch count when it was started.
    compaction: Option<tokio::task::JoinHandle<()>>,
    batches_at_compaction: u64,
    /// `--worker`: the stream's claims and this process's slot.
    claims: Option<(Claims, u32)>,
    /// Whether the checkpoint holds the flow's definition (else the first plan records it).
    definition_recorded: bool,
    /// Where rows a `quarantine` expectation keeps out land (when a rule quarantines).
    quarantine: Option<crate::target::quarantine::QuarantineTable>,
}

/// Competing workers share the stream's `_schemas`: a version another worker wrote since
/// this one last looked (it evolved the schema) becomes the active one before the next
/// batch is read, so a batch is read with every column the stream knows of. A worker that
/// missed it would still land its rows (the table's schema is widened against the table at
/// each commit attempt, `target/delta.rs`), but with the new columns of its own files
/// evolved again and its batches recorded under the old version.
fn newer_shared_schema(
    store: &SchemaStore,
    req: &IngestRequest,
    state: &mut ActiveSchema,
) -> Result<(), IngestError> {
    if state.one_pass.is_some() {
        return Ok(());
    }
    let Some(latest) = store.latest()? else {
        return Ok(());
    };
    if latest.version > state.version.version {
        info!(
            from = state.version.version,
            to = latest.version,
            "Another worker evolved the schema; reading the next batch with its version."
        );
        *state = ActiveSchema::new(latest, req);
    }
    Ok(())
}

/// `--worker` fits the stream: competing workers share its files through a queue, and
/// append (a CDC target has one writer).
fn check_worker(req: &IngestRequest) -> Result<(), IngestError> {
    if req.worker.is_none() {
        return Ok(());
    }
    if req.settings.notifications.is_none() {
        return Err(IngestError::Config(
            "--worker: competing workers share a stream's new files through its queue; set \
             cloudFiles.useNotifications=true (a listing would hand every worker every file)"
                .into(),
        ));
    }
    if req.cdc.is_some() {
        return Err(IngestError::Config(
            "--worker: a CDC target has one writer, so its stream runs as one process; leave \
             --worker out"
                .into(),
        ));
    }
    Ok(())
}

/// The stream's checkpoint, locked; with `--worker`, a worker slot's under it (the first
/// free one for `auto`), with its location and number.
fn open_checkpoint(
    req: &IngestRequest,
) -> Result<(Checkpoint, crate::location::Location, Option<u32>), IngestError> {
    let slots = match req.worker {
        None => {
            let checkpoint = Checkpoint::open(&req.checkpoint, &req.storage)?;
            return Ok((checkpoint, req.checkpoint.clone(), None));
        }
        Some(Worker::Slot(k)) => k..k + 1,
        Some(Worker::Auto) => 0..claims::MAX_SLOTS,
    };
    // A starting worker looks at the other slots by locking each for a moment (to adopt
    // a dead worker's), so a slot found locked may be free a moment later. `auto` takes
    // the lowest free slot: a lower one found locked is tried again for a moment before a
    // higher one is kept (a restarted worker takes its dead slot back, not a new one), and
    // with every slot locked each is tried again for a while before the worker gives up
    // (exit 75).
    let started = std::time::Instant::now();
    loop {
        let mut busy = None;
        for slot in slots.clone() {
            let location = claims::slot_location(&req.checkpoint, slot);
            match Checkpoint::open(&location, &req.storage) {
                Ok(checkpoint) => {
                    if busy.is_some() && started.elapsed() < LOWER_SLOT_GRACE {
                        // Let the lower slot's look end: this one is released meanwhile.
                        break;
                    }
                    info!(slot, checkpoint = %location, "Took a worker slot.");
                    return Ok((checkpoint, location, Some(slot)));
                }
                Err(e @ crate::checkpoint::CheckpointError::Locked { .. }) => busy = Some(e),
                Err(e) => return Err(e.into()),
            }
        }
        let busy = busy.expect("at least one slot was tried");
        if started.elapsed() >= SLOT_GRACE {
            return Err(busy.into());
        }
        debug!(error = %busy, "A worker slot tried is locked; trying again.");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// How long a starting worker tries again for a slot it found locked (another worker's
/// look at it lasts well under this; a live holder keeps it, and the worker exits 75).
const SLOT_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// How long `--worker auto` waits for a lower slot found locked before it keeps a higher
/// free one (a look lasts milliseconds; a live holder costs a scaled-up worker this much).
const LOWER_SLOT_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// `cloudFiles.cleanSource` fits the stream: a source of files (not a Delta table, not a
/// snapshot folder that cleaning would change), and a move destination of the source's
/// kind, outside it.
fn check_clean_source(
    req: &IngestRequest,
    clean: &crate::options::CleanSource,
) -> Result<(), IngestError> {
    let refuse = |why: &str| {
        Err(IngestError::Config(format!(
            "cloudFiles.cleanSource: {why}"
        )))
    };
    if req.source.reads_delta() {
        return refuse("a Delta table source is read, never cleaned");
    }
    if req
        .snapshot
        .as_ref()
        .is_some_and(|s| s.unit != crate::flow::snapshot::Unit::File)
    {
        return refuse(
            "a folder or partition snapshot with files cleaned away would be read again as a \
             changed snapshot; clean only with snapshot.unit = \"file\"",
        );
    }
    if let crate::options::CleanAction::Move(dest) = &clean.action {
        if dest.as_local().is_some() != req.source.local_root().is_some() {
            return refuse(&format!(
                "moveDestination {dest} must be of the source's kind (a local folder for a \
                 local source, the source's S3 bucket for an S3 one)"
            ));
        }
        let source_bucket = req
            .source
            .describe()
            .strip_prefix("s3://")
            .and_then(|rest| rest.split('/').next().map(str::to_string));
        if let (Some(bucket), crate::location::Location::S3(url)) = (&source_bucket, dest)
            && url.host_str() != Some(bucket.as_str())
        {
            return refuse(&format!(
                "moveDestination {dest} must be in the source's bucket ({bucket}): files are \
                 moved by a copy within the bucket"
            ));
        }
        if !matches!(req.source.overlap(dest), crate::source::Overlap::Apart) {
            return refuse(&format!(
                "moveDestination {dest} must lie outside the source {} (moved files would \
                 be listed again)",
                req.source.describe()
            ));
        }
    }
    Ok(())
}

/// The checkpoint remembers the schema location it started with and refuses another: a
/// different one (or a different default) would silently infer a fresh `_schemas/0`.
fn keep_one_schema_location(
    checkpoint: &Checkpoint,
    location: &crate::location::Location,
) -> Result<(), IngestError> {
    const KEY: &str = "schemaLocation";
    let given = location.resolved().to_string();
    match checkpoint.meta(KEY)? {
        Some(recorded) if recorded != given => Err(IngestError::SchemaLocationChanged {
            checkpoint: checkpoint.describe(),
            recorded,
            given,
        }),
        Some(_) => Ok(()),
        None => Ok(checkpoint.set_meta(KEY, &given)?),
    }
}

impl Drop for StreamRun<'_> {
    /// However the run ends, streams waiting to follow this one go on.
    fn drop(&mut self) {
        self.req.first_writer.release();
    }
}

/// What a request cannot be, checked before anything is opened.
fn check_request(req: &IngestRequest) -> Result<(), IngestError> {
    let settings = &req.settings;
    if req.snapshot.is_some() && req.source.reads_delta() {
        return Err(IngestError::Config(
            "a snapshot flow reads files that are replaced; a Delta table source is read \
             commit by commit: leave out [stream.snapshot]"
                .into(),
        ));
    }
    if let Some(clean) = &settings.clean_source {
        check_clean_source(req, clean)?;
    }
    if settings.backfill_interval.is_some()
        && settings.notifications.is_none()
        && req.source.local_root().is_none()
    {
        return Err(IngestError::Config(
            "cloudFiles.backfillInterval applies to notification mode \
             (cloudFiles.useNotifications=true) and to a local folder, whose watcher is \
             driven by file events; a listed object store is listed whole at every poll \
             already: leave it out"
                .into(),
        ));
    }
    check_worker(req)?;
    Ok(())
}

/// The Delta append target, or the CDC target applying changes by key (its state lives in
/// the checkpoint, so a reset sets it aside with it).
async fn open_target(
    req: &IngestRequest,
    delta: DeltaAppend,
    checkpoint: &Checkpoint,
) -> Result<Box<dyn Target>, IngestError> {
    let settings = &req.settings;
    Ok(match &req.cdc {
        None => Box::new(delta),
        Some(spec) => {
            let (deletes, truncates) = spec.conditions(settings.time_zone);
            let cdc = CdcTarget::open(
                delta,
                &req.checkpoint,
                &req.storage,
                spec.clone(),
                deletes,
                truncates,
            )
            .await?;
            if let Some(why) = cdc.lost_state(checkpoint.is_fresh()?).await? {
                return Err(IngestError::Config(why));
            }
            Box::new(cdc)
        }
    })
}

impl<'a> StreamRun<'a> {
    /// Locks the checkpoint, opens the table, and records the first start.
    pub async fn open(
        req: &'a IngestRequest,
        progress: &'a dyn Progress,
        hooks: &Hooks,
    ) -> Result<StreamRun<'a>, IngestError> {
        let settings = &req.settings;
        check_request(req)?;
        let source = own_output::source_without_own_output(req)?;
        let (checkpoint, location, slot) = open_checkpoint(req)?;
        let delta = DeltaAppend::open(&req.table, &req.storage).await?;
        // Claims of the table's reset generation: a reset's old claims own nothing.
        let claims = match slot {
            Some(slot) => Some((
                Claims::open(&req.checkpoint, &req.storage, delta.reset_generation()?)?,
                slot,
            )),
            None => None,
        };
        let mut checkpoint = super::generation::current(checkpoint, &location, &delta, req).await?;
        keep_one_schema_location(&checkpoint, &settings.schema_location)?;
        let sink = open_target(req, delta, &checkpoint).await?;
        let mut store = SchemaStore::open(&settings.schema_location, &req.storage)?;
        if req.worker.is_some() {
            store = store.shared_by_workers();
        }
        let latest = store.latest()?;
        if checkpoint.is_fresh()? && sink.exists() {
            let mut commits =
                crate::flow::once::since_rerun(&req.name, sink.autoloader_commits().await?);
            let mut identity = latest.as_ref().map(|v| v.info.stream_id.clone());
            if slot.is_some() {
                // A worker slot rebuilds from its own commits only: the table's others are
                // other slots' (or `_schemas/0` names one), and taking over their identity
                // would share their `txn` app id, so one slot's batch could pass for
                // another's and be skipped as landed.
                let own = checkpoint.stream_id().to_string();
                commits.retain(|(_, c)| c.get("streamId").and_then(|v| v.as_str()) == Some(&own));
                identity = Some(own);
            }
            checkpoint.recover_from_commits(
                &commits,
                identity.as_deref(),
                &req.source.describe(),
            )?;
            super::definition::restore(&checkpoint, &commits)?;
        }
        // Before anything is read: a definition that needs a full refresh refuses here.
        let definition =
            super::definition::compare(req, &checkpoint, latest.as_ref().map(|v| &v.data))?;
        let definition_recorded = !matches!(definition, super::definition::Found::Unrecorded);
        source.resume(checkpoint.meta(SOURCE_POSITION)?.as_deref())?;
        let app_id = checkpoint.app_id();
        debug!(
            stream = %req.name,
            source = %req.source.describe(),
            table = %req.table,
            checkpoint = %checkpoint.describe(),
            schema_location = %settings.schema_location,
            "Opened the stream."
        );
        if checkpoint.meta("initialized")?.is_none() {
            if !settings.include_existing_files {
                let listed = source.list(settings).await?;
                if !listed.is_empty() {
                    let files = listed.len();
                    let existing = Plan {
                        batch: u64::MAX,
                        files: listed,
                        created_at_ms: now_ms(),
                    };
                    checkpoint.mark_existing(&existing)?;
                    info!(
                        files,
                        "Not ingesting files present at the first start (cloudFiles.includeExistingFiles=false)."
                    );
                }
            }
            checkpoint.set_meta("initialized", &now_ms().to_string())?;
        }
        let (_, pending) = checkpoint.pending_plans()?;
        let schema = latest.map(|v| v.version);
        let mut telemetry = Telemetry::start(
            &crate::checkpoint::local_dir(&req.checkpoint, &req.storage),
            &req.name,
            hooks,
        );
        // The workers of a stream share its event log; each slot's figures are its own.
        if slot.is_some() {
            telemetry.live = crate::telemetry::live::Live::new(&crate::checkpoint::local_dir(
                &location,
                &req.storage,
            ));
        }
        telemetry.emit(
            Severity::Info,
            kind::STREAM_STARTED,
            json!({
                "source": req.source.describe(),
                "table": req.table.to_string(),
                "checkpoint": checkpoint.describe(),
                "streamId": checkpoint.stream_id(),
                "schemaVersion": schema,
            }),
        );
        if let Some(v) = schema {
            telemetry.metrics.schema_version.store(v, Ordering::Relaxed);
        }
        super::definition::apply(
            definition,
            &checkpoint,
            &telemetry,
            checkpoint.next_batch()?,
        )?;
        // The checkpoint's totals, which each batch of this run adds to (see `live.rs`).
        let commits = checkpoint.commits()?;
        let files_ingested = checkpoint.seen_files()?.len();
        let quarantine = match req.quarantine_location() {
            Some(at) => {
                Some(crate::target::quarantine::QuarantineTable::open(&at, &req.storage).await?)
            }
            None => None,
        };
        telemetry.live.update(|l| {
            l.files_ingested = files_ingested;
            l.files_pending = pending.iter().map(|p| p.files.len() as u64).sum();
            l.batches = commits.len() as u64;
            l.last_batch = commits.last().map(|(n, _)| *n);
            l.rows = commits.iter().map(|(_, c)| c.rows).sum();
            l.rescued_rows = commits.iter().map(|(_, c)| c.rescued_rows).sum();
            l.bytes = commits.iter().map(|(_, c)| c.bytes).sum();
            l.schema_version = schema;
        });
        Ok(StreamRun {
            req,
            source,
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
            properties_applied: false,
            listed: false,
            snapshots_taken: Default::default(),
            snapshots_unchanged: Default::default(),
            overdue_reported: None,
            compaction: None,
            batches_at_compaction: 0,
            claims,
            definition_recorded,
            quarantine,
            summary: Summary {
                schema_version: schema,
                ..Summary::default()
            },
        })
    }

    /// Puts the declared table properties on the table once it exists (one commit, only
    /// when they differ), so a property lifted by hand for one reset is put back.
    pub(crate) async fn apply_declared_properties(&mut self) -> Result<(), IngestError> {
        if self.properties_applied || self.req.table_properties.is_empty() || !self.sink.exists() {
            return Ok(());
        }
        if let Some(version) = self.sink.set_properties(&self.req.table_properties).await? {
            info!(table = %self.req.table, version, "Applied the declared table properties.");
        }
        self.properties_applied = true;
        Ok(())
    }

    /// The source's files that are neither ingested nor in an unfinished plan.
    pub async fn discover(&mut self) -> Result<Vec<FileRef>, IngestError> {
        // Only an object store is listed incrementally; a local walk needs no high-water mark.
        // A snapshot flow compares whole units with their last snapshot: full listings.
        let incremental = self.req.source.lists_incrementally() && self.req.snapshot.is_none();
        let (high_water, listing) = if incremental {
            (
                self.checkpoint.highest_key()?,
                Some(self.checkpoint.listing_state()?),
            )
        } else {
            (None, None)
        };
        let settings = &self.req.settings;
        let after = listing.and_then(|state| {
            incremental::start_after(
                settings.incremental_listing,
                settings.full_listing_interval,
                state,
                now_ms(),
                high_water.as_deref(),
            )
        });
        let listed = self
            .source
            .list_after(&self.req.settings, after.as_deref())
            .await?;
        if !std::mem::replace(&mut self.listed, true) && listed.is_empty() {
            self.warn_if_nothing_there()?;
        }
        // A first listing of a table source fixed its snapshot: saved before any plan.
        self.save_source_position()?;
        let listed_files = listed.len();
        let seen = self.checkpoint.seen_files()?;
        if let Some(spec) = &self.req.snapshot {
            return self.discover_snapshots(spec, &listed, &seen);
        }
        let (new, overwritten) = new_files(listed, &seen, &self.req.settings)?;
        if let Some(state) = listing
            && after.is_none()
        {
            self.note_full_listing(state, &new, high_water.as_deref())?;
        }
        self.report_overwritten(overwritten);
        let new = self.not_planned(new).await?;
        debug!(
            listed = listed_files,
            new = new.len(),
            incremental = after.is_some(),
            "Listed the source."
        );
        Ok(new)
    }

    /// Like [`StreamRun::discover`], for a watcher whose file events named the keys that
    /// changed: only those are looked at (a stat each, not a listing of the whole source),
    /// with the same filters and the same checks against the checkpoint. `None`: the source
    /// can only be listed.
    pub async fn discover_keys(
        &mut self,
        keys: &[String],
    ) -> Result<Option<Vec<FileRef>>, IngestError> {
        if self.req.snapshot.is_some() {
            return Ok(None);
        }
        let Some(listed) = self.source.stat(&self.req.settings, keys) else {
            return Ok(None);
        };
        let seen = self.checkpoint.seen_files()?;
        let (new, overwritten) = new_files(listed, &seen, &self.req.settings)?;
        drop(seen);
        self.report_overwritten(overwritten);
        let new = self.not_planned(new).await?;
        debug!(
            keys = keys.len(),
            new = new.len(),
            "Looked at the changed keys."
        );
        Ok(Some(new))
    }

    /// A warning event for each file changed after it was ingested (once per content).
    fn report_overwritten(&mut self, overwritten: Vec<FileRef>) {
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
    }

    /// The new files that no unfinished plan holds already.
    async fn not_planned(&mut self, mut new: Vec<FileRef>) -> Result<Vec<FileRef>, IngestError> {
        new.retain(|f| {
            !self
                .pending
                .iter()
                .any(|p| p.files.iter().any(|pf| pf.key == f.key))
        });
        // A queue source deletes the messages of files owned already (or left out).
        self.source.discovered(&new).await?;
        self.report_queue();
        Ok(new)
    }

    /// Notification mode: what became of the queue's messages, as metrics and events (a
    /// message left for the dead-letter queue is a warning naming it).
    fn report_queue(&self) {
        let Some(tally) = self.source.queue_tally() else {
            return;
        };
        let m = &self.telemetry.metrics;
        m.queue_planned.fetch_add(tally.planned, Ordering::Relaxed);
        m.queue_skipped
            .fetch_add(tally.skipped(), Ordering::Relaxed);
        m.queue_left
            .fetch_add(tally.left.len() as u64, Ordering::Relaxed);
        if tally.skipped() > 0 {
            debug!(
                skipped = tally.skipped(),
                "Queue messages deleted with nothing to ingest."
            );
            self.telemetry.emit(
                Severity::Info,
                kind::QUEUE_MESSAGES_SKIPPED,
                json!({
                    "queue": self.req.settings.notifications.as_ref().map(|n| n.queue_url.as_str()),
                    "alreadyTaken": tally.already_taken,
                    "testEvents": tally.test_events,
                    "outsideSource": tally.outside_source,
                    "filtered": tally.filtered,
                    "tooOld": tally.too_old,
                    "notCreated": tally.not_created,
                }),
            );
        }
        for left in &tally.left {
            self.telemetry.emit(
                Severity::Warning,
                kind::QUEUE_MESSAGE_LEFT,
                json!({
                    "queue": self.req.settings.notifications.as_ref().map(|n| n.queue_url.as_str()),
                    "messageId": left.message_id,
                    "receiveCount": left.receive_count,
                    "reason": left.reason,
                    "error": left.detail,
                }),
            );
        }
    }

    /// Whether a queue source has more files waiting than the last discovery took.
    pub(crate) fn more_queued(&self) -> bool {
        self.source.more_queued()
    }

    /// A snapshot flow's listing: the files of the units holding a new snapshot.
    fn discover_snapshots(
        &mut self,
        spec: &crate::flow::snapshot::SnapshotSpec,
        listed: &[FileRef],
        seen: &crate::checkpoint::SeenFiles,
    ) -> Result<Vec<FileRef>, IngestError> {
        let settle_ms = i64::try_from(self.req.settings.settle_time.as_millis()).unwrap_or(0);
        let found = super::snapshots::take(
            spec,
            listed,
            seen,
            now_ms() - settle_ms,
            &self.snapshots_taken,
            &self.pending,
        )?;
        // Said once per unit and run (a watcher lists often).
        let unchanged: Vec<String> = found
            .unchanged
            .into_iter()
            .filter(|u| self.snapshots_unchanged.insert(u.clone()))
            .collect();
        if let Some(first) = unchanged.first() {
            info!(
                snapshots = unchanged.len(), first = %self.req.source.uri(first),
                "Snapshots equal to the last one ingested of their unit; not appended again (snapshot.skip_unchanged)."
            );
            self.summary.unchanged_snapshots += unchanged.len() as u64;
        }
        if let Some(first) = found.unsettled.first() {
            info!(
                snapshots = found.unsettled.len(), first = %self.req.source.uri(first),
                settle_time = ?self.req.settings.settle_time,
                "A file of these snapshots changed within the settle time; each is taken whole once it has settled."
            );
        }
        self.check_overdue(spec)?;
        Ok(found.files)
    }

    /// Raises `snapshot_overdue` (an event and an alert) when no snapshot was taken for
    /// longer than `expected_interval`, once per missed interval.
    fn check_overdue(
        &mut self,
        spec: &crate::flow::snapshot::SnapshotSpec,
    ) -> Result<(), IngestError> {
        let Some(interval) = spec.expected_interval else {
            return Ok(());
        };
        let Some(last) = self
            .checkpoint
            .meta(SNAPSHOT_LAST_TAKEN)?
            .and_then(|v| v.parse::<i64>().ok())
        else {
            return Ok(());
        };
        let interval_ms = i64::try_from(interval.as_millis()).unwrap_or(i64::MAX);
        let late_ms = now_ms() - last;
        if late_ms <= interval_ms {
            return Ok(());
        }
        let missed = late_ms / interval_ms.max(1);
        if self.overdue_reported.replace((last, missed)) != Some((last, missed)) {
            warn!(
                last_snapshot_ms = last, expected_interval = ?interval,
                "No new snapshot for longer than the expected interval: a snapshot may have been missed (it cannot be recovered)."
            );
            self.telemetry.emit(
                Severity::Warning,
                kind::SNAPSHOT_OVERDUE,
                json!({
                    "lastSnapshotMs": last, "expectedIntervalSeconds": interval.as_secs(),
                    "overdueSeconds": (late_ms - interval_ms) / 1000,
                }),
            );
        }
        Ok(())
    }

    /// The first listing found no file at all: on a stream that has never ingested one,
    /// that is most likely a wrong path or prefix (S3 lists a mistyped prefix as empty),
    /// so say so rather than finish with 0 files and no word.
    fn warn_if_nothing_there(&self) -> Result<(), IngestError> {
        if self.req.source.reads_delta() {
            // A table source says itself whether the table is there yet.
            return Ok(());
        }
        let (committed, _) = self.checkpoint.pending_plans()?;
        if committed.is_some() || !self.pending.is_empty() {
            return Ok(());
        }
        let s = &self.req.settings;
        let filtered = s.path_glob_filter.is_some()
            || s.modified_after_ms.is_some()
            || s.modified_before_ms.is_some();
        let filters = if filtered {
            " that pass pathGlobFilter, modifiedAfter and modifiedBefore"
        } else {
            ""
        };
        warn!(
            "No files{filters} under {} yet: if some should be there, check the path or \
             prefix (names starting with _ or . and temporary names are never taken).",
            self.req.source.describe()
        );
        Ok(())
    }

    /// A batch whose re-runs died reading it [`MAX_CRASHED_ATTEMPTS`] times: its files are
    /// planned again one per batch, or, when it held one file, that file is quarantined
    /// (marked seen without its rows, recorded, reported as an error event and alert).
    /// Returns how many files were quarantined.
    fn isolate_or_quarantine(&self, plan: &Plan) -> Result<u64, IngestError> {
        if plan.files.len() > 1 {
            warn!(
                batch = plan.batch,
                files = plan.files.len(),
                attempts = MAX_CRASHED_ATTEMPTS,
                "This batch crashed the process every time it was read; its files are now read one per batch to find the one at fault."
            );
            self.checkpoint.isolate(plan)?;
            return Ok(0);
        }
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
        }
        Ok(self.checkpoint.quarantine(plan)?.len() as u64)
    }

    /// Records a full listing of an object store: when, and whether its new keys all sort
    /// after the ones already ingested (what `useIncrementalListing=auto` relies on).
    fn note_full_listing(
        &self,
        state: ListingState,
        new: &[FileRef],
        high_water: Option<&str>,
    ) -> Result<(), IngestError> {
        let mode = self.req.settings.incremental_listing;
        if mode == IncrementalListing::Never {
            return Ok(());
        }
        let judged = incremental::judge_full_listing(
            mode,
            state,
            new.iter().map(|f| f.key.as_str()),
            high_water,
        );
        if state.lexical_order != Some(judged.ordered) {
            self.checkpoint.set_lexical_order(judged.ordered)?;
            if mode == IncrementalListing::Auto {
                if judged.ordered {
                    info!(
                        "New keys arrive in lexical order: listing incrementally between full listings."
                    );
                } else {
                    info!(late = ?judged.late.iter().take(3).collect::<Vec<_>>(), "New keys sort before ingested ones: listing the whole source each time.");
                }
            }
        }
        if !judged.late.is_empty() && state.lexical_order == Some(true) {
            warn!(files = judged.late.len(), first = %judged.late[0], "A full listing found files that incremental listing had skipped (their keys sort before ingested ones); ingesting them now.");
        }
        if judged.record_time {
            self.checkpoint.set_last_full_listing(now_ms())?;
        }
        Ok(())
    }

    pub(crate) fn pending_files(&self) -> u64 {
        self.pending.iter().map(|p| p.files.len() as u64).sum()
    }

    pub(crate) fn pending_bytes(&self) -> u64 {
        self.pending
            .iter()
            .flat_map(|p| &p.files)
            .map(|f| f.size)
            .sum()
    }

    /// `cloudFiles.cleanSource`: cleans the due files of committed batches, at most
    /// `budget` of them; returns whether more are due.
    pub(crate) async fn clean_source(&self, budget: u64) -> Result<bool, IngestError> {
        let Some(clean) = &self.req.settings.clean_source else {
            return Ok(false);
        };
        let pass = super::clean::clean_due(
            &self.checkpoint,
            &self.req.source,
            clean,
            &self.telemetry,
            budget,
        )
        .await?;
        Ok(pass.more && pass.failed == 0)
    }

    /// Sets the files-pending gauge.
    pub fn set_pending(&self, files: u64) {
        self.telemetry
            .metrics
            .files_pending
            .store(files, Ordering::Relaxed);
        self.telemetry.live.update(|l| l.files_pending = files);
    }

    /// Ends a run: records `stream_stopped` or `stream_failed` and returns the summary.
    pub async fn finish(
        &mut self,
        result: Result<(), IngestError>,
        started: Instant,
    ) -> Result<Summary, IngestError> {
        // A compaction under way finishes (or fails) first, rather than leaving its files.
        if let Some(compaction) = self.compaction.take() {
            let _ = compaction.await;
        }
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
    async fn ensure_schema(&mut self, files: &[FileRef]) -> Result<bool, IngestError> {
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
                if !self.sink.exists() {
                    // The first stream of a shared table creates it; this one then
                    // reads the table's types.
                    self.req.first_writer.wait_for_leader(&self.req.name).await;
                    self.sink.refresh().await?;
                }
                let sample = inference_sample(files, &self.pending, settings);
                if sample.is_empty() && settings.user_schema.is_none() {
                    return Ok(false);
                }
                if let Some(state) = provisional_first_version(
                    self.req,
                    &self.checkpoint,
                    self.sink.exists(),
                    &opts,
                    &sample,
                )
                .await?
                {
                    // The table is created once the first batch has settled the schema.
                    self.opts = Some(opts);
                    self.schema = Some(state);
                    return Ok(true);
                }
                let v = create_first_version(
                    self.req,
                    &self.checkpoint,
                    &self.store,
                    self.sink.as_mut(),
                    &opts,
                    &sample,
                )
                .await?;
                failpoint::hit("after-schema-write");
                announce_first_version(&self.telemetry, &v);
                v
            }
        };
        let before = version.version;
        let version = self.share_table_types(version, format).await?;
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
        let layout = layout_for(&version, self.req);
        let existed = self.sink.exists();
        let created = self
            .sink
            .ensure_created(
                &self.req.table_schema(&layout)?,
                self.checkpoint.stream_id(),
            )
            .await?;
        // Another writer created the table meanwhile: read its types. (A table that
        // existed was read above.)
        let version = if existed || created {
            version
        } else {
            self.share_table_types(version, format).await?
        };
        let state = ActiveSchema::new(version, self.req);
        self.opts = Some(opts);
        self.schema = Some(state);
        Ok(true)
    }

    /// A stored version whose columns the table has with other types (another stream
    /// created them, or this stream's version predates sharing): the next version reads
    /// them as the table's types. Nothing was written with the stream's types, since the
    /// table never held them.
    async fn share_table_types(
        &mut self,
        version: SchemaVersion,
        format: Format,
    ) -> Result<SchemaVersion, IngestError> {
        let mut data = version.data.clone();
        let changes =
            align_to_current_table(&mut data, self.sink.as_mut(), self.req, format).await?;
        if changes.is_empty() {
            return Ok(version);
        }
        let next = version.version + 1;
        let info = VersionInfo {
            stream_id: self.checkpoint.stream_id().to_string(),
            created_at_ms: now_ms(),
            reason: "table types".into(),
            sampled_files: None,
            sampled_records: None,
            sampled_bytes: None,
        };
        let v = self.store.write(next, &data, &version.partition, info)?;
        info!(version = next, retyped = %changes.join(", "), "Wrote a schema version with the table's types.");
        Ok(v)
    }

    /// Replays unfinished plans, then ingests `files` in batches, checking `stop` between
    /// batches (files not reached are left for the next run).
    pub async fn ingest(
        &mut self,
        files: Vec<FileRef>,
        stop: &StopFlag,
    ) -> Result<(), IngestError> {
        self.apply_declared_properties().await?;
        let ready = self.ensure_schema(&files).await;
        // A provisional schema creates the table with the first batch: release then.
        if self.schema.as_ref().is_none_or(|s| s.one_pass.is_none()) {
            self.req.first_writer.release();
        }
        if !ready? {
            if !files.is_empty() || !self.pending.is_empty() {
                info!("No schema can be inferred from these files yet.");
            }
            return Ok(());
        }
        let opts = self.opts.clone().expect("ensure_schema sets the options");
        let mut state = self.schema.take().expect("ensure_schema sets the schema");
        let mut result = self.ingest_with(&opts, &mut state, files, stop).await;
        self.req.first_writer.release();
        if result.is_ok() {
            // A table created by this run's first batch.
            result = self.apply_declared_properties().await;
        }
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

    /// Replays the checkpoint's pending plans, then plans `files` into new batches and
    /// runs each.
    ///
    /// Long because both loops share one `RunContext`, which borrows parts of the run
    /// while the loops update the rest (the pending plans, the schema); one body keeps
    /// those borrows in one scope.
    async fn ingest_with(
        &mut self,
        opts: &DecodeOptions,
        state: &mut ActiveSchema,
        files: Vec<FileRef>,
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
            if self.claims.is_some() {
                newer_shared_schema(&self.store, self.req, state)?;
            }
            // Competing workers: the plan's candidates this slot's batch claimed (a replay
            // claims them again and finds the same ones).
            let plan = self.owned(&plan)?;
            if plan.files.is_empty() {
                self.checkpoint.discard_plan(plan.batch)?;
                self.pending.remove(0);
                continue;
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
                let deaths = self.checkpoint.crashed_attempts(&plan)?;
                if deaths >= MAX_CRASHED_ATTEMPTS {
                    self.summary.quarantined_files += self.isolate_or_quarantine(&plan)?;
                    self.replanned = true;
                } else {
                    // Recorded before the re-run reads: if this process dies reading, the
                    // next start counts it.
                    self.checkpoint.rerun_reading(&plan, deaths)?;
                    info!(
                        batch = plan.batch,
                        files = plan.files.len(),
                        "Re-running an unfinished batch exactly as planned."
                    );
                    execute(
                        &ctx,
                        state,
                        self.sink.as_mut(),
                        &plan,
                        Some(deaths),
                        &mut self.summary,
                        self.quarantine.as_mut(),
                        &mut Ahead::default(),
                    )
                    .await?;
                }
            }
            self.pending.remove(0);
        }
        let first = self.checkpoint.next_batch()?;
        let suspects = self.checkpoint.suspects()?;
        let batches = match &self.req.snapshot {
            Some(spec) => super::snapshots::batches(spec, &files),
            None => split_batches(&files, &self.req.settings, &suspects),
        };
        // A CDC target's batches read the next batch's files while they commit (see
        // `ahead.rs`); not where a batch's files are known only once it is planned (a
        // snapshot's stamp, competing workers' claims) or rows may go to a quarantine.
        let read_ahead =
            self.req.snapshot.is_none() && self.claims.is_none() && self.quarantine.is_none();
        let mut ahead = Ahead::default();
        for (at, (batch, files)) in (first..).zip(&batches).enumerate() {
            if stop.is_stopped() {
                ahead.discard();
                info!("Stopping between batches; the remaining files are left for the next run.");
                return Ok(());
            }
            if self.claims.is_some() {
                newer_shared_schema(&self.store, self.req, state)?;
            }
            let plan = Plan {
                batch,
                files: files.to_vec(),
                created_at_ms: self.plan_time()?,
            };
            if !self.definition_recorded {
                super::definition::record_first(self.req, &self.checkpoint, batch)?;
                self.definition_recorded = true;
            }
            self.checkpoint.write_plan(&plan)?;
            debug!(
                batch,
                files = plan.files.len(),
                bytes = plan.files.iter().map(|f| f.size).sum::<u64>(),
                "Planned batch."
            );
            failpoint::hit("after-plan");
            let candidates = plan.files.len();
            let plan = self.owned(&plan)?;
            if self.claims.is_some() {
                failpoint::hit(failpoint::AFTER_CLAIMS);
            }
            // The files are durably owned by the plan now (or by another worker's, whose
            // plan was written before its claim): a queue source may forget them all.
            self.req.source.planned(files).await?;
            failpoint::hit(failpoint::AFTER_QUEUE_DELETE);
            if plan.files.len() < candidates {
                info!(
                    batch,
                    left = candidates - plan.files.len(),
                    "Files another worker's batch owns are left to it."
                );
            }
            if plan.files.is_empty() {
                self.checkpoint.discard_plan(plan.batch)?;
                continue;
            }
            ahead.next = batches
                .iter()
                .skip(at + 1)
                .take(2)
                .filter(|_| read_ahead)
                .map(|next| next.to_vec())
                .collect();
            execute(
                &ctx,
                state,
                self.sink.as_mut(),
                &plan,
                None,
                &mut self.summary,
                self.quarantine.as_mut(),
                &mut ahead,
            )
            .await?;
            if let Some(spec) = &self.req.snapshot {
                self.snapshots_taken
                    .insert(spec.unit_of(&plan.files[0].key).to_string());
                self.checkpoint
                    .set_meta(SNAPSHOT_LAST_TAKEN, &plan.created_at_ms.to_string())?;
            }
            maybe_compact(
                self.req,
                self.sink.exists(),
                self.summary.batches,
                &mut self.compaction,
                &mut self.batches_at_compaction,
            );
        }
        ahead.discard();
        // Every file of the listing is planned or was ingested before.
        self.source.advance();
        self.save_source_position()
    }

    /// The files of `plan` this process's batch owns: all of them for a stream's only
    /// process; with `--worker`, those whose claim names this slot's batch (claimed now,
    /// or by an earlier attempt of the same batch).
    fn owned(&self, plan: &Plan) -> Result<Plan, IngestError> {
        let Some((claims, slot)) = &self.claims else {
            return Ok(plan.clone());
        };
        let mine = Claim {
            slot: *slot,
            batch: plan.batch,
        };
        // A batch of this slot that may still commit: one committed, or planned and not
        // discarded. A claim naming any other of its batches is this slot's to move.
        let is_live = |batch: u64| -> Result<bool, crate::checkpoint::CheckpointError> {
            Ok(self.checkpoint.committed(batch)?.is_some()
                || self
                    .checkpoint
                    .pending_plans()?
                    .1
                    .iter()
                    .any(|p| p.batch == batch))
        };
        let mut files = Vec::with_capacity(plan.files.len());
        for f in &plan.files {
            match claims.claim(&f.key, mine, &is_live)? {
                Claimed::Ours => files.push(f.clone()),
                Claimed::Theirs(owner) => debug!(
                    file = %f.key, slot = owner.slot, batch = owner.batch,
                    "Another worker's batch owns this file."
                ),
            }
        }
        Ok(Plan {
            files,
            ..plan.clone()
        })
    }

    /// A new plan's creation time. A snapshot's is its ingest time, which sequences AUTO
    /// CDC from snapshots: later than the last snapshot's, even if the clock went back.
    fn plan_time(&self) -> Result<i64, IngestError> {
        let now = now_ms();
        if self.req.snapshot.is_none() {
            return Ok(now);
        }
        let last = self
            .checkpoint
            .meta(SNAPSHOT_LAST_TAKEN)?
            .and_then(|v| v.parse::<i64>().ok());
        Ok(last.map_or(now, |last| now.max(last + 1)))
    }

    /// Saves the source's own position (a Delta table's next version) when it moved.
    fn save_source_position(&self) -> Result<(), IngestError> {
        if let Some(position) = self.source.position()
            && self.checkpoint.meta(SOURCE_POSITION)?.as_deref() != Some(position.as_str())
        {
            self.checkpoint.set_meta(SOURCE_POSITION, &position)?;
        }
        Ok(())
    }
}

/// Warns, once per table and process, that a table without auto compaction holds `files`
/// data files (more than [`crate::table::optimize::MANY_FILES`]).
fn warn_many_files(table: &crate::location::Location, files: usize) {
    static WARNED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut warned = WARNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let name = table.to_string();
    if warned.contains(&name) {
        return;
    }
    warn!(
        table = %table, files,
        "The table holds {files} data files and is not auto-compacted: a watcher's memory and \
         each batch's time grow with its files, and so does every reader's work. Turn auto \
         compaction on (`autoloader table set {table} delta.autoOptimize.autoCompact=true`) or \
         run `autoloader optimize {table}`."
    );
    warned.push(name);
}

/// Auto compaction: after every `everyCommits` batches this stream committed, the table is
/// compacted in the background (`table/optimize.rs` `auto_compact`, which also reads the
/// table's `delta.autoOptimize.autoCompact`); never two at once, a failure a warning. Not
/// for a CDC table: delta-rs' conflict checker would let the next MERGE commit over files
/// the compaction replaced.
fn maybe_compact(
    req: &IngestRequest,
    exists: bool,
    batches: u64,
    running: &mut Option<tokio::task::JoinHandle<()>>,
    batches_at_compaction: &mut u64,
) {
    use crate::table::optimize;
    if req.cdc.is_some() || !exists {
        return;
    }
    let every = req
        .auto_compact
        .map_or(optimize::AUTO_COMPACT_EVERY, |a| a.every_commits);
    if batches < *batches_at_compaction + every
        || running.as_ref().is_some_and(|h| !h.is_finished())
    {
        return;
    }
    *batches_at_compaction = batches;
    let table = req.table.clone();
    let storage = req.storage.clone();
    let configured = req.auto_compact.is_some_and(|a| a.enabled);
    *running = Some(tokio::spawn(async move {
        match optimize::auto_compact(&table, &storage, configured).await {
            Ok(optimize::AutoCompaction::Ran(r)) if r.version.is_some() => info!(
                table = %table, version = r.version, removed = r.files_removed, added = r.files_added,
                "Auto compaction: compacted small files."
            ),
            Ok(optimize::AutoCompaction::Off { files }) if files > optimize::MANY_FILES => {
                warn_many_files(&table, files)
            }
            Ok(_) => {}
            Err(e) => {
                warn!(table = %table, error = %e, "Auto compaction failed; the stream goes on.")
            }
        }
    }));
}
