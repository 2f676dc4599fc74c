//! Crash consistency: the process is killed (SIGKILL, through named failpoints) at every
//! step of the ingest path; rerunning the same command must leave every input row in the
//! table exactly once, with `txn` versions and the checkpoint agreeing.

use std::os::unix::process::ExitStatusExt;

use crate::common::{self, Scratch, column_strings, ok, read_table, summary_figure, wait_until};

#[test]
fn every_failpoint_then_restart_loses_and_duplicates_nothing() {
    for name in autoloader::testing::failpoint::NAMES
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
        s.assert_ids_once(0..450, name);
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
    s.assert_ids_once(0..20, "after the crash, two batches are in the table");
    let out = ok(&s.ingest(&["cloudFiles.maxFilesPerTrigger=1"]));
    assert_eq!(
        summary_figure(&out, "files"),
        2,
        "the committed-but-unmarked batch is only marked, not re-read"
    );
    s.assert_ids_once(0..40, "after the restart");
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
    s.assert_ids_once(0..6, "after the evolution crash");
    assert_eq!(
        column_strings(&read_table(&s.table()), "coupon_code")
            .iter()
            .filter(|v| *v == "X")
            .count(),
        1
    );
}

#[test]
fn a_second_process_is_refused_naming_the_holder_and_a_dead_holder_does_not_block() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 10));
    let mut holder = s
        .ingest_command()
        .env("AUTOLOADER_FAILPOINT", "after-plan=sleep(20000)")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lock = s.table().join("_autoloader/lock");
    let pid = format!("pid {}", holder.id());
    wait_until(
        "the holder to take the lock",
        std::time::Duration::from_secs(20),
        || {
            std::fs::read_to_string(&lock)
                .unwrap_or_default()
                .contains(&pid)
        },
    );
    let started = std::time::Instant::now();
    let refused = s.ingest(&[]);
    let waited = started.elapsed();
    assert_eq!(
        refused.status.code(),
        Some(75),
        "{}",
        common::stderr(&refused)
    );
    assert!(
        common::stderr(&refused).contains(&pid),
        "the holder is named: {}",
        common::stderr(&refused)
    );
    assert!(
        waited < std::time::Duration::from_secs(1),
        "refused within a second, took {waited:?}"
    );
    // The holder dies without cleaning up: its lock goes with it.
    holder.kill().unwrap();
    holder.wait().unwrap();
    ok(&s.ingest(&[]));
    s.assert_ids_once(0..10, "after the holder died");
}

/// Kills the process at pseudo-random moments while it ingests, restarting each time,
/// until a run completes; then every row must be there exactly once.
#[test]
fn random_sigkills_never_lose_or_duplicate_rows() {
    let s = Scratch::new();
    // AUTOLOADER_CHAOS_FILES scales the run: the CI default is quick; a long soak is e.g.
    // `AUTOLOADER_CHAOS_FILES=2000 cargo test --release --test it random_sigkills -- --nocapture`.
    let files: u64 = std::env::var("AUTOLOADER_CHAOS_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let per_file = 5000u64;
    for i in 0..files {
        s.land(
            &format!("f{i:02}.json"),
            common::orders_jsonl(i * per_file, (i + 1) * per_file),
        );
    }
    let mut args: Vec<String> = s
        .ingest_command()
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    args.extend(["-o".into(), "cloudFiles.maxFilesPerTrigger=3".into()]);
    let kills = common::sigkill_until_done(&args, |_| {});
    eprintln!("random_sigkills: {kills} kills before a run completed");
    assert!(kills > 0, "no run was ever killed: the test proved nothing");
    ok(&s.ingest(&[]));
    s.assert_ids_once(0..files * per_file, &format!("after {kills} kills"));
}

/// A commit that landed but reported an error must not be committed again.
#[test]
fn an_ambiguous_commit_is_not_committed_twice() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 10));
    let out = s.ingest_with_env(
        &[],
        &[
            ("AUTOLOADER_FAILPOINT", "commit-reports-error=error"),
            ("RUST_LOG", "autoloader=info"),
        ],
    );
    let stdout = ok(&out);
    assert!(
        common::stderr(&out).contains("The batch had landed; not committing it again."),
        "{}",
        common::stderr(&out)
    );
    assert_eq!(summary_figure(&stdout, "rows"), 10);
    s.assert_ids_once(0..10, "after an ambiguous commit");
    let (version, _) = common::table_version_and_txns(&s.table());
    assert_eq!(version, 1, "create + one append: no second commit");
    assert_eq!(summary_figure(&ok(&s.ingest(&[])), "files"), 0);
}

#[test]
fn a_lost_or_damaged_checkpoint_is_rebuilt_from_the_table_without_duplicates() {
    for damage in [
        "delete the checkpoint",
        "garbage state file",
        "truncated state file",
    ] {
        let s = Scratch::new();
        s.land("a.json", common::orders_jsonl(0, 10));
        s.land("b.json", common::orders_jsonl(10, 20));
        ok(&s.ingest(&["cloudFiles.maxFilesPerTrigger=1"]));
        let ckpt = s.table().join("_autoloader");
        let state = ckpt.join("state.redb");
        match damage {
            "delete the checkpoint" => std::fs::remove_dir_all(&ckpt).unwrap(),
            "garbage state file" => std::fs::write(&state, b"this is not a database").unwrap(),
            _ => {
                let len = std::fs::metadata(&state).unwrap().len();
                std::fs::File::options()
                    .write(true)
                    .open(&state)
                    .unwrap()
                    .set_len(len / 3)
                    .unwrap();
            }
        }
        s.land("c.json", common::orders_jsonl(20, 25));
        let out = s.ingest_with_env(
            &["cloudFiles.maxFilesPerTrigger=1"],
            &[("RUST_LOG", "autoloader=warn")],
        );
        let stdout = ok(&out);
        assert!(
            common::stderr(&out).contains("Checkpoint rebuilt from the table's commit history"),
            "{damage}: {}",
            common::stderr(&out)
        );
        assert_eq!(
            summary_figure(&stdout, "files"),
            1,
            "{damage}: only the new file is ingested"
        );
        s.assert_ids_once(0..25, damage);
        let (_, txns) = common::table_version_and_txns(&s.table());
        assert_eq!(
            txns.len(),
            1,
            "{damage}: the stream kept its identity: {txns:?}"
        );
        assert_eq!(
            *txns.values().next().unwrap(),
            2,
            "{damage}: txn versions continue"
        );
    }
}

/// A file that crashes the process every time it is read: after three re-runs died reading
/// it its batch is read one file per batch; after three more the file alone is quarantined
/// (recorded, reported, not read again) and every other file lands exactly once.
#[test]
fn a_file_that_crashes_every_read_is_quarantined_and_the_rest_lands() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 10));
    s.land("poison.json", common::orders_jsonl(10, 20));
    s.land("c.json", common::orders_jsonl(20, 30));
    let crash = [("AUTOLOADER_FAILPOINT", "read:poison.json")];
    let mut runs = 0;
    let summary = loop {
        runs += 1;
        assert!(runs <= 10, "the crash loop never ended");
        let out = s.ingest_with_env(&[], &crash);
        if out.status.success() {
            break ok(&out);
        }
        assert_eq!(out.status.signal(), Some(9), "{}", common::stderr(&out));
    };
    // The batch of three dies on its first run (not counted: nothing recorded where) and
    // on 3 re-runs; the 5th run splits it (a.json lands) and dies on poison.json alone,
    // which dies on 3 re-runs; the 9th run quarantines it and takes c.json.
    assert_eq!(runs, 9, "{summary}");
    assert!(summary.contains("1 quarantined file,"), "{summary}");
    s.assert_ids_once((0..10).chain(20..30), "all but the quarantined file");
    let events = std::fs::read_to_string(s.table().join("_autoloader/events.jsonl")).unwrap();
    let quarantined: Vec<&str> = events
        .lines()
        .filter(|l| l.contains("\"file_quarantined\""))
        .collect();
    assert_eq!(quarantined.len(), 1, "{events}");
    assert!(quarantined[0].contains("poison.json") && quarantined[0].contains("\"error\""));
    // Not read again, even without the crash.
    assert_eq!(summary_figure(&ok(&s.ingest(&[])), "files"), 0);
}

/// A process killed from outside after a batch's files were read (a deploy, a liveness
/// probe, a preempted node), however many times in a row, never gets a healthy file
/// quarantined: only deaths while reading count.
#[test]
fn kills_after_the_files_are_read_never_quarantine_them() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 10));
    let kill = [("AUTOLOADER_FAILPOINT", "before-delta-commit")];
    for run in 1..=6 {
        let out = s.ingest_with_env(&[], &kill);
        assert_eq!(
            out.status.signal(),
            Some(9),
            "run {run} was not killed: {}",
            common::stderr(&out)
        );
    }
    let summary = ok(&s.ingest(&[]));
    assert!(!summary.contains("quarantined"), "{summary}");
    s.assert_ids_once(0..10, "the file, once");
    let events = std::fs::read_to_string(s.table().join("_autoloader/events.jsonl")).unwrap();
    assert!(!events.contains("file_quarantined"), "{events}");
}
