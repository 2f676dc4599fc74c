//! Where a change record came from, for errors: its file (`_metadata.file_path`) and its
//! record number in that file, as every other bad-input error names a file and a place.
//! Worked out only when an error needs it: a batch holds whole files, each file's rows in
//! order, so a row's number in its file is how many rows of that file come up to it.

use arrow_array::{Array, RecordBatch, StringArray};

use crate::record::{RowsOrigin, metadata_text};

/// The places of a batch's change records, kept through a preset's unwrapping (which
/// drops tombstones, so a change record's row is not its raw row).
#[derive(Debug, Clone, Default)]
pub struct RecordPlaces {
    /// Each read batch's first row in the raw batch, and where its rows came from (when
    /// the reader said for every batch).
    read: Vec<(usize, RowsOrigin)>,
    /// The raw batch's `_metadata.file_path`, when it has one.
    paths: Option<StringArray>,
    /// The raw row of each change record, when some raw rows were dropped.
    raw_rows: Option<Vec<usize>>,
}

impl RecordPlaces {
    /// The places of `raw`'s rows, as read.
    pub fn of(raw: &RecordBatch) -> RecordPlaces {
        let paths = metadata_text(raw, "file_path");
        RecordPlaces {
            read: Vec::new(),
            paths,
            raw_rows: None,
        }
    }

    /// The places of the rows of `batches` concatenated into `raw`, from the reader's
    /// origins (one per batch; without all of them, from `raw`'s `_metadata`).
    pub fn read(
        raw: &RecordBatch,
        batches: &[RecordBatch],
        origins: Vec<Option<RowsOrigin>>,
    ) -> RecordPlaces {
        let mut places = RecordPlaces::of(raw);
        if origins.len() == batches.len() && origins.iter().all(Option::is_some) {
            let mut start = 0;
            for (batch, origin) in batches.iter().zip(origins.into_iter().flatten()) {
                places.read.push((start, origin));
                start += batch.num_rows();
            }
        }
        places
    }

    /// The places of the rows `keep` keeps (one flag per current row).
    pub fn retain(self, keep: &[bool]) -> RecordPlaces {
        let raw_rows = keep
            .iter()
            .enumerate()
            .filter(|(_, k)| **k)
            .map(|(row, _)| match &self.raw_rows {
                Some(raw) => raw[row],
                None => row,
            })
            .collect();
        RecordPlaces {
            read: self.read,
            paths: self.paths,
            raw_rows: Some(raw_rows),
        }
    }

    /// `FILE record K`, or `record N of the batch` without a file.
    pub fn describe(&self, row: usize) -> String {
        let raw = self
            .raw_rows
            .as_ref()
            .and_then(|r| r.get(row).copied())
            .unwrap_or(row);
        let part = self.read.partition_point(|(start, _)| *start <= raw);
        if let Some((start, origin)) = part.checked_sub(1).and_then(|p| self.read.get(p)) {
            return format!("{} record {}", origin.file, origin.record(raw - start));
        }
        let Some(paths) = self
            .paths
            .as_ref()
            .filter(|p| raw < p.len() && p.is_valid(raw))
        else {
            return format!("record {} of the batch", row + 1);
        };
        let file = paths.value(raw);
        let in_file = (0..=raw)
            .filter(|&i| paths.is_valid(i) && paths.value(i) == file)
            .count();
        format!("{file} record {in_file}")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, StructArray};
    use arrow_schema::{DataType, Field, Fields};

    use super::*;

    fn batch(paths: &[&str]) -> RecordBatch {
        let fields = Fields::from(vec![Field::new("file_path", DataType::Utf8, true)]);
        let meta = StructArray::new(
            fields.clone(),
            vec![Arc::new(StringArray::from(paths.to_vec())) as ArrayRef],
            None,
        );
        RecordBatch::try_from_iter(vec![("_metadata", Arc::new(meta) as ArrayRef)]).unwrap()
    }

    #[test]
    fn a_record_is_numbered_within_its_file_through_dropped_rows() {
        let places = RecordPlaces::of(&batch(&["a", "a", "b", "b", "b"]));
        assert_eq!(places.describe(3), "b record 2");
        // The second and third raw rows are dropped (tombstones).
        let places = places.retain(&[true, false, false, true, true]);
        assert_eq!(places.describe(1), "b record 2");
        assert_eq!(places.describe(2), "b record 3");
        let again = places.retain(&[false, true, true]);
        assert_eq!(again.describe(1), "b record 3");
    }

    #[test]
    fn the_reader_s_origins_name_the_record_a_where_left_in() {
        use crate::record::Records;
        let batches = [batch(&["a", "a"]), batch(&["b", "b", "b"])];
        let raw = arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap();
        let origin = |file: &str, records| {
            Some(RowsOrigin {
                file: file.into(),
                records,
            })
        };
        let origins = vec![
            origin("a", Records::From(4)),
            origin("b", Records::Each(vec![2, 5, 9])),
        ];
        let places = RecordPlaces::read(&raw, &batches, origins);
        assert_eq!(places.describe(1), "a record 5");
        assert_eq!(places.describe(4), "b record 9");
        assert_eq!(
            places.retain(&[true, false, false, true, true]).describe(1),
            "b record 5"
        );
    }

    #[test]
    fn without_metadata_the_batch_row_is_named() {
        let b = RecordBatch::try_from_iter(vec![(
            "id",
            Arc::new(StringArray::from(vec!["1", "2"])) as ArrayRef,
        )])
        .unwrap();
        assert_eq!(RecordPlaces::of(&b).describe(1), "record 2 of the batch");
    }
}
