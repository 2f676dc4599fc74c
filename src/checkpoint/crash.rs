//! Crash counting and quarantine, as typed records in the checkpoint's metadata.
//!
//! A batch whose reading died with the process (a crash, not a reported error)
//! [`MAX_CRASHED_ATTEMPTS`] times has its files planned again one per batch (they become
//! suspects); a single file that does it again that often is quarantined: recorded,
//! reported, and not read again. Deaths are written only when a plan is re-run or ends
//! with a reported error, never on the normal path: a plan found unfinished at start-up
//! without a record died once.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::{Checkpoint, CheckpointError, FileRef, Plan};
use crate::clock::now_ms;

/// Deaths after which a batch is split, or its one file quarantined.
pub const MAX_CRASHED_ATTEMPTS: u32 = 3;

/// Metadata key: deaths counted against the unfinished plan being re-run ([`InFlight`]).
const META_IN_FLIGHT: &str = "inFlight";
/// Metadata key: files of a crashing batch, to be planned one per batch (a JSON list).
const META_SUSPECTS: &str = "suspectFiles";
/// Metadata key: quarantined files (a JSON list of [`QuarantinedFile`]).
const META_QUARANTINED: &str = "quarantinedFiles";

/// Deaths counted against one plan (a plan made again gets a new `planned_at_ms`, so an old
/// record never counts against it).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct InFlight {
    batch: u64,
    #[serde(default)]
    planned_at_ms: i64,
    attempts: u32,
}

/// A file that crashed the process every time it was read: not ingested, kept on record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuarantinedFile {
    /// The key relative to the source root.
    pub path: String,
    pub size: u64,
    pub mtime_ms: i64,
    /// When it was quarantined (ms since the epoch).
    pub at_ms: i64,
}

impl Checkpoint {
    /// Records that `deaths` processes died reading `plan` (0: it ended with a reported
    /// error, which does not count towards quarantine).
    pub fn set_deaths(&self, plan: &Plan, deaths: u32) -> Result<(), CheckpointError> {
        let record = InFlight {
            batch: plan.batch,
            planned_at_ms: plan.created_at_ms,
            attempts: deaths,
        };
        self.set_meta(
            META_IN_FLIGHT,
            &serde_json::to_string(&record).expect("records serialize"),
        )
    }

    /// How many processes died reading `plan`, found unfinished at start-up: the one that
    /// planned it, unless a record says otherwise.
    pub fn crashed_attempts(&self, plan: &Plan) -> Result<u32, CheckpointError> {
        let record: Option<InFlight> = self
            .meta(META_IN_FLIGHT)?
            .and_then(|v| serde_json::from_str(&v).ok());
        Ok(match record {
            Some(r) if r.batch == plan.batch && r.planned_at_ms == plan.created_at_ms => r.attempts,
            _ => 1,
        })
    }

    /// Files planned one per batch because a batch holding them crashed the process.
    pub fn suspects(&self) -> Result<HashSet<String>, CheckpointError> {
        Ok(self.suspect_list()?.into_iter().collect())
    }

    fn suspect_list(&self) -> Result<Vec<String>, CheckpointError> {
        Ok(self
            .meta(META_SUSPECTS)?
            .and_then(|v| serde_json::from_str(&v).ok())
            .unwrap_or_default())
    }

    fn set_suspects(&self, suspects: &[String]) -> Result<(), CheckpointError> {
        self.set_meta(
            META_SUSPECTS,
            &serde_json::to_string(suspects).expect("strings serialize"),
        )
    }

    /// A crashing batch of several files: its files become suspects and the plan is
    /// discarded, so they are planned again one per batch.
    pub fn isolate(&self, plan: &Plan) -> Result<(), CheckpointError> {
        let mut suspects = self.suspect_list()?;
        suspects.extend(plan.files.iter().map(|f| f.key.clone()));
        self.set_suspects(&suspects)?;
        self.discard_plan(plan.batch)
    }

    /// The quarantined files recorded in the checkpoint.
    pub fn quarantined(&self) -> Result<Vec<QuarantinedFile>, CheckpointError> {
        Ok(self
            .meta(META_QUARANTINED)?
            .and_then(|v| serde_json::from_str(&v).ok())
            .unwrap_or_default())
    }

    /// Quarantines the files of a crashing plan: recorded, no longer suspects, marked seen
    /// without their rows, and the plan discarded. Returns the records written.
    pub fn quarantine(&self, plan: &Plan) -> Result<Vec<QuarantinedFile>, CheckpointError> {
        let at_ms = now_ms();
        let added: Vec<QuarantinedFile> = plan
            .files
            .iter()
            .map(|f: &FileRef| QuarantinedFile {
                path: f.key.clone(),
                size: f.size,
                mtime_ms: f.mtime_ms,
                at_ms,
            })
            .collect();
        let mut quarantined = self.quarantined()?;
        quarantined.extend(added.iter().cloned());
        self.set_meta(
            META_QUARANTINED,
            &serde_json::to_string(&quarantined).expect("records serialize"),
        )?;
        let mut suspects = self.suspect_list()?;
        suspects.retain(|k| !plan.files.iter().any(|f| &f.key == k));
        self.set_suspects(&suspects)?;
        self.mark_existing(&Plan {
            batch: u64::MAX,
            files: plan.files.clone(),
            created_at_ms: at_ms,
        })?;
        self.discard_plan(plan.batch)?;
        Ok(added)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::tests::plan;

    #[test]
    fn deaths_count_only_against_the_same_plan() {
        let dir = tempfile::tempdir().unwrap();
        let c = Checkpoint::open_local(dir.path()).unwrap();
        let p = plan(0, &["a.json"]);
        assert_eq!(c.crashed_attempts(&p).unwrap(), 1, "unrecorded: died once");
        c.set_deaths(&p, 2).unwrap();
        assert_eq!(c.crashed_attempts(&p).unwrap(), 2);
        let remade = Plan {
            created_at_ms: 5,
            ..p.clone()
        };
        assert_eq!(
            c.crashed_attempts(&remade).unwrap(),
            1,
            "a new plan starts over"
        );
    }

    #[test]
    fn isolated_files_become_suspects_and_quarantine_clears_them() {
        let dir = tempfile::tempdir().unwrap();
        let c = Checkpoint::open_local(dir.path()).unwrap();
        let p = plan(0, &["a.json", "b.json"]);
        c.write_plan(&p).unwrap();
        c.isolate(&p).unwrap();
        let suspects = c.suspects().unwrap();
        assert!(suspects.contains("a.json") && suspects.contains("b.json"));
        assert!(
            c.pending_plans().unwrap().1.is_empty(),
            "the plan is discarded"
        );

        let one = plan(1, &["b.json"]);
        c.write_plan(&one).unwrap();
        let added = c.quarantine(&one).unwrap();
        assert_eq!(added.len(), 1);
        assert_eq!(c.quarantined().unwrap(), added);
        assert_eq!(
            c.suspects().unwrap().into_iter().collect::<Vec<_>>(),
            ["a.json"]
        );
        assert!(c.seen_files().unwrap().get("b.json").unwrap().is_some());
    }
}
