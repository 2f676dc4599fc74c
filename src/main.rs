//! The `autoloader` binary: parses the command line, sets up logging and the runtimes,
//! runs the command (`cli/`) and turns its outcome into an exit code.

mod cli;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use autoloader::storage::StorageSettings;
use autoloader::{Error, ErrorClass};
use clap::{CommandFactory, Parser};

use cli::args::{Cli, Command, IngestArgs, RunArgs};

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
    // thread starts; a `--once` run keeps glibc's arenas (see `memory::limit_arenas`) and
    // keeps freed memory for its next batch (`memory::prefer_reusing_memory`).
    match &cli.command {
        Command::Ingest(IngestArgs { once: false, .. })
        | Command::Run(RunArgs { once: false, .. }) => autoloader::memory::limit_arenas(),
        Command::Ingest(_) | Command::Run(_) => autoloader::memory::prefer_reusing_memory(),
        _ => {}
    }
    init_logging(cli.verbose, cli.quiet);
    let result = state_io().and_then(|io| {
        let state = storage_settings(io.handle().clone());
        let result = cli::commands::run(cli, &state);
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
