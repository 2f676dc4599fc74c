//! A stream's checkpoint against its table's reset generation: a checkpoint made before the
//! table's last reset holds progress the reset cleared. `reset` sets such checkpoints
//! aside itself; when it was killed before it could, the stream finishes the job here
//! (the same move, the same `--keep-schema` choice, read from the reset commit), so a
//! reset is never half-applied. A fresh checkpoint is stamped with the current generation.

use tracing::warn;

use super::{IngestError, IngestRequest};
use crate::checkpoint::Checkpoint;
use crate::target::DeltaAppend;

/// The stream's checkpoint for the table's current generation: `checkpoint` itself, or a
/// fresh one after setting a stale one aside.
pub(super) async fn current(
    checkpoint: Checkpoint,
    location: &crate::location::Location,
    table: &DeltaAppend,
    req: &IngestRequest,
) -> Result<Checkpoint, IngestError> {
    let generation = table.reset_generation()?;
    let mut checkpoint = checkpoint;
    if checkpoint.is_stale(generation)? {
        let keep_schema = table
            .last_reset()
            .await?
            .and_then(|r| r.get("keepSchema").and_then(serde_json::Value::as_bool))
            .unwrap_or(false);
        let aside = checkpoint.set_aside(
            &crate::checkpoint::aside::aside_name(generation),
            keep_schema,
            &req.settings.schema_location,
            &|| {},
        )?;
        warn!(
            stream = %req.name, generation, kept = %aside,
            "The table was reset after this checkpoint was made; set it aside (finishing the reset) and starting afresh."
        );
        checkpoint = Checkpoint::open(location, &req.storage)?;
    }
    checkpoint.stamp_generation(generation)?;
    Ok(checkpoint)
}
