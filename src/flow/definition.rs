//! A flow's definition: what it reads, how it reads it and what it lands, as setting →
//! value. A flow records it in its checkpoint when it first plans a batch (and in the
//! table's commit info, so a lost checkpoint is rebuilt with it); every later run compares
//! the definition it is given with the recorded one, here, by seed 000's rule:
//!
//! - a change the checkpoint cannot carry on from (the source, the format, the CDC keys and
//!   sequence, a stored column retyped, ...) **needs a full refresh**: the run refuses
//!   before reading anything;
//! - a change of the SELECT logic or the WHERE filter (and reader options) **applies to new
//!   rows only**: rows committed before keep the old definition's result ("mixed state"),
//!   so the run warns once, records the new definition and emits an event;
//! - what only shapes a run (batch sizes, listing, first-start-only options) is not part
//!   of the definition at all.
//!
//! [`SETTINGS`] and the option table's `on_change` column are the one place each setting's
//! class is decided; the README's table is generated from them.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::options::{self, OnChange};
use crate::schema::Schema;

/// A setting of a flow's definition that is not an option, with its class.
#[derive(Debug, Clone, Copy)]
pub struct SettingSpec {
    pub name: &'static str,
    pub on_change: OnChange,
    pub meaning: &'static str,
}

const fn setting(name: &'static str, on_change: OnChange, meaning: &'static str) -> SettingSpec {
    SettingSpec {
        name,
        on_change,
        meaning,
    }
}

use OnChange::{FullRefresh, NewRowsOnly, RunOnly};

/// Every setting of a definition but the options (whose class is the option table's
/// `on_change`), under the names a user writes them with.
pub const SETTINGS: &[SettingSpec] = &[
    setting(
        "source",
        FullRefresh,
        "the source read: a folder, a file, an S3 prefix or a Delta table (the checkpoint's files are its files)",
    ),
    setting(
        "source.kind",
        FullRefresh,
        "folder, file, S3 prefix, queue (cloudFiles.useNotifications) or Delta table",
    ),
    setting(
        "table",
        FullRefresh,
        "the target table (another table is a new flow)",
    ),
    setting(
        "format",
        FullRefresh,
        "the files' format (cloudFiles.format, or the one detected at the first batch)",
    ),
    setting(
        "flow",
        FullRefresh,
        "append, apply changes, snapshot, or auto cdc from snapshots: a CDC flow run without its CDC settings, or an append flow run with new ones",
    ),
    setting(
        "cdc.keys",
        FullRefresh,
        "which row a change record lands in",
    ),
    setting(
        "cdc.sequence_by",
        FullRefresh,
        "the order of changes the state records",
    ),
    setting(
        "cdc.stored_as_scd_type",
        FullRefresh,
        "SCD type 1 or 2: what the target's rows and the flow's state mean",
    ),
    setting(
        "cdc.track_history_column_list",
        FullRefresh,
        "SCD 2: which columns open a new version",
    ),
    setting(
        "cdc.track_history_except_column_list",
        FullRefresh,
        "SCD 2: which columns do not open a new version",
    ),
    setting(
        "cdc.apply_as_deletes",
        FullRefresh,
        "which records delete (tombstones in the state)",
    ),
    setting(
        "cdc.apply_as_truncates",
        FullRefresh,
        "which records truncate (the state's truncate mark)",
    ),
    setting(
        "cdc.format",
        FullRefresh,
        "the change envelope preset (debezium, dms): keys, sequence and deletes come from it",
    ),
    setting(
        "cdc.column_list",
        NewRowsOnly,
        "the target columns changes carry; rows not changed since keep the old selection",
    ),
    setting(
        "cdc.except_column_list",
        NewRowsOnly,
        "the columns changes leave out; rows not changed since keep the old selection",
    ),
    setting(
        "cdc.ignore_null_updates",
        NewRowsOnly,
        "how later changes merge into stored rows",
    ),
    setting(
        "snapshot.unit",
        FullRefresh,
        "what one snapshot is (file, folder, partition): the last snapshots compared with",
    ),
    setting(
        "snapshot.ingest_time_column",
        FullRefresh,
        "the history's time stamp column (the sequence of AUTO CDC from snapshots)",
    ),
    setting(
        "snapshot.snapshot_id_column",
        FullRefresh,
        "the history's snapshot id column",
    ),
    setting(
        "snapshot.skip_unchanged",
        NewRowsOnly,
        "whether an unchanged snapshot is appended again",
    ),
    setting(
        "snapshot.expected_interval",
        RunOnly,
        "when a snapshot is overdue (an alert only)",
    ),
    setting(
        "where",
        NewRowsOnly,
        "which rows land; rows committed before were filtered by the old condition (or none)",
    ),
    setting(
        "columns",
        NewRowsOnly,
        "which columns land; older rows keep the old selection",
    ),
    setting(
        "except_columns",
        NewRowsOnly,
        "which columns are left out; older rows keep the old selection",
    ),
    setting(
        "with_columns",
        NewRowsOnly,
        "the columns the flow computes; older rows keep the old values (or none)",
    ),
    setting(
        "expect.<name>",
        NewRowsOnly,
        "a data-quality rule (its action and check): rows committed before were judged by the old rules (or none)",
    ),
    setting(
        "quarantine_table",
        NewRowsOnly,
        "where quarantined rows land; rows quarantined before stay where they are",
    ),
    setting(
        "once",
        NewRowsOnly,
        "a ONCE flow runs to completion once; its own record decides whether it runs again",
    ),
];

/// The prefix of a rule's setting: `expect.valid_amount` = `drop: amount > 0`.
pub const EXPECT_PREFIX: &str = "expect.";

/// The options the definition records under a setting of [`SETTINGS`] instead.
const RECORDED_AS_SETTING: [&str; 2] = ["cloudFiles.format", "cloudFiles.useNotifications"];

/// The class of a change to `setting` (an entry of [`SETTINGS`], or an option's canonical
/// key), before the stored schema is looked at. An unknown name (recorded by a later
/// version) needs a full refresh: nothing is assumed about it.
pub fn class_of(setting: &str) -> OnChange {
    let setting = if setting.starts_with(EXPECT_PREFIX) {
        "expect.<name>"
    } else {
        setting
    };
    if let Some(s) = SETTINGS.iter().find(|s| s.name == setting) {
        return s.on_change;
    }
    match options::OPTIONS.iter().find(|o| o.key == setting) {
        Some(o) => o.on_change,
        None => FullRefresh,
    }
}

/// Whether an option (canonical key) is recorded in a definition among its options.
pub fn records_option(key: &str) -> bool {
    !RECORDED_AS_SETTING.contains(&key) && class_of(key) != RunOnly
}

/// Setting → value, as text. A setting left at its default is absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FlowDefinition(BTreeMap<String, String>);

impl FlowDefinition {
    pub fn new() -> FlowDefinition {
        FlowDefinition::default()
    }

    pub fn set(&mut self, setting: &str, value: impl Into<String>) {
        self.0.insert(setting.to_string(), value.into());
    }

    /// An option as given: booleans in lower case, so `True` and `true` are one value.
    pub fn set_option(&mut self, key: &str, value: &str) {
        let value = value.trim();
        let value = if value.eq_ignore_ascii_case("true") || value.eq_ignore_ascii_case("false") {
            value.to_ascii_lowercase()
        } else {
            value.to_string()
        };
        self.set(key, value);
    }

    pub fn get(&self, setting: &str) -> Option<&str> {
        self.0.get(setting).map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// A definition recorded as JSON; `None` for another shape (a ONCE flow's record from
    /// before definitions, whose values are not all text).
    pub fn from_json(value: &serde_json::Value) -> Option<FlowDefinition> {
        serde_json::from_value(value.clone()).ok()
    }
}

/// One setting whose given value differs from the recorded one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DefinitionChange {
    pub setting: String,
    /// `None`: not set (its default).
    pub recorded: Option<String>,
    pub given: Option<String>,
    #[serde(serialize_with = "on_change_name")]
    pub on_change: OnChange,
    /// Why a change that would apply to new rows needs a full refresh here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

fn on_change_name<S: serde::Serializer>(c: &OnChange, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(on_change_label(*c))
}

/// A class as the docs and messages name it.
pub fn on_change_label(c: OnChange) -> &'static str {
    match c {
        FullRefresh => "needs a full refresh",
        NewRowsOnly => "applies to new rows only",
        RunOnly => "not part of the definition",
    }
}

impl fmt::Display for DefinitionChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = |v: &Option<String>| match v {
            Some(v) => format!("\"{v}\""),
            None => "(not set)".to_string(),
        };
        write!(
            f,
            "{}: recorded {}, given {}",
            self.setting,
            value(&self.recorded),
            value(&self.given)
        )?;
        if let Some(why) = &self.why {
            write!(f, " ({why})")?;
        }
        Ok(())
    }
}

/// The differences between the `recorded` definition and the `given` one, each with its
/// class. `stored` is the stream's latest schema: a hint or `schema` that retypes one of
/// its columns needs a full refresh, while one for a column not yet stored applies to new
/// rows. A `format` left out of the given definition keeps the recorded one (detection
/// reads the checkpoint's), so it is no change.
pub fn compare(
    recorded: &FlowDefinition,
    given: &FlowDefinition,
    stored: Option<&Schema>,
) -> Vec<DefinitionChange> {
    let mut names: Vec<&str> = recorded
        .0
        .keys()
        .chain(given.0.keys())
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut changes = Vec::new();
    for name in names {
        let (was, now) = (recorded.get(name), given.get(name));
        if was == now || (name == "format" && now.is_none()) {
            continue;
        }
        let mut on_change = class_of(name);
        if on_change == RunOnly {
            continue;
        }
        let mut why = None;
        if let (Some(stored), Some(now)) = (stored, now)
            && let Some(retyped) = retyped_columns(name, now, stored)
        {
            on_change = FullRefresh;
            why = Some(format!(
                "it changes the type of stored column {retyped}: a Delta table cannot change a column's type"
            ));
        }
        changes.push(DefinitionChange {
            setting: name.to_string(),
            recorded: was.map(str::to_string),
            given: now.map(str::to_string),
            on_change,
            why,
        });
    }
    changes
}

/// For `cloudFiles.schemaHints` or `schema`: the stored columns whose type `value` changes,
/// described (`None` when it retypes none).
fn retyped_columns(setting: &str, value: &str, stored: &Schema) -> Option<String> {
    let desired = match setting {
        "cloudFiles.schemaHints" => {
            let hints = crate::schema::hints::parse_hints(value).ok()?;
            let mut desired = stored.clone();
            crate::schema::hints::apply_hints(&mut desired, &hints).ok()?;
            desired
        }
        "schema" => crate::schema::hints::parse_schema(value).ok()?,
        _ => return None,
    };
    let conflicts = crate::schema::evolution::type_conflicts(stored, &desired);
    (!conflicts.is_empty()).then(|| conflicts.join(", "))
}

/// Whether any change needs a full refresh.
pub fn needs_full_refresh(changes: &[DefinitionChange]) -> bool {
    changes.iter().any(|c| c.on_change == FullRefresh)
}

/// The docs' table of every setting and option that is part of a definition, by class
/// (README "When a flow's definition changes"; a test keeps the two equal).
pub fn markdown_table() -> String {
    let mut out = String::from("| setting | on change | what it decides |\n|---|---|---|\n");
    let mut rows: Vec<(OnChange, String, String)> = SETTINGS
        .iter()
        .map(|s| (s.on_change, s.name.to_string(), s.meaning.to_string()))
        .collect();
    rows.extend(
        options::OPTIONS
            .iter()
            .filter(|o| o.support == options::Support::Supported)
            .filter(|o| !RECORDED_AS_SETTING.contains(&o.key))
            .map(|o| (o.on_change, o.key.to_string(), o.meaning.to_string())),
    );
    let rank = |c: OnChange| match c {
        FullRefresh => 0,
        NewRowsOnly => 1,
        RunOnly => 2,
    };
    rows.sort_by_key(|(c, _, _)| rank(*c));
    for (c, name, meaning) in rows {
        let meaning = meaning.replace('|', "\\|");
        let class = match (name.as_str(), c) {
            ("cloudFiles.schemaHints" | "schema", _) => {
                "applies to new rows only; needs a full refresh when it retypes a stored column"
            }
            _ => on_change_label(c),
        };
        out.push_str(&format!("| `{name}` | {class} | {meaning} |\n"));
    }
    out
}

/// A changed definition that needs a full refresh: every change, and the way out.
#[derive(Debug, thiserror::Error)]
pub struct NeedsRefresh {
    pub stream: String,
    pub table: String,
    pub since_batch: u64,
    pub changes: Vec<DefinitionChange>,
}

impl std::fmt::Display for NeedsRefresh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "stream {}: the flow's definition changed in a way its checkpoint cannot carry on \
             from (recorded since batch {}); nothing was read or written:",
            self.stream, self.since_batch
        )?;
        for c in &self.changes {
            writeln!(f, "  - {c}: {}", on_change_label(c.on_change))?;
        }
        write!(
            f,
            "Run it with the recorded values again, or start the table over under the new \
             definition with a full refresh: `autoloader reset {}` (refused while the table's \
             pipelines.reset.allowed is false), then run again.",
            self.table
        )
    }
}

/// Checkpoint metadata: the [`RecordedDefinition`], as JSON.
pub const META_KEY: &str = "flowDefinition";
/// A copy of the record in the checkpoint's local folder, for `status` and `run --check`
/// while a running stream holds the store's lock. Only the store's record is trusted.
pub const MIRROR_FILE: &str = "flow-definition.json";

/// A flow's definition as its checkpoint holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedDefinition {
    pub definition: FlowDefinition,
    /// The first batch planned under it; rows of earlier batches were written under an
    /// earlier definition.
    pub since_batch: u64,
    pub recorded_at_ms: i64,
    /// Whether a table commit carries it yet (the first one made under it does).
    #[serde(default)]
    pub in_table: bool,
}

/// The copy of a checkpoint's record kept in its local folder (see [`MIRROR_FILE`]).
pub fn mirrored(local_dir: &Path) -> Option<RecordedDefinition> {
    let text = std::fs::read_to_string(local_dir.join(MIRROR_FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{DataType, Field};

    fn def(pairs: &[(&str, &str)]) -> FlowDefinition {
        let mut d = FlowDefinition::new();
        for (k, v) in pairs {
            d.set(k, *v);
        }
        d
    }

    #[test]
    fn each_difference_is_classified_once() {
        let recorded = def(&[
            ("source", "/land/a"),
            ("cdc.keys", "userId"),
            ("where", "amount > 0"),
            ("format", "json"),
        ]);
        let given = def(&[
            ("source", "/land/a"),
            ("cdc.keys", "name"),
            ("cloudFiles.inferColumnTypes", "true"),
        ]);
        let changes = compare(&recorded, &given, None);
        let got: Vec<(&str, OnChange)> = changes
            .iter()
            .map(|c| (c.setting.as_str(), c.on_change))
            .collect();
        // The format left out is detection, which keeps the recorded one.
        assert_eq!(
            got,
            [
                ("cdc.keys", FullRefresh),
                ("cloudFiles.inferColumnTypes", NewRowsOnly),
                ("where", NewRowsOnly),
            ]
        );
        assert!(needs_full_refresh(&changes));
        assert_eq!(
            changes[0].to_string(),
            "cdc.keys: recorded \"userId\", given \"name\""
        );
        assert_eq!(
            changes[2].to_string(),
            "where: recorded \"amount > 0\", given (not set)"
        );
        assert!(compare(&recorded, &recorded, None).is_empty());
    }

    #[test]
    fn a_hint_needs_a_refresh_only_when_it_retypes_a_stored_column() {
        let stored = Schema {
            fields: vec![Field::new("amount", DataType::Long)],
        };
        let recorded = def(&[]);
        let retype = def(&[("cloudFiles.schemaHints", "amount STRING")]);
        let changes = compare(&recorded, &retype, Some(&stored));
        assert_eq!(changes[0].on_change, FullRefresh, "{changes:?}");
        assert!(changes[0].why.as_deref().unwrap().contains("amount"));
        let new_column = def(&[("cloudFiles.schemaHints", "price DOUBLE")]);
        assert_eq!(
            compare(&recorded, &new_column, Some(&stored))[0].on_change,
            NewRowsOnly
        );
        let same_type = def(&[("schema", "amount BIGINT, price DOUBLE")]);
        assert_eq!(
            compare(&recorded, &same_type, Some(&stored))[0].on_change,
            NewRowsOnly
        );
    }

    #[test]
    fn run_only_options_are_not_recorded_and_unknown_settings_refuse() {
        assert!(!records_option("cloudFiles.maxFilesPerTrigger"));
        assert!(!records_option("cloudFiles.format"));
        assert!(records_option("pathGlobFilter"));
        assert_eq!(class_of("rescuedDataColumn"), FullRefresh);
        assert_eq!(class_of("some.future.setting"), FullRefresh);
        let json = def(&[("a", "1")]).to_json();
        assert_eq!(FlowDefinition::from_json(&json), Some(def(&[("a", "1")])));
        assert_eq!(
            FlowDefinition::from_json(&serde_json::json!({"keys": {"a": "1"}})),
            None
        );
    }
}
