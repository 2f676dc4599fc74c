//! The module layout that ARCHITECTURE.md describes: no import cycle between the crate's
//! top-level modules, so each stage can be read (and replaced) from the bottom up.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// `crate::X` references of each top-level module of `src/`, outside test code.
fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if !rel.ends_with(".rs") || rel == "main.rs" || rel == "lib.rs" {
                continue;
            }
            let top = rel
                .split('/')
                .next()
                .unwrap()
                .trim_end_matches(".rs")
                .to_string();
            let text = fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap();
            let deps = graph.entry(top.clone()).or_default();
            for (i, _) in code.match_indices("crate::") {
                let name: String = code[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if !name.is_empty() && name != top {
                    deps.insert(name);
                }
            }
        }
    }
    graph
}

#[test]
fn top_level_modules_import_no_cycle() {
    let graph = import_graph();
    assert!(
        graph.contains_key("pipeline") && graph.contains_key("source"),
        "{graph:?}"
    );
    // Depth-first search for a back edge; the path names the cycle.
    fn visit<'a>(
        node: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) {
        if let Some(at) = path.iter().position(|n| *n == node) {
            panic!("import cycle: {} -> {node}", path[at..].join(" -> "));
        }
        if !done.insert(node) {
            return;
        }
        path.push(node);
        for dep in graph.get(node).into_iter().flatten() {
            visit(dep, graph, path, done);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        visit(node, &graph, &mut Vec::new(), &mut done);
    }
}
