//! Resolving a list of options into [`Settings`], in parts: each part reads the options it
//! owns and checks them against each other.

use crate::options::parse_positive;
use crate::options::{
    CleanAction, CleanSource, CsvSettings, DeltaReadSettings, Format, IncrementalListing,
    JsonSettings, NotificationSettings, OptionSpec, OptionsError, RESCUED_DATA_COLUMN, Settings,
    StartingPoint, Support, TextSettings, XmlSettings, canonical, invalid, parse_bool, parse_bytes,
    parse_duration, parse_instant, single_byte, suggest, unescape,
};
use crate::schema::evolution::EvolutionMode;
use std::collections::BTreeMap;

use chrono_tz::Tz;
use globset::{GlobBuilder, GlobMatcher};

use crate::location::Location;
use crate::parse::json::JsonDialect;
use crate::parse::temporal::{Pattern, SPARK_DATE_FORMAT, SPARK_TIMESTAMP_FORMAT, Temporal};
use crate::schema::Schema;

/// The notification options, validated: `None` without `cloudFiles.useNotifications=true`,
/// where giving any of the others is refused (it would be silently ignored).
pub(crate) fn notification_settings(
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
pub(crate) struct FileSelection {
    max_files_per_trigger: usize,
    max_bytes_per_trigger: Option<u64>,
    partition_columns: Option<Vec<String>>,
    sample_files: usize,
    sample_bytes: u64,
    path_glob_filter: Option<GlobMatcher>,
    modified_after_ms: Option<i64>,
    modified_before_ms: Option<i64>,
}

pub(crate) fn file_selection(g: &Given) -> Result<FileSelection, OptionsError> {
    let get = |k: &str| g.get(k);
    let max_files_per_trigger = get("cloudFiles.maxFilesPerTrigger")
        .map(|v| parse_positive("cloudFiles.maxFilesPerTrigger", v))
        .transpose()?
        .unwrap_or(1000);
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
    let sample_files = get("cloudFiles.schemaInference.sampleSize.numFiles")
        .map(|v| parse_positive("cloudFiles.schemaInference.sampleSize.numFiles", v))
        .transpose()?
        .unwrap_or(1000);
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
pub(crate) fn incremental_listing(g: &Given) -> Result<IncrementalListing, OptionsError> {
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
pub(crate) fn backfill_interval(g: &Given) -> Result<Option<std::time::Duration>, OptionsError> {
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
pub(crate) struct Given(BTreeMap<&'static str, String>);

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
pub(crate) fn given(raw: &[(String, String)]) -> Result<(Given, Vec<String>), OptionsError> {
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
pub(crate) struct SchemaChoice {
    format: Option<Format>,
    user_schema: Option<Schema>,
    evolution_mode: EvolutionMode,
    schema_hints: Option<String>,
    rescued_data_column: Option<String>,
}

pub(crate) fn schema_choice(g: &Given) -> Result<SchemaChoice, OptionsError> {
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
pub(crate) fn delta_read_settings(g: &Given) -> Result<DeltaReadSettings, OptionsError> {
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
pub(crate) struct Readers {
    fail_fast: bool,
    csv: CsvSettings,
    json: JsonSettings,
    text: TextSettings,
    xml: XmlSettings,
}

pub(crate) fn readers(g: &Given, format: Option<Format>) -> Result<Readers, OptionsError> {
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
pub(crate) fn temporal(g: &Given) -> Result<Temporal, OptionsError> {
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
pub(crate) fn infer_column_types(g: &Given, format: Option<Format>) -> Result<bool, OptionsError> {
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

pub(crate) fn clean_source<'a>(
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
