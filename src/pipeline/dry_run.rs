//! `ingest --dry-run`: what a run would do, and nothing written. Lists the files a run
//! would ingest (in its batches) and why each other listed file is not taken, and the schema
//! it would read them with: the stored version, or the one inference would write, with the
//! shared table's types. No checkpoint, schema version or table is created; an existing
//! checkpoint is opened only to read what it has ingested.

use std::collections::HashSet;
use std::time::Duration;

use serde::Serialize;

use crate::checkpoint::Checkpoint;
use crate::clock::now_ms;
use crate::formats::{self, DecodeOptions};
use crate::location::Location;
use crate::schema::store::SchemaStore;
use crate::source::{FileRef, filtered_by};
use crate::target::DeltaAppend;

use super::plan::{new_files, split_batches};
use super::schema::first_version::{draft_first_version, inference_sample};
use super::schema::infer::infer_parallel;
use super::shared_table::{align_to_current_table, table_columns};
use super::{IngestError, IngestRequest};

/// What a run of the request would do.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DryRun {
    /// The format files would be read as (`None`: nothing to tell it from yet).
    pub format: Option<String>,
    /// The files a run would ingest, in order, each with its batch.
    pub ingest: Vec<DryFile>,
    pub batches: usize,
    /// Listed files a run would not take, each with the reason.
    pub skipped: Vec<DryFile>,
    pub schema: Option<DrySchema>,
    /// The flow's definition against the one its checkpoint recorded.
    pub definition: super::definition::Review,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DryFile {
    pub file: String,
    pub size: u64,
    /// The batch (from 0 for this run) a file to ingest would land in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<usize>,
    /// Why a file is skipped, or a note on one to ingest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The schema a run would read with.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrySchema {
    /// `stored _schemas/N`, or `inferred from N files, not written`.
    pub origin: String,
    /// `name TYPE`, in table order.
    pub columns: Vec<String>,
    pub partition_columns: Vec<String>,
    /// Columns the flow keeps out of the table (`columns`, `except_columns`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
    /// The flow's `where`: only rows for which it is true would land.
    #[serde(rename = "where", skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
}

/// Plans a run of `req` without writing anything.
pub async fn dry_run(req: &IngestRequest) -> Result<DryRun, IngestError> {
    let settings = &req.settings;
    let source = super::own_output::source_without_own_output(req)?;
    let everything = req.source.list_files(None).await?;
    let listed = source.list(settings).await?;
    let listed_keys: HashSet<&str> = listed.iter().map(|f| f.key.as_str()).collect();
    let grace = req.source.modified_after_grace_ms();
    let mut skipped: Vec<DryFile> = Vec::new();
    let mut skip = |f: &FileRef, reason: String| {
        skipped.push(DryFile {
            file: req.source.uri(&f.key),
            size: f.size,
            batch: None,
            reason: Some(reason),
        });
    };
    for f in everything
        .iter()
        .filter(|f| !listed_keys.contains(f.key.as_str()))
    {
        let reason = filtered_by(f, settings, grace).map_or_else(
            || "the stream's own table, checkpoint or schema location".to_string(),
            |option| format!("left out by {option}"),
        );
        skip(f, reason);
    }
    let checkpoint = if Checkpoint::exists(&req.checkpoint, &req.storage)? {
        Some(Checkpoint::open(&req.checkpoint, &req.storage)?)
    } else {
        None
    };
    let definition = super::definition::review_of(req, checkpoint.as_ref(), None).await?;
    let (pending, new) = match &checkpoint {
        Some(c) => {
            let seen = c.seen_files()?;
            let (new, overwritten) = new_files(listed.clone(), &seen, settings)?;
            let (_, pending) = c.pending_plans()?;
            let taken: HashSet<&str> = new
                .iter()
                .chain(&overwritten)
                .map(|f| f.key.as_str())
                .collect();
            for f in &overwritten {
                skip(
                    f,
                    "changed since it was ingested; not read again (cloudFiles.allowOverwrites=false)"
                        .into(),
                );
            }
            let in_plans: HashSet<&str> = pending
                .iter()
                .flat_map(|p| &p.files)
                .map(|f| f.key.as_str())
                .collect();
            for f in listed
                .iter()
                .filter(|f| !taken.contains(f.key.as_str()) && !in_plans.contains(f.key.as_str()))
            {
                skip(f, "already ingested".into());
            }
            let new: Vec<FileRef> = new
                .into_iter()
                .filter(|f| !in_plans.contains(f.key.as_str()))
                .collect();
            (pending, new)
        }
        None if !settings.include_existing_files => {
            for f in &listed {
                skip(
                    f,
                    "present at the first start (cloudFiles.includeExistingFiles=false)".into(),
                );
            }
            (Vec::new(), Vec::new())
        }
        None => (Vec::new(), listed),
    };
    // A run leaves a file still being written for the next one.
    let (new, unsettled) = super::unsettled::split(req, new, now_ms());
    for f in &unsettled {
        skip(
            f,
            format!(
                "still being written (open for writing, or modified in the last {} where that \
                 cannot be told): left for the next run",
                human_duration(settings.settle_time)
            ),
        );
    }
    let mut ingest: Vec<DryFile> = Vec::new();
    let mut add = |f: &FileRef, batch: usize, note: Option<String>| {
        ingest.push(DryFile {
            file: req.source.uri(&f.key),
            size: f.size,
            batch: Some(batch),
            reason: note,
        });
    };
    for (i, plan) in pending.iter().enumerate() {
        for f in &plan.files {
            add(f, i, Some("in an unfinished batch, replayed first".into()));
        }
    }
    let batches = split_batches(&new, settings, &HashSet::new());
    for (i, batch) in batches.iter().enumerate() {
        for f in *batch {
            add(f, pending.len() + i, None);
        }
    }
    let recorded = match &checkpoint {
        Some(c) => c.meta("format")?,
        None => None,
    };
    let keys = new
        .iter()
        .chain(pending.iter().flat_map(|p| &p.files))
        .map(|f| f.key.as_str());
    let format = formats::detect::stream_format(settings.format, recorded.as_deref(), keys)?;
    let schema = match format {
        Some(format) => dry_schema(req, format, &new, &pending).await?,
        None => None,
    };
    Ok(DryRun {
        format: format.map(|f| f.to_string()),
        batches: pending.len() + batches.len(),
        ingest,
        skipped,
        schema,
        definition,
    })
}

/// The stored schema, or what inference would write (with the table's types), unwritten.
async fn dry_schema(
    req: &IngestRequest,
    format: crate::options::Format,
    new: &[FileRef],
    pending: &[crate::checkpoint::Plan],
) -> Result<Option<DrySchema>, IngestError> {
    let settings = &req.settings;
    let store = SchemaStore::open(&settings.schema_location, &req.storage)?;
    let (mut version, origin) = match store.latest()? {
        Some(v) => {
            let origin = format!("stored {}", store.describe_version(v.version).display());
            (v, origin)
        }
        None => {
            let sample = inference_sample(new, pending, settings);
            if sample.is_empty() && settings.user_schema.is_none() {
                return Ok(None);
            }
            let opts = DecodeOptions::new(format, settings);
            let inferred = if settings.user_schema.is_some() {
                None
            } else {
                Some(infer_parallel(req, &opts, &sample).await?)
            };
            let draft = draft_first_version(req, "dry-run", inferred, &sample)?;
            let origin = match settings.user_schema {
                Some(_) => "the schema option, not written".to_string(),
                None => format!(
                    "inferred from {} {}, not written",
                    sample.len(),
                    if sample.len() == 1 { "file" } else { "files" }
                ),
            };
            (draft, origin)
        }
    };
    if table_has_log(&req.table) {
        let mut table = DeltaAppend::open(&req.table, &req.storage).await?;
        if table_columns(&table)?.is_some() {
            align_to_current_table(&mut version.data, &mut table, req, format).await?;
        }
    }
    // Binding the flow checks it against this schema, as a run would (exit 2 if it does
    // not fit).
    let layout = super::schema::layout_for(&version, req);
    let table = req.table_schema(&layout)?;
    let left_out = layout
        .arrow_schema()
        .fields()
        .iter()
        .filter(|f| table.field_with_name(f.name()).is_err())
        .map(|f| f.name().clone())
        .collect();
    Ok(Some(DrySchema {
        left_out,
        condition: req.flow.condition.as_ref().map(|c| c.text().to_string()),
        origin,
        columns: version
            .data
            .fields
            .iter()
            .map(|f| format!("{} {}", f.name, f.data_type))
            .collect(),
        partition_columns: version.partition.names().map(str::to_string).collect(),
    }))
}

/// Whether the table exists, found without creating its folder (opening a local table
/// creates it).
fn table_has_log(table: &Location) -> bool {
    match table {
        Location::Local(path) => path.join("_delta_log").is_dir(),
        Location::S3(_) => true,
    }
}

fn human_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 1.0 {
        format!("{} ms", d.as_millis())
    } else {
        format!("{secs:.0} s")
    }
}
