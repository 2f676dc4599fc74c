//! Named crash points for tests: `AUTOLOADER_FAILPOINT=<name>` makes the process kill itself
//! with SIGKILL when it reaches that point, exactly as `kill -9` would (no destructors, no
//! flushes). `<name>@<n>` fires on the n-th hit (1-based). Unset, a hit costs one cached
//! environment lookup.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

static TARGET: LazyLock<Option<(String, u64)>> = LazyLock::new(|| {
    let spec = std::env::var("AUTOLOADER_FAILPOINT").ok()?;
    let (name, nth) = match spec.split_once('@') {
        Some((n, k)) => (n.to_string(), k.parse().unwrap_or(1)),
        None => (spec, 1),
    };
    Some((name, nth))
});
static HITS: AtomicU64 = AtomicU64::new(0);

/// Names of all failpoints, in the order the ingest path reaches them.
pub const NAMES: &[&str] = &[
    "after-schema-write",
    "after-plan",
    "mid-read",
    "before-delta-commit",
    "after-delta-commit",
    "after-mark",
    "after-schema-evolve",
];

/// Kills the process if `name` is the armed failpoint and this is the armed hit.
pub fn hit(name: &str) {
    if let Some((target, nth)) = TARGET.as_ref()
        && target == name
        && HITS.fetch_add(1, Ordering::SeqCst) + 1 == *nth
    {
        eprintln!("failpoint {name} reached: killing the process");
        // SAFETY: kill(2) on our own pid has no memory-safety preconditions.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}
