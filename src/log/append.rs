//! The one path every writer takes (`repair`, `compact`): open the log to change, probing the
//! writers' lock (FORMAT.md §2.1) and finishing a journaled write an earlier run left; scan it;
//! check the exact bytes an edit would leave with a full scan before anything is written;
//! then take the lock (created if need be) and write, undone on any failure (`write`). The
//! commands decide *what* to write; this decides how the log is opened, checked and changed.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use super::finding::Finding;
use super::input::{self, FileKind, InputError, Opened, Source};
use super::scan::{Scan, ScanOptions};
use super::write::{self, Applied, Edit, Encoding, Fault, Resumed, Stamp, WriteError, WriterLock};

/// Why the log to change could not be opened; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Write(#[from] WriteError),
    /// Standard input, or a FIFO, is read once: there is no file to change.
    #[error(
        "{name} is {what}: it can be read once but not changed in place; use --dry-run to see the change, or --output OUT to write the result"
    )]
    NotAFile { name: String, what: String },
    /// A journal of an unfinished write exists and the command only looks.
    #[error(
        "{} records a write an earlier dshs run left unfinished; run `dshs repair {name}` (without --dry-run or --output) to finish it first — nothing was written",
        journal.display()
    )]
    Unfinished { journal: PathBuf, name: String },
    #[error("cannot read {what}: {source}")]
    Read { what: String, source: io::Error },
    #[error("cannot open {}: {source}", path.display())]
    Open { path: PathBuf, source: io::Error },
}

/// How the log is to be changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// In place (the lock is taken before writing).
    InPlace,
    /// Only looked at: `--dry-run`, or a copy written with `--output`.
    Look,
}

/// The log being changed, opened once: the file itself (or a spooled copy of standard input
/// or of a FIFO), its stamp from before it was read, and the writers' lock when one is held.
pub struct Target {
    /// What the user typed.
    pub name: String,
    /// The file read: the log itself, or a spooled copy.
    pub path: PathBuf,
    /// Name and layout checks apply (false for a spooled copy).
    pub is_log_file: bool,
    pub stamp: Stamp,
    /// What finishing an earlier, interrupted write did (for the command to say).
    pub resumed: Resumed,
    lock: Option<WriterLock>,
    _spool: Option<tempfile::NamedTempFile>,
}

impl Target {
    /// Open `arg` (`-`: standard input; a session directory: its newest generation) to be
    /// changed the way `mode` says. A live writer refuses at once; a free lock that exists
    /// is held while the caller plans, and a missing one is created only when there is
    /// something to write ([`Target::write_in_place`]), so a refusal or a no-op leaves no
    /// file behind. In place, a write an interrupted earlier run journaled is finished (or
    /// dropped) first, under the lock; a look refuses while such a journal exists, since
    /// planning on the half-written log would describe the wrong change.
    pub fn open(arg: &str, mode: Mode) -> Result<Target, OpenError> {
        if arg == "-" {
            if mode == Mode::InPlace {
                return Err(OpenError::NotAFile {
                    name: "standard input".into(),
                    what: "a stream".into(),
                });
            }
            return Target::spooled(arg, input::spool_stdin(), "standard input");
        }
        let named = Path::new(arg);
        let path = input::resolve(named)?;
        match FileKind::of(&path) {
            Ok(FileKind::Regular) | Err(_) => {}
            Ok(kind) if path != named => {
                return Err(InputError::NotRegular {
                    path: path.display().to_string(),
                    kind: kind.describe(),
                }
                .into());
            }
            Ok(kind) if mode == Mode::InPlace => {
                return Err(OpenError::NotAFile {
                    name: arg.to_owned(),
                    what: format!("{}, not a regular file", kind.describe()),
                });
            }
            Ok(_) => {
                let spool = File::open(&path).and_then(input::spool);
                return Target::spooled(arg, spool, arg);
            }
        }
        let mut lock = WriterLock::probe(&path)?;
        let journal = write::journal_path(&path);
        let resumed = if journal.exists() {
            if mode == Mode::Look {
                return Err(OpenError::Unfinished {
                    journal,
                    name: arg.to_owned(),
                });
            }
            // Finishing it writes: under the lock.
            if lock.is_none() {
                lock = Some(WriterLock::acquire(&path)?);
            }
            write::resume_interrupted(&path)?
        } else {
            Resumed::Nothing
        };
        let stamp = Stamp::of(&path).map_err(|source| OpenError::Open {
            path: path.clone(),
            source,
        })?;
        Ok(Target {
            name: arg.to_owned(),
            path,
            is_log_file: true,
            stamp,
            resumed,
            lock,
            _spool: None,
        })
    }

    fn spooled(
        arg: &str,
        spool: io::Result<tempfile::NamedTempFile>,
        what: &str,
    ) -> Result<Target, OpenError> {
        let read = |source| OpenError::Read {
            what: what.to_owned(),
            source,
        };
        let spool = spool.map_err(read)?;
        let path = spool.path().to_owned();
        let stamp = Stamp::of(&path).map_err(read)?;
        Ok(Target {
            name: arg.to_owned(),
            path,
            is_log_file: false,
            stamp,
            resumed: Resumed::Nothing,
            lock: None,
            _spool: Some(spool),
        })
    }

    /// The log opened for one pass, under the name the user gave.
    pub fn open_log(&self) -> Result<Opened, InputError> {
        let o = input::open(&Source::Path(self.path.clone()))?;
        Ok(Opened {
            name: self.name.clone(),
            path: self.is_log_file.then(|| self.path.clone()),
            ..o
        })
    }

    /// The path the name and layout checks of a scan look at (none for a spooled copy).
    pub fn scan_path(&self) -> Option<&Path> {
        self.is_log_file.then_some(self.path.as_path())
    }

    /// A plan covers the log as it was read: it must be the file that was stamped.
    pub fn planned_from(&self, scan: &Scan) -> Result<(), WriteError> {
        if scan.physical_len() == self.stamp.len {
            Ok(())
        } else {
            Err(WriteError::Changed {
                path: self.path.clone(),
            })
        }
    }

    /// Scan the exact bytes the log would hold after `edit` (its first `edit.keep` bytes,
    /// then what is appended), stored as `encoding` stores them, with the options of the
    /// first scan: an edit is written only when the result passes the caller's check of
    /// this scan. The findings of the whole result come with it.
    pub fn verify(
        &self,
        edit: Edit<'_>,
        encoding: Encoding,
        opts: &ScanOptions,
    ) -> io::Result<(Scan, Vec<Finding>)> {
        let original = BufReader::new(File::open(&self.path)?);
        scan_edit(original, edit, encoding, self.scan_path(), opts)
    }

    /// Write `edit` in place: first hold the writers' lock (taken now if planning did not
    /// hold it, creating `session.lock` if need be) and make sure the log is still the one
    /// the plan was made from (length, modification time and tail), since another writer
    /// may have changed it before the lock was ours; then the edit (see
    /// [`write::apply_in_place`]).
    pub fn write_in_place(&mut self, edit: Edit<'_>, fault: Fault) -> Result<Applied, WriteError> {
        if self.lock.is_none() {
            self.lock = Some(WriterLock::acquire(&self.path)?);
        }
        let now = Stamp::of(&self.path).map_err(|source| WriteError::Untouched {
            what: format!("cannot read {}", self.path.display()),
            source,
        })?;
        if now != self.stamp {
            return Err(WriteError::Changed {
                path: self.path.clone(),
            });
        }
        write::apply_in_place(&self.path, self.stamp, edit, fault)
    }

    /// Write the edited log to a new file `dest`, leaving the log as it is.
    pub fn write_copy(&self, edit: Edit<'_>, dest: &Path, fault: Fault) -> Result<u64, WriteError> {
        write::write_copy(&self.path, self.stamp, edit, dest, fault)
    }
}

/// A writer's plan (`repair`, `compact`) as the one check path sees it.
pub trait Planned {
    /// The write.
    fn edit(&self) -> Edit<'_>;
    /// How the log stores what is appended.
    fn encoding(&self) -> Encoding;
    /// Whether the scan of the edited log (see [`scan_edit`]) is what the plan promises.
    fn verified(&self, edited: &Scan) -> bool;
}

/// An edited log, scanned in full before it exists.
#[derive(Debug)]
pub struct Verdict {
    /// The scan is what the plan promises ([`Planned::verified`]).
    pub ok: bool,
    /// Every finding of the scan (warnings the original log had are repeated here).
    pub findings: Vec<Finding>,
    /// The surface of the edited log (empty when it could not be folded).
    pub surface: Vec<u64>,
}

/// Scan the exact bytes the log will hold after `plan` — the first `keep` bytes of
/// `original`, then what it appends — with the same options as the first scan. An edit is
/// only written when this says `ok`: what a writer appends is checked by the same rules as
/// any log, not trusted.
pub fn verify(
    original: impl Read + Send,
    plan: &impl Planned,
    path: Option<&Path>,
    opts: &ScanOptions,
) -> io::Result<Verdict> {
    let (scan, findings) = scan_edit(original, plan.edit(), plan.encoding(), path, opts)?;
    Ok(Verdict {
        ok: plan.verified(&scan),
        findings,
        surface: surface_of(&scan),
    })
}

/// The surface of a scanned log (empty when it could not be folded).
pub fn surface_of(scan: &Scan) -> Vec<u64> {
    scan.state
        .as_ref()
        .map(|st| st.surface.seqs())
        .unwrap_or_default()
}

/// Scan the exact bytes `original` would hold after `edit` — its first `edit.keep` bytes,
/// then `edit.append` — stored as `encoding` stores them: how every writer checks what it is
/// about to write, by the same rules as any log, before anything is written.
pub fn scan_edit(
    original: impl Read + Send,
    edit: Edit<'_>,
    encoding: Encoding,
    path: Option<&Path>,
    opts: &ScanOptions,
) -> io::Result<(Scan, Vec<Finding>)> {
    let mut findings = Vec::new();
    let bytes = original.take(edit.keep).chain(edit.append);
    let scan = encoding.scan(bytes, path, opts, &mut findings)?;
    Ok((scan, findings))
}
