//! ONCE flows (`once = true`): a one-time backfill that lands once across runs, watch mode,
//! a lost checkpoint and kills; runs again after a full refresh of its table (not after a
//! checkpoints-only reset); a changed definition is skipped unless `--rerun-once NAME`.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Output;

use crate::common::{self, Scratch, ok, run};

/// `bronze/orders` with stream `a` (`land/a`, ids 0..20) and the ONCE flow `backfill`
/// (`archive`, three files, ids 500..530).
struct Backfill {
    s: Scratch,
    config: PathBuf,
}

const STREAMS: &str = r#"
[[stream]]
name = "a"
source = "land/a"
table = "bronze/orders"

[[stream]]
name = "backfill"
source = "archive"
table = "bronze/orders"
once = true
options = { "cloudFiles.maxFilesPerTrigger" = 1 }
"#;

impl Backfill {
    fn new() -> Backfill {
        let s = Scratch::new();
        let dir = s.dir.path();
        std::fs::create_dir_all(dir.join("land/a")).unwrap();
        std::fs::create_dir_all(dir.join("archive")).unwrap();
        for f in 0..2u64 {
            std::fs::write(
                dir.join(format!("land/a/f{f}.json")),
                common::orders_jsonl(f * 10, f * 10 + 10),
            )
            .unwrap();
        }
        for f in 0..3u64 {
            std::fs::write(
                dir.join(format!("archive/old{f}.json")),
                common::orders_jsonl(500 + f * 10, 510 + f * 10),
            )
            .unwrap();
        }
        let config = dir.join("streams.toml");
        std::fs::write(&config, STREAMS).unwrap();
        Backfill { s, config }
    }

    fn table(&self) -> PathBuf {
        self.s.dir.path().join("bronze/orders")
    }

    fn run(&self, extra: &[&str], env: &[(&str, &str)]) -> Output {
        let mut args = vec![
            "run".to_string(),
            self.config.display().to_string(),
            "--once".to_string(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_string()));
        run(&args, env)
    }

    fn reset(&self, extra: &[&str]) -> String {
        let mut args = vec![
            "reset".to_string(),
            self.table().display().to_string(),
            "--config".into(),
            self.config.display().to_string(),
            "--yes".into(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_string()));
        ok(&run(&args, &[]))
    }

    fn ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> =
            common::column_strings(&common::read_table(&self.table()), "order_id")
                .iter()
                .map(|v| v.parse().unwrap())
                .collect();
        ids.sort_unstable();
        ids
    }
}

/// `ranges`, each id as many times as it occurs in them, sorted.
fn expected(ranges: &[std::ops::Range<u64>]) -> Vec<u64> {
    let mut all: Vec<u64> = ranges.iter().flat_map(Clone::clone).collect();
    all.sort_unstable();
    all
}

fn line_of<'a>(out: &'a str, stream: &str) -> &'a str {
    let prefix = format!("[{stream}] ");
    out.lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no line for {stream} in {out}"))
}

#[test]
fn a_once_backfill_lands_once_across_runs_watch_mode_and_a_lost_checkpoint() {
    let b = Backfill::new();
    let out = ok(&b.run(&[], &[]));
    assert!(
        line_of(&out, "backfill").contains("ingested 3 files")
            && line_of(&out, "backfill").contains("ran to completion"),
        "{out}"
    );
    assert_eq!(b.ids(), expected(&[0..20, 500..530]));
    // A file that arrives in the archive later is not taken: the flow is done.
    std::fs::write(
        b.s.dir.path().join("archive/late.json"),
        common::orders_jsonl(900, 905),
    )
    .unwrap();
    let out = ok(&b.run(&[], &[]));
    assert_eq!(
        line_of(&out, "backfill"),
        "[backfill] ONCE flow: ran already; skipped"
    );
    // Its completion is in the table: a lost checkpoint does not make it run again.
    std::fs::remove_dir_all(b.table().join("_autoloader/backfill")).unwrap();
    let out = ok(&b.run(&[], &[]));
    assert!(
        line_of(&out, "backfill").contains("ran already; skipped"),
        "{out}"
    );
    // Watch mode skips it too and says so, while the other stream watches.
    let watch = std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
        .args(["run", b.config.to_str().unwrap(), "--poll-interval", "0.2"])
        .env_remove("AUTOLOADER_FAILPOINT")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(600));
    std::fs::write(
        b.s.dir.path().join("land/a/f2.json"),
        common::orders_jsonl(20, 25),
    )
    .unwrap();
    common::wait_until(
        "the watcher lands f2",
        std::time::Duration::from_secs(20),
        || b.ids().len() == 55,
    );
    // SAFETY: kill(2) on the child we started.
    unsafe {
        libc::kill(watch.id() as i32, libc::SIGTERM);
    }
    let done = watch.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&done.stdout);
    assert!(done.status.success(), "{out}");
    assert!(
        line_of(&out, "backfill").contains("ran already; skipped"),
        "{out}"
    );
    assert_eq!(b.ids(), expected(&[0..25, 500..530]));
    // Its completion: one txn of the ONCE app id.
    let (_, txns) = common::table_version_and_txns(&b.table());
    assert!(txns.contains_key("autoloader-once-backfill"), "{txns:?}");
}

#[test]
fn a_full_refresh_runs_a_once_flow_again_exactly_once_a_checkpoints_only_reset_does_not() {
    let b = Backfill::new();
    ok(&b.run(&[], &[]));
    let said = b.reset(&[]);
    assert!(
        said.contains("flow backfill (ONCE flow: it runs again, re-reading its 3 source files)"),
        "{said}"
    );
    assert!(b.ids().is_empty());
    let out = ok(&b.run(&[], &[]));
    assert!(
        line_of(&out, "backfill").contains("ran to completion"),
        "{out}"
    );
    assert_eq!(
        b.ids(),
        expected(&[0..20, 500..530]),
        "each source row once"
    );
    let out = ok(&b.run(&[], &[]));
    assert!(
        line_of(&out, "backfill").contains("ran already; skipped"),
        "{out}"
    );
    // Checkpoints only: the streaming flow lands its rows again, the ONCE flow does not.
    let said = b.reset(&["--checkpoints-only"]);
    assert!(
        said.contains("(ONCE flow: it does not run again)"),
        "{said}"
    );
    let out = ok(&b.run(&[], &[]));
    assert!(
        line_of(&out, "backfill").contains("ran already; skipped"),
        "{out}"
    );
    assert_eq!(b.ids(), expected(&[0..20, 0..20, 500..530]));
}

#[test]
fn a_changed_definition_warns_and_skips_and_rerun_once_runs_it_again() {
    let b = Backfill::new();
    ok(&b.run(&[], &[]));
    // A batch size is no part of its definition: still done.
    std::fs::write(
        &b.config,
        STREAMS.replace(
            "\"cloudFiles.maxFilesPerTrigger\" = 1",
            "\"cloudFiles.maxFilesPerTrigger\" = 2",
        ),
    )
    .unwrap();
    let out = ok(&b.run(&[], &[]));
    assert!(
        line_of(&out, "backfill").contains("ran already; skipped"),
        "{out}"
    );
    // The definition changes (a where condition).
    std::fs::write(
        &b.config,
        STREAMS.replace(
            "once = true",
            "once = true\nwhere = \"user_id IS NOT NULL\"",
        ),
    )
    .unwrap();
    let out = b.run(&[], &[]);
    let stdout = ok(&out);
    let err = common::stderr(&out);
    assert!(
        line_of(&stdout, "backfill").contains("definition changed since it ran; skipped"),
        "{stdout}"
    );
    assert!(err.contains("--rerun-once backfill"), "{err}");
    assert!(err.contains("where"), "the warning names the change: {err}");
    assert_eq!(b.ids(), expected(&[0..20, 500..530]), "not run again");
    // An unknown name is refused before anything runs.
    let out = b.run(&["--rerun-once", "nosuch"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    // Asked for: it runs again (its rows land again), and records the new definition.
    let out = ok(&b.run(&["--rerun-once", "backfill"], &[]));
    assert!(
        line_of(&out, "backfill").contains("ran to completion"),
        "{out}"
    );
    assert_eq!(b.ids(), expected(&[0..20, 500..530, 500..530]));
    let out = ok(&b.run(&[], &[]));
    assert!(
        line_of(&out, "backfill").contains("ran already; skipped"),
        "{out}"
    );
    // A lost checkpoint after the rerun: still done, nothing lands a third time.
    std::fs::remove_dir_all(b.table().join("_autoloader/backfill")).unwrap();
    let out = ok(&b.run(&["--rerun-once", "backfill"], &[]));
    assert!(
        line_of(&out, "backfill").contains("ran to completion"),
        "{out}"
    );
    assert_eq!(
        b.ids(),
        expected(&[0..20, 500..530, 500..530, 500..530]),
        "a rerun asked for again lands once more, not more"
    );
}

#[test]
fn a_once_flow_killed_at_each_step_lands_exactly_once() {
    let points = [
        "after-plan",
        "before-delta-commit",
        "after-delta-commit",
        "after-delta-commit@2",
        "after-mark",
        "after-delta-commit@3",
        autoloader::testing::failpoint::ONCE_COMPLETE,
    ];
    for point in points {
        let b = Backfill::new();
        let only = ["--stream", "backfill"];
        let killed = b.run(&only, &[("AUTOLOADER_FAILPOINT", point)]);
        assert_eq!(
            killed.status.signal(),
            Some(9),
            "{point}: {}",
            common::stderr(&killed)
        );
        let out = ok(&b.run(&only, &[]));
        assert!(
            line_of(&out, "backfill").contains("ONCE flow"),
            "{point}: {out}"
        );
        assert_eq!(
            b.ids(),
            (500..530).collect::<Vec<u64>>(),
            "{point}: exactly once"
        );
        let out = ok(&b.run(&only, &[]));
        assert!(
            line_of(&out, "backfill").contains("ran already; skipped"),
            "{point}: {out}"
        );
        assert_eq!(b.ids(), (500..530).collect::<Vec<u64>>(), "{point}");
    }
}

#[test]
fn a_rerun_killed_midway_is_continued_by_the_next_run_not_restarted() {
    let b = Backfill::new();
    let only = ["--stream", "backfill"];
    ok(&b.run(&only, &[]));
    let killed = b.run(
        &["--stream", "backfill", "--rerun-once", "backfill"],
        &[("AUTOLOADER_FAILPOINT", "after-delta-commit@2")],
    );
    assert_eq!(
        killed.status.signal(),
        Some(9),
        "{}",
        common::stderr(&killed)
    );
    // With or without the flag again, the rerun goes on from where it was.
    let out = ok(&b.run(&["--stream", "backfill", "--rerun-once", "backfill"], &[]));
    assert!(
        line_of(&out, "backfill").contains("ingested 1 file"),
        "{out}"
    );
    assert_eq!(b.ids(), expected(&[500..530, 500..530]));
    let out = ok(&b.run(&only, &[]));
    assert!(
        line_of(&out, "backfill").contains("ran already; skipped"),
        "{out}"
    );
}

/// A ONCE flow's source may be one file: only it is read, once.
#[test]
fn a_single_file_is_a_once_flow_source() {
    let b = Backfill::new();
    std::fs::write(
        &b.config,
        STREAMS.replace("source = \"archive\"", "source = \"archive/old1.json\""),
    )
    .unwrap();
    let only = ["--stream", "backfill"];
    let out = ok(&b.run(&only, &[]));
    assert!(
        line_of(&out, "backfill").contains("ingested 1 file")
            && line_of(&out, "backfill").contains("ran to completion"),
        "{out}"
    );
    assert_eq!(b.ids(), (510..520).collect::<Vec<u64>>());
    let py = common::read_with_python(&b.table(), "order_id");
    assert!(
        py["rows"][0]["_metadata"]["file_path"]
            .as_str()
            .unwrap()
            .ends_with("/archive/old1.json"),
        "{py}"
    );
    let out = ok(&b.run(&only, &[]));
    assert!(
        line_of(&out, "backfill").contains("ran already; skipped"),
        "{out}"
    );
}
