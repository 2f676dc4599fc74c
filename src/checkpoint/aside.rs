//! A checkpoint's reset generation, and setting a stale checkpoint aside: a reset bumps the
//! table's generation, and a checkpoint stamped with an older one holds progress the reset
//! cleared. It is moved into `CHECKPOINT/_reset-<gen>/` (kept, not deleted) by whoever
//! holds its lock next: `reset` itself, or the next run when a reset was killed midway.
//!
//! The move is one rename per entry, with the state store (the progress) moved last: until
//! it moves, the checkpoint is still stale and the next attempt moves the rest; once it
//! has, the checkpoint is fresh. The lock file stays, held for the whole move.

use std::fs;
use std::path::{Path, PathBuf};

use super::{Checkpoint, CheckpointError, LOCK_FILE, STATE_FILE, io_err};
use crate::location::Location;
use crate::schema::store::SCHEMAS_DIR;

/// The checkpoint metadata key holding the table generation it was made in.
pub(super) const GENERATION: &str = "tableGeneration";

/// The folder a checkpoint of generation `gen` is moved into when the table's generation
/// passes it.
pub fn aside_name(generation: u64) -> String {
    format!("_reset-{generation}")
}

impl Checkpoint {
    /// The table generation this checkpoint was made in (0 for one made before any reset).
    pub fn generation(&self) -> Result<u64, CheckpointError> {
        Ok(self
            .meta(GENERATION)?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }

    /// Records that this checkpoint belongs to the table's generation `generation`.
    pub fn stamp_generation(&self, generation: u64) -> Result<(), CheckpointError> {
        if self.meta(GENERATION)?.as_deref() != Some(generation.to_string().as_str()) {
            self.set_meta(GENERATION, &generation.to_string())?;
        }
        Ok(())
    }

    /// Whether this checkpoint predates the table's last reset: it holds progress, or a
    /// stamp of an older generation (a set-aside on S3 cut short keeps its stamp and its
    /// old stream id until the move is complete).
    pub fn is_stale(&self, table_generation: u64) -> Result<bool, CheckpointError> {
        Ok(self.generation()? < table_generation
            && (!self.is_fresh()? || self.meta(GENERATION)?.is_some()))
    }

    /// Whether the checkpoint lives on an object store (a reset cannot move it yet).
    pub fn is_remote(&self) -> bool {
        self.record.describe().is_some()
    }

    /// Moves this checkpoint's progress into `folder` (`_reset-<gen>`, `_rerun-<ms>`) under
    /// its own folder, and
    /// the stream's schema versions with it unless `keep_schema`. `schema_location` is the
    /// stream's: when it is elsewhere than the checkpoint, its `_schemas` is moved aside
    /// there. Consumes the checkpoint; the caller opens it again, fresh. `step` is called
    /// after each entry moved (the crash tests' failpoint). Returns the folder the old
    /// progress is kept in.
    pub fn set_aside(
        self,
        folder: &str,
        keep_schema: bool,
        schema_location: &Location,
        step: &dyn Fn(),
    ) -> Result<String, CheckpointError> {
        // The stamp says "stale" until the move is complete.
        if self.meta(GENERATION)?.is_none() {
            self.set_meta(GENERATION, &self.generation()?.to_string())?;
        }
        if self.is_remote() {
            let url = format!("{}/{folder}", self.describe());
            self.record.set_aside(folder, keep_schema, step)?;
            return Ok(url);
        }
        let Checkpoint { dir, db, _lock, .. } = self;
        drop(db);
        let aside = dir.join(folder);
        fs::create_dir_all(&aside).map_err(io_err(&aside))?;
        let entries = fs::read_dir(&dir).map_err(io_err(&dir))?;
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| {
                let stays = n == LOCK_FILE
                    || n == STATE_FILE
                    || n.starts_with("_reset-")
                    || n.starts_with("_rerun-")
                    || (keep_schema && n == SCHEMAS_DIR)
                    // Another stream's checkpoint below this one (`TABLE/_autoloader/NAME`).
                    || dir.join(n).join(LOCK_FILE).exists();
                !stays
            })
            .collect();
        names.sort();
        for name in names {
            move_into(&dir.join(&name), &aside.join(&name))?;
            step();
        }
        if !keep_schema
            && let Location::Local(elsewhere) = schema_location
            && !same_dir(elsewhere, &dir)
        {
            let schemas = elsewhere.join(SCHEMAS_DIR);
            if schemas.exists() {
                let to = elsewhere.join(format!("{folder}-{SCHEMAS_DIR}"));
                move_into(&schemas, &to)?;
            }
        }
        // The commit point: without its store, the checkpoint opens fresh.
        let state = dir.join(STATE_FILE);
        if state.exists() {
            move_into(&state, &aside.join(STATE_FILE))?;
        }
        drop(_lock);
        Ok(aside.display().to_string())
    }
}

/// Renames `from` to `to`, or to `to.N` when `to` is taken (an entry of an earlier,
/// interrupted attempt).
fn move_into(from: &Path, to: &Path) -> Result<(), CheckpointError> {
    let mut target = to.to_path_buf();
    let mut n = 1;
    while target.exists() {
        target = PathBuf::from(format!("{}.{n}", to.display()));
        n += 1;
    }
    fs::rename(from, &target).map_err(io_err(from))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}
