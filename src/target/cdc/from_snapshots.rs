//! AUTO CDC from snapshots: each snapshot (one batch of a snapshot flow) is diffed against
//! the target into change records, which the flow then applies as any other: a key new
//! or with other values is an upsert, a key of the target absent from the snapshot a
//! delete, every record sequenced by the snapshot's ingest time. An unchanged row makes no
//! record, so SCD type 2 opens no version for it.
//!
//! The diff is against the target as it was before the batch: the current table, or, when
//! a crash came after the batch's target commit, the version before that commit. So a
//! replayed batch yields the same records, and the flow's state (committed after the
//! target) gets the deletes too. Memory holds the snapshot (as every CDC batch) and an
//! index of its keys; the target is streamed file by file, only its key and compared
//! columns read.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, UInt32Array, new_null_array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use deltalake::DeltaTable;
use futures::TryStreamExt;
use parquet::arrow::ProjectionMask;
use sha2::Digest;
use tracing::{info, warn};

use super::table::{CdcTarget, data_err};
use crate::flow::cdc::keys::RowEncoder;
use crate::flow::cdc::{END_AT, FastMap, SNAPSHOT_DELETE};
use crate::target::delta::TargetError;

/// A row's compared values, hashed (the index holds this, not the values).
type Digest16 = [u8; 16];

fn digest(bytes: &[u8]) -> Digest16 {
    let full = sha2::Sha256::digest(bytes);
    let mut out = [0u8; 16];
    out.copy_from_slice(&full[..16]);
    out
}

/// A snapshot row in the index: its row, its values' digest, and whether the snapshot
/// holds its key twice (then every row of the key is a change; the tie rule decides).
struct Indexed {
    row: usize,
    digest: Digest16,
    twice: bool,
}

impl CdcTarget {
    /// The change records of snapshot batch `batch` (its rows in `collected`): none when
    /// nothing changed, or when the snapshot is empty (an empty snapshot deleting every
    /// key is far more often a failed export than the truth; it is not applied, and said).
    pub(super) async fn snapshot_changes(
        &mut self,
        collected: Vec<RecordBatch>,
        app_id: &str,
        batch: u64,
        info: &serde_json::Value,
    ) -> Result<Vec<RecordBatch>, TargetError> {
        let Some(stamps) = self.spec.from_snapshots.clone() else {
            return Ok(collected);
        };
        let loc = self.target.location().to_string();
        // A snapshot read without one of its files would delete that file's keys.
        if let Some(skipped) = info["files"]
            .as_array()
            .and_then(|files| files.iter().find(|f| f["skipped"].as_bool() == Some(true)))
        {
            return Err(data_err(
                &loc,
                format!(
                    "the snapshot is incomplete: {} was skipped (ignoreMissingFiles / \
                     ignoreCorruptFiles), and AUTO CDC from snapshots would delete its keys; \
                     nothing of this snapshot was applied",
                    skipped["path"]
                ),
            ));
        }
        let rows: usize = collected.iter().map(RecordBatch::num_rows).sum();
        let Some(first) = collected.first().filter(|_| rows > 0) else {
            warn!(table = %loc, batch, "The snapshot holds no rows; AUTO CDC does not delete every key for an empty snapshot, and applied nothing.");
            return Ok(Vec::new());
        };
        let snapshot = arrow_select::concat::concat_batches(&first.schema(), &collected)
            .map_err(|e| data_err(&loc, e.to_string()))?;
        drop(collected);
        let schema = snapshot.schema();
        if schema.field_with_name(SNAPSHOT_DELETE).is_ok() {
            return Err(data_err(
                &loc,
                format!(
                    "the snapshot has a column {SNAPSHOT_DELETE}, which AUTO CDC from snapshots uses itself"
                ),
            ));
        }
        // Compared: the target's columns of the snapshot other than the keys and lineage.
        let compared: Vec<String> = schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .filter(|c| {
                self.spec.keeps(c)
                    && !self.spec.keys.contains(c)
                    && c != crate::record::METADATA_COLUMN
            })
            .collect();
        let err = |e: crate::flow::cdc::CdcError| data_err(&loc, e.to_string());
        let keys = RowEncoder::new(&self.spec.keys, &schema).map_err(err)?;
        let values = if compared.is_empty() {
            None
        } else {
            Some(RowEncoder::new(&compared, &schema).map_err(err)?)
        };
        let key_rows = keys.rows(&snapshot).map_err(err)?;
        let value_rows = values
            .as_ref()
            .map(|v| v.rows(&snapshot))
            .transpose()
            .map_err(err)?;
        let mut index: FastMap<&[u8], Indexed> = FastMap::default();
        for (row, key) in key_rows.iter().enumerate() {
            let digest = value_rows
                .as_ref()
                .map_or([0; 16], |v| digest(v.row(row).as_ref()));
            index
                .entry(key.data())
                .and_modify(|e| e.twice = true)
                .or_insert(Indexed {
                    row,
                    digest,
                    twice: false,
                });
        }

        let base = self.base_before(app_id, batch).await?;
        let mut unchanged = vec![false; snapshot.num_rows()];
        let mut absent: Vec<Vec<ArrayRef>> = Vec::new();
        if let Some(base) = &base {
            let mut needed: Vec<String> = self.spec.keys.clone();
            needed.extend(compared.iter().cloned());
            let scd2 = self.spec.stored_as_scd_type == 2;
            for part in read_current(base, &loc, &needed, scd2).await? {
                let part = with_columns(&part, &needed, &schema);
                let base_keys = keys.rows(&part).map_err(err)?;
                let base_values = values
                    .as_ref()
                    .map(|v| v.rows(&part))
                    .transpose()
                    .map_err(err)?;
                let mut gone = vec![false; part.num_rows()];
                for (row, key) in base_keys.iter().enumerate() {
                    match index.get(key.data()) {
                        None => gone[row] = true,
                        Some(e) if !e.twice => {
                            let d = base_values
                                .as_ref()
                                .map_or([0; 16], |v| digest(v.row(row).as_ref()));
                            if d == e.digest {
                                unchanged[e.row] = true;
                            }
                        }
                        Some(_) => {}
                    }
                }
                if gone.contains(&true) {
                    let kept =
                        arrow_select::filter::filter_record_batch(&part, &BooleanArray::from(gone))
                            .map_err(|e| data_err(&loc, e.to_string()))?;
                    absent.push(keys.arrays(&kept).map_err(err)?);
                }
            }
        }
        drop(index);
        let deletes: usize = absent.iter().map(|a| a[0].len()).sum();
        let same = unchanged.iter().filter(|u| **u).count();
        info!(table = %loc, batch, rows = snapshot.num_rows(), unchanged = same, absent = deletes, "Diffed the snapshot against the target.");
        changes_of(&snapshot, &self.spec.keys, &stamps, &unchanged, &absent)
            .map_err(|e| data_err(&loc, e))
    }

    /// The target as it was before batch `batch`: now, or the version before the batch's
    /// own commit when it landed before a crash. `None` for no table yet.
    async fn base_before(
        &mut self,
        app_id: &str,
        batch: u64,
    ) -> Result<Option<DeltaTable>, TargetError> {
        if !self.target_has(app_id, batch).await? {
            return Ok(self.target.exists().then(|| self.target.table().clone()));
        }
        let loc = self.target.location().to_string();
        let Some(version) = self.target.version_of_batch(app_id, batch).await? else {
            return Err(data_err(
                &loc,
                format!(
                    "the table holds snapshot batch {batch}, but its commit is gone from the \
                     log, so the snapshot before it is unknown: reset the flow (autoloader \
                     reset {loc})"
                ),
            ));
        };
        info!(table = %loc, batch, version, "The target had this snapshot before a restart; diffing against the version before it.");
        if version == 0 {
            return Ok(None);
        }
        let mut table = self.target.table().clone();
        table
            .load_version(version - 1)
            .await
            .map_err(|e| data_err(&loc, format!("cannot read version {}: {e}", version - 1)))?;
        Ok(Some(table))
    }
}

/// The rows of `table` that are current (SCD type 2: `__END_AT` null), with the `needed`
/// columns each file has.
async fn read_current(
    table: &DeltaTable,
    location: &str,
    needed: &[String],
    scd2: bool,
) -> Result<Vec<RecordBatch>, TargetError> {
    let err = |reason: String| data_err(location, reason);
    let (store, files) = crate::target::rewrite::table_files(table).map_err(err)?;
    let mut out = Vec::new();
    for (path, size) in files {
        let builder = crate::target::rewrite::open_file(&store, &path, size)
            .await
            .map_err(err)?;
        let roots: Vec<usize> = builder
            .schema()
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, field)| needed.contains(field.name()) || scd2 && field.name() == END_AT)
            .map(|(i, _)| i)
            .collect();
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
        let mut stream = builder
            .with_projection(mask)
            .build()
            .map_err(|e| err(format!("{path}: {e}")))?;
        while let Some(batch) = stream
            .try_next()
            .await
            .map_err(|e| err(format!("{path}: {e}")))?
        {
            let batch = match batch.column_by_name(END_AT).filter(|_| scd2) {
                Some(end) => {
                    let current =
                        arrow_arith::boolean::is_null(end).map_err(|e| err(e.to_string()))?;
                    arrow_select::filter::filter_record_batch(&batch, &current)
                        .map_err(|e| err(e.to_string()))?
                }
                None => batch,
            };
            if batch.num_rows() > 0 {
                out.push(batch);
            }
        }
    }
    Ok(out)
}

/// `part` with every `needed` column, those its file lacks (added since) as nulls of the
/// snapshot's type.
fn with_columns(part: &RecordBatch, needed: &[String], snapshot: &Schema) -> RecordBatch {
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    for name in needed {
        let column = part.column_by_name(name).cloned().unwrap_or_else(|| {
            let t = snapshot
                .field_with_name(name)
                .map_or(DataType::Null, |f| f.data_type().clone());
            new_null_array(&t, part.num_rows())
        });
        fields.push(Field::new(name, column.data_type().clone(), true));
        columns.push(column);
    }
    RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(part.num_rows())),
    )
    .expect("columns of one batch")
}

/// The change records: the snapshot's changed rows as upserts, then a delete per absent
/// key (its key columns, the stamps of the snapshot, nulls elsewhere).
fn changes_of(
    snapshot: &RecordBatch,
    keys: &[String],
    stamps: &crate::flow::cdc::FromSnapshots,
    unchanged: &[bool],
    absent: &[Vec<ArrayRef>],
) -> Result<Vec<RecordBatch>, String> {
    let changed = BooleanArray::from(unchanged.iter().map(|u| !u).collect::<Vec<_>>());
    let upserts =
        arrow_select::filter::filter_record_batch(snapshot, &changed).map_err(|e| e.to_string())?;
    let in_schema = snapshot.schema();
    let mut fields: Vec<Field> = in_schema
        .fields()
        .iter()
        .map(|f| {
            let key = keys.contains(f.name());
            f.as_ref().clone().with_nullable(!key || f.is_nullable())
        })
        .collect();
    fields.push(Field::new(SNAPSHOT_DELETE, DataType::Boolean, false));
    let out_schema: SchemaRef = Arc::new(Schema::new(fields));
    let mut parts = Vec::new();
    if upserts.num_rows() > 0 {
        let mut columns = upserts.columns().to_vec();
        columns.push(Arc::new(BooleanArray::from(vec![
            false;
            upserts.num_rows()
        ])));
        parts.push(
            RecordBatch::try_new(Arc::clone(&out_schema), columns).map_err(|e| e.to_string())?,
        );
    }
    for key_columns in absent {
        let n = key_columns[0].len();
        // The snapshot's stamps (the same on every row) for each delete.
        let first = UInt32Array::from(vec![0u32; n]);
        let mut columns = Vec::with_capacity(out_schema.fields().len());
        for f in in_schema.fields() {
            let name = f.name();
            let column = if let Some(k) = keys.iter().position(|k| k == name) {
                Arc::clone(&key_columns[k])
            } else if *name == stamps.ingest_time_column || *name == stamps.snapshot_id_column {
                let col = snapshot
                    .column_by_name(name)
                    .expect("a column of the snapshot");
                arrow_select::take::take(col.as_ref(), &first, None).map_err(|e| e.to_string())?
            } else {
                new_null_array(f.data_type(), n)
            };
            columns.push(column);
        }
        columns.push(Arc::new(BooleanArray::from(vec![true; n])));
        parts.push(
            RecordBatch::try_new(Arc::clone(&out_schema), columns).map_err(|e| e.to_string())?,
        );
    }
    if parts.is_empty() {
        return Ok(Vec::new());
    }
    Ok(vec![
        arrow_select::concat::concat_batches(&out_schema, &parts).map_err(|e| e.to_string())?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray, TimestampMicrosecondArray};

    #[test]
    fn changes_are_the_changed_rows_then_a_delete_per_absent_key() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("v", DataType::Utf8, true),
            Field::new(
                "_ingested_at",
                DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
            Field::new("_snapshot_id", DataType::Utf8, true),
        ]));
        let snapshot = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![2, 3])),
                Arc::new(StringArray::from(vec!["b2", "a3"])),
                Arc::new(TimestampMicrosecondArray::from(vec![7, 7]).with_timezone("UTC")),
                Arc::new(StringArray::from(vec!["s@2", "s@2"])),
            ],
        )
        .unwrap();
        let stamps = crate::flow::cdc::FromSnapshots {
            ingest_time_column: "_ingested_at".into(),
            snapshot_id_column: "_snapshot_id".into(),
        };
        let absent: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![1]))];
        let out = changes_of(
            &snapshot,
            &["id".into()],
            &stamps,
            &[true, false],
            &[absent],
        )
        .unwrap();
        let out = &out[0];
        let ids = out.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(ids.values(), &[3, 1], "the unchanged key 2 makes no record");
        let deleted = out
            .column(4)
            .as_any()
            .downcast_ref::<BooleanArray>()
            .unwrap();
        assert_eq!(
            deleted.iter().collect::<Vec<_>>(),
            [Some(false), Some(true)]
        );
        assert!(out.column(1).is_null(1), "a delete carries only its key");
        let at = out
            .column(2)
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        assert_eq!(
            at.value(1),
            7,
            "a delete is sequenced at the snapshot's time"
        );
        assert!(
            changes_of(&snapshot, &["id".into()], &stamps, &[true, true], &[])
                .unwrap()
                .is_empty()
        );
    }
}
