//! The one worker pool that files are decoded and inferred on: one blocking thread per
//! core (never more than there are files), each taking the next file index until none is
//! left or the pool is stopped. Decoders are synchronous; an object-store file is fetched
//! on the runtime from these threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::task::JoinHandle;

/// How many workers `files` files get: one per core, at most one per file.
pub(crate) fn worker_count(files: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(files.max(1))
}

/// A stop shared by the workers of one pool: no worker starts another file once it is set.
#[derive(Clone, Default)]
pub(crate) struct PoolStop(Arc<AtomicBool>);

impl PoolStop {
    pub(crate) fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Runs `work(state, index)` for every index below `files`, on one blocking thread per
/// state in `states`; a worker ends when no index is left, when `stop` is set, or when
/// `work` returns false. Each worker's state comes back through its handle.
pub(crate) fn spawn<S, W>(
    files: usize,
    states: Vec<S>,
    stop: &PoolStop,
    work: W,
) -> Vec<JoinHandle<S>>
where
    S: Send + 'static,
    W: Fn(&mut S, usize) -> bool + Send + Sync + 'static,
{
    let next = Arc::new(AtomicUsize::new(0));
    let work = Arc::new(work);
    states
        .into_iter()
        .map(|mut state| {
            let (next, stop, work) = (Arc::clone(&next), stop.clone(), Arc::clone(&work));
            tokio::task::spawn_blocking(move || {
                while !stop.is_stopped() {
                    let index = next.fetch_add(1, Ordering::SeqCst);
                    if index >= files || !work(&mut state, index) {
                        break;
                    }
                }
                state
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_index_runs_once_and_states_come_back() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = Arc::clone(&seen);
        let handles = spawn(100, vec![0u32, 0u32], &PoolStop::default(), move |n, i| {
            *n += 1;
            s.lock().unwrap().push(i);
            true
        });
        let mut counts = 0;
        for h in handles {
            counts += h.await.unwrap();
        }
        let mut seen = seen.lock().unwrap().clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
        assert_eq!(counts, 100);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stop_ends_every_worker() {
        let stop = PoolStop::default();
        let stopper = stop.clone();
        let handles = spawn(1000, vec![0u32; 2], &stop, move |n, i| {
            *n += 1;
            if i == 10 {
                stopper.stop();
            }
            true
        });
        let mut done = 0;
        for h in handles {
            done += h.await.unwrap();
        }
        assert!(done < 1000, "stopped early: {done} files");
    }
}
