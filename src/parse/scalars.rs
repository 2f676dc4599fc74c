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
///
/// This runs for every timestamp string twice while a first batch is inferred and read
/// (once to type it, once to store it), so a value at a fixed offset (or without one, read
/// in UTC) is converted with integer arithmetic; only a zone with daylight saving time
/// goes through chrono-tz.
pub fn parse_timestamp(text: &str, zone: Tz) -> Option<i64> {
    let s = trim(text);
    if s.len() < 16 || !s.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    let sep = s.as_bytes()[10];
    if sep != b'T' && sep != b't' && sep != b' ' {
        return None;
    }
    let date = civil_date(&s[..10])?;
    let rest = &s[11..];
    // Split off a zone suffix: Z, or +HH:MM / -HH:MM / +HHMM / +HH.
    let (time_part, offset_secs) = split_zone(rest)?;
    let time = clock_time(time_part)?;
    match offset_secs {
        Some(offset) => Some(fixed_offset_micros(date, time, offset)),
        None if zone == Tz::UTC => Some(fixed_offset_micros(date, time, 0)),
        None => {
            let naive = NaiveDateTime::new(
                NaiveDate::from_ymd_opt(date.year, date.month, date.day)?,
                NaiveTime::from_hms_nano_opt(time.hour, time.minute, time.second, time.nanos)?,
            );
            to_utc_micros(naive, None, zone)
        }
    }
}

/// A valid calendar date (proleptic Gregorian, years 0 to 9999).
#[derive(Debug, Clone, Copy)]
struct CivilDate {
    year: i32,
    month: u32,
    day: u32,
}

/// A valid time of day (no leap second).
#[derive(Debug, Clone, Copy)]
struct ClockTime {
    hour: u32,
    minute: u32,
    second: u32,
    nanos: u32,
}

/// Microseconds since the epoch of `date` and `time` at `offset` seconds east of UTC
/// (nanoseconds below a microsecond cut, as chrono's `timestamp_micros` does).
fn fixed_offset_micros(date: CivilDate, time: ClockTime, offset: i32) -> i64 {
    let seconds = days_from_epoch(date) * 86_400
        + i64::from(time.hour * 3_600 + time.minute * 60 + time.second)
        - i64::from(offset);
    seconds * 1_000_000 + i64::from(time.nanos / 1_000)
}

/// Days from 1970-01-01 to `date` (Howard Hinnant's `days_from_civil`, in unsigned
/// arithmetic: the year is shifted by one 400-year era so that it never goes below 0).
fn days_from_epoch(date: CivilDate) -> i64 {
    let year = date.year as u32 + 400 - u32::from(date.month <= 2);
    let (era, year_of_era) = (year / 400, year % 400);
    let month_from_march = if date.month > 2 {
        date.month - 3
    } else {
        date.month + 9
    };
    let day_of_year = (153 * month_from_march + 2) / 5 + date.day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    i64::from(era * 146_097 + day_of_era) - 146_097 - 719_468
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

/// The number of an ASCII-digits field (any other byte, a sign included, is a mismatch).
fn digits(b: &[u8]) -> Option<u32> {
    b.iter().try_fold(0u32, |acc, c| {
        c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
    })
}

/// `HH:MM[:SS[.fraction]]`. Fields are sliced by byte offset and must be ASCII digits, so
/// a multi-byte character across an offset is a mismatch, not a panic (`10:0é0` panicked;
/// found by fuzzing `fuzz_json`).
fn clock_time(s: &str) -> Option<ClockTime> {
    let b = s.as_bytes();
    if b.len() < 5 || b[2] != b':' {
        return None;
    }
    let hour = digits(&b[0..2])?;
    let minute = digits(&b[3..5])?;
    let (second, nanos) = if b.len() == 5 {
        (0, 0)
    } else {
        if b[5] != b':' || b.len() < 8 {
            return None;
        }
        let second = digits(&b[6..8])?;
        let nanos = if b.len() > 8 {
            if b[8] != b'.' && b[8] != b',' {
                return None;
            }
            let frac = &b[9..];
            if frac.is_empty() || frac.len() > 9 {
                return None;
            }
            // Right-padded to nanoseconds: ".5" is 500,000,000 (no allocation per value).
            digits(frac)? * 10u32.pow(9 - frac.len() as u32)
        } else {
            0
        };
        (second, nanos)
    };
    (hour < 24 && minute < 60 && second < 60).then_some(ClockTime {
        hour,
        minute,
        second,
        nanos,
    })
}

/// `YYYY-MM-DD`, parsed by hand: this runs for every string during inference.
fn civil_date(s: &str) -> Option<CivilDate> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (year, month, day) = (digits(&b[0..4])?, digits(&b[5..7])?, digits(&b[8..10])?);
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let month_days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    (1..=month_days).contains(&day).then_some(CivilDate {
        year: year as i32,
        month,
        day,
    })
}

/// Parses `YYYY-MM-DD` into days since the epoch.
pub fn parse_date(text: &str) -> Option<i32> {
    let s = trim(text);
    // Years 0 to 9999: always within an i32 of days.
    civil_date(s).map(|date| days_from_epoch(date) as i32)
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

    /// The integer conversion of a fixed-offset or UTC timestamp against chrono's, over
    /// every kind of date (leap days, years 0 and 9999, dates before the epoch, days past
    /// their month's end), times (fractions, 24:00, 23:59:60) and offsets; and a date
    /// against chrono's day count.
    #[test]
    fn timestamps_and_dates_convert_as_chrono_does() {
        fn chrono_micros(
            date: (i32, u32, u32),
            time: (u32, u32, u32, u32),
            offset: i32,
        ) -> Option<i64> {
            let naive = NaiveDateTime::new(
                NaiveDate::from_ymd_opt(date.0, date.1, date.2)?,
                NaiveTime::from_hms_nano_opt(time.0, time.1, time.2, time.3)?,
            );
            let at = chrono::FixedOffset::east_opt(offset)?
                .from_local_datetime(&naive)
                .single()?;
            Some(at.with_timezone(&Utc).timestamp_micros())
        }
        let years = [
            0, 1, 4, 100, 400, 1600, 1900, 1969, 1970, 1972, 2000, 2024, 2100, 9999,
        ];
        let days = [
            (1, 1),
            (2, 28),
            (2, 29),
            (2, 30),
            (3, 1),
            (4, 30),
            (4, 31),
            (6, 15),
            (12, 31),
            (13, 1),
            (0, 10),
            (5, 0),
        ];
        let times = [
            (0, 0, 0, 0),
            (23, 59, 59, 999_999_999),
            (12, 30, 5, 500_000_000),
            (24, 0, 0, 0),
            (23, 60, 0, 0),
            (23, 59, 60, 0),
            (7, 5, 9, 1_999),
        ];
        let offsets = [
            ("Z", 0),
            ("+09:00", 32_400),
            ("-0530", -19_800),
            ("+18", 64_800),
            ("", 0),
        ];
        let mut checked = 0;
        for year in years {
            for (month, day) in days {
                let date_text = format!("{year:04}-{month:02}-{day:02}");
                let chrono_days = NaiveDate::from_ymd_opt(year, month, day)
                    .map(|d| chrono::Datelike::num_days_from_ce(&d) - EPOCH_DAYS_FROM_CE);
                assert_eq!(parse_date(&date_text), chrono_days, "{date_text}");
                for (h, m, sec, nanos) in times {
                    for (suffix, offset) in offsets {
                        let text = format!("{date_text}T{h:02}:{m:02}:{sec:02}.{nanos:09}{suffix}");
                        let expected =
                            chrono_micros((year, month, day), (h, m, sec, nanos), offset);
                        assert_eq!(parse_timestamp(&text, Tz::UTC), expected, "{text}");
                        checked += usize::from(expected.is_some());
                    }
                }
            }
        }
        assert!(checked > 1_000, "only {checked} valid timestamps checked");
        // A sign is not a digit: `+5` is no hour (`str::parse` took it for 5).
        assert_eq!(parse_timestamp("2026-03-15T+5:00:00Z", Tz::UTC), None);
        assert_eq!(parse_date("2026-+3-15"), None);
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
