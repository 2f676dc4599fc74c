//! A checkpoint's data: its store's tables, plans and commit summaries, its errors, and the `DurableRecord` seam between a local checkpoint and one kept on S3. Every file of `checkpoint/` reads these; they use none of them.

use crate::source::FileRef;
use crate::storage::object_dir::RemoteError;
use redb::{Database, TableDefinition};
use serde::{Deserialize, Serialize};
use std::fs::{self, File};
use std::path::{Path, PathBuf};

/// Ingested files: source key → (size, mtime ms, batch).
pub(crate) const FILES: TableDefinition<&str, (u64, i64, u64)> = TableDefinition::new("files");
/// Batch plans: batch → plan JSON.
pub(crate) const PLANS: TableDefinition<u64, &str> = TableDefinition::new("plans");
/// Committed batches: batch → summary JSON.
pub(crate) const COMMITS: TableDefinition<u64, &str> = TableDefinition::new("commits");
/// Stream metadata: key → value.
pub(crate) const META: TableDefinition<&str, &str> = TableDefinition::new("meta");

pub(crate) const STATE_FILE: &str = "state.redb";
/// The metadata key of a source's own position (a Delta table source's next version).
pub const SOURCE_POSITION: &str = "sourcePosition";
/// Page cache of the state store.
pub(crate) const STATE_CACHE_BYTES: usize = 16 << 20;
pub(crate) const LOCK_FILE: &str = "lock";
/// The S3 object that records a checkpoint's stream id.
pub(crate) const STREAM_OBJECT: &str = "stream";

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error(
        "checkpoint {path} is in use by another autoloader process ({holder}); stop it or use another --checkpoint"
    )]
    Locked { path: PathBuf, holder: String },
    #[error("cannot use checkpoint {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("checkpoint state {path} cannot be read or written: {reason}")]
    Store { path: PathBuf, reason: String },
    #[error("checkpoint {path} has a plan for batch {batch} that does not match: {reason}")]
    PlanConflict {
        path: PathBuf,
        batch: u64,
        reason: String,
    },
    #[error("checkpoint {0}")]
    Remote(#[from] RemoteError),
}

/// The files of one batch, fixed before any of them is read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub batch: u64,
    pub files: Vec<FileRef>,
    pub created_at_ms: i64,
}

/// What a committed batch did (kept for status reports).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct CommitSummary {
    pub table_version: u64,
    pub rows: u64,
    pub rescued_rows: u64,
    pub bytes: u64,
    pub schema_version: u64,
    /// Files skipped as corrupt (`ignoreCorruptFiles`) or missing (`ignoreMissingFiles`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// The keys of those files (their rows are not in the table: never cleaned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_keys: Vec<String>,
}

/// An entry of the file index: the file as it was ingested, and the batch that took it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestedFile {
    pub file: FileRef,
    pub batch: u64,
}

/// An open, locked checkpoint.
pub struct Checkpoint {
    pub(crate) dir: PathBuf,
    pub(crate) db: Database,
    /// Held for the life of the process; the OS releases it if the process dies.
    pub(crate) _lock: File,
    pub(crate) stream_id: String,
    /// Where every write lands first: nowhere else for a local checkpoint (the store is
    /// the record), the objects under an S3 prefix for an S3 one (the store is its cache).
    pub(crate) record: Box<dyn DurableRecord>,
    /// A read-only copy's folder ([`Checkpoint::open_to_read`]), removed when it closes
    /// (declared last: dropped after the store).
    pub(crate) scratch: Option<ScratchDir>,
}

/// A folder removed when dropped.
pub(crate) struct ScratchDir(pub(crate) PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The durable side of a checkpoint's writes, reached before the local store: the seam
/// between a local checkpoint and one kept on an object store.
pub(crate) trait DurableRecord: Send + Sync {
    /// Where the durable record lives, for messages; `None`: the local folder.
    fn describe(&self) -> Option<String>;
    /// The stream's identity (a recovered one replaces it).
    fn put_stream_id(&self, id: &str) -> Result<(), CheckpointError>;
    fn put_meta(&self, key: &str, value: &str) -> Result<(), CheckpointError>;
    /// A plan, create-only: a different plan already recorded for its batch is refused.
    fn put_plan(&self, plan: &Plan) -> Result<(), CheckpointError>;
    fn put_commit(&self, plan: &Plan, summary: &CommitSummary) -> Result<(), CheckpointError>;
    fn delete_plan(&self, batch: u64) -> Result<(), CheckpointError>;
    /// Files marked seen without being ingested.
    fn put_existing(&self, plan: &Plan) -> Result<(), CheckpointError>;
    /// Moves the record's progress into `folder` under it (a reset), `_schemas` too unless
    /// `keep_schema`, calling `step` after each move; the stream identity goes last.
    /// Nothing for a local checkpoint, whose files are moved by `aside.rs`.
    fn set_aside(
        &self,
        _folder: &str,
        _keep_schema: bool,
        _step: &dyn Fn(),
    ) -> Result<(), CheckpointError> {
        Ok(())
    }
}

/// A local checkpoint: the redb store is the durable record itself.
pub(crate) struct LocalRecord;

impl DurableRecord for LocalRecord {
    fn describe(&self) -> Option<String> {
        None
    }
    fn put_stream_id(&self, _id: &str) -> Result<(), CheckpointError> {
        Ok(())
    }
    fn put_meta(&self, _key: &str, _value: &str) -> Result<(), CheckpointError> {
        Ok(())
    }
    fn put_plan(&self, _plan: &Plan) -> Result<(), CheckpointError> {
        Ok(())
    }
    fn put_commit(&self, _plan: &Plan, _summary: &CommitSummary) -> Result<(), CheckpointError> {
        Ok(())
    }
    fn delete_plan(&self, _batch: u64) -> Result<(), CheckpointError> {
        Ok(())
    }
    fn put_existing(&self, _plan: &Plan) -> Result<(), CheckpointError> {
        Ok(())
    }
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError + '_ {
    move |source| CheckpointError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A checkpoint's batches as its durable record says, read without its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordFigures {
    /// The number of the last committed batch.
    pub last_batch: Option<u64>,
    /// Files of the plans after the last commit (planned, not committed yet).
    pub pending_files: u64,
    /// Batches committed.
    pub batches: u64,
}
