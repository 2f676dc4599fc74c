//! Text to typed value conversions shared by inference and decoding, so that a value
//! inferred as a type is always one the decoder accepts as that type.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;

/// Days from 0001-01-01 (chrono's CE day 1) to 1970-01-01.
pub(crate) const EPOCH_DAYS_FROM_CE: i32 = 719_163;

/// `str::trim`, skipped when both ends are visibly not whitespace (the common case: this
/// runs for every CSV cell).
pub fn trim(text: &str) -> &str {
    match (text.as_bytes().first(), text.as_bytes().last()) {
        (Some(a), Some(z)) if a.is_ascii_graphic() && z.is_ascii_graphic() => text,
        _ => text.trim(),
    }
}

/// Parses an ISO-8601 date-time: `YYYY-MM-DD[T| ]HH:MM[:SS[.fraction]][Z|±HH[:]MM]`.
/// A value without a zone is read in `zone` (the `timeZone` option, UTC by default).
/// Returns microseconds since the epoch.
pub fn parse_timestamp(text: &str, zone: Tz) -> Option<i64> {
    let s = trim(text);
    if s.len() < 16 || !s.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    let sep = s.as_bytes()[10];
    if sep != b'T' && sep != b't' && sep != b' ' {
        return None;
    }
    let date = ymd(&s[..10])?;
    let rest = &s[11..];
    // Split off a zone suffix: Z, or +HH:MM / -HH:MM / +HHMM / +HH.
    let (time_part, offset_secs) = split_zone(rest)?;
    let time = parse_time(time_part)?;
    to_utc_micros(NaiveDateTime::new(date, time), offset_secs, zone)
}

/// Microseconds since the epoch of a wall-clock time at a fixed offset (seconds east of
/// UTC), or, without one, in `zone` (the earlier of two times a DST fold gives).
pub fn to_utc_micros(naive: NaiveDateTime, offset_secs: Option<i32>, zone: Tz) -> Option<i64> {
    let utc: DateTime<Utc> = match offset_secs {
        Some(secs) => chrono::FixedOffset::east_opt(secs)?
            .from_local_datetime(&naive)
            .single()?
            .with_timezone(&Utc),
        None => zone
            .from_local_datetime(&naive)
            .earliest()?
            .with_timezone(&Utc),
    };
    Some(utc.timestamp_micros())
}

fn split_zone(rest: &str) -> Option<(&str, Option<i32>)> {
    if let Some(t) = rest.strip_suffix(['Z', 'z']) {
        return Some((t, Some(0)));
    }
    if let Some(t) = rest.strip_suffix(" UTC") {
        return Some((t, Some(0)));
    }
    // A sign after the HH:MM part starts an offset.
    let bytes = rest.as_bytes();
    if let Some(pos) = bytes.iter().skip(5).position(|b| *b == b'+' || *b == b'-') {
        let pos = pos + 5;
        let sign = if bytes[pos] == b'-' { -1 } else { 1 };
        let digits: String = rest[pos + 1..].chars().filter(|c| *c != ':').collect();
        if !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let (h, m) = match digits.len() {
            2 => (digits.parse::<i32>().ok()?, 0),
            4 => (
                digits[..2].parse::<i32>().ok()?,
                digits[2..].parse::<i32>().ok()?,
            ),
            _ => return None,
        };
        if h > 18 || m > 59 {
            return None;
        }
        return Some((&rest[..pos], Some(sign * (h * 3600 + m * 60))));
    }
    Some((rest, None))
}

/// Fields are sliced by byte offset with `str::get`, so a multi-byte character across an
/// offset is a mismatch, not a panic (`10:0é0` panicked; found by fuzzing `fuzz_json`).
fn parse_time(s: &str) -> Option<NaiveTime> {
    let b = s.as_bytes();
    if b.len() < 5 || b[2] != b':' {
        return None;
    }
    let hour: u32 = s.get(0..2)?.parse().ok()?;
    let minute: u32 = s.get(3..5)?.parse().ok()?;
    let (second, nanos) = if b.len() == 5 {
        (0, 0)
    } else {
        if b[5] != b':' || b.len() < 8 {
            return None;
        }
        let second: u32 = s.get(6..8)?.parse().ok()?;
        let nanos = if b.len() > 8 {
            if b[8] != b'.' && b[8] != b',' {
                return None;
            }
            let frac = s.get(9..)?;
            if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            // Right-padded to nanoseconds: ".5" is 500,000,000 (no allocation per value).
            let digits = frac
                .bytes()
                .fold(0u32, |acc, c| acc * 10 + u32::from(c - b'0'));
            digits * 10u32.pow(9 - frac.len() as u32)
        } else {
            0
        };
        (second, nanos)
    };
    NaiveTime::from_hms_nano_opt(hour, minute, second, nanos)
}

/// `YYYY-MM-DD`, parsed by hand: this runs for every string during inference.
fn ymd(s: &str) -> Option<NaiveDate> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        b[r].iter().try_fold(0u32, |acc, c| {
            c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
        })
    };
    NaiveDate::from_ymd_opt(i32::try_from(num(0..4)?).ok()?, num(5..7)?, num(8..10)?)
}

/// Parses `YYYY-MM-DD` into days since the epoch.
pub fn parse_date(text: &str) -> Option<i32> {
    let s = trim(text);
    if s.len() != 10 {
        return None;
    }
    let date = ymd(s)?;
    Some(chrono::Datelike::num_days_from_ce(&date) - EPOCH_DAYS_FROM_CE)
}

/// The shape of a decimal number's text: sign, digits without the point, and scale.
struct DecimalText {
    negative: bool,
    digits: String,
    /// Wider than the exponent: `1e-2147483648` has scale 2^31, which `i32` cannot hold
    /// (an overflow panic under the debug assertions fuzz builds enable).
    scale: i64,
}

fn decimal_text(text: &str) -> Option<DecimalText> {
    let s = trim(text);
    let (negative, s) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], s[i + 1..].parse::<i32>().ok()?),
        None => (s, 0),
    };
    let (int_part, frac_part) = match mantissa.split_once('.') {
        Some((i, f)) => (i, f),
        None => (mantissa, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    if !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut digits = format!("{int_part}{frac_part}");
    let trimmed = digits.trim_start_matches('0');
    digits = if trimmed.is_empty() {
        "0".into()
    } else {
        trimmed.to_string()
    };
    Some(DecimalText {
        negative,
        digits,
        scale: i64::try_from(frac_part.len()).ok()? - i64::from(exponent),
    })
}

/// Parses a decimal number into the unscaled value of `DECIMAL(precision, scale)`, rounding
/// half up when the text has more fractional digits; `None` when it does not fit.
pub fn parse_decimal(text: &str, precision: u8, scale: i8) -> Option<i128> {
    let d = decimal_text(text)?;
    let target = i64::from(scale);
    let mut digits = d.digits;
    if d.scale < target {
        let pad = usize::try_from(target - d.scale).ok()?;
        if digits.len() + pad > 39 {
            return None;
        }
        digits.push_str(&"0".repeat(pad));
    }
    let mut round_up = false;
    if d.scale > target {
        let drop = usize::try_from(d.scale - target).ok()?;
        if drop >= digits.len() {
            round_up = drop == digits.len() && digits.as_bytes()[0] >= b'5';
            digits = "0".into();
        } else {
            round_up = digits.as_bytes()[digits.len() - drop] >= b'5';
            digits.truncate(digits.len() - drop);
        }
    }
    if digits.len() > 39 {
        return None;
    }
    let mut value: i128 = digits.parse().ok()?;
    if round_up {
        value = value.checked_add(1)?;
    }
    if value != 0
        && value.unsigned_abs().checked_ilog10().map_or(1, |l| l + 1) > u32::from(precision)
    {
        return None;
    }
    Some(if d.negative { -value } else { value })
}

/// `DECIMAL(p, 0)` for integer text too large for BIGINT, when it has at most 38 digits.
pub fn big_integer_decimal(text: &str) -> Option<(u8, i8)> {
    let digits = trim(text).trim_start_matches(['-', '+']);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let significant = digits.trim_start_matches('0').len().max(1);
    (significant <= 38).then(|| (u8::try_from(significant).unwrap_or(38), 0))
}

/// The `DECIMAL(precision, scale)` that holds a number's text exactly (Spark's
/// `prefersDecimal`: `0.01` is DECIMAL(2,2), `1.50` DECIMAL(3,2), `1.5e3` DECIMAL(4,0)),
/// or `None` when it is not a number or needs more than 38 digits.
pub fn decimal_type(text: &str) -> Option<(u8, i8)> {
    let d = decimal_text(text)?;
    let digits = i64::try_from(d.digits.len()).ok()?;
    let (precision, scale) = if d.scale < 0 {
        (if d.digits == "0" { 1 } else { digits - d.scale }, 0)
    } else {
        (digits.max(d.scale), d.scale)
    };
    if !(1..=38).contains(&precision) {
        return None;
    }
    Some((u8::try_from(precision).ok()?, i8::try_from(scale).ok()?))
}

/// Parses a floating-point number, also accepting Spark's `NaN`, `Inf`, `-Inf`,
/// `Infinity` and `-Infinity` tokens.
pub fn parse_double(text: &str) -> Option<f64> {
    let s = trim(text);
    match s {
        "NaN" => return Some(f64::NAN),
        "Inf" | "+Inf" | "Infinity" | "+Infinity" => return Some(f64::INFINITY),
        "-Inf" | "-Infinity" => return Some(f64::NEG_INFINITY),
        _ => {}
    }
    let first = *s.as_bytes().first()?;
    if !(first.is_ascii_digit() || first == b'-' || first == b'+' || first == b'.') {
        return None;
    }
    if s.bytes()
        .any(|b| b.is_ascii_alphabetic() && b != b'e' && b != b'E')
    {
        return None;
    }
    s.parse().ok()
}

/// Parses `true`/`false`, case-insensitively.
pub fn parse_bool(text: &str) -> Option<bool> {
    let s = trim(text);
    if s.eq_ignore_ascii_case("true") {
        Some(true)
    } else if s.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// Renders microseconds since the epoch as an RFC 3339 UTC string.
pub fn format_timestamp(micros: i64) -> String {
    DateTime::<Utc>::from_timestamp_micros(micros)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
        .unwrap_or_default()
}

/// A duration as options write it: `3s`, `500ms`, `5m`, `26h`, `7d` (seconds without a unit).
pub fn duration(value: &str) -> Result<std::time::Duration, &'static str> {
    let v = value.trim().to_ascii_lowercase();
    let digits_end = v
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(v.len());
    let (num, unit) = v.split_at(digits_end);
    let n: f64 = num.parse().map_err(|_| "expected a duration such as 3s")?;
    let secs = match unit.trim() {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => n,
        "ms" | "millis" | "milliseconds" => n / 1000.0,
        "m" | "min" | "mins" | "minute" | "minutes" => n * 60.0,
        "h" | "hour" | "hours" => n * 3600.0,
        "d" | "day" | "days" => n * 86400.0,
        _ => return Err("expected a duration such as 3s"),
    };
    std::time::Duration::try_from_secs_f64(secs).map_err(|_| "out of range")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_parse_with_and_without_zone() {
        let utc = parse_timestamp("2026-03-15T14:00:00Z", Tz::UTC).unwrap();
        assert_eq!(format_timestamp(utc), "2026-03-15T14:00:00Z");
        assert_eq!(parse_timestamp("2026-03-15 14:00:00", Tz::UTC), Some(utc));
        assert_eq!(
            parse_timestamp("2026-03-15T23:00:00+09:00", Tz::UTC),
            Some(utc)
        );
        assert_eq!(
            parse_timestamp("2026-03-15T23:00:00", Tz::Asia__Seoul),
            Some(utc)
        );
        assert_eq!(
            parse_timestamp("2026-03-15T14:00:00.5Z", Tz::UTC),
            Some(utc + 500_000)
        );
        assert_eq!(
            parse_timestamp("2026-03-15T14:00:00.326Z", Tz::UTC),
            Some(utc + 326_000)
        );
        assert_eq!(
            parse_timestamp("2026-03-15T14:00:00.000001999Z", Tz::UTC),
            Some(utc + 1),
            "nanoseconds below a microsecond are cut, as Spark does"
        );
        assert_eq!(parse_timestamp("2026-03-15T14:00", Tz::UTC), Some(utc));
        assert_eq!(parse_timestamp("2026-03-15", Tz::UTC), None);
        assert_eq!(parse_timestamp("5000원 - 750원 할인", Tz::UTC), None);
        assert_eq!(parse_timestamp("2026-13-15T14:00:00Z", Tz::UTC), None);
    }

    /// Found by fuzzing `fuzz_json` and `fuzz_csv`: a multi-byte character across a time field's
    /// byte offset panicked instead of being a mismatch.
    #[test]
    fn multi_byte_text_in_a_time_is_a_mismatch_not_a_panic() {
        for text in [
            "2026-03-11T15:22:0\u{e9}0Z",
            "2026-03-13 10:0\u{fffd}7",
            "2026-03-13 10:00:0\u{e9}",
            "2026-03-13 1\u{e9}:00:00",
        ] {
            assert_eq!(parse_timestamp(text, Tz::UTC), None, "{text}");
        }
        assert!(parse_timestamp("2026-03-13 10:00:00.5", Tz::UTC).is_some());
    }

    #[test]
    fn fixed_offsets_match_chrono() {
        for text in [
            "2026-03-15T14:00:00Z",
            "2026-03-15T14:00:00.326+09:00",
            "1969-12-31T23:59:59.999999-05:30",
            "0001-01-01T00:00:00+14:00",
            "9999-12-31T23:59:59.999999999-12:00",
            "2024-02-29T12:34:56.000001+00:00",
            "1900-01-01T00:00:00.5+01:00",
        ] {
            let reference = DateTime::parse_from_rfc3339(text)
                .unwrap()
                .timestamp_micros();
            assert_eq!(parse_timestamp(text, Tz::UTC), Some(reference), "{text}");
        }
        assert_eq!(parse_timestamp("2025-02-29T00:00:00Z", Tz::UTC), None);
        assert_eq!(parse_timestamp("2026-03-15T24:00:00Z", Tz::UTC), None);
        assert_eq!(parse_timestamp("2026-03-15T23:60:00Z", Tz::UTC), None);
        assert_eq!(parse_timestamp("2026-03-15T23:00:60Z", Tz::UTC), None);
    }

    #[test]
    fn dates_parse() {
        assert_eq!(parse_date("1970-01-02"), Some(1));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        assert_eq!(parse_date("2026-02-30"), None);
    }

    #[test]
    fn decimals_scale_round_and_overflow() {
        assert_eq!(parse_decimal("12.5", 12, 2), Some(1250));
        assert_eq!(parse_decimal("-0.125", 12, 2), Some(-13));
        assert_eq!(parse_decimal("1e3", 12, 2), Some(100_000));
        assert_eq!(parse_decimal("12345678901", 12, 2), None);
        assert_eq!(parse_decimal("0.004", 12, 2), Some(0));
        assert_eq!(parse_decimal("0.005", 12, 2), Some(1));
        assert_eq!(parse_decimal("abc", 12, 2), None);
        assert_eq!(parse_decimal("5000원", 12, 2), None);
        // Exponents at the ends of i32: no overflow, and the value still rounds.
        assert_eq!(parse_decimal("5e-2147483648", 12, 2), Some(0));
        assert_eq!(parse_decimal("0.5e-2147483647", 12, 2), Some(0));
        assert_eq!(parse_decimal("1e2147483647", 12, 2), None);
        assert_eq!(parse_decimal("0.01e2147483647", 38, -128), None);
    }

    #[test]
    fn decimal_types_hold_the_text_exactly() {
        assert_eq!(decimal_type("1.7976931348623157"), Some((17, 16)));
        assert_eq!(decimal_type("0.01"), Some((2, 2)));
        assert_eq!(decimal_type("1.50"), Some((3, 2)));
        assert_eq!(decimal_type("-3.1"), Some((2, 1)));
        assert_eq!(decimal_type("1.5e3"), Some((4, 0)));
        assert_eq!(decimal_type("20181202.210400123"), Some((17, 9)));
        assert_eq!(decimal_type(&format!("0.{}1", "0".repeat(38))), None);
        assert_eq!(decimal_type("abc"), None);
        assert_eq!(decimal_type("1e-2147483648"), None);
        for text in ["1.7976931348623157", "0.01", "1.5e3", "-3.1"] {
            let (p, s) = decimal_type(text).unwrap();
            assert!(
                parse_decimal(text, p, s).is_some(),
                "{text} reads as its type"
            );
        }
    }

    #[test]
    fn doubles_accept_spark_tokens_only() {
        assert_eq!(parse_double("3.5"), Some(3.5));
        assert!(parse_double("NaN").unwrap().is_nan());
        assert_eq!(parse_double("-Inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_double("inf"), None);
        assert_eq!(parse_double("0x10"), None);
    }
}
