//! The crash-at-every-step loop shared by the CDC flows' tests (`cdc.rs`, `scd2.rs`,
//! `snapshot_cdc.rs`): kill the run at one failpoint, run it again, compare the table with
//! an uninterrupted run's.

use std::os::unix::process::ExitStatusExt;

use super::{ok, run, stderr};

/// The failpoints a CDC flow passes on its way to the table: the ingest path's, less the
/// schema evolution (these flows' schemas do not change), and the CDC target's commit.
pub fn cdc_failpoints() -> Vec<&'static str> {
    autoloader::testing::failpoint::NAMES
        .iter()
        .copied()
        .filter(|n| *n != "after-schema-evolve")
        .chain(["after-cdc-target-commit"])
        .collect()
}

/// Runs `args` with the process killed at the `nth` hit of failpoint `name`, then runs it
/// again to completion. Every step but the schema write (once per stream) is reached `nth`
/// times, so only that one may let the first run finish.
pub fn kill_at_then_rerun(args: &[String], name: &str, nth: u32) {
    let crashed = run(args, &[("AUTOLOADER_FAILPOINT", &format!("{name}@{nth}"))]);
    let killed = crashed.status.signal() == Some(9);
    assert!(
        killed || name == "after-schema-write",
        "{name}: {}",
        stderr(&crashed)
    );
    ok(&run(args, &[]));
}
