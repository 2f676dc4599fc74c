//! One decoded record into Arrow columns: scalars parsed from text, the column builders,
//! rescued data and lineage.

pub mod rows;
pub mod scalars;
