//! Changing a log on disk without losing a byte (FORMAT.md §2.1, §14.5, §21.5): the
//! live-writer probe on `session.lock`, a stamp that notices another writer, the sidecar that
//! keeps every byte cut off, and an append that is undone on any failure. Commands that write
//! (`repair`, `compact`) decide *what* to write; this module decides *how*.
//!
//! The one edit it knows: keep the first `keep` bytes exactly as they are, drop the rest
//! (saved to a sidecar first), append whole lines. Committed bytes are never rewritten.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The lock file a live DSH writer holds in the session directory (§2.1).
pub const LOCK_FILE: &str = "session.lock";

/// Sidecar names are `<log file name>` + this + `<n>`, n = 1, 2, … (the first free one).
pub const SIDECAR_INFIX: &str = ".dshs-cut-";

/// How many sidecar names to try before giving up (a directory full of them is a mistake).
const SIDECAR_TRIES: u32 = 10_000;

/// Why a write did not happen, or was undone.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Another process holds an exclusive lock on `session.lock`: a live writer (§2.1).
    #[error(
        "a live writer holds the session: another process has locked {}; stop it (or wait for it to exit) and try again — nothing was written",
        lock.display()
    )]
    LiveWriter { lock: PathBuf },
    /// The file changed between reading and writing: someone else is appending to it.
    #[error(
        "{} changed while dshs was working on it (another process is writing to it); nothing was written",
        path.display()
    )]
    Changed { path: PathBuf },
    /// A journal records an interrupted write that the log no longer matches.
    #[error(
        "{} records an interrupted dshs write that {} does not match (it was changed since); nothing was written — compare the two and the log's dshs-cut sidecars by hand, then remove the journal",
        journal.display(),
        log.display()
    )]
    JournalMismatch { journal: PathBuf, log: PathBuf },
    /// `--output` never replaces an existing file.
    #[error("{} already exists; dshs never overwrites a file, choose another output path", path.display())]
    OutputExists { path: PathBuf },
    /// Failed before the log was touched.
    #[error("{what}: {source}; nothing was changed")]
    Untouched {
        what: String,
        #[source]
        source: io::Error,
    },
    /// Failed after the log was touched; its original bytes were put back.
    #[error("{what}: {source}; the log was restored to its original {len} bytes{}", sidecar_note(sidecar.as_deref()))]
    RolledBack {
        what: String,
        #[source]
        source: io::Error,
        len: u64,
        sidecar: Option<PathBuf>,
    },
    /// Failed after the log was touched, and putting the original bytes back failed too.
    #[error(
        "{what}: {source}; restoring the original bytes ALSO failed ({rollback}): the log may be damaged{}",
        sidecar_note(sidecar.as_deref())
    )]
    RollbackFailed {
        what: String,
        #[source]
        source: io::Error,
        rollback: io::Error,
        sidecar: Option<PathBuf>,
    },
}

fn sidecar_note(sidecar: Option<&Path>) -> String {
    sidecar.map_or_else(String::new, |p| {
        format!(
            "; the bytes after the committed prefix are also saved in {}",
            p.display()
        )
    })
}

impl WriteError {
    /// A refusal because someone else is writing (exit 3), not an I/O failure.
    pub fn is_live_writer(&self) -> bool {
        matches!(
            self,
            WriteError::LiveWriter { .. } | WriteError::Changed { .. }
        )
    }
}

/// The log opened to be edited in place; failing that, nothing was touched.
fn open_for_writing(path: &Path) -> Result<File, WriteError> {
    let shown = path.display();
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(untouched(format!("cannot open {shown} for writing")))
}

fn untouched(what: impl Into<String>) -> impl FnOnce(io::Error) -> WriteError {
    let what = what.into();
    move |source| WriteError::Untouched { what, source }
}

/// A failure injected on purpose, to prove that every failure is undone. Commands accept it
/// only in debug builds (see `cmd::repair`); release builds always pass `Fault::None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Fault {
    #[default]
    None,
    /// Writing the sidecar fails.
    Sidecar,
    /// The append fails after writing this many bytes.
    AppendAfter(usize),
    /// The final `sync_all` fails.
    Sync,
    /// The process dies (`abort`, like a crash: no destructor, no rollback) at this point.
    Kill(Point),
    /// The process stops at this point until a line arrives on standard input (it says so
    /// on standard error first), so a test can act in the window deterministically.
    Pause(Point),
}

/// Named points of [`apply_in_place`], in order, for [`Fault::Kill`] and [`Fault::Pause`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// Entered, before the file is opened and its stamp compared.
    Start,
    /// The sidecar file exists and holds the cut bytes, not yet synced.
    SidecarWritten,
    /// The sidecar is durable; the stamp is about to be compared again.
    SidecarSynced,
    /// The journal of an edit that re-writes committed data is durable (only such edits).
    Journaled,
    /// The log is truncated to the committed prefix; nothing appended yet.
    Truncated,
    /// The append is written, not yet synced.
    Appended,
    /// The log is synced: the edit is complete.
    Synced,
}

impl Point {
    pub const ALL: [Point; 7] = [
        Point::Start,
        Point::SidecarWritten,
        Point::SidecarSynced,
        Point::Journaled,
        Point::Truncated,
        Point::Appended,
        Point::Synced,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Point::Start => "start",
            Point::SidecarWritten => "sidecar-written",
            Point::SidecarSynced => "sidecar-synced",
            Point::Journaled => "journaled",
            Point::Truncated => "truncated",
            Point::Appended => "appended",
            Point::Synced => "synced",
        }
    }

    fn parse(s: &str) -> Option<Point> {
        Point::ALL.into_iter().find(|p| p.name() == s)
    }
}

impl Fault {
    /// Kill or pause here if asked to (test builds of the commands only).
    fn at(self, point: Point) {
        if let Fault::Kill(p) | Fault::Pause(p) = self
            && p == point
        {
            stop(matches!(self, Fault::Kill(_)), point.name());
        }
    }
}

/// Where a `kill:POINT` or `pause:POINT` test fault (of a log or a store write) stops the
/// process: it dies like a crash, or waits for a line on standard input, said on standard
/// error first.
pub(crate) fn stop(kill: bool, point: &str) {
    if kill {
        std::process::abort();
    }
    eprintln!("dshs-test: paused at {point}");
    let mut line = String::new();
    let _ = io::stdin().read_line(&mut line);
}

impl Fault {
    /// `sidecar`, `append:N`, `sync`, `kill:POINT` or `pause:POINT` (see [`Point::name`]).
    pub fn parse(s: &str) -> Option<Fault> {
        match s {
            "sidecar" => Some(Fault::Sidecar),
            "sync" => Some(Fault::Sync),
            _ => {
                if let Some(n) = s.strip_prefix("append:") {
                    n.parse().ok().map(Fault::AppendAfter)
                } else if let Some(p) = s.strip_prefix("kill:") {
                    Point::parse(p).map(Fault::Kill)
                } else {
                    s.strip_prefix("pause:")
                        .and_then(Point::parse)
                        .map(Fault::Pause)
                }
            }
        }
    }
}

fn injected(what: &str) -> io::Error {
    io::Error::other(format!("injected fault: {what}"))
}

/// The `session.lock` of the session directory holding `log` (beside the real file, so a
/// log reached through a symbolic link locks the same file as one named directly).
pub fn lock_path(log: &Path) -> PathBuf {
    let real = fs::canonicalize(log).unwrap_or_else(|_| log.to_owned());
    real.with_file_name(LOCK_FILE)
}

/// Whether `log` sits in a session directory (§2.1): its name is a canonical generation
/// file name, so its writers lock the directory's `session.lock`.
pub fn in_session_dir(log: &Path) -> bool {
    log.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(crate::log::input::is_generation_name)
}

/// What a writer locks to exclude the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// The session directory's `session.lock`, as a live DSH writer holds it (§2.1).
    SessionLock,
    /// A log outside a session directory: the file itself. Every dshs writer, and any other
    /// tool that takes `flock` on the file, is excluded; a program that appends without
    /// locking (`echo >> log`) is not, and only the stamp checks can notice it.
    LogFile,
}

/// An exclusive `flock` held until dropped (closing the file releases it).
#[derive(Debug)]
pub struct WriterLock {
    path: PathBuf,
    kind: LockKind,
    _file: File,
}

impl WriterLock {
    /// Take the lock that excludes every other cooperating writer of `log`, without
    /// waiting: `session.lock` beside a log in a session directory — created if absent, as
    /// DSH creates it, and never deleted (removing a lock file lets two writers lock two
    /// different inodes) — else the log file itself. Held: `WriteError::LiveWriter`.
    pub fn acquire(log: &Path) -> Result<WriterLock, WriteError> {
        let (path, kind) = Self::target(log);
        let file = match kind {
            LockKind::SessionLock => OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                // A lock file we may not write (a read-only directory entry) still locks.
                .or_else(|_| File::open(&path)),
            LockKind::LogFile => File::open(&path),
        }
        .map_err(untouched(format!("cannot open {}", path.display())))?;
        Self::lock(file, path, kind)
    }

    /// The same lock for a look that changes nothing (`--dry-run`, `--output`): probed and
    /// held while planning, never created. `Ok(None)`: there is no `session.lock` to probe.
    pub fn probe(log: &Path) -> Result<Option<WriterLock>, WriteError> {
        let (path, kind) = Self::target(log);
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound && kind == LockKind::SessionLock => {
                return Ok(None);
            }
            Err(e) => return Err(untouched(format!("cannot open {}", path.display()))(e)),
        };
        Self::lock(file, path, kind).map(Some)
    }

    fn target(log: &Path) -> (PathBuf, LockKind) {
        if in_session_dir(log) {
            (lock_path(log), LockKind::SessionLock)
        } else {
            (log.to_owned(), LockKind::LogFile)
        }
    }

    /// A non-blocking exclusive lock (std uses `flock(LOCK_EX | LOCK_NB)` on Unix, the call
    /// DSH uses).
    fn lock(file: File, path: PathBuf, kind: LockKind) -> Result<WriterLock, WriteError> {
        match file.try_lock() {
            Ok(()) => Ok(WriterLock {
                path,
                kind,
                _file: file,
            }),
            Err(TryLockError::WouldBlock) => Err(WriteError::LiveWriter { lock: path }),
            Err(TryLockError::Error(e)) => {
                Err(untouched(format!("cannot lock {}", path.display()))(e))
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn kind(&self) -> LockKind {
        self.kind
    }
}

/// Bytes at the end of a log that a [`Stamp`] covers: a change there with the same length
/// and modification time (an in-place rewrite of the tail) is noticed too.
const STAMP_TAIL: u64 = 64 * 1024;

/// Length, modification time and a digest of the last [`STAMP_TAIL`] bytes of a file: if
/// any of them changes between reading the log and writing it, another process is writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub len: u64,
    pub modified: Option<SystemTime>,
    pub tail: u64,
}

impl Stamp {
    pub fn of(path: &Path) -> io::Result<Stamp> {
        Stamp::of_file(&File::open(path)?)
    }

    fn of_file(file: &File) -> io::Result<Stamp> {
        let m = file.metadata()?;
        let len = m.len();
        let from = len.saturating_sub(STAMP_TAIL);
        let mut tail = Vec::with_capacity((len - from) as usize);
        read_at(file, from, len - from, &mut tail)?;
        Ok(Stamp {
            len,
            modified: m.modified().ok(),
            tail: xxhash_rust::xxh3::xxh3_64(&tail),
        })
    }
}

/// `len` bytes from `offset` of `file` into `out`, without moving the file's own offset
/// (a copy may be reading from it).
fn read_at(file: &File, offset: u64, len: u64, out: &mut Vec<u8>) -> io::Result<()> {
    let start = out.len();
    out.resize(start + len as usize, 0);
    let buf = &mut out[start..];
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        let mut done = 0;
        while done < buf.len() {
            match std::os::windows::fs::FileExt::seek_read(
                file,
                &mut buf[done..],
                offset + done as u64,
            )? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => done += n,
            }
        }
        Ok(())
    }
}

/// How appended lines are stored: as they are, or (a zstd log) as one new zstd frame with
/// the content checksum, as DSH appends a durable batch (§3.3, §14.5, §21.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    #[default]
    Plain,
    Zstd,
}

impl Encoding {
    /// The encoding of a scanned log.
    pub fn of(scan: &crate::log::scan::Scan) -> Encoding {
        if scan.zstd.is_some() {
            Encoding::Zstd
        } else {
            Encoding::Plain
        }
    }

    /// Scan bytes stored in this encoding — how `repair` and `compact` check the exact bytes
    /// a file would hold before they write them.
    pub fn scan(
        self,
        stored: impl Read + Send,
        path: Option<&Path>,
        opts: &crate::log::scan::ScanOptions,
        findings: &mut Vec<crate::log::finding::Finding>,
    ) -> io::Result<crate::log::scan::Scan> {
        use crate::log::scan;
        let stored = io::BufReader::with_capacity(256 * 1024, stored);
        match self {
            Encoding::Plain => scan::scan(stored, path, opts, findings, &mut ()),
            Encoding::Zstd => {
                let (z, framing) = crate::log::input::zstd::ZstdReader::new(stored)?;
                let plain = io::BufReader::with_capacity(256 * 1024, z);
                scan::scan_framed(plain, Some(&framing), path, opts, findings, &mut ())
            }
        }
    }

    /// Encode whole lines for appending: the bytes themselves, or one zstd frame (none for
    /// no lines). Call once per batch: each call is one frame.
    pub fn encode(self, lines: &[u8]) -> io::Result<Vec<u8>> {
        match self {
            Encoding::Plain => Ok(lines.to_vec()),
            Encoding::Zstd => crate::log::input::zstd::encode_frame(lines),
        }
    }
}

/// The edit: bytes `[0, keep)` stay exactly as they are, the rest of the file is cut off,
/// then `append` (whole lines) is written after them.
#[derive(Debug, Clone, Copy)]
pub struct Edit<'a> {
    pub keep: u64,
    pub append: &'a [u8],
    /// The append re-writes committed data that the cut removes (the complete lines of a torn
    /// zstd frame, §14.5): between the truncation and the end of the append those events would
    /// be in no log. Such an edit first writes its intent to a journal (see [`journal_path`])
    /// that the next writing command finishes ([`resume_interrupted`]).
    pub journal: bool,
}

/// What an in-place edit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Bytes cut off the end of the file.
    pub cut: u64,
    /// Where they were saved (always `Some` when `cut > 0`).
    pub sidecar: Option<PathBuf>,
    /// Bytes appended.
    pub appended: u64,
    /// The file's new length.
    pub len: u64,
}

/// Edit the log at `path` in place. `before` is the stamp taken before the log was read;
/// any difference now means another writer and nothing is done. Order, so that no byte is
/// ever only in memory: (1) copy the bytes to cut into a new sidecar and sync it and its
/// directory; (2) truncate to `keep`; (3) append in one write; (4) `sync_all`. Any failure in
/// (2)–(4) truncates back to `keep`, copies the sidecar's bytes back, and syncs: the file is
/// then byte-identical to before. The sidecar is kept even then (it is never deleted).
pub fn apply_in_place(
    path: &Path,
    before: Stamp,
    edit: Edit<'_>,
    fault: Fault,
) -> Result<Applied, WriteError> {
    fault.at(Point::Start);
    let shown = path.display();
    let mut file = open_for_writing(path)?;
    let now = Stamp::of_file(&file).map_err(untouched(format!("cannot stat {shown}")))?;
    if now != before || edit.keep > now.len {
        return Err(WriteError::Changed {
            path: path.to_owned(),
        });
    }
    let cut = now.len - edit.keep;
    if cut == 0 && edit.append.is_empty() {
        return Ok(Applied {
            cut: 0,
            sidecar: None,
            appended: 0,
            len: now.len,
        });
    }
    let sidecar = if cut > 0 {
        Some(save_sidecar(&mut file, path, edit.keep, cut, fault)?)
    } else {
        None
    };
    fault.at(Point::SidecarSynced);
    // Saving the sidecar took time: look again before touching anything.
    let again = Stamp::of_file(&file).map_err(untouched(format!("cannot stat {shown}")))?;
    if again != before {
        // The log is untouched: the copy is worthless (and would say bytes were cut).
        if let Some(side) = &sidecar {
            let _ = fs::remove_file(side);
            let _ = sync_dir(side);
        }
        return Err(WriteError::Changed {
            path: path.to_owned(),
        });
    }
    let journal = if edit.journal && cut > 0 {
        let written = write_journal(path, edit.keep, before.len, edit.append);
        let journal = written.map_err(|e| {
            // The log is untouched: neither the copy nor a partial journal means anything.
            for stale in sidecar.iter().cloned().chain([journal_path(path)]) {
                let _ = fs::remove_file(&stale);
                let _ = sync_dir(&stale);
            }
            WriteError::Untouched {
                what: format!("cannot write the journal {}", journal_path(path).display()),
                source: e,
            }
        })?;
        fault.at(Point::Journaled);
        Some(journal)
    } else {
        None
    };
    let done = |journal: Option<PathBuf>| {
        if let Some(j) = journal {
            // The edit is durable (or undone): the journal has nothing left to finish.
            let _ = fs::remove_file(&j);
            let _ = sync_dir(&j);
        }
    };
    match mutate(&mut file, path, edit, cut, fault) {
        Ok(()) => {
            done(journal);
            Ok(Applied {
                cut,
                sidecar,
                appended: edit.append.len() as u64,
                len: edit.keep + edit.append.len() as u64,
            })
        }
        Err(MutateError::Raced) => Err(WriteError::Changed {
            path: path.to_owned(),
        }),
        Err(MutateError::RacedStuck(source)) => Err(WriteError::RollbackFailed {
            what: "another process appended to the log while dshs appended to it".to_owned(),
            source,
            rollback: io::Error::other("dshs's lines could not be taken back off the end"),
            sidecar,
        }),
        Err(MutateError::Failed(what, source)) => {
            match restore(&mut file, edit.keep, before.len, sidecar.as_deref()) {
                Ok(()) => {
                    done(journal);
                    Err(WriteError::RolledBack {
                        what,
                        source,
                        len: before.len,
                        sidecar,
                    })
                }
                // The journal stays: the next writing command finishes the edit from it.
                Err(rollback) => Err(WriteError::RollbackFailed {
                    what,
                    source,
                    rollback,
                    sidecar,
                }),
            }
        }
    }
}

/// The journal of `log`'s unfinished edit: `FILE.dshs-journal` beside it. It holds one header
/// line `dshs-journal 1 keep=K original=O append=L` and then the L bytes to append after the
/// first K bytes of the log (whose length was O before the edit). It is synced before the log
/// is truncated and removed once the edit is durable, so if it exists, a write was
/// interrupted in between (or before it touched the log at all).
pub fn journal_path(log: &Path) -> PathBuf {
    // Beside the real file, however it was named (a symlink to a log finds its journal).
    let log = fs::canonicalize(log).unwrap_or_else(|_| log.to_owned());
    let mut name = log.file_name().map(OsString::from).unwrap_or_default();
    name.push(".dshs-journal");
    log.with_file_name(name)
}

const JOURNAL_MAGIC: &str = "dshs-journal 1";

fn write_journal(log: &Path, keep: u64, original: u64, append: &[u8]) -> io::Result<PathBuf> {
    let path = journal_path(log);
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)?;
    let header = format!(
        "{JOURNAL_MAGIC} keep={keep} original={original} append={}\n",
        append.len()
    );
    f.write_all(header.as_bytes())?;
    f.write_all(append)?;
    f.sync_all()?;
    sync_dir(&path)?;
    Ok(path)
}

/// `(keep, original, append)` of a complete journal; `None` for a torn or foreign one.
fn parse_journal(bytes: &[u8]) -> Option<(u64, u64, &[u8])> {
    let nl = bytes.iter().position(|&b| b == b'\n')?;
    let header = std::str::from_utf8(&bytes[..nl]).ok()?;
    let rest = header.strip_prefix(JOURNAL_MAGIC)?;
    let field = |name: &str| -> Option<u64> {
        rest.split(' ')
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))?
            .parse()
            .ok()
    };
    let (keep, original, len) = (field("keep")?, field("original")?, field("append")?);
    let append = &bytes[nl + 1..];
    (append.len() as u64 == len).then_some((keep, original, append))
}

/// What [`resume_interrupted`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resumed {
    /// No journal: nothing was left unfinished.
    Nothing,
    /// A journal whose edit never touched the log (interrupted before the truncation, or
    /// rolled back): removed.
    Discarded(PathBuf),
    /// The log held the kept prefix and part of the append: the rest was appended and synced.
    Completed { journal: PathBuf, appended: u64 },
}

/// Finish an edit that an earlier, interrupted run journaled (see [`journal_path`]). Call it
/// with the session lock held, before reading the log. An edit is finished only when the log
/// is exactly the journaled prefix plus a prefix of the journaled append; a log that is
/// neither that nor its original length is left alone and reported.
pub fn resume_interrupted(log: &Path) -> Result<Resumed, WriteError> {
    let journal = journal_path(log);
    let bytes = match fs::read(&journal) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Resumed::Nothing),
        Err(e) => {
            return Err(WriteError::Untouched {
                what: format!("cannot read the journal {}", journal.display()),
                source: e,
            });
        }
    };
    let discard = |journal: PathBuf| {
        fs::remove_file(&journal)
            .and_then(|()| sync_dir(&journal))
            .map(|()| Resumed::Discarded(journal.clone()))
            .map_err(untouched(format!("cannot remove {}", journal.display())))
    };
    let Some((keep, original, append)) = parse_journal(&bytes) else {
        // A torn journal of ours was being written before the log was touched (it is synced
        // first): drop it. A file we did not write is never deleted.
        let head = &bytes[..bytes.len().min(JOURNAL_MAGIC.len())];
        if JOURNAL_MAGIC.as_bytes().starts_with(head) || bytes.starts_with(JOURNAL_MAGIC.as_bytes())
        {
            return discard(journal);
        }
        return Err(WriteError::JournalMismatch {
            journal,
            log: log.to_owned(),
        });
    };
    let shown = log.display();
    let mut file = open_for_writing(log)?;
    let len = file
        .metadata()
        .map_err(untouched(format!("cannot stat {shown}")))?
        .len();
    let end = keep.saturating_add(append.len() as u64);
    if (keep..=end).contains(&len) {
        let mut written = vec![0; (len - keep) as usize];
        file.seek(SeekFrom::Start(keep))
            .and_then(|_| file.read_exact(&mut written))
            .map_err(untouched(format!("cannot read {shown}")))?;
        if written == append[..written.len()] {
            let rest = &append[written.len()..];
            file.write_all(rest)
                .and_then(|()| file.sync_all())
                .map_err(|e| WriteError::Untouched {
                    what: format!(
                        "cannot finish the interrupted write that {} records",
                        journal.display()
                    ),
                    source: e,
                })?;
            fs::remove_file(&journal)
                .and_then(|()| sync_dir(&journal))
                .map_err(untouched(format!("cannot remove {}", journal.display())))?;
            return Ok(Resumed::Completed {
                journal,
                appended: rest.len() as u64,
            });
        }
    }
    if len == original {
        return discard(journal);
    }
    Err(WriteError::JournalMismatch {
        journal,
        log: log.to_owned(),
    })
}

/// Truncate (when bytes are cut), append, sync. The error says which step failed.
///
/// An append that cuts nothing goes through a second handle opened for appending
/// (`O_APPEND`), and its placement is checked afterwards: a program appending without the
/// lock between the last stamp check and this write would otherwise be overwritten. If its
/// bytes came first, ours are taken back off the end and the edit fails as `Changed`.
fn mutate(
    file: &mut File,
    path: &Path,
    edit: Edit<'_>,
    cut: u64,
    fault: Fault,
) -> Result<(), MutateError> {
    let failed = |what: &str| {
        let what = what.to_owned();
        move |e| MutateError::Failed(what, e)
    };
    if cut > 0 {
        file.set_len(edit.keep)
            .map_err(failed("cannot truncate the log"))?;
        fault.at(Point::Truncated);
        file.seek(SeekFrom::Start(edit.keep))
            .map_err(failed("cannot seek in the log"))?;
        write_all(file, edit.append, fault).map_err(failed("cannot append to the log"))?;
    } else {
        fault.at(Point::Truncated);
        let mut appender = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(failed("cannot open the log for appending"))?;
        write_all(&mut appender, edit.append, fault).map_err(failed("cannot append to the log"))?;
        check_placement(file, edit)?;
    }
    fault.at(Point::Appended);
    if fault == Fault::Sync {
        return Err(MutateError::Failed(
            "cannot flush the log to disk".to_owned(),
            injected("sync"),
        ));
    }
    file.sync_all()
        .map_err(failed("cannot flush the log to disk"))?;
    fault.at(Point::Synced);
    Ok(())
}

/// How [`mutate`] failed.
enum MutateError {
    /// A step failed: what, and why. The caller restores the original bytes.
    Failed(String, io::Error),
    /// Another process appended first; our bytes were taken back off the end, so the file
    /// holds exactly what it held plus what the other process wrote.
    Raced,
    /// Another process appended first, and our bytes could not be taken back.
    RacedStuck(io::Error),
}

/// After an appending write: are our bytes at `keep`, where the plan put them? If not,
/// someone appended in between; take ours back off the end (they are the last bytes unless
/// a third writer followed) so their bytes are kept and ours, planned for another offset,
/// are gone.
fn check_placement(file: &mut File, edit: Edit<'_>) -> Result<(), MutateError> {
    let n = edit.append.len() as u64;
    let mut placed = Vec::with_capacity(edit.append.len());
    let at_keep = read_at(file, edit.keep, n, &mut placed).is_ok() && placed == edit.append;
    if at_keep {
        return Ok(());
    }
    let undo = || -> io::Result<()> {
        let len = file.metadata()?.len();
        let mut last = Vec::with_capacity(edit.append.len());
        read_at(file, len.saturating_sub(n), n, &mut last)?;
        if len < edit.keep + n || last != edit.append {
            return Err(io::Error::other(format!(
                "the {n} bytes dshs appended are no longer the last bytes of the file"
            )));
        }
        file.set_len(len - n)?;
        file.sync_all()
    };
    match undo() {
        Ok(()) => Err(MutateError::Raced),
        Err(e) => Err(MutateError::RacedStuck(e)),
    }
}

/// One `write_all`, or (fault injection) a partial write followed by an error.
fn write_all(file: &mut File, bytes: &[u8], fault: Fault) -> io::Result<()> {
    if let Fault::AppendAfter(n) = fault {
        file.write_all(&bytes[..n.min(bytes.len())])?;
        return Err(injected("append"));
    }
    file.write_all(bytes)
}

/// Put the original bytes back: truncate to `keep`, copy the sidecar after it, sync.
fn restore(file: &mut File, keep: u64, len: u64, sidecar: Option<&Path>) -> io::Result<()> {
    file.set_len(keep)?;
    if let Some(side) = sidecar {
        file.seek(SeekFrom::Start(keep))?;
        let copied = io::copy(&mut File::open(side)?, file)?;
        if keep + copied != len {
            return Err(io::Error::other(format!(
                "the sidecar {} holds {copied} bytes, expected {}",
                side.display(),
                len - keep
            )));
        }
    }
    file.set_len(len)?;
    file.sync_all()
}

/// Copy bytes `[keep, keep + cut)` of the log into a new sidecar beside it, synced (file and
/// directory) before the log is touched. A failure removes the partial sidecar.
fn save_sidecar(
    file: &mut File,
    log: &Path,
    keep: u64,
    cut: u64,
    fault: Fault,
) -> Result<PathBuf, WriteError> {
    let (path, mut side) = create_sidecar(log).map_err(untouched(format!(
        "cannot create a sidecar beside {}",
        log.display()
    )))?;
    let copy = |side: &mut File, file: &mut File| -> io::Result<()> {
        file.seek(SeekFrom::Start(keep))?;
        let copied = io::copy(&mut Read::by_ref(file).take(cut), side)?;
        if copied != cut {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("read {copied} of {cut} bytes"),
            ));
        }
        if fault == Fault::Sidecar {
            return Err(injected("sidecar"));
        }
        fault.at(Point::SidecarWritten);
        side.sync_all()?;
        sync_dir(&path)
    };
    if let Err(e) = copy(&mut side, file) {
        drop(side);
        // The log is untouched, so the partial copy is worthless.
        let _ = fs::remove_file(&path);
        return Err(WriteError::Untouched {
            what: format!("cannot save the cut bytes to {}", path.display()),
            source: e,
        });
    }
    Ok(path)
}

/// The first free `<log>.dshs-cut-<n>`, created exclusively: an existing file is never
/// overwritten, even one created by a concurrent dshs between our checks.
pub(crate) fn create_sidecar(log: &Path) -> io::Result<(PathBuf, File)> {
    let name = log
        .file_name()
        .ok_or_else(|| io::Error::other("the log path has no file name"))?;
    for n in 1..=SIDECAR_TRIES {
        let mut side = OsString::from(name);
        side.push(format!("{SIDECAR_INFIX}{n}"));
        let path = log.with_file_name(side);
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!(
        "{SIDECAR_TRIES} sidecars already exist; clean them up"
    )))
}

/// Write the edited log to a new file `out` (never replacing one): the first `keep` bytes of
/// `src`, then `append`; synced with its directory. `src` is only read; `before` is its stamp
/// from when it was scanned. On failure the partial `out` is removed. Returns the bytes
/// written.
pub fn write_copy(
    src: &Path,
    before: Stamp,
    edit: Edit<'_>,
    out: &Path,
    fault: Fault,
) -> Result<u64, WriteError> {
    let mut input = File::open(src).map_err(untouched(format!("cannot open {}", src.display())))?;
    let changed = |input: &File| {
        Stamp::of_file(input).map_or(true, |now| now != before || edit.keep > now.len)
    };
    if changed(&input) {
        return Err(WriteError::Changed {
            path: src.to_owned(),
        });
    }
    let mut output = match OpenOptions::new().write(true).create_new(true).open(out) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(WriteError::OutputExists {
                path: out.to_owned(),
            });
        }
        Err(e) => return Err(untouched(format!("cannot create {}", out.display()))(e)),
    };
    let mut fill = || -> Result<(), (String, io::Error)> {
        let copied = io::copy(&mut Read::by_ref(&mut input).take(edit.keep), &mut output)
            .map_err(|e| (format!("cannot copy {}", src.display()), e))?;
        if copied != edit.keep {
            return Err((
                format!("cannot copy {}", src.display()),
                io::Error::new(io::ErrorKind::UnexpectedEof, "the file got shorter"),
            ));
        }
        write_all(&mut output, edit.append, fault)
            .map_err(|e| (format!("cannot write {}", out.display()), e))?;
        if fault == Fault::Sync {
            return Err((format!("cannot flush {}", out.display()), injected("sync")));
        }
        output
            .sync_all()
            .map_err(|e| (format!("cannot flush {}", out.display()), e))?;
        sync_dir(out).map_err(|e| {
            (
                format!("cannot flush the directory of {}", out.display()),
                e,
            )
        })
    };
    let result = fill();
    let raced = result.is_ok() && changed(&input);
    if result.is_err() || raced {
        drop(output);
        let _ = fs::remove_file(out);
        let _ = sync_dir(out);
    }
    match result {
        Err((what, source)) => Err(WriteError::Untouched { what, source }),
        Ok(()) if raced => Err(WriteError::Changed {
            path: src.to_owned(),
        }),
        Ok(()) => Ok(edit.keep + edit.append.len() as u64),
    }
}

/// Make a new or removed directory entry durable: sync the directory holding `path`.
pub(crate) fn sync_dir(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        // Windows cannot open a directory as a file; NTFS journals the entry itself.
        let _ = path;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(dir: &Path, bytes: &[u8]) -> PathBuf {
        let p = dir.join("s.jsonl");
        fs::write(&p, bytes).unwrap();
        p
    }

    const ORIGINAL: &[u8] = b"header\nline-1\ntorn-fragm";

    /// The log `p` holds `bytes` and is alone in `dir`: no sidecar or temporary file left.
    fn assert_alone(dir: &Path, p: &Path, bytes: &[u8]) {
        assert_eq!(fs::read(p).unwrap(), bytes);
        assert_eq!(fs::read_dir(dir).unwrap().count(), 1);
    }

    fn edit() -> Edit<'static> {
        Edit {
            keep: 14,
            append: b"closer-1\ncloser-2\n",
            journal: false,
        }
    }

    #[test]
    fn cut_bytes_go_to_a_new_sidecar_then_the_lines_are_appended() {
        let dir = tempfile::tempdir().unwrap();
        let p = log(dir.path(), ORIGINAL);
        let done = apply_in_place(&p, Stamp::of(&p).unwrap(), edit(), Fault::None).unwrap();
        assert_eq!(
            fs::read(&p).unwrap(),
            b"header\nline-1\ncloser-1\ncloser-2\n"
        );
        let side = done.sidecar.unwrap();
        assert_eq!(side, dir.path().join("s.jsonl.dshs-cut-1"));
        assert_eq!(fs::read(&side).unwrap(), b"torn-fragm");
        assert_eq!((done.cut, done.appended, done.len), (10, 18, 32));
    }

    #[test]
    fn an_existing_sidecar_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let p = log(dir.path(), ORIGINAL);
        fs::write(dir.path().join("s.jsonl.dshs-cut-1"), b"precious").unwrap();
        let done = apply_in_place(&p, Stamp::of(&p).unwrap(), edit(), Fault::None).unwrap();
        assert_eq!(done.sidecar.unwrap(), dir.path().join("s.jsonl.dshs-cut-2"));
        assert_eq!(
            fs::read(dir.path().join("s.jsonl.dshs-cut-1")).unwrap(),
            b"precious"
        );
    }

    #[test]
    fn every_failure_after_the_cut_restores_the_original_bytes() {
        for fault in [
            Fault::AppendAfter(0),
            Fault::AppendAfter(5),
            Fault::AppendAfter(17),
            Fault::Sync,
        ] {
            let dir = tempfile::tempdir().unwrap();
            let p = log(dir.path(), ORIGINAL);
            let err = apply_in_place(&p, Stamp::of(&p).unwrap(), edit(), fault).unwrap_err();
            assert!(
                matches!(
                    &err,
                    WriteError::RolledBack {
                        len: 24,
                        sidecar: Some(_),
                        ..
                    }
                ),
                "{fault:?}: {err}"
            );
            assert_eq!(fs::read(&p).unwrap(), ORIGINAL, "{fault:?}");
            // The cut bytes were saved before anything was changed, and stay saved.
            assert_eq!(
                fs::read(dir.path().join("s.jsonl.dshs-cut-1")).unwrap(),
                b"torn-fragm"
            );
        }
    }

    #[test]
    fn a_failed_append_without_a_cut_truncates_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = log(dir.path(), b"header\nline-1\n");
        let err =
            apply_in_place(&p, Stamp::of(&p).unwrap(), edit(), Fault::AppendAfter(9)).unwrap_err();
        assert!(matches!(err, WriteError::RolledBack { sidecar: None, .. }));
        assert_alone(dir.path(), &p, b"header\nline-1\n");
    }

    #[test]
    fn a_failed_sidecar_leaves_the_log_and_no_partial_sidecar() {
        let dir = tempfile::tempdir().unwrap();
        let p = log(dir.path(), ORIGINAL);
        let err = apply_in_place(&p, Stamp::of(&p).unwrap(), edit(), Fault::Sidecar).unwrap_err();
        assert!(matches!(err, WriteError::Untouched { .. }), "{err}");
        assert_alone(dir.path(), &p, ORIGINAL);
    }

    #[test]
    fn a_file_that_changed_since_it_was_read_is_not_touched() {
        let dir = tempfile::tempdir().unwrap();
        let p = log(dir.path(), ORIGINAL);
        let stamp = Stamp::of(&p).unwrap();
        fs::write(&p, b"header\nline-1\ntorn-fragment-grew").unwrap();
        let err = apply_in_place(&p, stamp, edit(), Fault::None).unwrap_err();
        assert!(err.is_live_writer(), "{err}");
        assert_alone(dir.path(), &p, b"header\nline-1\ntorn-fragment-grew");
    }

    #[test]
    fn copy_writes_prefix_and_lines_and_never_replaces_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = log(dir.path(), ORIGINAL);
        let out = dir.path().join("out.jsonl");
        let stamp = Stamp::of(&p).unwrap();
        assert_eq!(
            write_copy(&p, stamp, edit(), &out, Fault::None).unwrap(),
            32
        );
        assert_eq!(
            fs::read(&out).unwrap(),
            b"header\nline-1\ncloser-1\ncloser-2\n"
        );
        assert_eq!(fs::read(&p).unwrap(), ORIGINAL);
        let err = write_copy(&p, stamp, edit(), &out, Fault::None).unwrap_err();
        assert!(matches!(err, WriteError::OutputExists { .. }));
        // A failed copy leaves no partial output behind.
        let out2 = dir.path().join("out2.jsonl");
        assert!(write_copy(&p, stamp, edit(), &out2, Fault::AppendAfter(3)).is_err());
        assert!(!out2.exists());
    }

    #[test]
    fn a_bare_log_is_locked_itself_and_a_probe_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = log(dir.path(), ORIGINAL);
        let ours = WriterLock::acquire(&p).unwrap();
        assert_eq!((ours.path(), ours.kind()), (p.as_path(), LockKind::LogFile));
        // A second writer of the same file is refused while the first holds it.
        let err = WriterLock::acquire(&p).unwrap_err();
        assert!(err.is_live_writer(), "{err}");
        assert!(WriterLock::probe(&p).unwrap_err().is_live_writer());
        drop(ours);
        assert!(WriterLock::probe(&p).unwrap().is_some());
        assert!(
            !lock_path(&p).exists(),
            "no session.lock beside a bare file"
        );
    }

    #[test]
    fn a_session_log_locks_its_session_lock_created_if_absent_and_left_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("session.v3.jsonl.zstd");
        fs::write(&p, ORIGINAL).unwrap();
        // A look never creates the lock file.
        assert!(WriterLock::probe(&p).unwrap().is_none());
        assert!(!lock_path(&p).exists());
        let ours = WriterLock::acquire(&p).unwrap();
        assert_eq!(ours.kind(), LockKind::SessionLock);
        assert_eq!(
            ours.path(),
            fs::canonicalize(dir.path()).unwrap().join(LOCK_FILE)
        );
        // What DSH's live-writer probe does: refused while dshs holds it.
        let other = File::open(lock_path(&p)).unwrap();
        assert!(matches!(other.try_lock(), Err(TryLockError::WouldBlock)));
        assert!(WriterLock::acquire(&p).unwrap_err().is_live_writer());
        drop(ours);
        assert!(lock_path(&p).exists(), "the lock file is never deleted");
        // Held by another process (DSH): refused, for a write and for a look.
        other.lock().unwrap();
        assert!(WriterLock::acquire(&p).unwrap_err().is_live_writer());
        assert!(WriterLock::probe(&p).unwrap_err().is_live_writer());
    }

    #[cfg(unix)]
    #[test]
    fn a_log_reached_through_a_symlink_locks_the_real_session_lock() {
        let real = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let p = real.path().join("session.jsonl");
        fs::write(&p, ORIGINAL).unwrap();
        let link = elsewhere.path().join("session.jsonl");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let ours = WriterLock::acquire(&link).unwrap();
        assert!(WriterLock::acquire(&p).unwrap_err().is_live_writer());
        assert!(!elsewhere.path().join(LOCK_FILE).exists());
        drop(ours);
    }

    #[test]
    fn the_stamp_notices_a_rewritten_tail_of_the_same_length() {
        let dir = tempfile::tempdir().unwrap();
        let p = log(dir.path(), ORIGINAL);
        let before = Stamp::of(&p).unwrap();
        let f = OpenOptions::new().write(true).open(&p).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::FileExt::write_all_at(&f, b"TORN", 14).unwrap();
        #[cfg(windows)]
        std::os::windows::fs::FileExt::seek_write(&f, b"TORN", 14).unwrap();
        drop(f);
        let after = Stamp::of(&p).unwrap();
        assert_eq!(before.len, after.len);
        assert_ne!(before, after);
    }

    #[test]
    fn an_append_that_another_writer_got_ahead_of_is_taken_back() {
        let dir = tempfile::tempdir().unwrap();
        // Planned at byte 14; another writer's line landed there first.
        let p = log(dir.path(), b"header\nline-1\ntheirs\ncloser-1\ncloser-2\n");
        let mut f = OpenOptions::new().read(true).write(true).open(&p).unwrap();
        let e = Edit {
            keep: 14,
            append: b"closer-1\ncloser-2\n",
            journal: false,
        };
        assert!(matches!(
            check_placement(&mut f, e),
            Err(MutateError::Raced)
        ));
        assert_eq!(fs::read(&p).unwrap(), b"header\nline-1\ntheirs\n");
        // Our bytes in place: nothing to do.
        fs::write(&p, b"header\nline-1\ncloser-1\ncloser-2\n").unwrap();
        assert!(check_placement(&mut f, e).is_ok());
        // Ours in the middle (a third writer followed): not touched, and said so.
        let stuck = b"header\nline-1\ntheirs\ncloser-1\ncloser-2\nthird\n";
        fs::write(&p, stuck).unwrap();
        assert!(matches!(
            check_placement(&mut f, e),
            Err(MutateError::RacedStuck(_))
        ));
        assert_eq!(fs::read(&p).unwrap(), stuck);
    }

    #[test]
    fn faults_parse() {
        assert_eq!(Fault::parse("append:7"), Some(Fault::AppendAfter(7)));
        assert_eq!(Fault::parse("sidecar"), Some(Fault::Sidecar));
        assert_eq!(Fault::parse("sync"), Some(Fault::Sync));
        assert_eq!(Fault::parse("append:x"), None);
        assert_eq!(
            Fault::parse("kill:truncated"),
            Some(Fault::Kill(Point::Truncated))
        );
        assert_eq!(
            Fault::parse("pause:start"),
            Some(Fault::Pause(Point::Start))
        );
        assert_eq!(Fault::parse("kill:nowhere"), None);
        for p in Point::ALL {
            assert_eq!(Point::parse(p.name()), Some(p));
        }
    }

    #[test]
    fn a_journaled_edit_removes_its_journal_once_durable() {
        let dir = tempfile::tempdir().unwrap();
        let p = log(dir.path(), ORIGINAL);
        let e = Edit {
            journal: true,
            ..edit()
        };
        apply_in_place(&p, Stamp::of(&p).unwrap(), e, Fault::None).unwrap();
        assert_eq!(
            fs::read(&p).unwrap(),
            b"header\nline-1\ncloser-1\ncloser-2\n"
        );
        assert!(!journal_path(&p).exists());
        assert_eq!(resume_interrupted(&p).unwrap(), Resumed::Nothing);
    }

    #[test]
    fn an_interrupted_journaled_edit_is_finished_from_its_journal() {
        let e = edit();
        let result = b"header\nline-1\ncloser-1\ncloser-2\n";
        // Killed after the truncation: any prefix of the append is finished exactly.
        for written in 0..=e.append.len() {
            let dir = tempfile::tempdir().unwrap();
            let mut now = ORIGINAL[..14].to_vec();
            now.extend_from_slice(&e.append[..written]);
            let p = log(dir.path(), &now);
            write_journal(&p, 14, ORIGINAL.len() as u64, e.append).unwrap();
            let r = resume_interrupted(&p).unwrap();
            assert_eq!(
                r,
                Resumed::Completed {
                    journal: journal_path(&p),
                    appended: (e.append.len() - written) as u64
                }
            );
            assert_eq!(fs::read(&p).unwrap(), result);
            assert!(!journal_path(&p).exists());
        }
    }

    #[test]
    fn a_journal_the_log_never_saw_or_a_torn_one_is_dropped_and_a_mismatch_refused() {
        let e = edit();
        // Interrupted before the truncation: the log is the original.
        let dir = tempfile::tempdir().unwrap();
        let p = log(dir.path(), ORIGINAL);
        write_journal(&p, 14, ORIGINAL.len() as u64, e.append).unwrap();
        assert_eq!(
            resume_interrupted(&p).unwrap(),
            Resumed::Discarded(journal_path(&p))
        );
        assert_eq!(fs::read(&p).unwrap(), ORIGINAL);
        // A torn journal (killed while writing it, before the log was touched).
        write_journal(&p, 14, ORIGINAL.len() as u64, e.append).unwrap();
        let j = fs::read(journal_path(&p)).unwrap();
        fs::write(journal_path(&p), &j[..j.len() - 3]).unwrap();
        assert_eq!(
            resume_interrupted(&p).unwrap(),
            Resumed::Discarded(journal_path(&p))
        );
        assert_eq!(fs::read(&p).unwrap(), ORIGINAL);
        // The log changed in between: neither state the journal knows — left alone.
        let changed = b"header\nline-1\nsomething-else\n";
        fs::write(&p, changed).unwrap();
        write_journal(&p, 14, ORIGINAL.len() as u64, e.append).unwrap();
        assert!(matches!(
            resume_interrupted(&p),
            Err(WriteError::JournalMismatch { .. })
        ));
        assert_eq!(fs::read(&p).unwrap(), changed);
        assert!(journal_path(&p).exists());
    }

    #[test]
    fn a_file_dshs_did_not_write_is_never_taken_for_a_journal() {
        let dir = tempfile::tempdir().unwrap();
        let p = log(dir.path(), ORIGINAL);
        fs::write(journal_path(&p), b"notes of mine\n").unwrap();
        assert!(matches!(
            resume_interrupted(&p),
            Err(WriteError::JournalMismatch { .. })
        ));
        assert_eq!(fs::read(journal_path(&p)).unwrap(), b"notes of mine\n");
        assert_eq!(fs::read(&p).unwrap(), ORIGINAL);
    }

    #[test]
    fn a_journal_that_cannot_be_written_leaves_no_sidecar_and_an_untouched_log() {
        let dir = tempfile::tempdir().unwrap();
        let p = log(dir.path(), ORIGINAL);
        // A directory where the journal goes: writing it fails.
        fs::create_dir(journal_path(&p)).unwrap();
        let e = Edit {
            journal: true,
            ..edit()
        };
        let err = apply_in_place(&p, Stamp::of(&p).unwrap(), e, Fault::None).unwrap_err();
        assert!(matches!(err, WriteError::Untouched { .. }), "{err}");
        assert_eq!(fs::read(&p).unwrap(), ORIGINAL);
        assert!(!dir.path().join("s.jsonl.dshs-cut-1").exists());
    }

    #[cfg(unix)]
    #[test]
    fn a_log_opened_through_a_symlink_finds_its_journal() {
        let dir = tempfile::tempdir().unwrap();
        let p = log(dir.path(), ORIGINAL);
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert_eq!(journal_path(&link), journal_path(&p));
        let e = edit();
        fs::write(&p, &ORIGINAL[..14]).unwrap();
        write_journal(&p, 14, ORIGINAL.len() as u64, e.append).unwrap();
        assert!(matches!(
            resume_interrupted(&link).unwrap(),
            Resumed::Completed { .. }
        ));
        assert_eq!(
            fs::read(&p).unwrap(),
            b"header\nline-1\ncloser-1\ncloser-2\n"
        );
    }
}
