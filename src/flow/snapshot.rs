//! Snapshot flows: a source that is replaced rather than appended to (a file overwritten
//! every night, a folder replaced every hour, dated folders each holding a full copy) is
//! read one whole snapshot per batch, each row stamped with the snapshot's ingest time
//! and id, into a history table.
//!
//! A snapshot is a *unit*: a file, the whole source folder, or one top-level folder of it.
//! A unit is taken when its files differ from the ones its last snapshot was read from
//! (the file index remembers them: the unit's entries of its latest batch), and, for a
//! folder, only once no file in it changed for the settle time. The ingest time is the
//! batch plan's creation time and the id is derived from the planned files, so a replayed
//! batch stamps the same values.

use std::collections::BTreeMap;
use std::time::Duration;

/// The prefix of snapshot settings given as options (`-o snapshot.unit=folder`).
pub const OPTION_PREFIX: &str = "snapshot.";

/// What one snapshot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Each file is a snapshot (a file replaced in place).
    File,
    /// The source folder, every file under it, is one snapshot.
    Folder,
    /// Each top-level folder of the source is one snapshot (`2026-11-30/`).
    Partition,
}

/// A snapshot flow's settings (`[stream.snapshot]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotSpec {
    pub unit: Unit,
    pub ingest_time_column: String,
    pub snapshot_id_column: String,
    /// A snapshot equal to the last one read of its unit is not appended again.
    pub skip_unchanged: bool,
    /// A snapshot later than this raises a `snapshot_overdue` event and alert.
    pub expected_interval: Option<Duration>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SnapshotError {
    #[error("snapshot setting {key}: {reason}")]
    Invalid { key: String, reason: String },
    #[error("unknown snapshot setting \"{0}\" (known: {known})", known = known())]
    Unknown(String),
}

/// Every setting: key, default, meaning. The one table the parser checks keys against
/// and `autoloader options` prints (`snapshot.KEY` on the command line, `[stream.snapshot]`
/// in a config file).
pub const SETTINGS: &[(&str, &str, &str)] = &[
    (
        "unit",
        "file",
        "what one snapshot is: file, folder (the whole source) or partition (a top-level folder)",
    ),
    (
        "ingest_time_column",
        "_ingested_at",
        "the column stamping each row with its snapshot's time",
    ),
    (
        "snapshot_id_column",
        "_snapshot_id",
        "the column stamping each row with its snapshot's id",
    ),
    (
        "skip_unchanged",
        "true",
        "a snapshot equal to the last one of its unit is not appended again",
    ),
    (
        "expected_interval",
        "none",
        "a snapshot later than this raises snapshot_overdue (24h, 30m)",
    ),
];

fn known() -> String {
    SETTINGS
        .iter()
        .map(|(k, _, _)| *k)
        .collect::<Vec<_>>()
        .join(", ")
}

fn invalid(key: &str, reason: impl Into<String>) -> SnapshotError {
    SnapshotError::Invalid {
        key: key.to_string(),
        reason: reason.into(),
    }
}

impl SnapshotSpec {
    /// Parses `KEY = VALUE` pairs (without the `snapshot.` prefix). `None` when there
    /// are none: the stream is not a snapshot flow.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Option<SnapshotSpec>, SnapshotError> {
        if pairs.is_empty() {
            return Ok(None);
        }
        let mut map = BTreeMap::new();
        for (k, v) in pairs {
            let key = k.trim();
            if !SETTINGS.iter().any(|(k, _, _)| *k == key) {
                return Err(SnapshotError::Unknown(key.to_string()));
            }
            map.insert(key, v.trim().to_string());
        }
        let get = |k: &str| map.get(k).map(String::as_str);
        let unit = match get("unit").unwrap_or("file") {
            "file" => Unit::File,
            "folder" => Unit::Folder,
            "partition" => Unit::Partition,
            other => {
                return Err(invalid(
                    "unit",
                    format!("\"{other}\": expected \"file\", \"folder\" or \"partition\""),
                ));
            }
        };
        let column = |k: &str, default: &str| -> Result<String, SnapshotError> {
            let name = get(k).unwrap_or(default).to_string();
            if name.is_empty() {
                return Err(invalid(k, "give a column name"));
            }
            Ok(name)
        };
        let ingest_time_column = column("ingest_time_column", "_ingested_at")?;
        let snapshot_id_column = column("snapshot_id_column", "_snapshot_id")?;
        if ingest_time_column == snapshot_id_column {
            return Err(invalid(
                "snapshot_id_column",
                "it must differ from ingest_time_column",
            ));
        }
        let skip_unchanged = match get("skip_unchanged") {
            None => true,
            Some(v) => crate::parse::scalars::parse_bool(v)
                .ok_or_else(|| invalid("skip_unchanged", format!("{v}: expected true or false")))?,
        };
        let expected_interval = get("expected_interval")
            .map(|v| {
                crate::parse::scalars::duration(v)
                    .map_err(|e| invalid("expected_interval", format!("{v:?}: {e}")))
            })
            .transpose()?;
        Ok(Some(SnapshotSpec {
            unit,
            ingest_time_column,
            snapshot_id_column,
            skip_unchanged,
            expected_interval,
        }))
    }

    /// The unit a file (its key under the source) belongs to: the file, `""` for the
    /// whole folder, or its top-level folder (`2026-11-30/`; a file directly under the
    /// source is a unit of its own).
    pub fn unit_of<'a>(&self, key: &'a str) -> &'a str {
        match self.unit {
            Unit::File => key,
            Unit::Folder => "",
            Unit::Partition => match key.find('/') {
                Some(i) => &key[..=i],
                None => key,
            },
        }
    }

    /// Whether a unit is read whole only once it has settled (a folder).
    pub fn waits_to_settle(&self, unit: &str) -> bool {
        match self.unit {
            Unit::File => false,
            Unit::Folder => true,
            Unit::Partition => unit.ends_with('/'),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn settings_parse_with_defaults_and_name_mistakes() {
        let spec = SnapshotSpec::from_pairs(&pairs(&[("unit", "partition")]))
            .unwrap()
            .unwrap();
        assert_eq!(spec.unit, Unit::Partition);
        assert_eq!(spec.ingest_time_column, "_ingested_at");
        assert!(spec.skip_unchanged && spec.expected_interval.is_none());
        assert_eq!(SnapshotSpec::from_pairs(&[]).unwrap(), None);
        let err = |p: &[(&str, &str)]| SnapshotSpec::from_pairs(&pairs(p)).unwrap_err().to_string();
        assert!(err(&[("unit", "table")]).contains("expected"));
        assert!(err(&[("units", "file")]).contains("unknown"));
        assert!(err(&[("expected_interval", "soon")]).contains("expected_interval"));
        let spec = SnapshotSpec::from_pairs(&pairs(&[("expected_interval", "26h")]))
            .unwrap()
            .unwrap();
        assert_eq!(spec.expected_interval, Some(Duration::from_secs(26 * 3600)));
    }

    #[test]
    fn units() {
        let spec = SnapshotSpec::from_pairs(&pairs(&[("unit", "partition")]))
            .unwrap()
            .unwrap();
        assert_eq!(spec.unit_of("2026-11-30/a.csv"), "2026-11-30/");
        assert_eq!(spec.unit_of("2026-11-30/x/a.csv"), "2026-11-30/");
        assert_eq!(spec.unit_of("loose.csv"), "loose.csv");
        assert!(spec.waits_to_settle("2026-11-30/") && !spec.waits_to_settle("loose.csv"));
    }
}
