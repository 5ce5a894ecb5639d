//! Bytes in: a file, a session directory or standard input, read as physical lines with
//! their numbers and byte offsets through one reused buffer.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::log::limits::{Guard, LimitHit};

pub(crate) mod chunks;
pub mod zstd;

pub use zstd::{Framing, ZstdEnd};

/// The zstd frame magic, little-endian `0xFD2FB528`.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// Reads this size keep the buffer in cache (see benches/README.md, "Design measurements").
const READ_BUFFER: usize = 128 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot open {path}: {source}")]
    Open { path: String, source: io::Error },
    #[error(
        "{path} is a directory without a DSH session log (looked for session.jsonl[.zstd|.zst] and session.vN.jsonl[.zstd|.zst])"
    )]
    NoGeneration { path: String },
    #[error("cannot start the zstd decoder for {path}: {source}")]
    Zstd { path: String, source: io::Error },
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: io::Error },
    /// A session directory's newest generation is not a regular file: never opened, since
    /// opening a FIFO waits for a writer and DSH writes regular files only.
    #[error(
        "{path} is {kind}, not a regular file: a session directory holds its log in a regular file; dshs did not open it (name the file itself to read it like standard input)"
    )]
    NotRegular { path: String, kind: &'static str },
}

impl InputError {
    /// Every input error is a usage or I/O failure (exit 2); nothing is refused as
    /// unsupported before reading (zstd is read transparently).
    pub fn is_unsupported(&self) -> bool {
        false
    }
}

/// Where a log comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Stdin,
    Path(PathBuf),
}

impl Source {
    pub fn from_arg(arg: &str) -> Source {
        if arg == "-" {
            Source::Stdin
        } else {
            Source::Path(PathBuf::from(arg))
        }
    }

    pub fn display(&self) -> String {
        match self {
            Source::Stdin => "-".to_owned(),
            Source::Path(p) => p.display().to_string(),
        }
    }
}

/// What kind of file a path names (`stat`, which follows symbolic links and never blocks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Regular,
    Directory,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    Other,
}

impl FileKind {
    pub fn of(path: &Path) -> io::Result<FileKind> {
        let t = std::fs::metadata(path)?.file_type();
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if t.is_fifo() {
                return Ok(FileKind::Fifo);
            }
            if t.is_socket() {
                return Ok(FileKind::Socket);
            }
            if t.is_char_device() {
                return Ok(FileKind::CharDevice);
            }
            if t.is_block_device() {
                return Ok(FileKind::BlockDevice);
            }
        }
        Ok(if t.is_file() {
            FileKind::Regular
        } else if t.is_dir() {
            FileKind::Directory
        } else {
            FileKind::Other
        })
    }

    /// `a FIFO`, `a socket`, … (for messages).
    pub fn describe(self) -> &'static str {
        match self {
            FileKind::Regular => "a regular file",
            FileKind::Directory => "a directory",
            FileKind::Fifo => "a FIFO (named pipe)",
            FileKind::Socket => "a socket",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Other => "a special file",
        }
    }

    /// Fed by another process as it is read.
    pub fn is_pipe(self) -> bool {
        matches!(self, FileKind::Fifo | FileKind::Socket)
    }
}

/// An opened log: a buffered plaintext reader plus the file it came from (if any).
pub struct Opened {
    /// The name findings are reported under (what the user typed).
    pub name: String,
    /// The file actually read (a session directory resolves to its newest generation).
    pub path: Option<PathBuf>,
    pub reader: Box<dyn BufRead + Send>,
    /// For a zstd log: what the decoder learns about its frames (§3.3).
    pub framing: Option<Framing>,
    /// Older canonical generations beside the one read (a session directory, §2.2).
    pub older: Vec<PathBuf>,
    /// The file `reader` reads, when it is a plain log in a regular file, read as it is: the
    /// pass may read it at positions from several threads instead (see
    /// [`crate::log::scan::Positional`]). Whoever puts another reader in front of `reader`
    /// (to watch or copy what is read) must clear it.
    pub file: Option<Arc<File>>,
    /// The bytes come through a pipe or socket from another process (standard input, or a
    /// FIFO named on the command line).
    pub pipe: bool,
}

impl Opened {
    /// The frame holding plaintext offset `byte` (zstd logs only).
    pub fn frame_of(&self, byte: u64) -> Option<u64> {
        self.framing.as_ref().and_then(|f| f.frame_of(byte))
    }
}

/// Open a log for one streaming pass. A zstd log (recognised by its magic bytes, whatever
/// its name) is decoded transparently.
///
/// A path that is not a regular file (a FIFO, `/dev/stdin`, `<(…)`) is read like standard
/// input: one pass, no path (nothing opens it again, and no name checks apply). A session
/// directory whose newest generation is not a regular file is refused without opening it.
pub fn open(source: &Source) -> Result<Opened, InputError> {
    match source {
        Source::Stdin => {
            let reader = BufReader::with_capacity(READ_BUFFER, io::stdin());
            let (reader, framing) = decode(reader, "-")?;
            Ok(Opened {
                name: "-".to_owned(),
                path: None,
                reader,
                framing,
                older: Vec::new(),
                file: None,
                pipe: FileKind::of(Path::new("/dev/stdin")).is_ok_and(FileKind::is_pipe),
            })
        }
        Source::Path(p) => {
            let (file_path, older) = resolve_generations(p)?;
            let name = p.display().to_string();
            let kind = FileKind::of(&file_path).unwrap_or(FileKind::Regular);
            if kind != FileKind::Regular && file_path != *p {
                return Err(InputError::NotRegular {
                    path: file_path.display().to_string(),
                    kind: kind.describe(),
                });
            }
            let mut opened = if kind == FileKind::Regular {
                open_file(&file_path, name)?
            } else {
                open_stream(&file_path, name, kind)?
            };
            opened.older = older;
            Ok(opened)
        }
    }
}

/// A file read like standard input: one pass, no path, no positions.
fn open_stream(file_path: &Path, name: String, kind: FileKind) -> Result<Opened, InputError> {
    let file = File::open(file_path).map_err(|source| InputError::Open {
        path: file_path.display().to_string(),
        source,
    })?;
    let reader = BufReader::with_capacity(READ_BUFFER, file);
    let (reader, framing) = decode(reader, &name)?;
    Ok(Opened {
        name,
        path: None,
        reader,
        framing,
        older: Vec::new(),
        file: None,
        pipe: kind.is_pipe(),
    })
}

/// Open one file (no directory resolution) under the reported `name`.
pub fn open_file(file_path: &Path, name: String) -> Result<Opened, InputError> {
    let file = File::open(file_path).map_err(|source| InputError::Open {
        path: file_path.display().to_string(),
        source,
    })?;
    // A second handle on the same open file, for positional reads (which leave the shared
    // offset alone); only a regular file has positions (not a FIFO named on the command line).
    let positional = file
        .metadata()
        .is_ok_and(|m| m.is_file())
        .then(|| file.try_clone().ok())
        .flatten();
    let reader = BufReader::with_capacity(READ_BUFFER, file);
    let (reader, framing) = decode(reader, &name)?;
    Ok(Opened {
        name,
        path: Some(file_path.to_path_buf()),
        reader,
        file: positional.filter(|_| framing.is_none()).map(Arc::new),
        framing,
        older: Vec::new(),
        pipe: false,
    })
}

/// Does the stream start with the zstd magic?
pub fn is_zstd<R: BufRead>(reader: &mut R, name: &str) -> Result<bool, InputError> {
    let head = reader.fill_buf().map_err(|source| InputError::Read {
        path: name.to_owned(),
        source,
    })?;
    // A short first read (a pipe) may hold fewer than 4 bytes: a file this short that starts
    // like the magic is still treated as zstd (and reported as a torn frame).
    Ok(!head.is_empty() && ZSTD_MAGIC.starts_with(&head[..head.len().min(4)]))
}

/// Wrap `reader` in a decoder when it holds zstd (§3.3; the magic decides, not the name).
pub(crate) fn decode<R: BufRead + Send + 'static>(
    mut reader: R,
    name: &str,
) -> Result<(Box<dyn BufRead + Send>, Option<Framing>), InputError> {
    if !is_zstd(&mut reader, name)? {
        return Ok((Box::new(reader), None));
    }
    let (z, framing) = zstd::ZstdReader::new(reader).map_err(|source| InputError::Zstd {
        path: name.to_owned(),
        source,
    })?;
    Ok((
        Box::new(BufReader::with_capacity(READ_BUFFER, z)),
        Some(framing),
    ))
}

/// A session directory resolves to its newest canonical generation file (§2.2); anything
/// else is taken as the log itself.
pub fn resolve(path: &Path) -> Result<PathBuf, InputError> {
    resolve_generations(path).map(|(p, _)| p)
}

/// The compression suffixes DSH writes (`.zstd`) or dshs accepts (`.zst`).
fn split_compression(name: &str) -> (&str, bool) {
    for suffix in [".zstd", ".zst"] {
        if let Some(base) = name.strip_suffix(suffix) {
            return (base, true);
        }
    }
    (name, false)
}

/// The generation a canonical generation file name (§2.2) stands for, plain or compressed.
pub fn generation_of_name(name: &str) -> Option<u64> {
    canonical_generation(split_compression(name).0)
}

/// Whether `name` is a canonical generation file name (§2.2), plain or compressed.
pub fn is_generation_name(name: &str) -> bool {
    canonical_generation(split_compression(name).0).is_some()
}

/// The canonical generation files of a session directory, highest generation first (for
/// one generation, a plain file before a compressed one). Empty when there are none.
pub fn generations(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let (base, compressed) = split_compression(name);
        let Some(generation) = canonical_generation(base) else {
            continue;
        };
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        found.push((generation, compressed, entry.path()));
    }
    // Highest generation wins; DSH never mixes encodings, but prefer plain if it did.
    found.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    Ok(found.into_iter().map(|(g, _, p)| (g, p)).collect())
}

/// A session directory → (its newest generation, the older generation files); a file →
/// itself.
pub fn resolve_generations(path: &Path) -> Result<(PathBuf, Vec<PathBuf>), InputError> {
    if !path.is_dir() {
        return Ok((path.to_path_buf(), Vec::new()));
    }
    let mut found = generations(path)
        .map_err(|source| InputError::Open {
            path: path.display().to_string(),
            source,
        })?
        .into_iter()
        .map(|(_, p)| p);
    let newest = found.next().ok_or_else(|| InputError::NoGeneration {
        path: path.display().to_string(),
    })?;
    Ok((newest, found.collect()))
}

/// Does `dir` hold at least one canonical generation file (is it a session directory)?
pub fn is_session_dir(dir: &Path) -> bool {
    dir.is_dir() && generations(dir).is_ok_and(|g| !g.is_empty())
}

/// How deep below a storage root session directories are looked for (the layout of §2.1
/// puts them two levels down: `<root>/<project>/<session>`).
const TREE_DEPTH: usize = 4;

/// The session directories under a storage root (§2.1), sorted by path. A directory that is
/// itself a session is returned alone. Symbolic links to directories are not followed.
pub fn find_sessions(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    if is_session_dir(root) {
        found.push(root.to_path_buf());
        return Ok(found);
    }
    walk_sessions(root, TREE_DEPTH, &mut found, true)?;
    found.sort();
    Ok(found)
}

fn walk_sessions(dir: &Path, depth: usize, found: &mut Vec<PathBuf>, top: bool) -> io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        // A subdirectory that cannot be listed is skipped; the root itself must be readable.
        Err(e) if !top => {
            let _ = e;
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        if is_session_dir(&path) {
            found.push(path);
        } else if depth > 1 {
            walk_sessions(&path, depth - 1, found, false)?;
        }
    }
    Ok(())
}

/// Does `name` look like a JSONL session log (`*.jsonl`, plain or compressed)?
fn is_log_name(name: &str) -> bool {
    split_compression(name).0.ends_with(".jsonl")
}

/// How deep below a root [`stray_logs`] looks for log files.
const STRAY_DEPTH: usize = 8;

/// The log files below `root` (`*.jsonl`, `*.jsonl.zst[d]`) that a walk of the storage root
/// does not read: every one that is not a generation file of one of `sessions` (the session
/// directories [`find_sessions`] found), sorted by path. So a user who points a command at a
/// directory of loose logs is told what was left out instead of seeing it silently skipped.
/// Symbolic links are not followed; unreadable subdirectories are passed over.
pub fn stray_logs(root: &Path, sessions: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    collect_strays(root, STRAY_DEPTH, sessions, &mut found);
    found.sort();
    found
}

fn collect_strays(dir: &Path, depth: usize, sessions: &[PathBuf], found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let in_session = sessions.iter().any(|s| s == dir);
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() {
            if depth > 1 {
                collect_strays(&path, depth - 1, sessions, found);
            }
            continue;
        }
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if is_log_name(name) && !(in_session && is_generation_name(name)) {
            found.push(path);
        }
    }
}

/// `session.jsonl` → 0, `session.vN.jsonl` → N (N ≥ 1, no leading zeros), else None.
pub fn canonical_generation(base: &str) -> Option<u64> {
    if base == "session.jsonl" {
        return Some(0);
    }
    let n = base.strip_prefix("session.v")?.strip_suffix(".jsonl")?;
    if n.is_empty() || n.starts_with('0') || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// One physical line.
#[derive(Debug)]
pub struct Line<'a> {
    /// 1-based line number.
    pub no: u64,
    /// Byte offset of the line's first byte.
    pub byte: u64,
    /// The line without its terminating `\n`.
    pub bytes: &'a [u8],
    /// False for a final fragment without `\n`: a torn line.
    pub terminated: bool,
}

/// Splits a byte stream into physical lines through one reused buffer. Each line is consumed
/// from the reader when it is returned (a reader that watches `consume`, like `show`'s tap,
/// sees the line being folded).
pub struct LineReader<R> {
    reader: R,
    buf: Vec<u8>,
    next_no: u64,
    offset: u64,
    /// [`read_block`](Self::read_block) has taken what the reader buffered and reads
    /// straight from it now.
    direct: bool,
    /// The line-size guard ([`crate::log::limits`]): a longer line stops the reading.
    max_line: u64,
}

/// What [`LineReader::read_block`] read.
pub(crate) struct Block {
    /// The block is the buffer's first `len` bytes.
    pub len: usize,
    /// The input ended (or failed): this is the last block.
    pub eof: bool,
    /// The read error that ended the input after this block's whole lines.
    pub error: Option<io::Error>,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(reader: R) -> Self {
        LineReader {
            reader,
            buf: Vec::with_capacity(64 * 1024),
            next_no: 1,
            offset: 0,
            direct: false,
            max_line: crate::log::limits::max_line_bytes(),
        }
    }

    /// Lines longer than `bytes` stop the reading (a [`LimitHit`]).
    pub fn set_max_line(&mut self, bytes: u64) {
        self.max_line = bytes;
    }

    /// The line starting at `byte` is past the line-size guard: at least `len` bytes.
    fn too_long(&self, line: Option<u64>, byte: u64, len: u64) -> io::Error {
        let at = match line {
            Some(no) => format!("line {no} (byte {byte})"),
            None => format!("the line at byte {byte}"),
        };
        LimitHit::new(Guard::LineBytes, self.max_line, len, true, at).into_io()
    }

    /// The byte offset just past everything returned so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The input was read up to `offset` some other way (at positions, see
    /// [`crate::log::scan::Positional`]): [`offset`](Self::offset) reports it from now on.
    pub(crate) fn read_past(&mut self, offset: u64) {
        self.offset = offset;
        self.buf.clear();
    }

    /// The number of the next line [`next_line`](Self::next_line) would return.
    pub(crate) fn next_line_no(&self) -> u64 {
        self.next_no
    }

    /// Read the next block of whole lines into `buf[..len]`: at least `min` bytes (a longer
    /// line is taken whole) unless the input ends first, where the last piece may lack its
    /// `\n`. The bytes read past the block's last line end are kept for the next call.
    ///
    /// Reads go straight from the reader into `buf` (a `BufReader` passes reads this large
    /// through without copying them into its own buffer). `buf` is zero-filled only where
    /// it grows and is never shrunk, so a buffer used again costs no second write pass.
    /// Line numbers are not counted: the caller numbers the lines of the blocks and calls no
    /// `next_line` afterwards. On an error, the whole lines read before it are returned with
    /// it.
    pub(crate) fn read_block(&mut self, min: usize, buf: &mut Vec<u8>) -> Block {
        fn grow(buf: &mut Vec<u8>, n: usize) {
            if buf.len() < n {
                buf.resize(n, 0);
            }
        }
        if !self.direct {
            // It holds the last line `next_line` returned.
            self.buf.clear();
        }
        // What the previous block read past its last line end comes first.
        let mut len = self.buf.len();
        grow(buf, len);
        buf[..len].copy_from_slice(&self.buf);
        self.buf.clear();
        if !self.direct {
            // Once: what the reader has buffered already (the header was read through it).
            self.direct = true;
            match self.reader.fill_buf() {
                Ok(available) => {
                    let n = available.len();
                    grow(buf, len + n);
                    buf[len..len + n].copy_from_slice(available);
                    self.reader.consume(n);
                    len += n;
                }
                Err(e) => return self.cut(buf, len, Some(e)),
            }
        }
        // No `\n` lies in `buf[..searched]` past those already looked at.
        let mut searched = 0;
        loop {
            if searched == 0
                && len as u64 > self.max_line
                && memchr::memchr(b'\n', &buf[..len]).is_none()
            {
                // One line, and already past the guard: stop before reading the rest of it.
                let e = self.too_long(None, self.offset, len as u64);
                return self.cut(buf, 0, Some(e));
            }
            if len >= min {
                if let Some(last) = memchr::memrchr(b'\n', &buf[searched..len]) {
                    let end = searched + last + 1;
                    self.buf.extend_from_slice(&buf[end..len]);
                    self.offset += end as u64;
                    return Block {
                        len: end,
                        eof: false,
                        error: None,
                    };
                }
                searched = len;
            }
            // Up to `min` bytes; past a line longer than that, a read buffer's worth at a
            // time (no more than `min`, but at least 4 KiB).
            let want = len + (min - len.min(min)).max(READ_BUFFER.min(min.max(4096)));
            grow(buf, want);
            match self.reader.read(&mut buf[len..want]) {
                Ok(0) => {
                    self.offset += len as u64;
                    return Block {
                        len,
                        eof: true,
                        error: None,
                    };
                }
                Ok(n) => len += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.cut(buf, len, Some(e)),
            }
        }
    }

    /// The whole lines of `buf[..len]`, ending the input with `error`.
    fn cut(&mut self, buf: &[u8], len: usize, error: Option<io::Error>) -> Block {
        let keep = memchr::memrchr(b'\n', &buf[..len]).map_or(0, |i| i + 1);
        self.offset += keep as u64;
        Block {
            len: keep,
            eof: true,
            error,
        }
    }

    pub fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        self.buf.clear();
        // A huge line grows the buffer once; give the memory back afterwards.
        if self.buf.capacity() > 16 * 1024 * 1024 {
            self.buf.shrink_to(64 * 1024);
        }
        // The common case: the whole line is in the reader's buffer (one SIMD search, one
        // copy); a line that straddles a refill is gathered by `read_until`.
        let available = self.reader.fill_buf()?;
        if let Some(end) = memchr::memchr(b'\n', available) {
            self.buf.extend_from_slice(&available[..=end]);
            self.reader.consume(end + 1);
            return Ok(Some(self.line(end + 1)));
        }
        // Gathered a piece at a time, so a line past the guard stops where it passes it.
        loop {
            let available = self.reader.fill_buf()?;
            if available.is_empty() {
                break;
            }
            let (take, done) = match memchr::memchr(b'\n', available) {
                Some(end) => (end + 1, true),
                None => (available.len(), false),
            };
            self.buf.extend_from_slice(&available[..take]);
            self.reader.consume(take);
            let len = self.buf.len() - usize::from(done);
            if len as u64 > self.max_line {
                return Err(self.too_long(Some(self.next_no), self.offset, len as u64));
            }
            if done {
                break;
            }
        }
        if self.buf.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.line(self.buf.len())))
    }

    /// The line of `n` bytes now in `buf`.
    fn line(&mut self, n: usize) -> Line<'_> {
        let byte = self.offset;
        self.offset += n as u64;
        let no = self.next_no;
        self.next_no += 1;
        let terminated = self.buf.last() == Some(&b'\n');
        let bytes = if terminated {
            &self.buf[..n - 1]
        } else {
            &self.buf[..]
        };
        Line {
            no,
            byte,
            bytes,
            terminated,
        }
    }
}

/// Copy standard input to a temporary file so commands that fetch lines by offset can
/// read it twice.
pub fn spool_stdin() -> io::Result<tempfile::NamedTempFile> {
    spool(io::stdin().lock())
}

/// Copy a stream that can be read only once (standard input, a FIFO) to a temporary file,
/// removed when dropped.
pub fn spool(mut from: impl Read) -> io::Result<tempfile::NamedTempFile> {
    let mut tmp = tempfile::NamedTempFile::new()?;
    io::copy(&mut from, tmp.as_file_mut())?;
    tmp.as_file_mut().flush()?;
    Ok(tmp)
}

/// Open a spooled copy of standard input (see [`spool_stdin`]) for one pass. The log keeps
/// the name `-` and no path: checks that look at the file name or its directory do not
/// apply to standard input.
pub fn open_spooled(copy: &Path) -> Result<Opened, InputError> {
    let mut opened = open_file(copy, "-".to_owned())?;
    opened.path = None;
    Ok(opened)
}

/// Copies what is consumed to a file (the plaintext of a zstd log, for random access).
struct Tee<R> {
    inner: R,
    copy: io::BufWriter<File>,
    failed: Option<io::Error>,
}

impl<R: BufRead> Read for Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        read_through_buffer(self, buf)
    }
}

/// `Read::read` for a reader whose `BufRead` side does the work (a tee, a tap, a store):
/// copy what `fill_buf` has and consume it, so both ways of reading see the same bytes.
#[inline]
pub fn read_through_buffer(r: &mut impl BufRead, out: &mut [u8]) -> io::Result<usize> {
    let available = r.fill_buf()?;
    let n = available.len().min(out.len());
    out[..n].copy_from_slice(&available[..n]);
    r.consume(n);
    Ok(n)
}

impl<R: BufRead> BufRead for Tee<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let buf = self.inner.fill_buf()?;
        if buf.is_empty() {
            self.copy.flush()?;
        }
        Ok(buf)
    }

    fn consume(&mut self, amt: usize) {
        if let Ok(buf) = self.inner.fill_buf() {
            let n = amt.min(buf.len());
            if let Err(e) = self.copy.write_all(&buf[..n]) {
                self.failed.get_or_insert(e);
            }
        }
        self.inner.consume(amt);
    }
}

/// For a log that will be read by offset afterwards (`derive`, `surface` previews) but has
/// no plaintext file to read (a zstd log, standard input, a FIFO): copy the plaintext to a
/// temporary file (removed when dropped) while the one pass reads it. Plaintext offsets in
/// the scan are offsets into that copy. `None` for a plain log in a regular file (read the
/// file itself).
pub fn tee_plaintext(opened: &mut Opened) -> io::Result<Option<tempfile::NamedTempFile>> {
    if opened.framing.is_none() && opened.path.is_some() {
        return Ok(None);
    }
    let tmp = tempfile::NamedTempFile::new()?;
    let copy = io::BufWriter::with_capacity(READ_BUFFER, tmp.reopen()?);
    let inner = std::mem::replace(&mut opened.reader, Box::new(io::empty()));
    opened.file = None;
    opened.reader = Box::new(Tee {
        inner,
        copy,
        failed: None,
    });
    Ok(Some(tmp))
}

/// Random access to lines of a file by offset (for `derive`, `surface` previews).
///
/// Consecutive requests usually move forward through the file (the surface is mostly in
/// file order), so the fetcher remembers where it is and skips forward inside its buffer
/// instead of seeking (which would discard the buffer and re-read it for every line).
pub struct LineFetcher {
    file: BufReader<File>,
    buf: Vec<u8>,
    /// The file offset the reader stands at.
    at: u64,
    /// Bytes of the reader's buffer last returned in place, consumed at the next request.
    lent: usize,
}

impl LineFetcher {
    pub fn open(path: &Path) -> io::Result<Self> {
        Ok(LineFetcher {
            file: BufReader::with_capacity(READ_BUFFER, File::open(path)?),
            buf: Vec::new(),
            at: 0,
            lent: 0,
        })
    }

    fn go_to(&mut self, byte: u64) -> io::Result<()> {
        self.file.consume(std::mem::take(&mut self.lent));
        match byte.checked_sub(self.at).map(i64::try_from) {
            Some(Ok(0)) => {}
            // Forward: stays inside the buffer when the target is in it.
            Some(Ok(ahead)) => self.file.seek_relative(ahead)?,
            _ => {
                self.file.seek(SeekFrom::Start(byte))?;
            }
        }
        self.at = byte;
        Ok(())
    }

    /// The line starting at `byte`, without its `\n`.
    pub fn line_at(&mut self, byte: u64) -> io::Result<&[u8]> {
        self.go_to(byte)?;
        // A line inside the reader's buffer is returned from there, not copied.
        if self.file.buffer().is_empty() {
            self.file.fill_buf()?;
        }
        if let Some(end) = memchr::memchr(b'\n', self.file.buffer()) {
            self.lent = end + 1;
            self.at = byte + self.lent as u64;
            return Ok(&self.file.buffer()[..end]);
        }
        self.buf.clear();
        // A huge line grows the buffer once; give the memory back afterwards.
        if self.buf.capacity() > 16 * 1024 * 1024 {
            self.buf.shrink_to(64 * 1024);
        }
        let start = self.at;
        // On failure the position is unknown: seek next time.
        self.at = u64::MAX;
        let n = self.file.read_until(b'\n', &mut self.buf)?;
        self.at = start + n as u64;
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        }
        Ok(&self.buf)
    }

    /// `len` bytes starting at `byte`.
    pub fn bytes_at(&mut self, byte: u64, len: usize) -> io::Result<Vec<u8>> {
        self.go_to(byte)?;
        let mut out = vec![0; len];
        // On failure the position is unknown: seek next time.
        self.at = u64::MAX;
        self.file.read_exact(&mut out)?;
        self.at = byte + len as u64;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_carry_numbers_offsets_and_torn_flag() {
        let data = b"h\n{\"a\":1}\r\n\ntail";
        let mut r = LineReader::new(&data[..]);
        let mut got = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            got.push((l.no, l.byte, l.bytes.to_vec(), l.terminated));
        }
        assert_eq!(
            got,
            vec![
                (1, 0, b"h".to_vec(), true),
                (2, 2, b"{\"a\":1}\r".to_vec(), true),
                (3, 11, b"".to_vec(), true),
                (4, 12, b"tail".to_vec(), false),
            ]
        );
        assert_eq!(r.offset(), data.len() as u64);
    }

    #[test]
    fn fetcher_reads_lines_in_any_order() {
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        let lines: Vec<String> = (0..5000)
            .map(|i| format!("line {i} {}", "x".repeat(i % 97)))
            .collect();
        let mut offsets = Vec::new();
        let mut at = 0u64;
        for l in &lines {
            offsets.push(at);
            writeln!(tmp, "{l}").unwrap();
            at += l.len() as u64 + 1;
        }
        tmp.flush().unwrap();
        let mut f = LineFetcher::open(tmp.path()).unwrap();
        // Forward with gaps (skips inside and beyond the buffer), backwards, repeats.
        let order = [0, 1, 2, 10, 500, 4999, 3, 3, 4998, 0, 2500, 2501, 2499];
        for i in order {
            assert_eq!(
                f.line_at(offsets[i]).unwrap(),
                lines[i].as_bytes(),
                "line {i}"
            );
        }
        assert_eq!(f.bytes_at(offsets[7], 6).unwrap(), b"line 7");
        assert_eq!(f.line_at(offsets[8]).unwrap(), lines[8].as_bytes());
        // Every line in order, most lent from inside the buffer, some across its end.
        for (i, l) in lines.iter().enumerate() {
            assert_eq!(f.line_at(offsets[i]).unwrap(), l.as_bytes(), "line {i}");
        }
        assert_eq!(f.line_at(at).unwrap(), b"", "past the end");
    }

    #[cfg(unix)]
    #[test]
    fn a_pipe_is_told_from_a_file() {
        use std::os::fd::AsRawFd;
        let (pipe, _writer) = std::io::pipe().expect("pipe");
        let fd = PathBuf::from(format!("/proc/self/fd/{}", pipe.as_raw_fd()));
        assert!(FileKind::of(&fd).unwrap().is_pipe(), "a pipe");
        let file = tempfile::NamedTempFile::new().expect("temp file");
        assert_eq!(FileKind::of(file.path()).unwrap(), FileKind::Regular);
        assert!(
            FileKind::of(Path::new("/no/such/log")).is_err(),
            "nothing there"
        );
        assert_eq!(
            FileKind::of(Path::new("/dev/null")).unwrap(),
            FileKind::CharDevice
        );
    }

    #[test]
    fn canonical_generation_names() {
        assert_eq!(canonical_generation("session.jsonl"), Some(0));
        assert_eq!(canonical_generation("session.v4.jsonl"), Some(4));
        assert_eq!(canonical_generation("session.v12.jsonl"), Some(12));
        assert_eq!(canonical_generation("session.v0.jsonl"), None);
        assert_eq!(canonical_generation("session.v04.jsonl"), None);
        assert_eq!(canonical_generation("Session.jsonl"), None);
        assert_eq!(canonical_generation("session.jsonl.tmp"), None);
    }
}
