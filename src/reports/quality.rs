//! `quality`: what a table's expectations did, per day and rule, from the counts each
//! batch commit carries (`expectations` in its `autoloader` commit info). Only the log is
//! read, so the report costs the same on S3 as on disk, whatever the table's size.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::flow::expect::ExpectationCounts;
use crate::location::Location;
use crate::reports::{ReportError, time_of};
use crate::storage::StorageSettings;
use crate::target::DeltaAppend;

/// The quality report: one line per day (of the commits) and rule.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QualityReport {
    pub days: Vec<DayQuality>,
}

#[derive(Debug, Default, Serialize, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DayQuality {
    pub day: String,
    pub expectation: String,
    /// Rows the rule judged (passed and failed).
    pub checked: u64,
    pub failed: u64,
    pub dropped: u64,
    pub quarantined: u64,
    /// The first file of the day in which the rule failed a row.
    pub example_file: Option<String>,
}

/// Builds the report from `table`'s commits since its last full refresh (at or after
/// `since_ms`): a local table or one on S3.
pub async fn quality(
    table: &Location,
    storage: &StorageSettings,
    since_ms: Option<i64>,
) -> Result<QualityReport, ReportError> {
    // Opening a local table creates its folder: a report must not, so look first.
    if let Some(dir) = table.as_local()
        && !dir.join("_delta_log").is_dir()
    {
        return Err(ReportError::NotATable {
            path: table.to_string(),
        });
    }
    let table_err = |reason: String| ReportError::Table {
        path: table.to_string(),
        reason,
    };
    let sink = DeltaAppend::open(table, storage)
        .await
        .map_err(|e| table_err(e.to_string()))?;
    if !sink.exists() {
        return Err(ReportError::NotATable {
            path: table.to_string(),
        });
    }
    let commits = sink
        .autoloader_commits()
        .await
        .map_err(|e| table_err(e.to_string()))?;
    Ok(report_of(&commits, since_ms))
}

/// The report of commit records (time in ms, `autoloader` info), oldest first.
fn report_of(commits: &[(u64, serde_json::Value)], since_ms: Option<i64>) -> QualityReport {
    // (day, position of the rule's first appearance) → counts, so rules keep their order.
    let mut order: Vec<String> = Vec::new();
    let mut days: BTreeMap<(String, usize), DayQuality> = BTreeMap::new();
    for (at, info) in commits {
        let at = i64::try_from(*at).unwrap_or(i64::MAX);
        if since_ms.is_some_and(|s| at < s) {
            continue;
        }
        let Some(rules) = info.get("expectations") else {
            continue;
        };
        let Ok(rules) = serde_json::from_value::<Vec<ExpectationCounts>>(rules.clone()) else {
            continue;
        };
        let day = time_of(at)[..10].to_string();
        for r in rules {
            let index = match order.iter().position(|n| *n == r.name) {
                Some(i) => i,
                None => {
                    order.push(r.name.clone());
                    order.len() - 1
                }
            };
            let d = days
                .entry((day.clone(), index))
                .or_insert_with(|| DayQuality {
                    day: day.clone(),
                    expectation: r.name.clone(),
                    ..DayQuality::default()
                });
            d.checked += r.passed + r.failed;
            d.failed += r.failed;
            d.dropped += r.dropped;
            d.quarantined += r.quarantined;
            if d.example_file.is_none() {
                d.example_file = r.example_file;
            }
        }
    }
    QualityReport {
        days: days.into_values().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_add_up_per_day_and_rule_in_the_rules_order() {
        let day = 86_400_000u64;
        let commits = vec![
            (
                day,
                json!({"batch": 0, "expectations": [
                    {"name": "b", "passed": 5, "failed": 1, "dropped": 1, "quarantined": 0, "exampleFile": "f1"},
                    {"name": "a", "passed": 6, "failed": 0, "dropped": 0, "quarantined": 0},
                ]}),
            ),
            (
                day + 10,
                json!({"batch": 1, "expectations": [
                    {"name": "b", "passed": 2, "failed": 2, "dropped": 0, "quarantined": 2, "exampleFile": "f2"},
                ]}),
            ),
            (2 * day, json!({"batch": 2})),
            (
                2 * day + 1,
                json!({"batch": 3, "expectations": [
                    {"name": "a", "passed": 1, "failed": 3, "dropped": 0, "quarantined": 0, "exampleFile": "f3"},
                ]}),
            ),
        ];
        let r = report_of(&commits, None);
        let rows: Vec<String> = r
            .days
            .iter()
            .map(|d| {
                format!(
                    "{} {} {} {} {} {} {:?}",
                    d.day,
                    d.expectation,
                    d.checked,
                    d.failed,
                    d.dropped,
                    d.quarantined,
                    d.example_file
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                "1970-01-02 b 10 3 1 2 Some(\"f1\")",
                "1970-01-02 a 6 0 0 0 None",
                "1970-01-03 a 4 3 0 0 Some(\"f3\")",
            ]
        );
        assert_eq!(report_of(&commits, Some(2 * day as i64)).days.len(), 1);
    }
}
