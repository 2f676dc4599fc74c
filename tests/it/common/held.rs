//! A binary spawned in the background whose output is collected as it comes, so a test can
//! wait until it reports a step (a failpoint reached) instead of sleeping and assuming it.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::wait_until;

/// Longest a test waits for a background process to reach a failpoint: far above what a
/// loaded machine needs, so only a process that never gets there fails the test.
pub const REACH_TIMEOUT: Duration = Duration::from_secs(60);

/// A background process with its stdout and stderr read by threads as they are written.
pub struct Held {
    child: Child,
    stdout: JoinHandle<Vec<u8>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_reader: JoinHandle<()>,
}

impl Held {
    /// Spawns `cmd` with both output streams piped.
    pub fn spawn(cmd: &mut Command) -> Held {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the autoloader binary runs");
        let mut out = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut all = Vec::new();
            let _ = out.read_to_end(&mut all);
            all
        });
        let mut err = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&stderr);
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Held {
            child,
            stdout,
            stderr,
            stderr_reader,
        }
    }

    /// The error output so far.
    pub fn stderr_so_far(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Waits until the process logs that it reached failpoint `name` (armed with
    /// `sleep(..)`, it is then held there); fails the test, with the process's error output,
    /// if that takes over [`REACH_TIMEOUT`] or the process ends first.
    pub fn wait_for_failpoint(&mut self, name: &str) {
        let needle = format!("failpoint {name} reached");
        wait_until(
            &format!("the background process to reach failpoint {name}"),
            REACH_TIMEOUT,
            || {
                if self.stderr_so_far().contains(&needle) {
                    return true;
                }
                if let Ok(Some(status)) = self.child.try_wait() {
                    panic!(
                        "the background process ended ({status}) before failpoint {name}: {}",
                        self.stderr_so_far()
                    );
                }
                false
            },
        );
    }

    /// Asserts that the process is still running (still held at its failpoint): the step
    /// a test ran meanwhile really happened during the hold.
    pub fn assert_still_held(&mut self, what: &str) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "the background process was no longer held when {what} finished (the machine \
             was too slow for the failpoint's sleep): {}",
            self.stderr_so_far()
        );
    }

    /// Waits for the process to end and returns all its output.
    pub fn wait_with_output(mut self) -> Output {
        let status: ExitStatus = self.child.wait().unwrap();
        let stdout = self.stdout.join().unwrap();
        self.stderr_reader.join().unwrap();
        let stderr = std::mem::take(&mut *self.stderr.lock().unwrap());
        Output {
            status,
            stdout,
            stderr,
        }
    }
}
