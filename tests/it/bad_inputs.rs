//! The bad input catalogue: malformed and hostile inputs, one test each, run on the real
//! binary with real files. The promise each case checks:
//!
//! - a malformed record lands as a row whose raw text is kept (`_rescued_data` under
//!   `_corrupt_record`), or with `mode=FAILFAST` stops the run naming file and line; a file
//!   that cannot be read at all stops the run with exit code 1 and an error naming the file
//!   (and line where there is one), stays unconsumed, and with `ignoreCorruptFiles=true` is
//!   skipped and recorded in the commit; an empty file is consumed and ingests nothing;
//! - nothing is silently dropped, nothing panics (exit 101 / "panicked"), memory stays
//!   bounded (`cloudFiles.maxRecordBytes`), and nothing is written outside the table (the
//!   checkpoint and schema location default inside it).
//!
//! Every run here goes through [`Run::ingest`] (in `common`), which runs the binary with its
//! working directory, `TMPDIR` and `HOME` in empty folders of the scratch area, measures its
//! peak memory, and checks afterwards that no panic happened and nothing was written outside
//! `table/`.
//! Inputs are generated in the tests (the large ones at test time, never committed).
//! Cases the tool does not handle as promised are `#[ignore = "autoloader bug: ..."]`.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{
    ArrayRef, DurationSecondArray, Int64Array, RecordBatch, Time64MicrosecondArray, UInt64Array,
};

use crate::common::rows::table_rows;
use crate::common::{Run, Scratch, column_strings, parquet_bytes, read_table, row_count};

/// The parsed non-null `_rescued_data` values.
fn rescued(batches: &[RecordBatch]) -> Vec<serde_json::Value> {
    column_strings(batches, "_rescued_data")
        .into_iter()
        .filter(|v| v != "null")
        .map(|v| serde_json::from_str(&v).unwrap())
        .collect()
}

/// The `_corrupt_record` texts of the table, sorted.
fn corrupt_records(batches: &[RecordBatch]) -> Vec<String> {
    let mut v: Vec<String> = rescued(batches)
        .iter()
        .filter_map(|r| r["_corrupt_record"].as_str().map(str::to_string))
        .collect();
    v.sort();
    v
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// (path, skipped) of every file the table's commits record.
fn recorded_files(s: &Scratch) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let Ok(dir) = fs::read_dir(s.table().join("_delta_log")) else {
        return out;
    };
    let mut commits: Vec<PathBuf> = dir
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    commits.sort();
    for c in commits {
        for line in fs::read_to_string(c).unwrap().lines() {
            let action: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(files) = action["commitInfo"]["autoloader"]["files"].as_array() {
                for f in files {
                    out.push((
                        f["path"].as_str().unwrap().to_string(),
                        f["skipped"].as_bool().unwrap(),
                    ));
                }
            }
        }
    }
    out
}

/// The text of every value in the table (all columns, `_metadata` excluded), row by row.
fn row_texts(batches: &[RecordBatch]) -> Vec<String> {
    let mut rows = Vec::new();
    for b in batches {
        let fmts: Vec<_> = b
            .schema()
            .fields()
            .iter()
            .zip(b.columns())
            .filter(|(f, _)| f.name() != "_metadata")
            .map(|(_, c)| {
                arrow_cast::display::ArrayFormatter::try_new(c.as_ref(), &Default::default())
                    .unwrap()
            })
            .collect();
        for i in 0..b.num_rows() {
            rows.push(
                fmts.iter()
                    .map(|f| f.value(i).to_string())
                    .collect::<Vec<_>>()
                    .join(" | "),
            );
        }
    }
    rows
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

/// Writes `prefix`, `n` bytes of `fill`, then `suffix`, streaming (no big buffer here).
fn land_long(s: &Scratch, rel: &str, prefix: &[u8], fill: u8, n: usize, suffix: &[u8]) {
    let path = s.landing().join(rel);
    let mut f = std::io::BufWriter::new(fs::File::create(path).unwrap());
    f.write_all(prefix).unwrap();
    let chunk = vec![fill; 1 << 20];
    let mut left = n;
    while left > 0 {
        let k = left.min(chunk.len());
        f.write_all(&chunk[..k]).unwrap();
        left -= k;
    }
    f.write_all(suffix).unwrap();
    f.flush().unwrap();
}

fn nested(depth: usize) -> String {
    format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
}

// ---------------------------------------------------------------- JSON lines

/// Malformed lines among good ones (after a BOM, with a blank line and a CRLF ending) → each
/// malformed line is a row with its raw text under `_corrupt_record`; the others land.
#[test]
fn json_malformed_lines_are_kept_raw_in_rescued_data() {
    let s = Scratch::new();
    s.land(
        "a.json",
        "\u{feff}{\"id\": 1}\n{\"id\": 2, broken\n\n42\n{\"id\": 3}\r\n",
    );
    let run = Run::ingest(&s, "malformed JSON lines", &[]);
    run.ok();
    assert_eq!(run.figure("rows"), 4);
    assert_eq!(run.figure("rescued rows"), 2);
    let t = read_table(&s.table());
    let r = rescued(&t);
    assert_eq!(r[0]["_corrupt_record"], "{\"id\": 2, broken");
    assert_eq!(r[1]["_corrupt_record"], "42");
    assert_eq!(
        sorted(column_strings(&t, "id")),
        vec!["1", "3", "null", "null"]
    );
}

/// `mode=FAILFAST` → a malformed record stops the run: exit 1 naming file and line.
#[test]
fn json_failfast_stops_on_a_malformed_record_naming_file_and_line() {
    let s = Scratch::new();
    s.land("a.json", "{\"id\": 1}\nnot json\n");
    Run::ingest(&s, "FAILFAST", &["mode=FAILFAST"])
        .fails_naming(&["a.json line 2: malformed record"]);
}

/// `columnNameOfCorruptRecord` set → a malformed line's raw text goes to that column, and
/// `_rescued_data` stays null.
#[test]
fn json_column_name_of_corrupt_record_keeps_raw_text_in_its_column() {
    let s = Scratch::new();
    s.land("a.json", "{\"id\": 1}\n{oops\n");
    Run::ingest(
        &s,
        "columnNameOfCorruptRecord",
        &["columnNameOfCorruptRecord=_corrupt_record"],
    )
    .ok();
    let t = read_table(&s.table());
    let corrupt = column_strings(&t, "_corrupt_record");
    assert!(corrupt.contains(&"{oops".to_string()), "{corrupt:?}");
    assert!(
        column_strings(&t, "_rescued_data")
            .iter()
            .all(|r| r == "null")
    );
}

/// Truncated last line → the complete lines land; the cut-off line is a row with its raw
/// text under `_corrupt_record`.
#[test]
fn json_truncated_last_line() {
    let s = Scratch::new();
    s.land("a.json", "{\"id\": 1}\n{\"id\": 2, \"na");
    let run = Run::ingest(&s, "truncated last line", &[]);
    run.ok();
    assert_eq!(run.figure("rows"), 2);
    let t = read_table(&s.table());
    assert_eq!(sorted(column_strings(&t, "id")), vec!["1", "null"]);
    assert_eq!(corrupt_records(&t), vec!["{\"id\": 2, \"na"]);
}

/// Invalid UTF-8 inside a JSON line → the line is a malformed record, kept (invalid bytes
/// shown as U+FFFD, the rest verbatim); the other lines land.
#[test]
fn json_invalid_utf8() {
    let s = Scratch::new();
    s.land(
        "a.json",
        b"{\"id\": 1, \"name\": \"caf\xe9\"}\n{\"id\": 2}\n",
    );
    let run = Run::ingest(&s, "invalid UTF-8 (JSON)", &[]);
    run.ok();
    let t = read_table(&s.table());
    assert_eq!(row_count(&t), 2);
    assert_eq!(
        corrupt_records(&t),
        vec!["{\"id\": 1, \"name\": \"caf\u{fffd}\"}"]
    );
}

/// UTF-8 BOM at the start of a JSON-lines file → ignored; the first record lands intact.
#[test]
fn json_utf8_bom() {
    let s = Scratch::new();
    s.land("a.json", "\u{feff}{\"id\": 1}\n{\"id\": 2}\n");
    let run = Run::ingest(&s, "UTF-8 BOM (JSON)", &[]);
    run.ok();
    assert_eq!(run.figure("rescued rows"), 0);
    assert_eq!(
        sorted(column_strings(&read_table(&s.table()), "id")),
        vec!["1", "2"]
    );
}

/// CRLF, LF and blank CRLF lines mixed → one row per record; a lone CR is not a line break,
/// so `{..}\r{..}` is one malformed line, kept raw (nothing lost).
#[test]
fn json_crlf_and_mixed_line_endings() {
    let s = Scratch::new();
    s.land(
        "a.json",
        "{\"id\": 1}\r\n{\"id\": 2}\n\r\n{\"id\": 3}\r\n{\"id\": 4}\r{\"id\": 5}\n",
    );
    let run = Run::ingest(&s, "CRLF and mixed line endings", &[]);
    run.ok();
    let t = read_table(&s.table());
    assert_eq!(
        sorted(column_strings(&t, "id")),
        vec!["1", "2", "3", "null"]
    );
    assert_eq!(corrupt_records(&t), vec!["{\"id\": 4}\r{\"id\": 5}"]);
}

/// NUL bytes (a raw NUL inside a string, a line of NULs) → malformed records kept raw with
/// the NULs; a NUL inside a CSV cell is kept in the cell.
#[test]
fn nul_bytes() {
    let s = Scratch::new();
    s.land(
        "a.json",
        b"{\"id\": 1, \"s\": \"a\0b\"}\n\0\0\0\n{\"id\": 2}\n",
    );
    Run::ingest(&s, "NUL bytes (JSON)", &[]).ok();
    let t = read_table(&s.table());
    assert_eq!(row_count(&t), 3);
    assert_eq!(
        corrupt_records(&t),
        vec!["\0\0\0", "{\"id\": 1, \"s\": \"a\0b\"}"]
    );

    let c = Scratch::new();
    c.land("a.csv", b"id,s\n1,a\0b\n");
    Run::ingest(&c, "NUL bytes (CSV)", &[]).ok();
    assert_eq!(column_strings(&read_table(&c.table()), "s"), vec!["a\0b"]);
}

/// A 100 MB single line (default `cloudFiles.maxRecordBytes` 64m) → exit 1 naming file and
/// line, memory stays below the line's size, nothing committed; with ignoreCorruptFiles the
/// file is skipped and recorded.
#[test]
fn json_100_mb_single_line() {
    let s = Scratch::new();
    s.land("small.json", "{\"id\": 0}\n");
    land_long(
        &s,
        "huge.json",
        b"{\"id\": 1}\n{\"s\": \"",
        b'x',
        100 << 20,
        b"\"}\n{\"id\": 3}\n",
    );
    let run = Run::ingest(&s, "100 MB line", &[]);
    run.fails_naming(&["huge.json line 2", "cloudFiles.maxRecordBytes"]);
    assert!(
        run.max_rss_kb < 128 * 1024,
        "[100 MB line] memory is bounded by maxRecordBytes, peak was {} KiB",
        run.max_rss_kb
    );
    assert_eq!(table_rows(&s), 0, "nothing of the batch is committed");
    let run = Run::ingest(
        &s,
        "100 MB line, ignoreCorruptFiles",
        &["ignoreCorruptFiles=true"],
    );
    run.ok();
    assert_eq!(run.figure("skipped files"), 1);
    assert!(run.max_rss_kb < 128 * 1024, "peak {} KiB", run.max_rss_kb);
    assert_eq!(column_strings(&read_table(&s.table()), "id"), vec!["0"]);
    assert!(recorded_files(&s).contains(&("huge.json".into(), true)));
}

/// `cloudFiles.maxRecordBytes` is configurable: a 2 KB line over a 1k limit → exit 1 naming
/// file, line and limit; raising the limit takes it.
#[test]
fn json_max_record_bytes_is_configurable() {
    let s = Scratch::new();
    let long = format!("{{\"s\": \"{}\"}}", "y".repeat(2048));
    s.land("a.json", format!("{{\"id\": 1}}\n\n{long}\n"));
    Run::ingest(&s, "maxRecordBytes=1k", &["cloudFiles.maxRecordBytes=1k"])
        .fails_naming(&["a.json line 3", "(1024 bytes)"]);
    let run = Run::ingest(&s, "maxRecordBytes=4k", &["cloudFiles.maxRecordBytes=4k"]);
    run.ok();
    assert_eq!(run.figure("rows"), 2);
}

/// 10,000 levels of nesting in a JSON line → the record is over any sane depth: kept raw
/// under `_corrupt_record`; the other lines land; the table stays readable.
#[test]
fn json_nesting_10000_levels() {
    let s = Scratch::new();
    let deep = nested(10_000);
    s.land("a.json", format!("{deep}\n{{\"id\": 2}}\n"));
    let run = Run::ingest(&s, "10,000 levels of nesting (JSON lines)", &[]);
    run.ok();
    let t = read_table(&s.table());
    assert_eq!(row_count(&t), 2);
    assert_eq!(corrupt_records(&t), vec![deep]);
    // And the stream carries on.
    s.land("b.json", "{\"id\": 3}\n");
    Run::ingest(&s, "10,000 levels, next run", &[]).ok();
}

/// 50 levels of nesting (plausible real data) → the record lands (as nested columns or
/// kept raw); either way the table stays readable and the stream carries on.
#[test]
fn json_nesting_50_levels() {
    let s = Scratch::new();
    s.land("a.json", format!("{}\n{{\"id\": 2}}\n", nested(50)));
    let run = Run::ingest(&s, "50 levels of nesting", &[]);
    run.ok();
    assert_eq!(row_count(&read_table(&s.table())), 2);
    s.land("b.json", "{\"id\": 3}\n");
    Run::ingest(&s, "50 levels, next run", &[]).ok();
    assert_eq!(row_count(&read_table(&s.table())), 3);
}

/// 10,000 levels in a multi-line document → the file cannot be read: exit 1 naming file and
/// line (no stack overflow); with ignoreCorruptFiles it is skipped and recorded.
#[test]
fn json_multiline_nesting_10000_levels() {
    let s = Scratch::new();
    s.land("deep.json", nested(10_000));
    s.land("ok.json", "{\"id\": 1}");
    Run::ingest(&s, "10,000 levels (multiLine)", &["multiLine=true"])
        .fails_naming(&["deep.json is corrupt at line 1"]);
    let run = Run::ingest(
        &s,
        "10,000 levels (multiLine), ignoreCorruptFiles",
        &["multiLine=true", "ignoreCorruptFiles=true"],
    );
    run.ok();
    assert_eq!(run.figure("skipped files"), 1);
    assert_eq!(column_strings(&read_table(&s.table()), "id"), vec!["1"]);
}

/// Duplicate keys in one object → one value in the column, the other kept in the rescued
/// data (neither silently dropped).
#[test]
fn json_duplicate_keys() {
    let s = Scratch::new();
    s.land("a.json", "{\"id\": \"first\", \"id\": \"second\"}\n");
    let run = Run::ingest(&s, "duplicate keys", &[]);
    run.ok();
    let t = read_table(&s.table());
    let row = row_texts(&t).join("\n");
    assert!(
        row.contains("first") && row.contains("second"),
        "[duplicate keys] both values are kept: {row}"
    );
}

/// Integers beyond i64 (fit DECIMAL(38)) → DECIMAL(n,0), exact; a number beyond f64 (1e400)
/// → its column gets null, the value is rescued.
#[test]
fn json_numbers_beyond_i64_and_f64() {
    let s = Scratch::new();
    s.land(
        "a.json",
        "{\"big\": 99999999999999999999, \"f\": 1e400}\n{\"big\": 1, \"f\": 2.5}\n",
    );
    let run = Run::ingest(
        &s,
        "numbers beyond i64 and f64",
        &["cloudFiles.inferColumnTypes=true"],
    );
    run.ok();
    let t = read_table(&s.table());
    assert_eq!(
        sorted(column_strings(&t, "big")),
        vec!["1", "99999999999999999999"]
    );
    assert_eq!(sorted(column_strings(&t, "f")), vec!["2.5", "null"]);
    let r = rescued(&t);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["f"].to_string(), "1e+400");
}

/// An integer beyond DECIMAL(38) → the column is inferred DOUBLE (Spark's rule), and the
/// value, which a double would round, goes to the rescued data with its exact digits.
#[test]
fn json_integer_beyond_decimal_38() {
    let s = Scratch::new();
    let digits = "123456789012345678901234567890123456789012345678901";
    s.land("a.json", format!("{{\"n\": {digits}}}\n{{\"n\": 2}}\n"));
    let run = Run::ingest(
        &s,
        "integer beyond DECIMAL(38)",
        &["cloudFiles.inferColumnTypes=true"],
    );
    run.ok();
    let all = row_texts(&read_table(&s.table())).join("\n");
    assert!(
        all.contains(digits),
        "[integer beyond DECIMAL(38)] the digits are kept: {all}"
    );
}

/// NaN / Infinity / -Infinity tokens (not JSON, but Spark's default
/// `allowNonNumericNumbers=true` reads them as numbers) → values, nothing rescued; beside
/// the string "NaN" the column is STRING and every value lands as written. With
/// `allowNonNumericNumbers=false` they are malformed records, kept raw.
#[test]
fn json_nan_and_infinity_tokens() {
    let text = "{\"x\": NaN}\n{\"x\": Infinity}\n{\"x\": -Infinity}\n{\"x\": \"NaN\"}\n";
    let s = Scratch::new();
    s.land("a.json", text);
    let run = Run::ingest(&s, "NaN/Infinity", &["cloudFiles.inferColumnTypes=true"]);
    run.ok();
    assert_eq!(run.figure("rescued rows"), 0);
    let t = read_table(&s.table());
    assert_eq!(
        sorted(column_strings(&t, "x")),
        vec!["-Infinity", "Infinity", "NaN", "NaN"]
    );

    let strict = Scratch::new();
    strict.land("a.json", text);
    let run = Run::ingest(
        &strict,
        "NaN/Infinity, allowNonNumericNumbers=false",
        &[
            "cloudFiles.inferColumnTypes=true",
            "allowNonNumericNumbers=false",
        ],
    );
    run.ok();
    assert_eq!(run.figure("rescued rows"), 3);
    let t = read_table(&strict.table());
    assert_eq!(
        corrupt_records(&t),
        vec!["{\"x\": -Infinity}", "{\"x\": Infinity}", "{\"x\": NaN}"]
    );
    assert!(column_strings(&t, "x").contains(&"NaN".to_string()));
}

/// Empty, whitespace-only, BOM-only and empty gzip files → consumed, zero rows, exit 0; a
/// rerun takes nothing. Beside a file with data, they are consumed and add no rows.
#[test]
fn json_empty_and_whitespace_only_files() {
    let s = Scratch::new();
    s.land("empty.json", "");
    s.land("blank.json", " \n\t\r\n\n");
    s.land("bom.json", "\u{feff}");
    s.land("empty.json.gz", "");
    s.land("gz-of-nothing.json.gz", gzip(b""));
    let run = Run::ingest(&s, "empty and whitespace-only", &["cloudFiles.format=json"]);
    run.ok();
    assert_eq!(run.figure("files"), 5);
    assert_eq!(run.figure("rows"), 0);
    let again = Run::ingest(&s, "empty, rerun", &["cloudFiles.format=json"]);
    again.ok();
    assert_eq!(again.figure("files"), 0);

    let d = Scratch::new();
    d.land("empty.json", "");
    d.land("blank.json", "\n \n");
    d.land("a.json", "{\"id\": 1}\n");
    let run = Run::ingest(&d, "empty files beside data", &[]);
    run.ok();
    assert_eq!(run.figure("files"), 3);
    assert_eq!(run.figure("rows"), 1);
}

/// A JSON array where objects are expected (JSON lines) → each object element is a row,
/// each scalar element and a bare scalar line are malformed records kept raw.
#[test]
fn json_array_where_objects_expected() {
    let s = Scratch::new();
    s.land("a.json", "[{\"id\": 1}, {\"id\": 2}]\n[3, \"x\"]\n42\n");
    let run = Run::ingest(&s, "array where objects expected", &[]);
    run.ok();
    let t = read_table(&s.table());
    assert_eq!(row_count(&t), 5);
    assert_eq!(corrupt_records(&t), vec!["\"x\"", "3", "42"]);
}

/// Concatenated objects and trailing garbage on one line → one malformed record each, raw.
#[test]
fn json_concatenated_objects_and_trailing_garbage() {
    let s = Scratch::new();
    s.land(
        "a.json",
        "{\"id\": 1}{\"id\": 2}\n{\"id\": 3} trailing\n{\"id\": 4,}\n{\"id\": 5}\n",
    );
    let run = Run::ingest(&s, "concatenated objects", &[]);
    run.ok();
    let t = read_table(&s.table());
    assert_eq!(row_count(&t), 4);
    assert_eq!(
        corrupt_records(&t),
        vec![
            "{\"id\": 1}{\"id\": 2}",
            "{\"id\": 3} trailing",
            "{\"id\": 4,}"
        ]
    );
}

/// Data whose own keys collide with the reserved columns (`_rescued_data`) → the data's
/// value is kept in the rescued data under its key, the record's other values land.
#[test]
fn json_key_colliding_with_rescued_data_column() {
    let s = Scratch::new();
    s.land("a.json", "{\"_rescued_data\": \"mine\", \"id\": 1}\n");
    Run::ingest(&s, "key named _rescued_data", &[]).ok();
    let t = read_table(&s.table());
    assert_eq!(column_strings(&t, "id"), vec!["1"]);
    let r = rescued(&t);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["_rescued_data"], "mine");
}

/// multiLine documents that are not objects: a top-level scalar, an array with scalars →
/// each non-object is a malformed record kept raw, `null` included (as JSON lines does).
#[test]
fn json_multiline_non_object_documents() {
    let s = Scratch::new();
    s.land("null.json", "null\n");
    s.land("scalar.json", "42\n");
    s.land("mixed.json", "[1, {\"id\": 2}]\n");
    let run = Run::ingest(&s, "multiLine non-object documents", &["multiLine=true"]);
    run.ok();
    let t = read_table(&s.table());
    assert_eq!(corrupt_records(&t), vec!["1", "42", "null"]);
    assert_eq!(row_count(&t), 4);
}

/// An invalid multi-line document → the file cannot be read: exit 1 naming file and line,
/// unconsumed (a rerun fails again); ignoreCorruptFiles skips and records it.
#[test]
fn json_multiline_invalid_document() {
    let s = Scratch::new();
    s.land("bad.json", "{\n  \"id\": 1,\n  \"x\": \n}\n");
    s.land("ok.json", "{\"id\": 2}");
    Run::ingest(&s, "invalid multiLine document", &["multiLine=true"])
        .fails_naming(&["bad.json is corrupt at line 4"]);
    Run::ingest(&s, "invalid multiLine document, rerun", &["multiLine=true"])
        .fails_naming(&["bad.json"]);
    let run = Run::ingest(
        &s,
        "invalid multiLine document, ignoreCorruptFiles",
        &["multiLine=true", "ignoreCorruptFiles=true"],
    );
    run.ok();
    assert_eq!(column_strings(&read_table(&s.table()), "id"), vec!["2"]);
    assert!(recorded_files(&s).contains(&("bad.json".into(), true)));
}

/// multiLine: one element larger than `cloudFiles.maxRecordBytes` → exit 1 naming the file
/// and the limit (memory bounded as for JSON lines).
#[test]
fn json_multiline_element_over_max_record_bytes() {
    let s = Scratch::new();
    land_long(
        &s,
        "a.json",
        b"[{\"id\": 1}, {\"s\": \"",
        b'z',
        20 << 20,
        b"\"}]\n",
    );
    Run::ingest(
        &s,
        "multiLine element over maxRecordBytes",
        &["multiLine=true", "cloudFiles.maxRecordBytes=1m"],
    )
    .fails_naming(&["a.json", "cloudFiles.maxRecordBytes"]);
}

// ---------------------------------------------------------------- CSV

/// Ragged rows → a short row has nulls for the missing columns; a long row keeps its raw
/// text under `_corrupt_record`. Also with CRLF endings, a row of one value and a quoted
/// comma: every value is kept.
#[test]
fn csv_ragged_rows() {
    let s = Scratch::new();
    s.land(
        "a.csv",
        "id,name,city\n1,ann,seoul\n2,bob\n3,cy,busan,extra\n",
    );
    let run = Run::ingest(&s, "ragged rows", &[]);
    run.ok();
    let t = read_table(&s.table());
    assert_eq!(row_count(&t), 3);
    assert_eq!(
        sorted(column_strings(&t, "city")),
        vec!["busan", "null", "seoul"]
    );
    assert_eq!(corrupt_records(&t), vec!["3,cy,busan,extra"]);

    let c = Scratch::new();
    c.land(
        "a.csv",
        "id,name\r\n1,ann\r\n2\r\n3,bob,extra\r\n\"4\",\"quoted, comma\"\r\n",
    );
    let run = Run::ingest(&c, "ragged rows, CRLF and a quoted comma", &[]);
    run.ok();
    assert_eq!(run.figure("rows"), 4);
    let t = read_table(&c.table());
    let names = column_strings(&t, "name");
    assert!(names.contains(&"quoted, comma".to_string()), "{names:?}");
    assert!(
        names.contains(&"null".to_string()),
        "a short row has nulls: {names:?}"
    );
    let raw: Vec<String> = column_strings(&t, "_rescued_data")
        .into_iter()
        .filter(|v| v != "null")
        .collect();
    assert_eq!(raw.len(), 1);
    assert!(
        raw[0].contains("\"_corrupt_record\":\"3,bob,extra\""),
        "{raw:?}"
    );
}

/// Quoted fields that span lines and are closed → ordinary rows, also as the file's last
/// record with or without a final newline (the unterminated-quote check must not fire).
#[test]
fn csv_closed_multiline_quotes_are_rows() {
    for (case, body) in [
        ("final newline", "id,note\n1,\"a\nb\"\n2,\"c\nd\"\n"),
        ("no final newline", "id,note\n1,\"a\nb\"\n2,\"c\nd\""),
        ("CRLF", "id,note\r\n1,\"a\r\nb\"\r\n2,\"c\r\nd\"\r\n"),
    ] {
        let s = Scratch::new();
        let padding: String = (3..400).map(|i| format!("{i},\"x\"\n")).collect();
        // Long enough that the reader refills its buffer on the way.
        let body = body.replacen("1,", &format!("{padding}1,"), 1);
        s.land("a.csv", &body);
        let run = Run::ingest(&s, "closed multi-line quotes", &[]);
        run.ok();
        let t = read_table(&s.table());
        assert_eq!(row_count(&t), 399, "[{case}]");
        assert!(rescued(&t).is_empty(), "[{case}] nothing flagged");
    }
}

/// An unbalanced quote → the rows after it are not silently swallowed into one cell: the
/// run stops with exit code 1 naming the file and the line where the quote opened, commits
/// nothing, and leaves the file to be read again (it fails the same way on a rerun).
#[test]
fn csv_unbalanced_quotes() {
    let s = Scratch::new();
    s.land("a.csv", "id,name\n1,\"ann\n2,bob\n3,cy\n");
    for case in ["unbalanced quote", "unbalanced quote, rerun"] {
        Run::ingest(&s, case, &[]).fails_naming(&["a.csv", "line 2", "never closed"]);
        assert_eq!(table_rows(&s), 0, "[{case}] nothing committed");
    }
}

/// Header-only CSV → consumed, zero rows, its columns in the schema.
#[test]
fn csv_header_only() {
    let s = Scratch::new();
    s.land("a.csv", "id,name\n");
    let run = Run::ingest(&s, "header-only CSV", &[]);
    run.ok();
    assert_eq!(run.figure("files"), 1);
    assert_eq!(run.figure("rows"), 0);
    let schema = fs::read_to_string(s.table().join("_autoloader/_schemas/0")).unwrap();
    assert!(
        schema.contains("\\\"name\\\":\\\"id\\\"") && schema.contains("\\\"name\\\":\\\"name\\\""),
        "{schema}"
    );
}

/// Duplicate header names → the first is the column, the later one's value is rescued
/// under its name (with the file's path): the row lands, both values kept.
#[test]
fn csv_duplicate_header_names() {
    let s = Scratch::new();
    s.land("a.csv", "id,name,id\n1,ann,2\n");
    let run = Run::ingest(&s, "duplicate header names", &[]);
    run.ok();
    assert_eq!(run.figure("rows"), 1);
    let t = read_table(&s.table());
    assert_eq!(column_strings(&t, "id"), vec!["1"]);
    assert_eq!(column_strings(&t, "name"), vec!["ann"]);
    let r = rescued(&t);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0]["id"], "2", "{r:?}");
    assert!(
        r[0]["_file_path"].as_str().unwrap().ends_with("/a.csv"),
        "{r:?}"
    );
}

/// Empty header names → named `_c<index>`, values kept.
#[test]
fn csv_empty_header_names() {
    let s = Scratch::new();
    s.land("a.csv", ",name,\nx,y,z\n");
    Run::ingest(&s, "empty header names", &[]).ok();
    let t = read_table(&s.table());
    assert_eq!(column_strings(&t, "_c0"), vec!["x"]);
    assert_eq!(column_strings(&t, "name"), vec!["y"]);
    assert_eq!(column_strings(&t, "_c2"), vec!["z"]);
}

/// Header names differing only by case → first spelling is the column, the other value is
/// rescued under its own spelling.
#[test]
fn csv_header_differing_only_by_case() {
    let s = Scratch::new();
    s.land("a.csv", "id,ID\n1,2\n");
    Run::ingest(&s, "header differing by case", &[]).ok();
    let t = read_table(&s.table());
    assert_eq!(column_strings(&t, "id"), vec!["1"]);
    let r = rescued(&t);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["ID"], "2");
}

/// A UTF-8 BOM on the header and CRLF / LF / CR line endings mixed → the first column is
/// `id` (no BOM), one row per record.
#[test]
fn csv_bom_and_mixed_line_endings() {
    let s = Scratch::new();
    s.land("a.csv", "\u{feff}id,name\r\n1,ann\n2,bob\r3,cy\r\n");
    Run::ingest(&s, "CSV BOM and mixed endings", &[]).ok();
    let t = read_table(&s.table());
    assert_eq!(sorted(column_strings(&t, "id")), vec!["1", "2", "3"]);
    assert_eq!(sorted(column_strings(&t, "name")), vec!["ann", "bob", "cy"]);
}

/// Invalid UTF-8 in a CSV cell → not silently altered: the cell is null and its raw bytes
/// are rescued (each bad byte written `\xNN`) with the file's path; the other rows land
/// as they are.
#[test]
fn csv_invalid_utf8() {
    let s = Scratch::new();
    s.land("a.csv", b"id,name\n1,caf\xe9\n2,ok\n");
    Run::ingest(&s, "invalid UTF-8 (CSV)", &[]).ok();
    let t = read_table(&s.table());
    assert_eq!(row_count(&t), 2, "{:?}", row_texts(&t));
    let ids = column_strings(&t, "id");
    let names = column_strings(&t, "name");
    let name_of = |id: &str| names[ids.iter().position(|i| i == id).unwrap()].clone();
    assert_eq!(
        name_of("1"),
        "null",
        "the damaged cell is not altered into text"
    );
    assert_eq!(name_of("2"), "ok");
    let r = rescued(&t);
    assert_eq!(r.len(), 1, "only the damaged row is flagged: {r:?}");
    assert_eq!(r[0]["name"], "caf\\xE9", "{r:?}");
    assert!(
        r[0]["_file_path"].as_str().unwrap().ends_with("/a.csv"),
        "{r:?}"
    );
}

/// A CSV record longer than `cloudFiles.maxRecordBytes` → exit 1 naming file and line
/// (memory bounded, as for JSON lines).
#[test]
fn csv_record_over_max_record_bytes() {
    let s = Scratch::new();
    land_long(&s, "a.csv", b"id,s\n1,a\n2,", b'x', 20 << 20, b"\n3,c\n");
    Run::ingest(
        &s,
        "CSV record over maxRecordBytes",
        &["cloudFiles.maxRecordBytes=1m"],
    )
    .fails_naming(&["a.csv", "line 3", "cloudFiles.maxRecordBytes"]);
}

// ---------------------------------------------------------------- gzip

/// A corrupt gzip (valid magic, garbage deflate) → exit 1 naming it, nothing of the batch
/// committed, unconsumed (a rerun fails again); ignoreCorruptFiles skips it (counted in the
/// summary, recorded in the commit with its size) and the rest lands.
#[test]
fn gzip_corrupt() {
    let s = Scratch::new();
    s.land("good.json", "{\"id\": 1}\n");
    let mut gz = vec![0x1f, 0x8b, 0x08, 0x00];
    gz.extend_from_slice(b"definitely not deflate data at all");
    s.land("bad.json.gz", &gz);
    Run::ingest(&s, "corrupt gzip", &["cloudFiles.format=json"]).fails_naming(&["bad.json.gz"]);
    assert_eq!(
        table_rows(&s),
        0,
        "nothing of the failed batch is committed"
    );
    Run::ingest(&s, "corrupt gzip, rerun", &["cloudFiles.format=json"])
        .fails_naming(&["bad.json.gz"]);
    let run = Run::ingest(
        &s,
        "corrupt gzip, ignoreCorruptFiles",
        &["cloudFiles.format=json", "ignoreCorruptFiles=true"],
    );
    run.ok();
    assert_eq!(run.figure("skipped files"), 1);
    assert_eq!(column_strings(&read_table(&s.table()), "id"), vec!["1"]);
    assert!(recorded_files(&s).contains(&("bad.json.gz".into(), true)));
    let log = fs::read_to_string(s.table().join("_delta_log/00000000000000000001.json")).unwrap();
    assert!(
        log.contains("\"path\":\"bad.json.gz\",\"size\":38,\"mtimeMs\""),
        "{log}"
    );
    assert!(log.contains("\"skipped\":true"), "{log}");
}

/// Concatenated gzip members (as `cat a.gz b.gz` makes) → every member is read.
#[test]
fn gzip_concatenated_members_are_all_read() {
    let mut data = Vec::new();
    for i in 0..3 {
        data.extend(gzip(format!("{{\"id\": {i}}}\n").as_bytes()));
    }
    let s = Scratch::new();
    s.land("multi.json.gz", data);
    let run = Run::ingest(&s, "concatenated gzip members", &[]);
    run.ok();
    assert_eq!(run.figure("rows"), 3);
}

/// A truncated gzip → exit 1 naming file and the line reached, nothing of the batch
/// committed; with ignoreCorruptFiles none of its rows land (not half a file).
#[test]
fn gzip_truncated() {
    let s = Scratch::new();
    let lines: String = (0..5000).map(|i| format!("{{\"id\": {i}}}\n")).collect();
    let gz = gzip(lines.as_bytes());
    s.land("cut.json.gz", &gz[..gz.len() / 2]);
    s.land("ok.json", "{\"id\": \"ok\"}\n");
    Run::ingest(&s, "truncated gzip", &[]).fails_naming(&["cut.json.gz is corrupt at line"]);
    assert_eq!(table_rows(&s), 0);
    let run = Run::ingest(
        &s,
        "truncated gzip, ignoreCorruptFiles",
        &["ignoreCorruptFiles=true"],
    );
    run.ok();
    assert_eq!(column_strings(&read_table(&s.table()), "id"), vec!["ok"]);
}

/// A gzip bomb (0.5 MB expanding to 512 MB, one line) → stopped by maxRecordBytes: exit 1
/// naming file and line 1, peak memory far below the expanded size.
#[test]
fn gzip_bomb() {
    let s = Scratch::new();
    let member = gzip(&vec![b'a'; 1 << 20]);
    let mut bomb = Vec::with_capacity(member.len() * 512);
    for _ in 0..512 {
        bomb.extend_from_slice(&member);
    }
    s.land("bomb.json.gz", &bomb);
    let run = Run::ingest(&s, "gzip bomb", &[]);
    run.fails_naming(&["bomb.json.gz line 1", "cloudFiles.maxRecordBytes"]);
    assert!(
        run.max_rss_kb < 200 * 1024,
        "[gzip bomb] peak memory {} KiB",
        run.max_rss_kb
    );
}

/// A gzip bomb of many short lines (each line fine, 4 MB in all from a few KB) →
/// `cloudFiles.maxDecompressedBytes` stops it naming the file, in JSON lines, multi-line JSON
/// and CSV; with `ignoreCorruptFiles` it is skipped and recorded, and the other file lands.
#[test]
fn gzip_bomb_of_short_lines() {
    let s = Scratch::new();
    let lines = "{\"id\": \"x\"}\n".repeat(300_000);
    s.land("bomb.json.gz", gzip(lines.as_bytes()));
    s.land("ok.json", "{\"id\": \"ok\"}\n");
    let limit = "cloudFiles.maxDecompressedBytes=1m";
    Run::ingest(&s, "short-line gzip bomb", &[limit]).fails_naming(&[
        "bomb.json.gz",
        "cloudFiles.maxDecompressedBytes (1048576 bytes)",
    ]);
    assert_eq!(table_rows(&s), 0);
    let multi = format!(
        "[{}]",
        "{\"id\": \"x\"},".repeat(300_000).trim_end_matches(',')
    );
    let m = Scratch::new();
    m.land("bomb.json.gz", gzip(multi.as_bytes()));
    Run::ingest(&m, "multi-line gzip bomb", &[limit, "multiLine=true"])
        .fails_naming(&["bomb.json.gz", "cloudFiles.maxDecompressedBytes"]);
    let c = Scratch::new();
    c.land(
        "bomb.csv.gz",
        gzip(format!("id\n{}", "x\n".repeat(1_000_000)).as_bytes()),
    );
    Run::ingest(&c, "csv gzip bomb", &[limit, "cloudFiles.format=csv"])
        .fails_naming(&["bomb.csv.gz", "cloudFiles.maxDecompressedBytes"]);
    // Skipped as a corrupt file when asked, and recorded as skipped.
    Run::ingest(
        &s,
        "short-line gzip bomb, ignoreCorruptFiles",
        &[limit, "ignoreCorruptFiles=true"],
    )
    .ok();
    assert_eq!(column_strings(&read_table(&s.table()), "id"), vec!["ok"]);
}

/// A file named `.gz` that is not gzip → exit 1 naming it (not read as plain text).
#[test]
fn gzip_name_without_gzip_data() {
    let s = Scratch::new();
    s.land("plain.json.gz", "{\"id\": 1}\n");
    Run::ingest(&s, ".gz name, plain data", &[]).fails_naming(&["plain.json.gz", "not gzip data"]);
}

// ---------------------------------------------------------------- Parquet

fn ids_parquet(n: i64) -> Vec<u8> {
    parquet_bytes(
        &RecordBatch::try_from_iter(vec![(
            "id",
            Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef,
        )])
        .unwrap(),
    )
}

/// A truncated Parquet footer → exit 1 naming the file; ignoreCorruptFiles skips and
/// records it, the good file lands.
#[test]
fn parquet_truncated_footer() {
    let s = Scratch::new();
    let good = ids_parquet(3);
    let bad = ids_parquet(5);
    s.land("good.parquet", &good);
    s.land("cut.parquet", &bad[..bad.len() - 20]);
    Run::ingest(&s, "truncated Parquet footer", &[]).fails_naming(&["cut.parquet is corrupt"]);
    let run = Run::ingest(
        &s,
        "truncated Parquet footer, ignoreCorruptFiles",
        &["ignoreCorruptFiles=true"],
    );
    run.ok();
    assert_eq!(run.figure("rows"), 3);
    assert!(recorded_files(&s).contains(&("cut.parquet".into(), true)));
}

/// A 0-byte `.parquet` and a text file named `.parquet` → exit 1 naming each.
#[test]
fn parquet_empty_and_not_parquet() {
    let s = Scratch::new();
    s.land("empty.parquet", "");
    Run::ingest(&s, "0-byte Parquet", &[]).fails_naming(&["empty.parquet is corrupt"]);
    let t = Scratch::new();
    t.land("text.parquet", "id\n1\n");
    Run::ingest(&t, "text named .parquet", &[]).fails_naming(&["text.parquet is corrupt"]);
}

/// Parquet columns with types Delta lacks (TIME, DURATION, UINT64 max) → read as STRING or
/// a wider type, every value kept.
#[test]
fn parquet_unsupported_types() {
    let s = Scratch::new();
    s.land(
        "a.parquet",
        parquet_bytes(
            &RecordBatch::try_from_iter(vec![
                ("id", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
                (
                    "t",
                    Arc::new(Time64MicrosecondArray::from(vec![3_723_000_000])) as _,
                ),
                ("d", Arc::new(DurationSecondArray::from(vec![5])) as _),
                ("u", Arc::new(UInt64Array::from(vec![u64::MAX])) as _),
            ])
            .unwrap(),
        ),
    );
    let run = Run::ingest(&s, "Parquet unsupported types", &[]);
    run.ok();
    let t = read_table(&s.table());
    assert_eq!(column_strings(&t, "t"), vec!["01:02:03"]);
    assert_eq!(column_strings(&t, "d"), vec!["PT5S"]);
    assert_eq!(column_strings(&t, "u"), vec!["18446744073709551615"]);
    assert!(rescued(&t).is_empty());
}

// ---------------------------------------------------------------- the file system

/// A file deleted between listing and reading → exit 1 naming it; the planned batch keeps
/// failing; ignoreMissingFiles skips it, records it, and the rest lands.
#[test]
fn file_deleted_between_listing_and_reading() {
    let s = Scratch::new();
    s.land("a.json", "{\"id\": 1}\n");
    let b = s.land("b.json", "{\"id\": 2}\n");
    let mut delete = || fs::remove_file(&b).unwrap();
    Run::ingest_paused(
        &s,
        "deleted between listing and reading",
        &[],
        Some(("after-plan", &mut delete)),
    )
    .fails_naming(&["b.json was deleted after it was listed"]);
    Run::ingest(&s, "deleted, rerun", &[]).fails_naming(&["b.json"]);
    let run = Run::ingest(
        &s,
        "deleted, ignoreMissingFiles",
        &["ignoreMissingFiles=true"],
    );
    run.ok();
    assert_eq!(column_strings(&read_table(&s.table()), "id"), vec!["1"]);
    assert!(recorded_files(&s).contains(&("b.json".into(), true)));
}

/// A file rewritten in place while it is being read → never a torn mix committed as
/// success: the run stops naming the file, commits nothing, and the next run takes the
/// file's current content, once.
#[test]
fn file_replaced_while_being_read() {
    let s = Scratch::new();
    let n = 150_000;
    let old: String = (0..n)
        .map(|i| format!("{{\"id\": {i}, \"pad\": \"pppppppppppppppppppp\"}}\n"))
        .collect();
    let path = s.land("a.json", &old);
    let mut rewrite = || {
        let mut f = fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(0).unwrap();
        f.write_all("{\"id\": 999999}\n".repeat(10).as_bytes())
            .unwrap();
    };
    let run = Run::ingest_paused(
        &s,
        "replaced while being read",
        &[],
        Some(("mid-read", &mut rewrite)),
    );
    run.fails_naming(&["a.json", "changed while it was being read"]);
    assert_eq!(table_rows(&s), 0);
    // The next run plans the batch again and takes the file's current content, once.
    Run::ingest(&s, "replaced while being read, next run", &[]).ok();
    assert_eq!(table_rows(&s), 10);
    Run::ingest(&s, "replaced while being read, third run", &[]).ok();
    assert_eq!(table_rows(&s), 10);
}

/// Symlink loops (a link to itself, a folder link to its parent) → the run finishes, each
/// real file lands once, and the looping link is reported (not silently passed over).
#[test]
fn symlink_loop() {
    let s = Scratch::new();
    s.land("a.json", "{\"id\": 1}\n");
    std::os::unix::fs::symlink("loop.json", s.landing().join("loop.json")).unwrap();
    fs::create_dir_all(s.landing().join("sub")).unwrap();
    std::os::unix::fs::symlink("..", s.landing().join("sub/up")).unwrap();
    let run = Run::ingest(&s, "symlink loop", &[]);
    run.ok();
    assert_eq!(column_strings(&read_table(&s.table()), "id"), vec!["1"]);
    assert!(
        run.stderr.contains("loop.json"),
        "[symlink loop] a warning names the link: {}",
        run.stderr
    );
}

/// A data file landed as a symlink to a regular file → not followed, and reported: a
/// warning names the link; the other file lands.
#[test]
fn symlink_to_a_data_file() {
    let s = Scratch::new();
    // The target sits in a hidden folder of the landing area, so only the link can bring it.
    s.land("_real/target.json", "{\"id\": 2}\n");
    std::os::unix::fs::symlink("_real/target.json", s.landing().join("link.json")).unwrap();
    s.land("a.json", "{\"id\": 1}\n");
    let run = Run::ingest(&s, "symlink to a data file", &[]);
    run.ok();
    assert_eq!(column_strings(&read_table(&s.table()), "id"), vec!["1"]);
    assert!(
        run.stderr.contains("link.json") && run.stderr.contains("symbolic link"),
        "[symlink to a data file] a warning names the link: {}",
        run.stderr
    );
}

/// Directories named like data files (`d.json/`, empty `e.csv/`) → not read as files; the
/// files inside them land.
#[test]
fn directory_named_like_a_data_file() {
    let s = Scratch::new();
    s.land("d.json/part.json", "{\"id\": 1}\n");
    fs::create_dir_all(s.landing().join("e.json")).unwrap();
    let run = Run::ingest(&s, "directory named like a data file", &[]);
    run.ok();
    assert_eq!(run.figure("files"), 1);
    assert_eq!(
        recorded_files(&s),
        vec![("d.json/part.json".to_string(), false)]
    );
}

/// An unreadable file (mode 000) → exit 1 naming it, unconsumed; ignoreCorruptFiles skips
/// it. Tests run as root, which bypasses permissions: then the file is simply read, and
/// only that is asserted.
#[test]
fn unreadable_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new();
    s.land("ok.json", "{\"id\": 1}\n");
    let locked = s.land("locked.json", "{\"id\": 2}\n");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let root = unsafe { libc::geteuid() } == 0;
    let run = Run::ingest(&s, "unreadable permissions", &[]);
    if root {
        // Root reads mode-000 files: the permission outcome cannot be observed here.
        run.ok();
        assert_eq!(
            sorted(column_strings(&read_table(&s.table()), "id")),
            vec!["1", "2"]
        );
        return;
    }
    run.fails_naming(&["locked.json"]);
    let run = Run::ingest(
        &s,
        "unreadable permissions, ignoreCorruptFiles",
        &["ignoreCorruptFiles=true"],
    );
    run.ok();
    assert_eq!(column_strings(&read_table(&s.table()), "id"), vec!["1"]);
}

/// File names with spaces, unicode, `..`, percent signs and a newline → each lands once
/// under its exact name, the commit records it, a rerun takes nothing, nothing is written
/// outside the table.
#[test]
fn file_names_with_spaces_unicode_dotdot_and_newlines() {
    let s = Scratch::new();
    let names = [
        "with space.json",
        "주문 🚀.json",
        "a..b.json",
        "k=../x.json",
        "new\nline.json",
        "pct%2F%20.json",
    ];
    for (i, n) in names.iter().enumerate() {
        s.land(n, format!("{{\"id\": {i}}}\n"));
    }
    let run = Run::ingest(&s, "odd file names", &[]);
    run.ok();
    assert_eq!(run.figure("files"), names.len() as u64);
    let t = read_table(&s.table());
    let mut got = Vec::new();
    for b in &t {
        let meta = b.column_by_name("_metadata").unwrap();
        let meta = arrow_array::cast::AsArray::as_struct(meta.as_ref());
        got.extend(column_strings(
            &[RecordBatch::from(meta.clone())],
            "file_name",
        ));
    }
    let mut want: Vec<String> = names
        .iter()
        .map(|n| Path::new(n).file_name().unwrap().to_string_lossy().into())
        .collect();
    want.sort();
    assert_eq!(sorted(got), want);
    let mut recorded: Vec<String> = recorded_files(&s).into_iter().map(|(p, _)| p).collect();
    recorded.sort();
    let mut keys: Vec<String> = names.iter().map(|n| (*n).to_string()).collect();
    keys.sort();
    assert_eq!(recorded, keys);
    let again = Run::ingest(&s, "odd file names, rerun", &[]);
    again.ok();
    assert_eq!(again.figure("files"), 0);
}

/// A corrupt file whose name has a newline and a space → the error still names it.
#[test]
fn corrupt_file_with_a_newline_in_its_name() {
    let s = Scratch::new();
    s.land("bad\nname x.json.gz", [0x1f, 0x8b, 0x08, 0x00, 1, 2, 3]);
    let run = Run::ingest(&s, "corrupt file with newline in name", &[]);
    run.fails_naming(&[]);
    assert!(
        run.stderr.contains("bad%0Aname%20x.json.gz") || run.stderr.contains("bad\nname x.json.gz"),
        "[corrupt file with newline in name] {}",
        run.stderr
    );
}

/// `cloudFiles.format=json` over a folder that also holds a CSV and a text note: their rows
/// still land (raw, in the rescued data, as Spark reads them), and a warning names each
/// misfit file once; the JSON file gets none.
#[test]
fn files_that_do_not_look_like_the_format_are_named_once() {
    let s = Scratch::new();
    s.land("a.json", crate::common::orders_jsonl(1, 4));
    s.land("b.csv", "order_id,amount\n9,10\n");
    s.land("notes.txt", "remember to rotate the keys\nand the logs\n");
    let out = s.ingest(&["cloudFiles.format=json"]);
    crate::common::ok(&out);
    let err = crate::common::stderr(&out);
    assert_eq!(err.matches("b.csv").count(), 1, "{err}");
    assert!(err.contains("named like a csv file"), "{err}");
    assert_eq!(err.matches("notes.txt").count(), 1, "{err}");
    assert!(
        err.contains("None of this file's 2 records parsed as json"),
        "{err}"
    );
    assert!(!err.contains("a.json"), "{err}");
    let rows = crate::common::row_count(&crate::common::read_table(&s.table()));
    assert_eq!(rows, 3 + 2 + 2, "nothing dropped");
    // A rerun has nothing new and says nothing again.
    let again = s.ingest(&["cloudFiles.format=json"]);
    assert!(
        !crate::common::stderr(&again).contains("b.csv"),
        "{}",
        crate::common::stderr(&again)
    );
}
