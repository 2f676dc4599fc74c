//! Landed files' metadata, set explicitly so tests never sleep to get distinct times.

use std::path::Path;
use std::time::{Duration, SystemTime};

/// Sets a file's modification time.
pub fn set_mtime(path: &Path, time: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(time)
        .unwrap();
}

/// Sets the modification time of the `n`-th file of a sequence landed oldest first: a
/// minute ago plus `n` seconds, so each file is settled and the order is unambiguous.
pub fn set_mtime_in_order(path: &Path, n: u64) {
    set_mtime(
        path,
        SystemTime::now() - Duration::from_secs(60) + Duration::from_secs(n),
    );
}
