//! `cloudFiles.format=avro` on the bundled fixtures (fixtures/avro-generate.py): the docs
//! command, a producer whose schema evolves over three files (a new column, then a widened
//! union: the table evolves and what does not fit is rescued), Spark's reading of logical
//! types and unions, and corrupt files named (or skipped under ignoreCorruptFiles).

use std::fs;

use crate::common::fixtures::{by_id, fixture, land_fixture};
use crate::common::{Run, Scratch, ok, read_table, read_with_python};

/// The docs' Avro command, as printed there, on fixtures/avro: three files of one
/// producer whose schema grew, read in one run; an outside reader sees every row.
#[test]
fn the_docs_avro_example_runs() {
    let block = crate::common::doc_block("docs/guide/formats.md", "## Avro", "sh");
    let s = Scratch::new();
    ok(&crate::common::run_doc_sh(&block, s.dir.path(), &[]));
    let table = s.dir.path().join("out/avro-orders");
    let ids: Vec<i64> = by_id(&table, "id").into_iter().map(|(i, _)| i).collect();
    assert_eq!(ids, (1..=7).collect::<Vec<_>>());
    let py = read_with_python(&table, "id");
    assert_eq!(py["num_rows"], 7, "{py}");
    assert_eq!(py["types"]["id"], "int64", "{py}");
    assert_eq!(py["types"]["name"], "string", "{py}");
}

/// File 1 {id, name}; file 2 adds `amount` [null, double]: the table gains a DOUBLE
/// column; file 3 widens `amount` to [null, double, string]: its values no longer fit a
/// DOUBLE, so they land in `_rescued_data` with the file's path, and nothing is lost.
#[test]
fn an_evolving_producer_adds_columns_and_rescues_a_widened_union() {
    let s = Scratch::new();
    land_fixture(&s, "avro/orders-1.avro");
    Run::ingest(&s, "file 1", &[]).ok();
    assert_eq!(
        by_id(&s.table(), "name"),
        vec![(1, "ada".into()), (2, "bob".into())]
    );
    land_fixture(&s, "avro/orders-2.avro");
    let run2 = Run::ingest(&s, "file 2", &[]);
    run2.ok();
    assert!(run2.stdout.contains("+amount DOUBLE"), "{}", run2.stdout);
    land_fixture(&s, "avro/orders-3.avro");
    Run::ingest(&s, "file 3", &[]).ok();
    let amounts = by_id(&s.table(), "amount");
    let rescued = by_id(&s.table(), "_rescued_data");
    assert_eq!(amounts.len(), 7);
    assert_eq!(amounts[2], (3, "9.5".into()));
    assert_eq!(amounts[3], (4, "null".into()));
    for (id, _) in &amounts[..4] {
        assert_eq!(rescued[*id as usize - 1].1, "null", "id {id}");
    }
    // File 3: amount is a struct of its branches now; not a DOUBLE, so it is rescued.
    assert_eq!(
        amounts[4..],
        [(5, "null".into()), (6, "null".into()), (7, "null".into())]
    );
    let r5 = &rescued[4].1;
    assert!(r5.contains(r#""amount":{"member0":2.25"#), "{r5}");
    assert!(r5.contains("orders-3.avro"), "{r5}");
    let r6 = &rescued[5].1;
    assert!(r6.contains(r#""member1":"n/a""#), "{r6}");
    assert_eq!(rescued[6].1, "null", "a null amount has nothing to rescue");
}

/// Files 2 and 3 in one run: `amount` [null, double] and [null, double, string] merge to
/// STRING, which can hold every value: a union's value lands as its branch's text (2.25,
/// n/a), as ORC's reader gives it, and nothing is rescued (issue 36.9).
#[test]
fn a_union_merged_to_string_lands_its_values_as_text() {
    let s = Scratch::new();
    land_fixture(&s, "avro/orders-2.avro");
    land_fixture(&s, "avro/orders-3.avro");
    let run = Run::ingest(&s, "files 2 and 3", &[]);
    run.ok();
    assert_eq!(run.figure("rescued rows"), 0, "{}", run.stdout);
    let amounts = by_id(&s.table(), "amount");
    assert_eq!(
        amounts,
        [
            (3, "9.5".into()),
            (4, "null".into()),
            (5, "2.25".into()),
            (6, "n/a".into()),
            (7, "null".into())
        ]
    );
    let py = read_with_python(&s.table(), "id");
    assert_eq!(py["types"]["amount"], "string", "{py}");
    assert!(
        by_id(&s.table(), "_rescued_data")
            .iter()
            .all(|(_, r)| r == "null")
    );
}

/// Logical types and unions as Spark reads them: decimal, date, timestamp-millis/micros
/// (UTC TIMESTAMP), uuid (STRING), a union without null (a struct of member0, member1), a
/// union with null and two more branches (a nullable struct), arrays and records.
#[test]
fn logical_types_and_unions_read_as_spark_does() {
    let s = Scratch::new();
    land_fixture(&s, "avro-types/types.avro");
    Run::ingest(&s, "types", &[]).ok();
    let t = s.table();
    let col = |c: &str| by_id(&t, c).into_iter().map(|(_, v)| v).collect::<Vec<_>>();
    assert_eq!(col("price"), ["12.34", "-0.05"]);
    assert_eq!(col("day"), ["2024-02-29", "1970-01-01"]);
    assert_eq!(
        col("at_ms"),
        ["2024-02-29T12:30:01.005Z", "1970-01-01T00:00:00Z"]
    );
    assert_eq!(
        col("at_us"),
        ["2024-02-29T12:30:01.123456Z", "1970-01-01T00:00:00Z"]
    );
    assert_eq!(
        col("uid"),
        [
            "12345678-1234-5678-1234-567812345678",
            "00000000-0000-0000-0000-000000000001"
        ]
    );
    assert_eq!(
        col("choice"),
        ["{member0: 7, member1: }", "{member0: , member1: seven}"]
    );
    assert_eq!(col("maybe"), ["null", "{member0: , member1: x}"]);
    assert_eq!(col("tags"), ["[a, b]", "[]"]);
    assert_eq!(
        col("address"),
        ["{city: Oslo, zip: 0150}", "{city: Rome, zip: }"]
    );
    assert_eq!(col("_rescued_data"), ["null", "null"]);
    let py = read_with_python(&t, "id");
    let types = &py["types"];
    assert_eq!(types["price"], "decimal128(9, 2)", "{py}");
    assert_eq!(types["day"], "date32[day]", "{py}");
    assert_eq!(types["at_ms"], "timestamp[us, tz=UTC]", "{py}");
    assert_eq!(types["uid"], "string", "{py}");
    assert_eq!(
        types["choice"], "struct<member0: int32, member1: string>",
        "{py}"
    );
}

/// A file that is not Avro, or whose block is cut short, stops the run naming it, with
/// nothing committed (the file stays unconsumed: a later run reads it again); under
/// ignoreCorruptFiles it is skipped and the good file lands.
#[test]
fn corrupt_avro_files_are_named_or_skipped() {
    let good = fs::read(fixture("avro/orders-1.avro")).unwrap();
    for (case, bad) in [
        ("not avro", b"Obj\x01 but not really an avro file".to_vec()),
        ("truncated", good[..good.len() - 20].to_vec()),
    ] {
        let s = Scratch::new();
        s.land("good.avro", &good);
        s.land("bad.avro", &bad);
        Run::ingest(&s, case, &["cloudFiles.schemaHints=id BIGINT, name STRING"])
            .fails_naming(&["bad.avro is corrupt", "Avro"]);
        let committed = if s.table().join("_delta_log").exists() {
            crate::common::row_count(&read_table(&s.table()))
        } else {
            0
        };
        assert_eq!(committed, 0, "{case}: nothing of the batch committed");
        // The file stays unconsumed: the same error again.
        Run::ingest(&s, case, &["cloudFiles.schemaHints=id BIGINT, name STRING"])
            .fails_naming(&["bad.avro is corrupt"]);
        let skip = Run::ingest(
            &s,
            case,
            &[
                "cloudFiles.schemaHints=id BIGINT, name STRING",
                "ignoreCorruptFiles=true",
            ],
        );
        skip.ok();
        assert_eq!(skip.figure("skipped files"), 1, "{case}");
        assert_eq!(
            by_id(&s.table(), "name"),
            vec![(1, "ada".into()), (2, "bob".into())],
            "{case}"
        );
    }
}

/// A union other than with null over more records than one batch, in several blocks (each
/// block gets a reader of its own: arrow-avro 59 miscounts a union's offsets after the
/// first batch of a reader): every record lands with its branch.
#[test]
fn unions_over_many_blocks_and_batches_are_read_whole() {
    let s = Scratch::new();
    land_fixture(&s, "avro-blocks/unions.avro");
    Run::ingest(&s, "unions", &[]).ok();
    let tags = by_id(&s.table(), "tag");
    assert_eq!(tags.len(), 10000);
    for (id, tag) in [
        (0, "null"),
        (1, "{member0: 1, member1: }"),
        (9998, "{member0: , member1: t9998}"),
    ] {
        assert_eq!(tags[id], (id as i64, tag.to_string()));
    }
    assert_eq!(tags.iter().filter(|(_, t)| t == "null").count(), 3334);
}

/// The three records of fixtures/avro-codecs/orders-CODEC.avro (two blocks of that codec)
/// land whole, with their types.
fn codec_fixture_ingests(codec: &'static str) {
    let s = Scratch::new();
    land_fixture(&s, &format!("avro-codecs/orders-{codec}.avro"));
    Run::ingest(&s, codec, &[]).ok();
    let t = s.table();
    assert_eq!(
        by_id(&t, "name"),
        vec![(1, codec.into()), (2, "b".into()), (3, "c".into())]
    );
    assert_eq!(
        by_id(&t, "amount"),
        vec![(1, "1.5".into()), (2, "null".into()), (3, "-2.0".into())]
    );
}

#[test]
fn snappy_avro_blocks_are_read() {
    codec_fixture_ingests("snappy");
}

#[test]
fn zstandard_avro_blocks_are_read() {
    codec_fixture_ingests("zstandard");
}

#[test]
fn bzip2_avro_blocks_are_read() {
    codec_fixture_ingests("bzip2");
}

#[test]
fn xz_avro_blocks_are_read() {
    codec_fixture_ingests("xz");
}
