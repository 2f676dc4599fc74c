//! The JSON Schemas in `schemas/` are generated from the Rust types that read and write the
//! files they describe (`schema::store::json_schema`; titles and descriptions are the
//! types' doc comments).
//! These tests fail when a committed file differs from what the types generate. After
//! changing those types or their doc comments, regenerate the files with
//!
//! ```text
//! UPDATE_SCHEMAS=1 cargo test --release --test schemas
//! ```
//!
//! and commit them.

use std::path::PathBuf;

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
             `UPDATE_SCHEMAS=1 cargo test --release --test schemas` and commit it.",
            line + 1,
            committed.lines().nth(line).unwrap_or("<end of file>"),
            generated.lines().nth(line).unwrap_or("<end of file>"),
        );
    }
}

#[test]
fn schema_version_schema_is_up_to_date() {
    check(
        "schema-version.schema.json",
        autoloader::schema::store::json_schema(),
    );
}
