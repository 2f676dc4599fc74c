//! Streams that append into one table share the table's schema. A column the table already
//! has is read as the table's type, whatever this stream's files alone would infer: an INT
//! column of a CSV stream is read as the BIGINT a JSON stream created, and a value that does
//! not fit is rescued, as always. New columns evolve the table as usual. A type the user
//! pinned (a hint, or the `schema` option) that differs from the table's, or a nested table
//! column that a CSV stream cannot fill, is a clash: one line naming the stream, the column
//! and both types, and the way out.

use std::collections::HashSet;

use crate::options::{Format, Settings};
use crate::schema::hints::parse_hints;
use crate::schema::{DataType, Field, Schema};
use crate::target::Target;

use super::{IngestError, IngestRequest, TableTypeClash};

/// The table's columns as schema types, when the table exists (columns with no Spark type
/// are left out: nothing of ours reads them).
pub(crate) fn table_columns(sink: &dyn Target) -> Result<Option<Schema>, IngestError> {
    let Some(arrow) = sink.arrow_schema()? else {
        return Ok(None);
    };
    Ok(Some(Schema::new(
        arrow
            .fields()
            .iter()
            .filter_map(|f| {
                DataType::from_arrow(f.data_type()).map(|t| Field::new(f.name().clone(), t))
            })
            .collect(),
    )))
}

/// Retypes the columns of `data` that the table has to the table's types. Returns what
/// changed (`amount INT -> BIGINT`), or the clash.
pub(crate) fn align_to_table(
    data: &mut Schema,
    table: &Schema,
    req: &IngestRequest,
    format: Format,
) -> Result<Vec<String>, IngestError> {
    let pinned = pinned_columns(&req.settings);
    let mut changes = Vec::new();
    for field in &mut data.fields {
        let Some(theirs) = table.fields.iter().find(|t| t.name == field.name) else {
            continue;
        };
        let aligned = aligned_type(&field.data_type, &theirs.data_type);
        if aligned == field.data_type {
            continue;
        }
        let clash = |why: &str| {
            IngestError::TableTypeClash(Box::new(TableTypeClash {
                stream: req.name.clone(),
                table: req.table.to_string(),
                column: field.name.clone(),
                ours: field.data_type.to_string(),
                theirs: aligned.to_string(),
                why: why.to_string(),
            }))
        };
        if pinned.contains(&field.name.to_ascii_lowercase()) {
            return Err(clash("pinned by this stream's schema or hints"));
        }
        if format == Format::Csv && theirs.data_type.is_nested() {
            return Err(clash("a CSV column cannot fill a nested column"));
        }
        changes.push(format!("{} {} -> {}", field.name, field.data_type, aligned));
        field.data_type = aligned;
    }
    Ok(changes)
}

/// `ours` read as the table's type `theirs`: the table's type wherever the table has the
/// field, with the struct fields only `ours` has kept (they evolve the table as usual).
fn aligned_type(ours: &DataType, theirs: &DataType) -> DataType {
    match (ours, theirs) {
        (DataType::Struct(a), DataType::Struct(b)) => DataType::Struct(
            a.iter()
                .map(|f| match b.iter().find(|t| t.name == f.name) {
                    Some(t) => Field::new(f.name.clone(), aligned_type(&f.data_type, &t.data_type)),
                    None => f.clone(),
                })
                .collect(),
        ),
        (DataType::Array(a), DataType::Array(b)) => DataType::Array(Box::new(aligned_type(a, b))),
        (DataType::Map(ka, va), DataType::Map(kb, vb)) => DataType::Map(
            Box::new(aligned_type(ka, kb)),
            Box::new(aligned_type(va, vb)),
        ),
        _ => theirs.clone(),
    }
}

/// Top-level columns whose type the user chose (lowercase).
fn pinned_columns(settings: &Settings) -> HashSet<String> {
    let mut pinned: HashSet<String> = settings
        .user_schema
        .iter()
        .flat_map(|s| s.fields.iter().map(|f| f.name.to_ascii_lowercase()))
        .collect();
    if let Some(Ok(hints)) = settings.schema_hints.as_deref().map(parse_hints) {
        pinned.extend(
            hints
                .iter()
                .filter(|h| h.path.len() == 1)
                .map(|h| h.path[0].to_ascii_lowercase()),
        );
    }
    pinned
}

/// [`align_to_table`] against the table as it is now (other streams may have changed it),
/// when it exists; logs what was retyped.
pub(crate) async fn align_to_current_table(
    data: &mut Schema,
    sink: &mut dyn Target,
    req: &IngestRequest,
    format: Format,
) -> Result<Vec<String>, IngestError> {
    sink.refresh().await?;
    let Some(table) = table_columns(sink)? else {
        return Ok(Vec::new());
    };
    let changes = align_to_table(data, &table, req, format)?;
    if !changes.is_empty() {
        tracing::info!(
            stream = %req.name, retyped = %changes.join(", "),
            "Reading columns the table already has as the table's types."
        );
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_types_win_and_new_nested_fields_stay() {
        let ours = DataType::Struct(vec![
            Field::new("city", DataType::String),
            Field::new("floor", DataType::Integer),
        ]);
        let theirs = DataType::Struct(vec![Field::new("city", DataType::String)]);
        assert_eq!(
            aligned_type(&ours, &theirs),
            ours,
            "a new nested field stays"
        );
        let theirs = DataType::Struct(vec![Field::new("floor", DataType::Long)]);
        assert_eq!(
            aligned_type(&ours, &theirs),
            DataType::Struct(vec![
                Field::new("city", DataType::String),
                Field::new("floor", DataType::Long),
            ])
        );
        assert_eq!(
            aligned_type(&DataType::Integer, &DataType::Long),
            DataType::Long
        );
        assert_eq!(
            aligned_type(
                &DataType::Array(Box::new(DataType::Integer)),
                &DataType::Array(Box::new(DataType::Double))
            ),
            DataType::Array(Box::new(DataType::Double))
        );
    }
}
