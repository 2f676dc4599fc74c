//! One-pass inference: for a large first run, a provisional schema from the sample's first
//! files, confirmed or corrected by what the first batch observes while it is read.

use crate::pipeline::run_context::RunContext;
use crate::pipeline::schema::first_version::{
    announce_first_version, draft_first_version, log_inferred, write_first_version,
};
use crate::pipeline::schema::infer::{infer_files, merged_in_order};
use crate::pipeline::schema::{ActiveSchema, OnePassInference, layout_for};
use crate::pipeline::shared_table::align_to_current_table;
use crate::pipeline::{IngestError, IngestRequest};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use tracing::info;

use crate::checkpoint::Checkpoint;
use crate::formats::DecodeOptions;
use crate::options::Format;
use crate::schema::infer::SchemaInferrer;
use crate::schema::store::SchemaVersion;
use crate::source::FileRef;
use crate::target::Target;
use crate::testing::failpoint;

/// From this much sampled data on, the first schema version is inferred in one pass with
/// the first batch (see [`OnePassInference`]); below it, reading the sample twice costs little.
pub(crate) const ONE_PASS_MIN_BYTES: u64 = 64 << 20;
/// How much of the sample (its first files) the provisional schema is inferred from.
pub(crate) const ONE_PASS_PREFIX_BYTES: u64 = 32 << 20;

/// Settles a provisional first version: merges what the batch observed (`observed`, by
/// file key) with inference of the sample's other files, in sample order; writes it as
/// `_schemas/0`, announces it, and creates the table. Also returns whether this call
/// created the table.
pub(crate) async fn settle_first_version(
    ctx: &RunContext<'_>,
    sink: &mut dyn Target,
    spec: OnePassInference,
    mut observed: HashMap<String, SchemaInferrer>,
) -> Result<(SchemaVersion, bool), IngestError> {
    let mut prefix = spec.prefix;
    let inferred_beside = spec.beside.as_ref().map_or(0, |b| b.files().len());
    let mut beside: HashMap<String, Option<SchemaInferrer>> = match spec.beside {
        Some(started) => {
            let keys: Vec<String> = started.files().iter().map(|f| f.key.clone()).collect();
            keys.into_iter()
                .zip(started.finish(ctx.req).await?)
                .collect()
        }
        None => HashMap::new(),
    };
    let missing: Vec<FileRef> = spec
        .sample
        .iter()
        .filter(|f| {
            !observed.contains_key(&f.key)
                && !prefix.contains_key(&f.key)
                && !beside.contains_key(&f.key)
        })
        .cloned()
        .collect();
    let mut inferred_missing = infer_files(ctx.req, ctx.opts, &missing).await?.into_iter();
    let mut merged = SchemaInferrer::new();
    let mut read_by_the_batch = 0usize;
    for f in &spec.sample {
        let one = if let Some(o) = observed.remove(&f.key) {
            read_by_the_batch += 1;
            Some(o)
        } else if let Some(inferred) = prefix.remove(&f.key) {
            inferred
        } else if let Some(inferred) = beside.remove(&f.key) {
            inferred
        } else {
            inferred_missing.next().flatten()
        };
        if let Some(o) = one {
            merged.merge(o);
        }
    }
    info!(
        files = spec.sample.len(),
        read_by_the_batch,
        inferred_beside,
        inferred_now = missing.len(),
        "Settled the schema inferred while reading the first batch."
    );
    let mut draft = draft_first_version(
        ctx.req,
        ctx.checkpoint.stream_id(),
        Some(merged),
        &spec.sample,
    )?;
    // Another stream may have created the table meanwhile.
    align_to_current_table(&mut draft.data, sink, ctx.req, ctx.opts.format).await?;
    log_inferred(&draft, spec.started);
    ctx.req
        .table_schema_read_from(&layout_for(&draft, ctx.req), &spec.sample)?;
    let v = write_first_version(ctx.store, draft)?;
    failpoint::hit("after-schema-write");
    announce_first_version(ctx.telemetry, &v);
    ctx.telemetry
        .metrics
        .schema_version
        .store(v.version, Ordering::Relaxed);
    let layout = layout_for(&v, ctx.req);
    let created = sink
        .ensure_created(&ctx.req.table_schema(&layout)?, ctx.checkpoint.stream_id())
        .await?;
    Ok((v, created))
}

/// A provisional first version for a large JSON-lines or CSV sample, inferred from the
/// sample's first files only (see [`OnePassInference`]); `None` where reading the sample
/// twice is cheap, or the provisional schema cannot be drafted.
pub(crate) async fn provisional_first_version(
    req: &IngestRequest,
    checkpoint: &Checkpoint,
    table_exists: bool,
    opts: &DecodeOptions,
    sample: &[FileRef],
) -> Result<Option<ActiveSchema>, IngestError> {
    let settings = &req.settings;
    let bytes: u64 = sample.iter().map(|f| f.size).sum();
    let one_pass_format = match opts.format {
        Format::Json => !opts.multi_line,
        Format::Csv => true,
        Format::Parquet
        | Format::Avro
        | Format::Orc
        | Format::Text
        | Format::BinaryFile
        | Format::Xml => false,
    };
    // A table other streams created has types of its own to read as: infer first then.
    if settings.user_schema.is_some()
        || !one_pass_format
        || bytes < ONE_PASS_MIN_BYTES
        || table_exists
    {
        return Ok(None);
    }
    let started = Instant::now();
    let mut prefix_bytes = 0u64;
    let prefix: Vec<FileRef> = sample
        .iter()
        .take_while(|f| {
            let take = prefix_bytes < ONE_PASS_PREFIX_BYTES;
            prefix_bytes += f.size;
            take
        })
        .cloned()
        .collect();
    if prefix.len() == sample.len() {
        // The prefix would be the whole sample: inferring first reads no more.
        return Ok(None);
    }
    // Each file's result is kept for settling (see `OnePassInference::prefix`).
    let per_file = infer_files(req, opts, &prefix).await?;
    let inferrer = merged_in_order(per_file.iter().flatten().cloned());
    let Ok(draft) = draft_first_version(req, checkpoint.stream_id(), Some(inferrer), sample) else {
        return Ok(None);
    };
    info!(
        files = prefix.len(),
        sampled_files = sample.len(),
        "Inferred a provisional schema from the first files; the first batch confirms it as it is read."
    );
    let mut state = ActiveSchema::new(draft, req);
    state.one_pass = Some(OnePassInference {
        sample: sample.to_vec(),
        started,
        prefix: prefix.iter().map(|f| f.key.clone()).zip(per_file).collect(),
        beside: None,
    });
    Ok(Some(state))
}
