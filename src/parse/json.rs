//! A JSON value that borrows from the input line where it can: strings without escapes,
//! numbers as their text, objects as entry lists (no hashing). The rest (objects' and
//! arrays' entries, strings with escapes) lives in a [`JsonArena`] that a reader resets
//! record by record, so the clean path makes no allocation per value and dropping a record
//! costs nothing; a value is turned into a `serde_json::Value` only when it has to be
//! rescued.
//!
//! The parser is our own, not serde_json's: it is the hot loop of both inference and
//! decoding, and a byte-level parser that validates UTF-8 once per line and finds the end
//! of a string eight bytes at a time is about twice as fast as serde_json's visitors. It
//! accepts exactly what `serde_json::from_slice` accepts (strict RFC 8259, nesting up to
//! 127 levels); a differential test and the fuzz target hold it to that.

use std::fmt;

use bumpalo::Bump;
use bumpalo::collections::{String as ArenaString, Vec as ArenaVec};
use serde_json::Value;

/// Deepest nesting of arrays and objects accepted (serde_json's recursion limit), so a
/// hostile line cannot overflow the stack.
const MAX_DEPTH: usize = 127;

/// The JSON extensions a reader accepts beyond RFC 8259 (Spark's `allow*` JSON options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonDialect {
    /// `allowSingleQuotes`: `'text'` strings and keys.
    pub single_quotes: bool,
    /// `allowNonNumericNumbers`: `NaN`, `Infinity`, `+Infinity`, `-Infinity`, `+INF`,
    /// `-INF` as numbers.
    pub non_numeric_numbers: bool,
    /// `allowComments`: `/* ... */` and `// ...` comments where whitespace may be.
    pub comments: bool,
    /// `allowUnquotedFieldNames`: `{a: 1}` (names of letters, digits, `_`, `$` and
    /// non-ASCII characters).
    pub unquoted_field_names: bool,
}

impl JsonDialect {
    /// RFC 8259 exactly, what `serde_json` accepts.
    pub const STRICT: JsonDialect = JsonDialect {
        single_quotes: false,
        non_numeric_numbers: false,
        comments: false,
        unquoted_field_names: false,
    };
    /// Spark's defaults: single quotes and non-numeric numbers on, the rest off.
    pub const SPARK: JsonDialect = JsonDialect {
        single_quotes: true,
        non_numeric_numbers: true,
        comments: false,
        unquoted_field_names: false,
    };
}

impl Default for JsonDialect {
    fn default() -> Self {
        JsonDialect::SPARK
    }
}

/// The non-numeric number tokens of `allowNonNumericNumbers`, as Jackson accepts them.
pub const NON_NUMERIC_TOKENS: &[&str] =
    &["NaN", "Infinity", "+Infinity", "-Infinity", "+INF", "-INF"];

/// Whether a number's text is one of [`NON_NUMERIC_TOKENS`].
#[inline]
pub fn is_non_numeric(text: &str) -> bool {
    match text.as_bytes() {
        [b'N' | b'I' | b'+', ..] | [b'-', b'I', ..] => NON_NUMERIC_TOKENS.contains(&text),
        _ => false,
    }
}

/// Why a text is not one JSON value, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    /// Byte offset into the text.
    pub offset: usize,
    pub reason: &'static str,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.reason, self.offset)
    }
}

impl std::error::Error for JsonError {}

/// Where the values of a record live while it is read: its objects' and arrays' entries
/// and its strings that had escapes (everything else borrows from the input). A reader
/// keeps one and resets it before each record, so a record costs no `malloc` and `free`
/// per object and array, and dropping a value costs nothing: a tree freed piece by piece
/// was a tenth of the bulk decode's instructions (bench/README).
#[derive(Default)]
pub struct JsonArena(Bump);

impl JsonArena {
    pub fn new() -> JsonArena {
        JsonArena::default()
    }

    /// `text` copied into the arena.
    fn str<'a>(&'a self, text: &str) -> &'a str {
        self.0.alloc_str(text)
    }

    /// An array of `items`, in the arena.
    pub fn array<'a>(
        &'a self,
        items: impl ExactSizeIterator<Item = JsonValue<'a>>,
    ) -> JsonValue<'a> {
        JsonValue::Array(self.0.alloc_slice_fill_iter(items))
    }

    /// An object of `entries` (kept in order, duplicates included), in the arena.
    pub fn object<'a>(
        &'a self,
        entries: impl ExactSizeIterator<Item = (&'a str, JsonValue<'a>)>,
    ) -> JsonValue<'a> {
        JsonValue::Object(self.0.alloc_slice_fill_iter(entries))
    }

    /// Frees every value parsed into the arena (the borrow checker has ended them), keeping
    /// its largest block of memory for the next record.
    pub fn reset(&mut self) {
        self.0.reset();
    }
}

/// A JSON value borrowing from its input and from the [`JsonArena`] it was parsed into.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum JsonValue<'a> {
    Null,
    Bool(bool),
    /// The number's text, exactly as written (no precision lost).
    Number(&'a str),
    String(&'a str),
    Array(&'a [JsonValue<'a>]),
    /// Entries in input order; duplicate keys are kept (and so never silently dropped).
    Object(&'a [(&'a str, JsonValue<'a>)]),
}

impl<'a> JsonValue<'a> {
    /// Parses one strict JSON text (surrounding whitespace allowed, nothing else).
    pub fn parse(arena: &'a JsonArena, text: &'a [u8]) -> Result<JsonValue<'a>, JsonError> {
        JsonValue::parse_with(arena, text, JsonDialect::STRICT)
    }

    /// Parses one JSON text with the extensions of `dialect`.
    pub fn parse_with(
        arena: &'a JsonArena,
        text: &'a [u8],
        dialect: JsonDialect,
    ) -> Result<JsonValue<'a>, JsonError> {
        let text = validated(text)?;
        // Comments are rare: the parser without them has the whitespace loop it always had
        // (a check per skip cost a tenth of the decoding time).
        if dialect.comments {
            Parser::<true>::new(text, dialect, arena).document()
        } else {
            Parser::<false>::new(text, dialect, arena).document()
        }
    }

    /// Parses one JSON text whose top level is an object, handing each entry to `entry`
    /// as it is parsed, without building the object (schema inference keeps only the
    /// entries that tell it something new). `Ok(false)`: the top level is not an object,
    /// and nothing was parsed. On an error, entries before it may have been handed.
    pub fn for_each_entry(
        arena: &'a JsonArena,
        text: &'a [u8],
        dialect: JsonDialect,
        mut entry: impl FnMut(&'a str, JsonValue<'a>),
    ) -> Result<bool, JsonError> {
        let text = validated(text)?;
        if dialect.comments {
            Parser::<true>::new(text, dialect, arena).entries_of_document(&mut entry)
        } else {
            Parser::<false>::new(text, dialect, arena).entries_of_document(&mut entry)
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, JsonValue::Null)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            JsonValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The `serde_json::Value` of this value (for rescued data and multi-line documents).
    pub fn to_value(&self) -> Value {
        match self {
            JsonValue::Null => Value::Null,
            JsonValue::Bool(b) => Value::Bool(*b),
            JsonValue::Number(t) => {
                serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.to_string()))
            }
            JsonValue::String(s) => Value::String(s.to_string()),
            JsonValue::Array(items) => {
                Value::Array(items.iter().map(JsonValue::to_value).collect())
            }
            JsonValue::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_value()))
                    .collect(),
            ),
        }
    }

    /// A `serde_json::Value` as a value in `arena`.
    pub fn from_value(arena: &'a JsonArena, v: &Value) -> JsonValue<'a> {
        match v {
            Value::Null => JsonValue::Null,
            Value::Bool(b) => JsonValue::Bool(*b),
            Value::Number(n) => JsonValue::Number(arena.str(&n.to_string())),
            Value::String(s) => JsonValue::String(arena.str(s)),
            Value::Array(items) => {
                arena.array(items.iter().map(|v| JsonValue::from_value(arena, v)))
            }
            Value::Object(map) => arena.object(
                map.iter()
                    .map(|(k, v)| (arena.str(k), JsonValue::from_value(arena, v))),
            ),
        }
    }
}

impl fmt::Display for JsonValue<'_> {
    /// JSON text (what a STRING column holds for a non-string value).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonValue::Number(t) => f.write_str(t),
            JsonValue::Bool(b) => write!(f, "{b}"),
            JsonValue::Null => f.write_str("null"),
            other => write!(f, "{}", other.to_value()),
        }
    }
}

/// `COMMENTS`: whether `allowComments` is on (a parameter, so the common parser has no
/// comment check in its whitespace loop).
struct Parser<'a, const COMMENTS: bool> {
    arena: &'a Bump,
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Arrays and objects open around the current position.
    depth: usize,
    /// Why parsing stopped (kept here so the parse functions return a small `Result`).
    failure: Option<JsonError>,
    dialect: JsonDialect,
}

/// Parsing failed; the reason is in [`Parser::failure`].
struct Fail;

impl<'a, const COMMENTS: bool> Parser<'a, COMMENTS> {
    fn new(text: &'a str, dialect: JsonDialect, arena: &'a JsonArena) -> Self {
        Parser {
            arena: &arena.0,
            text,
            bytes: text.as_bytes(),
            pos: 0,
            depth: 0,
            failure: None,
            dialect,
        }
    }

    /// Parses the whole text as one value.
    fn document(mut self) -> Result<JsonValue<'a>, JsonError> {
        let parsed = self
            .skip_ws()
            .and_then(|()| self.value())
            .and_then(|v| self.end().map(|()| v));
        parsed.map_err(|Fail| self.failure.take().expect("a failure records its reason"))
    }

    /// [`JsonValue::for_each_entry`]: the whole text as one object, entry by entry.
    fn entries_of_document(
        mut self,
        entry: &mut impl FnMut(&'a str, JsonValue<'a>),
    ) -> Result<bool, JsonError> {
        let parsed = self.skip_ws().and_then(|()| {
            if self.peek() != Some(b'{') {
                return Ok(false);
            }
            self.entries(entry)?;
            self.end().map(|()| true)
        });
        parsed.map_err(|Fail| self.failure.take().expect("a failure records its reason"))
    }

    /// The object at the current `{`, each entry handed to `entry` (as [`Parser::object`]
    /// parses it, without keeping it).
    fn entries(&mut self, entry: &mut impl FnMut(&'a str, JsonValue<'a>)) -> Result<(), Fail> {
        self.enter()?;
        if self.closes_empty(b'}') {
            return Ok(());
        }
        loop {
            let key = self.key()?;
            self.colon()?;
            let mut value = JsonValue::Null;
            self.value_into(&mut value)?;
            entry(key, value);
            if !self.next_entry()? {
                return Ok(());
            }
        }
    }

    /// After the whole value: only whitespace may follow.
    fn end(&mut self) -> Result<(), Fail> {
        self.skip_ws()?;
        if self.pos == self.bytes.len() {
            Ok(())
        } else {
            Err(self.error("trailing characters"))
        }
    }

    /// Just inside an opening bracket: whether `close` follows at once (an empty object
    /// or array), consumed.
    #[inline]
    fn closes_empty(&mut self, close: u8) -> bool {
        let empty = self.peek() == Some(close);
        if empty {
            self.pos += 1;
            self.depth -= 1;
        }
        empty
    }

    /// After an object's key: its `:` and the whitespace around it.
    #[inline]
    fn colon(&mut self) -> Result<(), Fail> {
        self.skip_ws()?;
        if self.peek() != Some(b':') {
            return Err(self.error("expected ':'"));
        }
        self.pos += 1;
        self.skip_ws()
    }

    /// After an object's entry: true at a `,` (another entry follows), false at the
    /// closing `}` (consumed).
    #[inline]
    fn next_entry(&mut self) -> Result<bool, Fail> {
        self.skip_ws()?;
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                self.skip_ws()?;
                Ok(true)
            }
            Some(b'}') => {
                self.pos += 1;
                self.depth -= 1;
                Ok(false)
            }
            _ => Err(self.error("expected ',' or '}'")),
        }
    }

    #[cold]
    fn error(&mut self, reason: &'static str) -> Fail {
        self.failure = Some(JsonError {
            offset: self.pos,
            reason,
        });
        Fail
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) -> Result<(), Fail> {
        loop {
            while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
                self.pos += 1;
            }
            if !COMMENTS || self.peek() != Some(b'/') {
                return Ok(());
            }
            self.comment()?;
        }
    }

    /// Skips one `// ...` (to the end of the line) or `/* ... */` comment.
    #[cold]
    fn comment(&mut self) -> Result<(), Fail> {
        match self.bytes.get(self.pos + 1) {
            Some(b'/') => {
                self.pos = memchr::memchr(b'\n', &self.bytes[self.pos..])
                    .map_or(self.bytes.len(), |i| self.pos + i);
                Ok(())
            }
            Some(b'*') => match memchr::memmem::find(&self.bytes[self.pos + 2..], b"*/") {
                Some(i) => {
                    self.pos += 2 + i + 2;
                    Ok(())
                }
                None => Err(self.error("unterminated comment")),
            },
            _ => Err(self.error("expected a value")),
        }
    }

    fn value(&mut self) -> Result<JsonValue<'a>, Fail> {
        let mut v = JsonValue::Null;
        self.value_into(&mut v)?;
        Ok(v)
    }

    /// Parses a value straight into `out` (an entry's slot in its object or array): a
    /// value returned up the recursion and then moved into the vector was copied with
    /// loads that straddled the callee's stores, a stall on every value.
    ///
    /// Long because it is the parser's inner loop: objects and arrays are parsed here
    /// rather than in callees, so that a value is written once into its slot.
    fn value_into(&mut self, out: &mut JsonValue<'a>) -> Result<(), Fail> {
        match self.peek() {
            Some(b'{') => self.object(out),
            Some(b'[') => self.array(out),
            Some(b'"') => {
                *out = JsonValue::String(self.quoted::<b'"'>()?);
                Ok(())
            }
            Some(b'-' | b'0'..=b'9') => self.number(out),
            Some(b't') => self.literal(b"true", JsonValue::Bool(true), out),
            Some(b'f') => self.literal(b"false", JsonValue::Bool(false), out),
            Some(b'n') => self.literal(b"null", JsonValue::Null, out),
            Some(_) => self.odd_value_into(out),
            None => Err(self.error("unexpected end of input")),
        }
    }

    /// A value strict JSON does not have: a single-quoted string or a non-numeric number,
    /// as the dialect allows; anything else is an error.
    #[cold]
    fn odd_value_into(&mut self, out: &mut JsonValue<'a>) -> Result<(), Fail> {
        match self.peek() {
            Some(b'\'') if self.dialect.single_quotes => {
                *out = JsonValue::String(self.quoted::<b'\''>()?);
                Ok(())
            }
            Some(b'N' | b'I' | b'+' | b'-') if self.dialect.non_numeric_numbers => {
                self.non_numeric(out)
            }
            _ => Err(self.error("expected a value")),
        }
    }

    /// `true`, `false` or `null`: inlined with the word's length known, so the comparison is
    /// a load and a compare rather than a call into `memcmp` (a bulk record has two nulls).
    #[inline(always)]
    fn literal<const N: usize>(
        &mut self,
        word: &[u8; N],
        v: JsonValue<'a>,
        out: &mut JsonValue<'a>,
    ) -> Result<(), Fail> {
        if self.bytes.get(self.pos..self.pos + N) == Some(word.as_slice()) {
            self.pos += word.len();
            *out = v;
            Ok(())
        } else {
            Err(self.error("expected a value"))
        }
    }

    /// One of [`NON_NUMERIC_TOKENS`], kept as a number's text.
    #[cold]
    fn non_numeric(&mut self, out: &mut JsonValue<'a>) -> Result<(), Fail> {
        let rest = &self.text[self.pos..];
        // Longest first: `+Infinity` before `+INF`.
        let Some(token) = ["+Infinity", "-Infinity", "Infinity", "NaN", "+INF", "-INF"]
            .into_iter()
            .find(|t| rest.starts_with(t))
        else {
            return Err(self.error("expected a value"));
        };
        let start = self.pos;
        self.pos += token.len();
        *out = JsonValue::Number(&self.text[start..self.pos]);
        Ok(())
    }

    fn enter(&mut self) -> Result<(), Fail> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        self.pos += 1;
        self.skip_ws()
    }

    /// An object's key: a string, or (with the dialect's leave) a single-quoted string or
    /// an unquoted name.
    #[inline(always)]
    fn key(&mut self) -> Result<&'a str, Fail> {
        if self.peek() == Some(b'"') {
            return self.quoted::<b'"'>();
        }
        self.odd_key()
    }

    /// A key that is not a plain string: single-quoted or unquoted, as the dialect allows.
    #[cold]
    fn odd_key(&mut self) -> Result<&'a str, Fail> {
        match self.peek() {
            Some(b'\'') if self.dialect.single_quotes => self.quoted::<b'\''>(),
            Some(b)
                if self.dialect.unquoted_field_names && is_name_byte(b) && !b.is_ascii_digit() =>
            {
                let start = self.pos;
                while self.peek().is_some_and(is_name_byte) {
                    self.pos += 1;
                }
                // Stops at an ASCII byte, so the slice is on a character boundary.
                Ok(&self.text[start..self.pos])
            }
            _ => Err(self.error("expected a key")),
        }
    }

    fn object(&mut self, out: &mut JsonValue<'a>) -> Result<(), Fail> {
        self.enter()?;
        if self.closes_empty(b'}') {
            *out = JsonValue::Object(&[]);
            return Ok(());
        }
        // Each value is parsed in place, into its entry's slot: a value returned up the
        // recursion and then moved was copied with loads that straddled the stores just
        // made (a store-forwarding stall on every value; perf showed a quarter of the
        // parser's time on two such loads).
        let mut entries =
            ArenaVec::with_capacity_in(if self.depth == 1 { 16 } else { 4 }, self.arena);
        loop {
            let key = self.key()?;
            self.colon()?;
            entries.push((key, JsonValue::Null));
            let (_, value) = entries.last_mut().expect("just added");
            self.value_into(value)?;
            if !self.next_entry()? {
                *out = JsonValue::Object(entries.into_bump_slice());
                return Ok(());
            }
        }
    }

    fn array(&mut self, out: &mut JsonValue<'a>) -> Result<(), Fail> {
        self.enter()?;
        if self.closes_empty(b']') {
            *out = JsonValue::Array(&[]);
            return Ok(());
        }
        let mut items = ArenaVec::with_capacity_in(4, self.arena);
        loop {
            items.push(JsonValue::Null);
            self.value_into(items.last_mut().expect("just added"))?;
            self.skip_ws()?;
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws()?;
                }
                Some(b']') => {
                    self.pos += 1;
                    self.depth -= 1;
                    *out = JsonValue::Array(items.into_bump_slice());
                    return Ok(());
                }
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
    }

    fn number(&mut self, out: &mut JsonValue<'a>) -> Result<(), Fail> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            Some(b'I') if self.dialect.non_numeric_numbers => {
                self.pos = start;
                return self.non_numeric(out);
            }
            _ => return Err(self.error("invalid number")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.error("invalid number"));
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.error("invalid number"));
            }
            self.digits();
        }
        *out = JsonValue::Number(&self.text[start..self.pos]);
        Ok(())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    /// The string at its opening `QUOTE`: borrowed from the text unless it has escapes
    /// (then unescaped into the arena). `QUOTE` is `"`, or `'` for a single-quoted string
    /// (`allowSingleQuotes`: a `"` inside is a plain character, `\'` an escaped quote).
    #[inline(always)]
    fn quoted<const QUOTE: u8>(&mut self) -> Result<&'a str, Fail> {
        let start = self.pos + 1;
        let end = find_special::<QUOTE>(self.bytes, start);
        match self.bytes.get(end) {
            Some(&q) if q == QUOTE => {
                self.pos = end + 1;
                // Slicing at ASCII quotes of a validated text keeps it valid UTF-8.
                Ok(&self.text[start..end])
            }
            Some(b'\\') => {
                let mut owned = ArenaString::with_capacity_in(end - start + 16, self.arena);
                owned.push_str(&self.text[start..end]);
                self.pos = end;
                self.escaped_rest::<QUOTE>(&mut owned)?;
                Ok(owned.into_bump_str())
            }
            Some(_) => {
                self.pos = end;
                Err(self.error("control character in string"))
            }
            None => {
                self.pos = end;
                Err(self.error("unterminated string"))
            }
        }
    }

    /// The rest of a string from its first escape to its closing `QUOTE`.
    fn escaped_rest<const QUOTE: u8>(&mut self, out: &mut ArenaString<'a>) -> Result<(), Fail> {
        loop {
            match self.peek() {
                Some(q) if q == QUOTE => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let simple = match self.peek() {
                        Some(b'\'') if QUOTE == b'\'' => '\'',
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            self.pos += 1;
                            let c = self.unicode_escape()?;
                            out.push(c);
                            continue;
                        }
                        _ => return Err(self.error("invalid escape")),
                    };
                    self.pos += 1;
                    out.push(simple);
                }
                Some(_) => {
                    let end = find_special::<QUOTE>(self.bytes, self.pos);
                    out.push_str(&self.text[self.pos..end]);
                    self.pos = end;
                    match self.bytes.get(end) {
                        Some(b'\\') => {}
                        Some(q) if *q == QUOTE => {}
                        Some(_) => return Err(self.error("control character in string")),
                        None => return Err(self.error("unterminated string")),
                    }
                }
                None => return Err(self.error("unterminated string")),
            }
        }
    }

    /// The code point of a `\uXXXX` escape (the position is past the `u`), joining a
    /// surrogate pair; a lone surrogate is an error, as in serde_json.
    fn unicode_escape(&mut self) -> Result<char, Fail> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                if !self.bytes[self.pos..].starts_with(b"\\u") {
                    return Err(self.error("lone leading surrogate in hex escape"));
                }
                self.pos += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(self.error("lone leading surrogate in hex escape"));
                }
                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(self.error("lone trailing surrogate in hex escape")),
            other => other,
        };
        match char::from_u32(code) {
            Some(c) => Ok(c),
            None => Err(self.error("invalid unicode code point")),
        }
    }

    fn hex4(&mut self) -> Result<u32, Fail> {
        let mut code = 0u32;
        for _ in 0..4 {
            let digit = match self.peek() {
                Some(b) => (b as char).to_digit(16),
                None => return Err(self.error("unterminated string")),
            };
            let Some(digit) = digit else {
                return Err(self.error("invalid escape"));
            };
            code = code * 16 + digit;
            self.pos += 1;
        }
        Ok(code)
    }
}

/// `text` as UTF-8, validated once, so every string sliced out of it is valid UTF-8.
fn validated(text: &[u8]) -> Result<&str, JsonError> {
    simdutf8::compat::from_utf8(text).map_err(|e| JsonError {
        offset: e.valid_up_to(),
        reason: "invalid UTF-8",
    })
}

/// The value of a JSON number's text when it is an integer of 1 to 18 digits (always in
/// BIGINT's range), read in one pass; `None` for any other number. The common case of
/// decoding and inferring an integer column, ahead of the general parse.
#[inline]
pub fn short_integer(text: &str) -> Option<i64> {
    let (negative, digits) = match text.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        all => (false, all),
    };
    if !(1..=18).contains(&digits.len()) {
        return None;
    }
    let mut value: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        value = value * 10 + i64::from(d - b'0');
    }
    Some(if negative { -value } else { value })
}

/// The powers of ten a double holds exactly.
const EXACT_POWERS_OF_TEN: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// The value of a JSON number's text when it is written with at most 15 digits and no
/// exponent (`7089.07`, `-0.5`, `42`), `None` for any other number. Its digits as an
/// integer and the power of ten its point divides by are both exact in a double, so the
/// one division rounds correctly (Clinger's fast path): the same double as
/// `str::parse::<f64>`. Reading a bulk price went from about 250 instructions to about
/// 150 (a double column's values are mostly such numbers).
#[inline]
pub fn short_decimal(text: &str) -> Option<f64> {
    let (negative, digits) = match text.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        all => (false, all),
    };
    let mut mantissa: u64 = 0;
    let mut count = 0usize;
    let mut point: Option<usize> = None;
    for (i, &d) in digits.iter().enumerate() {
        match d {
            b'0'..=b'9' if count < 15 => {
                mantissa = mantissa * 10 + u64::from(d - b'0');
                count += 1;
            }
            b'.' if point.is_none() => point = Some(i),
            _ => return None,
        }
    }
    let decimals = point.map_or(0, |at| digits.len() - at - 1);
    if count == 0 {
        return None;
    }
    let value = mantissa as f64 / EXACT_POWERS_OF_TEN[decimals];
    Some(if negative { -value } else { value })
}

/// A byte of an unquoted field name (`allowUnquotedFieldNames`): ASCII letters, digits,
/// `_`, `$`, and any byte of a non-ASCII character.
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// Whether two keys are equal: what `a == b` answers, without a call into `memcmp` for
/// the short names JSON keys and columns have (comparing names is in the inner loop of
/// decoding and inference).
#[inline]
pub fn same_key(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8"));
    let half = |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().expect("4"));
    match n {
        0..4 => a.iter().zip(b).all(|(x, y)| x == y),
        // Two words that overlap in the middle cover every byte (a byte loop cost about
        // four instructions a byte for names like `amount` and `user_id`).
        4..8 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

/// The index of the first byte at or after `from` that ends a plain run of string
/// characters: `QUOTE`, a backslash or a control character (or the length of `bytes`).
/// Sixteen bytes at a time with SSE2 (part of every x86-64 CPU; most keys and values end
/// in the first sixteen), then eight at a time in a word, then byte by byte.
#[inline]
fn find_special<const QUOTE: u8>(bytes: &[u8], from: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut i = from;
    #[cfg(target_arch = "x86_64")]
    while let Some(chunk) = bytes.get(i..i + 16) {
        // SAFETY: SSE2, the function's one target feature, is part of every x86-64 CPU
        // (the x86_64 targets enable it); the function reads nothing but `chunk`.
        let found = unsafe { special_bytes_16::<QUOTE>(chunk.try_into().expect("sixteen bytes")) };
        if found != 0 {
            return i + found.trailing_zeros() as usize;
        }
        i += 16;
    }
    while i + 8 <= bytes.len() {
        let word = u64::from_le_bytes(bytes[i..i + 8].try_into().expect("eight bytes"));
        let quote = word ^ (ONES * u64::from(QUOTE));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        // A byte is flagged when it is zero (after the xor) or below 0x20; the lowest flag
        // is exact (borrows only carry upward), which is all that is used.
        let flags = (quote.wrapping_sub(ONES) & !quote
            | backslash.wrapping_sub(ONES) & !backslash
            | word.wrapping_sub(ONES * 0x20) & !word)
            & HIGHS;
        if flags != 0 {
            return i + (flags.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < bytes.len() && !(bytes[i] == QUOTE || matches!(bytes[i], b'\\' | 0..=0x1F)) {
        i += 1;
    }
    i
}

/// A bit for each of the sixteen bytes that is `QUOTE`, a backslash or a control character
/// (below 0x20), lowest bit first.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
#[inline]
fn special_bytes_16<const QUOTE: u8>(chunk: &[u8; 16]) -> u32 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set_epi64x,
        _mm_set1_epi8,
    };
    let half = |at: usize| i64::from_le_bytes(chunk[at..at + 8].try_into().expect("8"));
    let v = _mm_set_epi64x(half(8), half(0));
    let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(QUOTE as i8));
    let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
    // Below 0x20, unsigned: the lesser of the byte and 0x1F is the byte.
    let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1F)), v);
    _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_serde_json_value_and_borrows() {
        let arena = JsonArena::new();
        let text = br#"{"a": 1, "b": "x", "c": [true, null, 92233720368547758070, 1.50], "d": {"e": "q\"uote"}, "a": 2}"#;
        let jv = JsonValue::parse(&arena, text).unwrap();
        let JsonValue::Object(entries) = &jv else {
            panic!("{jv:?}")
        };
        assert_eq!(entries.len(), 5, "duplicate keys are kept");
        let text_bytes = text.as_ptr_range();
        let string_at = |v: &JsonValue<'_>| match v {
            JsonValue::String(s) => s.as_ptr(),
            other => panic!("not a string: {other:?}"),
        };
        assert_eq!(entries[1].1, JsonValue::String("x"));
        assert!(
            text_bytes.contains(&string_at(&entries[1].1)),
            "plain strings borrow from the text"
        );
        let JsonValue::Object(d) = entries[3].1 else {
            panic!("{:?}", entries[3])
        };
        assert_eq!(d[0].1, JsonValue::String("q\"uote"));
        assert!(
            !text_bytes.contains(&string_at(&d[0].1)),
            "escaped strings are unescaped into the arena"
        );
        assert_eq!(
            entries[2].1.to_value()[2].to_string(),
            "92233720368547758070",
            "big numbers keep every digit"
        );
        assert_eq!(entries[2].1.to_value()[3].to_string(), "1.50");
        let value: Value = serde_json::from_slice(text).unwrap();
        assert_eq!(jv.to_value()["d"], value["d"]);
        assert_eq!(JsonValue::from_value(&arena, &value["c"]), entries[2].1);
        assert!(JsonValue::parse(&arena, b"{\"a\": ").is_err());
        assert!(JsonValue::parse(&arena, b"{} x").is_err());
    }

    /// Whether our parser and serde_json agree on `text`: both refuse it, or both accept
    /// it with the same value.
    fn agrees_with_serde(text: &[u8]) {
        let arena = JsonArena::new();
        let ours = JsonValue::parse(&arena, text);
        let theirs = serde_json::from_slice::<Value>(text);
        match (&ours, &theirs) {
            (Ok(a), Ok(b)) => assert_eq!(&a.to_value(), b, "{:?}", String::from_utf8_lossy(text)),
            (Err(_), Err(_)) => {}
            _ => panic!(
                "disagree on {:?}: ours {ours:?}, serde_json {theirs:?}",
                String::from_utf8_lossy(text)
            ),
        }
    }

    pub(super) const CASES: &[&str] = &[
        "",
        " ",
        "null",
        "true",
        "false",
        "nul",
        "tru",
        "truex",
        "0",
        "-0",
        "01",
        "-",
        "1.",
        "1.5",
        ".5",
        "1e5",
        "1E+5",
        "1e-5",
        "1e",
        "1e+",
        "-1.5e300",
        "1e400",
        "123456789012345678901234567890",
        "\"\"",
        "\"abc\"",
        "\"a\\\"b\"",
        "\"\\u00e9\"",
        "\"\\uD83D\\uDE00\"",
        "\"\\uD83D\"",
        "\"\\uDE00\"",
        "\"\\uD83Dx\"",
        "\"\\uD83D\\u0041\"",
        "\"\\u12\"",
        "\"\\x\"",
        "\"\\/\\b\\f\\n\\r\\t\"",
        "\"tab\there\"",
        "\"unterminated",
        "\"한국어 이름\"",
        "\"\\u0000\"",
        "[]",
        "[ ]",
        "[1,]",
        "[,1]",
        "[1 2]",
        "[1,2]",
        "[[[]]]",
        "{}",
        "{ }",
        "{\"a\":1,}",
        "{\"a\" 1}",
        "{a:1}",
        "{\"a\":1}",
        "{\"a\":1,\"a\":2}",
        "{\"a\":{\"b\":[1,{\"c\":null}]}}",
        "{\"a\":1} ",
        "{\"a\":1}x",
        " \t\r\n{\"a\" : [ 1 , 2 ] }\n",
        "{\"a\":1}\u{c}",
        "[1]]",
        "{\"a\":}",
        "\u{feff}{}",
        "{\"k\u{7f}\":\"v\"}",
        "[\"abcdefghijklmnop\\\"qrstuvwx\"]",
        "[\"0123456789abcdef0123456789\"]",
    ];

    /// `for_each_entry` agrees with `parse`: an object's entries handed in order, a valid
    /// non-object refused with nothing handed, and an invalid object an error.
    fn entries_agree_with_parse(text: &[u8]) {
        let arena = JsonArena::new();
        let mut handed = Vec::new();
        let walked = JsonValue::for_each_entry(&arena, text, JsonDialect::STRICT, |k, v| {
            handed.push((k, v));
        });
        let shown = String::from_utf8_lossy(text);
        match JsonValue::parse(&arena, text) {
            Ok(JsonValue::Object(entries)) => {
                assert_eq!(walked, Ok(true), "{shown:?}");
                assert_eq!(handed, entries, "{shown:?}");
            }
            Ok(_) => assert_eq!(walked, Ok(false), "{shown:?}"),
            Err(_) => assert!(walked != Ok(true), "{shown:?}: {walked:?}"),
        }
    }

    #[test]
    fn accepts_exactly_what_serde_json_accepts() {
        for case in CASES {
            agrees_with_serde(case.as_bytes());
            entries_agree_with_parse(case.as_bytes());
        }
        // Raw control characters and invalid UTF-8 inside and outside strings.
        for bad in [
            &b"\"a\x01b\""[..],
            b"\"a\nb\"",
            b"\"\xff\"",
            b"\"\xe2\x82\"",
            b"\xff",
            b"{\"a\":\"\xc3\"}",
        ] {
            agrees_with_serde(bad);
        }
        // Nesting up to the limit is accepted, one deeper is refused.
        for depth in [126, 127, 128, 129] {
            let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            agrees_with_serde(text.as_bytes());
            let text = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
            agrees_with_serde(text.as_bytes());
            entries_agree_with_parse(text.as_bytes());
        }
    }

    #[test]
    fn agrees_with_serde_json_on_mutated_records() {
        // Deterministic mutations (xorshift) of realistic records: single-byte changes,
        // deletions and insertions of the bytes JSON cares about.
        let seeds: [&[u8]; 3] = [
            br#"{"order_id": 1, "amount": 7089.07, "name": "\uc9c0\ubbfc Tanaka", "items": [{"sku": "SKU-1", "qty": 1}], "note": null, "ok": true}"#,
            "{\"a\": \"한국\\n\", \"b\": [1e5, -0.0, {}], \"c\": {\"d\": \"\\\"x\\\\\"}}".as_bytes(),
            br#"[{"z": 1}, {"z": 2.5}, "s", false]"#,
        ];
        let alphabet = b"{}[]\",:\\ u0123456789.eE+-tfnlxD\x01\x7f\xc3\xa9\xff";
        let mut next = crate::testing::xorshift(0x9E37_79B9_7F4A_7C15u64);
        for seed in seeds {
            for _ in 0..4000 {
                let mut text = seed.to_vec();
                for _ in 0..=(next() % 3) {
                    let at = (next() as usize) % (text.len() + 1);
                    let byte = alphabet[(next() as usize) % alphabet.len()];
                    match next() % 3 {
                        0 if at < text.len() => text[at] = byte,
                        1 if at < text.len() => {
                            text.remove(at);
                        }
                        _ => text.insert(at, byte),
                    }
                }
                agrees_with_serde(&text);
                entries_agree_with_parse(&text);
            }
        }
    }

    #[test]
    fn short_decimals_read_as_the_general_parse_reads_them() {
        for (text, expected) in [
            ("0", Some(0.0)),
            ("-0", Some(-0.0)),
            ("-0.0", Some(-0.0)),
            ("7089.07", Some(7089.07)),
            ("0.1", Some(0.1)),
            ("123456789012345", Some(123_456_789_012_345.0)),
            ("0.00000000000001", Some(1e-14)),
            ("0.000000000000001", None),
            ("1234567890123456", None),
            ("1.234567890123456", None),
            ("1e5", None),
            ("1.5E3", None),
            ("-", None),
            ("1.2.3", None),
        ] {
            assert_eq!(
                short_decimal(text).map(f64::to_bits),
                expected.map(f64::to_bits),
                "{text}"
            );
        }
        let mut next = crate::testing::xorshift(0x2545_F491_4F6C_DD1D);
        for _ in 0..200_000 {
            let digits = 1 + (next() % 15) as usize;
            let mut text: String = (0..digits)
                .map(|_| char::from(b'0' + (next() % 10) as u8))
                .collect();
            if !next().is_multiple_of(4) {
                let at = (next() as usize) % (digits + 1);
                text.insert(at, '.');
            }
            if next().is_multiple_of(2) {
                text.insert(0, '-');
            }
            // What JSON allows: no bare or trailing point.
            if text.ends_with('.') || text.trim_start_matches('-').starts_with('.') {
                continue;
            }
            let general: f64 = text.parse().unwrap();
            assert_eq!(
                short_decimal(&text).map(f64::to_bits),
                Some(general.to_bits()),
                "{text}"
            );
        }
    }

    #[test]
    fn same_key_is_string_equality() {
        let names = [
            "",
            "a",
            "ab",
            "abc",
            "abd",
            "note",
            "nose",
            "notf",
            "items",
            "itens",
            "jtems",
            "status",
            "stbtus",
            "user_id",
            "user_ie",
            "vser_id",
            "order_id",
            "order_ie",
            "created_at",
            "created_au",
            "gift_message",
            "gift_messagf",
            "abcdefghijklmnop",
            "abcdefghijklmnoq",
            "abcdefghijklmnopq",
            "abcdefghijklmnopr",
            "한국",
            "한굮",
            "x한",
        ];
        for a in names {
            for b in names {
                assert_eq!(same_key(a, b), a == b, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn finds_the_end_of_plain_runs_in_every_position() {
        // Up to past two sixteen-byte chunks and a word, so that every path ends a run.
        for len in 0..44 {
            for special in [b'"', b'\\', 0x00, 0x1F] {
                for at in 0..len {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = special;
                    for from in [0, at / 3, at] {
                        assert_eq!(
                            find_special::<b'"'>(&bytes, from),
                            at,
                            "len {len} at {at} from {from} byte {special}"
                        );
                    }
                }
                for plain in [0xC3, 0x80, 0xFF, 0x7F, b' ', b'\''] {
                    assert_eq!(find_special::<b'"'>(&vec![plain; len], 0), len, "{plain}");
                }
                // Single-quoted strings: `'` ends a run, `"` does not.
                let mut single = vec![b'a'; len];
                if len > 0 {
                    single[len - 1] = b'"';
                }
                assert_eq!(find_special::<b'\''>(&single, 0), len);
                if len > 0 {
                    single[len / 2] = b'\'';
                    assert_eq!(find_special::<b'\''>(&single, 0), len / 2);
                }
            }
        }
    }
}

#[cfg(test)]
mod dialect_tests {
    use super::*;

    fn lenient(text: &str, d: JsonDialect) -> Result<Value, JsonError> {
        let arena = JsonArena::new();
        JsonValue::parse_with(&arena, text.as_bytes(), d).map(|v| v.to_value())
    }

    #[test]
    fn non_numeric_numbers_are_numbers_by_default_only_in_the_spark_dialect() {
        let arena = JsonArena::new();
        for token in NON_NUMERIC_TOKENS {
            let text = format!("{{\"a\": {token}}}");
            let v = JsonValue::parse_with(&arena, text.as_bytes(), JsonDialect::SPARK).unwrap();
            let JsonValue::Object(entries) = v else {
                panic!("{text}")
            };
            assert_eq!(entries[0].1, JsonValue::Number(token), "{text}");
            assert!(
                JsonValue::parse(&arena, text.as_bytes()).is_err(),
                "strict refuses {text}"
            );
        }
        for bad in [
            "{\"a\": INF}",
            "{\"a\": nan}",
            "{\"a\": -NaN}",
            "{\"a\": NaNx}",
            "{\"a\": +1}",
        ] {
            assert!(lenient(bad, JsonDialect::SPARK).is_err(), "{bad}");
        }
        assert!(lenient("[-1, -Infinity]", JsonDialect::SPARK).is_ok());
    }

    #[test]
    fn single_quotes_read_as_strings() {
        let v = lenient(
            "{'a':'x','b':1, 'c': 'it\\'s \"q\"', \"d\": ['\\u00e9']}",
            JsonDialect::SPARK,
        )
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"a": "x", "b": 1, "c": "it's \"q\"", "d": ["é"]})
        );
        assert!(lenient("{'a':'x'}", JsonDialect::STRICT).is_err());
        assert!(lenient("{'a':'x}", JsonDialect::SPARK).is_err());
        assert!(lenient("{\"a\":\"it\\'s\"}", JsonDialect::SPARK).is_err());
    }

    #[test]
    fn comments_and_unquoted_names_only_when_allowed() {
        let all = JsonDialect {
            comments: true,
            unquoted_field_names: true,
            ..JsonDialect::SPARK
        };
        let text = "/* head */ {a: 1, // line\n $b_2: /* mid */ [1 /* x */, 2], 한: 3} // end";
        assert_eq!(
            lenient(text, all).unwrap(),
            serde_json::json!({"a": 1, "$b_2": [1, 2], "한": 3})
        );
        assert!(lenient(text, JsonDialect::SPARK).is_err());
        assert!(lenient("{\"a\": 1} /* open", all).is_err());
        assert!(lenient("{1a: 1}", all).is_err());
        assert!(lenient("{\"a\": 1} /", all).is_err());
    }

    /// The strict dialect is what `parse` uses, so the differential tests hold it to serde_json.
    #[test]
    fn lenient_dialect_accepts_every_strict_text_alike() {
        let arena = JsonArena::new();
        for case in super::tests::CASES {
            if let Ok(v) = JsonValue::parse(&arena, case.as_bytes()) {
                let all = JsonDialect {
                    comments: true,
                    unquoted_field_names: true,
                    ..JsonDialect::SPARK
                };
                assert_eq!(
                    JsonValue::parse_with(&arena, case.as_bytes(), all).unwrap(),
                    v,
                    "{case:?}"
                );
            }
        }
    }
}
