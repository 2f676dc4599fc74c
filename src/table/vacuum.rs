//! `autoloader vacuum`: deletes the table's files that no version within the retention
//! reads, with delta-rs' VACUUM (available without DataFusion).
//!
//! Two kinds of file go: files a commit removed longer ago than the retention (what an
//! `optimize` replaced, a reset cleared), and files no commit ever added (written by a
//! killed or refused commit) whose last change is older than the retention and never
//! younger than [`UNTRACKED_MIN_AGE`], whatever `--retain` says: a running stream's
//! file being written is untracked until its commit. `_`- and `.`-prefixed top-level
//! folders (`_delta_log`, `_autoloader` with the checkpoints) are never listed.

use std::time::Duration;

use deltalake::operations::vacuum::VacuumMode;
use deltalake::table::config::TablePropertiesExt;
use serde::Serialize;

use super::optimize::{MaintenanceError, open_existing};
use crate::location::Location;
use crate::storage::StorageSettings;

/// The default retention: Delta's `delta.deletedFileRetentionDuration` default.
pub const DEFAULT_RETAIN: Duration = Duration::from_secs(7 * 24 * 3600);
/// A file no commit references is kept at least this long, even with `--retain 0h
/// --force`: it may be a running writer's file, committed in a moment.
pub const UNTRACKED_MIN_AGE: Duration = Duration::from_secs(3600);

/// `vacuum`'s options, validated.
#[derive(Debug, Clone)]
pub struct VacuumSettings {
    pub retain: Duration,
    pub dry_run: bool,
    /// Allow a retention shorter than the table's `delta.deletedFileRetentionDuration`.
    pub force: bool,
}

impl VacuumSettings {
    /// The one place `vacuum`'s arguments are read: `retain` as `168h`, `7d`, `30m`.
    pub fn new(
        retain: Option<&str>,
        dry_run: bool,
        force: bool,
    ) -> Result<VacuumSettings, MaintenanceError> {
        let retain = match retain {
            None => DEFAULT_RETAIN,
            Some(text) => crate::options::parse_duration("--retain", text)
                .map_err(|e| MaintenanceError::Usage(e.to_string()))?,
        };
        Ok(VacuumSettings {
            retain,
            dry_run,
            force,
        })
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VacuumReport {
    pub table: String,
    pub dry_run: bool,
    pub retain_hours: f64,
    /// Deleted (or, in a dry run, to delete), relative to the table.
    pub files: Vec<String>,
    pub seconds: f64,
}

/// `autoloader vacuum TABLE`.
pub async fn vacuum(
    table: &Location,
    storage: &StorageSettings,
    settings: &VacuumSettings,
) -> Result<VacuumReport, MaintenanceError> {
    let started = std::time::Instant::now();
    let mut sink = open_existing(table, storage).await?;
    let location = sink.location().to_string();
    let failed = |reason: String| MaintenanceError::Failed {
        location: location.clone(),
        reason,
    };
    let minimum = sink
        .table()
        .snapshot()
        .map_err(|e| failed(e.to_string()))?
        .snapshot()
        .table_properties()
        .deleted_file_retention_duration();
    if settings.retain < minimum && !settings.force {
        return Err(MaintenanceError::Usage(format!(
            "--retain {} is shorter than the table's delta.deletedFileRetentionDuration ({}): \
             a reader of an older version, or a writer's file not committed yet, could lose \
             its files; give --force to vacuum anyway",
            hours(settings.retain),
            hours(minimum)
        )));
    }
    let to_chrono = |d: Duration| {
        chrono::Duration::from_std(d).map_err(|e| MaintenanceError::Usage(e.to_string()))
    };
    // Untracked files by the longer of the two retentions; removed files by `retain`.
    let untracked = settings.retain.max(UNTRACKED_MIN_AGE);
    let mut passes = vec![(VacuumMode::Full, untracked)];
    if settings.retain < untracked {
        passes.push((VacuumMode::Lite, settings.retain));
    }
    let mut files: Vec<String> = Vec::new();
    for (mode, retention) in passes {
        // Each pass from the latest version (the previous one committed its own).
        sink.refresh().await?;
        let (_, metrics) = sink
            .table()
            .clone()
            .vacuum()
            .with_mode(mode)
            .with_retention_period(to_chrono(retention)?)
            .with_enforce_retention_duration(false)
            .with_dry_run(settings.dry_run)
            .await
            .map_err(|e| failed(format!("vacuum: {e}")))?;
        for f in metrics.files_deleted {
            if !files.contains(&f) {
                files.push(f);
            }
        }
    }
    files.sort();
    Ok(VacuumReport {
        table: location,
        dry_run: settings.dry_run,
        retain_hours: settings.retain.as_secs_f64() / 3600.0,
        files,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn hours(d: Duration) -> String {
    let h = d.as_secs_f64() / 3600.0;
    if h.fract() == 0.0 {
        format!("{h}h")
    } else {
        format!("{h:.2}h")
    }
}
