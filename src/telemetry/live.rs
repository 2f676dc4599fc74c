//! What a running stream shows `autoloader status`: while it runs, its checkpoint's store
//! is locked (redb opens a store for one process), so the stream keeps `live.json` in the
//! checkpoint's local folder (an S3 checkpoint's cache, beside `events.jsonl`) up to date:
//! the checkpoint's totals when it opened, plus what each batch since added, and the files
//! pending at the last listing. It is replaced whole (written aside, then renamed), so a
//! reader never sees half of it; `status` reads it only while the checkpoint is locked.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// File name of the live figures inside the checkpoint's local folder.
pub const LIVE_FILE: &str = "live.json";

/// The figures of a running stream, as of `updated_at` (when they last changed).
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LiveStatus {
    /// RFC 3339 UTC.
    pub updated_at: String,
    pub pid: u32,
    /// Files in the checkpoint's index (ingested, or skipped as existing or quarantined).
    pub files_ingested: u64,
    /// Files listed and not yet ingested, at the last listing (and unfinished plans).
    pub files_pending: u64,
    pub batches: u64,
    /// The number of the last batch committed.
    pub last_batch: Option<u64>,
    pub rows: u64,
    pub rescued_rows: u64,
    pub bytes: u64,
    pub schema_version: Option<u64>,
}

/// The live figures of one running stream.
#[derive(Debug)]
pub struct Live {
    path: PathBuf,
    state: Mutex<LiveStatus>,
}

impl Live {
    pub fn new(dir: &Path) -> Live {
        Live {
            path: dir.join(LIVE_FILE),
            state: Mutex::new(LiveStatus::default()),
        }
    }

    /// Changes the figures and writes them when they changed (a watcher lists every few
    /// seconds; an idle one writes nothing). A file that cannot be written never stops
    /// ingestion (the failure is logged).
    pub fn update(&self, change: impl FnOnce(&mut LiveStatus)) {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = state.clone();
        change(&mut state);
        if *state == before && !before.updated_at.is_empty() {
            return;
        }
        state.updated_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        state.pid = std::process::id();
        let aside = self.path.with_extension("json.tmp");
        let text = serde_json::to_vec(&*state).expect("live figures serialize");
        if let Err(e) = fs::write(&aside, text).and_then(|()| fs::rename(&aside, &self.path)) {
            tracing::warn!(path = %self.path.display(), error = %e, "Cannot write the live status.");
        }
    }
}

/// The live figures a running stream wrote in `dir`, if any.
pub fn read(dir: &Path) -> Option<LiveStatus> {
    let text = fs::read(dir.join(LIVE_FILE)).ok()?;
    serde_json::from_slice(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_are_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), None);
        let live = Live::new(dir.path());
        live.update(|l| l.files_ingested = 3);
        live.update(|l| l.rows += 7);
        let back = read(dir.path()).unwrap();
        assert_eq!((back.files_ingested, back.rows), (3, 7));
        // No change, no write.
        std::fs::remove_file(dir.path().join(LIVE_FILE)).unwrap();
        live.update(|l| l.rows += 0);
        assert_eq!(read(dir.path()), None);
        assert_eq!(back.pid, std::process::id());
        assert!(back.updated_at.starts_with("20"), "{back:?}");
    }
}
