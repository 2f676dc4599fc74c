//! Which format a stream reads: the `cloudFiles.format` option, else the format its
//! checkpoint recorded at the first run, else the one its files' names agree on.

use crate::options::Format;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormatChoiceError {
    #[error(
        "cannot tell the format of {key}; set -o cloudFiles.format=json|csv|parquet|avro|orc|text|binaryFile|xml (and pathGlobFilter to choose files)"
    )]
    Unknown { key: String },
    #[error(
        "the source mixes {first} and {other} files ({key}); set -o cloudFiles.format and pathGlobFilter"
    )]
    Mixed {
        first: Format,
        other: Format,
        key: String,
    },
    #[error(
        "the checkpoint records the format {recorded:?}, which this autoloader does not read; set -o cloudFiles.format"
    )]
    UnknownRecorded { recorded: String },
}

/// The stream's format: `option`, else `recorded`, else the one the names of `keys` agree
/// on. `None` when there is nothing to tell it from yet.
pub fn stream_format<'a>(
    option: Option<Format>,
    recorded: Option<&str>,
    keys: impl IntoIterator<Item = &'a str>,
) -> Result<Option<Format>, FormatChoiceError> {
    if let Some(f) = option {
        return Ok(Some(f));
    }
    if let Some(r) = recorded {
        return Format::from_name(r)
            .map(Some)
            .ok_or_else(|| FormatChoiceError::UnknownRecorded {
                recorded: r.to_string(),
            });
    }
    let mut found: Option<Format> = None;
    for key in keys {
        let name = key.rsplit('/').next().unwrap_or(key);
        match (Format::from_file_name(name), found) {
            (None, _) => {
                return Err(FormatChoiceError::Unknown {
                    key: key.to_string(),
                });
            }
            (Some(f), None) => found = Some(f),
            (Some(f), Some(g)) if f != g => {
                return Err(FormatChoiceError::Mixed {
                    first: g,
                    other: f,
                    key: key.to_string(),
                });
            }
            _ => {}
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_then_the_record_then_the_names() {
        let keys = ["a.csv", "b/c.csv.gz"];
        assert_eq!(
            stream_format(Some(Format::Json), Some("csv"), keys),
            Ok(Some(Format::Json))
        );
        assert_eq!(
            stream_format(None, Some("parquet"), keys),
            Ok(Some(Format::Parquet))
        );
        assert_eq!(stream_format(None, None, keys), Ok(Some(Format::Csv)));
        assert_eq!(
            stream_format(None, None, []),
            Ok(None),
            "nothing to tell it from"
        );
    }

    #[test]
    fn unknown_or_mixed_names_and_unknown_records_are_refused() {
        assert_eq!(
            stream_format(None, None, ["a.json", "notes.txt"]),
            Err(FormatChoiceError::Unknown {
                key: "notes.txt".into()
            })
        );
        assert_eq!(
            stream_format(None, None, ["a.json", "x/b.csv"]),
            Err(FormatChoiceError::Mixed {
                first: Format::Json,
                other: Format::Csv,
                key: "x/b.csv".into()
            })
        );
        // A record this version does not know is not read as Parquet.
        assert_eq!(
            stream_format(None, Some("sequenceFile"), ["a.parquet"]),
            Err(FormatChoiceError::UnknownRecorded {
                recorded: "sequenceFile".into()
            })
        );
    }
}
