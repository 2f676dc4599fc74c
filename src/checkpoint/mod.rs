//! A stream's progress: an exclusive lock, the durable batch plans, and the index of
//! ingested files, in one embedded store (redb) under the checkpoint directory.
//!
//! Invariant: a file is marked ingested only after the Delta commit that holds its rows
//! (the commit carries `txn(appId, batch)`), in the same store transaction that marks its
//! batch committed. A plan is written before any of its files is read, so a restart
//! re-runs an unfinished plan exactly, or only marks it done when the table already has it.
//!
//! Lookups are per file, so the index scales to millions of files without being loaded
//! into memory.
//!
//! Every write reaches the checkpoint's durable record first ([`DurableRecord`]): for a
//! local checkpoint that is the store itself; for one on S3 (`s3.rs`) it is the objects
//! under its prefix, and the store is a local cache (see [`local_dir`]) rebuilt from them
//! when it does not match. Crash counts and quarantine (`crash.rs`), the listing state
//! (`listing.rs`) and recovery from the table (`recover.rs`) are typed records on top.

use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use redb::{Database, ReadableTable, ReadableTableMetadata};

use crate::location::Location;
use crate::source::FileRef;
use crate::storage::StorageSettings;
use crate::storage::object_dir::RemoteDir;

pub mod aside;
pub mod claims;
pub mod crash;
pub mod lease;
pub mod listing;
mod record;
pub mod recover;
mod s3;
pub(crate) use record::{
    COMMITS, DurableRecord, FILES, LOCK_FILE, LocalRecord, META, PLANS, STATE_CACHE_BYTES,
    STATE_FILE, STREAM_OBJECT, ScratchDir, io_err,
};
pub use record::{
    Checkpoint, CheckpointError, CommitSummary, IngestedFile, Plan, RecordFigures, SOURCE_POSITION,
};

/// The checkpoint a stream of `table` keeps when none is given: `TABLE/_autoloader`, or
/// `TABLE/_autoloader/NAME` for one of several streams into the table.
pub fn default_location(table: &Location, stream: Option<&str>) -> Location {
    let base = table.join("_autoloader");
    match stream {
        Some(name) => base.join(name),
        None => base,
    }
}

/// A stream's name when none is given: its table folder's.
pub fn default_stream_name(table: &Location) -> String {
    table.file_name().unwrap_or_else(|| "stream".to_string())
}

/// Where a checkpoint's local files live: the folder itself, or for an `s3://` checkpoint
/// a cache folder named after it under [`StorageSettings::cache_root`].
pub fn local_dir(location: &Location, state: &StorageSettings) -> PathBuf {
    match location {
        Location::Local(dir) => dir.clone(),
        Location::S3(url) => s3::cache_dir(url, state),
    }
}

impl Checkpoint {
    /// Opens (creating if needed) and locks the checkpoint at `location`, a local folder or
    /// an `s3://` prefix.
    ///
    /// # Errors
    /// [`CheckpointError::Locked`] naming the holder when another process has it.
    pub fn open(
        location: &Location,
        state: &StorageSettings,
    ) -> Result<Checkpoint, CheckpointError> {
        match location {
            Location::Local(dir) => Checkpoint::open_local(dir),
            Location::S3(url) => s3::open(url, state),
        }
    }

    /// Opens the checkpoint at `location` to read it (`autoloader status`), never taking a
    /// lease: a report must not keep a worker from a slot, nor take over a dead holder's
    /// lease. A local one is locked for the moment, as a run would; one on S3 is copied
    /// from its record into a scratch store, or [`CheckpointError::Locked`] while a live
    /// process holds its lease.
    pub fn open_to_read(
        location: &Location,
        state: &StorageSettings,
    ) -> Result<Checkpoint, CheckpointError> {
        match location {
            Location::Local(dir) => Checkpoint::open_local(dir),
            Location::S3(url) => s3::open_to_read(url, state),
        }
    }

    /// When the checkpoint's holder took its lock (local: the lock file's time) or last
    /// renewed its lease (S3), read without locking (`autoloader status`).
    pub fn lock_renewed_at_ms(location: &Location, state: &StorageSettings) -> Option<i64> {
        match location {
            Location::Local(dir) => {
                let modified = fs::metadata(dir.join(LOCK_FILE)).ok()?.modified().ok()?;
                let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
                i64::try_from(since.as_millis()).ok()
            }
            Location::S3(url) => {
                lease::renewed_at_ms(&RemoteDir::open(url, state).ok()?, state.lease)
            }
        }
    }

    /// What a checkpoint held by another process says of its batches, read without its
    /// lock (`autoloader status` on a worker slot held on another machine): on S3 from its
    /// durable record (`commits/`, the plans after the last commit), `None` for a local
    /// checkpoint, whose store only its holder may open.
    pub fn peek_record(
        location: &Location,
        state: &StorageSettings,
    ) -> Result<Option<RecordFigures>, CheckpointError> {
        match location {
            Location::Local(_) => Ok(None),
            Location::S3(url) => s3::peek(url, state).map(Some),
        }
    }

    /// Opens (creating if needed) and locks the checkpoint in a local folder.
    /// Whether a checkpoint exists at `location` (its lock file, or on S3 its `stream`
    /// record), without creating one.
    pub fn exists(location: &Location, state: &StorageSettings) -> Result<bool, CheckpointError> {
        match location {
            Location::Local(dir) => Ok(dir.join(LOCK_FILE).exists()),
            Location::S3(url) => Ok(RemoteDir::open(url, state)?.get(STREAM_OBJECT)?.is_some()),
        }
    }

    fn open_local(dir: &Path) -> Result<Checkpoint, CheckpointError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let lock_path = dir.join(LOCK_FILE);
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(io_err(&lock_path))?;
        if let Err(e) = lock.try_lock() {
            let mut holder = String::new();
            let _ = lock.read_to_string(&mut holder);
            let holder = if holder.trim().is_empty() {
                format!("{e}")
            } else {
                holder.trim().to_string()
            };
            return Err(CheckpointError::Locked {
                path: dir.to_path_buf(),
                holder,
            });
        }
        let host = fs::read_to_string("/etc/hostname").unwrap_or_default();
        let holder = format!(
            "pid {} on {} since {}",
            std::process::id(),
            host.trim(),
            chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
        lock.set_len(0).map_err(io_err(&lock_path))?;
        lock.seek(SeekFrom::Start(0)).map_err(io_err(&lock_path))?;
        lock.write_all(holder.as_bytes())
            .map_err(io_err(&lock_path))?;

        let state_path = dir.join(STATE_FILE);
        let store_err = |e: &dyn std::fmt::Display| CheckpointError::Store {
            path: state_path.clone(),
            reason: e.to_string(),
        };
        let db = match open_state(&state_path) {
            Ok(db) => db,
            // A damaged state file (truncated, garbage) is set aside, not trusted: the stream
            // starts a fresh one and rebuilds it from the table's commit history.
            Err(e) if state_path.exists() => {
                let aside = dir.join(format!(
                    "{STATE_FILE}.damaged-{}",
                    chrono::Utc::now().timestamp_millis()
                ));
                tracing::warn!(
                    path = %state_path.display(), error = %e, moved_to = %aside.display(),
                    "Checkpoint state is damaged; setting it aside and rebuilding it from the table."
                );
                fs::rename(&state_path, &aside).map_err(io_err(&state_path))?;
                open_state(&state_path).map_err(|e| store_err(&e))?
            }
            Err(e) => return Err(store_err(&e)),
        };
        let txn = db.begin_write().map_err(|e| store_err(&e))?;
        let stream_id = {
            let mut meta = txn.open_table(META).map_err(|e| store_err(&e))?;
            let existing = meta
                .get("streamId")
                .map_err(|e| store_err(&e))?
                .map(|v| v.value().to_string());
            match existing {
                Some(id) => id,
                None => {
                    let id = uuid::Uuid::new_v4().to_string();
                    meta.insert("streamId", id.as_str())
                        .map_err(|e| store_err(&e))?;
                    id
                }
            }
        };
        txn.open_table(FILES).map_err(|e| store_err(&e))?;
        txn.open_table(PLANS).map_err(|e| store_err(&e))?;
        txn.open_table(COMMITS).map_err(|e| store_err(&e))?;
        txn.commit().map_err(|e| store_err(&e))?;
        Ok(Checkpoint {
            dir: dir.to_path_buf(),
            db,
            _lock: lock,
            stream_id,
            record: Box::new(LocalRecord),
            scratch: None,
        })
    }

    /// The local folder (for an S3 checkpoint, its cache).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the durable record lives: the local folder or the S3 prefix.
    pub fn describe(&self) -> String {
        self.record
            .describe()
            .unwrap_or_else(|| self.dir.display().to_string())
    }

    /// The stream's id, fixed when the checkpoint was created.
    pub fn stream_id(&self) -> &str {
        &self.stream_id
    }

    /// Whether the checkpoint holds no progress at all (new, or rebuilt after damage).
    pub fn is_fresh(&self) -> Result<bool, CheckpointError> {
        let txn = self.db.begin_read().map_err(|e| self.store_err(&e))?;
        let plans = txn.open_table(PLANS).map_err(|e| self.store_err(&e))?;
        let files = txn.open_table(FILES).map_err(|e| self.store_err(&e))?;
        Ok(plans.is_empty().map_err(|e| self.store_err(&e))?
            && files.is_empty().map_err(|e| self.store_err(&e))?)
    }

    /// Takes over an earlier identity of this stream (found in the table's history), so
    /// its `txn` versions continue where they were.
    pub fn adopt_stream_id(&mut self, id: &str) -> Result<(), CheckpointError> {
        self.record.put_stream_id(id)?;
        self.local_set_meta("streamId", id)?;
        self.stream_id = id.to_string();
        Ok(())
    }

    /// Records a batch found in the table's history as planned and committed.
    pub fn restore_batch(
        &self,
        plan: &Plan,
        summary: &CommitSummary,
    ) -> Result<(), CheckpointError> {
        self.write_plan(plan)?;
        self.mark_committed(plan, summary)
    }

    /// The Delta `txn` application id of this stream.
    pub fn app_id(&self) -> String {
        format!("autoloader-{}", self.stream_id)
    }

    fn store_err(&self, e: &dyn std::fmt::Display) -> CheckpointError {
        CheckpointError::Store {
            path: self.dir.join(STATE_FILE),
            reason: e.to_string(),
        }
    }

    /// A stored metadata value.
    pub fn meta(&self, key: &str) -> Result<Option<String>, CheckpointError> {
        let txn = self.db.begin_read().map_err(|e| self.store_err(&e))?;
        let t = txn.open_table(META).map_err(|e| self.store_err(&e))?;
        Ok(t.get(key)
            .map_err(|e| self.store_err(&e))?
            .map(|v| v.value().to_string()))
    }

    pub fn set_meta(&self, key: &str, value: &str) -> Result<(), CheckpointError> {
        self.record.put_meta(key, value)?;
        self.local_set_meta(key, value)
    }

    fn local_set_meta(&self, key: &str, value: &str) -> Result<(), CheckpointError> {
        let txn = self.db.begin_write().map_err(|e| self.store_err(&e))?;
        txn.open_table(META)
            .map_err(|e| self.store_err(&e))?
            .insert(key, value)
            .map_err(|e| self.store_err(&e))?;
        txn.commit().map_err(|e| self.store_err(&e))
    }

    /// A reader over the file index, for many lookups in one snapshot.
    pub fn seen_files(&self) -> Result<SeenFiles, CheckpointError> {
        let txn = self.db.begin_read().map_err(|e| self.store_err(&e))?;
        let table = txn.open_table(FILES).map_err(|e| self.store_err(&e))?;
        Ok(SeenFiles {
            table,
            path: self.dir.join(STATE_FILE),
        })
    }

    /// The highest committed batch and the plans above it (unfinished), ascending.
    pub fn pending_plans(&self) -> Result<(Option<u64>, Vec<Plan>), CheckpointError> {
        let txn = self.db.begin_read().map_err(|e| self.store_err(&e))?;
        let commits = txn.open_table(COMMITS).map_err(|e| self.store_err(&e))?;
        let last = commits
            .last()
            .map_err(|e| self.store_err(&e))?
            .map(|(k, _)| k.value());
        let plans = txn.open_table(PLANS).map_err(|e| self.store_err(&e))?;
        let from = last.map_or(0, |l| l + 1);
        let mut pending = Vec::new();
        for entry in plans.range(from..).map_err(|e| self.store_err(&e))? {
            let (_, v) = entry.map_err(|e| self.store_err(&e))?;
            let plan: Plan = serde_json::from_str(v.value()).map_err(|e| self.store_err(&e))?;
            pending.push(plan);
        }
        Ok((last, pending))
    }

    /// Durably records a plan before any of its files is read. A different plan already
    /// stored under the same batch means two writers: refused.
    pub fn write_plan(&self, plan: &Plan) -> Result<(), CheckpointError> {
        self.record.put_plan(plan)?;
        self.local_write_plan(plan)
    }

    fn local_write_plan(&self, plan: &Plan) -> Result<(), CheckpointError> {
        let text = serde_json::to_string(plan).expect("plans always serialize");
        let txn = self.db.begin_write().map_err(|e| self.store_err(&e))?;
        {
            let mut plans = txn.open_table(PLANS).map_err(|e| self.store_err(&e))?;
            if let Some(existing) = plans.get(plan.batch).map_err(|e| self.store_err(&e))? {
                let existing: Plan =
                    serde_json::from_str(existing.value()).map_err(|e| self.store_err(&e))?;
                if existing.files != plan.files {
                    return Err(CheckpointError::PlanConflict {
                        path: self.dir.clone(),
                        batch: plan.batch,
                        reason: "a different plan is already stored".into(),
                    });
                }
            }
            plans
                .insert(plan.batch, text.as_str())
                .map_err(|e| self.store_err(&e))?;
        }
        txn.commit().map_err(|e| self.store_err(&e))
    }

    /// Marks a batch committed and its files ingested, atomically.
    pub fn mark_committed(
        &self,
        plan: &Plan,
        summary: &CommitSummary,
    ) -> Result<(), CheckpointError> {
        self.record.put_commit(plan, summary)?;
        self.local_mark_committed(plan, summary)
    }

    fn local_mark_committed(
        &self,
        plan: &Plan,
        summary: &CommitSummary,
    ) -> Result<(), CheckpointError> {
        let text = serde_json::to_string(summary).expect("summaries always serialize");
        let txn = self.db.begin_write().map_err(|e| self.store_err(&e))?;
        {
            let mut files = txn.open_table(FILES).map_err(|e| self.store_err(&e))?;
            for f in &plan.files {
                files
                    .insert(f.key.as_str(), (f.size, f.mtime_ms, plan.batch))
                    .map_err(|e| self.store_err(&e))?;
            }
            let mut commits = txn.open_table(COMMITS).map_err(|e| self.store_err(&e))?;
            commits
                .insert(plan.batch, text.as_str())
                .map_err(|e| self.store_err(&e))?;
        }
        txn.commit().map_err(|e| self.store_err(&e))
    }

    /// Forgets an unfinished plan (its files changed since it was planned; the table is
    /// known not to hold it), so its batch number is planned again from the current files.
    pub fn discard_plan(&self, batch: u64) -> Result<(), CheckpointError> {
        self.record.delete_plan(batch)?;
        let txn = self.db.begin_write().map_err(|e| self.store_err(&e))?;
        txn.open_table(PLANS)
            .map_err(|e| self.store_err(&e))?
            .remove(batch)
            .map_err(|e| self.store_err(&e))?;
        txn.commit().map_err(|e| self.store_err(&e))
    }

    /// Records files as seen without ingesting them (`includeExistingFiles=false`).
    pub fn mark_existing(&self, plan: &Plan) -> Result<(), CheckpointError> {
        self.record.put_existing(plan)?;
        self.local_mark_existing(plan)
    }

    fn local_mark_existing(&self, plan: &Plan) -> Result<(), CheckpointError> {
        let txn = self.db.begin_write().map_err(|e| self.store_err(&e))?;
        {
            let mut files = txn.open_table(FILES).map_err(|e| self.store_err(&e))?;
            for f in &plan.files {
                files
                    .insert(f.key.as_str(), (f.size, f.mtime_ms, plan.batch))
                    .map_err(|e| self.store_err(&e))?;
            }
        }
        txn.commit().map_err(|e| self.store_err(&e))
    }

    /// A committed batch's plan and summary (`None`: not committed, or its plan is not
    /// kept).
    pub fn committed(&self, batch: u64) -> Result<Option<(Plan, CommitSummary)>, CheckpointError> {
        let txn = self.db.begin_read().map_err(|e| self.store_err(&e))?;
        let commits = txn.open_table(COMMITS).map_err(|e| self.store_err(&e))?;
        let Some(summary) = commits.get(batch).map_err(|e| self.store_err(&e))? else {
            return Ok(None);
        };
        let summary: CommitSummary =
            serde_json::from_str(summary.value()).map_err(|e| self.store_err(&e))?;
        let plans = txn.open_table(PLANS).map_err(|e| self.store_err(&e))?;
        let Some(plan) = plans.get(batch).map_err(|e| self.store_err(&e))? else {
            return Ok(None);
        };
        let plan: Plan = serde_json::from_str(plan.value()).map_err(|e| self.store_err(&e))?;
        Ok(Some((plan, summary)))
    }

    /// The highest committed batch.
    pub fn last_committed(&self) -> Result<Option<u64>, CheckpointError> {
        let txn = self.db.begin_read().map_err(|e| self.store_err(&e))?;
        let commits = txn.open_table(COMMITS).map_err(|e| self.store_err(&e))?;
        Ok(commits
            .last()
            .map_err(|e| self.store_err(&e))?
            .map(|(k, _)| k.value()))
    }

    /// Summaries of committed batches, ascending.
    pub fn commits(&self) -> Result<Vec<(u64, CommitSummary)>, CheckpointError> {
        let txn = self.db.begin_read().map_err(|e| self.store_err(&e))?;
        let commits = txn.open_table(COMMITS).map_err(|e| self.store_err(&e))?;
        let mut out = Vec::new();
        for entry in commits.iter().map_err(|e| self.store_err(&e))? {
            let (k, v) = entry.map_err(|e| self.store_err(&e))?;
            let s: CommitSummary =
                serde_json::from_str(v.value()).map_err(|e| self.store_err(&e))?;
            out.push((k.value(), s));
        }
        Ok(out)
    }

    /// The greatest key among ingested (or skipped) files: where an incremental listing
    /// starts.
    pub fn highest_key(&self) -> Result<Option<String>, CheckpointError> {
        let txn = self.db.begin_read().map_err(|e| self.store_err(&e))?;
        let files = txn.open_table(FILES).map_err(|e| self.store_err(&e))?;
        Ok(files
            .last()
            .map_err(|e| self.store_err(&e))?
            .map(|(k, _)| k.value().to_string()))
    }

    /// The next batch number to plan.
    pub fn next_batch(&self) -> Result<u64, CheckpointError> {
        let txn = self.db.begin_read().map_err(|e| self.store_err(&e))?;
        let plans = txn.open_table(PLANS).map_err(|e| self.store_err(&e))?;
        Ok(plans
            .last()
            .map_err(|e| self.store_err(&e))?
            .map_or(0, |(k, _)| k.value() + 1))
    }
}

/// Opens the state store. redb panics on some damaged files (a truncated one fails an
/// internal assertion): that is turned into an error, so damage is handled, not fatal.
///
/// A file that opens is then checked in full (page checksums, and the allocator state
/// rebuilt from the tables): redb trusts a cleanly closed file's allocator state, and a
/// damaged one panicked later, in a commit or when the store was dropped (found by
/// fuzzing `fuzz_checkpoint`). The check reads the whole file once per open.
fn open_state(path: &Path) -> Result<Database, String> {
    // The panic hook is process-wide: streams of one process opening checkpoints at once
    // take turns, or one could restore the silent hook over the real one.
    static HOOK_SWAP: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = HOOK_SWAP
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    // redb caches up to 1 GiB of pages by default; the index is read a key at a time, so a
    // small cache keeps a long-running watcher's memory flat.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut db = redb::Builder::new()
            .set_cache_size(STATE_CACHE_BYTES)
            .create(path)?;
        if !db.check_integrity()? {
            tracing::warn!(path = %path.display(), "Checkpoint state was damaged; repaired it.");
        }
        Ok::<_, redb::DatabaseError>(db)
    }));
    std::panic::set_hook(previous);
    match result {
        Ok(Ok(db)) => Ok(db),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the state file is damaged (the store refused to open it)".into()),
    }
}

/// A read snapshot of the file index.
pub struct SeenFiles {
    table: redb::ReadOnlyTable<&'static str, (u64, i64, u64)>,
    path: PathBuf,
}

impl SeenFiles {
    /// The ingested file under `key`, as it was when ingested, and its batch.
    pub fn get(&self, key: &str) -> Result<Option<IngestedFile>, CheckpointError> {
        let v = self.table.get(key).map_err(|e| CheckpointError::Store {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        Ok(v.map(|v| {
            let (size, mtime_ms, batch) = v.value();
            IngestedFile {
                file: FileRef {
                    key: key.to_string(),
                    size,
                    mtime_ms,
                },
                batch,
            }
        }))
    }

    pub fn len(&self) -> u64 {
        self.table.len().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every ingested file whose key starts with `prefix`, in key order.
    pub fn under(&self, prefix: &str) -> Result<Vec<IngestedFile>, CheckpointError> {
        let err = |e: redb::StorageError| CheckpointError::Store {
            path: self.path.clone(),
            reason: e.to_string(),
        };
        let mut out = Vec::new();
        for entry in self.table.range(prefix..).map_err(err)? {
            let (k, v) = entry.map_err(err)?;
            let key = k.value();
            if !key.starts_with(prefix) {
                break;
            }
            let (size, mtime_ms, batch) = v.value();
            out.push(IngestedFile {
                file: FileRef {
                    key: key.to_string(),
                    size,
                    mtime_ms,
                },
                batch,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Opens the local checkpoint in `dir`.
    fn open_at(dir: &Path) -> Result<Checkpoint, CheckpointError> {
        Checkpoint::open(
            &Location::Local(dir.into()),
            &StorageSettings::local(dir.into()),
        )
    }

    /// A plan of files of size 1 and mtime 2 (shared with the typed records' tests).
    pub(super) fn plan(batch: u64, keys: &[&str]) -> Plan {
        Plan {
            batch,
            files: keys
                .iter()
                .map(|k| FileRef {
                    key: (*k).into(),
                    size: 1,
                    mtime_ms: 2,
                })
                .collect(),
            created_at_ms: 0,
        }
    }

    #[test]
    fn second_opener_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let first = open_at(dir.path()).unwrap();
        let err = open_at(dir.path()).err().unwrap();
        let text = err.to_string();
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        let id = first.stream_id().to_string();
        drop(first);
        let again = open_at(dir.path()).unwrap();
        assert_eq!(again.stream_id(), id, "the stream id survives reopening");
    }

    /// Found by fuzzing `fuzz_checkpoint`: one flipped bit in a cleanly closed state
    /// file's allocator state opened fine, then redb panicked ("2 must be less than 0")
    /// when the checkpoint was dropped.
    #[test]
    fn a_damaged_allocator_state_is_repaired_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        {
            let c = open_at(dir.path()).unwrap();
            for batch in 0..3 {
                let p = plan(batch, &[&format!("orders/2026-03-1{batch}.json")]);
                c.write_plan(&p).unwrap();
                if batch < 2 {
                    c.mark_committed(&p, &CommitSummary::default()).unwrap();
                }
            }
        }
        let state = dir.path().join(STATE_FILE);
        let mut bytes = fs::read(&state).unwrap();
        bytes[0x1080] ^= 0x80;
        fs::write(&state, bytes).unwrap();
        let c = open_at(dir.path()).unwrap();
        assert_eq!(
            c.next_batch().unwrap(),
            3,
            "the repaired store keeps its content"
        );
        assert_eq!(c.seen_files().unwrap().len(), 2);
        drop(c);
        open_at(dir.path()).unwrap();
    }

    #[test]
    fn plans_then_commits_track_files() {
        let dir = tempfile::tempdir().unwrap();
        let c = open_at(dir.path()).unwrap();
        assert_eq!(c.next_batch().unwrap(), 0);
        let p0 = plan(0, &["a.json", "b.json"]);
        c.write_plan(&p0).unwrap();
        assert_eq!(c.pending_plans().unwrap(), (None, vec![p0.clone()]));
        assert!(
            c.write_plan(&plan(0, &["c.json"])).is_err(),
            "a different plan for a batch is refused"
        );
        c.write_plan(&p0).unwrap();
        c.mark_committed(&p0, &CommitSummary::default()).unwrap();
        assert_eq!(c.pending_plans().unwrap(), (Some(0), vec![]));
        assert_eq!(c.next_batch().unwrap(), 1);
        let seen = c.seen_files().unwrap();
        assert_eq!(
            seen.get("a.json").unwrap(),
            Some(IngestedFile {
                file: FileRef {
                    key: "a.json".into(),
                    size: 1,
                    mtime_ms: 2
                },
                batch: 0
            })
        );
        assert_eq!(seen.get("zzz").unwrap(), None);
        assert_eq!(seen.len(), 2);
    }
}
