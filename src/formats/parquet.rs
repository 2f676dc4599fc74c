//! Parquet: the schema comes from the files' footers (merged to the widest type across
//! files), and each column is read as the stream's type. A value that cannot be read as
//! that type (safe cast gives null where the file had a value) is rescued as JSON, and so
//! is a column the schema does not have. A STRING column holds any value: a nested one as
//! its text (shared by the Avro, ORC, text and binary decoders).

use std::fs::File;
use std::sync::Arc;

use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::conform::{column_type, corrupt};
use super::sink::Sink;
use super::{BATCH_ROWS, DecodeError, DecodeOptions, FileStats, SourceFile};
use crate::record::TableLayout;
use crate::schema::infer::{Inferred, SchemaInferrer};

fn builder(file: &SourceFile) -> Result<ParquetRecordBatchReaderBuilder<File>, DecodeError> {
    let path = file.meta.path.as_str();
    let f = super::open_listed(file)?;
    ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| corrupt(path, &e))
}

/// Observes the file's schema (the footer only) and returns its row count.
pub fn infer(file: &SourceFile, inferrer: &mut SchemaInferrer) -> Result<u64, DecodeError> {
    let b = builder(file)?;
    for field in b.schema().fields() {
        inferrer.add_typed(
            field.name(),
            Inferred::from_type(&column_type(field.data_type())),
        );
    }
    Ok(u64::try_from(b.metadata().file_metadata().num_rows()).unwrap_or(0))
}

/// Decodes the file into batches of the layout.
pub fn decode(
    file: &SourceFile,
    opts: &DecodeOptions,
    layout: &Arc<TableLayout>,
    emit: &mut dyn FnMut(RecordBatch) -> bool,
) -> Result<FileStats, DecodeError> {
    let path = file.meta.path.as_str();
    let reader = builder(file)?
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| corrupt(path, &e))?;
    let mut sink = Sink::new(file, opts, layout, emit);
    for batch in reader {
        sink.push_batch(&batch.map_err(|e| corrupt(path, &e))?)?;
    }
    Ok(sink.finish())
}
