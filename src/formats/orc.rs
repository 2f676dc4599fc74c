//! ORC: the schema comes from each file's footer (merged to the widest type across files,
//! as Parquet's footers are), and the file is read stripe by stripe into batches
//! (orc-rust), so memory holds one stripe's streams and one batch whatever the file size.
//! Types as Spark reads ORC: `timestamp` (and `timestamp with local time zone`) a UTC
//! TIMESTAMP in microseconds, `char`/`varchar` STRING, the rest as they are. Each batch is
//! then made one of the stream's layout as Parquet's is ([`super::conform::conform`]): a
//! value that does not fit is rescued.

use std::cell::Cell;
use std::fs::File;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Once};

use arrow_array::RecordBatch;
use arrow_schema::DataType as ArrowType;
use orc_rust::arrow_reader::ArrowReaderBuilder;
use orc_rust::schema::TimestampPrecision;

use super::sink::Sink;
use super::{BATCH_ROWS, DecodeError, DecodeOptions, FileStats, SourceFile};
use crate::record::TableLayout;
use crate::schema::DataType;
use crate::schema::infer::{Inferred, SchemaInferrer};

fn corrupt(path: &str, e: &dyn std::fmt::Display) -> DecodeError {
    DecodeError::Corrupt {
        path: path.to_string(),
        line: None,
        reason: format!("not a readable ORC file: {e}"),
    }
}

thread_local! {
    /// Set while this thread runs a guarded step: its panics are errors, not reports.
    static GUARDED: Cell<bool> = const { Cell::new(false) };
}

/// Runs a step of the ORC reader, turning a panic on malformed input (orc-rust 0.9 panics
/// on some broken compressed chunks instead of returning an error) into a corrupt-file
/// error naming the file. The panic is not printed: the error says it.
fn guarded<T>(path: &str, step: impl FnOnce() -> Result<T, DecodeError>) -> Result<T, DecodeError> {
    static QUIET_HOOK: Once = Once::new();
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !GUARDED.with(Cell::get) {
                previous(info);
            }
        }));
    });
    GUARDED.with(|g| g.set(true));
    let result = catch_unwind(AssertUnwindSafe(step));
    GUARDED.with(|g| g.set(false));
    result.unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no reason given".to_string());
        Err(corrupt(
            path,
            &format_args!("the ORC reader failed ({what})"),
        ))
    })
}

fn builder(file: &SourceFile) -> Result<ArrowReaderBuilder<File>, DecodeError> {
    let path = file.meta.path.as_str();
    let f = super::open_listed(file)?;
    guarded(path, || {
        ArrowReaderBuilder::try_new(f)
            .map(|b| b.with_timestamp_precision(TimestampPrecision::Microsecond))
            .map_err(|e| corrupt(path, &e))
    })
}

/// The stream type of a file column: its own, or STRING when Delta has no such type.
fn column_type(t: &ArrowType) -> DataType {
    DataType::from_arrow(t).unwrap_or(DataType::String)
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
    Ok(b.file_metadata().number_of_rows())
}

/// Decodes the file into batches of the layout.
pub fn decode(
    file: &SourceFile,
    opts: &DecodeOptions,
    layout: &Arc<TableLayout>,
    emit: &mut dyn FnMut(RecordBatch) -> bool,
) -> Result<FileStats, DecodeError> {
    let path = file.meta.path.as_str();
    let b = builder(file)?;
    let expected = b.file_metadata().number_of_rows();
    let mut reader = b.with_batch_size(BATCH_ROWS).build();
    let mut sink = Sink::new(file, opts, layout, emit);
    while let Some(batch) = guarded(path, || {
        reader.next().transpose().map_err(|e| corrupt(path, &e))
    })? {
        sink.push_batch(&batch)?;
    }
    sink.finish_expecting(expected, |read| {
        corrupt(
            path,
            &format_args!("its footer counts {expected} rows, {read} were read"),
        )
    })
}
