//! The reader's Spark options and the places it differs from Spark on purpose (README,
//! "Reader decisions"), end to end on the real binary: what lands in the table, typed.

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use arrow_schema::DataType;

use crate::common::{Scratch, column_strings, ok, read_table, run, stderr, summary_figure};

fn column_type(batches: &[RecordBatch], name: &str) -> DataType {
    batches[0]
        .schema()
        .field_with_name(name)
        .unwrap_or_else(|_| panic!("no column {name}"))
        .data_type()
        .clone()
}

/// Rows sorted by the `id` column, as (id, value of `name`) strings.
fn by_id(batches: &[RecordBatch], name: &str) -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> = column_strings(batches, "id")
        .into_iter()
        .zip(column_strings(batches, name))
        .collect();
    rows.sort();
    rows
}

/// The values of a DOUBLE column in `id` order.
fn doubles(batches: &[RecordBatch], name: &str) -> Vec<f64> {
    let mut rows: Vec<(i64, f64)> = Vec::new();
    for b in batches {
        let ids = column_strings(std::slice::from_ref(b), "id");
        let values = b
            .column_by_name(name)
            .unwrap()
            .as_primitive::<Float64Type>();
        for (i, id) in ids.iter().enumerate() {
            rows.push((id.parse().unwrap(), values.value(i)));
        }
    }
    rows.sort_by_key(|(id, _)| *id);
    rows.into_iter().map(|(_, v)| v).collect()
}

fn rescued_rows(stdout: &str) -> u64 {
    summary_figure(stdout, "rescued rows")
}

/// Item 7: NaN and the infinities (Spark's default `allowNonNumericNumbers=true`) are DOUBLE
/// values, not malformed records; with the option off they are malformed again.
#[test]
fn json_non_numeric_numbers_are_doubles() {
    let s = Scratch::new();
    s.land(
        "a.json",
        "{\"id\": 1, \"x\": NaN}\n{\"id\": 2, \"x\": -INF}\n{\"id\": 3, \"x\": Infinity}\n\
         {\"id\": 4, \"x\": +Infinity}\n{\"id\": 5, \"x\": -Infinity}\n{\"id\": 6, \"x\": 1.5}\n",
    );
    let out = ok(&s.ingest(&["cloudFiles.inferColumnTypes=true"]));
    assert_eq!(rescued_rows(&out), 0, "{out}");
    let t = read_table(&s.table());
    assert_eq!(column_type(&t, "x"), DataType::Float64);
    let x = doubles(&t, "x");
    assert!(x[0].is_nan(), "{x:?}");
    assert_eq!(
        x[1..].to_vec(),
        vec![
            f64::NEG_INFINITY,
            f64::INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1.5
        ]
    );

    let strict = Scratch::new();
    strict.land(
        "a.json",
        "{\"id\": 1, \"x\": NaN}\n{\"id\": 2, \"x\": 1.5}\n",
    );
    let out = ok(&strict.ingest(&[
        "cloudFiles.inferColumnTypes=true",
        "allowNonNumericNumbers=false",
    ]));
    assert_eq!(rescued_rows(&out), 1, "{out}");
}

/// Item 8: single quotes (Spark's default `allowSingleQuotes=true`) read as normal JSON;
/// with the option off the record is malformed (kept raw).
#[test]
fn json_single_quotes_read_as_json() {
    let s = Scratch::new();
    s.land(
        "a.json",
        "{'id':1,'a':'x','b':'it\\'s \"q\"'}\n{\"id\": 2, \"a\": \"y\"}\n",
    );
    let out = ok(&s.ingest(&[]));
    assert_eq!(rescued_rows(&out), 0, "{out}");
    let t = read_table(&s.table());
    assert_eq!(
        by_id(&t, "a"),
        vec![("1".into(), "x".into()), ("2".into(), "y".into())]
    );
    assert_eq!(by_id(&t, "b")[0].1, "it's \"q\"");

    let strict = Scratch::new();
    strict.land("a.json", "{'id':1}\n{\"id\": 2}\n");
    let out = ok(&strict.ingest(&["allowSingleQuotes=false"]));
    assert_eq!(rescued_rows(&out), 1, "{out}");
}

/// `allowComments` and `allowUnquotedFieldNames` (both off by default, as in Spark).
#[test]
fn json_comments_and_unquoted_names_when_allowed() {
    let text = "{id: 1, /* note */ \"a\": \"x\"} // trailing\n{id: 2, a: \"y\"}\n";
    let s = Scratch::new();
    s.land("a.json", text);
    let out = ok(&s.ingest(&["allowComments=true", "allowUnquotedFieldNames=true"]));
    assert_eq!(rescued_rows(&out), 0, "{out}");
    assert_eq!(
        by_id(&read_table(&s.table()), "a"),
        vec![("1".into(), "x".into()), ("2".into(), "y".into())]
    );
    let off = Scratch::new();
    off.land("a.json", text);
    off.land("b.json", "{\"id\": 3}\n");
    let out = ok(&off.ingest(&[]));
    assert_eq!(rescued_rows(&out), 2, "{out}");
}

/// Multi-line documents are read with the same dialect as JSON lines: single quotes, NaN,
/// and (when allowed) comments, also where they hold `]`, `,` or quotes; elements stream one
/// by one, and a broken element is a corrupt file at its line.
#[test]
fn json_multiline_documents_use_the_dialect() {
    let s = Scratch::new();
    s.land(
        "a.json",
        "[\n  {'id': 1, 'a': 'x], \"q\"'},\n  // a comment, with ] and ,\n  {\"id\": 2, \"a\": \"[,]\", \
         \"n\": NaN} /* ] */ ,\n  {\"id\": 3, \"a\": [\"p\", {\"q\": \"]\"}]}\n]\n",
    );
    s.land("b.json", "{'id': 4, 'a': 'y'}");
    let out = ok(&s.ingest(&["multiLine=true", "allowComments=true"]));
    assert_eq!(summary_figure(&out, "rows"), 4, "{out}");
    assert_eq!(rescued_rows(&out), 0, "{out}");
    assert_eq!(
        by_id(&read_table(&s.table()), "a"),
        vec![
            ("1".into(), "x], \"q\"".into()),
            ("2".into(), "[,]".into()),
            ("3".into(), "[\"p\",{\"q\":\"]\"}]".into()),
            ("4".into(), "y".into())
        ]
    );
    let broken = Scratch::new();
    broken.land("bad.json", "[\n{\"id\": 1},\n{\"id\": 2,\n \"a\": }\n]\n");
    let out = broken.ingest(&["multiLine=true"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("bad.json is corrupt at line 4"),
        "{}",
        stderr(&out)
    );
    let open = Scratch::new();
    open.land("open.json", "[{\"id\": 1}, {\"id\": 2}");
    let out = open.ingest(&["multiLine=true"]);
    assert!(stderr(&out).contains("never closed"), "{}", stderr(&out));
    let trailing = Scratch::new();
    trailing.land("t.json", "[{\"id\": 1}] x");
    let out = trailing.ingest(&["multiLine=true"]);
    assert!(
        stderr(&out).contains("trailing characters"),
        "{}",
        stderr(&out)
    );
}

/// `lineSep`: JSON records split on a custom separator (any string), numbered as lines.
#[test]
fn json_line_sep_splits_records() {
    let s = Scratch::new();
    s.land(
        "a.json",
        "{\"id\": 1, \"a\": \"x\\ny\"}\u{1e}{\"id\": 2, \"a\": \"z\"}\u{1e}\n{\"id\": 3}",
    );
    let out = ok(&s.ingest(&["lineSep=\\u001e", "cloudFiles.format=json"]));
    assert_eq!(summary_figure(&out, "rows"), 3, "{out}");
    assert_eq!(rescued_rows(&out), 0, "{out}");
    assert_eq!(
        by_id(&read_table(&s.table()), "a"),
        vec![
            ("1".into(), "x\ny".into()),
            ("2".into(), "z".into()),
            ("3".into(), "null".into())
        ]
    );
    let multi = Scratch::new();
    multi.land("a.json", "{\"id\": 1}||{\"id\": 2}||");
    let out = ok(&multi.ingest(&["lineSep=||", "cloudFiles.format=json"]));
    assert_eq!(summary_figure(&out, "rows"), 2, "{out}");
}

/// Item 12: a JSON integer of 39+ digits infers STRING and its digits land (Spark's
/// DOUBLE rescued every value and left the column null).
#[test]
fn json_integers_beyond_38_digits_land_as_strings() {
    let big = format!("1{}", "0".repeat(38));
    let s = Scratch::new();
    s.land(
        "a.json",
        format!("{{\"id\": 1, \"n\": {big}}}\n{{\"id\": 2, \"n\": -{big}7}}\n"),
    );
    let out = ok(&s.ingest(&["cloudFiles.inferColumnTypes=true"]));
    assert_eq!(rescued_rows(&out), 0, "{out}");
    let t = read_table(&s.table());
    assert_eq!(column_type(&t, "n"), DataType::Utf8);
    assert_eq!(
        by_id(&t, "n"),
        vec![("1".into(), big.clone()), ("2".into(), format!("-{big}7"))]
    );
}

/// Item 10: a field that is always `{}` is a STRING column holding `{}` (Spark drops it).
#[test]
fn json_always_empty_object_is_a_string_column() {
    let s = Scratch::new();
    s.land("a.json", "{\"id\": 1, \"e\": {}}\n{\"id\": 2, \"e\": {}}\n");
    let out = ok(&s.ingest(&["cloudFiles.inferColumnTypes=true"]));
    assert_eq!(rescued_rows(&out), 0, "{out}");
    let t = read_table(&s.table());
    assert_eq!(column_type(&t, "e"), DataType::Utf8);
    assert_eq!(
        by_id(&t, "e"),
        vec![("1".into(), "{}".into()), ("2".into(), "{}".into())]
    );
}

/// `primitivesAsString` and `prefersDecimal` change typed JSON inference.
#[test]
fn json_primitives_as_string_and_prefers_decimal() {
    let s = Scratch::new();
    s.land("a.json", "{\"id\": 1, \"amt\": 12.50, \"ok\": true}\n");
    ok(&s.ingest(&[
        "cloudFiles.inferColumnTypes=true",
        "primitivesAsString=true",
    ]));
    let t = read_table(&s.table());
    assert_eq!(column_type(&t, "id"), DataType::Utf8);
    assert_eq!(column_type(&t, "ok"), DataType::Utf8);
    assert_eq!(column_strings(&t, "amt"), vec!["12.50"]);

    let d = Scratch::new();
    d.land(
        "a.json",
        "{\"id\": 1, \"amt\": 12.50}\n{\"id\": 2, \"amt\": 0.01}\n",
    );
    let out = ok(&d.ingest(&["cloudFiles.inferColumnTypes=true", "prefersDecimal=true"]));
    assert_eq!(rescued_rows(&out), 0, "{out}");
    let t = read_table(&d.table());
    assert_eq!(column_type(&t, "amt"), DataType::Decimal128(4, 2));
    assert_eq!(
        by_id(&t, "amt"),
        vec![("1".into(), "12.50".into()), ("2".into(), "0.01".into())]
    );
}

/// Item 9: a CSV column of timestamps and dates infers TIMESTAMP, and its date-only values
/// land as midnight (they were all rescued); so does a hinted TIMESTAMP column.
#[test]
fn csv_dates_in_timestamp_columns_read_as_midnight() {
    let csv = "id,ts\n1,2024-01-15T10:30:00Z\n2,2024-01-16\n";
    let s = Scratch::new();
    s.land("a.csv", csv);
    let out = ok(&s.ingest(&["cloudFiles.inferColumnTypes=true"]));
    assert_eq!(rescued_rows(&out), 0, "{out}");
    let t = read_table(&s.table());
    assert!(matches!(column_type(&t, "ts"), DataType::Timestamp(..)));
    assert_eq!(
        by_id(&t, "ts"),
        vec![
            ("1".into(), "2024-01-15T10:30:00Z".into()),
            ("2".into(), "2024-01-16T00:00:00Z".into())
        ]
    );
    let hinted = Scratch::new();
    hinted.land("a.csv", csv);
    let out = ok(&hinted.ingest(&["cloudFiles.schemaHints=ts TIMESTAMP", "timeZone=Asia/Seoul"]));
    assert_eq!(rescued_rows(&out), 0, "{out}");
    assert_eq!(
        by_id(&read_table(&hinted.table()), "ts")[1].1,
        "2024-01-15T15:00:00Z",
        "midnight in timeZone"
    );
}

/// `timestampFormat` / `dateFormat`: Java patterns, used by inference and reading alike.
#[test]
fn csv_timestamp_and_date_formats() {
    let s = Scratch::new();
    s.land(
        "a.csv",
        "id,ts,d\n1,15/01/2024 10:30,15/01/2024\n2,16/01/2024,31/12/2023\n",
    );
    let out = ok(&s.ingest(&[
        "cloudFiles.inferColumnTypes=true",
        "timestampFormat=dd/MM/yyyy HH:mm",
        "dateFormat=dd/MM/yyyy",
    ]));
    assert_eq!(rescued_rows(&out), 0, "{out}");
    let t = read_table(&s.table());
    assert!(matches!(column_type(&t, "ts"), DataType::Timestamp(..)));
    assert_eq!(column_type(&t, "d"), DataType::Date32);
    assert_eq!(
        by_id(&t, "ts"),
        vec![
            ("1".into(), "2024-01-15T10:30:00Z".into()),
            ("2".into(), "2024-01-16T00:00:00Z".into())
        ]
    );
    assert_eq!(
        by_id(&t, "d"),
        vec![
            ("1".into(), "2024-01-15".into()),
            ("2".into(), "2023-12-31".into())
        ]
    );
    // Without the formats these are strings.
    let plain = Scratch::new();
    plain.land("a.csv", "id,d\n1,15/01/2024\n");
    ok(&plain.ingest(&["cloudFiles.inferColumnTypes=true"]));
    assert_eq!(
        column_type(&read_table(&plain.table()), "d"),
        DataType::Utf8
    );
    // A pattern letter we cannot translate is refused naming it (exit 2).
    let out = plain.ingest(&["timestampFormat=yyyy-MM-dd G"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("timestampFormat"), "{}", stderr(&out));
}

/// Item 11: CSV header names keep their spaces (as in Spark); the whitespace options trim
/// names and values.
#[test]
fn csv_header_spaces_follow_spark() {
    let csv = "id, a ,b\n1, x ,y\n";
    let s = Scratch::new();
    s.land("a.csv", csv);
    ok(&s.ingest(&[]));
    let t = read_table(&s.table());
    assert_eq!(column_strings(&t, " a "), vec![" x "]);
    let trimmed = Scratch::new();
    trimmed.land("a.csv", csv);
    ok(&trimmed.ingest(&[
        "ignoreLeadingWhiteSpace=true",
        "ignoreTrailingWhiteSpace=true",
    ]));
    let t = read_table(&trimmed.table());
    assert_eq!(column_strings(&t, "a"), vec!["x"]);
    let leading = Scratch::new();
    leading.land("a.csv", csv);
    ok(&leading.ingest(&["ignoreLeadingWhiteSpace=true"]));
    assert_eq!(
        column_strings(&read_table(&leading.table()), "a "),
        vec!["x "]
    );
}

/// `comment`, `lineSep` and `emptyValue` for CSV.
#[test]
fn csv_comment_line_sep_and_empty_value() {
    let s = Scratch::new();
    s.land("a.csv", "# exported\nid,a\n1,x\n# skipped\n2,y\n");
    let out = ok(&s.ingest(&["comment=#"]));
    assert_eq!(summary_figure(&out, "rows"), 2, "{out}");
    assert_eq!(
        by_id(&read_table(&s.table()), "a"),
        vec![("1".into(), "x".into()), ("2".into(), "y".into())]
    );

    let sep = Scratch::new();
    sep.land("a.csv", "id,a;1,x;2,\"y;z\";");
    let out = ok(&sep.ingest(&["lineSep=;", "cloudFiles.format=csv"]));
    assert_eq!(summary_figure(&out, "rows"), 2, "{out}");
    assert_eq!(by_id(&read_table(&sep.table()), "a")[1].1, "y;z");

    let empty = Scratch::new();
    empty.land("a.csv", "id,a,b\n1,\"\",\n2,x,\"\"\n");
    ok(&empty.ingest(&["emptyValue=<empty>"]));
    let t = read_table(&empty.table());
    assert_eq!(
        by_id(&t, "a"),
        vec![("1".into(), "<empty>".into()), ("2".into(), "x".into())]
    );
    assert_eq!(
        by_id(&t, "b"),
        vec![("1".into(), "null".into()), ("2".into(), "<empty>".into())]
    );
    // With another nullValue, a quoted empty field is the empty string, an unquoted one
    // null (Spark's reading).
    let other_null = Scratch::new();
    other_null.land("a.csv", "id,a,b\n1,\"\",\nNULL,x,y\n");
    ok(&other_null.ingest(&["nullValue=NULL"]));
    let t = read_table(&other_null.table());
    assert_eq!(
        by_id(&t, "a"),
        vec![("1".into(), "".into()), ("null".into(), "x".into())]
    );
    assert_eq!(column_strings(&t, "b"), vec!["null", "y"]);
    // emptyValue after a skipped comment or blank line, and with a one-character lineSep:
    // the quoted empty fields are found in the record itself (they used to read null).
    let skipped = Scratch::new();
    skipped.land("a.csv", "id,a\n# c\n1,\"\"\n\n2,\"\"\n3,x\n");
    ok(&skipped.ingest(&["emptyValue=<empty>", "comment=#"]));
    assert_eq!(
        by_id(&read_table(&skipped.table()), "a"),
        vec![
            ("1".into(), "<empty>".into()),
            ("2".into(), "<empty>".into()),
            ("3".into(), "x".into())
        ]
    );
    let piped = Scratch::new();
    piped.land("a.csv", "id,a|1,\"\"|2,|3,\"\"");
    ok(&piped.ingest(&["emptyValue=<empty>", "lineSep=|", "cloudFiles.format=csv"]));
    assert_eq!(
        by_id(&read_table(&piped.table()), "a"),
        vec![
            ("1".into(), "<empty>".into()),
            ("2".into(), "null".into()),
            ("3".into(), "<empty>".into())
        ]
    );
    // The default: a quoted empty field is null, as in Spark (emptyValue = nullValue = "").
    let default = Scratch::new();
    default.land("a.csv", "id,a\n1,\"\"\n");
    ok(&default.ingest(&[]));
    assert_eq!(
        column_strings(&read_table(&default.table()), "a"),
        vec!["null"]
    );
}

/// `inferSchema` is CSV's spelling of `cloudFiles.inferColumnTypes`.
#[test]
fn csv_infer_schema() {
    for (options, expected) in [
        (vec![], DataType::Utf8),
        (vec!["inferSchema=false"], DataType::Utf8),
        (vec!["inferSchema=true"], DataType::Int32),
    ] {
        let s = Scratch::new();
        s.land("a.csv", "id,n\n1,2\n");
        ok(&s.ingest(&options));
        assert_eq!(
            column_type(&read_table(&s.table()), "n"),
            expected,
            "{options:?}"
        );
    }
    let s = Scratch::new();
    s.land("a.csv", "id,n\n1,2\n");
    let out = s.ingest(&["inferSchema=false", "cloudFiles.inferColumnTypes=true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("disagree"), "{}", stderr(&out));
}

/// Item 13: an option pasted from Databricks that we lack is refused as not supported yet
/// (exit 2), with what to do instead, never as a typo.
#[test]
fn databricks_options_not_supported_yet_say_so() {
    let s = Scratch::new();
    s.land("a.json", "{\"id\": 1}\n");
    let out = s.ingest(&["badRecordsPath=/tmp/bad"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("does not support yet"), "{err}");
    assert!(err.contains("_rescued_data"), "{err}");
    assert!(!err.contains("unknown option"), "{err}");
    assert!(!s.table().join("_delta_log").exists());
}

/// `autoloader options` prints every option of the parser's table, with its default, and
/// the not-yet-supported ones apart.
#[test]
fn options_command_prints_the_parser_table() {
    let out = run(&["options".to_string()], &[]);
    let text = ok(&out);
    let (supported, not_yet) = text
        .split_once("Not supported yet")
        .expect("a not-supported-yet section");
    for o in autoloader::options::OPTIONS {
        let section = match o.support {
            autoloader::options::Support::Supported => supported,
            autoloader::options::Support::NotYet(_) => not_yet,
        };
        let line = section
            .lines()
            .find(|l| l.split_whitespace().next() == Some(o.key))
            .unwrap_or_else(|| panic!("{} missing from its section:\n{text}", o.key));
        assert!(line.contains(o.meaning), "{line}");
        if o.support == autoloader::options::Support::Supported {
            assert!(line.contains(o.default), "{line}");
        }
    }
    for key in [
        "timestampFormat",
        "allowSingleQuotes",
        "lineSep",
        "emptyValue",
    ] {
        assert!(supported.contains(key), "{key}");
    }
    let json = ok(&run(&["options".to_string(), "--json".to_string()], &[]));
    let rows: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let keyed = autoloader::flow::cdc::SETTINGS.len() + autoloader::flow::snapshot::SETTINGS.len();
    assert_eq!(rows.len(), autoloader::options::OPTIONS.len() + keyed);
    let bad = rows.iter().find(|r| r["key"] == "badRecordsPath").unwrap();
    assert_eq!(bad["supported"], false);
    assert!(bad["instead"].as_str().unwrap().contains("_rescued_data"));
    // The CDC and snapshot keys, from the tables their parsers check (issue 36.14), with
    // what a change to each does to a flow that ran.
    for (prefix, table) in [
        ("cdc.", autoloader::flow::cdc::SETTINGS),
        ("snapshot.", autoloader::flow::snapshot::SETTINGS),
    ] {
        for (key, default, meaning) in table {
            let key = format!("{prefix}{key}");
            let line = text
                .lines()
                .find(|l| l.split_whitespace().next() == Some(key.as_str()))
                .unwrap_or_else(|| panic!("{key} missing:\n{text}"));
            assert!(line.contains(default) && line.contains(meaning), "{line}");
            assert!(rows.iter().any(|r| r["key"] == key.as_str()), "{key}");
        }
    }
    let keys = rows.iter().find(|r| r["key"] == "cdc.keys").unwrap();
    assert_eq!(keys["onChange"], "fullRefresh");
    let help = ok(&run(&["ingest".to_string(), "--help".to_string()], &[]));
    assert!(
        help.contains("cdc.KEY=VALUE") && help.contains("snapshot.KEY=VALUE"),
        "{help}"
    );
}
