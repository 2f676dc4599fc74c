//! `autoloader run CONFIG.toml`: many streams in one process.

use crate::common::{self, Scratch, column_strings, read_table};

#[test]
fn three_streams_two_into_one_table_all_land_exactly_once() {
    let s = Scratch::new();
    let dir = s.dir.path();
    for (name, from) in [("a", 0), ("b", 100), ("c", 200)] {
        let folder = dir.join("land").join(name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("1.json"), common::orders_jsonl(from, from + 10)).unwrap();
        std::fs::write(
            folder.join("2.json"),
            common::orders_jsonl(from + 10, from + 20),
        )
        .unwrap();
    }
    let config = dir.join("streams.toml");
    std::fs::write(
        &config,
        r#"
[defaults.options]
"cloudFiles.inferColumnTypes" = true
"cloudFiles.maxFilesPerTrigger" = 1

[[stream]]
name = "a"
source = "land/a"
table = "bronze/shared"

[[stream]]
name = "b"
source = "land/b"
table = "bronze/shared"

[[stream]]
name = "c"
source = "land/c"
table = "bronze/c"
"#,
    )
    .unwrap();
    let out = common::run(
        &["run".into(), config.display().to_string(), "--once".into()],
        &[],
    );
    let stdout = common::ok(&out);
    for name in ["a", "b", "c"] {
        assert!(
            stdout.contains(&format!("[{name}] ingested 2 files, 20 rows")),
            "{stdout}"
        );
    }
    let shared = dir.join("bronze/shared");
    let mut ids: Vec<u64> = column_strings(&read_table(&shared), "order_id")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..20).chain(100..120).collect::<Vec<_>>());
    let (_, txns) = common::table_version_and_txns(&shared);
    assert_eq!(txns.len(), 2, "each stream appends under its own app id");
    assert!(txns.values().all(|v| *v == 1), "{txns:?}");
    assert_eq!(common::row_count(&read_table(&dir.join("bronze/c"))), 20);
    // A rerun adds nothing; a new file lands in one stream only.
    std::fs::write(dir.join("land/b/3.json"), common::orders_jsonl(120, 125)).unwrap();
    let stdout = common::ok(&common::run(
        &["run".into(), config.display().to_string(), "--once".into()],
        &[],
    ));
    assert!(
        stdout.contains("[a] ingested 0 files") && stdout.contains("[b] ingested 1 file, 5 rows"),
        "{stdout}"
    );
    assert_eq!(common::row_count(&read_table(&shared)), 45);
}

#[test]
fn a_bad_config_is_refused_naming_the_line() {
    let s = Scratch::new();
    let config = s.dir.path().join("bad.toml");
    std::fs::write(
        &config,
        "[[stream]]\nname = \"a\"\nsource = \"x\"\ntable = \n",
    )
    .unwrap();
    let out = common::run(
        &["run".into(), config.display().to_string(), "--once".into()],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out).contains("line 4"),
        "{}",
        common::stderr(&out)
    );
}

/// The README's two-stream example: a JSON stream (amount BIGINT) and a CSV stream (amount
/// INT on its own) append into one table. They share the table's schema: the CSV stream
/// reads `amount` as the table's BIGINT, a column both add later lands once, with one type,
/// and a type a stream pins against the table is a one-line error (exit 2).
#[test]
fn streams_into_one_table_share_its_schema() {
    let s = Scratch::new();
    let dir = s.dir.path();
    let app = dir.join("landing/app/orders");
    let partner = dir.join("landing/partner/orders");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::create_dir_all(&partner).unwrap();
    std::fs::write(app.join("1.json"), common::orders_jsonl(1, 4)).unwrap();
    std::fs::write(
        partner.join("1.csv"),
        "order_id,amount,channel\n100,7,web\n101,8,shop\n",
    )
    .unwrap();
    let config = readme_streams_toml(dir);
    let run = |extra: &[&str]| {
        let mut args: Vec<String> =
            vec!["run".into(), config.display().to_string(), "--once".into()];
        args.extend(extra.iter().map(|e| (*e).to_string()));
        common::run(&args, &[])
    };
    // Both start at once on a table not created yet: the first declared creates it, so
    // its types never depend on which stream was faster.
    common::ok(&run(&[]));
    let table = dir.join("bronze/orders");
    let batches = read_table(&table);
    let schema = batches[0].schema();
    assert_eq!(
        schema.field_with_name("amount").unwrap().data_type(),
        &arrow_schema::DataType::Int64,
        "the CSV stream reads amount as the table's BIGINT"
    );
    let amounts = column_strings(&batches, "amount");
    assert!(
        amounts.contains(&"7".to_string()) && amounts.contains(&"1001".to_string()),
        "{amounts:?}"
    );
    assert!(
        column_strings(&batches, "_rescued_data")
            .iter()
            .all(|r| r == "null"),
        "nothing rescued"
    );
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names.last(), Some(&"_metadata"), "{names:?}");

    // Both streams add `discount` at once: it lands with one type, every value kept.
    std::fs::write(
        app.join("2.json"),
        "{\"order_id\": 4, \"amount\": 5, \"discount\": 3}\n",
    )
    .unwrap();
    std::fs::write(
        partner.join("2.csv"),
        "order_id,amount,channel,discount\n102,9,web,4\n",
    )
    .unwrap();
    common::ok(&run(&[]));
    let batches = read_table(&table);
    let mut discounts: Vec<String> = column_strings(&batches, "discount")
        .into_iter()
        .filter(|d| d != "null")
        .collect();
    discounts.sort();
    assert_eq!(discounts, ["3", "4"]);
    let names: Vec<String> = batches[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(
        names.last().map(String::as_str),
        Some("_metadata"),
        "{names:?}"
    );
    common::assert_table_ids_once(&table, (1..5).chain(100..103), "both streams, once");

    // A new stream that pins `amount` as STRING clashes with the table: one line, exit 2.
    let third = dir.join("landing/third");
    std::fs::create_dir_all(&third).unwrap();
    std::fs::write(third.join("1.csv"), "order_id,amount\n200,x\n").unwrap();
    let out = common::run(
        &[
            "ingest".into(),
            third.display().to_string(),
            table.display().to_string(),
            "--once".into(),
            "--name".into(),
            "third".into(),
            "--checkpoint".into(),
            dir.join("third_ckpt").display().to_string(),
            "-o".into(),
            "cloudFiles.schemaHints=amount STRING".into(),
        ],
        &[],
    );
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("column amount"))
        .unwrap_or_else(|| panic!("{err}"));
    for needle in ["stream third", "STRING", "BIGINT", "hints"] {
        assert!(line.contains(needle), "{line}");
    }
}

/// A stream whose stored schema has a column the table holds with another type (a schema
/// location reused from another table) gets a version with the table's types, and lands.
#[test]
fn a_stored_schema_is_brought_to_the_tables_types() {
    let s = Scratch::new();
    let dir = s.dir.path();
    s.land("a.json", common::orders_jsonl(1, 3));
    common::ok(&s.ingest(&["cloudFiles.inferColumnTypes=true"]));
    let csv = dir.join("csv");
    std::fs::create_dir_all(&csv).unwrap();
    std::fs::write(csv.join("1.csv"), "order_id,amount\n10,5\n").unwrap();
    let schemas = dir.join("schemas");
    let ingest = |table: &std::path::Path, checkpoint: &str| {
        common::run(
            &[
                "ingest".into(),
                csv.display().to_string(),
                table.display().to_string(),
                "--once".into(),
                "--checkpoint".into(),
                dir.join(checkpoint).display().to_string(),
                "-o".into(),
                format!("cloudFiles.schemaLocation={}", schemas.display()),
                "-o".into(),
                "cloudFiles.inferColumnTypes=true".into(),
            ],
            &[],
        )
    };
    common::ok(&ingest(&dir.join("scratch_table"), "c1"));
    let stored = std::fs::read_to_string(schemas.join("_schemas/0")).unwrap();
    assert!(
        stored.contains("integer"),
        "the CSV alone infers INT: {stored}"
    );
    common::ok(&ingest(&s.table(), "c2"));
    let v1 = std::fs::read_to_string(schemas.join("_schemas/1")).unwrap();
    assert!(v1.contains("long") && !v1.contains("integer"), "{v1}");
    assert!(v1.contains("table types"), "{v1}");
    s.assert_ids_once([1, 2, 10], "both landed");
}

/// `run` exits with its streams' code, as `ingest` does (README: the same from both): a
/// stream stopped by `cloudFiles.stopOnSchemaChange` is 3, a stream whose hint clashes with
/// the table is 2. Both were 1. Streams failing in different ways are 1.
#[test]
fn run_exits_with_its_failed_streams_code() {
    let s = Scratch::new();
    let dir = s.dir.path();
    let land = |name: &str, file: &str, text: &str| {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join(file), text).unwrap();
    };
    land("a", "1.json", "{\"id\": 1}\n");
    land("b", "1.json", "{\"id\": 1}\n");
    let config = dir.join("streams.toml");
    std::fs::write(
        &config,
        r#"
[[stream]]
name = "a"
source = "a"
table = "ta"
[stream.options]
"cloudFiles.stopOnSchemaChange" = true

[[stream]]
name = "b"
source = "b"
table = "ta"
"#,
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let mut args: Vec<String> =
            vec!["run".into(), config.display().to_string(), "--once".into()];
        args.extend(extra.iter().map(|e| (*e).to_string()));
        common::run(&args, &[])
    };
    common::ok(&run(&[]));
    land("a", "2.json", "{\"id\": 2, \"extra\": 1}\n");
    let out = run(&["--stream", "a"]);
    assert_eq!(out.status.code(), Some(3), "{}", common::stderr(&out));
    common::ok(&run(&["--stream", "a"]));

    // Stream b now pins `id` against the table's STRING: exit 2, alone or with a.
    let text = std::fs::read_to_string(&config).unwrap()
        + "[stream.options]\n\"cloudFiles.schemaHints\" = \"id BIGINT\"\n";
    std::fs::write(&config, text).unwrap();
    land("b", "2.json", "{\"id\": 3}\n");
    let out = run(&["--stream", "b"]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    land("a", "3.json", "{\"id\": 4, \"more\": 1}\n");
    let out = run(&[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a: 3, b: 2: {}",
        common::stderr(&out)
    );
}

/// A webhook of the config file that is refused is named with the file and its stream, as
/// a bad option is (it was named alone); one from the command line is not blamed on it.
#[test]
fn a_refused_webhook_of_the_file_names_the_file_and_stream() {
    let s = Scratch::new();
    let dir = s.dir.path();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let config = dir.join("streams.toml");
    std::fs::write(
        &config,
        "[[stream]]\nname = \"orders\"\nsource = \"src\"\ntable = \"t\"\n\
         alert_webhooks = [\"http://169.254.169.254/hook\"]\n",
    )
    .unwrap();
    let path = config.display().to_string();
    let out = common::run(&["run".into(), path.clone(), "--check".into()], &[]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&path) && err.contains("stream \"orders\"") && err.contains("169.254"),
        "{err}"
    );
    std::fs::write(
        &config,
        "[[stream]]\nname = \"orders\"\nsource = \"src\"\ntable = \"t\"\n",
    )
    .unwrap();
    let out = common::run(
        &[
            "run".into(),
            path.clone(),
            "--check".into(),
            "--alert-webhook".into(),
            "http://169.254.169.254/hook".into(),
        ],
        &[],
    );
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("stream \"orders\""), "{err}");
}

/// The README's two-stream example on the bundled fixtures, both streams starting at once
/// on a table not created yet: the first declared creates it, so the table's types are the
/// JSON stream's every time and nothing of it is rescued (when the CSV stream won the race,
/// every JSON row was rescued for its phone and amount). Repeated: a race shows in some runs.
#[test]
fn the_first_declared_stream_creates_a_shared_table() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/orders");
    for attempt in 0..8 {
        let s = Scratch::new();
        let dir = s.dir.path();
        for (from, to) in [
            ("json", "landing/app/orders"),
            ("csv", "landing/partner/orders"),
        ] {
            let target = dir.join(to);
            std::fs::create_dir_all(&target).unwrap();
            for f in std::fs::read_dir(fixtures.join(from)).unwrap() {
                let f = f.unwrap().path();
                std::fs::copy(&f, target.join(f.file_name().unwrap())).unwrap();
            }
        }
        let config = readme_streams_toml(dir);
        let out = common::run(
            &[
                "run".into(),
                config.display().to_string(),
                "--once".into(),
                "--json".into(),
            ],
            &[],
        );
        let stdout = common::ok(&out);
        for line in stdout.lines() {
            let report: serde_json::Value = serde_json::from_str(line).unwrap();
            if report["stream"] == "orders_app" {
                assert_eq!(report["rescuedRows"], 0, "attempt {attempt}: {line}");
            }
        }
        let batches = read_table(&dir.join("bronze/orders"));
        assert_eq!(
            batches[0]
                .schema()
                .field_with_name("amount")
                .unwrap()
                .data_type(),
            &arrow_schema::DataType::Int64,
            "attempt {attempt}"
        );
    }
}

/// The README's (and the config guide's) two-stream `streams.toml` (a JSON and a CSV stream into `bronze/orders`),
/// written into `dir`.
fn readme_streams_toml(dir: &std::path::Path) -> std::path::PathBuf {
    let block = common::doc_block("README.md", "## Many streams from one file", "toml");
    // The config files guide opens with the same file.
    assert_eq!(
        block,
        common::doc_block(
            "docs/guide/streams-toml.md",
            "# Many streams from one file",
            "toml"
        )
    );
    let config = dir.join("streams.toml");
    std::fs::write(&config, block).unwrap();
    config
}

/// A config is checked whole before anything runs: a flow whose `where` names an unknown
/// column, or compares one with a literal of another type, stops the run with exit 2
/// naming the flow, the column and the position, and no stream wrote a table, checkpoint
/// or `_schemas/0` (issue 36.5).
#[test]
fn a_bad_flow_in_a_config_stops_the_run_before_any_stream_writes() {
    for (condition, needles) in [
        ("nosuch > 1", ["nosuch", "column 1"]),
        ("user_id > 5", ["user_id", "column 11"]),
    ] {
        let s = Scratch::new();
        let dir = s.dir.path();
        for name in ["good", "bad"] {
            let folder = dir.join("land").join(name);
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join("1.json"), common::orders_jsonl(0, 10)).unwrap();
        }
        let config = dir.join("streams.toml");
        std::fs::write(
            &config,
            format!(
                r#"
[defaults.options]
"cloudFiles.inferColumnTypes" = true

[[stream]]
name = "good"
source = "land/good"
table = "bronze/good"

[[stream]]
name = "bad"
source = "land/bad"
table = "bronze/bad"
where = "{condition}"
"#
            ),
        )
        .unwrap();
        let out = common::run(
            &["run".into(), config.display().to_string(), "--once".into()],
            &[],
        );
        let err = common::stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{condition}: {err}");
        assert!(err.contains("stream \"bad\""), "{condition}: {err}");
        for n in needles {
            assert!(err.contains(n), "{condition}: names {n}: {err}");
        }
        assert!(
            !dir.join("bronze").exists(),
            "{condition}: nothing written: {:?}",
            std::fs::read_dir(dir.join("bronze"))
                .map(|d| d.map(|e| e.unwrap().path()).collect::<Vec<_>>())
        );
    }
}
