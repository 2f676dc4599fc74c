//! The first schema version (`_schemas/0`): the format, the inference sample, drafting
//! from the user's schema or inference, and bringing a stored version up to date with this
//! run's hints and options.

use crate::pipeline::schema::infer::infer_parallel;
use crate::pipeline::schema::{layout_for, trailing_columns};
use crate::pipeline::shared_table::align_to_current_table;
use crate::pipeline::{IngestError, IngestRequest};
use std::time::Instant;

use serde_json::json;
use tracing::{info, warn};

use crate::checkpoint::{Checkpoint, Plan};
use crate::clock::now_ms;
use crate::formats::{self, DecodeOptions};
use crate::options::{Format, Settings};
use crate::schema::evolution;
use crate::schema::hints::{apply_hints, parse_hints};
use crate::schema::infer::SchemaInferrer;
use crate::schema::store::{SchemaStore, SchemaVersion, VersionInfo};
use crate::schema::{DataType, Field, Schema};
use crate::source::{self, FileRef};
use crate::target::Target;
use crate::telemetry::Telemetry;
use crate::telemetry::events::{Severity, kind};

/// The stream's format: the option, else what the checkpoint recorded, else the one the
/// files' extensions agree on. `None` when there is nothing to ingest and nothing known.
pub(crate) fn resolve_format(
    checkpoint: &Checkpoint,
    settings: &Settings,
    candidates: &[FileRef],
    pending: &[Plan],
) -> Result<Option<Format>, IngestError> {
    let recorded = checkpoint.meta("format")?;
    let keys = candidates
        .iter()
        .chain(pending.iter().flat_map(|p| &p.files))
        .map(|f| f.key.as_str());
    let Some(format) = formats::detect::stream_format(settings.format, recorded.as_deref(), keys)?
    else {
        return Ok(None);
    };
    if recorded.as_deref() != Some(&format.to_string()) {
        checkpoint.set_meta("format", &format.to_string())?;
    }
    Ok(Some(format))
}

/// The most recently modified files, up to the sample limits (Auto Loader samples the
/// newest files).
pub(crate) fn inference_sample(
    candidates: &[FileRef],
    pending: &[Plan],
    settings: &Settings,
) -> Vec<FileRef> {
    let mut all: Vec<FileRef> = pending
        .iter()
        .flat_map(|p| &p.files)
        .chain(candidates)
        .cloned()
        .collect();
    all.sort_by(|a, b| (b.mtime_ms, &b.key).cmp(&(a.mtime_ms, &a.key)));
    let mut bytes = 0u64;
    let mut out = Vec::new();
    for f in all {
        if out.len() >= settings.sample_files || (bytes >= settings.sample_bytes && !out.is_empty())
        {
            break;
        }
        bytes += f.size;
        out.push(f);
    }
    out
}

/// Infers (or takes the user's) schema and writes `_schemas/0`.
pub(crate) async fn create_first_version(
    req: &IngestRequest,
    checkpoint: &Checkpoint,
    store: &SchemaStore,
    sink: &mut dyn Target,
    opts: &DecodeOptions,
    sample: &[FileRef],
) -> Result<SchemaVersion, IngestError> {
    let started = Instant::now();
    let inferred = if req.settings.user_schema.is_some() {
        None
    } else {
        Some(infer_parallel(req, opts, sample).await?)
    };
    let mut draft = draft_first_version(req, checkpoint.stream_id(), inferred, sample)?;
    align_to_current_table(&mut draft.data, sink, req, opts.format).await?;
    if draft.info.sampled_records.is_some() {
        log_inferred(&draft, started);
    }
    // A flow or CDC setting that does not fit the schema is refused before `_schemas/0`
    // is written, so fixing it (a hint, the condition) starts from nothing.
    req.table_schema_read_from(&layout_for(&draft, req), sample)?;
    write_first_version(store, draft)
}

/// Writes a drafted first version as `_schemas/0`.
pub(crate) fn write_first_version(
    store: &SchemaStore,
    draft: SchemaVersion,
) -> Result<SchemaVersion, IngestError> {
    let v = store.write(0, &draft.data, &draft.partition, draft.info)?;
    info!(location = %store.describe(), version = 0, "Wrote schema version.");
    Ok(v)
}

/// The first schema version (not yet written): the user's schema, or what `inferred`
/// observed over `sample`, with hints applied, the rescued-data and corrupt-record columns
/// added, and partition columns from the paths.
pub(crate) fn draft_first_version(
    req: &IngestRequest,
    stream_id: &str,
    inferred: Option<SchemaInferrer>,
    sample: &[FileRef],
) -> Result<SchemaVersion, IngestError> {
    let settings = &req.settings;
    let (mut data, reason, records) = match (&settings.user_schema, inferred) {
        (Some(user), _) => (user.clone(), "provided", None),
        (None, None) => {
            return Err(IngestError::Internal(
                "no schema was given or inferred".into(),
            ));
        }
        (None, Some(inferrer)) => {
            let records = inferrer.records;
            let mut data = inferrer.finish();
            if let Some(h) = &settings.schema_hints {
                let hints = parse_hints(h).map_err(|e| IngestError::Config(e.to_string()))?;
                apply_hints(&mut data, &hints).map_err(IngestError::Config)?;
            }
            if data.fields.is_empty() && settings.rescued_data_column.is_none() {
                return Err(IngestError::Config(
                    "no columns could be inferred from the sampled files; provide a schema or hints"
                        .into(),
                ));
            }
            (data, "inferred", Some(records))
        }
    };
    for extra in [
        &settings.rescued_data_column,
        &settings.corrupt_record_column,
    ]
    .into_iter()
    .flatten()
    {
        match data.fields.iter().find(|f| &f.name == extra) {
            Some(f) if f.data_type != DataType::String => {
                return Err(IngestError::Config(format!(
                    "column {extra} must be STRING, the data has it as {}",
                    f.data_type
                )));
            }
            Some(_) => {}
            None => data
                .fields
                .push(Field::new(extra.clone(), DataType::String)),
        }
    }
    let partition_names: Vec<String> = if settings.recursive_file_lookup {
        Vec::new()
    } else if let Some(cols) = &settings.partition_columns {
        cols.clone()
    } else {
        source::infer_partition_columns(sample.iter().map(|f| f.key.as_str()))
    };
    let partition = Schema::new(
        partition_names
            .into_iter()
            .filter(|p| {
                let clash = data.fields.iter().any(|f| f.name.eq_ignore_ascii_case(p));
                if clash {
                    warn!(column = %p, "A data column has the partition column's name; the data column wins.");
                }
                !clash
            })
            .map(|p| Field::new(p, DataType::String))
            .collect(),
    );
    let info = VersionInfo {
        stream_id: stream_id.to_string(),
        created_at_ms: now_ms(),
        reason: reason.to_string(),
        sampled_files: records.map(|_| sample.len() as u64),
        sampled_records: records,
        sampled_bytes: records.map(|_| sample.iter().map(|f| f.size).sum()),
    };
    Ok(SchemaVersion {
        version: 0,
        data,
        partition,
        info,
    })
}

/// The `schema_inferred` event of a first version.
pub(crate) fn announce_first_version(telemetry: &Telemetry, v: &SchemaVersion) {
    telemetry.emit(
        Severity::Info,
        kind::SCHEMA_INFERRED,
        json!({
            "version": v.version,
            "reason": v.info.reason,
            "columns": v.data.fields.iter().map(|f| format!("{} {}", f.name, f.data_type)).collect::<Vec<_>>(),
            "partitionColumns": v.partition.names().collect::<Vec<_>>(),
            "sampledFiles": v.info.sampled_files,
            "sampledRecords": v.info.sampled_records,
        }),
    );
}

pub(crate) fn log_inferred(v: &SchemaVersion, started: Instant) {
    info!(
        files = v.info.sampled_files, records = v.info.sampled_records,
        seconds = started.elapsed().as_secs_f64(), schema = %v.data,
        "Inferred schema."
    );
}

/// Brings the stored schema up to date with the options of this run: columns that new
/// hints (or a changed `schema` option) add, and a rescued-data or corrupt-record column
/// configured since, become the next version. A change of an existing column's type cannot
/// be applied to the table and is refused.
pub(crate) fn reconcile(
    store: &SchemaStore,
    version: SchemaVersion,
    settings: &Settings,
    stream_id: &str,
) -> Result<SchemaVersion, IngestError> {
    let reserved = trailing_columns(settings);
    let (desired, reason) = if let Some(user) = &settings.user_schema {
        (user.clone(), "provided")
    } else if let Some(h) = &settings.schema_hints {
        let hints = parse_hints(h).map_err(|e| IngestError::Config(e.to_string()))?;
        let mut desired = version.data.clone();
        apply_hints(&mut desired, &hints).map_err(IngestError::Config)?;
        (desired, "hints")
    } else {
        (version.data.clone(), "options")
    };
    let conflicts = evolution::type_conflicts(&version.data, &desired);
    if !conflicts.is_empty() {
        return Err(IngestError::Config(format!(
            "the options change the type of stored columns ({}) in {}; a Delta table cannot \
             change a column's type: keep the stored types, or start a new table and checkpoint",
            conflicts.join(", "),
            store.describe_version(version.version).display()
        )));
    }
    let (mut merged, added) = evolution::merge(&version.data, &desired, &reserved);
    let mut changes: Vec<String> = added.iter().map(ToString::to_string).collect();
    for column in &reserved {
        if merged.field(column).is_none() {
            merged.fields.push(Field::new(*column, DataType::String));
            changes.push(format!("{column} STRING"));
        }
    }
    if changes.is_empty() {
        return Ok(version);
    }
    let next = version.version + 1;
    let info = VersionInfo {
        stream_id: stream_id.to_string(),
        created_at_ms: now_ms(),
        reason: reason.to_string(),
        sampled_files: None,
        sampled_records: None,
        sampled_bytes: None,
    };
    let v = store.write(next, &merged, &version.partition, info)?;
    info!(version = next, added = %changes.join(", "), "Schema options add columns; wrote a new schema version.");
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(options: &[(&str, &str)]) -> Settings {
        crate::options::settings_for_test(options)
    }

    fn file(key: &str, size: u64, mtime_ms: i64) -> FileRef {
        FileRef {
            key: key.into(),
            size,
            mtime_ms,
        }
    }

    fn keys(files: &[FileRef]) -> Vec<&str> {
        files.iter().map(|f| f.key.as_str()).collect()
    }

    #[test]
    fn the_sample_is_the_newest_files_within_the_limits() {
        let candidates = [
            file("old.json", 5, 1),
            file("new.json", 5, 3),
            file("mid.json", 5, 2),
        ];
        let pending = [Plan {
            batch: 0,
            files: vec![file("pending.json", 5, 4)],
            created_at_ms: 0,
        }];
        let all = inference_sample(&candidates, &pending, &settings(&[]));
        assert_eq!(
            keys(&all),
            ["pending.json", "new.json", "mid.json", "old.json"]
        );
        let two = settings(&[("cloudFiles.schemaInference.sampleSize.numFiles", "2")]);
        assert_eq!(
            keys(&inference_sample(&candidates, &[], &two)),
            ["new.json", "mid.json"]
        );
        // Bytes: files are taken until the limit is reached (at least one file).
        let bytes = settings(&[("cloudFiles.schemaInference.sampleSize.numBytes", "6b")]);
        assert_eq!(
            keys(&inference_sample(&candidates, &[], &bytes)),
            ["new.json", "mid.json"]
        );
        let tiny = settings(&[("cloudFiles.schemaInference.sampleSize.numBytes", "1b")]);
        assert_eq!(
            keys(&inference_sample(&candidates, &[], &tiny)),
            ["new.json"]
        );
    }
}
