//! `autoloader quarantine replay`: rows a flow quarantined, fixed in place by a user (an
//! `UPDATE` on the quarantine table) or judged by rules relaxed since, go back through the
//! flow's rules as its checkpoint records them: a row that passes lands in the flow's
//! table, one that fails only a `drop` rule is dropped (counted), and one that fails a
//! `quarantine` or `fail` rule stays where it is.
//!
//! Exactly once, in two commits: replay N first lands its rows in the table with
//! `txn(autoloader-replay-<stream id>, N)`, naming the quarantine files it read, then
//! rewrites those files without the rows that left, under the same txn. A replay that
//! finds the table's txn ahead of the quarantine's finishes the earlier one first (the
//! same files, the same rules: the same rows), so a row never lands twice and never
//! leaves the quarantine without landing. The stream's checkpoint is held meanwhile, so
//! its flow does not run (or replay) at the same time.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow_array::{BooleanArray, RecordBatch};
use arrow_schema::Schema;
use serde::Serialize;
use serde_json::json;

use crate::checkpoint::{Checkpoint, CheckpointError};
use crate::flow::definition::{EXPECT_PREFIX, META_KEY, RecordedDefinition};
use crate::flow::expect::{BoundRules, Expectation, OnViolation};
use crate::location::Location;
use crate::storage::StorageSettings;
use crate::table::optimize::MaintenanceError;
use crate::target::delta::{BatchWriters, DeltaAppend};
use crate::target::quarantine::COLUMNS;
use crate::target::rewrite::{Selector, take_rows};
use crate::testing::failpoint;

/// The entry of a replay's rules that holds the stream's `timeZone` (not a rule).
const TIME_ZONE: &str = "timeZone";

/// The failpoint between a replay's two commits (`tests/it/expectations.rs`).
pub const AFTER_REPLAY_LANDED: &str = "after-replay-landed";

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Table(#[from] MaintenanceError),
}

impl From<crate::target::TargetError> for ReplayError {
    fn from(e: crate::target::TargetError) -> Self {
        ReplayError::Table(e.into())
    }
}

/// What a replay did.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplaySummary {
    /// The replay's number (its txn version).
    pub replay: Option<u64>,
    /// An earlier replay, killed between its commits, that this one finished.
    pub finished_earlier: Option<u64>,
    pub landed: u64,
    pub dropped: u64,
    /// Rows that fail a `quarantine` or `fail` rule still: left in the quarantine.
    pub still_failing: u64,
    pub table_version: Option<u64>,
    pub quarantine_version: Option<u64>,
}

/// What a replay records in its table commit, so a later one can finish it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct ReplayRecord {
    number: u64,
    /// The quarantine's files it read (paths in that table).
    files: Vec<String>,
    /// The rules it judged by: name → `action: check`.
    rules: Vec<(String, String)>,
}

/// Replays the quarantine of the stream whose checkpoint is at `checkpoint`.
pub async fn replay(
    checkpoint: &Location,
    storage: &StorageSettings,
) -> Result<ReplaySummary, ReplayError> {
    let usage = |m: String| ReplayError::Table(MaintenanceError::Usage(m));
    let ck = Checkpoint::open(checkpoint, storage)?;
    let recorded: RecordedDefinition = match ck.meta(META_KEY)? {
        Some(text) => serde_json::from_str(&text).map_err(|e| {
            usage(format!(
                "the flow definition in {checkpoint} cannot be read: {e}"
            ))
        })?,
        None => {
            return Err(usage(format!(
                "{checkpoint} records no flow definition: run the stream first"
            )));
        }
    };
    let d = &recorded.definition;
    let flow = d.get("flow").unwrap_or("append");
    if flow != "append" {
        return Err(usage(format!(
            "the stream's flow is {flow}: a replay lands rows in an append flow's table only \
             (a change record goes back through its CDC flow as a file in the landing folder)"
        )));
    }
    let Some(quarantine_at) = d.get("quarantine_table") else {
        return Err(usage(format!(
            "the stream of {checkpoint} has no quarantine rule: nothing to replay"
        )));
    };
    let table_at = d
        .get("table")
        .ok_or_else(|| usage("the recorded definition names no table".into()))?;
    let mut rules: Vec<(String, String)> = d
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(EXPECT_PREFIX)?.to_string(), v.to_string())))
        .collect();
    // The stream's time zone reads its timestamps, in the rules as at ingest.
    if let Some(zone) = d.get("timeZone") {
        rules.push((TIME_ZONE.to_string(), zone.to_string()));
    }
    let parse = |t: &str| Location::parse(t).map_err(|e| usage(e.to_string()));
    let mut table = DeltaAppend::open(&parse(table_at)?, storage).await?;
    let mut quarantine = DeltaAppend::open(&parse(quarantine_at)?, storage).await?;
    let mut summary = ReplaySummary::default();
    if !quarantine.exists() || !table.exists() {
        return Ok(summary);
    }
    let app = format!("autoloader-replay-{}", ck.stream_id());
    let landed = table.committed_batch(&app).await?;
    let rewritten = quarantine.committed_batch(&app).await?;
    if let Some(n) = landed
        && rewritten.is_none_or(|r| r < n)
    {
        let record = recorded_replay(&table, n).await?;
        // Its rows are told apart by the files it read: each must still be there.
        let active: BTreeSet<String> = data_files(&quarantine)?.into_iter().collect();
        if let Some(gone) = record.files.iter().find(|f| !active.contains(*f)) {
            return Err(ReplayError::Table(MaintenanceError::Failed {
                location: quarantine.location().to_string(),
                reason: format!(
                    "replay {n} landed its rows in the table and was stopped before it took \
                     them out of the quarantine; since then its file {gone} was replaced (an \
                     UPDATE or a compaction of the quarantine), so they cannot be told apart: \
                     delete from the quarantine the rows whose _batch, _source_file and \
                     _source_record the table's replay commit holds, or leave them"
                ),
            }));
        }
        let (taken, _) = take(&quarantine, &record).await?;
        summary.quarantine_version =
            Some(commit_rewrite(&mut quarantine, taken, &app, &record).await?);
        summary.finished_earlier = Some(record.number);
    }
    let number = landed.map_or(0, |n| u64::try_from(n).unwrap_or(0) + 1);
    // The files as they are now (a rewrite above replaced some).
    let files = data_files(&quarantine)?;
    let record = ReplayRecord {
        number,
        files,
        rules,
    };
    let (taken, kept) = take(&quarantine, &record).await?;
    if taken.removes.is_empty() {
        summary.still_failing = kept;
        return Ok(summary);
    }
    let mut writer = None;
    let mut landed_rows = 0u64;
    for batch in &taken.rows {
        let (_, lands) = verdict(batch, &record.rules)?;
        let data = data_columns(batch)?;
        let rows = arrow_select::filter::filter_record_batch(&data, &lands)
            .map_err(|e| usage(e.to_string()))?;
        if rows.num_rows() == 0 {
            continue;
        }
        landed_rows += rows.num_rows() as u64;
        if writer.is_none() {
            writer = Some(table.writer(&rows.schema(), &[], &[])?);
        }
        if let Some(w) = writer.as_mut() {
            w.write(rows).await?;
        }
    }
    let taken_rows: u64 = taken.rows.iter().map(|b| b.num_rows() as u64).sum();
    let info = json!({
        "streamId": ck.stream_id(),
        "replay": record,
        "rows": landed_rows,
        "droppedRows": taken_rows - landed_rows,
    });
    // Even with every taken row dropped, the table's commit records the replay.
    let writers = BatchWriters(writer.into_iter().collect());
    summary.table_version = Some(table.commit(writers, &app, number, info).await?);
    failpoint::hit(AFTER_REPLAY_LANDED);
    summary.quarantine_version = Some(commit_rewrite(&mut quarantine, taken, &app, &record).await?);
    summary.replay = Some(number);
    summary.landed = landed_rows;
    summary.dropped = taken_rows - landed_rows;
    summary.still_failing = kept;
    Ok(summary)
}

/// The record of replay `number` in the table's commits.
async fn recorded_replay(table: &DeltaAppend, number: i64) -> Result<ReplayRecord, ReplayError> {
    let commits = table.all_autoloader_commits().await?;
    commits
        .into_iter()
        .rev()
        .filter_map(|(_, info)| {
            serde_json::from_value::<ReplayRecord>(info.get("replay")?.clone()).ok()
        })
        .find(|r| i64::try_from(r.number).is_ok_and(|n| n == number))
        .ok_or_else(|| {
            ReplayError::Table(MaintenanceError::Failed {
                location: table.location().to_string(),
                reason: format!(
                    "replay {number} landed (its txn is in the table) but its record is not in \
                     the log any more: the quarantine cannot be finished safely"
                ),
            })
        })
}

/// Takes the rows that leave the quarantine (they pass, or fail only `drop` rules) out of
/// the record's files, judged by the record's rules; and how many rows stay.
async fn take(
    quarantine: &DeltaAppend,
    record: &ReplayRecord,
) -> Result<(crate::target::rewrite::Taken, u64), ReplayError> {
    let files: BTreeSet<String> = record.files.iter().cloned().collect();
    let candidate = move |path: &str, _: Option<&serde_json::Value>| files.contains(path);
    let rules = record.rules.clone();
    let kept = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let kept_in = Arc::clone(&kept);
    let select: Arc<Selector> = Arc::new(move |b: &RecordBatch| {
        let (leaves, _) = verdict(b, &rules).map_err(|e| e.to_string())?;
        let leaving = leaves.true_count();
        kept_in.fetch_add(
            (b.num_rows() - leaving) as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok((0..leaves.len()).map(|i| leaves.value(i)).collect())
    });
    let location = quarantine.location().to_string();
    let new_writer = || quarantine.writer(&Arc::new(Schema::empty()), &[], &[]);
    let taken = take_rows(
        quarantine.table(),
        &location,
        &candidate,
        select,
        None,
        &new_writer,
    )
    .await?;
    Ok((taken, kept.load(std::sync::atomic::Ordering::Relaxed)))
}

/// Commits the quarantine's files rewritten without the rows that left.
async fn commit_rewrite(
    quarantine: &mut DeltaAppend,
    taken: crate::target::rewrite::Taken,
    app: &str,
    record: &ReplayRecord,
) -> Result<u64, ReplayError> {
    let mut actions = taken.removes;
    actions.extend(taken.adds);
    let info = json!({ "replayed": record.number });
    Ok(quarantine
        .commit_with(
            BatchWriters(Vec::new()),
            actions,
            None,
            app,
            record.number,
            info,
        )
        .await?)
}

/// A quarantined batch's own columns: without the quarantine's.
/// The paths of the quarantine's data files at its loaded version.
fn data_files(quarantine: &DeltaAppend) -> Result<Vec<String>, ReplayError> {
    Ok(quarantine
        .table()
        .snapshot()
        .map_err(|e| ReplayError::Table(MaintenanceError::Usage(e.to_string())))?
        .log_data()
        .into_iter()
        .map(|f| f.path().to_string())
        .collect())
}

fn data_columns(batch: &RecordBatch) -> Result<RecordBatch, ReplayError> {
    let keep: Vec<usize> = (0..batch.num_columns())
        .filter(|&i| !COLUMNS.contains(&batch.schema().field(i).name().as_str()))
        .collect();
    batch
        .project(&keep)
        .map_err(|e| ReplayError::Table(MaintenanceError::Usage(e.to_string())))
}

/// Which rows of a quarantined batch leave the quarantine (they pass every rule but
/// `drop` ones), and which of those land (they pass every rule but `warn` ones).
fn verdict(
    batch: &RecordBatch,
    rules: &[(String, String)],
) -> Result<(BooleanArray, BooleanArray), ReplayError> {
    let usage = |m: String| ReplayError::Table(MaintenanceError::Usage(m));
    let data = data_columns(batch)?;
    let zone = match rules.iter().find(|(k, _)| k == TIME_ZONE) {
        Some((_, z)) => z
            .parse::<chrono_tz::Tz>()
            .map_err(|e| usage(format!("timeZone {z}: {e}")))?,
        None => chrono_tz::Tz::UTC,
    };
    // In a replay a `fail` rule keeps its rows where they are, as a quarantine rule does.
    let rules: Vec<Expectation> = rules
        .iter()
        .filter(|(name, _)| name != TIME_ZONE)
        .map(|(name, value)| {
            Expectation::from_definition(name, value).map(|mut r| {
                if r.on_violation == OnViolation::Fail {
                    r.on_violation = OnViolation::Quarantine;
                }
                r
            })
        })
        .collect::<Result<_, _>>()
        .map_err(|e| usage(e.to_string()))?;
    let bound = BoundRules::bind(&rules, &data.schema(), zone).map_err(|e| usage(e.to_string()))?;
    let v = bound.judge(&data).map_err(|e| usage(e.to_string()))?;
    let rows = data.num_rows();
    let stays = v
        .quarantined
        .map_or_else(|| BooleanArray::from(vec![false; rows]), |(m, _)| m);
    let leaves = arrow_arith::boolean::not(&stays).map_err(|e| usage(e.to_string()))?;
    let lands = v
        .lands
        .unwrap_or_else(|| BooleanArray::from(vec![true; rows]));
    Ok((leaves, lands))
}
