//! `autoloader reset`: a full refresh (every row removed in one commit, every flow afresh)
//! or a checkpoints-only reset, guarded by `pipelines.reset.allowed`, crash-safe at each
//! step; the table read back with delta-rs and Python `deltalake`.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::rows::order_ids;
use crate::common::{self, Scratch, ok, run};

/// A config of two tables: `bronze/orders` (stream `a` from `land/a`, guarded when
/// `guarded`) and `bronze/other` (stream `b` from `land/b`), with two files each.
pub struct Pipeline {
    pub s: Scratch,
    pub config: PathBuf,
}

impl Pipeline {
    pub fn new(guarded: bool) -> Pipeline {
        Pipeline::with_extra(guarded, "")
    }

    /// With `extra` TOML appended to the config (another stream).
    pub fn with_extra(guarded: bool, extra: &str) -> Pipeline {
        let s = Scratch::new();
        let dir = s.dir.path();
        for (name, base) in [("a", 0u64), ("b", 1000)] {
            let folder = dir.join("land").join(name);
            std::fs::create_dir_all(&folder).unwrap();
            for f in 0..2u64 {
                std::fs::write(
                    folder.join(format!("f{f}.json")),
                    common::orders_jsonl(base + f * 10, base + f * 10 + 10),
                )
                .unwrap();
            }
        }
        let config = dir.join("streams.toml");
        std::fs::write(
            &config,
            format!(
                r#"
[[table]]
path = "bronze/orders"
[table.properties]
"pipelines.reset.allowed" = {}

[[stream]]
name = "a"
source = "land/a"
table = "bronze/orders"

[[stream]]
name = "b"
source = "land/b"
table = "bronze/other"
{extra}
"#,
                !guarded
            ),
        )
        .unwrap();
        Pipeline { s, config }
    }

    pub fn orders(&self) -> PathBuf {
        self.s.dir.path().join("bronze/orders")
    }

    pub fn other(&self) -> PathBuf {
        self.s.dir.path().join("bronze/other")
    }

    pub fn land(&self, stream: &str, file: &str, from: u64, to: u64) {
        std::fs::write(
            self.s.dir.path().join("land").join(stream).join(file),
            common::orders_jsonl(from, to),
        )
        .unwrap();
    }

    pub fn run_once(&self, extra: &[&str]) -> Output {
        self.run_with_env(extra, &[])
    }

    pub fn run_with_env(&self, extra: &[&str], env: &[(&str, &str)]) -> Output {
        let mut args = vec![
            "run".to_string(),
            self.config.display().to_string(),
            "--once".to_string(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_string()));
        run(&args, env)
    }

    /// `autoloader reset ARGS --config streams.toml`.
    pub fn reset(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut all: Vec<String> = vec!["reset".into()];
        all.extend(args.iter().map(|a| (*a).to_string()));
        all.push("--config".into());
        all.push(self.config.display().to_string());
        run(&all, env)
    }

    pub fn table_set(&self, table: &Path, property: &str) {
        ok(&run(
            &[
                "table".into(),
                "set".into(),
                table.display().to_string(),
                property.into(),
            ],
            &[],
        ));
    }
}

/// Every file under `dir` with its bytes: "byte-identical" means equal snapshots.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Asserts two snapshots are equal, naming the files that differ.
fn assert_same(a: &BTreeMap<String, Vec<u8>>, b: &BTreeMap<String, Vec<u8>>, context: &str) {
    let differ: Vec<&String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .collect();
    assert!(
        differ.is_empty(),
        "{context}: these files changed: {differ:?}"
    );
}

/// The reset commits in the table's log.
fn reset_commits(table: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(table.join("_delta_log")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read_to_string(&p).unwrap();
            n += text
                .lines()
                .filter(|l| l.contains("\"commitInfo\"") && l.contains("\"reset\""))
                .count();
        }
    }
    n
}

#[test]
fn a_guarded_table_is_refused_with_exit_4_and_nothing_changes() {
    let p = Pipeline::new(true);
    ok(&p.run_once(&[]));
    let before = snapshot(p.s.dir.path());
    for extra in [&["--yes"][..], &["--yes", "--checkpoints-only"]] {
        let mut args = vec![p.orders().display().to_string()];
        args.extend(extra.iter().map(|a| (*a).to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = p.reset(&args, &[]);
        let err = common::stderr(&out);
        assert_eq!(out.status.code(), Some(4), "{extra:?}: {err}");
        assert!(
            err.contains("bronze/orders")
                && err.contains("pipelines.reset.allowed=false")
                && err.contains("autoloader table set")
                && err.contains("pipelines.reset.allowed=true"),
            "{err}"
        );
        assert_same(
            &snapshot(p.s.dir.path()),
            &before,
            &format!("{extra:?}: nothing changed"),
        );
    }
    // Naming a guarded table with another one: refused before the other is touched.
    let out = p.reset(
        &[
            &p.other().display().to_string(),
            &p.orders().display().to_string(),
            "--yes",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(4), "{}", common::stderr(&out));
    assert_same(&snapshot(p.s.dir.path()), &before, "nothing changed");
    // A dry run shows the plan the guard refuses, marked, and exits 4 too (issue 36.8).
    let out = p.reset(&[&p.orders().display().to_string(), "--dry-run"], &[]);
    let said = common::stdout_of(&out);
    assert_eq!(out.status.code(), Some(4), "{}", common::stderr(&out));
    assert!(
        said.contains("refused: exit 4") && said.contains("would remove"),
        "{said}"
    );
    assert_same(
        &snapshot(p.s.dir.path()),
        &before,
        "a dry run changes nothing",
    );
}

#[test]
fn all_skips_the_guarded_table_and_resets_the_rest() {
    let p = Pipeline::new(true);
    ok(&p.run_once(&[]));
    let guarded_before = snapshot(&p.orders());
    let out = p.reset(&["--all", "--yes"], &[]);
    let stdout = ok(&out);
    let err = common::stderr(&out);
    assert!(
        err.contains("Skipping the reset") && err.contains("bronze/orders"),
        "{err}"
    );
    assert!(stdout.contains("skipped"), "{stdout}");
    assert_same(
        &snapshot(&p.orders()),
        &guarded_before,
        "guarded: untouched",
    );
    assert!(
        order_ids(&p.other()).is_empty(),
        "the other table: no rows left"
    );
    ok(&p.run_once(&[]));
    assert_eq!(order_ids(&p.other()), (1000..1020).collect::<Vec<_>>());
    assert_eq!(order_ids(&p.orders()), (0..20).collect::<Vec<_>>());
}

#[test]
fn lifting_the_guard_resets_then_run_reingests_each_file_once_and_restores_it() {
    let p = Pipeline::new(true);
    ok(&p.run_once(&[]));
    let (before_reset, _) = common::table_version_and_txns(&p.orders());
    p.table_set(&p.orders(), "pipelines.reset.allowed=true");
    let out = ok(&p.reset(&[&p.orders().display().to_string(), "--yes"], &[]));
    assert!(out.contains("reset (generation 1"), "{out}");
    // One commit removed every row; the history still reads them.
    let (after_reset, _) = common::table_version_and_txns(&p.orders());
    assert_eq!(
        after_reset,
        before_reset + 2,
        "table set, then one reset commit"
    );
    assert!(order_ids(&p.orders()).is_empty());
    let py = common::read_with_python(&p.orders(), "order_id");
    assert_eq!(py["num_rows"], 0, "{py}");
    assert_eq!(rows_at(&p.orders(), before_reset), 20, "time travel");
    // The old checkpoint and its schemas are kept aside.
    let kept = p.orders().join("_autoloader/a/_reset-1");
    assert!(kept.join("state.redb").is_file() && kept.join("_schemas/0").exists());
    // The other table is not touched.
    assert_eq!(order_ids(&p.other()), (1000..1020).collect::<Vec<_>>());
    // The next run lands every source file once, and puts the declared guard back.
    ok(&p.run_once(&[]));
    common::assert_table_ids_once(&p.orders(), 0..20, "after reset and run");
    let py = common::read_with_python(&p.orders(), "order_id");
    assert_eq!(py["num_rows"], 20, "{py}");
    assert_eq!(
        py["configuration"]["pipelines.reset.allowed"], "false",
        "{py}"
    );
    let again = ok(&p.run_once(&[]));
    assert!(again.contains("[a] ingested 0 files"), "{again}");
    common::assert_table_ids_once(&p.orders(), 0..20, "a second run");
}

/// How many rows version `version` of the table holds (delta-rs time travel).
fn rows_at(table: &Path, version: u64) -> u64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let url = url::Url::from_directory_path(std::fs::canonicalize(table).unwrap()).unwrap();
        let mut t = deltalake::DeltaTableBuilder::from_url(url)
            .unwrap()
            .build()
            .unwrap();
        t.load_version(version).await.unwrap();
        let snapshot = t.snapshot().unwrap();
        snapshot
            .log_data()
            .into_iter()
            .map(|f| f.num_records().unwrap() as u64)
            .sum()
    })
}

#[test]
fn checkpoints_only_keeps_rows_and_the_next_run_lands_them_again() {
    let p = Pipeline::new(false);
    ok(&p.run_once(&[]));
    let out = ok(&p.reset(
        &[
            &p.orders().display().to_string(),
            "--checkpoints-only",
            "--yes",
        ],
        &[],
    ));
    // It says so, with the count, before resetting.
    assert!(
        out.contains("re-reads 2 source files from the start") && out.contains("can land again"),
        "{out}"
    );
    assert_eq!(
        order_ids(&p.orders()),
        (0..20).collect::<Vec<_>>(),
        "rows kept"
    );
    let out = ok(&p.run_once(&[]));
    assert!(out.contains("[a] ingested 2 files"), "{out}");
    let mut twice: Vec<u64> = (0..20).chain(0..20).collect();
    twice.sort_unstable();
    assert_eq!(
        order_ids(&p.orders()),
        twice,
        "the stated 2 files landed again"
    );
}

#[test]
fn modified_after_bounds_what_a_reset_rereads() {
    let p = Pipeline::new(false);
    ok(&p.run_once(&[]));
    // f0 is old; only f1 passes the stream's modifiedAfter.
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(86_400 * 30);
    let f0 = std::fs::File::options()
        .write(true)
        .open(p.s.dir.path().join("land/a/f0.json"))
        .unwrap();
    f0.set_modified(old).unwrap();
    let since = chrono::Utc::now() - chrono::Duration::days(1);
    let text = std::fs::read_to_string(&p.config).unwrap().replace(
        "table = \"bronze/orders\"\n",
        &format!(
            "table = \"bronze/orders\"\noptions = {{ \"modifiedAfter\" = \"{}\" }}\n",
            since.format("%Y-%m-%dT%H:%M:%SZ")
        ),
    );
    std::fs::write(&p.config, text).unwrap();
    let out = ok(&p.reset(&[&p.orders().display().to_string(), "--yes"], &[]));
    assert!(out.contains("re-reads 1 source file"), "{out}");
    ok(&p.run_once(&[]));
    assert_eq!(order_ids(&p.orders()), (10..20).collect::<Vec<_>>());
}

#[test]
fn a_lost_checkpoint_after_a_reset_is_rebuilt_from_post_reset_commits_only() {
    let p = Pipeline::new(false);
    ok(&p.run_once(&[]));
    ok(&p.reset(&[&p.orders().display().to_string(), "--yes"], &[]));
    // Lost before any run: nothing of the pre-reset progress comes back.
    std::fs::remove_dir_all(p.orders().join("_autoloader/a")).unwrap();
    ok(&p.run_once(&[]));
    common::assert_table_ids_once(&p.orders(), 0..20, "no resurrected progress");
    // Lost after a post-reset run: rebuilt from the post-reset commits, no file skipped or
    // taken twice.
    p.land("a", "f2.json", 20, 30);
    std::fs::remove_dir_all(p.orders().join("_autoloader/a")).unwrap();
    let out = ok(&p.run_once(&[]));
    assert!(out.contains("[a] ingested 1 file"), "{out}");
    common::assert_table_ids_once(&p.orders(), 0..30, "rebuilt from post-reset commits");
}

#[test]
fn dry_run_changes_nothing_and_no_terminal_without_yes_is_refused() {
    let p = Pipeline::new(false);
    ok(&p.run_once(&[]));
    let before = snapshot(p.s.dir.path());
    let out = ok(&p.reset(&[&p.orders().display().to_string(), "--dry-run"], &[]));
    assert!(
        out.contains("would remove 1 data file, 20 rows") && out.contains("would be set aside"),
        "{out}"
    );
    let json = ok(&p.reset(
        &[&p.orders().display().to_string(), "--dry-run", "--json"],
        &[],
    ));
    let plan: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(plan[0]["files"], 1, "{plan}");
    assert_eq!(plan[0]["flows"][0]["name"], "a", "{plan}");
    // Without --yes and without a terminal: refused.
    let out = p.reset(&[&p.orders().display().to_string()], &[]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--yes"), "{err}");
    assert_same(&snapshot(p.s.dir.path()), &before, "nothing changed");
}

#[test]
fn a_running_stream_makes_reset_refuse_with_exit_75() {
    let p = Pipeline::new(false);
    ok(&p.run_once(&[]));
    // A run held at its first plan: it has the checkpoint's lock.
    p.land("a", "f2.json", 20, 30);
    let mut held = std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
        .args(["run", p.config.to_str().unwrap(), "--once", "-q"])
        .env("AUTOLOADER_FAILPOINT", "after-plan=sleep(4000)")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let plans = p.orders().join("_autoloader/a");
    common::wait_until(
        "the run holds the lock",
        std::time::Duration::from_secs(10),
        || {
            std::fs::read_to_string(plans.join("lock"))
                .is_ok_and(|h| h.contains(&held.id().to_string()))
        },
    );
    let before = common::table_version_and_txns(&p.orders()).0;
    let out = p.reset(&[&p.orders().display().to_string(), "--yes"], &[]);
    assert_eq!(out.status.code(), Some(75), "{}", common::stderr(&out));
    assert_eq!(common::table_version_and_txns(&p.orders()).0, before);
    assert!(held.wait().unwrap().success());
    common::assert_table_ids_once(&p.orders(), 0..30, "the run finished");
}

#[test]
fn a_reset_killed_at_each_step_is_finished_by_reset_or_by_run() {
    for point in autoloader::testing::failpoint::RESET_NAMES {
        for finisher in ["reset", "run"] {
            let case = format!("{point}, then {finisher}");
            let p = Pipeline::new(false);
            ok(&p.run_once(&[]));
            let table = p.orders().display().to_string();
            let (version, _) = common::table_version_and_txns(&p.orders());
            let killed = p.reset(&[&table, "--yes"], &[("AUTOLOADER_FAILPOINT", point)]);
            assert_eq!(
                killed.status.signal(),
                Some(9),
                "{case}: {}",
                common::stderr(&killed)
            );
            if *point == "reset-after-lock" {
                assert_eq!(
                    common::table_version_and_txns(&p.orders()).0,
                    version,
                    "{case}: the old state"
                );
                assert_eq!(
                    order_ids(&p.orders()),
                    (0..20).collect::<Vec<_>>(),
                    "{case}"
                );
            }
            // A file lands meanwhile.
            p.land("a", "f2.json", 20, 30);
            if finisher == "reset" {
                ok(&p.reset(&[&table, "--yes"], &[]));
            }
            ok(&p.run_once(&[]));
            common::assert_table_ids_once(&p.orders(), 0..30, &case);
            // Killed before its commit, the reset did not happen: a run alone goes on.
            let expected = usize::from(!(*point == "reset-after-lock" && finisher == "run"));
            assert_eq!(
                reset_commits(&p.orders()),
                expected,
                "{case}: reset commits"
            );
            let again = ok(&p.run_once(&[]));
            assert!(again.contains("[a] ingested 0 files"), "{case}: {again}");
        }
    }
}

#[test]
fn keep_schema_keeps_the_flows_schema_versions_in_place() {
    let p = Pipeline::new(false);
    ok(&p.run_once(&[]));
    let schemas = p.orders().join("_autoloader/a/_schemas");
    let before = snapshot(&schemas);
    ok(&p.reset(
        &[&p.orders().display().to_string(), "--keep-schema", "--yes"],
        &[],
    ));
    assert_same(&snapshot(&schemas), &before, "the schema versions stay");
    let kept = p.orders().join("_autoloader/a/_reset-1");
    assert!(kept.join("state.redb").is_file() && !kept.join("_schemas").exists());
    ok(&p.run_once(&[]));
    common::assert_table_ids_once(&p.orders(), 0..20, "after a reset keeping the schema");
    assert!(
        !schemas.join("1").exists(),
        "no schema inferred again: still version 0 only"
    );
    // Without it, the schemas go aside with the checkpoint and are inferred again.
    ok(&p.reset(&[&p.orders().display().to_string(), "--yes"], &[]));
    assert!(
        p.orders()
            .join("_autoloader/a/_reset-2/_schemas/0")
            .exists()
    );
    assert!(!schemas.exists());
    ok(&p.run_once(&[]));
    assert!(schemas.join("0").exists(), "inferred again");
    common::assert_table_ids_once(&p.orders(), 0..20, "after a second reset");
}

/// `ingest`'s checkpoint `TABLE/_autoloader` is found under the table: no config needed.
#[test]
fn an_ingest_stream_is_reset_without_a_config() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 5));
    s.land("b.json", common::orders_jsonl(5, 9));
    ok(&s.ingest(&[]));
    let table = s.table().display().to_string();
    let out = ok(&run(
        &["reset".into(), table.clone(), "--dry-run".into()],
        &[],
    ));
    assert!(out.contains("flow table: checkpoint"), "{out}");
    let out = ok(&run(
        &[
            "reset".into(),
            table.clone(),
            "--checkpoints-only".into(),
            "--yes".into(),
        ],
        &[],
    ));
    assert!(
        out.contains("give --config to count the files"),
        "the count needs the source: {out}"
    );
    // The checkpoints-only reset set the progress aside; the full refresh right after
    // finds a fresh checkpoint, with nothing to set aside.
    assert!(s.table().join("_autoloader/_reset-1/state.redb").is_file());
    ok(&run(&["reset".into(), table, "--yes".into()], &[]));
    assert!(!s.table().join("_autoloader/_reset-2").exists());
    ok(&s.ingest(&[]));
    s.assert_ids_once(0..9, "after the reset");
    // `status` still finds the one stream (the kept folders are not streams).
    let status = ok(&run(
        &[
            "status".into(),
            s.table().display().to_string(),
            "--json".into(),
        ],
        &[],
    ));
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert!(status.is_object(), "one stream: {status}");
}

#[test]
fn a_checkpoints_only_reset_killed_midway_is_finished_by_the_next_run() {
    for point in ["reset-after-commit", "reset-mid-aside"] {
        let p = Pipeline::new(false);
        ok(&p.run_once(&[]));
        let table = p.orders().display().to_string();
        let killed = p.reset(
            &[&table, "--checkpoints-only", "--yes"],
            &[("AUTOLOADER_FAILPOINT", point)],
        );
        assert_eq!(killed.status.signal(), Some(9), "{point}");
        ok(&p.run_once(&[]));
        let mut twice: Vec<u64> = (0..20).chain(0..20).collect();
        twice.sort_unstable();
        assert_eq!(
            order_ids(&p.orders()),
            twice,
            "{point}: rows kept, and landed again once"
        );
    }
}

/// `pipelines.reset.allowed` is true or false: a typo or another word is refused by
/// `table set`, and a non-boolean value written by another tool guards the table.
#[test]
fn only_true_lifts_the_reset_guard() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(0, 3));
    ok(&s.ingest(&[]));
    let table = s.table().display().to_string();
    for bad in ["pipelines.reset.allowed=no", "pipelines.reset.alowed=false"] {
        let out = run(
            &["table".into(), "set".into(), table.clone(), bad.into()],
            &[],
        );
        assert_eq!(
            out.status.code(),
            Some(2),
            "{bad}: {}",
            common::stderr(&out)
        );
    }
    let script = "import os, sys\nfrom deltalake import DeltaTable\n\
        DeltaTable(sys.argv[1]).alter.set_table_properties({'pipelines.reset.allowed': 'no'}, raise_if_not_exists=False)\n\
        os._exit(0)\n";
    let out = std::process::Command::new("python3")
        .args(["-c", script, &table])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    let out = run(&["reset".into(), table.clone(), "--yes".into()], &[]);
    assert_eq!(out.status.code(), Some(4), "{}", common::stderr(&out));
}
