//! The allocator's side of "memory stays flat": glibc gives each thread that allocates
//! under contention its own arena and rarely hands freed pages back, so a long-running
//! watcher's RSS drifted upwards batch after batch (about 60 KB per batch, measured with
//! `bench/latency.py`) although nothing was retained. Fewer arenas and returning free pages
//! when the watcher goes idle, and every 10 s while it stays busy, keep it flat.

use std::time::{Duration, Instant};

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

/// For a `--once` run: freed memory is kept for the next batch rather than handed back.
/// glibc gives each buffer past its mmap threshold (128 KiB at first, raised as large
/// buffers are freed) a mapping of its own and trims the heap top past twice that, so a
/// batch's builders, Parquet pages and key vectors were fresh pages again and again: page
/// faults were 13.5% of a CDC first load's CPU samples. Buffers below 32 MiB (glibc's most)
/// now come from the heap, and up to 32 MiB of free heap top is kept (more kept the freed
/// halves of a growing 100 MB line in RSS beside it: 165 MiB where 128 is the bound).
/// CDC first load, three interleaved runs: sys 0.47-0.59 s -> 0.32-0.44 s, peak RSS about
/// 15 MiB more. A watcher uses [`prefer_returning_memory`] instead.
pub fn prefer_reusing_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 * 1024 * 1024);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 32 * 1024 * 1024);
    }
}

/// Returns freed heap pages to the OS: by [`Trimmer`], never on the hot path.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory the allocator already considers free.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// What the allocator holds, for telling a leak (`in_use` grows) from fragmentation
/// (`free_held` grows) in a long-running watcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapUsage {
    /// Bytes in live allocations, heap and mmapped alike.
    pub in_use: usize,
    /// Freed bytes the allocator keeps in its heaps instead of returning them.
    pub free_held: usize,
    /// Bytes in allocations served by their own mappings (128 KiB or more in a watcher).
    pub mapped: usize,
}

/// The allocator's totals over all arenas (glibc's `mallinfo2`); `None` on other C
/// libraries.
pub fn heap_usage() -> Option<HeapUsage> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's counters.
        let info = unsafe { libc::mallinfo2() };
        Some(HeapUsage {
            in_use: info.uordblks + info.hblkhd,
            free_held: info.fordblks,
            mapped: info.hblkhd,
        })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// When a watcher hands freed memory back: when it goes idle after ingesting, and at
/// least every [`BUSY_TRIM_EVERY`] while files keep coming (a watcher that always finds
/// the next file ready never goes idle: trimmed only then, its RSS crept over thousands
/// of one-file batches). Logs [`heap_usage`] at debug level
/// (`RUST_LOG=autoloader::memory=debug`) at most once a minute.
#[derive(Debug)]
pub struct Trimmer {
    trimmed: Instant,
    /// A batch ran since the last trim.
    ingested: bool,
    reported: Option<Instant>,
}

/// The longest a busy watcher goes without trimming its heap.
const BUSY_TRIM_EVERY: Duration = Duration::from_secs(10);
/// The shortest time between two heap reports.
const REPORT_EVERY: Duration = Duration::from_secs(60);

impl Trimmer {
    pub fn new() -> Self {
        Trimmer {
            trimmed: Instant::now(),
            ingested: false,
            reported: None,
        }
    }

    /// After a batch: trims if the last trim is [`BUSY_TRIM_EVERY`] old.
    pub fn after_batch(&mut self) {
        self.ingested = true;
        if self.trimmed.elapsed() >= BUSY_TRIM_EVERY {
            self.trim();
        }
    }

    /// When the watcher goes idle: trims if a batch ran since the last trim.
    pub fn on_idle(&mut self) {
        if self.ingested {
            self.trim();
        }
    }

    fn trim(&mut self) {
        release_free_memory();
        self.trimmed = Instant::now();
        self.ingested = false;
        if self.reported.is_some_and(|at| at.elapsed() < REPORT_EVERY) {
            return;
        }
        self.reported = Some(Instant::now());
        if let Some(heap) = heap_usage() {
            tracing::debug!(
                in_use = heap.in_use,
                free_held = heap.free_held,
                mapped = heap.mapped,
                "Heap after trimming."
            );
        }
    }
}

impl Default for Trimmer {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn heap_usage_counts_a_mapped_allocation_as_in_use() {
        // Other tests allocate beside this one: only what this block must add is checked.
        prefer_returning_memory();
        let block = vec![1u8; 8 << 20];
        let during = heap_usage().unwrap();
        assert!(during.mapped >= 8 << 20, "{during:?}");
        assert!(during.in_use >= during.mapped, "{during:?}");
        std::hint::black_box(&block);
    }
}
