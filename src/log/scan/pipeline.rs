//! The pass on several threads: this one reads blocks of whole lines, numbers them and
//! folds; workers split each block into lines, check their UTF-8 and parse their rows. Block
//! `k` goes to worker `k mod n` and is folded back in block order, so lines, offsets, rows
//! and their order are exactly those of the one-line-at-a-time pass: the fold
//! ([`Pass::line`]) is the same code and runs on this thread, in file order. A folded batch
//! goes back to the worker that parsed it, to be freed by the allocator that made it.
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
use crate::log::rows::{self, Event, Row};
use crate::log::surface;

/// Bytes read per block (whole lines: a block ends at a `\n`).
pub(super) const BLOCK: usize = 128 * 1024;

/// Blocks read but not yet folded, for `workers` parsing threads: enough that every worker
/// has the next block waiting while the fold works through one.
fn in_flight(workers: usize) -> usize {
    2 * workers
}

/// One line of a block.
struct Parsed<'a> {
    pos: Pos,
    /// The line's length without its `\n`.
    len: usize,
    /// `None`: the final piece of the input, without a `\n` (torn, never parsed).
    row: Option<(bool, Row<'a>)>,
}

/// A block of whole lines with their rows. The rows borrow from `block` (and from `lossy`,
/// the U+FFFD-decoded copies of lines that are not UTF-8); they are stored as `'static` and
/// only handed out by [`Batch::rows`], tied to a borrow of the batch.
struct Batch {
    // Declared first, so dropped before the text they borrow.
    rows: Vec<Parsed<'static>>,
    /// The folded events, sent back to the worker to be freed where they were allocated.
    grave: Vec<Event<'static>>,
    /// Only held: rows borrow from these.
    _lossy: Vec<String>,
    block: Vec<u8>,
}

impl Batch {
    /// Split and parse `block[..len]`, whose first byte is at offset `start`.
    fn parse(block: Vec<u8>, len: usize, start: u64, dialect: &Dialect) -> Batch {
        // SAFETY: the bytes live in `block`'s heap buffer, which moves with the batch but is
        // never written, reallocated or freed while the rows exist: the batch owns both,
        // drops the rows first, and lends them out only for the duration of a borrow of
        // itself ([`Batch::rows`]). Moving a `Vec` does not move its buffer.
        let text: &'static [u8] = unsafe { std::slice::from_raw_parts(block.as_ptr(), len) };
        let mut rows = Vec::new();
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
            let mut row = rows::decode_str(line, pos, dialect);
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
        Batch {
            rows,
            grave: Vec::new(),
            _lossy: lossy,
            block,
        }
    }

    /// The rows, borrowing from the batch.
    fn rows(&mut self) -> Vec<Parsed<'_>> {
        std::mem::take(&mut self.rows)
    }
}

/// Fold a batch's lines in order, the first being line `first_no`; the torn final piece, if
/// the batch ends with one. The folded events stay in the batch (`grave`).
fn fold(pass: &mut Pass<'_, '_>, batch: &mut Batch, first_no: u64) -> Option<TornTail> {
    let mut grave = Vec::new();
    let mut torn = None;
    for mut p in batch.rows() {
        p.pos.line += first_no;
        if let Some((_, Row::Events(cands, _))) = &mut p.row {
            for c in cands {
                match &mut c.event {
                    Ok(e) => e.pos.line += first_no,
                    Err(bad) => bad.pos.line += first_no,
                }
            }
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
    // SAFETY: the events borrow from the batch's text, and go back into the batch, which
    // drops them before that text (see [`Batch::parse`]).
    batch.grave = unsafe { std::mem::transmute::<Vec<Event<'_>>, Vec<Event<'static>>>(grave) };
    torn
}

/// What a worker is asked to do.
enum Job {
    /// Parse the first `len` bytes of a block read at `start`.
    Parse {
        block: Vec<u8>,
        len: usize,
        start: u64,
    },
    /// Free a folded batch (its trees were allocated on this worker) and send its buffer
    /// back for reuse.
    Free(Batch),
}

/// The rest of the input after the header, through `pass`, with `workers` parsing threads;
/// the torn final line if any. A read error ends the pass after the whole lines read before
/// it, like the one-line-at-a-time pass.
pub(super) fn run<R: BufRead>(
    lines: &mut LineReader<R>,
    pass: &mut Pass<'_, '_>,
    block_size: usize,
    workers: usize,
) -> io::Result<Option<TornTail>> {
    let dialect = pass.ctx.dialect;
    let workers = workers.max(1);
    let mut next_no = lines.next_line_no();
    let mut failed: Option<io::Error> = None;
    // The next block: the job for a worker, whether it is empty, and whether the input ended.
    let mut read = |lines: &mut LineReader<R>, mut block: Vec<u8>| {
        let start = lines.offset();
        let got = lines.read_block(block_size, &mut block);
        if let Some(e) = got.error {
            failed = Some(e);
        }
        let job = Job::Parse {
            block,
            len: got.len,
            start,
        };
        (job, got.len == 0, got.eof)
    };

    let (first, empty, eof) = read(lines, Vec::new());
    let torn = if empty {
        None
    } else if eof {
        // Input that fits one block needs no other thread.
        let Job::Parse { block, len, start } = first else {
            unreachable!("read makes parse jobs")
        };
        fold(pass, &mut Batch::parse(block, len, start, dialect), next_no)
    } else {
        thread::scope(|scope| {
            let (spare_tx, spare) = mpsc::channel::<Vec<u8>>();
            let mut to_worker = Vec::with_capacity(workers);
            let mut from_worker = Vec::with_capacity(workers);
            for _ in 0..workers {
                let (job_tx, jobs) = mpsc::channel::<Job>();
                let (parsed, done) = mpsc::channel::<Batch>();
                let spare_tx = spare_tx.clone();
                to_worker.push(job_tx);
                from_worker.push(done);
                scope.spawn(move || {
                    for job in jobs {
                        match job {
                            Job::Parse { block, len, start } => {
                                let batch = Batch::parse(block, len, start, dialect);
                                if parsed.send(batch).is_err() {
                                    break;
                                }
                            }
                            Job::Free(batch) => {
                                let Batch { mut block, .. } = batch;
                                // A block that grew around a huge line is not kept.
                                if block.len() > 4 * block_size {
                                    block = Vec::new();
                                }
                                let _ = spare_tx.send(block);
                            }
                        }
                    }
                });
            }
            drop(spare_tx);
            let limit = in_flight(workers);
            let mut pending = Some(first);
            let mut buffers = 1;
            let mut eof = false;
            let (mut sent, mut folded) = (0usize, 0usize);
            let mut torn = None;
            'pass: loop {
                while sent - folded < limit {
                    let job = match pending.take() {
                        Some(job) => job,
                        None if eof => break,
                        None => {
                            // A fixed set of buffers circulates: a new one only while
                            // fewer than that exist, else wait for one to come back (a
                            // worker lost to a panic does not hang the wait).
                            let buf = match spare.try_recv() {
                                Ok(buf) => buf,
                                Err(_) if buffers < limit + workers => {
                                    buffers += 1;
                                    Vec::new()
                                }
                                Err(_) => spare
                                    .recv_timeout(std::time::Duration::from_millis(200))
                                    .unwrap_or_default(),
                            };
                            let (job, empty, at_end) = read(lines, buf);
                            eof = at_end;
                            if empty {
                                continue;
                            }
                            job
                        }
                    };
                    // A closed channel means the worker panicked: the scope re-raises it.
                    if to_worker[sent % workers].send(job).is_err() {
                        break 'pass;
                    }
                    sent += 1;
                }
                if sent == folded {
                    break;
                }
                let w = folded % workers;
                let Ok(mut batch) = from_worker[w].recv() else {
                    break;
                };
                folded += 1;
                // One row per line; numbered from 0 on the worker, which cannot know how many
                // lines came before.
                let first_no = next_no;
                next_no += batch.rows.len() as u64;
                torn = fold(pass, &mut batch, first_no);
                if to_worker[w].send(Job::Free(batch)).is_err() {
                    break;
                }
            }
            torn
        })
    };
    match failed {
        Some(e) => Err(e),
        None => Ok(torn),
    }
}
