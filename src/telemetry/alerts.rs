//! Drift alerts: alert-worthy events POSTed as JSON to webhooks, with a human `text` field
//! so a Slack or Teams incoming webhook shows them as they are.
//!
//! Sending never blocks or fails ingestion: alerts go through a bounded queue to a
//! background task with a timeout, retries with backoff, and no redirects; a webhook that
//! keeps failing is recorded as an `alert_failed` event, and the alert it missed is kept in
//! the checkpoint's `alerts-pending.jsonl` (sent again when the webhook next takes one, or
//! at the next start). At exit the queue gets a bounded wait, one attempt per alert and no
//! backoff; what is left is kept the same way and counted in a warning. A quiet period per incident key
//! turns one incident into one alert, not thousands. Webhooks may not point at link-local
//! or cloud metadata addresses (checked on the resolved address, which is then pinned)
//! unless explicitly allowed.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use url::Url;

use crate::telemetry::events::{Event, EventKind, EventLog, Severity, kind};

const TIMEOUT: Duration = Duration::from_secs(5);
const ATTEMPTS: u32 = 3;
const QUEUE: usize = 256;

/// Alert settings of a stream.
#[derive(Debug, Clone)]
pub struct AlertSettings {
    pub webhooks: Vec<Url>,
    /// Alert when a batch's rescued share exceeds this (0: any rescued row).
    pub rescued_share: f64,
    /// Alert when an expectation fails more than this share of the rows it checked in a
    /// batch (0: any failed row).
    pub expectation_share: f64,
    /// One alert per incident key per this period.
    pub quiet_period: Duration,
    /// Allow link-local and metadata addresses (never needed for real webhooks).
    pub allow_link_local: bool,
}

impl Default for AlertSettings {
    fn default() -> Self {
        AlertSettings {
            webhooks: Vec::new(),
            rescued_share: 0.0,
            expectation_share: 0.0,
            quiet_period: Duration::from_secs(600),
            allow_link_local: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AlertError {
    #[error("webhook URL {0:?} is not an http(s) URL")]
    BadUrl(String),
    #[error("webhook {url} points at a link-local or metadata address ({addr}); refused")]
    Forbidden { url: String, addr: String },
}

/// Parses and checks a webhook URL (the host name is checked again once resolved).
pub fn parse_webhook(text: &str, allow_link_local: bool) -> Result<Url, AlertError> {
    let url = Url::parse(text).map_err(|_| AlertError::BadUrl(text.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(AlertError::BadUrl(text.to_string()));
    }
    let host = url
        .host_str()
        .unwrap_or_default()
        .trim_matches(['[', ']'])
        .to_ascii_lowercase();
    if !allow_link_local {
        let forbidden_name = matches!(
            host.as_str(),
            "metadata.google.internal" | "metadata" | "instance-data"
        );
        let forbidden_ip = host.parse::<IpAddr>().is_ok_and(forbidden);
        if forbidden_name || forbidden_ip {
            return Err(AlertError::Forbidden {
                url: redact(&url),
                addr: host,
            });
        }
    }
    Ok(url)
}

/// Link-local, cloud metadata, unspecified and multicast addresses.
fn forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.octets() == [100, 100, 100, 200]
                || v4.is_broadcast()
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return forbidden(IpAddr::V4(v4));
            }
            (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6.is_unspecified()
                || v6.is_multicast()
                || v6
                    == "fd00:ec2::254"
                        .parse::<std::net::Ipv6Addr>()
                        .expect("valid address")
        }
    }
}

/// A URL as logged: no credentials, no query string (webhook tokens often live there).
fn redact(url: &Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.set_query(None);
    let path = u.path().to_string();
    if path.len() > 12 {
        u.set_path(&format!("{}…", &path[..12.min(path.len())]));
    }
    u.to_string()
}

/// File, in the checkpoint's local folder, of the alerts not delivered yet: one JSON object
/// per line, `{"webhook": REDACTED, "alert": PAYLOAD}`, sent again at the next start.
pub const PENDING_FILE: &str = "alerts-pending.jsonl";
/// Undelivered alerts kept at most (the oldest go first): a webhook down for days does not
/// grow the file without bound.
const MAX_KEPT: usize = 1000;

/// An alert still to deliver, to the webhooks (indexes into the settings') left.
#[derive(Debug)]
struct Job {
    payload: Value,
    webhooks: Vec<usize>,
}

/// An alert one webhook has not taken, as kept on disk.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Undelivered {
    /// The webhook as logged ([`redact`]): credentials never reach the disk.
    webhook: String,
    alert: Value,
}

/// Alerts queued, in flight and undelivered, shared by the stream and the sender task.
#[derive(Debug, Default)]
struct Outbox {
    queue: std::collections::VecDeque<Job>,
    in_flight: Option<Job>,
    undelivered: Vec<(usize, Value)>,
    /// Undelivered alerts dropped past [`MAX_KEPT`].
    dropped: u64,
    closed: bool,
}

/// Decides which events become alerts and sends them.
pub struct Alerter {
    settings: AlertSettings,
    last_sent: Mutex<HashMap<String, Instant>>,
    shared: Option<Arc<Shared>>,
    sender: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

struct Shared {
    outbox: Mutex<Outbox>,
    /// Wakes the sender: a new alert, or closing.
    wake: tokio::sync::Notify,
    /// Set at close: no more retries or backoff, one attempt per alert left.
    closing: tokio::sync::watch::Sender<bool>,
    webhooks: Vec<Url>,
    allow: bool,
    events: Arc<EventLog>,
    /// `<checkpoint>/alerts-pending.jsonl`.
    pending_path: std::path::PathBuf,
}

impl Shared {
    fn outbox(&self) -> std::sync::MutexGuard<'_, Outbox> {
        self.outbox
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes every alert not delivered yet (undelivered, in flight, queued) to the
    /// pending file, or removes it when there is none; returns how many alerts it holds.
    fn persist(&self) -> usize {
        let lines: Vec<String> = {
            let o = self.outbox();
            let mut entries: Vec<Undelivered> = Vec::new();
            let mut add = |i: usize, alert: &Value| {
                entries.push(Undelivered {
                    webhook: redact(&self.webhooks[i]),
                    alert: alert.clone(),
                });
            };
            for (i, alert) in &o.undelivered {
                add(*i, alert);
            }
            for job in o.in_flight.iter().chain(&o.queue) {
                for i in &job.webhooks {
                    add(*i, &job.payload);
                }
            }
            entries
                .iter()
                .map(|e| serde_json::to_string(e).expect("alerts serialize"))
                .collect()
        };
        let result = if lines.is_empty() {
            match std::fs::remove_file(&self.pending_path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            }
        } else {
            let aside = self.pending_path.with_extension("jsonl.tmp");
            std::fs::write(&aside, lines.join("\n") + "\n")
                .and_then(|()| std::fs::rename(&aside, &self.pending_path))
        };
        if let Err(e) = result {
            tracing::warn!(path = %self.pending_path.display(), error = %e, "Cannot record the undelivered alerts.");
        }
        lines.len()
    }

    /// Alerts kept by an earlier run, each for the webhook it missed (or, when that webhook
    /// is no longer configured, for every webhook now).
    fn load(&self) -> Vec<Job> {
        let Ok(text) = std::fs::read_to_string(&self.pending_path) else {
            return Vec::new();
        };
        let mut jobs: Vec<Job> = Vec::new();
        for entry in text
            .lines()
            .filter_map(|l| serde_json::from_str::<Undelivered>(l).ok())
        {
            let mut webhooks: Vec<usize> = (0..self.webhooks.len())
                .filter(|i| redact(&self.webhooks[*i]) == entry.webhook)
                .collect();
            if webhooks.is_empty() {
                webhooks = (0..self.webhooks.len()).collect();
            }
            // One alert missed by several webhooks is one job.
            match jobs.iter_mut().find(|j| j.payload == entry.alert) {
                Some(job) => {
                    job.webhooks.extend(webhooks);
                    job.webhooks.sort_unstable();
                    job.webhooks.dedup();
                }
                None => jobs.push(Job {
                    payload: entry.alert,
                    webhooks,
                }),
            }
        }
        jobs
    }
}

impl Alerter {
    /// Starts the sender task (needs a tokio runtime) when there are webhooks; alerts an
    /// earlier run could not deliver (see [`PENDING_FILE`]) are sent first.
    pub fn start(settings: AlertSettings, events: Arc<EventLog>) -> Alerter {
        let (shared, sender) = if settings.webhooks.is_empty() {
            (None, None)
        } else {
            let shared = Arc::new(Shared {
                outbox: Mutex::new(Outbox::default()),
                wake: tokio::sync::Notify::new(),
                closing: tokio::sync::watch::Sender::new(false),
                webhooks: settings.webhooks.clone(),
                allow: settings.allow_link_local,
                pending_path: events.dir().join(PENDING_FILE),
                events,
            });
            let kept = shared.load();
            if !kept.is_empty() {
                tracing::info!(
                    alerts = kept.len(),
                    "Sending the alerts an earlier run could not deliver."
                );
            }
            shared.outbox().queue.extend(kept);
            let handle = tokio::spawn(send_loop(Arc::clone(&shared)));
            (Some(shared), Some(handle))
        };
        Alerter {
            settings,
            last_sent: Mutex::new(HashMap::new()),
            shared,
            sender: Mutex::new(sender),
        }
    }

    /// Stops taking alerts and waits at most `timeout` for the queued ones, each given one
    /// last attempt without backoff (a webhook that is down does not hold the exit). What
    /// is still undelivered then is kept in the checkpoint's [`PENDING_FILE`] and sent at
    /// the next start; returns how many alerts that is.
    pub async fn close(&self, timeout: Duration) -> usize {
        let Some(shared) = &self.shared else { return 0 };
        shared.outbox().closed = true;
        shared.closing.send_replace(true);
        shared.wake.notify_one();
        let handle = self
            .sender
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(mut handle) = handle
            && tokio::time::timeout(timeout, &mut handle).await.is_err()
        {
            handle.abort();
            let _ = handle.await;
        }
        let kept = shared.persist();
        let dropped = shared.outbox().dropped;
        if kept > 0 {
            tracing::warn!(
                "{kept} undelivered alert(s) kept in {}; they are sent again at the next run.",
                shared.pending_path.display()
            );
        }
        if dropped > 0 {
            tracing::warn!(
                "{dropped} undelivered alert(s) were dropped: past {MAX_KEPT}, the oldest go (the event log has them)."
            );
        }
        kept
    }

    /// The incident key of an alert-worthy event, or `None` when it is not one.
    fn incident(&self, e: &Event) -> Option<String> {
        match e.kind {
            EventKind::SchemaEvolved => Some(format!(
                "evolved:{}",
                e.fields.get("newVersion").cloned().unwrap_or_default()
            )),
            EventKind::NewColumnsRejected => Some(format!(
                "rejected:{}",
                e.fields.get("addedColumns").cloned().unwrap_or_default()
            )),
            EventKind::FileQuarantined => Some(format!(
                "quarantined:{}",
                e.fields.get("file").cloned().unwrap_or_default()
            )),
            EventKind::SnapshotOverdue => Some(format!(
                "overdue:{}",
                e.fields.get("lastSnapshotMs").cloned().unwrap_or_default()
            )),
            EventKind::StreamFailed => Some(format!(
                "failed:{}",
                e.fields.get("error").cloned().unwrap_or_default()
            )),
            EventKind::RescuedDataSeen => {
                let share = e.fields.get("share").and_then(Value::as_f64).unwrap_or(0.0);
                (share > self.settings.rescued_share).then(|| "rescued".to_string())
            }
            EventKind::DataQuality => {
                let rules = e
                    .fields
                    .get("data_quality")?
                    .get("expectations")?
                    .as_array()?;
                rules.iter().find_map(|r| {
                    let count = |k: &str| r.get(k).and_then(Value::as_u64).unwrap_or(0);
                    let (passed, failed) = (count("passed_records"), count("failed_records"));
                    let share = failed as f64 / (passed + failed).max(1) as f64;
                    (failed > 0 && share > self.settings.expectation_share).then(|| {
                        format!(
                            "expectation:{}",
                            r.get("name").and_then(Value::as_str).unwrap_or_default()
                        )
                    })
                })
            }
            // Without a rescued-data column a type mismatch loses the value: alert on it.
            EventKind::TypeMismatch if e.fields.get("rescued") == Some(&Value::Bool(false)) => {
                Some(format!(
                    "mismatch:{}",
                    e.fields.get("column").cloned().unwrap_or_default()
                ))
            }
            _ => None,
        }
    }

    /// Sends an alert for the event if it is alert-worthy and its incident is not quiet.
    pub fn consider(&self, e: &Event) {
        let Some(shared) = &self.shared else { return };
        let Some(key) = self.incident(e) else { return };
        {
            let mut last = self
                .last_sent
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let now = Instant::now();
            if last
                .get(&key)
                .is_some_and(|t| now.duration_since(*t) < self.settings.quiet_period)
            {
                return;
            }
            last.insert(key, now);
        }
        let payload = json!({
            "text": format!("autoloader [{}] {}", e.stream, e.describe()),
            "event": e,
        });
        let mut o = shared.outbox();
        if o.closed {
            return;
        }
        let job = Job {
            payload,
            webhooks: (0..shared.webhooks.len()).collect(),
        };
        if o.queue.len() >= QUEUE {
            // Not sent now, not lost: kept with the undelivered ones.
            tracing::warn!("The alert queue is full; the alert is kept for the next run.");
            for i in job.webhooks {
                keep(&mut o, i, job.payload.clone());
            }
            drop(o);
            shared.persist();
            return;
        }
        o.queue.push_back(job);
        drop(o);
        shared.wake.notify_one();
    }
}

/// Adds an undelivered alert, dropping the oldest past [`MAX_KEPT`].
fn keep(o: &mut Outbox, webhook: usize, alert: Value) {
    o.undelivered.push((webhook, alert));
    if o.undelivered.len() > MAX_KEPT {
        o.undelivered.remove(0);
        o.dropped += 1;
    }
}

async fn send_loop(shared: Arc<Shared>) {
    let mut closing = shared.closing.subscribe();
    loop {
        let job = {
            let mut o = shared.outbox();
            match o.queue.pop_front() {
                Some(job) => {
                    o.in_flight = Some(Job {
                        payload: job.payload.clone(),
                        webhooks: job.webhooks.clone(),
                    });
                    Some(job)
                }
                None if o.closed => return,
                None => None,
            }
        };
        let Some(job) = job else {
            shared.wake.notified().await;
            continue;
        };
        let body = job.payload.to_string();
        for i in job.webhooks {
            let url = &shared.webhooks[i];
            let result = send_with_retries(url, &body, shared.allow, &mut closing).await;
            let mut o = shared.outbox();
            if let Some(f) = o.in_flight.as_mut() {
                f.webhooks.retain(|w| *w != i);
            }
            match result {
                Ok(()) => {
                    // The webhook is back: what it missed earlier in this run goes again.
                    let (again, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut o.undelivered)
                        .into_iter()
                        .partition(|(w, _)| *w == i);
                    o.undelivered = rest;
                    for (w, payload) in again {
                        o.queue.push_back(Job {
                            payload,
                            webhooks: vec![w],
                        });
                    }
                }
                Err(reason) => {
                    keep(&mut o, i, job.payload.clone());
                    drop(o);
                    tracing::warn!(webhook = %redact(url), %reason, "Alert webhook failed; the alert is kept for the next run.");
                    shared.events.emit(
                        Severity::Warning,
                        kind::ALERT_FAILED,
                        json!({ "webhook": redact(url), "error": reason, "alert": job.payload.get("event").and_then(|e| e.get("type")) }),
                    );
                    shared.persist();
                }
            }
        }
        shared.outbox().in_flight = None;
    }
}

/// Sends `body`, retrying with backoff; once `closing` is set, no retry is made (the
/// exit waits for no backoff).
async fn send_with_retries(
    url: &Url,
    body: &str,
    allow: bool,
    closing: &mut tokio::sync::watch::Receiver<bool>,
) -> Result<(), String> {
    let mut last_error = String::new();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            if *closing.borrow() {
                return Err(format!(
                    "{last_error} (stopped at exit after {attempt} of {ATTEMPTS} attempts)"
                ));
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(500 << attempt)) => {}
                _ = closing.changed() => {
                    return Err(format!(
                    "{last_error} (stopped at exit after {attempt} of {ATTEMPTS} attempts)"
                ));
                }
            }
        }
        match send_once(url, body, allow).await {
            Ok(()) => return Ok(()),
            Err(SendError::Refused(reason)) => return Err(reason),
            Err(SendError::Retry(reason)) => last_error = reason,
        }
    }
    Err(format!("{last_error} (after {ATTEMPTS} attempts)"))
}

enum SendError {
    Refused(String),
    Retry(String),
}

async fn send_once(url: &Url, body: &str, allow: bool) -> Result<(), SendError> {
    let host = url.host_str().unwrap_or_default().to_string();
    let port = url.port_or_known_default().unwrap_or(443);
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|e| SendError::Retry(format!("cannot resolve {host}: {e}")))?
        .collect();
    let Some(addr) = addrs.first().copied() else {
        return Err(SendError::Retry(format!("{host} has no address")));
    };
    if !allow && addrs.iter().any(|a| forbidden(a.ip())) {
        return Err(SendError::Refused(format!(
            "{host} resolves to a link-local or metadata address"
        )));
    }
    // Pin the checked address for the connection (no DNS rebinding between check and use).
    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .resolve(host.trim_matches(['[', ']']), addr)
        .build()
        .map_err(|e| SendError::Retry(e.to_string()))?;
    let response = client
        .post(url.clone())
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| SendError::Retry(e.without_url().to_string()))?;
    if response.status().is_success() {
        Ok(())
    } else if response.status().is_client_error() && response.status().as_u16() != 429 {
        Err(SendError::Refused(format!("HTTP {}", response.status())))
    } else {
        Err(SendError::Retry(format!("HTTP {}", response.status())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhooks_cannot_target_link_local_or_metadata() {
        assert!(parse_webhook("https://hooks.slack.com/services/T/B/X", false).is_ok());
        assert!(parse_webhook("http://127.0.0.1:8080/hook", false).is_ok());
        for bad in [
            "http://169.254.169.254/latest/meta-data",
            "http://[fe80::1]/x",
            "http://[::ffff:169.254.169.254]/x",
            "http://metadata.google.internal/computeMetadata/v1/",
            "http://100.100.100.200/",
            "http://[fd00:ec2::254]/",
        ] {
            assert!(
                matches!(parse_webhook(bad, false), Err(AlertError::Forbidden { .. })),
                "{bad}"
            );
            assert!(
                parse_webhook(bad, true).is_ok(),
                "{bad} is allowed when asked"
            );
        }
        assert!(matches!(
            parse_webhook("ftp://x/y", false),
            Err(AlertError::BadUrl(_))
        ));
    }

    /// A webhook on 127.0.0.1 that refuses its first request (HTTP 400, not retried) and
    /// takes the others; returns its URL and the bodies it was sent.
    fn flaky_webhook() -> (Url, Arc<Mutex<Vec<String>>>) {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = Url::parse(&format!(
            "http://{}/hook?token=SECRET",
            listener.local_addr().unwrap()
        ))
        .unwrap();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&bodies);
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0u8; length];
                reader.read_exact(&mut body).unwrap();
                sink.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&body).into_owned());
                let status = if n == 0 { "400 Bad Request" } else { "200 OK" };
                let _ = stream.write_all(
                    format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .as_bytes(),
                );
            }
        });
        (url, bodies)
    }

    async fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
        for _ in 0..200 {
            if ready() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("timed out waiting for {what}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_alert_a_webhook_missed_is_kept_and_goes_again_once_it_takes_one() {
        let dir = tempfile::tempdir().unwrap();
        let pending = dir.path().join(PENDING_FILE);
        let (url, bodies) = flaky_webhook();
        let events = Arc::new(EventLog::open(dir.path(), "s"));
        let settings = AlertSettings {
            webhooks: vec![url],
            ..AlertSettings::default()
        };
        let alerter = Alerter::start(settings, events);
        let failed = |error: &str| {
            Event::new(
                "s",
                Severity::Error,
                kind::STREAM_FAILED,
                json!({ "error": error }),
            )
        };
        alerter.consider(&failed("first"));
        wait_for("the missed alert to be kept", || pending.exists()).await;
        let kept = std::fs::read_to_string(&pending).unwrap();
        assert!(kept.contains("first") && !kept.contains("SECRET"), "{kept}");
        alerter.consider(&failed("second"));
        wait_for("three deliveries", || bodies.lock().unwrap().len() == 3).await;
        let sent = bodies.lock().unwrap().clone();
        assert!(
            sent[1].contains("second") && sent[2].contains("first"),
            "{sent:?}"
        );
        assert_eq!(alerter.close(Duration::from_secs(2)).await, 0);
        assert!(!pending.exists(), "nothing is left to send");
    }

    #[test]
    fn logged_urls_hide_tokens() {
        let u =
            Url::parse("https://user:pw@hooks.example.com/services/T000/B000/XXXXSECRET?token=abc")
                .unwrap();
        let r = redact(&u);
        assert!(
            !r.contains("SECRET") && !r.contains("abc") && !r.contains("pw"),
            "{r}"
        );
    }
}
