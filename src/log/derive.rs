//! Deriving messages (§12.1): the message a surface node shows the model, cut byte-for-byte
//! out of the line that stores it, plus a one-line preview of a message for people.
//!
//! The surface keeps only positions ([`Node::pos`]); the bytes are fetched when a message is
//! emitted, so memory does not grow with the size of the messages. The message is located
//! with `serde_json`'s `RawValue`, never re-serialized: key order, number spelling (`1.0`,
//! `1e2`) and escapes (`\u00e9`) come out exactly as stored.

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
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
    let skimmed = Skim { b: line, i: 0 }.line(path);
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
    fn line(mut self, path: &[&str]) -> Option<Option<Range<usize>>> {
        self.ws();
        let found = self.object(path, 1)?;
        self.ws();
        (self.i == self.b.len()).then_some(found)
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// At `{`: the span of the value at `path` in this object (the last duplicate wins).
    fn object(&mut self, path: &[&str], depth: u32) -> Option<Option<Range<usize>>> {
        if self.peek() != Some(b'{') || depth > SKIM_DEPTH {
            return None;
        }
        self.i += 1;
        self.ws();
        let mut found = None;
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Some(None);
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
            let start = self.i;
            match path.split_first() {
                Some((want, rest)) if key == want.as_bytes() => {
                    if rest.is_empty() {
                        self.value(depth)?;
                        found = Some(start..self.i);
                    } else if self.peek() == Some(b'{') {
                        found = self.object(rest, depth + 1)?;
                    } else {
                        self.value(depth)?;
                        found = None;
                    }
                }
                _ => self.value(depth)?,
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Some(found);
                }
                _ => return None,
            }
        }
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
    /// Bytes `[jump_at, jump_at + jump_buf.len())` of the file, as last read for an excursion.
    jump_buf: Vec<u8>,
    jump_at: u64,
    /// Excursions in a row that went forward: past a few, the sequential reader follows them.
    forward: u32,
}

/// How far ahead of the sequential reader a line is still read through it.
const AHEAD: u64 = 1 << 20;
/// Excursions in a row, each ahead of the last, after which the sequential reader moves.
const FOLLOW: u32 = 8;
/// What an excursion reads at a time.
const JUMP_READ: usize = 8 * 1024;

impl Deriver {
    /// Derive from the plaintext log at `path` (a spooled copy for standard input).
    pub fn open(path: &Path) -> io::Result<Self> {
        Ok(Deriver {
            fetcher: LineFetcher::open(path)?,
            next: 0,
            path: path.to_path_buf(),
            jump: None,
            jump_buf: Vec::new(),
            jump_at: 0,
            forward: 0,
        })
    }

    /// The message `node` derives, byte-for-byte as stored; for v0 legacy shapes the
    /// normalized message, since the file holds none to copy (§16). Callers skip nodes whose
    /// `derives` is false (§12.1).
    pub fn message(&mut self, node: &Node<'_>) -> Result<Cow<'_, [u8]>, DeriveError> {
        if let Some(legacy) = node.legacy_message() {
            return Ok(Cow::Owned(legacy.as_bytes().to_vec()));
        }
        let seq = node.seq;
        let line = self
            .line_at(node.pos.byte)
            .map_err(|source| DeriveError::Io { seq, source })?;
        let span =
            message_span(line, node.kind).map_err(|source| DeriveError::Message { seq, source })?;
        Ok(Cow::Borrowed(&line[span]))
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
            .filter(|&off| off < self.jump_buf.len());
        let off = match held {
            Some(off) if self.jump_buf[off..].contains(&b'\n') => off,
            _ => {
                let file = match &mut self.jump {
                    Some(f) => f,
                    None => self.jump.insert(File::open(&self.path)?),
                };
                file.seek(SeekFrom::Start(byte))?;
                self.jump_buf.clear();
                if self.jump_buf.capacity() > 16 * 1024 * 1024 {
                    self.jump_buf.shrink_to(JUMP_READ);
                }
                self.jump_at = byte;
                loop {
                    let start = self.jump_buf.len();
                    self.jump_buf.resize(start + JUMP_READ, 0);
                    let n = file.read(&mut self.jump_buf[start..])?;
                    self.jump_buf.truncate(start + n);
                    if n == 0 || self.jump_buf[start..].contains(&b'\n') {
                        break;
                    }
                }
                0
            }
        };
        let rest = &self.jump_buf[off..];
        Ok(match rest.iter().position(|&b| b == b'\n') {
            Some(end) => &rest[..end],
            None => rest,
        })
    }
}

/// The parts of a content block a preview reads.
#[derive(Debug, Default, serde::Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow, default)]
    ty: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
    #[serde(rename = "toolName", borrow, default)]
    tool_name: Option<Cow<'a, str>>,
    /// A v0–v3 `tool-result` block's own content blocks.
    #[serde(borrow, default)]
    content: Option<Vec<Block<'a>>>,
}

/// A message as far as a preview reads it.
#[derive(Debug, Default, serde::Deserialize)]
struct Blocks<'a> {
    #[serde(borrow, default)]
    content: Option<Vec<Block<'a>>>,
}

impl<'a> Block<'a> {
    /// The same view taken from a parsed tree (any shape: what is not a string is absent).
    fn from_json(b: &'a Json<'_>) -> Self {
        let s = |k: &str| b.get(k).and_then(Json::as_str).map(Cow::Borrowed);
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
    preview_blocks(&blocks, max_chars)
}

/// [`preview`] of a stored message's bytes. Reads only the fields a preview needs, without
/// building a tree; falls back to the full parse (lossy UTF-8, last-wins keys) whenever the
/// quick read does not apply (duplicate keys, odd field types, invalid UTF-8).
pub fn preview_bytes(message: &[u8], max_chars: usize) -> Result<String, MessageError> {
    if let Ok(quick) = serde_json::from_slice::<Blocks<'_>>(message) {
        return Ok(preview_blocks(
            quick.content.as_deref().unwrap_or_default(),
            max_chars,
        ));
    }
    let text = String::from_utf8_lossy(message);
    let tree = super::json::parse(text.as_bytes()).map_err(MessageError::NotJson)?;
    Ok(preview(&tree, max_chars))
}

fn preview_blocks(blocks: &[Block<'_>], max_chars: usize) -> String {
    let mut out = Preview::new(max_chars);
    // Text first, then calls, results and attachments, then reasoning; stop when full.
    for pass in 0..3 {
        for b in blocks {
            if out.full() {
                return out.finish();
            }
            let text = b.text.as_deref();
            match (pass, b.ty.as_deref()) {
                (0, Some("text")) => out.push_text(text.unwrap_or_default()),
                (2, Some("reasoning")) => {
                    if let Some(t) = text {
                        out.push_text("(reasoning)");
                        out.push_text(t);
                    }
                }
                (1, Some("tool-call")) => {
                    let name = b.name.as_deref().unwrap_or("?");
                    out.push_text(&format!("→ {name}("));
                    out.glue();
                    out.push_text(b.arguments.as_deref().unwrap_or_default());
                    out.glue();
                    out.push_text(")");
                }
                // v0–v3: the result's own content blocks hold the text.
                (1, Some("tool-result")) => {
                    if let Some(inner) = &b.content {
                        out.push_text(&preview_blocks(inner, max_chars));
                    }
                }
                (1, Some(kind @ ("image" | "file"))) => out.push_text(&format!("[{kind}]")),
                (1, Some(kind @ ("tool-addition" | "tool-removal"))) => {
                    let name = b.tool_name.as_deref().unwrap_or("?");
                    out.push_text(&format!("[{kind} {name}]"));
                }
                _ => {}
            }
        }
    }
    out.finish()
}

/// Accumulates words separated by single spaces, up to a character budget.
struct Preview {
    text: String,
    chars: usize,
    max: usize,
    cut: bool,
    /// The next word continues the last one (no space).
    glued: bool,
}

impl Preview {
    fn new(max: usize) -> Self {
        Preview {
            text: String::new(),
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

    fn push_text(&mut self, t: &str) {
        for word in t.split_whitespace() {
            if self.cut {
                return;
            }
            if !self.text.is_empty() && !std::mem::take(&mut self.glued) {
                self.push_char(' ');
            }
            for c in word.chars() {
                if !self.push_char(c) {
                    return;
                }
            }
        }
    }

    fn push_char(&mut self, c: char) -> bool {
        if self.chars >= self.max {
            self.cut = true;
            return false;
        }
        self.text.push(c);
        self.chars += 1;
        true
    }

    fn finish(mut self) -> String {
        if self.cut {
            // Make room for the ellipsis within the budget.
            self.text.pop();
            self.text.truncate(self.text.trim_end().len());
            self.text.push('…');
        }
        self.text
    }
}

#[cfg(test)]
mod tests;
