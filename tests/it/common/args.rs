//! Command lines for the binary, built the same way in every test file.

use super::Scratch;

/// `ingest <landing> <table> --once -o <option>...` for a scratch area.
pub fn ingest_args(s: &Scratch, options: &[impl AsRef<str>]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "ingest".into(),
        s.landing().display().to_string(),
        s.table().display().to_string(),
        "--once".into(),
    ];
    for o in options {
        args.push("-o".into());
        args.push(o.as_ref().to_string());
    }
    args
}
