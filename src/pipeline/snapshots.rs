//! Planning a snapshot flow: which units of the source hold a new snapshot now, and one
//! batch per snapshot (`crate::snapshot` has the settings and the stamps).

use std::collections::HashSet;

use crate::checkpoint::{CheckpointError, Plan, SeenFiles};
use crate::snapshot::{self, SnapshotSpec, Unit};
use crate::source::FileRef;

/// What a listing holds for a snapshot flow.
#[derive(Debug, Default)]
pub(crate) struct Snapshots {
    /// The files of the units to take now, unit after unit.
    pub files: Vec<FileRef>,
    /// Units whose files equal those of their last snapshot.
    pub unchanged: Vec<String>,
    /// Folder units with a file changed within the settle time.
    pub unsettled: Vec<String>,
}

/// The files a unit's last snapshot was read from: its entries of its latest batch.
fn last_snapshot(
    spec: &SnapshotSpec,
    unit: &str,
    seen: &SeenFiles,
) -> Result<Vec<FileRef>, CheckpointError> {
    let entries = match spec.unit {
        Unit::File => seen.get(unit)?.into_iter().collect(),
        _ => seen.under(unit)?,
    };
    let last = entries.iter().map(|e| e.batch).max();
    Ok(entries
        .into_iter()
        .filter(|e| Some(e.batch) == last)
        .map(|e| e.file)
        .collect())
}

/// The units of `listed` that hold a snapshot to take: changed since their last one (or,
/// without `skip_unchanged`, not yet taken in this run), settled, and not already in an
/// unfinished plan.
pub(crate) fn take(
    spec: &SnapshotSpec,
    listed: &[FileRef],
    seen: &SeenFiles,
    settled_before_ms: i64,
    taken_this_run: &HashSet<String>,
    pending: &[Plan],
) -> Result<Snapshots, CheckpointError> {
    let mut out = Snapshots::default();
    let pending_units: HashSet<&str> = pending
        .iter()
        .flat_map(|p| p.files.first())
        .map(|f| spec.unit_of(&f.key))
        .collect();
    for (unit, files) in snapshot::by_unit(spec, listed) {
        if pending_units.contains(unit) {
            continue;
        }
        let last = last_snapshot(spec, unit, seen)?;
        let unchanged = !last.is_empty()
            && snapshot::fingerprint(&last) == snapshot::fingerprint(files.iter().copied());
        if unchanged && (spec.skip_unchanged || taken_this_run.contains(unit)) {
            out.unchanged.push(unit.to_string());
            continue;
        }
        if spec.waits_to_settle(unit) && files.iter().any(|f| f.mtime_ms > settled_before_ms) {
            out.unsettled.push(unit.to_string());
            continue;
        }
        out.files.extend(files.into_iter().cloned());
    }
    Ok(out)
}

/// One batch per unit (a snapshot lands whole in one commit, whatever the trigger
/// limits).
pub(crate) fn batches<'a>(spec: &SnapshotSpec, files: &'a [FileRef]) -> Vec<&'a [FileRef]> {
    files
        .chunk_by(|a, b| spec.unit_of(&a.key) == spec.unit_of(&b.key))
        .collect()
}
