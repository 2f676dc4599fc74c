//! The docs (`README.md`, `docs/`) cannot drift from the code: every `sh`, `bash` and
//! `toml` block is run by a test as printed (found by scanning the tests' source for
//! `common::doc_block` calls), every relative link resolves, and the reference pages
//! (`docs/reference/`) are the code's catalogue rendered again. `UPDATE_DOCS=1 cargo test
//! --release docs::` rewrites the reference instead of failing. The examples no other
//! module runs are run here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::moto::{Moto, python_rows, sorted_ids};
use crate::common::{self, Scratch, doc_block, ok, run_doc_sh};

/// The languages whose blocks must be run by a test.
const RUN: &[&str] = &["sh", "bash", "shell", "toml"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir` ending in `ext`, recursively, relative to the repository root.
fn files(dir: &str, ext: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![root().join(dir)];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == ext) {
                let rel = p.strip_prefix(root()).unwrap();
                out.push(rel.to_str().unwrap().to_string());
            }
        }
    }
    out.sort();
    out
}

/// `README.md` and every page under `docs/`.
fn pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_string()];
    pages.extend(files("docs", "md"));
    pages
}

/// A fenced block: its page, the line of its opening fence (1-based), its language.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Block {
    page: String,
    line: usize,
    lang: String,
}

fn blocks(page: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open = false;
    for (i, l) in common::doc_page(page).lines().enumerate() {
        if let Some(rest) = l.strip_prefix("```") {
            if !open {
                out.push(Block {
                    page: page.to_string(),
                    line: i + 1,
                    lang: rest.trim().to_string(),
                });
            }
            open = !open;
        }
    }
    out
}

/// The opening line of the block `doc_block(page, heading, lang)` returns, as it finds it.
fn resolve(page: &str, heading: &str, lang: &str) -> Option<usize> {
    let text = common::doc_page(page);
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().position(|l| l.starts_with(heading))?;
    let fence = format!("```{lang}");
    (at + 1..lines.len())
        .find(|&i| lines[i] == fence)
        .map(|i| i + 1)
}

/// Reads a Rust string literal at the start of `s` (after whitespace and a comma): its
/// value and the rest of `s`.
fn literal(s: &str) -> Option<(String, &str)> {
    let s = s.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
    let mut chars = s.strip_prefix('"')?.char_indices();
    let mut value = String::new();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => value.push(chars.next()?.1),
            '"' => return Some((value, &s[i + 2..])),
            c => value.push(c),
        }
    }
    None
}

/// Every `doc_block("page", "heading", "lang")` call in the tests' source.
fn doc_block_calls() -> BTreeSet<(String, String, String)> {
    let mut calls = BTreeSet::new();
    for file in files("tests", "rs") {
        let source: String = std::fs::read_to_string(root().join(&file))
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .map(|l| format!("{l}\n"))
            .collect();
        for piece in source.split("doc_block(").skip(1) {
            let Some((page, rest)) = literal(piece) else {
                continue;
            };
            let Some((heading, rest)) = literal(rest) else {
                continue;
            };
            let Some((lang, _)) = literal(rest) else {
                continue;
            };
            calls.insert((page, heading, lang));
        }
    }
    calls
}

/// Every `sh`, `bash` and `toml` block of the docs is one that a test reads through
/// `common::doc_block` (and so runs); every block has a language, `text` for output and
/// illustrations. A block added without a test, or a test whose block moved, fails here.
#[test]
fn every_command_and_config_block_of_the_docs_is_run_by_a_test() {
    let mut tested = BTreeSet::new();
    let mut problems = Vec::new();
    for (page, heading, lang) in doc_block_calls() {
        match resolve(&page, &heading, &lang) {
            Some(line) => {
                tested.insert((page, line));
            }
            None => problems.push(format!(
                "a test reads a {lang} block after {heading:?} in {page}, which has none"
            )),
        }
    }
    for page in pages() {
        for b in blocks(&page) {
            if b.lang.is_empty() {
                problems.push(format!(
                    "{}:{}: a block without a language (tag output `text`)",
                    b.page, b.line
                ));
            } else if RUN.contains(&b.lang.as_str()) && !tested.contains(&(b.page.clone(), b.line))
            {
                problems.push(format!(
                    "{}:{}: no test runs this {} block: read it with \
                     common::doc_block(page, heading, lang) in a test (the first block of \
                     its language after a line starting with heading), or tag it `text` if \
                     it is not meant to run",
                    b.page, b.line, b.lang
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, punctuation but `-` and `_`
/// dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(page: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(page).unwrap();
    let mut open = false;
    let mut out = BTreeSet::new();
    for l in text.lines() {
        if l.starts_with("```") {
            open = !open;
        } else if !open && l.starts_with('#') {
            out.insert(anchor(l.trim_start_matches('#')));
        }
    }
    out
}

/// Every relative link of the docs (`[text](path)`, `[text](path#anchor)`, `(#anchor)`)
/// names a file of the repository, and a heading of it where it names one.
#[test]
fn every_relative_link_of_the_docs_resolves() {
    let mut problems = Vec::new();
    for page in pages() {
        let text = common::doc_page(&page);
        let dir = root().join(&page).parent().unwrap().to_path_buf();
        for piece in text.split("](").skip(1) {
            let Some(target) = piece.split(')').next() else {
                continue;
            };
            if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target, None),
            };
            let file: PathBuf = if path.is_empty() {
                root().join(&page)
            } else {
                dir.join(path)
            };
            if !file.exists() {
                problems.push(format!("{page}: link to {target}: no such file"));
                continue;
            }
            if let Some(fragment) = fragment
                && file.extension().is_some_and(|x| x == "md")
                && !anchors(&file).contains(fragment)
            {
                problems.push(format!("{page}: link to {target}: no such heading"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Compares a generated page with its file, or rewrites the file with `UPDATE_DOCS=1`.
fn generated(page: &str, rendered: &str) {
    let path = root().join(page);
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, rendered).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != rendered {
        let line = committed
            .lines()
            .zip(rendered.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(committed.lines().count().min(rendered.lines().count()));
        panic!(
            "{page} is not what the code renders (first difference at line {}): run \
             UPDATE_DOCS=1 cargo test --release docs:: and commit it",
            line + 1
        );
    }
}

fn header(title: &str, from: &str) -> String {
    format!(
        "# {title}\n\n*Generated from {from}; do not edit: run `UPDATE_DOCS=1 cargo test \
         --release docs::` to refresh it (tests/it/docs.rs).*\n\n"
    )
}

fn autoloader(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_autoloader"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    ok(&out)
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// A section of the options reference: its title, its introduction, and which keys it holds.
type Section = (&'static str, &'static str, fn(&str) -> bool);

/// `docs/reference/options.md`: `autoloader options --json`, by kind of option.
fn render_options() -> String {
    let options: Vec<serde_json::Value> = autoloader(&["options", "--json"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let text = |o: &serde_json::Value, k: &str| o[k].as_str().unwrap_or("").to_string();
    let on_change = |o: &serde_json::Value| match o["onChange"].as_str().unwrap_or("") {
        "fullRefresh" => "needs a full refresh".to_string(),
        "newRowsOnly" => "applies to new rows only".to_string(),
        "runOnly" => "not part of the definition".to_string(),
        other => other.to_string(),
    };
    let mut out = header("Options", "`autoloader options --json`");
    out.push_str(
        "Every key `-o KEY=VALUE` (and a config's `[stream.options]`) takes, with its default \
         and meaning. Keys are case-insensitive. *On change* is what a change to it does to a \
         flow that already ran ([when a flow's definition \
         changes](../guide/maintenance.md#when-a-flows-definition-changes)). Longer notes on \
         some options: [the ingest guide](../guide/ingest.md#options).\n",
    );
    let sections: [Section; 4] = [
        ("Auto Loader options (`cloudFiles.*`)", "", |k: &str| {
            k.starts_with("cloudFiles.")
        }),
        ("Reader options (Spark's names)", "", |k: &str| {
            !k.starts_with("cloudFiles.") && !k.starts_with("cdc.") && !k.starts_with("snapshot.")
        }),
        (
            "CDC: `[stream.cdc]`, or `-o cdc.KEY=VALUE`",
            "In a config file each key is written without `cdc.` in `[stream.cdc]`; on the \
             command line, a list is comma-separated (`-o cdc.keys=id,region`). See \
             [APPLY CHANGES](../guide/cdc.md).\n\n",
            |k: &str| k.starts_with("cdc."),
        ),
        (
            "Snapshots: `[stream.snapshot]`, or `-o snapshot.KEY=VALUE`",
            "In a config file each key is written without `snapshot.` in `[stream.snapshot]`. \
             See [snapshot flows](../guide/snapshots.md).\n\n",
            |k: &str| k.starts_with("snapshot."),
        ),
    ];
    for (title, intro, pick) in &sections {
        out.push_str(&format!("\n## {title}\n\n{intro}"));
        out.push_str("| Option | Default | Meaning | On change |\n|---|---|---|---|\n");
        for o in options.iter().filter(|o| o["supported"] == true) {
            let key = text(o, "key");
            if !pick(&key) {
                continue;
            }
            let aliases: Vec<String> = o["aliases"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|v| format!("`{}`", v.as_str().unwrap()))
                        .collect()
                })
                .unwrap_or_default();
            let mut meaning = text(o, "meaning");
            if !aliases.is_empty() {
                meaning.push_str(&format!(" (alias {})", aliases.join(", ")));
            }
            out.push_str(&format!(
                "| `{key}` | {} | {} | {} |\n",
                cell(&text(o, "default")),
                cell(&meaning),
                on_change(o)
            ));
        }
    }
    out.push_str(
        "\n## Not supported yet\n\nAn Auto Loader or Spark option autoloader does not implement \
         yet is refused (exit 2) saying so and what to do instead, never as if it were a typo \
         (`cloudFiles.validateOptions=false` turns it into a warning).\n\n\
         | Option | What it does on Databricks | Instead |\n|---|---|---|\n",
    );
    for o in options.iter().filter(|o| o["supported"] == false) {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            text(o, "key"),
            cell(&text(o, "meaning")),
            cell(&text(o, "instead"))
        ));
    }
    out
}

/// The subcommands a `--help` lists under `Commands:` (but `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// `docs/reference/cli.md`: every command's `--help`, as clap prints it.
fn render_cli() -> String {
    let mut out = header("Commands", "every command's `--help` (clap)");
    out.push_str(
        "Every command and its flags, as `autoloader COMMAND --help` prints them. \
         `autoloader man` prints the same as a man page.\n",
    );
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    while let Some(cmd) = todo.pop() {
        let mut args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        args.push("--help");
        let help = autoloader(&args);
        let name = std::iter::once("autoloader")
            .chain(cmd.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        out.push_str(&format!(
            "\n## `{name}`\n\n```text\n{}\n```\n",
            help.trim_end()
        ));
        for sub in subcommands(&help).into_iter().rev() {
            let mut next = cmd.clone();
            next.push(sub);
            todo.push(next);
        }
    }
    out
}

/// `docs/reference/events.md`: the event kinds declared in `event_kinds!` (found wherever
/// it lives under `src/`), each with its doc comment.
fn render_events() -> String {
    let source = files("src", "rs")
        .into_iter()
        .map(|f| std::fs::read_to_string(root().join(f)).unwrap())
        .find(|s| s.contains("\nevent_kinds! {"))
        .expect("src/ declares the event kinds with event_kinds!");
    let list = source
        .split("\nevent_kinds! {")
        .nth(1)
        .unwrap()
        .split("\n}")
        .next()
        .unwrap();
    let mut out = header("Event kinds", "the `event_kinds!` list in the source");
    out.push_str(
        "Each stream writes one JSON object per line to `<checkpoint>/events.jsonl` \
         ([hearing about drift](../guide/monitoring.md)); its fields are in \
         [`schemas/event.schema.json`](../../schemas/event.schema.json). \
         `autoloader events TABLE --type KIND` picks one kind.\n\n\
         | Type | When |\n|---|---|\n",
    );
    let mut doc = Vec::new();
    for l in list.lines().map(str::trim) {
        if let Some(d) = l.strip_prefix("///") {
            doc.push(d.trim().to_string());
        } else if let Some((_, rest)) = l.split_once(" = \"") {
            let name = rest.split('"').next().unwrap();
            out.push_str(&format!("| `{name}` | {} |\n", cell(&doc.join(" "))));
            doc.clear();
        }
    }
    out
}

/// The reference pages are what the code renders now.
#[test]
fn the_generated_reference_matches_the_code() {
    generated("docs/reference/options.md", &render_options());
    generated("docs/reference/cli.md", &render_cli());
    generated("docs/reference/events.md", &render_events());
}

/// The CDC guide names every `cdc.*` key the option parser takes, so a reader finds the
/// command-line keys where the flow is explained.
#[test]
fn the_cdc_guide_lists_every_cdc_key() {
    let guide = common::doc_page("docs/guide/cdc.md");
    for line in autoloader(&["options", "--json"]).lines() {
        let o: serde_json::Value = serde_json::from_str(line).unwrap();
        let key = o["key"].as_str().unwrap();
        if key.starts_with("cdc.") {
            assert!(guide.contains(&format!("`{key}`")), "cdc.md lacks {key}");
        }
    }
}

/// Copies the bundled fixtures `fixtures/orders/KIND` into `dir/to` (created).
fn land_orders(dir: &Path, kind: &str, to: &str) {
    let landing = dir.join(to);
    std::fs::create_dir_all(&landing).unwrap();
    for f in std::fs::read_dir(root().join("fixtures/orders").join(kind)).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, landing.join(f.file_name().unwrap())).unwrap();
    }
}

/// The README's config (a JSON and a CSV stream into `bronze/orders`) in `dir`, with its
/// landing folders filled from the fixtures, and `extra` appended to the file.
fn readme_config(dir: &Path, extra: &str) -> PathBuf {
    land_orders(dir, "json", "landing/app/orders");
    land_orders(dir, "csv", "landing/partner/orders");
    let config = dir.join("streams.toml");
    let block = doc_block("README.md", "## Many streams from one file", "toml");
    std::fs::write(&config, format!("{block}\n{extra}")).unwrap();
    config
}

/// `autoloader table show TABLE --json`'s properties.
fn properties(table: &Path) -> serde_json::Value {
    let shown: serde_json::Value = serde_json::from_str(&autoloader(&[
        "table",
        "show",
        table.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    shown["properties"].clone()
}

/// The README's "Try it": the first run ingests the bundled orders and a second ingests
/// nothing; the drift loop lands the 3 a.m. incident file by file and `drift` names the
/// rescued `amount`; the test command is the one CI runs.
#[test]
fn the_readme_try_it_commands_run() {
    let s = Scratch::new();
    let dir = s.dir.path();
    let first = doc_block("README.md", "## Try it", "sh");
    let out = ok(&run_doc_sh(&first, dir, &[]));
    assert!(out.contains("ingested 3 files, 15 rows"), "{out}");
    let again = ok(&run_doc_sh(&first, dir, &[]));
    assert!(again.contains("ingested 0 files, 0 rows"), "{again}");
    let drift = doc_block(
        "README.md",
        "files one at a time to watch the schema evolve",
        "sh",
    );
    let out = ok(&run_doc_sh(&drift, dir, &[]));
    assert!(out.contains("+coupon_code STRING"), "{out}");
    let rescued = out
        .lines()
        .skip_while(|l| !l.starts_with("rescued key"))
        .nth(1)
        .unwrap_or_default();
    assert!(rescued.starts_with("amount "), "{out}");
    let tests = doc_block("README.md", "Run the tests (they also read", "sh");
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|l| l == tests.trim_end()),
        ".ci/run runs the README's test command as printed: {tests}"
    );
}

/// The ingest guide's examples: typed inference with pinned columns, and a CSV stream with
/// semicolons, a glob and a date.
#[test]
fn the_ingest_guide_examples_run() {
    let s = Scratch::new();
    let dir = s.dir.path();
    land_orders(dir, "json", "landing/orders");
    std::fs::create_dir_all(dir.join("landing/csv")).unwrap();
    std::fs::write(dir.join("landing/csv/a.csv"), "id;city\n1;Seoul\n2;Busan\n").unwrap();
    std::fs::write(dir.join("landing/csv/b.txt"), "id;city\n3;Daegu\n").unwrap();
    let block = doc_block("docs/guide/ingest.md", "## Examples", "sh");
    ok(&run_doc_sh(&block, dir, &[]));
    let orders = common::read_with_python(&dir.join("bronze/orders"), "order_id");
    assert_eq!(orders["num_rows"], 15, "{orders}");
    assert_eq!(orders["types"]["order_id"], "string", "{orders}");
    assert_eq!(orders["types"]["amount"], "decimal128(18, 4)", "{orders}");
    assert_eq!(
        orders["types"]["created_at"], "timestamp[us, tz=UTC]",
        "{orders}"
    );
    let csv = common::read_with_python(&dir.join("bronze/csv"), "id");
    assert_eq!(csv["num_rows"], 2, "only *.csv: {csv}");
    assert_eq!(csv["types"]["city"], "string", "{csv}");
}

/// The completions and man page commands write their files where the guide says.
#[test]
fn the_completion_commands_run() {
    let s = Scratch::new();
    let home = s.dir.path().join("home");
    for d in [
        ".local/share/bash-completion/completions",
        ".zfunc",
        ".config/fish/completions",
        ".local/share/man/man1",
    ] {
        std::fs::create_dir_all(home.join(d)).unwrap();
    }
    let block = doc_block("docs/guide/ingest.md", "## Shell completions", "sh");
    let home_str = home.to_str().unwrap();
    ok(&run_doc_sh(
        &block,
        s.dir.path(),
        &[("HOME", home_str), ("MANPAGER", "cat"), ("PAGER", "cat")],
    ));
    for (file, needle) in [
        (
            ".local/share/bash-completion/completions/autoloader",
            "complete",
        ),
        (".zfunc/_autoloader", "#compdef autoloader"),
        (
            ".config/fish/completions/autoloader.fish",
            "complete -c autoloader",
        ),
        (".local/share/man/man1/autoloader-ingest.1", ".TH"),
    ] {
        let text = std::fs::read_to_string(home.join(file)).unwrap();
        assert!(text.contains(needle), "{file}: {text:.200}");
    }
}

/// The ONCE flow runs to completion once, is skipped by the next run, and runs again (its
/// rows landing again) when asked.
#[test]
fn the_once_flow_example_runs() {
    let s = Scratch::new();
    let dir = s.dir.path();
    land_orders(dir, "json", "archive/orders");
    let config = doc_block("docs/guide/streams-toml.md", "## ONCE flows", "toml");
    std::fs::write(dir.join("streams.toml"), config).unwrap();
    let block = doc_block("docs/guide/streams-toml.md", "## ONCE flows", "sh");
    let out = ok(&run_doc_sh(&block, dir, &[]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].ends_with("ONCE flow: ran to completion"), "{out}");
    assert_eq!(
        lines[1],
        "[backfill_legacy] ONCE flow: ran already; skipped"
    );
    assert!(lines[2].ends_with("ONCE flow: ran to completion"), "{out}");
    let rows = common::read_with_python(&dir.join("bronze/orders"), "order_id");
    assert_eq!(
        rows["num_rows"], 30,
        "the rerun lands the rows again: {rows}"
    );
}

/// `table show` and `table set`, the log retention example, and a config's `[[table]]`
/// properties, which `run` puts on the table.
#[test]
fn the_table_property_examples_run() {
    let s = Scratch::new();
    let dir = s.dir.path();
    ok(&run_doc_sh(
        "autoloader ingest fixtures/orders/json out/orders --once",
        dir,
        &[],
    ));
    let block = doc_block("docs/guide/maintenance.md", "## Table properties", "sh");
    let out = ok(&run_doc_sh(&block, dir, &[]));
    assert!(out.contains("version"), "table show: {out}");
    let retention = doc_block(
        "docs/guide/maintenance.md",
        "the CPU it does on a new table",
        "sh",
    );
    ok(&run_doc_sh(&retention, dir, &[]));
    let props = properties(&dir.join("out/orders"));
    assert_eq!(props["pipelines.reset.allowed"], "false", "{props}");
    assert_eq!(props["owner"], "data-team", "{props}");
    assert_eq!(
        props["delta.logRetentionDuration"], "interval 1 day",
        "{props}"
    );

    let fragment = doc_block(
        "docs/guide/maintenance.md",
        "A config file declares a table's properties",
        "toml",
    );
    let config = readme_config(dir, &fragment);
    ok(&run_doc_sh(
        &format!("autoloader run {} --once", config.display()),
        dir,
        &[],
    ));
    let props = properties(&dir.join("bronze/orders"));
    assert_eq!(props["pipelines.reset.allowed"], "false", "{props}");
}

/// A table partitioned by `day` and `region`, written by Python deltalake in `appends`
/// commits.
fn partitioned_events(table: &Path, appends: u64) {
    let code = format!(
        "import sys\nimport pyarrow as pa\nfrom deltalake import write_deltalake\n\
         for i in range({appends}):\n    \
         write_deltalake(sys.argv[1], pa.table({{'id': pa.array([2*i, 2*i+1], pa.int64()), \
         'day': ['2026-11-01', '2026-10-31'], 'region': ['kr', 'kr']}}), \
         partition_by=['day', 'region'], mode='append')\n"
    );
    let out = Command::new("python3")
        .args(["-c", &code, table.to_str().unwrap()])
        .output()
        .unwrap();
    ok(&out);
}

/// The compaction commands, on a stream's table of three batches and a partitioned table:
/// `optimize --where` compacts only the partitions it picks; the auto compaction config is
/// accepted by `run`.
#[test]
fn the_compaction_examples_run() {
    let s = Scratch::new();
    let dir = s.dir.path();
    ok(&run_doc_sh(
        "autoloader ingest fixtures/orders/json out/orders --once -o cloudFiles.maxFilesPerTrigger=1",
        dir,
        &[],
    ));
    partitioned_events(&dir.join("out/events"), 3);
    let block = doc_block(
        "docs/guide/maintenance.md",
        "## Compaction and cleanup",
        "sh",
    );
    let out = ok(&run_doc_sh(&block, dir, &[]));
    let report: serde_json::Value = out
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("optimize --json prints one object: {out}"));
    assert_eq!(
        report["filesRemoved"], 3,
        "the kr partition of 2026-11-01: {report}"
    );
    let rows = common::read_with_python(&dir.join("out/orders"), "order_id");
    assert_eq!(rows["num_rows"], 15, "{rows}");

    let fragment = doc_block(
        "docs/guide/maintenance.md",
        "## Compaction and cleanup",
        "toml",
    );
    let config = readme_config(dir, &fragment);
    ok(&run_doc_sh(
        &format!("autoloader run {} --once", config.display()),
        dir,
        &[],
    ));
}

/// The full refresh commands on the README's config: each runs, and the last,
/// `--checkpoints-only` after `--all`, leaves the table empty with its history kept.
#[test]
fn the_reset_examples_run() {
    let s = Scratch::new();
    let dir = s.dir.path();
    readme_config(dir, "");
    ok(&run_doc_sh("autoloader run streams.toml --once", dir, &[]));
    let block = doc_block("docs/guide/maintenance.md", "## Full refresh", "sh");
    let out = ok(&run_doc_sh(&block, dir, &[]));
    let rows = common::row_count(&common::read_table(&dir.join("bronze/orders")));
    assert_eq!(rows, 0, "{out}");
}

/// The cleanSource example: the run lands the rows and, with an hour of retention not
/// passed, moves nothing yet.
#[test]
fn the_clean_source_example_runs() {
    let s = Scratch::new();
    let dir = s.dir.path();
    land_orders(dir, "json", "landing/orders");
    let block = doc_block("docs/guide/clean-source.md", "# Cleaning the source", "sh");
    ok(&run_doc_sh(&block, dir, &[]));
    let rows = common::read_with_python(&dir.join("bronze/orders"), "order_id");
    assert_eq!(rows["num_rows"], 15, "{rows}");
    assert_eq!(
        std::fs::read_dir(dir.join("landing/orders"))
            .unwrap()
            .count(),
        3
    );
    assert!(!dir.join("archive/orders").exists());
}

/// Runs `script` (a docs block, edited) against `moto`, its state under `dir`.
fn run_against_moto(moto: &Moto, script: &str, dir: &Path) -> String {
    let state = dir.join("state").display().to_string();
    let env = moto.env();
    let mut envs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    envs.push(("AUTOLOADER_STATE_DIR", &state));
    ok(&run_doc_sh(script, dir, &envs))
}

/// The S3 example against moto (its endpoint for the guide's, `--once` added so that the
/// watcher stops): the prefix's objects land in the S3 table.
#[test]
fn the_s3_example_runs_against_moto() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    moto.put("lake", "landing/orders/0.json", common::orders_jsonl(0, 10));
    let s = Scratch::new();
    let script = doc_block("docs/guide/s3.md", "# S3", "sh")
        .replace("http://127.0.0.1:5000", &moto.endpoint())
        .replace("autoloader ingest ", "autoloader ingest --once ");
    let out = run_against_moto(&moto, &script, s.dir.path());
    assert_eq!(common::summary_figure(&out, "files"), 1, "{out}");
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/bronze/orders")),
        (0..10).collect::<Vec<_>>()
    );
}

/// The competing workers' command, after the notification recipe's queue set-up, with
/// `--once` added: the first run lists the prefix, the second takes a new file from the
/// queue, each file once.
#[test]
fn the_worker_example_runs_against_moto() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    let s = Scratch::new();
    let recipe = doc_block("docs/guide/s3.md", "## Notification mode", "sh");
    let setup: String = recipe
        .lines()
        .take_while(|l| !l.starts_with("autoloader ingest"))
        .map(|l| format!("{l}\n"))
        .collect();
    let workers = doc_block("docs/guide/s3.md", "### Competing workers", "sh");
    assert!(workers.contains("--worker auto"), "{workers}");
    let script =
        format!("{setup}{workers}").replace("autoloader ingest ", "autoloader ingest --once ");
    moto.put("lake", "landing/orders/0.json", common::orders_jsonl(0, 10));
    let first = run_against_moto(&moto, &script, s.dir.path());
    assert_eq!(common::summary_figure(&first, "files"), 1, "{first}");
    moto.put(
        "lake",
        "landing/orders/1.json",
        common::orders_jsonl(10, 25),
    );
    let second = run_against_moto(&moto, &script, s.dir.path());
    assert_eq!(common::summary_figure(&second, "files"), 1, "{second}");
    assert_eq!(
        sorted_ids(&python_rows(&moto, "s3://lake/bronze/orders")),
        (0..25).collect::<Vec<_>>()
    );
    assert!(
        !moto.keys("lake", "checkpoints/orders/workers/").is_empty(),
        "the worker took a slot under the checkpoint"
    );
}

/// The expectations guide: its config on the bundled fixtures (2 dropped, 2 quarantined,
/// 11 landed), `quality`, `quarantine replay`, and the same rules as `ingest` flags.
#[test]
fn the_expectations_examples_run() {
    let s = Scratch::new();
    let dir = s.dir.path();
    let config = doc_block("docs/guide/quality.md", "## Rules in a config", "toml");
    std::fs::write(dir.join("quality.toml"), config).unwrap();
    let block = doc_block("docs/guide/quality.md", "## Rules in a config", "sh");
    let out = ok(&run_doc_sh(&block, dir, &[]));
    assert!(out.contains("2 dropped, 2 quarantined"), "{out}");
    assert!(out.contains("not_too_big"), "quality: {out}");
    assert!(
        out.contains("nothing to replay: 2 rows still failing"),
        "{out}"
    );
    let rows = common::read_with_python(&dir.join("out/orders"), "order_id");
    assert_eq!(rows["num_rows"], 11, "{rows}");
    let quarantine = dir.join("out/orders/_autoloader/orders/quarantine");
    let q = common::read_with_python(&quarantine, "order_id");
    assert_eq!(q["num_rows"], 2, "{q}");

    let flags = doc_block(
        "docs/guide/quality.md",
        "## Rules on the command line",
        "sh",
    );
    let out = ok(&run_doc_sh(&flags, dir, &[]));
    assert!(out.contains("2 dropped, 2 quarantined"), "{out}");
    let rows = common::read_with_python(&dir.join("out/orders_flags"), "order_id");
    assert_eq!(rows["num_rows"], 11, "{rows}");
}

/// The SQL pipeline of "Coming from Databricks", run as printed on the fixtures.
#[test]
fn the_sql_pipeline_example_runs() {
    let s = Scratch::new();
    let dir = s.dir.path();
    let sql = doc_block("docs/databricks.md", "## SQL pipelines as written", "sql");
    std::fs::write(dir.join("pipeline.sql"), sql).unwrap();
    let block = doc_block("docs/databricks.md", "## SQL pipelines as written", "sh");
    ok(&run_doc_sh(&block, dir, &[]));
    let bronze = common::read_with_python(&dir.join("bronze_orders"), "order_id");
    assert_eq!(bronze["num_rows"], 13, "{bronze}");
    assert_eq!(bronze["configuration"]["pipelines.reset.allowed"], "false");
    let silver = common::read_with_python(&dir.join("silver/orders"), "order_id");
    assert_eq!(silver["num_rows"], 11, "{silver}");
    assert!(silver["types"].get("phone").is_none(), "{silver}");
}

/// The spark-pipeline.yml project of "Coming from Databricks", run as printed.
#[test]
fn the_spark_pipeline_project_example_runs() {
    let s = Scratch::new();
    let dir = s.dir.path();
    let spec = doc_block("docs/databricks.md", "## Spark pipeline projects", "yaml");
    std::fs::write(dir.join("spark-pipeline.yml"), spec).unwrap();
    let sql = doc_block("docs/databricks.md", "## Spark pipeline projects", "sql");
    std::fs::create_dir_all(dir.join("transformations")).unwrap();
    std::fs::write(dir.join("transformations/orders.sql"), sql).unwrap();
    let block = doc_block("docs/databricks.md", "## Spark pipeline projects", "sh");
    let out = ok(&run_doc_sh(&block, dir, &[]));
    assert!(out.contains("valid, 1 stream"), "{out}");
    let table = dir.join("spark-warehouse/bronze/orders");
    let rows = common::read_with_python(&table, "order_id");
    assert_eq!(rows["num_rows"], 15, "{rows}");
    assert!(rows["types"].get("_source_file").is_some(), "{rows}");
    assert!(dir.join("checkpoints/orders").is_dir());
}
