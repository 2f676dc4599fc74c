//! Continuous watching: ingest files as they land, until stopped.
//!
//! On a local folder, `notify` (inotify) events say which keys changed, and only those are
//! looked at (a stat each), so taking a file costs the same with 200,000 old files left in
//! the folder as with none. A full listing remains the backstop: at the start, every
//! `cloudFiles.backfillInterval` (default 10 minutes), and whenever an event may have been
//! lost (the kernel's queue overflowed, our channel was full, the watcher reported an
//! error), so a lost event delays a file but never loses it, and a duplicated one cannot
//! double it (the checkpoint's index decides what is new). Without events (an object
//! store, or inotify unavailable) the folder is listed every `--poll-interval`.
//!
//! A file is taken when:
//! - it was closed after writing, or renamed into the folder, and not written since
//!   (inotify reports both); or
//! - no event speaks for it (it predates the watcher, or events were lost) and its size
//!   and modification time have not changed for the settle time.
//!
//! A file still open for writing (written, not yet closed) is never taken, however long
//! its writer pauses, unless it stays untouched for ten settle times (a writer that died
//! holding it open). Temporary names are never listed (see `source::is_hidden`).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode, CreateKind, EventKind, ModifyKind, RenameMode};
use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::pipeline::{IngestError, IngestRequest, Progress, StopFlag, StreamRun, Summary};
use crate::source::FileRef;
use crate::telemetry::Hooks;

/// What the events last said about a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signal {
    /// Written (or created) and not closed since.
    Writing(Instant),
    /// Closed after writing, or renamed into place.
    Complete(Instant),
}

/// A file event, reduced to what readiness needs.
#[derive(Debug, Clone)]
pub struct FileEvent {
    pub path: PathBuf,
    complete: bool,
}

/// Decides which listed files are ready to ingest.
#[derive(Debug)]
pub struct SettleTracker {
    settle: Duration,
    signals: HashMap<String, Signal>,
    /// First time a file was listed with its current (size, mtime).
    observed: HashMap<String, (u64, i64, Instant)>,
}

impl SettleTracker {
    pub fn new(settle: Duration) -> Self {
        SettleTracker {
            settle,
            signals: HashMap::new(),
            observed: HashMap::new(),
        }
    }

    /// Records an event for a source key.
    pub fn event(&mut self, key: String, complete: bool, at: Instant) {
        let signal = if complete {
            Signal::Complete(at)
        } else {
            Signal::Writing(at)
        };
        self.signals.insert(key, signal);
    }

    /// The listed new files that are ready; forgets files no longer listed. Also returns
    /// when the next not-ready file could become ready by settling.
    pub fn ready(
        &mut self,
        listed: Vec<FileRef>,
        now: Instant,
        now_ms: i64,
    ) -> (Vec<FileRef>, Option<Duration>) {
        let mut ready = Vec::new();
        let mut next_check: Option<Duration> = None;
        let mut keep_observed = HashMap::with_capacity(listed.len());
        let mut keep_signals = HashMap::new();
        for f in listed {
            let first_seen = match self.observed.get(&f.key) {
                Some((size, mtime, at)) if *size == f.size && *mtime == f.mtime_ms => *at,
                _ => now,
            };
            let signal = self.signals.get(&f.key).copied();
            let age_ms = u64::try_from(now_ms.saturating_sub(f.mtime_ms)).unwrap_or(0);
            let stable_for = now
                .duration_since(first_seen)
                .max(Duration::from_millis(age_ms));
            let (is_ready, wait) = match signal {
                Some(Signal::Complete(_)) => (true, Duration::ZERO),
                Some(Signal::Writing(at)) => {
                    let quiet = now.duration_since(at).min(stable_for);
                    let limit = self.settle * 10;
                    (quiet >= limit, limit.saturating_sub(quiet))
                }
                None => (
                    stable_for >= self.settle,
                    self.settle.saturating_sub(stable_for),
                ),
            };
            if is_ready {
                ready.push(f);
            } else {
                next_check = Some(next_check.map_or(wait, |n: Duration| n.min(wait)));
                if let Some(sig) = signal {
                    keep_signals.insert(f.key.clone(), sig);
                }
                keep_observed.insert(f.key.clone(), (f.size, f.mtime_ms, first_seen));
            }
        }
        // Events for files not listed yet (created, not visible to the listing) are kept.
        for (k, sig) in self.signals.drain() {
            let (Signal::Writing(at) | Signal::Complete(at)) = sig;
            if !keep_observed.contains_key(&k)
                && !ready.iter().any(|f| f.key == k)
                && now.duration_since(at) < self.settle * 20
            {
                keep_signals.insert(k, sig);
            }
        }
        self.signals = keep_signals;
        self.observed = keep_observed;
        (ready, next_check)
    }

    /// Number of files being tracked (bounded by the files listed but not yet ready).
    pub fn tracked(&self) -> usize {
        self.observed.len() + self.signals.len()
    }

    /// The keys being tracked: to be looked at again until they are ready or gone.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.observed.keys().chain(self.signals.keys())
    }
}

/// Reduces a notify event to file events.
fn file_events(event: notify::Event) -> Vec<FileEvent> {
    let complete = match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both)) => true,
        // A new folder's files may be written before its watch is added: the folder's
        // event has it looked at whole.
        EventKind::Create(CreateKind::File | CreateKind::Folder | CreateKind::Any)
        | EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Any) => false,
        _ => return Vec::new(),
    };
    // A rename reports [from, to]: the destination is the last path.
    let paths = if matches!(
        event.kind,
        EventKind::Modify(ModifyKind::Name(RenameMode::Both))
    ) {
        event.paths.into_iter().last().into_iter().collect()
    } else {
        event.paths
    };
    paths
        .into_iter()
        .map(|path| FileEvent { path, complete })
        .collect()
}

/// Starts an inotify watcher on a local source; events go to `tx`. `lost` is set whenever
/// an event may be missing (our channel full, the kernel's queue overflowed, an error), so
/// the loop lists the whole folder. Returns `None` (and warns) when watching is not possible.
fn start_watcher(
    root: &Path,
    tx: mpsc::Sender<FileEvent>,
    lost: Arc<AtomicBool>,
) -> Option<notify::RecommendedWatcher> {
    let handler = move |res: notify::Result<notify::Event>| match res {
        Ok(event) => {
            if event.need_rescan() {
                lost.store(true, Ordering::SeqCst);
            }
            for e in file_events(event) {
                if crate::testing::failpoint::armed()
                    && e.path
                        .file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(crate::testing::failpoint::loses_events_of)
                {
                    continue;
                }
                // Never block notify's thread; a dropped event is recovered by listing.
                if tx.try_send(e).is_err() {
                    lost.store(true, Ordering::SeqCst);
                }
            }
        }
        Err(_) => lost.store(true, Ordering::SeqCst),
    };
    match notify::recommended_watcher(handler) {
        Ok(mut w) => match w.watch(root, RecursiveMode::Recursive) {
            Ok(()) => Some(w),
            Err(e) => {
                warn!(error = %e, "Cannot watch the source; relying on periodic listing.");
                None
            }
        },
        Err(e) => {
            warn!(error = %e, "Cannot watch the source; relying on periodic listing.");
            None
        }
    }
}

/// How the watch loop paces itself.
#[derive(Debug, Clone, Copy)]
pub struct WatchTiming {
    /// Without file events: a full listing at least this often when idle. With them: how
    /// often an idle watcher wakes (to clean the source, to settle files).
    pub poll_interval: Duration,
    /// How long a file seen only by listing must be unchanged.
    pub settle: Duration,
}

/// Ingests files as they land until `stop` is set; the batch in flight finishes first.
pub async fn run_watch(
    req: &IngestRequest,
    progress: &dyn Progress,
    stop: &StopFlag,
    timing: WatchTiming,
    hooks: &Hooks,
) -> Result<Summary, IngestError> {
    let started = Instant::now();
    super::adopt::adopt_orphans(req, progress, stop, hooks, usize::MAX).await?;
    let mut stream = StreamRun::open(req, progress, hooks).await?;
    let adoption = Adoption {
        progress,
        hooks,
        every: req.storage.lease,
        last: Instant::now(),
    };
    let result = watch_loop(req, &mut stream, stop, timing, adoption).await;
    stream.finish(result, started).await
}

/// Competing workers (`--worker`): a watcher adopts a slot whose worker died while it runs.
/// Such a slot is free once its lease runs out (at once when the lock is local, or its
/// holder was a process of this host that is gone), so it is looked for once every lease
/// period, and at most one slot is replayed per look.
struct Adoption<'a> {
    progress: &'a dyn Progress,
    hooks: &'a Hooks,
    every: Duration,
    last: Instant,
}

impl Adoption<'_> {
    /// Adopts a free slot with unfinished batches when a lease period has passed. A failure is reported and tried again next period: the watcher's own slot
    /// goes on either way.
    async fn maybe_adopt(&mut self, req: &IngestRequest, stop: &StopFlag) {
        if req.worker.is_none() || self.last.elapsed() < self.every {
            return;
        }
        let adopted = super::adopt::adopt_orphans(req, self.progress, stop, self.hooks, 1).await;
        self.last = Instant::now();
        if let Err(e) = adopted {
            warn!(error = %e, "Cannot adopt a dead worker's slot now; trying again later.");
        }
    }

    /// How long until the next look, for a worker.
    fn due_in(&self, req: &IngestRequest) -> Option<Duration> {
        req.worker
            .map(|_| self.every.saturating_sub(self.last.elapsed()))
    }
}

async fn watch_loop(
    req: &IngestRequest,
    stream: &mut StreamRun<'_>,
    stop: &StopFlag,
    timing: WatchTiming,
    mut adoption: Adoption<'_>,
) -> Result<(), IngestError> {
    let (tx, mut rx) = mpsc::channel::<FileEvent>(4096);
    // Local folders get file events; an object store is listed (an object is complete once
    // it is listed).
    let root = req.source.local_root().map(Path::to_path_buf);
    let lost = Arc::new(AtomicBool::new(false));
    let watcher = root
        .as_ref()
        .and_then(|r| start_watcher(r, tx, lost.clone()));
    // A snapshot flow compares whole listings: it is listed every poll, events or not.
    let mut by_events = watcher.is_some() && req.snapshot.is_none();
    let backfill = req
        .settings
        .backfill_interval
        .unwrap_or(crate::options::LOCAL_BACKFILL_INTERVAL);
    let mut last_full: Option<Instant> = None;
    let mut changed: BTreeSet<String> = BTreeSet::new();
    let root = root.unwrap_or_default();
    let complete_when_listed = req.source.complete_when_listed();
    crate::memory::prefer_returning_memory();
    let mut tracker = SettleTracker::new(timing.settle);
    let mut trimmer = crate::memory::Trimmer::new();
    info!(source = %req.source.describe(), table = %req.table, events = by_events, "Watching for new files.");
    loop {
        if stop.is_stopped() {
            break;
        }
        // Busy or idle, a dead worker's slot is looked for every lease period.
        adoption.maybe_adopt(req, stop).await;
        while let Ok(e) = rx.try_recv() {
            record(&mut tracker, &mut changed, &root, e);
        }
        // Taken before listing: an event lost during the listing brings another one.
        let missed = lost.swap(false, Ordering::SeqCst);
        let listed = if !by_events || missed || last_full.is_none_or(|at| at.elapsed() >= backfill)
        {
            if by_events && last_full.is_some() {
                debug!(missed, "Listing the whole source (backfill).");
            }
            last_full = Some(Instant::now());
            changed.clear();
            stream.discover().await?
        } else if changed.is_empty() && tracker.tracked() == 0 {
            Vec::new()
        } else {
            let mut keys: Vec<String> = std::mem::take(&mut changed).into_iter().collect();
            keys.extend(tracker.keys().cloned());
            keys.sort_unstable();
            keys.dedup();
            match stream.discover_keys(&keys).await? {
                Some(files) => files,
                None => {
                    by_events = false;
                    stream.discover().await?
                }
            }
        };
        stream.set_pending(listed.len() as u64);
        let (ready, next_check) = if complete_when_listed {
            (listed, None)
        } else {
            tracker.ready(
                listed,
                Instant::now(),
                chrono::Utc::now().timestamp_millis(),
            )
        };
        if !ready.is_empty() {
            debug!(files = ready.len(), "Files ready.");
            // Looked at again next time: a file this ingest left (no schema yet, a batch
            // limit) is still new then, as a listing would find it.
            if by_events {
                changed.extend(ready.iter().map(|f| f.key.clone()));
            }
            stream.ingest(ready, stop).await?;
            trimmer.after_batch();
            continue;
        }
        // cleanSource, in the background of watching: a bounded pass while idle.
        if stream.clean_source(super::CLEAN_BUDGET).await? {
            continue;
        }
        trimmer.on_idle();
        let mut wait = next_check.map_or(timing.poll_interval, |n| n.min(timing.poll_interval));
        if by_events && let Some(at) = last_full {
            wait = wait.min(backfill.saturating_sub(at.elapsed()));
        }
        if let Some(due) = adoption.due_in(req) {
            wait = wait.min(due);
        }
        tokio::select! {
            e = rx.recv() => {
                if let Some(e) = e {
                    record(&mut tracker, &mut changed, &root, e);
                    // Let a burst of events arrive before listing.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            () = tokio::time::sleep(wait.max(Duration::from_millis(10))) => {}
            () = stop.stopped() => {}
        }
    }
    info!(tracked = tracker.tracked(), "Stopped watching.");
    Ok(())
}

fn record(tracker: &mut SettleTracker, changed: &mut BTreeSet<String>, root: &Path, e: FileEvent) {
    let Ok(rel) = e.path.strip_prefix(root) else {
        return;
    };
    let Some(key) = rel.to_str() else { return };
    // Temporary and hidden names are never ingested: no need to track them.
    if rel
        .iter()
        .any(|part| crate::source::is_hidden(&part.to_string_lossy()))
    {
        return;
    }
    let key = key.replace(std::path::MAIN_SEPARATOR, "/");
    // A folder is looked at once, whole; only files wait for their writers to finish.
    let folder = std::fs::symlink_metadata(&e.path).is_ok_and(|m| m.is_dir());
    changed.insert(key.clone());
    if !folder {
        tracker.event(key, e.complete, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(key: &str, size: u64, mtime_ms: i64) -> FileRef {
        FileRef {
            key: key.into(),
            size,
            mtime_ms,
        }
    }

    const SETTLE: Duration = Duration::from_secs(2);

    #[test]
    fn closed_or_renamed_files_are_ready_at_once() {
        let mut t = SettleTracker::new(SETTLE);
        let now = Instant::now();
        t.event("a.json".into(), true, now);
        let (ready, _) = t.ready(vec![file("a.json", 10, 1_000_000)], now, 1_000_000);
        assert_eq!(ready.len(), 1);
    }

    #[test]
    fn files_open_for_writing_wait_for_their_close() {
        let mut t = SettleTracker::new(SETTLE);
        let t0 = Instant::now();
        let now_ms = 1_000_000;
        t.event("slow.json".into(), false, t0);
        let (ready, _) = t.ready(vec![file("slow.json", 10, now_ms)], t0, now_ms);
        assert!(ready.is_empty());
        // A pause longer than the settle time does not make it ready.
        let later = t0 + SETTLE * 3;
        let (ready, _) = t.ready(vec![file("slow.json", 10, now_ms)], later, now_ms + 6000);
        assert!(ready.is_empty(), "a paused writer's file is not taken");
        t.event("slow.json".into(), true, later);
        let (ready, _) = t.ready(
            vec![file("slow.json", 20, now_ms + 6000)],
            later,
            now_ms + 6000,
        );
        assert_eq!(ready.len(), 1);
    }

    #[test]
    fn files_without_events_settle_by_listing() {
        let mut t = SettleTracker::new(SETTLE);
        let t0 = Instant::now();
        let now_ms = 1_000_000;
        let (ready, next) = t.ready(vec![file("b.json", 10, now_ms)], t0, now_ms);
        assert!(ready.is_empty());
        assert_eq!(next, Some(SETTLE));
        // It grew: the clock restarts.
        let (ready, _) = t.ready(
            vec![file("b.json", 20, now_ms + 1000)],
            t0 + Duration::from_secs(1),
            now_ms + 1000,
        );
        assert!(ready.is_empty());
        let (ready, _) = t.ready(
            vec![file("b.json", 20, now_ms + 1000)],
            t0 + Duration::from_secs(4),
            now_ms + 4000,
        );
        assert_eq!(ready.len(), 1);
        // Old files (mtime long ago) are ready at once.
        let (ready, _) = t.ready(vec![file("old.json", 5, 0)], t0, now_ms);
        assert_eq!(ready.len(), 1);
        assert_eq!(t.tracked(), 0, "nothing is kept for files already taken");
    }
}
