//! The schema a stream reads batches with: the current `_schemas/N` and the table layout it
//! gives (data columns, then rescued data, partition columns and `_metadata`).

use crate::pipeline::{IngestRequest, Instant};
use crate::source::FileRef;
use std::sync::Arc;

use tracing::info;

use crate::options::Settings;
use crate::record::{METADATA_COLUMN, TableLayout};
use crate::schema::infer::SchemaInferrer;
use crate::schema::store::SchemaVersion;

/// The schema version batches are read with, and its table layout.
pub(crate) struct ActiveSchema {
    pub(crate) version: SchemaVersion,
    pub(crate) layout: Arc<TableLayout>,
    /// Set while `version` is a provisional first version, not yet written.
    pub(crate) one_pass: Option<OnePassInference>,
}

impl ActiveSchema {
    pub(crate) fn new(version: SchemaVersion, req: &IngestRequest) -> Self {
        let layout = Arc::new(layout_for(&version, req));
        ActiveSchema {
            version,
            layout,
            one_pass: None,
        }
    }
}

/// Columns that stay last in the data schema (rescued data, corrupt record).
pub(crate) fn trailing_columns(settings: &Settings) -> Vec<&str> {
    [
        &settings.rescued_data_column,
        &settings.corrupt_record_column,
    ]
    .into_iter()
    .flatten()
    .map(String::as_str)
    .collect()
}

/// The table layout of a schema version.
pub(crate) fn layout_for(version: &SchemaVersion, req: &IngestRequest) -> TableLayout {
    let settings = &req.settings;
    let include_metadata =
        settings.include_metadata && version.data.field(METADATA_COLUMN).is_none();
    if settings.include_metadata && !include_metadata {
        // Documented, and what a Delta source's rows (their landing file's lineage) need.
        info!("The data has its own _metadata column; it wins over the lineage column.");
    }
    TableLayout {
        data: version.data.clone(),
        partition: version.partition.clone(),
        rescued: settings
            .rescued_data_column
            .clone()
            .filter(|c| version.data.field(c).is_some()),
        corrupt: settings
            .corrupt_record_column
            .clone()
            .filter(|c| version.data.field(c).is_some()),
        include_metadata,
        stamps: req.snapshot.as_ref().map(|s| crate::record::StampColumns {
            ingested_at: s.ingest_time_column.clone(),
            snapshot_id: s.snapshot_id_column.clone(),
        }),
    }
}

/// A first schema version inferred from the sample's first files only, to be confirmed
/// or corrected by the types the first batch observes while it is read.
///
/// Auto Loader infers from the whole sample (up to 1,000 files / 50 GB) before it reads
/// a row, so a first run reads its data twice. Here the first batch is read with the
/// provisional schema while every record's types are observed, exactly as inference
/// would; then the schema is settled from the whole sample (files outside the batch, or
/// not read to the end, are inferred on their own), merged in sample order, and written
/// as `_schemas/0`. The same schema as inferring first, so: if it matches the provisional
/// one the batch is committed as read, otherwise the batch is read again with it.
pub(crate) struct OnePassInference {
    pub(crate) sample: Vec<FileRef>,
    pub(crate) started: Instant,
    /// What inferring each of the sample's first files gave (by file key; `None` for a
    /// file skipped), so settling does not read them again: a first batch of one file
    /// (CDC, `maxFilesPerTrigger=1`) inferred its 4 first files twice.
    pub(crate) prefix: std::collections::HashMap<String, Option<SchemaInferrer>>,
    /// The sample's files outside the prefix and the first batch, inferred beside the
    /// batch's read (a first batch of one file read on one core while both infer).
    pub(crate) beside: Option<crate::pipeline::schema::infer::InferenceStarted>,
}
