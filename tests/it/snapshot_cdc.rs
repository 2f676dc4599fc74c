//! AUTO CDC from snapshots: a snapshot flow with a `[stream.cdc]` section diffs each
//! snapshot against the target. Databricks' example E (lakeflow.md §1) gives exactly the
//! documented versions; SCD type 1 keeps the latest snapshot's rows; an unchanged row makes
//! no version; and SIGKILLs at every step and at random moments give the uninterrupted
//! table, deletes included.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::common::args::ingest_args;
use crate::common::rows::json_text;
use crate::common::{self, Scratch, crash, ok, run, stderr};

/// `ingest ... --once` with types inferred, keyed by `id`, and `options`.
fn args(s: &Scratch, options: &[&str]) -> Vec<String> {
    let defaults = ["cloudFiles.inferColumnTypes=true", "cdc.keys=id"];
    ingest_args(s, &[&defaults[..], options].concat())
}

/// The rows as `id v ...` (the `columns` given), plus `start-end` for SCD type 2 with
/// each time replaced by its rank among the table's times (1 = the first snapshot's),
/// sorted; and the table's column names.
fn rows(table: &Path, columns: &[&str], scd2: bool) -> (Vec<String>, Vec<String>) {
    let py = common::read_with_python(table, "id");
    let all = py["rows"].as_array().unwrap();
    let times: BTreeSet<String> = all
        .iter()
        .flat_map(|r| [&r["__START_AT"], &r["__END_AT"]])
        .filter(|t| !t.is_null())
        .map(json_text)
        .collect();
    let rank = |t: &serde_json::Value| match t {
        serde_json::Value::Null => "null".to_string(),
        t => (times.iter().position(|x| *x == json_text(t)).unwrap() + 1).to_string(),
    };
    let mut out: Vec<String> = all
        .iter()
        .map(|r| {
            let mut line: Vec<String> = columns.iter().map(|c| json_text(&r[*c])).collect();
            if scd2 {
                line.push(format!(
                    "{}-{}",
                    rank(&r["__START_AT"]),
                    rank(&r["__END_AT"])
                ));
            }
            line.join(" ")
        })
        .collect();
    out.sort();
    let names = all
        .first()
        .and_then(|r| r.as_object())
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    (out, names)
}

fn now_us() -> i64 {
    let d = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap();
    i64::try_from(d.as_micros()).unwrap()
}

/// The table's `__START_AT` values, in microseconds, sorted and distinct.
fn start_times(table: &Path) -> Vec<i64> {
    let batches = common::read_table(table);
    let mut out = BTreeSet::new();
    for b in &batches {
        let c = b
            .column_by_name("__START_AT")
            .unwrap()
            .as_any()
            .downcast_ref::<arrow_array::TimestampMicrosecondArray>()
            .expect("__START_AT is a TIMESTAMP: the snapshots' ingest time");
        out.extend(c.iter().flatten());
    }
    out.into_iter().collect()
}

/// Replaces the landed file, with a modification time a step later than the last one.
fn replace(s: &Scratch, rel: &str, body: &str, step: u64) {
    let p = s.land(rel, body);
    let f = std::fs::File::options().write(true).open(&p).unwrap();
    f.set_modified(SystemTime::now() + Duration::from_secs(step))
        .unwrap();
}

#[test]
fn auto_cdc_from_snapshots_reproduces_example_e() {
    let s = Scratch::new();
    let opts = [
        "snapshot.unit=file",
        "cdc.stored_as_scd_type=2",
        "cdc.except_column_list=_rescued_data,_metadata",
    ];
    let before_1 = now_us();
    replace(&s, "customers.csv", "id,v\n1,a1\n2,a2\n", 0);
    ok(&run(&args(&s, &opts), &[]));
    let after_1 = now_us();
    replace(&s, "customers.csv", "id,v\n2,b2\n3,a3\n", 1);
    let out = ok(&run(&args(&s, &opts), &[]));
    let after_2 = now_us();
    assert!(out.contains("2 inserted"), "{out}");
    let (versions, columns) = rows(&s.table(), &["id", "v"], true);
    assert_eq!(
        versions,
        ["1 a1 1-2", "2 a2 1-2", "2 b2 2-null", "3 a3 2-null"],
        "example E"
    );
    assert_eq!(
        columns,
        ["id", "v", "__START_AT", "__END_AT"],
        "the stamps are not target columns"
    );
    // t1 and t2 are the snapshots' ingest times: each within its run.
    let times = start_times(&s.table());
    assert_eq!(times.len(), 2, "{times:?}");
    assert!(before_1 <= times[0] && times[0] <= after_1, "{times:?}");
    assert!(after_1 <= times[1] && times[1] <= after_2, "{times:?}");

    // An unchanged rerun takes no snapshot; a snapshot with equal rows but a new file
    // (touched) makes no version.
    let out = ok(&run(&args(&s, &opts), &[]));
    assert!(out.contains("0 batches"), "{out}");
    replace(&s, "customers.csv", "id,v\n2,b2\n3,a3\n", 2);
    let out = ok(&run(&args(&s, &opts), &[]));
    assert!(
        out.contains("1 batch") && out.contains("0 inserted"),
        "{out}"
    );
    assert_eq!(rows(&s.table(), &["id", "v"], true).0, versions);

    // A key absent comes back: key 2 is closed at t3, key 1 opens again.
    replace(&s, "customers.csv", "id,v\n1,a1\n3,a3\n", 3);
    ok(&run(&args(&s, &opts), &[]));
    assert_eq!(
        rows(&s.table(), &["id", "v"], true).0,
        [
            "1 a1 1-2",
            "1 a1 3-null",
            "2 a2 1-2",
            "2 b2 2-3",
            "3 a3 2-null"
        ]
    );
}

#[test]
fn auto_cdc_from_snapshots_into_scd1_keeps_the_latest_snapshot() {
    let s = Scratch::new();
    let opts = ["snapshot.unit=file", "cdc.except_column_list=_rescued_data"];
    replace(&s, "customers.csv", "id,v\n1,a1\n2,a2\n", 0);
    ok(&run(&args(&s, &opts), &[]));
    replace(&s, "customers.csv", "id,v\n2,b2\n3,a3\n", 1);
    let out = ok(&run(&args(&s, &opts), &[]));
    assert!(
        out.contains("1 inserted, 1 updated, 1 deleted"),
        "the diff: 3 new, 2 changed, 1 absent: {out}"
    );
    let (current, columns) = rows(&s.table(), &["id", "v"], false);
    assert_eq!(current, ["2 b2", "3 a3"]);
    assert!(
        !columns
            .iter()
            .any(|c| c.starts_with("_ingested") || c.starts_with("_snapshot")),
        "{columns:?}"
    );
    // The lineage of each row is the snapshot file it came from.
    let py = common::read_with_python(&s.table(), "id");
    assert!(py["rows"][0]["_metadata"]["file_path"].is_string(), "{py}");
}

#[test]
fn auto_cdc_from_snapshots_refuses_change_record_settings() {
    let s = Scratch::new();
    s.land("customers.csv", "id,v\n1,a1\n");
    for bad in ["cdc.sequence_by=v", "cdc.apply_as_deletes=v = 'x'"] {
        let out = run(&args(&s, &["snapshot.unit=file", bad]), &[]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("AUTO CDC from snapshots"),
            "{bad}: {}",
            stderr(&out)
        );
    }
}

/// Eight dated folders, each a whole copy of keys 0..40: some keys absent on some days
/// (deleted, then back), names changing now and then (tracked), cities every day
/// (untracked, in place).
fn dated_snapshots(s: &Scratch) {
    for day in 0..8u64 {
        let body: String = (0..40u64)
            .filter(|k| (k + day) % 7 != 0)
            .map(|k| {
                format!(
                    "{{\"id\": {k}, \"name\": \"n{}\", \"city\": \"c{}\"}}\n",
                    (k * day / 3) % 4,
                    (k + day) % 5
                )
            })
            .collect();
        let p = s.land(&format!("day-{day}/part-0.json"), body);
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(60))
            .unwrap();
    }
}

fn scd2_dated_options() -> Vec<&'static str> {
    vec![
        "snapshot.unit=partition",
        "cdc.stored_as_scd_type=2",
        "cdc.track_history_except_column_list=city",
        "cdc.except_column_list=_rescued_data,_metadata",
    ]
}

#[test]
fn random_sigkills_of_auto_cdc_from_snapshots_give_the_uninterrupted_table() {
    let opts = scd2_dated_options();
    let calm = Scratch::new();
    dated_snapshots(&calm);
    ok(&run(&args(&calm, &opts), &[]));
    let expected = rows(&calm.table(), &["id", "name", "city"], true).0;
    assert!(
        expected.iter().any(|r| r.ends_with("-null")) && expected.len() > 60,
        "{expected:?}"
    );
    assert_eq!(
        start_times(&calm.table()).len(),
        8,
        "every snapshot changed something"
    );

    let s = Scratch::new();
    dated_snapshots(&s);
    let a = args(&s, &opts);
    let kills = common::sigkill_until_done(&a, |_| {});
    assert!(kills > 0, "no run was ever killed: the test proved nothing");
    ok(&run(&a, &[]));
    assert_eq!(
        rows(&s.table(), &["id", "name", "city"], true).0,
        expected,
        "after random kills"
    );
}

#[test]
fn auto_cdc_from_snapshots_killed_at_every_step_gives_the_uninterrupted_table() {
    let names = crash::cdc_failpoints();
    for scd2 in [false, true] {
        let mut opts = scd2_dated_options();
        if !scd2 {
            opts = vec![
                "snapshot.unit=partition",
                "cdc.except_column_list=_rescued_data,_metadata",
            ];
        }
        let calm = Scratch::new();
        dated_snapshots(&calm);
        ok(&run(&args(&calm, &opts), &[]));
        let expected = rows(&calm.table(), &["id", "name", "city"], scd2).0;
        for name in &names {
            let s = Scratch::new();
            dated_snapshots(&s);
            // At the failpoint's third hit: a snapshot whose diff has deletes.
            crash::kill_at_then_rerun(&args(&s, &opts), name, 3);
            assert_eq!(
                rows(&s.table(), &["id", "name", "city"], scd2).0,
                expected,
                "scd type {}, killed at {name}",
                if scd2 { 2 } else { 1 }
            );
        }
    }
}

#[test]
fn the_docs_auto_cdc_from_snapshots_config_gives_example_e() {
    let toml = common::doc_block(
        "docs/guide/snapshots.md",
        "## AUTO CDC from snapshots",
        "toml",
    );
    let s = Scratch::new();
    let dir = s.dir.path();
    let landing = dir.join("landing/customers");
    std::fs::create_dir_all(&landing).unwrap();
    let file = landing.join("customers.csv");
    std::fs::write(&file, "id,v\n1,a1\n2,a2\n").unwrap();
    let config = dir.join("streams.toml");
    std::fs::write(&config, toml).unwrap();
    let args = ["run".into(), config.display().to_string(), "--once".into()];
    ok(&run(&args, &[]));
    std::fs::write(&file, "id,v\n2,b2\n3,a3\n").unwrap();
    let f = std::fs::File::options().write(true).open(&file).unwrap();
    f.set_modified(SystemTime::now() + Duration::from_secs(1))
        .unwrap();
    ok(&run(&args, &[]));
    let (versions, columns) = rows(&dir.join("silver/customers"), &["id", "v"], true);
    assert_eq!(
        versions,
        ["1 a1 1-2", "2 a2 1-2", "2 b2 2-null", "3 a3 2-null"]
    );
    assert_eq!(columns, ["id", "v", "__START_AT", "__END_AT"]);
}
