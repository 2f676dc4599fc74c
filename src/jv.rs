//! A JSON value that borrows from the input line where it can: strings without escapes,
//! numbers as their text, objects as entry lists (no hashing). Decoding JSON lines into
//! it instead of `serde_json::Value` avoids most allocations on the clean path; a value is
//! turned into a `serde_json::Value` only when it has to be rescued.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// serde_json (with `arbitrary_precision`) hands numbers to visitors as a one-entry map
/// under this key, holding the number's text.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// A JSON value borrowing from its input.
#[derive(Debug, Clone, PartialEq)]
pub enum Jv<'a> {
    Null,
    Bool(bool),
    /// The number's text, exactly as written (no precision lost).
    Number(Cow<'a, str>),
    String(Cow<'a, str>),
    Array(Vec<Jv<'a>>),
    /// Entries in input order; duplicate keys are kept (and so never silently dropped).
    Object(Vec<(Cow<'a, str>, Jv<'a>)>),
}

impl<'a> Jv<'a> {
    /// Parses one JSON text.
    pub fn parse(text: &'a [u8]) -> Result<Jv<'a>, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_slice(text);
        let v = JvSeed.deserialize(&mut de)?;
        de.end()?;
        Ok(v)
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Jv::Null)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Jv::String(s) => Some(s),
            _ => None,
        }
    }

    /// The `serde_json::Value` of this value (for rescued data and multi-line documents).
    pub fn to_value(&self) -> Value {
        match self {
            Jv::Null => Value::Null,
            Jv::Bool(b) => Value::Bool(*b),
            Jv::Number(t) => {
                serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.to_string()))
            }
            Jv::String(s) => Value::String(s.to_string()),
            Jv::Array(items) => Value::Array(items.iter().map(Jv::to_value).collect()),
            Jv::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_value()))
                    .collect(),
            ),
        }
    }

    /// The owned form of a `serde_json::Value`.
    pub fn from_value(v: &Value) -> Jv<'static> {
        match v {
            Value::Null => Jv::Null,
            Value::Bool(b) => Jv::Bool(*b),
            Value::Number(n) => Jv::Number(Cow::Owned(n.to_string())),
            Value::String(s) => Jv::String(Cow::Owned(s.clone())),
            Value::Array(items) => Jv::Array(items.iter().map(Jv::from_value).collect()),
            Value::Object(map) => Jv::Object(
                map.iter()
                    .map(|(k, v)| (Cow::Owned(k.clone()), Jv::from_value(v)))
                    .collect(),
            ),
        }
    }
}

impl fmt::Display for Jv<'_> {
    /// JSON text (what a STRING column holds for a non-string value).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Jv::Number(t) => f.write_str(t),
            Jv::Bool(b) => write!(f, "{b}"),
            Jv::Null => f.write_str("null"),
            other => write!(f, "{}", other.to_value()),
        }
    }
}

struct JvSeed;

impl<'de> DeserializeSeed<'de> for JvSeed {
    type Value = Jv<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Jv<'de>, D::Error> {
        d.deserialize_any(JvVisitor)
    }
}

struct JvVisitor;

impl<'de> Visitor<'de> for JvVisitor {
    type Value = Jv<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Jv<'de>, E> {
        Ok(Jv::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Jv<'de>, E> {
        Ok(Jv::Number(Cow::Owned(v.to_string())))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Jv<'de>, E> {
        Ok(Jv::Number(Cow::Owned(v.to_string())))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Jv<'de>, E> {
        Ok(Jv::Number(Cow::Owned(v.to_string())))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Jv<'de>, E> {
        Ok(Jv::String(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Jv<'de>, E> {
        Ok(Jv::String(Cow::Owned(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Jv<'de>, E> {
        Ok(Jv::String(Cow::Owned(v)))
    }
    fn visit_unit<E>(self) -> Result<Jv<'de>, E> {
        Ok(Jv::Null)
    }
    fn visit_none<E>(self) -> Result<Jv<'de>, E> {
        Ok(Jv::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Jv<'de>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(4));
        while let Some(v) = seq.next_element_seed(JvSeed)? {
            items.push(v);
        }
        Ok(Jv::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Jv<'de>, A::Error> {
        let Some(first) = map.next_key_seed(KeySeed)? else {
            return Ok(Jv::Object(Vec::new()));
        };
        if first == NUMBER_TOKEN {
            return Ok(Jv::Number(map.next_value_seed(KeySeed)?));
        }
        let mut entries = Vec::with_capacity(16);
        entries.push((first, map.next_value_seed(JvSeed)?));
        while let Some(k) = map.next_key_seed(KeySeed)? {
            entries.push((k, map.next_value_seed(JvSeed)?));
        }
        Ok(Jv::Object(entries))
    }
}

/// A string that borrows from the input when it has no escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_serde_json_value_and_borrows() {
        let text = br#"{"a": 1, "b": "x", "c": [true, null, 92233720368547758070, 1.50], "d": {"e": "q\"uote"}, "a": 2}"#;
        let jv = Jv::parse(text).unwrap();
        let Jv::Object(entries) = &jv else {
            panic!("{jv:?}")
        };
        assert_eq!(entries.len(), 5, "duplicate keys are kept");
        assert!(
            matches!(entries[1].1, Jv::String(Cow::Borrowed("x"))),
            "plain strings borrow"
        );
        assert_eq!(
            entries[2].1.to_value()[2].to_string(),
            "92233720368547758070",
            "big numbers keep every digit"
        );
        assert_eq!(entries[2].1.to_value()[3].to_string(), "1.50");
        let value: Value = serde_json::from_slice(text).unwrap();
        assert_eq!(jv.to_value()["d"], value["d"]);
        assert_eq!(Jv::from_value(&value["c"]), entries[2].1);
        assert!(Jv::parse(b"{\"a\": ").is_err());
        assert!(Jv::parse(b"{} x").is_err());
    }
}
