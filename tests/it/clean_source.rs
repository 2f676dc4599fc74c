//! `cloudFiles.cleanSource`: ingested files deleted or moved out of the landing folder
//! once their rows are committed and the retention passed; never a file whose rows are not
//! in the table, never a file replaced since; a moved file is never ingested again; a kill
//! at any moment leaves each file in exactly one place with its rows once.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::{self, Scratch, ok, run, stderr};

/// Every file under `dir`, relative, `/`-separated.
fn files_under(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(rel);
            }
        }
    }
    out
}

fn land_orders(s: &Scratch, files: u64, per_file: u64) -> BTreeSet<String> {
    (0..files)
        .map(|i| {
            let rel = format!("day-{}/part-{i:03}.json", i % 3);
            s.land(&rel, common::orders_jsonl(i * per_file, (i + 1) * per_file));
            rel
        })
        .collect()
}

fn archive(s: &Scratch) -> PathBuf {
    s.dir.path().join("archive")
}

#[test]
fn move_empties_the_landing_folder_into_the_destination_and_never_ingests_a_file_again() {
    let s = Scratch::new();
    let landed = land_orders(&s, 6, 10);
    let dest = archive(&s);
    let opts = [
        "cloudFiles.cleanSource=MOVE".to_string(),
        format!("cloudFiles.cleanSource.moveDestination={}", dest.display()),
        "cloudFiles.cleanSource.retentionDuration=0s".to_string(),
    ];
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    ok(&s.ingest(&opts));
    s.assert_ids_once(0..60, "after the move");
    assert!(
        files_under(&s.landing()).is_empty(),
        "{:?}",
        files_under(&s.landing())
    );
    assert_eq!(
        files_under(&dest),
        landed,
        "paths under the source are kept"
    );
    let ckpt = s.table().join("_autoloader");
    let events = common::events_of(&ckpt, "file_cleaned");
    assert_eq!(events.len(), 6, "{events:?}");
    assert_eq!(events[0]["action"], "MOVE", "{events:?}");

    // A moved file put back under its name is already ingested: not again.
    let back = s.landing().join("day-0/part-000.json");
    std::fs::create_dir_all(back.parent().unwrap()).unwrap();
    std::fs::copy(dest.join("day-0/part-000.json"), &back).unwrap();
    ok(&s.ingest(&opts));
    s.assert_ids_once(0..60, "a file put back is not ingested twice");
}

#[test]
fn delete_waits_for_the_retention_and_leaves_a_replaced_file() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 5));
    s.land("b.json", common::orders_jsonl(5, 10));
    let opts = [
        "cloudFiles.cleanSource=DELETE",
        "cloudFiles.cleanSource.retentionDuration=2s",
    ];
    let out = s.ingest(&opts);
    assert!(
        stderr(&out).contains("under 7 days"),
        "a short DELETE retention warns: {}",
        stderr(&out)
    );
    ok(&out);
    assert_eq!(files_under(&s.landing()).len(), 2, "not due yet");
    // b.json is replaced before it is due: the new file is not ingested, nor deleted.
    s.land("b.json", common::orders_jsonl(100, 103));
    std::thread::sleep(Duration::from_millis(2200));
    ok(&s.ingest(&opts));
    assert_eq!(
        files_under(&s.landing()),
        BTreeSet::from(["b.json".to_string()]),
        "a.json deleted; the replaced b.json left"
    );
    s.assert_ids_once(0..10, "the rows stay");
}

#[test]
fn clean_source_settings_that_cannot_work_are_refused() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 5));
    let inside = format!(
        "cloudFiles.cleanSource.moveDestination={}",
        s.landing().join("done").display()
    );
    for (opts, needle) in [
        (
            vec!["cloudFiles.cleanSource=MOVE"],
            "needs cloudFiles.cleanSource.moveDestination",
        ),
        (
            vec!["cloudFiles.cleanSource=MOVE", inside.as_str()],
            "outside the source",
        ),
        (
            vec!["cloudFiles.cleanSource=ARCHIVE"],
            "OFF, DELETE or MOVE",
        ),
    ] {
        let out = s.ingest(&opts);
        assert_eq!(out.status.code(), Some(2), "{opts:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{opts:?}: {}", stderr(&out));
    }
    assert!(!s.table().join("_delta_log").exists(), "nothing ran");
}

#[test]
fn a_destination_that_cannot_be_written_warns_and_ingestion_goes_on() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 5));
    let dest = archive(&s);
    // A file where the destination folder should be: no move can succeed (even as root).
    std::fs::write(&dest, "in the way").unwrap();
    let opts = [
        "cloudFiles.cleanSource=MOVE".to_string(),
        format!("cloudFiles.cleanSource.moveDestination={}", dest.display()),
        "cloudFiles.cleanSource.retentionDuration=0s".to_string(),
    ];
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let out = s.ingest(&opts);
    ok(&out);
    assert!(stderr(&out).contains("Cannot clean"), "{}", stderr(&out));
    s.assert_ids_once(0..5, "ingested despite the failed move");
    let ckpt = s.table().join("_autoloader");
    assert_eq!(common::events_of(&ckpt, "clean_failed").len(), 1);
    assert!(s.landing().join("a.json").exists());
    // The way cleared: the next run moves it, and the new file too.
    std::fs::remove_file(&dest).unwrap();
    s.land("b.json", common::orders_jsonl(5, 7));
    ok(&s.ingest(&opts));
    assert!(files_under(&s.landing()).is_empty());
    assert_eq!(
        files_under(&dest),
        BTreeSet::from(["a.json".to_string(), "b.json".to_string()])
    );
    s.assert_ids_once(0..7, "after the retry");
}

#[test]
fn random_sigkills_with_move_leave_every_file_in_one_place_and_its_rows_once() {
    let s = Scratch::new();
    let landed = land_orders(&s, 40, 25);
    let dest = archive(&s);
    let mut args: Vec<String> = vec![
        "ingest".into(),
        s.landing().display().to_string(),
        s.table().display().to_string(),
        "--once".into(),
    ];
    for o in [
        "cloudFiles.cleanSource=MOVE".to_string(),
        format!("cloudFiles.cleanSource.moveDestination={}", dest.display()),
        "cloudFiles.cleanSource.retentionDuration=0s".to_string(),
        "cloudFiles.maxFilesPerTrigger=3".to_string(),
    ] {
        args.push("-o".into());
        args.push(o);
    }
    let landing = s.landing();
    let kills = common::sigkill_until_done(&args, |_| {
        // After every kill: each file is in exactly one of the two places.
        let here = files_under(&landing);
        let there = files_under(&dest);
        assert!(here.is_disjoint(&there), "a file in both places");
        let all: BTreeSet<String> = here.union(&there).cloned().collect();
        assert_eq!(all, landed, "a file lost");
    });
    assert!(kills > 0, "no run was ever killed: the test proved nothing");
    ok(&run(&args, &[]));
    assert!(files_under(&s.landing()).is_empty());
    assert_eq!(files_under(&dest), landed);
    s.assert_ids_once(0..1000, "every row once after the kills");
}

#[test]
fn a_watcher_cleans_in_the_background_once_the_retention_passed() {
    let s = Scratch::new();
    let dest = archive(&s);
    let dest_opt = format!("cloudFiles.cleanSource.moveDestination={}", dest.display());
    let opts = [
        "cloudFiles.format=json",
        "cloudFiles.cleanSource=MOVE",
        dest_opt.as_str(),
        "cloudFiles.cleanSource.retentionDuration=2s",
    ];
    let child = crate::watch::start_watcher(&s, &opts);
    s.land("a.json", common::orders_jsonl(0, 10));
    common::wait_until("a.json moved", Duration::from_secs(30), || {
        dest.join("a.json").exists()
    });
    assert!(!s.landing().join("a.json").exists());
    crate::watch::sigterm(&child);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s.assert_ids_once(0..10, "ingested, then moved");
}
