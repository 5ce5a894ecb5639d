//! A stored `data` text left for other threads: the reader, which they take turns at,
//! reserves its bytes in the line and moves on; the thread that takes the block (a parsing
//! thread of the pass, or a helper of [`Filled`]) decompresses the text into place and checks
//! that it is the `JSON.stringify` form, off the reader's lock. Only the text upstream itself stores is written this way: one whole zstd
//! frame that states its size, or a TEXT, that turns out to be UTF-8 and already in the form
//! the exact read would copy unchanged. Anything else (or a job not found where it was left)
//! marks the read failed, and its reader must read the session again the exact way (see
//! [`super::SessionReader::defer_decoding`]).

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::io::{self, BufRead, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::js;
use crate::log::scan::Deferred;

/// What is left to do for a reserved `data` text.
#[derive(Debug)]
pub enum Later {
    /// Decompress this frame into the reserved bytes (all of them).
    Zstd(Vec<u8>),
    /// The text is in place: check it.
    Check,
}

/// A `data` text reserved in a line: `len` bytes at `at`, an offset in the reader's buffer
/// as it is written, then (once pushed to the [`Deferral`]) in the stream.
#[derive(Debug)]
pub struct Job {
    pub at: u64,
    pub len: usize,
    pub later: Later,
}

/// The jobs one session read left, shared by its reader and the threads that write them.
/// `spent`: the session is read again the exact way, and nothing is deferred again.
#[derive(Debug, Default)]
pub struct Deferral {
    armed: AtomicBool,
    spent: AtomicBool,
    /// In stream order: the reader pushes them in the order it writes its lines.
    jobs: Mutex<VecDeque<Job>>,
    failed: AtomicBool,
}

thread_local! {
    static ZSTD: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

impl Deferral {
    /// Whether the reader may reserve texts now.
    pub fn armed(&self) -> bool {
        self.armed.load(Ordering::Acquire) && !self.spent.load(Ordering::Acquire)
    }

    /// The read is being done again the exact way: nothing is deferred from now on.
    pub fn spend(&self) {
        self.spent.store(true, Ordering::Release);
        self.jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Leave `job`, whose offset is now the stream's.
    pub fn push(&self, job: Job) {
        self.jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(job);
    }

    /// Every text left was written into its place and is what the exact read writes.
    pub fn settled(&self) -> bool {
        !self.failed.load(Ordering::Acquire)
            && self
                .jobs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
    }

    fn fail(&self) {
        self.failed.store(true, Ordering::Release);
    }
}

impl Deferred for Deferral {
    fn arm(&self) {
        self.armed.store(true, Ordering::Release);
    }

    fn fill(&self, start: u64, block: &mut [u8]) {
        let end = start + block.len() as u64;
        let mine: Vec<Job> = {
            let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
            let from = jobs.partition_point(|j| j.at < start);
            let to = jobs.partition_point(|j| j.at < end);
            jobs.drain(from..to).collect()
        };
        for job in mine {
            let at = (job.at - start) as usize;
            let Some(place) = block.get_mut(at..at.saturating_add(job.len)) else {
                self.fail();
                return;
            };
            if !write(place, &job.later) {
                self.fail();
                return;
            }
        }
    }
}

/// Do `later` in `place`; false unless the result is exactly what the exact read writes.
fn write(place: &mut [u8], later: &Later) -> bool {
    if let Later::Zstd(frame) = later {
        let done = ZSTD.with(|z| {
            let mut z = z.borrow_mut();
            if z.is_none() {
                *z = zstd::bulk::Decompressor::new().ok();
            }
            z.as_mut()
                .and_then(|d| d.decompress_to_buffer(frame.as_slice(), place).ok())
        });
        if done != Some(place.len()) {
            return false;
        }
    }
    // The exact read copies a text unchanged only in this form (one that starts with a
    // byte-order mark, which it drops from a frame, is not JSON as it stands).
    simdutf8::basic::from_utf8(place).is_ok_and(|text| js::is_canonical(text) == Ok(true))
}

/// A reader's stream with its deferred texts written by helper threads, for a consumer that
/// reads it as a plain `BufRead` (one that copies or taps the bytes before it parses them, so
/// they must be whole when it reads them). The threads take turns at the reader for one
/// buffer of whole lines each (see [`super::SessionReader`]'s `fill_buf`), write its texts
/// off the turn, and the buffers are handed out in order.
pub struct Filled<R: BufRead + Send + 'static> {
    shared: Arc<Shared<R>>,
    /// Buffers as they are written, each with its number.
    rx: Option<Receiver<(u64, io::Result<Vec<u8>>)>>,
    /// A token per buffer a thread may take before the consumer is done with an earlier one.
    tokens: Option<Sender<()>>,
    /// Buffers that came before their turn.
    early: BTreeMap<u64, io::Result<Vec<u8>>>,
    next: u64,
    cur: Vec<u8>,
    pos: usize,
    ended: bool,
    workers: Vec<thread::JoinHandle<()>>,
}

struct Shared<R> {
    turn: Mutex<Turn<R>>,
    deferral: Arc<Deferral>,
}

struct Turn<R> {
    reader: Option<R>,
    /// The number of the next buffer, and the stream offset of its first byte.
    next: u64,
    offset: u64,
    /// The reader ended or failed: nothing more is taken.
    done: bool,
}

/// Buffers taken and not yet handed out, per thread (bounds the memory in flight).
const AHEAD: usize = 2;

impl<R: BufRead + Send + 'static> Filled<R> {
    /// Read `reader`, whose texts `deferral` holds, on `threads` helper threads (at least
    /// one). Arms the deferral: call before its rows are read.
    pub fn new(reader: R, deferral: Arc<Deferral>, threads: usize) -> io::Result<Filled<R>> {
        deferral.arm();
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            turn: Mutex::new(Turn {
                reader: Some(reader),
                next: 0,
                offset: 0,
                done: false,
            }),
            deferral,
        });
        let ahead = AHEAD * threads;
        // At most `ahead` buffers are in flight, so a send never waits.
        let (tx, rx) = bounded(ahead);
        let (tokens, token_rx) = bounded(ahead);
        for _ in 0..ahead {
            let _ = tokens.send(());
        }
        let mut filled = Filled {
            shared,
            rx: Some(rx),
            tokens: Some(tokens),
            early: BTreeMap::new(),
            next: 0,
            cur: Vec::new(),
            pos: 0,
            ended: false,
            workers: Vec::with_capacity(threads),
        };
        for _ in 0..threads {
            let shared = filled.shared.clone();
            let (tx, token_rx): (Sender<_>, Receiver<()>) = (tx.clone(), token_rx.clone());
            let worker = thread::Builder::new()
                .name("dshs-store-read".into())
                .spawn(move || shared.work(&tx, &token_rx))?;
            filled.workers.push(worker);
        }
        Ok(filled)
    }

    /// Stop the threads and give the reader back (where they left it: at its end when the
    /// stream was read to the end).
    pub fn into_inner(mut self) -> Option<R> {
        self.stop();
        self.shared
            .turn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .reader
            .take()
    }

    fn stop(&mut self) {
        self.shared
            .turn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .done = true;
        // A thread waiting for a token or to send sees its channel closed.
        self.tokens = None;
        self.rx = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }

    /// The next buffer in order: `None` at the end of the stream.
    fn next_buffer(&mut self) -> io::Result<Option<Vec<u8>>> {
        let got = match self.early.remove(&self.next) {
            Some(got) => got,
            None => loop {
                let Some(rx) = &self.rx else {
                    return Ok(None);
                };
                match rx.recv() {
                    Ok((i, got)) if i == self.next => break got,
                    Ok((i, got)) => {
                        self.early.insert(i, got);
                    }
                    Err(_) => break Err(io::Error::other("the threads reading the store stopped")),
                }
            },
        };
        self.next += 1;
        if let Some(tokens) = &self.tokens {
            let _ = tokens.try_send(());
        }
        got.map(|b| (!b.is_empty()).then_some(b))
    }
}

/// Says a thread's buffer failed if the thread unwinds while it holds one, so the consumer
/// does not wait for it.
struct Holding<'a> {
    tx: &'a Sender<(u64, io::Result<Vec<u8>>)>,
    index: Option<u64>,
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        if let Some(index) = self.index
            && thread::panicking()
        {
            let _ = self.tx.try_send((
                index,
                Err(io::Error::other("a thread reading the store failed")),
            ));
        }
    }
}

impl<R: BufRead + Send + 'static> Shared<R> {
    fn work(&self, tx: &Sender<(u64, io::Result<Vec<u8>>)>, tokens: &Receiver<()>) {
        let mut holding = Holding { tx, index: None };
        loop {
            if tokens.recv().is_err() {
                return;
            }
            let (index, start, mut got) = {
                let mut turn = self.turn.lock().unwrap_or_else(PoisonError::into_inner);
                if turn.done {
                    return;
                }
                let index = turn.next;
                turn.next += 1;
                holding.index = Some(index);
                let start = turn.offset;
                let Some(reader) = turn.reader.as_mut() else {
                    return;
                };
                let got = match reader.fill_buf() {
                    Ok(buf) => {
                        let bytes = buf.to_vec();
                        reader.consume(bytes.len());
                        Ok(bytes)
                    }
                    Err(e) => Err(e),
                };
                match &got {
                    Ok(b) if !b.is_empty() => turn.offset += b.len() as u64,
                    _ => turn.done = true,
                }
                (index, start, got)
            };
            if let Ok(bytes) = &mut got {
                self.deferral.fill(start, bytes);
            }
            holding.index = None;
            if tx.send((index, got)).is_err() {
                return;
            }
        }
    }
}

impl<R: BufRead + Send + 'static> Read for Filled<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        crate::log::input::read_through_buffer(self, out)
    }
}

impl<R: BufRead + Send + 'static> BufRead for Filled<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.pos >= self.cur.len() && !self.ended {
            match self.next_buffer() {
                Ok(Some(b)) => {
                    self.cur = b;
                    self.pos = 0;
                }
                Ok(None) => self.ended = true,
                Err(e) => {
                    self.ended = true;
                    return Err(e);
                }
            }
        }
        Ok(&self.cur[self.pos.min(self.cur.len())..])
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.cur.len());
    }
}

impl<R: BufRead + Send + 'static> Drop for Filled<R> {
    fn drop(&mut self) {
        self.stop();
    }
}
