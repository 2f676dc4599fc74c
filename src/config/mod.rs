//! Many streams from one TOML file (`autoloader run CONFIG.toml`), or from a Lakeflow SQL
//! pipeline read into the same shape (`autoloader run PIPELINE.sql`, `sql.rs`).
//!
//! ```toml
//! [defaults.options]            # applied to every stream, which may override them
//! "cloudFiles.inferColumnTypes" = true
//!
//! [[stream]]
//! name = "orders"
//! source = "landing/orders"       # relative paths are relative to this file
//! table = "bronze/orders"
//! # checkpoint = "..."           # default: <table>/_autoloader/<name>
//! # columns = ["order_id"]       # or except_columns; where = "amount > 0" (crate::flow)
//! [stream.options]
//! "cloudFiles.format" = "json"
//!
//! [[table]]                      # declared Delta table properties, applied by each run
//! path = "bronze/orders"
//! [table.properties]
//! "pipelines.reset.allowed" = "false"
//! ```
//! Checked before anything runs: names unique, every option valid, and no two streams
//! sharing a checkpoint or a schema location (several may share a table). The JSON Schema
//! `schemas/config.schema.json` is generated from the structs below ([`json_schema`]).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use serde_json::json;

use crate::flow::FlowSpec;
use crate::flow::expect::{Expectation, OnViolation};
use crate::location::Location;
use crate::options::{self, OptionsError};
use crate::pipeline::{FirstWriter, IngestRequest, SpecError, StreamSpec};
use crate::source::SourceFormat;
use crate::storage::StorageSettings;

mod spec;
mod sql;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: stream \"{stream}\": {source}")]
    Options {
        path: PathBuf,
        stream: String,
        source: OptionsError,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// Declares streams that run concurrently in one process. Relative paths are relative to the
/// config file. Option keys are Auto Loader's, case-insensitive.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "autoloader streams config (autoloader run CONFIG.toml)",
    extend(
        "$id" = "https://github.com/autoloader/autoloader/schemas/config.schema.json",
        // `stream` defaults to empty only so that `load` can say "no [[stream]] is declared".
        "required" = ["stream"]
    )
)]
struct FileConfig {
    /// Applied to every stream; a stream's own settings override or add to them.
    #[serde(default)]
    defaults: Defaults,
    /// The streams (`[[stream]]` tables); at least one.
    #[serde(default)]
    #[schemars(length(min = 1))]
    stream: Vec<StreamConfig>,
    /// Tables with declared Delta properties (`[[table]]`), applied by every run.
    #[serde(default)]
    table: Vec<TableConfig>,
}

/// A table's declared Delta table properties: each run writes them into the table's
/// metadata (one commit, only when they differ), so a property lifted by hand for one
/// reset (`autoloader table set`) is put back.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
struct TableConfig {
    /// The table's location, as the streams name it.
    path: String,
    /// Properties, e.g. "pipelines.reset.allowed" = "false" (delta.* not supported yet).
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    properties: BTreeMap<String, toml::Value>,
    /// Auto compaction of the table by its streams (`optimize.autoCompact = true`).
    #[serde(default)]
    optimize: Option<TableOptimize>,
}

/// `optimize.autoCompact = true`: each stream writing into the table compacts its small
/// files in the background after every `everyCommits` batch commits (as `autoloader
/// optimize` does, 128 MiB files). The table property `delta.autoOptimize.autoCompact =
/// "true"` turns it on too. Not for CDC streams.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(inline)]
struct TableOptimize {
    /// Compact in the background of the table's streams.
    #[serde(default)]
    auto_compact: bool,
    /// After this many batch commits of a stream (default 50).
    #[schemars(range(min = 1))]
    every_commits: Option<u64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
struct Defaults {
    /// Options of every stream (a stream's own value of an option wins).
    #[serde(default)]
    #[schemars(with = "OptionsSchema")]
    options: BTreeMap<String, toml::Value>,
    /// Alert webhooks of every stream (a stream's own are added to them).
    #[serde(default)]
    #[schemars(inner(url))]
    alert_webhooks: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
struct StreamConfig {
    /// Unique stream name.
    #[schemars(regex(pattern = r"^[A-Za-z0-9_-]+$"))]
    name: String,
    /// Landing folder, or a Delta table (then read incrementally).
    source: String,
    /// What the source holds: "delta" (a Delta table, read incrementally) or "files";
    /// default: a folder holding a `_delta_log/` is a Delta table, anything else files.
    #[schemars(regex(pattern = r"^(?i)(delta|files)$"))]
    source_format: Option<String>,
    /// Delta table location; several streams may share one.
    table: String,
    /// Progress directory (default: <table>/_autoloader/<name>); never shared.
    checkpoint: Option<String>,
    /// Options of this stream (over the defaults' ones).
    #[serde(default)]
    #[schemars(with = "OptionsSchema")]
    options: BTreeMap<String, toml::Value>,
    /// Webhooks that get this stream's alerts (besides the defaults' ones): http(s) URLs,
    /// e.g. a Slack or Teams incoming webhook.
    #[serde(default)]
    #[schemars(inner(url))]
    alert_webhooks: Vec<String>,
    /// Only these columns reach the table, plus the rescued data, partition columns and
    /// _metadata; a column the schema gains later does not. Not with except_columns.
    #[schemars(length(min = 1))]
    columns: Option<Vec<String>>,
    /// Every column but these reaches the table. Not with columns.
    #[schemars(length(min = 1))]
    except_columns: Option<Vec<String>>,
    /// Columns the flow computes, each `expression AS name` (Spark's selectExpr), e.g.
    /// "_metadata.file_path AS _source_file" or "current_timestamp() AS _ingested_at":
    /// placed after the data columns (docs/guide/expressions.md lists the functions).
    #[serde(default)]
    with_columns: Vec<String>,
    /// Only rows for which this condition is true reach the table; the others are counted
    /// as filtered. E.g. "order_date < '2025-01-01' AND region IN ('eu', 'us')" (any
    /// condition of the expression language: comparisons, IN, LIKE, functions, ...).
    #[serde(rename = "where")]
    condition: Option<String>,
    /// A ONCE flow (one-time backfill): runs to completion once, then later runs skip it;
    /// it runs again after a full refresh of its table (`autoloader reset`).
    #[serde(default)]
    once: bool,
    /// APPLY CHANGES into the table (Databricks' create_auto_cdc_flow names: keys,
    /// sequence_by, apply_as_deletes, apply_as_truncates, column_list, except_column_list,
    /// stored_as_scd_type, ignore_null_updates; format = "debezium" or "dms" for a change
    /// envelope preset) instead of appending.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, serde_json::Value>>")]
    cdc: Option<BTreeMap<String, toml::Value>>,
    /// A snapshot flow (README "Snapshot flows"): unit ("file", "folder", "partition"),
    /// ingest_time_column, snapshot_id_column, skip_unchanged, expected_interval. Each
    /// snapshot of the source lands whole in one commit, its rows stamped.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, serde_json::Value>>")]
    snapshot: Option<BTreeMap<String, toml::Value>>,
    /// Data-quality rules (docs/guide/quality.md): `[[stream.expect]]` tables with name,
    /// check and on_violation, or Lakeflow constraints as written:
    /// "CONSTRAINT valid_amount EXPECT (amount > 0) ON VIOLATION DROP ROW".
    #[serde(default)]
    expect: Vec<ExpectEntry>,
    /// Where rows a quarantine rule keeps out land, a Delta table (default: beside the
    /// checkpoint, <checkpoint>/quarantine).
    quarantine_table: Option<String>,
}

/// One rule of `expect`: a table, or a Lakeflow constraint string.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged, deny_unknown_fields)]
enum ExpectEntry {
    Rule {
        /// Unique per stream; shown in counts, events and errors.
        name: String,
        /// A condition in the language of `where`; a row passes where it is true (NULL
        /// fails).
        check: String,
        /// warn (the default: the row lands, counted), drop, quarantine or fail.
        #[schemars(regex(pattern = r"^(?i)(warn|drop|quarantine|fail)$"))]
        on_violation: Option<String>,
    },
    /// CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | FAIL UPDATE |
    /// QUARANTINE ROW]
    Constraint(String),
}

impl ExpectEntry {
    fn expectation(&self) -> Result<Expectation, String> {
        match self {
            ExpectEntry::Constraint(text) => {
                Expectation::from_constraint(text).map_err(|e| e.to_string())
            }
            ExpectEntry::Rule {
                name,
                check,
                on_violation,
            } => {
                let action = match on_violation {
                    None => OnViolation::Warn,
                    Some(a) => OnViolation::parse(a).ok_or_else(|| {
                        format!(
                            "expectation \"{name}\": on_violation = \"{a}\": expected one of {}",
                            OnViolation::NAMES.join(", ")
                        )
                    })?,
                };
                Expectation::new(name, check, action).map_err(|e| e.to_string())
            }
        }
    }
}

/// The text of a `[stream.cdc]` value: a list joined by commas, anything else as written.
fn cdc_text(v: &toml::Value) -> String {
    match v {
        toml::Value::Array(items) => items.iter().map(option_text).collect::<Vec<_>>().join(","),
        other => option_text(other),
    }
}

/// The schema of an `options` table (`$defs/options`): every known option with its
/// description and default, from the option table that validates them.
struct OptionsSchema;

impl JsonSchema for OptionsSchema {
    fn schema_name() -> Cow<'static, str> {
        "options".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        // TOML scalars: the option parser reads each as text.
        let value = json!({ "type": ["string", "boolean", "integer", "number"] });
        let properties: serde_json::Map<String, serde_json::Value> = options::OPTIONS
            .iter()
            .filter(|o| o.support == options::Support::Supported)
            .map(|o| {
                let mut schema = value.clone();
                schema["description"] = format!("{} (default: {})", o.meaning, o.default).into();
                (o.key.to_string(), schema)
            })
            .collect();
        json_schema!({
            "type": "object",
            "description": "Auto Loader options (see the README's option table).",
            "properties": properties,
            "additionalProperties": value,
        })
    }
}

/// TOML has no null: an optional key is left out, so `Option` fields are not nullable here.
fn no_null(schema: &mut Schema) {
    if let Some(serde_json::Value::Array(types)) = schema.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            schema.insert("type".into(), only);
        }
    }
}

/// The JSON Schema of a config file, as committed in `schemas/config.schema.json` (for
/// editors; `tests/it/schemas.rs` keeps the two equal).
pub fn json_schema() -> Schema {
    SchemaSettings::draft2020_12()
        .with_transform(RecursiveTransform(no_null))
        .into_generator()
        .into_root_schema_for::<FileConfig>()
}

/// One stream of a config file, resolved.
#[derive(Debug, Clone)]
pub struct NamedStream {
    pub name: String,
    pub request: IngestRequest,
    /// Alert webhooks of this stream (defaults and its own).
    pub alert_webhooks: Vec<String>,
}

fn option_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Datetime(d) => d.to_string(),
        // Arrays and tables are not option values; the option parser rejects the text.
        other => format!("{other:?}"),
    }
}

/// Whether `name` can name a stream (in events, alerts, metrics and checkpoint folders):
/// letters, digits, `_` or `-`.
pub fn valid_stream_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A config file as written: TOML, a Lakeflow SQL file, or a folder of SQL files (read in
/// name order, subfolders too, as one pipeline).
fn read(path: &Path) -> Result<FileConfig, ConfigError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ConfigError::Io { path, source }
    };
    let parse = |message: String| ConfigError::Parse {
        path: path.into(),
        message,
    };
    if let Some(spec_path) = spec::find(path) {
        // Spark's spec: its libraries' SQL, names under its table root, checkpoints under
        // its storage.
        let at_spec = |message: String| ConfigError::Parse {
            path: spec_path.clone(),
            message,
        };
        let pipeline = spec::read(&spec_path).map_err(at_spec)?;
        let mut config =
            sql::files_to_config_named(&pipeline.files, &pipeline.naming).map_err(parse)?;
        if let Some(streams) = config["stream"].as_array_mut() {
            for stream in streams {
                let name = stream["name"].as_str().unwrap_or_default().to_string();
                stream["checkpoint"] = serde_json::json!(format!("{}{name}", pipeline.storage));
            }
        }
        return serde_json::from_value(config).map_err(|e| parse(e.to_string()));
    }
    let is_sql = |p: &Path| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("sql"));
    if path.is_dir() || is_sql(path) {
        let mut files = Vec::new();
        if path.is_dir() {
            let mut todo = vec![path.to_path_buf()];
            while let Some(dir) = todo.pop() {
                for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
                    let p = entry.map_err(io(&dir))?.path();
                    if p.is_dir() {
                        todo.push(p);
                    } else if is_sql(&p) {
                        files.push(p);
                    }
                }
            }
            files.sort();
            if files.is_empty() {
                return Err(parse("the folder holds no .sql file".into()));
            }
        } else {
            files.push(path.to_path_buf());
        }
        let mut texts = Vec::new();
        for f in &files {
            let text = std::fs::read_to_string(f).map_err(io(f))?;
            let name = f.strip_prefix(path).unwrap_or(f).display().to_string();
            texts.push((name, text));
        }
        // A Lakeflow SQL pipeline is read into the same shape as a TOML file.
        return sql::files_to_config(&texts)
            .and_then(|c| serde_json::from_value(c).map_err(|e| e.to_string()))
            .map_err(parse);
    }
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    toml::from_str(&text).map_err(|e| parse(e.to_string()))
}

/// Reads and validates a config file. `only` keeps one stream by name.
pub fn load(
    path: &Path,
    only: Option<&str>,
    state: &StorageSettings,
) -> Result<Vec<NamedStream>, ConfigError> {
    let parsed = read(path)?;
    let invalid = |message: String| ConfigError::Invalid {
        path: path.into(),
        message,
    };
    if parsed.stream.is_empty() {
        return Err(invalid("no [[stream]] is declared".into()));
    }
    // Relative paths are relative to the file's folder (a folder of SQL files: itself).
    let base = std::fs::canonicalize(path)
        .ok()
        .and_then(|p| {
            if p.is_dir() {
                Some(p)
            } else {
                p.parent().map(Path::to_path_buf)
            }
        })
        .unwrap_or_default();
    // Every stream's table: a Delta source another stream creates is waited for.
    let tables_written: Vec<(&str, Location)> = parsed
        .stream
        .iter()
        .filter_map(|s| Some((s.name.as_str(), Location::parse(&s.table).ok()?)))
        .map(|(name, l)| (name, l.relative_to(&base).normalized()))
        .collect();
    let mut out: Vec<NamedStream> = Vec::new();
    for s in &parsed.stream {
        if !valid_stream_name(&s.name) {
            return Err(invalid(format!(
                "stream name \"{}\" must be letters, digits, _ or -",
                s.name
            )));
        }
        if out.iter().any(|o| o.name == s.name) {
            return Err(invalid(format!("two streams are named \"{}\"", s.name)));
        }
        let spec = stream_spec(s, &parsed.defaults, &base, &tables_written, &invalid)?;
        let (request, warnings) = spec.build(state).map_err(|e| match e {
            SpecError::Options(source) => ConfigError::Options {
                path: path.into(),
                stream: s.name.clone(),
                source,
            },
            other => invalid(format!("stream \"{}\": {other}", s.name)),
        })?;
        for w in warnings {
            tracing::warn!(stream = %s.name, "{w}");
        }
        out.push(NamedStream {
            name: s.name.clone(),
            request,
            alert_webhooks: parsed
                .defaults
                .alert_webhooks
                .iter()
                .chain(&s.alert_webhooks)
                .cloned()
                .collect(),
        });
    }
    check_shared_places(&out, &invalid)?;
    if let Some(name) = only {
        out.retain(|s| s.name == name);
        if out.is_empty() {
            let names: Vec<&str> = parsed.stream.iter().map(|s| s.name.as_str()).collect();
            return Err(invalid(format!(
                "no stream named \"{name}\" (streams: {})",
                names.join(", ")
            )));
        }
    }
    check_feeds(&out, &invalid)?;
    apply_tables(&parsed.table, &mut out, &base, only, &invalid)?;
    share_first_writes(&mut out);
    Ok(out)
}

/// A message naming the config file.
type Invalid<'a> = dyn Fn(String) -> ConfigError + 'a;

/// One `[[stream]]` as a `StreamSpec`: locations relative to the config file's folder,
/// `[defaults]` options under the stream's, `[stream.snapshot]` and `[stream.cdc]` under
/// their prefixes.
fn stream_spec(
    s: &StreamConfig,
    defaults: &Defaults,
    base: &Path,
    tables_written: &[(&str, Location)],
    invalid: &Invalid<'_>,
) -> Result<StreamSpec, ConfigError> {
    let location = |field: &str, text: &str| {
        Location::parse(text)
            .map(|l| l.relative_to(base))
            .map_err(|e| invalid(format!("stream \"{}\": {field}: {e}", s.name)))
    };
    let table = location("table", &s.table)?;
    let checkpoint = match &s.checkpoint {
        Some(c) => location("checkpoint", c)?,
        None => IngestRequest::default_checkpoint(&table, Some(&s.name)),
    };
    let mut raw: Vec<(String, String)> = defaults
        .options
        .iter()
        .map(|(k, v)| (k.clone(), option_text(v)))
        .collect();
    raw.extend(s.options.iter().map(|(k, v)| (k.clone(), option_text(v))));
    raw.extend(s.snapshot.iter().flatten().map(|(k, v)| {
        (
            format!("{}{k}", crate::flow::snapshot::OPTION_PREFIX),
            option_text(v),
        )
    }));
    // A relative schema location (or move destination) is relative to the config
    // file too.
    for (k, v) in &mut raw {
        for key in [
            "cloudFiles.schemaLocation",
            "cloudFiles.cleanSource.moveDestination",
        ] {
            if k.eq_ignore_ascii_case(key) {
                *v = location(key, v)?.to_string();
            }
        }
    }
    raw.extend(s.cdc.iter().flatten().map(|(k, v)| {
        (
            format!("{}{k}", crate::flow::cdc::OPTION_PREFIX),
            cdc_text(v),
        )
    }));
    let source_format = match &s.source_format {
        None => SourceFormat::Detect,
        Some(f) => SourceFormat::from_name(f).ok_or_else(|| {
            invalid(format!(
                "stream \"{}\": source_format = \"{f}\": expected \"delta\" or \"files\"",
                s.name
            ))
        })?,
    };
    let source_location = location("source", &s.source)?;
    // The streams of this config whose table this stream reads.
    let upstream: Vec<String> = tables_written
        .iter()
        .filter(|(name, table)| *name != s.name && *table == source_location.normalized())
        .map(|(name, _)| (*name).to_string())
        .collect();
    let flow = FlowSpec::new(
        s.columns.clone(),
        s.except_columns.clone(),
        s.condition.as_deref(),
    )
    .and_then(|f| f.with_columns(&s.with_columns))
    .map_err(|e| invalid(format!("stream \"{}\": {e}", s.name)))?;
    let rules = s
        .expect
        .iter()
        .map(ExpectEntry::expectation)
        .collect::<Result<Vec<_>, String>>()
        .map_err(|e| invalid(format!("stream \"{}\": {e}", s.name)))?;
    let flow = flow
        .with_expectations(rules)
        .map_err(|e| invalid(format!("stream \"{}\": {e}", s.name)))?;
    let quarantine_table = s
        .quarantine_table
        .as_deref()
        .map(|q| location("quarantine_table", q))
        .transpose()?;
    Ok(StreamSpec {
        quarantine_table,
        source_format,
        options: raw,
        flow,
        upstream,
        once: s.once,
        ..StreamSpec::new(s.name.clone(), source_location, table, checkpoint)
    })
}

/// Each stream needs its own checkpoint and schema location.
fn check_shared_places(out: &[NamedStream], invalid: &Invalid<'_>) -> Result<(), ConfigError> {
    for (i, a) in out.iter().enumerate() {
        // A quarantine is one stream's: a replay lands all its rows by that stream's rules.
        if let Some(q) = a.request.quarantine_location() {
            if let Some(t) = out
                .iter()
                .find(|s| s.request.table.normalized() == q.normalized())
            {
                return Err(invalid(format!(
                    "stream \"{}\": its quarantine table {q} is the table of stream \"{}\"",
                    a.name, t.name
                )));
            }
            if let Some(b) = out[i + 1..].iter().find(|b| {
                b.request
                    .quarantine_location()
                    .is_some_and(|p| p.normalized() == q.normalized())
            }) {
                return Err(invalid(format!(
                    "streams \"{}\" and \"{}\" share the quarantine table {q}; each stream needs \
                     its own",
                    a.name, b.name
                )));
            }
        }
        for b in &out[i + 1..] {
            if a.request.checkpoint.normalized() == b.request.checkpoint.normalized() {
                return Err(invalid(format!(
                    "streams \"{}\" and \"{}\" share the checkpoint {}; each stream needs its own",
                    a.name, b.name, a.request.checkpoint
                )));
            }
            if a.request.settings.schema_location.normalized()
                == b.request.settings.schema_location.normalized()
            {
                return Err(invalid(format!(
                    "streams \"{}\" and \"{}\" share the schema location {}; each stream needs its own",
                    a.name, b.name, a.request.settings.schema_location
                )));
            }
        }
    }
    Ok(())
}

/// Streams reading each other's tables would wait for each other forever with `--once`;
/// a CDC target has one writer (its rows are keyed, and another writer's would not be).
fn check_feeds(out: &[NamedStream], invalid: &Invalid<'_>) -> Result<(), ConfigError> {
    for start in out {
        let mut seen: Vec<&str> = vec![start.name.as_str()];
        let mut frontier: Vec<&str> = start.request.upstream.iter().map(String::as_str).collect();
        while let Some(name) = frontier.pop() {
            if name == start.name {
                return Err(invalid(format!(
                    "stream \"{}\" reads a table that is made from its own (through {}): a \
                     flow cannot feed itself",
                    start.name,
                    seen[1..].join(", ")
                )));
            }
            if seen.contains(&name) {
                continue;
            }
            seen.push(name);
            if let Some(up) = out.iter().find(|o| o.name == name) {
                frontier.extend(up.request.upstream.iter().map(String::as_str));
            }
        }
    }
    for (i, a) in out.iter().enumerate() {
        for b in &out[i + 1..] {
            if a.request.table.normalized() == b.request.table.normalized()
                && (a.request.cdc.is_some() || b.request.cdc.is_some())
            {
                let cdc = if a.request.cdc.is_some() {
                    &a.name
                } else {
                    &b.name
                };
                return Err(invalid(format!(
                    "streams \"{}\" and \"{}\" write into {}, which stream \"{cdc}\" applies changes to: a CDC target has one writer",
                    a.name, b.name, a.request.table
                )));
            }
        }
    }
    Ok(())
}

/// Declared `[[table]]` properties and compaction go with every stream of their table.
fn apply_tables(
    declared: &[TableConfig],
    out: &mut [NamedStream],
    base: &Path,
    only: Option<&str>,
    invalid: &Invalid<'_>,
) -> Result<(), ConfigError> {
    for t in declared {
        let table = Location::parse(&t.path)
            .map(|l| l.relative_to(base).normalized())
            .map_err(|e| invalid(format!("table {}: {e}", t.path)))?;
        let mut properties = Vec::new();
        for (k, v) in &t.properties {
            let pair = crate::table::properties::parse_property(&format!("{k}={}", option_text(v)))
                .map_err(|e| invalid(format!("table {}: {e}", t.path)))?;
            properties.push(pair);
        }
        let writers: Vec<&mut NamedStream> = out
            .iter_mut()
            .filter(|s| s.request.table.normalized() == table)
            .collect();
        if writers.is_empty() && only.is_none() {
            return Err(invalid(format!(
                "table {} is declared but no stream writes into it",
                t.path
            )));
        }
        let auto_compact = match &t.optimize {
            Some(o) if o.every_commits == Some(0) => {
                return Err(invalid(format!(
                    "table {}: optimize.everyCommits is at least 1",
                    t.path
                )));
            }
            Some(o) => Some(crate::table::optimize::AutoCompact {
                enabled: o.auto_compact,
                every_commits: o
                    .every_commits
                    .unwrap_or(crate::table::optimize::AUTO_COMPACT_EVERY),
            }),
            None => None,
        };
        for w in writers {
            w.request.table_properties = properties.clone();
            w.request.auto_compact = auto_compact;
        }
    }
    Ok(())
}

/// Streams sharing a table: the first declared writes the table's first schema, so its
/// types do not depend on which stream was faster.
fn share_first_writes(out: &mut [NamedStream]) {
    let tables: Vec<Location> = out.iter().map(|s| s.request.table.normalized()).collect();
    for (first, table) in tables.iter().enumerate() {
        if tables[..first].contains(table) {
            continue;
        }
        let sharing: Vec<usize> = (first..out.len())
            .filter(|&i| &tables[i] == table)
            .collect();
        if sharing.len() > 1 {
            for (&i, writer) in sharing.iter().zip(FirstWriter::for_streams(sharing.len())) {
                out[i].request.first_writer = writer;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Local storage only: config files here name local folders.
    fn local() -> StorageSettings {
        StorageSettings::local(std::env::temp_dir())
    }

    fn write(dir: &Path, text: &str) -> PathBuf {
        std::fs::create_dir_all(dir.join("land/a")).unwrap();
        std::fs::create_dir_all(dir.join("land/b")).unwrap();
        let p = dir.join("streams.toml");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn streams_resolve_relative_paths_and_merge_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            r#"
[defaults.options]
"cloudFiles.inferColumnTypes" = true

[[stream]]
name = "a"
source = "land/a"
table = "bronze/shared"

[[stream]]
name = "b"
source = "land/b"
table = "bronze/shared"
[stream.options]
"cloudFiles.inferColumnTypes" = false
"cloudFiles.maxFilesPerTrigger" = 5
"#,
        );
        let streams = load(&p, None, &local()).unwrap();
        assert_eq!(streams.len(), 2);
        let base = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(
            streams[0].request.checkpoint,
            Location::Local(base.join("bronze/shared/_autoloader/a"))
        );
        assert!(streams[0].request.settings.infer_column_types);
        assert!(!streams[1].request.settings.infer_column_types);
        assert_eq!(streams[1].request.settings.max_files_per_trigger, 5);
        assert_eq!(load(&p, Some("b"), &local()).unwrap().len(), 1);
        assert!(
            load(&p, Some("zz"), &local())
                .unwrap_err()
                .to_string()
                .contains("streams: a, b")
        );
    }

    #[test]
    fn shared_checkpoints_and_schema_locations_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            r#"
[[stream]]
name = "a"
source = "land/a"
table = "t1"
checkpoint = "ck"

[[stream]]
name = "b"
source = "land/b"
table = "t2"
checkpoint = "./ck"
"#,
        );
        assert!(
            load(&p, None, &local())
                .unwrap_err()
                .to_string()
                .contains("share the checkpoint")
        );
        let p = write(
            dir.path(),
            r#"
[[stream]]
name = "a"
source = "land/a"
table = "t1"
options = { "cloudFiles.schemaLocation" = "schemas" }

[[stream]]
name = "b"
source = "land/b"
table = "t2"
options = { "cloudFiles.schemaLocation" = "schemas/" }
"#,
        );
        assert!(
            load(&p, None, &local())
                .unwrap_err()
                .to_string()
                .contains("share the schema location")
        );
    }

    #[test]
    fn bad_files_name_the_line_and_bad_options_the_stream() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "[[stream]]\nname = \"a\"\nsource = \"land/a\"\ntabel = \"t\"\n",
        );
        let err = load(&p, None, &local()).unwrap_err().to_string();
        assert!(err.contains("line 4"), "{err}");
        assert!(err.contains("tabel"), "{err}");
        let p = write(
            dir.path(),
            "[[stream]]\nname = \"a\"\nsource = \"land/a\"\ntable = \"t\"\noptions = { \"cloudFiles.inferColumTypes\" = true }\n",
        );
        let err = load(&p, None, &local()).unwrap_err().to_string();
        assert!(
            err.contains("stream \"a\"") && err.contains("did you mean"),
            "{err}"
        );
    }
}

#[cfg(test)]
mod schema_tests {
    #[test]
    fn json_schema_lists_every_option() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../schemas/config.schema.json")).unwrap();
        let props = &schema["$defs"]["options"]["properties"];
        for o in crate::options::OPTIONS {
            let supported = o.support == crate::options::Support::Supported;
            assert_eq!(
                props.get(o.key).is_some(),
                supported,
                "schemas/config.schema.json lists {} only if it is supported",
                o.key
            );
        }
    }
}
