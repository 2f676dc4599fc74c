//! `events`: a stream's event log, filtered.

use crate::reports::{ReportError, StreamCheckpoint, is_checkpoint};

use crate::storage::StorageSettings;
use crate::telemetry::events::{self, Event, EventKind};

/// Events of checkpoints (merged by time when there are several), filtered by type and
/// time. The event log is local: an S3 checkpoint's is in its local cache, so it holds what
/// ran on this machine.
pub fn filtered_events(
    checkpoints: &[StreamCheckpoint],
    state: &StorageSettings,
    kinds: &[EventKind],
    since_ms: Option<i64>,
) -> Result<Vec<Event>, ReportError> {
    let mut all = Vec::new();
    for c in checkpoints {
        // A path that is not a checkpoint has no events: say so rather than print nothing.
        if !is_checkpoint(&c.location, state)? {
            return Err(ReportError::NotACheckpoint {
                path: c.location.to_string(),
            });
        }
        let local = crate::checkpoint::local_dir(&c.location, state);
        all.extend(
            events::read_events(&local).map_err(|source| ReportError::Io {
                path: c.location.to_string(),
                source,
            })?,
        );
    }
    if checkpoints.len() > 1 {
        // RFC 3339 UTC with milliseconds: the text sorts as the time; stable for ties.
        all.sort_by(|a, b| a.time.cmp(&b.time));
    }
    Ok(all
        .into_iter()
        .filter(|e| kinds.is_empty() || kinds.contains(&e.kind))
        .filter(|e| {
            since_ms.is_none_or(|s| {
                chrono::DateTime::parse_from_rfc3339(&e.time)
                    .is_ok_and(|t| t.timestamp_millis() >= s)
            })
        })
        .collect())
}
