//! The allocator's side of "memory stays flat": glibc gives each thread that allocates
//! under contention its own arena and rarely hands freed pages back, so a long-running
//! watcher's RSS drifted upwards batch after batch (about 60 KB per batch, measured with
//! `bench/latency.py`) although nothing was retained. Fewer arenas and returning free pages
//! when the watcher goes idle keep it flat.

/// Caps glibc's malloc arenas at two (one per core on the machines we target). Called once at
/// start, before any thread exists. No-op on other C libraries.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; called before other threads start.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
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
