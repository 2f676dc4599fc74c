//! The Delta Lake table: created on first commit, appended to with delta-rs, one commit per
//! batch carrying `txn(appId, batch)` so that a batch can never land twice.
//!
//! Commit ambiguity (the commit landed but reported an error) is resolved by re-reading the
//! table's `txn` version for our app id before any retry.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::kernel::{Action, MetadataExt, StructField, StructType, Transaction};
use deltalake::parquet::basic::{Compression, ZstdLevel};
use deltalake::parquet::file::properties::{WriterProperties, WriterPropertiesBuilder};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::writer::{DeltaWriter, RecordBatchWriter, WriteMode};
use deltalake::{DeltaTable, DeltaTableError};
use tracing::{info, warn};
use url::Url;

use crate::location::Location;
use crate::record::RowsOrigin;
use crate::storage::StorageSettings;

/// Target size of one Parquet file written to the table.
const TARGET_FILE_BYTES: u64 = 128 << 20;
const COMMIT_ATTEMPTS: u32 = 5;
/// Largest row group: a row group is held in memory until it is complete, by each of the
/// writers of a batch, so wide rows (500 KB each, 128K rows per group) must close their
/// groups by size: without this limit a bulk run of such rows peaked at 650 MiB.
const ROW_GROUP_BYTES: usize = 32 << 20;
/// Dictionary page limit per column chunk. Past it a column falls back to plain encoding
/// (compressed by zstd anyway): a column with few distinct values (currency, status) keeps
/// its dictionary, while ids, names and emails stop paying for interning every value. At
/// the default 1 MiB, interning was 18% of the CPU of a bulk JSON run; at 64 KiB the
/// batch took 25% less time and the table was 15% smaller.
const DICT_LIMIT: usize = 64 << 10;

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("Delta table {location}: {source}")]
    Delta {
        location: String,
        source: Box<DeltaTableError>,
    },
    #[error("cannot create the table folder {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("Delta table {location}: {reason}")]
    Incompatible { location: String, reason: String },
}

/// An open (or not yet created) Delta table.
pub struct DeltaAppend {
    table: DeltaTable,
    location: String,
    /// The `txn` of this process's last commit, and the version it made: while the table
    /// is at that version, its last batch is known without reading the log's `txn`s
    /// (which a table's every checkpoint tombstone made slower as the table aged).
    own_txn: Option<OwnTxn>,
}

struct OwnTxn {
    version: u64,
    app_id: String,
    batch: i64,
}

impl DeltaAppend {
    /// Opens the table at `location`, which may not exist yet; an S3 table with the S3
    /// configuration in `storage`.
    pub async fn open(
        location: &Location,
        storage: &StorageSettings,
    ) -> Result<DeltaAppend, TargetError> {
        let path = match location {
            Location::S3(url) => return DeltaAppend::open_url(url.as_str(), &storage.s3).await,
            Location::Local(path) => path,
        };
        std::fs::create_dir_all(path).map_err(|source| TargetError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let abs = std::fs::canonicalize(path).map_err(|source| TargetError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let location = abs.display().to_string();
        let mut table =
            crate::storage::unloaded_table(&Location::Local(abs), &[]).map_err(|reason| {
                TargetError::Incompatible {
                    location: location.clone(),
                    reason,
                }
            })?;
        load_if_any(&mut table, &location).await?;
        Ok(DeltaAppend {
            table,
            location,
            own_txn: None,
        })
    }

    /// Opens a table on S3 with `config` (see [`StorageSettings::s3`]); commits use S3
    /// conditional writes, so concurrent writers cannot overwrite each other's commits.
    async fn open_url(text: &str, config: &[(String, String)]) -> Result<DeltaAppend, TargetError> {
        let location = text.trim_end_matches('/').to_string();
        let url = Url::parse(&format!("{location}/")).map_err(|e| TargetError::Incompatible {
            location: location.clone(),
            reason: e.to_string(),
        })?;
        let mut table =
            crate::storage::unloaded_table(&Location::S3(url), config).map_err(|reason| {
                TargetError::Incompatible {
                    location: location.clone(),
                    reason,
                }
            })?;
        // The first request: a missing-credentials failure shows here, and is explained.
        if let Err(e) = load_if_any(&mut table, &location).await {
            let credentials_given = crate::storage::has_s3_credentials(config);
            return Err(match e {
                TargetError::Delta { location, source } => TargetError::Incompatible {
                    location,
                    reason: crate::storage::explain_s3_failure(
                        credentials_given,
                        source.to_string(),
                    ),
                },
                other => other,
            });
        }
        Ok(DeltaAppend {
            table,
            location,
            own_txn: None,
        })
    }

    /// Opens a table that must exist: `None` when `location` holds none (a local folder
    /// without a log is not created, as `open` would).
    pub async fn open_existing(
        location: &Location,
        storage: &StorageSettings,
    ) -> Result<Option<DeltaAppend>, TargetError> {
        if let Some(dir) = location.as_local()
            && !dir.join("_delta_log").is_dir()
        {
            return Ok(None);
        }
        let sink = DeltaAppend::open(location, storage).await?;
        Ok(sink.exists().then_some(sink))
    }

    pub fn location(&self) -> &str {
        &self.location
    }

    /// The delta-rs table, for read-only views (the drift report).
    pub fn table(&self) -> &DeltaTable {
        &self.table
    }

    /// Whether the table has at least one version.
    pub fn exists(&self) -> bool {
        self.table.version().is_some()
    }

    pub fn version(&self) -> Option<u64> {
        self.table.version()
    }

    /// Creates the table with this schema if it does not exist yet; returns whether this
    /// call created it (false when it existed, or another writer created it meanwhile).
    pub async fn ensure_created(
        &mut self,
        schema: &SchemaRef,
        stream_id: &str,
    ) -> Result<bool, TargetError> {
        if self.exists() {
            return Ok(false);
        }
        let structure: StructType =
            schema
                .as_ref()
                .try_into_kernel_struct()
                .map_err(|e| TargetError::Incompatible {
                    location: self.location.clone(),
                    reason: format!("schema cannot be stored in Delta: {e}"),
                })?;
        let columns: Vec<StructField> = structure.fields().cloned().collect();
        let created = self
            .table
            .create()
            .with_columns(columns)
            .with_commit_properties(CommitProperties::default().with_metadata([(
                "autoloader".to_string(),
                serde_json::json!({ "streamId": stream_id }),
            )]))
            .await;
        match created {
            Ok(table) => {
                self.table = table;
                info!(table = %self.location, "Created Delta table.");
                Ok(true)
            }
            // Another stream created it meanwhile: load theirs.
            Err(e) => {
                self.table
                    .load()
                    .await
                    .map_err(|_| delta_err(&self.location, e))?;
                Ok(false)
            }
        }
    }

    /// Loads the table's state afresh (from its latest Delta checkpoint), dropping the
    /// state accumulated commit by commit: a long-running stream does this now and then
    /// so its memory stays flat.
    pub async fn reload(&mut self) -> Result<(), TargetError> {
        if self.exists() {
            let mut fresh =
                crate::storage::table_at(self.table.table_url().clone(), Default::default())
                    .map_err(|e| delta_err(&self.location, e))?;
            fresh
                .load()
                .await
                .map_err(|e| delta_err(&self.location, e))?;
            self.table = fresh;
        }
        Ok(())
    }

    /// Re-reads the table's latest state.
    pub async fn refresh(&mut self) -> Result<(), TargetError> {
        if self.exists() {
            // No next commit, nothing new: one read instead of rebuilding the snapshot,
            // which re-reads the latest checkpoint (its tombstones grow with the table's
            // age) and replays every commit after it.
            if let Some(version) = self.table.version()
                && let Ok(None) = self.table.log_store().read_commit_entry(version + 1).await
            {
                return Ok(());
            }
            self.table
                .update_state()
                .await
                .map_err(|e| delta_err(&self.location, e))?;
        } else {
            load_if_any(&mut self.table, &self.location).await?;
        }
        Ok(())
    }

    /// The last batch this app id committed, from the table's `txn` actions.
    pub async fn committed_batch(&mut self, app_id: &str) -> Result<Option<i64>, TargetError> {
        if !self.exists() {
            return Ok(None);
        }
        if let Some(own) = &self.own_txn
            && own.app_id == app_id
            && self.table.version() == Some(own.version)
        {
            return Ok(Some(own.batch));
        }
        let state = self
            .table
            .snapshot()
            .map_err(|e| delta_err(&self.location, e))?;
        state
            .transaction_version(self.table.log_store().as_ref(), app_id)
            .await
            .map_err(|e| delta_err(&self.location, e))
    }

    /// The version whose commit holds `txn(app_id, batch)`, looked for from the latest
    /// version back (a batch's commit is among the last ones); `None` when no commit left
    /// in the log holds it.
    pub async fn version_of_batch(
        &self,
        app_id: &str,
        batch: u64,
    ) -> Result<Option<u64>, TargetError> {
        let Some(latest) = self.table.version() else {
            return Ok(None);
        };
        let wanted = i64::try_from(batch).unwrap_or(i64::MAX);
        let store = self.table.log_store();
        for version in (0..=latest).rev() {
            let Some(bytes) = store
                .read_commit_entry(version)
                .await
                .map_err(|e| delta_err(&self.location, e))?
            else {
                return Ok(None);
            };
            for line in bytes.split(|b| *b == b'\n') {
                let Ok(action) = serde_json::from_slice::<serde_json::Value>(line) else {
                    continue;
                };
                let Some(txn) = action.get("txn") else {
                    continue;
                };
                if txn.get("appId").and_then(serde_json::Value::as_str) != Some(app_id) {
                    continue;
                }
                match txn.get("version").and_then(serde_json::Value::as_i64) {
                    Some(v) if v == wanted => return Ok(Some(version)),
                    Some(v) if v < wanted => return Ok(None),
                    _ => {}
                }
            }
        }
        Ok(None)
    }

    /// The `autoloader` commit info of every commit still in the table's log, with its
    /// commit time, oldest first: what a lost checkpoint is rebuilt from.
    pub async fn autoloader_commits(&self) -> Result<Vec<(u64, serde_json::Value)>, TargetError> {
        Ok(since_last_reset(self.all_autoloader_commits().await?))
    }

    /// The record of the table's last reset commit (`{"generation", "full", "keepSchema"}`).
    pub async fn last_reset(&self) -> Result<Option<serde_json::Value>, TargetError> {
        Ok(self
            .all_autoloader_commits()
            .await?
            .into_iter()
            .rev()
            .find_map(|(_, c)| c.get("reset").cloned()))
    }

    /// The reset record of the table's latest commit, when that commit is a reset.
    pub async fn last_commit_reset(&self) -> Result<Option<serde_json::Value>, TargetError> {
        use futures::TryStreamExt;
        if !self.exists() {
            return Ok(None);
        }
        let latest: Vec<_> = self
            .table
            .history(Some(1))
            .try_collect()
            .await
            .map_err(|e| delta_err(&self.location, e))?;
        Ok(latest
            .first()
            .and_then(|ci| ci.info.get("autoloader"))
            .and_then(|a| a.get("reset"))
            .cloned())
    }

    /// Every `autoloader` commit record, resets included, oldest first.
    pub async fn all_autoloader_commits(
        &self,
    ) -> Result<Vec<(u64, serde_json::Value)>, TargetError> {
        use futures::TryStreamExt;
        if !self.exists() {
            return Ok(Vec::new());
        }
        let infos: Vec<_> = self
            .table
            .history(None)
            .try_collect()
            .await
            .map_err(|e| delta_err(&self.location, e))?;
        // History is newest first; reversed, a stable sort keeps commits of one
        // millisecond in version order.
        let mut out: Vec<(u64, serde_json::Value)> = infos
            .into_iter()
            .rev()
            .filter_map(|ci| {
                let at = u64::try_from(ci.timestamp.unwrap_or(0)).unwrap_or(0);
                ci.info.get("autoloader").cloned().map(|a| (at, a))
            })
            .collect();
        out.sort_by_key(|(v, _)| *v);
        Ok(out)
    }

    /// A table property as a number (0 when absent or not a number).
    fn number_property(&self, key: &str) -> Result<u64, TargetError> {
        if !self.exists() {
            return Ok(0);
        }
        Ok(self
            .properties()?
            .get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }

    /// How many resets (full or checkpoints-only) the table has had: a checkpoint made
    /// before the last one is stale (see `table/reset.rs`).
    pub fn reset_generation(&self) -> Result<u64, TargetError> {
        self.number_property(RESET_GENERATION)
    }

    /// The generation of the last full refresh: a ONCE flow completed before it runs again.
    pub fn refresh_generation(&self) -> Result<u64, TargetError> {
        self.number_property(REFRESH_GENERATION)
    }

    /// How many rows the current version holds, from the files' statistics (`None` when a
    /// file has none).
    pub fn row_count(&self) -> Result<Option<u64>, TargetError> {
        let state = self
            .table
            .snapshot()
            .map_err(|e| delta_err(&self.location, e))?;
        Ok(state
            .log_data()
            .into_iter()
            .map(|f| f.num_records().map(|n| n as u64))
            .sum())
    }

    /// The reset commit: one commit bumping `autoloader.resetGeneration` (and, for a full
    /// refresh, `autoloader.refreshGeneration`) in the metadata, removing every data file
    /// when `full` (with `dataChange=true`: the rows are gone from this version on; older
    /// versions still read them). The schema, partitioning and other properties stay.
    /// Returns the new generation.
    pub async fn commit_reset(
        &mut self,
        full: bool,
        keep_schema: bool,
    ) -> Result<u64, TargetError> {
        let generation = self.reset_generation()? + 1;
        let snapshot = self
            .table
            .snapshot()
            .map_err(|e| delta_err(&self.location, e))?;
        let mut metadata = snapshot
            .metadata()
            .clone()
            .add_config_key(RESET_GENERATION.to_string(), generation.to_string())
            .map_err(|e| delta_err(&self.location, e.into()))?;
        if full {
            metadata = metadata
                .add_config_key(REFRESH_GENERATION.to_string(), generation.to_string())
                .map_err(|e| delta_err(&self.location, e.into()))?;
        }
        let mut actions = vec![Action::Metadata(metadata)];
        if full {
            actions.extend(
                snapshot
                    .log_data()
                    .into_iter()
                    .map(|f| Action::Remove(f.remove_action(true))),
            );
        }
        let info = serde_json::json!({
            "reset": { "generation": generation, "full": full, "keepSchema": keep_schema }
        });
        let props = CommitProperties::default()
            .with_metadata(HashMap::from([("autoloader".to_string(), info)]));
        let operation = if full {
            DeltaOperation::Delete { predicate: None }
        } else {
            DeltaOperation::SetTableProperties {
                properties: HashMap::from([(RESET_GENERATION.to_string(), generation.to_string())]),
            }
        };
        let finalized = CommitBuilder::from(cleanup_only_at_checkpoints(props, snapshot))
            .with_actions(actions)
            .build(Some(snapshot), self.table.log_store(), operation)
            .await
            .map_err(|e| delta_err(&self.location, e))?;
        self.table.state = Some(finalized.snapshot());
        Ok(generation)
    }

    /// A commit of no files carrying only `info` as its `autoloader` record (a ONCE
    /// flow's rerun record).
    pub async fn commit_record(&mut self, info: serde_json::Value) -> Result<u64, TargetError> {
        let props = CommitProperties::default()
            .with_metadata(HashMap::from([("autoloader".to_string(), info)]));
        self.commit_actions(&[], &props, None)
            .await
            .map_err(|e| delta_err(&self.location, e))
    }

    /// Records that a ONCE flow ran to completion: `txn(app_id, version)` with `info` in
    /// its commit record, in a commit of no files (after its last batch, whose own `txn`
    /// already made the data exactly once).
    pub async fn commit_marker(
        &mut self,
        app_id: &str,
        version: u64,
        info: serde_json::Value,
    ) -> Result<u64, TargetError> {
        let props = CommitProperties::default()
            .with_application_transaction(Transaction::new_with_last_update(
                app_id,
                i64::try_from(version).unwrap_or(i64::MAX),
                Some(chrono::Utc::now().timestamp_millis()),
            ))
            .with_metadata(HashMap::from([("autoloader".to_string(), info)]));
        self.commit_actions(&[], &props, None)
            .await
            .map_err(|e| delta_err(&self.location, e))
    }

    /// The table's properties (`metaData.configuration`), sorted by key.
    pub fn properties(&self) -> Result<std::collections::BTreeMap<String, String>, TargetError> {
        let state = self
            .table
            .snapshot()
            .map_err(|e| delta_err(&self.location, e))?;
        Ok(state
            .metadata()
            .configuration()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    /// How many data files the current version holds.
    pub fn file_count(&self) -> Result<usize, TargetError> {
        let state = self
            .table
            .snapshot()
            .map_err(|e| delta_err(&self.location, e))?;
        Ok(state.log_data().into_iter().count())
    }

    /// Sets `properties` on the table in one commit (`SET TBLPROPERTIES`); returns the new
    /// version, or `None` when the table already had every one of them.
    pub async fn set_properties(
        &mut self,
        properties: &[(String, String)],
    ) -> Result<Option<u64>, TargetError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.set_properties_once(properties).await {
                // Another writer committed meanwhile (two streams of one table applying
                // the same declared properties): read the table again and decide again.
                Err(e) if attempt < COMMIT_ATTEMPTS => {
                    warn!(table = %self.location, attempt, error = %e, "Setting table properties conflicted; trying again.");
                    self.refresh().await?;
                }
                other => return other,
            }
        }
    }

    async fn set_properties_once(
        &mut self,
        properties: &[(String, String)],
    ) -> Result<Option<u64>, TargetError> {
        let current = self.properties()?;
        let changed: Vec<&(String, String)> = properties
            .iter()
            .filter(|(k, v)| current.get(k) != Some(v))
            .collect();
        if changed.is_empty() {
            return Ok(None);
        }
        let mut metadata = self
            .table
            .snapshot()
            .map_err(|e| delta_err(&self.location, e))?
            .metadata()
            .clone();
        for (k, v) in &changed {
            metadata = metadata
                .add_config_key(k.clone(), v.clone())
                .map_err(|e| delta_err(&self.location, e.into()))?;
        }
        let snapshot = self
            .table
            .snapshot()
            .map_err(|e| delta_err(&self.location, e))?;
        let operation = DeltaOperation::SetTableProperties {
            properties: changed.into_iter().cloned().collect(),
        };
        let props = cleanup_only_at_checkpoints(CommitProperties::default(), snapshot);
        let finalized = CommitBuilder::from(props)
            .with_actions(vec![Action::Metadata(metadata)])
            .build(Some(snapshot), self.table.log_store(), operation)
            .await
            .map_err(|e| delta_err(&self.location, e))?;
        self.table.state = Some(finalized.snapshot());
        Ok(Some(finalized.version()))
    }

    /// The table's current Arrow schema.
    pub fn arrow_schema(&self) -> Result<SchemaRef, TargetError> {
        use deltalake::kernel::engine::arrow_conversion::TryIntoArrow;
        let state = self
            .table
            .snapshot()
            .map_err(|e| delta_err(&self.location, e))?;
        let schema = state.schema();
        let arrow: arrow_schema::Schema =
            schema
                .as_ref()
                .try_into_arrow()
                .map_err(|e| TargetError::Incompatible {
                    location: self.location.clone(),
                    reason: e.to_string(),
                })?;
        Ok(std::sync::Arc::new(arrow))
    }

    /// A writer for one batch. New columns in the batches widen the table schema. A table
    /// not created yet (its first schema is being settled while the first batch is read)
    /// gets a writer for `schema` and `partition_columns`; it is created before the commit.
    pub fn writer(
        &self,
        schema: &SchemaRef,
        partition_columns: &[String],
        keep_last: &[String],
    ) -> Result<BatchWriter, TargetError> {
        self.writer_with(
            schema,
            partition_columns,
            keep_last,
            writer_properties(schema),
        )
    }

    /// A writer for the files a merge rewrites at every batch (the CDC target and its
    /// state): see [`rewrite_writer_properties`].
    pub fn rewrite_writer(&self, schema: &SchemaRef) -> Result<BatchWriter, TargetError> {
        self.writer_with(schema, &[], &[], rewrite_writer_properties(schema))
    }

    fn writer_with(
        &self,
        schema: &SchemaRef,
        partition_columns: &[String],
        keep_last: &[String],
        props: WriterProperties,
    ) -> Result<BatchWriter, TargetError> {
        let writer = if self.exists() {
            RecordBatchWriter::for_table(&self.table)
        } else {
            RecordBatchWriter::try_new(
                self.table.table_url().as_str(),
                schema.clone(),
                Some(partition_columns.to_vec()),
                None,
            )
        }
        .map_err(|e| delta_err(&self.location, e))?
        .with_writer_properties(props)
        .with_target_file_size(TARGET_FILE_BYTES);
        Ok(BatchWriter::Files(Box::new(FileWriter {
            base_schema: writer.arrow_schema(),
            writer,
            keep_last: keep_last.to_vec(),
            location: self.location.clone(),
        })))
    }

    /// Commits what `writers` hold as batch `batch` of `app_id`, in one commit, exactly
    /// once.
    ///
    /// Every writer's files are finished first: if that fails (a full disk), nothing is
    /// committed, so an empty commit can never land under this batch's txn. When the log
    /// commit reports an error, the table is re-read: if it already holds
    /// `txn(app_id) >= batch`, that earlier success is returned instead of committing
    /// again; otherwise the same actions are committed again. Returns the table version.
    pub async fn commit(
        &mut self,
        writers: BatchWriters,
        app_id: &str,
        batch: u64,
        info: serde_json::Value,
    ) -> Result<u64, TargetError> {
        self.commit_with(writers, Vec::new(), None, app_id, batch, info)
            .await
    }

    /// [`DeltaAppend::commit`] with `extra` actions (the removes of rewritten files) and
    /// another operation than an append (a MERGE).
    pub async fn commit_with(
        &mut self,
        writers: BatchWriters,
        extra: Vec<Action>,
        operation: Option<DeltaOperation>,
        app_id: &str,
        batch: u64,
        info: serde_json::Value,
    ) -> Result<u64, TargetError> {
        let mut actions: Vec<Action> = extra;
        let mut widened: Option<(SchemaRef, Vec<String>)> = None;
        for w in writers.0 {
            let BatchWriter::Files(mut w) = w else {
                continue;
            };
            let adds = w
                .writer
                .flush()
                .await
                .map_err(|e| delta_err(&self.location, e))?;
            actions.extend(adds.into_iter().map(Action::Add));
            let schema = w.writer.arrow_schema();
            if schema != w.base_schema {
                // Every writer saw batches of the same layout, so all widened alike.
                widened = Some((schema, w.keep_last));
            }
        }
        let batch_version = i64::try_from(batch).unwrap_or(i64::MAX);
        let props = CommitProperties::default()
            .with_application_transaction(Transaction::new_with_last_update(
                app_id,
                batch_version,
                Some(chrono::Utc::now().timestamp_millis()),
            ))
            .with_metadata(HashMap::from([("autoloader".to_string(), info)]));
        // A rewrite (a MERGE's removes) commits only on the snapshot it checked: delta-rs'
        // conflict check passes over another writer's `dataChange=false` removes, so a
        // compaction of the same files meanwhile would otherwise leave their rows twice.
        let rewrites = actions.iter().any(|a| matches!(a, Action::Remove(_)));
        let props = if rewrites {
            props.with_max_retries(0)
        } else {
            props
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            if rewrites {
                self.check_removes_active(&actions)?;
            }
            crate::testing::failpoint::hit("before-delta-commit");
            // The new schema is made against the table as it is at this attempt, so a
            // column another writer added meanwhile is kept, not overwritten.
            let mut attempt_actions = actions.clone();
            if let Some((schema, keep_last)) = &widened
                && let Some(metadata) = self.widened_metadata(schema, keep_last)?
            {
                attempt_actions.push(Action::Metadata(metadata));
            }
            let mut result = self
                .commit_actions(&attempt_actions, &props, operation.clone())
                .await;
            crate::testing::failpoint::hit("after-delta-commit");
            // Commit ambiguity, injected: the commit landed but the caller hears an error.
            if result.is_ok() && crate::testing::failpoint::fails("commit-reports-error") {
                result = Err(DeltaTableError::Generic(
                    "injected: commit reported an error".into(),
                ));
            }
            match result {
                Ok(version) => {
                    self.own_txn = Some(OwnTxn {
                        version,
                        app_id: app_id.to_string(),
                        batch: batch_version,
                    });
                    return Ok(version);
                }
                Err(e) => {
                    warn!(table = %self.location, batch, attempt, error = %e, "Delta commit reported an error; checking whether it landed.");
                    self.refresh().await?;
                    if self
                        .committed_batch(app_id)
                        .await?
                        .is_some_and(|v| v >= batch_version)
                    {
                        let version = self.table.version().unwrap_or_default();
                        info!(table = %self.location, batch, version, "The batch had landed; not committing it again.");
                        return Ok(version);
                    }
                    if attempt >= COMMIT_ATTEMPTS {
                        return Err(delta_err(&self.location, e));
                    }
                    tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
                }
            }
        }
    }

    /// The table's metadata with the columns of `written` it lacks added, before the
    /// `keep_last` columns (which stay last, in their order); `None` when nothing is new.
    fn widened_metadata(
        &self,
        written: &SchemaRef,
        keep_last: &[String],
    ) -> Result<Option<deltalake::kernel::Metadata>, TargetError> {
        let table = self.arrow_schema()?;
        let Some(columns) = widened_columns(&table, written, keep_last) else {
            return Ok(None);
        };
        let structure = arrow_schema::Schema::new(columns)
            .try_into_kernel_struct()
            .map_err(|reason| TargetError::Incompatible {
                location: self.location.clone(),
                reason,
            })?;
        let metadata = self
            .table
            .snapshot()
            .map_err(|e| delta_err(&self.location, e))?
            .metadata()
            .clone()
            .with_schema(&structure)
            .map_err(|e| delta_err(&self.location, e.into()))?;
        Ok(Some(metadata))
    }

    /// One append commit of `actions` (what delta-rs' `flush_and_commit` does, for the
    /// files of several writers at once).
    /// Every file `actions` removes is still in the table as last read: else another
    /// writer replaced it (a compaction) after the batch read it, and nothing is committed.
    fn check_removes_active(&self, actions: &[Action]) -> Result<(), TargetError> {
        let name = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
        let snapshot = self
            .table
            .snapshot()
            .map_err(|e| delta_err(&self.location, e))?;
        let active: std::collections::HashSet<String> = snapshot
            .log_data()
            .into_iter()
            .map(|f| name(&f.path()))
            .collect();
        for a in actions {
            if let Action::Remove(r) = a
                && !active.contains(&name(&r.path))
            {
                return Err(TargetError::Incompatible {
                    location: self.location.clone(),
                    reason: format!(
                        "file {} that this batch rewrites was replaced by another writer (an \
                         optimize?) after the batch read it; nothing of the batch was \
                         committed: run again, and the batch applies to the table as it is",
                        r.path
                    ),
                });
            }
        }
        Ok(())
    }

    async fn commit_actions(
        &mut self,
        actions: &[Action],
        props: &CommitProperties,
        operation: Option<DeltaOperation>,
    ) -> Result<u64, DeltaTableError> {
        let snapshot = self.table.snapshot()?;
        let partition_columns: Vec<String> = snapshot.metadata().partition_columns().to_vec();
        let operation = operation.unwrap_or(DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: (!partition_columns.is_empty()).then_some(partition_columns),
            predicate: None,
        });
        let finalized = CommitBuilder::from(cleanup_only_at_checkpoints(props.clone(), snapshot))
            .with_actions(actions.to_vec())
            .build(Some(snapshot), self.table.log_store(), operation)
            .await?;
        self.table.state = Some(finalized.snapshot());
        Ok(finalized.version())
    }
}

/// `props` with delta-rs' expired-log cleanup kept only for a commit that writes a Delta
/// checkpoint. delta-rs runs the cleanup after every commit, and the cleanup lists all of
/// `_delta_log`, so each commit cost time in the number of versions: a watcher at 3,000
/// versions made 9,000 stat calls a batch for it (about 70 without it). Spark cleans up
/// when it writes a checkpoint, and so do we: on those commits the
/// table's `delta.enableExpiredLogCleanup` decides, as before; logs expire by days
/// (`delta.logRetentionDuration`), so nothing is kept longer than one checkpoint interval.
pub(crate) fn cleanup_only_at_checkpoints(
    props: CommitProperties,
    snapshot: &deltalake::table::state::DeltaTableState,
) -> CommitProperties {
    use deltalake::table::config::TablePropertiesExt;
    let interval = snapshot.table_config().checkpoint_interval().get();
    let next = snapshot.version() + 1;
    if (next + 1).is_multiple_of(interval) {
        props
    } else {
        props.with_cleanup_expired_logs(Some(false))
    }
}

/// How every Parquet file of a table is written (ingest and `optimize` alike): zstd, row
/// groups closed by rows or bytes, a small dictionary page limit, integers past their
/// dictionary delta-encoded (see [`integers_delta_encoded`]).
pub(crate) fn writer_properties(schema: &SchemaRef) -> WriterProperties {
    let zstd = Compression::ZSTD(ZstdLevel::try_new(1).expect("level 1 is valid"));
    integers_delta_encoded(writer_properties_builder(zstd), schema, true).build()
}

/// How a merge writes the files it rewrites at every batch: snappy, faster both ways than
/// zstd (what delta-rs and Spark write by default; every Parquet reader reads both), and
/// integer columns delta-encoded with no dictionary: a rewrite writes every row of the
/// files it touches again, and keys, amounts and sequence numbers seldom repeat, so
/// interning them into a dictionary that overflows, then snappy over plain 8-byte values,
/// was most of the integer columns' cost. Measured on the CDC bench (30 batches of
/// 10,000 changes into 1 M rows): 20% less CPU a batch, and the table half the size.
/// Earlier measures there: snappy 14% less CPU than zstd level 1; turning every
/// column's dictionary off cost more than it saved, and statistics per column chunk only
/// (no page index) saved nothing measurable, so readers keep the page index.
fn rewrite_writer_properties(schema: &SchemaRef) -> WriterProperties {
    integers_delta_encoded(
        writer_properties_builder(Compression::SNAPPY),
        schema,
        false,
    )
    .build()
}

/// `props` with the integer, date and timestamp columns (at the top level and inside
/// structs) encoded DELTA_BINARY_PACKED where they are not dictionary-encoded, with
/// their dictionary on or off. Increasing ids and times take a bit or a byte a value
/// that way, where plain takes 8 (bulk tables 6% smaller). Every Parquet reader of Delta
/// tables reads it (Spark's vectorized reader since 3.3, parquet-mr, DuckDB, arrow-rs).
fn integers_delta_encoded(
    mut props: WriterPropertiesBuilder,
    schema: &SchemaRef,
    dictionary: bool,
) -> WriterPropertiesBuilder {
    use deltalake::parquet::basic::Encoding;
    for path in integer_columns(schema) {
        props = props
            .set_column_dictionary_enabled(path.clone(), dictionary)
            .set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
    }
    props
}

/// The Parquet paths of the columns stored as 32- or 64-bit integers (integers, dates,
/// timestamps), at the top level and inside structs (not inside lists or maps, whose
/// paths depend on how each writer names their levels).
fn integer_columns(schema: &SchemaRef) -> Vec<deltalake::parquet::schema::types::ColumnPath> {
    use arrow_schema::DataType as A;
    use deltalake::parquet::schema::types::ColumnPath;
    fn leaves(fields: &arrow_schema::Fields, prefix: &mut Vec<String>, out: &mut Vec<ColumnPath>) {
        for f in fields {
            prefix.push(f.name().clone());
            match f.data_type() {
                A::Int8 | A::Int16 | A::Int32 | A::Int64 | A::Date32 | A::Timestamp(_, _) => {
                    out.push(ColumnPath::new(prefix.clone()))
                }
                A::Struct(children) => leaves(children, prefix, out),
                _ => {}
            }
            prefix.pop();
        }
    }
    let mut paths = Vec::new();
    leaves(schema.fields(), &mut Vec::new(), &mut paths);
    paths
}

fn writer_properties_builder(compression: Compression) -> WriterPropertiesBuilder {
    WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(Some(128 * 1024))
        .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
        .set_dictionary_page_size_limit(DICT_LIMIT)
}

/// The table property counting resets (full or checkpoints-only).
pub const RESET_GENERATION: &str = "autoloader.resetGeneration";
/// The table property holding the generation of the last full refresh.
pub const REFRESH_GENERATION: &str = "autoloader.refreshGeneration";

/// The generation rule: only commits made since the last reset count as progress, so a
/// rebuilt checkpoint never resurrects what a reset cleared.
fn since_last_reset(commits: Vec<(u64, serde_json::Value)>) -> Vec<(u64, serde_json::Value)> {
    match commits.iter().rposition(|(_, c)| c.get("reset").is_some()) {
        Some(at) => commits.into_iter().skip(at + 1).collect(),
        None => commits,
    }
}

/// Takes one stream batch's rows: into Parquet files committed by [`DeltaAppend::commit`],
/// or, for a target that must see the whole batch before it writes (CDC), into memory.
pub enum BatchWriter {
    Files(Box<FileWriter>),
    /// The decoded rows, held for the target's commit (a batch is bounded by the
    /// trigger limits), each with where its rows came from when the reader said.
    Collect(Vec<(RecordBatch, Option<RowsOrigin>)>),
}

/// Writes Parquet files for the table.
pub struct FileWriter {
    writer: RecordBatchWriter,
    /// The table's schema when the writer was made: a different schema at commit time
    /// means the batches widened it, and the commit carries the new metadata.
    base_schema: SchemaRef,
    /// Columns that stay last when the batches add columns.
    keep_last: Vec<String>,
    location: String,
}

impl BatchWriter {
    /// Encodes a batch into the writer's current file (a new file past the target size),
    /// or keeps it.
    pub async fn write(&mut self, batch: RecordBatch) -> Result<(), TargetError> {
        self.write_from(batch, None).await
    }

    /// [`BatchWriter::write`] of rows read from a file: a collecting writer keeps `origin`
    /// for errors that name a row's file and record.
    pub async fn write_from(
        &mut self,
        batch: RecordBatch,
        origin: Option<RowsOrigin>,
    ) -> Result<(), TargetError> {
        match self {
            BatchWriter::Files(w) => w
                .writer
                .write_with_mode(batch, WriteMode::MergeSchema)
                .await
                .map_err(|e| delta_err(&w.location, e)),
            BatchWriter::Collect(rows) => {
                rows.push((batch, origin));
                Ok(())
            }
        }
    }
}

impl BatchWriter {
    /// Finishes the writer's files, for a commit that adds them itself (none for a
    /// collecting writer).
    pub async fn finish(self) -> Result<Vec<deltalake::kernel::Add>, TargetError> {
        match self {
            BatchWriter::Files(mut w) => w
                .writer
                .flush()
                .await
                .map_err(|e| delta_err(&w.location, e)),
            BatchWriter::Collect(_) => Ok(Vec::new()),
        }
    }
}

/// The writers of one stream batch (one, or one per decoding thread when the batch is
/// large enough that encoding in parallel pays), committed together.
pub struct BatchWriters(pub Vec<BatchWriter>);

impl From<BatchWriter> for BatchWriters {
    fn from(w: BatchWriter) -> BatchWriters {
        BatchWriters(vec![w])
    }
}

impl BatchWriters {
    /// Discards what was written (files left unreferenced until a VACUUM).
    pub fn abort(self) {
        for w in self.0 {
            if let BatchWriter::Files(mut w) = w {
                w.writer.reset();
            }
        }
    }

    /// The rows collected by `Collect` writers, in order, and where each batch's rows
    /// came from.
    pub fn collected(self) -> (Vec<RecordBatch>, Vec<Option<RowsOrigin>>) {
        self.0
            .into_iter()
            .flat_map(|w| match w {
                BatchWriter::Collect(rows) => rows,
                BatchWriter::Files(_) => Vec::new(),
            })
            .unzip()
    }
}

/// The table's columns widened by `written` (the writer's merged schema), or `None` when
/// nothing changed. The table's own columns keep their order (a struct `written` widened
/// takes its widened type), the new ones follow, and the `keep_last` columns (rescued
/// data, partitions, `_metadata`) go after all of them.
fn widened_columns(
    table: &arrow_schema::Schema,
    written: &arrow_schema::Schema,
    keep_last: &[String],
) -> Option<Vec<arrow_schema::FieldRef>> {
    use arrow_schema::FieldRef;
    let own: Vec<FieldRef> = table
        .fields()
        .iter()
        .map(|f| {
            written
                .field_with_name(f.name())
                .map_or_else(|_| f.clone(), |w| std::sync::Arc::new(w.clone()))
        })
        .collect();
    let new: Vec<FieldRef> = written
        .fields()
        .iter()
        .filter(|f| table.field_with_name(f.name()).is_err())
        .cloned()
        .collect();
    if new.is_empty() && own.iter().zip(table.fields()).all(|(a, b)| a == b) {
        return None;
    }
    let last = |f: &FieldRef| keep_last.iter().any(|k| k == f.name());
    let all: Vec<FieldRef> = own.into_iter().chain(new).collect();
    let mut out: Vec<FieldRef> = all.iter().filter(|f| !last(f)).cloned().collect();
    for name in keep_last {
        out.extend(all.iter().filter(|f| f.name() == name).cloned());
    }
    Some(out)
}

trait IntoKernelStruct {
    fn try_into_kernel_struct(&self) -> Result<StructType, String>;
}

impl IntoKernelStruct for arrow_schema::Schema {
    fn try_into_kernel_struct(&self) -> Result<StructType, String> {
        use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
        TryIntoKernel::<StructType>::try_into_kernel(self).map_err(|e| e.to_string())
    }
}

/// Loads the table only when its log holds a commit. Loading a location without one (no
/// `_delta_log`, or an empty one that a process killed while creating the table left
/// behind) fails inside delta-kernel, which logs "No files in log segment" as an ERROR
/// even though a table not created yet is expected: autoloader creates it.
async fn load_if_any(table: &mut DeltaTable, location: &str) -> Result<(), TargetError> {
    let exists = table
        .verify_deltatable_existence()
        .await
        .map_err(|e| delta_err(location, e))?;
    if exists {
        match table.load().await {
            // Its last commit was removed between the two calls: still not a table.
            Ok(()) | Err(DeltaTableError::NotATable(_)) => {}
            Err(e) => return Err(delta_err(location, e)),
        }
    }
    Ok(())
}

fn delta_err(location: &str, e: DeltaTableError) -> TargetError {
    TargetError::Delta {
        location: location.to_string(),
        source: Box::new(e),
    }
}
