//! The `autoloader` command line: argument parsing, logging, progress, output and exit
//! codes. Everything else lives in the library.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use autoloader::config::NamedStream;
use autoloader::options::{self, OptionsError};
use autoloader::pipeline::{self, IngestRequest, Progress, RunMode, StopFlag, StreamSpec, Summary};
use autoloader::reports;
use autoloader::storage::StorageSettings;
use autoloader::telemetry::Hooks;
use autoloader::telemetry::alerts::{AlertSettings, parse_webhook};
use autoloader::telemetry::events::{EventKind, kind};
use autoloader::telemetry::metrics::Registry;
use autoloader::{Error, ErrorClass, Location};
use clap::{Args, CommandFactory, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

/// The exit code of each kind of error (the table below, `--help` and the README).
fn exit_code(class: ErrorClass) -> u8 {
    match class {
        ErrorClass::Failed => 1,
        ErrorClass::Usage => 2,
        ErrorClass::SchemaChanged => 3,
        ErrorClass::Guarded => 4,
        ErrorClass::Locked => 75,
    }
}

/// A second SIGINT or SIGTERM: exit at once (128 + SIGINT, as shells report an interrupt).
const EXIT_INTERRUPTED: i32 = 130;

/// The exit codes, shown by `--help` (keep in step with `exit_code` and the README).
const EXIT_CODES: &str = "\
Exit codes:
  0    done (also after SIGINT or SIGTERM: the batch in flight finished first)
  1    failed: bad input, I/O, the table, a refused S3 request (the error names the file)
  2    invalid arguments, options, config, locations or S3 settings, or a missing source:
       nothing was done
  3    a new schema version was written and cloudFiles.stopOnSchemaChange=true stopped
       the run: run again to continue with it
  4    reset refused: a named table has pipelines.reset.allowed=false (nothing changed)
  75   another process holds the checkpoint
  130  a second SIGINT or SIGTERM: exited at once (still exactly once)";

/// A location argument, refused at parse time (exit 2) when its scheme is unsupported.
fn location(text: &str) -> Result<Location, autoloader::location::LocationError> {
    Location::parse(text)
}

/// `--alert-rescued-share`: a fraction of a batch's rows, 0 to 1.
fn fraction(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        Ok(v) if v > 1.0 && v <= 100.0 => Err(format!(
            "{text} is not a fraction between 0 and 1 (for {v}% give {})",
            v / 100.0
        )),
        _ => Err(format!(
            "{text} is not a fraction between 0 and 1 (0.05 is 5% of a batch's rows)"
        )),
    }
}

/// A duration in seconds: finite and not negative.
fn seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "{text} is not a number of seconds (e.g. 10 or 0.5)"
        )),
    }
}

/// `--metrics-addr`: HOST:PORT to listen on, checked before anything runs.
fn listen_addr(text: &str) -> Result<String, String> {
    use std::net::ToSocketAddrs;
    if text.parse::<std::net::SocketAddr>().is_ok()
        || (text.contains(':') && text.to_socket_addrs().is_ok_and(|mut a| a.next().is_some()))
    {
        return Ok(text.to_string());
    }
    if text.parse::<u16>().is_ok() {
        return Err(format!(
            "{text} is a port alone: give HOST:PORT, e.g. 127.0.0.1:{text} (or 0.0.0.0:{text} for every interface)"
        ));
    }
    Err(format!("{text} is not HOST:PORT (e.g. 127.0.0.1:9464)"))
}

/// `--name`: letters, digits, `_` or `-` (as a config file's stream names).
/// `--source-format`: delta or files.
fn source_format(text: &str) -> Result<autoloader::source::SourceFormat, String> {
    autoloader::source::SourceFormat::from_name(text)
        .ok_or_else(|| format!("\"{text}\" is not a source format: expected delta or files"))
}

fn stream_name(text: &str) -> Result<String, String> {
    if autoloader::config::valid_stream_name(text) {
        Ok(text.to_string())
    } else {
        Err(format!(
            "stream name \"{text}\" must be letters, digits, _ or -"
        ))
    }
}

#[derive(Parser)]
#[command(
    name = "autoloader",
    version,
    about = "Auto Loader without Databricks: landing folders into Delta Lake, exactly once.",
    after_help = EXIT_CODES
)]
struct Cli {
    /// More log output: -v autoloader's debug detail, -vv its trace and the libraries'
    /// info, -vvv the libraries' debug (RUST_LOG, if set, decides instead).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Only errors on stderr.
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

/// Alerting and metrics flags shared by `ingest` and `run`.
#[derive(Args, Clone)]
struct Reporting {
    /// POST alert-worthy events (schema evolved, columns rejected, rescued data, type
    /// mismatches, failures) as JSON with a `text` field to this URL; repeatable.
    #[arg(long = "alert-webhook", value_name = "URL")]
    alert_webhooks: Vec<String>,
    /// Alert on rescued data when a batch's rescued rows exceed this fraction of its rows,
    /// 0 to 1 (0.05 is 5%; 0: any rescued row).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0, value_parser = fraction)]
    alert_rescued_share: f64,
    /// One alert per incident in this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 600.0, value_parser = seconds)]
    alert_quiet_period: f64,
    /// Allow webhooks on link-local or cloud metadata addresses (refused by default).
    #[arg(long)]
    alert_allow_link_local: bool,
    /// Serve Prometheus metrics at http://ADDR/metrics; ADDR is HOST:PORT, e.g.
    /// 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR", value_parser = listen_addr)]
    metrics_addr: Option<String>,
}

/// `ingest`'s flow: which columns and rows reach the table (README "Flows").
#[derive(Args, Clone)]
struct FlowArgs {
    /// Only these columns reach the table, plus the rescued data, partition columns and
    /// _metadata: --columns order_id,amount (a column the schema gains later does not).
    #[arg(
        long,
        value_name = "A,B",
        value_delimiter = ',',
        conflicts_with = "except_columns"
    )]
    columns: Option<Vec<String>>,
    /// Every column but these reaches the table: --except-columns note,debug
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    except_columns: Option<Vec<String>>,
    /// Only rows for which this condition is true reach the table (others are counted as
    /// filtered): --where "order_date < '2025-01-01' AND region IN ('eu', 'us')"
    #[arg(long = "where", value_name = "CONDITION")]
    condition: Option<String>,
}

impl FlowArgs {
    fn spec(self) -> Result<autoloader::flow::FlowSpec, Error> {
        autoloader::flow::FlowSpec::new(
            self.columns,
            self.except_columns,
            self.condition.as_deref(),
        )
        .map_err(|e| Error::Ingest(e.into()))
    }
}

impl Reporting {
    fn alert_settings(&self, extra: &[String]) -> Result<AlertSettings, Error> {
        let webhooks = self
            .alert_webhooks
            .iter()
            .chain(extra)
            .map(|u| parse_webhook(u, self.alert_allow_link_local))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AlertSettings {
            webhooks,
            rescued_share: self.alert_rescued_share,
            quiet_period: Duration::from_secs_f64(self.alert_quiet_period.max(0.0)),
            allow_link_local: self.alert_allow_link_local,
        })
    }
}

// Parsed once per process: the size of a variant costs nothing worth boxing for.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Ingest new files from SOURCE (a local folder or an S3 prefix) into the Delta table
    /// at TABLE.
    #[command(after_help = EXIT_CODES)]
    Ingest {
        /// Landing folder to read: a local directory (every file below it) or
        /// s3://BUCKET/PREFIX (credentials and endpoint from AWS_* variables); or a Delta
        /// table, read incrementally (its appended rows, commit by commit).
        #[arg(value_parser = location)]
        source: Location,
        /// What SOURCE holds: delta (a Delta table) or files [default: a folder holding
        /// a _delta_log/ is a Delta table, anything else files].
        #[arg(long, value_name = "FORMAT", value_parser = source_format)]
        source_format: Option<autoloader::source::SourceFormat>,
        /// Delta table location (created on first commit): a local directory or
        /// s3://BUCKET/PATH.
        #[arg(value_parser = location)]
        table: Location,
        /// Take every file present now, in batches, then exit (Auto Loader's AvailableNow).
        /// Without it, keep watching and ingest files as they land until SIGINT or SIGTERM.
        #[arg(long)]
        once: bool,
        /// Watch mode: list the source at least this often, in seconds (file events wake
        /// it sooner).
        #[arg(long, value_name = "SECS", default_value_t = 10.0, value_parser = seconds)]
        poll_interval: f64,
        /// Auto Loader option, repeatable: -o cloudFiles.inferColumnTypes=true; APPLY
        /// CHANGES and snapshot flows take -o cdc.KEY=VALUE and -o snapshot.KEY=VALUE
        /// (`autoloader options` lists every key)
        #[arg(short = 'o', long = "option", value_name = "KEY=VALUE")]
        options: Vec<String>,
        #[command(flatten)]
        flow: FlowArgs,
        /// Where the stream keeps its progress [default: TABLE/_autoloader].
        #[arg(long, value_name = "DIR", value_parser = location)]
        checkpoint: Option<Location>,
        /// The stream's name in events, alerts and metrics: letters, digits, _ or -
        /// [default: the table folder's name].
        #[arg(long, value_name = "NAME", value_parser = stream_name)]
        name: Option<String>,
        /// Print the summary as one JSON object on stdout instead of the summary line
        /// (on failure too: "status": "failed", the error and the exit code).
        #[arg(long)]
        json: bool,
        /// List the files a run would ingest (and why others are not taken) and the
        /// schema it would read them with, then exit; nothing is written.
        #[arg(long)]
        dry_run: bool,
        /// Notification mode: run as one of several competing workers on this stream, in
        /// a worker slot of its own: `auto` (the first free slot; identical processes),
        /// or a slot number (or a name ending in one, a StatefulSet pod's).
        #[arg(long, value_name = "auto|SLOT")]
        worker: Option<autoloader::checkpoint::claims::Worker>,
        #[command(flatten)]
        reporting: Reporting,
    },
    /// Run every stream of a TOML config file concurrently (see schemas/config.schema.json).
    #[command(after_help = EXIT_CODES)]
    Run {
        /// The config file (streams.toml).
        config: PathBuf,
        /// Ingest what has landed, then exit.
        #[arg(long)]
        once: bool,
        /// Run only this stream.
        #[arg(long, value_name = "NAME")]
        stream: Option<String>,
        /// Watch mode: list each source at least this often, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 10.0, value_parser = seconds)]
        poll_interval: f64,
        /// Check the file and every stream's options, locations and webhooks, then exit
        /// without running anything (0: valid; 2: the error).
        #[arg(long, conflicts_with = "list")]
        check: bool,
        /// Print each stream (name, source, table, checkpoint) and exit without running;
        /// the file is checked as by --check.
        #[arg(long)]
        list: bool,
        /// One JSON object per stream on stdout instead of the summary lines (and with
        /// --list, instead of the table).
        #[arg(long)]
        json: bool,
        /// Run this ONCE flow again although it completed (its rows land again);
        /// repeatable.
        #[arg(long, value_name = "NAME")]
        rerun_once: Vec<String>,
        #[command(flatten)]
        reporting: Reporting,
    },
    /// Print a stream's events (schema changes, rescued data, batches, failures); for a
    /// table, its streams' events merged by time.
    Events {
        /// The table (its streams' checkpoints are found under TABLE/_autoloader) or a
        /// checkpoint: a local directory or s3://BUCKET/PATH.
        #[arg(value_parser = location, required_unless_present = "checkpoint", conflicts_with = "checkpoint")]
        table: Option<Location>,
        /// The stream's checkpoint (one kept elsewhere than under its table): a local
        /// directory or s3://BUCKET/PREFIX.
        #[arg(long, value_name = "DIR", value_parser = location)]
        checkpoint: Option<Location>,
        /// Only this stream of the table: its config name (`ingest`'s: its --name, or the
        /// table's folder name).
        #[arg(long, value_name = "NAME")]
        stream: Option<String>,
        /// Only events of this type (repeatable), e.g. schema_evolved, rescued_data_seen.
        #[arg(long = "type", value_name = "TYPE")]
        types: Vec<String>,
        /// Only events at or after this time (2026-03-15T00:00:00Z) or this long ago: a number
        /// and a unit, s, m, h, d or w (90m, 24h, 7d, 2w).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// What a stream has ingested, what is pending, and its last error (live figures while
    /// it runs); for a table, each of its streams.
    Status {
        /// The table (its streams' checkpoints are found under TABLE/_autoloader) or a
        /// checkpoint: a local directory or s3://BUCKET/PATH.
        #[arg(value_parser = location, required_unless_present = "checkpoint", conflicts_with = "checkpoint")]
        table: Option<Location>,
        /// The stream's checkpoint (one kept elsewhere than under its table): a local
        /// directory or s3://BUCKET/PREFIX.
        #[arg(long, value_name = "DIR", value_parser = location)]
        checkpoint: Option<Location>,
        /// Only this stream of the table: its config name (`ingest`'s: its --name, or the
        /// table's folder name).
        #[arg(long, value_name = "NAME")]
        stream: Option<String>,
        /// Print JSON instead of text: one object, or an array of them for a table with
        /// several streams.
        #[arg(long)]
        json: bool,
    },
    /// A stream's schema versions: history, diff, show (by its table, checkpoint or schema
    /// location).
    Schema {
        #[command(subcommand)]
        command: SchemaCommand,
    },
    /// A Delta table's properties, schema, version and flows; set its properties.
    Table {
        #[command(subcommand)]
        command: TableCommand,
    },
    /// Full refresh of tables: remove every row (one Delta commit; history and
    /// properties stay) and start every flow writing into them afresh. Refused for a table
    /// with pipelines.reset.allowed=false (exit 4).
    #[command(after_help = EXIT_CODES)]
    Reset {
        /// The tables: local directories or s3://BUCKET/PATH.
        #[arg(value_parser = location, required_unless_present = "all")]
        tables: Vec<Location>,
        /// The config file whose streams write into the tables (their checkpoints, schema
        /// locations and sources); flows found under TABLE/_autoloader are reset too.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Every table of --config; a table with pipelines.reset.allowed=false is skipped
        /// with a warning.
        #[arg(long, requires = "config", conflicts_with = "tables")]
        all: bool,
        /// Reset the flows' progress but keep the rows: the next run re-reads the sources
        /// from the start (as far as modifiedAfter lets it), so rows can land again.
        #[arg(long)]
        checkpoints_only: bool,
        /// Keep the flows' schema versions (_schemas) instead of inferring them again.
        #[arg(long)]
        keep_schema: bool,
        /// Say what would be removed and kept, and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Do not ask for confirmation (required when stdin is not a terminal).
        #[arg(long)]
        yes: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Compact small files: per partition, files smaller than the target are concatenated
    /// (oldest first) into files near the target size, in one OPTIMIZE commit with
    /// dataChange=false (streaming readers ignore it). Safe beside a running stream.
    #[command(after_help = EXIT_CODES)]
    Optimize {
        /// The Delta table: a local directory or s3://BUCKET/PATH.
        #[arg(value_parser = location)]
        table: Location,
        /// Size of the files written, e.g. 128MiB, 512m, 1g [default: 128MiB].
        #[arg(long, value_name = "SIZE")]
        target_size: Option<String>,
        /// Leave a partition alone when it has fewer small files than this [default: 2].
        #[arg(long, value_name = "N")]
        min_files: Option<usize>,
        /// Only partitions for which this condition over partition columns holds, in the
        /// flows' where language: "day >= '2026-11-01' AND region = 'kr'".
        #[arg(long = "where", value_name = "PREDICATE")]
        condition: Option<String>,
        /// Print the summary as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Delete files no version within the retention reads (what optimize replaced, files
    /// of commits that never landed). Never _delta_log, _autoloader (the checkpoints) or a
    /// file not committed yet that is younger than an hour.
    #[command(after_help = EXIT_CODES)]
    Vacuum {
        /// The Delta table: a local directory or s3://BUCKET/PATH.
        #[arg(value_parser = location)]
        table: Location,
        /// Keep files removed less than this long ago, e.g. 168h, 7d [default: 168h];
        /// shorter than the table's delta.deletedFileRetentionDuration needs --force.
        #[arg(long, value_name = "DURATION")]
        retain: Option<String>,
        /// List the files it would delete; delete nothing.
        #[arg(long)]
        dry_run: bool,
        /// Allow a retention shorter than the table's delta.deletedFileRetentionDuration
        /// (readers of older versions lose their files).
        #[arg(long)]
        force: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Drift report from a table's rescued-data column: per day and per rescued key.
    Drift {
        /// The Delta table: a local directory or s3://BUCKET/PATH.
        #[arg(value_parser = location)]
        table: Location,
        /// Only rows ingested at or after this time (2026-03-15T00:00:00Z) or this long ago:
        /// a number and a unit, s, m, h, d or w (90m, 24h, 7d, 2w).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Every option with its default and meaning, and those not supported yet.
    Options {
        /// One JSON object per option instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script (README: where to put it).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write one page per command into a folder.
    Man {
        /// Write autoloader.1, autoloader-ingest.1, ... into this folder instead.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum TableCommand {
    /// Properties, columns, version, file count and the flows that write into the table
    /// (the checkpoints under TABLE/_autoloader).
    Show {
        /// The Delta table: a local directory or s3://BUCKET/PATH.
        #[arg(value_parser = location)]
        table: Location,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Set table properties (metaData.configuration) in one Delta commit; none when the
    /// table has them already. Of Delta's own delta.* properties, only autoCompact and the
    /// upkeep ones (logRetentionDuration, deletedFileRetentionDuration, checkpointInterval,
    /// enableExpiredLogCleanup).
    Set {
        /// The Delta table: a local directory or s3://BUCKET/PATH.
        #[arg(value_parser = location)]
        table: Location,
        /// KEY=VALUE, repeatable: pipelines.reset.allowed=false
        #[arg(required = true, value_name = "KEY=VALUE")]
        properties: Vec<String>,
    },
}

#[derive(Subcommand)]
enum SchemaCommand {
    /// Every version with its time and the columns it added.
    History {
        /// The table, a checkpoint, or a schema location (by default the checkpoint,
        /// TABLE/_autoloader): a local directory or s3://BUCKET/PATH.
        #[arg(value_parser = location)]
        location: Location,
        /// The stream, for a table with several (its config name).
        #[arg(long, value_name = "NAME")]
        stream: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Columns added, removed or retyped between two versions.
    Diff {
        /// The table, a checkpoint, or a schema location.
        #[arg(value_parser = location)]
        location: Location,
        /// The version to compare from: N of _schemas/N.
        a: u64,
        /// The version to compare with.
        b: u64,
        /// The stream, for a table with several (its config name).
        #[arg(long, value_name = "NAME")]
        stream: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// A version's columns as DDL, one per line, as the `schema` option takes them (the
    /// latest version without N).
    Show {
        /// The table, a checkpoint, or a schema location.
        #[arg(value_parser = location)]
        location: Location,
        /// The version (`_schemas/N`).
        version: Option<u64>,
        /// The stream, for a table with several (its config name).
        #[arg(long, value_name = "NAME")]
        stream: Option<String>,
        /// Print JSON instead of text: version, time, reason, ddl, columns and partition
        /// columns.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Command::Events { .. }
            | Command::Status { .. }
            | Command::Schema { .. }
            | Command::Drift { .. }
            | Command::Table { .. }
            | Command::Options { .. }
    ) {
        quiet_broken_pipe();
    }
    // Generated from the clap definitions; nothing else to start.
    match &cli.command {
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "autoloader", &mut script);
            return write_stdout(&script);
        }
        Command::Man { out_dir } => return man_pages(out_dir.as_deref()),
        _ => {}
    }
    // A watcher runs for days: fewer malloc arenas keep its memory level. Set before any
    // thread starts; `--once` runs keep glibc's defaults (see `memory::limit_arenas`).
    if matches!(
        cli.command,
        Command::Ingest { once: false, .. } | Command::Run { once: false, .. }
    ) {
        autoloader::memory::limit_arenas();
    }
    init_logging(cli.verbose, cli.quiet);
    let result = state_io().and_then(|io| {
        let state = storage_settings(io.handle().clone());
        let result = run(cli, &state);
        // The state runtime outlives the main one, which run() has dropped.
        drop(io);
        result
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", error_text(&err));
            ExitCode::from(exit_code(err.class()))
        }
    }
}

/// `autoloader man`: the page on stdout, or every command's page into `dir`.
fn man_pages(dir: Option<&std::path::Path>) -> ExitCode {
    let cmd = Cli::command();
    let Some(dir) = dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut page)
            .expect("rendering into memory does not fail");
        return write_stdout(&page);
    };
    match std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(cmd, dir)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "error: cannot write the man pages into {}: {e}",
                dir.display()
            );
            ExitCode::from(exit_code(ErrorClass::Failed))
        }
    }
}

/// The reports print line by line, often into `| head`: a reader that stops early ends
/// the process quietly, as it ends `grep` or `ls`, instead of a `Broken pipe` panic with a
/// backtrace. Only for the reports: `ingest` and `run` keep Rust's default of ignoring
/// SIGPIPE, so a closed socket is an error they handle, never a kill.
fn quiet_broken_pipe() {
    #[cfg(unix)]
    // SAFETY: called at the start of `main`, before any other thread exists; it restores
    // the default disposition of one signal.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Writes generated text to stdout; a reader that stops early (`| head`) is no error.
fn write_stdout(bytes: &[u8]) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: cannot write to stdout: {e}");
            ExitCode::from(exit_code(ErrorClass::Failed))
        }
    }
}

/// The runtime that checkpoint and schema-store I/O on S3 runs on (one small thread).
fn state_io() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("autoloader-state-io")
        .enable_all()
        .build()
        .map_err(|source| Error::Io {
            what: "cannot start the state I/O runtime".into(),
            source,
        })
}

/// How state is kept, from the environment: S3 checkpoint caches under
/// `$AUTOLOADER_STATE_DIR`, else `$XDG_CACHE_HOME/autoloader`, else `~/.cache/autoloader`;
/// the lease length from `AUTOLOADER_LEASE_MS` (at least 300; tests use a short one).
fn storage_settings(io: tokio::runtime::Handle) -> StorageSettings {
    let var = std::env::var_os;
    let cache_root = var("AUTOLOADER_STATE_DIR")
        .map(PathBuf::from)
        .or_else(|| var("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("autoloader")))
        .or_else(|| var("HOME").map(|d| PathBuf::from(d).join(".cache/autoloader")))
        .unwrap_or_else(|| std::env::temp_dir().join("autoloader"));
    let lease = std::env::var("AUTOLOADER_LEASE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|ms| *ms >= 300)
        .map_or(autoloader::storage::DEFAULT_LEASE, Duration::from_millis);
    // The S3 configuration, as object_store's `from_env` would read it.
    let s3 = std::env::vars()
        .filter(|(k, _)| k.starts_with("AWS_"))
        .collect();
    StorageSettings {
        s3,
        temp_dir: std::env::temp_dir(),
        cache_root,
        lease,
        io: Some(io),
    }
}

/// The error and its causes on one line, skipping a cause that the text already holds
/// (library errors often print their source, and the chain would repeat it).
fn error_text(err: &Error) -> String {
    let mut text = String::new();
    let mut cause: Option<&dyn std::error::Error> = Some(err);
    while let Some(c) = cause {
        let part = c.to_string();
        if !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
        cause = c.source();
    }
    text
}

/// Log levels: autoloader's own at info, the libraries' at warn (delta-rs's from -vv); each `-v` opens
/// autoloader's detail first (`-v` debug, `-vv` trace with the libraries' info), then the
/// libraries' (`-vvv` debug, `-vvvv` trace). `RUST_LOG` decides instead when set.
fn log_filter(verbose: u8, quiet: bool) -> &'static str {
    // delta-rs logs the commit conflicts it retries (ERROR "conflict detected", "exceeded
    // maximum commit attempts" for a compaction that retries on a fresh snapshot) and every
    // failure it returns to us, which we report ourselves: heard from -vv on, even under -q.
    match (quiet, verbose) {
        (true, _) => "error,deltalake_core=off",
        (false, 0) => "autoloader=info,deltalake_core=off,warn",
        (false, 1) => "autoloader=debug,deltalake_core=off,warn",
        (false, 2) => "autoloader=trace,info",
        (false, 3) => "autoloader=trace,debug",
        (false, _) => "trace",
    }
}

fn init_logging(verbose: u8, quiet: bool) {
    let default = log_filter(verbose, quiet);
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        // Once the libraries speak (-vv), say which one.
        .with_target(verbose >= 2 && !quiet)
        .init();
}

fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|source| Error::Io {
            what: "cannot start the async runtime".into(),
            source,
        })
}

/// Parses `--since`: a time, or how long ago (`7d`).
fn parse_since(text: Option<&str>) -> Result<Option<i64>, Error> {
    let Some(text) = text else { return Ok(None) };
    let now = chrono::Utc::now().timestamp_millis();
    Ok(Some(reports::parse_since(text, now)?))
}

fn run_mode(once: bool, poll_interval: f64) -> RunMode {
    if once {
        RunMode::Once
    } else {
        RunMode::Watch {
            poll_interval: Duration::from_secs_f64(poll_interval.max(0.0)),
        }
    }
}

/// Prints `value` as JSON on stdout.
fn print_json(value: &impl serde::Serialize, pretty: bool) {
    let text = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    };
    println!("{}", text.expect("reports serialize"));
}

fn run(cli: Cli, state: &StorageSettings) -> Result<(), Error> {
    match cli.command {
        Command::Ingest {
            source,
            source_format,
            table,
            once,
            poll_interval,
            options: raw,
            flow,
            checkpoint,
            name,
            json,
            dry_run,
            worker,
            reporting,
        } => {
            let name = name.unwrap_or_else(|| IngestRequest::default_name(&table));
            let result = (|| {
                let checkpoint =
                    checkpoint.unwrap_or_else(|| IngestRequest::default_checkpoint(&table, None));
                let mut spec = StreamSpec::new(name.clone(), source, table, checkpoint);
                spec.source_format = source_format.unwrap_or_default();
                spec.options = raw
                    .iter()
                    .map(|o| options::split_key_value(o))
                    .collect::<Result<Vec<_>, _>>()?;
                spec.flow = flow.spec()?;
                spec.worker = worker;
                let (req, warnings) = spec.build(state)?;
                for w in warnings {
                    tracing::warn!("{w}");
                }
                let alerts = reporting.alert_settings(&[])?;
                if dry_run {
                    let plan = runtime()?.block_on(pipeline::dry_run(&req))?;
                    if json {
                        print_json(&plan, false);
                    } else {
                        print_dry_run(&plan);
                    }
                    // A definition the run would refuse: the same exit 2.
                    return match plan.definition.refusal(&req) {
                        Some(e) => Err(e.into()),
                        None => Ok(None),
                    };
                }
                let progress = TerminalProgress::new(!cli.quiet && std::io::stderr().is_terminal());
                let stop = StopFlag::new();
                runtime()?.block_on(async {
                    listen_for_signals(stop.clone());
                    let registry = start_metrics(reporting.metrics_addr.as_deref()).await?;
                    let hooks = Hooks {
                        alerts,
                        metrics: registry.as_ref().map(|r| r.stream(&req.name)),
                    };
                    let mode = run_mode(once, poll_interval);
                    Ok::<_, Error>(Some(
                        pipeline::run_stream(&req, &progress, &stop, mode, &hooks).await?,
                    ))
                })
            })();
            match (&result, json) {
                (Ok(None), _) => {}
                (Ok(Some(summary)), true) => {
                    print_json(&StreamReport::done(&name, summary), false);
                }
                (Ok(Some(summary)), false) => println!("{}", summary_line(summary)),
                (Err(e), true) => print_json(&StreamReport::failed(&name, e), false),
                (Err(_), false) => {}
            }
            result.map(|_| ())
        }
        Command::Run {
            config,
            once,
            stream,
            poll_interval,
            check,
            list,
            json,
            rerun_once,
            reporting,
        } => {
            let mut streams = load_config(&config, stream.as_deref(), state, &reporting)?;
            for name in &rerun_once {
                let flow = streams
                    .iter_mut()
                    .find(|(s, _)| &s.name == name)
                    .and_then(|(s, _)| s.request.once.as_mut())
                    .ok_or_else(|| {
                        OptionsError::Conflict(format!(
                            "--rerun-once {name}: {} has no ONCE flow (once = true) named {name}",
                            config.display()
                        ))
                    })?;
                flow.rerun = true;
            }
            if list {
                list_streams(&streams, json);
                Ok(())
            } else if check {
                let names: Vec<&str> = streams.iter().map(|(s, _)| s.name.as_str()).collect();
                println!(
                    "{}: valid, {} {}: {}",
                    config.display(),
                    names.len(),
                    plural(names.len() as u64, "stream"),
                    names.join(", ")
                );
                check_definitions(&streams, json)
            } else {
                run_config(streams, &reporting, run_mode(once, poll_interval), json)
            }
        }
        Command::Completions { .. } | Command::Man { .. } => {
            unreachable!("main handles them before any runtime starts")
        }
        Command::Events {
            table,
            checkpoint,
            stream,
            types,
            since,
            json,
        } => {
            let mut kinds = Vec::new();
            for t in &types {
                let Some(k) = EventKind::known(t) else {
                    let names: Vec<&str> = kind::ALL.iter().map(EventKind::as_str).collect();
                    return Err(OptionsError::Conflict(format!(
                        "unknown event type {t}; types: {}",
                        names.join(", ")
                    ))
                    .into());
                };
                kinds.push(k);
            }
            let found = reports::checkpoints(
                table.as_ref(),
                checkpoint.as_ref(),
                stream.as_deref(),
                state,
            )?;
            let events =
                reports::filtered_events(&found, state, &kinds, parse_since(since.as_deref())?)?;
            for e in events {
                if json {
                    print_json(&e, false);
                } else {
                    // Several streams: say whose each event is.
                    let whose = if found.len() > 1 {
                        format!("[{}] ", e.stream)
                    } else {
                        String::new()
                    };
                    println!(
                        "{}  {:<7}  {whose}{:<24}  {}",
                        e.time,
                        format!("{:?}", e.severity).to_lowercase(),
                        e.kind,
                        e.describe()
                    );
                }
            }
            Ok(())
        }
        Command::Status {
            table,
            checkpoint,
            stream,
            json,
        } => {
            let found = reports::checkpoints(
                table.as_ref(),
                checkpoint.as_ref(),
                stream.as_deref(),
                state,
            )?;
            let rt = runtime()?;
            let mut all = Vec::new();
            for c in &found {
                all.push(rt.block_on(reports::status(c, state))?);
            }
            if json && all.len() == 1 {
                print_json(&all[0], true);
            } else if json {
                print_json(&all, true);
            } else {
                for (i, st) in all.iter().enumerate() {
                    if i > 0 {
                        println!();
                    }
                    print_status(st);
                }
            }
            Ok(())
        }
        Command::Schema {
            command:
                SchemaCommand::History {
                    location,
                    stream,
                    json,
                },
        } => {
            let location = reports::schema_location(&location, stream.as_deref(), state)?;
            let history = reports::schema_history(&location, state)?;
            if json {
                print_json(&history, true);
            } else {
                for h in history {
                    let added = if h.added.is_empty() {
                        String::new()
                    } else {
                        format!("  added: {}", h.added.join(", "))
                    };
                    println!(
                        "_schemas/{:<3} {}  {:<9} {} columns{added}",
                        h.version, h.created_at, h.reason, h.columns
                    );
                }
            }
            Ok(())
        }
        Command::Schema {
            command:
                SchemaCommand::Diff {
                    location,
                    a,
                    b,
                    stream,
                    json,
                },
        } => {
            let location = reports::schema_location(&location, stream.as_deref(), state)?;
            let diff = reports::schema_diff(&location, state, a, b)?;
            if json {
                print_json(&diff, true);
            } else {
                for c in &diff.added {
                    println!("+ {c}");
                }
                for c in &diff.removed {
                    println!("- {c}");
                }
                for c in &diff.changed {
                    println!("~ {c}");
                }
            }
            Ok(())
        }
        Command::Schema {
            command:
                SchemaCommand::Show {
                    location,
                    version,
                    stream,
                    json,
                },
        } => {
            let location = reports::schema_location(&location, stream.as_deref(), state)?;
            let shown = reports::schema_show(&location, state, version)?;
            if json {
                print_json(&shown, true);
            } else {
                println!("{}", shown.columns.join(",\n"));
            }
            Ok(())
        }
        Command::Drift { table, since, json } => {
            let since = parse_since(since.as_deref())?;
            let report = runtime()?.block_on(reports::drift(&table, state, since))?;
            if json {
                print_json(&report, true);
            } else {
                print_drift(&report);
            }
            Ok(())
        }
        Command::Reset {
            tables,
            config,
            all,
            checkpoints_only,
            keep_schema,
            dry_run,
            yes,
            json,
        } => reset(
            ResetArgs {
                tables,
                config,
                all,
                options: autoloader::reset::ResetOptions {
                    checkpoints_only,
                    keep_schema,
                    skip_guarded: all,
                    dry_run,
                },
                dry_run,
                yes,
                json,
            },
            state,
        ),
        Command::Optimize {
            table,
            target_size,
            min_files,
            condition,
            json,
        } => {
            use autoloader::target::optimize;
            let settings = optimize::OptimizeSettings::new(
                target_size.as_deref(),
                min_files,
                condition.as_deref(),
            )?;
            check_s3(state, [&table])?;
            let report = runtime()?.block_on(optimize::optimize(&table, state, &settings))?;
            if json {
                print_json(&report, false);
            } else if let Some(version) = report.version {
                println!(
                    "{}: {} -> {} ({} small {} of {} {} rewritten into {}; {} -> {}) in \
                     version {version}, {:.1} s",
                    report.table,
                    files(report.files_before),
                    files(report.files_after),
                    report.files_removed,
                    plural(report.files_removed as u64, "file"),
                    report.partitions_optimized,
                    plural(report.partitions_optimized as u64, "partition"),
                    files(report.files_added),
                    human_bytes(report.bytes_removed as f64),
                    human_bytes(report.bytes_added as f64),
                    report.seconds
                );
            } else {
                println!(
                    "{}: {}, nothing to compact ({} with fewer small files than \
                     --min-files); nothing committed",
                    report.table,
                    files(report.files_before),
                    match report.partitions_skipped {
                        0 => "no partition".to_string(),
                        n => format!("{n} {}", plural(n as u64, "partition")),
                    }
                );
            }
            Ok(())
        }
        Command::Vacuum {
            table,
            retain,
            dry_run,
            force,
            json,
        } => {
            use autoloader::target::vacuum;
            let settings = vacuum::VacuumSettings::new(retain.as_deref(), dry_run, force)?;
            check_s3(state, [&table])?;
            let report = runtime()?.block_on(vacuum::vacuum(&table, state, &settings))?;
            if json {
                print_json(&report, false);
            } else {
                for f in &report.files {
                    println!("{f}");
                }
                let verb = if report.dry_run {
                    "would delete"
                } else {
                    "deleted"
                };
                println!(
                    "{}: {verb} {} files (retention {}h)",
                    report.table,
                    report.files.len(),
                    report.retain_hours
                );
            }
            Ok(())
        }
        Command::Options { json } => {
            print!("{}", options::describe(json));
            print!(
                "{}",
                describe_settings(
                    "cdc.",
                    "APPLY CHANGES (-o cdc.KEY=VALUE, or [stream.cdc] in a config file)",
                    autoloader::cdc::SETTINGS,
                    json
                )
            );
            print!(
                "{}",
                describe_settings(
                    "snapshot.",
                    "Snapshot flows (-o snapshot.KEY=VALUE, or [stream.snapshot] in a config file)",
                    autoloader::snapshot::SETTINGS,
                    json
                )
            );
            Ok(())
        }
        Command::Table {
            command: TableCommand::Show { table, json },
        } => {
            let info = runtime()?.block_on(autoloader::tables::show(&table, state))?;
            if json {
                print_json(&info, true);
            } else {
                print_table(&info);
            }
            Ok(())
        }
        Command::Table {
            command: TableCommand::Set { table, properties },
        } => {
            let pairs = properties
                .iter()
                .map(|p| autoloader::tables::parse_property(p))
                .collect::<Result<Vec<_>, _>>()?;
            match runtime()?.block_on(autoloader::tables::set(&table, state, &pairs))? {
                Some(version) => println!("{table}: properties set in version {version}"),
                None => println!("{table}: already has these properties; nothing committed"),
            }
            Ok(())
        }
    }
}

struct ResetArgs {
    tables: Vec<Location>,
    config: Option<PathBuf>,
    all: bool,
    options: autoloader::reset::ResetOptions,
    dry_run: bool,
    yes: bool,
    json: bool,
}

/// `autoloader reset`: the precheck (guard, locks), the plan, the confirmation, the reset.
fn reset(args: ResetArgs, state: &StorageSettings) -> Result<(), Error> {
    use autoloader::reset;
    let streams: Vec<IngestRequest> = match &args.config {
        Some(path) => autoloader::config::load(path, None, state)?
            .into_iter()
            .map(|s| s.request)
            .collect(),
        None => Vec::new(),
    };
    let mut tables = args.tables.clone();
    if args.all {
        for s in &streams {
            if !tables.iter().any(|t| t.resolved() == s.table.resolved()) {
                tables.push(s.table.clone());
            }
        }
    }
    check_s3(state, &tables)?;
    // Refused before any lock is taken: nothing is touched.
    if !args.yes && !args.dry_run && !std::io::stdin().is_terminal() {
        return Err(OptionsError::Conflict(
            "reset removes rows or progress and asks for confirmation: stdin is not a \
             terminal, so give --yes to reset (or --dry-run to see what it would do)"
                .into(),
        )
        .into());
    }
    let rt = runtime()?;
    let prepared = rt.block_on(reset::prepare(&tables, &streams, args.options, state))?;
    if args.json && args.dry_run {
        print_json(&prepared.plans, true);
    } else if !args.json {
        for plan in &prepared.plans {
            print_reset_plan(plan, args.dry_run, args.all);
        }
    }
    if args.dry_run {
        // A guarded table named (not skipped by --all): shown, and refused as the reset
        // would be.
        return match prepared.plans.iter().find(|p| p.guarded && !args.all) {
            Some(p) => Err(reset::ResetError::Guarded {
                table: p.table.clone(),
            }
            .into()),
            None => Ok(()),
        };
    }
    if !args.yes {
        eprint!("Reset these tables? [y/N] ");
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES") {
            eprintln!("Nothing was changed.");
            return Ok(());
        }
    }
    let done = rt.block_on(reset::execute(prepared))?;
    if args.json {
        print_json(&done, true);
    } else {
        for plan in done.iter().filter(|p| !p.guarded) {
            println!(
                "{}: reset (generation {}, version {}); old progress kept in {}",
                plan.table,
                plan.generation.unwrap_or_default(),
                plan.version,
                if plan.kept.is_empty() {
                    "nothing (no flow had progress)".to_string()
                } else {
                    plan.kept.join(", ")
                }
            );
        }
    }
    Ok(())
}

/// What a reset of one table removes and keeps.
/// `skip_guarded` (`--all`): a guarded table is skipped; otherwise its plan is shown as
/// refused (a dry run's).
fn print_reset_plan(plan: &autoloader::reset::TablePlan, dry_run: bool, skip_guarded: bool) {
    let would = if dry_run { "would " } else { "" };
    if plan.guarded && skip_guarded {
        println!("{}: skipped (pipelines.reset.allowed=false)", plan.table);
        return;
    }
    if plan.guarded {
        println!(
            "{}: refused: exit 4 (pipelines.reset.allowed=false); the plan it guards:",
            plan.table
        );
    }
    let rows = plan
        .rows
        .map_or_else(String::new, |r| format!(", {r} {}", plural(r, "row")));
    if plan.full {
        println!(
            "{}: {would}remove {} data {}{rows} in one commit after version {} (history, \
             properties and schema kept; time travel still reads them)",
            plan.table,
            plan.files,
            plural(plan.files as u64, "file"),
            plan.version
        );
    } else {
        println!(
            "{}: {would}keep its {} data {}{rows}; only the flows' progress is reset",
            plan.table,
            plan.files,
            plural(plan.files as u64, "file")
        );
    }
    for f in &plan.flows {
        let name = f.name.as_deref().unwrap_or("(unnamed)");
        if !f.exists {
            println!(
                "  flow {name}: no checkpoint yet at {}; nothing to reset",
                f.checkpoint
            );
            continue;
        }
        let schema = if plan.keep_schema {
            format!("schema kept at {}", f.schema_location)
        } else {
            format!("schema at {} set aside, inferred again", f.schema_location)
        };
        let moved = if dry_run { "would be" } else { "is" };
        let once = match (f.once, plan.full, f.source_files) {
            (false, _, _) => String::new(),
            (true, true, Some(n)) => format!(
                " (ONCE flow: it runs again, re-reading its {n} source {})",
                plural(n as u64, "file")
            ),
            (true, true, None) => " (ONCE flow: it runs again)".to_string(),
            (true, false, _) => " (ONCE flow: it does not run again)".to_string(),
        };
        println!(
            "  flow {name}{once}: checkpoint {} {moved} set aside into _reset-N (kept); {schema}",
            f.checkpoint
        );
    }
    match plan.source_files() {
        Some(n) if !plan.full => println!(
            "  the next run re-reads {n} source {} from the start (as modifiedAfter allows): \
             rows already in the table can land again",
            plural(n as u64, "file")
        ),
        Some(n) => println!(
            "  the next run re-reads {n} source {} (as modifiedAfter allows)",
            plural(n as u64, "file")
        ),
        None if !plan.full => println!(
            "  the next run re-reads the sources from the start: rows already in the table can \
             land again (give --config to count the files)"
        ),
        None => {}
    }
}

async fn start_metrics(addr: Option<&str>) -> Result<Option<Registry>, Error> {
    let Some(addr) = addr else { return Ok(None) };
    let io = |source| Error::Io {
        what: format!("cannot serve metrics on {addr}"),
        source,
    };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(io)?;
    let registry = Registry::new();
    tracing::info!(addr = %listener.local_addr().map_err(io)?, "Serving metrics at /metrics.");
    tokio::spawn(autoloader::telemetry::metrics::serve(
        listener,
        registry.clone(),
    ));
    Ok(Some(registry))
}

/// Refuses S3 settings that cannot work (exit 2, saying what to set) when any of
/// `locations` is on S3, before anything is opened.
fn check_s3<'a>(
    state: &StorageSettings,
    locations: impl IntoIterator<Item = &'a Location>,
) -> Result<(), Error> {
    if locations.into_iter().any(|l| matches!(l, Location::S3(_))) {
        autoloader::storage::check_s3_settings(&state.s3)?;
    }
    Ok(())
}

/// Loads and checks a config file: every stream's options, locations, S3 settings and
/// webhooks (what `run --check` reports), each stream with its alert settings.
fn load_config(
    config: &std::path::Path,
    only: Option<&str>,
    state: &StorageSettings,
    reporting: &Reporting,
) -> Result<Vec<(NamedStream, AlertSettings)>, Error> {
    let streams = autoloader::config::load(config, only, state)?;
    // The command line's webhooks first, so that the file is named only for its own.
    reporting.alert_settings(&[])?;
    let mut prepared = Vec::new();
    for stream in streams {
        // A webhook of the file is named with its file and stream, as its options are.
        let alerts = reporting
            .alert_settings(&stream.alert_webhooks)
            .map_err(|e| {
                Error::Config(autoloader::config::ConfigError::Invalid {
                    path: config.to_path_buf(),
                    message: format!("stream \"{}\": {}", stream.request.name, error_text(&e)),
                })
            })?;
        prepared.push((stream, alerts));
    }
    Ok(prepared)
}

/// `run --check`: each stream's definition against the one its checkpoint recorded, with
/// each change's class; exit 2 when one needs a full refresh (the run would refuse).
fn check_definitions(streams: &[(NamedStream, AlertSettings)], json: bool) -> Result<(), Error> {
    let rt = runtime()?;
    let mut refusal = None;
    for (s, _) in streams {
        let review = rt.block_on(pipeline::definition::review(&s.request))?;
        if json {
            print_json(&review, false);
        } else {
            print_review(&review);
        }
        if refusal.is_none() {
            refusal = review.refusal(&s.request);
        }
    }
    match refusal {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// `autoloader options`: the CDC or snapshot settings, from the table their parser checks
/// keys against, as text or one JSON object a line (as the options').
fn describe_settings(prefix: &str, title: &str, rows: &[(&str, &str, &str)], json: bool) -> String {
    use autoloader::flow::definition::class_of;
    let mut out = String::new();
    if json {
        for (key, default, meaning) in rows {
            let key = format!("{prefix}{key}");
            let on_change = class_of(&key).name();
            let line = serde_json::json!({
                "key": key, "default": default, "meaning": meaning, "supported": true,
                "aliases": [], "instead": null, "onChange": on_change,
            });
            out.push_str(&format!("{line}\n"));
        }
        return out;
    }
    let width = rows
        .iter()
        .map(|(k, _, _)| k.len() + prefix.len())
        .max()
        .unwrap_or(0);
    let dwidth = rows.iter().map(|(_, d, _)| d.len()).max().unwrap_or(0);
    out.push_str(&format!("\n{title}:\n"));
    for (key, default, meaning) in rows {
        out.push_str(&format!(
            "{:width$}  {default:dwidth$}  {meaning}\n",
            format!("{prefix}{key}")
        ));
    }
    out
}

/// A stream's definition review, one line a change.
fn print_review(review: &pipeline::definition::Review) {
    println!("[{}] definition: {}", review.stream, review.status);
    for c in &review.changes {
        println!(
            "  {c}: {}",
            autoloader::flow::definition::on_change_label(c.on_change)
        );
    }
}

/// `run --list`: each stream's name, source, table and checkpoint.
fn list_streams(streams: &[(NamedStream, AlertSettings)], json: bool) {
    for (s, _) in streams {
        let req = &s.request;
        if json {
            print_json(
                &serde_json::json!({
                    "name": s.name,
                    "source": req.source.describe(),
                    "table": req.table.to_string(),
                    "checkpoint": req.checkpoint.to_string(),
                    "schemaLocation": req.settings.schema_location.to_string(),
                }),
                false,
            );
        } else {
            println!("{}", s.name);
            println!("  source:     {}", req.source.describe());
            println!("  table:      {}", req.table);
            println!("  checkpoint: {}", req.checkpoint);
        }
    }
}

/// Runs the streams of a config file concurrently; each prints its own summary line (or
/// JSON object).
fn run_config(
    streams: Vec<(NamedStream, AlertSettings)>,
    reporting: &Reporting,
    mode: RunMode,
    json: bool,
) -> Result<(), Error> {
    let prepared: Vec<_> = streams
        .into_iter()
        .map(|(s, alerts)| (s.request, alerts))
        .collect();
    // Several streams: each is checked before any runs, so a mistake in one flow writes
    // nothing for the others either.
    if prepared.len() > 1 {
        let rt = runtime()?;
        let mut failed = Vec::new();
        let mut classes = Vec::new();
        for (req, _) in &prepared {
            if let Err(e) = rt.block_on(pipeline::precheck(req)) {
                let e = Error::from(e);
                if json {
                    print_json(&StreamReport::failed(&req.name, &e), false);
                }
                eprintln!("error: stream \"{}\": {}", req.name, error_text(&e));
                classes.push(e.class());
                failed.push(req.name.clone());
            }
        }
        if !failed.is_empty() {
            eprintln!("Nothing was run: every stream of the file is checked before any runs.");
            return Err(Error::StreamsFailed {
                failed,
                class: streams_class(&classes),
            });
        }
    }
    let stop = StopFlag::new();
    let results = runtime()?.block_on(async {
        listen_for_signals(stop.clone());
        let registry = start_metrics(reporting.metrics_addr.as_deref()).await?;
        let streams = prepared
            .into_iter()
            .map(|(req, alerts)| {
                let metrics = registry.as_ref().map(|r| r.stream(&req.name));
                (req, Hooks { alerts, metrics })
            })
            .collect();
        Ok::<_, Error>(pipeline::run_streams(streams, &stop, mode).await)
    })?;
    let mut failed = Vec::new();
    let mut classes = Vec::new();
    for (name, result) in results {
        match result {
            Ok(summary) if json => print_json(&StreamReport::done(&name, &summary), false),
            Ok(summary) => println!("[{name}] {}", summary_line(&summary)),
            Err(e) => {
                let e = Error::from(e);
                if json {
                    print_json(&StreamReport::failed(&name, &e), false);
                }
                eprintln!("error: stream \"{name}\": {}", error_text(&e));
                classes.push(e.class());
                failed.push(name);
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::StreamsFailed {
            failed,
            class: streams_class(&classes),
        })
    }
}

/// The exit class of failed streams: theirs when they agree (a lone stream that stopped on
/// a schema change is 3, as from `ingest`); failures of different kinds are 1.
fn streams_class(classes: &[ErrorClass]) -> ErrorClass {
    match classes.split_first() {
        Some((first, rest)) if rest.iter().all(|c| c == first) => *first,
        _ => ErrorClass::Failed,
    }
}

/// SIGINT or SIGTERM: finish the batch in flight, then stop (exit 0). A second signal
/// exits at once; exactly-once holds either way.
fn listen_for_signals(stop: StopFlag) {
    tokio::spawn(async move {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            return;
        };
        for round in 0.. {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            if round > 0 {
                eprintln!("Second signal: exiting now.");
                std::process::exit(EXIT_INTERRUPTED);
            }
            tracing::info!("Stopping after the batch in flight.");
            stop.stop();
        }
    });
}

fn print_status(st: &reports::Status) {
    let opt = |v: Option<u64>| v.map_or_else(|| "?".to_string(), |n| n.to_string());
    if let Some(name) = &st.stream {
        println!("stream:         {name}");
    }
    println!("checkpoint:     {}", st.checkpoint);
    println!("stream id:      {}", st.stream_id.as_deref().unwrap_or("?"));
    println!("source:         {}", st.source.as_deref().unwrap_or("?"));
    match (&st.running, &st.live_at) {
        (Some(holder), Some(at)) => println!("running:        {holder} (figures as of {at})"),
        (Some(holder), None) => println!("running:        {holder}"),
        (None, _) => println!("running:        no"),
    }
    println!("schema version: {}", opt(st.schema_version));
    // The summary line's units: `1 batch`, `3.03 kB`.
    let count = |n: Option<u64>, one: &str| match n {
        Some(n) => format!("{n} {}", plural(n, one)),
        None => format!("? {}", plural(0, one)),
    };
    println!(
        "ingested:       {}, {}, {}, {}, {}",
        count(st.files_ingested, "file"),
        count(Some(st.batches), "batch"),
        count(Some(st.rows), "row"),
        count(Some(st.rescued_rows), "rescued row"),
        human_bytes(st.bytes as f64)
    );
    println!("pending:        {}", count(st.files_pending, "file"));
    if let Some(c) = &st.changes {
        println!(
            "changes:        {} inserted, {} updated, {} deleted, {} stale, {} below a truncate",
            c.rows_inserted, c.rows_updated, c.rows_deleted, c.records_stale, c.records_truncated
        );
    }
    match &st.last_batch {
        Some(b) => println!("last batch:     {}", b["time"].as_str().unwrap_or("?")),
        None => println!("last batch:     none"),
    }
    match &st.last_error {
        Some(e) => println!(
            "last error:     {} {}",
            e["time"].as_str().unwrap_or("?"),
            e["error"].as_str().unwrap_or("?")
        ),
        None => println!("last error:     none"),
    }
    if let Some(d) = &st.definition {
        println!("definition:     since batch {}", d.since_batch);
        for (setting, value) in d.definition.iter() {
            println!("  {setting:<34} {value}");
        }
    }
    if !st.workers.is_empty() {
        println!("workers:");
        println!(
            "  {:>4}  {:>10}  {:>13}  {:>9}  holder",
            "slot", "last batch", "pending files", "lease age"
        );
        for w in &st.workers {
            println!(
                "  {:>4}  {:>10}  {:>13}  {:>9}  {}",
                w.slot,
                w.last_batch
                    .map_or_else(|| "none".into(), |b| b.to_string()),
                opt(w.pending_files),
                w.lease_age_seconds
                    .map_or_else(|| "-".into(), |s| format!("{s:.1}s")),
                w.holder.as_deref().unwrap_or("free"),
            );
        }
    }
}

fn print_drift(r: &reports::DriftReport) {
    println!(
        "{:<12} {:>12} {:>12} {:>9}",
        "day", "rows", "rescued", "share"
    );
    for d in &r.days {
        println!(
            "{:<12} {:>12} {:>12} {:>8.2}%",
            d.day,
            d.rows,
            d.rescued_rows,
            d.rescued_share * 100.0
        );
    }
    println!();
    println!(
        "{:<24} {:>11} {:<21} {:<21} example file",
        "rescued key", "occurrences", "first seen", "last seen"
    );
    for k in &r.keys {
        println!(
            "{:<24} {:>11} {:<21} {:<21} {}",
            k.key, k.occurrences, k.first_seen, k.last_seen, k.example_file
        );
    }
    if r.keys.is_empty() {
        println!("(nothing rescued)");
    }
}

/// One stream's outcome as `--json` prints it: its name, `"status"`, and the summary's
/// figures or the error with its exit code.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct StreamReport<'a> {
    stream: &'a str,
    status: &'static str,
    #[serde(flatten)]
    summary: Option<&'a Summary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_code: Option<u8>,
}

impl<'a> StreamReport<'a> {
    fn done(stream: &'a str, summary: &'a Summary) -> Self {
        StreamReport {
            stream,
            status: "done",
            summary: Some(summary),
            error: None,
            exit_code: None,
        }
    }

    fn failed(stream: &'a str, error: &Error) -> Self {
        StreamReport {
            stream,
            status: "failed",
            summary: None,
            error: Some(error_text(error)),
            exit_code: Some(exit_code(error.class())),
        }
    }
}

/// The noun for `n` things: `one` when `n` is 1, else its plural.
/// `ingest --dry-run`, as text.
fn print_dry_run(plan: &pipeline::DryRun) {
    println!("Dry run: nothing was written.");
    let bytes: u64 = plan.ingest.iter().map(|f| f.size).sum();
    println!(
        "Would ingest {} {} ({}) in {} {}{}:",
        plan.ingest.len(),
        plural(plan.ingest.len() as u64, "file"),
        human_bytes(bytes as f64),
        plan.batches,
        plural(plan.batches as u64, "batch"),
        plan.format
            .as_ref()
            .map_or_else(String::new, |f| format!(", as {f}"))
    );
    for f in &plan.ingest {
        let note = f
            .reason
            .as_ref()
            .map_or_else(String::new, |r| format!("  ({r})"));
        println!(
            "  batch {}  {}  {}{note}",
            f.batch.unwrap_or_default(),
            f.file,
            human_bytes(f.size as f64)
        );
    }
    if !plan.skipped.is_empty() {
        println!(
            "Would not take {} {}:",
            plan.skipped.len(),
            plural(plan.skipped.len() as u64, "file")
        );
        for f in &plan.skipped {
            println!("  {}: {}", f.file, f.reason.as_deref().unwrap_or(""));
        }
    }
    print_review(&plan.definition);
    match &plan.schema {
        Some(schema) => {
            println!("Schema ({}):", schema.origin);
            for c in &schema.columns {
                println!("  {c}");
            }
            if !schema.partition_columns.is_empty() {
                println!("  partitioned by {}", schema.partition_columns.join(", "));
            }
            if !schema.left_out.is_empty() {
                println!("  not in the table (flow): {}", schema.left_out.join(", "));
            }
            if let Some(condition) = &schema.condition {
                println!("  only rows where: {condition}");
            }
        }
        None => println!("Schema: none yet (no file to infer it from)."),
    }
}

/// `table show`, as text.
fn print_table(info: &autoloader::tables::TableInfo) {
    println!("table     {}", info.location);
    println!("version   {}", info.version);
    println!("files     {}", info.files);
    println!("properties:");
    if info.properties.is_empty() {
        println!("  (none)");
    }
    for (k, v) in &info.properties {
        println!("  {k} = {v}");
    }
    println!("columns:");
    for c in &info.columns {
        println!("  {c}");
    }
    println!("flows:");
    if info.flows.is_empty() {
        println!("  (no checkpoint under the table)");
    }
    for f in &info.flows {
        println!(
            "  {}  {}",
            f.name.as_deref().unwrap_or("(unnamed)"),
            f.checkpoint
        );
    }
}

/// `1 file`, `30 files`.
fn files(n: usize) -> String {
    format!("{n} {}", plural(n as u64, "file"))
}

fn plural(n: u64, one: &str) -> String {
    match (n, one) {
        (1, _) => one.to_string(),
        (_, "batch") => "batches".to_string(),
        _ => format!("{one}s"),
    }
}

/// A byte count in decimal units (kB, MB, GB, as MB/s is), three digits or so.
fn human_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["kB", "MB", "GB", "TB", "PB"];
    if bytes < 1000.0 {
        return format!("{bytes:.0} B");
    }
    let mut value = bytes;
    let mut unit = "B";
    for u in UNITS {
        if value < 1000.0 {
            break;
        }
        value /= 1000.0;
        unit = u;
    }
    if value < 10.0 {
        format!("{value:.2} {unit}")
    } else if value < 100.0 {
        format!("{value:.1} {unit}")
    } else {
        format!("{value:.0} {unit}")
    }
}

/// The one line printed at the end of a run.
fn summary_line(s: &Summary) -> String {
    match &s.once {
        Some(note) if s.batches == 0 && s.files == 0 => return format!("ONCE flow: {note}"),
        Some(note) => return format!("{}; ONCE flow: {note}", run_summary_line(s)),
        None => {}
    }
    run_summary_line(s)
}

fn run_summary_line(s: &Summary) -> String {
    let rate = if s.seconds > 0.0 {
        format!(", {}/s", human_bytes(s.bytes as f64 / s.seconds))
    } else {
        String::new()
    };
    let schema = s
        .schema_version
        .map_or_else(|| "none".to_string(), |v| v.to_string());
    let schema = if s.evolutions.is_empty() {
        schema
    } else {
        format!("{schema} (evolved: {})", s.evolutions.join("; "))
    };
    let mut skipped = if s.skipped_files > 0 {
        format!(
            ", {} skipped {}",
            s.skipped_files,
            plural(s.skipped_files, "file")
        )
    } else {
        String::new()
    };
    if s.unsettled_files > 0 {
        skipped += &format!(
            ", {} {} still being written (left for the next run)",
            s.unsettled_files,
            plural(s.unsettled_files, "file")
        );
    }
    if s.filtered_rows > 0 {
        // Rows the flow's `where` left out: read, counted, not in the table.
        skipped += &format!(
            ", {} filtered {}",
            s.filtered_rows,
            plural(s.filtered_rows, "row")
        );
    }
    if let Some(c) = &s.changes {
        // A CDC flow: what its changes did to the table.
        skipped += &format!(
            ", {} inserted, {} updated, {} deleted, {} stale",
            c.inserted, c.updated, c.deleted, c.stale
        );
        // As `status` says them: records below a truncate are not stale ones.
        if c.truncated > 0 {
            skipped += &format!(", {} below a truncate", c.truncated);
        }
    }
    if s.unchanged_snapshots > 0 {
        skipped += &format!(
            ", {} unchanged {} not appended again",
            s.unchanged_snapshots,
            plural(s.unchanged_snapshots, "snapshot")
        );
    }
    if s.quarantined_files > 0 {
        skipped += &format!(
            ", {} quarantined {}",
            s.quarantined_files,
            plural(s.quarantined_files, "file")
        );
    }
    format!(
        "ingested {} {}, {} {}, {}, {} rescued {}{skipped}, schema version {schema}, {} {}, {:.2} s{rate}",
        s.files,
        plural(s.files, "file"),
        s.rows,
        plural(s.rows, "row"),
        human_bytes(s.bytes as f64),
        s.rescued_rows,
        plural(s.rescued_rows, "row"),
        s.batches,
        plural(s.batches, "batch"),
        s.seconds,
    )
}

/// A byte-based progress bar on stderr, shown only on a terminal.
struct TerminalProgress {
    bar: Option<ProgressBar>,
}

impl TerminalProgress {
    fn new(enabled: bool) -> Self {
        TerminalProgress {
            bar: enabled.then(ProgressBar::hidden),
        }
    }
}

impl Progress for TerminalProgress {
    fn start(&self, files: u64, bytes: u64) {
        if let Some(bar) = &self.bar {
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            bar.set_length(bytes);
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:40} {bytes}/{total_bytes} ({bytes_per_sec}) {msg}")
                    .expect("the template is valid"),
            );
            bar.set_message(format!("{files} files"));
        }
    }

    fn file_done(&self, bytes: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(bytes);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
