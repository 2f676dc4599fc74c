//! One record into one row of builders, the rescued-data object built on the way.

use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::{ArrayRef, RecordBatch};

use serde_json::{Map, Value};

use crate::parse::json::JsonValue;

use crate::options::CORRUPT_RECORD;

use super::*;

/// The run of the file whose rows are being appended: the last one.
fn current_run(runs: &mut [FileRun]) -> &mut FileRun {
    runs.last_mut()
        .expect("a builder always has a current file")
}

/// Builds the rows of one output batch, from one file or from several in turn.
pub struct RowBuilder {
    layout: Arc<TableLayout>,
    ctx: ReadContext,
    /// Value columns, in layout order, with their names.
    columns: Vec<(String, ColumnBuilder)>,
    rescued: Option<StringBuilder>,
    corrupt: Option<StringBuilder>,
    /// The files of the rows appended since the last batch, the current one last.
    runs: Vec<FileRun>,
    /// Rows appended since the last batch.
    rows: usize,
    /// Rows of the current file, and those of them with rescued data.
    file_rows: usize,
    rescued_rows: usize,
    /// Values that did not fit and had nowhere to go (no rescued-data column).
    dropped_values: u64,
    /// Top-level names seen in the data but absent from the schema.
    unknown_names: Vec<String>,
    /// Whether a struct value had a field its column type lacks.
    nested_new_fields: bool,
    rescue_stats: RescueStats,
    /// Whether two columns' names differ only in letter case.
    case_twins: bool,
    /// The line of the malformed record being appended, when its format tells it.
    corrupt_line: Option<u64>,
}

impl RowBuilder {
    pub fn new(layout: Arc<TableLayout>, ctx: ReadContext, file: Arc<FileMeta>) -> RowBuilder {
        let columns: Vec<(String, ColumnBuilder)> = layout
            .value_fields()
            .map(|f| (f.name.clone(), ColumnBuilder::new(&f.data_type)))
            .collect();
        let case_twins = has_case_twins(columns.iter().map(|(n, _)| n.as_str()));
        RowBuilder {
            rescued: layout.rescued.as_ref().map(|_| StringBuilder::new()),
            corrupt: layout.corrupt.as_ref().map(|_| StringBuilder::new()),
            layout,
            ctx,
            columns,
            runs: vec![FileRun { file, rows: 0 }],
            rows: 0,
            file_rows: 0,
            rescued_rows: 0,
            dropped_values: 0,
            unknown_names: Vec::new(),
            nested_new_fields: false,
            rescue_stats: RescueStats::default(),
            corrupt_line: None,
            case_twins,
        }
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    /// Goes on with the rows of another file: the rows so far stay for the next batch
    /// (a decoding thread gathers small files' rows this way), and what is counted per
    /// file starts again.
    pub fn next_file(&mut self, file: Arc<FileMeta>) {
        match self.runs.last_mut() {
            Some(last) if last.rows == 0 => last.file = file,
            _ => self.runs.push(FileRun { file, rows: 0 }),
        }
        self.file_rows = 0;
        self.rescued_rows = 0;
        self.dropped_values = 0;
        self.unknown_names.clear();
        self.nested_new_fields = false;
        self.rescue_stats = RescueStats::default();
        self.corrupt_line = None;
    }

    /// The layout the rows are built in.
    pub fn layout(&self) -> &Arc<TableLayout> {
        &self.layout
    }

    /// Rows of the current file.
    pub fn file_rows(&self) -> usize {
        self.file_rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    pub fn column_names(&self) -> impl Iterator<Item = &str> {
        self.columns.iter().map(|(n, _)| n.as_str())
    }

    /// Appends one JSON object record.
    pub fn append_json_object(&mut self, obj: &[(&str, JsonValue<'_>)]) {
        let mut rescued = Map::new();
        // Which entries a column took; the rest (unknown names, other letter cases,
        // duplicate keys) are rescued, so no value is dropped.
        let mut taken = Taken::new(obj.len(), self.case_twins);
        for (name, col) in &mut self.columns {
            match taken.find(obj, name, &self.ctx) {
                Some(i) => {
                    let v = &obj[i].1;
                    if !col.append_json(v, &self.ctx, &mut self.nested_new_fields) {
                        rescued.insert(name.clone(), v.to_value());
                    }
                }
                None => col.append_null(),
            }
        }
        if taken.count() < obj.len() {
            for (i, (k, v)) in obj.iter().enumerate() {
                if taken.contains(i) {
                    continue;
                }
                if !self.columns.iter().any(|(n, _)| n.eq_ignore_ascii_case(k))
                    && !self.unknown_names.iter().any(|n| n == k)
                {
                    self.unknown_names.push(k.to_string());
                }
                rescued.insert(k.to_string(), v.to_value());
            }
        }
        self.finish_row(rescued, None);
    }

    /// Appends one CSV record: `values[i]` belongs to column `targets[i]` (an index into
    /// the value columns, or `None` for a header name the schema does not have).
    /// Cells listed in `invalid` were not valid UTF-8 (their text has the bad bytes
    /// escaped as `\xNN`): they are never stored as if they were, but rescued.
    pub fn append_text_record(
        &mut self,
        headers: &[String],
        targets: &[Option<usize>],
        cells: &[Option<&str>],
        invalid: &[usize],
        extra: Option<String>,
    ) {
        let mut rescued = Map::new();
        let mut filled = vec![false; self.columns.len()];
        for (i, cell) in cells.iter().enumerate() {
            match targets.get(i).copied().flatten() {
                Some(c) => {
                    filled[c] = true;
                    let (name, col) = &mut self.columns[c];
                    match cell {
                        None => col.append_null(),
                        Some(text) if invalid.contains(&i) => {
                            col.append_null();
                            rescued.insert(name.clone(), Value::String((*text).to_string()));
                        }
                        Some(text) => {
                            if !col.append_text(text, &self.ctx, &mut self.nested_new_fields) {
                                rescued.insert(name.clone(), Value::String((*text).to_string()));
                            }
                        }
                    }
                }
                None => {
                    if let (Some(text), Some(h)) = (cell, headers.get(i)) {
                        rescued.insert(h.clone(), Value::String((*text).to_string()));
                    }
                }
            }
        }
        for (c, done) in filled.iter().enumerate() {
            if !done {
                self.columns[c].1.append_null();
            }
        }
        self.finish_row(rescued, extra);
    }

    /// Appends a malformed record: every column null, the raw text kept.
    pub fn append_corrupt(&mut self, raw: &str) {
        for (_, col) in &mut self.columns {
            col.append_null();
        }
        self.finish_row(Map::new(), Some(raw.to_string()));
    }

    /// Appends a malformed record that starts on `line` of its file (multi-line records,
    /// e.g. XML row elements): as [`RowBuilder::append_corrupt`], with the line kept in
    /// the rescued data under `_line`.
    pub fn append_corrupt_at(&mut self, raw: &str, line: u64) {
        self.corrupt_line = Some(line);
        self.append_corrupt(raw);
    }

    fn finish_row(&mut self, mut rescued: Map<String, Value>, corrupt: Option<String>) {
        let line = self.corrupt_line.take();
        if corrupt.is_some() {
            self.rescue_stats
                .note(CORRUPT_RECORD, RescueKind::Malformed);
        }
        for key in rescued.keys() {
            let kind = RescueKind::of(key, self.columns.iter().map(|(n, _)| n.as_str()));
            self.rescue_stats.note(key, kind);
        }
        match (&mut self.corrupt, corrupt) {
            (Some(b), Some(raw)) => b.append_value(raw),
            (Some(b), None) => b.append_null(),
            (None, Some(raw)) => {
                rescued.insert(CORRUPT_RECORD.to_string(), Value::String(raw));
            }
            (None, None) => {}
        }
        match &mut self.rescued {
            Some(b) => {
                if rescued.is_empty() {
                    b.append_null();
                } else {
                    rescued.insert(
                        FILE_PATH_KEY.to_string(),
                        Value::String(current_run(&mut self.runs).file.path.clone()),
                    );
                    if let Some(line) = line {
                        rescued.insert(LINE_KEY.to_string(), Value::from(line));
                    }
                    b.append_value(Value::Object(rescued).to_string());
                    self.rescued_rows += 1;
                }
            }
            None => self.dropped_values += rescued.len() as u64,
        }
        self.rows += 1;
        self.file_rows += 1;
        current_run(&mut self.runs).rows += 1;
    }

    /// Rows of the current file whose rescued data is not null.
    pub fn rescued_rows(&self) -> usize {
        self.rescued_rows
    }

    pub fn dropped_values(&self) -> u64 {
        self.dropped_values
    }

    pub fn unknown_names(&self) -> &[String] {
        &self.unknown_names
    }

    /// What was rescued so far in this file, per key.
    pub fn rescue_stats(&self) -> &RescueStats {
        &self.rescue_stats
    }

    /// Whether the data had fields the schema lacks, at the top level or inside structs.
    pub fn saw_new_fields(&self) -> bool {
        !self.unknown_names.is_empty() || self.nested_new_fields
    }

    /// Finishes the rows appended so far into a batch of the layout's schema, and resets.
    pub fn finish(&mut self) -> RecordBatch {
        let layout = Arc::clone(&self.layout);
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(layout.data.fields.len() + 2);
        let mut value_idx = 0;
        for f in &layout.data.fields {
            if Some(&f.name) == layout.rescued.as_ref() {
                arrays.push(Arc::new(
                    self.rescued
                        .as_mut()
                        .expect("rescued builder exists")
                        .finish(),
                ));
            } else if Some(&f.name) == layout.corrupt.as_ref() {
                arrays.push(Arc::new(
                    self.corrupt
                        .as_mut()
                        .expect("corrupt builder exists")
                        .finish(),
                ));
            } else {
                arrays.push(self.columns[value_idx].1.finish());
                value_idx += 1;
            }
        }
        push_file_columns(&layout, &self.runs, &mut arrays);
        self.rows = 0;
        // The next batch's rows start with the current file's.
        self.runs.drain(..self.runs.len() - 1);
        current_run(&mut self.runs).rows = 0;
        RecordBatch::try_new(layout.arrow_schema(), arrays)
            .expect("builders follow the layout's schema")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono_tz::Tz;

    use crate::schema::{DataType, Field, Schema};

    #[test]
    fn integers_that_a_double_would_round_are_refused() {
        let big = "123456789012345678901234567890123456789012345678901";
        assert_eq!(float_of(&JsonValue::Number(big)), None);
        assert_eq!(
            float_of(&JsonValue::Number("9007199254740993")),
            None,
            "2^53 + 1 is not a double"
        );
        assert_eq!(
            float_of(&JsonValue::Number("9007199254740992")),
            Some(9_007_199_254_740_992.0)
        );
        assert_eq!(
            float_of(&JsonValue::Number("-100000000000000000000")),
            Some(-1e20),
            "a power of ten that a double holds exactly"
        );
        assert_eq!(
            float_of(&JsonValue::Number("0.1")),
            Some(0.1),
            "fractions as before"
        );
    }
    use crate::parse::json::JsonArena;
    use crate::schema::hints::parse_schema;
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use serde_json::json;

    fn layout(ddl: &str) -> Arc<TableLayout> {
        let mut data = parse_schema(ddl).unwrap();
        data.fields
            .push(Field::new("_rescued_data", DataType::String));
        Arc::new(TableLayout {
            data,
            partition: Schema::default(),
            rescued: Some("_rescued_data".into()),
            corrupt: None,
            include_metadata: true,
            stamps: None,
        })
    }

    fn file() -> Arc<FileMeta> {
        Arc::new(FileMeta {
            path: "file:///land/a.json".into(),
            name: "a.json".into(),
            size: 10,
            mtime_ms: 1000,
            partition_values: vec![],
            stamp: None,
        })
    }

    /// Appends the object `v` as a record.
    fn append(rows: &mut RowBuilder, v: Value) {
        let arena = JsonArena::new();
        match JsonValue::from_value(&arena, &v) {
            JsonValue::Object(entries) => rows.append_json_object(entries),
            other => panic!("not an object: {other:?}"),
        }
    }

    const CTX: ReadContext = ReadContext {
        singleton_arrays: false,
        zone: Tz::UTC,
        case_sensitive: true,
        temporal: crate::parse::temporal::Temporal::ISO,
    };

    fn rescued(batch: &RecordBatch) -> Vec<Option<String>> {
        let col = batch
            .column_by_name("_rescued_data")
            .unwrap()
            .as_string::<i32>();
        col.iter().map(|v| v.map(str::to_string)).collect()
    }

    #[test]
    fn rows_carried_across_files_keep_each_file_and_count_per_file() {
        let second = Arc::new(FileMeta {
            path: "file:///land/b.json".into(),
            name: "b.json".into(),
            size: 20,
            mtime_ms: 2000,
            partition_values: vec![],
            stamp: None,
        });
        let mut rows = RowBuilder::new(layout("id BIGINT"), CTX, file());
        append(&mut rows, json!({"id": 1}));
        append(&mut rows, json!({"id": "x"}));
        assert_eq!((rows.file_rows(), rows.rescued_rows()), (2, 1));
        rows.next_file(Arc::clone(&second));
        assert_eq!(
            (rows.file_rows(), rows.rescued_rows()),
            (0, 0),
            "counts start again"
        );
        append(&mut rows, json!({"id": "y", "extra": 1}));
        assert_eq!((rows.file_rows(), rows.rescued_rows()), (1, 1));
        assert_eq!(rows.unknown_names(), ["extra"]);
        assert_eq!(rows.len(), 3, "the first file's rows are still there");
        let batch = rows.finish();
        let meta = batch.column_by_name("_metadata").unwrap().as_struct();
        let names: Vec<&str> = meta
            .column_by_name("file_name")
            .unwrap()
            .as_string::<i32>()
            .iter()
            .map(Option::unwrap)
            .collect();
        assert_eq!(names, ["a.json", "a.json", "b.json"]);
        let sizes = meta.column_by_name("file_size").unwrap();
        let sizes = sizes.as_primitive::<arrow_array::types::Int64Type>();
        assert_eq!(sizes.values().to_vec(), [10, 10, 20]);
        let rescued = rescued(&batch);
        assert!(
            rescued[1].as_deref().unwrap().contains("/land/a.json"),
            "{rescued:?}"
        );
        assert!(
            rescued[2].as_deref().unwrap().contains("/land/b.json"),
            "{rescued:?}"
        );
        // The next batch's rows are the current file's.
        append(&mut rows, json!({"id": 4}));
        let batch = rows.finish();
        let meta = batch.column_by_name("_metadata").unwrap().as_struct();
        let names = meta.column_by_name("file_name").unwrap().as_string::<i32>();
        assert_eq!(names.value(0), "b.json");
        assert_eq!(batch.num_rows(), 1);
    }

    #[test]
    fn the_first_of_duplicate_keys_is_read_and_the_others_rescued_in_any_order() {
        let arena = JsonArena::new();
        let layout = layout("a BIGINT, b BIGINT, s STRUCT<x: BIGINT, y: BIGINT>");
        let mut rows = RowBuilder::new(layout, CTX, file());
        for text in [
            r#"{"a": 1, "a": 5, "b": 2, "s": {"x": 1, "x": 5, "y": 2}}"#,
            r#"{"b": 2, "a": 1, "a": 5, "s": {"y": 2, "x": 1}}"#,
            r#"{"a": 1, "b": 2, "s": {"x": 1, "y": 2}}"#,
        ] {
            match JsonValue::parse(&arena, text.as_bytes()).unwrap() {
                JsonValue::Object(entries) => rows.append_json_object(entries),
                other => panic!("{other:?}"),
            }
        }
        let batch = rows.finish();
        for name in ["a", "b"] {
            let col = batch
                .column_by_name(name)
                .unwrap()
                .as_primitive::<arrow_array::types::Int64Type>();
            let want = if name == "a" { 1 } else { 2 };
            assert_eq!(
                col.iter().collect::<Vec<_>>(),
                vec![Some(want); 3],
                "{name}"
            );
        }
        let rescued = rescued(&batch);
        let first: Value = serde_json::from_str(rescued[0].as_deref().unwrap()).unwrap();
        assert_eq!(first["a"], json!(5), "the second `a` is kept: {first}");
        assert_eq!(
            first["s"],
            json!({"x": 5, "y": 2}),
            "a struct with a duplicate is rescued whole"
        );
        let second: Value = serde_json::from_str(rescued[1].as_deref().unwrap()).unwrap();
        assert_eq!(second["a"], json!(5), "{second}");
        assert_eq!(rescued[2], None);
    }

    #[test]
    fn mismatched_and_unknown_values_are_rescued_with_the_file() {
        let mut rows = RowBuilder::new(layout("order_id BIGINT, amount BIGINT"), CTX, file());
        for rec in [
            json!({"order_id": 1, "amount": 5000}),
            json!({"order_id": 2, "amount": "5000원 - 750원 할인"}),
            json!({"order_id": 3, "amount": 10, "coupon_code": "SUMMER25"}),
            json!({"Order_ID": 4}),
        ] {
            append(&mut rows, rec.clone());
        }
        assert_eq!(rows.rescued_rows(), 3);
        assert_eq!(
            rows.unknown_names(),
            ["coupon_code".to_string()],
            "a case variant is not a new column"
        );
        let batch = rows.finish();
        assert_eq!(batch.num_rows(), 4);
        let amount = batch
            .column_by_name("amount")
            .unwrap()
            .as_primitive::<arrow_array::types::Int64Type>();
        assert_eq!(
            amount.iter().collect::<Vec<_>>(),
            vec![Some(5000), None, Some(10), None]
        );
        assert_eq!(
            rescued(&batch),
            vec![
                None,
                Some(
                    r#"{"amount":"5000원 - 750원 할인","_file_path":"file:///land/a.json"}"#.into()
                ),
                Some(r#"{"coupon_code":"SUMMER25","_file_path":"file:///land/a.json"}"#.into()),
                Some(r#"{"Order_ID":4,"_file_path":"file:///land/a.json"}"#.into()),
            ]
        );
        let meta = batch.column_by_name("_metadata").unwrap().as_struct();
        assert_eq!(meta.column(1).as_string::<i32>().value(0), "a.json");
    }

    /// Found by fuzzing `fuzz_hints`: with the hint `attrs MAP<INT, BIGINT>`, the record
    /// `{"attrs": {"k": 1}}` left a null key in the map and building the batch panicked.
    #[test]
    fn a_map_key_that_does_not_read_as_the_key_type_rescues_the_whole_map() {
        let mut rows = RowBuilder::new(
            layout("attrs MAP<INT, BIGINT>, kinds MAP<STRUCT<a: INT>, STRING>"),
            CTX,
            file(),
        );
        for rec in [
            json!({"attrs": {"1": 10, "2": 20}}),
            json!({"attrs": {"3": 30, "k": 1}, "kinds": {"null": "x"}}),
            json!({"attrs": {"4": 40}, "kinds": {"{\"a\": 1}": "y"}}),
        ] {
            append(&mut rows, rec);
        }
        let batch = rows.finish();
        let attrs = batch.column_by_name("attrs").unwrap().as_map();
        assert_eq!(
            (attrs.is_null(0), attrs.is_null(1), attrs.is_null(2)),
            (false, true, false)
        );
        assert_eq!(
            attrs.value(2).len(),
            1,
            "a map after a rescued one is whole"
        );
        let kinds = batch.column_by_name("kinds").unwrap().as_map();
        assert!(kinds.is_null(1), "a null key makes the map null");
        assert_eq!(kinds.value(2).len(), 1);
        assert_eq!(
            rescued(&batch)[1].as_deref(),
            Some(
                r#"{"attrs":{"3":30,"k":1},"kinds":{"null":"x"},"_file_path":"file:///land/a.json"}"#
            )
        );
    }

    #[test]
    fn case_insensitive_reading_maps_case_variants() {
        let ctx = ReadContext {
            singleton_arrays: false,
            zone: Tz::UTC,
            case_sensitive: false,
            temporal: crate::parse::temporal::Temporal::ISO,
        };
        let mut rows = RowBuilder::new(layout("order_id BIGINT"), ctx, file());
        append(&mut rows, json!({"Order_ID": 4}));
        let batch = rows.finish();
        assert_eq!(rescued(&batch), vec![None]);
        assert_eq!(
            batch
                .column(0)
                .as_primitive::<arrow_array::types::Int64Type>()
                .value(0),
            4
        );
    }

    #[test]
    fn nested_values_build_and_nested_misfits_rescue_the_top_level_value() {
        let mut rows = RowBuilder::new(
            layout(
                "address STRUCT<zip:STRING, city:STRING>, items ARRAY<STRUCT<qty:INT, price:DECIMAL(12,2)>>, attrs MAP<STRING,BIGINT>",
            ),
            CTX,
            file(),
        );
        append(
            &mut rows,
            json!({"address": {"zip": "00123", "city": "Seoul"}, "items": [{"qty": 2, "price": 12.5}], "attrs": {"a": 1}}),
        );
        append(
            &mut rows,
            json!({"address": {"zip": "1", "floor": 3}, "items": [{"qty": "two", "price": 1}]}),
        );
        let batch = rows.finish();
        let r = rescued(&batch);
        assert_eq!(r[0], None);
        let second: Value = serde_json::from_str(r[1].as_deref().unwrap()).unwrap();
        assert_eq!(second["address"], json!({"zip": "1", "floor": 3}));
        assert_eq!(second["items"], json!([{"qty": "two", "price": 1}]));
        let items = batch.column_by_name("items").unwrap().as_list::<i32>();
        let first = items.value(0);
        let price = first
            .as_struct()
            .column(1)
            .as_primitive::<arrow_array::types::Decimal128Type>();
        assert_eq!(price.value(0), 1250);
    }

    #[test]
    fn corrupt_records_keep_their_raw_text() {
        let mut rows = RowBuilder::new(layout("a STRING"), CTX, file());
        rows.append_corrupt("{\"a\": ");
        let batch = rows.finish();
        assert_eq!(
            rescued(&batch)[0].as_deref(),
            Some(r#"{"_corrupt_record":"{\"a\": ","_file_path":"file:///land/a.json"}"#)
        );
    }

    #[test]
    fn csv_cells_are_typed_and_misfits_keep_the_original_string() {
        let mut rows = RowBuilder::new(layout("id INT, cost BIGINT, zip STRING"), CTX, file());
        let headers = vec![
            "id".to_string(),
            "cost".to_string(),
            "zip".to_string(),
            "extra".to_string(),
        ];
        let targets = vec![Some(0), Some(1), Some(2), None];
        rows.append_text_record(
            &headers,
            &targets,
            &[Some("1"), Some("$100"), Some("00123"), Some("x")],
            &[],
            None,
        );
        let batch = rows.finish();
        assert_eq!(
            rescued(&batch)[0].as_deref(),
            Some(r#"{"cost":"$100","extra":"x","_file_path":"file:///land/a.json"}"#)
        );
        assert_eq!(batch.column(2).as_string::<i32>().value(0), "00123");
    }
}
