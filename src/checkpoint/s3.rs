//! A checkpoint kept on S3 (`s3://bucket/prefix`). S3 holds the durable record, written
//! before the local cache: the stream id (`stream`), each plan (`plans/N`, a create-only
//! put), each committed batch with its files (`commits/N`), files skipped at the first
//! start (`existing/...`), metadata (`meta/KEY`), and a lease (`lock`) naming the holder.
//! A cache that does not match S3 (a new machine, a lost disk, another host ran the stream
//! meanwhile) is rebuilt from it.

use std::fs;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use url::Url;

use super::lease::{self, Lease};
use super::{
    Checkpoint, CheckpointError, CommitSummary, DurableRecord, Plan, RecordFigures, STATE_FILE,
    STREAM_OBJECT, io_err,
};
use crate::clock::now_ms;
use crate::storage::StorageSettings;
use crate::storage::object_dir::RemoteDir;

/// Object names on S3 sort by batch: zero-padded.
fn batch_key(batch: u64) -> String {
    format!("{batch:020}.json")
}

/// A committed batch as recorded on S3: enough to rebuild the cache.
#[derive(Serialize, Deserialize)]
struct CommitRecord {
    plan: Plan,
    summary: CommitSummary,
}

/// The stream's identity, recorded once on S3.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StreamRecord {
    stream_id: String,
}

/// A checkpoint's S3 side: the folder and the lease held on it.
struct S3Record {
    dir: RemoteDir,
    _lease: Lease,
}

/// The local cache folder of the checkpoint under `url`: named after it, readable, with a
/// hash that keeps two URLs that read alike (`a/b_c`, `a_b/c`) apart.
pub(super) fn cache_dir(url: &Url, state: &StorageSettings) -> PathBuf {
    let url = url.as_str().trim_end_matches('/');
    let readable: String = url
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // FNV-1a.
    let hash = url.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    state.cache_root.join(format!("{readable}-{hash:016x}"))
}

/// Opens (creating if needed) the checkpoint under `url`, takes its lease, and makes sure
/// the local cache matches S3.
pub(super) fn open(url: &Url, state: &StorageSettings) -> Result<Checkpoint, CheckpointError> {
    let dir = RemoteDir::open(url, state)?;
    let lease = Lease::acquire(&dir, state.lease)?;
    let cache = cache_dir(url, state);
    let mut checkpoint = Checkpoint::open_local(&cache)?;
    let recorded: Option<StreamRecord> = match dir.get(STREAM_OBJECT)? {
        Some(bytes) => {
            Some(
                serde_json::from_slice(&bytes).map_err(|e| CheckpointError::Store {
                    path: PathBuf::from(dir.url_of(STREAM_OBJECT)),
                    reason: e.to_string(),
                })?,
            )
        }
        None => None,
    };
    let matches = match &recorded {
        Some(r) => r.stream_id == checkpoint.stream_id && agrees_with(&checkpoint, &dir)?,
        // A new checkpoint on S3: only an empty cache may seed it.
        None => checkpoint.is_fresh()?,
    };
    if !matches {
        tracing::info!(
            checkpoint = %dir.url(), cache = %cache.display(),
            "The local cache of the checkpoint does not match S3; rebuilding it from S3."
        );
        drop(checkpoint);
        fs::remove_file(cache.join(STATE_FILE))
            .or_else(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Ok(()),
                _ => Err(e),
            })
            .map_err(io_err(&cache))?;
        checkpoint = Checkpoint::open_local(&cache)?;
        if let Some(r) = &recorded {
            import(&mut checkpoint, &dir, &r.stream_id)?;
        }
    }
    if recorded.is_none() {
        let record = StreamRecord {
            stream_id: checkpoint.stream_id.clone(),
        };
        let body = serde_json::to_vec(&record).expect("records serialize");
        if !dir.put_new(STREAM_OBJECT, body)? {
            return Err(CheckpointError::PlanConflict {
                path: PathBuf::from(dir.url()),
                batch: 0,
                reason: "another process created this checkpoint at the same moment".into(),
            });
        }
    }
    checkpoint.record = Box::new(S3Record { dir, _lease: lease });
    Ok(checkpoint)
}

/// A read-only copy of the checkpoint under `url` in a scratch store, taken without its
/// lease; `Locked` while a live process holds the lease (its figures are its own).
pub(super) fn open_to_read(
    url: &Url,
    state: &StorageSettings,
) -> Result<Checkpoint, CheckpointError> {
    let dir = RemoteDir::open(url, state)?;
    if let Some(holder) = lease::live_holder(&dir)? {
        return Err(CheckpointError::Locked {
            path: PathBuf::from(dir.url()),
            holder,
        });
    }
    let scratch = state
        .cache_root
        .join(format!(".read-{}", uuid::Uuid::new_v4()));
    let mut checkpoint = Checkpoint::open_local(&scratch)?;
    checkpoint.scratch = Some(super::ScratchDir(scratch));
    if let Some(bytes) = dir.get(STREAM_OBJECT)? {
        let recorded: StreamRecord =
            serde_json::from_slice(&bytes).map_err(|e| CheckpointError::Store {
                path: PathBuf::from(dir.url_of(STREAM_OBJECT)),
                reason: e.to_string(),
            })?;
        import(&mut checkpoint, &dir, &recorded.stream_id)?;
    }
    Ok(checkpoint)
}

/// Whether the cache holds exactly the plans and commits recorded on S3 (compared at
/// the newest end, so the check lists only what is newer than the cache).
fn agrees_with(checkpoint: &Checkpoint, dir: &RemoteDir) -> Result<bool, CheckpointError> {
    let next = checkpoint.next_batch()?;
    let last_plan = next.checked_sub(1).map(batch_key);
    if !dir.list("plans", last_plan.as_deref())?.is_empty() {
        return Ok(false);
    }
    if let Some(key) = &last_plan
        && dir.get(&format!("plans/{key}"))?.is_none()
    {
        return Ok(false);
    }
    let (last_commit, _) = checkpoint.pending_plans()?;
    let last_commit = last_commit.map(batch_key);
    Ok(dir.list("commits", last_commit.as_deref())?.is_empty())
}

/// What the record on S3 says of the checkpoint's batches, read without its lease: the
/// committed batches (`commits/`), and the files of the plans after the last one.
pub(super) fn peek(url: &Url, state: &StorageSettings) -> Result<RecordFigures, CheckpointError> {
    let dir = RemoteDir::open(url, state)?;
    let commits = dir.list("commits", None)?;
    let batch_of = |key: &str| {
        key.strip_suffix(".json")
            .and_then(|k| k.parse::<u64>().ok())
    };
    let last = commits.last().cloned();
    let mut pending_files = 0;
    for key in dir.list("plans", last.as_deref())? {
        let name = format!("plans/{key}");
        // A plan discarded between the listing and the read is gone: nothing pending.
        if let Some(v) = dir.get(&name)? {
            let plan: Plan = serde_json::from_slice(&v).map_err(|e| CheckpointError::Store {
                path: PathBuf::from(dir.url_of(&name)),
                reason: e.to_string(),
            })?;
            pending_files += plan.files.len() as u64;
        }
    }
    Ok(RecordFigures {
        last_batch: last.as_deref().and_then(batch_of),
        pending_files,
        batches: commits.len() as u64,
    })
}

/// Fills a fresh cache from the record on S3.
fn import(
    checkpoint: &mut Checkpoint,
    dir: &RemoteDir,
    stream_id: &str,
) -> Result<(), CheckpointError> {
    let parse_err = |name: &str, e: serde_json::Error| CheckpointError::Store {
        path: PathBuf::from(dir.url_of(name)),
        reason: e.to_string(),
    };
    checkpoint.local_set_meta("streamId", stream_id)?;
    checkpoint.stream_id = stream_id.to_string();
    for key in dir.list("meta", None)? {
        let name = format!("meta/{key}");
        if let Some(v) = dir.get(&name)? {
            checkpoint.local_set_meta(&key, &String::from_utf8_lossy(&v))?;
        }
    }
    for key in dir.list("existing", None)? {
        let name = format!("existing/{key}");
        if let Some(v) = dir.get(&name)? {
            let plan: Plan = serde_json::from_slice(&v).map_err(|e| parse_err(&name, e))?;
            checkpoint.local_mark_existing(&plan)?;
        }
    }
    let mut last_commit = None;
    let mut batches = 0usize;
    for key in dir.list("commits", None)? {
        let name = format!("commits/{key}");
        if let Some(v) = dir.get(&name)? {
            let record: CommitRecord =
                serde_json::from_slice(&v).map_err(|e| parse_err(&name, e))?;
            checkpoint.local_write_plan(&record.plan)?;
            checkpoint.local_mark_committed(&record.plan, &record.summary)?;
            last_commit = Some(key);
            batches += 1;
        }
    }
    for key in dir.list("plans", last_commit.as_deref())? {
        let name = format!("plans/{key}");
        if let Some(v) = dir.get(&name)? {
            let plan: Plan = serde_json::from_slice(&v).map_err(|e| parse_err(&name, e))?;
            checkpoint.local_write_plan(&plan)?;
        }
    }
    tracing::info!(checkpoint = %dir.url(), batches, "Checkpoint cache rebuilt from S3.");
    Ok(())
}

impl S3Record {
    /// Copies object `from` to `to`, then deletes `from` (S3 has no rename).
    fn move_object(&self, from: &str, to: &str) -> Result<(), CheckpointError> {
        if let Some(bytes) = self.dir.get(from)? {
            self.dir.put(to, bytes)?;
        }
        self.dir.delete(from)?;
        Ok(())
    }
}

impl DurableRecord for S3Record {
    fn describe(&self) -> Option<String> {
        Some(self.dir.url().to_string())
    }

    /// Progress first, then metadata, then the stream identity (the commit point: without
    /// it the checkpoint opens as a new one with a new id), then the generation stamp,
    /// which until then says the checkpoint is stale, so an interrupted move is redone.
    fn set_aside(
        &self,
        folder: &str,
        keep_schema: bool,
        step: &dyn Fn(),
    ) -> Result<(), CheckpointError> {
        let mut dirs = vec!["plans", "commits", "existing"];
        if !keep_schema {
            dirs.push(crate::schema::store::SCHEMAS_DIR);
        }
        for d in dirs {
            for key in self.dir.list(d, None)? {
                self.move_object(&format!("{d}/{key}"), &format!("{folder}/{d}/{key}"))?;
                step();
            }
        }
        let stamp = super::aside::GENERATION;
        for key in self.dir.list("meta", None)? {
            if key != stamp {
                self.move_object(&format!("meta/{key}"), &format!("{folder}/meta/{key}"))?;
            }
        }
        self.move_object(STREAM_OBJECT, &format!("{folder}/{STREAM_OBJECT}"))?;
        self.move_object(&format!("meta/{stamp}"), &format!("{folder}/meta/{stamp}"))
    }

    fn put_stream_id(&self, id: &str) -> Result<(), CheckpointError> {
        let record = StreamRecord {
            stream_id: id.to_string(),
        };
        self.dir.put(
            STREAM_OBJECT,
            serde_json::to_vec(&record).expect("records serialize"),
        )?;
        Ok(())
    }

    fn put_meta(&self, key: &str, value: &str) -> Result<(), CheckpointError> {
        self.dir
            .put(&format!("meta/{key}"), value.as_bytes().to_vec())?;
        Ok(())
    }

    fn put_plan(&self, plan: &Plan) -> Result<(), CheckpointError> {
        let name = format!("plans/{}", batch_key(plan.batch));
        let body = serde_json::to_vec(plan).expect("plans always serialize");
        if !self.dir.put_new(&name, body)? {
            let existing = self.dir.get(&name)?.unwrap_or_default();
            let same = serde_json::from_slice::<Plan>(&existing)
                .is_ok_and(|existing| existing.files == plan.files);
            if !same {
                return Err(CheckpointError::PlanConflict {
                    path: PathBuf::from(self.dir.url_of(&name)),
                    batch: plan.batch,
                    reason: "a different plan is already stored".into(),
                });
            }
        }
        Ok(())
    }

    fn put_commit(&self, plan: &Plan, summary: &CommitSummary) -> Result<(), CheckpointError> {
        let record = CommitRecord {
            plan: plan.clone(),
            summary: summary.clone(),
        };
        self.dir.put(
            &format!("commits/{}", batch_key(plan.batch)),
            serde_json::to_vec(&record).expect("records serialize"),
        )?;
        Ok(())
    }

    fn delete_plan(&self, batch: u64) -> Result<(), CheckpointError> {
        self.dir.delete(&format!("plans/{}", batch_key(batch)))?;
        Ok(())
    }

    fn put_existing(&self, plan: &Plan) -> Result<(), CheckpointError> {
        let name = format!("existing/{:020}-{}.json", now_ms(), uuid::Uuid::new_v4());
        self.dir.put(
            &name,
            serde_json::to_vec(plan).expect("plans always serialize"),
        )?;
        Ok(())
    }
}
