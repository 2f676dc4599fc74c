//! CSV: each file is read by its own header (columns matched by name, as Auto Loader does
//! when inferring), with `sep`, `quote`, `escape`, `nullValue`, CRLF and a UTF-8 BOM.
//!
//! A cell equal to `nullValue` (empty by default) is null. A row with fewer fields than the
//! header has nulls for the rest; a row with more keeps its raw text under
//! `_corrupt_record`, so the extra values are not lost.

use std::sync::Arc;

use arrow_array::RecordBatch;

use super::sink::{CarriedRows, RowSink};
use super::{
    DecodeError, DecodeOptions, FileStats, LARGE_RECORD_BYTES, SourceFile, large_record_turn, open,
    read_error,
};
use crate::options::CsvSettings;
use crate::record::TableLayout;
use crate::schema::infer::{InferOptions, Inferred, SchemaInferrer};

const BOM: &str = "\u{feff}";

/// The input with its last byte that is not a line break remembered: a quoted field that
/// reaches the end of the file without that byte being the quote was never closed. It
/// also takes this thread's turn for a large record (see `LARGE_RECORD_BYTES`) as soon as
/// the record being read grows that large, before more of it is held.
struct TailWatch {
    inner: Box<dyn std::io::BufRead + Send>,
    last: u8,
    /// The input has ended (a read returned nothing).
    ended: bool,
    /// Bytes read so far, and where the record being read starts.
    read: u64,
    record_start: u64,
    turn: Option<std::sync::MutexGuard<'static, ()>>,
    /// With `emptyValue` in use: the bytes read since `raw_base`, from which the raw text of
    /// the record just read is taken (the parsed record does not say which fields were
    /// quoted).
    capture: bool,
    raw: Vec<u8>,
    raw_base: u64,
}

impl std::io::Read for TailWatch {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.capture {
            self.raw.extend_from_slice(&buf[..n]);
        }
        if self.turn.is_none() && self.read - self.record_start >= LARGE_RECORD_BYTES as u64 {
            self.turn = Some(large_record_turn());
        }
        self.ended |= n == 0 && !buf.is_empty();
        if let Some(b) = buf[..n].iter().rev().find(|b| !matches!(b, b'\n' | b'\r')) {
            self.last = *b;
        }
        Ok(n)
    }
}

/// A CSV reader over one file.
struct CsvReader {
    inner: ::csv::Reader<TailWatch>,
    quote: u8,
    /// Separator, quote, escape, comment and line separator (`None`: `\n`, `\r\n` or `\r`).
    dialect: Dialect,
    /// The indices of the last record's fields that were written `""` (with `emptyValue`).
    quoted_empty: Vec<usize>,
}

fn reader(
    file: &SourceFile,
    csv: &CsvSettings,
    max_decompressed: u64,
) -> Result<CsvReader, DecodeError> {
    let input = open(file, max_decompressed)?;
    let inner = ::csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(csv.sep)
        .quote(csv.quote)
        .escape(csv.escape)
        .double_quote(true)
        .comment(csv.comment)
        .terminator(match csv.line_sep {
            Some(b) => ::csv::Terminator::Any(b),
            None => ::csv::Terminator::CRLF,
        })
        .from_reader(TailWatch {
            inner: input,
            last: 0,
            ended: false,
            read: 0,
            record_start: 0,
            turn: None,
            capture: csv.empty_value != csv.null_value,
            raw: Vec::new(),
            raw_base: 0,
        });
    Ok(CsvReader {
        inner,
        quote: csv.quote,
        dialect: Dialect {
            sep: csv.sep,
            quote: csv.quote,
            escape: csv.escape,
            comment: csv.comment,
            line_sep: csv.line_sep,
        },
        quoted_empty: Vec::new(),
    })
}

/// Reads the next record; `Ok(false)` at end of file. A large record's turn lasts until
/// the next record is read, so the record is handled within it. A record longer than
/// `cloudFiles.maxRecordBytes` is an error naming the file and line, and so is a quote that
/// is never closed (it would swallow the rest of the file into one cell, unflagged).
fn next_record(
    r: &mut CsvReader,
    record: &mut ::csv::ByteRecord,
    path: &str,
    max_record_bytes: usize,
) -> Result<bool, DecodeError> {
    let start = r.inner.position().byte();
    let input = r.inner.get_mut();
    input.turn = None;
    input.record_start = start;
    if input.capture {
        let done = usize::try_from(start.saturating_sub(input.raw_base))
            .unwrap_or(usize::MAX)
            .min(input.raw.len());
        input.raw.drain(..done);
        input.raw_base += done as u64;
    }
    let more = r.inner.read_byte_record(record).map_err(|e| {
        let line = e.position().map(|p| p.line());
        match e.into_kind() {
            ::csv::ErrorKind::Io(io) => read_error(path, io, line),
            other => DecodeError::Corrupt {
                path: path.to_string(),
                line,
                reason: format!("{other:?}"),
            },
        }
    })?;
    let line = || record.position().map_or(0, ::csv::Position::line);
    r.quoted_empty.clear();
    let watch = r.inner.get_ref();
    if more && watch.capture && record.iter().any(<[u8]>::is_empty) {
        let from = record.position().map_or(start, ::csv::Position::byte);
        let to = r.inner.position().byte();
        let at = |o: u64| usize::try_from(o.saturating_sub(watch.raw_base)).unwrap_or(usize::MAX);
        if let Some(raw) = watch.raw.get(at(from)..at(to).min(watch.raw.len())) {
            r.quoted_empty = quoted_empty_fields(raw, r.dialect);
        }
    }
    if record.as_slice().len() > max_record_bytes {
        return Err(DecodeError::RecordTooLong {
            path: path.to_string(),
            line: line(),
            limit: max_record_bytes,
        });
    }
    // The record that ends the file, whose last field spans lines, while the file does not
    // end with the quote: its quote opened and ran to the end.
    if more
        && r.inner.get_ref().ended
        && record
            .iter()
            .next_back()
            .is_some_and(|f| f.contains(&b'\n') || f.contains(&b'\r'))
        && r.inner.get_ref().last != r.quote
    {
        return Err(DecodeError::Corrupt {
            path: path.to_string(),
            line: Some(line()),
            reason: "a quoted field opened on this line is never closed (it runs to the end \
                     of the file)"
                .into(),
        });
    }
    Ok(more)
}

/// What `quoted_empty_fields` needs to split a record's raw text as the CSV reader does.
#[derive(Clone, Copy)]
struct Dialect {
    sep: u8,
    quote: u8,
    escape: Option<u8>,
    comment: Option<u8>,
    line_sep: Option<u8>,
}

impl Dialect {
    fn ends_line(&self, b: u8) -> bool {
        match self.line_sep {
            Some(t) => b == t,
            None => b == b'\n' || b == b'\r',
        }
    }
}

/// The indices of the fields written as a quoted empty string (`""`) in a record's raw
/// text: only these read as `emptyValue`; an unquoted empty field is null. The raw text
/// starts where the reader started looking for the record, so the blank lines and
/// `comment` lines it skipped before the record are skipped here too.
fn quoted_empty_fields(raw: &[u8], d: Dialect) -> Vec<usize> {
    let Dialect {
        sep, quote, escape, ..
    } = d;
    let mut i = 0;
    while i < raw.len() {
        if d.ends_line(raw[i]) {
            i += 1;
        } else if Some(raw[i]) == d.comment {
            while i < raw.len() && !d.ends_line(raw[i]) {
                i += 1;
            }
        } else {
            break;
        }
    }
    let mut out = Vec::new();
    let mut field = 0usize;
    let mut field_start = i;
    let mut in_quotes = false;
    let mut close = |field: usize, text: &[u8]| {
        if text.len() == 2 && text[0] == quote && text[1] == quote {
            out.push(field);
        }
    };
    while i < raw.len() {
        let b = raw[i];
        if in_quotes {
            if Some(b) == escape && escape != Some(quote) {
                i += 2;
                continue;
            }
            if b == quote {
                in_quotes = false;
            }
        } else if b == quote {
            in_quotes = true;
        } else if b == sep {
            close(field, &raw[field_start..i]);
            field += 1;
            field_start = i + 1;
        } else if d.ends_line(b) {
            break;
        }
        i += 1;
    }
    close(field, &raw[field_start..i.min(raw.len())]);
    out
}

/// A data cell as a stream reads it: trimmed as `ignoreLeadingWhiteSpace` /
/// `ignoreTrailingWhiteSpace` say; `None` (null) when empty or `nullValue`; a quoted empty
/// field is `emptyValue`. Shared by inference and decoding, so both see the same values.
/// (As in Spark, a quoted empty field with `nullValue` set to something else reads as an
/// empty string; inference learns nothing from it, as from any empty value.)
fn cell_value<'t>(text: &'t str, quoted_empty: bool, csv: &'t CsvSettings) -> Option<&'t str> {
    let text = csv.trim(text);
    if text.is_empty() && quoted_empty {
        let empty = csv.empty_value.as_str();
        return (empty != csv.null_value).then_some(empty);
    }
    (!text.is_empty() && text != csv.null_value).then_some(text)
}

fn cell_text(raw: &[u8]) -> std::borrow::Cow<'_, str> {
    // The validating fast path first: lossy decoding walks the bytes chunk by chunk.
    match std::str::from_utf8(raw) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(raw),
    }
}

/// The text of bytes that are not valid UTF-8, with each bad byte written `\xNN`, so the
/// original bytes can be recovered from the rescued data.
fn escape_invalid_utf8(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len() + 8);
    for chunk in raw.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

/// Column names of a header record: the BOM stripped, blanks named `_c<i>`. Names keep
/// their spaces, as in Spark, unless `ignoreLeadingWhiteSpace` / `ignoreTrailingWhiteSpace`
/// say otherwise.
fn header_names(record: &::csv::ByteRecord, csv: &CsvSettings) -> Vec<String> {
    record
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            let text = cell_text(raw);
            let name = csv
                .trim(text.strip_prefix(BOM).unwrap_or(&text))
                .to_string();
            if name.is_empty() {
                format!("_c{i}")
            } else {
                name
            }
        })
        .collect()
}

fn positional_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("_c{i}")).collect()
}

/// Observes the header and every cell of the file.
pub fn infer(
    file: &SourceFile,
    opts: &DecodeOptions,
    typed: bool,
    inferrer: &mut SchemaInferrer,
) -> Result<u64, DecodeError> {
    let path = file.meta.path.as_str();
    let mut r = reader(file, &opts.csv, opts.max_decompressed_bytes)?;
    let mut record = ::csv::ByteRecord::new();
    let mut columns: Option<Vec<usize>> = None;
    let infer_opts = opts.infer_options(typed);
    let mut rows = 0u64;
    while next_record(&mut r, &mut record, path, opts.max_record_bytes)? {
        if columns.is_none() {
            let names = if opts.csv.header {
                header_names(&record, &opts.csv)
            } else {
                positional_names(record.len())
            };
            columns = Some(names.iter().map(|n| inferrer.add_column(n)).collect());
            if opts.csv.header {
                continue;
            }
        }
        let columns = columns.as_ref().expect("set above");
        rows += 1;
        observe_record(
            inferrer,
            columns,
            &record,
            &r.quoted_empty,
            &opts.csv,
            infer_opts,
        );
    }
    Ok(rows)
}

/// Observes the cells of one data record into the inferrer's columns (`columns[i]` is
/// the inferrer's index of the record's `i`-th header), skipping nulls and columns already
/// STRING (which absorbs everything). Shared by inference and one-pass decoding, so both
/// observe alike.
fn observe_record(
    inferrer: &mut SchemaInferrer,
    columns: &[usize],
    record: &::csv::ByteRecord,
    quoted_empty: &[usize],
    csv: &CsvSettings,
    infer_opts: InferOptions,
) {
    for (i, (&column, raw)) in columns.iter().zip(record.iter()).enumerate() {
        if inferrer.is_string_at(column) {
            continue;
        }
        let text = cell_text(raw);
        let Some(text) =
            cell_value(&text, quoted_empty.contains(&i), csv).filter(|t| !t.is_empty())
        else {
            continue;
        };
        inferrer.add_typed_at(column, Inferred::of_csv(text, infer_opts));
    }
}

/// Decodes the file into batches.
pub fn decode(
    file: &SourceFile,
    opts: &DecodeOptions,
    layout: &Arc<TableLayout>,
    carry: Option<&mut CarriedRows>,
    emit: &mut dyn FnMut(RecordBatch) -> bool,
) -> Result<FileStats, DecodeError> {
    let path = file.meta.path.as_str();
    let mut r = reader(file, &opts.csv, opts.max_decompressed_bytes)?;
    let mut sink = RowSink::new(file, opts, layout, carry, emit);
    let mut record = ::csv::ByteRecord::new();
    let mut mapping: Option<(Vec<String>, Vec<Option<usize>>)> = None;
    let mut invalid: Vec<usize> = Vec::new();
    let sep = char::from(opts.csv.sep).to_string();
    let mut unknown: Vec<String> = Vec::new();
    // Types observed as `infer` observes them (one-pass inference of a first batch).
    sink.observe_types();
    let mut observed_columns: Vec<usize> = Vec::new();
    while next_record(&mut r, &mut record, path, opts.max_record_bytes)? {
        // A very large record (read during this thread's turn, see `TailWatch`) is
        // decoded and written as a batch of its own.
        let large = sink.large(record.as_slice().len())?;
        if mapping.is_none() {
            let names = if opts.csv.header {
                header_names(&record, &opts.csv)
            } else {
                positional_names(record.len())
            };
            if let Some((inferrer, _)) = sink.observed.as_mut() {
                observed_columns = names.iter().map(|n| inferrer.add_column(n)).collect();
            }
            let columns: Vec<String> = sink.rows.column_names().map(str::to_string).collect();
            // Each column takes one header: a repeated header name (`id,name,id`) is not
            // read into the column again; its values are rescued under that name.
            let mut used = vec![false; columns.len()];
            let targets: Vec<Option<usize>> = names
                .iter()
                .map(|h| {
                    let t = columns.iter().position(|c| c == h).or_else(|| {
                        (!opts.ctx.case_sensitive)
                            .then(|| columns.iter().position(|c| c.eq_ignore_ascii_case(h)))
                            .flatten()
                    })?;
                    (!std::mem::replace(&mut used[t], true)).then_some(t)
                })
                .collect();
            for (name, t) in names.iter().zip(&targets) {
                if t.is_none() && !columns.iter().any(|c| c.eq_ignore_ascii_case(name)) {
                    unknown.push(name.clone());
                }
            }
            mapping = Some((names, targets));
            if opts.csv.header {
                continue;
            }
        }
        let (names, targets) = mapping.as_ref().expect("set above");
        if let Some((inferrer, infer_opts)) = sink.observed.as_mut() {
            inferrer.records += 1;
            observe_record(
                inferrer,
                &observed_columns,
                &record,
                &r.quoted_empty,
                &opts.csv,
                *infer_opts,
            );
        }
        invalid.clear();
        // Cells borrow from the record (one vector per record, not a string per cell).
        let mut cells: Vec<Option<std::borrow::Cow<'_, str>>> = Vec::with_capacity(names.len());
        for (i, raw) in record.iter().take(names.len()).enumerate() {
            let text = match std::str::from_utf8(raw) {
                Ok(t) => std::borrow::Cow::Borrowed(t),
                Err(_) => {
                    invalid.push(i);
                    std::borrow::Cow::Owned(escape_invalid_utf8(raw))
                }
            };
            let quoted_empty = r.quoted_empty.contains(&i);
            cells.push(match text {
                std::borrow::Cow::Borrowed(t) => {
                    cell_value(t, quoted_empty, &opts.csv).map(std::borrow::Cow::Borrowed)
                }
                std::borrow::Cow::Owned(t) => cell_value(&t, quoted_empty, &opts.csv)
                    .map(|v| std::borrow::Cow::Owned(v.to_string())),
            });
        }
        let extra = (record.len() > names.len()).then(|| {
            if opts.fail_fast {
                return Err(DecodeError::Malformed {
                    path: path.to_string(),
                    line: record.position().map_or(0, ::csv::Position::line),
                    reason: format!(
                        "{} fields where the header has {}",
                        record.len(),
                        names.len()
                    ),
                });
            }
            Ok(record
                .iter()
                .map(|raw| cell_text(raw).into_owned())
                .collect::<Vec<_>>()
                .join(&sep))
        });
        let extra = extra.transpose()?;
        let borrowed: Vec<Option<&str>> = cells.iter().map(Option::as_deref).collect();
        sink.rows
            .append_text_record(names, targets, &borrowed, &invalid, extra);
        sink.pushed(record.as_slice().len(), large)?;
        if large {
            // A large record's buffer is not kept past its turn.
            record = ::csv::ByteRecord::new();
        }
    }
    let mut stats = sink.finish(Ok(()))?;
    // The new names are the header's: a name the schema lacks is new even where no row
    // has a value under it.
    stats.new_fields = !unknown.is_empty();
    stats.unknown_names = unknown;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dialect(sep: u8, escape: Option<u8>) -> Dialect {
        Dialect {
            sep,
            quote: b'"',
            escape,
            comment: None,
            line_sep: None,
        }
    }

    #[test]
    fn quoted_empty_fields_are_found_in_the_raw_record() {
        let d = dialect(b',', Some(b'\\'));
        assert_eq!(quoted_empty_fields(b"1,\"\",,\"\"\n", d), vec![1, 3]);
        assert_eq!(
            quoted_empty_fields(b"\"a,\"\"\",\"\",\"x\\\"\",\"\"\r\n", d),
            vec![1, 3]
        );
        assert_eq!(quoted_empty_fields(b"\"\"\"\",\"\"", d), vec![1]);
        assert_eq!(quoted_empty_fields(b"a;\"\"", dialect(b';', None)), vec![1]);
        assert!(quoted_empty_fields(b"a,b,\n", d).is_empty());
    }

    /// The raw text starts where the reader began looking for the record: blank lines and
    /// `comment` lines it skipped come first, and a `lineSep` ends the record.
    #[test]
    fn quoted_empty_fields_skip_what_the_reader_skipped() {
        let d = dialect(b';', None);
        assert_eq!(quoted_empty_fields(b"\n\r\n1;\"\"\n", d), vec![1]);
        let commented = Dialect {
            comment: Some(b'#'),
            ..d
        };
        assert_eq!(
            quoted_empty_fields(b"# a;\"\"\n#\n1;\"\"\n", commented),
            vec![1]
        );
        let piped = Dialect {
            line_sep: Some(b'|'),
            ..d
        };
        assert_eq!(quoted_empty_fields(b"1;\"\"|", piped), vec![1]);
        assert_eq!(quoted_empty_fields(b"|1;\"\"|2;x", piped), vec![1]);
        assert_eq!(quoted_empty_fields(b"\"\";a\nb;\"\"|", piped), vec![0, 2]);
    }
}
