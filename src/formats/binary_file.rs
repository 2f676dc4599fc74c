//! binaryFile (Spark's binaryFile source): one row per file with `path` (STRING, the
//! file's URI as `_metadata.file_path` has it), `modificationTime` (TIMESTAMP), `length`
//! (BIGINT) and `content` (BINARY, the file's bytes as they are: nothing is decompressed).
//!
//! A file's content is one value held in memory, so a file longer than
//! `cloudFiles.maxRecordBytes` (64 MiB by default) stops the batch with an error naming
//! it, before it is read (or fetched from S3); raise the option for larger files. A file
//! of [`LARGE_RECORD_BYTES`] or more is read and written during this thread's turn.

use std::io::Read;
use std::sync::Arc;

use arrow_array::TimestampMicrosecondArray;
use arrow_array::{ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray};
use arrow_buffer::{Buffer, OffsetBuffer};
use arrow_schema::{DataType as ArrowType, Field as ArrowField, Schema as ArrowSchema, TimeUnit};

use super::sink::Sink;
use super::{
    DecodeError, DecodeOptions, FileStats, LARGE_RECORD_BYTES, SourceFile, large_record_turn,
};
use crate::record::TableLayout;
use crate::schema::DataType;
use crate::schema::infer::{Inferred, SchemaInferrer};

/// The fixed columns, in Spark's order.
pub const COLUMNS: [(&str, DataType); 4] = [
    ("path", DataType::String),
    ("modificationTime", DataType::Timestamp),
    ("length", DataType::Long),
    ("content", DataType::Binary),
];

/// The fixed schema; the file is not read. One row per file.
pub fn infer(inferrer: &mut SchemaInferrer) -> u64 {
    for (name, data_type) in &COLUMNS {
        inferrer.add_typed(name, Inferred::from_type(data_type));
    }
    1
}

/// Refuses a file longer than `cloudFiles.maxRecordBytes` by its listed size, before it is
/// read or fetched.
pub fn check_size(file: &SourceFile, opts: &DecodeOptions) -> Result<(), DecodeError> {
    if file.meta.size > opts.max_record_bytes as u64 {
        return Err(too_long(file, opts));
    }
    Ok(())
}

fn too_long(file: &SourceFile, opts: &DecodeOptions) -> DecodeError {
    DecodeError::FileTooLong {
        path: file.meta.path.clone(),
        limit: opts.max_record_bytes,
    }
}

/// Decodes the file into one row of the layout.
pub fn decode(
    file: &SourceFile,
    opts: &DecodeOptions,
    layout: &Arc<TableLayout>,
    emit: &mut dyn FnMut(RecordBatch) -> bool,
) -> Result<FileStats, DecodeError> {
    check_size(file, opts)?;
    let path = file.meta.path.as_str();
    let io = |source: std::io::Error| super::io_error(path, source);
    let _turn = (file.meta.size >= LARGE_RECORD_BYTES as u64).then(large_record_turn);
    let f = super::open_listed(file)?;
    // Bounded even if the file grew since it was listed (which is refused after reading).
    let limit = opts.max_record_bytes as u64;
    let mut content = Vec::with_capacity(usize::try_from(file.meta.size).unwrap_or(0));
    f.take(limit.saturating_add(1))
        .read_to_end(&mut content)
        .map_err(io)?;
    if content.len() as u64 > limit {
        return Err(too_long(file, opts));
    }
    let corrupt = |e: &dyn std::fmt::Display| DecodeError::Corrupt {
        path: path.to_string(),
        line: None,
        reason: e.to_string(),
    };
    let length = i64::try_from(content.len()).map_err(|e| corrupt(&e))?;
    let schema = Arc::new(ArrowSchema::new(vec![
        ArrowField::new("path", ArrowType::Utf8, true),
        ArrowField::new(
            "modificationTime",
            ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        ArrowField::new("length", ArrowType::Int64, true),
        ArrowField::new("content", ArrowType::Binary, true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![path])),
        Arc::new(
            TimestampMicrosecondArray::from(vec![file.meta.mtime_ms.saturating_mul(1000)])
                .with_timezone("UTC"),
        ),
        Arc::new(Int64Array::from(vec![length])),
        // The bytes moved into the array, not copied.
        Arc::new(BinaryArray::new(
            OffsetBuffer::from_lengths([content.len()]),
            Buffer::from_vec(content),
            None,
        )),
    ];
    let batch = RecordBatch::try_new(schema, columns).map_err(|e| corrupt(&e))?;
    let mut sink = Sink::new(file, opts, layout, emit);
    sink.push_batch(&batch)?;
    Ok(sink.finish())
}
