//! Planning: splitting new files into batches, the files a plan records, and whether an
//! unfinished plan can still be replayed exactly.

use tracing::warn;

use crate::checkpoint::{CheckpointError, Plan, SeenFiles};
use crate::formats::{self};
use crate::options::Settings;
use crate::source::{FileLocation, FileRef};

use super::*;

/// The first local file of a plan whose size or modification time differs from the plan
/// (a vanished file is left to `ignoreMissingFiles`).
pub(crate) fn changed_since_planned(req: &IngestRequest, plan: &Plan) -> Option<String> {
    plan.files.iter().find_map(|f| {
        let FileLocation::Local(path) = req.source.locate(&f.key) else {
            return None;
        };
        if !path.exists() {
            return None;
        }
        (!formats::unchanged(&path, f.size, f.mtime_ms)).then(|| req.source.uri(&f.key))
    })
}

pub(crate) fn as_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub(crate) fn split_batches<'a>(
    files: &'a [FileRef],
    settings: &Settings,
    suspects: &std::collections::HashSet<String>,
) -> Vec<&'a [FileRef]> {
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

/// Files not yet ingested. A file ingested before whose size or mtime changed is reported
/// and skipped (Auto Loader's default), or taken again with `cloudFiles.allowOverwrites`.
pub(crate) fn new_files(
    listed: Vec<FileRef>,
    seen: &SeenFiles,
    settings: &Settings,
) -> Result<(Vec<FileRef>, Vec<FileRef>), CheckpointError> {
    let mut out = Vec::new();
    let mut overwritten = Vec::new();
    for f in listed {
        match seen.get(&f.key)?.map(|s| s.file) {
            None => out.push(f),
            Some(s) if s.size == f.size && s.mtime_ms == f.mtime_ms => {}
            Some(s) => {
                if settings.allow_overwrites {
                    out.push(f);
                } else {
                    warn!(
                        file = %f.key, old_size = s.size, new_size = f.size,
                        "File changed after it was ingested; not ingesting it again (set cloudFiles.allowOverwrites=true to re-ingest)."
                    );
                    overwritten.push(f);
                }
            }
        }
    }
    Ok((out, overwritten))
}
