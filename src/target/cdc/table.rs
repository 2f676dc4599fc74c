//! The CDC target's parts, which its batch steps (`scd2.rs`, `from_snapshots.rs`) share.

use super::state_cache::{LastApplied, StateCache};
use crate::flow::cdc::{CdcSpec, RowCondition};
use crate::target::ChangeCounts;
use crate::target::delta::{DeltaAppend, TargetError};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{Schema, SchemaRef};
use deltalake::protocol::{DeltaOperation, MergePredicate};
use std::sync::Arc;

/// A CDC flow's target and state.
pub struct CdcTarget {
    pub(super) target: DeltaAppend,
    pub(super) state: DeltaAppend,
    pub(super) spec: CdcSpec,
    pub(super) deletes: Option<RowCondition>,
    pub(super) truncates: Option<RowCondition>,
    /// What the last batch did (none when only its state was committed, after a restart).
    pub(super) last: Option<ChangeCounts>,
    /// The SCD 1 state as the last batch of this run committed it.
    pub(super) cache: Option<StateCache>,
    /// SCD type 2: the greatest sequence applied to each key, as the last batch of this
    /// run committed the records.
    pub(super) last_applied: Option<LastApplied>,
    /// Batches this run applied.
    pub(super) applied: u64,
}

/// A CDC table's data error, naming its location.
pub(super) fn data_err(location: &str, reason: impl Into<String>) -> TargetError {
    TargetError::Incompatible {
        location: location.to_string(),
        reason: reason.into(),
    }
}

/// Frees a batch's per-key structures on a blocking thread, off the batch's path: freeing
/// the keys of 100,000 records one by one took 11-15 ms of a first-load batch's 100.
pub(super) fn free_later<T: Send + 'static>(value: T) {
    tokio::task::spawn_blocking(move || drop(value));
}

/// What is kept of the state (up to 2,000,000 keys) is freed on a thread of its
/// own when the flow closes: freeing a million keys node by node took some 25 ms at the
/// end of every run, after its last commit. The process may exit before it is done.
impl Drop for CdcTarget {
    fn drop(&mut self) {
        let kept = (self.cache.take(), self.last_applied.take());
        if kept.0.is_some() || kept.1.is_some() {
            std::thread::spawn(move || drop(kept));
        }
    }
}

/// A column of the state log, of its type.
pub(super) fn column<'a, T: 'static>(b: &'a RecordBatch, name: &str) -> Result<&'a T, String> {
    b.column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| format!("the CDC state has no column {name} of its type (a state written by an older version?)"))
}

/// The table's columns, then the selected change columns it lacks (evolution).
pub(super) fn widen(table: &SchemaRef, selected: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<_> = table.fields().iter().cloned().collect();
    for f in selected.fields() {
        if table.field_with_name(f.name()).is_err() {
            fields.push(f.clone());
        }
    }
    Arc::new(Schema::new(fields))
}

/// The `MERGE` operation a batch's target commit records: matched by the keys, updated
/// when matched, inserted when not (what a reader of the table's history expects).
pub(super) fn merge_operation(keys: &[String]) -> DeltaOperation {
    DeltaOperation::Merge {
        predicate: None,
        merge_predicate: Some(format!(
            "target.{} = source.{}",
            keys.join(" AND target."),
            keys.join(" AND source.")
        )),
        matched_predicates: vec![MergePredicate {
            action_type: "update".into(),
            predicate: None,
        }],
        not_matched_predicates: vec![MergePredicate {
            action_type: "insert".into(),
            predicate: None,
        }],
        not_matched_by_source_predicates: Vec::new(),
    }
}
