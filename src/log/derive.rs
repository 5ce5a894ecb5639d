//! Deriving messages (§12.1): the message a surface node shows the model, cut byte-for-byte
//! out of the line that stores it, plus a one-line preview of a message for people.
//!
//! The surface keeps only positions ([`Node::pos`]); the bytes are fetched when a message is
//! emitted, so memory does not grow with the size of the messages. The message is located
//! with `serde_json`'s `RawValue`, never re-serialized: key order, number spelling (`1.0`,
//! `1e2`) and escapes (`\u00e9`) come out exactly as stored.

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::ops::Range;
use std::path::Path;

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
    let text = utf8_shaped(line);
    let path = message_path(kind);
    let mut de = serde_json::Deserializer::from_slice(&text);
    let raw = At { path }
        .deserialize(&mut de)
        .and_then(|found| de.end().map(|()| found))
        .map_err(|e| MessageError::NotJson(e.to_string()))?
        .ok_or(MessageError::Missing(if path.len() == 1 {
            "data"
        } else {
            "data.message"
        }))?;
    let start = raw.get().as_ptr() as usize - text.as_ptr() as usize;
    Ok(start..start + raw.get().len())
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
pub struct Deriver {
    fetcher: LineFetcher,
}

impl Deriver {
    /// Derive from the plaintext log at `path` (a spooled copy for standard input).
    pub fn open(path: &Path) -> io::Result<Self> {
        Ok(Deriver {
            fetcher: LineFetcher::open(path)?,
        })
    }

    /// The message `node` derives, byte-for-byte as stored; for v0 legacy shapes the
    /// normalized message, since the file holds none to copy (§16). Callers skip nodes whose
    /// `derives` is false (§12.1).
    pub fn message(&mut self, node: &Node) -> Result<Cow<'_, [u8]>, DeriveError> {
        if let Some(legacy) = &node.legacy_message {
            return Ok(Cow::Owned(legacy.as_bytes().to_vec()));
        }
        let seq = node.seq;
        let line = self
            .fetcher
            .line_at(node.pos.byte)
            .map_err(|source| DeriveError::Io { seq, source })?;
        let span =
            message_span(line, node.kind).map_err(|source| DeriveError::Message { seq, source })?;
        Ok(Cow::Borrowed(&line[span]))
    }
}

/// A one-line preview of a message for people: its text blocks, then tool calls, tool
/// results and attachments, then reasoning, with whitespace runs collapsed to one space, at
/// most `max_chars` characters (`…` when cut). Not escaped: renderers escape.
pub fn preview(message: &Json<'_>, max_chars: usize) -> String {
    let blocks = message
        .get("content")
        .and_then(Json::as_arr)
        .unwrap_or_default();
    let mut texts: Vec<Cow<'_, str>> = Vec::new();
    let mut others: Vec<Cow<'_, str>> = Vec::new();
    let mut reasoning: Vec<Cow<'_, str>> = Vec::new();
    for b in blocks {
        let text = || b.get("text").and_then(Json::as_str);
        match b.get("type").and_then(Json::as_str) {
            Some("text") => texts.extend(text().map(Cow::Borrowed)),
            Some("reasoning") => reasoning.extend(
                text().map(|t| Cow::Owned(format!("(reasoning) {}", collapse(t, max_chars)))),
            ),
            Some("tool-call") => {
                let name = b.get("name").and_then(Json::as_str).unwrap_or("?");
                let args = b.get("arguments").and_then(Json::as_str).unwrap_or("");
                others.push(Cow::Owned(format!(
                    "→ {name}({})",
                    collapse(args, max_chars)
                )));
            }
            Some("tool-result") => {
                // v0–v3: the result's own content blocks hold the text.
                if let Some(inner) = b.get("content") {
                    let wrapped = Json::Obj(vec![(Cow::Borrowed("content"), inner.clone())]);
                    others.push(Cow::Owned(preview(&wrapped, max_chars)));
                }
            }
            Some(kind @ ("image" | "file")) => others.push(Cow::Owned(format!("[{kind}]"))),
            Some(kind @ ("tool-addition" | "tool-removal")) => {
                let name = b.get("toolName").and_then(Json::as_str).unwrap_or("?");
                others.push(Cow::Owned(format!("[{kind} {name}]")));
            }
            _ => {}
        }
    }
    let mut out = Preview::new(max_chars);
    for part in texts.iter().chain(&others).chain(&reasoning) {
        if out.full() {
            break;
        }
        out.push_text(part);
    }
    out.finish()
}

fn collapse(t: &str, max_chars: usize) -> String {
    let mut p = Preview::new(max_chars);
    p.push_text(t);
    p.finish()
}

/// Accumulates words separated by single spaces, up to a character budget.
struct Preview {
    text: String,
    chars: usize,
    max: usize,
    cut: bool,
}

impl Preview {
    fn new(max: usize) -> Self {
        Preview {
            text: String::new(),
            chars: 0,
            max,
            cut: false,
        }
    }

    fn full(&self) -> bool {
        self.cut
    }

    fn push_text(&mut self, t: &str) {
        for word in t.split_whitespace() {
            if self.cut {
                return;
            }
            if !self.text.is_empty() {
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
