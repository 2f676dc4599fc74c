//! What each command does: builds the stream or report from its arguments, runs it, and
//! renders the outcome.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use autoloader::config::NamedStream;
use autoloader::options::{self, OptionsError};
use autoloader::pipeline::{self, IngestRequest, RunMode, StopFlag, StreamSpec};
use autoloader::reports;
use autoloader::storage::StorageSettings;
use autoloader::telemetry::Hooks;
use autoloader::telemetry::alerts::AlertSettings;
use autoloader::telemetry::events::{EventKind, kind};
use autoloader::telemetry::metrics::Registry;
use autoloader::{Error, ErrorClass, Location};

use super::args::{
    Cli, Command, IngestArgs, QuarantineCommand, Reporting, RunArgs, SchemaCommand, StreamChoice,
    TableCommand,
};
use super::render::{
    StreamReport, TerminalProgress, describe_settings, files, human_bytes, list_streams, plural,
    print_drift, print_dry_run, print_json, print_quality, print_reset_plan, print_review,
    print_status, print_table, summary_line,
};
use crate::{EXIT_INTERRUPTED, error_text, runtime};

/// Parses `--since`: a time, or how long ago (`7d`).
pub(crate) fn parse_since(text: Option<&str>) -> Result<Option<i64>, Error> {
    let Some(text) = text else { return Ok(None) };
    let now = chrono::Utc::now().timestamp_millis();
    Ok(Some(reports::parse_since(text, now)?))
}

pub(crate) fn run_mode(once: bool, poll_interval: f64) -> RunMode {
    if once {
        RunMode::Once
    } else {
        RunMode::Watch {
            poll_interval: Duration::from_secs_f64(poll_interval.max(0.0)),
        }
    }
}

pub(crate) fn run(cli: Cli, state: &StorageSettings) -> Result<(), Error> {
    match cli.command {
        Command::Ingest(args) => ingest(args, cli.quiet, state),
        Command::Run(args) => run_config_file(args, state),
        Command::Completions { .. } | Command::Man { .. } => {
            unreachable!("main handles them before any runtime starts")
        }
        Command::Events {
            which,
            types,
            since,
            json,
        } => events(which, &types, since.as_deref(), json, state),
        Command::Status { which, json } => status(which, json, state),
        Command::Schema { command } => schema(command, state),
        Command::Quarantine {
            command: QuarantineCommand::Replay { which, json },
        } => replay(which, json, state),
        Command::Quality { table, since, json } => {
            let since = parse_since(since.as_deref())?;
            let report = runtime()?.block_on(reports::quality(&table, state, since))?;
            if json {
                print_json(&report, true);
            } else {
                print_quality(&report);
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
                options: autoloader::table::reset::ResetOptions {
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
        } => optimize(
            &table,
            target_size.as_deref(),
            min_files,
            condition.as_deref(),
            json,
            state,
        ),
        Command::Vacuum {
            table,
            retain,
            dry_run,
            force,
            json,
        } => vacuum(&table, retain.as_deref(), dry_run, force, json, state),
        Command::Options { json } => list_options(json),
        Command::Table {
            command: TableCommand::Show { table, json },
        } => {
            let info = runtime()?.block_on(autoloader::table::properties::show(&table, state))?;
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
                .map(|p| autoloader::table::properties::parse_property(p))
                .collect::<Result<Vec<_>, _>>()?;
            match runtime()?.block_on(autoloader::table::properties::set(&table, state, &pairs))? {
                Some(version) => println!("{table}: properties set in version {version}"),
                None => println!("{table}: already has these properties; nothing committed"),
            }
            Ok(())
        }
    }
}

/// `events`: a stream's events, or its table's streams' merged by time.
fn events(
    which: StreamChoice,
    types: &[String],
    since: Option<&str>,
    json: bool,
    state: &StorageSettings,
) -> Result<(), Error> {
    let StreamChoice {
        table,
        checkpoint,
        stream,
    } = which;
    let mut kinds = Vec::new();
    for t in types {
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
    let events = reports::filtered_events(&found, state, &kinds, parse_since(since)?)?;
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

/// `status`: where each stream of a table stands.
/// `quarantine replay`: the one stream's quarantine, back through its rules.
fn replay(which: StreamChoice, json: bool, state: &StorageSettings) -> Result<(), Error> {
    let found = reports::checkpoints(
        which.table.as_ref(),
        which.checkpoint.as_ref(),
        which.stream.as_deref(),
        state,
    )?;
    let target = which
        .table
        .as_ref()
        .or(which.checkpoint.as_ref())
        .expect("clap requires one");
    let one = reports::only_one(target, found)?;
    let summary = runtime()?.block_on(autoloader::table::replay::replay(&one.location, state))?;
    if json {
        print_json(&summary, false);
    } else {
        if let Some(n) = summary.finished_earlier {
            println!("finished replay {n}, which had landed its rows before it was stopped");
        }
        match summary.replay {
            Some(n) => println!(
                "replay {n}: {} rows landed, {} dropped, {} still failing (left in the quarantine)",
                summary.landed, summary.dropped, summary.still_failing
            ),
            None => println!(
                "nothing to replay: {} rows still failing (left in the quarantine)",
                summary.still_failing
            ),
        }
    }
    Ok(())
}

fn status(which: StreamChoice, json: bool, state: &StorageSettings) -> Result<(), Error> {
    let StreamChoice {
        table,
        checkpoint,
        stream,
    } = which;
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

/// `schema history`, `schema diff`, `schema show`.
fn schema(command: SchemaCommand, state: &StorageSettings) -> Result<(), Error> {
    match command {
        SchemaCommand::History {
            location,
            stream,
            json,
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
        SchemaCommand::Diff {
            location,
            a,
            b,
            stream,
            json,
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
        SchemaCommand::Show {
            location,
            version,
            stream,
            json,
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
    }
}

/// `optimize`: compacts a table's small files.
fn optimize(
    table: &Location,
    target_size: Option<&str>,
    min_files: Option<usize>,
    condition: Option<&str>,
    json: bool,
    state: &StorageSettings,
) -> Result<(), Error> {
    use autoloader::table::optimize;
    let settings = optimize::OptimizeSettings::new(target_size, min_files, condition)?;
    check_s3(state, [table])?;
    let report = runtime()?.block_on(optimize::optimize(table, state, &settings))?;
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

/// `vacuum`: deletes the files no version within the retention references.
fn vacuum(
    table: &Location,
    retain: Option<&str>,
    dry_run: bool,
    force: bool,
    json: bool,
    state: &StorageSettings,
) -> Result<(), Error> {
    use autoloader::table::vacuum;
    let settings = vacuum::VacuumSettings::new(retain, dry_run, force)?;
    check_s3(state, [table])?;
    let report = runtime()?.block_on(vacuum::vacuum(table, state, &settings))?;
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

/// `options`: every option key, with the `cdc.*` and `snapshot.*` settings.
fn list_options(json: bool) -> Result<(), Error> {
    print!("{}", options::describe(json));
    print!(
        "{}",
        describe_settings(
            "cdc.",
            "APPLY CHANGES (-o cdc.KEY=VALUE, or [stream.cdc] in a config file)",
            autoloader::flow::cdc::SETTINGS,
            json
        )
    );
    print!(
        "{}",
        describe_settings(
            "snapshot.",
            "Snapshot flows (-o snapshot.KEY=VALUE, or [stream.snapshot] in a config file)",
            autoloader::flow::snapshot::SETTINGS,
            json
        )
    );
    Ok(())
}

/// `ingest`: builds one stream from the flags, then runs it, dry-runs it, or reports why
/// it could not.
fn ingest(args: IngestArgs, quiet: bool, state: &StorageSettings) -> Result<(), Error> {
    let IngestArgs {
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
    } = args;
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
        spec.quarantine_table = flow
            .quarantine_table
            .as_deref()
            .map(autoloader::location::Location::parse)
            .transpose()?;
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
        let progress = TerminalProgress::new(!quiet && std::io::stderr().is_terminal());
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

/// `run CONFIG`: every stream of a config file, or `--list` / `--check` of it.
fn run_config_file(args: RunArgs, state: &StorageSettings) -> Result<(), Error> {
    let RunArgs {
        config,
        once,
        stream,
        poll_interval,
        check,
        list,
        json,
        rerun_once,
        refresh,
        full_refresh,
        full_refresh_all,
        reporting,
    } = args;
    let mut streams = load_config(&config, stream.as_deref(), state, &reporting)?;
    select_flows(&mut streams, &refresh, &full_refresh, &config)?;
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
        if full_refresh_all || !full_refresh.is_empty() {
            full_refresh_tables(&streams, &full_refresh, full_refresh_all, state)?;
        }
        run_config(streams, &reporting, run_mode(once, poll_interval), json)
    }
}

/// A name as `--refresh` and `--full-refresh` take it: a SQL table's dots are `_` in its
/// flow's name.
fn flow_name(name: &str) -> String {
    name.trim().replace('.', "_")
}

/// Keeps the flows `--refresh` and `--full-refresh` name (all when neither names any);
/// an unknown name is an error listing the flows.
fn select_flows(
    streams: &mut Vec<(NamedStream, AlertSettings)>,
    refresh: &[String],
    full_refresh: &[String],
    config: &std::path::Path,
) -> Result<(), Error> {
    let wanted: Vec<String> = refresh
        .iter()
        .chain(full_refresh)
        .map(|n| flow_name(n))
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let known: Vec<&str> = streams.iter().map(|(s, _)| s.name.as_str()).collect();
    if let Some(unknown) = wanted.iter().find(|w| !known.contains(&w.as_str())) {
        return Err(OptionsError::Conflict(format!(
            "{}: no flow named {unknown} (flows: {})",
            config.display(),
            known.join(", ")
        ))
        .into());
    }
    streams.retain(|(s, _)| wanted.contains(&s.name));
    Ok(())
}

/// Spark's --full-refresh: resets the tables of the named flows (every table with
/// `all`, where a guarded one is skipped) before they run; a guarded table named is
/// refused (exit 4) and nothing is reset.
fn full_refresh_tables(
    streams: &[(NamedStream, AlertSettings)],
    names: &[String],
    all: bool,
    state: &StorageSettings,
) -> Result<(), Error> {
    use autoloader::table::reset;
    let names: Vec<String> = names.iter().map(|n| flow_name(n)).collect();
    let mut tables: Vec<Location> = Vec::new();
    for (s, _) in streams {
        if (all || names.contains(&s.name))
            && !tables
                .iter()
                .any(|t| t.resolved() == s.request.table.resolved())
        {
            tables.push(s.request.table.clone());
        }
    }
    let flows: Vec<reset::ConfiguredFlow> = streams
        .iter()
        .map(|(s, _)| s.request.as_configured_flow())
        .collect();
    let options = reset::ResetOptions {
        checkpoints_only: false,
        keep_schema: false,
        skip_guarded: all,
        dry_run: false,
    };
    let rt = runtime()?;
    let prepared = rt.block_on(reset::prepare(&tables, &flows, options, state))?;
    if let Some(p) = prepared.plans.iter().find(|p| p.guarded && !all) {
        return Err(reset::ResetError::Guarded {
            table: p.table.clone(),
        }
        .into());
    }
    let done = rt.block_on(reset::execute(prepared))?;
    for plan in &done {
        if plan.guarded {
            eprintln!(
                "{}: not reset (pipelines.reset.allowed=false); its flows run on",
                plan.table
            );
        } else {
            eprintln!(
                "{}: full refresh (generation {})",
                plan.table,
                plan.generation.unwrap_or_default()
            );
        }
    }
    Ok(())
}

pub(crate) struct ResetArgs {
    pub(crate) tables: Vec<Location>,
    pub(crate) config: Option<PathBuf>,
    pub(crate) all: bool,
    pub(crate) options: autoloader::table::reset::ResetOptions,
    pub(crate) dry_run: bool,
    pub(crate) yes: bool,
    pub(crate) json: bool,
}

/// `autoloader reset`: the precheck (guard, locks), the plan, the confirmation, the reset.
pub(crate) fn reset(args: ResetArgs, state: &StorageSettings) -> Result<(), Error> {
    use autoloader::table::reset;
    let streams: Vec<reset::ConfiguredFlow> = match &args.config {
        Some(path) => autoloader::config::load(path, None, state)?
            .into_iter()
            .map(|s| s.request.as_configured_flow())
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

pub(crate) async fn start_metrics(addr: Option<&str>) -> Result<Option<Registry>, Error> {
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
pub(crate) fn check_s3<'a>(
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
pub(crate) fn load_config(
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
pub(crate) fn check_definitions(
    streams: &[(NamedStream, AlertSettings)],
    json: bool,
) -> Result<(), Error> {
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

/// Runs the streams of a config file concurrently; each prints its own summary line (or
/// JSON object).
pub(crate) fn run_config(
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
pub(crate) fn streams_class(classes: &[ErrorClass]) -> ErrorClass {
    match classes.split_first() {
        Some((first, rest)) if rest.iter().all(|c| c == first) => *first,
        _ => ErrorClass::Failed,
    }
}

/// SIGINT or SIGTERM: finish the batch in flight, then stop (exit 0). A second signal
/// exits at once; exactly-once holds either way.
pub(crate) fn listen_for_signals(stop: StopFlag) {
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
