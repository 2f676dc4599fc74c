//! Presets for the common change envelopes (`cdc.format`): Debezium change events and AWS
//! DMS files, unwrapped into plain change records the SCD type 1 reduction applies.
//!
//! Pure functions over arrow: the unwrapped schema from the raw one (what `CdcSpec::check`
//! and the target's columns see), the unwrapped batch from a raw batch, and the settings a
//! preset gives by default.
//!
//! - **debezium**: each record is a change event, bare or in the JSON converter's
//!   `{"schema": ..., "payload": ...}` wrapper. The row's columns are `after`'s fields (for
//!   `op = 'd'`, `before`'s, so the key is known), then [`OP`], [`TS_MS`] (the event's
//!   `ts_ms`, else `source.ts_ms`) and [`SOURCE_POS`] (the position in the source's log, as
//!   bytes that order like it: MySQL `source.file` + `source.pos` + `source.row`, Postgres
//!   `source.lsn`, SQL Server `source.change_lsn` + `source.event_serial_no`; empty for
//!   other connectors), then the record's other top-level columns (`_rescued_data`,
//!   `_metadata`). Tombstones (a null value: a `null` line, or a wrapper whose payload is
//!   null) are dropped and counted; a record that is neither an event nor a tombstone is an
//!   error naming its file.
//! - **dms**: the records as DMS wrote them, plus [`DMS_PHASE`]: 0 for a full-load row (no
//!   `Op`, an empty one, or a file named `LOAD*`), 1 for a CDC row, sequenced before the
//!   user's timestamp column so full-load rows come first. An `Op` column is added (null)
//!   when the files have none yet (a full load alone).

use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray, StructArray,
};
use arrow_schema::{DataType, Field, FieldRef, Schema, SchemaRef};

/// A change envelope a preset unwraps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Envelope {
    Debezium,
    Dms,
}

/// The Debezium operation (`c`, `u`, `r`, `d`, `t`) of an unwrapped record.
pub const OP: &str = "__op";
/// The Debezium event's `ts_ms` (else `source.ts_ms`), BIGINT.
pub const TS_MS: &str = "__ts_ms";
/// The Debezium event's position in the source's log, BINARY ordering like the log.
pub const SOURCE_POS: &str = "__source_pos";
/// The DMS phase of a record: 0 full load, 1 CDC.
pub const DMS_PHASE: &str = "__dms_phase";
/// DMS's operation column.
pub const DMS_OP: &str = "Op";

/// The columns a preset adds, which never go into the target unless `column_list` names
/// them.
pub const GENERATED: &[&str] = &[OP, TS_MS, SOURCE_POS, DMS_PHASE];

/// The Debezium envelope's fields: not row columns.
const ENVELOPE_FIELDS: &[&str] = &[
    "before",
    "after",
    "op",
    "ts_ms",
    "ts_us",
    "ts_ns",
    "source",
    "transaction",
    "schema",
    "payload",
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PresetError {
    /// The records' columns are not the envelope's.
    #[error("cdc.format = \"{format}\": {reason}")]
    Schema {
        format: &'static str,
        reason: String,
    },
    /// A record is not what the envelope says (named by file and place).
    #[error("cdc.format = \"{format}\": {reason} in {place}; nothing of this batch was applied")]
    Record {
        format: &'static str,
        reason: String,
        place: String,
        /// The record's row in the raw batch (its place is worked out from it).
        row: usize,
    },
    #[error("cdc.format: {0}")]
    Arrow(String),
}

impl Envelope {
    pub fn from_name(name: &str) -> Option<Envelope> {
        match name.trim().to_ascii_lowercase().as_str() {
            "debezium" => Some(Envelope::Debezium),
            "dms" => Some(Envelope::Dms),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Envelope::Debezium => "debezium",
            Envelope::Dms => "dms",
        }
    }

    /// The default sequence (Debezium: `ts_ms`, then the source position); `None` when the
    /// user must name it (DMS: its `TimestampColumnName`).
    pub fn default_sequence(self) -> Option<Vec<String>> {
        match self {
            Envelope::Debezium => Some(vec![TS_MS.to_string(), SOURCE_POS.to_string()]),
            Envelope::Dms => None,
        }
    }

    /// The sequence the flow compares, from the one given (DMS: the phase first, so
    /// full-load rows sort before every CDC row).
    pub fn sequence(self, given: Vec<String>) -> Vec<String> {
        match self {
            Envelope::Debezium => given,
            Envelope::Dms => std::iter::once(DMS_PHASE.to_string())
                .chain(given.into_iter().filter(|c| c != DMS_PHASE))
                .collect(),
        }
    }

    /// The default delete condition.
    pub fn default_deletes(self) -> String {
        match self {
            Envelope::Debezium => format!("{OP} = 'd'"),
            Envelope::Dms => format!("{DMS_OP} = 'D'"),
        }
    }

    /// The default truncate condition (Debezium's `t` events).
    pub fn default_truncates(self) -> Option<String> {
        match self {
            Envelope::Debezium => Some(format!("{OP} = 't'")),
            Envelope::Dms => None,
        }
    }

    /// The default columns left out of the target besides the generated ones (DMS: `Op`
    /// and the timestamp column(s) given as `sequence_by`).
    pub fn default_except(self, sequence_given: &[String]) -> Vec<String> {
        match self {
            Envelope::Debezium => Vec::new(),
            Envelope::Dms => std::iter::once(DMS_OP.to_string())
                .chain(sequence_given.iter().cloned())
                .collect(),
        }
    }

    /// The unwrapped records' schema for raw records of schema `raw`.
    pub fn schema(self, raw: &Schema) -> Result<SchemaRef, PresetError> {
        match self {
            Envelope::Debezium => debezium_schema(raw).map(|(s, _)| s),
            Envelope::Dms => Ok(dms_schema(raw)),
        }
    }

    /// The unwrapped batch of raw `batch`, and which raw records it keeps when some were
    /// dropped (tombstones).
    pub fn unwrap(
        self,
        batch: &RecordBatch,
    ) -> Result<(RecordBatch, Option<Vec<bool>>), PresetError> {
        match self {
            Envelope::Debezium => debezium_batch(batch),
            Envelope::Dms => dms_batch(batch).map(|b| (b, None)),
        }
    }
}

fn arrow(e: arrow_schema::ArrowError) -> PresetError {
    PresetError::Arrow(e.to_string())
}

fn struct_fields(f: &Field) -> Option<&arrow_schema::Fields> {
    match f.data_type() {
        DataType::Struct(fields) => Some(fields),
        _ => None,
    }
}

/// Where the event's fields are: the top level, or the wrapper's `payload`.
enum Level {
    Top,
    Payload,
}

/// The schema of the event's envelope (top-level or in `payload`).
fn envelope_fields(raw: &Schema) -> Result<(arrow_schema::Fields, Level), PresetError> {
    if raw.field_with_name("op").is_ok() {
        return Ok((raw.fields().clone(), Level::Top));
    }
    if let Ok(p) = raw.field_with_name("payload")
        && let Some(fields) = struct_fields(p)
        && fields.find("op").is_some()
    {
        return Ok((fields.clone(), Level::Payload));
    }
    Err(PresetError::Schema {
        format: "debezium",
        reason: format!(
            "the records are not Debezium change events: no op field, at the top level or in \
             payload (their columns: {})",
            raw.fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// The row's fields: `after`'s, then those only `before` has.
fn row_fields(envelope: &arrow_schema::Fields) -> Result<Vec<FieldRef>, PresetError> {
    let after = envelope
        .find("after")
        .and_then(|(_, f)| struct_fields(f).cloned());
    let before = envelope
        .find("before")
        .and_then(|(_, f)| struct_fields(f).cloned());
    if after.is_none() && before.is_none() {
        return Err(PresetError::Schema {
            format: "debezium",
            reason: "the change events have no before or after row (a struct) in any record \
                     read for the schema"
                .into(),
        });
    }
    let mut out: Vec<FieldRef> = Vec::new();
    for f in after.iter().chain(before.iter()).flat_map(|fs| fs.iter()) {
        if !out.iter().any(|o| o.name() == f.name()) {
            out.push(Arc::new(f.as_ref().clone().with_nullable(true)));
        }
    }
    Ok(out)
}

fn debezium_schema(raw: &Schema) -> Result<(SchemaRef, Vec<FieldRef>), PresetError> {
    let (envelope, _) = envelope_fields(raw)?;
    let rows = row_fields(&envelope)?;
    let mut fields = rows.clone();
    fields.push(Arc::new(Field::new(OP, DataType::Utf8, true)));
    fields.push(Arc::new(Field::new(TS_MS, DataType::Int64, true)));
    fields.push(Arc::new(Field::new(SOURCE_POS, DataType::Binary, true)));
    for f in raw.fields() {
        let taken = fields.iter().any(|o| o.name() == f.name());
        if !ENVELOPE_FIELDS.contains(&f.name().as_str()) && !taken {
            fields.push(f.clone());
        }
    }
    Ok((Arc::new(Schema::new(fields)), rows))
}

/// A struct's child, null where the struct is.
fn child(parent: &StructArray, name: &str) -> Result<Option<ArrayRef>, PresetError> {
    let Some(c) = parent.column_by_name(name) else {
        return Ok(None);
    };
    if parent.null_count() == 0 {
        return Ok(Some(c.clone()));
    }
    let parent_null = arrow_arith::boolean::is_null(parent).map_err(arrow)?;
    arrow_select::nullif::nullif(c, &parent_null)
        .map(Some)
        .map_err(arrow)
}

/// An envelope field of the events: a top-level column or a child of `payload`.
fn event_field(
    batch: &RecordBatch,
    level: &Level,
    name: &str,
) -> Result<Option<ArrayRef>, PresetError> {
    match level {
        Level::Top => Ok(batch.column_by_name(name).cloned()),
        Level::Payload => match batch
            .column_by_name("payload")
            .and_then(|p| p.as_any().downcast_ref::<StructArray>())
        {
            Some(p) => child(p, name),
            None => Ok(None),
        },
    }
}

/// The `before` or `after` rows as a struct: as read, or, when the stream's schema has the
/// field as STRING (every record it was inferred from had it null, so a later row arrives
/// as JSON text), parsed into the row's fields.
fn row_side(
    side: &Option<ArrayRef>,
    rows: &[FieldRef],
) -> Result<Option<StructArray>, PresetError> {
    let Some(side) = side else {
        return Ok(None);
    };
    if let Some(s) = side.as_any().downcast_ref::<StructArray>() {
        return Ok(Some(s.clone()));
    }
    if !matches!(side.data_type(), DataType::Utf8 | DataType::LargeUtf8) {
        return Ok(None);
    }
    let texts = text(side)?;
    if texts.null_count() == texts.len() {
        return Ok(None);
    }
    let mut lines = String::new();
    for v in texts.iter() {
        lines.push_str(v.unwrap_or("{}"));
        lines.push('\n');
    }
    let schema = Arc::new(Schema::new(rows.to_vec()));
    let reader = arrow_json::ReaderBuilder::new(schema.clone())
        .with_batch_size(texts.len().max(1))
        .build(std::io::Cursor::new(lines.into_bytes()))
        .map_err(arrow)?;
    let batches = reader.collect::<Result<Vec<_>, _>>().map_err(arrow)?;
    let batch = arrow_select::concat::concat_batches(&schema, &batches).map_err(arrow)?;
    let nulls = texts.nulls().cloned();
    StructArray::try_new(schema.fields().clone(), batch.columns().to_vec(), nulls)
        .map(Some)
        .map_err(arrow)
}

/// A column as text (numbers written as digits), for values that may be read either way.
fn text(a: &ArrayRef) -> Result<StringArray, PresetError> {
    let t = arrow_cast::cast(a, &DataType::Utf8).map_err(arrow)?;
    Ok(t.as_any()
        .downcast_ref::<StringArray>()
        .expect("cast to Utf8")
        .clone())
}

/// Where raw record `row` came from: its file and its record number there.
pub fn place(batch: &RecordBatch, row: usize) -> String {
    super::place::RecordPlaces::of(batch).describe(row)
}

fn record_err(
    batch: &RecordBatch,
    row: usize,
    format: &'static str,
    reason: String,
) -> PresetError {
    PresetError::Record {
        format,
        reason,
        place: place(batch, row),
        row,
    }
}

/// Whether the raw record `row` is a tombstone: no envelope field at all, and nothing
/// rescued but the literal `null` a null value is written as.
fn is_tombstone(batch: &RecordBatch, row: usize, envelope: &[Option<ArrayRef>]) -> bool {
    let empty = envelope.iter().flatten().all(|a| a.is_null(row));
    let rescued_null = match batch
        .column_by_name("_rescued_data")
        .and_then(|r| r.as_any().downcast_ref::<StringArray>())
    {
        Some(r) if r.is_valid(row) => serde_json::from_str::<serde_json::Value>(r.value(row))
            .ok()
            .and_then(|v| v.get("_corrupt_record").cloned())
            .is_some_and(|c| c.as_str().is_some_and(|s| s.trim() == "null")),
        _ => true,
    };
    empty && rescued_null
}

/// The source position of each event as bytes ordering like the source's log.
fn positions(
    batch: &RecordBatch,
    source: Option<&StructArray>,
) -> Result<Vec<Vec<u8>>, PresetError> {
    let n = batch.num_rows();
    let Some(source) = source else {
        return Ok(vec![Vec::new(); n]);
    };
    let get = |name: &str| -> Result<Option<StringArray>, PresetError> {
        child(source, name)?.as_ref().map(text).transpose()
    };
    let number = |row: usize, a: &Option<StringArray>, what: &str| -> Result<u64, PresetError> {
        match a {
            Some(a) if a.is_valid(row) => a.value(row).trim().parse::<u64>().map_err(|_| {
                record_err(
                    batch,
                    row,
                    "debezium",
                    format!("source.{what} = {:?} is not a number", a.value(row)),
                )
            }),
            _ => Ok(0),
        }
    };
    let mut out = Vec::with_capacity(n);
    if let Some(change_lsn) = get("change_lsn")? {
        // SQL Server: change_lsn "00000027:00000758:0005" (hex, fixed width), then the
        // event's serial number within it.
        let serial = get("event_serial_no")?;
        for row in 0..n {
            let mut bytes = Vec::new();
            if change_lsn.is_valid(row) {
                let hex_text: String = change_lsn
                    .value(row)
                    .chars()
                    .filter(|c| c.is_ascii_hexdigit())
                    .collect();
                bytes = hex::decode(&hex_text).map_err(|_| {
                    record_err(
                        batch,
                        row,
                        "debezium",
                        format!(
                            "source.change_lsn = {:?} is not an LSN",
                            change_lsn.value(row)
                        ),
                    )
                })?;
            }
            bytes.extend(number(row, &serial, "event_serial_no")?.to_be_bytes());
            out.push(bytes);
        }
    } else if let Some(lsn) = get("lsn")? {
        // Postgres: the change's LSN.
        for row in 0..n {
            out.push(
                number(row, &Some(lsn.clone()), "lsn")?
                    .to_be_bytes()
                    .to_vec(),
            );
        }
    } else if let Some(pos) = get("pos")? {
        // MySQL: the binlog file's number (mysql-bin.000003), the position in it, the row
        // within the event.
        let file = get("file")?;
        let row_in_event = get("row")?;
        for row in 0..n {
            let file_no = match &file {
                Some(f) if f.is_valid(row) => {
                    let name = f.value(row);
                    let digits: String = name
                        .rsplit('.')
                        .next()
                        .unwrap_or("")
                        .chars()
                        .filter(char::is_ascii_digit)
                        .collect();
                    digits.parse::<u64>().unwrap_or(0)
                }
                _ => 0,
            };
            let mut bytes = file_no.to_be_bytes().to_vec();
            bytes.extend(number(row, &Some(pos.clone()), "pos")?.to_be_bytes());
            bytes.extend(number(row, &row_in_event, "row")?.to_be_bytes());
            out.push(bytes);
        }
    } else {
        out = vec![Vec::new(); n];
    }
    Ok(out)
}

fn debezium_batch(batch: &RecordBatch) -> Result<(RecordBatch, Option<Vec<bool>>), PresetError> {
    let raw = batch.schema();
    let (schema, rows) = debezium_schema(&raw)?;
    let (_, level) = envelope_fields(&raw)?;
    let n = batch.num_rows();
    let op = event_field(batch, &level, "op")?;
    let after = event_field(batch, &level, "after")?;
    let before = event_field(batch, &level, "before")?;
    let ts = event_field(batch, &level, "ts_ms")?;
    let source = event_field(batch, &level, "source")?;
    let op_text = op.as_ref().map(text).transpose()?;
    let payload = match level {
        Level::Payload => batch.column_by_name("payload").cloned(),
        Level::Top => None,
    };

    // Which records are events, which tombstones; deletes take their row from `before`.
    let mut keep = Vec::with_capacity(n);
    let mut from_before = Vec::with_capacity(n);
    let mut tombstones = 0;
    for row in 0..n {
        let op = op_text
            .as_ref()
            .filter(|o| o.is_valid(row))
            .map(|o| o.value(row));
        match op {
            Some("c" | "u" | "r" | "t") => {
                keep.push(true);
                from_before.push(false);
            }
            Some("d") => {
                keep.push(true);
                from_before.push(true);
            }
            Some(other) => {
                return Err(record_err(
                    batch,
                    row,
                    "debezium",
                    format!("op = {other:?} is not a Debezium operation (c, u, r, d, t)"),
                ));
            }
            None => {
                let envelope = [
                    after.clone(),
                    before.clone(),
                    ts.clone(),
                    source.clone(),
                    payload.clone(),
                ];
                if !is_tombstone(batch, row, &envelope) {
                    return Err(record_err(
                        batch,
                        row,
                        "debezium",
                        "the record is not a Debezium change event (it has no op) nor a \
                         tombstone (a null value)"
                            .into(),
                    ));
                }
                tombstones += 1;
                keep.push(false);
                from_before.push(false);
            }
        }
    }
    let mask = BooleanArray::from(from_before);
    let (after_s, before_s) = (row_side(&after, &rows)?, row_side(&before, &rows)?);
    let (after_s, before_s) = (after_s.as_ref(), before_s.as_ref());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for f in &rows {
        let side = |s: Option<&StructArray>| -> Result<ArrayRef, PresetError> {
            let c = match s {
                Some(s) => child(s, f.name())?,
                None => None,
            };
            match c {
                Some(c) if c.data_type() == f.data_type() => Ok(c),
                Some(c) => arrow_cast::cast(&c, f.data_type()).map_err(arrow),
                None => Ok(arrow_array::new_null_array(f.data_type(), n)),
            }
        };
        let (a, b) = (side(after_s)?, side(before_s)?);
        columns.push(arrow_select::zip::zip(&mask, &b, &a).map_err(arrow)?);
    }
    columns.push(match &op_text {
        Some(o) => Arc::new(o.clone()),
        None => arrow_array::new_null_array(&DataType::Utf8, n),
    });
    let source_s = source
        .as_ref()
        .and_then(|a| a.as_any().downcast_ref::<StructArray>());
    let event_ts = match &ts {
        Some(t) => Some(text(t)?),
        None => None,
    };
    let source_ts = match source_s {
        Some(s) => child(s, "ts_ms")?.as_ref().map(text).transpose()?,
        None => None,
    };
    let mut ts_values = Vec::with_capacity(n);
    for row in 0..n {
        let v = [&event_ts, &source_ts]
            .into_iter()
            .flatten()
            .find(|a| a.is_valid(row))
            .map(|a| a.value(row));
        ts_values.push(match v {
            Some(v) => Some(v.trim().parse::<i64>().map_err(|_| {
                record_err(
                    batch,
                    row,
                    "debezium",
                    format!("ts_ms = {v:?} is not a number"),
                )
            })?),
            None => None,
        });
    }
    columns.push(Arc::new(Int64Array::from(ts_values)));
    let pos = positions(batch, source_s)?;
    columns.push(Arc::new(arrow_array::BinaryArray::from_iter_values(
        pos.iter().map(Vec::as_slice),
    )));
    for f in schema.fields().iter().skip(rows.len() + 3) {
        columns.push(
            batch
                .column_by_name(f.name())
                .cloned()
                .expect("a passed-through column is in the batch"),
        );
    }
    let unwrapped = RecordBatch::try_new(schema, columns).map_err(arrow)?;
    if tombstones == 0 {
        return Ok((unwrapped, None));
    }
    let unwrapped =
        arrow_select::filter::filter_record_batch(&unwrapped, &BooleanArray::from(keep.clone()))
            .map_err(arrow)?;
    Ok((unwrapped, Some(keep)))
}

/// Where the DMS phase column goes: before the trailing `_rescued_data` / `_metadata`.
fn dms_insert_at(raw: &Schema) -> usize {
    raw.fields()
        .iter()
        .position(|f| f.name() == "_rescued_data" || f.name() == "_metadata")
        .unwrap_or(raw.fields().len())
}

fn dms_schema(raw: &Schema) -> SchemaRef {
    let mut fields: Vec<FieldRef> = raw.fields().iter().cloned().collect();
    let at = dms_insert_at(raw);
    let mut added = vec![Arc::new(Field::new(DMS_PHASE, DataType::Int32, true))];
    if raw.field_with_name(DMS_OP).is_err() {
        added.insert(0, Arc::new(Field::new(DMS_OP, DataType::Utf8, true)));
    }
    fields.splice(at..at, added);
    Arc::new(Schema::new(fields))
}

fn dms_batch(batch: &RecordBatch) -> Result<RecordBatch, PresetError> {
    let raw = batch.schema();
    let schema = dms_schema(&raw);
    let n = batch.num_rows();
    let op = batch.column_by_name(DMS_OP).map(text).transpose()?;
    let file_name = crate::record::metadata_text(batch, "file_name");
    let mut phase = Vec::with_capacity(n);
    for row in 0..n {
        let op = op
            .as_ref()
            .filter(|o| o.is_valid(row))
            .map(|o| o.value(row).trim())
            .unwrap_or("");
        let load_file = file_name
            .as_ref()
            .is_some_and(|f| f.is_valid(row) && f.value(row).starts_with("LOAD"));
        match op {
            "" => phase.push(0),
            "I" | "U" | "D" => phase.push(if load_file { 0 } else { 1 }),
            other => {
                return Err(record_err(
                    batch,
                    row,
                    "dms",
                    format!("Op = {other:?} is not a DMS operation (I, U, D)"),
                ));
            }
        }
    }
    let at = dms_insert_at(&raw);
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    let mut added: Vec<ArrayRef> = vec![Arc::new(Int32Array::from(phase))];
    if raw.field_with_name(DMS_OP).is_err() {
        added.insert(0, arrow_array::new_null_array(&DataType::Utf8, n));
    }
    columns.splice(at..at, added);
    RecordBatch::try_new(schema, columns).map_err(arrow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;

    /// Raw records as the JSON reader gives them, from JSON lines.
    fn read(lines: &[&str]) -> RecordBatch {
        let text = lines.join("\n");
        let (schema, _) =
            arrow_json::reader::infer_json_schema(std::io::Cursor::new(text.as_bytes()), None)
                .unwrap();
        let mut reader = arrow_json::ReaderBuilder::new(Arc::new(schema))
            .build(std::io::Cursor::new(text.as_bytes()))
            .unwrap();
        reader.next().unwrap().unwrap()
    }

    fn strings(b: &RecordBatch, c: &str) -> Vec<Option<String>> {
        let a = arrow_cast::cast(b.column_by_name(c).unwrap(), &DataType::Utf8).unwrap();
        a.as_string::<i32>()
            .iter()
            .map(|v| v.map(str::to_string))
            .collect()
    }

    const MYSQL: &[&str] = &[
        r#"{"before":null,"after":{"id":1,"name":"Ann"},"source":{"connector":"mysql","ts_ms":90,"file":"mysql-bin.000003","pos":400,"row":0},"op":"c","ts_ms":100}"#,
        r#"{"before":{"id":1,"name":"Ann"},"after":{"id":1,"name":"Anna"},"source":{"connector":"mysql","ts_ms":91,"file":"mysql-bin.000003","pos":900,"row":0},"op":"u","ts_ms":101}"#,
        r#"{"before":{"id":1,"name":"Anna"},"after":null,"source":{"connector":"mysql","ts_ms":92,"file":"mysql-bin.000010","pos":4,"row":0},"op":"d","ts_ms":102}"#,
    ];

    #[test]
    fn debezium_events_unwrap_to_rows_with_op_ts_and_position() {
        let raw = read(MYSQL);
        let (b, kept) = Envelope::Debezium.unwrap(&raw).unwrap();
        assert_eq!(kept, None, "no tombstone");
        let names: Vec<_> = b
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names, ["id", "name", OP, TS_MS, SOURCE_POS]);
        assert_eq!(
            *Envelope::Debezium.schema(&raw.schema()).unwrap(),
            *b.schema()
        );
        // The delete's row is its before image, so its key is known.
        assert_eq!(strings(&b, "id"), vec![Some("1".to_string()); 3]);
        assert_eq!(
            strings(&b, "name"),
            [Some("Ann".into()), Some("Anna".into()), Some("Anna".into())]
        );
        assert_eq!(
            strings(&b, OP),
            [Some("c".into()), Some("u".into()), Some("d".into())]
        );
        let ts: Vec<_> = b
            .column_by_name(TS_MS)
            .unwrap()
            .as_primitive::<arrow_array::types::Int64Type>()
            .values()
            .to_vec();
        assert_eq!(ts, [100, 101, 102]);
        // Binlog file 10 sorts after file 3, whatever the positions.
        let pos = b.column_by_name(SOURCE_POS).unwrap().as_binary::<i32>();
        assert!(pos.value(0) < pos.value(1) && pos.value(1) < pos.value(2));
    }

    #[test]
    fn the_json_converter_wrapper_and_tombstones_unwrap() {
        let raw = read(&[
            r#"{"schema":{"type":"struct","optional":false},"payload":{"before":null,"after":{"id":7,"v":"x"},"source":{"connector":"postgresql","lsn":24023128,"ts_ms":5},"op":"r","ts_ms":6}}"#,
            r#"{"schema":{"type":"struct","optional":false},"payload":{"before":{"id":7,"v":"x"},"after":null,"source":{"connector":"postgresql","lsn":24023200,"ts_ms":7},"op":"d","ts_ms":8}}"#,
            r#"{"schema":null,"payload":null}"#,
        ]);
        let (b, kept) = Envelope::Debezium.unwrap(&raw).unwrap();
        assert_eq!(
            kept,
            Some(vec![true, true, false]),
            "the tombstone is dropped"
        );
        assert_eq!(b.num_rows(), 2);
        assert_eq!(strings(&b, "id"), [Some("7".into()), Some("7".into())]);
        assert_eq!(strings(&b, OP), [Some("r".into()), Some("d".into())]);
        let pos = b.column_by_name(SOURCE_POS).unwrap().as_binary::<i32>();
        assert_eq!(pos.value(0), 24023128u64.to_be_bytes());
        assert!(b.schema().field_with_name("schema").is_err());
    }

    #[test]
    fn a_before_read_as_text_is_parsed_into_the_row() {
        // The stream's schema was inferred from creates only: `before` is STRING, and a
        // later delete's before image arrives as JSON text.
        let raw = read(&[r#"{"before":null,"after":{"id":1,"name":"a"},"op":"c","ts_ms":1}"#]);
        let schema = Arc::new(Schema::new(
            raw.schema()
                .fields()
                .iter()
                .map(|f| match f.name().as_str() {
                    "before" => Arc::new(Field::new("before", DataType::Utf8, true)),
                    _ => f.clone(),
                })
                .collect::<Vec<_>>(),
        ));
        let text = StringArray::from(vec![Some(r#"{"id":1,"name":"a"}"#)]);
        let after =
            arrow_array::new_null_array(schema.field_with_name("after").unwrap().data_type(), 1);
        let columns: Vec<ArrayRef> = schema
            .fields()
            .iter()
            .map(|f| match f.name().as_str() {
                "before" => Arc::new(text.clone()) as ArrayRef,
                "after" => after.clone(),
                "op" => Arc::new(StringArray::from(vec!["d"])) as ArrayRef,
                _ => raw.column_by_name(f.name()).unwrap().clone(),
            })
            .collect();
        let delete = RecordBatch::try_new(schema, columns).unwrap();
        let (b, _) = Envelope::Debezium.unwrap(&delete).unwrap();
        assert_eq!(strings(&b, "id"), [Some("1".into())]);
        assert_eq!(strings(&b, "name"), [Some("a".into())]);
    }

    #[test]
    fn sql_server_lsns_order_as_the_log() {
        let raw = read(&[
            r#"{"after":{"id":1},"source":{"change_lsn":"00000027:00000758:0005","event_serial_no":1},"op":"c","ts_ms":1}"#,
            r#"{"after":{"id":1},"source":{"change_lsn":"00000027:00000758:0005","event_serial_no":2},"op":"u","ts_ms":1}"#,
            r#"{"after":{"id":1},"source":{"change_lsn":"00000028:00000001:0001","event_serial_no":1},"op":"u","ts_ms":1}"#,
        ]);
        let (b, _) = Envelope::Debezium.unwrap(&raw).unwrap();
        let pos = b.column_by_name(SOURCE_POS).unwrap().as_binary::<i32>();
        assert!(pos.value(0) < pos.value(1) && pos.value(1) < pos.value(2));
    }

    #[test]
    fn records_that_are_not_events_are_named() {
        let plain = read(&[r#"{"id":1,"name":"x"}"#]);
        let err = Envelope::Debezium.schema(&plain.schema()).unwrap_err();
        assert!(
            err.to_string().contains("not Debezium change events"),
            "{err}"
        );
        let bad_op = read(&[r#"{"after":{"id":1},"op":"x","ts_ms":1}"#]);
        let err = Envelope::Debezium.unwrap(&bad_op).unwrap_err().to_string();
        assert!(err.contains("\"x\"") && err.contains("record 1"), "{err}");
        // A record with data but no op is not a tombstone: never dropped silently.
        let no_op = read(&[
            r#"{"after":{"id":1},"op":"c","ts_ms":1}"#,
            r#"{"after":{"id":2},"ts_ms":1}"#,
        ]);
        let err = Envelope::Debezium.unwrap(&no_op).unwrap_err().to_string();
        assert!(err.contains("record 2") && err.contains("no op"), "{err}");
    }

    #[test]
    fn dms_rows_get_their_phase_and_an_op_column() {
        let load = read(&[r#"{"id":1,"ts":"a"}"#]);
        let (b, _) = Envelope::Dms.unwrap(&load).unwrap();
        let names: Vec<_> = b
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names, ["id", "ts", DMS_OP, DMS_PHASE]);
        assert_eq!(strings(&b, DMS_PHASE), [Some("0".into())]);
        let cdc = read(&[r#"{"Op":"U","id":1,"ts":"b"}"#, r#"{"id":2,"ts":"c"}"#]);
        let (b, _) = Envelope::Dms.unwrap(&cdc).unwrap();
        assert_eq!(strings(&b, DMS_PHASE), [Some("1".into()), Some("0".into())]);
        let bad = read(&[r#"{"Op":"X","id":1}"#]);
        assert!(
            Envelope::Dms
                .unwrap(&bad)
                .unwrap_err()
                .to_string()
                .contains("\"X\"")
        );
        assert_eq!(
            Envelope::Dms.sequence(vec!["ts".into()]),
            [DMS_PHASE.to_string(), "ts".into()]
        );
    }
}
