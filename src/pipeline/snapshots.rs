//! Planning a snapshot flow: which units of the source hold a new snapshot now, and one
//! batch per snapshot (`crate::flow::snapshot` has the settings and the stamps).

use std::collections::HashSet;

use crate::checkpoint::{CheckpointError, Plan, SeenFiles};
use std::collections::BTreeMap;

use sha2::Digest;

use crate::flow::snapshot::{SnapshotSpec, Unit};
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
    for (unit, files) in by_unit(spec, listed) {
        if pending_units.contains(unit) {
            continue;
        }
        let last = last_snapshot(spec, unit, seen)?;
        let unchanged =
            !last.is_empty() && fingerprint(&last) == fingerprint(files.iter().copied());
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

/// Groups files by unit, each unit's files sorted by key.
pub(crate) fn by_unit<'a>(
    spec: &SnapshotSpec,
    files: &'a [FileRef],
) -> BTreeMap<&'a str, Vec<&'a FileRef>> {
    let mut units: BTreeMap<&str, Vec<&FileRef>> = BTreeMap::new();
    for f in files {
        units.entry(spec.unit_of(&f.key)).or_default().push(f);
    }
    for files in units.values_mut() {
        files.sort_by(|a, b| a.key.cmp(&b.key));
    }
    units
}

/// A fingerprint of a snapshot's files: their keys, sizes and modification times.
pub(crate) fn fingerprint<'a>(files: impl IntoIterator<Item = &'a FileRef>) -> String {
    let mut sorted: Vec<&FileRef> = files.into_iter().collect();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    let mut hash = sha2::Sha256::new();
    for f in sorted {
        hash.update(f.key.as_bytes());
        hash.update([0]);
        hash.update(f.size.to_le_bytes());
        hash.update(f.mtime_ms.to_le_bytes());
    }
    hex::encode(&hash.finalize()[..8])
}

/// A snapshot's id: its unit (the source folder as `.`) and its files' fingerprint.
pub(crate) fn snapshot_id<'a>(unit: &str, files: impl IntoIterator<Item = &'a FileRef>) -> String {
    let unit = if unit.is_empty() { "." } else { unit };
    format!("{unit}@{}", fingerprint(files))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(key: &str, size: u64, mtime_ms: i64) -> FileRef {
        FileRef {
            key: key.into(),
            size,
            mtime_ms,
        }
    }

    #[test]
    fn fingerprints_see_a_changed_or_gone_file_and_not_the_order() {
        let a = [file("a", 1, 5), file("b", 2, 6)];
        let b = [file("b", 2, 6), file("a", 1, 5)];
        assert_eq!(fingerprint(&a), fingerprint(&b), "order does not matter");
        assert_ne!(
            fingerprint(&a),
            fingerprint(&[file("a", 1, 5)]),
            "a file gone"
        );
        assert_ne!(
            fingerprint(&a),
            fingerprint(&[file("a", 1, 7), file("b", 2, 6)])
        );
        assert!(snapshot_id("", &a).starts_with(".@"));
    }
}
