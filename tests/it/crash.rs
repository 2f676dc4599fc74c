//! Crash consistency: the process is killed (SIGKILL, through named failpoints) at every
//! step of the ingest path; rerunning the same command must leave every input row in the
//! table exactly once, with `txn` versions and the checkpoint agreeing.

use std::os::unix::process::ExitStatusExt;

use crate::common::{self, Scratch, column_strings, ok, read_table, summary_figure};

fn assert_exactly_once(s: &Scratch, expected: std::ops::Range<u64>, context: &str) {
    let batches = read_table(&s.table());
    let mut ids: Vec<u64> = column_strings(&batches, "order_id")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        expected.collect::<Vec<_>>(),
        "{context}: rows must be the input, once each"
    );
}

#[test]
fn every_failpoint_then_restart_loses_and_duplicates_nothing() {
    for name in autoloader::failpoint::NAMES
        .iter()
        .filter(|n| **n != "after-schema-evolve")
    {
        let s = Scratch::new();
        for i in 0..4u64 {
            s.land(
                &format!("f{i}.json"),
                common::orders_jsonl(i * 100, i * 100 + 100),
            );
        }
        let crashed = s.ingest_with_env(
            &["cloudFiles.maxFilesPerTrigger=2"],
            &[("AUTOLOADER_FAILPOINT", name)],
        );
        assert_eq!(
            crashed.status.signal(),
            Some(9),
            "failpoint {name} must kill the process: {}",
            common::stderr(&crashed)
        );
        // A file lands while the stream is down.
        s.land("late.json", common::orders_jsonl(400, 450));
        ok(&s.ingest(&["cloudFiles.maxFilesPerTrigger=2"]));
        assert_exactly_once(&s, 0..450, name);
        // The checkpoint agrees with the table: nothing left to do.
        let again = ok(&s.ingest(&["cloudFiles.maxFilesPerTrigger=2"]));
        assert_eq!(
            summary_figure(&again, "files"),
            0,
            "{name}: a third run finds nothing new"
        );
        let (_, txns) = common::table_version_and_txns(&s.table());
        assert_eq!(txns.len(), 1, "{name}: one stream, one app id");
        assert_eq!(
            *txns.values().next().unwrap(),
            2,
            "{name}: 5 files in batches of 2 are txn versions 0..=2"
        );
    }
}

#[test]
fn a_crash_in_the_second_batch_keeps_the_first() {
    let s = Scratch::new();
    for i in 0..4u64 {
        s.land(
            &format!("f{i}.json"),
            common::orders_jsonl(i * 10, i * 10 + 10),
        );
    }
    let crashed = s.ingest_with_env(
        &["cloudFiles.maxFilesPerTrigger=1"],
        &[("AUTOLOADER_FAILPOINT", "after-delta-commit@2")],
    );
    assert_eq!(crashed.status.signal(), Some(9));
    assert_exactly_once(&s, 0..20, "after the crash, two batches are in the table");
    let out = ok(&s.ingest(&["cloudFiles.maxFilesPerTrigger=1"]));
    assert_eq!(
        summary_figure(&out, "files"),
        2,
        "the committed-but-unmarked batch is only marked, not re-read"
    );
    assert_exactly_once(&s, 0..40, "after the restart");
}

#[test]
fn a_crash_right_after_schema_evolution_resumes_with_the_new_version() {
    let s = Scratch::new();
    let opts = ["cloudFiles.inferColumnTypes=true"];
    s.land("1.json", common::orders_jsonl(0, 5));
    ok(&s.ingest(&opts));
    s.land("2.json", "{\"order_id\": 5, \"coupon_code\": \"X\"}\n");
    let crashed = s.ingest_with_env(&opts, &[("AUTOLOADER_FAILPOINT", "after-schema-evolve")]);
    assert_eq!(crashed.status.signal(), Some(9));
    assert!(s.table().join("_autoloader/_schemas/1").exists());
    ok(&s.ingest(&opts));
    assert_exactly_once(&s, 0..6, "after the evolution crash");
    assert_eq!(
        column_strings(&read_table(&s.table()), "coupon_code")
            .iter()
            .filter(|v| *v == "X")
            .count(),
        1
    );
}
