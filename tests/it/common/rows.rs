//! A table read back in the small shapes several test files compare.

use std::path::Path;

use super::{Scratch, column_strings, read_table, row_count};

/// Rows in the scratch area's table, 0 if nothing was committed.
pub fn table_rows(s: &Scratch) -> usize {
    if s.table().join("_delta_log").exists() {
        row_count(&read_table(&s.table()))
    } else {
        0
    }
}

/// The table's `order_id`s, sorted.
pub fn order_ids(table: &Path) -> Vec<u64> {
    let mut ids: Vec<u64> = column_strings(&read_table(table), "order_id")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

/// A JSON value as a row cell's text: strings bare, `null` for null, others as JSON.
pub fn json_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "null".to_string(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
