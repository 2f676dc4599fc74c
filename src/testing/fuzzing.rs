//! Fuzzing entry points: one function per `cargo fuzz` target (see `fuzz/README.md`).
//!
//! They live in the library so the nightly fuzz targets and the stable `fuzz_smoke` tests
//! drive exactly the same code. Each takes arbitrary bytes, feeds them through a parser or
//! decoder the way the service does, and panics only when the library misbehaves: errors
//! are expected answers to bad input, a panic never is.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use arrow_array::RecordBatch;

use crate::checkpoint::{Checkpoint, CommitSummary, Plan};
use crate::formats::{self, DecodeError, DecodeOptions, FileStats, SourceFile};
use crate::location::Location;
use crate::options::{self, Format, RESCUED_DATA_COLUMN};
use crate::parse::json::{JsonArena, JsonValue};
use crate::record::{FileMeta, RowBuilder, TableLayout};
use crate::schema::hints::{MAX_TYPE_DEPTH, apply_hints, parse_hints, parse_schema};
use crate::schema::infer::SchemaInferrer;
use crate::schema::{DataType, Field, Schema};
use crate::source::FileRef;
use crate::storage::StorageSettings;

/// A schema with a column of every type, so decoded values can fail to fit and be rescued.
const FIXED_SCHEMA: &str = "order_id BIGINT, user_id STRING, amount DECIMAL(10,2), \
    order_date TIMESTAMP, day DATE, ok BOOLEAN, ratio DOUBLE, f FLOAT, i INT, s SMALLINT, \
    b TINYINT, bin BINARY, city STRING, zip STRING, phone STRING, \
    address STRUCT<city: STRING, zip: INT>, \
    items ARRAY<STRUCT<product_id: STRING, qty: INT, price: DECIMAL(12,2)>>, \
    tags ARRAY<STRING>, attrs MAP<STRING, BIGINT>";

/// Records every hinted or DDL schema is exercised with: each JSON type in each position.
const SAMPLE_RECORDS: &[&str] = &[
    r#"{"order_id": 1, "user_id": "u1", "amount": 10.25, "order_date": "2026-03-13T10:07:00Z", "day": "2026-03-13", "ok": true, "ratio": 1e3, "address": {"city": "Busan", "zip": 131}, "items": [{"product_id": "p1", "qty": 2, "price": 9.99}], "tags": ["a", null], "attrs": {"k": 1}}"#,
    r#"{"order_id": "x", "amount": "1e400", "order_date": 5, "day": [], "ok": "yes", "address": [1], "items": {"a": 1}, "attrs": [], "bin": "AQID", "new": {"deep": [[[1]]]}}"#,
    r#"{"ORDER_ID": 2, "order_id": 3, "order_id": 4, "i": 99999999999, "s": 70000, "b": -129, "f": 3.5e38}"#,
    r#"{"a": null, "b": {}, "c": [], "d": "", "e": 0, "f": -0.0, "g": false}"#,
];

/// A CSV header and row for the text path of the same layouts.
const SAMPLE_HEADER: &[&str] = &["order_id", "amount", "order_date", "items", "other"];
const SAMPLE_ROW: &[&str] = &["7", "12.345", "2026-03-13 10:07", "[]", "x"];

/// Parses the bytes as `cloudFiles.schemaHints` and as a DDL `schema`, applies the hints
/// to an empty and to a populated schema, checks the schema survives its stored (Spark
/// JSON) form, and decodes sample records into each resulting layout.
#[doc(hidden)]
pub fn fuzz_hints(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_hints(text) {
        Ok(hints) => {
            for base in [Schema::default(), fixed_schema()] {
                let mut schema = base;
                if apply_hints(&mut schema, &hints).is_ok() {
                    check_schema(schema);
                }
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
    match parse_schema(text) {
        Ok(schema) => check_schema(schema),
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// Checks our JSON parser against serde_json on the whole input and each line, then
/// decodes the bytes as a JSON file: JSON lines and `multiLine`, each with the schema
/// inferred from the file and with [`FIXED_SCHEMA`], plus a FAILFAST, case-insensitive
/// run with a small `maxRecordBytes`.
#[doc(hidden)]
pub fn fuzz_json(data: &[u8]) {
    // Our JSON parser accepts exactly what serde_json accepts, with the same value.
    let mut arena = JsonArena::new();
    for text in std::iter::once(data).chain(data.split(|b| *b == b'\n')) {
        // One text's values at a time, as a reader keeps them.
        arena.reset();
        match (
            JsonValue::parse(&arena, text),
            serde_json::from_slice::<serde_json::Value>(text),
        ) {
            (Ok(ours), Ok(theirs)) => assert_eq!(ours.to_value(), theirs, "{text:?}"),
            (Err(_), Err(_)) => {}
            (ours, theirs) => panic!("parsers disagree on {text:?}: {ours:?} / {theirs:?}"),
        }
        // Every extension on: what strict JSON accepts reads the same.
        let lenient = JsonValue::parse_with(&arena, text, LENIENT);
        if let Ok(strict) = JsonValue::parse(&arena, text) {
            assert_eq!(lenient.as_ref().ok(), Some(&strict), "{text:?}");
        }
    }
    let scratch = Scratch::new("json");
    let file = scratch.source_file("input.json", data);
    for multi_line in ["false", "true"] {
        let opts = decode_options(Format::Json, &[("multiLine", multi_line)]);
        decode_inferred(&file, &opts);
        decode_checked(&file, &opts, &fixed_layout());
    }
    let opts = decode_options(
        Format::Json,
        &[
            ("mode", "FAILFAST"),
            ("readerCaseSensitive", "false"),
            ("cloudFiles.maxRecordBytes", "64"),
            ("timeZone", "America/New_York"),
        ],
    );
    decode_checked(&file, &opts, &fixed_layout());
    let opts = decode_options(
        Format::Json,
        &[("multiLine", "true"), ("cloudFiles.maxRecordBytes", "64")],
    );
    decode_checked(&file, &opts, &fixed_layout());
    // Every dialect extension, as lines, as documents, and split on a custom separator.
    for extra in [
        ("multiLine", "false"),
        ("multiLine", "true"),
        ("lineSep", ";"),
    ] {
        let opts = decode_options(
            Format::Json,
            &[
                ("allowComments", "true"),
                ("allowUnquotedFieldNames", "true"),
                ("prefersDecimal", "true"),
                ("cloudFiles.format", "json"),
                extra,
            ],
        );
        decode_inferred(&file, &opts);
        decode_checked(&file, &opts, &fixed_layout());
    }
}

/// Every JSON extension the dialect options allow.
const LENIENT: crate::parse::json::JsonDialect = crate::parse::json::JsonDialect {
    single_quotes: true,
    non_numeric_numbers: true,
    comments: true,
    unquoted_field_names: true,
};

/// Decodes the bytes as a CSV file: with a header and without, the default dialect and a
/// `;`/`'`/no-escape one with a `nullValue`, each with the inferred schema and
/// [`FIXED_SCHEMA`], plus a FAILFAST, case-insensitive run with a small `maxRecordBytes`.
#[doc(hidden)]
pub fn fuzz_csv(data: &[u8]) {
    let scratch = Scratch::new("csv");
    let file = scratch.source_file("input.csv", data);
    let dialects: [&[(&str, &str)]; 3] = [
        &[],
        &[("header", "false")],
        &[
            ("sep", ";"),
            ("quote", "'"),
            ("escape", ""),
            ("nullValue", "NA"),
        ],
    ];
    for dialect in dialects {
        let opts = decode_options(Format::Csv, dialect);
        decode_inferred(&file, &opts);
        decode_checked(&file, &opts, &fixed_layout());
    }
    let opts = decode_options(
        Format::Csv,
        &[
            ("mode", "FAILFAST"),
            ("readerCaseSensitive", "false"),
            ("cloudFiles.maxRecordBytes", "64"),
            ("timeZone", "Asia/Seoul"),
        ],
    );
    decode_checked(&file, &opts, &fixed_layout());
    // The reader options: comments, whitespace, emptyValue (raw text captured), a record
    // separator, and Java date and timestamp patterns.
    let opts = decode_options(
        Format::Csv,
        &[
            ("comment", "#"),
            ("ignoreLeadingWhiteSpace", "true"),
            ("ignoreTrailingWhiteSpace", "true"),
            ("emptyValue", "<e>"),
            ("lineSep", ";"),
            ("timestampFormat", "dd/MM/yyyy HH:mm[:ss][XXX]"),
            ("dateFormat", "dd/MM/yyyy"),
        ],
    );
    decode_inferred(&file, &opts);
    decode_checked(&file, &opts, &fixed_layout());
}

/// Opens a checkpoint whose `state.redb` is made from the bytes (a damaged state file must
/// be set aside, not crash the process) and reads everything back.
///
/// Input starting with [`PATCH_MODE`] is a list of 5-byte edits (`u32` LE offset, XOR byte)
/// to a valid state file: a state file is megabytes, so raw input never gets past redb's
/// header checks, while edits reach the tables the read methods walk. Any other input is
/// the state file itself.
#[doc(hidden)]
pub fn fuzz_checkpoint(data: &[u8]) {
    let state = match data.strip_prefix(PATCH_MODE) {
        Some(edits) => {
            let mut state = template_state().to_vec();
            for edit in edits.chunks_exact(5) {
                let offset = u32::from_le_bytes([edit[0], edit[1], edit[2], edit[3]]) as usize;
                let len = state.len();
                state[offset % len] ^= edit[4];
            }
            state
        }
        None => data.to_vec(),
    };
    let scratch = Scratch::new("checkpoint");
    let dir = scratch.path().join("checkpoint");
    std::fs::create_dir_all(&dir).expect("the temp dir is writable");
    std::fs::write(dir.join("state.redb"), state).expect("the temp dir is writable");
    let Ok(checkpoint) = Checkpoint::open(
        &Location::Local(dir.clone()),
        &StorageSettings::local(dir.clone()),
    ) else {
        return;
    };
    assert!(
        !checkpoint.stream_id().is_empty(),
        "an open checkpoint has a stream id"
    );
    let _ = checkpoint.is_fresh();
    let _ = checkpoint.meta("streamId");
    let _ = checkpoint.pending_plans();
    let _ = checkpoint.commits();
    let _ = checkpoint.next_batch();
    if let Ok(seen) = checkpoint.seen_files() {
        let _ = seen.len();
        for key in [
            "orders/2026-03-10.json",
            "orders/2026-03-12.json",
            "",
            "zzz",
        ] {
            let _ = seen.get(key);
        }
    }
}

/// The first byte of a [`fuzz_checkpoint`] input that edits a valid state file.
pub const PATCH_MODE: &[u8] = b"P";

/// A valid state file with committed batches, a pending plan and stream metadata, written
/// once per process by this build.
fn template_state() -> &'static [u8] {
    static STATE: OnceLock<Vec<u8>> = OnceLock::new();
    STATE.get_or_init(|| {
        let scratch = Scratch::new("checkpoint-template");
        {
            let c = Checkpoint::open(
                &Location::Local(scratch.path().to_path_buf()),
                &StorageSettings::local(scratch.path().to_path_buf()),
            )
            .expect("a new checkpoint opens");
            for batch in 0..3 {
                let plan = Plan {
                    batch,
                    files: vec![FileRef {
                        key: format!("orders/2026-03-1{batch}.json"),
                        size: 1377,
                        mtime_ms: 1_773_396_420_000,
                    }],
                    created_at_ms: 1_773_396_420_000,
                };
                c.write_plan(&plan).expect("a new checkpoint takes plans");
                if batch < 2 {
                    let summary = CommitSummary {
                        table_version: batch,
                        rows: 5,
                        ..CommitSummary::default()
                    };
                    c.mark_committed(&plan, &summary)
                        .expect("a new checkpoint takes commits");
                }
            }
        }
        std::fs::read(scratch.path().join("state.redb")).expect("the state file was written")
    })
}

/// A directory under the system temp dir, unique to this call, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(kind: &str) -> Scratch {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "autoloader-fuzz-{kind}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("the temp dir is writable");
        Scratch(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `data` as a file and describes it the way discovery would.
    fn source_file(&self, name: &str, data: &[u8]) -> SourceFile {
        let path = self.0.join(name);
        std::fs::write(&path, data).expect("the temp dir is writable");
        // Planned with its real modification time, or the decoder sees it as changed.
        let mtime_ms = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        SourceFile {
            local_path: path,
            remote: None,
            meta: Arc::new(FileMeta {
                path: format!("file:///landing/{name}"),
                name: name.to_string(),
                size: data.len() as u64,
                mtime_ms,
                partition_values: vec![Some("2026-03-13".into())],
                stamp: None,
            }),
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Decode options as `options::resolve` makes them from the given reader options.
fn decode_options(format: Format, raw: &[(&str, &str)]) -> DecodeOptions {
    let raw: Vec<(String, String)> = raw
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    let (settings, _) = options::resolve(&raw, &Location::Local("/fuzz/checkpoint".into()))
        .expect("fuzz options are valid");
    DecodeOptions::new(format, &settings)
}

fn fixed_schema() -> Schema {
    parse_schema(FIXED_SCHEMA).expect("the fixed schema parses")
}

fn fixed_layout() -> Arc<TableLayout> {
    Arc::new(layout(fixed_schema()).expect("the fixed schema has no rescued column"))
}

/// The layout ingestion builds for a data schema: the rescued-data column added (a data
/// column of that name must be STRING, or the stream refuses to start), one partition
/// column and `_metadata`.
fn layout(mut data: Schema) -> Option<TableLayout> {
    match data.fields.iter().find(|f| f.name == RESCUED_DATA_COLUMN) {
        Some(f) if f.data_type != DataType::String => return None,
        Some(_) => {}
        None => data
            .fields
            .push(Field::new(RESCUED_DATA_COLUMN, DataType::String)),
    }
    let partition = Schema::new(vec![Field::new("day_partition", DataType::String)]);
    Some(TableLayout {
        data,
        partition,
        rescued: Some(RESCUED_DATA_COLUMN.to_string()),
        corrupt: None,
        include_metadata: true,
        stamps: None,
    })
}

/// Infers the file's schema as the first run of a stream would, then decodes the file
/// with it.
fn decode_inferred(file: &SourceFile, opts: &DecodeOptions) {
    let mut inferrer = SchemaInferrer::new();
    if formats::infer_file(file, opts, true, &mut inferrer).is_err() {
        return;
    }
    let schema = inferrer.finish();
    check_spark_json(&schema);
    if let Some(layout) = layout(schema) {
        decode_checked(file, opts, &Arc::new(layout));
    }
}

/// Decodes the file and checks what came out: every batch has the layout's schema, and
/// the rows reported are the rows emitted.
fn decode_checked(
    file: &SourceFile,
    opts: &DecodeOptions,
    layout: &Arc<TableLayout>,
) -> Option<FileStats> {
    let expected = layout.arrow_schema();
    let mut emitted = 0u64;
    let mut emit = |batch: RecordBatch| {
        assert_eq!(batch.schema(), expected, "a batch has the layout's schema");
        emitted += batch.num_rows() as u64;
        true
    };
    match formats::decode_file(file, opts, layout, None, &mut emit) {
        Ok(stats) => {
            assert_eq!(stats.rows, emitted, "reported rows are the emitted rows");
            check_carried(file, opts, layout, stats.rows);
            Some(stats)
        }
        Err(e) => {
            assert!(
                !matches!(
                    e,
                    DecodeError::Changed { .. } | DecodeError::Cancelled { .. }
                ),
                "nothing changed or cancelled the read: {e}"
            );
            let _ = e.to_string();
            None
        }
    }
}

/// The file read twice with its rows carried from the first read into the second (as a
/// decoding thread carries small files' rows): every row is emitted or carried, once.
fn check_carried(file: &SourceFile, opts: &DecodeOptions, layout: &Arc<TableLayout>, rows: u64) {
    let expected = layout.arrow_schema();
    let mut carried = formats::CarriedRows::default();
    let mut out = 0u64;
    for _ in 0..2 {
        let mut emit = |batch: RecordBatch| {
            assert_eq!(
                batch.schema(),
                expected,
                "a carried batch has the layout's schema"
            );
            out += batch.num_rows() as u64;
            true
        };
        let stats = formats::decode_file(file, opts, layout, Some(&mut carried), &mut emit)
            .expect("a file that decoded decodes again with its rows carried");
        assert_eq!(
            stats.rows, rows,
            "a file's rows are counted per file when carried"
        );
    }
    if let Some(last) = carried.take_batch() {
        assert_eq!(last.schema(), expected);
        out += last.num_rows() as u64;
    }
    assert_eq!(
        out,
        2 * rows,
        "every row of both reads is emitted or carried, once"
    );
}

/// A schema must survive its stored form and turn into a layout that sample records
/// decode into.
fn check_schema(schema: Schema) {
    let _ = schema.to_string();
    check_spark_json(&schema);
    let Some(layout) = layout(schema) else {
        return;
    };
    let layout = Arc::new(layout);
    let expected = layout.arrow_schema();
    let meta = Arc::new(FileMeta {
        path: "file:///landing/sample.json".into(),
        name: "sample.json".into(),
        size: 0,
        mtime_ms: 0,
        partition_values: vec![None],
        stamp: None,
    });
    let opts = decode_options(Format::Json, &[]);
    let mut rows = RowBuilder::new(Arc::clone(&layout), opts.ctx, meta);
    let arena = JsonArena::new();
    for record in SAMPLE_RECORDS {
        match JsonValue::parse(&arena, record.as_bytes()).expect("sample records are JSON") {
            JsonValue::Object(entries) => rows.append_json_object(entries),
            other => unreachable!("sample records are objects, not {other:?}"),
        }
    }
    let columns: Vec<String> = rows.column_names().map(str::to_string).collect();
    let headers: Vec<String> = SAMPLE_HEADER.iter().map(|h| (*h).to_string()).collect();
    let targets: Vec<Option<usize>> = headers
        .iter()
        .map(|h| columns.iter().position(|c| c == h))
        .collect();
    let cells: Vec<Option<&str>> = SAMPLE_ROW.iter().map(|c| Some(*c)).collect();
    rows.append_text_record(&headers, &targets, &cells, &[], None);
    rows.append_corrupt("{not json");
    let batch = rows.finish();
    assert_eq!(batch.schema(), expected, "a batch has the layout's schema");
    assert_eq!(batch.num_rows(), SAMPLE_RECORDS.len() + 2);
}

/// The schema store keeps schemas as Spark JSON: reading one back must give the same
/// schema. Only a schema nested deeper than the hint parser allows may fail to read (the
/// store refuses to write those).
fn check_spark_json(schema: &Schema) {
    let text = schema.to_spark_json();
    match Schema::from_spark_json(&text) {
        Ok(back) => assert_eq!(&back, schema, "a schema survives its Spark JSON form"),
        Err(e) => {
            let deepest = schema.fields.iter().map(|f| depth(&f.data_type)).max();
            assert!(
                deepest > Some(MAX_TYPE_DEPTH),
                "a schema {deepest:?} deep does not read back: {e}"
            );
        }
    }
}

/// How many nested types are open at the deepest point of a type.
fn depth(t: &DataType) -> usize {
    match t {
        DataType::Struct(fields) => {
            1 + fields
                .iter()
                .map(|f| depth(&f.data_type))
                .max()
                .unwrap_or(0)
        }
        DataType::Array(element) => 1 + depth(element),
        DataType::Map(key, value) => 1 + depth(key).max(depth(value)),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows carried in one layout are never dropped by a file read in another: they stay
    /// carried, and that file's rows go out on their own.
    #[test]
    fn rows_carried_in_another_layout_stay_carried() {
        let scratch = Scratch::new("carry");
        let file = scratch.source_file("a.json", b"{\"id\": 1}\n{\"id\": 2}\n");
        let opts = decode_options(Format::Json, &[]);
        let (first, second) = (fixed_layout(), fixed_layout());
        let mut carried = formats::CarriedRows::default();
        let mut emitted = Vec::new();
        let mut emit = |batch: RecordBatch| {
            emitted.push(batch.num_rows());
            true
        };
        formats::decode_file(&file, &opts, &first, Some(&mut carried), &mut emit).unwrap();
        formats::decode_file(&file, &opts, &second, Some(&mut carried), &mut emit).unwrap();
        assert_eq!(
            emitted,
            [2],
            "the second layout's rows went out on their own"
        );
        let kept = carried
            .take_batch()
            .expect("the first layout's rows are still carried");
        assert_eq!(kept.num_rows(), 2);
    }
}
