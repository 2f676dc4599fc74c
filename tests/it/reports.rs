//! The report commands (`status`, `events`, `schema`, `drift`): what they accept and what
//! they show, on local tables (S3 ones are in `s3.rs`).

use crate::common::{self, Scratch, ok};

fn run(args: &[&str]) -> std::process::Output {
    let args: Vec<String> = args.iter().map(|a| (*a).to_string()).collect();
    common::run(&args, &[])
}

/// A table with two batches, the second with a rescued value (`amount` is a DOUBLE).
fn table_with_rescued_data(s: &Scratch) {
    s.land("1.json", "{\"order_id\": 1, \"amount\": 1.5}\n");
    ok(&s.ingest(&["cloudFiles.inferColumnTypes=true"]));
    s.land("2.json", "{\"order_id\": 2, \"amount\": \"oops\"}\n");
    ok(&s.ingest(&["cloudFiles.inferColumnTypes=true"]));
}

#[test]
fn since_takes_days_and_weeks_as_the_help_shows() {
    let s = Scratch::new();
    table_with_rescued_data(&s);
    let table = s.table().display().to_string();
    for since in ["7d", "1w", "2 weeks", "36h"] {
        let out = ok(&run(&["drift", &table, "--since", since, "--json"]));
        let report: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(report["days"][0]["rows"], 2, "--since {since}: {report}");
        assert_eq!(report["keys"][0]["key"], "amount", "--since {since}");
    }
    // A time after the rows: nothing.
    let out = ok(&run(&["drift", &table, "--since", "2099-01-01", "--json"]));
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["days"], serde_json::json!([]), "{report}");
    let ckpt = s.table().join("_autoloader").display().to_string();
    let out = ok(&run(&[
        "events",
        "--checkpoint",
        &ckpt,
        "--type",
        "batch_committed",
        "--since",
        "2w",
        "--json",
    ]));
    assert_eq!(out.lines().count(), 2, "{out}");
    // A unit it does not know, or none: a usage error naming the units.
    for bad in ["7y", "7"] {
        let out = run(&["drift", &table, "--since", bad]);
        assert_eq!(out.status.code(), Some(2), "--since {bad}");
        let err = common::stderr(&out);
        assert!(
            err.contains(&format!("--since \"{bad}\"")) && err.contains("s, m, h, d or w"),
            "{err}"
        );
    }
}

#[test]
fn drift_refuses_a_folder_that_is_not_a_table_and_creates_nothing() {
    let s = Scratch::new();
    let missing = s.dir.path().join("nothing");
    let out = run(&["drift", &missing.display().to_string()]);
    assert!(!out.status.success());
    let err = common::stderr(&out);
    assert!(
        err.contains(&missing.display().to_string()) && err.contains("not a Delta table"),
        "{err}"
    );
    assert!(!missing.exists(), "the report created no folder");
}
