//! Recovery of a lost or damaged checkpoint from the table's commit history: every
//! autoloader commit records its stream id, batch, source and files.

use tracing::warn;

use super::{Checkpoint, CheckpointError, CommitSummary, FileRef, Plan};
use crate::clock::now_ms;

impl Checkpoint {
    /// Rebuilds this fresh checkpoint from `commits` (the table's autoloader commit
    /// records, oldest first): finds the stream's earlier identity (`schema_stream_id`, the
    /// stream id in the surviving `_schemas/N`, else the commits whose recorded source is
    /// `source`), adopts it so `txn` versions continue, and marks every file those commits
    /// hold as ingested. Nothing is ingested twice.
    pub fn recover_from_commits(
        &mut self,
        commits: &[(u64, serde_json::Value)],
        schema_stream_id: Option<&str>,
        source: &str,
    ) -> Result<(), CheckpointError> {
        if commits.is_empty() {
            return Ok(());
        }
        let stream_of = |c: &serde_json::Value| {
            c.get("streamId")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
        };
        let ours: Vec<String> = match schema_stream_id {
            Some(id)
                if commits
                    .iter()
                    .any(|(_, c)| stream_of(c).as_deref() == Some(id)) =>
            {
                vec![id.to_string()]
            }
            _ => {
                let mut ids: Vec<String> = commits
                    .iter()
                    .filter(|(_, c)| {
                        c.get("source").and_then(serde_json::Value::as_str) == Some(source)
                    })
                    .filter_map(|(_, c)| stream_of(c))
                    .collect();
                ids.dedup();
                ids
            }
        };
        let Some(adopt) = ours.last().cloned() else {
            return Ok(());
        };
        let mut files = 0usize;
        let mut batches = 0usize;
        let mut source_position = None;
        for (_, c) in commits {
            let Some(id) = stream_of(c) else { continue };
            if !ours.contains(&id) {
                continue;
            }
            // The table's creation commit names the stream but holds no batch.
            let Some(batch) = c.get("batch").and_then(serde_json::Value::as_u64) else {
                continue;
            };
            let planned: Vec<FileRef> = c
                .get("files")
                .and_then(serde_json::Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|f| {
                    Some(FileRef {
                        key: f.get("path")?.as_str()?.to_string(),
                        size: f.get("size")?.as_u64()?,
                        mtime_ms: f.get("mtimeMs")?.as_i64()?,
                    })
                })
                .collect();
            files += planned.len();
            batches += 1;
            let plan = Plan {
                batch,
                files: planned,
                created_at_ms: now_ms(),
            };
            if let Some(p) = c.get("sourcePosition") {
                source_position = Some(p.to_string());
            }
            // Batches of an older identity are only needed for their files.
            if id == adopt {
                self.restore_batch(&plan, &CommitSummary::default())?;
            } else {
                self.mark_existing(&Plan {
                    batch: u64::MAX,
                    ..plan
                })?;
            }
        }
        if let Some(position) = source_position {
            // A table source resumes where its last batch was planned, not at a new snapshot.
            self.set_meta(super::SOURCE_POSITION, &position)?;
        }
        self.adopt_stream_id(&adopt)?;
        self.set_meta("initialized", &now_ms().to_string())?;
        warn!(
            stream_id = %adopt, batches, files,
            "Checkpoint rebuilt from the table's commit history; those files will not be ingested again."
        );
        Ok(())
    }
}
