//! The `xml` format (`cloudFiles.format=xml`), run on the real binary and read back with
//! Python `deltalake`: the README's fixture, repeated elements, attributes with text,
//! malformed row elements, a missing `rowTag`, and evolution on a new element.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{Run, Scratch, ok, read_table, read_with_python, row_count, run};

/// The table's rows (as Python `deltalake` reads them, sorted by `key`), `_metadata` left
/// out, and its column types.
fn rows_and_types(table: &Path, key: &str) -> (Vec<Value>, Value) {
    let py = read_with_python(table, key);
    let rows = py["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.as_object_mut().unwrap().remove("_metadata");
            r
        })
        .collect();
    (rows, py["types"].clone())
}

const TYPED: [&str; 2] = ["cloudFiles.format=xml", "cloudFiles.inferColumnTypes=true"];

/// The docs' command on the bundled fixture: attributes, a repeated element, an element
/// with an attribute and text, a nested element, a repeated element inside one, CDATA and
/// an entity, each of the type Spark's XML inference gives.
#[test]
fn the_docs_xml_example_runs() {
    let block = crate::common::doc_block("docs/guide/formats.md", "## XML", "sh");
    let s = Scratch::new();
    ok(&crate::common::run_doc_sh(&block, s.dir.path(), &[]));
    let (rows, types) = rows_and_types(&s.dir.path().join("out/books"), "_id");
    assert_eq!(
        types,
        json!({
            "_id": "string",
            "_available": "bool",
            "author": "list<element: string>",
            "title": "string",
            "price": "struct<_currency: string, _VALUE: double>",
            "published": "timestamp[us, tz=UTC]",
            "tags": "struct<tag: list<element: string>>",
            "publisher": "struct<name: string, city: string>",
            "_rescued_data": "string",
            "_metadata": types["_metadata"],
        })
    );
    assert_eq!(rows.len(), 3);
    assert_eq!(
        rows[1],
        json!({
            "_id": "bk102",
            "_available": false,
            "author": ["Ralls, Kim", "Corets, Eva"],
            "title": "Midnight Rain & Other Stories",
            "price": {"_currency": "EUR", "_VALUE": 5.95},
            "published": "2000-12-16 00:00:00+00:00",
            "tags": {"tag": ["fantasy"]},
            "publisher": {"name": "Tor", "city": "New York"},
            "_rescued_data": null,
        })
    );
    // One author is an array of one; CDATA is text; an empty element is null.
    assert_eq!(rows[0]["author"], json!(["Gambardella, Matthew"]));
    assert_eq!(rows[2]["title"], "Creepy Crawlies <2nd edition>");
    assert_eq!(rows[2]["tags"], Value::Null);
}

/// Options: `attributePrefix`, `valueTag`, `excludeAttribute`, `ignoreNamespace`; an
/// element with attributes and text has its text in the value tag; row elements are found
/// at any depth, and what lies outside them is skipped.
#[test]
fn xml_options_and_value_tag() {
    let s = Scratch::new();
    s.land(
        "a.xml",
        r#"<?xml version="1.0"?>
<feed xmlns:x="urn:x"><meta>skipped</meta>
  <group>
    <x:item x:sku="A1"><x:qty unit="kg">2.5</x:qty><note>first</note></x:item>
    <x:item x:sku="B2"><x:qty unit="g">300</x:qty></x:item>
  </group>
</feed>
"#,
    );
    Run::ingest(
        &s,
        "ignoreNamespace",
        &[
            TYPED[0],
            TYPED[1],
            "rowTag=item",
            "ignoreNamespace=true",
            "attributePrefix=@",
            "valueTag=#text",
        ],
    )
    .ok();
    let (rows, types) = rows_and_types(&s.table(), "@sku");
    assert_eq!(types["qty"], "struct<@unit: string, #text: double>");
    assert_eq!(
        rows,
        [
            json!({"@sku": "A1", "qty": {"@unit": "kg", "#text": 2.5}, "note": "first", "_rescued_data": null}),
            json!({"@sku": "B2", "qty": {"@unit": "g", "#text": 300.0}, "note": null, "_rescued_data": null}),
        ]
    );
    let e = Scratch::new();
    e.land("a.xml", r#"<r><row id="1"><v>x</v></row></r>"#);
    Run::ingest(
        &e,
        "excludeAttribute",
        &[
            "cloudFiles.format=xml",
            "rowTag=row",
            "excludeAttribute=true",
        ],
    )
    .ok();
    let (rows, _) = rows_and_types(&e.table(), "v");
    assert_eq!(rows, [json!({"v": "x", "_rescued_data": null})]);
}

/// A malformed row element (a mismatched end tag, an unknown entity, a bad attribute) is
/// kept raw in `_rescued_data` with its line; the rows around it land. FAILFAST stops
/// naming the file and the line.
#[test]
fn malformed_row_elements_are_rescued_with_their_line() {
    let s = Scratch::new();
    s.land(
        "a.xml",
        "<rows>\n<row><id>1</id></row>\n<row><id>2</titl></row>\n<row>\n  <id>3 &bogus;</id>\n</row>\n<row><id>4</id></row>\n<row id=><id>5</id></row>\n<row><id>6</id></row>\n</rows>\n",
    );
    let ingest = Run::ingest(&s, "permissive", &[TYPED[0], TYPED[1], "rowTag=row"]);
    ingest.ok();
    assert_eq!(ingest.figure("rescued rows"), 3);
    let (rows, types) = rows_and_types(&s.table(), "id");
    assert_eq!(types["id"], "int64");
    let ids: Vec<&Value> = rows.iter().map(|r| &r["id"]).collect();
    assert_eq!(
        ids,
        [
            &json!(1),
            &json!(4),
            &json!(6),
            &Value::Null,
            &Value::Null,
            &Value::Null
        ]
    );
    let mut rescued: Vec<Value> = rows[3..]
        .iter()
        .map(|r| serde_json::from_str(r["_rescued_data"].as_str().unwrap()).unwrap())
        .collect();
    rescued.sort_by_key(|r| r["_line"].as_u64());
    let lines: Vec<(u64, &str)> = rescued
        .iter()
        .map(|r| {
            (
                r["_line"].as_u64().unwrap(),
                r["_corrupt_record"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            (3, "<row><id>2</titl></row>"),
            (4, "<row>\n  <id>3 &bogus;</id>\n</row>"),
            (8, "<row id=><id>5</id></row>"),
        ]
    );
    assert!(
        rescued[0]["_file_path"]
            .as_str()
            .unwrap()
            .ends_with("a.xml")
    );
    // The drift report counts the malformed records, not their lines.
    let table = s.table().display().to_string();
    let report: Value =
        serde_json::from_str(&ok(&run(&["drift".into(), table, "--json".into()], &[]))).unwrap();
    let keys: Vec<&str> = report["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["_corrupt_record"], "{report}");

    let f = Scratch::new();
    f.land(
        "a.xml",
        "<rows>\n<row><id>1</id></row>\n<row><id>2</titl></row>\n</rows>\n",
    );
    Run::ingest(
        &f,
        "FAILFAST",
        &["cloudFiles.format=xml", "rowTag=row", "mode=FAILFAST"],
    )
    .fails_naming(&["a.xml line 3", "FAILFAST", "</titl> closes <id>"]);
    if f.table().join("_delta_log").exists() {
        assert_eq!(
            row_count(&read_table(&f.table())),
            0,
            "nothing of the batch lands"
        );
    }
}

/// `rowTag` is required for XML: refused with exit 2 before anything is read. A row
/// element over `cloudFiles.maxRecordBytes` stops the run naming the file and its line.
#[test]
fn xml_without_row_tag_is_refused_and_long_rows_are_named() {
    let s = Scratch::new();
    s.land("a.xml", "<rows><row><id>1</id></row></rows>");
    let out = s.ingest(&["cloudFiles.format=xml"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rowTag") && err.contains("cloudFiles.format=xml"),
        "{err}"
    );
    assert!(!s.table().join("_delta_log").exists());

    let l = Scratch::new();
    l.land(
        "long.xml",
        format!(
            "<rows>\n<row><id>1</id></row>\n<row><v>{}</v></row>\n</rows>\n",
            "x".repeat(5000)
        ),
    );
    Run::ingest(
        &l,
        "long row",
        &[
            "cloudFiles.format=xml",
            "rowTag=row",
            "cloudFiles.maxRecordBytes=1k",
        ],
    )
    .fails_naming(&["long.xml line 3", "cloudFiles.maxRecordBytes"]);
}

/// A new element in a later file evolves the table (addNewColumns, the default); an
/// element that appeared once and now repeats in a new column is an array; the first
/// file's rows keep their values.
#[test]
fn a_new_element_in_a_later_file_evolves_the_table() {
    let s = Scratch::new();
    s.land("1.xml", "<r><book><t>a</t><n>1</n></book></r>");
    Run::ingest(&s, "first", &[TYPED[0], TYPED[1], "rowTag=book"]).ok();
    s.land(
        "2.xml",
        "<r><book><t>b</t><n>2</n><isbn>978-3</isbn><a>x</a><a>y</a></book><book><t>c</t><n>3</n><a>z</a></book></r>",
    );
    Run::ingest(&s, "evolve", &[TYPED[0], TYPED[1], "rowTag=book"]).ok();
    let (rows, types) = rows_and_types(&s.table(), "t");
    assert_eq!(types["n"], "int64");
    assert_eq!(types["isbn"], "string");
    assert_eq!(types["a"], "list<element: string>");
    assert_eq!(
        rows,
        [
            json!({"t": "a", "n": 1, "isbn": null, "a": null, "_rescued_data": null}),
            json!({"t": "b", "n": 2, "isbn": "978-3", "a": ["x", "y"], "_rescued_data": null}),
            json!({"t": "c", "n": 3, "isbn": null, "a": ["z"], "_rescued_data": null}),
        ]
    );
}

/// A compressed XML file (told by its magic bytes) reads as the plain one.
#[test]
fn compressed_xml_reads_as_the_plain_file() {
    let s = Scratch::new();
    let doc = "<r><row><id>1</id></row><row><id>2</id></row></r>";
    s.land(
        "a.xml.zst",
        zstd::stream::encode_all(doc.as_bytes(), 3).unwrap(),
    );
    Run::ingest(&s, "zstd", &[TYPED[0], TYPED[1], "rowTag=row"]).ok();
    let (rows, _) = rows_and_types(&s.table(), "id");
    assert_eq!(
        rows,
        [
            json!({"id": 1, "_rescued_data": null}),
            json!({"id": 2, "_rescued_data": null})
        ]
    );
}
