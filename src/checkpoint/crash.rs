//! Crash counting and quarantine, as typed records in the checkpoint's metadata.
//!
//! A batch whose reading died with the process (a crash, not a reported error)
//! [`MAX_CRASHED_ATTEMPTS`] times has its files planned again one per batch (they become
//! suspects); a single file that does it again that often is quarantined: recorded,
//! reported, and not read again. Only a death while a re-run read the batch's files
//! counts: a re-run records that it is reading before it starts and that it has read
//! every file before it commits, so a process killed from outside while it starts up or
//! commits (a deploy, a liveness probe, a preempted node) never counts against the files.
//! A plan's first run writes nothing (the normal path stays free of it), so its death,
//! wherever it came, is not counted either.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::{Checkpoint, CheckpointError, FileRef, Plan};
use crate::clock::now_ms;

/// Re-runs that died reading a batch's files, after which it is split, or its one file
/// quarantined.
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
    /// Deaths while reading, counted so far.
    attempts: u32,
    /// A re-run was reading the files when this was written: found at start-up, it died
    /// reading them, one more death. (Absent in older records, whose `attempts` already
    /// counted the re-run in progress.)
    #[serde(default)]
    reading: bool,
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
    /// Before a re-run of `plan` reads its files: `deaths` so far, and that this process
    /// is reading, so its own death counts if it comes before [`Self::rerun_read_all`].
    pub fn rerun_reading(&self, plan: &Plan, deaths: u32) -> Result<(), CheckpointError> {
        self.set_in_flight(plan, deaths, true)
    }

    /// A re-run of `plan` has read every file: a death from here on (writing the commit)
    /// is not the files' fault.
    pub fn rerun_read_all(&self, plan: &Plan, deaths: u32) -> Result<(), CheckpointError> {
        self.set_in_flight(plan, deaths, false)
    }

    /// `plan` ended with a reported error: no process died on it, the count starts over.
    pub fn clear_deaths(&self, plan: &Plan) -> Result<(), CheckpointError> {
        self.set_in_flight(plan, 0, false)
    }

    fn set_in_flight(
        &self,
        plan: &Plan,
        deaths: u32,
        reading: bool,
    ) -> Result<(), CheckpointError> {
        let record = InFlight {
            batch: plan.batch,
            planned_at_ms: plan.created_at_ms,
            attempts: deaths,
            reading,
        };
        self.set_meta(
            META_IN_FLIGHT,
            &serde_json::to_string(&record).expect("records serialize"),
        )
    }

    /// How many processes died reading `plan`, found unfinished at start-up: those its
    /// re-runs recorded, the last one included if it died still reading.
    pub fn crashed_attempts(&self, plan: &Plan) -> Result<u32, CheckpointError> {
        let record: Option<InFlight> = self
            .meta(META_IN_FLIGHT)?
            .and_then(|v| serde_json::from_str(&v).ok());
        Ok(match record {
            Some(r) if r.batch == plan.batch && r.planned_at_ms == plan.created_at_ms => {
                r.attempts + u32::from(r.reading)
            }
            _ => 0,
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
        assert_eq!(
            c.crashed_attempts(&p).unwrap(),
            0,
            "a first run's death is not counted: nothing says it died reading"
        );
        c.rerun_reading(&p, 2).unwrap();
        assert_eq!(c.crashed_attempts(&p).unwrap(), 3, "died reading");
        c.rerun_read_all(&p, 2).unwrap();
        assert_eq!(c.crashed_attempts(&p).unwrap(), 2, "died committing");
        let remade = Plan {
            created_at_ms: 5,
            ..p.clone()
        };
        assert_eq!(
            c.crashed_attempts(&remade).unwrap(),
            0,
            "a new plan starts over"
        );
        c.rerun_reading(&p, 1).unwrap();
        c.clear_deaths(&p).unwrap();
        assert_eq!(c.crashed_attempts(&p).unwrap(), 0, "a reported error");
        // A record from before `reading` existed counted the re-run in progress already.
        let old = format!(
            r#"{{"batch":{},"plannedAtMs":{},"attempts":2}}"#,
            p.batch, p.created_at_ms
        );
        c.set_meta(META_IN_FLIGHT, &old).unwrap();
        assert_eq!(c.crashed_attempts(&p).unwrap(), 2);
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
