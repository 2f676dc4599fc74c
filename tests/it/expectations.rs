//! Expectations (README "Expectations"): rules that warn, drop, quarantine or fail, run by
//! the real binary on JSON and CSV files; the table, the quarantine table, the commit info,
//! the `data_quality` event and the summary are checked against counts worked out here
//! from the input, independently of the tool.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::{self, Scratch, commit_infos, json_summary, read_table, run, stderr};

/// One input row: `id`, and `amount` (None: null).
#[derive(Clone, Copy)]
struct Row {
    id: u64,
    amount: Option<i64>,
}

/// `n` rows from `from`: amounts from -20 to 80, every 13th null.
fn rows(from: u64, n: u64) -> Vec<Row> {
    (from..from + n)
        .map(|id| Row {
            id,
            amount: (id % 13 != 0).then(|| (id * 37 % 101) as i64 - 20),
        })
        .collect()
}

fn jsonl(rows: &[Row]) -> String {
    rows.iter()
        .map(|r| match r.amount {
            Some(a) => format!("{{\"id\": {}, \"amount\": {a}}}\n", r.id),
            None => format!("{{\"id\": {}, \"amount\": null}}\n", r.id),
        })
        .collect()
}

fn csv(rows: &[Row]) -> String {
    let mut out = String::from("id,amount\n");
    for r in rows {
        out += &format!(
            "{},{}\n",
            r.id,
            r.amount.map(|a| a.to_string()).unwrap_or_default()
        );
    }
    out
}

/// What the rules `positive` (drop: amount > 0), `small` (quarantine: amount < 60) and
/// `early` (warn: id < 50) make of `rows`, worked out by hand: NULL fails a check.
#[derive(Debug, Default, PartialEq)]
struct Expected {
    landed: BTreeSet<u64>,
    quarantined: BTreeSet<u64>,
    dropped: BTreeSet<u64>,
    /// Rows each rule failed: positive, small, early.
    failed: [u64; 3],
}

fn expected(rows: &[Row]) -> Expected {
    let mut e = Expected::default();
    for r in rows {
        let positive = r.amount.is_some_and(|a| a > 0);
        let small = r.amount.is_some_and(|a| a < 60);
        let early = r.id < 50;
        for (i, passed) in [positive, small, early].into_iter().enumerate() {
            e.failed[i] += u64::from(!passed);
        }
        if !small {
            e.quarantined.insert(r.id);
        } else if !positive {
            e.dropped.insert(r.id);
        } else {
            e.landed.insert(r.id);
        }
    }
    e
}

const RULES: [&str; 6] = [
    "--expect-or-drop",
    "positive=amount > 0",
    "--expect-or-quarantine",
    "small=amount < 60",
    "--expect",
    "early=id < 50",
];

fn ingest(s: &Scratch, format: &str, extra: &[&str]) -> Vec<String> {
    let mut args = common::args::ingest_args(
        s,
        &[
            format!("cloudFiles.format={format}"),
            "cloudFiles.inferColumnTypes=true".to_string(),
        ],
    );
    args.extend(RULES.iter().map(|a| a.to_string()));
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// The default quarantine table of an `ingest` stream (its checkpoint is the table's
/// `_autoloader`).
fn quarantine_of(table: &Path) -> PathBuf {
    table.join("_autoloader/quarantine")
}

/// The values of an integer column of a table, each as read.
fn ints(table: &Path, column: &str) -> Vec<i64> {
    if !table.join("_delta_log").exists() {
        return Vec::new();
    }
    common::column_strings(&read_table(table), column)
        .iter()
        .map(|v| v.parse().unwrap())
        .collect()
}

fn ids(table: &Path) -> BTreeSet<u64> {
    let all = ints(table, "id");
    let set: BTreeSet<u64> = all.iter().map(|i| *i as u64).collect();
    assert_eq!(set.len(), all.len(), "an id twice in {}", table.display());
    set
}

/// Per rule name: (passed, failed, dropped, quarantined), summed over `infos`.
fn rule_counts(infos: &[serde_json::Value]) -> Vec<(String, [u64; 4])> {
    let mut out: Vec<(String, [u64; 4])> = Vec::new();
    for info in infos {
        for e in info["expectations"].as_array().into_iter().flatten() {
            let name = e["name"].as_str().unwrap().to_string();
            let n = ["passed", "failed", "dropped", "quarantined"].map(|k| e[k].as_u64().unwrap());
            match out.iter_mut().find(|(m, _)| *m == name) {
                Some((_, c)) => (0..4).for_each(|i| c[i] += n[i]),
                None => out.push((name, n)),
            }
        }
    }
    out.sort();
    out
}

/// The counts the commits should hold for `rows`.
fn expected_counts(rows: &[Row]) -> Vec<(String, [u64; 4])> {
    let e = expected(rows);
    let n = rows.len() as u64;
    // A row of `positive` that `small` also failed went to the quarantine.
    let positive_quarantined = rows
        .iter()
        .filter(|r| r.amount.is_none_or(|a| a <= 0) && r.amount.is_none_or(|a| a >= 60))
        .count() as u64;
    let mut out = vec![
        ("early".to_string(), [n - e.failed[2], e.failed[2], 0, 0]),
        (
            "positive".to_string(),
            [
                n - e.failed[0],
                e.failed[0],
                e.failed[0] - positive_quarantined,
                positive_quarantined,
            ],
        ),
        (
            "small".to_string(),
            [n - e.failed[1], e.failed[1], 0, e.failed[1]],
        ),
    ];
    out.sort();
    out
}

/// Every action on JSON and on CSV files, over two runs: the table holds exactly the rows
/// that pass the drop and quarantine rules, the quarantine exactly those `small` failed
/// (with the rules each failed, its file, record and batch), and the commits, the
/// summary and the events count what was worked out here.
#[test]
fn each_action_on_json_and_csv_lands_drops_quarantines_and_counts() {
    for (format, write) in [("json", jsonl as fn(&[Row]) -> String), ("csv", csv)] {
        let s = Scratch::new();
        let first = rows(1, 120);
        let second = rows(121, 80);
        s.land(&format!("a.{format}"), write(&first));
        let out = run(&ingest(&s, format, &["--json"]), &[]);
        let summary = json_summary(&out);
        let e1 = expected(&first);
        assert_eq!(
            summary["rows"],
            e1.landed.len() as u64,
            "{format}: {summary}"
        );
        assert_eq!(summary["droppedRows"], e1.dropped.len() as u64, "{format}");
        assert_eq!(summary["quarantinedRows"], e1.quarantined.len() as u64);
        s.land(&format!("b.{format}"), write(&second));
        common::ok(&run(&ingest(&s, format, &[]), &[]));

        let all: Vec<Row> = first.iter().chain(&second).copied().collect();
        let e = expected(&all);
        assert_eq!(ids(&s.table()), e.landed, "{format}: the table");
        let quarantine = quarantine_of(&s.table());
        assert_eq!(ids(&quarantine), e.quarantined, "{format}: the quarantine");
        assert_eq!(
            rule_counts(&commit_infos(&s.table())),
            expected_counts(&all),
            "{format}: the commits' counts"
        );
        let dropped: u64 = commit_infos(&s.table())
            .iter()
            .map(|i| i["droppedRows"].as_u64().unwrap())
            .sum();
        assert_eq!(dropped, e.dropped.len() as u64, "{format}");

        // A quarantined row says which rules it failed, where it came from, and when.
        let batches = read_table(&quarantine);
        let failed = common::column_strings(&batches, "_failed_expectations");
        let id_col = common::column_strings(&batches, "id");
        let record = common::column_strings(&batches, "_source_record");
        let file = common::column_strings(&batches, "_source_file");
        let batch = common::column_strings(&batches, "_batch");
        for i in 0..id_col.len() {
            let id: u64 = id_col[i].parse().unwrap();
            let row = all.iter().find(|r| r.id == id).unwrap();
            let mut names = vec!["small"];
            if row.amount.is_none_or(|a| a <= 0) {
                names.insert(0, "positive");
            }
            if id >= 50 {
                names.insert(0, "early");
            }
            assert_eq!(
                failed[i],
                format!("[{}]", names.join(", ")),
                "{format} id {id}"
            );
            let (in_file, from) = if id <= 120 { ("a", 1) } else { ("b", 121) };
            assert!(
                file[i].ends_with(&format!("/{in_file}.{format}")),
                "{}",
                file[i]
            );
            assert_eq!(record[i], (id - from + 1).to_string(), "{format} id {id}");
            assert_eq!(batch[i], if id <= 120 { "0" } else { "1" });
        }

        // `quality`: per day and rule, what the commits hold (one day: the test's).
        let out = run(
            &[
                "quality".into(),
                s.table().display().to_string(),
                "--json".into(),
            ],
            &[],
        );
        let report: serde_json::Value = serde_json::from_str(&common::ok(&out)).unwrap();
        let days = report["days"].as_array().unwrap();
        for (name, [passed, failed, dropped, quarantined]) in expected_counts(&all) {
            let d = days
                .iter()
                .find(|d| d["expectation"] == name.as_str())
                .unwrap();
            assert_eq!(d["checked"], passed + failed, "{format} {name}");
            assert_eq!(
                [&d["failed"], &d["dropped"], &d["quarantined"]],
                [failed, dropped, quarantined]
                    .map(serde_json::Value::from)
                    .each_ref(),
                "{format} {name}"
            );
            assert!(
                d["exampleFile"]
                    .as_str()
                    .unwrap()
                    .contains(&format!(".{format}"))
            );
        }
        let text = common::ok(&run(
            &["quality".into(), s.table().display().to_string()],
            &[],
        ));
        assert!(
            text.contains("expectation") && text.contains("small"),
            "{text}"
        );

        // Lakeflow's shape, in the event log, per batch.
        let events = common::events_of(&s.table().join("_autoloader"), "data_quality");
        assert_eq!(events.len(), 2, "{format}");
        let rules = events[0]["data_quality"]["expectations"]
            .as_array()
            .unwrap();
        let small = rules.iter().find(|r| r["name"] == "small").unwrap();
        assert_eq!(small["failed_records"], e1.failed[1]);
        assert_eq!(small["passed_records"], 120 - e1.failed[1]);
        assert!(small["dataset"].as_str().unwrap().ends_with("/table"));
        assert_eq!(
            events[0]["data_quality"]["dropped_records"],
            e1.dropped.len() as u64
        );
    }
}

/// A `fail` rule: exit 1 naming the rule, the file, the record and its values; nothing
/// of the batch lands and its file stays unconsumed, so a run with the rule fixed lands
/// it whole.
#[test]
fn a_fail_rule_stops_the_flow_naming_the_row_and_keeps_the_file() {
    let s = Scratch::new();
    s.land("good.json", jsonl(&rows(1, 5)));
    common::ok(&s.ingest(&["cloudFiles.format=json", "cloudFiles.inferColumnTypes=true"]));
    s.land(
        "bad.json",
        "{\"id\": 10, \"amount\": 5}\n{\"id\": 11, \"amount\": -3}\n{\"id\": 12, \"amount\": 4}\n",
    );
    let mut args = common::args::ingest_args(
        &s,
        &["cloudFiles.format=json", "cloudFiles.inferColumnTypes=true"],
    );
    args.extend([
        "--expect-or-fail".to_string(),
        "positive=amount > 0".to_string(),
    ]);
    for _ in 0..2 {
        let out = run(&args, &[]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("expectation \"positive\" failed in ")
                && err.contains(
                    "bad.json, record 2: \"amount > 0\" is not true for id=11, amount=-3"
                ),
            "{err}"
        );
        assert_eq!(
            ids(&s.table()),
            (1..=5).collect(),
            "nothing of the batch landed"
        );
    }
    // The rule, now a drop rule (a change that applies to new rows): the file lands.
    let fixed: Vec<String> = args
        .iter()
        .map(|a| a.replace("--expect-or-fail", "--expect-or-drop"))
        .collect();
    common::ok(&run(&fixed, &[]));
    assert_eq!(
        ids(&s.table()),
        [1, 2, 3, 4, 5, 10, 12].into_iter().collect()
    );
}

/// Bad rules are exit 2 before any row lands: an unknown column, a type clash, a
/// duplicate name, a syntax error with its position, an unknown action in a config.
#[test]
fn bad_rules_are_usage_errors_before_anything_lands() {
    let s = Scratch::new();
    s.land("a.json", jsonl(&rows(1, 5)));
    let cases: [(&[&str], &str); 4] = [
        (
            &["--expect", "r=amout > 0"],
            "no column amout; did you mean amount?",
        ),
        (
            &["--expect", "r=amount > 'x'"],
            "expectation \"r\": check \"amount > 'x'\" at column",
        ),
        (
            &["--expect", "r=id > 0", "--expect-or-drop", "r=id > 1"],
            "expectation \"r\": the name is given twice",
        ),
        (
            &["--expect-or-fail", "r=id > > 1"],
            "expectation \"r\": check \"id > > 1\" at column 6",
        ),
    ];
    for (flags, message) in cases {
        let mut args = common::args::ingest_args(
            &s,
            &["cloudFiles.format=json", "cloudFiles.inferColumnTypes=true"],
        );
        args.extend(flags.iter().map(|f| f.to_string()));
        let out = run(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(message),
            "{flags:?}: {}",
            stderr(&out)
        );
        assert!(!s.table().join("_delta_log").exists(), "{flags:?}: a table");
    }
    let config = s.dir.path().join("streams.toml");
    std::fs::write(
        &config,
        r#"
[[stream]]
name = "orders"
source = "landing"
table = "table"
options = { "cloudFiles.format" = "json" }
[[stream.expect]]
name = "r"
check = "id > 0"
on_violation = "skip"
"#,
    )
    .unwrap();
    let out = run(
        &["run".into(), config.display().to_string(), "--once".into()],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("on_violation = \"skip\": expected one of warn, drop, quarantine, fail"),
        "{}",
        stderr(&out)
    );
}

/// A config's rules, as tables and as Lakeflow constraints pasted as written, with a
/// quarantine table of its own; a rule added on a later run is a change of the flow's
/// definition that applies to new rows, said once and recorded as an event.
#[test]
fn config_rules_and_constraints_and_a_rule_added_later() {
    let s = Scratch::new();
    s.land("a.json", jsonl(&rows(1, 60)));
    let config = s.dir.path().join("streams.toml");
    let write = |extra: &str| {
        std::fs::write(
            &config,
            format!(
                r#"
[[stream]]
name = "orders"
source = "landing"
table = "bronze/orders"
quarantine_table = "quarantine/orders"
expect = [
  "CONSTRAINT positive EXPECT (amount > 0) ON VIOLATION DROP ROW",
  {{ name = "small", check = "amount < 60", on_violation = "quarantine" }},
  {extra}
]
[stream.options]
"cloudFiles.format" = "json"
"cloudFiles.inferColumnTypes" = true
"#
            ),
        )
        .unwrap();
    };
    write("");
    let run_config = || {
        run(
            &["run".into(), config.display().to_string(), "--once".into()],
            &[],
        )
    };
    common::ok(&run_config());
    let table = s.dir.path().join("bronze/orders");
    let quarantine = s.dir.path().join("quarantine/orders");
    let e = expected(&rows(1, 60));
    assert_eq!(ids(&table), e.landed);
    assert_eq!(ids(&quarantine), e.quarantined);

    write(r#""CONSTRAINT early EXPECT (id < 50)""#);
    s.land("b.json", jsonl(&rows(61, 20)));
    let out = run_config();
    common::ok(&out);
    assert!(
        stderr(&out).contains("The flow's definition changed; it applies to new rows only"),
        "{}",
        stderr(&out)
    );
    let changed = common::events_of(&table.join("_autoloader/orders"), "flow_definition_changed");
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0]["changes"][0]["setting"], "expect.early");
    let infos = commit_infos(&table);
    let names: Vec<&str> = infos[1]["expectations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["positive", "small", "early"]);
    assert_eq!(
        infos[1]["expectations"][2]["failed"], 20,
        "ids 61..80 all fail early"
    );
}

/// Every input row of `all` is in exactly one of the table, the quarantine and the
/// dropped count of the table's commits, as worked out from the input.
fn assert_each_row_once(s: &Scratch, all: &[Row], context: &str) {
    let e = expected(all);
    assert_eq!(ids(&s.table()), e.landed, "{context}: the table");
    assert_eq!(
        ids(&quarantine_of(&s.table())),
        e.quarantined,
        "{context}: the quarantine"
    );
    let infos = commit_infos(&s.table());
    let dropped: u64 = infos
        .iter()
        .map(|i| i["droppedRows"].as_u64().unwrap())
        .sum();
    assert_eq!(
        dropped,
        e.dropped.len() as u64,
        "{context}: the dropped count"
    );
    assert_eq!(
        rule_counts(&infos),
        expected_counts(all),
        "{context}: the counts"
    );
}

fn land_four(s: &Scratch) -> Vec<Row> {
    let mut all = Vec::new();
    for i in 0..4u64 {
        let part = rows(1 + i * 50, 50);
        s.land(&format!("f{i}.json"), jsonl(&part));
        all.extend(part);
    }
    all
}

/// A flow with a quarantine killed (SIGKILL) at every step of its batches, including
/// between the quarantine's commit and the batch's own, and at both Delta commits of a
/// batch (the quarantine's is the first): the rerun leaves each row in exactly one place.
#[test]
fn a_quarantining_flow_killed_at_every_step_puts_each_row_in_one_place() {
    use std::os::unix::process::ExitStatusExt;
    let points = autoloader::testing::failpoint::NAMES
        .iter()
        .copied()
        .filter(|n| *n != "after-schema-evolve")
        .chain([autoloader::testing::failpoint::QUARANTINE_COMMITTED]);
    for name in points {
        // Two batches; each commits to the quarantine, then to the table.
        let hits: &[u32] = match name {
            "before-delta-commit" | "after-delta-commit" => &[1, 2, 3, 4],
            "after-schema-write" => &[1],
            _ => &[1, 2],
        };
        for &nth in hits {
            let s = Scratch::new();
            let all = land_four(&s);
            let args = ingest(&s, "json", &["-o", "cloudFiles.maxFilesPerTrigger=2"]);
            let crashed = run(&args, &[("AUTOLOADER_FAILPOINT", &format!("{name}@{nth}"))]);
            let context = format!("{name}@{nth}");
            assert_eq!(
                crashed.status.signal(),
                Some(9),
                "{context}: {}",
                stderr(&crashed)
            );
            common::ok(&run(&args, &[]));
            assert_each_row_once(&s, &all, &context);
        }
    }
}

/// Killed at pseudo-random moments until a run completes: each row in one place.
#[test]
fn random_sigkills_of_a_quarantining_flow_put_each_row_in_one_place() {
    let s = Scratch::new();
    let mut all = Vec::new();
    for i in 0..12u64 {
        let part = rows(1 + i * 2000, 2000);
        s.land(&format!("f{i:02}.json"), jsonl(&part));
        all.extend(part);
    }
    let args = ingest(&s, "json", &["-o", "cloudFiles.maxFilesPerTrigger=2", "-q"]);
    let kills = common::sigkill_until_done(&args, |_| {});
    assert!(kills > 0, "no run was ever killed: the test proved nothing");
    common::ok(&run(&args, &[]));
    assert_each_row_once(&s, &all, &format!("after {kills} kills"));
}

/// A Delta table as the source (bronze → silver in one config): the silver stream's
/// rules judge the bronze rows; the bronze table keeps them all.
#[test]
fn rules_on_a_stream_reading_a_delta_table() {
    let s = Scratch::new();
    let all = rows(1, 90);
    s.land("a.json", jsonl(&all));
    let config = s.dir.path().join("streams.toml");
    std::fs::write(
        &config,
        r#"
[[stream]]
name = "bronze"
source = "landing"
table = "bronze"
[stream.options]
"cloudFiles.format" = "json"
"cloudFiles.inferColumnTypes" = true

[[stream]]
name = "silver"
source = "bronze"
table = "silver"
expect = [
  "CONSTRAINT positive EXPECT (amount > 0) ON VIOLATION DROP ROW",
  "CONSTRAINT small EXPECT (amount < 60) ON VIOLATION QUARANTINE ROW",
  "CONSTRAINT early EXPECT (id < 50)",
]
"#,
    )
    .unwrap();
    common::ok(&run(
        &["run".into(), config.display().to_string(), "--once".into()],
        &[],
    ));
    let e = expected(&all);
    assert_eq!(ids(&s.dir.path().join("bronze")).len(), 90);
    let silver = s.dir.path().join("silver");
    assert_eq!(ids(&silver), e.landed);
    assert_eq!(
        ids(&silver.join("_autoloader/silver/quarantine")),
        e.quarantined
    );
    assert_eq!(rule_counts(&commit_infos(&silver)), expected_counts(&all));
}

/// APPLY CHANGES with rules: they judge the change records before they are applied, so
/// a dropped or quarantined record never changes the target; a quarantined delete is a
/// delete not applied (the row stays as its last applied change left it).
#[test]
fn rules_on_a_cdc_flow_judge_change_records_before_they_apply() {
    let s = Scratch::new();
    let mut records: Vec<&str> = crate::cdc::RECORDS.to_vec();
    // An unknown operation (dropped) and an insert without a name (quarantined).
    records.push(r#"{"userId": 127, "name": "Zoe", "city": "Leon", "operation": "UPSERT", "sequenceNum": 3}"#);
    records.push(r#"{"userId": 128, "name": null, "city": "Puebla", "operation": "INSERT", "sequenceNum": 3}"#);
    s.land("changes.json", records.join("\n") + "\n");
    let mut args = crate::cdc::ingest_args(&s, &crate::cdc::cdc_options(false), &[]);
    args.extend(
        [
            "--expect-or-drop",
            "known_operation=operation IN ('INSERT', 'UPDATE', 'DELETE')",
            "--expect-or-quarantine",
            "has_name=name IS NOT NULL OR operation = 'DELETE'",
            "--expect-or-quarantine",
            "keep_123=NOT (operation = 'DELETE' AND userId = 123)",
        ]
        .map(String::from),
    );
    common::ok(&run(&args, &[]));
    let batches = read_table(&s.table());
    let users = common::column_strings(&batches, "userId");
    let cities = common::column_strings(&batches, "city");
    let mut table: Vec<String> = users
        .iter()
        .zip(&cities)
        .map(|(u, c)| format!("{u} {c}"))
        .collect();
    table.sort();
    // Databricks' example, less the delete of 123: it keeps its update of sequence 5.
    assert_eq!(
        table,
        [
            "123 Chihuahua",
            "124 Oaxaca",
            "125 Guadalajara",
            "126 Cancun"
        ]
    );
    let quarantine = read_table(&quarantine_of(&s.table()));
    let mut quarantined = common::column_strings(&quarantine, "userId");
    quarantined.sort();
    assert_eq!(quarantined, ["123", "128"]);
    let ops = common::column_strings(&quarantine, "operation");
    assert!(ops.contains(&"DELETE".to_string()), "{ops:?}");
    let infos = commit_infos(&s.table());
    assert_eq!(infos[0]["droppedRows"], 1);
    assert_eq!(infos[0]["quarantinedRows"], 2);
}

/// Runs `python3 -c CODE` (deltalake installed by .ci/run) and asserts it succeeded.
fn python(code: &str) {
    let out = std::process::Command::new("python3")
        .args(["-c", code])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn replay(s: &Scratch, env: &[(&str, &str)]) -> Output {
    run(
        &[
            "quarantine".into(),
            "replay".into(),
            s.table().display().to_string(),
            "--json".into(),
        ],
        env,
    )
}

/// `quarantine replay`: rows fixed in the quarantine table (an UPDATE by another writer)
/// land once; a row fixed to fail only the drop rule is dropped; the others stay; a second
/// replay lands nothing. A rule relaxed on a later run of the stream lets the rest land.
#[test]
fn a_replay_lands_fixed_rows_once() {
    let s = Scratch::new();
    let all = rows(1, 60);
    s.land("a.json", jsonl(&all));
    let args = ingest(&s, "json", &[]);
    common::ok(&run(&args, &[]));
    let e = expected(&all);
    let quarantine = quarantine_of(&s.table());
    let q: Vec<u64> = e.quarantined.iter().copied().collect();
    assert!(q.len() >= 4, "{q:?}");
    // Two rows fixed, one fixed into a negative amount (the drop rule's), one left.
    python(&format!(
        "from deltalake import DeltaTable\nimport os\nt = DeltaTable('{q}')\n\
         t.update({{'amount': '10'}}, predicate='id IN ({a}, {b})')\n\
         t.update({{'amount': '-1'}}, predicate='id = {c}')\nos._exit(0)",
        q = quarantine.display(),
        a = q[0],
        b = q[1],
        c = q[2],
    ));
    let out: serde_json::Value = serde_json::from_str(&common::ok(&replay(&s, &[]))).unwrap();
    assert_eq!(out["replay"], 0, "{out}");
    assert_eq!(out["landed"], 2);
    assert_eq!(out["dropped"], 1);
    assert_eq!(out["stillFailing"], q.len() as u64 - 3);
    let mut landed = e.landed.clone();
    landed.extend([q[0], q[1]]);
    assert_eq!(ids(&s.table()), landed);
    let left: BTreeSet<u64> = q[3..].iter().copied().collect();
    assert_eq!(ids(&quarantine), left);

    let again: serde_json::Value = serde_json::from_str(&common::ok(&replay(&s, &[]))).unwrap();
    assert_eq!(again["replay"], serde_json::Value::Null, "{again}");
    assert_eq!(ids(&s.table()), landed, "a second replay lands nothing");

    // The stream, run again with the quarantine rule relaxed: the replay takes the rule
    // as the checkpoint now records it.
    let relaxed: Vec<String> = args
        .iter()
        .map(|a| a.replace("small=amount < 60", "small=amount < 1000"))
        .collect();
    common::ok(&run(&relaxed, &[]));
    let last: serde_json::Value = serde_json::from_str(&common::ok(&replay(&s, &[]))).unwrap();
    assert_eq!(last["replay"], 1, "{last}");
    // Those with a null amount fail the relaxed rule too (NULL fails a check): they stay.
    let nulls: BTreeSet<u64> = left
        .iter()
        .copied()
        .filter(|id| all[(*id - 1) as usize].amount.is_none())
        .collect();
    assert!(!nulls.is_empty() && nulls.len() < left.len(), "{left:?}");
    assert_eq!(last["dropped"], 0);
    assert_eq!(last["landed"], (left.len() - nulls.len()) as u64);
    assert_eq!(ids(&quarantine), nulls);
    landed.extend(left.difference(&nulls));
    assert_eq!(ids(&s.table()), landed);
}

/// A replay killed at each of its steps (both commits, and between them), then run
/// again: every fixed row lands exactly once and leaves the quarantine.
#[test]
fn a_replay_killed_at_every_step_lands_each_row_once() {
    use std::os::unix::process::ExitStatusExt;
    for point in [
        "before-delta-commit@1",
        "after-delta-commit@1",
        autoloader::table::replay::AFTER_REPLAY_LANDED,
        "before-delta-commit@2",
        "after-delta-commit@2",
    ] {
        let s = Scratch::new();
        let all = rows(1, 60);
        s.land("a.json", jsonl(&all));
        common::ok(&run(&ingest(&s, "json", &[]), &[]));
        let quarantine = quarantine_of(&s.table());
        python(&format!(
            "from deltalake import DeltaTable\nimport os\n\
             DeltaTable('{}').update({{'amount': '10'}})\nos._exit(0)",
            quarantine.display()
        ));
        let killed = replay(&s, &[("AUTOLOADER_FAILPOINT", point)]);
        assert_eq!(
            killed.status.signal(),
            Some(9),
            "{point}: {}",
            stderr(&killed)
        );
        let out: serde_json::Value = serde_json::from_str(&common::ok(&replay(&s, &[]))).unwrap();
        let e = expected(&all);
        let mut landed = e.landed.clone();
        landed.extend(e.quarantined.iter());
        assert_eq!(ids(&s.table()), landed, "{point}: {out}");
        assert_eq!(ids(&quarantine), BTreeSet::new(), "{point}");
        // And once more: nothing left, nothing twice.
        common::ok(&replay(&s, &[]));
        assert_eq!(ids(&s.table()), landed, "{point}");
    }
}

/// A ONCE flow with rules: its one run judges its rows; the second run skips it.
#[test]
fn a_once_flow_judges_its_rows_once() {
    let s = Scratch::new();
    let all = rows(1, 40);
    s.land("a.json", jsonl(&all));
    let config = s.dir.path().join("streams.toml");
    std::fs::write(
        &config,
        r#"
[[stream]]
name = "backfill"
source = "landing"
table = "bronze"
once = true
expect = [
  { name = "positive", check = "amount > 0", on_violation = "drop" },
  { name = "small", check = "amount < 60", on_violation = "quarantine" },
]
[stream.options]
"cloudFiles.format" = "json"
"cloudFiles.inferColumnTypes" = true
"#,
    )
    .unwrap();
    let args = [
        "run".to_string(),
        config.display().to_string(),
        "--once".into(),
    ];
    common::ok(&run(&args, &[]));
    let out = common::ok(&run(&args, &[]));
    assert!(out.contains("ran already; skipped"), "{out}");
    let e = expected(&all);
    let table = s.dir.path().join("bronze");
    assert_eq!(ids(&table), e.landed);
    assert_eq!(
        ids(&table.join("_autoloader/backfill/quarantine")),
        e.quarantined
    );
    let dropped: u64 = commit_infos(&table)
        .iter()
        .filter_map(|i| i["droppedRows"].as_u64())
        .sum();
    assert_eq!(dropped, e.dropped.len() as u64);
}

/// A batch stopped between its quarantine commit and its own, run again with a changed
/// rule: refused (a row could land in both places), then run with its rules: once each.
#[test]
fn a_batch_stopped_after_its_quarantine_keeps_its_rules() {
    use std::os::unix::process::ExitStatusExt;
    let s = Scratch::new();
    let all = rows(1, 60);
    s.land("a.json", jsonl(&all));
    let args = ingest(&s, "json", &[]);
    let killed = run(
        &args,
        &[(
            "AUTOLOADER_FAILPOINT",
            autoloader::testing::failpoint::QUARANTINE_COMMITTED,
        )],
    );
    assert_eq!(killed.status.signal(), Some(9), "{}", stderr(&killed));
    let relaxed: Vec<String> = args
        .iter()
        .map(|a| a.replace("small=amount < 60", "small=amount < 1000"))
        .collect();
    let refused = run(&relaxed, &[]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("under other rules"),
        "{}",
        stderr(&refused)
    );
    common::ok(&run(&args, &[]));
    assert_each_row_once(&s, &all, "after the refusal");
}

/// Mistakes a quarantine cannot live with, refused before anything runs: a rule reading a
/// column the table leaves out, and two streams sharing one quarantine table.
#[test]
fn a_quarantine_needs_its_columns_and_its_own_table() {
    let s = Scratch::new();
    s.land("a.json", jsonl(&rows(1, 5)));
    let mut args = ingest(&s, "json", &["--except-columns", "amount"]);
    args.retain(|a| a != "--json");
    let out = run(&args, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("reads amount, which the table leaves out"),
        "{}",
        stderr(&out)
    );
    let config = s.dir.path().join("streams.toml");
    std::fs::write(
        &config,
        r#"
[[stream]]
name = "a"
source = "landing"
table = "ta"
quarantine_table = "q"
expect = [{ name = "r", check = "id > 2", on_violation = "quarantine" }]
[stream.options]
"cloudFiles.format" = "json"

[[stream]]
name = "b"
source = "landing"
table = "tb"
quarantine_table = "q"
expect = [{ name = "r", check = "id > 2", on_violation = "quarantine" }]
[stream.options]
"cloudFiles.format" = "json"
"#,
    )
    .unwrap();
    let out = run(
        &["run".into(), config.display().to_string(), "--once".into()],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("share the quarantine table"),
        "{}",
        stderr(&out)
    );
}

/// A snapshot flow with rules: each snapshot's rows are judged; the quarantined ones keep
/// the snapshot's stamp columns, as they would have landed.
#[test]
fn a_snapshot_flow_judges_each_snapshot() {
    let s = Scratch::new();
    let all = rows(1, 40);
    s.land("a.json", jsonl(&all));
    let mut args = ingest(&s, "json", &[]);
    args.extend(["-o".to_string(), "snapshot.unit=file".to_string()]);
    common::ok(&run(&args, &[]));
    let e = expected(&all);
    assert_eq!(ids(&s.table()), e.landed);
    let quarantine = quarantine_of(&s.table());
    assert_eq!(ids(&quarantine), e.quarantined);
    let batches = read_table(&quarantine);
    let table = read_table(&s.table());
    for stamp in ["_snapshot_id", "_ingested_at"] {
        let q = common::column_strings(&batches, stamp);
        assert!(q.iter().all(|v| v != "null"), "{stamp}: {q:?}");
        // The snapshot's one stamp, in the table and the quarantine alike.
        assert_eq!(q[0], common::column_strings(&table, stamp)[0], "{stamp}");
    }
}
