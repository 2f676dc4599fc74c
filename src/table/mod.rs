//! Operations on a table as a whole, apart from a stream's appends: its properties
//! (`TBLPROPERTIES`), a guarded full refresh (`reset`), compaction (`optimize`),
//! removal of unreferenced files (`vacuum`) and a quarantine's `replay`. delta-rs keeps its operations together the
//! same way.

pub mod optimize;
pub mod properties;
pub mod replay;
pub mod reset;
pub mod vacuum;
