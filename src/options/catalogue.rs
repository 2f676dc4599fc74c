//! The catalogue of options: every key Auto Loader and Spark's readers take, its default,
//! what it means, whether we support it and what a change to it means for a flow
//! (`OPTIONS`, which `autoloader options` prints and the docs' reference is generated
//! from); aliases, case-insensitive lookup and the closest-key suggestion.

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

pub(crate) const fn opt(
    key: &'static str,
    default: &'static str,
    meaning: &'static str,
) -> OptionSpec {
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

pub(crate) const fn not_yet(
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
pub(crate) const ALIASES: &[(&str, &str)] = &[
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

/// The closest known key, when it is close enough to be a likely typo.
pub(crate) fn suggest(key: &str) -> Option<String> {
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
