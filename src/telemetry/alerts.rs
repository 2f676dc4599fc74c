//! Drift alerts: alert-worthy events POSTed as JSON to webhooks, with a human `text` field
//! so a Slack or Teams incoming webhook shows them as they are.
//!
//! Sending never blocks or fails ingestion: alerts go through a bounded queue to a
//! background task with a timeout, retries with backoff, and no redirects; a webhook that
//! keeps failing is recorded as an `alert_failed` event. A quiet period per incident key
//! turns one incident into one alert, not thousands. Webhooks may not point at link-local
//! or cloud metadata addresses (checked on the resolved address, which is then pinned)
//! unless explicitly allowed.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc;
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

/// Decides which events become alerts and sends them.
pub struct Alerter {
    settings: AlertSettings,
    last_sent: Mutex<HashMap<String, Instant>>,
    tx: Mutex<Option<mpsc::Sender<Value>>>,
    sender: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Alerter {
    /// Starts the sender task (needs a tokio runtime) when there are webhooks.
    pub fn start(settings: AlertSettings, events: Arc<EventLog>) -> Alerter {
        let (tx, sender) = if settings.webhooks.is_empty() {
            (None, None)
        } else {
            let (tx, rx) = mpsc::channel(QUEUE);
            let handle = tokio::spawn(send_loop(
                rx,
                settings.webhooks.clone(),
                settings.allow_link_local,
                events,
            ));
            (Some(tx), Some(handle))
        };
        Alerter {
            settings,
            last_sent: Mutex::new(HashMap::new()),
            tx: Mutex::new(tx),
            sender: Mutex::new(sender),
        }
    }

    /// Stops taking alerts and waits (at most `timeout`) for the queued ones to be sent,
    /// so a `--once` run does not exit with its alerts still queued.
    pub async fn close(&self, timeout: Duration) {
        drop(
            self.tx
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
        let handle = self
            .sender
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(handle) = handle
            && tokio::time::timeout(timeout, handle).await.is_err()
        {
            tracing::warn!("Alerts still unsent at exit were dropped (the event log has them).");
        }
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
            EventKind::StreamFailed => Some(format!(
                "failed:{}",
                e.fields.get("error").cloned().unwrap_or_default()
            )),
            EventKind::RescuedDataSeen => {
                let share = e.fields.get("share").and_then(Value::as_f64).unwrap_or(0.0);
                (share > self.settings.rescued_share).then(|| "rescued".to_string())
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
        let guard = self
            .tx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(tx) = guard.as_ref() else { return };
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
        if tx.try_send(payload).is_err() {
            tracing::warn!(
                "The alert queue is full; an alert was dropped (the event log still has it)."
            );
        }
    }
}

async fn send_loop(
    mut rx: mpsc::Receiver<Value>,
    webhooks: Vec<Url>,
    allow: bool,
    events: Arc<EventLog>,
) {
    while let Some(payload) = rx.recv().await {
        let body = payload.to_string();
        for url in &webhooks {
            if let Err(reason) = send_with_retries(url, &body, allow).await {
                tracing::warn!(webhook = %redact(url), %reason, "Alert webhook failed.");
                events.emit(
                    Severity::Warning,
                    kind::ALERT_FAILED,
                    json!({ "webhook": redact(url), "error": reason, "alert": payload.get("event").and_then(|e| e.get("type")) }),
                );
            }
        }
    }
}

async fn send_with_retries(url: &Url, body: &str, allow: bool) -> Result<(), String> {
    let mut last_error = String::new();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
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
