//! A ONCE flow (`once = true`, Lakeflow's `INSERT INTO ONCE`): what makes a stream one,
//! the `txn` app id its completion is recorded under, and which commits a rerun starts
//! from. Running it is `pipeline/once.rs`.

use serde_json::Value;

/// What makes a stream a ONCE flow, from its config. Its definition is the stream's
/// (`IngestRequest::definition`): a change means the data would differ.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OnceFlow {
    /// `--rerun-once NAME`: run it again even though it completed.
    pub rerun: bool,
}

/// The Delta `txn` app id recording a ONCE flow's completion.
pub fn app_id(name: &str) -> String {
    format!("autoloader-once-{name}")
}

/// The commits a fresh checkpoint of stream `name` is rebuilt from: those after its last
/// ONCE rerun record (earlier ones are the run it replaces).
pub fn since_rerun(name: &str, commits: Vec<(u64, Value)>) -> Vec<(u64, Value)> {
    let rerun = |c: &Value| {
        c.get("once").is_some_and(|o| {
            o.get("name").and_then(Value::as_str) == Some(name) && o.get("rerun").is_some()
        })
    };
    match commits.iter().rposition(|(_, c)| rerun(c)) {
        Some(at) => commits.into_iter().skip(at + 1).collect(),
        None => commits,
    }
}
