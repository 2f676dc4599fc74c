//! One decoded record into Arrow columns: the column builders, rescued data and lineage.

pub mod rows;
