//! Structured stream events: one JSON object per line in `<checkpoint>/events.jsonl`
//! (schema: `schemas/event.schema.json`), rotated to `events.jsonl.1` past a size limit so
//! the log stays bounded. Events are what alerts, `autoloader events` and
//! `autoloader status` are made of.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// File name of the event log inside the checkpoint.
pub const EVENTS_FILE: &str = "events.jsonl";
/// Size past which the log is rotated.
const MAX_BYTES: u64 = 8 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// Event types (the `type` field).
pub mod kind {
    pub const STREAM_STARTED: &str = "stream_started";
    pub const STREAM_STOPPED: &str = "stream_stopped";
    pub const STREAM_FAILED: &str = "stream_failed";
    pub const BATCH_COMMITTED: &str = "batch_committed";
    pub const SCHEMA_INFERRED: &str = "schema_inferred";
    pub const SCHEMA_EVOLVED: &str = "schema_evolved";
    pub const NEW_COLUMNS_REJECTED: &str = "new_columns_rejected";
    pub const RESCUED_DATA_SEEN: &str = "rescued_data_seen";
    pub const TYPE_MISMATCH: &str = "type_mismatch";
    pub const CORRUPT_FILE_SKIPPED: &str = "corrupt_file_skipped";
    pub const OVERWRITTEN_FILE_IGNORED: &str = "overwritten_file_ignored";
    pub const ALERT_FAILED: &str = "alert_failed";
    pub const FILE_QUARANTINED: &str = "file_quarantined";
    /// Every type, for validation of `--type`.
    pub const ALL: &[&str] = &[
        STREAM_STARTED,
        STREAM_STOPPED,
        STREAM_FAILED,
        BATCH_COMMITTED,
        SCHEMA_INFERRED,
        SCHEMA_EVOLVED,
        NEW_COLUMNS_REJECTED,
        RESCUED_DATA_SEEN,
        TYPE_MISMATCH,
        CORRUPT_FILE_SKIPPED,
        OVERWRITTEN_FILE_IGNORED,
        ALERT_FAILED,
        FILE_QUARANTINED,
    ];
}

/// One event.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Event {
    /// RFC 3339 UTC, milliseconds.
    pub time: String,
    pub stream: String,
    pub severity: Severity,
    #[serde(rename = "type")]
    pub kind: String,
    /// Type-specific fields.
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

impl Event {
    pub fn new(stream: &str, severity: Severity, kind: &str, fields: Value) -> Event {
        Event {
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            stream: stream.to_string(),
            severity,
            kind: kind.to_string(),
            fields: match fields {
                Value::Object(m) => m,
                Value::Null => Map::new(),
                other => Map::from_iter([("value".to_string(), other)]),
            },
        }
    }

    /// A one-line human description (used for alert text and the terminal listing).
    pub fn describe(&self) -> String {
        let f = &self.fields;
        let list = |key: &str| -> String {
            f.get(key)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default()
        };
        let text = |key: &str| {
            f.get(key)
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .unwrap_or_default()
        };
        match self.kind.as_str() {
            kind::SCHEMA_EVOLVED => format!(
                "schema evolved to version {}: new columns {} (first seen in {})",
                text("newVersion"),
                list("addedColumns"),
                text("file")
            ),
            kind::NEW_COLUMNS_REJECTED => format!(
                "new columns {} rejected in {}",
                list("addedColumns"),
                list("files")
            ),
            kind::RESCUED_DATA_SEEN => format!(
                "{} of {} rows rescued ({:.1}%), keys: {} (first file {})",
                text("rescuedRows"),
                text("rows"),
                f.get("share").and_then(Value::as_f64).unwrap_or(0.0) * 100.0,
                list("keys"),
                text("file")
            ),
            kind::TYPE_MISMATCH => format!(
                "type mismatch in column {} ({} rows)",
                text("column"),
                text("rows")
            ),
            kind::BATCH_COMMITTED => format!(
                "batch {} committed: {} files, {} rows, {} rescued, table version {}",
                text("batch"),
                text("files"),
                text("rows"),
                text("rescuedRows"),
                text("tableVersion")
            ),
            kind::STREAM_FAILED => format!("stream failed: {}", text("error")),
            _ => {
                let rest: Vec<String> = f.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("{} {}", self.kind.replace('_', " "), rest.join(" "))
            }
        }
    }
}

/// The append-only event log of one stream.
#[derive(Debug)]
pub struct EventLog {
    path: PathBuf,
    stream: String,
    file: Mutex<Option<File>>,
}

impl EventLog {
    pub fn open(checkpoint: &Path, stream: &str) -> EventLog {
        EventLog {
            path: checkpoint.join(EVENTS_FILE),
            stream: stream.to_string(),
            file: Mutex::new(None),
        }
    }

    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// Records an event and returns it. A log that cannot be written never stops ingestion
    /// (the failure is logged).
    pub fn emit(&self, severity: Severity, kind: &str, fields: Value) -> Event {
        let event = Event::new(&self.stream, severity, kind, fields);
        if let Err(e) = self.append(&event) {
            tracing::warn!(path = %self.path.display(), error = %e, "Cannot write the event log.");
        }
        event
    }

    fn append(&self, event: &Event) -> std::io::Result<()> {
        let mut line = serde_json::to_string(event).map_err(std::io::Error::other)?;
        line.push('\n');
        let mut guard = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if guard.is_none() {
            *guard = Some(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)?,
            );
        }
        let file = guard.as_mut().expect("opened above");
        if file.metadata()?.len() + line.len() as u64 > MAX_BYTES {
            fs::rename(&self.path, self.path.with_extension("jsonl.1"))?;
            *file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?;
        }
        file.write_all(line.as_bytes())
    }
}

/// Reads the events of a checkpoint (the rotated file first), oldest first. Unreadable
/// lines (a torn last line after a crash) are skipped.
pub fn read_events(checkpoint: &Path) -> std::io::Result<Vec<Event>> {
    let mut out = Vec::new();
    for path in [
        checkpoint.join(format!("{EVENTS_FILE}.1")),
        checkpoint.join(EVENTS_FILE),
    ] {
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for line in BufReader::new(file).lines() {
            if let Ok(event) = serde_json::from_str::<Event>(&line?) {
                out.push(event);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_json_schema_lists_every_event_type() {
        let schema: Value =
            serde_json::from_str(include_str!("../../schemas/event.schema.json")).unwrap();
        let types: Vec<&str> = schema["properties"]["type"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(types, kind::ALL);
    }

    #[test]
    fn events_append_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::open(dir.path(), "orders");
        log.emit(
            Severity::Info,
            kind::STREAM_STARTED,
            json!({"source": "/land"}),
        );
        let e = log.emit(
            Severity::Warning,
            kind::SCHEMA_EVOLVED,
            json!({"oldVersion": 0, "newVersion": 1, "addedColumns": ["coupon_code STRING"], "file": "file:///a.json"}),
        );
        assert_eq!(
            e.describe(),
            "schema evolved to version 1: new columns coupon_code STRING (first seen in file:///a.json)"
        );
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(EVENTS_FILE))
            .unwrap()
            .write_all(b"{\"torn")
            .unwrap();
        let events = read_events(dir.path()).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].kind, "schema_evolved");
        assert_eq!(events[1].fields["newVersion"], 1);
        let line = std::fs::read_to_string(dir.path().join(EVENTS_FILE)).unwrap();
        assert!(line.starts_with("{\"time\":\""), "{line}");
        assert!(
            line.contains(
                "\"stream\":\"orders\",\"severity\":\"info\",\"type\":\"stream_started\""
            ),
            "{line}"
        );
    }
}
