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
