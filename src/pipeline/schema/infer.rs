//! Schema inference over a set of files on every core; per-file results merge in the
//! files' order.

use crate::pipeline::read::source_file;
use crate::pipeline::{Arc, IngestError, IngestRequest};
use tracing::warn;

use crate::formats::{self, DecodeError, DecodeOptions};
use crate::options::Settings;
use crate::schema::infer::SchemaInferrer;
use crate::source::FileRef;

use crate::pipeline::pool::{self, PoolStop, worker_count};

/// Infers over the sample on all cores; per-file results merge in sample order.
pub(crate) async fn infer_parallel(
    req: &IngestRequest,
    opts: &DecodeOptions,
    sample: &[FileRef],
) -> Result<SchemaInferrer, IngestError> {
    let per_file = infer_files(req, opts, sample).await?;
    Ok(merged_in_order(per_file.into_iter().flatten()))
}

/// Per-file inference results merged in the order given (the sample's).
pub(crate) fn merged_in_order(
    per_file: impl IntoIterator<Item = SchemaInferrer>,
) -> SchemaInferrer {
    let mut merged = SchemaInferrer::new();
    for inferrer in per_file {
        merged.merge(inferrer);
    }
    merged
}

/// What inferring one file gave.
type Inferred = Result<SchemaInferrer, DecodeError>;

/// Infers each file on the worker pool: one result per file, `None` for a file skipped
/// under `ignoreCorruptFiles` / `ignoreMissingFiles`.
pub(crate) async fn infer_files(
    req: &IngestRequest,
    opts: &DecodeOptions,
    files: &[FileRef],
) -> Result<Vec<Option<SchemaInferrer>>, IngestError> {
    InferenceStarted::start(req, opts, files).finish(req).await
}

/// An inference of files under way on the worker pool (its threads start at once), so
/// it can run beside other work: a first batch's read while the sample's other files are
/// inferred ([`crate::pipeline::schema::OnePassInference`]).
pub(crate) struct InferenceStarted {
    files: Vec<FileRef>,
    handles: Vec<tokio::task::JoinHandle<Vec<(usize, Inferred)>>>,
}

impl InferenceStarted {
    pub(crate) fn start(
        req: &IngestRequest,
        opts: &DecodeOptions,
        files: &[FileRef],
    ) -> InferenceStarted {
        let typed = req.settings.infer_column_types;
        let (source, opts) = (req.source.clone(), opts.clone());
        let shared_files = Arc::new(files.to_vec());
        // Each worker keeps the results of the files it took.
        let workers = (0..worker_count(files.len())).map(|_| Vec::new()).collect();
        let handles = pool::spawn(
            files.len(),
            workers,
            &PoolStop::default(),
            move |done: &mut Vec<(usize, Inferred)>, i| {
                let file = source_file(&source, &shared_files[i], &[], None);
                let mut inferrer = SchemaInferrer::new();
                let r = formats::infer_file(&file, &opts, typed, &mut inferrer).map(|records| {
                    inferrer.records = records;
                    inferrer
                });
                done.push((i, r));
                true
            },
        );
        InferenceStarted {
            files: files.to_vec(),
            handles,
        }
    }

    /// The files this inference reads.
    pub(crate) fn files(&self) -> &[FileRef] {
        &self.files
    }

    /// One result per file, in the files' order (`None` for a file skipped).
    pub(crate) async fn finish(
        self,
        req: &IngestRequest,
    ) -> Result<Vec<Option<SchemaInferrer>>, IngestError> {
        let mut results: Vec<Option<Inferred>> = (0..self.files.len()).map(|_| None).collect();
        for h in self.handles {
            let done = h
                .await
                .map_err(|e| IngestError::Internal(format!("inference thread failed: {e}")))?;
            for (i, r) in done {
                results[i] = Some(r);
            }
        }
        let mut out = Vec::with_capacity(self.files.len());
        for r in results {
            match r {
                Some(Ok(inferrer)) => out.push(Some(inferrer)),
                Some(Err(e)) if skippable(&e, &req.settings) => {
                    warn!(error = %e, "Skipping a file during inference.");
                    out.push(None);
                }
                Some(Err(e)) => return Err(e.into()),
                None => out.push(None),
            }
        }
        Ok(out)
    }
}

pub(crate) fn skippable(e: &DecodeError, settings: &Settings) -> bool {
    (settings.ignore_corrupt_files && e.is_corrupt_file())
        || (settings.ignore_missing_files && matches!(e, DecodeError::Missing { .. }))
}
