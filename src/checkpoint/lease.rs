//! A lease on an S3 checkpoint: the `lock` object names its holder and when the lease runs
//! out. A local `flock` cannot reach another machine, so a second process elsewhere is
//! refused by the lease, and a holder that died stops blocking once its lease expires.
//!
//! The lease makes refusal prompt and the message clear; safety does not rest on it. Plans
//! are create-only puts and every Delta commit carries `txn(appId, batch)`, so even two
//! holders (one stalled past its lease) cannot ingest a file twice.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::checkpoint::CheckpointError;
use crate::clock::now_ms;
use crate::storage::object_dir::RemoteDir;

const LOCK_OBJECT: &str = "lock";

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LockRecord {
    holder: String,
    token: String,
    expires_at_ms: i64,
    /// When the holder took or last renewed the lease (0 in a record from before it was kept).
    #[serde(default)]
    renewed_at_ms: i64,
    #[serde(default)]
    host: String,
    #[serde(default)]
    pid: u32,
}

impl LockRecord {
    /// Held by a live process: unexpired, and not by a process of this host that is gone
    /// (a restart after a crash on the same machine need not wait for the lease to run out).
    fn is_live(&self, our_host: &str) -> bool {
        if self.expires_at_ms <= now_ms() {
            return false;
        }
        if self.host == our_host && self.pid != 0 && self.pid != std::process::id() {
            let pid = libc::pid_t::try_from(self.pid).unwrap_or(0);
            // SAFETY: signal 0 only checks that the process exists.
            let gone = pid > 0
                && unsafe { libc::kill(pid, 0) } != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            return !gone;
        }
        true
    }

    /// The holder and how long its lease still runs, for messages.
    fn describe(&self) -> String {
        format!(
            "{}, lease valid for {} more seconds",
            self.holder,
            (self.expires_at_ms - now_ms() + 999) / 1000
        )
    }
}

/// A held lease, renewed in the background and released when dropped.
pub struct Lease {
    stop: Option<mpsc::Sender<()>>,
    renewer: Option<JoinHandle<()>>,
    dir: RemoteDir,
    token: String,
}

impl Lease {
    /// Takes a lease of `length` on `dir`, or refuses naming the holder. It is renewed
    /// every third of its length.
    pub fn acquire(dir: &RemoteDir, length: Duration) -> Result<Lease, CheckpointError> {
        let token = uuid::Uuid::new_v4().to_string();
        let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
        let host = host.trim().to_string();
        let holder = format!(
            "pid {} on {} since {}",
            std::process::id(),
            host,
            chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
        let our_host = host.clone();
        let lease = i64::try_from(length.as_millis()).unwrap_or(i64::MAX);
        let renew_every = Duration::from_millis(u64::try_from(lease / 3).unwrap_or(10_000));
        let record = move |token: &str| LockRecord {
            holder: holder.clone(),
            token: token.to_string(),
            expires_at_ms: now_ms() + lease,
            renewed_at_ms: now_ms(),
            host: host.clone(),
            pid: std::process::id(),
        };
        let body = |r: &LockRecord| serde_json::to_vec(r).expect("lock records serialize");
        if !dir.put_new(LOCK_OBJECT, body(&record(&token)))? {
            let current = dir
                .get(LOCK_OBJECT)?
                .and_then(|b| serde_json::from_slice::<LockRecord>(&b).ok());
            match current {
                Some(c) if c.is_live(&our_host) => {
                    return Err(CheckpointError::Locked {
                        path: dir.url().into(),
                        holder: c.describe(),
                    });
                }
                stale => {
                    tracing::warn!(
                        checkpoint = %dir.url(),
                        holder = stale.as_ref().map_or("unreadable", |c| c.holder.as_str()),
                        "Taking over a checkpoint lease whose holder is gone or stopped renewing it."
                    );
                    dir.put(LOCK_OBJECT, body(&record(&token)))?;
                }
            }
        }
        let (stop, stopped) = mpsc::channel::<()>();
        let renew_dir = dir.clone();
        let renew_token = token.clone();
        let renewer = std::thread::Builder::new()
            .name("autoloader-lease".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(renew_every)
                {
                    let ours = current_lock(&renew_dir).is_some_and(|c| c.token == renew_token);
                    if !ours {
                        tracing::error!(checkpoint = %renew_dir.url(), "The checkpoint lease was taken over by another process; no longer renewing it.");
                        return;
                    }
                    if let Err(e) = renew_dir.put(LOCK_OBJECT, body(&record(&renew_token))) {
                        tracing::warn!(checkpoint = %renew_dir.url(), error = %e, "Cannot renew the checkpoint lease; retrying.");
                    }
                }
            })
            .map_err(|e| CheckpointError::Io {
                path: dir.url().into(),
                source: e,
            })?;
        Ok(Lease {
            stop: Some(stop),
            renewer: Some(renewer),
            dir: dir.clone(),
            token,
        })
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.renewer.take() {
            let _ = t.join();
        }
        let ours = current_lock(&self.dir).is_some_and(|c| c.token == self.token);
        if ours {
            let _ = self.dir.delete(LOCK_OBJECT);
        }
    }
}

/// Who holds the lease on `dir`, if a live process does (read without taking it).
pub fn live_holder(dir: &RemoteDir) -> Result<Option<String>, CheckpointError> {
    let Some(bytes) = dir.get(LOCK_OBJECT)? else {
        return Ok(None);
    };
    let Ok(lock) = serde_json::from_slice::<LockRecord>(&bytes) else {
        return Ok(None);
    };
    let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    Ok(lock.is_live(host.trim()).then(|| lock.describe()))
}

/// When the lease on `dir` was last taken or renewed (ms since the epoch), read without
/// taking it (`autoloader status`); `None` without a readable lease. `length` stands in for
/// a record that does not say: its expiry less a lease.
pub fn renewed_at_ms(dir: &RemoteDir, length: Duration) -> Option<i64> {
    let lock = current_lock(dir)?;
    Some(if lock.renewed_at_ms > 0 {
        lock.renewed_at_ms
    } else {
        lock.expires_at_ms - i64::try_from(length.as_millis()).unwrap_or(0)
    })
}

/// The lease record on S3, if there is one and it reads.
fn current_lock(dir: &RemoteDir) -> Option<LockRecord> {
    dir.get(LOCK_OBJECT)
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice(&b).ok())
}
