//! Operations on a table as a whole, apart from a stream's appends: its properties
//! (`TBLPROPERTIES`), a guarded full refresh (`reset`), compaction (`optimize`) and
//! removal of unreferenced files (`vacuum`). delta-rs keeps its operations together the
//! same way.

pub mod optimize;
pub mod properties;
pub mod reset;
pub mod vacuum;
