//! The first stream of a shared table creates it; the others wait for it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// How long a stream waits for the first stream of its table to create it.
const FIRST_WRITER_WAIT: Duration = Duration::from_secs(120);

/// Streams of one run that share a table not created yet would race to create it, and the
/// table's types would be the faster stream's (a CSV stream's INT, or a JSON stream's
/// BIGINT). So the first stream declared goes first: the others wait to infer their first
/// schema until it has created the table (or found nothing to create it from, or ended).
#[derive(Debug, Clone, Default)]
pub enum FirstWriter {
    /// The only stream of its table in this run.
    #[default]
    Alone,
    /// The first declared: creates the table, then lets the others go.
    Leader(Arc<watch::Sender<bool>>),
    /// Waits for the leader before inferring a first schema.
    Follower(watch::Receiver<bool>),
}

impl FirstWriter {
    /// A leader and `n - 1` followers.
    pub fn for_streams(n: usize) -> Vec<FirstWriter> {
        let (tx, rx) = watch::channel(false);
        let mut out = vec![FirstWriter::Leader(Arc::new(tx))];
        out.extend((1..n).map(|_| FirstWriter::Follower(rx.clone())));
        out
    }

    /// The leader is done with the table's first schema (or with its run).
    pub(crate) fn release(&self) {
        if let FirstWriter::Leader(tx) = self {
            tx.send_replace(true);
        }
    }

    /// A follower waits for its leader (which may also simply end, dropping the sender).
    pub(crate) async fn wait_for_leader(&self, stream: &str) {
        if let FirstWriter::Follower(rx) = self {
            let mut rx = rx.clone();
            if tokio::time::timeout(FIRST_WRITER_WAIT, rx.wait_for(|done| *done))
                .await
                .is_err()
            {
                tracing::warn!(
                    stream,
                    "The first stream of this table has not created it yet; going on."
                );
            }
        }
    }
}
