//! `schema show`, `schema history`, `schema diff`: a stream's schema versions as DDL.

use crate::reports::ReportError;

use serde::Serialize;

use crate::location::Location;
use crate::schema::evolution;
use crate::schema::store::SchemaStore;
use crate::storage::StorageSettings;

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
pub(super) fn ddl_field(f: &crate::schema::Field) -> String {
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

pub(super) fn time_of(ms: i64) -> String {
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
