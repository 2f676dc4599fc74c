//! Text and JSON output: summaries, reports, plans and the progress bar.

use autoloader::Error;
use autoloader::config::NamedStream;
use autoloader::pipeline::{self, Progress, Summary};
use autoloader::reports;
use autoloader::telemetry::alerts::AlertSettings;
use indicatif::{ProgressBar, ProgressStyle};

use crate::{error_text, exit_code};

/// Prints `value` as JSON on stdout.
pub(crate) fn print_json(value: &impl serde::Serialize, pretty: bool) {
    let text = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    };
    println!("{}", text.expect("reports serialize"));
}

/// What a reset of one table removes and keeps.
/// `skip_guarded` (`--all`): a guarded table is skipped; otherwise its plan is shown as
/// refused (a dry run's).
pub(crate) fn print_reset_plan(
    plan: &autoloader::table::reset::TablePlan,
    dry_run: bool,
    skip_guarded: bool,
) {
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

/// `autoloader options`: the CDC or snapshot settings, from the table their parser checks
/// keys against, as text or one JSON object a line (as the options').
pub(crate) fn describe_settings(
    prefix: &str,
    title: &str,
    rows: &[(&str, &str, &str)],
    json: bool,
) -> String {
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
pub(crate) fn print_review(review: &pipeline::definition::Review) {
    println!("[{}] definition: {}", review.stream, review.status);
    for c in &review.changes {
        println!(
            "  {c}: {}",
            autoloader::flow::definition::on_change_label(c.on_change)
        );
    }
}

/// `run --list`: each stream's name, source, table and checkpoint.
pub(crate) fn list_streams(streams: &[(NamedStream, AlertSettings)], json: bool) {
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

pub(crate) fn print_status(st: &reports::Status) {
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
    for e in &st.expectations {
        println!(
            "expectation:    {} passed {}, failed {}, dropped {}, quarantined {}",
            e.name, e.passed, e.failed, e.dropped, e.quarantined
        );
    }
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

pub(crate) fn print_drift(r: &reports::DriftReport) {
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

pub(crate) fn print_quality(r: &reports::QualityReport) {
    if r.days.is_empty() {
        println!("(no expectations in this table's commits)");
        return;
    }
    println!(
        "{:<12} {:<24} {:>10} {:>10} {:>10} {:>12}  example file",
        "day", "expectation", "checked", "failed", "dropped", "quarantined"
    );
    for d in &r.days {
        println!(
            "{:<12} {:<24} {:>10} {:>10} {:>10} {:>12}  {}",
            d.day,
            d.expectation,
            d.checked,
            d.failed,
            d.dropped,
            d.quarantined,
            d.example_file.as_deref().unwrap_or("")
        );
    }
}

/// One stream's outcome as `--json` prints it: its name, `"status"`, and the summary's
/// figures or the error with its exit code.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StreamReport<'a> {
    pub(crate) stream: &'a str,
    pub(crate) status: &'static str,
    #[serde(flatten)]
    pub(crate) summary: Option<&'a Summary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) exit_code: Option<u8>,
}

impl<'a> StreamReport<'a> {
    pub(crate) fn done(stream: &'a str, summary: &'a Summary) -> Self {
        StreamReport {
            stream,
            status: "done",
            summary: Some(summary),
            error: None,
            exit_code: None,
        }
    }

    pub(crate) fn failed(stream: &'a str, error: &Error) -> Self {
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
pub(crate) fn print_dry_run(plan: &pipeline::DryRun) {
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
pub(crate) fn print_table(info: &autoloader::table::properties::TableInfo) {
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
pub(crate) fn files(n: usize) -> String {
    format!("{n} {}", plural(n as u64, "file"))
}

pub(crate) fn plural(n: u64, one: &str) -> String {
    match (n, one) {
        (1, _) => one.to_string(),
        (_, "batch") => "batches".to_string(),
        _ => format!("{one}s"),
    }
}

/// A byte count in decimal units (kB, MB, GB, as MB/s is), three digits or so.
pub(crate) fn human_bytes(bytes: f64) -> String {
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
pub(crate) fn summary_line(s: &Summary) -> String {
    match &s.once {
        Some(note) if s.batches == 0 && s.files == 0 => return format!("ONCE flow: {note}"),
        Some(note) => return format!("{}; ONCE flow: {note}", run_summary_line(s)),
        None => {}
    }
    run_summary_line(s)
}

pub(crate) fn run_summary_line(s: &Summary) -> String {
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
    if !s.expectations.is_empty() {
        // Rules: rows each failed, and what became of the rows that did not land.
        let failed: Vec<String> = s
            .expectations
            .iter()
            .map(|e| format!("{} {}", e.name, e.failed))
            .collect();
        skipped += &format!(
            ", expectations failed: {} ({} dropped, {} quarantined)",
            failed.join(", "),
            s.dropped_rows,
            s.quarantined_rows
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
pub(crate) struct TerminalProgress {
    pub(crate) bar: Option<ProgressBar>,
}

impl TerminalProgress {
    pub(crate) fn new(enabled: bool) -> Self {
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
