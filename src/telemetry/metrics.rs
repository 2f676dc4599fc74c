//! Prometheus metrics for watch mode (`--metrics-addr 127.0.0.1:PORT`): per-stream
//! counters, gauges and a histogram kept by `prometheus-client`, written in the Prometheus
//! text format (0.0.4) and served at `GET /metrics` by hyper.

use std::convert::Infallible;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, prometheus_text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Unit;
use tokio::net::TcpListener;

/// Batch duration histogram bucket bounds, seconds.
const BUCKETS: [f64; 10] = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// A prometheus-client counter or gauge that the pipeline updates through its atomic
/// (`corrupt_files.fetch_add(1, Relaxed)`, `schema_version.store(v, Relaxed)`), as it did
/// when these were bare atomics. The handle is shared with the registry's family, so an
/// update shows in the next scrape.
#[derive(Debug, Default)]
pub struct Value<M>(M);

impl Deref for Value<Counter> {
    type Target = AtomicU64;
    fn deref(&self) -> &AtomicU64 {
        self.0.inner()
    }
}

impl Deref for Value<Gauge<u64, AtomicU64>> {
    type Target = AtomicU64;
    fn deref(&self) -> &AtomicU64 {
        self.0.inner()
    }
}

/// The metrics of one stream: handles on its series in the registry's families.
#[derive(Debug)]
pub struct StreamMetrics {
    pub files: Value<Counter>,
    pub rows: Value<Counter>,
    pub bytes: Value<Counter>,
    pub rescued_rows: Value<Counter>,
    pub corrupt_files: Value<Counter>,
    pub batches: Value<Counter>,
    /// Notification mode: queue messages deleted once a plan owned their files.
    pub queue_planned: Value<Counter>,
    /// Notification mode: queue messages deleted with nothing to ingest (test events,
    /// outside the source, filtered, too old, files already taken).
    pub queue_skipped: Value<Counter>,
    /// Notification mode: queue messages left for the dead-letter queue (unparseable, or
    /// naming a missing object), counted at each receipt.
    pub queue_left: Value<Counter>,
    pub schema_version: Value<Gauge<u64, AtomicU64>>,
    pub files_pending: Value<Gauge<u64, AtomicU64>>,
    /// Milliseconds since the epoch of the last commit (0: none yet).
    pub last_commit_ms: Value<Gauge<u64, AtomicU64>>,
    duration: Histogram,
    /// `autoloader_expectation_records_total{stream,expectation,outcome}`.
    expectations: Family<ExpectationLabel, Counter>,
    name: String,
}

/// Metrics that no registry exposes (no `--metrics-addr`).
impl Default for StreamMetrics {
    fn default() -> Self {
        Families::new().stream("")
    }
}

impl StreamMetrics {
    /// Records a committed batch.
    pub fn batch(&self, files: u64, rows: u64, bytes: u64, rescued_rows: u64, seconds: f64) {
        self.files.0.inc_by(files);
        self.rows.0.inc_by(rows);
        self.bytes.0.inc_by(bytes);
        self.rescued_rows.0.inc_by(rescued_rows);
        self.batches.0.inc();
        self.last_commit_ms.0.set(now_ms());
        self.duration.observe(seconds);
    }

    /// Records a batch's counts for one expectation, by outcome.
    pub fn expectation(&self, name: &str, counts: &crate::flow::expect::ExpectationCounts) {
        let outcomes = [
            ("passed", counts.passed),
            ("failed", counts.failed),
            ("dropped", counts.dropped),
            ("quarantined", counts.quarantined),
        ];
        for (outcome, n) in outcomes {
            let label = ExpectationLabel {
                stream: self.name.clone(),
                expectation: name.to_string(),
                outcome: outcome.to_string(),
            };
            self.expectations.get_or_create(&label).inc_by(n);
        }
    }
}

/// [`crate::clock::now_ms`], as the gauges hold it.
fn now_ms() -> u64 {
    u64::try_from(crate::clock::now_ms()).unwrap_or(0)
}

/// `autoloader_seconds_since_last_commit`: a gauge worked out from the last commit's time
/// at each scrape (-1: none yet), so it keeps rising while a stream is stuck.
#[derive(Debug, Default, Clone)]
struct SinceLastCommit(Gauge<u64, AtomicU64>);

impl TypedMetric for SinceLastCommit {
    const TYPE: MetricType = MetricType::Gauge;
}

impl EncodeMetric for SinceLastCommit {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let last = self.0.get();
        let seconds = if last == 0 {
            -1.0
        } else {
            now_ms().saturating_sub(last) as f64 / 1000.0
        };
        encoder.encode_gauge(&seconds)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StreamLabel {
    stream: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ExpectationLabel {
    stream: String,
    expectation: String,
    /// passed, failed, dropped or quarantined.
    outcome: String,
}

/// Counter names (prometheus-client appends `_total`) and help texts (it appends a `.`),
/// in `StreamMetrics` field order.
const COUNTERS: [(&str, &str); 9] = [
    ("autoloader_files", "Files ingested"),
    ("autoloader_rows", "Rows appended"),
    ("autoloader_bytes", "Input bytes ingested"),
    ("autoloader_rescued_rows", "Rows with rescued data"),
    ("autoloader_corrupt_files", "Files skipped as corrupt"),
    ("autoloader_batches", "Batches committed"),
    (
        "autoloader_queue_messages_planned",
        "Queue messages deleted once a batch plan owned their files",
    ),
    (
        "autoloader_queue_messages_skipped",
        "Queue messages deleted with nothing to ingest",
    ),
    (
        "autoloader_queue_messages_left",
        "Queue messages left for the dead-letter queue",
    ),
];
const GAUGES: [(&str, &str); 2] = [
    ("autoloader_schema_version", "Current schema version"),
    (
        "autoloader_files_pending",
        "Files listed but not yet ingested",
    ),
];

/// The metric families, one series per stream in each.
#[derive(Debug)]
struct Families {
    counters: [Family<StreamLabel, Counter>; COUNTERS.len()],
    gauges: [Family<StreamLabel, Gauge<u64, AtomicU64>>; GAUGES.len()],
    since_last_commit: Family<StreamLabel, SinceLastCommit>,
    duration: Family<StreamLabel, Histogram, fn() -> Histogram>,
    expectations: Family<ExpectationLabel, Counter>,
}

impl Families {
    fn new() -> Self {
        Families {
            counters: Default::default(),
            gauges: Default::default(),
            since_last_commit: Family::default(),
            duration: Family::new_with_constructor(|| Histogram::new(BUCKETS)),
            expectations: Family::default(),
        }
    }

    /// A stream's series, created on first use.
    fn stream(&self, name: &str) -> StreamMetrics {
        let label = StreamLabel {
            stream: name.to_string(),
        };
        let [
            files,
            rows,
            bytes,
            rescued_rows,
            corrupt_files,
            batches,
            queue_planned,
            queue_skipped,
            queue_left,
        ] = self
            .counters
            .each_ref()
            .map(|family| Value(family.get_or_create_owned(&label)));
        let [schema_version, files_pending] = self
            .gauges
            .each_ref()
            .map(|family| Value(family.get_or_create_owned(&label)));
        StreamMetrics {
            files,
            rows,
            bytes,
            rescued_rows,
            corrupt_files,
            batches,
            queue_planned,
            queue_skipped,
            queue_left,
            schema_version,
            files_pending,
            last_commit_ms: Value(self.since_last_commit.get_or_create_owned(&label).0),
            duration: self.duration.get_or_create_owned(&label),
            expectations: self.expectations.clone(),
            name: name.to_string(),
        }
    }
}

/// All streams' metrics.
#[derive(Debug, Clone)]
pub struct Registry {
    inner: Arc<(prometheus_client::registry::Registry, Families)>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    pub fn new() -> Self {
        let f = Families::new();
        let mut r = prometheus_client::registry::Registry::default();
        for ((name, help), family) in COUNTERS.into_iter().zip(&f.counters) {
            r.register(name, help, family.clone());
        }
        for ((name, help), family) in GAUGES.into_iter().zip(&f.gauges) {
            r.register(name, help, family.clone());
        }
        r.register(
            "autoloader_seconds_since_last_commit",
            "Seconds since the last commit (-1: none yet)",
            f.since_last_commit.clone(),
        );
        r.register(
            "autoloader_expectation_records",
            "Rows an expectation checked, by outcome (passed, failed, dropped, quarantined)",
            f.expectations.clone(),
        );
        r.register_with_unit(
            "autoloader_batch_duration",
            "Time to read, write and commit a batch",
            Unit::Seconds,
            f.duration.clone(),
        );
        Registry {
            inner: Arc::new((r, f)),
        }
    }

    /// The metrics of a stream (created on first use; later calls share its series).
    pub fn stream(&self, name: &str) -> Arc<StreamMetrics> {
        Arc::new(self.inner.1.stream(name))
    }

    /// The Prometheus text exposition (0.0.4) of every stream.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail, nor can any metric here.
        let _ = prometheus_text::encode(&mut out, &self.inner.0);
        out
    }
}

/// Serves `GET /metrics` on `listener` until the process ends.
pub async fn serve(listener: TcpListener, registry: Registry) {
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            continue;
        };
        let registry = registry.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let response = respond(&registry, &request);
                async move { Ok::<_, Infallible>(response) }
            });
            // As before, one request per connection (`connection: close`), so clients that
            // read to EOF (the integration test, `nc`) see the response end.
            let _ = http1::Builder::new()
                .keep_alive(false)
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(5))
                .serve_connection(TokioIo::new(socket), service)
                .await;
        });
    }
}

fn respond(registry: &Registry, request: &Request<Incoming>) -> Response<String> {
    let (status, content_type, body) =
        if request.method() == Method::GET && request.uri().path() == "/metrics" {
            (
                StatusCode::OK,
                prometheus_text::CONTENT_TYPE,
                registry.render(),
            )
        } else {
            let body = "not found; try /metrics\n".to_string();
            (StatusCode::NOT_FOUND, "text/plain; charset=utf-8", body)
        };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let content_type = HeaderValue::from_static(content_type);
    response.headers_mut().insert(CONTENT_TYPE, content_type);
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn renders_counters_gauges_and_histogram() {
        let r = Registry::new();
        let m = r.stream("orders");
        m.batch(3, 100, 5000, 2, 0.3);
        m.schema_version.store(1, Ordering::Relaxed);
        m.files_pending.store(4, Ordering::Relaxed);
        m.corrupt_files.fetch_add(1, Ordering::Relaxed);
        // A second handle on the same stream shares its series.
        r.stream("orders").rows.fetch_add(1, Ordering::Relaxed);
        let text = r.render();
        let lines: Vec<&str> = text.lines().collect();
        for expected in [
            "# HELP autoloader_files_total Files ingested.",
            "# TYPE autoloader_files_total counter",
            "autoloader_files_total{stream=\"orders\"} 3",
            "autoloader_rows_total{stream=\"orders\"} 101",
            "autoloader_bytes_total{stream=\"orders\"} 5000",
            "autoloader_rescued_rows_total{stream=\"orders\"} 2",
            "autoloader_corrupt_files_total{stream=\"orders\"} 1",
            "autoloader_batches_total{stream=\"orders\"} 1",
            "# TYPE autoloader_schema_version gauge",
            "autoloader_schema_version{stream=\"orders\"} 1",
            "autoloader_files_pending{stream=\"orders\"} 4",
            "# HELP autoloader_seconds_since_last_commit Seconds since the last commit (-1: none yet).",
            "# TYPE autoloader_batch_duration_seconds histogram",
            "autoloader_batch_duration_seconds_bucket{stream=\"orders\",le=\"0.25\"} 0",
            "autoloader_batch_duration_seconds_bucket{stream=\"orders\",le=\"0.5\"} 1",
            "autoloader_batch_duration_seconds_bucket{stream=\"orders\",le=\"+Inf\"} 1",
            "autoloader_batch_duration_seconds_sum{stream=\"orders\"} 0.3",
            "autoloader_batch_duration_seconds_count{stream=\"orders\"} 1",
        ] {
            assert!(lines.contains(&expected), "no {expected:?} in\n{text}");
        }
        let since = lines
            .iter()
            .find_map(|l| {
                l.strip_prefix("autoloader_seconds_since_last_commit{stream=\"orders\"} ")
            })
            .and_then(|v| v.parse::<f64>().ok());
        assert!(since.is_some_and(|s| (0.0..60.0).contains(&s)), "{text}");
    }

    #[test]
    fn a_stream_without_commits_and_label_escaping() {
        let r = Registry::new();
        r.stream("a\"b\\c");
        let text = r.render();
        assert!(
            text.lines()
                .any(|l| l == "autoloader_seconds_since_last_commit{stream=\"a\\\"b\\\\c\"} -1.0"),
            "{text}"
        );
    }
}
