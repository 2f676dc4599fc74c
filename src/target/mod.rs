//! Where batches land: the Delta append target today; merge (CDC) and snapshot targets
//! plug in beside it.

pub mod delta;
