//! `run CONFIG` with several streams: each is checked before any of them runs, so a
//! mistake in one flow never leaves the others' tables, checkpoints or `_schemas/0`
//! written. A flow's `where`, columns, expectations and CDC settings are bound to its schema: the stored
//! version, or (on a first run) what inference would write, unwritten, as `ingest
//! --dry-run` does. No checkpoint is opened (its lock is the running stream's to take); a
//! changed definition is refused by each stream as it opens, and `run --check` reviews
//! every one beforehand.

use super::{IngestError, IngestRequest};
use crate::checkpoint::Checkpoint;
use crate::flow::Columns;
use crate::schema::store::SchemaStore;

/// Checks `req` as its run would, before anything is written.
pub async fn precheck(req: &IngestRequest) -> Result<(), IngestError> {
    let binds = req.flow.condition.is_some()
        || !req.flow.expectations.is_empty()
        || !matches!(req.flow.columns, Columns::All)
        || req.cdc.is_some();
    // A Delta source another stream of this run creates has nothing to read yet.
    if !binds || req.settings.delta.created_by_run {
        return Ok(());
    }
    let store = SchemaStore::open(&req.settings.schema_location, &req.storage)?;
    match store.latest()? {
        Some(version) => {
            let layout = super::schema::layout_for(&version, req);
            req.table_schema(&layout).map(|_| ())
        }
        // A first run: what inference would write (a checkpoint holding no schema yet is
        // left to its stream, which checks before writing `_schemas/0`).
        None if !Checkpoint::exists(&req.checkpoint, &req.storage)? => {
            super::dry_run(req).await.map(|_| ())
        }
        None => Ok(()),
    }
}
