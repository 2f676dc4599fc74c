//! Locations are parsed once, when the arguments or the config file are read: a local path,
//! `file://PATH` or `s3://BUCKET/PREFIX`; any other scheme is refused with exit 2, naming
//! it, before anything is written.

use std::fs;

use crate::common::{self, Scratch, ok, run};

#[test]
fn unsupported_schemes_are_refused_naming_the_scheme() {
    let s = Scratch::new();
    s.land("a.json", "{\"order_id\": 1}\n");
    let landing = s.landing().display().to_string();
    let table = s.table().display().to_string();
    let cwd = tempfile::tempdir().unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "ingest".into(),
                "gs://bucket/in".into(),
                table.clone(),
                "--once".into(),
            ],
            "gs",
        ),
        (
            vec![
                "ingest".into(),
                landing.clone(),
                "abfss://c@acct.dfs.core.windows.net/t".into(),
                "--once".into(),
            ],
            "abfss",
        ),
        (
            vec![
                "ingest".into(),
                landing.clone(),
                table.clone(),
                "--once".into(),
                "--checkpoint".into(),
                "az://c/ckpt".into(),
            ],
            "az",
        ),
        (
            vec![
                "ingest".into(),
                landing.clone(),
                table.clone(),
                "--once".into(),
                "-o".into(),
                "cloudFiles.schemaLocation=gs://b/schemas".into(),
            ],
            "gs",
        ),
        (
            vec!["status".into(), "--checkpoint".into(), "gs://b/c".into()],
            "gs",
        ),
    ];
    for (args, scheme) in cases {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_autoloader"))
            .args(&args)
            .current_dir(cwd.path())
            .output()
            .unwrap();
        let err = common::stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("the {scheme}:// scheme is not supported")),
            "{args:?}: {err}"
        );
    }
    assert!(
        fs::read_dir(cwd.path()).unwrap().next().is_none(),
        "nothing was written (no folder named after the scheme)"
    );
    assert!(!s.table().exists(), "no table was created");
}

#[test]
fn file_urls_are_local_paths() {
    let s = Scratch::new();
    s.land("a.json", "{\"order_id\": 1}\n");
    ok(&run(
        &[
            "ingest".into(),
            format!("file://{}", s.landing().display()),
            format!("file://{}", s.table().display()),
            "--once".into(),
        ],
        &[],
    ));
    s.assert_ids_once([1], "a file:// source and table");
}

#[test]
fn a_config_file_with_an_unsupported_scheme_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("landing")).unwrap();
    let config = dir.path().join("streams.toml");
    fs::write(
        &config,
        "[[stream]]\nname = \"a\"\nsource = \"landing\"\ntable = \"gs://bucket/bronze\"\n",
    )
    .unwrap();
    let out = run(
        &["run".into(), config.display().to_string(), "--once".into()],
        &[],
    );
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("stream \"a\": table: gs://bucket/bronze: the gs:// scheme"),
        "{err}"
    );
}

#[test]
fn a_format_that_cannot_be_told_is_a_usage_error() {
    let s = Scratch::new();
    s.land("orders.dat", "{\"order_id\": 1}\n");
    let out = s.ingest(&[]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "an option is missing: {err}");
    assert!(
        err.contains("cannot tell the format of orders.dat"),
        "{err}"
    );
    assert!(
        err.contains("cloudFiles.format"),
        "says which option: {err}"
    );
}

#[test]
fn events_and_status_of_a_path_that_is_not_a_checkpoint_are_refused() {
    let s = Scratch::new();
    s.land("a.json", "{\"order_id\": 1}\n");
    let elsewhere = s.dir.path().join("not-a-checkpoint");
    fs::create_dir_all(&elsewhere).unwrap();
    for command in ["events", "status"] {
        let out = run(
            &[
                command.into(),
                "--checkpoint".into(),
                elsewhere.display().to_string(),
            ],
            &[],
        );
        let err = common::stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{command}: {err}");
        assert!(
            err.contains(&format!("{} is not a checkpoint", elsewhere.display())),
            "{command}: {err}"
        );
        assert!(out.stdout.is_empty(), "{command} prints nothing else");
    }
    // A real checkpoint still lists its events.
    ok(&s.ingest(&[]));
    let checkpoint = s.table().join("_autoloader");
    let listed = ok(&run(
        &[
            "events".into(),
            "--checkpoint".into(),
            checkpoint.display().to_string(),
        ],
        &[],
    ));
    assert!(listed.contains("batch_committed"), "{listed}");
}

/// A table, checkpoint or schema location inside the source folder is never read back as
/// input: the second run adds nothing (it used to read the table's own Parquet files).
#[test]
fn own_table_checkpoint_and_schemas_inside_the_source_are_left_out() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(1, 5));
    let landing = s.landing();
    let table = landing.join("bronze");
    let args = |extra: &[&str]| {
        let mut a: Vec<String> = vec![
            "ingest".into(),
            landing.display().to_string(),
            table.display().to_string(),
            "--once".into(),
            "--checkpoint".into(),
            landing.join("state").display().to_string(),
            "-o".into(),
            format!(
                "cloudFiles.schemaLocation={}",
                landing.join("schemas").display()
            ),
        ];
        a.extend(extra.iter().map(|e| (*e).to_string()));
        a
    };
    let first = run(&args(&[]), &[]);
    ok(&first);
    assert!(
        common::stderr(&first).contains("lies inside the source"),
        "{}",
        common::stderr(&first)
    );
    s.land("b.json", common::orders_jsonl(5, 8));
    for _ in 0..2 {
        ok(&run(&args(&[]), &[]));
    }
    common::assert_table_ids_once(&table, 1..8, "own output never read as input");
    let batches = common::read_table(&table);
    let rescued = common::column_strings(&batches, "_rescued_data");
    assert!(
        rescued.iter().all(|r| r.is_empty() || r == "null"),
        "nothing rescued: {rescued:?}"
    );
}

/// A source that is the table, or lies inside it (a VACUUM would delete landing files), is
/// refused with exit 2 before anything is written.
#[test]
fn a_source_inside_its_own_table_is_refused() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(1, 2));
    let landing = s.landing().display().to_string();
    let inner = s.dir.path().join("t/landing");
    fs::create_dir_all(&inner).unwrap();
    fs::write(inner.join("a.json"), common::orders_jsonl(1, 2)).unwrap();
    for (source, table, needle) in [
        (
            landing.clone(),
            landing.clone(),
            "is the source folder itself",
        ),
        (
            inner.display().to_string(),
            s.dir.path().join("t").display().to_string(),
            "lies inside the stream's table",
        ),
    ] {
        let out = run(
            &["ingest".into(), source, table.clone(), "--once".into()],
            &[],
        );
        assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
        assert!(
            common::stderr(&out).contains(needle),
            "{}",
            common::stderr(&out)
        );
        assert!(
            !std::path::Path::new(&table).join("_delta_log").exists(),
            "nothing written"
        );
    }
}

/// A checkpoint remembers its schema location: a run that gives another one (or omits it,
/// so the default differs) is refused with exit 2 naming both, instead of inferring a
/// fresh `_schemas/0`.
#[test]
fn a_checkpoint_refuses_another_schema_location() {
    let s = Scratch::new();
    s.land("a.json", common::orders_jsonl(1, 3));
    let schemas = s.dir.path().join("schemas");
    let with = format!("cloudFiles.schemaLocation={}", schemas.display());
    ok(&s.ingest(&[&with]));
    s.land("b.json", common::orders_jsonl(3, 5));
    let other = s.dir.path().join("elsewhere");
    for out in [
        s.ingest(&[]),
        s.ingest(&[&format!("cloudFiles.schemaLocation={}", other.display())]),
    ] {
        let err = common::stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(&schemas.display().to_string()), "{err}");
        assert!(err.contains("schemaLocation"), "{err}");
    }
    assert!(!other.join("_schemas").exists(), "no fresh schema inferred");
    // The same location, spelled another way, is the same.
    let dotted = format!("cloudFiles.schemaLocation={}/../schemas", schemas.display());
    ok(&s.ingest(&[&dotted]));
    s.assert_ids_once(1..5, "the stream went on");
}
