//! `autoloader table show|set`: a table's properties, written where Spark and delta-rs
//! read them (`metaData.configuration`), in one commit.

use crate::common::{self, Scratch, ok, run};

#[test]
fn table_set_writes_properties_readers_see_and_show_lists_them() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(1, 4));
    ok(&s.ingest(&[]));
    let table = s.table().display().to_string();
    let (before, _) = common::table_version_and_txns(&s.table());
    let set = |props: &[&str]| {
        let mut args: Vec<String> = vec!["table".into(), "set".into(), table.clone()];
        args.extend(props.iter().map(|p| (*p).to_string()));
        run(&args, &[])
    };
    let out = ok(&set(&["pipelines.reset.allowed=false", "owner=data team"]));
    assert!(out.contains("properties set in version"), "{out}");
    let (after, _) = common::table_version_and_txns(&s.table());
    assert_eq!(after, before + 1, "one commit");
    // The same values again: nothing to commit.
    let out = ok(&set(&["owner=data team"]));
    assert!(out.contains("nothing committed"), "{out}");
    assert_eq!(common::table_version_and_txns(&s.table()).0, after);
    // An outside reader sees them.
    let py = common::read_with_python(&s.table(), "order_id");
    assert_eq!(
        py["configuration"]["pipelines.reset.allowed"], "false",
        "{py}"
    );
    assert_eq!(py["configuration"]["owner"], "data team", "{py}");
    assert_eq!(py["num_rows"], 3, "{py}");
    // show: properties, version, files, columns and the flow that writes the table.
    let info: serde_json::Value = serde_json::from_str(&ok(&run(
        &[
            "table".into(),
            "show".into(),
            table.clone(),
            "--json".into(),
        ],
        &[],
    )))
    .unwrap();
    assert_eq!(info["version"], after, "{info}");
    assert_eq!(info["properties"]["owner"], "data team", "{info}");
    assert!(info["files"].as_u64().unwrap() >= 1, "{info}");
    assert!(
        info["columns"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "order_id BIGINT" || c == "order_id STRING"),
        "{info}"
    );
    let flows = info["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 1, "{info}");
    assert!(
        flows[0]["checkpoint"]
            .as_str()
            .unwrap()
            .ends_with("_autoloader"),
        "{info}"
    );
    // The stream goes on after the property commit, exactly once.
    s.land("b.json", common::orders_jsonl(4, 6));
    ok(&s.ingest(&[]));
    s.assert_ids_once(1..6, "ingest after table set");
}

#[test]
fn table_set_refuses_delta_properties_and_paths_that_are_not_tables() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(1, 2));
    ok(&s.ingest(&[]));
    let table = s.table().display().to_string();
    for args in [
        vec!["table", "set", &table, "delta.appendOnly=true"],
        vec!["table", "set", &table, "novalue"],
    ] {
        let out = run(
            &args.iter().map(|a| (*a).to_string()).collect::<Vec<_>>(),
            &[],
        );
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            common::stderr(&out)
        );
    }
    let missing = s.dir.path().join("nothing-here");
    for sub in ["show", "set"] {
        let mut args = vec![
            "table".to_string(),
            sub.to_string(),
            missing.display().to_string(),
        ];
        if sub == "set" {
            args.push("a=b".into());
        }
        let out = run(&args, &[]);
        let err = common::stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("is not a Delta table"), "{err}");
        assert!(!missing.exists(), "nothing created");
    }
}

/// `[[table]]` properties in streams.toml land on the table when a run creates it; lifted
/// by hand with `table set` (as for one reset), the next run puts the declared value back.
#[test]
fn declared_table_properties_are_applied_and_put_back_by_each_run() {
    let s = Scratch::new();
    let dir = s.dir.path();
    for name in ["a", "b"] {
        let folder = dir.join("land").join(name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("1.json"), common::orders_jsonl(1, 3)).unwrap();
    }
    let config = dir.join("streams.toml");
    std::fs::write(
        &config,
        r#"
[[table]]
path = "bronze/orders"
[table.properties]
"pipelines.reset.allowed" = false
"owner" = "data"

[[stream]]
name = "a"
source = "land/a"
table = "bronze/orders"

[[stream]]
name = "b"
source = "land/b"
table = "bronze/orders"
"#,
    )
    .unwrap();
    let run_config = || {
        ok(&run(
            &["run".into(), config.display().to_string(), "--once".into()],
            &[],
        ))
    };
    run_config();
    let table = dir.join("bronze/orders");
    let py = common::read_with_python(&table, "order_id");
    assert_eq!(
        py["configuration"]["pipelines.reset.allowed"], "false",
        "{py}"
    );
    assert_eq!(py["configuration"]["owner"], "data", "{py}");
    let (version, _) = common::table_version_and_txns(&table);
    // A rerun with the properties in place commits nothing.
    run_config();
    assert_eq!(
        common::table_version_and_txns(&table).0,
        version,
        "no commit"
    );
    // Lifted by hand, put back by the next run.
    ok(&run(
        &[
            "table".into(),
            "set".into(),
            table.display().to_string(),
            "pipelines.reset.allowed=true".into(),
        ],
        &[],
    ));
    run_config();
    let py = common::read_with_python(&table, "order_id");
    assert_eq!(
        py["configuration"]["pipelines.reset.allowed"], "false",
        "{py}"
    );
    assert_eq!(py["num_rows"], 4, "{py}");
}

#[test]
fn a_declared_table_no_stream_writes_is_refused() {
    let s = Scratch::new();
    let config = s.dir.path().join("streams.toml");
    std::fs::create_dir_all(s.dir.path().join("land")).unwrap();
    std::fs::write(
        &config,
        r#"
[[table]]
path = "bronze/typo"
[table.properties]
"owner" = "data"

[[stream]]
name = "a"
source = "land"
table = "bronze/orders"
"#,
    )
    .unwrap();
    let out = run(
        &["run".into(), config.display().to_string(), "--check".into()],
        &[],
    );
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bronze/typo") && err.contains("no stream writes"),
        "{err}"
    );
}

/// delta-rs cleans up expired log files after every commit, listing all of `_delta_log`
/// each time, a cost that grew with the table's versions; we clean up when a commit writes
/// a checkpoint, as Spark does. Expired logs must still go then, and only then.
#[test]
fn expired_logs_are_cleaned_up_when_a_checkpoint_is_written_and_only_then() {
    let s = Scratch::new();
    let log = s.table().join("_delta_log");
    let versions = || -> std::collections::BTreeSet<u64> {
        std::fs::read_dir(&log)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                name.strip_suffix(".json")?.parse().ok()
            })
            .collect()
    };
    let latest = |v: &std::collections::BTreeSet<u64>| *v.iter().next_back().unwrap();
    let mut file = 0;
    let mut land_one = || {
        file += 1;
        s.land(
            &format!("f{file}.json"),
            common::orders_jsonl(file, file + 1),
        );
        ok(&s.ingest(&[]));
    };
    land_one();
    // Set as a user would: Delta's upkeep properties are the delta.* ones `table set` takes.
    ok(&run(
        &[
            "table".to_string(),
            "set".to_string(),
            s.table().display().to_string(),
            "delta.checkpointInterval=5".to_string(),
            "delta.logRetentionDuration=interval 10 seconds".to_string(),
        ],
        &[],
    ));
    while latest(&versions()) < 4 {
        land_one();
    }
    // Version 4 wrote a checkpoint ((4 + 1) % 5 == 0); nothing had expired yet.
    assert!(log.join(format!("{:020}.checkpoint.parquet", 4)).exists());
    let at_checkpoint = versions();
    assert!(at_checkpoint.contains(&0), "{at_checkpoint:?}");
    // Wait until every version so far, checkpoint 4 included, is past its retention.
    let checkpointed = std::fs::metadata(log.join(format!("{:020}.json", 4)))
        .unwrap()
        .modified()
        .unwrap();
    let expired = checkpointed + std::time::Duration::from_millis(10_500);
    if let Ok(wait) = expired.duration_since(std::time::SystemTime::now()) {
        std::thread::sleep(wait);
    }
    // Version 5 writes no checkpoint: the expired logs before checkpoint 4 stay (delta-rs
    // alone would delete them here).
    land_one();
    let at_5 = versions();
    assert_eq!(latest(&at_5), 5);
    assert!(
        at_checkpoint.is_subset(&at_5),
        "a commit without a checkpoint cleaned up logs: {at_checkpoint:?} -> {at_5:?}"
    );
    // Version 9 writes the next checkpoint, and the cleanup with it.
    while latest(&versions()) < 9 {
        land_one();
    }
    let at_9 = versions();
    assert!(!at_9.contains(&0), "expired version 0 was kept: {at_9:?}");
    let landed = std::fs::read_dir(s.landing()).unwrap().count() as u64;
    s.assert_ids_once(1..landed + 1, "after the cleanup");
}
