//! Schema evolution decisions, kept pure so every mode × change pair is a table test.
//!
//! Only *new fields* evolve a schema: a new top-level column, or a new field inside a struct
//! (also inside an array of structs). A type change never does (the value is rescued), and
//! neither does a name that differs from a known one only by letter case (rescued, or read
//! into the column with `readerCaseSensitive=false`).
//!
//! | mode               | new fields found                                         |
//! |--------------------|----------------------------------------------------------|
//! | `addNewColumns`    | evolve: fields appended (before the rescued-data column) |
//! | `failOnNewColumns` | reject: the batch fails, nothing is committed or written |
//! | `rescue`           | unchanged: the values go to the rescued-data column      |
//! | `none`             | unchanged: ignored, rescued only with an explicit column |

use std::fmt;

use super::{DataType, Field, Schema};

/// `cloudFiles.schemaEvolutionMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvolutionMode {
    AddNewColumns,
    Rescue,
    FailOnNewColumns,
    None,
}

impl std::str::FromStr for EvolutionMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "addnewcolumns" => Ok(EvolutionMode::AddNewColumns),
            "rescue" => Ok(EvolutionMode::Rescue),
            "failonnewcolumns" => Ok(EvolutionMode::FailOnNewColumns),
            "none" => Ok(EvolutionMode::None),
            _ => Err("expected one of addNewColumns, rescue, failOnNewColumns, none".into()),
        }
    }
}

impl std::fmt::Display for EvolutionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EvolutionMode::AddNewColumns => "addNewColumns",
            EvolutionMode::Rescue => "rescue",
            EvolutionMode::FailOnNewColumns => "failOnNewColumns",
            EvolutionMode::None => "none",
        })
    }
}

/// A field the data has and the schema did not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedField {
    /// Dotted path (`coupon_code`, `address.floor`, `items.element.sku`).
    pub path: String,
    pub data_type: DataType,
}

impl fmt::Display for AddedField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.path, self.data_type)
    }
}

/// What to do with a batch whose data was observed as `observed`.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Read the batch with the stored schema.
    Unchanged,
    /// Write `schema` as the next version, then read the batch with it.
    Evolve {
        schema: Schema,
        added: Vec<AddedField>,
    },
    /// Fail the batch: these fields are new and the mode forbids them.
    Reject { added: Vec<AddedField> },
}

/// Decides the outcome for a batch. `reserved` names columns (rescued data, corrupt record)
/// that stay last in the schema.
pub fn decide(
    stored: &Schema,
    observed: &Schema,
    mode: EvolutionMode,
    reserved: &[&str],
) -> Outcome {
    if matches!(mode, EvolutionMode::Rescue | EvolutionMode::None) {
        return Outcome::Unchanged;
    }
    let (schema, added) = merge(stored, observed, reserved);
    match (added.is_empty(), mode) {
        (true, _) => Outcome::Unchanged,
        (false, EvolutionMode::FailOnNewColumns) => Outcome::Reject { added },
        (false, _) => Outcome::Evolve { schema, added },
    }
}

/// The stored schema with every new field of `observed` added, and the list of them.
pub fn merge(stored: &Schema, observed: &Schema, reserved: &[&str]) -> (Schema, Vec<AddedField>) {
    let mut fields = stored.fields.clone();
    let mut added = Vec::new();
    // New top-level columns go before the reserved columns, which stay last.
    let insert_at = fields
        .iter()
        .position(|f| reserved.contains(&f.name.as_str()))
        .unwrap_or(fields.len());
    let mut new_top = Vec::new();
    for field in &observed.fields {
        if reserved.contains(&field.name.as_str()) {
            continue;
        }
        match fields
            .iter_mut()
            .find(|f| f.name.eq_ignore_ascii_case(&field.name))
        {
            Some(existing) => {
                merge_type(
                    &mut existing.data_type,
                    &field.data_type,
                    &existing.name,
                    &mut added,
                );
            }
            None => {
                added.push(AddedField {
                    path: field.name.clone(),
                    data_type: field.data_type.clone(),
                });
                new_top.push(field.clone());
            }
        }
    }
    fields.splice(insert_at..insert_at, new_top);
    (Schema::new(fields), added)
}

/// Paths whose type in `desired` differs from `stored` (names compared case-insensitively).
pub fn type_conflicts(stored: &Schema, desired: &Schema) -> Vec<String> {
    let mut out = Vec::new();
    for d in &desired.fields {
        if let Some(s) = stored
            .fields
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(&d.name))
        {
            conflicts_in(&s.data_type, &d.data_type, &s.name, &mut out);
        }
    }
    out
}

fn conflicts_in(stored: &DataType, desired: &DataType, path: &str, out: &mut Vec<String>) {
    match (stored, desired) {
        (DataType::Struct(have), DataType::Struct(want)) => {
            for w in want {
                if let Some(h) = have.iter().find(|f| f.name.eq_ignore_ascii_case(&w.name)) {
                    conflicts_in(
                        &h.data_type,
                        &w.data_type,
                        &format!("{path}.{}", h.name),
                        out,
                    );
                }
            }
        }
        (DataType::Array(h), DataType::Array(w)) => {
            conflicts_in(h, w, &format!("{path}.element"), out)
        }
        (DataType::Map(hk, hv), DataType::Map(wk, wv)) => {
            conflicts_in(hk, wk, &format!("{path}.key"), out);
            conflicts_in(hv, wv, &format!("{path}.value"), out);
        }
        (h, w) if h != w => out.push(format!("{path}: {h} → {w}")),
        _ => {}
    }
}

fn merge_type(stored: &mut DataType, observed: &DataType, path: &str, added: &mut Vec<AddedField>) {
    match (stored, observed) {
        (DataType::Struct(have), DataType::Struct(seen)) => {
            for field in seen {
                match have
                    .iter_mut()
                    .find(|f| f.name.eq_ignore_ascii_case(&field.name))
                {
                    Some(existing) => {
                        let p = format!("{path}.{}", existing.name);
                        merge_type(&mut existing.data_type, &field.data_type, &p, added);
                    }
                    None => {
                        added.push(AddedField {
                            path: format!("{path}.{}", field.name),
                            data_type: field.data_type.clone(),
                        });
                        have.push(Field::new(field.name.clone(), field.data_type.clone()));
                    }
                }
            }
        }
        (DataType::Array(have), DataType::Array(seen)) => {
            merge_type(have, seen, &format!("{path}.element"), added);
        }
        (DataType::Map(_, have), DataType::Map(_, seen)) => {
            merge_type(have, seen, &format!("{path}.value"), added);
        }
        // A type change is not evolution: the values are rescued.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::hints::parse_schema;

    const RESERVED: &[&str] = &["_rescued_data"];

    fn s(ddl: &str) -> Schema {
        parse_schema(ddl).unwrap()
    }

    fn stored() -> Schema {
        s(
            "order_id BIGINT, amount BIGINT, address STRUCT<city:STRING>, items ARRAY<STRUCT<qty:INT>>, _rescued_data STRING",
        )
    }

    /// Each kind of change observed in the data, as the observed schema.
    fn changes() -> Vec<(&'static str, Schema, Vec<&'static str>)> {
        vec![
            (
                "new top-level column",
                s("order_id BIGINT, coupon_code STRING, discount_rate DOUBLE"),
                vec!["coupon_code STRING", "discount_rate DOUBLE"],
            ),
            (
                "new nested field",
                s("address STRUCT<city:STRING, floor:BIGINT>"),
                vec!["address.floor BIGINT"],
            ),
            (
                "new field in array elements",
                s("items ARRAY<STRUCT<qty:INT, sku:STRING>>"),
                vec!["items.element.sku STRING"],
            ),
            ("type mismatch", s("amount STRING"), vec![]),
            ("case mismatch", s("Order_ID BIGINT"), vec![]),
            ("nothing new", s("order_id BIGINT"), vec![]),
        ]
    }

    #[test]
    fn every_mode_against_every_change() {
        for (change, observed, expected_added) in changes() {
            for mode in [
                EvolutionMode::AddNewColumns,
                EvolutionMode::FailOnNewColumns,
                EvolutionMode::Rescue,
                EvolutionMode::None,
            ] {
                let outcome = decide(&stored(), &observed, mode, RESERVED);
                let context = format!("{change} under {mode}");
                match (mode, expected_added.is_empty()) {
                    (EvolutionMode::Rescue | EvolutionMode::None, _) | (_, true) => {
                        assert_eq!(outcome, Outcome::Unchanged, "{context}");
                    }
                    (EvolutionMode::FailOnNewColumns, false) => match outcome {
                        Outcome::Reject { added } => {
                            let got: Vec<String> = added.iter().map(ToString::to_string).collect();
                            assert_eq!(got, expected_added, "{context}");
                        }
                        other => panic!("{context}: {other:?}"),
                    },
                    (EvolutionMode::AddNewColumns, false) => match outcome {
                        Outcome::Evolve { schema, added } => {
                            let got: Vec<String> = added.iter().map(ToString::to_string).collect();
                            assert_eq!(got, expected_added, "{context}");
                            assert_eq!(
                                schema.fields.last().unwrap().name,
                                "_rescued_data",
                                "{context}: rescued data stays last"
                            );
                            assert!(schema.fields.len() >= stored().fields.len(), "{context}");
                        }
                        other => panic!("{context}: {other:?}"),
                    },
                }
            }
        }
    }

    #[test]
    fn evolved_schema_appends_and_keeps_existing_types() {
        let observed =
            s("amount STRING, coupon_code STRING, address STRUCT<city:STRING, floor:BIGINT>");
        let (schema, _) = merge(&stored(), &observed, RESERVED);
        assert_eq!(
            schema.to_string(),
            "order_id BIGINT, amount BIGINT, address STRUCT<city: STRING, floor: BIGINT>, \
             items ARRAY<STRUCT<qty: INT>>, coupon_code STRING, _rescued_data STRING"
        );
    }
}
