//! `autoloader run CONFIG.toml`: many streams in one process.

use crate::common::{self, Scratch, column_strings, read_table};

#[test]
fn three_streams_two_into_one_table_all_land_exactly_once() {
    let s = Scratch::new();
    let dir = s.dir.path();
    for (name, from) in [("a", 0), ("b", 100), ("c", 200)] {
        let folder = dir.join("land").join(name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("1.json"), common::orders_jsonl(from, from + 10)).unwrap();
        std::fs::write(
            folder.join("2.json"),
            common::orders_jsonl(from + 10, from + 20),
        )
        .unwrap();
    }
    let config = dir.join("streams.toml");
    std::fs::write(
        &config,
        r#"
[defaults.options]
"cloudFiles.inferColumnTypes" = true
"cloudFiles.maxFilesPerTrigger" = 1

[[stream]]
name = "a"
source = "land/a"
table = "bronze/shared"

[[stream]]
name = "b"
source = "land/b"
table = "bronze/shared"

[[stream]]
name = "c"
source = "land/c"
table = "bronze/c"
"#,
    )
    .unwrap();
    let out = common::run(
        &["run".into(), config.display().to_string(), "--once".into()],
        &[],
    );
    let stdout = common::ok(&out);
    for name in ["a", "b", "c"] {
        assert!(
            stdout.contains(&format!("[{name}] ingested 2 files, 20 rows")),
            "{stdout}"
        );
    }
    let shared = dir.join("bronze/shared");
    let mut ids: Vec<u64> = column_strings(&read_table(&shared), "order_id")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..20).chain(100..120).collect::<Vec<_>>());
    let (_, txns) = common::table_version_and_txns(&shared);
    assert_eq!(txns.len(), 2, "each stream appends under its own app id");
    assert!(txns.values().all(|v| *v == 1), "{txns:?}");
    assert_eq!(common::row_count(&read_table(&dir.join("bronze/c"))), 20);
    // A rerun adds nothing; a new file lands in one stream only.
    std::fs::write(dir.join("land/b/3.json"), common::orders_jsonl(120, 125)).unwrap();
    let stdout = common::ok(&common::run(
        &["run".into(), config.display().to_string(), "--once".into()],
        &[],
    ));
    assert!(
        stdout.contains("[a] ingested 0 files") && stdout.contains("[b] ingested 1 file, 5 rows"),
        "{stdout}"
    );
    assert_eq!(common::row_count(&read_table(&shared)), 45);
}

#[test]
fn a_bad_config_is_refused_naming_the_line() {
    let s = Scratch::new();
    let config = s.dir.path().join("bad.toml");
    std::fs::write(
        &config,
        "[[stream]]\nname = \"a\"\nsource = \"x\"\ntable = \n",
    )
    .unwrap();
    let out = common::run(
        &["run".into(), config.display().to_string(), "--once".into()],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out).contains("line 4"),
        "{}",
        common::stderr(&out)
    );
}
