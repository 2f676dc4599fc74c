//! Where a row came from: the `_metadata` column and partition values, constant across a file.

use std::sync::Arc;

use arrow_array::builder::{PrimitiveBuilder, StringBuilder};
use arrow_array::types::{ArrowPrimitiveType, Int64Type};
use arrow_array::{ArrayRef, PrimitiveArray, StringArray, StructArray, TimestampMicrosecondArray};

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

/// Consecutive rows of one file in a batch: a batch of several small files' rows (a
/// decoding thread's rows gathered across files) has one run per file.
#[derive(Debug, Clone)]
pub struct FileRun {
    pub file: Arc<FileMeta>,
    pub rows: usize,
}

/// Appends the columns that are constant across a file, for the rows of `runs` in order:
/// partition values, `_metadata` and the snapshot stamps.
pub fn push_file_columns(layout: &TableLayout, runs: &[FileRun], arrays: &mut Vec<ArrayRef>) {
    for (i, _) in layout.partition.fields.iter().enumerate() {
        arrays.push(Arc::new(repeated_text(runs, |f| {
            f.partition_values.get(i).and_then(Option::as_deref)
        })));
    }
    if layout.include_metadata {
        arrays.push(metadata_array(runs));
    }
    if layout.stamps.is_some() {
        let at: TimestampMicrosecondArray =
            repeated(runs, |f| f.stamp.as_ref().map(|s| s.ingested_at_ms * 1000));
        arrays.push(Arc::new(at.with_timezone("UTC")));
        arrays.push(Arc::new(repeated_text(runs, |f| {
            f.stamp.as_ref().map(|s| s.snapshot_id.as_str())
        })));
    }
}

/// A text column holding each run's value for its rows.
fn repeated_text<'a>(
    runs: &'a [FileRun],
    value: impl Fn(&'a FileMeta) -> Option<&'a str>,
) -> StringArray {
    // Sized up front: grown from nothing, a batch's file paths were a dozen reallocations.
    let rows = runs.iter().map(|r| r.rows).sum();
    let bytes = runs
        .iter()
        .map(|r| value(&r.file).map_or(0, str::len).saturating_mul(r.rows))
        .fold(0usize, usize::saturating_add);
    let mut b = StringBuilder::with_capacity(rows, bytes);
    for run in runs {
        match value(&run.file) {
            Some(v) => (0..run.rows).for_each(|_| b.append_value(v)),
            None => b.append_nulls(run.rows),
        }
    }
    b.finish()
}

/// A primitive column holding each run's value for its rows.
fn repeated<T: ArrowPrimitiveType>(
    runs: &[FileRun],
    value: impl Fn(&FileMeta) -> Option<T::Native>,
) -> PrimitiveArray<T> {
    let rows = runs.iter().map(|r| r.rows).sum();
    let mut b = PrimitiveBuilder::<T>::with_capacity(rows);
    for run in runs {
        match value(&run.file) {
            Some(v) => b.append_value_n(v, run.rows),
            None => b.append_nulls(run.rows),
        }
    }
    b.finish()
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

pub(crate) fn metadata_array(runs: &[FileRun]) -> ArrayRef {
    let size = |f: &FileMeta| Some(i64::try_from(f.size).unwrap_or(i64::MAX));
    let mtime: TimestampMicrosecondArray = repeated(runs, |f| Some(f.mtime_ms * 1000));
    let children: Vec<ArrayRef> = vec![
        Arc::new(repeated_text(runs, |f| Some(f.path.as_str()))),
        Arc::new(repeated_text(runs, |f| Some(f.name.as_str()))),
        Arc::new(repeated::<Int64Type>(runs, size)),
        Arc::new(mtime.with_timezone("UTC")),
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
