//! The input side of decoding: opening a listed file (gzip, zstd, bzip2 and lz4 frames
//! sniffed by magic bytes, all members of a concatenated file, the decompressed size
//! capped), the errors a read maps to, the temporary copy of a remote object, and the
//! check that a local file did not change while it was read.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flate2::read::MultiGzDecoder;

use super::{DecodeError, SourceFile};

pub(super) const READ_BUFFER: usize = 1 << 20;
/// The smallest read buffer a file gets, whatever its listed size.
const MIN_READ_BUFFER: usize = 8 << 10;

/// A compression the line formats read, told by its magic bytes whatever the file's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Gzip,
    Zstd,
    Bzip2,
    Lz4,
}

impl Compression {
    /// All of them, in the order they are sniffed.
    pub const ALL: [Compression; 4] = [
        Compression::Gzip,
        Compression::Zstd,
        Compression::Bzip2,
        Compression::Lz4,
    ];

    /// The compression whose magic bytes start `head`.
    pub fn sniff(head: &[u8]) -> Option<Compression> {
        Compression::ALL.into_iter().find(|c| c.starts(head))
    }

    fn starts(self, head: &[u8]) -> bool {
        match self {
            Compression::Gzip => head.starts_with(&[0x1f, 0x8b]),
            // A zstd frame (RFC 8878 section 3.1.1).
            Compression::Zstd => head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]),
            // "BZh", the block size digit, then a block's magic (the digits of pi) or the
            // end of stream's (of sqrt(pi)): "BZh9" alone could start a line of text.
            Compression::Bzip2 => {
                head.starts_with(b"BZh")
                    && head.get(3).is_some_and(|d| (b'1'..=b'9').contains(d))
                    && head.get(4..10).is_some_and(|m| {
                        m == [0x31, 0x41, 0x59, 0x26, 0x53, 0x59]
                            || m == [0x17, 0x72, 0x45, 0x38, 0x50, 0x90]
                    })
            }
            // An LZ4 frame (the .lz4 file format), not the raw block format.
            Compression::Lz4 => head.starts_with(&[0x04, 0x22, 0x4d, 0x18]),
        }
    }

    /// The file name suffix this compression is known by.
    pub fn suffix(self) -> &'static str {
        match self {
            Compression::Gzip => ".gz",
            Compression::Zstd => ".zst",
            Compression::Bzip2 => ".bz2",
            Compression::Lz4 => ".lz4",
        }
    }

    /// The compression a file name's suffix claims (any case).
    pub fn of_name(name: &str) -> Option<Compression> {
        let lower = name.to_ascii_lowercase();
        Compression::ALL
            .into_iter()
            .find(|c| lower.ends_with(c.suffix()))
    }

    fn name(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Bzip2 => "bzip2",
            Compression::Lz4 => "lz4",
        }
    }

    /// A streaming decoder over `reader` (every member or frame of a concatenated file).
    fn decoder(self, reader: BufReader<File>) -> io::Result<Box<dyn Read + Send>> {
        Ok(match self {
            Compression::Gzip => Box::new(MultiGzDecoder::new(reader)),
            Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(reader)?),
            Compression::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(reader)),
            Compression::Lz4 => Box::new(Lz4Frames(lz4_flex::frame::FrameDecoder::new(reader))),
        })
    }
}

/// lz4_flex's frame decoder reads one frame after another, but its read returns 0 at the
/// end of each: read on while input is left, so a concatenated file is read whole.
struct Lz4Frames(lz4_flex::frame::FrameDecoder<BufReader<File>>);

impl Read for Lz4Frames {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let n = self.0.read(buf)?;
            if n > 0 || buf.is_empty() || self.0.get_mut().fill_buf()?.is_empty() {
                return Ok(n);
            }
        }
    }
}

/// Why a listed file cannot be opened or read: gone since it was listed, or unreadable.
pub(crate) fn io_error(display: &str, source: io::Error) -> DecodeError {
    match source.kind() {
        io::ErrorKind::NotFound => DecodeError::Missing {
            path: display.to_string(),
        },
        _ => DecodeError::Io {
            path: display.to_string(),
            source,
        },
    }
}

/// Opens a listed file as it is, for the formats that read by offsets (Parquet, Avro, ORC,
/// binaryFile).
pub(crate) fn open_listed(file: &SourceFile) -> Result<File, DecodeError> {
    File::open(&file.local_path).map_err(|e| io_error(file.meta.path.as_str(), e))
}

/// Opens a file for streaming, decompressing gzip, zstd, bzip2 or lz4 (detected by their
/// magic bytes) up to `max_decompressed` bytes.
pub fn open(
    file: &SourceFile,
    max_decompressed: u64,
) -> Result<Box<dyn BufRead + Send>, DecodeError> {
    let display = file.meta.path.as_str();
    let reader = File::open(&file.local_path).map_err(|e| io_error(display, e))?;
    // A file smaller than the read buffer gets a buffer of its listed size (a byte more, to
    // see its end in one read): 20,000 small files each took and freed a 1 MiB buffer,
    // and the allocator's work on it showed in their profile. One that grew since it was
    // listed is still read whole, in more reads.
    let capacity = usize::try_from(file.meta.size.saturating_add(1))
        .unwrap_or(READ_BUFFER)
        .clamp(MIN_READ_BUFFER, READ_BUFFER);
    let mut reader = BufReader::with_capacity(capacity, reader);
    let head = reader.fill_buf().map_err(|source| DecodeError::Io {
        path: display.to_string(),
        source,
    })?;
    if let Some(compression) = Compression::sniff(head) {
        let inner = compression
            .decoder(reader)
            .map_err(|e| read_error(display, e, None))?;
        return Ok(Box::new(BufReader::with_capacity(
            READ_BUFFER,
            Capped {
                inner,
                compression,
                left: max_decompressed,
                limit: max_decompressed,
            },
        )));
    }
    if let Some(named) = Compression::of_name(display)
        && !head.is_empty()
    {
        return Err(DecodeError::Corrupt {
            path: display.to_string(),
            line: None,
            reason: format!("named {} but not {} data", named.suffix(), named.name()),
        });
    }
    Ok(Box::new(reader))
}

/// A decompressing reader that stops with an error past its limit: memory is bounded by
/// streaming anyway, but a bomb would otherwise run for hours and fill the table. A
/// decoder's error that is not the disk's says the data is corrupt, with the compression.
struct Capped {
    inner: Box<dyn Read + Send>,
    compression: Compression,
    left: u64,
    limit: u64,
}

/// Marks the error [`Capped`] raises, so it maps to [`DecodeError::DecompressedTooLarge`].
#[derive(Debug)]
pub(crate) struct OverLimit(pub(crate) u64);

impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "decompressed data exceeds {} bytes", self.0)
    }
}

impl std::error::Error for OverLimit {}

impl Read for Capped {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf).map_err(|e| {
            if e.raw_os_error().is_some() || e.kind() == io::ErrorKind::Interrupted {
                e
            } else {
                let kind = match e.kind() {
                    io::ErrorKind::UnexpectedEof => io::ErrorKind::UnexpectedEof,
                    _ => io::ErrorKind::InvalidData,
                };
                io::Error::new(kind, format!("{} data: {e}", self.compression.name()))
            }
        })?;
        let n64 = n as u64;
        if n64 > self.left {
            return Err(io::Error::other(OverLimit(self.limit)));
        }
        self.left -= n64;
        Ok(n)
    }
}

/// Maps a read error in the middle of a file (a broken gzip stream, a vanished disk).
pub(crate) fn read_error(path: &str, e: io::Error, line: Option<u64>) -> DecodeError {
    if let Some(OverLimit(limit)) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<OverLimit>())
    {
        return DecodeError::DecompressedTooLarge {
            path: path.to_string(),
            limit: *limit,
        };
    }
    match e.kind() {
        io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput | io::ErrorKind::UnexpectedEof => {
            DecodeError::Corrupt {
                path: path.to_string(),
                line,
                reason: e.to_string(),
            }
        }
        _ => DecodeError::Io {
            path: path.to_string(),
            source: e,
        },
    }
}

/// A fetched copy of a remote object, removed when dropped.
pub(super) struct TempCopy(PathBuf);

impl Drop for TempCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// For a remote object, streams it to a temporary file (memory stays bounded) and returns a
/// `SourceFile` pointing there; a local file is returned as it is.
pub(super) fn materialize(
    file: &SourceFile,
) -> Result<(SourceFile, Option<TempCopy>), DecodeError> {
    let Some(remote) = &file.remote else {
        return Ok((file.clone(), None));
    };
    let display = file.meta.path.clone();
    let io = |e: std::io::Error| DecodeError::Io {
        path: display.clone(),
        source: e,
    };
    let handle = remote.handle.clone().ok_or_else(|| {
        io(std::io::Error::other(
            "no async runtime to fetch the object with",
        ))
    })?;
    let dir = remote
        .fetch_dir
        .join(format!("autoloader-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(io)?;
    let path = dir.join(uuid::Uuid::new_v4().to_string());
    let copy = TempCopy(path.clone());
    handle.block_on(async {
        use futures::StreamExt;
        use object_store::ObjectStoreExt;
        use tokio::io::AsyncWriteExt;
        let got = remote
            .store
            .get(&remote.location)
            .await
            .map_err(|e| match e {
                object_store::Error::NotFound { .. } => DecodeError::Missing {
                    path: display.clone(),
                },
                other => io(std::io::Error::other(other.to_string())),
            })?;
        let mut stream = got.into_stream();
        let mut out = tokio::fs::File::create(&path).await.map_err(io)?;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| io(std::io::Error::other(e.to_string())))?;
            out.write_all(&chunk).await.map_err(io)?;
        }
        out.flush().await.map_err(io)
    })?;
    let local = SourceFile {
        local_path: path,
        remote: None,
        meta: Arc::clone(&file.meta),
    };
    Ok((local, Some(copy)))
}

/// Whether a local file still has the size and modification time it was planned with.
pub fn unchanged(path: &Path, size: u64, mtime_ms: i64) -> bool {
    let Ok(m) = std::fs::metadata(path) else {
        return false;
    };
    let modified_ms = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    m.len() == size && modified_ms == mtime_ms
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::lines::{Lines, for_each_line};
    use crate::record::FileMeta;

    #[test]
    fn a_file_that_grew_since_it_was_listed_is_read_whole_through_its_smaller_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("grew.json");
        // Listed at 10 bytes, now 200 lines and one line longer than the 8 KiB buffer
        // its listed size gives it.
        let long = "x".repeat(3 * MIN_READ_BUFFER);
        let mut text = String::new();
        for i in 0..200 {
            text.push_str(&format!("line {i}\n"));
        }
        text.push_str(&long);
        text.push_str("\nlast");
        std::fs::write(&path, &text).unwrap();
        let file = SourceFile {
            local_path: path,
            remote: None,
            meta: Arc::new(FileMeta {
                path: "file:///landing/grew.json".into(),
                name: "grew.json".into(),
                size: 10,
                mtime_ms: 0,
                partition_values: Vec::new(),
                stamp: None,
            }),
        };
        let mut reader = open(&file, u64::MAX).unwrap();
        let mut lines = Vec::new();
        for_each_line(
            &mut *reader,
            "grew.json",
            usize::MAX,
            None,
            Lines::Text,
            &mut |line, _| {
                lines.push(String::from_utf8(line.to_vec()).unwrap());
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(lines.len(), 202);
        assert_eq!(lines[199], "line 199");
        assert_eq!(lines[200], long);
        assert_eq!(lines[201], "last");
    }

    #[test]
    fn compressions_are_told_by_magic_bytes() {
        assert_eq!(Compression::sniff(b"\x1f\x8b\x08"), Some(Compression::Gzip));
        assert_eq!(
            Compression::sniff(b"\x28\xb5\x2f\xfd\x00"),
            Some(Compression::Zstd)
        );
        assert_eq!(
            Compression::sniff(b"BZh91AY&SY\x00"),
            Some(Compression::Bzip2)
        );
        assert_eq!(
            Compression::sniff(b"BZh9\x17\x72\x45\x38\x50\x90\x00\x00\x00\x00"),
            Some(Compression::Bzip2),
            "an empty stream"
        );
        assert_eq!(Compression::sniff(b"BZh0"), None, "no block size 0");
        assert_eq!(Compression::sniff(b"BZh9 text that starts so"), None);
        assert_eq!(
            Compression::sniff(b"\x04\x22\x4d\x18\x64"),
            Some(Compression::Lz4)
        );
        assert_eq!(Compression::sniff(b"{\"id\": 1}"), None);
        assert_eq!(Compression::sniff(b""), None);
        assert_eq!(Compression::of_name("a.JSON.ZST"), Some(Compression::Zstd));
        assert_eq!(Compression::of_name("a.json"), None);
    }
}
