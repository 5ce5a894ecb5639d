//! The one streaming pass: lines → header → rows → events → checks and the surface fold,
//! with the committed-prefix decision of §6.
//!
//! At the first bad row DSH stops accepting events; whether that row is crash damage or
//! corruption depends on whether a later row holds a `turn/end`. dshs does not know that
//! yet when it meets the row, so it keeps folding on a *speculative* copy of the state and
//! holds the findings back. A later `turn/end` commits the speculation (the damage lies in
//! the committed region: fatal); end of input rolls it back (a crash tail, dropped).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufRead};
use std::path::Path;
use std::sync::Arc;

use super::closers::CloserPlanner;
use super::codes::{Area, Code, Severity};
use super::compaction::CompactionTracker;
use super::dialect::{Dialect, SeedField};
use super::event::Kind;
use super::finding::{Finding, Pos, Reporter, Sink};
use super::header::{self, Header, HeaderVerdict};
use super::input::{self, Framing, LineReader, ZstdEnd};
use super::json::{Json, Shape};
use super::legacy::{self, Legacy};
use super::lifecycle::Lifecycle;
use super::limits::{Guard, LimitHit};
use super::payload;
use super::rows::{self, BadKind, Candidate, Event, Packed, Row};
use super::surface::{self, SurfaceManager};
use super::vocab::{KnownTypes, TypeClass, Vocabulary};

pub mod light;
mod pipeline;

pub use light::FullLines;

/// What a command wants from the pass.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    pub known_types: KnownTypes,
    /// Replay only the prefix `0..=seq` (as if the log were truncated after that event).
    pub stop_after: Option<u64>,
    /// Keep every replacement (for `surface --format json`).
    pub record_replacements: bool,
    /// Threads that parse lines, this one included (it folds them, and parses a block while
    /// it waits for the next to fold), for plain input read to the end. 0: the machine's
    /// parallelism (at most [`MAX_THREADS`]) or `DSHS_THREADS`; 1: one line at a time on this
    /// thread, consumed from the reader only when it is folded (for a reader that watches
    /// consumption, like `show`'s tap, and for logs checked in parallel).
    pub threads: usize,
    /// Bytes per parsed block (0: the default); small blocks let tests cross many blocks.
    pub block_bytes: usize,
    /// Tests: the helping parsing threads step aside after every this many blocks, whatever
    /// their waits (0: only while the turn is slow to come, see `pipeline`).
    #[doc(hidden)]
    pub step_aside_every: usize,
    /// The input comes through a pipe from another process (`zstd -dc log | dshs validate
    /// -`), which needs a core of its own: the automatic choice of threads leaves it one.
    pub from_pipe: bool,
    /// The log's file, when the reader reads a plain log straight from a regular file: the
    /// parsing threads then read it at positions, each its own part at once, instead of
    /// taking turns at the reader (see `pipeline`). Ignored for a zstd log.
    pub positional: Option<Positional>,
    /// §21.9a: append surface-eligible events that carry no `surfaceOp` (for `surface` and
    /// `derive` on a log without any marker; see [`SurfaceManager::append_unmarked`]).
    pub linear_surface: bool,
    /// The log is a session of a SQLite store, streamed by its storage layer (SQLITE.md S4–S7),
    /// which checked the seqs of the rows and reported their damage itself: after committed
    /// damage it goes on with the rows that follow, so a forward jump of seq is a resync, as
    /// after a bad row (§6.3), never a gap of the pass's own; and a row is packed by its
    /// discriminator, which the stream keeps as `seq0`, not by its type alone (S4.3).
    pub from_store: bool,
    /// Keep the latest replacement (for `show --follow`, which prints what a replacement
    /// shadowed when it folds; see [`SurfaceManager::keep_last_replacement`]).
    pub keep_last_replacement: bool,
    /// The light pass ([`light`]): rows read as envelopes but these lines, which get the
    /// whole tree; the observer reads beyond the envelope only in them. Its findings leave
    /// out [`light::UNCHECKED`]. None: the full pass.
    pub light: Option<FullLines>,
    /// The reader may leave parts of its lines for the parsing threads to write, each for its
    /// own block, off the reader's lock (see [`Deferred`]); only when lines are parsed on
    /// several threads, which is when it is armed.
    pub deferred: Option<Arc<dyn Deferred>>,
}

/// Work a reader leaves for the parsing threads: bytes of its stream it reserved but did not
/// write while the threads took turns at it (for a store, the decompression and the check of
/// each stored text), so that the work runs on every thread at once.
pub trait Deferred: Send + Sync + std::fmt::Debug {
    /// The parsing threads are about to take blocks: from now on the reader may defer.
    fn arm(&self);
    /// Write the reserved bytes of `block`, the stream's bytes from offset `start`, just
    /// taken from the reader and not parsed yet. Whether all of it went well is the reader's
    /// to say, afterwards.
    fn fill(&self, start: u64, block: &mut [u8]);
}

/// A regular file a pass may read at positions from several threads at once.
#[derive(Clone)]
pub struct Positional {
    pub file: Arc<File>,
    /// Told the offset the fold has reached, now and then (a progress bar: the reader's own
    /// count stops after the header).
    pub progress: Option<Arc<dyn Fn(u64) + Send + Sync>>,
}

impl std::fmt::Debug for Positional {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Positional")
            .field("file", &self.file)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// The most parsing threads [`ScanOptions::threads`] picks by itself: the fold, on one
/// thread, keeps up with about this many.
pub const MAX_THREADS: usize = 4;

/// Overrides the number of parsing threads (1: no reading ahead).
pub const THREADS_ENV: &str = "DSHS_THREADS";

impl ScanOptions {
    /// The parsing threads this pass uses (see [`ScanOptions::threads`]).
    pub fn parse_threads(&self) -> usize {
        if self.threads > 0 {
            return self.threads;
        }
        std::env::var(THREADS_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| auto_threads(self.from_pipe))
    }
}

/// Parsing threads for this machine: one per core, at most [`MAX_THREADS`], one core fewer
/// for a pipe's producer.
fn auto_threads(from_pipe: bool) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cores = if from_pipe { cores - 1 } else { cores };
    cores.clamp(1, MAX_THREADS)
}

/// The largest line arena the one-line pass keeps for the next line (bytes).
const KEPT_LINE_ARENA: usize = 4 << 20;

/// A line's parser stacks are kept for the next line up to this many entries in all (a few
/// thousand in a normal line; the open lists of one deeply nested huge line can hold more).
const KEPT_SCRATCH: usize = 1 << 16;

/// The whole fold state. Cloned once when a bad row starts a speculation.
#[derive(Debug, Clone)]
pub struct FoldState {
    pub surface: SurfaceManager,
    pub lifecycle: Lifecycle,
    pub compaction: CompactionTracker,
    pub closers: CloserPlanner,
    /// Events in the committed prefix (a packed row counts as its members).
    pub events: u64,
    /// Position and seq of the latest `turn/start`.
    pub last_turn_start: Option<(Pos, u64)>,
    /// v2+: the seq of the last `session/end-seed {inherited: true}`.
    pub inherited_marker: Option<u64>,
    /// v0 legacy normalizations: label → (count, first position, first seq).
    pub legacy: BTreeMap<&'static str, (u64, Pos, u64)>,
}

impl FoldState {
    fn new(d: &'static Dialect, opts: &ScanOptions) -> Self {
        let mut surface = SurfaceManager::new(d);
        if opts.record_replacements {
            surface.record_replacements();
        }
        if opts.linear_surface {
            surface.append_unmarked();
        }
        if opts.keep_last_replacement {
            surface.keep_last_replacement();
        }
        FoldState {
            surface,
            lifecycle: Lifecycle::new(d),
            compaction: CompactionTracker::new(d),
            closers: CloserPlanner::new(d),
            events: 0,
            last_turn_start: None,
            inherited_marker: None,
            legacy: BTreeMap::new(),
        }
    }
}

/// What an [`Observer`] is told about each event that reaches the fold.
pub struct EventInfo<'e, 'a> {
    pub event: &'e Event<'a>,
    pub class: TypeClass,
    /// The surface fold accepted the event (false: rejected, or never folded).
    pub accepted: bool,
    /// The event belongs to rows after a bad row whose fate is not decided yet.
    pub speculative: bool,
}

/// A row, or an event slot of a packed row, that never reaches the fold: an unusable row of
/// §6.1 (B1–B3: not JSON, not an object, a malformed storage row) or an event whose envelope
/// is invalid (§5.1). The sink hears about it as a finding; an [`Observer`] that lists rows
/// (`show`) hears about it here, in file order with the events.
pub struct Unusable<'r> {
    pub pos: Pos,
    /// The row's own seq (`seq0` of a packed row) when it states a usable one.
    pub seq: Option<u64>,
    pub event_type: Option<&'r str>,
    pub why: &'r str,
    /// Seen inside a speculation (always so for B1–B3 rows: they start one).
    pub speculative: bool,
}

/// Consumers that need every event (stats, show) without a second parser. An observer goes
/// with the pass from thread to thread (see `pipeline`), so it is `Send`.
pub trait Observer: Send {
    fn event(&mut self, _info: &EventInfo<'_, '_>, _state: &FoldState) {}
    /// Whether [`Observer::event`] must see every event. When not, the members of a packed
    /// row (format 0) after the first may be folded together, unseen (see `fold_packed`).
    fn wants_each_event(&self) -> bool {
        true
    }
    /// The `members` of a packed row after its first were folded together, unseen (when
    /// [`Observer::wants_each_event`] says no): `assistant/chunk` events, the last at `time`.
    fn members_passed(&mut self, _members: u64, _time: i64) {}
    /// A row or event slot that is never folded (see [`Unusable`]).
    fn unusable(&mut self, _row: &Unusable<'_>) {}
    /// A bad row started a speculation: take a snapshot of anything accumulated.
    fn speculation_started(&mut self) {}
    /// The speculation ended: `committed` (fatal damage, the events count) or rolled back
    /// (a crash tail: forget what was observed since it started).
    fn speculation_ended(&mut self, _committed: bool) {}
    /// Whether every method above is a no-op, so the pass may go on without this observer
    /// (the fold then moves between threads, see `pipeline`).
    fn inert(&self) -> bool {
        false
    }
    /// Whether [`Observer::done`] may end the pass early. Such a pass runs one line at a time
    /// (it can end after any line) instead of on the parsing threads.
    fn may_end_early(&self) -> bool {
        false
    }
    /// The observer has all it asked for: the pass ends after this line ([`Scan::ended_early`]),
    /// and the checks that need the rest of the log say nothing of it.
    fn done(&self) -> bool {
        false
    }
    /// Whether [`Observer::event`] reads inside the records of an event's `data.stream` (a
    /// provider chunk's `texts`, `dt` or `args`). When not, the pass builds lean trees that
    /// leave those arrays out ([`Shape::Lean`]): most of a format-3 log's values, and of the
    /// memory of the lines in flight. In formats 0 and 1 the same text is in packed rows:
    /// an observer that neither reads it nor wants each event gets trees that leave out a
    /// packed row's arrays and keep an increasing `sourceEventSeqs` range-encoded
    /// ([`Shape::LeanPacked`]): about four fifths of a format-0 log's values.
    fn reads_stream_records(&self) -> bool {
        true
    }
    /// Rows from the first bad row on are held back until a later `turn/end` (committed
    /// damage) or the end of the input (a crash tail) decides them (§6.2): `rows` of them so
    /// far, from `first`. For a status line while a log is followed.
    fn tail_pending(&mut self, _first: Pos, _rows: u64) {}
    /// The held-back rows are about to be folded as decided: `committed` (a turn end followed)
    /// or dropped (a crash tail). Called before [`Observer::speculation_started`].
    fn tail_decided(&mut self, _committed: bool) {}
}

impl Observer for () {
    fn wants_each_event(&self) -> bool {
        false
    }
    fn inert(&self) -> bool {
        true
    }
    fn reads_stream_records(&self) -> bool {
        false
    }
}

impl<T: Observer + ?Sized> Observer for &mut T {
    fn event(&mut self, info: &EventInfo<'_, '_>, state: &FoldState) {
        (**self).event(info, state);
    }
    fn wants_each_event(&self) -> bool {
        (**self).wants_each_event()
    }
    fn members_passed(&mut self, members: u64, time: i64) {
        (**self).members_passed(members, time);
    }
    fn unusable(&mut self, row: &Unusable<'_>) {
        (**self).unusable(row);
    }
    fn speculation_started(&mut self) {
        (**self).speculation_started();
    }
    fn speculation_ended(&mut self, committed: bool) {
        (**self).speculation_ended(committed);
    }
    fn reads_stream_records(&self) -> bool {
        (**self).reads_stream_records()
    }
    fn inert(&self) -> bool {
        (**self).inert()
    }
    fn may_end_early(&self) -> bool {
        (**self).may_end_early()
    }
    fn done(&self) -> bool {
        (**self).done()
    }
    fn tail_pending(&mut self, first: Pos, rows: u64) {
        (**self).tail_pending(first, rows);
    }
    fn tail_decided(&mut self, committed: bool) {
        (**self).tail_decided(committed);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Valid,
    Invalid,
    Unsupported,
    Unreadable,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Valid => "valid",
            Status::Invalid => "invalid",
            Status::Unsupported => "unsupported",
            Status::Unreadable => "unreadable",
        }
    }
}

/// The final line had no newline: never parsed, never counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornTail {
    pub line: u64,
    pub byte: u64,
    pub len: u64,
}

/// Complete rows after the committed prefix that DSH drops (§6.2 step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashTail {
    pub line: u64,
    pub byte: u64,
    pub rows: u64,
    /// Offset just past the last crash-tail row.
    pub end: u64,
}

/// Counts findings and remembers what decides the status (§21.6).
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub errors: u64,
    pub warnings: u64,
    /// Errors that mean DSH cannot fold the log (surface/derive refuse).
    pub blocking: u64,
    no_header: bool,
    version_refused: bool,
    header_or_physical: bool,
    unknown_type: bool,
    other_error: bool,
}

impl Tally {
    fn count(&mut self, f: &Finding) {
        if f.severity == Severity::Warning {
            self.warnings += 1;
            return;
        }
        self.errors += 1;
        let info = f.code.info();
        // A malformed v3+ system/message is fatal wherever it is (§6.2 step 6), though its
        // message codes do not block the fold for other event types.
        if info.blocks_fold || survives_rollback(f) {
            self.blocking += 1;
        }
        match f.code {
            Code::FileNoHeader | Code::HeaderNotJson => self.no_header = true,
            Code::FormatVersionUnsupported | Code::FormatV4Draft => self.version_refused = true,
            Code::UnknownEventType => self.unknown_type = true,
            Code::CommittedUnparsable
            | Code::CommittedNotEvent
            | Code::CommittedMalformedRow
            | Code::CommittedSeqGap => self.header_or_physical = true,
            _ if matches!(info.area, Area::Header | Area::Zstd) => self.header_or_physical = true,
            _ => self.other_error = true,
        }
    }

    pub fn status(&self) -> Status {
        if self.no_header {
            Status::Invalid
        } else if self.version_refused {
            Status::Unsupported
        } else if self.header_or_physical {
            Status::Invalid
        } else if self.unknown_type {
            Status::Unsupported
        } else if self.other_error {
            Status::Invalid
        } else {
            Status::Valid
        }
    }
}

/// `S`: the sink the findings go to (`&mut dyn Sink`, or a buffer while the pass is folded on
/// other threads, see `pipeline`).
struct Counting<S> {
    inner: S,
    tally: Tally,
    /// After a V4-draft refusal checking stops: later findings are dropped.
    muted: bool,
    /// A light pass: the findings of [`light::UNCHECKED`] are dropped.
    light: bool,
}

impl<S: Sink> Sink for Counting<S> {
    fn push(&mut self, f: Finding) {
        if self.muted || (self.light && light::unchecked(f.code)) {
            return;
        }
        self.tally.count(&f);
        self.inner.push(f);
    }
}

/// The result of the pass over one log.
pub struct Scan {
    pub header: Option<Header>,
    /// The header's version when it is an integer (also for refused versions).
    pub version: Option<i64>,
    pub dialect: Option<&'static Dialect>,
    /// The fold state of the committed prefix (None when the header stopped the pass).
    pub state: Option<FoldState>,
    /// Offset just past the last committed line (where `repair` truncates).
    pub committed_bytes: u64,
    /// Total bytes read.
    pub total_bytes: u64,
    pub torn: Option<TornTail>,
    pub crash: Option<CrashTail>,
    pub tally: Tally,
    /// `--at SEQ` was asked for but the log has no such event.
    pub stop_not_reached: bool,
    /// The observer ended the pass before the end of the input ([`Observer::done`]): the
    /// status and findings cover only the lines read, and the end-of-log checks are moot.
    pub ended_early: bool,
    /// A zstd log: what the framing looked like (§3.3). Offsets above are plaintext ones.
    pub zstd: Option<ZstdEnd>,
}

impl Scan {
    pub fn status(&self) -> Status {
        self.tally.status()
    }

    pub fn events(&self) -> u64 {
        self.state.as_ref().map_or(0, |s| s.events)
    }

    pub fn surface_nodes(&self) -> usize {
        self.state.as_ref().map_or(0, |s| s.surface.len())
    }

    pub fn open_turn(&self) -> bool {
        self.state.as_ref().is_some_and(|s| s.closers.is_open())
    }

    /// Bytes of the file as stored (compressed bytes for a zstd log).
    pub fn physical_len(&self) -> u64 {
        self.zstd
            .as_ref()
            .map_or(self.total_bytes, |z| z.compressed_len)
    }

    /// What `repair` and `compact` ask of the log they are about to write: valid with no
    /// error, every byte committed (no torn line, no crash tail), and exactly `stored` bytes
    /// as stored holding `plain` bytes of plaintext.
    pub fn is_clean_write(&self, stored: u64, plain: u64) -> bool {
        self.status() == Status::Valid
            && self.tally.errors == 0
            && self.torn.is_none()
            && self.crash.is_none()
            && self.physical_len() == stored
            && self.total_bytes == plain
            && self.committed_bytes == plain
    }
}

/// A row §6.1 calls bad: the code of its physical finding (or of the canonical rule it
/// breaks), why, and the row's own seq and type when known.
struct BadRowInfo {
    code: Code,
    why: String,
    seq: Option<u64>,
    ty: Option<String>,
}

/// The rows from the first bad row on, kept until a later `turn/end` (committed damage) or
/// the end of the input (a crash tail) decides what they are (§6.2).
struct Speculation {
    tail: Tail,
    spool: Spool,
    /// The seq the fold would expect next had it folded the kept rows (for `--at`: the log
    /// ends after the stop seq, so no turn end past it is looked for).
    next_seq: u64,
    /// Some kept row holds events (only those can give findings that outlive a rollback).
    events: bool,
}

/// Where the rows after the committed prefix start, and how many there are.
struct Tail {
    first: Pos,
    first_seq: Option<u64>,
    why: String,
    rows: u64,
}

/// The bytes of kept rows: in memory up to [`SPOOL_IN_MEMORY`], then in a temporary file,
/// compressed (a tail of blank lines or repeated junk costs next to nothing there), so
/// memory stays the same whatever follows the committed part. Read back once.
struct Spool {
    mem: Vec<u8>,
    file: Option<zstd::stream::write::Encoder<'static, io::BufWriter<File>>>,
}

/// Bytes of kept rows held in memory before the rest goes to a temporary file.
const SPOOL_IN_MEMORY: usize = 256 * 1024;

impl Spool {
    fn new(first: &[u8]) -> Spool {
        let mut spool = Spool {
            mem: Vec::new(),
            file: None,
        };
        // Into memory: cannot fail.
        let _ = spool.push(first);
        spool
    }

    /// Keep one line (without its `\n`).
    fn push(&mut self, line: &[u8]) -> io::Result<()> {
        use io::Write;
        if self.file.is_none() && self.mem.len() + line.len() < SPOOL_IN_MEMORY {
            self.mem.extend_from_slice(line);
            self.mem.push(b'\n');
            return Ok(());
        }
        let file = match &mut self.file {
            Some(f) => f,
            None => {
                let tmp = tempfile::tempfile()?;
                self.file.insert(zstd::stream::write::Encoder::new(
                    io::BufWriter::with_capacity(64 * 1024, tmp),
                    1,
                )?)
            }
        };
        file.write_all(line)?;
        file.write_all(b"\n")
    }

    /// Hand each kept line to `each` with its number (from 0) and its (offset, bytes), the
    /// first at offset `start`, until `each` says stop.
    fn read_back(
        self,
        mut each: impl FnMut(u64, (u64, &[u8])) -> bool,
        start: u64,
    ) -> io::Result<()> {
        use io::{Read, Seek};
        let rest: Box<dyn Read> = match self.file {
            None => Box::new(io::empty()),
            Some(enc) => {
                let mut file = enc.finish()?.into_inner().map_err(|e| e.into_error())?;
                file.rewind()?;
                Box::new(zstd::stream::read::Decoder::new(file)?)
            }
        };
        let mut lines = LineReader::new(io::BufReader::new(io::Cursor::new(self.mem).chain(rest)));
        let mut no = 0;
        while let Some(line) = lines.next_line()? {
            if !each(no, (start + line.byte, line.bytes)) {
                break;
            }
            no += 1;
        }
        Ok(())
    }
}

/// Findings that stand even when the rows they concern are dropped as a crash tail:
/// always-fatal v3+ violations (§6.2 step 6) and the V4-draft refusal.
fn survives_rollback(f: &Finding) -> bool {
    matches!(
        f.code,
        Code::RequestHeaderSystemRetired
            | Code::RetiredEventType
            | Code::RetiredToolResultBlock
            | Code::FormatV4Draft
    ) || (f.severity == Severity::Error
        && f.event_type.as_deref() == Some(Kind::SystemMessage.name())
        && f.code.info().area == Area::Messages)
}

/// Everything constant for one pass. `O`: the observer (`&mut dyn Observer`, or `()` while the
/// pass is folded on other threads, see `pipeline`).
struct Ctx<O> {
    dialect: &'static Dialect,
    vocab: Vocabulary,
    session_id: String,
    stop_after: Option<u64>,
    /// [`ScanOptions::from_store`].
    from_store: bool,
    /// The V4-draft refusal, once seen (§21.2): reported at once, then checking stops while
    /// the fold goes on, so the summary still describes the whole log.
    draft: Option<Finding>,
    muted: bool,
    /// Lean trees when the log embeds streams (v2+) and the observer never reads inside
    /// `data.stream`'s records (the checks read only their `type` and `chunk`).
    shape: Shape,
    /// A light pass: the lines that get the whole tree (every other gets `shape`).
    full_lines: Option<FullLines>,
    observer: O,
}

impl<O> Ctx<O> {
    /// The tree to build of the line starting at `byte`.
    fn shape_at(&self, byte: u64) -> Shape {
        match &self.full_lines {
            Some(full) if full.contains(byte) => Shape::Full,
            _ => self.shape,
        }
    }
}

/// Run the pass over `reader`. `path` (when the log is a file) enables the name and
/// directory-layout checks. Findings go to `sink` as soon as they are certain.
pub fn scan(
    reader: impl BufRead + Send,
    path: Option<&Path>,
    opts: &ScanOptions,
    sink: &mut dyn Sink,
    observer: &mut dyn Observer,
) -> io::Result<Scan> {
    scan_framed(reader, None, path, opts, sink, observer)
}

/// [`scan`] over the plaintext of a zstd log: `framing` is the decoder's handle, read at the
/// end for the frame rules of §3.3 (no crash tail inside complete frames, torn final frame).
pub fn scan_framed(
    reader: impl BufRead + Send,
    framing: Option<&Framing>,
    path: Option<&Path>,
    opts: &ScanOptions,
    sink: &mut dyn Sink,
    observer: &mut dyn Observer,
) -> io::Result<Scan> {
    let mut lines = LineReader::new(reader);
    let mut out = Counting {
        inner: sink,
        tally: Tally::default(),
        muted: false,
        light: opts.light.is_some(),
    };
    let mut result = Scan {
        header: None,
        version: None,
        dialect: None,
        state: None,
        committed_bytes: 0,
        total_bytes: 0,
        torn: None,
        crash: None,
        tally: Tally::default(),
        stop_not_reached: false,
        ended_early: false,
        zstd: None,
    };
    let file_level = |code: Code, pos: Pos, message: String| Finding {
        code,
        severity: code.severity(),
        pos,
        seq: None,
        event_type: None,
        message,
    };

    // The header.
    let verdict = match lines.next_line()? {
        None => {
            out.push(file_level(
                Code::FileNoHeader,
                Pos { line: 1, byte: 0 },
                "empty or header-less session log: the file is empty".into(),
            ));
            None
        }
        Some(line) if !line.terminated => {
            let (len, pos) = (line.bytes.len() as u64, Pos { line: 1, byte: 0 });
            result.torn = Some(TornTail {
                line: 1,
                byte: 0,
                len,
            });
            out.push(file_level(
                Code::FileNoHeader,
                pos,
                format!(
                    "empty or header-less session log: the file holds {len} bytes without a newline, so not even the header line is complete"
                ),
            ));
            None
        }
        Some(line) => {
            let pos = Pos { line: 1, byte: 0 };
            // The header obeys the guards of every line (the reader already held it to the
            // line-size guard).
            if let Some(hit) = crate::log::json::depth_limit(line.bytes) {
                return Err(hit.at("the header, line 1").into_io());
            }
            result.committed_bytes = line.bytes.len() as u64 + 1;
            Some(header::check(line.bytes, pos, path, &mut out))
        }
    };
    let (header, dialect) = match verdict {
        Some(HeaderVerdict::Read(h, d)) => (h, d),
        Some(HeaderVerdict::Stop { version }) => {
            result.version = version;
            result.total_bytes = lines.offset();
            result.zstd = framing.map(Framing::end);
            result.tally = out.tally;
            return Ok(result);
        }
        None => {
            result.total_bytes = lines.offset();
            if let Some(f) = framing {
                drain(&mut lines)?;
                let end = f.end();
                let torn = result.torn.map(|t| (t.line, t.byte, t.len));
                input::zstd::report_end(&end, torn, &mut out);
                result.zstd = Some(end);
            }
            result.tally = out.tally;
            return Ok(result);
        }
    };
    let dialect = if opts.from_store {
        dialect.for_store()
    } else {
        dialect
    };
    result.version = Some(i64::from(dialect.version));
    let ctx = Ctx {
        dialect,
        vocab: Vocabulary::new(dialect, &opts.known_types),
        session_id: header.id.clone().unwrap_or_default(),
        stop_after: opts.stop_after,
        from_store: opts.from_store,
        draft: None,
        muted: false,
        shape: tree_shape(dialect, &observer, opts.light.is_some()),
        // Forced whole, a light pass reads every line as the full pass does.
        full_lines: opts.light.clone().map(|f| {
            if light::full_pass_forced() {
                FullLines::all()
            } else {
                f
            }
        }),
        observer,
    };
    let mut pass = Pass {
        ctx,
        out,
        state: FoldState::new(dialect, opts),
        spec: None,
        resync_pending: false,
        committed_bytes: result.committed_bytes,
        dropped: None,
        failed: None,
        max_line: crate::log::limits::max_line_bytes(),
    };
    let mut reached_stop = opts.stop_after.is_none();
    // Input folded to the end: read (and for zstd, decompress) and parse on worker threads
    // while this one folds. A stop seq or an observer that may be done early (the pass ends
    // early, and a zstd decoder's state is read where it stops) and a reader that watches each
    // line being consumed (`threads: 1`) keep the one-line-at-a-time pass.
    let threads = opts.parse_threads();
    if opts.stop_after.is_none() && threads > 1 && !pass.ctx.observer.may_end_early() {
        let positional = opts.positional.as_ref().filter(|_| framing.is_none());
        let (folded, torn) = pipeline::run(
            &mut lines,
            pass,
            opts.block_bytes,
            threads,
            positional,
            opts.step_aside_every,
            opts.deferred.as_deref(),
        );
        pass = folded;
        result.torn = torn?;
    } else {
        // Each line's JSON lists go into this arena, emptied (and kept) for the next line;
        // one that grew around a huge line is dropped, not kept for the rest of the pass.
        let mut arena = crate::log::json::Arena::default();
        // The parser's stacks, kept from line to line (fresh ones grew for every line).
        let mut spare = crate::log::json::Scratch::default();
        while let Some(line) = lines.next_line()? {
            if arena.allocated_bytes() > KEPT_LINE_ARENA {
                arena = crate::log::json::Arena::default();
            }
            arena.reset();
            if !line.terminated {
                result.torn = Some(TornTail {
                    line: line.no,
                    byte: line.byte,
                    len: line.bytes.len() as u64,
                });
                break;
            }
            let pos = Pos {
                line: line.no,
                byte: line.byte,
            };
            let end = line.byte + line.bytes.len() as u64 + 1;
            let (text, utf8_ok) = line_text(line.bytes);
            let mut scratch = spare.recycle();
            let mut row = rows::decode_in(
                &text,
                pos,
                dialect,
                Some(&arena),
                Some(&mut scratch),
                utf8_ok,
                pass.ctx.shape_at(pos.byte),
            );
            let stop = pass.line(pos, end, line.bytes, utf8_ok, &mut row);
            drop(row);
            spare = scratch.recycle();
            if spare.items.capacity() + spare.members.capacity() > KEPT_SCRATCH {
                // Grown around a huge line: not kept for the rest of the pass.
                spare = crate::log::json::Scratch::default();
            }
            if stop {
                reached_stop = true;
                break;
            }
            if pass.ctx.observer.done() {
                result.ended_early = true;
                break;
            }
        }
    }
    if framing.is_some() && !pass.stop_reached() && !result.ended_early {
        drain(&mut lines)?;
    }
    result.total_bytes = lines.offset();
    let zstd = framing.map(Framing::end);
    // §3.3, §6.2 step 5: inside complete frames there is no crash tail.
    if let Some(z) = &zstd
        && let Some(Speculation { tail: s, .. }) = &pass.spec
        && (z.stopped || s.first.byte < z.complete_end)
    {
        let torn_record = Finding {
            code: Code::ZstdTornRecordInFrame,
            severity: Severity::Error,
            pos: s.first,
            seq: s.first_seq,
            event_type: None,
            message: format!(
                "corrupt Zstandard session log: complete frame contains a torn JSONL record: line {} ({}) lies inside a complete frame, where DSH tolerates no crash tail",
                s.first.line, s.why
            ),
        };
        reached_stop |= pass.replay(Replayed::Committed);
        if !z.stopped {
            pass.out.push(torn_record);
        }
    }
    // No turn end followed the first bad row: a crash tail, dropped like DSH does. (A pass
    // that ended early has none: an observer sees no row in doubt before its fate is known.)
    pass.replay(Replayed::Dropped);
    if let Some(e) = pass.failed.take() {
        return Err(e);
    }
    let Pass {
        mut out,
        state,
        committed_bytes,
        dropped,
        ..
    } = pass;
    result.committed_bytes = committed_bytes;
    if let Some(s) = dropped {
        let tail_end = result.torn.map_or(result.total_bytes, |t| t.byte);
        // A stop seq met only inside the dropped rows names no event of the loaded log.
        reached_stop = opts
            .stop_after
            .is_none_or(|stop| state.surface.next_seq() > stop);
        result.crash = Some(CrashTail {
            line: s.first.line,
            byte: s.first.byte,
            rows: s.rows,
            end: tail_end,
        });
        out.push(Finding {
            code: Code::CrashTail,
            severity: Severity::Warning,
            pos: s.first,
            seq: s.first_seq,
            event_type: None,
            message: format!(
                "crash tail: {} row{} from line {} (bytes {}..{}) follow the last committed turn end and are dropped on load; first bad row: {}",
                s.rows,
                if s.rows == 1 { "" } else { "s" },
                s.first.line,
                s.first.byte,
                tail_end,
                s.why
            ),
        });
    }
    if let Some(t) = result.torn.filter(|_| zstd.is_none()) {
        out.push(Finding {
            code: Code::TornLine,
            severity: Severity::Warning,
            pos: Pos {
                line: t.line,
                byte: t.byte,
            },
            seq: None,
            event_type: None,
            message: format!(
                "torn final line: {} bytes without a terminating newline (a write cut by a crash); never parsed",
                t.len
            ),
        });
    }
    // (After a pass that ended early: what the frames read showed; no frame is torn before
    // the end of the input.)
    if let Some(z) = &zstd {
        let torn = result.torn.map(|t| (t.line, t.byte, t.len));
        if input::zstd::report_end(z, torn, &mut out) && result.torn.is_none() {
            // A torn frame whose plaintext ends on a line boundary is still a torn tail.
            result.torn = Some(TornTail {
                line: z.lines + 1,
                byte: result.total_bytes,
                len: 0,
            });
        }
    }
    result.zstd = zstd;
    if !result.ended_early {
        // Stopped at `stop_after`: the log goes on, so what only its whole can show (the
        // inherited prefix's end marker, a seed length) is not asked of the prefix.
        let prefix_only = opts.stop_after.is_some() && reached_stop;
        finish(dialect, &header, &state, prefix_only, &mut out);
    }
    result.stop_not_reached = !reached_stop;
    result.header = Some(header);
    result.dialect = Some(dialect);
    result.state = Some(state);
    result.tally = out.tally;
    Ok(result)
}

/// The fold's side of the pass: everything one line changes.
struct Pass<O, S> {
    ctx: Ctx<O>,
    out: Counting<S>,
    state: FoldState,
    spec: Option<Speculation>,
    /// After a bad row whose events cannot be counted, the next usable seq re-synchronises
    /// silently instead of reporting the same damage twice as a gap.
    resync_pending: bool,
    /// Offset just past the last committed line.
    committed_bytes: u64,
    /// The rows of a crash tail, once dropped (for the `crash-tail` finding).
    dropped: Option<Tail>,
    /// Keeping or reading back rows failed, or a row passed a guard of dshs's own: the
    /// pass reports it at the end.
    failed: Option<io::Error>,
    /// The line-size guard ([`crate::log::limits`]).
    max_line: u64,
}

/// One UTF-8 pass: borrowed when valid, decoded lossily (like DSH) when not.
fn line_text(bytes: &[u8]) -> (std::borrow::Cow<'_, str>, bool) {
    match simdutf8::basic::from_utf8(bytes) {
        Ok(s) => (std::borrow::Cow::Borrowed(s), true),
        Err(_) => (String::from_utf8_lossy(bytes), false),
    }
}

impl<O, S> Pass<O, S> {
    /// The same pass with another sink; the one it had.
    fn with_sink<S2>(self, sink: S2) -> (Pass<O, S2>, S) {
        let Pass {
            ctx,
            out,
            state,
            spec,
            resync_pending,
            committed_bytes,
            dropped,
            failed,
            max_line,
        } = self;
        let Counting {
            inner: had,
            tally,
            muted,
            light,
        } = out;
        let pass = Pass {
            ctx,
            out: Counting {
                inner: sink,
                tally,
                muted,
                light,
            },
            state,
            spec,
            resync_pending,
            committed_bytes,
            dropped,
            failed,
            max_line,
        };
        (pass, had)
    }
}

impl<O: Observer, S: Sink> Pass<O, S> {
    /// Check and fold one complete line (its row decoded from the text at `pos`, the line
    /// `raw` ending at `end`). True when the `--at` stop seq is reached: the pass ends there.
    /// The row is folded in place (a row is ~250 bytes: each move of it cost a copy).
    ///
    /// At the first bad row (§6.1) DSH stops accepting events, and whether that row is crash
    /// damage or corruption depends on whether a later row holds a `turn/end` (§6.2). So from
    /// there the rows are only kept — their bytes, in a [`Spool`] — and looked at for a turn
    /// end; once the answer is known they are read back and folded as decided
    /// ([`Pass::replay`]). Nothing about them is held in memory meanwhile, whatever follows.
    fn line(&mut self, pos: Pos, end: u64, raw: &[u8], utf8_ok: bool, row: &mut Row<'_>) -> bool {
        // dshs's own limits come first, wherever the row is: it is not judged at all (neither
        // committed nor a crash tail), the pass stops and says which guard (issue 37 item 2).
        if self.failed.is_some() {
            return true;
        }
        if let Some(hit) = limit_hit(pos, raw, row, self.max_line) {
            self.failed.get_or_insert(hit.into_io());
            return true;
        }
        if let Some(spec) = &mut self.spec {
            spec.tail.rows += 1;
            if let Err(e) = spec.spool.push(raw) {
                self.failed.get_or_insert(e);
            }
            spec.next_seq = seq_after(row, spec.next_seq);
            spec.events |= !matches!(row, Row::Bad(_));
            self.ctx
                .observer
                .tail_pending(spec.tail.first, spec.tail.rows);
            if holds_turn_end(row) {
                // The damage lies before a turn end: it is in the committed region.
                let stopped = self.replay(Replayed::Committed);
                self.committed_bytes = end;
                return stopped || self.stop_reached();
            }
            // `--at`: the log is read as if it ended after the stop seq.
            return self.ctx.stop_after.is_some_and(|stop| spec.next_seq > stop);
        }
        // Is this a bad row (§6.1), and does it hold a turn end?
        let expected = self.state.surface.next_seq();
        let (bad, turn_end) = classify_row(
            row,
            expected,
            self.resync_pending || self.ctx.from_store,
            &self.ctx.vocab,
            self.ctx.dialect,
        );
        match &bad {
            Some(info) if !turn_end => {
                self.spec = Some(Speculation {
                    tail: Tail {
                        first: pos,
                        first_seq: info.seq,
                        why: info.why.clone(),
                        rows: 1,
                    },
                    spool: Spool::new(raw),
                    next_seq: seq_after(row, expected),
                    // A B5 row (canonical violation, §6.1) is bad and holds events.
                    events: !matches!(row, Row::Bad(_)),
                });
                self.ctx.observer.tail_pending(pos, 1);
                return self
                    .ctx
                    .stop_after
                    .is_some_and(|stop| seq_after(row, expected) > stop);
            }
            // A bad row that itself holds a turn end: committed damage at once.
            Some(_) => {
                self.ctx.observer.speculation_started();
                self.fold_row(pos, utf8_ok, row, bad, Fate::Committed);
                self.out.tally.header_or_physical = true;
                self.ctx.observer.speculation_ended(true);
            }
            None => self.fold_row(pos, utf8_ok, row, None, Fate::Accepted),
        }
        self.committed_bytes = end;
        self.stop_reached()
    }

    fn stop_reached(&self) -> bool {
        self.ctx
            .stop_after
            .is_some_and(|stop| self.state.surface.next_seq() > stop)
    }

    /// Read back the rows kept since the first bad row and fold them as decided: `Committed`
    /// (a turn end followed: fatal damage, every finding stands and the status is invalid)
    /// or `Dropped` (a crash tail: folded on a copy of the state, only the findings that
    /// survive a rollback are kept, and the state is put back). True when the `--at` stop
    /// seq was reached among them.
    fn replay(&mut self, fate: Replayed) -> bool {
        let Some(Speculation {
            tail,
            spool,
            events,
            ..
        }) = self.spec.take()
        else {
            return false;
        };
        // Rows without events (unparsable lines, junk) dropped unseen: nothing to replay.
        if matches!(fate, Replayed::Dropped) && !events && self.ctx.observer.inert() {
            self.dropped = Some(tail);
            return false;
        }
        self.ctx
            .observer
            .tail_decided(matches!(fate, Replayed::Committed));
        self.ctx.observer.speculation_started();
        let saved = matches!(fate, Replayed::Dropped).then(|| self.state.clone());
        let how = match fate {
            Replayed::Committed => Fate::Committed,
            Replayed::Dropped => Fate::Dropped,
        };
        let mut stopped = false;
        let mut arena = crate::log::json::Arena::default();
        let read = spool.read_back(
            |no, raw| {
                if arena.allocated_bytes() > KEPT_LINE_ARENA {
                    arena = crate::log::json::Arena::default();
                }
                arena.reset();
                let pos = Pos {
                    line: tail.first.line + no,
                    byte: raw.0,
                };
                let (text, utf8_ok) = line_text(raw.1);
                let mut row = rows::decode_in(
                    &text,
                    pos,
                    self.ctx.dialect,
                    Some(&arena),
                    None,
                    utf8_ok,
                    self.ctx.shape_at(pos.byte),
                );
                let expected = self.state.surface.next_seq();
                let (bad, _) = classify_row(
                    &row,
                    expected,
                    self.resync_pending || self.ctx.from_store,
                    &self.ctx.vocab,
                    self.ctx.dialect,
                );
                self.fold_row(pos, utf8_ok, &mut row, bad, how);
                stopped = self.stop_reached();
                !stopped
            },
            tail.first.byte,
        );
        if let Err(e) = read {
            self.failed.get_or_insert(e);
        }
        match saved {
            Some(saved) => {
                self.state = saved;
                self.ctx.observer.speculation_ended(false);
                self.dropped = Some(tail);
            }
            None => {
                // Every bad row in it (a B5 canonical violation included) is fatal damage
                // for the status.
                self.out.tally.header_or_physical = true;
                self.ctx.observer.speculation_ended(true);
            }
        }
        stopped
    }

    /// Report and fold one row: its physical finding if it is bad, then its events. `fate`
    /// says where the findings go (see [`Fate`]).
    fn fold_row(
        &mut self,
        pos: Pos,
        utf8_ok: bool,
        row: &mut Row<'_>,
        bad: Option<BadRowInfo>,
        fate: Fate,
    ) {
        let speculative = fate != Fate::Accepted;
        let mut survivors = Survivors(&mut self.out);
        let sink: &mut dyn Sink = match fate {
            Fate::Dropped => &mut survivors,
            Fate::Accepted | Fate::Committed => &mut *survivors.0,
        };
        if let Some(BadRowInfo { code, why, seq, ty }) = &bad {
            // The physical finding (held until the speculation is decided). B5 rows are
            // reported by the check that owns the rule, when the row is folded.
            let physical = code.info().area == Area::File;
            if physical {
                let message = match code {
                    Code::CommittedUnparsable => {
                        format!("unparsable committed event at line {}: {why}", pos.line)
                    }
                    Code::CommittedNotEvent => {
                        format!("committed row at line {} is not an event: {why}", pos.line)
                    }
                    Code::CommittedSeqGap => {
                        format!("{why} in committed region at line {}", pos.line)
                    }
                    // One finding per bad row: the §6 verdict, naming the storage rule the
                    // row breaks (§5.2 packed rows, §5.3 range lists) in its message.
                    _ => match &*row {
                        Row::Bad(rows::BadRow {
                            kind: BadKind::Malformed(rule),
                            ..
                        }) => format!(
                            "malformed committed row at line {}: {why} (rule {}, FORMAT.md {})",
                            pos.line,
                            rule.as_str(),
                            rule.info().section
                        ),
                        _ => format!("malformed committed row at line {}: {why}", pos.line),
                    },
                };
                sink.push(Finding {
                    code: *code,
                    severity: Severity::Error,
                    pos,
                    seq: *seq,
                    event_type: ty.clone(),
                    message,
                });
            }
        }
        if let Row::Bad(b) = &*row {
            self.ctx.observer.unusable(&Unusable {
                pos,
                seq: b.seq,
                event_type: b.event_type.as_deref(),
                why: &b.why,
                speculative,
            });
        }
        match &*row {
            // A malformed row with a known seq still occupied its seqs.
            Row::Bad(b) if b.seq.is_some_and(|s| s >= self.state.surface.next_seq()) => {
                let first = b.seq.unwrap_or_default();
                self.state.surface.resync(first);
                self.state.surface.skip(first + b.members.max(1) - 1);
                self.resync_pending = false;
            }
            Row::Bad(_) => self.resync_pending = true,
            Row::Events(..) | Row::Packed(..) => self.resync_pending = false,
        }

        // Fold what the row holds (in the committed state, or speculatively).
        let (first_seq, audit) = match &*row {
            Row::Events(cands, audit) => (cands.first().and_then(|c| c.seq), Some(audit)),
            Row::Packed(packed, audit) => (Some(packed.seq0), Some(audit)),
            Row::Bad(_) => (None, None),
        };
        if let Some(audit) = audit {
            let line_at = Reporter {
                version: Some(self.ctx.dialect.version),
                pos,
                seq: first_seq,
                event_type: None,
            };
            if !utf8_ok {
                sink.push(line_at.finding(
                    Code::InvalidUtf8,
                    "line holds bytes that are not UTF-8 (DSH decodes them as U+FFFD; derive passes the original bytes through)",
                ));
            }
            if let Some(k) = &audit.duplicate_key {
                sink.push(line_at.finding(
                    Code::DuplicateJsonKey,
                    format!(
                        "an object repeats the key `{}`; JavaScript keeps the last value",
                        crate::log::text::clip(k, 60)
                    ),
                ));
            }
            if audit.negative_zero {
                sink.push(line_at.finding(
                    Code::JsonNotLossless,
                    "the event contains -0, which DSH's lossless-JSON check refuses",
                ));
            }
            if audit.non_finite {
                sink.push(line_at.finding(
                    Code::JsonNotLossless,
                    "the event contains a number too large for JavaScript (it parses to Infinity, which DSH's lossless-JSON check refuses)",
                ));
            }
            match row {
                Row::Events(cands, _) => {
                    for cand in cands.iter_mut() {
                        if let (Some(stop), Some(seq)) = (self.ctx.stop_after, cand.seq)
                            && seq > stop
                        {
                            break;
                        }
                        fold_candidate(&mut self.ctx, &mut self.state, cand, speculative, sink);
                    }
                }
                Row::Packed(packed, _) => {
                    fold_packed(&mut self.ctx, &mut self.state, packed, speculative, sink);
                }
                Row::Bad(_) => {}
            }
        }
        if let Some(f) = self.ctx.draft.take() {
            sink.push(f);
            self.ctx.muted = true;
            survivors.0.muted = true;
        }
    }
}

/// Where a row's findings go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// A committed row: to the sink.
    Accepted,
    /// A row after a bad row, in the committed region after all (a turn end followed): to
    /// the sink, with the row marked speculative for the observer.
    Committed,
    /// A row of a crash tail, dropped: only findings that survive a rollback reach the sink.
    Dropped,
}

/// How the rows kept since the first bad row turned out.
#[derive(Debug, Clone, Copy)]
enum Replayed {
    Committed,
    Dropped,
}

/// Passes on only the findings that stand when their rows are dropped.
struct Survivors<'s, S>(&'s mut Counting<S>);

impl<S: Sink> Sink for Survivors<'_, S> {
    fn push(&mut self, f: Finding) {
        if survives_rollback(&f) {
            self.0.push(f);
        }
    }
}

/// The seq the fold expects after `row` when it expected `expected` before it: past the
/// row's own seqs (the fold follows the observed seq after damage, §6.3), or unchanged for a
/// bad row whose seq is unusable.
fn seq_after(row: &Row<'_>, expected: u64) -> u64 {
    match row {
        Row::Bad(b) => match b.seq {
            Some(seq) if seq >= expected => seq.saturating_add(b.members.max(1)),
            _ => expected,
        },
        Row::Packed(packed, _) => packed.last_seq().saturating_add(1),
        Row::Events(cands, _) => cands
            .iter()
            .fold(expected, |next, c| c.seq.unwrap_or(next).saturating_add(1)),
    }
}

/// Whether a row is, or holds, a `turn/end` (that is all a kept row is asked, §6.2 step 3).
fn holds_turn_end(row: &Row<'_>) -> bool {
    match row {
        Row::Bad(b) => b.is_turn_end,
        Row::Packed(..) => false,
        Row::Events(cands, _) => cands.iter().any(|c| c.is_turn_end),
    }
}

/// Read the rest of a zstd log so the decoder sees every frame (its end state is needed).
fn drain<R: BufRead>(lines: &mut LineReader<R>) -> io::Result<()> {
    while lines.next_line()?.is_some() {}
    Ok(())
}

/// The guard of dshs's own a line passes, if any: longer than the line-size guard (a row
/// of a SQLite store or a line that came some way other than through [`LineReader`]), or
/// nested deeper than the depth guard.
fn limit_hit(pos: Pos, raw: &[u8], row: &Row<'_>, max_line: u64) -> Option<LimitHit> {
    let at = || format!("line {} (byte {})", pos.line, pos.byte);
    if raw.len() as u64 > max_line {
        return Some(LimitHit::new(
            Guard::LineBytes,
            max_line,
            raw.len() as u64,
            false,
            at(),
        ));
    }
    match row {
        Row::Bad(b) if b.kind == BadKind::Limit => {
            let hit = crate::log::json::depth_limit(raw).unwrap_or_else(|| {
                LimitHit::new(
                    Guard::JsonDepth,
                    u64::from(crate::log::limits::max_json_depth()),
                    0,
                    true,
                    String::new(),
                )
            });
            Some(hit.at(at()))
        }
        _ => None,
    }
}

/// Is this row bad (§6.1), and does it hold a turn end?
fn classify_row(
    row: &Row<'_>,
    expected: u64,
    resync_pending: bool,
    vocab: &Vocabulary,
    dialect: &Dialect,
) -> (Option<BadRowInfo>, bool) {
    let cands = match row {
        Row::Bad(b) => {
            let code = match b.kind {
                BadKind::Unparsable => Code::CommittedUnparsable,
                BadKind::NotEvent => Code::CommittedNotEvent,
                BadKind::Malformed(_) => Code::CommittedMalformedRow,
                // Stopped at in `Pass::line` before it is classified.
                BadKind::Limit => Code::CommittedUnparsable,
            };
            let info = BadRowInfo {
                code,
                why: b.why.clone(),
                seq: b.seq,
                ty: b.event_type.clone(),
            };
            return (Some(info), b.is_turn_end);
        }
        // Packed rows exist only in formats 0 and 1, which have no canonical envelope.
        Row::Packed(packed, _) => {
            let gap = seq_gap(Some(packed.seq0), expected, resync_pending, || {
                Some(Kind::AssistantChunk.name().to_owned())
            });
            return (gap, false);
        }
        Row::Events(cands, _) => cands,
    };
    let turn_end = cands.iter().any(|c| c.is_turn_end);
    let first = cands.first().and_then(|c| c.seq);
    let gap = seq_gap(first, expected, resync_pending, || {
        cands
            .first()
            .and_then(|c| c.event.as_ref().ok())
            .map(|e| e.ty.to_string())
    });
    if gap.is_some() {
        return (gap, turn_end);
    }
    // Canonical-envelope violations exist from format 3 on (both checks answer None before;
    // skipping them spares a type lookup per event on formats 0-2).
    let canonical = cands.iter().filter(|_| dialect.canonical).find_map(|c| {
        let ev = c.event.as_ref().ok()?;
        let class = c
            .class
            .unwrap_or_else(|| vocab.classify(&ev.ty, ev.ignorable));
        let code = surface::surface_metadata_violation(dialect, ev, class)
            .or_else(|| payload::payload_violation(dialect, ev, class))?;
        Some(BadRowInfo {
            code,
            why: format!("canonical-envelope violation ({code})"),
            seq: Some(ev.seq),
            ty: Some(ev.ty.to_string()),
        })
    });
    (canonical, turn_end)
}

/// A row whose first seq is not the one expected (unless it follows a bad row, after which
/// the scan continues from the observed seq, §6.3): `ty` names its first event.
fn seq_gap(
    first: Option<u64>,
    expected: u64,
    resync_pending: bool,
    ty: impl FnOnce() -> Option<String>,
) -> Option<BadRowInfo> {
    let silent_resync = resync_pending && first.is_some_and(|s| s > expected);
    if first == Some(expected) || silent_resync {
        return None;
    }
    let got = first.map_or_else(|| "no usable seq".to_owned(), |s| s.to_string());
    Some(BadRowInfo {
        code: Code::CommittedSeqGap,
        why: format!("seq gap (expected {expected}, got {got})"),
        seq: first,
        ty: ty(),
    })
}

/// Counts what goes through it to `inner`.
struct Counted<'s> {
    inner: &'s mut dyn Sink,
    pushed: usize,
}

impl Sink for Counted<'_> {
    fn push(&mut self, finding: Finding) {
        self.pushed += 1;
        self.inner.push(finding);
    }
}

/// The trees a pass of `observer` over a log in `dialect` builds. Formats without an
/// embedded stream have no stream to leave out; formats 0 and 1 have packed rows, whose
/// members past the first a pass that does not want each event reads only where they do not
/// follow cleanly (`fold_packed`).
fn tree_shape(dialect: &Dialect, observer: &impl Observer, light: bool) -> Shape {
    if light {
        light::shape(dialect, observer.wants_each_event())
    } else if observer.reads_stream_records() {
        Shape::Full
    } else if dialect.embedded_stream {
        Shape::Lean
    } else if dialect.packed_rows && !observer.wants_each_event() {
        Shape::LeanPacked
    } else {
        Shape::Full
    }
}

/// The members of a packed row through the fold. The first is folded like any event. The
/// others are `assistant/chunk` events identical to it but for their seq, time and text, and
/// for such an event every rule is a check of what they share (its turn and step against the
/// open step, no surface metadata) and the fold only moves on (the next seq; the last seq and
/// time, for closers): so when the first drew no finding, neither would they, and they are
/// counted instead of built and folded one by one. They are folded one by one when an
/// observer wants to see each event, when the pass stops inside the row (`--at`), when the
/// first drew a finding, and in damaged input that went back over seqs already on the
/// surface (each member is checked for a repeated seq). `packed_members_fold_like_events`
/// (scan tests) compares both ways over logs that exercise each of these. A lean row
/// ([`Shape::LeanPacked`]) holds its first member only, and is read again whole for the rest.
fn fold_packed(
    ctx: &mut Ctx<impl Observer>,
    state: &mut FoldState,
    packed: &Packed<'_>,
    speculative: bool,
    sink: &mut dyn Sink,
) {
    let last = packed.last_seq();
    let stop = ctx.stop_after;
    // The members folded before the loop below.
    let mut folded = 0;
    if !ctx.observer.wants_each_event() && stop.is_none_or(|s| last <= s) {
        let Some(mut first) = packed.first() else {
            return;
        };
        let mut counted = Counted {
            inner: sink,
            pushed: 0,
        };
        fold_candidate(ctx, state, &mut first, speculative, &mut counted);
        let clean = counted.pushed == 0
            && first
                .event
                .as_ref()
                .is_ok_and(|e| e.kind == Kind::AssistantChunk && !e.normalized)
            && state.surface.next_seq() == packed.seq0 + 1
            && state.surface.top().is_none_or(|t| t <= packed.seq0);
        if clean {
            state.surface.skip(last);
            state.closers.passed(last, packed.last_time);
            state.events += packed.len() as u64 - 1;
            ctx.observer
                .members_passed(packed.len() as u64 - 1, packed.last_time);
            return;
        }
        folded = 1;
    }
    // Every member in turn: a lean row's are read again from its line.
    let whole = packed.whole();
    let whole = whole.as_ref().unwrap_or(packed);
    debug_assert!(!whole.is_lean(), "the members of a lean row are read again");
    for mut cand in whole.members().skip(folded) {
        if let (Some(stop), Some(seq)) = (stop, cand.seq)
            && seq > stop
        {
            break;
        }
        fold_candidate(ctx, state, &mut cand, speculative, sink);
    }
}

/// One decoded event slot through every check and the fold, stage by stage in this order:
/// envelope (a slot `rows` could not decode), v0 legacy normalization (`legacy`),
/// vocabulary (`vocab`), the V4-draft tell-tales, shapes (`payload`), compaction
/// (`compaction`), the surface fold (`surface`), lifecycle (`lifecycle`), closers
/// (`closers`), then the observer.
fn fold_candidate(
    ctx: &mut Ctx<impl Observer>,
    state: &mut FoldState,
    cand: &mut Candidate<'_>,
    speculative: bool,
    sink: &mut dyn Sink,
) {
    let d = ctx.dialect;
    let expected = state.surface.next_seq();
    let known_class = cand.class;
    let ev = match &mut cand.event {
        Err(bad) => {
            let seq = cand.seq.unwrap_or(expected);
            let at = Reporter {
                version: Some(d.version),
                pos: bad.pos,
                seq: Some(seq),
                event_type: bad.ty.as_deref(),
            };
            sink.push(at.finding(
                Code::EnvelopeInvalid,
                format!(
                    "seed event at seq {seq} has an invalid event envelope: {}",
                    bad.why
                ),
            ));
            ctx.observer.unusable(&Unusable {
                pos: bad.pos,
                seq: Some(seq),
                event_type: bad.ty.as_deref(),
                why: &bad.why,
                speculative,
            });
            state.surface.resync(seq);
            state.surface.skip(seq);
            state.events += 1;
            return;
        }
        Ok(ev) => ev,
    };
    // After a seq gap in damaged input, continue from the observed seq (§6.3).
    match cand.seq {
        Some(seq) if seq != expected => state.surface.resync(seq),
        None => ev.seq = expected,
        _ => {}
    }
    let mut class = None;
    if d.legacy_v0 {
        // A Cow clone: free for the usual borrowed type name.
        let original_type = ev.ty.clone();
        let outcome = legacy::normalize(ev, &ctx.session_id, &state.surface);
        let at = Reporter {
            version: Some(d.version),
            pos: ev.pos,
            seq: Some(ev.seq),
            event_type: Some(&original_type),
        };
        match outcome {
            Legacy::Unchanged => {}
            Legacy::Normalized(label) => {
                state
                    .legacy
                    .entry(label)
                    .and_modify(|e| e.0 += 1)
                    .or_insert((1, ev.pos, ev.seq));
            }
            Legacy::Retired(why) => {
                sink.push(at.finding(Code::RetiredLegacyEvent, why));
                class = Some(TypeClass::RetiredRequired);
            }
            Legacy::Malformed(why) => {
                sink.push(at.finding(Code::LegacyShapeMalformed, why));
                // DSH's legacy reader fails before its vocabulary check (§16, §7.3): a
                // malformed legacy-only type (`steering/message`) is reported once, as
                // corrupt, and not also as an unknown type that would make it unsupported.
                if ctx.vocab.classify(&ev.ty, ev.ignorable) == TypeClass::UnknownRequired {
                    class = Some(TypeClass::RetiredRequired);
                }
            }
        }
    }
    let class = class
        .or(known_class)
        .unwrap_or_else(|| ctx.vocab.classify(&ev.ty, ev.ignorable));
    let at = Reporter {
        version: Some(d.version),
        pos: ev.pos,
        seq: Some(ev.seq),
        event_type: Some(&ev.ty),
    };
    let retired_legacy = d.legacy_v0 && class == TypeClass::RetiredRequired;
    match class {
        TypeClass::UnknownRequired => sink.push(at.finding(
            Code::UnknownEventType,
            format!(
                "session contains event type \"{}\" (seq {}) unknown to format v{} and not marked ignorable; refusing to interpret the log — {}",
                crate::log::text::clip(&ev.ty, 80),
                ev.seq,
                d.version,
                unknown_type_origin(&ev.ty, d.version)
            ),
        )),
        TypeClass::RetiredRequired if !retired_legacy => sink.push(at.finding(
            Code::RetiredEventType,
            format!(
                "{} is retired in format v{} and this occurrence is not marked ignorable",
                ev.ty, d.version
            ),
        )),
        _ => {}
    }
    if d.draft_signals
        && !ctx.muted
        && ctx.draft.is_none()
        && let Some(signal) = payload::v4_draft_signal(ev)
    {
        ctx.draft = Some(at.finding(
                Code::FormatV4Draft,
                format!(
                    "format 4 draft: header says version 4 but seq {} uses {signal} — format-3 bodies under a version-4 header, as pre-release DSH builds wrote them and as one public fork keeps writing them as its \"legacy V4\"; released upstream DSH refuses them and dshs does not read this variant",
                    ev.seq
                ),
            ));
    }
    let mut discard: Vec<Finding> = Vec::new();
    let sink: &mut dyn Sink = if ctx.draft.is_some() || ctx.muted {
        &mut discard
    } else {
        sink
    };
    let payload_findings = payload::check(d, ev, class, &at);
    let refused_admission = d.admission_in_fold
        && payload_findings
            .iter()
            .any(|f| f.is_error() && f.code.info().area == Area::Messages);
    for f in payload_findings {
        sink.push(f);
    }
    let open_turn = state.lifecycle.open_turn();
    state
        .compaction
        .observe(ev, open_turn, &state.surface, sink);
    let accepted = if refused_admission {
        // v4: the message failed admission inside the fold; it stays off the surface.
        state.surface.skip(ev.seq);
        false
    } else {
        state.surface.fold(ev, class, sink)
    };
    state.lifecycle.observe(ev, class, sink);
    state.closers.observe(ev);
    match ev.kind {
        Kind::TurnStart => state.last_turn_start = Some((ev.pos, ev.seq)),
        Kind::SessionEndSeed if ev.data.get("inherited") == Some(&Json::Bool(true)) => {
            state.inherited_marker = Some(ev.seq);
        }
        _ => {}
    }
    state.events += 1;
    ctx.observer.event(
        &super::scan::EventInfo {
            event: ev,
            class,
            accepted,
            speculative,
        },
        state,
    );
}

/// End-of-log rules on the committed prefix.
fn finish(
    d: &'static Dialect,
    h: &Header,
    state: &FoldState,
    prefix_only: bool,
    out: &mut dyn Sink,
) {
    let at = |pos: Pos, seq: Option<u64>, ty: Option<&'static str>| Reporter {
        version: Some(d.version),
        pos,
        seq,
        event_type: ty,
    };
    if state.closers.is_open() {
        let (pos, seq) = state.last_turn_start.unwrap_or_default();
        let pending = state.closers.closers().len().saturating_sub(1);
        out.push(at(pos, Some(seq), Some(Kind::TurnStart.name())).finding(
            Code::OpenTurnAtEnd,
            format!(
                "the log ends inside open turn {} ({} closer{} would be appended by repair); DSH closes it on resume",
                state.closers.open_turn().unwrap_or_default(),
                pending + 1,
                if pending == 0 { "" } else { "s" }
            ),
        ));
    }
    if let Some(f) = state.compaction.finish(d.version) {
        out.push(f);
    }
    let header_pos = Pos { line: 1, byte: 0 };
    match d.seed_field {
        SeedField::Length => {
            if let Some(len) = h.seed_length
                && len > state.events
                && !prefix_only
            {
                    out.push(at(header_pos, None, None).finding(
                        Code::SeedLengthExceedsEvents,
                        format!(
                            "Session inheritedEventCount exceeds its event count: seedLength {len} > {} events",
                            state.events
                        ),
                    ));
                }
        }
        SeedField::Flag => match (h.is_seeded, state.inherited_marker) {
            (Some(true), None) if !prefix_only => out.push(at(header_pos, None, None).finding(
                Code::SeedMarkerMismatch,
                format!(
                    "released v{} seeded Session lacks an inherited end-seed marker (isSeeded is true but no session/end-seed {{inherited:true}} exists)",
                    d.version
                ),
            )),
            (Some(false), Some(seq)) => out.push(at(header_pos, Some(seq), None).finding(
                Code::SeedMarkerMismatch,
                format!(
                    "released v{} unseeded Session contains an inherited end-seed marker at seq {seq} (isSeeded is false)",
                    d.version
                ),
            )),
            _ => {}
        },
    }
    for (label, (count, pos, seq)) in &state.legacy {
        out.push(at(*pos, Some(*seq), None).finding(
            Code::LegacyShapeNormalized,
            format!(
                "{count} event{} in the pre-release shape `{label}` (first at seq {seq}); DSH's v0 reader upgrades {} in memory",
                if *count == 1 { "" } else { "s" },
                if *count == 1 { "it" } else { "them" }
            ),
        ));
    }
}

/// Where a type the log's format does not know comes from, as far as dshs can tell (§7.1,
/// §7.2): DSH's past (retired types: an old log, not a new one) or a newer harness or fork.
fn unknown_type_origin(event_type: &str, version: u8) -> String {
    use super::vocab::TypeHistory;
    match super::vocab::type_history(event_type, version) {
        TypeHistory::Retired => format!("it is a retired type: older DSH builds wrote it and later ones dropped it (no format's vocabulary has it, v{version} included): an old log, not a newer one"),
        TypeHistory::RetiredAfter { first, last } => format!(
            "it is a retired type, known to format {} and dropped after v{last}: the log's events are older than its header (an edited log, or a build that mislabels its version)",
            if first == last { format!("v{first}") } else { format!("v{first}–v{last}") }
        ),
        TypeHistory::Later { since } => format!(
            "it is a type of format v{since} and later: the log's events are newer than its header (an edited log, or a build that mislabels its version)"
        ),
        TypeHistory::Unknown => "no DSH format knows it: written by a newer harness or added by a fork (a fork's log-only types can be declared with --known-types FILE)".to_owned(),
    }
}

#[cfg(test)]
mod tests;
