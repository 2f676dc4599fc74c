//! The table layout a stream writes: data columns, partition columns, `_metadata`.

use std::sync::Arc;

use arrow_schema::{
    DataType as ArrowType, Field as ArrowField, Fields, Schema as ArrowSchema, SchemaRef,
};
use chrono_tz::Tz;

use crate::schema::{DataType, Field, Schema};

use super::*;

/// How values are matched and read.
#[derive(Debug, Clone, Copy)]
pub struct ReadContext {
    pub zone: Tz,
    pub case_sensitive: bool,
    /// `timestampFormat` / `dateFormat`, shared with inference.
    pub temporal: crate::parse::temporal::Temporal,
    /// XML: a value read into an ARRAY column that is not an array is its one element (an
    /// element that repeats in some rows appears once in others).
    pub singleton_arrays: bool,
}

/// The columns of the table, in order: data columns (which include the rescued-data and
/// corrupt-record columns when configured), partition columns, then `_metadata`.
#[derive(Debug, Clone)]
pub struct TableLayout {
    pub data: Schema,
    pub partition: Schema,
    pub rescued: Option<String>,
    pub corrupt: Option<String>,
    pub include_metadata: bool,
    /// A snapshot flow's stamp columns, after `_metadata`.
    pub stamps: Option<StampColumns>,
}

/// The names of a snapshot flow's stamp columns: the ingest time (TIMESTAMP) and the
/// snapshot id (STRING).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StampColumns {
    pub ingested_at: String,
    pub snapshot_id: String,
}

impl TableLayout {
    /// The Arrow schema of every batch this layout produces.
    pub fn arrow_schema(&self) -> SchemaRef {
        let mut fields: Vec<ArrowField> = self
            .data
            .fields
            .iter()
            .chain(&self.partition.fields)
            .map(|f| ArrowField::new(f.name.clone(), f.data_type.to_arrow(), true))
            .collect();
        if self.include_metadata {
            fields.push(ArrowField::new(METADATA_COLUMN, metadata_type(), true));
        }
        if let Some(s) = &self.stamps {
            fields.push(ArrowField::new(
                s.ingested_at.clone(),
                ArrowType::Timestamp(arrow_schema::TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ));
            fields.push(ArrowField::new(
                s.snapshot_id.clone(),
                ArrowType::Utf8,
                true,
            ));
        }
        Arc::new(ArrowSchema::new(fields))
    }

    /// The columns that stay last in the table, in order, however many columns are added
    /// before them: rescued data, corrupt record, partition columns, `_metadata`.
    pub fn trailing_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .rescued
            .iter()
            .chain(&self.corrupt)
            .cloned()
            .chain(self.partition.names().map(str::to_string))
            .collect();
        if self.include_metadata {
            names.push(METADATA_COLUMN.to_string());
        }
        if let Some(s) = &self.stamps {
            names.push(s.ingested_at.clone());
            names.push(s.snapshot_id.clone());
        }
        names
    }

    /// Data columns that hold decoded values (all but rescued and corrupt).
    pub fn value_fields(&self) -> impl Iterator<Item = &Field> {
        self.data.fields.iter().filter(|f| {
            Some(&f.name) != self.rescued.as_ref() && Some(&f.name) != self.corrupt.as_ref()
        })
    }
}

/// `batch`'s column named as `field`, of `field`'s type: cast where its type differs, null
/// where the batch lacks it (a batch older than a widened schema).
pub fn column_as(
    batch: &arrow_array::RecordBatch,
    field: &ArrowField,
) -> Result<arrow_array::ArrayRef, arrow_schema::ArrowError> {
    match batch.column_by_name(field.name()) {
        Some(c) if c.data_type() == field.data_type() => Ok(Arc::clone(c)),
        Some(c) => arrow_cast::cast(c, field.data_type()),
        None => Ok(arrow_array::new_null_array(
            field.data_type(),
            batch.num_rows(),
        )),
    }
}

/// `batch` in `schema`: each field's column by name, as [`column_as`] gives it.
pub fn batch_as(
    batch: &arrow_array::RecordBatch,
    schema: &arrow_schema::SchemaRef,
) -> Result<arrow_array::RecordBatch, String> {
    let columns = schema
        .fields()
        .iter()
        .map(|f| column_as(batch, f).map_err(|e| format!("{}: {e}", f.name())))
        .collect::<Result<Vec<_>, _>>()?;
    arrow_array::RecordBatch::try_new_with_options(
        Arc::clone(schema),
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
    .map_err(|e| e.to_string())
}

pub(crate) fn metadata_fields() -> Fields {
    Fields::from(vec![
        ArrowField::new("file_path", ArrowType::Utf8, true),
        ArrowField::new("file_name", ArrowType::Utf8, true),
        ArrowField::new("file_size", ArrowType::Int64, true),
        ArrowField::new(
            "file_modification_time",
            DataType::Timestamp.to_arrow(),
            true,
        ),
    ])
}

/// Arrow type of the `_metadata` column.
pub fn metadata_type() -> ArrowType {
    ArrowType::Struct(metadata_fields())
}
