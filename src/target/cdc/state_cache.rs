//! The SCD 1 flow's state, kept in memory between the batches of one run.
//!
//! A batch's own keys are about one entry in a hundred of the state log, yet reading
//! their entries means decoding the whole log, and that read was the longest part of a
//! batch. So once a run applies its second batch, it reads the log whole and keeps the
//! latest entry of every key (a run of one batch reads only its keys' entries); each
//! committed batch then updates what is kept with the entries it appended. What is kept
//! is used only while the state table is at the version it was made for, so a commit this
//! process did not see (or one that failed) means a fresh read. A compaction writes the
//! live entries from what is kept ([`StateCache::rows`]) and keeps it: reading the log
//! whole to compact it, then again to keep it, cost about 1 s of a 100-batch run and held
//! the log beside what is kept (peak RSS 353 against 280 MiB on the bench).
//! A state of more than [`MAX_CACHED_KEYS`] keys is not kept: it is read each batch, and
//! memory stays bounded by the batch, not by the number of keys.
//!
//! The SCD 2 flow keeps less, the same way ([`LastApplied`]): the greatest sequence applied
//! to each key, which says which of a batch's keys have late records.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::ops::Bound;

use arrow_array::{Array, BinaryArray, BooleanArray, Int64Array, RecordBatch};

use crate::flow::cdc::scd1::StateEntry;
use crate::flow::cdc::{FastMap, FastSet, KeyBytes};

/// The truncate mark's key: no real key encodes to no bytes.
pub(super) const TRUNCATE_KEY: &[u8] = b"";

/// The most keys whose state is kept (72 bytes each for short keys in order, about 110 in
/// the B-tree of keys that came out of order: 144 to 220 MB; the ordered vector's growth
/// is a `mremap`, not a copy beside the old one, at that size).
pub const MAX_CACHED_KEYS: usize = 2_000_000;

/// Bytes of a key or a sequence, inline when short (a BIGINT key or sequence encodes to 9
/// bytes), so a kept entry costs one map slot and no allocation.
///
/// An inline value is its bytes padded with zeros to 15, then its length: compared as one
/// big-endian `u128`, two of them order as their byte slices do (a shorter slice that is
/// a prefix of the other compares less, by the length byte). A B-tree of a million keys
/// compares some 30 keys an insert; a `memcmp` call each was a tenth of a first load's CPU.
#[derive(Clone)]
enum ShortBytes {
    Inline([u8; 16]),
    Heap(Box<[u8]>),
}

/// Bytes kept inline by [`ShortBytes`]; the 16th holds the length.
const INLINE: usize = 15;

/// The inline form of `b` when it is short enough (see [`ShortBytes`]).
fn padded(b: &[u8]) -> Option<[u8; 16]> {
    let len = u8::try_from(b.len())
        .ok()
        .filter(|&n| usize::from(n) <= INLINE)?;
    let mut bytes = [0u8; 16];
    bytes[..b.len()].copy_from_slice(b);
    bytes[INLINE] = len;
    Some(bytes)
}

/// The least and the greatest of `keys` as byte slices order, in one pass that compares
/// short keys as one `u128` each.
fn lowest_and_highest(keys: &FastSet<KeyBytes>) -> Option<(&[u8], &[u8])> {
    let mut iter = keys.iter();
    let first = iter.next()?;
    let order = |k: &[u8]| padded(k).map(u128::from_be_bytes);
    let (mut low, mut high) = (first.as_slice(), first.as_slice());
    let (mut low_at, mut high_at) = (order(low), order(high));
    for k in iter {
        let at = order(k);
        let below = match (at, low_at) {
            (Some(a), Some(l)) => a < l,
            _ => k.as_slice() < low,
        };
        if below {
            (low, low_at) = (k, at);
        }
        let above = match (at, high_at) {
            (Some(a), Some(h)) => a > h,
            _ => k.as_slice() > high,
        };
        if above {
            (high, high_at) = (k, at);
        }
    }
    Some((low, high))
}

impl ShortBytes {
    fn new(b: &[u8]) -> ShortBytes {
        match padded(b) {
            Some(bytes) => ShortBytes::Inline(bytes),
            None => ShortBytes::Heap(b.into()),
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            ShortBytes::Inline(bytes) => &bytes[..usize::from(bytes[INLINE])],
            ShortBytes::Heap(b) => b,
        }
    }
}

impl Borrow<[u8]> for ShortBytes {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for ShortBytes {
    fn eq(&self, other: &ShortBytes) -> bool {
        match (self, other) {
            (ShortBytes::Inline(a), ShortBytes::Inline(b)) => a == b,
            _ => self.as_slice() == other.as_slice(),
        }
    }
}

impl Eq for ShortBytes {}

impl PartialOrd for ShortBytes {
    fn partial_cmp(&self, other: &ShortBytes) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ShortBytes {
    // As the slices order, so a map of these may also be searched with a `&[u8]`.
    fn cmp(&self, other: &ShortBytes) -> std::cmp::Ordering {
        match (self, other) {
            (ShortBytes::Inline(a), ShortBytes::Inline(b)) => {
                u128::from_be_bytes(*a).cmp(&u128::from_be_bytes(*b))
            }
            _ => self.as_slice().cmp(other.as_slice()),
        }
    }
}

struct Kept {
    seq: ShortBytes,
    deleted: bool,
    at_ms: i64,
    /// The batch that wrote it: of a key's entries in the log, the latest batch's counts.
    batch: i64,
}

/// Every key's kept entry, in two parts holding no key in common: `tail`, keys in
/// ascending order, where a key greater than every kept one goes with one push (a first
/// load's keys, a table's new ids); and `tree`, the keys that came in below those. A first
/// load of a million keys spent an eighth of its CPU inserting them one by one into a
/// B-tree, searching from its root each time, on the core that decodes the next batch.
#[derive(Default)]
struct KeptEntries {
    tail: Vec<(ShortBytes, Kept)>,
    tree: BTreeMap<ShortBytes, Kept>,
}

impl KeptEntries {
    fn len(&self) -> usize {
        self.tail.len() + self.tree.len()
    }

    /// Keeps `kept` for `key` unless the key has an entry of a later batch.
    fn upsert(&mut self, key: ShortBytes, kept: Kept) {
        let past_tail = self.tail.last().is_none_or(|(last, _)| *last < key);
        let past_tree = self
            .tree
            .last_key_value()
            .is_none_or(|(last, _)| *last < key);
        if past_tail && past_tree {
            self.tail.push((key, kept));
            return;
        }
        let in_tail = if past_tail {
            None
        } else {
            self.tail.binary_search_by(|(k, _)| k.cmp(&key)).ok()
        };
        let old = match in_tail {
            Some(i) => &mut self.tail[i].1,
            None => match self.tree.entry(key) {
                Entry::Occupied(slot) => slot.into_mut(),
                Entry::Vacant(slot) => {
                    slot.insert(kept);
                    return;
                }
            },
        };
        if old.batch < kept.batch {
            *old = kept;
        }
    }

    fn get(&self, key: &ShortBytes) -> Option<&Kept> {
        match self.tail.binary_search_by(|(k, _)| k.cmp(key)) {
            Ok(i) => Some(&self.tail[i].1),
            Err(_) => self.tree.get(key),
        }
    }

    /// Whether any key from `low` to `high` (both included) has an entry.
    fn any_between(&self, low: &[u8], high: &[u8]) -> bool {
        let at = self.tail.partition_point(|(k, _)| k.as_slice() < low);
        let in_tail = self.tail.get(at).is_some_and(|(k, _)| k.as_slice() <= high);
        let range = (Bound::Included(low), Bound::Included(high));
        in_tail || self.tree.range::<[u8], _>(range).next().is_some()
    }

    /// Every entry in key order: the two parts merged.
    fn iter(&self) -> impl Iterator<Item = (&ShortBytes, &Kept)> {
        let mut tail = self.tail.iter().map(|(k, e)| (k, e)).peekable();
        let mut tree = self.tree.iter().peekable();
        std::iter::from_fn(move || match (tail.peek(), tree.peek()) {
            (Some((a, _)), Some((b, _))) if b < a => tree.next(),
            (Some(_), _) => tail.next(),
            (None, _) => tree.next(),
        })
    }

    fn retain(&mut self, mut live: impl FnMut(&Kept) -> bool) {
        self.tail.retain(|(_, e)| live(e));
        self.tree.retain(|_, e| live(e));
    }
}

/// The latest state entry of every key, and the truncate mark, as the state table holds
/// them at `version`.
pub struct StateCache {
    version: Option<u64>,
    entries: KeptEntries,
    mark: Option<KeyBytes>,
    mark_at_ms: i64,
    mark_batch: i64,
}

/// One row of the state log: key, sequence, tombstone, applied at (ms), written by batch.
pub type StateRow<'a> = (&'a [u8], &'a [u8], bool, i64, i64);

impl StateCache {
    /// Nothing kept yet: filled with [`StateCache::insert`], entry by entry of the log.
    pub fn empty() -> StateCache {
        StateCache {
            version: None,
            entries: KeptEntries::default(),
            mark: None,
            mark_at_ms: 0,
            mark_batch: i64::MIN,
        }
    }

    /// An entry of the log, kept unless its key has one of a later batch (the mark's, when
    /// `key` is the truncate key).
    pub fn insert(&mut self, key: &[u8], seq: &[u8], deleted: bool, at_ms: i64, batch: i64) {
        if key == TRUNCATE_KEY {
            if batch > self.mark_batch {
                self.mark = Some(KeyBytes::from_slice(seq));
                self.mark_at_ms = at_ms;
                self.mark_batch = batch;
            }
            return;
        }
        let kept = Kept {
            seq: ShortBytes::new(seq),
            deleted,
            at_ms,
            batch,
        };
        self.entries.upsert(ShortBytes::new(key), kept);
    }

    /// Keys kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether this is the state of a table now at `version`.
    pub fn is_at(&self, version: Option<u64>) -> bool {
        self.version.is_some() && self.version == version
    }

    /// The entries of `keys` that have one.
    pub fn lookup(&self, keys: &FastSet<KeyBytes>) -> FastMap<KeyBytes, StateEntry> {
        // Keys past every kept one, or in a gap between them (a first load, new ids): one
        // range search instead of a search per key.
        let Some((low, high)) = lowest_and_highest(keys) else {
            return FastMap::default();
        };
        if !self.entries.any_between(low, high) {
            return FastMap::default();
        }
        keys.iter()
            .filter_map(|k| {
                self.entries.get(&ShortBytes::new(k)).map(|e| {
                    (
                        k.clone(),
                        StateEntry {
                            seq: KeyBytes::from_slice(e.seq.as_slice()),
                            deleted: e.deleted,
                            at_ms: e.at_ms,
                        },
                    )
                })
            })
            .collect()
    }

    /// Whether any key is kept from `low` to `high` (in byte order), a deleted one too.
    pub fn holds_any_between(&self, low: &[u8], high: &[u8]) -> bool {
        self.entries.any_between(low, high)
    }

    pub fn mark(&self) -> Option<&[u8]> {
        self.mark.as_deref()
    }

    /// What is kept as the log's rows: every key's entry in key order, then the mark
    /// (under the truncate key), so a compaction writes the log from memory.
    pub fn rows(&self) -> impl Iterator<Item = StateRow<'_>> {
        let entries = self
            .entries
            .iter()
            .map(|(k, e)| (k.as_slice(), e.seq.as_slice(), e.deleted, e.at_ms, e.batch));
        let mark = self
            .mark
            .as_deref()
            .map(|m| (TRUNCATE_KEY, m, false, self.mark_at_ms, self.mark_batch));
        entries.chain(mark)
    }

    /// Keeps only the entries `live` accepts (by sequence, tombstone and applied time): what
    /// a compaction left in the log.
    pub fn retain(&mut self, mut live: impl FnMut(&[u8], bool, i64) -> bool) {
        self.entries
            .retain(|e| live(e.seq.as_slice(), e.deleted, e.at_ms));
    }

    /// The state after batch `batch` appended `rows` (the state log's rows it wrote: key,
    /// seq, deleted, at_ms, batch; the truncate mark's under the truncate key); its
    /// version is set once the state table's commit succeeds ([`StateCache::set_version`]).
    /// False when `rows` are not in the state log's layout (then nothing may be kept).
    #[must_use]
    pub fn commit_rows(&mut self, rows: &RecordBatch, batch: i64) -> bool {
        let column = |i: usize| rows.columns().get(i).map(|c| c.as_any());
        let (Some(keys), Some(seqs), Some(deleted), Some(at_ms)) = (
            column(0).and_then(|c| c.downcast_ref::<BinaryArray>()),
            column(1).and_then(|c| c.downcast_ref::<BinaryArray>()),
            column(2).and_then(|c| c.downcast_ref::<BooleanArray>()),
            column(3).and_then(|c| c.downcast_ref::<Int64Array>()),
        ) else {
            return false;
        };
        self.commit(
            (0..rows.num_rows()).map(|i| {
                (
                    keys.value(i),
                    seqs.value(i),
                    deleted.value(i),
                    at_ms.value(i),
                )
            }),
            None,
            batch,
            None,
        );
        true
    }

    /// This is the state of the state table at `version`.
    pub fn set_version(&mut self, version: Option<u64>) {
        self.version = version;
    }

    /// The state after batch `batch` appended `entries` (and raised the mark to `mark`,
    /// applied at its time in ms), committed as table `version`.
    /// `entries`: (key, sequence, tombstone, applied at ms).
    pub fn commit<'a>(
        &mut self,
        entries: impl Iterator<Item = (&'a [u8], &'a [u8], bool, i64)>,
        mark: Option<(&[u8], i64)>,
        batch: i64,
        version: Option<u64>,
    ) {
        // In key order, so keys past every kept one are pushed onto the tail, and the
        // others' searches walk next to the last one's path.
        let mut entries: Vec<_> = entries.collect();
        entries.sort_unstable_by_key(|e| e.0);
        for (key, seq, deleted, at_ms) in entries {
            self.insert(key, seq, deleted, at_ms, batch);
        }
        if let Some((m, at_ms)) = mark {
            self.insert(TRUNCATE_KEY, m, false, at_ms, batch);
        }
        self.version = version;
    }
}

/// The greatest sequence applied to each key of an SCD type 2 flow, as its records table
/// at `version` holds it: what tells a batch which of its keys are late.
pub struct LastApplied {
    pub version: Option<u64>,
    seqs: BTreeMap<ShortBytes, ShortBytes>,
}

impl LastApplied {
    /// Nothing applied yet, at the records table's `version`: filled with
    /// [`LastApplied::raise`].
    pub fn empty(version: Option<u64>) -> LastApplied {
        LastApplied {
            version,
            seqs: BTreeMap::new(),
        }
    }

    /// Keys kept.
    pub fn len(&self) -> usize {
        self.seqs.len()
    }

    /// Keeps `seq` for `key` when it is greater than the one kept.
    pub fn raise(&mut self, key: &[u8], seq: &[u8]) {
        match self.seqs.get_mut(&ShortBytes::new(key)) {
            Some(kept) if kept.as_slice() < seq => *kept = ShortBytes::new(seq),
            Some(_) => {}
            None => {
                self.seqs.insert(ShortBytes::new(key), ShortBytes::new(seq));
            }
        }
    }

    pub fn of(&self, keys: &FastSet<KeyBytes>) -> FastMap<KeyBytes, KeyBytes> {
        keys.iter()
            .filter_map(|k| {
                self.seqs
                    .get(&ShortBytes::new(k))
                    .map(|s| (k.clone(), KeyBytes::from_slice(s.as_slice())))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: &[u8], deleted: bool) -> StateEntry {
        StateEntry {
            seq: KeyBytes::from_slice(seq),
            deleted,
            at_ms: 7,
        }
    }

    /// Byte strings that differ in a zero, a 0xFF, their length, and past the inline
    /// length: every prefix relation short keys and long ones can have.
    fn tricky_keys() -> Vec<Vec<u8>> {
        let mut keys = vec![Vec::new()];
        for len in 1..=4 {
            let mut next = Vec::new();
            for k in keys.iter().filter(|k| k.len() == len - 1) {
                for b in [0u8, 1, 255] {
                    next.push([k.as_slice(), &[b]].concat());
                }
            }
            keys.extend(next);
        }
        for len in [14, 15, 16, 17] {
            for fill in [0u8, 1, 255] {
                keys.push(vec![fill; len]);
                keys.push([vec![fill; len - 1], vec![0]].concat());
            }
        }
        keys
    }

    #[test]
    fn short_bytes_and_the_lowest_and_highest_key_order_as_byte_slices_do() {
        let keys = tricky_keys();
        for a in &keys {
            for b in &keys {
                let (x, y) = (ShortBytes::new(a), ShortBytes::new(b));
                assert_eq!(x.cmp(&y), a.cmp(b), "{a:?} vs {b:?}");
                assert_eq!(x == y, a == b, "{a:?} == {b:?}");
                assert_eq!(x.as_slice(), a.as_slice());
            }
        }
        for window in keys.windows(7) {
            let set: FastSet<KeyBytes> = window.iter().map(|k| KeyBytes::from_slice(k)).collect();
            let (low, high) = lowest_and_highest(&set).expect("not empty");
            assert_eq!(low, set.iter().min().expect("not empty").as_slice());
            assert_eq!(high, set.iter().max().expect("not empty").as_slice());
        }
        assert!(lowest_and_highest(&FastSet::default()).is_none());
    }

    #[test]
    fn kept_entries_are_the_latest_batch_s_found_by_their_bytes_short_and_long() {
        let long = vec![3u8; 40];
        let mut c = StateCache::empty();
        c.insert(&[1], &[5], false, 1, 2);
        c.insert(&[1], &[4], true, 1, 1); // an older batch's entry, read later, loses
        c.insert(&long, &long, true, 2, 1);
        c.insert(super::TRUNCATE_KEY, &[2], false, 0, 1);
        assert_eq!(c.len(), 2);
        assert_eq!(c.mark(), Some(&[2u8][..]));
        assert!(!c.is_at(None), "nothing is current before a commit");
        c.commit(std::iter::empty(), None, 1, Some(0));
        assert!(c.is_at(Some(0)));
        let keys: FastSet<KeyBytes> = [vec![1u8], long.clone(), vec![9u8]]
            .into_iter()
            .map(KeyBytes::from)
            .collect();
        let found = c.lookup(&keys);
        assert_eq!(found.len(), 2);
        let gap: FastSet<KeyBytes> = [vec![2u8], vec![2u8, 9], vec![3u8]]
            .into_iter()
            .map(KeyBytes::from)
            .collect();
        assert!(
            c.lookup(&gap).is_empty(),
            "keys between the kept ones have no entry"
        );
        let past: FastSet<KeyBytes> = [vec![4u8; 41], vec![9u8]]
            .into_iter()
            .map(KeyBytes::from)
            .collect();
        assert!(c.lookup(&past).is_empty());
        assert_eq!(found[&[1u8][..]].seq.as_slice(), [5u8]);
        assert!(!found[&[1u8][..]].deleted);
        assert!(found[long.as_slice()].deleted && found[long.as_slice()].seq.as_slice() == long);

        let later = entry(&[6], true);
        let mark = [4u8];
        c.commit(
            [(&[1u8][..], &later.seq[..], later.deleted, later.at_ms)].into_iter(),
            Some((&mark, 9)),
            3,
            Some(3),
        );
        assert!(c.is_at(Some(3)) && !c.is_at(Some(4)) && !c.is_at(None));
        let found = c.lookup(&keys);
        assert_eq!(found[&[1u8][..]].seq.as_slice(), [6u8]);
        assert!(found[&[1u8][..]].deleted);
        assert_eq!(c.mark(), Some(&mark[..]));
        // A batch that raises no mark keeps the one there is.
        c.commit(std::iter::empty(), None, 4, Some(4));
        assert_eq!(c.mark(), Some(&mark[..]));

        // As the log's rows: the entries in key order, the mark last, each with its batch.
        let rows: Vec<StateRow> = c.rows().collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0], (&[1u8][..], &[6u8][..], true, 7, 3));
        assert_eq!(rows[1], (&long[..], &long[..], true, 2, 1));
        assert_eq!(rows[2], (super::TRUNCATE_KEY, &mark[..], false, 9, 3));
        // What a compaction drops is dropped here too; the mark stays.
        c.retain(|_, _, at_ms| at_ms > 5);
        let rows: Vec<StateRow> = c.rows().collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].0, &[1u8][..]);
        assert_eq!(c.lookup(&keys).len(), 1);
    }

    /// Keys in order (pushed onto the tail), again out of order, repeated with older and
    /// newer batches, and dropped by `retain`: what is kept, found and listed is what one
    /// B-tree of the same inserts keeps.
    #[test]
    fn keys_in_and_out_of_order_are_kept_as_one_ordered_map_keeps_them() {
        type Model = BTreeMap<Vec<u8>, (Vec<u8>, bool, i64, i64)>;
        type Row = (Vec<u8>, Vec<u8>, bool, i64, i64);
        fn key(n: u64) -> Vec<u8> {
            let mut k = vec![1u8];
            k.extend_from_slice(&n.to_be_bytes());
            if n.is_multiple_of(7) {
                k.extend_from_slice(&[9u8; 12]); // past the inline length
            }
            k
        }
        fn insert(kept: &mut StateCache, model: &mut Model, n: u64, batch: i64, at_ms: i64) {
            let (k, seq) = (key(n), key(n + batch as u64));
            let deleted = n.is_multiple_of(5);
            kept.insert(&k, &seq, deleted, at_ms, batch);
            if model.get(&k).is_none_or(|old| old.3 < batch) {
                model.insert(k, (seq, deleted, at_ms, batch));
            }
        }
        let mut next = crate::testing::xorshift(0x2545_F491_4F6C_DD1Du64);
        let mut kept = StateCache::empty();
        let mut model = Model::new();
        for batch in 1..40i64 {
            let base = batch as u64 * 100;
            match batch % 4 {
                // ascending new keys past every kept one (a first load's)
                0 | 1 => {
                    (0..50).for_each(|i| insert(&mut kept, &mut model, base + i * 2, batch, batch))
                }
                // random keys, old and new, some from an older batch (read out of order)
                2 => (0..50).for_each(|_| {
                    let b = batch - (next() % 3) as i64;
                    insert(&mut kept, &mut model, next() % (base + 200), b, batch)
                }),
                // keys between the tail's, and below it
                _ => (0..50)
                    .for_each(|i| insert(&mut kept, &mut model, base - 99 + i * 2, batch, batch)),
            }
            if batch % 13 == 0 {
                kept.retain(|_, _, at_ms| at_ms % 3 != 0);
                model.retain(|_, e| e.2 % 3 != 0);
            }
            let rows: Vec<Row> = kept
                .rows()
                .map(|(k, s, d, at, b)| (k.to_vec(), s.to_vec(), d, at, b))
                .collect();
            let expected: Vec<Row> = model
                .iter()
                .map(|(k, (s, d, at, b))| (k.clone(), s.clone(), *d, *at, *b))
                .collect();
            assert_eq!(rows, expected, "after batch {batch}");
            assert_eq!(kept.len(), model.len());
            let probe: FastSet<KeyBytes> = (0..60)
                .map(|_| KeyBytes::from_slice(&key(next() % (base + 300))))
                .collect();
            let found = kept.lookup(&probe);
            for k in &probe {
                match (found.get(k.as_slice()), model.get(k.as_slice())) {
                    (None, None) => {}
                    (Some(f), Some(m)) => assert_eq!(
                        (f.seq.as_slice(), f.deleted, f.at_ms),
                        (m.0.as_slice(), m.1, m.2)
                    ),
                    (f, m) => panic!("{k:?}: kept {:?}, expected {m:?}", f.map(|e| &e.seq)),
                }
            }
        }
        assert!(
            !kept.entries.tree.is_empty() && kept.entries.tail.len() > kept.entries.tree.len(),
            "both parts were used"
        );
    }

    /// The state log's rows a batch wrote, applied from its state batch, keep what the
    /// same entries and mark applied one by one keep.
    #[test]
    fn rows_of_a_state_batch_are_kept_as_their_entries() {
        let entries: Vec<(&[u8], &[u8], bool, i64)> = vec![
            (b"\x01k2", b"\x01s9", false, 5),
            (b"\x01k1", b"\x01s3", true, 6),
            (b"\x01a-long-key-past-fifteen-bytes", b"\x01s4", false, 7),
        ];
        let mark: (&[u8], i64) = (b"\x01s2", 8);
        let mut one_by_one = StateCache::empty();
        one_by_one.insert(b"\x01k1", b"\x01s1", false, 1, 3);
        let mut from_rows = StateCache::empty();
        from_rows.insert(b"\x01k1", b"\x01s1", false, 1, 3);
        one_by_one.commit(entries.iter().copied(), Some(mark), 4, Some(9));
        let rows = super::super::state_batch(
            &entries
                .iter()
                .map(|&(k, s, d, at)| (k, s, d, at, 4))
                .chain([(TRUNCATE_KEY, mark.0, false, mark.1, 4)])
                .collect::<Vec<_>>(),
        );
        assert!(from_rows.commit_rows(&rows, 4));
        assert!(
            !from_rows.is_at(Some(9)),
            "kept for no version until its commit"
        );
        from_rows.set_version(Some(9));
        assert!(from_rows.is_at(Some(9)));
        let all = |c: &StateCache| format!("{:?}", c.rows().collect::<Vec<_>>());
        assert_eq!(all(&from_rows), all(&one_by_one));
        assert_eq!(from_rows.rows().count(), 4, "three keys and the mark");
        // Rows in another layout are refused (then nothing may be kept).
        let other = RecordBatch::try_new(
            std::sync::Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
                "x",
                arrow_schema::DataType::Int64,
                false,
            )])),
            vec![std::sync::Arc::new(Int64Array::from(vec![1]))],
        )
        .unwrap();
        assert!(!from_rows.commit_rows(&other, 5));
    }
}
