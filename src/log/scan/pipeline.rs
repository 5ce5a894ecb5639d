//! The pass on several threads: workers take turns reading the next block of whole lines
//! from the shared reader (numbering the blocks in file order as they take them), split it
//! into lines, check their UTF-8 and parse their rows; this thread folds the blocks back in
//! block order, so lines, offsets, rows and their order are exactly those of the
//! one-line-at-a-time pass: the fold ([`Pass::line`]) is the same code and runs on this
//! thread, in file order. A folded batch goes back to the worker that parsed it, to be freed
//! by the allocator that made it, and its buffer is that worker's next block.
//!
//! The folding thread is the one part that cannot be spread, so it does nothing else: the
//! copying out of the kernel (a third of all the work on a VM with slow page-cache reads)
//! is done by the workers.
//!
//! At most [`in_flight`] blocks are out at once, so memory stays bounded by a few blocks and
//! their trees (and the longest line), whatever the size of the log.

use std::borrow::Cow;
use std::io::{self, BufRead};
use std::sync::mpsc;
use std::thread;

use super::{Pass, TornTail, line_text};
use crate::log::dialect::Dialect;
use crate::log::finding::Pos;
use crate::log::input::LineReader;
use crate::log::json::Arena;
use crate::log::rows::{self, Candidate, Row};
use crate::log::surface;

/// Bytes read per block (whole lines: a block ends at a `\n`).
pub(super) const BLOCK: usize = 128 * 1024;

/// Blocks read but not yet folded, for `workers` parsing threads: enough that every worker
/// has the next blocks waiting while the fold works through one, with slack for a worker that
/// falls behind (three per worker: ~10 % faster than two on format 3, for ~1 MB of memory;
/// four bought no more).
fn in_flight(workers: usize) -> usize {
    3 * workers
}

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
    /// The rows' emptied event lists, sent back to the worker to be freed where they were
    /// allocated.
    grave: Vec<Vec<Candidate<'static>>>,
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
    fn parse(
        block: Vec<u8>,
        arena: Box<Arena>,
        len: usize,
        start: u64,
        dialect: &Dialect,
    ) -> Batch {
        // SAFETY: the bytes live in `block`'s heap buffer, which moves with the batch but is
        // never written, reallocated or freed while the rows exist: the batch owns both,
        // drops the rows first, and lends them out only for the duration of a borrow of
        // itself ([`Batch::rows`]). Moving a `Vec` does not move its buffer. Likewise for
        // the arena: it stays in its box, its chunks stay where they are, and it is reset
        // (or dropped) only after the rows are gone; the rows are made `'static` below.
        let text: &'static [u8] = unsafe { std::slice::from_raw_parts(block.as_ptr(), len) };
        // Sized for the block's lines up front (a slot per 256 bytes; log lines are longer on
        // average): growing from empty copied the rows several times into fresh pages.
        let mut rows = Vec::with_capacity(len / 256 + 16);
        let mut lossy = Vec::new();
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
            let (cow, utf8_ok) = line_text(&text[at..at + n]);
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
            // Work the fold would do, done here: the digest of each tool result (not for v0,
            // whose legacy normalization may still rewrite the event).
            if let Row::Events(cands, _) = &mut row
                && !dialect.legacy_v0
            {
                for ev in cands.iter_mut().filter_map(|c| c.event.as_mut().ok()) {
                    if ev.ty == "tool/result" {
                        ev.result_digest = Some(surface::result_digest(dialect, &ev.data));
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
            grave: Vec::new(),
            _lossy: lossy,
            arena,
            block,
        }
    }

    /// The rows, borrowing from the batch.
    fn rows(&mut self) -> Vec<Parsed<'_>> {
        std::mem::take(&mut self.rows)
    }
}

/// Fold a batch's lines in order, the first being line `first_no`; the torn final piece, if
/// the batch ends with one. The rows' event lists stay in the batch (`grave`).
fn fold(pass: &mut Pass<'_, '_>, batch: &mut Batch, first_no: u64) -> Option<TornTail> {
    let mut grave = Vec::with_capacity(batch.rows.len());
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
        pass.line(
            p.pos,
            p.pos.byte + p.len as u64 + 1,
            utf8_ok,
            row,
            Some(&mut grave),
        );
    }
    // The emptied row vector goes back too (its buffer was allocated on the worker).
    // SAFETY: the vectors are empty (only their buffers are kept; the lists in `grave` are
    // empty too), so only the lifetime of the batch's borrow changes; they go back into the
    // batch, which drops them before its text and arena (see [`Batch::parse`]).
    let (rows, grave) = unsafe {
        (
            std::mem::transmute::<Vec<Parsed<'_>>, Vec<Parsed<'static>>>(rows),
            std::mem::transmute::<Vec<Vec<Candidate<'_>>>, Vec<Vec<Candidate<'static>>>>(grave),
        )
    };
    batch.rows = rows;
    batch.grave = grave;
    torn
}

/// What a worker is asked to do.
enum Job {
    /// Parse the first `len` bytes of a block read at `start` (the first block, read before
    /// the workers start).
    Parse {
        block: Vec<u8>,
        len: usize,
        start: u64,
    },
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

/// The rest of the input after the header, through `pass`, with `workers` parsing threads;
/// the torn final line if any. A read error ends the pass after the whole lines read before
/// it, like the one-line-at-a-time pass.
pub(super) fn run<R: BufRead + Send>(
    lines: &mut LineReader<R>,
    pass: &mut Pass<'_, '_>,
    block_size: usize,
    workers: usize,
) -> io::Result<Option<TornTail>> {
    let dialect = pass.ctx.dialect;
    let workers = workers.max(1);
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
            &mut Batch::parse(first, Box::default(), len, start, dialect),
            first_no,
        )
    } else {
        let reading = std::sync::Mutex::new(&mut reading);
        thread::scope(|scope| {
            let (done_tx, done) = mpsc::channel::<Done>();
            let mut to_worker = Vec::with_capacity(workers);
            let limit = in_flight(workers);
            for worker in 0..workers {
                let (job_tx, jobs) = mpsc::channel::<Job>();
                to_worker.push(job_tx);
                let done_tx = done_tx.clone();
                let reading = &reading;
                scope.spawn(move || {
                    let _alarm = Alarm(&done_tx);
                    // Buffers and arenas of this worker's freed batches, used again.
                    let mut spare: Vec<(Vec<u8>, Box<Arena>)> = Vec::new();
                    for job in jobs {
                        let (index, block, arena, start, len, eof) = match job {
                            Job::Parse { block, len, start } => {
                                (0, block, Box::default(), start, len, false)
                            }
                            Job::Read => {
                                let (mut block, arena) = spare.pop().unwrap_or_default();
                                let (index, start, len, eof) = reading
                                    .lock()
                                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                                    .next_block(block_size, &mut block);
                                (index, block, arena, start, len, eof)
                            }
                            Job::Free(batch) => {
                                let Batch {
                                    rows,
                                    grave,
                                    _lossy,
                                    mut arena,
                                    block,
                                } = batch;
                                // What borrows from the arena goes first.
                                drop((rows, grave));
                                arena.reset();
                                // A worker reads one block per batch it frees, so two spare
                                // buffers are plenty; one that grew around a long line is not
                                // kept, nor an arena that did. (Keeping up to six of up to
                                // four blocks each had cost ~0.5 MB of peak RSS, and could
                                // cost several.)
                                if block.len() <= 2 * block_size
                                    && arena.allocated_bytes() <= ARENA_KEPT * block_size
                                    && spare.len() < 2
                                {
                                    spare.push((block, arena));
                                }
                                continue;
                            }
                        };
                        let batch = Batch::parse(block, arena, len, start, dialect);
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
            // Block 0 is read; the others are read by the workers as they ask.
            let ask = |worker: usize, job: Job| {
                // A closed channel means the worker panicked: the scope re-raises it.
                to_worker[worker].send(job).is_ok()
            };
            let mut ok = ask(
                0,
                Job::Parse {
                    block: first,
                    len,
                    start,
                },
            );
            for k in 1..limit {
                ok = ok && ask(k % workers, Job::Read);
            }
            // Parsed blocks that arrived before the one to fold next.
            let mut early: std::collections::BTreeMap<usize, (usize, Batch, bool)> =
                Default::default();
            let (mut next, mut next_no) = (0, first_no);
            let mut torn = None;
            while ok {
                let (worker, mut batch, eof) = match early.remove(&next) {
                    Some(parsed) => parsed,
                    None => match done.recv() {
                        Ok(Done::Parsed {
                            index,
                            worker,
                            batch,
                            eof,
                        }) => {
                            early.insert(index, (worker, batch, eof));
                            continue;
                        }
                        Ok(Done::Panicked) | Err(_) => break,
                    },
                };
                next += 1;
                // One row per line; numbered from 0 on the worker, which cannot know how many
                // lines came before.
                let batch_no = next_no;
                next_no += batch.rows.len() as u64;
                torn = fold(pass, &mut batch, batch_no);
                ok = ask(worker, Job::Free(batch));
                if eof {
                    break;
                }
                ok = ok && ask(worker, Job::Read);
            }
            torn
        })
    };
    match reading.failed {
        Some(e) => Err(e),
        None => Ok(torn),
    }
}
