//! `cloudFiles.cleanSource`: files of committed batches deleted or moved out of the
//! source once the retention has passed since their batch was planned.
//!
//! A cursor in the checkpoint (`cleanSourceNextBatch`) names the first batch not cleaned
//! whole; batches are taken in order, and only committed ones (their rows are in the
//! table and the checkpoint marked them). A file is cleaned only while the file index
//! still names this batch for its key (a later batch that took the key again cleans it
//! then) and was not skipped; the source checks it is still the file ingested. A kill
//! mid-batch leaves the cursor on it, and the files already cleaned are found gone. A
//! failure is a warning and an event; the batch is tried again next cycle.

use serde_json::json;
use tracing::{info, warn};

use super::IngestError;
use crate::checkpoint::Checkpoint;
use crate::clock::now_ms;
use crate::options::{CleanAction, CleanSource};
use crate::source::{Cleaned, Source};
use crate::telemetry::Telemetry;
use crate::telemetry::events::{Severity, kind};

/// The checkpoint's cursor: the first batch not yet cleaned whole.
const CURSOR: &str = "cleanSourceNextBatch";

/// What one cleaning pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CleanPass {
    pub cleaned: u64,
    pub failed: u64,
    /// Whether batches due remain (the budget ran out).
    pub more: bool,
}

/// Cleans the files of due batches, at most `budget` files.
pub(crate) async fn clean_due(
    checkpoint: &Checkpoint,
    source: &Source,
    clean: &CleanSource,
    telemetry: &Telemetry,
    budget: u64,
) -> Result<CleanPass, IngestError> {
    let mut pass = CleanPass::default();
    let Some(last) = checkpoint.last_committed()? else {
        return Ok(pass);
    };
    let retention_ms = i64::try_from(clean.retention.as_millis()).unwrap_or(i64::MAX);
    let due_before = now_ms().saturating_sub(retention_ms);
    let mut batch: u64 = checkpoint
        .meta(CURSOR)?
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let seen = checkpoint.seen_files()?;
    let (verb, to) = match &clean.action {
        CleanAction::Delete => ("DELETE", None),
        CleanAction::Move(d) => ("MOVE", Some(d.to_string())),
    };
    let mut worked = 0u64;
    while batch <= last {
        let Some((plan, summary)) = checkpoint.committed(batch)? else {
            // Not a committed batch (the number of a discarded plan), or no plan kept.
            batch += 1;
            checkpoint.set_meta(CURSOR, &batch.to_string())?;
            continue;
        };
        if plan.created_at_ms > due_before {
            break;
        }
        if !summary.skipped.is_empty() && summary.skipped_keys.is_empty() {
            // Written before skipped files were recorded by key: which of its files have
            // their rows in the table is unknown, so none is cleaned.
            warn!(
                batch,
                "A batch with skipped files, committed by an older version, is not cleaned."
            );
            batch += 1;
            checkpoint.set_meta(CURSOR, &batch.to_string())?;
            continue;
        }
        let mut failed_here = false;
        for file in &plan.files {
            if summary.skipped_keys.contains(&file.key)
                || seen.get(&file.key)?.is_none_or(|e| e.batch != batch)
            {
                continue;
            }
            if worked >= budget {
                pass.more = true;
                return Ok(pass);
            }
            worked += 1;
            match source.clean(file, &clean.action).await {
                Ok(Cleaned::Done) => {
                    pass.cleaned += 1;
                    telemetry.emit(
                        Severity::Info,
                        kind::FILE_CLEANED,
                        json!({ "file": source.uri(&file.key), "action": verb, "destination": to, "batch": batch }),
                    );
                }
                Ok(Cleaned::Gone | Cleaned::Replaced) => {}
                Err(e) => {
                    pass.failed += 1;
                    failed_here = true;
                    warn!(file = %source.uri(&file.key), error = %e, "Cannot clean an ingested file (cloudFiles.cleanSource); trying again later.");
                    telemetry.emit(
                        Severity::Warning,
                        kind::CLEAN_FAILED,
                        json!({ "file": source.uri(&file.key), "action": verb, "error": e.to_string(), "batch": batch }),
                    );
                }
            }
        }
        if failed_here {
            // The cursor stays: the batch is tried again in the next pass.
            pass.more = true;
            break;
        }
        batch += 1;
        checkpoint.set_meta(CURSOR, &batch.to_string())?;
    }
    if pass.cleaned > 0 {
        info!(
            files = pass.cleaned,
            action = verb,
            "Cleaned ingested files from the source."
        );
    }
    Ok(pass)
}
