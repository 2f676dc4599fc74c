//! Crash-safe local file writes: a reader sees the old file or the whole new one, never a
//! torn one (temp file in the same directory, fsync, rename or hard link, fsync directory).

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// Writes `bytes` to `path` atomically, replacing any existing file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = temp_path(path);
    write_synced(&tmp, bytes)?;
    fs::rename(&tmp, path)?;
    sync_parent(path)
}

/// Writes `bytes` to `path` atomically and only if `path` does not exist yet.
/// Returns `Ok(false)` when the file already existed (it is left untouched).
pub fn write_new_atomic(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    let tmp = temp_path(path);
    write_synced(&tmp, bytes)?;
    // A hard link fails if the target exists: create-only without a check-then-act race.
    let linked = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            sync_parent(path)?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

fn temp_path(path: &Path) -> std::path::PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = File::create(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => File::open(dir)?.sync_all(),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_only_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0");
        assert!(write_new_atomic(&p, b"first").unwrap());
        assert!(!write_new_atomic(&p, b"second").unwrap());
        assert_eq!(fs::read(&p).unwrap(), b"first");
        write_atomic(&p, b"third").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"third");
        // No temp files are left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
