//! `optimize` and `vacuum`: small files compacted in one dataChange=false OPTIMIZE commit
//! (rows, their order and statistics kept; a Delta source passes over it), per partition,
//! limited by `--where` and `--min-files`; SIGKILLs at any moment; beside an appending
//! stream; a concurrent remove makes it give up; vacuum freeing the replaced files and
//! nothing under `_autoloader`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use arrow_array::cast::AsArray;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::common::held::Held;
use crate::common::{self, Scratch, ok, run, stderr, summary_figure};

/// A table of `n` files, one order each, from `n` one-file batches.
fn one_file_batches(s: &Scratch, n: u64) {
    for i in 0..n {
        s.land(&format!("o{i:04}.json"), common::orders_jsonl(i, i + 1));
    }
    ok(&s.ingest(&[
        "cloudFiles.maxFilesPerTrigger=1",
        "cloudFiles.inferColumnTypes=true",
    ]));
}

fn args(cmd: &str, table: &Path, extra: &[&str]) -> Vec<String> {
    let mut out = vec![cmd.to_string(), table.display().to_string()];
    out.extend(extra.iter().map(|e| e.to_string()));
    out
}

fn optimize_json(table: &Path, extra: &[&str]) -> serde_json::Value {
    let mut a = extra.to_vec();
    a.push("--json");
    serde_json::from_str(&ok(&run(&args("optimize", table, &a), &[]))).unwrap()
}

/// The actions of commit `v`.
fn commit(table: &Path, v: u64) -> Vec<serde_json::Value> {
    fs::read_to_string(table.join(format!("_delta_log/{v:020}.json")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The table's active files with their partition values, from delta-rs.
fn active_files(table: &Path) -> Vec<(String, BTreeMap<String, Option<String>>, i64)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let url = url::Url::from_directory_path(fs::canonicalize(table).unwrap()).unwrap();
        let t = deltalake::open_table(url).await.unwrap();
        let snapshot = t.snapshot().unwrap();
        snapshot
            .log_data()
            .into_iter()
            .map(|f| {
                (
                    f.path().into_owned(),
                    f.partition_values_map().into_iter().collect(),
                    f.modification_time(),
                )
            })
            .collect()
    })
}

/// The `order_id`s of one data file, in file order.
fn file_ids(table: &Path, rel: &str) -> Vec<i64> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(fs::File::open(table.join(rel)).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let mut out = Vec::new();
    for b in reader {
        let b = b.unwrap();
        let col = b.column_by_name("order_id").unwrap();
        out.extend(
            col.as_primitive::<arrow_array::types::Int64Type>()
                .values()
                .iter(),
        );
    }
    out
}

/// `order_id`s read by Python deltalake, sorted.
fn python_ids(table: &Path) -> Vec<i64> {
    let read = common::read_with_python(table, "order_id");
    let mut ids: Vec<i64> = read["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["order_id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

#[test]
fn two_hundred_small_files_become_one_with_the_same_rows_in_order_and_a_delta_source_sees_nothing_new()
 {
    let s = Scratch::new();
    let table = s.table();
    one_file_batches(&s, 200);
    let silver = s.dir.path().join("silver");
    let silver_args = vec![
        "ingest".to_string(),
        table.display().to_string(),
        silver.display().to_string(),
        "--once".to_string(),
    ];
    let first = ok(&run(&silver_args, &[]));
    assert_eq!(summary_figure(&first, "rows"), 200);

    // The rows in the order optimize must concatenate them: by modification time, then path.
    let mut before = active_files(&table);
    assert_eq!(before.len(), 200);
    before.sort_by(|a, b| (a.2, &a.0).cmp(&(b.2, &b.0)));
    let expected_order: Vec<i64> = before
        .iter()
        .flat_map(|(p, _, _)| file_ids(&table, p))
        .collect();

    let report = optimize_json(&table, &[]);
    assert_eq!(report["filesBefore"], 200);
    assert_eq!(report["filesRemoved"], 200);
    assert_eq!(report["filesAfter"], 1);
    assert_eq!(report["rows"], 200);
    let version = report["version"].as_u64().unwrap();

    let actions = commit(&table, version);
    let info = actions.iter().find_map(|a| a.get("commitInfo")).unwrap();
    assert_eq!(info["operation"], "OPTIMIZE");
    assert_eq!(info["operationMetrics"]["numFilesRemoved"], 200);
    assert_eq!(info["operationMetrics"]["numFilesAdded"], 1);
    let removes: Vec<_> = actions.iter().filter_map(|a| a.get("remove")).collect();
    let adds: Vec<_> = actions.iter().filter_map(|a| a.get("add")).collect();
    assert_eq!((removes.len(), adds.len()), (200, 1));
    assert!(
        removes
            .iter()
            .chain(&adds)
            .all(|a| a["dataChange"] == false),
        "every action of an OPTIMIZE commit is dataChange=false"
    );
    // Statistics written for the new file: the row count and the ids' range.
    let stats: serde_json::Value =
        serde_json::from_str(adds[0]["stats"].as_str().unwrap()).unwrap();
    assert_eq!(stats["numRecords"], 200);
    assert_eq!(stats["minValues"]["order_id"], 0);
    assert_eq!(stats["maxValues"]["order_id"], 199);

    let after = active_files(&table);
    assert_eq!(
        file_ids(&table, &after[0].0),
        expected_order,
        "rows kept in file order"
    );
    assert_eq!(python_ids(&table), (0..200).collect::<Vec<_>>());

    // A Delta source reading the table passes over the compaction.
    let again = ok(&run(&silver_args, &[]));
    assert_eq!(summary_figure(&again, "rows"), 0, "{again}");
    assert_eq!(python_ids(&silver), (0..200).collect::<Vec<_>>());

    // Nothing left to compact: no commit.
    let report = optimize_json(&table, &[]);
    assert!(report["version"].is_null(), "{report}");
}

/// A table partitioned by `region` written by Python deltalake: `appends` commits, each
/// one file per region.
fn partitioned(table: &Path, appends: u64) {
    let code = format!(
        "import os, sys\nimport pyarrow as pa\nfrom deltalake import write_deltalake\n\
         for i in range({appends}):\n    \
         write_deltalake(sys.argv[1], pa.table({{'order_id': pa.array([3*i, 3*i+1, 3*i+2], pa.int64()), \
         'region': ['kr', 'us', 'jp']}}), partition_by=['region'], mode='append')\n\
         sys.stdout.flush()\nos._exit(0)\n"
    );
    let out = Command::new("python3")
        .args(["-c", &code, table.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

fn files_per_region(table: &Path) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (_, values, _) in active_files(table) {
        *out.entry(values["region"].clone().unwrap()).or_default() += 1;
    }
    out
}

#[test]
fn a_partitioned_table_compacts_per_partition_where_and_min_files_limit_it() {
    let s = Scratch::new();
    let table = s.table();
    partitioned(&table, 6);
    let six = BTreeMap::from([("jp".into(), 6), ("kr".into(), 6), ("us".into(), 6)]);
    assert_eq!(files_per_region(&table), six);

    // A predicate naming a data column is refused: exit 2, nothing committed.
    let out = run(&args("optimize", &table, &["--where", "order_id > 3"]), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a partition column"),
        "{}",
        stderr(&out)
    );
    // Fewer small files than --min-files: left alone.
    let report = optimize_json(&table, &["--min-files", "7"]);
    assert!(report["version"].is_null());
    assert_eq!(report["partitionsSkipped"], 3);
    assert_eq!(files_per_region(&table), six);

    let report = optimize_json(&table, &["--where", "region = 'kr'"]);
    assert_eq!(report["partitionsOptimized"], 1);
    assert_eq!(
        files_per_region(&table),
        BTreeMap::from([("jp".into(), 6), ("kr".into(), 1), ("us".into(), 6)])
    );
    let report = optimize_json(&table, &["--where", "region IN ('us', 'jp')"]);
    assert_eq!(report["partitionsOptimized"], 2);
    assert_eq!(
        files_per_region(&table),
        BTreeMap::from([("jp".into(), 1), ("kr".into(), 1), ("us".into(), 1)])
    );
    // Each new file holds its partition's rows only, in its path.
    for (path, values, _) in active_files(&table) {
        let region = values["region"].clone().unwrap();
        assert!(path.starts_with(&format!("region={region}/")), "{path}");
        let offset = match region.as_str() {
            "kr" => 0,
            "us" => 1,
            _ => 2,
        };
        assert_eq!(
            file_ids(&table, &path),
            (0..6).map(|i| 3 * i + offset).collect::<Vec<_>>()
        );
    }
    let read = common::read_with_python(&table, "order_id");
    assert_eq!(read["num_rows"], 18);
    let regions: BTreeSet<String> = read["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["region"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(regions.len(), 3);
}

#[test]
fn killed_at_any_moment_optimize_leaves_the_rows_once_and_a_rerun_compacts() {
    let s = Scratch::new();
    let table = s.table();
    one_file_batches(&s, 60);
    let all: Vec<i64> = (0..60).collect();
    // At each step it has.
    for point in autoloader::testing::failpoint::OPTIMIZE_NAMES {
        let out = run(
            &args("optimize", &table, &["--target-size", "4k"]),
            &[("AUTOLOADER_FAILPOINT", point)],
        );
        assert_eq!(out.status.signal(), Some(9), "{point}: {}", stderr(&out));
        assert_eq!(python_ids(&table), all, "after a kill at {point}");
    }
    // At random moments, until a run completes: on a table not compacted yet (a kill
    // after the commit above left this one compacted, with nothing left to kill).
    let s = Scratch::new();
    let table = s.table();
    one_file_batches(&s, 60);
    let kills = common::sigkill_until_done(&args("optimize", &table, &[]), |_| {
        common::assert_table_ids_once(&table, 0..60, "after a random kill");
    });
    assert!(kills > 0, "no run was killed");
    let report = optimize_json(&table, &[]);
    assert!(report["version"].is_null(), "compacted already: {report}");
    assert!(active_files(&table).len() <= 2);
    assert_eq!(python_ids(&table), all);
}

#[test]
fn optimize_beside_an_appending_stream_loses_and_doubles_nothing() {
    let s = Scratch::new();
    let table = s.table();
    one_file_batches(&s, 20);
    let mut watcher = Command::new(env!("CARGO_BIN_EXE_autoloader"))
        .args([
            "ingest",
            s.landing().to_str().unwrap(),
            table.to_str().unwrap(),
            "--poll-interval",
            "0.1",
            "-q",
            "-o",
            "cloudFiles.maxFilesPerTrigger=1",
            "-o",
            "cloudFiles.inferColumnTypes=true",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut committed = 0;
    for round in 0..8u64 {
        let before = common::row_count(&common::read_table(&table));
        for i in 0..10 {
            let id = 20 + round * 10 + i;
            s.land(&format!("o{id:04}.json"), common::orders_jsonl(id, id + 1));
        }
        // The watcher has appended new small files (and is still appending) when
        // optimize runs.
        common::wait_until(
            "the watcher to append two of the new files",
            Duration::from_secs(60),
            || common::row_count(&common::read_table(&table)) >= before + 2,
        );
        let report = optimize_json(&table, &[]);
        if report["version"].is_u64() {
            committed += 1;
        }
    }
    // Let the watcher take every file, then stop it.
    common::wait_until(
        "the watcher to take every file",
        Duration::from_secs(60),
        || common::row_count(&common::read_table(&table)) >= 100,
    );
    watcher.kill().unwrap();
    watcher.wait().unwrap();
    assert!(committed >= 4, "optimize committed only {committed} times");
    ok(&s.ingest(&["cloudFiles.inferColumnTypes=true"]));
    s.assert_ids_once(0..100, "appends and compactions interleaved");
    assert_eq!(python_ids(&table), (0..100).collect::<Vec<_>>());
}

#[test]
fn files_removed_while_it_compacts_make_it_give_up_with_nothing_committed() {
    let s = Scratch::new();
    let table = s.table();
    one_file_batches(&s, 10);
    let mut slow = Held::spawn(
        Command::new(env!("CARGO_BIN_EXE_autoloader"))
            .args(args("optimize", &table, &[]))
            .env("AUTOLOADER_FAILPOINT", "before-optimize-commit=sleep(3000)")
            .env("RUST_LOG", "warn"),
    );
    slow.wait_for_failpoint("before-optimize-commit");
    // A full refresh removes every file meanwhile.
    ok(&run(&args("reset", &table, &["--yes"]), &[]));
    slow.assert_still_held("the reset");
    let version_after_reset = active_files(&table).len();
    assert_eq!(version_after_reset, 0);
    let out = slow.wait_with_output();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("removed by another writer")
            && stderr(&out).contains("nothing was committed"),
        "{}",
        stderr(&out)
    );
    let last = fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json")
        })
        .count() as u64
        - 1;
    let ops: Vec<String> = commit(&table, last)
        .iter()
        .filter_map(|a| a.get("commitInfo"))
        .map(|c| c["operation"].as_str().unwrap().to_string())
        .collect();
    assert_ne!(ops, ["OPTIMIZE"], "the last commit is the reset's");
    assert!(active_files(&table).is_empty(), "no rows came back");
}

fn listing(dir: &Path) -> BTreeSet<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap().path().strip_prefix(dir).unwrap().to_path_buf())
        .collect()
}

fn data_files(table: &Path) -> BTreeSet<String> {
    fs::read_dir(table)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".parquet"))
        .collect()
}

#[test]
fn vacuum_frees_the_replaced_files_and_never_touches_autoloader_or_a_fresh_file() {
    let s = Scratch::new();
    let table = s.table();
    one_file_batches(&s, 30);
    let old = data_files(&table);
    optimize_json(&table, &[]);
    let kept: BTreeSet<String> = active_files(&table).into_iter().map(|f| f.0).collect();
    // A file a running stream is writing: no commit references it yet.
    fs::write(
        table.join("part-00000-in-flight.parquet"),
        b"not yet committed",
    )
    .unwrap();
    let autoloader_before = listing(&table.join("_autoloader"));

    // Shorter than delta.deletedFileRetentionDuration (7 days): refused.
    let out = run(&args("vacuum", &table, &["--retain", "0h"]), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    // The default retention keeps everything so recent.
    let report: serde_json::Value =
        serde_json::from_str(&ok(&run(&args("vacuum", &table, &["--json"]), &[]))).unwrap();
    assert_eq!(report["files"].as_array().unwrap().len(), 0);

    let dry: serde_json::Value = serde_json::from_str(&ok(&run(
        &args(
            "vacuum",
            &table,
            &["--retain", "0h", "--force", "--dry-run", "--json"],
        ),
        &[],
    )))
    .unwrap();
    let listed: BTreeSet<String> = dry["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, old, "the dry run lists exactly the replaced files");
    assert!(
        old.iter().all(|f| table.join(f).exists()),
        "a dry run deletes nothing"
    );

    ok(&run(
        &args("vacuum", &table, &["--retain", "0h", "--force"]),
        &[],
    ));
    let left = data_files(&table);
    assert!(
        old.iter().all(|f| !left.contains(f)),
        "the replaced files are gone"
    );
    assert!(kept.iter().all(|f| left.contains(f)), "the live file stays");
    assert!(
        left.contains("part-00000-in-flight.parquet"),
        "a fresh untracked file stays"
    );
    assert_eq!(listing(&table.join("_autoloader")), autoloader_before);
    assert_eq!(python_ids(&table), (0..30).collect::<Vec<_>>());
    // The stream carries on after the vacuum.
    s.land("late.json", common::orders_jsonl(30, 31));
    ok(&s.ingest(&["cloudFiles.inferColumnTypes=true"]));
    s.assert_ids_once(0..31, "after vacuum");
}

/// 12 one-file landed files and a config streaming them, one a batch, into `bronze/orders`,
/// with `table_section` declaring the table.
fn auto_compact_config(s: &Scratch, table_section: &str) -> PathBuf {
    for i in 0..12u64 {
        s.land(&format!("o{i:04}.json"), common::orders_jsonl(i, i + 1));
    }
    let config = s.dir.path().join("streams.toml");
    fs::write(
        &config,
        format!(
            r#"
{table_section}

[[stream]]
name = "orders"
source = "landing"
table = "bronze/orders"
[stream.options]
"cloudFiles.maxFilesPerTrigger" = 1
"cloudFiles.inferColumnTypes" = true
"#
        ),
    )
    .unwrap();
    config
}

/// A config's streams into a table with `optimize.autoCompact` (or the table property),
/// 12 one-file batches: compacted in the background after every 5 commits.
fn auto_compact_run(table_section: &str) -> (Scratch, PathBuf, Vec<Vec<serde_json::Value>>) {
    let s = Scratch::new();
    let dir = s.dir.path();
    let config = auto_compact_config(&s, table_section);
    ok(&run(
        &["run".into(), config.display().to_string(), "--once".into()],
        &[],
    ));
    let table = dir.join("bronze/orders");
    let last = fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json")
        })
        .count() as u64;
    let commits = (0..last).map(|v| commit(&table, v)).collect();
    (s, table, commits)
}

#[test]
fn a_compaction_that_loses_the_race_to_the_stream_retries_quietly() {
    // The background compaction pauses after checking its snapshot, the stream commits
    // meanwhile, and the compaction's commit, refused, is retried on a fresh snapshot: a
    // routine race, so `-q` prints nothing. (delta-rs also logs an ERROR when it loses
    // the race at the write itself, a narrower window seen in `bench/many_batches.py`'s
    // runs, which `-q` now leaves out too.)
    let s = Scratch::new();
    let dir = s.dir.path();
    let config = auto_compact_config(
        &s,
        "[[table]]\npath = \"bronze/orders\"\noptimize.autoCompact = true\noptimize.everyCommits = 3",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_autoloader"))
        .args(["-q", "run", config.to_str().unwrap(), "--once"])
        .env_remove("RUST_LOG")
        .env(
            "AUTOLOADER_FAILPOINT",
            format!(
                "{}=sleep(1500)",
                autoloader::table::optimize::OPTIMIZE_ATTEMPT
            ),
        )
        .output()
        .unwrap();
    ok(&out);
    let err = stderr(&out);
    assert!(err.contains("failpoint optimize-attempt reached"), "{err}");
    let table = dir.join("bronze/orders");
    let commits: Vec<_> = (0..)
        .take_while(|v| table.join(format!("_delta_log/{v:020}.json")).exists())
        .map(|v| commit(&table, v))
        .collect();
    let ops = operations(&commits);
    let optimize = ops
        .iter()
        .position(|o| o == "OPTIMIZE")
        .unwrap_or_else(|| panic!("no OPTIMIZE commit: {ops:?}"));
    let read_version = commits[optimize]
        .iter()
        .find_map(|a| a["commitInfo"]["operationMetrics"]["readVersion"].as_u64())
        .expect("the compaction's read version");
    // The stream committed after the compaction read the table: its first attempt lost.
    assert!(
        optimize as u64 > read_version + 1,
        "compacted version {read_version} at {optimize}: no race ({ops:?})"
    );
    assert!(
        err.lines().all(|l| l.starts_with("failpoint ")),
        "-q printed more than the failpoint: {err}"
    );
    assert_eq!(python_ids(&table), (0..12).collect::<Vec<_>>());
}

fn operations(commits: &[Vec<serde_json::Value>]) -> Vec<String> {
    commits
        .iter()
        .filter_map(|c| c.iter().find_map(|a| a.get("commitInfo")))
        .map(|ci| ci["operation"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn auto_compaction_declared_in_the_config_compacts_in_the_background_of_the_stream() {
    let (_s, table, commits) = auto_compact_run(
        "[[table]]\npath = \"bronze/orders\"\noptimize.autoCompact = true\noptimize.everyCommits = 5",
    );
    let ops = operations(&commits);
    let optimizes = ops.iter().filter(|o| *o == "OPTIMIZE").count();
    assert!(optimizes >= 1, "no OPTIMIZE commit: {ops:?}");
    assert!(active_files(&table).len() < 12, "compacted");
    assert_eq!(python_ids(&table), (0..12).collect::<Vec<_>>());
}

#[test]
fn the_auto_compact_table_property_turns_it_on_and_without_either_nothing_compacts() {
    // The property alone, applied by the run's declared properties: every 50 commits, so
    // 12 commits do not compact...
    let (_s, table, commits) = auto_compact_run(
        "[[table]]\npath = \"bronze/orders\"\n[table.properties]\n\"delta.autoOptimize.autoCompact\" = \"true\"",
    );
    assert!(!operations(&commits).contains(&"OPTIMIZE".to_string()));
    let read = common::read_with_python(&table, "order_id");
    assert_eq!(
        read["configuration"]["delta.autoOptimize.autoCompact"],
        "true"
    );
    // ...with everyCommits = 5 and no autoCompact in the config, the property decides
    // (from the run after the one that created the table and then applied it).
    let (s, table, commits) = auto_compact_run(
        "[[table]]\npath = \"bronze/orders\"\noptimize.everyCommits = 5\n[table.properties]\n\"delta.autoOptimize.autoCompact\" = \"true\"",
    );
    assert!(!operations(&commits).contains(&"OPTIMIZE".to_string()));
    for i in 12..18u64 {
        s.land(&format!("o{i:04}.json"), common::orders_jsonl(i, i + 1));
    }
    let config = s.dir.path().join("streams.toml");
    ok(&run(
        &["run".into(), config.display().to_string(), "--once".into()],
        &[],
    ));
    let versions = fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json")
        })
        .count() as u64;
    let commits: Vec<_> = (0..versions).map(|v| commit(&table, v)).collect();
    assert!(operations(&commits).contains(&"OPTIMIZE".to_string()));
    assert_eq!(python_ids(&table), (0..18).collect::<Vec<_>>());
    // Neither: no compaction.
    let (_s, _table, commits) =
        auto_compact_run("[[table]]\npath = \"bronze/orders\"\noptimize.everyCommits = 5");
    assert!(!operations(&commits).contains(&"OPTIMIZE".to_string()));
}
