//! Bounded line reading over a decompressed file: each line (or `lineSep` record) handed
//! over with its number, none longer than `cloudFiles.maxRecordBytes`, a large one read
//! during this thread's turn (see `LARGE_RECORD_BYTES`).

use std::io::{self, BufRead};

use super::input::READ_BUFFER;
use super::{DecodeError, LARGE_RECORD_BYTES, large_record_turn, read_error};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// What a reader makes of a file's lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lines {
    /// Records (JSON lines): blank lines skipped, a leading UTF-8 BOM removed.
    Records,
    /// Text: every line as it is, blank ones too (Spark's text source).
    Text,
}

impl Lines {
    fn skips(self, line: &[u8]) -> bool {
        self == Lines::Records && line.iter().all(u8::is_ascii_whitespace)
    }
}

/// Receives a line and its number.
pub(crate) type OnLine<'a> = dyn FnMut(&[u8], u64) -> Result<(), DecodeError> + 'a;

/// Calls `on_line` with each line of a file (`\r` before the newline removed; with
/// [`Lines::Records`] blank lines skipped and a leading BOM removed) and its 1-based number;
/// an over-long line is an error naming the file and line.
pub(crate) fn for_each_line(
    reader: &mut dyn std::io::BufRead,
    path: &str,
    max_record_bytes: usize,
    line_sep: Option<&[u8]>,
    lines: Lines,
    on_line: &mut OnLine<'_>,
) -> Result<(), DecodeError> {
    if let Some(sep) = line_sep {
        return for_each_separated(reader, path, max_record_bytes, sep, lines, on_line);
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
            if lines == Lines::Records && line_no == 1 && line.starts_with(BOM) {
                line = &line[BOM.len()..];
            }
            if !lines.skips(line) {
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
                if lines == Lines::Records && line_no == 1 && buf.starts_with(BOM) {
                    &buf[BOM.len()..]
                } else {
                    &buf[..]
                }
            }
        };
        if !lines.skips(line) {
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
    lines: Lines,
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
        let record = if lines == Lines::Records && record_no == 1 {
            record.strip_prefix(BOM).unwrap_or(record)
        } else {
            record
        };
        if lines.skips(record) {
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

/// Reads one line into `buf` (without the newline or a trailing `\r`), never holding more
/// than `max` bytes; calls `on_large` once when the line reaches [`LARGE_RECORD_BYTES`].
/// Returns `None` at end of input, `Some(false)` for an over-long line (skipped up to its
/// newline).
fn read_line_bounded(
    reader: &mut dyn BufRead,
    buf: &mut Vec<u8>,
    max: usize,
    on_large: &mut dyn FnMut(),
) -> io::Result<Option<bool>> {
    buf.clear();
    let mut large = false;
    let mut too_long = false;
    let mut saw_any = false;
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            if !saw_any {
                return Ok(None);
            }
            break;
        }
        saw_any = true;
        let (chunk, done) = match memchr::memchr(b'\n', available) {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        if !too_long {
            if buf.len() + chunk.len() > max {
                too_long = true;
                buf.clear();
                buf.shrink_to(READ_BUFFER);
            } else {
                if !large && buf.len() + chunk.len() >= LARGE_RECORD_BYTES {
                    large = true;
                    on_large();
                }
                buf.extend_from_slice(chunk);
            }
        }
        let used = done.unwrap_or(available.len());
        reader.consume(used);
        if done.is_some() {
            break;
        }
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Some(!too_long))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn bounded_lines_split_and_flag_over_long_lines() {
        let mut r = Cursor::new(b"ab\r\n0123456789\nlast".to_vec());
        let mut buf = Vec::new();
        assert_eq!(
            read_line_bounded(&mut r, &mut buf, 5, &mut || {}).unwrap(),
            Some(true)
        );
        assert_eq!(buf, b"ab");
        assert_eq!(
            read_line_bounded(&mut r, &mut buf, 5, &mut || {}).unwrap(),
            Some(false)
        );
        assert_eq!(
            read_line_bounded(&mut r, &mut buf, 5, &mut || {}).unwrap(),
            Some(true)
        );
        assert_eq!(buf, b"last");
        assert_eq!(
            read_line_bounded(&mut r, &mut buf, 5, &mut || {}).unwrap(),
            None
        );
    }
}
