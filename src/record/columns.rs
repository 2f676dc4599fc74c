//! One column's builder, shaped like its type: values appended one by one, and what does
//! not fit reported for rescue.

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder,
    Float64Builder, Int8Builder, Int16Builder, Int32Builder, Int64Builder, StringBuilder,
    TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, ListArray, MapArray, StructArray};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType as ArrowType, Field as ArrowField, Fields};

use crate::parse::json::{JsonArena, JsonValue, same_key, short_decimal, short_integer};

use crate::parse::scalars;
use crate::schema::DataType;

use super::*;

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
pub(crate) fn keys_read(
    probe: Option<&mut ColumnBuilder>,
    obj: &[(&str, JsonValue<'_>)],
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
    ///
    /// Inlined into the loops over a record's columns for the values most columns hold (a
    /// string into STRING, a short integer into BIGINT, a short decimal into DOUBLE): the
    /// call into the general match below set up its 136-byte frame and six saved
    /// registers for each such value (1.4% of a bulk run's instructions).
    #[inline]
    pub fn append_json(
        &mut self,
        v: &JsonValue<'_>,
        ctx: &ReadContext,
        new_fields: &mut bool,
    ) -> bool {
        match (&mut *self, v) {
            (ColumnBuilder::String(b), JsonValue::String(s)) => b.append_value(s),
            (ColumnBuilder::Long(b), JsonValue::Number(t)) if let Some(i) = short_integer(t) => {
                b.append_value(i)
            }
            (ColumnBuilder::Double(b), JsonValue::Number(t)) if let Some(f) = short_decimal(t) => {
                b.append_value(f)
            }
            _ => return self.append_json_general(v, ctx, new_fields),
        }
        true
    }

    /// [`ColumnBuilder::append_json`] for every pair of value and column type.
    ///
    /// Long because it is one match of a JSON value's kind against the column's type, the
    /// hot loop of every JSON and XML row; an arm per pair keeps Spark's conversions side
    /// by side.
    #[inline(never)]
    fn append_json_general(
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
            ColumnBuilder::Date(b) => {
                append_opt(b, v.as_str().and_then(|s| ctx.temporal.parse_date(s)))
            }
            ColumnBuilder::Timestamp(b) => append_opt(
                b,
                match v {
                    JsonValue::String(s) => ctx.temporal.read_timestamp(s, ctx.zone),
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
                    for item in items.iter() {
                        ok &= element.append_json(item, ctx, new_fields);
                    }
                    let last = *offsets.last().expect("offsets start with 0");
                    offsets.push(last + i32::try_from(items.len()).unwrap_or(i32::MAX));
                    validity.append_non_null();
                    ok
                }
                single if ctx.singleton_arrays => {
                    let ok = element.append_json(single, ctx, new_fields);
                    let last = *offsets.last().expect("offsets start with 0");
                    offsets.push(last + 1);
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
                    for (k, val) in obj.iter() {
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
            ColumnBuilder::Date(b) => append_opt(b, ctx.temporal.parse_date(s)),
            ColumnBuilder::Timestamp(b) => append_opt(b, ctx.temporal.read_timestamp(s, ctx.zone)),
            ColumnBuilder::Decimal(b, p, sc) => append_opt(b, scalars::parse_decimal(s, *p, *sc)),
            ColumnBuilder::Struct { .. }
            | ColumnBuilder::List { .. }
            | ColumnBuilder::Map { .. } => {
                match JsonValue::parse(&JsonArena::new(), s.as_bytes()) {
                    Ok(v) => self.append_json(&v, ctx, new_fields),
                    Err(_) => {
                        self.append_null();
                        false
                    }
                }
            }
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

pub(crate) trait AppendOpt<T> {
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
pub(crate) fn append_opt<T, B: AppendOpt<T>>(b: &mut B, v: Option<T>) -> bool {
    let ok = v.is_some();
    b.append_option(v);
    ok
}

/// The integer a JSON number holds, if it is written as an integer and fits.
pub(crate) fn int_of(v: &JsonValue<'_>) -> Option<i64> {
    match v {
        JsonValue::Number(t) => match short_integer(t) {
            Some(i) => Some(i),
            None if t.contains(['.', 'e', 'E']) => None,
            None => t.parse().ok(),
        },
        _ => None,
    }
}

pub(crate) fn float_of(v: &JsonValue<'_>) -> Option<f64> {
    match v {
        // A number beyond f64 (`1e400`) does not fit: rescued, not stored as infinity.
        // Nor does an integer that f64 would round (more than 15 digits can): its exact
        // digits are rescued rather than silently changed.
        // `allowNonNumericNumbers`: NaN and the infinities are doubles.
        JsonValue::Number(t) if crate::parse::json::is_non_numeric(t) => Some(match *t {
            "NaN" => f64::NAN,
            t if t.starts_with('-') => f64::NEG_INFINITY,
            _ => f64::INFINITY,
        }),
        JsonValue::Number(t) => short_decimal(t).or_else(|| {
            t.parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .filter(|f| t.len() <= 15 || !is_integer_text(t) || integer_is_exact(t, *f))
        }),
        JsonValue::String(s) => match *s {
            "NaN" | "Infinity" | "+Infinity" | "-Infinity" | "Inf" | "+Inf" | "-Inf" => {
                scalars::parse_double(s)
            }
            _ => None,
        },
        _ => None,
    }
}

pub(crate) fn is_integer_text(t: &str) -> bool {
    let digits = t.strip_prefix('-').unwrap_or(t);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `f` holds exactly the integer written `t` (Rust prints a double's exact value).
pub(crate) fn integer_is_exact(t: &str, f: f64) -> bool {
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
pub(crate) fn has_case_twins<'a>(names: impl Iterator<Item = &'a str>) -> bool {
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
pub(crate) struct Taken {
    /// Taken entries among the first 64, one bit each (a bit mask rather than 64 flags: a
    /// record builds one of these per object, and clearing and counting 64 flags showed in
    /// the bulk profile).
    first: u64,
    /// Taken entries past the first 64.
    more: Vec<usize>,
    /// Entries before this index are all taken.
    prefix: usize,
    shortcut: bool,
}

impl Taken {
    pub(crate) fn new(entries: usize, case_twins: bool) -> Taken {
        Taken {
            first: 0,
            more: Vec::new(),
            prefix: 0,
            shortcut: !case_twins && entries <= 64,
        }
    }

    /// The entry for `name` (see [`lookup`]), marked as taken. Inlined: it runs for every
    /// column of every record, and is mostly one key comparison.
    #[inline]
    pub(crate) fn find(
        &mut self,
        obj: &[(&str, JsonValue<'_>)],
        name: &str,
        ctx: &ReadContext,
    ) -> Option<usize> {
        let found = match obj.get(self.prefix) {
            Some((k, _)) if self.shortcut && same_key(k, name) => Some(self.prefix),
            _ => lookup(obj, name, ctx),
        }?;
        if found < 64 {
            self.first |= 1 << found;
            self.prefix = self.first.trailing_ones() as usize;
        } else {
            self.more.push(found);
        }
        Some(found)
    }

    pub(crate) fn contains(&self, i: usize) -> bool {
        if i < 64 {
            self.first & (1 << i) != 0
        } else {
            self.more.contains(&i)
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.first.count_ones() as usize + self.more.len()
    }
}

/// The index of the entry for `name`: the exact name first, then (reading
/// case-insensitively) another letter case.
pub(crate) fn lookup(
    obj: &[(&str, JsonValue<'_>)],
    name: &str,
    ctx: &ReadContext,
) -> Option<usize> {
    obj.iter().position(|(k, _)| same_key(k, name)).or_else(|| {
        (!ctx.case_sensitive)
            .then(|| obj.iter().position(|(k, _)| k.eq_ignore_ascii_case(name)))
            .flatten()
    })
}
