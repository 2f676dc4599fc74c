//! The Kubernetes example (`deploy/keda/`): the Deployment's command line is one the binary
//! runs, against the real moto server, and the KEDA ScaledObject scales that Deployment on
//! the queue the command reads.

use crate::common::moto::{Moto, python_rows, sorted_ids};
use crate::common::{self, ok};
use crate::sqs::Notified;

const DEPLOYMENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/keda/deployment.yaml");
const SCALED_OBJECT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/keda/scaledobject.yaml");

/// The container's `command` and `args` between the `autoloader-command-begin` and `-end`
/// marks: `command: ["x"]` then `args:` with one `- item` a line.
fn command_line(yaml: &str) -> Vec<String> {
    let begin = yaml
        .find("# autoloader-command-begin")
        .expect("the begin mark");
    let end = yaml.find("# autoloader-command-end").expect("the end mark");
    let mut out = Vec::new();
    for line in yaml[begin..end].lines().skip(1) {
        let line = line.trim();
        if let Some(list) = line.strip_prefix("command:") {
            let list = list.trim().trim_start_matches('[').trim_end_matches(']');
            out.extend(list.split(',').map(|s| unquote(s.trim())));
        } else if let Some(item) = line.strip_prefix("- ") {
            out.push(unquote(item.trim()));
        } else {
            assert!(
                line == "args:" || line.is_empty() || line.starts_with('#'),
                "an unexpected line between the marks: {line}"
            );
        }
    }
    out
}

fn unquote(s: &str) -> String {
    s.trim_matches('"').to_string()
}

/// The value of the first `key: value` (or `- key: value`) line from the first line
/// containing `after`.
fn value_after(yaml: &str, after: &str, key: &str) -> String {
    let from = yaml
        .find(after)
        .unwrap_or_else(|| panic!("{after} in the YAML"));
    yaml[from..]
        .lines()
        .find_map(|l| {
            let l = l.trim();
            l.strip_prefix("- ")
                .unwrap_or(l)
                .strip_prefix(&format!("{key}:"))
        })
        .map(|v| unquote(v.trim()))
        .unwrap_or_else(|| panic!("{key} after {after}"))
}

#[test]
fn the_keda_deployment_runs_a_worker_that_lands_the_queue_s_files() {
    let deployment = std::fs::read_to_string(DEPLOYMENT).unwrap();
    let scaled = std::fs::read_to_string(SCALED_OBJECT).unwrap();
    let command = command_line(&deployment);
    assert_eq!(command[0], "autoloader", "{command:?}");
    assert_eq!(command[1], "ingest", "{command:?}");
    assert!(
        command.windows(2).any(|w| w == ["--worker", "auto"]),
        "{command:?}"
    );
    // KEDA scales this Deployment on the queue its pods read.
    let name = value_after(&deployment, "metadata:", "name");
    assert_eq!(value_after(&scaled, "scaleTargetRef:", "name"), name);
    assert_eq!(value_after(&scaled, "triggers:", "type"), "aws-sqs-queue");
    let queue_url = value_after(&deployment, "name: QUEUE_URL", "value");
    assert_eq!(value_after(&scaled, "triggers:", "queueURL"), queue_url);

    // The command line, with the test's bucket and queue for the pod's variables, drains
    // the queue into the table (`--once`: the pod's watcher, one pass).
    let moto = Moto::start();
    let q = Notified::setup(&moto, "deploy-lake", "deploy-orders", "landing/orders/");
    let state = tempfile::tempdir().unwrap();
    let args: Vec<String> = command[1..]
        .iter()
        .map(|a| {
            a.replace("$(BUCKET)", "deploy-lake")
                .replace("$(QUEUE_URL)", &q.queue)
        })
        .chain(["--once".to_string()])
        .collect();
    let run = || {
        let mut env: Vec<(&str, String)> = moto.env();
        env.push(("AUTOLOADER_STATE_DIR", state.path().display().to_string()));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        common::run(&args, &env)
    };
    // The first start lists the (empty) prefix; then files arrive through the queue.
    ok(&run());
    for i in 0..3u64 {
        moto.put(
            "deploy-lake",
            &format!("landing/orders/{i}.json"),
            common::orders_jsonl(i * 10, i * 10 + 10),
        );
    }
    ok(&run());
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://deploy-lake/bronze/orders")),
        (0..30).collect::<Vec<_>>()
    );
    assert_eq!(q.depth(&q.queue), (0, 0), "the queue is empty");
}
