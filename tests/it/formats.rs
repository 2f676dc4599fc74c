//! Compressions beside gzip (zstd, bzip2, lz4 frames, told by their magic bytes), the
//! `text` format and the `binaryFile` format, run on the real binary and read back with
//! delta-rs and Python `deltalake`.

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::common::rows::table_rows;
use crate::common::{Run, Scratch, column_strings, ok, orders_jsonl, read_table, read_with_python};

fn zstd_of(data: &[u8]) -> Vec<u8> {
    zstd::stream::encode_all(data, 3).unwrap()
}

fn bzip2_of(data: &[u8]) -> Vec<u8> {
    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn lz4_of(data: &[u8]) -> Vec<u8> {
    let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn gzip_of(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Compresses a whole file's bytes.
type Encoder = fn(&[u8]) -> Vec<u8>;

/// Each compression with its suffix and encoder.
const COMPRESSIONS: [(&str, Encoder); 4] = [
    ("gz", gzip_of),
    ("zst", zstd_of),
    ("bz2", bzip2_of),
    ("lz4", lz4_of),
];

/// Every column of the table as text, rows sorted (the `_metadata` lineage left out).
fn sorted_rows(table: &Path, columns: &[&str]) -> Vec<String> {
    let batches = read_table(table);
    let cols: Vec<Vec<String>> = columns
        .iter()
        .map(|c| column_strings(&batches, c))
        .collect();
    let mut rows: Vec<String> = (0..cols[0].len())
        .map(|i| {
            cols.iter()
                .map(|c| c[i].as_str())
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    rows.sort();
    rows
}

/// JSON lines and CSV, each compressed with zstd, bzip2 and lz4 (and gzip), ingest to the
/// same rows as the plain file; so do concatenated frames (as `cat a.zst b.zst` makes).
#[test]
fn each_compression_reads_as_the_plain_file() {
    let json = orders_jsonl(1, 301);
    let csv: String = std::iter::once("id,name,amount\n".to_string())
        .chain((1..=300).map(|i| format!("{i},name {i},{}.5\n", i * 3)))
        .collect();
    for (format, plain, name, columns) in [
        (
            "json",
            json.as_bytes(),
            "orders.json",
            &["order_id", "amount"][..],
        ),
        (
            "csv",
            csv.as_bytes(),
            "orders.csv",
            &["id", "name", "amount"][..],
        ),
    ] {
        let p = Scratch::new();
        p.land(name, plain);
        let opt = format!("cloudFiles.format={format}");
        Run::ingest(&p, "plain", &[&opt]).ok();
        let expected = sorted_rows(&p.table(), columns);
        assert_eq!(expected.len(), 300);
        for (suffix, encode) in COMPRESSIONS {
            let s = Scratch::new();
            s.land(&format!("{name}.{suffix}"), encode(plain));
            Run::ingest(&s, "compressed", &[&opt]).ok();
            assert_eq!(
                sorted_rows(&s.table(), columns),
                expected,
                "{format} .{suffix} reads as the plain file"
            );
            // Two frames or members, one after the other, are both read.
            let (a, b) = plain.split_at(plain.len() / 2);
            let mut both = encode(a);
            both.extend(encode(b));
            let c = Scratch::new();
            c.land(&format!("{name}.{suffix}"), both);
            Run::ingest(&c, "concatenated frames", &[&opt]).ok();
            assert_eq!(
                sorted_rows(&c.table(), columns),
                expected,
                "{format} .{suffix} concatenated frames"
            );
        }
    }
}

/// The magic bytes decide, not the name: zstd bytes named `.json`, lz4 named `.csv` and
/// bzip2 with no suffix at all are decompressed.
#[test]
fn compression_is_told_by_magic_bytes_not_the_name() {
    let json = orders_jsonl(0, 50);
    let s = Scratch::new();
    s.land("a.json", zstd_of(json.as_bytes()));
    Run::ingest(&s, "zstd named .json", &[]).ok();
    assert_eq!(table_rows(&s), 50);
    let c = Scratch::new();
    c.land("b.csv", lz4_of(b"id,name\n1,x\n2,y\n"));
    c.land("c", bzip2_of(b"id,name\n3,z\n"));
    Run::ingest(&c, "lz4 named .csv", &["cloudFiles.format=csv"]).ok();
    assert_eq!(
        sorted_rows(&c.table(), &["id", "name"]),
        vec!["1|x", "2|y", "3|z"]
    );
}

/// A truncated or corrupt compressed file stops the batch naming the file and what is
/// wrong, nothing committed; with ignoreCorruptFiles the rest lands. A file named `.zst`
/// that is not zstd is refused rather than read as plain text.
#[test]
fn truncated_or_corrupt_compressed_files_are_named() {
    let lines: String = (0..5000).map(|i| format!("{{\"id\": {i}}}\n")).collect();
    for (suffix, encode) in &COMPRESSIONS[1..] {
        let whole = encode(lines.as_bytes());
        let name = format!("cut.json.{suffix}");
        let s = Scratch::new();
        s.land(&name, &whole[..whole.len() / 2]);
        s.land("ok.json", "{\"id\": \"ok\"}\n");
        Run::ingest(&s, "truncated", &[]).fails_naming(&[&format!("{name} is corrupt")]);
        assert_eq!(table_rows(&s), 0, "nothing of the batch is committed");
        Run::ingest(&s, "truncated, skipped", &["ignoreCorruptFiles=true"]).ok();
        assert_eq!(column_strings(&read_table(&s.table()), "id"), vec!["ok"]);

        // The magic bytes, then garbage.
        let mut bad = whole[..4].to_vec();
        bad.extend_from_slice(&[0xff; 64]);
        let name = format!("bad.json.{suffix}");
        let b = Scratch::new();
        b.land(&name, bad);
        Run::ingest(&b, "corrupt", &[]).fails_naming(&[&format!("{name} is corrupt")]);
        assert_eq!(table_rows(&b), 0);
    }
    let s = Scratch::new();
    s.land("plain.json.zst", "{\"id\": 1}\n");
    Run::ingest(&s, ".zst name, plain data", &[])
        .fails_naming(&["plain.json.zst", "named .zst but not zstd data"]);
}

/// A decompression bomb (short lines, 3.6 MB from a few KB) stops at
/// `cloudFiles.maxDecompressedBytes`, naming the file, for each compression; nothing is
/// committed and the file stays unconsumed (a rerun with a higher limit ingests it).
#[test]
fn max_decompressed_bytes_stops_a_bomb() {
    let lines = "{\"id\": \"x\"}\n".repeat(300_000);
    for (suffix, encode) in &COMPRESSIONS[1..] {
        let s = Scratch::new();
        let name = format!("bomb.json.{suffix}");
        s.land(&name, encode(lines.as_bytes()));
        assert!(fs::metadata(s.landing().join(&name)).unwrap().len() < 200_000);
        Run::ingest(&s, "bomb", &["cloudFiles.maxDecompressedBytes=1m"])
            .fails_naming(&[&name, "cloudFiles.maxDecompressedBytes (1048576 bytes)"]);
        assert_eq!(table_rows(&s), 0);
        Run::ingest(
            &s,
            "genuine after all",
            &["cloudFiles.maxDecompressedBytes=8m"],
        )
        .ok();
        assert_eq!(table_rows(&s), 300_000);
    }
}

// ---------------------------------------------------------------- text

/// One row per line in `value`, blank lines kept, `\r\n` ends a line, compressed files
/// read; the table has `value STRING` and `_metadata` only (no rescued data: the schema is
/// fixed), as Python `deltalake` reads it.
#[test]
fn text_is_one_row_per_line() {
    let s = Scratch::new();
    s.land("a.log", "first\r\n\nthird ✓\nlast");
    s.land("b.log.bz2", bzip2_of(b"from bzip2\n"));
    // Text that starts as bzip2 does ("BZh" and a digit) is still text.
    s.land("c.log", "BZh91 starts like bzip2\n");
    Run::ingest(&s, "text", &["cloudFiles.format=text"]).ok();
    let py = read_with_python(&s.table(), "value");
    assert_eq!(py["types"]["value"], "string", "{py}");
    let names: Vec<&String> = py["types"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["value", "_metadata"], "{py}");
    let values: Vec<&str> = py["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"].as_str().unwrap())
        .collect();
    assert_eq!(
        values,
        [
            "",
            "BZh91 starts like bzip2",
            "first",
            "from bzip2",
            "last",
            "third ✓"
        ]
    );
    let b = py["rows"][3]["_metadata"]["file_name"].as_str().unwrap();
    assert_eq!(b, "b.log.bz2");
}

/// `lineSep` splits on any string (nothing else removed); `wholetext=true` is one row per
/// file, line breaks kept; an empty file is no row either way.
#[test]
fn text_line_sep_and_wholetext() {
    let s = Scratch::new();
    s.land("a.txt", "x||y\r\n||z");
    s.land("empty.txt", "");
    Run::ingest(&s, "lineSep", &["cloudFiles.format=text", "lineSep=||"]).ok();
    assert_eq!(sorted_rows(&s.table(), &["value"]), vec!["x", "y\r\n", "z"]);
    let w = Scratch::new();
    w.land("a.txt", "one\ntwo\n");
    w.land("b.txt.lz4", lz4_of(b"three"));
    w.land("empty.txt", "");
    Run::ingest(
        &w,
        "wholetext",
        &["cloudFiles.format=text", "wholetext=true"],
    )
    .ok();
    assert_eq!(
        sorted_rows(&w.table(), &["value"]),
        vec!["one\ntwo\n", "three"]
    );
}

/// What the text format refuses, naming file and line: a line that is not UTF-8, a line
/// (or whole file) over `cloudFiles.maxRecordBytes`; and the options of a fixed schema.
#[test]
fn text_bad_inputs_are_named() {
    let s = Scratch::new();
    s.land("a.txt", b"ok\nbad \xff byte\n");
    Run::ingest(&s, "not UTF-8", &["cloudFiles.format=text"])
        .fails_naming(&["a.txt is corrupt at line 2", "UTF-8"]);
    assert_eq!(table_rows(&s), 0);
    let l = Scratch::new();
    l.land("long.txt", format!("short\n{}\n", "x".repeat(5000)));
    Run::ingest(
        &l,
        "long line",
        &["cloudFiles.format=text", "cloudFiles.maxRecordBytes=1k"],
    )
    .fails_naming(&["long.txt line 2", "cloudFiles.maxRecordBytes"]);
    Run::ingest(
        &l,
        "long file",
        &[
            "cloudFiles.format=text",
            "wholetext=true",
            "cloudFiles.maxRecordBytes=1k",
        ],
    )
    .fails_naming(&["long.txt line 1", "cloudFiles.maxRecordBytes"]);
    let out = l.ingest(&["cloudFiles.format=text", "cloudFiles.schemaHints=value INT"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("fixed schema (value STRING)"),
        "{out:?}"
    );
}

// ---------------------------------------------------------------- binaryFile

/// One row per file: path, modificationTime, length and content, as Spark's binaryFile
/// source gives them and Python `deltalake` reads them; the content is the file's bytes
/// as they are (a compressed file is not decompressed); `pathGlobFilter` chooses files.
#[test]
fn binary_file_is_one_row_per_file() {
    let s = Scratch::new();
    let zst = zstd_of(b"stays compressed");
    s.land("a.bin", [0u8, 1, 2, 255]);
    s.land("b.bin", &zst);
    s.land("skip.txt", "left out");
    Run::ingest(
        &s,
        "binaryFile",
        &["cloudFiles.format=binaryFile", "pathGlobFilter=*.bin"],
    )
    .ok();
    let py = read_with_python(&s.table(), "path");
    let types = &py["types"];
    assert_eq!(types["path"], "string", "{py}");
    assert_eq!(types["modificationTime"], "timestamp[us, tz=UTC]", "{py}");
    assert_eq!(types["length"], "int64", "{py}");
    assert_eq!(types["content"], "binary", "{py}");
    let names: Vec<&String> = types.as_object().unwrap().keys().collect();
    assert_eq!(
        names,
        ["path", "modificationTime", "length", "content", "_metadata"]
    );
    let rows = py["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{py}");
    assert!(rows[0]["path"].as_str().unwrap().ends_with("/a.bin"));
    assert_eq!(rows[0]["length"], 4);
    assert_eq!(rows[1]["length"], zst.len());
    // delta-rs reads the exact bytes back.
    let batches = read_table(&s.table());
    let mut contents: Vec<Vec<u8>> = Vec::new();
    for b in &batches {
        let c = b
            .column_by_name("content")
            .unwrap()
            .as_any()
            .downcast_ref::<arrow_array::BinaryArray>()
            .unwrap();
        contents.extend(c.iter().map(|v| v.unwrap().to_vec()));
    }
    contents.sort();
    let mut expected = vec![vec![0u8, 1, 2, 255], zst];
    expected.sort();
    assert_eq!(contents, expected);
    let mtime = fs::metadata(s.landing().join("a.bin"))
        .unwrap()
        .modified()
        .unwrap();
    let secs = mtime
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let shown = rows[0]["modificationTime"].as_str().unwrap();
    let year = chrono::DateTime::from_timestamp(i64::try_from(secs).unwrap(), 0)
        .unwrap()
        .format("%Y-%m-%d %H:%M:%S")
        .to_string();
    assert!(shown.starts_with(&year), "{shown} vs {year}");
}

/// A file over `cloudFiles.maxRecordBytes` stops the batch naming it (nothing committed,
/// the file unconsumed); raising the limit ingests it; `schema` is refused.
#[test]
fn binary_file_over_the_limit_stops_naming_it() {
    let s = Scratch::new();
    s.land("small.bin", "tiny");
    s.land("big.bin", vec![7u8; 10_000]);
    Run::ingest(
        &s,
        "too big",
        &[
            "cloudFiles.format=binaryFile",
            "cloudFiles.maxRecordBytes=4k",
        ],
    )
    .fails_naming(&["big.bin", "cloudFiles.maxRecordBytes (4096 bytes)"]);
    assert_eq!(table_rows(&s), 0);
    Run::ingest(
        &s,
        "raised",
        &[
            "cloudFiles.format=binaryFile",
            "cloudFiles.maxRecordBytes=16k",
        ],
    )
    .ok();
    assert_eq!(sorted_rows(&s.table(), &["length"]), vec!["10000", "4"]);
    // Skipped as a corrupt file when asked, and the rest lands.
    let k = Scratch::new();
    k.land("small.bin", "tiny");
    k.land("big.bin", vec![7u8; 10_000]);
    let run = Run::ingest(
        &k,
        "too big, ignoreCorruptFiles",
        &[
            "cloudFiles.format=binaryFile",
            "cloudFiles.maxRecordBytes=4k",
            "ignoreCorruptFiles=true",
        ],
    );
    run.ok();
    assert_eq!(run.figure("skipped files"), 1);
    assert_eq!(sorted_rows(&k.table(), &["length"]), vec!["4"]);
    let out = s.ingest(&["cloudFiles.format=binaryFile", "schema=path STRING"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// The docs' text and binaryFile examples, as printed there, on the bundled fixtures.
#[test]
fn the_docs_text_and_binary_examples_run() {
    let block = crate::common::doc_block("docs/guide/formats.md", "## Text and binary files", "sh");
    let s = Scratch::new();
    ok(&crate::common::run_doc_sh(&block, s.dir.path(), &[]));
    let tables = [
        s.dir.path().join("out/logs"),
        s.dir.path().join("out/images"),
    ];
    let logs = read_with_python(&tables[0], "value");
    assert_eq!(logs["num_rows"], 6, "{logs}");
    assert_eq!(logs["types"]["value"], "string");
    let files = read_with_python(&tables[1], "path");
    assert_eq!(files["num_rows"], 2, "only the PNGs: {files}");
    assert_eq!(files["types"]["content"], "binary");
}
