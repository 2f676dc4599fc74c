//! The JSON Schemas in `schemas/` are generated from the Rust types that read and write the
//! files they describe (`config::json_schema`, `telemetry::events::json_schema`,
//! `schema::store::json_schema`; titles and descriptions are the types' doc comments).
//! These tests fail when a committed file differs from what the types generate. After
//! changing those types or their doc comments, regenerate the files with
//!
//! ```text
//! UPDATE_SCHEMAS=1 cargo test --release schemas::
//! ```
//!
//! and commit them. The last test checks the other direction for events: what the
//! pipeline really writes is described by the schema.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use autoloader::telemetry::events::{self, EventFields, kind};
use serde_json::Value;

/// The file's text: pretty JSON, `$schema`, `$id`, `title` and `description` first, with
/// the line breaks of wrapped doc comments joined (a blank line, a paragraph break, stays).
fn render(schema: schemars::Schema) -> String {
    fn join_doc_lines(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    match v {
                        Value::String(text) if key == "description" || key == "title" => {
                            *text = text
                                .split("\n\n")
                                .map(|paragraph| paragraph.replace('\n', " "))
                                .collect::<Vec<_>>()
                                .join("\n\n");
                        }
                        _ => join_doc_lines(v),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(join_doc_lines),
            _ => {}
        }
    }
    let mut value = schema.to_value();
    join_doc_lines(&mut value);
    // What a reader looks for first, first.
    let mut root = value.as_object().cloned().unwrap_or_default();
    let mut ordered = serde_json::Map::new();
    for key in ["$schema", "$id", "title", "description"] {
        if let Some(v) = root.remove(key) {
            ordered.insert(key.to_string(), v);
        }
    }
    ordered.append(&mut root);
    serde_json::to_string_pretty(&ordered).expect("schemas serialize") + "\n"
}

/// Compares `schemas/<name>` with the generated schema, or rewrites it with
/// `UPDATE_SCHEMAS=1`.
fn check(name: &str, schema: schemars::Schema) {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "schemas", name]
        .iter()
        .collect();
    let generated = render(schema);
    if std::env::var_os("UPDATE_SCHEMAS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("write the schema file");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
        panic!(
            "schemas/{name} is not what the Rust types generate (first difference at line {}: \
             committed {:?}, generated {:?}).\nRegenerate it with \
             `UPDATE_SCHEMAS=1 cargo test --release schemas::` and commit it.",
            line + 1,
            committed.lines().nth(line).unwrap_or("<end of file>"),
            generated.lines().nth(line).unwrap_or("<end of file>"),
        );
    }
}

#[test]
fn config_schema_is_up_to_date() {
    check("config.schema.json", autoloader::config::json_schema());
}

#[test]
fn event_schema_is_up_to_date() {
    check("event.schema.json", events::json_schema());
}

#[test]
fn schema_version_schema_is_up_to_date() {
    check(
        "schema-version.schema.json",
        autoloader::schema::store::json_schema(),
    );
}

/// `autoloader ingest <dir>/landing <dir>/table --once -o ...`; returns whether it succeeded.
fn ingest(dir: &Path, options: &[&str]) -> bool {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_autoloader"));
    cmd.arg("ingest")
        .arg(dir.join("landing"))
        .arg(dir.join("table"))
        .args(["--once", "-q"])
        .env_remove("AUTOLOADER_FAILPOINT");
    for o in options {
        cmd.args(["-o", o]);
    }
    cmd.output().expect("run autoloader").status.success()
}

fn land(dir: &Path, name: &str, content: &[u8]) {
    let path = dir.join("landing").join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// Runs streams through evolution, rescue, rejection, a corrupt and an overwritten file,
/// then checks each event written: a known type, every type-specific field a property of
/// `schemas/event.schema.json`, and of the documented JSON type.
#[test]
fn the_events_written_are_the_ones_the_schema_describes() {
    let root = tempfile::tempdir().unwrap();
    let typed = ["cloudFiles.inferColumnTypes=true", "cloudFiles.format=json"];

    // Inference, then a new column (evolved) and a value that does not fit (rescued).
    let a = root.path().join("a");
    land(&a, "1.json", b"{\"id\": 1, \"name\": \"x\"}\n");
    assert!(ingest(&a, &typed));
    land(
        &a,
        "2.json",
        b"{\"id\": 2, \"name\": \"y\", \"coupon\": \"S25\"}\n{\"id\": \"three\", \"name\": \"z\"}\n",
    );
    assert!(ingest(&a, &typed));
    // An ingested file that changes is ignored.
    land(&a, "1.json", b"{\"id\": 1, \"name\": \"changed\"}\n");
    assert!(ingest(&a, &typed));
    // The flow's definition changes (for new rows only).
    assert!(ingest(&a, &[typed[0], typed[1], "pathGlobFilter=*.json"]));

    // New columns refused.
    let b = root.path().join("b");
    let fail = [
        typed[0],
        typed[1],
        "cloudFiles.schemaEvolutionMode=failOnNewColumns",
    ];
    land(&b, "1.json", b"{\"id\": 1}\n");
    assert!(ingest(&b, &fail));
    land(&b, "2.json", b"{\"id\": 2, \"extra\": true}\n");
    assert!(!ingest(&b, &fail));

    // A corrupt file skipped.
    let c = root.path().join("c");
    land(&c, "1.json", b"{\"id\": 1}\n");
    land(
        &c,
        "2.json.gz",
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03not deflate",
    );
    assert!(ingest(&c, &[typed[0], typed[1], "ignoreCorruptFiles=true"]));

    let schema = events::json_schema().to_value();
    let properties: BTreeSet<&str> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut seen = BTreeSet::new();
    for dir in [&a, &b, &c] {
        let events = events::read_events(&dir.join("table/_autoloader")).unwrap();
        assert!(!events.is_empty(), "{} has events", dir.display());
        for e in events {
            assert!(kind::ALL.contains(&e.kind), "unknown type {}", e.kind);
            for key in e.fields.keys() {
                assert!(
                    properties.contains(key.as_str()),
                    "{} events carry {key}, which schemas/event.schema.json does not describe \
                     (add it to EventFields, then regenerate: UPDATE_SCHEMAS=1 cargo test \
                     --release schemas::)",
                    e.kind
                );
            }
            if let Err(err) = serde_json::from_value::<EventFields>(Value::Object(e.fields.clone()))
            {
                panic!(
                    "{} event fields do not have their documented types: {err}\n{:?}",
                    e.kind, e.fields
                );
            }
            seen.insert(e.kind.to_string());
        }
    }
    for expected in [
        "stream_started",
        "schema_inferred",
        "batch_committed",
        "schema_evolved",
        "rescued_data_seen",
        "type_mismatch",
        "overwritten_file_ignored",
        "new_columns_rejected",
        "stream_failed",
        "corrupt_file_skipped",
        "stream_stopped",
        "flow_definition_changed",
    ] {
        assert!(
            seen.contains(expected),
            "no {expected} event; seen: {seen:?}"
        );
    }
}
