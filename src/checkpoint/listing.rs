//! The listing state an object-store source keeps in its checkpoint (see
//! [`crate::source::incremental`]).

use super::{Checkpoint, CheckpointError};
use crate::source::incremental::ListingState;

/// Metadata key: when the source was last listed in full (ms since the epoch).
const META_LAST_FULL_LISTING: &str = "lastFullListingMs";
/// Metadata key: whether the last full listing's new keys all sorted after the ingested
/// ones (`true`/`false`).
const META_LEXICAL_ORDER: &str = "lexicalOrder";

impl Checkpoint {
    /// The recorded listing state.
    pub fn listing_state(&self) -> Result<ListingState, CheckpointError> {
        Ok(ListingState {
            last_full_ms: self
                .meta(META_LAST_FULL_LISTING)?
                .and_then(|v| v.parse().ok()),
            lexical_order: self.meta(META_LEXICAL_ORDER)?.and_then(|v| v.parse().ok()),
        })
    }

    /// Records whether new keys arrive in lexical order.
    pub fn set_lexical_order(&self, ordered: bool) -> Result<(), CheckpointError> {
        self.set_meta(META_LEXICAL_ORDER, if ordered { "true" } else { "false" })
    }

    /// Records when the source was last listed in full.
    pub fn set_last_full_listing(&self, at_ms: i64) -> Result<(), CheckpointError> {
        self.set_meta(META_LAST_FULL_LISTING, &at_ms.to_string())
    }
}
