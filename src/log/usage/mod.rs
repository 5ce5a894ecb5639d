//! The model calls of a DSH session and their token usage, each call counted once
//! (USAGE.md): one pass over the log's lines as written that parses only the lines that can
//! hold a call, a model, a turn, a title or a seed boundary.
//!
//! This is not a validation: every complete line counts as far as it parses (the committed
//! prefix, a crash tail and shadowed events alike, U4), a torn final line is not read, and
//! the lines no rule here needs are recognised by their leading `{"type":"…"` and skipped
//! without being parsed. [`Counter`] takes lines one at a time (so another pass can feed it
//! what it reads, see `stats`); [`read`] runs it over a reader.

use std::io::{self, BufRead, Read};
use std::sync::{Arc, Mutex, PoisonError};

use super::event::Kind;
use super::json::{self, Json, Shape};

pub mod prices;
mod raw;

use raw::{Bucket, Buckets};

pub use prices::{Price, PriceError, PriceTable, Rates};

/// A call's token buckets (U1). They are disjoint: the total is input + cache read + cache
/// write + output; `reasoning` is a part of `output`, shown, never added again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub input: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub output: u64,
    pub reasoning: u64,
}

impl Tokens {
    pub fn total(&self) -> u64 {
        self.input
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
            .saturating_add(self.output)
    }

    pub fn add(&mut self, o: &Tokens) {
        self.input = self.input.saturating_add(o.input);
        self.cache_read = self.cache_read.saturating_add(o.cache_read);
        self.cache_write = self.cache_write.saturating_add(o.cache_write);
        self.output = self.output.saturating_add(o.output);
        self.reasoning = self.reasoning.saturating_add(o.reasoning);
    }
}

/// Which record of the log gave a call its tokens (U2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// U2.2: `assistant/message.data.usage`, which replaces the usage of the attempt the
    /// message concludes (or is a call of its own).
    MessageUsage,
    /// U2.1/U2.3: the last usage record of the attempt's own stream (a message without
    /// `data.usage`, an `assistant/attempt`, a v0/v1 attempt without a message).
    StreamUsage,
    /// U2.4: `compaction/summary.data.usage`.
    SummaryUsage,
    /// U2.5: no usage anywhere: counted as a call with unknown tokens.
    NoUsage,
}

/// The event that concludes a call (its time and seq are the call's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concluded {
    AssistantMessage,
    AssistantAttempt,
    CompactionSummary,
    /// A v0/v1 `finish` chunk no message claimed.
    Finish,
    /// A v0/v1 stream that ended without a `finish` (the session stopped mid-call).
    Unfinished,
}

/// One model call.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The seq of the event that concludes it.
    pub seq: u64,
    /// That event's `time` (ms since the epoch).
    pub time: i64,
    /// The turn it belongs to: the concluding event's `data.turn`, or for a compaction
    /// summary the turn open when it was written (`None` between turns).
    pub turn: Option<u64>,
    pub step: Option<u64>,
    /// U3.
    pub provider: Option<Arc<str>>,
    pub model: Option<Arc<str>>,
    /// `None`: no usage anywhere (U2.5).
    pub tokens: Option<Tokens>,
    pub rule: Rule,
    pub concluded: Concluded,
}

/// What the header says about the session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Header {
    pub id: Option<String>,
    pub version: Option<u64>,
    pub created_at: Option<i64>,
    pub parent_session: Option<String>,
    pub delegation_depth: Option<u64>,
}

/// Where a usage object was not counted or not believed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Where {
    pub count: u64,
    /// The seq of the first such event.
    pub first_seq: Option<u64>,
}

impl Where {
    fn note(&mut self, seq: u64) {
        self.count += 1;
        self.first_seq.get_or_insert(seq);
    }
}

/// Everything one session's log says about its model calls.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionUsage {
    pub header: Header,
    /// The session's own calls in log order (inherited seed events left out, U4).
    pub calls: Vec<Call>,
    /// The latest `session/title`.
    pub title: Option<String>,
    /// Events inherited from the parent (v0/v1 `seedLength`, v2+ the seq of the last
    /// inherited `session/end-seed`); the calls among them are not the session's.
    pub inherited_events: u64,
    /// Calls in that inherited prefix, left out.
    pub inherited_calls: u64,
    /// Usage objects whose buckets are not non-negative safe integers: those calls are not
    /// counted (U1).
    pub invalid_usage: Where,
    /// Usage objects whose `totalTokens` disagrees with the sum of the buckets (the sum is
    /// used, U1).
    pub total_mismatch: Where,
    /// Lines that could hold a call but are not JSON objects (the line numbers of the first).
    pub unreadable_lines: u64,
    pub first_unreadable_line: Option<u64>,
    /// A final line without `\n` (not read).
    pub torn_line: bool,
    /// Lines read (header included), and bytes.
    pub lines: u64,
    pub bytes: u64,
    /// Why the log was not read at all (its header is not a DSH header of a version read).
    pub refused: Option<String>,
}

impl SessionUsage {
    /// The sum of the tokens of the calls that report usage.
    pub fn tokens(&self) -> Tokens {
        let mut t = Tokens::default();
        for c in &self.calls {
            if let Some(k) = &c.tokens {
                t.add(k);
            }
        }
        t
    }

    /// Calls counted without tokens (U2.5).
    pub fn calls_without_usage(&self) -> u64 {
        self.calls.iter().filter(|c| c.tokens.is_none()).count() as u64
    }
}

/// What a line is, judged from its leading bytes before any parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// No rule reads it.
    Skip,
    /// Parse it.
    Read,
    /// An `assistant/message` or `assistant/attempt` (a call), or a `turn/start`, `turn/end`
    /// or `request/header` (many small lines whose allocating parse cost more than the
    /// walk): walk it (see `raw`), else parse it.
    Call,
    /// A v0/v1 `assistant/chunk`: walked (else parsed) only if it can be a usage or finish
    /// chunk.
    Chunk,
}

/// How DSH starts every line: the type comes first.
const LEAD: &[u8] = b"{\"type\":\"";

/// The type of the lines that name the model of the requests after them.
const HEADER: &[u8] = Kind::RequestHeader.name().as_bytes();

/// The longest header rest kept by `Counter::header_placed`.
const HEADER_KEPT: usize = 64 * 1024;

/// The kinds whose lines are read, and how.
const READ: [(Kind, Class); 9] = [
    (Kind::AssistantMessage, Class::Call),
    (Kind::AssistantAttempt, Class::Call),
    (Kind::RequestHeader, Class::Call),
    (Kind::TurnStart, Class::Call),
    (Kind::TurnEnd, Class::Call),
    (Kind::CompactionSummary, Class::Read),
    (Kind::SessionEndSeed, Class::Read),
    (Kind::SessionTitle, Class::Read),
    (Kind::AssistantChunk, Class::Chunk),
];

/// The kind of a type read (by its bytes, unescaped), else `None`.
fn read_kind(ty: &[u8]) -> Option<(Kind, Class)> {
    READ.iter()
        .copied()
        .find(|(k, _)| k.name().as_bytes() == ty)
}

/// The types whose lines are read, by their bytes.
fn class_of_type(ty: &[u8]) -> Class {
    read_kind(ty).map_or(Class::Skip, |(_, c)| c)
}

/// The class of a line from its first bytes: DSH writes `type` first, so `{"type":"X"`
/// names the event; any other start (whitespace, another key order, an escape in the type)
/// is parsed to be sure.
fn classify(line: &[u8]) -> Class {
    let Some(rest) = line.strip_prefix(LEAD) else {
        return Class::Read;
    };
    match raw::string_end(rest) {
        Some(end) => class_of_type(&rest[..end]),
        None => Class::Read,
    }
}

/// A chunk line can matter only if it names a usage or finish chunk somewhere.
fn chunk_may_matter(line: &[u8]) -> bool {
    raw::holds(line, raw::Needle::Usage) || raw::holds(line, raw::Needle::Finish)
}

/// `part`, bytes of `whole`, as the `str` it is there (`None` if it is not inside `whole` or
/// does not start and end on characters): no second UTF-8 check of a checked line.
fn piece<'a>(whole: &'a str, part: &[u8]) -> Option<&'a str> {
    let at = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    whole.get(at..at.checked_add(part.len())?)
}

/// A v0/v1 attempt being streamed or finished, not yet claimed by a message; also what any
/// call has before it is counted (see `Counter::emit`).
#[derive(Debug, Clone)]
struct Attempt {
    usage: Option<Usage>,
    seq: u64,
    time: i64,
    provider: Option<Arc<str>>,
    model: Option<Arc<str>>,
}

/// The v0/v1 attempts of the step being streamed.
#[derive(Debug, Default)]
struct Step {
    turn: Option<u64>,
    step: Option<u64>,
    /// Records since the last `finish`.
    open: Option<Attempt>,
    /// The last finished attempt no message has claimed.
    finished: Option<Attempt>,
}

/// The v0/v1 chunks that matter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkKind {
    Usage,
    Finish,
}

/// A usage object as read: its buckets, or not countable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Usage {
    Tokens(Tokens, bool),
    Invalid,
}

/// Read a `TokenUsage` (U1): `Tokens(t, mismatch)` where `mismatch` says a `totalTokens`
/// disagrees with the sum.
fn usage_of(v: &Json<'_>) -> Usage {
    if !v.is_obj() {
        return Usage::Invalid;
    }
    let bucket = |k: &str| match v.get(k) {
        None => Bucket::Absent,
        Some(n) => n.safe_uint().map_or(Bucket::NotCount, Bucket::Count),
    };
    usage_of_buckets(Buckets {
        input: bucket("inputTokens"),
        output: bucket("outputTokens"),
        cache_read: bucket("cacheReadTokens"),
        cache_write: bucket("cacheWriteTokens"),
        reasoning: bucket("reasoningTokens"),
        total: bucket("totalTokens"),
    })
}

/// A usage object's raw text: walked when plainly spelled, else parsed.
fn usage_of_raw(raw: &[u8]) -> Usage {
    match raw::buckets(raw) {
        Some(b) => usage_of_buckets(b),
        None => json::parse(raw).map_or(Usage::Invalid, |v| usage_of(&v)),
    }
}

fn usage_of_buckets(u: Buckets) -> Usage {
    let bucket = |b: Bucket, required: bool| match b {
        Bucket::Absent if !required => Some(0),
        Bucket::Count(n) => Some(n),
        Bucket::Absent | Bucket::NotCount => None,
    };
    let (Some(input), Some(output), Some(cache_read), Some(cache_write), Some(reasoning)) = (
        bucket(u.input, true),
        bucket(u.output, true),
        bucket(u.cache_read, false),
        bucket(u.cache_write, false),
        bucket(u.reasoning, false),
    ) else {
        return Usage::Invalid;
    };
    let t = Tokens {
        input,
        cache_read,
        cache_write,
        output,
        reasoning,
    };
    let mismatch = match u.total {
        Bucket::Absent => false,
        Bucket::Count(n) => n != t.total(),
        Bucket::NotCount => true,
    };
    Usage::Tokens(t, mismatch)
}

/// The last usage record of an embedded v2+ stream.
fn stream_usage(stream: Option<&Json<'_>>) -> Option<Usage> {
    let records = stream?.as_arr()?;
    records.iter().rev().find_map(|r| {
        if r.get("type")?.as_str()? != "chunk" {
            return None;
        }
        let chunk = r.get("chunk")?;
        (chunk.get("type")?.as_str()? == "usage")
            .then(|| chunk.get("usage").map_or(Usage::Invalid, usage_of))
    })
}

/// What an `assistant/message` or `assistant/attempt` says about its call.
struct CallEvent<'a> {
    message: bool,
    seq: u64,
    time: i64,
    turn: Option<u64>,
    step: Option<u64>,
    provider: Option<&'a str>,
    model: Option<&'a str>,
    /// `data.usage`.
    own: Option<Usage>,
    /// The last usage record of `data.stream`.
    stream: Option<Usage>,
}

/// Feeds on a log's lines, one at a time, and gathers its calls.
#[derive(Debug, Default)]
pub struct Counter {
    out: SessionUsage,
    /// The header was read (or refused).
    started: bool,
    /// v0/v1: `assistant/chunk` events carry the stream; v2+: it is embedded.
    chunks: bool,
    /// v0/v1 `seedLength`.
    seed_length: Option<u64>,
    /// v2+: the seq of the last inherited `session/end-seed`.
    marker: Option<u64>,
    /// The model of the latest `request/header` (U3).
    provider: Option<Arc<str>>,
    model: Option<Arc<str>>,
    /// The open turn (`turn/start` … `turn/end`).
    turn: Option<u64>,
    step: Step,
    /// Model and provider names seen, shared by the calls.
    names: Vec<Arc<str>>,
    /// The bytes after the envelope of `request/header` lines the walk placed that set
    /// `provider` and `model` to what they hold now (see `header_repeated`).
    header_tails: Vec<Vec<u8>>,
    /// Tests: parse every line (the walk's reference).
    #[cfg(test)]
    parse_only: bool,
}

impl Counter {
    pub fn new() -> Counter {
        Counter::default()
    }

    /// Has the log been refused (not a header of a version read)?
    pub fn refused(&self) -> bool {
        self.out.refused.is_some()
    }

    fn name(&mut self, s: Option<&str>) -> Option<Arc<str>> {
        let s = s.filter(|s| !s.is_empty())?;
        if let Some(n) = self.names.iter().find(|n| &***n == s) {
            return Some(n.clone());
        }
        let n: Arc<str> = Arc::from(s);
        // A log naming thousands of models is not worth a faster lookup; keep the list short.
        if self.names.len() < 64 {
            self.names.push(n.clone());
        }
        Some(n)
    }

    /// One complete line of the log (without its `\n`); the first is the header.
    pub fn line(&mut self, line: &[u8]) {
        self.out.lines += 1;
        self.out.bytes += line.len() as u64 + 1;
        if !self.started {
            self.started = true;
            self.header(line);
            return;
        }
        if self.out.refused.is_some() {
            return;
        }
        let class = classify(line);
        match class {
            Class::Skip => return,
            Class::Chunk if !self.chunks || !chunk_may_matter(line) => return,
            _ => {}
        }
        let no = self.out.lines;
        #[cfg(test)]
        let class = if self.parse_only { Class::Read } else { class };
        if class == Class::Call && self.header_repeated(line) {
            return;
        }
        let text = simdutf8::basic::from_utf8(line).ok();
        if matches!(class, Class::Call | Class::Chunk)
            && let Some(text) = text
            && let Some(found) = raw::walk(line)
            && self.walked(&found, text)
        {
            return;
        }
        let parsed =
            text.and_then(|text| json::parse_audited_in(text, None, None, Shape::Lean).ok());
        match parsed {
            Some((v, _)) if v.is_obj() => self.event(&v),
            _ => {
                self.out.unreadable_lines += 1;
                self.out.first_unreadable_line.get_or_insert(no);
            }
        }
    }

    /// DSH writes one of a few `request/header` lines before every request. One whose bytes
    /// after the envelope are those of a header that set the provider and model they hold now
    /// would set them again, or (not placed) leave them: nothing to do. Its envelope, read in
    /// place, is ASCII, and the rest was checked with that header.
    fn header_repeated(&self, line: &[u8]) -> bool {
        !self.header_tails.is_empty()
            && line
                .get(LEAD.len()..)
                .is_some_and(|t| t.starts_with(HEADER))
            && raw::envelope(line).is_some_and(|e| {
                e.ty == HEADER
                    && self
                        .header_tails
                        .iter()
                        .any(|t| line.get(e.next..) == Some(t))
            })
    }

    /// A `request/header` the walk placed names the model of the requests after it; its bytes
    /// after the envelope are kept for `header_repeated` (a few, as DSH alternates a few, and
    /// not a long one: a header holding a huge system prompt is walked each time instead).
    fn header_placed(&mut self, line: &[u8], provider: Option<Arc<str>>, model: Option<Arc<str>>) {
        if (&provider, &model) != (&self.provider, &self.model) {
            self.header_tails.clear();
        }
        (self.provider, self.model) = (provider, model);
        if let Some(e) = raw::envelope(line)
            && e.ty == HEADER
            && let Some(tail) = line.get(e.next..)
            && tail.len() <= HEADER_KEPT
            && self.header_tails.len() < 4
        {
            self.header_tails.push(tail.to_vec());
        }
    }

    /// A final line without `\n`: not an event (U4), only noted.
    pub fn torn_line(&mut self) {
        self.out.torn_line = true;
    }

    fn header(&mut self, line: &[u8]) {
        let Ok(h) = json::parse(line) else {
            self.out.refused = Some("its first line is not JSON (not a DSH session log)".into());
            return;
        };
        if h.get("type").and_then(Json::as_str) != Some("session") {
            self.out.refused = Some("its first line is not a DSH session header".into());
            return;
        }
        let version = h.get("version").and_then(Json::safe_uint);
        match version {
            Some(v @ 0..=4) => self.chunks = v <= 1,
            Some(v) => {
                self.out.refused =
                    Some(format!("it uses log format v{v}, which dshs does not read"));
                return;
            }
            None => {
                self.out.refused = Some("its header has no numeric version".into());
                return;
            }
        }
        let text = |k: &str| h.get(k).and_then(Json::as_str).map(str::to_owned);
        self.out.header = Header {
            id: text("id"),
            version,
            created_at: h.get("createdAt").and_then(Json::safe_int),
            parent_session: text("parentSession"),
            delegation_depth: h.get("delegationDepth").and_then(Json::safe_uint),
        };
        if self.chunks {
            self.seed_length = h.get("seedLength").and_then(Json::safe_uint);
        }
    }

    fn event(&mut self, v: &Json<'_>) {
        let Some(ty) = v.get("type").and_then(Json::as_str) else {
            return;
        };
        // An event without a usable seq or time is not placed; a call needs both.
        let (Some(seq), Some(time)) = (
            v.get("seq").and_then(Json::safe_uint),
            v.get("time").and_then(Json::safe_int),
        ) else {
            return;
        };
        let null = Json::Null;
        let d = v.get("data").unwrap_or(&null);
        let num = |k: &str| d.get(k).and_then(Json::safe_uint);
        let kind = Kind::of(ty);
        match kind {
            Kind::TurnStart => self.turn = num("turn"),
            Kind::TurnEnd => self.turn = None,
            Kind::RequestHeader => {
                let config = d.get("header").and_then(|h| h.get("config"));
                let field = |k| config.and_then(|c| c.get(k)).and_then(Json::as_str);
                let (p, m) = (field("provider"), field("model"));
                self.provider = self.name(p);
                self.model = self.name(m);
                self.header_tails.clear();
            }
            Kind::SessionTitle => {
                if let Some(t) = d.get("title").and_then(Json::as_str) {
                    self.out.title = Some(t.to_owned());
                }
            }
            Kind::SessionEndSeed
                if !self.chunks && d.get("inherited").and_then(Json::as_bool) == Some(true) =>
            {
                self.marker = Some(seq);
            }
            Kind::AssistantChunk if self.chunks => self.chunk_event(d, seq, time),
            Kind::AssistantMessage | Kind::AssistantAttempt => {
                let source = d.get("message").and_then(|m| m.get("source"));
                let field = |k| source.and_then(|s| s.get(k)).and_then(Json::as_str);
                self.call_event(CallEvent {
                    message: kind == Kind::AssistantMessage,
                    seq,
                    time,
                    turn: num("turn"),
                    step: num("step"),
                    provider: field("provider"),
                    model: field("model"),
                    own: d.get("usage").map(usage_of),
                    stream: stream_usage(d.get("stream")),
                });
            }
            Kind::CompactionSummary => {
                let field = |k| d.get(k).and_then(Json::as_str);
                let (p, m) = (field("provider"), field("model"));
                // A summary `dshs compact` wrote by hand: no model call (FORMAT.md §15.5).
                if (p, m) == (Some("dshs"), Some("manual")) && !d.has("usage") {
                    return;
                }
                let (provider, model) = (self.name(p), self.name(m));
                let usage = d.get("usage").map(usage_of);
                let rule = if usage.is_some() {
                    Rule::SummaryUsage
                } else {
                    Rule::NoUsage
                };
                let summary = Attempt {
                    usage,
                    seq,
                    time,
                    provider,
                    model,
                };
                self.emit(summary, self.turn, None, rule, Concluded::CompactionSummary);
            }
            _ => {}
        }
    }

    /// An `assistant/message` or `assistant/attempt`, read by the walk or the parse.
    fn call_event(&mut self, e: CallEvent<'_>) {
        let CallEvent {
            seq,
            time,
            turn,
            step,
            ..
        } = e;
        if !e.message {
            // v0/v1 have no attempt events: their attempts are the chunk streams.
            if self.chunks {
                return;
            }
            let attempt = Attempt {
                usage: e.stream,
                seq,
                time,
                provider: self.provider.clone(),
                model: self.model.clone(),
            };
            self.emit_unclaimed(attempt, turn, step, Concluded::AssistantAttempt);
            return;
        }
        let provider = self.name(e.provider).or_else(|| self.provider.clone());
        let model = self.name(e.model).or_else(|| self.model.clone());
        let claimed = if self.chunks {
            self.enter_step(turn, step);
            self.step
                .finished
                .take()
                .or_else(|| self.step.open.take())
                .and_then(|a| a.usage)
        } else {
            // v2+: the message's own embedded stream is its attempt.
            e.stream
        };
        let (usage, rule) = match (e.own, claimed) {
            (Some(u), _) => (Some(u), Rule::MessageUsage),
            (None, Some(u)) => (Some(u), Rule::StreamUsage),
            (None, None) => (None, Rule::NoUsage),
        };
        let message = Attempt {
            usage,
            seq,
            time,
            provider,
            model,
        };
        self.emit(message, turn, step, rule, Concluded::AssistantMessage);
    }

    /// A line of a walked type as the walk found it (`line`: the same bytes, checked as
    /// UTF-8); `false`: parse it instead.
    fn walked(&mut self, f: &raw::Found<'_>, line: &str) -> bool {
        // The walk took only escape-free names: they are the bytes themselves, pieces of a
        // line already checked, cut between two quotes (so on characters).
        let text = |b: Option<&[u8]>| b.and_then(|b| piece(line, b));
        let kind = f.ty.and_then(read_kind).map(|(k, _)| k);
        let message = match kind {
            Some(Kind::AssistantMessage) => true,
            Some(Kind::AssistantAttempt) => false,
            Some(Kind::AssistantChunk) => {
                if let (Some(seq), Some(time), true) = (f.seq, f.time, self.chunks) {
                    let kind = match f.chunk_type {
                        Some(b"usage") => ChunkKind::Usage,
                        Some(b"finish") => ChunkKind::Finish,
                        _ => return true,
                    };
                    let usage = f.chunk_usage.map_or(Usage::Invalid, usage_of_raw);
                    self.chunk(seq, time, f.turn, f.step, kind, usage);
                }
                return true;
            }
            Some(Kind::TurnStart | Kind::TurnEnd | Kind::RequestHeader) => {
                // Not placed without a seq and a time, as in `event`.
                if f.seq.is_some() && f.time.is_some() {
                    match kind {
                        Some(Kind::TurnStart) => self.turn = f.turn,
                        Some(Kind::TurnEnd) => self.turn = None,
                        _ => {
                            let provider = self.name(text(f.header_provider));
                            let model = self.name(text(f.header_model));
                            self.header_placed(line.as_bytes(), provider, model);
                        }
                    }
                }
                return true;
            }
            _ => return false,
        };
        let (Some(seq), Some(time)) = (f.seq, f.time) else {
            // Not placed, as the parse would not place it.
            return true;
        };
        let usage = usage_of_raw;
        self.call_event(CallEvent {
            message,
            seq,
            time,
            turn: f.turn,
            step: f.step,
            provider: text(f.provider),
            model: text(f.model),
            own: f.usage.map(usage),
            stream: f.stream_usage.map(|u| u.map_or(Usage::Invalid, usage)),
        });
        true
    }

    /// v0/v1: a chunk of step (turn, step); a chunk of another step first settles the
    /// attempts of the previous one that no message claimed.
    fn enter_step(&mut self, turn: Option<u64>, step: Option<u64>) {
        if (self.step.turn, self.step.step) != (turn, step) {
            self.settle_step();
            self.step.turn = turn;
            self.step.step = step;
        }
    }

    /// The attempts of the current step that no message claimed are calls of their own
    /// (U2.3).
    fn settle_step(&mut self) {
        let (turn, step) = (self.step.turn, self.step.step);
        let finished = self.step.finished.take();
        let open = self.step.open.take();
        for (a, concluded) in [(finished, Concluded::Finish), (open, Concluded::Unfinished)] {
            if let Some(a) = a {
                self.emit_unclaimed(a, turn, step, concluded);
            }
        }
    }

    /// A parsed `assistant/chunk`'s `data`.
    fn chunk_event(&mut self, d: &Json<'_>, seq: u64, time: i64) {
        let Some(chunk) = d.get("chunk") else { return };
        let kind = match chunk.get("type").and_then(Json::as_str) {
            Some("usage") => ChunkKind::Usage,
            Some("finish") => ChunkKind::Finish,
            _ => return,
        };
        let usage = chunk.get("usage").map_or(Usage::Invalid, usage_of);
        let turn = d.get("turn").and_then(Json::safe_uint);
        let step = d.get("step").and_then(Json::safe_uint);
        self.chunk(seq, time, turn, step, kind, usage);
    }

    /// A v0/v1 usage or finish chunk of step (turn, step); `usage`: a usage chunk's.
    fn chunk(
        &mut self,
        seq: u64,
        time: i64,
        turn: Option<u64>,
        step: Option<u64>,
        kind: ChunkKind,
        usage: Usage,
    ) {
        self.enter_step(turn, step);
        let (provider, model) = (self.provider.clone(), self.model.clone());
        let open = self.step.open.get_or_insert(Attempt {
            usage: None,
            seq,
            time,
            provider,
            model,
        });
        open.seq = seq;
        open.time = time;
        if kind == ChunkKind::Usage {
            // U2.1: the last usage record of the attempt's stream.
            open.usage = Some(usage);
            return;
        }
        // A finish concludes the attempt; an earlier finished one no message claimed was a
        // call of its own (a retry).
        let done = self.step.open.take();
        if let Some(prev) = self.step.finished.replace(done.unwrap_or(Attempt {
            usage: None,
            seq,
            time,
            provider: self.provider.clone(),
            model: self.model.clone(),
        })) {
            self.emit_unclaimed(prev, turn, step, Concluded::Finish);
        }
    }

    /// An attempt that no message claimed (or a v2+ `assistant/attempt`) is a call of its
    /// own, counted by its stream's usage when it has one.
    fn emit_unclaimed(
        &mut self,
        a: Attempt,
        turn: Option<u64>,
        step: Option<u64>,
        concluded: Concluded,
    ) {
        let rule = if a.usage.is_some() {
            Rule::StreamUsage
        } else {
            Rule::NoUsage
        };
        self.emit(a, turn, step, rule, concluded);
    }

    /// The call `a` stands for (a message, summary or attempt), in `step` of `turn`.
    fn emit(
        &mut self,
        a: Attempt,
        turn: Option<u64>,
        step: Option<u64>,
        rule: Rule,
        concluded: Concluded,
    ) {
        let Attempt {
            usage,
            seq,
            time,
            provider,
            model,
        } = a;
        let tokens = match usage {
            None => None,
            Some(Usage::Invalid) => {
                self.out.invalid_usage.note(seq);
                return;
            }
            Some(Usage::Tokens(t, mismatch)) => {
                if mismatch {
                    self.out.total_mismatch.note(seq);
                }
                Some(t)
            }
        };
        if self.seed_length.is_some_and(|n| seq < n) {
            self.out.inherited_calls += 1;
            return;
        }
        self.out.calls.push(Call {
            seq,
            time,
            turn,
            step,
            provider,
            model,
            tokens,
            rule,
            concluded,
        });
    }

    /// The session's calls, once every line is read.
    pub fn finish(mut self) -> SessionUsage {
        self.settle_step();
        if let Some(cut) = self.marker {
            let before = self.out.calls.len();
            self.out.calls.retain(|c| c.seq >= cut);
            self.out.inherited_calls += (before - self.out.calls.len()) as u64;
            self.out.inherited_events = cut;
        } else if let Some(n) = self.seed_length {
            self.out.inherited_events = n;
        }
        self.out
    }
}

/// Bytes read at a time (by [`read`], and so fed to a [`Feed`] at a time).
pub const BLOCK: usize = 256 * 1024;

/// A cut line's buffer is kept for the next one up to this size.
const LONG: usize = 256 * 1024;

/// Splits bytes, as they come, into the lines a [`Counter`] takes: the complete lines of a
/// block are counted in place, only a line cut by the block's end is copied. A line no rule
/// reads is passed over without being held, however long it is.
#[derive(Debug, Default)]
pub struct Feed {
    counter: Counter,
    /// The start of a line not yet ended.
    partial: Vec<u8>,
    /// Passing over the rest of a cut line no rule reads.
    skipping: bool,
}

impl Feed {
    pub fn new() -> Feed {
        let mut feed = Feed::default();
        SPARE.with(|s| {
            let mut s = s.borrow_mut();
            feed.counter.out.calls = std::mem::take(&mut s.calls);
            feed.partial = std::mem::take(&mut s.partial);
        });
        feed
    }

    /// The next bytes of the log.
    pub fn bytes(&mut self, mut b: &[u8]) {
        if self.skipping {
            match memchr::memchr(b'\n', b) {
                Some(i) => {
                    self.skipping = false;
                    self.counter.out.lines += 1;
                    self.counter.out.bytes += (i + 1) as u64;
                    b = &b[i + 1..];
                }
                None => {
                    self.counter.out.bytes += b.len() as u64;
                    return;
                }
            }
        }
        if !self.partial.is_empty() {
            match memchr::memchr(b'\n', b) {
                Some(i) => {
                    self.partial.extend_from_slice(&b[..i]);
                    self.counter.line(&self.partial);
                    self.partial.clear();
                    if self.partial.capacity() > 4 * LONG {
                        self.partial.shrink_to(LONG);
                    }
                    b = &b[i + 1..];
                }
                None => {
                    self.partial.extend_from_slice(b);
                    self.pass_over_unread_line();
                    return;
                }
            }
        }
        let mut at = 0;
        raw::each_newline(b, |i| {
            self.counter.line(&b[at..i]);
            at = i + 1;
        });
        self.partial.extend_from_slice(&b[at..]);
        self.pass_over_unread_line();
    }

    /// A cut line is held only until its type is read: one no rule reads is passed over
    /// from there (most cut lines are long tool results, not worth a copy).
    fn pass_over_unread_line(&mut self) {
        if self.counter.started && classify(&self.partial) == Class::Skip {
            self.counter.out.bytes += self.partial.len() as u64;
            // Kept, not freed: the next cut line would fault a new buffer in page by page.
            self.partial.clear();
            self.skipping = true;
        }
    }

    /// The log ended: a line left without its `\n` is torn (not read).
    pub fn finish(mut self) -> SessionUsage {
        if !self.partial.is_empty() || self.skipping {
            self.counter.torn_line();
        }
        let mut partial = std::mem::take(&mut self.partial);
        if partial.capacity() <= 4 * LONG {
            partial.clear();
            SPARE.with(|s| s.borrow_mut().partial = partial);
        }
        self.counter.finish()
    }
}

/// A thread's buffers from its last log, kept for the next: memory the allocator hands back
/// to the system is faulted in again page by page (~30,000 faults over 1.4 GB of logs when
/// each log grew its own call list and block).
#[derive(Default)]
struct Spare {
    calls: Vec<Call>,
    block: Vec<u8>,
    partial: Vec<u8>,
}

thread_local! {
    static SPARE: std::cell::RefCell<Spare> = std::cell::RefCell::default();
}

/// A call list kept for the next log at most this large (bytes).
const SPARE_CALLS: usize = 4 << 20;

/// Hand a session's call list back once it is counted, for the next log this thread reads.
pub fn recycle(mut calls: Vec<Call>) {
    if calls.capacity() * std::mem::size_of::<Call>() <= SPARE_CALLS {
        calls.clear();
        SPARE.with(|s| s.borrow_mut().calls = calls);
    }
}

/// Read a whole log (plaintext: zstd is decoded by whoever opened it) and gather its calls.
pub fn read(mut reader: impl Read) -> io::Result<SessionUsage> {
    let mut feed = Feed::new();
    let mut buf = SPARE.with(|s| std::mem::take(&mut s.borrow_mut().block));
    buf.resize(BLOCK, 0);
    let result = loop {
        match reader.read(&mut buf) {
            Ok(0) => break Ok(feed.finish()),
            Ok(n) => feed.bytes(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    SPARE.with(|s| s.borrow_mut().block = buf);
    result
}

/// A reader that hands every byte it gives out to a [`Feed`] too, so a pass that reads a log
/// for other reasons (`stats`) counts its calls exactly as [`read`] does, in the same read.
pub struct Tap<R> {
    inner: R,
    feed: Arc<Mutex<Feed>>,
}

impl<R> Tap<R> {
    /// The tap, and the feed to [`Feed::finish`] once the reader is done.
    pub fn new(inner: R) -> (Tap<R>, Arc<Mutex<Feed>>) {
        let feed = Arc::new(Mutex::new(Feed::new()));
        (
            Tap {
                inner,
                feed: feed.clone(),
            },
            feed,
        )
    }
}

impl<R: BufRead> Read for Tap<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        super::input::read_through_buffer(self, out)
    }
}

impl<R: BufRead> BufRead for Tap<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        if let Ok(buf) = self.inner.fill_buf() {
            let n = amt.min(buf.len());
            self.feed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .bytes(&buf[..n]);
        }
        self.inner.consume(amt);
    }
}

#[cfg(test)]
mod tests;
