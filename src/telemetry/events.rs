//! Structured stream events: one JSON object per line in `<checkpoint>/events.jsonl`
//! (schema: `schemas/event.schema.json`, generated from [`Event`] and [`EventFields`]),
//! rotated to `events.jsonl.1` past a size limit so the log stays bounded. Events are what
//! alerts, `autoloader events` and `autoloader status` are made of.

use std::borrow::Cow;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use schemars::{JsonSchema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// File name of the event log inside the checkpoint.
pub const EVENTS_FILE: &str = "events.jsonl";
/// Size past which the log is rotated.
const MAX_BYTES: u64 = 8 << 20;

/// How much an event matters: `info` (progress), `warning` (drift or skipped input worth a
/// look; nothing was lost) or `error` (data was refused or lost, or the stream stopped).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// Declares [`EventKind`], its names, and the [`kind`] constants, from one list.
macro_rules! event_kinds {
    ($($(#[doc = $doc:literal])* $variant:ident = $name:literal as $constant:ident;)*) => {
        /// An event's type (its `type` field), written as its snake_case name.
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum EventKind {
            $($(#[doc = $doc])* $variant,)*
            /// A type this version does not know (written by a newer one). Reading keeps
            /// it as it was written, so such events are listed and re-serialized intact.
            Other(String),
        }

        impl EventKind {
            /// The name as written in `events.jsonl`.
            pub fn as_str(&self) -> &str {
                match self {
                    $(EventKind::$variant => $name,)*
                    EventKind::Other(name) => name,
                }
            }

            /// The known type of this name, if there is one (names are case-sensitive).
            pub fn known(name: &str) -> Option<EventKind> {
                match name {
                    $($name => Some(EventKind::$variant),)*
                    _ => None,
                }
            }
        }

        /// Event types (the `type` field), as constants for the call sites.
        pub mod kind {
            use crate::telemetry::events::EventKind;

            $(pub const $constant: EventKind = EventKind::$variant;)*
            /// Every known type, in the order of the JSON Schema's enum (and of
            /// `autoloader events --type`'s message).
            pub const ALL: &[EventKind] = &[$($constant,)*];
        }
    };
}

event_kinds! {
    /// A stream opened its checkpoint and starts listing.
    StreamStarted = "stream_started" as STREAM_STARTED;
    /// A stream stopped cleanly (`--once` done, or a signal).
    StreamStopped = "stream_stopped" as STREAM_STOPPED;
    /// A stream stopped on an error (or to pick up a new schema version).
    StreamFailed = "stream_failed" as STREAM_FAILED;
    /// A batch was committed to the table and the checkpoint.
    BatchCommitted = "batch_committed" as BATCH_COMMITTED;
    /// The first schema version was inferred (or taken from the `schema` option).
    SchemaInferred = "schema_inferred" as SCHEMA_INFERRED;
    /// A new schema version added columns.
    SchemaEvolved = "schema_evolved" as SCHEMA_EVOLVED;
    /// New columns were refused (`failOnNewColumns`).
    NewColumnsRejected = "new_columns_rejected" as NEW_COLUMNS_REJECTED;
    /// A batch put values in the rescued-data column.
    RescuedDataSeen = "rescued_data_seen" as RESCUED_DATA_SEEN;
    /// Values of a column did not fit its type.
    TypeMismatch = "type_mismatch" as TYPE_MISMATCH;
    /// A file that cannot be read was skipped (`ignoreCorruptFiles`).
    CorruptFileSkipped = "corrupt_file_skipped" as CORRUPT_FILE_SKIPPED;
    /// A file already ingested changed and was not ingested again.
    OverwrittenFileIgnored = "overwritten_file_ignored" as OVERWRITTEN_FILE_IGNORED;
    /// An alert could not be delivered to a webhook.
    AlertFailed = "alert_failed" as ALERT_FAILED;
    /// A file that crashed the process repeatedly was set aside.
    FileQuarantined = "file_quarantined" as FILE_QUARANTINED;
    /// Change records of one key shared a sequence; a fixed rule chose between them.
    SequenceTies = "sequence_ties" as SEQUENCE_TIES;
    /// A snapshot flow took no snapshot for longer than its expected interval.
    SnapshotOverdue = "snapshot_overdue" as SNAPSHOT_OVERDUE;
    /// An ingested file was deleted or moved out of the source (`cloudFiles.cleanSource`).
    FileCleaned = "file_cleaned" as FILE_CLEANED;
    /// An ingested file could not be cleaned; it is tried again later.
    CleanFailed = "clean_failed" as CLEAN_FAILED;
    /// Notification mode: queue messages deleted with nothing to ingest (test events,
    /// outside the source, filtered, too old, files already ingested or planned).
    QueueMessagesSkipped = "queue_messages_skipped" as QUEUE_MESSAGES_SKIPPED;
    /// Notification mode: a message left in the queue for its dead-letter queue
    /// (unparseable, or naming an object that does not exist).
    QueueMessageLeft = "queue_message_left" as QUEUE_MESSAGE_LEFT;
    /// A flow's definition changed in a way that applies to new rows only (Lakeflow's
    /// `flow_definition`): both definitions and the changes, and the batch it holds from.
    FlowDefinitionChanged = "flow_definition_changed" as FLOW_DEFINITION_CHANGED;
    /// A batch's expectation counts (Lakeflow's `flow_progress.data_quality`): per rule
    /// `name`, `dataset`, `passed_records`, `failed_records`, and the rows dropped and
    /// quarantined.
    DataQuality = "data_quality" as DATA_QUALITY;
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, so width and alignment (`{:<24}`) apply.
        f.pad(self.as_str())
    }
}

impl From<&str> for EventKind {
    /// Any name: a known type, or [`EventKind::Other`].
    fn from(name: &str) -> EventKind {
        EventKind::known(name).unwrap_or_else(|| EventKind::Other(name.to_string()))
    }
}

impl Serialize for EventKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for EventKind {
    /// Never fails on a string: an unknown name becomes [`EventKind::Other`].
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<EventKind, D::Error> {
        let name = Cow::<str>::deserialize(deserializer)?;
        Ok(EventKind::from(name.as_ref()))
    }
}

impl JsonSchema for EventKind {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "EventKind".into()
    }

    /// The types this version writes. Readers should accept others (from newer versions).
    fn json_schema(_: &mut SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = kind::ALL.iter().map(EventKind::as_str).collect();
        json_schema!({ "type": "string", "enum": names })
    }
}

/// One event: the four common fields, then the fields of its type.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(
    title = "autoloader stream event (one line of <checkpoint>/events.jsonl)",
    extend(
        "$id" = "https://github.com/autoloader/autoloader/schemas/event.schema.json",
        "additionalProperties" = true
    )
)]
pub struct Event {
    /// RFC 3339 UTC with milliseconds.
    #[schemars(extend("format" = "date-time"))]
    pub time: String,
    /// Stream name (config name, or the table folder's name).
    pub stream: String,
    pub severity: Severity,
    /// The event's type. Readers should accept types they do not know: a newer version may
    /// write more (this one keeps them as they are).
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// Type-specific fields (documented by [`EventFields`]).
    #[serde(flatten)]
    #[schemars(with = "EventFields")]
    pub fields: Map<String, Value>,
}

/// The type-specific fields of events, as written today: every one is optional, each type
/// has its own set, and an event may carry fields not listed here. Events are built from
/// `json!` objects (`Event::fields`); this struct is their documentation, the source of
/// the JSON Schema's properties, and a typed view for tests (missing fields read as 0,
/// empty or `null`).
#[derive(Debug, Default, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(transform = without_defaults)]
pub struct EventFields {
    /// Batch number (as in the checkpoint).
    pub batch: u64,
    /// Source file URI (first file concerned).
    pub file: Option<String>,
    /// batch_committed, stream_stopped: how many files; new_columns_rejected: their URIs.
    pub files: FileCount,
    /// Rows (of the batch, of the run, or with a type mismatch).
    pub rows: u64,
    /// Bytes of the batch's files.
    pub bytes: u64,
    /// Rows of the batch with a rescued-data value.
    pub rescued_rows: u64,
    /// batch_committed: files skipped (`ignoreCorruptFiles`, `ignoreMissingFiles`).
    pub skipped_files: u64,
    /// batch_committed: rows read but left out by the stream's `where` (not in `rows`).
    pub filtered_rows: u64,
    /// rescued_data_seen: rescued rows / rows of the batch.
    pub share: f64,
    /// rescued_data_seen: rescued keys.
    pub keys: Vec<String>,
    /// rescued_data_seen: rescued keys that are columns missing from the schema.
    pub new_columns: Vec<String>,
    /// rescued_data_seen: rescued keys whose values did not fit the column's type.
    pub type_mismatches: Vec<String>,
    /// rescued_data_seen: rescued keys that differ from a column only by case.
    pub case_mismatches: Vec<String>,
    /// rescued_data_seen: malformed records kept (`columnNameOfCorruptRecord`).
    pub malformed_records: u64,
    /// type_mismatch: the column.
    pub column: String,
    /// type_mismatch: the column's type.
    pub expected_type: Option<String>,
    /// type_mismatch: whether the values were kept in the rescued-data column.
    pub rescued: bool,
    /// schema_evolved: the version before.
    pub old_version: u64,
    /// schema_evolved: the version written.
    pub new_version: u64,
    /// schema_inferred: the version written; new_columns_rejected: the current version.
    pub version: u64,
    /// `name TYPE` of each added column (dotted paths for nested fields).
    pub added_columns: Vec<String>,
    /// schema_inferred, schema_evolved: what produced the version (as in `_schemas/N`).
    #[schemars(extend("enum" = crate::schema::store::VERSION_REASONS))]
    pub reason: String,
    /// schema_inferred: `name TYPE` of each data column.
    pub columns: Vec<String>,
    /// schema_inferred: the partition columns read from folder names.
    pub partition_columns: Vec<String>,
    /// schema_inferred: files read for inference (`null` for a provided schema).
    pub sampled_files: Option<u64>,
    /// schema_inferred: records or rows read for inference (`null` for a provided schema).
    pub sampled_records: Option<u64>,
    /// batch_committed: the Delta table version of the commit.
    pub table_version: u64,
    /// The schema version (stream_started: `null` before the first one).
    pub schema_version: Option<u64>,
    /// Seconds taken (of the batch, or of the run).
    pub seconds: f64,
    /// The error, as printed.
    pub error: String,
    /// stream_started: the landing folder.
    pub source: String,
    /// stream_started: the Delta table location.
    pub table: String,
    /// stream_started: the checkpoint location.
    pub checkpoint: String,
    /// stream_started: the stream id kept in the checkpoint.
    pub stream_id: String,
    /// overwritten_file_ignored, file_quarantined: the file's size in bytes.
    pub size: u64,
    /// overwritten_file_ignored, file_quarantined: the file's modification time,
    /// milliseconds since the epoch.
    pub mtime_ms: i64,
    /// file_quarantined: attempts that crashed the process.
    pub attempts: u64,
    /// alert_failed: the webhook, without credentials or query.
    pub webhook: String,
    /// alert_failed: the type of the event that was not delivered.
    pub alert: Option<String>,
    /// queue_messages_skipped, queue_message_left: the SQS queue's URL.
    pub queue: String,
    /// queue_message_left: the SQS message id.
    pub message_id: String,
    /// queue_message_left: how often the queue has handed the message out.
    pub receive_count: u64,
    /// queue_messages_skipped: messages whose files were already ingested or planned, or
    /// left out by the stream's filters.
    pub already_taken: u64,
    /// queue_messages_skipped: `s3:TestEvent` messages.
    pub test_events: u64,
    /// queue_messages_skipped: events for another bucket, outside the source's prefix, or
    /// for hidden and temporary names.
    pub outside_source: u64,
    /// queue_messages_skipped: events whose file name does not match `pathGlobFilter`.
    pub filtered: u64,
    /// queue_messages_skipped: events older than `cloudFiles.maxFileAge`.
    pub too_old: u64,
    /// queue_messages_skipped: events other than `ObjectCreated`.
    pub not_created: u64,
    /// flow_definition_changed: the definition recorded before (setting → value).
    pub previous: Option<Map<String, Value>>,
    /// flow_definition_changed: the batch the previous definition held from.
    pub previous_since_batch: u64,
    /// flow_definition_changed: the definition recorded now (setting → value).
    pub definition: Option<Map<String, Value>>,
    /// flow_definition_changed: the first batch planned under the new definition.
    pub since_batch: u64,
    /// flow_definition_changed: each changed setting, its recorded and given value
    /// (`null`: not set) and its class (`onChange`).
    pub changes: Vec<Value>,
    /// data_quality: Lakeflow's `flow_progress.data_quality` shape: `dropped_records`,
    /// `quarantined_records`, and `expectations`, a list of `name`, `dataset`,
    /// `passed_records`, `failed_records`, `dropped_records`, `quarantined_records`.
    #[serde(rename = "data_quality")]
    pub data_quality: Option<Map<String, Value>>,
}

/// `files`: a count of files, or their URIs.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(untagged)]
#[schemars(inline)]
pub enum FileCount {
    Count(u64),
    Uris(Vec<String>),
}

impl Default for FileCount {
    fn default() -> Self {
        FileCount::Count(0)
    }
}

/// Every property of [`EventFields`] is optional: the `default` values that `serde(default)`
/// would document are the struct's, not the file's, so they are left out.
fn without_defaults(schema: &mut schemars::Schema) {
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for property in properties.values_mut() {
            if let Value::Object(p) = property {
                p.remove("default");
            }
        }
    }
}

/// The JSON Schema of one line of `events.jsonl`, as committed in
/// `schemas/event.schema.json` (`tests/it/schemas.rs` keeps the two equal).
pub fn json_schema() -> schemars::Schema {
    schemars::SchemaGenerator::default().into_root_schema_for::<Event>()
}

impl Event {
    pub fn new(stream: &str, severity: Severity, kind: EventKind, fields: Value) -> Event {
        Event {
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            stream: stream.to_string(),
            severity,
            kind,
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
        match self.kind {
            EventKind::SchemaEvolved => format!(
                "schema evolved to version {}: new columns {} (first seen in {})",
                text("newVersion"),
                list("addedColumns"),
                text("file")
            ),
            EventKind::NewColumnsRejected => format!(
                "new columns {} rejected in {}",
                list("addedColumns"),
                list("files")
            ),
            EventKind::RescuedDataSeen => format!(
                "{} of {} rows rescued ({:.1}%), keys: {} (first file {})",
                text("rescuedRows"),
                text("rows"),
                f.get("share").and_then(Value::as_f64).unwrap_or(0.0) * 100.0,
                list("keys"),
                text("file")
            ),
            EventKind::TypeMismatch => format!(
                "type mismatch in column {} ({} rows)",
                text("column"),
                text("rows")
            ),
            EventKind::BatchCommitted => format!(
                "batch {} committed: {} files, {} rows, {} rescued, table version {}",
                text("batch"),
                text("files"),
                text("rows"),
                text("rescuedRows"),
                text("tableVersion")
            ),
            EventKind::StreamFailed => format!("stream failed: {}", text("error")),
            EventKind::DataQuality => {
                let quality = f.get("data_quality");
                let rules = quality
                    .and_then(|q| q.get("expectations"))
                    .and_then(Value::as_array);
                let count = |r: &Value, k: &str| r.get(k).and_then(Value::as_u64).unwrap_or(0);
                let said: Vec<String> = rules
                    .into_iter()
                    .flatten()
                    .map(|r| {
                        format!(
                            "{} failed {} of {}",
                            r.get("name").and_then(Value::as_str).unwrap_or_default(),
                            count(r, "failed_records"),
                            count(r, "passed_records") + count(r, "failed_records")
                        )
                    })
                    .collect();
                format!(
                    "batch {} expectations: {}; {} rows dropped, {} quarantined",
                    text("batch"),
                    said.join(", "),
                    quality.map_or(0, |q| count(q, "dropped_records")),
                    quality.map_or(0, |q| count(q, "quarantined_records"))
                )
            }
            _ => {
                let rest: Vec<String> = f.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!(
                    "{} {}",
                    self.kind.as_str().replace('_', " "),
                    rest.join(" ")
                )
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

    /// The folder the log is in (the checkpoint's local folder).
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or_else(|| Path::new("."))
    }

    /// Records an event and returns it. A log that cannot be written never stops ingestion
    /// (the failure is logged).
    pub fn emit(&self, severity: Severity, kind: EventKind, fields: Value) -> Event {
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
            // A worker slot's state lives in the slot's own folder, so a stream's shared
            // folder (an S3 checkpoint's local cache) may not exist yet.
            fs::create_dir_all(self.dir())?;
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
        let all: Vec<&str> = kind::ALL.iter().map(EventKind::as_str).collect();
        assert_eq!(types, all);
    }

    #[test]
    fn kinds_are_written_as_their_names_and_read_back() {
        for k in kind::ALL {
            let text = serde_json::to_string(k).unwrap();
            assert_eq!(text, format!("\"{}\"", k.as_str()));
            assert_eq!(&serde_json::from_str::<EventKind>(&text).unwrap(), k);
            assert_eq!(EventKind::known(k.as_str()).as_ref(), Some(k));
        }
        assert_eq!(kind::BATCH_COMMITTED.as_str(), "batch_committed");
        assert_eq!(
            format!("[{:<16}]", kind::TYPE_MISMATCH),
            "[type_mismatch   ]"
        );
        assert_eq!(EventKind::known("Batch_Committed"), None);
    }

    #[test]
    fn an_unknown_type_is_read_kept_and_written_back_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let line = r#"{"time":"2026-03-15T00:00:00.000Z","stream":"orders","severity":"warning","type":"quota_exceeded","limit":3}"#;
        std::fs::write(dir.path().join(EVENTS_FILE), format!("{line}\n")).unwrap();
        let events = read_events(dir.path()).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].kind, EventKind::Other("quota_exceeded".into()));
        assert_eq!(events[0].describe(), "quota exceeded limit=3");
        assert_eq!(serde_json::to_string(&events[0]).unwrap(), line);
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
        assert_eq!(events[1].kind, EventKind::SchemaEvolved);
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
