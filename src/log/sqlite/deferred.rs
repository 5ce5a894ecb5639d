//! A stored `data` text left for the parsing threads: the reader, which the threads take
//! turns at, reserves its bytes in the line and moves on; the thread that takes the block
//! decompresses the text into place and checks that it is the `JSON.stringify` form, off the
//! reader's lock. Only the text upstream itself stores is written this way: one whole zstd
//! frame that states its size, or a TEXT, that turns out to be UTF-8 and already in the form
//! the exact read would copy unchanged. Anything else (or a job not found where it was left)
//! marks the read failed, and its reader must read the session again the exact way (see
//! [`super::SessionReader::defer_decoding`]).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, PoisonError};

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

/// A `data` text reserved in the line just written: at `at` in the reader's buffer, `len`
/// bytes.
#[derive(Debug)]
pub struct Draft {
    pub at: usize,
    pub len: usize,
    pub later: Later,
}

#[derive(Debug)]
struct Job {
    /// The reserved bytes' offset in the stream.
    at: u64,
    len: usize,
    later: Later,
}

const OFF: u8 = 0;
const ARMED: u8 = 1;
/// Read again the exact way: never armed again.
const SPENT: u8 = 2;

/// The jobs one session read left, shared by its reader and the parsing threads.
#[derive(Debug, Default)]
pub struct Deferral {
    state: AtomicU8,
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
        self.state.load(Ordering::Acquire) == ARMED
    }

    /// The read is being done again the exact way: nothing is deferred from now on.
    pub fn spend(&self) {
        self.state.store(SPENT, Ordering::Release);
        self.jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    pub fn push(&self, at: u64, draft: Draft) {
        self.jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(Job {
                at,
                len: draft.len,
                later: draft.later,
            });
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
        let _ = self
            .state
            .compare_exchange(OFF, ARMED, Ordering::AcqRel, Ordering::Acquire);
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
