//! Why values go to the rescued data, and what a batch rescued.

use crate::options::CORRUPT_RECORD;

/// Why a value went to the rescued data.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum RescueKind {
    /// The column exists; the value could not be read as its type.
    TypeMismatch,
    /// The schema has no such column.
    NewColumn,
    /// The schema has the column in another letter case (`readerCaseSensitive=true`).
    CaseMismatch,
    /// The record could not be parsed at all (`_corrupt_record`).
    Malformed,
}

impl RescueKind {
    /// Classifies a rescued key against the schema's column names.
    pub fn of<'a>(key: &str, mut columns: impl Iterator<Item = &'a str>) -> RescueKind {
        if key == CORRUPT_RECORD {
            return RescueKind::Malformed;
        }
        let mut kind = RescueKind::NewColumn;
        for c in columns.by_ref() {
            if c == key {
                return RescueKind::TypeMismatch;
            }
            if c.eq_ignore_ascii_case(key) {
                kind = RescueKind::CaseMismatch;
            }
        }
        kind
    }
}

/// Rows rescued per key, with why: what drift reports and alerts are made of.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RescueStats {
    pub keys: std::collections::BTreeMap<String, (RescueKind, u64)>,
}

impl RescueStats {
    pub fn note(&mut self, key: &str, kind: RescueKind) {
        let e = self.keys.entry(key.to_string()).or_insert((kind, 0));
        e.1 += 1;
    }

    pub fn merge(&mut self, other: &RescueStats) {
        for (k, (kind, n)) in &other.keys {
            let e = self.keys.entry(k.clone()).or_insert((*kind, 0));
            e.1 += n;
        }
    }

    /// Keys rescued for the given reason.
    pub fn keys_of(&self, kind: RescueKind) -> Vec<&str> {
        self.keys
            .iter()
            .filter(|(_, (k, _))| *k == kind)
            .map(|(n, _)| n.as_str())
            .collect()
    }
}
