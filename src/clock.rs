//! Wall-clock time as the checkpoint, leases, plans and events record it.

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
