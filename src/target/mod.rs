//! Where batches land. The [`Target`] seam is what the pipeline needs of a table, and
//! where exactly once rests: [`Target::commit`] lands a batch's rows together with
//! `txn(app_id, batch)` in one atomic commit, and [`Target::committed_batch`] tells after
//! a restart whether a batch already landed. `delta.rs` is the Delta append target;
//! `cdc.rs` applies changes by key into SCD 1 or 2 (and snapshots, as their differences),
//! taking its batch's rows through the same [`BatchWriter`]s and committing them its own
//! way.

use arrow_schema::SchemaRef;
use futures::future::BoxFuture;

pub mod cdc;
pub mod delta;
pub mod quarantine;
pub mod rewrite;

pub use cdc::CdcTarget;
pub use delta::{BatchWriter, BatchWriters, DeltaAppend, TargetError};

/// What a CDC batch did to its target (summed over a run for the summary).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeCounts {
    pub inserted: u64,
    pub updated: u64,
    pub deleted: u64,
    /// Change records ignored: not later than the key's applied sequence.
    pub stale: u64,
    /// Change records ignored: sequenced below a truncate (`status`'s "below a truncate").
    pub truncated: u64,
    /// Records of one key that shared a sequence (a fixed rule chose between them).
    pub ties: u64,
}

impl std::ops::AddAssign for ChangeCounts {
    fn add_assign(&mut self, o: ChangeCounts) {
        self.inserted += o.inserted;
        self.updated += o.updated;
        self.deleted += o.deleted;
        self.stale += o.stale;
        self.truncated += o.truncated;
        self.ties += o.ties;
    }
}

/// A table a stream writes into.
pub trait Target: Send + Sync {
    /// Whether the table exists yet (it is created with the first batch's schema).
    fn exists(&self) -> bool;

    /// The table version last read or committed.
    fn version(&self) -> Option<u64>;

    /// Creates the table with `schema` if it does not exist; returns whether this call
    /// created it (false when another writer did meanwhile).
    fn ensure_created<'a>(
        &'a mut self,
        schema: &'a SchemaRef,
        stream_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, TargetError>>;

    /// Reads what other writers committed since the last read (cheap).
    fn refresh(&mut self) -> BoxFuture<'_, Result<(), TargetError>>;

    /// Loads the table state afresh (bounds what a long-running stream holds).
    fn reload(&mut self) -> BoxFuture<'_, Result<(), TargetError>>;

    /// The last batch of `app_id` the table holds (its `txn` version).
    fn committed_batch<'a>(
        &'a mut self,
        app_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<i64>, TargetError>>;

    /// The commit records autoloader wrote, oldest first, with their commit times (ms):
    /// what a lost checkpoint is rebuilt from.
    fn autoloader_commits(
        &self,
    ) -> BoxFuture<'_, Result<Vec<(u64, serde_json::Value)>, TargetError>>;

    /// Sets table properties in one commit (none when the table has them); returns the
    /// new version.
    fn set_properties<'a>(
        &'a mut self,
        properties: &'a [(String, String)],
    ) -> BoxFuture<'a, Result<Option<u64>, TargetError>>;

    /// The table's current schema, once it exists.
    fn arrow_schema(&self) -> Result<Option<SchemaRef>, TargetError>;

    /// A writer for one batch's rows (a decoding thread may hold its own). Columns the
    /// rows add to the table go before the `keep_last` ones (`_metadata` stays last).
    fn writer(
        &self,
        schema: &SchemaRef,
        partition_columns: &[String],
        keep_last: &[String],
    ) -> Result<BatchWriter, TargetError>;

    /// What the last commit's changes did, for a target that applies changes by key.
    fn last_changes(&self) -> Option<ChangeCounts> {
        None
    }

    /// Commits what `writers` hold as batch `batch` of `app_id`, exactly once; returns the
    /// table version.
    fn commit<'a>(
        &'a mut self,
        writers: BatchWriters,
        app_id: &'a str,
        batch: u64,
        info: serde_json::Value,
    ) -> BoxFuture<'a, Result<u64, TargetError>>;
}

impl Target for DeltaAppend {
    fn exists(&self) -> bool {
        DeltaAppend::exists(self)
    }

    fn version(&self) -> Option<u64> {
        DeltaAppend::version(self)
    }

    fn ensure_created<'a>(
        &'a mut self,
        schema: &'a SchemaRef,
        stream_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, TargetError>> {
        Box::pin(DeltaAppend::ensure_created(self, schema, stream_id))
    }

    fn refresh(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(DeltaAppend::refresh(self))
    }

    fn reload(&mut self) -> BoxFuture<'_, Result<(), TargetError>> {
        Box::pin(DeltaAppend::reload(self))
    }

    fn committed_batch<'a>(
        &'a mut self,
        app_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<i64>, TargetError>> {
        Box::pin(DeltaAppend::committed_batch(self, app_id))
    }

    fn autoloader_commits(
        &self,
    ) -> BoxFuture<'_, Result<Vec<(u64, serde_json::Value)>, TargetError>> {
        Box::pin(DeltaAppend::autoloader_commits(self))
    }

    fn set_properties<'a>(
        &'a mut self,
        properties: &'a [(String, String)],
    ) -> BoxFuture<'a, Result<Option<u64>, TargetError>> {
        Box::pin(DeltaAppend::set_properties(self, properties))
    }

    fn arrow_schema(&self) -> Result<Option<SchemaRef>, TargetError> {
        if !self.exists() {
            return Ok(None);
        }
        DeltaAppend::arrow_schema(self).map(Some)
    }

    fn writer(
        &self,
        schema: &SchemaRef,
        partition_columns: &[String],
        keep_last: &[String],
    ) -> Result<BatchWriter, TargetError> {
        DeltaAppend::writer(self, schema, partition_columns, keep_last)
    }

    fn commit<'a>(
        &'a mut self,
        writers: BatchWriters,
        app_id: &'a str,
        batch: u64,
        info: serde_json::Value,
    ) -> BoxFuture<'a, Result<u64, TargetError>> {
        Box::pin(DeltaAppend::commit(self, writers, app_id, batch, info))
    }
}
