//! A flow knows its own definition (seed 000's full-refresh rules): a change the
//! checkpoint cannot carry on from is refused before anything is read (exit 2, naming the
//! setting, the table and checkpoint untouched); a change that applies to new rows lands
//! the next files under the new definition, warns once and emits `flow_definition_changed`
//! with both definitions. Through `ingest -o` and through a config file, across a lost
//! checkpoint, an old checkpoint with no definition, and kills at every step.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::{self, Scratch, ok, read_table, run, stderr};

/// `autoloader ingest SOURCE TABLE --once` with `-o` options.
fn ingest(source: &Path, table: &Path, options: &[&str], env: &[(&str, &str)]) -> Output {
    let mut args: Vec<String> = vec![
        "ingest".into(),
        source.display().to_string(),
        table.display().to_string(),
        "--once".into(),
    ];
    for o in options {
        args.push("-o".into());
        args.push((*o).to_string());
    }
    run(&args, env)
}

/// What a refused run must leave as it was: the table's version and rows, and the
/// checkpoint's progress and recorded definition (`status --json`).
fn untouched_state(table: &Path) -> (u64, usize, serde_json::Value) {
    let (version, _) = common::table_version_and_txns(table);
    let rows = common::row_count(&read_table(table));
    let out = run(
        &[
            "status".into(),
            table.display().to_string(),
            "--json".into(),
        ],
        &[],
    );
    let status: serde_json::Value = serde_json::from_str(ok(&out).trim()).expect("status JSON");
    let progress = serde_json::json!({
        "batches": status["batches"],
        "filesIngested": status["filesIngested"],
        "definition": status["definition"],
    });
    (version, rows, progress)
}

/// A refused run: exit 2, every needle in the error, and nothing changed.
fn assert_refused(
    out: &Output,
    table: &Path,
    before: &(u64, usize, serde_json::Value),
    needles: &[&str],
    case: &str,
) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "[{case}] exit 2\n{err}");
    for n in needles
        .iter()
        .chain(&["needs a full refresh", "autoloader reset"])
    {
        assert!(err.contains(n), "[{case}] the error names {n:?}:\n{err}");
    }
    assert_eq!(
        &untouched_state(table),
        before,
        "[{case}] the table and checkpoint are untouched"
    );
}

/// One append flow: `landing/1.json` ingested with `base` options, `landing/2.json`
/// landed after.
fn appended_once(base: &[&str]) -> Scratch {
    let s = Scratch::new();
    s.land("1.json", common::orders_jsonl(0, 10));
    ok(&ingest(&s.landing(), &s.table(), base, &[]));
    s.land("2.json", common::orders_jsonl(10, 20));
    s
}

const BASE: &[&str] = &["cloudFiles.inferColumnTypes=true"];

#[test]
fn changes_that_need_a_full_refresh_are_refused_through_ingest_flags() {
    // (case, the second run's options, the setting named)
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "format",
            &["cloudFiles.inferColumnTypes=true", "cloudFiles.format=csv"],
            "format",
        ),
        (
            "hint retyping a stored column",
            &[
                "cloudFiles.inferColumnTypes=true",
                "cloudFiles.schemaHints=amount STRING",
            ],
            "cloudFiles.schemaHints",
        ),
        (
            "rescued data column",
            &["cloudFiles.inferColumnTypes=true", "rescuedDataColumn=_bad"],
            "rescuedDataColumn",
        ),
        (
            "partition columns",
            &[
                "cloudFiles.inferColumnTypes=true",
                "cloudFiles.partitionColumns=",
            ],
            "cloudFiles.partitionColumns",
        ),
        (
            "CDC settings added to an append flow",
            &[
                "cloudFiles.inferColumnTypes=true",
                "cdc.keys=order_id",
                "cdc.sequence_by=order_id",
            ],
            "flow",
        ),
        (
            "snapshot settings added",
            &["cloudFiles.inferColumnTypes=true", "snapshot.unit=file"],
            "flow",
        ),
    ];
    for (case, options, setting) in cases {
        let s = appended_once(BASE);
        let before = untouched_state(&s.table());
        let out = ingest(&s.landing(), &s.table(), options, &[]);
        assert_refused(&out, &s.table(), &before, &[setting], case);
        // `ingest --dry-run` says the same, and the unchanged flow still runs.
        let mut args: Vec<String> = vec![
            "ingest".into(),
            s.landing().display().to_string(),
            s.table().display().to_string(),
            "--dry-run".into(),
        ];
        for o in *options {
            args.extend(["-o".to_string(), o.to_string()]);
        }
        let dry = run(&args, &[]);
        assert_eq!(
            dry.status.code(),
            Some(2),
            "[{case}] dry run: {}",
            stderr(&dry)
        );
        assert!(
            common::stdout_of(&dry).contains(setting),
            "[{case}] {}",
            common::stdout_of(&dry)
        );
        ok(&ingest(&s.landing(), &s.table(), BASE, &[]));
        s.assert_ids_once(0..20, case);
    }
}

#[test]
fn the_source_changed_on_one_checkpoint_is_refused_not_taken_for_the_old_files() {
    let s = appended_once(BASE);
    let other = s.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    // The same name in another folder: it used to be taken for landing/1.json.
    std::fs::write(other.join("1.json"), common::orders_jsonl(100, 110)).unwrap();
    let before = untouched_state(&s.table());
    let out = ingest(&other, &s.table(), BASE, &[]);
    assert_refused(
        &out,
        &s.table(),
        &before,
        &["source", "landing", "other"],
        "source",
    );
}

/// The CDC flow of Databricks' example, `RECORDS` in one file.
fn cdc_once(options: &[String]) -> Scratch {
    let s = Scratch::new();
    s.land("0.json", crate::cdc::RECORDS[..4].join("\n"));
    ok(&crate::cdc::ingest(&s, options, &[]));
    s.land("1.json", crate::cdc::RECORDS[4..].join("\n"));
    s
}

#[test]
fn changed_or_missing_cdc_settings_are_refused() {
    let base = crate::cdc::cdc_options(false);
    let swap = |from: &str, to: &str| -> Vec<String> {
        base.iter()
            .map(|o| {
                if o.starts_with(from) {
                    to.to_string()
                } else {
                    o.clone()
                }
            })
            .collect()
    };
    let cases: Vec<(&str, Vec<String>, &str)> = vec![
        ("keys", swap("cdc.keys=", "cdc.keys=name"), "cdc.keys"),
        (
            "sequence",
            swap("cdc.sequence_by=", "cdc.sequence_by=userId"),
            "cdc.sequence_by",
        ),
        (
            "deletes",
            swap(
                "cdc.apply_as_deletes=",
                "cdc.apply_as_deletes=operation = 'REMOVE'",
            ),
            "cdc.apply_as_deletes",
        ),
        (
            "SCD type",
            [base.clone(), vec!["cdc.stored_as_scd_type=2".into()]].concat(),
            "cdc.stored_as_scd_type",
        ),
        (
            "CDC settings left out",
            vec![
                "cloudFiles.inferColumnTypes=true".into(),
                "cloudFiles.includeMetadata=false".into(),
            ],
            "flow",
        ),
    ];
    for (case, options, setting) in cases {
        let s = cdc_once(&base);
        let before = untouched_state(&s.table());
        let out = crate::cdc::ingest(&s, &options, &[]);
        assert_refused(&out, &s.table(), &before, &[setting], case);
    }
    // ignore_null_updates applies to later changes: the run goes on, and says so.
    let s = cdc_once(&base);
    let out = crate::cdc::ingest(
        &s,
        &[base.clone(), vec!["cdc.ignore_null_updates=true".into()]].concat(),
        &[],
    );
    let err = stderr(&out);
    ok(&out);
    assert!(
        err.contains("cdc.ignore_null_updates") && err.contains("new rows only"),
        "{err}"
    );
}

#[test]
fn a_where_added_lands_new_rows_filtered_warns_once_and_emits_both_definitions() {
    let s = appended_once(BASE);
    let with_where = [
        "cloudFiles.inferColumnTypes=true",
        "cloudFiles.maxFilesPerTrigger=5",
    ];
    // A batch size is not part of the definition: no warning.
    let out = ingest(&s.landing(), &s.table(), &with_where, &[]);
    ok(&out);
    assert!(!stderr(&out).contains("definition"), "{}", stderr(&out));
    s.land("3.json", common::orders_jsonl(20, 30));
    // A `where` added: rows of later files are filtered; the older ones stay as they were.
    let args = |w: &str| {
        let mut a: Vec<String> = vec![
            "ingest".into(),
            s.landing().display().to_string(),
            s.table().display().to_string(),
            "--once".into(),
            "-o".into(),
            "cloudFiles.inferColumnTypes=true".into(),
        ];
        a.extend(["--where".into(), w.to_string()]);
        a
    };
    let out = run(&args("order_id >= 25"), &[]);
    let err = stderr(&out);
    ok(&out);
    assert!(
        err.contains("where") && err.contains("new rows only") && err.contains("batch 2"),
        "{err}"
    );
    s.assert_ids_once(
        (0..20).chain(25..30),
        "rows before the change are kept, later ones filtered",
    );
    let events = common::events_of(&s.table().join("_autoloader"), "flow_definition_changed");
    assert_eq!(events.len(), 1, "{events:?}");
    let e = &events[0];
    assert_eq!(e["previous"].get("where"), None, "{e}");
    assert_eq!(e["definition"]["where"], "order_id >= 25", "{e}");
    assert_eq!(e["sinceBatch"], 2, "{e}");
    assert_eq!(e["changes"][0]["setting"], "where", "{e}");
    // Recorded: the next run with the same definition says nothing.
    s.land("4.json", common::orders_jsonl(30, 40));
    let out = run(&args("order_id >= 25"), &[]);
    ok(&out);
    assert!(
        !stderr(&out).contains("definition changed"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        common::events_of(&s.table().join("_autoloader"), "flow_definition_changed").len(),
        1
    );
    // status shows it, and since which batch.
    let status = ok(&run(
        &["status".into(), s.table().display().to_string()],
        &[],
    ));
    assert!(status.contains("definition:     since batch 2"), "{status}");
    assert!(status.contains("order_id >= 25"), "{status}");
}

#[test]
fn a_hint_for_a_new_column_applies_to_new_rows() {
    let s = appended_once(BASE);
    s.land(
        "2.json",
        "{\"order_id\": 10, \"amount\": 5, \"user_id\": \"u\", \"note\": 7}\n",
    );
    let out = ingest(
        &s.landing(),
        &s.table(),
        &[
            "cloudFiles.inferColumnTypes=true",
            "cloudFiles.schemaHints=note STRING",
        ],
        &[],
    );
    let err = stderr(&out);
    ok(&out);
    assert!(
        err.contains("cloudFiles.schemaHints") && err.contains("new rows only"),
        "{err}"
    );
    let notes = common::column_strings(&read_table(&s.table()), "note");
    assert!(notes.contains(&"7".to_string()), "{notes:?}");
}

#[test]
fn a_lost_checkpoint_is_rebuilt_with_its_definition() {
    let s = appended_once(BASE);
    std::fs::remove_dir_all(s.table().join("_autoloader")).unwrap();
    let out = ingest(
        &s.landing(),
        &s.table(),
        &["cloudFiles.inferColumnTypes=true", "cloudFiles.format=csv"],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("format"), "{}", stderr(&out));
    ok(&ingest(&s.landing(), &s.table(), BASE, &[]));
    s.assert_ids_once(0..20, "rebuilt, then the unchanged flow goes on");
}

#[test]
fn a_checkpoint_from_before_definitions_records_the_given_one_once() {
    let s = appended_once(BASE);
    // What an older version left: no definition in the store, no copy beside it.
    let checkpoint = s.table().join("_autoloader");
    {
        let db = redb::Database::open(checkpoint.join("state.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let meta: redb::TableDefinition<&str, &str> = redb::TableDefinition::new("meta");
            let mut t = txn.open_table(meta).unwrap();
            assert!(t.remove("flowDefinition").unwrap().is_some(), "recorded");
        }
        txn.commit().unwrap();
    }
    std::fs::remove_file(checkpoint.join("flow-definition.json")).unwrap();
    let out = run(
        &[
            "ingest".into(),
            s.landing().display().to_string(),
            s.table().display().to_string(),
            "--once".into(),
            "-o".into(),
            "cloudFiles.inferColumnTypes=true".into(),
        ],
        &[("RUST_LOG", "info")],
    );
    let err = stderr(&out);
    ok(&out);
    assert!(
        err.contains("written before flows recorded their definitions"),
        "{err}"
    );
    s.assert_ids_once(0..20, "the upgraded flow goes on");
    // Recorded now: a change is classified against it.
    s.land("3.json", common::orders_jsonl(20, 30));
    let before = untouched_state(&s.table());
    let out = ingest(
        &s.landing(),
        &s.table(),
        &["cloudFiles.inferColumnTypes=true", "cloudFiles.format=csv"],
        &[],
    );
    assert_refused(&out, &s.table(), &before, &["format"], "after the upgrade");
}

#[test]
fn a_reset_starts_the_next_run_under_the_new_definition() {
    let s = appended_once(BASE);
    let out = ingest(
        &s.landing(),
        &s.table(),
        &["cloudFiles.inferColumnTypes=true", "rescuedDataColumn=_bad"],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    ok(&run(
        &[
            "reset".into(),
            s.table().display().to_string(),
            "--yes".into(),
        ],
        &[],
    ));
    ok(&ingest(
        &s.landing(),
        &s.table(),
        &["cloudFiles.inferColumnTypes=true", "rescuedDataColumn=_bad"],
        &[],
    ));
    s.assert_ids_once(0..20, "everything again, under the new definition");
    let status = ok(&run(
        &["status".into(), s.table().display().to_string()],
        &[],
    ));
    assert!(status.contains("_bad"), "{status}");
}

/// A config file with one stream into `bronze/users`: Databricks' CDC example with `cdc`.
fn config_with(dir: &Path, cdc: &str, extra: &str) -> PathBuf {
    let p = dir.join("streams.toml");
    std::fs::write(
        &p,
        format!(
            r#"
[[stream]]
name = "users"
source = "land"
table = "bronze/users"
{extra}
[stream.options]
"cloudFiles.inferColumnTypes" = true
"cloudFiles.includeMetadata" = false
[stream.cdc]
{cdc}
"#
        ),
    )
    .unwrap();
    p
}

const SCD2: &str = r#"keys = ["userId"]
sequence_by = "sequenceNum"
apply_as_deletes = "operation = 'DELETE'"
except_column_list = ["operation", "sequenceNum", "_rescued_data"]
stored_as_scd_type = 2
track_history_column_list = ["city"]"#;

#[test]
fn a_config_file_change_is_classified_by_run_check_and_by_the_run() {
    let s = Scratch::new();
    let dir = s.dir.path();
    std::fs::create_dir_all(dir.join("land")).unwrap();
    std::fs::write(dir.join("land/0.json"), crate::cdc::RECORDS[..4].join("\n")).unwrap();
    let table = dir.join("bronze/users");
    let run_config = |config: &Path, extra: &[&str]| {
        let mut a: Vec<String> = vec!["run".into(), config.display().to_string()];
        a.extend(extra.iter().map(|e| e.to_string()));
        run(&a, &[])
    };
    let config = config_with(dir, SCD2, "");
    ok(&run_config(&config, &["--once"]));
    std::fs::write(dir.join("land/1.json"), crate::cdc::RECORDS[4..].join("\n")).unwrap();
    let check = ok(&run_config(&config, &["--check"]));
    assert!(check.contains("[users] definition: unchanged"), "{check}");
    // The keys changed: --check and the run refuse, naming it; nothing changes.
    let changed = config_with(
        dir,
        &SCD2.replace("keys = [\"userId\"]", "keys = [\"name\"]"),
        "",
    );
    let check = run_config(&changed, &["--check"]);
    assert_eq!(check.status.code(), Some(2), "{}", stderr(&check));
    assert!(
        common::stdout_of(&check).contains("cdc.keys: recorded \"userId\", given \"name\""),
        "{}",
        common::stdout_of(&check)
    );
    let before = {
        let (version, _) = common::table_version_and_txns(&table);
        (version, common::row_count(&read_table(&table)))
    };
    let out = run_config(&changed, &["--once"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("cdc.keys"), "{}", stderr(&out));
    let (version, _) = common::table_version_and_txns(&table);
    assert_eq!(
        (version, common::row_count(&read_table(&table))),
        before,
        "SCD 2 history untouched"
    );
    // Track history changed: refused too.
    let changed = config_with(dir, &SCD2.replace("[\"city\"]", "[\"name\"]"), "");
    assert_eq!(run_config(&changed, &["--check"]).status.code(), Some(2));
    // A where added: --check says it applies to new rows only (exit 0); the run goes on.
    let changed = config_with(dir, SCD2, "where = \"userId > 0\"");
    let check = ok(&run_config(&changed, &["--check"]));
    assert!(
        check.contains("where: recorded (not set), given \"userId > 0\": applies to new rows only"),
        "{check}"
    );
    let out = run_config(&changed, &["--once"]);
    ok(&out);
    assert!(stderr(&out).contains("new rows only"), "{}", stderr(&out));
}

#[test]
fn a_kill_at_every_step_of_recording_never_refuses_the_flow_nor_accepts_a_change_silently() {
    use autoloader::testing::failpoint::DEFINITION_RECORDED;
    // Recorded before the first plan, then again once the first commit carries it.
    let points = [
        format!("{DEFINITION_RECORDED}@1"),
        "after-plan".to_string(),
        "before-delta-commit".to_string(),
        "after-delta-commit".to_string(),
        "after-mark".to_string(),
        format!("{DEFINITION_RECORDED}@2"),
    ];
    for point in &points {
        let s = Scratch::new();
        s.land("1.json", common::orders_jsonl(0, 10));
        let killed = ingest(
            &s.landing(),
            &s.table(),
            BASE,
            &[("AUTOLOADER_FAILPOINT", point)],
        );
        assert_eq!(
            killed.status.signal(),
            Some(9),
            "{point}: {}",
            stderr(&killed)
        );
        let planned = point != &format!("{DEFINITION_RECORDED}@1");
        // A change that needs a full refresh: refused once a batch was planned under the
        // recorded definition; before that, nothing binds the flow yet.
        let changed = ingest(
            &s.landing(),
            &s.table(),
            &["cloudFiles.inferColumnTypes=true", "rescuedDataColumn=_bad"],
            &[],
        );
        if planned {
            assert_eq!(
                changed.status.code(),
                Some(2),
                "{point}: {}",
                stderr(&changed)
            );
            // The unchanged flow carries on: every row once.
            ok(&ingest(&s.landing(), &s.table(), BASE, &[]));
            s.assert_ids_once(0..10, point);
        } else {
            ok(&changed);
            s.assert_ids_once(0..10, point);
        }
    }
    // A change applying to new rows, killed right after it is recorded, was said first.
    let s = appended_once(BASE);
    let killed = ingest(
        &s.landing(),
        &s.table(),
        &["cloudFiles.inferColumnTypes=true", "pathGlobFilter=*.json"],
        &[("AUTOLOADER_FAILPOINT", DEFINITION_RECORDED)],
    );
    assert_eq!(killed.status.signal(), Some(9), "{}", stderr(&killed));
    assert!(
        stderr(&killed).contains("pathGlobFilter"),
        "{}",
        stderr(&killed)
    );
    assert_eq!(
        common::events_of(&s.table().join("_autoloader"), "flow_definition_changed").len(),
        1
    );
    ok(&ingest(
        &s.landing(),
        &s.table(),
        &["cloudFiles.inferColumnTypes=true", "pathGlobFilter=*.json"],
        &[],
    ));
    s.assert_ids_once(0..20, "after the kill");
}

#[test]
fn the_docs_table_of_settings_is_the_code_s() {
    let page = common::doc_page("docs/guide/maintenance.md");
    let table = autoloader::flow::definition::markdown_table();
    assert!(
        page.contains(&table),
        "docs/guide/maintenance.md's table under \"When a flow's definition changes\" must be:\n{table}"
    );
}

const APPEND: &str = r#"
[[stream]]
name = "s"
source = "land"
table = "bronze/t"
[stream.options]
"cloudFiles.inferColumnTypes" = true
"#;

/// The CDC base's settings, as one block to leave out.
macro_rules! cdc_section {
    () => {
        r#"[stream.cdc]
keys = ["order_id"]
sequence_by = "amount"
apply_as_deletes = "amount < 0"
except_column_list = ["_rescued_data"]
"#
    };
}
const CDC: &str = concat!(
    r#"
[[stream]]
name = "s"
source = "land"
table = "bronze/t"
[stream.options]
"cloudFiles.inferColumnTypes" = true
"cloudFiles.includeMetadata" = false
"#,
    cdc_section!()
);

const CDC_SECTION: &str = cdc_section!();

const SNAPSHOT: &str = r#"
[[stream]]
name = "s"
source = "land"
table = "bronze/t"
[stream.options]
"cloudFiles.inferColumnTypes" = true
[stream.snapshot]
unit = "file"
"#;

/// One setting changed in a config file: (case, base, text replaced, by, setting named,
/// whether it needs a full refresh).
type ConfigCase = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
);

const OPTIONS_AT: &str = "[stream.options]\n";

const CONFIG_CASES: &[ConfigCase] = &[
    (
        "source",
        APPEND,
        "source = \"land\"",
        "source = \"land2\"",
        "source",
        true,
    ),
    (
        "format",
        APPEND,
        OPTIONS_AT,
        "[stream.options]\n\"cloudFiles.format\" = \"csv\"\n",
        "format",
        true,
    ),
    (
        "table",
        APPEND,
        "table = \"bronze/t\"",
        "table = \"bronze/t2\"\ncheckpoint = \"bronze/t/_autoloader/s\"",
        "table",
        true,
    ),
    (
        "rescued data column",
        APPEND,
        OPTIONS_AT,
        "[stream.options]\n\"rescuedDataColumn\" = \"_bad\"\n",
        "rescuedDataColumn",
        true,
    ),
    (
        "hint retyping",
        APPEND,
        OPTIONS_AT,
        "[stream.options]\n\"cloudFiles.schemaHints\" = \"amount STRING\"\n",
        "cloudFiles.schemaHints",
        true,
    ),
    (
        "cdc added",
        APPEND,
        OPTIONS_AT,
        "[stream.cdc]\nkeys = [\"order_id\"]\nsequence_by = \"amount\"\n[stream.options]\n",
        "flow",
        true,
    ),
    (
        "snapshot added",
        APPEND,
        OPTIONS_AT,
        "[stream.snapshot]\nunit = \"file\"\n[stream.options]\n",
        "flow",
        true,
    ),
    (
        "where",
        APPEND,
        OPTIONS_AT,
        "where = \"order_id >= 15\"\n[stream.options]\n",
        "where",
        false,
    ),
    (
        "columns",
        APPEND,
        OPTIONS_AT,
        "columns = [\"order_id\", \"amount\"]\n[stream.options]\n",
        "columns",
        false,
    ),
    (
        "except columns",
        APPEND,
        OPTIONS_AT,
        "except_columns = [\"user_id\"]\n[stream.options]\n",
        "except_columns",
        false,
    ),
    (
        "new hint",
        APPEND,
        OPTIONS_AT,
        "[stream.options]\n\"cloudFiles.schemaHints\" = \"note STRING\"\n",
        "cloudFiles.schemaHints",
        false,
    ),
    (
        "reader option",
        APPEND,
        OPTIONS_AT,
        "[stream.options]\n\"cloudFiles.allowOverwrites\" = true\n",
        "cloudFiles.allowOverwrites",
        false,
    ),
    (
        "cdc keys",
        CDC,
        "keys = [\"order_id\"]",
        "keys = [\"user_id\"]",
        "cdc.keys",
        true,
    ),
    (
        "cdc sequence",
        CDC,
        "sequence_by = \"amount\"",
        "sequence_by = \"order_id\"",
        "cdc.sequence_by",
        true,
    ),
    (
        "cdc deletes",
        CDC,
        "apply_as_deletes = \"amount < 0\"",
        "apply_as_deletes = \"amount < 1\"",
        "cdc.apply_as_deletes",
        true,
    ),
    (
        "cdc truncates",
        CDC,
        "apply_as_deletes",
        "apply_as_truncates = \"amount = 0\"\napply_as_deletes",
        "cdc.apply_as_truncates",
        true,
    ),
    (
        "cdc scd type",
        CDC,
        "keys =",
        "stored_as_scd_type = 2\nkeys =",
        "cdc.stored_as_scd_type",
        true,
    ),
    ("cdc left out", CDC, CDC_SECTION, "", "flow", true),
    (
        "cdc ignore nulls",
        CDC,
        "keys =",
        "ignore_null_updates = true\nkeys =",
        "cdc.ignore_null_updates",
        false,
    ),
    (
        "cdc columns",
        CDC,
        "except_column_list = [\"_rescued_data\"]",
        "except_column_list = [\"_rescued_data\", \"user_id\"]",
        "cdc.except_column_list",
        false,
    ),
    (
        "snapshot unit",
        SNAPSHOT,
        "unit = \"file\"",
        "unit = \"folder\"",
        "snapshot.unit",
        true,
    ),
    (
        "snapshot skip",
        SNAPSHOT,
        "unit = \"file\"",
        "unit = \"file\"\nskip_unchanged = false",
        "snapshot.skip_unchanged",
        false,
    ),
];

#[test]
fn each_setting_changed_in_a_config_file_is_classified_by_check_and_run() {
    for &(case, base, from, to, setting, refresh) in CONFIG_CASES {
        let s = Scratch::new();
        let dir = s.dir.path();
        for land in ["land", "land2"] {
            std::fs::create_dir_all(dir.join(land)).unwrap();
            std::fs::write(dir.join(land).join("1.json"), common::orders_jsonl(0, 10)).unwrap();
        }
        let config = dir.join("streams.toml");
        let table = dir.join("bronze/t");
        let run_config = |extra: &str| {
            run(
                &["run".into(), config.display().to_string(), extra.into()],
                &[],
            )
        };
        std::fs::write(&config, base).unwrap();
        ok(&run_config("--once"));
        std::fs::write(dir.join("land/2.json"), common::orders_jsonl(10, 20)).unwrap();
        let changed = base.replace(from, to);
        assert_ne!(changed, base, "[{case}] the config changes");
        std::fs::write(&config, &changed).unwrap();
        let check = run_config("--check");
        let said = common::stdout_of(&check);
        assert!(
            said.contains(&format!("  {setting}: recorded")),
            "[{case}] --check names {setting}:\n{said}\n{}",
            stderr(&check)
        );
        let before = (
            common::table_version_and_txns(&table).0,
            common::row_count(&read_table(&table)),
        );
        let out = run_config("--once");
        if refresh {
            assert_eq!(
                check.status.code(),
                Some(2),
                "[{case}] --check: {}",
                stderr(&check)
            );
            assert!(said.contains("needs a full refresh"), "[{case}] {said}");
            assert_eq!(out.status.code(), Some(2), "[{case}] run: {}", stderr(&out));
            assert!(stderr(&out).contains(setting), "[{case}] {}", stderr(&out));
            let after = (
                common::table_version_and_txns(&table).0,
                common::row_count(&read_table(&table)),
            );
            assert_eq!(after, before, "[{case}] the table is untouched");
        } else {
            assert_eq!(
                check.status.code(),
                Some(0),
                "[{case}] --check: {}",
                stderr(&check)
            );
            assert!(said.contains("applies to new rows only"), "[{case}] {said}");
            let err = stderr(&out);
            assert!(out.status.success(), "[{case}] run: {err}");
            assert!(
                err.contains(setting) && err.contains("new rows only"),
                "[{case}] {err}"
            );
            let events = common::events_of(&table.join("_autoloader/s"), "flow_definition_changed");
            assert_eq!(events.len(), 1, "[{case}] {events:?}");
            assert_eq!(
                events[0]["previous"].get(setting).and_then(|v| v.as_str()),
                base_value(base, setting).as_deref(),
                "[{case}] {}",
                events[0]
            );
            assert!(
                events[0]["definition"].get(setting).is_some(),
                "[{case}] {}",
                events[0]
            );
            // Said once: the next run is quiet.
            let again = run_config("--once");
            assert!(
                again.status.success() && !stderr(&again).contains("new rows only"),
                "[{case}] {}",
                stderr(&again)
            );
        }
    }
}

/// What `base` recorded for `setting` in the cases above (`None`: not set).
fn base_value(base: &str, setting: &str) -> Option<String> {
    match (setting, base == CDC) {
        ("cdc.except_column_list", true) => Some("_rescued_data".into()),
        ("snapshot.skip_unchanged", _) => Some("true".into()),
        _ => None,
    }
}

#[test]
fn a_delta_table_source_switched_to_its_folder_is_refused() {
    let s = appended_once(BASE);
    let silver = s.dir.path().join("silver");
    ok(&ingest(&s.table(), &silver, &[], &[]));
    let out = ingest(&s.landing(), &silver, BASE, &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("source.kind: recorded \"Delta table\", given \"folder\""),
        "{err}"
    );
}
