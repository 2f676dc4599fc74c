//! Reports for people on call: schema history, diffs and versions as DDL, drift from the
//! table's rescued-data column, a stream's status and events. Each takes a table (local or
//! S3) and finds its streams' checkpoints under it, or a checkpoint named as such.

use std::collections::BTreeMap;

use arrow_array::cast::AsArray;
use arrow_array::{Array, StringArray};
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use serde::Serialize;
use serde_json::Value;

use crate::checkpoint::{Checkpoint, CommitSummary};
use crate::location::Location;
use crate::options::RESCUED_DATA_COLUMN;
use crate::pipeline::IngestRequest;
use crate::record::{FILE_PATH_KEY, LINE_KEY};
use crate::schema::evolution;
use crate::schema::store::{SCHEMAS_DIR, SchemaStore, SchemaStoreError};
use crate::storage::StorageSettings;
use crate::storage::object_dir::RemoteDir;
use crate::target::DeltaAppend;
use crate::telemetry::events::{self, Event, EventKind};
use crate::telemetry::live;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Schema(#[from] SchemaStoreError),
    #[error("no schema versions under {0}")]
    NoSchemas(String),
    #[error("schema version {0} does not exist")]
    NoVersion(u64),
    #[error("cannot read the table {path}: {reason}")]
    Table { path: String, reason: String },
    #[error("cannot read the table {path}: not a Delta table (no _delta_log)")]
    NotATable { path: String },
    #[error(transparent)]
    Checkpoint(#[from] crate::checkpoint::CheckpointError),
    #[error("{path} is not a checkpoint (nothing was ever ingested with it)")]
    NotACheckpoint { path: String },
    #[error(
        "{path} is not a checkpoint, and no stream's checkpoint is under it ({path}/_autoloader, or {path}/_autoloader/NAME for a config stream); for a stream whose checkpoint is elsewhere, pass --checkpoint DIR"
    )]
    NoCheckpoint { path: String },
    #[error("no stream {stream:?} writes {path}; its streams: {known}")]
    NoSuchStream {
        path: String,
        stream: String,
        known: String,
    },
    #[error("{path} has several streams ({known}): pick one with --stream NAME")]
    SeveralStreams { path: String, known: String },
    #[error(
        "--since {0:?}: expected a time (2026-03-15T00:00:00Z) or how long ago, a number with a unit: s, m, h, d or w (90s, 15m, 24h, 7d, 2w)"
    )]
    Since(String),
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// Parses `--since`: a time (as `cloudFiles.modifiedAfter` takes it: `2026-03-15`,
/// `2026-03-15T00:00:00Z`, `2026-03-15 00:00:00 UTC+0`), or how long before `now_ms`: a
/// number with a unit, `ms`, `s`, `m`, `h`, `d` (24 h) or `w` (7 d), also spelled out
/// (`minutes`, `days`). Returns milliseconds since the epoch.
pub fn parse_since(text: &str, now_ms: i64) -> Result<i64, ReportError> {
    if let Ok(ms) = crate::options::parse_instant("--since", text) {
        return Ok(ms);
    }
    let bad = || ReportError::Since(text.to_string());
    let t = text.trim().to_ascii_lowercase();
    let end = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(end);
    let n: f64 = number.parse().map_err(|_| bad())?;
    let unit_ms: f64 = match unit.trim() {
        "ms" | "millis" | "milliseconds" => 1.0,
        "s" | "sec" | "secs" | "second" | "seconds" => 1e3,
        "m" | "min" | "mins" | "minute" | "minutes" => 60e3,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600e3,
        "d" | "day" | "days" => 86_400e3,
        "w" | "week" | "weeks" => 604_800e3,
        // A bare number is refused: seconds or a year, it cannot say.
        _ => return Err(bad()),
    };
    let ago = n * unit_ms;
    if !ago.is_finite() || ago > now_ms as f64 {
        return Err(bad());
    }
    Ok(now_ms - ago as i64)
}

/// A stream's checkpoint, as a report found it.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamCheckpoint {
    /// The stream's name: its folder under `TABLE/_autoloader` (a config stream), or the
    /// table's folder name for `ingest`'s checkpoint `TABLE/_autoloader`; `None` for a
    /// checkpoint named as such.
    pub name: Option<String>,
    pub location: Location,
}

/// The checkpoints a report reads: `checkpoint` when given (it must be one); else `target`
/// itself when it is a checkpoint; else the streams of the table `target`, found where
/// their checkpoints are by default: `TABLE/_autoloader` (`ingest`) and
/// `TABLE/_autoloader/NAME` (the config stream NAME). All of them, or the one named
/// `stream`. Nothing else links a table to a checkpoint kept elsewhere (its commits record
/// the stream id, not the checkpoint), so such a stream needs `--checkpoint`.
pub fn checkpoints(
    target: Option<&Location>,
    checkpoint: Option<&Location>,
    stream: Option<&str>,
    state: &StorageSettings,
) -> Result<Vec<StreamCheckpoint>, ReportError> {
    let (target, given) = match (checkpoint, target) {
        (Some(c), _) => (c, true),
        (None, Some(t)) => (t, false),
        (None, None) => {
            return Err(ReportError::NoCheckpoint {
                path: ".".to_string(),
            });
        }
    };
    if is_checkpoint(target, state)? {
        return Ok(vec![StreamCheckpoint {
            name: None,
            location: target.clone(),
        }]);
    }
    // `--checkpoint TABLE` means the table's checkpoints too.
    let found = table_streams(target, state)?;
    if found.is_empty() && given {
        return Err(ReportError::NotACheckpoint {
            path: target.to_string(),
        });
    }
    if found.is_empty() {
        return Err(ReportError::NoCheckpoint {
            path: target.to_string(),
        });
    }
    let Some(name) = stream else {
        return Ok(found);
    };
    // `ingest`'s stream answers to its `--name` and to the table folder's name.
    let root = IngestRequest::default_checkpoint(target, None);
    let is_root_named =
        |s: &StreamCheckpoint| s.location == root && IngestRequest::default_name(target) == name;
    match found
        .iter()
        .find(|s| s.name.as_deref() == Some(name) || is_root_named(s))
    {
        Some(one) => Ok(vec![one.clone()]),
        None => Err(ReportError::NoSuchStream {
            path: target.to_string(),
            stream: name.to_string(),
            known: stream_names(&found),
        }),
    }
}

/// The one checkpoint of `found`, or an error naming the streams to choose from.
pub fn only_one(
    target: &Location,
    mut found: Vec<StreamCheckpoint>,
) -> Result<StreamCheckpoint, ReportError> {
    if found.len() == 1 {
        return Ok(found.remove(0));
    }
    Err(ReportError::SeveralStreams {
        path: target.to_string(),
        known: stream_names(&found),
    })
}

fn stream_names(found: &[StreamCheckpoint]) -> String {
    found
        .iter()
        .map(|s| s.name.clone().unwrap_or_else(|| s.location.to_string()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The name the stream of `checkpoint` last ran under (`ingest --name`), from its last
/// `stream_started` event; `None` without one.
fn started_as(checkpoint: &Location, state: &StorageSettings) -> Option<String> {
    let local = crate::checkpoint::local_dir(checkpoint, state);
    events::read_events(&local)
        .ok()?
        .into_iter()
        .rev()
        .find(|e| e.kind == EventKind::StreamStarted)
        .map(|e| e.stream)
        .filter(|name| !name.is_empty())
}

/// The checkpoints under a table's default places.
fn table_streams(
    table: &Location,
    state: &StorageSettings,
) -> Result<Vec<StreamCheckpoint>, ReportError> {
    let root = IngestRequest::default_checkpoint(table, None);
    let mut out = Vec::new();
    if is_checkpoint(&root, state)? {
        out.push(StreamCheckpoint {
            name: Some(
                started_as(&root, state).unwrap_or_else(|| IngestRequest::default_name(table)),
            ),
            location: root.clone(),
        });
    }
    let mut children: Vec<String> = match &root {
        Location::Local(dir) => match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => {
                return Err(ReportError::Io {
                    path: dir.display().to_string(),
                    source,
                });
            }
        },
        Location::S3(url) => RemoteDir::open(url, state)
            .and_then(|d| d.subdirs())
            .map_err(crate::checkpoint::CheckpointError::from)?,
    };
    children.sort();
    for name in children.into_iter().filter(|n| n != SCHEMAS_DIR) {
        let location = root.join(&name);
        if is_checkpoint(&location, state)? {
            out.push(StreamCheckpoint {
                name: Some(name),
                location,
            });
        }
    }
    Ok(out)
}

/// The schema location a `schema` report reads: `location` itself when it holds schema
/// versions; else the checkpoint (the default schema location) of the one stream of the
/// table or checkpoint `location`, or of the stream `stream`.
pub fn schema_location(
    location: &Location,
    stream: Option<&str>,
    state: &StorageSettings,
) -> Result<Location, ReportError> {
    // The `_schemas` folder itself names its schema location.
    if location.file_name().as_deref() == Some(SCHEMAS_DIR)
        && let Some(parent) = location.parent()
        && !SchemaStore::open(&parent, state)?.versions()?.is_empty()
    {
        return Ok(parent);
    }
    let here = SchemaStore::open(location, state)?;
    if !here.versions()?.is_empty() {
        return Ok(location.clone());
    }
    match checkpoints(Some(location), None, stream, state) {
        Ok(found) => Ok(only_one(location, found)?.location),
        Err(ReportError::NoCheckpoint { .. }) => Err(ReportError::NoSchemas(here.describe())),
        Err(e) => Err(e),
    }
}

/// One schema version, as DDL (what the `schema` option takes).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShownVersion {
    pub version: u64,
    pub created_at: String,
    pub reason: String,
    /// The data columns, `name TYPE`, comma-separated.
    pub ddl: String,
    /// Each data column, `name TYPE`.
    pub columns: Vec<String>,
    /// Partition columns read from folder names, `name TYPE`.
    pub partition_columns: Vec<String>,
}

/// Schema version `version` (the latest when `None`) of the schema location `location`.
pub fn schema_show(
    location: &Location,
    state: &StorageSettings,
    version: Option<u64>,
) -> Result<ShownVersion, ReportError> {
    let store = SchemaStore::open(location, state)?;
    let versions = store.versions()?;
    let Some(&latest) = versions.last() else {
        return Err(ReportError::NoSchemas(store.describe()));
    };
    let version = version.unwrap_or(latest);
    if !versions.contains(&version) {
        return Err(ReportError::NoVersion(version));
    }
    let sv = store.read(version)?;
    let columns: Vec<String> = sv.data.fields.iter().map(ddl_field).collect();
    Ok(ShownVersion {
        version,
        created_at: time_of(sv.info.created_at_ms),
        reason: sv.info.reason.clone(),
        ddl: columns.join(", "),
        columns,
        partition_columns: sv.partition.fields.iter().map(ddl_field).collect(),
    })
}

/// `name TYPE`, the name in backticks when DDL needs them.
fn ddl_field(f: &crate::schema::Field) -> String {
    format!("{} {}", ddl_name(&f.name), ddl_type(&f.data_type))
}

fn ddl_name(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        name.to_string()
    } else {
        format!("`{}`", name.replace('`', "``"))
    }
}

fn ddl_type(t: &crate::schema::DataType) -> String {
    use crate::schema::DataType;
    match t {
        DataType::Struct(fields) => format!(
            "STRUCT<{}>",
            fields
                .iter()
                .map(|f| format!("{}: {}", ddl_name(&f.name), ddl_type(&f.data_type)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        DataType::Array(element) => format!("ARRAY<{}>", ddl_type(element)),
        DataType::Map(key, value) => format!("MAP<{}, {}>", ddl_type(key), ddl_type(value)),
        other => other.to_string(),
    }
}

/// One schema version and what it changed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    pub version: u64,
    pub created_at: String,
    pub reason: String,
    /// Columns added since the previous version (`name TYPE`).
    pub added: Vec<String>,
    pub columns: usize,
}

fn time_of(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

/// Every `_schemas/N` with its time and what it added.
pub fn schema_history(
    location: &Location,
    state: &StorageSettings,
) -> Result<Vec<HistoryEntry>, ReportError> {
    let store = SchemaStore::open(location, state)?;
    let versions = store.versions()?;
    if versions.is_empty() {
        return Err(ReportError::NoSchemas(store.describe()));
    }
    let mut out = Vec::new();
    let mut previous: Option<crate::schema::Schema> = None;
    for v in versions {
        let sv = store.read(v)?;
        let added = match &previous {
            None => Vec::new(),
            Some(prev) => evolution::merge(prev, &sv.data, &[])
                .1
                .iter()
                .map(ToString::to_string)
                .collect(),
        };
        out.push(HistoryEntry {
            version: v,
            created_at: time_of(sv.info.created_at_ms),
            reason: sv.info.reason.clone(),
            added,
            columns: sv.data.fields.len(),
        });
        previous = Some(sv.data);
    }
    Ok(out)
}

/// Differences between two versions.
#[derive(Debug, Serialize, PartialEq)]
pub struct SchemaDiff {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
}

pub fn schema_diff(
    location: &Location,
    state: &StorageSettings,
    a: u64,
    b: u64,
) -> Result<SchemaDiff, ReportError> {
    let store = SchemaStore::open(location, state)?;
    let versions = store.versions()?;
    for v in [a, b] {
        if !versions.contains(&v) {
            return Err(ReportError::NoVersion(v));
        }
    }
    let (old, new) = (store.read(a)?.data, store.read(b)?.data);
    Ok(SchemaDiff {
        added: evolution::merge(&old, &new, &[])
            .1
            .iter()
            .map(ToString::to_string)
            .collect(),
        removed: evolution::merge(&new, &old, &[])
            .1
            .iter()
            .map(ToString::to_string)
            .collect(),
        changed: evolution::type_conflicts(&old, &new),
    })
}

/// The drift report: per day, rows and rescued rows; per rescued key, occurrences, first
/// and last seen, and an example file. Days and times are when rows were ingested (the
/// Delta commit of their data file).
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftReport {
    pub days: Vec<DayDrift>,
    pub keys: Vec<KeyDrift>,
}

#[derive(Debug, Default, Serialize, Clone)]
#[serde(rename_all = "camelCase")]
pub struct DayDrift {
    pub day: String,
    pub rows: u64,
    pub rescued_rows: u64,
    pub rescued_share: f64,
}

#[derive(Debug, Default, Serialize, Clone)]
#[serde(rename_all = "camelCase")]
pub struct KeyDrift {
    pub key: String,
    pub occurrences: u64,
    pub first_seen: String,
    pub last_seen: String,
    pub example_file: String,
}

/// Builds the drift report from the table's rescued-data column: a local table or one on
/// S3 (with the S3 configuration in `storage`). Only that column of each data file is read.
pub async fn drift(
    table: &Location,
    storage: &StorageSettings,
    since_ms: Option<i64>,
) -> Result<DriftReport, ReportError> {
    let table_err = |reason: String| ReportError::Table {
        path: table.to_string(),
        reason,
    };
    // Opening a local table creates its folder: a report must not, so look first.
    if let Some(dir) = table.as_local()
        && !dir.join("_delta_log").is_dir()
    {
        return Err(ReportError::NotATable {
            path: table.to_string(),
        });
    }
    let sink = DeltaAppend::open(table, storage)
        .await
        .map_err(|e| table_err(e.to_string()))?;
    if !sink.exists() {
        return Err(ReportError::NotATable {
            path: table.to_string(),
        });
    }
    let dt = sink.table();
    let state = dt.snapshot().map_err(|e| table_err(e.to_string()))?;
    let files: Vec<(ObjectPath, u64, i64)> = state
        .log_data()
        .into_iter()
        .map(|f| {
            (
                f.object_store_path(),
                u64::try_from(f.size()).unwrap_or(0),
                f.modification_time(),
            )
        })
        .collect();
    let store = dt.object_store();
    let mut days: BTreeMap<String, DayDrift> = BTreeMap::new();
    let mut keys: BTreeMap<String, (KeyDrift, i64, i64)> = BTreeMap::new();
    for (path, size, ingested_ms) in files {
        if since_ms.is_some_and(|s| ingested_ms < s) {
            continue;
        }
        let file_err = |e: &dyn std::fmt::Display| ReportError::Table {
            path: format!("{}/{path}", table.to_string().trim_end_matches('/')),
            reason: e.to_string(),
        };
        let reader = crate::storage::RangedFile {
            store: store.clone(),
            path: path.clone(),
            size,
        };
        let builder = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .map_err(|e| file_err(&e))?;
        let schema = builder.parquet_schema();
        let column = schema
            .columns()
            .iter()
            .position(|c| c.path().string() == RESCUED_DATA_COLUMN);
        let total = u64::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
        let day = time_of(ingested_ms)[..10].to_string();
        let entry = days.entry(day.clone()).or_insert_with(|| DayDrift {
            day,
            ..DayDrift::default()
        });
        entry.rows += total;
        let Some(column) = column else { continue };
        let mask = ProjectionMask::leaves(schema, [column]);
        let mut reader = builder
            .with_projection(mask)
            .build()
            .map_err(|e| file_err(&e))?;
        while let Some(batch) = reader.try_next().await.map_err(|e| file_err(&e))? {
            let texts: &StringArray = batch.column(0).as_string::<i32>();
            for i in 0..texts.len() {
                if texts.is_null(i) {
                    continue;
                }
                entry.rescued_rows += 1;
                let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(texts.value(i)) else {
                    continue;
                };
                let example = obj
                    .get(FILE_PATH_KEY)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                // The file and the line say where the values came from: they are not drift.
                for key in obj.keys().filter(|k| *k != FILE_PATH_KEY && *k != LINE_KEY) {
                    let k = keys.entry(key.clone()).or_insert_with(|| {
                        (
                            KeyDrift {
                                key: key.clone(),
                                example_file: example.clone(),
                                ..KeyDrift::default()
                            },
                            i64::MAX,
                            i64::MIN,
                        )
                    });
                    k.0.occurrences += 1;
                    if ingested_ms < k.1 {
                        k.1 = ingested_ms;
                        k.0.example_file.clone_from(&example);
                    }
                    k.2 = k.2.max(ingested_ms);
                }
            }
        }
    }
    let mut report = DriftReport::default();
    for (_, mut d) in days {
        d.rescued_share = if d.rows == 0 {
            0.0
        } else {
            d.rescued_rows as f64 / d.rows as f64
        };
        report.days.push(d);
    }
    let mut key_rows: Vec<KeyDrift> = keys
        .into_values()
        .map(|(mut k, first, last)| {
            k.first_seen = time_of(first);
            k.last_seen = time_of(last);
            k
        })
        .collect();
    key_rows.sort_by(|a, b| b.occurrences.cmp(&a.occurrences).then(a.key.cmp(&b.key)));
    report.keys = key_rows;
    Ok(report)
}

/// Events of checkpoints (merged by time when there are several), filtered by type and
/// time. The event log is local: an S3 checkpoint's is in its local cache, so it holds what
/// ran on this machine.
pub fn filtered_events(
    checkpoints: &[StreamCheckpoint],
    state: &StorageSettings,
    kinds: &[EventKind],
    since_ms: Option<i64>,
) -> Result<Vec<Event>, ReportError> {
    let mut all = Vec::new();
    for c in checkpoints {
        // A path that is not a checkpoint has no events: say so rather than print nothing.
        if !is_checkpoint(&c.location, state)? {
            return Err(ReportError::NotACheckpoint {
                path: c.location.to_string(),
            });
        }
        let local = crate::checkpoint::local_dir(&c.location, state);
        all.extend(
            events::read_events(&local).map_err(|source| ReportError::Io {
                path: c.location.to_string(),
                source,
            })?,
        );
    }
    if checkpoints.len() > 1 {
        // RFC 3339 UTC with milliseconds: the text sorts as the time; stable for ties.
        all.sort_by(|a, b| a.time.cmp(&b.time));
    }
    Ok(all
        .into_iter()
        .filter(|e| kinds.is_empty() || kinds.contains(&e.kind))
        .filter(|e| {
            since_ms.is_none_or(|s| {
                chrono::DateTime::parse_from_rfc3339(&e.time)
                    .is_ok_and(|t| t.timestamp_millis() >= s)
            })
        })
        .collect())
}

/// A stream's checkpoint is at `location`: its own, or (competing workers) its slots'.
fn is_checkpoint(location: &Location, state: &StorageSettings) -> Result<bool, ReportError> {
    Ok(Checkpoint::exists(location, state)?
        || !crate::checkpoint::claims::slots(location, state)?.is_empty())
}

/// A stream's status, from its checkpoint and event log.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The stream's name, when found from its table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    pub checkpoint: String,
    pub running: Option<String>,
    /// While the stream runs: when it last updated the figures shown (`live.json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_at: Option<String>,
    pub stream_id: Option<String>,
    pub source: Option<String>,
    pub files_ingested: Option<u64>,
    pub files_pending: Option<u64>,
    pub batches: u64,
    pub rows: u64,
    pub rescued_rows: u64,
    pub bytes: u64,
    pub schema_version: Option<u64>,
    pub last_batch: Option<Value>,
    pub last_error: Option<Value>,
    /// A CDC stream: what its changes did to the table, summed from the table's commits
    /// (since its last reset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<CdcTotals>,
    /// A stream of competing workers (`--worker`): each slot under `workers/`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<WorkerStatus>,
    /// The flow's definition as its checkpoint recorded it, and since which batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub definition: Option<crate::pipeline::definition::RecordedDefinition>,
}

/// One worker slot of a stream (`CHECKPOINT/workers/K/`).
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerStatus {
    pub slot: u32,
    /// The process holding the slot (its lock or lease), none when the slot is free.
    pub holder: Option<String>,
    /// The number of the slot's last committed batch.
    pub last_batch: Option<u64>,
    /// Files of the slot's unfinished batches (a held slot: as its worker last said, with
    /// the files it listed and has not planned yet; held on another machine: its planned,
    /// uncommitted files from the slot's record on S3; unknown for a local checkpoint
    /// without its `live.json`).
    pub pending_files: Option<u64>,
    /// Batches the slot committed.
    pub batches: Option<u64>,
    /// Files in the slot's index, and the rows, rescued rows and bytes of its batches
    /// (unknown for a slot held on another machine: its record on S3 keeps them per batch).
    pub files_ingested: Option<u64>,
    pub rows: Option<u64>,
    pub rescued_rows: Option<u64>,
    pub bytes: Option<u64>,
    /// The schema version of the slot's last batch.
    pub schema_version: Option<u64>,
    /// Seconds since the holder took its lock (local) or last renewed its lease (S3).
    pub lease_age_seconds: Option<f64>,
}

/// Every worker slot of the stream whose checkpoint is `root`: a free one read from its
/// store (local: locked for the moment; S3: a copy, its lease never taken), a held one from its lease and the
/// `live.json` its worker keeps in the slot's local folder, or, held on another machine
/// (no `live.json` here), from the slot's record on S3 (a local slot has no other record).
fn worker_status(
    root: &Location,
    slots: &[u32],
    state: &StorageSettings,
) -> Result<Vec<WorkerStatus>, ReportError> {
    let mut out = Vec::with_capacity(slots.len());
    for &slot in slots {
        let location = crate::checkpoint::claims::slot_location(root, slot);
        let mut w = WorkerStatus {
            slot,
            ..WorkerStatus::default()
        };
        match Checkpoint::open_to_read(&location, state) {
            Ok(c) => {
                let (last, pending) = c.pending_plans()?;
                w.last_batch = last;
                w.pending_files = Some(pending.iter().map(|p| p.files.len() as u64).sum());
                let commits = c.commits()?;
                w.batches = Some(commits.len() as u64);
                w.files_ingested = Some(c.seen_files()?.len());
                let sum =
                    |f: fn(&CommitSummary) -> u64| Some(commits.iter().map(|(_, s)| f(s)).sum());
                w.rows = sum(|s| s.rows);
                w.rescued_rows = sum(|s| s.rescued_rows);
                w.bytes = sum(|s| s.bytes);
                w.schema_version = commits.last().map(|(_, s)| s.schema_version);
            }
            Err(crate::checkpoint::CheckpointError::Locked { holder, .. }) => {
                w.holder = Some(holder);
                w.lease_age_seconds = Checkpoint::lock_renewed_at_ms(&location, state)
                    .map(|at| (crate::clock::now_ms() - at).max(0) as f64 / 1000.0);
                if let Some(l) = live::read(&crate::checkpoint::local_dir(&location, state)) {
                    w.last_batch = l.last_batch;
                    w.pending_files = Some(l.files_pending);
                    w.batches = Some(l.batches);
                    w.files_ingested = Some(l.files_ingested);
                    w.rows = Some(l.rows);
                    w.rescued_rows = Some(l.rescued_rows);
                    w.bytes = Some(l.bytes);
                    w.schema_version = l.schema_version;
                } else if let Some(r) = Checkpoint::peek_record(&location, state)? {
                    // Held on another machine (its `live.json` is there): the slot's record
                    // on S3, whose pending files are those planned, not those listed.
                    w.last_batch = r.last_batch;
                    w.pending_files = Some(r.pending_files);
                    w.batches = Some(r.batches);
                }
            }
            Err(e) => return Err(e.into()),
        }
        out.push(w);
    }
    Ok(out)
}

/// What a CDC stream's batches did to its table (the `cdc` record of each commit).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CdcTotals {
    pub rows_inserted: u64,
    pub rows_updated: u64,
    pub rows_deleted: u64,
    /// Records ignored as stale: not sequenced after their key's applied change.
    pub records_stale: u64,
    /// Records ignored because a truncate sequenced after them emptied the table.
    pub records_truncated: u64,
}

impl CdcTotals {
    /// The sums of the `cdc` records in `commits` (Autoloader's commit info); `None` when
    /// no commit has one (not a CDC target).
    pub fn of(commits: &[(u64, Value)]) -> Option<CdcTotals> {
        let mut totals: Option<CdcTotals> = None;
        for cdc in commits.iter().filter_map(|(_, c)| c.get("cdc")) {
            let t = totals.get_or_insert_with(CdcTotals::default);
            let n = |k: &str| cdc.get(k).and_then(Value::as_u64).unwrap_or(0);
            t.rows_inserted += n("rowsInserted");
            t.rows_updated += n("rowsUpdated");
            t.rows_deleted += n("rowsDeleted");
            t.records_stale += n("recordsStale");
            t.records_truncated += n("recordsTruncated");
        }
        totals
    }
}

/// The table a checkpoint's stream writes: the one its default place names
/// (`TABLE/_autoloader`, `TABLE/_autoloader/NAME`), else the one its start event names.
fn table_of(checkpoint: &Location, started: Option<&str>) -> Option<Location> {
    let dir = |l: &Location| l.file_name().filter(|n| n == "_autoloader");
    if dir(checkpoint).is_some() {
        return checkpoint.parent();
    }
    if let Some(parent) = checkpoint.parent()
        && dir(&parent).is_some()
    {
        return parent.parent();
    }
    started.and_then(|t| Location::parse(t).ok())
}

/// The CDC totals of the table a stream writes (`None`: not a CDC target, or unreadable).
async fn cdc_totals(location: &Location, state: &StorageSettings) -> Option<CdcTotals> {
    let target = DeltaAppend::open_existing(location, state).await.ok()??;
    CdcTotals::of(&target.autoloader_commits().await.ok()?)
}

/// Reads what a checkpoint says. When no process holds it, the store is read and the
/// pending files listed. While a stream runs its store is locked: the figures are those it
/// keeps in `live.json` (see `telemetry/live.rs`), or, from an older version that wrote
/// none, the sums of the event log's `batch_committed` events.
pub async fn status(
    found: &StreamCheckpoint,
    state: &StorageSettings,
) -> Result<Status, ReportError> {
    let checkpoint = &found.location;
    let io = |source| ReportError::Io {
        path: checkpoint.to_string(),
        source,
    };
    let local = crate::checkpoint::local_dir(checkpoint, state);
    // Competing workers keep no checkpoint of the stream's own: one per slot under it.
    let slots = crate::checkpoint::claims::slots(checkpoint, state)?;
    // Opening a checkpoint creates one where there is none: check that it exists first.
    if slots.is_empty() && !Checkpoint::exists(checkpoint, state)? {
        return Err(ReportError::NotACheckpoint {
            path: checkpoint.to_string(),
        });
    }
    let mut st = Status {
        stream: found.name.clone(),
        checkpoint: checkpoint.to_string(),
        ..Status::default()
    };
    let all = events::read_events(&local).map_err(io)?;
    let mut table = None;
    for e in &all {
        match e.kind {
            EventKind::BatchCommitted => {
                st.last_batch = Some(serde_json::to_value(e).unwrap_or_default());
                st.schema_version = e
                    .fields
                    .get("schemaVersion")
                    .and_then(Value::as_u64)
                    .or(st.schema_version);
            }
            EventKind::StreamFailed => {
                st.last_error = Some(serde_json::to_value(e).unwrap_or_default())
            }
            EventKind::StreamStarted => {
                st.source = e
                    .fields
                    .get("source")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                st.stream_id = e
                    .fields
                    .get("streamId")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                table = e
                    .fields
                    .get("table")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            EventKind::SchemaEvolved => {
                st.schema_version = e.fields.get("newVersion").and_then(Value::as_u64)
            }
            EventKind::SchemaInferred => {
                st.schema_version = e.fields.get("version").and_then(Value::as_u64)
            }
            _ => {}
        }
    }
    if let Some(table) = table_of(checkpoint, table.as_deref()) {
        st.changes = cdc_totals(&table, state).await;
    }
    if !slots.is_empty() {
        st.workers = worker_status(checkpoint, &slots, state)?;
        let held: Vec<&str> = st
            .workers
            .iter()
            .filter_map(|w| w.holder.as_deref())
            .collect();
        if !held.is_empty() {
            st.running = Some(format!(
                "{} of {} worker slots held",
                held.len(),
                st.workers.len()
            ));
        }
        st.batches = st.workers.iter().filter_map(|w| w.batches).sum();
        st.files_pending = st
            .workers
            .iter()
            .map(|w| w.pending_files)
            .sum::<Option<u64>>();
        st.files_ingested = st.workers.iter().map(|w| w.files_ingested).sum();
        st.schema_version = st
            .workers
            .iter()
            .filter_map(|w| w.schema_version)
            .chain(st.schema_version)
            .max();
        let of_slots =
            |f: fn(&WorkerStatus) -> Option<u64>| -> Option<u64> { st.workers.iter().map(f).sum() };
        if let (Some(rows), Some(rescued), Some(bytes)) = (
            of_slots(|w| w.rows),
            of_slots(|w| w.rescued_rows),
            of_slots(|w| w.bytes),
        ) {
            (st.rows, st.rescued_rows, st.bytes) = (rows, rescued, bytes);
        } else {
            // A slot held on another machine: the shared event log's figures (this
            // machine's workers).
            for e in all.iter().filter(|e| e.kind == EventKind::BatchCommitted) {
                let n = |k: &str| e.fields.get(k).and_then(Value::as_u64).unwrap_or(0);
                st.rows += n("rows");
                st.rescued_rows += n("rescuedRows");
                st.bytes += n("bytes");
            }
        }
        return Ok(st);
    }
    match Checkpoint::open_to_read(checkpoint, state) {
        Ok(c) => {
            st.stream_id = Some(c.stream_id().to_string());
            st.definition = crate::pipeline::definition::recorded(&c).ok().flatten();
            let commits = c.commits()?;
            st.batches = commits.len() as u64;
            for (_, s) in &commits {
                st.rows += s.rows;
                st.rescued_rows += s.rescued_rows;
                st.bytes += s.bytes;
            }
            let seen = c.seen_files()?;
            st.files_ingested = Some(seen.len());
            if let Some(source) = &st.source
                && let Ok(src) = Location::parse(source).map_err(|_| ()).and_then(|l| {
                    // The flow's recorded options (its filters among them), so the files
                    // counted pending are those the stream would take.
                    let recorded: Vec<(String, String)> = st
                        .definition
                        .iter()
                        .flat_map(|d| d.definition.iter())
                        .filter(|(k, _)| crate::options::canonical(k).is_some())
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect();
                    let settings = crate::options::resolve(&recorded, checkpoint)
                        .or_else(|_| crate::options::resolve(&[], checkpoint))
                        .map(|(s, _)| s)
                        .map_err(|_| ())?;
                    // A table source's pending files need its position: not counted.
                    let src = crate::source::Source::open(
                        &l,
                        state,
                        crate::source::SourceFormat::Files,
                        &settings,
                    )
                    .map_err(|_| ())?;
                    Ok((src, settings))
                })
            {
                let (src, settings) = src;
                if let Ok(listed) = src.list(&settings).await {
                    let pending = listed
                        .iter()
                        .filter(|f| seen.get(&f.key).ok().flatten().is_none())
                        .count();
                    st.files_pending = Some(pending as u64);
                }
            }
        }
        Err(crate::checkpoint::CheckpointError::Locked { holder, .. }) => {
            st.running = Some(holder);
            st.definition = crate::pipeline::definition::mirrored(&local);
            if let Some(l) = live::read(&local) {
                st.live_at = Some(l.updated_at);
                st.files_ingested = Some(l.files_ingested);
                st.files_pending = Some(l.files_pending);
                st.batches = l.batches;
                st.rows = l.rows;
                st.rescued_rows = l.rescued_rows;
                st.bytes = l.bytes;
                st.schema_version = l.schema_version.or(st.schema_version);
                return Ok(st);
            }
            for e in all.iter().filter(|e| e.kind == EventKind::BatchCommitted) {
                st.batches += 1;
                st.rows += e.fields.get("rows").and_then(Value::as_u64).unwrap_or(0);
                st.rescued_rows += e
                    .fields
                    .get("rescuedRows")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                st.bytes += e.fields.get("bytes").and_then(Value::as_u64).unwrap_or(0);
            }
        }
        Err(e) => return Err(e.into()),
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdc_totals_sum_the_commits_cdc_records() {
        let commits = vec![
            (1, serde_json::json!({"batch": 0})),
            (
                2,
                serde_json::json!({"cdc": {"rowsInserted": 3, "rowsUpdated": 1, "rowsDeleted": 0, "recordsStale": 2, "recordsTruncated": 1}}),
            ),
            (
                3,
                serde_json::json!({"cdc": {"rowsInserted": 1, "rowsUpdated": 0, "rowsDeleted": 4, "recordsStale": 0}}),
            ),
        ];
        let t = CdcTotals::of(&commits).unwrap();
        assert_eq!((t.rows_inserted, t.rows_updated, t.rows_deleted), (4, 1, 4));
        assert_eq!((t.records_stale, t.records_truncated), (2, 1));
        assert_eq!(CdcTotals::of(&commits[..1]), None, "not a CDC target");
    }
    use crate::schema::{DataType, Field, Schema};

    #[test]
    fn shown_ddl_reads_back_as_the_schema_option() {
        let schema = Schema::new(vec![
            Field::new("order_id", DataType::Long),
            Field::new("unit price", DataType::Decimal(12, 2)),
            Field::new(
                "address",
                DataType::Struct(vec![Field::new("zip", DataType::String)]),
            ),
            Field::new("tags", DataType::Array(Box::new(DataType::String))),
        ]);
        let ddl: Vec<String> = schema.fields.iter().map(ddl_field).collect();
        let ddl = ddl.join(", ");
        assert!(ddl.contains("`unit price` DECIMAL(12,2)"), "{ddl}");
        assert_eq!(crate::schema::hints::parse_schema(&ddl).unwrap(), schema);
    }

    const NOW: i64 = 1_800_000_000_000;

    #[test]
    fn since_takes_the_units_the_help_shows() {
        for (text, ago_ms) in [
            ("90s", 90_000),
            ("15m", 900_000),
            ("24h", 86_400_000),
            ("7d", 7 * 86_400_000),
            ("2w", 14 * 86_400_000),
            ("1.5h", 5_400_000),
            ("3 days", 3 * 86_400_000),
            ("500ms", 500),
        ] {
            assert_eq!(parse_since(text, NOW).unwrap(), NOW - ago_ms, "{text}");
        }
        assert_eq!(
            parse_since("2026-03-15T00:00:00Z", NOW).unwrap(),
            1_773_532_800_000
        );
        for bad in ["7", "7y", "d", "", "-1d"] {
            let err = parse_since(bad, NOW).unwrap_err().to_string();
            assert!(err.contains("s, m, h, d or w"), "{bad}: {err}");
        }
    }
}
