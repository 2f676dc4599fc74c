//! `run CONFIG` with several streams: each is checked before any of them runs, so a
//! mistake in one flow never leaves the others' tables, checkpoints or `_schemas/0`
//! written. A flow's definition is compared with its recorded one, and its `where`,
//! columns and CDC settings are bound to its schema: the stored version, or (on a first
//! run) what inference would write, unwritten, as `ingest --dry-run` does.

use super::{IngestError, IngestRequest};
use crate::flow::Columns;
use crate::schema::store::SchemaStore;

/// Checks `req` as its run would, before anything is written.
pub async fn precheck(req: &IngestRequest) -> Result<(), IngestError> {
    let review = super::definition::review(req).await?;
    if let Some(refused) = review.refusal(req) {
        return Err(refused);
    }
    let binds = req.flow.condition.is_some()
        || !matches!(req.flow.columns, Columns::All)
        || req.cdc.is_some();
    // A Delta source another stream of this run creates has nothing to read yet.
    if !binds || req.settings.delta.created_by_run {
        return Ok(());
    }
    let store = SchemaStore::open(&req.settings.schema_location, &req.storage)?;
    match store.latest()? {
        Some(version) => {
            let layout = super::active_schema::layout_for(&version, &req.settings);
            req.table_schema(&layout).map(|_| ())
        }
        None => super::dry_run(req).await.map(|_| ()),
    }
}
