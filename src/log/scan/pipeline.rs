//! The pass on several threads: one strategy for every observer and every row source.
//!
//! The input after the header is cut into blocks of whole lines, numbered in file order and
//! taken in that order by whichever thread is free. Each thread reads its block, splits it
//! into lines and parses their rows, and folds it when the fold's turn comes to it: the pass
//! itself (its state, the observer, and a buffer for the findings) goes from thread to thread
//! in block order, handed over through a bounded channel per block slot ([`Handoff`]). So
//! each block's trees are read by the core that built them moments before (still in its
//! cache), and lines, offsets, rows and their order are
//! exactly those of the one-line-at-a-time pass: the fold ([`Pass::line`]) is the same code,
//! run on one block at a time, in file order. Findings reach the sink on the calling thread,
//! whenever the pass comes back to it.
//!
//! Where blocks come from is the row source's business (`input`): a plain log in a regular
//! file is read at positions, each thread its own chunk at once ([`Chunks`]); any other input
//! (a pipe, a zstd log) is one reader the threads take turns at. A thread waiting for the
//! turn parses its next chunk meanwhile (positional reads only), up to the line at which the
//! turn comes. A helping thread that spends most of its time waiting for the turn (other work
//! holds the cores) steps aside for a while ([`Contention`]).
//!
//! Memory stays bounded whatever the log holds: at most two blocks per thread, their trees,
//! and at most [`ROWS_PER_STEP`] parsed rows per block at a time (a block of very short lines
//! is parsed and folded in steps).

use std::io::{self, BufRead};
use std::sync::{Condvar, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded};

use super::{Deferred, Observer, Pass, Positional, TornTail, line_text};
use crate::log::dialect::Dialect;
use crate::log::finding::{Finding, Pos, Sink};
use crate::log::input::LineReader;
use crate::log::input::chunks::{Chunks, Taken};
use crate::log::json::{Arena, Scratch, Shape};
use crate::log::rows::{self, Row};
use crate::log::vocab::Vocabulary;

/// Bytes per block read from a shared reader (a zstd log, a pipe).
const READER_BLOCK: usize = 256 * 1024;

/// Bytes per chunk read at positions.
const CHUNK: usize = 128 * 1024;

/// At most this many rows of a block are parsed and held at once: a block of very short
/// lines (a crash tail of blank lines, junk) is parsed and folded in steps, so the rows held
/// do not grow with the number of lines in a block (a row takes ~300 bytes).
const ROWS_PER_STEP: usize = 4096;

/// An arena kept for the next block is at most this many blocks in size (a block's trees
/// take several times its size; one that grew around a long line is dropped).
const ARENA_KEPT: usize = 8;

/// How long a thread whose block is parsed polls for its turn before it sleeps: most waits
/// are short, and a thread woken from sleep on a VM starts its fold late.
const SPIN: Duration = Duration::from_millis(1);

/// A helping thread that spent more than half of its last [`WINDOW`] blocks waiting for the
/// turn steps aside for a while ([`Contention`]).
const WINDOW: usize = 64;

/// How long a helping thread first steps aside; doubled while the waits stay long, up to
/// [`AWAY_MAX`].
const AWAY: Duration = Duration::from_millis(100);
const AWAY_MAX: Duration = Duration::from_secs(2);

/// A block's text, and the arena its rows' trees live in.
struct Text {
    bytes: Vec<u8>,
    /// The text is `bytes[skip..skip + len]`; its first byte is at offset `start`.
    skip: usize,
    len: usize,
    start: u64,
    arena: Arena,
}

impl Text {
    fn text(&self) -> &[u8] {
        &self.bytes[self.skip..self.skip + self.len]
    }
}

/// One line of a block, as the fold takes it.
struct Line<'a> {
    /// Numbered from 0 within the block (the fold adds the number of the block's first line).
    pos: Pos,
    /// The line's bytes without its `\n`.
    raw: &'a [u8],
    /// `None`: the final piece of the input, without a `\n` (torn, never parsed).
    parsed: Option<ParsedRow<'a>>,
}

struct ParsedRow<'a> {
    /// The line was UTF-8 as it stands (else it was decoded lossily, like DSH does).
    utf8: bool,
    row: Row<'a>,
}

/// The rows parsed from a block so far, and where parsing goes on.
struct Rows<'a> {
    lines: Vec<Line<'a>>,
    scratch: Scratch<'a>,
    /// Where the next line starts in the text, and its number in the block.
    at: usize,
    no: u64,
}

self_cell::self_cell!(
    /// A block and its rows, which borrow from its text and arena.
    struct Batch {
        owner: Text,
        #[not_covariant]
        dependent: Rows,
    }
);

// SAFETY: a batch is Send but for one thing: its rows hold shared references into its own
// arena (`&[Json]`, and to the arena itself, for strings unescaped on demand), which are Send
// only for `Sync` targets, and neither the arena's `Bump` nor a lazily unescaped string (a
// `OnceCell`) is `Sync`. Those references point only into the batch's own text and arena
// (the rows are made by `Rows::parse` from the cell's owner, and the cell lends them out only
// inside a closure over itself), and a batch moves whole from one thread to another, so one
// thread at a time can reach what they point to: nothing is shared.
unsafe impl Send for Batch {}

impl Batch {
    /// A batch over `text`, nothing parsed yet, with room for `lines` rows (more are made
    /// room for as they come).
    fn over(text: Text, lines: usize) -> Batch {
        let rows = lines.min(ROWS_PER_STEP);
        Batch::new(text, |_| Rows {
            lines: Vec::with_capacity(rows),
            scratch: Scratch::default(),
            at: 0,
            no: 0,
        })
    }

    /// Parse up to [`ROWS_PER_STEP`] more lines (fewer if `stop` says so after a line); true
    /// when the text is all parsed.
    fn parse(&mut self, how: &Parse<'_>, stop: impl Fn() -> bool) -> bool {
        self.with_dependent_mut(|text, rows| rows.parse(text, how, stop))
    }

    fn parsed_all(&self) -> bool {
        self.with_dependent(|text, rows| rows.at >= text.len)
    }

    /// Lines parsed so far and not folded yet.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.with_dependent(|_, rows| rows.lines.len())
    }

    /// Fold the lines parsed so far (the block's first line being number `first_no`) and let
    /// them go; the torn final piece, if this is where the input ends.
    fn fold<O: Observer, S: Sink>(
        &mut self,
        pass: &mut Pass<O, S>,
        first_no: u64,
    ) -> Option<TornTail> {
        self.with_dependent_mut(|_, rows| {
            let mut torn = None;
            // Folded where they lie (a row is ~300 bytes: moving each out cost a copy).
            for line in rows.lines.iter_mut() {
                let pos = Pos {
                    line: line.pos.line + first_no,
                    byte: line.pos.byte,
                };
                let Some(parsed) = &mut line.parsed else {
                    torn = Some(TornTail {
                        line: pos.line,
                        byte: pos.byte,
                        len: line.raw.len() as u64,
                    });
                    break;
                };
                renumber(&mut parsed.row, first_no);
                let end = pos.byte + line.raw.len() as u64 + 1;
                // Without a stop seq the pass never ends early.
                pass.line(pos, end, line.raw, parsed.utf8, &mut parsed.row);
            }
            rows.lines.clear();
            torn
        })
    }
}

/// The events of a row carry their line too: numbered from 0 in the block, like the row.
fn renumber(row: &mut Row<'_>, first_no: u64) {
    match row {
        Row::Events(cands, _) => {
            for c in cands {
                match &mut c.event {
                    Ok(e) => e.pos.line += first_no,
                    Err(bad) => bad.pos.line += first_no,
                }
            }
        }
        Row::Packed(packed, _) => packed.pos.line += first_no,
        Row::Bad(_) => {}
    }
}

impl<'a> Rows<'a> {
    /// Split and parse lines of `text` from where the last call stopped: at most
    /// [`ROWS_PER_STEP`] held at once, stopping early after a line when `stop` says so; true
    /// when the text is all parsed.
    fn parse(&mut self, text: &'a Text, how: &Parse<'_>, stop: impl Fn() -> bool) -> bool {
        let Parse {
            dialect,
            vocab,
            shape,
            full_lines,
        } = *how;
        let bytes = text.text();
        // The rest of the text checked at once (a line at a time, the check's set-up cost more
        // than the check): text of whole lines is UTF-8 exactly when each of its lines is, since
        // no multi-byte sequence spans a `\n`. Only text that is not is checked line by line.
        let from = self.at;
        let whole = simdutf8::basic::from_utf8(&bytes[from..]).ok();
        while self.at < bytes.len() && self.lines.len() < ROWS_PER_STEP {
            let at = self.at;
            let pos = Pos {
                line: self.no,
                byte: text.start + at as u64,
            };
            self.no += 1;
            let Some(n) = memchr::memchr(b'\n', &bytes[at..]) else {
                self.lines.push(Line {
                    pos,
                    raw: &bytes[at..],
                    parsed: None,
                });
                self.at = bytes.len();
                break;
            };
            let raw = &bytes[at..at + n];
            let (line, utf8): (&'a str, bool) =
                match whole.and_then(|w| w.get(at - from..at - from + n)) {
                    Some(line) => (line, true),
                    None => match line_text(raw) {
                        (std::borrow::Cow::Borrowed(s), ok) => (s, ok),
                        // Decoded lossily into the block's arena, where the row can borrow it.
                        (std::borrow::Cow::Owned(s), ok) => (text.arena.bump().alloc_str(&s), ok),
                    },
                };
            // Decoded straight into its slot (a row is ~300 bytes: `push` decoded it, then
            // copied it).
            if self.lines.len() == self.lines.capacity() {
                self.lines.reserve(1);
            }
            let slot = &mut self.lines.spare_capacity_mut()[0];
            slot.write(Line {
                pos,
                raw,
                parsed: Some(ParsedRow {
                    utf8,
                    row: rows::decode_in(
                        line,
                        pos,
                        dialect,
                        Some(&text.arena),
                        Some(&mut self.scratch),
                        utf8,
                        match full_lines {
                            Some(full) if full.contains(pos.byte) => Shape::Full,
                            _ => shape,
                        },
                    ),
                }),
            });
            let len = self.lines.len();
            // SAFETY: the first unused slot, reserved above, was just written.
            unsafe { self.lines.set_len(len + 1) };
            // Work the fold would do, done here: each event's type class (not for v0, whose
            // legacy normalization may still rename the type).
            if !dialect.legacy_v0
                && let Some(Line {
                    parsed:
                        Some(ParsedRow {
                            row: Row::Events(cands, _),
                            ..
                        }),
                    ..
                }) = self.lines.last_mut()
            {
                for c in cands.iter_mut() {
                    if let Ok(ev) = &c.event {
                        c.class = Some(vocab.classify(&ev.ty, ev.ignorable));
                    }
                }
            }
            self.at = at + n + 1;
            if stop() {
                break;
            }
        }
        self.at >= bytes.len()
    }
}

/// How the rows of a block are parsed.
#[derive(Clone, Copy)]
struct Parse<'s> {
    dialect: &'s Dialect,
    vocab: &'s Vocabulary,
    shape: Shape,
    /// A light pass: the lines that get the whole tree (see `Ctx::shape_at`).
    full_lines: Option<&'s super::FullLines>,
}

/// Buffers, arenas of folded blocks, kept for the next ones (one thread's).
#[derive(Default)]
struct Spare {
    texts: Vec<(Vec<u8>, Arena)>,
    /// Lines in the last block this thread folded (0: none yet).
    lines: u64,
}

impl Spare {
    fn text(&mut self) -> (Vec<u8>, Arena) {
        self.texts.pop().unwrap_or_default()
    }

    /// Room for the rows of a block of `len` bytes: half as many again as the last block held
    /// (blocks of one log vary, and a vector that grows moves its rows). Rows made room for
    /// and never used cost memory (a row takes ~300 bytes): sized for the shortest lines, most
    /// of a block's room went unused where lines run to kilobytes.
    fn lines_hint(&self, len: usize) -> usize {
        match usize::try_from(self.lines) {
            Ok(0) | Err(_) => len / 1024 + 16,
            Ok(n) => n + n / 2 + 16,
        }
    }

    /// Free a folded batch (its rows go first, then its arena is reset) and keep its buffer
    /// and arena, unless they grew around a long line.
    fn recycle(&mut self, batch: Batch, block_size: usize) {
        self.lines = batch.with_dependent(|_, rows| rows.no);
        let Text {
            bytes, mut arena, ..
        } = batch.into_owner();
        arena.reset();
        if bytes.len() <= 2 * block_size
            && arena.allocated_bytes() <= ARENA_KEPT * block_size
            && self.texts.len() < 2
        {
            self.texts.push((bytes, arena));
        }
    }
}

/// The fold's turn, handed from thread to thread in block order.
struct Turn<P> {
    pass: P,
    /// The number of the next block's first line.
    line_no: u64,
    torn: Option<TornTail>,
    /// The offset just past the blocks folded.
    end: u64,
    /// The number of blocks folded.
    folded: usize,
}

/// What waits in a block's slot: the turn to fold it, or word that the pass is over (the
/// input ended in an earlier block, or a thread panicked).
enum Handoff<P> {
    Turn(Turn<P>),
    Over,
}

/// Where a block's handoff waits: one value at a time.
type Slot<P> = (Sender<Handoff<P>>, Receiver<Handoff<P>>);

/// The one reader of a source read in order, shared by the threads: each takes the next
/// block (and its number) under the lock, so blocks are numbered in file order.
struct Reading<'l, R> {
    lines: &'l mut LineReader<R>,
    /// The number of the next block.
    next: usize,
    eof: bool,
    /// The read error that ended the input (after the whole lines before it).
    failed: Option<io::Error>,
}

/// Where the threads take their blocks.
enum Source<'s, 'l, R> {
    /// Each thread reads its own chunks of the file, at positions.
    Chunks(&'s Chunks<'s>),
    /// One after the other from the one reader.
    Reader(&'s Mutex<Reading<'l, R>>),
}

/// What the threads share. Blocks are taken in file order by whichever thread is free (one
/// whose parsing runs fast takes more of them), at most two per thread at a time; the turn
/// for block `k` is handed over through slot `k mod slots.len()`, where the thread that
/// took `k` waits for it. There are more slots than blocks can be out at once, so a slot
/// holds one block's turn at a time.
struct Threads<'s, 'l, R, P> {
    source: Source<'s, 'l, R>,
    /// The number of the next chunk to take (positional reads).
    next: std::sync::atomic::AtomicUsize,
    slots: Vec<Slot<P>>,
    block_size: usize,
    how: Parse<'s>,
    /// Polling for the turn only while every thread has a core of its own.
    spin: bool,
    /// The pass is over: a thread that stepped aside comes back at once (and leaves).
    done: (Mutex<bool>, Condvar),
    /// See [`Contention::forced`].
    step_aside_every: usize,
    /// What the reader left for the taking thread to write in each block it reads.
    deferred: Option<&'s dyn Deferred>,
}

/// A helping thread's measure of its waits. Waiting for the turn most of the time means the
/// threads take turns at cores that other work holds too (on two cores busy with a build,
/// two threads had run two to three times slower than one): each wait for the turn then
/// waits for the scheduler. So such a thread steps aside for a while, the other threads fold
/// their blocks without handing the turn over, and it comes back to measure again.
struct Contention {
    /// When the window began, the blocks folded in it and the time spent waiting.
    since: Instant,
    blocks: usize,
    waited: Duration,
    /// How long to step aside next.
    away: Duration,
    /// Tests: step aside for a millisecond after every this many blocks (0: never forced).
    forced: usize,
}

impl Contention {
    fn new(forced: usize) -> Contention {
        Contention {
            since: Instant::now(),
            blocks: 0,
            waited: Duration::ZERO,
            away: AWAY,
            forced,
        }
    }

    /// A new window from now (the time away is not in it).
    fn restart(&mut self) {
        self.since = Instant::now();
        self.blocks = 0;
        self.waited = Duration::ZERO;
    }

    /// A block folded after waiting `waited` for its turn.
    fn folded(&mut self, waited: Duration) {
        self.blocks += 1;
        self.waited += waited;
    }

    /// How long to step aside now, if at all: at the end of a window spent mostly waiting.
    fn step_aside(&mut self) -> Option<Duration> {
        if self.forced > 0 {
            if self.blocks < self.forced {
                return None;
            }
            self.restart();
            return Some(Duration::from_millis(1));
        }
        if self.blocks < WINDOW {
            return None;
        }
        let contended = self.waited * 2 > self.since.elapsed();
        let away = self.away;
        self.away = if contended {
            (away * 2).min(AWAY_MAX)
        } else {
            AWAY
        };
        self.restart();
        contended.then_some(away)
    }
}

/// Says the pass is over in every slot if the thread holding it unwinds, so no thread waits
/// for a turn that will never come (the scope then raises the panic).
struct StopOnPanic<'r, 's, 'l, R, P>(&'r Threads<'s, 'l, R, P>);

impl<R, P> Drop for StopOnPanic<'_, '_, '_, R, P> {
    fn drop(&mut self) {
        if thread::panicking() {
            self.0.over();
        }
    }
}

impl<R, P> Threads<'_, '_, R, P> {
    fn slot(&self, index: usize) -> &Slot<P> {
        &self.slots[index % self.slots.len()]
    }

    /// Word in every slot that the pass is over. A slot that is full holds the turn (a
    /// thread after a panic still gets it) or the same word.
    fn over(&self) {
        for (tx, _) in &self.slots {
            let _ = tx.try_send(Handoff::Over);
        }
        *self.done.0.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.done.1.notify_all();
    }
}

impl<R: BufRead, P> Threads<'_, '_, R, P> {
    /// The next block into a batch: its number, the batch, and whether the input ended in it.
    fn take(&self, spare: &mut Spare) -> (usize, Batch, bool) {
        let (mut bytes, arena) = spare.text();
        let (index, taken) = match &self.source {
            Source::Chunks(chunks) => {
                let index = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                (index, chunks.block(index, &mut bytes))
            }
            Source::Reader(reading) => {
                let mut r = reading
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let index = r.next;
                r.next += 1;
                let start = r.lines.offset();
                let taken = if r.eof {
                    Taken {
                        start,
                        skip: 0,
                        len: 0,
                        eof: true,
                    }
                } else {
                    let block = r.lines.read_block(self.block_size, &mut bytes);
                    if let Some(e) = block.error {
                        r.failed.get_or_insert(e);
                    }
                    r.eof = block.eof;
                    Taken {
                        start,
                        skip: 0,
                        len: block.len,
                        eof: block.eof,
                    }
                };
                drop(r);
                // Off the reader's lock, so every thread does this part of the reading.
                if let Some(deferred) = self.deferred {
                    deferred.fill(start, &mut bytes[..taken.len]);
                }
                (index, taken)
            }
        };
        let text = Text {
            bytes,
            skip: taken.skip,
            len: taken.len,
            start: taken.start,
            arena,
        };
        let lines = spare.lines_hint(text.len);
        (index, Batch::over(text, lines), taken.eof)
    }

    /// The handoff of block `index`, once the thread that folds the block before hands it
    /// over: polled for a while (spinning on a core of its own), then waited for.
    fn wait(&self, index: usize) -> Handoff<P> {
        let (_, rx) = self.slot(index);
        if self.spin {
            let since = Instant::now();
            while since.elapsed() < SPIN {
                for _ in 0..64 {
                    if let Ok(handoff) = rx.try_recv() {
                        return handoff;
                    }
                    std::hint::spin_loop();
                }
            }
        }
        // Every thread holds a sender: the channel never closes while one waits.
        rx.recv().unwrap_or(Handoff::Over)
    }

    /// Step aside for `away`, or until the pass is over; false if it is.
    fn away(&self, away: Duration) -> bool {
        let (done, cv) = &self.done;
        let done = done.lock().unwrap_or_else(PoisonError::into_inner);
        let (done, _) = cv
            .wait_timeout_while(done, away, |done| !*done)
            .unwrap_or_else(PoisonError::into_inner);
        !*done
    }
}

impl<R: BufRead, O: Observer> Threads<'_, '_, R, Pass<O, Vec<Finding>>> {
    /// One thread: take, parse and fold blocks until the pass is over (`first`: a block
    /// already taken). `on_turn` runs after each fold, with the turn. A helping thread (not
    /// the one that hands findings to the sink) steps aside while the turn is slow to come
    /// ([`Contention`]). Returns the turn if the input ended in a block this thread folded.
    fn run(
        &self,
        first: Option<(usize, Batch, bool)>,
        helping: bool,
        mut on_turn: impl FnMut(&mut Turn<Pass<O, Vec<Finding>>>),
    ) -> Option<Turn<Pass<O, Vec<Finding>>>> {
        let _alarm = StopOnPanic(self);
        let mut spare = Spare::default();
        let mut contention = Contention::new(self.step_aside_every);
        // How long to step aside once the block parsed ahead is folded.
        let mut leaving = None;
        // The next block, taken and partly parsed while waiting for a turn.
        let mut ahead = first;
        loop {
            if ahead.is_none()
                && let Some(away) = leaving.take()
            {
                // Nothing taken and not folded: the other threads take every block meanwhile.
                if !self.away(away) {
                    return None;
                }
                contention.restart();
            }
            let (index, mut batch, eof) = match ahead.take() {
                Some(next) => next,
                None => self.take(&mut spare),
            };
            batch.parse(&self.how, || false);
            // While the turn is another thread's, parse the next chunk, up to the end of the
            // line at which the turn comes (positional reads only: from the shared reader the
            // next block would be read under the lock the thread whose turn it is waits for).
            let turn_came = || !self.slot(index).1.is_empty();
            if !eof && leaving.is_none() && matches!(self.source, Source::Chunks(_)) && !turn_came()
            {
                let (next, mut parsing, next_eof) = self.take(&mut spare);
                parsing.parse(&self.how, turn_came);
                ahead = Some((next, parsing, next_eof));
            }
            let waiting = Instant::now();
            let mut turn = match self.wait(index) {
                Handoff::Turn(turn) => turn,
                Handoff::Over => return None,
            };
            if helping {
                contention.folded(waiting.elapsed());
                if leaving.is_none() {
                    leaving = contention.step_aside();
                }
            }
            // Fold the block, parsing the rest of it in steps if it holds many lines.
            let first_no = turn.line_no;
            let mut torn = None;
            loop {
                torn = batch.fold(&mut turn.pass, first_no).or(torn);
                if batch.parsed_all() {
                    break;
                }
                batch.parse(&self.how, || false);
            }
            turn.line_no += batch.with_dependent(|_, rows| rows.no);
            turn.torn = torn.or(turn.torn.take());
            // A chunk read at positions may end before one an earlier chunk read on into (when
            // the file grew between the two reads).
            let (start, len) = batch.with_dependent(|text, _| (text.start, text.len));
            turn.end = turn.end.max(start + len as u64);
            turn.folded = index + 1;
            on_turn(&mut turn);
            spare.recycle(batch, self.block_size);
            if eof {
                // The input ended here: this thread leaves with the turn, the others stop.
                self.over();
                return Some(turn);
            }
            // The slot is empty unless the pass is over (a thread panicked).
            if self
                .slot(index + 1)
                .0
                .try_send(Handoff::Turn(turn))
                .is_err()
            {
                return None;
            }
        }
    }
}

/// The rest of the input after the header, through `pass`, on `threads` threads, in blocks
/// of `block_size` bytes (0: the default); the pass back, and the torn final line if any. A
/// read error ends the pass after the whole lines read before it, like the
/// one-line-at-a-time pass.
pub(super) fn run<R: BufRead + Send, O: Observer, S: Sink>(
    lines: &mut LineReader<R>,
    pass: Pass<O, S>,
    block_size: usize,
    threads: usize,
    positional: Option<&Positional>,
    step_aside_every: usize,
    deferred: Option<&dyn Deferred>,
) -> (Pass<O, S>, io::Result<Option<TornTail>>) {
    let block_size = match (block_size, positional) {
        (0, Some(_)) => CHUNK,
        (0, None) => READER_BLOCK,
        (n, _) => n,
    };
    let threads = threads.max(2);
    let dialect = pass.ctx.dialect;
    let shape = pass.ctx.shape;
    let full_lines = &pass.ctx.full_lines.clone();
    // A copy the parsing threads share while the pass goes round (a few dozen entries).
    let vocab = &pass.ctx.vocab.clone();
    let first_no = lines.next_line_no();
    let base = lines.offset();
    let chunks = positional.map(|p| Chunks::new(&*p.file, base, block_size as u64));
    let progress = positional.and_then(|p| p.progress.as_deref());
    let reading = Mutex::new(Reading {
        lines: &mut *lines,
        next: 0,
        eof: false,
        failed: None,
    });
    // The findings wait in a buffer while the pass goes round; this thread hands them to the
    // sink whenever the turn is here.
    let (relayed, mut sink) = pass.with_sink(Vec::<Finding>::new());
    let shared = Threads {
        source: match &chunks {
            Some(chunks) => Source::Chunks(chunks),
            None => Source::Reader(&reading),
        },
        next: std::sync::atomic::AtomicUsize::new(0),
        // Each thread holds at most two blocks that are not folded yet.
        slots: (0..4 * threads).map(|_| bounded(1)).collect(),
        block_size,
        how: Parse {
            dialect,
            vocab,
            shape,
            full_lines: full_lines.as_ref(),
        },
        spin: threads <= thread::available_parallelism().map_or(1, |n| n.get()),
        done: (Mutex::new(false), Condvar::new()),
        step_aside_every,
        deferred: deferred.filter(|_| chunks.is_none()),
    };
    if let Some(deferred) = shared.deferred {
        deferred.arm();
    }
    let ok = shared
        .slot(0)
        .0
        .try_send(Handoff::Turn(Turn {
            pass: relayed,
            line_no: first_no,
            torn: None,
            end: base,
            folded: 0,
        }))
        .is_ok();
    debug_assert!(ok, "an empty slot takes the turn");
    let mut on_turn = |turn: &mut Turn<Pass<O, Vec<Finding>>>| {
        for f in turn.pass.out.inner.drain(..) {
            sink.push(f);
        }
        if let Some(progress) = progress {
            progress(turn.end);
        }
    };
    // Block 0 first: input that fits in one block needs no other thread.
    let first = shared.take(&mut Spare::default());
    let left = if first.2 {
        shared.run(Some(first), false, &mut on_turn)
    } else {
        thread::scope(|scope| {
            let others: Vec<_> = (1..threads)
                .map(|_| crate::log::limits::spawn_scoped(scope, || shared.run(None, true, |_| {})))
                .collect();
            let mut left = shared.run(Some(first), false, &mut on_turn);
            // Exactly one thread leaves with the turn: the one whose block ended the input.
            for other in others {
                match other.join() {
                    Ok(Some(turn)) => left = Some(turn),
                    Ok(None) => {}
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            left
        })
    };
    let Some(Turn {
        pass,
        torn,
        end,
        folded,
        ..
    }) = left
    else {
        unreachable!("the pass is over only when the input ends or a thread panics");
    };
    let (mut pass, rest) = pass.with_sink(sink);
    // Counted when they were pushed.
    for f in rest {
        pass.out.inner.push(f);
    }
    drop(shared);
    let reading = reading
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let failed = match chunks {
        Some(chunks) => {
            reading.lines.read_past(end);
            // A failed read of a chunk the fold never reached (past the end) does not count.
            chunks.failure_before(folded)
        }
        None => reading.failed,
    };
    let torn = match failed {
        Some(e) => Err(e),
        None => Ok(torn),
    };
    (pass, torn)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block's lines as the fold sees them: position, length and row.
    fn described(batch: &mut Batch) -> Vec<String> {
        batch.with_dependent(|_, rows| {
            rows.lines
                .iter()
                .map(|l| {
                    format!(
                        "{:?} {} {:?}",
                        l.pos,
                        l.raw.len(),
                        l.parsed.as_ref().map(|p| (p.utf8, &p.row))
                    )
                })
                .collect()
        })
    }

    /// A batch with room for one row: the rest are made room for as they come.
    fn batch_of(text: &[u8], len: usize) -> Batch {
        let text = Text {
            bytes: text.to_vec(),
            skip: 0,
            len,
            start: 100,
            arena: Arena::default(),
        };
        Batch::over(text, 1)
    }

    /// Runs `f` with the whole-tree parse of a format-3 log, the one both block tests use.
    fn with_format3_parse(f: impl FnOnce(&Parse<'_>)) {
        let dialect = Dialect::for_version(3).expect("format 3");
        let vocab = Vocabulary::new(dialect, &Default::default());
        f(&Parse {
            dialect,
            vocab: &vocab,
            shape: Shape::Full,
            full_lines: None,
        });
    }

    #[test]
    fn a_block_parsed_in_steps_is_the_block_parsed_at_once() {
        let text = b"{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1}}\n\
            not json\n\
            \n\
            \xff\xfe\n\
            {\"type\":\"user/message\",\"seq\":1,\"time\":2,\"data\":{\"a\":\"b\\nc\"}}\n\
            torn";
        with_format3_parse(|how| {
            for len in [0, 10, text.len() - 4, text.len()] {
                let mut whole = batch_of(text, len);
                assert!(whole.parse(how, || false));
                // Stopped after every line, then resumed.
                let mut stepped = batch_of(text, len);
                let mut steps = 0;
                while !stepped.parse(how, || true) {
                    steps += 1;
                    assert!(steps <= len, "each step parses a line");
                }
                assert_eq!(
                    described(&mut stepped),
                    described(&mut whole),
                    "{len} bytes"
                );
            }
            // The lines and the stops: one step per line, the torn piece included.
            let mut stepped = batch_of(text, text.len());
            let mut steps = 1;
            while !stepped.parse(how, || true) {
                steps += 1;
            }
            assert_eq!(steps, 6);
        });
    }

    #[test]
    fn a_block_of_many_short_lines_holds_a_bounded_number_of_rows_at_once() {
        with_format3_parse(|how| {
            let text = vec![b'\n'; 3 * ROWS_PER_STEP + 5];
            let mut batch = batch_of(&text, text.len());
            let mut held = Vec::new();
            loop {
                let done = batch.parse(how, || false);
                held.push(batch.held());
                batch.with_dependent_mut(|_, rows| rows.lines.clear());
                if done {
                    break;
                }
            }
            assert_eq!(held, [ROWS_PER_STEP, ROWS_PER_STEP, ROWS_PER_STEP, 5]);
            assert_eq!(batch.with_dependent(|_, rows| rows.no), text.len() as u64);
        });
    }
}
