//! What a stream tells the world: its event log, alert webhooks and Prometheus metrics.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use alerts::{AlertSettings, Alerter};
use events::{EventKind, EventLog, Severity};
use metrics::StreamMetrics;

pub mod alerts;
pub mod events;
pub mod live;
pub mod metrics;

/// Where a stream reports besides its event log: alert webhooks and metrics.
#[derive(Default, Clone)]
pub struct Hooks {
    pub alerts: AlertSettings,
    pub metrics: Option<Arc<StreamMetrics>>,
}

/// A stream's event log, alerts and metrics.
pub struct Telemetry {
    events: Arc<EventLog>,
    pub(crate) alerter: Alerter,
    pub(crate) metrics: Arc<StreamMetrics>,
    /// The figures `autoloader status` shows while the stream runs.
    pub(crate) live: live::Live,
    /// Overwritten files already reported, so a watcher reports each once.
    pub(crate) overwritten_reported: HashSet<(String, u64, i64)>,
}

impl Telemetry {
    /// Opens the event log under `events_dir` (the checkpoint's local folder) and starts
    /// the alerter.
    pub fn start(events_dir: &Path, stream: &str, hooks: &Hooks) -> Telemetry {
        let events = Arc::new(EventLog::open(events_dir, stream));
        Telemetry {
            alerter: Alerter::start(hooks.alerts.clone(), Arc::clone(&events)),
            events,
            metrics: hooks.metrics.clone().unwrap_or_default(),
            live: live::Live::new(events_dir),
            overwritten_reported: HashSet::new(),
        }
    }

    /// Records an event and alerts on it when it is alert-worthy.
    pub fn emit(&self, severity: Severity, kind: EventKind, fields: serde_json::Value) {
        let event = self.events.emit(severity, kind, fields);
        self.alerter.consider(&event);
    }
}
