//! XML (`cloudFiles.format=xml`), as Spark's XML source reads it: one row per `rowTag`
//! element, read with a streaming reader one row element at a time (each bounded by
//! `cloudFiles.maxRecordBytes`), so memory stays bounded whatever the file size.
//!
//! A row element becomes the same value a JSON record is, then is inferred and decoded by
//! the JSON machinery: attributes are fields named `attributePrefix` + name (unless
//! `excludeAttribute`), child elements are fields (repeated ones an array, ones with
//! attributes or children a struct), and an element's text is its value, or its
//! `valueTag` field when it also has attributes or children. Text is typed as Spark's XML
//! inference does: integers, fractions and `true`/`false` are numbers and booleans, the
//! rest strings (timestamps told by the JSON rules); empty text is null. An element that
//! repeats in some rows and appears once in others is an array (a single one read as an
//! array of one).
//!
//! A row element that is not well-formed (mismatched end tag, bad attribute, unknown
//! entity, invalid UTF-8, or the file ending inside it) is a malformed record: kept raw
//! in the rescued data with its line, or an error naming the file and line under
//! FAILFAST. Anything outside row elements is skipped.

use std::io::{self, BufRead, Read};
use std::sync::Arc;

use arrow_array::RecordBatch;
use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

use super::sink::{CarriedRows, RowSink};
use super::{
    DecodeError, DecodeOptions, FileStats, LARGE_RECORD_BYTES, OverLimit, SourceFile,
    large_record_turn, open, read_error,
};
use crate::options::XmlSettings;
use crate::parse::json::{JsonArena, JsonValue};
use crate::record::TableLayout;
use crate::schema::infer::SchemaInferrer;

type Value = Node;

/// An element's value while it is read (children are added one by one, a repeated one
/// turned into an array), typed as Spark's XML inference types text; a row is handed to
/// decoding and inference as a [`JsonValue`] ([`Node::in_arena`]).
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

impl Node {
    fn is_null(&self) -> bool {
        matches!(self, Node::Null)
    }

    /// The value as a [`JsonValue`]: its arrays' and objects' entries in `arena`, its
    /// names and text borrowed from the node (a large row's text is not copied again).
    fn in_arena<'a>(&'a self, arena: &'a JsonArena) -> JsonValue<'a> {
        match self {
            Node::Null => JsonValue::Null,
            Node::Bool(b) => JsonValue::Bool(*b),
            Node::Number(t) => JsonValue::Number(t),
            Node::String(t) => JsonValue::String(t),
            Node::Array(items) => arena.array(items.iter().map(|v| v.in_arena(arena))),
            Node::Object(fields) => {
                arena.object(fields.iter().map(|(k, v)| (k.as_str(), v.in_arena(arena))))
            }
        }
    }
}

/// One row element as read.
enum Row {
    Parsed(Value),
    Malformed { raw: String, reason: String },
}

/// Marks the read error [`Tracked`] raises past `cloudFiles.maxRecordBytes`.
#[derive(Debug)]
struct TooLong;

impl std::fmt::Display for TooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("record longer than cloudFiles.maxRecordBytes")
    }
}

impl std::error::Error for TooLong {}

/// The file's reader, counting the lines read and keeping a copy of the row element being
/// read (its raw text, for when it is malformed); reading more than `max` bytes since the
/// last mark fails with [`TooLong`], so no element, row or not, is held whole past it.
struct Tracked {
    inner: Box<dyn BufRead + Send>,
    newlines: u64,
    consumed: u64,
    mark: u64,
    max: u64,
    recording: bool,
    raw: Vec<u8>,
}

impl Tracked {
    fn mark(&mut self) {
        self.mark = self.consumed;
    }
}

impl Read for Tracked {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = {
            let available = self.fill_buf()?;
            let n = available.len().min(buf.len());
            buf[..n].copy_from_slice(&available[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Tracked {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.consumed - self.mark > self.max {
            return Err(io::Error::other(TooLong));
        }
        self.inner.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        // The bytes are buffered already: this reads nothing.
        if let Ok(available) = self.inner.fill_buf() {
            let used = &available[..n.min(available.len())];
            self.newlines += memchr::memchr_iter(b'\n', used).count() as u64;
            if self.recording {
                self.raw.extend_from_slice(used);
            }
        }
        self.consumed += n as u64;
        self.inner.consume(n);
    }
}

/// An element being read: its fields (attributes, then children in order, repeated ones
/// gathered into arrays) and its text.
struct Frame {
    name: String,
    fields: Vec<(String, Value)>,
    text: String,
}

impl Frame {
    fn add_child(&mut self, name: String, value: Value) {
        match self.fields.iter_mut().find(|(n, _)| *n == name) {
            // Children are never arrays themselves: an array is a repeated child.
            Some((_, Node::Array(items))) => items.push(value),
            Some((_, existing)) => {
                let first = std::mem::replace(existing, Node::Null);
                *existing = Node::Array(vec![first, value]);
            }
            None => self.fields.push((name, value)),
        }
    }

    /// The element's value; a row element is always an object.
    fn finish(mut self, settings: &XmlSettings, row: bool) -> Value {
        let text = leaf(&self.text);
        if self.fields.is_empty() && !row {
            return text;
        }
        if !text.is_null() {
            self.fields.push((settings.value_tag.clone(), text));
        }
        Node::Object(self.fields)
    }
}

/// The value of an element's (or attribute's) text, typed as Spark's XML inference does.
fn leaf(text: &str) -> Value {
    let t = text.trim();
    if t.is_empty() {
        Node::Null
    } else if is_number(t) {
        Node::Number(t.to_string())
    } else if t.eq_ignore_ascii_case("true") {
        Node::Bool(true)
    } else if t.eq_ignore_ascii_case("false") {
        Node::Bool(false)
    } else {
        Node::String(t.to_string())
    }
}

/// `[+-]digits[.digits][(e|E)[+-]digits]`, a fraction's digits on either side of the point.
fn is_number(t: &str) -> bool {
    let b = t.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    let mut mantissa = digits(&mut i);
    if b.get(i) == Some(&b'.') {
        i += 1;
        mantissa += digits(&mut i);
    }
    if mantissa == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// An element's or attribute's name as the row reads it (`ignoreNamespace` drops the
/// prefix).
fn local<'n>(name: &'n str, settings: &XmlSettings) -> &'n str {
    if settings.ignore_namespace {
        name.rsplit_once(':').map_or(name, |(_, l)| l)
    } else {
        name
    }
}

fn element_name(e: &BytesStart<'_>, settings: &XmlSettings) -> Result<String, String> {
    let name = std::str::from_utf8(e.name().into_inner())
        .map_err(|_| "an element name is not valid UTF-8".to_string())?;
    Ok(local(name, settings).to_string())
}

/// A new element's frame, with its attributes (namespace declarations left out).
fn open_frame(e: &BytesStart<'_>, settings: &XmlSettings) -> Result<Frame, String> {
    let name = element_name(e, settings)?;
    let mut fields = Vec::new();
    if !settings.exclude_attribute {
        for attr in e.attributes() {
            let attr = attr.map_err(|err| format!("bad attribute in <{name}>: {err}"))?;
            let key = std::str::from_utf8(attr.key.into_inner())
                .map_err(|_| format!("an attribute name in <{name}> is not valid UTF-8"))?;
            if key == "xmlns" || key.starts_with("xmlns:") {
                continue;
            }
            let value = attr
                .unescape_value()
                .map_err(|err| format!("bad value of attribute {key} in <{name}>: {err}"))?;
            let field = format!("{}{}", settings.attribute_prefix, local(key, settings));
            fields.push((field, leaf(&value)));
        }
    }
    Ok(Frame {
        name,
        fields,
        text: String::new(),
    })
}

/// A row element that starts.
struct RowStart {
    frame: Frame,
    self_closing: bool,
    line: u64,
    /// Its start tag, as written.
    tag: Vec<u8>,
    /// Why it is malformed already (a bad attribute).
    reason: Option<String>,
}

/// Receives each row element: its value (or raw text when malformed), its line and its
/// size in bytes.
type OnRow<'a> = dyn FnMut(Row, u64, usize) -> Result<(), DecodeError> + 'a;

/// Reads the file's row elements one at a time and hands each to `on_row`.
///
/// Long because it is one event loop over quick-xml's reader: the depth, the open row and
/// its malformed-state travel between events, and a loop split across functions would
/// pass that state around on every event of every file.
fn for_each_row(
    file: &SourceFile,
    opts: &DecodeOptions,
    on_row: &mut OnRow<'_>,
) -> Result<(), DecodeError> {
    let path = file.meta.path.as_str();
    let settings = &opts.xml;
    if settings.row_tag.is_empty() {
        return Err(DecodeError::Corrupt {
            path: path.to_string(),
            line: None,
            reason: "cloudFiles.format=xml needs rowTag".into(),
        });
    }
    let inner = open(file, opts.max_decompressed_bytes)?;
    let mut reader = Reader::from_reader(Tracked {
        inner,
        newlines: 0,
        consumed: 0,
        mark: 0,
        max: opts.max_record_bytes as u64,
        recording: false,
        raw: Vec::new(),
    });
    {
        let config = reader.config_mut();
        // End tags are matched here, so that a mismatch spoils its row only.
        config.check_end_names = false;
        config.allow_unmatched_ends = true;
    }
    let mut buf = Vec::new();
    // The open elements of the row being read (empty between rows).
    let mut stack: Vec<Frame> = Vec::new();
    // Why the row being read is malformed: it is skipped to its end tag.
    let mut broken: Option<String> = None;
    let mut row_line = 0u64;
    let mut last_error_at = None;
    let mut turn = None;
    loop {
        buf.clear();
        let raw_before = reader.get_ref().raw.len();
        let event = reader.read_event_into(&mut buf);
        let in_row = !stack.is_empty() || broken.is_some();
        let line = reader.get_ref().newlines + 1;
        // What ends the current row: a value, or a malformed row up to `raw_before`
        // (`true`: the event itself starts the next row).
        let mut ended: Option<Result<Value, bool>> = None;
        let mut starts: Option<RowStart> = None;
        match event {
            Err(quick_xml::Error::Io(e)) => {
                let at = if in_row { row_line } else { line };
                if e.get_ref().is_some_and(|inner| inner.is::<TooLong>()) {
                    return Err(DecodeError::RecordTooLong {
                        path: path.to_string(),
                        line: at,
                        limit: opts.max_record_bytes,
                    });
                }
                let copy = match e.get_ref().and_then(|i| i.downcast_ref::<OverLimit>()) {
                    Some(OverLimit(limit)) => io::Error::other(OverLimit(*limit)),
                    None => io::Error::new(e.kind(), e.to_string()),
                };
                return Err(read_error(path, copy, Some(at)));
            }
            Err(e) => {
                let at = reader.buffer_position();
                if last_error_at == Some(at) {
                    return Err(DecodeError::Corrupt {
                        path: path.to_string(),
                        line: Some(line),
                        reason: format!("invalid XML: {e}"),
                    });
                }
                last_error_at = Some(at);
                if in_row && broken.is_none() {
                    broken = Some(format!("invalid XML: {e}"));
                }
            }
            Ok(Event::Eof) => {
                if in_row {
                    broken
                        .get_or_insert_with(|| "the file ends inside the row element".to_string());
                    ended = Some(Err(false));
                } else {
                    break;
                }
            }
            Ok(event @ (Event::Start(_) | Event::Empty(_))) => {
                let self_closing = matches!(event, Event::Empty(_));
                let (Event::Start(e) | Event::Empty(e)) = event else {
                    continue;
                };
                if !in_row || broken.is_some() {
                    if element_name(&e, settings).is_ok_and(|n| n == settings.row_tag) {
                        if broken.is_some() {
                            // The malformed row ends where the next one starts.
                            ended = Some(Err(true));
                        }
                        let start_line =
                            line.saturating_sub(memchr::memchr_iter(b'\n', &e).count() as u64);
                        let mut tag = Vec::with_capacity(e.len() + 3);
                        tag.push(b'<');
                        tag.extend_from_slice(&e);
                        tag.extend_from_slice(if self_closing { b"/>" } else { b">" });
                        let (frame, reason) = match open_frame(&e, settings) {
                            Ok(f) => (f, None),
                            Err(reason) => (
                                Frame {
                                    name: settings.row_tag.clone(),
                                    fields: Vec::new(),
                                    text: String::new(),
                                },
                                Some(reason),
                            ),
                        };
                        starts = Some(RowStart {
                            frame,
                            self_closing,
                            line: start_line,
                            tag,
                            reason,
                        });
                    }
                } else {
                    match open_frame(&e, settings) {
                        Ok(f) if self_closing => {
                            let name = f.name.clone();
                            let value = f.finish(settings, false);
                            if let Some(parent) = stack.last_mut() {
                                parent.add_child(name, value);
                            }
                        }
                        Ok(f) => stack.push(f),
                        Err(reason) => broken = Some(reason),
                    }
                }
            }
            Ok(Event::End(e)) if in_row => {
                let name = std::str::from_utf8(e.name().into_inner())
                    .map(|n| local(n, settings).to_string());
                match (&broken, name) {
                    (Some(_), Ok(n)) if n == settings.row_tag => ended = Some(Err(false)),
                    (Some(_), _) => {}
                    (None, Err(_)) => broken = Some("an end tag is not valid UTF-8".into()),
                    (None, Ok(n)) => {
                        let top = stack.last().map(|f| f.name.as_str()).unwrap_or_default();
                        if n == top {
                            let frame = stack.pop().expect("in a row");
                            match stack.last_mut() {
                                Some(parent) => {
                                    let name = frame.name.clone();
                                    parent.add_child(name, frame.finish(settings, false));
                                }
                                None => ended = Some(Ok(frame.finish(settings, true))),
                            }
                        } else {
                            broken = Some(format!("</{n}> closes <{top}>"));
                            if n == settings.row_tag {
                                ended = Some(Err(false));
                            }
                        }
                    }
                }
            }
            Ok(Event::Text(t)) if in_row && broken.is_none() => match t.xml_content() {
                Ok(s) => push_text(&mut stack, &s),
                Err(_) => broken = Some("text that is not valid UTF-8".into()),
            },
            Ok(Event::CData(t)) if in_row && broken.is_none() => match t.decode() {
                Ok(s) => push_text(&mut stack, &s),
                Err(_) => broken = Some("CDATA that is not valid UTF-8".into()),
            },
            Ok(Event::GeneralRef(r)) if in_row && broken.is_none() => {
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(c)) => Some(c.to_string()),
                    Ok(None) => r.decode().ok().and_then(|name| {
                        quick_xml::escape::resolve_predefined_entity(&name).map(str::to_string)
                    }),
                    Err(_) => None,
                };
                match resolved {
                    Some(s) => push_text(&mut stack, &s),
                    None => {
                        let name = String::from_utf8_lossy(&r).into_owned();
                        broken = Some(format!("unknown entity &{name};"));
                    }
                }
            }
            Ok(_) => {}
        }
        if let Some(end) = ended {
            let tracked = reader.get_mut();
            let row = match end {
                Ok(value) => Row::Parsed(value),
                Err(next_starts) => {
                    let cut = if next_starts {
                        raw_before
                    } else {
                        tracked.raw.len()
                    };
                    Row::Malformed {
                        raw: String::from_utf8_lossy(&tracked.raw[..cut]).into_owned(),
                        reason: broken.take().unwrap_or_default(),
                    }
                }
            };
            let bytes = tracked.raw.len();
            tracked.recording = false;
            tracked.raw.clear();
            if tracked.raw.capacity() >= LARGE_RECORD_BYTES {
                tracked.raw = Vec::new();
            }
            stack.clear();
            broken = None;
            on_row(row, row_line, bytes)?;
            turn = None;
        }
        if let Some(RowStart {
            frame,
            self_closing,
            line: start_line,
            tag,
            reason,
        }) = starts
        {
            row_line = start_line;
            let tracked = reader.get_mut();
            tracked.raw.clear();
            if self_closing {
                let bytes = tag.len();
                let row = match reason {
                    None => Row::Parsed(frame.finish(settings, true)),
                    Some(reason) => Row::Malformed {
                        raw: String::from_utf8_lossy(&tag).into_owned(),
                        reason,
                    },
                };
                on_row(row, row_line, bytes)?;
            } else {
                tracked.raw.extend_from_slice(&tag);
                tracked.recording = true;
                stack.push(frame);
                broken = reason;
            }
        }
        let tracked = reader.get_mut();
        if !tracked.recording {
            tracked.mark();
        } else if turn.is_none() && tracked.raw.len() >= LARGE_RECORD_BYTES {
            turn = Some(large_record_turn());
        }
    }
    Ok(())
}

fn push_text(stack: &mut [Frame], text: &str) {
    if let Some(top) = stack.last_mut() {
        top.text.push_str(text);
    }
}

/// Observes every well-formed row element of the file.
pub fn infer(
    file: &SourceFile,
    opts: &DecodeOptions,
    typed: bool,
    inferrer: &mut SchemaInferrer,
) -> Result<u64, DecodeError> {
    inferrer.xml = true;
    let infer_opts = opts.infer_options(typed);
    let mut records = 0u64;
    let mut arena = JsonArena::new();
    for_each_row(file, opts, &mut |row, _, bytes| {
        if let Row::Parsed(v) = row {
            arena.reset();
            inferrer.add_jv(&v.in_arena(&arena), infer_opts);
            records += 1;
        }
        if bytes >= LARGE_RECORD_BYTES {
            // Its entries are not kept past its turn.
            arena = JsonArena::new();
        }
        Ok(())
    })?;
    Ok(records)
}

/// Decodes the file into batches.
pub fn decode(
    file: &SourceFile,
    opts: &DecodeOptions,
    layout: &Arc<TableLayout>,
    carry: Option<&mut CarriedRows>,
    emit: &mut dyn FnMut(RecordBatch) -> bool,
) -> Result<FileStats, DecodeError> {
    let mut sink = RowSink::new(file, opts, layout, carry, emit);
    let mut arena = JsonArena::new();
    let read = for_each_row(file, opts, &mut |row, line, bytes| {
        match row {
            Row::Parsed(node) => {
                arena.reset();
                match node.in_arena(&arena) {
                    JsonValue::Object(entries) => sink.rows.append_json_object(entries),
                    other => sink.rows.append_corrupt_at(&other.to_string(), line),
                }
            }
            Row::Malformed { reason, .. } if opts.fail_fast => {
                return Err(DecodeError::Malformed {
                    path: file.meta.path.clone(),
                    line,
                    reason: format!("<{}> row element: {reason}", opts.xml.row_tag),
                });
            }
            Row::Malformed { raw, .. } => sink.rows.append_corrupt_at(&raw, line),
        }
        let large = bytes >= LARGE_RECORD_BYTES;
        if large {
            // Its entries are not kept past its turn.
            arena = JsonArena::new();
        }
        sink.stop_at_new_fields()?;
        // A large row element (read during this thread's turn) is written at once.
        sink.pushed(bytes, large)
    });
    sink.finish(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_typed_as_spark_infers() {
        assert_eq!(leaf("  42 "), Node::Number("42".into()));
        assert_eq!(leaf("-1.5e3"), Node::Number("-1.5e3".into()));
        assert_eq!(leaf("True"), Node::Bool(true));
        assert_eq!(leaf(" "), Node::Null);
        assert_eq!(leaf("1.2.3"), Node::String("1.2.3".into()));
        assert_eq!(leaf("e5"), Node::String("e5".into()));
        assert_eq!(leaf("5e"), Node::String("5e".into()));
        assert!(is_number(".5") && is_number("5.") && !is_number(".") && !is_number("+"));
    }

    #[test]
    fn repeated_children_gather_into_arrays() {
        let mut f = Frame {
            name: "book".into(),
            fields: Vec::new(),
            text: String::new(),
        };
        f.add_child("author".into(), leaf("a"));
        f.add_child("title".into(), leaf("t"));
        f.add_child("author".into(), leaf("b"));
        let v = f.finish(&XmlSettings::default(), true);
        assert_eq!(
            v.in_arena(&JsonArena::new()).to_value(),
            serde_json::json!({"author": ["a", "b"], "title": "t"})
        );
    }
}
