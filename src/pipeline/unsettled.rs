//! `--once` over a folder a writer may still be writing into: a local file still open for
//! writing is left for the next run, as a watcher waits for a file to settle. Taking it
//! would land the rows written so far and never the rest (the file is ingested; its later
//! growth is only warned about). Where that cannot be told (a file system without leases,
//! such as NFS, or a file of another owner), a file modified within `cloudFiles.settleTime`
//! is left instead. Objects of an object store and a Delta table's files are complete once
//! listed.

use std::path::Path;

use crate::source::{FileLocation, FileRef, map_on_cores};

use super::IngestRequest;

/// The files ready to ingest, and those left for the next run.
pub(crate) fn split(
    req: &IngestRequest,
    files: Vec<FileRef>,
    now_ms: i64,
) -> (Vec<FileRef>, Vec<FileRef>) {
    // A snapshot unit is taken whole once settled (`snapshots.rs`); objects are complete.
    if req.source.complete_when_listed() || req.snapshot.is_some() {
        return (files, Vec::new());
    }
    let settle = i64::try_from(req.settings.settle_time.as_millis()).unwrap_or(i64::MAX);
    // Each check is three system calls (open, lease, close): made on every core.
    let settled = map_on_cores(&files, |f| {
        let open = match req.source.locate(&f.key) {
            FileLocation::Local(path) => open_for_writing(&path),
            FileLocation::Object(_) => None,
        };
        match open {
            Some(open) => !open,
            None => {
                // A time far in the future is a skewed clock, not a writer.
                let recent = f.mtime_ms > now_ms.saturating_sub(settle)
                    && f.mtime_ms < now_ms.saturating_add(settle.saturating_mul(20));
                !recent
            }
        }
    });
    let (mut ready, mut left) = (Vec::new(), Vec::new());
    for (file, settled) in files.into_iter().zip(settled) {
        if settled {
            ready.push(file);
        } else {
            left.push(file);
        }
    }
    (ready, left)
}

/// Whether a process holds `path` open for writing: a read lease cannot be taken then
/// (`fcntl(F_SETLEASE)` fails with EAGAIN). `None` when this cannot be told: a lease needs
/// the file's owner (or CAP_LEASE) and a file system that grants leases.
#[cfg(target_os = "linux")]
pub(crate) fn open_for_writing(path: &Path) -> Option<bool> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path).ok()?;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function owns; the lease is released at once.
    let taken = unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_RDLCK) };
    if taken == 0 {
        unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
        return Some(false);
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN) => Some(true),
        _ => None,
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn open_for_writing(_path: &Path) -> Option<bool> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_open_for_writing_is_seen_and_a_closed_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        let mut writer = std::fs::File::create(&path).unwrap();
        writer.write_all(b"{}\n").unwrap();
        assert_eq!(
            open_for_writing(&path),
            Some(true),
            "open by this process for writing"
        );
        drop(writer);
        assert_eq!(open_for_writing(&path), Some(false));
        let reader = std::fs::File::open(&path).unwrap();
        assert_eq!(
            open_for_writing(&path),
            Some(false),
            "a reader does not count"
        );
        drop(reader);
    }
}
