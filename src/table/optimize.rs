//! `autoloader optimize`: small files bin-packed into files near a target size, per
//! partition, without DataFusion (delta-rs has OPTIMIZE only behind its `datafusion`
//! feature).
//!
//! Each partition's small files (smaller than the target) are concatenated in a fixed
//! order (modification time, then path) and streamed, batch by batch, into one writer that
//! rolls a new file at the target size; the writer computes the new files' statistics.
//! Everything lands in ONE commit: `remove(dataChange=false)` for the files read,
//! `add(dataChange=false)` for the files written, operation `OPTIMIZE` with its metrics.
//! Streaming readers (our Delta source included) pass over such a commit.
//!
//! Concurrency: delta-rs' conflict checker does not count a concurrent `dataChange=false`
//! remove as a conflict, so two compactions of the same files would both commit (rows
//! twice). The commit is therefore made with no delta-rs retry, against the latest
//! version, after checking that every file it removes is still in the table, unchanged
//! (no deletion vector); a commit that lost the race to another writer is checked again
//! against the new version. An append adding other files never conflicts; files removed
//! meanwhile make it give up, nothing committed. Files written and not committed (a kill,
//! a conflict) are unreferenced garbage that `vacuum` removes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{Schema, SchemaRef};
use deltalake::DeltaTableError;
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::kernel::{Action, Add, Remove};
use deltalake::protocol::DeltaOperation;
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use futures::TryStreamExt;
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use serde::Serialize;
use tracing::{info, warn};

use crate::expr::{Condition, PredicateError};
use crate::location::Location;
use crate::storage::StorageSettings;
use crate::target::delta::{DeltaAppend, TargetError, cleanup_only_at_checkpoints};

/// The default target file size (Delta's OPTIMIZE default, and our writer's roll size).
pub const DEFAULT_TARGET_SIZE: u64 = 128 << 20;
/// A partition is compacted when it holds at least this many small files.
pub const DEFAULT_MIN_FILES: usize = 2;
/// Auto compaction runs after this many batch commits of a stream, unless the table's
/// `optimize.everyCommits` says otherwise.
pub const AUTO_COMPACT_EVERY: u64 = 50;
/// The table property that turns auto compaction on (Delta's name for it).
pub const AUTO_COMPACT_PROPERTY: &str = "delta.autoOptimize.autoCompact";

/// A table's `optimize` section in the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoCompact {
    /// `optimize.autoCompact = true` (else the table property decides).
    pub enabled: bool,
    pub every_commits: u64,
}

/// Commit attempts against a table other writers keep committing to.
const COMMIT_ATTEMPTS: u32 = 50;
/// Rows per batch read from an input file.
const READ_BATCH_ROWS: usize = 8192;

#[derive(Debug, thiserror::Error)]
pub enum MaintenanceError {
    /// A wrong argument: nothing was done (exit 2).
    #[error("{0}")]
    Usage(String),
    #[error("{path} is not a Delta table (it has no _delta_log)")]
    NotATable { path: String },
    #[error("{location}: {reason}")]
    Refused { location: String, reason: String },
    #[error(transparent)]
    Predicate(#[from] PredicateError),
    /// The table changed under the compaction so that it cannot commit: nothing committed.
    #[error("{location}: {reason}; nothing was committed (the files written are left for vacuum)")]
    Conflict { location: String, reason: String },
    #[error("{location}: {reason}")]
    Failed { location: String, reason: String },
    #[error(transparent)]
    Target(#[from] TargetError),
}

impl MaintenanceError {
    /// Whether nothing was done because of the arguments or the table's kind (exit 2).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            MaintenanceError::Usage(_)
                | MaintenanceError::NotATable { .. }
                | MaintenanceError::Refused { .. }
                | MaintenanceError::Predicate(_)
        )
    }
}

/// `optimize`'s options, validated.
#[derive(Debug, Clone)]
pub struct OptimizeSettings {
    pub target_size: u64,
    pub min_files: usize,
    /// Over partition columns only (checked against the table when it runs).
    pub condition: Option<Condition>,
}

impl Default for OptimizeSettings {
    fn default() -> Self {
        OptimizeSettings {
            target_size: DEFAULT_TARGET_SIZE,
            min_files: DEFAULT_MIN_FILES,
            condition: None,
        }
    }
}

impl OptimizeSettings {
    /// The one place `optimize`'s arguments are checked: `target_size` as `128MiB`,
    /// `512m`, `1g`; `min_files` at least 1 (a lone small file is never rewritten);
    /// `condition` in the flows' `where` language.
    pub fn new(
        target_size: Option<&str>,
        min_files: Option<usize>,
        condition: Option<&str>,
    ) -> Result<OptimizeSettings, MaintenanceError> {
        let target_size = match target_size {
            None => DEFAULT_TARGET_SIZE,
            Some(text) => crate::options::parse_bytes("--target-size", text)
                .map_err(|e| MaintenanceError::Usage(e.to_string()))?,
        };
        if target_size < 1 << 10 {
            return Err(MaintenanceError::Usage(format!(
                "--target-size {target_size} bytes is too small (give e.g. 128MiB)"
            )));
        }
        let min_files = min_files.unwrap_or(DEFAULT_MIN_FILES);
        if min_files == 0 {
            return Err(MaintenanceError::Usage(
                "--min-files is at least 1".to_string(),
            ));
        }
        let condition = condition.map(Condition::parse).transpose()?;
        Ok(OptimizeSettings {
            target_size,
            min_files,
            condition,
        })
    }
}

/// What one `optimize` did.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OptimizeReport {
    pub table: String,
    /// The OPTIMIZE commit's version; `None` when nothing needed compacting.
    pub version: Option<u64>,
    pub files_before: usize,
    pub files_after: usize,
    pub files_removed: usize,
    pub files_added: usize,
    pub bytes_removed: u64,
    pub bytes_added: u64,
    pub rows: u64,
    pub partitions_optimized: usize,
    /// Partitions the condition selected but with fewer small files than `--min-files`.
    pub partitions_skipped: usize,
    pub seconds: f64,
}

/// `autoloader optimize TABLE`.
pub async fn optimize(
    table: &Location,
    storage: &StorageSettings,
    settings: &OptimizeSettings,
) -> Result<OptimizeReport, MaintenanceError> {
    let mut sink = open_existing(table, storage).await?;
    compact(&mut sink, settings).await
}

/// A table without auto compaction holding more data files than this gets a warning from
/// the streams writing into it: delta-rs keeps every file's entry in memory and replays
/// them at each commit, so a watcher's memory (about 4 KB a file) and each batch's time
/// grow with the files (a one-file batch took 62 ms of CPU at 6,000 files, 25 at 30).
pub const MANY_FILES: usize = 10_000;

/// What a stream's auto compaction check found.
#[derive(Debug)]
pub enum AutoCompaction {
    /// Compacted (or found nothing to compact).
    Ran(OptimizeReport),
    /// Auto compaction is off; the table holds this many data files.
    Off { files: usize },
}

/// A stream's auto compaction: compacts with the default settings when `configured` or
/// when the table's `delta.autoOptimize.autoCompact` is true.
pub async fn auto_compact(
    table: &Location,
    storage: &StorageSettings,
    configured: bool,
) -> Result<AutoCompaction, MaintenanceError> {
    let mut sink = open_existing(table, storage).await?;
    let enabled = configured
        || sink
            .properties()?
            .get(AUTO_COMPACT_PROPERTY)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if !enabled {
        return Ok(AutoCompaction::Off {
            files: sink.file_count()?,
        });
    }
    Ok(AutoCompaction::Ran(
        compact(&mut sink, &OptimizeSettings::default()).await?,
    ))
}

pub(crate) async fn open_existing(
    table: &Location,
    storage: &StorageSettings,
) -> Result<DeltaAppend, MaintenanceError> {
    DeltaAppend::open_existing(table, storage)
        .await?
        .ok_or_else(|| MaintenanceError::NotATable {
            path: table.to_string(),
        })
}

/// A partition's values, column by column (sorted by column).
type PartitionKey = Vec<(String, Option<String>)>;

/// One file of the table, as the compaction sees it.
struct Candidate {
    path: String,
    store_path: object_store::path::Path,
    size: u64,
    mtime: i64,
    remove: Remove,
}

/// Every file of the table, grouped by its partition values; a file with a deletion vector
/// is refused (delta-rs cannot write them). Also returns the number of files.
fn files_by_partition(
    snapshot: &deltalake::table::state::DeltaTableState,
    refused: &dyn Fn(String) -> MaintenanceError,
) -> Result<(BTreeMap<PartitionKey, Vec<Candidate>>, usize), MaintenanceError> {
    let mut groups: BTreeMap<PartitionKey, Vec<Candidate>> = BTreeMap::new();
    let mut files_before = 0usize;
    for f in snapshot.log_data() {
        files_before += 1;
        if f.deletion_vector_descriptor().is_some() {
            return Err(refused(format!(
                "file {} has a deletion vector; optimize cannot rewrite tables with deletion \
                 vectors (delta-rs cannot write them)",
                f.path()
            )));
        }
        let values: BTreeMap<String, Option<String>> =
            f.partition_values_map().into_iter().collect();
        groups
            .entry(values.into_iter().collect())
            .or_default()
            .push(Candidate {
                path: f.path().into_owned(),
                store_path: f.object_store_path(),
                size: u64::try_from(f.size()).unwrap_or(0),
                mtime: f.modification_time(),
                remove: f.remove_action(false),
            });
    }
    Ok((groups, files_before))
}

/// The chosen partitions' files under the target size, oldest first, where there are at
/// least `min_files` of them; a partition with fewer is counted as skipped.
fn small_files(
    groups: BTreeMap<PartitionKey, Vec<Candidate>>,
    chosen: Vec<bool>,
    settings: &OptimizeSettings,
    report: &mut OptimizeReport,
) -> Vec<(PartitionKey, Vec<Candidate>)> {
    let mut bins: Vec<(PartitionKey, Vec<Candidate>)> = Vec::new();
    for ((key, files), chosen) in groups.into_iter().zip(chosen) {
        if !chosen {
            continue;
        }
        let mut small: Vec<Candidate> = files
            .into_iter()
            .filter(|f| f.size < settings.target_size)
            .collect();
        if small.len() < settings.min_files.max(2) {
            if !small.is_empty() {
                report.partitions_skipped += 1;
            }
            continue;
        }
        small.sort_by(|a, b| (a.mtime, &a.path).cmp(&(b.mtime, &b.path)));
        bins.push((key, small));
    }
    bins
}

/// Compacts `sink`'s table (its current version) in one commit.
pub async fn compact(
    sink: &mut DeltaAppend,
    settings: &OptimizeSettings,
) -> Result<OptimizeReport, MaintenanceError> {
    let started = Instant::now();
    let location = sink.location().to_string();
    let failed = |reason: String| MaintenanceError::Failed {
        location: location.clone(),
        reason,
    };
    let refused = |reason: String| MaintenanceError::Refused {
        location: location.clone(),
        reason,
    };
    sink.refresh().await?;
    let schema = sink.arrow_schema()?;
    let table = sink.table();
    let snapshot = table.snapshot().map_err(|e| failed(e.to_string()))?;
    let read_version = table.version().unwrap_or_default();
    let configuration = snapshot.metadata().configuration().clone();
    if let Some(mode) = configuration.get("delta.columnMapping.mode")
        && !mode.eq_ignore_ascii_case("none")
    {
        return Err(refused(format!(
            "the table uses column mapping ({mode}), which optimize cannot rewrite yet"
        )));
    }
    let partition_columns: Vec<String> = snapshot.metadata().partition_columns().to_vec();
    let selector = match &settings.condition {
        Some(c) => Some(PartitionSelector::new(c, &schema, &partition_columns)?),
        None => None,
    };
    let (groups, files_before) = files_by_partition(snapshot, &refused)?;
    let mut report = OptimizeReport {
        table: location.clone(),
        files_before,
        files_after: files_before,
        ..OptimizeReport::default()
    };
    let keys: Vec<_> = groups.keys().cloned().collect();
    let chosen = match &selector {
        Some(s) => s.select(&keys)?,
        None => vec![true; keys.len()],
    };
    let bins = small_files(groups, chosen, settings, &mut report);
    if bins.is_empty() {
        report.seconds = started.elapsed().as_secs_f64();
        info!(table = %location, "Nothing to compact.");
        return Ok(report);
    }

    // Write: one writer, flushed after each partition so one partition is open at a time.
    let store = table.log_store().object_store(None);
    let writer = RecordBatchWriter::for_table(table).map_err(|e| failed(e.to_string()))?;
    let target_schema = writer.arrow_schema();
    let mut writer = writer
        .with_writer_properties(crate::target::delta::writer_properties(&target_schema))
        .with_target_file_size(settings.target_size);
    let mut adds: Vec<Add> = Vec::new();
    let mut removes: Vec<Remove> = Vec::new();
    let mut expected_rows: Option<u64> = Some(0);
    let mut batches = 0u64;
    let result: Result<(), MaintenanceError> = async {
        for (key, files) in &bins {
            let values: HashMap<&str, Option<&str>> = key
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_deref()))
                .collect();
            for file in files {
                crate::testing::failpoint::hit("optimize-mid-read");
                let reader = crate::storage::RangedFile {
                    store: Arc::clone(&store),
                    path: file.store_path.clone(),
                    size: file.size,
                };
                let mut stream = ParquetRecordBatchStreamBuilder::new(reader)
                    .await
                    .map_err(|e| failed(format!("{}: {e}", file.path)))?
                    .with_batch_size(READ_BATCH_ROWS)
                    .build()
                    .map_err(|e| failed(format!("{}: {e}", file.path)))?;
                while let Some(batch) = stream
                    .try_next()
                    .await
                    .map_err(|e| failed(format!("{}: {e}", file.path)))?
                {
                    report.rows += batch.num_rows() as u64;
                    batches += 1;
                    let batch = conform(&batch, &target_schema, &partition_columns, &values)
                        .map_err(|e| failed(format!("{}: {e}", file.path)))?;
                    writer
                        .write(batch)
                        .await
                        .map_err(|e| failed(format!("{}: {e}", file.path)))?;
                }
                removes.push(file.remove.clone());
                report.bytes_removed += file.size;
            }
            let written = writer.flush().await.map_err(|e| failed(e.to_string()))?;
            adds.extend(written.into_iter().map(|mut a| {
                a.data_change = false;
                a
            }));
            report.partitions_optimized += 1;
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        writer.reset();
        return Err(e);
    }
    // The rows read went into the files written: checked against the new files' statistics.
    for a in &adds {
        expected_rows = match (expected_rows, add_rows(a)) {
            (Some(sum), Some(n)) => Some(sum + n),
            _ => None,
        };
    }
    if let Some(written) = expected_rows
        && written != report.rows
    {
        return Err(failed(format!(
            "read {} rows but the new files' statistics count {written}; nothing committed",
            report.rows
        )));
    }
    report.files_removed = removes.len();
    report.files_added = adds.len();
    report.bytes_added = adds
        .iter()
        .map(|a| u64::try_from(a.size).unwrap_or(0))
        .sum();
    let metrics = metrics(
        &report,
        &adds,
        &removes,
        batches,
        files_before,
        read_version,
    );
    let operation = DeltaOperation::Optimize {
        predicate: settings.condition.as_ref().map(|c| c.text().to_string()),
        target_size: i64::try_from(settings.target_size).unwrap_or(i64::MAX),
    };
    crate::testing::failpoint::hit("before-optimize-commit");
    let version = commit(sink, adds, removes, operation, metrics).await?;
    crate::testing::failpoint::hit("after-optimize-commit");
    report.version = Some(version);
    report.files_after = files_before - report.files_removed + report.files_added;
    report.seconds = started.elapsed().as_secs_f64();
    info!(table = %location, version, removed = report.files_removed, added = report.files_added, "Compacted.");
    Ok(report)
}

/// `numRecords` of an add's statistics.
fn add_rows(add: &Add) -> Option<u64> {
    let stats: serde_json::Value = serde_json::from_str(add.stats.as_deref()?).ok()?;
    stats.get("numRecords")?.as_u64()
}

/// The commit's `operationMetrics`, in delta-rs' names (its OPTIMIZE's), so its readers
/// and ours see the same figures.
fn metrics(
    report: &OptimizeReport,
    adds: &[Add],
    removes: &[Remove],
    batches: u64,
    considered: usize,
    read_version: u64,
) -> serde_json::Value {
    fn details(sizes: &[i64]) -> serde_json::Value {
        let total: i64 = sizes.iter().sum();
        serde_json::json!({
            "min": sizes.iter().min().copied().unwrap_or(0),
            "max": sizes.iter().max().copied().unwrap_or(0),
            "avg": if sizes.is_empty() { 0.0 } else { total as f64 / sizes.len() as f64 },
            "totalFiles": sizes.len(),
            "totalSize": total,
        })
    }
    let added: Vec<i64> = adds.iter().map(|a| a.size).collect();
    let removed: Vec<i64> = removes.iter().map(|r| r.size.unwrap_or(0)).collect();
    serde_json::json!({
        "numFilesAdded": adds.len(),
        "numFilesRemoved": removes.len(),
        "filesAdded": details(&added),
        "filesRemoved": details(&removed),
        "partitionsOptimized": report.partitions_optimized,
        "numBatches": batches,
        "totalConsideredFiles": considered,
        "totalFilesSkipped": considered - removes.len(),
        "preserveInsertionOrder": true,
        "numRows": report.rows,
        "readVersion": read_version,
    })
}

/// The file name of a table path (unique: a uuid), compared undecoded or decoded alike.
fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Commits the compaction: against the latest version each time, only while every file it
/// removes is still there without a deletion vector (see the module comment).
async fn commit(
    sink: &mut DeltaAppend,
    adds: Vec<Add>,
    removes: Vec<Remove>,
    operation: DeltaOperation,
    metrics: serde_json::Value,
) -> Result<u64, MaintenanceError> {
    let location = sink.location().to_string();
    let conflict = |reason: String| MaintenanceError::Conflict {
        location: location.clone(),
        reason,
    };
    let mut actions: Vec<Action> = removes.iter().cloned().map(Action::Remove).collect();
    actions.extend(adds.iter().cloned().map(Action::Add));
    let props = CommitProperties::default()
        .with_metadata([("operationMetrics".to_string(), metrics)])
        .with_max_retries(0);
    let mut attempt = 0;
    loop {
        attempt += 1;
        sink.refresh().await?;
        let table = sink.table();
        let snapshot = table.snapshot().map_err(|e| conflict(e.to_string()))?;
        let active: HashMap<String, bool> = snapshot
            .log_data()
            .into_iter()
            .map(|f| {
                (
                    file_name(&f.path()).to_string(),
                    f.deletion_vector_descriptor().is_some(),
                )
            })
            .collect();
        // An earlier attempt that reported an error but landed.
        if adds.iter().all(|a| active.contains_key(file_name(&a.path))) && !adds.is_empty() {
            let version = table.version().unwrap_or_default();
            info!(table = %location, version, "The compaction had landed.");
            return Ok(version);
        }
        for r in &removes {
            match active.get(file_name(&r.path)) {
                None => {
                    return Err(conflict(format!(
                        "file {} was removed by another writer while it was being compacted \
                         (version {} is the table's latest)",
                        r.path,
                        table.version().unwrap_or_default()
                    )));
                }
                Some(true) => {
                    return Err(conflict(format!(
                        "file {} got a deletion vector while it was being compacted",
                        r.path
                    )));
                }
                Some(false) => {}
            }
        }
        crate::testing::failpoint::hit(OPTIMIZE_ATTEMPT);
        let built = CommitBuilder::from(cleanup_only_at_checkpoints(props.clone(), snapshot))
            .with_actions(actions.clone())
            .build(Some(snapshot), table.log_store(), operation.clone())
            .await;
        match built {
            Ok(finalized) => return Ok(finalized.version()),
            Err(e) => {
                let lost_race = matches!(
                    &e,
                    DeltaTableError::Transaction { .. } | DeltaTableError::VersionAlreadyExists(_)
                );
                if attempt >= COMMIT_ATTEMPTS {
                    return Err(conflict(format!(
                        "could not commit after {attempt} attempts, other writers kept \
                         committing first: {e}"
                    )));
                }
                if !lost_race {
                    warn!(table = %location, attempt, error = %e, "Optimize commit reported an error; checking whether it landed.");
                }
                let pause = 20 * u64::from(attempt.min(10));
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        }
    }
}

/// The failpoint a compaction's commit attempt reaches once it has checked its snapshot:
/// a sleep there lets other writers commit first (`tests/it/optimize.rs`).
pub const OPTIMIZE_ATTEMPT: &str = "optimize-attempt";

/// `batch` (one input file's, without partition columns) in the writer's schema: the
/// partition columns filled from the file's values, columns the file predates null,
/// other types cast to the table's.
fn conform(
    batch: &RecordBatch,
    target: &SchemaRef,
    partition_columns: &[String],
    values: &HashMap<&str, Option<&str>>,
) -> Result<RecordBatch, String> {
    let n = batch.num_rows();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(target.fields().len());
    for field in target.fields() {
        let name = field.name();
        let column: ArrayRef = if partition_columns.iter().any(|p| p == name) {
            let value = values.get(name.as_str()).copied().flatten();
            let text: ArrayRef = Arc::new(StringArray::from(vec![value; n]));
            arrow_cast::cast(&text, field.data_type())
                .map_err(|e| format!("partition value {name}={value:?}: {e}"))?
        } else {
            crate::record::column_as(batch, field).map_err(|e| format!("column {name}: {e}"))?
        };
        columns.push(column);
    }
    RecordBatch::try_new(Arc::clone(target), columns).map_err(|e| e.to_string())
}

/// `--where` over the partition values of each partition.
struct PartitionSelector {
    predicate: crate::expr::Predicate,
    schema: SchemaRef,
}

impl PartitionSelector {
    fn new(
        condition: &Condition,
        table: &Schema,
        partition_columns: &[String],
    ) -> Result<PartitionSelector, MaintenanceError> {
        let others: Vec<&str> = condition
            .columns()
            .into_iter()
            .filter(|c| !partition_columns.iter().any(|p| p.eq_ignore_ascii_case(c)))
            .collect();
        if !others.is_empty() {
            return Err(MaintenanceError::Usage(format!(
                "--where \"{}\" names {} which {} not a partition column (the table's: {}); \
                 optimize selects whole partitions",
                condition.text(),
                others.join(", "),
                if others.len() == 1 { "is" } else { "are" },
                if partition_columns.is_empty() {
                    "none".to_string()
                } else {
                    partition_columns.join(", ")
                }
            )));
        }
        let fields: Vec<_> = partition_columns
            .iter()
            .filter_map(|p| table.field_with_name(p).ok().cloned())
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let predicate = condition.bind(&schema, chrono_tz::Tz::UTC)?;
        Ok(PartitionSelector { predicate, schema })
    }

    /// Which of the partitions (their values) the condition holds for.
    fn select(
        &self,
        keys: &[Vec<(String, Option<String>)>],
    ) -> Result<Vec<bool>, MaintenanceError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let usage = |e: String| MaintenanceError::Usage(e);
        let mut columns: Vec<ArrayRef> = Vec::new();
        for field in self.schema.fields() {
            let texts: Vec<Option<&str>> = keys
                .iter()
                .map(|k| {
                    k.iter()
                        .find(|(c, _)| c == field.name())
                        .and_then(|(_, v)| v.as_deref())
                })
                .collect();
            let text: ArrayRef = Arc::new(StringArray::from(texts));
            columns.push(
                arrow_cast::cast(&text, field.data_type())
                    .map_err(|e| usage(format!("partition column {}: {e}", field.name())))?,
            );
        }
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), columns)
            .map_err(|e| usage(e.to_string()))?;
        let chosen = self.predicate.evaluate(&batch)?;
        Ok((0..chosen.len()).map(|i| chosen.value(i)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked_in_one_place() {
        let s =
            OptimizeSettings::new(Some("256MiB"), Some(10), Some("day = '2026-11-30'")).unwrap();
        assert_eq!((s.target_size, s.min_files), (256 << 20, 10));
        assert_eq!(s.condition.unwrap().columns(), ["day"]);
        let d = OptimizeSettings::new(None, None, None).unwrap();
        assert_eq!((d.target_size, d.min_files), (128 << 20, 2));
        assert!(OptimizeSettings::new(Some("12 parsecs"), None, None).is_err());
        assert!(
            OptimizeSettings::new(Some("10"), None, None)
                .unwrap_err()
                .is_usage()
        );
        assert!(OptimizeSettings::new(None, Some(0), None).is_err());
        assert!(
            OptimizeSettings::new(None, None, Some("day = "))
                .unwrap_err()
                .is_usage()
        );
        let v = super::super::vacuum::VacuumSettings::new(Some("7d"), false, false).unwrap();
        assert_eq!(v.retain, super::super::vacuum::DEFAULT_RETAIN);
        assert!(super::super::vacuum::VacuumSettings::new(Some("soon"), false, false).is_err());
    }

    #[test]
    fn a_batch_is_conformed_to_the_table_with_its_partition_values() {
        use arrow_array::Int64Array;
        use arrow_schema::{DataType, Field};
        let target = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("late", DataType::Utf8, true),
            Field::new("day", DataType::Date32, true),
        ]));
        let file = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, true)])),
            vec![Arc::new(arrow_array::Int32Array::from(vec![1, 2]))],
        )
        .unwrap();
        let values = HashMap::from([("day", Some("2026-11-30"))]);
        let out = conform(&file, &target, &["day".to_string()], &values).unwrap();
        assert_eq!(out.schema(), target);
        assert_eq!(
            out.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values(),
            &[1, 2]
        );
        assert_eq!(
            out.column(1).null_count(),
            2,
            "a column the file predates is null"
        );
        assert_eq!(
            arrow_cast::display::array_value_to_string(out.column(2), 1).unwrap(),
            "2026-11-30"
        );
    }
}
