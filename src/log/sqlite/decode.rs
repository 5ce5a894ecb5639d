//! One `events` row → its logical events as JSONL lines (SQLITE.md S4, S5): the storage
//! forms of `data` (TEXT or a zstd BLOB), `source_event_seqs` (varint/ZigZag BLOB in schema
//! 17, JSON text in 15), `surface_op`, the `ignorable` flag and packed chunk rows, rebuilt
//! in upstream's key order (S4.4). A row that does not decode says why; the caller decides
//! whether that is a torn tail or committed damage (S7).

use std::borrow::Cow;
use std::io::{Read, Write};

use rusqlite::types::ValueRef;

use super::Schema;
use super::deferred::{Job, Later};
use super::js::{self, Value};
use crate::log::event::Kind;
use crate::log::json::MAX_SAFE;
use crate::log::limits::{Guard, LimitHit};

/// An expanded packed member's line up to its seq, around its type (an `assistant/chunk`).
const MEMBER_HEAD: [&[u8]; 2] = [b"{\"type\":\"", b"\",\"seq\":"];

/// The most bytes a packed row's `data` may hold, decoded (S5).
pub const PACKED_MAX_BYTES: usize = 1 << 20;

/// Members a packed row holds at least and at most (S5).
pub const PACKED_MIN_MEMBERS: usize = 3;
pub const PACKED_MAX_MEMBERS: usize = 1024;

/// One physical row as SQLite returns it (values borrowed from the statement).
pub struct RawRow<'r> {
    pub seq: i64,
    pub ty: ValueRef<'r>,
    pub time: ValueRef<'r>,
    pub data: ValueRef<'r>,
    pub sources: ValueRef<'r>,
    pub surface_op: ValueRef<'r>,
    pub ignorable: ValueRef<'r>,
}

impl RawRow<'_> {
    /// The `type` column as text, for a finding about a row that may not decode.
    pub fn type_text(&self) -> Option<String> {
        match self.ty {
            ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
            _ => None,
        }
    }
}

/// What a decoded row holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded {
    /// Logical events (1 for a scalar row).
    pub members: u64,
    /// Lines written (a packed row kept packed is one).
    pub lines: u64,
    /// The time of the last of them.
    pub last_time: i64,
    /// A scalar `turn/end` (a packed row never is one).
    pub turn_end: bool,
    /// For a packed row kept packed: the bytes its member lines would take, expanded
    /// (newlines included); 0 otherwise.
    pub expanded_bytes: u64,
}

/// Why a row is not usable (S4–S5); the message names the column.
pub type Undecodable = String;

/// Reused buffers of a decoding pass.
#[derive(Default)]
pub struct Scratch {
    data: Vec<u8>,
    zstd: Option<zstd::bulk::Decompressor<'static>>,
    /// Why the last row that did not decode was not read at all: it passed a guard of
    /// dshs's own (a size or depth limit, [`crate::log::limits`]). Such a row is not
    /// undecodable — DSH reads it — so its caller must not judge it (see [`decode_row`]).
    pub limit: Option<LimitHit>,
    /// Hand a packed row's member lines out as [`Expansion`] (in `pending`) instead of
    /// writing them all: 1,024 members sharing a 500 KB id are 500 MB of lines, from a row
    /// of 1 MiB.
    pub lazy: bool,
    /// The member lines of the last packed row decoded with `lazy`, still to be written.
    pub pending: Option<Expansion>,
    /// The `data` text of the last row decoded with [`Mode::defer`], reserved and left to
    /// be written (see [`super::deferred`]).
    pub deferred: Option<Job>,
}

/// The member lines of a valid packed row (S5), written one at a time: what is kept is the
/// row's text (at most 1 MiB) and the bytes every line shares, not the lines.
#[derive(Debug)]
pub struct Expansion {
    seq0: i64,
    /// `,"data":{…,"text":` (or `"argumentsDelta":`), the same in every line.
    fixed: Vec<u8>,
    /// The run data text the member strings are in.
    text: String,
    /// Each member string's raw contents (between the quotes), as a range of `text`.
    members: Vec<(usize, usize)>,
    times: Vec<i64>,
    /// `text` is `JSON.stringify` output: a member is written as it is stored.
    canonical: bool,
    next: usize,
}

impl Expansion {
    /// The member the next line is (from 0).
    pub fn next_member(&self) -> usize {
        self.next
    }

    /// Append the next member's line (ending in `\n`); false when none is left.
    pub fn write_next(&mut self, out: &mut Vec<u8>) -> bool {
        let k = self.next;
        let Some(&(start, end)) = self.members.get(k) else {
            return false;
        };
        self.next += 1;
        out.extend_from_slice(MEMBER_HEAD[0]);
        out.extend_from_slice(Kind::AssistantChunk.name().as_bytes());
        out.extend_from_slice(MEMBER_HEAD[1]);
        push_int(out, self.seq0 + k as i64);
        out.extend_from_slice(b",\"time\":");
        push_int(out, self.times[k]);
        out.extend_from_slice(&self.fixed);
        let member = &self.text[start..end];
        if self.canonical {
            out.push(b'"');
            out.extend_from_slice(member.as_bytes());
            out.push(b'"');
        } else {
            js::write_string(member, out);
        }
        out.extend_from_slice(b"}}}\n");
        true
    }
}

/// How a row is decoded.
#[derive(Debug, Clone, Copy)]
pub struct Mode {
    pub schema: Schema,
    /// The line-size guard: a scalar row whose `data` text, or whose logical line, would be
    /// longer is not read (a [`LimitHit`] in [`Scratch::limit`]).
    pub max_scalar_bytes: u64,
    /// Write a valid packed row as one JSONL v0 packed row (FORMAT.md §5.2) instead of its
    /// member events.
    pub keep_packed: bool,
    /// Reserve a scalar row's `data` text in the line, when it is upstream's own form, and
    /// leave it in [`Scratch::deferred`] instead of writing it.
    pub defer: bool,
}

/// Decode `row` and append its logical lines (each ending in `\n`) to `out`; on failure
/// `out` is left as it was. A failure with [`Scratch::limit`] set is not a verdict on the
/// row: dshs did not read it (issue 37 item 2).
pub fn decode_row(
    row: &RawRow<'_>,
    mode: Mode,
    scratch: &mut Scratch,
    out: &mut Vec<u8>,
) -> Result<Decoded, Undecodable> {
    let mark = out.len();
    scratch.limit = None;
    scratch.pending = None;
    scratch.deferred = None;
    let r = decode_into(row, mode, scratch, out);
    if r.is_err() {
        out.truncate(mark);
        scratch.deferred = None;
    }
    r
}

fn text_of<'r>(v: ValueRef<'r>, column: &str) -> Result<Cow<'r, str>, Undecodable> {
    match v {
        // SQLite TEXT is whatever bytes were bound; Node decodes it lossily.
        ValueRef::Text(t) => Ok(lossy(t)),
        other => Err(format!("{column} is {}, not TEXT", storage_class(other))),
    }
}

fn int_of(v: ValueRef<'_>, column: &str) -> Result<i64, Undecodable> {
    match v {
        ValueRef::Integer(i) => Ok(i),
        other => Err(format!("{column} is {}, not INTEGER", storage_class(other))),
    }
}

/// SQLite's name for a value's storage class.
pub fn storage_class(v: ValueRef<'_>) -> &'static str {
    match v {
        ValueRef::Null => "NULL",
        ValueRef::Integer(_) => "INTEGER",
        ValueRef::Real(_) => "REAL",
        ValueRef::Text(_) => "TEXT",
        ValueRef::Blob(_) => "BLOB",
    }
}

fn decode_into(
    row: &RawRow<'_>,
    mode: Mode,
    scratch: &mut Scratch,
    out: &mut Vec<u8>,
) -> Result<Decoded, Undecodable> {
    let Mode {
        schema,
        max_scalar_bytes,
        keep_packed,
        defer,
    } = mode;
    let ty = text_of(row.ty, "type")?;
    let time = int_of(row.time, "time")?;
    let ignorable = match row.ignorable {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i),
        other => {
            return Err(format!(
                "ignorable is {}, not INTEGER",
                storage_class(other)
            ));
        }
    };
    if schema == Schema::V17 && ignorable == Some(0) {
        return packed(row, &ty, time, keep_packed, scratch, out);
    }
    if let ValueRef::Text(t) = row.data
        && t.len() as u64 > max_scalar_bytes
    {
        return Err(too_long(
            scratch,
            max_scalar_bytes,
            t.len() as u64,
            true,
            format!("the data TEXT of row seq {}", row.seq),
        ));
    }
    let later = if defer {
        deferrable(row.data, max_scalar_bytes)
    } else {
        None
    };
    let data = match later {
        Some(_) => Ok(Cow::Borrowed("")),
        None => data_text(
            row.data,
            max_scalar_bytes,
            &mut scratch.data,
            &mut scratch.zstd,
        ),
    };
    let data = match data {
        Ok(data) => data,
        Err(DataError::Bad(why)) => return Err(why),
        Err(DataError::TooBig(found)) => {
            return Err(too_long(
                scratch,
                max_scalar_bytes,
                found,
                true,
                format!("the data BLOB of row seq {} (decompressed)", row.seq),
            ));
        }
    };
    // Everything is checked before a byte is written, so a failure leaves no partial line.
    let line_start = out.len();
    out.extend_from_slice(b"{\"type\":");
    write_plain_str(&ty, out);
    out.extend_from_slice(b",\"seq\":");
    push_int(out, row.seq);
    out.extend_from_slice(b",\"time\":");
    push_int(out, time);
    out.extend_from_slice(b",\"data\":");
    if let Some((later, len)) = later {
        let at = out.len();
        match (&later, row.data) {
            (Later::Check, ValueRef::Text(t)) => out.extend_from_slice(t),
            // Zeros, not a newline: the line stays one line until the text is in place.
            _ => out.resize(at + len, 0),
        }
        scratch.deferred = Some(Job {
            at: at as u64,
            len,
            later,
        });
    } else if let Err(e) = js::write_value(&data, out) {
        // Too deep for dshs to rebuild is dshs's limit, not a row JSON.parse refuses.
        if let Some(hit) = crate::log::json::depth_limit(data.as_bytes()) {
            let at = format!("the data of row seq {}", row.seq);
            return Err(limited(scratch, hit.at(at)));
        }
        return Err(format!("data is not JSON ({e})"));
    }
    match (schema, row.sources) {
        (_, ValueRef::Null) => {}
        (Schema::V17, ValueRef::Blob(b)) => {
            // Each seq takes at least two bytes of the line ("0,"): a list that cannot fit
            // is refused before it is decoded (memory bounded by the guard, not the BLOB).
            let seqs = b.iter().filter(|&&byte| byte < 0x80).count() as u64;
            let least = (out.len() - line_start) as u64 + 2 * seqs;
            if least > max_scalar_bytes {
                return Err(too_long(
                    scratch,
                    max_scalar_bytes,
                    least,
                    true,
                    format!(
                        "row seq {} (its source_event_seqs BLOB of {} bytes lists {seqs} seqs)",
                        row.seq,
                        b.len()
                    ),
                ));
            }
            out.extend_from_slice(b",\"sourceEventSeqs\":[");
            let mut first = true;
            for_each_source(b, |seq| {
                if !std::mem::take(&mut first) {
                    out.push(b',');
                }
                push_int(out, seq as i64);
            })
            .map_err(|e| format!("source_event_seqs: {e}"))?;
            out.push(b']');
        }
        (Schema::V15, ValueRef::Text(t)) => {
            out.extend_from_slice(b",\"sourceEventSeqs\":");
            js::write_value(&lossy(t), out)
                .map_err(|e| format!("source_event_seqs is not JSON ({e})"))?;
        }
        (_, other) => {
            return Err(format!("source_event_seqs is {}", storage_class(other)));
        }
    }
    match row.surface_op {
        ValueRef::Null => {}
        ValueRef::Text(t) => {
            out.extend_from_slice(b",\"surfaceOp\":");
            js::write_value(&lossy(t), out).map_err(|e| format!("surface_op is not JSON ({e})"))?;
        }
        other => return Err(format!("surface_op is {}", storage_class(other))),
    }
    if ignorable == Some(1) {
        out.extend_from_slice(b",\"ignorable\":true");
    }
    out.extend_from_slice(b"}\n");
    debug_assert!(!out[line_start..out.len() - 1].contains(&b'\n'));
    let len = (out.len() - 1 - line_start) as u64;
    if len > max_scalar_bytes {
        return Err(too_long(
            scratch,
            max_scalar_bytes,
            len,
            false,
            format!("the logical line of row seq {}", row.seq),
        ));
    }
    Ok(Decoded {
        members: 1,
        lines: 1,
        last_time: time,
        turn_end: ty == Kind::TurnEnd.name(),
        expanded_bytes: 0,
    })
}

/// The storage-class rule of S4 a schema-17 row breaks, checked on the row as read (the
/// canonical STRICT tables already guarantee `type` TEXT, `time` INTEGER, `surface_op` TEXT
/// or NULL, `ignorable` NULL, 0 or 1; these are the rest). Same words as the SQL pass.
pub fn class_violation(row: &RawRow<'_>) -> Option<String> {
    let safe = |v: i64| v.unsigned_abs() <= MAX_SAFE;
    // A column holding a storage class its rule does not allow: its name, the class, the rule.
    let wrong = |column: &str, v: ValueRef<'_>, rule: &str| {
        Some(format!("{column} is {}{rule}", storage_class(v)))
    };
    if !(0..=MAX_SAFE as i64).contains(&row.seq) {
        return Some(format!("seq {} is not a safe integer ≥ 0", row.seq));
    }
    match row.ty {
        ValueRef::Text([]) => return Some("type is empty".into()),
        ValueRef::Text(_) => {}
        other => return wrong("type", other, ", not TEXT"),
    }
    match row.time {
        ValueRef::Integer(t) if safe(t) => {}
        ValueRef::Integer(t) => return Some(format!("time is not a safe integer ({t})")),
        other => {
            return Some(format!(
                "time is not a safe integer ({})",
                storage_class(other)
            ));
        }
    }
    let data_rule = " (stored data must be a string or blob: TEXT or BLOB)";
    match row.data {
        ValueRef::Text(_) | ValueRef::Blob(_) => {}
        other => return wrong("data", other, data_rule),
    }
    let sources_rule = ", not NULL or BLOB (schema 17 stores the varint list)";
    match row.sources {
        ValueRef::Null | ValueRef::Blob(_) => {}
        other => return wrong("source_event_seqs", other, sources_rule),
    }
    match row.surface_op {
        ValueRef::Null | ValueRef::Text(_) => {}
        other => return wrong("surface_op", other, ", not NULL or TEXT"),
    }
    match row.ignorable {
        ValueRef::Null | ValueRef::Integer(0 | 1) => None,
        ValueRef::Integer(i) => Some(format!("ignorable is {i}, not NULL, 0 or 1")),
        other => wrong("ignorable", other, ", not NULL, 0 or 1"),
    }
}

/// A string `JSON.stringify` writes from a decoded (not JSON-escaped) text.
pub fn write_plain_str(s: &str, out: &mut Vec<u8>) {
    let mut t = String::with_capacity(s.len() + 2);
    crate::log::json::write_js_str(s, &mut t);
    out.extend_from_slice(t.as_bytes());
}

/// Bytes as text the way Node decodes SQLite TEXT: UTF-8, invalid sequences as U+FFFD.
fn lossy(t: &[u8]) -> Cow<'_, str> {
    match simdutf8::basic::from_utf8(t) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(t),
    }
}

/// An integer in decimal (a line holds two, and a `sourceEventSeqs` list thousands).
fn push_int(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// How many bytes [`push_int`] writes for `v`.
fn decimal_len(v: i64) -> u64 {
    let n = v.unsigned_abs();
    let digits = if n == 0 { 1 } else { n.ilog10() as u64 + 1 };
    digits + u64::from(v < 0)
}

/// Why `data` gave no text.
enum DataError {
    /// The row does not decode (S4.1).
    Bad(Undecodable),
    /// The text would be longer than asked for: at least this many bytes.
    TooBig(u64),
}

impl From<Undecodable> for DataError {
    fn from(why: Undecodable) -> Self {
        DataError::Bad(why)
    }
}

/// The row (or the line it makes, `at`) is longer than the line guard (`found` bytes, or at
/// least that many): [`limited`].
fn too_long(
    scratch: &mut Scratch,
    max: u64,
    found: u64,
    at_least: bool,
    at: String,
) -> Undecodable {
    limited(
        scratch,
        LimitHit::new(Guard::LineBytes, max, found, at_least, at),
    )
}

/// Note that the row was not read because of a guard; the error to return.
fn limited(scratch: &mut Scratch, hit: LimitHit) -> Undecodable {
    let why = hit.to_string();
    scratch.limit = Some(hit);
    why
}

/// A `data` value the exact read copies into the line unchanged when it is upstream's own
/// form, as it is left for later: a TEXT without a newline (its bytes are copied now and
/// checked later), or one whole zstd frame that states a size within `max` (that many bytes
/// are reserved). `None`: it is decoded now.
fn deferrable(v: ValueRef<'_>, max: u64) -> Option<(Later, usize)> {
    match v {
        ValueRef::Text(t) if memchr::memchr(b'\n', t).is_none() => Some((Later::Check, t.len())),
        ValueRef::Blob(frame) => {
            let whole =
                zstd::zstd_safe::find_frame_compressed_size(frame).ok() == Some(frame.len());
            match zstd::zstd_safe::get_frame_content_size(frame) {
                Ok(Some(size)) if whole && size <= max => {
                    Some((Later::Zstd(frame.to_vec()), size as usize))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// The text of `data` (S4.1): TEXT as it is (decoded lossily, as Node does), a BLOB as a zstd
/// frame of strict UTF-8 whose leading U+FEFF is dropped, at most `max` bytes.
fn data_text<'r>(
    v: ValueRef<'r>,
    max: u64,
    buf: &'r mut Vec<u8>,
    zstd: &mut Option<zstd::bulk::Decompressor<'static>>,
) -> Result<Cow<'r, str>, DataError> {
    match v {
        ValueRef::Text(t) => Ok(lossy(t)),
        ValueRef::Blob(b) => {
            decompress(b, max, buf, zstd)?;
            let text = std::str::from_utf8(buf)
                .map_err(|e| format!("data BLOB decompresses to invalid UTF-8 ({e})"))?;
            Ok(Cow::Borrowed(text.strip_prefix('\u{feff}').unwrap_or(text)))
        }
        other => Err(DataError::Bad(format!(
            "data is {}, not TEXT or BLOB",
            storage_class(other)
        ))),
    }
}

/// Decompress a zstd `data` BLOB into `buf`, refusing more than `max` bytes of output.
///
/// The rule is libzstd's (`ZSTD_decompress`, and the streaming decoder Node's
/// `zstdDecompressSync` runs): the BLOB is one or more whole frames, their outputs
/// concatenated; anything after the last frame that is not a frame (garbage), or a frame cut
/// short, makes it undecodable — whatever the frames' content-size flags say. A BLOB that
/// is exactly one frame stating its content size (upstream's always are) is decoded in one
/// call by a reused context; any other through the streaming decoder.
fn decompress(
    frame: &[u8],
    max: u64,
    buf: &mut Vec<u8>,
    zstd: &mut Option<zstd::bulk::Decompressor<'static>>,
) -> Result<(), DataError> {
    buf.clear();
    let whole = zstd::zstd_safe::find_frame_compressed_size(frame).ok() == Some(frame.len());
    if whole && let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(frame) {
        if size > max {
            return Err(DataError::TooBig(size));
        }
        if zstd.is_none() {
            *zstd = Some(
                zstd::bulk::Decompressor::new()
                    .map_err(|e| format!("no zstd decompressor ({e})"))?,
            );
        }
        if let Some(d) = zstd.as_mut() {
            buf.reserve_exact(size as usize);
            let n = d
                .decompress_to_buffer(frame, buf)
                .map_err(|e| format!("data BLOB does not decompress ({e})"))?;
            if n as u64 != size {
                return Err(DataError::Bad(format!(
                    "data BLOB decompresses to {n} bytes, its frame says {size}"
                )));
            }
            return Ok(());
        }
    }
    let decoder = zstd::stream::read::Decoder::with_buffer(frame)
        .map_err(|e| format!("data BLOB is not a zstd frame ({e})"))?;
    let mut limited = decoder.take(max.saturating_add(1));
    limited
        .read_to_end(buf)
        .map_err(|e| format!("data BLOB does not decompress ({e})"))?;
    if buf.len() as u64 > max {
        return Err(DataError::TooBig(buf.len() as u64));
    }
    Ok(())
}

/// Decode a schema-17 `source_event_seqs` BLOB (S4.2) into `out`.
pub fn decode_sources(b: &[u8], out: &mut Vec<u64>) -> Result<(), String> {
    out.clear();
    for_each_source(b, |seq| out.push(seq))
}

/// Each seq of a schema-17 `source_event_seqs` BLOB (S4.2), in order, without holding the
/// list (a BLOB of N bytes lists up to N seqs).
pub fn for_each_source(b: &[u8], mut each: impl FnMut(u64)) -> Result<(), String> {
    let mut i = 0;
    let mut prev: i64 = 0;
    let mut first = true;
    while i < b.len() {
        let mut value: u64 = 0;
        let mut shift = 0u32;
        loop {
            let Some(&byte) = b.get(i) else {
                return Err("truncated varint".into());
            };
            if shift > 56 {
                return Err("varint is out of range".into());
            }
            i += 1;
            if byte == 0 && shift > 0 {
                return Err("non-canonical varint".into());
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        let seq = if std::mem::take(&mut first) {
            if value > MAX_SAFE {
                return Err("first seq is out of range".into());
            }
            value as i64
        } else {
            if value > 2 * MAX_SAFE {
                return Err("delta is out of range".into());
            }
            let d = if value.is_multiple_of(2) {
                (value / 2) as i64
            } else {
                -(value.div_ceil(2) as i64)
            };
            prev + d
        };
        if !(0..=MAX_SAFE as i64).contains(&seq) {
            return Err("decoded seq is out of range".into());
        }
        each(seq as u64);
        prev = seq;
    }
    Ok(())
}

/// Encode a list as the schema-17 BLOB: the first seq, then ZigZag deltas, as LEB128.
pub fn encode_sources(seqs: &[u64], out: &mut Vec<u8>) {
    let mut prev: i64 = 0;
    for (i, &s) in seqs.iter().enumerate() {
        let v = if i == 0 {
            s
        } else {
            let d = s as i64 - prev;
            if d >= 0 {
                (d as u64) * 2
            } else {
                (-d) as u64 * 2 - 1
            }
        };
        prev = s as i64;
        let mut v = v;
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        }
    }
}

fn is_safe(x: f64) -> bool {
    x.is_finite() && x.fract() == 0.0 && x.abs() <= MAX_SAFE as f64
}

/// Expand a packed chunk row (S5) after validating it.
fn packed(
    row: &RawRow<'_>,
    tag: &str,
    time0: i64,
    keep_packed: bool,
    scratch: &mut Scratch,
    out: &mut Vec<u8>,
) -> Result<Decoded, Undecodable> {
    let kind = match tag {
        "text-chunks" => "text-delta",
        "reasoning-chunks" => "reasoning-delta",
        "tool-call-chunks" => "tool-call-delta",
        _ => {
            return Err(format!(
                "ignorable is 0 (the packed-row discriminator) but type {tag:?} is not a packed-row tag"
            ));
        }
    };
    if !matches!(row.sources, ValueRef::Null) || !matches!(row.surface_op, ValueRef::Null) {
        return Err("a packed row must have NULL source_event_seqs and surface_op".into());
    }
    let text = match row.data {
        ValueRef::Text(t) => {
            if t.len() > PACKED_MAX_BYTES {
                return Err(format!(
                    "packed row data holds {} bytes, more than {PACKED_MAX_BYTES}",
                    t.len()
                ));
            }
            lossy(t)
        }
        other => match data_text(
            other,
            PACKED_MAX_BYTES as u64,
            &mut scratch.data,
            &mut scratch.zstd,
        ) {
            Ok(text) => text,
            Err(DataError::Bad(why)) => return Err(why),
            // S5's own bound, upstream's rule: the row does not decode.
            Err(DataError::TooBig(n)) => {
                return Err(format!(
                    "packed row data decompresses to {n} bytes or more, more than {PACKED_MAX_BYTES}"
                ));
            }
        },
    };
    if text.len() > PACKED_MAX_BYTES {
        return Err(format!(
            "packed row data holds {} bytes, more than {PACKED_MAX_BYTES}",
            text.len()
        ));
    }
    let tool = kind == "tool-call-delta";
    let run = match js::run_fast(&text, tool, keep_packed) {
        Some(run) => run,
        None => slow_run(&text, tool)?,
    };
    let members = &run.members;
    if !(PACKED_MIN_MEMBERS..=PACKED_MAX_MEMBERS).contains(&members.len()) {
        return Err(format!(
            "packed row holds {} members, not {PACKED_MIN_MEMBERS} to {PACKED_MAX_MEMBERS}",
            members.len()
        ));
    }
    let dt = &run.dt;
    if dt.len() != members.len() - 1 {
        return Err(format!(
            "packed row dt has {} entries for {} members (members − 1 expected)",
            dt.len(),
            members.len()
        ));
    }
    let last_seq = row.seq as u64 + members.len() as u64 - 1;
    if last_seq > MAX_SAFE {
        return Err("packed row's last member seq is not a safe integer".into());
    }
    let mut fixed = Vec::new();
    {
        fixed.extend_from_slice(b",\"data\":{\"turn\":");
        fixed.extend_from_slice(run.turn.as_bytes());
        fixed.extend_from_slice(b",\"step\":");
        fixed.extend_from_slice(run.step.as_bytes());
        let _ = write!(fixed, ",\"chunk\":{{\"type\":\"{kind}\",\"index\":");
        fixed.extend_from_slice(run.index.as_bytes());
        if let Some(id) = run.id {
            fixed.extend_from_slice(b",\"id\":");
            js::write_string(id, &mut fixed);
        }
        if let Some(name) = run.name {
            fixed.extend_from_slice(b",\"name\":");
            js::write_string(name, &mut fixed);
        }
        fixed.extend_from_slice(if tool {
            b",\"argumentsDelta\":"
        } else {
            b",\"text\":"
        });
    }
    // The bytes of each expanded member line besides its seq, time and member string.
    const MEMBER_FRAME: u64 = (MEMBER_HEAD[0].len()
        + Kind::AssistantChunk.name().len()
        + MEMBER_HEAD[1].len()
        + b",\"time\":".len()
        + b"}}}\n".len()) as u64;
    let mut expanded_bytes = 0u64;
    let mut t = time0;
    let mut times = Vec::new();
    let mut ranges = Vec::new();
    let each = match members {
        Members::Each(each) => Some(each),
        Members::Tallied { bytes, .. } => {
            expanded_bytes += bytes;
            None
        }
    };
    for k in 0..members.len() {
        let member = match each.map(|m| m[k]) {
            Some(Some(member)) => Some(member),
            Some(None) => return Err(format!("packed row member {k} is not a string")),
            // Counted and measured above: a row kept packed (see `js::run_fast`).
            None => None,
        };
        if k > 0 {
            let Some(d) = dt[k - 1] else {
                return Err(format!("packed row dt[{}] is not a number", k - 1));
            };
            if !is_safe(d) {
                return Err(format!("packed row dt[{}] is not a safe integer", k - 1));
            }
            t = t
                .checked_add(d as i64)
                .filter(|t| t.unsigned_abs() <= MAX_SAFE)
                .ok_or_else(|| format!("packed row time of member {k} is not a safe integer"))?;
        }
        if keep_packed {
            let member_bytes = match member {
                None => 0,
                Some(member) if run.canonical => member.len() as u64 + 2,
                Some(member) => {
                    let mark = out.len();
                    js::write_string(member, out);
                    let n = (out.len() - mark) as u64;
                    out.truncate(mark);
                    n
                }
            };
            expanded_bytes += MEMBER_FRAME
                + decimal_len(row.seq + k as i64)
                + decimal_len(t)
                + fixed.len() as u64
                + member_bytes;
            continue;
        }
        let Some(member) = member else {
            unreachable!("members are tallied only for a row kept packed");
        };
        // Member strings are slices of the text: kept as ranges of it.
        let start = member.as_ptr() as usize - text.as_ptr() as usize;
        debug_assert!(start + member.len() <= text.len());
        ranges.push((start, start + member.len()));
        times.push(t);
    }
    if !keep_packed {
        let mut expansion = Expansion {
            seq0: row.seq,
            fixed,
            text: text.clone().into_owned(),
            members: ranges,
            times,
            canonical: run.canonical,
            next: 0,
        };
        if scratch.lazy {
            scratch.pending = Some(expansion);
        } else {
            while expansion.write_next(out) {}
        }
    }
    if keep_packed {
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(tag.as_bytes());
        out.extend_from_slice(b"\",\"seq0\":");
        push_int(out, row.seq);
        out.extend_from_slice(b",\"time0\":");
        push_int(out, time0);
        out.extend_from_slice(b",\"data\":");
        if run.canonical {
            out.extend_from_slice(text.as_bytes());
        } else {
            js::write_value(&text, out)
                .map_err(|e| format!("packed row data is not JSON ({e})"))?;
        }
        out.extend_from_slice(b"}\n");
    }
    Ok(Decoded {
        members: members.len() as u64,
        lines: if keep_packed { 1 } else { members.len() as u64 },
        last_time: t,
        turn_end: false,
        expanded_bytes,
    })
}

/// A packed row's members (its `texts` or `args`).
pub enum Members<'a> {
    /// Each one's raw contents; `None`: not a string.
    Each(Vec<Option<&'a str>>),
    /// All strings as `JSON.stringify` writes them: how many, and their bytes with their
    /// quotes (what a row kept packed needs of them).
    Tallied { count: usize, bytes: u64 },
}

impl Members<'_> {
    pub fn len(&self) -> usize {
        match self {
            Members::Each(m) => m.len(),
            Members::Tallied { count, .. } => *count,
        }
    }
}

/// A packed row's run data, checked for its keys (S5), spelled as `JSON.stringify` would.
pub struct Run<'a> {
    pub turn: Cow<'a, str>,
    pub step: Cow<'a, str>,
    pub index: Cow<'a, str>,
    /// Raw string contents (between the quotes).
    pub id: Option<&'a str>,
    pub name: Option<&'a str>,
    pub members: Members<'a>,
    /// `None`: not a number.
    pub dt: Vec<Option<f64>>,
    /// The whole text is `JSON.stringify` output, so raw strings are written as they are.
    pub canonical: bool,
}

/// The general reading of run data: any valid JSON text (keys and types checked here, in
/// the order the messages name them).
fn slow_run(text: &str, tool: bool) -> Result<Run<'_>, Undecodable> {
    let v = Value::parse(text, 16).map_err(|e| format!("packed row data is not JSON ({e})"))?;
    let keys = v.keys();
    let has = |k: &str| {
        keys.iter()
            .any(|n| n.len() == k.len() + 2 && &n[1..n.len() - 1] == k.as_bytes())
    };
    let wanted: &[&str] = if tool {
        &["turn", "step", "index", "id", "dt", "args"]
    } else {
        &["turn", "step", "index", "dt", "texts"]
    };
    let optional = usize::from(tool && has("name"));
    if !matches!(v, Value::Obj(_))
        || keys.len() != wanted.len() + optional
        || !wanted.iter().all(|k| has(k))
    {
        return Err(format!(
            "packed row data must have exactly the keys {}{}",
            wanted.join(", "),
            if tool { " (and optionally name)" } else { "" }
        ));
    }
    let num = |k: &str| match v.get(k) {
        Some(Value::Num(x)) => {
            let mut t = Vec::new();
            crate::log::json::js_number(*x, &mut t);
            Ok(Cow::Owned(String::from_utf8(t).unwrap_or_default()))
        }
        _ => Err(format!("packed row {k} is not a number")),
    };
    let (turn, step, index) = (num("turn")?, num("step")?, num("index")?);
    let str_of = |k: &str| match v.get(k) {
        Some(Value::Str(s)) => Ok(Some(*s)),
        None => Ok(None),
        _ => Err(format!("packed row {k} is not a string")),
    };
    let (id, name) = if tool {
        (str_of("id")?, str_of("name")?)
    } else {
        (None, None)
    };
    let Some(Value::Arr(members)) = v.get(if tool { "args" } else { "texts" }) else {
        return Err(format!(
            "packed row {} is not an array",
            if tool { "args" } else { "texts" }
        ));
    };
    let members = members
        .iter()
        .map(|m| match m {
            Value::Str(s) => Some(*s),
            _ => None,
        })
        .collect::<Vec<_>>();
    let dt = match v.get("dt") {
        Some(Value::Arr(dt)) => dt
            .iter()
            .map(|d| match d {
                Value::Num(x) => Some(*x),
                _ => None,
            })
            .collect(),
        // The bounds come first when the members are many or few (as upstream checks them).
        _ if !(PACKED_MIN_MEMBERS..=PACKED_MAX_MEMBERS).contains(&members.len()) => Vec::new(),
        _ => return Err("packed row dt is not an array".into()),
    };
    Ok(Run {
        turn,
        step,
        index,
        id,
        name,
        members: Members::Each(members),
        dt,
        canonical: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_worked_examples_of_s4_2_decode_and_encode() {
        let cases: [(&[u64], &[u8]); 4] = [
            (&[9, 10, 11, 12, 13], &[0x09, 0x02, 0x02, 0x02, 0x02]),
            (&[19, 20, 4], &[0x13, 0x02, 0x1F]),
            (&[300, 301, 302, 5], &[0xAC, 0x02, 0x02, 0x02, 0xD1, 0x04]),
            (&[], &[]),
        ];
        for (list, bytes) in cases {
            let mut got = Vec::new();
            decode_sources(bytes, &mut got).unwrap();
            assert_eq!(got, list);
            let mut enc = Vec::new();
            encode_sources(list, &mut enc);
            assert_eq!(enc, bytes);
        }
    }

    /// turn, step, index, id, name, members (as written), dt.
    type Fields = (
        String,
        String,
        String,
        Option<String>,
        Option<String>,
        Vec<Option<String>>,
        Vec<Option<f64>>,
    );

    fn fields(r: &Run<'_>) -> Fields {
        let w = |raw: &str| {
            let mut out = Vec::new();
            js::write_string(raw, &mut out);
            String::from_utf8(out).unwrap()
        };
        (
            r.turn.to_string(),
            r.step.to_string(),
            r.index.to_string(),
            r.id.map(w),
            r.name.map(w),
            match &r.members {
                Members::Each(m) => m.iter().map(|m| m.map(w)).collect(),
                Members::Tallied { .. } => panic!("members tallied, not listed"),
            },
            r.dt.clone(),
        )
    }

    /// How many members, and their bytes as `JSON.stringify` writes them (`None`: one is not
    /// a string).
    fn tally(r: &Run<'_>) -> (usize, Option<u64>) {
        match &r.members {
            Members::Each(m) => (
                m.len(),
                m.iter()
                    .map(|m| {
                        let mut out = Vec::new();
                        js::write_string((*m)?, &mut out);
                        Some(out.len() as u64)
                    })
                    .sum(),
            ),
            Members::Tallied { count, bytes } => (*count, Some(*bytes)),
        }
    }

    /// Run data from pieces: members (raw, between quotes, or a bare value when starting
    /// with `!`) and `dt` items as written.
    fn run_text(tool: bool, members: &[String], dt: &[&str]) -> String {
        let items: Vec<String> = members
            .iter()
            .map(|m| match m.strip_prefix('!') {
                Some(bare) => bare.to_owned(),
                None => format!("\"{m}\""),
            })
            .collect();
        let head = if tool {
            r#"{"turn":1,"step":2,"index":0,"id":"c1","name":"bash","#
        } else {
            r#"{"turn":1,"step":2,"index":0,"#
        };
        format!(
            r#"{head}"dt":[{}],"{}":[{}]}}"#,
            dt.join(","),
            if tool { "args" } else { "texts" },
            items.join(",")
        )
    }

    proptest! {
        /// Members counted and measured a window at a time, and `dt` read a window at a time,
        /// say what reading them item by item says, whatever the pieces: mostly run data as
        /// upstream writes it, with at most one member and one `dt` item of another form.
        #[test]
        fn tallied_members_and_flat_dt_are_what_the_items_say(
            tool in any::<bool>(),
            members in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::sample::select(vec![
                        "a", "é", "\\n", "\\\"", "\\\\", "\\b", ",", "]", "[", " ", "\\t",
                        "xyz012", "\\u0001", "\\ud800",
                    ]),
                    0..6,
                ).prop_map(|p| p.concat()),
                0..90,
            ),
            odd_member in proptest::option::of((0usize..90, proptest::sample::select(vec![
                // Not the form `JSON.stringify` writes, or not a string.
                "\\/", "\\u00e9", "x\\u0041", "!1", "!null", "![]", "\u{1}",
            ]))),
            dt in proptest::collection::vec(
                proptest::sample::select(vec!["0", "7", "42", "123456789012345"]),
                0..90,
            ),
            odd_dt in proptest::option::of((0usize..90, proptest::sample::select(vec![
                // Upstream's form but not a flat array's; then not upstream's form.
                "1234567890123456", "-3", "1.5", "1e+21", "01", " 1", "\"1\"",
            ]))),
        ) {
            let mut members = members;
            if let Some((at, odd)) = odd_member && at < members.len() {
                members[at] = odd.to_owned();
            }
            let mut dt = dt;
            if let Some((at, odd)) = odd_dt && at < dt.len() {
                dt[at] = odd;
            }
            let text = run_text(tool, &members, &dt);
            let each = js::run_fast(&text, tool, false);
            let tallied = js::run_fast(&text, tool, true);
            prop_assert_eq!(each.is_some(), tallied.is_some(), "{}", text);
            if let (Some(each), Some(tallied)) = (each, tallied) {
                prop_assert_eq!(tally(&each), tally(&tallied), "{}", text);
                prop_assert_eq!(
                    (&each.turn, &each.step, &each.index, each.id, each.name, &each.dt),
                    (&tallied.turn, &tallied.step, &tallied.index, tallied.id, tallied.name, &tallied.dt),
                    "{}", text
                );
                // And the general reading agrees on every field.
                let slow = slow_run(&text, tool).expect("canonical run data is JSON");
                prop_assert_eq!(fields(&each), fields(&slow), "{}", text);
            }
        }
    }

    #[test]
    fn the_fast_reading_of_run_data_agrees_with_the_general_one() {
        let canonical = [
            (
                r#"{"turn":1,"step":2,"index":0,"dt":[1,-3,0],"texts":["a","\n","\ud800","é"]}"#,
                false,
            ),
            (
                r#"{"turn":1,"step":2,"index":3,"id":"c\"1","name":"bash","dt":[],"args":["{"]}"#,
                true,
            ),
            (
                r#"{"dt":[5],"texts":["x","y"],"index":1.5,"step":2,"turn":1e+21}"#,
                false,
            ),
        ];
        for (text, tool) in canonical {
            let fast = js::run_fast(text, tool, false).expect("canonical run data");
            assert!(fast.canonical);
            let slow = slow_run(text, tool).unwrap();
            assert_eq!(fields(&fast), fields(&slow), "{text}");
            let tallied = js::run_fast(text, tool, true).expect("canonical run data");
            assert_eq!(tally(&tallied), tally(&slow), "{text}");
        }
        // Anything else takes the general reading.
        for (text, tool) in [
            (
                r#"{ "turn":1,"step":2,"index":0,"dt":[],"texts":["a"]}"#,
                false,
            ),
            (
                r#"{"turn":1.0,"step":2,"index":0,"dt":[],"texts":["a"]}"#,
                false,
            ),
            (
                r#"{"turn":1,"step":2,"index":0,"dt":[],"texts":["\u0041"]}"#,
                false,
            ),
            (
                r#"{"turn":1,"turn":1,"step":2,"index":0,"dt":[],"texts":["a"]}"#,
                false,
            ),
            (
                r#"{"turn":1,"step":2,"index":0,"dt":[],"texts":["a"]}"#,
                true,
            ),
            (
                r#"{"turn":1,"step":2,"index":0,"dt":[],"texts":[1]}"#,
                false,
            ),
        ] {
            assert!(js::run_fast(text, tool, false).is_none(), "{text}");
            assert!(js::run_fast(text, tool, true).is_none(), "{text}");
        }
        let slow = slow_run(
            r#"{"turn":1.0,"step":2,"index":0,"dt":[],"texts":["\u0041"]}"#,
            false,
        )
        .unwrap();
        assert_eq!(fields(&slow).0, "1");
        assert_eq!(fields(&slow).5, [Some("\"A\"".to_owned())]);
    }

    /// A frame of `text` with or without the content-size field.
    fn frame(text: &[u8], content_size: bool) -> Vec<u8> {
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        e.include_contentsize(content_size).unwrap();
        if content_size {
            e.set_pledged_src_size(Some(text.len() as u64)).unwrap();
        }
        std::io::Write::write_all(&mut e, text).unwrap();
        let f = e.finish().unwrap();
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&f).ok().flatten(),
            content_size.then_some(text.len() as u64)
        );
        f
    }

    #[test]
    fn a_data_blob_is_read_by_libzstds_rule_whatever_the_content_size_flag() {
        let mut buf = Vec::new();
        let mut ctx = None;
        let mut read = |blob: &[u8]| match decompress(blob, 1 << 20, &mut buf, &mut ctx) {
            Ok(()) => Ok(String::from_utf8(buf.clone()).unwrap()),
            Err(DataError::Bad(why)) => Err(why),
            Err(DataError::TooBig(n)) => Err(format!("too big {n}")),
        };
        for flag in [true, false] {
            let one = frame(br#"{"a":"#, flag);
            let two = frame(br#"1}"#, flag);
            assert_eq!(read(&one).as_deref(), Ok(r#"{"a":"#));
            // Concatenated frames are one text (ZSTD_decompress, Node's streaming decoder).
            let both = [one.clone(), two.clone()].concat();
            assert_eq!(read(&both).as_deref(), Ok(r#"{"a":1}"#), "flag {flag}");
            // Anything after the last frame that is not a frame fails, as does a frame cut
            // short.
            for junk in [&b"x"[..], b"\0\0\0\0", b"garbage after the frame"] {
                let blob = [both.clone(), junk.to_vec()].concat();
                assert!(read(&blob).is_err(), "flag {flag} junk {junk:?}");
                let blob = [frame(br#"{"a":1}"#, flag), junk.to_vec()].concat();
                assert!(read(&blob).is_err(), "flag {flag} junk {junk:?}");
            }
            let cut = &both[..both.len() - 1];
            assert!(read(cut).is_err(), "flag {flag}: cut short");
        }
    }

    #[test]
    fn integers_are_written_in_plain_decimal() {
        for v in [
            0,
            7,
            10,
            99,
            100,
            101,
            12345,
            -1,
            -10,
            -100,
            i64::MAX,
            i64::MIN,
            9_007_199_254_740_991,
        ] {
            let mut out = Vec::new();
            push_int(&mut out, v);
            assert_eq!(String::from_utf8(out).unwrap(), v.to_string());
            assert_eq!(decimal_len(v), v.to_string().len() as u64);
        }
    }

    #[test]
    fn bad_varints_are_refused_with_upstreams_reasons() {
        let mut out = Vec::new();
        let cases: [(&[u8], &str); 5] = [
            (&[0x80], "truncated varint"),
            (&[0x81, 0x00], "non-canonical varint"),
            (&[0xFF; 10], "varint is out of range"),
            (
                &[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10],
                "first seq is out of range",
            ),
            (&[0x01, 0x05], "decoded seq is out of range"),
        ];
        for (bytes, why) in cases {
            assert_eq!(
                decode_sources(bytes, &mut out).unwrap_err(),
                why,
                "{bytes:?}"
            );
        }
        // 2^53 − 1 itself is fine as a first value.
        let mut max = Vec::new();
        encode_sources(&[MAX_SAFE], &mut max);
        decode_sources(&max, &mut out).unwrap();
        assert_eq!(out, [MAX_SAFE]);
    }
}
