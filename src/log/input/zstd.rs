//! Zstandard-framed logs (FORMAT.md §3.3), decoded frame by frame while streaming.
//!
//! [`ZstdReader`] is a `Read` adapter: it hands the plaintext to the ordinary line reader,
//! so the scan never sees compression. Beside the decoder runs a structural walker over the
//! compressed bytes (magic, frame header, block headers, checksum) that knows where each
//! frame ends without decompressing: that is what tells a *torn final frame* (EOF inside a
//! frame: crash damage) from a damaged complete frame (corruption). What the reader learns
//! goes to a shared [`Framing`] handle: plaintext offset → frame number while the scan runs,
//! and the end state ([`ZstdEnd`]) the scan turns into findings.
//!
//! A damaged block header can make a mid-file frame seem to run past EOF, which would pass
//! for a torn final frame and let `repair` cut every later frame. So while the walker spans
//! a frame, the bytes it covers are searched for the frame magic (after the frame's own), and
//! from each hit a [`Probe`] (its own walker and a decoder whose output is discarded) tries
//! to read one complete frame. At EOF inside a frame, a probe that completed one (decoded,
//! checksum verified) turns the "torn frame" into committed damage (`zstd-committed-damage`,
//! FORMAT.md §3.3). Probes go when their frame ends normally. All this works in one pass,
//! from a pipe too: probes see the bytes as the walker does, never seek back.
//!
//! Memory stays small: one input buffer, the decoder's window, and one `u64` per frame
//! (its plaintext start, for naming the frame of a finding). At most [`MAX_PROBES`] probes
//! live at once, each with a window of at most 2^[`PROBE_WINDOW_LOG`] bytes, and all run in
//! step over the same bytes, so a file full of fake magics costs at most that many extra
//! decoding passes over it: linear time, bounded memory. A frame that decompresses to
//! one gigantic line (a "zstd bomb") stops at the line-size guard once the line passes
//! [`max_line_bytes`] (a [`LimitHit`], as for a plain log).

use std::io::{self, Read};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use memchr::memmem;
use zstd::stream::raw::{DParameter, Decoder, InBuffer, Operation, OutBuffer};

use crate::log::codes::{Code, Severity};
use crate::log::finding::{Finding, Pos, Sink};
use crate::log::limits::{Guard, LimitHit};

use super::ZSTD_MAGIC;

pub use crate::log::limits::{DEFAULT_MAX_LINE, MAX_LINE_ENV, max_line_bytes};

/// Damage found in the framing (always an error: corruption).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameIssue {
    pub code: Code,
    pub frame: u64,
    /// Compressed offset of the frame's first byte.
    pub compressed: u64,
    /// Plaintext offset (and line) where the frame's output starts.
    pub plain: u64,
    pub line: u64,
    pub message: String,
}

/// The final frame, cut short by EOF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornFrame {
    pub frame: u64,
    /// Compressed offset of its first byte (`tornStart`: where `repair` truncates).
    pub start: u64,
    /// Plaintext offset and line where its output starts.
    pub plain_start: u64,
    pub line: u64,
    /// Plaintext bytes recovered from it.
    pub plain_len: u64,
    /// Frame magics inside it that were not tried as the start of a complete frame (too many
    /// at once, see the module doc): the check for committed damage was not complete.
    pub untried: u64,
}

/// What the reader knows once it has reached the end (or stopped at corruption).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZstdEnd {
    pub frames: u64,
    /// Plaintext offset just past the last complete frame.
    pub complete_end: u64,
    pub torn: Option<TornFrame>,
    pub issues: Vec<FrameIssue>,
    /// Compressed bytes read.
    pub compressed_len: u64,
    /// Plaintext bytes produced.
    pub plain_len: u64,
    /// Newlines in the plaintext.
    pub lines: u64,
    /// Reading stopped early at corruption: the plaintext is incomplete.
    pub stopped: bool,
}

#[derive(Debug, Default)]
struct Shared {
    /// Plaintext start offset of frame `i + 1`.
    starts: Vec<u64>,
    end: ZstdEnd,
}

/// A handle on what a [`ZstdReader`] has learnt; cheap to clone, shared with the reader.
#[derive(Debug, Clone, Default)]
pub struct Framing(Arc<Mutex<Shared>>);

impl Framing {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic elsewhere cannot leave the data inconsistent: plain fields.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The 1-based number of the frame holding plaintext offset `plain`.
    pub fn frame_of(&self, plain: u64) -> Option<u64> {
        let s = self.lock();
        let n = s.starts.partition_point(|&start| start <= plain);
        (n > 0).then_some(n as u64)
    }

    /// The state at the end of reading.
    pub fn end(&self) -> ZstdEnd {
        self.lock().end.clone()
    }
}

/// The structural walk over one frame (§3.3): where it ends, without decoding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walk {
    Magic,
    Descriptor,
    /// Window descriptor, dictionary id and content size: skipped.
    HeaderRest(u64),
    BlockHeader,
    Block {
        left: u64,
        last: bool,
    },
    Checksum(u64),
    End,
}

#[derive(Debug)]
struct Walker {
    state: Walk,
    stash: [u8; 4],
    have: usize,
    checksum: bool,
}

impl Walker {
    fn new() -> Self {
        Walker {
            state: Walk::Magic,
            stash: [0; 4],
            have: 0,
            checksum: false,
        }
    }

    fn at_boundary(&self) -> bool {
        self.state == Walk::Magic && self.have == 0
    }

    fn ended(&self) -> bool {
        self.state == Walk::End
    }

    /// Collect `n` bytes of a fixed-size field; true once complete.
    fn stash(&mut self, n: usize, bytes: &[u8], i: &mut usize) -> bool {
        let take = (n - self.have).min(bytes.len() - *i);
        self.stash[self.have..self.have + take].copy_from_slice(&bytes[*i..*i + take]);
        self.have += take;
        *i += take;
        if self.have == n {
            self.have = 0;
            true
        } else {
            false
        }
    }

    /// Zero-length skips end at once.
    fn settle(&mut self) {
        loop {
            self.state = match self.state {
                Walk::HeaderRest(0) => Walk::BlockHeader,
                Walk::Block { left: 0, last } if last => {
                    Walk::Checksum(if self.checksum { 4 } else { 0 })
                }
                Walk::Block { left: 0, .. } => Walk::BlockHeader,
                Walk::Checksum(0) => Walk::End,
                _ => return,
            }
        }
    }

    /// Walk `bytes` up to the end of the frame; returns how many belong to it.
    fn walk(&mut self, bytes: &[u8]) -> Result<usize, (Code, String)> {
        let mut i = 0;
        while i < bytes.len() && self.state != Walk::End {
            match self.state {
                Walk::Magic => {
                    if self.stash(4, bytes, &mut i) {
                        if self.stash != ZSTD_MAGIC {
                            return Err((
                                Code::ZstdBadMagic,
                                format!(
                                    "a zstd frame should start here but the bytes are {:02X} {:02X} {:02X} {:02X}, not the magic 28 B5 2F FD (skippable frames are not supported)",
                                    self.stash[0], self.stash[1], self.stash[2], self.stash[3]
                                ),
                            ));
                        }
                        self.state = Walk::Descriptor;
                    }
                }
                Walk::Descriptor => {
                    let d = bytes[i];
                    i += 1;
                    if d & 0x18 != 0 {
                        return Err((
                            Code::ZstdFrameInvalid,
                            format!("the frame header descriptor {d:#04x} sets reserved bits"),
                        ));
                    }
                    let single = d & 0x20 != 0;
                    let dict = [0, 1, 2, 4][usize::from(d & 3)];
                    let size = match d >> 6 {
                        0 => u64::from(single),
                        1 => 2,
                        2 => 4,
                        _ => 8,
                    };
                    self.checksum = d & 0x04 != 0;
                    self.state = Walk::HeaderRest(u64::from(!single) + dict + size);
                }
                Walk::BlockHeader => {
                    if self.stash(3, bytes, &mut i) {
                        let h =
                            u32::from_le_bytes([self.stash[0], self.stash[1], self.stash[2], 0]);
                        let last = h & 1 == 1;
                        let size = u64::from(h >> 3);
                        let left = match (h >> 1) & 3 {
                            1 => 1,
                            3 => {
                                return Err((
                                    Code::ZstdFrameInvalid,
                                    "a block header uses the reserved block type 3".to_owned(),
                                ));
                            }
                            _ => size,
                        };
                        self.state = Walk::Block { left, last };
                    }
                }
                Walk::HeaderRest(n) | Walk::Block { left: n, .. } | Walk::Checksum(n) => {
                    let skip = n.min((bytes.len() - i) as u64);
                    i += skip as usize;
                    self.state = match self.state {
                        Walk::HeaderRest(_) => Walk::HeaderRest(n - skip),
                        Walk::Block { last, .. } => Walk::Block {
                            left: n - skip,
                            last,
                        },
                        _ => Walk::Checksum(n - skip),
                    };
                }
                Walk::End => {}
            }
            self.settle();
        }
        Ok(i)
    }
}

/// Probes that may run at once inside one frame (see the module doc).
pub const MAX_PROBES: usize = 4;

/// The largest window a probe accepts (log2 bytes): DSH's default level uses at most 2^21,
/// and a hostile frame header cannot make a probe allocate more than this.
pub const PROBE_WINDOW_LOG: u32 = 23;

/// Output of the probes' decoders, discarded.
const PROBE_SCRATCH: usize = 32 * 1024;

static MAGIC_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(&ZSTD_MAGIC));

/// What feeding bytes to a [`Probe`] showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probed {
    /// Needs more bytes.
    Running,
    /// Not a frame that decodes: structure, decoder or checksum failed.
    Failed,
    /// One whole frame decoded and verified; it ends after this many of the bytes fed.
    Complete(usize),
}

/// An attempt to read one complete frame from a magic found inside another frame.
struct Probe {
    walker: Walker,
    decoder: Decoder<'static>,
    /// Compressed offset of its magic.
    start: u64,
    live: bool,
}

impl Probe {
    fn new() -> io::Result<Self> {
        let mut decoder = Decoder::new()?;
        decoder.set_parameter(DParameter::WindowLogMax(PROBE_WINDOW_LOG))?;
        Ok(Probe {
            walker: Walker::new(),
            decoder,
            start: 0,
            live: false,
        })
    }

    /// Start over at a magic at compressed offset `start` (the magic itself is fed here).
    fn restart(&mut self, start: u64, scratch: &mut [u8]) {
        self.walker = Walker::new();
        self.start = start;
        self.live = self.decoder.reinit().is_ok();
        if self.live {
            // Four bytes cannot complete a frame: this only leaves the probe running (or not).
            self.feed(&ZSTD_MAGIC, scratch);
        }
    }

    /// The next bytes after those fed so far (the decoder's output goes to `scratch`).
    fn feed(&mut self, bytes: &[u8], scratch: &mut [u8]) -> Probed {
        let outcome = self.step(bytes, scratch);
        if outcome != Probed::Running {
            self.live = false;
        }
        outcome
    }

    fn step(&mut self, bytes: &[u8], scratch: &mut [u8]) -> Probed {
        let Ok(n) = self.walker.walk(bytes) else {
            return Probed::Failed;
        };
        let mut input = InBuffer::around(&bytes[..n]);
        loop {
            let before = input.pos();
            let mut output = OutBuffer::around(&mut *scratch);
            let Ok(hint) = self.decoder.run(&mut input, &mut output) else {
                return Probed::Failed;
            };
            let produced = output.pos();
            if hint == 0 {
                // The decoder has read a whole frame: it must be where the structure ends.
                return if self.walker.ended() && input.pos() == n {
                    Probed::Complete(n)
                } else {
                    Probed::Failed
                };
            }
            let drained = input.pos() == n && produced < scratch.len();
            if drained || (input.pos() == before && produced == 0) {
                // Everything fed is used up: more is needed, unless the structure is over.
                return if self.walker.ended() {
                    Probed::Failed
                } else {
                    Probed::Running
                };
            }
        }
    }
}

/// The probes of the current frame, all at the same position in it.
#[derive(Default)]
struct Probes {
    slots: Vec<Probe>,
    scratch: Vec<u8>,
    /// The last bytes (up to 3) of the current frame searched so far, for a magic that
    /// straddles two searches.
    carry: [u8; 3],
    carry_len: usize,
    /// A probe read a complete frame: its compressed start and end.
    evidence: Option<(u64, u64)>,
    /// Magics passed over because every probe was busy.
    untried: u64,
}

impl Probes {
    /// The current frame ended normally: whatever the probes found lay inside it.
    fn reset(&mut self) {
        for p in &mut self.slots {
            p.live = false;
        }
        self.carry_len = 0;
        self.evidence = None;
        self.untried = 0;
    }

    /// The walker of the frame starting at compressed offset `frame_start` has walked
    /// `bytes`, which start at compressed offset `at`.
    fn scan(&mut self, bytes: &[u8], at: u64, frame_start: u64) {
        if self.evidence.is_some() || bytes.is_empty() {
            return;
        }
        // Bytes `..fed` have been given to every live probe: they all stand at `at + fed`.
        let mut fed = 0;
        // A magic begun in the carried bytes and finished in these.
        let mut joined = [0u8; 6];
        let k = bytes.len().min(3);
        joined[..self.carry_len].copy_from_slice(&self.carry[..self.carry_len]);
        joined[self.carry_len..self.carry_len + k].copy_from_slice(&bytes[..k]);
        let straddling = (0..self.carry_len)
            .find(|&s| s + 4 <= self.carry_len + k && joined[s..s + 4] == ZSTD_MAGIC);
        if let Some(s) = straddling {
            let start = at - (self.carry_len - s) as u64;
            self.candidate(
                bytes,
                at,
                &mut fed,
                s + 4 - self.carry_len,
                start,
                frame_start,
            );
        }
        for i in MAGIC_FINDER.find_iter(bytes) {
            if self.evidence.is_some() {
                return;
            }
            self.candidate(bytes, at, &mut fed, i + 4, at + i as u64, frame_start);
        }
        if self.evidence.is_none() {
            self.feed_live(bytes, at, &mut fed, bytes.len());
        }
        // Keep the last three bytes of the frame searched so far.
        let mut tail = [0u8; 6];
        let n = self.carry_len + k;
        tail[..self.carry_len].copy_from_slice(&self.carry[..self.carry_len]);
        tail[self.carry_len..n].copy_from_slice(&bytes[bytes.len() - k..]);
        let keep = n.min(3);
        self.carry[..keep].copy_from_slice(&tail[n - keep..n]);
        self.carry_len = keep;
    }

    /// A magic at compressed offset `start` ends at `bytes[magic_end]` (`bytes` start at
    /// offset `at`): bring the live probes there, then start a probe on it if one is free.
    fn candidate(
        &mut self,
        bytes: &[u8],
        at: u64,
        fed: &mut usize,
        magic_end: usize,
        start: u64,
        frame_start: u64,
    ) {
        if start == frame_start {
            // The frame's own magic.
            return;
        }
        self.feed_live(bytes, at, fed, magic_end);
        if self.evidence.is_some() {
            return;
        }
        let slot = match self.slots.iter().position(|p| !p.live) {
            Some(i) => i,
            None if self.slots.len() < MAX_PROBES => match Probe::new() {
                Ok(p) => {
                    self.slots.push(p);
                    self.slots.len() - 1
                }
                // No decoder to be had: this check is an extra, reading goes on without it.
                Err(_) => {
                    self.untried += 1;
                    return;
                }
            },
            None => {
                self.untried += 1;
                return;
            }
        };
        if self.scratch.is_empty() {
            self.scratch = vec![0; PROBE_SCRATCH];
        }
        self.slots[slot].restart(start, &mut self.scratch);
    }

    /// Feed `bytes[*fed..to]` to every live probe (`bytes` start at compressed offset `at`).
    fn feed_live(&mut self, bytes: &[u8], at: u64, fed: &mut usize, to: usize) {
        if to <= *fed {
            return;
        }
        let part = &bytes[*fed..to];
        for p in self.slots.iter_mut().filter(|p| p.live) {
            if let Probed::Complete(n) = p.feed(part, &mut self.scratch) {
                self.evidence = Some((p.start, at + (*fed + n) as u64));
                break;
            }
        }
        *fed = to;
        if self.evidence.is_some() {
            for p in &mut self.slots {
                p.live = false;
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Reading,
    /// EOF inside the final frame: drain what the decoder still holds.
    Flushing,
    /// The decoder failed inside a frame: walk on to learn whether the frame is complete
    /// (corruption) or cut by EOF (a torn final frame).
    Draining,
    Done,
}

const INPUT_BUFFER: usize = 128 * 1024;

/// Decompresses concatenated zstd frames, tracking frame boundaries (see the module doc).
pub struct ZstdReader<R> {
    inner: R,
    buf: Box<[u8]>,
    /// Decoder position, walker position and fill level within `buf`.
    pos: usize,
    walked: usize,
    len: usize,
    /// Compressed offset of `buf[0]`.
    base: u64,
    walker: Walker,
    walk_error: Option<(Code, String)>,
    decode_error: Option<String>,
    decoder: Decoder<'static>,
    /// The decoder reported the current frame finished.
    frame_done: bool,
    /// Complete frames looked for inside the current one (see the module doc).
    probes: Probes,
    shared: Framing,
    state: State,
    frame: u64,
    frame_start: u64,
    frame_plain_start: u64,
    frame_line: u64,
    frame_newlines: u64,
    plain: u64,
    newlines: u64,
    line_len: u64,
    last_byte: Option<u8>,
    complete_end: u64,
    max_line: u64,
}

impl<R: Read> ZstdReader<R> {
    pub fn new(inner: R) -> io::Result<(Self, Framing)> {
        Self::with_max_line(inner, max_line_bytes())
    }

    pub fn with_max_line(inner: R, max_line: u64) -> io::Result<(Self, Framing)> {
        let shared = Framing::default();
        let reader = ZstdReader {
            inner,
            buf: vec![0; INPUT_BUFFER].into_boxed_slice(),
            pos: 0,
            walked: 0,
            len: 0,
            base: 0,
            walker: Walker::new(),
            walk_error: None,
            decode_error: None,
            decoder: Decoder::new()?,
            frame_done: false,
            probes: Probes::default(),
            shared: shared.clone(),
            state: State::Reading,
            frame: 0,
            frame_start: 0,
            frame_plain_start: 0,
            frame_line: 1,
            frame_newlines: 0,
            plain: 0,
            newlines: 0,
            line_len: 0,
            last_byte: None,
            complete_end: 0,
            max_line,
        };
        Ok((reader, shared))
    }

    fn begin_frame(&mut self) {
        self.frame += 1;
        self.frame_start = self.base + self.walked as u64;
        self.frame_plain_start = self.plain;
        self.frame_line = self.newlines + 1;
        self.frame_newlines = 0;
        self.shared.lock().starts.push(self.plain);
    }

    fn end_frame(&mut self) -> io::Result<()> {
        if self.frame == 1 {
            let bytes = self.plain - self.frame_plain_start;
            if bytes == 0 || self.frame_newlines != 1 || self.last_byte != Some(b'\n') {
                let what = if bytes == 0 {
                    "it is empty".to_owned()
                } else if self.last_byte != Some(b'\n') {
                    format!("its {bytes} bytes do not end with a newline")
                } else {
                    format!("it holds {} lines ({bytes} bytes)", self.frame_newlines)
                };
                self.issue(
                    Code::ZstdHeaderFrame,
                    format!(
                        "corrupt Zstandard session log: first frame is not exactly one header line ({what})"
                    ),
                );
            }
        }
        self.complete_end = self.plain;
        self.walker = Walker::new();
        self.probes.reset();
        self.frame_done = false;
        self.decoder.reinit()
    }

    /// EOF inside the current frame: if a probe read a complete frame inside it, the frame is
    /// not torn but damaged in the committed region (FORMAT.md §3.3). Reports that and stops.
    fn committed_damage(&mut self) -> bool {
        let Some((start, end)) = self.probes.evidence else {
            return false;
        };
        let eof = self.base + self.len as u64;
        let why = self
            .decode_error
            .take()
            .map_or_else(String::new, |e| format!("; the decoder says: {e}"));
        self.issue(
            Code::ZstdCommittedDamage,
            format!(
                "corrupt Zstandard session log: zstd frame {} seems to run past the end of the log ({eof} bytes), yet a complete frame that decodes and passes its checksum starts inside it, at compressed bytes {start}..{end}: the frame is damaged (a block header?), not cut by a crash, and what follows it is committed{why}",
                self.frame
            ),
        );
        self.finish(false, true);
        true
    }

    fn issue(&mut self, code: Code, message: String) {
        let issue = FrameIssue {
            code,
            frame: self.frame,
            compressed: self.frame_start,
            plain: self.frame_plain_start,
            line: self.frame_line,
            message,
        };
        self.shared.lock().end.issues.push(issue);
    }

    fn finish(&mut self, torn: bool, stopped: bool) {
        self.state = State::Done;
        let torn = torn.then_some(TornFrame {
            frame: self.frame,
            start: self.frame_start,
            plain_start: self.frame_plain_start,
            line: self.frame_line,
            plain_len: self.plain - self.frame_plain_start,
            untried: self.probes.untried,
        });
        let mut s = self.shared.lock();
        s.end.frames = self.frame;
        s.end.complete_end = self.complete_end;
        s.end.torn = torn;
        s.end.compressed_len = self.base + self.pos as u64;
        s.end.plain_len = self.plain;
        s.end.lines = self.newlines;
        s.end.stopped = stopped;
    }

    /// Count the plaintext handed out; refuse a line longer than the limit.
    fn account(&mut self, out: &[u8]) -> io::Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        // SIMD searches: this count runs over every byte of plaintext.
        self.line_len = match memchr::memrchr(b'\n', out) {
            Some(i) => {
                let newlines = memchr::memchr_iter(b'\n', &out[..=i]).count() as u64;
                self.newlines += newlines;
                self.frame_newlines += newlines;
                (out.len() - i - 1) as u64
            }
            None => self.line_len + out.len() as u64,
        };
        self.plain += out.len() as u64;
        self.last_byte = out.last().copied();
        if self.line_len > self.max_line {
            self.finish(false, true);
            // The same line-size guard as a plain log's: dshs's limit, not damage (exit 4).
            return Err(LimitHit::new(
                Guard::LineBytes,
                self.max_line,
                self.line_len,
                true,
                format!("line {} (zstd frame {})", self.newlines + 1, self.frame),
            )
            .into_io());
        }
        Ok(())
    }

    /// More compressed input; false at EOF.
    fn refill(&mut self) -> io::Result<bool> {
        if self.pos == self.len {
            self.base += self.len as u64;
            self.pos = 0;
            self.walked = 0;
            self.len = 0;
        } else if self.len == self.buf.len() {
            // Keep the bytes the decoder has not consumed yet.
            self.buf.copy_within(self.pos..self.len, 0);
            self.base += self.pos as u64;
            self.walked -= self.pos;
            self.len -= self.pos;
            self.pos = 0;
        }
        loop {
            match self.inner.read(&mut self.buf[self.len..]) {
                Ok(n) => {
                    self.len += n;
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn walk_ahead(&mut self) {
        if self.walk_error.is_some() || self.walker.ended() || self.walked == self.len {
            return;
        }
        if self.walker.at_boundary() {
            self.begin_frame();
        }
        match self.walker.walk(&self.buf[self.walked..self.len]) {
            Ok(n) => {
                let walked = &self.buf[self.walked..self.walked + n];
                let at = self.base + self.walked as u64;
                self.probes.scan(walked, at, self.frame_start);
                self.walked += n;
            }
            Err(e) => self.walk_error = Some(e),
        }
    }

    fn read_inner(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.state {
                State::Done => return Ok(0),
                State::Flushing => {
                    let mut input = InBuffer::around(&[]);
                    let mut output = OutBuffer::around(&mut *out);
                    let produced = match self.decoder.run(&mut input, &mut output) {
                        Ok(_) => output.pos(),
                        Err(_) => 0,
                    };
                    if produced == 0 {
                        self.finish(true, false);
                        return Ok(0);
                    }
                    self.account(&out[..produced])?;
                    return Ok(produced);
                }
                State::Draining => {
                    // A structurally complete frame that fails to decode is corruption
                    // wherever it sits, the final frame included (§3.3: complete frames are
                    // decompressed and checksum-verified; a failure is corruption). Only a frame
                    // cut short by EOF is the torn final frame.
                    if self.walk_error.is_some() || self.walker.ended() {
                        let why = self.decode_error.take().unwrap_or_default();
                        let why = match self.walk_error.take() {
                            Some((_, structural)) => format!("{why}; {structural}"),
                            None => why,
                        };
                        self.issue(
                            Code::ZstdFrameInvalid,
                            format!("zstd frame {} fails to decode: {why}", self.frame),
                        );
                        self.finish(false, true);
                        return Ok(0);
                    }
                    self.pos = self.walked;
                    if self.walked == self.len && !self.refill()? {
                        // EOF inside the damaged frame: it is the torn final frame, unless a
                        // complete frame lies inside what seemed to be its blocks.
                        if !self.committed_damage() {
                            self.finish(true, false);
                        }
                        return Ok(0);
                    }
                    self.walk_ahead();
                    self.pos = self.walked;
                    continue;
                }
                State::Reading => {}
            }
            if self.frame_done && self.walker.ended() {
                self.end_frame()?;
            }
            self.walk_ahead();
            let feed = self.pos < self.walked || (self.walker.ended() && !self.frame_done);
            if feed {
                let mut input = InBuffer::around(&self.buf[self.pos..self.walked]);
                let mut output = OutBuffer::around(&mut *out);
                match self.decoder.run(&mut input, &mut output) {
                    Ok(hint) => {
                        let (used, produced) = (input.pos(), output.pos());
                        self.pos += used;
                        self.account(&out[..produced])?;
                        if hint == 0 {
                            if !self.walker.ended() || self.pos != self.walked {
                                self.issue(
                                    Code::ZstdFrameInvalid,
                                    format!(
                                        "zstd frame {} ends (for the decoder) before its last block",
                                        self.frame
                                    ),
                                );
                                self.finish(false, true);
                                return Ok(produced);
                            }
                            self.frame_done = true;
                        } else if used == 0
                            && produced == 0
                            && (self.walker.ended() || self.pos < self.walked)
                        {
                            // The structure says the frame is over (or input is there), yet the
                            // decoder neither reads nor writes: it cannot finish this frame.
                            self.issue(
                                Code::ZstdFrameInvalid,
                                format!(
                                    "zstd frame {} is incomplete for the decoder although its last block is there",
                                    self.frame
                                ),
                            );
                            self.finish(false, true);
                            return Ok(0);
                        }
                        if produced > 0 {
                            return Ok(produced);
                        }
                        if used > 0 || self.frame_done {
                            continue;
                        }
                    }
                    Err(e) => {
                        self.decode_error = Some(e.to_string());
                        self.state = State::Draining;
                        continue;
                    }
                }
            }
            if let Some((code, why)) = self.walk_error.clone()
                && self.pos == self.walked
            {
                let message = match code {
                    Code::ZstdBadMagic => {
                        format!("corrupt Zstandard session log: frame {}: {why}", self.frame)
                    }
                    _ => format!("zstd frame {} is malformed: {why}", self.frame),
                };
                self.issue(code, message);
                self.finish(false, true);
                return Ok(0);
            }
            if self.walked == self.len && !self.walker.ended() && !self.refill()? {
                if self.walker.at_boundary() {
                    self.finish(false, false);
                } else if !self.committed_damage() {
                    self.state = State::Flushing;
                }
                continue;
            }
        }
    }
}

impl<R: Read> Read for ZstdReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        self.read_inner(out)
    }
}

/// Encode `lines` (whole lines) as one zstd frame with the content checksum, at the default
/// level, as DSH writes an append batch (§3.3, §21.5). Empty input gives no frame at all.
pub fn encode_frame(lines: &[u8]) -> io::Result<Vec<u8>> {
    if lines.is_empty() {
        return Ok(Vec::new());
    }
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 0)?;
    enc.include_checksum(true)?;
    enc.set_pledged_src_size(Some(lines.len() as u64))?;
    io::Write::write_all(&mut enc, lines)?;
    enc.finish()
}

/// Report what the framing says at the end of a scan (§3.3, §6.3). `torn_line` is the
/// scan's final line without a newline, if any. Returns true when the file ends in a torn
/// final frame.
pub fn report_end(end: &ZstdEnd, torn_line: Option<(u64, u64, u64)>, sink: &mut dyn Sink) -> bool {
    let at = |line: u64, byte: u64, code: Code, message: String| Finding {
        code,
        severity: code.severity(),
        pos: Pos { line, byte },
        seq: None,
        event_type: None,
        message,
    };
    for i in &end.issues {
        sink.push(at(
            i.line,
            i.plain,
            i.code,
            format!("{} (compressed offset {})", i.message, i.compressed),
        ));
    }
    if let Some((line, byte, len)) = torn_line
        && byte < end.complete_end
        && !end.stopped
    {
        sink.push(at(
            line,
            byte,
            Code::ZstdTornRecordInFrame,
            format!(
                "corrupt Zstandard session log: complete frame contains a torn JSONL record: the complete frames end inside line {line} ({len} bytes without a newline)"
            ),
        ));
    }
    let Some(t) = &end.torn else {
        return false;
    };
    let partial = torn_line
        .filter(|&(_, byte, _)| byte >= t.plain_start)
        .map_or_else(String::new, |(line, _, len)| {
            format!("; its final partial line {line} ({len} bytes) is dropped")
        });
    debug_assert_eq!(Code::ZstdTornFrame.severity(), Severity::Warning);
    let how = "cut short, a write cut by a crash";
    let untried = match t.untried {
        0 => String::new(),
        n => format!(
            "; {n} frame magic{} inside it could not be tried as the start of a complete frame (too many at once), so damage there would pass for this torn frame",
            if n == 1 { "" } else { "s" }
        ),
    };
    sink.push(at(
        t.line,
        t.plain_start,
        Code::ZstdTornFrame,
        format!(
            "torn final zstd frame {} (compressed bytes {}..{}, {how}): {} bytes decompressed from it{partial}{untried}",
            t.frame, t.start, end.compressed_len, t.plain_len
        ),
    ));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(parts: &[&str]) -> Vec<u8> {
        parts
            .iter()
            .flat_map(|p| encode_frame(p.as_bytes()).unwrap())
            .collect()
    }

    fn read_all(bytes: &[u8], max_line: u64) -> (io::Result<Vec<u8>>, ZstdEnd, Framing) {
        let (mut r, framing) = ZstdReader::with_max_line(bytes, max_line).unwrap();
        let mut out = Vec::new();
        // Small reads exercise the output-full paths.
        let mut chunk = [0u8; 7];
        let got = loop {
            match r.read(&mut chunk) {
                Ok(0) => break Ok(out),
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) => break Err(e),
            }
        };
        let end = framing.end();
        (got, end, framing)
    }

    #[test]
    fn frames_are_concatenated_and_located() {
        let data = frames(&["h\n", "a\nb\n", "c\n"]);
        let (out, end, framing) = read_all(&data, 1 << 20);
        assert_eq!(out.unwrap(), b"h\na\nb\nc\n");
        assert_eq!(end.frames, 3);
        assert_eq!(end.complete_end, 8);
        assert_eq!(end.compressed_len, data.len() as u64);
        assert!(end.torn.is_none() && end.issues.is_empty() && !end.stopped);
        assert_eq!(end.lines, 4);
        let f: Vec<_> = [0, 1, 2, 5, 6, 7]
            .iter()
            .map(|&b| framing.frame_of(b))
            .collect();
        assert_eq!(f, [Some(1), Some(1), Some(2), Some(2), Some(3), Some(3)]);
    }

    #[test]
    fn a_cut_final_frame_is_torn_at_any_length() {
        let head = frames(&["h\n", "a\n"]);
        let last = encode_frame(b"b\nc\n").unwrap();
        for cut in 0..last.len() {
            let mut data = head.clone();
            data.extend_from_slice(&last[..cut]);
            let (out, end, _) = read_all(&data, 1 << 20);
            let out = out.unwrap();
            assert!(out.starts_with(b"h\na\n"), "cut {cut}");
            assert!(b"h\na\nb\nc\n".starts_with(&out), "cut {cut}");
            assert!(end.issues.is_empty(), "cut {cut}: {:?}", end.issues);
            assert_eq!(end.complete_end, 4);
            if cut == 0 {
                assert!(end.torn.is_none());
            } else {
                let t = end.torn.unwrap();
                assert_eq!((t.frame, t.start, t.plain_start), (3, head.len() as u64, 4));
            }
        }
    }

    #[test]
    fn damage_in_a_complete_frame_is_corruption() {
        let mut data = frames(&["h\n", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", "b\n"]);
        let second = encode_frame(b"h\n").unwrap().len();
        // Flip a byte of the checksum of frame 2 (its last 4 bytes).
        let f2_end = second
            + encode_frame(b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n")
                .unwrap()
                .len();
        data[f2_end - 1] ^= 0xFF;
        let (_, end, _) = read_all(&data, 1 << 20);
        assert!(end.stopped && end.torn.is_none());
        assert_eq!(end.issues.len(), 1);
        assert_eq!(end.issues[0].code, Code::ZstdFrameInvalid);
        assert_eq!(end.issues[0].frame, 2);
    }

    #[test]
    fn a_complete_final_frame_failing_its_checksum_is_corruption_not_a_torn_frame() {
        let mut data = frames(&["h\n", "a\n", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n"]);
        let last = data.len() - 1;
        data[last] ^= 0xFF;
        let (_, end, _) = read_all(&data, 1 << 20);
        assert!(end.stopped && end.torn.is_none());
        assert_eq!(end.issues.len(), 1);
        assert_eq!(end.issues[0].code, Code::ZstdFrameInvalid);
        assert_eq!(end.issues[0].frame, 3);
        assert!(
            end.issues[0].message.contains("checksum"),
            "{:?}",
            end.issues
        );
    }

    #[test]
    fn bad_magic_and_header_frame() {
        let mut data = frames(&["h\n", "a\n"]);
        data.extend_from_slice(b"junk-after");
        let (_, end, _) = read_all(&data, 1 << 20);
        assert_eq!(end.issues[0].code, Code::ZstdBadMagic);
        assert_eq!(end.issues[0].frame, 3);
        let (_, end, _) = read_all(&frames(&["h\na\n", "b\n"]), 1 << 20);
        assert_eq!(end.issues[0].code, Code::ZstdHeaderFrame);
    }

    /// Any damage — a flipped byte anywhere, a cut anywhere, or both — ends reading with a
    /// verdict: no panic, no endless loop, output never beyond the intact plaintext's frames.
    #[test]
    fn damage_anywhere_terminates_with_a_verdict() {
        let text = [
            "h\n",
            "alpha beta gamma\n",
            "delta\nepsilon\n",
            "zeta eta theta iota\n",
        ];
        let data = frames(&text);
        let mut cases = Vec::new();
        for at in 0..data.len() {
            for mask in [0x01u8, 0x80, 0xFF] {
                let mut d = data.clone();
                d[at] ^= mask;
                cases.push(d.clone());
                cases.push(d[..data.len() - 2].to_vec());
            }
            cases.push(data[..at].to_vec());
        }
        for d in cases {
            let (mut r, framing) = ZstdReader::with_max_line(&d[..], 1 << 20).unwrap();
            let mut chunk = [0u8; 5];
            let mut calls = 0;
            loop {
                calls += 1;
                assert!(calls < 10_000, "reading does not end");
                match r.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            let end = framing.end();
            assert!(end.frames <= 5);
            assert!(
                end.torn.is_some()
                    || !end.issues.is_empty()
                    || end.compressed_len == d.len() as u64
            );
        }
    }

    /// A reader that hands out at most `step` bytes per read (a pipe, a slow writer).
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(self.data.len()).min(buf.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// Read all of `bytes` through a [`Trickle`]; the reader is returned for its probes.
    fn trickle(bytes: &[u8], step: usize) -> (ZstdEnd, ZstdReader<Trickle<'_>>) {
        let inner = Trickle { data: bytes, step };
        let (mut r, framing) = ZstdReader::with_max_line(inner, 1 << 20).unwrap();
        let mut chunk = [0u8; 64];
        let mut calls = 0;
        while let Ok(n @ 1..) = r.read(&mut chunk) {
            calls += 1;
            assert!(calls < 1_000_000, "reading does not end ({n})");
        }
        (framing.end(), r)
    }

    /// Offset of the first block header of the frame starting at `frame`.
    fn first_block_header(bytes: &[u8], frame: usize) -> usize {
        let d = bytes[frame + 4];
        let single = d & 0x20 != 0;
        let dict = [0, 1, 2, 4][usize::from(d & 3)];
        let size = [usize::from(single), 2, 4, 8][usize::from(d >> 6)];
        frame + 5 + usize::from(!single) + dict + size
    }

    fn set_block_size(bytes: &mut [u8], at: usize, size: u32) {
        let h = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], 0]);
        let h = (h & 7) | (size << 3);
        bytes[at..at + 3].copy_from_slice(&h.to_le_bytes()[..3]);
    }

    /// A frame of one raw block holding `payload` verbatim: no content size, no checksum, a
    /// 128 KiB window (`payload` must not be longer).
    fn raw_frame(payload: &[u8]) -> Vec<u8> {
        let mut f = ZSTD_MAGIC.to_vec();
        f.extend_from_slice(&[0x00, 7 << 3]);
        let h = 1 | (u32::try_from(payload.len()).unwrap() << 3);
        f.extend_from_slice(&h.to_le_bytes()[..3]);
        f.extend_from_slice(payload);
        f
    }

    const TEXT: [&str; 6] = [
        "h\n",
        "alpha beta gamma delta\n",
        "epsilon zeta eta theta\n",
        "iota kappa lambda mu\n",
        "nu xi omicron pi rho\n",
        "sigma tau upsilon phi\n",
    ];

    fn frame_starts() -> Vec<usize> {
        let mut at = 0;
        TEXT.iter()
            .map(|t| {
                let start = at;
                at += encode_frame(t.as_bytes()).unwrap().len();
                start
            })
            .collect()
    }

    #[test]
    fn a_block_run_past_eof_mid_file_is_committed_damage_at_any_read_size() {
        let data = frames(&TEXT);
        let starts = frame_starts();
        // Within the block maximum (the decoder waits for input) and beyond it (the decoder
        // fails at once); the frame damaged is frame 3.
        for size in [data.len() as u32, (1 << 21) - 1] {
            let mut d = data.clone();
            let at = first_block_header(&d, starts[2]);
            set_block_size(&mut d, at, size);
            for step in [1, 2, 3, 5, 7, 4096] {
                let (end, _) = trickle(&d, step);
                let what = format!("size {size}, step {step}: {:?}", end.issues);
                assert!(end.torn.is_none() && end.stopped, "{what}");
                assert_eq!(end.issues.len(), 1, "{what}");
                let issue = &end.issues[0];
                assert_eq!(issue.code, Code::ZstdCommittedDamage, "{what}");
                assert_eq!(issue.frame, 3, "{what}");
                assert_eq!(issue.compressed, starts[2] as u64, "{what}");
                // The evidence is frame 4, named by its compressed bytes.
                let span = format!("compressed bytes {}..{}", starts[3], starts[4]);
                assert!(issue.message.contains(&span), "{what}");
            }
        }
    }

    #[test]
    fn a_final_frame_cut_by_eof_is_torn_at_any_read_size() {
        let data = frames(&TEXT);
        let last = *frame_starts().last().unwrap();
        for cut in [last + 3, last + 5, data.len() - 1] {
            for step in [1, 3, 4096] {
                let (end, _) = trickle(&data[..cut], step);
                assert!(end.issues.is_empty(), "cut {cut}: {:?}", end.issues);
                assert_eq!(end.torn.map(|t| t.start), Some(last as u64), "cut {cut}");
            }
        }
    }

    /// A frame found inside a frame that then ends normally is no evidence: the probes go
    /// with that frame, and a later torn frame is torn.
    #[test]
    fn probes_end_with_their_frame() {
        let inner = encode_frame(b"x\n").unwrap();
        let mut data = frames(&TEXT[..2]);
        data.extend(raw_frame(&inner));
        let torn_start = data.len();
        data.extend(frames(&TEXT[2..3]));
        data.pop();
        for step in [1, 4096] {
            let (end, _) = trickle(&data, step);
            assert!(end.issues.is_empty(), "{:?}", end.issues);
            assert_eq!(
                end.torn.map(|t| (t.frame, t.start)),
                Some((4, torn_start as u64))
            );
        }
        // The same frame cut inside: the complete one inside it makes it committed damage
        // (the rule only ever turns a cut into a refusal).
        let mut cut = frames(&TEXT[..2]);
        let mut padded = inner.clone();
        padded.extend_from_slice(b"more");
        // 9 bytes of frame and block header, the inner frame, half the rest.
        cut.extend_from_slice(&raw_frame(&padded)[..9 + inner.len() + 2]);
        let (end, _) = trickle(&cut, 4096);
        assert_eq!(end.issues.len(), 1);
        assert_eq!(end.issues[0].code, Code::ZstdCommittedDamage);
    }

    /// A frame full of fake magics, each starting a frame that never ends: at most
    /// `MAX_PROBES` probes run, the rest are passed over, and reading ends with the DSH
    /// verdict (a torn frame) in linear time.
    #[test]
    fn fake_magics_start_a_bounded_number_of_probes() {
        // Each period: a raw block header (the probe of the previous magic lands on it), then
        // a magic, a frame header with a 1 KiB window and a raw block up to the next period.
        let filler = 52u32;
        let period = 12 + filler;
        let mut payload = Vec::new();
        while payload.len() + period as usize <= 120 * 1024 {
            payload.extend_from_slice(&((period - 3) << 3).to_le_bytes()[..3]);
            payload.extend_from_slice(&ZSTD_MAGIC);
            payload.extend_from_slice(&[0x00, 0x00]);
            payload.extend_from_slice(&(filler << 3).to_le_bytes()[..3]);
            payload.extend(std::iter::repeat_n(b'.', filler as usize));
        }
        let magics = payload.len() / period as usize;
        let mut data = frames(&TEXT[..2]);
        let hostile = raw_frame(&payload);
        data.extend_from_slice(&hostile[..hostile.len() - 1]);
        for step in [1, 4096] {
            let (end, r) = trickle(&data, step);
            assert!(end.issues.is_empty(), "{:?}", end.issues);
            let untried = (magics - MAX_PROBES) as u64;
            assert_eq!(
                end.torn.as_ref().map(|t| (t.frame, t.untried)),
                Some((3, untried))
            );
            assert_eq!(r.probes.slots.len(), MAX_PROBES);
            assert!(
                r.probes.slots.iter().all(|p| p.live),
                "the fakes stay alive"
            );
            // The torn-frame finding says the check was not complete.
            let mut findings = Vec::new();
            report_end(&end, None, &mut findings);
            let said = format!("{untried} frame magics inside it could not be tried");
            assert!(
                findings[0].message.contains(&said),
                "{}",
                findings[0].message
            );
        }
    }

    #[test]
    fn a_bomb_stops_at_the_line_limit() {
        let big = vec![b'x'; 4 << 20];
        let data = encode_frame(&big).unwrap();
        assert!(data.len() < 4096);
        let (out, _, _) = read_all(&data, 1 << 20);
        let e = out.unwrap_err();
        assert!(e.to_string().contains("limit of 1048576 bytes"), "{e}");
        assert!(crate::log::limits::LimitHit::of_io(&e).is_some(), "{e}");
    }
}
