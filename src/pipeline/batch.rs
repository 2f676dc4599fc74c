//! One planned batch, from read to mark: read the files, evolve or reject new columns and
//! read again, skip corrupt files under `ignoreCorruptFiles`, commit with `txn`, mark done.

use crate::flow::expect::{ExpectationCounts, Tally};
use crate::pipeline::ahead::Ahead;
use crate::pipeline::read::{
    QuarantineTo, ReadMode, ReadOutcome, Written, read_files, source_files,
};
use crate::pipeline::run_context::RunContext;
use crate::pipeline::schema::infer::{InferenceStarted, infer_parallel, skippable};
use crate::pipeline::schema::one_pass::settle_first_version;
use crate::pipeline::schema::{ActiveSchema, OnePassInference, trailing_columns};
use crate::pipeline::shared_table::align_to_current_table;
use crate::pipeline::{DecodeError, IngestError, RELOAD_EVERY_VERSIONS, Summary};
use crate::target::quarantine::{QuarantineTable, Stamp};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::json;
use tracing::{debug, info, warn};

use crate::checkpoint::{CommitSummary, Plan};
use crate::clock::now_ms;
use crate::formats::{FileStats, SourceFile};
use crate::options::EvolutionMode;
use crate::record::RescueKind;
use crate::schema::evolution::{self, Outcome};
use crate::schema::infer::SchemaInferrer;
use crate::schema::store::VersionInfo;
use crate::source::FileRef;
use crate::target::Target;
use crate::telemetry::events::{Severity, kind};
use crate::testing::failpoint;

/// Reads, writes and commits one planned batch, then marks it done. `rerun` holds the
/// deaths counted against a plan run again (see [`MAX_CRASHED_ATTEMPTS`]): once its files
/// are all read, a death no longer counts. A reported error records that no process died
/// on this plan: only deaths count towards quarantine.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn execute<'a>(
    ctx: &'a RunContext<'_>,
    state: &mut ActiveSchema,
    sink: &mut dyn Target,
    plan: &Plan,
    rerun: Option<u32>,
    summary: &mut Summary,
    quarantine: Option<&mut QuarantineTable>,
    ahead: &mut Ahead<'a>,
) -> Result<(), IngestError> {
    let result = execute_counted(ctx, state, sink, plan, rerun, summary, quarantine, ahead).await;
    if result.is_err()
        && let Err(e) = ctx.checkpoint.clear_deaths(plan)
    {
        // The batch's own error is the one to report (a full disk fails both).
        warn!(error = %e, "Cannot record that the batch ended with an error.");
    }
    result
}

/// A snapshot flow's stamp for a batch: the plan's creation time, and its unit and files.
fn settings_stamp(ctx: &RunContext<'_>, plan: &Plan) -> Option<crate::record::Stamp> {
    let spec = ctx.req.snapshot.as_ref()?;
    let unit = plan.files.first().map_or("", |f| spec.unit_of(&f.key));
    Some(crate::record::Stamp {
        ingested_at_ms: plan.created_at_ms,
        snapshot_id: super::snapshots::snapshot_id(unit, &plan.files),
    })
}

/// One planned batch from read to mark: read its files, evolve (and read again) or reject
/// new columns, write, commit with the batch's `txn`, then mark the checkpoint.
///
/// Long because the order of its steps is the exactly-once protocol
/// (`docs/design/exactly-once.md`), with failpoints between them; read top to bottom it
/// is the protocol, and split it would hide which step comes first.
///
/// `ahead`: the read made of this batch's files while the batch before committed (used
/// if it still stands), and the next two batches' files, read while this one commits.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn execute_counted<'a>(
    ctx: &'a RunContext<'_>,
    state: &mut ActiveSchema,
    sink: &mut dyn Target,
    plan: &Plan,
    rerun: Option<u32>,
    summary: &mut Summary,
    quarantine: Option<&mut QuarantineTable>,
    ahead: &mut Ahead<'a>,
) -> Result<(), IngestError> {
    let started = Instant::now();
    // A snapshot flow's batch is one snapshot: stamped with the plan's time and files.
    let stamp = settings_stamp(ctx, plan);
    let files: Vec<SourceFile> =
        source_files(&ctx.req.source, &state.layout, &plan.files, stamp.as_ref());
    let settings = &ctx.req.settings;
    let evolving = matches!(
        settings.evolution_mode,
        EvolutionMode::AddNewColumns | EvolutionMode::FailOnNewColumns
    );
    if let Some(spec) = &mut state.one_pass
        && spec.beside.is_none()
    {
        // The sample's files outside the batch and the prefix are inferred beside the
        // batch's read (a first batch of one file leaves a core to them), and merged when
        // the read settles the schema; with a different schema, the batch is read again.
        let planned: std::collections::HashSet<&str> =
            plan.files.iter().map(|f| f.key.as_str()).collect();
        let others: Vec<FileRef> = spec
            .sample
            .iter()
            .filter(|f| !planned.contains(f.key.as_str()) && !spec.prefix.contains_key(&f.key))
            .cloned()
            .collect();
        if !others.is_empty() {
            spec.beside = Some(InferenceStarted::start(ctx.req, ctx.opts, &others));
        }
    }
    let mut attempt = Attempt {
        skip: vec![false; files.len()],
        skipped_reasons: Vec::new(),
        files,
        evolving,
        stop_at_new_fields: evolving,
    };
    // The read made ahead stands for the first read only, if the files and the layout
    // are still those it was made with (and the read neither infers nor quarantines).
    let mut read_ahead = ahead.made.take();
    if (state.one_pass.is_some() || quarantine.is_some())
        && let Some(unused) = read_ahead.take()
    {
        unused.discard();
    }
    let (writer, stats) = loop {
        // Files the provisional schema was inferred from need no observing.
        let observe = state
            .one_pass
            .as_ref()
            .is_some_and(|spec| plan.files.iter().any(|f| !spec.prefix.contains_key(&f.key)));
        // Writers for a table not created yet take the layout's schema as the table's.
        let table_was_missing = !sink.exists();
        let quarantine_to = quarantine.as_deref().map(|table| QuarantineTo {
            table,
            stamp: Stamp {
                batch: plan.batch,
                schema_version: state.version.version,
            },
        });
        let made = read_ahead
            .take()
            .and_then(|r| r.take_for(&plan.files, &state.layout, attempt.stop_at_new_fields));
        let (writer, read) = match made {
            Some(made) => {
                debug!(
                    batch = plan.batch,
                    "The batch's files were read while the batch before it committed."
                );
                made
            }
            None => {
                read_files(
                    ctx,
                    &state.layout,
                    &attempt.files,
                    &attempt.skip,
                    sink,
                    ReadMode {
                        stop_at_new_fields: attempt.stop_at_new_fields,
                        observe_types: observe,
                        quarantine: quarantine_to,
                    },
                )
                .await?
            }
        };
        let stands = match state.one_pass.take() {
            Some(one_pass) => {
                settle_after_read(ctx, state, sink, plan, one_pass, &read, table_was_missing).await
            }
            None => Ok(true),
        };
        let next = match stands {
            Ok(true) => attempt.judge(ctx, state, plan, read).await,
            Ok(false) => Ok(Next::ReadAgain),
            Err(e) => Err(e),
        };
        match next {
            Ok(Next::Commit(stats)) => break (writer, stats),
            Ok(Next::ReadAgain) => writer.abort(),
            Ok(Next::Evolve(mut evolution)) => {
                // Nothing of this read lands: its files go before the new version is
                // written, then the batch is read again with it. A new column that
                // another stream gave the table meanwhile comes with the table's type.
                writer.abort();
                align_to_current_table(&mut evolution.schema, sink, ctx.req, ctx.opts.format)
                    .await?;
                if evolution.schema == state.version.data {
                    // Reading again with the same schema would find the same fields.
                    return Err(IngestError::Internal(format!(
                        "evolving schema version {} changed nothing",
                        state.version.version
                    )));
                }
                for added in &mut evolution.added {
                    if let Some(f) = evolution.schema.field(&added.path) {
                        added.data_type = f.data_type.clone();
                    }
                }
                evolve(ctx, state, plan, evolution, summary)?;
            }
            Err(e) => {
                writer.abort();
                return Err(e);
            }
        }
    };
    // Every file is read: a re-run killed from here on (a deploy, a probe) is not the
    // files' fault, so it does not count towards quarantine.
    if let Some(deaths) = rerun {
        ctx.checkpoint.rerun_read_all(plan, deaths)?;
    }
    // Rows the flow's `where` left out were read, not written: counted apart.
    let filtered_rows: u64 = stats.iter().map(|s| s.filtered.rows).sum();
    let filtered_rescued: u64 = stats.iter().map(|s| s.filtered.rescued_rows).sum();
    // Rows the expectations dropped or quarantined were read, not written: counted apart.
    let mut quality = Tally::default();
    for s in &stats {
        quality.add(&s.quality);
    }
    let rows: u64 = stats.iter().map(|s| s.rows).sum::<u64>() - filtered_rows - quality.left_out();
    let rescued_rows: u64 =
        stats.iter().map(|s| s.rescued_rows).sum::<u64>() - filtered_rescued - quality.rescued_rows;
    let mut expectations = quality.named(ctx.req.flow.expectations.iter().map(|e| e.name.as_str()));
    for (i, counts) in expectations.iter_mut().enumerate() {
        counts.example_file = stats
            .iter()
            .position(|s| s.quality.rules.get(i).is_some_and(|r| r.failed > 0))
            .map(|f| attempt.files[f].meta.path.clone());
    }
    if filtered_rescued > 0 {
        warn!(
            batch = plan.batch,
            rows = filtered_rescued,
            "Rows with rescued data were left out by the where condition (counted as \
             filtered); add `OR <column> IS NULL` to keep rows whose value did not fit."
        );
    }
    let dropped: u64 = stats.iter().map(|s| s.dropped_values).sum();
    let bytes: u64 = plan
        .files
        .iter()
        .zip(&attempt.skip)
        .filter(|(_, s)| !**s)
        .map(|(f, _)| f.size)
        .sum();
    if dropped > 0 {
        warn!(
            values = dropped,
            "Values did not fit the schema and no rescuedDataColumn is set; they were dropped."
        );
    }
    let mut unknown: Vec<&str> = stats
        .iter()
        .flat_map(|s| s.unknown_names.iter().map(String::as_str))
        .collect();
    unknown.sort_unstable();
    unknown.dedup();
    if !unknown.is_empty() {
        warn!(columns = %unknown.join(", "), "Columns not in the schema were kept in the rescued data.");
    }
    let mut info = json!({
        "streamId": ctx.checkpoint.stream_id(),
        "source": ctx.req.source.describe(),
        "batch": plan.batch,
        "schemaVersion": state.version.version,
        "rows": rows,
        "rescuedRows": rescued_rows,
        "filteredRows": filtered_rows,
        "files": plan.files.iter().zip(&attempt.skip).map(|(f, s)| json!({
            "path": f.key, "size": f.size, "mtimeMs": f.mtime_ms, "skipped": *s,
        })).collect::<Vec<_>>(),
    });
    // A table source's position as the batch was planned: a lost checkpoint resumes there.
    if let Some(position) = ctx.req.source.position()
        && let Ok(position) = serde_json::from_str::<serde_json::Value>(&position)
    {
        info["sourcePosition"] = position;
    }
    if !expectations.is_empty() {
        info["expectations"] = json!(expectations);
        info["droppedRows"] = json!(quality.dropped_rows);
        info["quarantinedRows"] = json!(quality.quarantined_rows);
    }
    // The first commit under a newly recorded definition carries it (recovery reads it).
    let definition = super::definition::for_commit(ctx.checkpoint);
    if let Some(rec) = &definition {
        info["definition"] = serde_json::to_value(rec).unwrap_or_default();
    }
    let Written {
        writers,
        quarantine: quarantined,
    } = writer;
    if let Some((q_writer, q_schema)) = quarantined {
        // Before the batch's own commit, under the same txn: a replay finds it and does
        // not quarantine the rows twice.
        let Some(table) = quarantine else {
            writers.abort();
            return Err(IngestError::Internal(
                "quarantined rows and no quarantine table".into(),
            ));
        };
        let q_info = json!({
            "streamId": ctx.checkpoint.stream_id(),
            "stream": ctx.req.name,
            "batch": plan.batch,
            "schemaVersion": state.version.version,
            "rows": quality.quarantined_rows,
            "expectations": expectations,
            // What a replayed batch is compared with (`QuarantineTable::commit`).
            "files": plan.files.iter().map(|f| json!([f.key, f.size, f.mtime_ms])).collect::<Vec<_>>(),
            "rules": ctx.req.flow.expectations.iter().map(|e| json!([e.name, e.definition_value()])).collect::<Vec<_>>(),
        });
        let committed = table
            .commit(
                q_writer,
                &q_schema,
                ctx.app_id,
                plan.batch,
                q_info,
                ctx.checkpoint.stream_id(),
            )
            .await;
        if let Err(e) = committed {
            writers.abort();
            return Err(e.into());
        }
        failpoint::hit(failpoint::QUARANTINE_COMMITTED);
    }
    // The next batches' files are read while this one commits (a CDC target; see
    // `ahead.rs`); the reads are made with the settings the next batch starts its read with.
    let reads = ahead.prepare(
        ctx,
        &state.layout,
        &*sink,
        evolving,
        state.one_pass.is_none(),
    );
    let committed = ahead
        .commit_beside(reads, sink.commit(writers, ctx.app_id, plan.batch, info))
        .await;
    let table_version = match committed {
        Ok(v) => v,
        Err(e) => {
            ahead.discard();
            return Err(e.into());
        }
    };
    if table_version % RELOAD_EVERY_VERSIONS == 0 {
        sink.reload().await?;
    }
    let commit = CommitSummary {
        table_version,
        rows,
        rescued_rows,
        bytes,
        schema_version: state.version.version,
        skipped: attempt.skipped_reasons,
        skipped_keys: plan
            .files
            .iter()
            .zip(&attempt.skip)
            .filter(|(_, s)| **s)
            .map(|(f, _)| f.key.clone())
            .collect(),
    };
    ctx.checkpoint.mark_committed(plan, &commit)?;
    failpoint::hit("after-mark");
    if let Some(rec) = definition {
        super::definition::carried(ctx.checkpoint, rec)?;
    }
    let skipped = attempt.skip.iter().filter(|s| **s).count() as u64;
    info!(
        batch = plan.batch,
        files = plan.files.len(),
        rows,
        rescued_rows,
        filtered_rows,
        skipped,
        version = table_version,
        seconds = started.elapsed().as_secs_f64(),
        "Committed batch."
    );
    let seconds = started.elapsed().as_secs_f64();
    let files_done = plan.files.len() as u64 - skipped;
    ctx.telemetry
        .metrics
        .batch(files_done, rows, bytes, rescued_rows, seconds);
    // The batch is done: a figure that cannot be read is left as it was, not an error.
    let files_ingested = ctx.checkpoint.seen_files().map(|s| s.len()).ok();
    ctx.telemetry.live.update(|l| {
        l.files_ingested = files_ingested.unwrap_or(l.files_ingested);
        l.files_pending = l.files_pending.saturating_sub(plan.files.len() as u64);
        l.batches += 1;
        l.last_batch = Some(plan.batch);
        l.rows += rows;
        l.rescued_rows += rescued_rows;
        l.bytes += bytes;
        l.schema_version = Some(state.version.version);
    });
    ctx.telemetry.emit(
        Severity::Info,
        kind::BATCH_COMMITTED,
        json!({
            "batch": plan.batch, "files": files_done, "rows": rows, "bytes": bytes,
            "rescuedRows": rescued_rows, "skippedFiles": skipped, "seconds": seconds,
            "filteredRows": filtered_rows,
            "tableVersion": table_version, "schemaVersion": state.version.version,
        }),
    );
    report_expectations(ctx, plan, &expectations, &quality);
    report_rescue(ctx, plan, &attempt.files, &stats, rows, rescued_rows, state);
    warn_misfit_files(ctx.opts.format, &attempt.files, &stats);
    summary.batches += 1;
    summary.files += plan.files.len() as u64 - skipped;
    summary.skipped_files += skipped;
    summary.rows += rows;
    summary.bytes += bytes;
    summary.rescued_rows += rescued_rows;
    summary.filtered_rows += filtered_rows;
    summary.dropped_rows += quality.dropped_rows;
    summary.quarantined_rows += quality.quarantined_rows;
    crate::flow::expect::add_counts(&mut summary.expectations, &expectations);
    if let Some(changes) = sink.last_changes() {
        if changes.ties > 0 {
            ctx.telemetry.emit(
                Severity::Warning,
                kind::SEQUENCE_TIES,
                json!({
                    "batch": plan.batch, "ties": changes.ties,
                    "rule": "a record already applied stays; within a batch a delete wins, else the later record",
                }),
            );
        }
        *summary.changes.get_or_insert_default() += changes;
    }
    Ok(())
}

/// A batch's expectation counts: an event shaped like Lakeflow's
/// `flow_progress.data_quality`, the Prometheus counters, and an alert for a rule whose
/// failure share passes `alerts.expectationFailedShare`.
fn report_expectations(
    ctx: &RunContext<'_>,
    plan: &Plan,
    counts: &[ExpectationCounts],
    quality: &Tally,
) {
    if counts.is_empty() {
        return;
    }
    let dataset = ctx.req.table.resolved().to_string();
    let expectations: Vec<serde_json::Value> = counts
        .iter()
        .map(|c| {
            json!({
                "name": c.name, "dataset": dataset,
                "passed_records": c.passed, "failed_records": c.failed,
                "dropped_records": c.dropped, "quarantined_records": c.quarantined,
            })
        })
        .collect();
    ctx.telemetry.emit(
        Severity::Info,
        kind::DATA_QUALITY,
        json!({
            "batch": plan.batch,
            "data_quality": {
                "dropped_records": quality.dropped_rows,
                "quarantined_records": quality.quarantined_rows,
                "expectations": expectations,
            },
        }),
    );
    for c in counts {
        ctx.telemetry.metrics.expectation(&c.name, c);
    }
}

/// What one read of a batch leads to.
pub(crate) enum Next {
    /// What was read is final: commit it.
    Commit(Vec<FileStats>),
    /// Read the batch again: the schema changed, a file is now skipped, or the read
    /// stopped at new fields that need no evolving after all.
    ReadAgain,
    /// New columns evolve the schema: write the next version, then read again.
    Evolve(Evolution),
}

/// New columns found by a read, to become the next schema version.
pub(crate) struct Evolution {
    /// The files that hold them.
    flagged: Vec<FileRef>,
    schema: crate::schema::Schema,
    added: Vec<crate::schema::evolution::AddedField>,
}

/// The state of a batch across its reads.
pub(crate) struct Attempt {
    pub(crate) files: Vec<SourceFile>,
    /// Files skipped under `ignoreCorruptFiles`/`ignoreMissingFiles` (a skipped file may
    /// have emitted rows before it failed, so the batch is read again without it).
    pub(crate) skip: Vec<bool>,
    pub(crate) skipped_reasons: Vec<String>,
    /// Whether new columns evolve the schema or are rejected (`addNewColumns`,
    /// `failOnNewColumns`).
    pub(crate) evolving: bool,
    /// While evolving, a read stops at the first new field, so the batch that meets new
    /// columns is not read in full twice (once for nothing). Turned off if that read finds
    /// nothing to evolve after all, so the batch is then read in full.
    pub(crate) stop_at_new_fields: bool,
}

/// Settles a one-pass first version after the first read; returns whether the read
/// stands. It does not when the whole sample's schema differs from the provisional one,
/// or when another stream created the table meanwhile (with its own schema).
async fn settle_after_read(
    ctx: &RunContext<'_>,
    state: &mut ActiveSchema,
    sink: &mut dyn Target,
    plan: &Plan,
    one_pass: OnePassInference,
    read: &ReadOutcome,
    table_was_missing: bool,
) -> Result<bool, IngestError> {
    let observed: HashMap<String, SchemaInferrer> = match read {
        Ok(stats) => plan
            .files
            .iter()
            .zip(stats)
            .filter_map(|(f, s)| s.observed.clone().map(|o| (f.key.clone(), o)))
            .collect(),
        Err(_) => HashMap::new(),
    };
    let (v, created) = settle_first_version(ctx, sink, one_pass, observed).await?;
    if v.data != state.version.data || v.partition != state.version.partition {
        info!(
            "The whole sample's schema differs from the provisional one; reading the batch again."
        );
        *state = ActiveSchema::new(v, ctx.req);
        return Ok(false);
    }
    state.version = v;
    // Another stream created the table meanwhile: write again with writers made for it.
    Ok(!table_was_missing || created)
}

impl Attempt {
    /// Judges a read: commit it, evolve and read again, reject new columns, or skip a
    /// corrupt file and read again.
    async fn judge(
        &mut self,
        ctx: &RunContext<'_>,
        state: &mut ActiveSchema,
        plan: &Plan,
        read: ReadOutcome,
    ) -> Result<Next, IngestError> {
        let settings = &ctx.req.settings;
        let stats = match read {
            Ok(stats) => stats,
            Err((index, error)) => return self.skip_or_fail(ctx, plan, index, error),
        };
        if !self.evolving || !stats.iter().any(|s| s.new_fields) {
            return Ok(Next::Commit(stats));
        }
        // Some file has fields the schema lacks: infer those files and decide.
        let flagged: Vec<FileRef> = plan
            .files
            .iter()
            .zip(&stats)
            .filter(|(_, s)| s.new_fields)
            .map(|(f, _)| f.clone())
            .collect();
        let observed = infer_parallel(ctx.req, ctx.opts, &flagged).await?.finish();
        let reserved = trailing_columns(settings);
        match evolution::decide(
            &state.version.data,
            &observed,
            settings.evolution_mode,
            &reserved,
        ) {
            Outcome::Unchanged if self.stop_at_new_fields => {
                self.stop_at_new_fields = false;
                Ok(Next::ReadAgain)
            }
            Outcome::Unchanged => Ok(Next::Commit(stats)),
            Outcome::Reject { added } => {
                let files: Vec<String> =
                    flagged.iter().map(|f| ctx.req.source.uri(&f.key)).collect();
                ctx.telemetry.emit(
                    Severity::Error,
                    kind::NEW_COLUMNS_REJECTED,
                    json!({
                        "version": state.version.version,
                        "addedColumns": added.iter().map(ToString::to_string).collect::<Vec<_>>(),
                        "files": files,
                    }),
                );
                Err(IngestError::NewColumnsRejected { files, added })
            }
            Outcome::Evolve { schema, added } => Ok(Next::Evolve(Evolution {
                flagged,
                schema,
                added,
            })),
        }
    }

    /// A file failed: skipped (and the batch read again without it) under
    /// `ignoreCorruptFiles`/`ignoreMissingFiles`, else the batch fails naming it.
    fn skip_or_fail(
        &mut self,
        ctx: &RunContext<'_>,
        plan: &Plan,
        index: usize,
        error: DecodeError,
    ) -> Result<Next, IngestError> {
        if !skippable(&error, &ctx.req.settings) {
            return Err(error.into());
        }
        warn!(error = %error, "Skipping file and rewriting the batch without it.");
        ctx.telemetry.emit(
            Severity::Warning,
            kind::CORRUPT_FILE_SKIPPED,
            json!({ "file": self.files[index].meta.path, "error": error.to_string(), "batch": plan.batch }),
        );
        ctx.telemetry
            .metrics
            .corrupt_files
            .fetch_add(1, Ordering::Relaxed);
        self.skip[index] = true;
        self.skipped_reasons.push(error.to_string());
        Ok(Next::ReadAgain)
    }
}

/// Writes the evolved schema as the next version and makes it the active one; with
/// `stopOnSchemaChange`, stops the stream there.
fn evolve(
    ctx: &RunContext<'_>,
    state: &mut ActiveSchema,
    plan: &Plan,
    evolution: Evolution,
    summary: &mut Summary,
) -> Result<(), IngestError> {
    let Evolution {
        flagged,
        schema,
        added,
    } = evolution;
    let settings = &ctx.req.settings;
    let next = state.version.version + 1;
    let info = VersionInfo {
        stream_id: ctx.checkpoint.stream_id().to_string(),
        created_at_ms: now_ms(),
        reason: "evolved".into(),
        sampled_files: Some(flagged.len() as u64),
        sampled_records: None,
        sampled_bytes: Some(flagged.iter().map(|f| f.size).sum()),
    };
    let v = ctx
        .store
        .write(next, &schema, &state.version.partition, info)?;
    failpoint::hit("after-schema-evolve");
    let added_text: Vec<String> = added.iter().map(ToString::to_string).collect();
    warn!(
        version = next, added = %added_text.join(", "),
        file = %ctx.req.source.uri(&flagged[0].key),
        "Schema evolved: new columns added."
    );
    summary
        .evolutions
        .push(format!("version {next}: +{}", added_text.join(", +")));
    ctx.telemetry.emit(
        Severity::Warning,
        kind::SCHEMA_EVOLVED,
        json!({
            "oldVersion": state.version.version,
            "newVersion": next,
            "reason": "evolved",
            "addedColumns": added_text,
            "file": ctx.req.source.uri(&flagged[0].key),
            "batch": plan.batch,
        }),
    );
    ctx.telemetry
        .metrics
        .schema_version
        .store(next, Ordering::Relaxed);
    *state = ActiveSchema::new(v, ctx.req);
    if settings.stop_on_schema_change {
        return Err(IngestError::SchemaChanged {
            version: next,
            added,
        });
    }
    Ok(())
}

/// Warns, once per file as its batch commits, about a file that does not look like the
/// stream's format: one named like another format (`b.csv` read as JSON), or one not a
/// record of which parsed (a `.txt` note in a JSON folder). Its rows still land, raw in the
/// rescued data, as Spark would read them: nothing is dropped, and the warning names the
/// file and the way out.
fn warn_misfit_files(format: crate::options::Format, files: &[SourceFile], stats: &[FileStats]) {
    for (file, stats) in files.iter().zip(stats) {
        let named = crate::options::Format::from_file_name(&file.meta.name);
        let malformed = stats
            .rescue
            .keys
            .get(crate::options::CORRUPT_RECORD)
            .map_or(0, |(_, n)| *n);
        if let Some(named) = named.filter(|n| *n != format) {
            warn!(
                file = %file.meta.path,
                "This file is named like a {named} file but the stream reads {format} \
                 (cloudFiles.format): its {} rows were read as {format} ({malformed} malformed, kept \
                 in the rescued data). Leave such files out with pathGlobFilter, or \
                 give them their own stream.",
                stats.rows
            );
        } else if stats.rows > 0 && malformed == stats.rows {
            warn!(
                file = %file.meta.path,
                "None of this file's {} records parsed as {format}: they are kept whole in the \
                 rescued data. If it is not {format}, leave it out with pathGlobFilter.",
                stats.rows
            );
        }
    }
}

/// Records what a batch rescued: one `rescued_data_seen` event (keys, share, first file)
/// and one `type_mismatch` event per column whose values did not fit.
pub(crate) fn report_rescue(
    ctx: &RunContext<'_>,
    plan: &Plan,
    files: &[SourceFile],
    stats: &[FileStats],
    rows: u64,
    rescued_rows: u64,
    state: &ActiveSchema,
) {
    let mut all = crate::record::RescueStats::default();
    for s in stats {
        all.merge(&s.rescue);
    }
    if all.keys.is_empty() {
        return;
    }
    let first_file = stats
        .iter()
        .position(|s| !s.rescue.keys.is_empty())
        .map(|i| files[i].meta.path.clone());
    let has_rescue_column = state.layout.rescued.is_some();
    let mismatches = all.keys_of(RescueKind::TypeMismatch);
    if rescued_rows > 0 {
        ctx.telemetry.emit(
            Severity::Warning,
            kind::RESCUED_DATA_SEEN,
            json!({
                "batch": plan.batch,
                "rows": rows,
                "rescuedRows": rescued_rows,
                "share": if rows == 0 { 0.0 } else { rescued_rows as f64 / rows as f64 },
                "keys": all.keys.keys().collect::<Vec<_>>(),
                "newColumns": all.keys_of(RescueKind::NewColumn),
                "typeMismatches": mismatches,
                "caseMismatches": all.keys_of(RescueKind::CaseMismatch),
                "malformedRecords": all.keys.get(crate::options::CORRUPT_RECORD).map_or(0, |(_, n)| *n),
                "file": first_file,
            }),
        );
    }
    for column in mismatches {
        let n = all.keys.get(column).map_or(0, |(_, n)| *n);
        let file = stats
            .iter()
            .position(|s| s.rescue.keys.contains_key(column))
            .map(|i| files[i].meta.path.clone());
        let expected = state
            .version
            .data
            .field(column)
            .map(|f| f.data_type.to_string());
        ctx.telemetry.emit(
            if has_rescue_column {
                Severity::Warning
            } else {
                Severity::Error
            },
            kind::TYPE_MISMATCH,
            json!({
                "batch": plan.batch, "column": column, "expectedType": expected, "rows": n,
                "rescued": has_rescue_column, "file": file,
            }),
        );
    }
}
