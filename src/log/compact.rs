//! Manual compaction (§15): from one scan of a log and a request (a surface range and a summary),
//! either a precise refusal or the exact bracket DSH's own compaction writes — `compaction/start`,
//! `compaction/summary`, the checkpoint `user/message` that replaces the range, `compaction/end` —
//! in the log's own format version (§15.1, with the dshs choices of §15.5). Like a repair, the
//! result is proven valid by scanning the exact bytes the log will hold before anything is
//! written ([`verify`]); writing itself is `write.rs`.
//!
//! `sourceEventSeqs` is always written as a plain array, whatever storage form the log already
//! uses (§5.3): the checkpoint list `[start seq, summary seq, …shadowed]` is never increasing
//! (both new seqs are larger than every shadowed one), so DSH's own encoder stores it verbatim,
//! and a range-encoded form of a non-increasing list would even be a malformed row.

use std::io;
use std::time::{SystemTime, UNIX_EPOCH};

use super::append::surface_of;
/// The check before writing, as for every writer (the plan is a [`CompactPlan`]).
pub use super::append::{Planned, Verdict, verify};
use super::derive::{DeriveError, Deriver};
use super::dialect::{CheckpointSource, Dialect, SurfaceKind};
use super::event::{Kind, row};
use super::json::{self, Json, write_js_str};
use super::scan::{EventInfo, FoldState, Observer, Scan, Status};
use super::surface::{RangeError, SurfaceManager};
use super::vocab::TypeClass;
use super::write::{Edit, Encoding};

/// The text DSH puts before the summary in every checkpoint message (§15.1), byte-exact.
pub const PREAMBLE: &str = "This is an automatically generated checkpoint condensing an earlier span of the conversation to free up context. Treat the captured context as established background and build on it without restating it. Continue the task directly from the messages that follow, without acknowledging this checkpoint.";

/// `compaction/summary.provider` and `.model` of a manual compaction: there was no model call,
/// but both are required strings (§15.5).
pub const PROVIDER: &str = "dshs";
pub const MODEL: &str = "manual";

/// What the user asks for: replace the surface nodes `start..=end` (in surface order) with a
/// checkpoint message carrying `summary`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub start: u64,
    pub end: u64,
    pub summary: String,
}

/// The fresh identities and the clock reading of one compaction (§15.5), minted by the caller
/// so that tests can fix them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Minted {
    pub compaction_id: String,
    pub message_id: String,
    /// Milliseconds since the Unix epoch; the same on all four events.
    pub time: i64,
}

impl Minted {
    /// Two random version-4 UUIDs and the current wall-clock time, as DSH mints them.
    pub fn fresh() -> io::Result<Minted> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|e| io::Error::other(format!("no random bytes for a UUID: {e}")))?;
        let (a, b) = bytes.split_at(16);
        let time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|_| io::Error::other("the system clock is before 1970"))?
            .as_millis();
        Ok(Minted {
            compaction_id: uuid_v4(a),
            message_id: uuid_v4(b),
            time: i64::try_from(time)
                .map_err(|_| io::Error::other("the system clock is absurd"))?,
        })
    }
}

/// A version-4 UUID (RFC 9562), lower-case and hyphenated, from 16 random bytes.
pub fn uuid_v4(random: &[u8]) -> String {
    let mut b = [0u8; 16];
    for (dst, src) in b.iter_mut().zip(random) {
        *dst = *src;
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let mut s = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{byte:02x}"));
    }
    s
}

// -------------------------------------------------------------------------------------------
// Watching the two endpoints during the scan, to say precisely why one is not on the surface.

/// What became of one endpoint seq during the pass.
#[derive(Debug, Clone, Default)]
struct Watched {
    seq: u64,
    /// The event's type, when the log has that seq.
    ty: Option<String>,
    /// The event joined the surface.
    joined: bool,
    /// The replacement that shadowed it first.
    replaced_by: Option<u64>,
    /// The node that stands for it on the surface now (itself, or the latest replacement of
    /// the replacement of …).
    holder: u64,
}

/// An [`Observer`] for the scan that feeds [`plan`]: remembers the type of the events at the
/// two requested seqs and which replacement shadowed them, in O(1) per event.
#[derive(Debug, Clone)]
pub struct Lookout {
    watched: [Watched; 2],
}

impl Lookout {
    pub fn new(req: &Request) -> Lookout {
        let w = |seq| Watched {
            seq,
            holder: seq,
            ..Watched::default()
        };
        Lookout {
            watched: [w(req.start), w(req.end)],
        }
    }
}

impl Observer for Lookout {
    fn reads_stream_records(&self) -> bool {
        false
    }
    fn event(&mut self, info: &EventInfo<'_, '_>, state: &FoldState) {
        // Rows after a bad row: a log with any is refused before the lookout is asked.
        if info.speculative {
            return;
        }
        let ev = info.event;
        for w in &mut self.watched {
            if ev.seq == w.seq {
                w.ty = Some(ev.ty.to_string());
                w.joined = info.accepted
                    && matches!(info.class, TypeClass::Surface(_))
                    && state.surface.contains(ev.seq);
            } else if w.joined
                && info.accepted
                && ev.is_replacement()
                && state.surface.contains(ev.seq)
                && !state.surface.contains(w.holder)
            {
                // Only a replacement takes nodes off the surface: this one took the holder.
                w.replaced_by.get_or_insert(ev.seq);
                w.holder = ev.seq;
            }
        }
    }
}

// -------------------------------------------------------------------------------------------
// Refusals.

/// Which end of the requested range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Start,
    End,
}

impl Endpoint {
    fn flag(self) -> &'static str {
        match self {
            Endpoint::Start => "--start",
            Endpoint::End => "--end",
        }
    }
}

/// Why a seq is not a current surface node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffSurface {
    /// The log has no event with that seq.
    NoSuchEvent { last: Option<u64> },
    /// The event is of a type that never joins the surface in this version.
    NotSurfaceType { ty: String },
    /// A later replacement took it off; `now` is the surface node that stands for it today.
    Replaced { by: u64, now: u64 },
    /// It never joined the surface (the fold rejected it) or left it some other way.
    Absent { ty: String },
}

/// Which cut around the range is unbalanced (§15.3 rule 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutSide {
    /// The cut before START.
    Before,
    /// The cut after END.
    After,
}

/// One tool call the range would separate from its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitCall {
    pub call_id: String,
    /// The `assistant/message` node that advertises the call.
    pub assistant: u64,
    /// The `tool/result` node that answers it, if one is on the surface.
    pub result: Option<u64>,
}

/// Why a compaction is not written. Nothing is written in every case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Unsupported version, V4 draft, unknown required event type (exit 3).
    Unsupported,
    /// The log has error findings.
    Invalid { errors: u64 },
    /// The file ends in a torn line: appending would glue the new events onto it.
    TornTail { line: u64 },
    /// Complete rows after the committed prefix that DSH drops on load.
    CrashTail { line: u64, rows: u64 },
    /// The last turn is open: a manual compaction happens between turns (§15.3 rule 4).
    OpenTurn {
        turn: String,
        start_seq: Option<u64>,
    },
    /// Another compaction is still running (§15.3 rule 4).
    ActiveCompaction,
    /// The summary is empty or only whitespace.
    EmptySummary,
    /// An endpoint is not a current surface node (§15.3 rule 1).
    OffSurface {
        endpoint: Endpoint,
        seq: u64,
        why: OffSurface,
    },
    /// START comes after END in surface order (§15.3 rule 1).
    Reversed {
        start: u64,
        end: u64,
        start_index: usize,
        end_index: usize,
    },
    /// The range covers the protected system prompt at surface position 0 (v3+, §15.3 rule 3).
    SystemHead {
        start: u64,
        end: u64,
        /// The node after the head, where a range may start.
        next: Option<u64>,
    },
    /// The range would separate a tool call from its result (§15.3 rule 2).
    SplitsToolCall {
        start: u64,
        end: u64,
        side: CutSide,
        /// How many calls are open at that cut.
        open: i64,
        /// The call, when the ids on the surface identify it.
        call: Option<SplitCall>,
    },
    /// A tool result on the surface has no call before it: DSH treats the surface as corrupt.
    OrphanResult { seq: u64 },
}

impl Refusal {
    /// Exit 3 rather than 1.
    pub fn is_unsupported(&self) -> bool {
        matches!(self, Refusal::Unsupported)
    }

    /// A one-line explanation; `file` is how the user named the log (already escaped for the
    /// terminal by the caller), for the commands it suggests.
    pub fn describe(&self, file: &str) -> String {
        match self {
            Refusal::Unsupported => "dshs does not support this log (see above)".into(),
            Refusal::Invalid { errors } => format!(
                "the log has {errors} error{} (see above; `dshs validate {file}` lists every finding): dshs compacts only logs that load cleanly",
                plural(*errors)
            ),
            Refusal::TornTail { line } => format!(
                "the log ends in a torn line (line {line}, a write cut by a crash): run `dshs repair {file}` first"
            ),
            Refusal::CrashTail { line, rows } => format!(
                "the log ends in a crash tail ({rows} row{} from line {line} that DSH drops on load): run `dshs repair {file}` first",
                plural(*rows)
            ),
            Refusal::OpenTurn { turn, start_seq } => format!(
                "the last turn ({turn}{}) is open: a manual compaction happens between turns; run `dshs repair {file}` first (or let DSH finish the turn)",
                start_seq.map_or_else(String::new, |s| format!(", started at seq {s}"))
            ),
            Refusal::ActiveCompaction => format!(
                "another compaction is still running (an unmatched compaction/start; `dshs validate {file}` names it): DSH expires it on the next resume"
            ),
            Refusal::EmptySummary => {
                "the summary is empty: the checkpoint message would tell the model nothing".into()
            }
            Refusal::OffSurface { endpoint, seq, why } => {
                let flag = endpoint.flag();
                match why {
                    OffSurface::NoSuchEvent { last: Some(last) } => format!(
                        "{flag} {seq}: the log has no seq {seq} (its last event is seq {last}); `dshs surface {file}` lists the current nodes"
                    ),
                    OffSurface::NoSuchEvent { last: None } => {
                        format!("{flag} {seq}: the log has no events")
                    }
                    OffSurface::NotSurfaceType { ty } => format!(
                        "{flag} {seq}: seq {seq} ({ty}) is not a message the model sees, so it is never a surface node; `dshs surface {file}` lists the current nodes"
                    ),
                    OffSurface::Replaced { by, now } if by == now => format!(
                        "{flag} {seq}: seq {seq} is not on the current surface (it was replaced by seq {by})"
                    ),
                    OffSurface::Replaced { by, now } => format!(
                        "{flag} {seq}: seq {seq} is not on the current surface (it was replaced by seq {by}, which seq {now} has replaced in turn)"
                    ),
                    OffSurface::Absent { ty } => format!(
                        "{flag} {seq}: seq {seq} ({ty}) is not on the current surface; `dshs surface {file}` lists the current nodes"
                    ),
                }
            }
            Refusal::Reversed {
                start,
                end,
                start_index,
                end_index,
            } => format!(
                "--start {start} comes after --end {end} on the surface (positions {start_index} and {end_index}): give the range in surface order, --start {end} --end {start}"
            ),
            Refusal::SystemHead { start, end, next } => format!(
                "range {start}..{end} covers the protected system prompt at seq {start} (format 3+: surface position 0 may only be rewritten by a system/message){}",
                next.map_or_else(String::new, |n| format!("; start the range at seq {n}"))
            ),
            Refusal::SplitsToolCall {
                start,
                end,
                side,
                open,
                call,
            } => {
                let cut = match side {
                    CutSide::Before => format!("before seq {start}"),
                    CutSide::After => format!("after seq {end}"),
                };
                match call {
                    Some(SplitCall {
                        call_id,
                        assistant,
                        result: Some(result),
                    }) => format!(
                        "range {start}..{end} splits tool call {call_id} (assistant seq {assistant}) from its result (seq {result}); a range must keep every call with its result"
                    ),
                    Some(SplitCall {
                        call_id,
                        assistant,
                        result: None,
                    }) => format!(
                        "range {start}..{end}: tool call {call_id} (assistant seq {assistant}) has no result on the surface, so the cut {cut} leaves it open; a range must keep every call with its result"
                    ),
                    None => format!(
                        "range {start}..{end}: the cut {cut} leaves {open} tool call{} apart from {} result{}; a range must keep every call with its result",
                        plural(open.unsigned_abs()),
                        if *open == 1 { "its" } else { "their" },
                        plural(open.unsigned_abs())
                    ),
                }
            }
            Refusal::OrphanResult { seq } => format!(
                "the surface is corrupt for compaction: the tool/result at seq {seq} has no tool call before it on the surface"
            ),
        }
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Why planning stopped: a refusal, or the log's lines could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("refused")]
    Refused(Refusal),
    #[error(transparent)]
    Read(#[from] DeriveError),
    #[error("cannot compress the appended events: {0}")]
    Encode(#[source] io::Error),
}

impl From<Refusal> for PlanError {
    fn from(r: Refusal) -> Self {
        PlanError::Refused(r)
    }
}

/// An empty (or whitespace-only) summary is refused before anything else is read.
pub fn check_summary(summary: &str) -> Result<(), Refusal> {
    if summary.trim().is_empty() {
        return Err(Refusal::EmptySummary);
    }
    Ok(())
}

// -------------------------------------------------------------------------------------------
// The plan.

/// Everything a compaction appends, decided before anything is written.
#[derive(Debug, Clone)]
pub struct CompactPlan {
    pub version: u8,
    pub start: u64,
    pub end: u64,
    /// The nodes the checkpoint replaces, in surface order.
    pub shadowed: Vec<u64>,
    /// `shadowedTokenCount` (§15.5).
    pub shadowed_tokens: u64,
    /// The seq of `compaction/start`; the checkpoint message is `first_seq + 2`.
    pub first_seq: u64,
    pub minted: Minted,
    /// The four events, each one line of compact JSON without its `\n`.
    pub lines: Vec<String>,
    /// Bytes `[0, keep)` are the log as it is (all of it, as stored): never rewritten.
    pub keep: u64,
    /// Plain lines, or one zstd frame holding all four (§15.5).
    pub encoding: Encoding,
    /// Plaintext length of the compacted log.
    pub plain_len: u64,
    /// The surface the compacted log must have.
    pub expected_surface: Vec<u64>,
    /// Warnings the log had: the compacted log may have no more.
    warnings_before: u64,
    append: Vec<u8>,
}

impl CompactPlan {
    /// The seq of the checkpoint `user/message`: the new surface node.
    pub fn checkpoint_seq(&self) -> u64 {
        self.first_seq + 2
    }

    /// The seq of `compaction/end`.
    pub fn last_seq(&self) -> u64 {
        self.first_seq + 3
    }

    /// The four lines, each ending in `\n` (one zstd frame for a zstd log): the one append.
    pub fn append(&self) -> &[u8] {
        &self.append
    }

    /// Length of the compacted log as stored.
    pub fn compacted_len(&self) -> u64 {
        self.keep + self.append.len() as u64
    }
}

/// Decide the compaction from a full scan of the log (not a `--at` replay) whose observer was
/// `lookout`. `messages` reads the stored messages of surface nodes back from the same log
/// (for the token estimate and to name a split tool call).
pub fn plan(
    scan: &Scan,
    lookout: &Lookout,
    req: &Request,
    minted: Minted,
    messages: &mut Deriver,
) -> Result<CompactPlan, PlanError> {
    check_summary(&req.summary)?;
    match scan.status() {
        Status::Unsupported => return Err(Refusal::Unsupported.into()),
        Status::Invalid | Status::Unreadable => {
            return Err(Refusal::Invalid {
                errors: scan.tally.errors.max(1),
            }
            .into());
        }
        Status::Valid => {}
    }
    let (Some(dialect), Some(state)) = (scan.dialect, &scan.state) else {
        return Err(Refusal::Invalid { errors: 1 }.into());
    };
    if scan.tally.errors > 0 {
        return Err(Refusal::Invalid {
            errors: scan.tally.errors,
        }
        .into());
    }
    if let Some(c) = scan.crash {
        return Err(Refusal::CrashTail {
            line: c.line,
            rows: c.rows,
        }
        .into());
    }
    if let Some(t) = scan.torn {
        return Err(Refusal::TornTail { line: t.line }.into());
    }
    if state.closers.is_open() {
        return Err(Refusal::OpenTurn {
            turn: state.closers.open_turn().unwrap_or_default(),
            start_seq: state.last_turn_start.map(|(_, seq)| seq),
        }
        .into());
    }
    if state.compaction.is_active() {
        return Err(Refusal::ActiveCompaction.into());
    }
    let surface = &state.surface;
    let shadowed = take_range(dialect, surface, lookout, req)?;
    check_head(dialect, surface, req)?;
    check_pairing(surface, req, messages)?;

    let mut shadowed_tokens = 0u64;
    for seq in &shadowed {
        let Some(node) = surface.node(*seq) else {
            continue;
        };
        if node.derives {
            let len = messages.message(&node)?.len() as u64;
            shadowed_tokens += len.div_ceil(4);
        }
    }
    let first_seq = surface.next_seq();
    let lines = bracket(dialect, first_seq, req, &minted, &shadowed, shadowed_tokens);
    let mut plain = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for l in &lines {
        plain.extend_from_slice(l.as_bytes());
        plain.push(b'\n');
    }
    let encoding = Encoding::of(scan);
    let plain_len = scan.total_bytes + plain.len() as u64;
    let append = encoding.encode(&plain).map_err(PlanError::Encode)?;
    let mut expected_surface = Vec::with_capacity(surface.len() + 1 - shadowed.len());
    let mut inside = false;
    for n in surface.iter() {
        if n.seq == req.start {
            inside = true;
            expected_surface.push(first_seq + 2);
        }
        if !inside {
            expected_surface.push(n.seq);
        }
        if n.seq == req.end {
            inside = false;
        }
    }
    Ok(CompactPlan {
        version: dialect.version,
        start: req.start,
        end: req.end,
        shadowed,
        shadowed_tokens,
        first_seq,
        minted,
        lines,
        keep: scan.physical_len(),
        encoding,
        plain_len,
        expected_surface,
        warnings_before: scan.tally.warnings,
        append,
    })
}

/// §15.3 rule 1: both endpoints are current nodes, START not after END.
fn take_range(
    dialect: &Dialect,
    surface: &SurfaceManager,
    lookout: &Lookout,
    req: &Request,
) -> Result<Vec<u64>, Refusal> {
    let off = |endpoint: Endpoint| {
        let w = &lookout.watched[endpoint as usize];
        let why = match &w.ty {
            None => OffSurface::NoSuchEvent {
                last: surface.next_seq().checked_sub(1),
            },
            Some(ty) => match w.replaced_by {
                Some(by) => OffSurface::Replaced { by, now: w.holder },
                None if dialect.surface_kind(ty).is_none() => {
                    OffSurface::NotSurfaceType { ty: ty.clone() }
                }
                None => OffSurface::Absent { ty: ty.clone() },
            },
        };
        Refusal::OffSurface {
            endpoint,
            seq: w.seq,
            why,
        }
    };
    surface.range(req.start, req.end).map_err(|e| match e {
        RangeError::StartMissing => off(Endpoint::Start),
        RangeError::EndMissing => off(Endpoint::End),
        RangeError::Reversed => Refusal::Reversed {
            start: req.start,
            end: req.end,
            start_index: surface.index_of(req.start).unwrap_or_default(),
            end_index: surface.index_of(req.end).unwrap_or_default(),
        },
    })
}

/// §15.3 rule 3 (v3+): the range does not include a system message at position 0.
fn check_head(dialect: &Dialect, surface: &SurfaceManager, req: &Request) -> Result<(), Refusal> {
    if !dialect.system_head {
        return Ok(());
    }
    match surface.head() {
        Some(head) if head.seq == req.start && head.kind == SurfaceKind::System => {
            Err(Refusal::SystemHead {
                start: req.start,
                end: req.end,
                next: surface.iter().nth(1).map(|n| n.seq),
            })
        }
        _ => Ok(()),
    }
}

/// §15.3 rule 2: the cuts before START and after END are balanced. On failure, read the ids
/// of the calls and results on the surface to name the call the range would split.
fn check_pairing(
    surface: &SurfaceManager,
    req: &Request,
    messages: &mut Deriver,
) -> Result<(), PlanError> {
    let (before, after) = match surface.balance_around(req.start, req.end) {
        Ok(counts) => counts,
        Err(seq) => return Err(Refusal::OrphanResult { seq }.into()),
    };
    if before == 0 && after == 0 {
        return Ok(());
    }
    let (side, open) = if before != 0 {
        (CutSide::Before, before)
    } else {
        (CutSide::After, after)
    };
    let call = split_call(surface, req, side, messages)?;
    Err(Refusal::SplitsToolCall {
        start: req.start,
        end: req.end,
        side,
        open,
        call,
    }
    .into())
}

/// A call open at the unbalanced cut, matched to its result by id.
fn split_call(
    surface: &SurfaceManager,
    req: &Request,
    side: CutSide,
    messages: &mut Deriver,
) -> Result<Option<SplitCall>, DeriveError> {
    struct Call {
        id: String,
        assistant: u64,
        at: usize,
        result: Option<(u64, usize)>,
    }
    let mut calls: Vec<Call> = Vec::new();
    let (mut first, mut last) = (usize::MAX, usize::MAX);
    for (i, n) in surface.iter().enumerate() {
        if n.seq == req.start {
            first = i;
        }
        if n.seq == req.end {
            last = i;
        }
        let wanted = (n.kind == SurfaceKind::Assistant && n.tool_calls > 0)
            || n.kind == SurfaceKind::ToolResult;
        if !wanted || !n.derives {
            continue;
        }
        let bytes = messages.message(&n)?;
        let text = String::from_utf8_lossy(&bytes);
        let Ok(msg) = json::parse(text.as_bytes()) else {
            continue;
        };
        if n.kind == SurfaceKind::Assistant {
            for id in call_ids(&msg) {
                calls.push(Call {
                    id: id.to_owned(),
                    assistant: n.seq,
                    at: i,
                    result: None,
                });
            }
        } else if let Some(id) = result_call_id(&msg)
            && let Some(c) = calls.iter_mut().find(|c| c.id == id && c.result.is_none())
        {
            c.result = Some((n.seq, i));
        }
    }
    let open_at_cut = |c: &&Call| match side {
        // Advertised before START and not answered before it.
        CutSide::Before => c.at < first && c.result.is_none_or(|(_, r)| r >= first),
        // Advertised up to END and not answered by then.
        CutSide::After => c.at <= last && c.result.is_none_or(|(_, r)| r > last),
    };
    let inside = |i: usize| first <= i && i <= last;
    // Prefer a call whose pair straddles an edge of the range (one side in, one out).
    let pick = calls
        .iter()
        .filter(open_at_cut)
        .find(|c| c.result.is_some_and(|(_, r)| inside(c.at) != inside(r)))
        .or_else(|| calls.iter().find(|c| open_at_cut(c)));
    Ok(pick.map(|c| SplitCall {
        call_id: c.id.clone(),
        assistant: c.assistant,
        result: c.result.map(|(seq, _)| seq),
    }))
}

fn call_ids<'m>(msg: &'m Json<'_>) -> impl Iterator<Item = &'m str> {
    msg.get("content")
        .and_then(Json::as_arr)
        .unwrap_or_default()
        .iter()
        .filter(|b| b.get("type").and_then(Json::as_str) == Some("tool-call"))
        .filter_map(|b| b.get("id").and_then(Json::as_str))
}

fn result_call_id<'m>(msg: &'m Json<'_>) -> Option<&'m str> {
    msg.get("source")?.get("callId")?.as_str()
}

/// The four events of §15.1 as DSH serializes them (key order as listed there; §15.5 values).
fn bracket(
    d: &Dialect,
    first_seq: u64,
    req: &Request,
    m: &Minted,
    shadowed: &[u64],
    tokens: u64,
) -> Vec<String> {
    let (start, end) = (req.start, req.end);
    let time = m.time;
    let mut id = String::new();
    write_js_str(&m.compaction_id, &mut id);
    let mut text = String::new();
    write_js_str(&req.summary, &mut text);
    let mut message_id = String::new();
    write_js_str(&m.message_id, &mut message_id);
    let mut preamble = String::new();
    write_js_str(&format!("{PREAMBLE}\n\n<compacted-summary>"), &mut preamble);
    let seqs = |list: &[u64]| {
        list.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let source = match d.checkpoint_source {
        CheckpointSource::Plugin => {
            format!(r#"{{"kind":"plugin","plugin":"compact","compactionId":{id}}}"#)
        }
        CheckpointSource::CompactCheckpoint => {
            format!(r#"{{"kind":"compact-checkpoint","compactionId":{id}}}"#)
        }
    };
    let (start_key, end_key) = d.replace_keys;
    let mut sources = vec![first_seq, first_seq + 1];
    sources.extend_from_slice(shadowed);
    let data = format!(r#"{{"compactionId":{id},"turn":null}}"#);
    vec![
        row(Kind::CompactionStart, first_seq, time, &data, ""),
        row(
            Kind::CompactionSummary,
            first_seq + 1,
            time,
            &format!(
                r#"{{"compactionId":{id},"summary":[{{"type":"text","text":{text}}}],"shadowedRange":{{"start":{start},"end":{end}}},"shadowedSeqs":[{}],"shadowedTokenCount":{tokens},"provider":"{PROVIDER}","model":"{MODEL}"}}"#,
                seqs(shadowed)
            ),
            "",
        ),
        row(
            Kind::UserMessage,
            first_seq + 2,
            time,
            &format!(
                r#"{{"content":[{{"type":"text","text":{preamble}}},{{"type":"text","text":{text}}},{{"type":"text","text":"</compacted-summary>"}}],"source":{source},"role":"user","id":{message_id}}}"#
            ),
            &format!(
                r#","sourceEventSeqs":[{}],"surfaceOp":{{"op":"replace","{start_key}":{start},"{end_key}":{end}}}"#,
                seqs(&sources)
            ),
        ),
        row(Kind::CompactionEnd, first_seq + 3, time, &data, ""),
    ]
}

// -------------------------------------------------------------------------------------------
// Proof before writing.

impl Planned for CompactPlan {
    /// The write: keep every byte, append the four lines (compaction never cuts).
    fn edit(&self) -> Edit<'_> {
        Edit {
            keep: self.keep,
            append: &self.append,
            // Compaction never cuts: a crash leaves the log plus part of the append, which
            // holds nothing that was committed before.
            journal: false,
        }
    }

    fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Whether the scan of the compacted log ([`super::append::scan_edit`]) is what the
    /// compaction promises: clean, of the planned length, no new warning, no open turn or
    /// running compaction left, and exactly the expected surface.
    fn verified(&self, compacted: &Scan) -> bool {
        let quiet_end = compacted
            .state
            .as_ref()
            .is_some_and(|st| !st.closers.is_open() && !st.compaction.is_active());
        compacted.is_clean_write(self.compacted_len(), self.plain_len)
            && compacted.tally.warnings <= self.warnings_before
            && quiet_end
            && surface_of(compacted) == self.expected_surface
    }
}

#[cfg(test)]
mod tests;
