//! `cloudFiles.format=orc` on the bundled fixtures (fixtures/orc-generate.py): the docs
//! command, a producer whose schema changes over three files (a new column, then a column
//! whose type changed: the table evolves and what does not fit is rescued), ORC's types as
//! Spark reads them, a hint over a file's type, rows over several stripes, and corrupt
//! files named (or skipped under ignoreCorruptFiles).

use std::fs;

use crate::common::fixtures::{by_id, fixture, land_fixture};
use crate::common::{Run, Scratch, ok, read_table, read_with_python};

/// The docs' ORC command, as printed there, on fixtures/orc: three files of one
/// producer (uncompressed, zlib, zstd) read in one run, the schema merged to the widest
/// (`amount` DOUBLE in one file, STRING in the other: STRING); an outside reader sees
/// every row with its type.
#[test]
fn the_docs_orc_example_runs() {
    let block = crate::common::doc_block("docs/guide/formats.md", "## ORC", "sh");
    let s = Scratch::new();
    ok(&crate::common::run_doc_sh(&block, s.dir.path(), &[]));
    let table = s.dir.path().join("out/orc-orders");
    let ids: Vec<i64> = by_id(&table, "id").into_iter().map(|(i, _)| i).collect();
    assert_eq!(ids, (1..=7).collect::<Vec<_>>());
    let amounts: Vec<String> = by_id(&table, "amount")
        .into_iter()
        .map(|(_, a)| a)
        .collect();
    assert_eq!(
        amounts,
        ["null", "null", "9.5", "null", "2.25", "n/a", "null"]
    );
    let py = read_with_python(&table, "id");
    assert_eq!(py["num_rows"], 7, "{py}");
    assert_eq!(py["types"]["id"], "int64", "{py}");
    assert_eq!(py["types"]["name"], "string", "{py}");
    assert_eq!(py["types"]["amount"], "string", "{py}");
}

/// File 1 {id, name}; file 2 adds `amount` DOUBLE: the table gains the column; file 3 has
/// `amount` as STRING: "2.25" still reads as a DOUBLE, "n/a" does not and lands in
/// `_rescued_data` with the file's path; nothing is lost.
#[test]
fn an_orc_producer_adds_a_column_then_a_changed_type_is_rescued() {
    let s = Scratch::new();
    land_fixture(&s, "orc/orders-1.orc");
    Run::ingest(&s, "file 1", &[]).ok();
    assert_eq!(
        by_id(&s.table(), "name"),
        vec![(1, "ada".into()), (2, "bob".into())]
    );
    land_fixture(&s, "orc/orders-2.orc");
    let run2 = Run::ingest(&s, "file 2", &[]);
    run2.ok();
    assert!(run2.stdout.contains("+amount DOUBLE"), "{}", run2.stdout);
    land_fixture(&s, "orc/orders-3.orc");
    Run::ingest(&s, "file 3", &[]).ok();
    let amounts = by_id(&s.table(), "amount");
    let rescued = by_id(&s.table(), "_rescued_data");
    assert_eq!(
        amounts,
        [
            (1, "null".into()),
            (2, "null".into()),
            (3, "9.5".into()),
            (4, "null".into()),
            (5, "2.25".into()),
            (6, "null".into()),
            (7, "null".into())
        ]
    );
    for (id, r) in &rescued {
        if *id != 6 {
            assert_eq!(r, "null", "id {id}");
        }
    }
    let r6 = &rescued[5].1;
    assert!(r6.contains(r#""amount":"n/a""#), "{r6}");
    assert!(r6.contains("orders-3.orc"), "{r6}");
    let py = read_with_python(&s.table(), "id");
    assert_eq!(py["types"]["amount"], "double", "{py}");
}

/// ORC's types as Spark reads them: the integer widths, float, boolean, decimal, date,
/// timestamp (a UTC TIMESTAMP), binary, list, struct and map; an outside reader agrees.
#[test]
fn orc_types_read_as_spark_does() {
    let s = Scratch::new();
    land_fixture(&s, "orc-types/types.orc");
    Run::ingest(&s, "types", &[]).ok();
    let t = s.table();
    let col = |c: &str| by_id(&t, c).into_iter().map(|(_, v)| v).collect::<Vec<_>>();
    assert_eq!(col("tiny"), ["-8", "7"]);
    assert_eq!(col("small"), ["-300", "300"]);
    assert_eq!(col("num"), ["-70000", "70000"]);
    assert_eq!(col("ratio"), ["0.5", "-1.25"]);
    assert_eq!(col("flag"), ["true", "null"]);
    assert_eq!(col("price"), ["12.34", "-0.05"]);
    assert_eq!(col("day"), ["2024-02-29", "1970-01-01"]);
    assert_eq!(
        col("at"),
        ["2024-02-29T12:30:01.123456Z", "1970-01-01T00:00:00Z"]
    );
    assert_eq!(col("tags"), ["[a, b]", "[]"]);
    assert_eq!(
        col("address"),
        ["{city: Oslo, zip: 0150}", "{city: Rome, zip: }"]
    );
    assert_eq!(col("attrs"), ["{k: 1}", "{}"]);
    assert_eq!(col("_rescued_data"), ["null", "null"]);
    let py = read_with_python(&t, "id");
    let types = &py["types"];
    assert_eq!(types["tiny"], "int8", "{py}");
    assert_eq!(types["small"], "int16", "{py}");
    assert_eq!(types["num"], "int32", "{py}");
    assert_eq!(types["ratio"], "float", "{py}");
    assert_eq!(types["flag"], "bool", "{py}");
    assert_eq!(types["price"], "decimal128(9, 2)", "{py}");
    assert_eq!(types["day"], "date32[day]", "{py}");
    assert_eq!(types["at"], "timestamp[us, tz=UTC]", "{py}");
    assert_eq!(types["blob"], "binary", "{py}");
    assert_eq!(types["tags"], "list<element: string>", "{py}");
}

/// A file that is not ORC, cut short, or with a broken stripe or footer stops the run
/// naming it (never a panic), with nothing committed (the file stays unconsumed: a later
/// run reads it again); under ignoreCorruptFiles it is skipped and the good file lands.
#[test]
fn corrupt_orc_files_are_named_or_skipped() {
    let good = fs::read(fixture("orc/orders-1.orc")).unwrap();
    // orders-2.orc's stripe is zlib chunks: bytes 60..100 are in its data streams, 60..200
    // reach the file's footer (orc-rust 0.9 panics on both: the panic is caught).
    let zlib = fs::read(fixture("orc/orders-2.orc")).unwrap();
    let scrambled = |range: std::ops::Range<usize>| {
        let mut b = zlib.clone();
        b[range].fill(0xff);
        b
    };
    for (case, bad) in [
        ("not orc", b"ORC but not really an orc file".to_vec()),
        ("truncated", good[..good.len() - 20].to_vec()),
        ("broken stripe", scrambled(60..100)),
        ("broken footer", scrambled(60..200)),
    ] {
        let s = Scratch::new();
        s.land("good.orc", &good);
        s.land("bad.orc", &bad);
        let hints = "cloudFiles.schemaHints=id BIGINT, name STRING";
        let failed = Run::ingest(&s, case, &[hints]);
        failed.fails_naming(&["bad.orc is corrupt", "ORC"]);
        assert!(!failed.stderr.contains("panicked"), "{}", failed.stderr);
        let committed = if s.table().join("_delta_log").exists() {
            crate::common::row_count(&read_table(&s.table()))
        } else {
            0
        };
        assert_eq!(committed, 0, "{case}: nothing of the batch committed");
        Run::ingest(&s, case, &[hints]).fails_naming(&["bad.orc is corrupt"]);
        let skip = Run::ingest(&s, case, &[hints, "ignoreCorruptFiles=true"]);
        skip.ok();
        assert_eq!(skip.figure("skipped files"), 1, "{case}");
        assert_eq!(
            by_id(&s.table(), "name"),
            vec![(1, "ada".into()), (2, "bob".into())],
            "{case}"
        );
    }
}

/// 20000 rows in two lz4 stripes, more than one batch each way: every row lands once,
/// nulls where the file has them.
#[test]
fn orc_rows_over_several_stripes_and_batches_land_whole() {
    let s = Scratch::new();
    land_fixture(&s, "orc-stripes/many.orc");
    Run::ingest(&s, "stripes", &[]).ok();
    let tags = by_id(&s.table(), "tag");
    assert_eq!(tags.len(), 20000);
    for (i, (id, _)) in tags.iter().enumerate() {
        assert_eq!(*id, i as i64);
    }
    assert_eq!(tags[0].1, "null");
    assert_eq!(tags[19999].1, "t19999");
    assert_eq!(tags.iter().filter(|(_, t)| t == "null").count(), 6667);
}

/// A schema hint sets a column's type over the files' own: `amount STRING` reads file 2's
/// DOUBLEs and file 3's strings alike, with nothing rescued.
#[test]
fn an_orc_schema_hint_overrides_the_file_type() {
    let s = Scratch::new();
    land_fixture(&s, "orc/orders-2.orc");
    land_fixture(&s, "orc/orders-3.orc");
    Run::ingest(&s, "hint", &["cloudFiles.schemaHints=amount STRING"]).ok();
    let amounts: Vec<String> = by_id(&s.table(), "amount")
        .into_iter()
        .map(|(_, a)| a)
        .collect();
    assert_eq!(amounts, ["9.5", "null", "2.25", "n/a", "null"]);
    let rescued = by_id(&s.table(), "_rescued_data");
    assert!(rescued.iter().all(|(_, r)| r == "null"), "{rescued:?}");
    let py = read_with_python(&s.table(), "id");
    assert_eq!(py["types"]["amount"], "string", "{py}");
}
