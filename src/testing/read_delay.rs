//! A per-file read delay for the scaling benchmark (`bench/workers.py`):
//! `AUTOLOADER_TEST_READ_DELAY_MS=<ms>` makes every file of a batch wait that long before
//! it is read, standing in for the latency of an S3 GET on a machine where the object
//! store (moto on 127.0.0.1) answers in microseconds. With it, one worker's throughput is
//! bound by latency, not by the machine's two cores, so adding workers measures how the
//! queue, the claims and the Delta commits scale. Unset (always, outside the benchmark),
//! a file costs one cached environment lookup.

use std::sync::LazyLock;
use std::time::Duration;

static DELAY: LazyLock<Option<Duration>> = LazyLock::new(|| {
    std::env::var("AUTOLOADER_TEST_READ_DELAY_MS")
        .ok()?
        .parse::<u64>()
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
});

/// Sleeps for the configured delay, if any (called on a blocking reader thread as a
/// listed file starts being read, `pipeline/read.rs`).
pub fn before_read() {
    if let Some(delay) = *DELAY {
        std::thread::sleep(delay);
    }
}
