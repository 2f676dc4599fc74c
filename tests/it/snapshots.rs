//! Snapshot flows: a replaced file, a replaced folder and dated folders, each snapshot
//! landing whole in one commit with its rows stamped, unchanged snapshots not appended
//! again, a folder never read mid-replacement, and SIGKILLs never stamping a snapshot
//! twice.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::common::args::ingest_args;
use crate::common::{self, Scratch, ok, run, stderr};

/// Sets a landed file's modification time `ago` in the past (settled).
fn age(path: &Path, ago: Duration) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - ago).unwrap();
}

/// Per snapshot id: its ingest times (one expected) and its rows as `id name`, sorted.
fn snapshots(table: &Path) -> BTreeMap<String, (Vec<String>, Vec<String>)> {
    let py = common::read_with_python(table, "id");
    let mut out: BTreeMap<String, (Vec<String>, Vec<String>)> = BTreeMap::new();
    for r in py["rows"].as_array().unwrap() {
        let id = r["_snapshot_id"].as_str().unwrap().to_string();
        let entry = out.entry(id).or_default();
        let at = r["_ingested_at"].to_string();
        if !entry.0.contains(&at) {
            entry.0.push(at);
        }
        let text = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        entry
            .1
            .push(format!("{} {}", text(&r["id"]), text(&r["name"])));
    }
    for (_, rows) in out.values_mut() {
        rows.sort();
    }
    out
}

#[test]
fn a_nightly_replaced_csv_gives_one_stamped_snapshot_per_replacement() {
    let s = Scratch::new();
    let file = s.land("customers.csv", "id,name\n1,a\n2,b\n");
    let opts = ["snapshot.unit=file"];
    ok(&run(&ingest_args(&s, &opts), &[]));
    // A forced rerun: nothing appended again.
    let out = ok(&run(&ingest_args(&s, &opts), &[]));
    assert!(
        out.contains("1 unchanged snapshot not appended again"),
        "{out}"
    );
    // The vendor replaces the file.
    std::fs::write(&file, "id,name\n1,a\n2,c\n3,d\n").unwrap();
    age(&file, Duration::from_secs(5));
    ok(&run(&ingest_args(&s, &opts), &[]));
    let snaps = snapshots(&s.table());
    assert_eq!(snaps.len(), 2, "{snaps:?}");
    let mut contents: Vec<Vec<String>> = snaps.values().map(|(_, rows)| rows.clone()).collect();
    contents.sort();
    assert_eq!(
        contents,
        [vec!["1 a", "2 b"], vec!["1 a", "2 c", "3 d"]],
        "each snapshot whole"
    );
    for (id, (times, _)) in &snaps {
        assert!(id.starts_with("customers.csv@"), "{id}");
        assert_eq!(times.len(), 1, "one ingest time per snapshot: {times:?}");
    }
    let py = common::read_with_python(&s.table(), "id");
    assert_eq!(
        py["types"]["_ingested_at"], "timestamp[us, tz=UTC]",
        "{}",
        py["types"]
    );
}

#[test]
fn a_folder_is_taken_whole_once_settled_and_never_read_mixed() {
    let s = Scratch::new();
    let a = s.land("part-0.json", "{\"id\": 1, \"name\": \"a\"}\n");
    let b = s.land("part-1.json", "{\"id\": 2, \"name\": \"b\"}\n");
    let opts = ["snapshot.unit=folder", "cloudFiles.settleTime=30s"];
    // Just written: not settled, nothing taken.
    let out = ok(&run(&ingest_args(&s, &opts), &[]));
    assert!(out.contains("ingested 0 files"), "{out}");
    for p in [&a, &b] {
        age(p, Duration::from_secs(60));
    }
    ok(&run(&ingest_args(&s, &opts), &[]));
    // The export job replaces the folder file by file: part-0 replaced, part-1 not yet.
    std::fs::write(&a, "{\"id\": 1, \"name\": \"a2\"}\n").unwrap();
    let out = ok(&run(&ingest_args(&s, &opts), &[]));
    assert!(out.contains("ingested 0 files"), "mid-replacement: {out}");
    std::fs::write(&b, "{\"id\": 2, \"name\": \"b2\"}\n").unwrap();
    std::fs::remove_file(s.landing().join("part-1.json")).unwrap();
    let c = s.land("part-2.json", "{\"id\": 3, \"name\": \"c2\"}\n");
    for p in [&a, &c] {
        age(p, Duration::from_secs(45));
    }
    ok(&run(&ingest_args(&s, &opts), &[]));
    let snaps = snapshots(&s.table());
    let mut contents: Vec<Vec<String>> = snaps.values().map(|(_, rows)| rows.clone()).collect();
    contents.sort();
    assert_eq!(
        contents,
        [vec!["1 a", "2 b"], vec!["1 a2", "3 c2"]],
        "two whole snapshots, the second without the removed file"
    );
    assert!(snaps.keys().all(|id| id.starts_with(".@")), "{snaps:?}");
}

#[test]
fn dated_folders_are_one_snapshot_each_in_one_commit() {
    let s = Scratch::new();
    for (day, rows) in [("2026-11-29", 3), ("2026-11-30", 2)] {
        for part in 0..2 {
            let body: String = (0..rows)
                .map(|i| format!("{{\"id\": {}, \"name\": \"{day}\"}}\n", i * 10 + part))
                .collect();
            let p = s.land(&format!("{day}/part-{part}.json"), body);
            age(&p, Duration::from_secs(10));
        }
    }
    let opts = ["snapshot.unit=partition", "cloudFiles.maxFilesPerTrigger=1"];
    let out = ok(&run(&ingest_args(&s, &opts), &[]));
    assert!(out.contains("2 batches"), "one batch per snapshot: {out}");
    let snaps = snapshots(&s.table());
    let sizes: Vec<(String, usize)> = snaps
        .iter()
        .map(|(id, (_, rows))| (id.split('@').next().unwrap().to_string(), rows.len()))
        .collect();
    assert_eq!(
        sizes,
        [
            ("2026-11-29/".to_string(), 6),
            ("2026-11-30/".to_string(), 4)
        ]
    );
    // Without skip_unchanged, each run takes every snapshot again.
    ok(&run(
        &ingest_args(
            &s,
            &["snapshot.unit=partition", "snapshot.skip_unchanged=false"],
        ),
        &[],
    ));
    let py = common::read_with_python(&s.table(), "id");
    assert_eq!(py["num_rows"], 20);
}

#[test]
fn random_sigkills_never_stamp_a_snapshot_twice_or_split_it() {
    let s = Scratch::new();
    for day in 0..8 {
        for part in 0..3 {
            let body: String = (0..50)
                .map(|i| format!("{{\"id\": {}, \"name\": \"d{day}\"}}\n", part * 1000 + i))
                .collect();
            let p = s.land(&format!("day-{day}/part-{part}.json"), body);
            age(&p, Duration::from_secs(10));
        }
    }
    let args = ingest_args(&s, &["snapshot.unit=partition"]);
    let kills = common::sigkill_until_done(&args, |_| {});
    assert!(kills > 0, "no run was ever killed: the test proved nothing");
    ok(&run(&args, &[]));
    let snaps = snapshots(&s.table());
    assert_eq!(snaps.len(), 8, "{:?}", snaps.keys());
    for (id, (times, rows)) in &snaps {
        assert_eq!(times.len(), 1, "{id}: one ingest time");
        assert_eq!(rows.len(), 150, "{id}: whole, once");
    }
}

#[test]
fn a_late_snapshot_raises_snapshot_overdue() {
    let s = Scratch::new();
    let p = s.land("customers.csv", "id,name\n1,a\n");
    age(&p, Duration::from_secs(5));
    let opts = ["snapshot.unit=file", "snapshot.expected_interval=1s"];
    ok(&run(&ingest_args(&s, &opts), &[]));
    std::thread::sleep(Duration::from_millis(1500));
    ok(&run(&ingest_args(&s, &opts), &[]));
    let events = common::events_of(&s.table().join("_autoloader"), "snapshot_overdue");
    assert!(!events.is_empty(), "no snapshot_overdue event");
    assert_eq!(events[0]["expectedIntervalSeconds"], 1, "{events:?}");
}

#[test]
fn a_stamp_name_the_data_has_is_refused() {
    let s = Scratch::new();
    let p = s.land("c.csv", "id,_ingested_at\n1,x\n");
    age(&p, Duration::from_secs(5));
    let out = run(&ingest_args(&s, &["snapshot.unit=file"]), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("_ingested_at"), "{}", stderr(&out));
    let out = run(&ingest_args(&s, &["snapshot.unit=table"]), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("snapshot setting unit"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_docs_snapshot_config_runs() {
    let toml = common::doc_block("docs/guide/snapshots.md", "# Snapshot flows", "toml");
    let s = Scratch::new();
    let dir = s.dir.path();
    let landing = dir.join("landing/customers");
    std::fs::create_dir_all(&landing).unwrap();
    let file = landing.join("customers.csv");
    std::fs::write(&file, "id,name\n1,a\n").unwrap();
    let config = dir.join("streams.toml");
    std::fs::write(&config, toml).unwrap();
    let args = ["run".into(), config.display().to_string(), "--once".into()];
    ok(&run(&args, &[]));
    ok(&run(&args, &[]));
    std::fs::write(&file, "id,name\n1,b\n2,c\n").unwrap();
    age(&file, Duration::from_secs(5));
    ok(&run(&args, &[]));
    let snaps = snapshots(&dir.join("bronze/customers_history"));
    assert_eq!(snaps.len(), 2, "{snaps:?}");
}
