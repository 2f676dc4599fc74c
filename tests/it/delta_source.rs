//! A Delta table as a source (bronze to silver): its rows as of the first start, then each
//! later commit's appended files in order, each once; compaction passed over, a commit that
//! removes rows stopping the flow unless told otherwise; exactly once across SIGKILLs.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::{self, Scratch, assert_table_ids_once, ok, run, stderr, summary_figure};

/// A bronze table fed by the scratch landing folder, and a silver table reading it.
struct Layers {
    s: Scratch,
    silver: PathBuf,
}

impl Layers {
    fn new() -> Layers {
        let s = Scratch::new();
        let silver = s.table().parent().unwrap().join("silver");
        Layers { s, silver }
    }

    fn bronze(&self) -> PathBuf {
        self.s.table()
    }

    /// Lands ids `from..to` as one file and appends them to bronze (one commit).
    fn append_bronze(&self, from: u64, to: u64) {
        self.s
            .land(&format!("o{from}.json"), common::orders_jsonl(from, to));
        ok(&self.s.ingest(&["cloudFiles.inferColumnTypes=true"]));
    }

    fn silver_args(&self, options: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "ingest".into(),
            self.bronze().display().to_string(),
            self.silver.display().to_string(),
            "--once".into(),
        ];
        for o in options {
            args.push("-o".into());
            args.push((*o).to_string());
        }
        args
    }

    fn run_silver(&self, options: &[&str]) -> Output {
        run(&self.silver_args(options), &[])
    }

    fn run_silver_with_env(&self, options: &[&str], env: &[(&str, &str)]) -> Output {
        run(&self.silver_args(options), env)
    }
}

/// Runs a Python deltalake snippet on `table` (`dt` is the table), leaving with os._exit.
fn python_on(table: &Path, code: &str) {
    let script = format!(
        "import os, sys\nfrom deltalake import DeltaTable\ndt = DeltaTable(sys.argv[1])\n{code}\nsys.stdout.flush()\nos._exit(0)\n"
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &script, table.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "python: {}", stderr(&out));
}

#[test]
fn a_silver_flow_reads_each_new_bronze_commit_once() {
    let l = Layers::new();
    l.append_bronze(0, 10);
    l.append_bronze(10, 20);
    // No source_format given: the _delta_log/ says it is a table (never loose Parquet).
    let out = run(
        &[
            "ingest".into(),
            l.bronze().display().to_string(),
            l.silver.display().to_string(),
            "--once".into(),
        ],
        &[("RUST_LOG", "info")],
    );
    let stdout = ok(&out);
    assert!(
        stderr(&out).contains("reading it as a Delta table"),
        "{}",
        stderr(&out)
    );
    assert_eq!(summary_figure(&stdout, "rows"), 20, "{stdout}");
    assert_table_ids_once(&l.silver, 0..20, "the snapshot at the first start");
    // New bronze commits appear in silver; nothing twice.
    l.append_bronze(20, 25);
    l.append_bronze(25, 30);
    let stdout = ok(&l.run_silver(&[]));
    assert_eq!(summary_figure(&stdout, "rows"), 10, "{stdout}");
    assert_table_ids_once(&l.silver, 0..30, "after two more commits");
    let stdout = ok(&l.run_silver(&[]));
    assert_eq!(summary_figure(&stdout, "files"), 0, "nothing new: {stdout}");
    // The source's types carry over, and an outside reader sees the rows.
    let py = common::read_with_python(&l.silver, "order_id");
    assert_eq!(py["num_rows"], 30, "{py}");
    assert_eq!(py["types"]["order_id"], "int64", "{py}");
}

#[test]
fn compaction_is_passed_over_and_a_delete_stops_the_flow_naming_the_version() {
    let l = Layers::new();
    for i in 0..3 {
        l.append_bronze(i * 10, i * 10 + 10);
    }
    ok(&l.run_silver(&[]));
    assert_table_ids_once(&l.silver, 0..30, "first run");
    // Compaction rewrites the rows with dataChange=false: nothing new to read.
    python_on(&l.bronze(), "dt.optimize.compact()");
    l.append_bronze(30, 35);
    let stdout = ok(&l.run_silver(&[]));
    assert_eq!(summary_figure(&stdout, "rows"), 5, "{stdout}");
    assert_table_ids_once(&l.silver, 0..35, "compaction is not re-read");
    // A delete removes rows: the flow stops, naming the version, with nothing written.
    python_on(&l.bronze(), "dt.delete('order_id = 3')");
    let (deleted_at, _) = common::table_version_and_txns(&l.bronze());
    l.append_bronze(35, 40);
    let before = common::table_version_and_txns(&l.silver).0;
    let out = l.run_silver(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("version {deleted_at}")) && err.contains("skipChangeCommits"),
        "{err}"
    );
    assert_eq!(common::table_version_and_txns(&l.silver).0, before);
    // skipChangeCommits passes over it; the append after it is read.
    ok(&l.run_silver(&["skipChangeCommits=true"]));
    assert_table_ids_once(&l.silver, 0..40, "the delete skipped, later rows read");
}

#[test]
fn ignore_deletes_passes_over_a_commit_that_only_deletes() {
    let l = Layers::new();
    l.append_bronze(0, 10);
    ok(&l.run_silver(&[]));
    python_on(&l.bronze(), "dt.delete()");
    l.append_bronze(10, 15);
    let out = l.run_silver(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("ignoreDeletes"), "{}", stderr(&out));
    ok(&l.run_silver(&["ignoreDeletes=true"]));
    assert_table_ids_once(&l.silver, 0..15, "the delete passed over");
}

#[test]
fn starting_version_and_latest_read_only_later_commits() {
    let l = Layers::new();
    l.append_bronze(0, 10); // version 1 (0 creates the table)
    l.append_bronze(10, 20); // version 2
    let out = ok(&l.run_silver(&["startingVersion=2"]));
    assert_eq!(summary_figure(&out, "rows"), 10, "{out}");
    assert_table_ids_once(&l.silver, 10..20, "commits from version 2 on");

    let latest = Layers::new();
    latest.append_bronze(0, 10);
    let out = ok(&latest.run_silver(&["startingVersion=latest"]));
    assert_eq!(summary_figure(&out, "rows"), 0, "{out}");
    latest.append_bronze(10, 13);
    ok(&latest.run_silver(&["startingVersion=latest"]));
    assert_table_ids_once(&latest.silver, 10..13, "only commits after the first start");

    // Both starting options at once: refused before anything runs.
    let out = l.run_silver(&["startingVersion=1", "startingTimestamp=2020-01-01"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_delta_table_is_never_read_as_loose_files() {
    let l = Layers::new();
    l.append_bronze(0, 5);
    let mut args = l.silver_args(&[]);
    args.extend(["--source-format".into(), "files".into()]);
    let out = run(&args, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("_delta_log"), "{}", stderr(&out));
    assert!(!l.silver.join("_delta_log").exists());
    // Nor a Delta table read as CSV.
    let out = l.run_silver(&["cloudFiles.format=csv"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_version_gone_from_the_log_stops_the_flow_naming_it() {
    let l = Layers::new();
    l.append_bronze(0, 5);
    ok(&l.run_silver(&[]));
    l.append_bronze(5, 10);
    l.append_bronze(10, 15);
    // As log cleanup would leave it: the next version's commit file is gone.
    let (latest, _) = common::table_version_and_txns(&l.bronze());
    let gone = l
        .bronze()
        .join(format!("_delta_log/{:020}.json", latest - 1));
    std::fs::remove_file(&gone).unwrap();
    let out = l.run_silver(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("version {}", latest - 1)),
        "{}",
        stderr(&out)
    );
    assert_table_ids_once(&l.silver, 0..5, "nothing half-applied");
}

#[test]
fn a_silver_flow_killed_at_every_step_lands_each_bronze_row_once() {
    for name in autoloader::testing::failpoint::NAMES
        .iter()
        .filter(|n| **n != "after-schema-evolve")
    {
        let l = Layers::new();
        for i in 0..4 {
            l.append_bronze(i * 10, i * 10 + 10);
        }
        let opts = ["maxFilesPerTrigger=1"];
        let crashed = l.run_silver_with_env(&opts, &[("AUTOLOADER_FAILPOINT", name)]);
        assert_eq!(
            crashed.status.signal(),
            Some(9),
            "failpoint {name} must kill: {}",
            stderr(&crashed)
        );
        // Bronze goes on while silver is down.
        l.append_bronze(40, 45);
        ok(&l.run_silver(&opts));
        assert_table_ids_once(&l.silver, 0..45, name);
        let again = ok(&l.run_silver(&opts));
        assert_eq!(summary_figure(&again, "files"), 0, "{name}: {again}");
    }
}

#[test]
fn random_sigkills_of_a_silver_flow_lose_and_duplicate_nothing() {
    let l = Layers::new();
    // Enough bronze versions (one batch each) that a run outlasts the first kill's delay
    // (52 ms): with 6, a fast run once finished before it, and the test proved nothing.
    for i in 0..20 {
        l.append_bronze(i * 50, i * 50 + 50);
    }
    let args = l.silver_args(&["maxFilesPerTrigger=1"]);
    // Bronze goes on while silver is down: a commit after every other kill.
    let mut expected: Vec<u64> = (0..1000).collect();
    let kills = common::sigkill_until_done(&args, |n| {
        if n % 2 == 1 && n < 12 {
            l.append_bronze(1000 + n * 10, 1010 + n * 10);
            expected.extend(1000 + n * 10..1010 + n * 10);
        }
    });
    assert!(kills > 0, "no run was ever killed: the test proved nothing");
    ok(&run(&args, &[]));
    assert_table_ids_once(&l.silver, expected, "after random kills");
}

/// The docs' bronze-to-silver `streams.toml`, as printed there: each `run --once` carries
/// new landing files into bronze and on into silver.
#[test]
fn the_docs_bronze_to_silver_config_runs() {
    let toml = common::doc_block(
        "docs/guide/delta-source.md",
        "# A Delta table as a source",
        "toml",
    );
    let s = Scratch::new();
    let config = s.dir.path().join("streams.toml");
    std::fs::write(&config, toml).unwrap();
    let landing = s.dir.path().join("landing/orders");
    std::fs::create_dir_all(&landing).unwrap();
    std::fs::write(landing.join("a.json"), common::orders_jsonl(0, 20)).unwrap();
    let config = config.display().to_string();
    let run_once = || ok(&run(&["run".into(), config.clone(), "--once".into()], &[]));
    run_once();
    // One run carries the rows through: silver starts once bronze has finished.
    assert_table_ids_once(&s.dir.path().join("silver/orders"), 0..20, "after one run");
    std::fs::write(landing.join("b.json"), common::orders_jsonl(20, 30)).unwrap();
    run_once();
    run_once();
    assert_table_ids_once(&s.dir.path().join("bronze/orders"), 0..30, "bronze");
    assert_table_ids_once(&s.dir.path().join("silver/orders"), 0..30, "silver");
}

#[test]
fn starting_timestamp_reads_from_the_first_commit_at_or_after_it() {
    let l = Layers::new();
    l.append_bronze(0, 10);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    l.append_bronze(10, 15);
    let out = ok(&l.run_silver(&[&format!("startingTimestamp={at}")]));
    assert_eq!(summary_figure(&out, "rows"), 5, "{out}");
    assert_table_ids_once(&l.silver, 10..15, "commits at or after the timestamp");
}

#[test]
fn a_column_the_bronze_table_gains_reaches_silver() {
    let l = Layers::new();
    l.append_bronze(0, 5);
    ok(&l.run_silver(&[]));
    l.s.land(
        "coupon.json",
        "{\"order_id\": 5, \"amount\": 1, \"user_id\": \"u5\", \"coupon\": \"SAVE10\"}\n",
    );
    ok(&l.s.ingest(&["cloudFiles.inferColumnTypes=true"]));
    ok(&l.run_silver(&[]));
    assert_table_ids_once(&l.silver, 0..6, "every row once");
    let coupons = common::column_strings(&common::read_table(&l.silver), "coupon");
    assert_eq!(
        coupons.iter().filter(|c| *c == "SAVE10").count(),
        1,
        "{coupons:?}"
    );
}

#[test]
fn a_partitioned_table_written_by_another_tool_keeps_its_partition_values() {
    let s = Scratch::new();
    let bronze = s.dir.path().join("bronze");
    let silver = s.dir.path().join("silver");
    let write = |ids: &str, regions: &str| {
        let code = format!(
            "import pyarrow as pa\nfrom deltalake import write_deltalake\n\
             write_deltalake(sys.argv[1], pa.table({{'order_id': pa.array([{ids}], pa.int64()), 'region': [{regions}]}}), partition_by=['region'], mode='append')"
        );
        let script = format!("import os, sys\n{code}\nos._exit(0)\n");
        let out = std::process::Command::new("python3")
            .args(["-c", &script, bronze.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    };
    write("1, 2, 3", "'kr', 'us', 'kr'");
    let args = |_: ()| -> Vec<String> {
        vec![
            "ingest".into(),
            bronze.display().to_string(),
            silver.display().to_string(),
            "--once".into(),
            "--source-format".into(),
            "delta".into(),
        ]
    };
    ok(&run(&args(()), &[]));
    write("4", "'jp'");
    ok(&run(&args(()), &[]));
    let batches = common::read_table(&silver);
    let ids = common::column_strings(&batches, "order_id");
    let regions = common::column_strings(&batches, "region");
    let mut pairs: Vec<(String, String)> = ids.into_iter().zip(regions).collect();
    pairs.sort();
    assert_eq!(
        pairs,
        [("1", "kr"), ("2", "us"), ("3", "kr"), ("4", "jp")]
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .to_vec()
    );
}

#[test]
fn a_lost_silver_checkpoint_resumes_at_its_position_not_a_new_snapshot() {
    let l = Layers::new();
    for i in 0..3 {
        l.append_bronze(i * 10, i * 10 + 10);
    }
    ok(&l.run_silver(&[]));
    // Compaction re-adds bronze's rows in new files (dataChange=false): a fresh snapshot
    // would take them as new.
    python_on(&l.bronze(), "dt.optimize.compact()");
    l.append_bronze(30, 35);
    std::fs::remove_dir_all(l.silver.join("_autoloader")).unwrap();
    ok(&l.run_silver(&[]));
    assert_table_ids_once(&l.silver, 0..35, "rebuilt from silver's commits");
}

#[test]
fn a_table_with_column_mapping_stops_the_flow_naming_the_feature() {
    let s = Scratch::new();
    let bronze = s.dir.path().join("bronze");
    let script = "import os, sys\nimport pyarrow as pa\nfrom deltalake import write_deltalake\n\
        write_deltalake(sys.argv[1], pa.table({'order_id': pa.array([1, 2], pa.int64())}), \
        configuration={'delta.columnMapping.mode': 'name', 'delta.minReaderVersion': '2', \
        'delta.minWriterVersion': '5'})\nos._exit(0)\n";
    let out = std::process::Command::new("python3")
        .args(["-c", script, bronze.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let silver = s.dir.path().join("silver");
    let out = run(
        &[
            "ingest".into(),
            bronze.display().to_string(),
            silver.display().to_string(),
            "--once".into(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("delta.columnMapping.mode=name") && err.contains(bronze.to_str().unwrap()),
        "{err}"
    );
    assert!(!silver.join("_delta_log").exists(), "nothing written");
}

#[test]
fn a_full_refresh_of_the_source_says_to_reset_the_readers_too() {
    let l = Layers::new();
    l.append_bronze(0, 5);
    ok(&l.run_silver(&[]));
    ok(&run(
        &[
            "reset".into(),
            l.bronze().display().to_string(),
            "--yes".into(),
        ],
        &[],
    ));
    // The landing files land again in bronze (a new checkpoint).
    ok(&l.s.ingest(&["cloudFiles.inferColumnTypes=true"]));
    let out = l.run_silver(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("full refresh") && stderr(&out).contains("autoloader reset"),
        "{}",
        stderr(&out)
    );
    // Resetting silver reads bronze afresh: each row once.
    ok(&run(
        &[
            "reset".into(),
            l.silver.display().to_string(),
            "--yes".into(),
        ],
        &[],
    ));
    ok(&l.run_silver(&[]));
    assert_table_ids_once(&l.silver, 0..5, "silver read afresh");
}

#[test]
fn a_delta_source_that_does_not_exist_stops_naming_it() {
    let s = Scratch::new();
    let missing = s.dir.path().join("no-such-table");
    let silver = s.dir.path().join("silver");
    let args = |source: &Path| -> Vec<String> {
        vec![
            "ingest".into(),
            source.display().to_string(),
            silver.display().to_string(),
            "--once".into(),
            "--source-format".into(),
            "delta".into(),
        ]
    };
    let out = run(&args(&missing), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!missing.exists(), "nothing created at the mistyped path");
    // A folder that is not a table (yet): named, exit 1, nothing written.
    std::fs::create_dir_all(&missing).unwrap();
    let out = run(&args(&missing), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("does not exist") && stderr(&out).contains("no-such-table"),
        "{}",
        stderr(&out)
    );
    assert!(!silver.join("_delta_log").exists());
}

/// A stream whose source is another stream's table reads it as a Delta table without being
/// told, even before that table exists; streams feeding each other are refused.
#[test]
fn another_streams_table_is_a_delta_source_and_cycles_are_refused() {
    let s = Scratch::new();
    let dir = s.dir.path();
    std::fs::create_dir_all(dir.join("landing")).unwrap();
    std::fs::write(dir.join("landing/a.json"), common::orders_jsonl(0, 7)).unwrap();
    let config = dir.join("streams.toml");
    std::fs::write(
        &config,
        r#"
[[stream]]
name = "silver"
source = "bronze"
table = "silver"

[[stream]]
name = "bronze"
source = "landing"
table = "bronze"
"#,
    )
    .unwrap();
    ok(&run(
        &["run".into(), config.display().to_string(), "--once".into()],
        &[],
    ));
    assert_table_ids_once(
        &dir.join("silver"),
        0..7,
        "silver declared first, fed in one run",
    );
    std::fs::write(
        &config,
        r#"
[[stream]]
name = "a"
source = "tb"
table = "ta"

[[stream]]
name = "b"
source = "ta"
table = "tb"
"#,
    )
    .unwrap();
    let out = run(
        &["run".into(), config.display().to_string(), "--once".into()],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot feed itself"),
        "{}",
        stderr(&out)
    );
}
