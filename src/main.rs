//! The `autoloader` command line: argument parsing, logging, progress, the summary line and
//! exit codes. Everything else lives in the library.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use autoloader::checkpoint::CheckpointError;
use autoloader::discovery::Source;
use autoloader::ingest::{self, IngestError, IngestRequest, Progress, StopFlag, Summary};
use autoloader::options::{self, OptionsError};
use autoloader::watch::{WatchTiming, run_watch};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

/// Exit code for invalid arguments or options.
const EXIT_USAGE: u8 = 2;
/// Exit code after writing a new schema version with `cloudFiles.stopOnSchemaChange=true`:
/// run again to continue with it.
const EXIT_SCHEMA_CHANGED: u8 = 3;
/// Exit code when another process holds the checkpoint (EX_TEMPFAIL).
const EXIT_LOCKED: u8 = 75;

#[derive(Parser)]
#[command(
    name = "autoloader",
    version,
    about = "Auto Loader without Databricks: landing folders into Delta Lake, exactly once."
)]
struct Cli {
    /// More log output (-v info details, -vv debug).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Only errors on stderr.
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Ingest new files from SOURCE into the Delta table at TABLE.
    Ingest {
        /// Landing folder to read (a local directory).
        source: String,
        /// Delta table location (a directory, created on first commit).
        table: PathBuf,
        /// Take every file present now, in batches, then exit (Auto Loader's AvailableNow).
        /// Without it, keep watching and ingest files as they land until SIGINT or SIGTERM.
        #[arg(long)]
        once: bool,
        /// Watch mode: list the source at least this often, in seconds (file events wake
        /// it sooner).
        #[arg(long, value_name = "SECS", default_value_t = 10.0)]
        poll_interval: f64,
        /// Auto Loader option, repeatable: -o cloudFiles.inferColumnTypes=true
        #[arg(short = 'o', long = "option", value_name = "KEY=VALUE")]
        options: Vec<String>,
        /// Where the stream keeps its progress [default: TABLE/_autoloader].
        #[arg(long, value_name = "DIR")]
        checkpoint: Option<PathBuf>,
    },
    /// Run every stream of a TOML config file concurrently (see schemas/config.schema.json).
    Run {
        /// The config file.
        config: PathBuf,
        /// Ingest what has landed, then exit.
        #[arg(long)]
        once: bool,
        /// Run only this stream.
        #[arg(long, value_name = "NAME")]
        stream: Option<String>,
        /// Watch mode: list each source at least this often, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 10.0)]
        poll_interval: f64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose, cli.quiet);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(exit_code(&err))
        }
    }
}

fn exit_code(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if cause.downcast_ref::<OptionsError>().is_some()
            || cause
                .downcast_ref::<autoloader::config::ConfigError>()
                .is_some()
        {
            return EXIT_USAGE;
        }
        if let Some(CheckpointError::Locked { .. }) = cause.downcast_ref::<CheckpointError>() {
            return EXIT_LOCKED;
        }
        match cause.downcast_ref::<IngestError>() {
            Some(IngestError::Checkpoint(CheckpointError::Locked { .. })) => return EXIT_LOCKED,
            Some(IngestError::SchemaChanged { .. }) => return EXIT_SCHEMA_CHANGED,
            _ => {}
        }
    }
    1
}

fn init_logging(verbose: u8, quiet: bool) {
    let default = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "autoloader=info,warn",
        (false, 1) => "autoloader=debug,info",
        (false, _) => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run {
            config,
            once,
            stream,
            poll_interval,
        } => run_config(&config, once, stream.as_deref(), poll_interval),
        Command::Ingest {
            source,
            table,
            once,
            poll_interval,
            options: raw,
            checkpoint,
        } => {
            let pairs = raw
                .iter()
                .map(|o| options::split_key_value(o))
                .collect::<Result<Vec<_>, _>>()?;
            let checkpoint = checkpoint.unwrap_or_else(|| table.join("_autoloader"));
            let (settings, warnings) = options::resolve(&pairs, &checkpoint)?;
            for w in warnings {
                tracing::warn!("{w}");
            }
            let source = Source::parse(&source)?;
            let req = IngestRequest {
                source,
                table,
                checkpoint,
                settings,
            };
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            let progress = TerminalProgress::new(!cli.quiet && std::io::stderr().is_terminal());
            let stop = StopFlag::new();
            let summary = runtime.block_on(async {
                listen_for_signals(stop.clone());
                if once {
                    ingest::run_once(&req, &progress, &stop).await
                } else {
                    let timing = WatchTiming {
                        poll_interval: Duration::from_secs_f64(poll_interval.max(0.05)),
                        settle: req.settings.settle_time,
                    };
                    run_watch(&req, &progress, &stop, timing).await
                }
            })?;
            println!("{}", summary_line(&summary));
            Ok(())
        }
    }
}

/// Runs the streams of a config file concurrently; each prints its own summary line.
fn run_config(
    config: &std::path::Path,
    once: bool,
    only: Option<&str>,
    poll_interval: f64,
) -> anyhow::Result<()> {
    let streams = autoloader::config::load(config, only)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let stop = StopFlag::new();
    let results = runtime.block_on(async {
        listen_for_signals(stop.clone());
        let mut tasks = Vec::new();
        for s in streams {
            let stop = stop.clone();
            tasks.push(tokio::spawn(async move {
                let req = s.request;
                let result = if once {
                    ingest::run_once(&req, &ingest::NoProgress, &stop).await
                } else {
                    let timing = WatchTiming {
                        poll_interval: Duration::from_secs_f64(poll_interval.max(0.05)),
                        settle: req.settings.settle_time,
                    };
                    run_watch(&req, &ingest::NoProgress, &stop, timing).await
                };
                (s.name, result)
            }));
        }
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await);
        }
        results
    });
    let mut failed = Vec::new();
    for r in results {
        match r {
            Ok((name, Ok(summary))) => println!("[{name}] {}", summary_line(&summary)),
            Ok((name, Err(e))) => {
                eprintln!("error: stream \"{name}\": {e}");
                failed.push(name);
            }
            Err(e) => {
                eprintln!("error: a stream task failed: {e}");
                failed.push("?".into());
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "{} of the streams failed: {}",
            failed.len(),
            failed.join(", ")
        ))
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
                std::process::exit(130);
            }
            tracing::info!("Stopping after the batch in flight.");
            stop.stop();
        }
    });
}

/// The one line printed at the end of a run.
fn summary_line(s: &Summary) -> String {
    let mb = s.bytes as f64 / 1e6;
    let rate = if s.seconds > 0.0 { mb / s.seconds } else { 0.0 };
    let schema = s
        .schema_version
        .map_or_else(|| "none".to_string(), |v| v.to_string());
    let schema = if s.evolutions.is_empty() {
        schema
    } else {
        format!("{schema} (evolved: {})", s.evolutions.join("; "))
    };
    let skipped = if s.skipped_files > 0 {
        format!(", {} skipped files", s.skipped_files)
    } else {
        String::new()
    };
    format!(
        "ingested {} files, {} rows, {} bytes, {} rescued rows{skipped}, schema version {schema}, {} batches, {:.2} s, {:.1} MB/s",
        s.files, s.rows, s.bytes, s.rescued_rows, s.batches, s.seconds, rate
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
