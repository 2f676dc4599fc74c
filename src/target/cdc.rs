//! The CDC target: a batch of change records applied to a table keyed by business key
//! (SCD type 1), exactly once.
//!
//! What the flow remembers of each key (the sequence last applied, tombstones, the
//! truncate mark) lives in a state table of its own, a Delta table in the flow's checkpoint
//! (`cdc_state`): one row per key, `key` and `seq` as comparable bytes (`cdc::keys`) in hex,
//! which keeps their order. A
//! batch commits the target first, then the state, each carrying `txn(app_id, batch)`; the
//! batch counts as committed once the state has it. After a crash between the two, the
//! batch is read again and only the state is committed, computed from the state as it was
//! before the batch, which the target commit did not change.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow_array::{Array, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use deltalake::protocol::{DeltaOperation, MergePredicate};
use futures::future::BoxFuture;
use serde_json::json;
use tracing::{info, warn};

use super::delta::{BatchWriter, BatchWriters, DeltaAppend, SinkError};
use super::rewrite::take_rows;
use super::{ChangeCounts, Target};
use crate::cdc::keys::RowEncoder;
use crate::cdc::scd1::{self, Change, RowChange, StateEntry};
use crate::cdc::{CdcSpec, RowCondition};
use crate::clock::now_ms;
use crate::location::Location;
use crate::storage::StorageSettings;

mod scd2;

/// The table property that says how long a tombstone is kept (Databricks' name).
pub const TOMBSTONE_GC_PROPERTY: &str = "pipelines.cdc.tombstoneGCThresholdInSeconds";
const TOMBSTONE_GC_DEFAULT_SECS: i64 = 2 * 24 * 3600;

/// A CDC flow's target and state.
pub struct CdcTarget {
    target: DeltaAppend,
    state: DeltaAppend,
    spec: CdcSpec,
    deletes: Option<RowCondition>,
    truncates: Option<RowCondition>,
    /// What the last batch did (none when only its state was committed, after a restart).
    last: Option<ChangeCounts>,
}

fn state_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("seq", DataType::Utf8, false),
        Field::new("deleted", DataType::Boolean, false),
        Field::new("at_ms", DataType::Int64, false),
    ]))
}

/// The truncate mark's key: no real key encodes to no bytes.
const TRUNCATE_KEY: &[u8] = b"";

fn data_err(location: &str, reason: impl Into<String>) -> SinkError {
    SinkError::Incompatible {
        location: location.to_string(),
        reason: reason.into(),
    }
}

impl CdcTarget {
    /// The CDC flow into `target`, its state in `checkpoint`.
    pub async fn open(
        target: DeltaAppend,
        checkpoint: &Location,
        storage: &StorageSettings,
        spec: CdcSpec,
        deletes: Option<RowCondition>,
        truncates: Option<RowCondition>,
    ) -> Result<CdcTarget, SinkError> {
        let state_table = if spec.stored_as_scd_type == 2 {
            scd2::RECORDS_TABLE
        } else {
            "cdc_state"
        };
        let state = DeltaAppend::open(&checkpoint.join(state_table), storage).await?;
        Ok(CdcTarget {
            target,
            state,
            spec,
            deletes,
            truncates,
            last: None,
        })
    }

    /// The target's columns for the change records' `layout`: the selected ones.
    fn target_schema(&self, layout: &Schema) -> SchemaRef {
        Arc::new(Schema::new(
            layout
                .fields()
                .iter()
                .filter(|f| self.spec.keeps(f.name()))
                .cloned()
                .collect::<Vec<_>>(),
        ))
    }

    fn gc_threshold_ms(&self) -> i64 {
        self.target
            .properties()
            .ok()
            .and_then(|p| {
                p.get(TOMBSTONE_GC_PROPERTY)
                    .and_then(|v| v.trim().parse::<i64>().ok())
            })
            .unwrap_or(TOMBSTONE_GC_DEFAULT_SECS)
            .saturating_mul(1000)
    }

    /// Evaluates a condition, null as false.
    fn flags(cond: Option<&RowCondition>, batch: &RecordBatch) -> Result<Vec<bool>, String> {
        match cond {
            None => Ok(vec![false; batch.num_rows()]),
            Some(c) => c(batch),
        }
    }

    /// The change records, encoded; a null key (on other than a truncate) or a null
    /// sequence stops the batch naming the file and record.
    fn encode(&self, changes: &RecordBatch) -> Result<Vec<Change>, SinkError> {
        let loc = self.target.location();
        let schema = changes.schema();
        let keys =
            RowEncoder::new(&self.spec.keys, &schema).map_err(|e| data_err(loc, e.to_string()))?;
        let seqs = RowEncoder::new(&self.spec.sequence_by, &schema)
            .map_err(|e| data_err(loc, e.to_string()))?;
        let deletes = Self::flags(self.deletes.as_ref(), changes).map_err(|e| data_err(loc, e))?;
        let truncates =
            Self::flags(self.truncates.as_ref(), changes).map_err(|e| data_err(loc, e))?;
        let where_is = |row: usize| record_place(changes, row);
        for (row, &truncate) in truncates.iter().enumerate() {
            if let Some(c) = seqs.first_null(changes, row) {
                return Err(data_err(
                    loc,
                    format!(
                        "NULL_SEQUENCE: sequence column {c} is null in {}; nothing of this batch was applied",
                        where_is(row)
                    ),
                ));
            }
            if !truncate && let Some(c) = keys.first_null(changes, row) {
                return Err(data_err(
                    loc,
                    format!(
                        "NULL_KEY: key column {c} is null in {}; nothing of this batch was applied",
                        where_is(row)
                    ),
                ));
            }
        }
        let key_bytes = keys
            .encode(changes)
            .map_err(|e| data_err(loc, e.to_string()))?;
        let seq_bytes = seqs
            .encode(changes)
            .map_err(|e| data_err(loc, e.to_string()))?;
        Ok(key_bytes
            .into_iter()
            .zip(seq_bytes)
            .enumerate()
            .map(|(i, (key, seq))| Change {
                key: if truncates[i] {
                    TRUNCATE_KEY.to_vec()
                } else {
                    key
                },
                seq,
                delete: deletes[i] && !truncates[i],
                truncate: truncates[i],
            })
            .collect())
    }

    async fn apply(
        &mut self,
        writers: BatchWriters,
        app_id: &str,
        batch: u64,
        mut info: serde_json::Value,
    ) -> Result<u64, SinkError> {
        let loc = self.target.location().to_string();
        self.last = None;
        let collected = writers.collected();
        if self.spec.stored_as_scd_type == 2 {
            let changes = match collected.first() {
                Some(first) => {
                    let raw = arrow_select::concat::concat_batches(&first.schema(), &collected)
                        .map_err(|e| data_err(&loc, e.to_string()))?;
                    Some(
                        self.spec
                            .unwrap_batch(raw)
                            .map_err(|e| data_err(&loc, e.to_string()))?,
                    )
                }
                None => None,
            };
            drop(collected);
            return self.apply_scd2(changes, app_id, batch, info).await;
        }
        let Some(first) = collected.first() else {
            // Every file of the batch was skipped (ignoreMissingFiles, ignoreCorruptFiles):
            // nothing to apply, but the batch is done, in both tables.
            return self.commit_nothing(app_id, batch, info).await;
        };
        let layout = first.schema();
        let changes = arrow_select::concat::concat_batches(&layout, &collected)
            .map_err(|e| data_err(&loc, e.to_string()))?;
        drop(collected);
        let changes = self
            .spec
            .unwrap_batch(changes)
            .map_err(|e| data_err(&loc, e.to_string()))?;
        let layout = changes.schema();
        let encoded = self.encode(&changes)?;
        let target_done = self.target_has(app_id, batch).await?;

        // The state of the batch's keys, and the truncate mark, taken out of the state table.
        let batch_keys: HashSet<Vec<u8>> = encoded
            .iter()
            .filter(|c| !c.truncate)
            .map(|c| c.key.clone())
            .collect();
        let raises_truncate = encoded.iter().any(|c| c.truncate);
        let new_mark_hint = encoded
            .iter()
            .filter(|c| c.truncate)
            .map(|c| c.seq.clone())
            .max();
        let mut state_writer = self.state.writer(&state_schema(), &[], &[])?;
        let batch_hex: HashSet<String> = batch_keys.iter().map(hex::encode).collect();
        let mark_hex = new_mark_hint.as_ref().map(hex::encode);
        let selector = |b: &RecordBatch| -> Result<Vec<bool>, String> {
            let key = text_column(b, "key")?;
            let seq = text_column(b, "seq")?;
            Ok((0..b.num_rows())
                .map(|i| {
                    let k = key.value(i);
                    k.is_empty()
                        || batch_hex.contains(k)
                        || mark_hex.as_deref().is_some_and(|m| seq.value(i) < m)
                })
                .collect())
        };
        let taken_state = take_rows(
            self.state.table(),
            self.state.location(),
            &["key", "seq"],
            &selector,
            &mut state_writer,
        )
        .await?;
        let mut prior: HashMap<Vec<u8>, StateEntry> = HashMap::new();
        let mut truncated_keys: Vec<(Vec<u8>, StateEntry)> = Vec::new();
        let mut mark: Option<Vec<u8>> = None;
        for b in &taken_state.rows {
            for (key, entry) in state_entries(b).map_err(|e| data_err(&loc, e))? {
                if key == TRUNCATE_KEY {
                    mark = Some(entry.seq);
                } else if batch_keys.contains(&key) {
                    prior.insert(key, entry);
                } else {
                    truncated_keys.push((key, entry));
                }
            }
        }
        let now = now_ms();
        let reduction = scd1::reduce(
            &encoded,
            &prior,
            mark.as_deref(),
            self.spec.ignore_null_updates,
            now,
        );
        let effective_mark = reduction.truncate.clone().or(mark.clone());
        // Keys the truncate empties (not in the batch): their rows go, their state too.
        let emptied: Vec<&Vec<u8>> = truncated_keys
            .iter()
            .filter(|(_, e)| {
                effective_mark
                    .as_deref()
                    .is_some_and(|m| e.seq.as_slice() < m)
            })
            .filter(|(_, e)| !e.deleted)
            .map(|(k, _)| k)
            .collect();
        // The batch's keys whose row a raised mark removes (a change after the mark may
        // bring a new one).
        let below_mark: Vec<Vec<u8>> = prior
            .iter()
            .filter(|(_, e)| {
                raises_truncate
                    && !e.deleted
                    && effective_mark
                        .as_deref()
                        .is_some_and(|m| e.seq.as_slice() < m)
            })
            .map(|(k, _)| k.clone())
            .collect();

        let mut metrics = json!({
            "rowsInserted": 0, "rowsUpdated": 0, "rowsDeleted": 0,
            "recordsStale": reduction.stale, "recordsTruncated": reduction.truncated,
            "sequenceTies": reduction.ties, "filesRewritten": 0,
        });
        if reduction.ties > 0 {
            warn!(table = %loc, batch, ties = reduction.ties, "Change records of one key share a sequence; the delete, else the later record, was applied.");
        }
        let version = if target_done {
            info!(table = %loc, batch, "The target had this batch before a restart; committing the flow's state only.");
            self.target.version().unwrap_or_default()
        } else {
            let target_schema = match self.target.arrow_schema() {
                Ok(existing) => widen(&existing, &self.target_schema(&layout)),
                Err(e) => return Err(e),
            };
            let key_encoder = RowEncoder::new(&self.spec.keys, &target_schema)
                .map_err(|e| data_err(&loc, e.to_string()))?;
            let touched: HashSet<&[u8]> = reduction
                .rows
                .keys()
                .map(Vec::as_slice)
                .chain(emptied.iter().map(|k| k.as_slice()))
                .chain(below_mark.iter().map(|k| k.as_slice()))
                .collect();
            let key_columns: Vec<&str> = self.spec.keys.iter().map(String::as_str).collect();
            let select = |b: &RecordBatch| -> Result<Vec<bool>, String> {
                let keys = key_encoder.encode(b).map_err(|e| e.to_string())?;
                Ok(keys
                    .iter()
                    .map(|k| touched.contains(k.as_slice()))
                    .collect())
            };
            let mut target_writer = self.target.writer(&target_schema, &[], &[])?;
            let taken = take_rows(
                self.target.table(),
                &loc,
                &key_columns,
                &select,
                &mut target_writer,
            )
            .await?;
            // Each touched key's current row, as (batch, row) of the taken rows.
            let mut current: HashMap<Vec<u8>, (usize, usize)> = HashMap::new();
            for (bi, b) in taken.rows.iter().enumerate() {
                for (ri, k) in key_encoder
                    .encode(b)
                    .map_err(|e| data_err(&loc, e.to_string()))?
                    .into_iter()
                    .enumerate()
                {
                    current.insert(k, (bi, ri));
                }
            }
            let mut upserts = Vec::new();
            let (mut inserted, mut updated, mut deleted) = (0u64, 0u64, 0u64);
            let mut ordered: Vec<(&Vec<u8>, &RowChange)> = reduction.rows.iter().collect();
            ordered.sort_by_key(|(_, c)| match c {
                RowChange::Upsert { records, .. } => records.last().copied().unwrap_or(0),
                RowChange::Delete => 0,
            });
            for (key, change) in ordered {
                let existing = current.get(key).copied();
                match change {
                    RowChange::Delete => deleted += u64::from(existing.is_some()),
                    RowChange::Upsert { .. } => {
                        if existing.is_some() {
                            updated += 1;
                        } else {
                            inserted += 1;
                        }
                        upserts.push((change, existing));
                    }
                }
            }
            deleted += emptied.len() as u64
                + below_mark
                    .iter()
                    .filter(|k| !matches!(reduction.rows.get(*k), Some(RowChange::Upsert { .. })))
                    .count() as u64;
            if !upserts.is_empty() {
                let rows = scd1::upserted_rows(&target_schema, &changes, &upserts, &taken.rows)
                    .map_err(|e| data_err(&loc, e.to_string()))?;
                target_writer.write(rows).await?;
            }
            metrics["rowsInserted"] = inserted.into();
            metrics["rowsUpdated"] = updated.into();
            metrics["rowsDeleted"] = deleted.into();
            metrics["filesRewritten"] = taken.removes.len().into();
            info["cdc"] = metrics.clone();
            let operation = DeltaOperation::Merge {
                predicate: None,
                merge_predicate: Some(format!(
                    "target.{} = source.{}",
                    self.spec.keys.join(" AND target."),
                    self.spec.keys.join(" AND source.")
                )),
                matched_predicates: vec![MergePredicate {
                    action_type: "update".into(),
                    predicate: None,
                }],
                not_matched_predicates: vec![MergePredicate {
                    action_type: "insert".into(),
                    predicate: None,
                }],
                not_matched_by_source_predicates: Vec::new(),
            };
            let v = self
                .target
                .commit_with(
                    BatchWriters(vec![target_writer]),
                    taken.removes,
                    Some(operation),
                    app_id,
                    batch,
                    info,
                )
                .await?;
            info!(table = %loc, batch, version = v, inserted, updated, deleted, stale = reduction.stale, "Applied changes.");
            self.last = Some(ChangeCounts {
                inserted,
                updated,
                deleted,
                stale: reduction.stale + reduction.truncated,
                ties: reduction.ties,
            });
            v
        };
        crate::testing::failpoint::hit("after-cdc-target-commit");

        // The state after the batch: the taken entries replaced, emptied ones dropped,
        // tombstones past the threshold collected.
        let gc_before = now - self.gc_threshold_ms();
        let mut entries: Vec<(Vec<u8>, StateEntry)> = Vec::new();
        for (k, e) in prior {
            let replaced = reduction.state.contains_key(&k) || below_mark.contains(&k);
            let collected = e.deleted && e.at_ms < gc_before;
            if !replaced && !collected {
                entries.push((k, e));
            }
        }
        for (k, e) in truncated_keys {
            let below = effective_mark
                .as_deref()
                .is_some_and(|m| e.seq.as_slice() < m);
            let collected = e.deleted && e.at_ms < gc_before;
            if !below && !collected {
                entries.push((k, e));
            }
        }
        entries.extend(reduction.state);
        if let Some(m) = effective_mark {
            entries.push((
                TRUNCATE_KEY.to_vec(),
                StateEntry {
                    seq: m,
                    deleted: false,
                    at_ms: now,
                },
            ));
        }
        if !entries.is_empty() {
            state_writer.write(state_batch(&entries)).await?;
        }
        self.commit_state(state_writer, taken_state.removes, app_id, batch)
            .await?;
        Ok(version)
    }
}

impl CdcTarget {
    /// Commits a batch that holds no change: its `txn` in the target, then in the state.
    async fn commit_nothing(
        &mut self,
        app_id: &str,
        batch: u64,
        info: serde_json::Value,
    ) -> Result<u64, SinkError> {
        let version = if self.target_has(app_id, batch).await? {
            self.target.version().unwrap_or_default()
        } else {
            self.target
                .commit_with(
                    BatchWriters(Vec::new()),
                    Vec::new(),
                    None,
                    app_id,
                    batch,
                    info,
                )
                .await?
        };
        self.commit_state(BatchWriters(Vec::new()), Vec::new(), app_id, batch)
            .await?;
        self.last = Some(ChangeCounts::default());
        Ok(version)
    }

    /// Whether the target already holds batch `batch` of `app_id` (both tables read
    /// afresh first): then only the state is left to commit.
    async fn target_has(&mut self, app_id: &str, batch: u64) -> Result<bool, SinkError> {
        self.target.refresh().await?;
        self.state.refresh().await?;
        let batch_version = i64::try_from(batch).unwrap_or(i64::MAX);
        Ok(self
            .target
            .committed_batch(app_id)
            .await?
            .is_some_and(|v| v >= batch_version))
    }

    /// Commits the flow's state after the batch (the rows `writers` hold, replacing the
    /// files `removes` names), with the batch's `txn`: last, so the batch counts as
    /// committed only once the target has it too.
    async fn commit_state(
        &mut self,
        writers: impl Into<BatchWriters>,
        removes: Vec<deltalake::kernel::Action>,
        app_id: &str,
        batch: u64,
    ) -> Result<(), SinkError> {
        // A state table created just now has nothing to remove.
        let schema = if self.spec.stored_as_scd_type == 2 {
            scd2::records_base_schema()
        } else {
            state_schema()
        };
        let created = self.state.ensure_created(&schema, app_id).await?;
        let removes = if created { Vec::new() } else { removes };
        self.state
            .commit_with(
                writers.into(),
                removes,
                None,
                app_id,
                batch,
                json!({ "batch": batch }),
            )
            .await?;
        Ok(())
    }

    /// Why this flow cannot go on: its target holds changes it applied, but the state
    /// that remembers their sequences and tombstones is gone (a lost checkpoint). Going
    /// on would let older records overwrite newer rows.
    /// (`fresh`: the checkpoint holds no progress; a checkpoint with a plan may be one
    /// killed between its first target and state commits, which a replay completes.)
    pub async fn lost_state(&self, fresh: bool) -> Result<Option<String>, SinkError> {
        if !fresh || self.state.exists() || !self.target.exists() {
            return Ok(None);
        }
        let applied = self
            .target
            .autoloader_commits()
            .await?
            .iter()
            .any(|(_, c)| c.get("cdc").is_some());
        Ok(applied.then(|| {
            format!(
                "the CDC flow into {} has lost its state (the applied sequences and tombstones \
                 kept in its checkpoint, at {}): going on could let older records overwrite \
                 newer rows. Reset the table to apply every change again (autoloader reset {})",
                self.target.location(),
                self.state.location(),
                self.target.location()
            )
        }))
    }
}

/// Where a change record came from, for errors: its file (from `_metadata`) and its place.
fn record_place(changes: &RecordBatch, row: usize) -> String {
    let file = changes
        .column_by_name("_metadata")
        .and_then(|m| m.as_any().downcast_ref::<arrow_array::StructArray>())
        .and_then(|m| m.column_by_name("file_path"))
        .and_then(|p| p.as_any().downcast_ref::<arrow_array::StringArray>())
        .filter(|p| p.is_valid(row))
        .map(|p| p.value(row).to_string());
    match file {
        Some(f) => format!("{f} (record {} of the batch)", row + 1),
        None => format!("record {} of the batch", row + 1),
    }
}

fn text_column<'a>(b: &'a RecordBatch, name: &str) -> Result<&'a StringArray, String> {
    b.column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| format!("the CDC state has no text column {name}"))
}

fn state_entries(b: &RecordBatch) -> Result<Vec<(Vec<u8>, StateEntry)>, String> {
    let key = text_column(b, "key")?;
    let seq = text_column(b, "seq")?;
    let deleted = b
        .column_by_name("deleted")
        .and_then(|c| c.as_any().downcast_ref::<BooleanArray>())
        .ok_or("the CDC state has no deleted column")?;
    let at = b
        .column_by_name("at_ms")
        .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
        .ok_or("the CDC state has no at_ms column")?;
    let bytes = |s: &str| hex::decode(s).map_err(|e| format!("the CDC state is damaged: {e}"));
    (0..b.num_rows())
        .map(|i| {
            Ok((
                bytes(key.value(i))?,
                StateEntry {
                    seq: bytes(seq.value(i))?,
                    deleted: deleted.value(i),
                    at_ms: at.value(i),
                },
            ))
        })
        .collect()
}

fn state_batch(entries: &[(Vec<u8>, StateEntry)]) -> RecordBatch {
    let keys: Vec<String> = entries.iter().map(|(k, _)| hex::encode(k)).collect();
    let seqs: Vec<String> = entries.iter().map(|(_, e)| hex::encode(&e.seq)).collect();
    RecordBatch::try_new(
        state_schema(),
        vec![
            Arc::new(StringArray::from(keys)),
            Arc::new(StringArray::from(seqs)),
            Arc::new(BooleanArray::from(
                entries.iter().map(|(_, e)| e.deleted).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                entries.iter().map(|(_, e)| e.at_ms).collect::<Vec<_>>(),
            )),
        ],
    )
    .expect("the state batch matches its schema")
}

/// The table's columns, then the selected change columns it lacks (evolution).
fn widen(table: &SchemaRef, selected: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<_> = table.fields().iter().cloned().collect();
    for f in selected.fields() {
        if table.field_with_name(f.name()).is_err() {
            fields.push(f.clone());
        }
    }
    Arc::new(Schema::new(fields))
}

impl Target for CdcTarget {
    fn exists(&self) -> bool {
        self.target.exists()
    }

    fn version(&self) -> Option<u64> {
        self.target.version()
    }

    fn ensure_created<'a>(
        &'a mut self,
        schema: &'a SchemaRef,
        stream_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, SinkError>> {
        Box::pin(async move {
            let unwrapped = self
                .spec
                .unwrapped_schema(schema)
                .map_err(|e| data_err(self.target.location(), e.to_string()))?;
            let target_schema = if self.spec.stored_as_scd_type == 2 {
                self.scd2_schema(&unwrapped)?
            } else {
                self.target_schema(&unwrapped)
            };
            self.target.ensure_created(&target_schema, stream_id).await
        })
    }

    fn refresh(&mut self) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(async move {
            self.target.refresh().await?;
            self.state.refresh().await
        })
    }

    fn reload(&mut self) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(async move {
            self.target.reload().await?;
            self.state.reload().await
        })
    }

    /// A batch is committed once the state has it (the state commits last).
    fn committed_batch<'a>(
        &'a mut self,
        app_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<i64>, SinkError>> {
        Box::pin(self.state.committed_batch(app_id))
    }

    fn autoloader_commits(
        &self,
    ) -> BoxFuture<'_, Result<Vec<(u64, serde_json::Value)>, SinkError>> {
        Box::pin(self.target.autoloader_commits())
    }

    fn set_properties<'a>(
        &'a mut self,
        properties: &'a [(String, String)],
    ) -> BoxFuture<'a, Result<Option<u64>, SinkError>> {
        Box::pin(self.target.set_properties(properties))
    }

    fn arrow_schema(&self) -> Result<Option<SchemaRef>, SinkError> {
        if !self.target.exists() {
            return Ok(None);
        }
        self.target.arrow_schema().map(Some)
    }

    fn writer(
        &self,
        _schema: &SchemaRef,
        _partition_columns: &[String],
        _keep_last: &[String],
    ) -> Result<BatchWriter, SinkError> {
        Ok(BatchWriter::Collect(Vec::new()))
    }

    fn last_changes(&self) -> Option<ChangeCounts> {
        self.last
    }

    fn commit<'a>(
        &'a mut self,
        writers: BatchWriters,
        app_id: &'a str,
        batch: u64,
        info: serde_json::Value,
    ) -> BoxFuture<'a, Result<u64, SinkError>> {
        Box::pin(self.apply(writers, app_id, batch, info))
    }
}
