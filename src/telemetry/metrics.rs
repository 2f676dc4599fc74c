//! Prometheus metrics for watch mode (`--metrics-addr 127.0.0.1:PORT`): per-stream
//! counters and gauges in atomics, rendered in the text exposition format by a tiny HTTP
//! server that answers `GET /metrics`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Batch duration histogram bucket bounds, seconds.
const BUCKETS: [f64; 10] = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// The metrics of one stream.
#[derive(Debug, Default)]
pub struct StreamMetrics {
    pub files: AtomicU64,
    pub rows: AtomicU64,
    pub bytes: AtomicU64,
    pub rescued_rows: AtomicU64,
    pub corrupt_files: AtomicU64,
    pub batches: AtomicU64,
    pub schema_version: AtomicU64,
    pub files_pending: AtomicU64,
    /// Milliseconds since the epoch of the last commit (0: none yet).
    pub last_commit_ms: AtomicU64,
    bucket_counts: [AtomicU64; BUCKETS.len()],
    duration_sum_micros: AtomicU64,
}

impl StreamMetrics {
    /// Records a committed batch.
    pub fn batch(&self, files: u64, rows: u64, bytes: u64, rescued_rows: u64, seconds: f64) {
        self.files.fetch_add(files, Ordering::Relaxed);
        self.rows.fetch_add(rows, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.rescued_rows.fetch_add(rescued_rows, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
        let now = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
        self.last_commit_ms.store(now, Ordering::Relaxed);
        for (i, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                self.bucket_counts[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.duration_sum_micros
            .fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
    }
}

/// A metric's name, help text and how to read it from a stream.
type MetricDef = (&'static str, &'static str, fn(&StreamMetrics) -> u64);
/// Named streams and their metrics.
type StreamList = Vec<(String, Arc<StreamMetrics>)>;

/// All streams' metrics.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    streams: Arc<Mutex<StreamList>>,
}

impl Registry {
    pub fn new() -> Self {
        Registry::default()
    }

    /// The metrics of a stream (created on first use).
    pub fn stream(&self, name: &str) -> Arc<StreamMetrics> {
        let mut streams = self
            .streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, m)) = streams.iter().find(|(n, _)| n == name) {
            return Arc::clone(m);
        }
        let m = Arc::new(StreamMetrics::default());
        streams.push((name.to_string(), Arc::clone(&m)));
        m
    }

    /// The Prometheus text exposition of every stream.
    pub fn render(&self) -> String {
        let streams = self
            .streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let mut out = String::new();
        let now_ms = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
        let counters: [MetricDef; 6] = [
            ("autoloader_files_total", "Files ingested.", |m| {
                m.files.load(Ordering::Relaxed)
            }),
            ("autoloader_rows_total", "Rows appended.", |m| {
                m.rows.load(Ordering::Relaxed)
            }),
            ("autoloader_bytes_total", "Input bytes ingested.", |m| {
                m.bytes.load(Ordering::Relaxed)
            }),
            (
                "autoloader_rescued_rows_total",
                "Rows with rescued data.",
                |m| m.rescued_rows.load(Ordering::Relaxed),
            ),
            (
                "autoloader_corrupt_files_total",
                "Files skipped as corrupt.",
                |m| m.corrupt_files.load(Ordering::Relaxed),
            ),
            ("autoloader_batches_total", "Batches committed.", |m| {
                m.batches.load(Ordering::Relaxed)
            }),
        ];
        for def in counters {
            render_family(&mut out, def, "counter", &streams);
        }
        let gauges: [MetricDef; 2] = [
            (
                "autoloader_schema_version",
                "Current schema version.",
                |m| m.schema_version.load(Ordering::Relaxed),
            ),
            (
                "autoloader_files_pending",
                "Files listed but not yet ingested.",
                |m| m.files_pending.load(Ordering::Relaxed),
            ),
        ];
        for def in gauges {
            render_family(&mut out, def, "gauge", &streams);
        }
        let name = "autoloader_seconds_since_last_commit";
        let _ = writeln!(
            out,
            "# HELP {name} Seconds since the last commit (-1: none yet).\n# TYPE {name} gauge"
        );
        for (s, m) in &streams {
            let last = m.last_commit_ms.load(Ordering::Relaxed);
            let v = if last == 0 {
                -1.0
            } else {
                now_ms.saturating_sub(last) as f64 / 1000.0
            };
            let _ = writeln!(out, "{name}{{stream=\"{}\"}} {v}", escape(s));
        }
        let name = "autoloader_batch_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Time to read, write and commit a batch.\n# TYPE {name} histogram"
        );
        for (s, m) in &streams {
            let s = escape(s);
            for (i, bound) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "{name}_bucket{{stream=\"{s}\",le=\"{bound}\"}} {}",
                    m.bucket_counts[i].load(Ordering::Relaxed)
                );
            }
            let count = m.batches.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{stream=\"{s}\",le=\"+Inf\"}} {count}");
            let sum = m.duration_sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
            let _ = writeln!(
                out,
                "{name}_sum{{stream=\"{s}\"}} {sum}\n{name}_count{{stream=\"{s}\"}} {count}"
            );
        }
        out
    }
}

/// One metric family: its help and type lines, then one sample per stream.
fn render_family(out: &mut String, (name, help, get): MetricDef, kind: &str, streams: &StreamList) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (s, m) in streams {
        let _ = writeln!(out, "{name}{{stream=\"{}\"}} {}", escape(s), get(m));
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Serves `GET /metrics` on `listener` until the process ends.
pub async fn serve(listener: TcpListener, registry: Registry) {
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            continue;
        };
        let registry = registry.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            let n = tokio::time::timeout(std::time::Duration::from_secs(5), socket.read(&mut buf))
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or(0);
            let request = String::from_utf8_lossy(&buf[..n]);
            let (status, body) = if request.starts_with("GET /metrics") {
                ("200 OK", registry.render())
            } else {
                ("404 Not Found", "not found; try /metrics\n".to_string())
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_gauges_and_histogram() {
        let r = Registry::new();
        let m = r.stream("orders");
        m.batch(3, 100, 5000, 2, 0.3);
        m.schema_version.store(1, Ordering::Relaxed);
        let text = r.render();
        assert!(
            text.contains("autoloader_rows_total{stream=\"orders\"} 100"),
            "{text}"
        );
        assert!(
            text.contains("autoloader_rescued_rows_total{stream=\"orders\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("autoloader_schema_version{stream=\"orders\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "autoloader_batch_duration_seconds_bucket{stream=\"orders\",le=\"0.25\"} 0"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "autoloader_batch_duration_seconds_bucket{stream=\"orders\",le=\"0.5\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("autoloader_batch_duration_seconds_count{stream=\"orders\"} 1"),
            "{text}"
        );
    }
}
