//! JSON lines, and whole-file JSON (`multiLine=true`, a top-level array is one row per
//! element, streamed element by element).
//!
//! JSON lines: blank lines are skipped; a line that is not valid JSON, or a scalar, is a
//! malformed record (kept raw in the rescued data, or an error under FAILFAST); a line
//! holding an array yields one row per element, as Spark does. A multi-line document that
//! is not valid JSON is a corrupt file (error with the line), since no record boundary can
//! be trusted in it. Both are parsed with the stream's JSON dialect (`allowSingleQuotes`,
//! `allowNonNumericNumbers`, `allowComments`, `allowUnquotedFieldNames`); records of JSON
//! lines are split on `lineSep` when it is set.

use std::sync::Arc;

use arrow_array::RecordBatch;

use super::lines::{Lines, for_each_line};
use super::sink::{CarriedRows, RowSink};
use super::{
    DecodeError, DecodeOptions, FileStats, LARGE_RECORD_BYTES, SourceFile, large_record_turn, open,
    read_error,
};
use crate::parse::json::{JsonArena, JsonDialect, JsonValue};
use crate::record::TableLayout;
use crate::schema::infer::SchemaInferrer;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Receives a record of a multi-line document (an object, or the text of anything else),
/// its line and its size in bytes.
type OnRecord<'a> =
    dyn FnMut(Result<&JsonValue<'_>, String>, u64, usize) -> Result<(), DecodeError> + 'a;

/// Calls `on_record` with each record of a whole-file JSON document (`multiLine=true`): a
/// top-level array is one record per element, read one element at a time (each bounded by
/// `cloudFiles.maxRecordBytes`, so memory stays bounded whatever the file size); any other
/// document is one record. Elements are parsed with the stream's JSON dialect, as lines
/// are. A document that is not valid JSON is a corrupt file (error with the line), since no
/// record boundary can be trusted in it.
fn for_each_document_record(
    file: &SourceFile,
    opts: &DecodeOptions,
    on_record: &mut OnRecord<'_>,
) -> Result<(), DecodeError> {
    let path = file.meta.path.as_str();
    let mut reader = open(file, opts.max_decompressed_bytes)?;
    let mut doc = Document {
        reader: &mut *reader,
        path,
        line: 1,
        dialect: opts.json.dialect,
        max: opts.max_record_bytes,
        buf: Vec::new(),
        arena: JsonArena::new(),
        turn: None,
    };
    let head = doc.fill()?;
    if head.starts_with(BOM) {
        doc.reader.consume(BOM.len());
    }
    match doc.skip_space()? {
        None => Ok(()),
        Some(b'[') => {
            doc.reader.consume(1);
            if doc.skip_space()? == Some(b']') {
                doc.reader.consume(1);
            } else {
                loop {
                    let line = doc.line;
                    let end = doc.element()?;
                    doc.deliver(line, on_record)?;
                    match end {
                        Some(b',') => {}
                        Some(_) => break,
                        None => {
                            return Err(
                                doc.corrupt(doc.line, "the top-level array is never closed")
                            );
                        }
                    }
                }
            }
            match doc.skip_space()? {
                None => Ok(()),
                Some(_) => {
                    Err(doc.corrupt(doc.line, "trailing characters after the top-level array"))
                }
            }
        }
        Some(_) => {
            let line = doc.line;
            doc.rest()?;
            doc.deliver(line, on_record)
        }
    }
}

/// A multi-line JSON document being read record by record.
struct Document<'r> {
    reader: &'r mut dyn std::io::BufRead,
    path: &'r str,
    /// The line of the next byte.
    line: u64,
    dialect: JsonDialect,
    max: usize,
    /// The record being read.
    buf: Vec<u8>,
    /// Where the record's values are parsed into.
    arena: JsonArena,
    /// This thread's turn for a large record (see `LARGE_RECORD_BYTES`), taken as soon as
    /// the record being read grows that large and kept until it is handled.
    turn: Option<std::sync::MutexGuard<'static, ()>>,
}

/// The reader's buffered bytes (more read when it is empty); empty at the end.
fn fill<'b>(
    reader: &'b mut dyn std::io::BufRead,
    path: &str,
    line: u64,
) -> Result<&'b [u8], DecodeError> {
    reader
        .fill_buf()
        .map_err(|e| read_error(path, e, Some(line)))
}

impl Document<'_> {
    fn fill(&mut self) -> Result<&[u8], DecodeError> {
        fill(&mut *self.reader, self.path, self.line)
    }

    fn corrupt(&self, line: u64, reason: &str) -> DecodeError {
        DecodeError::Corrupt {
            path: self.path.to_string(),
            line: Some(line),
            reason: format!("invalid JSON document: {reason}"),
        }
    }

    fn too_long(&self, line: u64) -> DecodeError {
        DecodeError::RecordTooLong {
            path: self.path.to_string(),
            line,
            limit: self.max,
        }
    }

    /// Skips whitespace (and comments, when the dialect allows them) and returns the next
    /// byte without consuming it; `None` at the end.
    fn skip_space(&mut self) -> Result<Option<u8>, DecodeError> {
        loop {
            let chunk = self.fill()?;
            let Some(&b) = chunk.first() else {
                return Ok(None);
            };
            match b {
                b'\n' => {
                    self.line += 1;
                    self.reader.consume(1);
                }
                b' ' | b'\t' | b'\r' => self.reader.consume(1),
                b'/' if self.dialect.comments => {
                    let line = self.line;
                    self.reader.consume(1);
                    match self.fill()?.first() {
                        Some(b'/') => loop {
                            let chunk = self.fill()?;
                            if chunk.is_empty() {
                                break;
                            }
                            if let Some(i) = memchr::memchr(b'\n', chunk) {
                                self.reader.consume(i);
                                break;
                            }
                            let n = chunk.len();
                            self.reader.consume(n);
                        },
                        Some(b'*') => {
                            self.reader.consume(1);
                            let mut star = false;
                            loop {
                                let Some(&c) = self.fill()?.first() else {
                                    return Err(self.corrupt(line, "unterminated comment"));
                                };
                                self.reader.consume(1);
                                if c == b'\n' {
                                    self.line += 1;
                                }
                                if star && c == b'/' {
                                    break;
                                }
                                star = c == b'*';
                            }
                        }
                        _ => return Err(self.corrupt(line, "expected a value")),
                    }
                }
                other => return Ok(Some(other)),
            }
        }
    }

    /// Reads one element of the top-level array into `buf`, up to the `,` or `]` that ends
    /// it at depth 0 (consumed and returned; `None` at the end of the input).
    fn element(&mut self) -> Result<Option<u8>, DecodeError> {
        let start_line = self.line;
        self.buf.clear();
        let mut depth = 0usize;
        let mut string: Option<u8> = None;
        let mut escaped = false;
        // Comments: 1 = after a '/', 2 = in a line comment, 3 = in a block comment, 4 = in a
        // block comment after a '*'.
        let mut comment = 0u8;
        let (single_quotes, comments) = (self.dialect.single_quotes, self.dialect.comments);
        loop {
            let chunk = fill(&mut *self.reader, self.path, self.line)?;
            if chunk.is_empty() {
                return Ok(None);
            }
            let mut end = None;
            let mut used = chunk.len();
            for (i, &b) in chunk.iter().enumerate() {
                if b == b'\n' {
                    self.line += 1;
                }
                if let Some(q) = string {
                    if escaped {
                        escaped = false;
                    } else if b == b'\\' {
                        escaped = true;
                    } else if b == q {
                        string = None;
                    }
                    continue;
                }
                match comment {
                    2 => {
                        if b == b'\n' {
                            comment = 0;
                        }
                        continue;
                    }
                    3 | 4 => {
                        comment = if comment == 4 && b == b'/' {
                            0
                        } else if b == b'*' {
                            4
                        } else {
                            3
                        };
                        continue;
                    }
                    1 => {
                        comment = match b {
                            b'/' => 2,
                            b'*' => 3,
                            _ => 0,
                        };
                        if comment != 0 {
                            continue;
                        }
                    }
                    _ => {}
                }
                match b {
                    b'"' => string = Some(b'"'),
                    b'\'' if single_quotes => string = Some(b'\''),
                    b'[' | b'{' => depth += 1,
                    b']' if depth == 0 => {
                        end = Some(b']');
                        used = i;
                        break;
                    }
                    b',' if depth == 0 => {
                        end = Some(b',');
                        used = i;
                        break;
                    }
                    b']' | b'}' => depth = depth.saturating_sub(1),
                    b'/' if comments => comment = 1,
                    _ => {}
                }
            }
            if self.buf.len() + used > self.max {
                return Err(self.too_long(start_line));
            }
            self.buf.extend_from_slice(&chunk[..used]);
            if self.turn.is_none() && self.buf.len() >= LARGE_RECORD_BYTES {
                self.turn = Some(large_record_turn());
            }
            match end {
                Some(b) => {
                    self.reader.consume(used + 1);
                    return Ok(Some(b));
                }
                None => self.reader.consume(used),
            }
        }
    }

    /// Reads the rest of the input into `buf` (a document that is not an array).
    fn rest(&mut self) -> Result<(), DecodeError> {
        let start_line = self.line;
        self.buf.clear();
        loop {
            let chunk = fill(&mut *self.reader, self.path, self.line)?;
            if chunk.is_empty() {
                return Ok(());
            }
            if self.buf.len() + chunk.len() > self.max {
                return Err(self.too_long(start_line));
            }
            self.buf.extend_from_slice(chunk);
            let n = chunk.len();
            self.reader.consume(n);
            if self.turn.is_none() && self.buf.len() >= LARGE_RECORD_BYTES {
                self.turn = Some(large_record_turn());
            }
        }
    }

    /// Parses the record in `buf` (which starts on `line`) and hands it over; a record that
    /// is not JSON makes the file corrupt, at the line of the error.
    fn deliver(&mut self, line: u64, on_record: &mut OnRecord<'_>) -> Result<(), DecodeError> {
        let buf = std::mem::take(&mut self.buf);
        self.arena.reset();
        let parsed = JsonValue::parse_with(&self.arena, &buf, self.dialect);
        let result = match &parsed {
            Ok(v @ JsonValue::Object(_)) => on_record(Ok(v), line, buf.len()),
            Ok(other) => on_record(Err(other.to_string()), line, buf.len()),
            Err(e) => {
                let at = e.offset.min(buf.len());
                let error_line = line + memchr::memchr_iter(b'\n', &buf[..at]).count() as u64;
                Err(self.corrupt(error_line, e.reason))
            }
        };
        drop(parsed);
        self.buf = buf;
        // A large record's buffer and values are not kept past its turn.
        if self.buf.capacity() >= LARGE_RECORD_BYTES {
            self.buf = Vec::new();
            self.arena = JsonArena::new();
        }
        self.turn = None;
        result
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
        let mut reader = open(file, opts.max_decompressed_bytes)?;
        let before = inferrer.records;
        let mut arena = JsonArena::new();
        for_each_line(
            &mut *reader,
            path,
            opts.max_record_bytes,
            opts.json.line_sep.as_deref(),
            Lines::Records,
            &mut |line, _| {
                arena.reset();
                inferrer.add_json_text_with(&arena, line, opts.json.dialect, infer_opts);
                if line.len() >= LARGE_RECORD_BYTES {
                    // A large line's values are not kept for the lines after it.
                    arena = JsonArena::new();
                }
                Ok(())
            },
        )?;
        return Ok(inferrer.records - before);
    }
    let mut records = 0u64;
    for_each_document_record(file, opts, &mut |rec, _, _| {
        if let Ok(v) = rec {
            inferrer.add_jv(v, infer_opts);
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
    carry: Option<&mut CarriedRows>,
    emit: &mut dyn FnMut(RecordBatch) -> bool,
) -> Result<FileStats, DecodeError> {
    let mut sink = RowSink::new(file, opts, layout, carry, emit);
    let fail_fast = |line: u64| DecodeError::Malformed {
        path: file.meta.path.clone(),
        line,
        reason: "not a JSON object".into(),
    };
    if opts.multi_line {
        let read = for_each_document_record(file, opts, &mut |rec, line, bytes| {
            match rec {
                Ok(JsonValue::Object(entries)) => sink.rows.append_json_object(entries),
                // A `null` record (a change stream's tombstone) holds no value: no row.
                Ok(JsonValue::Null) => {}
                Ok(other) => sink.rows.append_corrupt(&other.to_string()),
                Err(_) if opts.fail_fast => return Err(fail_fast(line)),
                Err(raw) => sink.rows.append_corrupt(&raw),
            }
            sink.pushed(bytes, false)
        });
        return sink.finish(read);
    }
    // The clean path: each line parsed into a borrowing value, straight into builders.
    let path = file.meta.path.as_str();
    let mut reader = open(file, opts.max_decompressed_bytes)?;
    sink.observe_types();
    let mut arena = JsonArena::new();
    let read = for_each_line(
        &mut *reader,
        path,
        opts.max_record_bytes,
        opts.json.line_sep.as_deref(),
        Lines::Records,
        &mut |line, line_no| {
            let large = sink.large(line.len())?;
            arena.reset();
            let parsed = JsonValue::parse_with(&arena, line, opts.json.dialect);
            if let (Some((inferrer, infer_opts)), Ok(v)) = (sink.observed.as_mut(), &parsed) {
                inferrer.add_jv(v, *infer_opts);
            }
            let rows = &mut sink.rows;
            match parsed {
                Ok(JsonValue::Object(entries)) => rows.append_json_object(entries),
                Ok(JsonValue::Array(items)) => {
                    for item in items {
                        match item {
                            JsonValue::Object(entries) => rows.append_json_object(entries),
                            _ if opts.fail_fast => return Err(fail_fast(line_no)),
                            other => rows.append_corrupt(&other.to_string()),
                        }
                    }
                }
                // A `null` line (a Kafka or Debezium tombstone) holds no value: no
                // row, and nothing rescued.
                Ok(JsonValue::Null) => {}
                Ok(_) | Err(_) if opts.fail_fast => return Err(fail_fast(line_no)),
                Ok(_) | Err(_) => rows.append_corrupt(&String::from_utf8_lossy(line)),
            }
            if large {
                // Its values are not kept past its turn.
                arena = JsonArena::new();
            }
            sink.stop_at_new_fields()?;
            sink.pushed(line.len(), large)
        },
    );
    sink.finish(read)
}
