//! The pass on several threads. The threads take turns reading the next block of whole lines
//! from the shared reader (numbering the blocks in file order as they take them), split it
//! into lines, check their UTF-8 and parse their rows; the blocks are folded in block order,
//! so lines, offsets, rows and their order are exactly those of the one-line-at-a-time pass:
//! the fold ([`Pass::line`]) is the same code, run on one block at a time, in file order.
//!
//! Two ways to share the fold:
//!
//! - [`relay`], when the observer is inert (`validate`): each thread folds the blocks it
//!   parsed, when their turn comes; the pass (its state, and a buffer for the findings, which
//!   this thread hands to the sink) moves from thread to thread with the turn. Each block's
//!   trees are read by the core that built them moments before: folding them on another core
//!   had cost ~20 % more CPU time in all than one thread spends. At most one block per thread
//!   is out at once.
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
use std::io::{self, BufRead};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, mpsc};
use std::thread;

use super::{Observer, Pass, TornTail, line_text};
use crate::log::dialect::Dialect;
use crate::log::finding::Pos;
use crate::log::finding::{Finding, Sink};
use crate::log::input::LineReader;
use crate::log::json::Arena;
use crate::log::rows::{self, Row};
use crate::log::vocab::Vocabulary;

/// Bytes read per block (whole lines: a block ends at a `\n`).
pub(super) const BLOCK: usize = 128 * 1024;

/// Blocks each worker is asked to read ahead: with one worker (two cores), three rather than
/// two halved the thread switches (1,400-1,600 per GiB instead of 2,800-3,100) and saved ~5 %
/// of the time on format 3, for 0.7 MB of peak RSS.
const JOBS_PER_WORKER: usize = 3;

/// Blocks the folding thread parses itself while it waits for the next one to fold (the first
/// block is one). It parses one block at a time: more only raised peak RSS.
const OWN_BLOCKS: usize = 1;

/// An arena kept for the next block is at most this many blocks in size (a block's trees
/// take about two to three times its size).
const ARENA_KEPT: usize = 8;

/// One line of a block.
struct Parsed<'a> {
    pos: Pos,
    /// The line's length without its `\n`.
    len: usize,
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
// too). Those references never leave the batch (see [`Batch::parse`]) and the batch
// only ever moves whole from one thread to another, so one thread at a time can reach what
// they point to: nothing is shared.
unsafe impl Send for Batch {}

impl Batch {
    /// Split and parse `block[..len]`, whose first byte is at offset `start`, into `arena`
    /// (empty: a new one or one [`Arena::reset`]).
    fn parse(spare: Spare, len: usize, start: u64, dialect: &Dialect, vocab: &Vocabulary) -> Batch {
        // SAFETY: the bytes live in `block`'s heap buffer, which moves with the batch but is
        // never written, reallocated or freed while the rows exist: the batch owns both,
        // drops the rows first, and lends them out only for the duration of a borrow of
        // itself ([`Batch::rows`]). Moving a `Vec` does not move its buffer. Likewise for
        // the arena: it stays in its box, its chunks stay where they are, and it is reset
        // (or dropped) only after the rows are gone; the rows are made `'static` below.
        let Spare { block, arena, rows } = spare;
        debug_assert!(rows.is_empty());
        // SAFETY: the vector is empty: only the lifetime it is declared with changes.
        let mut rows =
            unsafe { std::mem::transmute::<Vec<Parsed<'static>>, Vec<Parsed<'_>>>(rows) };
        let text: &'static [u8] = unsafe { std::slice::from_raw_parts(block.as_ptr(), len) };
        // Sized for the block's lines up front (a slot per 256 bytes; log lines are longer on
        // average): growing from empty copied the rows several times into fresh pages.
        rows.reserve(len / 256 + 16);
        let mut lossy = Vec::new();
        // The whole block checked at once (a line at a time, the check's set-up cost more than
        // the check): a block of whole lines is UTF-8 exactly when each of its lines is, since
        // no multi-byte sequence spans a `\n`. Only a block that is not is checked line by line.
        let whole = simdutf8::basic::from_utf8(text).ok();
        let mut at = 0;
        let mut no = 0;
        while at < text.len() {
            let pos = Pos {
                line: no,
                byte: start + at as u64,
            };
            no += 1;
            let Some(n) = memchr::memchr(b'\n', &text[at..]) else {
                rows.push(Parsed {
                    pos,
                    len: text.len() - at,
                    row: None,
                });
                break;
            };
            let (cow, utf8_ok) = match whole.and_then(|w| w.get(at..at + n)) {
                Some(line) => (Cow::Borrowed(line), true),
                None => line_text(&text[at..at + n]),
            };
            let line: &'static str = match cow {
                Cow::Borrowed(s) => s,
                Cow::Owned(s) => {
                    let ptr: *const str = s.as_str();
                    lossy.push(s);
                    // SAFETY: as above: the string's heap buffer does not move when the
                    // `String` moves into `lossy`, and it outlives the rows.
                    unsafe { &*ptr }
                }
            };
            let mut row = rows::decode_in(line, pos, dialect, Some(&arena));
            // Work the fold would do, done here: each event's type class (not for v0, whose
            // legacy normalization may still rename the type).
            if let Row::Events(cands, _) = &mut row
                && !dialect.legacy_v0
            {
                for c in cands.iter_mut() {
                    if let Ok(ev) = &c.event {
                        c.class = Some(vocab.classify(&ev.ty, ev.ignorable));
                    }
                }
            }
            rows.push(Parsed {
                pos,
                len: n,
                row: Some((utf8_ok, row)),
            });
            at += n + 1;
        }
        // SAFETY: see above; only the lifetime of the arena's borrow changes.
        let rows = unsafe { std::mem::transmute::<Vec<Parsed<'_>>, Vec<Parsed<'static>>>(rows) };
        Batch {
            rows,
            _lossy: lossy,
            arena,
            block,
        }
    }

    /// The rows, borrowing from the batch.
    fn rows(&mut self) -> Vec<Parsed<'_>> {
        let rows = std::mem::take(&mut self.rows);
        // SAFETY: only the lifetime changes, to that of the borrow of the batch, which
        // outlives the rows (see [`Batch::parse`]).
        unsafe { std::mem::transmute::<Vec<Parsed<'static>>, Vec<Parsed<'_>>>(rows) }
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
    for mut p in rows.drain(..) {
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
        let Some((utf8_ok, row)) = p.row else {
            torn = Some(TornTail {
                line: p.pos.line,
                byte: p.pos.byte,
                len: p.len as u64,
            });
            break;
        };
        // Without a stop seq the pass never ends early.
        pass.line(p.pos, p.pos.byte + p.len as u64 + 1, utf8_ok, row);
    }
    // SAFETY: the vector is empty (`drain` took every row, even when the loop broke off), so
    // only the lifetime of the batch's borrow changes.
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

/// The rest of the input after the header, through `pass`, on `threads` threads; the pass
/// back, and the torn final line if any. A read error ends the pass after the whole lines
/// read before it, like the one-line-at-a-time pass.
pub(super) fn run<R: BufRead + Send, O: Observer, S: Sink>(
    lines: &mut LineReader<R>,
    mut pass: Pass<O, S>,
    block_size: usize,
    threads: usize,
) -> (Pass<O, S>, io::Result<Option<TornTail>>) {
    if pass.ctx.observer.inert() {
        relay(lines, pass, block_size, threads)
    } else {
        let torn = gather(lines, &mut pass, block_size, threads);
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
            &mut Batch::parse(Spare::with(first), len, start, dialect, vocab),
            first_no,
        )
    } else {
        let reading = std::sync::Mutex::new(&mut reading);
        // The next block, read and parsed on this thread.
        let read_here = |spare: &mut Vec<Spare>| {
            let mut into = spare.pop().unwrap_or_default();
            let (index, start, len, eof) = reading
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .next_block(block_size, &mut into.block);
            (index, Batch::parse(into, len, start, dialect, vocab), eof)
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
                        let (index, start, len, eof) = reading
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .next_block(block_size, &mut into.block);
                        let batch = Batch::parse(into, len, start, dialect, vocab);
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
                    Batch::parse(Spare::with(first), len, start, dialect, vocab),
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
    /// The last block is folded, or a thread panicked: every thread stops.
    over: bool,
    /// Threads asleep until their turn.
    asleep: usize,
}

/// How long a thread whose block is parsed spins for its turn before it sleeps: the turn
/// usually comes within the other thread's fold of one block (tens of µs), and on a VM
/// sleeping and being woken cost as much.
const SPIN: std::time::Duration = std::time::Duration::from_micros(100);

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
/// Findings go to `sink` from this thread, in order, whenever it holds the turn.
fn relay<R: BufRead + Send, O: Observer, S: Sink>(
    lines: &mut LineReader<R>,
    pass: Pass<O, S>,
    block_size: usize,
    threads: usize,
) -> (Pass<O, S>, io::Result<Option<TornTail>>) {
    let dialect = pass.ctx.dialect;
    let vocab = &pass.ctx.vocab.clone();
    let first_no = lines.next_line_no();
    let mut reading = Reading {
        lines,
        next: 0,
        eof: false,
        failed: None,
    };
    let mut first = Vec::new();
    let (_, start, len, eof) = reading.next_block(block_size, &mut first);
    // The observer does nothing and the findings wait in a buffer: what the other threads
    // touch is the pass's own state.
    let (relayed, observer, mut sink) = pass.swap((), Vec::<Finding>::new());
    let turn = Mutex::new(Turn {
        pass: relayed,
        next: 0,
        line_no: first_no,
        torn: None,
        over: false,
        asleep: 0,
    });
    let bell = Condvar::new();
    // The block whose turn it is, for threads spinning without the lock.
    let baton = AtomicUsize::new(0);
    if len == 0 {
        // Nothing after the header.
    } else if eof {
        // Input that fits one block needs no other thread.
        let mut t = lock(&turn);
        let mut batch = Batch::parse(Spare::with(first), len, start, dialect, vocab);
        t.torn = fold(&mut t.pass, &mut batch, first_no);
    } else {
        let legs = Legs {
            reading: Mutex::new(&mut reading),
            turn: &turn,
            bell: &bell,
            baton: &baton,
            // Spinning only while every thread has a core of its own.
            spin: threads <= thread::available_parallelism().map_or(1, |n| n.get()),
            block_size,
            dialect,
            vocab,
        };
        let first = (first, start, len, eof);
        thread::scope(|scope| {
            for _ in 1..threads.max(2) {
                scope.spawn(|| legs.run(None, |_| {}));
            }
            legs.run(Some(first), |pass| {
                for f in pass.out.inner.drain(..) {
                    sink.push(f);
                }
            });
        });
    }
    let Turn { pass, torn, .. } = turn.into_inner().unwrap_or_else(PoisonError::into_inner);
    let (mut pass, (), rest) = pass.swap(observer, sink);
    // Counted when they were pushed.
    for f in rest {
        pass.out.inner.push(f);
    }
    let torn = match reading.failed {
        Some(e) => Err(e),
        None => Ok(torn),
    };
    (pass, torn)
}

/// What the threads of [`relay`] share.
struct Legs<'r, 'l, R, P> {
    reading: Mutex<&'r mut Reading<'l, R>>,
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
    /// already read). `on_turn` runs after each fold, with the turn held.
    fn run(
        &self,
        mut first: Option<(Vec<u8>, u64, usize, bool)>,
        mut on_turn: impl FnMut(&mut Pass<O, S>),
    ) {
        let _stop = Stop {
            turn: self.turn,
            bell: self.bell,
        };
        let mut spare = Vec::new();
        loop {
            let (index, into, start, len, eof) = match first.take() {
                Some((block, start, len, eof)) => (0, Spare::with(block), start, len, eof),
                None => {
                    let mut into: Spare = spare.pop().unwrap_or_default();
                    let (index, start, len, eof) =
                        lock(&self.reading).next_block(self.block_size, &mut into.block);
                    (index, into, start, len, eof)
                }
            };
            let mut batch = Batch::parse(into, len, start, self.dialect, self.vocab);
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
            on_turn(&mut t.pass);
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
}
