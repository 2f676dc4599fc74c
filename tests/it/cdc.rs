//! APPLY CHANGES into an SCD type 1 table: Databricks' worked examples (lakeflow.md §1),
//! fed in one batch and one record per batch in shuffled orders, and SIGKILLs at random
//! moments, each giving exactly the documented table.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use crate::common::crash;
use crate::common::held::Held;
use crate::common::{self, Scratch, ok, run, stderr};

/// Databricks' example records: userId, name, city, operation, sequenceNum.
pub(crate) const RECORDS: &[&str] = &[
    r#"{"userId": 124, "name": "Raul", "city": "Oaxaca", "operation": "INSERT", "sequenceNum": 1}"#,
    r#"{"userId": 123, "name": "Isabel", "city": "Monterrey", "operation": "INSERT", "sequenceNum": 1}"#,
    r#"{"userId": 125, "name": "Mercedes", "city": "Tijuana", "operation": "INSERT", "sequenceNum": 2}"#,
    r#"{"userId": 126, "name": "Lily", "city": "Cancun", "operation": "INSERT", "sequenceNum": 2}"#,
    r#"{"userId": 123, "name": null, "city": null, "operation": "DELETE", "sequenceNum": 6}"#,
    r#"{"userId": 125, "name": "Mercedes", "city": "Guadalajara", "operation": "UPDATE", "sequenceNum": 6}"#,
    r#"{"userId": 125, "name": "Mercedes", "city": "Mexicali", "operation": "UPDATE", "sequenceNum": 5}"#,
    r#"{"userId": 123, "name": "Isabel", "city": "Chihuahua", "operation": "UPDATE", "sequenceNum": 5}"#,
];

const TRUNCATE: &str =
    r#"{"userId": null, "name": null, "city": null, "operation": "TRUNCATE", "sequenceNum": 3}"#;

/// The CDC options of the examples (`except (operation, sequenceNum)`).
pub(crate) fn cdc_options(truncates: bool) -> Vec<String> {
    let mut o: Vec<String> = [
        "cloudFiles.inferColumnTypes=true",
        "cloudFiles.includeMetadata=false",
        "cdc.keys=userId",
        "cdc.sequence_by=sequenceNum",
        "cdc.apply_as_deletes=operation = 'DELETE'",
        "cdc.except_column_list=operation,sequenceNum,_rescued_data",
    ]
    .map(String::from)
    .to_vec();
    if truncates {
        o.push("cdc.apply_as_truncates=operation = 'TRUNCATE'".into());
    }
    o
}

/// `autoloader ingest LANDING TABLE --once` with these options, then `extra`.
pub(crate) fn ingest_args(s: &Scratch, options: &[String], extra: &[&str]) -> Vec<String> {
    let all: Vec<&str> = options
        .iter()
        .map(String::as_str)
        .chain(extra.iter().copied())
        .collect();
    common::args::ingest_args(s, &all)
}

pub(crate) fn ingest(s: &Scratch, options: &[String], extra: &[&str]) -> std::process::Output {
    run(&ingest_args(s, options, extra), &[])
}

/// The table's rows as `userId name city`, sorted, read by Python deltalake.
fn rows(table: &Path) -> Vec<String> {
    let py = common::read_with_python(table, "userId");
    let mut out: Vec<String> = py["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let text = |v: &serde_json::Value| match v {
                serde_json::Value::Null => "null".to_string(),
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!(
                "{} {} {}",
                text(&r["userId"]),
                text(&r["name"]),
                text(&r["city"])
            )
        })
        .collect();
    out.sort();
    out
}

fn columns(table: &Path) -> Vec<String> {
    let py = common::read_with_python(table, "userId");
    py["types"].as_object().unwrap().keys().cloned().collect()
}

const EXAMPLE_A: [&str; 3] = [
    "124 Raul Oaxaca",
    "125 Mercedes Guadalajara",
    "126 Lily Cancun",
];

#[test]
fn scd1_example_in_one_batch_gives_the_documented_table() {
    let s = Scratch::new();
    s.land("changes.json", RECORDS.join("\n") + "\n");
    let out = ok(&ingest(&s, &cdc_options(false), &[]));
    assert_eq!(rows(&s.table()), EXAMPLE_A, "{out}");
    assert_eq!(columns(&s.table()), ["userId", "name", "city"]);
    assert!(
        out.contains("3 inserted, 0 updated, 0 deleted, 0 stale"),
        "the summary says what the changes did: {out}"
    );
    // Run again: nothing new, nothing changes.
    ok(&ingest(&s, &cdc_options(false), &[]));
    assert_eq!(rows(&s.table()), EXAMPLE_A);
}

#[test]
fn scd1_example_one_record_per_batch_in_shuffled_orders() {
    // A few fixed permutations (deterministic), including the reverse order.
    let orders: [[usize; 8]; 4] = [
        [0, 1, 2, 3, 4, 5, 6, 7],
        [7, 6, 5, 4, 3, 2, 1, 0],
        [4, 7, 0, 5, 2, 6, 1, 3],
        [5, 3, 6, 1, 7, 0, 4, 2],
    ];
    for order in orders {
        let s = Scratch::new();
        for (pos, &i) in order.iter().enumerate() {
            s.land(&format!("{pos:02}.json"), format!("{}\n", RECORDS[i]));
        }
        ok(&ingest(
            &s,
            &cdc_options(false),
            &["cloudFiles.maxFilesPerTrigger=1"],
        ));
        assert_eq!(rows(&s.table()), EXAMPLE_A, "order {order:?}");
    }
}

#[test]
fn scd1_with_a_truncate_keeps_only_what_is_sequenced_after_it() {
    let s = Scratch::new();
    let mut all: Vec<&str> = RECORDS.to_vec();
    all.push(TRUNCATE);
    s.land("changes.json", all.join("\n") + "\n");
    let out = ok(&ingest(&s, &cdc_options(true), &[]));
    assert_eq!(rows(&s.table()), ["125 Mercedes Guadalajara"]);
    // Counted as `status` counts them: below a truncate, not stale (issue 36.11).
    assert!(out.contains("0 stale, 4 below a truncate"), "{out}");
}

/// A null key stops the batch naming the file and the record's number in it, without
/// `includeMetadata`, counting the records a `where` left out (issue 36.6).
#[test]
fn a_null_key_stops_the_batch_naming_the_file_and_record() {
    let s = Scratch::new();
    s.land("good.json", format!("{}\n", RECORDS[0]));
    ok(&ingest(&s, &cdc_options(false), &[]));
    let bad = s.land(
        "bad.json",
        [
            r#"{"userId": 7, "name": "X", "city": "skip", "operation": "INSERT", "sequenceNum": 7}"#,
            r#"{"userId": 8, "name": "X", "city": "Y", "operation": "INSERT", "sequenceNum": 8}"#,
            r#"{"userId": null, "name": "X", "city": "Y", "operation": "INSERT", "sequenceNum": 9}"#,
        ]
        .join("\n"),
    );
    let mut args = ingest_args(&s, &cdc_options(false), &[]);
    args.extend(["--where".into(), "city != 'skip'".into()]);
    let out = run(&args, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("NULL_KEY") && err.contains("bad.json record 3"),
        "{err} {bad:?}"
    );
    assert_eq!(
        rows(&s.table()),
        ["124 Raul Oaxaca"],
        "nothing of the batch applied"
    );
}

#[test]
fn random_sigkills_of_a_cdc_flow_give_the_uninterrupted_table() {
    // A longer stream: keys 0..40, each updated several times, deletes and late records.
    let mut lines = Vec::new();
    for round in 0..6u64 {
        for key in 0..40u64 {
            let seq = round * 100 + (key * 7919 + round * 31) % 97;
            let op = if (key + round) % 11 == 0 {
                "DELETE"
            } else {
                "UPSERT"
            };
            lines.push(format!(
                r#"{{"userId": {key}, "name": "n{round}", "city": "c{}", "operation": "{op}", "sequenceNum": {seq}}}"#,
                (key * round) % 13
            ));
        }
    }
    let write_files = |s: &Scratch| {
        for (i, chunk) in lines.chunks(20).enumerate() {
            s.land(&format!("{i:03}.json"), chunk.join("\n") + "\n");
        }
    };
    let opts = [
        cdc_options(false),
        vec!["cloudFiles.maxFilesPerTrigger=1".into()],
    ]
    .concat();
    let calm = Scratch::new();
    write_files(&calm);
    ok(&ingest(&calm, &opts, &[]));
    let expected = rows(&calm.table());
    assert!(expected.len() > 10, "{expected:?}");

    let s = Scratch::new();
    write_files(&s);
    let args = ingest_args(&s, &opts, &[]);
    let kills = common::sigkill_until_done(&args, |_| {});
    assert!(kills > 0, "no run was ever killed: the test proved nothing");
    ok(&run(&args, &[]));
    assert_eq!(rows(&s.table()), expected, "after random kills");
}

/// A stream of upserts, deletes, late records and a truncate, 20 records a file, and the
/// table it must give: per key, its record of the greatest sequence, unless that is a
/// delete or sequenced below the truncate.
fn long_stream_with_a_truncate() -> (Vec<String>, Vec<String>) {
    const MARK: u64 = 250;
    let mut lines = Vec::new();
    let mut latest: std::collections::BTreeMap<u64, (u64, String, bool)> = Default::default();
    for round in 0..6u64 {
        for key in 0..40u64 {
            let seq = round * 100 + (key * 7919 + round * 31) % 97;
            let delete = (key + round) % 11 == 0;
            let (name, city) = (format!("n{round}"), format!("c{}", (key * round) % 13));
            lines.push(format!(
                r#"{{"userId": {key}, "name": "{name}", "city": "{city}", "operation": "{}", "sequenceNum": {seq}}}"#,
                if delete { "DELETE" } else { "UPSERT" }
            ));
            if latest.get(&key).is_none_or(|(s, _, _)| *s < seq) {
                latest.insert(key, (seq, format!("{key} {name} {city}"), delete));
            }
        }
    }
    lines.insert(
        130,
        format!(
            r#"{{"userId": null, "name": null, "city": null, "operation": "TRUNCATE", "sequenceNum": {MARK}}}"#
        ),
    );
    let mut expected: Vec<String> = latest
        .into_values()
        .filter(|(seq, _, delete)| *seq >= MARK && !delete)
        .map(|(_, row, _)| row)
        .collect();
    expected.sort();
    let files = lines.chunks(20).map(|c| c.join("\n") + "\n").collect();
    (files, expected)
}

#[test]
fn many_batches_in_one_run_give_the_table_of_one_run_per_batch() {
    // One run keeps the state between its batches; a run per batch reads it from the log
    // every time. Both must give the table the records say.
    let (files, expected) = long_stream_with_a_truncate();
    assert!(expected.len() > 10, "{expected:?}");
    let opts = [
        cdc_options(true),
        vec!["cloudFiles.maxFilesPerTrigger=1".into()],
    ]
    .concat();
    let one_run = Scratch::new();
    for (i, f) in files.iter().enumerate() {
        one_run.land(&format!("{i:03}.json"), f);
    }
    let out = ok(&ingest(&one_run, &opts, &[]));
    assert!(out.contains(&format!("{} batches", files.len())), "{out}");
    assert_eq!(rows(&one_run.table()), expected, "one run");

    let run_per_batch = Scratch::new();
    for (i, f) in files.iter().enumerate() {
        run_per_batch.land(&format!("{i:03}.json"), f);
        ok(&ingest(&run_per_batch, &opts, &[]));
    }
    assert_eq!(rows(&run_per_batch.table()), expected, "a run per batch");
}

#[test]
fn a_kill_between_the_target_and_the_state_commit_applies_the_batch_once() {
    let s = Scratch::new();
    for (i, r) in RECORDS.iter().enumerate() {
        s.land(&format!("{i:02}.json"), format!("{r}\n"));
    }
    let opts = [
        cdc_options(false),
        vec!["cloudFiles.maxFilesPerTrigger=1".into()],
    ]
    .concat();
    let mut kills = 0;
    for n in 1..=RECORDS.len() {
        let args = ingest_args(&s, &opts, &[]);
        let crashed = run(
            &args,
            &[(
                "AUTOLOADER_FAILPOINT",
                &format!("after-cdc-target-commit@{n}"),
            )],
        );
        if crashed.status.signal() == Some(9) {
            kills += 1;
        } else {
            ok(&crashed);
        }
    }
    assert!(
        kills > 0,
        "no run was killed between the two commits: the test proved nothing"
    );
    ok(&ingest(&s, &opts, &[]));
    assert_eq!(rows(&s.table()), EXAMPLE_A);
}

#[test]
fn a_cdc_flow_killed_at_every_step_gives_the_uninterrupted_table() {
    for name in crash::cdc_failpoints() {
        let s = Scratch::new();
        for (i, r) in RECORDS.iter().enumerate() {
            s.land(&format!("{i:02}.json"), format!("{r}\n"));
        }
        let opts = [
            cdc_options(false),
            vec!["cloudFiles.maxFilesPerTrigger=3".into()],
        ]
        .concat();
        crash::kill_at_then_rerun(&ingest_args(&s, &opts, &[]), name, 2);
        assert_eq!(rows(&s.table()), EXAMPLE_A, "{name}");
    }
}

#[test]
fn the_merge_commit_says_what_it_changed() {
    let s = Scratch::new();
    s.land("changes.json", RECORDS.join("\n") + "\n");
    ok(&ingest(&s, &cdc_options(false), &[]));
    let log = s.table().join("_delta_log");
    let mut commits: Vec<_> = std::fs::read_dir(&log)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    commits.sort();
    let last = std::fs::read_to_string(commits.last().unwrap()).unwrap();
    assert!(last.contains("\"operation\":\"MERGE\""), "{last}");
    assert!(last.contains("\"rowsInserted\":3"), "{last}");
    assert!(last.contains("\"recordsStale\":0"), "{last}");
}

#[test]
fn a_second_writer_into_a_cdc_target_is_refused() {
    let s = Scratch::new();
    let config = s.dir.path().join("streams.toml");
    std::fs::create_dir_all(s.dir.path().join("a")).unwrap();
    std::fs::create_dir_all(s.dir.path().join("b")).unwrap();
    std::fs::write(
        &config,
        r#"
[[stream]]
name = "changes"
source = "a"
table = "silver/customers"
[stream.cdc]
keys = ["userId"]
sequence_by = "sequenceNum"

[[stream]]
name = "appends"
source = "b"
table = "silver/customers"
"#,
    )
    .unwrap();
    let out = run(
        &["run".into(), config.display().to_string(), "--once".into()],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a CDC target has one writer"),
        "{}",
        stderr(&out)
    );
}

/// The same flow from `streams.toml`, under Databricks' names with TOML lists, fed in two
/// runs: the second run's late and stale records change nothing they should not.
#[test]
fn a_cdc_flow_from_streams_toml() {
    let s = Scratch::new();
    let dir = s.dir.path();
    let landing = dir.join("landing/customers");
    std::fs::create_dir_all(&landing).unwrap();
    std::fs::write(landing.join("1.json"), RECORDS[..4].join("\n") + "\n").unwrap();
    let config = dir.join("streams.toml");
    std::fs::write(
        &config,
        r#"
[[stream]]
name = "customers"
source = "landing/customers"
table = "silver/customers"
[stream.options]
"cloudFiles.inferColumnTypes" = true
"cloudFiles.includeMetadata" = false
[stream.cdc]
keys = ["userId"]
sequence_by = "sequenceNum"
apply_as_deletes = "operation = 'DELETE'"
except_column_list = ["operation", "sequenceNum", "_rescued_data"]
stored_as_scd_type = 1
"#,
    )
    .unwrap();
    let run_once = || {
        ok(&run(
            &["run".into(), config.display().to_string(), "--once".into()],
            &[],
        ))
    };
    run_once();
    std::fs::write(landing.join("2.json"), RECORDS[4..].join("\n") + "\n").unwrap();
    let out = run_once();
    assert!(out.contains("1 updated, 1 deleted"), "{out}");
    assert_eq!(rows(&dir.join("silver/customers")), EXAMPLE_A);
}

/// The docs' `[stream.cdc]` example, as printed there, on Databricks' records.
#[test]
fn the_docs_cdc_config_runs() {
    let toml = common::doc_block("docs/guide/cdc.md", "# APPLY CHANGES", "toml");
    let s = Scratch::new();
    let dir = s.dir.path();
    let landing = dir.join("landing/customer_cdc");
    std::fs::create_dir_all(&landing).unwrap();
    std::fs::write(landing.join("changes.json"), RECORDS.join("\n") + "\n").unwrap();
    let config = dir.join("streams.toml");
    std::fs::write(&config, toml).unwrap();
    ok(&run(
        &["run".into(), config.display().to_string(), "--once".into()],
        &[],
    ));
    let got = rows(&dir.join("silver/customers"));
    assert_eq!(got, EXAMPLE_A);
}

#[test]
fn a_cdc_flow_that_lost_its_state_refuses_to_go_on() {
    let s = Scratch::new();
    s.land("a.json", format!("{}\n", RECORDS[5]));
    ok(&ingest(&s, &cdc_options(false), &[]));
    std::fs::remove_dir_all(s.table().join("_autoloader")).unwrap();
    // An older record for the key: without its state the flow would apply it.
    s.land("b.json", format!("{}\n", RECORDS[2]));
    let out = ingest(&s, &cdc_options(false), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("lost its state") && stderr(&out).contains("autoloader reset"),
        "{}",
        stderr(&out)
    );
    assert_eq!(rows(&s.table()), ["125 Mercedes Guadalajara"]);
}

#[test]
fn a_text_sequence_is_refused_before_anything_runs() {
    let s = Scratch::new();
    s.land("a.json", format!("{}\n", RECORDS[0]));
    let opts: Vec<String> = cdc_options(false)
        .into_iter()
        .filter(|o| !o.starts_with("cloudFiles.inferColumnTypes"))
        .collect();
    let out = ingest(&s, &opts, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("sequenceNum is STRING") && stderr(&out).contains("inferColumnTypes"),
        "{}",
        stderr(&out)
    );
    assert!(!s.table().join("_delta_log").exists());
}

#[test]
fn a_batch_whose_files_were_all_skipped_lets_the_flow_go_on() {
    let s = Scratch::new();
    s.land("a.json", format!("{}\n", RECORDS[0]));
    let opts = [cdc_options(false), vec!["ignoreMissingFiles=true".into()]].concat();
    ok(&ingest(&s, &opts, &[]));
    let bad = s.land(
        "bad.json",
        r#"{"userId": null, "name": "X", "city": "Y", "operation": "INSERT", "sequenceNum": 9}"#,
    );
    let out = ingest(&s, &opts, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // The file with the bad record is removed: its batch holds nothing now.
    std::fs::remove_file(bad).unwrap();
    s.land("c.json", format!("{}\n", RECORDS[3]));
    ok(&ingest(&s, &opts, &[]));
    assert_eq!(rows(&s.table()), ["124 Raul Oaxaca", "126 Lily Cancun"]);
}

/// The repository's fixtures folder `name` (`fixtures/cdc/...`).
fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/cdc")
        .join(name)
}

/// Copies fixture folder `name` into the scratch landing folder, each file renamed by
/// `rename` (so the listing, and so the batches, come in another order).
pub(crate) fn land_fixture(s: &Scratch, name: &str, rename: impl Fn(usize, &str) -> String) {
    let mut files: Vec<_> = std::fs::read_dir(fixture(name))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for (i, f) in files.iter().enumerate() {
        let file_name = f.file_name().unwrap().to_str().unwrap();
        s.land(&rename(i, file_name), std::fs::read(f).unwrap());
    }
}

/// A table's rows as `col=value ...` lines in the columns' order, sorted.
fn table_rows(table: &Path, key: &str) -> (Vec<String>, Vec<String>) {
    let py = common::read_with_python(table, key);
    let columns: Vec<String> = py["types"].as_object().unwrap().keys().cloned().collect();
    let mut out: Vec<String> = py["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            columns
                .iter()
                .map(|c| match &r[c] {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    out.sort();
    (columns, out)
}

pub(crate) const DEBEZIUM_OPTIONS: &[&str] = &[
    "cloudFiles.inferColumnTypes=true",
    "cloudFiles.includeMetadata=false",
    "cdc.format=debezium",
    "cdc.keys=id",
    "cdc.except_column_list=_rescued_data",
];

/// The Debezium fixtures' table: 1002 deleted (its tombstone skipped), 1003's late, older
/// update stale.
const DEBEZIUM_TABLE: [&str; 4] = [
    "1001 Sally Thomas sally.t@acme.com",
    "1003 Edward Walker ed.walker@example.com",
    "1004 Anne Kretchmar annek@noanswer.org",
    "1005 Jane Doe jane.doe@example.com",
];

fn debezium_ingest(s: &Scratch, extra: &[&str]) -> std::process::Output {
    let options: Vec<String> = DEBEZIUM_OPTIONS.iter().map(|o| o.to_string()).collect();
    ingest(s, &options, extra)
}

#[test]
fn debezium_events_apply_as_their_rows() {
    let s = Scratch::new();
    land_fixture(&s, "debezium", |_, n| n.to_string());
    let run = debezium_ingest(&s, &[]);
    let out = ok(&run);
    let (columns, rows) = table_rows(&s.table(), "id");
    assert_eq!(columns, ["id", "first_name", "last_name", "email"], "{out}");
    assert_eq!(rows, DEBEZIUM_TABLE, "{out}");
    // The tombstone (a `null` line) is no rescued data (issue 36.11).
    assert!(out.contains(" 0 rescued rows"), "{out}");
    assert!(
        !stderr(&run).contains("_corrupt_record"),
        "{}",
        stderr(&run)
    );
}

#[test]
fn debezium_events_one_file_per_batch_in_any_order_give_the_same_table() {
    let orders: [[usize; 3]; 3] = [[0, 1, 2], [2, 1, 0], [1, 2, 0]];
    for order in orders {
        let s = Scratch::new();
        land_fixture(&s, "debezium", |i, n| format!("{}-{n}", order[i]));
        let out = ok(&debezium_ingest(&s, &["cloudFiles.maxFilesPerTrigger=1"]));
        assert_eq!(
            table_rows(&s.table(), "id").1,
            DEBEZIUM_TABLE,
            "{order:?} {out}"
        );
    }
    // In order, one file a batch: the summary counts the delete and the stale update.
    let s = Scratch::new();
    land_fixture(&s, "debezium", |_, n| n.to_string());
    let out = ok(&debezium_ingest(&s, &["cloudFiles.maxFilesPerTrigger=1"]));
    assert!(
        out.contains("5 inserted, 2 updated, 1 deleted, 1 stale"),
        "{out}"
    );
}

#[test]
fn debezium_events_in_the_json_converter_wrapper_apply_the_same() {
    let s = Scratch::new();
    let mut wrapped = String::new();
    for f in ["0000000000", "0000000004", "0000000008"] {
        let text = std::fs::read_to_string(
            fixture("debezium").join(format!("dbserver1.inventory.customers+0+{f}.json")),
        )
        .unwrap();
        for line in text.lines() {
            let payload: serde_json::Value = serde_json::from_str(line).unwrap();
            let event = if payload.is_null() {
                serde_json::json!({"schema": null, "payload": null})
            } else {
                serde_json::json!({"schema": {"type": "struct", "optional": false, "name": "dbserver1.inventory.customers.Envelope"}, "payload": payload})
            };
            wrapped.push_str(&event.to_string());
            wrapped.push('\n');
        }
    }
    s.land("wrapped.json", wrapped);
    ok(&debezium_ingest(&s, &[]));
    assert_eq!(table_rows(&s.table(), "id").1, DEBEZIUM_TABLE);
}

#[test]
fn a_debezium_preset_on_other_records_is_refused_naming_the_file() {
    let s = Scratch::new();
    s.land("plain.json", format!("{}\n", RECORDS[0]));
    let out = run(
        &ingest_args(
            &s,
            &[
                "cloudFiles.inferColumnTypes=true".into(),
                "cdc.format=debezium".into(),
                "cdc.keys=userId".into(),
            ],
            &[],
        ),
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("not Debezium change events") && err.contains("plain.json"),
        "{err}"
    );
    assert!(!s.table().join("_delta_log").exists(), "nothing applied");

    // A later file that is not an event (nor a tombstone) stops its batch, naming it.
    let s = Scratch::new();
    land_fixture(&s, "debezium", |_, n| n.to_string());
    ok(&debezium_ingest(&s, &[]));
    s.land(
        "zz-bad.json",
        r#"{"after": {"id": 1006, "first_name": "No", "last_name": "Op", "email": "x"}, "ts_ms": 1}"#,
    );
    let out = run(
        &ingest_args(
            &s,
            &DEBEZIUM_OPTIONS
                .iter()
                .map(|o| o.to_string())
                .chain(["cloudFiles.includeMetadata=true".to_string()])
                .collect::<Vec<_>>(),
            &[],
        ),
        &[],
    );
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("zz-bad.json") && err.contains("no op"),
        "{err}"
    );
    assert_eq!(
        table_rows(&s.table(), "id").1,
        DEBEZIUM_TABLE,
        "nothing applied"
    );
}

const DMS_OPTIONS: &[&str] = &[
    "cloudFiles.format=csv",
    "cloudFiles.inferColumnTypes=true",
    "cdc.format=dms",
    "cdc.keys=id",
    "cdc.sequence_by=dms_ts",
];

/// The DMS fixtures' table: 2's change committed during the full load (before the load's
/// timestamp) wins over its full-load row, 1 deleted.
const DMS_TABLE: [&str; 3] = ["2 Bo Bergen", "3 Cy Arequipa", "4 Di Cusco"];

fn dms_rows(table: &Path) -> (Vec<String>, Vec<String>) {
    let (columns, rows) = table_rows(table, "id");
    // `_metadata` (kept: DMS needs the file name) and `_rescued_data` left out of the text.
    let keep: Vec<usize> = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.starts_with('_'))
        .map(|(i, _)| i)
        .collect();
    let rows = rows
        .iter()
        .map(|r| {
            let words: Vec<&str> = r.split(' ').collect();
            keep.iter().map(|&i| words[i]).collect::<Vec<_>>().join(" ")
        })
        .collect();
    (columns, rows)
}

#[test]
fn dms_files_apply_full_load_first_then_changes() {
    let s = Scratch::new();
    land_fixture(&s, "dms", |_, n| n.to_string());
    let options: Vec<String> = DMS_OPTIONS.iter().map(|o| o.to_string()).collect();
    let out = ok(&ingest(
        &s,
        &options,
        &["cdc.except_column_list=Op,dms_ts,_metadata,_rescued_data"],
    ));
    let (columns, rows) = table_rows(&s.table(), "id");
    assert_eq!(columns, ["id", "name", "city"], "{out}");
    assert_eq!(rows, DMS_TABLE, "{out}");

    // One file a batch, the CDC files first: the same table (the full-load rows come
    // before every change, whenever they arrive).
    for order in [[2usize, 0, 1], [1, 2, 0]] {
        let s = Scratch::new();
        land_fixture(&s, "dms", |i, n| format!("{}-{n}", order[i]));
        let out = ok(&ingest(&s, &options, &["cloudFiles.maxFilesPerTrigger=1"]));
        let (columns, rows) = dms_rows(&s.table());
        assert!(
            !columns
                .iter()
                .any(|c| c == "Op" || c == "dms_ts" || c == "__dms_phase"),
            "{columns:?}"
        );
        assert_eq!(rows, DMS_TABLE, "{order:?} {out}");
    }
}

fn state_table(s: &Scratch) -> std::path::PathBuf {
    s.table().join("_autoloader").join("cdc_state")
}

#[test]
fn the_state_survives_a_restart_and_is_appended_to() {
    let s = Scratch::new();
    // 123 inserted then deleted, 125 updated at 6: one run.
    s.land("a.json", RECORDS[..6].join("\n") + "\n");
    ok(&ingest(&s, &cdc_options(false), &[]));
    // Another process: late records, older than what the state remembers (125's update at
    // 5, 123's at 5 after its delete at 6), change nothing.
    s.land("b.json", RECORDS[6..].join("\n") + "\n");
    let out = ok(&ingest(&s, &cdc_options(false), &[]));
    assert_eq!(rows(&s.table()), EXAMPLE_A);
    assert!(out.contains("2 stale"), "the late records are stale: {out}");
    // A third run with a newer record of the deleted key brings it back.
    s.land(
        "c.json",
        r#"{"userId": 123, "name": "Isabel", "city": "Leon", "operation": "UPDATE", "sequenceNum": 7}"#
            .to_string()
            + "\n",
    );
    ok(&ingest(&s, &cdc_options(false), &[]));
    let mut expected: Vec<&str> = vec!["123 Isabel Leon"];
    expected.extend(EXAMPLE_A);
    assert_eq!(rows(&s.table()), expected);
    // The state's later commits append the entries their batch changed, removing nothing.
    let state = common::commit_texts(&state_table(&s));
    let last = state.last().unwrap();
    assert!(last.contains("\"add\""), "{last}");
    assert!(
        !last.contains("\"remove\""),
        "an append, not a rewrite: {last}"
    );
}

#[test]
fn the_state_is_compacted_and_the_table_stays_the_same() {
    let s = Scratch::new();
    for (i, r) in RECORDS.iter().enumerate() {
        s.land(&format!("{i:02}.json"), format!("{r}\n"));
    }
    // Updates that leave the rows as they are but replace their keys' entries: the log's
    // entries since its compacted part (the four inserts) come to outnumber it.
    for (i, seq) in [3u64, 4].into_iter().enumerate() {
        for (j, (key, city)) in [(124u64, "Oaxaca"), (126, "Cancun")].iter().enumerate() {
            let name = if *key == 124 { "Raul" } else { "Lily" };
            s.land(
                &format!("{:02}.json", RECORDS.len() + 2 * i + j),
                format!(
                    r#"{{"userId": {key}, "name": "{name}", "city": "{city}", "operation": "UPDATE", "sequenceNum": {seq}}}"#
                ) + "\n",
            );
        }
    }
    let out = run(
        &ingest_args(
            &s,
            &cdc_options(false),
            &["cloudFiles.maxFilesPerTrigger=1"],
        ),
        &[("RUST_LOG", "autoloader=info")],
    );
    ok(&out);
    assert_eq!(rows(&s.table()), EXAMPLE_A);
    // The run keeps the state in memory from its second batch, and compacts from it.
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("Compacting the CDC state from the state kept"),
        "{log}"
    );
    let state = common::commit_texts(&state_table(&s));
    // One commit per batch (after the table's creation); some compact (remove the log's
    // files, add tagged ones), the others only append.
    let compactions: Vec<&String> = state
        .iter()
        .filter(|c| c.contains("\"compacted\":true") && c.contains("\"remove\""))
        .collect();
    let appends = state
        .iter()
        .filter(|c| c.contains("\"compacted\":false") && c.contains("\"add\""))
        .count();
    assert!(!compactions.is_empty(), "no compaction: {state:?}");
    assert!(appends > 0, "no append: {state:?}");
    assert!(
        compactions[0].contains("autoloader.cdcCompacted"),
        "compacted files are tagged: {}",
        compactions[0]
    );
    // More records after the compactions: still the SCD 1 result (124 updated at 9).
    s.land(
        "99.json",
        r#"{"userId": 124, "name": "Raul", "city": "Puebla", "operation": "UPDATE", "sequenceNum": 9}"#
            .to_string()
            + "\n",
    );
    ok(&ingest(&s, &cdc_options(false), &[]));
    let expected = [
        "124 Raul Puebla",
        "125 Mercedes Guadalajara",
        "126 Lily Cancun",
    ];
    assert_eq!(rows(&s.table()), expected);
    // The compactions (made from the state the first run kept in memory) kept every
    // key's sequence and 123's tombstone: in a new process, which reads them from the
    // log, records older than them are stale.
    s.land(
        "9a.json",
        [
            r#"{"userId": 123, "name": "Isabel", "city": "Leon", "operation": "UPDATE", "sequenceNum": 4}"#,
            r#"{"userId": 126, "name": "Lily", "city": "Merida", "operation": "UPDATE", "sequenceNum": 1}"#,
            r#"{"userId": 125, "name": "Mercedes", "city": "Colima", "operation": "UPDATE", "sequenceNum": 6}"#,
        ]
        .join("\n")
            + "\n",
    );
    let out = ok(&ingest(&s, &cdc_options(false), &[]));
    assert!(out.contains("3 stale"), "{out}");
    assert_eq!(rows(&s.table()), expected);
}

/// The state log's commits that compacted it (removed its files).
fn state_compactions(s: &Scratch) -> usize {
    common::commit_texts(&state_table(s))
        .iter()
        .filter(|c| c.contains("\"remove\""))
        .count()
}

fn keyed_record(key: u64, name: &str, op: &str, seq: u64) -> String {
    format!(
        r#"{{"userId": {key}, "name": "{name}", "city": "c", "operation": "{op}", "sequenceNum": {seq}}}"#
    ) + "\n"
}

#[test]
fn a_first_load_of_new_keys_appends_its_state_and_a_later_run_does_not_compact_it_all() {
    // Ten batches of keys the flow has never seen (a delete among them): each state file
    // holds no dead entry, so each counts as compacted and the log is never rewritten.
    let s = Scratch::new();
    for f in 0..10u64 {
        let text: String = (f * 5..f * 5 + 5)
            .map(|k| keyed_record(k, "n", if k == 7 { "DELETE" } else { "INSERT" }, 1))
            .collect();
        s.land(&format!("{f:02}.json"), text);
    }
    let opts = cdc_options(false);
    ok(&ingest(&s, &opts, &["cloudFiles.maxFilesPerTrigger=1"]));
    assert_eq!(rows(&s.table()).len(), 49);
    assert_eq!(state_compactions(&s), 0, "a first load rewrote its state");
    let adds: Vec<String> = common::commit_texts(&state_table(&s))
        .iter()
        .flat_map(|c| {
            c.lines()
                .filter(|l| l.starts_with("{\"add\""))
                .map(String::from)
        })
        .collect();
    assert_eq!(adds.len(), 10);
    assert!(
        adds.iter().all(|a| a.contains("autoloader.cdcCompacted")),
        "{adds:?}"
    );
    // A new process (nothing kept in memory) with a changed key, a late record of the
    // deleted key and a new key: the log's compacted part is still the whole log, so
    // nothing calls for rewriting it; the table is the SCD 1 result.
    s.land(
        "10.json",
        keyed_record(0, "changed", "UPDATE", 2)
            + &keyed_record(7, "late", "UPDATE", 0)
            + &keyed_record(100, "new", "INSERT", 1),
    );
    let out = ok(&ingest(&s, &opts, &[]));
    assert!(out.contains("1 stale"), "{out}");
    assert_eq!(state_compactions(&s), 0);
    let table = rows(&s.table());
    assert_eq!(table.len(), 50);
    assert!(table.contains(&"0 changed c".to_string()), "{table:?}");
    assert!(!table.iter().any(|r| r.starts_with("7 ")), "{table:?}");
}

#[test]
fn a_truncate_in_a_later_batch_empties_the_table_and_drops_older_records() {
    let s = Scratch::new();
    s.land("a.json", RECORDS[..4].join("\n") + "\n");
    ok(&ingest(&s, &cdc_options(true), &[]));
    assert_eq!(rows(&s.table()).len(), 4);
    // The truncate at 3 alone: every row goes (all were sequenced at 1 or 2).
    s.land("b.json", format!("{TRUNCATE}\n"));
    ok(&ingest(&s, &cdc_options(true), &[]));
    assert!(rows(&s.table()).is_empty(), "{:?}", rows(&s.table()));
    // Later: a record below the mark is dropped, one after it applies.
    s.land(
        "c.json",
        [RECORDS[5], RECORDS[0]].join("\n") + "\n", // 125 at 6; 124 at 1
    );
    ok(&ingest(&s, &cdc_options(true), &[]));
    assert_eq!(rows(&s.table()), ["125 Mercedes Guadalajara"]);
    // And a restart remembers the mark: 126 at 2 stays out.
    s.land("d.json", format!("{}\n", RECORDS[3]));
    ok(&ingest(&s, &cdc_options(true), &[]));
    assert_eq!(rows(&s.table()), ["125 Mercedes Guadalajara"]);
}

#[test]
fn tombstones_past_the_gc_threshold_are_forgotten() {
    for (threshold, expected) in [
        // The default (two days): the delete is remembered, the late update stays out.
        (None, vec!["124 Raul Oaxaca"]),
        // Zero seconds: the tombstone is collected, the late update inserts the row again.
        (Some("0"), vec!["123 Isabel Chihuahua", "124 Raul Oaxaca"]),
    ] {
        let s = Scratch::new();
        s.land(
            "a.json",
            [RECORDS[0], RECORDS[1], RECORDS[4]].join("\n") + "\n",
        );
        ok(&ingest(&s, &cdc_options(false), &[]));
        assert_eq!(rows(&s.table()), ["124 Raul Oaxaca"]);
        if let Some(t) = threshold {
            ok(&run(
                &[
                    "table".to_string(),
                    "set".to_string(),
                    s.table().display().to_string(),
                    format!("pipelines.cdc.tombstoneGCThresholdInSeconds={t}"),
                ],
                &[],
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        s.land("b.json", format!("{}\n", RECORDS[7])); // 123 at 5, below the delete at 6
        ok(&ingest(&s, &cdc_options(false), &[]));
        assert_eq!(rows(&s.table()), expected, "threshold {threshold:?}");
    }
}

#[test]
fn dms_needs_its_timestamp_column() {
    let s = Scratch::new();
    land_fixture(&s, "dms", |_, n| n.to_string());
    let options: Vec<String> = DMS_OPTIONS[..4].iter().map(|o| o.to_string()).collect();
    let out = ingest(&s, &options, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("TimestampColumnName"),
        "{}",
        stderr(&out)
    );
}

/// The docs' preset examples, as printed there, each giving the fixtures' table.
#[test]
fn the_docs_preset_examples_run() {
    let block = common::doc_block("docs/guide/cdc.md", "## Presets for change envelopes", "sh");
    let s = Scratch::new();
    ok(&common::run_doc_sh(&block, s.dir.path(), &[]));
    let tables = [
        s.dir.path().join("silver/customers"),
        s.dir.path().join("silver/dms_customers"),
    ];
    assert_eq!(table_rows(&tables[0], "id").1, DEBEZIUM_TABLE);
    assert_eq!(
        table_rows(&tables[1], "id"),
        (
            vec!["id".to_string(), "name".into(), "city".into()],
            DMS_TABLE.map(String::from).to_vec()
        )
    );
}

/// `status` of a CDC stream sums what its commits did: rows inserted, updated and deleted,
/// records stale, in its text and `--json`; an append stream shows none of it.
#[test]
fn status_shows_what_the_changes_did() {
    let s = Scratch::new();
    land_fixture(&s, "debezium", |_, n| n.to_string());
    ok(&debezium_ingest(&s, &["cloudFiles.maxFilesPerTrigger=1"]));
    // A second run with a truncate and a stale record: the sums go on.
    s.land(
        "zz-more.json",
        concat!(
            r#"{"before":null,"after":{"id":1001,"first_name":"Old","last_name":"Row","email":"o"},"source":{"connector":"mysql","file":"mysql-bin.000001","pos":4,"row":0},"op":"c","ts_ms":1}"#,
            "\n",
            r#"{"before":null,"after":null,"source":{"connector":"mysql","file":"mysql-bin.000004","pos":900,"row":0},"op":"t","ts_ms":1764580300000}"#,
            "\n"
        ),
    );
    ok(&debezium_ingest(&s, &[]));
    assert_eq!(
        table_rows(&s.table(), "id").1,
        Vec::<String>::new(),
        "the truncate emptied it"
    );
    let table = s.table().display().to_string();
    let json: serde_json::Value = serde_json::from_str(&ok(&run(
        &["status".into(), table.clone(), "--json".into()],
        &[],
    )))
    .unwrap();
    assert_eq!(
        json["changes"],
        serde_json::json!({
            "rowsInserted": 5, "rowsUpdated": 2, "rowsDeleted": 5,
            "recordsStale": 2, "recordsTruncated": 0
        }),
        "{json}"
    );
    let text = ok(&run(&["status".into(), table], &[]));
    assert!(
        text.contains("changes:        5 inserted, 2 updated, 5 deleted, 2 stale"),
        "{text}"
    );

    let append = Scratch::new();
    append.land("a.json", format!("{}\n", RECORDS[0]));
    ok(&append.ingest(&[]));
    let table = append.table().display().to_string();
    let json: serde_json::Value =
        serde_json::from_str(&ok(&run(&["status".into(), table, "--json".into()], &[]))).unwrap();
    assert!(json.get("changes").is_none(), "{json}");
}

/// From `streams.toml` (`format = "debezium"` in `[stream.cdc]`), the first run seeing only
/// the snapshot (so the schema has `before` as STRING, every record having it null): the
/// later runs' deletes still find their key in `before`.
#[test]
fn debezium_from_streams_toml_over_runs() {
    let s = Scratch::new();
    let dir = s.dir.path();
    let landing = dir.join("landing/customers");
    std::fs::create_dir_all(&landing).unwrap();
    let mut files: Vec<_> = std::fs::read_dir(fixture("debezium"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let config = dir.join("streams.toml");
    std::fs::write(
        &config,
        r#"
[[stream]]
name = "customers"
source = "landing/customers"
table = "silver/customers"
[stream.options]
"cloudFiles.inferColumnTypes" = true
"cloudFiles.includeMetadata" = false
[stream.cdc]
format = "debezium"
keys = ["id"]
except_column_list = ["_rescued_data"]
"#,
    )
    .unwrap();
    for f in &files {
        std::fs::copy(f, landing.join(f.file_name().unwrap())).unwrap();
        ok(&run(
            &["run".into(), config.display().to_string(), "--once".into()],
            &[],
        ));
    }
    assert_eq!(
        table_rows(&dir.join("silver/customers"), "id").1,
        DEBEZIUM_TABLE
    );
}

#[test]
fn a_clustered_batch_rewrites_only_the_files_holding_its_keys() {
    let s = Scratch::new();
    // Three batches of new keys: three files of consecutive ids, none rewritten.
    for f in 0..3 {
        let lines: Vec<String> = (f * 100 + 1..=f * 100 + 100)
            .map(|id| {
                format!(
                    r#"{{"userId": {id}, "name": "n{id}", "city": "c", "operation": "INSERT", "sequenceNum": 1}}"#
                )
            })
            .collect();
        s.land(&format!("{f}.json"), lines.join("\n") + "\n");
    }
    let opts = [
        cdc_options(false),
        vec!["cloudFiles.maxFilesPerTrigger=1".into()],
    ]
    .concat();
    ok(&ingest(&s, &opts, &[]));
    let info = |c: &str, k: &str| -> i64 {
        let v: serde_json::Value = c
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v.get("commitInfo").is_some())
            .unwrap();
        v["commitInfo"]["autoloader"]["cdc"][k].as_i64().unwrap()
    };
    let commits = common::commit_texts(&s.table());
    let merges: Vec<&String> = commits.iter().filter(|c| c.contains("MERGE")).collect();
    assert_eq!(merges.len(), 3);
    for m in &merges {
        assert_eq!(info(m, "filesRewritten"), 0, "inserts of new keys: {m}");
        assert_eq!(
            info(m, "filesRead"),
            0,
            "pruned by the files' key ranges: {m}"
        );
    }
    // Updates of ids 150..=160: only the second file holds them.
    let lines: Vec<String> = (150..=160)
        .map(|id| {
            format!(
                r#"{{"userId": {id}, "name": "u{id}", "city": "c", "operation": "UPDATE", "sequenceNum": 2}}"#
            )
        })
        .collect();
    s.land("3.json", lines.join("\n") + "\n");
    ok(&ingest(&s, &opts, &[]));
    let commits = common::commit_texts(&s.table());
    let last = commits.last().unwrap();
    assert_eq!(info(last, "filesRewritten"), 1, "{last}");
    assert_eq!(info(last, "filesRead"), 1, "{last}");
    assert_eq!(info(last, "rowsUpdated"), 11, "{last}");
    let all = rows(&s.table());
    assert_eq!(all.len(), 300);
    assert!(all.contains(&"155 u155 c".to_string()), "{all:?}");
    assert!(all.contains(&"149 n149 c".to_string()), "{all:?}");
}

/// An `optimize` that compacts the files a CDC batch is rewriting, between the batch's read
/// and its commit: the batch commits nothing and says so, and the next run applies it to
/// the compacted table, every row once.
#[test]
fn a_merge_over_files_compacted_meanwhile_commits_nothing_and_applies_on_the_rerun() {
    let s = Scratch::new();
    let opts = [
        cdc_options(false),
        vec!["cloudFiles.maxFilesPerTrigger=1".into()],
    ]
    .concat();
    // Three files of inserts (ids 1..=30), then one batch updating a key of each.
    for f in 0..3u32 {
        let lines: Vec<String> = (f * 10 + 1..=f * 10 + 10)
            .map(|id| {
                format!(
                    r#"{{"userId": {id}, "name": "n{id}", "city": "c", "operation": "INSERT", "sequenceNum": 1}}"#
                )
            })
            .collect();
        s.land(&format!("{f}.json"), lines.join("\n") + "\n");
    }
    ok(&ingest(&s, &opts, &[]));
    s.land(
        "3.json",
        [5u32, 15, 25]
            .map(|id| {
                format!(
                    r#"{{"userId": {id}, "name": "u{id}", "city": "c", "operation": "UPDATE", "sequenceNum": 2}}"#
                )
            })
            .join("\n")
            + "\n",
    );
    let mut slow = Held::spawn(
        std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
            .args(ingest_args(&s, &opts, &[]))
            .env("AUTOLOADER_FAILPOINT", "before-delta-commit=sleep(3000)"),
    );
    slow.wait_for_failpoint("before-delta-commit");
    ok(&run(
        &["optimize".into(), s.table().display().to_string()],
        &[],
    ));
    slow.assert_still_held("optimize");
    let out = slow.wait_with_output();
    assert!(!out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("replaced by another writer"),
        "{}",
        stderr(&out)
    );
    ok(&ingest(&s, &opts, &[]));
    let all = rows(&s.table());
    assert_eq!(all.len(), 30, "every row once: {all:?}");
    for id in [5, 15, 25] {
        assert!(all.contains(&format!("{id} u{id} c")), "{all:?}");
    }
}

/// `ignore_null_updates` keeps a stored value a later batch's null would overwrite: one
/// run per change record, as SCD 2 already does (issue 36.1).
#[test]
fn ignore_null_updates_keeps_stored_values_across_batches() {
    let s = Scratch::new();
    let options: Vec<String> = [
        "cloudFiles.inferColumnTypes=true",
        "cloudFiles.includeMetadata=false",
        "cdc.keys=userId",
        "cdc.sequence_by=seq",
        "cdc.ignore_null_updates=true",
        "cdc.except_column_list=seq,_rescued_data",
    ]
    .map(String::from)
    .to_vec();
    let records = [
        r#"{"userId": 1, "name": "Isabel", "city": "Monterrey", "phone": "555-0101", "seq": 1}"#,
        r#"{"userId": 1, "name": null, "city": "Chihuahua", "phone": null, "seq": 2}"#,
        r#"{"userId": 1, "name": "Isa", "city": null, "phone": null, "seq": 3}"#,
    ];
    for (i, r) in records.iter().enumerate() {
        s.land(&format!("{i}.json"), format!("{r}\n"));
        ok(&ingest(&s, &options, &[]));
    }
    let py = common::read_with_python(&s.table(), "userId");
    let row = &py["rows"][0];
    assert_eq!(
        (&row["name"], &row["city"], &row["phone"]),
        (
            &serde_json::json!("Isa"),
            &serde_json::json!("Chihuahua"),
            &serde_json::json!("555-0101")
        ),
        "{py}"
    );
}

/// A batch of keys the flow has never seen is appended, not merged: its deletes still
/// leave tombstones (a later, older upsert stays out), its upserts become rows that a
/// later batch updates, and keys past the table's are appended again.
#[test]
fn batches_of_new_keys_are_appended_with_their_tombstones() {
    let s = Scratch::new();
    let rec = |key: u32, name: &str, op: &str, seq: u32| {
        format!(
            r#"{{"userId": {key}, "name": "{name}", "city": "c", "operation": "{op}", "sequenceNum": {seq}}}"#
        )
    };
    s.land(
        "1.json",
        [
            rec(1, "", "DELETE", 6),
            rec(2, "B", "INSERT", 1),
            rec(3, "C", "INSERT", 1),
        ]
        .join("\n")
            + "\n",
    );
    let out = ok(&ingest(&s, &cdc_options(false), &[]));
    assert!(
        out.contains("2 inserted, 0 updated, 0 deleted, 0 stale"),
        "{out}"
    );
    assert_eq!(rows(&s.table()), ["2 B c", "3 C c"]);
    let info = common::commit_infos(&s.table());
    let cdc = &info.last().unwrap()["cdc"];
    assert_eq!(
        (&cdc["rowsInserted"], &cdc["filesRewritten"]),
        (&2.into(), &0.into()),
        "{cdc}"
    );
    s.land(
        "2.json",
        [rec(1, "A", "INSERT", 5), rec(2, "B2", "UPDATE", 2)].join("\n") + "\n",
    );
    let out = ok(&ingest(&s, &cdc_options(false), &[]));
    assert!(
        out.contains("0 inserted, 1 updated, 0 deleted, 1 stale"),
        "{out}"
    );
    assert_eq!(rows(&s.table()), ["2 B2 c", "3 C c"]);
    s.land(
        "3.json",
        [rec(7, "G", "INSERT", 1), rec(8, "H", "INSERT", 1)].join("\n") + "\n",
    );
    let out = ok(&ingest(&s, &cdc_options(false), &[]));
    assert!(
        out.contains("2 inserted, 0 updated, 0 deleted, 0 stale"),
        "{out}"
    );
    assert_eq!(rows(&s.table()), ["2 B2 c", "3 C c", "7 G c", "8 H c"]);
}

#[test]
fn batches_of_ascending_keys_are_new_only_where_nothing_kept_or_stored_holds_them() {
    // One run, a batch a file: from the third batch on the state is kept in memory, and a
    // batch of ascending keys that nothing kept can hold is appended without a key set.
    // Keys in a gap between kept ones are new; a kept key (a live one, a tombstone) among
    // ascending keys is not, and must update, or lose to the tombstone's later sequence.
    let s = Scratch::new();
    let batch = |keys: &[(u64, &str, &str, u64)]| -> String {
        keys.iter()
            .map(|&(k, name, op, seq)| keyed_record(k, name, op, seq))
            .collect()
    };
    let files = [
        batch(&[
            (0, "a", "INSERT", 1),
            (1, "a", "INSERT", 1),
            (5, "a", "INSERT", 1),
        ]),
        batch(&[(10, "b", "INSERT", 1), (11, "b", "INSERT", 1)]),
        // Past every kept key.
        batch(&[
            (20, "c", "INSERT", 1),
            (21, "c", "DELETE", 1),
            (22, "c", "INSERT", 1),
        ]),
        // In the gap between 5 and 10.
        batch(&[(6, "d", "INSERT", 1), (7, "d", "INSERT", 1)]),
        // A kept key first, then new ones: 1 is updated, not appended a second time.
        batch(&[
            (1, "e", "UPDATE", 2),
            (30, "e", "INSERT", 1),
            (31, "e", "INSERT", 1),
        ]),
        // The tombstone of 21 (sequence 1) is kept: an older record of 21 is stale, a
        // newer one brings it back; 40 is new.
        batch(&[(21, "f", "INSERT", 0), (40, "f", "INSERT", 1)]),
        batch(&[(21, "g", "INSERT", 2), (41, "g", "INSERT", 1)]),
        // Below every kept key, and a key already in the table through its range's end.
        batch(&[(0, "h", "UPDATE", 3), (41, "h", "UPDATE", 3)]),
    ];
    for (i, text) in files.iter().enumerate() {
        s.land(&format!("{i:02}.json"), text.clone());
    }
    let opts = cdc_options(false);
    let out = ok(&ingest(&s, &opts, &["cloudFiles.maxFilesPerTrigger=1"]));
    assert!(out.contains("1 stale"), "{out}");
    let expected = [
        "0 h c", "1 e c", "10 b c", "11 b c", "20 c c", "21 g c", "22 c c", "30 e c", "31 e c",
        "40 f c", "41 h c", "5 a c", "6 d c", "7 d c",
    ];
    assert_eq!(rows(&s.table()), expected);
    // The same files in one batch give the same table.
    let one = Scratch::new();
    for (i, text) in files.iter().enumerate() {
        one.land(&format!("{i:02}.json"), text.clone());
    }
    ok(&ingest(&one, &opts, &[]));
    assert_eq!(rows(&one.table()), expected);
}

/// For each data file of the table at `table` that the last commit holds: whether the
/// column at `path` has a dictionary page, and its encodings.
fn column_encodings(table: &Path, path: &str) -> Vec<(bool, Vec<String>)> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    common::live_files(table)
        .iter()
        .map(|file| {
            let reader =
                SerializedFileReader::new(std::fs::File::open(table.join(file)).unwrap()).unwrap();
            let group = reader.metadata().row_group(0);
            let chunk = group
                .columns()
                .iter()
                .find(|c| c.column_path().string() == path)
                .unwrap_or_else(|| panic!("{file} has no column {path}"));
            let encodings = chunk.encodings().map(|e| format!("{e:?}")).collect();
            (chunk.dictionary_page_offset().is_some(), encodings)
        })
        .collect()
}

#[test]
fn integer_columns_are_delta_encoded_and_every_reader_reads_them_back() {
    // An append: each integer column keeps its dictionary up to the page limit, then is
    // delta-encoded.
    let s = Scratch::new();
    s.land("orders.json", common::orders_jsonl(1, 10_001));
    ok(&s.ingest(&["cloudFiles.inferColumnTypes=true"]));
    let files = column_encodings(&s.table(), "order_id");
    assert_eq!(files.len(), 1, "{files:?}");
    let (dictionary, encodings) = &files[0];
    assert!(*dictionary, "an appended file starts with a dictionary");
    assert!(
        encodings.iter().any(|e| e == "DELTA_BINARY_PACKED"),
        "past the dictionary, delta-encoded: {encodings:?}"
    );
    common::assert_table_ids_once(&s.table(), 1..10_001, "append");
    let py = common::read_with_python(&s.table(), "order_id");
    assert_eq!(py["num_rows"], 10_000, "{}", py["types"]);

    // A CDC target, first loaded then merged into: integers with no dictionary at all.
    let s = Scratch::new();
    let record = |k: u64, op: &str, seq: u64| {
        format!(
            r#"{{"userId": {k}, "amount": {}, "at": "2026-01-01T00:00:{:02}Z", "info": {{"n": {}}}, "operation": "{op}", "sequenceNum": {seq}}}"#,
            k * 7,
            k % 60,
            k % 3
        ) + "\n"
    };
    s.land(
        "0.json",
        (0..10_000)
            .map(|k| record(k, "INSERT", 1))
            .collect::<String>(),
    );
    let opts = cdc_options(false);
    ok(&ingest(&s, &opts, &[]));
    s.land(
        "1.json",
        record(5, "UPDATE", 2).replace("\"amount\": 35", "\"amount\": -1"),
    );
    ok(&ingest(&s, &opts, &[]));
    for column in ["userId", "amount", "at", "info.n"] {
        let files = column_encodings(&s.table(), column);
        assert!(!files.is_empty());
        for (dictionary, encodings) in files {
            assert!(
                !dictionary,
                "{column}: a CDC target's file has no dictionary"
            );
            assert!(
                encodings.iter().any(|e| e == "DELTA_BINARY_PACKED"),
                "{column}: {encodings:?}"
            );
        }
    }
    let py = common::read_with_python(&s.table(), "userId");
    let rows = py["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 10_000);
    for r in rows {
        let k = r["userId"].as_u64().unwrap();
        let amount = if k == 5 { -1 } else { k as i64 * 7 };
        assert_eq!(r["amount"].as_i64(), Some(amount), "{r}");
        assert_eq!(r["info"]["n"].as_u64(), Some(k % 3), "{r}");
        assert!(
            r["at"]
                .as_str()
                .unwrap()
                .contains(&format!(":{:02}", k % 60)),
            "{r}"
        );
    }
}
