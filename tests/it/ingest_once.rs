//! `autoloader ingest --once`: the foundation's promises end to end.

use std::fs;
use std::path::Path;

use crate::common::{
    self, Scratch, column_strings, ok, read_table, row_count, stderr, summary_figure,
};

fn fixtures(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/orders")
        .join(name)
        .display()
        .to_string()
}

fn ingest_fixture(name: &str, table: &Path, options: &[&str]) -> std::process::Output {
    let mut args = vec![
        "ingest".to_string(),
        fixtures(name),
        table.display().to_string(),
        "--once".to_string(),
    ];
    for o in options {
        args.push("-o".into());
        args.push((*o).to_string());
    }
    common::run(&args, &[])
}

#[test]
fn readme_command_ingests_the_json_fixtures_and_python_reads_them() {
    let s = Scratch::new();
    let out = ok(&ingest_fixture("json", &s.table(), &[]));
    assert_eq!(summary_figure(&out, "files"), 3);
    assert_eq!(summary_figure(&out, "rows"), 15);
    // An outside reader sees the same rows and types.
    let py = common::read_with_python(&s.table(), "order_id");
    assert_eq!(py["num_rows"], 15);
    assert_eq!(
        py["types"]["order_id"], "string",
        "inferColumnTypes=false keeps JSON leaves STRING"
    );
    assert_eq!(py["types"]["address"], "struct<city: string, zip: string>");
    assert_eq!(py["types"]["_rescued_data"], "string");
    assert!(
        py["types"]["_metadata"]
            .as_str()
            .unwrap()
            .starts_with("struct<file_path: string")
    );
    let ids: Vec<String> = py["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["order_id"].as_str().unwrap().to_string())
        .collect();
    let mut expected: Vec<String> = (1..=15).map(|i| i.to_string()).collect();
    expected.sort();
    assert_eq!(ids, expected);
    let gz_row = py["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["order_id"] == "11")
        .unwrap();
    assert_eq!(
        gz_row["_metadata"]["file_name"], "orders-2026-03-15.json.gz",
        "gzip input is read"
    );
    assert_eq!(
        gz_row["address"]["zip"], "01441",
        "leading zeros survive as STRING"
    );

    // A second run adds nothing.
    let again = ok(&ingest_fixture("json", &s.table(), &[]));
    assert_eq!(summary_figure(&again, "files"), 0);
    assert_eq!(row_count(&read_table(&s.table())), 15);
}

#[test]
fn typed_inference_hints_and_schema_versions() {
    let s = Scratch::new();
    ok(&ingest_fixture(
        "json",
        &s.table(),
        &[
            "cloudFiles.inferColumnTypes=true",
            "cloudFiles.schemaHints=amount DECIMAL(12,2), phone STRING",
        ],
    ));
    let schema0 = fs::read_to_string(s.table().join("_autoloader/_schemas/0")).unwrap();
    let mut lines = schema0.lines();
    assert_eq!(lines.next(), Some("v1"));
    let entry: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    let data: serde_json::Value =
        serde_json::from_str(entry["dataSchemaJson"].as_str().unwrap()).unwrap();
    let types: Vec<(String, serde_json::Value)> = data["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap().to_string(), f["type"].clone()))
        .collect();
    assert_eq!(types[0], ("order_id".into(), "long".into()));
    assert_eq!(types[2], ("amount".into(), "decimal(12,2)".into()));
    assert_eq!(types[3], ("order_date".into(), "timestamp".into()));
    assert_eq!(types.last().unwrap().0, "_rescued_data");
    assert_eq!(
        entry["partitionSchemaJson"],
        r#"{"type":"struct","fields":[]}"#
    );
    assert_eq!(entry["sampledFiles"], 3);

    let py = common::read_with_python(&s.table(), "order_id");
    assert_eq!(py["types"]["order_id"], "int64");
    assert_eq!(py["types"]["amount"], "decimal128(12, 2)");
    assert_eq!(py["types"]["order_date"], "timestamp[us, tz=UTC]");
    assert_eq!(
        py["types"]["items"],
        "list<element: struct<product_id: string, qty: int64, price: double>>"
    );
    assert_eq!(py["types"]["phone"], "string");
    assert!(
        !s.table().join("_autoloader/_schemas/1").exists(),
        "a rerun does not re-infer"
    );
}

#[test]
fn csv_and_parquet_fixtures_ingest_with_their_types() {
    let s = Scratch::new();
    let out = ok(&ingest_fixture(
        "csv",
        &s.table(),
        &[
            "cloudFiles.inferColumnTypes=true",
            "cloudFiles.schemaHints=zip STRING, phone STRING",
        ],
    ));
    assert_eq!(summary_figure(&out, "rows"), 10);
    let py = common::read_with_python(&s.table(), "order_id");
    assert_eq!(
        py["types"]["order_id"], "int32",
        "CSV integers infer as INT when they fit"
    );
    assert_eq!(py["types"]["zip"], "string");
    let first = &py["rows"][0];
    assert_eq!(first["zip"], "00131");
    assert_eq!(first["phone"], "01000007919");

    let p = Scratch::new();
    let out = ok(&ingest_fixture("parquet", &p.table(), &[]));
    assert_eq!(summary_figure(&out, "rows"), 10);
    let py = common::read_with_python(&p.table(), "order_id");
    assert_eq!(
        py["types"]["order_id"], "int64",
        "INT and BIGINT files merge to the wider type"
    );
    assert_eq!(py["types"]["order_date"], "timestamp[us, tz=UTC]");
}

#[test]
fn new_files_between_runs_are_ingested_once_each() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 10));
    let out = ok(&s.ingest(&[]));
    assert_eq!(summary_figure(&out, "rows"), 10);
    s.land("b.json", common::orders_jsonl(10, 25));
    s.land("sub/c.json", common::orders_jsonl(25, 30));
    let out = ok(&s.ingest(&[]));
    assert_eq!(summary_figure(&out, "files"), 2);
    assert_eq!(summary_figure(&out, "rows"), 20);
    ok(&s.ingest(&[]));
    let batches = read_table(&s.table());
    let mut ids: Vec<u64> = column_strings(&batches, "order_id")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..30).collect::<Vec<_>>());
    let (_, txns) = common::table_version_and_txns(&s.table());
    assert_eq!(txns.len(), 1, "one app id for the stream");
    assert_eq!(
        *txns.values().next().unwrap(),
        1,
        "two batches: txn versions 0 and 1"
    );
}

#[test]
fn batches_follow_max_files_per_trigger_and_each_commit_names_its_files() {
    let s = Scratch::new();
    for i in 0..5 {
        s.land(
            &format!("f{i}.json"),
            common::orders_jsonl(i * 10, i * 10 + 10),
        );
    }
    let out = ok(&s.ingest(&["cloudFiles.maxFilesPerTrigger=2"]));
    assert_eq!(summary_figure(&out, "batches"), 3);
    let (version, txns) = common::table_version_and_txns(&s.table());
    assert_eq!(version, 3, "create + 3 appends");
    assert_eq!(*txns.values().next().unwrap(), 2);
    let commit =
        fs::read_to_string(s.table().join("_delta_log/00000000000000000003.json")).unwrap();
    assert!(commit.contains("\"path\":\"f4.json\""), "{commit}");
}

#[test]
fn filters_hidden_names_globs_and_partitions() {
    let s = Scratch::new();
    s.land(
        "date=2026-03-15/region=kr/a.json",
        common::orders_jsonl(0, 2),
    );
    s.land(
        "date=2026-03-16/region=us/b.json",
        common::orders_jsonl(2, 4),
    );
    s.land("date=2026-03-16/region=us/notes.txt", "not data");
    s.land("date=2026-03-16/region=us/_SUCCESS", "");
    s.land(
        "date=2026-03-16/region=us/.c.json",
        common::orders_jsonl(100, 101),
    );
    s.land("_tmp/d.json", common::orders_jsonl(200, 201));
    let out = ok(&s.ingest(&["pathGlobFilter=*.{json,jsonl}"]));
    assert_eq!(summary_figure(&out, "rows"), 4);
    let batches = read_table(&s.table());
    let mut pairs: Vec<(String, String, String)> = column_strings(&batches, "order_id")
        .into_iter()
        .zip(column_strings(&batches, "date"))
        .zip(column_strings(&batches, "region"))
        .map(|((a, b), c)| (a, b, c))
        .collect();
    pairs.sort();
    assert_eq!(pairs[0], ("0".into(), "2026-03-15".into(), "kr".into()));
    assert_eq!(pairs[3], ("3".into(), "2026-03-16".into(), "us".into()));
}

#[test]
fn modified_after_skips_older_files() {
    let s = Scratch::new();
    let old = s.land("old.json", common::orders_jsonl(0, 1));
    s.land("new.json", common::orders_jsonl(1, 2));
    let past = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
    fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(past)
        .unwrap();
    let out = ok(&s.ingest(&["modifiedAfter=2021-01-01 00:00:00.000000 UTC+0"]));
    assert_eq!(summary_figure(&out, "rows"), 1);
    assert_eq!(
        column_strings(&read_table(&s.table()), "order_id"),
        vec!["1"]
    );
}

#[test]
fn include_existing_files_false_takes_only_later_files() {
    let s = Scratch::new();
    s.land("before.json", common::orders_jsonl(0, 3));
    let out = ok(&s.ingest(&[
        "cloudFiles.includeExistingFiles=false",
        "cloudFiles.format=json",
    ]));
    assert_eq!(summary_figure(&out, "rows"), 0);
    s.land("after.json", common::orders_jsonl(3, 5));
    let out = ok(&s.ingest(&[
        "cloudFiles.includeExistingFiles=false",
        "cloudFiles.format=json",
    ]));
    assert_eq!(summary_figure(&out, "rows"), 2);
}

#[test]
fn multiline_json_arrays_are_one_row_per_element() {
    let s = Scratch::new();
    s.land(
        "doc.json",
        "[\n  {\"id\": 1, \"tags\": [\"a\"]},\n  {\"id\": 2}\n]\n",
    );
    s.land("single.json", "{\n \"id\": 3\n}\n");
    let out = ok(&s.ingest(&["multiLine=true", "cloudFiles.inferColumnTypes=true"]));
    assert_eq!(summary_figure(&out, "rows"), 3);
    let mut ids = column_strings(&read_table(&s.table()), "id");
    ids.sort();
    assert_eq!(ids, vec!["1", "2", "3"]);
}

#[test]
fn type_mismatches_land_in_rescued_data_with_the_file() {
    let s = Scratch::new();
    s.land("1.json", "{\"order_id\": 1, \"amount\": 5000}\n");
    ok(&s.ingest(&["cloudFiles.inferColumnTypes=true"]));
    s.land(
        "2.json",
        "{\"order_id\": 2, \"amount\": \"5000원 - 750원 할인\"}\n",
    );
    let out = ok(&s.ingest(&["cloudFiles.inferColumnTypes=true"]));
    assert_eq!(summary_figure(&out, "rescued rows"), 1);
    let batches = read_table(&s.table());
    let rescued: Vec<String> = column_strings(&batches, "_rescued_data")
        .into_iter()
        .filter(|v| v != "null")
        .collect();
    assert_eq!(rescued.len(), 1);
    let r: serde_json::Value = serde_json::from_str(&rescued[0]).unwrap();
    assert_eq!(r["amount"], "5000원 - 750원 할인");
    assert!(
        r["_file_path"]
            .as_str()
            .unwrap()
            .ends_with("/landing/2.json"),
        "{r}"
    );
}

#[test]
fn options_are_validated_with_suggestions() {
    let s = Scratch::new();
    s.land("a.json", "{}\n");
    let out = s.ingest(&["cloudFiles.inferColumTypes=true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out).contains("unknown option \"cloudFiles.inferColumTypes\"; did you mean \"cloudFiles.inferColumnTypes\"?"),
        "{}",
        common::stderr(&out)
    );
    let out = s.ingest(&["cloudFiles.maxFilesPerTrigger=many"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out).contains("cloudFiles.maxFilesPerTrigger"),
        "{}",
        common::stderr(&out)
    );
    assert!(
        !s.table().join("_delta_log").exists(),
        "nothing is written on bad options"
    );
}

#[test]
fn time_zone_option_reads_zone_less_timestamps_in_that_zone() {
    let s = Scratch::new();
    s.land(
        "a.csv",
        "id,at\n1,2026-03-15 09:00:00\n2,2026-03-15T09:00:00Z\n",
    );
    ok(&s.ingest(&["cloudFiles.inferColumnTypes=true", "timeZone=Asia/Seoul"]));
    let t = read_table(&s.table());
    let ats = column_strings(&t, "at");
    assert_eq!(ats, vec!["2026-03-15T00:00:00Z", "2026-03-15T09:00:00Z"]);
}

#[test]
fn max_bytes_per_trigger_is_a_soft_limit() {
    let s = Scratch::new();
    for i in 0..3 {
        s.land(
            &format!("f{i}.json"),
            common::orders_jsonl(i * 10, i * 10 + 10),
        );
    }
    let out = ok(&s.ingest(&["cloudFiles.maxBytesPerTrigger=1"]));
    assert_eq!(
        summary_figure(&out, "batches"),
        3,
        "each batch takes at least one file"
    );
}

/// JSON lines of orders `from..to`, padded to about 270 bytes each; from `coupon_from` on,
/// every other order has a `coupon` field.
fn padded_orders(from: u64, to: u64, coupon_from: u64) -> String {
    let pad = "x".repeat(200);
    (from..to)
        .map(|i| {
            let coupon = if i >= coupon_from && i % 2 == 0 {
                format!(", \"coupon\": \"C{i}\"")
            } else {
                String::new()
            };
            format!(
                "{{\"order_id\": {i}, \"amount\": {}.25, \"user_id\": \"u{i}\", \"pad\": \"{pad}\"{coupon}}}\n",
                1000 + i
            )
        })
        .collect()
}

#[test]
fn a_large_batch_is_encoded_on_every_core_and_lands_in_one_commit() {
    let s = Scratch::new();
    s.land("a-small.json", padded_orders(0, 100, u64::MAX));
    ok(&s.ingest(&[]));
    // Four files of about 20 MB (over the 64 MiB from which each decoding thread encodes
    // its own files); the last two bring a new column, so the batch also evolves.
    let per_file = 75_000;
    for f in 0..4u64 {
        let from = 100 + f * per_file;
        s.land(
            &format!("b-{f}.json"),
            padded_orders(from, from + per_file, 100 + 2 * per_file),
        );
    }
    let out = s.ingest(&[]);
    if !out.status.success() {
        // A stream may stop at a schema change; the rerun takes the batch.
        ok(&s.ingest(&[]));
    }
    let total = 100 + 4 * per_file;
    s.assert_ids_once(0..total, "large batch");
    let (version, _) = common::table_version_and_txns(&s.table());
    let commit =
        fs::read_to_string(s.table().join(format!("_delta_log/{version:020}.json"))).unwrap();
    let adds = commit.lines().filter(|l| l.starts_with("{\"add\"")).count();
    assert!(
        adds >= 2,
        "each decoding thread wrote its own files into the one commit: {adds} adds"
    );
    assert!(
        commit.lines().any(|l| l.starts_with("{\"metaData\"")),
        "the widened schema is committed with the data"
    );
    let batches = read_table(&s.table());
    let coupons = column_strings(&batches, "coupon");
    let expected = (100 + 2 * per_file..total).filter(|i| i % 2 == 0).count();
    assert_eq!(
        coupons.iter().filter(|c| *c != "null").count(),
        expected,
        "every coupon landed in its column"
    );
}

/// Lands four files of about 20 MB, oldest first; with `oldest_differs`, only the oldest
/// has cents and `late`. Returns the number of orders.
fn land_sample(s: &Scratch, oldest_differs: bool) -> u64 {
    let per_file = 80_000;
    for f in 0..4u64 {
        let from = f * per_file;
        let path = s.land(
            &format!("part-{f}.json"),
            common::sample_orders_jsonl(from, from + per_file, oldest_differs && f == 0),
        );
        // Distinct modification times: the sample is taken newest first.
        common::files::set_mtime_in_order(&path, f);
    }
    4 * per_file
}

/// Asserts that a first run whose oldest file disagreed with the provisional schema read
/// its batch again and landed it with the whole sample's schema: `amount` DOUBLE, the
/// oldest file's `late` column filled, nothing rescued, only `_schemas/0` written.
fn assert_read_again_with_the_whole_sample(s: &Scratch, log: &str, orders: u64, late: usize) {
    // The provisional schema comes from the newest files (integer amounts, no `late`).
    assert!(log.contains("provisional schema"), "{log}");
    assert!(log.contains("reading the batch again"), "{log}");
    s.assert_ids_once(0..orders, "first run read again");
    let batches = read_table(&s.table());
    assert_eq!(
        batches[0]
            .schema()
            .field_with_name("amount")
            .unwrap()
            .data_type(),
        &arrow_schema::DataType::Float64,
        "the whole sample's type"
    );
    let filled = column_strings(&batches, "late");
    assert_eq!(filled.iter().filter(|v| *v != "null").count(), late);
    assert!(
        column_strings(&batches, "_rescued_data")
            .iter()
            .all(|v| v == "null"),
        "nothing was rescued against a schema that fits"
    );
    let schemas = fs::read_dir(s.table().join("_autoloader/_schemas"))
        .unwrap()
        .count();
    assert_eq!(schemas, 1, "the provisional schema is never written");
}

/// Runs a successful ingest with info logs; returns stdout and the log.
fn ingest_logged(s: &Scratch, options: &[&str]) -> (String, String) {
    let out = s.ingest_with_env(options, &[("RUST_LOG", "info")]);
    (ok(&out), stderr(&out))
}

#[test]
fn a_first_run_infers_while_reading_and_reads_again_when_the_sample_disagrees() {
    let s = Scratch::new();
    let total = land_sample(&s, true);
    let (_, log) = ingest_logged(&s, &["cloudFiles.inferColumnTypes=true"]);
    assert_read_again_with_the_whole_sample(&s, &log, total, 80_000);
}

#[test]
fn a_first_run_that_agrees_with_its_provisional_schema_reads_once() {
    let s = Scratch::new();
    let total = land_sample(&s, false);
    let (_, log) = ingest_logged(&s, &["cloudFiles.inferColumnTypes=true"]);
    assert!(log.contains("read_by_the_batch=4"), "{log}");
    assert!(!log.contains("reading the batch again"), "{log}");
    s.assert_ids_once(0..total, "one-pass first run");
    let stored = fs::read_to_string(s.table().join("_autoloader/_schemas/0")).unwrap();
    assert!(stored.contains("\"sampledRecords\":320000"), "{stored}");
}

/// Runs the first load of [`land_sample`]'s files one file a batch (4 batches) and
/// returns its log; the schema version it wrote counts every sampled record.
fn ingest_one_file_a_batch(s: &Scratch) -> String {
    let (stdout, log) = ingest_logged(
        s,
        &[
            "cloudFiles.inferColumnTypes=true",
            "cloudFiles.maxFilesPerTrigger=1",
        ],
    );
    assert_eq!(summary_figure(&stdout, "batches"), 4);
    let stored = fs::read_to_string(s.table().join("_autoloader/_schemas/0")).unwrap();
    assert!(stored.contains("\"sampledRecords\":320000"), "{stored}");
    log
}

#[test]
fn a_first_batch_holding_little_of_the_sample_is_read_while_the_rest_is_inferred() {
    let s = Scratch::new();
    let total = land_sample(&s, true);
    let log = ingest_one_file_a_batch(&s);
    // The first batch is the oldest file (outside the provisional schema's 2 newest, 32
    // MiB), read while the one file left is inferred beside it. Its read stops at its
    // new column `late`, so it is not observed whole: that one file is inferred after.
    assert!(
        log.contains("read_by_the_batch=0 inferred_beside=1 inferred_now=1"),
        "{log}"
    );
    // Its cents and `late` make the whole sample's schema differ: read again with it.
    assert_read_again_with_the_whole_sample(&s, &log, total, 80_000);
}

#[test]
fn a_first_batch_holding_little_of_an_agreeing_sample_is_read_once() {
    let s = Scratch::new();
    let total = land_sample(&s, false);
    let log = ingest_one_file_a_batch(&s);
    assert!(
        log.contains("read_by_the_batch=1 inferred_beside=1 inferred_now=0"),
        "{log}"
    );
    assert!(!log.contains("reading the batch again"), "{log}");
    s.assert_ids_once(0..total, "first batch read beside the inference");
}

/// A CDC first load of one file a batch over a sample large enough for one-pass
/// inference: its first batch is read while the sample's other files are inferred, the
/// schema settled after the read, the state known empty. Killed at every step of that
/// first batch, then run again, every key lands once with its row.
#[test]
fn a_cdc_first_load_read_beside_its_inference_killed_at_every_step_lands_each_key_once() {
    let options = [
        "cloudFiles.inferColumnTypes=true",
        "cloudFiles.maxFilesPerTrigger=1",
        "cdc.keys=order_id",
        "cdc.sequence_by=order_id",
    ];
    for name in common::crash::cdc_failpoints() {
        let s = Scratch::new();
        let total = land_sample(&s, false);
        common::crash::kill_at_then_rerun(&common::args::ingest_args(&s, &options), name, 1);
        s.assert_ids_once(0..total, name);
        let batches = read_table(&s.table());
        let amounts = column_strings(&batches, "amount");
        let ids = column_strings(&batches, "order_id");
        assert!(
            ids.iter().zip(&amounts).all(|(i, a)| i == a),
            "{name}: each key's own row"
        );
    }
}

#[test]
fn large_records_take_turns_and_land_with_their_neighbours() {
    // Records over 8 MiB are read, decoded and written one at a time in the process; the
    // small records around them still land, each once. JSON lines and CSV alike.
    let big = "z".repeat(9 << 20);
    for format in ["json", "csv"] {
        let s = Scratch::new();
        for f in 0..3u64 {
            let mut text = String::from(if format == "csv" {
                "order_id,blob\n"
            } else {
                ""
            });
            for i in 0..5u64 {
                let id = f * 10 + i;
                let blob = if i == 2 { big.as_str() } else { "small" };
                text.push_str(&if format == "csv" {
                    format!("{id},{blob}\n")
                } else {
                    format!("{{\"order_id\": {id}, \"blob\": \"{blob}\"}}\n")
                });
            }
            s.land(&format!("f{f}.{format}"), text);
        }
        ok(&s.ingest(&[&format!("cloudFiles.format={format}")]));
        let mut expected: Vec<u64> = (0..3)
            .flat_map(|f| (0..5).map(move |i| f * 10 + i))
            .collect();
        expected.sort_unstable();
        s.assert_ids_once(expected, format);
        let batches = read_table(&s.table());
        let blobs = column_strings(&batches, "blob");
        assert_eq!(
            blobs.iter().filter(|b| b.len() == 9 << 20).count(),
            3,
            "{format}"
        );
        assert_eq!(
            blobs.iter().filter(|b| *b == "small").count(),
            12,
            "{format}"
        );
    }
}

#[test]
fn a_large_first_csv_run_infers_while_reading_and_reads_again_when_the_sample_disagrees() {
    let s = Scratch::new();
    let pad = "p".repeat(200);
    let per_file = 80_000u64;
    for f in 0..4u64 {
        // The oldest file has cents and one more column; the sample is taken newest first.
        let older = f == 0;
        let mut text = String::from(if older {
            "order_id,amount,pad,late\n"
        } else {
            "order_id,amount,pad\n"
        });
        for i in f * per_file..(f + 1) * per_file {
            if older {
                text.push_str(&format!("{i},{i}.5,{pad},L{i}\n"));
            } else {
                text.push_str(&format!("{i},{i},{pad}\n"));
            }
        }
        let path = s.land(&format!("part-{f}.csv"), text);
        common::files::set_mtime_in_order(&path, f);
    }
    let (_, log) = ingest_logged(
        &s,
        &["cloudFiles.format=csv", "cloudFiles.inferColumnTypes=true"],
    );
    assert_read_again_with_the_whole_sample(&s, &log, 4 * per_file, per_file as usize);
}

/// `--dry-run` lists what a run would ingest, why other files are not taken, and the schema
/// it would read with; it writes nothing (no table, checkpoint or schema version).
#[test]
fn dry_run_lists_files_reasons_and_schema_and_writes_nothing() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(1, 3));
    s.land("b.json", common::orders_jsonl(3, 5));
    s.land("c.csv", "order_id\n9\n");
    let glob = "pathGlobFilter=*.json";
    let dry = |extra: &[&str]| {
        let mut args: Vec<String> = vec![
            "ingest".into(),
            s.landing().display().to_string(),
            s.table().display().to_string(),
            "--dry-run".into(),
            "-o".into(),
            glob.into(),
            "-o".into(),
            "cloudFiles.inferColumnTypes=true".into(),
        ];
        args.extend(extra.iter().map(|e| (*e).to_string()));
        common::run(&args, &[])
    };
    let text = ok(&dry(&[]));
    assert!(text.contains("Would ingest 2 files"), "{text}");
    assert!(text.contains("a.json") && text.contains("b.json"), "{text}");
    assert!(text.contains("c.csv: left out by pathGlobFilter"), "{text}");
    assert!(text.contains("inferred from 2 files"), "{text}");
    assert!(text.contains("order_id BIGINT"), "{text}");
    assert!(!s.table().exists(), "nothing written: {text}");

    ok(&s.ingest(&[glob, "cloudFiles.inferColumnTypes=true"]));
    let (version, _) = common::table_version_and_txns(&s.table());
    s.land("d.json", common::orders_jsonl(5, 6));
    let plan: serde_json::Value = serde_json::from_str(ok(&dry(&["--json"])).trim()).unwrap();
    let ingest: Vec<&str> = plan["ingest"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    assert_eq!(ingest.len(), 1, "{plan}");
    assert!(ingest[0].ends_with("/d.json"), "{plan}");
    let already = plan["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["reason"] == "already ingested")
        .count();
    assert_eq!(already, 2, "{plan}");
    assert!(
        plan["schema"]["origin"]
            .as_str()
            .unwrap()
            .starts_with("stored"),
        "{plan}"
    );
    assert_eq!(
        common::table_version_and_txns(&s.table()).0,
        version,
        "no commit"
    );
    assert!(
        !s.table().join("_autoloader/_schemas/1").exists(),
        "no schema version"
    );
    s.assert_ids_once(1..5, "d.json not ingested by the dry run");
}

/// `--once` leaves a file its writer still holds open for the next run, says so in the
/// summary and the dry run, and `status` counts it pending; once closed, the next run takes
/// it whole (issue 36.2: it used to land the rows written so far, and never the rest).
#[test]
fn a_file_still_being_written_is_left_for_the_next_run() {
    use std::io::Write;
    let s = Scratch::new();
    s.land("done.json", common::orders_jsonl(0, 10));
    let path = s.landing().join("growing.json");
    let mut writer = std::fs::File::create(&path).unwrap();
    writer
        .write_all(common::orders_jsonl(10, 13).as_bytes())
        .unwrap();
    writer.flush().unwrap();
    let out = common::ok(&s.ingest(&[]));
    assert!(
        out.contains("ingested 1 file") && out.contains("1 file still being written"),
        "{out}"
    );
    s.assert_ids_once(0..10, "only the finished file");
    let dry: Vec<String> = vec![
        "ingest".into(),
        s.landing().display().to_string(),
        s.table().display().to_string(),
        "--dry-run".into(),
    ];
    let planned = common::ok(&common::run(&dry, &[]));
    assert!(
        planned.contains("growing.json: still being written"),
        "{planned}"
    );
    let status = common::run(
        &[
            "status".into(),
            s.table().display().to_string(),
            "--json".into(),
        ],
        &[],
    );
    let st: serde_json::Value = serde_json::from_str(common::ok(&status).trim()).unwrap();
    assert_eq!(st["filesPending"], 1, "{st}");
    writer
        .write_all(common::orders_jsonl(13, 14).as_bytes())
        .unwrap();
    drop(writer);
    let out = common::ok(&s.ingest(&[]));
    assert!(out.contains("ingested 1 file"), "{out}");
    s.assert_ids_once(0..14, "the whole file, once");
}

/// The text of a field of a struct column (`_metadata.file_path`), row by row.
fn struct_field_strings(
    batches: &[arrow_array::RecordBatch],
    column: &str,
    field: &str,
) -> Vec<String> {
    use arrow_array::Array;
    let mut out = Vec::new();
    for b in batches {
        let s = b
            .column_by_name(column)
            .and_then(|c| c.as_any().downcast_ref::<arrow_array::StructArray>())
            .unwrap_or_else(|| panic!("no struct column {column}"));
        let child = s
            .column_by_name(field)
            .and_then(|c| c.as_any().downcast_ref::<arrow_array::StringArray>())
            .unwrap_or_else(|| panic!("no text field {column}.{field}"));
        out.extend((0..child.len()).map(|i| child.value(i).to_string()));
    }
    out
}

/// A decoding thread carries small files' rows in one builder from file to file: every
/// row must still name its own file (`_metadata`, the rescued data's `_file_path`) and
/// carry its own partition values, and per-file counts must add up.
#[test]
fn rows_of_many_small_files_in_one_batch_keep_their_own_file() {
    let s = Scratch::new();
    let mut expected: Vec<(String, String, String)> = Vec::new();
    let mut rescued_rows = 0;
    for f in 0..240u64 {
        let region = if f % 3 == 0 { "kr" } else { "us" };
        let name = format!("region={region}/part-{f:04}.json");
        let mut text = String::new();
        // 1 to 3 orders a file; every 7th file has an amount that is not a number.
        for r in 0..(f % 3 + 1) {
            let id = f * 10 + r;
            if f % 7 == 0 && r == 0 {
                text.push_str(&format!("{{\"order_id\": {id}, \"amount\": \"n/a\"}}\n"));
                rescued_rows += 1;
            } else {
                text.push_str(&format!("{{\"order_id\": {id}, \"amount\": {id}.5}}\n"));
            }
            expected.push((id.to_string(), name.clone(), region.to_string()));
        }
        s.land(&name, text);
    }
    let out = ok(&s.ingest(&["cloudFiles.schemaHints=order_id BIGINT, amount DOUBLE"]));
    assert_eq!(summary_figure(&out, "files"), 240);
    assert_eq!(summary_figure(&out, "rows"), expected.len() as u64);
    assert_eq!(summary_figure(&out, "rescued rows"), rescued_rows);
    let batches = read_table(&s.table());
    let paths = struct_field_strings(&batches, "_metadata", "file_path");
    let names = struct_field_strings(&batches, "_metadata", "file_name");
    let mut got: Vec<(String, String, String)> = column_strings(&batches, "order_id")
        .into_iter()
        .zip(&paths)
        .zip(column_strings(&batches, "region"))
        .map(|((id, path), region)| {
            let rel = path.split("/landing/").nth(1).unwrap_or(path).to_string();
            (id, rel, region)
        })
        .collect();
    got.sort();
    expected.sort();
    assert_eq!(got, expected, "each row names its own file and partition");
    for (path, name) in paths.iter().zip(&names) {
        assert!(path.ends_with(&format!("/{name}")), "{path} vs {name}");
    }
    let rescued = column_strings(&batches, "_rescued_data");
    let mut seen = 0;
    for (r, path) in rescued.iter().zip(&paths) {
        if r == "null" {
            continue;
        }
        seen += 1;
        let r: serde_json::Value = serde_json::from_str(r).unwrap();
        assert_eq!(r["amount"], "n/a");
        assert_eq!(
            r["_file_path"].as_str(),
            Some(path.as_str()),
            "rescued in its own file"
        );
    }
    assert_eq!(seen, rescued_rows);
}

/// CSV files of one batch whose headers list the columns in different orders: rows
/// carried from file to file still take each file's own header.
#[test]
fn csv_files_with_their_own_column_orders_in_one_batch() {
    let s = Scratch::new();
    for f in 0..60u64 {
        let text = if f % 2 == 0 {
            format!("id,name\n{f},n{f}\n")
        } else {
            format!("name,id\nn{f},{f}\n")
        };
        s.land(&format!("f{f:03}.csv"), text);
    }
    ok(&s.ingest(&["cloudFiles.format=csv", "header=true"]));
    let batches = read_table(&s.table());
    let pairs: Vec<(String, String)> = column_strings(&batches, "id")
        .into_iter()
        .zip(column_strings(&batches, "name"))
        .collect();
    assert_eq!(pairs.len(), 60);
    for (id, name) in pairs {
        assert_eq!(name, format!("n{id}"));
    }
}
