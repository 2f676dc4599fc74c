//! JSON lines, and whole-file JSON (`multiLine=true`, a top-level array is one row per
//! element, streamed element by element).
//!
//! JSON lines: blank lines are skipped; a line that is not valid JSON, or a scalar, is a
//! malformed record (kept raw in the rescued data, or an error under FAILFAST); a line
//! holding an array yields one row per element, as Spark does. A multi-line document that
//! is not valid JSON is a corrupt file (error with line and column), since no record
//! boundary can be trusted in it.

use std::cell::Cell;
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use arrow_array::RecordBatch;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::{
    BATCH_BYTES, BATCH_ROWS, DecodeError, DecodeOptions, FileStats, LARGE_RECORD_BYTES, SourceFile,
    large_record_turn, open, read_error, read_line_bounded,
};
use crate::parse::json::JsonValue;
use crate::record::{RowBuilder, TableLayout};
use crate::schema::infer::SchemaInferrer;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Calls `on_line` with each non-blank line of a JSON-lines file (BOM and `\r` removed)
/// and its 1-based number; an over-long line is an error naming the file and line.
/// Receives a line and its number.
type OnLine<'a> = dyn FnMut(&[u8], u64) -> Result<(), DecodeError> + 'a;

fn for_each_line(
    reader: &mut dyn std::io::BufRead,
    path: &str,
    max_record_bytes: usize,
    line_sep: Option<&[u8]>,
    on_line: &mut OnLine<'_>,
) -> Result<(), DecodeError> {
    if let Some(sep) = line_sep {
        return for_each_separated(reader, path, max_record_bytes, sep, on_line);
    }
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    loop {
        // The common case: the whole line is in the read buffer, and is handed over from
        // there without a copy.
        let available = reader
            .fill_buf()
            .map_err(|e| read_error(path, e, Some(line_no + 1)))?;
        if let Some(end) = memchr::memchr(b'\n', available).filter(|end| *end <= max_record_bytes) {
            line_no += 1;
            let mut line = &available[..end];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            if line_no == 1 && line.starts_with(BOM) {
                line = &line[BOM.len()..];
            }
            if !line.iter().all(u8::is_ascii_whitespace) {
                on_line(line, line_no)?;
            }
            reader.consume(end + 1);
            continue;
        }
        // A line longer than what is buffered, or the last line without a newline. One
        // that turns out large is read and handled during this thread's turn.
        let mut turn = None;
        let read = read_line_bounded(reader, &mut buf, max_record_bytes, &mut || {
            turn = Some(large_record_turn());
        })
        .map_err(|e| read_error(path, e, Some(line_no + 1)))?;
        line_no += 1;
        let line = match read {
            None => return Ok(()),
            Some(false) => {
                return Err(DecodeError::RecordTooLong {
                    path: path.into(),
                    line: line_no,
                    limit: max_record_bytes,
                });
            }
            Some(true) => {
                if line_no == 1 && buf.starts_with(BOM) {
                    &buf[BOM.len()..]
                } else {
                    &buf[..]
                }
            }
        };
        if !line.iter().all(u8::is_ascii_whitespace) {
            on_line(line, line_no)?;
        }
        if turn.is_some() {
            // A large line's buffer is not kept past its turn.
            buf = Vec::new();
        }
    }
}

/// [`for_each_line`] with a custom record separator (`lineSep`): records are numbered as
/// lines are, and bounded alike (a `\r` is not removed; JSON takes it as whitespace).
fn for_each_separated(
    reader: &mut dyn std::io::BufRead,
    path: &str,
    max_record_bytes: usize,
    sep: &[u8],
    on_line: &mut OnLine<'_>,
) -> Result<(), DecodeError> {
    let finder = memchr::memmem::Finder::new(sep);
    let mut buf: Vec<u8> = Vec::new();
    // The record being read starts at `start`; `scanned` bytes of it hold no separator.
    let mut start = 0usize;
    let mut scanned = 0usize;
    let mut record_no = 0u64;
    let mut ended = false;
    let mut turn = None;
    let mut handle = |record: &[u8], record_no: u64| -> Result<(), DecodeError> {
        let record = if record_no == 1 {
            record.strip_prefix(BOM).unwrap_or(record)
        } else {
            record
        };
        if record.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        on_line(record, record_no)
    };
    loop {
        if let Some(i) = finder.find(&buf[start + scanned..]) {
            let end = start + scanned + i;
            record_no += 1;
            if end - start > max_record_bytes {
                return Err(DecodeError::RecordTooLong {
                    path: path.into(),
                    line: record_no,
                    limit: max_record_bytes,
                });
            }
            handle(&buf[start..end], record_no)?;
            turn = None;
            start = end + sep.len();
            scanned = 0;
            continue;
        }
        if ended {
            if start < buf.len() {
                record_no += 1;
                handle(&buf[start..], record_no)?;
            }
            return Ok(());
        }
        if buf.len() - start > max_record_bytes {
            return Err(DecodeError::RecordTooLong {
                path: path.into(),
                line: record_no + 1,
                limit: max_record_bytes,
            });
        }
        if turn.is_none() && buf.len() - start >= LARGE_RECORD_BYTES {
            turn = Some(large_record_turn());
        }
        // Keep only the record being read, then append what the reader has.
        buf.drain(..start);
        start = 0;
        scanned = buf.len().saturating_sub(sep.len() - 1);
        let available = reader
            .fill_buf()
            .map_err(|e| read_error(path, e, Some(record_no + 1)))?;
        if available.is_empty() {
            ended = true;
            continue;
        }
        buf.extend_from_slice(available);
        let n = available.len();
        reader.consume(n);
    }
}

/// Calls `on_record` with each record of the file and its line number (1-based; for a
/// multi-line document, the document's line). Malformed lines come as `Err(raw text)`.
fn for_each_record(
    file: &SourceFile,
    opts: &DecodeOptions,
    on_record: &mut dyn FnMut(Result<Value, String>, u64, usize) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let path = file.meta.path.as_str();
    let mut reader = open(&file.local_path, path, opts.max_decompressed_bytes)?;
    if opts.multi_line {
        return for_each_document_record(&mut *reader, path, opts.max_record_bytes, on_record);
    }
    for_each_line(
        &mut *reader,
        path,
        opts.max_record_bytes,
        opts.json.line_sep.as_deref(),
        &mut |line, line_no| {
            let bytes = line.len();
            match serde_json::from_slice::<Value>(line) {
                Ok(Value::Array(items)) => {
                    for item in items {
                        let item = match item {
                            Value::Object(_) => Ok(item),
                            other => Err(other.to_string()),
                        };
                        on_record(item, line_no, bytes)?;
                    }
                    Ok(())
                }
                Ok(v @ Value::Object(_)) => on_record(Ok(v), line_no, bytes),
                Ok(_) | Err(_) => on_record(
                    Err(String::from_utf8_lossy(line).into_owned()),
                    line_no,
                    bytes,
                ),
            }
        },
    )
}

/// Streams the records of a whole-file JSON document.
fn for_each_document_record(
    reader: &mut dyn std::io::BufRead,
    path: &str,
    max_record_bytes: usize,
    on_record: &mut dyn FnMut(Result<Value, String>, u64, usize) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let head = reader
        .fill_buf()
        .map_err(|e| read_error(path, e, Some(1)))?;
    if head.starts_with(BOM) {
        reader.consume(BOM.len());
    }
    let since_record = Rc::new(Cell::new(0usize));
    let limited = RecordLimit {
        inner: reader,
        since_record: Rc::clone(&since_record),
        max: max_record_bytes,
    };
    let mut de = serde_json::Deserializer::from_reader(limited);
    let mut sink_error = None;
    let seed = Records {
        on_record,
        sink_error: &mut sink_error,
        since_record,
    };
    let result = seed.deserialize(&mut de).and_then(|()| de.end());
    if let Some(e) = sink_error {
        return Err(e);
    }
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.is_io() && e.to_string().contains(RECORD_TOO_LONG) => {
            Err(DecodeError::RecordTooLong {
                path: path.to_string(),
                line: e.line() as u64,
                limit: max_record_bytes,
            })
        }
        Err(e) if e.is_io() => {
            let line = e.line() as u64;
            // Converting back yields the reader's own io::Error (and what it carries).
            Err(read_error(path, std::io::Error::from(e), Some(line)))
        }
        Err(e) if e.is_eof() && e.line() == 1 && e.column() == 0 => Ok(()), // empty file
        Err(e) => Err(DecodeError::Corrupt {
            path: path.to_string(),
            line: Some(e.line() as u64),
            reason: format!("invalid JSON document at column {}: {e}", e.column()),
        }),
    }
}

struct Records<'a, 'b> {
    on_record: &'a mut dyn FnMut(Result<Value, String>, u64, usize) -> Result<(), DecodeError>,
    sink_error: &'b mut Option<DecodeError>,
    /// Bytes read since the current record began (reset before each array element).
    since_record: Rc<Cell<usize>>,
}

/// The message of the read error that stops an over-long record.
const RECORD_TOO_LONG: &str = "record longer than cloudFiles.maxRecordBytes";

/// Refuses to read more than `max` bytes for one record of a multi-line document, so a
/// huge element cannot exhaust memory before it is parsed.
struct RecordLimit<'r> {
    inner: &'r mut dyn std::io::BufRead,
    since_record: Rc<Cell<usize>>,
    max: usize,
}

impl std::io::Read for RecordLimit<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.since_record.get() > self.max {
            return Err(std::io::Error::other(RECORD_TOO_LONG));
        }
        let n = self.inner.read(buf)?;
        self.since_record.set(self.since_record.get() + n);
        Ok(n)
    }
}

impl Records<'_, '_> {
    fn deliver<E: serde::de::Error>(&mut self, v: Value) -> Result<(), E> {
        let rec = match v {
            Value::Object(_) => Ok(v),
            other => Err(other.to_string()),
        };
        (self.on_record)(rec, 1, 0).map_err(|e| {
            *self.sink_error = Some(e);
            E::custom("stopped")
        })
    }
}

impl<'de> DeserializeSeed<'de> for Records<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Records<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object or an array of objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        loop {
            self.since_record.set(0);
            let Some(v) = seq.next_element::<Value>()? else {
                return Ok(());
            };
            self.deliver(v)?;
        }
    }

    fn visit_map<A: MapAccess<'de>>(mut self, map: A) -> Result<(), A::Error> {
        let v: Value =
            serde::Deserialize::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        self.deliver(v)
    }

    fn visit_bool<E: serde::de::Error>(mut self, v: bool) -> Result<(), E> {
        self.deliver(Value::Bool(v))
    }
    fn visit_i64<E: serde::de::Error>(mut self, v: i64) -> Result<(), E> {
        self.deliver(Value::from(v))
    }
    fn visit_u64<E: serde::de::Error>(mut self, v: u64) -> Result<(), E> {
        self.deliver(Value::from(v))
    }
    fn visit_f64<E: serde::de::Error>(mut self, v: f64) -> Result<(), E> {
        self.deliver(Value::from(v))
    }
    fn visit_str<E: serde::de::Error>(mut self, v: &str) -> Result<(), E> {
        self.deliver(Value::String(v.to_string()))
    }
    fn visit_unit<E: serde::de::Error>(mut self) -> Result<(), E> {
        // A document that is just `null` is not a record: kept raw, like a `null` line.
        self.deliver(Value::Null)
    }
}

/// Observes every record of the file.
pub fn infer(
    file: &SourceFile,
    opts: &DecodeOptions,
    typed: bool,
    inferrer: &mut SchemaInferrer,
) -> Result<u64, DecodeError> {
    let infer_opts = opts.infer_options(typed);
    if !opts.multi_line {
        // Each line parsed once into a borrowing value and observed, as decoding does.
        let path = file.meta.path.as_str();
        let mut reader = open(&file.local_path, path, opts.max_decompressed_bytes)?;
        let before = inferrer.records;
        for_each_line(
            &mut *reader,
            path,
            opts.max_record_bytes,
            opts.json.line_sep.as_deref(),
            &mut |line, _| {
                inferrer.add_json_text_with(line, opts.json.dialect, infer_opts);
                Ok(())
            },
        )?;
        return Ok(inferrer.records - before);
    }
    let mut records = 0u64;
    for_each_record(file, opts, &mut |rec, _, _| {
        if let Ok(v) = rec {
            inferrer.add_json(&v, infer_opts);
            records += 1;
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
    emit: &mut dyn FnMut(RecordBatch) -> bool,
) -> Result<FileStats, DecodeError> {
    let mut rows = RowBuilder::new(Arc::clone(layout), opts.ctx, Arc::clone(&file.meta));
    let mut stats = FileStats::default();
    let mut pending_bytes = 0usize;
    let path = file.meta.path.clone();
    let mut flush = |rows: &mut RowBuilder, stats: &mut FileStats| -> Result<(), DecodeError> {
        stats.rows += rows.len() as u64;
        stats.rescued_rows += rows.rescued_rows() as u64;
        if !emit(rows.finish()) {
            return Err(DecodeError::Cancelled { path: path.clone() });
        }
        Ok(())
    };
    let fail_fast = |line: u64| DecodeError::Malformed {
        path: file.meta.path.clone(),
        line,
        reason: "not a JSON object".into(),
    };
    if opts.multi_line {
        for_each_record(file, opts, &mut |rec, line, bytes| {
            match rec {
                Ok(Value::Object(obj)) => {
                    let entries: Vec<_> = obj
                        .iter()
                        .map(|(k, v)| {
                            (
                                std::borrow::Cow::Borrowed(k.as_str()),
                                JsonValue::from_value(v),
                            )
                        })
                        .collect();
                    rows.append_json_object(&entries);
                }
                Ok(other) => rows.append_corrupt(&other.to_string()),
                Err(_) if opts.fail_fast => return Err(fail_fast(line)),
                Err(raw) => rows.append_corrupt(&raw),
            }
            pending_bytes += bytes;
            if rows.len() >= BATCH_ROWS || pending_bytes >= BATCH_BYTES {
                pending_bytes = 0;
                flush(&mut rows, &mut stats)?;
            }
            Ok(())
        })?;
    } else {
        // The clean path: each line parsed into a borrowing value, straight into builders.
        let path = file.meta.path.as_str();
        let mut reader = open(&file.local_path, path, opts.max_decompressed_bytes)?;
        let mut stopped_early = false;
        let mut observed = opts.observe_types.map(|o| (SchemaInferrer::new(), o));
        let read = for_each_line(
            &mut *reader,
            path,
            opts.max_record_bytes,
            opts.json.line_sep.as_deref(),
            &mut |line, line_no| {
                // A very large record (read during this thread's turn, see
                // `LARGE_RECORD_BYTES`) is decoded and written as a batch of its own.
                let large = line.len() >= LARGE_RECORD_BYTES;
                if large && !rows.is_empty() {
                    pending_bytes = 0;
                    flush(&mut rows, &mut stats)?;
                }
                let parsed = JsonValue::parse_with(line, opts.json.dialect);
                if let (Some((inferrer, infer_opts)), Ok(v)) = (observed.as_mut(), &parsed) {
                    inferrer.add_jv(v, *infer_opts);
                }
                match parsed {
                    Ok(JsonValue::Object(entries)) => rows.append_json_object(&entries),
                    Ok(JsonValue::Array(items)) => {
                        for item in items {
                            match item {
                                JsonValue::Object(entries) => rows.append_json_object(&entries),
                                _ if opts.fail_fast => return Err(fail_fast(line_no)),
                                other => rows.append_corrupt(&other.to_string()),
                            }
                        }
                    }
                    Ok(_) | Err(_) if opts.fail_fast => return Err(fail_fast(line_no)),
                    Ok(_) | Err(_) => rows.append_corrupt(&String::from_utf8_lossy(line)),
                }
                if opts.stop_at_new_fields && rows.saw_new_fields() {
                    stopped_early = true;
                    return Err(DecodeError::Cancelled {
                        path: path.to_string(),
                    });
                }
                pending_bytes += line.len();
                if large || rows.len() >= BATCH_ROWS || pending_bytes >= BATCH_BYTES {
                    pending_bytes = 0;
                    flush(&mut rows, &mut stats)?;
                }
                Ok(())
            },
        );
        match read {
            Err(DecodeError::Cancelled { .. }) if stopped_early => {
                stats.unknown_names = rows.unknown_names().to_vec();
                stats.new_fields = true;
                return Ok(stats);
            }
            other => other?,
        }
        stats.observed = observed.map(|(inferrer, _)| inferrer);
    }
    if !rows.is_empty() {
        flush(&mut rows, &mut stats)?;
    }
    stats.dropped_values = rows.dropped_values();
    stats.unknown_names = rows.unknown_names().to_vec();
    stats.new_fields = rows.saw_new_fields();
    stats.rescue = rows.rescue_stats().clone();
    Ok(stats)
}
