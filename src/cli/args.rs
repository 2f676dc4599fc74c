//! The command line's arguments (clap): commands, flags and their value parsers.

use std::path::PathBuf;
use std::time::Duration;

use autoloader::telemetry::alerts::{AlertSettings, parse_webhook};
use autoloader::{Error, Location};
use clap::{Args, Parser, Subcommand};

/// The exit codes, shown by `--help` (keep in step with `exit_code` and docs/guide/ingest.md).
pub(crate) const EXIT_CODES: &str = "\
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
pub(crate) fn location(text: &str) -> Result<Location, autoloader::location::LocationError> {
    Location::parse(text)
}

/// `--alert-rescued-share`: a fraction of a batch's rows, 0 to 1.
pub(crate) fn fraction(text: &str) -> Result<f64, String> {
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
pub(crate) fn seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "{text} is not a number of seconds (e.g. 10 or 0.5)"
        )),
    }
}

/// `--metrics-addr`: HOST:PORT to listen on, checked before anything runs.
pub(crate) fn listen_addr(text: &str) -> Result<String, String> {
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
pub(crate) fn source_format(text: &str) -> Result<autoloader::source::SourceFormat, String> {
    autoloader::source::SourceFormat::from_name(text)
        .ok_or_else(|| format!("\"{text}\" is not a source format: expected delta or files"))
}

pub(crate) fn stream_name(text: &str) -> Result<String, String> {
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
pub(crate) struct Cli {
    /// More log output: -v autoloader's debug detail, -vv its trace and the libraries'
    /// info, -vvv the libraries' debug (RUST_LOG, if set, decides instead).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub(crate) verbose: u8,
    /// Only errors on stderr.
    #[arg(short, long, global = true)]
    pub(crate) quiet: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Which stream a report reads, shared by `events` and `status`.
#[derive(Args, Clone)]
pub(crate) struct StreamChoice {
    /// The table (its streams' checkpoints are found under TABLE/_autoloader) or a
    /// checkpoint: a local directory or s3://BUCKET/PATH.
    #[arg(value_parser = location, required_unless_present = "checkpoint", conflicts_with = "checkpoint")]
    pub(crate) table: Option<Location>,
    /// The stream's checkpoint (one kept elsewhere than under its table): a local
    /// directory or s3://BUCKET/PREFIX.
    #[arg(long, value_name = "DIR", value_parser = location)]
    pub(crate) checkpoint: Option<Location>,
    /// Only this stream of the table: its config name (`ingest`'s: its --name, or the
    /// table's folder name).
    #[arg(long, value_name = "NAME")]
    pub(crate) stream: Option<String>,
}

/// Alerting and metrics flags shared by `ingest` and `run`.
#[derive(Args, Clone)]
pub(crate) struct Reporting {
    /// POST alert-worthy events (schema evolved, columns rejected, rescued data, type
    /// mismatches, failures) as JSON with a `text` field to this URL; repeatable.
    #[arg(long = "alert-webhook", value_name = "URL")]
    pub(crate) alert_webhooks: Vec<String>,
    /// Alert on rescued data when a batch's rescued rows exceed this fraction of its rows,
    /// 0 to 1 (0.05 is 5%; 0: any rescued row).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0, value_parser = fraction)]
    pub(crate) alert_rescued_share: f64,
    /// Alert on an expectation when the rows it failed exceed this fraction of the rows
    /// it checked in a batch, 0 to 1 (0: any failed row).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0, value_parser = fraction)]
    pub(crate) alert_expectation_share: f64,
    /// One alert per incident in this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 600.0, value_parser = seconds)]
    pub(crate) alert_quiet_period: f64,
    /// Allow webhooks on link-local or cloud metadata addresses (refused by default).
    #[arg(long)]
    pub(crate) alert_allow_link_local: bool,
    /// Serve Prometheus metrics at http://ADDR/metrics; ADDR is HOST:PORT, e.g.
    /// 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR", value_parser = listen_addr)]
    pub(crate) metrics_addr: Option<String>,
}

/// `ingest`'s flow: which columns and rows reach the table (docs/guide/table.md, "Flows").
#[derive(Args, Clone)]
pub(crate) struct FlowArgs {
    /// Only these columns reach the table, plus the rescued data, partition columns and
    /// _metadata: --columns order_id,amount (a column the schema gains later does not).
    #[arg(
        long,
        value_name = "A,B",
        value_delimiter = ',',
        conflicts_with = "except_columns"
    )]
    pub(crate) columns: Option<Vec<String>>,
    /// Every column but these reaches the table: --except-columns note,debug
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub(crate) except_columns: Option<Vec<String>>,
    /// A column the flow computes, `expression AS name` (repeat for more):
    /// --with-column "_metadata.file_path AS _source_file"
    #[arg(long = "with-column", value_name = "EXPR AS NAME")]
    pub(crate) with_columns: Vec<String>,
    /// Only rows for which this condition is true reach the table (others are counted as
    /// filtered): --where "order_date < '2025-01-01' AND region IN ('eu', 'us')"
    #[arg(long = "where", value_name = "CONDITION")]
    pub(crate) condition: Option<String>,
    /// A data-quality rule whose failing rows land and are counted (Lakeflow's
    /// `expect`): --expect valid_amount="amount > 0". A Lakeflow constraint is taken as
    /// written: --expect "CONSTRAINT valid_amount EXPECT (amount > 0) ON VIOLATION DROP ROW"
    #[arg(long = "expect", value_name = "NAME=CONDITION")]
    pub(crate) expect: Vec<String>,
    /// A rule whose failing rows do not land; they are counted.
    #[arg(long = "expect-or-drop", value_name = "NAME=CONDITION")]
    pub(crate) expect_or_drop: Vec<String>,
    /// A rule whose failing rows land in the quarantine table instead (--quarantine-table).
    #[arg(long = "expect-or-quarantine", value_name = "NAME=CONDITION")]
    pub(crate) expect_or_quarantine: Vec<String>,
    /// A rule whose failing row stops the flow, nothing of the batch committed (exit 1).
    #[arg(long = "expect-or-fail", value_name = "NAME=CONDITION")]
    pub(crate) expect_or_fail: Vec<String>,
    /// Where quarantined rows land, a Delta table (default: <checkpoint>/quarantine).
    #[arg(long, value_name = "LOCATION")]
    pub(crate) quarantine_table: Option<String>,
}

impl FlowArgs {
    pub(crate) fn spec(&self) -> Result<autoloader::flow::FlowSpec, Error> {
        use autoloader::flow::expect::{Expectation, OnViolation};
        let flow = autoloader::flow::FlowSpec::new(
            self.columns.clone(),
            self.except_columns.clone(),
            self.condition.as_deref(),
        )
        .and_then(|f| f.with_columns(&self.with_columns))
        .map_err(|e| Error::Ingest(e.into()))?;
        let given = [
            (&self.expect, OnViolation::Warn),
            (&self.expect_or_drop, OnViolation::Drop),
            (&self.expect_or_quarantine, OnViolation::Quarantine),
            (&self.expect_or_fail, OnViolation::Fail),
        ];
        let mut rules = Vec::new();
        for (texts, action) in given {
            for text in texts {
                let rule = Expectation::from_flag(text, action)
                    .map_err(|e| Error::Ingest(autoloader::flow::FlowError::from(e).into()))?;
                rules.push(rule);
            }
        }
        flow.with_expectations(rules)
            .map_err(|e| Error::Ingest(e.into()))
    }
}

impl Reporting {
    pub(crate) fn alert_settings(&self, extra: &[String]) -> Result<AlertSettings, Error> {
        let webhooks = self
            .alert_webhooks
            .iter()
            .chain(extra)
            .map(|u| parse_webhook(u, self.alert_allow_link_local))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AlertSettings {
            webhooks,
            rescued_share: self.alert_rescued_share,
            expectation_share: self.alert_expectation_share,
            quiet_period: Duration::from_secs_f64(self.alert_quiet_period.max(0.0)),
            allow_link_local: self.alert_allow_link_local,
        })
    }
}

// Parsed once per process: the size of a variant costs nothing worth boxing for.

#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub(crate) enum Command {
    /// Ingest new files from SOURCE (a local folder or an S3 prefix) into the Delta table
    /// at TABLE.
    #[command(after_help = EXIT_CODES)]
    Ingest(IngestArgs),
    /// Run every stream of a TOML config file concurrently (see schemas/config.schema.json).
    #[command(after_help = EXIT_CODES)]
    Run(RunArgs),
    /// Print a stream's events (schema changes, rescued data, batches, failures); for a
    /// table, its streams' events merged by time.
    Events {
        #[command(flatten)]
        which: StreamChoice,
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
        #[command(flatten)]
        which: StreamChoice,
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
    /// A stream's quarantine table: rows a `quarantine` expectation kept out.
    Quarantine {
        #[command(subcommand)]
        command: QuarantineCommand,
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
    /// What a table's expectations did: per day and rule, rows checked, failed, dropped
    /// and quarantined, with an example file (from the counts in its commits).
    Quality {
        /// The Delta table: a local directory or s3://BUCKET/PATH.
        #[arg(value_parser = location)]
        table: Location,
        /// Only batches committed at or after this time (2026-03-15T00:00:00Z) or this
        /// long ago: a number and a unit, s, m, h, d or w (90m, 24h, 7d, 2w).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
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
    /// Print a shell completion script (docs/guide/ingest.md: where to put it).
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

/// `ingest`'s arguments.
#[derive(Args)]
pub(crate) struct IngestArgs {
    /// Landing folder to read: a local directory (every file below it) or
    /// s3://BUCKET/PREFIX (credentials and endpoint from AWS_* variables); or a Delta
    /// table, read incrementally (its appended rows, commit by commit).
    #[arg(value_parser = location)]
    pub(crate) source: Location,
    /// What SOURCE holds: delta (a Delta table) or files [default: a folder holding
    /// a _delta_log/ is a Delta table, anything else files].
    #[arg(long, value_name = "FORMAT", value_parser = source_format)]
    pub(crate) source_format: Option<autoloader::source::SourceFormat>,
    /// Delta table location (created on first commit): a local directory or
    /// s3://BUCKET/PATH.
    #[arg(value_parser = location)]
    pub(crate) table: Location,
    /// Take every file present now, in batches, then exit (Auto Loader's AvailableNow).
    /// Without it, keep watching and ingest files as they land until SIGINT or SIGTERM.
    #[arg(long)]
    pub(crate) once: bool,
    /// Watch mode: list the source at least this often, in seconds (file events wake
    /// it sooner).
    #[arg(long, value_name = "SECS", default_value_t = 10.0, value_parser = seconds)]
    pub(crate) poll_interval: f64,
    /// Auto Loader option, repeatable: -o cloudFiles.inferColumnTypes=true; APPLY
    /// CHANGES and snapshot flows take -o cdc.KEY=VALUE and -o snapshot.KEY=VALUE
    /// (`autoloader options` lists every key)
    #[arg(short = 'o', long = "option", value_name = "KEY=VALUE")]
    pub(crate) options: Vec<String>,
    #[command(flatten)]
    pub(crate) flow: FlowArgs,
    /// Where the stream keeps its progress [default: TABLE/_autoloader].
    #[arg(long, value_name = "DIR", value_parser = location)]
    pub(crate) checkpoint: Option<Location>,
    /// The stream's name in events, alerts and metrics: letters, digits, _ or -
    /// [default: the table folder's name].
    #[arg(long, value_name = "NAME", value_parser = stream_name)]
    pub(crate) name: Option<String>,
    /// Print the summary as one JSON object on stdout instead of the summary line
    /// (on failure too: "status": "failed", the error and the exit code).
    #[arg(long)]
    pub(crate) json: bool,
    /// List the files a run would ingest (and why others are not taken) and the
    /// schema it would read them with, then exit; nothing is written.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Notification mode: run as one of several competing workers on this stream, in
    /// a worker slot of its own: `auto` (the first free slot; identical processes),
    /// or a slot number (or a name ending in one, a StatefulSet pod's).
    #[arg(long, value_name = "auto|SLOT")]
    pub(crate) worker: Option<autoloader::checkpoint::claims::Worker>,
    #[command(flatten)]
    pub(crate) reporting: Reporting,
}

/// `run`'s arguments.
#[derive(Args)]
pub(crate) struct RunArgs {
    /// The pipeline: a config file (streams.toml), a Lakeflow SQL file (pipeline.sql), or
    /// a folder of SQL files.
    pub(crate) config: PathBuf,
    /// Ingest what has landed, then exit.
    #[arg(long)]
    pub(crate) once: bool,
    /// Run only this stream.
    #[arg(long, value_name = "NAME")]
    pub(crate) stream: Option<String>,
    /// Watch mode: list each source at least this often, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10.0, value_parser = seconds)]
    pub(crate) poll_interval: f64,
    /// Check the file and every stream's options, locations and webhooks, then exit
    /// without running anything (0: valid; 2: the error). Spark's spelling: --dry-run.
    #[arg(long, alias = "dry-run", conflicts_with = "list")]
    pub(crate) check: bool,
    /// Run only these flows (Spark's --refresh): names of streams, or of a SQL pipeline's
    /// tables (a.b or a_b).
    #[arg(
        long,
        value_name = "A,B",
        value_delimiter = ',',
        conflicts_with = "stream"
    )]
    pub(crate) refresh: Vec<String>,
    /// Reset these flows' tables (a full refresh, refused for a table with
    /// pipelines.reset.allowed=false), then run them (and those of --refresh).
    #[arg(long, value_name = "A,B", value_delimiter = ',', conflicts_with_all = ["stream", "full_refresh_all"])]
    pub(crate) full_refresh: Vec<String>,
    /// Reset every table of the pipeline (tables with pipelines.reset.allowed=false are
    /// skipped, and said), then run every flow.
    #[arg(long, conflicts_with_all = ["stream", "refresh"])]
    pub(crate) full_refresh_all: bool,
    /// Print each stream (name, source, table, checkpoint) and exit without running;
    /// the file is checked as by --check.
    #[arg(long)]
    pub(crate) list: bool,
    /// One JSON object per stream on stdout instead of the summary lines (and with
    /// --list, instead of the table).
    #[arg(long)]
    pub(crate) json: bool,
    /// Run this ONCE flow again although it completed (its rows land again);
    /// repeatable.
    #[arg(long, value_name = "NAME")]
    pub(crate) rerun_once: Vec<String>,
    #[command(flatten)]
    pub(crate) reporting: Reporting,
}

#[derive(Subcommand)]
pub(crate) enum TableCommand {
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
pub(crate) enum QuarantineCommand {
    /// Puts the quarantined rows back through the flow's rules (as its checkpoint
    /// records them) and lands those that pass, exactly once; rows that fail only a
    /// drop rule are dropped, the rest stay. Run it while the stream is stopped.
    Replay {
        #[command(flatten)]
        which: StreamChoice,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub(crate) enum SchemaCommand {
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
