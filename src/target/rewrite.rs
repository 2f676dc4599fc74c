//! Copy-on-write without DataFusion (delta-rs has MERGE only behind its `datafusion`
//! feature): the rows a change touches are taken out of the files that hold them, those
//! files are rewritten without them, and one commit removes the old files and adds the new.
//!
//! A file whose statistics (the add action's `minValues`/`maxValues`) say it cannot hold a
//! selected row is not read at all; every other file is read once, whole, and rewritten
//! only when it held a selected row, so a batch whose keys are clustered rewrites only the
//! files that hold them. The candidate files are grouped into runs of about
//! [`REWRITE_ROWS`] rows (small files join their neighbours, so the table does not split
//! into ever more small files), and the runs are rewritten concurrently, one task each
//! (three at a time), each into writers of its own capped at about [`REWRITE_ROWS`] rows a
//! file: the table never becomes one file that every later batch must rewrite whole. Each
//! task also finishes its files, so their last row groups are encoded and stored on both
//! cores rather than one after another at the commit; the caller writes what it adds (the
//! upserted rows) to a writer of its own.
//! Memory holds the taken rows and, per running task, one file's batches and its writer's
//! open row group, never the table.

use std::sync::Arc;

use arrow_array::{BooleanArray, RecordBatch};
use deltalake::DeltaTable;
use deltalake::kernel::Action;
use futures::{StreamExt, TryStreamExt};
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;

use super::delta::{BatchWriter, TargetError};

/// About how many rows one rewritten file holds (a soft cap: a run's last file may take a
/// few more).
pub const REWRITE_ROWS: usize = 256 * 1024;
/// Runs rewritten at once (the decoding and encoding are CPU-bound): one more than the
/// cores, so the last runs of a batch share both rather than one finishing alone.
const CONCURRENT_RUNS: usize = 3;
/// Rows per decoded batch while rewriting.
const READ_BATCH_ROWS: usize = 8192;

/// Chooses rows of a batch read with (at least) the selecting columns.
pub type Selector = dyn Fn(&RecordBatch) -> Result<Vec<bool>, String> + Send + Sync;

/// Whether a file may hold a selected row, from its path in the table and its add
/// action's statistics (the JSON `stats`, absent when the writer kept none): `false`
/// leaves it unread.
pub type Candidate<'a> = dyn Fn(&str, Option<&serde_json::Value>) -> bool + Sync + 'a;

/// What was taken out of the table.
#[derive(Default)]
pub struct Taken {
    /// The selected rows, whole, in the files' schema.
    pub rows: Vec<RecordBatch>,
    /// The files rewritten, to remove in the commit that adds their survivors.
    pub removes: Vec<Action>,
    /// The finished files holding the survivors, to add in that commit.
    pub adds: Vec<Action>,
    /// Files read (candidates by their statistics).
    pub files_read: usize,
}

impl Taken {
    /// Whether no row was taken (so no file is rewritten).
    pub fn is_empty(&self) -> bool {
        self.removes.is_empty() && self.rows.iter().all(|b| b.num_rows() == 0)
    }
}

struct RunOut {
    rows: Vec<RecordBatch>,
    removes: Vec<Action>,
    adds: Vec<Action>,
}

/// A table's store and its data files (path, size).
pub type TableFiles = (
    Arc<dyn object_store::ObjectStore>,
    Vec<(object_store::path::Path, u64)>,
);

/// The table's data files (path, size) and the store they are read from: a list taken
/// before any read, so no snapshot borrow is held across an `await`.
pub fn table_files(table: &DeltaTable) -> Result<TableFiles, String> {
    let snapshot = table.snapshot().map_err(|e| e.to_string())?;
    let files = snapshot
        .log_data()
        .into_iter()
        .map(|f| (f.object_store_path(), u64::try_from(f.size()).unwrap_or(0)))
        .collect();
    Ok((table.log_store().object_store(None), files))
}

/// A Parquet reader over one of the table's files (errors name the file).
pub async fn open_file(
    store: &Arc<dyn object_store::ObjectStore>,
    path: &object_store::path::Path,
    size: u64,
) -> Result<ParquetRecordBatchStreamBuilder<crate::storage::RangedFile>, String> {
    let reader = crate::storage::RangedFile {
        store: Arc::clone(store),
        path: path.clone(),
        size,
    };
    ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .map_err(|e| format!("{path}: {e}"))
}

/// A row filter on a binary key column: the other columns of a row group are decoded only
/// for the rows whose key `wanted` picks (a null key is never picked).
pub fn binary_key_filter(
    schema: &parquet::schema::types::SchemaDescriptor,
    column: &str,
    wanted: impl Fn(&[u8]) -> bool + Send + 'static,
) -> parquet::arrow::arrow_reader::RowFilter {
    use parquet::arrow::arrow_reader::{ArrowPredicateFn, RowFilter};
    let mask = parquet::arrow::ProjectionMask::columns(schema, [column]);
    let name = column.to_string();
    let predicate = ArrowPredicateFn::new(mask, move |b: RecordBatch| {
        let key = b
            .column(0)
            .as_any()
            .downcast_ref::<arrow_array::BinaryArray>()
            .ok_or_else(|| {
                arrow_schema::ArrowError::SchemaError(format!("the column {name} is not binary"))
            })?;
        Ok(key.iter().map(|k| Some(k.is_some_and(&wanted))).collect())
    });
    RowFilter::new(vec![Box::new(predicate)])
}

/// Takes the rows `select` chooses out of `table`: files `candidate` rules out, and files
/// holding no selected row, are left alone; the other rows of a file holding some are
/// written to writers `new_writer` makes (with `apart`, the rows it picks to files of
/// their own).
pub async fn take_rows(
    table: &DeltaTable,
    location: &str,
    candidate: &Candidate<'_>,
    select: Arc<Selector>,
    apart: Option<Arc<Selector>>,
    new_writer: &(dyn Fn() -> Result<BatchWriter, TargetError> + Sync),
) -> Result<Taken, TargetError> {
    let err = |reason: String| TargetError::Incompatible {
        location: location.to_string(),
        reason,
    };
    let mut taken = Taken::default();
    if table.version().is_none() {
        return Ok(taken);
    }
    let snapshot = table.snapshot().map_err(|e| err(e.to_string()))?;
    let store = table.log_store().object_store(None);
    // The candidate files, in the table's order, grouped into runs of about REWRITE_ROWS.
    let mut runs: Vec<Vec<(object_store::path::Path, u64, Action)>> = Vec::new();
    let mut run_sizes: Vec<usize> = Vec::new();
    for f in snapshot.log_data() {
        let stats = f
            .stats()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok());
        if !candidate(&f.path(), stats.as_ref()) {
            continue;
        }
        let rows = f.num_records().unwrap_or(REWRITE_ROWS);
        match run_sizes.last_mut() {
            Some(n) if *n + rows <= REWRITE_ROWS => *n += rows,
            _ => {
                runs.push(Vec::new());
                run_sizes.push(rows);
            }
        }
        runs.last_mut().expect("a run was pushed").push((
            f.object_store_path(),
            u64::try_from(f.size()).unwrap_or(0),
            Action::Remove(f.remove_action(true)),
        ));
    }
    taken.files_read = runs.iter().map(Vec::len).sum();
    let mut tasks = Vec::with_capacity(runs.len());
    for (files, rows) in runs.into_iter().zip(run_sizes) {
        // Writers for about `rows` rows (unused ones write no file), for each output.
        let outputs = (0..if apart.is_some() { 2 } else { 1 })
            .map(|_| {
                (0..=rows / REWRITE_ROWS)
                    .map(|_| new_writer())
                    .collect::<Result<Vec<_>, _>>()
                    .map(Output::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let store = Arc::clone(&store);
        let select = Arc::clone(&select);
        let apart = apart.clone();
        let location = location.to_string();
        tasks.push(async move {
            tokio::spawn(rewrite_run(store, files, select, apart, outputs, location))
                .await
                .map_err(|e| TargetError::Incompatible {
                    location: String::new(),
                    reason: format!("a rewrite task failed: {e}"),
                })?
        });
    }
    // Runs finish in any order; the commit does not depend on it.
    let mut outs = futures::stream::iter(tasks).buffer_unordered(CONCURRENT_RUNS);
    while let Some(out) = outs.try_next().await? {
        taken.rows.extend(out.rows);
        taken.removes.extend(out.removes);
        taken.adds.extend(out.adds);
    }
    Ok(taken)
}

/// Where a run's surviving rows go: a writer, and the next of `spare` (a new file) once
/// it holds REWRITE_ROWS.
struct Output {
    writer: BatchWriter,
    spare: std::vec::IntoIter<BatchWriter>,
    written: usize,
    full: Vec<BatchWriter>,
}

impl Output {
    fn new(writers: Vec<BatchWriter>) -> Output {
        let mut spare = writers.into_iter();
        let writer = spare.next().expect("an output has a writer");
        Output {
            writer,
            spare,
            written: 0,
            full: Vec::new(),
        }
    }

    async fn write(&mut self, b: RecordBatch) -> Result<(), TargetError> {
        if b.num_rows() == 0 {
            return Ok(());
        }
        self.written += b.num_rows();
        self.writer.write(b).await?;
        if self.written >= REWRITE_ROWS
            && let Some(next) = self.spare.next()
        {
            self.full.push(std::mem::replace(&mut self.writer, next));
            self.written = 0;
        }
        Ok(())
    }

    async fn finish(mut self, adds: &mut Vec<Action>) -> Result<(), TargetError> {
        self.full.push(self.writer);
        for w in self.full {
            adds.extend(w.finish().await?.into_iter().map(Action::Add));
        }
        Ok(())
    }
}

/// Reads each file of a run once and writes its unselected rows to the first of
/// `outputs` (those `apart` picks to the second), then finishes the files. A file without
/// a selected row is not rewritten; its batches are held only until its first selected
/// row shows.
async fn rewrite_run(
    store: Arc<dyn object_store::ObjectStore>,
    files: Vec<(object_store::path::Path, u64, Action)>,
    select: Arc<Selector>,
    apart: Option<Arc<Selector>>,
    mut outputs: Vec<Output>,
    location: String,
) -> Result<RunOut, TargetError> {
    let err = |reason: String| TargetError::Incompatible {
        location: location.clone(),
        reason,
    };
    let mut out = RunOut {
        rows: Vec::new(),
        removes: Vec::new(),
        adds: Vec::new(),
    };
    for (path, size, remove) in files {
        let reader = crate::storage::RangedFile {
            store: Arc::clone(&store),
            path: path.clone(),
            size,
        };
        let mut stream = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .map_err(|e| err(format!("{path}: {e}")))?
            .with_batch_size(READ_BATCH_ROWS)
            .build()
            .map_err(|e| err(format!("{path}: {e}")))?;
        // Before the file's first selected row, its batches wait (a file holding none is
        // left as it is); after it, they go straight to the writer.
        let mut waiting = Vec::new();
        let mut holds = false;
        while let Some(batch) = stream
            .try_next()
            .await
            .map_err(|e| err(format!("{path}: {e}")))?
        {
            let chosen = select(&batch).map_err(|e| err(format!("{path}: {e}")))?;
            let survivors = if chosen.contains(&true) {
                let keep = BooleanArray::from(chosen.iter().map(|c| !c).collect::<Vec<_>>());
                let mask = BooleanArray::from(chosen);
                out.rows.push(
                    arrow_select::filter::filter_record_batch(&batch, &mask)
                        .map_err(|e| err(e.to_string()))?,
                );
                holds = true;
                arrow_select::filter::filter_record_batch(&batch, &keep)
                    .map_err(|e| err(e.to_string()))?
            } else {
                batch
            };
            if !holds {
                waiting.push(survivors);
                continue;
            }
            for b in waiting.drain(..).chain(std::iter::once(survivors)) {
                match &apart {
                    Some(apart) if b.num_rows() > 0 => {
                        let second = apart(&b).map_err(|e| err(format!("{path}: {e}")))?;
                        let first =
                            BooleanArray::from(second.iter().map(|c| !c).collect::<Vec<_>>());
                        let second = BooleanArray::from(second);
                        for (o, mask) in [(0, first), (1, second)] {
                            let part = arrow_select::filter::filter_record_batch(&b, &mask)
                                .map_err(|e| err(e.to_string()))?;
                            outputs[o].write(part).await?;
                        }
                    }
                    _ => outputs[0].write(b).await?,
                }
            }
        }
        if holds {
            out.removes.push(remove);
        }
    }
    for o in outputs {
        o.finish(&mut out.adds).await?;
    }
    Ok(out)
}
