//! File decoding: schema inference and streaming decode of one file into batches of the
//! stream's layout, dispatched by format.
//!
//! Decoders are synchronous and run on blocking threads. Each is its parsing only: the
//! input side (opening, decompression, a remote object's temporary copy) is `input`,
//! bounded line reading `lines`, and the output side (batches cut and handed to an `emit`
//! callback, stats, stop-early) `sink`, so memory stays bounded by the batch size
//! whatever the file size.

pub mod avro;
pub mod binary_file;
mod conform;
pub mod csv;
mod decode;
pub mod detect;
mod input;
pub mod json;
mod lines;
pub mod orc;
pub mod parquet;
mod sink;
pub use sink::CarriedRows;
pub mod text;
pub mod xml;
pub use decode::{
    BATCH_BYTES, BATCH_ROWS, DecodeError, DecodeOptions, FileStats, LARGE_RECORD_BYTES, SourceFile,
    large_record_turn,
};

use std::sync::Arc;

use arrow_array::RecordBatch;

use crate::options::Format;
use crate::record::TableLayout;
use crate::schema::infer::SchemaInferrer;

use input::materialize;
pub use input::{Compression, open, unchanged};
pub(crate) use input::{OverLimit, io_error, open_listed, read_error};

/// Observes one file for schema inference. Returns the records (rows) it looked at.
pub fn infer_file(
    file: &SourceFile,
    opts: &DecodeOptions,
    typed: bool,
    inferrer: &mut SchemaInferrer,
) -> Result<u64, DecodeError> {
    let (file, _copy) = materialize(file)?;
    let file = &file;
    match opts.format {
        Format::Json => json::infer(file, opts, typed, inferrer),
        Format::Csv => csv::infer(file, opts, typed, inferrer),
        Format::Parquet => parquet::infer(file, inferrer),
        Format::Avro => avro::infer(file, inferrer),
        Format::Orc => orc::infer(file, inferrer),
        Format::Text => Ok(text::infer(inferrer)),
        Format::BinaryFile => Ok(binary_file::infer(inferrer)),
        Format::Xml => xml::infer(file, opts, typed, inferrer),
    }
}

/// Decodes one file into batches of `layout`, handing each to `emit`. With `carry`, the
/// rows of a format built row by row (JSON, CSV, XML) go on from the ones carried from the
/// files before, and the file's last rows are carried on for the next (see
/// [`CarriedRows`]); a file that fails fails its read, which writes none of them.
pub fn decode_file(
    file: &SourceFile,
    opts: &DecodeOptions,
    layout: &Arc<TableLayout>,
    carry: Option<&mut CarriedRows>,
    emit: &mut dyn FnMut(RecordBatch) -> bool,
) -> Result<FileStats, DecodeError> {
    if opts.format == Format::BinaryFile {
        // Before an S3 object is fetched.
        binary_file::check_size(file, opts)?;
    }
    let (local, _copy) = materialize(file)?;
    let stats = match opts.format {
        Format::Json => json::decode(&local, opts, layout, carry, emit),
        Format::Csv => csv::decode(&local, opts, layout, carry, emit),
        Format::Parquet => parquet::decode(&local, opts, layout, emit),
        Format::Avro => avro::decode(&local, opts, layout, emit),
        Format::Orc => orc::decode(&local, opts, layout, emit),
        Format::Text => text::decode(&local, opts, layout, emit),
        Format::BinaryFile => binary_file::decode(&local, opts, layout, emit),
        Format::Xml => xml::decode(&local, opts, layout, carry, emit),
    }?;
    // A local file rewritten while it was read would commit a torn mix: refuse it.
    if file.remote.is_none() && !unchanged(&file.local_path, file.meta.size, file.meta.mtime_ms) {
        return Err(DecodeError::Changed {
            path: file.meta.path.clone(),
        });
    }
    Ok(stats)
}
