//! Reading the next batch's files while this batch commits (a CDC target).
//!
//! A CDC target holds a batch's rows until its commit, and the commit (the merge, the
//! flow's state) is where its batches spend most of their time, mostly on one core. The
//! next batch's files are decoded meanwhile on the other. That read is the next batch's
//! first read, made before its plan is recorded: it writes nothing (its writers hold the
//! rows in memory), so a death, a stop, or a layout the batch no longer reads with throws
//! it away, and the batch reads its files again as planned. Nothing of the exactly-once
//! order changes: the plan is still recorded before the batch commits, the commit still
//! carries its `txn`, and the mark still follows it.

use std::sync::Arc;

use crate::pipeline::IngestError;
use crate::pipeline::read::{ReadMode, ReadOutcome, ReadWriters, Written, read_with, source_files};
use crate::pipeline::run_context::RunContext;
use crate::record::TableLayout;
use crate::source::FileRef;
use crate::target::Target;

/// At most this many bytes of files are read ahead: their rows wait in memory beside
/// the batch being committed.
pub(crate) const READ_AHEAD_BYTES: u64 = 256 << 20;

/// What a run's loop hands each batch, and takes back from it.
#[derive(Default)]
pub(crate) struct Ahead {
    /// The files of the batch after this one, where they may be read ahead.
    pub(crate) next: Option<Vec<FileRef>>,
    /// The read made for this batch while the one before it committed.
    pub(crate) made: Option<ReadAhead>,
}

impl Ahead {
    /// Lets a read made for a batch that will not run go.
    pub(crate) fn discard(&mut self) {
        if let Some(made) = self.made.take() {
            made.discard();
        }
    }
}

/// A batch's files read before its turn.
pub(crate) struct ReadAhead {
    keys: Vec<String>,
    layout: Arc<TableLayout>,
    stop_at_new_fields: bool,
    read: Result<(Written, ReadOutcome), IngestError>,
}

impl ReadAhead {
    /// The read, if it is the one `files` would get now: the same files with the same
    /// layout (the same `Arc`: an evolved or settled schema is a new one) and the same
    /// stop at new fields. A read that failed is not used: the batch reads again and
    /// meets the failure (or not) as planned.
    pub(crate) fn take_for(
        self,
        files: &[FileRef],
        layout: &Arc<TableLayout>,
        stop_at_new_fields: bool,
    ) -> Option<(Written, ReadOutcome)> {
        let same = self.keys.len() == files.len()
            && self.keys.iter().zip(files).all(|(k, f)| *k == f.key)
            && Arc::ptr_eq(&self.layout, layout)
            && self.stop_at_new_fields == stop_at_new_fields;
        match self.read {
            Ok(read) if same => Some(read),
            Ok((written, _)) => {
                written.abort();
                None
            }
            Err(_) => None,
        }
    }

    /// Lets the read go (a batch that will not use it).
    pub(crate) fn discard(self) {
        if let Ok((written, _)) = self.read {
            written.abort();
        }
    }
}

/// A read of `files` set up to run beside a commit: only where the target holds its
/// rows in memory, the files are at most [`READ_AHEAD_BYTES`], and the layout is settled.
pub(crate) struct Prepared {
    keys: Vec<String>,
    layout: Arc<TableLayout>,
    files: Vec<crate::formats::SourceFile>,
    skip: Vec<bool>,
    writers: ReadWriters,
    stop_at_new_fields: bool,
}

impl Prepared {
    pub(crate) fn new(
        ctx: &RunContext<'_>,
        layout: &Arc<TableLayout>,
        files: Vec<FileRef>,
        sink: &dyn Target,
        stop_at_new_fields: bool,
    ) -> Option<Prepared> {
        let bytes: u64 = files.iter().map(|f| f.size).sum();
        if files.is_empty() || bytes > READ_AHEAD_BYTES {
            return None;
        }
        let sources = source_files(&ctx.req.source, layout, &files, None);
        let skip = vec![false; sources.len()];
        let writers = ReadWriters::new(ctx, layout, &sources, &skip, sink).ok()?;
        if !writers.holds_rows() {
            writers.abort();
            return None;
        }
        Some(Prepared {
            keys: files.into_iter().map(|f| f.key).collect(),
            layout: Arc::clone(layout),
            files: sources,
            skip,
            writers,
            stop_at_new_fields,
        })
    }

    /// Runs the read (its decoding threads go on while the caller awaits a commit).
    pub(crate) async fn read(self, ctx: &RunContext<'_>) -> ReadAhead {
        let mode = ReadMode {
            stop_at_new_fields: self.stop_at_new_fields,
            observe_types: false,
            quarantine: None,
        };
        let read = read_with(
            ctx,
            &self.layout,
            &self.files,
            &self.skip,
            self.writers,
            mode,
        )
        .await;
        ReadAhead {
            keys: self.keys,
            layout: self.layout,
            stop_at_new_fields: self.stop_at_new_fields,
            read,
        }
    }
}
