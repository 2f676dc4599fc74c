//! Helpers: run the real binary, lay out landing folders, read tables back.

pub mod args;
pub mod crash;
pub mod files;
pub mod fixtures;
pub mod held;
pub mod moto;
pub mod rows;

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, ListArray, RecordBatch, StructArray, new_null_array};
use arrow_schema::{DataType, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// A scratch area with a landing folder and a table location.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn landing(&self) -> PathBuf {
        let p = self.dir.path().join("landing");
        fs::create_dir_all(&p).unwrap();
        p
    }

    pub fn table(&self) -> PathBuf {
        self.dir.path().join("table")
    }

    /// Writes a file under the landing folder (creating folders).
    pub fn land(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let p = self.landing().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, content).unwrap();
        p
    }

    /// Runs `autoloader ingest <landing> <table> --once` with options.
    pub fn ingest(&self, options: &[&str]) -> Output {
        self.ingest_with_env(options, &[])
    }

    /// `autoloader ingest <landing> <table> --once -q`, to spawn and control by hand.
    pub fn ingest_command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_autoloader"));
        cmd.args([
            "ingest",
            self.landing().to_str().unwrap(),
            self.table().to_str().unwrap(),
            "--once",
            "-q",
        ])
        .env_remove("AUTOLOADER_FAILPOINT");
        cmd
    }

    /// Asserts that the table's `order_id`s are exactly `expected`, each once.
    pub fn assert_ids_once(&self, expected: impl IntoIterator<Item = u64>, context: &str) {
        assert_table_ids_once(&self.table(), expected, context);
    }

    pub fn ingest_with_env(&self, options: &[&str], env: &[(&str, &str)]) -> Output {
        let mut args: Vec<String> = vec![
            "ingest".into(),
            self.landing().display().to_string(),
            self.table().display().to_string(),
            "--once".into(),
        ];
        for o in options {
            args.push("-o".into());
            args.push((*o).to_string());
        }
        run(&args, env)
    }
}

pub fn run(args: &[String], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_autoloader"));
    cmd.args(args)
        .env_remove("AUTOLOADER_FAILPOINT")
        .env("RUST_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the autoloader binary runs")
}

/// Asserts success and returns stdout.
pub fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "autoloader failed ({:?})\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    stdout
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A figure from the summary line (`ingested 3 files, 15 rows, ...`).
pub fn summary_figure(stdout: &str, label: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("ingested "))
        .unwrap_or_else(|| panic!("no summary line in {stdout}"));
    line.split(", ")
        .map(|part| part.trim_start_matches("ingested "))
        .find_map(|part| {
            // "1 file", "1 batch": a count of one is singular.
            let one = label
                .strip_suffix("es")
                .filter(|l| l.ends_with("ch"))
                .or_else(|| label.strip_suffix('s'))
                .unwrap_or(label);
            part.strip_suffix(label)
                .or_else(|| part.strip_suffix(one))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or_else(|| panic!("no \"{label}\" in {line}"))
}

/// Reads every row of the table's current version with delta-rs and the parquet reader.
pub fn read_table(path: &Path) -> Vec<RecordBatch> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let url = url::Url::from_directory_path(fs::canonicalize(path).unwrap()).unwrap();
        let table = deltalake::open_table(url).await.expect("the table opens");
        let schema = table_arrow_schema(&table);
        let uris: Vec<String> = table.get_file_uris().unwrap().collect();
        let mut batches = Vec::new();
        for uri in uris {
            // Local tables give plain paths, others file:// URIs.
            let file_path = match url::Url::parse(&uri) {
                Ok(u) => u.to_file_path().unwrap(),
                Err(_) => PathBuf::from(&uri),
            };
            let reader =
                ParquetRecordBatchReaderBuilder::try_new(fs::File::open(file_path).unwrap())
                    .unwrap()
                    .build()
                    .unwrap();
            for b in reader {
                batches.push(conform(&b.unwrap(), &schema));
            }
        }
        batches
    })
}

fn table_arrow_schema(table: &deltalake::DeltaTable) -> SchemaRef {
    use deltalake::kernel::engine::arrow_conversion::TryIntoArrow;
    let schema = table.snapshot().unwrap().schema();
    let arrow: arrow_schema::Schema = schema.as_ref().try_into_arrow().unwrap();
    Arc::new(arrow)
}

/// Projects a data file's batch onto the table's (possibly evolved) schema: columns and
/// struct fields the file predates read as null, as a Delta reader shows them.
fn conform(batch: &RecordBatch, schema: &SchemaRef) -> RecordBatch {
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| match batch.column_by_name(f.name()) {
            Some(c) => conform_array(c, f.data_type()),
            None => new_null_array(f.data_type(), batch.num_rows()),
        })
        .collect();
    RecordBatch::try_new(schema.clone(), columns).unwrap()
}

fn conform_array(array: &ArrayRef, target: &DataType) -> ArrayRef {
    match (array.data_type(), target) {
        (DataType::Struct(_), DataType::Struct(fields)) => {
            let s = array.as_struct();
            let children: Vec<ArrayRef> = fields
                .iter()
                .map(|f| match s.column_by_name(f.name()) {
                    Some(c) => conform_array(c, f.data_type()),
                    None => new_null_array(f.data_type(), s.len()),
                })
                .collect();
            Arc::new(StructArray::new(
                fields.clone(),
                children,
                s.nulls().cloned(),
            ))
        }
        (DataType::List(_), DataType::List(item)) => {
            let l = array.as_list::<i32>();
            let values = conform_array(l.values(), item.data_type());
            Arc::new(ListArray::new(
                item.clone(),
                l.offsets().clone(),
                values,
                l.nulls().cloned(),
            ))
        }
        (from, to) if from == to => Arc::clone(array),
        _ => arrow_cast::cast(array, target).unwrap(),
    }
}

/// The table's Delta version and the txn version of every app id, from delta-rs.
pub fn table_version_and_txns(path: &Path) -> (u64, BTreeMap<String, i64>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let url = url::Url::from_directory_path(fs::canonicalize(path).unwrap()).unwrap();
        let table = deltalake::open_table(url).await.unwrap();
        let version = table.version().unwrap();
        let mut txns = BTreeMap::new();
        // Scan the JSON commits for txn actions (independent of our own bookkeeping).
        for v in 0..=version {
            let text = fs::read_to_string(path.join(format!("_delta_log/{v:020}.json"))).unwrap();
            for line in text.lines() {
                let action: serde_json::Value = serde_json::from_str(line).unwrap();
                if let Some(txn) = action.get("txn") {
                    let app = txn["appId"].as_str().unwrap().to_string();
                    let ver = txn["version"].as_i64().unwrap();
                    let e = txns.entry(app).or_insert(ver);
                    *e = (*e).max(ver);
                }
            }
        }
        (version, txns)
    })
}

/// All values of a string or integer column, as strings (nulls as "null").
pub fn column_strings(batches: &[RecordBatch], name: &str) -> Vec<String> {
    let mut out = Vec::new();
    for b in batches {
        let col = b
            .column_by_name(name)
            .unwrap_or_else(|| panic!("no column {name}"));
        let fmt = arrow_cast::display::ArrayFormatter::try_new(col.as_ref(), &Default::default())
            .unwrap();
        for i in 0..col.len() {
            out.push(if col.is_null(i) {
                "null".to_string()
            } else {
                fmt.value(i).to_string()
            });
        }
    }
    out
}

/// A table's column names (sorted, without `left_out`) and its rows as `a|b|...` texts,
/// sorted: two tables compare equal whatever their file and column order.
pub fn table_rows(table: &Path, left_out: &[&str]) -> (Vec<String>, Vec<String>) {
    let batches = read_table(table);
    let mut names: Vec<String> = batches[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .filter(|n| !left_out.contains(&n.as_str()))
        .collect();
    names.sort();
    let columns: Vec<Vec<String>> = names.iter().map(|n| column_strings(&batches, n)).collect();
    let mut rows: Vec<String> = (0..columns[0].len())
        .map(|i| {
            columns
                .iter()
                .map(|c| c[i].clone())
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    rows.sort();
    (names, rows)
}

pub fn row_count(batches: &[RecordBatch]) -> usize {
    batches.iter().map(RecordBatch::num_rows).sum()
}

/// Reads the table with Python `deltalake`, sorted by `key`.
pub fn read_with_python(path: &Path, key: &str) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/common/read_delta.py");
    let out = Command::new(python())
        .arg(script)
        .arg(path)
        .arg(key)
        .output()
        .expect("python3 runs (the deltalake package is installed by .ci/run)");
    assert!(
        out.status.success(),
        "python deltalake failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("read_delta.py prints JSON")
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Asserts that the `order_id`s of the table at `table` are exactly `expected`, each once.
pub fn assert_table_ids_once(table: &Path, expected: impl IntoIterator<Item = u64>, context: &str) {
    let mut ids: Vec<u64> = column_strings(&read_table(table), "order_id")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        expected.into_iter().collect::<Vec<_>>(),
        "{context}: rows must be the input, once each"
    );
}

/// The bytes of a Parquet file holding `batch` (its schema as given, nullability included).
pub fn parquet_bytes(batch: &RecordBatch) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, batch.schema(), None).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
    buf
}

/// JSON lines of simple orders with ids `from..to`.
pub fn orders_jsonl(from: u64, to: u64) -> String {
    (from..to)
        .map(|i| {
            format!(
                "{{\"order_id\": {i}, \"amount\": {}, \"user_id\": \"u{i}\"}}\n",
                1000 + i
            )
        })
        .collect()
}

/// JSON lines of orders `from..to`, about 250 bytes each (large batches without large
/// counts): integer amounts, or with `older` amounts with cents and an extra `late` column.
pub fn sample_orders_jsonl(from: u64, to: u64, older: bool) -> String {
    let pad = "y".repeat(200);
    (from..to)
        .map(|i| {
            if older {
                format!(
                    "{{\"order_id\": {i}, \"amount\": {i}.5, \"pad\": \"{pad}\", \"late\": \"L{i}\"}}\n"
                )
            } else {
                format!("{{\"order_id\": {i}, \"amount\": {i}, \"pad\": \"{pad}\"}}\n")
            }
        })
        .collect()
}

pub fn stdout_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `ready` every 20 ms until it returns true; panics naming `what` and `timeout` if
/// it has not by then.
pub fn wait_until(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ready() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------- sandboxed, checked runs

/// Longest a single [`Run`] may take before it counts as hung (and is killed).
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// Scratch folders the binary gets as working directory, `TMPDIR` and `HOME`: they must
/// stay empty.
const SANDBOX: [&str; 3] = ["cwd", "tmp", "home"];

/// What one sandboxed run of the binary did ([`Run::ingest`]).
pub struct Run {
    case: &'static str,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Peak resident memory, KiB.
    pub max_rss_kb: i64,
}

impl Run {
    /// `autoloader ingest <landing> <table> --once -o ...`, sandboxed and checked: the binary
    /// runs with its working directory, `TMPDIR` and `HOME` in empty folders of the scratch
    /// area and its peak memory measured; afterwards the run asserts that it did not panic
    /// or die from a signal, finished within [`RUN_TIMEOUT`], wrote nothing outside `table/`
    /// (nor into those folders), and left the landing folder as it was. `case` names the run
    /// in every failure message.
    pub fn ingest(s: &Scratch, case: &'static str, options: &[&str]) -> Run {
        let before = landing_snapshot(s);
        let run = Run::ingest_paused(s, case, options, None);
        assert_eq!(
            landing_snapshot(s),
            before,
            "[{case}] the landing folder is left as it was"
        );
        run
    }

    /// Like [`Run::ingest`] (without the landing-folder check, since `action` changes it);
    /// with `pause = Some((failpoint, action))` the run is held at that failpoint (`sleep`)
    /// while `action` changes the landing folder.
    pub fn ingest_paused(
        s: &Scratch,
        case: &'static str,
        options: &[&str],
        pause: Option<(&str, &mut dyn FnMut())>,
    ) -> Run {
        for d in SANDBOX {
            fs::create_dir_all(s.dir.path().join(d)).unwrap();
        }
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_autoloader"));
        cmd.arg("ingest")
            .arg(s.landing())
            .arg(s.table())
            .arg("--once");
        for o in options {
            cmd.arg("-o").arg(o);
        }
        cmd.current_dir(s.dir.path().join("cwd"))
            .env("TMPDIR", s.dir.path().join("tmp"))
            .env("HOME", s.dir.path().join("home"))
            .env("RUST_LOG", "warn")
            .env_remove("AUTOLOADER_FAILPOINT")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some((point, _)) = &pause {
            cmd.env("AUTOLOADER_FAILPOINT", format!("{point}=sleep(1500)"));
        }
        // Reaped by `wait4` in `wait_bounded` (which also gives its peak memory), not `wait()`.
        #[allow(clippy::zombie_processes)]
        let mut child = cmd.spawn().expect("the autoloader binary runs");
        let pid = i32::try_from(child.id()).unwrap();
        let mut out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            out.read_to_string(&mut s).unwrap();
            s
        });
        let (reached_tx, reached_rx) = std::sync::mpsc::channel();
        let stderr = std::thread::spawn(move || {
            let mut all = Vec::new();
            let mut r = BufReader::new(err);
            let mut line = Vec::new();
            while r.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
                if String::from_utf8_lossy(&line).contains("failpoint") {
                    let _ = reached_tx.send(());
                }
                all.extend_from_slice(&line);
                line.clear();
            }
            String::from_utf8_lossy(&all).into_owned()
        });
        if let Some((point, action)) = pause {
            reached_rx
                .recv_timeout(RUN_TIMEOUT)
                .unwrap_or_else(|_| panic!("[{case}] failpoint {point} was not reached"));
            action();
        }
        let (status, rss) = wait_bounded(pid, case);
        let run = Run {
            case,
            code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
            max_rss_kb: rss,
        };
        assert!(
            run.code.is_some(),
            "[{case}] the process died from a signal (status {status:#x}), stderr: {}",
            run.stderr
        );
        assert!(
            run.code != Some(101) && !run.stderr.contains("panicked"),
            "[{case}] autoloader panicked (exit {:?}):\n{}",
            run.code,
            run.stderr
        );
        assert_nothing_outside(s, case);
        run
    }

    /// A figure from the summary line (see [`summary_figure`]).
    pub fn figure(&self, label: &str) -> u64 {
        summary_figure(&self.stdout, label)
    }

    /// Exit code 0.
    pub fn ok(&self) -> &Self {
        assert_eq!(
            self.code,
            Some(0),
            "[{}] expected success\nstdout: {}\nstderr: {}",
            self.case,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Exit code 1 with every needle in the error output.
    pub fn fails_naming(&self, needles: &[&str]) -> &Self {
        assert_eq!(
            self.code,
            Some(1),
            "[{}] expected exit code 1\nstdout: {}\nstderr: {}",
            self.case,
            self.stdout,
            self.stderr
        );
        for n in needles {
            assert!(
                self.stderr.contains(n),
                "[{}] the error should mention {n:?}\nstderr: {}",
                self.case,
                self.stderr
            );
        }
        self
    }
}

/// Waits for the child, killing it past [`RUN_TIMEOUT`]; returns its wait status and peak
/// resident memory (KiB). The pid stays ours until `wait4` reaps it, so the kill is safe.
fn wait_bounded(pid: i32, case: &str) -> (i32, i64) {
    let deadline = Instant::now() + RUN_TIMEOUT;
    let mut status = 0;
    // SAFETY: rusage is plain old data, and wait4/kill only touch our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            return (status, usage.ru_maxrss);
        }
        assert!(r == 0, "[{case}] wait4 failed");
        if Instant::now() > deadline {
            unsafe { libc::kill(pid, libc::SIGKILL) };
            unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
            panic!("[{case}] autoloader hung for {RUN_TIMEOUT:?} and was killed");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Relative path → (size, is symlink) of everything under the landing folder.
fn landing_snapshot(s: &Scratch) -> BTreeMap<String, (u64, bool)> {
    let mut out = BTreeMap::new();
    let root = s.landing();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            let rel = p
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if m.is_dir() {
                stack.push(p);
            }
            out.insert(rel, (m.len(), m.file_type().is_symlink()));
        }
    }
    out
}

/// Nothing was written outside the table (which holds the checkpoint and schemas).
fn assert_nothing_outside(s: &Scratch, case: &str) {
    let allowed = ["landing", "table"];
    for e in fs::read_dir(s.dir.path()).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            allowed.contains(&name.as_str()) || SANDBOX.contains(&name.as_str()),
            "[{case}] something was written outside the table: {name}"
        );
    }
    for d in SANDBOX {
        let left: Vec<_> = fs::read_dir(s.dir.path().join(d))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            left.is_empty(),
            "[{case}] written into the {d} folder: {left:?}"
        );
    }
}

/// Runs the `autoloader` command `args` again and again, killing each run with SIGKILL
/// after a pseudo-random delay (growing with every kill, so a run completes even on a
/// loaded machine), until one run completes; `after_kill(n)` runs after the n-th kill (a
/// source may move on while the stream is down). Returns the kills.
pub fn sigkill_until_done(args: &[String], mut after_kill: impl FnMut(u64)) -> u64 {
    let mut seed: u64 = 0x5eed_1234;
    let mut kills: u64 = 0;
    loop {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let delay = Duration::from_millis(5 + kills * 15 + (seed >> 33) % 60);
        let mut child = Command::new(env!("CARGO_BIN_EXE_autoloader"))
            .args(args)
            .env_remove("AUTOLOADER_FAILPOINT")
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        match child.try_wait().unwrap() {
            Some(status) => {
                assert!(status.success(), "a run failed: {status:?}");
                return kills;
            }
            None => {
                child.kill().unwrap();
                child.wait().unwrap();
                kills += 1;
                after_kill(kills);
            }
        }
        assert!(kills < 300, "the stream never finished");
    }
}

/// The text of a docs page, `page` relative to the repository root (`README.md`,
/// `docs/guide/cdc.md`).
pub fn doc_page(page: &str) -> String {
    fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(page))
        .unwrap_or_else(|e| panic!("{page}: {e}"))
}

/// The first fenced block tagged `lang` after the first line of `page` that starts with
/// `heading` (a heading such as `## XML`, or the start of a line of prose when a section
/// holds two blocks of one language): the block's text, as printed. `tests/it/docs.rs`
/// finds the calls of this function in the tests' source and requires every `sh`, `bash`
/// and `toml` block of the docs to be one of them, so keep its three arguments literal.
pub fn doc_block(page: &str, heading: &str, lang: &str) -> String {
    let text = doc_page(page);
    let after = text
        .lines()
        .skip_while(|l| !l.starts_with(heading))
        .skip(1)
        .skip_while(|l| *l != format!("```{lang}"))
        .skip(1);
    let block: Vec<&str> = after.take_while(|l| !l.starts_with("```")).collect();
    assert!(
        !block.is_empty(),
        "{page} has a {lang} block after a line starting with {heading:?}"
    );
    block.join("\n") + "\n"
}

/// Runs a docs `sh` block as printed, with bash (`-euo pipefail`), in `dir`: `autoloader`
/// is the binary under test and `cargo run [-q] --release --` runs it too; `fixtures/` and
/// `deploy/` are the repository's (linked into `dir`), so the block's relative paths read
/// as in a checkout. `RUST_LOG=warn` unless `envs` says otherwise. Returns the output
/// whatever the exit status (`ok` checks it).
pub fn run_doc_sh(block: &str, dir: &Path, envs: &[(&str, &str)]) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for linked in ["fixtures", "deploy"] {
        let at = dir.join(linked);
        if !at.exists() {
            std::os::unix::fs::symlink(root.join(linked), &at).unwrap();
        }
    }
    let prelude = r#"autoloader() { "$AUTOLOADER_BIN" "$@"; }
cargo() {
  [ "$1" = run ] || { echo "the docs run only 'cargo run': $*" >&2; return 2; }
  while [ "$1" != -- ]; do shift; done
  shift
  "$AUTOLOADER_BIN" "$@"
}
"#;
    Command::new("bash")
        .args(["-euo", "pipefail", "-c", &format!("{prelude}{block}")])
        .current_dir(dir)
        .env("AUTOLOADER_BIN", env!("CARGO_BIN_EXE_autoloader"))
        .env("RUST_LOG", "warn")
        .envs(envs.iter().copied())
        .output()
        .expect("bash runs")
}

/// The events of type `kind` in the stream's event log (`autoloader events --json`).
pub fn events_of(checkpoint: &Path, kind: &str) -> Vec<serde_json::Value> {
    let out = run(
        &[
            "events".into(),
            "--checkpoint".into(),
            checkpoint.display().to_string(),
            "--type".into(),
            kind.into(),
            "--json".into(),
        ],
        &[],
    );
    ok(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("an event is JSON"))
        .collect()
}

/// The commit files of the Delta table at `table`, in order, as text.
pub fn commit_texts(table: &Path) -> Vec<String> {
    let mut commits: Vec<_> = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    commits.sort();
    commits
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

/// Every action of the Delta table's commits, in order.
pub fn log_actions(table: &Path) -> Vec<serde_json::Value> {
    commit_texts(table)
        .iter()
        .flat_map(|c| {
            c.lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The data files the Delta table at `table` holds now: every commit's adds less its
/// removes (from the commit files, so for tables whose logs are all still there).
pub fn live_files(table: &Path) -> std::collections::BTreeSet<String> {
    let mut live = std::collections::BTreeSet::new();
    for action in log_actions(table) {
        if let Some(path) = action["add"]["path"].as_str() {
            live.insert(path.to_string());
        }
        if let Some(path) = action["remove"]["path"].as_str() {
            live.remove(path);
        }
    }
    live
}

/// The `autoloader` object of every batch commit of the table (table creation has none).
pub fn commit_infos(table: &Path) -> Vec<serde_json::Value> {
    log_actions(table)
        .into_iter()
        .filter_map(|a| a["commitInfo"].get("autoloader").cloned())
        .filter(|info| info.get("batch").is_some())
        .collect()
}

pub fn json_summary(out: &Output) -> serde_json::Value {
    let stdout = ok(out);
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}
