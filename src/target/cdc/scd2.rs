//! The CDC target's SCD type 2 path: the target holds every version of a key's row, with
//! `__START_AT` and `__END_AT` of the sequence's type.
//!
//! The flow keeps every change record it applied in its checkpoint (`cdc_records`, a
//! Delta table appended to once per batch: the key and sequence as comparable bytes, the
//! delete flag and the record's target and sequence columns). A key's history is a fold of
//! its records in sequence order (`flow::cdc::scd2`). A batch replaces its keys' versions
//! in the target in one `MERGE` commit, then appends its own records. Both commits carry
//! `txn(app_id, batch)`, the records last, so after a crash between the two only the
//! records are appended, computed as before.
//!
//! So that a batch costs what its keys cost, not the flow's age: a key whose new records
//! all follow its applied ones (the usual case; the greatest applied sequence of every
//! key is kept between batches) goes on from its current version in the target (the
//! fold's state after its applied records), and neither its records nor its closed
//! versions are read; only a key with a late record reads its records and folds them all
//! again (every key, with a sequence of several columns). Closed versions are written
//! apart from current ones (a later batch reads only the files of current versions), and
//! the small files of closed versions, and of the records table, are merged into the
//! batch's once there are 16.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BinaryArray, BooleanArray, RecordBatch, StructArray};
use arrow_row::{RowConverter, Rows, SortField};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use deltalake::DeltaTable;
use futures::{StreamExt, TryStreamExt};
use serde_json::json;
use tracing::{debug, info, warn};

use super::state_cache::{LastApplied, MAX_CACHED_KEYS};
use super::table::{CdcTarget, column, data_err, widen};
use crate::flow::cdc::keys::RowEncoder;
use crate::flow::cdc::place::RecordPlaces;
use crate::flow::cdc::scd2::{self, Record, Values};
use crate::flow::cdc::{END_AT, FastMap, FastSet, KeyBytes, START_AT};
use crate::record::batch_as;
use crate::target::ChangeCounts;
use crate::target::delta::{BatchWriters, TargetError};

/// The records table's own columns, before the records' columns.
const KEY: &str = "__cdc_key";
const SEQ: &str = "__cdc_seq";
const DELETE: &str = "__cdc_delete";

/// The checkpoint table that holds an SCD type 2 flow's records.
pub const RECORDS_TABLE: &str = "cdc_records";

/// The records table's own columns (the records' columns follow, added as they come).
pub(super) fn records_base_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(KEY, DataType::Binary, false),
        Field::new(SEQ, DataType::Binary, false),
        Field::new(DELETE, DataType::Boolean, false),
    ]))
}

impl CdcTarget {
    /// The columns a change record keeps in the records table: the target's and the
    /// sequence's.
    fn record_schema(&self, layout: &Schema) -> SchemaRef {
        Arc::new(Schema::new(
            layout
                .fields()
                .iter()
                .filter(|f| self.spec.keeps(f.name()) || self.spec.sequence_by.contains(f.name()))
                .cloned()
                .collect::<Vec<_>>(),
        ))
    }

    /// The type of `__START_AT` / `__END_AT`: the sequence column's, or a struct of them.
    fn sequence_type(&self, layout: &Schema) -> Result<DataType, TargetError> {
        let fields: Vec<Field> = self
            .spec
            .sequence_by
            .iter()
            .map(|c| {
                layout.field_with_name(c).cloned().map_err(|_| {
                    data_err(
                        self.target.location(),
                        format!("the change records have no sequence column {c}"),
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(match fields.as_slice() {
            [one] => one.data_type().clone(),
            _ => DataType::Struct(Fields::from(fields)),
        })
    }

    /// The SCD type 2 target's columns: the selected ones, then `__START_AT`, `__END_AT`.
    pub(super) fn scd2_schema(&self, layout: &Schema) -> Result<SchemaRef, TargetError> {
        let seq = self.sequence_type(layout)?;
        let mut fields: Vec<Field> = layout
            .fields()
            .iter()
            .filter(|f| self.spec.keeps(f.name()))
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(START_AT, seq.clone(), true));
        fields.push(Field::new(END_AT, seq, true));
        Ok(Arc::new(Schema::new(fields)))
    }

    /// Applies a batch to an SCD type 2 target (`changes`: none when every file of the
    /// batch was skipped).
    ///
    /// Long for the reason [`CdcTarget::apply`] is: one batch in commit order (history rows
    /// closed and opened, target committed, then the records table), whose intermediate
    /// values every step reads.
    pub(super) async fn apply_scd2(
        &mut self,
        changes: Option<(RecordBatch, RecordPlaces)>,
        app_id: &str,
        batch: u64,
        mut info: serde_json::Value,
    ) -> Result<u64, TargetError> {
        let loc = self.target.location().to_string();
        let started = std::time::Instant::now();
        let target_done = self.target_has(app_id, batch).await?;
        let refreshed_at = started.elapsed();
        let Some((changes, places)) = changes else {
            return self.commit_nothing(app_id, batch, info).await;
        };
        let encoded = self.encode(&changes, &places)?;
        let layout = changes.schema();

        // Which keys' new records all follow every record applied to them (the usual
        // case): those fold from their current version in the target, and their records
        // are not read. The others (late keys; every key with a sequence of several
        // columns) fold again from all their records.
        let keys: Arc<FastSet<KeyBytes>> =
            Arc::new(encoded.iter().map(|c| c.key.clone()).collect());
        let one_sequence = self.spec.sequence_by.len() == 1;
        let last_applied = self.applied_sequences(&keys).await?;
        let late: Arc<FastSet<KeyBytes>> = Arc::new(
            encoded
                .iter()
                .filter(|c| {
                    !one_sequence
                        || last_applied
                            .get(&c.key)
                            .is_some_and(|applied| c.seq <= *applied)
                })
                .map(|c| c.key.clone())
                .collect(),
        );
        drop(last_applied);
        let kept = if late.is_empty() {
            Vec::new()
        } else {
            read_records(
                self.state.table(),
                self.state.location(),
                Some(Arc::clone(&late)),
                None,
            )
            .await?
        };
        let records_at = started.elapsed();
        let kept_schema = kept.first().map(|b| data_schema(&b.schema()));
        let record_schema = match &kept_schema {
            Some(s) => widen(s, &self.record_schema(&layout)),
            None => self.record_schema(&layout),
        };
        let mut parts = Vec::with_capacity(kept.len() + 1);
        let mut records: Vec<(KeyBytes, Record)> = Vec::new();
        let mut row = 0usize;
        for b in &kept {
            let key = column::<BinaryArray>(b, KEY).map_err(|e| data_err(&loc, e))?;
            let seq = column::<BinaryArray>(b, SEQ).map_err(|e| data_err(&loc, e))?;
            let delete = column::<BooleanArray>(b, DELETE).map_err(|e| data_err(&loc, e))?;
            for i in 0..b.num_rows() {
                records.push((
                    KeyBytes::from_slice(key.value(i)),
                    Record {
                        seq: KeyBytes::from_slice(seq.value(i)),
                        delete: delete.value(i),
                        applied: true,
                        row: row + i,
                    },
                ));
            }
            row += b.num_rows();
            parts.push(batch_as(b, &record_schema).map_err(|e| data_err(&loc, e))?);
        }
        drop(kept);
        let first_new = row;
        for (i, c) in encoded.iter().enumerate() {
            records.push((
                c.key.clone(),
                Record {
                    seq: c.seq.clone(),
                    delete: c.delete,
                    applied: false,
                    row: first_new + i,
                },
            ));
        }
        parts.push(batch_as(&changes, &record_schema).map_err(|e| data_err(&loc, e))?);
        let all = arrow_select::concat::concat_batches(&record_schema, &parts)
            .map_err(|e| data_err(&loc, e.to_string()))?;
        drop(parts);

        let target_schema = match self.target.arrow_schema() {
            Ok(existing) => {
                if existing.field_with_name(START_AT).is_err() {
                    return Err(data_err(
                        &loc,
                        format!(
                            "the table has no {START_AT} column: it was not made by an SCD type \
                             2 flow (reset it to rebuild it as one: autoloader reset {loc})"
                        ),
                    ));
                }
                widen(&existing, &self.scd2_schema(&record_schema)?)
            }
            Err(e) => return Err(e),
        };
        let columns: Vec<&Field> = target_schema
            .fields()
            .iter()
            .map(AsRef::as_ref)
            .filter(|f| f.name() != START_AT && f.name() != END_AT)
            .collect();

        // The rows of the batch's keys taken out of the target: of a key that is not late
        // only its current version (so a batch costs what its keys' current versions
        // cost, not their history).
        let new_writer = || self.target.rewrite_writer(&target_schema);
        let open_only = OpenOnly {
            keys: keys
                .iter()
                .filter(|k| !late.contains(*k))
                .cloned()
                .collect(),
            every_key: late.is_empty(),
        };
        let taken = if target_done {
            None
        } else {
            let touched: super::FastSet<KeyBytes> = keys.iter().cloned().collect();
            let open_only = one_sequence.then(|| Arc::new(open_only));
            Some(
                self.take_keys(&target_schema, Arc::new(touched), open_only, &new_writer)
                    .await?,
            )
        };
        let taken_at = started.elapsed();
        let current = match &taken {
            Some(taken) => current_versions(&target_schema, &self.spec.keys, &late, &taken.rows)
                .map_err(|e| data_err(&loc, e))?,
            None => Current::none(&target_schema),
        };
        let values = RecordValues::new(&self.spec, &columns, &all, &current.rows)
            .map_err(|e| data_err(&loc, e))?;

        // Each key's history. A key that is not late changes only from its current version
        // on: the versions that ended before are neither taken out of the target nor
        // written again.
        let mut by_key: HashMap<KeyBytes, Vec<Record>> = HashMap::new();
        for (k, r) in records {
            by_key.entry(k).or_default().push(r);
        }
        let mut ordered: Vec<(KeyBytes, Vec<Record>)> = by_key.into_iter().collect();
        ordered.sort_by(|a, b| a.0.cmp(&b.0));
        let (mut stale, mut ties) = (0u64, 0u64);
        let mut versions = Vec::new();
        let mut new_records: Vec<usize> = Vec::new();
        let columns_count = columns.len();
        for (key, recs) in ordered {
            let is_late = late.contains(&key);
            let from = (!is_late)
                .then(|| current.version(&key, all.num_rows(), columns_count))
                .flatten();
            let h = scd2::history(recs, from, &values, self.spec.ignore_null_updates);
            stale += h.stale;
            ties += h.ties;
            new_records.extend(h.kept);
            if is_late {
                versions.extend(h.versions);
            } else {
                // A version ending before the batch's records is in the target as it was.
                versions.extend(
                    h.versions
                        .into_iter()
                        .filter(|v| v.end.is_none_or(|e| e >= first_new)),
                );
            }
        }
        let history_at = started.elapsed();
        new_records.sort_unstable();
        if ties > 0 {
            warn!(table = %loc, batch, ties, "Change records of one key share a sequence; the delete, else the later record, was applied.");
        }

        let version = if let Some(taken) = taken {
            let sequences = sequences_with(&all, &current.rows, &self.spec.sequence_by)
                .map_err(|e| data_err(&loc, e))?;
            let rows = version_rows(&target_schema, &sequences, &values, &versions)
                .map_err(|e| data_err(&loc, e))?;
            let (inserted, updated, deleted) =
                count_versions(&target_schema, &self.spec.keys, &taken.rows, &rows)
                    .map_err(|e| data_err(&loc, e))?;
            // The new versions go to files of their own (the rewritten ones are finished):
            // the closed ones apart from the current ones, so the files a later batch
            // rewrites hold current versions only. Closed versions gather in a file a
            // batch; past CLOSED_FILES of them, they are merged into this batch's.
            let (open, closed) = split_current(&rows).map_err(|e| data_err(&loc, e))?;
            // (Not the files this batch rewrites: a batch with a late record may read
            // files of closed versions.)
            let rewritten: HashSet<&str> = taken
                .removes
                .iter()
                .filter_map(|a| match a {
                    deltalake::kernel::Action::Remove(r) => Some(r.path.as_str()),
                    _ => None,
                })
                .collect();
            let mut merged = small_files(self.target.table(), CLOSED_FILES, closed_only)
                .map_err(|e| data_err(&loc, e))?;
            merged.retain(|m| match &m.remove {
                deltalake::kernel::Action::Remove(r) => !rewritten.contains(r.path.as_str()),
                _ => false,
            });
            drop(rewritten);
            let mut writers = Vec::new();
            if open.num_rows() > 0 {
                let mut writer = new_writer()?;
                writer.write(open).await?;
                writers.push(writer);
            }
            let merged_files = merged.len();
            let mut removes = Vec::with_capacity(merged_files);
            if closed.num_rows() > 0 || !merged.is_empty() {
                let mut writer = new_writer()?;
                if closed.num_rows() > 0 {
                    writer.write(closed).await?;
                }
                let store = self.target.table().log_store().object_store(None);
                for m in merged {
                    copy_file(&store, &m, &target_schema, &mut writer)
                        .await
                        .map_err(|e| data_err(&loc, e))?;
                    removes.push(m.remove);
                }
                writers.push(writer);
            }
            info["cdc"] = json!({
                "scdType": 2,
                "rowsInserted": inserted, "rowsUpdated": updated, "rowsDeleted": deleted,
                "recordsStale": stale, "sequenceTies": ties,
                "filesRewritten": taken.removes.len(), "filesRead": taken.files_read,
                "filesMerged": merged_files,
            });
            let operation = super::table::merge_operation(&self.spec.keys);
            let v = self
                .target
                .commit_with(
                    BatchWriters(writers),
                    taken
                        .removes
                        .into_iter()
                        .chain(taken.adds)
                        .chain(removes)
                        .collect(),
                    Some(operation),
                    app_id,
                    batch,
                    info,
                )
                .await?;
            debug!(table = %loc, batch, ?refreshed_at, ?records_at, ?taken_at, ?history_at, committed = ?started.elapsed(), "SCD 2 batch phases.");
            info!(table = %loc, batch, version = v, inserted, updated, deleted, stale, "Applied changes (SCD type 2).");
            self.last = Some(ChangeCounts {
                inserted,
                updated,
                deleted,
                stale,
                truncated: 0,
                ties,
            });
            v
        } else {
            info!(table = %loc, batch, "The target had this batch before a restart; committing the flow's records only.");
            self.target.version().unwrap_or_default()
        };
        crate::testing::failpoint::hit("after-cdc-target-commit");

        // The batch's records the history kept, appended to the flow's records.
        let keep: Vec<u32> = new_records
            .iter()
            .map(|&r| u32::try_from(r).unwrap_or(u32::MAX))
            .collect();
        let keep = arrow_array::UInt32Array::from(keep);
        let kept_new = arrow_select::take::take_record_batch(&all, &keep)
            .map_err(|e| data_err(&loc, e.to_string()))?;
        let mut key_col = Vec::with_capacity(new_records.len());
        let mut seq_col = Vec::with_capacity(new_records.len());
        let mut del_col = Vec::with_capacity(new_records.len());
        for &r in &new_records {
            let c = &encoded[r - first_new];
            key_col.push(c.key.clone());
            seq_col.push(c.seq.clone());
            del_col.push(c.delete);
        }
        let mut fields: Vec<Field> = records_base_schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.extend(record_schema.fields().iter().map(|f| f.as_ref().clone()));
        let log_schema = Arc::new(Schema::new(fields));
        let mut log_columns: Vec<ArrayRef> = vec![
            Arc::new(BinaryArray::from_iter_values(key_col)),
            Arc::new(BinaryArray::from_iter_values(seq_col)),
            Arc::new(BooleanArray::from(del_col)),
        ];
        log_columns.extend(kept_new.columns().iter().cloned());
        let log_rows = RecordBatch::try_new(log_schema.clone(), log_columns)
            .map_err(|e| data_err(&loc, e.to_string()))?;
        // Every batch adds a file, and every batch reads every file for its keys: past
        // RECORDS_FILES files, the small ones are merged into this batch's file, in the
        // table's schema (every column a record ever had).
        let merged = small_files(self.state.table(), RECORDS_FILES, |_| true)
            .map_err(|e| data_err(&loc, e))?;
        let log_schema = if merged.is_empty() {
            log_schema
        } else {
            widen(&self.state.arrow_schema()?, &log_schema)
        };
        // Snappy, as a merge's rewrites: every batch reads these files' keys again.
        let mut log_writer = self.state.rewrite_writer(&log_schema)?;
        if log_rows.num_rows() > 0 {
            log_writer
                .write(batch_as(&log_rows, &log_schema).map_err(|e| data_err(&loc, e))?)
                .await?;
        }
        let mut removes = Vec::with_capacity(merged.len());
        if !merged.is_empty() {
            let store = self.state.table().log_store().object_store(None);
            let rows: u64 = merged.iter().map(|m| m.rows).sum();
            info!(table = %loc, batch, files = merged.len(), rows, "Merging the CDC records' files.");
            for m in merged {
                copy_file(&store, &m, &log_schema, &mut log_writer)
                    .await
                    .map_err(|e| data_err(&loc, e))?;
                removes.push(m.remove);
            }
        }
        self.state.ensure_created(&log_schema, app_id).await?;
        // What is kept of the applied sequences follows the records' commit, or is let go
        // with it (the next batch reads the records' sequences again).
        let before = self.state.version();
        let kept_sequences = self.last_applied.take().filter(|s| s.version == before);
        let committed = self
            .state
            .commit_with(
                BatchWriters(vec![log_writer]),
                removes,
                None,
                app_id,
                batch,
                json!({ "batch": batch }),
            )
            .await?;
        if let Some(mut kept) = kept_sequences {
            for &r in &new_records {
                let c = &encoded[r - first_new];
                kept.raise(&c.key, &c.seq);
            }
            kept.version = Some(committed);
            self.last_applied = Some(kept);
        }
        self.applied += 1;
        Ok(version)
    }

    /// The greatest sequence applied to each of `keys` (none for a key never applied), from
    /// what is kept while the records table is where it was left; else read from the
    /// records table's key and sequence columns: of `keys` alone in a run's first batch
    /// (a run of one batch reads no more than it needs) and when the table holds too many
    /// records, else whole, and kept (up to [`MAX_CACHED_KEYS`] keys).
    async fn applied_sequences(
        &mut self,
        keys: &Arc<FastSet<KeyBytes>>,
    ) -> Result<FastMap<KeyBytes, KeyBytes>, TargetError> {
        let version = self.state.version();
        if let Some(kept) = self.last_applied.as_ref().filter(|s| s.version == version) {
            return Ok(kept.of(keys));
        }
        self.last_applied = None;
        let table = self.state.table();
        let records: u64 = match table.snapshot() {
            Ok(snapshot) if version.is_some() => snapshot
                .log_data()
                .into_iter()
                .map(|f| f.num_records().map_or(u64::MAX, |n| n as u64))
                .fold(0u64, u64::saturating_add),
            _ => 0,
        };
        let whole = self.applied > 0 && records <= 2 * MAX_CACHED_KEYS as u64;
        let read = read_records(
            table,
            self.state.location(),
            (!whole).then(|| Arc::clone(keys)),
            Some(&[KEY, SEQ]),
        )
        .await?;
        let mut applied = LastApplied::empty(version);
        for b in &read {
            let key =
                column::<BinaryArray>(b, KEY).map_err(|e| data_err(self.state.location(), e))?;
            let seq =
                column::<BinaryArray>(b, SEQ).map_err(|e| data_err(self.state.location(), e))?;
            for i in 0..b.num_rows() {
                applied.raise(key.value(i), seq.value(i));
            }
        }
        debug!(table = %self.state.location(), ?version, records, keys = applied.len(), "Read the applied sequences of the CDC records.");
        let of_keys = applied.of(keys);
        if whole && applied.len() <= MAX_CACHED_KEYS {
            self.last_applied = Some(applied);
        }
        Ok(of_keys)
    }
}

/// The current versions (`__END_AT` null) of a batch's keys that are not late, in the
/// target's schema: where those keys' histories go on from.
struct Current {
    rows: RecordBatch,
    /// A key's row in `rows`.
    by_key: FastMap<KeyBytes, usize>,
}

impl Current {
    fn none(schema: &SchemaRef) -> Current {
        Current {
            rows: RecordBatch::new_empty(schema.clone()),
            by_key: FastMap::default(),
        }
    }

    /// The key's current version, its rows counted after `offset` records' rows.
    fn version(&self, key: &[u8], offset: usize, columns: usize) -> Option<scd2::Version> {
        self.by_key.get(key).map(|&i| scd2::Version {
            values: vec![offset + i; columns],
            start: offset + i,
            end: None,
        })
    }
}

/// Of the rows `taken` out of the target, the current versions of keys not `late`.
fn current_versions(
    schema: &SchemaRef,
    keys: &[String],
    late: &FastSet<KeyBytes>,
    taken: &[RecordBatch],
) -> Result<Current, String> {
    let encoder = RowEncoder::new(keys, schema).map_err(|e| e.to_string())?;
    let mut parts = Vec::new();
    let mut by_key = FastMap::default();
    let mut row = 0usize;
    for b in taken {
        let b = batch_as(b, schema)?;
        let closed = closed_rows(&b)?;
        let encoded = encoder.rows(&b).map_err(|e| e.to_string())?;
        let mut pick = Vec::with_capacity(b.num_rows());
        for (i, is_closed) in closed.iter().enumerate() {
            let key = encoded.row(i);
            let current = !is_closed && !late.contains(key.as_ref());
            if current
                && by_key
                    .insert(KeyBytes::from_slice(key.as_ref()), row)
                    .is_some()
            {
                return Err(format!(
                    "a key has more than one current version ({END_AT} null): the table was \
                     changed outside this flow (a full refresh rebuilds it from the source)"
                ));
            }
            row += usize::from(current);
            pick.push(current);
        }
        parts.push(
            arrow_select::filter::filter_record_batch(&b, &BooleanArray::from(pick))
                .map_err(|e| e.to_string())?,
        );
    }
    let rows = arrow_select::concat::concat_batches(schema, &parts).map_err(|e| e.to_string())?;
    Ok(Current { rows, by_key })
}

/// The records table's file count past which its files are merged (see [`small_files`]).
const RECORDS_FILES: usize = 16;

/// The count of files of closed versions past which they are merged.
const CLOSED_FILES: usize = 16;

/// Keys of a batch whose new records all come after every record applied to them: of
/// these, only the current version (`__END_AT` null) is taken out of the target.
pub(super) struct OpenOnly {
    keys: FastSet<KeyBytes>,
    /// Every key of the batch is one: files holding no current version are not read.
    pub every_key: bool,
}

impl OpenOnly {
    /// Unchooses the rows of `b` that are closed versions of these keys (`chosen`: the
    /// rows of the batch's keys).
    pub(super) fn keep_current(
        &self,
        b: &RecordBatch,
        keys: &RowEncoder,
        chosen: &mut [bool],
    ) -> Result<(), String> {
        let closed = closed_rows(b)?;
        let rows = if self.every_key {
            None
        } else {
            Some(keys.rows(b).map_err(|e| e.to_string())?)
        };
        for (i, c) in chosen.iter_mut().enumerate() {
            if *c
                && closed[i]
                && rows
                    .as_ref()
                    .is_none_or(|rows| self.keys.contains(rows.row(i).as_ref()))
            {
                *c = false;
            }
        }
        Ok(())
    }
}

/// Which rows of `b` are closed versions (`__END_AT` not null).
pub(super) fn closed_rows(b: &RecordBatch) -> Result<Vec<bool>, String> {
    let end = b
        .column_by_name(END_AT)
        .ok_or_else(|| format!("the table's rows have no {END_AT} column"))?;
    Ok((0..b.num_rows()).map(|i| end.is_valid(i)).collect())
}

/// Whether a file's statistics say it holds closed versions only (no null `__END_AT`).
pub(super) fn closed_only(stats: Option<&serde_json::Value>) -> bool {
    stats
        .and_then(|s| s.get("nullCount"))
        .and_then(|n| n.get(END_AT))
        .and_then(serde_json::Value::as_i64)
        == Some(0)
}

/// A version batch's current versions (`__END_AT` null), and its closed ones.
fn split_current(rows: &RecordBatch) -> Result<(RecordBatch, RecordBatch), String> {
    let closed = BooleanArray::from(closed_rows(rows)?);
    let open = arrow_arith::boolean::not(&closed).map_err(|e| e.to_string())?;
    let pick = |mask: &BooleanArray| {
        arrow_select::filter::filter_record_batch(rows, mask).map_err(|e| e.to_string())
    };
    Ok((pick(&open)?, pick(&closed)?))
}

/// A small file of a table to merge into a batch's.
struct Merged {
    path: object_store::path::Path,
    size: u64,
    rows: u64,
    remove: deltalake::kernel::Action,
}

/// Of the table's files that `eligible` accepts by their statistics, those to merge into
/// this batch's once there are `limit` of them: every one but the largest, or all of them
/// once the others hold as many rows as it does. So a row is rewritten about
/// log2(rows / batch) times in all, and such files stay under `limit` however many
/// batches came before.
fn small_files(
    table: &DeltaTable,
    limit: usize,
    eligible: impl Fn(Option<&serde_json::Value>) -> bool,
) -> Result<Vec<Merged>, String> {
    if table.version().is_none() {
        return Ok(Vec::new());
    }
    let snapshot = table.snapshot().map_err(|e| e.to_string())?;
    let mut files: Vec<Merged> = snapshot
        .log_data()
        .into_iter()
        .filter(|f| {
            let stats = f
                .stats()
                .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok());
            eligible(stats.as_ref())
        })
        .map(|f| Merged {
            path: f.object_store_path(),
            size: u64::try_from(f.size()).unwrap_or(0),
            rows: f.num_records().map_or(0, |n| n as u64),
            remove: deltalake::kernel::Action::Remove(f.remove_action(true)),
        })
        .collect();
    if files.len() < limit {
        return Ok(Vec::new());
    }
    files.sort_by_key(|f| f.rows);
    let largest = files.last().map_or(0, |f| f.rows);
    let others: u64 = files.iter().rev().skip(1).map(|f| f.rows).sum();
    if others < largest {
        files.pop();
    }
    Ok(files)
}

/// Writes every row of file `m` to `writer`, in `schema` (a file written before a column
/// was added has it null).
async fn copy_file(
    store: &Arc<dyn object_store::ObjectStore>,
    m: &Merged,
    schema: &SchemaRef,
    writer: &mut crate::target::delta::BatchWriter,
) -> Result<(), String> {
    let stream = super::super::rewrite::open_file(store, &m.path, m.size)
        .await?
        .build()
        .map_err(|e| format!("{}: {e}", m.path))?;
    let mut stream = std::pin::pin!(stream);
    while let Some(b) = stream
        .try_next()
        .await
        .map_err(|e| format!("{}: {e}", m.path))?
    {
        writer
            .write(batch_as(&b, schema)?)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The records' columns of a records-table batch (without its own).
fn data_schema(schema: &Schema) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .filter(|f| ![KEY, SEQ, DELETE].contains(&f.name().as_str()))
            .cloned()
            .collect::<Vec<_>>(),
    ))
}

/// The records of `keys` (every record without), read from the flow's records table
/// (`columns` of them, or all): each file's key column first, the other columns only for
/// the rows it selects; two files at a time, each a task of its own (both cores), the
/// records kept in the files' order.
async fn read_records(
    table: &DeltaTable,
    location: &str,
    keys: Option<Arc<FastSet<KeyBytes>>>,
    columns: Option<&'static [&'static str]>,
) -> Result<Vec<RecordBatch>, TargetError> {
    let err = |reason: String| TargetError::Incompatible {
        location: location.to_string(),
        reason,
    };
    if table.version().is_none() {
        return Ok(Vec::new());
    }
    let (store, files) = super::super::rewrite::table_files(table).map_err(err)?;
    let reads = files.into_iter().map(|(path, size)| {
        let store = Arc::clone(&store);
        let wanted = keys.clone();
        let read = async move {
            let mut builder = super::super::rewrite::open_file(&store, &path, size).await?;
            if let Some(wanted) = wanted {
                let filter = super::super::rewrite::binary_key_filter(
                    builder.parquet_schema(),
                    KEY,
                    move |k| wanted.contains(k),
                );
                builder = builder.with_row_filter(filter);
            }
            if let Some(columns) = columns {
                let mask = parquet::arrow::ProjectionMask::columns(
                    builder.parquet_schema(),
                    columns.iter().copied(),
                );
                builder = builder.with_projection(mask);
            }
            let stream = builder.build().map_err(|e| format!("{path}: {e}"))?;
            let batches: Vec<RecordBatch> = stream
                .try_collect()
                .await
                .map_err(|e| format!("{path}: {e}"))?;
            Ok::<_, String>(batches)
        };
        async move {
            tokio::spawn(read)
                .await
                .map_err(|e| format!("a read of the records failed: {e}"))?
        }
    });
    let read: Vec<Vec<RecordBatch>> = futures::stream::iter(reads)
        .buffered(2)
        .try_collect()
        .await
        .map_err(err)?;
    Ok(read
        .into_iter()
        .flatten()
        .filter(|b| b.num_rows() > 0)
        .collect())
}

/// The records' values as the history fold sees them, per target data column.
struct RecordValues {
    arrays: Vec<ArrayRef>,
    tracked: Vec<bool>,
    /// Comparable rows of the tracked columns (none for an untracked one).
    rows: Vec<Option<Rows>>,
}

impl RecordValues {
    /// Rows of `all` (records), then of `current` (target rows, in the target's schema).
    fn new(
        spec: &crate::flow::cdc::CdcSpec,
        columns: &[&Field],
        all: &RecordBatch,
        current: &RecordBatch,
    ) -> Result<Self, String> {
        let mut arrays = Vec::new();
        let mut tracked = Vec::new();
        let mut rows = Vec::new();
        for f in columns {
            let array =
                crate::record::column_as(all, f).map_err(|e| format!("{}: {e}", f.name()))?;
            let array = if current.num_rows() == 0 {
                array
            } else {
                let stored = crate::record::column_as(current, f)
                    .map_err(|e| format!("{}: {e}", f.name()))?;
                arrow_select::concat::concat(&[array.as_ref(), stored.as_ref()])
                    .map_err(|e| format!("{}: {e}", f.name()))?
            };
            let tracks = spec.tracks(f.name());
            rows.push(if tracks {
                let converter = RowConverter::new(vec![SortField::new(f.data_type().clone())])
                    .map_err(|e| e.to_string())?;
                Some(
                    converter
                        .convert_columns(std::slice::from_ref(&array))
                        .map_err(|e| e.to_string())?,
                )
            } else {
                None
            });
            tracked.push(tracks);
            arrays.push(array);
        }
        Ok(RecordValues {
            arrays,
            tracked,
            rows,
        })
    }
}

impl Values for RecordValues {
    fn columns(&self) -> usize {
        self.arrays.len()
    }
    fn tracked(&self, c: usize) -> bool {
        self.tracked[c]
    }
    fn same(&self, c: usize, a: usize, b: usize) -> bool {
        match &self.rows[c] {
            Some(rows) => rows.row(a) == rows.row(b),
            None => true,
        }
    }
    fn is_null(&self, c: usize, row: usize) -> bool {
        self.arrays[c].is_null(row)
    }
}

/// The sequence of every row `versions` point at: the records' sequence column (a struct
/// of them with several), then the `__START_AT` of the `current` target rows.
fn sequences_with(
    all: &RecordBatch,
    current: &RecordBatch,
    sequence_by: &[String],
) -> Result<ArrayRef, String> {
    let seq: ArrayRef = match sequence_by {
        [one] => all
            .column_by_name(one)
            .cloned()
            .ok_or_else(|| format!("the records have no sequence column {one}"))?,
        many => {
            let mut fields = Vec::new();
            let mut arrays = Vec::new();
            for c in many {
                let a = all
                    .column_by_name(c)
                    .ok_or_else(|| format!("the records have no sequence column {c}"))?;
                fields.push(Field::new(c, a.data_type().clone(), true));
                arrays.push(a.clone());
            }
            Arc::new(
                StructArray::try_new(Fields::from(fields), arrays, None)
                    .map_err(|e| e.to_string())?,
            )
        }
    };
    if current.num_rows() == 0 {
        return Ok(seq);
    }
    let start = current
        .column_by_name(START_AT)
        .ok_or_else(|| format!("the table's rows have no {START_AT} column"))?;
    let seq = arrow_cast::cast(&seq, start.data_type()).map_err(|e| format!("{START_AT}: {e}"))?;
    arrow_select::concat::concat(&[seq.as_ref(), start.as_ref()]).map_err(|e| e.to_string())
}

/// The target rows of `versions`, in `schema` (`seq`: see [`sequences_with`]).
fn version_rows(
    schema: &SchemaRef,
    seq: &ArrayRef,
    values: &RecordValues,
    versions: &[scd2::Version],
) -> Result<RecordBatch, String> {
    let none = arrow_array::new_null_array(seq.data_type(), 1);
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    let mut data = 0usize;
    for f in schema.fields() {
        let column = if f.name() == START_AT {
            let picks: Vec<(usize, usize)> = versions.iter().map(|v| (0, v.start)).collect();
            arrow_select::interleave::interleave(&[seq.as_ref()], &picks)
        } else if f.name() == END_AT {
            let picks: Vec<(usize, usize)> = versions
                .iter()
                .map(|v| v.end.map_or((1, 0), |e| (0, e)))
                .collect();
            arrow_select::interleave::interleave(&[seq.as_ref(), none.as_ref()], &picks)
        } else {
            let picks: Vec<(usize, usize)> = versions.iter().map(|v| (0, v.values[data])).collect();
            let source = values.arrays[data].as_ref();
            data += 1;
            arrow_select::interleave::interleave(&[source], &picks)
        }
        .map_err(|e| e.to_string())?;
        let column = if column.data_type() == f.data_type() {
            column
        } else {
            arrow_cast::cast(&column, f.data_type()).map_err(|e| format!("{}: {e}", f.name()))?
        };
        columns.push(column);
    }
    RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(versions.len())),
    )
    .map_err(|e| e.to_string())
}

/// Versions inserted, updated and deleted: a version is known by its key and
/// `__START_AT`; one whose values or end changed is updated (a delete closing the current
/// version updates it).
fn count_versions(
    schema: &SchemaRef,
    keys: &[String],
    old: &[RecordBatch],
    new: &RecordBatch,
) -> Result<(u64, u64, u64), String> {
    let mut id_columns = keys.to_vec();
    id_columns.push(START_AT.to_string());
    let all_columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let ids = RowEncoder::new(&id_columns, schema).map_err(|e| e.to_string())?;
    let whole = RowEncoder::new(&all_columns, schema).map_err(|e| e.to_string())?;
    let mut before: HashMap<KeyBytes, KeyBytes> = HashMap::new();
    for b in old {
        let b = batch_as(b, schema)?;
        for (id, row) in ids
            .encode(&b)
            .map_err(|e| e.to_string())?
            .into_iter()
            .zip(whole.encode(&b).map_err(|e| e.to_string())?)
        {
            before.insert(id, row);
        }
    }
    let (mut inserted, mut updated) = (0u64, 0u64);
    for (id, row) in ids
        .encode(new)
        .map_err(|e| e.to_string())?
        .into_iter()
        .zip(whole.encode(new).map_err(|e| e.to_string())?)
    {
        match before.remove(&id) {
            Some(old) if old == row => {}
            Some(_) => updated += 1,
            None => inserted += 1,
        }
    }
    Ok((inserted, updated, before.len() as u64))
}
