//! Copy-on-write without DataFusion (delta-rs has MERGE only behind its `datafusion`
//! feature): the rows a change touches are taken out of the files that hold them, those
//! files are rewritten without them, and one commit removes the old files and adds the new.
//!
//! Each file is first read for the selecting columns only; a file with no selected row is
//! left alone, so a batch whose keys are clustered rewrites only the files that hold them.
//! Memory holds the taken rows and one file's batches, never the table.

use std::sync::Arc;

use arrow_array::{BooleanArray, RecordBatch};
use deltalake::DeltaTable;
use deltalake::kernel::Action;
use futures::TryStreamExt;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;

use super::delta::{BatchWriter, SinkError};

/// Chooses rows of a batch read with (at least) the selecting columns.
pub type Selector<'a> = dyn Fn(&RecordBatch) -> Result<Vec<bool>, String> + Send + Sync + 'a;

/// What was taken out of the table.
#[derive(Default)]
pub struct Taken {
    /// The selected rows, whole, in the files' schema.
    pub rows: Vec<RecordBatch>,
    /// The files rewritten, to remove in the commit that adds their survivors.
    pub removes: Vec<Action>,
    pub files_read: usize,
}

/// Takes the rows `select` chooses out of `table`: files holding none are left alone; the
/// other rows of a file holding some are written to `survivors`.
pub async fn take_rows(
    table: &DeltaTable,
    location: &str,
    select_columns: &[&str],
    select: &Selector<'_>,
    survivors: &mut BatchWriter,
) -> Result<Taken, SinkError> {
    let err = |reason: String| SinkError::Incompatible {
        location: location.to_string(),
        reason,
    };
    let mut taken = Taken::default();
    if table.version().is_none() {
        return Ok(taken);
    }
    let snapshot = table.snapshot().map_err(|e| err(e.to_string()))?;
    let store = table.log_store().object_store(None);
    let files: Vec<_> = snapshot
        .log_data()
        .into_iter()
        .map(|f| {
            (
                f.object_store_path(),
                u64::try_from(f.size()).unwrap_or(0),
                f.remove_action(true),
            )
        })
        .collect();
    for (path, size, remove) in files {
        taken.files_read += 1;
        let reader = || crate::storage::RangedFile {
            store: Arc::clone(&store),
            path: path.clone(),
            size,
        };
        // The footer is read once, for both passes.
        let metadata = ArrowReaderMetadata::load_async(&mut reader(), Default::default())
            .await
            .map_err(|e| err(format!("{path}: {e}")))?;
        let open =
            || ParquetRecordBatchStreamBuilder::new_with_metadata(reader(), metadata.clone());
        // First the selecting columns only: does the file hold a selected row at all?
        let builder = open();
        let mask =
            ProjectionMask::columns(builder.parquet_schema(), select_columns.iter().copied());
        let keys: Vec<RecordBatch> = builder
            .with_projection(mask)
            .build()
            .map_err(|e| err(format!("{path}: {e}")))?
            .try_collect()
            .await
            .map_err(|e| err(format!("{path}: {e}")))?;
        let mut holds = false;
        for b in &keys {
            if select(b)
                .map_err(|e| err(format!("{path}: {e}")))?
                .contains(&true)
            {
                holds = true;
                break;
            }
        }
        if !holds {
            continue;
        }
        let mut stream = open().build().map_err(|e| err(format!("{path}: {e}")))?;
        while let Some(batch) = stream
            .try_next()
            .await
            .map_err(|e| err(format!("{path}: {e}")))?
        {
            let chosen = select(&batch).map_err(|e| err(format!("{path}: {e}")))?;
            let keep = BooleanArray::from(chosen.iter().map(|c| !c).collect::<Vec<_>>());
            let mask = BooleanArray::from(chosen);
            let rows = arrow_select::filter::filter_record_batch(&batch, &mask)
                .map_err(|e| err(e.to_string()))?;
            let rest = arrow_select::filter::filter_record_batch(&batch, &keep)
                .map_err(|e| err(e.to_string()))?;
            if rows.num_rows() > 0 {
                taken.rows.push(rows);
            }
            if rest.num_rows() > 0 {
                survivors.write(rest).await?;
            }
        }
        taken.removes.push(Action::Remove(remove));
    }
    Ok(taken)
}
