//! APPLY CHANGES into an SCD type 2 table: Databricks' worked examples B and D
//! (lakeflow.md §1) in one batch and one record per batch in shuffled orders, late records
//! splitting versions, and SIGKILLs at every step and at random moments, each giving
//! exactly the documented table, read back by Python deltalake.

use std::path::Path;

use crate::cdc::{DEBEZIUM_OPTIONS, RECORDS, cdc_options, ingest, ingest_args, land_fixture};
use crate::common::rows::json_text;
use crate::common::{self, Scratch, crash, ok, run, stderr};

fn scd2_options(extra: &[&str]) -> Vec<String> {
    let mut o = cdc_options(false);
    o.push("cdc.stored_as_scd_type=2".into());
    o.extend(extra.iter().map(|s| s.to_string()));
    o
}

/// The table's rows as `userId name city __START_AT __END_AT`, sorted.
fn versions(table: &Path) -> Vec<String> {
    let py = common::read_with_python(table, "userId");
    let mut out: Vec<String> = py["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {} {} {}-{}",
                json_text(&r["userId"]),
                json_text(&r["name"]),
                json_text(&r["city"]),
                json_text(&r["__START_AT"]),
                json_text(&r["__END_AT"])
            )
        })
        .collect();
    out.sort();
    out
}

const EXAMPLE_B: [&str; 7] = [
    "123 Isabel Chihuahua 5-6",
    "123 Isabel Monterrey 1-5",
    "124 Raul Oaxaca 1-null",
    "125 Mercedes Guadalajara 6-null",
    "125 Mercedes Mexicali 5-6",
    "125 Mercedes Tijuana 2-5",
    "126 Lily Cancun 2-null",
];

const EXAMPLE_D: [&str; 4] = [
    "123 Isabel Chihuahua 1-6",
    "124 Raul Oaxaca 1-null",
    "125 Mercedes Guadalajara 2-null",
    "126 Lily Cancun 2-null",
];

const ORDERS: [[usize; 8]; 4] = [
    [0, 1, 2, 3, 4, 5, 6, 7],
    [7, 6, 5, 4, 3, 2, 1, 0],
    [4, 7, 0, 5, 2, 6, 1, 3],
    [5, 3, 6, 1, 7, 0, 4, 2],
];

#[test]
fn scd2_example_in_one_batch_gives_the_documented_table() {
    let s = Scratch::new();
    s.land("changes.json", RECORDS.join("\n") + "\n");
    let out = ok(&ingest(&s, &scd2_options(&[]), &[]));
    assert_eq!(versions(&s.table()), EXAMPLE_B, "{out}");
    let py = common::read_with_python(&s.table(), "userId");
    let types: Vec<String> = py["types"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k} {}", json_text(v)))
        .collect();
    assert_eq!(
        types,
        [
            "userId int64",
            "name string",
            "city string",
            "__START_AT int64",
            "__END_AT int64"
        ],
        "the version columns have the sequence's type"
    );
    assert!(
        out.contains("7 inserted, 0 updated, 0 deleted, 0 stale"),
        "{out}"
    );
    ok(&ingest(&s, &scd2_options(&[]), &[]));
    assert_eq!(versions(&s.table()), EXAMPLE_B, "a rerun changes nothing");
}

#[test]
fn scd2_example_one_record_per_batch_in_shuffled_orders() {
    for order in ORDERS {
        let s = Scratch::new();
        for (pos, &i) in order.iter().enumerate() {
            s.land(&format!("{pos:02}.json"), format!("{}\n", RECORDS[i]));
        }
        ok(&ingest(
            &s,
            &scd2_options(&[]),
            &["cloudFiles.maxFilesPerTrigger=1"],
        ));
        assert_eq!(versions(&s.table()), EXAMPLE_B, "order {order:?}");
    }
}

#[test]
fn scd2_tracking_history_except_city_gives_the_documented_table() {
    let opts = scd2_options(&["cdc.track_history_except_column_list=city"]);
    let s = Scratch::new();
    s.land("changes.json", RECORDS.join("\n") + "\n");
    ok(&ingest(&s, &opts, &[]));
    assert_eq!(versions(&s.table()), EXAMPLE_D);
    for order in ORDERS {
        let s = Scratch::new();
        for (pos, &i) in order.iter().enumerate() {
            s.land(&format!("{pos:02}.json"), format!("{}\n", RECORDS[i]));
        }
        ok(&ingest(&s, &opts, &["cloudFiles.maxFilesPerTrigger=1"]));
        assert_eq!(versions(&s.table()), EXAMPLE_D, "order {order:?}");
    }
}

fn record(key: u32, name: &str, city: &str, op: &str, seq: u32) -> String {
    format!(
        r#"{{"userId": {key}, "name": "{name}", "city": "{city}", "operation": "{op}", "sequenceNum": {seq}}}"#
    )
}

#[test]
fn late_records_split_versions_and_runs() {
    // [10,20) closed by a delete at 20, then a late update at 15: [10,15) old, [15,20) new.
    let s = Scratch::new();
    s.land(
        "a.json",
        [
            record(1, "A", "x", "UPSERT", 10),
            record(1, "A", "x", "DELETE", 20),
            // A run A, A (one version), later split by B at 2.
            record(2, "A", "x", "UPSERT", 1),
            record(2, "A", "z", "UPSERT", 3),
        ]
        .join("\n")
            + "\n",
    );
    let opts = scd2_options(&["cdc.track_history_except_column_list=city"]);
    ok(&ingest(&s, &opts, &[]));
    assert_eq!(
        versions(&s.table()),
        ["1 A x 10-20", "2 A z 1-null"],
        "a run of equal tracked values is one version, with the latest untracked value"
    );
    s.land(
        "b.json",
        [
            record(1, "B", "y", "UPSERT", 15),
            record(2, "B", "y", "UPSERT", 2),
        ]
        .join("\n")
            + "\n",
    );
    let out = ok(&ingest(&s, &opts, &[]));
    assert_eq!(
        versions(&s.table()),
        [
            "1 A x 10-15",
            "1 B y 15-20",
            "2 A x 1-2",
            "2 A z 3-null",
            "2 B y 2-3"
        ],
        "{out}"
    );
    // A late delete inside a version ends it there; the later delete finds nothing open.
    s.land("c.json", record(1, "", "", "DELETE", 12) + "\n");
    ok(&ingest(&s, &opts, &[]));
    assert!(
        versions(&s.table()).contains(&"1 A x 10-12".to_string()),
        "{:?}",
        versions(&s.table())
    );
    // A record with an applied key and sequence is stale.
    s.land("d.json", record(2, "C", "q", "UPSERT", 3) + "\n");
    let out = ok(&ingest(&s, &opts, &[]));
    assert!(out.contains("1 stale"), "{out}");
    assert!(!versions(&s.table()).iter().any(|v| v.contains(" C ")));
}

#[test]
fn a_sequence_of_two_columns_gives_struct_version_columns() {
    let s = Scratch::new();
    s.land(
        "a.json",
        [
            r#"{"id": 1, "v": "a", "ts": 5, "pos": 2}"#,
            r#"{"id": 1, "v": "b", "ts": 5, "pos": 9}"#,
            r#"{"id": 1, "v": "c", "ts": 4, "pos": 50}"#,
        ]
        .join("\n")
            + "\n",
    );
    let opts: Vec<String> = [
        "cloudFiles.inferColumnTypes=true",
        "cloudFiles.includeMetadata=false",
        "cdc.keys=id",
        "cdc.sequence_by=ts,pos",
        "cdc.stored_as_scd_type=2",
        "cdc.except_column_list=ts,pos,_rescued_data",
    ]
    .map(String::from)
    .to_vec();
    ok(&ingest(&s, &opts, &[]));
    let py = common::read_with_python(&s.table(), "v");
    let start = json_text(&py["types"]["__START_AT"]);
    assert!(
        start.starts_with("struct<ts: int64") && start.contains("pos: int64"),
        "{start}"
    );
    let rows: Vec<String> = py["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {}/{}-{}",
                json_text(&r["v"]),
                json_text(&r["__START_AT"]["ts"]),
                json_text(&r["__START_AT"]["pos"]),
                json_text(&r["__END_AT"]).replace(' ', "")
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            r#"a 5/2-{"ts":5,"pos":9}"#,
            r#"b 5/9-null"#,
            r#"c 4/50-{"ts":5,"pos":2}"#
        ],
        "ordered by ts, then pos"
    );
}

/// The Debezium fixtures' versions: 1002 closed by its delete, 1003's late update (file
/// 0008, `ts_ms` ...0000000, before ...0100000 of file 0004) a version of its own between
/// the two others; `__START_AT` is the preset's sequence `(ts_ms, source position)`.
const DEBEZIUM_VERSIONS: [&str; 8] = [
    "1001 sally.t@acme.com 1764579800000/3.1423.0-null",
    "1001 sally.thomas@acme.com 1764579600101/3.157.0-1764579800000/3.1423.0",
    "1002 gbailey@foobar.com 1764579600102/3.157.0-1764579900000/3.1871.0",
    "1003 ed.walker@example.com 1764580100000/3.2950.0-null",
    "1003 ed@walker.com 1764579600103/3.157.0-1764580000000/3.2466.0",
    "1003 edward@walker.com 1764580000000/3.2466.0-1764580100000/3.2950.0",
    "1004 annek@noanswer.org 1764579700000/3.1012.0-null",
    "1005 jane.doe@example.com 1764580200000/4.405.0-null",
];

/// A version bound `{__ts_ms, __source_pos}` as `ts_ms/file.pos.row` (the MySQL position's
/// three big-endian u64s), or `null`.
fn debezium_bound(v: &serde_json::Value) -> String {
    if v.is_null() {
        return "null".into();
    }
    let pos = json_text(&v["__source_pos"]);
    let bytes = hex::decode(&pos).unwrap_or_else(|e| panic!("{pos}: {e}"));
    assert_eq!(bytes.len(), 24, "{pos}");
    let part = |i: usize| u64::from_be_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap());
    format!(
        "{}/{}.{}.{}",
        json_text(&v["__ts_ms"]),
        part(0),
        part(1),
        part(2)
    )
}

fn debezium_versions(table: &Path) -> Vec<String> {
    let py = common::read_with_python(table, "id");
    let start = json_text(&py["types"]["__START_AT"]);
    assert_eq!(
        start, "struct<__ts_ms: int64, __source_pos: binary>",
        "the version columns have the preset's sequence type"
    );
    let mut out: Vec<String> = py["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {} {}-{}",
                json_text(&r["id"]),
                json_text(&r["email"]),
                debezium_bound(&r["__START_AT"]),
                debezium_bound(&r["__END_AT"])
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn debezium_events_into_an_scd2_target_give_every_version() {
    let mut opts: Vec<String> = DEBEZIUM_OPTIONS.iter().map(|o| o.to_string()).collect();
    opts.push("cdc.stored_as_scd_type=2".into());
    // In one batch, and one file a batch (1003's late update then splits the version the
    // previous batch opened).
    for extra in [&[][..], &["cloudFiles.maxFilesPerTrigger=1"][..]] {
        let s = Scratch::new();
        land_fixture(&s, "debezium", |_, n| n.to_string());
        let out = ok(&ingest(&s, &opts, extra));
        assert_eq!(
            debezium_versions(&s.table()),
            DEBEZIUM_VERSIONS,
            "{extra:?} {out}"
        );
    }
}

#[test]
fn ignore_null_updates_keeps_stored_values_in_a_version() {
    let s = Scratch::new();
    s.land(
        "a.json",
        [
            r#"{"userId": 1, "name": "A", "city": "x", "operation": "UPSERT", "sequenceNum": 1}"#,
            r#"{"userId": 1, "name": null, "city": "y", "operation": "UPSERT", "sequenceNum": 2}"#,
        ]
        .join("\n")
            + "\n",
    );
    ok(&ingest(
        &s,
        &scd2_options(&["cdc.ignore_null_updates=true"]),
        &[],
    ));
    assert_eq!(
        versions(&s.table()),
        ["1 A x 1-2", "1 A y 2-null"],
        "the null name keeps A; the city change opens a version"
    );
}

#[test]
fn a_new_column_in_the_changes_evolves_the_scd2_target() {
    let s = Scratch::new();
    s.land("a.json", record(1, "A", "x", "UPSERT", 1) + "\n");
    let opts = scd2_options(&[]);
    ok(&ingest(&s, &opts, &[]));
    s.land(
        "b.json",
        r#"{"userId": 1, "name": "A", "city": "x", "tier": "gold", "operation": "UPSERT", "sequenceNum": 2}"#
            .to_string()
            + "\n",
    );
    let out = run(&ingest_args(&s, &opts, &[]), &[]);
    // addNewColumns stops the stream once with the new schema recorded, as for appends.
    if !out.status.success() {
        ok(&ingest(&s, &opts, &[]));
    }
    let py = common::read_with_python(&s.table(), "__START_AT");
    let rows: Vec<String> = py["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {}-{}",
                json_text(&r["tier"]),
                json_text(&r["__START_AT"]),
                json_text(&r["__END_AT"])
            )
        })
        .collect();
    assert_eq!(rows, ["null 1-2", "gold 2-null"], "{py}");
}

#[test]
fn an_scd1_table_is_not_taken_for_an_scd2_target() {
    let s = Scratch::new();
    s.land("a.json", record(1, "A", "x", "UPSERT", 1) + "\n");
    ok(&ingest(&s, &cdc_options(false), &[]));
    s.land("b.json", record(1, "B", "x", "UPSERT", 2) + "\n");
    // The flow's own checkpoint recorded SCD type 1: a changed type needs a full refresh.
    let out = ingest(&s, &scd2_options(&[]), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cdc.stored_as_scd_type"),
        "{}",
        stderr(&out)
    );
}

/// A longer stream: keys 0..30, each changed several times, with deletes and late records.
fn long_stream(s: &Scratch) {
    let mut lines = Vec::new();
    for round in 0..6u64 {
        for key in 0..30u64 {
            let seq = round * 100 + (key * 7919 + round * 31) % 97;
            let op = if (key + round) % 11 == 0 {
                "DELETE"
            } else {
                "UPSERT"
            };
            lines.push(format!(
                r#"{{"userId": {key}, "name": "n{}", "city": "c{}", "operation": "{op}", "sequenceNum": {seq}}}"#,
                (key + round) % 3,
                (key * round) % 13
            ));
        }
    }
    // Late ones: the last rounds' files come first.
    // 23 files, so the records table merges its files during the run.
    for (i, chunk) in lines.chunks(8).rev().enumerate() {
        s.land(&format!("{i:03}.json"), chunk.join("\n") + "\n");
    }
}

#[test]
fn random_sigkills_of_an_scd2_flow_give_the_uninterrupted_table() {
    let opts = scd2_options(&[
        "cdc.track_history_column_list=name",
        "cloudFiles.maxFilesPerTrigger=1",
    ]);
    let calm = Scratch::new();
    long_stream(&calm);
    ok(&ingest(&calm, &opts, &[]));
    let expected = versions(&calm.table());
    assert!(expected.len() > 40, "{expected:?}");

    let s = Scratch::new();
    long_stream(&s);
    let args = ingest_args(&s, &opts, &[]);
    let kills = common::sigkill_until_done(&args, |_| {});
    assert!(kills > 0, "no run was ever killed: the test proved nothing");
    ok(&run(&args, &[]));
    assert_eq!(versions(&s.table()), expected, "after random kills");
}

#[test]
fn an_scd2_flow_killed_at_every_step_gives_the_uninterrupted_table() {
    for name in crash::cdc_failpoints() {
        let s = Scratch::new();
        for (i, r) in RECORDS.iter().enumerate() {
            s.land(&format!("{i:02}.json"), format!("{r}\n"));
        }
        let opts = scd2_options(&["cloudFiles.maxFilesPerTrigger=3"]);
        crash::kill_at_then_rerun(&ingest_args(&s, &opts, &[]), name, 2);
        assert_eq!(versions(&s.table()), EXAMPLE_B, "{name}");
    }
}

#[test]
fn the_docs_scd2_config_runs() {
    let toml = common::doc_block("docs/guide/cdc.md", "## SCD type 2", "toml");
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
    // The guide's table keeps _metadata too; the versions are example D's.
    assert_eq!(versions(&dir.join("silver/customers_history")), EXAMPLE_D);
}

#[test]
fn records_sharing_a_sequence_follow_the_documented_rule_and_emit_an_event() {
    let s = Scratch::new();
    s.land(
        "a.json",
        [
            record(1, "A", "x", "UPSERT", 5),
            record(1, "B", "x", "UPSERT", 5),
            record(2, "A", "x", "UPSERT", 5),
            record(2, "", "", "DELETE", 5),
            record(2, "C", "x", "UPSERT", 5),
        ]
        .join("\n")
            + "\n",
    );
    ok(&ingest(&s, &scd2_options(&[]), &[]));
    assert_eq!(
        versions(&s.table()),
        ["1 B x 5-null"],
        "the later upsert wins; the delete wins over upserts (nothing to close)"
    );
    let events = common::events_of(&s.table().join("_autoloader"), "sequence_ties");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["ties"], 3, "{events:?}");
}

#[test]
fn many_batches_keep_the_records_table_small_and_the_history_exact() {
    // 70 one-file batches: keys 0..12 changed in every round, the rounds landed out of
    // order (late records split versions), deletes, and a column that appears in the
    // second run (rounds 40 and later).
    let land = |s: &Scratch, rounds: std::ops::Range<u64>| {
        for round in rounds {
            let file = (round * 37) % 40 + if round >= 40 { 40 } else { 0 };
            let mut out = Vec::new();
            for key in 0..12u64 {
                let op = if (key + round) % 9 == 0 {
                    "DELETE"
                } else {
                    "UPSERT"
                };
                let tier = if round >= 40 {
                    format!(r#", "tier": "t{}""#, round % 4)
                } else {
                    String::new()
                };
                out.push(format!(
                    r#"{{"userId": {key}, "name": "n{}", "city": "c{}", "operation": "{op}", "sequenceNum": {}{tier}}}"#,
                    (key + round) % 5,
                    round % 3,
                    (round * 37 % 70) * 10 + key % 7
                ));
            }
            s.land(&format!("{file:03}.json"), out.join("\n") + "\n");
        }
    };
    let opts = scd2_options(&[]);
    // Every column, by name (the batched table gains `tier` by evolution, at its end).
    let rows = |table: &Path| common::table_rows(table, &[]);
    let whole = Scratch::new();
    land(&whole, 0..70);
    ok(&ingest(&whole, &opts, &[]));

    let s = Scratch::new();
    let one_per_batch = ["cloudFiles.maxFilesPerTrigger=1"];
    land(&s, 0..40);
    ok(&ingest(&s, &opts, &one_per_batch));
    land(&s, 40..70);
    // The new column stops the stream once with the new schema recorded.
    let second = run(&ingest_args(&s, &opts, &one_per_batch), &[]);
    if !second.status.success() {
        ok(&ingest(&s, &opts, &one_per_batch));
    }
    let expected = rows(&whole.table());
    assert!(expected.0.contains(&"tier".to_string()), "{:?}", expected.0);
    assert!(expected.1.len() > 300, "{}", expected.1.len());
    assert_eq!(rows(&s.table()), expected, "70 batches = 1 batch");
    let records = s.table().join("_autoloader").join("cdc_records");
    let files = common::live_files(&records).len();
    assert!(
        (1..16).contains(&files),
        "the records table holds {files} files after 70 batches (each adds one)"
    );
}

#[test]
fn in_order_batches_rewrite_only_current_versions_and_late_ones_still_split_history() {
    // 40 in-order one-file batches of 12 keys (deletes among them), then one late file
    // whose records fall inside every key's history.
    let land = |s: &Scratch| {
        for round in 0..40u64 {
            let out: Vec<String> = (0..12u64)
                .map(|key| {
                    let op = if (key + round) % 7 == 0 { "DELETE" } else { "UPSERT" };
                    format!(
                        r#"{{"userId": {key}, "name": "n{}", "city": "c{}", "operation": "{op}", "sequenceNum": {}}}"#,
                        (key * round) % 5,
                        round % 2,
                        round * 10 + 10
                    )
                })
                .collect();
            s.land(&format!("{round:03}.json"), out.join("\n") + "\n");
        }
    };
    let late = |s: &Scratch| {
        let out: Vec<String> = (0..12u64)
            .map(|key| {
                format!(
                    r#"{{"userId": {key}, "name": "late", "city": "z", "operation": "UPSERT", "sequenceNum": {}}}"#,
                    155 + key * 10
                )
            })
            .collect();
        s.land("zz-late.json", out.join("\n") + "\n");
    };
    let opts = scd2_options(&[]);
    let whole = Scratch::new();
    land(&whole);
    late(&whole);
    ok(&ingest(&whole, &opts, &[]));
    let expected = versions(&whole.table());
    assert!(expected.len() > 300, "{}", expected.len());

    let s = Scratch::new();
    land(&s);
    let one_per_batch = ["cloudFiles.maxFilesPerTrigger=1"];
    ok(&ingest(&s, &opts, &one_per_batch));
    let infos = common::commit_infos(&s.table());
    let read: Vec<i64> = infos
        .iter()
        .filter_map(|i| i["cdc"]["filesRead"].as_i64())
        .collect();
    assert!(
        read.iter().skip(1).all(|&n| n <= 2),
        "an in-order batch reads only the file of current versions: {read:?}"
    );
    let merged: i64 = infos
        .iter()
        .filter_map(|i| i["cdc"]["filesMerged"].as_i64())
        .sum();
    assert!(
        merged >= 16,
        "the closed versions' files were merged: {merged}"
    );
    late(&s);
    ok(&ingest(&s, &opts, &one_per_batch));
    assert_eq!(versions(&s.table()), expected, "41 batches = 1 batch");
}

#[test]
fn batches_over_runs_go_on_from_current_versions_as_one_batch_folds_every_record() {
    // A batch whose records all follow its keys' applied ones starts from the key's current
    // version in the target; one batch of every record folds them all. Both must agree,
    // with nulls kept by ignore_null_updates, untracked columns (the sequence among them),
    // deletes, late files, and the kept sequences read again by each new run.
    let land = |s: &Scratch, landed: std::ops::Range<usize>| {
        // Landing order: rounds in order, but 17 (keys 0-3) comes after 24 and 33 (keys
        // 4-7) after 45: each key is late once, and its later batches go on from there.
        let mut order: Vec<u64> = Vec::new();
        for round in (0..60u64).filter(|r| ![17, 33].contains(r)) {
            order.push(round);
            match round {
                24 => order.push(17),
                45 => order.push(33),
                _ => {}
            }
        }
        for (pos, &round) in order.iter().enumerate().filter(|(p, _)| landed.contains(p)) {
            let keys = match round {
                17 => 0..4,
                33 => 4..8,
                _ => 0..8u64,
            };
            let out: Vec<String> = keys
                .map(|key| {
                    let op = if (key + round) % 11 == 0 { "DELETE" } else { "UPSERT" };
                    let name = if (key + round) % 5 == 0 {
                        "null".to_string()
                    } else {
                        format!(r#""n{}""#, (key * round / 3) % 3)
                    };
                    let city = if (key + round) % 4 == 0 {
                        "null".to_string()
                    } else {
                        format!(r#""c{}""#, round % 4)
                    };
                    format!(
                        r#"{{"userId": {key}, "name": {name}, "city": {city}, "operation": "{op}", "sequenceNum": {}}}"#,
                        round * 10 + key % 7
                    )
                })
                .collect();
            s.land(&format!("{pos:03}.json"), out.join("\n") + "\n");
        }
    };
    let option_sets: [Vec<String>; 2] = [
        scd2_options(&[
            "cdc.ignore_null_updates=true",
            "cdc.track_history_except_column_list=city",
        ]),
        {
            let mut o = scd2_options(&["cdc.track_history_column_list=name"]);
            o.retain(|o| !o.starts_with("cdc.except_column_list="));
            o.push("cdc.except_column_list=operation,_rescued_data".into());
            o
        },
    ];
    let rows = |table: &Path| common::table_rows(table, &[]);
    for opts in option_sets {
        let whole = Scratch::new();
        land(&whole, 0..60);
        ok(&ingest(&whole, &opts, &[]));
        let expected = rows(&whole.table());
        assert!(expected.1.len() > 100, "{opts:?}: {}", expected.1.len());

        let s = Scratch::new();
        // Three runs of one-file batches: each new run reads the applied sequences again.
        for landed in [0..25, 25..45, 45..60] {
            land(&s, landed);
            ok(&ingest(&s, &opts, &["cloudFiles.maxFilesPerTrigger=1"]));
        }
        assert_eq!(rows(&s.table()), expected, "{opts:?}: batches = 1 batch");
    }
}

#[test]
fn a_key_with_two_current_versions_stops_the_flow_naming_the_table() {
    // Another writer appends a second current version of key 1: the next batch of that
    // key cannot tell which one its history goes on from, so it stops, and the file stays
    // unconsumed, rather than writing a history from either.
    let s = Scratch::new();
    let opts = scd2_options(&[]);
    s.land("a.json", record(1, "A", "x", "UPSERT", 10) + "\n");
    ok(&ingest(&s, &opts, &[]));
    let script = "import os, sys\nimport pyarrow.compute as pc\n\
        from deltalake import DeltaTable, write_deltalake\n\
        t = DeltaTable(sys.argv[1]).to_pyarrow_table()\n\
        t = t.set_column(t.schema.get_field_index('__START_AT'), '__START_AT', \
        pc.add(t['__START_AT'], 1))\n\
        write_deltalake(sys.argv[1], t, mode='append')\nos._exit(0)\n";
    let out = std::process::Command::new("python3")
        .args(["-c", script, s.table().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(versions(&s.table()), ["1 A x 10-null", "1 A x 11-null"]);
    s.land("b.json", record(1, "B", "x", "UPSERT", 20) + "\n");
    for _ in 0..2 {
        let out = ingest(&s, &opts, &[]);
        assert!(!out.status.success(), "the batch must stop");
        let err = stderr(&out);
        assert!(err.contains("more than one current version"), "{err}");
        assert!(err.contains(s.table().to_str().unwrap()), "{err}");
    }
    assert_eq!(
        versions(&s.table()),
        ["1 A x 10-null", "1 A x 11-null"],
        "nothing written"
    );
}
