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
