//! A stream's flow definition against its checkpoint (`flow/definition.rs` classifies the
//! changes): built from the request, compared when the stream opens (a change that needs a
//! full refresh refuses before anything is read), recorded with the first plan, carried by
//! the first table commit made under it (a lost checkpoint is rebuilt with it).
//!
//! Order, for a kill at any step: a change that applies to new rows is warned about and
//! emitted as an event before it is recorded, so a kill in between warns again rather than
//! never; the first definition is recorded before the first plan is written, and a
//! checkpoint with no plan and no file yet is not bound by it, so a flow never refuses
//! itself over a run that landed nothing.

use crate::pipeline::definition::definition::{
    META_KEY, MIRROR_FILE, NeedsRefresh, RecordedDefinition, mirrored,
};
use std::path::Path;

use serde::Serialize;
use serde_json::json;
use tracing::{info, warn};

use super::{IngestError, IngestRequest};
use crate::checkpoint::Checkpoint;
use crate::clock::now_ms;
use crate::flow::Columns;
use crate::flow::cdc::ColumnSelection;
use crate::flow::definition::{self, DefinitionChange, FlowDefinition};
use crate::schema::Schema;
use crate::telemetry::Telemetry;
use crate::telemetry::events::{Severity, kind};

impl IngestRequest {
    /// What this request defines the flow as. `detected_format`: the format the stream's
    /// checkpoint settled on, used when no `cloudFiles.format` is given.
    pub fn definition(&self, detected_format: Option<&str>) -> FlowDefinition {
        let mut d = FlowDefinition::new();
        let source = self.source.describe();
        d.set("source", &source);
        let kind = if self.source.reads_delta() {
            "Delta table"
        } else if self.settings.notifications.is_some() {
            "queue"
        } else if source.starts_with("s3://") {
            "S3 prefix"
        } else if Path::new(&source).is_file() {
            "file"
        } else {
            "folder"
        };
        d.set("source.kind", kind);
        d.set("table", self.table.resolved().to_string());
        let format = self
            .settings
            .format
            .map(|f| f.to_string())
            .or_else(|| detected_format.map(str::to_string));
        if let Some(format) = format {
            d.set("format", format);
        }
        let flow = match (&self.cdc, &self.snapshot) {
            (None, None) => "append",
            (Some(_), None) => "apply changes",
            (None, Some(_)) => "snapshot",
            (Some(_), Some(_)) => "auto cdc from snapshots",
        };
        d.set("flow", flow);
        if let Some(cdc) = &self.cdc {
            d.set("cdc.keys", cdc.keys.join(","));
            if !cdc.sequence_by.is_empty() {
                d.set("cdc.sequence_by", cdc.sequence_by.join(","));
            }
            d.set("cdc.stored_as_scd_type", cdc.stored_as_scd_type.to_string());
            let mut selection = |only: &str, except: &str, s: &ColumnSelection| match s {
                ColumnSelection::All => {}
                ColumnSelection::Only(c) => d.set(only, c.join(",")),
                ColumnSelection::Except(c) => d.set(except, c.join(",")),
            };
            selection("cdc.column_list", "cdc.except_column_list", &cdc.columns);
            selection(
                "cdc.track_history_column_list",
                "cdc.track_history_except_column_list",
                &cdc.track_history,
            );
            if let Some(c) = &cdc.apply_as_deletes {
                d.set("cdc.apply_as_deletes", c);
            }
            if let Some(c) = &cdc.apply_as_truncates {
                d.set("cdc.apply_as_truncates", c);
            }
            if cdc.ignore_null_updates {
                d.set("cdc.ignore_null_updates", "true");
            }
            if let Some(envelope) = cdc.format {
                d.set("cdc.format", envelope.name());
            }
        }
        if let Some(s) = &self.snapshot {
            d.set(
                "snapshot.unit",
                match s.unit {
                    crate::flow::snapshot::Unit::File => "file",
                    crate::flow::snapshot::Unit::Folder => "folder",
                    crate::flow::snapshot::Unit::Partition => "partition",
                },
            );
            d.set("snapshot.ingest_time_column", &s.ingest_time_column);
            d.set("snapshot.snapshot_id_column", &s.snapshot_id_column);
            d.set("snapshot.skip_unchanged", s.skip_unchanged.to_string());
        }
        if let Some(c) = &self.flow.condition {
            d.set("where", c.text());
        }
        match &self.flow.columns {
            Columns::All => {}
            Columns::Only(c) => d.set("columns", c.join(",")),
            Columns::Except(c) => d.set("except_columns", c.join(",")),
        }
        if !self.flow.computed.is_empty() {
            let texts: Vec<&str> = self.flow.computed.iter().map(|c| c.text()).collect();
            d.set("with_columns", texts.join("; "));
        }
        for rule in &self.flow.expectations {
            d.set(
                &format!("{}{}", definition::EXPECT_PREFIX, rule.name),
                rule.definition_value(),
            );
        }
        if let Some(at) = self.quarantine_location() {
            d.set("quarantine_table", at.resolved().to_string());
        }
        if self.once.is_some() {
            d.set("once", "true");
        }
        for (key, value) in &self.settings.given {
            if definition::records_option(key) {
                d.set_option(key, value);
            }
        }
        d
    }
}

/// The definition the checkpoint records, if any.
pub(crate) fn recorded(checkpoint: &Checkpoint) -> Result<Option<RecordedDefinition>, IngestError> {
    let Some(text) = checkpoint.meta(META_KEY)? else {
        return Ok(None);
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        IngestError::Internal(format!(
            "the flow definition recorded in {} cannot be read: {e}",
            checkpoint.describe()
        ))
    })
}

/// Records `rec` in the checkpoint (then its local copy, which may lag a kill behind).
pub(crate) fn record(checkpoint: &Checkpoint, rec: &RecordedDefinition) -> Result<(), IngestError> {
    let text = serde_json::to_string(rec).map_err(|e| IngestError::Internal(e.to_string()))?;
    checkpoint.set_meta(META_KEY, &text)?;
    crate::testing::failpoint::hit(crate::testing::failpoint::DEFINITION_RECORDED);
    let _ =
        crate::storage::atomic::write_atomic(&checkpoint.dir().join(MIRROR_FILE), text.as_bytes());
    Ok(())
}

/// The record to carry in a batch's commit info: the checkpoint's, while no table commit
/// carries it yet.
pub(crate) fn for_commit(checkpoint: &Checkpoint) -> Option<RecordedDefinition> {
    recorded(checkpoint).ok().flatten().filter(|r| !r.in_table)
}

/// After the commit carrying `rec` is marked: the table has it now.
pub(crate) fn carried(checkpoint: &Checkpoint, rec: RecordedDefinition) -> Result<(), IngestError> {
    record(
        checkpoint,
        &RecordedDefinition {
            in_table: true,
            ..rec
        },
    )
}

/// A rebuilt checkpoint takes the definition of the last commit of its stream that
/// carries one.
pub(crate) fn restore(
    checkpoint: &Checkpoint,
    commits: &[(u64, serde_json::Value)],
) -> Result<(), IngestError> {
    if recorded(checkpoint)?.is_some() {
        return Ok(());
    }
    let own = checkpoint.stream_id();
    let found = commits.iter().rev().find_map(|(_, c)| {
        if c.get("streamId").and_then(serde_json::Value::as_str) != Some(own) {
            return None;
        }
        serde_json::from_value::<RecordedDefinition>(c.get("definition")?.clone()).ok()
    });
    if let Some(rec) = found {
        record(
            checkpoint,
            &RecordedDefinition {
                in_table: true,
                ..rec
            },
        )?;
    }
    Ok(())
}

/// What the stream's open found of its definition.
#[derive(Debug)]
pub(crate) enum Found {
    /// Nothing binding is recorded (a new checkpoint, or one that planned nothing yet):
    /// the first plan records the given definition.
    Unrecorded,
    /// The recorded definition is the given one.
    Same,
    /// A checkpoint written before definitions were recorded: the given one is recorded.
    Upgrade(FlowDefinition),
    /// Changes that apply to new rows only.
    NewRows {
        previous: RecordedDefinition,
        given: FlowDefinition,
        changes: Vec<DefinitionChange>,
    },
}

/// The given definition against the recorded one, and the error a change that needs a
/// full refresh makes (nothing read, nothing written).
pub(crate) fn compare(
    req: &IngestRequest,
    checkpoint: &Checkpoint,
    stored: Option<&Schema>,
) -> Result<Found, IngestError> {
    let format = checkpoint.meta("format")?;
    let given = req.definition(format.as_deref());
    let fresh = checkpoint.is_fresh()?;
    let Some(previous) = recorded(checkpoint)? else {
        return Ok(if fresh {
            Found::Unrecorded
        } else {
            Found::Upgrade(given)
        });
    };
    if fresh {
        return Ok(Found::Unrecorded);
    }
    let changes = definition::compare(&previous.definition, &given, stored);
    if changes.is_empty() {
        return Ok(Found::Same);
    }
    if definition::needs_full_refresh(&changes) {
        return Err(IngestError::DefinitionChanged(Box::new(NeedsRefresh {
            stream: req.name.clone(),
            table: req.table.to_string(),
            since_batch: previous.since_batch,
            changes,
        })));
    }
    Ok(Found::NewRows {
        previous,
        given,
        changes,
    })
}

/// Acts on what [`compare`] found: an upgrade or a change applying to new rows is said
/// once, and the given definition recorded from batch `next_batch` on.
pub(crate) fn apply(
    found: Found,
    checkpoint: &Checkpoint,
    telemetry: &Telemetry,
    next_batch: u64,
) -> Result<(), IngestError> {
    let recorded = |definition| RecordedDefinition {
        definition,
        since_batch: next_batch,
        recorded_at_ms: now_ms(),
        in_table: false,
    };
    match found {
        Found::Unrecorded | Found::Same => Ok(()),
        Found::Upgrade(given) => {
            info!(
                since_batch = next_batch,
                "This checkpoint was written before flows recorded their definitions; recorded \
                 this run's, which later runs are compared with."
            );
            record(checkpoint, &recorded(given))
        }
        Found::NewRows {
            previous,
            given,
            changes,
        } => {
            for c in &changes {
                warn!(
                    change = %c,
                    since_batch = next_batch,
                    "The flow's definition changed; it applies to new rows only: rows committed \
                     before batch {next_batch} were written under the old definition."
                );
            }
            telemetry.emit(
                Severity::Warning,
                kind::FLOW_DEFINITION_CHANGED,
                json!({
                    "previous": previous.definition.to_json(),
                    "previousSinceBatch": previous.since_batch,
                    "definition": given.to_json(),
                    "sinceBatch": next_batch,
                    "changes": changes,
                }),
            );
            record(checkpoint, &recorded(given))
        }
    }
}

/// Records the given definition before the first plan of a checkpoint that has none.
pub(crate) fn record_first(
    req: &IngestRequest,
    checkpoint: &Checkpoint,
    batch: u64,
) -> Result<(), IngestError> {
    if recorded(checkpoint)?.is_some() && !checkpoint.is_fresh()? {
        return Ok(());
    }
    let format = checkpoint.meta("format")?;
    record(
        checkpoint,
        &RecordedDefinition {
            definition: req.definition(format.as_deref()),
            since_batch: batch,
            recorded_at_ms: now_ms(),
            in_table: false,
        },
    )
}

/// What `run --check` and `ingest --dry-run` say of a stream's definition, without
/// running it: the same classification a run makes.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Review {
    pub stream: String,
    /// What was compared, in words.
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded: Option<RecordedDefinition>,
    pub changes: Vec<DefinitionChange>,
}

impl Review {
    pub fn needs_full_refresh(&self) -> bool {
        definition::needs_full_refresh(&self.changes)
    }

    /// The error a run would stop with, if any.
    pub fn refusal(&self, req: &IngestRequest) -> Option<IngestError> {
        self.needs_full_refresh().then(|| {
            IngestError::DefinitionChanged(Box::new(NeedsRefresh {
                stream: req.name.clone(),
                table: req.table.to_string(),
                since_batch: self.recorded.as_ref().map_or(0, |r| r.since_batch),
                changes: self.changes.clone(),
            }))
        })
    }
}

/// Reviews `req`'s definition against its checkpoint, opening it (briefly, as `status`
/// does) when it exists; a checkpoint a running stream holds is compared with the copy of
/// its record in its local folder.
pub async fn review(req: &IngestRequest) -> Result<Review, IngestError> {
    if req.worker.is_some() {
        return Ok(Review {
            stream: req.name.clone(),
            status: "worker slots: each worker compares its slot's definition when it starts"
                .into(),
            recorded: None,
            changes: Vec::new(),
        });
    }
    if !Checkpoint::exists(&req.checkpoint, &req.storage)? {
        return review_of(req, None, None).await;
    }
    match Checkpoint::open(&req.checkpoint, &req.storage) {
        Ok(checkpoint) => review_of(req, Some(&checkpoint), None).await,
        Err(crate::checkpoint::CheckpointError::Locked { .. }) => {
            let local = crate::checkpoint::local_dir(&req.checkpoint, &req.storage);
            review_of(req, None, Some(mirrored(&local))).await
        }
        Err(e) => Err(e.into()),
    }
}

/// [`review`] with the checkpoint open already (`dry_run`), or a running stream's copy
/// (`running`: `Some(None)` when it has none).
pub(crate) async fn review_of(
    req: &IngestRequest,
    checkpoint: Option<&Checkpoint>,
    running: Option<Option<RecordedDefinition>>,
) -> Result<Review, IngestError> {
    let review = |status: &str, recorded: Option<RecordedDefinition>, changes| Review {
        stream: req.name.clone(),
        status: status.to_string(),
        recorded,
        changes,
    };
    let stored = || -> Result<Option<Schema>, IngestError> {
        let store =
            crate::schema::store::SchemaStore::open(&req.settings.schema_location, &req.storage)?;
        Ok(store.latest()?.map(|v| v.data))
    };
    if let Some(copy) = running {
        let Some(previous) = copy else {
            return Ok(review(
                "running, with no definition recorded yet: compared when it next starts",
                None,
                Vec::new(),
            ));
        };
        let changes = definition::compare(
            &previous.definition,
            &req.definition(None),
            stored()?.as_ref(),
        );
        return Ok(review(
            "running; compared with its recorded definition",
            Some(previous),
            changes,
        ));
    }
    let Some(checkpoint) = checkpoint else {
        return Ok(review(
            "a new flow: its definition is recorded with its first batch",
            None,
            Vec::new(),
        ));
    };
    let table = crate::target::DeltaAppend::open(&req.table, &req.storage).await?;
    if table.exists() && checkpoint.is_stale(table.reset_generation()?)? {
        return Ok(review(
            "the table was reset since this checkpoint was made: the next run starts afresh",
            None,
            Vec::new(),
        ));
    }
    let fresh = checkpoint.is_fresh()?;
    match recorded(checkpoint)? {
        _ if fresh => Ok(review(
            "nothing planned yet: its definition is recorded with its first batch",
            None,
            Vec::new(),
        )),
        None => Ok(review(
            "written before flows recorded their definitions: the next run records this one",
            None,
            Vec::new(),
        )),
        Some(previous) => {
            let format = checkpoint.meta("format")?;
            let given = req.definition(format.as_deref());
            let changes = definition::compare(&previous.definition, &given, stored()?.as_ref());
            let status = if changes.is_empty() {
                "unchanged"
            } else if definition::needs_full_refresh(&changes) {
                "changed: needs a full refresh"
            } else {
                "changed: applies to new rows only"
            };
            Ok(review(status, Some(previous), changes))
        }
    }
}
