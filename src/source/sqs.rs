//! Notification mode (`cloudFiles.useNotifications=true`): an S3 prefix whose new files
//! come from the bucket's event notifications in an SQS queue, raw or wrapped in SNS.
//!
//! The first start (no saved position) lists the prefix once; after that only the queue is
//! read, plus a full listing every `cloudFiles.backfillInterval`. A received message is
//! held (its receipt kept) until the stream says what became of its files:
//! - planned ([`FileSource::planned`], called once a written plan owns them) or already
//!   owned (ingested, in an unfinished plan, left out by the stream's filters;
//!   [`FileSource::discovered`]): the message is deleted;
//! - outside the prefix, a `pathGlobFilter` miss, older than `cloudFiles.maxFileAge`, not
//!   an `ObjectCreated` event, or `s3:TestEvent`: deleted at once and counted;
//! - unparseable, or naming an object that no longer exists: never deleted, so the queue's
//!   redrive policy moves it to the dead-letter queue; counted and reported.
//!
//! A message is deleted only after its file is durably owned, so a crash never loses a
//! file; a redelivered message finds its file in the index and is deleted then.

use crate::source::{LeftMessage, QueueTally};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use serde_json::Value;
use tokio::sync::OnceCell;

use super::s3::S3Prefix;
use super::{FileLocation, FileRef, FileSource, Overlap, SourceError, is_hidden};
use crate::location::Location;
use crate::options::{NotificationSettings, Settings};
use crate::storage::StorageSettings;

/// Messages one discovery holds at most: one batch's worth (`maxFilesPerTrigger`, at least
/// one receive of 10); the rest wait in the queue for the next discovery (`--once` goes on
/// until it is empty). Held messages are invisible to other workers until planned, so a
/// worker holding ten batches' worth (as it did) took a busy queue for itself while the
/// others idled, and what it could not plan in time came back to the queue.
const HELD_AT_LEAST: usize = 10;
/// How long one discovery goes on receiving before the files it holds make a batch. Held
/// messages are invisible to other workers and come back once their visibility timeout
/// (30 s by default) runs out; against a slow endpoint, a discovery filling a batch of
/// 1,000 files took minutes, and its first messages came back before it planned them.
const DRAIN_BUDGET: std::time::Duration = std::time::Duration::from_secs(5);
/// Attempts of one SQS request (the SDK's standard retry: throttling, 5xx and timeouts,
/// with backoff). One failed receive stops the stream, so transient errors get more than
/// the SDK's default of three.
const SQS_ATTEMPTS: u32 = 8;
/// Concurrent object `HEAD`s while resolving events.
const HEADS_IN_FLIGHT: usize = 16;

/// One received message, held until its files are owned.
#[derive(Debug)]
struct Held {
    receipt: String,
    /// Its keys not yet owned by a plan or the index.
    outstanding: HashSet<String>,
    /// Never deleted (an object it names is missing).
    poisoned: bool,
}

#[derive(Debug, Default)]
struct Queue {
    /// Held messages by id.
    messages: HashMap<String, Held>,
    /// Files offered to the stream, each with the messages naming it.
    files: HashMap<String, (FileRef, Vec<String>)>,
    tally: QueueTally,
    /// The last discovery stopped receiving at its limit: more is waiting.
    more: bool,
}

/// An S3 prefix fed by notifications through SQS.
#[derive(Debug)]
pub struct SqsNotifications {
    prefix: S3Prefix,
    settings: NotificationSettings,
    /// The stream's filters applied to events before any `HEAD` (`pathGlobFilter`).
    glob: Option<globset::GlobMatcher>,
    /// Messages held at most by one discovery.
    limit: usize,
    region: String,
    endpoint: Option<String>,
    credentials: Option<(String, String, Option<String>)>,
    client: OnceCell<aws_sdk_sqs::Client>,
    queue: Mutex<Queue>,
    /// When the last full listing whose files were all planned started (the position
    /// saved in the checkpoint), and the one under way.
    listed_at: Mutex<(Option<i64>, Option<i64>)>,
    /// Set once a stream took the source back with its position ([`FileSource::resume`]):
    /// only then is the queue read. Before (`--dry-run`, `status`) the source is its
    /// prefix's listing, and no message is received (each receipt counts towards the
    /// dead-letter queue).
    armed: std::sync::atomic::AtomicBool,
}

impl SqsNotifications {
    /// Notification mode over an S3 prefix (nothing is sent yet).
    pub fn open(
        prefix: S3Prefix,
        storage: &StorageSettings,
        settings: &Settings,
        notifications: &NotificationSettings,
    ) -> Result<SqsNotifications, SourceError> {
        let env = |k: &str| {
            storage
                .s3
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(k))
                .map(|(_, v)| v.clone())
                .filter(|v| !v.trim().is_empty())
        };
        let region = notifications
            .region
            .clone()
            .or_else(|| env("AWS_REGION"))
            .or_else(|| env("AWS_DEFAULT_REGION"))
            .or_else(|| region_of_queue(&notifications.queue_url))
            .ok_or_else(|| {
                SourceError::Usage(format!(
                    "cloudFiles.queueUrl={}: no region for the queue; set cloudFiles.region or \
                     AWS_REGION",
                    notifications.queue_url
                ))
            })?;
        let endpoint = env("AWS_ENDPOINT_URL_SQS").or_else(|| env("AWS_ENDPOINT_URL"));
        let credentials = match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
            (Some(id), Some(secret)) => Some((id, secret, env("AWS_SESSION_TOKEN"))),
            _ => None,
        };
        Ok(SqsNotifications {
            prefix,
            settings: notifications.clone(),
            glob: settings.path_glob_filter.clone(),
            limit: settings.max_files_per_trigger.max(HELD_AT_LEAST),
            region,
            endpoint,
            credentials,
            client: OnceCell::new(),
            queue: Mutex::new(Queue::default()),
            listed_at: Mutex::new((None, None)),
            armed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The SQS client, built on first use from the same AWS environment as the S3 source
    /// (static keys when given, else the SDK's credential chain: web identity, ECS, IMDS).
    async fn client(&self) -> &aws_sdk_sqs::Client {
        self.client
            .get_or_init(|| async {
                let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
                    .region(aws_config::Region::new(self.region.clone()))
                    .retry_config(
                        aws_config::retry::RetryConfig::standard().with_max_attempts(SQS_ATTEMPTS),
                    );
                if let Some(endpoint) = &self.endpoint {
                    loader = loader.endpoint_url(endpoint);
                }
                if let Some((id, secret, token)) = &self.credentials {
                    loader = loader.credentials_provider(aws_sdk_sqs::config::Credentials::new(
                        id,
                        secret,
                        token.clone(),
                        None,
                        "autoloader",
                    ));
                }
                aws_sdk_sqs::Client::new(&loader.load().await)
            })
            .await
    }

    fn sqs_error(&self, what: &str, e: impl std::fmt::Display) -> SourceError {
        SourceError::ObjectStore {
            url: self.settings.queue_url.clone(),
            reason: format!("{what}: {e}"),
        }
    }

    /// Receives until the queue answers empty (or the limit is held, or [`DRAIN_BUDGET`]
    /// has passed), with
    /// `fetchParallelism` receive requests in flight.
    async fn drain(&self) -> Result<(), SourceError> {
        let client = self.client().await.clone();
        let started = std::time::Instant::now();
        let loops = (0..self.settings.fetch_parallelism).map(|_| {
            let client = client.clone();
            async move {
                loop {
                    {
                        let mut q = self.queue.lock().expect("queue lock");
                        if q.messages.len() >= self.limit || started.elapsed() >= DRAIN_BUDGET {
                            q.more = true;
                            return Ok::<(), SourceError>(());
                        }
                    }
                    let out = client
                        .receive_message()
                        .queue_url(&self.settings.queue_url)
                        .max_number_of_messages(10)
                        // Long polling asks every server, so an empty answer means empty.
                        .wait_time_seconds(1)
                        .message_system_attribute_names(
                            MessageSystemAttributeName::ApproximateReceiveCount,
                        )
                        .send()
                        .await
                        .map_err(|e| {
                            self.sqs_error(
                                "cannot receive from the queue",
                                aws_sdk_sqs::error::DisplayErrorContext(e),
                            )
                        })?;
                    let messages = out.messages();
                    if messages.is_empty() {
                        return Ok(());
                    }
                    for m in messages {
                        self.take(m).await?;
                    }
                }
            }
        });
        futures::future::try_join_all(loops).await?;
        Ok(())
    }

    /// One received message: deleted now when it names nothing to ingest, else held with
    /// its files (resolved by `HEAD`, so their sizes and times are the listing's).
    async fn take(&self, m: &aws_sdk_sqs::types::Message) -> Result<(), SourceError> {
        let id = m.message_id().unwrap_or_default().to_string();
        let Some(receipt) = m.receipt_handle().map(str::to_string) else {
            return Ok(());
        };
        let receive_count = m
            .attributes()
            .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        self.queue.lock().expect("queue lock").tally.received += 1;
        let leave = |reason: &'static str, detail: String| {
            tracing::warn!(
                message = %id, receive_count, reason, detail = %detail,
                "Queue message left in the queue (not deleted): the queue's redrive policy moves it to the dead-letter queue."
            );
            self.queue
                .lock()
                .expect("queue lock")
                .tally
                .left
                .push(LeftMessage {
                    message_id: id.clone(),
                    receive_count,
                    reason,
                    detail,
                });
        };
        let events = match parse_message(m.body().unwrap_or_default()) {
            Ok(events) => events,
            Err(why) => {
                leave(
                    "unparseable",
                    format!("message {id} is not an S3 event notification: {why}"),
                );
                return Ok(());
            }
        };
        let now = crate::clock::now_ms();
        let mut keys = Vec::new();
        let mut skipped = Skipped::default();
        for event in events {
            match self.judge(&event, now) {
                Ok(key) => keys.push(key),
                Err(why) => skipped.count(why),
            }
        }
        // HEADs of this message's keys (a message usually names one).
        let resolved: Vec<(String, Option<FileRef>)> = futures::stream::iter(keys)
            .map(|key| async move {
                let found = self.prefix.head(&key).await?;
                Ok::<_, SourceError>((key, found))
            })
            .buffer_unordered(HEADS_IN_FLIGHT)
            .try_collect()
            .await?;
        let missing: Vec<String> = resolved
            .iter()
            .filter(|(_, f)| f.is_none())
            .map(|(k, _)| self.prefix.uri(k))
            .collect();
        let found: Vec<FileRef> = resolved.into_iter().filter_map(|(_, f)| f).collect();
        {
            let mut q = self.queue.lock().expect("queue lock");
            skipped.add_to(&mut q.tally);
            for file in &found {
                let entry = q
                    .files
                    .entry(file.key.clone())
                    .or_insert_with(|| (file.clone(), Vec::new()));
                entry.0 = file.clone();
                if !entry.1.contains(&id) {
                    entry.1.push(id.clone());
                }
            }
            if !found.is_empty() {
                // A redelivery replaces the receipt (the old one may no longer delete it).
                q.messages.insert(
                    id.clone(),
                    Held {
                        receipt: receipt.clone(),
                        outstanding: found.iter().map(|f| f.key.clone()).collect(),
                        poisoned: !missing.is_empty(),
                    },
                );
            }
        }
        if !missing.is_empty() {
            leave(
                "missing_object",
                format!(
                    "message {id} names {} which does not exist (deleted, or never completed)",
                    missing.join(", ")
                ),
            );
        } else if found.is_empty() {
            // Nothing in it to ingest: acknowledged now (counted above).
            self.delete(&[receipt]).await?;
        }
        Ok(())
    }

    /// The key relative to the prefix an event names, or why it is acknowledged unread.
    fn judge(&self, event: &Event, now_ms: i64) -> Result<String, Skip> {
        let (bucket, key, name, time_ms) = match event {
            Event::Test => return Err(Skip::Test),
            Event::Object {
                bucket,
                key,
                name,
                time_ms,
            } => (bucket, key, name, *time_ms),
        };
        if !name.starts_with("ObjectCreated:") {
            return Err(Skip::NotCreated);
        }
        if bucket != self.prefix.bucket() {
            return Err(Skip::Outside);
        }
        let prefix = self.prefix.prefix();
        let rel = if prefix.is_empty() {
            key.as_str()
        } else {
            match key
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix('/'))
            {
                Some(rel) => rel,
                None => return Err(Skip::Outside),
            }
        };
        if rel.is_empty() || rel.ends_with('/') || rel.split('/').any(is_hidden) {
            return Err(Skip::Outside);
        }
        let file_name = rel.rsplit('/').next().unwrap_or(rel);
        if self.glob.as_ref().is_some_and(|g| !g.is_match(file_name)) {
            return Err(Skip::Filtered);
        }
        if let (Some(age), Some(t)) = (self.settings.max_file_age, time_ms) {
            let age_ms = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
            if now_ms.saturating_sub(t) > age_ms {
                return Err(Skip::TooOld);
            }
        }
        Ok(rel.to_string())
    }

    /// Deletes messages by receipt, ten at a time.
    async fn delete(&self, receipts: &[String]) -> Result<(), SourceError> {
        let client = self.client().await;
        for chunk in receipts.chunks(10) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(r)
                        .build()
                        .map_err(|e| self.sqs_error("cannot delete queue messages", e))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let out = client
                .delete_message_batch()
                .queue_url(&self.settings.queue_url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| {
                    self.sqs_error(
                        "cannot delete queue messages",
                        aws_sdk_sqs::error::DisplayErrorContext(e),
                    )
                })?;
            if let Some(f) = out.failed().first() {
                // Left in the queue, the message comes back and finds its file owned.
                tracing::warn!(
                    code = f.code(),
                    reason = f.message().unwrap_or_default(),
                    failed = out.failed().len(),
                    "Some queue messages could not be deleted; they will be received again and deleted then."
                );
            }
        }
        Ok(())
    }

    /// The files are owned (by a plan, or already): their messages whose files are all
    /// owned are deleted.
    async fn own(&self, keys: &[&str], planned: bool) -> Result<(), SourceError> {
        let receipts = {
            let mut q = self.queue.lock().expect("queue lock");
            let mut receipts = Vec::new();
            for key in keys {
                let Some((_, ids)) = q.files.remove(*key) else {
                    continue;
                };
                for id in ids {
                    let Some(held) = q.messages.get_mut(&id) else {
                        continue;
                    };
                    held.outstanding.remove(*key);
                    if held.outstanding.is_empty() {
                        let held = q.messages.remove(&id).expect("held");
                        if !held.poisoned {
                            receipts.push(held.receipt);
                            if planned {
                                q.tally.planned += 1;
                            } else {
                                q.tally.already_taken += 1;
                            }
                        }
                    }
                }
            }
            receipts
        };
        self.delete(&receipts).await
    }
}

/// Why an event is acknowledged without being read.
#[derive(Debug, Clone, Copy)]
enum Skip {
    Test,
    Outside,
    Filtered,
    TooOld,
    NotCreated,
}

#[derive(Debug, Default)]
struct Skipped([u64; 5]);

impl Skipped {
    fn count(&mut self, why: Skip) {
        self.0[why as usize] += 1;
    }

    fn add_to(&self, t: &mut QueueTally) {
        let [test, outside, filtered, old, not_created] = self.0;
        t.test_events += test;
        t.outside_source += outside;
        t.filtered += filtered;
        t.too_old += old;
        t.not_created += not_created;
    }
}

/// One record of a notification.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    /// `s3:TestEvent`, sent when a notification is configured.
    Test,
    Object {
        bucket: String,
        /// Decoded (S3 form-encodes keys in events: `+` is a space).
        key: String,
        /// `ObjectCreated:Put`, ...
        name: String,
        /// `eventTime`, ms since the epoch.
        time_ms: Option<i64>,
    },
}

/// The records of a message body: an S3 event notification, raw or as an SNS
/// notification's `Message`.
fn parse_message(body: &str) -> Result<Vec<Event>, String> {
    let value: Value =
        serde_json::from_str(body).map_err(|e| format!("the body is not JSON ({e})"))?;
    let value = match value.get("Type").and_then(Value::as_str) {
        Some("Notification") => {
            let inner = value
                .get("Message")
                .and_then(Value::as_str)
                .ok_or("an SNS notification without a Message")?;
            serde_json::from_str(inner)
                .map_err(|e| format!("the SNS notification's Message is not JSON ({e})"))?
        }
        _ => value,
    };
    if value.get("Event").and_then(Value::as_str) == Some("s3:TestEvent") {
        return Ok(vec![Event::Test]);
    }
    let records = value
        .get("Records")
        .and_then(Value::as_array)
        .ok_or("no Records array (not an S3 event notification)")?;
    if records.is_empty() {
        return Err("an empty Records array".into());
    }
    records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let field = |path: &[&str]| {
                let mut v = r;
                for p in path {
                    v = v.get(p)?;
                }
                v.as_str()
            };
            let name = field(&["eventName"]).ok_or(format!("record {i} has no eventName"))?;
            let bucket = field(&["s3", "bucket", "name"])
                .ok_or(format!("record {i} has no s3.bucket.name"))?;
            let key = field(&["s3", "object", "key"])
                .ok_or(format!("record {i} has no s3.object.key"))?;
            let time_ms = match field(&["eventTime"]) {
                None => None,
                Some(t) => Some(event_time(t).ok_or(format!(
                    "record {i}: eventTime {t:?} is not an RFC 3339 time"
                ))?),
            };
            Ok(Event::Object {
                bucket: bucket.to_string(),
                key: form_decode(key),
                name: name.to_string(),
                time_ms,
            })
        })
        .collect()
}

/// An event's time in ms since the epoch: RFC 3339 as S3 writes it, or without an offset
/// (UTC; S3-compatible stores such as moto write that).
fn event_time(t: &str) -> Option<i64> {
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(t) {
        return Some(at.timestamp_millis());
    }
    chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|at| at.and_utc().timestamp_millis())
}

/// A key as S3 writes it into events: form encoding, `+` a space and `%XX` a byte.
fn form_decode(key: &str) -> String {
    super::percent_decode(&key.replace('+', " "))
}

/// The region of an AWS queue URL (`https://sqs.REGION.amazonaws.com/...`).
fn region_of_queue(url: &str) -> Option<String> {
    let host = url::Url::parse(url).ok()?.host_str()?.to_string();
    let rest = host.strip_prefix("sqs.")?;
    let (region, domain) = rest.split_once('.')?;
    domain.starts_with("amazonaws.").then(|| region.to_string())
}

impl FileSource for SqsNotifications {
    fn describe(&self) -> String {
        // The prefix's: commits' lineage and recovery match on it, whichever mode found
        // the files.
        self.prefix.describe()
    }

    fn uri(&self, key: &str) -> String {
        self.prefix.uri(key)
    }

    fn locate(&self, key: &str) -> FileLocation {
        self.prefix.locate(key)
    }

    fn clean<'a>(
        &'a self,
        file: &'a FileRef,
        action: &'a crate::options::CleanAction,
    ) -> BoxFuture<'a, Result<super::Cleaned, SourceError>> {
        self.prefix.clean(file, action)
    }

    /// A full listing when one is due (the first start, then every
    /// `cloudFiles.backfillInterval`), and the queue's files, drained; before a stream
    /// resumed the source, only the listing.
    fn list_files<'a>(
        &'a self,
        _after: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<FileRef>, SourceError>> {
        Box::pin(async move {
            if !self.armed.load(std::sync::atomic::Ordering::SeqCst) {
                return self.prefix.list_files(None).await;
            }
            let now = crate::clock::now_ms();
            let due = {
                let listed = self.listed_at.lock().expect("listing lock");
                match listed.0 {
                    None => true,
                    Some(at) => self.settings.backfill_interval.is_some_and(|every| {
                        now.saturating_sub(at) >= i64::try_from(every.as_millis()).unwrap_or(0)
                    }),
                }
            };
            // The queue first: a file arriving during the listing is in one or the other.
            self.queue.lock().expect("queue lock").more = false;
            self.drain().await?;
            let mut files: HashMap<String, FileRef> = HashMap::new();
            if due {
                tracing::debug!(source = %self.describe(), "Full listing (notification mode).");
                for f in self.prefix.list_files(None).await? {
                    files.insert(f.key.clone(), f);
                }
                self.listed_at.lock().expect("listing lock").1 = Some(now);
            }
            let q = self.queue.lock().expect("queue lock");
            for (key, (file, _)) in &q.files {
                files.entry(key.clone()).or_insert_with(|| file.clone());
            }
            Ok(files.into_values().collect())
        })
    }

    fn discovered<'a>(&'a self, taken: &'a [FileRef]) -> BoxFuture<'a, Result<(), SourceError>> {
        Box::pin(async move {
            let taken: HashSet<&str> = taken.iter().map(|f| f.key.as_str()).collect();
            let owned: Vec<String> = {
                let q = self.queue.lock().expect("queue lock");
                q.files
                    .keys()
                    .filter(|k| !taken.contains(k.as_str()))
                    .cloned()
                    .collect()
            };
            let owned: Vec<&str> = owned.iter().map(String::as_str).collect();
            self.own(&owned, false).await
        })
    }

    fn planned<'a>(&'a self, files: &'a [FileRef]) -> BoxFuture<'a, Result<(), SourceError>> {
        Box::pin(async move {
            let keys: Vec<&str> = files.iter().map(|f| f.key.as_str()).collect();
            self.own(&keys, true).await
        })
    }

    fn queue_tally(&self) -> Option<QueueTally> {
        let mut q = self.queue.lock().expect("queue lock");
        Some(std::mem::take(&mut q.tally))
    }

    fn more_queued(&self) -> bool {
        self.queue.lock().expect("queue lock").more
    }

    fn complete_when_listed(&self) -> bool {
        true
    }

    fn modified_after_grace_ms(&self) -> i64 {
        self.prefix.modified_after_grace_ms()
    }

    fn overlap(&self, location: &Location) -> Overlap {
        self.prefix.overlap(location)
    }

    fn resume(&self, saved: Option<&str>) -> Result<(), SourceError> {
        self.listed_at.lock().expect("listing lock").0 = saved.and_then(|s| s.parse().ok());
        self.armed.store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// When the last full listing whose files were all planned began.
    fn position(&self) -> Option<String> {
        self.listed_at
            .lock()
            .expect("listing lock")
            .0
            .map(|ms| ms.to_string())
    }

    fn advance(&self) {
        let mut listed = self.listed_at.lock().expect("listing lock");
        if let Some(at) = listed.1.take() {
            listed.0 = Some(at);
        }
    }
}

/// Opens notification mode over `location`, which must be an S3 prefix.
pub(super) fn open(
    location: &Location,
    storage: &StorageSettings,
    settings: &Settings,
    notifications: &NotificationSettings,
) -> Result<SqsNotifications, SourceError> {
    let Location::S3(url) = location else {
        return Err(SourceError::Usage(format!(
            "cloudFiles.useNotifications=true needs an S3 source (s3://BUCKET/PREFIX) whose \
             bucket sends its events to cloudFiles.queueUrl; {location} is not one: leave \
             notification mode out (a local folder is watched with file events)"
        )));
    };
    SqsNotifications::open(
        S3Prefix::open(url, storage)?,
        storage,
        settings,
        notifications,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(bucket: &str, key: &str, name: &str) -> Event {
        Event::Object {
            bucket: bucket.into(),
            key: key.into(),
            name: name.into(),
            time_ms: Some(1_767_225_600_000),
        }
    }

    #[test]
    fn raw_sns_and_test_events_parse_and_keys_are_form_decoded() {
        let raw = r#"{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","eventTime":"2026-01-01T00:00:00.000Z","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"lake"},"object":{"key":"in%2Fa+b%2B%C3%A9.json","size":3}}}]}"#;
        assert_eq!(
            parse_message(raw).unwrap(),
            vec![object("lake", "in/a b+é.json", "ObjectCreated:Put")]
        );
        let sns = serde_json::json!({
            "Type": "Notification",
            "MessageId": "x",
            "Message": raw,
        })
        .to_string();
        assert_eq!(parse_message(&sns).unwrap(), parse_message(raw).unwrap());
        let test = r#"{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2026-01-01T00:00:00.000Z","Bucket":"lake"}"#;
        assert_eq!(parse_message(test).unwrap(), vec![Event::Test]);
        assert_eq!(
            event_time("2026-01-01T00:00:00.000Z"),
            Some(1_767_225_600_000)
        );
        assert_eq!(event_time("2026-01-01T00:00:00.5"), Some(1_767_225_600_500));
        assert_eq!(event_time("yesterday"), None);
        for bad in [
            "not json",
            "{}",
            r#"{"Records":[]}"#,
            r#"{"Records":[{"eventName":"ObjectCreated:Put"}]}"#,
            r#"{"Type":"Notification","Message":"nope"}"#,
        ] {
            assert!(parse_message(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn queue_urls_name_their_region() {
        assert_eq!(
            region_of_queue("https://sqs.eu-west-1.amazonaws.com/123456789012/q").as_deref(),
            Some("eu-west-1")
        );
        assert_eq!(
            region_of_queue("http://127.0.0.1:5000/123456789012/q"),
            None
        );
    }
}
