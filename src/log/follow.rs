//! Following a log while its session runs (`--follow`): a reader that, at the end of the file,
//! waits for more instead of ending, so the one streaming pass goes on with the state it has.
//!
//! Following is "the reader said not yet", not a second engine (STYLE.md): the pass reads
//! through a [`FollowReader`], which hands out only what is complete enough to read — for a
//! plain log every byte (the line reader keeps an incomplete last line pending until its
//! `\n` arrives), for a zstd log whole frames only (a partial frame is pending). When
//! following stops (Ctrl-C) the reader hands out what it holds and reports the end of the
//! input: the pass then concludes exactly as a one-shot run over the file as it stands, so
//! the end-of-log states (an open turn, a torn line, a crash tail) become findings only then.
//!
//! A file that shrinks or is replaced (another inode, a different first line), or a session
//! directory that gains a newer generation, ends the input too, with [`Ended`] saying why: the
//! caller notes it and starts a new pass over the new file from its start.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use super::input::{self, ZSTD_MAGIC};

pub mod store;

/// How often the size is checked when file-system events are watched too: a safety net for
/// file systems that send none (network mounts) or events that were missed.
pub const SAFETY_NET: Duration = Duration::from_millis(1000);

/// Bytes read from the file at a time.
const CHUNK: usize = 128 * 1024;

/// The bytes of the first line compared to tell a rewritten file from a grown one.
const HEAD: usize = 4096;

/// Why the input of a followed log ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Following was stopped (Ctrl-C): the log as it stands is the answer.
    Stopped,
    /// The file shrank or was replaced: read the file at the path again from its start.
    Replaced(String),
    /// A session directory has a newer generation: follow it from its start.
    NewGeneration(PathBuf),
}

/// Shared by the reader, the waker and whoever stops following (a Ctrl-C handler).
#[derive(Debug)]
pub struct Control {
    stop: AtomicBool,
    wake: Sender<()>,
    woken: Receiver<()>,
}

impl Control {
    pub fn new() -> Arc<Control> {
        // One pending wake is enough: a burst of events coalesces into one look at the file.
        let (wake, woken) = crossbeam_channel::bounded(1);
        Arc::new(Control {
            stop: AtomicBool::new(false),
            wake,
            woken,
        })
    }

    /// Stop following: the reader reads what is there and ends the input.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake();
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Something may have changed: look at the file again.
    pub fn wake(&self) {
        let _ = self.wake.try_send(());
    }

    /// Sleep until woken or `timeout` passes.
    fn wait(&self, timeout: Duration) {
        let _ = self.woken.recv_timeout(timeout);
    }
}

/// How the reader learns that the file changed.
pub struct Waker {
    /// Kept alive while following: dropping it ends the watch.
    _watcher: Option<notify::RecommendedWatcher>,
    /// The longest sleep between two looks at the file.
    interval: Duration,
}

impl Waker {
    /// Watch `paths` (the file and its directory) with file-system events, checking the size
    /// every [`SAFETY_NET`] as well; or, with `poll`, only look every `poll`.
    pub fn new(control: &Arc<Control>, paths: &[&Path], poll: Option<Duration>) -> Waker {
        if let Some(interval) = poll {
            return Waker {
                _watcher: None,
                interval,
            };
        }
        use notify::Watcher;
        let c = Arc::clone(control);
        let watcher = notify::recommended_watcher(move |_event: notify::Result<notify::Event>| {
            c.wake();
        });
        let watcher = watcher.ok().map(|mut w| {
            for p in paths {
                // A path that cannot be watched is still polled by the safety net.
                let _ = w.watch(p, notify::RecursiveMode::NonRecursive);
            }
            w
        });
        Waker {
            _watcher: watcher,
            interval: SAFETY_NET,
        }
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }
}

/// What is waiting for more bytes when the reader goes idle (for a status line).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pending {
    /// Bytes of an incomplete last line (plain log).
    pub line_bytes: u64,
    /// Bytes of an incomplete last frame (zstd log).
    pub frame_bytes: u64,
}

/// Called each time the reader has read everything there is and is about to wait.
pub type Idle = Arc<dyn Fn(Pending) + Send + Sync>;

/// Identity of an open file: device and inode.
fn identity(m: &std::fs::Metadata) -> (u64, u64) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        (m.dev(), m.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        (0, 0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// Too few bytes yet to tell plain from zstd.
    Unknown,
    Plain,
    Zstd,
    /// Framing the reader cannot walk (damage): pass everything on, the decoder reports it.
    Raw,
}

/// Reads a growing log, waiting at its end (see the module doc).
pub struct FollowReader {
    path: PathBuf,
    /// A session directory whose newer generations are followed.
    dir: Option<PathBuf>,
    file: File,
    id: (u64, u64),
    /// Bytes read from the file.
    pos: u64,
    /// The file's first bytes (up to its first `\n`, at most [`HEAD`]).
    head: Vec<u8>,
    framing: Framing,
    /// Read but not handed out yet; `held[start..ready]` may be handed out (whole frames).
    held: Vec<u8>,
    start: usize,
    ready: usize,
    /// Bytes handed out since the last `\n` (plain log).
    partial: u64,
    control: Arc<Control>,
    interval: Duration,
    idle: Option<Idle>,
    ended: Arc<Mutex<Option<Ended>>>,
}

impl FollowReader {
    /// Follow the file at `path` from its start; `dir`: the session directory it is the
    /// newest generation of.
    pub fn open(
        path: &Path,
        dir: Option<&Path>,
        control: Arc<Control>,
        interval: Duration,
        idle: Option<Idle>,
    ) -> io::Result<FollowReader> {
        let file = File::open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(io::Error::other(format!(
                "{} is not a regular file: only a regular file can be followed",
                path.display()
            )));
        }
        Ok(FollowReader {
            path: path.to_path_buf(),
            dir: dir.map(Path::to_path_buf),
            file,
            id: identity(&meta),
            pos: 0,
            head: Vec::new(),
            framing: Framing::Unknown,
            held: Vec::new(),
            start: 0,
            ready: 0,
            partial: 0,
            control,
            interval,
            idle,
            ended: Arc::new(Mutex::new(None)),
        })
    }

    /// Why the input ended (None while it has not, or when the reader of the bytes stopped
    /// by itself, e.g. a zstd decoder at damage).
    pub fn ended(&self) -> Arc<Mutex<Option<Ended>>> {
        Arc::clone(&self.ended)
    }

    fn end(&mut self, why: Ended) -> io::Result<usize> {
        *self.ended.lock().unwrap_or_else(PoisonError::into_inner) = Some(why);
        Ok(0)
    }

    /// Read more of the file into `held`; the number of bytes read (0 at its end).
    fn fill(&mut self) -> io::Result<usize> {
        if self.start > 0 {
            self.held.drain(..self.start);
            self.ready -= self.start;
            self.start = 0;
        }
        let at = self.held.len();
        self.held.resize(at + CHUNK, 0);
        let n = loop {
            match self.file.read(&mut self.held[at..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.held.truncate(at);
                    return Err(e);
                }
            }
        };
        self.held.truncate(at + n);
        if self.head.len() < HEAD && !self.head.contains(&b'\n') {
            let new = &self.held[at..];
            let want = (HEAD - self.head.len()).min(new.len());
            let cut = memchr::memchr(b'\n', &new[..want]).map_or(want, |i| i + 1);
            self.head.extend_from_slice(&new[..cut]);
        }
        self.pos += n as u64;
        self.release(false);
        Ok(n)
    }

    /// Decide how much of `held` may be handed out; `all` at the end of following.
    fn release(&mut self, all: bool) {
        if self.framing == Framing::Unknown {
            let h = &self.held[self.start..];
            self.framing = if h.len() >= 4 || (all && !h.is_empty()) {
                if ZSTD_MAGIC.starts_with(&h[..h.len().min(4)]) {
                    Framing::Zstd
                } else {
                    Framing::Plain
                }
            } else if !h.is_empty() && !ZSTD_MAGIC.starts_with(h) {
                Framing::Plain
            } else {
                Framing::Unknown
            };
        }
        match self.framing {
            Framing::Unknown => {}
            Framing::Plain | Framing::Raw => self.ready = self.held.len(),
            Framing::Zstd => {
                while self.ready < self.held.len() {
                    match frame_len(&self.held[self.ready..]) {
                        FrameLen::Complete(n) => self.ready += n,
                        FrameLen::Partial => break,
                        FrameLen::Damaged => {
                            self.framing = Framing::Raw;
                            self.ready = self.held.len();
                        }
                    }
                }
            }
        }
        if all {
            self.ready = self.held.len();
        }
    }

    /// At the end of what the file holds: has it been replaced, or a newer generation come?
    fn changed(&mut self) -> Option<Ended> {
        if let Some(dir) = &self.dir
            && let Ok(found) = input::generations(dir)
            && let Some((_, newest)) = found.first()
            && *newest != self.path
        {
            return Some(Ended::NewGeneration(newest.clone()));
        }
        // A path that is gone for now (renamed away, not yet created again) is waited for.
        if let Ok(m) = std::fs::metadata(&self.path)
            && identity(&m) != self.id
        {
            return Some(Ended::Replaced(
                "the file was replaced by another one".to_owned(),
            ));
        }
        let len = self.file.metadata().map_or(self.pos, |m| m.len());
        if len < self.pos {
            return Some(Ended::Replaced(format!(
                "the file shrank from {} to {len} bytes",
                self.pos
            )));
        }
        if !self.head.is_empty()
            && read_at(&self.file, self.head.len()).is_ok_and(|h| h != self.head)
        {
            return Some(Ended::Replaced("the file's first line changed".to_owned()));
        }
        None
    }

    fn pending(&self) -> Pending {
        let unready = (self.held.len() - self.ready) as u64;
        match self.framing {
            Framing::Zstd => Pending {
                line_bytes: 0,
                frame_bytes: unready,
            },
            _ => Pending {
                line_bytes: self.partial + unready,
                frame_bytes: 0,
            },
        }
    }
}

/// Open a followed log for one pass, like [`input::open_file`]: a zstd log (its magic decides)
/// is decoded as its frames arrive. The pass must read it one line at a time
/// (`ScanOptions::threads` 1): reading ahead in blocks would wait for bytes not yet written.
pub fn open(reader: FollowReader, name: String) -> Result<input::Opened, input::InputError> {
    let path = reader.path.clone();
    let (reader, framing) = input::decode(io::BufReader::with_capacity(CHUNK, reader), &name)?;
    Ok(input::Opened {
        name,
        path: Some(path),
        reader,
        framing,
        older: Vec::new(),
        file: None,
        pipe: false,
    })
}

/// The first `len` bytes of `file` (fewer when it is shorter), without moving its offset.
fn read_at(file: &File, len: usize) -> io::Result<Vec<u8>> {
    let mut out = vec![0; len];
    let mut got = 0;
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        while got < len {
            match file.read_at(&mut out[got..], got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = file;
    }
    out.truncate(got);
    Ok(out)
}

enum FrameLen {
    Complete(usize),
    Partial,
    Damaged,
}

/// The length of the zstd frame at the start of `bytes`, if it is all there (§3.3).
fn frame_len(bytes: &[u8]) -> FrameLen {
    if bytes.len() < 4 {
        return if ZSTD_MAGIC.starts_with(bytes) {
            FrameLen::Partial
        } else {
            FrameLen::Damaged
        };
    }
    if bytes[..4] != ZSTD_MAGIC {
        return FrameLen::Damaged;
    }
    match zstd::zstd_safe::find_frame_compressed_size(bytes) {
        Ok(n) if n <= bytes.len() => FrameLen::Complete(n),
        Ok(_) => FrameLen::Partial,
        // Too short for its own blocks: more is coming. Other errors are damage in a frame
        // whose bytes are all there, or a header the walk cannot read yet: tell them apart by
        // whether the frame header itself is complete.
        Err(code) => {
            if zstd::zstd_safe::get_error_name(code).contains("Src size is incorrect") {
                FrameLen::Partial
            } else {
                FrameLen::Damaged
            }
        }
    }
}

impl Read for FollowReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.start < self.ready {
                let n = buf.len().min(self.ready - self.start);
                let out = &self.held[self.start..self.start + n];
                buf[..n].copy_from_slice(out);
                self.partial = match memchr::memrchr(b'\n', out) {
                    Some(i) => (n - i - 1) as u64,
                    None => self.partial + n as u64,
                };
                self.start += n;
                return Ok(n);
            }
            let stopping = self.control.stopped();
            if self.fill()? > 0 {
                continue;
            }
            if stopping {
                // Everything the file holds, an incomplete last line or frame included: the
                // pass concludes on the log as it stands.
                self.release(true);
                if self.start < self.ready {
                    continue;
                }
                return self.end(Ended::Stopped);
            }
            if let Some(why) = self.changed() {
                return self.end(why);
            }
            if let Some(idle) = &self.idle {
                idle(self.pending());
            }
            self.control.wait(self.interval);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn follower(path: &Path) -> (FollowReader, Arc<Control>) {
        let control = Control::new();
        let r = FollowReader::open(
            path,
            None,
            Arc::clone(&control),
            Duration::from_millis(20),
            None,
        )
        .unwrap();
        (r, control)
    }

    /// A follower of a new plain log holding `bytes` (kept while the returned dir lives).
    fn following(bytes: &[u8]) -> (tempfile::TempDir, PathBuf, FollowReader, Arc<Control>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, bytes).unwrap();
        let (r, c) = follower(&path);
        (dir, path, r, c)
    }

    #[test]
    fn a_zstd_frame_is_handed_out_only_once_it_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl.zstd");
        let frame = input::zstd::encode_frame(b"{\"a\":1}\n").unwrap();
        let mut f = File::create(&path).unwrap();
        f.write_all(&frame[..frame.len() - 3]).unwrap();
        let (mut r, _c) = follower(&path);
        r.fill().unwrap();
        assert_eq!(r.framing, Framing::Zstd);
        assert_eq!(r.ready, 0, "a partial frame is pending");
        assert_eq!(r.pending().frame_bytes, frame.len() as u64 - 3);
        f.write_all(&frame[frame.len() - 3..]).unwrap();
        r.fill().unwrap();
        assert_eq!(r.ready, frame.len(), "the whole frame is ready");
    }

    #[test]
    fn every_cut_of_a_frame_is_partial_and_a_wrong_magic_is_damage() {
        let frame = input::zstd::encode_frame(&b"{\"a\":1}\n".repeat(50)).unwrap();
        for cut in 0..frame.len() {
            assert!(
                matches!(frame_len(&frame[..cut]), FrameLen::Partial),
                "cut at {cut} of {}",
                frame.len()
            );
        }
        assert!(matches!(frame_len(&frame), FrameLen::Complete(n) if n == frame.len()));
        assert!(matches!(frame_len(b"{\"a\":1}\n"), FrameLen::Damaged));
    }

    #[test]
    fn stopping_hands_out_the_rest_then_ends() {
        let (_dir, _, mut r, c) = following(b"line\npart");
        let mut got = vec![0; 64];
        let n = r.read(&mut got).unwrap();
        assert_eq!(&got[..n], b"line\npart");
        c.stop();
        assert_eq!(r.read(&mut got).unwrap(), 0);
        assert_eq!(*r.ended().lock().unwrap(), Some(Ended::Stopped));
    }

    #[test]
    fn a_shrunk_file_ends_the_input_with_a_reason() {
        let (_dir, path, mut r, _c) = following(b"header\nline two\n");
        let mut got = vec![0; 64];
        assert_eq!(r.read(&mut got).unwrap(), 16);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(3)
            .unwrap();
        assert_eq!(r.read(&mut got).unwrap(), 0);
        let ended = r.ended().lock().unwrap().clone();
        assert!(
            matches!(&ended, Some(Ended::Replaced(why)) if why.contains("shrank")),
            "{ended:?}"
        );
    }
}
