//! Schema inference over a set of files on every core; per-file results merge in the
//! files' order.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tracing::warn;

use crate::formats::{self, DecodeError, DecodeOptions};
use crate::options::Settings;
use crate::schema::infer::SchemaInferrer;
use crate::source::FileRef;

use super::read::*;
use super::*;

/// Infers over the sample on all cores; per-file results merge in sample order.
pub(crate) fn infer_parallel(
    req: &IngestRequest,
    opts: &DecodeOptions,
    sample: &[FileRef],
) -> Result<SchemaInferrer, IngestError> {
    let mut merged = SchemaInferrer::new();
    for inferrer in infer_files(req, opts, sample)?.into_iter().flatten() {
        merged.merge(inferrer);
    }
    Ok(merged)
}

/// Infers each file on all cores: one result per file, `None` for a file skipped under
/// `ignoreCorruptFiles` / `ignoreMissingFiles`.
pub(crate) fn infer_files(
    req: &IngestRequest,
    opts: &DecodeOptions,
    files: &[FileRef],
) -> Result<Vec<Option<SchemaInferrer>>, IngestError> {
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(files.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<SchemaInferrer, DecodeError>>>> =
        Mutex::new((0..files.len()).map(|_| None).collect());
    let typed = req.settings.infer_column_types;
    let handle = tokio::runtime::Handle::try_current().ok();
    // These threads may fetch objects on the runtime: let it move its other work off the
    // worker that waits here.
    let in_place = |f: &mut dyn FnMut()| match &handle {
        Some(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f);
        }
        _ => f(),
    };
    in_place(&mut || {
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    // Object-store sources fetch on this runtime from these plain threads.
                    let _runtime = handle.as_ref().map(tokio::runtime::Handle::enter);
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        let Some(f) = files.get(i) else { break };
                        let file = source_file(&req.source, &f.key, f.size, f.mtime_ms, &[]);
                        let mut inferrer = SchemaInferrer::new();
                        let r =
                            formats::infer_file(&file, opts, typed, &mut inferrer).map(|records| {
                                inferrer.records = records;
                                inferrer
                            });
                        results
                            .lock()
                            .expect("no worker panics while holding the lock")[i] = Some(r);
                    }
                });
            }
        })
    });
    let mut out = Vec::with_capacity(files.len());
    for r in results.into_inner().expect("workers are done") {
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

pub(crate) fn skippable(e: &DecodeError, settings: &Settings) -> bool {
    (settings.ignore_corrupt_files && e.is_corrupt_file())
        || (settings.ignore_missing_files && matches!(e, DecodeError::Missing { .. }))
}
