//! Many streams in one process (`autoloader run streams.toml`): each runs concurrently with
//! its own checkpoint, schema location and Delta app id, and stops between batches when
//! the shared stop flag is set.

use crate::pipeline::run_once;
use std::time::Duration;

use super::{IngestError, IngestRequest, NoProgress, StopFlag, Summary};
use crate::pipeline::watch::{WatchTiming, run_watch};
use crate::telemetry::Hooks;

/// How the streams run: once over what has landed, or watching.
#[derive(Debug, Clone, Copy)]
pub enum RunMode {
    /// Ingest what has landed, then return (Auto Loader's AvailableNow).
    Once,
    /// Watch, listing each source at least this often, until the stop flag is set.
    Watch { poll_interval: Duration },
}

impl RunMode {
    /// The watch timing of `req` in this mode (`None` for [`RunMode::Once`]).
    pub fn timing(self, req: &IngestRequest) -> Option<WatchTiming> {
        match self {
            RunMode::Once => None,
            RunMode::Watch { poll_interval } => Some(WatchTiming {
                poll_interval: poll_interval.max(Duration::from_millis(50)),
                settle: req.settings.settle_time,
            }),
        }
    }
}

/// Runs one stream in `mode`.
pub async fn run_stream(
    req: &IngestRequest,
    progress: &dyn super::Progress,
    stop: &StopFlag,
    mode: RunMode,
    hooks: &Hooks,
) -> Result<Summary, IngestError> {
    if let Some(flow) = &req.once {
        // A ONCE flow runs to completion (or is skipped), in watch mode too.
        return super::once::run(req, flow, progress, stop, hooks).await;
    }
    match mode.timing(req) {
        None => run_once(req, progress, stop, hooks).await,
        Some(timing) => run_watch(req, progress, stop, timing, hooks).await,
    }
}

/// Runs every stream concurrently; returns each stream's name and outcome, in order.
pub async fn run_streams(
    streams: Vec<(IngestRequest, Hooks)>,
    stop: &StopFlag,
    mode: RunMode,
) -> Vec<(String, Result<Summary, IngestError>)> {
    // Each stream says when it is done, for the streams reading its table.
    let mut senders = Vec::new();
    let mut done = std::collections::HashMap::new();
    for (req, _) in &streams {
        let (tx, rx) = tokio::sync::watch::channel(false);
        senders.push(tx);
        done.insert(req.name.clone(), rx);
    }
    let mut tasks = Vec::new();
    for ((req, hooks), finished) in streams.into_iter().zip(senders) {
        let stop = stop.clone();
        // With --once, a stream reading another's table waits for it: one run carries
        // bronze into silver. Watching, each polls the other anyway.
        let waits: Vec<_> = match mode {
            RunMode::Once => req
                .upstream
                .iter()
                .filter_map(|name| done.get(name).cloned())
                .collect(),
            RunMode::Watch { .. } => Vec::new(),
        };
        tasks.push((
            req.name.clone(),
            tokio::spawn(async move {
                for mut upstream in waits {
                    let _ = upstream.wait_for(|finished| *finished).await;
                }
                let result = run_stream(&req, &NoProgress, &stop, mode, &hooks).await;
                let _ = finished.send(true);
                result
            }),
        ));
    }
    let mut results = Vec::new();
    for (name, task) in tasks {
        let result = task.await.unwrap_or_else(|e| {
            Err(IngestError::Internal(format!(
                "the stream's task failed: {e}"
            )))
        });
        results.push((name, result));
    }
    results
}
