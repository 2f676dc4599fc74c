//! Planning: splitting new files into batches, the files a plan records, and whether an
//! unfinished plan can still be replayed exactly.

use crate::checkpoint::{Plan, PlannedFile};
use crate::formats::{self};
use crate::options::Settings;
use crate::record::rows::FileMeta;
use crate::source::ListedFile;

use super::*;

/// The first local file of a plan whose size or modification time differs from the plan
/// (a vanished file is left to `ignoreMissingFiles`).
pub(crate) fn changed_since_planned(req: &IngestRequest, plan: &Plan) -> Option<String> {
    plan.files.iter().find_map(|f| {
        let (path, remote) = req.source.locate(&f.key);
        if remote.is_some() || !path.exists() {
            return None;
        }
        let meta = FileMeta {
            path: String::new(),
            name: String::new(),
            size: f.size,
            mtime_ms: f.mtime_ms,
            partition_values: Vec::new(),
        };
        (!formats::unchanged(&path, &meta)).then(|| req.source.uri(&f.key))
    })
}

pub(crate) fn as_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub(crate) fn planned(files: &[ListedFile]) -> Vec<PlannedFile> {
    files
        .iter()
        .map(|f| PlannedFile {
            key: f.key.clone(),
            size: f.size,
            mtime_ms: f.mtime_ms,
        })
        .collect()
}

pub(crate) fn split_batches<'a>(
    files: &'a [ListedFile],
    settings: &Settings,
    suspects: &std::collections::HashSet<String>,
) -> Vec<&'a [ListedFile]> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < files.len() {
        // A file suspected of crashing the process goes alone.
        if suspects.contains(&files[start].key) {
            out.push(&files[start..=start]);
            start += 1;
            continue;
        }
        let mut end = start;
        let mut bytes = 0u64;
        while end < files.len()
            && end - start < settings.max_files_per_trigger
            && !suspects.contains(&files[end].key)
        {
            if settings
                .max_bytes_per_trigger
                .is_some_and(|max| bytes >= max)
            {
                break;
            }
            bytes += files[end].size;
            end += 1;
        }
        out.push(&files[start..end]);
        start = end;
    }
    out
}
