//! Auto Loader options under their own names, parsed and validated in one place into typed
//! [`Settings`]. Nothing downstream re-checks an option.
//!
//! Keys match case-insensitively, as Spark's reader options do. An unknown key is an error
//! that names it and suggests the closest known key (`cloudFiles.validateOptions=false`
//! turns that into a warning).

mod catalogue;
mod resolve;
mod settings;
mod values;

pub use catalogue::*;
pub use resolve::*;
pub use settings::*;
pub use values::*;

pub use crate::schema::evolution::EvolutionMode;

/// The default rescued-data column name.
pub const RESCUED_DATA_COLUMN: &str = "_rescued_data";

/// The default corrupt-record key inside the rescued data.
pub const CORRUPT_RECORD: &str = "_corrupt_record";

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

/// Splits `KEY=VALUE` (the value may contain `=`).
pub fn split_key_value(text: &str) -> Result<(String, String), OptionsError> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(OptionsError::Malformed(text.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Location;
    use crate::parse::json::JsonDialect;
    use crate::parse::temporal::Temporal;

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
        let reference = include_str!("../../docs/reference/options.md");
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
