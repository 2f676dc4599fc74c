//! Running a stream once over every file present now (Auto Loader's AvailableNow).

use super::{IngestError, IngestRequest, StopFlag, Summary, adopt, unsettled};
use crate::pipeline::{CLEAN_BUDGET, Instant, Progress, StreamRun};
use crate::telemetry::Hooks;

/// Runs the stream once over every file present now (Auto Loader's AvailableNow), stopping
/// between batches when `stop` is set.
pub async fn run_once(
    req: &IngestRequest,
    progress: &dyn Progress,
    stop: &StopFlag,
    hooks: &Hooks,
) -> Result<Summary, IngestError> {
    let started = Instant::now();
    adopt::adopt_orphans(req, progress, stop, hooks, usize::MAX).await?;
    let mut stream = StreamRun::open(req, progress, hooks).await?;
    let mut still_written = 0;
    let result = async {
        let files = stream.discover().await?;
        let (files, unsettled) = unsettled::split(req, files, crate::clock::now_ms());
        if !unsettled.is_empty() {
            let shown: Vec<&str> = unsettled.iter().take(5).map(|f| f.key.as_str()).collect();
            tracing::warn!(
                files = unsettled.len(),
                first = %shown.join(", "),
                "Files still being written (open for writing, or where that cannot be told, \
                 modified within cloudFiles.settleTime) are left for the next run."
            );
        }
        still_written = unsettled.len() as u64;
        let total_files = files.len() as u64 + stream.pending_files();
        let total_bytes = files.iter().map(|f| f.size).sum::<u64>() + stream.pending_bytes();
        stream.set_pending(total_files);
        progress.start(total_files, total_bytes);
        stream.ingest(files, stop).await?;
        // A queue holding more than one discovery takes: drained until it is empty.
        while stream.more_queued() && !stop.is_stopped() {
            let files = stream.discover().await?;
            stream.ingest(files, stop).await?;
        }
        // cleanSource: at the end of the run, everything due.
        while !stop.is_stopped() && stream.clean_source(CLEAN_BUDGET).await? {}
        progress.finish();
        Ok(())
    }
    .await;
    let mut summary = stream.finish(result, started).await?;
    summary.unsettled_files = still_written;
    drop(stream);
    // A drain leaves no slot's batch unfinished: those of workers that died meanwhile too.
    adopt::adopt_orphans(req, progress, stop, hooks, usize::MAX).await?;
    Ok(summary)
}
