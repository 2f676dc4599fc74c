//! Notification mode: S3 event notifications through SQS, against the real moto server
//! (S3, SQS and bucket notifications in one process on 127.0.0.1), the table read back by
//! Python `deltalake`.

use std::time::Duration;

use aws_sdk_sqs::types::QueueAttributeName;

use crate::common::moto::{Moto, python_rows, run_with, sorted_ids};
use crate::common::{self, Scratch, ok};

/// The queue's visibility timeout (s): a message not deleted comes back this soon.
const VISIBILITY_S: u64 = 2;
/// Receives before a message moves to the dead-letter queue.
const MAX_RECEIVES: u32 = 2;

/// A bucket whose `ObjectCreated` events go to a queue with a dead-letter queue, and an
/// SQS client (with its own runtime, kept for the client's connections).
pub(crate) struct Notified {
    rt: tokio::runtime::Runtime,
    sqs: aws_sdk_sqs::Client,
    pub(crate) queue: String,
    dlq: String,
}

impl Notified {
    /// Creates `bucket`, the queue `NAME` and `NAME-dlq` (redrive after [`MAX_RECEIVES`]),
    /// and the bucket notification of every `ObjectCreated` event under `filter_prefix`
    /// (moto then sends `s3:TestEvent`, left in the queue).
    pub(crate) fn setup(moto: &Moto, bucket: &str, name: &str, filter_prefix: &str) -> Notified {
        moto.create_bucket(bucket);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let sqs = rt.block_on(async {
            let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
                .region(aws_config::Region::new("us-east-1"))
                .endpoint_url(moto.endpoint())
                .credentials_provider(aws_sdk_sqs::config::Credentials::new(
                    "testing", "testing", None, None, "test",
                ))
                .load()
                .await;
            aws_sdk_sqs::Client::new(&config)
        });
        let (queue, dlq) = rt.block_on(async {
            let dlq = sqs
                .create_queue()
                .queue_name(format!("{name}-dlq"))
                .send()
                .await
                .unwrap()
                .queue_url()
                .unwrap()
                .to_string();
            let dlq_arn = sqs
                .get_queue_attributes()
                .queue_url(&dlq)
                .attribute_names(QueueAttributeName::QueueArn)
                .send()
                .await
                .unwrap()
                .attributes()
                .unwrap()[&QueueAttributeName::QueueArn]
                .clone();
            let queue = sqs
                .create_queue()
                .queue_name(name)
                .attributes(
                    QueueAttributeName::VisibilityTimeout,
                    VISIBILITY_S.to_string(),
                )
                .attributes(
                    QueueAttributeName::RedrivePolicy,
                    serde_json::json!({
                        "deadLetterTargetArn": dlq_arn,
                        "maxReceiveCount": MAX_RECEIVES.to_string(),
                    })
                    .to_string(),
                )
                .send()
                .await
                .unwrap()
                .queue_url()
                .unwrap()
                .to_string();
            (queue, dlq)
        });
        let filter = if filter_prefix.is_empty() {
            String::new()
        } else {
            format!(
                "<Filter><S3Key><FilterRule><Name>prefix</Name><Value>{filter_prefix}</Value>\
                 </FilterRule></S3Key></Filter>"
            )
        };
        let config = format!(
            "<NotificationConfiguration><QueueConfiguration><Id>landing</Id>\
             <Queue>arn:aws:sqs:us-east-1:123456789012:{name}</Queue>\
             <Event>s3:ObjectCreated:*</Event>{filter}</QueueConfiguration>\
             </NotificationConfiguration>"
        );
        http_put(moto, &format!("/{bucket}?notification"), &config);
        Notified {
            rt,
            sqs,
            queue,
            dlq,
        }
    }

    /// Sends a message body to the queue (a re-sent event, or poison).
    fn send(&self, body: &str) {
        self.rt
            .block_on(
                self.sqs
                    .send_message()
                    .queue_url(&self.queue)
                    .message_body(body)
                    .send(),
            )
            .unwrap();
    }

    /// (visible, in flight) messages of a queue.
    pub(crate) fn depth(&self, url: &str) -> (u64, u64) {
        let out = self
            .rt
            .block_on(
                self.sqs
                    .get_queue_attributes()
                    .queue_url(url)
                    .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
                    .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
                    .send(),
            )
            .unwrap();
        let a = out.attributes().unwrap();
        let n = |k: &QueueAttributeName| a[k].parse::<u64>().unwrap();
        (
            n(&QueueAttributeName::ApproximateNumberOfMessages),
            n(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
        )
    }

    /// The bodies in the dead-letter queue (received, so in flight afterwards).
    fn dead_letters(&self) -> Vec<String> {
        let out = self
            .rt
            .block_on(
                self.sqs
                    .receive_message()
                    .queue_url(&self.dlq)
                    .max_number_of_messages(10)
                    .send(),
            )
            .unwrap();
        let mut bodies: Vec<String> = out
            .messages()
            .iter()
            .map(|m| m.body().unwrap().to_string())
            .collect();
        bodies.sort();
        bodies
    }
}

/// An unsigned path-style PUT to moto (it checks no signature), as `create_bucket` does.
fn http_put(moto: &Moto, path: &str, body: &str) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", moto.port)).unwrap();
    write!(
        s,
        "PUT {path} HTTP/1.1\r\nhost: 127.0.0.1:{}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        moto.port,
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
}

/// An S3 `ObjectCreated:Put` event as S3 sends it (key form-encoded), at `time`.
fn s3_event(bucket: &str, key: &str, time: &str) -> String {
    let encoded: String = key
        .bytes()
        .map(|b| match b {
            b' ' => "+".to_string(),
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    serde_json::json!({"Records": [{
        "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
        "eventTime": time, "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": bucket}, "object": {"key": encoded, "size": 1}},
    }]})
    .to_string()
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// `ingest SOURCE TABLE --once` in notification mode on `queue`, checkpoint `ckpt`.
fn args(
    source: &str,
    table: &str,
    ckpt: &std::path::Path,
    queue: &str,
    extra: &[&str],
) -> Vec<String> {
    let mut a: Vec<String> = [
        "ingest",
        source,
        table,
        "--once",
        "--checkpoint",
        &ckpt.display().to_string(),
        "-o",
        "cloudFiles.format=json",
        "-o",
        "cloudFiles.useNotifications=true",
        "-o",
        &format!("cloudFiles.queueUrl={queue}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for e in extra {
        a.push("-o".into());
        a.push((*e).to_string());
    }
    a
}

/// A checkpoint's events of one type, read from its event log as it grows (the reports
/// refuse a checkpoint not made yet; every worker of a stream appends to its log).
fn growing_events(ckpt: &std::path::Path, kind: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(ckpt.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == kind)
        .collect()
}

/// The files of every batch committed so far, from the growing event log.
fn committed_files(ckpt: &std::path::Path) -> u64 {
    growing_events(ckpt, "batch_committed")
        .iter()
        .map(|e| e["files"].as_u64().unwrap_or(0))
        .sum()
}

/// The sum of one field over a checkpoint's events of one type.
fn event_sum(ckpt: &std::path::Path, kind: &str, field: &str) -> u64 {
    common::events_of(ckpt, kind)
        .iter()
        .map(|e| e[field].as_u64().unwrap_or(0))
        .sum()
}

#[test]
fn notifications_land_new_files_once_acknowledge_the_rest_and_leave_poison_to_the_dlq() {
    let moto = Moto::start();
    // Present before the notification exists: only the first start's listing finds it.
    moto.create_bucket("lake");
    moto.put("lake", "landing/old.json", common::orders_jsonl(0, 10));
    // Events of the whole bucket, so some fall outside the source's prefix.
    let q = Notified::setup(&moto, "lake", "landing", "");
    let s = Scratch::new();
    let ckpt = s.dir.path().join("ckpt");
    let run = |extra: &[&str]| {
        let mut extra = extra.to_vec();
        extra.push("pathGlobFilter=*.json");
        extra.push("cloudFiles.maxFileAge=30 days");
        run_with(
            &moto,
            &args(
                "s3://lake/landing",
                "s3://lake/bronze",
                &ckpt,
                &q.queue,
                &extra,
            ),
        )
    };
    // A dry run lists the prefix and receives nothing (a receipt counts towards the DLQ).
    let mut dry = args(
        "s3://lake/landing",
        "s3://lake/bronze",
        &ckpt,
        &q.queue,
        &[],
    );
    dry.push("--dry-run".into());
    let planned = ok(&run_with(&moto, &dry));
    assert!(planned.contains("old.json"), "{planned}");
    assert_eq!(q.depth(&q.queue), (1, 0), "the test event is still visible");
    // First start: the listing (old.json) and the queue (the test event), then exit.
    ok(&run(&[]));
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/bronze")),
        (0..10).collect::<Vec<_>>()
    );
    assert_eq!(event_sum(&ckpt, "queue_messages_skipped", "testEvents"), 1);

    // After the start: files through the queue only (the listing is not repeated).
    moto.put("lake", "landing/b.json", common::orders_jsonl(10, 20));
    moto.put(
        "lake",
        "landing/sub/c d+e.json",
        common::orders_jsonl(20, 30),
    );
    // Two events for one upload.
    moto.put_multipart("lake", "landing/multi.json", common::orders_jsonl(30, 40));
    moto.put("lake", "elsewhere/x.json", common::orders_jsonl(100, 110));
    moto.put("lake", "landing/notes.csv", "order_id\n200\n");
    moto.put(
        "lake",
        "landing/_tmp/y.json",
        common::orders_jsonl(300, 310),
    );
    // A re-sent event (in the same drain as the first), a too-old one, poison, and an
    // event for an object that is gone.
    q.send(&s3_event("lake", "landing/b.json", &now_rfc3339()));
    q.send(&s3_event(
        "lake",
        "landing/aged.json",
        "2020-01-01T00:00:00.000Z",
    ));
    q.send("this is not an S3 event");
    q.send(&s3_event("lake", "landing/gone.json", &now_rfc3339()));
    let out = run(&[]);
    let stdout = ok(&out);
    assert_eq!(
        common::summary_figure(&stdout, "files"),
        3,
        "{stdout} {}",
        common::stderr(&out)
    );
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/bronze")),
        (0..40).collect::<Vec<_>>(),
        "old.json, b.json, 'sub/c d+e.json' and multi.json once each"
    );
    assert_eq!(
        event_sum(&ckpt, "queue_messages_skipped", "alreadyTaken"),
        0,
        "both of b.json's and of multi.json's messages were deleted with their plan"
    );
    // elsewhere/, _tmp/, and the table's own objects (the notification covers the bucket).
    let outside = event_sum(&ckpt, "queue_messages_skipped", "outsideSource");
    assert!(outside >= 2 + 2, "{outside}");
    assert_eq!(
        event_sum(&ckpt, "queue_messages_skipped", "filtered"),
        1,
        "notes.csv"
    );
    assert_eq!(
        event_sum(&ckpt, "queue_messages_skipped", "tooOld"),
        1,
        "aged.json"
    );
    let left = common::events_of(&ckpt, "queue_message_left");
    let reasons = |left: &[serde_json::Value]| {
        let mut r: Vec<String> = left
            .iter()
            .map(|e| e["reason"].as_str().unwrap().to_string())
            .collect();
        r.sort();
        r
    };
    assert_eq!(
        reasons(&left),
        ["missing_object", "unparseable"],
        "{left:?}"
    );
    assert!(
        left.iter().any(|e| e["error"]
            .as_str()
            .unwrap()
            .contains("s3://lake/landing/gone.json")),
        "the missing object is named: {left:?}"
    );
    // Received again after the visibility timeout, still left; then redriven to the DLQ.
    for round in 0..MAX_RECEIVES {
        if round == 0 {
            // Redelivered after its file landed: deleted, not ingested again.
            q.send(&s3_event("lake", "landing/b.json", &now_rfc3339()));
        }
        std::thread::sleep(Duration::from_secs(VISIBILITY_S) + Duration::from_millis(500));
        let again = run(&[]);
        assert_eq!(common::summary_figure(&ok(&again), "files"), 0);
    }
    assert_eq!(
        event_sum(&ckpt, "queue_messages_skipped", "alreadyTaken"),
        1,
        "the event re-sent after b.json landed"
    );
    let dead = q.dead_letters();
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert!(
        dead.iter().any(|b| b == "this is not an S3 event"),
        "{dead:?}"
    );
    assert!(
        dead.iter().any(|b| b.contains("landing%2Fgone.json")),
        "{dead:?}"
    );
    assert_eq!(
        q.depth(&q.queue),
        (0, 0),
        "nothing else is stuck in the queue"
    );
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/bronze")),
        (0..40).collect::<Vec<_>>()
    );
    assert!(
        event_sum(&ckpt, "queue_message_left", "receiveCount") >= 2 + 2 * 2,
        "each receipt of the poison is reported with its receive count"
    );
}

/// A kill at each failpoint of a batch taken from the queue, then a rerun: every file
/// lands once and the queue is left empty.
#[test]
fn a_kill_at_each_failpoint_then_a_rerun_lands_every_file_once_and_empties_the_queue() {
    let moto = Moto::start();
    let points: Vec<&str> = autoloader::testing::failpoint::NAMES
        .iter()
        .copied()
        .filter(|p| !p.contains("schema"))
        .chain([autoloader::testing::failpoint::AFTER_QUEUE_DELETE])
        .collect();
    for (n, point) in points.iter().enumerate() {
        let bucket = format!("lake{n}");
        let q = Notified::setup(&moto, &bucket, &format!("q{n}"), "landing/");
        let s = Scratch::new();
        let ckpt = s.dir.path().join("ckpt");
        let source = format!("s3://{bucket}/landing");
        let table = format!("s3://{bucket}/bronze");
        let a = args(
            &source,
            &table,
            &ckpt,
            &q.queue,
            &["cloudFiles.maxFilesPerTrigger=2"],
        );
        // The first start lists an empty prefix (and takes the test event).
        ok(&run_with(&moto, &a));
        for i in 0..5u64 {
            moto.put(
                &bucket,
                &format!("landing/{i}.json"),
                common::orders_jsonl(i * 10, i * 10 + 10),
            );
        }
        let env = moto.env();
        let crashed = std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
            .args(&a)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env("AUTOLOADER_FAILPOINT", format!("{point}=kill"))
            .output()
            .unwrap();
        assert!(
            !crashed.status.success(),
            "{point}: the failpoint killed it"
        );
        // Messages the dead run received but did not delete come back after the timeout.
        std::thread::sleep(Duration::from_secs(VISIBILITY_S) + Duration::from_millis(500));
        let out = run_with(&moto, &a);
        ok(&out);
        assert_eq!(
            sorted_ids(&python_rows(&moto, &table)),
            (0..50).collect::<Vec<_>>(),
            "{point}: every file once"
        );
        assert_eq!(q.depth(&q.queue), (0, 0), "{point}: the queue is empty");
        assert!(
            q.dead_letters().is_empty(),
            "{point}: nothing dead-lettered"
        );
    }
}

#[test]
fn notification_mode_is_refused_without_a_queue_or_an_s3_source() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 1));
    let ingest = |opts: &[&str]| {
        let mut a: Vec<String> = vec![
            "ingest".into(),
            s.landing().display().to_string(),
            s.table().display().to_string(),
            "--once".into(),
        ];
        for o in opts {
            a.push("-o".into());
            a.push((*o).into());
        }
        common::run(&a, &[])
    };
    let cases: [(&[&str], &str); 4] = [
        (
            &["cloudFiles.useNotifications=true"],
            "needs cloudFiles.queueUrl",
        ),
        (
            &[
                "cloudFiles.useNotifications=true",
                "cloudFiles.queueUrl=https://sqs.eu-west-1.amazonaws.com/123456789012/q",
            ],
            "needs an S3 source",
        ),
        (
            &["cloudFiles.queueUrl=https://sqs.eu-west-1.amazonaws.com/123456789012/q"],
            "applies to notification mode only",
        ),
        (
            &[
                "cloudFiles.useNotifications=true",
                "cloudFiles.queueUrl=https://sqs.eu-west-1.amazonaws.com/123456789012/q",
                "cloudFiles.fetchParallelism=0",
            ],
            "cloudFiles.fetchParallelism",
        ),
    ];
    for (opts, needle) in cases {
        let out = ingest(opts);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{opts:?}: {}",
            common::stderr(&out)
        );
        assert!(
            common::stderr(&out).contains(needle),
            "{opts:?}: {}",
            common::stderr(&out)
        );
    }
    assert!(
        !s.table().join("_delta_log").exists(),
        "nothing was written"
    );
}

/// A watcher in notification mode takes files from the queue as they are uploaded, once.
#[test]
fn a_watcher_takes_uploads_from_the_queue_as_they_arrive() {
    let moto = Moto::start();
    let q = Notified::setup(&moto, "lake", "watched", "landing/");
    let s = Scratch::new();
    let ckpt = s.dir.path().join("ckpt");
    let mut a = args(
        "s3://lake/landing",
        "s3://lake/bronze",
        &ckpt,
        &q.queue,
        &[],
    );
    a.retain(|x| x != "--once");
    a.extend(["--poll-interval".to_string(), "0.3".to_string()]);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
        .args(&a)
        .envs(moto.env())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let events = |kind: &str| growing_events(&ckpt, kind);
    let committed_files = || committed_files(&ckpt);
    for i in 0..3u64 {
        // One at a time, each after the watcher started (the first listing found none).
        if i == 0 {
            common::wait_until("the watcher to start", Duration::from_secs(30), || {
                !events("stream_started").is_empty()
            });
        }
        moto.put(
            "lake",
            &format!("landing/{i}.json"),
            common::orders_jsonl(i * 10, i * 10 + 10),
        );
        common::wait_until(
            "the watcher to commit the upload",
            Duration::from_secs(60),
            || committed_files() == i + 1,
        );
    }
    // A duplicate of an event already taken: deleted, nothing ingested again.
    q.send(&s3_event("lake", "landing/1.json", &now_rfc3339()));
    common::wait_until(
        "the duplicate to be deleted",
        Duration::from_secs(30),
        || q.depth(&q.queue) == (0, 0),
    );
    // SAFETY: kill(2) with our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(committed_files(), 3);
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/bronze")),
        (0..30).collect::<Vec<_>>()
    );
}

/// The first start lists; later runs read only the queue, so a lost event's file waits
/// for the next `cloudFiles.backfillInterval` listing, which finds it once.
#[test]
fn a_lost_event_is_found_by_the_backfill_listing_only() {
    let moto = Moto::start();
    let q = Notified::setup(&moto, "lake", "backfilled", "landing/");
    let s = Scratch::new();
    let ckpt = s.dir.path().join("ckpt");
    let run = |backfill: &str| {
        let out = run_with(
            &moto,
            &args(
                "s3://lake/landing",
                "s3://lake/bronze",
                &ckpt,
                &q.queue,
                &[&format!("cloudFiles.backfillInterval={backfill}")],
            ),
        );
        common::summary_figure(&ok(&out), "files")
    };
    moto.put("lake", "landing/0.json", common::orders_jsonl(0, 10));
    assert_eq!(
        run("1h"),
        1,
        "the first start lists (and takes the event's file once)"
    );
    moto.put("lake", "landing/1.json", common::orders_jsonl(10, 20));
    // The event is lost.
    q.rt.block_on(q.sqs.purge_queue().queue_url(&q.queue).send())
        .unwrap();
    assert_eq!(run("1h"), 0, "no listing before the backfill interval");
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(run("1s"), 1, "the backfill listing finds the file");
    assert_eq!(run("1h"), 0);
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/bronze")),
        (0..20).collect::<Vec<_>>()
    );
}

/// SIGKILLs at pseudo-random moments while a queue is drained, then a clean run: every
/// file lands once and nothing is left in the queue or its dead-letter queue.
#[test]
fn random_kills_while_draining_the_queue_lose_and_duplicate_nothing() {
    let moto = Moto::start();
    let q = Notified::setup(&moto, "lake", "killed", "landing/");
    let s = Scratch::new();
    let ckpt = s.dir.path().join("ckpt");
    let a = args(
        "s3://lake/landing",
        "s3://lake/bronze",
        &ckpt,
        &q.queue,
        &["cloudFiles.maxFilesPerTrigger=3"],
    );
    ok(&run_with(&moto, &a));
    for i in 0..12u64 {
        moto.put(
            "lake",
            &format!("landing/{i:02}.json"),
            common::orders_jsonl(i * 10, i * 10 + 10),
        );
    }
    let env = moto.env();
    let mut seed: u64 = 0x5eed_5a5a;
    let mut kills = 0u64;
    loop {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let delay = Duration::from_millis(100 + kills * 100 + (seed >> 33) % 400);
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
            .args(&a)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "a run failed: {status:?}");
            break;
        }
        child.kill().unwrap();
        child.wait().unwrap();
        kills += 1;
        assert!(kills < 60, "the stream never finished");
    }
    // Messages a killed run held come back after the timeout and find their files owned.
    std::thread::sleep(Duration::from_secs(VISIBILITY_S) + Duration::from_millis(500));
    ok(&run_with(&moto, &a));
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/bronze")),
        (0..120).collect::<Vec<_>>(),
        "every file once after {kills} kills"
    );
    assert_eq!(q.depth(&q.queue), (0, 0), "the queue is empty");
    // A run killed between a plan and its delete leaves the message to come back; with
    // kills this frequent its receive count can pass maxReceiveCount after its file was
    // owned. Such a dead letter is only ever an event for a file that landed (all did).
    for body in q.dead_letters() {
        assert!(
            body.contains("ObjectCreated") && body.contains("landing%2F"),
            "only events of landed files are dead-lettered: {body}"
        );
    }
}

/// `--worker auto`: three identical watcher processes on one queue and one table, one
/// SIGKILLed mid-stream and started again (it takes the slot left free, replaying what
/// the dead one planned), while a producer uploads: every row lands once, the queue ends
/// empty, and more than one worker committed batches.
#[test]
fn competing_workers_on_one_queue_land_every_file_once_through_a_kill() {
    let moto = Moto::start();
    let q = Notified::setup(&moto, "lake", "workers", "landing/");
    let s = Scratch::new();
    let ckpt = s.dir.path().join("ckpt");
    let mut a = args(
        "s3://lake/landing",
        "s3://lake/bronze",
        &ckpt,
        &q.queue,
        &["cloudFiles.maxFilesPerTrigger=2"],
    );
    a.retain(|x| x != "--once");
    a.extend(
        ["--poll-interval", "0.2", "--worker", "auto"]
            .iter()
            .map(|s| s.to_string()),
    );
    let logs = s.dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let start = |n: usize| {
        std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
            .args(&a)
            .envs(moto.env())
            .env("RUST_LOG", "autoloader=info")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(logs.join(format!("w{n}.log"))).unwrap())
            .spawn()
            .unwrap()
    };
    let events = |kind: &str| growing_events(&ckpt, kind);
    let committed_files = || committed_files(&ckpt);
    let mut workers: Vec<std::process::Child> = (0..3).map(start).collect();
    common::wait_until("three workers to start", Duration::from_secs(60), || {
        events("stream_started").len() == 3
    });
    const FILES: u64 = 40;
    for i in 0..FILES {
        moto.put(
            "lake",
            &format!("landing/{i:02}.json"),
            common::orders_jsonl(i * 10, i * 10 + 10),
        );
        if i == 15 {
            // SIGKILL, whatever it was doing, then an identical process in its place.
            workers[1].kill().unwrap();
            workers[1].wait().unwrap();
            workers[1] = start(3);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    common::wait_until(
        "the workers to commit every upload",
        Duration::from_secs(120),
        || committed_files() >= FILES,
    );
    // Messages the killed worker held come back after the timeout and find their files owned.
    std::thread::sleep(Duration::from_secs(VISIBILITY_S) + Duration::from_secs(2));
    for w in &workers {
        // SAFETY: kill(2) with our own child's pid.
        unsafe {
            libc::kill(w.id() as i32, libc::SIGTERM);
        }
    }
    for (w, log) in workers.into_iter().zip([0, 3, 2]) {
        let out = w.wait_with_output().unwrap();
        let log = std::fs::read_to_string(logs.join(format!("w{log}.log"))).unwrap();
        assert!(out.status.success(), "{:?}\n{log}", out.status);
    }
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/bronze")),
        (0..FILES as i64 * 10).collect::<Vec<_>>(),
        "every file once across the workers"
    );
    assert_eq!(committed_files(), FILES, "no file committed twice");
    assert_eq!(q.depth(&q.queue), (0, 0), "the queue is empty");
    let committing = (0..4)
        .filter(|n| {
            std::fs::read_to_string(logs.join(format!("w{n}.log")))
                .unwrap()
                .contains("Committed batch.")
        })
        .count();
    assert!(
        committing >= 2,
        "the work was shared: {committing} workers committed"
    );
    let slots: Vec<_> = std::fs::read_dir(ckpt.join("workers"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        slots.len(),
        3,
        "the restarted worker took the dead one's slot: {slots:?}"
    );
}

#[test]
fn worker_slots_are_refused_without_notifications() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 2));
    let out = s
        .ingest_command()
        .args(["--worker", "auto"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    assert!(common::stderr(&out).contains("cloudFiles.useNotifications"));
}

/// Three `--once --worker auto` processes started together on a bucket that already holds
/// 30 files: each one's first listing finds every file, so only the per-file claims keep
/// a file from landing three times.
#[test]
fn workers_started_together_on_a_full_bucket_split_it_by_claims() {
    let moto = Moto::start();
    let q = Notified::setup(&moto, "lake", "together", "landing/");
    for i in 0..30u64 {
        moto.put(
            "lake",
            &format!("landing/{i:02}.json"),
            common::orders_jsonl(i * 10, i * 10 + 10),
        );
    }
    let s = Scratch::new();
    let ckpt = s.dir.path().join("ckpt");
    let mut a = args(
        "s3://lake/landing",
        "s3://lake/bronze",
        &ckpt,
        &q.queue,
        &["cloudFiles.maxFilesPerTrigger=3"],
    );
    a.extend(["--worker".to_string(), "auto".to_string()]);
    let workers: Vec<_> = (0..3)
        .map(|_| {
            std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
                .args(&a)
                .envs(moto.env())
                .env("RUST_LOG", "autoloader=debug")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut left_to_others = 0;
    for w in workers {
        let out = w.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        left_to_others += stderr
            .matches("Another worker's batch owns this file.")
            .count();
    }
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/bronze")),
        (0..300).collect::<Vec<_>>(),
        "every file once, though every worker listed all of them"
    );
    assert!(left_to_others > 0, "the claims decided between the workers");
    let slots = std::fs::read_dir(ckpt.join("workers")).unwrap().count();
    assert_eq!(slots, 3, "three processes, three slots");
}

/// Two pinned workers (`--worker 0`, `--worker 1`) drain one queue; worker 0 is SIGKILLed
/// at each failpoint, worker 1 runs beside it, then worker 1 runs again: every file once, the
/// queue empty, whatever step the kill hit (a plan without its claims, claims without
/// their deletes, a commit not marked).
#[test]
fn a_worker_killed_at_each_failpoint_beside_another_lands_every_file_once() {
    let moto = Moto::start();
    let points: Vec<&str> = autoloader::testing::failpoint::NAMES
        .iter()
        .copied()
        .filter(|p| !p.contains("schema"))
        .chain([
            autoloader::testing::failpoint::AFTER_CLAIMS,
            autoloader::testing::failpoint::AFTER_QUEUE_DELETE,
        ])
        .collect();
    for (n, point) in points.iter().enumerate() {
        let bucket = format!("wk{n}");
        let q = Notified::setup(&moto, &bucket, &format!("wq{n}"), "landing/");
        let s = Scratch::new();
        let ckpt = s.dir.path().join("ckpt");
        let source = format!("s3://{bucket}/landing");
        let table = format!("s3://{bucket}/bronze");
        let worker = |slot: &str| {
            let mut a = args(
                &source,
                &table,
                &ckpt,
                &q.queue,
                &["cloudFiles.maxFilesPerTrigger=2"],
            );
            a.extend(["--worker".to_string(), slot.to_string()]);
            a
        };
        // Both slots' first starts list an empty prefix.
        ok(&run_with(&moto, &worker("0")));
        ok(&run_with(&moto, &worker("1")));
        for i in 0..8u64 {
            moto.put(
                &bucket,
                &format!("landing/{i}.json"),
                common::orders_jsonl(i * 10, i * 10 + 10),
            );
        }
        let spawn = |slot: &str, failpoint: Option<&str>| {
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"));
            cmd.args(worker(slot))
                .envs(moto.env())
                .env("RUST_LOG", "autoloader=info")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped());
            if let Some(p) = failpoint {
                cmd.env("AUTOLOADER_FAILPOINT", format!("{p}=kill"));
            }
            cmd.spawn().unwrap()
        };
        let killed = spawn("0", Some(point));
        // Worker 0 receives first, so it holds files when its failpoint comes.
        std::thread::sleep(Duration::from_millis(300));
        let beside = spawn("1", None);
        let killed = killed.wait_with_output().unwrap();
        assert!(
            !killed.status.success(),
            "{point}: the failpoint killed worker 0: {}",
            String::from_utf8_lossy(&killed.stderr)
        );
        let beside = beside.wait_with_output().unwrap();
        assert!(
            beside.status.success(),
            "{point}: {}",
            String::from_utf8_lossy(&beside.stderr)
        );
        // Messages the dead worker received but did not delete come back after the timeout.
        // Only worker 1 runs again: it adopts slot 0 (free since its holder died) and
        // finishes its unfinished batch, whose files no other slot may take.
        std::thread::sleep(Duration::from_secs(VISIBILITY_S) + Duration::from_millis(500));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
            .args(worker("1"))
            .envs(moto.env())
            .env("RUST_LOG", "autoloader=info")
            .output()
            .unwrap();
        ok(&out);
        // Killed before its batch was marked done, slot 0 had a batch to finish: worker 1
        // adopted it, at the end of its first run (worker 0 was dead by then) or its second.
        if *point != "after-mark" {
            let logs = format!(
                "{}{}",
                String::from_utf8_lossy(&beside.stderr),
                common::stderr(&out)
            );
            assert!(
                logs.contains("Adopting a dead worker's slot"),
                "{point}: {logs}"
            );
        }
        assert_eq!(
            sorted_ids(&python_rows(&moto, &table)),
            (0..80).collect::<Vec<_>>(),
            "{point}: every file once"
        );
        assert_eq!(q.depth(&q.queue), (0, 0), "{point}: the queue is empty");
    }
}

/// Two watching workers; worker 0 is SIGKILLed right after it wrote a plan (or claimed its
/// files) and is not started again. Its files were never announced on the queue (they lie
/// under a prefix the bucket does not notify), so nothing but worker 1 adopting slot 0
/// while it watches lands them: every file once, the queue empty, the adoption in its log.
#[test]
fn a_watching_worker_adopts_the_slot_of_a_worker_that_died_beside_it() {
    let moto = Moto::start();
    for (n, point) in ["after-plan", autoloader::testing::failpoint::AFTER_CLAIMS]
        .iter()
        .enumerate()
    {
        let bucket = format!("adopt{n}");
        let q = Notified::setup(&moto, &bucket, &format!("adoptq{n}"), "landing/q/");
        let s = Scratch::new();
        let ckpt = s.dir.path().join("ckpt");
        let source = format!("s3://{bucket}/landing");
        let table = format!("s3://{bucket}/bronze");
        let logs = s.dir.path().join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let spawn = |slot: &str, failpoint: Option<&str>| {
            let mut a = args(&source, &table, &ckpt, &q.queue, &[]);
            a.retain(|x| x != "--once");
            a.extend(
                ["--poll-interval", "0.2", "--worker", slot]
                    .iter()
                    .map(|s| s.to_string()),
            );
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"));
            cmd.args(a)
                .envs(moto.env())
                // Adoption is looked for once a lease period: a short one.
                .env("AUTOLOADER_LEASE_MS", "1000")
                .env("RUST_LOG", "autoloader=info")
                .stdout(std::process::Stdio::null())
                .stderr(std::fs::File::create(logs.join(format!("w{slot}.log"))).unwrap());
            if let Some(p) = failpoint {
                cmd.env("AUTOLOADER_FAILPOINT", format!("{p}=kill"));
            }
            cmd.spawn().unwrap()
        };
        // Slot 1's first start lists the prefix, and so does each start until a listing's
        // files were all planned: one file planned now, so its watcher reads the queue alone.
        moto.put(&bucket, "landing/q/6.json", common::orders_jsonl(60, 70));
        let mut once = args(&source, &table, &ckpt, &q.queue, &[]);
        once.extend(["--worker".to_string(), "1".to_string()]);
        ok(&run_with(&moto, &once));
        let survivor = spawn("1", None);
        common::wait_until("worker 1 to start", Duration::from_secs(60), || {
            growing_events(&ckpt, "stream_started").len() == 2
        });
        // Not notified: only a listing (worker 0's first start) finds these.
        for i in 0..3u64 {
            moto.put(
                &bucket,
                &format!("landing/quiet/{i}.json"),
                common::orders_jsonl(i * 10, i * 10 + 10),
            );
        }
        let mut killed = spawn("0", Some(point));
        let status = killed.wait().unwrap();
        assert!(!status.success(), "{point}: the failpoint killed worker 0");
        // Announced on the queue: worker 1 takes these meanwhile.
        for i in 3..6u64 {
            moto.put(
                &bucket,
                &format!("landing/q/{i}.json"),
                common::orders_jsonl(i * 10, i * 10 + 10),
            );
        }
        let log = || std::fs::read_to_string(logs.join("w1.log")).unwrap_or_default();
        common::wait_until(
            "worker 1 to land every file, the dead worker's too",
            Duration::from_secs(60),
            || committed_files(&ckpt) >= 7 && q.depth(&q.queue) == (0, 0),
        );
        let adopting = log()
            .lines()
            .filter(|l| l.contains("Adopting a dead worker's slot") && l.contains("slot=0"))
            .count();
        assert_eq!(adopting, 1, "{point}: {}", log());
        // SAFETY: kill(2) with our own child's pid.
        unsafe {
            libc::kill(survivor.id() as i32, libc::SIGTERM);
        }
        let out = survivor.wait_with_output().unwrap();
        assert!(out.status.success(), "{point}: {}", log());
        assert_eq!(
            sorted_ids(&python_rows(&moto, &table)),
            (0..70).collect::<Vec<_>>(),
            "{point}: every file once"
        );
        assert_eq!(
            committed_files(&ckpt),
            7,
            "{point}: no file committed twice"
        );
        assert_eq!(q.depth(&q.queue), (0, 0), "{point}: the queue is empty");
    }
}

/// `status` on a worker stream shows each slot: its last batch, pending files, holder and
/// lease age; free after `--once` runs, held (with a fresh lease) while a worker watches.
#[test]
fn status_lists_every_worker_slot() {
    let moto = Moto::start();
    let q = Notified::setup(&moto, "lake", "status", "landing/");
    let s = Scratch::new();
    let ckpt = s.dir.path().join("ckpt");
    let worker = |slot: &str| {
        let mut a = args(
            "s3://lake/landing",
            "s3://lake/bronze",
            &ckpt,
            &q.queue,
            &["cloudFiles.maxFilesPerTrigger=1"],
        );
        a.extend(["--worker".to_string(), slot.to_string()]);
        a
    };
    // Both first starts list an empty prefix; then slot 0 takes three files, slot 1 two.
    ok(&run_with(&moto, &worker("0")));
    ok(&run_with(&moto, &worker("1")));
    let put = |range: std::ops::Range<u64>| {
        for i in range {
            moto.put(
                "lake",
                &format!("landing/{i}.json"),
                common::orders_jsonl(i * 10, i * 10 + 10),
            );
        }
    };
    put(0..3);
    ok(&run_with(&moto, &worker("0")));
    // Each slot numbers its own batches from 0 (one file a batch; a batch whose files
    // another slot owns commits none).
    let batches = || growing_events(&ckpt, "batch_committed").len() as u64;
    let of_0 = batches();
    put(3..5);
    ok(&run_with(&moto, &worker("1")));
    let of_1 = batches() - of_0;
    // A slot's batch numbers: its plans', some of which another slot's claims emptied.
    let numbers: Vec<u64> = growing_events(&ckpt, "batch_committed")
        .iter()
        .map(|e| e["batch"].as_u64().unwrap())
        .collect();
    let (last_0, last_1) = (numbers[of_0 as usize - 1], *numbers.last().unwrap());
    assert_eq!(committed_files(&ckpt), 5);
    assert!(of_0 >= 3 && of_1 >= 2, "{of_0} {of_1}");
    let status = |json: bool| {
        let mut a = vec![
            "status".to_string(),
            "--checkpoint".to_string(),
            ckpt.display().to_string(),
        ];
        if json {
            a.push("--json".into());
        }
        ok(&run_with(&moto, &a))
    };
    let st: serde_json::Value = serde_json::from_str(&status(true)).unwrap();
    let slots = st["workers"].as_array().expect("a workers list");
    assert_eq!(slots.len(), 2, "{st}");
    for (w, (slot, last)) in slots.iter().zip([(0, last_0), (1, last_1)]) {
        assert_eq!(w["slot"], slot, "{st}");
        assert_eq!(w["lastBatch"], last, "{st}");
        assert_eq!(w["batches"], [of_0, of_1][slot], "{st}");
        assert_eq!(w["pendingFiles"], 0, "{st}");
        assert!(w["holder"].is_null(), "{st}");
        assert!(w["leaseAgeSeconds"].is_null(), "{st}");
    }
    assert_eq!(st["batches"], of_0 + of_1, "{st}");
    assert_eq!(st["rows"], 50, "{st}");
    // The stream-wide figures are the slots' sums, whichever machine ran them.
    assert_eq!(st["filesIngested"], 5, "{st}");
    assert_eq!(st["filesPending"], 0, "{st}");
    assert_eq!(
        slots
            .iter()
            .map(|w| w["rows"].as_u64().unwrap())
            .sum::<u64>(),
        50,
        "{st}"
    );
    assert!(st["running"].is_null(), "{st}");
    let text = status(false);
    assert!(text.contains("workers:"), "{text}");
    assert!(
        text.contains("ingested:       5 files,") && text.contains("pending:        0 files"),
        "{text}"
    );
    assert!(!text.contains('?'), "every figure known: {text}");
    let row = |slot: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(slot))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    assert_eq!(
        row("0"),
        ["0", &last_0.to_string(), "0", "-", "free"],
        "{text}"
    );
    assert_eq!(
        row("1"),
        ["1", &last_1.to_string(), "0", "-", "free"],
        "{text}"
    );

    // Slot 1 held by a watcher: its holder and a lease age under a lease length.
    let mut a = worker("1");
    a.retain(|x| x != "--once");
    a.extend(["--poll-interval".to_string(), "0.2".to_string()]);
    let started = growing_events(&ckpt, "stream_started").len();
    let watcher = std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
        .args(&a)
        .envs(moto.env())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    common::wait_until("the watcher to start", Duration::from_secs(60), || {
        growing_events(&ckpt, "stream_started").len() > started
    });
    let st: serde_json::Value = serde_json::from_str(&status(true)).unwrap();
    let held = &st["workers"][1];
    assert!(
        held["holder"]
            .as_str()
            .is_some_and(|h| h.contains(&format!("pid {}", watcher.id()))),
        "{st}"
    );
    let age = held["leaseAgeSeconds"].as_f64().expect("a lease age");
    assert!((0.0..60.0).contains(&age), "{st}");
    assert_eq!(
        held["lastBatch"], last_1,
        "from the watcher's live figures: {st}"
    );
    assert!(st["workers"][0]["holder"].is_null(), "{st}");
    assert_eq!(st["running"], "1 of 2 worker slots held", "{st}");
    // SAFETY: kill(2) with our own child's pid.
    unsafe {
        libc::kill(watcher.id() as i32, libc::SIGTERM);
    }
    let out = watcher.wait_with_output().unwrap();
    assert!(out.status.success());
}

/// JSON lines of orders `from..to` with one more column `col` (`"<col><i>"`).
fn orders_with(from: u64, to: u64, col: &str) -> String {
    (from..to)
        .map(|i| {
            format!(
                "{{\"order_id\": {i}, \"amount\": {}, \"user_id\": \"u{i}\", \"{col}\": \"{col}{i}\"}}\n",
                1000 + i
            )
        })
        .collect()
}

/// The data columns of a local `_schemas/N` file.
fn schema_columns(path: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let entry: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
    let data = entry
        .as_object()
        .unwrap()
        .values()
        .filter_map(|v| v.as_str())
        .filter_map(|s| serde_json::from_str::<serde_json::Value>(s).ok())
        .find(|v| v["fields"].is_array())
        .expect("a data schema");
    data["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

/// Two workers in `addNewColumns` mode (the default). Worker 1 holds a batch under schema
/// version 0 just before its Delta commit while worker 0 lands a file with a new column `x`
/// (`_schemas/1`, the table widened): worker 1's commit meets the changed table and lands,
/// and its next batch is read with version 1. Then both evolve at once: worker 1 plans a
/// file with a new column `y` and is held there while worker 0 lands one with `z`
/// (`_schemas/2`); worker 1 finds version 2 taken, reads with it and writes version 3
/// with all three. Every row once, every value of the new columns in the table.
#[test]
fn schema_evolution_by_one_worker_reaches_the_other_and_concurrent_ones_merge() {
    let moto = Moto::start();
    let q = Notified::setup(&moto, "evo", "evo", "landing/");
    let s = Scratch::new();
    let ckpt = s.dir.path().join("ckpt");
    let logs = s.dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let worker = |slot: &str, once: bool| {
        let mut a = args(
            "s3://evo/landing",
            "s3://evo/bronze",
            &ckpt,
            &q.queue,
            &["cloudFiles.maxFilesPerTrigger=1"],
        );
        if !once {
            a.retain(|x| x != "--once");
            a.extend(["--poll-interval".to_string(), "0.2".to_string()]);
        }
        a.extend(["--worker".to_string(), slot.to_string()]);
        a
    };
    let spawn = |failpoint: &str, log: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
            .args(worker("1", false))
            .envs(moto.env())
            .env("RUST_LOG", "autoloader=info")
            .env("AUTOLOADER_FAILPOINT", failpoint)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(logs.join(log)).unwrap())
            .spawn()
            .unwrap()
    };
    let log = |name: &str| std::fs::read_to_string(logs.join(name)).unwrap_or_default();
    let stop = |w: std::process::Child, name: &str| {
        // SAFETY: kill(2) with our own child's pid.
        unsafe {
            libc::kill(w.id() as i32, libc::SIGTERM);
        }
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", log(name));
    };
    let started = || growing_events(&ckpt, "stream_started").len();
    // Worker 0, once, with its info lines (which say whose schema version won).
    let run_0 = || {
        let mut env = moto.env();
        env.push(("RUST_LOG", "autoloader=info".into()));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        common::run(&worker("0", true), &env)
    };
    // Version 0 from a first file; both slots' first starts.
    moto.put("evo", "landing/base.json", common::orders_jsonl(0, 10));
    ok(&run_with(&moto, &worker("0", true)));
    ok(&run_with(&moto, &worker("1", true)));

    // 1. Worker 1 holds a batch of version 0 before its commit; worker 0 evolves meanwhile.
    let before = started();
    let b = spawn("before-delta-commit=sleep(10000)", "b1.log");
    common::wait_until("worker 1 to start", Duration::from_secs(60), || {
        started() > before
    });
    moto.put("evo", "landing/b1.json", common::orders_jsonl(100, 110));
    common::wait_until(
        "worker 1 to hold its batch before the commit",
        Duration::from_secs(60),
        || log("b1.log").contains("failpoint before-delta-commit reached"),
    );
    moto.put("evo", "landing/a1.json", orders_with(200, 210, "x"));
    let a = run_0();
    ok(&a);
    assert!(
        common::stderr(&a).contains("Schema evolved"),
        "{}",
        common::stderr(&a)
    );
    assert!(
        !log("b1.log").contains("Committed batch."),
        "worker 1 was still held: {}",
        log("b1.log")
    );
    common::wait_until(
        "worker 1's held batch to land",
        Duration::from_secs(60),
        || committed_files(&ckpt) >= 3,
    );
    // Its next batch is read with the version worker 0 wrote.
    moto.put("evo", "landing/b2.json", common::orders_jsonl(300, 310));
    common::wait_until("worker 1's next batch", Duration::from_secs(60), || {
        committed_files(&ckpt) >= 4
    });
    let last = growing_events(&ckpt, "batch_committed");
    assert_eq!(
        last.last().unwrap()["schemaVersion"],
        1,
        "worker 1's next batch uses version 1: {}",
        log("b1.log")
    );
    assert!(
        log("b1.log").contains("Another worker evolved the schema"),
        "{}",
        log("b1.log")
    );
    stop(b, "b1.log");

    // 2. Both evolve: worker 1 holds a planned file with `y`; worker 0 lands one with `z`.
    let before = started();
    let b = spawn("after-plan=sleep(10000)", "b2.log");
    common::wait_until("worker 1 to start again", Duration::from_secs(60), || {
        started() > before
    });
    moto.put("evo", "landing/b3.json", orders_with(400, 410, "y"));
    common::wait_until(
        "worker 1 to hold its planned batch",
        Duration::from_secs(60),
        || log("b2.log").contains("failpoint after-plan reached"),
    );
    moto.put("evo", "landing/a2.json", orders_with(500, 510, "z"));
    let a = run_0();
    ok(&a);
    common::wait_until("worker 1's evolving batch", Duration::from_secs(60), || {
        committed_files(&ckpt) >= 6
    });
    // Worker 0 evolves first while worker 1 is held; on a slow machine the other way round.
    let won = "Another worker wrote this schema version first";
    assert!(
        log("b2.log").contains(won) || common::stderr(&a).contains(won),
        "{}\n{}",
        log("b2.log"),
        common::stderr(&a)
    );
    stop(b, "b2.log");

    let mut versions: Vec<u64> = std::fs::read_dir(ckpt.join("_schemas"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().unwrap().parse().ok())
        .collect();
    versions.sort_unstable();
    assert_eq!(versions, [0, 1, 2, 3], "one version per evolution");
    let columns = schema_columns(&ckpt.join("_schemas/3"));
    for c in ["x", "y", "z"] {
        assert!(columns.iter().any(|n| n == c), "{c} in {columns:?}");
    }
    let py = python_rows(&moto, "s3://evo/bronze");
    let ids: Vec<i64> = [0..10, 100..110, 200..210, 300..310, 400..410, 500..510]
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(sorted_ids(&py), ids, "every row once");
    assert_eq!(committed_files(&ckpt), 6, "no file committed twice");
    for c in ["x", "y", "z"] {
        assert!(py["types"].get(c).is_some(), "{c} in the table: {py}");
    }
    for r in py["rows"].as_array().unwrap() {
        let id = match &r["order_id"] {
            serde_json::Value::String(t) => t.parse::<i64>().unwrap(),
            v => v.as_i64().unwrap(),
        };
        for (c, range) in [("x", 200..210), ("y", 400..410), ("z", 500..510)] {
            let want = if range.contains(&id) {
                serde_json::json!(format!("{c}{id}"))
            } else {
                serde_json::Value::Null
            };
            assert_eq!(r[c], want, "{c} of order {id}: {r}");
        }
    }
    assert_eq!(q.depth(&q.queue), (0, 0), "the queue is empty");
}

/// A worker stream with its checkpoint on S3 (the table's `_autoloader`), two slots that
/// each took files. `status` run on another machine (another state folder) while a watcher
/// holds slot 1 shows that slot's last batch, batches and pending files from its record on
/// S3. `reset` refuses while the watcher holds its slot (exit 75, naming the slot) and
/// changes nothing; once it stopped, `reset` clears every slot, and one worker run alone
/// lands every file again, the other slot's old claims included: the table equals a
/// fresh run's.
#[test]
fn a_worker_streams_status_from_another_machine_and_its_reset() {
    let moto = Moto::start();
    let q = Notified::setup(&moto, "rst", "rst", "landing/");
    let s = Scratch::new();
    let machine = |n: u32| s.dir.path().join(format!("machine-{n}"));
    let env = |n: u32| {
        let mut env = moto.env();
        env.push(("AUTOLOADER_STATE_DIR", machine(n).display().to_string()));
        env
    };
    let run_on = |n: u32, a: &[String]| {
        let env = env(n);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        common::run(a, &env)
    };
    let ckpt = "s3://rst/bronze/_autoloader";
    let worker = |slot: &str| {
        // No --checkpoint: the table's `_autoloader`, where reset finds it.
        let mut a = args(
            "s3://rst/landing",
            "s3://rst/bronze",
            std::path::Path::new("unused"),
            &q.queue,
            &["cloudFiles.maxFilesPerTrigger=1"],
        );
        let at = a.iter().position(|x| x == "--checkpoint").unwrap();
        a.drain(at..at + 2);
        a.extend(["--worker".to_string(), slot.to_string()]);
        a
    };
    ok(&run_on(1, &worker("0")));
    ok(&run_on(1, &worker("1")));
    let put = |range: std::ops::Range<u64>| {
        for i in range {
            moto.put(
                "rst",
                &format!("landing/{i}.json"),
                common::orders_jsonl(i * 10, i * 10 + 10),
            );
        }
    };
    put(0..3);
    ok(&run_on(1, &worker("0")));
    put(3..6);
    ok(&run_on(1, &worker("1")));
    let status = |n: u32| -> serde_json::Value {
        let a: Vec<String> = ["status", "--checkpoint", ckpt, "--json"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        serde_json::from_str(&ok(&run_on(n, &a))).unwrap()
    };
    let free = status(1);
    let free_1 = free["workers"][1].clone();
    assert!(free_1["holder"].is_null(), "{free}");
    assert!(free_1["batches"].as_u64().unwrap() >= 3, "{free}");

    // A watcher holds slot 1 on machine 2; machine 3 reads the slot's record on S3.
    let mut a = worker("1");
    a.retain(|x| x != "--once");
    a.extend(["--poll-interval".to_string(), "0.2".to_string()]);
    let log = s.dir.path().join("watcher.log");
    let watcher = std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
        .args(&a)
        .envs(env(2))
        .env("RUST_LOG", "autoloader=info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let watcher_log = || std::fs::read_to_string(&log).unwrap_or_default();
    // From its log: the moment it holds the slot.
    common::wait_until(
        "the watcher to hold slot 1",
        Duration::from_secs(60),
        || watcher_log().contains("Took a worker slot."),
    );
    let st = status(3);
    let held = &st["workers"][1];
    assert!(
        held["holder"]
            .as_str()
            .is_some_and(|h| h.contains(&format!("pid {}", watcher.id()))),
        "{st}"
    );
    assert_eq!(held["lastBatch"], free_1["lastBatch"], "from S3: {st}");
    assert_eq!(held["batches"], free_1["batches"], "from S3: {st}");
    assert_eq!(held["pendingFiles"], 0, "from S3: {st}");
    assert!(held["leaseAgeSeconds"].as_f64().is_some(), "{st}");

    // A live worker: reset refuses, naming its slot, and changes nothing.
    let reset: Vec<String> = vec!["reset".into(), "s3://rst/bronze".into(), "--yes".into()];
    let out = run_on(3, &reset);
    assert_eq!(out.status.code(), Some(75), "{}", common::stderr(&out));
    let err = common::stderr(&out);
    assert!(
        err.contains("worker slot 1") && err.contains("held by"),
        "{err}"
    );
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://rst/bronze")),
        (0..60).collect::<Vec<_>>()
    );
    // SAFETY: kill(2) with our own child's pid.
    unsafe {
        libc::kill(watcher.id() as i32, libc::SIGTERM);
    }
    let out = watcher.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", watcher_log());

    // Every worker stopped: the reset clears every slot and the shared state.
    ok(&run_on(3, &reset));
    assert_eq!(python_rows(&moto, "s3://rst/bronze")["num_rows"], 0);
    let st = status(3);
    for w in st["workers"].as_array().unwrap() {
        assert_eq!(w["batches"], 0, "every slot set aside: {st}");
    }
    // One worker alone re-ingests everything, the files slot 1 had claimed too.
    ok(&run_on(1, &worker("auto")));
    let py = python_rows(&moto, "s3://rst/bronze");
    assert_eq!(
        sorted_ids(&py),
        (0..60).collect::<Vec<_>>(),
        "as a fresh run"
    );
    assert_eq!(q.depth(&q.queue), (0, 0), "the queue is empty");
}

/// A worker on an S3 checkpoint writes the stream's event log in its local state folder
/// (the stream's folder there is not a slot's, so it did not exist yet: every event was
/// dropped with a "Cannot write the event log" warning).
#[test]
fn a_worker_on_an_s3_checkpoint_writes_the_stream_s_event_log() {
    let moto = Moto::start();
    let q = Notified::setup(&moto, "lake", "events", "landing/");
    for i in 0..3u64 {
        moto.put(
            "lake",
            &format!("landing/{i}.json"),
            common::orders_jsonl(i * 10, i * 10 + 10),
        );
    }
    let state = tempfile::tempdir().unwrap();
    let mut a = args(
        "s3://lake/landing",
        "s3://lake/bronze",
        std::path::Path::new("s3://lake/checkpoints/orders"),
        &q.queue,
        &[],
    );
    a.extend(["--worker".to_string(), "0".to_string()]);
    let mut env = moto.env();
    env.push(("AUTOLOADER_STATE_DIR", state.path().display().to_string()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = common::run(&a, &env);
    ok(&out);
    assert!(
        !common::stderr(&out).contains("Cannot write the event log"),
        "{}",
        common::stderr(&out)
    );
    let logs: Vec<std::path::PathBuf> = std::fs::read_dir(state.path())
        .unwrap()
        .map(|e| e.unwrap().path().join("events.jsonl"))
        .filter(|p| p.exists())
        .collect();
    assert_eq!(logs.len(), 1, "one stream event log: {logs:?}");
    let committed = growing_events(logs[0].parent().unwrap(), "batch_committed");
    assert_eq!(
        committed
            .iter()
            .map(|e| e["files"].as_u64().unwrap_or(0))
            .sum::<u64>(),
        3,
        "{committed:?}"
    );
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/bronze")),
        (0..30).collect::<Vec<_>>()
    );
}

/// `reset` of a worker stream killed at each of its steps, then finished by `reset` run
/// again or left to the workers' next runs (each sets its stale slot aside): every file
/// lands once, as after an uninterrupted reset, and the queue is left empty.
#[test]
fn a_worker_streams_reset_killed_at_each_step_is_finished_by_reset_or_by_the_workers() {
    use std::os::unix::process::ExitStatusExt;
    let moto = Moto::start();
    let s = Scratch::new();
    let mut env = moto.env();
    env.push(("AUTOLOADER_STATE_DIR", s.dir.path().display().to_string()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    for (i, point) in autoloader::testing::failpoint::RESET_NAMES
        .iter()
        .enumerate()
    {
        for finisher in ["reset", "run"] {
            let case = format!("{point}, then {finisher}");
            let bucket = format!("rk-{i}-{finisher}");
            let q = Notified::setup(&moto, &bucket, &bucket, "landing/");
            let table = format!("s3://{bucket}/bronze");
            let worker = |slot: &str| {
                let mut a = args(
                    &format!("s3://{bucket}/landing"),
                    &table,
                    std::path::Path::new("unused"),
                    &q.queue,
                    &["cloudFiles.maxFilesPerTrigger=2"],
                );
                let at = a.iter().position(|x| x == "--checkpoint").unwrap();
                a.drain(at..at + 2);
                a.extend(["--worker".to_string(), slot.to_string()]);
                a
            };
            let put = |range: std::ops::Range<u64>| {
                for i in range {
                    moto.put(
                        &bucket,
                        &format!("landing/{i}.json"),
                        common::orders_jsonl(i * 10, i * 10 + 10),
                    );
                }
            };
            ok(&common::run(&worker("0"), &env));
            ok(&common::run(&worker("1"), &env));
            put(0..4);
            ok(&common::run(&worker("0"), &env));
            ok(&common::run(&worker("1"), &env));
            assert_eq!(
                sorted_ids(&python_rows(&moto, &table)),
                (0..40).collect::<Vec<_>>(),
                "{case}: before the reset"
            );
            let reset: Vec<String> = vec!["reset".into(), table.clone(), "--yes".into()];
            let mut killed_env = env.clone();
            killed_env.push(("AUTOLOADER_FAILPOINT", point));
            let killed = common::run(&reset, &killed_env);
            assert_eq!(
                killed.status.signal(),
                Some(9),
                "{case}: {}",
                common::stderr(&killed)
            );
            if *point == "reset-after-lock" {
                assert_eq!(
                    sorted_ids(&python_rows(&moto, &table)),
                    (0..40).collect::<Vec<_>>(),
                    "{case}: the old state"
                );
            }
            // Files land meanwhile.
            put(4..6);
            if finisher == "reset" {
                ok(&common::run(&reset, &env));
            }
            ok(&common::run(&worker("0"), &env));
            ok(&common::run(&worker("1"), &env));
            assert_eq!(
                sorted_ids(&python_rows(&moto, &table)),
                (0..60).collect::<Vec<_>>(),
                "{case}: every file once"
            );
            assert_eq!(q.depth(&q.queue), (0, 0), "{case}: the queue is empty");
        }
    }
}

/// A listed S3 prefix switched to notification mode on its checkpoint is another kind of
/// source (issue 35): refused before anything is received, naming `source.kind`; the
/// listed flow goes on.
#[test]
fn a_listed_prefix_switched_to_a_queue_needs_a_full_refresh() {
    let moto = Moto::start();
    let q = Notified::setup(&moto, "lake", "switch", "");
    moto.put("lake", "landing/a.json", common::orders_jsonl(0, 10));
    let s = Scratch::new();
    let ckpt = s.dir.path().join("ckpt");
    let listed: Vec<String> = [
        "ingest",
        "s3://lake/landing",
        "s3://lake/bronze",
        "--once",
        "--checkpoint",
        &ckpt.display().to_string(),
        "-o",
        "cloudFiles.format=json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    ok(&run_with(&moto, &listed));
    let depth = q.depth(&q.queue);
    let out = run_with(
        &moto,
        &args(
            "s3://lake/landing",
            "s3://lake/bronze",
            &ckpt,
            &q.queue,
            &[],
        ),
    );
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("source.kind: recorded \"S3 prefix\", given \"queue\""),
        "{err}"
    );
    assert_eq!(q.depth(&q.queue), depth, "nothing was received");
    moto.put("lake", "landing/b.json", common::orders_jsonl(10, 20));
    ok(&run_with(&moto, &listed));
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/bronze")),
        (0..20).collect::<Vec<_>>()
    );
}

/// Keys with non-ASCII characters, `%` and `{` arrive form-encoded in S3 events and ingest
/// as listed ones do; none goes to the dead-letter queue (issue 36.3).
#[test]
fn notified_keys_with_any_character_are_ingested() {
    let moto = Moto::start();
    let q = Notified::setup(&moto, "lake", "odd", "");
    let s = Scratch::new();
    let ckpt = s.dir.path().join("ckpt");
    let run = || {
        run_with(
            &moto,
            &args(
                "s3://lake/landing",
                "s3://lake/bronze",
                &ckpt,
                &q.queue,
                &[],
            ),
        )
    };
    moto.put("lake", "landing/first.json", common::orders_jsonl(0, 10));
    ok(&run());
    let keys = [
        "landing/주문/2025.json",
        "landing/accé.json",
        "landing/50% off.json",
        "landing/{x}.json",
    ];
    for (i, key) in keys.iter().enumerate() {
        let i = i as u64 + 1;
        moto.put("lake", key, common::orders_jsonl(i * 10, i * 10 + 10));
    }
    let out = ok(&run());
    assert!(out.contains("ingested 4 files"), "{out}");
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/bronze")),
        (0..50).collect::<Vec<_>>()
    );
    assert!(q.dead_letters().is_empty(), "{:?}", q.dead_letters());
}

/// The slot a worker's log says it took.
fn slot_taken(log: &str) -> Option<u32> {
    let line = log.lines().find(|l| l.contains("Took a worker slot."))?;
    let at = line.find(" slot=")? + " slot=".len();
    line[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// `--worker auto` takes the lowest free slot: a restarted worker takes its dead slot back
/// at once, though another worker's look holds it for a moment (it took a new, higher slot,
/// and the dead slot's batch waited for adoption). `status` takes no lease: it neither
/// takes over a dead holder's lease nor keeps a worker from its slot (issue 36.7).
#[test]
fn a_restarted_auto_worker_takes_its_dead_slot_back_and_status_takes_no_lease() {
    let moto = Moto::start();
    let q = Notified::setup(&moto, "lake", "slots", "landing/");
    let s = Scratch::new();
    let logged = |a: &[String]| {
        let mut env = moto.env();
        env.push(("RUST_LOG", "autoloader=info".to_string()));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        common::run(a, &env)
    };
    let worker = |ckpt: &str, slot: &str| {
        let mut a = args(
            "s3://lake/landing",
            "s3://lake/bronze",
            std::path::Path::new(ckpt),
            &q.queue,
            &[],
        );
        a.extend(["--worker".to_string(), slot.to_string()]);
        a
    };

    // A local checkpoint: slots 0 and 1 exist and are free; slot 0 is locked for a moment
    // (as another worker's look at it does) when an `auto` worker starts.
    let local = s.dir.path().join("ckpt");
    let local = local.to_str().unwrap();
    ok(&run_with(&moto, &worker(local, "0")));
    ok(&run_with(&moto, &worker(local, "1")));
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(s.dir.path().join("ckpt/workers/0/lock"))
        .unwrap();
    lock.try_lock().unwrap();
    let auto = {
        let a = worker(local, "auto");
        let moto_env = moto.env();
        std::thread::spawn(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
                .args(a)
                .envs(moto_env)
                .env("RUST_LOG", "autoloader=info")
                .output()
                .unwrap()
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    drop(lock);
    let out = auto.join().unwrap();
    let log = common::stderr(&out);
    assert!(out.status.success(), "{log}");
    assert_eq!(slot_taken(&log), Some(0), "the lowest free slot: {log}");

    // An S3 checkpoint: the watcher on slot 0 is SIGKILLed, its lease left behind.
    let remote = "s3://lake/ckpt";
    let mut a = worker(remote, "auto");
    a.retain(|x| x != "--once");
    a.extend(["--poll-interval".to_string(), "0.2".to_string()]);
    let log_path = s.dir.path().join("watcher.log");
    let mut watcher = std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
        .args(&a)
        .envs(moto.env())
        .env("RUST_LOG", "autoloader=info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    common::wait_until(
        "the watcher to take a slot",
        Duration::from_secs(60),
        || slot_taken(&std::fs::read_to_string(&log_path).unwrap_or_default()) == Some(0),
    );
    watcher.kill().unwrap();
    watcher.wait().unwrap();
    let lease = || String::from_utf8(moto.get("lake", "ckpt/workers/0/lock")).unwrap();
    let dead = format!("\"pid\":{}", watcher.id());
    assert!(lease().contains(&dead), "{}", lease());
    let status: Vec<String> = ["status", "--checkpoint", remote, "--json"]
        .iter()
        .map(|x| x.to_string())
        .collect();
    let out = logged(&status);
    let err = common::stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("Taking over"), "status took a lease: {err}");
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["workers"][0]["slot"], 0, "{st}");
    assert!(st["workers"][0]["holder"].is_null(), "a dead holder: {st}");
    assert!(
        lease().contains(&dead),
        "the dead worker's lease is as it was: {}",
        lease()
    );
    // The restarted worker on this machine takes the dead slot back at once.
    let out = logged(&worker(remote, "auto"));
    let log = common::stderr(&out);
    assert!(out.status.success(), "{log}");
    assert_eq!(slot_taken(&log), Some(0), "the dead slot: {log}");
    assert!(log.contains("Taking over a checkpoint lease"), "{log}");
}

/// The docs' notification-mode recipe, as printed there (`deploy/s3-notifications.py`,
/// then `autoloader ingest`), run by bash against moto with `--once` added: the first run
/// lists the prefix, the second takes a new file from the queue the script set up.
#[test]
fn the_docs_notification_recipe_sets_up_a_queue_that_feeds_the_stream() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    let s = Scratch::new();
    let block = common::doc_block("docs/guide/s3.md", "## Notification mode", "sh");
    assert!(block.contains("deploy/s3-notifications.py"), "{block}");
    let script = block.replace("autoloader ingest ", "autoloader ingest --once ");
    let state = s.dir.path().join("state").display().to_string();
    let env = moto.env();
    let mut envs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    envs.push(("AUTOLOADER_STATE_DIR", &state));
    let run_block = || ok(&common::run_doc_sh(&script, s.dir.path(), &envs));
    moto.put("lake", "landing/orders/0.json", common::orders_jsonl(0, 10));
    let first = run_block();
    assert_eq!(common::summary_figure(&first, "files"), 1, "{first}");
    moto.put(
        "lake",
        "landing/orders/1.json",
        common::orders_jsonl(10, 25),
    );
    let second = run_block();
    assert_eq!(
        common::summary_figure(&second, "files"),
        1,
        "the queue's event brought the new file (no listing before the backfill): {second}"
    );
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/bronze/orders")),
        (0..25).collect::<Vec<_>>()
    );
}
