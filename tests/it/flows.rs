//! Flows: `columns`/`except_columns` and `where` (docs/guide/table.md "Flows"). The real binary writes
//! the table; it is read back with delta-rs and Python `deltalake`, and the filtered rows
//! are counted in the summary and in the commit info.

use std::path::Path;
use std::process::Output;

use crate::common::rows::order_ids;
use crate::common::{self, Scratch, column_strings, commit_infos, json_summary, read_table};

/// The seed's orders: two before 2025, two after, one without a date and one whose date
/// does not read as a DATE (rescued, so null in `order_date`).
const ORDERS: &str = r#"{"order_id": 1, "product": "lamp", "amount": 10.5, "region": "eu", "order_date": "2024-12-30", "note": "gift"}
{"order_id": 2, "product": "desk", "amount": 120, "region": "us", "order_date": "2025-01-01", "note": "rush"}
{"order_id": 3, "product": "pen", "amount": 2, "region": "us", "order_date": "2024-06-01", "note": ""}
{"order_id": 4, "product": "ink", "amount": 4, "region": "eu", "order_date": "2025-02-10"}
{"order_id": 5, "product": "mug", "amount": 6, "region": "eu"}
{"order_id": 6, "product": "cup", "amount": 7, "region": "us", "order_date": "soon"}
"#;

/// The columns of a table's batches, in order.
fn columns_of(table: &Path) -> Vec<String> {
    let batches = read_table(table);
    batches[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect()
}

fn run_config(config: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "run".to_string(),
        config.display().to_string(),
        "--once".into(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_string()));
    common::run(&args, &[])
}

/// The seed's backfill (`SELECT order_id, product, amount, region, order_date ... WHERE
/// order_date < '2025-01-01'`) as a stream of a config file: exactly the two old orders
/// land, with exactly those columns (and the rescued data and `_metadata`, which a
/// projection keeps); the four others are counted as filtered, in the summary and the
/// commit, and the one with a rescued date is also warned about.
#[test]
fn the_seed_backfill_keeps_its_columns_and_old_rows() {
    let s = Scratch::new();
    s.land("orders/2024.json", ORDERS);
    let config = s.dir.path().join("streams.toml");
    std::fs::write(
        &config,
        r#"
[[stream]]
name = "backfill"
source = "landing/orders"
table = "bronze/orders"
columns = ["order_id", "product", "amount", "region", "order_date"]
where = "order_date < '2025-01-01'"
[stream.options]
"cloudFiles.inferColumnTypes" = true
"cloudFiles.schemaHints" = "order_date DATE"
"#,
    )
    .unwrap();
    let out = run_config(&config, &["--json"]);
    let summary = json_summary(&out);
    assert_eq!(summary["rows"], 2, "{summary}");
    assert_eq!(summary["filteredRows"], 4, "{summary}");
    assert_eq!(
        summary["rescuedRows"], 0,
        "the rescued row was filtered: {summary}"
    );
    assert!(
        common::stderr(&out).contains("Rows with rescued data were left out"),
        "{}",
        common::stderr(&out)
    );
    let table = s.dir.path().join("bronze/orders");
    assert_eq!(order_ids(&table), [1, 3]);
    assert_eq!(
        columns_of(&table),
        [
            "order_id",
            "product",
            "amount",
            "region",
            "order_date",
            "_rescued_data",
            "_metadata"
        ]
    );
    let infos = commit_infos(&table);
    assert_eq!(infos.len(), 1, "{infos:?}");
    assert_eq!(infos[0]["rows"], 2);
    assert_eq!(infos[0]["filteredRows"], 4);
    let events = std::fs::read_to_string(table.join("_autoloader/backfill/events.jsonl")).unwrap();
    let committed: serde_json::Value = events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["type"] == "batch_committed")
        .expect("a batch_committed event");
    assert_eq!(
        (
            committed["rows"].as_u64(),
            committed["filteredRows"].as_u64()
        ),
        (Some(2), Some(4))
    );
    // An outside reader sees the same: the DATE column, two rows, no `note`.
    let read = common::read_with_python(&table, "order_id");
    assert_eq!(read["num_rows"], 2, "{read}");
    assert_eq!(read["types"]["order_date"], "date32[day]", "{read}");
    assert!(read["types"].get("note").is_none(), "{read}");
    assert_eq!(read["rows"][0]["order_date"], "2024-12-30");
    // A rerun filters nothing new and lands nothing twice.
    let again = json_summary(&run_config(&config, &["--json"]));
    assert_eq!(
        (again["rows"].as_u64(), again["filteredRows"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(order_ids(&table), [1, 3]);
}

/// `ingest --where` with `--except-columns` on CSV: the condition may read a column the
/// table leaves out, strings compare as strings and `IN` lists work; the summary line
/// says how many rows were filtered.
#[test]
fn ingest_flags_filter_csv_rows_and_drop_columns() {
    let s = Scratch::new();
    s.land(
        "a.csv",
        "order_id,region,amount,internal\n1,eu,10,x\n2,us,20,y\n3,apac,30,x\n4,eu,,x\n",
    );
    let out = common::run(
        &[
            "ingest".into(),
            s.landing().display().to_string(),
            s.table().display().to_string(),
            "--once".into(),
            "-o".into(),
            "cloudFiles.format=csv".into(),
            "-o".into(),
            "cloudFiles.inferColumnTypes=true".into(),
            "--except-columns".into(),
            "internal".into(),
            "--where".into(),
            "internal = 'x' AND (region IN ('eu', 'apac') OR amount > 15)".into(),
        ],
        &[],
    );
    let stdout = common::ok(&out);
    assert_eq!(common::summary_figure(&stdout, "rows"), 3, "{stdout}");
    assert!(stdout.contains(", 1 filtered row,"), "{stdout}");
    assert_eq!(order_ids(&s.table()), [1, 3, 4]);
    assert_eq!(
        columns_of(&s.table()),
        ["order_id", "region", "amount", "_rescued_data", "_metadata"]
    );
    assert_eq!(commit_infos(&s.table())[0]["filteredRows"], 1);
}

/// With `columns`, a column the schema gains later does not reach the table; with
/// `except_columns` it does, as without a flow.
#[test]
fn new_columns_follow_except_columns_but_not_columns() {
    for (flow, new_column_lands) in [
        ("--columns=order_id,amount", false),
        ("--except-columns=user_id", true),
    ] {
        let s = Scratch::new();
        s.land("1.json", common::orders_jsonl(0, 3));
        let ingest = || {
            common::run(
                &[
                    "ingest".into(),
                    s.landing().display().to_string(),
                    s.table().display().to_string(),
                    "--once".into(),
                    "-o".into(),
                    "cloudFiles.inferColumnTypes=true".into(),
                    flow.into(),
                    "--where=amount >= 1001".into(),
                ],
                &[],
            )
        };
        common::ok(&ingest());
        s.land(
            "2.json",
            "{\"order_id\": 7, \"amount\": 1007, \"user_id\": \"u7\", \"coupon\": \"C7\"}\n",
        );
        let out = ingest();
        // The new column evolved the schema (exit 3 under the default mode's stop) or not;
        // either way a further run lands the file.
        if out.status.code() == Some(3) {
            common::ok(&ingest());
        } else {
            common::ok(&out);
        }
        assert_eq!(order_ids(&s.table()), [1, 2, 7], "{flow}");
        // The stream's schema has the new column either way (`_schemas/1`).
        let evolved = std::fs::read_to_string(s.table().join("_autoloader/_schemas/1")).unwrap();
        assert!(evolved.contains("coupon"), "{flow}: {evolved}");
        let columns = columns_of(&s.table());
        assert_eq!(
            columns.contains(&"coupon".to_string()),
            new_column_lands,
            "{flow}: {columns:?}"
        );
        assert!(
            !columns.contains(&"user_id".to_string()),
            "{flow}: {columns:?}"
        );
    }
}

/// A `where` that does not parse, names an unknown column, or compares a column with a
/// literal of another type is refused with exit 2 and its position, and no table is
/// written; so are `columns` with `except_columns`, and an unknown column in `columns`.
#[test]
fn a_bad_flow_is_refused_with_its_position() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["--where", "amount >> 5"],
            "where \"amount >> 5\" at column 8:",
        ),
        (
            &["--where", "amount > 5 AND amont < 9"],
            "at column 16: no column amont; did you mean amount?",
        ),
        (
            &["--where", "order_date < 'soon'"],
            "at column 14: column order_date is DATE; the string 'soon' is not a date",
        ),
        (
            &["--where", "order_id = 'ten'"],
            "at column 12: column order_id is BIGINT; the string 'ten' is not a number",
        ),
        (
            &["--columns", "order_id,amout"],
            "columns: no column amout; did you mean amount?",
        ),
        (
            &["--except-columns", "_rescued_data"],
            "_rescued_data cannot be left out",
        ),
    ];
    for (flags, expected) in cases {
        let s = Scratch::new();
        s.land("1.json", ORDERS);
        let mut args: Vec<String> = vec![
            "ingest".into(),
            s.landing().display().to_string(),
            s.table().display().to_string(),
            "--once".into(),
            "-o".into(),
            "cloudFiles.inferColumnTypes=true".into(),
            "-o".into(),
            "cloudFiles.schemaHints=order_date DATE".into(),
        ];
        args.extend(flags.iter().map(|f| (*f).to_string()));
        let out = common::run(&args, &[]);
        let err = common::stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert!(err.contains(expected), "{flags:?}: {err}");
        assert!(
            !s.table().join("_delta_log").exists(),
            "{flags:?}: no table is written"
        );
    }
    // In a config file too, before anything runs.
    let s = Scratch::new();
    s.land("1.json", ORDERS);
    let config = s.dir.path().join("streams.toml");
    std::fs::write(
        &config,
        "[[stream]]\nname = \"a\"\nsource = \"landing\"\ntable = \"t\"\n\
         columns = [\"order_id\"]\nexcept_columns = [\"note\"]\n",
    )
    .unwrap();
    let out = run_config(&config, &["--check"]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("give columns or except_columns, not both"),
        "{err}"
    );
    std::fs::write(
        &config,
        "[[stream]]\nname = \"a\"\nsource = \"landing\"\ntable = \"t\"\nwhere = \"(a = 1\"\n",
    )
    .unwrap();
    let out = run_config(&config, &[]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("stream \"a\": where \"(a = 1\" at column"),
        "{err}"
    );
    assert!(!s.dir.path().join("t").exists(), "nothing runs: {err}");
}

/// The docs' flow examples, as written there, on the bundled fixtures.
#[test]
fn the_docs_flow_examples_run() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/orders/json");
    let s = Scratch::new();
    let landing = s.dir.path().join("landing/orders");
    std::fs::create_dir_all(&landing).unwrap();
    for f in std::fs::read_dir(&fixtures).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, landing.join(f.file_name().unwrap())).unwrap();
    }
    // The streams.toml block with the flow.
    let block = common::doc_block("docs/guide/table.md", "## Flows", "toml");
    assert!(block.contains("name = \"orders_early\""), "{block}");
    let config = s.dir.path().join("streams.toml");
    std::fs::write(&config, block).unwrap();
    let summary = json_summary(&run_config(&config, &["--json"]));
    let table = s.dir.path().join("bronze/orders_early");
    // Orders of 2026-03-13 only (ids 1 to 5 in the fixtures), with the listed columns.
    assert_eq!(order_ids(&table), [1, 2, 3, 4, 5], "{summary}");
    assert!(summary["filteredRows"].as_u64().unwrap() > 0, "{summary}");
    assert_eq!(
        columns_of(&table),
        [
            "order_id",
            "user_id",
            "amount",
            "order_date",
            "city",
            "amount_with_tax",
            "_rescued_data",
            "_metadata"
        ]
    );
    let batches = read_table(&table);
    assert_eq!(
        column_strings(&batches, "city")[..3],
        ["Busan", "Incheon", "Seoul"],
        "a struct field, computed"
    );
    assert_eq!(column_strings(&batches, "amount_with_tax")[0], "1140.7");
    // The `ingest` example, run from the scratch folder as the guide's paths read.
    let line = common::doc_block("docs/guide/table.md", "## Flows", "sh");
    assert!(
        line.starts_with("autoloader ingest landing/orders bronze/big_orders"),
        "{line}"
    );
    let stdout = common::ok(&common::run_doc_sh(&line, s.dir.path(), &[]));
    assert!(stdout.contains("filtered"), "{stdout}");
    let big = s.dir.path().join("bronze/big_orders");
    let columns = columns_of(&big);
    assert!(
        !columns.iter().any(|c| c == "phone" || c == "address"),
        "{columns:?}"
    );
    let amounts: Vec<u64> = column_strings(&read_table(&big), "amount")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    assert!(
        !amounts.is_empty() && amounts.iter().all(|a| *a >= 1200),
        "{amounts:?}"
    );
}

/// `ingest --dry-run` checks the flow against the schema it would read with and shows it;
/// nothing is written either way.
#[test]
fn a_dry_run_checks_and_shows_the_flow() {
    let s = Scratch::new();
    s.land("1.json", ORDERS);
    let dry = |condition: &str| {
        common::run(
            &[
                "ingest".into(),
                s.landing().display().to_string(),
                s.table().display().to_string(),
                "--dry-run".into(),
                "--json".into(),
                "-o".into(),
                "cloudFiles.schemaHints=order_date DATE".into(),
                "--except-columns=note".into(),
                format!("--where={condition}"),
            ],
            &[],
        )
    };
    let plan: serde_json::Value =
        serde_json::from_str(&common::ok(&dry("order_date < '2025-01-01'"))).unwrap();
    assert_eq!(
        plan["schema"]["leftOut"],
        serde_json::json!(["note"]),
        "{plan}"
    );
    assert_eq!(
        plan["schema"]["where"], "order_date < '2025-01-01'",
        "{plan}"
    );
    let out = dry("order_date < 2025");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out).contains("at column 14: column order_date is DATE"),
        "{}",
        common::stderr(&out)
    );
    assert!(!s.table().exists(), "a dry run writes nothing");
}

/// Parquet files go through the same flow: a TIMESTAMP column compared with a string, a
/// DOUBLE with an integer, and `columns` keeping two columns.
#[test]
fn parquet_rows_are_filtered_too() {
    let s = Scratch::new();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/orders/parquet");
    for f in std::fs::read_dir(&fixtures).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, s.landing().join(f.file_name().unwrap())).unwrap();
    }
    let out = common::run(
        &[
            "ingest".into(),
            s.landing().display().to_string(),
            s.table().display().to_string(),
            "--once".into(),
            "--json".into(),
            "-o".into(),
            "cloudFiles.format=parquet".into(),
            "--columns=order_id,amount".into(),
            "--where=order_date >= '2026-03-13 12:00:00' AND amount < 1300".into(),
        ],
        &[],
    );
    let summary = json_summary(&out);
    assert_eq!(order_ids(&s.table()), [3, 4, 5, 6, 7, 8], "{summary}");
    assert_eq!(summary["filteredRows"], 4, "{summary}");
    assert_eq!(
        columns_of(&s.table()),
        ["order_id", "amount", "_rescued_data", "_metadata"]
    );
}

/// A `where` that does not fit the schema is refused before `_schemas/0` is written, so
/// fixing the run (here: a hint that makes the literal fit) starts from nothing.
#[test]
fn a_refused_where_leaves_no_schema_behind() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 5));
    let mut args: Vec<String> = vec![
        "ingest".into(),
        s.landing().display().to_string(),
        s.table().display().to_string(),
        "--once".into(),
        "-o".into(),
        "cloudFiles.inferColumnTypes=true".into(),
    ];
    let mut bad = args.clone();
    bad.extend(["--where".into(), "amount = 'ten'".into()]);
    let out = common::run(&bad, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    assert!(!s.table().join("_autoloader/_schemas/0").exists());
    args.extend([
        "-o".into(),
        "cloudFiles.schemaHints=amount DECIMAL(10,2)".into(),
        "--where".into(),
        "amount > 1002".into(),
    ]);
    common::ok(&common::run(&args, &[]));
    assert_eq!(order_ids(&s.table()), vec![3, 4]);
}

/// A number compared with a column that is STRING because inference is off: the error
/// points to reading the column as a number, not only to quoting (which would compare
/// text: '999' > '1200') (issue 36.10).
#[test]
fn a_number_against_a_string_column_points_to_inference() {
    let s = crate::common::Scratch::new();
    s.land("a.json", crate::common::orders_jsonl(0, 3));
    let out = crate::common::run(
        &[
            "ingest".into(),
            s.landing().display().to_string(),
            s.table().display().to_string(),
            "--once".into(),
            "--where".into(),
            "amount >= 1200".into(),
        ],
        &[],
    );
    let err = crate::common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cloudFiles.inferColumnTypes=true") && err.contains("amount DOUBLE"),
        "{err}"
    );
}

/// A Lakeflow SQL pipeline run as written (`autoloader run pipeline.sql`): a bronze table
/// from `read_files` with a constraint and `pipelines.reset.allowed`, a silver table from
/// `STREAM(bronze)` leaving a column out, and a ONCE backfill flow into a target declared
/// with its columns; the same rows as the TOML flows would give.
#[test]
fn a_lakeflow_sql_pipeline_runs_as_written() {
    let s = Scratch::new();
    s.land("orders/a.json", ORDERS);
    std::fs::create_dir_all(s.dir.path().join("archive")).unwrap();
    std::fs::write(
        s.dir.path().join("archive/old.json"),
        "{\"order_id\": 100, \"amount\": 5, \"region\": \"eu\"}\n{\"order_id\": 101, \"amount\": 7, \"region\": \"us\"}\n",
    )
    .unwrap();
    let sql = s.dir.path().join("pipeline.sql");
    std::fs::write(
        &sql,
        r#"-- Bronze: every order, guarded against a full refresh.
CREATE OR REFRESH STREAMING TABLE bronze_orders (
  CONSTRAINT has_amount EXPECT (amount IS NOT NULL) ON VIOLATION DROP ROW
)
COMMENT 'raw orders'
TBLPROPERTIES ('pipelines.reset.allowed' = 'false')
AS SELECT *, _rescued_data
FROM STREAM read_files('landing/orders', format => 'json', inferColumnTypes => true);

/* Silver: the orders without their note. */
CREATE OR REFRESH STREAMING TABLE silver.orders
AS SELECT * EXCEPT (note) FROM STREAM(bronze_orders) WHERE region = 'eu';

CREATE OR REFRESH STREAMING TABLE all_orders (order_id BIGINT, amount DOUBLE);
CREATE FLOW backfill ONCE AS INSERT INTO all_orders BY NAME
SELECT order_id, amount FROM read_files('archive', format => 'json') WHERE amount < 6;
"#,
    )
    .unwrap();
    let out = run_config(&sql, &[]);
    common::ok(&out);
    let dir = s.dir.path();
    assert_eq!(order_ids(&dir.join("bronze_orders")), [1, 2, 3, 4, 5, 6]);
    assert_eq!(order_ids(&dir.join("silver/orders")), [1, 4, 5]);
    assert!(!columns_of(&dir.join("silver/orders")).contains(&"note".to_string()));
    assert_eq!(order_ids(&dir.join("all_orders")), [100]);
    let props = common::read_with_python(&dir.join("bronze_orders"), "order_id");
    assert_eq!(
        props["configuration"]["pipelines.reset.allowed"], "false",
        "{props}"
    );
    // A second run finds nothing new and skips the ONCE flow.
    let again = common::ok(&run_config(&sql, &[]));
    assert!(again.contains("ran already; skipped"), "{again}");
    // What is not read yet is refused with its place, exit 2.
    std::fs::write(
        &sql,
        "CREATE STREAMING TABLE t AS\nSELECT *, current_user() AS at FROM read_files('x')",
    )
    .unwrap();
    let refused = run_config(&sql, &[]);
    assert_eq!(
        refused.status.code(),
        Some(2),
        "{}",
        common::stderr(&refused)
    );
    assert!(
        common::stderr(&refused).contains("line 2, column 11: unknown function current_user()"),
        "{}",
        common::stderr(&refused)
    );
}

/// Seed 001 in SQL: a bronze table of change records from `read_files`, then `APPLY
/// CHANGES INTO` an SCD 1 table and `AUTO CDC INTO` an SCD 2 table from `STREAM(bronze)`;
/// each equals the table the same flows give from a `streams.toml`.
#[test]
fn seed_001_in_sql_gives_the_tables_of_the_toml_flows() {
    let s = Scratch::new();
    s.land("cdc/changes.json", crate::cdc::RECORDS.join("\n") + "\n");
    let dir = s.dir.path();
    let sql = dir.join("pipeline.sql");
    std::fs::write(
        &sql,
        r#"CREATE OR REFRESH STREAMING TABLE raw_customer_cdc
AS SELECT * FROM STREAM read_files('landing/cdc', format => 'json', inferColumnTypes => true,
                                   includeMetadata => false);

CREATE OR REFRESH STREAMING TABLE customers;
APPLY CHANGES INTO customers
FROM STREAM(raw_customer_cdc)
  KEYS (userId)
  APPLY AS DELETE WHEN operation = 'DELETE'
  SEQUENCE BY sequenceNum
  COLUMNS * EXCEPT (operation, sequenceNum, _rescued_data)
  STORED AS SCD TYPE 1;

CREATE OR REFRESH STREAMING TABLE customers_history;
CREATE FLOW history AS AUTO CDC INTO customers_history
FROM STREAM(raw_customer_cdc)
  KEYS (userId)
  APPLY AS DELETE WHEN operation = 'DELETE'
  SEQUENCE BY sequenceNum
  COLUMNS * EXCEPT (operation, sequenceNum, _rescued_data)
  STORED AS SCD TYPE 2;
"#,
    )
    .unwrap();
    common::ok(&run_config(&sql, &[]));
    let toml = dir.join("toml");
    std::fs::create_dir_all(&toml).unwrap();
    let config = toml.join("streams.toml");
    std::fs::write(
        &config,
        r#"
[[stream]]
name = "raw_customer_cdc"
source = "../landing/cdc"
table = "raw_customer_cdc"
[stream.options]
"cloudFiles.format" = "json"
"cloudFiles.inferColumnTypes" = true
"cloudFiles.includeMetadata" = false

[[stream]]
name = "customers"
source = "raw_customer_cdc"
table = "customers"
[stream.cdc]
keys = ["userId"]
apply_as_deletes = "operation = 'DELETE'"
sequence_by = "sequenceNum"
except_column_list = ["operation", "sequenceNum", "_rescued_data"]
stored_as_scd_type = 1

[[stream]]
name = "history"
source = "raw_customer_cdc"
table = "customers_history"
[stream.cdc]
keys = ["userId"]
apply_as_deletes = "operation = 'DELETE'"
sequence_by = "sequenceNum"
except_column_list = ["operation", "sequenceNum", "_rescued_data"]
stored_as_scd_type = 2
"#,
    )
    .unwrap();
    common::ok(&run_config(&config, &[]));
    let rows = |table: &Path| common::table_rows(table, &["_metadata"]);
    let scd1 = rows(&dir.join("customers"));
    assert_eq!(scd1, rows(&toml.join("customers")));
    assert_eq!(
        scd1.1.len(),
        3,
        "Databricks' example leaves 3 rows: {:?}",
        scd1.1
    );
    let scd2 = rows(&dir.join("customers_history"));
    assert_eq!(scd2, rows(&toml.join("customers_history")));
    assert!(scd2.0.contains(&"__END_AT".to_string()), "{:?}", scd2.0);
}

/// A folder of SQL files as one pipeline, driven with Spark's flags: `--dry-run`,
/// `--refresh` (only those flows), `--full-refresh` (a guarded table refused, exit 4),
/// `--full-refresh-all` (the guarded table skipped, the other rebuilt).
#[test]
fn a_folder_of_sql_files_runs_with_spark_s_flags() {
    let s = Scratch::new();
    s.land("orders/a.json", ORDERS);
    let dir = s.dir.path();
    let lib = dir.join("transformations");
    std::fs::create_dir_all(lib.join("silver")).unwrap();
    std::fs::write(
        lib.join("bronze.sql"),
        "CREATE OR REFRESH STREAMING TABLE bronze_orders\n\
         TBLPROPERTIES ('pipelines.reset.allowed' = 'false')\n\
         AS SELECT * FROM STREAM read_files('../landing/orders', format => 'json');\n",
    )
    .unwrap();
    std::fs::write(
        lib.join("silver/orders.sql"),
        "CREATE OR REFRESH STREAMING TABLE silver.orders\n\
         AS SELECT * FROM STREAM(bronze_orders) WHERE region = 'eu';\n",
    )
    .unwrap();
    let run_with = |flags: &[&str]| run_config(&lib, flags);
    let dry = common::ok(&run_with(&["--dry-run"]));
    assert!(
        dry.contains("valid, 2 streams: bronze_orders, silver_orders"),
        "{dry}"
    );
    assert!(
        !lib.join("bronze_orders/_delta_log").exists(),
        "a dry run writes no table"
    );
    common::ok(&run_with(&[]));
    let silver = lib.join("silver/orders");
    assert_eq!(order_ids(&silver), [1, 4, 5]);
    // New orders land; only bronze is refreshed: silver has not read them yet.
    s.land(
        "orders/b.json",
        "{\"order_id\": 7, \"amount\": 1, \"region\": \"eu\"}\n",
    );
    common::ok(&run_with(&["--refresh", "bronze_orders"]));
    assert_eq!(order_ids(&lib.join("bronze_orders")).len(), 7);
    assert_eq!(order_ids(&silver), [1, 4, 5]);
    // A full refresh of silver rebuilds it from bronze, the new order with it.
    let out = run_with(&["--full-refresh", "silver.orders"]);
    common::ok(&out);
    assert_eq!(order_ids(&silver), [1, 4, 5, 7]);
    // bronze is guarded: refused, nothing reset.
    let refused = run_with(&["--full-refresh", "bronze_orders"]);
    assert_eq!(
        refused.status.code(),
        Some(4),
        "{}",
        common::stderr(&refused)
    );
    assert_eq!(order_ids(&lib.join("bronze_orders")).len(), 7);
    // All: bronze skipped and said, silver rebuilt.
    let all = run_with(&["--full-refresh-all"]);
    common::ok(&all);
    assert!(common::stderr(&all).contains("not reset (pipelines.reset.allowed=false)"));
    assert_eq!(order_ids(&silver), [1, 4, 5, 7]);
    assert_eq!(order_ids(&lib.join("bronze_orders")).len(), 7);
    let unknown = run_with(&["--refresh", "gold"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(common::stderr(&unknown).contains("no flow named gold"));
}

/// The SQL is the flow's definition: a WHERE edited applies to new rows (said once), a
/// source changed needs a full refresh (refused, exit 2, before anything is read).
#[test]
fn an_edited_sql_pipeline_is_a_changed_definition() {
    let s = Scratch::new();
    s.land("orders/a.json", ORDERS);
    let sql = s.dir.path().join("pipeline.sql");
    let write = |body: &str| std::fs::write(&sql, body).unwrap();
    write(
        "CREATE OR REFRESH STREAMING TABLE eu AS SELECT * FROM \
         STREAM read_files('landing/orders', format => 'json') WHERE region = 'eu'",
    );
    common::ok(&run_config(&sql, &[]));
    write(
        "CREATE OR REFRESH STREAMING TABLE eu AS SELECT * FROM \
         STREAM read_files('landing/orders', format => 'json') WHERE region IN ('eu', 'uk')",
    );
    let out = run_config(&sql, &[]);
    common::ok(&out);
    assert!(
        common::stderr(&out).contains("applies to new rows only"),
        "{}",
        common::stderr(&out)
    );
    write(
        "CREATE OR REFRESH STREAMING TABLE eu AS SELECT * FROM \
         STREAM read_files('elsewhere', format => 'json') WHERE region IN ('eu', 'uk')",
    );
    std::fs::create_dir_all(s.dir.path().join("elsewhere")).unwrap();
    let refused = run_config(&sql, &[]);
    assert_eq!(
        refused.status.code(),
        Some(2),
        "{}",
        common::stderr(&refused)
    );
    assert!(
        common::stderr(&refused).contains("needs a full refresh"),
        "{}",
        common::stderr(&refused)
    );
}

/// Seed 003's `bronze_orders` and `silver_orders` as written (only the path and the table
/// name mapped): lineage and ingest time computed in bronze, and silver promoting a field
/// the bronze schema rescued (`discount_rate` typed DOUBLE by the first file, a string in
/// the second) with `COALESCE` and `get_json_object`. Each equals the tables the same flows
/// give from a `streams.toml` with `with_columns`.
#[test]
fn seed_003_bronze_and_silver_compute_their_columns_as_toml_does() {
    let s = Scratch::new();
    let dir = s.dir.path();
    let sql = dir.join("pipeline.sql");
    std::fs::write(
        &sql,
        r#"-- SDP에서 스키마 추론 + 진화 + 구조 데이터 컬럼 활용
CREATE OR REFRESH STREAMING TABLE bronze_orders
AS SELECT
    *,
    _rescued_data,
    _metadata.file_path AS _source_file,
    current_timestamp() AS _ingested_at
FROM STREAM read_files(
    'landing/orders',
    format => 'json',
    inferColumnTypes => true,
    schemaEvolutionMode => 'addNewColumns',
    rescuedDataColumn => '_rescued_data'
);

-- Silver 레이어에서 rescued_data를 파싱하여 정식 컬럼으로 추출
CREATE OR REFRESH STREAMING TABLE silver_orders AS
SELECT
    *,
    -- rescued_data에서 새 필드를 추출
    COALESCE(
        coupon_code,
        get_json_object(_rescued_data, '$.coupon_code')
    ) AS coupon_code_final,
    COALESCE(
        discount_rate,
        CAST(get_json_object(_rescued_data, '$.discount_rate') AS DOUBLE)
    ) AS discount_rate_final
FROM STREAM(bronze_orders);
"#,
    )
    .unwrap();
    let toml = dir.join("toml");
    std::fs::create_dir_all(&toml).unwrap();
    let config = toml.join("streams.toml");
    std::fs::write(
        &config,
        r#"
[[stream]]
name = "bronze_orders"
source = "../landing/orders"
table = "bronze_orders"
with_columns = ["_metadata.file_path AS _source_file", "current_timestamp() AS _ingested_at"]
[stream.options]
"cloudFiles.format" = "json"
"cloudFiles.inferColumnTypes" = true
"cloudFiles.schemaEvolutionMode" = "addNewColumns"
"rescuedDataColumn" = "_rescued_data"

[[stream]]
name = "silver_orders"
source = "bronze_orders"
table = "silver_orders"
with_columns = [
  "COALESCE(coupon_code, get_json_object(_rescued_data, '$.coupon_code')) AS coupon_code_final",
  "COALESCE(discount_rate, CAST(get_json_object(_rescued_data, '$.discount_rate') AS DOUBLE)) AS discount_rate_final",
]
"#,
    )
    .unwrap();
    let started = chrono::Utc::now();
    // Run 1 fixes discount_rate as DOUBLE; in run 2 a string there is rescued.
    s.land(
        "orders/1.json",
        r#"{"order_id": 1, "amount": 10.5, "coupon_code": "A", "discount_rate": 0.1}
"#,
    );
    common::ok(&run_config(&sql, &[]));
    common::ok(&run_config(&config, &[]));
    s.land(
        "orders/2.json",
        r#"{"order_id": 2, "amount": 20, "discount_rate": "0.25"}
{"order_id": 3, "amount": 30}
"#,
    );
    common::ok(&run_config(&sql, &[]));
    common::ok(&run_config(&config, &[]));

    let bronze = dir.join("bronze_orders");
    assert_eq!(
        columns_of(&bronze),
        [
            "order_id",
            "amount",
            "coupon_code",
            "discount_rate",
            "_source_file",
            "_ingested_at",
            "_rescued_data",
            "_metadata"
        ],
        "computed columns go after the data columns, before the trailing ones"
    );
    let batches = read_table(&bronze);
    let files = column_strings(&batches, "_source_file");
    assert!(
        files
            .iter()
            .all(|f| f.starts_with("file://") && f.contains("/landing/orders/")),
        "{files:?}"
    );
    for at in column_strings(&batches, "_ingested_at") {
        let at = chrono::DateTime::parse_from_rfc3339(&at).unwrap_or_else(|e| panic!("{at}: {e}"));
        assert!(at >= started && at <= chrono::Utc::now(), "{at}");
    }
    let silver = dir.join("silver_orders");
    let batches = read_table(&silver);
    let by_id = |column: &str| {
        let ids = column_strings(&batches, "order_id");
        let values = column_strings(&batches, column);
        let mut pairs: Vec<(String, String)> = ids.into_iter().zip(values).collect();
        pairs.sort();
        pairs.into_iter().map(|(_, v)| v).collect::<Vec<_>>()
    };
    let rescued = by_id("_rescued_data");
    assert!(
        rescued[1].starts_with(r#"{"discount_rate":"0.25","_file_path":"file://"#)
            && rescued[1].ends_with(r#"/landing/orders/2.json"}"#),
        "bronze's rescued data carried on as it was, naming the landing file: {rescued:?}"
    );
    assert_eq!(by_id("discount_rate"), ["0.1", "null", "null"]);
    assert_eq!(
        by_id("discount_rate_final"),
        ["0.1", "0.25", "null"],
        "the rescued string promoted back"
    );
    assert_eq!(by_id("coupon_code_final"), ["A", "null", "null"]);

    // The same tables from the TOML flows (but the instant each run read them).
    let rows = |table: &Path| common::table_rows(table, &["_ingested_at", "_metadata"]);
    assert_eq!(rows(&bronze), rows(&toml.join("bronze_orders")));
    assert_eq!(rows(&silver), rows(&toml.join("silver_orders")));
}

/// ANSI: a value a computed column cannot read stops the flow naming the file and the
/// record, nothing lands and the file stays unconsumed; `try_cast` (a changed definition)
/// then lands the row with NULL, and `--where` takes any condition of the engine.
#[test]
fn a_value_that_cannot_be_computed_stops_the_flow_at_its_record() {
    let s = Scratch::new();
    s.land(
        "a.json",
        "{\"order_id\": 1, \"qty\": \"2\", \"region\": \" EU \"}\n\
         {\"order_id\": 2, \"qty\": \"two\", \"region\": \"us\"}\n\
         {\"order_id\": 3, \"qty\": \"5\", \"region\": \"apac\"}\n",
    );
    let run = |cast: &str| {
        common::run(
            &[
                "ingest".into(),
                s.landing().display().to_string(),
                s.table().display().to_string(),
                "--once".into(),
                "-o".into(),
                "cloudFiles.inferColumnTypes=true".into(),
                "--with-column".into(),
                format!("{cast}(qty AS INT) * 10 AS units"),
                "--with-column".into(),
                "lower(trim(region)) AS area".into(),
                "--where".into(),
                "order_id * 2 <> 6".into(),
            ],
            &[],
        )
    };
    let failed = run("CAST");
    assert_eq!(failed.status.code(), Some(1), "{}", common::stderr(&failed));
    let e = common::stderr(&failed);
    assert!(
        e.contains("computing units (CAST(qty AS INT) * 10 AS units) failed in")
            && e.contains(
                "a.json, record 2: cannot cast 'two' to INT (try_cast gives NULL instead)"
            ),
        "{e}"
    );
    assert!(
        !s.table().join("_delta_log").exists() || common::row_count(&read_table(&s.table())) == 0,
        "nothing landed"
    );

    let out = run("try_cast");
    common::ok(&out);
    let batches = read_table(&s.table());
    assert_eq!(
        column_strings(&batches, "order_id"),
        ["1", "2"],
        "3 filtered"
    );
    assert_eq!(column_strings(&batches, "units"), ["20", "null"]);
    assert_eq!(column_strings(&batches, "area"), ["eu", "us"]);

    // A rule's check that cannot be computed names the rule, the file and the record.
    let rule = common::run(
        &[
            "ingest".into(),
            s.landing().display().to_string(),
            s.dir.path().join("ruled").display().to_string(),
            "--once".into(),
            "--expect-or-drop".into(),
            "small=CAST(qty AS INT) < 3".into(),
        ],
        &[],
    );
    assert_eq!(rule.status.code(), Some(1), "{}", common::stderr(&rule));
    let e = common::stderr(&rule);
    assert!(
        e.contains("expectation \"small\" failed in")
            && e.contains("a.json, record 2: check \"CAST(qty AS INT) < 3\": cannot cast 'two'"),
        "{e}"
    );
}

/// A spec-driven project as Spark lays it out: `spark-pipeline.yml` (name, storage,
/// libraries, catalog, database, configuration) and a `transformations/` folder. It runs
/// (from the spec or its folder), dry-runs without writing, refreshes a selection, refuses
/// a guarded full refresh (exit 4), and refuses an unknown key or a Python file (exit 2).
#[test]
fn a_spark_pipeline_spec_runs_its_transformations() {
    let s = Scratch::new();
    s.land("orders/a.json", ORDERS);
    let dir = s.dir.path();
    let spec = dir.join("spark-pipeline.yml");
    let spec_text = "name: orders_pipeline\n\
                     storage: checkpoints\n\
                     catalog: main\n\
                     database: bronze\n\
                     libraries:\n  - glob:\n      include: transformations/**\n\
                     configuration:\n  landing: landing/orders\n";
    std::fs::write(&spec, spec_text).unwrap();
    let lib = dir.join("transformations");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(
        lib.join("bronze.sql"),
        "CREATE OR REFRESH STREAMING TABLE orders\n\
         TBLPROPERTIES ('pipelines.reset.allowed' = 'false')\n\
         AS SELECT *, upper(region) AS region_code\n\
         FROM STREAM read_files('${landing}', format => 'json', inferColumnTypes => true);\n",
    )
    .unwrap();
    std::fs::write(
        lib.join("silver.sql"),
        "CREATE OR REFRESH STREAMING TABLE silver.orders\n\
         AS SELECT * FROM STREAM(main.bronze.orders) WHERE region_code = 'EU';\n",
    )
    .unwrap();
    let warehouse = dir.join("spark-warehouse/main");
    let (bronze, silver) = (
        warehouse.join("bronze/orders"),
        warehouse.join("silver/orders"),
    );

    let dry = common::ok(&run_config(&spec, &["--dry-run"]));
    assert!(
        dry.contains("valid, 2 streams: orders, silver_orders"),
        "{dry}"
    );
    assert!(
        !dir.join("spark-warehouse").exists() && !dir.join("checkpoints").exists(),
        "a dry run writes nothing, not even the folder of a table another flow creates"
    );

    common::ok(&run_config(&spec, &[]));
    assert_eq!(order_ids(&bronze).len(), 6);
    assert_eq!(order_ids(&silver), [1, 4, 5]);
    assert!(
        dir.join("checkpoints/orders").is_dir() && dir.join("checkpoints/silver_orders").is_dir(),
        "checkpoints under the spec's storage"
    );
    // The folder holding the spec runs it too; --refresh runs only the named flow.
    s.land(
        "orders/b.json",
        "{\"order_id\": 7, \"amount\": 1, \"region\": \"eu\"}\n",
    );
    common::ok(&run_config(dir, &["--refresh", "orders"]));
    assert_eq!(order_ids(&bronze).len(), 7);
    assert_eq!(order_ids(&silver), [1, 4, 5], "silver not refreshed");
    common::ok(&run_config(dir, &[]));
    assert_eq!(order_ids(&silver), [1, 4, 5, 7]);
    // The guarded bronze table: refused, nothing reset.
    let refused = run_config(&spec, &["--full-refresh", "orders"]);
    assert_eq!(
        refused.status.code(),
        Some(4),
        "{}",
        common::stderr(&refused)
    );
    assert_eq!(order_ids(&bronze).len(), 7);

    // Spark refuses a key it does not know, naming it; so do we.
    std::fs::write(&spec, format!("{spec_text}edition: advanced\n")).unwrap();
    let unknown = run_config(&spec, &[]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        common::stderr(&unknown).contains("unknown field `edition`"),
        "{}",
        common::stderr(&unknown)
    );
    std::fs::write(&spec, spec_text).unwrap();
    std::fs::write(lib.join("gold.py"), "import dlt\n").unwrap();
    let python = run_config(&spec, &[]);
    assert_eq!(python.status.code(), Some(2));
    assert!(
        common::stderr(&python)
            .contains("transformations/gold.py: Python transformations need Spark"),
        "{}",
        common::stderr(&python)
    );
}

/// Seed 000's blocks as written (only paths mapped; the raw tables they read defined first):
/// the guarded `orders`, `all_orders` with declared columns fed by two append flows and a
/// ONCE backfill from a batch-read archive, and `raw_events` from `cloud_files` with
/// `modifiedAfter`. Each table equals the one the same flows give from a `streams.toml`.
#[test]
fn seed_000_in_sql_gives_the_tables_of_the_toml_flows() {
    let s = Scratch::new();
    let dir = s.dir.path();
    s.land("orders/1.json", ORDERS);
    s.land(
        "korea/1.json",
        "{\"order_id\": 11, \"product\": \"tea\", \"amount\": 10.5, \"region\": \"kr\", \"order_date\": \"2025-03-01\", \"note\": \"x\"}\n",
    );
    s.land(
        "us/1.json",
        "{\"order_id\": 21, \"product\": \"pie\", \"amount\": 3, \"region\": \"us\", \"order_date\": \"2025-04-01\"}\n",
    );
    s.land(
        "legacy/1.json",
        "{\"order_id\": 31, \"product\": \"ink\", \"amount\": 4.25, \"region\": \"eu\", \"order_date\": \"2024-02-01\"}\n\
         {\"order_id\": 32, \"product\": \"pen\", \"amount\": 1, \"region\": \"eu\", \"order_date\": \"2025-02-01\"}\n",
    );
    // The archive the backfill reads is a Delta table that exists before the pipeline.
    common::ok(&common::run(
        &[
            "ingest".into(),
            s.landing().join("legacy").display().to_string(),
            dir.join("legacy_orders_archive").display().to_string(),
            "--once".into(),
            "-o".into(),
            "cloudFiles.inferColumnTypes=true".into(),
        ],
        &[],
    ));
    // Events: one file modified before the cut-off, one after.
    s.land("events/old.json", "{\"event\": \"old\"}\n");
    s.land("events/new.json", "{\"event\": \"new\"}\n");
    let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_748_736_000); // 2025-06-01
    std::fs::File::options()
        .write(true)
        .open(s.landing().join("events/old.json"))
        .unwrap()
        .set_modified(old)
        .unwrap();

    let sql = dir.join("pipeline.sql");
    std::fs::write(
        &sql,
        r#"-- The raw tables the seed's flows read.
CREATE OR REFRESH STREAMING TABLE raw_orders
AS SELECT * FROM STREAM read_files('landing/orders', format => 'json', inferColumnTypes => true);
CREATE OR REFRESH STREAMING TABLE raw_korea_orders
AS SELECT * FROM STREAM read_files('landing/korea', format => 'json', inferColumnTypes => true);
CREATE OR REFRESH STREAMING TABLE raw_us_orders
AS SELECT * FROM STREAM read_files('landing/us', format => 'json', inferColumnTypes => true);

CREATE OR REFRESH STREAMING TABLE orders
TBLPROPERTIES ('pipelines.reset.allowed' = 'false')
AS SELECT * FROM STREAM(raw_orders);

-- 대상 테이블 정의 (스키마만, 소스 없음)
CREATE OR REFRESH STREAMING TABLE all_orders (
  order_id BIGINT,
  product STRING,
  amount DECIMAL(10,2),
  region STRING,
  order_date DATE
);

-- Flow 1: 한국 주문
CREATE FLOW korea_orders
AS INSERT INTO all_orders BY NAME
SELECT * FROM STREAM(raw_korea_orders);

-- Flow 2: 미국 주문 (나중에 추가 — 기존 Flow에 영향 없음)
CREATE FLOW us_orders
AS INSERT INTO all_orders BY NAME
SELECT * FROM STREAM(raw_us_orders);

-- 과거 데이터를 한 번만 적재 (배치 소스 사용 가능)
CREATE FLOW backfill_legacy_orders
  ONCE
AS INSERT INTO all_orders BY NAME
SELECT
  order_id,
  product,
  amount,
  region,
  order_date
FROM legacy_orders_archive  -- STREAM 없이 배치로 읽기
WHERE order_date < '2025-01-01';

CREATE OR REFRESH STREAMING TABLE raw_events
AS SELECT *
FROM cloud_files(
  'landing/events/',
  'json',
  map(
    'cloudFiles.modifiedAfter', '2026-01-01T00:00:00.000Z',
    'cloudFiles.inferColumnTypes', 'true'
  )
);
"#,
    )
    .unwrap();
    common::ok(&run_config(&sql, &[]));

    let toml = dir.join("toml");
    std::fs::create_dir_all(&toml).unwrap();
    let config = toml.join("streams.toml");
    let casts = r#"columns = []
with_columns = ["CAST(order_id AS BIGINT) AS order_id", "CAST(product AS STRING) AS product",
  "CAST(amount AS DECIMAL(10,2)) AS amount", "CAST(region AS STRING) AS region",
  "CAST(order_date AS DATE) AS order_date"]"#;
    let raw = |name: &str, folder: &str| {
        format!(
            "[[stream]]\nname = \"{name}\"\nsource = \"../landing/{folder}\"\ntable = \"{name}\"\n\
             [stream.options]\n\"cloudFiles.format\" = \"json\"\n\"cloudFiles.inferColumnTypes\" = true\n"
        )
    };
    std::fs::write(
        &config,
        format!(
            r#"{}{}{}
[[stream]]
name = "orders"
source = "raw_orders"
table = "orders"

[[stream]]
name = "korea_orders"
source = "raw_korea_orders"
table = "all_orders"
{casts}

[[stream]]
name = "us_orders"
source = "raw_us_orders"
table = "all_orders"
{casts}

[[stream]]
name = "backfill_legacy_orders"
source = "../legacy_orders_archive"
table = "all_orders"
once = true
where = "order_date < '2025-01-01'"
{casts}

[[stream]]
name = "raw_events"
source = "../landing/events"
table = "raw_events"
[stream.options]
"cloudFiles.format" = "json"
"cloudFiles.modifiedAfter" = "2026-01-01T00:00:00.000Z"
"cloudFiles.inferColumnTypes" = true

[[table]]
path = "orders"
properties = {{ "pipelines.reset.allowed" = "false" }}
"#,
            raw("raw_orders", "orders"),
            raw("raw_korea_orders", "korea"),
            raw("raw_us_orders", "us"),
        ),
    )
    .unwrap();
    common::ok(&run_config(&config, &[]));

    let all = common::read_with_python(&dir.join("all_orders"), "order_id");
    assert_eq!(all["types"]["amount"], "decimal128(10, 2)", "{all}");
    assert_eq!(all["types"]["order_date"], "date32[day]", "{all}");
    assert!(
        all["types"].get("note").is_none(),
        "only the declared columns: {all}"
    );
    assert_eq!(order_ids(&dir.join("all_orders")), [11, 21, 31]);
    assert_eq!(order_ids(&dir.join("orders")), [1, 2, 3, 4, 5, 6]);
    assert_eq!(
        column_strings(&read_table(&dir.join("raw_events")), "event"),
        ["new"],
        "modifiedAfter"
    );
    let rows = |table: &Path| common::table_rows(table, &["_metadata", "_rescued_data"]);
    for table in ["orders", "all_orders", "raw_events"] {
        assert_eq!(rows(&dir.join(table)), rows(&toml.join(table)), "{table}");
    }
    // The guarded table stays guarded; a second run skips the ONCE backfill.
    let refused = run_config(&sql, &["--full-refresh", "orders"]);
    assert_eq!(
        refused.status.code(),
        Some(4),
        "{}",
        common::stderr(&refused)
    );
    let again = common::ok(&run_config(&sql, &[]));
    assert!(again.contains("ran already; skipped"), "{again}");
    assert_eq!(order_ids(&dir.join("all_orders")), [11, 21, 31]);
}

/// Seed 001's own blocks as written (the TRACK HISTORY ON variant into a second table,
/// its only name mapped): SCD 1, SCD 2, and SCD 2 tracking only address and membership,
/// each equal to the TOML flows' table; the seed's point-in-time question (customer A's
/// address on 2025-09-01) reads Busan from the history.
#[test]
fn seed_001_blocks_as_written_equal_the_toml_flows() {
    let s = Scratch::new();
    let dir = s.dir.path();
    s.land(
        "customers/1.json",
        r#"{"customer_id": "A", "name": "Kim", "address": "Seoul", "membership_level": "gold", "updated_at": "2025-01-01T00:00:00Z"}
{"customer_id": "B", "name": "Lee", "address": "Daegu", "membership_level": "silver", "updated_at": "2025-02-01T00:00:00Z"}
{"customer_id": "A", "name": "Kim", "address": "Busan", "membership_level": "gold", "updated_at": "2025-06-01T00:00:00Z"}
"#,
    );
    s.land(
        "customers/2.json",
        r#"{"customer_id": "A", "name": "Kim Ann", "address": "Busan", "membership_level": "gold", "updated_at": "2025-07-01T00:00:00Z"}
{"customer_id": "A", "name": "Kim Ann", "address": "Busan", "membership_level": "platinum", "updated_at": "2025-10-01T00:00:00Z"}
"#,
    );
    let sql = dir.join("pipeline.sql");
    std::fs::write(
        &sql,
        r#"CREATE OR REFRESH STREAMING TABLE raw_customer_cdc
AS SELECT * FROM STREAM read_files('landing/customers', format => 'json', inferColumnTypes => true);

-- 대상 테이블 정의
CREATE OR REFRESH STREAMING TABLE customers;

-- CDC 적용 (SCD Type 1)
APPLY CHANGES INTO customers
FROM STREAM(raw_customer_cdc)
  KEYS (customer_id)
  SEQUENCE BY updated_at
  COLUMNS * EXCEPT (_rescued_data)
  STORED AS SCD TYPE 1;

-- 대상 테이블 정의
CREATE OR REFRESH STREAMING TABLE customers_history;

-- CDC 적용 (SCD Type 2)
APPLY CHANGES INTO customers_history
FROM STREAM(raw_customer_cdc)
  KEYS (customer_id)
  SEQUENCE BY updated_at
  COLUMNS * EXCEPT (_rescued_data)
  STORED AS SCD TYPE 2;

CREATE OR REFRESH STREAMING TABLE customers_tracked;
APPLY CHANGES INTO customers_tracked
FROM STREAM(raw_customer_cdc)
  KEYS (customer_id)
  SEQUENCE BY updated_at
  COLUMNS * EXCEPT (_rescued_data)
  STORED AS SCD TYPE 2
  TRACK HISTORY ON (address, membership_level);
"#,
    )
    .unwrap();
    common::ok(&run_config(&sql, &[]));

    let toml = dir.join("toml");
    std::fs::create_dir_all(&toml).unwrap();
    let config = toml.join("streams.toml");
    let cdc = |name: &str, scd: u8, extra: &str| {
        format!(
            "[[stream]]\nname = \"{name}\"\nsource = \"raw_customer_cdc\"\ntable = \"{name}\"\n\
             [stream.cdc]\nkeys = [\"customer_id\"]\nsequence_by = \"updated_at\"\n\
             except_column_list = [\"_rescued_data\"]\nstored_as_scd_type = {scd}\n{extra}\n"
        )
    };
    std::fs::write(
        &config,
        format!(
            "[[stream]]\nname = \"raw_customer_cdc\"\nsource = \"../landing/customers\"\n\
             table = \"raw_customer_cdc\"\n[stream.options]\n\"cloudFiles.format\" = \"json\"\n\
             \"cloudFiles.inferColumnTypes\" = true\n\n{}{}{}",
            cdc("customers", 1, ""),
            cdc("customers_history", 2, ""),
            cdc(
                "customers_tracked",
                2,
                "track_history_column_list = [\"address\", \"membership_level\"]"
            ),
        ),
    )
    .unwrap();
    common::ok(&run_config(&config, &[]));

    let rows = |table: &Path| common::table_rows(table, &["_metadata"]);
    for table in ["customers", "customers_history", "customers_tracked"] {
        assert_eq!(rows(&dir.join(table)), rows(&toml.join(table)), "{table}");
    }
    assert_eq!(
        rows(&dir.join("customers")).1.len(),
        2,
        "one row per customer"
    );
    let versions = |table: &str| {
        let batches = read_table(&dir.join(table));
        column_strings(&batches, "customer_id")
            .iter()
            .filter(|c| *c == "A")
            .count()
    };
    assert_eq!(
        versions("customers_history"),
        4,
        "every change of A opens a version"
    );
    assert_eq!(
        versions("customers_tracked"),
        3,
        "the name change alone opens none when only address and membership are tracked"
    );
    // 2025년 9월 기준 고객 A의 주소: the version open on 2025-09-01.
    let batches = read_table(&dir.join("customers_history"));
    let (ids, starts, ends, addresses) = (
        column_strings(&batches, "customer_id"),
        column_strings(&batches, "__START_AT"),
        column_strings(&batches, "__END_AT"),
        column_strings(&batches, "address"),
    );
    let at = "2025-09-01";
    let open: Vec<&String> = (0..ids.len())
        .filter(|&i| {
            ids[i] == "A"
                && starts[i].as_str() <= at
                && (ends[i] == "null" || ends[i].as_str() > at)
        })
        .map(|i| &addresses[i])
        .collect();
    assert_eq!(open, [&"Busan".to_string()]);
}
