//! `status`: where each stream of a table stands.

use crate::checkpoint::{Checkpoint, CommitSummary, SeenFiles};
use crate::reports::{ReportError, StreamCheckpoint};
use crate::telemetry::events::{self, Event, EventKind};

use serde::Serialize;
use serde_json::Value;

use crate::location::Location;
use crate::storage::StorageSettings;
use crate::target::DeltaAppend;
use crate::telemetry::live;

/// A stream's status, from its checkpoint and event log.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The stream's name, when found from its table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    pub checkpoint: String,
    pub running: Option<String>,
    /// While the stream runs: when it last updated the figures shown (`live.json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_at: Option<String>,
    pub stream_id: Option<String>,
    pub source: Option<String>,
    pub files_ingested: Option<u64>,
    pub files_pending: Option<u64>,
    pub batches: u64,
    pub rows: u64,
    pub rescued_rows: u64,
    pub bytes: u64,
    pub schema_version: Option<u64>,
    pub last_batch: Option<Value>,
    pub last_error: Option<Value>,
    /// A CDC stream: what its changes did to the table, summed from the table's commits
    /// (since its last reset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<CdcTotals>,
    /// A stream with expectations: each rule's rows passed, failed, dropped and
    /// quarantined, summed from the table's commits (since its last reset).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expectations: Vec<crate::flow::expect::ExpectationCounts>,
    /// A stream of competing workers (`--worker`): each slot under `workers/`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<WorkerStatus>,
    /// The flow's definition as its checkpoint recorded it, and since which batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub definition: Option<crate::flow::definition::RecordedDefinition>,
}

/// One worker slot of a stream (`CHECKPOINT/workers/K/`).
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerStatus {
    pub slot: u32,
    /// The process holding the slot (its lock or lease), none when the slot is free.
    pub holder: Option<String>,
    /// The number of the slot's last committed batch.
    pub last_batch: Option<u64>,
    /// Files of the slot's unfinished batches (a held slot: as its worker last said, with
    /// the files it listed and has not planned yet; held on another machine: its planned,
    /// uncommitted files from the slot's record on S3; unknown for a local checkpoint
    /// without its `live.json`).
    pub pending_files: Option<u64>,
    /// Batches the slot committed.
    pub batches: Option<u64>,
    /// Files in the slot's index, and the rows, rescued rows and bytes of its batches
    /// (unknown for a slot held on another machine: its record on S3 keeps them per batch).
    pub files_ingested: Option<u64>,
    pub rows: Option<u64>,
    pub rescued_rows: Option<u64>,
    pub bytes: Option<u64>,
    /// The schema version of the slot's last batch.
    pub schema_version: Option<u64>,
    /// Seconds since the holder took its lock (local) or last renewed its lease (S3).
    pub lease_age_seconds: Option<f64>,
}

/// Every worker slot of the stream whose checkpoint is `root`: a free one read from its
/// store (local: locked for the moment; S3: a copy, its lease never taken), a held one from its lease and the
/// `live.json` its worker keeps in the slot's local folder, or, held on another machine
/// (no `live.json` here), from the slot's record on S3 (a local slot has no other record).
fn worker_status(
    root: &Location,
    slots: &[u32],
    state: &StorageSettings,
) -> Result<Vec<WorkerStatus>, ReportError> {
    let mut out = Vec::with_capacity(slots.len());
    for &slot in slots {
        let location = crate::checkpoint::claims::slot_location(root, slot);
        let mut w = WorkerStatus {
            slot,
            ..WorkerStatus::default()
        };
        match Checkpoint::open_to_read(&location, state) {
            Ok(c) => {
                let (last, pending) = c.pending_plans()?;
                w.last_batch = last;
                w.pending_files = Some(pending.iter().map(|p| p.files.len() as u64).sum());
                let commits = c.commits()?;
                w.batches = Some(commits.len() as u64);
                w.files_ingested = Some(c.seen_files()?.len());
                let sum =
                    |f: fn(&CommitSummary) -> u64| Some(commits.iter().map(|(_, s)| f(s)).sum());
                w.rows = sum(|s| s.rows);
                w.rescued_rows = sum(|s| s.rescued_rows);
                w.bytes = sum(|s| s.bytes);
                w.schema_version = commits.last().map(|(_, s)| s.schema_version);
            }
            Err(crate::checkpoint::CheckpointError::Locked { holder, .. }) => {
                w.holder = Some(holder);
                w.lease_age_seconds = Checkpoint::lock_renewed_at_ms(&location, state)
                    .map(|at| (crate::clock::now_ms() - at).max(0) as f64 / 1000.0);
                if let Some(l) = live::read(&crate::checkpoint::local_dir(&location, state)) {
                    w.last_batch = l.last_batch;
                    w.pending_files = Some(l.files_pending);
                    w.batches = Some(l.batches);
                    w.files_ingested = Some(l.files_ingested);
                    w.rows = Some(l.rows);
                    w.rescued_rows = Some(l.rescued_rows);
                    w.bytes = Some(l.bytes);
                    w.schema_version = l.schema_version;
                } else if let Some(r) = Checkpoint::peek_record(&location, state)? {
                    // Held on another machine (its `live.json` is there): the slot's record
                    // on S3, whose pending files are those planned, not those listed.
                    w.last_batch = r.last_batch;
                    w.pending_files = Some(r.pending_files);
                    w.batches = Some(r.batches);
                }
            }
            Err(e) => return Err(e.into()),
        }
        out.push(w);
    }
    Ok(out)
}

/// What a CDC stream's batches did to its table (the `cdc` record of each commit).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CdcTotals {
    pub rows_inserted: u64,
    pub rows_updated: u64,
    pub rows_deleted: u64,
    /// Records ignored as stale: not sequenced after their key's applied change.
    pub records_stale: u64,
    /// Records ignored because a truncate sequenced after them emptied the table.
    pub records_truncated: u64,
}

impl CdcTotals {
    /// The sums of the `cdc` records in `commits` (Autoloader's commit info); `None` when
    /// no commit has one (not a CDC target).
    pub fn of(commits: &[(u64, Value)]) -> Option<CdcTotals> {
        let mut totals: Option<CdcTotals> = None;
        for cdc in commits.iter().filter_map(|(_, c)| c.get("cdc")) {
            let t = totals.get_or_insert_with(CdcTotals::default);
            let n = |k: &str| cdc.get(k).and_then(Value::as_u64).unwrap_or(0);
            t.rows_inserted += n("rowsInserted");
            t.rows_updated += n("rowsUpdated");
            t.rows_deleted += n("rowsDeleted");
            t.records_stale += n("recordsStale");
            t.records_truncated += n("recordsTruncated");
        }
        totals
    }
}

/// The table a checkpoint's stream writes: the one its default place names
/// (`TABLE/_autoloader`, `TABLE/_autoloader/NAME`), else the one its start event names.
fn table_of(checkpoint: &Location, started: Option<&str>) -> Option<Location> {
    let dir = |l: &Location| l.file_name().filter(|n| n == "_autoloader");
    if dir(checkpoint).is_some() {
        return checkpoint.parent();
    }
    if let Some(parent) = checkpoint.parent()
        && dir(&parent).is_some()
    {
        return parent.parent();
    }
    started.and_then(|t| Location::parse(t).ok())
}

/// The commits of the table a stream writes, since its last reset (none when unreadable).
async fn table_commits(location: &Location, state: &StorageSettings) -> Vec<(u64, Value)> {
    let Ok(Some(target)) = DeltaAppend::open_existing(location, state).await else {
        return Vec::new();
    };
    target.autoloader_commits().await.unwrap_or_default()
}

/// Each rule's counts summed over the commits of stream `stream_id` (any stream's when
/// unknown).
fn expectation_totals(
    commits: &[(u64, Value)],
    stream_id: Option<&str>,
) -> Vec<crate::flow::expect::ExpectationCounts> {
    let mut out = Vec::new();
    for (_, info) in commits {
        if stream_id.is_some_and(|id| info.get("streamId").and_then(Value::as_str) != Some(id)) {
            continue;
        }
        if let Some(counts) = info
            .get("expectations")
            .and_then(|e| serde_json::from_value::<Vec<_>>(e.clone()).ok())
        {
            crate::flow::expect::add_counts(&mut out, &counts);
        }
    }
    out
}

/// Reads what a checkpoint says. When no process holds it, the store is read and the
/// pending files listed. While a stream runs its store is locked: the figures are those it
/// keeps in `live.json` (see `telemetry/live.rs`), or, from an older version that wrote
/// none, the sums of the event log's `batch_committed` events.
pub async fn status(
    found: &StreamCheckpoint,
    state: &StorageSettings,
) -> Result<Status, ReportError> {
    let checkpoint = &found.location;
    let io = |source| ReportError::Io {
        path: checkpoint.to_string(),
        source,
    };
    let local = crate::checkpoint::local_dir(checkpoint, state);
    // Competing workers keep no checkpoint of the stream's own: one per slot under it.
    let slots = crate::checkpoint::claims::slots(checkpoint, state)?;
    // Opening a checkpoint creates one where there is none: check that it exists first.
    if slots.is_empty() && !Checkpoint::exists(checkpoint, state)? {
        return Err(ReportError::NotACheckpoint {
            path: checkpoint.to_string(),
        });
    }
    let mut st = Status {
        stream: found.name.clone(),
        checkpoint: checkpoint.to_string(),
        ..Status::default()
    };
    let all = events::read_events(&local).map_err(io)?;
    let table = from_events(&mut st, &all);
    if let Some(table) = table_of(checkpoint, table.as_deref()) {
        let commits = table_commits(&table, state).await;
        st.changes = CdcTotals::of(&commits);
        st.expectations = expectation_totals(&commits, st.stream_id.as_deref());
    }
    if !slots.is_empty() {
        st.workers = worker_status(checkpoint, &slots, state)?;
        from_worker_slots(&mut st, &all);
        return Ok(st);
    }
    match Checkpoint::open_to_read(checkpoint, state) {
        Ok(c) => {
            st.stream_id = Some(c.stream_id().to_string());
            st.definition = c
                .meta(crate::flow::definition::META_KEY)
                .ok()
                .flatten()
                .and_then(|t| serde_json::from_str(&t).ok());
            let commits = c.commits()?;
            st.batches = commits.len() as u64;
            for (_, s) in &commits {
                st.rows += s.rows;
                st.rescued_rows += s.rescued_rows;
                st.bytes += s.bytes;
            }
            let seen = c.seen_files()?;
            st.files_ingested = Some(seen.len());
            st.files_pending = pending_files(&st, checkpoint, state, &seen).await;
        }
        Err(crate::checkpoint::CheckpointError::Locked { holder, .. }) => {
            st.running = Some(holder);
            st.definition = crate::flow::definition::mirrored(&local);
            if let Some(l) = live::read(&local) {
                st.live_at = Some(l.updated_at);
                st.files_ingested = Some(l.files_ingested);
                st.files_pending = Some(l.files_pending);
                st.batches = l.batches;
                st.rows = l.rows;
                st.rescued_rows = l.rescued_rows;
                st.bytes = l.bytes;
                st.schema_version = l.schema_version.or(st.schema_version);
                return Ok(st);
            }
            for e in all.iter().filter(|e| e.kind == EventKind::BatchCommitted) {
                st.batches += 1;
                st.rows += e.fields.get("rows").and_then(Value::as_u64).unwrap_or(0);
                st.rescued_rows += e
                    .fields
                    .get("rescuedRows")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                st.bytes += e.fields.get("bytes").and_then(Value::as_u64).unwrap_or(0);
            }
        }
        Err(e) => return Err(e.into()),
    }
    Ok(st)
}

/// What the event log says: the last batch and error, the source, the stream id, the
/// schema version; returns the table the stream started on.
fn from_events(st: &mut Status, all: &[Event]) -> Option<String> {
    let mut table = None;
    for e in all {
        match e.kind {
            EventKind::BatchCommitted => {
                st.last_batch = Some(serde_json::to_value(e).unwrap_or_default());
                st.schema_version = e
                    .fields
                    .get("schemaVersion")
                    .and_then(Value::as_u64)
                    .or(st.schema_version);
            }
            EventKind::StreamFailed => {
                st.last_error = Some(serde_json::to_value(e).unwrap_or_default())
            }
            EventKind::StreamStarted => {
                st.source = e
                    .fields
                    .get("source")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                st.stream_id = e
                    .fields
                    .get("streamId")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                table = e
                    .fields
                    .get("table")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            EventKind::SchemaEvolved => {
                st.schema_version = e.fields.get("newVersion").and_then(Value::as_u64)
            }
            EventKind::SchemaInferred => {
                st.schema_version = e.fields.get("version").and_then(Value::as_u64)
            }
            _ => {}
        }
    }
    table
}

/// A worker stream's figures: the sums of its slots'.
fn from_worker_slots(st: &mut Status, all: &[Event]) {
    let held: Vec<&str> = st
        .workers
        .iter()
        .filter_map(|w| w.holder.as_deref())
        .collect();
    if !held.is_empty() {
        st.running = Some(format!(
            "{} of {} worker slots held",
            held.len(),
            st.workers.len()
        ));
    }
    st.batches = st.workers.iter().filter_map(|w| w.batches).sum();
    st.files_pending = st
        .workers
        .iter()
        .map(|w| w.pending_files)
        .sum::<Option<u64>>();
    st.files_ingested = st.workers.iter().map(|w| w.files_ingested).sum();
    st.schema_version = st
        .workers
        .iter()
        .filter_map(|w| w.schema_version)
        .chain(st.schema_version)
        .max();
    let of_slots =
        |f: fn(&WorkerStatus) -> Option<u64>| -> Option<u64> { st.workers.iter().map(f).sum() };
    if let (Some(rows), Some(rescued), Some(bytes)) = (
        of_slots(|w| w.rows),
        of_slots(|w| w.rescued_rows),
        of_slots(|w| w.bytes),
    ) {
        (st.rows, st.rescued_rows, st.bytes) = (rows, rescued, bytes);
    } else {
        // A slot held on another machine: the shared event log's figures (this
        // machine's workers).
        for e in all.iter().filter(|e| e.kind == EventKind::BatchCommitted) {
            let n = |k: &str| e.fields.get(k).and_then(Value::as_u64).unwrap_or(0);
            st.rows += n("rows");
            st.rescued_rows += n("rescuedRows");
            st.bytes += n("bytes");
        }
    }
}

/// The files the stream would take now: its source listed with its recorded options (its
/// filters among them), less the files its checkpoint has seen.
async fn pending_files(
    st: &Status,
    checkpoint: &Location,
    state: &StorageSettings,
    seen: &SeenFiles,
) -> Option<u64> {
    let source = Location::parse(st.source.as_ref()?).ok()?;
    let recorded: Vec<(String, String)> = st
        .definition
        .iter()
        .flat_map(|d| d.definition.iter())
        .filter(|(k, _)| crate::options::canonical(k).is_some())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let settings = crate::options::resolve(&recorded, checkpoint)
        .or_else(|_| crate::options::resolve(&[], checkpoint))
        .ok()?
        .0;
    // A table source's pending files need its position: not counted.
    let src = crate::source::Source::open(
        &source,
        state,
        crate::source::SourceFormat::Files,
        &settings,
    )
    .ok()?;
    let listed = src.list(&settings).await.ok()?;
    let pending = listed
        .iter()
        .filter(|f| seen.get(&f.key).ok().flatten().is_none())
        .count();
    Some(pending as u64)
}
