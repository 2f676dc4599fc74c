//! APPLY CHANGES (Databricks' `create_auto_cdc_flow`): change records applied to a target
//! keyed by business key. This module holds the flow's settings, parsed and checked in one
//! place from `[stream.cdc]` or `-o cdc.KEY=VALUE` under Databricks' parameter names, and
//! the SCD type 1 reduction (`scd1.rs`) the CDC target (`target/cdc.rs`) applies.

use std::collections::BTreeMap;

/// Maps and sets of encoded keys, probed once per record, per row of the target and per
/// entry of the state: a fast hash (SipHash was 7% of a batch's CPU).
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// See [`FastMap`].
pub type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

/// An encoded key or sequence (`arrow-row` bytes): inline up to 16 bytes, so the change
/// records of a batch, its key sets and maps, and its state entries allocate nothing per
/// key (a batch of 100,000 keys spent about 8 allocations and frees a key). Hashes, compares
/// and borrows as its bytes, as the `Vec<u8>` it replaces did.
pub type KeyBytes = smallvec::SmallVec<[u8; 16]>;

pub mod keys;
pub mod place;
pub mod preset;
pub mod scd1;
pub mod scd2;

/// A condition over change records (`apply_as_deletes`, `apply_as_truncates`): per row,
/// whether it holds (null counts as false).
pub type RowCondition =
    std::sync::Arc<dyn Fn(&arrow_array::RecordBatch) -> Result<Vec<bool>, String> + Send + Sync>;

/// Settings as `key = value` pairs.
pub type Pairs = Vec<(String, String)>;

/// The prefix of CDC settings given as options (`-o cdc.keys=id`).
pub const OPTION_PREFIX: &str = "cdc.";

/// Which target columns the change records' columns fill.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ColumnSelection {
    #[default]
    All,
    Only(Vec<String>),
    Except(Vec<String>),
}

impl ColumnSelection {
    /// Whether column `name` of the change records goes into the target.
    pub fn keeps(&self, name: &str) -> bool {
        match self {
            ColumnSelection::All => true,
            ColumnSelection::Only(names) => names.iter().any(|n| n == name),
            ColumnSelection::Except(names) => !names.iter().any(|n| n == name),
        }
    }
}

/// A CDC flow's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdcSpec {
    pub keys: Vec<String>,
    /// Compared field by field, in order.
    pub sequence_by: Vec<String>,
    /// A condition over the change record (the flows' `where` language): true deletes.
    pub apply_as_deletes: Option<String>,
    /// True truncates the target below the record's sequence (SCD type 1 only).
    pub apply_as_truncates: Option<String>,
    pub columns: ColumnSelection,
    pub stored_as_scd_type: u8,
    /// SCD type 2: the columns whose change opens a new version (the others are updated
    /// in place); all selected non-key columns by default.
    pub track_history: ColumnSelection,
    pub ignore_null_updates: bool,
    /// `format`: the change envelope a preset unwraps (none: plain records).
    pub format: Option<preset::Envelope>,
    /// AUTO CDC from snapshots: the snapshot flow's stamps, which sequence the changes.
    pub from_snapshots: Option<FromSnapshots>,
}

/// AUTO CDC from snapshots (a `[stream.snapshot]` flow with `[stream.cdc]`): each snapshot
/// is diffed against the target into change records (`target/cdc/from_snapshots.rs`),
/// sequenced by the snapshot's ingest time. The stamp columns are never target columns
/// and never compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FromSnapshots {
    pub ingest_time_column: String,
    pub snapshot_id_column: String,
}

/// The column the snapshot diff marks its delete records with (true: the key is absent
/// from the snapshot).
pub const SNAPSHOT_DELETE: &str = "__snapshot_delete";

/// The SCD type 2 target's version columns: when a version starts (inclusive) and ends
/// (exclusive, null while it is current), of the sequence's type.
pub const START_AT: &str = "__START_AT";
pub const END_AT: &str = "__END_AT";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CdcError {
    #[error("CDC setting {key}: {reason}")]
    Invalid { key: String, reason: String },
    #[error("unknown CDC setting \"{0}\" (known: {known})", known = known())]
    Unknown(String),
    #[error("{0}")]
    Data(String),
}

/// Every setting, under Databricks' names (`create_auto_cdc_flow`): key, default,
/// meaning. The one table the parser checks keys against and `autoloader options` prints
/// (`cdc.KEY` on the command line, `[stream.cdc]` in a config file).
pub const SETTINGS: &[(&str, &str, &str)] = &[
    (
        "keys",
        "required",
        "the business key columns: a record changes the row of its key",
    ),
    (
        "sequence_by",
        "required (a preset's own)",
        "the columns ordering a key's changes (compared in order)",
    ),
    (
        "apply_as_deletes",
        "none",
        "a condition on the record (where language): true deletes the key's row",
    ),
    (
        "apply_as_truncates",
        "none",
        "SCD 1: a condition: true empties the table below the record's sequence",
    ),
    (
        "column_list",
        "every column",
        "the record columns that reach the table",
    ),
    (
        "except_column_list",
        "none",
        "the record columns kept out of the table",
    ),
    (
        "stored_as_scd_type",
        "1",
        "1: the latest row per key; 2: every version, with __START_AT and __END_AT",
    ),
    (
        "ignore_null_updates",
        "false",
        "a null in an update keeps the stored value",
    ),
    (
        "track_history_column_list",
        "every column",
        "SCD 2: the columns whose change opens a new version",
    ),
    (
        "track_history_except_column_list",
        "none",
        "SCD 2: the columns whose change updates the current version in place",
    ),
    (
        "format",
        "none",
        "a change envelope preset: debezium or dms (keys, sequence and deletes from it)",
    ),
];

fn known() -> String {
    SETTINGS
        .iter()
        .map(|(k, _, _)| *k)
        .collect::<Vec<_>>()
        .join(", ")
}

fn invalid(key: &str, reason: impl Into<String>) -> CdcError {
    CdcError::Invalid {
        key: key.to_string(),
        reason: reason.into(),
    }
}

/// A comma-separated list (`-o cdc.keys=a,b`) or a TOML array joined the same way.
fn names(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

impl CdcSpec {
    /// Parses settings given as `key = value` pairs (without the `cdc.` prefix; lists
    /// comma-separated). `None` when there are none: the flow appends.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Option<CdcSpec>, CdcError> {
        Self::from_pairs_for(pairs, None)
    }

    /// [`Self::from_pairs`] for a stream that may be a snapshot flow: then the changes are
    /// the snapshots' differences, sequenced by their ingest time, and `sequence_by`,
    /// the conditions and `format` do not apply.
    pub fn from_pairs_for(
        pairs: &[(String, String)],
        snapshot: Option<&crate::flow::snapshot::SnapshotSpec>,
    ) -> Result<Option<CdcSpec>, CdcError> {
        if pairs.is_empty() {
            return Ok(None);
        }
        let mut map = BTreeMap::new();
        for (k, v) in pairs {
            let key = k.trim();
            if !SETTINGS.iter().any(|(k, _, _)| *k == key) {
                return Err(CdcError::Unknown(key.to_string()));
            }
            map.insert(key, v.trim().to_string());
        }
        if let Some(snapshot) = snapshot {
            refuse_for_snapshots(&map)?;
            map.insert("sequence_by", snapshot.ingest_time_column.clone());
        }
        let get = |k: &str| map.get(k).map(String::as_str);
        let keys = names(
            get("keys").ok_or_else(|| invalid("keys", "required: the business key columns"))?,
        );
        if keys.is_empty() {
            return Err(invalid("keys", "give at least one column"));
        }
        let format = match get("format") {
            None | Some("") => None,
            Some(f) => Some(preset::Envelope::from_name(f).ok_or_else(|| {
                invalid(
                    "format",
                    format!("{f}: expected \"debezium\" or \"dms\" (or none: plain records)"),
                )
            })?),
        };
        let sequence_given = match (get("sequence_by"), format) {
            (Some(v), _) => names(v),
            (None, Some(f)) => f.default_sequence().ok_or_else(|| {
                invalid(
                    "sequence_by",
                    "required with format = \"dms\": the DMS timestamp column (the endpoint's \
                     TimestampColumnName)",
                )
            })?,
            (None, None) => {
                return Err(invalid(
                    "sequence_by",
                    "required: the column(s) that order changes",
                ));
            }
        };
        if sequence_given.is_empty() {
            return Err(invalid("sequence_by", "give at least one column"));
        }
        let sequence_by = match format {
            Some(f) => f.sequence(sequence_given.clone()),
            None => sequence_given.clone(),
        };
        let columns = column_selection(&map, &keys, format, &sequence_given)?;
        let (stored_as_scd_type, track_history) = scd_type_and_history(&map)?;
        if stored_as_scd_type == 2 && get("apply_as_truncates").is_some() {
            return Err(invalid(
                "apply_as_truncates",
                "SCD type 2 keeps history and takes no truncates (Databricks rejects them \
                 too); use stored_as_scd_type = 1",
            ));
        }
        let ignore_null_updates = match get("ignore_null_updates") {
            None => false,
            Some(v) => crate::parse::scalars::parse_bool(v).ok_or_else(|| {
                invalid(
                    "ignore_null_updates",
                    format!("{v}: expected true or false"),
                )
            })?,
        };
        Ok(Some(CdcSpec {
            keys,
            sequence_by,
            apply_as_deletes: get("apply_as_deletes")
                .map(str::to_string)
                .or_else(|| format.map(|f| f.default_deletes())),
            apply_as_truncates: get("apply_as_truncates")
                .map(str::to_string)
                .or_else(|| format.and_then(|f| f.default_truncates())),
            columns,
            stored_as_scd_type,
            track_history,
            ignore_null_updates,
            format,
            from_snapshots: snapshot.map(|s| FromSnapshots {
                ingest_time_column: s.ingest_time_column.clone(),
                snapshot_id_column: s.snapshot_id_column.clone(),
            }),
        }))
    }

    /// Splits `-o cdc.KEY=VALUE` pairs off an option list.
    pub fn split_options(raw: Pairs) -> (Pairs, Pairs) {
        crate::options::split_prefixed(raw, OPTION_PREFIX)
    }

    /// Whether change column `name` goes into the target. A preset's own columns
    /// (`__op`, `__dms_phase`, ...) only when `column_list` names them.
    pub fn keeps(&self, name: &str) -> bool {
        if let Some(s) = &self.from_snapshots
            && (name == s.ingest_time_column
                || name == s.snapshot_id_column
                || name == SNAPSHOT_DELETE)
        {
            return false;
        }
        if self.format.is_some()
            && preset::GENERATED.contains(&name)
            && !matches!(&self.columns, ColumnSelection::Only(list) if list.iter().any(|c| c == name))
        {
            return false;
        }
        self.columns.keeps(name)
    }

    /// Whether a change in target column `name` opens a new version (SCD type 2): every
    /// selected non-key column unless the track-history lists say otherwise.
    pub fn tracks(&self, name: &str) -> bool {
        !self.keys.iter().any(|k| k == name) && self.track_history.keeps(name)
    }

    /// The change records' columns as the flow sees them: `raw` unwrapped by the preset.
    pub fn unwrapped_schema(
        &self,
        raw: &arrow_schema::Schema,
    ) -> Result<arrow_schema::SchemaRef, CdcError> {
        match self.format {
            None => Ok(std::sync::Arc::new(raw.clone())),
            Some(f) => f.schema(raw).map_err(|e| CdcError::Data(e.to_string())),
        }
    }

    /// A batch of change records as the flow applies them: unwrapped by the preset
    /// (tombstones dropped and logged), with each record's place for errors.
    pub fn unwrap_batch(
        &self,
        raw: arrow_array::RecordBatch,
        places: place::RecordPlaces,
    ) -> Result<(arrow_array::RecordBatch, place::RecordPlaces), CdcError> {
        let Some(f) = self.format else {
            return Ok((raw, places));
        };
        let (batch, kept) = f.unwrap(&raw).map_err(|e| {
            let e = match e {
                preset::PresetError::Record {
                    format,
                    reason,
                    row,
                    ..
                } => preset::PresetError::Record {
                    format,
                    reason,
                    place: places.describe(row),
                    row,
                },
                other => other,
            };
            CdcError::Data(e.to_string())
        })?;
        let Some(kept) = kept else {
            return Ok((batch, places));
        };
        let tombstones = kept.iter().filter(|k| !**k).count();
        tracing::info!(
            tombstones,
            "Skipped Debezium tombstones (null values, each following its delete event)."
        );
        Ok((batch, places.retain(&kept)))
    }

    /// Checks the settings against the change records' columns (`schema`), before anything
    /// runs: keys, sequence and selected columns exist, and the conditions bind.
    pub fn check(
        &self,
        schema: &arrow_schema::Schema,
        zone: chrono_tz::Tz,
    ) -> Result<(), CdcError> {
        let unwrapped = self.unwrapped_schema(schema)?;
        let schema = unwrapped.as_ref();
        let has = |c: &str| schema.field_with_name(c).is_ok();
        for (what, names) in [("keys", &self.keys), ("sequence_by", &self.sequence_by)] {
            if let Some(c) = names.iter().find(|c| !has(c)) {
                return Err(invalid(
                    what,
                    format!("the change records have no column {c}"),
                ));
            }
        }
        for c in &self.sequence_by {
            let text = schema.field_with_name(c).is_ok_and(|f| {
                matches!(
                    f.data_type(),
                    arrow_schema::DataType::Utf8 | arrow_schema::DataType::LargeUtf8
                )
            });
            if text {
                return Err(invalid(
                    "sequence_by",
                    format!(
                        "column {c} is STRING, which orders as text (\"10\" before \"9\"): \
                         read it as a number or timestamp with cloudFiles.inferColumnTypes=true \
                         or a hint (cloudFiles.schemaHints = \"{c} BIGINT\")"
                    ),
                ));
            }
        }
        // Named by the setting the user wrote (a list of either kind).
        let lists = [
            (&self.columns, "column_list", "except_column_list"),
            (
                &self.track_history,
                "track_history_column_list",
                "track_history_except_column_list",
            ),
        ];
        for (selection, only, except) in lists {
            let (key, names) = match selection {
                ColumnSelection::Only(names) => (only, names),
                ColumnSelection::Except(names) => (except, names),
                ColumnSelection::All => continue,
            };
            if let Some(c) = names.iter().find(|c| !has(c)) {
                return Err(invalid(
                    key,
                    format!("the change records have no column {c}"),
                ));
            }
        }
        if self.stored_as_scd_type == 2
            && let Some(f) = schema
                .fields()
                .iter()
                .find(|f| self.keeps(f.name()) && [START_AT, END_AT].contains(&f.name().as_str()))
        {
            return Err(invalid(
                "except_column_list",
                format!(
                    "the change records have a column {}, which the SCD type 2 target adds \
                     itself: leave it out",
                    f.name()
                ),
            ));
        }
        for (what, text) in [
            ("apply_as_deletes", &self.apply_as_deletes),
            ("apply_as_truncates", &self.apply_as_truncates),
        ] {
            if let Some(text) = text {
                crate::expr::Condition::parse(text)
                    .and_then(|c| c.bind(schema, zone))
                    .map_err(|e| invalid(what, e.to_string()))?;
            }
        }
        Ok(())
    }

    /// The delete and truncate conditions, bound to each batch's columns as it comes.
    pub fn conditions(&self, zone: chrono_tz::Tz) -> (Option<RowCondition>, Option<RowCondition>) {
        if self.from_snapshots.is_some() {
            // The snapshot diff marks its deletes itself.
            let marked: RowCondition = std::sync::Arc::new(|batch: &arrow_array::RecordBatch| {
                let flags = batch
                    .column_by_name(SNAPSHOT_DELETE)
                    .and_then(|c| c.as_any().downcast_ref::<arrow_array::BooleanArray>())
                    .ok_or_else(|| format!("the snapshot's changes have no {SNAPSHOT_DELETE}"))?;
                Ok(flags.iter().map(|f| f == Some(true)).collect())
            });
            return (Some(marked), None);
        }
        let make = |text: &Option<String>| {
            text.clone().map(|text| -> RowCondition {
                std::sync::Arc::new(move |batch: &arrow_array::RecordBatch| {
                    let bound = crate::expr::Condition::parse(&text)
                        .and_then(|c| c.bind(&batch.schema(), zone))
                        .map_err(|e| e.to_string())?;
                    let holds = bound.evaluate(batch).map_err(|e| e.to_string())?;
                    Ok(holds.values().iter().collect())
                })
            })
        };
        (make(&self.apply_as_deletes), make(&self.apply_as_truncates))
    }
}

/// The settings AUTO CDC from snapshots takes none of, refused naming why.
fn refuse_for_snapshots(map: &BTreeMap<&str, String>) -> Result<(), CdcError> {
    for (k, why) in [
        (
            "sequence_by",
            "the snapshots' order is the sequence (their ingest time)",
        ),
        (
            "apply_as_deletes",
            "a key absent from a snapshot is deleted",
        ),
        (
            "apply_as_truncates",
            "a key absent from a snapshot is deleted",
        ),
        ("format", "a snapshot holds rows, not change events"),
    ] {
        if map.contains_key(k) {
            return Err(invalid(
                k,
                format!("AUTO CDC from snapshots takes none: {why}; leave it out"),
            ));
        }
    }
    Ok(())
}

/// Which change columns reach the target (`column_list` or `except_column_list`, or a
/// preset's default); the keys must be among them.
fn column_selection(
    map: &BTreeMap<&str, String>,
    keys: &[String],
    format: Option<preset::Envelope>,
    sequence_given: &[String],
) -> Result<ColumnSelection, CdcError> {
    let get = |k: &str| map.get(k).map(String::as_str);
    let columns = match (get("column_list"), get("except_column_list")) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "column_list",
                "column_list and except_column_list cannot both be given",
            ));
        }
        (Some(v), None) => ColumnSelection::Only(names(v)),
        (None, Some(v)) => ColumnSelection::Except(names(v)),
        (None, None) => match format {
            Some(f) => ColumnSelection::Except(f.default_except(sequence_given)),
            None => ColumnSelection::All,
        },
    };
    if let ColumnSelection::Only(list) = &columns
        && let Some(k) = keys.iter().find(|k| !list.contains(k))
    {
        return Err(invalid(
            "column_list",
            format!("it must hold the key column {k}"),
        ));
    }
    if let ColumnSelection::Except(list) = &columns
        && let Some(k) = keys.iter().find(|k| list.contains(k))
    {
        return Err(invalid(
            "except_column_list",
            format!("it cannot leave out the key column {k}"),
        ));
    }
    Ok(columns)
}

/// `stored_as_scd_type` and, for type 2, the columns whose changes make history.
fn scd_type_and_history(map: &BTreeMap<&str, String>) -> Result<(u8, ColumnSelection), CdcError> {
    let get = |k: &str| map.get(k).map(String::as_str);
    let stored_as_scd_type = match get("stored_as_scd_type").unwrap_or("1") {
        "1" => 1,
        "2" => 2,
        other => {
            return Err(invalid(
                "stored_as_scd_type",
                format!("{other}: expected 1 or 2"),
            ));
        }
    };
    let track_history = match (
        get("track_history_column_list"),
        get("track_history_except_column_list"),
    ) {
        (Some(_), _) | (_, Some(_)) if stored_as_scd_type != 2 => {
            let k = if get("track_history_column_list").is_some() {
                "track_history_column_list"
            } else {
                "track_history_except_column_list"
            };
            return Err(invalid(k, "applies to stored_as_scd_type = 2 only"));
        }
        (Some(_), Some(_)) => {
            return Err(invalid(
                "track_history_column_list",
                "track_history_column_list and track_history_except_column_list cannot \
                 both be given",
            ));
        }
        (Some(v), None) => ColumnSelection::Only(names(v)),
        (None, Some(v)) => ColumnSelection::Except(names(v)),
        (None, None) => ColumnSelection::All,
    };
    Ok((stored_as_scd_type, track_history))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_snapshot_flow_is_sequenced_by_its_ingest_time_and_takes_no_conditions() {
        let snapshot = crate::flow::snapshot::SnapshotSpec::from_pairs(&pairs(&[("unit", "file")]))
            .unwrap()
            .unwrap();
        let spec = CdcSpec::from_pairs_for(&pairs(&[("keys", "id")]), Some(&snapshot))
            .unwrap()
            .unwrap();
        assert_eq!(spec.sequence_by, ["_ingested_at"]);
        assert!(!spec.keeps("_ingested_at") && !spec.keeps("_snapshot_id"));
        assert!(!spec.keeps(SNAPSHOT_DELETE) && spec.keeps("name"));
        for bad in ["sequence_by", "apply_as_deletes", "format"] {
            let err =
                CdcSpec::from_pairs_for(&pairs(&[("keys", "id"), (bad, "x")]), Some(&snapshot))
                    .unwrap_err()
                    .to_string();
            assert!(
                err.contains(bad) && err.contains("AUTO CDC from snapshots"),
                "{err}"
            );
        }
        // Without a snapshot flow, sequence_by stays required.
        assert!(CdcSpec::from_pairs(&pairs(&[("keys", "id")])).is_err());
    }

    #[test]
    fn settings_parse_under_databricks_names() {
        let spec = CdcSpec::from_pairs(&pairs(&[
            ("keys", "userId"),
            ("sequence_by", "sequenceNum"),
            ("apply_as_deletes", "operation = 'DELETE'"),
            ("except_column_list", "operation, sequenceNum"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(spec.keys, ["userId"]);
        assert_eq!(spec.stored_as_scd_type, 1);
        assert!(!spec.keeps("operation") && spec.keeps("name"));
        assert_eq!(CdcSpec::from_pairs(&[]).unwrap(), None);
    }

    #[test]
    fn a_listed_column_the_records_lack_is_named_under_the_list_given() {
        let schema = arrow_schema::Schema::new(vec![
            arrow_schema::Field::new("k", arrow_schema::DataType::Int64, true),
            arrow_schema::Field::new("s", arrow_schema::DataType::Int64, true),
        ]);
        let checked = |p: &[(&str, &str)]| {
            CdcSpec::from_pairs(&pairs(p))
                .unwrap()
                .unwrap()
                .check(&schema, chrono_tz::UTC)
                .unwrap_err()
                .to_string()
        };
        let base = [("keys", "k"), ("sequence_by", "s")];
        for (key, list) in [
            ("except_column_list", "_rescued_data"),
            ("column_list", "k, nope"),
        ] {
            let err = checked(&[base[0], base[1], (key, list)]);
            assert!(err.starts_with(&format!("CDC setting {key}:")), "{err}");
            assert!(err.contains("no column"), "{err}");
        }
        let scd2 = [base[0], base[1], ("stored_as_scd_type", "2")];
        let err = checked(&[
            scd2[0],
            scd2[1],
            scd2[2],
            ("track_history_except_column_list", "x"),
        ]);
        assert!(
            err.starts_with("CDC setting track_history_except_column_list:"),
            "{err}"
        );
    }

    #[test]
    fn mistakes_are_named() {
        let err = |p: &[(&str, &str)]| CdcSpec::from_pairs(&pairs(p)).unwrap_err().to_string();
        assert!(err(&[("sequence_by", "s")]).contains("keys"));
        assert!(err(&[("keys", "k")]).contains("sequence_by"));
        assert!(
            err(&[("keys", "k"), ("sequence_by", "s"), ("colum_list", "a")]).contains("unknown")
        );
        assert!(
            err(&[
                ("keys", "k"),
                ("sequence_by", "s"),
                ("column_list", "a"),
                ("except_column_list", "b")
            ])
            .contains("cannot both")
        );
        assert!(
            err(&[
                ("keys", "k"),
                ("sequence_by", "s"),
                ("except_column_list", "k")
            ])
            .contains("key column k")
        );
        assert!(
            err(&[
                ("keys", "k"),
                ("sequence_by", "s"),
                ("stored_as_scd_type", "2"),
                ("apply_as_truncates", "op = 'T'")
            ])
            .contains("no truncates")
        );
        assert!(
            err(&[
                ("keys", "k"),
                ("sequence_by", "s"),
                ("track_history_column_list", "a")
            ])
            .contains("type = 2 only")
        );
        let spec = CdcSpec::from_pairs(&pairs(&[
            ("keys", "k"),
            ("sequence_by", "s"),
            ("stored_as_scd_type", "2"),
            ("track_history_except_column_list", "city"),
        ]))
        .unwrap()
        .unwrap();
        assert!(spec.tracks("name") && !spec.tracks("city") && !spec.tracks("k"));
    }

    #[test]
    fn presets_give_defaults_the_user_overrides() {
        let spec = |p: &[(&str, &str)]| CdcSpec::from_pairs(&pairs(p)).unwrap().unwrap();
        let d = spec(&[("format", "debezium"), ("keys", "id")]);
        assert_eq!(d.format, Some(preset::Envelope::Debezium));
        assert_eq!(d.sequence_by, [preset::TS_MS, preset::SOURCE_POS]);
        assert_eq!(d.apply_as_deletes.as_deref(), Some("__op = 'd'"));
        assert_eq!(d.apply_as_truncates.as_deref(), Some("__op = 't'"));
        assert!(!d.keeps(preset::OP) && d.keeps("name"));
        let d = spec(&[
            ("format", "debezium"),
            ("keys", "id"),
            ("sequence_by", "updated_at"),
            ("apply_as_deletes", "deleted = true"),
            ("column_list", "id, __op"),
        ]);
        assert_eq!(d.sequence_by, ["updated_at"]);
        assert_eq!(d.apply_as_deletes.as_deref(), Some("deleted = true"));
        assert!(d.keeps(preset::OP) && !d.keeps(preset::TS_MS) && !d.keeps("name"));
        let m = spec(&[("format", "DMS"), ("keys", "id"), ("sequence_by", "ts")]);
        assert_eq!(m.sequence_by, [preset::DMS_PHASE, "ts"]);
        assert_eq!(m.apply_as_deletes.as_deref(), Some("Op = 'D'"));
        assert!(!m.keeps("Op") && !m.keeps("ts") && !m.keeps(preset::DMS_PHASE));
        assert!(m.keeps("name"));
        let m = spec(&[
            ("format", "dms"),
            ("keys", "id"),
            ("sequence_by", "ts"),
            ("except_column_list", "Op"),
        ]);
        assert!(
            m.keeps("ts") && !m.keeps("Op"),
            "the user keeps the timestamp"
        );
        let err = |p: &[(&str, &str)]| CdcSpec::from_pairs(&pairs(p)).unwrap_err().to_string();
        assert!(err(&[("format", "dms"), ("keys", "id")]).contains("TimestampColumnName"));
        assert!(err(&[("format", "avro"), ("keys", "id")]).contains("debezium"));
        assert!(err(&[("format", "debezium")]).contains("keys"));
    }

    #[test]
    fn options_split_off_the_cdc_ones() {
        let (rest, cdc) =
            CdcSpec::split_options(pairs(&[("cdc.keys", "id"), ("cloudFiles.format", "json")]));
        assert_eq!(rest, pairs(&[("cloudFiles.format", "json")]));
        assert_eq!(cdc, pairs(&[("keys", "id")]));
    }
}
