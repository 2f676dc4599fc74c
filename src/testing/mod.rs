//! Hooks for the crash and fuzz tests and the benchmarks: named failpoints, fuzz entry
//! points, and a per-file read delay.

pub mod failpoint;
/// Entry points for `cargo fuzz` and the `fuzz_smoke` tests; not a stable API.
#[doc(hidden)]
pub mod fuzzing;
pub mod read_delay;

/// A seeded xorshift64 sequence for unit tests: the same on every machine, no dependency.
#[cfg(test)]
pub(crate) fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}
