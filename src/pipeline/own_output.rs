//! A stream never reads its own output as input. Its table, checkpoint and schema location
//! are left out of the source's listing when they lie inside the source folder; a source
//! that is one of them, or lies inside one (a VACUUM of the table would delete its landing
//! files), is refused before anything is written.

use tracing::warn;

use crate::source::{Overlap, Source, is_hidden};

use super::{IngestError, IngestRequest};

/// The request's source, never listing the stream's own locations.
pub(super) fn source_without_own_output(req: &IngestRequest) -> Result<Source, IngestError> {
    let own = [
        ("table", &req.table),
        ("checkpoint", &req.checkpoint),
        ("schema location", &req.settings.schema_location),
    ];
    let source = req.source.describe();
    let mut left_out: Vec<String> = Vec::new();
    for (what, location) in own {
        match req.source.overlap(location) {
            Overlap::Apart => {}
            Overlap::Inside(prefix) if !prefix.is_empty() => {
                // A `_`- or `.`-named folder is never listed anyway.
                if !prefix.split('/').any(is_hidden) && !left_out.contains(&prefix) {
                    warn!(
                        "The {what} {location} lies inside the source {source}: its files are left out of the listing, never read as input."
                    );
                    left_out.push(prefix);
                }
            }
            Overlap::Inside(_) => {
                return Err(IngestError::OwnOutput(format!(
                    "the {what} {location} is the source folder itself: a stream cannot read its own {what}; give the {what} a location outside the source"
                )));
            }
            Overlap::Contains => {
                return Err(IngestError::OwnOutput(format!(
                    "the source {source} lies inside the stream's {what} {location}: move the {what} or the source so that neither holds the other"
                )));
            }
        }
    }
    Ok(req.source.leaving_out(left_out))
}
