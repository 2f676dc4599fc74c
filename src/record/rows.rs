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

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder,
    Float64Builder, Int8Builder, Int16Builder, Int32Builder, Int64Builder, StringBuilder,
    TimestampMicrosecondBuilder,
};
use arrow_array::{
    ArrayRef, Int64Array, ListArray, MapArray, RecordBatch, StringArray, StructArray,
    TimestampMicrosecondArray, new_null_array,
};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{
    DataType as ArrowType, Field as ArrowField, Fields, Schema as ArrowSchema, SchemaRef,
};
use chrono_tz::Tz;
use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::parse::json::{JsonValue, same_key};

use crate::options::CORRUPT_RECORD;
use crate::parse::scalars;
use crate::schema::{DataType, Field, Schema};

/// Name of the lineage struct column.
pub const METADATA_COLUMN: &str = "_metadata";
/// Key of the source file inside every rescued object.
pub const FILE_PATH_KEY: &str = "_file_path";

/// Why a value went to the rescued data.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum RescueKind {
    /// The column exists; the value could not be read as its type.
    TypeMismatch,
    /// The schema has no such column.
    NewColumn,
    /// The schema has the column in another letter case (`readerCaseSensitive=true`).
    CaseMismatch,
    /// The record could not be parsed at all (`_corrupt_record`).
    Malformed,
}

impl RescueKind {
    /// Classifies a rescued key against the schema's column names.
    pub fn of<'a>(key: &str, mut columns: impl Iterator<Item = &'a str>) -> RescueKind {
        if key == CORRUPT_RECORD {
            return RescueKind::Malformed;
        }
        let mut kind = RescueKind::NewColumn;
        for c in columns.by_ref() {
            if c == key {
                return RescueKind::TypeMismatch;
            }
            if c.eq_ignore_ascii_case(key) {
                kind = RescueKind::CaseMismatch;
            }
        }
        kind
    }
}

/// Rows rescued per key, with why: what drift reports and alerts are made of.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RescueStats {
    pub keys: std::collections::BTreeMap<String, (RescueKind, u64)>,
}

impl RescueStats {
    pub fn note(&mut self, key: &str, kind: RescueKind) {
        let e = self.keys.entry(key.to_string()).or_insert((kind, 0));
        e.1 += 1;
    }

    pub fn merge(&mut self, other: &RescueStats) {
        for (k, (kind, n)) in &other.keys {
            let e = self.keys.entry(k.clone()).or_insert((*kind, 0));
            e.1 += n;
        }
    }

    /// Keys rescued for the given reason.
    pub fn keys_of(&self, kind: RescueKind) -> Vec<&str> {
        self.keys
            .iter()
            .filter(|(_, (k, _))| *k == kind)
            .map(|(n, _)| n.as_str())
            .collect()
    }
}

/// How values are matched and read.
#[derive(Debug, Clone, Copy)]
pub struct ReadContext {
    pub zone: Tz,
    pub case_sensitive: bool,
}

/// The columns of the table, in order: data columns (which include the rescued-data and
/// corrupt-record columns when configured), partition columns, then `_metadata`.
#[derive(Debug, Clone)]
pub struct Layout {
    pub data: Schema,
    pub partition: Schema,
    pub rescued: Option<String>,
    pub corrupt: Option<String>,
    pub include_metadata: bool,
}

impl Layout {
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
        Arc::new(ArrowSchema::new(fields))
    }

    /// Data columns that hold decoded values (all but rescued and corrupt).
    pub fn value_fields(&self) -> impl Iterator<Item = &Field> {
        self.data.fields.iter().filter(|f| {
            Some(&f.name) != self.rescued.as_ref() && Some(&f.name) != self.corrupt.as_ref()
        })
    }
}

fn metadata_fields() -> Fields {
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
}

/// One column's builder, shaped like its type.
pub enum ColumnBuilder {
    String(StringBuilder),
    Long(Int64Builder),
    Integer(Int32Builder),
    Short(Int16Builder),
    Byte(Int8Builder),
    Float(Float32Builder),
    Double(Float64Builder),
    Boolean(BooleanBuilder),
    Binary(BinaryBuilder),
    Date(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder),
    Decimal(Decimal128Builder, u8, i8),
    Struct {
        fields: Vec<(String, ColumnBuilder)>,
        arrow: Fields,
        validity: NullBufferBuilder,
        /// Whether two fields' names differ only in letter case (no cursor lookup then).
        case_twins: bool,
    },
    List {
        element: Box<ColumnBuilder>,
        field: Arc<ArrowField>,
        offsets: Vec<i32>,
        validity: NullBufferBuilder,
    },
    Map {
        keys: Box<ColumnBuilder>,
        /// Reads each key of a value before any is appended (absent for STRING keys, which
        /// always read): Arrow map keys cannot be null, so a key that does not read as the
        /// key type must make the whole map null, not leave a null key behind.
        key_probe: Option<Box<ColumnBuilder>>,
        values: Box<ColumnBuilder>,
        entries: Arc<ArrowField>,
        offsets: Vec<i32>,
        validity: NullBufferBuilder,
    },
}

/// Whether every key of a JSON object reads as a non-null value of the map's key type
/// (`probe` is `None` for STRING keys, which always do).
fn keys_read(
    probe: Option<&mut ColumnBuilder>,
    obj: &[(Cow<'_, str>, JsonValue<'_>)],
    ctx: &ReadContext,
) -> bool {
    let Some(probe) = probe else {
        return true;
    };
    let mut ignored = false;
    let all_read = obj
        .iter()
        .all(|(k, _)| probe.append_text(k, ctx, &mut ignored));
    // Finishing empties the probe for the next value, so it runs either way.
    let read = probe.finish();
    all_read && read.null_count() == 0
}

impl ColumnBuilder {
    pub fn new(t: &DataType) -> ColumnBuilder {
        match t {
            DataType::String => ColumnBuilder::String(StringBuilder::new()),
            DataType::Long => ColumnBuilder::Long(Int64Builder::new()),
            DataType::Integer => ColumnBuilder::Integer(Int32Builder::new()),
            DataType::Short => ColumnBuilder::Short(Int16Builder::new()),
            DataType::Byte => ColumnBuilder::Byte(Int8Builder::new()),
            DataType::Float => ColumnBuilder::Float(Float32Builder::new()),
            DataType::Double => ColumnBuilder::Double(Float64Builder::new()),
            DataType::Boolean => ColumnBuilder::Boolean(BooleanBuilder::new()),
            DataType::Binary => ColumnBuilder::Binary(BinaryBuilder::new()),
            DataType::Date => ColumnBuilder::Date(Date32Builder::new()),
            DataType::Timestamp => {
                ColumnBuilder::Timestamp(TimestampMicrosecondBuilder::new().with_timezone("UTC"))
            }
            DataType::Decimal(p, s) => ColumnBuilder::Decimal(
                Decimal128Builder::new()
                    .with_precision_and_scale(*p, *s)
                    .expect("decimal precision and scale are validated when parsed"),
                *p,
                *s,
            ),
            DataType::Struct(fields) => ColumnBuilder::Struct {
                case_twins: has_case_twins(fields.iter().map(|f| f.name.as_str())),
                fields: fields
                    .iter()
                    .map(|f| (f.name.clone(), ColumnBuilder::new(&f.data_type)))
                    .collect(),
                arrow: match t.to_arrow() {
                    ArrowType::Struct(f) => f,
                    _ => unreachable!("struct types map to Arrow structs"),
                },
                validity: NullBufferBuilder::new(0),
            },
            DataType::Array(element) => ColumnBuilder::List {
                element: Box::new(ColumnBuilder::new(element)),
                field: match t.to_arrow() {
                    ArrowType::List(f) => f,
                    _ => unreachable!("array types map to Arrow lists"),
                },
                offsets: vec![0],
                validity: NullBufferBuilder::new(0),
            },
            DataType::Map(key, value) => ColumnBuilder::Map {
                keys: Box::new(ColumnBuilder::new(key)),
                key_probe: (**key != DataType::String).then(|| Box::new(ColumnBuilder::new(key))),
                values: Box::new(ColumnBuilder::new(value)),
                entries: match t.to_arrow() {
                    ArrowType::Map(f, _) => f,
                    _ => unreachable!("map types map to Arrow maps"),
                },
                offsets: vec![0],
                validity: NullBufferBuilder::new(0),
            },
        }
    }

    pub fn append_null(&mut self) {
        match self {
            ColumnBuilder::String(b) => b.append_null(),
            ColumnBuilder::Long(b) => b.append_null(),
            ColumnBuilder::Integer(b) => b.append_null(),
            ColumnBuilder::Short(b) => b.append_null(),
            ColumnBuilder::Byte(b) => b.append_null(),
            ColumnBuilder::Float(b) => b.append_null(),
            ColumnBuilder::Double(b) => b.append_null(),
            ColumnBuilder::Boolean(b) => b.append_null(),
            ColumnBuilder::Binary(b) => b.append_null(),
            ColumnBuilder::Date(b) => b.append_null(),
            ColumnBuilder::Timestamp(b) => b.append_null(),
            ColumnBuilder::Decimal(b, _, _) => b.append_null(),
            ColumnBuilder::Struct {
                fields, validity, ..
            } => {
                for (_, f) in fields {
                    f.append_null();
                }
                validity.append_null();
            }
            ColumnBuilder::List {
                offsets, validity, ..
            }
            | ColumnBuilder::Map {
                offsets, validity, ..
            } => {
                offsets.push(*offsets.last().expect("offsets start with 0"));
                validity.append_null();
            }
        }
    }

    /// Appends a JSON value. Returns false when any part of it did not fit (that part is
    /// null in the column; the caller rescues the original).
    pub fn append_json(
        &mut self,
        v: &JsonValue<'_>,
        ctx: &ReadContext,
        new_fields: &mut bool,
    ) -> bool {
        if v.is_null() {
            self.append_null();
            return true;
        }

        match self {
            ColumnBuilder::String(b) => {
                match v {
                    JsonValue::String(s) => b.append_value(s),
                    other => b.append_value(other.to_string()),
                }
                true
            }
            ColumnBuilder::Long(b) => append_opt(b, int_of(v)),
            ColumnBuilder::Integer(b) => {
                append_opt(b, int_of(v).and_then(|i| i32::try_from(i).ok()))
            }
            ColumnBuilder::Short(b) => append_opt(b, int_of(v).and_then(|i| i16::try_from(i).ok())),
            ColumnBuilder::Byte(b) => append_opt(b, int_of(v).and_then(|i| i8::try_from(i).ok())),
            ColumnBuilder::Float(b) => append_opt(b, float_of(v).map(|f| f as f32)),
            ColumnBuilder::Double(b) => append_opt(b, float_of(v)),
            ColumnBuilder::Boolean(b) => append_opt(
                b,
                match v {
                    JsonValue::Bool(x) => Some(*x),
                    _ => None,
                },
            ),
            ColumnBuilder::Binary(b) => match v {
                JsonValue::String(s) => {
                    b.append_value(s.as_bytes());
                    true
                }
                _ => {
                    b.append_null();
                    false
                }
            },
            ColumnBuilder::Date(b) => append_opt(b, v.as_str().and_then(scalars::parse_date)),
            ColumnBuilder::Timestamp(b) => append_opt(
                b,
                match v {
                    JsonValue::String(s) => scalars::parse_timestamp(s, ctx.zone),
                    // Spark reads a JSON integer in a TIMESTAMP column as epoch seconds.
                    JsonValue::Number(_) => int_of(v).and_then(|secs| secs.checked_mul(1_000_000)),
                    _ => None,
                },
            ),
            ColumnBuilder::Decimal(b, p, s) => append_opt(
                b,
                match v {
                    JsonValue::Number(text) | JsonValue::String(text) => {
                        scalars::parse_decimal(text, *p, *s)
                    }
                    _ => None,
                },
            ),
            ColumnBuilder::Struct {
                fields,
                validity,
                case_twins,
                ..
            } => match v {
                JsonValue::Object(obj) => {
                    let mut ok = true;
                    let mut matched = 0;
                    let mut taken = Taken::new(obj.len(), *case_twins);
                    for (name, child) in fields.iter_mut() {
                        match taken.find(obj, name, ctx) {
                            Some(i) => {
                                matched += 1;
                                ok &= child.append_json(&obj[i].1, ctx, new_fields);
                            }
                            None => child.append_null(),
                        }
                    }
                    validity.append_non_null();
                    // A key the struct does not have (or a duplicate): rescue the whole
                    // value, and note whether it is a new field (not another letter case).
                    if matched < obj.len()
                        && obj
                            .iter()
                            .any(|(k, _)| !fields.iter().any(|(n, _)| n.eq_ignore_ascii_case(k)))
                    {
                        *new_fields = true;
                    }
                    ok && matched == obj.len()
                }
                _ => {
                    for (_, child) in fields.iter_mut() {
                        child.append_null();
                    }
                    validity.append_null();
                    false
                }
            },
            ColumnBuilder::List {
                element,
                offsets,
                validity,
                ..
            } => match v {
                JsonValue::Array(items) => {
                    let mut ok = true;
                    for item in items {
                        ok &= element.append_json(item, ctx, new_fields);
                    }
                    let last = *offsets.last().expect("offsets start with 0");
                    offsets.push(last + i32::try_from(items.len()).unwrap_or(i32::MAX));
                    validity.append_non_null();
                    ok
                }
                _ => {
                    offsets.push(*offsets.last().expect("offsets start with 0"));
                    validity.append_null();
                    false
                }
            },
            ColumnBuilder::Map {
                keys,
                key_probe,
                values,
                offsets,
                validity,
                ..
            } => match v {
                JsonValue::Object(obj) if !keys_read(key_probe.as_deref_mut(), obj, ctx) => {
                    offsets.push(*offsets.last().expect("offsets start with 0"));
                    validity.append_null();
                    false
                }
                JsonValue::Object(obj) => {
                    let mut ok = true;
                    for (k, val) in obj {
                        ok &= keys.append_text(k, ctx, new_fields);
                        ok &= values.append_json(val, ctx, new_fields);
                    }
                    let last = *offsets.last().expect("offsets start with 0");
                    offsets.push(last + i32::try_from(obj.len()).unwrap_or(i32::MAX));
                    validity.append_non_null();
                    ok
                }
                _ => {
                    offsets.push(*offsets.last().expect("offsets start with 0"));
                    validity.append_null();
                    false
                }
            },
        }
    }

    /// Appends a text value (a CSV cell). Nested columns accept JSON text.
    pub fn append_text(&mut self, s: &str, ctx: &ReadContext, new_fields: &mut bool) -> bool {
        match self {
            ColumnBuilder::String(b) => {
                b.append_value(s);
                true
            }
            ColumnBuilder::Long(b) => append_opt(b, scalars::trim(s).parse().ok()),
            ColumnBuilder::Integer(b) => append_opt(b, scalars::trim(s).parse().ok()),
            ColumnBuilder::Short(b) => append_opt(b, scalars::trim(s).parse().ok()),
            ColumnBuilder::Byte(b) => append_opt(b, scalars::trim(s).parse().ok()),
            ColumnBuilder::Float(b) => append_opt(b, scalars::parse_double(s).map(|f| f as f32)),
            ColumnBuilder::Double(b) => append_opt(b, scalars::parse_double(s)),
            ColumnBuilder::Boolean(b) => append_opt(b, scalars::parse_bool(s)),
            ColumnBuilder::Binary(b) => {
                b.append_value(s.as_bytes());
                true
            }
            ColumnBuilder::Date(b) => append_opt(b, scalars::parse_date(s)),
            ColumnBuilder::Timestamp(b) => append_opt(b, scalars::parse_timestamp(s, ctx.zone)),
            ColumnBuilder::Decimal(b, p, sc) => append_opt(b, scalars::parse_decimal(s, *p, *sc)),
            ColumnBuilder::Struct { .. }
            | ColumnBuilder::List { .. }
            | ColumnBuilder::Map { .. } => match JsonValue::parse(s.as_bytes()) {
                Ok(v) => self.append_json(&v, ctx, new_fields),
                Err(_) => {
                    self.append_null();
                    false
                }
            },
        }
    }

    pub fn finish(&mut self) -> ArrayRef {
        match self {
            ColumnBuilder::String(b) => Arc::new(b.finish()),
            ColumnBuilder::Long(b) => Arc::new(b.finish()),
            ColumnBuilder::Integer(b) => Arc::new(b.finish()),
            ColumnBuilder::Short(b) => Arc::new(b.finish()),
            ColumnBuilder::Byte(b) => Arc::new(b.finish()),
            ColumnBuilder::Float(b) => Arc::new(b.finish()),
            ColumnBuilder::Double(b) => Arc::new(b.finish()),
            ColumnBuilder::Boolean(b) => Arc::new(b.finish()),
            ColumnBuilder::Binary(b) => Arc::new(b.finish()),
            ColumnBuilder::Date(b) => Arc::new(b.finish()),
            ColumnBuilder::Timestamp(b) => Arc::new(b.finish()),
            ColumnBuilder::Decimal(b, _, _) => Arc::new(b.finish()),
            ColumnBuilder::Struct {
                fields,
                arrow,
                validity,
                ..
            } => {
                let children: Vec<ArrayRef> = fields.iter_mut().map(|(_, f)| f.finish()).collect();
                Arc::new(StructArray::new(arrow.clone(), children, validity.finish()))
            }
            ColumnBuilder::List {
                element,
                field,
                offsets,
                validity,
            } => {
                let values = element.finish();
                let offsets = std::mem::replace(offsets, vec![0]);
                Arc::new(ListArray::new(
                    field.clone(),
                    OffsetBuffer::new(ScalarBuffer::from(offsets)),
                    values,
                    validity.finish(),
                ))
            }
            ColumnBuilder::Map {
                keys,
                values,
                entries,
                offsets,
                validity,
                ..
            } => {
                let keys = keys.finish();
                let values = values.finish();
                let offsets = std::mem::replace(offsets, vec![0]);
                let kv_fields = match entries.data_type() {
                    ArrowType::Struct(f) => f.clone(),
                    _ => unreachable!("map entries are structs"),
                };
                let entries_array = StructArray::new(kv_fields, vec![keys, values], None);
                Arc::new(MapArray::new(
                    entries.clone(),
                    OffsetBuffer::new(ScalarBuffer::from(offsets)),
                    entries_array,
                    validity.finish(),
                    false,
                ))
            }
        }
    }
}

trait AppendOpt<T> {
    fn append_option(&mut self, v: Option<T>);
}

macro_rules! impl_append_opt {
    ($($b:ty => $t:ty),*) => {$(
        impl AppendOpt<$t> for $b {
            fn append_option(&mut self, v: Option<$t>) {
                <$b>::append_option(self, v)
            }
        }
    )*};
}

impl_append_opt!(
    Int64Builder => i64, Int32Builder => i32, Int16Builder => i16, Int8Builder => i8,
    Float32Builder => f32, Float64Builder => f64, BooleanBuilder => bool, Date32Builder => i32,
    TimestampMicrosecondBuilder => i64, Decimal128Builder => i128
);

/// Appends the value, or null; returns whether a value was appended.
fn append_opt<T, B: AppendOpt<T>>(b: &mut B, v: Option<T>) -> bool {
    let ok = v.is_some();
    b.append_option(v);
    ok
}

/// The integer a JSON number holds, if it is written as an integer and fits.
fn int_of(v: &JsonValue<'_>) -> Option<i64> {
    match v {
        JsonValue::Number(t) if !t.contains(['.', 'e', 'E']) => t.parse().ok(),
        _ => None,
    }
}

fn float_of(v: &JsonValue<'_>) -> Option<f64> {
    match v {
        // A number beyond f64 (`1e400`) does not fit: rescued, not stored as infinity.
        // Nor does an integer that f64 would round (more than 15 digits can): its exact
        // digits are rescued rather than silently changed.
        JsonValue::Number(t) => t
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .filter(|f| t.len() <= 15 || !is_integer_text(t) || integer_is_exact(t, *f)),
        JsonValue::String(s) => match s.as_ref() {
            "NaN" | "Infinity" | "+Infinity" | "-Infinity" | "Inf" | "+Inf" | "-Inf" => {
                scalars::parse_double(s)
            }
            _ => None,
        },
        _ => None,
    }
}

fn is_integer_text(t: &str) -> bool {
    let digits = t.strip_prefix('-').unwrap_or(t);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `f` holds exactly the integer written `t` (Rust prints a double's exact value).
fn integer_is_exact(t: &str, f: f64) -> bool {
    let (negative, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t),
    };
    let digits = digits.trim_start_matches('0');
    let printed = format!("{:.0}", f.abs());
    let printed = printed.trim_start_matches('0');
    printed == digits && (negative == f.is_sign_negative() || digits.is_empty())
}

/// Whether two of the names differ only in letter case.
fn has_case_twins<'a>(names: impl Iterator<Item = &'a str>) -> bool {
    let names: Vec<&str> = names.collect();
    names
        .iter()
        .enumerate()
        .any(|(i, a)| names[..i].iter().any(|b| a.eq_ignore_ascii_case(b)))
}

/// Which entries of a JSON object the columns (or struct fields) took, and where to look
/// for the next one. Records tend to list their keys in column order, so a column's entry
/// is first looked for right after the leading run of taken entries. That finds the same
/// entry as [`lookup`] from the start, since the taken entries hold other columns' names
/// (columns whose names differ only in case turn the shortcut off).
struct Taken {
    first: [bool; 64],
    /// Taken entries past the first 64.
    more: Vec<usize>,
    /// Entries before this index are all taken.
    prefix: usize,
    shortcut: bool,
}

impl Taken {
    fn new(entries: usize, case_twins: bool) -> Taken {
        Taken {
            first: [false; 64],
            more: Vec::new(),
            prefix: 0,
            shortcut: !case_twins && entries <= 64,
        }
    }

    /// The entry for `name` (see [`lookup`]), marked as taken.
    fn find(
        &mut self,
        obj: &[(Cow<'_, str>, JsonValue<'_>)],
        name: &str,
        ctx: &ReadContext,
    ) -> Option<usize> {
        let found = match obj.get(self.prefix) {
            Some((k, _)) if self.shortcut && same_key(k, name) => Some(self.prefix),
            _ => lookup(obj, name, ctx),
        }?;
        if found < self.first.len() {
            self.first[found] = true;
            while self.prefix < self.first.len() && self.first[self.prefix] {
                self.prefix += 1;
            }
        } else {
            self.more.push(found);
        }
        Some(found)
    }

    fn contains(&self, i: usize) -> bool {
        self.first
            .get(i)
            .copied()
            .unwrap_or_else(|| self.more.contains(&i))
    }

    fn count(&self) -> usize {
        self.first.iter().filter(|t| **t).count() + self.more.len()
    }
}

/// The index of the entry for `name`: the exact name first, then (reading
/// case-insensitively) another letter case.
fn lookup(obj: &[(Cow<'_, str>, JsonValue<'_>)], name: &str, ctx: &ReadContext) -> Option<usize> {
    obj.iter().position(|(k, _)| same_key(k, name)).or_else(|| {
        (!ctx.case_sensitive)
            .then(|| obj.iter().position(|(k, _)| k.eq_ignore_ascii_case(name)))
            .flatten()
    })
}

/// Builds the rows of one output batch from one file.
pub struct RowBuilder {
    layout: Arc<Layout>,
    ctx: ReadContext,
    /// Value columns, in layout order, with their names.
    columns: Vec<(String, ColumnBuilder)>,
    rescued: Option<StringBuilder>,
    corrupt: Option<StringBuilder>,
    file: Arc<FileMeta>,
    rows: usize,
    rescued_rows: usize,
    /// Values that did not fit and had nowhere to go (no rescued-data column).
    dropped_values: u64,
    /// Top-level names seen in the data but absent from the schema.
    unknown_names: Vec<String>,
    /// Whether a struct value had a field its column type lacks.
    nested_new_fields: bool,
    rescue_stats: RescueStats,
    /// Whether two columns' names differ only in letter case.
    case_twins: bool,
}

impl RowBuilder {
    pub fn new(layout: Arc<Layout>, ctx: ReadContext, file: Arc<FileMeta>) -> RowBuilder {
        let columns: Vec<(String, ColumnBuilder)> = layout
            .value_fields()
            .map(|f| (f.name.clone(), ColumnBuilder::new(&f.data_type)))
            .collect();
        let case_twins = has_case_twins(columns.iter().map(|(n, _)| n.as_str()));
        RowBuilder {
            rescued: layout.rescued.as_ref().map(|_| StringBuilder::new()),
            corrupt: layout.corrupt.as_ref().map(|_| StringBuilder::new()),
            layout,
            ctx,
            columns,
            file,
            rows: 0,
            rescued_rows: 0,
            dropped_values: 0,
            unknown_names: Vec::new(),
            nested_new_fields: false,
            rescue_stats: RescueStats::default(),
            case_twins,
        }
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    pub fn column_names(&self) -> impl Iterator<Item = &str> {
        self.columns.iter().map(|(n, _)| n.as_str())
    }

    /// Appends one JSON object record.
    pub fn append_json_object(&mut self, obj: &[(Cow<'_, str>, JsonValue<'_>)]) {
        let mut rescued = Map::new();
        // Which entries a column took; the rest (unknown names, other letter cases,
        // duplicate keys) are rescued, so no value is dropped.
        let mut taken = Taken::new(obj.len(), self.case_twins);
        for (name, col) in &mut self.columns {
            match taken.find(obj, name, &self.ctx) {
                Some(i) => {
                    let v = &obj[i].1;
                    if !col.append_json(v, &self.ctx, &mut self.nested_new_fields) {
                        rescued.insert(name.clone(), v.to_value());
                    }
                }
                None => col.append_null(),
            }
        }
        if taken.count() < obj.len() {
            for (i, (k, v)) in obj.iter().enumerate() {
                if taken.contains(i) {
                    continue;
                }
                if !self.columns.iter().any(|(n, _)| n.eq_ignore_ascii_case(k))
                    && !self.unknown_names.iter().any(|n| n == k)
                {
                    self.unknown_names.push(k.to_string());
                }
                rescued.insert(k.to_string(), v.to_value());
            }
        }
        self.finish_row(rescued, None);
    }

    /// Appends one CSV record: `values[i]` belongs to column `targets[i]` (an index into
    /// the value columns, or `None` for a header name the schema does not have).
    /// Cells listed in `invalid` were not valid UTF-8 (their text has the bad bytes
    /// escaped as `\xNN`): they are never stored as if they were, but rescued.
    pub fn append_text_record(
        &mut self,
        headers: &[String],
        targets: &[Option<usize>],
        cells: &[Option<&str>],
        invalid: &[usize],
        extra: Option<String>,
    ) {
        let mut rescued = Map::new();
        let mut filled = vec![false; self.columns.len()];
        for (i, cell) in cells.iter().enumerate() {
            match targets.get(i).copied().flatten() {
                Some(c) => {
                    filled[c] = true;
                    let (name, col) = &mut self.columns[c];
                    match cell {
                        None => col.append_null(),
                        Some(text) if invalid.contains(&i) => {
                            col.append_null();
                            rescued.insert(name.clone(), Value::String((*text).to_string()));
                        }
                        Some(text) => {
                            if !col.append_text(text, &self.ctx, &mut self.nested_new_fields) {
                                rescued.insert(name.clone(), Value::String((*text).to_string()));
                            }
                        }
                    }
                }
                None => {
                    if let (Some(text), Some(h)) = (cell, headers.get(i)) {
                        rescued.insert(h.clone(), Value::String((*text).to_string()));
                    }
                }
            }
        }
        for (c, done) in filled.iter().enumerate() {
            if !done {
                self.columns[c].1.append_null();
            }
        }
        self.finish_row(rescued, extra);
    }

    /// Appends a malformed record: every column null, the raw text kept.
    pub fn append_corrupt(&mut self, raw: &str) {
        for (_, col) in &mut self.columns {
            col.append_null();
        }
        self.finish_row(Map::new(), Some(raw.to_string()));
    }

    fn finish_row(&mut self, mut rescued: Map<String, Value>, corrupt: Option<String>) {
        if corrupt.is_some() {
            self.rescue_stats
                .note(CORRUPT_RECORD, RescueKind::Malformed);
        }
        for key in rescued.keys() {
            let kind = RescueKind::of(key, self.columns.iter().map(|(n, _)| n.as_str()));
            self.rescue_stats.note(key, kind);
        }
        match (&mut self.corrupt, corrupt) {
            (Some(b), Some(raw)) => b.append_value(raw),
            (Some(b), None) => b.append_null(),
            (None, Some(raw)) => {
                rescued.insert(CORRUPT_RECORD.to_string(), Value::String(raw));
            }
            (None, None) => {}
        }
        match &mut self.rescued {
            Some(b) => {
                if rescued.is_empty() {
                    b.append_null();
                } else {
                    rescued.insert(
                        FILE_PATH_KEY.to_string(),
                        Value::String(self.file.path.clone()),
                    );
                    b.append_value(Value::Object(rescued).to_string());
                    self.rescued_rows += 1;
                }
            }
            None => self.dropped_values += rescued.len() as u64,
        }
        self.rows += 1;
    }

    /// Rows whose rescued data is not null.
    pub fn rescued_rows(&self) -> usize {
        self.rescued_rows
    }

    pub fn dropped_values(&self) -> u64 {
        self.dropped_values
    }

    pub fn unknown_names(&self) -> &[String] {
        &self.unknown_names
    }

    /// What was rescued so far in this file, per key.
    pub fn rescue_stats(&self) -> &RescueStats {
        &self.rescue_stats
    }

    /// Whether the data had fields the schema lacks, at the top level or inside structs.
    pub fn saw_new_fields(&self) -> bool {
        !self.unknown_names.is_empty() || self.nested_new_fields
    }

    /// Finishes the rows appended so far into a batch of the layout's schema, and resets.
    pub fn finish(&mut self) -> RecordBatch {
        let n = self.rows;
        let layout = Arc::clone(&self.layout);
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(layout.data.fields.len() + 2);
        let mut value_idx = 0;
        for f in &layout.data.fields {
            if Some(&f.name) == layout.rescued.as_ref() {
                arrays.push(Arc::new(
                    self.rescued
                        .as_mut()
                        .expect("rescued builder exists")
                        .finish(),
                ));
            } else if Some(&f.name) == layout.corrupt.as_ref() {
                arrays.push(Arc::new(
                    self.corrupt
                        .as_mut()
                        .expect("corrupt builder exists")
                        .finish(),
                ));
            } else {
                arrays.push(self.columns[value_idx].1.finish());
                value_idx += 1;
            }
        }
        push_file_columns(&layout, &self.file, n, &mut arrays);
        self.rows = 0;
        self.rescued_rows = 0;
        RecordBatch::try_new(layout.arrow_schema(), arrays)
            .expect("builders follow the layout's schema")
    }
}

/// Appends the columns that are constant across a file: partition values and `_metadata`.
pub fn push_file_columns(layout: &Layout, file: &FileMeta, n: usize, arrays: &mut Vec<ArrayRef>) {
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
}

fn metadata_array(file: &FileMeta, n: usize) -> ArrayRef {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_that_a_double_would_round_are_refused() {
        let big = "123456789012345678901234567890123456789012345678901";
        assert_eq!(float_of(&JsonValue::Number(big.into())), None);
        assert_eq!(
            float_of(&JsonValue::Number("9007199254740993".into())),
            None,
            "2^53 + 1 is not a double"
        );
        assert_eq!(
            float_of(&JsonValue::Number("9007199254740992".into())),
            Some(9_007_199_254_740_992.0)
        );
        assert_eq!(
            float_of(&JsonValue::Number("-100000000000000000000".into())),
            Some(-1e20),
            "a power of ten that a double holds exactly"
        );
        assert_eq!(
            float_of(&JsonValue::Number("0.1".into())),
            Some(0.1),
            "fractions as before"
        );
    }
    use crate::schema::hints::parse_schema;
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use serde_json::json;

    fn layout(ddl: &str) -> Arc<Layout> {
        let mut data = parse_schema(ddl).unwrap();
        data.fields
            .push(Field::new("_rescued_data", DataType::String));
        Arc::new(Layout {
            data,
            partition: Schema::default(),
            rescued: Some("_rescued_data".into()),
            corrupt: None,
            include_metadata: true,
        })
    }

    fn file() -> Arc<FileMeta> {
        Arc::new(FileMeta {
            path: "file:///land/a.json".into(),
            name: "a.json".into(),
            size: 10,
            mtime_ms: 1000,
            partition_values: vec![],
        })
    }

    fn obj(v: Value) -> Vec<(Cow<'static, str>, JsonValue<'static>)> {
        match JsonValue::from_value(&v) {
            JsonValue::Object(entries) => entries,
            other => panic!("not an object: {other:?}"),
        }
    }

    const CTX: ReadContext = ReadContext {
        zone: Tz::UTC,
        case_sensitive: true,
    };

    fn rescued(batch: &RecordBatch) -> Vec<Option<String>> {
        let col = batch
            .column_by_name("_rescued_data")
            .unwrap()
            .as_string::<i32>();
        col.iter().map(|v| v.map(str::to_string)).collect()
    }

    #[test]
    fn the_first_of_duplicate_keys_is_read_and_the_others_rescued_in_any_order() {
        let layout = layout("a BIGINT, b BIGINT, s STRUCT<x: BIGINT, y: BIGINT>");
        let mut rows = RowBuilder::new(layout, CTX, file());
        for text in [
            r#"{"a": 1, "a": 5, "b": 2, "s": {"x": 1, "x": 5, "y": 2}}"#,
            r#"{"b": 2, "a": 1, "a": 5, "s": {"y": 2, "x": 1}}"#,
            r#"{"a": 1, "b": 2, "s": {"x": 1, "y": 2}}"#,
        ] {
            match JsonValue::parse(text.as_bytes()).unwrap() {
                JsonValue::Object(entries) => rows.append_json_object(&entries),
                other => panic!("{other:?}"),
            }
        }
        let batch = rows.finish();
        for name in ["a", "b"] {
            let col = batch
                .column_by_name(name)
                .unwrap()
                .as_primitive::<arrow_array::types::Int64Type>();
            let want = if name == "a" { 1 } else { 2 };
            assert_eq!(
                col.iter().collect::<Vec<_>>(),
                vec![Some(want); 3],
                "{name}"
            );
        }
        let rescued = rescued(&batch);
        let first: Value = serde_json::from_str(rescued[0].as_deref().unwrap()).unwrap();
        assert_eq!(first["a"], json!(5), "the second `a` is kept: {first}");
        assert_eq!(
            first["s"],
            json!({"x": 5, "y": 2}),
            "a struct with a duplicate is rescued whole"
        );
        let second: Value = serde_json::from_str(rescued[1].as_deref().unwrap()).unwrap();
        assert_eq!(second["a"], json!(5), "{second}");
        assert_eq!(rescued[2], None);
    }

    #[test]
    fn mismatched_and_unknown_values_are_rescued_with_the_file() {
        let mut rows = RowBuilder::new(layout("order_id BIGINT, amount BIGINT"), CTX, file());
        for rec in [
            json!({"order_id": 1, "amount": 5000}),
            json!({"order_id": 2, "amount": "5000원 - 750원 할인"}),
            json!({"order_id": 3, "amount": 10, "coupon_code": "SUMMER25"}),
            json!({"Order_ID": 4}),
        ] {
            rows.append_json_object(&obj(rec.clone()));
        }
        assert_eq!(rows.rescued_rows(), 3);
        assert_eq!(
            rows.unknown_names(),
            ["coupon_code".to_string()],
            "a case variant is not a new column"
        );
        let batch = rows.finish();
        assert_eq!(batch.num_rows(), 4);
        let amount = batch
            .column_by_name("amount")
            .unwrap()
            .as_primitive::<arrow_array::types::Int64Type>();
        assert_eq!(
            amount.iter().collect::<Vec<_>>(),
            vec![Some(5000), None, Some(10), None]
        );
        assert_eq!(
            rescued(&batch),
            vec![
                None,
                Some(
                    r#"{"amount":"5000원 - 750원 할인","_file_path":"file:///land/a.json"}"#.into()
                ),
                Some(r#"{"coupon_code":"SUMMER25","_file_path":"file:///land/a.json"}"#.into()),
                Some(r#"{"Order_ID":4,"_file_path":"file:///land/a.json"}"#.into()),
            ]
        );
        let meta = batch.column_by_name("_metadata").unwrap().as_struct();
        assert_eq!(meta.column(1).as_string::<i32>().value(0), "a.json");
    }

    /// Found by fuzzing `fuzz_hints`: with the hint `attrs MAP<INT, BIGINT>`, the record
    /// `{"attrs": {"k": 1}}` left a null key in the map and building the batch panicked.
    #[test]
    fn a_map_key_that_does_not_read_as_the_key_type_rescues_the_whole_map() {
        let mut rows = RowBuilder::new(
            layout("attrs MAP<INT, BIGINT>, kinds MAP<STRUCT<a: INT>, STRING>"),
            CTX,
            file(),
        );
        for rec in [
            json!({"attrs": {"1": 10, "2": 20}}),
            json!({"attrs": {"3": 30, "k": 1}, "kinds": {"null": "x"}}),
            json!({"attrs": {"4": 40}, "kinds": {"{\"a\": 1}": "y"}}),
        ] {
            rows.append_json_object(&obj(rec));
        }
        let batch = rows.finish();
        let attrs = batch.column_by_name("attrs").unwrap().as_map();
        assert_eq!(
            (attrs.is_null(0), attrs.is_null(1), attrs.is_null(2)),
            (false, true, false)
        );
        assert_eq!(
            attrs.value(2).len(),
            1,
            "a map after a rescued one is whole"
        );
        let kinds = batch.column_by_name("kinds").unwrap().as_map();
        assert!(kinds.is_null(1), "a null key makes the map null");
        assert_eq!(kinds.value(2).len(), 1);
        assert_eq!(
            rescued(&batch)[1].as_deref(),
            Some(
                r#"{"attrs":{"3":30,"k":1},"kinds":{"null":"x"},"_file_path":"file:///land/a.json"}"#
            )
        );
    }

    #[test]
    fn case_insensitive_reading_maps_case_variants() {
        let ctx = ReadContext {
            zone: Tz::UTC,
            case_sensitive: false,
        };
        let mut rows = RowBuilder::new(layout("order_id BIGINT"), ctx, file());
        rows.append_json_object(&obj(json!({"Order_ID": 4})));
        let batch = rows.finish();
        assert_eq!(rescued(&batch), vec![None]);
        assert_eq!(
            batch
                .column(0)
                .as_primitive::<arrow_array::types::Int64Type>()
                .value(0),
            4
        );
    }

    #[test]
    fn nested_values_build_and_nested_misfits_rescue_the_top_level_value() {
        let mut rows = RowBuilder::new(
            layout(
                "address STRUCT<zip:STRING, city:STRING>, items ARRAY<STRUCT<qty:INT, price:DECIMAL(12,2)>>, attrs MAP<STRING,BIGINT>",
            ),
            CTX,
            file(),
        );
        rows.append_json_object(&obj(json!({"address": {"zip": "00123", "city": "Seoul"}, "items": [{"qty": 2, "price": 12.5}], "attrs": {"a": 1}})));
        rows.append_json_object(&obj(
            json!({"address": {"zip": "1", "floor": 3}, "items": [{"qty": "two", "price": 1}]}),
        ));
        let batch = rows.finish();
        let r = rescued(&batch);
        assert_eq!(r[0], None);
        let second: Value = serde_json::from_str(r[1].as_deref().unwrap()).unwrap();
        assert_eq!(second["address"], json!({"zip": "1", "floor": 3}));
        assert_eq!(second["items"], json!([{"qty": "two", "price": 1}]));
        let items = batch.column_by_name("items").unwrap().as_list::<i32>();
        let first = items.value(0);
        let price = first
            .as_struct()
            .column(1)
            .as_primitive::<arrow_array::types::Decimal128Type>();
        assert_eq!(price.value(0), 1250);
    }

    #[test]
    fn corrupt_records_keep_their_raw_text() {
        let mut rows = RowBuilder::new(layout("a STRING"), CTX, file());
        rows.append_corrupt("{\"a\": ");
        let batch = rows.finish();
        assert_eq!(
            rescued(&batch)[0].as_deref(),
            Some(r#"{"_corrupt_record":"{\"a\": ","_file_path":"file:///land/a.json"}"#)
        );
    }

    #[test]
    fn csv_cells_are_typed_and_misfits_keep_the_original_string() {
        let mut rows = RowBuilder::new(layout("id INT, cost BIGINT, zip STRING"), CTX, file());
        let headers = vec![
            "id".to_string(),
            "cost".to_string(),
            "zip".to_string(),
            "extra".to_string(),
        ];
        let targets = vec![Some(0), Some(1), Some(2), None];
        rows.append_text_record(
            &headers,
            &targets,
            &[Some("1"), Some("$100"), Some("00123"), Some("x")],
            &[],
            None,
        );
        let batch = rows.finish();
        assert_eq!(
            rescued(&batch)[0].as_deref(),
            Some(r#"{"cost":"$100","extra":"x","_file_path":"file:///land/a.json"}"#)
        );
        assert_eq!(batch.column(2).as_string::<i32>().value(0), "00123");
    }
}
