//! Parsers of option values (booleans, sizes, durations, instants, single characters),
//! each error naming the key and the value.

use crate::options::OptionsError;

use chrono_tz::Tz;

use crate::parse::scalars;

/// `\n`, `\r`, `\t` and `\uXXXX` written out in an option value, as the characters.
pub(crate) fn unescape(value: &str) -> String {
    let mut out = String::new();
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('u') => {
                chars.next();
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
                continue;
            }
            _ => {
                out.push(c);
                continue;
            }
        }
        chars.next();
    }
    out
}

pub(crate) fn invalid(key: &str, value: &str, reason: &str) -> OptionsError {
    OptionsError::Invalid {
        key: key.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

pub(crate) fn parse_bool(key: &str, value: &str) -> Result<bool, OptionsError> {
    scalars::parse_bool(value).ok_or_else(|| invalid(key, value, "expected true or false"))
}

pub(crate) fn single_byte(key: &str, value: Option<&str>, default: u8) -> Result<u8, OptionsError> {
    match value {
        None => Ok(default),
        Some("\\t") => Ok(b'\t'),
        Some(v) if v.len() == 1 => Ok(v.as_bytes()[0]),
        Some(v) => Err(invalid(key, v, "expected a single ASCII character")),
    }
}

/// Option pairs as given, in order (a later key wins).
pub type OptionPairs = Vec<(String, String)>;

/// Splits the pairs whose key starts with `prefix` (`cdc.`, `snapshot.`) off an option
/// list, the prefix removed; the rest keep their order.
pub fn split_prefixed(raw: OptionPairs, prefix: &str) -> (OptionPairs, OptionPairs) {
    let (prefixed, rest): (Vec<_>, Vec<_>) = raw
        .into_iter()
        .partition(|(k, _)| k.trim().starts_with(prefix));
    let prefixed = prefixed
        .into_iter()
        .map(|(k, v)| (k.trim()[prefix.len()..].to_string(), v))
        .collect();
    (rest, prefixed)
}

/// A count above zero (`cloudFiles.maxFilesPerTrigger`, the inference sample's files).
pub fn parse_positive(key: &str, value: &str) -> Result<usize, OptionsError> {
    value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| invalid(key, value, "expected a positive integer"))
}

/// Parses `10g`, `512m`, `64k`, `1024`, `10gb`, `1 GiB` (binary multiples).
pub fn parse_bytes(key: &str, value: &str) -> Result<u64, OptionsError> {
    let v = value.trim().to_ascii_lowercase().replace(' ', "");
    let digits_end = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(digits_end);
    let n: u64 = num
        .parse()
        .map_err(|_| invalid(key, value, "expected a size such as 10g"))?;
    let shift = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return Err(invalid(key, value, "expected a size such as 10g")),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| invalid(key, value, "too large"))
}

/// Parses `500ms`, `3s`, `2m`, `1h`, `7d`, `3 seconds` (a bare number is seconds).
pub fn parse_duration(key: &str, value: &str) -> Result<std::time::Duration, OptionsError> {
    crate::parse::scalars::duration(value).map_err(|reason| invalid(key, value, reason))
}

/// Parses `2021-01-01 00:00:00.000000 UTC+0` (Auto Loader's documented form), ISO-8601
/// with or without offset (UTC when absent), or a bare date.
pub fn parse_instant(key: &str, value: &str) -> Result<i64, OptionsError> {
    let v = value.trim();
    let (body, offset) = match v.rsplit_once(" UTC") {
        Some((b, off)) => {
            let hours: i32 = if off.is_empty() {
                0
            } else {
                off.trim_start_matches('+')
                    .parse()
                    .map_err(|_| invalid(key, value, "expected an offset such as UTC+0 or UTC+9"))?
            };
            (b.trim(), Some(hours))
        }
        None => (v, None),
    };
    let text = if body.len() == 10 {
        format!("{body}T00:00:00")
    } else {
        body.to_string()
    };
    let text = match offset {
        Some(h) => format!("{text}{}{:02}:00", if h < 0 { '-' } else { '+' }, h.abs()),
        None => text,
    };
    scalars::parse_timestamp(&text, Tz::UTC)
        .map(|micros| micros.div_euclid(1000))
        .ok_or_else(|| {
            invalid(
                key,
                value,
                "expected a timestamp such as 2026-03-15 00:00:00 UTC+0",
            )
        })
}
