//! A CDC flow reads the next batches' files while a batch commits (`pipeline/ahead.rs`):
//! a read is used when it still stands, thrown away when the schema moved, and a death
//! during it loses nothing.

use std::os::unix::process::ExitStatusExt;

use crate::cdc::{cdc_options, ingest_args};
use crate::common::{Scratch, ok, run, stderr, table_rows};

const USED: &str = "The batch's files were read while the batch before it committed.";
/// A read started beside one commit and picked up, still going or done, by the next.
const GOING: &str = "The next batch's files have been read since the commit before this one.";

/// 12 files of 10 change records each over keys 0..30 (upserts, deletes, late records);
/// from `drift_at` on, the records carry a new column `country`.
fn files(drift_at: usize) -> Vec<String> {
    (0..12u64)
        .map(|f| {
            (0..10u64)
                .map(|r| {
                    let key = (f * 7 + r * 13) % 30;
                    // The first record of an odd file is late: sequenced inside the file
                    // before it.
                    let seq = if r == 0 && f % 2 == 1 {
                        f * 10 - 5
                    } else {
                        f * 10 + (r * 3) % 10
                    };
                    let op = if (key + f) % 9 == 0 { "DELETE" } else { "UPSERT" };
                    let country = if f as usize >= drift_at {
                        format!(r#", "country": "k{}""#, (key + f) % 4)
                    } else {
                        String::new()
                    };
                    format!(
                        r#"{{"userId": {key}, "name": "n{f}", "city": "c{r}", "operation": "{op}", "sequenceNum": {seq}{country}}}"#
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
                + "\n"
        })
        .collect()
}

fn land(s: &Scratch, files: &[String]) {
    for (i, f) in files.iter().enumerate() {
        s.land(&format!("{i:03}.json"), f);
    }
}

fn one_file_batches() -> Vec<String> {
    [
        cdc_options(false),
        vec!["cloudFiles.maxFilesPerTrigger=1".into()],
    ]
    .concat()
}

/// The table one run per file gives: no batch of those has a next one to read ahead.
fn run_per_file(files: &[String]) -> (Vec<String>, Vec<String>) {
    let s = Scratch::new();
    for (i, f) in files.iter().enumerate() {
        s.land(&format!("{i:03}.json"), f);
        ok(&run(&ingest_args(&s, &one_file_batches(), &[]), &[]));
    }
    table_rows(&s.table(), &[])
}

/// Lands `files` and ingests them all in one run of one-file batches (with `extra`
/// options); its debug log.
fn run_all_logged(s: &Scratch, files: &[String], extra: &[&str]) -> String {
    land(s, files);
    let out = run(
        &ingest_args(s, &one_file_batches(), extra),
        &[("RUST_LOG", "autoloader=debug")],
    );
    ok(&out);
    stderr(&out)
}

#[test]
fn each_batch_uses_the_read_made_while_the_one_before_committed() {
    let files = files(usize::MAX);
    let s = Scratch::new();
    let log = run_all_logged(&s, &files, &[]);
    assert_eq!(log.matches(USED).count(), files.len() - 1, "{log}");
    // From the third batch on, each batch's read began two commits before it.
    assert_eq!(log.matches(GOING).count(), files.len() - 2, "{log}");
    assert_eq!(table_rows(&s.table(), &[]), run_per_file(&files));
}

#[test]
fn a_new_column_in_a_batch_read_ahead_evolves_the_schema_and_reads_it_again() {
    // Files 5 to 8 bring `country`, and the schema is inferred from the newest three
    // files only (9 to 11, without it): file 5's read, made ahead with the old schema,
    // stops at the new column; the batch evolves and reads the file again; file 6's
    // read, begun with the old schema beside batch 4's commit, is thrown away and made
    // again with the new one.
    let plain = files(usize::MAX);
    let files: Vec<String> = files(5)
        .into_iter()
        .enumerate()
        .map(|(i, f)| if i > 8 { plain[i].clone() } else { f })
        .collect();
    let s = Scratch::new();
    let log = run_all_logged(
        &s,
        &files,
        &["cloudFiles.schemaInference.sampleSize.numFiles=3"],
    );
    assert!(log.contains("Schema evolved: new columns added."), "{log}");
    assert!(log.contains("country"), "{log}");
    let (names, rows) = table_rows(&s.table(), &[]);
    assert!(names.contains(&"country".to_string()), "{names:?}");
    assert!(
        rows.iter().any(|r| r.contains("|k")),
        "no country value landed: {rows:?}"
    );
    assert_eq!((names, rows), run_per_file(&files));
    assert_eq!(log.matches(USED).count(), files.len() - 1, "{log}");
    // File 6's read began with the old schema beside batch 4's commit: thrown away once
    // batch 5 evolved it, and made again beside batch 5's commit.
    assert_eq!(log.matches(GOING).count(), files.len() - 3, "{log}");
}

#[test]
fn a_death_while_the_next_files_are_read_ahead_loses_nothing() {
    // The process dies as file N starts being read, which is while batch N - 1 commits;
    // the rerun must give the table of an uninterrupted run, for every N.
    let files = files(7);
    let expected = run_per_file(&files);
    let mut kills = 0;
    for n in 1..files.len() {
        let s = Scratch::new();
        land(&s, &files);
        let args = ingest_args(&s, &one_file_batches(), &[]);
        let crashed = run(
            &args,
            &[("AUTOLOADER_FAILPOINT", &format!("read:{n:03}.json@1"))],
        );
        if crashed.status.signal() == Some(9) {
            kills += 1;
        } else {
            ok(&crashed);
        }
        ok(&run(&args, &[]));
        assert_eq!(
            table_rows(&s.table(), &[]),
            expected,
            "killed reading file {n}"
        );
    }
    assert_eq!(
        kills,
        files.len() - 1,
        "a read did not kill: the test proved less"
    );
}
