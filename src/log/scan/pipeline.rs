//! The pass on several threads. The threads take turns reading the next block of whole lines
//! from the shared reader (numbering the blocks in file order as they take them), or, for a
//! plain log in a regular file, each reads the next chunk of it at its position ([`Chunks`]);
//! they split it into lines, check their UTF-8 and parse their rows; the blocks are folded in
//! block order, so lines, offsets, rows and their order are exactly those of the
//! one-line-at-a-time pass: the fold ([`Pass::line`]) is the same code, run on one block at a
//! time, in file order.
//!
//! Two ways to share the fold:
//!
//! - [`relay`], when the observer is inert (`validate`): each thread folds the blocks it
//!   parsed, when their turn comes; the pass (its state, and a buffer for the findings, which
//!   this thread hands to the sink) moves from thread to thread with the turn. Each block's
//!   trees are read by the core that built them moments before: folding them on another core
//!   had cost ~20 % more CPU time in all than one thread spends. A thread waiting for its
//!   turn parses its next chunk of the file meanwhile, up to the line at which the turn
//!   comes, then spins (up to [`SPIN`]); at most two blocks per thread are out at once.
//! - [`gather`], for an observer that must see each event (the observer stays on this
//!   thread): this thread folds every block, and parses one itself whenever the next block to
//!   fold is not ready instead of waiting; workers parse the rest. On a 2-vCPU VM that is one
//!   worker and this thread, each busy, rather than two workers and a folding thread taking
//!   turns on two cores. At most [`JOBS_PER_WORKER`] blocks per worker and [`OWN_BLOCKS`] of
//!   this thread's are out at once.
//!
//! Either way memory stays bounded by a few blocks and their trees (and the longest line),
//! whatever the size of the log. A folded batch is freed by the thread that parsed it (by the
//! allocator that made it), and its buffer is that thread's next block.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufRead};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, mpsc};
use std::thread;

use super::{Observer, Pass, Positional, TornTail, line_text};
use crate::log::dialect::Dialect;
use crate::log::finding::Pos;
use crate::log::finding::{Finding, Sink};
use crate::log::input::LineReader;
use crate::log::json::Arena;
use crate::log::rows::{self, Row};
use crate::log::vocab::Vocabulary;

/// Bytes read per block by [`gather`] (whole lines: a block ends at a `\n`).
const BLOCK: usize = 128 * 1024;

/// Bytes per block in [`relay`] from the shared reader (a zstd log, a pipe): twice as many
/// turns of the fold at 128 KiB (and more waits for them, as the time to read and parse a
/// block varies) cost 2-7 % of the time on 1 GiB logs of formats 3 and 0 (paired runs), and
/// 512 KiB gained little more for 15-16 MB of peak RSS (13 MB at 256 KiB).
const RELAY_BLOCK: usize = 256 * 1024;

/// Bytes per chunk in [`relay`] from a regular file, read at positions. Parsing ahead while
/// waiting for the turn (see [`Legs::run`]), the waits are spent parsing: 128, 160 and 192 KiB
/// took the same time (eight paired rounds on format 3, 1.095-1.125 s median; format 0 the
/// same), 128 KiB with the least memory (14.3 MB of peak RSS on format 3, 15.1 MB at 192 KiB,
/// 16 MB at 256 KiB).
const CHUNK: usize = 128 * 1024;

/// Blocks each worker is asked to read ahead: with one worker (two cores), three rather than
/// two halved the thread switches (1,400-1,600 per GiB instead of 2,800-3,100) and saved ~5 %
/// of the time on format 3, for 0.7 MB of peak RSS.
const JOBS_PER_WORKER: usize = 3;

/// Blocks the folding thread parses itself while it waits for the next one to fold (the first
/// block is one). It parses one block at a time: more only raised peak RSS.
const OWN_BLOCKS: usize = 1;

/// An arena kept for the next block is at most this many blocks in size (a block's trees
/// take about 2.7 times its size in format 3, 5-8 times in format 0, whose packed rows hold
/// many short strings; an arena that grew around a long line, with its unescaped strings, is
/// dropped rather than kept). At 4, a format 0 arena (1-1.5 MB for a block of 192 KiB) was
/// never kept: each block took fresh memory, 16.5 MB of peak RSS instead of 10 MB.
const ARENA_KEPT: usize = 8;

/// One line of a block.
struct Parsed<'a> {
    pos: Pos,
    /// The line's length without its `\n`.
    len: usize,
    /// The line's bytes without its `\n` (kept by the pass after a bad row).
    text: &'a [u8],
    /// `None`: the final piece of the input, without a `\n` (torn, never parsed).
    row: Option<(bool, Row<'a>)>,
}

/// A block of whole lines with their rows. The rows borrow from `block` (and from `lossy`,
/// the U+FFFD-decoded copies of lines that are not UTF-8) and from `arena`, which holds their
/// JSON lists and unescaped strings; they are stored as `'static` and only handed out by
/// [`Batch::rows`], tied to a borrow of the batch.
struct Batch {
    // Declared first, so dropped before the text and the arena they borrow.
    rows: Vec<Parsed<'static>>,
    /// Only held: rows borrow from these.
    _lossy: Vec<String>,
    /// Boxed: escaped strings read during the fold are unescaped into it through references
    /// the rows hold, so it must not move.
    arena: Box<Arena>,
    block: Vec<u8>,
}

// SAFETY: a batch is Send but for one thing: its rows hold shared references into its own
// arena (`&[Json]`, and to the arena itself, for strings unescaped on demand), which are Send
// only for `Sync` targets, and neither the arena's `Bump` nor a lazily unescaped string (a
// `OnceCell`) is `Sync` (the arena's scratch stacks, empty between lines, hold such strings
// too). Those references never leave the batch (see [`Parsing`], which makes them) and the batch
// only ever moves whole from one thread to another, so one thread at a time can reach what
// they point to: nothing is shared.
unsafe impl Send for Batch {}

impl Batch {
    /// Split and parse `block[skip..skip + len]`, whose first byte is at offset `start`,
    /// into `arena` (empty: a new one or one [`Arena::reset`]).
    fn parse(
        spare: Spare,
        skip: usize,
        len: usize,
        start: u64,
        dialect: &Dialect,
        vocab: &Vocabulary,
    ) -> Batch {
        let mut parsing = Parsing::new(spare, skip, len, start);
        parsing.run(dialect, vocab, || false);
        parsing.batch
    }

    /// The rows, borrowing from the batch.
    fn rows(&mut self) -> Vec<Parsed<'_>> {
        let rows = std::mem::take(&mut self.rows);
        // SAFETY: only the lifetime changes, to that of the borrow of the batch, which
        // outlives the rows (see [`Parsing`]).
        unsafe { std::mem::transmute::<Vec<Parsed<'static>>, Vec<Parsed<'_>>>(rows) }
    }
}

/// A block being split and parsed into a [`Batch`], a line at a time: a thread waiting for
/// its turn parses its next block meanwhile, and stops at the end of a line when the turn
/// comes ([`Parsing::run`]).
///
/// The rows borrow from the batch's buffer, its `lossy` lines and its arena, and are stored
/// as `'static`. SAFETY (for every such borrow made here): the bytes live in the buffer's
/// heap allocation, which moves with the batch but is never written, reallocated or freed
/// while the rows exist: the batch owns both, drops the rows first, and lends them out only
/// for the duration of a borrow of itself ([`Batch::rows`]). Moving a `Vec` (or a `String`)
/// does not move its buffer. Likewise for the arena: it stays in its box, its chunks stay
/// where they are, and it is reset (or dropped) only after the rows are gone.
struct Parsing {
    batch: Batch,
    /// The block's text (in the batch's buffer).
    text: &'static [u8],
    /// The whole text, if it is UTF-8.
    whole: Option<&'static str>,
    /// The offset of the text's first byte.
    start: u64,
    /// Where the next line starts in the text, and its number in the block.
    at: usize,
    no: u64,
}

impl Parsing {
    /// The text `spare.block[skip..skip + len]`, whose first byte is at offset `start`, to be
    /// parsed into `spare.arena` (empty: a new one or one [`Arena::reset`]).
    fn new(spare: Spare, skip: usize, len: usize, start: u64) -> Parsing {
        let Spare { block, arena, rows } = spare;
        debug_assert!(rows.is_empty());
        let mut rows = rows;
        assert!(
            skip + len <= block.len(),
            "a block's text lies in its buffer"
        );
        // SAFETY: see the type's documentation.
        let text: &'static [u8] =
            unsafe { std::slice::from_raw_parts(block.as_ptr().add(skip), len) };
        // Sized for the block's lines up front (a slot per 256 bytes; log lines are longer on
        // average): growing from empty copied the rows several times into fresh pages.
        rows.reserve(len / 256 + 16);
        // The whole block checked at once (a line at a time, the check's set-up cost more than
        // the check): a block of whole lines is UTF-8 exactly when each of its lines is, since
        // no multi-byte sequence spans a `\n`. Only a block that is not is checked line by line.
        let whole = simdutf8::basic::from_utf8(text).ok();
        Parsing {
            batch: Batch {
                rows,
                _lossy: Vec::new(),
                arena,
                block,
            },
            text,
            whole,
            start,
            at: 0,
            no: 0,
        }
    }

    /// Parse lines until the text ends (`true`) or, after a line, `stop` says so.
    fn run(&mut self, dialect: &Dialect, vocab: &Vocabulary, stop: impl Fn() -> bool) -> bool {
        let text = self.text;
        // SAFETY: see the type's documentation.
        let arena: &'static Arena = unsafe { &*std::ptr::from_ref::<Arena>(&self.batch.arena) };
        let out = &mut self.batch.rows;
        while self.at < text.len() {
            let at = self.at;
            let pos = Pos {
                line: self.no,
                byte: self.start + at as u64,
            };
            self.no += 1;
            let Some(n) = memchr::memchr(b'\n', &text[at..]) else {
                out.push(Parsed {
                    pos,
                    len: text.len() - at,
                    text: &text[at..],
                    row: None,
                });
                self.at = text.len();
                break;
            };
            let (cow, utf8_ok) = match self.whole.and_then(|w| w.get(at..at + n)) {
                Some(line) => (Cow::Borrowed(line), true),
                None => line_text(&text[at..at + n]),
            };
            let line: &'static str = match cow {
                Cow::Borrowed(s) => s,
                Cow::Owned(s) => {
                    let ptr: *const str = s.as_str();
                    self.batch._lossy.push(s);
                    // SAFETY: see the type's documentation.
                    unsafe { &*ptr }
                }
            };
            // Decoded straight into its slot (a row is ~250 bytes: each move cost a copy), room
            // for which is made first (`Vec::push` decoded it, then copied it).
            if out.len() == out.capacity() {
                out.reserve(1);
            }
            out.spare_capacity_mut()[0].write(Parsed {
                pos,
                len: n,
                text: &text[at..at + n],
                row: Some((utf8_ok, rows::decode_in(line, pos, dialect, Some(arena)))),
            });
            // SAFETY: the first unused slot was just written.
            unsafe { out.set_len(out.len() + 1) };
            // Work the fold would do, done here: each event's type class (not for v0, whose
            // legacy normalization may still rename the type).
            if !dialect.legacy_v0
                && let Some(Parsed {
                    row: Some((_, Row::Events(cands, _))),
                    ..
                }) = out.last_mut()
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
        self.at >= text.len()
    }
}

/// Fold a batch's lines in order, the first being line `first_no`; the torn final piece, if
/// the batch ends with one. The emptied row vector stays in the batch, for the next block.
fn fold<O: Observer, S: Sink>(
    pass: &mut Pass<O, S>,
    batch: &mut Batch,
    first_no: u64,
) -> Option<TornTail> {
    let mut torn = None;
    let mut rows = batch.rows();
    // Folded where they lie (a row is ~250 bytes: moving each out cost a copy).
    for p in rows.iter_mut() {
        p.pos.line += first_no;
        match &mut p.row {
            Some((_, Row::Events(cands, _))) => {
                for c in cands {
                    match &mut c.event {
                        Ok(e) => e.pos.line += first_no,
                        Err(bad) => bad.pos.line += first_no,
                    }
                }
            }
            Some((_, Row::Packed(packed, _))) => packed.pos.line += first_no,
            _ => {}
        }
        let Some((utf8_ok, row)) = &mut p.row else {
            torn = Some(TornTail {
                line: p.pos.line,
                byte: p.pos.byte,
                len: p.len as u64,
            });
            break;
        };
        // Without a stop seq the pass never ends early.
        pass.line(p.pos, p.pos.byte + p.len as u64 + 1, p.text, *utf8_ok, row);
    }
    rows.clear();
    // SAFETY: the vector is empty, so only the lifetime of the batch's borrow changes.
    batch.rows = unsafe { std::mem::transmute::<Vec<Parsed<'_>>, Vec<Parsed<'static>>>(rows) };
    torn
}

/// A buffer, an arena and a row vector for a block, all empty.
#[derive(Default)]
struct Spare {
    block: Vec<u8>,
    arena: Box<Arena>,
    rows: Vec<Parsed<'static>>,
}

impl Spare {
    /// A new arena and row vector for `block`.
    fn with(block: Vec<u8>) -> Spare {
        Spare {
            block,
            ..Spare::default()
        }
    }
}

/// Free a folded batch (its trees go first, then its arena is reset) and keep its buffer,
/// arena and row vector in `spare` for a later block.
fn recycle(batch: Batch, spare: &mut Vec<Spare>, block_size: usize) {
    let Batch {
        mut rows,
        _lossy,
        mut arena,
        block,
    } = batch;
    // What borrows from the arena goes first.
    rows.clear();
    arena.reset();
    // One block is read per batch freed, so two spare buffers are plenty; one that grew
    // around a long line is not kept, nor an arena that did, nor a row vector that grew for
    // a block of very short lines. (Keeping up to six of up to four blocks each had cost
    // ~0.5 MB of peak RSS, and could cost several.)
    if block.len() <= 2 * block_size
        && arena.allocated_bytes() <= ARENA_KEPT * block_size
        && rows.capacity() <= 4 * (block_size / 256 + 16)
        && spare.len() < 2
    {
        // SAFETY: the vector is empty: only the lifetime it is declared with changes.
        let rows = unsafe { std::mem::transmute::<Vec<Parsed<'_>>, Vec<Parsed<'static>>>(rows) };
        spare.push(Spare { block, arena, rows });
    }
}

/// What a worker is asked to do.
enum Job {
    /// Read the next block from the shared reader, then parse it.
    Read,
    /// Free a folded batch (its trees were allocated on this worker) and keep its buffer
    /// for the next read.
    Free(Batch),
}

/// What a worker sends back.
enum Done {
    /// Block number `index` (in file order), parsed by `worker`; `eof`: nothing follows it.
    Parsed {
        index: usize,
        worker: usize,
        batch: Batch,
        eof: bool,
    },
    /// A worker is unwinding from a panic: stop waiting (the scope re-raises the panic).
    Panicked,
}

/// Sends [`Done::Panicked`] if the worker holding it unwinds.
struct Alarm<'a>(&'a mpsc::Sender<Done>);

impl Drop for Alarm<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            let _ = self.0.send(Done::Panicked);
        }
    }
}

/// The input, shared by the workers: each takes the next block (and its number) under the
/// lock, so blocks are numbered in file order while the copying out of the kernel is spread
/// over the workers instead of weighing on the folding thread.
struct Reading<'l, R> {
    lines: &'l mut LineReader<R>,
    /// The number of the next block.
    next: usize,
    eof: bool,
    failed: Option<io::Error>,
}

impl<R: BufRead> Reading<'_, R> {
    /// The next block into `buf`: its number, its offset, its length, and whether the input
    /// ended with it (every later block is empty).
    fn next_block(&mut self, block_size: usize, buf: &mut Vec<u8>) -> (usize, u64, usize, bool) {
        let index = self.next;
        self.next += 1;
        if self.eof {
            return (index, self.lines.offset(), 0, true);
        }
        let start = self.lines.offset();
        let got = self.lines.read_block(block_size, buf);
        if let Some(e) = got.error {
            self.failed = Some(e);
        }
        self.eof = got.eof;
        (index, start, got.len, got.eof)
    }
}

/// The rest of the input after the header, through `pass`, on `threads` threads, in blocks
/// of `block_size` bytes (0: the default); the pass back, and the torn final line if any. A
/// read error ends the pass after the whole lines read before it, like the
/// one-line-at-a-time pass.
pub(super) fn run<R: BufRead + Send, O: Observer, S: Sink>(
    lines: &mut LineReader<R>,
    mut pass: Pass<O, S>,
    block_size: usize,
    threads: usize,
    positional: Option<&Positional>,
) -> (Pass<O, S>, io::Result<Option<TornTail>>) {
    let or = |default| if block_size == 0 { default } else { block_size };
    if pass.ctx.observer.inert() {
        let default = match positional {
            Some(_) => CHUNK,
            None => RELAY_BLOCK,
        };
        relay(lines, pass, or(default), threads, positional)
    } else {
        let torn = gather(lines, &mut pass, or(BLOCK), threads);
        (pass, torn)
    }
}

/// The pipeline for an observer that must see each event: parsed by `threads` threads, this
/// one (which folds, and parses a block whenever it would otherwise wait) and `threads - 1`
/// workers, and folded here.
fn gather<R: BufRead + Send, O: Observer, S: Sink>(
    lines: &mut LineReader<R>,
    pass: &mut Pass<O, S>,
    block_size: usize,
    threads: usize,
) -> io::Result<Option<TornTail>> {
    let dialect = pass.ctx.dialect;
    // A copy the parsing threads share while the fold holds the pass (a few dozen entries).
    let vocab = &pass.ctx.vocab.clone();
    let workers = threads.max(2) - 1;
    let first_no = lines.next_line_no();
    let mut reading = Reading {
        lines,
        next: 0,
        eof: false,
        failed: None,
    };
    let mut first = Vec::new();
    let (_, start, len, eof) = reading.next_block(block_size, &mut first);
    let torn = if len == 0 {
        None
    } else if eof {
        // Input that fits one block needs no other thread.
        fold(
            pass,
            &mut Batch::parse(Spare::with(first), 0, len, start, dialect, vocab),
            first_no,
        )
    } else {
        let reading = Mutex::new(&mut reading);
        // The next block, read and parsed on this thread.
        let read_here = |spare: &mut Vec<Spare>| {
            let mut into = spare.pop().unwrap_or_default();
            let (index, start, len, eof) = lock(&reading).next_block(block_size, &mut into.block);
            (
                index,
                Batch::parse(into, 0, len, start, dialect, vocab),
                eof,
            )
        };
        thread::scope(|scope| {
            let (done_tx, done) = mpsc::channel::<Done>();
            let mut to_worker = Vec::with_capacity(workers);
            for worker in 0..workers {
                let (job_tx, jobs) = mpsc::channel::<Job>();
                to_worker.push(job_tx);
                let done_tx = done_tx.clone();
                let reading = &reading;
                scope.spawn(move || {
                    let _alarm = Alarm(&done_tx);
                    // Buffers and arenas of this worker's freed batches, used again.
                    let mut spare: Vec<Spare> = Vec::new();
                    for job in jobs {
                        let mut into = match job {
                            Job::Read => spare.pop().unwrap_or_default(),
                            Job::Free(batch) => {
                                recycle(batch, &mut spare, block_size);
                                continue;
                            }
                        };
                        let (index, start, len, eof) =
                            lock(reading).next_block(block_size, &mut into.block);
                        let batch = Batch::parse(into, 0, len, start, dialect, vocab);
                        let done = Done::Parsed {
                            index,
                            worker,
                            batch,
                            eof,
                        };
                        if done_tx.send(done).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(done_tx);
            let ask = |worker: usize, job: Job| {
                // A closed channel means the worker panicked: the scope re-raises it.
                to_worker[worker].send(job).is_ok()
            };
            // Parsed blocks that arrived before the one to fold next: (parsed by, batch, eof).
            let mut early: std::collections::BTreeMap<usize, (Option<usize>, Batch, bool)> =
                Default::default();
            // Block 0 is read: this thread parses it while the workers read the next ones.
            let mut ok = (0..JOBS_PER_WORKER * workers).all(|k| ask(k % workers, Job::Read));
            let mut spare = Vec::new();
            early.insert(
                0,
                (
                    None,
                    Batch::parse(Spare::with(first), 0, len, start, dialect, vocab),
                    false,
                ),
            );
            // Blocks this thread parsed that are not folded yet (at most [`OWN_BLOCKS`]).
            let mut own = 1;
            let (mut next, mut next_no) = (0, first_no);
            let mut torn = None;
            while ok {
                let (parser, mut batch, eof) = match early.remove(&next) {
                    Some(parsed) => parsed,
                    None => {
                        // The next block is still being parsed: take what has arrived, or
                        // parse a block here rather than wait (waiting and waking cost as
                        // much as parsing on a small VM), or wait.
                        let arrived = match done.try_recv() {
                            Err(mpsc::TryRecvError::Empty) if own < OWN_BLOCKS => {
                                let (index, batch, eof) = read_here(&mut spare);
                                early.insert(index, (None, batch, eof));
                                own += 1;
                                continue;
                            }
                            Err(mpsc::TryRecvError::Empty) => done.recv().ok(),
                            Ok(done) => Some(done),
                            Err(mpsc::TryRecvError::Disconnected) => None,
                        };
                        match arrived {
                            Some(Done::Parsed {
                                index,
                                worker,
                                batch,
                                eof,
                            }) => {
                                early.insert(index, (Some(worker), batch, eof));
                                continue;
                            }
                            Some(Done::Panicked) | None => break,
                        }
                    }
                };
                next += 1;
                // One row per line; numbered from 0 by its parser, which cannot know how many
                // lines came before.
                let batch_no = next_no;
                next_no += batch.rows.len() as u64;
                torn = fold(pass, &mut batch, batch_no);
                match parser {
                    None => {
                        own -= 1;
                        recycle(batch, &mut spare, block_size);
                    }
                    Some(worker) => {
                        ok = ask(worker, Job::Free(batch));
                        if !eof {
                            ok = ok && ask(worker, Job::Read);
                        }
                    }
                }
                if eof {
                    break;
                }
            }
            torn
        })
    };
    match reading.failed {
        Some(e) => Err(e),
        None => Ok(torn),
    }
}

/// The fold's turn, handed from thread to thread in block order by [`relay`].
struct Turn<P> {
    pass: P,
    /// The block to fold next.
    next: usize,
    /// The number of its first line.
    line_no: u64,
    torn: Option<TornTail>,
    /// The offset just past the blocks folded.
    end: u64,
    /// The last block is folded, or a thread panicked: every thread stops.
    over: bool,
    /// Threads asleep until their turn.
    asleep: usize,
}

/// How long a thread whose block is parsed spins for its turn before it sleeps. Most waits
/// are for the thread before to finish reading and parsing its block, 0.1-1 ms; a thread
/// that slept then started its fold only once woken, and on a VM that is slow. Spinning up
/// to 1 ms instead of 0.1 ms: ~10 sleeps per 1,000 blocks instead of ~140, and 3 % less time
/// on a 1 GiB format 3 log (two sets of paired runs), for ~0.1 s more CPU time.
const SPIN: std::time::Duration = std::time::Duration::from_millis(1);

/// Wakes every thread waiting for its turn if the thread holding it unwinds, so none waits
/// for a block that will never be folded.
struct Stop<'t, P> {
    turn: &'t Mutex<Turn<P>>,
    bell: &'t Condvar,
}

impl<P> Drop for Stop<'_, P> {
    fn drop(&mut self) {
        if thread::panicking() {
            lock(self.turn).over = true;
            self.bell.notify_all();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The pipeline for an inert observer (validate): every thread reads a block, parses it, and
/// folds it itself when its turn comes, the pass moving from thread to thread in block order.
/// A block's trees are read by the core that just built them (folding them on another core
/// cost ~20 % more CPU time than one thread spends), and no thread only waits to fold.
/// Findings go to `sink` from this thread, in order, whenever it holds the turn. A plain log
/// in a regular file is read at positions ([`Chunks`]), each thread its own chunk at once.
fn relay<R: BufRead + Send, O: Observer, S: Sink>(
    lines: &mut LineReader<R>,
    pass: Pass<O, S>,
    block_size: usize,
    threads: usize,
    positional: Option<&Positional>,
) -> (Pass<O, S>, io::Result<Option<TornTail>>) {
    let dialect = pass.ctx.dialect;
    let vocab = &pass.ctx.vocab.clone();
    let first_no = lines.next_line_no();
    let chunks = positional.map(|p| Chunks {
        file: &*p.file,
        base: lines.offset(),
        size: block_size as u64,
        next: AtomicUsize::new(0),
        failed: Mutex::new(None),
    });
    let progress = positional.and_then(|p| p.progress.as_deref());
    let mut reading = Reading {
        lines,
        next: 0,
        eof: false,
        failed: None,
    };
    let source = match &chunks {
        Some(chunks) => Source::File(chunks),
        None => Source::Lines(Mutex::new(&mut reading)),
    };
    let mut first = Vec::new();
    let taken = source.next_block(block_size, &mut first);
    // The observer does nothing and the findings wait in a buffer: what the other threads
    // touch is the pass's own state.
    let (relayed, observer, mut sink) = pass.swap((), Vec::<Finding>::new());
    let turn = Mutex::new(Turn {
        pass: relayed,
        next: 0,
        line_no: first_no,
        torn: None,
        end: taken.start,
        over: false,
        asleep: 0,
    });
    let bell = Condvar::new();
    // The block whose turn it is, for threads spinning without the lock.
    let baton = AtomicUsize::new(0);
    if taken.eof {
        // Input that fits one block needs no other thread.
        let t = &mut *lock(&turn);
        let mut batch = Batch::parse(
            Spare::with(first),
            taken.skip,
            taken.len,
            taken.start,
            dialect,
            vocab,
        );
        t.torn = fold(&mut t.pass, &mut batch, first_no);
        t.end = taken.start + taken.len as u64;
        t.next = 1;
    } else {
        let legs = Legs {
            source,
            turn: &turn,
            bell: &bell,
            baton: &baton,
            // Spinning only while every thread has a core of its own.
            spin: threads <= thread::available_parallelism().map_or(1, |n| n.get()),
            block_size,
            dialect,
            vocab,
        };
        let first = (first, taken);
        thread::scope(|scope| {
            for _ in 1..threads.max(2) {
                scope.spawn(|| legs.run(None, |_, _| {}));
            }
            legs.run(Some(first), |pass, end| {
                for f in pass.out.inner.drain(..) {
                    sink.push(f);
                }
                if let Some(progress) = progress {
                    progress(end);
                }
            });
        });
    }
    let Turn {
        pass,
        torn,
        end,
        next,
        ..
    } = turn.into_inner().unwrap_or_else(PoisonError::into_inner);
    let (mut pass, (), rest) = pass.swap(observer, sink);
    // Counted when they were pushed.
    for f in rest {
        pass.out.inner.push(f);
    }
    let failed = match chunks {
        Some(chunks) => {
            reading.lines.read_past(end);
            // A failed read of a chunk the fold never reached (past the end) does not count.
            let failed = chunks
                .failed
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner);
            failed.filter(|(index, _)| *index < next).map(|(_, e)| e)
        }
        None => reading.failed,
    };
    let torn = match failed {
        Some(e) => Err(e),
        None => Ok(torn),
    };
    (pass, torn)
}

/// A block a thread of [`relay`] took: its number, the offset of its first byte, where its
/// text starts in the buffer and its length, and whether the input ended with it.
struct Taken {
    index: usize,
    start: u64,
    skip: usize,
    len: usize,
    eof: bool,
}

/// Where the threads of [`relay`] take their blocks.
enum Source<'r, 'l, R> {
    /// One after the other from the reader.
    Lines(Mutex<&'r mut Reading<'l, R>>),
    /// At positions in the file, each thread its own.
    File(&'r Chunks<'r>),
}

impl<R: BufRead> Source<'_, '_, R> {
    fn next_block(&self, block_size: usize, buf: &mut Vec<u8>) -> Taken {
        match self {
            Source::Lines(reading) => {
                let (index, start, len, eof) = lock(reading).next_block(block_size, buf);
                Taken {
                    index,
                    start,
                    skip: 0,
                    len,
                    eof,
                }
            }
            Source::File(chunks) => chunks.next_block(buf),
        }
    }
}

/// A regular file read in chunks at positions, by any thread, in any order: chunk `k` holds
/// the lines that start in `[base + k·size, base + (k+1)·size)`, read on to the end of the
/// last of them (a line starts at `base` and after each `\n`). So no thread waits while
/// another reads: on a VM whose page cache reads slowly, taking turns at one reader had kept
/// each of two threads waiting for a quarter of the pass.
struct Chunks<'f> {
    file: &'f dyn ReadAt,
    /// The offset of the first line after the header.
    base: u64,
    size: u64,
    /// The number of the next chunk to take.
    next: AtomicUsize,
    /// The first chunk (by number) whose read failed, with the error.
    failed: Mutex<Option<(usize, io::Error)>>,
}

/// What [`Chunks::read`] read: `buf[skip..skip + len]` holds the chunk's lines, and `buf`
/// starts at offset `at`; `eof`: the input ended in them (or failed: `error`).
struct ChunkRead {
    at: u64,
    skip: usize,
    len: usize,
    eof: bool,
    error: Option<io::Error>,
}

impl Chunks<'_> {
    /// The next chunk into `buf`. A read error ends the input in the chunk it happened in,
    /// after the whole lines read before it.
    fn next_block(&self, buf: &mut Vec<u8>) -> Taken {
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        let from = self.base + index as u64 * self.size;
        let read = self.read(from, buf);
        if let Some(e) = read.error {
            let mut failed = lock(&self.failed);
            if failed.as_ref().is_none_or(|(i, _)| index < *i) {
                *failed = Some((index, e));
            }
        }
        Taken {
            index,
            start: read.at + read.skip as u64,
            skip: read.skip,
            len: read.len,
            eof: read.eof,
        }
    }

    /// The chunk that starts at `from`.
    fn read(&self, from: u64, buf: &mut Vec<u8>) -> ChunkRead {
        // The byte before the chunk tells whether a line starts at its first byte.
        let at = if from == self.base { from } else { from - 1 };
        let want = (from + self.size - at) as usize;
        if buf.len() < want {
            buf.resize(want, 0);
        }
        let (mut got, mut error) = read_fully(self.file, &mut buf[..want], at);
        let first = if from == self.base {
            0
        } else {
            memchr::memchr(b'\n', &buf[..got]).map_or(got, |i| i + 1)
        };
        if first >= want.min(got) {
            // No line starts in the chunk: it lies inside one, or past the end.
            return ChunkRead {
                at,
                skip: first.min(got),
                len: 0,
                eof: got < want,
                error,
            };
        }
        if got == want {
            // The chunk's last line runs on to the first `\n` from the chunk's last byte: read
            // a page, then twice as much each time up to 64 KiB (most lines are short; a longer
            // read would only grow the buffer past the line).
            let mut search = want - 1;
            let mut more = 4096;
            let mut ended = false;
            loop {
                if let Some(i) = memchr::memchr(b'\n', &buf[search..got]) {
                    // The line ends before the end (or a failure, which a later chunk meets).
                    return ChunkRead {
                        at,
                        skip: first,
                        len: search + i + 1 - first,
                        eof: false,
                        error: None,
                    };
                }
                if ended {
                    break;
                }
                search = got;
                if buf.len() < got + more {
                    buf.resize(got + more, 0);
                }
                let (n, e) = read_fully(self.file, &mut buf[got..got + more], at + got as u64);
                got += n;
                error = e;
                ended = n < more;
                more = (more * 2).min(64 * 1024);
            }
        }
        // The input ended in the chunk or in the line that runs past it (a final piece without
        // `\n` is a torn line), or a read failed: then only the whole lines before it count.
        let len = match error {
            Some(_) => memchr::memrchr(b'\n', &buf[first..got]).map_or(0, |i| i + 1),
            None => got - first,
        };
        ChunkRead {
            at,
            skip: first,
            len,
            eof: true,
            error,
        }
    }
}

/// Reads at positions (a file; a stand-in in tests).
trait ReadAt: Sync {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

impl ReadAt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        read_at(self, buf, offset)
    }
}

/// Read `buf.len()` bytes at `offset`, or up to the end of the file or a read error: how many
/// were read, and the error.
fn read_fully(file: &dyn ReadAt, buf: &mut [u8], offset: u64) -> (usize, Option<io::Error>) {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

#[cfg(not(any(unix, windows)))]
fn read_at(_: &File, _: &mut [u8], _: u64) -> io::Result<usize> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "positional reads are not supported on this platform",
    ))
}

/// What the threads of [`relay`] share.
struct Legs<'r, 'l, R, P> {
    source: Source<'r, 'l, R>,
    turn: &'r Mutex<Turn<P>>,
    bell: &'r Condvar,
    baton: &'r AtomicUsize,
    spin: bool,
    block_size: usize,
    dialect: &'r Dialect,
    vocab: &'r Vocabulary,
}

impl<R: BufRead, O: Observer, S: Sink> Legs<'_, '_, R, Pass<O, S>> {
    /// One thread: read, parse and fold blocks until the input ends (`first`: block 0,
    /// already taken). `on_turn` runs after each fold, with the turn held and the offset
    /// the fold reached.
    fn run(
        &self,
        mut first: Option<(Vec<u8>, Taken)>,
        mut on_turn: impl FnMut(&mut Pass<O, S>, u64),
    ) {
        let _stop = Stop {
            turn: self.turn,
            bell: self.bell,
        };
        let mut spare = Vec::new();
        // The next block, taken and partly parsed while waiting for a turn.
        let mut ahead: Option<(Parsing, Taken)> = None;
        loop {
            let (mut parsing, taken) = match (first.take(), ahead.take()) {
                (Some((block, taken)), _) => {
                    let parsing =
                        Parsing::new(Spare::with(block), taken.skip, taken.len, taken.start);
                    (parsing, taken)
                }
                (None, Some(ahead)) => ahead,
                (None, None) => self.take(&mut spare),
            };
            parsing.run(self.dialect, self.vocab, || false);
            let mut batch = parsing.batch;
            let Taken {
                index,
                start,
                len,
                eof,
                ..
            } = taken;
            // While the turn is another thread's, parse the next block, up to the end of the
            // line at which the turn comes. (The waits had been ~7 % of the CPU time, the
            // thread before still reading or parsing; parsing ahead saved ~5 % of the time
            // on 1 GiB of format 3, for no more memory at 128 KiB blocks. Parsing a whole
            // block before looking at the turn again had made the fold the others waited
            // for start late: 8-16 % slower.) Only for chunks read at positions: from the
            // shared reader (a zstd log, a pipe), the next block would be read under its lock,
            // which the thread whose turn it is then waits for (zstd: ~6 % slower, +1.4 MB).
            let turn_came = || self.baton.load(Ordering::Acquire) == index;
            if !eof && matches!(self.source, Source::File(_)) && !turn_came() {
                let (mut next, taken) = self.take(&mut spare);
                next.run(self.dialect, self.vocab, turn_came);
                ahead = Some((next, taken));
            }
            if self.spin && self.baton.load(Ordering::Acquire) != index {
                let since = std::time::Instant::now();
                'spin: while since.elapsed() < SPIN {
                    for _ in 0..64 {
                        if self.baton.load(Ordering::Acquire) == index {
                            break 'spin;
                        }
                        std::hint::spin_loop();
                    }
                }
            }
            let mut t = lock(self.turn);
            while t.next != index && !t.over {
                t.asleep += 1;
                t = self.bell.wait(t).unwrap_or_else(PoisonError::into_inner);
                t.asleep -= 1;
            }
            if t.over {
                // The input ended in an earlier block (this one is empty), or a thread
                // panicked.
                break;
            }
            let no = t.line_no;
            t.line_no += batch.rows.len() as u64;
            if let Some(torn) = fold(&mut t.pass, &mut batch, no) {
                t.torn = Some(torn);
            }
            // A chunk read at positions may end before one an earlier chunk read on into
            // (when the file grew between the two reads).
            t.end = t.end.max(start + len as u64);
            let end = t.end;
            on_turn(&mut t.pass, end);
            t.next += 1;
            t.over = eof;
            self.baton.store(t.next, Ordering::Release);
            let asleep = t.asleep > 0;
            drop(t);
            if asleep {
                self.bell.notify_all();
            }
            recycle(batch, &mut spare, self.block_size);
            if eof {
                break;
            }
        }
    }

    /// The next block, to be parsed.
    fn take(&self, spare: &mut Vec<Spare>) -> (Parsing, Taken) {
        let mut into = spare.pop().unwrap_or_default();
        let taken = self.source.next_block(self.block_size, &mut into.block);
        let parsing = Parsing::new(into, taken.skip, taken.len, taken.start);
        (parsing, taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes read at positions a few at a time, failing from `fail_at` on.
    struct Stand {
        bytes: Vec<u8>,
        step: usize,
        fail_at: Option<u64>,
    }

    impl ReadAt for Stand {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            if self.fail_at.is_some_and(|f| offset >= f) {
                return Err(io::Error::other("disk on fire"));
            }
            let end = self
                .fail_at
                .map_or(self.bytes.len(), |f| f as usize)
                .min(self.bytes.len());
            let from = (offset as usize).min(end);
            let n = buf.len().min(self.step).min(end - from);
            buf[..n].copy_from_slice(&self.bytes[from..from + n]);
            Ok(n)
        }
    }

    /// Each chunk's start, text and whether it ended the input.
    type Read = (u64, Vec<u8>, bool);

    /// Every chunk in order until one ends the input, and the error if a read failed.
    fn chunks(stand: &Stand, base: u64, size: u64) -> (Vec<Read>, Option<String>) {
        let chunks = Chunks {
            file: stand,
            base,
            size,
            next: AtomicUsize::new(0),
            failed: Mutex::new(None),
        };
        let mut out = Vec::new();
        let mut buf = Vec::new();
        loop {
            let t = chunks.next_block(&mut buf);
            assert_eq!(t.index, out.len());
            out.push((t.start, buf[t.skip..t.skip + t.len].to_vec(), t.eof));
            if t.eof {
                break;
            }
        }
        let failed = chunks
            .failed
            .into_inner()
            .unwrap()
            .map(|(_, e)| e.to_string());
        (out, failed)
    }

    /// A block's lines as the fold sees them: position, length and row.
    fn described(batch: &mut Batch) -> Vec<String> {
        batch
            .rows()
            .iter()
            .map(|p| format!("{:?} {} {:?}", p.pos, p.len, p.row))
            .collect()
    }

    #[test]
    fn a_block_parsed_in_steps_is_the_block_parsed_at_once() {
        let text = b"{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1}}\n\
            not json\n\
            \n\
            \xff\xfe\n\
            {\"type\":\"user/message\",\"seq\":1,\"time\":2,\"data\":{\"a\":\"b\\nc\"}}\n\
            torn";
        let dialect = Dialect::for_version(3).expect("format 3");
        let vocab = Vocabulary::new(dialect, &Default::default());
        for len in [0, 10, text.len() - 4, text.len()] {
            let spare = || Spare::with(text.to_vec());
            let mut whole = Batch::parse(spare(), 0, len, 100, dialect, &vocab);
            // Stopped after every line, then resumed.
            let mut parsing = Parsing::new(spare(), 0, len, 100);
            let mut steps = 0;
            while !parsing.run(dialect, &vocab, || true) {
                steps += 1;
                assert!(steps <= len, "each step parses a line");
            }
            let mut stepped = parsing.batch;
            assert_eq!(
                described(&mut stepped),
                described(&mut whole),
                "{len} bytes"
            );
        }
        // The lines and the stops: one step per line, the torn piece included.
        let mut parsing = Parsing::new(Spare::with(text.to_vec()), 0, text.len(), 100);
        let mut steps = 1;
        while !parsing.run(dialect, &vocab, || true) {
            steps += 1;
        }
        assert_eq!(steps, 6);
    }

    #[test]
    fn chunks_hold_each_line_once_whatever_their_size() {
        let logs: [&[u8]; 5] = [
            b"head\na\nbb\nccc\n\n\ndddddddddddddddddddd\ne\n",
            b"head\na\nbb\nccc\ntorn",
            b"head\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            b"head\n",
            b"head\n\n",
        ];
        for log in logs {
            let base = 5;
            for size in [1, 2, 3, 4, 7, 16, 64, 4096] {
                for step in [1, 3, 1 << 20] {
                    let stand = Stand {
                        bytes: log.to_vec(),
                        step,
                        fail_at: None,
                    };
                    let (got, failed) = chunks(&stand, base, size);
                    assert_eq!(failed, None);
                    let what = format!("{:?} in chunks of {size}", String::from_utf8_lossy(log));
                    // The texts, in order, are the body, each starting where the last ended.
                    let mut at = base;
                    let mut body = Vec::new();
                    for (start, text, _) in got.iter().filter(|(_, t, _)| !t.is_empty()) {
                        assert_eq!(*start, at, "{what}");
                        at = start + text.len() as u64;
                        body.extend_from_slice(text);
                        // Whole lines only, but for a torn final piece.
                        if !text.is_empty() && !text.ends_with(b"\n") {
                            assert!(at == log.len() as u64, "{what}");
                        }
                    }
                    assert_eq!(body, &log[base as usize..], "{what}");
                    // Only the last chunk ends the input, and a chunk ends where the next
                    // chunk's range starts (or runs on through the line that crosses it).
                    assert!(got.iter().rev().skip(1).all(|(_, _, eof)| !eof), "{what}");
                }
            }
        }
    }

    #[test]
    fn a_failed_chunk_ends_the_input_after_its_whole_lines() {
        let log = b"head\naaaa\nbbbbbbbbbbbbbbbbbbbb\ncc\ndd\n".to_vec();
        for fail_at in 5..log.len() as u64 {
            for size in [1, 4, 8, 64] {
                let stand = Stand {
                    bytes: log.clone(),
                    step: 3,
                    fail_at: Some(fail_at),
                };
                let (got, failed) = chunks(&stand, 5, size);
                let what = format!("failing at {fail_at}, chunks of {size}");
                assert_eq!(failed.as_deref(), Some("disk on fire"), "{what}");
                let body: Vec<u8> = got.iter().flat_map(|(_, t, _)| t.clone()).collect();
                // The whole lines that end before the failing offset, no more.
                let whole = log[..fail_at as usize]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                assert_eq!(body, &log[5..whole.max(5)], "{what}");
                assert!(
                    got.last().unwrap().2,
                    "{what}: the failing chunk ends the input"
                );
            }
        }
    }
}
