//! Bad input: malformed records are kept, unreadable files stop the run naming the file
//! (or are skipped and recorded with ignoreCorruptFiles), empty files ingest nothing.

use crate::common::{self, Scratch, column_strings, ok, read_table, summary_figure};

#[test]
fn malformed_json_lines_are_kept_raw_in_rescued_data() {
    let s = Scratch::new();
    s.land(
        "a.json",
        "\u{feff}{\"id\": 1}\n{\"id\": 2, broken\n\n42\n{\"id\": 3}\r\n",
    );
    let out = ok(&s.ingest(&[]));
    assert_eq!(summary_figure(&out, "rows"), 4);
    assert_eq!(summary_figure(&out, "rescued rows"), 2);
    let batches = read_table(&s.table());
    let rescued: Vec<serde_json::Value> = column_strings(&batches, "_rescued_data")
        .into_iter()
        .filter(|v| v != "null")
        .map(|v| serde_json::from_str(&v).unwrap())
        .collect();
    assert_eq!(rescued[0]["_corrupt_record"], "{\"id\": 2, broken");
    assert_eq!(rescued[1]["_corrupt_record"], "42");
    let mut ids = column_strings(&batches, "id");
    ids.sort();
    assert_eq!(ids, vec!["1", "3", "null", "null"]);
}

#[test]
fn failfast_stops_on_a_malformed_record_naming_file_and_line() {
    let s = Scratch::new();
    s.land("a.json", "{\"id\": 1}\nnot json\n");
    let out = s.ingest(&["mode=FAILFAST"]);
    assert_eq!(out.status.code(), Some(1));
    let err = common::stderr(&out);
    assert!(err.contains("a.json line 2: malformed record"), "{err}");
}

#[test]
fn empty_files_ingest_zero_rows() {
    let s = Scratch::new();
    s.land("empty.json", "");
    s.land("blank.json", "\n \n");
    s.land("a.json", "{\"id\": 1}\n");
    let out = ok(&s.ingest(&[]));
    assert_eq!(summary_figure(&out, "files"), 3);
    assert_eq!(summary_figure(&out, "rows"), 1);
}

#[test]
fn a_corrupt_gzip_stops_the_run_naming_it_and_is_not_consumed() {
    let s = Scratch::new();
    s.land("good.json", "{\"id\": 1}\n");
    let mut gz = vec![0x1f, 0x8b, 0x08, 0x00];
    gz.extend_from_slice(b"definitely not deflate data at all");
    s.land("bad.json.gz", &gz);
    let out = s.ingest(&["cloudFiles.format=json"]);
    assert_eq!(out.status.code(), Some(1));
    let err = common::stderr(&out);
    assert!(
        err.contains("bad.json.gz"),
        "the error names the file: {err}"
    );
    // Nothing of the failed batch landed, and it keeps failing (the file is unconsumed).
    let again = s.ingest(&["cloudFiles.format=json"]);
    assert_eq!(again.status.code(), Some(1));
    // With ignoreCorruptFiles the file is skipped, recorded, and the rest lands.
    let out = ok(&s.ingest(&["cloudFiles.format=json", "ignoreCorruptFiles=true"]));
    assert_eq!(summary_figure(&out, "skipped files"), 1);
    assert_eq!(column_strings(&read_table(&s.table()), "id"), vec!["1"]);
    let log =
        std::fs::read_to_string(s.table().join("_delta_log/00000000000000000001.json")).unwrap();
    assert!(
        log.contains("\"path\":\"bad.json.gz\",\"size\":38,\"mtimeMs\""),
        "{log}"
    );
    assert!(log.contains("\"skipped\":true"), "{log}");
}

#[test]
fn concatenated_gzip_members_are_all_read() {
    use std::io::Write;
    let mut data = Vec::new();
    for i in 0..3 {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(format!("{{\"id\": {i}}}\n").as_bytes())
            .unwrap();
        data.extend(enc.finish().unwrap());
    }
    let s = Scratch::new();
    s.land("multi.json.gz", data);
    let out = ok(&s.ingest(&[]));
    assert_eq!(summary_figure(&out, "rows"), 3);
}

#[test]
fn csv_ragged_rows_keep_every_value() {
    let s = Scratch::new();
    s.land(
        "a.csv",
        "id,name\r\n1,ann\r\n2\r\n3,bob,extra\r\n\"4\",\"quoted, comma\"\r\n",
    );
    let out = ok(&s.ingest(&[]));
    assert_eq!(summary_figure(&out, "rows"), 4);
    let batches = read_table(&s.table());
    let names = column_strings(&batches, "name");
    assert!(names.contains(&"quoted, comma".to_string()), "{names:?}");
    assert!(
        names.contains(&"null".to_string()),
        "a short row has nulls: {names:?}"
    );
    let rescued: Vec<String> = column_strings(&batches, "_rescued_data")
        .into_iter()
        .filter(|v| v != "null")
        .collect();
    assert_eq!(rescued.len(), 1);
    assert!(
        rescued[0].contains("\"_corrupt_record\":\"3,bob,extra\""),
        "{rescued:?}"
    );
}
