//! `--follow` for `show` and `validate`: the file (or a session directory's newest
//! generation) followed pass after pass — one pass while the file stays the same, a new one
//! from its start when it is replaced or a newer generation appears — until Ctrl-C.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use anyhow::{Result, anyhow};
use crossbeam_channel::Receiver;

use dshs::log::finding::Sink;
use dshs::log::follow::store::{StorageEnd, StoreFollow};
use dshs::log::follow::{self, Control, Ended, FollowReader, Idle, Pending, Waker};
use dshs::log::input::{self, Opened};
use dshs::log::scan::{self, Observer, Scan, ScanOptions};

use crate::cli::FollowArgs;
use crate::render::escape;

/// The one [`Control`] of this process; Ctrl-C stops it (the handler is set up once).
pub fn control() -> Result<Arc<Control>> {
    static CONTROL: OnceLock<Arc<Control>> = OnceLock::new();
    if let Some(c) = CONTROL.get() {
        return Ok(Arc::clone(c));
    }
    let c = Control::new();
    let stop = Arc::clone(&c);
    ctrlc::set_handler(move || {
        // A second Ctrl-C does not wait for the pass to conclude.
        if stop.stopped() {
            std::process::exit(130);
        }
        stop.stop();
    })
    .map_err(|e| anyhow!("cannot catch Ctrl-C to stop following: {e}"))?;
    Ok(Arc::clone(CONTROL.get_or_init(|| c)))
}

/// One followed log: what is being read and how the reader is woken.
pub struct Session {
    /// What the user named (findings are reported under it).
    pub name: String,
    /// The session directory, when one was named.
    dir: Option<PathBuf>,
    /// The file read now.
    file: PathBuf,
    /// A session of a SQLite store (`store.db#ID`): the store and the session id.
    store: Option<(PathBuf, String)>,
    control: Arc<Control>,
    waker: Waker,
    /// A store session: what the store reader said at the last read of the current pass.
    storage: Mutex<Option<Arc<Mutex<StorageEnd>>>>,
}

/// The end of one pass over a followed log.
pub enum Next {
    /// Following stopped (Ctrl-C), or the log cannot be read on (the decoder stopped at
    /// damage): the pass's result is the answer.
    Done,
    /// Read again from the start: the note says why.
    Again(String),
}

impl Session {
    pub fn start(arg: &str, args: &FollowArgs) -> Result<Session> {
        if arg == "-" {
            return Err(anyhow!(
                "--follow reads a file or a session directory, not standard input"
            ));
        }
        let control = control()?;
        let poll = args.poll.map(|ms| Duration::from_millis(ms as u64));
        if let Some((db, id)) = dshs::log::sqlite::split_session_path(arg) {
            // Woken by changes to the store's directory (its WAL grows), checked each
            // interval; the change counter decides.
            let watch_dir = db
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
            let waker = Waker::new(&control, &[&watch_dir], poll);
            return Ok(Session {
                name: arg.to_owned(),
                dir: None,
                file: db.clone(),
                store: Some((db, id)),
                control,
                waker,
                storage: Mutex::default(),
            });
        }
        let given = Path::new(arg);
        if given.is_file() && dshs::log::sqlite::has_magic(given).unwrap_or(false) {
            return Err(anyhow!(
                "--follow follows one session of a store: name it as {arg}#ID"
            ));
        }
        let dir = given.is_dir().then(|| given.to_path_buf());
        let file = input::resolve(given).map_err(|e| anyhow!("{e}"))?;
        let watch_dir = dir
            .clone()
            .or_else(|| file.parent().map(Path::to_path_buf))
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("."));
        let waker = Waker::new(&control, &[&watch_dir], poll);
        Ok(Session {
            name: arg.to_owned(),
            dir,
            file,
            store: None,
            control,
            waker,
            storage: Mutex::default(),
        })
    }

    /// Open the current file for a pass from its start.
    pub fn open(&self, idle: Option<Idle>) -> Result<(Opened, Arc<Mutex<Option<Ended>>>)> {
        if let Some((db, id)) = &self.store {
            let reader =
                StoreFollow::open(db, id, Arc::clone(&self.control), self.waker.interval())
                    .map_err(|e| anyhow!("cannot follow {}: {e}", self.name))?;
            let ended = reader.ended();
            *self.storage.lock().unwrap_or_else(PoisonError::into_inner) = Some(reader.storage());
            let opened = Opened {
                name: self.name.clone(),
                path: None,
                reader: Box::new(std::io::BufReader::new(reader)),
                framing: None,
                older: Vec::new(),
                file: None,
                pipe: false,
            };
            return Ok((opened, ended));
        }
        let reader = FollowReader::open(
            &self.file,
            self.dir.as_deref(),
            Arc::clone(&self.control),
            self.waker.interval(),
            idle,
        )
        .map_err(|e| anyhow!("cannot follow {}: {e}", self.file.display()))?;
        let ended = reader.ended();
        let opened = follow::open(reader, self.name.clone()).map_err(|e| anyhow!("{e}"))?;
        Ok((opened, ended))
    }

    /// After a pass: done, or read again (and from which file).
    pub fn next(&mut self, ended: &Mutex<Option<Ended>>) -> Next {
        let ended = ended.lock().unwrap_or_else(PoisonError::into_inner).take();
        match ended {
            None | Some(Ended::Stopped) => Next::Done,
            Some(Ended::Replaced(why)) => Next::Again(format!(
                "{}: {why}; reading it again from its start",
                escape(&self.name)
            )),
            Some(Ended::NewGeneration(path)) => {
                let note = format!(
                    "{}: a new generation appeared; following {} from its start",
                    escape(&self.name),
                    escape(&path.display().to_string())
                );
                self.file = path;
                Next::Again(note)
            }
        }
    }

    /// For a store session: the storage layer's findings and torn tail at the last read.
    pub fn storage_end(&self) -> Option<StorageEnd> {
        let slot = self.storage.lock().unwrap_or_else(PoisonError::into_inner);
        slot.as_ref()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).clone())
    }

    /// Stop following (the output is gone).
    pub fn stop(&self) {
        self.control.stop();
    }

    /// Whether Ctrl-C was pressed.
    pub fn stopped(&self) -> bool {
        self.control.stopped()
    }

    /// After a pass: whether to read again from the start (the note saying why is printed).
    pub fn again(&mut self, ended: &Mutex<Option<Ended>>, quiet: bool) -> bool {
        match self.next(ended) {
            Next::Again(why) => {
                note(&why, quiet);
                true
            }
            Next::Done => false,
        }
    }

    /// Copy what a pass writes to `out` as it comes, flushed; the first write error stops
    /// following (nobody reads on, as after `| head`) so that the pass ends.
    pub fn pump(&self, written: Receiver<Vec<u8>>, out: &mut dyn Write) -> Option<io::Error> {
        for chunk in written {
            if let Err(e) = out.write_all(&chunk).and_then(|()| out.flush()) {
                self.stop();
                return Some(e);
            }
        }
        None
    }
}

/// One followed pass over `opened`, with the options of [`scan_options`].
pub fn scan(
    opened: Opened,
    base: ScanOptions,
    sink: &mut dyn Sink,
    observer: &mut dyn Observer,
) -> io::Result<Scan> {
    scan::scan_framed(
        opened.reader,
        opened.framing.as_ref(),
        opened.path.as_deref(),
        &scan_options(base),
        sink,
        observer,
    )
}

/// The note when a pass ended because the log cannot be read on, not because of Ctrl-C.
pub fn note_unreadable(name: &str, quiet: bool) {
    note(
        &format!(
            "{}: the log cannot be read past this point; following ends",
            escape(name)
        ),
        quiet,
    );
}

/// The options of a followed pass: one line at a time (reading ahead would wait for bytes not
/// written yet), no progress bar.
pub fn scan_options(base: ScanOptions) -> ScanOptions {
    ScanOptions {
        threads: 1,
        positional: None,
        ..base
    }
}

/// A note on stderr (unless `--quiet`).
pub fn note(text: &str, quiet: bool) {
    if !quiet {
        crate::render::diag!("dshs: note: {text}");
    }
}

/// A one-line status on stderr while a followed log is idle (only on a terminal): rewritten
/// in place, cleared before anything else is printed.
#[derive(Default)]
pub struct StatusLine {
    shown: bool,
}

impl StatusLine {
    pub fn wanted(quiet: bool) -> bool {
        !quiet && std::io::stderr().is_terminal()
    }

    pub fn show(&mut self, text: &str) {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[K{text}");
        let _ = err.flush();
        self.shown = true;
    }

    pub fn clear(&mut self) {
        if std::mem::take(&mut self.shown) {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
    }
}

/// What is pending at the end of the log so far, in words (for a status line).
pub fn pending_words(p: Pending) -> Option<String> {
    if p.line_bytes > 0 {
        Some(format!(
            "{} byte{} of an incomplete line pending",
            p.line_bytes,
            if p.line_bytes == 1 { "" } else { "s" }
        ))
    } else if p.frame_bytes > 0 {
        Some(format!(
            "{} byte{} of an incomplete zstd frame pending",
            p.frame_bytes,
            if p.frame_bytes == 1 { "" } else { "s" }
        ))
    } else {
        None
    }
}

/// Output of one session's follower under a storage root: whole lines handed to the thread
/// that writes standard output, each flush at once; `prefix` (for `show`) names the session
/// on each line (human) or in each record (JSON, as `"session"`).
pub struct Lines {
    to: crossbeam_channel::Sender<Vec<u8>>,
    buf: Vec<u8>,
    prefix: Option<(String, bool)>,
}

impl Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let whole = memchr::memrchr(b'\n', &self.buf).map_or(0, |i| i + 1);
        if whole == 0 {
            return Ok(());
        }
        let rest = self.buf.split_off(whole);
        let lines = std::mem::replace(&mut self.buf, rest);
        let lines = match &self.prefix {
            None => lines,
            Some((name, json)) => {
                let mut out = Vec::with_capacity(lines.len() + 64);
                for line in lines.split_inclusive(|&b| b == b'\n') {
                    match line.strip_prefix(b"{") {
                        Some(rest) if *json => {
                            out.extend_from_slice(b"{\"session\":");
                            out.extend_from_slice(
                                serde_json::to_string(name).unwrap_or_default().as_bytes(),
                            );
                            out.push(b',');
                            out.extend_from_slice(rest);
                        }
                        _ => {
                            out.extend_from_slice(name.as_bytes());
                            out.extend_from_slice(b": ");
                            out.extend_from_slice(line);
                        }
                    }
                }
                out
            }
        };
        self.to
            .send(lines)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// Whether `arg` names a storage root (a directory that is not itself a session).
pub fn is_root(arg: &str) -> bool {
    let p = Path::new(arg);
    p.is_dir() && !input::is_session_dir(p)
}

/// Follow every session below a storage root, sessions created later included, each with
/// `each(session name, its output)` on a thread of its own, until Ctrl-C. The outcomes of
/// the sessions.
pub fn follow_root<F>(
    root: &str,
    args: &FollowArgs,
    quiet: bool,
    prefix: Option<bool>,
    out: &mut dyn Write,
    each: F,
) -> Result<Vec<crate::exit::Outcome>>
where
    F: Fn(&str, &mut Lines) -> Result<crate::exit::Outcome> + Sync,
{
    let control = control()?;
    let interval = args
        .poll
        .map_or(follow::SAFETY_NET, |ms| Duration::from_millis(ms as u64));
    let waker = Waker::new(&control, &[Path::new(root)], args.poll.map(|_| interval));
    let (to, written) = crossbeam_channel::unbounded::<Vec<u8>>();
    let mut known = std::collections::HashSet::new();
    let mut outcomes = Vec::new();
    std::thread::scope(|scope| -> Result<()> {
        let mut to = Some(to);
        let mut handles = Vec::new();
        let mut failed = None;
        let mut first_scan = true;
        loop {
            if let Some(sender) = &to {
                let found = input::find_sessions(Path::new(root))
                    .map_err(|e| anyhow!("cannot list {root}: {e}"))?;
                for dir in found {
                    if !known.insert(dir.clone()) {
                        continue;
                    }
                    let name = dir.display().to_string();
                    if !first_scan {
                        note(
                            &format!("{}: a new session; following it", escape(&name)),
                            quiet,
                        );
                    }
                    let mut lines = Lines {
                        to: sender.clone(),
                        buf: Vec::new(),
                        prefix: prefix.map(|json| (name.clone(), json)),
                    };
                    let each = &each;
                    handles.push(dshs::log::limits::spawn_scoped(scope, move || {
                        each(&name, &mut lines)
                    }));
                }
                first_scan = false;
            }
            match written.recv_timeout(waker.interval()) {
                Ok(chunk) => {
                    if let Err(e) = out.write_all(&chunk).and_then(|()| out.flush()) {
                        failed = Some(e);
                        control.stop();
                        to = None;
                    }
                }
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
            }
            if control.stopped() {
                // No new session from now on; the followers end and close the channel.
                to = None;
            }
        }
        for h in handles {
            outcomes.push(
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?,
            );
        }
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    })?;
    Ok(outcomes)
}
