//! Hooks for the crash and fuzz tests and the benchmarks: named failpoints, fuzz entry
//! points, and a per-file read delay.

pub mod failpoint;
/// Entry points for `cargo fuzz` and the `fuzz_smoke` tests; not a stable API.
#[doc(hidden)]
pub mod fuzzing;
pub mod read_delay;
