//! Keys and sequences of rows as bytes: arrow's row format, whose byte order is the
//! columns' sort order, so a key compares by equality and a sequence of several columns
//! compares field by field with a plain byte comparison.

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_row::{RowConverter, SortField};
use arrow_schema::DataType;

use super::{CdcError, KeyBytes};

/// Encodes the values of some columns of a batch as comparable byte strings.
pub struct RowEncoder {
    columns: Vec<String>,
    types: Vec<DataType>,
    converter: RowConverter,
}

impl RowEncoder {
    /// An encoder for `columns` as typed in `schema`.
    pub fn new(columns: &[String], schema: &arrow_schema::Schema) -> Result<RowEncoder, CdcError> {
        let mut types = Vec::new();
        for c in columns {
            let field = schema
                .field_with_name(c)
                .map_err(|_| CdcError::Data(format!("the change records have no column {c}")))?;
            types.push(field.data_type().clone());
        }
        let converter = RowConverter::new(types.iter().cloned().map(SortField::new).collect())
            .map_err(|e| CdcError::Data(e.to_string()))?;
        Ok(RowEncoder {
            columns: columns.to_vec(),
            types,
            converter,
        })
    }

    /// The columns, cast to the encoder's types (a column widened since is read as before).
    pub fn arrays(&self, batch: &RecordBatch) -> Result<Vec<ArrayRef>, CdcError> {
        self.columns
            .iter()
            .zip(&self.types)
            .map(|(c, t)| {
                let column = batch
                    .column_by_name(c)
                    .ok_or_else(|| CdcError::Data(format!("the batch has no column {c}")))?;
                if column.data_type() == t {
                    Ok(column.clone())
                } else {
                    arrow_cast::cast(column, t).map_err(|e| CdcError::Data(format!("{c}: {e}")))
                }
            })
            .collect()
    }

    /// The rows' byte strings in one buffer (no allocation per row).
    pub fn rows(&self, batch: &RecordBatch) -> Result<arrow_row::Rows, CdcError> {
        let arrays = self.arrays(batch)?;
        self.converter
            .convert_columns(&arrays)
            .map_err(|e| CdcError::Data(e.to_string()))
    }

    /// The first column's values of encoded `keys` as integers, when it is an integer
    /// column (`None` otherwise): what a file's statistics are compared with.
    pub fn first_as_i64<'a>(
        &self,
        keys: impl Iterator<Item = &'a [u8]>,
    ) -> Result<Option<Vec<i64>>, CdcError> {
        if !self.types[0].is_integer() {
            return Ok(None);
        }
        let parser = self.converter.parser();
        let rows: Vec<arrow_row::Row<'_>> = keys.map(|k| parser.parse(k)).collect();
        if rows.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let columns = self
            .converter
            .convert_rows(rows)
            .map_err(|e| CdcError::Data(e.to_string()))?;
        let first = arrow_cast::cast(&columns[0], &DataType::Int64)
            .map_err(|e| CdcError::Data(e.to_string()))?;
        let ints = first
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .ok_or_else(|| CdcError::Data("a key column cast to integers is not".into()))?;
        // A value that does not fit (a large unsigned one) rules pruning out.
        if ints.null_count() > 0 {
            return Ok(None);
        }
        Ok(Some(ints.values().to_vec()))
    }

    /// One byte string per row.
    pub fn encode(&self, batch: &RecordBatch) -> Result<Vec<KeyBytes>, CdcError> {
        let arrays = self.arrays(batch)?;
        let rows = self
            .converter
            .convert_columns(&arrays)
            .map_err(|e| CdcError::Data(e.to_string()))?;
        Ok(rows
            .iter()
            .map(|r| KeyBytes::from_slice(r.as_ref()))
            .collect())
    }

    /// Whether any of the columns holds a null (when none does, no row needs
    /// [`RowEncoder::first_null`]).
    pub fn has_nulls(&self, batch: &RecordBatch) -> bool {
        self.columns
            .iter()
            .any(|c| batch.column_by_name(c).is_some_and(|a| a.null_count() > 0))
    }

    /// Per row, the first of the columns that is null there, if any.
    pub fn first_null(&self, batch: &RecordBatch, row: usize) -> Option<&str> {
        self.columns.iter().find_map(|c| {
            batch
                .column_by_name(c)
                .filter(|a| a.is_null(row))
                .map(|_| c.as_str())
        })
    }
}

/// A set of integer keys, probed once per row of every target file a batch reads: a bit per
/// integer of the keys' range when that range is dense enough (a bit test instead of a
/// hash probe), else a hash set.
pub enum IntKeys {
    Bits { low: i64, bits: Vec<u64> },
    Hashed(super::FastSet<i64>),
}

/// The most bits [`IntKeys`] spends on a range (8 MiB), and at most this many per key.
const MAX_BITS: u64 = 64 << 20;
const BITS_PER_KEY: u64 = 4096;

impl IntKeys {
    /// The set of `sorted` (ascending) keys.
    pub fn new(sorted: &[i64]) -> IntKeys {
        let (Some(&low), Some(&high)) = (sorted.first(), sorted.last()) else {
            return IntKeys::Hashed(super::FastSet::default());
        };
        let span = u64::try_from(i128::from(high) - i128::from(low) + 1).unwrap_or(u64::MAX);
        if span > MAX_BITS || span > BITS_PER_KEY.saturating_mul(sorted.len() as u64) {
            return IntKeys::Hashed(sorted.iter().copied().collect());
        }
        let mut bits = vec![0u64; span.div_ceil(64) as usize];
        for &k in sorted {
            let at = k.abs_diff(low);
            bits[(at / 64) as usize] |= 1 << (at % 64);
        }
        IntKeys::Bits { low, bits }
    }

    pub fn contains(&self, key: i64) -> bool {
        match self {
            IntKeys::Bits { low, bits } => {
                key >= *low && {
                    let at = key.abs_diff(*low);
                    bits.get((at / 64) as usize)
                        .is_some_and(|w| w & (1 << (at % 64)) != 0)
                }
            }
            IntKeys::Hashed(set) => set.contains(&key),
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn int_keys_hold_exactly_their_keys_in_bits_or_hashed() {
        let dense = [-3i64, 0, 5, 63, 64, 200];
        let sparse = [i64::MIN, -1, 7, i64::MAX];
        for (keys, bits) in [(&dense[..], true), (&sparse[..], false)] {
            let set = super::IntKeys::new(keys);
            assert_eq!(matches!(set, super::IntKeys::Bits { .. }), bits);
            for k in -300..300 {
                assert_eq!(set.contains(k), keys.contains(&k), "{k}");
            }
            for k in [i64::MIN, i64::MIN + 1, i64::MAX - 1, i64::MAX] {
                assert_eq!(set.contains(k), keys.contains(&k), "{k}");
            }
        }
        assert!(!super::IntKeys::new(&[]).contains(0));
    }
    use std::sync::Arc;

    use arrow_array::{Int64Array, StringArray};
    use arrow_schema::{Field, Schema};

    use super::*;

    #[test]
    fn encoded_sequences_compare_field_by_field() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Int64, true),
            Field::new("pos", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![5, 5, -3, 10])),
                Arc::new(StringArray::from(vec!["b", "a", "z", "a"])),
            ],
        )
        .unwrap();
        let enc = RowEncoder::new(&["ts".into(), "pos".into()], &schema).unwrap();
        let rows = enc.encode(&batch).unwrap();
        assert!(rows[1] < rows[0], "(5,a) < (5,b)");
        assert!(rows[2] < rows[1], "negative first");
        assert!(rows[0] < rows[3]);
    }
}
