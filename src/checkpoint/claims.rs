//! Competing workers on one stream (`--worker`): which worker slot's batch owns a file.
//!
//! Each worker slot keeps a checkpoint of its own under `<checkpoint>/workers/<k>/` (its
//! lock or lease, plans, index and Delta app id); the stream's `_schemas` stay shared. A
//! file lands once across slots through a create-only claim per file under
//! `<checkpoint>/claims/`, naming the slot and batch that own it:
//! 1. a slot writes its plan (the candidate files) first, then claims each candidate;
//! 2. a candidate whose claim names another slot's batch is dropped from this batch: that
//!    batch's plan is durable (it was written before its claim), so its slot, or whoever
//!    holds the slot next, lands the file;
//! 3. a replay claims the plan's candidates again, which gives the same files: a claim is
//!    never taken from a batch that may still commit.
//!
//! A claim naming this slot's own batch that was discarded (planned again after a change)
//! is moved to the new batch: only this slot's holder writes claims naming it.
//!
//! Claims belong to the table's reset generation (`claims/` before any reset,
//! `claims-g<N>/` after the N-th): a reset sets every slot aside, and the files its old
//! claims name are new again for the next generation's slots, whatever step a killed
//! reset reached. `autoloader reset` moves a local stream's old claims aside; on S3 they are
//! left where they are (one object per file; a lifecycle rule on the prefix expires them).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::CheckpointError;
use crate::location::Location;
use crate::storage::StorageSettings;
use crate::storage::object_dir::RemoteDir;

/// The folder of worker slots under a stream's checkpoint.
pub const WORKERS_DIR: &str = "workers";
/// The folder of per-file claims under a stream's checkpoint (generation 0).
const CLAIMS_DIR: &str = "claims";

/// The claims folder of the table's reset generation `generation`.
fn claims_dir(generation: u64) -> String {
    if generation == 0 {
        CLAIMS_DIR.to_string()
    } else {
        format!("{CLAIMS_DIR}-g{generation}")
    }
}

/// Sets aside what the slots of the stream whose checkpoint is `root` share, after a reset
/// to generation `generation` (`folder`: `_reset-<gen>`): its `_schemas` unless
/// `keep_schema`, and (a local checkpoint) the claims of earlier generations, never the
/// current one's. Only what is there is moved, so a reset run again after a kill finishes
/// it.
pub fn set_aside_shared(
    root: &Location,
    storage: &StorageSettings,
    folder: &str,
    generation: u64,
    keep_schema: bool,
) -> Result<(), CheckpointError> {
    let current = claims_dir(generation);
    let schemas = crate::schema::store::SCHEMAS_DIR;
    match root {
        Location::Local(dir) => {
            let aside = dir.join(folder);
            let io = |path: &std::path::Path| {
                let path = path.to_path_buf();
                move |source: std::io::Error| CheckpointError::Io { path, source }
            };
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .map_err(io(dir))?
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| {
                    ((n == CLAIMS_DIR || n.starts_with(&format!("{CLAIMS_DIR}-g")))
                        && *n != current)
                        || (!keep_schema && n == schemas)
                })
                .collect();
            names.sort();
            if names.is_empty() {
                return Ok(());
            }
            std::fs::create_dir_all(&aside).map_err(io(&aside))?;
            for name in names {
                let from = dir.join(&name);
                let mut to = aside.join(&name);
                let mut n = 1;
                while to.exists() {
                    to = aside.join(format!("{name}.{n}"));
                    n += 1;
                }
                std::fs::rename(&from, &to).map_err(io(&from))?;
            }
        }
        Location::S3(url) => {
            if keep_schema {
                return Ok(());
            }
            let dir = RemoteDir::open(url, storage)?;
            for key in dir.list(schemas, None)? {
                let from = format!("{schemas}/{key}");
                if let Some(bytes) = dir.get(&from)? {
                    dir.put(&format!("{folder}/{schemas}/{key}"), bytes)?;
                }
                dir.delete(&from)?;
            }
        }
    }
    Ok(())
}

/// The checkpoint of worker slot `slot` of the stream whose checkpoint is `root`.
pub fn slot_location(root: &Location, slot: u32) -> Location {
    root.join(&format!("{WORKERS_DIR}/{slot}"))
}

/// The slot numbers under the stream's `workers/` folder (checkpoint `root`), ascending.
pub fn slots(root: &Location, storage: &StorageSettings) -> Result<Vec<u32>, CheckpointError> {
    let names: Vec<String> = match root.join(WORKERS_DIR) {
        Location::Local(dir) => match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(CheckpointError::Io { path: dir, source }),
        },
        Location::S3(url) => RemoteDir::open(&url, storage)?.subdirs()?,
    };
    let mut slots: Vec<u32> = names.iter().filter_map(|n| n.parse().ok()).collect();
    slots.sort_unstable();
    Ok(slots)
}

/// Which worker slot a process takes (`--worker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Worker {
    /// The first slot no live process holds (`--worker auto`): identical processes, as a
    /// Deployment scaled by KEDA runs them, each take one.
    Auto,
    /// This slot, or exit 75 while another process holds it (a StatefulSet's ordinal).
    Slot(u32),
}

/// How many slots `--worker auto` tries before giving up.
pub const MAX_SLOTS: u32 = 256;

impl std::str::FromStr for Worker {
    type Err = String;
    fn from_str(text: &str) -> Result<Worker, String> {
        if text.eq_ignore_ascii_case("auto") {
            return Ok(Worker::Auto);
        }
        // A StatefulSet pod's name ends in its ordinal: `autoloader-3` is slot 3.
        let digits = text.rsplit('-').next().unwrap_or(text);
        match digits.parse::<u32>() {
            Ok(n) if n < MAX_SLOTS => Ok(Worker::Slot(n)),
            _ => Err(format!(
                "expected auto, a slot number below {MAX_SLOTS}, or a name ending in one \
                 (a StatefulSet pod's, like autoloader-3)"
            )),
        }
    }
}

/// Who owns a file: a slot's batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub slot: u32,
    pub batch: u64,
}

#[derive(Serialize, Deserialize)]
struct ClaimRecord {
    slot: u32,
    batch: u64,
    key: String,
}

/// The claims of one stream, local or on S3 (beside its checkpoint).
pub struct Claims {
    store: ClaimStore,
}

enum ClaimStore {
    Local(PathBuf),
    Remote(RemoteDir),
}

/// What claiming a file found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claimed {
    /// The file is this batch's (claimed now, or by an earlier attempt of this batch).
    Ours,
    /// Another batch owns it.
    Theirs(Claim),
}

impl Claims {
    /// The claims of the stream whose checkpoint is `root`, in the table's reset
    /// generation `generation`.
    pub fn open(
        root: &Location,
        storage: &StorageSettings,
        generation: u64,
    ) -> Result<Claims, CheckpointError> {
        let name = claims_dir(generation);
        let store = match root {
            Location::Local(dir) => {
                let dir = dir.join(&name);
                std::fs::create_dir_all(&dir).map_err(|source| CheckpointError::Io {
                    path: dir.clone(),
                    source,
                })?;
                ClaimStore::Local(dir)
            }
            Location::S3(_) => {
                let Location::S3(url) = root.join(&name) else {
                    unreachable!("an S3 location joins to an S3 location")
                };
                ClaimStore::Remote(RemoteDir::open(&url, storage)?)
            }
        };
        Ok(Claims { store })
    }

    /// Claims `key` for `mine`. A claim naming `mine`'s slot but a batch `is_live` says is
    /// neither committed nor pending (a discarded plan's) is moved to `mine`.
    pub fn claim(
        &self,
        key: &str,
        mine: Claim,
        is_live: &dyn Fn(u64) -> Result<bool, CheckpointError>,
    ) -> Result<Claimed, CheckpointError> {
        let name = object_name(key);
        let record = serde_json::to_vec(&ClaimRecord {
            slot: mine.slot,
            batch: mine.batch,
            key: key.to_string(),
        })
        .expect("a claim serializes");
        if self.put_new(&name, &record)? {
            return Ok(Claimed::Ours);
        }
        let existing = self.get(&name)?;
        if existing == mine {
            return Ok(Claimed::Ours);
        }
        if existing.slot == mine.slot && !is_live(existing.batch)? {
            self.put(&name, &record)?;
            return Ok(Claimed::Ours);
        }
        Ok(Claimed::Theirs(existing))
    }

    fn put_new(&self, name: &str, bytes: &[u8]) -> Result<bool, CheckpointError> {
        match &self.store {
            ClaimStore::Local(dir) => {
                let path = dir.join(name);
                crate::storage::atomic::write_new_atomic(&path, bytes)
                    .map_err(|source| CheckpointError::Io { path, source })
            }
            ClaimStore::Remote(dir) => Ok(dir.put_new(name, bytes.to_vec())?),
        }
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), CheckpointError> {
        match &self.store {
            ClaimStore::Local(dir) => {
                let path = dir.join(name);
                crate::storage::atomic::write_atomic(&path, bytes)
                    .map_err(|source| CheckpointError::Io { path, source })
            }
            ClaimStore::Remote(dir) => Ok(dir.put(name, bytes.to_vec())?),
        }
    }

    fn get(&self, name: &str) -> Result<Claim, CheckpointError> {
        let (bytes, path) = match &self.store {
            ClaimStore::Local(dir) => {
                let path = dir.join(name);
                let bytes = std::fs::read(&path).map_err(|source| CheckpointError::Io {
                    path: path.clone(),
                    source,
                })?;
                (bytes, path)
            }
            ClaimStore::Remote(dir) => {
                let path = PathBuf::from(dir.url_of(name));
                let bytes = dir.get(name)?.ok_or_else(|| CheckpointError::Store {
                    path: path.clone(),
                    reason: "a claim that existed a moment ago is gone".into(),
                })?;
                (bytes, path)
            }
        };
        let record: ClaimRecord =
            serde_json::from_slice(&bytes).map_err(|e| CheckpointError::Store {
                path,
                reason: format!("unreadable claim: {e}"),
            })?;
        Ok(Claim {
            slot: record.slot,
            batch: record.batch,
        })
    }
}

/// A claim's object name: the key's SHA-256, so any key (any length, any character) makes
/// one flat, valid name.
fn object_name(key: &str) -> String {
    hex::encode(sha2::Sha256::digest(key.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_claimed_once_and_a_discarded_batch_gives_its_claims_back() {
        let dir = tempfile::tempdir().unwrap();
        let root = Location::Local(dir.path().to_path_buf());
        let storage = StorageSettings::local(dir.path().join("cache"));
        let claims = Claims::open(&root, &storage, 0).unwrap();
        let live = |_: u64| Ok(true);
        let a = Claim { slot: 0, batch: 3 };
        let b = Claim { slot: 1, batch: 7 };
        assert_eq!(claims.claim("x/1.json", a, &live).unwrap(), Claimed::Ours);
        assert_eq!(
            claims.claim("x/1.json", a, &live).unwrap(),
            Claimed::Ours,
            "a replay of the same batch finds its claim"
        );
        assert_eq!(
            claims.claim("x/1.json", b, &live).unwrap(),
            Claimed::Theirs(a)
        );
        // Slot 0 planned the file again in batch 4 after batch 3 was discarded.
        let discarded = |batch: u64| Ok(batch != 3);
        let again = Claim { slot: 0, batch: 4 };
        assert_eq!(
            claims.claim("x/1.json", again, &discarded).unwrap(),
            Claimed::Ours
        );
        assert_eq!(
            claims.claim("x/1.json", b, &live).unwrap(),
            Claimed::Theirs(again)
        );
        // Another slot never takes a claim, live or not.
        assert_eq!(
            claims.claim("x/1.json", b, &|_| Ok(false)).unwrap(),
            Claimed::Theirs(again)
        );
    }
}
