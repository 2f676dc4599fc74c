//! Competing workers (`--worker`): a live worker finishes what a dead one left. A slot
//! whose holder died keeps its unfinished batches (plans whose files its claims own, their
//! queue messages perhaps deleted already), which no other slot may take. A worker looks
//! at the other slots when it starts and at the end of a `--once` run: a slot it can lock
//! (its holder is gone; on S3 once the lease ran out) with unfinished plans is opened as
//! that slot, its plans replayed exactly as that slot's own restart would, and released.

use tracing::info;

use super::{IngestError, IngestRequest, Progress, StopFlag, StreamRun};
use crate::checkpoint::claims::{self, Worker};
use crate::checkpoint::{Checkpoint, CheckpointError};
use crate::telemetry::Hooks;

/// Replays the unfinished batches of the slots no live process holds, at most `limit` of
/// them (a watcher adopts one per pass, so its own stream waits one slot's replay at most);
/// returns the slots adopted.
pub(crate) async fn adopt_orphans(
    req: &IngestRequest,
    progress: &dyn Progress,
    stop: &StopFlag,
    hooks: &Hooks,
    limit: usize,
) -> Result<Vec<u32>, IngestError> {
    if req.worker.is_none() {
        return Ok(Vec::new());
    }
    let mut adopted = Vec::new();
    for slot in claims::slots(&req.checkpoint, &req.storage)? {
        if stop.is_stopped() || adopted.len() >= limit {
            break;
        }
        // A cheap look first: locked by a live worker, or nothing unfinished.
        let location = claims::slot_location(&req.checkpoint, slot);
        match Checkpoint::open(&location, &req.storage) {
            Ok(checkpoint) => {
                if checkpoint.pending_plans()?.1.is_empty() {
                    continue;
                }
            }
            Err(CheckpointError::Locked { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
        let mut as_slot = req.clone();
        as_slot.worker = Some(Worker::Slot(slot));
        let mut stream = match StreamRun::open(&as_slot, progress, hooks).await {
            Ok(stream) => stream,
            // Taken by another worker meanwhile: it finishes the slot.
            Err(IngestError::Checkpoint(CheckpointError::Locked { .. })) => continue,
            Err(e) => return Err(e),
        };
        let files = stream.pending_files();
        info!(
            slot,
            files, "Adopting a dead worker's slot: finishing its unfinished batches."
        );
        let started = std::time::Instant::now();
        let result = stream.ingest(Vec::new(), stop).await;
        stream.finish(result, started).await?;
        adopted.push(slot);
    }
    Ok(adopted)
}
