//! The typed settings options resolve into: what every stage downstream reads, never
//! re-checking an option.

use crate::schema::evolution::EvolutionMode;
use std::collections::BTreeMap;
use std::fmt;

use chrono_tz::Tz;
use globset::GlobMatcher;

use crate::location::Location;
use crate::parse::json::JsonDialect;
use crate::parse::temporal::Temporal;
use crate::schema::Schema;

/// Input format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Csv,
    Parquet,
    /// Avro object container files (the schema in each file's header).
    Avro,
    /// ORC files (the schema in each file's footer).
    Orc,
    /// Spark's text source: one `value` STRING row per line, or per file (`wholetext`).
    Text,
    /// Spark's binaryFile source: one row per file with its path, modification time,
    /// length and content.
    BinaryFile,
    /// Spark's XML source: one row per `rowTag` element, attributes and child elements
    /// read into the same values JSON records are.
    Xml,
}

impl Format {
    /// The format of a `cloudFiles.format` value, as [`Format`]'s display spells it (any case).
    pub fn from_name(name: &str) -> Option<Format> {
        match name.to_ascii_lowercase().as_str() {
            "json" => Some(Format::Json),
            "csv" => Some(Format::Csv),
            "parquet" => Some(Format::Parquet),
            "avro" => Some(Format::Avro),
            "orc" => Some(Format::Orc),
            "text" => Some(Format::Text),
            "binaryfile" => Some(Format::BinaryFile),
            "xml" => Some(Format::Xml),
            _ => None,
        }
    }

    /// The format a file name implies (`.json`, `.jsonl`, `.ndjson`, `.csv`, `.parquet`, `.avro`, `.orc`,
    /// each optionally followed by `.gz`, `.zst`, `.bz2` or `.lz4`). Text and binaryFile
    /// read any file, and XML needs its `rowTag`, so only `cloudFiles.format` chooses them.
    pub fn from_file_name(name: &str) -> Option<Format> {
        let lower = name.to_ascii_lowercase();
        let base = [".gz", ".zst", ".bz2", ".lz4"]
            .iter()
            .find_map(|suffix| lower.strip_suffix(suffix))
            .unwrap_or(&lower);
        let ext = base.rsplit_once('.')?.1;
        match ext {
            "json" | "jsonl" | "ndjson" => Some(Format::Json),
            "csv" | "tsv" => Some(Format::Csv),
            "parquet" | "pq" => Some(Format::Parquet),
            "avro" => Some(Format::Avro),
            "orc" => Some(Format::Orc),
            _ => None,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Json => "json",
            Format::Csv => "csv",
            Format::Parquet => "parquet",
            Format::Avro => "avro",
            Format::Orc => "orc",
            Format::Text => "text",
            Format::BinaryFile => "binaryFile",
            Format::Xml => "xml",
        })
    }
}

/// `cloudFiles.useIncrementalListing`: whether an S3 source is listed only after the last
/// ingested key (Auto Loader's incremental listing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncrementalListing {
    /// Incremental while the last full listing found new keys only after the ingested ones.
    Auto,
    Always,
    Never,
}

/// CSV dialect.
#[derive(Debug, Clone)]
pub struct CsvSettings {
    pub header: bool,
    pub sep: u8,
    pub quote: u8,
    pub escape: Option<u8>,
    pub null_value: String,
    /// `emptyValue`: what a quoted empty field reads as.
    pub empty_value: String,
    /// `comment`: lines starting with it are skipped.
    pub comment: Option<u8>,
    /// `lineSep`: `None` is `\n`, `\r\n` or `\r`.
    pub line_sep: Option<u8>,
    /// `ignoreLeadingWhiteSpace` / `ignoreTrailingWhiteSpace` (header names and values).
    pub trim_leading: bool,
    pub trim_trailing: bool,
}

impl CsvSettings {
    /// A header name or value with the whitespace the options ignore removed.
    pub fn trim<'t>(&self, text: &'t str) -> &'t str {
        let text = if self.trim_leading {
            text.trim_start()
        } else {
            text
        };
        if self.trim_trailing {
            text.trim_end()
        } else {
            text
        }
    }
}

/// JSON reading options.
#[derive(Debug, Clone)]
pub struct JsonSettings {
    /// `allowSingleQuotes`, `allowNonNumericNumbers`, `allowComments`,
    /// `allowUnquotedFieldNames`.
    pub dialect: JsonDialect,
    /// `lineSep`: `None` is `\n` (a `\r` before it removed).
    pub line_sep: Option<Vec<u8>>,
    pub primitives_as_string: bool,
    pub prefers_decimal: bool,
}

/// Text reading options (`cloudFiles.format=text`).
#[derive(Debug, Clone, Default)]
pub struct TextSettings {
    /// `wholetext`: one row per file.
    pub whole_text: bool,
    /// `lineSep`: `None` is `\n` (a `\r` before it removed).
    pub line_sep: Option<Vec<u8>>,
}

/// XML reading options (`cloudFiles.format=xml`), Spark's names and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XmlSettings {
    /// `rowTag`: the element each row is read from (required for XML).
    pub row_tag: String,
    /// `attributePrefix`: put before an attribute's name to make its field's name.
    pub attribute_prefix: String,
    /// `valueTag`: the field of an element's text when it also has attributes or children.
    pub value_tag: String,
    /// `excludeAttribute`: attributes are left out.
    pub exclude_attribute: bool,
    /// `ignoreNamespace`: `ns:name` is read as `name` (elements and attributes).
    pub ignore_namespace: bool,
}

impl Default for XmlSettings {
    fn default() -> Self {
        XmlSettings {
            row_tag: String::new(),
            attribute_prefix: "_".into(),
            value_tag: "_VALUE".into(),
            exclude_attribute: false,
            ignore_namespace: false,
        }
    }
}

/// Validated settings of one stream.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `None`: detected from the files' extensions.
    pub format: Option<Format>,
    pub schema_location: Location,
    pub infer_column_types: bool,
    pub schema_hints: Option<String>,
    /// A user-given schema (`schema` option); inference is then off.
    pub user_schema: Option<Schema>,
    pub evolution_mode: EvolutionMode,
    pub stop_on_schema_change: bool,
    pub include_existing_files: bool,
    pub max_files_per_trigger: usize,
    pub max_bytes_per_trigger: Option<u64>,
    /// `None`: inferred from the folders; `Some(empty)`: none.
    pub partition_columns: Option<Vec<String>>,
    pub sample_files: usize,
    pub sample_bytes: u64,
    pub path_glob_filter: Option<GlobMatcher>,
    /// Milliseconds since the epoch.
    pub modified_after_ms: Option<i64>,
    pub modified_before_ms: Option<i64>,
    pub recursive_file_lookup: bool,
    pub ignore_corrupt_files: bool,
    pub ignore_missing_files: bool,
    pub allow_overwrites: bool,
    /// `None` only with a user schema and no `rescuedDataColumn`.
    pub rescued_data_column: Option<String>,
    pub reader_case_sensitive: bool,
    pub corrupt_record_column: Option<String>,
    pub fail_fast: bool,
    pub multi_line: bool,
    pub csv: CsvSettings,
    pub json: JsonSettings,
    pub text: TextSettings,
    pub xml: XmlSettings,
    /// `timestampFormat` and `dateFormat`, for inference and reading alike.
    pub temporal: Temporal,
    pub time_zone: Tz,
    pub include_metadata: bool,
    pub max_record_bytes: usize,
    pub max_decompressed_bytes: u64,
    /// Watch mode: how long a file seen only by listing must be unchanged.
    pub settle_time: std::time::Duration,
    /// `cloudFiles.cleanSource`: what becomes of ingested files (`None`: they stay).
    pub clean_source: Option<CleanSource>,
    pub incremental_listing: IncrementalListing,
    /// Incremental listing does a full listing at least this often.
    pub full_listing_interval: std::time::Duration,
    /// Deeper structs and arrays are inferred as one STRING column holding their JSON.
    pub max_nesting_depth: usize,
    /// How a Delta table source is read (ignored by other sources).
    pub delta: DeltaReadSettings,
    /// Notification mode (`cloudFiles.useNotifications=true`): new files come from S3
    /// events in an SQS queue (`source/sqs.rs`).
    pub notifications: Option<NotificationSettings>,
    /// `cloudFiles.backfillInterval`: how often a source whose new files come from events
    /// (a queue, or a local folder watched with inotify) is also listed whole, to catch a
    /// lost event. `None`: the queue's first listing only; a local watcher's default,
    /// [`LOCAL_BACKFILL_INTERVAL`].
    pub backfill_interval: Option<std::time::Duration>,
    /// The supported options as given (canonical key, trimmed value), defaults and the
    /// config's `[defaults.options]` merged: what a flow's definition records of them.
    pub given: BTreeMap<&'static str, String>,
}

/// How often a local watcher driven by file events lists its whole folder by default.
pub const LOCAL_BACKFILL_INTERVAL: std::time::Duration = std::time::Duration::from_secs(600);

/// `cloudFiles.useNotifications=true` and its options, checked together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationSettings {
    /// `cloudFiles.queueUrl`.
    pub queue_url: String,
    /// `cloudFiles.region`: `None`, the environment's (or the queue URL's).
    pub region: Option<String>,
    /// `cloudFiles.fetchParallelism`: receive requests in flight at once.
    pub fetch_parallelism: usize,
    /// `cloudFiles.backfillInterval`: a full listing this often (`None`: only the first).
    pub backfill_interval: Option<std::time::Duration>,
    /// `cloudFiles.maxFileAge`: older events are acknowledged and counted, not ingested.
    pub max_file_age: Option<std::time::Duration>,
}

/// Where a stream reading a Delta table starts, and which commits it passes over (Spark's
/// `readStream.format("delta")` options). They apply to a new stream only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeltaReadSettings {
    pub starting: Option<StartingPoint>,
    /// `skipChangeCommits`: a commit removing rows with `dataChange=true` is skipped whole.
    pub skip_change_commits: bool,
    /// `ignoreDeletes`: a commit that only removes rows is skipped.
    pub ignore_deletes: bool,
    /// Not an option: another stream of the same run writes the table, so a missing one
    /// is waited for rather than an error (set by the config).
    pub created_by_run: bool,
}

/// `startingVersion` or `startingTimestamp`: commits from there on, no initial snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartingPoint {
    Version(u64),
    /// `startingVersion=latest`: only commits after the latest at the first start.
    Latest,
    /// Milliseconds since the epoch: the first commit at or after it.
    Timestamp(i64),
}

/// What `cloudFiles.cleanSource` does with a file once its rows are committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CleanAction {
    Delete,
    /// Moved under this location, at its path under the source.
    Move(Location),
}

/// `cloudFiles.cleanSource` and its retention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanSource {
    pub action: CleanAction,
    /// A file is cleaned this long after its batch was planned.
    pub retention: std::time::Duration,
}
