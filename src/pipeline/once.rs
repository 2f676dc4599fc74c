//! ONCE flows (`once = true`, Lakeflow's `INSERT INTO ONCE`): a one-time backfill that runs
//! to completion as an ingest-once run, then never again, in watch mode too.
//!
//! Its completion is recorded in the target table, not the checkpoint, so a lost
//! checkpoint cannot make it run twice: after its last batch a commit of no files carries
//! `txn("autoloader-once-<name>", G)` (G the table's reset generation) and its definition.
//! A kill between the last batch and that commit reruns nothing: the batches are exactly
//! once by the stream's own `txn`, and the rerun finds no new file and then records.
//!
//! It runs again after a full refresh (the table's `autoloader.refreshGeneration` passes
//! G), not after a checkpoints-only reset (which would duplicate its rows). A definition
//! changed since it ran is warned about and skipped unless `--rerun-once NAME`; a rerun
//! sets the flow's checkpoint aside, then commits a rerun record (the commits before it
//! are not this run's progress), then runs and records completion again. A rerun killed
//! midway is continued by the next run, with or without the flag.

use serde_json::{Value, json};
use tracing::{info, warn};

use super::{IngestError, IngestRequest, Progress, StopFlag, Summary, run_once};
use crate::checkpoint::Checkpoint;
use crate::clock::now_ms;
use crate::flow::definition::{self, FlowDefinition};
use crate::flow::once::{OnceFlow, app_id};
use crate::target::DeltaAppend;
use crate::telemetry::Hooks;

/// Where a ONCE flow stands, from its table.
#[derive(Debug, PartialEq)]
enum State {
    /// Never completed in the table's current full-refresh generation: run it.
    Due,
    /// A rerun was started and not recorded complete: continue it.
    Rerunning,
    /// Completed with this definition.
    Done { definition: Value },
}

async fn state(table: &mut DeltaAppend, name: &str) -> Result<State, IngestError> {
    let completed = table.committed_batch(&app_id(name)).await?;
    let refreshed = table.refresh_generation()?;
    let Some(generation) = completed.and_then(|v| u64::try_from(v).ok()) else {
        return Ok(State::Due);
    };
    if generation < refreshed {
        return Ok(State::Due);
    }
    let last = table
        .all_autoloader_commits()
        .await?
        .into_iter()
        .rev()
        .find_map(|(_, c)| {
            c.get("once")
                .filter(|o| o.get("name").and_then(Value::as_str) == Some(name))
                .cloned()
        });
    Ok(match last {
        Some(o) if o.get("rerun").is_some() => State::Rerunning,
        Some(o) => State::Done {
            definition: o.get("definition").cloned().unwrap_or(Value::Null),
        },
        // Its record left the log (log retention): its completion stands.
        None => State::Done {
            definition: Value::Null,
        },
    })
}

/// Runs a ONCE flow: skips it when it completed, else runs it to completion and records
/// that in the table.
pub async fn run(
    req: &IngestRequest,
    flow: &OnceFlow,
    progress: &dyn Progress,
    stop: &StopFlag,
    hooks: &Hooks,
) -> Result<Summary, IngestError> {
    let mut table = DeltaAppend::open(&req.table, &req.storage).await?;
    let state = state(&mut table, &req.name).await?;
    let given = req.definition(None);
    let skip = |note: String| {
        // Streams of a shared table waiting for this one to create it go on.
        req.first_writer.release();
        Ok(Summary {
            once: Some(note),
            ..Summary::default()
        })
    };
    match state {
        State::Done { .. } if !flow.rerun => {
            let State::Done { definition } = &state else {
                unreachable!()
            };
            // A record from before definitions (another shape) or gone with the log: its
            // completion stands.
            let changes = FlowDefinition::from_json(definition)
                .map(|recorded| definition::compare(&recorded, &given, None))
                .unwrap_or_default();
            if !changes.is_empty() {
                let changes: Vec<String> = changes.iter().map(ToString::to_string).collect();
                warn!(
                    stream = %req.name,
                    changes = %changes.join("; "),
                    "This ONCE flow's definition changed since it ran; not running it again \
                     (rerun it with `autoloader run CONFIG --rerun-once {}`).",
                    req.name
                );
                return skip(format!(
                    "definition changed since it ran; skipped (--rerun-once {} runs it again)",
                    req.name
                ));
            }
            info!(stream = %req.name, "This ONCE flow ran already; skipping it.");
            return skip("ran already; skipped".into());
        }
        State::Done { .. } => {
            // Set aside first: a kill before the rerun record leaves it complete, as it was.
            let checkpoint = Checkpoint::open(&req.checkpoint, &req.storage)?;
            let kept = checkpoint.set_aside(
                &format!("_rerun-{}", now_ms()),
                false,
                &req.settings.schema_location,
                &|| {},
            )?;
            table
                .commit_record(json!({
                    "once": { "name": req.name, "rerun": given.to_json() },
                }))
                .await?;
            warn!(stream = %req.name, kept = %kept, "Running this ONCE flow again (--rerun-once): its rows land again.");
        }
        State::Rerunning => {
            info!(stream = %req.name, "Continuing the rerun of this ONCE flow.");
        }
        State::Due => {}
    }
    let mut summary = run_once(req, progress, stop, hooks).await?;
    if stop.is_stopped() {
        summary.once = Some("stopped before completing; the next run continues it".into());
        return Ok(summary);
    }
    table.refresh().await?;
    let generation = table.reset_generation()?;
    let version = table
        .commit_marker(
            &app_id(&req.name),
            generation,
            json!({
                "once": { "name": req.name, "definition": given.to_json(), "generation": generation },
            }),
        )
        .await?;
    crate::testing::failpoint::hit(crate::testing::failpoint::ONCE_COMPLETE);
    info!(stream = %req.name, version, "This ONCE flow ran to completion; later runs skip it.");
    summary.once = Some("ran to completion".into());
    summary.table_version = Some(version);
    Ok(summary)
}
