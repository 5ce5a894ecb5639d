//! The scan on parsing threads (`ScanOptions::threads` > 1) must see exactly what the
//! one-line-at-a-time pass sees: the same findings with the same lines and offsets, the same
//! committed prefix, torn tail, crash tail and surface. Small reads and one-byte blocks make
//! every fixture cross many blocks, so each line boundary is a block boundary somewhere.
//! Each comparison runs twice: with no observer, the pass moves between the threads (each
//! folds the blocks it parsed); with one that watches each event, one thread folds them all.

mod common;

use std::io::{self, BufReader, Read};
use std::path::Path;
use std::sync::{Arc, Mutex};

use dshs::log::Finding;
use dshs::log::input::ZSTD_MAGIC;
use dshs::log::input::zstd::ZstdReader;
use dshs::log::scan::{
    EventInfo, FoldState, Observer, Positional, Scan, ScanOptions, Unusable, scan_framed,
};

/// A reader that returns at most `step` bytes per read, so the pipeline's blocks stay tiny;
/// at the end of its bytes it reports the end, fails, or panics once (`end`; then the end).
struct Chunky<'a> {
    bytes: &'a [u8],
    step: usize,
    end: End,
}

#[derive(Clone, Copy)]
enum End {
    Eof,
    Fail,
    Panic,
}

impl Read for Chunky<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.bytes.is_empty() {
            match self.end {
                End::Eof => {}
                End::Fail => return Err(io::Error::other("disk on fire")),
                End::Panic => {
                    // Once: the next reader to try (another worker) sees the end, so only the
                    // worker that panicked knows the block it took will never come.
                    self.end = End::Eof;
                    panic!("reader panicked");
                }
            }
        }
        let n = self.step.min(buf.len()).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

/// An observer that must see each event (so the pass stays on one thread): what it saw.
#[derive(Debug, Default, PartialEq)]
struct Watch {
    /// Seq, accepted, speculative of each event; the line of each unusable row; the
    /// speculations' ends.
    seen: Vec<String>,
}

impl Observer for Watch {
    fn event(&mut self, info: &EventInfo<'_, '_>, _state: &FoldState) {
        self.seen.push(format!(
            "{} {} {}",
            info.event.seq, info.accepted, info.speculative
        ));
    }
    fn unusable(&mut self, row: &Unusable<'_>) {
        self.seen.push(format!("unusable line {}", row.pos.line));
    }
    fn speculation_ended(&mut self, committed: bool) {
        self.seen
            .push(format!("speculation committed: {committed}"));
    }
}

/// Which observer a pass runs with.
#[derive(Clone, Copy, Debug)]
enum Seen {
    /// `()`: inert.
    Nothing,
    /// [`Watch`].
    Each,
}

/// What a pass concluded, in comparable form.
#[derive(Debug, PartialEq)]
struct Outcome {
    findings: Vec<Finding>,
    status: &'static str,
    events: u64,
    surface: Vec<u64>,
    open_turn: Option<i64>,
    committed: u64,
    total: u64,
    torn: Option<String>,
    crash: Option<String>,
    /// A zstd log's framing at the end.
    zstd: Option<String>,
    /// What a [`Watch`] saw (with [`Seen::Each`]).
    watched: Option<Watch>,
}

fn outcome(bytes: &[u8], threads: usize, step: usize) -> Outcome {
    outcome_seen(bytes, threads, step, Seen::Nothing)
}

fn outcome_seen(bytes: &[u8], threads: usize, step: usize, seen: Seen) -> Outcome {
    let opts = ScanOptions {
        threads,
        block_bytes: 1,
        ..ScanOptions::default()
    };
    outcome_with(bytes, &opts, step, seen)
}

/// The outcome of a plain log read from a file, its lines after the header read at positions
/// in chunks of `chunk` bytes; the offsets the progress hook was told.
fn outcome_positional(bytes: &[u8], threads: usize, chunk: usize) -> (Outcome, Vec<u64>) {
    outcome_positional_aside(bytes, threads, chunk, 0)
}

/// The same, helping threads stepping aside after every `every` blocks (0: never forced).
fn outcome_positional_aside(
    bytes: &[u8],
    threads: usize,
    chunk: usize,
    every: usize,
) -> (Outcome, Vec<u64>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("log.jsonl");
    std::fs::write(&path, bytes).expect("written");
    let file = std::fs::File::open(&path).expect("opened");
    let told = Arc::new(Mutex::new(Vec::new()));
    let hook = {
        let told = Arc::clone(&told);
        Arc::new(move |at: u64| told.lock().unwrap().push(at)) as Arc<dyn Fn(u64) + Send + Sync>
    };
    let opts = ScanOptions {
        threads,
        block_bytes: chunk,
        step_aside_every: every,
        positional: Some(Positional {
            file: Arc::new(file.try_clone().expect("cloned")),
            progress: Some(hook),
        }),
        ..ScanOptions::default()
    };
    let mut findings = Vec::new();
    let reader = BufReader::with_capacity(4, file);
    let s = scan_framed(reader, None, None, &opts, &mut findings, &mut ()).expect("read");
    let told = told.lock().unwrap().clone();
    (Outcome::of(s, findings, None), told)
}

fn outcome_with(bytes: &[u8], opts: &ScanOptions, step: usize, seen: Seen) -> Outcome {
    let mut findings = Vec::new();
    let mut watch = Watch::default();
    let observer: &mut dyn Observer = match seen {
        Seen::Nothing => &mut (),
        Seen::Each => &mut watch,
    };
    let reader = Chunky {
        bytes,
        step,
        end: End::Eof,
    };
    let s = if bytes.starts_with(&ZSTD_MAGIC) {
        let (z, framing) = ZstdReader::new(BufReader::with_capacity(4, reader)).expect("zstd");
        let z = BufReader::with_capacity(4, z);
        scan_framed(z, Some(&framing), None, opts, &mut findings, observer)
    } else {
        let reader = BufReader::with_capacity(4, reader);
        scan_framed(reader, None, None, opts, &mut findings, observer)
    }
    .expect("in memory");
    let watched = match seen {
        Seen::Nothing => None,
        Seen::Each => Some(watch),
    };
    Outcome::of(s, findings, watched)
}

impl Outcome {
    fn of(s: Scan, findings: Vec<Finding>, watched: Option<Watch>) -> Outcome {
        Outcome {
            findings,
            status: s.status().as_str(),
            events: s.events(),
            surface: s
                .state
                .as_ref()
                .map(|st| st.surface.seqs())
                .unwrap_or_default(),
            open_turn: s.state.as_ref().and_then(|st| st.lifecycle.open_turn()),
            committed: s.committed_bytes,
            total: s.total_bytes,
            torn: s.torn.map(|t| format!("{t:?}")),
            crash: s.crash.map(|c| format!("{c:?}")),
            zstd: s.zstd.map(|mut z| {
                // After a corrupt frame, how far the decoder had read depends on the sizes of
                // the reads (with one thread too); nothing uses it (repair refuses such a log).
                if z.stopped {
                    z.compressed_len = 0;
                }
                format!("{z:?}")
            }),
            watched,
        }
    }
}

fn logs() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for dir in ["fixtures", "hostile", "v0", "v3", "sample"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata")
            .join(dir);
        for entry in std::fs::read_dir(&dir).expect("testdata") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                let bytes = std::fs::read(&path).expect("readable");
                out.push((path.display().to_string(), bytes));
            }
        }
    }
    assert!(out.len() > 40, "the fixtures are there");
    out
}

/// The log, and damaged copies of it: cut inside a line (torn tail), a middle line replaced
/// by junk (crash tail or committed damage), invalid UTF-8 in the middle.
fn variants(bytes: &[u8]) -> Vec<Vec<u8>> {
    let ends: Vec<usize> = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i)
        .collect();
    let mut out = vec![bytes.to_vec()];
    if bytes.len() > 10 {
        out.push(bytes[..bytes.len() * 2 / 3].to_vec());
    }
    if ends.len() > 4 {
        let (a, b) = (ends[ends.len() / 2 - 1] + 1, ends[ends.len() / 2]);
        let mut junk = bytes[..a].to_vec();
        junk.extend_from_slice(b"not json");
        junk.extend_from_slice(&bytes[b..]);
        out.push(junk);
        let mut bad = bytes.to_vec();
        bad[a + 1] = 0xff;
        out.push(bad);
    }
    out
}

#[test]
fn parsing_threads_see_what_one_thread_sees() {
    let mut compared = 0;
    for (name, bytes) in logs() {
        for (v, log) in variants(&bytes).iter().enumerate() {
            for seen in [Seen::Nothing, Seen::Each] {
                let one = outcome_seen(log, 1, 1 << 20, seen);
                for (threads, step) in [(2, 1), (2, 7), (3, 64), (4, 4096)] {
                    let many = outcome_seen(log, threads, step, seen);
                    assert_eq!(
                        one, many,
                        "{name} (variant {v}): {threads} threads reading {step} bytes at a time, observer {seen:?}"
                    );
                    compared += 1;
                }
            }
            // Read at positions: each thread its own chunk of the file.
            let one = outcome(log, 1, 1 << 20);
            for (threads, chunk) in [(2, 1), (2, 7), (3, 64), (2, 4096)] {
                let (many, told) = outcome_positional(log, threads, chunk);
                assert_eq!(
                    one, many,
                    "{name} (variant {v}): {threads} threads reading chunks of {chunk} bytes at positions"
                );
                assert!(
                    told.windows(2).all(|w| w[0] <= w[1])
                        && told.iter().all(|&at| at <= log.len() as u64),
                    "{name} (variant {v}): progress moves forward within the file: {told:?}"
                );
                compared += 1;
            }
        }
    }
    assert!(compared > 800);
}

#[test]
fn helping_threads_that_step_aside_leave_the_pass_as_it_was() {
    // A helping thread that waits for the turn most of the time steps aside for a while and
    // comes back; forced here after every block or few, at positions and from a reader.
    let mut compared = 0;
    for (name, bytes) in logs() {
        for (v, log) in variants(&bytes).iter().enumerate() {
            let one = outcome(log, 1, 1 << 20);
            for (threads, every) in [(2, 1), (3, 2), (2, 5)] {
                let opts = ScanOptions {
                    threads,
                    block_bytes: 16,
                    step_aside_every: every,
                    ..ScanOptions::default()
                };
                let from_reader = outcome_with(log, &opts, 7, Seen::Nothing);
                assert_eq!(
                    one, from_reader,
                    "{name} (variant {v}): {threads} threads stepping aside every {every} blocks"
                );
                let (at_positions, _) = outcome_positional_aside(log, threads, 16, every);
                assert_eq!(
                    one, at_positions,
                    "{name} (variant {v}): {threads} threads stepping aside every {every} blocks, at positions"
                );
                compared += 1;
            }
        }
    }
    assert!(compared > 300);
}

/// A log with many lines (of format 3), so the threaded path sees many blocks.
fn threaded_log() -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/v3/nested-replace.jsonl");
    let bytes = std::fs::read(path).expect("testdata");
    let s = dshs::log::scan::scan(
        &bytes[..],
        None,
        &ScanOptions::default(),
        &mut Vec::new(),
        &mut (),
    )
    .expect("scan");
    assert_eq!(s.version, Some(3), "a format the parsing threads read");
    bytes
}

#[test]
fn a_reader_that_fails_midway_ends_the_pass_like_one_thread() {
    // The whole lines read before the error count; the error is returned.
    let bytes = threaded_log();
    for (threads, seen) in [1, 2, 3]
        .into_iter()
        .flat_map(|t| [(t, Seen::Nothing), (t, Seen::Each)])
    {
        let mut watch = Watch::default();
        let observer: &mut dyn Observer = match seen {
            Seen::Nothing => &mut (),
            Seen::Each => &mut watch,
        };
        let opts = ScanOptions {
            threads,
            block_bytes: 1,
            ..ScanOptions::default()
        };
        let Err(err) = scan_framed(
            BufReader::with_capacity(
                4,
                Chunky {
                    bytes: &bytes,
                    step: 5,
                    end: End::Fail,
                },
            ),
            None,
            None,
            &opts,
            &mut Vec::new(),
            observer,
        ) else {
            panic!("the read error surfaces ({threads} threads, observer {seen:?})");
        };
        assert_eq!(
            err.to_string(),
            "disk on fire",
            "{threads} threads, observer {seen:?}"
        );
    }
}

#[test]
fn a_reader_that_panics_on_a_worker_ends_the_pass_with_that_panic_not_a_hang() {
    // Every parsing thread reads: a panic inside a read happens on a worker (while the folding
    // thread waits for that worker's block) or on the folding thread itself (while workers wait
    // for work). Either way it must come back as a panic of the scan.
    let bytes = threaded_log();
    for (threads, seen) in [2, 3]
        .into_iter()
        .flat_map(|t| [(t, Seen::Nothing), (t, Seen::Each)])
    {
        let (tx, rx) = std::sync::mpsc::channel();
        let bytes = bytes.clone();
        std::thread::spawn(move || {
            let outcome = std::panic::catch_unwind(|| {
                let mut watch = Watch::default();
                let observer: &mut dyn Observer = match seen {
                    Seen::Nothing => &mut (),
                    Seen::Each => &mut watch,
                };
                let opts = ScanOptions {
                    threads,
                    block_bytes: 1,
                    ..ScanOptions::default()
                };
                let reader = Chunky {
                    bytes: &bytes,
                    step: 5,
                    end: End::Panic,
                };
                let _ = scan_framed(
                    BufReader::with_capacity(4, reader),
                    None,
                    None,
                    &opts,
                    &mut Vec::new(),
                    observer,
                );
            });
            let _ = tx.send(outcome.is_err());
        });
        let panicked = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| {
                panic!(
                    "the scan hung after a worker panicked ({threads} threads, observer {seen:?})"
                )
            });
        assert!(
            panicked,
            "the panic surfaces ({threads} threads, observer {seen:?})"
        );
    }
}

#[test]
fn parsing_threads_read_zstd_logs_like_one_thread() {
    // The same logs stored as DSH stores them (zstd frames of 3 lines), whole and with the
    // last frame torn: the decoder's end state and the frame rules must come out the same.
    // With a byte changed in a middle frame, how much plaintext the decoder hands out before
    // it notices (if it can) depends on the sizes of the reads (with one thread too), so
    // there both must only agree on the verdict.
    let mut compared = 0;
    for (name, bytes) in logs() {
        for (v, plain) in variants(&bytes).iter().enumerate() {
            let z = common::compress(plain, 3);
            if z.is_empty() {
                continue;
            }
            for (k, log) in [z.clone(), z[..z.len() * 2 / 3].to_vec()]
                .iter()
                .enumerate()
            {
                let one = outcome(log, 1, 1 << 20);
                for (threads, step) in [(2, 3), (3, 4096)] {
                    let many = outcome(log, threads, step);
                    assert_eq!(
                        one, many,
                        "{name} (variant {v}, stored {k}): {threads} threads reading {step} bytes at a time"
                    );
                    compared += 1;
                }
            }
            let mut corrupt = z.clone();
            let middle = corrupt.len() / 2;
            corrupt[middle] ^= 0x55;
            let one = outcome(&corrupt, 1, 7).status;
            for threads in [2, 3] {
                let many = outcome(&corrupt, threads, 7).status;
                assert_eq!(
                    one, many,
                    "{name} (variant {v}, corrupt): {threads} threads"
                );
            }
        }
    }
    assert!(compared > 400);
}
