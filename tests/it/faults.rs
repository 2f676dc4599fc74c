//! Disk full and permission errors: a clean stop with a message naming the path, and a clean
//! resume once fixed, with every row exactly once.
//!
//! A full disk is a real small tmpfs, mounted in a private mount namespace (`unshare -rm`)
//! so the tests need no privileges beyond what user namespaces give; the whole scenario runs
//! inside it, and the table is copied out to be checked. Permissions are checked by running
//! the binary as `nobody` (root ignores file modes), so that test needs root.
//!
//! A machine that cannot give these (no user namespaces, not root) fails the tests with a
//! message saying so; `AUTOLOADER_TEST_SKIP_FAULTS=1` says to skip them there instead.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{self, Scratch};

/// The variable that, set to `1`, skips these tests on a machine that cannot run them.
const SKIP_VAR: &str = "AUTOLOADER_TEST_SKIP_FAULTS";

/// Whether a test whose requirement `missing` is not met here should skip: only when
/// [`SKIP_VAR`] says so; otherwise it fails, since a test that cannot run proves nothing.
fn skip_without(missing: &str) -> bool {
    if std::env::var(SKIP_VAR).is_ok_and(|v| v == "1") {
        eprintln!("SKIPPED ({SKIP_VAR}=1): {missing}");
        return true;
    }
    panic!(
        "this test cannot run here: {missing}; run it where it can, or set {SKIP_VAR}=1 to \
         skip it explicitly"
    );
}

/// Runs `script` with `sh` in a new user and mount namespace, or `None` when this machine
/// cannot make one and [`SKIP_VAR`] says to skip (otherwise the test fails).
fn in_mount_namespace(script: &str, env: &[(&str, &Path)]) -> Option<Output> {
    let probe = Command::new("unshare").args(["-rm", "true"]).output();
    if !probe.is_ok_and(|o| o.status.success())
        && skip_without("no mount namespace can be made (`unshare -rm true` fails)")
    {
        return None;
    }
    let mut cmd = Command::new("unshare");
    cmd.args(["-rm", "sh", "-c", script])
        .env("BIN", env!("CARGO_BIN_EXE_autoloader"))
        .env("RUST_LOG", "warn")
        .env_remove("AUTOLOADER_FAILPOINT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    Some(cmd.output().unwrap())
}

fn report(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts that a scenario's first run (its exit printed as `first-exit=N`) stopped on the
/// full disk with an error naming the cause and the disk's path, and that the table copied
/// out after the rerun holds `ids`, each once.
fn assert_stopped_then_resumed(
    out: &Output,
    disk: &Path,
    copy: &Path,
    ids: std::ops::Range<u64>,
    context: &str,
) {
    let text = report(out);
    assert!(out.status.success(), "{context}: {text}");
    assert!(
        text.contains("first-exit=1"),
        "{context}: the full disk stops the run: {text}"
    );
    assert!(
        text.contains("No space left on device") && text.contains(&*disk.to_string_lossy()),
        "{context}: the error names the cause and the path: {text}"
    );
    common::assert_table_ids_once(copy, ids, &format!("{context}, then resumed"));
}

#[test]
fn a_full_table_disk_stops_naming_the_path_and_resumes_once_space_is_freed() {
    let s = Scratch::new();
    for i in 0..4u64 {
        s.land(
            &format!("f{i}.json"),
            common::orders_jsonl(i * 20_000, (i + 1) * 20_000),
        );
    }
    let fs = s.dir.path().join("tablefs");
    std::fs::create_dir_all(&fs).unwrap();
    let ckpt = s.dir.path().join("ckpt");
    let copy = s.dir.path().join("copy");
    // Room for the table's creation, not for its first data file.
    let script = r#"
        set -u
        mount -t tmpfs -o size=48k tmpfs "$FS" || exit 90
        "$BIN" ingest "$LANDING" "$FS/table" --once --checkpoint "$CKPT" \
            -o cloudFiles.maxFilesPerTrigger=2
        echo "first-exit=$?"
        mount -o remount,size=64m tmpfs "$FS" || exit 91
        "$BIN" ingest "$LANDING" "$FS/table" --once --checkpoint "$CKPT" \
            -o cloudFiles.maxFilesPerTrigger=2 || exit 92
        cp -r "$FS/table" "$COPY"
    "#;
    let landing = s.landing();
    let Some(out) = in_mount_namespace(
        script,
        &[
            ("FS", &fs),
            ("LANDING", &landing),
            ("CKPT", &ckpt),
            ("COPY", &copy),
        ],
    ) else {
        return;
    };
    assert_stopped_then_resumed(&out, &fs, &copy, 0..80_000, "table disk full");
}

#[test]
fn a_full_checkpoint_disk_after_the_commit_resumes_without_a_duplicate() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 100));
    s.land("b.json", common::orders_jsonl(100, 200));
    let fs = s.dir.path().join("ckptfs");
    std::fs::create_dir_all(&fs).unwrap();
    let copy = s.dir.path().join("copy");
    let table = s.dir.path().join("table");
    // The disk fills while the first batch is being committed: the commit lands, marking
    // it done in the checkpoint fails. The restart must only mark it, not commit it again.
    let script = r#"
        set -u
        mount -t tmpfs -o size=8m tmpfs "$FS" || exit 90
        AUTOLOADER_FAILPOINT='after-delta-commit=sleep(1500)' \
            "$BIN" ingest "$LANDING" "$TABLE" --once --checkpoint "$FS/ckpt" \
            -o cloudFiles.maxFilesPerTrigger=1 2>"$LOG" &
        pid=$!
        # Fill the disk once the run holds after its commit (up to 60 s to get there).
        tries=0
        until grep -q 'failpoint after-delta-commit reached' "$LOG"; do
            kill -0 $pid 2>/dev/null || { cat "$LOG" >&2; echo 'ended before the failpoint' >&2; exit 93; }
            tries=$((tries + 1))
            [ $tries -le 600 ] || { cat "$LOG" >&2; echo 'failpoint not reached in 60 s' >&2; exit 94; }
            sleep 0.1
        done
        dd if=/dev/zero of="$FS/filler" bs=64k 2>/dev/null
        kill -0 $pid 2>/dev/null || { cat "$LOG" >&2; echo 'no longer held once the disk was full' >&2; exit 95; }
        wait $pid
        echo "first-exit=$?"
        cat "$LOG" >&2
        rm -f "$FS/filler"
        "$BIN" ingest "$LANDING" "$TABLE" --once --checkpoint "$FS/ckpt" \
            -o cloudFiles.maxFilesPerTrigger=1 || exit 92
        cp -r "$TABLE" "$COPY"
    "#;
    let landing = s.landing();
    let log = s.dir.path().join("first-run.log");
    let Some(out) = in_mount_namespace(
        script,
        &[
            ("FS", &fs),
            ("LANDING", &landing),
            ("TABLE", &table),
            ("COPY", &copy),
            ("LOG", &log),
        ],
    ) else {
        return;
    };
    assert_stopped_then_resumed(&out, &fs, &copy, 0..200, "checkpoint disk full");
}

#[test]
fn a_read_only_table_folder_stops_naming_it_and_resumes_once_writable() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0
        && skip_without("it needs root, to run the binary as another user")
    {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 50));
    let open = std::fs::Permissions::from_mode(0o777);
    std::fs::set_permissions(s.dir.path(), open.clone()).unwrap();
    std::fs::set_permissions(s.landing(), open.clone()).unwrap();
    std::fs::set_permissions(
        s.landing().join("a.json"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    // Written a while ago: run as another user, `--once` cannot take a lease on root's
    // file to see that no one writes it, and leaves a file modified within the settle time.
    std::fs::File::options()
        .write(true)
        .open(s.landing().join("a.json"))
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60))
        .unwrap();
    let table = s.table();
    let ckpt = s.dir.path().join("ckpt");
    std::fs::create_dir_all(&table).unwrap();
    std::fs::create_dir_all(&ckpt).unwrap();
    std::fs::set_permissions(&ckpt, open.clone()).unwrap();
    std::fs::set_permissions(&table, std::fs::Permissions::from_mode(0o555)).unwrap();
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_autoloader"))
            .args(["ingest"])
            .arg(s.landing())
            .arg(&table)
            .arg("--once")
            .arg("--checkpoint")
            .arg(&ckpt)
            .env("RUST_LOG", "warn")
            .env_remove("AUTOLOADER_FAILPOINT")
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap()
    };
    let out = run();
    let text = report(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("Permission denied") && text.contains(&*table.to_string_lossy()),
        "the error names the cause and the table: {text}"
    );
    std::fs::set_permissions(&table, open).unwrap();
    let out = run();
    assert!(out.status.success(), "{}", report(&out));
    s.assert_ids_once(0..50, "after the fix");
}
