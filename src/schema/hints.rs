//! Schema hints (`cloudFiles.schemaHints`) and DDL schemas (`schema`): parsing and applying.
//!
//! Grammar (keywords case-insensitive):
//! ```text
//! hints := hint ("," hint)*          hint := path type
//! path  := name ("." name)*          name := identifier | `back-ticked`
//! type  := BOOLEAN | TINYINT | BYTE | SMALLINT | SHORT | INT | INTEGER | BIGINT | LONG
//!        | FLOAT | REAL | DOUBLE | DATE | TIMESTAMP | STRING | BINARY
//!        | DECIMAL | DEC | NUMERIC ["(" p ["," s] ")"]
//!        | ARRAY<type> | MAP<type, type> | STRUCT<name[:] type, ...>
//! ```
//! Path steps `element`, `key` and `value` go into arrays and maps (`items.element.price`).

use std::fmt;

use super::{DataType, Field, Schema};

/// A parse error, with the text and the character position it points at.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct HintError {
    pub text: String,
    pub position: usize,
    pub message: String,
}

impl fmt::Display for HintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at position {}:\n  {}\n  {}^",
            self.message,
            self.position,
            self.text,
            " ".repeat(
                self.text[..self.position.min(self.text.len())]
                    .chars()
                    .count()
            )
        )
    }
}

/// One `path TYPE` hint.
#[derive(Debug, Clone, PartialEq)]
pub struct Hint {
    pub path: Vec<String>,
    pub data_type: DataType,
}

/// How deep ARRAY, MAP and STRUCT types may nest. The schema store keeps schemas as Spark
/// JSON, where a struct level is three JSON levels, and serde_json reads at most 128: a
/// deeper type would be stored and then not read back. The cap also bounds the parser's
/// recursion. (Found by fuzzing `fuzz_hints`.)
pub const MAX_TYPE_DEPTH: usize = 40;

struct Parser<'a> {
    text: &'a str,
    pos: usize,
    /// Nested types open at the current position.
    depth: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, message: impl Into<String>) -> HintError {
        HintError {
            text: self.text.to_string(),
            position: self.pos,
            message: message.into(),
        }
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.text[self.pos..].chars().next() {
            if c.is_whitespace() {
                self.pos += c.len_utf8();
            } else {
                break;
            }
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.text[self.pos..].chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), HintError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.err(format!("expected '{c}'")))
        }
    }

    fn name(&mut self) -> Result<String, HintError> {
        self.skip_ws();
        let rest = &self.text[self.pos..];
        if let Some(body) = rest.strip_prefix('`') {
            let mut out = String::new();
            let mut chars = body.char_indices();
            while let Some((i, c)) = chars.next() {
                if c == '`' {
                    if body[i + 1..].starts_with('`') {
                        out.push('`');
                        chars.next();
                        continue;
                    }
                    self.pos += 1 + i + 1;
                    return Ok(out);
                }
                out.push(c);
            }
            return Err(self.err("unterminated back-ticked name"));
        }
        let len = rest
            .char_indices()
            .find(|(_, c)| !(c.is_alphanumeric() || *c == '_' || *c == '$' || *c == '-'))
            .map_or(rest.len(), |(i, _)| i);
        if len == 0 {
            return Err(self.err("expected a column name"));
        }
        self.pos += len;
        Ok(rest[..len].to_string())
    }

    fn word(&mut self) -> String {
        self.skip_ws();
        let rest = &self.text[self.pos..];
        let len = rest
            .char_indices()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
            .map_or(rest.len(), |(i, _)| i);
        self.pos += len;
        rest[..len].to_ascii_uppercase()
    }

    fn number(&mut self) -> Result<u32, HintError> {
        self.skip_ws();
        let rest = &self.text[self.pos..];
        let len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let n = rest[..len]
            .parse()
            .map_err(|_| self.err("expected a number"))?;
        self.pos += len;
        Ok(n)
    }

    /// Parses the inside of a nested type one level deeper.
    fn nested<T>(
        &mut self,
        inner: impl FnOnce(&mut Self) -> Result<T, HintError>,
    ) -> Result<T, HintError> {
        if self.depth == MAX_TYPE_DEPTH {
            return Err(self.err(format!("types nest at most {MAX_TYPE_DEPTH} deep")));
        }
        self.depth += 1;
        let result = inner(self);
        self.depth -= 1;
        result
    }

    fn data_type(&mut self) -> Result<DataType, HintError> {
        let start = self.pos;
        let word = self.word();
        Ok(match word.as_str() {
            "BOOLEAN" | "BOOL" => DataType::Boolean,
            "TINYINT" | "BYTE" => DataType::Byte,
            "SMALLINT" | "SHORT" => DataType::Short,
            "INT" | "INTEGER" => DataType::Integer,
            "BIGINT" | "LONG" => DataType::Long,
            "FLOAT" | "REAL" => DataType::Float,
            "DOUBLE" => DataType::Double,
            "DATE" => DataType::Date,
            "TIMESTAMP" => DataType::Timestamp,
            "STRING" => DataType::String,
            "BINARY" => DataType::Binary,
            "DECIMAL" | "DEC" | "NUMERIC" => {
                if self.eat('(') {
                    let p = self.number()?;
                    let s = if self.eat(',') { self.number()? } else { 0 };
                    self.expect(')')?;
                    if p == 0 || p > 38 || s > p {
                        self.pos = start;
                        return Err(self.err(format!(
                            "DECIMAL({p},{s}) is out of range: precision 1 to 38, scale at most the precision"
                        )));
                    }
                    DataType::Decimal(p as u8, s as i8)
                } else {
                    DataType::Decimal(10, 0)
                }
            }
            "ARRAY" => self.nested(|p| {
                p.expect('<')?;
                let element = p.data_type()?;
                p.expect('>')?;
                Ok(DataType::Array(Box::new(element)))
            })?,
            "MAP" => self.nested(|p| {
                p.expect('<')?;
                let key = p.data_type()?;
                p.expect(',')?;
                let value = p.data_type()?;
                p.expect('>')?;
                Ok(DataType::Map(Box::new(key), Box::new(value)))
            })?,
            "STRUCT" => self.nested(|p| {
                p.expect('<')?;
                let mut fields = Vec::new();
                if !p.eat('>') {
                    loop {
                        let name = p.name()?;
                        p.eat(':');
                        fields.push(Field::new(name, p.data_type()?));
                        if p.eat('>') {
                            break;
                        }
                        p.expect(',')?;
                    }
                }
                Ok(DataType::Struct(fields))
            })?,
            "" => {
                self.pos = start;
                self.skip_ws();
                return Err(self.err("expected a type"));
            }
            other => {
                self.pos = start;
                self.skip_ws();
                return Err(self.err(format!("unknown type {other}")));
            }
        })
    }

    fn path(&mut self) -> Result<Vec<String>, HintError> {
        let mut path = vec![self.name()?];
        while self.text[self.pos..].starts_with('.') {
            self.pos += 1;
            path.push(self.name()?);
        }
        Ok(path)
    }

    fn done(&mut self) -> bool {
        self.peek().is_none()
    }
}

/// Parses `cloudFiles.schemaHints`.
pub fn parse_hints(text: &str) -> Result<Vec<Hint>, HintError> {
    let mut p = Parser {
        text,
        pos: 0,
        depth: 0,
    };
    let mut hints = Vec::new();
    if p.done() {
        return Ok(hints);
    }
    loop {
        let path = p.path()?;
        let data_type = p.data_type()?;
        hints.push(Hint { path, data_type });
        if p.done() {
            return Ok(hints);
        }
        p.expect(',')?;
        if p.done() {
            return Ok(hints);
        }
    }
}

/// Parses a DDL schema (`id BIGINT, name STRING`): hints without dotted paths.
pub fn parse_schema(text: &str) -> Result<Schema, HintError> {
    let hints = parse_hints(text)?;
    let mut fields: Vec<Field> = Vec::new();
    for hint in hints {
        if hint.path.len() != 1 {
            return Err(HintError {
                text: text.into(),
                position: text.find(&hint.path.join(".")).unwrap_or(0),
                message: "a schema names top-level columns; use STRUCT<...> for nested fields"
                    .into(),
            });
        }
        fields.push(Field::new(hint.path[0].clone(), hint.data_type));
    }
    Ok(Schema::new(fields))
}

/// Applies hints to a schema: each hinted path gets the hinted type (and the hint's
/// spelling of the name); a hinted column or struct field absent from the schema is added.
/// A path that cannot exist (`a.b` where `a` is a BIGINT) is an error naming the hint.
pub fn apply_hints(schema: &mut Schema, hints: &[Hint]) -> Result<(), String> {
    for hint in hints {
        apply_one(&mut schema.fields, &hint.path, &hint.data_type)
            .map_err(|e| format!("hint \"{} {}\": {e}", hint.path.join("."), hint.data_type))?;
    }
    Ok(())
}

fn apply_one(fields: &mut Vec<Field>, path: &[String], t: &DataType) -> Result<(), String> {
    let (head, rest) = path.split_first().expect("paths are never empty");
    let idx = match fields
        .iter()
        .position(|f| f.name.eq_ignore_ascii_case(head))
    {
        Some(i) => i,
        None => {
            fields.push(Field::new(head.clone(), build_for_path(rest, t)?));
            return Ok(());
        }
    };
    let field = &mut fields[idx];
    field.name.clone_from(head);
    if rest.is_empty() {
        field.data_type = t.clone();
        return Ok(());
    }
    apply_type(&mut field.data_type, rest, t)
}

fn apply_type(target: &mut DataType, path: &[String], t: &DataType) -> Result<(), String> {
    if path.is_empty() {
        *target = t.clone();
        return Ok(());
    }
    match target {
        DataType::Struct(fields) => apply_one(fields, path, t),
        DataType::Array(element) if path[0].eq_ignore_ascii_case("element") => {
            apply_type(element, &path[1..], t)
        }
        DataType::Map(key, _) if path[0].eq_ignore_ascii_case("key") => {
            apply_type(key, &path[1..], t)
        }
        DataType::Map(_, value) if path[0].eq_ignore_ascii_case("value") => {
            apply_type(value, &path[1..], t)
        }
        // The data had a plain value where the hint expects structure: the hint wins.
        _ => {
            *target = build_for_path(path, t)?;
            Ok(())
        }
    }
}

fn build_for_path(path: &[String], t: &DataType) -> Result<DataType, String> {
    match path.split_first() {
        None => Ok(t.clone()),
        Some((head, rest)) if head.eq_ignore_ascii_case("element") => {
            Ok(DataType::Array(Box::new(build_for_path(rest, t)?)))
        }
        Some((head, _))
            if head.eq_ignore_ascii_case("key") || head.eq_ignore_ascii_case("value") =>
        {
            Err("cannot create a map from a key or value path; hint the whole MAP<...>".into())
        }
        Some((head, rest)) => Ok(DataType::Struct(vec![Field::new(
            head.clone(),
            build_for_path(rest, t)?,
        )])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_seed_safe_set() {
        let hints = parse_hints(
            "order_id STRING, amount DECIMAL(18,4), created_at TIMESTAMP,
             items ARRAY<STRUCT<product_id:STRING, qty:INT, price:DECIMAL(12,2)>>",
        )
        .unwrap();
        assert_eq!(hints.len(), 4);
        assert_eq!(hints[1].data_type, DataType::Decimal(18, 4));
        assert_eq!(
            hints[3].data_type.to_string(),
            "ARRAY<STRUCT<product_id: STRING, qty: INT, price: DECIMAL(12,2)>>"
        );
    }

    #[test]
    fn parses_paths_aliases_and_backticks() {
        let hints = parse_hints(
            "address.zip string, items.element.price decimal(12,2), attrs MAP<STRING,INT>, `odd name.x` long, tags map<string,string>",
        )
        .unwrap();
        assert_eq!(hints[0].path, vec!["address", "zip"]);
        assert_eq!(hints[1].path, vec!["items", "element", "price"]);
        assert_eq!(hints[3].path, vec!["odd name.x"]);
        assert_eq!(hints[3].data_type, DataType::Long);
    }

    #[test]
    fn malformed_hints_point_at_the_position() {
        let err = parse_hints("order_id BIGINT, amount DECMAL(12,2)").unwrap_err();
        assert_eq!(err.position, 24);
        assert!(err.to_string().contains("unknown type DECMAL"), "{err}");
        assert!(
            err.to_string().contains("\n                          ^"),
            "{err}"
        );
        let err = parse_hints("order_id").unwrap_err();
        assert!(err.message.contains("expected a type"), "{err}");
        let err = parse_hints("a DECIMAL(40,2)").unwrap_err();
        assert!(err.message.contains("out of range"), "{err}");
        let err = parse_hints("a ARRAY<INT").unwrap_err();
        assert!(err.message.contains("expected '>'"), "{err}");
    }

    /// Found by fuzzing `fuzz_hints`: `a STRUCT<a STRUCT<...>>` 50 deep parsed, and its
    /// Spark JSON (what the schema store keeps) could not be read back.
    #[test]
    fn types_nest_only_as_deep_as_the_schema_store_reads_back() {
        let nested = |n: usize, open: &str| format!("a {}INT{}", open.repeat(n), ">".repeat(n));
        for open in ["STRUCT<a ", "ARRAY<", "MAP<STRING, "] {
            let deepest = parse_schema(&nested(MAX_TYPE_DEPTH, open)).unwrap();
            let json = deepest.to_spark_json();
            assert_eq!(Schema::from_spark_json(&json).unwrap(), deepest, "{open}");
            let err = parse_schema(&nested(MAX_TYPE_DEPTH + 1, open)).unwrap_err();
            assert!(err.message.contains("nest at most 40 deep"), "{err}");
        }
        // Far deeper input is an error too, not a stack overflow.
        assert!(parse_hints(&nested(100_000, "ARRAY<")).is_err());
    }

    #[test]
    fn applying_hints_overrides_adds_and_pins_case() {
        let mut schema = parse_schema(
            "date STRING, quantity INT, user_info STRUCT<id:STRING, name:STRING, dob:STRING>, \
             purchase_options STRUCT<delivery_address:STRING>",
        )
        .unwrap();
        let hints = parse_hints(
            "date DATE, user_info.dob DATE, purchase_options MAP<STRING,STRING>, time TIMESTAMP, QUANTITY BIGINT",
        )
        .unwrap();
        apply_hints(&mut schema, &hints).unwrap();
        assert_eq!(
            schema.to_string(),
            "date DATE, QUANTITY BIGINT, user_info STRUCT<id: STRING, name: STRING, dob: DATE>, \
             purchase_options MAP<STRING, STRING>, time TIMESTAMP"
        );
    }

    #[test]
    fn hints_reach_into_map_keys_and_values() {
        let mut schema = parse_schema("attrs MAP<STRING, STRUCT<content:BIGINT>>").unwrap();
        let hints = parse_hints("attrs.key INT, attrs.value.content STRING").unwrap();
        apply_hints(&mut schema, &hints).unwrap();
        assert_eq!(
            schema.to_string(),
            "attrs MAP<INT, STRUCT<content: STRING>>"
        );
    }

    #[test]
    fn hints_reach_into_arrays() {
        let mut schema = parse_schema("items ARRAY<STRUCT<price:DOUBLE, qty:BIGINT>>").unwrap();
        apply_hints(
            &mut schema,
            &parse_hints("items.element.price DECIMAL(12,2)").unwrap(),
        )
        .unwrap();
        assert_eq!(
            schema.to_string(),
            "items ARRAY<STRUCT<price: DECIMAL(12,2), qty: BIGINT>>"
        );
    }
}
