//! Reading the next batches' files while this batch commits (a CDC target).
//!
//! A CDC target holds a batch's rows until its commit, and the commit (the merge, the
//! flow's state) is where its batches spend most of their time, mostly on one core. The
//! next batch's files are decoded meanwhile on the other, and the batch after it too: a
//! read that only the commit ran beside left a core idle whenever the commit ended
//! first (a first load's append commits faster than one core decodes its file), while
//! the read of the batch after it keeps going through the next commit. Such a read is
//! its batch's first read, made before its plan is recorded: it writes nothing (its
//! writers hold the rows in memory), so a death, a stop, or a layout the batch no longer
//! reads with throws it away, and the batch reads its files again as planned. Nothing of
//! the exactly-once order changes: the plan is still recorded before the batch commits,
//! the commit still carries its `txn`, and the mark still follows it.

use std::sync::Arc;

use futures::future::{BoxFuture, Either};
use tracing::debug;

use crate::pipeline::IngestError;
use crate::pipeline::read::{ReadMode, ReadOutcome, ReadWriters, Written, read_with, source_files};
use crate::pipeline::run_context::RunContext;
use crate::record::TableLayout;
use crate::source::FileRef;
use crate::target::Target;

/// At most this many bytes of files are read ahead: their rows wait in memory beside
/// the batch being committed.
pub(crate) const READ_AHEAD_BYTES: u64 = 256 << 20;

/// What a run's loop hands each batch, and takes back from it. `'a`: the run's context,
/// which a read still going from one batch to the next borrows.
#[derive(Default)]
pub(crate) struct Ahead<'a> {
    /// The files of the batches after this one (the next, and the one after it), where
    /// they may be read ahead.
    pub(crate) next: Vec<Vec<FileRef>>,
    /// The read made for this batch while the one before it committed.
    pub(crate) made: Option<ReadAhead>,
    /// The read of the batch after the next one, started beside this batch's commit: it
    /// goes on through the next batch's commit.
    going: Option<Going<'a>>,
}

/// A read started ahead that may still be running.
struct Going<'a> {
    keys: Vec<String>,
    layout: Arc<TableLayout>,
    read: Either<BoxFuture<'a, ReadAhead>, ReadAhead>,
}

impl Going<'_> {
    /// The read, once it ends.
    async fn finish(self) -> ReadAhead {
        match self.read {
            Either::Left(going) => going.await,
            Either::Right(done) => done,
        }
    }

    /// Lets the read go: one still running stops once its rows find no receiver.
    fn discard(self) {
        if let Either::Right(done) = self.read {
            done.discard();
        }
    }
}

impl<'a> Ahead<'a> {
    /// Lets reads made for batches that will not run go.
    pub(crate) fn discard(&mut self) {
        if let Some(made) = self.made.take() {
            made.discard();
        }
        if let Some(going) = self.going.take() {
            going.discard();
        }
    }

    /// The reads to run beside this batch's commit: the next batch's files (the read
    /// already going since the commit before, or one started now), and the batch's after
    /// it when both batches' files fit in [`READ_AHEAD_BYTES`]. None without files to
    /// read ahead, or where `settled` is false (the batch's layout is not final yet).
    pub(crate) fn prepare(
        &mut self,
        ctx: &'a RunContext<'_>,
        layout: &Arc<TableLayout>,
        sink: &dyn Target,
        stop_at_new_fields: bool,
        settled: bool,
    ) -> Reads<'a> {
        let next = std::mem::take(&mut self.next);
        let mut batches = next.into_iter().filter(|_| settled);
        let files = batches.next();
        // The read begun beside the commit before, if it is of these files, as they are
        // read now; any other is let go.
        let going = self.going.take().and_then(|g| {
            let same = files.as_ref().is_some_and(|files| {
                g.keys.iter().eq(files.iter().map(|f| &f.key)) && Arc::ptr_eq(&g.layout, layout)
            });
            if same {
                Some(g)
            } else {
                g.discard();
                None
            }
        });
        let first = files.and_then(|files| match going {
            Some(g) => {
                debug!("The next batch's files have been read since the commit before this one.");
                let bytes = files.iter().map(|f| f.size).sum();
                Some(Started { going: g, bytes })
            }
            None => {
                Prepared::new(ctx, layout, files, sink, stop_at_new_fields).map(|p| p.start(ctx))
            }
        });
        let second = first.as_ref().and_then(|first| {
            let files = batches.next()?;
            let bytes: u64 = files.iter().map(|f| f.size).sum();
            (first.bytes + bytes <= READ_AHEAD_BYTES)
                .then(|| Prepared::new(ctx, layout, files, sink, stop_at_new_fields))
                .flatten()
                .map(|p| p.start(ctx))
        });
        Reads { first, second }
    }

    /// Runs `commit` beside `reads`: the next batch's read ends with it (and is this
    /// struct's `made`), the later one goes on after it for the next commit to pick up.
    pub(crate) async fn commit_beside<T>(
        &mut self,
        reads: Reads<'a>,
        commit: impl std::future::Future<Output = T>,
    ) -> T {
        let Some(first) = reads.first else {
            return commit.await;
        };
        let both = futures::future::join(commit, first.going.finish());
        let (committed, made) = match reads.second {
            None => both.await,
            Some(second) => {
                let (keys, layout) = (second.going.keys, second.going.layout);
                let later = match second.going.read {
                    Either::Left(f) => f,
                    Either::Right(done) => Box::pin(async move { done }),
                };
                match futures::future::select(Box::pin(both), later).await {
                    Either::Left((out, later)) => {
                        self.going = Some(Going {
                            keys,
                            layout,
                            read: Either::Left(later),
                        });
                        out
                    }
                    Either::Right((done, both)) => {
                        self.going = Some(Going {
                            keys,
                            layout,
                            read: Either::Right(done),
                        });
                        both.await
                    }
                }
            }
        };
        self.made = Some(made);
        committed
    }
}

/// The reads [`Ahead::prepare`] set up for one commit.
pub(crate) struct Reads<'a> {
    first: Option<Started<'a>>,
    second: Option<Started<'a>>,
}

/// A read started ahead, with its files' bytes.
struct Started<'a> {
    going: Going<'a>,
    bytes: u64,
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
    bytes: u64,
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
            bytes,
            keys: files.into_iter().map(|f| f.key).collect(),
            layout: Arc::clone(layout),
            files: sources,
            skip,
            writers,
            stop_at_new_fields,
        })
    }

    /// The read as a future of its own, to be awaited beside commits.
    fn start<'a>(self, ctx: &'a RunContext<'_>) -> Started<'a> {
        Started {
            bytes: self.bytes,
            going: Going {
                keys: self.keys.clone(),
                layout: Arc::clone(&self.layout),
                read: Either::Left(Box::pin(self.read(ctx))),
            },
        }
    }

    /// Runs the read (its decoding threads go on while the caller awaits a commit).
    async fn read(self, ctx: &RunContext<'_>) -> ReadAhead {
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
