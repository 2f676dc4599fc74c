//! `autoloader reset`: a full refresh of a table (Lakeflow's), or a reset of its flows'
//! checkpoints only, guarded by the table property `pipelines.reset.allowed`.
//!
//! The steps, in a crash-safe order:
//! 1. Precheck: the table's guard (as it is on the table now) before anything is touched,
//!    then the lock of every flow's checkpoint (a running stream refuses the reset).
//! 2. One Delta commit: `autoloader.resetGeneration` bumped in the metadata (and, for a full
//!    refresh, `autoloader.refreshGeneration`, which ONCE flows compare against), every
//!    data file removed for a full refresh. History, properties and schema stay.
//! 3. Each flow's checkpoint (stamped with an older generation) is set aside into
//!    `CHECKPOINT/_reset-<gen>/`, with its `_schemas` unless `--keep-schema`.
//!
//! A kill before 2 leaves the old state; after 2 the table's generation says every older
//! checkpoint is stale, and whoever locks one next (`reset` again, or the next `run`) sets
//! it aside. `reset` again right after a reset commit of the same kind reuses it (no
//! second commit). The generation rule: checkpoint recovery reads only commits since the
//! last reset (`target/delta.rs`).

use std::collections::BTreeSet;

use serde::Serialize;
use tracing::{info, warn};

use crate::checkpoint::{Checkpoint, CheckpointError};
use crate::location::Location;
use crate::options::Settings;
use crate::reports::{self, ReportError};
use crate::source::{Source, SourceError};
use crate::storage::StorageSettings;
use crate::target::{DeltaAppend, TargetError};
use crate::testing::failpoint;

/// The table property that protects a table from resets (Lakeflow's; default true).
pub const RESET_ALLOWED: &str = "pipelines.reset.allowed";

#[derive(Debug, thiserror::Error)]
pub enum ResetError {
    #[error(
        "table {table} has {RESET_ALLOWED}=false: it cannot be reset; nothing was changed. \
         To reset it once, lift the guard with `autoloader table set {table} \
         {RESET_ALLOWED}=true` (the next run puts a declared value back)"
    )]
    Guarded { table: String },
    #[error(
        "worker slot {slot} of the stream with checkpoint {checkpoint} is held by {holder}: \
         stop every worker of the stream (or wait for a dead one's lease to run out) before \
         resetting it; nothing was changed"
    )]
    WorkerRunning {
        checkpoint: String,
        slot: u32,
        holder: String,
    },
    #[error("{path} is not a Delta table (it has no _delta_log)")]
    NotATable { path: String },
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error(transparent)]
    Source(#[from] SourceError),
}

/// What to reset.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResetOptions {
    /// Reset the flows' progress but keep the rows.
    pub checkpoints_only: bool,
    /// Keep the flows' schema versions (no inference again).
    pub keep_schema: bool,
    /// `--all`: a guarded table is skipped with a warning instead of failing the reset.
    pub skip_guarded: bool,
    /// Only say what would be done: no lock is taken, nothing is written.
    pub dry_run: bool,
}

/// One flow writing into a table, as the reset sees it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlowPlan {
    pub name: Option<String>,
    pub checkpoint: String,
    pub schema_location: String,
    /// Whether its checkpoint exists (one that does not has nothing to reset).
    pub exists: bool,
    /// Source files its next run would read from the start (what `modifiedAfter` and the
    /// other filters let through); `None` for a flow not in `--config`.
    pub source_files: Option<usize>,
    /// A ONCE flow of `--config` (it runs again after a full refresh, not after
    /// `--checkpoints-only`).
    pub once: bool,
}

/// What a reset of one table would do (`--dry-run` prints it) and, after it, did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TablePlan {
    pub table: String,
    pub version: u64,
    /// Data files the current version holds (a full refresh removes them all).
    pub files: usize,
    pub rows: Option<u64>,
    /// `pipelines.reset.allowed=false`: skipped (only with `--all`).
    pub guarded: bool,
    pub full: bool,
    pub keep_schema: bool,
    pub flows: Vec<FlowPlan>,
    /// After the reset: its generation and the folders the old progress is kept in.
    pub generation: Option<u64>,
    pub kept: Vec<String>,
}

impl TablePlan {
    /// Source files the flows would re-read (`None` when a flow's source is unknown).
    pub fn source_files(&self) -> Option<usize> {
        self.flows
            .iter()
            .filter(|f| f.exists)
            .map(|f| f.source_files)
            .sum()
    }
}

struct Flow {
    checkpoint: Location,
    schema_location: Location,
    /// Its lock, held from the precheck to the end of the reset.
    locked: Option<Checkpoint>,
    /// A stream of competing workers: each slot's checkpoint (`workers/K/`), locked
    /// likewise; the stream has no checkpoint of its own then.
    slots: Vec<Checkpoint>,
    storage: StorageSettings,
}

struct TableReset {
    sink: DeltaAppend,
    flows: Vec<Flow>,
}

/// The reset after its precheck: every flow's checkpoint locked, nothing changed yet.
pub struct Prepared {
    pub plans: Vec<TablePlan>,
    tables: Vec<Option<TableReset>>,
    options: ResetOptions,
}

/// Whether the table refuses resets (its property as it is now). Only `true` (or no
/// value: Databricks' default) allows one: a value set by another tool that is not a
/// boolean guards the table rather than lifting the guard.
fn guarded(sink: &DeltaAppend) -> Result<bool, TargetError> {
    Ok(sink
        .properties()?
        .get(RESET_ALLOWED)
        .is_some_and(|v| !v.trim().eq_ignore_ascii_case("true")))
}

async fn open_table(
    table: &Location,
    storage: &StorageSettings,
) -> Result<DeltaAppend, ResetError> {
    DeltaAppend::open_existing(table, storage)
        .await?
        .ok_or_else(|| ResetError::NotATable {
            path: table.to_string(),
        })
}

/// A flow of the config: what a reset needs of it.
#[derive(Debug, Clone)]
pub struct ConfiguredFlow {
    pub name: String,
    pub table: Location,
    pub checkpoint: Location,
    /// Listed when the plan is made: how many files a full refresh reads again.
    pub source: Source,
    pub settings: Settings,
    /// A ONCE flow (it runs again after a full refresh).
    pub once: bool,
}

/// The precheck: opens every table, refuses a guarded one (or marks it skipped), finds and
/// locks the flows writing into each (`streams`: the config's; and the checkpoints under
/// `TABLE/_autoloader`). Nothing is changed.
pub async fn prepare(
    tables: &[Location],
    streams: &[ConfiguredFlow],
    options: ResetOptions,
    storage: &StorageSettings,
) -> Result<Prepared, ResetError> {
    let mut sinks = Vec::new();
    let mut seen = BTreeSet::new();
    for table in tables {
        if !seen.insert(table.resolved().to_string()) {
            continue;
        }
        let sink = open_table(table, storage).await?;
        let guard = guarded(&sink)?;
        // A dry run shows the refused plan too (then exits as the reset would).
        if guard && !options.skip_guarded && !options.dry_run {
            return Err(ResetError::Guarded {
                table: table.to_string(),
            });
        }
        sinks.push((table.clone(), sink, guard));
    }
    let mut plans = Vec::new();
    let mut prepared = Vec::new();
    for (table, sink, guard) in sinks {
        let mut plan = TablePlan {
            table: table.to_string(),
            version: sink.version().unwrap_or_default(),
            files: sink.file_count()?,
            rows: sink.row_count()?,
            guarded: guard,
            full: !options.checkpoints_only,
            keep_schema: options.keep_schema,
            flows: Vec::new(),
            generation: None,
            kept: Vec::new(),
        };
        if guard && options.skip_guarded {
            warn!(table = %table, "Skipping the reset of {table}: it has {RESET_ALLOWED}=false.");
            plans.push(plan);
            prepared.push(None);
            continue;
        }
        let mut flows = Vec::new();
        let resolved = table.resolved();
        for req in streams.iter().filter(|r| r.table.resolved() == resolved) {
            let source_files = req.source.list(&req.settings).await?.len();
            flows.push((
                Some(req.name.clone()),
                req.checkpoint.clone(),
                req.settings.schema_location.clone(),
                Some(source_files),
                req.once,
            ));
        }
        let found = match reports::checkpoints(Some(&table), None, None, storage) {
            Ok(found) => found,
            Err(ReportError::NoCheckpoint { .. }) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        for c in found {
            let r = c.location.resolved();
            if !flows.iter().any(|(_, ck, _, _, _)| ck.resolved() == r) {
                flows.push((c.name, c.location.clone(), c.location, None, false));
            }
        }
        let mut locked = Vec::new();
        for (name, checkpoint, schema_location, source_files, once) in flows {
            // Competing workers: the slots under the stream's checkpoint, every one locked
            // (a live worker's refuses the reset, naming its slot).
            let slot_numbers = crate::checkpoint::claims::slots(&checkpoint, storage)?;
            let mut slots = Vec::new();
            if !options.dry_run {
                for &slot in &slot_numbers {
                    let location = crate::checkpoint::claims::slot_location(&checkpoint, slot);
                    match Checkpoint::open(&location, storage) {
                        Ok(ck) => slots.push(ck),
                        Err(CheckpointError::Locked { holder, .. }) => {
                            return Err(ResetError::WorkerRunning {
                                checkpoint: checkpoint.to_string(),
                                slot,
                                holder,
                            });
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            let workers = !slot_numbers.is_empty();
            let exists = workers || Checkpoint::exists(&checkpoint, storage)?;
            if exists && !options.dry_run {
                // A schema location of its own on S3 (not the checkpoint's `_schemas`).
                let s3_schemas = !options.keep_schema
                    && matches!(schema_location, Location::S3(_))
                    && schema_location.resolved() != checkpoint.resolved();
                if s3_schemas {
                    return Err(ResetError::Usage(format!(
                        "flow {}: resetting a schema location on S3 other than the \
                         checkpoint's is not supported yet (give --keep-schema, or move its \
                         _schemas by hand); nothing was changed",
                        name.as_deref().unwrap_or(&checkpoint.to_string())
                    )));
                }
            }
            let lock = if exists && !workers && !options.dry_run {
                Some(Checkpoint::open(&checkpoint, storage)?)
            } else {
                None
            };
            plan.flows.push(FlowPlan {
                name,
                checkpoint: checkpoint.to_string(),
                schema_location: schema_location.to_string(),
                exists,
                source_files,
                once,
            });
            locked.push(Flow {
                checkpoint,
                schema_location,
                locked: lock,
                slots,
                storage: storage.clone(),
            });
        }
        plans.push(plan);
        prepared.push(Some(TableReset {
            sink,
            flows: locked,
        }));
    }
    Ok(Prepared {
        plans,
        tables: prepared,
        options,
    })
}

/// Resets every prepared table: the reset commit, then each flow's checkpoint set aside.
pub async fn execute(prepared: Prepared) -> Result<Vec<TablePlan>, ResetError> {
    let Prepared {
        mut plans,
        tables,
        options,
    } = prepared;
    if options.dry_run {
        return Ok(plans);
    }
    let full = !options.checkpoints_only;
    for (plan, table) in plans.iter_mut().zip(tables) {
        let Some(TableReset { mut sink, flows }) = table else {
            continue;
        };
        failpoint::hit("reset-after-lock");
        let generation = match last_commit_is_reset(&sink, full).await? {
            // An interrupted reset of the same kind: finish it, without a second commit.
            Some(generation) => {
                info!(table = %plan.table, generation, "The table's last commit is this reset; finishing it.");
                generation
            }
            None => sink.commit_reset(full, options.keep_schema).await?,
        };
        failpoint::hit("reset-after-commit");
        for flow in flows {
            if !flow.slots.is_empty() {
                set_aside_workers(flow, generation, options, plan)?;
                continue;
            }
            let Some(ck) = flow.locked else { continue };
            if !ck.is_stale(generation)? {
                ck.stamp_generation(generation)?;
                continue;
            }
            let kept = ck.set_aside(
                &crate::checkpoint::aside::aside_name(generation),
                options.keep_schema,
                &flow.schema_location,
                &|| failpoint::hit("reset-mid-aside"),
            )?;
            info!(checkpoint = %flow.checkpoint, kept = %kept, "Set the flow's checkpoint aside.");
            plan.kept.push(kept);
        }
        failpoint::hit("reset-after-aside");
        plan.generation = Some(generation);
        plan.version = sink.version().unwrap_or_default();
    }
    Ok(plans)
}

/// A stream of competing workers after the reset commit: each stale slot set aside into its
/// own `_reset-<gen>/` (slots first, so a kill midway leaves stale slots that the reset run
/// again, or each slot's next worker, sets aside), then what the slots share: the stream's
/// `_schemas` unless `--keep-schema`, and the old claims. Claims are per generation
/// (`checkpoint/claims.rs`), so the next generation's workers take every file afresh even
/// before the old claims are moved.
fn set_aside_workers(
    flow: Flow,
    generation: u64,
    options: ResetOptions,
    plan: &mut TablePlan,
) -> Result<(), ResetError> {
    let folder = crate::checkpoint::aside::aside_name(generation);
    let mut stale = false;
    for ck in flow.slots {
        if !ck.is_stale(generation)? {
            ck.stamp_generation(generation)?;
            continue;
        }
        stale = true;
        // The shared `_schemas` are the stream's, set aside once below.
        let kept = ck.set_aside(&folder, true, &flow.schema_location, &|| {
            failpoint::hit("reset-mid-aside")
        })?;
        info!(checkpoint = %flow.checkpoint, kept = %kept, "Set a worker slot's checkpoint aside.");
        plan.kept.push(kept);
    }
    // Slots already of this generation (a reset run again after its workers ran) may have
    // used the shared `_schemas`: left as they are; the current generation's claims
    // always are.
    crate::checkpoint::claims::set_aside_shared(
        &flow.checkpoint,
        &flow.storage,
        &folder,
        generation,
        options.keep_schema || !stale,
    )?;
    if stale {
        plan.kept.push(flow.checkpoint.join(&folder).to_string());
    }
    Ok(())
}

/// The generation of the table's last commit when it is a reset of this kind.
async fn last_commit_is_reset(sink: &DeltaAppend, full: bool) -> Result<Option<u64>, TargetError> {
    let Some(reset) = sink.last_commit_reset().await? else {
        return Ok(None);
    };
    let same_kind = reset.get("full").and_then(serde_json::Value::as_bool) == Some(full);
    let generation = reset.get("generation").and_then(serde_json::Value::as_u64);
    Ok(generation.filter(|g| same_kind && *g == sink.reset_generation().unwrap_or(0)))
}
