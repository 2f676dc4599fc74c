//! Reading a batch's files on every core into the table's writers, within a memory budget
//! for decoded rows.

use crate::pipeline::IngestError;
use crate::pipeline::run_context::RunContext;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{Array, RecordBatch};
use tokio::sync::mpsc;

use crate::flow::expect::Tally;
use crate::flow::{BoundFlow, Filtered, FlowError};
use crate::formats::{self, CarriedRows, DecodeError, FileStats, SourceFile};
use crate::record::{FileMeta, Records, RowsOrigin, TableLayout};
use crate::source::{self, FileLocation, FileRef, Source};
use crate::target::quarantine::{self, QuarantineTable, Stamp};
use crate::target::{BatchWriter, BatchWriters, Target, TargetError};
use crate::testing::{failpoint, read_delay};
use arrow_schema::SchemaRef;

use super::pool::{self, PoolStop, worker_count};

pub(crate) enum Msg {
    /// Decoded rows for the shared writer, with their share of [`IN_FLIGHT_MIB`].
    Batch(
        RecordBatch,
        Option<RowsOrigin>,
        tokio::sync::OwnedSemaphorePermit,
    ),
    /// Files read to their end (see [`DONE_EVERY`]).
    Done(Vec<(usize, FileStats)>),
    Failed {
        index: usize,
        error: DecodeError,
    },
    /// A decoding thread's own writer failed (a full disk): the batch cannot be written.
    WriteFailed(TargetError),
    /// The flow could not be evaluated over a decoded batch (a bug: it was bound to it),
    /// or a `fail` expectation failed a row.
    FlowFailed(IngestError),
    /// Rows for the quarantine table.
    Quarantine(RecordBatch),
}

/// What reading a batch's files wrote: the table's writers, and the quarantine's when a
/// rule quarantined rows (with the schema of its rows).
pub(crate) struct Written {
    pub writers: BatchWriters,
    pub quarantine: Option<(BatchWriter, SchemaRef)>,
}

impl Written {
    pub(crate) fn abort(self) {
        self.writers.abort();
        if let Some((w, _)) = self.quarantine {
            BatchWriters(vec![w]).abort();
        }
    }
}

/// How a read goes: whether it stops at new fields (see [`read_files`]), whether it
/// observes the records' types (one-pass inference), and where quarantined rows go.
pub(crate) struct ReadMode<'a> {
    pub stop_at_new_fields: bool,
    pub observe_types: bool,
    pub quarantine: Option<QuarantineTo<'a>>,
}

/// Where a read's quarantined rows go.
pub(crate) struct QuarantineTo<'a> {
    pub table: &'a QuarantineTable,
    pub stamp: Stamp,
}

/// What reading a batch's files gave: stats per file, or the first file that failed.
pub(crate) type ReadOutcome = Result<Vec<FileStats>, (usize, DecodeError)>;

/// Decoded rows (MiB of Arrow memory) that may wait for the shared writer at once; a
/// larger batch takes the whole budget, so it waits alone.
pub(crate) const IN_FLIGHT_MIB: usize = 64;

/// From this many bytes in a batch, each decoding thread encodes its own Parquet files.
pub(crate) const PARALLEL_ENCODE_BYTES: u64 = 64 << 20;

/// Below this many rows (or [`COALESCE_BYTES`]) a decoding thread gathers the rows of its
/// files before it hands them to the shared writer: a small file's few rows cost a
/// channel send, a wake-up and a Parquet write call of every column each, which made
/// 20,000 files of 4 rows spend most of their time in allocation and scheduling.
const COALESCE_ROWS: usize = 8192;
const COALESCE_BYTES: usize = 4 << 20;

/// A decoding thread reports the files it read this many at a time (and the rest when it
/// ends): a message per file woke the receiving side 20,000 times for 20,000 small files.
const DONE_EVERY: usize = 64;

/// A decoding thread's state: its own writer (a large batch), or the rows it gathers for
/// the shared one.
struct Worker {
    own: Option<BatchWriter>,
    /// Rows carried from file to file in one builder, where no batch needs to name its
    /// file (see [`CarriedRows`]); gathered with the rest at the end.
    carried: Option<CarriedRows>,
    gathered: Gathered,
    /// Files read and not yet reported.
    done: Vec<(usize, FileStats)>,
}

impl Worker {
    /// Notes a file read to its end; reports the files noted once there are enough.
    /// False when the receiving side is gone.
    fn done(&mut self, index: usize, stats: FileStats, tx: &mpsc::Sender<Msg>) -> bool {
        self.done.push((index, stats));
        self.done.len() < DONE_EVERY
            || tx
                .blocking_send(Msg::Done(std::mem::take(&mut self.done)))
                .is_ok()
    }
}

/// Decoded batches a decoding thread holds until they make one batch worth a write.
#[derive(Default)]
struct Gathered {
    batches: Vec<RecordBatch>,
    rows: usize,
    bytes: usize,
}

impl Gathered {
    fn push(&mut self, batch: RecordBatch) {
        self.rows += batch.num_rows();
        self.bytes += batch.get_array_memory_size();
        self.batches.push(batch);
    }

    fn is_full(&self) -> bool {
        self.rows >= COALESCE_ROWS || self.bytes >= COALESCE_BYTES
    }

    /// The gathered rows as one batch, when there are any.
    fn take(&mut self, schema: &SchemaRef) -> Result<Option<RecordBatch>, String> {
        let mut batches = std::mem::take(&mut self.batches);
        self.rows = 0;
        self.bytes = 0;
        match batches.len() {
            0 => Ok(None),
            1 => Ok(batches.pop()),
            _ => arrow_select::concat::concat_batches(schema, &batches)
                .map(Some)
                .map_err(|e| e.to_string()),
        }
    }
}

/// A batch's files, located for decoding with `layout`'s partition columns, with the
/// lineage their rows carry.
pub(crate) fn source_files(
    source: &Source,
    layout: &TableLayout,
    files: &[FileRef],
    stamp: Option<&crate::record::Stamp>,
) -> Vec<SourceFile> {
    let partition_columns: Vec<String> = layout.partition.names().map(str::to_string).collect();
    files
        .iter()
        .map(|f| source_file(source, f, &partition_columns, stamp))
        .collect()
}

/// A file of the source, located for decoding, with the lineage its rows carry.
pub(crate) fn source_file(
    source: &Source,
    file: &FileRef,
    partition_columns: &[String],
    stamp: Option<&crate::record::Stamp>,
) -> SourceFile {
    let key = file.key.as_str();
    let (local_path, remote) = match source.locate(key) {
        FileLocation::Local(path) => (path, None),
        FileLocation::Object(object) => (PathBuf::new(), Some(object)),
    };
    SourceFile {
        local_path,
        remote,
        meta: Arc::new(FileMeta {
            path: source.uri(key),
            name: file.name().to_string(),
            size: file.size,
            mtime_ms: file.mtime_ms,
            partition_values: source::partition_values(key, partition_columns),
            stamp: stamp.cloned(),
        }),
    }
}

/// Reads the files of a batch in parallel and writes their rows, returning the writers
/// that hold them (to commit or abort) and per-file stats; the inner error is the first
/// file that failed (the caller decides whether to skip it). With `stop_at_new_fields`,
/// reading stops at the first field the schema lacks (no further file is started, and
/// that file stops there): the stats are then partial, and the caller evolves and reads
/// the batch again.
///
/// A large batch of several files gives each decoding thread its own writer, so Parquet
/// encoding runs on every core; a small one streams into one writer on the async side, so
/// it still becomes one Parquet file.
pub(crate) async fn read_files(
    ctx: &RunContext<'_>,
    layout: &Arc<TableLayout>,
    files: &[SourceFile],
    skip: &[bool],
    sink: &dyn Target,
    mode: ReadMode<'_>,
) -> Result<(Written, ReadOutcome), IngestError> {
    let writers = ReadWriters::new(ctx, layout, files, skip, sink)?;
    read_with(ctx, layout, files, skip, writers, mode).await
}

/// A read's writers, made before it starts: making them is all a read asks of the
/// target, so a read can run while the target commits another batch (see
/// `pipeline/ahead.rs`).
pub(crate) struct ReadWriters {
    /// The flow, bound to this read's layout (an evolved schema moves the columns).
    flow: Option<Arc<BoundFlow>>,
    /// The rows' schema as the writers take them.
    schema: SchemaRef,
    shared: BatchWriter,
    /// Each decoding thread's own writer (a large batch), or none.
    own: Vec<Option<BatchWriter>>,
    encode_in_workers: bool,
}

impl ReadWriters {
    pub(crate) fn new(
        ctx: &RunContext<'_>,
        layout: &Arc<TableLayout>,
        files: &[SourceFile],
        skip: &[bool],
        sink: &dyn Target,
    ) -> Result<ReadWriters, IngestError> {
        let workers = worker_count(files.len());
        let bytes: u64 = files
            .iter()
            .zip(skip)
            .filter(|(_, s)| !**s)
            .map(|(f, _)| f.meta.size)
            .sum();
        let encode_in_workers = workers > 1 && bytes >= PARALLEL_ENCODE_BYTES;
        let decoded = layout.arrow_schema();
        let partition_columns: Vec<String> = layout.partition.names().map(str::to_string).collect();
        let keep_last = layout.trailing_names();
        // The writers take the table's columns.
        let flow: Option<Arc<BoundFlow>> = if ctx.req.flow.is_everything() {
            None
        } else {
            let bound = ctx
                .req
                .flow
                .bind(&decoded, &keep_last, ctx.req.settings.time_zone)?
                .rescued(layout.rescued.as_deref(), &decoded);
            Some(Arc::new(bound))
        };
        let schema = flow
            .as_ref()
            .map_or_else(|| Arc::clone(&decoded), |f| Arc::clone(f.schema()));
        let shared = sink.writer(&schema, &partition_columns, &keep_last)?;
        let mut own = Vec::with_capacity(workers);
        for _ in 0..workers {
            own.push(if encode_in_workers {
                Some(sink.writer(&schema, &partition_columns, &keep_last)?)
            } else {
                None
            });
        }
        Ok(ReadWriters {
            flow,
            schema,
            shared,
            own,
            encode_in_workers,
        })
    }

    /// Whether every writer holds its rows in memory until the commit (a CDC target):
    /// such a read leaves nothing behind when it is thrown away.
    pub(crate) fn holds_rows(&self) -> bool {
        matches!(self.shared, BatchWriter::Collect(_))
            && self
                .own
                .iter()
                .flatten()
                .all(|w| matches!(w, BatchWriter::Collect(_)))
    }

    /// Writers never written to are let go (a table's writer has no file yet).
    pub(crate) fn abort(self) {
        let mut all = vec![self.shared];
        all.extend(self.own.into_iter().flatten());
        BatchWriters(all).abort();
    }
}

/// Reads `files` into `writers` (see [`read_files`]).
///
/// Long because it runs the decoding pool and its consumer in one place: the memory
/// budget, the stop flag and the per-file results are shared by both sides.
pub(crate) async fn read_with(
    ctx: &RunContext<'_>,
    layout: &Arc<TableLayout>,
    files: &[SourceFile],
    skip: &[bool],
    writers: ReadWriters,
    mode: ReadMode<'_>,
) -> Result<(Written, ReadOutcome), IngestError> {
    let ReadMode {
        stop_at_new_fields,
        observe_types,
        quarantine: quarantine_to,
    } = mode;
    let ReadWriters {
        flow,
        schema,
        mut shared,
        own,
        encode_in_workers,
    } = writers;
    let workers = own.len();
    let keep_last = layout.trailing_names();
    // Only a target that holds the rows until its commit (CDC) keeps their origins.
    let keep_origins = matches!(shared, BatchWriter::Collect(_));
    // Room for every batch the memory budget lets wait (each holds at least 1 MiB of
    // it): a read running beside a commit goes on while the commit computes.
    let (tx, mut rx) = mpsc::channel::<Msg>(workers * 2 + IN_FLIGHT_MIB);
    let stop = PoolStop::default();
    let files_arc: Arc<Vec<SourceFile>> = Arc::new(files.to_vec());
    let skip_arc: Arc<Vec<bool>> = Arc::new(skip.to_vec());
    let runtime = tokio::runtime::Handle::current();
    let in_flight = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT_MIB));
    let mut opts = ctx.opts.clone();
    opts.stop_at_new_fields = stop_at_new_fields;
    opts.observe_types =
        observe_types.then(|| ctx.opts.infer_options(ctx.req.settings.infer_column_types));
    let layout = Arc::clone(layout);
    // Rows go on from file to file in one builder unless a batch must name its file (the
    // flow's errors and quarantined rows, a CDC target's record numbers) or is written
    // on the decoding thread.
    let carry_rows = flow.is_none() && !keep_origins && !encode_in_workers;
    // Each worker's state: in a large batch, its own writer. The sender lives in the work
    // closure, so the channel closes once every worker has ended.
    let mut states = Vec::with_capacity(workers);
    for own in own {
        states.push(Worker {
            own,
            carried: carry_rows.then(CarriedRows::default),
            gathered: Gathered::default(),
            done: Vec::new(),
        });
    }
    let gather_schema = Arc::clone(&schema);
    let worker_stop = stop.clone();
    let stamp = quarantine_to.as_ref().map(|q| q.stamp);
    let handles = pool::spawn(
        files.len(),
        states,
        &stop,
        move |worker: &mut Worker, index| {
            let file = &files_arc[index];
            if skip_arc[index] {
                return worker.done(index, FileStats::default(), &tx);
            }
            if failpoint::armed() {
                failpoint::hit(&failpoint::read_point(&file.meta.name));
            }
            read_delay::before_read();
            let mut write_error = None;
            let mut flow_error: Option<IngestError> = None;
            let mut filtered = Filtered::default();
            let mut quality = Tally::default();
            let file_uri: Arc<str> = Arc::from(file.meta.path.as_str());
            let mut records_read = 0u64;
            let mut emit = |b: RecordBatch| {
                let first = records_read + 1;
                records_read += b.num_rows() as u64;
                let origin = |kept: Option<arrow_array::BooleanArray>| {
                    keep_origins.then(|| RowsOrigin {
                        file: Arc::clone(&file_uri),
                        records: match kept {
                            None => Records::From(first),
                            Some(k) => Records::Each(
                                (0..k.len())
                                    .filter(|&i| k.is_valid(i) && k.value(i))
                                    .map(|i| first + i as u64)
                                    .collect(),
                            ),
                        },
                    })
                };
                let (b, origin) = match flow.as_deref() {
                    None => (b, origin(None)),
                    Some(flow) => match flow.apply(b) {
                        Ok(applied) => {
                            filtered.rows += applied.filtered.rows;
                            filtered.rescued_rows += applied.filtered.rescued_rows;
                            quality.add(&applied.quality);
                            if let Some(q) = applied.quarantine {
                                let rows = match stamp {
                                    Some(stamp) => quarantine::rows(q, &file_uri, first, stamp)
                                        .map_err(|e| IngestError::Internal(e.to_string())),
                                    None => Err(IngestError::Internal(
                                        "rows to quarantine and no quarantine table".into(),
                                    )),
                                };
                                match rows {
                                    Ok(rows) => {
                                        if tx.blocking_send(Msg::Quarantine(rows)).is_err() {
                                            return false;
                                        }
                                    }
                                    Err(e) => {
                                        flow_error = Some(e);
                                        return false;
                                    }
                                }
                            }
                            if applied.batch.num_rows() == 0 {
                                return true;
                            }
                            (applied.batch, origin(applied.kept))
                        }
                        Err(FlowError::Violated(v)) => {
                            flow_error = Some(IngestError::ExpectationFailed(Box::new(
                                crate::pipeline::ExpectationFailure {
                                    rule: v.rule,
                                    check: v.check,
                                    file: file_uri.to_string(),
                                    record: first + v.row as u64,
                                    values: v.values,
                                },
                            )));
                            return false;
                        }
                        Err(FlowError::Computed { what, row, message }) => {
                            flow_error = Some(IngestError::ComputeFailed(Box::new(
                                crate::pipeline::ComputeFailure {
                                    what,
                                    file: file_uri.to_string(),
                                    record: row.map(|r| first + r as u64),
                                    message,
                                },
                            )));
                            return false;
                        }
                        Err(e) => {
                            flow_error = Some(IngestError::Internal(e.to_string()));
                            return false;
                        }
                    },
                };
                // Rows without an origin to keep, in the read's schema, are gathered; the
                // gathered rows go on as one batch once there are enough.
                let b = if worker.own.is_none()
                    && origin.is_none()
                    && (Arc::ptr_eq(&b.schema(), &gather_schema) || *b.schema() == *gather_schema)
                {
                    worker.gathered.push(b);
                    if !worker.gathered.is_full() {
                        return true;
                    }
                    match worker.gathered.take(&gather_schema) {
                        Ok(Some(b)) => b,
                        Ok(None) => return true,
                        Err(e) => {
                            flow_error = Some(IngestError::Internal(e));
                            return false;
                        }
                    }
                } else {
                    b
                };
                match worker.own.as_mut() {
                    // A blocking thread may wait on the runtime: the write encodes here, and
                    // only its file I/O goes through the runtime.
                    Some(w) => match runtime.block_on(w.write_from(b, origin)) {
                        Ok(()) => true,
                        Err(e) => {
                            write_error = Some(e);
                            false
                        }
                    },
                    None => {
                        // Decoded batches wait for the writer within a memory budget, so a
                        // file of huge records does not queue several of them.
                        let mib = (b.get_array_memory_size() >> 20).clamp(1, IN_FLIGHT_MIB);
                        match runtime
                            .block_on(Arc::clone(&in_flight).acquire_many_owned(mib as u32))
                        {
                            Ok(permit) => tx.blocking_send(Msg::Batch(b, origin, permit)).is_ok(),
                            Err(_) => false,
                        }
                    }
                }
            };
            let decoded =
                formats::decode_file(file, &opts, &layout, worker.carried.as_mut(), &mut emit);
            let msg = match (decoded, write_error, flow_error) {
                (_, Some(error), _) => Msg::WriteFailed(error),
                (_, None, Some(error)) => Msg::FlowFailed(error),
                (Ok(mut stats), None, None) => {
                    stats.filtered = filtered;
                    stats.quality = quality;
                    if stop_at_new_fields && stats.new_fields {
                        worker_stop.stop();
                    }
                    return worker.done(index, stats, &tx);
                }
                (Err(error), None, None) => Msg::Failed { index, error },
            };
            tx.blocking_send(msg).is_ok()
        },
    );
    let mut stats: Vec<FileStats> = vec![FileStats::default(); files.len()];
    let note_done = |stats: &mut Vec<FileStats>, done: Vec<(usize, FileStats)>| {
        for (index, s) in done {
            ctx.progress.file_done(files[index].meta.size);
            stats[index] = s;
        }
    };
    let mut failure: Option<(usize, DecodeError)> = None;
    let mut write_failure: Option<TargetError> = None;
    let mut flow_failure: Option<IngestError> = None;
    let mut quarantine_writer: Option<(BatchWriter, SchemaRef)> = None;
    let mut written_batches = 0u64;
    while let Some(msg) = rx.recv().await {
        match msg {
            Msg::Batch(b, origin, _permit) => {
                if failure.is_none() && write_failure.is_none() && flow_failure.is_none() {
                    if let Err(e) = shared.write_from(b, origin).await {
                        write_failure = Some(e);
                        stop.stop();
                        continue;
                    }
                    written_batches += 1;
                    if written_batches == 1 {
                        failpoint::hit("mid-read");
                    }
                }
            }
            Msg::Done(done) => note_done(&mut stats, done),
            Msg::Failed { index, error } => {
                if failure.is_none() {
                    failure = Some((index, error));
                    stop.stop();
                }
            }
            Msg::WriteFailed(e) => {
                if write_failure.is_none() {
                    write_failure = Some(e);
                    stop.stop();
                }
            }
            Msg::FlowFailed(e) => {
                if flow_failure.is_none() {
                    flow_failure = Some(e);
                    stop.stop();
                }
            }
            Msg::Quarantine(rows) => {
                if write_failure.is_some() || flow_failure.is_some() {
                    continue;
                }
                let result = match (&mut quarantine_writer, &quarantine_to) {
                    (Some((w, _)), _) => w.write(rows).await,
                    (None, Some(to)) => {
                        let schema = rows.schema();
                        match to.table.writer(&schema, &quarantine::keep_last(&keep_last)) {
                            Ok(mut w) => {
                                let r = w.write(rows).await;
                                quarantine_writer = Some((w, schema));
                                r
                            }
                            Err(e) => Err(e),
                        }
                    }
                    (None, None) => Ok(()),
                };
                if let Err(e) = result {
                    write_failure = Some(e);
                    stop.stop();
                }
            }
        }
    }
    // Each thread's own writer, and the rows it gathered last (written unless the read
    // failed, when they would be thrown away with the rest).
    let mut own_writers = Vec::new();
    for h in handles {
        let mut worker = h
            .await
            .map_err(|e| IngestError::Internal(format!("decoder thread failed: {e}")))?;
        note_done(&mut stats, std::mem::take(&mut worker.done));
        if let Some(carried) = worker.carried.as_mut().and_then(CarriedRows::take_batch) {
            worker.gathered.push(carried);
        }
        let last = match worker.gathered.take(&schema) {
            Ok(last) => last,
            Err(e) => {
                flow_failure.get_or_insert(IngestError::Internal(e));
                None
            }
        };
        if let Some(b) = last
            && failure.is_none()
            && write_failure.is_none()
            && flow_failure.is_none()
        {
            match shared.write(b).await {
                Ok(()) => {
                    written_batches += 1;
                    if written_batches == 1 {
                        failpoint::hit("mid-read");
                    }
                }
                Err(e) => write_failure = Some(e),
            }
        }
        own_writers.extend(worker.own);
    }
    let mut writers = BatchWriters(vec![shared]);
    writers.0.extend(own_writers);
    let written = Written {
        writers,
        quarantine: quarantine_writer,
    };
    if let Some(e) = write_failure {
        written.abort();
        return Err(e.into());
    }
    if let Some(e) = flow_failure {
        written.abort();
        return Err(e);
    }
    if encode_in_workers {
        // The rows are in the writers' files, not committed: what "mid-read" tests.
        failpoint::hit("mid-read");
    }
    Ok((
        written,
        match failure {
            Some(f) => Err(f),
            None => Ok(stats),
        },
    ))
}
