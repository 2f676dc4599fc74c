//! Dates and timestamps as a stream reads them: the ISO-8601 forms by default, or Spark's
//! `timestampFormat` / `dateFormat` patterns (Java `DateTimeFormatter` letters) translated to
//! chrono formats. Inference and the column builders both parse through [`Temporal`], so a
//! value that made inference pick DATE or TIMESTAMP is one the reader accepts as that type;
//! and a TIMESTAMP column also reads every value a DATE column would (as midnight), since
//! DATE and TIMESTAMP observations merge into TIMESTAMP.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use chrono::format::{Parsed, StrftimeItems};
use chrono::{Datelike, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;

use super::scalars;

/// Spark's default `timestampFormat` (what the ISO parser reads, and more).
pub const SPARK_TIMESTAMP_FORMAT: &str = "yyyy-MM-dd'T'HH:mm:ss[.SSS][XXX]";
/// Spark's default `dateFormat`.
pub const SPARK_DATE_FORMAT: &str = "yyyy-MM-dd";

/// Separates the chrono alternatives of one pattern (one per combination of its optional
/// sections).
const ALTERNATIVE: char = '\u{1}';
/// Most optional sections a pattern may have (each doubles the alternatives tried).
const MAX_OPTIONAL: usize = 4;

/// A translated pattern: the user's text and its chrono alternatives, interned so that the
/// settings that carry it stay `Copy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern {
    pub java: &'static str,
    alternatives: &'static str,
}

impl Pattern {
    /// Translates a Java `DateTimeFormatter` pattern. Supported letters: `y`/`u` (year,
    /// `yy` two digits), `M`/`L` (month, `MMM` short name, `MMMM` full name), `d`, `D`
    /// (day of year), `H`, `h`, `m`, `s`, `S` (fraction: `SSS`, `SSSSSS` or `SSSSSSSSS`),
    /// `a`, `E` (`EEE`, `EEEE`), offsets `X`, `XX`, `XXX`, `x`, `xx`, `xxx`, `Z`, `ZZZZZ`;
    /// `'quoted text'`, `''` for a quote, and `[optional sections]`.
    pub fn new(java: &str) -> Result<Pattern, String> {
        let alternatives = expand(java)?;
        let mut chrono_formats = Vec::with_capacity(alternatives.len());
        for alt in &alternatives {
            chrono_formats.push(translate(alt)?);
        }
        Ok(Pattern {
            java: intern(java.to_string()),
            alternatives: intern(chrono_formats.join(&ALTERNATIVE.to_string())),
        })
    }

    /// The chrono formats tried in turn.
    pub fn chrono_formats(&self) -> impl Iterator<Item = &'static str> {
        self.alternatives.split(ALTERNATIVE)
    }

    fn parse(&self, text: &str) -> Option<Parsed> {
        self.chrono_formats().find_map(|f| {
            let mut p = Parsed::new();
            chrono::format::parse(&mut p, text, StrftimeItems::new(f))
                .ok()
                .map(|()| p)
        })
    }
}

/// How a stream reads dates and timestamps (`timestampFormat`, `dateFormat`; `None` is the
/// ISO-8601 default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Temporal {
    pub timestamp: Option<Pattern>,
    pub date: Option<Pattern>,
}

impl Temporal {
    /// The ISO-8601 forms of [`scalars::parse_timestamp`] and [`scalars::parse_date`].
    pub const ISO: Temporal = Temporal {
        timestamp: None,
        date: None,
    };

    /// A timestamp in the stream's format, in microseconds since the epoch (a value without
    /// an offset is read in `zone`). What inference calls a TIMESTAMP.
    pub fn parse_timestamp(&self, text: &str, zone: Tz) -> Option<i64> {
        match &self.timestamp {
            None => scalars::parse_timestamp(text, zone),
            Some(p) => {
                let mut parsed = p.parse(scalars::trim(text))?;
                let date = parsed.to_naive_date().ok()?;
                let time = if parsed.hour_div_12().is_none() && parsed.hour_mod_12().is_none() {
                    NaiveTime::MIN
                } else {
                    if parsed.minute().is_none() {
                        parsed.set_minute(0).ok()?;
                    }
                    parsed.to_naive_time().ok()?
                };
                scalars::to_utc_micros(date.and_time(time), parsed.offset(), zone)
            }
        }
    }

    /// Whether inference calls `text` a TIMESTAMP. With a `timestampFormat` that is the
    /// pattern; by default it is the shape of Spark's default pattern,
    /// `yyyy-MM-dd'T'HH:mm:ss[.SSS][XXX]`: seconds required, an upper-case `T` (or a space)
    /// and `Z`. `2024-01-15T10:30` or `2024-01-15t10:30:00z` infer STRING, as in Spark,
    /// though a TIMESTAMP column (a hint) still reads them.
    pub fn infers_timestamp(&self, text: &str, zone: Tz) -> bool {
        if self.timestamp.is_none() && !has_spark_default_shape(scalars::trim(text)) {
            return false;
        }
        self.parse_timestamp(text, zone).is_some()
    }

    /// A date in the stream's format, in days since the epoch. What inference calls a DATE.
    pub fn parse_date(&self, text: &str) -> Option<i32> {
        match &self.date {
            None => scalars::parse_date(text),
            Some(p) => {
                let date = p.parse(scalars::trim(text))?.to_naive_date().ok()?;
                Some(date.num_days_from_ce() - scalars::EPOCH_DAYS_FROM_CE)
            }
        }
    }

    /// What a TIMESTAMP column reads: a timestamp, or a date at midnight in `zone` (as
    /// Spark reads `2024-01-15` into a TIMESTAMP column).
    pub fn read_timestamp(&self, text: &str, zone: Tz) -> Option<i64> {
        self.parse_timestamp(text, zone).or_else(|| {
            let days = self.parse_date(text)?;
            let date = chrono::NaiveDate::from_num_days_from_ce_opt(
                days.checked_add(scalars::EPOCH_DAYS_FROM_CE)?,
            )?;
            let utc = zone
                .from_local_datetime(&date.and_time(NaiveTime::MIN))
                .earliest()?
                .with_timezone(&Utc);
            Some(utc.timestamp_micros())
        })
    }
}

/// `yyyy-MM-ddTHH:mm:ss...` with an upper-case `T` or a space, and no lower-case `z` at
/// the end (the rest is checked by the ISO parser).
fn has_spark_default_shape(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 19
        && matches!(b[10], b'T' | b' ')
        && b[13] == b':'
        && b[16] == b':'
        && b.last() != Some(&b'z')
}

fn intern(text: String) -> &'static str {
    static POOL: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = pool.get(text.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(text.into_boxed_str());
    pool.insert(leaked);
    leaked
}

/// Every pattern a Java pattern with `[optional]` sections stands for (with and without
/// each section; sections do not nest).
fn expand(java: &str) -> Result<Vec<String>, String> {
    let mut parts: Vec<(String, bool)> = vec![(String::new(), false)];
    let mut in_quote = false;
    for c in java.chars() {
        match c {
            '\'' => {
                in_quote = !in_quote;
                parts.last_mut().expect("never empty").0.push(c);
            }
            '[' if !in_quote => {
                if parts.last().expect("never empty").1 {
                    return Err("nested optional sections are not supported".into());
                }
                parts.push((String::new(), true));
            }
            ']' if !in_quote => {
                if !parts.last().expect("never empty").1 {
                    return Err("']' without '['".into());
                }
                parts.push((String::new(), false));
            }
            _ => parts.last_mut().expect("never empty").0.push(c),
        }
    }
    if in_quote {
        return Err("a quote is never closed".into());
    }
    if parts.last().expect("never empty").1 {
        return Err("'[' without ']'".into());
    }
    let optional = parts.iter().filter(|(_, o)| *o).count();
    if optional > MAX_OPTIONAL {
        return Err(format!(
            "at most {MAX_OPTIONAL} optional sections are supported"
        ));
    }
    // Longest first: with every section present, then fewer.
    let mut out = Vec::new();
    for mask in (0..1u32 << optional).rev() {
        let mut text = String::new();
        let mut i = 0;
        for (part, is_optional) in &parts {
            if *is_optional {
                if mask & (1 << i) != 0 {
                    text.push_str(part);
                }
                i += 1;
            } else {
                text.push_str(part);
            }
        }
        out.push(text);
    }
    Ok(out)
}

/// One Java pattern (without optional sections) as a chrono format.
fn translate(java: &str) -> Result<String, String> {
    let chars: Vec<char> = java.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let literal = |out: &mut String, c: char| {
        if c == '%' {
            out.push_str("%%");
        } else {
            out.push(c);
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            if chars.get(i + 1) == Some(&'\'') {
                out.push('\'');
                i += 2;
                continue;
            }
            i += 1;
            while i < chars.len() {
                if chars[i] == '\'' {
                    if chars.get(i + 1) == Some(&'\'') {
                        out.push('\'');
                        i += 2;
                        continue;
                    }
                    break;
                }
                literal(&mut out, chars[i]);
                i += 1;
            }
            i += 1;
            continue;
        }
        if !c.is_ascii_alphabetic() {
            literal(&mut out, c);
            i += 1;
            continue;
        }
        let mut n = 1;
        while chars.get(i + n) == Some(&c) {
            n += 1;
        }
        let unsupported = || {
            format!(
                "pattern letter {} is not supported",
                c.to_string().repeat(n)
            )
        };
        let item = match (c, n) {
            ('y' | 'u', 2) => "%y",
            ('y' | 'u', _) => "%Y",
            ('M' | 'L', 1 | 2) => "%m",
            ('M' | 'L', 3) => "%b",
            ('M' | 'L', 4) => "%B",
            ('d', 1 | 2) => "%d",
            ('D', 1..=3) => "%j",
            ('H', 1 | 2) => "%H",
            ('h', 1 | 2) => "%I",
            ('m', 1 | 2) => "%M",
            ('s', 1 | 2) => "%S",
            ('S', 3) => "%3f",
            ('S', 6) => "%6f",
            ('S', 9) => "%9f",
            ('S', _) => {
                return Err(format!(
                    "a fraction of {n} digits is not supported; use SSS, SSSSSS or SSSSSSSSS"
                ));
            }
            ('a', 1) => "%p",
            ('E', 1..=3) => "%a",
            ('E', 4) => "%A",
            ('X' | 'x', 1..=3) | ('Z', 1..=3 | 5) => "%#z",
            _ => return Err(unsupported()),
        };
        out.push_str(item);
        i += n;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(pattern: &str, text: &str) -> Option<String> {
        let t = Temporal {
            timestamp: Some(Pattern::new(pattern).unwrap()),
            date: None,
        };
        t.parse_timestamp(text, Tz::UTC)
            .map(scalars::format_timestamp)
    }

    #[test]
    fn java_patterns_translate_to_chrono() {
        assert_eq!(translate("dd/MM/yyyy").unwrap(), "%d/%m/%Y");
        assert_eq!(
            translate("yyyy-MM-dd'T'HH:mm:ss.SSSXXX").unwrap(),
            "%Y-%m-%dT%H:%M:%S.%3f%#z"
        );
        assert_eq!(translate("yyyyMMdd.HHmmssSSS").unwrap(), "%Y%m%d.%H%M%S%3f");
        assert_eq!(
            translate("hh:mm a, EEE d MMM yy").unwrap(),
            "%I:%M %p, %a %d %b %y"
        );
        assert_eq!(translate("'at' HH'h' ''100%''").unwrap(), "at %Hh '100%%'");
        assert!(translate("yyyy-MM-dd G").is_err());
        assert!(translate("ss.SS").is_err());
        assert!(translate("VV").is_err());
        assert_eq!(
            expand(SPARK_TIMESTAMP_FORMAT).unwrap(),
            vec![
                "yyyy-MM-dd'T'HH:mm:ss.SSSXXX",
                "yyyy-MM-dd'T'HH:mm:ssXXX",
                "yyyy-MM-dd'T'HH:mm:ss.SSS",
                "yyyy-MM-dd'T'HH:mm:ss",
            ]
        );
        assert!(Pattern::new("yyyy[-MM").is_err());
        assert!(Pattern::new("yyyy'-MM").is_err());
        assert!(Pattern::new("[a[b]]").is_err());
    }

    #[test]
    fn patterns_parse_timestamps_with_and_without_offsets() {
        let p = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX";
        assert_eq!(
            ts(p, "2026-03-15T23:00:00.250+09:00").as_deref(),
            Some("2026-03-15T14:00:00.250Z")
        );
        assert_eq!(
            ts(p, "2026-03-15T14:00:00.250Z").as_deref(),
            Some("2026-03-15T14:00:00.250Z")
        );
        assert_eq!(ts(p, "2026-03-15 14:00:00"), None);
        assert_eq!(
            ts("dd/MM/yyyy HH:mm", "15/03/2026 14:05").as_deref(),
            Some("2026-03-15T14:05:00Z")
        );
        assert_eq!(
            ts("dd/MM/yyyy", "15/03/2026").as_deref(),
            Some("2026-03-15T00:00:00Z")
        );
        assert_eq!(
            ts(SPARK_TIMESTAMP_FORMAT, "2026-03-15T14:00:00").as_deref(),
            Some("2026-03-15T14:00:00Z")
        );
        let seoul = Temporal {
            timestamp: Some(Pattern::new("dd/MM/yyyy HH:mm").unwrap()),
            date: None,
        };
        assert_eq!(
            seoul
                .parse_timestamp("15/03/2026 23:00", Tz::Asia__Seoul)
                .map(scalars::format_timestamp)
                .as_deref(),
            Some("2026-03-15T14:00:00Z")
        );
    }

    /// Mutated patterns and texts: a refusal or a mismatch, never a panic.
    #[test]
    fn mutated_patterns_and_texts_never_panic() {
        let patterns = [
            "yyyy-MM-dd'T'HH:mm:ss.SSSXXX",
            "dd/MM/yyyy[ HH:mm[:ss]]",
            "EEE, d MMM yyyy hh:mm a Z",
            "yyyyDDD HH'h'",
        ];
        let texts = [
            "2026-03-15T14:00:00.250+09:00",
            "15/03/2026 14:05:09",
            "Sun, 15 Mar 2026 02:00 PM +0900",
            "2026074 14h",
        ];
        let alphabet = "yMdHhmsSaEXxZD'[]-/:. T+9Z0é";
        let alphabet: Vec<char> = alphabet.chars().collect();
        let mut next = crate::testing::xorshift(0x2545_F491_4F6C_DD1Du64);
        for (pattern, text) in patterns.iter().zip(texts) {
            for _ in 0..300 {
                let mutate = |s: &str, next: &mut dyn FnMut() -> u64| {
                    let mut chars: Vec<char> = s.chars().collect();
                    let at = (next() as usize) % (chars.len() + 1);
                    let c = alphabet[(next() as usize) % alphabet.len()];
                    match next() % 3 {
                        0 if at < chars.len() => chars[at] = c,
                        1 if at < chars.len() => {
                            chars.remove(at);
                        }
                        _ => chars.insert(at, c),
                    }
                    chars.into_iter().collect::<String>()
                };
                let p = mutate(pattern, &mut next);
                let t = mutate(text, &mut next);
                if let Ok(pattern) = Pattern::new(&p) {
                    let temporal = Temporal {
                        timestamp: Some(pattern),
                        date: Some(pattern),
                    };
                    let _ = temporal.read_timestamp(&t, Tz::Asia__Seoul);
                    let _ = temporal.read_timestamp(text, Tz::UTC);
                }
            }
        }
    }

    #[test]
    fn timestamp_columns_read_dates_as_midnight() {
        assert_eq!(Temporal::ISO.parse_timestamp("2024-01-15", Tz::UTC), None);
        assert_eq!(
            Temporal::ISO
                .read_timestamp("2024-01-15", Tz::UTC)
                .map(scalars::format_timestamp)
                .as_deref(),
            Some("2024-01-15T00:00:00Z")
        );
        assert_eq!(
            Temporal::ISO
                .read_timestamp("2024-01-15", Tz::Asia__Seoul)
                .map(scalars::format_timestamp)
                .as_deref(),
            Some("2024-01-14T15:00:00Z")
        );
        let custom = Temporal {
            timestamp: Some(Pattern::new("dd/MM/yyyy HH:mm").unwrap()),
            date: Some(Pattern::new("dd/MM/yyyy").unwrap()),
        };
        assert_eq!(custom.parse_date("15/01/2024"), Some(19737));
        assert_eq!(custom.parse_date("2024-01-15"), None);
        assert_eq!(
            custom
                .read_timestamp("15/01/2024", Tz::UTC)
                .map(scalars::format_timestamp)
                .as_deref(),
            Some("2024-01-15T00:00:00Z")
        );
    }
}
