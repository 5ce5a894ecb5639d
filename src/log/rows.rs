//! Rows to events: JSON parse, packed chunk rows expanded (§5.2), range-encoded
//! `sourceEventSeqs` decoded (§5.3), envelope taken apart (§5.1). A row that fails here in a
//! way §6.1 calls "bad" is returned as [`Row::Bad`]; the committed-prefix decision is the
//! scanner's.

use std::borrow::Cow;

use super::codes::Code;
use super::dialect::{Dialect, ToolResultShape};
use super::event::Kind;
use super::finding::Pos;
use super::idset::SeqSet;
use super::vocab::TypeClass;

use super::json::{self, Json, MAX_SAFE, Seg, Shape};

/// One event, envelope taken apart. `data` and the surface metadata stay JSON trees.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    pub pos: Pos,
    pub seq: u64,
    pub time: i64,
    pub ty: Cow<'a, str>,
    /// `ty` interned.
    pub kind: Kind,
    pub data: Json<'a>,
    pub surface_op: Option<Json<'a>>,
    /// The stored form (plain or range-encoded); decoded by [`decode_sources`].
    pub source_seqs: Option<Json<'a>>,
    pub ignorable: bool,
    /// A member of a v0/v1 packed chunk row.
    pub packed: bool,
    /// Set when v0 legacy normalization rewrote this event in memory (§16).
    pub normalized: bool,
    /// A `tool/result`'s [`result_digest`], computed
    /// when the line was decoded (formats 1 on); None: computed when the fold needs it.
    pub result_digest: Option<u64>,
    /// The stored line the event was parsed from, when the parser read exactly its bytes
    /// (not a lossy copy, not a packed row's member) and no object in it repeats a key:
    /// offsets of values in it are then offsets in the file's line (see
    /// [`Event::offset_in_line`]), and the first of a key is its only one.
    pub line: Option<&'a str>,
}

impl<'a> Event<'a> {
    /// Give the event another type (v0 legacy normalization renames some).
    pub fn set_type(&mut self, ty: Cow<'a, str>) {
        self.kind = Kind::of(&ty);
        self.ty = ty;
    }

    /// The message object of a message event: `data` itself for `user/message`,
    /// `data.message` otherwise.
    pub fn message(&self) -> Option<&Json<'a>> {
        if self.kind == Kind::UserMessage {
            Some(&self.data)
        } else {
            self.data.get("message")
        }
    }

    /// Where the object `value` (a part of this event's tree) starts in the stored line, when
    /// that can be told from the tree: its first key is borrowed from the line. `None` for
    /// anything else (an empty object, an escaped first key, no stored line).
    pub fn offset_in_line(&self, value: &Json<'a>) -> Option<usize> {
        let line = self.line?;
        let (Cow::Borrowed(key), _) = value.as_obj()?.first()? else {
            return None;
        };
        let key_at = (key.as_ptr() as usize).checked_sub(line.as_ptr() as usize)?;
        // Before the key's text: its quote, whitespace, and the object's `{`.
        let before = line.as_bytes().get(..key_at)?.strip_suffix(b"\"")?;
        let open = before.trim_ascii_end().len().checked_sub(1)?;
        (before[open] == b'{').then_some(open)
    }

    /// The `tool-call` content blocks of the event's message, in order (an assistant
    /// message advertises its calls this way).
    pub fn tool_call_blocks(&self) -> impl Iterator<Item = &Json<'a>> {
        self.message()
            .and_then(|m| m.get("content"))
            .and_then(Json::as_arr)
            .unwrap_or_default()
            .iter()
            .filter(|b| b.get("type").and_then(Json::as_str) == Some("tool-call"))
    }

    /// `data.turn` as a safe integer.
    pub fn turn(&self) -> Option<i64> {
        self.data.get("turn").and_then(Json::safe_int)
    }

    /// `data.step` as a safe integer.
    pub fn step(&self) -> Option<i64> {
        self.data.get("step").and_then(Json::safe_int)
    }

    /// `surfaceOp` is an object whose `op` is `"replace"` (whatever its other keys).
    pub fn is_replacement(&self) -> bool {
        self.surface_op
            .as_ref()
            .and_then(|op| op.get("op"))
            .and_then(Json::as_str)
            == Some("replace")
    }
}

/// An event whose envelope is wrong (§5.1): it occupies its seq but is never folded.
#[derive(Debug, Clone)]
pub struct BadEnvelope {
    pub pos: Pos,
    pub seq: u64,
    pub ty: Option<String>,
    pub why: String,
}

/// A row's event slots: one, held inline, for every row but a packed row decoded without an
/// arena (a heap list per line had cost an allocation, a free and, in the pipeline, freshly
/// faulted pages for every line).
pub type Candidates<'a> = smallvec::SmallVec<[Candidate<'a>; 1]>;

/// One decoded event slot: its seq (when the row states a usable one) and the event.
#[derive(Debug)]
pub struct Candidate<'a> {
    /// `None` when `seq` is missing or not a safe integer ≥ 0 (always a gap, §6.1 B4).
    pub seq: Option<u64>,
    pub event: Result<Event<'a>, BadEnvelope>,
    pub is_turn_end: bool,
    /// The event's type class, when a parsing thread already looked it up (formats 1 on:
    /// format 0's legacy normalization may still rename the type); `None`: the fold does.
    pub class: Option<TypeClass>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadKind {
    /// B1: not JSON.
    Unparsable,
    /// B2: JSON but not an object.
    NotEvent,
    /// B3: packed-row validation, v2+ packed tag, or range decoding failed.
    Malformed(Code),
    /// Not bad at all: past one of dshs's own guards (JSON nested deeper than the depth
    /// guard, [`crate::log::limits`]). The pass stops at it instead of judging it.
    Limit,
}

#[derive(Debug)]
pub struct BadRow {
    pub kind: BadKind,
    pub why: String,
    /// The row's own seq (`seq0` for a packed row) when it is a safe integer ≥ 0.
    pub seq: Option<u64>,
    pub event_type: Option<String>,
    pub is_turn_end: bool,
    /// How many events the row claims (the members of a packed row), when known.
    pub members: u64,
}

#[derive(Debug)]
pub enum Row<'a> {
    /// One event, or the members of a packed row; `audit` covers the whole line.
    Events(Candidates<'a>, json::Audit),
    /// A packed chunk row, its members not built (only [`decode_in`] with an arena returns
    /// one; [`decode_str`] returns its members as `Events`).
    Packed(Packed<'a>, json::Audit),
    Bad(BadRow),
}

/// The tags of packed chunk rows (§5.2).
pub(crate) const PACKED_TAGS: [&str; 3] = ["text-chunks", "reasoning-chunks", "tool-call-chunks"];
const ENVELOPE_KEYS: [&str; 7] = [
    "type",
    "seq",
    "time",
    "data",
    "surfaceOp",
    "sourceEventSeqs",
    "ignorable",
];

/// Decode one complete line given as bytes (invalid UTF-8 is a parse error here; the
/// scanner decodes lossily first and calls [`decode_str`]).
pub fn decode<'a>(text: &'a [u8], pos: Pos, dialect: &Dialect) -> Row<'a> {
    match std::str::from_utf8(text) {
        Ok(s) => decode_in(s, pos, dialect, None, None, true, Shape::Full),
        Err(e) => Row::Bad(BadRow {
            kind: BadKind::Unparsable,
            why: format!("invalid UTF-8: {e}"),
            seq: None,
            event_type: None,
            is_turn_end: false,
            members: 0,
        }),
    }
}

/// Decode one complete line (already UTF-8, lossily if need be).
pub fn decode_str<'a>(text: &'a str, pos: Pos, dialect: &Dialect) -> Row<'a> {
    decode_in(text, pos, dialect, None, None, false, Shape::Full)
}

/// [`decode_str`] with the row's JSON lists (and the escaped strings a rule reads) in `arena`
/// (the scan's hot path: see [`json::List`]). `stored`: `text` is the stored line itself, not
/// a lossy copy of it (see [`Event::line`]). `shape`: the whole tree, or a lean one for a
/// pass whose readers never look inside `data.stream`'s records, or past a packed row's first
/// member ([`json::Shape`]).
// Inlined where a row is stored, so its ~250 bytes are built there rather than returned
// through memory and copied.
#[inline(always)]
pub fn decode_in<'a>(
    text: &'a str,
    pos: Pos,
    dialect: &Dialect,
    arena: Option<&'a json::Arena>,
    mut scratch: Option<&mut json::Scratch<'a>>,
    stored: bool,
    shape: Shape,
) -> Row<'a> {
    // An empty line is unparsable JSON (§3.2): said without asking a parser (a crash tail or
    // a decompression bomb may hold billions of them).
    let parsed = if text.is_empty() {
        Err("empty line (not valid JSON)".to_owned())
    } else {
        match json::parse_tallied_in(text, arena, scratch.as_deref_mut(), shape) {
            // A lean packed row is handed on only where its tally is sure to be the row's
            // (no repeated key: a second `type` or `data` may say otherwise) and an arena
            // keeps it packed; else the line is read again whole (rare).
            Ok((_, audit, Some(_))) if audit.duplicate_key.is_some() || arena.is_none() => {
                json::parse_tallied_in(text, arena, scratch, Shape::Full)
            }
            parsed => parsed,
        }
    };
    let (value, audit, tally) = match parsed {
        Ok(parsed) => parsed,
        Err(why) => {
            let deep = json::depth_limit(text.as_bytes()).is_some();
            return Row::Bad(BadRow {
                kind: if deep {
                    BadKind::Limit
                } else {
                    BadKind::Unparsable
                },
                why,
                seq: None,
                event_type: None,
                is_turn_end: false,
                members: 0,
            });
        }
    };
    let Json::Obj(_) = value else {
        return Row::Bad(BadRow {
            kind: BadKind::NotEvent,
            why: format!("the row is {}, not an event object", value.kind_name()),
            seq: None,
            event_type: None,
            is_turn_end: false,
            members: 0,
        });
    };
    let slots = envelope_slots(value.as_obj().unwrap_or_default());
    // The type is copied only for a bad row's report (not once per event).
    let ty = slots.values[0].and_then(Json::as_str);
    let is_turn_end = ty == Some(Kind::TurnEnd.name());
    let owned_type = |v: &Json<'_>| v.get("type").and_then(Json::as_str).map(str::to_owned);
    let packed_tag = PACKED_TAGS.iter().copied().find(|t| ty == Some(*t));
    if let Some(tag) = packed_tag.filter(|_| !dialect.packed_by_seq0 || value.get("seq0").is_some())
    {
        let seq0 = value.get("seq0").and_then(Json::safe_uint);
        let list_key = if tag == "tool-call-chunks" {
            "args"
        } else {
            "texts"
        };
        let members = value
            .get("data")
            .and_then(|d| d.get(list_key))
            .and_then(Json::as_arr)
            .map_or(1, |a| {
                pieces(list_key, a, tally.as_deref()).len.max(1) as u64
            });
        if !dialect.packed_rows {
            return Row::Bad(BadRow {
                kind: BadKind::Malformed(Code::PackedRowMalformed),
                why: format!(
                    "malformed {tag} storage row: packed chunk rows exist only in formats v0 and v1, this log is v{}",
                    dialect.version
                ),
                seq: seq0,
                event_type: Some(tag.to_owned()),
                is_turn_end: false,
                members,
            });
        }
        let lean = tally.map(|t| (*t, text));
        return match packed(tag, value, pos, lean) {
            Ok(p) if arena.is_some() => Row::Packed(p, audit),
            Ok(p) => Row::Events(p.members().collect(), audit),
            Err(why) => Row::Bad(BadRow {
                kind: BadKind::Malformed(Code::PackedRowMalformed),
                why: format!("malformed {tag} storage row: {why}"),
                seq: seq0,
                event_type: Some(tag.to_owned()),
                is_turn_end: false,
                members,
            }),
        };
    }
    let seq = slots.values[1].and_then(|s| {
        // `-0` is the safe integer 0 for JavaScript; json-not-lossless reports it.
        s.safe_uint()
    });
    if let Some(stored) = slots.values[5]
        && let Err(e) = decode_sources(stored, seq)
    {
        return Row::Bad(BadRow {
            kind: BadKind::Malformed(Code::SourceRangesMalformed),
            why: format!("sourceEventSeqs {}", e.describe()),
            seq,
            event_type: owned_type(&value),
            is_turn_end,
            members: 1,
        });
    }
    let mut event = envelope(&value, slots, seq, pos);
    if let Ok(ev) = &mut event {
        ev.line = (stored && audit.duplicate_key.is_none()).then_some(text);
    }
    // A tool result's digest is taken here, where the audit tells whether any key repeats
    // (and, in the pipeline, on a parsing thread), not in the fold. Not for v0, whose
    // legacy normalization may still rewrite the event.
    if let Ok(ev) = &mut event
        && !dialect.legacy_v0
        && ev.kind == Kind::ToolResult
    {
        let unique = audit.duplicate_key.is_none();
        ev.result_digest = Some(result_digest(dialect, &ev.data, unique));
    }
    Row::Events(
        smallvec::smallvec![Candidate {
            seq,
            event,
            is_turn_end,
            class: None,
        }],
        audit,
    )
}

/// What one pass over a row's members found: each envelope key's last value (JavaScript's
/// last-wins), in the order of [`ENVELOPE_KEYS`], and whether any other key is present.
#[derive(Clone, Copy)]
struct Slots<'v, 'a> {
    values: [Option<&'v Json<'a>>; ENVELOPE_KEYS.len()],
    extra: bool,
}

/// The envelope keys among `members` (one match on each key's bytes; looking each envelope
/// key up on its own compared every key several times).
fn envelope_slots<'v, 'a>(members: &'v [json::Member<'a>]) -> Slots<'v, 'a> {
    let mut slots = Slots {
        values: [None; ENVELOPE_KEYS.len()],
        extra: false,
    };
    for (k, v) in members {
        let i = match k.as_bytes() {
            b"type" => 0,
            b"seq" => 1,
            b"time" => 2,
            b"data" => 3,
            b"surfaceOp" => 4,
            b"sourceEventSeqs" => 5,
            b"ignorable" => 6,
            _ => {
                slots.extra = true;
                continue;
            }
        };
        slots.values[i] = Some(v);
    }
    slots
}

fn envelope<'a>(
    value: &Json<'a>,
    slots: Slots<'_, 'a>,
    seq: Option<u64>,
    pos: Pos,
) -> Result<Event<'a>, BadEnvelope> {
    // Only what the event keeps is copied (for a tree in an arena, a shallow copy).
    let [ty, _seq, time, data, surface_op, source_seqs, ignorable] = slots.values;
    let ty = ty.map(|t| match t {
        Json::Str(s) => Ok(s.clone().into_cow()),
        other => Err(other),
    });
    // Borrowed (no copy) unless the type had escapes; owned only for an error report.
    let type_name = match &ty {
        Some(Ok(name)) => Some(name.clone()),
        _ => None,
    };
    let bad = |why: String| BadEnvelope {
        pos,
        seq: seq.unwrap_or(0),
        ty: type_name.as_deref().map(str::to_owned),
        why,
    };
    if slots.extra {
        // The other names, in first-seen order.
        let mut extra: Vec<&str> = Vec::new();
        for (k, _) in value.as_obj().unwrap_or_default() {
            if !ENVELOPE_KEYS.contains(&&**k) && !extra.contains(&&**k) {
                extra.push(k);
            }
        }
        let shown: Vec<String> = extra
            .iter()
            .map(|k| format!("`{}`", crate::log::text::clip(k, 40)))
            .collect();
        return Err(bad(format!(
            "unexpected envelope key{} {}",
            if extra.len() == 1 { "" } else { "s" },
            shown.join(", ")
        )));
    }
    let ty = match ty {
        Some(Ok(name)) => name,
        Some(Err(other)) => {
            return Err(bad(format!(
                "`type` must be a string, found {}",
                other.kind_name()
            )));
        }
        None => return Err(bad("`type` is missing".into())),
    };
    let time = match time {
        Some(t) => t.safe_int().ok_or_else(|| {
            bad(format!(
                "`time` must be a safe integer (epoch milliseconds), found {}",
                describe_value(t)
            ))
        })?,
        None => return Err(bad("`time` is missing".into())),
    };
    let Some(data) = data else {
        return Err(bad("`data` is missing".into()));
    };
    let ignorable = match ignorable {
        None => false,
        Some(Json::Bool(true)) => true,
        Some(other) => {
            return Err(bad(format!(
                "`ignorable` must be exactly true when present, found {}",
                describe_value(other)
            )));
        }
    };
    Ok(Event {
        pos,
        seq: seq.unwrap_or(0),
        time,
        kind: Kind::of(&ty),
        ty,
        data: data.clone(),
        surface_op: surface_op.cloned(),
        source_seqs: source_seqs.cloned(),
        ignorable,
        packed: false,
        normalized: false,
        result_digest: None,
        line: None,
    })
}

fn describe_value(v: &Json<'_>) -> String {
    match v {
        Json::Num(n) => n.to_string(),
        Json::Bool(b) => b.to_string(),
        Json::Str(s) => format!("\"{}\"", crate::log::text::clip(s, 40)),
        other => other.kind_name().to_owned(),
    }
}

/// A valid packed chunk row (§5.2): `type`, `seq0`, `time0` and `data` checked, its members
/// not built. Each member is an `assistant/chunk` event; [`Packed::members`] builds them in
/// order, which the scan does only when it needs them (see `scan::fold_packed`): a format 0
/// log holds about four times as many members as lines, and building each one's event was a
/// sixth of a pass.
#[derive(Debug)]
pub struct Packed<'a> {
    pub pos: Pos,
    pub seq0: u64,
    time0: i64,
    /// The running time of the last member.
    pub last_time: i64,
    /// `tool-call-chunks` (members carry `id`, an optional `name` and `argumentsDelta`).
    tool: bool,
    /// The chunk type of the members.
    delta: &'static str,
    /// The row's `data` (its last occurrence, as JavaScript keeps it).
    data: Json<'a>,
    len: usize,
    /// The line, when `data` is a lean tree ([`Shape::LeanPacked`]: its arrays hold the
    /// first member's text only): [`Packed::whole`] reads it again.
    lean: Option<&'a str>,
}

impl<'a> Packed<'a> {
    /// How many events the row holds (never 0).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The seq of the last member.
    pub fn last_seq(&self) -> u64 {
        self.seq0 + self.len as u64 - 1
    }

    /// The first member's event (a lean row has it too; every row has one).
    pub fn first(&self) -> Option<Candidate<'a>> {
        self.expand().next()
    }

    /// Whether `data` is a lean tree: only [`Packed::first`] is there; [`Packed::whole`]
    /// has every member.
    pub fn is_lean(&self) -> bool {
        self.lean.is_some()
    }

    /// The row read again from its line with a whole tree, when its own is lean. `None`
    /// where it is whole already, or (never expected) the whole tree does not check out.
    pub fn whole(&self) -> Option<Packed<'a>> {
        let line = self.lean?;
        let (value, _) = json::parse_audited(line).ok()?;
        let tag = value.get("type").and_then(Json::as_str)?.to_owned();
        let whole = packed(&tag, value, self.pos, None).ok();
        debug_assert!(whole.is_some(), "a lean row checks out whole: {line}");
        whole
    }

    /// The members' events, in order, each with its own (owned) `data` tree (of a lean row,
    /// only the first: see [`Packed::whole`]).
    pub fn members(&self) -> impl Iterator<Item = Candidate<'a>> + '_ {
        debug_assert!(!self.is_lean(), "a lean row holds its first member only");
        self.expand()
    }

    fn expand(&self) -> impl Iterator<Item = Candidate<'a>> + '_ {
        let field = |k: &str| self.data.get(k).cloned();
        let (turn, step, index) = (field("turn"), field("step"), field("index"));
        let (id, name) = (field("id"), field("name"));
        let pieces = self
            .data
            .get(if self.tool { "args" } else { "texts" })
            .and_then(Json::as_arr)
            .unwrap_or_default();
        let dt = self
            .data
            .get("dt")
            .and_then(Json::as_arr)
            .unwrap_or_default();
        let mut time = self.time0;
        pieces.iter().enumerate().map(move |(k, piece)| {
            if k > 0 {
                // Checked when the row was read: every running time is a safe integer.
                time = time.saturating_add(dt.get(k - 1).and_then(Json::safe_int).unwrap_or(0));
            }
            let mut chunk: json::Members<'a> = Vec::with_capacity(if self.tool { 5 } else { 3 });
            chunk.push((Cow::Borrowed("type"), Json::Str(self.delta.into())));
            chunk.push((Cow::Borrowed("index"), index.clone().unwrap_or(Json::Null)));
            if self.tool {
                chunk.push((Cow::Borrowed("id"), id.clone().unwrap_or(Json::Null)));
                if let Some(n) = &name {
                    chunk.push((Cow::Borrowed("name"), n.clone()));
                }
                chunk.push((Cow::Borrowed("argumentsDelta"), piece.clone()));
            } else {
                chunk.push((Cow::Borrowed("text"), piece.clone()));
            }
            let data = vec![
                (Cow::Borrowed("turn"), turn.clone().unwrap_or(Json::Null)),
                (Cow::Borrowed("step"), step.clone().unwrap_or(Json::Null)),
                (Cow::Borrowed("chunk"), Json::Obj(chunk.into())),
            ];
            let seq = self.seq0 + k as u64;
            Candidate {
                seq: Some(seq),
                event: Ok(Event {
                    pos: self.pos,
                    seq,
                    time,
                    ty: Cow::Borrowed(Kind::AssistantChunk.name()),
                    kind: Kind::AssistantChunk,
                    data: Json::Obj(data.into()),
                    surface_op: None,
                    source_seqs: None,
                    ignorable: false,
                    packed: true,
                    normalized: false,
                    result_digest: None,
                    line: None,
                }),
                is_turn_end: false,
                class: None,
            }
        })
    }
}

/// The last running time of a packed row whose first member is at `time0`, checked as each
/// step in turn would be (§5.2 rule 6): a step that is not a safe integer, or a running time
/// past one, is an error, whichever comes first. All running times up to the first step that
/// is not a safe integer are safe exactly when the least and the greatest are.
fn running_times(time0: i64, steps: &json::Steps) -> Result<i64, &'static str> {
    let (t0, safe) = (i128::from(time0), i128::from(MAX_SAFE));
    if t0 + steps.low < -safe || t0 + steps.high > safe {
        return Err("a running time is not a safe integer");
    }
    if !steps.safe {
        return Err("data.dt must hold safe integers");
    }
    i64::try_from(t0 + steps.sum).map_err(|_| "a running time is not a safe integer")
}

/// A packed row's `texts` or `args` as the checks read it: from its items, or, where a lean
/// tree left them out, from the tally the parser kept.
fn pieces(key: &str, items: &[Json<'_>], tally: Option<&json::Tally>) -> json::Pieces {
    let kept = tally.and_then(|t| if key == "args" { t.args } else { t.texts });
    kept.unwrap_or_else(|| json::Pieces::of(items))
}

/// Check a packed row (§5.2). `lean`: its tree is lean, with the tally of what it left out
/// and the line it was read from.
fn packed<'a>(
    tag: &str,
    value: Json<'a>,
    pos: Pos,
    lean: Option<(json::Tally, &'a str)>,
) -> Result<Packed<'a>, String> {
    let tally = lean.as_ref().map(|(t, _)| t);
    let keys = value.keys();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    if sorted != ["data", "seq0", "time0", "type"] || keys.len() != 4 {
        return Err(format!(
            "row keys must be exactly type, seq0, time0, data (found {})",
            keys.join(", ")
        ));
    }
    let seq0 = value
        .get("seq0")
        .and_then(Json::safe_uint)
        .ok_or("seq0 must be a safe integer ≥ 0")?;
    let time0 = value
        .get("time0")
        .and_then(Json::safe_int)
        .ok_or("time0 must be a safe integer")?;
    let data = value
        .get("data")
        .filter(|d| d.is_obj())
        .ok_or("data must be an object")?;
    let tool = tag == "tool-call-chunks";
    let mut dkeys = data.keys();
    dkeys.sort_unstable();
    let expected: &[&str] = if tool {
        if data.has("name") {
            &["args", "dt", "id", "index", "name", "step", "turn"]
        } else {
            &["args", "dt", "id", "index", "step", "turn"]
        }
    } else {
        &["dt", "index", "step", "texts", "turn"]
    };
    if dkeys != expected || data.as_obj().map_or(0, <[_]>::len) != expected.len() {
        return Err(format!(
            "data keys must be exactly {} (found {})",
            expected.join(", "),
            dkeys.join(", ")
        ));
    }
    for k in ["turn", "step", "index"] {
        if data.get(k).and_then(Json::as_num).is_none() {
            return Err(format!("data.{k} must be a number"));
        }
    }
    if tool {
        if data.get("id").and_then(Json::as_str).is_none() {
            return Err("data.id must be a string".into());
        }
        if data.get("name").is_some_and(|n| n.as_str().is_none()) {
            return Err("data.name must be a string".into());
        }
    }
    let list_key = if tool { "args" } else { "texts" };
    let len = data
        .get(list_key)
        .and_then(Json::as_arr)
        .map(|a| pieces(list_key, a, tally))
        .filter(|p| p.len > 0 && p.strings)
        .ok_or_else(|| format!("data.{list_key} must be a non-empty array of strings"))?
        .len;
    let dt = data
        .get("dt")
        .and_then(Json::as_arr)
        .ok_or("data.dt must be an array")?;
    let steps = tally
        .and_then(|t| t.dt)
        .unwrap_or_else(|| json::Steps::of(dt));
    if steps.len + 1 != len {
        return Err(format!(
            "data.dt has {} entries but {len} members need {}",
            steps.len,
            len - 1
        ));
    }
    if seq0 + len as u64 - 1 > MAX_SAFE {
        return Err("seq0 + members − 1 is not a safe integer".into());
    }
    let last_time = running_times(time0, &steps)?;
    let Json::Obj(members) = value else {
        return Err("not an object".into());
    };
    // The last occurrence, as `get` read it above. An arena list is only referred to.
    let data = members
        .into_iter()
        .rev()
        .find(|(k, _)| k == "data")
        .map(|(_, v)| v)
        .ok_or("data must be an object")?;
    let delta = match tag {
        "text-chunks" => "text-delta",
        "reasoning-chunks" => "reasoning-delta",
        _ => "tool-call-delta",
    };
    Ok(Packed {
        pos,
        seq0,
        time0,
        last_time,
        tool,
        delta,
        data,
        len,
        lean: lean.map(|(_, line)| line),
    })
}

/// A decoded `sourceEventSeqs`: inclusive runs in list order (a plain element is a run of one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeqList {
    runs: Vec<(u64, u64)>,
    len: u64,
    /// Strictly increasing (always true when a pair was present).
    increasing: bool,
}

impl SeqList {
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The inclusive runs, in list order (a plain element is a run of one).
    pub fn runs(&self) -> &[(u64, u64)] {
        &self.runs
    }

    pub fn contains(&self, seq: u64) -> bool {
        if self.increasing {
            let i = self.runs.partition_point(|(_, last)| *last < seq);
            self.runs.get(i).is_some_and(|(first, _)| *first <= seq)
        } else {
            self.runs.iter().any(|(a, b)| (*a..=*b).contains(&seq))
        }
    }

    /// Every seq, in list order (bounded by the caller: lists are checked against `seq`).
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.runs.iter().flat_map(|(a, b)| *a..=*b)
    }

    /// The members of `wanted` this list does not contain, in `wanted` order.
    pub fn missing(&self, wanted: &[u64]) -> Vec<u64> {
        if self.increasing || self.runs.len() <= 32 {
            return wanted
                .iter()
                .copied()
                .filter(|s| !self.contains(*s))
                .collect();
        }
        // The fold's seq hasher, not std's keyed SipHash: a log built to collide would only be
        // slower.
        let set: SeqSet = self.iter().collect();
        wanted
            .iter()
            .copied()
            .filter(|s| !set.contains(s))
            .collect()
    }
}

/// Why a stored `sourceEventSeqs` does not decode (§5.3, §11.2 step 6 b/d/e/f).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceError {
    NotArray,
    BadElement(String),
    Duplicate(u64),
    NotEarlier { value: u64, seq: u64 },
    NotIncreasing,
}

impl SourceError {
    pub fn describe(&self) -> String {
        match self {
            SourceError::NotArray => "must be an array when present".into(),
            SourceError::BadElement(why) => why.clone(),
            SourceError::Duplicate(v) => format!("must not contain duplicates ({v} repeats)"),
            SourceError::NotEarlier { value, seq } => {
                format!("must reference earlier events: {value} >= current seq {seq}")
            }
            SourceError::NotIncreasing => {
                "with range pairs must expand to a strictly increasing list".into()
            }
        }
    }
}

/// One element of the stored form of `sourceEventSeqs` (§5.3): a seq, or an inclusive run
/// `[first,last]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceItem {
    Seq(u64),
    Run(u64, u64),
}

impl std::fmt::Display for SourceItem {
    /// As JSON: `7` or `[1,3]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceItem::Seq(s) => write!(f, "{s}"),
            SourceItem::Run(a, b) => write!(f, "[{a},{b}]"),
        }
    }
}

/// Encode a provenance list the way DSH writers do (§5.3, v2+): only a strictly increasing
/// list is encoded, every maximal run of at least 3 consecutive seqs becoming a run and
/// shorter runs staying seqs; any other list is kept verbatim. `[1,2,3,7,9,10]` →
/// `[[1,3],7,9,10]`. [`decode_sources`] gives the list back.
pub fn encode_sources(seqs: &[u64]) -> Vec<SourceItem> {
    if !seqs.windows(2).all(|w| w[0] < w[1]) {
        return seqs.iter().map(|s| SourceItem::Seq(*s)).collect();
    }
    let mut out = Vec::with_capacity(seqs.len());
    let mut i = 0;
    while i < seqs.len() {
        let mut j = i;
        while j + 1 < seqs.len() && seqs[j + 1] == seqs[j] + 1 {
            j += 1;
        }
        if j - i >= 2 {
            out.push(SourceItem::Run(seqs[i], seqs[j]));
        } else {
            out.extend(seqs[i..=j].iter().map(|s| SourceItem::Seq(*s)));
        }
        i = j + 1;
    }
    out
}

/// [`encode_sources`] as the JSON array a writer stores: `[[1,3],7,9,10]`.
pub fn encode_sources_json(seqs: &[u64]) -> String {
    let items: Vec<String> = encode_sources(seqs)
        .iter()
        .map(ToString::to_string)
        .collect();
    format!("[{}]", items.join(","))
}

/// Decode the stored form: each element a safe integer ≥ 0 or a pair `[first,last]`
/// (§5.3); then, in the order of §11.2 step 6: no duplicates, every value below `seq` (when
/// known). With a pair present the list must be strictly increasing. Nothing is expanded:
/// runs stay runs, so a hostile `[[0, 9e15]]` costs nothing.
pub fn decode_sources(stored: &Json<'_>, seq: Option<u64>) -> Result<SeqList, SourceError> {
    let items = stored.as_arr().ok_or(SourceError::NotArray)?;
    let mut runs = Vec::with_capacity(items.len());
    let mut any_pair = false;
    for item in items {
        let run = match item {
            Json::Arr(pair) => {
                any_pair = true;
                let bounds: Option<Vec<u64>> = pair.iter().map(Json::safe_uint).collect();
                match bounds.as_deref() {
                    Some([a, b]) if a <= b => (*a, *b),
                    _ => {
                        return Err(SourceError::BadElement(format!(
                            "range pair {} must be two safe integers ≥ 0 with first ≤ last",
                            crate::log::text::clip(&item.to_js_string(), 40)
                        )));
                    }
                }
            }
            other => match other.safe_uint() {
                Some(v) => (v, v),
                None => {
                    return Err(SourceError::BadElement(format!(
                        "must densely contain non-negative safe integers, found {}",
                        crate::log::text::clip(&other.to_js_string(), 40)
                    )));
                }
            },
        };
        runs.push(run);
    }
    let increasing = runs.windows(2).all(|w| w[0].1 < w[1].0);
    if any_pair && !increasing {
        return Err(SourceError::NotIncreasing);
    }
    if !increasing {
        // Plain lists in any order: look for a repeat (runs are single values here).
        if runs.len() <= 32 {
            for (i, r) in runs.iter().enumerate() {
                if runs[..i].contains(r) {
                    return Err(SourceError::Duplicate(r.0));
                }
            }
        } else {
            let mut seen = SeqSet::with_capacity_and_hasher(runs.len(), Default::default());
            if let Some(r) = runs.iter().find(|r| !seen.insert(r.0)) {
                return Err(SourceError::Duplicate(r.0));
            }
        }
    }
    if let Some(seq) = seq
        && let Some(&(a, _)) = runs.iter().find(|(_, b)| *b >= seq)
    {
        return Err(SourceError::NotEarlier {
            value: a.max(seq),
            seq,
        });
    }
    let len = runs.iter().map(|(a, b)| b - a + 1).sum();
    Ok(SeqList {
        runs,
        len,
        increasing,
    })
}

/// The digest of a `tool/result`'s rewrite-invariant part: its data with the result text
/// blanked (a prune may rewrite only that, §12). `keys_unique`: as for
/// [`json::canonical_hash`].
pub fn result_digest(dialect: &Dialect, data: &Json<'_>, keys_unique: bool) -> u64 {
    let blank: &[Seg] = match dialect.tool_result_shape {
        ToolResultShape::Wrapped => &[
            Seg::Key("message"),
            Seg::Key("content"),
            Seg::Index(0),
            Seg::Key("content"),
        ],
        ToolResultShape::ToolRole => &[Seg::Key("message"), Seg::Key("content")],
    };
    json::canonical_hash(data, Some(blank), keys_unique)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::dialect::DIALECTS;

    fn pos() -> Pos {
        Pos { line: 2, byte: 10 }
    }

    /// Every event's data, as text, decoded with or without an arena.
    fn event_texts(line: &str, arena: Option<&json::Arena>) -> Vec<String> {
        let evs: Vec<Candidate<'_>> =
            match decode_in(line, pos(), &DIALECTS[0], arena, None, true, Shape::Full) {
                Row::Events(evs, _) => evs.into_vec(),
                Row::Packed(p, _) => p.members().collect(),
                Row::Bad(_) => panic!("bad row: {line}"),
            };
        evs.iter()
            .map(|c| {
                let e = c.event.as_ref().unwrap();
                format!("{} {} {:?}", e.seq, e.ty, e.data)
            })
            .collect()
    }

    #[test]
    fn rows_in_an_arena_decode_like_owned_rows() {
        let lines = [
            r#"{"type":"text-chunks","seq0":5,"time0":100,"data":{"turn":1,"step":2,"index":0,"dt":[1],"texts":["a\n","b"]}}"#,
            r#"{"type":"tool-call-chunks","seq0":5,"time0":100,"data":{"turn":1,"step":2,"index":0,"id":"c\"1","name":"x","dt":[1],"args":["{","}"]}}"#,
            // Left to serde_json (a lone surrogate): an owned tree, kept out of the arena.
            r#"{"type":"text-chunks","seq0":5,"time0":100,"data":{"turn":1,"step":2,"index":0,"dt":[1],"texts":["\ud800","b"]}}"#,
            r#"{"type":"user/message","seq":3,"time":1,"data":{"id":"u\u0031","content":[{"type":"text","text":"a\tb"}]}}"#,
        ];
        for line in lines {
            let arena = json::Arena::default();
            assert_eq!(event_texts(line, Some(&arena)), event_texts(line, None));
        }
    }

    #[test]
    fn envelope_slots_follow_the_envelope_keys() {
        let members: Vec<json::Member<'_>> = ENVELOPE_KEYS
            .iter()
            .chain(&["seq0", "Type", "types", ""])
            .enumerate()
            .map(|(i, k)| {
                (
                    std::borrow::Cow::Borrowed(*k),
                    Json::Num(json::Num::U(i as u64)),
                )
            })
            .collect();
        let slots = envelope_slots(&members);
        for (i, key) in ENVELOPE_KEYS.iter().enumerate() {
            assert_eq!(slots.values[i], Some(&members[i].1), "{key}");
        }
        assert!(slots.extra);
        assert!(!envelope_slots(&members[..ENVELOPE_KEYS.len()]).extra);
        // The last of a repeated key wins.
        let twice = [members[2].clone(), (members[2].0.clone(), Json::Null)];
        assert_eq!(envelope_slots(&twice).values[2], Some(&Json::Null));
    }

    #[test]
    fn packed_text_row_expands_into_chunk_events() {
        let line = br#"{"type":"text-chunks","seq0":5,"time0":100,"data":{"turn":1,"step":2,"index":0,"dt":[1,-3],"texts":["a","b","c"]}}"#;
        let Row::Events(evs, _) = decode(line, pos(), &DIALECTS[0]) else {
            panic!("bad row")
        };
        let got: Vec<(Option<u64>, i64, String)> = evs
            .iter()
            .map(|c| {
                let e = c.event.as_ref().unwrap();
                (c.seq, e.time, e.data.to_js_string())
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    Some(5),
                    100,
                    r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"a"}}"#
                        .into()
                ),
                (
                    Some(6),
                    101,
                    r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"b"}}"#
                        .into()
                ),
                (
                    Some(7),
                    98,
                    r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"c"}}"#
                        .into()
                ),
            ]
        );
    }

    #[test]
    fn packed_tool_call_row_keeps_optional_name() {
        let line = br#"{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":1,"id":"c1","name":"bash","dt":[0],"args":["{","}"]}}"#;
        let Row::Events(evs, _) = decode(line, pos(), &DIALECTS[1]) else {
            panic!()
        };
        assert_eq!(
            evs[1].event.as_ref().unwrap().data.to_js_string(),
            r#"{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c1","name":"bash","argumentsDelta":"}"}}"#
        );
    }

    fn malformed(line: &str, version: usize) -> Option<String> {
        match decode(line.as_bytes(), pos(), &DIALECTS[version]) {
            Row::Bad(b) if matches!(b.kind, BadKind::Malformed(Code::PackedRowMalformed)) => {
                Some(b.why)
            }
            _ => None,
        }
    }

    #[test]
    fn packed_row_validation_rules() {
        let ok = r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}"#;
        assert!(malformed(ok, 0).is_none());
        assert!(
            malformed(ok, 2)
                .unwrap()
                .contains("only in formats v0 and v1")
        );
        let cases = [
            r#"{"type":"text-chunks","seq0":0,"time0":0,"extra":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}"#,
            r#"{"type":"text-chunks","seq0":-1,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}"#,
            r#"{"type":"text-chunks","seq0":0,"time0":0.5,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}"#,
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"],"x":1}}"#,
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":"1","step":1,"index":0,"dt":[],"texts":["a"]}}"#,
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":[]}}"#,
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":[1]}}"#,
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a"]}}"#,
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0.5],"texts":["a","b"]}}"#,
            r#"{"type":"text-chunks","seq0":9007199254740991,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]}}"#,
            r#"{"type":"text-chunks","seq0":0,"time0":9007199254740991,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b"]}}"#,
            r#"{"type":"text-chunks","seq0":0,"time0":-9007199254740991,"data":{"turn":1,"step":1,"index":0,"dt":[-1],"texts":["a","b"]}}"#,
            // Past the limit and back: the running time in between counts.
            r#"{"type":"text-chunks","seq0":0,"time0":9007199254740991,"data":{"turn":1,"step":1,"index":0,"dt":[1,-1],"texts":["a","b","c"]}}"#,
            r#"{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"id":5,"dt":[],"args":["a"]}}"#,
            r#"{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"id":"c","name":null,"dt":[],"args":["a"]}}"#,
            r#"{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[],"args":["a"]}}"#,
        ];
        for c in cases {
            assert!(malformed(c, 0).is_some(), "{c}");
        }
    }

    /// A row decoded with `shape` in an arena, as text: a bad row's report, or a packed
    /// row's fields, its first member and every member of its whole form.
    fn decoded(line: &str, shape: Shape) -> String {
        let arena = json::Arena::default();
        let mut scratch = json::Scratch::default();
        let row = decode_in(
            line,
            pos(),
            &DIALECTS[0],
            Some(&arena),
            Some(&mut scratch),
            true,
            shape,
        );
        let event = |c: &Candidate<'_>| format!("{:?} {:?}", c.seq, c.event);
        match row {
            Row::Bad(b) => format!("bad {:?} {} {:?} {}", b.kind, b.why, b.seq, b.members),
            Row::Events(evs, audit) => format!(
                "events {audit:?} {:?}",
                evs.iter().map(event).collect::<Vec<_>>()
            ),
            Row::Packed(p, audit) => {
                assert_eq!(p.is_lean(), shape == Shape::LeanPacked, "{line}");
                let whole = p.whole();
                let whole = whole.as_ref().unwrap_or(&p);
                format!(
                    "packed {audit:?} {} {} {} first {}\n{:?}",
                    p.seq0,
                    p.last_time,
                    p.len(),
                    event(&p.first().expect("a member")),
                    whole.members().map(|c| event(&c)).collect::<Vec<_>>()
                )
            }
        }
    }

    #[test]
    fn a_lean_packed_row_decodes_as_the_whole_row_does() {
        let max = MAX_SAFE;
        let rows = [
            r#"{"type":"text-chunks","seq0":3,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[5,-2],"texts":["a\nb","c","d"]}}"#.to_owned(),
            r#"{"type":"tool-call-chunks","seq0":3,"time0":10,"data":{"turn":1,"step":1,"index":0,"id":"c","name":"bash","dt":[1],"args":["{","}"]}}"#.to_owned(),
            // Running times at the edge, and past it before and after a step that is not a
            // safe integer.
            format!(r#"{{"type":"text-chunks","seq0":0,"time0":{max},"data":{{"turn":1,"step":1,"index":0,"dt":[-{max},{max},0],"texts":["a","b","c","d"]}}}}"#),
            format!(r#"{{"type":"text-chunks","seq0":0,"time0":1,"data":{{"turn":1,"step":1,"index":0,"dt":[{max},"x"],"texts":["a","b","c"]}}}}"#),
            format!(r#"{{"type":"text-chunks","seq0":0,"time0":-1,"data":{{"turn":1,"step":1,"index":0,"dt":["x",-{max}],"texts":["a","b","c"]}}}}"#),
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[1.0,-0],"texts":["a","b","c"]}}"#.to_owned(),
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a",1]}}"#.to_owned(),
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":[]}}"#.to_owned(),
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a","b"]}}"#.to_owned(),
            // A repeated key: read again whole.
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b"],"texts":["c","d"]}}"#.to_owned(),
            r#"{"type":"text-chunks","type":"x","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b"]}}"#.to_owned(),
        ];
        for row in &rows {
            assert_eq!(
                decoded(row, Shape::LeanPacked),
                decoded(row, Shape::Full),
                "{row}"
            );
        }
        // The lean form is what a clean row is handed on as.
        let lean = decoded(&rows[0], Shape::LeanPacked);
        assert!(
            lean.starts_with("packed") && lean.contains("seq: 5"),
            "{lean}"
        );
    }

    proptest::proptest! {
        #[test]
        fn running_times_are_checked_as_each_step_in_turn_would_be(
            time0 in proptest::sample::select(vec![0i64, 7, -7, 1 << 52, MAX_SAFE as i64, -(MAX_SAFE as i64)]),
            dt in proptest::collection::vec(proptest::sample::select(vec![
                "0", "1", "-1", "2.5", "\"x\"", "9007199254740991", "-9007199254740991",
                "4503599627370496", "-4503599627370496", "9007199254740992",
            ]), 0..8),
        ) {
            let text = format!("[{}]", dt.join(","));
            let items = json::parse(text.as_bytes()).unwrap();
            let items = items.as_arr().unwrap_or_default();
            // The rule as written: one step at a time.
            let mut expected = Ok(time0);
            for d in items {
                let Ok(t) = expected else { break };
                expected = match d.safe_int() {
                    None => Err("data.dt must hold safe integers"),
                    Some(d) => t
                        .checked_add(d)
                        .filter(|v| v.unsigned_abs() <= MAX_SAFE)
                        .ok_or("a running time is not a safe integer"),
                };
            }
            proptest::prop_assert_eq!(running_times(time0, &json::Steps::of(items)), expected);
        }

        #[test]
        fn lean_packed_rows_decode_as_whole_ones(
            time0 in proptest::sample::select(vec![0i64, -5, 1 << 52, MAX_SAFE as i64, -(MAX_SAFE as i64)]),
            dt in proptest::collection::vec(proptest::sample::select(vec![
                "0", "1", "-1", "-0", "1.0", "2.5", "\"1\"", "null", "[1]",
                "9007199254740991", "-9007199254740991", "9007199254740992", "4503599627370496",
                "0", "12", "9999999999999999", "12345678901234567",
            ]), 0..6),
            texts in proptest::collection::vec(proptest::sample::select(vec![
                "\"a\"", "\"b\\nc\"", "\"\\u00e9\"", "1", "null", "[\"x\"]", "{}",
                // Flat arrays (checked a window at a time) hold these too.
                "\"x\\/y\"", "\"\\\"\"", "\"\"", "\"a\"",
            ]), 0..6),
            tool in proptest::bool::ANY,
        ) {
            let (tag, list, extra) = if tool {
                ("tool-call-chunks", "args", r#""id":"c","#)
            } else {
                ("text-chunks", "texts", "")
            };
            let row = format!(
                r#"{{"type":"{tag}","seq0":7,"time0":{time0},"data":{{"turn":1,"step":1,"index":0,{extra}"dt":[{}],"{list}":[{}]}}}}"#,
                dt.join(","),
                texts.join(",")
            );
            proptest::prop_assert_eq!(decoded(&row, Shape::LeanPacked), decoded(&row, Shape::Full), "{}", row);
        }
    }

    fn sources(s: &str, seq: u64) -> Result<Vec<u64>, SourceError> {
        let v = json::parse(s.as_bytes()).unwrap();
        decode_sources(&v, Some(seq)).map(|l| l.iter().collect())
    }

    /// What the fold reads of a row's `sourceEventSeqs`, decoded from a tree of `shape`: the
    /// row's report if bad, else the list's seqs, length, and which of `0..=seq` it holds.
    fn sources_read(line: &str, seq: u64, shape: Shape) -> String {
        let arena = json::Arena::default();
        let row = decode_in(line, pos(), &DIALECTS[0], Some(&arena), None, true, shape);
        let Row::Events(evs, _) = row else {
            let Row::Bad(b) = row else {
                return "packed".into();
            };
            return format!("bad {:?} {}", b.kind, b.why);
        };
        let Ok(event) = &evs[0].event else {
            return "bad envelope".into();
        };
        let stored = event.source_seqs.as_ref().expect("a list");
        match decode_sources(stored, Some(seq)) {
            Err(e) => format!("{e:?}"),
            Ok(list) => {
                let probes: Vec<u64> = (0..=seq).collect();
                format!(
                    "{:?} {} {:?} {:?}",
                    list.iter().collect::<Vec<_>>(),
                    list.len(),
                    probes.iter().map(|s| list.contains(*s)).collect::<Vec<_>>(),
                    list.missing(&probes)
                )
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn a_source_list_reads_the_same_range_encoded(
            steps in proptest::collection::vec(proptest::sample::select(vec![1u64, 1, 1, 2, 3, 0]), 0..24),
            start in 0u64..4,
            seq in 0u64..40,
            tail in proptest::sample::select(vec!["", ",0", ",-0", ",1.0", ",[2,3]", ",\"x\""]),
        ) {
            let line = format!(
                r#"{{"type":"user/message","seq":{seq},"time":0,"data":{{}},"sourceEventSeqs":[{}{tail}]}}"#,
                crate::log::test_support::stepped_seqs(start, &steps)
            );
            proptest::prop_assert_eq!(
                sources_read(&line, seq, Shape::LeanPacked),
                sources_read(&line, seq, Shape::Full),
                "{}", line
            );
        }
    }

    #[test]
    fn range_encoded_sources_decode() {
        assert_eq!(sources("[[1,3],7,9,10]", 11), Ok(vec![1, 2, 3, 7, 9, 10]));
        assert_eq!(sources("[19,20,8,9]", 21), Ok(vec![19, 20, 8, 9]));
        assert_eq!(sources("[]", 3), Ok(vec![]));
        assert_eq!(sources("[[2,2]]", 3), Ok(vec![2]));
    }

    #[test]
    fn sources_encode_like_dsh_writers() {
        assert_eq!(encode_sources_json(&[1, 2, 3, 7, 9, 10]), "[[1,3],7,9,10]");
        assert_eq!(encode_sources_json(&[]), "[]");
        assert_eq!(encode_sources_json(&[4, 5]), "[4,5]");
        assert_eq!(encode_sources_json(&[0, 1, 2, 3, 5, 6, 7]), "[[0,3],[5,7]]");
        // Not strictly increasing: verbatim, even with runs inside.
        assert_eq!(encode_sources_json(&[9, 1, 2, 3]), "[9,1,2,3]");
        assert_eq!(sources("[[0,3],[5,7]]", 8), Ok(vec![0, 1, 2, 3, 5, 6, 7]));
    }

    #[test]
    fn malformed_sources_are_bad_rows() {
        assert_eq!(sources("5", 9), Err(SourceError::NotArray));
        for bad in ["[[3,1]]", "[[1,2,3]]", "[-1]", "[1.5]"] {
            assert!(
                matches!(sources(bad, 9), Err(SourceError::BadElement(_))),
                "{bad}"
            );
        }
        assert_eq!(sources("[4,4]", 9), Err(SourceError::Duplicate(4)));
        assert_eq!(
            sources("[9]", 9),
            Err(SourceError::NotEarlier { value: 9, seq: 9 })
        );
        assert_eq!(
            sources("[[5,12]]", 9),
            Err(SourceError::NotEarlier { value: 9, seq: 9 })
        );
        assert_eq!(sources("[[1,3],2]", 9), Err(SourceError::NotIncreasing));
        let line = br#"{"type":"tool/result","seq":3,"time":0,"data":{},"sourceEventSeqs":[3]}"#;
        assert!(matches!(
            decode(line, pos(), &DIALECTS[3]),
            Row::Bad(BadRow {
                kind: BadKind::Malformed(Code::SourceRangesMalformed),
                seq: Some(3),
                ..
            })
        ));
    }

    #[test]
    fn huge_range_is_bounded_by_the_event_seq() {
        assert!(sources("[[0,9007199254740990]]", 5).is_err());
    }

    #[test]
    fn envelope_rules() {
        let bad = |s: &str| match decode(s.as_bytes(), pos(), &DIALECTS[3]) {
            Row::Events(c, _) => c[0].event.as_ref().err().map(|e| e.why.clone()),
            Row::Packed(..) => panic!("decode does not return a packed row"),
            Row::Bad(b) => panic!("unexpected bad row {b:?}"),
        };
        assert!(bad(r#"{"type":"a/b","seq":0,"time":0,"data":{}}"#).is_none());
        assert!(
            bad(r#"{"type":"a/b","seq":0,"time":0,"data":{},"x":1}"#)
                .unwrap()
                .contains("`x`")
        );
        assert!(bad(r#"{"type":1,"seq":0,"time":0,"data":{}}"#).is_some());
        assert!(bad(r#"{"seq":0,"time":0,"data":{}}"#).is_some());
        assert!(bad(r#"{"type":"a/b","seq":0,"time":1.5,"data":{}}"#).is_some());
        assert!(bad(r#"{"type":"a/b","seq":0,"data":{}}"#).is_some());
        assert!(bad(r#"{"type":"a/b","seq":0,"time":0}"#).is_some());
        assert!(bad(r#"{"type":"a/b","seq":0,"time":0,"data":{},"ignorable":false}"#).is_some());
        assert!(bad(r#"{"type":"a/b","seq":0,"time":-5,"data":null,"ignorable":true}"#).is_none());
    }

    #[test]
    fn unusable_seq_is_reported_as_none() {
        for s in [r#""1""#, "1.5", "-1", "9007199254740992"] {
            let line = format!(r#"{{"type":"a/b","seq":{s},"time":0,"data":{{}}}}"#);
            let Row::Events(c, _) = decode(line.as_bytes(), pos(), &DIALECTS[0]) else {
                panic!()
            };
            assert_eq!(c[0].seq, None, "{s}");
        }
    }
}
