//! Named crash points for tests: `AUTOLOADER_FAILPOINT=<name>[@<n>][=<action>]` acts when
//! the process reaches that point for the n-th time (default the first). The default action
//! `kill` sends the process SIGKILL, exactly as `kill -9` would (no destructors, no
//! flushes); `sleep(<ms>)` pauses there instead, to hold the process at a known step;
//! `error` makes a step that supports it (see [`fails`]) report an error after its effect.
//! Unset, a hit costs one cached environment lookup.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Debug)]
enum Action {
    Kill,
    Sleep(Duration),
    /// Only for [`fails`]: the step reports an error.
    Error,
}

static TARGET: LazyLock<Option<(String, u64, Action)>> = LazyLock::new(|| {
    let spec = std::env::var("AUTOLOADER_FAILPOINT").ok()?;
    let (point, action) = match spec.split_once('=') {
        Some((p, a)) => (p, a),
        None => (spec.as_str(), "kill"),
    };
    let action = match action
        .strip_prefix("sleep(")
        .and_then(|a| a.strip_suffix(')'))
    {
        Some(ms) => Action::Sleep(Duration::from_millis(ms.parse().unwrap_or(1000))),
        None if action == "error" => Action::Error,
        None => Action::Kill,
    };
    let (name, nth) = match point.split_once('@') {
        Some((n, k)) => (n.to_string(), k.parse().unwrap_or(1)),
        None => (point.to_string(), 1),
    };
    Some((name, nth, action))
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

/// The failpoint a batch reaches once its quarantined rows are committed to the
/// quarantine table, before its own commit (`pipeline/batch.rs`).
pub const QUARANTINE_COMMITTED: &str = "after-quarantine-commit";

/// Failpoints of `autoloader reset`, in the order it reaches them (`tests/it/reset.rs`).
pub const RESET_NAMES: &[&str] = &[
    "reset-after-lock",
    "reset-after-commit",
    "reset-mid-aside",
    "reset-after-aside",
];

/// Failpoints of `autoloader optimize`, in the order it reaches them (`tests/it/optimize.rs`).
pub const OPTIMIZE_NAMES: &[&str] = &[
    "optimize-mid-read",
    "before-optimize-commit",
    "after-optimize-commit",
];

/// The failpoint notification mode reaches once a plan's queue messages are deleted,
/// before the batch is read (`pipeline/stream.rs`, `tests/it/sqs.rs`).
pub const AFTER_QUEUE_DELETE: &str = "after-queue-delete";

/// The failpoint a competing worker (`--worker`) reaches once its batch's files are
/// claimed, before their queue messages are deleted (`pipeline/stream.rs`).
pub const AFTER_CLAIMS: &str = "after-claims";

/// The failpoint a ONCE flow reaches after recording its completion (`pipeline/once.rs`).
pub const ONCE_COMPLETE: &str = "after-once-complete";

/// The failpoint a stream reaches after recording its flow's definition in its checkpoint
/// (`pipeline/definition.rs`): before its first plan, on a change, and once a table
/// commit carries it.
pub const DEFINITION_RECORDED: &str = "after-definition-recorded";

/// The failpoint hit when a file starts being read: `read:<file name>` arms a file that
/// crashes the process every time it is read (the quarantine tests).
pub fn read_point(file_name: &str) -> String {
    format!("read:{file_name}")
}

/// `lose-events:<file name>=error` drops every file event for that name, as if the kernel
/// had lost them, so a test can show the watcher's backstop listing finds the file.
pub fn loses_events_of(file_name: &str) -> bool {
    matches!(TARGET.as_ref(), Some((target, _, Action::Error))
        if target.strip_prefix("lose-events:") == Some(file_name))
}

/// Whether the step `name` should report an injected error (`<name>=error`), for the
/// armed hit. Steps that can fail after their effect (a commit that landed) use this.
pub fn fails(name: &str) -> bool {
    matches!(TARGET.as_ref(), Some((target, nth, Action::Error))
        if target == name && HITS.fetch_add(1, Ordering::SeqCst) + 1 == *nth)
}

/// Whether any failpoint is armed (lets a caller skip building a failpoint name).
pub fn armed() -> bool {
    TARGET.is_some()
}

/// Acts if `name` is the armed failpoint and this is the armed hit.
pub fn hit(name: &str) {
    if let Some((target, nth, action)) = TARGET.as_ref()
        && target == name
        && HITS.fetch_add(1, Ordering::SeqCst) + 1 == *nth
    {
        match action {
            Action::Kill => {
                eprintln!("failpoint {name} reached: killing the process");
                // SAFETY: kill(2) on our own pid has no memory-safety preconditions.
                unsafe {
                    libc::kill(libc::getpid(), libc::SIGKILL);
                }
            }
            Action::Sleep(d) => {
                eprintln!("failpoint {name} reached: sleeping {d:?}");
                std::thread::sleep(*d);
            }
            Action::Error => {}
        }
    }
}
