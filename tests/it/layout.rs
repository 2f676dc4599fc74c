//! The module layout ARCHITECTURE.md describes: no file of `src/` imports, through any
//! path, a file that imports it back, and no top-level module does; so each file can be
//! read (and replaced) from the bottom up.
//!
//! A small reader of Rust's paths, not a compiler: comments, strings and `#[cfg(test)]`
//! items are blanked; every `use` tree and every inline `crate::`, `super::`, `self::` and
//! `autoloader::` path is resolved to the file that defines its module; a name a module
//! re-exports (`pub use child::Name`, or a glob re-export) is followed to the file that
//! defines it, so a re-export is a name, not an edge. `lib.rs` and `main.rs` only declare
//! modules, and are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// The library (`lib.rs`) or the binary (`main.rs` and `cli/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Crate {
    Lib,
    Bin,
}

type ModPath = Vec<String>;
/// A module of one crate.
type ModKey = (Crate, ModPath);

/// Every source file with what the graph needs of it.
struct Tree {
    /// Module to the file (relative to `src/`) that defines it.
    files: BTreeMap<ModKey, String>,
    /// Module to its re-exports: the name it exports and the path it came from.
    reexports: BTreeMap<ModKey, Vec<(String, ModPath)>>,
    /// Module to the modules it glob re-exports (`pub use rows::*`).
    glob_reexports: BTreeMap<ModKey, Vec<ModPath>>,
    /// File to the item names it defines.
    defines: BTreeMap<String, BTreeSet<String>>,
    /// File to the paths it uses (anchored at its module), with the text that uses it.
    uses: BTreeMap<String, Vec<(ModPath, String)>>,
}

/// File to the files it imports, each with the path that causes the edge.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

fn module_of(rel: &str) -> ModKey {
    let krate = if rel == "main.rs" || rel.starts_with("cli/") {
        Crate::Bin
    } else {
        Crate::Lib
    };
    let mut path: ModPath = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if matches!(
        path.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        path.pop();
    }
    (krate, path)
}

/// The text with comments, string and char literals blanked (lengths kept).
fn blank_literals(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, s: &[char]| {
        for ch in s {
            out.push(if *ch == '\n' { '\n' } else { ' ' });
        }
    };
    while i < c.len() {
        let rest = &c[i..];
        let starts = |p: &str| rest.iter().take(p.len()).copied().eq(p.chars());
        let ident_before = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        let end = if starts("//") {
            rest.iter().position(|ch| *ch == '\n').unwrap_or(rest.len())
        } else if starts("/*") {
            let mut depth = 0;
            let mut j = 0;
            loop {
                if j + 1 >= rest.len() {
                    break rest.len();
                }
                if rest[j] == '/' && rest[j + 1] == '*' {
                    depth += 1;
                    j += 2;
                } else if rest[j] == '*' && rest[j + 1] == '/' {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break j;
                    }
                } else {
                    j += 1;
                }
            }
        } else if !ident_before
            && (starts("r\"") || starts("r#") || starts("br\"") || starts("br#"))
        {
            let from = rest.iter().position(|ch| *ch == 'r').unwrap() + 1;
            let hashes = rest[from..].iter().take_while(|ch| **ch == '#').count();
            if rest.get(from + hashes) != Some(&'"') {
                0
            } else {
                let close: String = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let body: String = rest[from + hashes + 1..].iter().collect();
                from + hashes
                    + 1
                    + body
                        .find(&close)
                        .map_or(body.len(), |k| body[..k].chars().count() + close.len())
            }
        } else if rest[0] == '"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != '"' {
                j += if rest[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else if rest[0] == '\'' && rest.len() > 2 && (rest[1] == '\\' || rest[2] == '\'') {
            let mut j = if rest[1] == '\\' { 3 } else { 2 };
            while j < rest.len() && rest[j] != '\'' {
                j += 1;
            }
            j + 1
        } else {
            0
        };
        if end == 0 {
            out.push(c[i]);
            i += 1;
        } else {
            let end = end.min(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        }
    }
    out
}

/// The code without `#[cfg(test)]` items (the item is the attribute's next `;` or braced
/// block).
fn without_test_items(code: &str) -> String {
    let mut out = code.to_string();
    while let Some(at) = out.find("#[cfg(test)]") {
        let bytes = out.as_bytes();
        let mut j = at + "#[cfg(test)]".len();
        let mut depth = 0usize;
        let end = loop {
            if j >= bytes.len() {
                break bytes.len();
            }
            match bytes[j] {
                b';' if depth == 0 => break j + 1,
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        break j + 1;
                    }
                }
                _ => {}
            }
            j += 1;
        };
        let blanked: String = out[at..end]
            .chars()
            .map(|ch| if ch == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(at..end, &blanked);
    }
    out
}

fn is_ident(ch: char) -> bool {
    ch.is_alphanumeric() || ch == '_'
}

/// The leaves of a `use` tree: each full path (`*` for a glob) and the name it binds.
fn expand_use(prefix: &[String], tree: &str, out: &mut Vec<(ModPath, String)>) {
    let tree = tree.trim();
    if let Some(brace) = tree.find('{') {
        let mut base = prefix.to_vec();
        base.extend(
            tree[..brace]
                .split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        );
        let inner = &tree[brace + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut depth = 0;
        let mut from = 0;
        for (k, ch) in inner.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_use(&base, &inner[from..k], out);
                    from = k + 1;
                }
                _ => {}
            }
        }
        expand_use(&base, &inner[from..], out);
        return;
    }
    if tree.is_empty() {
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((p, a)) => (p.trim(), Some(a.trim().to_string())),
        None => (tree, None),
    };
    let mut full = prefix.to_vec();
    full.extend(path.split("::").map(|s| s.trim().to_string()));
    if full.last().map(String::as_str) == Some("self") {
        full.pop();
    }
    let name = alias.unwrap_or_else(|| full.last().cloned().unwrap_or_default());
    out.push((full, name));
}

fn read_tree() -> Tree {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    read_tree_at(&src)
}

fn read_tree_at(src: &Path) -> Tree {
    let mut tree = Tree {
        files: BTreeMap::new(),
        reexports: BTreeMap::new(),
        glob_reexports: BTreeMap::new(),
        defines: BTreeMap::new(),
        uses: BTreeMap::new(),
    };
    let mut texts = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path
                    .strip_prefix(src)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                let code = without_test_items(&blank_literals(&fs::read_to_string(&path).unwrap()));
                tree.files.insert(module_of(&rel), rel.clone());
                texts.push((rel, code));
            }
        }
    }
    for (rel, code) in &texts {
        let key = module_of(rel);
        let mut defines = BTreeSet::new();
        let mut uses = Vec::new();
        let words: Vec<(usize, &str)> = code
            .split(|ch: char| !is_ident(ch))
            .scan(0usize, |at, w| {
                let start = *at;
                *at += w.len() + 1;
                Some((start, w))
            })
            .filter(|(_, w)| !w.is_empty())
            .collect();
        for pair in words.windows(2) {
            if matches!(
                pair[0].1,
                "fn" | "struct" | "enum" | "trait" | "const" | "static" | "type" | "union" | "mod"
            ) {
                defines.insert(pair[1].1.to_string());
            }
        }
        // `use` statements.
        let mut in_use = Vec::new();
        for (k, (at, w)) in words.iter().enumerate() {
            if *w != "use" {
                continue;
            }
            let Some(semi) = code[*at..].find(';') else {
                continue;
            };
            in_use.push(*at..*at + semi);
            let body = &code[*at + 3..*at + semi];
            let public = k > 0 && {
                let before = code[..*at].trim_end();
                before.ends_with("pub") || before.ends_with(')') && before.contains("pub(")
            };
            let mut leaves = Vec::new();
            expand_use(&[], body, &mut leaves);
            for (path, name) in leaves {
                let text = format!("use {}", path.join("::"));
                if public && path.last().map(String::as_str) == Some("*") {
                    let mut p = path.clone();
                    p.pop();
                    tree.glob_reexports.entry(key.clone()).or_default().push(p);
                } else if public {
                    tree.reexports
                        .entry(key.clone())
                        .or_default()
                        .push((name, path));
                } else {
                    uses.push((path, text));
                }
            }
        }
        // Inline paths outside `use` statements.
        for (at, w) in &words {
            if in_use.iter().any(|r| r.contains(at)) {
                continue;
            }
            let anchored = matches!(*w, "crate" | "super" | "self" | "autoloader");
            let child = {
                let mut m = key.1.clone();
                m.push(w.to_string());
                tree.files.contains_key(&(key.0, m))
            };
            let starts_path =
                code[*at + w.len()..].starts_with("::") && !code[..*at].ends_with("::");
            if (anchored || child) && starts_path {
                let end = code[*at..]
                    .find(|ch: char| !(is_ident(ch) || ch == ':'))
                    .map_or(code.len(), |e| at + e);
                let path: ModPath = code[*at..end]
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                let text = code[*at..end].to_string();
                uses.push((path, text));
            }
        }
        tree.defines.insert(rel.clone(), defines);
        tree.uses.insert(rel.clone(), uses);
    }
    tree
}

impl Tree {
    /// The file a path used in module `from` leads to; `None` for another crate's path.
    fn resolve(&self, from: &ModKey, path: &[String], depth: usize) -> Option<String> {
        if depth > 8 || path.is_empty() {
            return None;
        }
        let (mut krate, mut module) = from.clone();
        let first = path[0].as_str();
        match first {
            "crate" => module.clear(),
            "autoloader" => {
                krate = Crate::Lib;
                module.clear();
            }
            "super" => {
                module.pop();
            }
            "self" => {}
            _ => {
                let mut child = module.clone();
                child.push(first.to_string());
                if !self.files.contains_key(&(krate, child)) {
                    return None;
                }
                module.push(first.to_string());
            }
        }
        for seg in &path[1..] {
            match seg.as_str() {
                "super" => {
                    module.pop();
                    continue;
                }
                "self" | "*" => continue,
                _ => {}
            }
            let mut child = module.clone();
            child.push(seg.clone());
            if self.files.contains_key(&(krate, child.clone())) {
                module = child;
                continue;
            }
            // An item of `module`: defined there, or re-exported from elsewhere.
            let key = (krate, module.clone());
            if let Some(p) = self
                .reexports
                .get(&key)
                .and_then(|r| r.iter().find(|(name, _)| name == seg))
                .map(|(_, p)| p)
            {
                return self.resolve(&key, p, depth + 1);
            }
            let file = self.files.get(&key)?;
            if !self.defines[file].contains(seg.as_str()) {
                for glob in self.glob_reexports.get(&key).into_iter().flatten() {
                    let mut p = glob.clone();
                    p.push(seg.clone());
                    if let Some(found) = self.resolve(&key, &p, depth + 1)
                        && self.defines[&found].contains(seg.as_str())
                    {
                        return Some(found);
                    }
                }
            }
            return Some(file.clone());
        }
        self.files.get(&(krate, module)).cloned()
    }

    fn graph(&self) -> Graph {
        let mut graph = Graph::new();
        for (rel, uses) in &self.uses {
            if rel == "lib.rs" || rel == "main.rs" {
                continue;
            }
            let from = module_of(rel);
            let deps = graph.entry(rel.clone()).or_default();
            for (path, text) in uses {
                if let Some(to) = self.resolve(&from, path, 0)
                    && to != *rel
                    && to != "lib.rs"
                    && to != "main.rs"
                {
                    deps.entry(to).or_insert_with(|| text.clone());
                }
            }
        }
        graph
    }
}

/// Every cycle's first back edge found by a depth-first search, as `a -> b -> a` with the
/// path that causes each edge.
fn cycles(graph: &Graph) -> Vec<String> {
    fn visit(
        node: &str,
        graph: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        found: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|n| n == node) {
            let ring: Vec<&String> = path[at..].iter().collect();
            let mut text = String::new();
            for (k, n) in ring.iter().enumerate() {
                let next = ring.get(k + 1).map_or(node, |s| s.as_str());
                text.push_str(&format!("{n} -({})-> ", graph[n.as_str()][next]));
            }
            text.push_str(node);
            found.push(text);
            return;
        }
        if !done.insert(node.to_string()) {
            return;
        }
        path.push(node.to_string());
        for dep in graph.get(node).into_iter().flat_map(|d| d.keys()) {
            visit(dep, graph, path, done, found);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    let mut found = Vec::new();
    for node in graph.keys() {
        visit(node, graph, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

fn top_level(rel: &str) -> String {
    rel.split('/')
        .next()
        .unwrap()
        .trim_end_matches(".rs")
        .to_string()
}

#[test]
fn no_two_files_of_src_import_each_other_through_any_path() {
    let graph = read_tree().graph();
    // The reader sees the edges it must: a sanity check on the reader itself.
    assert!(
        graph["pipeline/stream.rs"].contains_key("checkpoint/mod.rs"),
        "{:?}",
        graph["pipeline/stream.rs"]
    );
    assert!(
        graph["cli/commands.rs"]
            .keys()
            .any(|f| f.starts_with("pipeline/"))
    );
    let found = cycles(&graph);
    assert!(
        found.is_empty(),
        "import cycles between files:\n{}",
        found.join("\n")
    );
}

#[test]
fn top_level_modules_import_no_cycle() {
    let mut graph = Graph::new();
    for (from, deps) in read_tree().graph() {
        let entry = graph.entry(top_level(&from)).or_default();
        for (to, why) in deps {
            if top_level(&to) != top_level(&from) {
                entry
                    .entry(top_level(&to))
                    .or_insert_with(|| format!("{from}: {why}"));
            }
        }
    }
    assert!(graph.contains_key("pipeline") && graph.contains_key("source"));
    let found = cycles(&graph);
    assert!(
        found.is_empty(),
        "import cycles between modules:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_planted_cycle_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    fs::create_dir_all(src.join("a")).unwrap();
    fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\n").unwrap();
    fs::write(
        src.join("a/mod.rs"),
        "mod inner;\npub use inner::Thing;\n// use crate::b::Other;\npub struct Mine;\n",
    )
    .unwrap();
    fs::write(
        src.join("a/inner.rs"),
        "use crate::b::{self, Other as O};\npub struct Thing;\n#[cfg(test)]\nmod tests { use super::super::Mine; }\n",
    )
    .unwrap();
    fs::write(
        src.join("b.rs"),
        "pub struct Other;\nfn f() { let s = \"crate::a::Mine\"; let _ = crate::a::Thing; }\n",
    )
    .unwrap();
    let graph = read_tree_at(src).graph();
    // The re-export leads to `a/inner.rs`; the comment, the string and the test module
    // are not edges.
    assert_eq!(
        graph["b.rs"].keys().collect::<Vec<_>>(),
        vec!["a/inner.rs"],
        "{graph:?}"
    );
    assert!(graph["a/mod.rs"].is_empty(), "{graph:?}");
    let found = cycles(&graph);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("a/inner.rs -(use crate::b)-> b.rs"),
        "{found:?}"
    );
}
