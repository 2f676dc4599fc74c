//! Schema hints, the four evolution modes against every kind of change, and rescued data.

use std::fs;
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};

use crate::common::{self, Scratch, column_strings, ok, read_table, summary_figure};

/// The value of `column` in the row whose `order_id` (or `Order_ID`-rescued row) is `id`.
fn cell(batches: &[RecordBatch], key: &str, id: &str, column: &str) -> Option<String> {
    let keys = column_strings(batches, key);
    let values = column_strings(batches, column);
    keys.iter().position(|k| k == id).map(|i| values[i].clone())
}

fn has_column(batches: &[RecordBatch], name: &str) -> bool {
    batches
        .first()
        .is_some_and(|b| b.schema().column_with_name(name).is_some())
}

fn rescued_of(batches: &[RecordBatch], row: usize) -> Option<serde_json::Value> {
    let v = column_strings(batches, "_rescued_data").get(row)?.clone();
    (v != "null").then(|| serde_json::from_str(&v).unwrap())
}

fn schema_versions(s: &Scratch) -> usize {
    fs::read_dir(s.table().join("_autoloader/_schemas"))
        .unwrap()
        .count()
}

fn run_pair(
    format: &str,
    base: (&str, &str),
    change: (&str, &str),
    mode: &str,
) -> (Scratch, std::process::Output) {
    let s = Scratch::new();
    let opts = [
        "cloudFiles.inferColumnTypes=true".to_string(),
        format!("cloudFiles.schemaEvolutionMode={mode}"),
        format!("cloudFiles.format={format}"),
    ];
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    s.land(base.0, base.1);
    ok(&s.ingest(&opts));
    s.land(change.0, change.1);
    let out = s.ingest(&opts);
    (s, out)
}

/// JSON under `mode` against every kind of change (one test per mode below, so one mode's
/// failure does not hide another's).
fn json_mode_against_every_change(mode: &str) {
    let base = (
        "1.json",
        "{\"order_id\": 1, \"amount\": 5000, \"address\": {\"city\": \"Seoul\"}}\n",
    );
    let ctx = |change: &str| format!("json {change} under {mode}");

    // New top-level column.
    let (s, out) = run_pair(
        "json",
        base,
        (
            "2.json",
            "{\"order_id\": 2, \"amount\": 10, \"address\": {\"city\": \"Busan\"}, \"coupon_code\": \"SUMMER25\"}\n",
        ),
        mode,
    );
    let c = ctx("new column");
    if mode == "failOnNewColumns" {
        assert_eq!(out.status.code(), Some(1), "{c}");
        let err = common::stderr(&out);
        assert!(
            err.contains("coupon_code STRING") && err.contains("2.json"),
            "{c}: {err}"
        );
        assert_eq!(
            common::row_count(&read_table(&s.table())),
            1,
            "{c}: nothing of the batch committed"
        );
        assert_eq!(schema_versions(&s), 1, "{c}: no new version");
        let again = s.ingest(&[
            "cloudFiles.inferColumnTypes=true",
            "cloudFiles.schemaEvolutionMode=failOnNewColumns",
            "cloudFiles.format=json",
        ]);
        assert_eq!(again.status.code(), Some(1), "{c}: keeps failing");
        // Declaring the column with a hint lets the stream go on.
        ok(&s.ingest(&[
            "cloudFiles.inferColumnTypes=true",
            "cloudFiles.schemaEvolutionMode=failOnNewColumns",
            "cloudFiles.format=json",
            "cloudFiles.schemaHints=coupon_code STRING",
        ]));
        let t = read_table(&s.table());
        assert_eq!(
            cell(&t, "order_id", "2", "coupon_code").as_deref(),
            Some("SUMMER25"),
            "{c}"
        );
    } else {
        ok(&out);
        let t = read_table(&s.table());
        assert_eq!(common::row_count(&t), 2, "{c}");
        match mode {
            "addNewColumns" => {
                assert_eq!(
                    cell(&t, "order_id", "2", "coupon_code").as_deref(),
                    Some("SUMMER25"),
                    "{c}"
                );
                assert_eq!(
                    cell(&t, "order_id", "1", "coupon_code").as_deref(),
                    Some("null"),
                    "{c}: older rows read null"
                );
                assert_eq!(
                    cell(&t, "order_id", "2", "_rescued_data").as_deref(),
                    Some("null"),
                    "{c}"
                );
                assert_eq!(schema_versions(&s), 2, "{c}");
                let v1 = fs::read_to_string(s.table().join("_autoloader/_schemas/1")).unwrap();
                assert!(v1.contains("\\\"name\\\":\\\"coupon_code\\\""), "{c}: {v1}");
                assert!(v1.contains("\"reason\":\"evolved\""), "{c}: {v1}");
                assert!(
                    common::stdout_of(&out).contains("evolved: version 1: +coupon_code STRING"),
                    "{c}"
                );
            }
            "rescue" => {
                assert!(!has_column(&t, "coupon_code"), "{c}");
                let r = cell(&t, "order_id", "2", "_rescued_data").unwrap();
                assert!(
                    r.starts_with("{\"coupon_code\":\"SUMMER25\",\"_file_path\":\"file://"),
                    "{c}: {r}"
                );
                assert_eq!(schema_versions(&s), 1, "{c}");
            }
            _ => {
                assert!(
                    !has_column(&t, "coupon_code") && !has_column(&t, "_rescued_data"),
                    "{c}: none ignores new columns"
                );
                assert_eq!(schema_versions(&s), 1, "{c}");
            }
        }
    }

    // New field inside a struct.
    let (s, out) = run_pair(
        "json",
        base,
        (
            "2.json",
            "{\"order_id\": 2, \"amount\": 10, \"address\": {\"city\": \"Busan\", \"floor\": 3}}\n",
        ),
        mode,
    );
    let c = ctx("new nested field");
    if mode == "failOnNewColumns" {
        assert_eq!(out.status.code(), Some(1), "{c}");
        assert!(
            common::stderr(&out).contains("address.floor BIGINT"),
            "{c}: {}",
            common::stderr(&out)
        );
    } else {
        ok(&out);
        let t = read_table(&s.table());
        let address = cell(&t, "order_id", "2", "address").unwrap();
        match mode {
            "addNewColumns" => {
                assert_eq!(address, "{city: Busan, floor: 3}", "{c}");
                assert_eq!(
                    cell(&t, "order_id", "1", "address").unwrap(),
                    "{city: Seoul, floor: }",
                    "{c}"
                );
            }
            "rescue" => {
                assert_eq!(address, "{city: Busan}", "{c}");
                let r: serde_json::Value =
                    serde_json::from_str(&cell(&t, "order_id", "2", "_rescued_data").unwrap())
                        .unwrap();
                assert_eq!(
                    r["address"],
                    serde_json::json!({"city": "Busan", "floor": 3}),
                    "{c}"
                );
            }
            _ => assert_eq!(address, "{city: Busan}", "{c}"),
        }
    }

    // Type mismatch, case mismatch and a malformed record never evolve the schema.
    let (s, out) = run_pair(
        "json",
        base,
        (
            "2.json",
            "{\"order_id\": 2, \"amount\": \"5000원 - 750원 할인\", \"address\": {\"city\": \"Busan\"}}\n",
        ),
        mode,
    );
    let c = ctx("type mismatch");
    ok(&out);
    let t = read_table(&s.table());
    assert_eq!(
        cell(&t, "order_id", "2", "amount").as_deref(),
        Some("null"),
        "{c}"
    );
    assert_eq!(schema_versions(&s), 1, "{c}");
    if mode == "none" {
        assert!(!has_column(&t, "_rescued_data"), "{c}");
    } else {
        let r: serde_json::Value =
            serde_json::from_str(&cell(&t, "order_id", "2", "_rescued_data").unwrap()).unwrap();
        assert_eq!(r["amount"], "5000원 - 750원 할인", "{c}");
        assert!(
            r["_file_path"].as_str().unwrap().ends_with("/2.json"),
            "{c}"
        );
    }

    let (s, out) = run_pair(
        "json",
        base,
        ("2.json", "{\"Order_ID\": 2, \"amount\": 10}\n"),
        mode,
    );
    let c = ctx("case mismatch");
    ok(&out);
    let t = read_table(&s.table());
    assert_eq!(common::row_count(&t), 2, "{c}");
    assert_eq!(
        schema_versions(&s),
        1,
        "{c}: a case variant is not a new column"
    );
    if mode != "none" {
        let row = column_strings(&t, "amount")
            .iter()
            .position(|a| a == "10")
            .unwrap();
        assert_eq!(rescued_of(&t, row).unwrap()["Order_ID"], 2, "{c}");
    }

    let (s, out) = run_pair(
        "json",
        base,
        ("2.json", "{\"order_id\": 2, \"amount\":\n"),
        mode,
    );
    let c = ctx("malformed record");
    ok(&out);
    let t = read_table(&s.table());
    assert_eq!(common::row_count(&t), 2, "{c}");
    if mode != "none" {
        let row = column_strings(&t, "order_id")
            .iter()
            .position(|a| a == "null")
            .unwrap();
        assert_eq!(
            rescued_of(&t, row).unwrap()["_corrupt_record"],
            "{\"order_id\": 2, \"amount\":",
            "{c}"
        );
    }
}

#[test]
fn json_add_new_columns_against_every_change() {
    json_mode_against_every_change("addNewColumns");
}

#[test]
fn json_rescue_against_every_change() {
    json_mode_against_every_change("rescue");
}

#[test]
fn json_fail_on_new_columns_against_every_change() {
    json_mode_against_every_change("failOnNewColumns");
}

#[test]
fn json_none_against_every_change() {
    json_mode_against_every_change("none");
}

/// CSV under `mode` against a new column (one test per mode below).
fn csv_mode_against_every_change(mode: &str) {
    let base = ("1.csv", "order_id,amount,city\n1,5000,Seoul\n");
    let (s, out) = run_pair(
        "csv",
        base,
        (
            "2.csv",
            "order_id,amount,city,coupon_code\n2,10,Busan,SUMMER25\n",
        ),
        mode,
    );
    let c = format!("csv new column under {mode}");
    match mode {
        "failOnNewColumns" => {
            assert_eq!(out.status.code(), Some(1), "{c}");
            assert!(common::stderr(&out).contains("coupon_code STRING"), "{c}");
        }
        "addNewColumns" => {
            ok(&out);
            let t = read_table(&s.table());
            assert_eq!(
                cell(&t, "order_id", "2", "coupon_code").as_deref(),
                Some("SUMMER25"),
                "{c}"
            );
            assert_eq!(schema_versions(&s), 2, "{c}");
        }
        "rescue" => {
            ok(&out);
            let r: serde_json::Value = serde_json::from_str(
                &cell(&read_table(&s.table()), "order_id", "2", "_rescued_data").unwrap(),
            )
            .unwrap();
            assert_eq!(r["coupon_code"], "SUMMER25", "{c}");
        }
        _ => {
            ok(&out);
            assert!(!has_column(&read_table(&s.table()), "coupon_code"), "{c}");
        }
    }

    let (s, out) = run_pair(
        "csv",
        base,
        ("2.csv", "order_id,amount,city\n2,5000원,Busan\n"),
        mode,
    );
    let c = format!("csv type mismatch under {mode}");
    ok(&out);
    let t = read_table(&s.table());
    assert_eq!(
        cell(&t, "order_id", "2", "amount").as_deref(),
        Some("null"),
        "{c}"
    );
    if mode != "none" {
        let r: serde_json::Value =
            serde_json::from_str(&cell(&t, "order_id", "2", "_rescued_data").unwrap()).unwrap();
        assert_eq!(
            r["amount"], "5000원",
            "{c}: CSV values stay the original strings"
        );
    }

    let (s, out) = run_pair(
        "csv",
        base,
        ("2.csv", "Order_ID,amount,city\n2,10,Busan\n"),
        mode,
    );
    let c = format!("csv case mismatch under {mode}");
    ok(&out);
    assert_eq!(schema_versions(&s), 1, "{c}");
    if mode != "none" {
        let t = read_table(&s.table());
        let row = column_strings(&t, "amount")
            .iter()
            .position(|a| a == "10")
            .unwrap();
        assert_eq!(rescued_of(&t, row).unwrap()["Order_ID"], "2", "{c}");
    }

    let (s, out) = run_pair(
        "csv",
        base,
        ("2.csv", "order_id,amount,city\n2,10,Busan,extra\n"),
        mode,
    );
    let c = format!("csv malformed row under {mode}");
    ok(&out);
    if mode != "none" {
        let t = read_table(&s.table());
        let r: serde_json::Value =
            serde_json::from_str(&cell(&t, "order_id", "2", "_rescued_data").unwrap()).unwrap();
        assert_eq!(r["_corrupt_record"], "2,10,Busan,extra", "{c}");
    }
}

#[test]
fn csv_add_new_columns_against_every_change() {
    csv_mode_against_every_change("addNewColumns");
}

#[test]
fn csv_rescue_against_every_change() {
    csv_mode_against_every_change("rescue");
}

#[test]
fn csv_fail_on_new_columns_against_every_change() {
    csv_mode_against_every_change("failOnNewColumns");
}

#[test]
fn csv_none_against_every_change() {
    csv_mode_against_every_change("none");
}

/// A one-row Parquet file of nullable `order_id` (INT64) and `amount` columns.
fn order_parquet(amount: Arc<dyn arrow_array::Array>, id: i64) -> Vec<u8> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("order_id", DataType::Int64, true),
        Field::new("amount", amount.data_type().clone(), true),
    ]));
    let batch =
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![id])), amount]).unwrap();
    common::parquet_bytes(&batch)
}

/// A Parquet type mismatch under `mode` (one test per mode with a rescue column below).
fn parquet_type_mismatch_under(mode: &str) {
    let s = Scratch::new();
    s.land(
        "1.parquet",
        order_parquet(Arc::new(Int64Array::from(vec![5000])), 1),
    );
    ok(&s.ingest(&[&format!("cloudFiles.schemaEvolutionMode={mode}")]));
    s.land(
        "2.parquet",
        order_parquet(Arc::new(StringArray::from(vec!["5000원 - 750원 할인"])), 2),
    );
    ok(&s.ingest(&[&format!("cloudFiles.schemaEvolutionMode={mode}")]));
    let t = read_table(&s.table());
    assert_eq!(
        cell(&t, "order_id", "2", "amount").as_deref(),
        Some("null"),
        "{mode}"
    );
    let r: serde_json::Value =
        serde_json::from_str(&cell(&t, "order_id", "2", "_rescued_data").unwrap()).unwrap();
    assert_eq!(r["amount"], "5000원 - 750원 할인", "{mode}");
    assert_eq!(
        schema_versions(&s),
        1,
        "{mode}: a type change never evolves"
    );
}

#[test]
fn parquet_type_mismatch_is_rescued_under_add_new_columns() {
    parquet_type_mismatch_under("addNewColumns");
}

#[test]
fn parquet_type_mismatch_is_rescued_under_rescue() {
    parquet_type_mismatch_under("rescue");
}

#[test]
fn parquet_type_mismatch_is_rescued_under_fail_on_new_columns() {
    parquet_type_mismatch_under("failOnNewColumns");
}

#[test]
fn stop_on_schema_change_exits_with_its_code_and_continues_next_run() {
    let s = Scratch::new();
    let opts = [
        "cloudFiles.inferColumnTypes=true",
        "cloudFiles.stopOnSchemaChange=true",
    ];
    s.land("1.json", "{\"order_id\": 1}\n");
    ok(&s.ingest(&opts));
    s.land("2.json", "{\"order_id\": 2, \"coupon_code\": \"X\"}\n");
    let out = s.ingest(&opts);
    assert_eq!(out.status.code(), Some(3), "{}", common::stderr(&out));
    assert!(
        common::stderr(&out).contains("wrote version 1 adding coupon_code STRING; run again"),
        "{}",
        common::stderr(&out)
    );
    assert_eq!(
        common::row_count(&read_table(&s.table())),
        1,
        "the batch that met the change is not committed"
    );
    let out = ok(&s.ingest(&opts));
    assert_eq!(summary_figure(&out, "rows"), 1);
    assert_eq!(
        cell(&read_table(&s.table()), "order_id", "2", "coupon_code").as_deref(),
        Some("X")
    );
}

#[test]
fn seed_safe_hints_keep_leading_zeros_and_exact_money() {
    let s = Scratch::new();
    s.land(
        "o.json",
        "{\"order_id\": 123, \"amount\": 5000.125, \"created_at\": \"2025-03-15T14:00:00\", \"phone\": \"01012345678\", \"zip_code\": \"00123\", \"items\": [{\"product_id\": 7, \"qty\": 2, \"price\": 12.5}]}\n",
    );
    let hints = "cloudFiles.schemaHints=order_id STRING, amount DECIMAL(18,4), created_at TIMESTAMP, \
                 items ARRAY<STRUCT<product_id:STRING, qty:INT, price:DECIMAL(12,2)>>, phone STRING, zip_code STRING, \
                 shipped_at TIMESTAMP";
    for typed in ["true", "false"] {
        let s2 = Scratch::new();
        s2.land("o.json", fs::read(s.landing().join("o.json")).unwrap());
        ok(&s2.ingest(&[&format!("cloudFiles.inferColumnTypes={typed}"), hints]));
        let py = common::read_with_python(&s2.table(), "order_id");
        let c = format!("inferColumnTypes={typed}");
        assert_eq!(py["types"]["order_id"], "string", "{c}");
        assert_eq!(py["types"]["amount"], "decimal128(18, 4)", "{c}");
        assert_eq!(py["types"]["created_at"], "timestamp[us, tz=UTC]", "{c}");
        assert_eq!(
            py["types"]["items"],
            "list<element: struct<product_id: string, qty: int32, price: decimal128(12, 2)>>",
            "{c}"
        );
        assert_eq!(
            py["types"]["shipped_at"], "timestamp[us, tz=UTC]",
            "{c}: a hinted column absent from the data is added"
        );
        let row = &py["rows"][0];
        assert_eq!(row["zip_code"], "00123", "{c}");
        assert_eq!(row["phone"], "01012345678", "{c}");
        assert_eq!(row["amount"], "5000.1250", "{c}");
        assert_eq!(row["items"][0]["price"], "12.50", "{c}");
        assert_eq!(row["_rescued_data"], serde_json::Value::Null, "{c}");
    }
}

#[test]
fn hints_pin_case_and_malformed_hints_point_at_the_error() {
    let s = Scratch::new();
    s.land("a.json", "{\"orderId\": 1}\n{\"OrderId\": 2}\n");
    ok(&s.ingest(&[
        "cloudFiles.schemaHints=OrderId BIGINT",
        "readerCaseSensitive=false",
    ]));
    let t = read_table(&s.table());
    assert!(has_column(&t, "OrderId"), "the hint's spelling wins");
    let mut ids = column_strings(&t, "OrderId");
    ids.sort();
    assert_eq!(ids, vec!["1", "2"]);

    let bad = Scratch::new();
    bad.land("a.json", "{}\n");
    let out = bad.ingest(&["cloudFiles.schemaHints=order_id BIGINT, amount DECMAL(12,2)"]);
    assert_eq!(out.status.code(), Some(2));
    let err = common::stderr(&out);
    assert!(err.contains("unknown type DECMAL at position 24"), "{err}");
    assert!(
        err.contains("order_id BIGINT, amount DECMAL(12,2)\n"),
        "the hint is quoted: {err}"
    );
}

#[test]
fn user_schema_with_none_mode_rescues_only_with_an_explicit_column() {
    let s = Scratch::new();
    s.land("a.json", "{\"id\": 1, \"extra\": true}\n{\"id\": \"x\"}\n");
    ok(&s.ingest(&["schema=id BIGINT", "rescuedDataColumn=_rescued"]));
    let t = read_table(&s.table());
    let rescued = column_strings(&t, "_rescued");
    assert!(rescued[0].contains("\"extra\":true"), "{rescued:?}");
    assert!(rescued[1].contains("\"id\":\"x\""), "{rescued:?}");
    let v0 = fs::read_to_string(s.table().join("_autoloader/_schemas/0")).unwrap();
    assert!(v0.contains("\"reason\":\"provided\""), "{v0}");

    let s = Scratch::new();
    s.land("a.json", "{\"id\": 1}\n");
    let out = s.ingest(&[
        "schema=id BIGINT",
        "cloudFiles.schemaEvolutionMode=addNewColumns",
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "addNewColumns needs an inferred schema"
    );
}

/// The seed's incident: Wednesday 14:00 a new field, 14:10 `amount` becomes a string;
/// replayed under `mode` (one test per mode below).
fn seed_incident_under(mode: &str) {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/orders/drift");
    let mut files: Vec<_> = fs::read_dir(&fixtures)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let s = Scratch::new();
    let opts = [
        "cloudFiles.inferColumnTypes=true".to_string(),
        format!("cloudFiles.schemaEvolutionMode={mode}"),
    ];
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let mut last = None;
    for f in &files {
        s.land(
            f.file_name().unwrap().to_str().unwrap(),
            fs::read(f).unwrap(),
        );
        last = Some(s.ingest(&opts));
    }
    let last = last.unwrap();
    let t = read_table(&s.table());
    let rows = common::row_count(&t);
    match mode {
        "addNewColumns" => {
            ok(&last);
            assert_eq!(rows, 12, "{mode}: no row lost");
            let coupons: Vec<String> = column_strings(&t, "coupon_code")
                .into_iter()
                .filter(|v| v != "null")
                .collect();
            assert_eq!(
                coupons.len(),
                8,
                "{mode}: the new field is a column from 14:00 on"
            );
            let rescued: Vec<String> = column_strings(&t, "_rescued_data")
                .into_iter()
                .filter(|v| v != "null")
                .collect();
            assert_eq!(rescued.len(), 2, "{mode}: the string amounts are rescued");
            assert!(
                rescued.iter().all(|r| r.contains("원 - 750원 할인")),
                "{rescued:?}"
            );
        }
        "rescue" => {
            ok(&last);
            assert_eq!(rows, 12, "{mode}: no row lost, the stream never stops");
            let rescued: Vec<String> = column_strings(&t, "_rescued_data")
                .into_iter()
                .filter(|v| v != "null")
                .collect();
            assert_eq!(rescued.len(), 8, "{mode}");
            assert!(
                rescued
                    .iter()
                    .all(|r| r.contains("\"coupon_code\":\"SUMMER25\"")),
                "{rescued:?}"
            );
        }
        "failOnNewColumns" => {
            assert_eq!(
                last.status.code(),
                Some(1),
                "{mode}: the stream stops at 14:00"
            );
            assert_eq!(rows, 4, "{mode}: the later files stay unconsumed, not lost");
        }
        _ => {
            ok(&last);
            assert_eq!(rows, 12, "{mode}");
            assert!(
                !has_column(&t, "coupon_code"),
                "{mode}: the new fields silently disappear, as the seed warns"
            );
        }
    }
}

#[test]
fn seed_incident_replayed_under_add_new_columns() {
    seed_incident_under("addNewColumns");
}

#[test]
fn seed_incident_replayed_under_rescue() {
    seed_incident_under("rescue");
}

#[test]
fn seed_incident_replayed_under_fail_on_new_columns() {
    seed_incident_under("failOnNewColumns");
}

#[test]
fn seed_incident_replayed_under_none() {
    seed_incident_under("none");
}

/// Columns added by evolution land before the rescued data, partition columns and
/// `_metadata`, which stay last as the README documents.
#[test]
fn evolved_columns_land_before_the_trailing_columns() {
    let s = crate::common::Scratch::new();
    s.land("day=1/a.json", "{\"order_id\": 1}\n");
    crate::common::ok(&s.ingest(&[]));
    s.land("day=2/b.json", "{\"order_id\": 2, \"coupon\": \"X\"}\n");
    crate::common::ok(&s.ingest(&[]));
    let batches = crate::common::read_table(&s.table());
    let names: Vec<String> = batches[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(
        names,
        ["order_id", "coupon", "_rescued_data", "day", "_metadata"],
        "documented order"
    );
}
