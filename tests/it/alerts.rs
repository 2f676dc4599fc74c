//! Drift alerts and observability, end to end: the seed's incident against a running
//! watcher with a local webhook server and the metrics endpoint.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{self, Scratch, read_table, wait_until};

/// How long the watcher may take to start, ingest a file or send the alerts.
const WAIT: Duration = Duration::from_secs(30);

/// A webhook receiver on 127.0.0.1: records every POST body.
fn webhook_server() -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let received = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&received);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
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
                .push(serde_json::from_slice(&body).unwrap());
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        }
    });
    (url, received)
}

/// The address a watcher started with `--metrics-addr 127.0.0.1:0` serves metrics on, as
/// it logs it at start (its stderr is read from then on).
fn metrics_address(child: &mut std::process::Child) -> String {
    let stderr = child.stderr.take().unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let log_sink = Arc::clone(&log);
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let mut l = log_sink.lock().unwrap();
            l.push_str(&line.unwrap_or_default());
            l.push('\n');
        }
    });
    wait_until("the metrics address", WAIT, || {
        log.lock().unwrap().contains("Serving metrics")
    });
    let l = log.lock().unwrap();
    let at = l.find("addr=").unwrap() + 5;
    l[at..].split_whitespace().next().unwrap().to_string()
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    // One write: `write!` sends each piece of the format separately, and a server that
    // answers the first segment it reads ("GET ") closes before the rest (EPIPE here).
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn seed_incident_alerts_once_per_incident_and_reports_drift() {
    let s = Scratch::new();
    let (hook, received) = webhook_server();
    let mut child = Command::new(env!("CARGO_BIN_EXE_autoloader"))
        .args([
            "ingest",
            s.landing().to_str().unwrap(),
            s.table().to_str().unwrap(),
        ])
        .args([
            "--poll-interval",
            "0.5",
            "--alert-webhook",
            &hook,
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .args([
            "-o",
            "cloudFiles.inferColumnTypes=true",
            "-o",
            "cloudFiles.format=json",
        ])
        .env("RUST_LOG", "autoloader=info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let metrics_addr = metrics_address(&mut child);

    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/orders/drift");
    let mut expected_rows = 0;
    for name in [
        "01-tuesday.json",
        "02-wednesday-1400.json",
        "03-wednesday-1410.json",
    ] {
        let bytes = std::fs::read(fixtures.join(name)).unwrap();
        expected_rows += bytes.iter().filter(|b| **b == b'\n').count();
        let tmp = s.landing().join(format!(".{name}.tmp"));
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, s.landing().join(name)).unwrap();
        wait_until(name, WAIT, || {
            s.table().join("_delta_log").exists()
                && common::row_count(&read_table(&s.table())) >= expected_rows
        });
    }
    wait_until("two alerts", WAIT, || received.lock().unwrap().len() >= 2);
    // Give a wrongly repeated alert time to arrive before counting.
    // A fixed sleep, not wait_until: it proves an absence (no third alert), which nothing signals.
    std::thread::sleep(Duration::from_millis(700));

    let metrics = http_get(&metrics_addr, "/metrics");
    let table_name = s
        .table()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        metrics.contains(&format!(
            "autoloader_rows_total{{stream=\"{table_name}\"}} 12"
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "autoloader_rescued_rows_total{{stream=\"{table_name}\"}} 2"
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "autoloader_schema_version{{stream=\"{table_name}\"}} 1"
        )),
        "{metrics}"
    );

    // SAFETY: kill(2) with our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    assert!(child.wait().unwrap().success());

    let alerts = received.lock().unwrap().clone();
    assert_eq!(alerts.len(), 2, "one alert per incident: {alerts:#?}");
    let evolved = &alerts[0];
    assert_eq!(evolved["event"]["type"], "schema_evolved");
    let text = evolved["text"].as_str().unwrap();
    assert!(
        text.contains("coupon_code") && text.contains("discount_rate"),
        "{text}"
    );
    let rescued = &alerts[1];
    assert_eq!(rescued["event"]["type"], "rescued_data_seen");
    assert_eq!(
        rescued["event"]["typeMismatches"],
        serde_json::json!(["amount"])
    );
    assert!(
        rescued["text"].as_str().unwrap().contains("amount"),
        "{}",
        rescued["text"]
    );

    // The drift report names the rescued key with its count and first-seen time.
    let out = common::run(
        &[
            "drift".into(),
            s.table().display().to_string(),
            "--json".into(),
        ],
        &[],
    );
    let report: serde_json::Value = serde_json::from_str(&common::ok(&out)).unwrap();
    let keys = report["keys"].as_array().unwrap();
    let amount = keys
        .iter()
        .find(|k| k["key"] == "amount")
        .expect("amount is reported");
    assert_eq!(amount["occurrences"], 2);
    assert!(
        amount["firstSeen"].as_str().unwrap().starts_with("20"),
        "{amount}"
    );
    assert!(
        amount["exampleFile"]
            .as_str()
            .unwrap()
            .ends_with("03-wednesday-1410.json"),
        "{amount}"
    );
    assert_eq!(report["days"][0]["rows"], 12);
    assert_eq!(report["days"][0]["rescuedRows"], 2);

    // Events, status and schema history tell the same story.
    let ckpt = s.table().join("_autoloader");
    let out = common::run(
        &[
            "events".into(),
            "--checkpoint".into(),
            ckpt.display().to_string(),
            "--type".into(),
            "schema_evolved".into(),
            "--json".into(),
        ],
        &[],
    );
    let lines: Vec<serde_json::Value> = common::ok(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(
        lines[0]["addedColumns"],
        serde_json::json!(["coupon_code STRING", "discount_rate DOUBLE"])
    );
    let out = common::run(
        &[
            "status".into(),
            "--checkpoint".into(),
            ckpt.display().to_string(),
            "--json".into(),
        ],
        &[],
    );
    let status: serde_json::Value = serde_json::from_str(&common::ok(&out)).unwrap();
    assert_eq!(status["rows"], 12);
    assert_eq!(status["rescuedRows"], 2);
    assert_eq!(status["filesIngested"], 3);
    assert_eq!(status["filesPending"], 0);
    assert_eq!(status["schemaVersion"], 1);
    let out = common::run(
        &[
            "schema".into(),
            "history".into(),
            ckpt.display().to_string(),
        ],
        &[],
    );
    let history = common::ok(&out);
    assert!(
        history.contains("_schemas/1")
            && history.contains("added: coupon_code STRING, discount_rate DOUBLE"),
        "{history}"
    );
}

#[test]
fn a_failing_webhook_never_blocks_ingestion_and_is_recorded() {
    let s = Scratch::new();
    // A port with nothing listening: every attempt is refused.
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let run = |s: &Scratch| {
        common::run(
            &[
                "ingest".into(),
                s.landing().display().to_string(),
                s.table().display().to_string(),
                "--once".into(),
                "-o".into(),
                "cloudFiles.inferColumnTypes=true".into(),
                "--alert-webhook".into(),
                format!("http://{dead}/hook"),
            ],
            &[],
        )
    };
    s.land("1.json", "{\"id\": 1}\n");
    common::ok(&run(&s));
    s.land("2.json", "{\"id\": \"x\"}\n");
    let out = run(&s);
    common::ok(&out);
    assert_eq!(
        common::row_count(&read_table(&s.table())),
        2,
        "the batch committed whatever the webhook did"
    );
    let events = common::ok(&common::run(
        &[
            "events".into(),
            "--checkpoint".into(),
            s.table().join("_autoloader").display().to_string(),
            "--type".into(),
            "alert_failed".into(),
            "--json".into(),
        ],
        &[],
    ));
    let failed: serde_json::Value =
        serde_json::from_str(events.lines().next().expect("an alert_failed event")).unwrap();
    assert_eq!(failed["alert"], "rescued_data_seen");
    // Retried with backoff, until the run's exit stops the retries.
    assert!(
        failed["error"].as_str().unwrap().contains(" of 3 attempts")
            || failed["error"]
                .as_str()
                .unwrap()
                .contains("after 3 attempts"),
        "{failed}"
    );

    let bad = common::run(
        &[
            "ingest".into(),
            s.landing().display().to_string(),
            s.table().display().to_string(),
            "--once".into(),
            "--alert-webhook".into(),
            "http://169.254.169.254/x".into(),
        ],
        &[],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        common::stderr(&bad).contains("link-local or metadata"),
        "{}",
        common::stderr(&bad)
    );
}

#[test]
fn a_webhook_that_is_down_does_not_hold_the_exit_and_its_alerts_go_out_next_run() {
    // The same two runs (the second rescues a value, an alert) without a webhook: the
    // time a run takes here, on this machine now.
    let two_runs = |s: &Scratch, webhook: Option<&str>| {
        let mut args = vec![
            "ingest".to_string(),
            s.landing().display().to_string(),
            s.table().display().to_string(),
            "--once".into(),
            "-o".into(),
            "cloudFiles.inferColumnTypes=true".into(),
        ];
        if let Some(url) = webhook {
            args.extend(["--alert-webhook".into(), url.to_string()]);
        }
        s.land("1.json", "{\"id\": 1}\n");
        common::ok(&common::run(&args, &[]));
        s.land("2.json", "{\"id\": \"x\"}\n");
        let started = std::time::Instant::now();
        let out = common::run(&args, &[]);
        common::ok(&out);
        (started.elapsed(), out)
    };
    let (baseline, _) = two_runs(&Scratch::new(), None);
    let s = Scratch::new();
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (took, out) = two_runs(&s, Some(&format!("http://{dead}/hook")));
    // Retrying with backoff held the exit 3 s per alert (and 10 s at most) before.
    assert!(
        took < baseline + Duration::from_millis(2000),
        "{took:?} against {baseline:?} without a webhook"
    );
    let err = common::stderr(&out);
    assert!(
        err.contains("1 undelivered alert(s) kept in") && !err.contains("dropped"),
        "{err}"
    );
    let pending = s.table().join("_autoloader/alerts-pending.jsonl");
    let kept = std::fs::read_to_string(&pending).expect("the alert is kept");
    assert_eq!(kept.lines().count(), 1, "{kept}");
    assert!(kept.contains("rescued_data_seen"), "{kept}");

    // The next run, with a webhook that works, sends it (nothing new to ingest).
    let (hook, received) = webhook_server();
    let out = common::run(
        &[
            "ingest".into(),
            s.landing().display().to_string(),
            s.table().display().to_string(),
            "--once".into(),
            "--alert-webhook".into(),
            hook,
        ],
        &[],
    );
    common::ok(&out);
    let alerts = received.lock().unwrap().clone();
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    assert_eq!(alerts[0]["event"]["type"], "rescued_data_seen");
    assert!(!pending.exists(), "nothing is left to send");
}

/// Expectations in a watcher: the Prometheus counters per rule and outcome, and an alert
/// for the rule whose failure share passes `--alert-expectation-share` (not for the one
/// below it).
#[test]
fn expectation_counters_and_an_alert_past_the_share() {
    let s = Scratch::new();
    let (hook, received) = webhook_server();
    let mut child = Command::new(env!("CARGO_BIN_EXE_autoloader"))
        .args([
            "ingest",
            s.landing().to_str().unwrap(),
            s.table().to_str().unwrap(),
        ])
        .args(["--poll-interval", "0.5", "--alert-webhook", &hook])
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--alert-expectation-share",
            "0.3",
        ])
        .args(["--expect-or-drop", "positive=amount > 0"])
        .args(["--expect-or-quarantine", "small=amount < 100"])
        .args([
            "-o",
            "cloudFiles.inferColumnTypes=true",
            "-o",
            "cloudFiles.format=json",
        ])
        .env("RUST_LOG", "autoloader=info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let metrics_addr = metrics_address(&mut child);
    // 10 rows: 5 fail `positive` (50%, past 0.3), 2 fail `small` (20%, below it).
    let lines: String = (1..=10)
        .map(|i| {
            let amount = match i {
                1..=5 => -i,
                6 | 7 => 500,
                _ => i,
            };
            format!("{{\"id\": {i}, \"amount\": {amount}}}\n")
        })
        .collect();
    let tmp = s.landing().join(".a.json.tmp");
    std::fs::write(&tmp, lines).unwrap();
    std::fs::rename(&tmp, s.landing().join("a.json")).unwrap();
    wait_until("the batch", WAIT, || {
        s.table().join("_delta_log").exists() && common::row_count(&read_table(&s.table())) == 3
    });
    wait_until("the alert", WAIT, || !received.lock().unwrap().is_empty());
    // A fixed sleep: it proves an absence (no alert for `small`), which nothing signals.
    std::thread::sleep(Duration::from_millis(700));
    let metrics = http_get(&metrics_addr, "/metrics");
    let _ = child.kill();
    let _ = child.wait();
    for (rule, outcome, n) in [
        ("positive", "passed", 5),
        ("positive", "failed", 5),
        ("positive", "dropped", 5),
        ("small", "failed", 2),
        ("small", "quarantined", 2),
        ("small", "dropped", 0),
    ] {
        let series = format!(
            "autoloader_expectation_records_total{{stream=\"table\",expectation=\"{rule}\",outcome=\"{outcome}\"}} {n}"
        );
        assert!(metrics.contains(&series), "{series} in:\n{metrics}");
    }
    let alerts = received.lock().unwrap();
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    let text = alerts[0]["text"].as_str().unwrap();
    assert!(text.contains("positive failed 5 of 10"), "{text}");
}
