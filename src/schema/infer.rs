//! Schema inference from JSON records and CSV cells.
//!
//! With `cloudFiles.inferColumnTypes=false` every leaf is STRING while objects stay structs and
//! arrays stay arrays. With it on, Spark's rules apply (`autoloader-semantics.md` §2):
//!
//! | value                        | type                                              |
//! |------------------------------|---------------------------------------------------|
//! | JSON integer                 | BIGINT; beyond BIGINT: DECIMAL(digits,0); > 38 digits: STRING (Spark: DOUBLE) |
//! | JSON fraction                | DOUBLE (`prefersDecimal`: DECIMAL when it fits)   |
//! | CSV integer                  | INT when it fits, else as JSON                    |
//! | ISO-8601 date-time string    | TIMESTAMP                                         |
//! | CSV `yyyy-MM-dd`             | DATE (JSON never infers DATE)                     |
//! | `true`/`false`               | BOOLEAN                                           |
//! | null, `""`                   | no information (a column never seen otherwise is STRING) |
//!
//! Merging two observations (`merge`): INT ⊂ BIGINT ⊂ DECIMAL ⊂ DOUBLE widen; DATE with
//! TIMESTAMP is TIMESTAMP; structs merge field by field, arrays by element; any other
//! conflict is STRING. Field names merge case-insensitively, first spelling wins (the other
//! spellings are rescued at read time unless `readerCaseSensitive=false`). Columns keep the
//! order in which they were first seen.

use chrono_tz::Tz;
use serde_json::Value;

use super::{DataType, Field, Schema};
use crate::parse::json::{JsonArena, JsonValue, same_key};
use crate::parse::scalars;
use crate::parse::temporal::Temporal;

/// A type under inference: like [`DataType`] but with `Null` for "no information yet".
#[derive(Debug, Clone, PartialEq)]
pub enum Inferred {
    Null,
    Leaf(DataType),
    Struct(Vec<(String, Inferred)>),
    Array(Box<Inferred>),
}

/// How values are typed during inference.
#[derive(Debug, Clone, Copy)]
pub struct InferOptions {
    /// `cloudFiles.inferColumnTypes`.
    pub typed: bool,
    /// `timeZone`, for timestamps without an offset.
    pub zone: Tz,
    /// `cloudFiles.maxNestingDepth`: structs and arrays deeper than this are one STRING
    /// column holding their JSON text (Delta readers refuse very deep schemas).
    pub max_depth: usize,
    /// JSON `primitivesAsString`: numbers and booleans are STRING.
    pub primitives_as_string: bool,
    /// JSON `prefersDecimal`: fractions (and numeric strings) are DECIMAL when they fit.
    pub prefers_decimal: bool,
    /// `timestampFormat` / `dateFormat`, shared with the reader.
    pub temporal: Temporal,
    /// XML: an array and a single value of it merge into the array (an element that
    /// repeats in some rows appears once in others), as Spark's XML inference does.
    pub xml: bool,
}

impl InferOptions {
    /// Typed or not, with every other option at its default.
    pub const fn new(typed: bool) -> InferOptions {
        InferOptions {
            typed,
            zone: Tz::UTC,
            max_depth: 32,
            primitives_as_string: false,
            prefers_decimal: false,
            temporal: Temporal::ISO,
            xml: false,
        }
    }
}

impl Inferred {
    /// The type of one JSON value.
    pub fn of_json(value: &Value, opts: InferOptions) -> Inferred {
        Inferred::of_json_at(value, opts, 1)
    }

    fn of_json_at(value: &Value, opts: InferOptions, depth: usize) -> Inferred {
        if depth > opts.max_depth && (value.is_object() || value.is_array()) {
            return Inferred::Leaf(DataType::String);
        }
        match value {
            Value::Null => Inferred::Null,
            Value::Object(map) => {
                Inferred::Struct(map.iter().fold(Vec::new(), |mut fields, (k, v)| {
                    merge_field(&mut fields, k, Inferred::of_json_at(v, opts, depth + 1));
                    fields
                }))
            }
            Value::Array(items) => Inferred::Array(Box::new(
                items
                    .iter()
                    .map(|v| Inferred::of_json_at(v, opts, depth + 1))
                    .fold(Inferred::Null, Inferred::merge),
            )),
            _ if !opts.typed => Inferred::Leaf(DataType::String),
            Value::String(s) if s.is_empty() => Inferred::Null,
            Value::String(s) => Inferred::Leaf(string_type(s, opts)),
            _ if opts.primitives_as_string => Inferred::Leaf(DataType::String),
            Value::Bool(_) => Inferred::Leaf(DataType::Boolean),
            Value::Number(n) => Inferred::Leaf(number_type(n.as_str(), opts)),
        }
    }

    /// The type of one CSV cell (already known not to be null).
    pub fn of_csv(text: &str, opts: InferOptions) -> Inferred {
        if !opts.typed {
            return Inferred::Leaf(DataType::String);
        }
        let t = scalars::trim(text);
        let leaf = if let Ok(v) = t.parse::<i64>() {
            if i32::try_from(v).is_ok() {
                DataType::Integer
            } else {
                DataType::Long
            }
        } else if let Some((p, s)) = scalars::big_integer_decimal(t) {
            DataType::Decimal(p, s)
        } else if scalars::parse_double(t).is_some() {
            DataType::Double
        } else if opts.temporal.parse_date(t).is_some() {
            DataType::Date
        } else if opts.temporal.infers_timestamp(t, opts.zone) {
            DataType::Timestamp
        } else if scalars::parse_bool(t).is_some() {
            DataType::Boolean
        } else {
            DataType::String
        };
        Inferred::Leaf(leaf)
    }

    /// The lowest common type of two observations (see the module table).
    pub fn merge(self, other: Inferred) -> Inferred {
        self.merge_as(other, false)
    }

    /// [`Inferred::merge`]; with `xml`, an array and a single value merge into the array.
    pub fn merge_as(self, other: Inferred, xml: bool) -> Inferred {
        use Inferred::{Array, Leaf, Null, Struct};
        match (self, other) {
            (Null, x) | (x, Null) => x,
            (Leaf(a), Leaf(b)) => Leaf(merge_leaf(a, b)),
            (Struct(mut a), Struct(b)) => {
                for (name, t) in b {
                    merge_field_as(&mut a, &name, t, xml);
                }
                Struct(a)
            }
            (Array(a), Array(b)) => Array(Box::new(a.merge_as(*b, xml))),
            (Array(a), x) | (x, Array(a)) if xml => Array(Box::new(a.merge_as(x, xml))),
            _ => Leaf(DataType::String),
        }
    }

    /// The final type: unresolved nulls and empty structs become STRING.
    pub fn finish(self) -> DataType {
        match self {
            Inferred::Null => DataType::String,
            Inferred::Leaf(t) => t,
            Inferred::Struct(fields) if fields.is_empty() => DataType::String,
            Inferred::Struct(fields) => DataType::Struct(
                fields
                    .into_iter()
                    .map(|(n, t)| Field::new(n, t.finish()))
                    .collect(),
            ),
            Inferred::Array(element) => DataType::Array(Box::new(element.finish())),
        }
    }

    /// The inference form of a known type (to merge new observations into a stored schema).
    pub fn from_type(t: &DataType) -> Inferred {
        match t {
            DataType::Struct(fields) => Inferred::Struct(
                fields
                    .iter()
                    .map(|f| (f.name.clone(), Inferred::from_type(&f.data_type)))
                    .collect(),
            ),
            DataType::Array(e) => Inferred::Array(Box::new(Inferred::from_type(e))),
            other => Inferred::Leaf(other.clone()),
        }
    }
}

fn merge_field(fields: &mut Vec<(String, Inferred)>, name: &str, t: Inferred) {
    merge_field_as(fields, name, t, false);
}

fn merge_field_as(fields: &mut Vec<(String, Inferred)>, name: &str, t: Inferred, xml: bool) {
    match fields
        .iter_mut()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
    {
        Some((_, existing)) => {
            let old = std::mem::replace(existing, Inferred::Null);
            *existing = old.merge_as(t, xml);
        }
        None => fields.push((name.to_string(), t)),
    }
}

/// Spark's JSON number rule, on the number's text, with one difference: an integer of
/// more than 38 digits is STRING (Spark says DOUBLE, which cannot hold its digits: every
/// value would be rescued and the column left null), so the digits land as they are.
fn number_type(text: &str, opts: InferOptions) -> DataType {
    if crate::parse::json::is_non_numeric(text) {
        return DataType::Double;
    }
    let is_integer = !text.contains(['.', 'e', 'E']);
    if is_integer {
        if text.parse::<i64>().is_ok() {
            return DataType::Long;
        }
        return match scalars::big_integer_decimal(text) {
            Some((p, s)) => DataType::Decimal(p, s),
            None => DataType::String,
        };
    }
    if opts.prefers_decimal
        && let Some((p, s)) = scalars::decimal_type(text)
    {
        return DataType::Decimal(p, s);
    }
    DataType::Double
}

/// The type of a non-empty JSON string: DECIMAL for a number under `prefersDecimal` (it
/// wins over a timestamp, as in Spark), TIMESTAMP in the stream's format, else STRING.
fn string_type(s: &str, opts: InferOptions) -> DataType {
    if opts.prefers_decimal
        && let Some((p, sc)) = scalars::decimal_type(s)
    {
        return DataType::Decimal(p, sc);
    }
    if opts.temporal.infers_timestamp(s, opts.zone) {
        DataType::Timestamp
    } else {
        DataType::String
    }
}

fn integral_digits(t: &DataType) -> Option<(u8, i8)> {
    match t {
        DataType::Byte => Some((3, 0)),
        DataType::Short => Some((5, 0)),
        DataType::Integer => Some((10, 0)),
        DataType::Long => Some((20, 0)),
        DataType::Decimal(p, s) => Some((*p, *s)),
        _ => None,
    }
}

fn numeric_rank(t: &DataType) -> Option<u8> {
    match t {
        DataType::Byte => Some(0),
        DataType::Short => Some(1),
        DataType::Integer => Some(2),
        DataType::Long => Some(3),
        DataType::Float => Some(5),
        DataType::Double => Some(6),
        _ => None,
    }
}

/// Widening of two leaf types; anything without a common type becomes STRING.
pub fn merge_leaf(a: DataType, b: DataType) -> DataType {
    use DataType::{Date, Decimal, Double, String, Timestamp};
    if a == b {
        return a;
    }
    match (&a, &b) {
        (Date, Timestamp) | (Timestamp, Date) => Timestamp,
        (Decimal(..), Double | DataType::Float) | (Double | DataType::Float, Decimal(..)) => Double,
        (Decimal(..), _) | (_, Decimal(..)) => match (integral_digits(&a), integral_digits(&b)) {
            (Some((p1, s1)), Some((p2, s2))) => {
                let scale = s1.max(s2);
                let range = (i16::from(p1) - i16::from(s1)).max(i16::from(p2) - i16::from(s2));
                let precision = range + i16::from(scale);
                if precision <= 38 {
                    Decimal(u8::try_from(precision).unwrap_or(38), scale)
                } else {
                    Double
                }
            }
            _ => String,
        },
        _ => match (numeric_rank(&a), numeric_rank(&b)) {
            (Some(x), Some(y)) => {
                if x.max(y) >= 5 {
                    Double
                } else if x > y {
                    a
                } else {
                    b
                }
            }
            _ => String,
        },
    }
}

/// Merges one observation into an accumulated type, in place.
fn merge_into(acc: &mut Inferred, t: Inferred) {
    // The common case, a value of the type already seen, changes nothing.
    if let (Inferred::Leaf(a), Inferred::Leaf(b)) = (&*acc, &t)
        && a == b
    {
        return;
    }
    let old = std::mem::replace(acc, Inferred::Null);
    *acc = old.merge(t);
}

/// Observes one parsed JSON value into an accumulated type, in place: the same rules as
/// [`Inferred::of_json`] followed by [`Inferred::merge`], without building the value's
/// own type first. `depth` is the value's nesting level (top-level columns are 1).
fn observe(acc: &mut Inferred, v: &JsonValue<'_>, opts: InferOptions, depth: usize) {
    let leaf = |acc: &mut Inferred, t: DataType| {
        let t = if opts.typed { t } else { DataType::String };
        merge_into(acc, Inferred::Leaf(t));
    };
    if unchanged_by(acc, v, opts) {
        return;
    }
    if opts.xml
        && !matches!(v, JsonValue::Array(_) | JsonValue::Null)
        && let Inferred::Array(element) = acc
    {
        observe(element, v, opts, depth + 1);
        return;
    }
    match v {
        JsonValue::Null => {}
        JsonValue::Object(_) | JsonValue::Array(_) if depth > opts.max_depth => {
            merge_into(acc, Inferred::Leaf(DataType::String));
        }
        JsonValue::Object(entries) => {
            match acc {
                Inferred::Null => *acc = Inferred::Struct(Vec::with_capacity(entries.len())),
                Inferred::Struct(_) => {}
                // A conflict makes it STRING whatever the contents.
                other => {
                    *other = Inferred::Leaf(DataType::String);
                    return;
                }
            }
            let Inferred::Struct(fields) = acc else {
                unreachable!("set above")
            };
            observe_entries(fields, entries, opts, depth + 1);
        }
        JsonValue::Array(items) => {
            match acc {
                Inferred::Null => *acc = Inferred::Array(Box::new(Inferred::Null)),
                Inferred::Array(_) => {}
                _ if opts.xml => {
                    let single = std::mem::replace(acc, Inferred::Null);
                    *acc = Inferred::Array(Box::new(single));
                }
                other => {
                    *other = Inferred::Leaf(DataType::String);
                    return;
                }
            }
            let Inferred::Array(element) = acc else {
                unreachable!("set above")
            };
            for item in items.iter() {
                observe(element, item, opts, depth + 1);
            }
        }
        JsonValue::Bool(_) | JsonValue::Number(_) if opts.primitives_as_string => {
            leaf(acc, DataType::String);
        }
        JsonValue::Bool(_) => leaf(acc, DataType::Boolean),
        JsonValue::Number(text) => leaf(acc, number_type(text, opts)),
        JsonValue::String("") => {}
        JsonValue::String(s) if !opts.typed => leaf(acc, DataType::String),
        JsonValue::String(s) => leaf(acc, string_type(s, opts)),
    }
}

/// Whether observing `v` leaves `acc` as it is (the fast paths of [`observe`]): STRING
/// absorbs every observation, DOUBLE every number, BIGINT an integer of up to 18 digits
/// (always in range: `number_type`'s parse, skipped), and a null or an empty string is
/// no observation. Types only widen, so a value that leaves a field as it is leaves it
/// so whatever the record's other values do to it.
#[inline]
fn unchanged_by(acc: &Inferred, v: &JsonValue<'_>, opts: InferOptions) -> bool {
    match (acc, v) {
        (Inferred::Leaf(DataType::String), JsonValue::Array(_)) if opts.xml => false,
        (_, JsonValue::Null) => true,
        (_, JsonValue::String(s)) if s.is_empty() && !opts.xml => true,
        (Inferred::Leaf(DataType::String), _)
        | (Inferred::Leaf(DataType::Double), JsonValue::Number(_)) => true,
        (Inferred::Leaf(DataType::Long), JsonValue::Number(text)) => {
            opts.typed
                && !opts.primitives_as_string
                && crate::parse::json::short_integer(text).is_some()
        }
        _ => false,
    }
}

/// The field named `key` among `fields`: looked for at `guess` first (records tend to
/// repeat their key order) and right after it (a record without an optional key), then
/// by name, then case-insensitively. Inlined: it runs for every key of every record
/// observed, and is mostly one key comparison. (An exact match is the only
/// case-insensitive one: fields are merged case-insensitively, so no two differ only in
/// case.)
#[inline]
fn field_index(fields: &[(String, Inferred)], key: &str, guess: usize) -> Option<usize> {
    let named_at = |i: usize| matches!(fields.get(i), Some((n, _)) if same_key(n, key));
    if named_at(guess) {
        Some(guess)
    } else if named_at(guess + 1) {
        Some(guess + 1)
    } else {
        fields
            .iter()
            .position(|(n, _)| same_key(n, key))
            .or_else(|| fields.iter().position(|(n, _)| n.eq_ignore_ascii_case(key)))
    }
}

/// Observes an object's entries into the fields seen so far (names matched
/// case-insensitively, first spelling wins; new names appended in order). Records tend to
/// repeat their key order, so each key is first looked for right after the previous one.
fn observe_entries(
    fields: &mut Vec<(String, Inferred)>,
    entries: &[(&str, JsonValue<'_>)],
    opts: InferOptions,
    depth: usize,
) {
    let mut guess = 0;
    for (k, v) in entries {
        let idx = field_index(fields, k, guess).unwrap_or_else(|| {
            fields.push((k.to_string(), Inferred::Null));
            fields.len() - 1
        });
        // Most values leave their field as it is: checked here, without a call.
        let acc = &mut fields[idx].1;
        if !unchanged_by(acc, v, opts) {
            observe(acc, v, opts, depth);
        }
        guess = idx + 1;
    }
}

/// Accumulates observations of top-level columns, in first-seen order.
#[derive(Debug, Default, Clone)]
pub struct SchemaInferrer {
    fields: Vec<(String, Inferred)>,
    /// Records (JSON) or rows (CSV) observed.
    pub records: u64,
    /// XML: merges as [`InferOptions::xml`] says.
    pub xml: bool,
}

impl SchemaInferrer {
    pub fn new() -> Self {
        SchemaInferrer::default()
    }

    /// Observes one JSON record. A non-object record (a bare number or string) adds nothing:
    /// it is kept at read time as a corrupt record.
    pub fn add_json(&mut self, record: &Value, opts: InferOptions) {
        self.records += 1;
        if let Value::Object(map) = record {
            for (k, v) in map {
                merge_field(&mut self.fields, k, Inferred::of_json(v, opts));
            }
        }
    }

    /// Observes one JSON-lines record from its text, without building a value (the fast
    /// path of [`SchemaInferrer::add_json`]). A line that is not valid JSON, or not an object
    /// or array of objects, adds nothing and returns false.
    pub fn add_json_text(&mut self, line: &[u8], opts: InferOptions) -> bool {
        let arena = JsonArena::new();
        self.add_json_text_with(&arena, line, crate::parse::json::JsonDialect::SPARK, opts)
    }

    /// [`SchemaInferrer::add_json_text`] for a line of the given JSON dialect, its values
    /// parsed into `arena`.
    pub fn add_json_text_with(
        &mut self,
        arena: &JsonArena,
        line: &[u8],
        dialect: crate::parse::json::JsonDialect,
        opts: InferOptions,
    ) -> bool {
        if opts.xml {
            return self.add_text_parsed_whole(arena, line, dialect, opts);
        }
        // An object's entries as they are parsed: only those that would change what is
        // inferred are kept, and observed once the whole record proved valid (a record that
        // is not valid JSON adds nothing). Most records change nothing, so nothing is kept
        // and no value tree is built.
        let mut changing: Vec<(&str, JsonValue<'_>)> = Vec::new();
        let fields = &self.fields;
        let mut guess = 0;
        let walked = JsonValue::for_each_entry(arena, line, dialect, |key, value| {
            let idx = field_index(fields, key, guess);
            if let Some(i) = idx {
                guess = i + 1;
            }
            if !idx.is_some_and(|i| unchanged_by(&fields[i].1, &value, opts)) {
                changing.push((key, value));
            }
        });
        match walked {
            Ok(true) => {
                self.records += 1;
                observe_entries(&mut self.fields, &changing, opts, 1);
                true
            }
            Ok(false) => self.add_text_parsed_whole(arena, line, dialect, opts),
            Err(_) => false,
        }
    }

    /// [`SchemaInferrer::add_json_text_with`] through the whole value tree.
    fn add_text_parsed_whole(
        &mut self,
        arena: &JsonArena,
        line: &[u8],
        dialect: crate::parse::json::JsonDialect,
        opts: InferOptions,
    ) -> bool {
        match JsonValue::parse_with(arena, line, dialect) {
            Ok(v) => self.add_jv(&v, opts),
            Err(_) => false,
        }
    }

    /// Observes one parsed JSON-lines record: an object, or an array whose object elements
    /// are records (as the decoder reads such a line). Returns false for anything else.
    /// Decoding calls this on the values it parses, so the first batch can be read and
    /// inferred in one pass.
    pub fn add_jv(&mut self, v: &JsonValue<'_>, opts: InferOptions) -> bool {
        match v {
            JsonValue::Object(entries) => {
                self.records += 1;
                observe_entries(&mut self.fields, entries, opts, 1);
                true
            }
            JsonValue::Array(items) => {
                for item in items.iter() {
                    if let JsonValue::Object(entries) = item {
                        self.records += 1;
                        observe_entries(&mut self.fields, entries, opts, 1);
                    }
                }
                true
            }
            _ => false,
        }
    }

    /// Observes a column's existence (a CSV header name) without a value.
    /// Registers a column and returns its index, for [`SchemaInferrer::add_typed_at`].
    pub fn add_column(&mut self, name: &str) -> usize {
        merge_field(&mut self.fields, name, Inferred::Null);
        self.fields
            .iter()
            .position(|(n, _)| n.eq_ignore_ascii_case(name))
            .expect("just added")
    }

    /// Observes one value of the column at `index` (from [`SchemaInferrer::add_column`]):
    /// CSV cells are positional, so the name lookup is done once per file, not per cell.
    pub fn add_typed_at(&mut self, index: usize, t: Inferred) {
        let existing = &mut self.fields[index].1;
        let old = std::mem::replace(existing, Inferred::Null);
        *existing = old.merge(t);
    }

    /// Whether the column at `index` is STRING already, which absorbs every observation
    /// (so the caller can skip typing the value).
    pub fn is_string_at(&self, index: usize) -> bool {
        matches!(self.fields[index].1, Inferred::Leaf(DataType::String))
    }

    /// Observes one column value of known type (CSV cells, Parquet columns).
    pub fn add_typed(&mut self, name: &str, t: Inferred) {
        merge_field(&mut self.fields, name, t);
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Folds another inferrer's observations in (files inferred in parallel, merged in order).
    pub fn merge(&mut self, other: SchemaInferrer) {
        self.records += other.records;
        self.xml |= other.xml;
        for (name, t) in other.fields {
            merge_field_as(&mut self.fields, &name, t, self.xml);
        }
    }

    pub fn finish(self) -> Schema {
        Schema::new(
            self.fields
                .into_iter()
                .map(|(n, t)| Field::new(n, t.finish()))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TYPED: InferOptions = InferOptions::new(true);
    const UNTYPED: InferOptions = InferOptions::new(false);

    fn infer(values: &[Value], opts: InferOptions) -> DataType {
        values
            .iter()
            .map(|v| Inferred::of_json(v, opts))
            .fold(Inferred::Null, Inferred::merge)
            .finish()
    }

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn nesting_beyond_the_limit_is_one_string_column() {
        let opts = InferOptions {
            max_depth: 1,
            ..TYPED
        };
        let line = r#"{"a": {"b": {"c": 1}}, "d": [[1]], "e": {"f": 1}}"#;
        let mut by_text = SchemaInferrer::new();
        by_text.add_json_text(line.as_bytes(), opts);
        let mut by_value = SchemaInferrer::new();
        by_value.add_json(&serde_json::from_str(line).unwrap(), opts);
        let expected = "a STRUCT<b: STRING>, d ARRAY<STRING>, e STRUCT<f: BIGINT>";
        assert_eq!(by_text.finish().to_string(), expected);
        assert_eq!(by_value.finish().to_string(), expected);
    }

    /// The fast text path infers exactly what the value path does.
    #[test]
    fn text_path_matches_value_path() {
        let lines = [
            r#"{"a": 1, "b": {"c": true, "d": [1, 2.5]}, "e": "2026-03-15T14:00:00Z", "f": null}"#,
            r#"{"a": 92233720368547758070, "b": {"c": "x", "g": {}}, "e": "", "h": [[1], ["s"]]}"#,
            r#"{"A": 1.5, "b": null, "i": [], "j": {"k": [{"l": 1}, {"m": "n"}]}}"#,
            r#"[{"z": 1}, {"z": 2.5}, 3]"#,
            r#"{"broken": "#,
            r#"17"#,
            r#"{"a": "text", "b": [1]}"#,
        ];
        for opts in [TYPED, UNTYPED] {
            let mut by_value = SchemaInferrer::new();
            let mut by_text = SchemaInferrer::new();
            for line in lines {
                if let Ok(v) = serde_json::from_str::<Value>(line) {
                    match v {
                        Value::Array(items) => {
                            for i in items.into_iter().filter(Value::is_object) {
                                by_value.add_json(&i, opts);
                            }
                        }
                        v @ Value::Object(_) => by_value.add_json(&v, opts),
                        _ => {}
                    }
                }
                by_text.add_json_text(line.as_bytes(), opts);
            }
            assert_eq!(by_text.records, by_value.records);
            assert_eq!(by_text.finish(), by_value.finish(), "typed={}", opts.typed);
        }
    }

    /// Observing a record entry by entry, keeping only what changes the schema, infers
    /// what observing its whole value tree does, after every record: random records of
    /// keys in any order and case, each key's values of one kind mostly (so types widen
    /// step by step rather than all turning STRING at once), now and then any value, and
    /// mutated, invalid and non-object lines among them.
    #[test]
    fn entries_observed_as_parsed_infer_as_the_whole_record_does() {
        let arena = JsonArena::new();
        let kinds: [(&[&str], &[&str]); 6] = [
            (
                &["id", "ID"],
                &[
                    "1",
                    "-7",
                    "123456789012345678",
                    "12345678901234567890",
                    "2.5",
                    "1e3",
                    "null",
                ],
            ),
            (
                &["at"],
                &["\"2024-01-02\"", "\"2024-01-02T03:04:05Z\"", "\"\"", "null"],
            ),
            (
                &["tags"],
                &["[]", "[1, 2]", "[1.5, null]", "[null]", "[[1]]"],
            ),
            (
                &["nested"],
                &[
                    "{}",
                    "{\"a\": 1}",
                    "{\"a\": 2.5, \"b\": [1]}",
                    "{\"b\": [], \"A\": null}",
                ],
            ),
            (&["flag"], &["true", "false", "null"]),
            (
                &["name", "Name", "amount"],
                &["\"x\"", "\"3.25\"", "7", "\"\""],
            ),
        ];
        let any: Vec<&str> = kinds.iter().flat_map(|(_, v)| v.iter().copied()).collect();
        let mut next = crate::testing::xorshift(0x5DEE_CE66_D1CE_5EEDu64);
        for round in 0..400 {
            let opts = InferOptions {
                typed: round % 5 != 0,
                prefers_decimal: round % 3 == 0,
                primitives_as_string: round % 7 == 0,
                max_depth: if round % 4 == 0 { 1 } else { 32 },
                ..TYPED
            };
            let (mut walked, mut whole) = (SchemaInferrer::new(), SchemaInferrer::new());
            for _ in 0..30 {
                let entries: Vec<String> = (0..next() % 6)
                    .map(|_| {
                        let (names, values) = kinds[(next() as usize) % kinds.len()];
                        let k = names[(next() as usize) % names.len()];
                        let v = if next().is_multiple_of(30) {
                            any[(next() as usize) % any.len()]
                        } else {
                            values[(next() as usize) % values.len()]
                        };
                        format!("\"{k}\": {v}")
                    })
                    .collect();
                let mut line = format!("{{{}}}", entries.join(", ")).into_bytes();
                match next() % 12 {
                    0 => {
                        let at = (next() as usize) % line.len();
                        line.remove(at);
                    }
                    1 => line = b"[{\"id\": 1.5}, {\"other\": true}]".to_vec(),
                    2 => line = b"  42 ".to_vec(),
                    _ => {}
                }
                let dialect = crate::parse::json::JsonDialect::SPARK;
                let shown = String::from_utf8_lossy(&line).into_owned();
                let a = walked.add_json_text_with(&arena, &line, dialect, opts);
                let b = whole.add_text_parsed_whole(&arena, &line, dialect, opts);
                assert_eq!(a, b, "{shown}");
                assert_eq!(walked.records, whole.records, "{shown}");
                assert_eq!(walked.fields, whole.fields, "round {round}: {shown}");
            }
        }
    }

    /// A column already BIGINT skips the parse of a short integer: each number after a
    /// first `1` infers what the parse of it merged with BIGINT gives, on both paths.
    #[test]
    fn short_integers_after_a_bigint_infer_as_their_parse_does() {
        let numbers = [
            "0",
            "-0",
            "7",
            "-123456789012345678",
            "123456789012345678",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775809",
            "1234567890123456789012",
            "1.0",
            "1e3",
            "-2E-2",
            "0.5",
        ];
        for text in numbers {
            let opts = InferOptions {
                prefers_decimal: text.len() % 2 == 0,
                ..TYPED
            };
            let expected = merge_leaf(DataType::Long, number_type(text, opts));
            if crate::parse::json::short_integer(text).is_some() {
                assert_eq!(number_type(text, opts), DataType::Long, "{text}");
            }
            let mut by_text = SchemaInferrer::new();
            for line in [r#"{"n": 1}"#.to_string(), format!(r#"{{"n": {text}}}"#)] {
                by_text.add_json_text(line.as_bytes(), opts);
            }
            assert_eq!(
                by_text.finish().to_string(),
                format!("n {}", Inferred::Leaf(expected).finish()),
                "{text}"
            );
        }
        let short = crate::parse::json::short_integer;
        assert_eq!(short("-123456789012345678"), Some(-123_456_789_012_345_678));
        assert_eq!((short("-0"), short("907")), (Some(0), Some(907)));
        for other in [
            "-",
            "",
            "1234567890123456789",
            "1.0",
            "1e3",
            "NaN",
            "+1",
            "1-",
        ] {
            assert_eq!(short(other), None, "{other}");
        }
    }

    #[test]
    fn untyped_keeps_structure_with_string_leaves() {
        let mut inf = SchemaInferrer::new();
        inf.add_json(&json!({"a": 1, "b": {"c": true}, "d": [1, 2]}), UNTYPED);
        assert_eq!(
            inf.finish().to_string(),
            "a STRING, b STRUCT<c: STRING>, d ARRAY<STRING>"
        );
    }

    #[test]
    fn spark_json_cases() {
        // Cases from autoloader-semantics.md §2.4.
        let s = |t: &[&str]| infer(&t.iter().map(|x| parse(x)).collect::<Vec<_>>(), TYPED);
        assert_eq!(s(&["10"]), DataType::Long);
        assert_eq!(s(&["21474836470"]), DataType::Long);
        assert_eq!(s(&["92233720368547758070"]), DataType::Decimal(20, 0));
        assert_eq!(s(&["1.7976931348623157"]), DataType::Double);
        assert_eq!(s(&["true"]), DataType::Boolean);
        assert_eq!(s(&["null"]), DataType::String);
        // Spark says DOUBLE for an integer of 39+ digits, which cannot hold its digits (every
        // value was rescued, the column all null): STRING keeps them (README, inference).
        assert_eq!(
            s(&["100000000000000000000000000000000000000"]),
            DataType::String
        );
        assert_eq!(
            s(&["1", "-123456789012345678901234567890123456789"]),
            DataType::String
        );
        assert_eq!(
            s(&["99999999999999999999999999999999999999"]),
            DataType::Decimal(38, 0)
        );
        assert_eq!(s(&["11", "null", "21474836470"]), DataType::Long);
        assert_eq!(
            s(&["null", "21474836470.9", "92233720368547758070", "1.1"]),
            DataType::Double
        );
        assert_eq!(s(&["1.1", "null", "100", "21474836470"]), DataType::Double);
        assert_eq!(s(&["true", "12", "false"]), DataType::String);
        assert_eq!(s(&["13.1", "\"str1\""]), DataType::String);
        assert_eq!(s(&["11", "{\"field\":false}"]), DataType::String);
        assert_eq!(
            s(&["[]", "null", "[4,5,6]"]),
            DataType::Array(Box::new(DataType::Long))
        );
        assert_eq!(s(&["[]", "{}", "[7]"]), DataType::String);
        assert_eq!(
            s(&["{}", "null", "{\"field\":null}", "{\"field\":\"str\"}"]),
            DataType::Struct(vec![Field::new("field", DataType::String)])
        );
        assert_eq!(
            s(&["[1, 1.1, true, null, [], {}]"]),
            DataType::Array(Box::new(DataType::String))
        );
        assert_eq!(
            s(&["[[1,2,3],[1.1,2.1,3.1]]"]),
            DataType::Array(Box::new(DataType::Array(Box::new(DataType::Double))))
        );
        assert_eq!(
            s(&["[null,null]"]),
            DataType::Array(Box::new(DataType::String))
        );
        assert_eq!(s(&["\"2026-03-15T14:00:00Z\""]), DataType::Timestamp);
        assert_eq!(s(&["\"2026-03-15\""]), DataType::String);
        // Spark's default pattern needs seconds and upper-case `T` and `Z` (issue 36.15).
        assert_eq!(s(&["\"2024-01-15T10:30\""]), DataType::String);
        assert_eq!(s(&["\"2024-01-15t10:30:00Z\""]), DataType::String);
        assert_eq!(s(&["\"2024-01-15T10:30:00z\""]), DataType::String);
        assert_eq!(s(&["\"2024-01-15T10:30:00.5+09:00\""]), DataType::Timestamp);
    }

    #[test]
    fn primitives_as_string_and_prefers_decimal() {
        let text = |lines: &[&str], opts: InferOptions| {
            let mut inf = SchemaInferrer::new();
            for line in lines {
                inf.add_json_text(line.as_bytes(), opts);
            }
            inf.finish().to_string()
        };
        let prim = InferOptions {
            primitives_as_string: true,
            ..TYPED
        };
        let line = r#"{"a": 1, "b": 1.5, "c": true, "d": {"e": 2}, "f": [3], "g": "2026-03-15T14:00:00Z"}"#;
        assert_eq!(
            text(&[line], prim),
            "a STRING, b STRING, c STRING, d STRUCT<e: STRING>, f ARRAY<STRING>, g TIMESTAMP"
        );
        let dec = InferOptions {
            prefers_decimal: true,
            ..TYPED
        };
        assert_eq!(
            text(&[r#"{"a": 1.7976931348623157}"#], dec),
            "a DECIMAL(17,16)"
        );
        assert_eq!(
            text(&[r#"{"a": 3}"#, r#"{"a": 3.1}"#], dec),
            "a DECIMAL(21,1)"
        );
        let tiny = format!("{{\"a\": 0.{}1}}", "0".repeat(38));
        assert_eq!(text(&[r#"{"a": 1.1}"#, &tiny], dec), "a DOUBLE");
        assert_eq!(
            text(&[r#"{"b": 0.01}"#, r#"{"b": 92233720368547758070}"#], dec),
            "b DECIMAL(22,2)"
        );
        assert_eq!(
            text(&[r#"{"s": "20181202.210400123"}"#], dec),
            "s DECIMAL(17,9)"
        );
        assert_eq!(text(&[r#"{"a": 1.5}"#], TYPED), "a DOUBLE");
        // The value path agrees.
        let mut by_value = SchemaInferrer::new();
        by_value.add_json(&json!({"a": 1.7976931348623157, "c": true}), dec);
        by_value.add_json(&json!({"c": 1}), prim);
        assert_eq!(by_value.finish().to_string(), "a DECIMAL(17,16), c STRING");
    }

    /// `{}` in every record: a STRING column holding `{}` (Spark drops the field; we keep
    /// the value rather than lose it, see README "What lands in the table").
    #[test]
    fn always_empty_objects_are_a_string_column() {
        let mut inf = SchemaInferrer::new();
        inf.add_json_text(br#"{"a": {}, "b": 1}"#, TYPED);
        inf.add_json_text(br#"{"a": {}, "b": 2}"#, TYPED);
        assert_eq!(inf.finish().to_string(), "a STRING, b BIGINT");
    }

    #[test]
    fn non_numeric_numbers_infer_double() {
        let arena = JsonArena::new();
        let mut inf = SchemaInferrer::new();
        inf.add_jv(
            &JsonValue::parse_with(
                &arena,
                br#"{"a": NaN, "b": -INF, "c": 1, "d": Infinity}"#,
                crate::parse::json::JsonDialect::SPARK,
            )
            .unwrap(),
            TYPED,
        );
        inf.add_json_text(br#"{"c": 1.5}"#, TYPED);
        assert_eq!(
            inf.finish().to_string(),
            "a DOUBLE, b DOUBLE, c DOUBLE, d DOUBLE"
        );
    }

    #[test]
    fn seed_orders_infer_as_documented() {
        let mut inf = SchemaInferrer::new();
        inf.add_json(
            &json!({"order_id": 123, "amount": 5000.5, "order_date": "2025-03-15T14:00:00"}),
            TYPED,
        );
        assert_eq!(
            inf.finish().to_string(),
            "order_id BIGINT, amount DOUBLE, order_date TIMESTAMP"
        );
    }

    #[test]
    fn csv_cells_follow_spark() {
        let s = |cells: &[&str]| {
            cells
                .iter()
                .map(|c| Inferred::of_csv(c, TYPED))
                .fold(Inferred::Null, Inferred::merge)
                .finish()
        };
        assert_eq!(s(&["60"]), DataType::Integer);
        assert_eq!(s(&["100000000000"]), DataType::Long);
        assert_eq!(s(&["3.5"]), DataType::Double);
        assert_eq!(s(&["test"]), DataType::String);
        assert_eq!(s(&["True", "FAlSE"]), DataType::Boolean);
        assert_eq!(s(&["2015-08-20 15:57:00"]), DataType::Timestamp);
        assert_eq!(s(&["92233720368547758070"]), DataType::Decimal(20, 0));
        assert_eq!(s(&["1", "1.0"]), DataType::Double);
        assert_eq!(s(&["1", "test"]), DataType::String);
        assert_eq!(s(&["1", "2015-08-20 14:57:00"]), DataType::String);
        assert_eq!(s(&["1", "True"]), DataType::String);
        assert_eq!(s(&["NaN", "Inf", "-Inf"]), DataType::Double);
        assert_eq!(s(&["2018-12-03"]), DataType::Date);
        assert_eq!(
            s(&["2018-12-03", "2018-12-03T11:00:00"]),
            DataType::Timestamp
        );
        assert_eq!(s(&["00123"]), DataType::Integer);
        assert_eq!(s(&["2024-01-15 10:30"]), DataType::String);
        assert_eq!(s(&["2024-01-15T10:30:00z"]), DataType::String);
    }

    #[test]
    fn widening_table() {
        use DataType::*;
        assert_eq!(merge_leaf(Integer, Long), Long);
        assert_eq!(merge_leaf(Long, Double), Double);
        assert_eq!(merge_leaf(Long, Decimal(38, 18)), Decimal(38, 18));
        assert_eq!(merge_leaf(Double, Decimal(38, 18)), Double);
        assert_eq!(merge_leaf(Boolean, Long), String);
        assert_eq!(merge_leaf(Long, Decimal(22, 2)), Decimal(22, 2));
        assert_eq!(merge_leaf(Decimal(20, 0), Decimal(2, 2)), Decimal(22, 2));
    }

    #[test]
    fn xml_singletons_merge_into_arrays_json_ones_do_not() {
        let arena = JsonArena::new();
        let xml = InferOptions { xml: true, ..TYPED };
        let one = JsonValue::parse(&arena, br#"{"a": 1, "s": {"t": "x"}}"#).unwrap();
        let many = JsonValue::parse(
            &arena,
            br#"{"a": [2, 3], "s": [{"t": "y"}, {"t": "z", "u": true}]}"#,
        )
        .unwrap();
        for order in [[&one, &many], [&many, &one]] {
            let mut inf = SchemaInferrer::new();
            for v in order {
                inf.add_jv(v, xml);
            }
            assert_eq!(
                inf.finish().to_string(),
                "a ARRAY<BIGINT>, s ARRAY<STRUCT<t: STRING, u: BOOLEAN>>"
            );
        }
        // Files inferred apart merge the same way.
        let (mut a, mut b) = (SchemaInferrer::new(), SchemaInferrer::new());
        a.xml = true;
        a.add_jv(&one, xml);
        b.add_jv(&many, xml);
        let mut merged = SchemaInferrer::new();
        merged.merge(a);
        merged.merge(b);
        assert!(merged.finish().to_string().starts_with("a ARRAY<BIGINT>"));
        let mut json = SchemaInferrer::new();
        json.add_jv(&one, TYPED);
        json.add_jv(&many, TYPED);
        assert!(json.finish().to_string().starts_with("a STRING"));
    }

    #[test]
    fn each_key_is_observed_into_its_own_field_whatever_the_order() {
        let arena = JsonArena::new();
        // A key's field is guessed from the previous key's: every way the guess can miss
        // (an optional key left out, keys in another order, another letter case, a new
        // key) still finds the key's own field. No two fields' types merge into either
        // one, so a value observed into another key's field would change the schema.
        let lines: [&[u8]; 5] = [
            br#"{"id": 1, "opt": true, "amounts": [1.5], "meta": {"x": 1}}"#,
            br#"{"id": 2, "amounts": [2.5], "meta": {"x": 2}}"#,
            br#"{"meta": {"x": 3}, "id": 3, "amounts": [3.5]}"#,
            br#"{"ID": 4, "Amounts": [4.5], "new": [true], "opt": false}"#,
            br#"{"id": 5, "opt": true, "amounts": [5.5], "new": [false], "meta": null}"#,
        ];
        let mut inf = SchemaInferrer::new();
        for line in lines {
            inf.add_jv(&JsonValue::parse(&arena, line).unwrap(), TYPED);
        }
        assert_eq!(
            inf.finish().to_string(),
            "id BIGINT, opt BOOLEAN, amounts ARRAY<DOUBLE>, meta STRUCT<x: BIGINT>, \
             new ARRAY<BOOLEAN>"
        );
    }

    #[test]
    fn names_merge_case_insensitively_first_spelling_wins() {
        let mut inf = SchemaInferrer::new();
        inf.add_json(&json!({"abc": 1}), TYPED);
        inf.add_json(&json!({"Abc": 2, "z": 1}), TYPED);
        assert_eq!(inf.finish().to_string(), "abc BIGINT, z BIGINT");
    }
}
