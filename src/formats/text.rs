//! Text (Spark's text source): one row per line in a `value` STRING column, or one per file
//! with `wholetext=true`. Lines are split on `\n` (a `\r` before it removed) or on
//! `lineSep`; every line is kept, blank ones too, as Spark keeps them. Files are read
//! through the same decompression as the other line formats.
//!
//! The schema is fixed, so inference reads nothing. A line (or, with `wholetext`, a file)
//! longer than `cloudFiles.maxRecordBytes` stops the batch naming the file and line, and
//! so does a line that is not UTF-8: a STRING cannot hold it, and nothing is dropped.

use std::io::Read;
use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType as ArrowType, Field as ArrowField, Schema as ArrowSchema};

use super::lines::{Lines, for_each_line};
use super::sink::{RowSink, Rows, Sink};
use super::{
    DecodeError, DecodeOptions, FileStats, LARGE_RECORD_BYTES, SourceFile, large_record_turn, open,
    read_error,
};
use crate::record::TableLayout;
use crate::schema::DataType;
use crate::schema::infer::{Inferred, SchemaInferrer};

/// The one column of the text format.
pub const VALUE: &str = "value";

/// The fixed schema: `value STRING`. The file is not read.
pub fn infer(inferrer: &mut SchemaInferrer) -> u64 {
    inferrer.add_typed(VALUE, Inferred::from_type(&DataType::String));
    0
}

/// The `value` column of the rows read so far.
#[derive(Default)]
struct Values {
    values: StringBuilder,
    rows: usize,
}

impl Values {
    fn push(&mut self, value: &[u8], line: u64, path: &str) -> Result<(), DecodeError> {
        let text = std::str::from_utf8(value).map_err(|e| DecodeError::Corrupt {
            path: path.to_string(),
            line: Some(line),
            reason: format!("not UTF-8 text ({e}); the text format reads UTF-8 only"),
        })?;
        self.values.append_value(text);
        self.rows += 1;
        Ok(())
    }
}

impl Rows for Values {
    fn len(&self) -> usize {
        self.rows
    }

    fn take_batch(&mut self, sink: &mut Sink<'_>) -> Result<RecordBatch, DecodeError> {
        let column: ArrayRef = Arc::new(self.values.finish());
        let schema = Arc::new(ArrowSchema::new(vec![ArrowField::new(
            VALUE,
            ArrowType::Utf8,
            true,
        )]));
        let batch =
            RecordBatch::try_new(schema, vec![column]).map_err(|e| DecodeError::Corrupt {
                path: sink.path().to_string(),
                line: None,
                reason: e.to_string(),
            })?;
        self.rows = 0;
        sink.conform(&batch)
    }
}

/// Decodes the file into batches of the layout: a line per row, or the file as one row.
pub fn decode(
    file: &SourceFile,
    opts: &DecodeOptions,
    layout: &Arc<TableLayout>,
    emit: &mut dyn FnMut(RecordBatch) -> bool,
) -> Result<FileStats, DecodeError> {
    let path = file.meta.path.as_str();
    let mut reader = open(file, opts.max_decompressed_bytes)?;
    let mut sink = RowSink::with_rows(Values::default(), Sink::new(file, opts, layout, emit));
    if opts.text.whole_text {
        // One bounded read: a byte past the limit means the file is too long.
        let limit = opts.max_record_bytes;
        let mut whole = Vec::new();
        let mut turn = None;
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            let n = reader
                .read(&mut chunk)
                .map_err(|e| read_error(path, e, Some(1)))?;
            if n == 0 {
                break;
            }
            if whole.len() + n > limit {
                return Err(DecodeError::RecordTooLong {
                    path: path.to_string(),
                    line: 1,
                    limit,
                });
            }
            if turn.is_none() && whole.len() + n >= LARGE_RECORD_BYTES {
                turn = Some(large_record_turn());
            }
            whole.extend_from_slice(&chunk[..n]);
        }
        // An empty file has no lines, and no row either way (as every format's empty file).
        if !whole.is_empty() {
            sink.rows.push(&whole, 1, path)?;
        }
        drop(whole);
        return sink.finish_rows();
    }
    for_each_line(
        &mut *reader,
        path,
        opts.max_record_bytes,
        opts.text.line_sep.as_deref(),
        Lines::Text,
        &mut |line, line_no| {
            // A large line (read during this thread's turn) is written as a batch of its own.
            let large = sink.large(line.len())?;
            sink.rows.push(line, line_no, path)?;
            sink.pushed(line.len(), large)
        },
    )?;
    sink.finish_rows()
}
