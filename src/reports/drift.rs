//! `drift`: which fields landed in the rescued-data column, per day and key.

use crate::reports::{ReportError, time_of};
use std::collections::BTreeMap;

use arrow_array::cast::AsArray;
use arrow_array::{Array, StringArray};
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use serde::Serialize;
use serde_json::Value;

use crate::location::Location;
use crate::options::RESCUED_DATA_COLUMN;
use crate::record::{FILE_PATH_KEY, LINE_KEY};
use crate::storage::StorageSettings;
use crate::target::DeltaAppend;

/// The drift report: per day, rows and rescued rows; per rescued key, occurrences, first
/// and last seen, and an example file. Days and times are when rows were ingested (the
/// Delta commit of their data file).
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftReport {
    pub days: Vec<DayDrift>,
    pub keys: Vec<KeyDrift>,
}

#[derive(Debug, Default, Serialize, Clone)]
#[serde(rename_all = "camelCase")]
pub struct DayDrift {
    pub day: String,
    pub rows: u64,
    pub rescued_rows: u64,
    pub rescued_share: f64,
}

#[derive(Debug, Default, Serialize, Clone)]
#[serde(rename_all = "camelCase")]
pub struct KeyDrift {
    pub key: String,
    pub occurrences: u64,
    pub first_seen: String,
    pub last_seen: String,
    pub example_file: String,
}

/// Builds the drift report from the table's rescued-data column: a local table or one on
/// S3 (with the S3 configuration in `storage`). Only that column of each data file is read.
pub async fn drift(
    table: &Location,
    storage: &StorageSettings,
    since_ms: Option<i64>,
) -> Result<DriftReport, ReportError> {
    let table_err = |reason: String| ReportError::Table {
        path: table.to_string(),
        reason,
    };
    // Opening a local table creates its folder: a report must not, so look first.
    if let Some(dir) = table.as_local()
        && !dir.join("_delta_log").is_dir()
    {
        return Err(ReportError::NotATable {
            path: table.to_string(),
        });
    }
    let sink = DeltaAppend::open(table, storage)
        .await
        .map_err(|e| table_err(e.to_string()))?;
    if !sink.exists() {
        return Err(ReportError::NotATable {
            path: table.to_string(),
        });
    }
    let dt = sink.table();
    let state = dt.snapshot().map_err(|e| table_err(e.to_string()))?;
    let files: Vec<(ObjectPath, u64, i64)> = state
        .log_data()
        .into_iter()
        .map(|f| {
            (
                f.object_store_path(),
                u64::try_from(f.size()).unwrap_or(0),
                f.modification_time(),
            )
        })
        .collect();
    let store = dt.object_store();
    let mut days: BTreeMap<String, DayDrift> = BTreeMap::new();
    let mut keys: BTreeMap<String, (KeyDrift, i64, i64)> = BTreeMap::new();
    for (path, size, ingested_ms) in files {
        if since_ms.is_some_and(|s| ingested_ms < s) {
            continue;
        }
        let file_err = |e: &dyn std::fmt::Display| ReportError::Table {
            path: format!("{}/{path}", table.to_string().trim_end_matches('/')),
            reason: e.to_string(),
        };
        let reader = crate::storage::RangedFile {
            store: store.clone(),
            path: path.clone(),
            size,
        };
        let builder = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .map_err(|e| file_err(&e))?;
        let schema = builder.parquet_schema();
        let column = schema
            .columns()
            .iter()
            .position(|c| c.path().string() == RESCUED_DATA_COLUMN);
        let total = u64::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
        let day = time_of(ingested_ms)[..10].to_string();
        let entry = days.entry(day.clone()).or_insert_with(|| DayDrift {
            day,
            ..DayDrift::default()
        });
        entry.rows += total;
        let Some(column) = column else { continue };
        let mask = ProjectionMask::leaves(schema, [column]);
        let mut reader = builder
            .with_projection(mask)
            .build()
            .map_err(|e| file_err(&e))?;
        while let Some(batch) = reader.try_next().await.map_err(|e| file_err(&e))? {
            let texts: &StringArray = batch.column(0).as_string::<i32>();
            for i in 0..texts.len() {
                if texts.is_null(i) {
                    continue;
                }
                entry.rescued_rows += 1;
                let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(texts.value(i)) else {
                    continue;
                };
                let example = obj
                    .get(FILE_PATH_KEY)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                // The file and the line say where the values came from: they are not drift.
                for key in obj.keys().filter(|k| *k != FILE_PATH_KEY && *k != LINE_KEY) {
                    let k = keys.entry(key.clone()).or_insert_with(|| {
                        (
                            KeyDrift {
                                key: key.clone(),
                                example_file: example.clone(),
                                ..KeyDrift::default()
                            },
                            i64::MAX,
                            i64::MIN,
                        )
                    });
                    k.0.occurrences += 1;
                    if ingested_ms < k.1 {
                        k.1 = ingested_ms;
                        k.0.example_file.clone_from(&example);
                    }
                    k.2 = k.2.max(ingested_ms);
                }
            }
        }
    }
    let mut report = DriftReport::default();
    for (_, mut d) in days {
        d.rescued_share = if d.rows == 0 {
            0.0
        } else {
            d.rescued_rows as f64 / d.rows as f64
        };
        report.days.push(d);
    }
    let mut key_rows: Vec<KeyDrift> = keys
        .into_values()
        .map(|(mut k, first, last)| {
            k.first_seen = time_of(first);
            k.last_seen = time_of(last);
            k
        })
        .collect();
    key_rows.sort_by(|a, b| b.occurrences.cmp(&a.occurrences).then(a.key.cmp(&b.key)));
    report.keys = key_rows;
    Ok(report)
}
