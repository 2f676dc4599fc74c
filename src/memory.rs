//! The allocator's side of "memory stays flat": glibc gives each thread that allocates
//! under contention its own arena and rarely hands freed pages back, so a long-running
//! watcher's RSS drifted upwards batch after batch (about 60 KB per batch, measured with
//! `bench/latency.py`) although nothing was retained. Fewer arenas and returning free pages
//! when the watcher goes idle keep it flat.

/// Caps glibc's malloc arenas at two (one per core on the machines we target), for a
/// long-running watcher: each arena keeps its own freed pages. Not for `--once` runs: with
/// decoders, writer and runtime threads sharing two arenas, small-file ingestion spent a
/// fifth of its time in malloc and lock hand-offs (20,000 files: 1.66 s against 1.35 s).
/// No-op on other C libraries.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// For a long-running watcher: every allocation of 128 KiB or more gets its own mapping,
/// returned to the OS when freed, and the heap top is trimmed past 128 KiB. glibc otherwise
/// raises its mmap threshold after large frees and serves later large buffers from the heap,
/// where delta-rs' periodic log replays leave it fragmented. Measured with
/// `bench/latency.py`, 3,000 one-file batches: 89 MiB without, 66 MiB with, level after
/// about 2,300 batches. It costs about 8% of bulk throughput, so `--once` runs keep the
/// defaults.
pub fn prefer_returning_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024);
    }
}

/// Returns freed heap pages to the OS. Cheap enough to call when a watcher goes idle after
/// a batch, never on the hot path.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory the allocator already considers free.
    unsafe {
        libc::malloc_trim(0);
    }
}
