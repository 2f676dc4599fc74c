//! Hooks for the crash and fuzz tests: named failpoints, and fuzz entry points.

pub mod failpoint;
/// Entry points for `cargo fuzz` and the `fuzz_smoke` tests; not a stable API.
#[doc(hidden)]
pub mod fuzzing;
