//! SCD type 1: per key, the change with the greatest sequence wins. A change whose sequence
//! is not greater than the key's applied one is stale and ignored; a delete removes the row
//! and leaves a tombstone (so a late, older upsert does not bring it back); a truncate at
//! sequence s removes every row sequenced below s, and every later-arriving change below it.
//!
//! Two changes of one key with the same sequence are ordered deterministically: an upsert
//! before a delete (the delete wins), otherwise in arrival order (the later wins); each such
//! tie is counted so the flow can say so.

use super::{CdcError, FastMap, KeyBytes};

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::SchemaRef;

/// What the flow remembers of a key: the sequence last applied, and whether it was a
/// delete (a tombstone), with when it was applied (tombstones are collected after
/// `pipelines.cdc.tombstoneGCThresholdInSeconds`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateEntry {
    pub seq: KeyBytes,
    pub deleted: bool,
    pub at_ms: i64,
}

/// One change record, encoded.
#[derive(Debug, Clone)]
pub struct Change {
    pub key: KeyBytes,
    pub seq: KeyBytes,
    pub delete: bool,
    pub truncate: bool,
}

/// What happens to a key's row in the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowChange {
    /// The row becomes these change records folded in order (rows of the batch); `on_existing`
    /// when they fold onto the current row (`ignore_null_updates` keeps its values).
    Upsert {
        records: Vec<usize>,
        on_existing: bool,
    },
    Delete,
}

/// The effect of one batch.
#[derive(Debug, Default)]
pub struct Reduction {
    /// Keys whose target row changes (their new state is in `state`).
    pub rows: FastMap<KeyBytes, RowChange>,
    /// New state entries (keys without a change keep theirs).
    pub state: FastMap<KeyBytes, StateEntry>,
    /// The truncate mark after the batch, when the batch raised it.
    pub truncate: Option<KeyBytes>,
    pub stale: u64,
    /// Changes dropped because a truncate sequenced after them.
    pub truncated: u64,
    pub ties: u64,
}

/// Reduces a batch of changes against the keys' state (`state`: every key of the batch that
/// has one) and the truncate mark before it.
pub fn reduce(
    changes: &[Change],
    state: &FastMap<KeyBytes, StateEntry>,
    truncate_before: Option<&[u8]>,
    ignore_null_updates: bool,
    now_ms: i64,
) -> Reduction {
    let mut out = Reduction::default();
    let batch_truncate = changes
        .iter()
        .filter(|c| c.truncate)
        .map(|c| c.seq.as_slice())
        .max();
    let mark: Option<&[u8]> = match (truncate_before, batch_truncate) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    if batch_truncate.is_some_and(|b| truncate_before.is_none_or(|a| b > a)) {
        out.truncate = mark.map(KeyBytes::from_slice);
    }
    let mut by_key: FastMap<&[u8], Vec<usize>> = FastMap::default();
    for (i, c) in changes.iter().enumerate() {
        if !c.truncate {
            by_key.entry(c.key.as_slice()).or_default().push(i);
        }
    }
    for (key, mut records) in by_key {
        // Sequence order; at a tie an upsert goes before a delete, then arrival order.
        records.sort_by(|&a, &b| {
            (&changes[a].seq, changes[a].delete, a).cmp(&(&changes[b].seq, changes[b].delete, b))
        });
        out.ties += records
            .windows(2)
            .filter(|w| changes[w[0]].seq == changes[w[1]].seq)
            .count() as u64;
        let prior = state.get(key);
        let before = records.len();
        records.retain(|&i| prior.is_none_or(|p| changes[i].seq > p.seq));
        out.stale += (before - records.len()) as u64;
        let before = records.len();
        records.retain(|&i| mark.is_none_or(|m| changes[i].seq.as_slice() >= m));
        out.truncated += (before - records.len()) as u64;
        let Some(&last) = records.last() else {
            continue;
        };
        let last_delete = records.iter().rposition(|&i| changes[i].delete);
        let live = prior.is_some_and(|p| !p.deleted && mark.is_none_or(|m| p.seq.as_slice() >= m));
        let change = match last_delete {
            Some(d) if d + 1 == records.len() => RowChange::Delete,
            Some(d) => RowChange::Upsert {
                records: fold(&records[d + 1..], ignore_null_updates),
                on_existing: false,
            },
            None => RowChange::Upsert {
                records: fold(&records, ignore_null_updates),
                on_existing: ignore_null_updates && live,
            },
        };
        let deleted = change == RowChange::Delete;
        out.state.insert(
            KeyBytes::from_slice(key),
            StateEntry {
                seq: changes[last].seq.clone(),
                deleted,
                at_ms: now_ms,
            },
        );
        if deleted && !live {
            // Nothing to remove; the tombstone is remembered for later changes.
            continue;
        }
        out.rows.insert(KeyBytes::from_slice(key), change);
    }
    out
}

/// The records an upsert is made of: the last alone, or every one (later values over
/// earlier ones where not null) with `ignore_null_updates`.
fn fold(records: &[usize], ignore_null_updates: bool) -> Vec<usize> {
    if ignore_null_updates {
        records.to_vec()
    } else {
        records.last().map(|&r| vec![r]).unwrap_or_default()
    }
}

/// The new target rows of `rows`' upserts, in `schema`: each column's value is the last
/// folded record's, or with several records (ignore_null_updates) the last non-null one,
/// falling back on the existing row's (`existing`: a key's current row, as (batch, row) of
/// `current`).
pub fn upserted_rows(
    schema: &SchemaRef,
    changes: &RecordBatch,
    upserts: &[(&RowChange, Option<(usize, usize)>)],
    current: &[RecordBatch],
) -> Result<RecordBatch, CdcError> {
    let data = |e: arrow_schema::ArrowError| CdcError::Data(e.to_string());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        // Source 0 is the changes' column; 1.. the current rows' batches.
        let sources: Vec<ArrayRef> = std::iter::once(changes)
            .chain(current)
            .map(|b| crate::record::column_as(b, field))
            .collect::<Result<_, _>>()
            .map_err(data)?;
        let mut picks: Vec<(usize, usize)> = Vec::with_capacity(upserts.len());
        for (change, existing) in upserts {
            let RowChange::Upsert {
                records,
                on_existing,
            } = change
            else {
                continue;
            };
            // A lone record replaces the row whole, unless it folds onto the current row
            // (`ignore_null_updates`), whose values its nulls keep: in a later batch too.
            let whole = records.len() == 1 && !on_existing;
            let chosen = records
                .iter()
                .rev()
                .find(|&&r| whole || !sources[0].is_null(r))
                .map(|&r| (0, r));
            let pick = match (chosen, on_existing, existing) {
                (Some(p), _, _) => p,
                (None, true, Some((b, r))) => (b + 1, *r),
                // Every record is null here and there is no row to keep: null.
                (None, _, _) => (0, *records.last().expect("an upsert has a record")),
            };
            picks.push(pick);
        }
        let refs: Vec<&dyn Array> = sources.iter().map(AsRef::as_ref).collect();
        columns.push(arrow_select::interleave::interleave(&refs, &picks).map_err(data)?);
    }
    RecordBatch::try_new(schema.clone(), columns).map_err(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(bytes: &[u8]) -> KeyBytes {
        KeyBytes::from_slice(bytes)
    }

    fn ch(key: u8, seq: u8, delete: bool) -> Change {
        Change {
            key: k(&[key]),
            seq: k(&[seq]),
            delete,
            truncate: false,
        }
    }

    #[test]
    fn the_greatest_sequence_wins_and_stale_changes_are_ignored() {
        let changes = [
            ch(1, 5, false),
            ch(1, 3, false),
            ch(2, 2, false),
            ch(3, 1, false),
        ];
        let state = FastMap::from_iter([(
            k(&[3]),
            StateEntry {
                seq: k(&[4]),
                deleted: false,
                at_ms: 0,
            },
        )]);
        let r = reduce(&changes, &state, None, false, 9);
        assert_eq!(
            r.rows[&k(&[1])],
            RowChange::Upsert {
                records: vec![0],
                on_existing: false
            }
        );
        assert!(!r.rows.contains_key(&k(&[3])), "older than the applied one");
        assert_eq!(r.stale, 1);
        assert_eq!(r.state[&k(&[1])].seq, k(&[5]));
    }

    #[test]
    fn a_delete_leaves_a_tombstone_and_a_late_upsert_stays_out() {
        let r = reduce(
            &[ch(1, 6, true), ch(1, 5, false)],
            &FastMap::default(),
            None,
            false,
            9,
        );
        assert!(!r.rows.contains_key(&k(&[1])), "no row to delete");
        assert!(r.state[&k(&[1])].deleted);
        let later = reduce(&[ch(1, 4, false)], &r.state, None, false, 10);
        assert!(later.rows.is_empty());
        assert_eq!(later.stale, 1);
    }

    #[test]
    fn at_a_tie_the_delete_wins_and_the_tie_is_counted() {
        let state = FastMap::from_iter([(
            k(&[1]),
            StateEntry {
                seq: k(&[1]),
                deleted: false,
                at_ms: 0,
            },
        )]);
        let r = reduce(&[ch(1, 5, true), ch(1, 5, false)], &state, None, false, 9);
        assert_eq!(r.rows[&k(&[1])], RowChange::Delete);
        assert_eq!(r.ties, 1);
    }

    #[test]
    fn a_truncate_drops_what_is_sequenced_before_it() {
        let mut changes = vec![ch(1, 2, false), ch(2, 6, false)];
        changes.push(Change {
            key: k(&[]),
            seq: k(&[3]),
            delete: false,
            truncate: true,
        });
        let r = reduce(&changes, &FastMap::default(), None, false, 9);
        assert_eq!(r.truncate, Some(k(&[3])));
        assert!(!r.rows.contains_key(&k(&[1])));
        assert!(r.rows.contains_key(&k(&[2])));
        assert_eq!(r.truncated, 1);
    }

    #[test]
    fn a_lone_record_folding_onto_the_current_row_keeps_its_values_where_null() {
        use arrow_array::{Array, StringArray};
        use arrow_schema::{DataType, Field, Schema};
        let schema = std::sync::Arc::new(Schema::new(vec![
            Field::new("name", DataType::Utf8, true),
            Field::new("city", DataType::Utf8, true),
        ]));
        let batch = |name: Option<&str>, city: Option<&str>| {
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    std::sync::Arc::new(StringArray::from(vec![name])),
                    std::sync::Arc::new(StringArray::from(vec![city])),
                ],
            )
            .unwrap()
        };
        let current = batch(Some("Isabel"), Some("Monterrey"));
        let change = batch(None, Some("Chihuahua"));
        let onto = RowChange::Upsert {
            records: vec![0],
            on_existing: true,
        };
        let out = upserted_rows(
            &schema,
            &change,
            &[(&onto, Some((0, 0)))],
            std::slice::from_ref(&current),
        )
        .unwrap();
        let text = |c: usize| {
            out.column(c)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .clone()
        };
        assert_eq!(text(0).value(0), "Isabel", "the stored name is kept");
        assert_eq!(text(1).value(0), "Chihuahua");
        // Without ignore_null_updates the record replaces the row whole.
        let whole = RowChange::Upsert {
            records: vec![0],
            on_existing: false,
        };
        let out = upserted_rows(&schema, &change, &[(&whole, Some((0, 0)))], &[current]).unwrap();
        assert!(out.column(0).is_null(0));
    }
}
