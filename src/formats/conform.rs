//! Making a decoded batch of a file's own columns one of the stream's layout: columns
//! cast to the layout's types, and what does not fit rescued. Parquet, Avro and ORC files
//! arrive as Arrow batches and go through it; the row decoders build the layout directly.

use super::{DecodeError, DecodeOptions, FileStats, SourceFile};
use crate::record::{FILE_PATH_KEY, FileRun, RescueKind, TableLayout, push_file_columns};
use crate::schema::DataType;
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, new_null_array};
use arrow_cast::{CastOptions, cast_with_options};
use arrow_schema::{DataType as ArrowType, Field as ArrowField, Schema as ArrowSchema};
use serde_json::{Map, Value};
use std::sync::Arc;

/// One batch read from a file (of the file's own columns) as a batch of the layout: each
/// column read as the stream's type, a value that does not fit and a column the schema
/// lacks rescued as JSON, then the file's columns (partitions, `_metadata`). Counts the
/// rescued rows and what was rescued into `stats`.
pub(crate) fn conform(
    batch: &RecordBatch,
    file: &SourceFile,
    opts: &DecodeOptions,
    layout: &Arc<TableLayout>,
    stats: &mut FileStats,
) -> Result<RecordBatch, DecodeError> {
    let path = file.meta.path.as_str();
    let out_schema = layout.arrow_schema();
    let value_fields: Vec<_> = layout.value_fields().cloned().collect();
    let n = batch.num_rows();
    let in_schema = batch.schema();
    // Per row, the original values that did not fit, as JSON.
    let mut rescued: Vec<Map<String, Value>> = vec![Map::new(); n];
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(value_fields.len());
    let mut used = vec![false; in_schema.fields().len()];
    for field in &value_fields {
        let idx = in_schema.index_of(&field.name).ok().or_else(|| {
            (!opts.ctx.case_sensitive)
                .then(|| {
                    in_schema
                        .fields()
                        .iter()
                        .position(|f| f.name().eq_ignore_ascii_case(&field.name))
                })
                .flatten()
        });
        let target = field.data_type.to_arrow();
        let Some(idx) = idx else {
            columns.push(new_null_array(&target, n));
            continue;
        };
        used[idx] = true;
        let source = batch.column(idx);
        let fits = column_type(source.data_type()) == field.data_type
            || field.data_type == DataType::String;
        if !fits && field.data_type.is_nested() {
            // Maybe new nested fields: the evolution check compares the footers.
            stats.new_fields = true;
        }
        let cast = if field.data_type == DataType::String && is_nested(source.data_type()) {
            Some(nested_as_text(&in_schema.fields()[idx], source, path)?)
        } else if fits {
            cast_with_options(
                source,
                &target,
                &CastOptions {
                    safe: true,
                    ..Default::default()
                },
            )
            .ok()
        } else {
            cast_with_options(
                source,
                &target,
                &CastOptions {
                    safe: true,
                    ..Default::default()
                },
            )
            .ok()
            .filter(|_| same_shape(source.data_type(), &target))
        };
        let column = cast.unwrap_or_else(|| new_null_array(&target, n));
        let lost: Vec<usize> = (0..n)
            .filter(|&r| source.is_valid(r) && column.is_null(r))
            .collect();
        if !lost.is_empty() {
            rescue_values(&in_schema.fields()[idx], source, &lost, &mut rescued, path)?;
        }
        columns.push(column);
    }
    // An upstream table's own rescued data (a bronze table read by a silver flow): carried
    // on, not rescued again under its own name.
    let mut upstream: Vec<Option<Map<String, Value>>> = Vec::new();
    for (idx, f) in in_schema.fields().iter().enumerate() {
        if !used[idx]
            && Some(f.name()) == layout.rescued.as_ref()
            && let Some(texts) = batch.column(idx).as_any().downcast_ref::<StringArray>()
        {
            upstream = texts
                .iter()
                .map(|t| match serde_json::from_str::<Value>(t?) {
                    Ok(Value::Object(m)) => Some(m),
                    _ => None,
                })
                .collect();
            let unread: Vec<usize> = (0..n)
                .filter(|&r| texts.is_valid(r) && upstream[r].is_none())
                .collect();
            if !unread.is_empty() {
                rescue_values(f, batch.column(idx), &unread, &mut rescued, path)?;
            }
            used[idx] = true;
        }
    }
    for (idx, f) in in_schema.fields().iter().enumerate() {
        if !used[idx] {
            // A column the schema lacks: maybe a new one (the evolution check reads
            // the footers); named in the warning only when it held a value to rescue.
            stats.new_fields = true;
            let source = batch.column(idx);
            let present: Vec<usize> = (0..n).filter(|&r| source.is_valid(r)).collect();
            if !present.is_empty() {
                push_unknown_name(&mut stats.unknown_names, f.name(), &value_fields);
            }
            rescue_values(f, source, &present, &mut rescued, path)?;
        }
    }
    for m in &rescued {
        for key in m.keys() {
            let kind = RescueKind::of(key, value_fields.iter().map(|f| f.name.as_str()));
            stats.rescue.note(key, kind);
        }
    }
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(out_schema.fields().len());
    let mut value_iter = columns.into_iter();
    let mut rescued_count = 0u64;
    for f in &layout.data.fields {
        if Some(&f.name) == layout.rescued.as_ref() {
            let texts: Vec<Option<String>> = rescued
                .iter_mut()
                .enumerate()
                .map(|(r, m)| {
                    if !m.is_empty() {
                        rescued_count += 1;
                        m.insert(
                            FILE_PATH_KEY.to_string(),
                            Value::String(file.meta.path.clone()),
                        );
                    }
                    // The upstream's values first, and its `_file_path` (the file they
                    // were first rescued from) kept.
                    let mut row = upstream
                        .get_mut(r)
                        .and_then(Option::take)
                        .unwrap_or_default();
                    for (k, v) in std::mem::take(m) {
                        if !(k == FILE_PATH_KEY && row.contains_key(FILE_PATH_KEY)) {
                            row.insert(k, v);
                        }
                    }
                    (!row.is_empty()).then(|| Value::Object(row).to_string())
                })
                .collect();
            arrays.push(Arc::new(StringArray::from(texts)));
        } else if Some(&f.name) == layout.corrupt.as_ref() {
            arrays.push(new_null_array(&ArrowType::Utf8, n));
        } else {
            arrays.push(value_iter.next().expect("one column per value field"));
        }
    }
    if layout.rescued.is_none() {
        stats.dropped_values += rescued.iter().map(|m| m.len() as u64).sum::<u64>();
    }
    let run = FileRun {
        file: Arc::clone(&file.meta),
        rows: n,
    };
    push_file_columns(layout, &[run], &mut arrays);
    stats.rescued_rows += rescued_count;
    RecordBatch::try_new(Arc::clone(&out_schema), arrays).map_err(|e| corrupt(path, &e))
}

/// Field metadata the Avro decoder sets on a union it reads as a struct of its branches
/// (`member0`, `member1`, ... as Spark does).
pub(crate) const UNION_STRUCT: &str = "autoloader.union";

fn is_nested(t: &ArrowType) -> bool {
    matches!(
        t,
        ArrowType::Struct(_) | ArrowType::Map(_, _) | ArrowType::List(_) | ArrowType::LargeList(_)
    )
}

/// A nested value read into a STRING column, which can hold it: a union's value as the
/// text of its branch (a union of double and string merged to STRING holds `2.25` and
/// `n/a`, as ORC's reader gives them), any other struct, list or map as its JSON text (as
/// the JSON reader keeps an object in a STRING column).
fn nested_as_text(
    field: &ArrowField,
    column: &ArrayRef,
    path: &str,
) -> Result<ArrayRef, DecodeError> {
    use arrow_array::cast::AsArray;
    if let ArrowType::Struct(members) = column.data_type()
        && field.metadata().contains_key(UNION_STRUCT)
    {
        let union = column.as_struct();
        let branches = members
            .iter()
            .zip(union.columns())
            .map(|(f, c)| {
                if is_nested(c.data_type()) {
                    nested_as_text(f, c, path)
                } else {
                    cast_with_options(c, &ArrowType::Utf8, &CastOptions::default())
                        .map_err(|e| corrupt(path, &e))
                }
            })
            .collect::<Result<Vec<ArrayRef>, DecodeError>>()?;
        let texts: StringArray = (0..union.len())
            .map(|r| {
                let branch = branches
                    .iter()
                    .find(|b| union.is_valid(r) && b.is_valid(r))?;
                Some(branch.as_string::<i32>().value(r).to_string())
            })
            .collect();
        return Ok(Arc::new(texts));
    }
    let mut json: Vec<Map<String, Value>> = vec![Map::new(); column.len()];
    let rows: Vec<usize> = (0..column.len()).filter(|&r| column.is_valid(r)).collect();
    rescue_values(field, column, &rows, &mut json, path)?;
    let texts: StringArray = json
        .iter_mut()
        .map(|m| m.remove(field.name()).map(|v| v.to_string()))
        .collect();
    Ok(Arc::new(texts))
}

fn push_unknown_name(names: &mut Vec<String>, name: &str, fields: &[crate::schema::Field]) {
    if !fields.iter().any(|f| f.name.eq_ignore_ascii_case(name)) && !names.iter().any(|n| n == name)
    {
        names.push(name.to_string());
    }
}

/// Whether a safe cast between these types keeps nested structure by name (Arrow casts
/// structs by position, which would silently shuffle fields).
fn same_shape(from: &ArrowType, to: &ArrowType) -> bool {
    !matches!(
        from,
        ArrowType::Struct(_) | ArrowType::Map(_, _) | ArrowType::List(_) | ArrowType::LargeList(_)
    ) && !matches!(
        to,
        ArrowType::Struct(_) | ArrowType::Map(_, _) | ArrowType::List(_)
    )
}

/// Renders the given rows of one column as JSON values into the rescued maps.
fn rescue_values(
    field: &ArrowField,
    column: &ArrayRef,
    rows: &[usize],
    rescued: &mut [Map<String, Value>],
    path: &str,
) -> Result<(), DecodeError> {
    if rows.is_empty() {
        return Ok(());
    }
    let schema = Arc::new(ArrowSchema::new(vec![field.clone().with_nullable(true)]));
    let one =
        RecordBatch::try_new(schema, vec![Arc::clone(column)]).map_err(|e| corrupt(path, &e))?;
    let mut buf = Vec::new();
    {
        let mut writer = arrow_json::LineDelimitedWriter::new(&mut buf);
        writer.write(&one).map_err(|e| corrupt(path, &e))?;
        writer.finish().map_err(|e| corrupt(path, &e))?;
    }
    // One line per row; rows whose value is null are written as `{}`.
    let lines: Vec<&[u8]> = buf.split(|b| *b == b'\n').collect();
    for &r in rows {
        let value = lines
            .get(r)
            .and_then(|l| serde_json::from_slice::<Map<String, Value>>(l).ok())
            .and_then(|mut m| m.remove(field.name()));
        if let Some(v) = value {
            rescued[r].insert(field.name().clone(), v);
        }
    }
    Ok(())
}

pub(crate) fn corrupt(path: &str, e: &dyn std::fmt::Display) -> DecodeError {
    DecodeError::Corrupt {
        path: path.to_string(),
        line: None,
        reason: e.to_string(),
    }
}

/// The stream type of a file column: its own, or STRING when Delta has no such type.
pub(crate) fn column_type(t: &ArrowType) -> DataType {
    DataType::from_arrow(t).unwrap_or(DataType::String)
}
