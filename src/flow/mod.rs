//! What a flow is, apart from how it runs: its projection and filter (`select`), its
//! change-data-capture settings (`cdc`), its snapshot-history settings (`snapshot`), and
//! the definition a stream records so a later run can tell what changed (`definition`).
//! Running a flow is the pipeline's job; writing its table is the target's.

pub mod cdc;
pub mod definition;
pub mod expect;
pub mod once;
pub mod select;
pub mod snapshot;

pub use select::{Applied, BoundFlow, Columns, Filtered, FlowError, FlowSpec, Quarantined};
