//! Planning: splitting new files into batches, the files a plan records, and whether an
//! unfinished plan can still be replayed exactly.

use crate::pipeline::IngestRequest;
use tracing::warn;

use crate::checkpoint::{CheckpointError, Plan, SeenFiles};
use crate::formats;
use crate::options::Settings;
use crate::source::{FileLocation, FileRef};

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

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn settings(options: &[(&str, &str)]) -> Settings {
        crate::options::settings_for_test(options)
    }

    fn files(sizes: &[u64]) -> Vec<FileRef> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, size)| FileRef {
                key: format!("{i}.json"),
                size: *size,
                mtime_ms: i as i64,
            })
            .collect()
    }

    fn keys(batches: &[&[FileRef]]) -> Vec<Vec<String>> {
        batches
            .iter()
            .map(|b| b.iter().map(|f| f.key.clone()).collect())
            .collect()
    }

    #[test]
    fn batches_are_cut_by_file_count_and_bytes() {
        let all = files(&[10, 10, 10, 10, 10]);
        let s = settings(&[("cloudFiles.maxFilesPerTrigger", "2")]);
        let lens: Vec<usize> = split_batches(&all, &s, &HashSet::new())
            .iter()
            .map(|b| b.len())
            .collect();
        assert_eq!(lens, [2, 2, 1]);
        // Bytes: a batch closes once it holds at least the limit (a file is never split,
        // and one larger than the limit still makes a batch of its own).
        let all = files(&[6, 6, 30, 1]);
        let s = settings(&[("cloudFiles.maxBytesPerTrigger", "10b")]);
        let lens: Vec<usize> = split_batches(&all, &s, &HashSet::new())
            .iter()
            .map(|b| b.len())
            .collect();
        assert_eq!(lens, [2, 1, 1]);
        assert!(split_batches(&[], &s, &HashSet::new()).is_empty());
    }

    #[test]
    fn a_suspect_file_goes_alone() {
        let all = files(&[1, 1, 1, 1]);
        let suspects: HashSet<String> = ["1.json".to_string()].into();
        let s = settings(&[]);
        assert_eq!(
            keys(&split_batches(&all, &s, &suspects)),
            [vec!["0.json"], vec!["1.json"], vec!["2.json", "3.json"]]
        );
    }
}
