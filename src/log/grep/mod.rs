//! Searching the decoded text of a log (`dshs grep`): a pattern, the filters, and an
//! [`Observer`] of the one pass that collects what matches. No printing here.
//!
//! A log is read twice at most. First its raw lines go through the pattern's
//! [`prefilter::LinePrefilter`] (memchr speed, no parse): a log without a line that could match
//! is done, and so is one whose candidate lines, decoded alone, hold no match ([`confirm`]).
//! Otherwise the scan folds it exactly as `validate` does, and [`Search`] extracts
//! the text of the candidate lines' events ([`text::parts`]) and matches it line by line.
//! Whether a match is on the surface the model sees now is known only once the log has been
//! folded to its end: matches are held per log and resolved by [`Search::finish`].

pub mod prefilter;
pub mod spill;
pub mod text;

use std::collections::VecDeque;
use std::io;
use std::ops::Range;

use regex::Regex;

use crate::log::dialect::Dialect;
use crate::log::event::Kind;
use crate::log::finding::Pos;
use crate::log::legacy;
use crate::log::rows::{self, Row};
use crate::log::scan::{EventInfo, FoldState, Observer};
use crate::log::sqlite::PackedRead;
use crate::log::vocab::TypeClass;

pub use prefilter::{Candidates, LinePrefilter};
use spill::Spill;
pub use text::{Extract, Part, PartKind, Role};

/// How the pattern is written.
#[derive(Debug, Clone, Default)]
pub struct PatternOptions {
    pub pattern: String,
    /// `-F`: the pattern is a literal string.
    pub fixed: bool,
    pub ignore_case: bool,
    /// `-w`: a match must not touch a word character on either side.
    pub word: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    #[error("{0}")]
    Regex(#[from] regex::Error),
    #[error("{0}")]
    Syntax(Box<regex_syntax::Error>),
    #[error(
        "the pattern contains a line break: text is searched one line at a time, so it could never match"
    )]
    LineBreak,
}

/// A compiled pattern and the raw-line test derived from it.
#[derive(Debug, Clone)]
pub struct Pattern {
    regex: Regex,
    prefilter: Option<LinePrefilter>,
    /// The pattern uses `\A` or `\z`: matched line by line only (see [`Pattern::lines`]).
    per_line: bool,
}

impl Pattern {
    pub fn new(o: &PatternOptions) -> Result<Pattern, PatternError> {
        let body = if o.fixed {
            regex::escape(&o.pattern)
        } else {
            o.pattern.clone()
        };
        // GNU grep's -w: not preceded nor followed by a word character (half boundaries, so
        // `-w @foo` still matches at the start of "@foo").
        let source = if o.word {
            format!(r"\b{{start-half}}(?:{body})\b{{end-half}}")
        } else {
            body
        };
        // Multi-line (and CRLF), so that `^` and `$` mean a line's ends in the whole-text
        // search of [`Pattern::lines`] as they do on each line.
        let regex = regex::RegexBuilder::new(&source)
            .case_insensitive(o.ignore_case)
            .multi_line(true)
            .crlf(true)
            .build()?;
        let hir = regex_syntax::ParserBuilder::new()
            .case_insensitive(o.ignore_case)
            .multi_line(true)
            .crlf(true)
            .build()
            .parse(&source)
            .map_err(|e| PatternError::Syntax(Box::new(e)))?;
        if has_line_break(&hir) {
            return Err(PatternError::LineBreak);
        }
        let mut prefilter = LinePrefilter::new(&hir);
        if o.ignore_case {
            let exact = regex_syntax::ParserBuilder::new()
                .multi_line(true)
                .crlf(true)
                .build()
                .parse(&source)
                .ok();
            if let Some(folded) = exact.as_ref().and_then(LinePrefilter::ignoring_case)
                && prefilter
                    .as_ref()
                    .is_none_or(|p| folded.shortest() > p.shortest())
            {
                prefilter = Some(folded);
            }
        }
        let looks = hir.properties().look_set();
        let per_line = looks.contains(regex_syntax::hir::Look::Start)
            || looks.contains(regex_syntax::hir::Look::End);
        Ok(Pattern {
            regex,
            prefilter,
            per_line,
        })
    }

    /// The raw-line test, when the pattern has a literal every match holds.
    pub fn prefilter(&self) -> Option<&LinePrefilter> {
        self.prefilter.as_ref()
    }

    pub fn regex(&self) -> &Regex {
        &self.regex
    }

    /// Each line of `text` that holds a match (split at `\n`; a `\r` before it is not part
    /// of the line), as `(line number from 1, line)`. The matches themselves are left to the
    /// caller ([`Pattern::regex`]): a count needs none of them, and a line of a million
    /// matches would hold them all.
    pub fn lines<'t>(&self, text: &'t str, mut f: impl FnMut(u32, &'t str)) {
        let mut line_no = 1u32;
        let mut counted_to = 0;
        let mut at = 0;
        while at < text.len() {
            // The next line that may hold a match: where the whole text has one (a match
            // there may cross a line end; each line is then matched on its own). With `\A`
            // or `\z`, which mean a line's ends here but the text's there, every line is.
            let mut found_end = None;
            let start = if self.per_line {
                at
            } else {
                match self.regex.find_at(text, at) {
                    Some(m) => {
                        found_end = Some(m.end());
                        memchr::memrchr(b'\n', &text.as_bytes()[at..m.start()])
                            .map_or(at, |i| at + i + 1)
                    }
                    None => break,
                }
            };
            // A text that ends in a line break has no line after it (an empty match at the
            // very end, `^$` say, is not a line of the text).
            if start >= text.len() {
                break;
            }
            let end =
                memchr::memchr(b'\n', &text.as_bytes()[start..]).map_or(text.len(), |i| start + i);
            let skipped = memchr::memchr_iter(b'\n', &text.as_bytes()[counted_to..start]).count();
            line_no = line_no.saturating_add(u32::try_from(skipped).unwrap_or(u32::MAX));
            counted_to = start;
            let line = &text[start..end];
            let line = line.strip_suffix('\r').unwrap_or(line);
            // A match of the whole text that ends within the line is one of the line's own
            // (the pattern holds no line break, and `^`/`$` mean a line's ends in both).
            if found_end.is_some_and(|e| e <= start + line.len()) || self.regex.is_match(line) {
                f(line_no, line);
            }
            at = end + 1;
        }
    }
}

/// Does the pattern hold a literal line break (never matchable one line at a time)?
fn has_line_break(hir: &regex_syntax::hir::Hir) -> bool {
    use regex_syntax::hir::HirKind;
    match hir.kind() {
        HirKind::Literal(l) => l.0.contains(&b'\n'),
        HirKind::Capture(c) => has_line_break(&c.sub),
        HirKind::Repetition(r) => r.min > 0 && has_line_break(&r.sub),
        HirKind::Concat(parts) => parts.iter().any(has_line_break),
        HirKind::Alternation(alts) => alts.iter().all(has_line_break),
        HirKind::Empty | HirKind::Class(_) | HirKind::Look(_) => false,
    }
}

/// An inclusive turn range (either end open).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Turns {
    pub first: Option<i64>,
    pub last: Option<i64>,
}

impl Turns {
    pub fn contains(&self, turn: i64) -> bool {
        self.first.is_none_or(|a| turn >= a) && self.last.is_none_or(|b| turn <= b)
    }
}

/// What a search keeps of each matching line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The whole line (JSON output).
    Line,
    /// At most this many characters around the matches (a terminal line).
    Window(usize),
    /// Nothing: only counts (`-c`, `-l`).
    Count,
}

/// Everything a search asks of a log.
#[derive(Debug, Clone)]
pub struct Query {
    pub pattern: Pattern,
    /// Event types (`tool/` for a family); empty: all.
    pub types: Vec<String>,
    /// Roles; empty: all (text without a role included).
    pub roles: Vec<Role>,
    pub turns: Option<Turns>,
    /// Event time bounds, Unix epoch milliseconds, inclusive.
    pub since: Option<i64>,
    pub until: Option<i64>,
    /// Only what the model sees now: nodes of the final surface (and, in v0–v2, the latest
    /// request's system prompt).
    pub surface_only: bool,
    pub extract: Extract,
    /// Events of context before and after each matching one.
    pub context: usize,
    pub keep: Keep,
    /// Only whether the log holds a match is asked (`-l`, `-q`): its pass ends at the first.
    pub first_match_only: bool,
}

impl Query {
    /// Whether a log's search ends at its first match: only whether it holds one is asked,
    /// and no later replacement can take that match back (with `--surface` one could).
    pub fn ends_at_first_match(&self) -> bool {
        self.first_match_only && !self.surface_only
    }

    fn type_matches(&self, ty: &str) -> bool {
        crate::log::event::type_matches(&self.types, ty)
    }

    fn role_matches(&self, role: Option<Role>) -> bool {
        self.roles.is_empty() || role.is_some_and(|r| self.roles.contains(&r))
    }

    /// The turn and time filters; a turn of None (not known yet) passes.
    fn in_scope(&self, turn: Option<Option<i64>>, time: i64) -> bool {
        turn.is_none_or(|turn| {
            self.turns
                .is_none_or(|r| turn.is_some_and(|t| r.contains(t)))
        }) && self.since.is_none_or(|s| time >= s)
            && self.until.is_none_or(|u| time <= u)
    }
}

/// Whether any of a log's candidate lines (as the raw pass kept them) holds an event of
/// format `version` whose text matches `q`: each line decoded as the scan decodes it (lossy
/// UTF-8, packed rows as their members, the v0 legacy shapes normalized), its text extracted
/// and matched as [`Search`] does, with the filters that need no fold (type, role, time).
/// False: the log holds no match, and need not be folded. It answers true when unsure (an
/// unknown version): the fold decides then.
pub fn confirm(q: &Query, version: Option<u64>, lines: &[(u64, Vec<u8>)]) -> bool {
    let Some(d) = version
        .and_then(|v| u8::try_from(v).ok())
        .and_then(Dialect::for_version)
    else {
        return true;
    };
    struct NoIds;
    impl legacy::MessageIds for NoIds {
        fn message_id(&self, _seq: u64) -> Option<String> {
            None
        }
    }
    for (byte, raw) in lines {
        let text = String::from_utf8_lossy(raw);
        let pos = Pos {
            line: 0,
            byte: *byte,
        };
        let mut row = rows::decode_str(&text, pos, d);
        // A line that does not decode (damage, or past a guard of dshs's own) is the fold's to
        // judge and report: unsure, never a silent "no match".
        let Row::Events(candidates, _) = &mut row else {
            return true;
        };
        for c in candidates.iter_mut() {
            let Ok(ev) = &mut c.event else { return true };
            if d.legacy_v0 {
                // Message ids only: the text moves, whatever the ids.
                legacy::normalize(ev, "", &NoIds);
            }
            if !text::carries_text(ev.kind, &q.extract)
                || !q.type_matches(&ev.ty)
                || !q.in_scope(None, ev.time)
            {
                continue;
            }
            for part in text::parts(ev, &q.extract) {
                if !q.role_matches(part.role) {
                    continue;
                }
                let mut found = false;
                q.pattern.lines(&part.text, |_, _| found = true);
                if found {
                    return true;
                }
            }
        }
    }
    false
}

/// Where a matching event stands, known once the log is folded to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// On the final surface (or the system prompt the model is given now, v0–v2).
    Visible,
    /// Was a surface node; a later replacement took it off the surface.
    Shadowed,
    /// A surface event the fold rejected: never on the surface.
    Rejected,
    /// A log-only event (tool calls, summaries, titles, attempts, earlier system prompts).
    LogOnly,
    /// After the committed prefix: DSH drops these rows on load.
    CrashTail,
}

impl Mark {
    pub fn as_str(self) -> Option<&'static str> {
        match self {
            Mark::Visible => Some("visible"),
            Mark::Shadowed => Some("shadowed"),
            Mark::Rejected => Some("rejected"),
            Mark::LogOnly => None,
            Mark::CrashTail => Some("crash-tail"),
        }
    }
}

/// A matching line of text, or (with context) a neighbouring event's first line.
#[derive(Debug, Clone)]
pub struct Hit {
    /// False for a context line.
    pub is_match: bool,
    pub seq: u64,
    pub pos: Pos,
    pub time: i64,
    pub turn: Option<i64>,
    pub event_type: String,
    pub role: Option<Role>,
    pub kind: PartKind,
    pub tool: Option<String>,
    pub key: Option<String>,
    /// The line's number within its piece of text (from 1).
    pub text_line: u32,
    /// The line (or the window of it that was kept).
    pub text: String,
    /// Byte ranges of the matches in `text`.
    pub submatches: Vec<Range<usize>>,
    /// Text was cut off before / after what `text` holds.
    pub clipped: (bool, bool),
    pub mark: Mark,
    /// The events in scope that carry text, numbered in log order (context groups).
    pub event_index: u64,
    surface: bool,
    accepted: bool,
    speculative: bool,
    /// The speculation it was found in (a crash tail is kept if that one is committed).
    epoch: u32,
}

/// The counts of one log's search.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Matching lines of text.
    pub lines: u64,
    /// Events with at least one.
    pub events: u64,
}

/// With [`Keep::Count`], a matching event as counted before its mark is known.
#[derive(Debug, Clone, Copy)]
struct Counted {
    seq: u64,
    lines: u64,
    surface: bool,
    accepted: bool,
    speculative: bool,
    header: bool,
}

/// The observer that searches a log during its pass.
pub struct Search<'q> {
    q: &'q Query,
    candidates: Candidates,
    cursor: usize,
    hits: Spill,
    counted: Vec<Counted>,
    /// `counted`'s length after its last pruning.
    counted_pruned: usize,
    totals: Totals,
    /// Recent events in scope that did not match (for context before the next match).
    before: VecDeque<Hit>,
    /// Context events still to show after the last match.
    after: usize,
    next_index: u64,
    /// The latest `request/header` (v0–v2: its system prompt is the current one).
    last_header: Option<u64>,
    saved_header: Option<Option<u64>>,
    /// With `--surface` and context: every neighbour that may still be on the final surface
    /// (pruned as replacements take events off it, so it stays the size of the surface);
    /// the neighbours of each match are chosen among those left at the end.
    pool: Vec<Hit>,
    /// The pool's length after its last pruning.
    pruned_len: usize,
    /// Speculations started, and those committed (see [`Hit::epoch`]).
    epoch: u32,
    /// Inside one: the fold may be on a copy of the state, put back at its end, so what
    /// leaves the surface now may come back; nothing is pruned.
    speculating: bool,
    committed: Vec<u32>,
    /// A store session read with its packed rows kept packed: positions are moved to the
    /// expanded log; `unmoved` says one could not be (it was on a packed row).
    moved: Option<PackedRead>,
    unmoved: bool,
}

impl<'q> Search<'q> {
    pub fn new(q: &'q Query, candidates: Candidates) -> Search<'q> {
        Search {
            q,
            candidates,
            cursor: 0,
            hits: Spill::default(),
            counted: Vec::new(),
            counted_pruned: 0,
            totals: Totals::default(),
            before: VecDeque::new(),
            after: 0,
            next_index: 0,
            last_header: None,
            saved_header: None,
            pool: Vec::new(),
            pruned_len: 0,
            epoch: 0,
            speculating: false,
            committed: Vec::new(),
            moved: None,
            unmoved: false,
        }
    }

    /// The log searched is a store session read with its packed rows kept packed: each
    /// match's and neighbour's position is moved to its place in the expanded log.
    pub fn moving(&mut self, read: PackedRead) {
        self.moved = Some(read);
    }

    /// The read whose positions are moved (see [`Search::moving`]).
    pub fn moved_by(&self) -> Option<&PackedRead> {
        self.moved.as_ref()
    }

    /// Whether a match or neighbour lay on a packed row, with no place of its own in the
    /// expanded log (the search is to be done again on it).
    pub fn unmoved(&self) -> bool {
        self.unmoved
    }

    /// Neighbours are chosen at the end, among the events on the final surface.
    fn surface_context(&self) -> bool {
        self.q.surface_only && self.q.context > 0
    }

    /// Drop the pooled neighbours that can no longer be on the final surface: a node off the
    /// surface now never comes back, nor does a rejected or log-only event; a crash-tail
    /// row is kept until its fate is known.
    fn prune_pool(&mut self, state: &FoldState) {
        let last_header = self.last_header;
        self.pool.retain(|h| {
            if h.speculative {
                true
            } else if h.kind == PartKind::SystemPrompt && h.event_type == Kind::RequestHeader.name()
            {
                Some(h.seq) == last_header
            } else {
                h.surface && h.accepted && state.surface.contains(h.seq)
            }
        });
        self.pruned_len = self.pool.len();
    }

    /// Mark each match against the surface as folded to the end (`state`: the scan's final
    /// state, None when the header stopped the pass): what is kept of the state to do so,
    /// and the matches, read out in log order by [`Matches::for_each`].
    pub fn finish(self, state: Option<&FoldState>) -> Matches {
        let visible: Vec<u64> = state.map(|s| s.surface.seqs()).unwrap_or_default();
        let mut marks = Marks {
            visible,
            last_header: self.last_header,
            committed: self.committed,
        };
        marks.visible.sort_unstable();
        let mut totals = None;
        if self.q.keep == Keep::Count {
            totals = Some(if self.q.surface_only {
                let mut t = Totals::default();
                for c in &self.counted {
                    let m = marks.mark(c.surface, c.accepted, c.speculative, 0, c.seq, c.header);
                    if m == Mark::Visible {
                        t.lines += c.lines;
                        t.events += 1;
                    }
                }
                t
            } else {
                self.totals
            });
        }
        Matches {
            hits: self.hits,
            pool: self.pool,
            marks,
            surface_only: self.q.surface_only,
            context: self.q.context,
            surface_context: self.q.surface_only && self.q.context > 0,
            totals,
        }
    }

    /// `grep --follow`: the matches found since the last call, marked against the fold as
    /// it stands now (a match is marked shadowed only when the replacement that shadows it is
    /// folded, which may come later; `crash`: they are of rows being dropped as a crash
    /// tail). Context is not kept across calls. Costs a look at the surface per matching
    /// event, nothing for the others.
    pub fn take_live(&mut self, state: &FoldState, crash: bool) -> Option<Matches> {
        if self.hits.is_empty() {
            return None;
        }
        let mut visible = state.surface.seqs();
        visible.sort_unstable();
        let marks = Marks {
            visible,
            last_header: self.last_header,
            // Rows in doubt are folded here once their fate is known: all committed, unless
            // they are being dropped.
            committed: if crash {
                self.committed.clone()
            } else {
                (0..=self.epoch).collect()
            },
        };
        Some(Matches {
            hits: std::mem::take(&mut self.hits),
            pool: Vec::new(),
            marks,
            surface_only: false,
            context: 0,
            surface_context: false,
            totals: None,
        })
    }

    fn push(&mut self, hit: Hit) {
        self.hits.push(hit);
    }

    /// A hit with the event's facts; text and matches filled in by the caller.
    fn hit(&mut self, info: &EventInfo<'_, '_>, turn: Option<i64>, part: &Part<'_>) -> Hit {
        let ev = info.event;
        let pos = match &self.moved {
            None => ev.pos,
            Some(read) => read.expanded_pos(ev.pos).unwrap_or_else(|| {
                self.unmoved = true;
                ev.pos
            }),
        };
        Hit {
            is_match: false,
            seq: ev.seq,
            pos,
            time: ev.time,
            turn,
            event_type: ev.ty.to_string(),
            role: part.role,
            kind: part.kind,
            tool: part.tool.as_ref().map(|t| t.to_string()),
            key: part.key.clone(),
            text_line: 1,
            text: String::new(),
            submatches: Vec::new(),
            clipped: (false, false),
            mark: Mark::LogOnly,
            event_index: self.next_index,
            surface: matches!(info.class, TypeClass::Surface(_)),
            accepted: info.accepted,
            speculative: info.speculative,
            epoch: self.epoch,
        }
    }
}

/// What decides each match's [`Mark`] once the log is folded: the final surface's seqs
/// (sorted), the latest request header, and the speculations that were committed.
struct Marks {
    visible: Vec<u64>,
    last_header: Option<u64>,
    committed: Vec<u32>,
}

impl Marks {
    fn mark(
        &self,
        surface: bool,
        accepted: bool,
        speculative: bool,
        epoch: u32,
        seq: u64,
        header: bool,
    ) -> Mark {
        if speculative && !self.committed.contains(&epoch) {
            Mark::CrashTail
        } else if header {
            if Some(seq) == self.last_header {
                Mark::Visible
            } else {
                Mark::LogOnly
            }
        } else if !surface {
            Mark::LogOnly
        } else if !accepted {
            Mark::Rejected
        } else if self.visible.binary_search(&seq).is_ok() {
            Mark::Visible
        } else {
            Mark::Shadowed
        }
    }

    fn of(&self, h: &Hit) -> Mark {
        let header = h.kind == PartKind::SystemPrompt && h.event_type == Kind::RequestHeader.name();
        self.mark(h.surface, h.accepted, h.speculative, h.epoch, h.seq, header)
    }
}

/// One log's matches (and context), marked as they are read out, in log order.
pub struct Matches {
    hits: Spill,
    pool: Vec<Hit>,
    marks: Marks,
    surface_only: bool,
    context: usize,
    surface_context: bool,
    /// The counts, known at once when only counts were kept.
    totals: Option<Totals>,
}

impl Matches {
    /// The counts when only counts were kept (`-c`, `-l`); None otherwise (they come with
    /// [`Matches::for_each`]).
    pub fn counted(&self) -> Option<Totals> {
        self.totals
    }

    /// Each match and context line in log order, marked, without what `--surface` leaves
    /// out; then the counts of what was given.
    pub fn for_each(mut self, mut f: impl FnMut(&Hit) -> io::Result<()>) -> io::Result<Totals> {
        if let Some(t) = self.totals {
            return Ok(t);
        }
        let mut totals = Totals::default();
        let mut last_event = None;
        let mut count = |h: &Hit| {
            if h.is_match {
                totals.lines += 1;
                if last_event != Some(h.event_index) {
                    totals.events += 1;
                    last_event = Some(h.event_index);
                }
            }
        };
        let marks = &self.marks;
        let surface_only = self.surface_only;
        if !self.surface_context {
            self.hits.for_each(|h| {
                let mark = marks.of(h);
                if surface_only && mark != Mark::Visible {
                    return Ok(());
                }
                h.mark = mark;
                count(h);
                f(h)
            })?;
            return Ok(totals);
        }
        // --surface with context: the neighbours of each match are the nearest pooled
        // events on the final surface; every event is numbered by its place on the surface.
        let mut pool: Vec<Hit> = std::mem::take(&mut self.pool);
        for h in &mut pool {
            h.mark = marks.of(h);
        }
        pool.retain(|h| h.mark == Mark::Visible);
        let mut chosen = vec![false; pool.len()];
        let context = self.context;
        let mut last = None;
        self.hits.for_each(|h| {
            if marks.of(h) != Mark::Visible || last == Some(h.event_index) {
                return Ok(());
            }
            last = Some(h.event_index);
            let at = pool.partition_point(|p| p.event_index < h.event_index);
            for c in &mut chosen[at.saturating_sub(context)..at] {
                *c = true;
            }
            for c in chosen.iter_mut().skip(at).take(context) {
                *c = true;
            }
            Ok(())
        })?;
        // Merge in log order; an event's number is how many events on the surface (matches
        // and pooled alike) come before it.
        let mut next_pool = 0;
        // Distinct matching events read so far.
        let mut seen = 0u64;
        let mut last_hit_event = None;
        let emit_pool_before = |limit: u64,
                                next_pool: &mut usize,
                                seen: u64,
                                f: &mut dyn FnMut(&Hit) -> io::Result<()>|
         -> io::Result<()> {
            while let Some(p) = pool.get(*next_pool).filter(|p| p.event_index < limit) {
                if chosen[*next_pool] {
                    let mut p = p.clone();
                    p.event_index = seen + *next_pool as u64;
                    f(&p)?;
                }
                *next_pool += 1;
            }
            Ok(())
        };
        self.hits.for_each(|h| {
            let mark = marks.of(h);
            if mark != Mark::Visible {
                return Ok(());
            }
            emit_pool_before(h.event_index, &mut next_pool, seen, &mut f)?;
            if last_hit_event != Some(h.event_index) {
                seen += 1;
                last_hit_event = Some(h.event_index);
            }
            h.mark = mark;
            h.event_index = seen - 1 + next_pool as u64;
            count(h);
            f(h)
        })?;
        emit_pool_before(u64::MAX, &mut next_pool, seen, &mut f)?;
        Ok(totals)
    }
}

/// The first line of `text` with something in it, as a context line (clipped).
fn first_line(text: &str, max: usize) -> (String, bool) {
    let line = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    match line.char_indices().nth(max) {
        None => (line.to_owned(), text.trim_end().len() > line.len()),
        Some((cut, _)) => (line[..cut].to_owned(), true),
    }
}

/// At most `max` characters of `line` around its first match: from a little before it, on
/// character boundaries; the ranges are moved to the window (those past its end dropped,
/// one it cuts through shortened).
fn window(line: &str, regex: &Regex, max: usize) -> (String, Vec<Range<usize>>, (bool, bool)) {
    if line.chars().count() <= max {
        let found = regex.find_iter(line).map(|m| m.range()).collect();
        return (line.to_owned(), found, (false, false));
    }
    const LEAD: usize = 40;
    let first = regex.find(line).map_or(0, |m| m.start());
    // Start LEAD characters before the first match, but keep the window full near the end.
    let before: Vec<usize> = line[..first].char_indices().map(|(i, _)| i).collect();
    let mut start = before.len().checked_sub(LEAD).map_or(0, |i| before[i]);
    let after_chars = line[start..].chars().count();
    if after_chars < max {
        start = line.char_indices().rev().nth(max - 1).map_or(0, |(i, _)| i);
    }
    let end = line[start..]
        .char_indices()
        .nth(max)
        .map_or(line.len(), |(i, _)| start + i);
    // Only the matches the window shows are collected: a long line may hold millions.
    let ranges = regex
        .find_iter(line)
        .map(|m| m.range())
        .take_while(|r| r.start <= end)
        .filter(|r| {
            r.start < end && r.end > start || (r.is_empty() && r.start >= start && r.start <= end)
        })
        .map(|r| r.start.max(start) - start..r.end.min(end) - start)
        .collect();
    (
        line[start..end].to_owned(),
        ranges,
        (start > 0, end < line.len()),
    )
}

/// Characters of a context line (terminal or JSON alike: it is a preview).
const CONTEXT_CHARS: usize = 200;

impl Observer for Search<'_> {
    /// Packed chunk rows' members are searched only with `--chunks`: without, they may be
    /// folded together unseen.
    fn wants_each_event(&self) -> bool {
        self.q.extract.chunks
    }

    fn may_end_early(&self) -> bool {
        self.q.ends_at_first_match()
    }

    /// Rows after a bad row reach the observer only once their fate is decided, within the
    /// fold of the line that decides it: between lines, every match counted is settled.
    fn done(&self) -> bool {
        self.may_end_early() && self.totals.lines > 0
    }

    fn event(&mut self, info: &EventInfo<'_, '_>, state: &FoldState) {
        let ev = info.event;
        if ev.kind == Kind::RequestHeader {
            self.last_header = Some(ev.seq);
        }
        let q = self.q;
        if !text::carries_text(ev.kind, &q.extract) || !q.type_matches(&ev.ty) {
            return;
        }
        let candidate = self.candidates.contains(ev.pos.byte, &mut self.cursor);
        if !candidate && q.context == 0 {
            return;
        }
        let turn = ev.turn().or_else(|| state.lifecycle.open_turn());
        if !q.in_scope(Some(turn), ev.time) {
            return;
        }
        let parts = text::parts(ev, &q.extract);
        // Under a role filter an event none of whose text is from those roles is neither a
        // match nor a neighbour.
        let Some(first) = parts.iter().find(|p| q.role_matches(p.role)) else {
            return;
        };
        let mut lines = 0u64;
        if candidate {
            for part in parts.iter().filter(|p| q.role_matches(p.role)) {
                q.pattern.lines(&part.text, |no, line| {
                    lines += 1;
                    if q.keep == Keep::Count {
                        return;
                    }
                    // The context before the event's first match goes first; then each
                    // match as it is found (an event may hold millions: none is held here).
                    if lines == 1 && !self.surface_context() {
                        while let Some(h) = self.before.pop_front() {
                            self.push(h);
                        }
                    }
                    let mut h = self.hit(info, turn, part);
                    h.is_match = true;
                    h.text_line = no;
                    match q.keep {
                        Keep::Window(max) => {
                            let (text, ranges, clipped) = window(line, q.pattern.regex(), max);
                            h.text = text;
                            h.submatches = ranges;
                            h.clipped = clipped;
                        }
                        // The whole line: its matches are found again as it is printed.
                        _ => h.text = line.to_owned(),
                    }
                    self.push(h);
                });
            }
        }
        let index = self.next_index;
        self.next_index += 1;
        if lines > 0 {
            self.totals.lines += lines;
            self.totals.events += 1;
            if q.keep == Keep::Count {
                if q.surface_only {
                    // Only matches that may still be on the final surface are kept: a count
                    // of a million matching events needs no million entries.
                    if self.counted.len() >= 2 * self.counted_pruned + 64 && !self.speculating {
                        let last_header = self.last_header;
                        self.counted.retain(|c| {
                            if c.speculative {
                                true
                            } else if c.header {
                                Some(c.seq) == last_header
                            } else {
                                c.surface && c.accepted && state.surface.contains(c.seq)
                            }
                        });
                        self.counted_pruned = self.counted.len();
                    }
                    self.counted.push(Counted {
                        seq: ev.seq,
                        lines,
                        surface: matches!(info.class, TypeClass::Surface(_)),
                        accepted: info.accepted,
                        speculative: info.speculative,
                        header: ev.kind == Kind::RequestHeader,
                    });
                }
                return;
            }
            self.after = q.context;
            return;
        }
        if q.context == 0 {
            return;
        }
        let mut h = self.hit(info, turn, first);
        h.event_index = index;
        let (text, cut) = first_line(&first.text, CONTEXT_CHARS);
        h.text = text;
        h.clipped = (false, cut);
        if self.surface_context() {
            if self.pool.len() >= 2 * self.pruned_len + 64 && !self.speculating {
                self.prune_pool(state);
            }
            self.pool.push(h);
        } else if self.after > 0 {
            self.after -= 1;
            self.push(h);
        } else {
            if self.before.len() == q.context {
                self.before.pop_front();
            }
            self.before.push_back(h);
        }
    }

    fn speculation_started(&mut self) {
        self.saved_header = Some(self.last_header);
        self.epoch += 1;
        self.speculating = true;
    }

    fn speculation_ended(&mut self, committed: bool) {
        self.speculating = false;
        let saved = self.saved_header.take();
        let settle = |h: &mut Hit| {
            if committed {
                h.speculative = false;
            }
        };
        // Matches already held (perhaps on disk) are settled by their epoch at the end.
        if committed {
            self.committed.push(self.epoch);
        }
        self.before.iter_mut().for_each(settle);
        self.pool.iter_mut().for_each(settle);
        if committed {
            for c in &mut self.counted {
                c.speculative = false;
            }
        } else if let Some(h) = saved {
            // The rows of a crash tail are dropped on load: an earlier header is the last.
            self.last_header = h;
        }
    }
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    fn pattern(p: &str) -> Pattern {
        Pattern::new(&PatternOptions {
            pattern: p.into(),
            ..PatternOptions::default()
        })
        .unwrap()
    }

    #[test]
    fn matches_are_found_line_by_line() {
        let p = pattern("b+");
        let mut got = Vec::new();
        p.lines("abba\nccc\r\nbx\r\n", |no, line| {
            let found: Vec<Range<usize>> = p.regex().find_iter(line).map(|m| m.range()).collect();
            got.push((no, line.to_owned(), found));
        });
        assert_eq!(
            got,
            [
                (1, "abba".to_owned(), vec![1..3]),
                (3, "bx".to_owned(), vec![0..1])
            ]
        );
        // Anchors are a line's ends, not the text's; so are \A and \z here.
        for p in ["^c+$", r"\Ac+\z", "c+$", r"\bc+\b"] {
            let mut got = Vec::new();
            pattern(p).lines("ab\nccc\r\nd\nxc", |no, line| got.push((no, line)));
            let want: &[(u32, &str)] = if p == r"\bc+\b" {
                &[(2, "ccc")]
            } else if p == "c+$" {
                &[(2, "ccc"), (4, "xc")]
            } else {
                &[(2, "ccc")]
            };
            assert_eq!(got, want, "{p}");
        }
        // A match of the whole text across a line end: each line is matched on its own.
        let mut got = Vec::new();
        pattern(r"a\s+b|zz").lines("xa\nb\nzz", |no, line| got.push((no, line)));
        assert_eq!(got, [(3, "zz")]);
        // Line numbers count every line before, matched or not.
        let mut got = Vec::new();
        pattern("k").lines("k\n\n\nxk\nk", |no, _| got.push(no));
        assert_eq!(got, [1, 4, 5]);
    }

    #[test]
    fn a_final_line_break_ends_the_last_line_and_adds_none() {
        for (text, want) in [
            ("a\n", &[][..]),
            ("a\r\n", &[][..]),
            ("a\n\n", &[2][..]),
            ("\n", &[1][..]),
            ("a\n\nb", &[2][..]),
            ("", &[][..]),
        ] {
            for p in ["^$", r"\A\z", "^", "$"] {
                let mut got = Vec::new();
                pattern(p).lines(text, |no, _| got.push(no));
                let want: Vec<u32> = if p == "^" || p == "$" {
                    // Every line matches an anchor alone: as many as the text has.
                    let n = text
                        .strip_suffix('\n')
                        .map_or(text, |t| t)
                        .split('\n')
                        .count();
                    if text.is_empty() {
                        vec![]
                    } else {
                        (1..=n as u32).collect()
                    }
                } else {
                    want.to_vec()
                };
                assert_eq!(got, want, "{p} in {text:?}");
            }
        }
    }

    #[test]
    fn word_matches_use_half_boundaries() {
        let p = Pattern::new(&PatternOptions {
            pattern: "@foo".into(),
            word: true,
            fixed: true,
            ..PatternOptions::default()
        })
        .unwrap();
        assert!(p.regex().is_match("x @foo y"));
        assert!(p.regex().is_match("@foo"));
        assert!(!p.regex().is_match("@foobar"));
        assert!(!p.regex().is_match("a@foo"));
    }

    #[test]
    fn a_pattern_with_a_line_break_is_refused() {
        let err = Pattern::new(&PatternOptions {
            pattern: "a\nb".into(),
            fixed: true,
            ..PatternOptions::default()
        });
        assert!(matches!(err, Err(PatternError::LineBreak)));
        assert!(
            Pattern::new(&PatternOptions {
                pattern: r"a\s+b|c".into(),
                ..PatternOptions::default()
            })
            .is_ok()
        );
    }

    #[test]
    fn a_long_line_is_cut_to_a_window_around_its_first_match() {
        let line = format!("{}needle{}", "a".repeat(500), "b".repeat(500));
        let (text, ranges, clipped) = window(&line, pattern("needle").regex(), 100);
        assert_eq!(text.chars().count(), 100);
        assert_eq!(&text[ranges[0].clone()], "needle");
        assert_eq!(clipped, (true, true));
        // Near the end the window stays full.
        let line = format!("{}needle", "é".repeat(500));
        let (text, ranges, clipped) = window(&line, pattern("needle").regex(), 50);
        assert_eq!(text.chars().count(), 50);
        assert_eq!(&text[ranges[0].clone()], "needle");
        assert_eq!(clipped, (true, false));
        let (text, _, clipped) = window("short", pattern("s").regex(), 50);
        assert_eq!((text.as_str(), clipped), ("short", (false, false)));
    }
}
