//! A Delta table as a source, read as Spark's `readStream.format("delta")` reads it: the
//! table's files as of the version at the first start, then each later commit's added
//! files (`dataChange=true`) in commit order. Compaction (`dataChange=false`) is passed over;
//! a commit that removes rows stops the stream unless `skipChangeCommits` or `ignoreDeletes`
//! says otherwise. Reading the table's Parquet files as loose files instead would bring
//! removed rows back.
//!
//! The position (table id, next version, whether the first snapshot is still to take) is
//! kept in the stream's checkpoint through [`FileSource::position`]; the files themselves
//! are planned, deduplicated and committed exactly once as any source's are.

use std::sync::Arc;
use std::sync::Mutex;

use deltalake::DeltaTable;
use deltalake::kernel::Action;
use futures::StreamExt;
use futures::future::BoxFuture;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use tracing::info;

use super::{FileLocation, FileRef, FileSource, Overlap, SourceError};
use crate::location::Location;
use crate::options::{DeltaReadSettings, StartingPoint};
use crate::storage::StorageSettings;

/// Table properties that change how files must be read, which this reader does not do.
const UNREADABLE_MODES: &[(&str, &str)] = &[("delta.columnMapping.mode", "none")];

/// Where a stream reading a Delta table is, saved in its checkpoint as JSON.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Position {
    /// The table's `metaData.id`: another table at the same place is refused.
    table_id: String,
    /// The version whose files are read first (the latest at the first start), until they
    /// are all planned.
    snapshot: Option<u64>,
    /// The first commit not yet read.
    next: u64,
}

#[derive(Debug, Default)]
struct State {
    /// The position saved, or fixed by the first listing (`None`: not started).
    position: Option<Position>,
    /// Where the last listing got to; becomes the position once its files are planned.
    listed: Option<Position>,
    /// Whether the "waiting for the table" line was printed.
    waiting_said: bool,
}

/// A Delta table read incrementally. Keys are data file paths relative to the table root;
/// where they are read from, and what they overlap, is the table folder's (`files`).
#[derive(Debug)]
pub struct DeltaTableSource {
    location: Location,
    /// The table's folder as a plain source: keys are located and described through it.
    files: Arc<dyn FileSource>,
    s3: Vec<(String, String)>,
    read: DeltaReadSettings,
    state: Mutex<State>,
}

/// One commit's effect on a stream: the files it adds, or why it is passed over.
#[derive(Debug, PartialEq)]
enum CommitEffect {
    Adds(Vec<FileRef>),
    Skipped(&'static str),
}

impl DeltaTableSource {
    pub fn open(
        location: &Location,
        files: Arc<dyn FileSource>,
        storage: &StorageSettings,
        read: &DeltaReadSettings,
    ) -> DeltaTableSource {
        DeltaTableSource {
            location: location.clone(),
            files,
            s3: storage.s3.clone(),
            read: read.clone(),
            state: Mutex::new(State::default()),
        }
    }

    fn err(&self, reason: impl Into<String>) -> SourceError {
        SourceError::DeltaSource {
            table: self.location.to_string(),
            reason: reason.into(),
        }
    }

    fn table(&self) -> Result<DeltaTable, SourceError> {
        crate::storage::unloaded_table(&self.location, &self.s3).map_err(|e| self.err(e))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The commit versions in the log from `from` on, ascending, with their files' times.
    async fn versions_from(
        &self,
        store: &dyn ObjectStore,
        from: u64,
    ) -> Result<Vec<(u64, i64)>, SourceError> {
        let prefix = ObjectPath::from("_delta_log");
        let mut listing = if from == 0 {
            store.list(Some(&prefix))
        } else {
            store.list_with_offset(
                Some(&prefix),
                &ObjectPath::from(format!("_delta_log/{:020}.json", from - 1)),
            )
        };
        let mut out = Vec::new();
        while let Some(item) = listing.next().await {
            let meta = item.map_err(|e| self.err(e.to_string()))?;
            let Some(stem) = meta
                .location
                .filename()
                .and_then(|n| n.strip_suffix(".json"))
            else {
                continue;
            };
            if stem.len() == 20
                && let Ok(v) = stem.parse::<u64>()
                && v >= from
            {
                out.push((v, meta.last_modified.timestamp_millis()));
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    async fn read_commit(
        &self,
        store: &dyn ObjectStore,
        version: u64,
    ) -> Result<Vec<Action>, SourceError> {
        let bytes = deltalake::logstore::read_commit_entry(store, version)
            .await
            .map_err(|e| self.err(format!("cannot read version {version}: {e}")))?
            .ok_or_else(|| self.gone(version))?;
        deltalake::logstore::get_actions(version, &bytes)
            .map_err(|e| self.err(format!("cannot read version {version}: {e}")))
    }

    fn gone(&self, version: u64) -> SourceError {
        self.err(format!(
            "version {version}, which this stream reads next, is no longer in the table's log \
             (removed after delta.logRetentionDuration): its rows cannot be read incrementally; \
             give the stream a new checkpoint with startingVersion set to a version still in the log"
        ))
    }

    /// The first start: where reading begins, from the starting options.
    async fn first_position(
        &self,
        store: &dyn ObjectStore,
        table_id: String,
        latest: u64,
    ) -> Result<Position, SourceError> {
        let next = match self.read.starting {
            None => {
                return Ok(Position {
                    table_id,
                    snapshot: Some(latest),
                    next: latest + 1,
                });
            }
            Some(StartingPoint::Version(v)) => {
                if v > latest + 1 {
                    return Err(self.err(format!(
                        "startingVersion={v} is after the table's latest version {latest}"
                    )));
                }
                v
            }
            Some(StartingPoint::Latest) => latest + 1,
            Some(StartingPoint::Timestamp(at)) => {
                let mut first = latest + 1;
                for (v, file_time) in self.versions_from(store, 0).await? {
                    let time = commit_time(&self.read_commit(store, v).await?).unwrap_or(file_time);
                    if time >= at {
                        first = v;
                        break;
                    }
                }
                first
            }
        };
        Ok(Position {
            table_id,
            snapshot: None,
            next,
        })
    }

    async fn list(&self) -> Result<Vec<FileRef>, SourceError> {
        let mut table = self.table()?;
        let store = table.log_store().object_store(None);
        let saved = self.lock().position.clone();
        let versions = self
            .versions_from(store.as_ref(), saved.as_ref().map_or(0, |p| p.next))
            .await?;
        let mut position = match saved {
            Some(p) => p,
            None => {
                let Some(&(latest, _)) = versions.last() else {
                    if !self.read.created_by_run {
                        return Err(self.err(
                            "it does not exist (no commit in its _delta_log); check the path, \
                             or declare the stream that creates it in the same streams.toml",
                        ));
                    }
                    let mut state = self.lock();
                    if !std::mem::replace(&mut state.waiting_said, true) {
                        tracing::warn!(table = %self.location, "The source Delta table does not exist yet; waiting for its first commit (another stream may create it).");
                    }
                    return Ok(Vec::new());
                };
                table
                    .load_version(latest)
                    .await
                    .map_err(|e| self.err(e.to_string()))?;
                let id = table_id(&table).map_err(|e| self.err(e))?;
                let first = self.first_position(store.as_ref(), id, latest).await?;
                info!(table = %self.location, version = latest, snapshot = first.snapshot.is_some(), next = first.next, "Reading a Delta table as the source.");
                // Fixed now, saved before any plan: a restart reads the same snapshot.
                self.lock().position = Some(first.clone());
                first
            }
        };
        let mut files = Vec::new();
        if let Some(v) = position.snapshot {
            if table.version() != Some(v) {
                table
                    .load_version(v)
                    .await
                    .map_err(|e| self.err(format!("cannot read version {v}: {e}")))?;
            }
            files = self.snapshot_files(&table, v)?;
            position.snapshot = None;
        }
        if let Some(&(first, _)) = versions.first()
            && first > position.next
        {
            return Err(self.gone(position.next));
        }
        let start = position.next;
        for &(v, _) in versions.iter().filter(|(v, _)| *v >= start) {
            if v != position.next {
                return Err(self.gone(position.next));
            }
            let actions = self.read_commit(store.as_ref(), v).await?;
            match self.commit_effect(v, &actions, &position.table_id)? {
                CommitEffect::Adds(adds) => files.extend(adds),
                CommitEffect::Skipped(why) => {
                    info!(table = %self.location, version = v, "Skipping a commit that {why}.");
                }
            }
            position.next = v + 1;
        }
        self.lock().listed = Some(position);
        self.local_times(&mut files);
        Ok(files)
    }

    /// A local file's identity carries its file system time, as a folder's files do (the
    /// log's `modificationTime` is the writer's clock), so the checks that a local file did
    /// not change while it was read hold for table files too.
    fn local_times(&self, files: &mut [FileRef]) {
        for f in files {
            if let FileLocation::Local(path) = self.files.locate(&f.key)
                && let Ok(modified) = std::fs::metadata(&path).and_then(|m| m.modified())
                && let Ok(since) = modified.duration_since(std::time::UNIX_EPOCH)
            {
                f.mtime_ms = i64::try_from(since.as_millis()).unwrap_or(i64::MAX);
            }
        }
    }

    /// The data files of version `v`, ordered by time and path so batches are repeatable.
    fn snapshot_files(&self, table: &DeltaTable, v: u64) -> Result<Vec<FileRef>, SourceError> {
        let state = table.snapshot().map_err(|e| self.err(e.to_string()))?;
        check_readable(state.metadata().configuration()).map_err(|e| self.err(e))?;
        let mut files = Vec::new();
        for f in state.log_data() {
            if f.deletion_vector_descriptor().is_some() {
                return Err(self.err(format!(
                    "version {v}: file {} has a deletion vector, which this reader cannot apply \
                     (its deleted rows would come back)",
                    f.path()
                )));
            }
            let key = f.path().into_owned();
            self.check_partitions(v, &key, &f.partition_values_map())?;
            files.push(FileRef {
                key,
                size: u64::try_from(f.size()).unwrap_or(0),
                mtime_ms: f.modification_time(),
            });
        }
        files.sort_by(|a, b| (a.mtime_ms, &a.key).cmp(&(b.mtime_ms, &b.key)));
        Ok(files)
    }

    /// Partition values are read from a file's Hive-style path (`region=kr/...`), as for
    /// a folder: a file whose path does not hold its log's values (random prefixes) would
    /// lose them, so it stops the stream instead.
    fn check_partitions(
        &self,
        v: u64,
        key: &str,
        values: &std::collections::HashMap<String, Option<String>>,
    ) -> Result<(), SourceError> {
        let in_path = super::partition_pairs(key);
        for (column, value) in values {
            if !in_path.iter().any(|(k, pv)| k == column && pv == value) {
                return Err(self.err(format!(
                    "version {v}: file {key} does not hold its partition value {column}={} in \
                     its path, which this reader needs (delta.randomizeFilePrefixes is not \
                     readable yet)",
                    value.as_deref().unwrap_or("null")
                )));
            }
        }
        Ok(())
    }

    /// What commit `v` brings: its added data files, or nothing when it only compacts or
    /// when the options say to pass over its changes; an error when it removes rows.
    fn commit_effect(
        &self,
        v: u64,
        actions: &[Action],
        table_id: &str,
    ) -> Result<CommitEffect, SourceError> {
        let mut adds = Vec::new();
        let mut removes = 0usize;
        let mut operation = None;
        let mut full_refresh = false;
        for action in actions {
            match action {
                Action::Add(add) if add.data_change => {
                    if add.deletion_vector.is_some() {
                        return Err(self.err(format!(
                            "version {v} adds a file with a deletion vector ({}), which this reader \
                             cannot apply",
                            add.path
                        )));
                    }
                    let key = super::percent_decode(&add.path);
                    self.check_partitions(v, &key, &add.partition_values)?;
                    adds.push(FileRef {
                        key,
                        size: u64::try_from(add.size).unwrap_or(0),
                        mtime_ms: add.modification_time,
                    });
                }
                Action::Remove(r) if r.data_change => removes += 1,
                Action::Metadata(m) => {
                    if m.id() != table_id {
                        return Err(self.err(format!(
                            "version {v} replaces the table (its id changed from {table_id} to {}): \
                             give this stream a new checkpoint to read the new table",
                            m.id()
                        )));
                    }
                    check_readable(m.configuration())
                        .map_err(|e| self.err(format!("version {v}: {e}")))?;
                }
                Action::CommitInfo(ci) => {
                    operation = ci.operation.clone();
                    full_refresh = ci
                        .info
                        .get("autoloader")
                        .and_then(|a| a.get("reset"))
                        .and_then(|r| r.get("full"))
                        .and_then(serde_json::Value::as_bool)
                        .unwrap_or(false);
                }
                _ => {}
            }
        }
        if removes == 0 {
            return Ok(CommitEffect::Adds(adds));
        }
        if self.read.skip_change_commits {
            return Ok(CommitEffect::Skipped(
                "changes existing rows (skipChangeCommits=true)",
            ));
        }
        if self.read.ignore_deletes && adds.is_empty() {
            return Ok(CommitEffect::Skipped(
                "only deletes rows (ignoreDeletes=true)",
            ));
        }
        if full_refresh {
            return Err(self.err(format!(
                "version {v} is a full refresh of the table (autoloader reset): reset the \
                 tables that read it too (autoloader reset TABLE) to read it afresh, or set \
                 skipChangeCommits=true to go on from its rows as they land again"
            )));
        }
        let op = operation.unwrap_or_else(|| "an unnamed operation".into());
        Err(self.err(format!(
            "version {v} ({op}) removes {removes} data file(s): a stream reads appends only. \
             Set skipChangeCommits=true to pass over commits that change existing rows{}, or \
             reset this stream to read the table afresh",
            if adds.is_empty() {
                " (or ignoreDeletes=true, since this one only deletes)"
            } else {
                ""
            }
        )))
    }
}

/// The table's id, once loaded.
fn table_id(table: &DeltaTable) -> Result<String, String> {
    Ok(table
        .snapshot()
        .map_err(|e| e.to_string())?
        .metadata()
        .id()
        .to_string())
}

/// When a commit was made: its in-commit timestamp, if it has one.
fn commit_time(actions: &[Action]) -> Option<i64> {
    actions.iter().find_map(|a| match a {
        Action::CommitInfo(ci) => ci.in_commit_timestamp,
        _ => None,
    })
}

/// Refuses table features that change what a data file's rows mean.
fn check_readable(config: &std::collections::HashMap<String, String>) -> Result<(), String> {
    for (key, fine) in UNREADABLE_MODES {
        if let Some(mode) = config.get(*key)
            && mode != fine
        {
            return Err(format!(
                "the table uses {key}={mode}, which this reader cannot read yet"
            ));
        }
    }
    Ok(())
}

impl FileSource for DeltaTableSource {
    fn describe(&self) -> String {
        format!("delta:{}", self.files.describe())
    }

    fn uri(&self, key: &str) -> String {
        self.files.uri(key)
    }

    fn locate(&self, key: &str) -> FileLocation {
        self.files.locate(key)
    }

    fn list_files<'a>(
        &'a self,
        _after: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<FileRef>, SourceError>> {
        Box::pin(self.list())
    }

    fn complete_when_listed(&self) -> bool {
        true
    }

    fn keeps_order(&self) -> bool {
        true
    }

    fn overlap(&self, location: &Location) -> Overlap {
        self.files.overlap(location)
    }

    fn resume(&self, saved: Option<&str>) -> Result<(), SourceError> {
        let position = saved
            .map(serde_json::from_str::<Position>)
            .transpose()
            .map_err(|e| {
                self.err(format!(
                    "the checkpoint's source position is unreadable: {e}"
                ))
            })?;
        if let Some(p) = &position
            && self.read.starting.is_some()
        {
            tracing::warn!(table = %self.location, next = p.next, "startingVersion and startingTimestamp apply to a new stream only: this one goes on from its checkpoint (give it a new checkpoint to start elsewhere).");
        }
        self.lock().position = position;
        Ok(())
    }

    fn position(&self) -> Option<String> {
        let state = self.lock();
        state
            .position
            .as_ref()
            .map(|p| serde_json::to_string(p).expect("a position serializes"))
    }

    fn advance(&self) {
        let mut state = self.lock();
        if let Some(listed) = state.listed.take() {
            state.position = Some(listed);
        }
    }

    fn reads_delta(&self) -> bool {
        true
    }
}

/// Whether `location` holds a Delta table (a `_delta_log/` with at least one entry).
pub(super) async fn is_delta_table(
    location: &Location,
    storage: &StorageSettings,
) -> Result<bool, SourceError> {
    let table = crate::storage::unloaded_table(location, &storage.s3).map_err(|e| {
        SourceError::DeltaSource {
            table: location.to_string(),
            reason: e,
        }
    })?;
    let store = table.log_store().object_store(None);
    let mut listing = store.list(Some(&ObjectPath::from("_delta_log")));
    Ok(matches!(listing.next().await, Some(Ok(_))))
}
