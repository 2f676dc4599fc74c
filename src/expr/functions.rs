//! The Spark SQL functions a select list may call, each with Spark's semantics (ANSI mode,
//! Spark 4's default): a value that cannot be read (`to_date('x')`) stops the flow naming
//! the row, and its `try_` form gives NULL instead. `value.rs` checks names and arguments
//! and casts the arguments to the types given here; this file computes over arrays.
//!
//! Forms the binder handles itself (`CAST`, `CASE`, `COALESCE`, `NULLIF`, operators,
//! `current_timestamp()`) are not here.

use std::sync::Arc;

use arrow_array::builder::{Int32Builder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, TimestampMicrosecondType};
use arrow_array::{Array, ArrayRef, Date32Array, StringArray, TimestampMicrosecondArray};
use arrow_schema::{DataType as ArrowType, TimeUnit};
use chrono::{Datelike, TimeZone};
use chrono_tz::Tz;
use serde_json::Value as Json;

use crate::parse::scalars;
use crate::parse::temporal::{Pattern, Temporal};

/// The names a select list may call, for the docs and for the error naming an unknown one.
pub const NAMES: &[&str] = &[
    "coalesce",
    "concat",
    "concat_ws",
    "current_date",
    "current_timestamp",
    "date_format",
    "get_json_object",
    "ifnull",
    "length",
    "lower",
    "ltrim",
    "now",
    "nullif",
    "nvl",
    "rtrim",
    "to_date",
    "to_timestamp",
    "trim",
    "try_cast",
    "try_to_timestamp",
    "upper",
];

/// Other spellings Spark accepts for some of [`NAMES`].
const ALIASES: &[&str] = &[
    "char_length",
    "character_length",
    "curdate",
    "isnotnull",
    "isnull",
    "lcase",
    "ucase",
];

/// Whether `name` (lower case) is a function a flow computes with.
pub(super) fn is_known(name: &str) -> bool {
    NAMES.contains(&name) || ALIASES.contains(&name)
}

/// Names that need a query engine (aggregates, windows, generators): not planned.
const NEEDS_A_QUERY_ENGINE: &[&str] = &[
    "avg",
    "collect_list",
    "collect_set",
    "count",
    "dense_rank",
    "explode",
    "first",
    "lag",
    "last",
    "lead",
    "max",
    "min",
    "posexplode",
    "rank",
    "row_number",
    "sum",
];

/// Why a name is not a function here, for the binder's error.
pub(super) fn unknown(name: &str) -> String {
    if NEEDS_A_QUERY_ENGINE.contains(&name) {
        format!(
            "{name}() aggregates or looks across rows, which needs a query engine: a flow \
             computes each row from that row alone (materialized views are not planned)"
        )
    } else {
        format!(
            "unknown function {name}() (the functions a flow computes with: {})",
            NAMES.join(", ")
        )
    }
}

/// A function bound to its arguments' types.
#[derive(Debug, Clone)]
pub(super) enum Function {
    Lower,
    Upper,
    Trim,
    LTrim,
    RTrim,
    Length,
    Concat,
    ConcatWs(String),
    GetJsonObject(Vec<JsonStep>),
    ToDate(Option<Pattern>),
    ToTimestamp {
        pattern: Option<Pattern>,
        safe: bool,
    },
    DateFormat(&'static str),
}

/// What a function's arguments are cast to before it runs, and what it returns.
pub(super) struct Signature {
    pub(super) function: Function,
    pub(super) arguments: Vec<ArrowType>,
    pub(super) returns: ArrowType,
}

/// Why a row has no value, as [`Function::evaluate`] reports it.
pub(super) struct Failure {
    pub(super) row: Option<usize>,
    pub(super) message: String,
}

/// One step of a `get_json_object` path: a field or an array element.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum JsonStep {
    Field(String),
    Element(usize),
}

/// The timestamp type of every table (Spark's TIMESTAMP).
pub(super) fn timestamp_type() -> ArrowType {
    ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// The signature of `name` for arguments of `types`; `literals` holds each argument's text
/// when it is a string literal (patterns and paths must be).
pub(super) fn resolve(
    name: &str,
    types: &[ArrowType],
    literals: &[Option<String>],
) -> Result<Signature, String> {
    let arity = |range: std::ops::RangeInclusive<usize>| {
        if range.contains(&types.len()) {
            Ok(())
        } else if range.start() == range.end() {
            Err(format!(
                "{name}() takes {} argument{}, not {}",
                range.start(),
                if *range.start() == 1 { "" } else { "s" },
                types.len()
            ))
        } else {
            Err(format!(
                "{name}() takes {} to {} arguments, not {}",
                range.start(),
                range.end(),
                types.len()
            ))
        }
    };
    let literal = |i: usize, what: &str| {
        literals[i]
            .clone()
            .ok_or_else(|| format!("{name}()'s {what} must be a string literal"))
    };
    let pattern = |i: usize| -> Result<Option<Pattern>, String> {
        if types.len() <= i {
            return Ok(None);
        }
        let text = literal(i, "format")?;
        Pattern::new(&text)
            .map(Some)
            .map_err(|e| format!("{name}(): {e}"))
    };
    let text = |n: usize| vec![ArrowType::Utf8; n];
    let simple = |function: Function, returns: ArrowType| -> Result<Signature, String> {
        arity(1..=1)?;
        Ok(Signature {
            function,
            arguments: text(1),
            returns,
        })
    };
    match name {
        "lower" | "lcase" => simple(Function::Lower, ArrowType::Utf8),
        "upper" | "ucase" => simple(Function::Upper, ArrowType::Utf8),
        "trim" => simple(Function::Trim, ArrowType::Utf8),
        "ltrim" => simple(Function::LTrim, ArrowType::Utf8),
        "rtrim" => simple(Function::RTrim, ArrowType::Utf8),
        "length" | "char_length" | "character_length" => simple(Function::Length, ArrowType::Int32),
        "concat" => {
            if types.is_empty() {
                return Err("concat() takes at least one argument".into());
            }
            Ok(Signature {
                function: Function::Concat,
                arguments: text(types.len()),
                returns: ArrowType::Utf8,
            })
        }
        "concat_ws" => {
            if types.len() < 2 {
                return Err("concat_ws() takes a separator and at least one value".into());
            }
            let separator = literal(0, "separator")?;
            let mut arguments = text(types.len());
            arguments[0] = ArrowType::Null;
            Ok(Signature {
                function: Function::ConcatWs(separator),
                arguments,
                returns: ArrowType::Utf8,
            })
        }
        "get_json_object" => {
            arity(2..=2)?;
            let path = json_path(&literal(1, "path")?)?;
            Ok(Signature {
                function: Function::GetJsonObject(path),
                arguments: vec![ArrowType::Utf8, ArrowType::Null],
                returns: ArrowType::Utf8,
            })
        }
        "to_date" => {
            arity(1..=2)?;
            let input = temporal_input(&types[0]);
            Ok(Signature {
                function: Function::ToDate(pattern(1)?),
                arguments: vec![input, ArrowType::Null],
                returns: ArrowType::Date32,
            })
        }
        "to_timestamp" | "try_to_timestamp" => {
            arity(1..=2)?;
            let input = temporal_input(&types[0]);
            Ok(Signature {
                function: Function::ToTimestamp {
                    pattern: pattern(1)?,
                    safe: name == "try_to_timestamp",
                },
                arguments: vec![input, ArrowType::Null],
                returns: timestamp_type(),
            })
        }
        "date_format" => {
            arity(2..=2)?;
            let format = pattern(1)?
                .and_then(|p| p.chrono_formats().next())
                .unwrap_or("%Y-%m-%d");
            let input = match &types[0] {
                ArrowType::Date32 => ArrowType::Date32,
                _ => timestamp_type(),
            };
            Ok(Signature {
                function: Function::DateFormat(format),
                arguments: vec![input, ArrowType::Null],
                returns: ArrowType::Utf8,
            })
        }
        other => Err(unknown(other)),
    }
}

/// What `to_date`/`to_timestamp` read: dates and timestamps as they are, anything else as
/// text.
fn temporal_input(t: &ArrowType) -> ArrowType {
    match t {
        ArrowType::Date32 => ArrowType::Date32,
        ArrowType::Timestamp(..) => timestamp_type(),
        _ => ArrowType::Utf8,
    }
}

/// A JSONPath as `get_json_object` reads it: `$`, then `.field`, `['field']` or `[n]`.
fn json_path(path: &str) -> Result<Vec<JsonStep>, String> {
    let invalid = |why: &str| {
        format!(
            "get_json_object() path '{path}': {why} (a path is $ then .field, ['field'] or \
             [index])"
        )
    };
    let Some(mut rest) = path.strip_prefix('$') else {
        return Err(invalid("it does not start with $"));
    };
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let name = &after[..end];
            if name.is_empty() || name == "*" {
                return Err(invalid("a field name is missing or a wildcard"));
            }
            steps.push(JsonStep::Field(name.to_string()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("['") {
            let end = after.find("']").ok_or_else(|| invalid("an unclosed ['"))?;
            steps.push(JsonStep::Field(after[..end].to_string()));
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').ok_or_else(|| invalid("an unclosed ["))?;
            let index = after[..end]
                .trim()
                .parse()
                .map_err(|_| invalid("an index is not a number"))?;
            steps.push(JsonStep::Element(index));
            rest = &after[end + 1..];
        } else {
            return Err(invalid("unexpected text"));
        }
    }
    Ok(steps)
}

impl Function {
    /// Computes the function over arguments already cast to its signature's types (a
    /// literal argument the signature reads at bind time arrives as a null array).
    pub(super) fn evaluate(&self, args: &[ArrayRef], zone: Tz) -> Result<ArrayRef, Failure> {
        let rows = args.first().map_or(0, |a| a.len());
        let strings = |i: usize| args[i].as_string::<i32>();
        Ok(match self {
            Function::Lower => map_text(strings(0), |s| s.to_lowercase()),
            Function::Upper => map_text(strings(0), |s| s.to_uppercase()),
            Function::Trim => map_text(strings(0), |s| s.trim_matches(' ').to_string()),
            Function::LTrim => map_text(strings(0), |s| s.trim_start_matches(' ').to_string()),
            Function::RTrim => map_text(strings(0), |s| s.trim_end_matches(' ').to_string()),
            Function::Length => {
                let input = strings(0);
                let mut out = Int32Builder::with_capacity(rows);
                for v in input.iter() {
                    out.append_option(v.map(|s| s.chars().count() as i32));
                }
                Arc::new(out.finish())
            }
            Function::Concat => {
                let inputs: Vec<&StringArray> = (0..args.len()).map(strings).collect();
                let mut out = StringBuilder::with_capacity(rows, 0);
                for row in 0..rows {
                    if inputs.iter().any(|a| a.is_null(row)) {
                        out.append_null();
                    } else {
                        let joined: String = inputs.iter().map(|a| a.value(row)).collect();
                        out.append_value(joined);
                    }
                }
                Arc::new(out.finish())
            }
            Function::ConcatWs(separator) => {
                let inputs: Vec<&StringArray> = (1..args.len()).map(strings).collect();
                let mut out = StringBuilder::with_capacity(rows, 0);
                for row in 0..rows {
                    let parts: Vec<&str> = inputs
                        .iter()
                        .filter(|a| a.is_valid(row))
                        .map(|a| a.value(row))
                        .collect();
                    out.append_value(parts.join(separator));
                }
                Arc::new(out.finish())
            }
            Function::GetJsonObject(path) => {
                let input = strings(0);
                let mut out = StringBuilder::with_capacity(rows, 0);
                for v in input.iter() {
                    out.append_option(v.and_then(|text| json_at(text, path)));
                }
                Arc::new(out.finish())
            }
            Function::ToDate(pattern) => to_date(&args[0], *pattern, zone)?,
            Function::ToTimestamp { pattern, safe } => {
                to_timestamp(&args[0], *pattern, *safe, zone)?
            }
            Function::DateFormat(format) => {
                let micros: Vec<Option<i64>> = match args[0].data_type() {
                    ArrowType::Date32 => args[0]
                        .as_primitive::<Date32Type>()
                        .iter()
                        .map(|d| d.and_then(|d| midnight(d, zone)))
                        .collect(),
                    _ => args[0]
                        .as_primitive::<TimestampMicrosecondType>()
                        .iter()
                        .collect(),
                };
                let mut out = StringBuilder::with_capacity(rows, 0);
                for m in micros {
                    out.append_option(m.and_then(|m| {
                        let at = zone.timestamp_micros(m).single()?;
                        Some(at.format(format).to_string())
                    }));
                }
                Arc::new(out.finish())
            }
        })
    }
}

fn map_text(input: &StringArray, f: impl Fn(&str) -> String) -> ArrayRef {
    let mut out = StringBuilder::with_capacity(input.len(), input.value_data().len());
    for v in input.iter() {
        out.append_option(v.map(&f));
    }
    Arc::new(out.finish())
}

/// `get_json_object`: the value at `path` in `text`, a string as its text and anything
/// else as JSON; NULL when the text is not JSON, the path is absent or the value is null.
fn json_at(text: &str, path: &[JsonStep]) -> Option<String> {
    let root: Json = serde_json::from_str(text).ok()?;
    let mut at = &root;
    for step in path {
        at = match step {
            JsonStep::Field(name) => at.as_object()?.get(name)?,
            JsonStep::Element(i) => at.as_array()?.get(*i)?,
        };
    }
    match at {
        Json::Null => None,
        Json::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// Midnight of a day (days since the epoch) in `zone`, in microseconds.
pub(super) fn midnight(days: i32, zone: Tz) -> Option<i64> {
    let date = chrono::NaiveDate::from_num_days_from_ce_opt(
        days.checked_add(scalars::EPOCH_DAYS_FROM_CE)?,
    )?;
    scalars::to_utc_micros(date.and_hms_opt(0, 0, 0)?, None, zone)
}

/// The day (since the epoch) of an instant in `zone`.
pub(super) fn day_of(micros: i64, zone: Tz) -> Option<i32> {
    let local = zone.timestamp_micros(micros).single()?.date_naive();
    Some(local.num_days_from_ce() - scalars::EPOCH_DAYS_FROM_CE)
}

fn cannot_read(row: usize, value: &str, what: &str, try_form: &str) -> Failure {
    Failure {
        row: Some(row),
        message: format!("cannot read '{value}' as {what} ({try_form} gives NULL instead)"),
    }
}

fn to_date(input: &ArrayRef, pattern: Option<Pattern>, zone: Tz) -> Result<ArrayRef, Failure> {
    Ok(match input.data_type() {
        ArrowType::Date32 => Arc::clone(input),
        ArrowType::Timestamp(..) => Arc::new(Date32Array::from_iter(
            input
                .as_primitive::<TimestampMicrosecondType>()
                .iter()
                .map(|m| m.and_then(|m| day_of(m, zone))),
        )),
        _ => {
            let temporal = Temporal {
                timestamp: None,
                date: pattern,
            };
            let mut days = Vec::with_capacity(input.len());
            for (row, v) in input.as_string::<i32>().iter().enumerate() {
                days.push(match v {
                    None => None,
                    Some(text) => Some(
                        temporal
                            .parse_date(text)
                            .or_else(|| day_of(scalars::parse_timestamp(text, zone)?, zone))
                            .ok_or_else(|| {
                                cannot_read(row, text, "a DATE", "try_cast(... AS DATE)")
                            })?,
                    ),
                });
            }
            Arc::new(Date32Array::from(days))
        }
    })
}

fn to_timestamp(
    input: &ArrayRef,
    pattern: Option<Pattern>,
    safe: bool,
    zone: Tz,
) -> Result<ArrayRef, Failure> {
    let micros: Vec<Option<i64>> = match input.data_type() {
        ArrowType::Timestamp(..) => return Ok(Arc::clone(input)),
        ArrowType::Date32 => input
            .as_primitive::<Date32Type>()
            .iter()
            .map(|d| d.and_then(|d| midnight(d, zone)))
            .collect(),
        _ => {
            let temporal = Temporal {
                timestamp: pattern,
                date: None,
            };
            let mut out = Vec::with_capacity(input.len());
            for (row, v) in input.as_string::<i32>().iter().enumerate() {
                out.push(match v {
                    None => None,
                    Some(text) => match temporal.read_timestamp(text, zone) {
                        Some(m) => Some(m),
                        None if safe => None,
                        None => {
                            return Err(cannot_read(row, text, "a TIMESTAMP", "try_to_timestamp"));
                        }
                    },
                });
            }
            out
        }
    };
    Ok(Arc::new(
        TimestampMicrosecondArray::from(micros).with_timezone("UTC"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths_read_fields_and_elements() {
        let path = json_path("$.a['b c'][1].d").unwrap();
        assert_eq!(
            path,
            [
                JsonStep::Field("a".into()),
                JsonStep::Field("b c".into()),
                JsonStep::Element(1),
                JsonStep::Field("d".into())
            ]
        );
        let text = r#"{"a": {"b c": [0, {"d": "x"}]}, "n": 1.50, "o": {"k": [1, 2]}}"#;
        assert_eq!(json_at(text, &path).as_deref(), Some("x"));
        let at = |p: &str| json_at(text, &json_path(p).unwrap());
        assert_eq!(
            at("$.n").as_deref(),
            Some("1.50"),
            "a number keeps its text"
        );
        assert_eq!(at("$.o").as_deref(), Some(r#"{"k":[1,2]}"#));
        assert_eq!(at("$.missing"), None);
        assert_eq!(json_at("not json", &json_path("$.a").unwrap()), None);
        assert!(json_path("a.b").is_err());
        assert!(json_path("$.a[*]").is_err());
    }

    #[test]
    fn unknown_and_aggregate_names_say_why() {
        assert!(unknown("sum").contains("query engine"));
        assert!(unknown("frobnicate").contains("coalesce, concat"));
    }
}
