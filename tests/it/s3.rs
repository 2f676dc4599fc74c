//! S3: a real S3 endpoint (the `moto` server from PyPI, started here on 127.0.0.1), a landing
//! prefix and a Delta table in a bucket, read back by Python `deltalake`.

use std::process::{Command, Stdio};
use std::time::Duration;

use object_store::ObjectStoreExt;

use crate::common::moto::{
    CANARY, Moto, block_on, python_read, python_read_by, python_rows, run_with, sorted_ids,
};
use crate::common::{self, Scratch, ok, summary_figure, wait_until};

#[test]
fn bucket_to_bucket_exactly_once_and_no_secret_in_any_output() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    moto.put("lake", "landing/orders/a.json", common::orders_jsonl(0, 10));
    moto.put(
        "lake",
        "landing/orders/sub/b.json",
        common::orders_jsonl(10, 20),
    );
    moto.put(
        "lake",
        "landing/orders/_tmp/c.json",
        common::orders_jsonl(100, 101),
    );
    let s = Scratch::new();
    let ckpt = s.dir.path().join("ckpt");
    let args = |verbose: bool| {
        let mut a: Vec<String> = vec![
            "ingest".into(),
            "s3://lake/landing/orders".into(),
            "s3://lake/bronze/orders".into(),
            "--once".into(),
            "--checkpoint".into(),
            ckpt.display().to_string(),
            "-o".into(),
            "cloudFiles.inferColumnTypes=true".into(),
        ];
        if verbose {
            a.insert(0, "-vv".into());
        }
        a
    };
    let out = run_with(&moto, &args(true));
    let stdout = ok(&out);
    assert_eq!(summary_figure(&stdout, "rows"), 20);
    let py = python_rows(&moto, "s3://lake/bronze/orders");
    assert_eq!(py["num_rows"], 20);
    assert_eq!(py["types"]["order_id"], "int64");
    assert!(
        py["rows"][0]["_metadata"]["file_path"]
            .as_str()
            .unwrap()
            .starts_with("s3://lake/landing/orders/")
    );

    // Nothing twice; a new object once.
    assert_eq!(
        summary_figure(&ok(&run_with(&moto, &args(false))), "files"),
        0
    );
    moto.put(
        "lake",
        "landing/orders/d.json",
        common::orders_jsonl(20, 25),
    );
    assert_eq!(
        summary_figure(&ok(&run_with(&moto, &args(false))), "rows"),
        5
    );
    assert_eq!(
        python_rows(&moto, "s3://lake/bronze/orders")["num_rows"],
        25
    );

    // The secret never shows: not in debug logs, output, events or the schema files.
    let mut seen = String::from_utf8_lossy(&out.stderr).into_owned() + &stdout;
    seen += &std::fs::read_to_string(ckpt.join("events.jsonl")).unwrap();
    seen += &std::fs::read_to_string(ckpt.join("_schemas/0")).unwrap();
    assert!(seen.len() > 1000, "debug logging was on");
    assert!(!seen.contains(CANARY), "the secret leaked");
}

#[test]
fn a_large_first_run_into_an_s3_table_infers_while_reading() {
    // Over 64 MiB: the schema is settled while the batch is read, before the S3 table
    // exists, and each decoding thread writes its own Parquet files to the bucket.
    let moto = Moto::start();
    moto.create_bucket("lake");
    let s = Scratch::new();
    let per_file = 80_000u64;
    for f in 0..4u64 {
        let from = f * per_file;
        s.land(
            &format!("part-{f}.json"),
            common::sample_orders_jsonl(from, from + per_file, f == 0),
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let args: Vec<String> = vec![
        "ingest".into(),
        s.landing().display().to_string(),
        "s3://lake/big".into(),
        "--once".into(),
        "-o".into(),
        "cloudFiles.inferColumnTypes=true".into(),
    ];
    let stdout = ok(&run_with(&moto, &args));
    assert_eq!(summary_figure(&stdout, "rows"), 4 * per_file);
    let py = python_read(&moto, "s3://lake/big", &["--summary"]);
    let n = 4 * per_file;
    assert_eq!(py["num_rows"], n);
    assert_eq!(py["key_distinct"], n, "every order once");
    assert_eq!(py["key_sum"], n * (n - 1) / 2);
    assert_eq!(py["types"]["amount"], "double", "the whole sample's type");
    assert!(moto.keys("lake", "big/_autoloader/_schemas/").len() == 1);
}

#[test]
fn two_streams_append_to_one_s3_table_concurrently() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    for i in 0..3u64 {
        moto.put(
            "lake",
            &format!("a/{i}.json"),
            common::orders_jsonl(i * 10, i * 10 + 10),
        );
        moto.put(
            "lake",
            &format!("b/{i}.json"),
            common::orders_jsonl(1000 + i * 10, 1000 + i * 10 + 10),
        );
    }
    let s = Scratch::new();
    let config = s.dir.path().join("streams.toml");
    std::fs::write(
        &config,
        r#"
[defaults.options]
"cloudFiles.maxFilesPerTrigger" = 1
"cloudFiles.inferColumnTypes" = true

[[stream]]
name = "a"
source = "s3://lake/a"
table = "s3://lake/shared"
checkpoint = "ck/a"

[[stream]]
name = "b"
source = "s3://lake/b"
table = "s3://lake/shared"
checkpoint = "ck/b"
"#,
    )
    .unwrap();
    let stdout = ok(&run_with(
        &moto,
        &["run".into(), config.display().to_string(), "--once".into()],
    ));
    assert!(
        stdout.contains("[a] ingested 3 files, 30 rows")
            && stdout.contains("[b] ingested 3 files, 30 rows"),
        "{stdout}"
    );
    let py = python_rows(&moto, "s3://lake/shared");
    assert_eq!(py["num_rows"], 60, "no commit of either stream was lost");
    let mut ids: Vec<i64> = py["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["order_id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 60, "and none doubled");
}

#[test]
fn a_watcher_on_a_bucket_takes_objects_as_they_are_listed() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    let s = Scratch::new();
    // The checkpoint is on S3 (the default, s3://lake/out/_autoloader); its local cache,
    // where events go, is under AUTOLOADER_STATE_DIR.
    let child = Command::new(env!("CARGO_BIN_EXE_autoloader"))
        .args([
            "ingest",
            "s3://lake/in",
            "s3://lake/out",
            "--poll-interval",
            "0.3",
        ])
        .args(["-o", "cloudFiles.format=json"])
        .envs(moto.env())
        .env("AUTOLOADER_STATE_DIR", s.dir.path())
        // A 900 ms lease, renewed every 300 ms, so renewal shows within the test.
        .env("AUTOLOADER_LEASE_MS", "900")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    moto.put("lake", "in/1.json", common::orders_jsonl(0, 7));
    wait_until(
        "the watcher to commit a batch",
        Duration::from_secs(30),
        || {
            std::fs::read_dir(s.dir.path())
                .unwrap()
                .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("events.jsonl")).ok())
                .collect::<String>()
                .contains("batch_committed")
        },
    );
    // The lease is renewed while the watcher runs: same holder, later expiry, never lapsing.
    let lease = || -> serde_json::Value {
        serde_json::from_slice(&moto.get("lake", "out/_autoloader/lock")).unwrap()
    };
    let first = lease();
    let mut later = first.clone();
    wait_until(
        "the watcher to renew its lease",
        Duration::from_secs(30),
        || {
            later = lease();
            later["expiresAtMs"].as_i64().unwrap() > first["expiresAtMs"].as_i64().unwrap() + 900
        },
    );
    assert_eq!(
        later["token"], first["token"],
        "the same holder: {first} then {later}"
    );
    // SAFETY: kill(2) with our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        summary_figure(&String::from_utf8_lossy(&out.stdout), "rows"),
        7
    );
    assert_eq!(python_rows(&moto, "s3://lake/out")["num_rows"], 7);
    let state = moto.keys("lake", "out/_autoloader");
    assert!(
        state
            .iter()
            .any(|k| k.ends_with("commits/00000000000000000000.json"))
            && !state.iter().any(|k| k.ends_with("/lock")),
        "the batch is recorded on S3 and the lease released after SIGTERM: {state:?}"
    );
}

/// `autoloader ingest` with the AWS environment and a given local state (cache) folder.
fn run_on(moto: &Moto, state_dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut env = moto.env();
    env.push(("AUTOLOADER_STATE_DIR", state_dir.display().to_string()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let args: Vec<String> = args.iter().map(|a| (*a).to_string()).collect();
    common::run(&args, &env)
}

#[test]
fn checkpoint_and_schemas_on_s3_survive_a_new_machine_a_stale_cache_and_a_crash() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    moto.put("lake", "in/a.json", common::orders_jsonl(0, 10));
    moto.put("lake", "in/b.json", common::orders_jsonl(10, 20));
    let s = Scratch::new();
    let machine = |n: u32| s.dir.path().join(format!("machine-{n}"));
    // No --checkpoint: it defaults to s3://lake/t/_autoloader, the schema location with it.
    let args = ["ingest", "s3://lake/in", "s3://lake/t", "--once"];

    assert_eq!(
        summary_figure(&ok(&run_on(&moto, &machine(1), &args)), "rows"),
        20
    );
    let state = moto.keys("lake", "t/_autoloader");
    for want in [
        "t/_autoloader/_schemas/0",
        "t/_autoloader/stream",
        "t/_autoloader/plans/00000000000000000000.json",
        "t/_autoloader/commits/00000000000000000000.json",
    ] {
        assert!(
            state.iter().any(|k| k == want),
            "{want} missing from {state:?}"
        );
    }
    assert!(
        !state.iter().any(|k| k.ends_with("/lock")),
        "the lease is released at exit: {state:?}"
    );

    // A new machine (empty local state) takes only the new object.
    moto.put("lake", "in/c.json", common::orders_jsonl(20, 25));
    let out = ok(&run_on(&moto, &machine(2), &args));
    assert_eq!(summary_figure(&out, "files"), 1, "{out}");
    // The first machine's cache is now behind S3: it is rebuilt, nothing is taken twice.
    assert_eq!(
        summary_figure(&ok(&run_on(&moto, &machine(1), &args)), "files"),
        0
    );

    // A crash right after the Delta commit, restarted on yet another machine: the plan on
    // S3 and the table's txn say the batch landed, so it is not committed again.
    moto.put("lake", "in/d.json", common::orders_jsonl(25, 30));
    let mut env = moto.env();
    env.push(("AUTOLOADER_STATE_DIR", machine(3).display().to_string()));
    let crashed = std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
        .args(args)
        .envs(env)
        .env("AUTOLOADER_FAILPOINT", "after-delta-commit=kill")
        .output()
        .unwrap();
    assert!(!crashed.status.success(), "the failpoint killed it");
    let out = ok(&run_on(&moto, &machine(4), &args));
    assert_eq!(summary_figure(&out, "files"), 0, "{out}");
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/t")),
        (0..30).collect::<Vec<_>>()
    );

    // `status` reads an S3 checkpoint from any machine, and does not invent one.
    let status = ok(&run_on(
        &moto,
        &machine(5),
        &[
            "status",
            "--checkpoint",
            "s3://lake/t/_autoloader",
            "--json",
        ],
    ));
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["filesIngested"], 4, "{status}");
    let missing = run_on(
        &moto,
        &machine(5),
        &["status", "--checkpoint", "s3://lake/nothing/_autoloader"],
    );
    assert!(!missing.status.success());
    assert!(
        moto.keys("lake", "nothing").is_empty(),
        "no checkpoint was created"
    );
}

#[test]
fn every_report_reads_an_s3_table_and_its_checkpoint() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    let s = Scratch::new();
    let state = s.dir.path();
    let args = [
        "ingest",
        "s3://lake/in",
        "s3://lake/t",
        "--once",
        "-o",
        "cloudFiles.inferColumnTypes=true",
    ];
    moto.put("lake", "in/1.json", "{\"order_id\": 1, \"amount\": 1.5}\n");
    ok(&run_on(&moto, state, &args));
    moto.put(
        "lake",
        "in/2.json",
        "{\"order_id\": 2, \"amount\": \"oops\"}\n",
    );
    ok(&run_on(&moto, state, &args));

    // drift reads the table's data files on S3 (it failed: No such file or directory).
    let out = ok(&run_on(
        &moto,
        state,
        &["drift", "s3://lake/t", "--since", "7d", "--json"],
    ));
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["days"][0]["rows"], 2, "{report}");
    assert_eq!(report["days"][0]["rescuedRows"], 1, "{report}");
    assert_eq!(report["keys"][0]["key"], "amount", "{report}");
    assert_eq!(report["keys"][0]["occurrences"], 1, "{report}");
    assert!(
        report["keys"][0]["exampleFile"]
            .as_str()
            .unwrap()
            .ends_with("in/2.json"),
        "{report}"
    );
    // status, events and schema take the S3 table and find its checkpoint under it.
    let status: serde_json::Value = serde_json::from_str(&ok(&run_on(
        &moto,
        state,
        &["status", "s3://lake/t", "--json"],
    )))
    .unwrap();
    assert_eq!(status["filesIngested"], 2, "{status}");
    assert_eq!(status["rescuedRows"], 1, "{status}");
    assert_eq!(status["checkpoint"], "s3://lake/t/_autoloader", "{status}");
    let events = ok(&run_on(
        &moto,
        state,
        &[
            "events",
            "s3://lake/t",
            "--type",
            "batch_committed",
            "--json",
        ],
    ));
    assert_eq!(events.lines().count(), 2, "{events}");
    assert_eq!(
        ok(&run_on(&moto, state, &["schema", "show", "s3://lake/t"])),
        "order_id BIGINT,\namount DOUBLE,\n_rescued_data STRING\n"
    );
    let missing = run_on(&moto, state, &["status", "s3://lake/nothing"]);
    assert_eq!(
        missing.status.code(),
        Some(2),
        "{}",
        common::stderr(&missing)
    );
    let missing = run_on(&moto, state, &["drift", "s3://lake/nothing"]);
    assert!(!missing.status.success());
    assert!(
        common::stderr(&missing).contains("s3://lake/nothing"),
        "{}",
        common::stderr(&missing)
    );
}

#[test]
fn an_s3_checkpoint_lease_refuses_a_live_holder_and_expires_for_a_dead_one() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    moto.put("lake", "in/a.json", common::orders_jsonl(0, 3));
    let s = Scratch::new();
    let args = ["ingest", "s3://lake/in", "s3://lake/t", "--once"];
    let lease = |expires_at_ms: i64| {
        serde_json::json!({
            "holder": "pid 4242 on other-host since 2026-11-30T00:00:00Z",
            "token": "theirs",
            "expiresAtMs": expires_at_ms,
            "host": "other-host",
            "pid": 4242,
        })
        .to_string()
    };
    let now = chrono::Utc::now().timestamp_millis();
    moto.put("lake", "t/_autoloader/lock", lease(now + 60_000));
    let out = run_on(&moto, s.dir.path(), &args);
    assert_eq!(out.status.code(), Some(75), "{}", common::stderr(&out));
    assert!(
        common::stderr(&out).contains("pid 4242 on other-host"),
        "{}",
        common::stderr(&out)
    );

    moto.put("lake", "t/_autoloader/lock", lease(now - 1));
    assert_eq!(
        summary_figure(&ok(&run_on(&moto, s.dir.path(), &args)), "rows"),
        3
    );
}

#[test]
fn incremental_listing_starts_after_the_last_key_and_a_full_listing_catches_late_keys() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    moto.put("lake", "in/2026-11-01.json", common::orders_jsonl(0, 2));
    let s = Scratch::new();
    let ckpt = s.dir.path().join("ckpt").display().to_string();
    let run = |mode: &str, interval: &str| {
        let args = [
            "ingest",
            "s3://lake/in",
            "s3://lake/t",
            "--once",
            "--checkpoint",
            &ckpt,
            "-o",
            &format!("cloudFiles.useIncrementalListing={mode}"),
            "-o",
            &format!("cloudFiles.fullListingInterval={interval}"),
        ];
        let out = ok(&run_on(&moto, s.dir.path(), &args));
        summary_figure(&out, "files")
    };
    // `auto` lists in full until a full listing shows new keys arriving after the ingested ones.
    assert_eq!(run("auto", "1h"), 1);
    moto.put("lake", "in/2026-11-02.json", common::orders_jsonl(2, 4));
    assert_eq!(run("auto", "1h"), 1);
    // In order: listed from the last key on. A late key (sorting before it) is not listed...
    moto.put("lake", "in/2026-11-03.json", common::orders_jsonl(4, 6));
    moto.put("lake", "in/2026-10-31.json", common::orders_jsonl(6, 8));
    assert_eq!(run("auto", "1h"), 1, "only the key after the last one");
    // ...until the periodic full listing, which takes it, and `auto` then stops listing
    // incrementally, since keys no longer arrive in order.
    assert_eq!(
        run("auto", "0s"),
        1,
        "the backstop full listing takes the late key"
    );
    moto.put("lake", "in/2026-10-30.json", common::orders_jsonl(8, 10));
    assert_eq!(
        run("auto", "1h"),
        1,
        "auto lists everything once order broke"
    );
    // `false` always lists everything; nothing was taken twice.
    assert_eq!(run("false", "1h"), 0);
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/t")),
        (0..10).collect::<Vec<_>>()
    );
}

/// An instance metadata service that refuses everything, as 169.254.169.254 answers off
/// EC2 behind some proxies (elsewhere it times out): the client asks it when no
/// credentials are set.
fn refusing_metadata_service() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(
                b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    format!("http://{addr}")
}

/// The binary with exactly `env` for AWS (nothing inherited), logging at warn.
fn run_with_aws_env(args: &[&str], env: &[(&str, String)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_autoloader"));
    cmd.args(args)
        .env("RUST_LOG", "warn")
        .env_remove("AUTOLOADER_FAILPOINT");
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    cmd.output().unwrap()
}

#[test]
fn s3_mistakes_say_what_is_wrong_and_what_to_set() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    moto.put("lake", "landing/a.json", common::orders_jsonl(0, 3));
    let s = Scratch::new();
    let ckpt = s.dir.path().join("ck");
    let args = |source: &'static str| {
        [
            "ingest",
            source,
            "s3://lake/bronze",
            "--once",
            "--checkpoint",
            ckpt.to_str().unwrap(),
        ]
        .map(String::from)
    };
    let env = moto.env();

    // A plain-HTTP endpoint without AWS_ALLOW_HTTP: exit 2 before any request, saying
    // what to set (it was "HTTP error: builder error", exit 1).
    let no_http: Vec<(&str, String)> = env
        .iter()
        .filter(|(k, _)| *k != "AWS_ALLOW_HTTP")
        .cloned()
        .collect();
    let a = args("s3://lake/landing");
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let out = run_with_aws_env(&a, &no_http);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("set AWS_ALLOW_HTTP=true"), "{err}");
    assert!(!err.contains("builder error"), "{err}");
    // The same from a config file whose only S3 location is the table.
    let config = s.dir.path().join("streams.toml");
    std::fs::create_dir_all(s.landing()).unwrap();
    std::fs::write(
        &config,
        "[[stream]]\nname = \"a\"\nsource = \"landing\"\ntable = \"s3://lake/t\"\ncheckpoint = \"ck2\"\n",
    )
    .unwrap();
    let out = run_with_aws_env(&["run", config.to_str().unwrap(), "--check"], &no_http);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    assert!(common::stderr(&out).contains("set AWS_ALLOW_HTTP=true"));

    // No credentials: the client asks the metadata service, which refuses; the error
    // says which variables to set (it was a bare 403 from 169.254.169.254).
    let mut no_keys: Vec<(&str, String)> = env
        .iter()
        .filter(|(k, _)| !k.starts_with("AWS_ACCESS_KEY") && !k.starts_with("AWS_SECRET"))
        .cloned()
        .collect();
    no_keys.push(("AWS_METADATA_ENDPOINT", refusing_metadata_service()));
    let out = run_with_aws_env(&a, &no_keys);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no AWS credentials")
            && err.contains("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
        "{err}"
    );

    // A prefix that matches nothing: still exit 0, but a warning names it.
    let a = args("s3://lake/landnig");
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let out = run_with_aws_env(&a, &env);
    let stdout = ok(&out);
    assert_eq!(summary_figure(&stdout, "files"), 0);
    assert!(
        common::stderr(&out).contains("No files under s3://lake/landnig/ yet"),
        "{}",
        common::stderr(&out)
    );
}

/// `table set` and `table show` on an S3 table: one property commit, read back with the
/// table's flow.
#[test]
fn table_set_and_show_work_on_an_s3_table() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    let s = Scratch::new();
    let state = s.dir.path();
    moto.put("lake", "in/1.json", "{\"order_id\": 1}\n");
    ok(&run_on(
        &moto,
        state,
        &["ingest", "s3://lake/in", "s3://lake/t", "--once"],
    ));
    let out = ok(&run_on(
        &moto,
        state,
        &[
            "table",
            "set",
            "s3://lake/t",
            "pipelines.reset.allowed=false",
        ],
    ));
    assert!(out.contains("properties set in version 2"), "{out}");
    let info: serde_json::Value = serde_json::from_str(&ok(&run_on(
        &moto,
        state,
        &["table", "show", "s3://lake/t", "--json"],
    )))
    .unwrap();
    assert_eq!(info["version"], 2, "{info}");
    assert_eq!(
        info["properties"]["pipelines.reset.allowed"], "false",
        "{info}"
    );
    assert_eq!(info["flows"].as_array().unwrap().len(), 1, "{info}");
}

#[test]
fn a_silver_stream_reads_an_s3_bronze_table_incrementally() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    let s = Scratch::new();
    let state = s.dir.path();
    let config = s.dir.path().join("streams.toml");
    std::fs::write(
        &config,
        r#"
[[stream]]
name = "bronze"
source = "s3://lake/landing"
table = "s3://lake/bronze"

[[stream]]
name = "silver"
source = "s3://lake/bronze"
source_format = "delta"
table = "s3://lake/silver"
"#,
    )
    .unwrap();
    let config = config.display().to_string();
    moto.put("lake", "landing/1.json", common::orders_jsonl(0, 10));
    ok(&run_on(
        &moto,
        state,
        &["run", &config, "--once", "--stream", "bronze"],
    ));
    moto.put("lake", "landing/2.json", common::orders_jsonl(10, 15));
    ok(&run_on(
        &moto,
        state,
        &["run", &config, "--once", "--stream", "bronze"],
    ));
    ok(&run_on(
        &moto,
        state,
        &["run", &config, "--once", "--stream", "silver"],
    ));
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/silver")),
        (0..15).collect::<Vec<_>>()
    );
    // A later bronze commit, then both streams of the config: nothing twice.
    moto.put("lake", "landing/3.json", common::orders_jsonl(15, 20));
    ok(&run_on(
        &moto,
        state,
        &["run", &config, "--once", "--stream", "bronze"],
    ));
    ok(&run_on(&moto, state, &["run", &config, "--once"]));
    ok(&run_on(&moto, state, &["run", &config, "--once"]));
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/silver")),
        (0..20).collect::<Vec<_>>()
    );
    // Left unsaid, an S3 prefix holding a _delta_log/ is read as a table too.
    ok(&run_on(
        &moto,
        state,
        &["ingest", "s3://lake/bronze", "s3://lake/silver2", "--once"],
    ));
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/silver2")),
        (0..20).collect::<Vec<_>>()
    );
}

/// `reset` of an S3 table whose checkpoint is on S3 too: guarded (exit 4), then a full
/// refresh (the checkpoint's objects set aside under `_reset-1/`), a re-ingest of every
/// object once, and a reset killed midway through moving the objects that the next
/// `ingest` finishes.
#[test]
fn an_s3_table_and_its_s3_checkpoint_are_reset_and_reingested_once() {
    use std::os::unix::process::ExitStatusExt;
    let moto = Moto::start();
    moto.create_bucket("lake");
    moto.put("lake", "landing/r/a.json", common::orders_jsonl(0, 10));
    moto.put("lake", "landing/r/b.json", common::orders_jsonl(10, 20));
    let s = Scratch::new();
    let state = s.dir.path().join("state").display().to_string();
    let table = "s3://lake/reset/orders".to_string();
    let with_env = |args: &[&str], failpoint: Option<&str>| {
        let mut env = moto.env();
        env.push(("AUTOLOADER_STATE_DIR", state.clone()));
        if let Some(f) = failpoint {
            env.push(("AUTOLOADER_FAILPOINT", f.to_string()));
        }
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let args: Vec<String> = args.iter().map(|a| (*a).to_string()).collect();
        common::run(&args, &env)
    };
    let ingest = || {
        ok(&with_env(
            &["ingest", "s3://lake/landing/r", &table, "--once"],
            None,
        ))
    };
    let ids = || {
        let py = python_rows(&moto, &table);
        let mut ids: Vec<u64> = py["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["order_id"].as_str().unwrap().parse().unwrap())
            .collect();
        ids.sort_unstable();
        ids
    };
    ingest();
    ok(&with_env(
        &["table", "set", &table, "pipelines.reset.allowed=false"],
        None,
    ));
    let refused = with_env(&["reset", &table, "--yes"], None);
    assert_eq!(
        refused.status.code(),
        Some(4),
        "{}",
        common::stderr(&refused)
    );
    ok(&with_env(
        &["table", "set", &table, "pipelines.reset.allowed=true"],
        None,
    ));
    ok(&with_env(&["reset", &table, "--yes"], None));
    assert!(ids().is_empty(), "every row removed");
    let kept = moto.keys("lake", "reset/orders/_autoloader/_reset-1");
    assert!(
        kept.iter().any(|k| k.ends_with("_reset-1/stream"))
            && kept.iter().any(|k| k.contains("_reset-1/commits/")),
        "{kept:?}"
    );
    ingest();
    assert_eq!(ids(), (0..20).collect::<Vec<_>>(), "each object once");
    assert!(ingest().contains("ingested 0 files"));
    // Killed after the first object moved: the next ingest finishes the set-aside.
    let killed = with_env(&["reset", &table, "--yes"], Some("reset-mid-aside"));
    assert_eq!(
        killed.status.signal(),
        Some(9),
        "{}",
        common::stderr(&killed)
    );
    ingest();
    assert_eq!(ids(), (0..20).collect::<Vec<_>>(), "after the killed reset");
    assert!(ingest().contains("ingested 0 files"));
}

/// A ONCE backfill of an S3 archive prefix, with a `where`, into an S3 table: it lands once
/// across three runs and across its lost S3 checkpoint (the table records its completion).
#[test]
fn a_once_backfill_on_s3_lands_once_across_runs_and_a_lost_checkpoint() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    let s = Scratch::new();
    let state = s.dir.path();
    let config = s.dir.path().join("streams.toml");
    std::fs::write(
        &config,
        r#"
[defaults.options]
"cloudFiles.inferColumnTypes" = true

[[stream]]
name = "live"
source = "s3://lake/landing"
table = "s3://lake/bronze"

[[stream]]
name = "archive"
source = "s3://lake/archive"
table = "s3://lake/bronze"
once = true
where = "order_id < 1005"
"#,
    )
    .unwrap();
    let config = config.display().to_string();
    moto.put("lake", "landing/1.json", common::orders_jsonl(0, 5));
    moto.put("lake", "archive/old.json", common::orders_jsonl(1000, 1010));
    let expected: Vec<i64> = (0..5).chain(1000..1005).collect();
    for _ in 0..3 {
        ok(&run_on(&moto, state, &["run", &config, "--once"]));
        assert_eq!(
            sorted_ids(&python_rows(&moto, "s3://lake/bronze")),
            expected
        );
    }
    // The ONCE flow's checkpoint is lost (objects and local cache): it does not run again.
    let store = moto.store("lake");
    for key in moto.keys("lake", "bronze/_autoloader/archive") {
        block_on(store.delete(&key.as_str().into())).unwrap();
    }
    let cache = state.join("cache");
    let _ = std::fs::remove_dir_all(&cache);
    let out = ok(&run_on(&moto, state, &["run", &config, "--once"]));
    assert!(out.contains("ONCE flow: ran already"), "{out}");
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/bronze")),
        expected
    );
}

#[test]
fn clean_source_moves_and_deletes_ingested_objects_on_s3() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    for (i, key) in ["in/a.json", "in/day/b.json"].iter().enumerate() {
        let i = i as u64;
        moto.put("lake", key, common::orders_jsonl(i * 5, i * 5 + 5));
    }
    let s = Scratch::new();
    let ckpt = s.dir.path().join("ckpt").display().to_string();
    let args = |clean: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "ingest",
            "s3://lake/in",
            "s3://lake/t",
            "--once",
            "--checkpoint",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.push(ckpt.clone());
        for o in clean
            .iter()
            .chain(&["cloudFiles.cleanSource.retentionDuration=0s"])
        {
            a.push("-o".into());
            a.push(o.to_string());
        }
        a
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        run_on(&moto, s.dir.path(), &a)
    };
    let moving = [
        "cloudFiles.cleanSource=MOVE",
        "cloudFiles.cleanSource.moveDestination=s3://lake/done",
    ];
    ok(&run(args(&moving)));
    assert_eq!(moto.keys("lake", "in"), Vec::<String>::new());
    assert_eq!(
        moto.keys("lake", "done"),
        ["done/a.json", "done/day/b.json"]
    );
    assert_eq!(
        moto.get("lake", "done/day/b.json"),
        common::orders_jsonl(5, 10).into_bytes()
    );
    // Another bucket is refused before anything runs.
    let out = run(args(&[
        "cloudFiles.cleanSource=MOVE",
        "cloudFiles.cleanSource.moveDestination=s3://elsewhere/done",
    ]));
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    // A listed bucket is listed whole at every poll: a backfill interval is refused.
    let out = run(args(&["cloudFiles.backfillInterval=1h"]));
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    assert!(
        common::stderr(&out).contains("cloudFiles.backfillInterval applies to notification mode"),
        "{}",
        common::stderr(&out)
    );
    // DELETE: a new object goes once ingested.
    moto.put("lake", "in/c.json", common::orders_jsonl(10, 12));
    ok(&run(args(&["cloudFiles.cleanSource=DELETE"])));
    assert_eq!(moto.keys("lake", "in"), Vec::<String>::new());
    assert_eq!(moto.keys("lake", "done").len(), 2);
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/t")),
        (0..12).collect::<Vec<_>>()
    );
}

/// Every format beside JSON, CSV and Parquet from a bucket: XML, Avro and ORC (files
/// fetched whole to a temporary copy first, as Parquet's are), text and binaryFile, each
/// prefix into its own S3 table, read back by Python `deltalake` with its types; a corrupt
/// ORC object is named by its `s3://` path.
#[test]
fn xml_avro_orc_text_and_binary_files_ingest_from_s3() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    let fixture = |rel: &str| {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures")
                .join(rel),
        )
        .unwrap()
    };
    moto.put(
        "lake",
        "in/xml/a.xml",
        "<rows><row id=\"1\"><name>ada</name></row><row id=\"2\"><name>bob</name></row></rows>",
    );
    moto.put(
        "lake",
        "in/avro/orders-1.avro",
        fixture("avro/orders-1.avro"),
    );
    moto.put(
        "lake",
        "in/avro/orders-2.avro",
        fixture("avro/orders-2.avro"),
    );
    moto.put("lake", "in/orc/orders-1.orc", fixture("orc/orders-1.orc"));
    moto.put("lake", "in/orc/orders-2.orc", fixture("orc/orders-2.orc"));
    moto.put("lake", "in/text/a.log", "one\ntwo\n");
    moto.put("lake", "in/bin/a.bin", vec![0u8, 1, 2, 255]);
    let s = Scratch::new();
    let ingest = |name: &str, opts: &[&str]| {
        let ckpt = s.dir.path().join(name).display().to_string();
        let mut a: Vec<String> = vec![
            "ingest".into(),
            format!("s3://lake/in/{name}"),
            format!("s3://lake/t/{name}"),
            "--once".into(),
            "--checkpoint".into(),
            ckpt,
        ];
        for o in opts {
            a.push("-o".into());
            a.push((*o).to_string());
        }
        run_with(&moto, &a)
    };
    let rows = |py: &serde_json::Value, col: &str| -> Vec<String> {
        py["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| match &r[col] {
                serde_json::Value::String(t) => t.clone(),
                v => v.to_string(),
            })
            .collect()
    };

    ok(&ingest(
        "xml",
        &[
            "cloudFiles.format=xml",
            "rowTag=row",
            "cloudFiles.inferColumnTypes=true",
        ],
    ));
    let py = python_read_by(&moto, "s3://lake/t/xml", "_id", &[]);
    assert_eq!(py["types"]["_id"], "int64", "{py}");
    assert_eq!(rows(&py, "name"), ["ada", "bob"], "{py}");

    // Told from the names: `.avro`, `.orc`.
    for name in ["avro", "orc"] {
        ok(&ingest(name, &[]));
        let py = python_read_by(&moto, &format!("s3://lake/t/{name}"), "id", &[]);
        assert_eq!(py["num_rows"], 4, "{name}: {py}");
        assert_eq!(py["types"]["id"], "int64", "{name}: {py}");
        assert_eq!(py["types"]["amount"], "double", "{name}: {py}");
        assert_eq!(
            rows(&py, "name"),
            ["ada", "bob", "cy", "di"],
            "{name}: {py}"
        );
        let path = py["rows"][0]["_metadata"]["file_path"].as_str().unwrap();
        assert!(path.starts_with(&format!("s3://lake/in/{name}/")), "{path}");
    }

    ok(&ingest("text", &["cloudFiles.format=text"]));
    let py = python_read_by(&moto, "s3://lake/t/text", "value", &[]);
    assert_eq!(rows(&py, "value"), ["one", "two"], "{py}");

    ok(&ingest("bin", &["cloudFiles.format=binaryFile"]));
    let py = python_read_by(&moto, "s3://lake/t/bin", "path", &[]);
    assert_eq!(py["types"]["content"], "binary", "{py}");
    assert_eq!(rows(&py, "content"), ["000102ff"], "{py}");
    assert_eq!(rows(&py, "length"), ["4"], "{py}");
    assert_eq!(rows(&py, "path"), ["s3://lake/in/bin/a.bin"], "{py}");

    // A corrupt object is named by its S3 path; nothing more lands.
    moto.put("lake", "in/orc/bad.orc", b"ORC but not really".to_vec());
    let out = ingest("orc", &[]);
    assert!(!out.status.success());
    let err = common::stderr(&out);
    assert!(err.contains("s3://lake/in/orc/bad.orc is corrupt"), "{err}");
    assert_eq!(
        python_read_by(&moto, "s3://lake/t/orc", "id", &[])["num_rows"],
        4
    );
}

/// Every key S3 can hold ingests in listing mode: non-ASCII folders and names, `%`, `{`,
/// `^` (object_store's `Path::from` once named other keys for them), under a prefix that is
/// itself non-ASCII (issue 36.3).
#[test]
fn keys_with_any_character_are_listed_and_ingested() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    let keys = [
        "주문/land/2025.json",
        "주문/land/accé.json",
        "주문/land/50% off.json",
        "주문/land/{x}^~.json",
        "주문/land/a b+c=(d).json",
    ];
    for (i, key) in keys.iter().enumerate() {
        let i = i as u64;
        moto.put("lake", key, common::orders_jsonl(i * 10, i * 10 + 10));
    }
    let out = run_with(
        &moto,
        &[
            "ingest".into(),
            "s3://lake/주문/land".into(),
            "s3://lake/bronze".into(),
            "--once".into(),
        ],
    );
    let stdout = ok(&out);
    assert!(stdout.contains("ingested 5 files"), "{stdout}");
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/bronze")),
        (0..50).collect::<Vec<_>>()
    );
    // A rerun finds each of them ingested.
    let again = ok(&run_with(
        &moto,
        &[
            "ingest".into(),
            "s3://lake/주문/land".into(),
            "s3://lake/bronze".into(),
            "--once".into(),
        ],
    ));
    assert!(again.contains("ingested 0 files"), "{again}");
}

/// A bucket that does not exist is said in a sentence naming it, exit 2 as for a missing
/// local folder, never S3's raw XML (issue 36.12).
#[test]
fn a_missing_bucket_is_a_sentence_and_exit_2() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    let out = run_with(
        &moto,
        &[
            "ingest".into(),
            "s3://no-such-bucket/landing".into(),
            "s3://lake/bronze".into(),
            "--once".into(),
        ],
    );
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no-such-bucket") && err.contains("does not exist") && !err.contains("<"),
        "{err}"
    );
}

/// Expectations on S3: the quarantine table beside the checkpoint on S3, `quality` read
/// from the S3 table's log, and `quarantine replay` with a rule relaxed since.
#[test]
fn expectations_quality_and_replay_on_s3() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    let s = Scratch::new();
    let state = s.dir.path();
    let lines: String = (1..=10)
        .map(|i| format!("{{\"order_id\": {i}, \"amount\": {}}}\n", i * 10))
        .collect();
    moto.put("lake", "in/1.json", lines.as_str());
    let ingest = |limit: &str| {
        let rule = format!("small=amount < {limit}");
        ok(&run_on(
            &moto,
            state,
            &[
                "ingest",
                "s3://lake/in",
                "s3://lake/t",
                "--once",
                "-o",
                "cloudFiles.inferColumnTypes=true",
                "--expect-or-quarantine",
                &rule,
                "--expect-or-drop",
                "positive=amount > 15",
            ],
        ))
    };
    ingest("80");
    let quality: serde_json::Value = serde_json::from_str(&ok(&run_on(
        &moto,
        state,
        &["quality", "s3://lake/t", "--json"],
    )))
    .unwrap();
    let days = quality["days"].as_array().unwrap();
    let small = days.iter().find(|d| d["expectation"] == "small").unwrap();
    assert_eq!(
        (&small["checked"], &small["failed"], &small["quarantined"]),
        (&10.into(), &3.into(), &3.into()),
        "{quality}"
    );
    let positive = days
        .iter()
        .find(|d| d["expectation"] == "positive")
        .unwrap();
    assert_eq!(positive["dropped"], 1, "{quality}");
    assert_eq!(
        python_rows(&moto, "s3://lake/t/_autoloader/quarantine")["num_rows"],
        3
    );
    // Relaxed, recorded by a run with nothing new, then replayed: 80 and 90 land, 100 stays.
    ingest("100");
    let replay: serde_json::Value = serde_json::from_str(&ok(&run_on(
        &moto,
        state,
        &["quarantine", "replay", "s3://lake/t", "--json"],
    )))
    .unwrap();
    assert_eq!(replay["landed"], 2, "{replay}");
    assert_eq!(replay["stillFailing"], 1, "{replay}");
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/t")),
        (2..=9).collect::<Vec<i64>>()
    );
}
