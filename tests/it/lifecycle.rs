//! A bronze layer run from one `streams.toml`, as the lifecycle issue's user runs it:
//! several flows into one table, a flow joining later, bronze feeding silver.

use std::path::Path;

use crate::common::{self, Scratch, assert_table_ids_once, ok, run};

fn write_config(dir: &Path, streams: &str) -> String {
    let config = dir.join("streams.toml");
    std::fs::write(&config, streams).unwrap();
    config.display().to_string()
}

fn land(dir: &Path, rel: &str, from: u64, to: u64) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, common::orders_jsonl(from, to)).unwrap();
}

const TWO_FLOWS: &str = r#"
[defaults.options]
"cloudFiles.inferColumnTypes" = true

[[stream]]
name = "app"
source = "landing/app"
table = "bronze/orders"

[[stream]]
name = "partner"
source = "landing/partner"
table = "bronze/orders"

[[stream]]
name = "silver"
source = "bronze/orders"
source_format = "delta"
table = "silver/orders"
"#;

#[test]
fn a_flow_joins_a_shared_table_later_without_touching_the_others_progress() {
    let s = Scratch::new();
    let dir = s.dir.path();
    land(dir, "landing/app/a1.json", 0, 10);
    land(dir, "landing/partner/p1.json", 100, 110);
    let config = write_config(dir, TWO_FLOWS);
    let run_once = |config: &str| ok(&run(&["run".into(), config.into(), "--once".into()], &[]));
    run_once(&config);
    run_once(&config);
    let bronze = dir.join("bronze/orders");
    let (_, txns_before) = common::table_version_and_txns(&bronze);
    assert_eq!(
        txns_before.len(),
        2,
        "two flows, two app ids: {txns_before:?}"
    );
    // A third source joins: the others commit nothing more (their txn versions stay).
    land(dir, "landing/archive/old.json", 200, 205);
    let joined = format!(
        "{TWO_FLOWS}\n[[stream]]\nname = \"archive\"\nsource = \"landing/archive\"\ntable = \"bronze/orders\"\n"
    );
    let config = write_config(dir, &joined);
    run_once(&config);
    run_once(&config);
    let (_, txns) = common::table_version_and_txns(&bronze);
    for (app, v) in &txns_before {
        assert_eq!(txns.get(app), Some(v), "{app} committed nothing more");
    }
    assert_eq!(
        txns.len(),
        txns_before.len() + 1,
        "one app id more: {txns:?}"
    );
    let expected: Vec<u64> = (0..10).chain(100..110).chain(200..205).collect();
    assert_table_ids_once(&bronze, expected.clone(), "bronze");
    assert_table_ids_once(&dir.join("silver/orders"), expected, "silver");
}
