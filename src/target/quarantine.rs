//! The quarantine table: rows a `quarantine` expectation kept out of the flow's table,
//! each with the rules it failed and where it came from, so it can be fixed and replayed.
//!
//! It is a Delta table of its own (by default `<checkpoint>/quarantine`, so a full refresh
//! sets it aside with the checkpoint; `quarantine_table` puts it elsewhere). A batch's
//! quarantined rows are committed with the same `txn(appId, batch)` as the batch, just
//! before the batch's own commit: a replay of the batch finds that txn and commits them
//! no second time, so each row is in exactly one of the table and the quarantine.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::flow::Quarantined;
use crate::location::Location;
use crate::storage::StorageSettings;
use crate::target::delta::{BatchWriter, BatchWriters, DeltaAppend, TargetError};

/// The columns a quarantined row carries after its own, in this order.
pub const FAILED_EXPECTATIONS: &str = "_failed_expectations";
pub const SOURCE_FILE: &str = "_source_file";
pub const SOURCE_RECORD: &str = "_source_record";
pub const BATCH: &str = "_batch";
pub const SCHEMA_VERSION: &str = "_schema_version";
pub const COLUMNS: [&str; 5] = [
    FAILED_EXPECTATIONS,
    SOURCE_FILE,
    SOURCE_RECORD,
    BATCH,
    SCHEMA_VERSION,
];

/// Where a stream's quarantine table is when none is given.
pub fn default_location(checkpoint: &Location) -> Location {
    checkpoint.join("quarantine")
}

/// What every quarantined row of one batch is stamped with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamp {
    pub batch: u64,
    pub schema_version: u64,
}

/// The quarantine table's rows for `q`, read from `file` whose batch's first record is
/// record `first` (from 1).
pub(crate) fn rows(
    q: Quarantined,
    file: &str,
    first: u64,
    stamp: Stamp,
) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let n = q.rows.num_rows();
    let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let mut fields: Vec<Arc<Field>> = q.rows.schema().fields().iter().cloned().collect();
    let mut columns: Vec<ArrayRef> = q.rows.columns().to_vec();
    let extra: [(&str, DataType, ArrayRef); 5] = [
        (
            FAILED_EXPECTATIONS,
            q.rules.data_type().clone(),
            Arc::new(q.rules),
        ),
        (
            SOURCE_FILE,
            DataType::Utf8,
            Arc::new(StringArray::from(vec![file; n])),
        ),
        (
            SOURCE_RECORD,
            DataType::Int64,
            Arc::new(Int64Array::from_iter_values(
                q.inputs.iter().map(|i| as_i64(first + *i as u64)),
            )),
        ),
        (
            BATCH,
            DataType::Int64,
            Arc::new(Int64Array::from(vec![as_i64(stamp.batch); n])),
        ),
        (
            SCHEMA_VERSION,
            DataType::Int64,
            Arc::new(Int64Array::from(vec![as_i64(stamp.schema_version); n])),
        ),
    ];
    for (name, data_type, column) in extra {
        fields.push(Arc::new(Field::new(name, data_type, true)));
        columns.push(column);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

/// The columns kept last when the quarantine table widens: the stream's trailing ones,
/// then the quarantine's own.
pub(crate) fn keep_last(trailing: &[String]) -> Vec<String> {
    trailing
        .iter()
        .cloned()
        .chain(COLUMNS.iter().map(|c| c.to_string()))
        .collect()
}

/// A stream's open quarantine table.
pub struct QuarantineTable {
    table: DeltaAppend,
}

impl QuarantineTable {
    pub async fn open(
        location: &Location,
        storage: &StorageSettings,
    ) -> Result<QuarantineTable, TargetError> {
        Ok(QuarantineTable {
            table: DeltaAppend::open(location, storage).await?,
        })
    }

    pub fn location(&self) -> &str {
        self.table.location()
    }

    /// A writer for rows of `schema` (unpartitioned: the quarantine is small and read
    /// whole).
    pub(crate) fn writer(
        &self,
        schema: &SchemaRef,
        keep_last: &[String],
    ) -> Result<BatchWriter, TargetError> {
        self.table.writer(schema, &[], keep_last)
    }

    /// Commits `writer`'s rows as batch `batch` of `app_id`, unless a commit of that
    /// batch is already in the table (a replayed batch): then nothing is written again.
    /// Returns the table version, or `None` when the batch was there.
    pub(crate) async fn commit(
        &mut self,
        writer: BatchWriter,
        schema: &SchemaRef,
        app_id: &str,
        batch: u64,
        info: serde_json::Value,
        stream_id: &str,
    ) -> Result<Option<u64>, TargetError> {
        self.table.refresh().await?;
        let done = self
            .table
            .committed_batch(app_id)
            .await?
            .is_some_and(|v| u64::try_from(v).is_ok_and(|v| v >= batch));
        if done {
            // The batch ran before and was stopped between its two commits. Its rows here
            // are those of the same files judged by the same rules only if the plan and the
            // rules are the ones recorded; a plan made again of changed files is new rows.
            let earlier = self
                .table
                .autoloader_commits()
                .await?
                .into_iter()
                .rev()
                .map(|(_, c)| c)
                .find(|c| {
                    c.get("streamId") == info.get("streamId") && c.get("batch") == info.get("batch")
                });
            let same = |key: &str| {
                earlier
                    .as_ref()
                    .is_some_and(|c| c.get(key) == info.get(key))
            };
            if earlier.is_none() || (same("files") && same("rules")) {
                BatchWriters(vec![writer]).abort();
                return Ok(None);
            }
            if same("files") {
                BatchWriters(vec![writer]).abort();
                return Err(TargetError::Incompatible {
                    location: self.table.location().to_string(),
                    reason: format!(
                        "batch {batch} put rows in the quarantine under other rules (recorded: \
                         {}; now: {}) and was stopped before its own commit: judged again by \
                         the new rules, a row could land in both tables. Run once more with \
                         the rules the batch was judged by, then change them",
                        earlier
                            .and_then(|c| c.get("rules").cloned())
                            .unwrap_or_default(),
                        info.get("rules").cloned().unwrap_or_default()
                    ),
                });
            }
        }
        self.table.ensure_created(schema, stream_id).await?;
        let version = self
            .table
            .commit(BatchWriters(vec![writer]), app_id, batch, info)
            .await?;
        Ok(Some(version))
    }
}
