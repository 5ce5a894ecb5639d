//! Deriving messages (§12.1): the message a surface node shows the model, cut byte-for-byte
//! out of the line that stores it, plus a one-line preview of a message for people.
//!
//! The surface keeps only positions ([`Node::pos`]); the bytes are fetched when a message is
//! emitted, so memory does not grow with the size of the messages. The message is located
//! with `serde_json`'s `RawValue`, never re-serialized: key order, number spelling (`1.0`,
//! `1e2`) and escapes (`\u00e9`) come out exactly as stored.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::dialect::SurfaceKind;
use super::input::LineFetcher;
use super::json::Json;
use super::surface::Node;

/// Why a stored line does not yield a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// The line is not JSON (the file changed since it was scanned, or it never held an event).
    #[error("the stored line is not valid JSON: {0}")]
    NotJson(String),
    /// The event has no message where §12.1 looks for one (`data`, or `data.message`).
    #[error("the event has no `{0}` to derive")]
    Missing(&'static str),
}

/// Where an event of `kind` keeps its message: `data` itself for `user/message`,
/// `data.message` for every other surface type (§12.1).
pub fn message_path(kind: SurfaceKind) -> &'static [&'static str] {
    match kind {
        SurfaceKind::User => &["data"],
        _ => &["data", "message"],
    }
}

/// The byte range of the message object inside one stored line (without its `\n`).
///
/// Keys are looked up the way `JSON.parse` resolves them: escaped key spellings match
/// (`"d\u0061ta"` is `data`) and the last of duplicate keys wins. Lines holding bytes that
/// are not UTF-8 are located on a copy in which each invalid byte is `?` (same length), so
/// the range points at the original bytes, which `derive` passes through (§3.2).
pub fn message_span(line: &[u8], kind: SurfaceKind) -> Result<Range<usize>, MessageError> {
    let path = message_path(kind);
    // The common line needs no parser: a skim finds the same span for less.
    let skimmed = Skim { b: line, i: 0 }.line(path, &mut Skim::span);
    // Bytes that are not UTF-8 only trouble the parser where it must read text (a key, the
    // raw message itself); only then is the same-length copy needed.
    let found = match skimmed.map(Ok).unwrap_or_else(|| locate(line, path)) {
        Err(_) if std::str::from_utf8(line).is_err() => locate(&utf8_shaped(line), path),
        other => other,
    };
    found?.ok_or(MessageError::Missing(if path.len() == 1 {
        "data"
    } else {
        "data.message"
    }))
}

/// Nesting past this is left to the parser (serde_json stops at 128 levels).
const SKIM_DEPTH: u32 = 100;

/// A skim of a stored line for the span [`locate`] finds, for the common line: keys without
/// escapes, nesting within [`SKIM_DEPTH`]. It checks the structure (strings closed, brackets
/// matched, nothing after the object) but not every token; `None` whenever it cannot tell,
/// and the parser decides.
struct Skim<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Skim<'a> {
    /// At byte `at` of `b` (where the fold saw a value start).
    fn at(b: &'a [u8], at: u32) -> Self {
        Skim {
            b,
            i: usize::try_from(at).unwrap_or(usize::MAX),
        }
    }

    /// What `at` reads of the value at `path` in the line's object, `Some(None)` when the
    /// line has none there.
    fn line<T>(
        mut self,
        path: &[&str],
        at: &mut impl FnMut(&mut Self, u32) -> Option<T>,
    ) -> Option<Option<T>> {
        self.ws();
        let found = self.object(path, 1, at)?;
        self.ws();
        (self.i == self.b.len()).then_some(found)
    }

    /// What `at` reads of a value that is all of `self.b`, but for whitespace around it.
    fn whole<T>(mut self, at: impl FnOnce(&mut Self, u32) -> Option<T>) -> Option<T> {
        self.ws();
        let found = at(&mut self, 1)?;
        self.ws();
        (self.i == self.b.len()).then_some(found)
    }

    /// Past one value: its span.
    fn span(&mut self, depth: u32) -> Option<Range<usize>> {
        let start = self.i;
        self.value(depth)?;
        Some(start..self.i)
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// At `{`: what `at` reads of the value at `path` in this object (the last duplicate
    /// wins).
    fn object<T>(
        &mut self,
        path: &[&str],
        depth: u32,
        at: &mut impl FnMut(&mut Self, u32) -> Option<T>,
    ) -> Option<Option<T>> {
        let mut found = None;
        self.members(depth - 1, |s, key| {
            match path.split_first() {
                Some((want, rest)) if key == want.as_bytes() => {
                    if rest.is_empty() {
                        found = Some(at(s, depth)?);
                    } else if s.peek() == Some(b'{') {
                        found = s.object(rest, depth + 1, at)?;
                    } else {
                        s.value(depth)?;
                        found = None;
                    }
                }
                _ => s.value(depth)?,
            }
            Some(())
        })?;
        Some(found)
    }

    /// At a key: its bytes, when it has no escape.
    fn key(&mut self) -> Option<&'a [u8]> {
        let b = self.b;
        if self.peek() != Some(b'"') {
            return None;
        }
        let start = self.i + 1;
        let end = quote_or_backslash(b, start)?;
        if b[end] != b'"' {
            return None;
        }
        self.i = end + 1;
        Some(&b[start..end])
    }

    /// At `"`: past the closing quote.
    fn string(&mut self) -> Option<()> {
        let mut j = self.i + 1;
        loop {
            j = quote_or_backslash(self.b, j)?;
            if self.b[j] == b'"' {
                self.i = j + 1;
                return Some(());
            }
            j += 2;
        }
    }

    /// Past one value (nested at `depth`).
    fn value(&mut self, depth: u32) -> Option<()> {
        match self.peek()? {
            b'"' => self.string(),
            b'{' | b'[' => {
                // Open brackets, innermost last: 1 for an object, 0 for an array.
                let mut open: u128 = 0;
                let mut level = 0u32;
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        c @ (b'{' | b'[') => {
                            level += 1;
                            if depth + level > SKIM_DEPTH {
                                return None;
                            }
                            open = open << 1 | u128::from(c == b'{');
                        }
                        c @ (b'}' | b']') => {
                            if level == 0 || (open & 1 == 1) != (c == b'}') {
                                return None;
                            }
                            open >>= 1;
                            level -= 1;
                            if level == 0 {
                                self.i += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
            }
            _ => {
                let start = self.i;
                while !matches!(
                    self.peek(),
                    None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                ) {
                    self.i += 1;
                }
                (self.i > start).then_some(())
            }
        }
    }
}

/// The first `"` or `\\` in `b` at or after `from`.
#[inline]
fn quote_or_backslash(b: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut j = from;
    // Most strings of a line (keys, ids, types) end within a few words: looked for a word at
    // a time, without the set-up of a vector search.
    for _ in 0..4 {
        let Some(word) = b.get(j..j + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()) else {
            break;
        };
        let w = u64::from_le_bytes(word);
        let q = w ^ (ONES * u64::from(b'"'));
        let s = w ^ (ONES * u64::from(b'\\'));
        // A zero byte of `q` or `s` is a match; the lowest flagged byte is always a true one.
        let m = ((q.wrapping_sub(ONES) & !q) | (s.wrapping_sub(ONES) & !s)) & HIGH;
        if m != 0 {
            return Some(j + (m.trailing_zeros() / 8) as usize);
        }
        j += 8;
    }
    memchr::memchr2(b'"', b'\\', b.get(j..)?).map(|k| j + k)
}

fn locate(text: &[u8], path: &[&'static str]) -> Result<Option<Range<usize>>, MessageError> {
    let mut de = serde_json::Deserializer::from_slice(text);
    let raw = At { path }
        .deserialize(&mut de)
        .and_then(|found| de.end().map(|()| found))
        .map_err(|e| MessageError::NotJson(e.to_string()))?;
    Ok(raw.map(|raw| {
        let start = raw.get().as_ptr() as usize - text.as_ptr() as usize;
        start..start + raw.get().len()
    }))
}

/// The stored message bytes of an event of `kind` in `line`.
pub fn message_bytes(line: &[u8], kind: SurfaceKind) -> Result<&[u8], MessageError> {
    message_span(line, kind).map(|r| &line[r])
}

/// `line` itself when it is UTF-8; otherwise a copy of the same length in which every byte
/// of an invalid sequence is `?`.
fn utf8_shaped(line: &[u8]) -> Cow<'_, [u8]> {
    if std::str::from_utf8(line).is_ok() {
        return Cow::Borrowed(line);
    }
    let mut out = Vec::with_capacity(line.len());
    for chunk in line.utf8_chunks() {
        out.extend_from_slice(chunk.valid().as_bytes());
        out.resize(out.len() + chunk.invalid().len(), b'?');
    }
    Cow::Owned(out)
}

/// Follows `path` through nested objects; the value at its end, as raw text.
struct At<'p> {
    path: &'p [&'static str],
}

impl<'de> DeserializeSeed<'de> for At<'_> {
    type Value = Option<&'de RawValue>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        match self.path.split_first() {
            None => <&'de RawValue as serde::Deserialize>::deserialize(d).map(Some),
            Some((key, rest)) => d.deserialize_any(Walk { key, rest }),
        }
    }
}

struct Walk<'p> {
    key: &'static str,
    rest: &'p [&'static str],
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = Option<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(matches) = map.next_key_seed(KeyIs(self.key))? {
            if matches {
                // Last wins: a later duplicate replaces (or erases) an earlier find.
                found = map.next_value_seed(At { path: self.rest })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// Deserializes an object key to "is it `self.0`?" without allocating for plain keys.
struct KeyIs(&'static str);

impl<'de> DeserializeSeed<'de> for KeyIs {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIs {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an object key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
    }
}

/// What deriving a node's message needs, owned: kept for nodes that leave the surface.
#[derive(Debug, Clone)]
pub struct Stored {
    pub seq: u64,
    pub kind: SurfaceKind,
    pub pos: crate::log::Pos,
    pub message_at: Option<u32>,
    pub derives: bool,
    /// v0 legacy shapes: the normalized message (the file holds none to copy).
    pub legacy: Option<Box<str>>,
}

impl Stored {
    pub fn of(node: &Node<'_>) -> Stored {
        Stored {
            seq: node.seq,
            kind: node.kind,
            pos: node.pos,
            message_at: node.message_at,
            derives: node.derives,
            legacy: node.legacy_message().map(Into::into),
        }
    }
}

/// Why a node's message could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum DeriveError {
    #[error("cannot read the line of seq {seq}: {source}")]
    Io { seq: u64, source: io::Error },
    #[error("seq {seq}: {source}")]
    Message { seq: u64, source: MessageError },
}

/// Produces the derived messages of surface nodes by fetching their lines on demand.
///
/// Surface order mostly follows the file, but not everywhere: a replacing node sits where its
/// range was while its line comes much later in the file. A line at or a little ahead of the
/// sequential reader is read through it; one behind it or far ahead (an excursion) is read
/// through a second handle with a small buffer, so the sequential buffer is not thrown away
/// and refilled for one line and then again to come back.
pub struct Deriver {
    fetcher: LineFetcher,
    /// The byte after the last line the sequential reader returned.
    next: u64,
    path: PathBuf,
    jump: Option<File>,
    /// Bytes `[jump_at, jump_at + jump_len)` of the file, as last read for an excursion, at
    /// the start of a buffer kept at its size (so it is not cleared for every excursion).
    jump_buf: Vec<u8>,
    jump_len: usize,
    jump_at: u64,
    /// Excursions in a row that went forward: past a few, the sequential reader follows them.
    forward: u32,
}

/// How far ahead of the sequential reader a line is still read through it.
const AHEAD: u64 = 1 << 20;
/// Excursions in a row, each ahead of the last, after which the sequential reader moves.
const FOLLOW: u32 = 8;
/// What an excursion reads first (most lines a surface jumps to are shorter).
const JUMP_READ: usize = 2 * 1024;

impl Deriver {
    /// Derive from the plaintext log at `path` (a spooled copy for standard input).
    pub fn open(path: &Path) -> io::Result<Self> {
        Ok(Deriver {
            fetcher: LineFetcher::open(path)?,
            next: 0,
            path: path.to_path_buf(),
            jump: None,
            jump_buf: Vec::new(),
            jump_len: 0,
            jump_at: 0,
            forward: 0,
        })
    }

    /// The message `node` derives, byte-for-byte as stored; for v0 legacy shapes the
    /// normalized message, since the file holds none to copy (§16). Callers skip nodes whose
    /// `derives` is false (§12.1).
    pub fn message(&mut self, node: &Node<'_>) -> Result<Cow<'_, [u8]>, DeriveError> {
        self.message_of(&Stored::of(node))
    }

    /// [`Deriver::message`] of a node kept past its surface (`export` shows the history a
    /// replacement shadowed, whose nodes the surface no longer holds).
    pub fn message_of(&mut self, node: &Stored) -> Result<Cow<'_, [u8]>, DeriveError> {
        if let Some(legacy) = &node.legacy {
            return Ok(Cow::Owned(legacy.as_bytes().to_vec()));
        }
        let seq = node.seq;
        let depth = message_path(node.kind).len() as u32;
        let line = self
            .line_at(node.pos.byte)
            .map_err(|source| DeriveError::Io { seq, source })?;
        // Where the fold saw the message, only the message is skimmed.
        let span = match node
            .message_at
            .and_then(|at| Skim::at(line, at).span(depth))
        {
            Some(span) => span,
            None => message_span(line, node.kind)
                .map_err(|source| DeriveError::Message { seq, source })?,
        };
        Ok(Cow::Borrowed(&line[span]))
    }

    /// [`preview_bytes`] of the message `node` derives, read in the same skim that finds it
    /// in its line where it can be.
    pub fn preview(&mut self, node: &Node<'_>, max_chars: usize) -> Result<String, DeriveError> {
        let seq = node.seq;
        let failed = |source| DeriveError::Message { seq, source };
        if let Some(legacy) = node.legacy_message() {
            return preview_bytes(legacy.as_bytes(), max_chars).map_err(failed);
        }
        let path = message_path(node.kind);
        let line = self
            .line_at(node.pos.byte)
            .map_err(|source| DeriveError::Io { seq, source })?;
        // Where the fold saw the message (in a line that repeats no key), the message is
        // skimmed only as far as its preview shows.
        if let Some(text) = node
            .message_at
            .and_then(|at| Skim::at(line, at).unique_preview(path.len() as u32, max_chars))
        {
            return Ok(text);
        }
        let quick = Skim { b: line, i: 0 }.line(path, &mut Skim::message);
        if let Some(text) = quick.flatten().and_then(|b| quick_preview(&b, max_chars)) {
            return Ok(text);
        }
        let span = message_span(line, node.kind).map_err(failed)?;
        preview_bytes(&line[span], max_chars).map_err(failed)
    }

    /// The line starting at `byte`, without its `\n`.
    fn line_at(&mut self, byte: u64) -> io::Result<&[u8]> {
        let in_reach = byte >= self.next && byte - self.next <= AHEAD;
        if in_reach || self.forward >= FOLLOW {
            self.forward = 0;
            let line = self.fetcher.line_at(byte)?;
            self.next = byte + line.len() as u64 + 1;
            return Ok(line);
        }
        self.forward = if byte >= self.jump_at {
            self.forward + 1
        } else {
            0
        };
        self.excursion(byte)
    }

    fn excursion(&mut self, byte: u64) -> io::Result<&[u8]> {
        let held = byte
            .checked_sub(self.jump_at)
            .and_then(|off| usize::try_from(off).ok())
            .filter(|&off| off < self.jump_len);
        let off = match held {
            Some(off) if memchr::memchr(b'\n', &self.jump_buf[off..self.jump_len]).is_some() => off,
            _ => {
                let file = match &mut self.jump {
                    Some(f) => f,
                    None => self.jump.insert(File::open(&self.path)?),
                };
                if self.jump_buf.len() > 16 * 1024 * 1024 {
                    self.jump_buf = Vec::new();
                }
                self.jump_at = byte;
                self.jump_len = 0;
                loop {
                    let start = self.jump_len;
                    // A line longer than the first read is read in doubling steps.
                    let step = JUMP_READ.max(start);
                    if start == self.jump_buf.len() {
                        self.jump_buf.resize(start + step, 0);
                    }
                    let end = self.jump_buf.len().min(start + step);
                    let n = read_at(file, &mut self.jump_buf[start..end], byte + start as u64)?;
                    self.jump_len = start + n;
                    if n == 0 || memchr::memchr(b'\n', &self.jump_buf[start..start + n]).is_some() {
                        break;
                    }
                }
                0
            }
        };
        let rest = &self.jump_buf[off..self.jump_len];
        Ok(match memchr::memchr(b'\n', rest) {
            Some(end) => &rest[..end],
            None => rest,
        })
    }
}

/// Bytes of `file` from `offset` on, in one call where the platform has one.
fn read_at(file: &mut File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_at(file, buf, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Read, Seek, SeekFrom};
        file.seek(SeekFrom::Start(offset))?;
        file.read(buf)
    }
}

/// A string a preview reads: decoded (from a tree), or as stored (the bytes between the
/// quotes, escapes and all), decoded only as far as the preview shows it.
#[derive(Debug, Clone, Copy)]
enum Text<'a> {
    Decoded(&'a str),
    Stored(&'a [u8]),
}

impl<'a> Text<'a> {
    /// The whole string's bytes, for short ones (a block's type); `None` (and `bad`) when a
    /// stored string with escapes does not decode. Compared with ASCII names only, so bytes
    /// that are not UTF-8 need no check: they match none, as their lossy decoding would not.
    fn bytes(&self, bad: &Cell<bool>) -> Option<Cow<'a, [u8]>> {
        match *self {
            Text::Decoded(s) => Some(Cow::Borrowed(s.as_bytes())),
            Text::Stored(b) if !b.contains(&b'\\') => Some(Cow::Borrowed(b)),
            Text::Stored(b) => {
                let mut s = String::new();
                let mut i = 0;
                while i < b.len() {
                    let Some((c, len)) = decode_one(b, i) else {
                        bad.set(true);
                        return None;
                    };
                    s.push(c);
                    i += len;
                }
                Some(Cow::Owned(s.into_bytes()))
            }
        }
    }
}

/// The character of a JSON string's stored bytes at `i`, and how many bytes it took;
/// `None` at the end or where the bytes are not what JSON allows.
fn decode_one(b: &[u8], i: usize) -> Option<(char, usize)> {
    let c = *b.get(i)?;
    match c {
        b'\\' => super::json::escaped_char(b, i).map(|(c, end)| (c, end - i)),
        0..0x20 => None,
        0x20..0x80 => Some((char::from(c), 1)),
        _ => {
            let len = match c {
                0xc2..=0xdf => 2,
                0xe0..=0xef => 3,
                0xf0..=0xf4 => 4,
                _ => return None,
            };
            let s = std::str::from_utf8(b.get(i..i + len)?).ok()?;
            Some((s.chars().next()?, len))
        }
    }
}

/// The parts of a content block a preview reads.
#[derive(Debug, Default)]
struct Block<'a> {
    ty: Option<Text<'a>>,
    text: Option<Text<'a>>,
    name: Option<Text<'a>>,
    arguments: Option<Text<'a>>,
    tool_name: Option<Text<'a>>,
    /// A v0–v3 `tool-result` block's own content blocks.
    content: Option<Vec<Block<'a>>>,
}

impl<'a> Block<'a> {
    /// The same view taken from a parsed tree (any shape: what is not a string is absent).
    fn from_json(b: &'a Json<'_>) -> Self {
        let s = |k: &str| b.get(k).and_then(Json::as_str).map(Text::Decoded);
        Block {
            ty: s("type"),
            text: s("text"),
            name: s("name"),
            arguments: s("arguments"),
            tool_name: s("toolName"),
            content: b
                .get("content")
                .and_then(Json::as_arr)
                .map(|items| items.iter().map(Block::from_json).collect()),
        }
    }
}

/// The quick read of a message for its preview: what [`Block::from_json`] takes from the
/// tree, for the common message only (an object whose `content` and blocks hold strings,
/// nulls and arrays of objects where a preview looks, keys without escapes). `None`
/// whenever it cannot tell, and the tree decides. Strings are kept as stored: the pass that
/// folded the line has parsed all of it.
impl<'a> Skim<'a> {
    /// At a message: its content blocks.
    fn message(&mut self, depth: u32) -> Option<Vec<Block<'a>>> {
        let mut content = None;
        // A later duplicate overwrites: the last wins, as in the tree.
        self.members(depth, |s, key| {
            if key != b"content" {
                return s.value(depth);
            }
            content = s.blocks(depth)?;
            Some(())
        })?;
        Some(content.unwrap_or_default())
    }

    /// At a message in a line that repeats no key: its preview, read only as far as it shows
    /// (a later member cannot take the place of one read). Text blocks go into the preview as
    /// they are read, the other blocks wait for the later passes; past the `content` nothing
    /// is read. `None` whenever the skim cannot tell or a string shown does not decode.
    fn unique_preview(&mut self, depth: u32, max_chars: usize) -> Option<String> {
        let bad = Cell::new(false);
        let mut out = Preview::new(max_chars);
        let mut later = Vec::new();
        let mut read = false;
        let skimmed = self.members(depth, |s, key| {
            if key != b"content" {
                return s.value(depth);
            }
            s.stream_blocks(depth, &mut out, &mut later, &bad)?;
            // All a preview needs is read: stop the walk here.
            read = true;
            None
        });
        if !read && skimmed.is_none() {
            return None;
        }
        if !out.full() {
            fill(&mut out, &later, 1..3, max_chars, &bad);
        }
        (!bad.get()).then(|| out.finish())
    }

    /// At the value of a `content`: text blocks pushed into `out` in order until it is full,
    /// the others kept in `later`.
    fn stream_blocks(
        &mut self,
        depth: u32,
        out: &mut Preview,
        later: &mut Vec<Block<'a>>,
        bad: &Cell<bool>,
    ) -> Option<()> {
        self.each_block(depth, |block| {
            if block.ty.and_then(|t| t.bytes(bad)).as_deref() != Some(b"text") {
                later.push(block);
                return true;
            }
            out.push_text(&[block.text.unwrap_or(Text::Decoded(""))], bad);
            !(out.full() || bad.get())
        })
        .map(|_| ())
    }

    /// At the value of a `content`: `null`, or an array of blocks.
    fn blocks(&mut self, depth: u32) -> Option<Option<Vec<Block<'a>>>> {
        let mut blocks = Vec::new();
        let array = self.each_block(depth, |block| {
            blocks.push(block);
            true
        })?;
        Some(array.then_some(blocks))
    }

    /// At the value of a `content`: `null` (false), or an array (true) whose blocks go to
    /// `each` in order, the walk stopping where `each` returns false.
    fn each_block(&mut self, depth: u32, mut each: impl FnMut(Block<'a>) -> bool) -> Option<bool> {
        if self.peek() != Some(b'[') {
            return self.null().then_some(false);
        }
        if depth + 1 > SKIM_DEPTH {
            return None;
        }
        self.i += 1;
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Some(true);
        }
        loop {
            self.ws();
            if !each(self.block(depth + 1)?) {
                return Some(true);
            }
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(true);
                }
                _ => return None,
            }
        }
    }

    /// At a block (an object).
    fn block(&mut self, depth: u32) -> Option<Block<'a>> {
        let mut block = Block::default();
        // A later duplicate overwrites: the last wins, as in the tree.
        self.members(depth, |s, key| {
            let field = match key {
                b"type" => &mut block.ty,
                b"text" => &mut block.text,
                b"name" => &mut block.name,
                b"arguments" => &mut block.arguments,
                b"toolName" => &mut block.tool_name,
                b"content" => {
                    block.content = s.blocks(depth)?;
                    return Some(());
                }
                _ => return s.value(depth),
            };
            *field = s.text()?;
            Some(())
        })?;
        Some(block)
    }

    /// At `{` (an object nested in one at `depth`): each member's key, with the skim at its
    /// value for `member` to pass.
    fn members(
        &mut self,
        depth: u32,
        mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>,
    ) -> Option<()> {
        if self.peek() != Some(b'{') || depth + 1 > SKIM_DEPTH {
            return None;
        }
        self.i += 1;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Some(());
        }
        loop {
            self.ws();
            let key = self.key()?;
            self.ws();
            if self.peek() != Some(b':') {
                return None;
            }
            self.i += 1;
            self.ws();
            member(self, key)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// At a string or `null`: the string as stored.
    fn text(&mut self) -> Option<Option<Text<'a>>> {
        if self.peek() != Some(b'"') {
            return self.null().then_some(None);
        }
        let start = self.i + 1;
        self.string()?;
        Some(Some(Text::Stored(&self.b[start..self.i - 1])))
    }

    /// Past a `null`, if that is what is here.
    fn null(&mut self) -> bool {
        let rest = &self.b[self.i.min(self.b.len())..];
        let ends = |c: Option<&u8>| {
            matches!(
                c,
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            )
        };
        if rest.starts_with(b"null") && ends(rest.get(4)) {
            self.i += 4;
            return true;
        }
        false
    }
}

/// A one-line preview of a message for people: its text blocks, then tool calls, tool
/// results and attachments, then reasoning, with whitespace runs collapsed to one space, at
/// most `max_chars` characters (`…` when cut). Not escaped: renderers escape.
pub fn preview(message: &Json<'_>, max_chars: usize) -> String {
    let blocks: Vec<Block<'_>> = message
        .get("content")
        .and_then(Json::as_arr)
        .unwrap_or_default()
        .iter()
        .map(Block::from_json)
        .collect();
    // Decoded strings never go bad.
    preview_blocks(&blocks, max_chars, &Cell::new(false))
}

/// [`preview`] of a stored message's bytes. Reads only the fields a preview needs, without
/// building a tree; falls back to the full parse (lossy UTF-8, last-wins keys) whenever the
/// quick read does not apply (duplicate keys, odd field types, invalid UTF-8).
pub fn preview_bytes(message: &[u8], max_chars: usize) -> Result<String, MessageError> {
    let quick = Skim { b: message, i: 0 }.whole(Skim::message);
    if let Some(text) = quick.and_then(|blocks| quick_preview(&blocks, max_chars)) {
        return Ok(text);
    }
    let text = String::from_utf8_lossy(message);
    let tree = super::json::parse(text.as_bytes()).map_err(MessageError::NotJson)?;
    Ok(preview(&tree, max_chars))
}

/// The preview of blocks read quickly, unless a string in what it shows does not decode.
fn quick_preview(blocks: &[Block<'_>], max_chars: usize) -> Option<String> {
    let bad = Cell::new(false);
    let text = preview_blocks(blocks, max_chars, &bad);
    (!bad.get()).then_some(text)
}

fn preview_blocks(blocks: &[Block<'_>], max_chars: usize, bad: &Cell<bool>) -> String {
    let mut out = Preview::new(max_chars);
    fill(&mut out, blocks, 0..3, max_chars, bad);
    out.finish()
}

/// The `passes` of a preview over `blocks`: text first (0), then calls, results and
/// attachments (1), then reasoning (2); stops when full.
fn fill(
    out: &mut Preview,
    blocks: &[Block<'_>],
    passes: std::ops::Range<u8>,
    max_chars: usize,
    bad: &Cell<bool>,
) {
    let none = Text::Decoded("");
    let unnamed = Text::Decoded("?");
    for pass in passes {
        for b in blocks {
            if out.full() || bad.get() {
                return;
            }
            let ty = b.ty.and_then(|t| t.bytes(bad));
            match (pass, ty.as_deref()) {
                (0, Some(b"text")) => out.push_text(&[b.text.unwrap_or(none)], bad),
                (2, Some(b"reasoning")) => {
                    if let Some(t) = b.text {
                        out.push_text(&[Text::Decoded("(reasoning)")], bad);
                        out.push_text(&[t], bad);
                    }
                }
                (1, Some(b"tool-call")) => {
                    let name = b.name.unwrap_or(unnamed);
                    out.push_text(&[Text::Decoded("→ "), name, Text::Decoded("(")], bad);
                    out.glue();
                    out.push_text(&[b.arguments.unwrap_or(none)], bad);
                    out.glue();
                    out.push_text(&[Text::Decoded(")")], bad);
                }
                // v0–v3: the result's own content blocks hold the text.
                (1, Some(b"tool-result")) => {
                    if let Some(inner) = &b.content {
                        let inner = preview_blocks(inner, max_chars, bad);
                        out.push_text(&[Text::Decoded(&inner)], bad);
                    }
                }
                (1, Some(b"image")) => out.push_text(&[Text::Decoded("[image]")], bad),
                (1, Some(b"file")) => out.push_text(&[Text::Decoded("[file]")], bad),
                (1, Some(kind @ (b"tool-addition" | b"tool-removal"))) => {
                    let name = b.tool_name.unwrap_or(unnamed);
                    let open = if kind == b"tool-addition" {
                        "[tool-addition "
                    } else {
                        "[tool-removal "
                    };
                    out.push_text(&[Text::Decoded(open), name, Text::Decoded("]")], bad);
                }
                _ => {}
            }
        }
    }
}

/// Whether all 8 bytes of `w` go on a run [`Preview::push_piece`] copies: printable ASCII
/// (a backslash only in a decoded string), spaces single and not last (the byte after one
/// must be checked against the next word).
#[inline]
fn plain_word(w: u64, backslash_plain: bool) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const LOW: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    // 0x80 in each byte of `x` that is zero, nothing elsewhere (no carry crosses a byte).
    let zero = |x: u64| !((x & LOW).wrapping_add(LOW) | x | LOW);
    // Any byte below 0x20 (exact as a whole, with no byte of 0x80 or more).
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    let del = zero(w ^ (ONES * 0x7f));
    let backslash = if backslash_plain {
        0
    } else {
        zero(w ^ (ONES * u64::from(b'\\')))
    };
    let space = zero(w ^ (ONES * u64::from(b' ')));
    w & HIGH == 0
        && control == 0
        && del == 0
        && backslash == 0
        && space & (space >> 8) == 0
        && space >> 56 == 0
}

/// Accumulates words separated by single spaces, up to a character budget.
struct Preview {
    /// UTF-8: whole characters and runs of printable ASCII are pushed.
    text: Vec<u8>,
    chars: usize,
    max: usize,
    cut: bool,
    /// The next word continues the last one (no space).
    glued: bool,
}

impl Preview {
    fn new(max: usize) -> Self {
        Preview {
            // Room for the usual preview, all ASCII, and the ellipsis.
            text: Vec::with_capacity(max.saturating_add(3).min(1024)),
            chars: 0,
            max,
            cut: false,
            glued: false,
        }
    }

    fn glue(&mut self) {
        self.glued = true;
    }

    fn full(&self) -> bool {
        self.cut
    }

    /// The words of one text (split at whitespace), read only until the budget is spent;
    /// the text is `pieces` one after another (a word may run across them). Runs of printable
    /// ASCII are copied a run at a time.
    fn push_text(&mut self, pieces: &[Text<'_>], bad: &Cell<bool>) {
        let mut in_word = false;
        for &text in pieces {
            if bad.get() {
                return;
            }
            self.push_piece(text, &mut in_word, bad);
        }
    }

    fn push_piece(&mut self, text: Text<'_>, in_word: &mut bool, bad: &Cell<bool>) {
        let (b, decoded) = match text {
            Text::Stored(b) => (b, None),
            Text::Decoded(s) => (s.as_bytes(), Some(s)),
        };
        // A backslash starts an escape only in a stored string.
        let plain = |c: &u8| (0x21..0x7f).contains(c) && (*c != b'\\' || decoded.is_some());
        let mut i = 0;
        while i < b.len() && !self.cut {
            if b[i] == b' ' {
                *in_word = false;
                i += 1;
                continue;
            }
            // A run of words of printable ASCII with single spaces between them is copied as
            // it is: those spaces are the ones the words would get. It is read only as far as
            // the preview has room for (and a byte past that, to tell a cut), a word at a time
            // where it can be.
            let room = self.max.saturating_sub(self.chars);
            let cap = b.len().min(i.saturating_add(room).saturating_add(1));
            let mut end = i;
            while let Some(w) = b.get(end..end + 8).filter(|_| end + 8 <= cap) {
                let w = u64::from_le_bytes(<[u8; 8]>::try_from(w).unwrap_or_default());
                if !plain_word(w, decoded.is_some()) {
                    break;
                }
                end += 8;
            }
            while end < cap {
                if plain(&b[end]) {
                    end += 1;
                } else if b[end] == b' ' && b.get(end + 1).is_some_and(plain) {
                    end += 2;
                } else {
                    break;
                }
            }
            let run = end - i;
            if run == 0 {
                let next = match decoded {
                    // `i` is at a character: only whole characters and ASCII runs are passed.
                    Some(s) => s
                        .get(i..)
                        .and_then(|r| r.chars().next())
                        .map(|c| (c, c.len_utf8())),
                    None => decode_one(b, i),
                };
                let Some((c, len)) = next else {
                    bad.set(true);
                    return;
                };
                i += len;
                if c.is_whitespace() {
                    *in_word = false;
                } else {
                    self.word_start(in_word);
                    self.push_char(c);
                }
                continue;
            }
            self.word_start(in_word);
            // One character a byte (spaces included).
            let fits = run.min(self.max.saturating_sub(self.chars));
            self.text.extend_from_slice(&b[i..i + fits]);
            self.chars += fits;
            if fits < run {
                self.cut = true;
            }
            i += run;
        }
    }

    /// Before a character: the space that ends the last word when this one starts a word.
    #[inline]
    fn word_start(&mut self, in_word: &mut bool) {
        if !std::mem::replace(in_word, true)
            && !self.text.is_empty()
            && !std::mem::take(&mut self.glued)
        {
            self.push_char(' ');
        }
    }

    fn push_char(&mut self, c: char) -> bool {
        if self.chars >= self.max {
            self.cut = true;
            return false;
        }
        self.text
            .extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        self.chars += 1;
        true
    }

    fn finish(self) -> String {
        // Whole characters and runs of ASCII only, so always UTF-8.
        let mut text = String::from_utf8(self.text)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        if self.cut {
            // Make room for the ellipsis within the budget.
            text.pop();
            text.truncate(text.trim_end().len());
            text.push('…');
        }
        text
    }
}

#[cfg(test)]
mod tests;
