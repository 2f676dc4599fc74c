//! The stream's logical schema: Spark-style types, their Spark StructType JSON form (the
//! `dataSchemaJson` of `_schemas/N`), and their Arrow form (what decoders build and what
//! delta-rs writes).
//!
//! Every field is nullable, as in Auto Loader: a value that does not fit its column becomes
//! null there and survives in the rescued-data column instead.

pub mod evolution;
pub mod hints;
pub mod infer;
pub mod store;

use std::fmt;
use std::sync::Arc;

use arrow_schema::{
    DataType as ArrowType, Field as ArrowField, Fields, Schema as ArrowSchema, TimeUnit,
};
use serde_json::{Value, json};

/// Name of the list item field in Arrow, as Delta's Arrow conversion spells it.
pub const LIST_ITEM: &str = "element";
/// Name of the map entries struct in Arrow, as Delta's Arrow conversion spells it.
pub const MAP_ENTRIES: &str = "key_value";

/// A column type, named as Spark names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DataType {
    String,
    Long,
    Integer,
    Short,
    Byte,
    Float,
    Double,
    Boolean,
    Binary,
    Date,
    /// Microseconds since the epoch, UTC (Spark's `timestamp`).
    Timestamp,
    Decimal(u8, i8),
    Struct(Vec<Field>),
    Array(Box<DataType>),
    Map(Box<DataType>, Box<DataType>),
}

/// A named, always-nullable column or struct member.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Field {
    pub name: String,
    pub data_type: DataType,
}

impl Field {
    pub fn new(name: impl Into<String>, data_type: DataType) -> Self {
        Field {
            name: name.into(),
            data_type,
        }
    }
}

/// An ordered list of top-level fields.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Schema {
    pub fields: Vec<Field>,
}

/// Error for a schema JSON document that is not a Spark StructType.
#[derive(Debug, thiserror::Error)]
#[error("not a Spark schema: {0}")]
pub struct SchemaJsonError(pub String);

impl DataType {
    /// Spark's simple-type name (`long`, `decimal(12,2)`), or `None` for nested types.
    fn simple_name(&self) -> Option<String> {
        Some(match self {
            DataType::String => "string".into(),
            DataType::Long => "long".into(),
            DataType::Integer => "integer".into(),
            DataType::Short => "short".into(),
            DataType::Byte => "byte".into(),
            DataType::Float => "float".into(),
            DataType::Double => "double".into(),
            DataType::Boolean => "boolean".into(),
            DataType::Binary => "binary".into(),
            DataType::Date => "date".into(),
            DataType::Timestamp => "timestamp".into(),
            DataType::Decimal(p, s) => format!("decimal({p},{s})"),
            _ => return None,
        })
    }

    /// The Spark JSON form of this type (a string for simple types, an object otherwise).
    pub fn to_spark_json(&self) -> Value {
        if let Some(name) = self.simple_name() {
            return Value::String(name);
        }
        match self {
            DataType::Struct(fields) => struct_json(fields),
            DataType::Array(element) => json!({
                "type": "array",
                "elementType": element.to_spark_json(),
                "containsNull": true,
            }),
            DataType::Map(key, value) => json!({
                "type": "map",
                "keyType": key.to_spark_json(),
                "valueType": value.to_spark_json(),
                "valueContainsNull": true,
            }),
            _ => unreachable!("simple types are handled above"),
        }
    }

    /// Parses Spark's JSON form of a type.
    pub fn from_spark_json(value: &Value) -> Result<DataType, SchemaJsonError> {
        match value {
            Value::String(name) => parse_simple(name)
                .ok_or_else(|| SchemaJsonError(format!("unknown type \"{name}\""))),
            Value::Object(obj) => match obj.get("type").and_then(Value::as_str) {
                Some("struct") => Ok(DataType::Struct(fields_from_json(value)?)),
                Some("array") => {
                    let element = obj
                        .get("elementType")
                        .ok_or_else(|| SchemaJsonError("array without elementType".into()))?;
                    Ok(DataType::Array(Box::new(DataType::from_spark_json(
                        element,
                    )?)))
                }
                Some("map") => {
                    let key = obj
                        .get("keyType")
                        .ok_or_else(|| SchemaJsonError("map without keyType".into()))?;
                    let val = obj
                        .get("valueType")
                        .ok_or_else(|| SchemaJsonError("map without valueType".into()))?;
                    Ok(DataType::Map(
                        Box::new(DataType::from_spark_json(key)?),
                        Box::new(DataType::from_spark_json(val)?),
                    ))
                }
                other => Err(SchemaJsonError(format!("unknown type {other:?}"))),
            },
            other => Err(SchemaJsonError(format!("unexpected type value {other}"))),
        }
    }

    /// The Arrow type decoders build for this column.
    pub fn to_arrow(&self) -> ArrowType {
        match self {
            DataType::String => ArrowType::Utf8,
            DataType::Long => ArrowType::Int64,
            DataType::Integer => ArrowType::Int32,
            DataType::Short => ArrowType::Int16,
            DataType::Byte => ArrowType::Int8,
            DataType::Float => ArrowType::Float32,
            DataType::Double => ArrowType::Float64,
            DataType::Boolean => ArrowType::Boolean,
            DataType::Binary => ArrowType::Binary,
            DataType::Date => ArrowType::Date32,
            DataType::Timestamp => ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            DataType::Decimal(p, s) => ArrowType::Decimal128(*p, *s),
            DataType::Struct(fields) => ArrowType::Struct(arrow_fields(fields)),
            DataType::Array(element) => ArrowType::List(Arc::new(ArrowField::new(
                LIST_ITEM,
                element.to_arrow(),
                true,
            ))),
            DataType::Map(key, value) => ArrowType::Map(
                Arc::new(ArrowField::new(
                    MAP_ENTRIES,
                    ArrowType::Struct(Fields::from(vec![
                        ArrowField::new("key", key.to_arrow(), false),
                        ArrowField::new("value", value.to_arrow(), true),
                    ])),
                    false,
                )),
                false,
            ),
        }
    }

    /// Our type for an Arrow type found in a Parquet file, or `None` when there is no
    /// faithful Delta type for it (the column is then read as text).
    pub fn from_arrow(arrow: &ArrowType) -> Option<DataType> {
        Some(match arrow {
            ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View => DataType::String,
            ArrowType::Int64 | ArrowType::UInt32 => DataType::Long,
            ArrowType::Int32 | ArrowType::UInt16 => DataType::Integer,
            ArrowType::Int16 | ArrowType::UInt8 => DataType::Short,
            ArrowType::Int8 => DataType::Byte,
            ArrowType::UInt64 => DataType::Decimal(20, 0),
            ArrowType::Float16 | ArrowType::Float32 => DataType::Float,
            ArrowType::Float64 => DataType::Double,
            ArrowType::Boolean => DataType::Boolean,
            ArrowType::Binary
            | ArrowType::LargeBinary
            | ArrowType::BinaryView
            | ArrowType::FixedSizeBinary(_) => DataType::Binary,
            ArrowType::Date32 | ArrowType::Date64 => DataType::Date,
            ArrowType::Timestamp(_, _) => DataType::Timestamp,
            ArrowType::Decimal32(p, s)
            | ArrowType::Decimal64(p, s)
            | ArrowType::Decimal128(p, s) => DataType::Decimal(*p, *s),
            ArrowType::Decimal256(p, s) if *p <= 38 => DataType::Decimal(*p, *s),
            ArrowType::Struct(fields) => DataType::Struct(
                fields
                    .iter()
                    .map(|f| {
                        DataType::from_arrow(f.data_type()).map(|t| Field::new(f.name().clone(), t))
                    })
                    .collect::<Option<Vec<_>>>()?,
            ),
            ArrowType::List(item)
            | ArrowType::LargeList(item)
            | ArrowType::ListView(item)
            | ArrowType::FixedSizeList(item, _) => {
                DataType::Array(Box::new(DataType::from_arrow(item.data_type())?))
            }
            ArrowType::Map(entries, _) => match entries.data_type() {
                ArrowType::Struct(kv) if kv.len() == 2 => DataType::Map(
                    Box::new(DataType::from_arrow(kv[0].data_type())?),
                    Box::new(DataType::from_arrow(kv[1].data_type())?),
                ),
                _ => return None,
            },
            ArrowType::Dictionary(_, value) => DataType::from_arrow(value)?,
            _ => return None,
        })
    }

    /// True for types with children.
    pub fn is_nested(&self) -> bool {
        matches!(
            self,
            DataType::Struct(_) | DataType::Array(_) | DataType::Map(_, _)
        )
    }
}

impl fmt::Display for DataType {
    /// Spark SQL DDL spelling (`BIGINT`, `ARRAY<STRING>`), as users write hints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::String => f.write_str("STRING"),
            DataType::Long => f.write_str("BIGINT"),
            DataType::Integer => f.write_str("INT"),
            DataType::Short => f.write_str("SMALLINT"),
            DataType::Byte => f.write_str("TINYINT"),
            DataType::Float => f.write_str("FLOAT"),
            DataType::Double => f.write_str("DOUBLE"),
            DataType::Boolean => f.write_str("BOOLEAN"),
            DataType::Binary => f.write_str("BINARY"),
            DataType::Date => f.write_str("DATE"),
            DataType::Timestamp => f.write_str("TIMESTAMP"),
            DataType::Decimal(p, s) => write!(f, "DECIMAL({p},{s})"),
            DataType::Struct(fields) => {
                f.write_str("STRUCT<")?;
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}: {}", field.name, field.data_type)?;
                }
                f.write_str(">")
            }
            DataType::Array(element) => write!(f, "ARRAY<{element}>"),
            DataType::Map(key, value) => write!(f, "MAP<{key}, {value}>"),
        }
    }
}

fn parse_simple(name: &str) -> Option<DataType> {
    Some(match name {
        "string" => DataType::String,
        "long" => DataType::Long,
        "integer" => DataType::Integer,
        "short" => DataType::Short,
        "byte" => DataType::Byte,
        "float" => DataType::Float,
        "double" => DataType::Double,
        "boolean" => DataType::Boolean,
        "binary" => DataType::Binary,
        "date" => DataType::Date,
        "timestamp" => DataType::Timestamp,
        _ => {
            let inner = name.strip_prefix("decimal(")?.strip_suffix(')')?;
            let (p, s) = inner.split_once(',')?;
            DataType::Decimal(p.trim().parse().ok()?, s.trim().parse().ok()?)
        }
    })
}

fn struct_json(fields: &[Field]) -> Value {
    json!({
        "type": "struct",
        "fields": fields.iter().map(|f| json!({
            "name": f.name,
            "type": f.data_type.to_spark_json(),
            "nullable": true,
            "metadata": {},
        })).collect::<Vec<_>>(),
    })
}

fn fields_from_json(value: &Value) -> Result<Vec<Field>, SchemaJsonError> {
    let fields = value
        .get("fields")
        .and_then(Value::as_array)
        .ok_or_else(|| SchemaJsonError("struct without fields".into()))?;
    fields
        .iter()
        .map(|f| {
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| SchemaJsonError("field without name".into()))?;
            let ty = f
                .get("type")
                .ok_or_else(|| SchemaJsonError(format!("field {name} without type")))?;
            Ok(Field::new(name, DataType::from_spark_json(ty)?))
        })
        .collect()
}

fn arrow_fields(fields: &[Field]) -> Fields {
    Fields::from(
        fields
            .iter()
            .map(|f| ArrowField::new(f.name.clone(), f.data_type.to_arrow(), true))
            .collect::<Vec<_>>(),
    )
}

impl Schema {
    pub fn new(fields: Vec<Field>) -> Self {
        Schema { fields }
    }

    /// Spark StructType JSON, as a compact string.
    pub fn to_spark_json(&self) -> String {
        struct_json(&self.fields).to_string()
    }

    pub fn from_spark_json(text: &str) -> Result<Schema, SchemaJsonError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| SchemaJsonError(e.to_string()))?;
        Ok(Schema {
            fields: fields_from_json(&value)?,
        })
    }

    pub fn to_arrow(&self) -> ArrowSchema {
        ArrowSchema::new(arrow_fields(&self.fields))
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|f| f.name.as_str())
    }
}

impl fmt::Display for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, field) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} {}", field.name, field.data_type)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Schema {
        Schema::new(vec![
            Field::new("order_id", DataType::Long),
            Field::new("amount", DataType::Decimal(12, 2)),
            Field::new(
                "address",
                DataType::Struct(vec![Field::new("zip", DataType::String)]),
            ),
            Field::new("tags", DataType::Array(Box::new(DataType::String))),
            Field::new(
                "attrs",
                DataType::Map(Box::new(DataType::String), Box::new(DataType::Long)),
            ),
            Field::new("at", DataType::Timestamp),
        ])
    }

    #[test]
    fn spark_json_round_trips() {
        let schema = sample();
        let text = schema.to_spark_json();
        assert!(text.contains(r#""type":"decimal(12,2)""#), "{text}");
        assert!(text.contains(r#""elementType":"string""#), "{text}");
        assert_eq!(Schema::from_spark_json(&text).unwrap(), schema);
    }

    #[test]
    fn arrow_round_trips_through_our_types() {
        let schema = sample();
        let arrow = schema.to_arrow();
        let back: Vec<Field> = arrow
            .fields()
            .iter()
            .map(|f| {
                Field::new(
                    f.name().clone(),
                    DataType::from_arrow(f.data_type()).unwrap(),
                )
            })
            .collect();
        assert_eq!(Schema::new(back), schema);
    }

    #[test]
    fn displays_as_ddl() {
        assert_eq!(
            sample().to_string(),
            "order_id BIGINT, amount DECIMAL(12,2), address STRUCT<zip: STRING>, \
             tags ARRAY<STRING>, attrs MAP<STRING, BIGINT>, at TIMESTAMP"
        );
    }
}
