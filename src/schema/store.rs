//! Schema versions under `<schemaLocation>/_schemas/N`: create-only, atomic, never
//! rewritten; the highest N is the stream's current schema.
//!
//! File format (documented in `schemas/schema-version.schema.json`, generated from `Entry`
//! by [`json_schema`]): line 1 is `v1`, line 2 is one JSON object whose `dataSchemaJson`
//! and `partitionSchemaJson` are Spark StructType JSON documents held as strings (as
//! Delta's schema tracking log stores them), plus what produced the version.
//!
//! The location may be a local folder or an S3 prefix; on S3 a version is written with a
//! create-only put, so two writers cannot both write version N.

use std::fs;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Schema;
use crate::location::Location;
use crate::storage::object_dir::{RemoteDir, RemoteError};
use crate::storage::{StorageSettings, atomic};

/// Directory name under the schema location.
pub const SCHEMAS_DIR: &str = "_schemas";
const FORMAT_LINE: &str = "v1";

#[derive(Debug, thiserror::Error)]
pub enum SchemaStoreError {
    #[error("cannot access schema location {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("schema version file {path} is not readable: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error(
        "schema version {version} already exists at {path}; another stream may share this schema location"
    )]
    Exists { version: u64, path: PathBuf },
    #[error("schema location {0}")]
    Remote(#[from] RemoteError),
    #[error(
        "schema version {version} cannot be stored, it could not be read back: {reason}; \
         nested types (data, cloudFiles.maxNestingDepth, or dotted schema hints) are too deep"
    )]
    Unreadable { version: u64, reason: String },
}

/// What may produce a version (its `reason`): `inferred` (first inference), `provided`
/// (the `schema` option), `evolved` (new columns found in the data), `hints` (schema hints
/// added columns to the stored schema), `options` (a rescued-data or corrupt-record column
/// configured since the last version).
pub const VERSION_REASONS: &[&str] = &["inferred", "provided", "evolved", "hints", "options"];

/// What produced a version: first inference, a user-given schema, or evolution.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionInfo {
    /// Id of the stream that wrote the version (from its checkpoint).
    pub stream_id: String,
    /// Creation time, milliseconds since the epoch.
    pub created_at_ms: i64,
    /// What produced the version: `inferred` (first inference), `provided` (the `schema`
    /// option), `evolved` (new columns found in the data), `hints` (schema hints added
    /// columns), `options` (a rescued-data or corrupt-record column configured since).
    #[schemars(extend("enum" = VERSION_REASONS))]
    pub reason: String,
    /// Files read for inference (the three `sampled` fields are left out when nothing was
    /// sampled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u64")]
    pub sampled_files: Option<u64>,
    /// Records or rows read for inference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u64")]
    pub sampled_records: Option<u64>,
    /// Bytes of the sampled files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u64")]
    pub sampled_bytes: Option<u64>,
}

/// Each _schemas/N file is two lines: the format marker `v1`, then this JSON object. Files
/// are created once, atomically, and never rewritten; the highest N is the stream's current
/// schema.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    title = "autoloader schema version (second line of <schemaLocation>/_schemas/N)",
    extend(
        "$id" = "https://github.com/autoloader/autoloader/schemas/schema-version.schema.json",
        "additionalProperties" = true
    )
)]
struct Entry {
    /// Spark StructType JSON of the data columns, held as a string as Delta's schema
    /// tracking log does: `{"type":"struct","fields":[{"name","type","nullable","metadata"}]}`
    /// with Spark type names (string, long, integer, short, byte, float, double, boolean,
    /// binary, date, timestamp, decimal(p,s), and nested struct/array/map objects). Includes
    /// the rescued-data column when one is configured.
    data_schema_json: String,
    /// Spark StructType JSON of the Hive-style partition columns read from folder names
    /// (all STRING).
    partition_schema_json: String,
    #[serde(flatten)]
    info: VersionInfo,
}

/// The JSON Schema of a version file's JSON line, as committed in
/// `schemas/schema-version.schema.json` (`tests/it/schemas.rs` keeps the two equal).
pub fn json_schema() -> schemars::Schema {
    schemars::SchemaGenerator::default().into_root_schema_for::<Entry>()
}

/// One stored version.
#[derive(Debug, Clone)]
pub struct SchemaVersion {
    pub version: u64,
    pub data: Schema,
    pub partition: Schema,
    pub info: VersionInfo,
}

/// The `_schemas` directory of one stream.
#[derive(Debug, Clone)]
pub struct SchemaStore {
    backend: Backend,
    /// Written by competing workers of one stream (`--worker`): a version another worker
    /// wrote first is taken, not an error.
    shared_by_workers: bool,
}

#[derive(Debug, Clone)]
enum Backend {
    Local(PathBuf),
    Remote(RemoteDir),
}

impl SchemaStore {
    /// The store under `schema_location`: a local folder, or an `s3://` prefix.
    pub fn open(
        schema_location: &Location,
        state: &StorageSettings,
    ) -> Result<Self, SchemaStoreError> {
        let backend = match schema_location {
            Location::S3(url) => Backend::Remote(RemoteDir::open(url, state)?),
            Location::Local(dir) => Backend::Local(dir.join(SCHEMAS_DIR)),
        };
        Ok(SchemaStore {
            backend,
            shared_by_workers: false,
        })
    }

    /// Where the versions live, for messages.
    pub fn describe(&self) -> String {
        match &self.backend {
            Backend::Local(dir) => dir.display().to_string(),
            Backend::Remote(dir) => dir.url_of(SCHEMAS_DIR),
        }
    }

    /// Where version `version` lives, for messages.
    pub fn describe_version(&self, version: u64) -> PathBuf {
        match &self.backend {
            Backend::Local(dir) => dir.join(version.to_string()),
            Backend::Remote(dir) => PathBuf::from(dir.url_of(&format!("{SCHEMAS_DIR}/{version}"))),
        }
    }

    /// All version numbers present, ascending.
    pub fn versions(&self) -> Result<Vec<u64>, SchemaStoreError> {
        let names: Vec<String> = match &self.backend {
            Backend::Local(dir) => match fs::read_dir(dir) {
                Ok(entries) => entries
                    .filter_map(Result::ok)
                    .filter_map(|e| e.file_name().to_str().map(str::to_string))
                    .collect(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(source) => {
                    return Err(SchemaStoreError::Io {
                        path: dir.clone(),
                        source,
                    });
                }
            },
            Backend::Remote(dir) => dir.list(SCHEMAS_DIR, None)?,
        };
        let mut versions: Vec<u64> = names.iter().filter_map(|n| n.parse().ok()).collect();
        versions.sort_unstable();
        Ok(versions)
    }

    /// The highest version, if any.
    pub fn latest(&self) -> Result<Option<SchemaVersion>, SchemaStoreError> {
        match self.versions()?.last() {
            Some(v) => self.read(*v).map(Some),
            None => Ok(None),
        }
    }

    pub fn read(&self, version: u64) -> Result<SchemaVersion, SchemaStoreError> {
        let path = self.describe_version(version);
        let text = match &self.backend {
            Backend::Local(_) => {
                fs::read_to_string(&path).map_err(|source| SchemaStoreError::Io {
                    path: path.clone(),
                    source,
                })?
            }
            Backend::Remote(dir) => {
                let bytes = dir
                    .get(&format!("{SCHEMAS_DIR}/{version}"))?
                    .ok_or_else(|| SchemaStoreError::Corrupt {
                        path: path.clone(),
                        reason: "the version disappeared while being read".into(),
                    })?;
                String::from_utf8(bytes).map_err(|e| SchemaStoreError::Corrupt {
                    path: path.clone(),
                    reason: e.to_string(),
                })?
            }
        };
        let corrupt = |reason: String| SchemaStoreError::Corrupt {
            path: path.clone(),
            reason,
        };
        let mut lines = text.lines();
        if lines.next() != Some(FORMAT_LINE) {
            return Err(corrupt(format!("first line is not \"{FORMAT_LINE}\"")));
        }
        let entry: Entry = serde_json::from_str(lines.next().unwrap_or_default())
            .map_err(|e| corrupt(e.to_string()))?;
        Ok(SchemaVersion {
            version,
            data: Schema::from_spark_json(&entry.data_schema_json)
                .map_err(|e| corrupt(e.to_string()))?,
            partition: Schema::from_spark_json(&entry.partition_schema_json)
                .map_err(|e| corrupt(e.to_string()))?,
            info: entry.info,
        })
    }

    /// The store of a stream run by competing workers: see [`SchemaStore::write`].
    pub fn shared_by_workers(self) -> SchemaStore {
        SchemaStore {
            shared_by_workers: true,
            ..self
        }
    }

    /// Writes `version`, failing if it already exists (versions are never rewritten). In
    /// a store shared by workers, the version another worker wrote first is returned
    /// instead: the batch is read with it, and evolves it further if it still lacks
    /// fields (the next version, one writer again winning).
    pub fn write(
        &self,
        version: u64,
        data: &Schema,
        partition: &Schema,
        info: VersionInfo,
    ) -> Result<SchemaVersion, SchemaStoreError> {
        let entry = Entry {
            data_schema_json: data.to_spark_json(),
            partition_schema_json: partition.to_spark_json(),
            info: info.clone(),
        };
        // A schema nested deeper than serde_json reads would be written and then stop the
        // stream on its next start: refuse it now (found by fuzzing `fuzz_hints`).
        Schema::from_spark_json(&entry.data_schema_json).map_err(|e| {
            SchemaStoreError::Unreadable {
                version,
                reason: e.to_string(),
            }
        })?;
        let body = format!(
            "{FORMAT_LINE}\n{}\n",
            serde_json::to_string(&entry).expect("schema entries always serialize")
        );
        let path = self.describe_version(version);
        let created = match &self.backend {
            Backend::Local(dir) => {
                fs::create_dir_all(dir).map_err(|source| SchemaStoreError::Io {
                    path: dir.clone(),
                    source,
                })?;
                atomic::write_new_atomic(&path, body.as_bytes()).map_err(|source| {
                    SchemaStoreError::Io {
                        path: path.clone(),
                        source,
                    }
                })?
            }
            Backend::Remote(dir) => {
                dir.put_new(&format!("{SCHEMAS_DIR}/{version}"), body.into_bytes())?
            }
        };
        if !created {
            if self.shared_by_workers {
                tracing::info!(
                    version,
                    "Another worker wrote this schema version first; reading with it."
                );
                return self.read(version);
            }
            return Err(SchemaStoreError::Exists { version, path });
        }
        Ok(SchemaVersion {
            version,
            data: data.clone(),
            partition: partition.clone(),
            info,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{DataType, Field};

    #[test]
    fn versions_are_create_only_and_latest_wins() {
        let dir = tempfile::tempdir().unwrap();
        let store = SchemaStore::open(
            &Location::Local(dir.path().into()),
            &StorageSettings::local(dir.path().into()),
        )
        .unwrap();
        assert!(store.latest().unwrap().is_none());
        let info = VersionInfo {
            stream_id: "s".into(),
            created_at_ms: 1,
            reason: "inferred".into(),
            sampled_files: Some(2),
            sampled_records: Some(3),
            sampled_bytes: Some(4),
        };
        let v0 = Schema::new(vec![Field::new("a", DataType::Long)]);
        store
            .write(0, &v0, &Schema::default(), info.clone())
            .unwrap();
        assert!(matches!(
            store.write(0, &v0, &Schema::default(), info.clone()),
            Err(SchemaStoreError::Exists { .. })
        ));
        let mut v1 = v0.clone();
        v1.fields.push(Field::new("b", DataType::String));
        store.write(1, &v1, &Schema::default(), info).unwrap();
        let latest = store.latest().unwrap().unwrap();
        assert_eq!(latest.version, 1);
        assert_eq!(latest.data, v1);
        let text = fs::read_to_string(dir.path().join("_schemas/0")).unwrap();
        assert!(
            text.starts_with("v1\n{\"dataSchemaJson\":\"{\\\"type\\\":\\\"struct\\\""),
            "{text}"
        );
    }

    #[test]
    fn a_schema_too_deep_to_read_back_is_refused_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = SchemaStore::open(
            &Location::Local(dir.path().into()),
            &StorageSettings::local(dir.path().into()),
        )
        .unwrap();
        let mut t = DataType::Long;
        for _ in 0..60 {
            t = DataType::Struct(vec![Field::new("a", t)]);
        }
        let deep = Schema::new(vec![Field::new("a", t)]);
        let info = VersionInfo {
            stream_id: "s".into(),
            created_at_ms: 1,
            reason: "provided".into(),
            sampled_files: None,
            sampled_records: None,
            sampled_bytes: None,
        };
        let err = store.write(0, &deep, &Schema::default(), info).unwrap_err();
        assert!(matches!(err, SchemaStoreError::Unreadable { .. }), "{err}");
        assert!(store.latest().unwrap().is_none(), "nothing was written");
    }
}
