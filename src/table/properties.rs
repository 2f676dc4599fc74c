//! `autoloader table show|set`: a Delta table's properties, schema, version, file count and
//! the flows that write into it; and setting its properties (`metaData.configuration`,
//! where Spark and delta-rs read them) in one commit. Local and S3 tables alike.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::location::Location;
use crate::reports::{self, ReportError};
use crate::schema::DataType;
use crate::storage::StorageSettings;
use crate::target::{DeltaAppend, TargetError};

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("{path} is not a Delta table (it has no _delta_log)")]
    NotATable { path: String },
    #[error("{text}: {reason}")]
    Property { text: String, reason: String },
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// What `table show` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TableInfo {
    pub location: String,
    pub version: u64,
    pub files: usize,
    pub properties: BTreeMap<String, String>,
    /// `name TYPE`, in table order.
    pub columns: Vec<String>,
    /// The streams whose checkpoints are found under the table (`TABLE/_autoloader`).
    pub flows: Vec<Flow>,
}

#[derive(Debug, Serialize)]
pub struct Flow {
    pub name: Option<String>,
    pub checkpoint: String,
}

/// Opens an existing table (a local folder without a log is refused, not created).
async fn open(table: &Location, storage: &StorageSettings) -> Result<DeltaAppend, TableError> {
    DeltaAppend::open_existing(table, storage)
        .await?
        .ok_or_else(|| TableError::NotATable {
            path: table.to_string(),
        })
}

/// `table show TABLE`.
pub async fn show(table: &Location, storage: &StorageSettings) -> Result<TableInfo, TableError> {
    let sink = open(table, storage).await?;
    let columns = sink
        .arrow_schema()?
        .fields()
        .iter()
        .map(|f| match DataType::from_arrow(f.data_type()) {
            Some(t) => format!("{} {t}", f.name()),
            None => format!("{} {}", f.name(), f.data_type()),
        })
        .collect();
    let flows = match reports::checkpoints(Some(table), None, None, storage) {
        Ok(found) => found
            .into_iter()
            .map(|c| Flow {
                name: c.name,
                checkpoint: c.location.to_string(),
            })
            .collect(),
        Err(ReportError::NoCheckpoint { .. }) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    Ok(TableInfo {
        location: sink.location().to_string(),
        version: sink.version().unwrap_or_default(),
        files: sink.file_count()?,
        properties: sink.properties()?,
        columns,
        flows,
    })
}

/// A `KEY=VALUE` argument of `table set`. Delta's own `delta.*` properties change how
/// readers and writers treat the table: refused, but for auto compaction and the upkeep
/// ones (retentions, checkpoint interval), which change no reader's view of a row.
pub fn parse_property(text: &str) -> Result<(String, String), TableError> {
    let refuse = |reason: &str| TableError::Property {
        text: text.to_string(),
        reason: reason.to_string(),
    };
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| refuse("give KEY=VALUE, e.g. pipelines.reset.allowed=false"))?;
    let key = key.trim();
    if key.is_empty() {
        return Err(refuse("the key is empty"));
    }
    if key.to_ascii_lowercase().starts_with("autoloader.") {
        return Err(refuse(
            "autoloader.* properties are autoloader's own bookkeeping (the reset \
             generations that `autoloader reset` writes); they are not set by hand",
        ));
    }
    if key.eq_ignore_ascii_case(crate::table::optimize::AUTO_COMPACT_PROPERTY) {
        // Read by autoloader's streams (auto compaction), written as Delta names it.
        return match value.trim().to_ascii_lowercase().as_str() {
            v @ ("true" | "false") => Ok((
                crate::table::optimize::AUTO_COMPACT_PROPERTY.to_string(),
                v.to_string(),
            )),
            _ => Err(refuse("delta.autoOptimize.autoCompact is true or false")),
        };
    }
    if let Some(known) = MAINTENANCE_PROPERTIES
        .iter()
        .find(|k| k.eq_ignore_ascii_case(key))
    {
        let value = value.trim();
        let valid = match *known {
            "delta.checkpointInterval" => value.parse::<u64>().is_ok_and(|n| n > 0),
            "delta.enableExpiredLogCleanup" => ["true", "false"].contains(&value),
            _ => is_interval(value),
        };
        if !valid {
            return Err(refuse(match *known {
                "delta.checkpointInterval" => {
                    "delta.checkpointInterval is a number of commits above 0"
                }
                "delta.enableExpiredLogCleanup" => "delta.enableExpiredLogCleanup is true or false",
                _ => "a retention is an interval such as `interval 1 day` or `interval 12 hours`",
            }));
        }
        return Ok((known.to_string(), value.to_string()));
    }
    if key.to_ascii_lowercase().starts_with("delta.") {
        return Err(refuse(
            "delta.* properties change how Delta readers and writers treat the table; \
             they are not supported here yet (set them with Spark or delta-rs)",
        ));
    }
    let value = value.trim();
    if key.eq_ignore_ascii_case(crate::table::reset::RESET_ALLOWED) {
        // A typo here would lift the guard it was meant to set.
        return match value.to_ascii_lowercase().as_str() {
            v @ ("true" | "false") => Ok((
                crate::table::reset::RESET_ALLOWED.to_string(),
                v.to_string(),
            )),
            _ => Err(refuse("pipelines.reset.allowed is true or false")),
        };
    }
    if let Some(rest) = key.strip_prefix("pipelines.")
        && !KNOWN_PIPELINES_PROPERTIES.contains(&rest)
    {
        return Err(refuse(&format!(
            "unknown pipelines.* property (known: {})",
            KNOWN_PIPELINES_PROPERTIES
                .iter()
                .map(|k| format!("pipelines.{k}"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok((key.to_string(), value.to_string()))
}

/// Delta's properties for how long the log and removed files are kept and how often a
/// checkpoint is written: they change no reader's view of the table, only its upkeep (a
/// watcher committing every second wants a log far shorter than the 30 days' default,
/// `bench/README.md`).
const MAINTENANCE_PROPERTIES: &[&str] = &[
    "delta.logRetentionDuration",
    "delta.deletedFileRetentionDuration",
    "delta.checkpointInterval",
    "delta.enableExpiredLogCleanup",
];

/// `interval <n> <unit>` as Delta spells a duration (delta-rs parses it when it reads the
/// table, without exposing its parser, and falls back to the default on a typo).
fn is_interval(value: &str) -> bool {
    let words: Vec<&str> = value.split_whitespace().collect();
    matches!(words.as_slice(), ["interval", n, unit]
        if n.parse::<u64>().is_ok()
            && ["millisecond", "second", "minute", "hour", "day", "week"]
                .iter()
                .any(|u| unit.strip_suffix('s').unwrap_or(unit) == *u))
}

/// The `pipelines.*` table properties autoloader reads.
const KNOWN_PIPELINES_PROPERTIES: &[&str] = &["reset.allowed", "cdc.tombstoneGCThresholdInSeconds"];

/// `table set TABLE KEY=VALUE...`: one commit, or none when nothing changes. Returns the
/// new version.
pub async fn set(
    table: &Location,
    storage: &StorageSettings,
    properties: &[(String, String)],
) -> Result<Option<u64>, TableError> {
    let mut sink = open(table, storage).await?;
    Ok(sink.set_properties(properties).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_parse_and_delta_ones_are_refused() {
        assert_eq!(
            parse_property("pipelines.reset.allowed=false").unwrap(),
            ("pipelines.reset.allowed".into(), "false".into())
        );
        assert_eq!(
            parse_property("owner = data team").unwrap(),
            ("owner".into(), "data team".into())
        );
        assert!(parse_property("novalue").is_err());
        assert!(parse_property("=x").is_err());
        let err = parse_property("autoloader.resetGeneration=0").unwrap_err();
        assert!(err.to_string().contains("bookkeeping"), "{err}");
        assert_eq!(
            parse_property("delta.autoOptimize.autoCompact = TRUE").unwrap(),
            ("delta.autoOptimize.autoCompact".into(), "true".into())
        );
        assert!(parse_property("delta.autoOptimize.autoCompact=yes").is_err());
        assert_eq!(
            parse_property("delta.logretentionduration = interval 2 days").unwrap(),
            (
                "delta.logRetentionDuration".into(),
                "interval 2 days".into()
            )
        );
        assert!(parse_property("delta.deletedFileRetentionDuration=interval 1 hour").is_ok());
        assert!(parse_property("delta.deletedFileRetentionDuration=7 days").is_err());
        assert!(parse_property("delta.logRetentionDuration=interval 2 fortnights").is_err());
        assert!(parse_property("delta.checkpointInterval=0").is_err());
        assert!(parse_property("delta.checkpointInterval=10").is_ok());
        assert!(parse_property("delta.enableExpiredLogCleanup=yes").is_err());
        let err = parse_property("delta.appendOnly=true").unwrap_err();
        assert!(err.to_string().contains("not supported here yet"), "{err}");
    }
}
