//! `--since`: a duration back from now or a point in time.

use crate::reports::ReportError;

/// Parses `--since`: a time (as `cloudFiles.modifiedAfter` takes it: `2026-03-15`,
/// `2026-03-15T00:00:00Z`, `2026-03-15 00:00:00 UTC+0`), or how long before `now_ms`: a
/// number with a unit, `ms`, `s`, `m`, `h`, `d` (24 h) or `w` (7 d), also spelled out
/// (`minutes`, `days`). Returns milliseconds since the epoch.
pub fn parse_since(text: &str, now_ms: i64) -> Result<i64, ReportError> {
    if let Ok(ms) = crate::options::parse_instant("--since", text) {
        return Ok(ms);
    }
    let bad = || ReportError::Since(text.to_string());
    let t = text.trim().to_ascii_lowercase();
    let end = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(end);
    let n: f64 = number.parse().map_err(|_| bad())?;
    let unit_ms: f64 = match unit.trim() {
        "ms" | "millis" | "milliseconds" => 1.0,
        "s" | "sec" | "secs" | "second" | "seconds" => 1e3,
        "m" | "min" | "mins" | "minute" | "minutes" => 60e3,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600e3,
        "d" | "day" | "days" => 86_400e3,
        "w" | "week" | "weeks" => 604_800e3,
        // A bare number is refused: seconds or a year, it cannot say.
        _ => return Err(bad()),
    };
    let ago = n * unit_ms;
    if !ago.is_finite() || ago > now_ms as f64 {
        return Err(bad());
    }
    Ok(now_ms - ago as i64)
}
