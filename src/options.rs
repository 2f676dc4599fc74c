//! Auto Loader options under their own names, parsed and validated in one place into typed
//! [`Settings`]. Nothing downstream re-checks an option.
//!
//! Keys match case-insensitively, as Spark's reader options do. An unknown key is an error
//! that names it and suggests the closest known key (`cloudFiles.validateOptions=false`
//! turns that into a warning).

use std::collections::BTreeMap;
use std::fmt;

use chrono_tz::Tz;
use globset::{GlobBuilder, GlobMatcher};

use crate::location::Location;
use crate::parse::json::JsonDialect;
use crate::parse::scalars;
use crate::parse::temporal::{Pattern, SPARK_DATE_FORMAT, SPARK_TIMESTAMP_FORMAT, Temporal};
use crate::schema::Schema;
pub use crate::schema::evolution::EvolutionMode;

/// The default rescued-data column name.
pub const RESCUED_DATA_COLUMN: &str = "_rescued_data";
/// The default corrupt-record key inside the rescued data.
pub const CORRUPT_RECORD: &str = "_corrupt_record";

/// Whether autoloader implements an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    Supported,
    /// An Auto Loader or Spark option autoloader does not implement yet: refused with this
    /// pointer to what to do instead (never as if it were a typo).
    NotYet(&'static str),
}

/// What changing an option does to a flow that already ran (seed 000's rule, applied by
/// `flow/definition.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnChange {
    /// The checkpoint cannot carry on under the new value (the source, the table's
    /// structure): the run refuses until `autoloader reset`.
    FullRefresh,
    /// Applies to the rows of later batches; rows already committed keep the old value's
    /// result. Warned once, recorded, and emitted as `flow_definition_changed`.
    NewRowsOnly,
    /// How a run behaves, not what lands (batch sizes, listing, timeouts, first-start-only
    /// settings): not part of the flow's definition, change it freely.
    RunOnly,
}

impl OnChange {
    /// As `autoloader options --json` writes it.
    pub fn name(self) -> &'static str {
        match self {
            OnChange::FullRefresh => "fullRefresh",
            OnChange::NewRowsOnly => "newRowsOnly",
            OnChange::RunOnly => "runOnly",
        }
    }
}

/// One option: its canonical spelling, the default shown to users, its meaning, whether
/// it is supported, and what changing it does to a flow that already ran. [`OPTIONS`] is
/// the one table the parser validates against, the `autoloader options` command prints
/// and the config schema lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionSpec {
    pub key: &'static str,
    pub default: &'static str,
    pub meaning: &'static str,
    pub support: Support,
    pub on_change: OnChange,
}

const fn opt(key: &'static str, default: &'static str, meaning: &'static str) -> OptionSpec {
    OptionSpec {
        key,
        default,
        meaning,
        support: Support::Supported,
        on_change: OnChange::NewRowsOnly,
    }
}

impl OptionSpec {
    /// A change needs a full refresh.
    const fn refresh(self) -> OptionSpec {
        OptionSpec {
            on_change: OnChange::FullRefresh,
            ..self
        }
    }

    /// Not part of a flow's definition.
    const fn run_only(self) -> OptionSpec {
        OptionSpec {
            on_change: OnChange::RunOnly,
            ..self
        }
    }
}

const fn not_yet(
    key: &'static str,
    default: &'static str,
    meaning: &'static str,
    instead: &'static str,
) -> OptionSpec {
    OptionSpec {
        key,
        default,
        meaning,
        support: Support::NotYet(instead),
        on_change: OnChange::NewRowsOnly,
    }
}

/// Every option autoloader knows, supported or not yet.
pub const OPTIONS: &[OptionSpec] = &[
    opt(
        "cloudFiles.format",
        "detected from file extensions",
        "json, csv, parquet, avro, orc, text, binaryFile or xml (the last three only when set)",
    )
    .refresh(),
    opt(
        "cloudFiles.schemaLocation",
        "the checkpoint directory",
        "where _schemas/N versions live",
    )
    .run_only(),
    opt(
        "cloudFiles.inferColumnTypes",
        "false",
        "infer exact types instead of STRING for JSON/CSV",
    ),
    opt(
        "cloudFiles.schemaHints",
        "none",
        "DDL hints applied on top of inference",
    ),
    opt(
        "cloudFiles.schemaEvolutionMode",
        "addNewColumns (none with a schema)",
        "addNewColumns, rescue, failOnNewColumns or none",
    ),
    opt(
        "cloudFiles.includeExistingFiles",
        "true",
        "ingest files present at the first start",
    )
    .run_only(),
    opt(
        "cloudFiles.maxFilesPerTrigger",
        "1000",
        "most files per batch",
    )
    .run_only(),
    opt(
        "cloudFiles.maxBytesPerTrigger",
        "none",
        "soft byte limit per batch (10g, 512m)",
    )
    .run_only(),
    opt(
        "cloudFiles.partitionColumns",
        "inferred",
        "Hive-style key=value folders read as columns",
    )
    .refresh(),
    opt(
        "cloudFiles.validateOptions",
        "true",
        "reject unknown options",
    )
    .run_only(),
    opt(
        "cloudFiles.allowOverwrites",
        "false",
        "re-ingest a file whose size or mtime changed",
    ),
    opt(
        "cloudFiles.schemaInference.sampleSize.numFiles",
        "1000",
        "files sampled for inference",
    )
    .run_only(),
    opt(
        "cloudFiles.schemaInference.sampleSize.numBytes",
        "50g",
        "bytes sampled for inference",
    )
    .run_only(),
    opt(
        "cloudFiles.includeMetadata",
        "true",
        "add the _metadata lineage struct column",
    ),
    opt(
        "cloudFiles.stopOnSchemaChange",
        "false",
        "exit after writing a new schema version",
    )
    .run_only(),
    opt(
        "cloudFiles.maxRecordBytes",
        "64m",
        "longest accepted JSON line or record (a text line or file, a binaryFile file)",
    )
    .run_only(),
    opt(
        "cloudFiles.maxDecompressedBytes",
        "64g",
        "largest a gzip, zstd, bzip2 or lz4 file may expand to (a decompression bomb stops, naming the file)",
    )
    .run_only(),
    opt(
        "cloudFiles.maxNestingDepth",
        "32",
        "structs and arrays nested deeper are one STRING column of JSON text",
    ),
    opt(
        "cloudFiles.useIncrementalListing",
        "false",
        "S3: list only keys after the last ingested one (auto: while new keys arrive in lexical order)",
    )
    .run_only(),
    opt(
        "cloudFiles.fullListingInterval",
        "10m",
        "S3 incremental listing: a full listing at least this often, to catch late keys",
    )
    .run_only(),
    opt(
        "cloudFiles.settleTime",
        "3s",
        "watch: how long a file seen only by listing must keep its size and mtime",
    )
    .run_only(),
    opt(
        "pathGlobFilter",
        "none",
        "glob on file names, {a,b} alternatives allowed",
    ),
    opt(
        "modifiedAfter",
        "none",
        "only files modified after this timestamp",
    ),
    opt(
        "startingVersion",
        "none: the table as of the first start, then its commits",
        "Delta source: read commits from this version on (or latest), no initial snapshot",
    )
    .run_only(),
    opt(
        "startingTimestamp",
        "none",
        "Delta source: read commits from the first one at or after this time, no initial snapshot",
    )
    .run_only(),
    opt(
        "skipChangeCommits",
        "false",
        "Delta source: skip commits that remove or rewrite rows instead of stopping",
    ),
    opt(
        "ignoreDeletes",
        "false",
        "Delta source: skip commits that only remove rows instead of stopping",
    ),
    opt(
        "modifiedBefore",
        "none",
        "only files modified before this timestamp",
    ),
    opt(
        "recursiveFileLookup",
        "false",
        "recurse into every folder, without partition columns",
    ),
    opt(
        "ignoreCorruptFiles",
        "false",
        "skip and record files that cannot be read",
    ),
    opt(
        "ignoreMissingFiles",
        "false",
        "skip files deleted between listing and reading",
    ),
    opt(
        "rescuedDataColumn",
        "_rescued_data when inferring",
        "column for values that did not fit",
    )
    .refresh(),
    opt(
        "readerCaseSensitive",
        "true",
        "rescue columns that differ only by case",
    ),
    opt(
        "columnNameOfCorruptRecord",
        "none",
        "column for the raw text of malformed records",
    )
    .refresh(),
    opt(
        "mode",
        "PERMISSIVE",
        "PERMISSIVE keeps malformed records; FAILFAST stops on one",
    ),
    opt(
        "multiLine",
        "false",
        "JSON: whole-file documents; a top-level array is one row per item",
    ),
    opt(
        "wholetext",
        "false",
        "text: one row per file rather than one per line",
    ),
    opt(
        "rowTag",
        "none (required for XML)",
        "XML: the element each row is read from",
    ),
    opt(
        "attributePrefix",
        "_",
        "XML: prefix of the fields read from attributes",
    ),
    opt(
        "valueTag",
        "_VALUE",
        "XML: field of an element's text when it also has attributes or children",
    ),
    opt("excludeAttribute", "false", "XML: leave attributes out"),
    opt(
        "ignoreNamespace",
        "false",
        "XML: read ns:name as name (elements and attributes)",
    ),
    opt("header", "true", "CSV: the first line names the columns"),
    opt("sep", ",", "CSV: field separator"),
    opt("quote", "\"", "CSV: quote character"),
    opt("escape", "\\", "CSV: escape character inside quotes"),
    opt("nullValue", "empty string", "CSV: text read as null"),
    opt("encoding", "UTF-8", "input encoding (UTF-8 only)"),
    opt(
        "timeZone",
        "UTC",
        "zone for timestamps without an offset (e.g. Asia/Seoul)",
    ),
    opt(
        "schema",
        "none",
        "a user schema in DDL (id BIGINT, ...), instead of inference",
    ),
    opt(
        "inferSchema",
        "false",
        "CSV: Spark's spelling of cloudFiles.inferColumnTypes (both set must agree; refused with cloudFiles.format=json or parquet)",
    ),
    opt(
        "timestampFormat",
        "yyyy-MM-dd'T'HH:mm:ss[.SSS][XXX]",
        "Java DateTimeFormatter pattern for TIMESTAMP values, in inference and reading (default: ISO-8601)",
    ),
    opt(
        "dateFormat",
        "yyyy-MM-dd",
        "Java DateTimeFormatter pattern for DATE values, in inference and reading",
    ),
    opt(
        "primitivesAsString",
        "false",
        "JSON: infer numbers and booleans as STRING (with inference on)",
    ),
    opt(
        "prefersDecimal",
        "false",
        "JSON: infer fractions (and numeric strings) as DECIMAL when they fit 38 digits (with inference on)",
    ),
    opt(
        "allowComments",
        "false",
        "JSON: accept /* */ and // comments",
    ),
    opt(
        "allowSingleQuotes",
        "true",
        "JSON: accept 'single-quoted' strings and names",
    ),
    opt(
        "allowNonNumericNumbers",
        "true",
        "JSON: read NaN, Infinity, +Infinity, -Infinity, +INF, -INF as DOUBLE",
    ),
    opt("allowUnquotedFieldNames", "false", "JSON: accept {name: 1}"),
    opt(
        "lineSep",
        "\\n (and \\r\\n)",
        "record separator: JSON lines and text any string, CSV one character",
    ),
    opt(
        "ignoreLeadingWhiteSpace",
        "false",
        "CSV: trim leading whitespace of header names and values",
    ),
    opt(
        "ignoreTrailingWhiteSpace",
        "false",
        "CSV: trim trailing whitespace of header names and values",
    ),
    opt(
        "emptyValue",
        "empty string",
        "CSV: what a quoted empty field (\"\") reads as",
    ),
    opt(
        "comment",
        "none",
        "CSV: lines starting with this character are skipped",
    ),
    not_yet(
        "badRecordsPath",
        "none",
        "Databricks: write unparsable records and files to a path",
        "malformed records are kept in _rescued_data (or columnNameOfCorruptRecord); files that cannot be read stop the run, or are skipped and recorded with ignoreCorruptFiles",
    ),
    opt(
        "cloudFiles.useNotifications",
        "false",
        "S3 only: take new files from S3 event notifications in an SQS queue (cloudFiles.queueUrl) instead of listing",
    )
    .refresh(),
    opt(
        "cloudFiles.backfillInterval",
        "none",
        "notification mode: a full listing this often, catching any event S3 failed to deliver",
    )
    .run_only(),
    opt(
        "cloudFiles.maxFileAge",
        "none",
        "notification mode: events older than this (by their event time) are acknowledged, not ingested",
    ),
    opt(
        "cloudFiles.cleanSource",
        "OFF",
        "OFF, DELETE or MOVE: what becomes of a file once its rows are committed and the retention passed",
    )
    .run_only(),
    opt(
        "cloudFiles.cleanSource.retentionDuration",
        "30 days",
        "how long after its ingestion a file is cleaned",
    )
    .run_only(),
    opt(
        "cloudFiles.cleanSource.moveDestination",
        "none",
        "where cleanSource=MOVE puts files (outside the source; their paths under the source kept)",
    )
    .run_only(),
    not_yet(
        "cloudFiles.useStrictGlobber",
        "false",
        "Spark-compatible globbing in the load path",
        "use pathGlobFilter on file names",
    ),
    not_yet(
        "cloudFiles.useManagedFileEvents",
        "false",
        "Unity Catalog file events",
        "on S3, cloudFiles.useNotifications with a queue of your own; watch mode uses local file events",
    ),
    opt(
        "cloudFiles.fetchParallelism",
        "1",
        "notification mode: concurrent receive requests on the queue (1 to 32)",
    )
    .run_only(),
    opt(
        "cloudFiles.queueUrl",
        "none",
        "notification mode: the existing SQS queue receiving the bucket's ObjectCreated events (required with it)",
    )
    .refresh(),
    opt(
        "cloudFiles.region",
        "none",
        "notification mode: the queue's region (unset: AWS_REGION, else the queue URL's)",
    )
    .run_only(),
    not_yet(
        "cloudFiles.roleArn",
        "none",
        "a role to assume for notification setup",
        "S3 sources use the usual AWS_* credentials (see README, S3)",
    ),
    not_yet(
        "cloudFiles.pathRewrites",
        "none",
        "prefix rewrites of notified paths",
        "notified keys are taken as they are, relative to the source prefix",
    ),
    not_yet(
        "cloudFiles.connectionString",
        "none",
        "Azure: the storage account's connection string for its queue",
        "notification mode reads S3 events from SQS only (cloudFiles.useNotifications with cloudFiles.queueUrl); on Azure or GCP, list the source instead",
    ),
    not_yet(
        "cloudFiles.resourceGroup",
        "none",
        "Azure: the resource group of the storage account",
        "notification mode reads S3 events from SQS only (cloudFiles.useNotifications with cloudFiles.queueUrl); on Azure or GCP, list the source instead",
    ),
    not_yet(
        "cloudFiles.subscriptionId",
        "none",
        "Azure: the subscription of the storage account",
        "notification mode reads S3 events from SQS only (cloudFiles.useNotifications with cloudFiles.queueUrl); on Azure or GCP, list the source instead",
    ),
    not_yet(
        "cloudFiles.tenantId",
        "none",
        "Azure: the service principal's tenant",
        "notification mode reads S3 events from SQS only (cloudFiles.useNotifications with cloudFiles.queueUrl); on Azure or GCP, list the source instead",
    ),
    not_yet(
        "cloudFiles.clientId",
        "none",
        "Azure: the service principal's client id",
        "notification mode reads S3 events from SQS only (cloudFiles.useNotifications with cloudFiles.queueUrl); on Azure or GCP, list the source instead",
    ),
    not_yet(
        "cloudFiles.clientSecret",
        "none",
        "Azure: the service principal's secret",
        "notification mode reads S3 events from SQS only (cloudFiles.useNotifications with cloudFiles.queueUrl); on Azure or GCP, list the source instead",
    ),
    not_yet(
        "cloudFiles.queueName",
        "none",
        "Azure: an existing queue of the storage account",
        "notification mode reads S3 events from SQS only (cloudFiles.useNotifications with cloudFiles.queueUrl); on Azure or GCP, list the source instead",
    ),
    not_yet(
        "cloudFiles.projectId",
        "none",
        "GCP: the project of the bucket's Pub/Sub subscription",
        "notification mode reads S3 events from SQS only (cloudFiles.useNotifications with cloudFiles.queueUrl); on Azure or GCP, list the source instead",
    ),
    not_yet(
        "cloudFiles.subscription",
        "none",
        "GCP: an existing Pub/Sub subscription",
        "notification mode reads S3 events from SQS only (cloudFiles.useNotifications with cloudFiles.queueUrl); on Azure or GCP, list the source instead",
    ),
    not_yet(
        "cloudFiles.resourceTag.<key>",
        "none",
        "tags on created cloud resources",
        "autoloader creates no cloud resources",
    ),
    not_yet(
        "dropFieldIfAllNull",
        "false",
        "JSON: drop all-null, empty-array and empty-struct columns in inference",
        "such columns are STRING (see README, Reader decisions)",
    ),
    not_yet(
        "inferTimestamp",
        "false",
        "JSON: infer timestamp strings",
        "with cloudFiles.inferColumnTypes=true, ISO-8601 (or timestampFormat) strings are always inferred as TIMESTAMP",
    ),
    not_yet(
        "allowNumericLeadingZeros",
        "false",
        "JSON: accept 007",
        "a number with leading zeros is a malformed record, kept in _rescued_data",
    ),
    not_yet(
        "allowBackslashEscapingAnyCharacter",
        "false",
        "JSON: accept \\q",
        "such a record is malformed, kept in _rescued_data",
    ),
    not_yet(
        "allowUnquotedControlChars",
        "false",
        "JSON: raw control characters in strings",
        "such a record is malformed, kept in _rescued_data",
    ),
    not_yet(
        "locale",
        "en-US",
        "locale for numbers and dates",
        "numbers are read in the en-US form",
    ),
    not_yet(
        "singleVariantColumn",
        "none",
        "the whole record as one VARIANT column",
        "there is no VARIANT type yet",
    ),
    not_yet(
        "nanValue",
        "NaN",
        "CSV: text read as NaN",
        "NaN, Inf, -Inf, Infinity and -Infinity are read",
    ),
    not_yet(
        "positiveInf",
        "Inf",
        "CSV: text read as +infinity",
        "see nanValue",
    ),
    not_yet(
        "negativeInf",
        "-Inf",
        "CSV: text read as -infinity",
        "see nanValue",
    ),
    not_yet(
        "enforceSchema",
        "true",
        "CSV: ignore headers, apply the schema by position",
        "each file is read by its own header, as Auto Loader does",
    ),
    not_yet(
        "mergeSchema",
        "false",
        "merge the schemas of the sampled files",
        "sampled files are always merged",
    ),
    not_yet(
        "preferDate",
        "true",
        "CSV: infer DATE rather than TIMESTAMP",
        "yyyy-MM-dd (or dateFormat) values are always inferred as DATE",
    ),
    not_yet(
        "maxColumns",
        "20480",
        "CSV: most columns per record",
        "no limit other than cloudFiles.maxRecordBytes",
    ),
    not_yet(
        "maxCharsPerColumn",
        "-1",
        "CSV: longest value",
        "no limit other than cloudFiles.maxRecordBytes",
    ),
    not_yet(
        "skipRows",
        "0",
        "CSV: rows skipped before the header",
        "remove them, or use comment",
    ),
    not_yet(
        "unescapedQuoteHandling",
        "STOP_AT_DELIMITER",
        "CSV: what an unescaped quote does",
        "an unclosed quote stops the run naming the file and line",
    ),
    not_yet(
        "charToEscapeQuoteEscaping",
        "none",
        "CSV: escape of the escape character",
        "use escape",
    ),
    not_yet(
        "parserCaseSensitive",
        "false",
        "deprecated: use readerCaseSensitive",
        "use readerCaseSensitive",
    ),
    not_yet(
        "timestampNTZFormat",
        "yyyy-MM-dd'T'HH:mm:ss[.SSS]",
        "format of TIMESTAMP_NTZ values",
        "there is no TIMESTAMP_NTZ type yet; timestamps without an offset are read in timeZone",
    ),
];

/// The option table as `autoloader options` prints it: supported options (with their
/// aliases), then those not supported yet with what to do instead; or one JSON object per
/// line (`key`, `default`, `meaning`, `supported`, `aliases`, `instead`, `onChange`: what
/// a change does to a flow that ran).
pub fn describe(json: bool) -> String {
    let aliases = |key: &str| -> Vec<&'static str> {
        ALIASES
            .iter()
            .filter(|(_, k)| *k == key)
            .map(|(a, _)| *a)
            .collect()
    };
    let mut out = String::new();
    if json {
        for o in OPTIONS {
            let (supported, instead) = match o.support {
                Support::Supported => (true, None),
                Support::NotYet(i) => (false, Some(i)),
            };
            let line = serde_json::json!({
                "key": o.key,
                "default": o.default,
                "meaning": o.meaning,
                "supported": supported,
                "aliases": aliases(o.key),
                "instead": instead,
                "onChange": o.on_change.name(),
            });
            out.push_str(&line.to_string());
            out.push('\n');
        }
        return out;
    }
    let width = OPTIONS.iter().map(|o| o.key.len()).max().unwrap_or(0);
    let dwidth = OPTIONS
        .iter()
        .filter(|o| o.support == Support::Supported)
        .map(|o| o.default.len())
        .max()
        .unwrap_or(0);
    out.push_str(&format!(
        "{:width$}  {:dwidth$}  MEANING\n",
        "OPTION", "DEFAULT"
    ));
    for o in OPTIONS.iter().filter(|o| o.support == Support::Supported) {
        let also = aliases(o.key);
        let also = if also.is_empty() {
            String::new()
        } else {
            format!(" (also {})", also.join(", "))
        };
        out.push_str(&format!(
            "{:width$}  {:dwidth$}  {}{also}\n",
            o.key, o.default, o.meaning
        ));
    }
    out.push_str("\nNot supported yet (refused, unless cloudFiles.validateOptions=false):\n");
    for o in OPTIONS {
        if let Support::NotYet(instead) = o.support {
            out.push_str(&format!(
                "{:width$}  {}; instead: {instead}\n",
                o.key, o.meaning
            ));
        }
    }
    out
}

/// Other accepted spellings, mapped to the canonical key.
const ALIASES: &[(&str, &str)] = &[
    // Spark's names on a Delta source.
    ("maxFilesPerTrigger", "cloudFiles.maxFilesPerTrigger"),
    ("maxBytesPerTrigger", "cloudFiles.maxBytesPerTrigger"),
    ("cloudFiles.modifiedAfter", "modifiedAfter"),
    ("cloudFiles.modifiedBefore", "modifiedBefore"),
    ("fileNamePattern", "pathGlobFilter"),
    ("delimiter", "sep"),
    ("charset", "encoding"),
    ("multiline", "multiLine"),
    (
        "spark.databricks.cloudFiles.schemaInference.sampleSize.numFiles",
        "cloudFiles.schemaInference.sampleSize.numFiles",
    ),
    (
        "spark.databricks.cloudFiles.schemaInference.sampleSize.numBytes",
        "cloudFiles.schemaInference.sampleSize.numBytes",
    ),
];

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum OptionsError {
    #[error("unknown option \"{key}\"{}", suggestion.as_ref().map(|s| format!("; did you mean \"{s}\"?")).unwrap_or_default())]
    Unknown {
        key: String,
        suggestion: Option<String>,
    },
    #[error("option {key}={value:?} is invalid: {reason}")]
    Invalid {
        key: String,
        value: String,
        reason: String,
    },
    #[error(
        "option \"{key}\" is an Auto Loader option autoloader does not support yet: {instead} \
         (`autoloader options` lists what is supported)"
    )]
    NotSupported { key: String, instead: String },
    #[error("option \"{0}\" is not in KEY=VALUE form")]
    Malformed(String),
    #[error("{0}")]
    Conflict(String),
}

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

/// The notification options, validated: `None` without `cloudFiles.useNotifications=true`,
/// where giving any of the others is refused (it would be silently ignored).
fn notification_settings(
    get: &dyn Fn(&str) -> Option<String>,
    backfill_interval: Option<std::time::Duration>,
) -> Result<Option<NotificationSettings>, OptionsError> {
    const DEPENDENT: [&str; 4] = [
        "cloudFiles.queueUrl",
        "cloudFiles.region",
        "cloudFiles.fetchParallelism",
        "cloudFiles.maxFileAge",
    ];
    let on = match get("cloudFiles.useNotifications") {
        Some(v) => parse_bool("cloudFiles.useNotifications", &v)?,
        None => false,
    };
    if !on {
        if let Some(key) = DEPENDENT.iter().find(|k| get(k).is_some()) {
            return Err(OptionsError::Conflict(format!(
                "{key} applies to notification mode only; set cloudFiles.useNotifications=true \
                 (with cloudFiles.queueUrl) or leave it out"
            )));
        }
        return Ok(None);
    }
    let queue_url = match get("cloudFiles.queueUrl") {
        Some(v) if !v.trim().is_empty() => v.trim().to_string(),
        _ => {
            return Err(OptionsError::Conflict(
                "cloudFiles.useNotifications=true needs cloudFiles.queueUrl: the URL of an \
                 existing SQS queue receiving the bucket's ObjectCreated events (README, \
                 Notification mode, shows how to create one); autoloader sets none up itself"
                    .into(),
            ));
        }
    };
    let parsed = url::Url::parse(&queue_url).map_err(|e| {
        invalid(
            "cloudFiles.queueUrl",
            &queue_url,
            &format!("expected https://sqs.REGION.amazonaws.com/ACCOUNT/QUEUE ({e})"),
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.path().trim_matches('/').is_empty() {
        return Err(invalid(
            "cloudFiles.queueUrl",
            &queue_url,
            "expected https://sqs.REGION.amazonaws.com/ACCOUNT/QUEUE",
        ));
    }
    let region = get("cloudFiles.region")
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty());
    let fetch_parallelism = match get("cloudFiles.fetchParallelism") {
        Some(v) => v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=32).contains(n))
            .ok_or_else(|| invalid("cloudFiles.fetchParallelism", &v, "expected 1 to 32"))?,
        None => 1,
    };
    let duration = |key: &str| -> Result<Option<std::time::Duration>, OptionsError> {
        match get(key) {
            None => Ok(None),
            Some(v) => {
                let d = parse_duration(key, &v)?;
                if d.is_zero() {
                    return Err(invalid(key, &v, "expected a positive duration"));
                }
                Ok(Some(d))
            }
        }
    };
    Ok(Some(NotificationSettings {
        queue_url,
        region,
        fetch_parallelism,
        backfill_interval,
        max_file_age: duration("cloudFiles.maxFileAge")?,
    }))
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

/// Settings from `options` with a checkpoint at `/c`, for unit tests.
#[cfg(test)]
pub(crate) fn settings_for_test(options: &[(&str, &str)]) -> Settings {
    let raw: Vec<(String, String)> = options
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    resolve(&raw, &Location::Local("/c".into()))
        .expect("test options are valid")
        .0
}

/// Resolves a raw option list (later entries win) into settings. `checkpoint` is the
/// default schema location.
pub fn resolve(
    raw: &[(String, String)],
    checkpoint: &Location,
) -> Result<(Settings, Vec<String>), OptionsError> {
    let (g, mut warnings) = given(raw)?;
    let get = |k: &str| g.get(k);
    let bool_or = |k: &str, default: bool| g.bool_or(k, default);

    let SchemaChoice {
        format,
        user_schema,
        evolution_mode,
        schema_hints,
        rescued_data_column,
    } = schema_choice(&g)?;
    let FileSelection {
        max_files_per_trigger,
        max_bytes_per_trigger,
        partition_columns,
        sample_files,
        sample_bytes,
        path_glob_filter,
        modified_after_ms,
        modified_before_ms,
    } = file_selection(&g)?;
    let delta = delta_read_settings(&g)?;
    let Readers {
        fail_fast,
        csv,
        json,
        text,
        xml,
    } = readers(&g, format)?;
    let temporal = temporal(&g)?;
    let infer_column_types = infer_column_types(&g, format)?;
    let time_zone = match get("timeZone") {
        None => Tz::UTC,
        Some(v) => v.parse::<Tz>().map_err(|_| {
            invalid(
                "timeZone",
                v,
                "expected a zone name such as UTC or Asia/Seoul",
            )
        })?,
    };
    let max_record_bytes = get("cloudFiles.maxRecordBytes")
        .map(|v| parse_bytes("cloudFiles.maxRecordBytes", v))
        .transpose()?
        .map_or(64 << 20, |b| usize::try_from(b).unwrap_or(usize::MAX));

    let max_decompressed_bytes = get("cloudFiles.maxDecompressedBytes")
        .map(|v| parse_bytes("cloudFiles.maxDecompressedBytes", v))
        .transpose()?
        .unwrap_or(64 << 30);
    let clean_source = clean_source(&get, &mut warnings)?;
    let settle_time = get("cloudFiles.settleTime")
        .map(|v| parse_duration("cloudFiles.settleTime", v))
        .transpose()?
        .unwrap_or(std::time::Duration::from_secs(3));
    let incremental_listing = incremental_listing(&g)?;
    let full_listing_interval = get("cloudFiles.fullListingInterval")
        .map(|v| parse_duration("cloudFiles.fullListingInterval", v))
        .transpose()?
        .unwrap_or(std::time::Duration::from_secs(600));
    let max_nesting_depth = match get("cloudFiles.maxNestingDepth") {
        Some(v) => v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=64).contains(n))
            .ok_or_else(|| invalid("cloudFiles.maxNestingDepth", v, "expected 1 to 64"))?,
        None => 32,
    };
    let schema_location = match get("cloudFiles.schemaLocation") {
        Some(v) => Location::parse(v)
            .map_err(|e| invalid("cloudFiles.schemaLocation", v, &e.to_string()))?,
        None => checkpoint.clone(),
    };
    let backfill_interval = backfill_interval(&g)?;
    let notifications = notification_settings(&|k| get(k).map(str::to_string), backfill_interval)?;
    let settings = Settings {
        format,
        schema_location,
        infer_column_types,
        schema_hints,
        user_schema,
        evolution_mode,
        stop_on_schema_change: bool_or("cloudFiles.stopOnSchemaChange", false)?,
        include_existing_files: bool_or("cloudFiles.includeExistingFiles", true)?,
        max_files_per_trigger,
        max_bytes_per_trigger,
        partition_columns,
        sample_files,
        sample_bytes,
        path_glob_filter,
        modified_after_ms,
        modified_before_ms,
        recursive_file_lookup: bool_or("recursiveFileLookup", false)?,
        ignore_corrupt_files: bool_or("ignoreCorruptFiles", false)?,
        ignore_missing_files: bool_or("ignoreMissingFiles", false)?,
        allow_overwrites: bool_or("cloudFiles.allowOverwrites", false)?,
        rescued_data_column,
        reader_case_sensitive: bool_or("readerCaseSensitive", true)?,
        corrupt_record_column: get("columnNameOfCorruptRecord").map(str::to_string),
        fail_fast,
        multi_line: bool_or("multiLine", false)?,
        csv,
        json,
        text,
        xml,
        temporal,
        time_zone,
        include_metadata: bool_or("cloudFiles.includeMetadata", true)?,
        max_record_bytes,
        max_decompressed_bytes,
        settle_time,
        clean_source,
        incremental_listing,
        full_listing_interval,
        max_nesting_depth,
        delta,
        notifications,
        backfill_interval,
        given: g
            .0
            .iter()
            .map(|(k, v)| (*k, v.trim().to_string()))
            .collect(),
    };
    Ok((settings, warnings))
}

/// Which files a batch takes, and how many: triggers, sampling, filters.
struct FileSelection {
    max_files_per_trigger: usize,
    max_bytes_per_trigger: Option<u64>,
    partition_columns: Option<Vec<String>>,
    sample_files: usize,
    sample_bytes: u64,
    path_glob_filter: Option<GlobMatcher>,
    modified_after_ms: Option<i64>,
    modified_before_ms: Option<i64>,
}

fn file_selection(g: &Given) -> Result<FileSelection, OptionsError> {
    let get = |k: &str| g.get(k);
    let max_files_per_trigger = match get("cloudFiles.maxFilesPerTrigger") {
        Some(v) => v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| {
                invalid(
                    "cloudFiles.maxFilesPerTrigger",
                    v,
                    "expected a positive integer",
                )
            })?,
        None => 1000,
    };
    let max_bytes_per_trigger = get("cloudFiles.maxBytesPerTrigger")
        .map(|v| parse_bytes("cloudFiles.maxBytesPerTrigger", v))
        .transpose()?;
    let partition_columns = get("cloudFiles.partitionColumns").map(|v| {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    });
    let sample_files = match get("cloudFiles.schemaInference.sampleSize.numFiles") {
        Some(v) => v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| {
                invalid(
                    "cloudFiles.schemaInference.sampleSize.numFiles",
                    v,
                    "expected a positive integer",
                )
            })?,
        None => 1000,
    };
    let sample_bytes = get("cloudFiles.schemaInference.sampleSize.numBytes")
        .map(|v| parse_bytes("cloudFiles.schemaInference.sampleSize.numBytes", v))
        .transpose()?
        .unwrap_or(50 << 30);
    let path_glob_filter = get("pathGlobFilter")
        .map(|v| {
            GlobBuilder::new(v)
                .literal_separator(true)
                .build()
                .map(|g| g.compile_matcher())
                .map_err(|e| invalid("pathGlobFilter", v, &e.to_string()))
        })
        .transpose()?;
    let modified_after_ms = get("modifiedAfter")
        .map(|v| parse_instant("modifiedAfter", v))
        .transpose()?;
    let modified_before_ms = get("modifiedBefore")
        .map(|v| parse_instant("modifiedBefore", v))
        .transpose()?;
    if let (Some(a), Some(b)) = (modified_after_ms, modified_before_ms)
        && a >= b
    {
        return Err(OptionsError::Conflict(
            "modifiedAfter must be earlier than modifiedBefore".into(),
        ));
    }
    Ok(FileSelection {
        max_files_per_trigger,
        max_bytes_per_trigger,
        partition_columns,
        sample_files,
        sample_bytes,
        path_glob_filter,
        modified_after_ms,
        modified_before_ms,
    })
}

/// `cloudFiles.useIncrementalListing`. Off by default: a key that sorts before the
/// ingested ones would wait for the next full listing, and a surprise delay is worse than
/// a longer listing.
fn incremental_listing(g: &Given) -> Result<IncrementalListing, OptionsError> {
    let get = |k: &str| g.get(k);
    Ok(match get("cloudFiles.useIncrementalListing") {
        None => IncrementalListing::Never,
        Some(v) => match v.trim().to_ascii_lowercase().as_str() {
            "auto" => IncrementalListing::Auto,
            "true" => IncrementalListing::Always,
            "false" => IncrementalListing::Never,
            _ => {
                return Err(invalid(
                    "cloudFiles.useIncrementalListing",
                    v,
                    "expected auto, true or false",
                ));
            }
        },
    })
}

/// `cloudFiles.backfillInterval`: a positive duration, or none.
fn backfill_interval(g: &Given) -> Result<Option<std::time::Duration>, OptionsError> {
    let get = |k: &str| g.get(k);
    Ok(match get("cloudFiles.backfillInterval") {
        None => None,
        Some(v) => {
            let d = parse_duration("cloudFiles.backfillInterval", v)?;
            if d.is_zero() {
                return Err(invalid(
                    "cloudFiles.backfillInterval",
                    v,
                    "expected a positive duration",
                ));
            }
            Some(d)
        }
    })
}

/// The options given, by canonical key (a later entry wins).
struct Given(BTreeMap<&'static str, String>);

impl Given {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn bool_or(&self, key: &str, default: bool) -> Result<bool, OptionsError> {
        self.get(key).map_or(Ok(default), |v| parse_bool(key, v))
    }
}

/// Each key to its canonical spelling; an unknown or unsupported key is an error, or a
/// warning under `cloudFiles.validateOptions=false`.
fn given(raw: &[(String, String)]) -> Result<(Given, Vec<String>), OptionsError> {
    let mut map: BTreeMap<&'static str, String> = BTreeMap::new();
    let mut refused = Vec::new();
    for (key, value) in raw {
        match canonical(key) {
            Some(spec) if spec.support == Support::Supported => {
                map.insert(spec.key, value.clone());
            }
            Some(OptionSpec {
                support: Support::NotYet(instead),
                ..
            }) => refused.push(OptionsError::NotSupported {
                key: key.clone(),
                instead: instead.to_string(),
            }),
            _ => refused.push(OptionsError::Unknown {
                suggestion: suggest(key),
                key: key.clone(),
            }),
        }
    }
    let validate = match map.get("cloudFiles.validateOptions") {
        Some(v) => parse_bool("cloudFiles.validateOptions", v)?,
        None => true,
    };
    let mut warnings = Vec::new();
    for err in refused {
        if validate {
            return Err(err);
        }
        warnings.push(format!("{err} (ignored: cloudFiles.validateOptions=false)"));
    }
    Ok((Given(map), warnings))
}

/// What decides the schema: the format, a user schema or hints, the evolution mode and
/// the rescued-data column.
struct SchemaChoice {
    format: Option<Format>,
    user_schema: Option<Schema>,
    evolution_mode: EvolutionMode,
    schema_hints: Option<String>,
    rescued_data_column: Option<String>,
}

fn schema_choice(g: &Given) -> Result<SchemaChoice, OptionsError> {
    let get = |k: &str| g.get(k);
    let format = match get("cloudFiles.format") {
        None => None,
        Some(v) => Some(Format::from_name(v).ok_or_else(|| {
            invalid(
                "cloudFiles.format",
                v,
                "expected json, csv, parquet, avro, orc, text, binaryFile or xml",
            )
        })?),
    };
    let user_schema = match get("schema") {
        None => None,
        Some(v) => Some(
            crate::schema::hints::parse_schema(v)
                .map_err(|e| invalid("schema", v, &e.to_string()))?,
        ),
    };
    let evolution_mode = match get("cloudFiles.schemaEvolutionMode") {
        Some(v) => v
            .parse()
            .map_err(|e: String| invalid("cloudFiles.schemaEvolutionMode", v, &e))?,
        None if user_schema.is_some() => EvolutionMode::None,
        None => EvolutionMode::AddNewColumns,
    };
    if user_schema.is_some() && evolution_mode == EvolutionMode::AddNewColumns {
        return Err(OptionsError::Conflict(
            "cloudFiles.schemaEvolutionMode=addNewColumns cannot be used with a user schema \
             (option schema); use cloudFiles.schemaHints to pin types and let the rest be inferred"
                .into(),
        ));
    }
    // Spark's text and binaryFile sources have a fixed schema.
    if let Some(f @ (Format::Text | Format::BinaryFile)) = format {
        for key in ["schema", "cloudFiles.schemaHints"] {
            if get(key).is_some() {
                return Err(OptionsError::Conflict(format!(
                    "{key}: the {f} format has a fixed schema ({}); leave {key} out",
                    match f {
                        Format::Text => "value STRING",
                        _ =>
                            "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY",
                    }
                )));
            }
        }
    }
    let schema_hints = get("cloudFiles.schemaHints").map(str::to_string);
    if let Some(h) = &schema_hints {
        crate::schema::hints::parse_hints(h)
            .map_err(|e| invalid("cloudFiles.schemaHints", h, &e.to_string()))?;
        if user_schema.is_some() {
            return Err(OptionsError::Conflict(
                "cloudFiles.schemaHints applies only to inferred schemas; put the types in the \
                 schema option instead"
                    .into(),
            ));
        }
    }
    let rescued_data_column = match get("rescuedDataColumn") {
        Some("") => None,
        Some(v) => Some(v.to_string()),
        None if user_schema.is_some() => None,
        // Auto Loader's `none`: new columns are ignored, and nothing is rescued unless
        // rescuedDataColumn is set explicitly.
        None if evolution_mode == EvolutionMode::None => None,
        // A fixed schema that every file fits: nothing to rescue (as Auto Loader).
        None if matches!(format, Some(Format::Text | Format::BinaryFile)) => None,
        None => Some(RESCUED_DATA_COLUMN.to_string()),
    };
    Ok(SchemaChoice {
        format,
        user_schema,
        evolution_mode,
        schema_hints,
        rescued_data_column,
    })
}

/// A Delta table source's options: where to start, and which commits to skip.
fn delta_read_settings(g: &Given) -> Result<DeltaReadSettings, OptionsError> {
    let get = |k: &str| g.get(k);
    let bool_or = |k: &str, default: bool| g.bool_or(k, default);
    let starting = match (get("startingVersion"), get("startingTimestamp")) {
        (Some(_), Some(_)) => {
            return Err(OptionsError::Conflict(
                "startingVersion and startingTimestamp cannot both be set; choose one".into(),
            ));
        }
        (Some(v), None) if v.trim().eq_ignore_ascii_case("latest") => Some(StartingPoint::Latest),
        (Some(v), None) => Some(StartingPoint::Version(v.trim().parse().map_err(|_| {
            invalid(
                "startingVersion",
                v,
                "expected a table version (0, 1, ...) or latest",
            )
        })?)),
        (None, Some(v)) => Some(StartingPoint::Timestamp(parse_instant(
            "startingTimestamp",
            v,
        )?)),
        (None, None) => None,
    };
    Ok(DeltaReadSettings {
        starting,
        skip_change_commits: bool_or("skipChangeCommits", false)?,
        ignore_deletes: bool_or("ignoreDeletes", false)?,
        created_by_run: false,
    })
}

/// The per-format reader options, and how a malformed record is handled (`mode`).
struct Readers {
    fail_fast: bool,
    csv: CsvSettings,
    json: JsonSettings,
    text: TextSettings,
    xml: XmlSettings,
}

fn readers(g: &Given, format: Option<Format>) -> Result<Readers, OptionsError> {
    let get = |k: &str| g.get(k);
    let bool_or = |k: &str, default: bool| g.bool_or(k, default);
    let mode = get("mode").unwrap_or("PERMISSIVE");
    let fail_fast = match mode.to_ascii_uppercase().as_str() {
        "PERMISSIVE" => false,
        "FAILFAST" => true,
        "DROPMALFORMED" => {
            return Err(invalid(
                "mode",
                mode,
                "DROPMALFORMED would drop records silently; use PERMISSIVE (malformed records \
                 kept in the rescued data) or FAILFAST",
            ));
        }
        _ => return Err(invalid("mode", mode, "expected PERMISSIVE or FAILFAST")),
    };
    if let Some(enc) = get("encoding") {
        let e = enc.to_ascii_lowercase().replace(['-', '_'], "");
        if e != "utf8" {
            return Err(invalid("encoding", enc, "only UTF-8 is supported"));
        }
    }
    let line_sep = match get("lineSep") {
        None => None,
        Some(v) => {
            let sep = unescape(v);
            if sep.is_empty() {
                return Err(invalid("lineSep", v, "expected a non-empty separator"));
            }
            Some(sep)
        }
    };
    let csv_line_sep = match line_sep.as_deref() {
        None | Some("\n" | "\r\n") => None,
        Some(sep) if sep.len() == 1 => Some(sep.as_bytes()[0]),
        // Only JSON reads it.
        Some(_) if matches!(format, Some(Format::Json | Format::Text)) => None,
        Some(_) => {
            return Err(OptionsError::Conflict(
                "lineSep: a CSV record separator is one character (Spark's limit); a longer \
                 separator needs cloudFiles.format=json or text"
                    .into(),
            ));
        }
    };
    let csv = CsvSettings {
        header: bool_or("header", true)?,
        sep: single_byte("sep", get("sep"), b',')?,
        quote: single_byte("quote", get("quote"), b'"')?,
        escape: match get("escape") {
            Some("") => None,
            other => Some(single_byte("escape", other, b'\\')?),
        },
        null_value: get("nullValue").unwrap_or("").to_string(),
        empty_value: get("emptyValue").unwrap_or("").to_string(),
        comment: match get("comment") {
            None | Some("" | "\\u0000") => None,
            Some(v) => Some(single_byte("comment", Some(v), b'#')?),
        },
        line_sep: csv_line_sep,
        trim_leading: bool_or("ignoreLeadingWhiteSpace", false)?,
        trim_trailing: bool_or("ignoreTrailingWhiteSpace", false)?,
    };
    let json = JsonSettings {
        dialect: JsonDialect {
            single_quotes: bool_or("allowSingleQuotes", true)?,
            non_numeric_numbers: bool_or("allowNonNumericNumbers", true)?,
            comments: bool_or("allowComments", false)?,
            unquoted_field_names: bool_or("allowUnquotedFieldNames", false)?,
        },
        line_sep: line_sep
            .clone()
            .filter(|sep| sep != "\n")
            .map(String::into_bytes),
        primitives_as_string: bool_or("primitivesAsString", false)?,
        prefers_decimal: bool_or("prefersDecimal", false)?,
    };
    let text = TextSettings {
        whole_text: bool_or("wholetext", false)?,
        line_sep: line_sep.filter(|sep| sep != "\n").map(String::into_bytes),
    };
    let xml = XmlSettings {
        row_tag: get("rowTag").unwrap_or("").trim().to_string(),
        attribute_prefix: get("attributePrefix").unwrap_or("_").to_string(),
        value_tag: get("valueTag").unwrap_or("_VALUE").to_string(),
        exclude_attribute: bool_or("excludeAttribute", false)?,
        ignore_namespace: bool_or("ignoreNamespace", false)?,
    };
    if format == Some(Format::Xml) {
        if xml.row_tag.is_empty() {
            return Err(OptionsError::Conflict(
                "rowTag: cloudFiles.format=xml needs the element each row is read from, \
                 e.g. -o rowTag=book"
                    .into(),
            ));
        }
        if xml.value_tag.is_empty() {
            return Err(invalid("valueTag", "", "expected a field name"));
        }
    }
    Ok(Readers {
        fail_fast,
        csv,
        json,
        text,
        xml,
    })
}

/// `timestampFormat` and `dateFormat`; Spark's defaults read as the ISO parser does.
fn temporal(g: &Given) -> Result<Temporal, OptionsError> {
    let get = |k: &str| g.get(k);
    let pattern = |key: &str, spark_default: &str| -> Result<Option<Pattern>, OptionsError> {
        match get(key) {
            // Spark's default reads as the ISO parser does (which also takes a space for
            // the `T`, and any fraction).
            None => Ok(None),
            Some(v) if v == spark_default => Ok(None),
            Some(v) => Pattern::new(v).map(Some).map_err(|e| invalid(key, v, &e)),
        }
    };
    Ok(Temporal {
        timestamp: pattern("timestampFormat", SPARK_TIMESTAMP_FORMAT)?,
        date: pattern("dateFormat", SPARK_DATE_FORMAT)?,
    })
}

/// `cloudFiles.inferColumnTypes`, or Spark's CSV spelling `inferSchema`.
fn infer_column_types(g: &Given, format: Option<Format>) -> Result<bool, OptionsError> {
    Ok(
        match (g.get("cloudFiles.inferColumnTypes"), g.get("inferSchema")) {
            (Some(a), Some(b)) => {
                let (a, b) = (
                    parse_bool("cloudFiles.inferColumnTypes", a)?,
                    parse_bool("inferSchema", b)?,
                );
                if a != b {
                    return Err(OptionsError::Conflict(format!(
                        "cloudFiles.inferColumnTypes={a} and inferSchema={b} disagree; \
                     inferSchema is Spark's CSV spelling of the same setting: set one"
                    )));
                }
                a
            }
            (Some(v), None) => parse_bool("cloudFiles.inferColumnTypes", v)?,
            (None, Some(v)) => {
                if matches!(format, Some(Format::Json | Format::Parquet)) {
                    return Err(OptionsError::Conflict(
                        "inferSchema is a CSV option; for JSON use cloudFiles.inferColumnTypes"
                            .into(),
                    ));
                }
                parse_bool("inferSchema", v)?
            }
            (None, None) => false,
        },
    )
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

fn clean_source<'a>(
    get: &dyn Fn(&str) -> Option<&'a str>,
    warnings: &mut Vec<String>,
) -> Result<Option<CleanSource>, OptionsError> {
    const KEY: &str = "cloudFiles.cleanSource";
    const DEST: &str = "cloudFiles.cleanSource.moveDestination";
    const RETENTION: &str = "cloudFiles.cleanSource.retentionDuration";
    let mode = get(KEY).unwrap_or("OFF");
    let retention = get(RETENTION)
        .map(|v| parse_duration(RETENTION, v))
        .transpose()?
        .unwrap_or(std::time::Duration::from_secs(30 * 24 * 3600));
    let action = match mode.trim().to_ascii_uppercase().as_str() {
        "OFF" => {
            if let Some(d) = get(DEST) {
                warnings.push(format!("{DEST}={d} is ignored: {KEY} is OFF"));
            }
            return Ok(None);
        }
        "DELETE" => {
            if retention < std::time::Duration::from_secs(7 * 24 * 3600) {
                warnings.push(format!(
                    "{KEY}=DELETE with {RETENTION} under 7 days: a file is gone soon after its \
                     commit, so a table rebuilt from the source (a full refresh) will lack it"
                ));
            }
            CleanAction::Delete
        }
        "MOVE" => {
            let d = get(DEST).ok_or_else(|| {
                OptionsError::Conflict(format!("{KEY}=MOVE needs {DEST}: where the files go"))
            })?;
            CleanAction::Move(Location::parse(d).map_err(|e| invalid(DEST, d, &e.to_string()))?)
        }
        _ => return Err(invalid(KEY, mode, "expected OFF, DELETE or MOVE")),
    };
    Ok(Some(CleanSource { action, retention }))
}

/// Splits `KEY=VALUE` (the value may contain `=`).
pub fn split_key_value(text: &str) -> Result<(String, String), OptionsError> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(OptionsError::Malformed(text.to_string())),
    }
}

/// The option a key names (any letter case, or an alias).
pub fn canonical(key: &str) -> Option<&'static OptionSpec> {
    let key = key.trim();
    let name = ALIASES
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(key))
        .map_or(key, |(_, k)| k);
    OPTIONS.iter().find(|o| match o.key.strip_suffix("<key>") {
        // A family of keys (`cloudFiles.resourceTag.<key>`): any key under the prefix.
        Some(prefix) => {
            name.len() > prefix.len()
                && name.is_char_boundary(prefix.len())
                && name[..prefix.len()].eq_ignore_ascii_case(prefix)
        }
        None => o.key.eq_ignore_ascii_case(name),
    })
}

/// `\n`, `\r`, `\t` and `\uXXXX` written out in an option value, as the characters.
fn unescape(value: &str) -> String {
    let mut out = String::new();
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('u') => {
                chars.next();
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
                continue;
            }
            _ => {
                out.push(c);
                continue;
            }
        }
        chars.next();
    }
    out
}

/// The closest known key, when it is close enough to be a likely typo.
fn suggest(key: &str) -> Option<String> {
    let lower = key.to_ascii_lowercase();
    let candidates = OPTIONS
        .iter()
        .map(|o| o.key)
        .chain(ALIASES.iter().map(|(a, _)| *a));
    let (best, distance) = candidates
        .map(|k| (k, edit_distance(&lower, &k.to_ascii_lowercase())))
        .min_by_key(|(_, d)| *d)?;
    // A bare key that matches a cloudFiles.* key's suffix (`inferColumnTypes`) is also close.
    let suffix_match = OPTIONS.iter().map(|o| o.key).find(|k| {
        k.rsplit('.')
            .next()
            .is_some_and(|s| s.eq_ignore_ascii_case(&lower))
    });
    if let Some(k) = suffix_match {
        return Some(k.to_string());
    }
    // A bare key given a `cloudFiles.` prefix (`cloudFiles.pathGlobFilter`) is close too.
    if let Some(bare) = lower.strip_prefix("cloudfiles.") {
        let plain = OPTIONS
            .iter()
            .map(|o| o.key)
            .chain(ALIASES.iter().map(|(a, _)| *a))
            .find(|k| !k.contains('.') && k.eq_ignore_ascii_case(bare));
        if let Some(k) = plain {
            return Some(k.to_string());
        }
    }
    (distance <= 3.max(key.len() / 5)).then(|| best.to_string())
}

/// Levenshtein distance, for suggesting the closest of known names.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn invalid(key: &str, value: &str, reason: &str) -> OptionsError {
    OptionsError::Invalid {
        key: key.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

fn parse_bool(key: &str, value: &str) -> Result<bool, OptionsError> {
    scalars::parse_bool(value).ok_or_else(|| invalid(key, value, "expected true or false"))
}

fn single_byte(key: &str, value: Option<&str>, default: u8) -> Result<u8, OptionsError> {
    match value {
        None => Ok(default),
        Some("\\t") => Ok(b'\t'),
        Some(v) if v.len() == 1 => Ok(v.as_bytes()[0]),
        Some(v) => Err(invalid(key, v, "expected a single ASCII character")),
    }
}

/// Parses `10g`, `512m`, `64k`, `1024`, `10gb`, `1 GiB` (binary multiples).
pub fn parse_bytes(key: &str, value: &str) -> Result<u64, OptionsError> {
    let v = value.trim().to_ascii_lowercase().replace(' ', "");
    let digits_end = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(digits_end);
    let n: u64 = num
        .parse()
        .map_err(|_| invalid(key, value, "expected a size such as 10g"))?;
    let shift = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return Err(invalid(key, value, "expected a size such as 10g")),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| invalid(key, value, "too large"))
}

/// Parses `500ms`, `3s`, `2m`, `1h`, `7d`, `3 seconds` (a bare number is seconds).
pub fn parse_duration(key: &str, value: &str) -> Result<std::time::Duration, OptionsError> {
    crate::parse::scalars::duration(value).map_err(|reason| invalid(key, value, reason))
}

/// Parses `2021-01-01 00:00:00.000000 UTC+0` (Auto Loader's documented form), ISO-8601
/// with or without offset (UTC when absent), or a bare date.
pub fn parse_instant(key: &str, value: &str) -> Result<i64, OptionsError> {
    let v = value.trim();
    let (body, offset) = match v.rsplit_once(" UTC") {
        Some((b, off)) => {
            let hours: i32 = if off.is_empty() {
                0
            } else {
                off.trim_start_matches('+')
                    .parse()
                    .map_err(|_| invalid(key, value, "expected an offset such as UTC+0 or UTC+9"))?
            };
            (b.trim(), Some(hours))
        }
        None => (v, None),
    };
    let text = if body.len() == 10 {
        format!("{body}T00:00:00")
    } else {
        body.to_string()
    };
    let text = match offset {
        Some(h) => format!("{text}{}{:02}:00", if h < 0 { '-' } else { '+' }, h.abs()),
        None => text,
    };
    scalars::parse_timestamp(&text, Tz::UTC)
        .map(|micros| micros.div_euclid(1000))
        .ok_or_else(|| {
            invalid(
                key,
                value,
                "expected a timestamp such as 2026-03-15 00:00:00 UTC+0",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> Result<Settings, OptionsError> {
        let raw: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        resolve(&raw, &Location::Local("/ckpt".into())).map(|(s, _)| s)
    }

    #[test]
    fn defaults_follow_auto_loader() {
        let s = opts(&[]).unwrap();
        assert_eq!(s.schema_location, Location::Local("/ckpt".into()));
        assert!(!s.infer_column_types);
        assert_eq!(s.evolution_mode, EvolutionMode::AddNewColumns);
        assert_eq!(s.max_files_per_trigger, 1000);
        assert_eq!(s.sample_files, 1000);
        assert_eq!(s.sample_bytes, 50 << 30);
        assert_eq!(s.rescued_data_column.as_deref(), Some(RESCUED_DATA_COLUMN));
        assert!(s.csv.header);
        assert!(s.include_metadata);
    }

    #[test]
    fn keys_are_case_insensitive_and_aliases_work() {
        let s = opts(&[
            ("cloudfiles.inferColumnTypes", "TRUE"),
            (
                "cloudFiles.modifiedAfter",
                "2026-03-15 00:00:00.000000 UTC+0",
            ),
            ("delimiter", ";"),
        ])
        .unwrap();
        assert!(s.infer_column_types);
        assert_eq!(s.modified_after_ms, Some(1_773_532_800_000));
        assert_eq!(s.csv.sep, b';');
    }

    #[test]
    fn unknown_keys_name_the_key_and_suggest() {
        let err = opts(&[("cloudFiles.inferColumTypes", "true")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown option \"cloudFiles.inferColumTypes\"; did you mean \"cloudFiles.inferColumnTypes\"?"
        );
        let err = opts(&[("inferColumnTypes", "true")]).unwrap_err();
        assert!(
            err.to_string()
                .contains("did you mean \"cloudFiles.inferColumnTypes\""),
            "{err}"
        );
        // A bare key given a cloudFiles. prefix, as the reader's warnings once worded it.
        let err = opts(&[("cloudFiles.pathGlobFilter", "*.json")]).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("did you mean \"pathGlobFilter\"?"),
            "{err}"
        );
        let err = opts(&[("zzzz", "1")]).unwrap_err();
        assert_eq!(err.to_string(), "unknown option \"zzzz\"");
        let raw = vec![
            (
                "cloudFiles.validateOptions".to_string(),
                "false".to_string(),
            ),
            ("zzzz".to_string(), "1".to_string()),
        ];
        let (_, warnings) = resolve(&raw, &Location::Local("/c".into())).unwrap();
        assert_eq!(warnings.len(), 1);
        // A refused option's warning reads as a sentence (it was `ignoring option
        // "badRecordsPath" is an Auto Loader option ...`).
        let raw = vec![
            (
                "cloudFiles.validateOptions".to_string(),
                "false".to_string(),
            ),
            ("badRecordsPath".to_string(), "/x".to_string()),
        ];
        let (_, warnings) = resolve(&raw, &Location::Local("/c".into())).unwrap();
        assert!(
            warnings[0].starts_with("option \"badRecordsPath\" is an Auto Loader option")
                && warnings[0].ends_with("(ignored: cloudFiles.validateOptions=false)"),
            "{warnings:?}"
        );
    }

    #[test]
    fn malformed_values_are_rejected_with_the_reason() {
        let err = opts(&[("cloudFiles.schemaEvolutionMode", "rescued")]).unwrap_err();
        assert!(
            err.to_string().contains("expected one of addNewColumns"),
            "{err}"
        );
        assert!(opts(&[("cloudFiles.maxFilesPerTrigger", "0")]).is_err());
        assert!(opts(&[("cloudFiles.inferColumnTypes", "yes")]).is_err());
        assert!(opts(&[("mode", "DROPMALFORMED")]).is_err());
        assert!(opts(&[("timeZone", "Mars/Base")]).is_err());
        assert!(split_key_value("novalue").is_err());
        assert_eq!(
            split_key_value("a=b=c").unwrap(),
            ("a".into(), "b=c".into())
        );
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_bytes("k", "10g").unwrap(), 10 << 30);
        assert_eq!(parse_bytes("k", "512MB").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("k", "1 GiB").unwrap(), 1 << 30);
        assert_eq!(parse_bytes("k", "100").unwrap(), 100);
        assert!(parse_bytes("k", "ten").is_err());
    }

    #[test]
    fn the_options_reference_documents_every_option() {
        let reference = include_str!("../docs/reference/options.md");
        for o in OPTIONS {
            assert!(
                reference.contains(&format!("| `{}` |", o.key)),
                "docs/reference/options.md lacks {} (UPDATE_DOCS=1 cargo test --release docs::)",
                o.key
            );
        }
    }

    #[test]
    fn every_key_is_listed_once() {
        for (i, o) in OPTIONS.iter().enumerate() {
            assert!(
                OPTIONS[..i]
                    .iter()
                    .all(|p| !p.key.eq_ignore_ascii_case(o.key)),
                "{} twice",
                o.key
            );
            assert_eq!(canonical(o.key), Some(o));
        }
        for (alias, key) in ALIASES {
            assert_eq!(canonical(alias).map(|o| o.key), Some(*key));
        }
    }

    /// Options pasted from Databricks that autoloader lacks are refused as not supported
    /// yet, with what to do instead, never as a typo; `cloudFiles.validateOptions=false`
    /// turns that into a warning.
    #[test]
    fn not_yet_supported_options_say_so() {
        let err = opts(&[("badRecordsPath", "/tmp/bad")]).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("option \"badRecordsPath\" is an Auto Loader option autoloader does not support yet: malformed records are kept in _rescued_data"),
            "{text}"
        );
        assert!(!text.contains("unknown"), "{text}");
        for key in [
            "cloudFiles.roleArn",
            "cloudFiles.resourceTag.team",
            "cloudFiles.connectionString",
            "cloudFiles.projectId",
            "CLOUDFILES.useStrictGlobber",
        ] {
            assert!(
                matches!(
                    opts(&[(key, "x")]).unwrap_err(),
                    OptionsError::NotSupported { .. }
                ),
                "{key}"
            );
        }
        assert!(matches!(
            opts(&[("cloudFiles.resourceTag.", "x")]).unwrap_err(),
            OptionsError::Unknown { .. }
        ));
        let raw = vec![
            (
                "cloudFiles.validateOptions".to_string(),
                "false".to_string(),
            ),
            ("dropFieldIfAllNull".to_string(), "true".to_string()),
        ];
        let (_, warnings) = resolve(&raw, &Location::Local("/c".into())).unwrap();
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("does not support yet"), "{warnings:?}");
    }

    #[test]
    fn notification_options_parse_together() {
        assert_eq!(opts(&[]).unwrap().notifications, None);
        // A local watcher's backstop listing takes the option without notification mode.
        let local = opts(&[("cloudFiles.backfillInterval", "1 day")]).unwrap();
        assert_eq!(local.notifications, None);
        assert_eq!(
            local.backfill_interval,
            Some(std::time::Duration::from_secs(86_400))
        );
        let n = opts(&[
            ("cloudFiles.useNotifications", "true"),
            (
                "cloudFiles.queueUrl",
                "https://sqs.eu-west-1.amazonaws.com/1/q",
            ),
            ("cloudFiles.fetchParallelism", "4"),
            ("cloudFiles.backfillInterval", "1 day"),
            ("cloudFiles.maxFileAge", "90d"),
        ])
        .unwrap()
        .notifications
        .unwrap();
        assert_eq!(n.queue_url, "https://sqs.eu-west-1.amazonaws.com/1/q");
        assert_eq!(n.fetch_parallelism, 4);
        assert_eq!(
            n.backfill_interval,
            Some(std::time::Duration::from_secs(86_400))
        );
        assert_eq!(
            n.max_file_age,
            Some(std::time::Duration::from_secs(90 * 86_400))
        );
        assert_eq!(n.region, None);
        for bad in [
            vec![("cloudFiles.useNotifications", "true")],
            vec![
                ("cloudFiles.useNotifications", "true"),
                ("cloudFiles.queueUrl", "not a url"),
            ],
            vec![
                ("cloudFiles.useNotifications", "true"),
                (
                    "cloudFiles.queueUrl",
                    "https://sqs.eu-west-1.amazonaws.com/1/q",
                ),
                ("cloudFiles.backfillInterval", "0s"),
            ],
            vec![("cloudFiles.maxFileAge", "90d")],
            vec![("cloudFiles.backfillInterval", "0s")],
        ] {
            assert!(opts(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn reader_options_parse_into_settings() {
        let s = opts(&[]).unwrap();
        assert_eq!(s.json.dialect, JsonDialect::SPARK);
        assert_eq!(s.temporal, Temporal::ISO);
        assert_eq!(s.csv.comment, None);
        assert_eq!(s.csv.line_sep, None);
        assert!(s.json.line_sep.is_none());
        assert!(!s.csv.trim_leading && !s.csv.trim_trailing);
        let s = opts(&[
            ("allowSingleQuotes", "false"),
            ("allowNonNumericNumbers", "false"),
            ("allowComments", "true"),
            ("allowUnquotedFieldNames", "true"),
            ("primitivesAsString", "true"),
            ("prefersDecimal", "true"),
            ("timestampFormat", "dd/MM/yyyy HH:mm"),
            ("dateFormat", "dd/MM/yyyy"),
            ("comment", "#"),
            ("emptyValue", "<empty>"),
            ("ignoreLeadingWhiteSpace", "true"),
            ("ignoreTrailingWhiteSpace", "true"),
            ("lineSep", "\\u001e"),
        ])
        .unwrap();
        assert_eq!(
            s.json.dialect,
            JsonDialect {
                single_quotes: false,
                non_numeric_numbers: false,
                comments: true,
                unquoted_field_names: true,
            }
        );
        assert!(s.json.primitives_as_string && s.json.prefers_decimal);
        assert_eq!(s.temporal.timestamp.unwrap().java, "dd/MM/yyyy HH:mm");
        assert_eq!(s.temporal.date.unwrap().java, "dd/MM/yyyy");
        assert_eq!(s.csv.comment, Some(b'#'));
        assert_eq!(s.csv.empty_value, "<empty>");
        assert!(s.csv.trim_leading && s.csv.trim_trailing);
        assert_eq!(s.csv.line_sep, Some(0x1e));
        assert_eq!(s.json.line_sep.as_deref(), Some(&[0x1e][..]));
        // Spark's own defaults pasted in mean the defaults.
        let s = opts(&[
            ("timestampFormat", "yyyy-MM-dd'T'HH:mm:ss[.SSS][XXX]"),
            ("dateFormat", "yyyy-MM-dd"),
            ("lineSep", "\\n"),
        ])
        .unwrap();
        assert_eq!(s.temporal, Temporal::ISO);
        assert!(s.json.line_sep.is_none() && s.csv.line_sep.is_none());
        // Refusals name the option and the reason.
        let err = opts(&[("timestampFormat", "yyyy-MM-dd G")]).unwrap_err();
        assert!(err.to_string().contains("timestampFormat"), "{err}");
        assert!(err.to_string().contains("not supported"), "{err}");
        assert!(opts(&[("lineSep", "")]).is_err());
        assert!(
            opts(&[("lineSep", "||")]).is_err(),
            "CSV takes one character"
        );
        let s = opts(&[("lineSep", "||"), ("cloudFiles.format", "json")]).unwrap();
        assert_eq!(s.json.line_sep.as_deref(), Some(&b"||"[..]));
        assert!(opts(&[("comment", "##")]).is_err());
        assert!(opts(&[("allowComments", "maybe")]).is_err());
    }

    /// text and binaryFile: their names, text's `wholetext` and `lineSep`, a fixed schema
    /// (no `schema`, no hints) and nothing to rescue.
    #[test]
    fn text_and_binary_file_settings() {
        let s = opts(&[("cloudFiles.format", "TEXT"), ("lineSep", "||")]).unwrap();
        assert_eq!(s.format, Some(Format::Text));
        assert_eq!(s.text.line_sep.as_deref(), Some(&b"||"[..]));
        assert!(!s.text.whole_text);
        assert_eq!(s.rescued_data_column, None);
        let s = opts(&[("cloudFiles.format", "text"), ("wholetext", "true")]).unwrap();
        assert!(s.text.whole_text && s.text.line_sep.is_none());
        let s = opts(&[("cloudFiles.format", "binaryFile")]).unwrap();
        assert_eq!(s.format, Some(Format::BinaryFile));
        assert_eq!(s.format.unwrap().to_string(), "binaryFile");
        assert_eq!(Format::from_name("binaryFile"), Some(Format::BinaryFile));
        for format in ["text", "binaryFile"] {
            for key in ["schema", "cloudFiles.schemaHints"] {
                let err =
                    opts(&[("cloudFiles.format", format), (key, "value STRING")]).unwrap_err();
                assert!(err.to_string().contains("fixed schema"), "{err}");
            }
        }
        // An explicit rescued-data column is kept.
        let s = opts(&[("cloudFiles.format", "text"), ("rescuedDataColumn", "_r")]).unwrap();
        assert_eq!(s.rescued_data_column.as_deref(), Some("_r"));
        assert_eq!(Format::from_file_name("a.json.zst"), Some(Format::Json));
        assert_eq!(Format::from_file_name("a.CSV.BZ2"), Some(Format::Csv));
        assert_eq!(Format::from_file_name("a.jsonl.lz4"), Some(Format::Json));
        assert_eq!(Format::from_file_name("a.log"), None);
        assert_eq!(
            opts(&[("cloudFiles.format", "orc")]).unwrap().format,
            Some(Format::Orc)
        );
        let err = opts(&[("cloudFiles.format", "sequenceFile")]).unwrap_err();
        assert!(err.to_string().contains("expected json, csv"), "{err}");
    }

    /// `inferSchema` is CSV's spelling of `cloudFiles.inferColumnTypes`.
    #[test]
    fn infer_schema_and_infer_column_types_agree() {
        assert!(!opts(&[]).unwrap().infer_column_types);
        assert!(opts(&[("inferSchema", "true")]).unwrap().infer_column_types);
        assert!(
            !opts(&[("inferSchema", "false")])
                .unwrap()
                .infer_column_types
        );
        assert!(
            opts(&[
                ("inferSchema", "true"),
                ("cloudFiles.inferColumnTypes", "true")
            ])
            .unwrap()
            .infer_column_types
        );
        let err = opts(&[
            ("inferSchema", "false"),
            ("cloudFiles.inferColumnTypes", "true"),
        ])
        .unwrap_err();
        assert!(err.to_string().contains("disagree"), "{err}");
        assert!(opts(&[("inferSchema", "true"), ("cloudFiles.format", "json")]).is_err());
    }

    #[test]
    fn file_names_imply_formats() {
        assert_eq!(Format::from_file_name("a.json.gz"), Some(Format::Json));
        assert_eq!(Format::from_file_name("a.CSV"), Some(Format::Csv));
        assert_eq!(Format::from_file_name("a.parquet"), Some(Format::Parquet));
        assert_eq!(Format::from_file_name("part-0.AVRO"), Some(Format::Avro));
        assert_eq!(Format::from_name("Avro"), Some(Format::Avro));
        assert_eq!(Format::from_file_name("part-0.orc"), Some(Format::Orc));
        assert_eq!(Format::from_name("ORC"), Some(Format::Orc));
        assert_eq!(Format::from_file_name("a.txt"), None);
    }
}
