//! What every decoder shares: batch sizes, the large-record turn, a source file and its figures, the decode options, and the error that names the file. The decoders and the dispatch in `mod.rs` read these; they use none of them.

use crate::options::{Format, Settings};
use crate::record::{FileMeta, ReadContext};
use crate::schema::infer::{InferOptions, SchemaInferrer};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// Rows per output batch (a batch is also cut at [`BATCH_BYTES`] of input).
pub const BATCH_ROWS: usize = 8192;
/// Input bytes per output batch, so that wide records keep memory bounded too.
pub const BATCH_BYTES: usize = 32 << 20;

/// From this size on, a record is decoded and written on its own, one such record at a
/// time in the process. A record of tens of megabytes is held four times over on its way
/// to Parquet (line, Arrow column, encoded page, compressed page): two of them at once on
/// two decoding threads peaked at 750 MiB for 60 MB lines; taking turns keeps the peak
/// under the 512 MiB budget whatever the line size (up to `maxRecordBytes`).
pub const LARGE_RECORD_BYTES: usize = 8 << 20;

static LARGE_RECORDS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Waits for this thread's turn to decode and write a large record.
pub fn large_record_turn() -> std::sync::MutexGuard<'static, ()> {
    LARGE_RECORDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A file that could not be decoded. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("{path} was deleted after it was listed")]
    Missing { path: String },
    #[error("{path} is corrupt{}: {reason}", line.map(|l| format!(" at line {l}")).unwrap_or_default())]
    Corrupt {
        path: String,
        line: Option<u64>,
        reason: String,
    },
    #[error("{path} line {line}: record is longer than cloudFiles.maxRecordBytes ({limit} bytes)")]
    RecordTooLong {
        path: String,
        line: u64,
        limit: usize,
    },
    #[error(
        "{path} is longer than cloudFiles.maxRecordBytes ({limit} bytes), the most one \
         binaryFile row holds (the whole file); raise it to ingest files this large"
    )]
    FileTooLong { path: String, limit: usize },
    #[error(
        "{path} expands to more than cloudFiles.maxDecompressedBytes ({limit} bytes) when \
         decompressed; a decompression bomb? raise the limit if the file is genuine"
    )]
    DecompressedTooLarge { path: String, limit: u64 },
    #[error("{path} line {line}: malformed record (mode=FAILFAST): {reason}")]
    Malformed {
        path: String,
        line: u64,
        reason: String,
    },
    #[error("ingestion stopped while reading {path}")]
    Cancelled { path: String },
    #[error(
        "{path} changed while it was being read (size or modification time); nothing of this \
         batch was committed: run again to ingest its current content"
    )]
    Changed { path: String },
}

impl DecodeError {
    /// Whether `ignoreCorruptFiles` may skip the file that caused this error.
    pub fn is_corrupt_file(&self) -> bool {
        matches!(
            self,
            DecodeError::Corrupt { .. }
                | DecodeError::Io { .. }
                | DecodeError::RecordTooLong { .. }
                | DecodeError::FileTooLong { .. }
                | DecodeError::DecompressedTooLarge { .. }
        )
    }
}

/// A file to decode: where to read it and what lineage it carries.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub local_path: PathBuf,
    /// Set for object-store sources: the object is fetched to a temporary file first.
    pub remote: Option<crate::storage::RemoteObject>,
    pub meta: Arc<FileMeta>,
}

/// What decoding one file produced.
#[derive(Debug, Default, Clone)]
pub struct FileStats {
    pub rows: u64,
    pub rescued_rows: u64,
    /// Rows of `rows` (and of `rescued_rows`) the flow's `where` left out of the table.
    pub filtered: crate::flow::Filtered,
    /// What the flow's expectations made of the rows `where` kept.
    pub quality: crate::flow::expect::Tally,
    /// Values that did not fit and had no rescued-data column to go to.
    pub dropped_values: u64,
    /// Top-level names in the data that the schema does not have.
    pub unknown_names: Vec<String>,
    /// Whether the file has fields the schema lacks (top level or nested): the trigger
    /// for an evolution check.
    pub new_fields: bool,
    /// What was rescued, per key and reason.
    pub rescue: crate::record::RescueStats,
    /// The types of every record, as inference sees them, when asked for with
    /// [`DecodeOptions::observe_types`] and the whole file was read.
    pub observed: Option<SchemaInferrer>,
}

/// Per-decode parameters derived from settings.
#[derive(Debug, Clone)]
pub struct DecodeOptions {
    pub format: Format,
    pub ctx: ReadContext,
    pub multi_line: bool,
    pub fail_fast: bool,
    pub max_record_bytes: usize,
    pub max_decompressed_bytes: u64,
    pub max_nesting_depth: usize,
    pub csv: crate::options::CsvSettings,
    pub json: crate::options::JsonSettings,
    pub text: crate::options::TextSettings,
    pub xml: crate::options::XmlSettings,
    /// Stop reading a file at its first field the schema lacks (the batch is about to be
    /// evolved and read again, so the rest would be read for nothing).
    pub stop_at_new_fields: bool,
    /// Also observe every record's types as schema inference does (JSON lines and CSV),
    /// so the first batch is read and inferred in one pass.
    pub observe_types: Option<InferOptions>,
}

impl DecodeOptions {
    pub fn new(format: Format, settings: &Settings) -> Self {
        DecodeOptions {
            format,
            ctx: ReadContext {
                zone: settings.time_zone,
                case_sensitive: settings.reader_case_sensitive,
                temporal: settings.temporal,
                singleton_arrays: format == Format::Xml,
            },
            multi_line: settings.multi_line,
            fail_fast: settings.fail_fast,
            max_record_bytes: settings.max_record_bytes,
            max_decompressed_bytes: settings.max_decompressed_bytes,
            max_nesting_depth: settings.max_nesting_depth,
            csv: settings.csv.clone(),
            json: settings.json.clone(),
            text: settings.text.clone(),
            xml: settings.xml.clone(),
            stop_at_new_fields: false,
            observe_types: None,
        }
    }

    pub fn infer_options(&self, typed: bool) -> InferOptions {
        InferOptions {
            typed,
            zone: self.ctx.zone,
            max_depth: self.max_nesting_depth,
            primitives_as_string: self.json.primitives_as_string,
            prefers_decimal: self.json.prefers_decimal,
            temporal: self.ctx.temporal,
            xml: self.format == Format::Xml,
        }
    }
}
