//! Where a decoder's rows go, so that a decoder is its parsing and nothing else.
//!
//! Arrow's push-then-flush shape: a decoder pushes rows (or whole batches it read), and
//! the sink cuts them into batches of the stream's layout, hands each batch to the
//! caller's `emit` callback as soon as it is full, counts what it handed over in the
//! file's [`FileStats`], stops early when asked to, and tears down at the end of the file.
//!
//! - [`Sink`] is the output side every decoder shares: a batch of the layout handed to
//!   `emit` (a refusal is [`DecodeError::Cancelled`]), or a batch in the file's own
//!   columns made one of the layout first ([`Sink::push_batch`]: Parquet, Avro, ORC,
//!   binaryFile).
//! - [`RowSink`] holds the rows being built (a [`RowBuilder`] for CSV, JSON and XML, the
//!   text format's own column for text) and flushes them every [`BATCH_ROWS`] rows or
//!   [`BATCH_BYTES`] bytes of input, and around a record of [`LARGE_RECORD_BYTES`] or
//!   more, which gets a batch of its own so that it is written during its turn.

use std::sync::Arc;

use arrow_array::RecordBatch;

use super::{
    BATCH_BYTES, BATCH_ROWS, DecodeError, DecodeOptions, FileStats, LARGE_RECORD_BYTES, SourceFile,
};
use crate::record::{RowBuilder, TableLayout};
use crate::schema::infer::{InferOptions, SchemaInferrer};

/// The output of decoding one file: each batch handed to `emit`, and the file's stats.
pub(crate) struct Sink<'a> {
    file: &'a SourceFile,
    opts: &'a DecodeOptions,
    layout: &'a Arc<TableLayout>,
    emit: &'a mut dyn FnMut(RecordBatch) -> bool,
    pub(crate) stats: FileStats,
}

impl<'a> Sink<'a> {
    pub(crate) fn new(
        file: &'a SourceFile,
        opts: &'a DecodeOptions,
        layout: &'a Arc<TableLayout>,
        emit: &'a mut dyn FnMut(RecordBatch) -> bool,
    ) -> Self {
        Sink {
            file,
            opts,
            layout,
            emit,
            stats: FileStats::default(),
        }
    }

    /// The file's path, as errors name it.
    pub(crate) fn path(&self) -> &'a str {
        self.file.meta.path.as_str()
    }

    /// Hands a batch of the layout over; the caller refusing it stops the file.
    fn emit(&mut self, batch: RecordBatch) -> Result<(), DecodeError> {
        if (self.emit)(batch) {
            Ok(())
        } else {
            Err(DecodeError::Cancelled {
                path: self.path().to_string(),
            })
        }
    }

    /// A batch in the file's own columns as a batch of the layout (see
    /// [`super::conform::conform`]), its rows counted.
    pub(crate) fn conform(&mut self, batch: &RecordBatch) -> Result<RecordBatch, DecodeError> {
        let out =
            super::conform::conform(batch, self.file, self.opts, self.layout, &mut self.stats)?;
        self.stats.rows += batch.num_rows() as u64;
        Ok(out)
    }

    /// Makes a batch read in the file's own columns one of the layout and hands it over.
    pub(crate) fn push_batch(&mut self, batch: &RecordBatch) -> Result<(), DecodeError> {
        let out = self.conform(batch)?;
        self.emit(out)
    }

    /// The rows handed over so far.
    pub(crate) fn rows(&self) -> u64 {
        self.stats.rows
    }

    /// The stats of a file read to its end.
    pub(crate) fn finish(mut self) -> FileStats {
        self.stats.new_fields |= !self.stats.unknown_names.is_empty();
        self.stats
    }

    /// [`Sink::finish`] for a file that says how many rows it holds: reading fewer or more
    /// is the error `mismatch` makes of the count read.
    pub(crate) fn finish_expecting(
        self,
        expected: u64,
        mismatch: impl FnOnce(u64) -> DecodeError,
    ) -> Result<FileStats, DecodeError> {
        if self.rows() != expected {
            return Err(mismatch(self.rows()));
        }
        Ok(self.finish())
    }
}

/// Rows being built for the next batch.
pub(crate) trait Rows {
    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows built so far as a batch of the layout, counted in `sink`'s stats; starts
    /// the next batch.
    fn take_batch(&mut self, sink: &mut Sink<'_>) -> Result<RecordBatch, DecodeError>;
}

/// A [`RowBuilder`]'s rows are counted per file when the file ends ([`RowSink::finish`]):
/// a batch may hold rows of the files before it ([`CarriedRows`]).
impl Rows for RowBuilder {
    fn len(&self) -> usize {
        RowBuilder::len(self)
    }

    fn take_batch(&mut self, _sink: &mut Sink<'_>) -> Result<RecordBatch, DecodeError> {
        Ok(self.finish())
    }
}

/// Rows a decoding thread carries from one file into the next, so that small files' rows
/// become one batch without a batch (a set of builders, their arrays, a concatenation)
/// per file: 20,000 files of 4 rows spent half their time there. Only for rows whose batch
/// need not name one file (no `where`, no expectations, no record numbers kept).
#[derive(Default)]
pub struct CarriedRows {
    rows: Option<RowBuilder>,
    /// Input bytes of the rows carried.
    pending: usize,
}

impl CarriedRows {
    /// The rows carried so far as one batch of the layout, when there are any.
    pub fn take_batch(&mut self) -> Option<RecordBatch> {
        self.pending = 0;
        let rows = self.rows.as_mut()?;
        (!rows.is_empty()).then(|| rows.finish())
    }
}

/// Rows pushed one record at a time, handed over a batch at a time.
pub(crate) struct RowSink<'a, R: Rows = RowBuilder> {
    /// The rows of the batch being built: a decoder appends each record here, then calls
    /// [`RowSink::pushed`].
    pub(crate) rows: R,
    pub(crate) out: Sink<'a>,
    /// Input bytes of the rows in `rows`.
    pending: usize,
    /// Types observed as schema inference observes them (one-pass inference of a first
    /// batch), when the decoder was asked to ([`RowSink::observe_types`]).
    pub(crate) observed: Option<(SchemaInferrer, InferOptions)>,
    /// The file stopped at its first field the schema lacks ([`RowSink::stop_at_new_fields`]).
    stopped: bool,
    /// Where the rows left at the end of the file go instead of a batch of their own.
    carry: Option<&'a mut CarriedRows>,
}

impl<'a> RowSink<'a, RowBuilder> {
    /// A sink whose rows are built by a [`RowBuilder`] of the layout (CSV, JSON, XML); with
    /// `carry`, the rows carried from the files before go on in the same builder, and the
    /// file's last rows are carried on rather than handed over.
    pub(crate) fn new(
        file: &'a SourceFile,
        opts: &'a DecodeOptions,
        layout: &'a Arc<TableLayout>,
        carry: Option<&'a mut CarriedRows>,
        emit: &'a mut dyn FnMut(RecordBatch) -> bool,
    ) -> Self {
        // Rows carried in another layout stay where they are (their owner hands them
        // over), and this file's rows go out on their own.
        let mut carry = carry.filter(|c| {
            c.rows
                .as_ref()
                .is_none_or(|rows| Arc::ptr_eq(rows.layout(), layout))
        });
        let carried = carry
            .as_mut()
            .and_then(|c| c.rows.take().map(|rows| (rows, c.pending)));
        let (rows, pending) = match carried {
            Some((mut rows, pending)) => {
                rows.next_file(Arc::clone(&file.meta));
                (rows, pending)
            }
            None => (
                RowBuilder::new(Arc::clone(layout), opts.ctx, Arc::clone(&file.meta)),
                0,
            ),
        };
        let mut sink = RowSink::with_rows(rows, Sink::new(file, opts, layout, emit));
        sink.pending = pending;
        sink.carry = carry;
        sink
    }

    /// Also observes every record's types, as [`DecodeOptions::observe_types`] asks (for
    /// the formats that infer from records as they decode them: JSON lines and CSV).
    pub(crate) fn observe_types(&mut self) {
        self.observed = self
            .out
            .opts
            .observe_types
            .map(|o| (SchemaInferrer::new(), o));
    }

    /// With [`DecodeOptions::stop_at_new_fields`], stops reading at the first record that
    /// has a field the schema lacks: the batch is about to be evolved and read again. The
    /// error it returns stops the reading loop, and [`RowSink::finish`] takes it for the
    /// end of the file.
    #[inline]
    pub(crate) fn stop_at_new_fields(&mut self) -> Result<(), DecodeError> {
        if self.out.opts.stop_at_new_fields && self.rows.saw_new_fields() {
            self.stopped = true;
            return Err(DecodeError::Cancelled {
                path: self.out.path().to_string(),
            });
        }
        Ok(())
    }

    /// Ends the file once `read` (the reading loop's result) is over: the last rows handed
    /// over, and what the rows saw put into the stats. A file stopped at new fields
    /// ([`RowSink::stop_at_new_fields`]) hands nothing more over and says which names
    /// were new.
    pub(crate) fn finish(
        mut self,
        read: Result<(), DecodeError>,
    ) -> Result<FileStats, DecodeError> {
        self.out.stats.rows += self.rows.file_rows() as u64;
        self.out.stats.rescued_rows += self.rows.rescued_rows() as u64;
        match read {
            Err(DecodeError::Cancelled { .. }) if self.stopped => {
                let mut stats = self.out.stats;
                stats.unknown_names = self.rows.unknown_names().to_vec();
                stats.new_fields = true;
                return Ok(stats);
            }
            other => other?,
        }
        if self.carry.is_none() && !self.rows.is_empty() {
            self.flush()?;
        }
        let mut stats = self.out.stats;
        stats.dropped_values = self.rows.dropped_values();
        stats.unknown_names = self.rows.unknown_names().to_vec();
        stats.new_fields = self.rows.saw_new_fields();
        stats.rescue = self.rows.rescue_stats().clone();
        stats.observed = self.observed.map(|(inferrer, _)| inferrer);
        if let Some(carry) = self.carry {
            carry.rows = Some(self.rows);
            carry.pending = self.pending;
        }
        Ok(stats)
    }
}

impl<'a, R: Rows> RowSink<'a, R> {
    pub(crate) fn with_rows(rows: R, out: Sink<'a>) -> Self {
        RowSink {
            rows,
            out,
            pending: 0,
            observed: None,
            stopped: false,
            carry: None,
        }
    }

    /// Before a record of `bytes` is pushed: whether it is large (see
    /// [`LARGE_RECORD_BYTES`]; read during this thread's turn). A large record is decoded
    /// and written as a batch of its own, so the rows before it are handed over first.
    #[inline]
    pub(crate) fn large(&mut self, bytes: usize) -> Result<bool, DecodeError> {
        let large = bytes >= LARGE_RECORD_BYTES;
        if large && !self.rows.is_empty() {
            self.flush()?;
        }
        Ok(large)
    }

    /// Counts a record of `bytes` just appended to `rows` (as one row, several, or none),
    /// and hands the batch over once it is full, or at once when `alone` (a large
    /// record's batch of its own).
    #[inline]
    pub(crate) fn pushed(&mut self, bytes: usize, alone: bool) -> Result<(), DecodeError> {
        self.pending += bytes;
        if alone || self.rows.len() >= BATCH_ROWS || self.pending >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Hands the rows built so far over as one batch.
    pub(crate) fn flush(&mut self) -> Result<(), DecodeError> {
        self.pending = 0;
        let batch = self.rows.take_batch(&mut self.out)?;
        self.out.emit(batch)
    }

    /// Hands the last rows over and returns the stats of a file read to its end, for rows
    /// that see nothing of their own (text).
    pub(crate) fn finish_rows(mut self) -> Result<FileStats, DecodeError> {
        if !self.rows.is_empty() {
            self.flush()?;
        }
        Ok(self.out.finish())
    }
}
