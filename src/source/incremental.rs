//! Incremental listing of an object store (`cloudFiles.useIncrementalListing`): start the
//! listing on the server after the greatest key already ingested, with a full listing every
//! `cloudFiles.fullListingInterval` to catch a key that arrived out of order. `auto` lists
//! incrementally only once a full listing has shown new keys arriving after the ingested
//! ones, and stops at the first key that arrives out of order.
//!
//! Pure decisions over [`ListingState`]; the stream reads and records the state in its
//! checkpoint.

use std::time::Duration;

use crate::options::IncrementalListing;

/// What the checkpoint remembers about listing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListingState {
    /// When the source was last listed in full (ms since the epoch).
    pub last_full_ms: Option<i64>,
    /// Whether the last full listing's new keys all sorted after the ingested ones.
    pub lexical_order: Option<bool>,
}

/// Where a listing starts (`None`: list everything).
pub fn start_after(
    mode: IncrementalListing,
    full_listing_interval: Duration,
    state: ListingState,
    now_ms: i64,
    high_water: Option<&str>,
) -> Option<String> {
    if mode == IncrementalListing::Never {
        return None;
    }
    let interval_ms = i64::try_from(full_listing_interval.as_millis()).unwrap_or(i64::MAX);
    if state
        .last_full_ms
        .is_none_or(|t| now_ms.saturating_sub(t) >= interval_ms)
    {
        return None;
    }
    if mode == IncrementalListing::Auto && state.lexical_order != Some(true) {
        return None;
    }
    high_water.map(str::to_string)
}

/// What a full listing showed, and what to record of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullListing<'a> {
    /// New keys that sort at or before the high-water mark (they arrived out of order).
    pub late: Vec<&'a str>,
    /// Whether new keys arrive in lexical order, judged on this listing's evidence.
    pub ordered: bool,
    /// Whether to record this listing's time: only worth it when the next listings may be
    /// incremental.
    pub record_time: bool,
}

/// Judges a full listing's new keys against the high-water mark. Order is judged only on
/// evidence: new keys after an existing high-water mark say "ordered", a late key says
/// "not ordered", and a listing with neither keeps what was known.
pub fn judge_full_listing<'a>(
    mode: IncrementalListing,
    state: ListingState,
    new_keys: impl IntoIterator<Item = &'a str>,
    high_water: Option<&str>,
) -> FullListing<'a> {
    let mut any_new = false;
    let late: Vec<&str> = new_keys
        .into_iter()
        .inspect(|_| any_new = true)
        .filter(|k| high_water.is_some_and(|h| *k <= h))
        .collect();
    let ordered = match (high_water, any_new, late.is_empty()) {
        (_, _, false) => false,
        (Some(_), true, true) => true,
        _ => state.lexical_order == Some(true),
    };
    FullListing {
        late,
        ordered,
        record_time: ordered || mode == IncrementalListing::Always,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn lists_in_full_without_a_recent_full_listing() {
        let fresh = ListingState {
            last_full_ms: Some(1_000),
            lexical_order: Some(true),
        };
        for mode in [IncrementalListing::Auto, IncrementalListing::Always] {
            assert_eq!(
                start_after(mode, MIN, fresh, 2_000, Some("k")).as_deref(),
                Some("k")
            );
            assert_eq!(
                start_after(mode, MIN, fresh, 61_000, Some("k")),
                None,
                "interval over"
            );
            assert_eq!(
                start_after(mode, MIN, ListingState::default(), 2_000, Some("k")),
                None,
                "never listed in full"
            );
        }
        assert_eq!(
            start_after(IncrementalListing::Never, MIN, fresh, 2_000, Some("k")),
            None
        );
    }

    #[test]
    fn auto_needs_evidence_of_lexical_order() {
        let unknown = ListingState {
            last_full_ms: Some(1_000),
            lexical_order: None,
        };
        assert_eq!(
            start_after(IncrementalListing::Auto, MIN, unknown, 2_000, Some("k")),
            None
        );
        assert_eq!(
            start_after(IncrementalListing::Always, MIN, unknown, 2_000, Some("k")).as_deref(),
            Some("k")
        );
    }

    #[test]
    fn a_full_listing_judges_order_on_evidence() {
        let auto = IncrementalListing::Auto;
        let was_ordered = ListingState {
            last_full_ms: Some(1),
            lexical_order: Some(true),
        };
        // New keys after the high-water mark: ordered.
        let j = judge_full_listing(auto, ListingState::default(), ["b/2", "c"], Some("b/1"));
        assert!(j.ordered && j.late.is_empty() && j.record_time);
        // One late key: not ordered, and named.
        let j = judge_full_listing(auto, was_ordered, ["a", "c"], Some("b"));
        assert_eq!(j.late, ["a"]);
        assert!(!j.ordered && !j.record_time);
        assert!(
            judge_full_listing(IncrementalListing::Always, was_ordered, ["a"], Some("b"))
                .record_time
        );
        // Nothing new, or no high-water mark yet: what was known stays.
        assert!(judge_full_listing(auto, was_ordered, [], Some("b")).ordered);
        assert!(!judge_full_listing(auto, ListingState::default(), ["a"], None).ordered);
    }
}
