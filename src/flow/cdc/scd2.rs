//! SCD type 2: every version of a key's row, each valid from `__START_AT` (inclusive) to
//! `__END_AT` (exclusive, null while current).
//!
//! A key's history is a function of every change record it ever had, in sequence order, so
//! it is computed again from all of them whenever a new one comes: a late record then
//! splits the version its sequence falls into, and a run of records with equal tracked
//! values (one version) is split apart by a late record with other values, exactly as if
//! every record had come in order. The flow keeps the records (the target alone cannot say
//! what a run absorbed, or that a delete found nothing to close).
//!
//! Folding, in sequence order: an upsert whose tracked values equal the current version's
//! updates it in place (its untracked values are the latest record's); one with other
//! values closes the current version at its sequence and opens a new one; a delete closes
//! the current version, or with nothing to close is remembered for later records.
//!
//! Records of one key with one sequence: one already applied stays and a new one is stale
//! (as in SCD type 1: a sequence not greater than an applied one is ignored); among new
//! ones the delete wins, else the later to arrive; each such tie is counted.

use super::KeyBytes;

/// One change record of a key.
#[derive(Debug, Clone)]
pub struct Record {
    pub seq: KeyBytes,
    pub delete: bool,
    /// Already applied in an earlier batch (kept by the flow).
    pub applied: bool,
    /// Its row in the records' batch: arrival order among the new ones.
    pub row: usize,
}

/// One version of a key's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// Per target column, the record row its value comes from.
    pub values: Vec<usize>,
    /// The record row whose sequence starts the version.
    pub start: usize,
    /// The record row whose sequence ends it; none while current.
    pub end: Option<usize>,
}

/// A key's history, and what to remember of its new records.
#[derive(Debug, Default)]
pub struct History {
    pub versions: Vec<Version>,
    /// New records to keep (rows), the ones not stale or lost in a tie.
    pub kept: Vec<usize>,
    pub stale: u64,
    pub ties: u64,
}

/// How the fold sees the records' values.
pub trait Values {
    /// The number of target columns.
    fn columns(&self) -> usize;
    /// Whether a change in column `c` opens a new version.
    fn tracked(&self, c: usize) -> bool;
    /// Whether rows `a` and `b` hold the same value in column `c` (null equals null).
    fn same(&self, c: usize, a: usize, b: usize) -> bool;
    fn is_null(&self, c: usize, row: usize) -> bool;
}

/// The history of one key from its records (any order): all of them, or, with `current`,
/// only records that follow every applied one, folded from the key's current version
/// (the fold's state after the applied records: what the target holds; none when the
/// last applied record was a delete, or there was none).
pub fn history(
    mut records: Vec<Record>,
    current: Option<Version>,
    values: &impl Values,
    ignore_null_updates: bool,
) -> History {
    let mut out = History::default();
    records.sort_by(|a, b| {
        (&a.seq, !a.applied, a.delete, a.row).cmp(&(&b.seq, !b.applied, b.delete, b.row))
    });
    // One record per sequence.
    let mut chosen: Vec<Record> = Vec::with_capacity(records.len());
    for group in records.chunk_by(|a, b| a.seq == b.seq) {
        let new = group.iter().filter(|r| !r.applied).count() as u64;
        if group.iter().any(|r| r.applied) {
            out.stale += new;
            chosen.push(group[0].clone());
        } else {
            out.ties += new - 1;
            let last = group.last().expect("a group has a record").clone();
            out.kept.push(last.row);
            chosen.push(last);
        }
    }
    let mut open: Option<Version> = current;
    for r in &chosen {
        if r.delete {
            if let Some(mut v) = open.take() {
                v.end = Some(r.row);
                out.versions.push(v);
            }
            continue;
        }
        let picks: Vec<usize> = (0..values.columns())
            .map(|c| match &open {
                Some(v) if ignore_null_updates && values.is_null(c, r.row) => v.values[c],
                _ => r.row,
            })
            .collect();
        match open.take() {
            Some(mut v)
                if (0..values.columns())
                    .all(|c| !values.tracked(c) || values.same(c, v.values[c], picks[c])) =>
            {
                v.values = picks;
                open = Some(v);
            }
            Some(mut v) => {
                v.end = Some(r.row);
                out.versions.push(v);
                open = Some(Version {
                    values: picks,
                    start: r.row,
                    end: None,
                });
            }
            None => {
                open = Some(Version {
                    values: picks,
                    start: r.row,
                    end: None,
                });
            }
        }
    }
    out.versions.extend(open);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(bytes: &[u8]) -> KeyBytes {
        KeyBytes::from_slice(bytes)
    }

    /// Rows of (tracked value, untracked value), `None` as null.
    struct Rows(Vec<(Option<&'static str>, Option<&'static str>)>);

    impl Values for Rows {
        fn columns(&self) -> usize {
            2
        }
        fn tracked(&self, c: usize) -> bool {
            c == 0
        }
        fn same(&self, c: usize, a: usize, b: usize) -> bool {
            let get = |r: usize| if c == 0 { self.0[r].0 } else { self.0[r].1 };
            get(a) == get(b)
        }
        fn is_null(&self, c: usize, row: usize) -> bool {
            if c == 0 { self.0[row].0 } else { self.0[row].1 }.is_none()
        }
    }

    fn rec(seq: u8, row: usize, delete: bool, applied: bool) -> Record {
        Record {
            seq: k(&[seq]),
            delete,
            applied,
            row,
        }
    }

    /// (start row, end row, tracked value's row) per version.
    fn spans(h: &History) -> Vec<(usize, Option<usize>, usize)> {
        h.versions
            .iter()
            .map(|v| (v.start, v.end, v.values[0]))
            .collect()
    }

    #[test]
    fn a_late_record_splits_the_version_it_falls_into() {
        // A at 10, C at 20; B at 15 comes last.
        let rows = Rows(vec![
            (Some("A"), None),
            (Some("C"), None),
            (Some("B"), None),
        ]);
        let h = history(
            vec![
                rec(10, 0, false, true),
                rec(20, 1, false, true),
                rec(15, 2, false, false),
            ],
            None,
            &rows,
            false,
        );
        assert_eq!(spans(&h), [(0, Some(2), 0), (2, Some(1), 2), (1, None, 1)]);
        assert_eq!(h.kept, [2]);
    }

    #[test]
    fn a_run_of_equal_values_is_one_version_until_a_late_record_splits_it() {
        // A (x) at 1, A (z) at 3: one version, untracked value from the latest.
        let rows = Rows(vec![
            (Some("A"), Some("x")),
            (Some("A"), Some("z")),
            (Some("B"), Some("y")),
        ]);
        let h = history(
            vec![rec(1, 0, false, true), rec(3, 1, false, false)],
            None,
            &rows,
            false,
        );
        assert_eq!(h.versions.len(), 1);
        assert_eq!(h.versions[0].values, [1, 1]);
        // B at 2 arrives last: A, B, A.
        let h = history(
            vec![
                rec(1, 0, false, true),
                rec(3, 1, false, true),
                rec(2, 2, false, false),
            ],
            None,
            &rows,
            false,
        );
        assert_eq!(spans(&h), [(0, Some(2), 0), (2, Some(1), 2), (1, None, 1)]);
    }

    #[test]
    fn deletes_close_and_an_early_delete_is_remembered() {
        let rows = Rows(vec![(Some("A"), None), (None, None), (Some("B"), None)]);
        // A at 10 closed by a delete at 20, then a late B at 15: B is closed at 20 too.
        let h = history(
            vec![
                rec(10, 0, false, true),
                rec(20, 1, true, true),
                rec(15, 2, false, false),
            ],
            None,
            &rows,
            false,
        );
        assert_eq!(spans(&h), [(0, Some(2), 0), (2, Some(1), 2)]);
        // A delete with nothing to close, then an older upsert: closed at once.
        let h = history(
            vec![rec(20, 1, true, true), rec(10, 0, false, false)],
            None,
            &rows,
            false,
        );
        assert_eq!(spans(&h), [(0, Some(1), 0)]);
    }

    #[test]
    fn one_sequence_keeps_the_applied_record_else_the_delete_else_the_later() {
        let rows = Rows(vec![(Some("A"), None), (Some("B"), None), (None, None)]);
        let h = history(
            vec![rec(5, 0, false, true), rec(5, 1, false, false)],
            None,
            &rows,
            false,
        );
        assert_eq!((h.stale, h.ties, h.kept.len()), (1, 0, 0));
        assert_eq!(spans(&h), [(0, None, 0)]);
        let h = history(
            vec![
                rec(5, 2, true, false),
                rec(5, 0, false, false),
                rec(5, 1, false, false),
            ],
            None,
            &rows,
            false,
        );
        assert_eq!((h.ties, h.kept.clone()), (2, vec![2]));
        assert!(h.versions.is_empty());
        let h = history(
            vec![rec(5, 1, false, false), rec(5, 0, false, false)],
            None,
            &rows,
            false,
        );
        assert_eq!(spans(&h), [(1, None, 1)]);
    }

    #[test]
    fn ignore_null_updates_keeps_the_stored_values() {
        let rows = Rows(vec![(Some("A"), Some("x")), (None, Some("y"))]);
        let h = history(
            vec![rec(1, 0, false, true), rec(2, 1, false, false)],
            None,
            &rows,
            true,
        );
        assert_eq!(h.versions.len(), 1, "a null tracked value is no change");
        assert_eq!(h.versions[0].values, [0, 1]);
        let h = history(
            vec![rec(1, 0, false, true), rec(2, 1, false, false)],
            None,
            &rows,
            false,
        );
        assert_eq!(h.versions.len(), 2);
    }

    #[test]
    fn folding_from_the_current_version_equals_folding_every_record() {
        // Rows 0-3 applied, 4-7 new (all later); nulls for ignore_null_updates.
        let rows = Rows(vec![
            (Some("A"), Some("x")),
            (Some("A"), Some("y")),
            (Some("B"), None),
            (Some("B"), Some("w")),
            (None, Some("v")),
            (Some("B"), Some("u")),
            (Some("C"), None),
            (Some("C"), Some("t")),
        ]);
        let applied = |deleted_last: bool| {
            (0..4)
                .map(|i| rec(i as u8 + 1, i, deleted_last && i == 3, true))
                .collect::<Vec<_>>()
        };
        let new: Vec<Record> = (4..8).map(|i| rec(i as u8 + 1, i, false, false)).collect();
        for ignore_nulls in [false, true] {
            for deleted_last in [false, true] {
                let every: Vec<Record> = applied(deleted_last)
                    .into_iter()
                    .chain(new.clone())
                    .collect();
                let whole = history(every, None, &rows, ignore_nulls);
                let changed: Vec<Version> = whole
                    .versions
                    .into_iter()
                    .filter(|v| v.end.is_none_or(|e| e >= 4))
                    .collect();
                let before = history(applied(deleted_last), None, &rows, ignore_nulls);
                let current = before.versions.into_iter().find(|v| v.end.is_none());
                assert_eq!(current.is_none(), deleted_last);
                let folded = history(new.clone(), current, &rows, ignore_nulls);
                assert_eq!(
                    folded.versions, changed,
                    "ignore_nulls {ignore_nulls}, delete {deleted_last}"
                );
                assert_eq!(folded.kept, whole.kept);
            }
        }
    }
}
