//! A plain log in a regular file, read at positions: the row source the parsing threads use
//! when each may read its own part of the file at once (see `scan::pipeline`).

use std::fs::File;
use std::io;
use std::sync::{Mutex, PoisonError};

use crate::log::limits::{Guard, LimitHit};

/// A block of whole lines some source read: the offset of its first byte, where its text
/// starts in the buffer and its length, and whether the input ended with it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Taken {
    pub start: u64,
    pub skip: usize,
    pub len: usize,
    pub eof: bool,
}

/// A regular file read in chunks at positions, by any thread, in any order: chunk `k` holds
/// the lines that start in `[base + k·size, base + (k+1)·size)`, read on to the end of the
/// last of them (a line starts at `base` and after each `\n`). So no thread waits while
/// another reads: on a VM whose page cache reads slowly, taking turns at one reader had kept
/// each of two threads waiting for a quarter of the pass.
pub(crate) struct Chunks<'f> {
    file: &'f dyn ReadAt,
    /// The offset of the first line after the header.
    base: u64,
    size: u64,
    /// The first chunk (by number) whose read failed, with the error.
    failed: Mutex<Option<(usize, io::Error)>>,
    /// The line-size guard: a longer line ends the input with a [`LimitHit`].
    max_line: u64,
}

/// What [`Chunks::read`] read: `buf[skip..skip + len]` holds the chunk's lines, and `buf`
/// starts at offset `at`; `eof`: the input ended in them (or failed: `error`).
struct ChunkRead {
    at: u64,
    skip: usize,
    len: usize,
    eof: bool,
    error: Option<io::Error>,
}

impl<'f> Chunks<'f> {
    /// The chunks of `file` after its header (which ends at `base`), `size` bytes each.
    pub(crate) fn new(file: &'f dyn ReadAt, base: u64, size: u64) -> Self {
        Chunks {
            file,
            base,
            size: size.max(1),
            failed: Mutex::new(None),
            max_line: crate::log::limits::max_line_bytes(),
        }
    }

    /// Chunk `index` into `buf`. A read error ends the input in the chunk it happened in,
    /// after the whole lines read before it.
    pub(crate) fn block(&self, index: usize, buf: &mut Vec<u8>) -> Taken {
        let from = self.base + index as u64 * self.size;
        let read = self.read(from, buf);
        if let Some(e) = read.error {
            let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
            if failed.as_ref().is_none_or(|(i, _)| index < *i) {
                *failed = Some((index, e));
            }
        }
        Taken {
            start: read.at + read.skip as u64,
            skip: read.skip,
            len: read.len,
            eof: read.eof,
        }
    }

    /// The chunk that starts at `from`.
    fn read(&self, from: u64, buf: &mut Vec<u8>) -> ChunkRead {
        // The byte before the chunk tells whether a line starts at its first byte.
        let at = if from == self.base { from } else { from - 1 };
        let want = (from + self.size - at) as usize;
        if buf.len() < want {
            buf.resize(want, 0);
        }
        let (mut got, mut error) = read_fully(self.file, &mut buf[..want], at);
        let first = if from == self.base {
            0
        } else {
            memchr::memchr(b'\n', &buf[..got]).map_or(got, |i| i + 1)
        };
        if first >= want.min(got) {
            // No line starts in the chunk: it lies inside one, or past the end.
            return ChunkRead {
                at,
                skip: first.min(got),
                len: 0,
                eof: got < want,
                error,
            };
        }
        if got == want {
            // The chunk's last line runs on to the first `\n` from the chunk's last byte: read
            // a page, then twice as much each time up to 64 KiB (most lines are short; a longer
            // read would only grow the buffer past the line).
            let mut search = want - 1;
            let mut more = 4096;
            let mut ended = false;
            // Where the line running past the chunk starts (for the line-size guard).
            let line_start =
                memchr::memrchr(b'\n', &buf[first..want]).map_or(first, |i| first + i + 1);
            loop {
                if let Some(i) = memchr::memchr(b'\n', &buf[search..got]) {
                    // The line ends before the end (or a failure, which a later chunk meets).
                    return ChunkRead {
                        at,
                        skip: first,
                        len: search + i + 1 - first,
                        eof: false,
                        error: None,
                    };
                }
                if ended {
                    break;
                }
                if (got - line_start) as u64 > self.max_line {
                    // A line past the guard: the chunk ends before it, and so does the input.
                    let e = LimitHit::new(
                        Guard::LineBytes,
                        self.max_line,
                        (got - line_start) as u64,
                        true,
                        format!("the line at byte {}", at + line_start as u64),
                    );
                    return ChunkRead {
                        at,
                        skip: first,
                        len: line_start - first,
                        eof: true,
                        error: Some(e.into_io()),
                    };
                }
                search = got;
                if buf.len() < got + more {
                    buf.resize(got + more, 0);
                }
                let (n, e) = read_fully(self.file, &mut buf[got..got + more], at + got as u64);
                got += n;
                error = e;
                ended = n < more;
                more = (more * 2).min(64 * 1024);
            }
        }
        // The input ended in the chunk or in the line that runs past it (a final piece without
        // `\n` is a torn line), or a read failed: then only the whole lines before it count.
        let len = match error {
            Some(_) => memchr::memrchr(b'\n', &buf[first..got]).map_or(0, |i| i + 1),
            None => got - first,
        };
        ChunkRead {
            at,
            skip: first,
            len,
            eof: true,
            error,
        }
    }

    /// The first failed read among chunks `..until` (a failure in a chunk past the end the
    /// fold reached does not count).
    pub(crate) fn failure_before(self, until: usize) -> Option<io::Error> {
        let failed = self
            .failed
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        failed.filter(|(index, _)| *index < until).map(|(_, e)| e)
    }
}

/// Reads at positions (a file; a stand-in in tests).
pub(crate) trait ReadAt: Sync {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

impl ReadAt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        read_at(self, buf, offset)
    }
}

/// Read `buf.len()` bytes at `offset`, or up to the end of the file or a read error: how many
/// were read, and the error.
fn read_fully(file: &dyn ReadAt, buf: &mut [u8], offset: u64) -> (usize, Option<io::Error>) {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}

#[cfg(unix)]
pub(crate) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(windows)]
pub(crate) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

#[cfg(not(any(unix, windows)))]
pub(crate) fn read_at(_: &File, _: &mut [u8], _: u64) -> io::Result<usize> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "positional reads are not supported on this platform",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes read at positions a few at a time, failing from `fail_at` on.
    struct Stand {
        bytes: Vec<u8>,
        step: usize,
        fail_at: Option<u64>,
    }

    impl ReadAt for Stand {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            if self.fail_at.is_some_and(|f| offset >= f) {
                return Err(io::Error::other("disk on fire"));
            }
            let end = self
                .fail_at
                .map_or(self.bytes.len(), |f| f as usize)
                .min(self.bytes.len());
            let from = (offset as usize).min(end);
            let n = buf.len().min(self.step).min(end - from);
            buf[..n].copy_from_slice(&self.bytes[from..from + n]);
            Ok(n)
        }
    }

    /// Each chunk's start, text and whether it ended the input.
    type Read = (u64, Vec<u8>, bool);

    /// Every chunk in order until one ends the input, and the error if a read failed.
    fn chunks(stand: &Stand, base: u64, size: u64) -> (Vec<Read>, Option<String>) {
        let chunks = Chunks::new(stand, base, size);
        let mut out = Vec::new();
        let mut buf = Vec::new();
        loop {
            let t = chunks.block(out.len(), &mut buf);
            out.push((t.start, buf[t.skip..t.skip + t.len].to_vec(), t.eof));
            if t.eof {
                break;
            }
        }
        let failed = chunks.failure_before(usize::MAX).map(|e| e.to_string());
        (out, failed)
    }

    #[test]
    fn chunks_hold_each_line_once_whatever_their_size() {
        let logs: [&[u8]; 5] = [
            b"head\na\nbb\nccc\n\n\ndddddddddddddddddddd\ne\n",
            b"head\na\nbb\nccc\ntorn",
            b"head\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            b"head\n",
            b"head\n\n",
        ];
        for log in logs {
            let base = 5;
            for size in [1, 2, 3, 4, 7, 16, 64, 4096] {
                for step in [1, 3, 1 << 20] {
                    let stand = Stand {
                        bytes: log.to_vec(),
                        step,
                        fail_at: None,
                    };
                    let (got, failed) = chunks(&stand, base, size);
                    assert_eq!(failed, None);
                    let what = format!("{:?} in chunks of {size}", String::from_utf8_lossy(log));
                    // The texts, in order, are the body, each starting where the last ended.
                    let mut at = base;
                    let mut body = Vec::new();
                    for (start, text, _) in got.iter().filter(|(_, t, _)| !t.is_empty()) {
                        assert_eq!(*start, at, "{what}");
                        at = start + text.len() as u64;
                        body.extend_from_slice(text);
                        // Whole lines only, but for a torn final piece.
                        if !text.is_empty() && !text.ends_with(b"\n") {
                            assert!(at == log.len() as u64, "{what}");
                        }
                    }
                    assert_eq!(body, &log[base as usize..], "{what}");
                    // Only the last chunk ends the input, and a chunk ends where the next
                    // chunk's range starts (or runs on through the line that crosses it).
                    assert!(got.iter().rev().skip(1).all(|(_, _, eof)| !eof), "{what}");
                }
            }
        }
    }

    #[test]
    fn a_failed_chunk_ends_the_input_after_its_whole_lines() {
        let log = b"head\naaaa\nbbbbbbbbbbbbbbbbbbbb\ncc\ndd\n".to_vec();
        for fail_at in 5..log.len() as u64 {
            for size in [1, 4, 8, 64] {
                let stand = Stand {
                    bytes: log.clone(),
                    step: 3,
                    fail_at: Some(fail_at),
                };
                let (got, failed) = chunks(&stand, 5, size);
                let what = format!("failing at {fail_at}, chunks of {size}");
                assert_eq!(failed.as_deref(), Some("disk on fire"), "{what}");
                let body: Vec<u8> = got.iter().flat_map(|(_, t, _)| t.clone()).collect();
                // The whole lines that end before the failing offset, no more.
                let whole = log[..fail_at as usize]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                assert_eq!(body, &log[5..whole.max(5)], "{what}");
                assert!(
                    got.last().unwrap().2,
                    "{what}: the failing chunk ends the input"
                );
            }
        }
    }
}
