//! The command line itself: help, exit codes, summaries (text and `--json`), stream names,
//! `run --check`/`--list`, logging levels, completions and the man page.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{self, Scratch, ok, stderr};

/// Runs the binary with `args` and no `RUST_LOG`, so `-v`/`-q` decide the logging.
fn autoloader(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_autoloader"))
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("AUTOLOADER_FAILPOINT")
        .output()
        .expect("the autoloader binary runs")
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited, not killed")
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn help_documents_sources_json_diff_arguments_and_exit_codes() {
    let top = text(&autoloader(&["--help"]));
    for line in [
        "Exit codes:",
        "  2    invalid arguments",
        "  4    reset refused: a named table has pipelines.reset.allowed=false",
        "  75   another process holds the checkpoint",
        "  130  a second SIGINT or SIGTERM",
        "-vv its trace",
    ] {
        assert!(top.contains(line), "--help lacks {line:?}:\n{top}");
    }
    let ingest = text(&autoloader(&["ingest", "--help"]));
    for part in [
        "s3://BUCKET/PREFIX",
        "--json",
        "--name <NAME>",
        "Exit codes:",
    ] {
        assert!(ingest.contains(part), "ingest --help lacks {part:?}");
    }
    let run = text(&autoloader(&["run", "--help"]));
    for part in ["--check", "--list", "--json", "Exit codes:"] {
        assert!(run.contains(part), "run --help lacks {part:?}");
    }
    let diff = text(&autoloader(&["schema", "diff", "--help"]));
    for arg in ["<A>", "<B>"] {
        let line = diff
            .lines()
            .find(|l| l.trim_start().starts_with(arg))
            .unwrap_or("");
        assert!(
            line.contains("The version to compare"),
            "{arg} is described: {diff}"
        );
    }
    for cmd in [
        &["status"][..],
        &["drift"],
        &["schema", "history"],
        &["schema", "diff"],
    ] {
        let help = text(&autoloader(&[cmd, &["--help"]].concat()));
        let line = help.lines().find(|l| l.contains("--json")).unwrap_or("");
        assert!(
            line.contains("Print JSON instead of text"),
            "{cmd:?}: {help}"
        );
    }
    // The ingest guide's table has the same codes.
    let readme = crate::common::doc_page("docs/guide/ingest.md");
    for row in [
        "| `0` |",
        "| `1` |",
        "| `2` |",
        "| `3` |",
        "| `4` |",
        "| `75` |",
        "| `130` |",
    ] {
        assert!(
            readme.contains(row),
            "docs/guide/ingest.md's exit code table lacks {row}"
        );
    }
}

#[test]
fn a_missing_source_is_exit_2_from_ingest_and_from_run() {
    let s = Scratch::new();
    let missing = s.dir.path().join("no-such-folder");
    let out = autoloader(&["ingest", path(&missing), path(&s.table()), "--once"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
    // A single file is a source too: the message does not say a folder is needed.
    assert!(
        !stderr(&out).contains("not a directory") && stderr(&out).contains("a single file"),
        "{}",
        stderr(&out)
    );
    let config = s.dir.path().join("streams.toml");
    std::fs::write(
        &config,
        "[[stream]]\nname = \"a\"\nsource = \"no-such-folder\"\ntable = \"t\"\n",
    )
    .unwrap();
    let out = autoloader(&["run", path(&config), "--once"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(!s.table().exists(), "nothing was created");
}

#[test]
fn flags_with_impossible_values_are_exit_2_saying_what_to_give() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 3));
    let (landing, table) = (s.landing(), s.table());
    let base = ["ingest", path(&landing), path(&table), "--once"];
    let cases: [(&[&str], &str); 3] = [
        (
            &["--metrics-addr", "9464"],
            "give HOST:PORT, e.g. 127.0.0.1:9464",
        ),
        (&["--alert-rescued-share", "50"], "for 50% give 0.5"),
        (
            &["--alert-rescued-share=-0.1"],
            "not a fraction between 0 and 1",
        ),
    ];
    for (flags, says) in cases {
        let out = autoloader(&[&base[..], flags].concat());
        assert_eq!(code(&out), 2, "{flags:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{flags:?}: {}", stderr(&out));
    }
    assert!(!s.table().exists(), "nothing ran");
    // A fraction is taken.
    let out = autoloader(&[&base[..], &["--alert-rescued-share", "0.5", "-q"]].concat());
    ok(&out);
}

#[test]
fn the_summary_line_uses_human_units_and_singulars() {
    let s = Scratch::new();
    let data = common::orders_jsonl(0, 40);
    assert!((1_000..10_000).contains(&data.len()), "{}", data.len());
    s.land("a.json", &data);
    let stdout = ok(&autoloader(&[
        "ingest",
        path(&s.landing()),
        path(&s.table()),
        "--once",
        "-q",
    ]));
    let kb = format!("{:.2} kB", data.len() as f64 / 1000.0);
    let expected =
        format!("ingested 1 file, 40 rows, {kb}, 0 rescued rows, schema version 0, 1 batch, ");
    assert!(
        stdout.starts_with(&expected),
        "{stdout}\nexpected {expected}"
    );
    assert!(stdout.trim_end().ends_with("/s"), "a rate: {stdout}");
    assert!(!stdout.contains(" bytes"), "{stdout}");
}

#[test]
fn ingest_json_summary_and_name_label_the_stream() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 5));
    let out = autoloader(&[
        "ingest",
        path(&s.landing()),
        path(&s.table()),
        "--once",
        "--json",
        "--name",
        "orders_app",
    ]);
    let stdout = ok(&out);
    assert_eq!(stdout.lines().count(), 1, "one JSON object: {stdout}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["stream"], "orders_app");
    assert_eq!(v["status"], "done");
    assert_eq!(v["files"], 1);
    assert_eq!(v["rows"], 5);
    assert_eq!(v["batches"], 1);
    assert_eq!(v["schemaVersion"], 0);
    assert!(v["bytes"].as_u64().unwrap() > 0);
    // The events carry the name; the checkpoint stays TABLE/_autoloader.
    let events = std::fs::read_to_string(s.table().join("_autoloader/events.jsonl")).unwrap();
    assert!(events.contains(r#""stream":"orders_app""#), "{events}");
    assert!(!events.contains(r#""stream":"table""#), "{events}");

    // A failure is an object too, with its exit code.
    let out = autoloader(&["ingest", "/no/such/source", path(&s.table()), "--json"]);
    assert_eq!(code(&out), 2);
    let v: serde_json::Value = serde_json::from_str(&text(&out)).unwrap();
    assert_eq!(v["status"], "failed");
    assert_eq!(v["exitCode"], 2);
    assert!(
        v["error"].as_str().unwrap().contains("/no/such/source"),
        "{v}"
    );

    let out = autoloader(&[
        "ingest",
        path(&s.landing()),
        path(&s.table()),
        "--name",
        "a b",
    ]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("letters, digits, _ or -"),
        "{}",
        stderr(&out)
    );
}

/// A config file with streams `good` (two files) and `bad` (a malformed line under FAILFAST).
fn two_stream_config(s: &Scratch) -> std::path::PathBuf {
    let dir = s.dir.path();
    std::fs::create_dir_all(dir.join("land/good")).unwrap();
    std::fs::create_dir_all(dir.join("land/bad")).unwrap();
    std::fs::write(dir.join("land/good/1.json"), common::orders_jsonl(0, 3)).unwrap();
    std::fs::write(dir.join("land/good/2.json"), common::orders_jsonl(3, 6)).unwrap();
    std::fs::write(
        dir.join("land/bad/1.json"),
        "{\"order_id\": 1}\n{not json\n",
    )
    .unwrap();
    let config = dir.join("streams.toml");
    std::fs::write(
        &config,
        r#"
[[stream]]
name = "good"
source = "land/good"
table = "bronze/good"

[[stream]]
name = "bad"
source = "land/bad"
table = "bronze/bad"
[stream.options]
mode = "FAILFAST"
"#,
    )
    .unwrap();
    config
}

#[test]
fn run_json_prints_one_object_per_stream_failures_included() {
    let s = Scratch::new();
    let config = two_stream_config(&s);
    let out = autoloader(&["run", path(&config), "--once", "--json", "-q"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let objects: Vec<serde_json::Value> = text(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objects.len(), 2, "{}", text(&out));
    assert_eq!(objects[0]["stream"], "good");
    assert_eq!(objects[0]["status"], "done");
    assert_eq!(objects[0]["files"], 2);
    assert_eq!(objects[0]["rows"], 6);
    assert_eq!(objects[1]["stream"], "bad");
    assert_eq!(objects[1]["status"], "failed");
    assert_eq!(objects[1]["exitCode"], 1);
    assert!(
        objects[1]["error"].as_str().unwrap().contains("1.json"),
        "{}",
        objects[1]
    );
}

#[test]
fn run_check_and_list_validate_without_running() {
    let s = Scratch::new();
    let config = two_stream_config(&s);
    let out = autoloader(&["run", path(&config), "--check"]);
    let stdout = ok(&out);
    assert!(stdout.contains("valid, 2 streams: good, bad"), "{stdout}");

    let stdout = ok(&autoloader(&["run", path(&config), "--list"]));
    let land = std::fs::canonicalize(s.dir.path().join("land/good")).unwrap();
    assert!(stdout.contains("good\n  source:     "), "{stdout}");
    assert!(stdout.contains(path(&land)), "{stdout}");
    assert!(stdout.contains("bronze/bad/_autoloader/bad"), "{stdout}");
    let listed: Vec<serde_json::Value> =
        ok(&autoloader(&["run", path(&config), "--list", "--json"]))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[1]["name"], "bad");
    assert!(listed[1]["table"].as_str().unwrap().ends_with("bronze/bad"));
    assert!(
        !s.dir.path().join("bronze").exists(),
        "nothing ran, nothing was created"
    );

    // An invalid option is found by --check: exit 2 naming the stream.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("mode = ", "mdoe = ")).unwrap();
    let out = autoloader(&["run", path(&config), "--check"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("stream \"bad\""), "{}", stderr(&out));
    assert!(!s.dir.path().join("bronze").exists());
}

#[test]
fn verbose_shows_autoloader_detail_not_the_libraries() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 1));
    let out = autoloader(&[
        "-v",
        "ingest",
        path(&s.landing()),
        path(&s.table()),
        "--once",
    ]);
    ok(&out);
    let err = stderr(&out);
    assert!(err.contains("DEBUG Planned batch."), "{err}");
    assert!(err.contains("DEBUG Listed the source."), "{err}");
    // delta-kernel's spans (snap.build{...}) are lines of kilobytes: none at -v.
    assert!(!err.contains("snap.build"), "{err}");
    assert!(err.lines().all(|l| l.len() < 400), "{err}");
    assert!(err.lines().count() < 20, "{err}");
}

#[test]
fn a_table_left_with_an_empty_log_is_no_error() {
    // What a process killed while creating the table leaves behind.
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 2));
    std::fs::create_dir_all(s.table().join("_delta_log")).unwrap();
    for verbosity in ["-q", "-v"] {
        let out = autoloader(&[
            verbosity,
            "ingest",
            path(&s.landing()),
            path(&s.table()),
            "--once",
        ]);
        ok(&out);
        let err = stderr(&out);
        assert!(!err.contains("ERROR"), "{verbosity}: {err}");
        assert!(
            !err.contains("No files in log segment"),
            "{verbosity}: {err}"
        );
    }
    s.assert_ids_once(0..2, "after an empty log");
}

#[test]
fn a_first_listing_with_no_files_warns_naming_the_source() {
    let s = Scratch::new();
    let landing = s.landing();
    let table = s.table();
    let args = ["ingest", path(&landing), path(&table), "--once"];
    let out = autoloader(&args);
    ok(&out);
    let err = stderr(&out);
    let shown = std::fs::canonicalize(&landing).unwrap();
    assert!(
        err.contains(&format!("No files under {} yet", shown.display())),
        "{err}"
    );
    // A glob that matches nothing says so too.
    s.land("a.csv", "order_id\n1\n");
    let out = autoloader(&[&args[..], &["-o", "pathGlobFilter=*.json"]].concat());
    assert!(
        stderr(&out).contains("No files that pass pathGlobFilter"),
        "{}",
        stderr(&out)
    );
    // Once a stream has ingested, an emptied landing folder is no news.
    std::fs::remove_file(landing.join("a.csv")).unwrap();
    s.land("b.json", common::orders_jsonl(0, 1));
    ok(&autoloader(&args));
    std::fs::remove_file(landing.join("b.json")).unwrap();
    let out = autoloader(&args);
    ok(&out);
    assert!(!stderr(&out).contains("No files"), "{}", stderr(&out));
}

#[test]
fn completions_and_man_pages_come_from_the_clap_definitions() {
    let bash = text(&autoloader(&["completions", "bash"]));
    assert!(bash.contains("_autoloader()"), "{bash}");
    assert!(
        bash.contains("--alert-rescued-share"),
        "every flag is completed"
    );
    let zsh = text(&autoloader(&["completions", "zsh"]));
    assert!(zsh.starts_with("#compdef autoloader"), "{zsh}");
    let fish = text(&autoloader(&["completions", "fish"]));
    assert!(fish.contains("complete -c autoloader"), "{fish}");
    let out = autoloader(&["completions", "tcsh"]);
    assert_eq!(code(&out), 2, "an unknown shell is a usage error");

    let man = text(&autoloader(&["man"]));
    assert!(man.contains(".TH autoloader 1"), "{man}");
    assert!(man.contains("ingest"), "{man}");
    let s = Scratch::new();
    let dir = s.dir.path().join("man1");
    ok(&autoloader(&["man", "--out-dir", path(&dir)]));
    let page = std::fs::read_to_string(dir.join("autoloader-ingest.1")).unwrap();
    assert!(page.contains("\\-\\-checkpoint"), "{page}");
    assert!(dir.join("autoloader-run.1").exists());
}
