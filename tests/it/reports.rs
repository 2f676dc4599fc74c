//! The report commands (`status`, `events`, `schema`, `drift`): what they accept and what
//! they show, on local tables (S3 ones are in `s3.rs`).

use crate::common::{self, Scratch, ok};

fn run(args: &[&str]) -> std::process::Output {
    let args: Vec<String> = args.iter().map(|a| (*a).to_string()).collect();
    common::run(&args, &[])
}

/// A table with two batches, the second with a rescued value (`amount` is a DOUBLE).
fn table_with_rescued_data(s: &Scratch) {
    s.land("1.json", "{\"order_id\": 1, \"amount\": 1.5}\n");
    ok(&s.ingest(&["cloudFiles.inferColumnTypes=true"]));
    s.land("2.json", "{\"order_id\": 2, \"amount\": \"oops\"}\n");
    ok(&s.ingest(&["cloudFiles.inferColumnTypes=true"]));
}

#[test]
fn since_takes_days_and_weeks_as_the_help_shows() {
    let s = Scratch::new();
    table_with_rescued_data(&s);
    let table = s.table().display().to_string();
    for since in ["7d", "1w", "2 weeks", "36h"] {
        let out = ok(&run(&["drift", &table, "--since", since, "--json"]));
        let report: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(report["days"][0]["rows"], 2, "--since {since}: {report}");
        assert_eq!(report["keys"][0]["key"], "amount", "--since {since}");
    }
    // A time after the rows: nothing.
    let out = ok(&run(&["drift", &table, "--since", "2099-01-01", "--json"]));
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["days"], serde_json::json!([]), "{report}");
    let ckpt = s.table().join("_autoloader").display().to_string();
    let out = ok(&run(&[
        "events",
        "--checkpoint",
        &ckpt,
        "--type",
        "batch_committed",
        "--since",
        "2w",
        "--json",
    ]));
    assert_eq!(out.lines().count(), 2, "{out}");
    // A unit it does not know, or none: a usage error naming the units.
    for bad in ["7y", "7"] {
        let out = run(&["drift", &table, "--since", bad]);
        assert_eq!(out.status.code(), Some(2), "--since {bad}");
        let err = common::stderr(&out);
        assert!(
            err.contains(&format!("--since \"{bad}\"")) && err.contains("s, m, h, d or w"),
            "{err}"
        );
    }
}

#[test]
fn drift_refuses_a_folder_that_is_not_a_table_and_creates_nothing() {
    let s = Scratch::new();
    let missing = s.dir.path().join("nothing");
    let out = run(&["drift", &missing.display().to_string()]);
    // A wrong argument, as `events` on a folder that is not a checkpoint (it was 1).
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    let err = common::stderr(&out);
    assert!(
        err.contains(&missing.display().to_string()) && err.contains("not a Delta table"),
        "{err}"
    );
    assert!(!missing.exists(), "the report created no folder");
}

#[test]
fn status_events_and_schema_take_the_table_of_an_ingest_stream() {
    let s = Scratch::new();
    table_with_rescued_data(&s);
    let table = s.table().display().to_string();
    let status: serde_json::Value =
        serde_json::from_str(&ok(&run(&["status", &table, "--json"]))).unwrap();
    assert_eq!(status["filesIngested"], 2, "{status}");
    assert_eq!(status["rows"], 2, "{status}");
    assert_eq!(status["stream"], "table", "{status}");
    let text = ok(&run(&["status", &table]));
    assert!(
        text.contains("stream:         table") && text.contains("ingested:       2 files"),
        "{text}"
    );
    let events = ok(&run(&[
        "events",
        &table,
        "--type",
        "batch_committed",
        "--json",
    ]));
    assert_eq!(events.lines().count(), 2, "{events}");
    // --checkpoint pointed at the table finds its checkpoint as well.
    let status: serde_json::Value =
        serde_json::from_str(&ok(&run(&["status", "--checkpoint", &table, "--json"]))).unwrap();
    assert_eq!(status["filesIngested"], 2, "{status}");
    // schema takes the table, the checkpoint, the schema location or its `_schemas`
    // folder alike.
    let ckpt = s.table().join("_autoloader").display().to_string();
    let folder = s.table().join("_autoloader/_schemas").display().to_string();
    for at in [&table, &ckpt, &folder] {
        assert_eq!(
            ok(&run(&["schema", "show", at, "0"])),
            "order_id BIGINT,\namount DOUBLE,\n_rescued_data STRING\n"
        );
        assert!(ok(&run(&["schema", "history", at])).contains("_schemas/0"));
    }
    let latest: serde_json::Value =
        serde_json::from_str(&ok(&run(&["schema", "show", &table, "--json"]))).unwrap();
    assert_eq!(latest["version"], 0);
    assert_eq!(
        latest["ddl"],
        "order_id BIGINT, amount DOUBLE, _rescued_data STRING"
    );
    let out = run(&["schema", "show", &table, "7"]);
    assert!(!out.status.success());
    assert!(
        common::stderr(&out).contains("version 7"),
        "{}",
        common::stderr(&out)
    );

    // A folder with no checkpoint under it: a usage error pointing at --checkpoint.
    let elsewhere = s.dir.path().join("landing").display().to_string();
    for cmd in ["status", "events"] {
        let out = run(&[cmd, &elsewhere]);
        assert_eq!(out.status.code(), Some(2), "{cmd}");
        let err = common::stderr(&out);
        assert!(
            err.contains(&elsewhere) && err.contains("--checkpoint"),
            "{cmd}: {err}"
        );
    }
}

#[test]
fn a_table_with_two_streams_lists_them_and_stream_picks_one() {
    let s = Scratch::new();
    let dir = s.dir.path();
    for (name, from) in [("a", 0), ("b", 100)] {
        let folder = dir.join("land").join(name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("1.json"), common::orders_jsonl(from, from + 3)).unwrap();
    }
    let config = dir.join("streams.toml");
    std::fs::write(
        &config,
        r#"
[[stream]]
name = "a"
source = "land/a"
table = "shared"

[[stream]]
name = "b"
source = "land/b"
table = "shared"
"#,
    )
    .unwrap();
    ok(&run(&["run", &config.display().to_string(), "--once"]));
    let table = dir.join("shared").display().to_string();

    let all: serde_json::Value =
        serde_json::from_str(&ok(&run(&["status", &table, "--json"]))).unwrap();
    let names: Vec<&str> = all
        .as_array()
        .expect("one status per stream")
        .iter()
        .map(|st| st["stream"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"], "{all}");
    assert!(
        all.as_array().unwrap().iter().all(|st| st["rows"] == 3),
        "{all}"
    );
    let one: serde_json::Value =
        serde_json::from_str(&ok(&run(&["status", &table, "--stream", "b", "--json"]))).unwrap();
    assert_eq!(one["stream"], "b", "{one}");
    assert!(
        one["checkpoint"]
            .as_str()
            .unwrap()
            .ends_with("_autoloader/b"),
        "{one}"
    );
    let out = run(&["status", &table, "--stream", "zz"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out).contains("its streams: a, b"),
        "{}",
        common::stderr(&out)
    );

    let events = ok(&run(&[
        "events",
        &table,
        "--type",
        "batch_committed",
        "--json",
    ]));
    let whose: Vec<String> = events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["stream"].to_string())
        .collect();
    assert_eq!(whose.len(), 2, "both streams' events: {events}");
    let only_b = ok(&run(&[
        "events",
        &table,
        "--stream",
        "b",
        "--type",
        "batch_committed",
        "--json",
    ]));
    assert_eq!(only_b.lines().count(), 1, "{only_b}");
    assert!(only_b.contains("\"stream\":\"b\""), "{only_b}");

    // One schema per stream: schema needs to know which.
    let out = run(&["schema", "show", &table]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out).contains("several streams (a, b)")
            && common::stderr(&out).contains("--stream"),
        "{}",
        common::stderr(&out)
    );
    let ddl = ok(&run(&["schema", "show", &table, "--stream", "a"]));
    assert!(ddl.starts_with("order_id STRING,\n"), "{ddl}");
}

#[test]
fn status_of_a_running_stream_shows_live_figures() {
    let s = Scratch::new();
    s.land("1.json", common::orders_jsonl(0, 4));
    s.land("2.json", common::orders_jsonl(4, 9));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
        .args([
            "ingest",
            s.landing().to_str().unwrap(),
            s.table().to_str().unwrap(),
            "--poll-interval",
            "0.3",
            "-q",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let events = s.table().join("_autoloader/events.jsonl");
    common::wait_until(
        "the watcher to commit",
        std::time::Duration::from_secs(30),
        || std::fs::read_to_string(&events).is_ok_and(|t| t.contains("batch_committed")),
    );
    let table = s.table().display().to_string();
    let status: serde_json::Value =
        serde_json::from_str(&ok(&run(&["status", &table, "--json"]))).unwrap();
    // SAFETY: kill(2) with our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    assert!(child.wait().unwrap().success());
    assert!(
        status["running"]
            .as_str()
            .unwrap()
            .contains(&format!("pid {}", child.id())),
        "{status}"
    );
    assert_eq!(status["filesIngested"], 2, "{status}");
    assert_eq!(status["filesPending"], 0, "{status}");
    assert_eq!(status["rows"], 9, "{status}");
    assert_eq!(status["schemaVersion"], 0, "{status}");
    assert!(
        status["liveAt"].as_str().unwrap().starts_with("20"),
        "{status}"
    );
}

/// A report piped into a reader that stops early (`autoloader events TABLE | head -1`)
/// ends quietly, as `grep` does; it used to panic with "failed printing to stdout: Broken
/// pipe" and a backtrace.
#[test]
fn reports_into_a_closed_pipe_end_quietly() {
    let s = Scratch::new();
    table_with_rescued_data(&s);
    let table = s.table().display().to_string();
    for args in [
        vec!["events", table.as_str()],
        vec!["status", table.as_str()],
        vec!["drift", table.as_str()],
        vec!["schema", "history", table.as_str()],
        vec!["options"],
    ] {
        // The reader is gone before the report writes its first line.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
            .args(&args)
            .env("RUST_LOG", "warn")
            .env("RUST_BACKTRACE", "1")
            .stdout(writer)
            .output()
            .unwrap();
        let err = common::stderr(&out);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(err.trim().is_empty(), "{args:?}: {err}");
    }
}

/// An `ingest` stream given `--name` is shown under that name, and `--stream` finds it by it
/// (or by the table folder's name, its default). It used to be shown as the folder's name,
/// and `--stream NAME` answered "no stream NAME writes TABLE".
#[test]
fn reports_know_an_ingest_stream_by_its_name() {
    let s = Scratch::new();
    s.land("1.json", "{\"order_id\": 1}\n");
    let out = s
        .ingest_command()
        .args(["--name", "orders_app"])
        .output()
        .unwrap();
    ok(&out);
    let table = s.table().display().to_string();
    let folder = s.table().file_name().unwrap().to_str().unwrap().to_string();
    let st: serde_json::Value =
        serde_json::from_str(&ok(&run(&["status", &table, "--json"]))).unwrap();
    assert_eq!(st["stream"], "orders_app", "{st}");
    // The text is in the summary line's units (it said `1 batches`, `16 bytes`).
    let text = ok(&run(&["status", &table]));
    assert!(
        text.contains("stream:         orders_app")
            && text.contains("ingested:       1 file, 1 batch, 1 row, 0 rescued rows, 16 B\n")
            && text.contains("pending:        0 files"),
        "{text}"
    );
    for name in ["orders_app", folder.as_str()] {
        let out = ok(&run(&["status", &table, "--stream", name, "--json"]));
        let st: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(st["filesIngested"], 1, "--stream {name}: {st}");
        ok(&run(&["events", &table, "--stream", name]));
        ok(&run(&["schema", "show", &table, "--stream", name]));
    }
    let out = run(&["status", &table, "--stream", "other"]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    assert!(
        common::stderr(&out).contains("orders_app"),
        "{}",
        common::stderr(&out)
    );
}

/// A schema version that is not there, or a folder without schema versions, is a wrong
/// argument (exit 2), as a path that is not a checkpoint is; it was exit 1.
#[test]
fn schema_of_a_missing_version_is_a_wrong_argument() {
    let s = Scratch::new();
    table_with_rescued_data(&s);
    let table = s.table().display().to_string();
    for args in [
        vec!["schema", "show", table.as_str(), "7"],
        vec!["schema", "diff", table.as_str(), "0", "7"],
    ] {
        let out = run(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            common::stderr(&out)
        );
        assert!(
            common::stderr(&out).contains("version 7"),
            "{}",
            common::stderr(&out)
        );
    }
}

/// `status` counts as pending only the files the stream would take: its recorded filters
/// (`pathGlobFilter` here) apply (issue 36.4).
#[test]
fn status_pending_files_follow_the_stream_s_filters() {
    let s = crate::common::Scratch::new();
    s.land("a.json", crate::common::orders_jsonl(0, 2));
    s.land("skip.txt", "not json\n");
    crate::common::ok(&s.ingest(&["pathGlobFilter=*.json"]));
    s.land("b.json", crate::common::orders_jsonl(2, 4));
    s.land("skip2.txt", "not json\n");
    let out = crate::common::run(
        &[
            "status".into(),
            s.table().display().to_string(),
            "--json".into(),
        ],
        &[],
    );
    let st: serde_json::Value = serde_json::from_str(crate::common::ok(&out).trim()).unwrap();
    assert_eq!(st["filesPending"], 1, "{st}");
}
