//! Watch mode: a real watcher process, real files landing (renamed in, written slowly in
//! pieces), SIGTERM, restart.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::{self, Scratch, ok, read_table, summary_figure, wait_until};

pub(crate) fn start_watcher(s: &Scratch, options: &[&str]) -> Child {
    start_watcher_with_env(s, options, &[])
}

fn start_watcher_with_env(s: &Scratch, options: &[&str], env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_autoloader"));
    cmd.args([
        "ingest",
        s.landing().to_str().unwrap(),
        s.table().to_str().unwrap(),
        "--poll-interval",
        "0.5",
    ]);
    for o in options {
        cmd.args(["-o", o]);
    }
    cmd.env("RUST_LOG", "autoloader=debug")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the table holds `rows` rows (or fails after a timeout).
fn wait_for_rows(s: &Scratch, rows: usize) {
    wait_until(
        &format!("the table to reach {rows} rows"),
        Duration::from_secs(30),
        || {
            s.table().join("_delta_log").exists()
                && common::row_count(&read_table(&s.table())) >= rows
        },
    );
}

pub(crate) fn sigterm(child: &Child) {
    // SAFETY: kill(2) with a valid pid of our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
}

#[test]
fn watcher_ingests_files_as_they_land_and_stops_cleanly_on_sigterm() {
    let s = Scratch::new();
    let opts = ["cloudFiles.format=json", "cloudFiles.settleTime=1s"];
    let child = start_watcher(&s, &opts);

    // Written elsewhere, renamed in: complete at once.
    let tmp = s.landing().join(".upload.tmp");
    std::fs::write(&tmp, common::orders_jsonl(0, 10)).unwrap();
    std::fs::rename(&tmp, s.landing().join("a.json")).unwrap();
    wait_for_rows(&s, 10);

    // Written slowly in pieces, pausing longer than the settle time: taken once, whole.
    let mut slow = std::fs::File::create(s.landing().join("slow.json")).unwrap();
    slow.write_all(common::orders_jsonl(10, 15).as_bytes())
        .unwrap();
    slow.flush().unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    slow.write_all(common::orders_jsonl(15, 20).as_bytes())
        .unwrap();
    drop(slow);
    wait_for_rows(&s, 20);

    // A file landing in a new sub-folder is found too.
    s.land("2026/03/15/c.json", common::orders_jsonl(20, 25));
    wait_for_rows(&s, 25);

    sigterm(&child);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "SIGTERM exits 0: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(summary_figure(&stdout, "rows"), 25, "{stdout}");

    s.assert_ids_once(
        0..25,
        "every row once; the slow file was not taken half-written",
    );
    let again = ok(&s.ingest(&opts));
    assert_eq!(
        summary_figure(&again, "files"),
        0,
        "a restart finds nothing new"
    );
}

#[test]
fn overwritten_files_are_not_reread_unless_allowed() {
    let s = Scratch::new();
    let path = s.land("a.json", common::orders_jsonl(0, 3));
    // A minute ago, so the overwrite below has a later modification time.
    common::files::set_mtime_in_order(&path, 0);
    ok(&s.ingest(&[]));
    std::fs::write(&path, common::orders_jsonl(0, 5)).unwrap();
    let out = s.ingest(&[]);
    let stdout = ok(&out);
    assert_eq!(summary_figure(&stdout, "files"), 0);
    assert!(
        common::stderr(&out).contains("File changed after it was ingested"),
        "{}",
        common::stderr(&out)
    );
    let out = ok(&s.ingest(&["cloudFiles.allowOverwrites=true"]));
    assert_eq!(
        summary_figure(&out, "rows"),
        5,
        "the latest version is ingested again"
    );
    assert_eq!(common::row_count(&read_table(&s.table())), 8);
}

/// Renames a file written under a temporary name into the landing folder.
fn rename_in(s: &Scratch, name: &str, content: String) {
    let tmp = s.landing().join(format!(".{name}.tmp"));
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, s.landing().join(name)).unwrap();
}

fn stop_and_stderr(child: Child) -> String {
    sigterm(&child);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{:?}\n{stderr}", out.status);
    stderr
}

#[test]
fn file_events_drive_a_local_watcher_without_listing_the_folder() {
    let s = Scratch::new();
    // Files already in the folder: found by the one listing at the start.
    for i in 0..3 {
        s.land(
            &format!("old-{i}.json"),
            common::orders_jsonl(i * 2, i * 2 + 2),
        );
    }
    let opts = [
        "cloudFiles.format=json",
        "cloudFiles.backfillInterval=1 hour",
    ];
    let child = start_watcher(&s, &opts);
    wait_for_rows(&s, 6);
    for i in 0..4 {
        rename_in(
            &s,
            &format!("new-{i}.json"),
            common::orders_jsonl(6 + i * 2, 8 + i * 2),
        );
        wait_for_rows(&s, 8 + i as usize * 2);
    }
    // A folder written under a hidden name (no events are kept for it) and renamed in:
    // its one event has the folder looked at whole.
    let staging = s.landing().join("_staging/2026-12-01");
    std::fs::create_dir_all(&staging).unwrap();
    std::fs::write(staging.join("x.json"), common::orders_jsonl(14, 17)).unwrap();
    std::fs::rename(&staging, s.landing().join("2026-12-01")).unwrap();
    wait_for_rows(&s, 17);
    // New nested folders: each folder's event and the file's own name the same file,
    // which lands once.
    s.land("2027/01/02/d.json", common::orders_jsonl(17, 20));
    wait_for_rows(&s, 20);
    // Idle for several poll intervals (0.5 s): no listing.
    std::thread::sleep(Duration::from_secs(2));
    let stderr = stop_and_stderr(child);
    let listings = stderr.matches("Listed the source.").count();
    assert_eq!(
        listings, 1,
        "only the start lists the folder; events name the rest\n{stderr}"
    );
    assert!(stderr.contains("Looked at the changed keys."), "{stderr}");
    s.assert_ids_once(0..20, "every file once, found by its event");
}

#[test]
fn the_backfill_listing_finds_a_file_whose_events_were_lost() {
    let s = Scratch::new();
    let child = start_watcher_with_env(
        &s,
        &["cloudFiles.format=json", "cloudFiles.backfillInterval=2s"],
        &[("AUTOLOADER_FAILPOINT", "lose-events:lost.json=error")],
    );
    rename_in(&s, "seen.json", common::orders_jsonl(0, 2));
    wait_for_rows(&s, 2);
    rename_in(&s, "lost.json", common::orders_jsonl(2, 5));
    wait_for_rows(&s, 5);
    let stderr = stop_and_stderr(child);
    assert!(
        stderr.contains("Listing the whole source (backfill)."),
        "the lost file came from the backfill listing\n{stderr}"
    );
    s.assert_ids_once(0..5, "the lost file once, nothing else twice");
}
