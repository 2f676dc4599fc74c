//! Schema-directed Arrow building with per-value rescue.
//!
//! A typed Arrow decoder drops unknown fields and fails a whole batch on one bad value, so
//! decoders here append value by value into builders shaped by the stream's schema:
//!
//! - a value that fits its column is appended;
//! - a value that does not fit (a string in a BIGINT column, an unknown field inside a
//!   struct) leaves null where it failed, and the whole original top-level value is kept in
//!   the rescued-data column under its column name, so nothing is lost and a user can
//!   `get_json_object(_rescued_data, '$.amount')` it back;
//! - a top-level key the schema does not have (or has only in another letter case, with
//!   `readerCaseSensitive=true`) is kept in the rescued data as is;
//! - a malformed record leaves every column null and keeps its raw text under
//!   `_corrupt_record` (or in the `columnNameOfCorruptRecord` column).
//!
//! Every rescued object ends with `"_file_path"`, the record's source file. JSON sources
//! keep values as JSON (a number stays a number); CSV values are the original strings.

mod columns;
mod layout;
mod lineage;
mod rescue;
mod rows;

pub use columns::*;
pub use layout::*;
pub use lineage::*;
pub use rescue::*;
pub use rows::*;

/// Name of the lineage struct column.
pub const METADATA_COLUMN: &str = "_metadata";
/// Key of the source file inside every rescued object.
pub const FILE_PATH_KEY: &str = "_file_path";
/// Key of a malformed multi-line record's first line inside its rescued object (XML).
pub const LINE_KEY: &str = "_line";
