//! Where a row came from: the `_metadata` column and partition values, constant across a file.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, Int64Array, StringArray, StructArray, TimestampMicrosecondArray, new_null_array,
};
use arrow_schema::DataType as ArrowType;

use super::*;

/// Where a row came from: constant across a file.
#[derive(Debug, Clone)]
pub struct FileMeta {
    /// URI of the source file (`file:///landing/a.json`).
    pub path: String,
    pub name: String,
    pub size: u64,
    pub mtime_ms: i64,
    /// One value per partition column of the layout, in order.
    pub partition_values: Vec<Option<String>>,
    /// The snapshot the file was read in (snapshot flows).
    pub stamp: Option<Stamp>,
}

/// A snapshot's stamp on its rows: when its batch was planned, and its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    pub ingested_at_ms: i64,
    pub snapshot_id: String,
}

/// Appends the columns that are constant across a file: partition values and `_metadata`.
pub fn push_file_columns(
    layout: &TableLayout,
    file: &FileMeta,
    n: usize,
    arrays: &mut Vec<ArrayRef>,
) {
    for (i, _) in layout.partition.fields.iter().enumerate() {
        let value = file.partition_values.get(i).cloned().flatten();
        arrays.push(match value {
            Some(v) => Arc::new(StringArray::from(vec![v; n])),
            None => new_null_array(&ArrowType::Utf8, n),
        });
    }
    if layout.include_metadata {
        arrays.push(metadata_array(file, n));
    }
    if layout.stamps.is_some() {
        let (at, id) = match &file.stamp {
            Some(s) => (Some(s.ingested_at_ms * 1000), Some(s.snapshot_id.as_str())),
            None => (None, None),
        };
        arrays.push(Arc::new(
            TimestampMicrosecondArray::from(vec![at; n]).with_timezone("UTC"),
        ));
        arrays.push(Arc::new(StringArray::from(vec![id; n])));
    }
}

/// A text field of a batch's `_metadata` column (`file_path`, `file_name`), when it has one.
pub fn metadata_text(batch: &arrow_array::RecordBatch, field: &str) -> Option<StringArray> {
    batch
        .column_by_name("_metadata")
        .and_then(|m| m.as_any().downcast_ref::<StructArray>())
        .and_then(|m| m.column_by_name(field))
        .and_then(|p| p.as_any().downcast_ref::<StringArray>())
        .cloned()
}

pub(crate) fn metadata_array(file: &FileMeta, n: usize) -> ArrayRef {
    let size = i64::try_from(file.size).unwrap_or(i64::MAX);
    let children: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![file.path.as_str(); n])),
        Arc::new(StringArray::from(vec![file.name.as_str(); n])),
        Arc::new(Int64Array::from(vec![size; n])),
        Arc::new(
            TimestampMicrosecondArray::from(vec![file.mtime_ms * 1000; n]).with_timezone("UTC"),
        ),
    ];
    Arc::new(StructArray::new(metadata_fields(), children, None))
}

/// Which records of which file a decoded batch's rows are, kept beside rows a target holds
/// until its commit (CDC), so that an error found there names the file and the record.
#[derive(Debug, Clone)]
pub struct RowsOrigin {
    /// The file's URI.
    pub file: Arc<str>,
    /// The 1-based record number in the file of each row.
    pub records: Records,
}

/// Record numbers of a batch's rows: consecutive, or each given (a `where` left some out).
#[derive(Debug, Clone)]
pub enum Records {
    From(u64),
    Each(Vec<u64>),
}

impl RowsOrigin {
    /// The record number of the batch's row `row`.
    pub fn record(&self, row: usize) -> u64 {
        match &self.records {
            Records::From(first) => first + row as u64,
            Records::Each(each) => each.get(row).copied().unwrap_or(0),
        }
    }
}
