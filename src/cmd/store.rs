//! What every command shares about DSH's SQLite session stores (SQLITE.md S9, S11): telling
//! a store from a log, naming one session (`STORE.db#ID`, `--session ID`), and handing a
//! session's logical log to today's pass as a stream, with the storage layer's findings kept
//! for the command to merge. Not a command.

use std::io::{self, BufRead, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Result;
use rusqlite::Connection;

use dshs::log::input::Opened;
use dshs::log::scan::{Observer, Scan, Status};
use dshs::log::sqlite::{self, Class, PackedRead, ReadEnd, SessionReader, Store, StoreError};
use dshs::log::{Finding, Sink};

use crate::exit::{Failure, Outcome};
use crate::render::escape;
use crate::render::human::{self, Painter};

/// What a command-line argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// A log, session directory, storage root or `-`: read as before.
    Log,
    /// A SQLite session store, and the session named in it (`A#B` or `--session`), if any.
    Store {
        path: PathBuf,
        /// The store as the user wrote it (for names like `store.db#ID`).
        shown: String,
        id: Option<String>,
    },
}

/// Decide what `arg` names (S11.1, S11.3): a file starting with the SQLite magic is a store
/// whatever its name; `A#B` is split at the first `#` whose left part is such a file.
/// `session` is `--session ID`, which only a store can take.
pub fn name(arg: &str, session: Option<&str>) -> Result<Named> {
    let path = Path::new(arg);
    let named = if arg == "-" {
        Named::Log
    } else if path.is_file() && (sqlite::has_magic(path).unwrap_or(false) || empty_store(path)) {
        Named::Store {
            path: path.to_owned(),
            shown: arg.to_owned(),
            id: None,
        }
    } else if let Some((db, id)) = sqlite::split_session_path(arg) {
        Named::Store {
            shown: db.display().to_string(),
            path: db,
            id: Some(id),
        }
    } else {
        Named::Log
    };
    match (named, session) {
        (named, None) => Ok(named),
        (Named::Log, Some(id)) => Err(Failure::usage(format!(
            "--session {}: {} is not a SQLite session store (only a store holds several sessions)",
            escape(id),
            escape(arg)
        ))),
        (Named::Store { path, shown, id }, Some(s)) => match id {
            Some(id) if id != s => Err(Failure::usage(format!(
                "{} names session {} and --session names {}: name one",
                escape(arg),
                escape(&id),
                escape(s)
            ))),
            _ => Ok(Named::Store {
                path,
                shown,
                id: Some(s.to_owned()),
            }),
        },
    }
}

/// Standard input (or a FIFO) whose first bytes are the SQLite magic: a database cannot be
/// read from a stream (S11.1).
pub fn refuse_streamed_database(opened: &mut Opened) -> Result<()> {
    if opened.path.is_some() {
        return Ok(());
    }
    let head = opened.reader.fill_buf().unwrap_or(&[]);
    if head.len() >= sqlite::MAGIC.len() && head[..sqlite::MAGIC.len()] == sqlite::MAGIC[..] {
        return Err(Failure::usage(format!(
            "{} holds a SQLite database, which cannot be read from a stream: name the database file (STORE.db or STORE.db#SESSION_ID)",
            escape(&opened.name)
        )));
    }
    Ok(())
}

/// The exit status a storage-layer failure ends with.
pub fn outcome_of_class(class: Class) -> Outcome {
    match class {
        Class::Invalid => Outcome::Invalid,
        Class::Failure => Outcome::Failure,
        Class::Unsupported => Outcome::Unsupported,
        Class::Limit => Outcome::Limit,
    }
}

/// The command's error for a store that cannot be read (a refused database is exit 3 with
/// the message of the identity check that refused it).
pub fn store_failure(e: &StoreError) -> anyhow::Error {
    Failure::of(outcome_of_class(e.class()), e.to_string())
}

/// The options of a pass over a store session's logical log: the storage layer checks the
/// seqs of its rows (S6) and goes on after committed damage it reported.
pub fn store_scan_options(env: &super::Env) -> dshs::log::scan::ScanOptions {
    dshs::log::scan::ScanOptions {
        from_store: true,
        ..env.scan_options()
    }
}

/// The name a session is reported under: `store.db#ID`.
pub fn session_name(shown: &str, id: &str) -> String {
    format!("{shown}#{id}")
}

/// Open the store for reading, and say on stderr what the open had to do (a hot journal
/// rolled back, a read without locks).
pub fn open_store(path: &Path) -> std::result::Result<Store, StoreError> {
    let store = Store::open(path)?;
    for n in store.notes() {
        crate::render::diag!("dshs: note: {}", escape(n));
    }
    Ok(store)
}

/// Open the store and pick the one session a command reads: the named one, or the only one.
pub fn open_one(path: &Path, shown: &str, id: Option<&str>) -> Result<(Store, String)> {
    let store = open_store(path).map_err(|e| store_failure(&e))?;
    let id = match id {
        Some(id) => id.to_owned(),
        None => {
            let ids: Vec<String> = store
                .sessions()
                .map_err(|e| store_failure(&e))?
                .into_iter()
                .map(|s| s.row.id)
                .collect();
            match ids.as_slice() {
                [one] => one.clone(),
                [] => {
                    return Err(Failure::usage(format!(
                        "{} holds no session",
                        escape(shown)
                    )));
                }
                _ => return Err(Failure::usage(several_sessions(shown, &ids))),
            }
        }
    };
    Ok((store, id))
}

/// Session ids a usage error lists at most (a store may hold 100,000).
const LISTED_IDS: usize = 20;

/// A 0-byte file named like a database (`.db`, `.sqlite`, `.sqlite3`): an empty store (SQLITE.md
/// S2: SQLite reads it as a database with nothing in it), not a JSONL log without a header.
/// Only the name can tell, so only these names; any other 0-byte file stays a log.
pub fn empty_store(path: &Path) -> bool {
    let named = path
        .extension()
        .and_then(|x| x.to_str())
        .is_some_and(|x| matches!(x, "db" | "sqlite" | "sqlite3"));
    named && std::fs::metadata(path).is_ok_and(|m| m.len() == 0)
}

/// The usage error of a command that needs one session, on a store holding several: the
/// first [`LISTED_IDS`] ids and how many more there are.
fn several_sessions(shown: &str, ids: &[String]) -> String {
    let list: Vec<String> = ids
        .iter()
        .take(LISTED_IDS)
        .map(|i| escape(i).into_owned())
        .collect();
    let more = ids.len().saturating_sub(LISTED_IDS);
    format!(
        "{} holds {} sessions; name one as {}#ID or with --session ID: {}{}",
        escape(shown),
        ids.len(),
        escape(shown),
        list.join(", "),
        if more > 0 {
            format!(" and {more} more (`dshs ls {}` lists them)", escape(shown))
        } else {
            String::new()
        }
    )
}

/// The end of a session's read, filled in when the stream handed to the pass is done.
#[derive(Clone)]
pub struct StoreEnd {
    name: String,
    slot: Arc<Mutex<Option<Result<ReadEnd, StoreError>>>>,
}

impl StoreEnd {
    /// What the storage layer found. `None` while the stream is still alive.
    pub fn take(&self) -> Option<Result<ReadEnd, StoreError>> {
        self.slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// After a pass over a read that handed packed rows on packed: where its lines lie in
    /// the expanded log, and whether it can stand for it. `None` when the read expanded
    /// them (or failed, or is still alive).
    pub fn packed_read(&self) -> Option<PackedRead> {
        match &mut *self.slot.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(Ok(end)) => end.packed.take(),
            _ => None,
        }
    }

    /// After the pass: the storage findings, or the command's error when the read failed.
    pub fn finished(&self) -> Result<ReadEnd> {
        match self.take() {
            Some(Ok(end)) => Ok(end),
            Some(Err(e)) => Err(store_failure(&e)),
            None => Err(Failure::usage(format!(
                "{}: the session was not read to its end",
                escape(&self.name)
            ))),
        }
    }

    /// For a command that shows the session (surface, derive): DSH refuses a session with a
    /// storage error, so the command does too, with those findings on stderr (exit 1, or 3
    /// for an unsupported code); storage warnings (a torn tail DSH drops) are said on
    /// stderr. Returns the findings.
    pub fn check(&self, quiet: bool) -> Result<Vec<Finding>> {
        let end = self.finished()?;
        self.say(&end.findings, quiet);
        refuse_on_errors(&self.name, &end.findings)?;
        Ok(end.findings)
    }

    /// For a command that prints what it can and lets the exit status say whether the
    /// session loads (stats, show): the storage findings on stderr, and the status of the
    /// pass combined with them.
    pub fn status(&self, logical: Status, quiet: bool) -> Result<Status> {
        let end = self.finished()?;
        self.say(&end.findings, quiet);
        Ok(sqlite::combined_status(logical, &end.findings))
    }

    /// Like the inspection commands' note on a JSONL log, only when something is wrong: a
    /// session with a storage error gets all its storage findings on stderr; warnings alone
    /// (a torn tail DSH drops, a derived isSeeded) are `validate`'s to report.
    fn say(&self, findings: &[Finding], quiet: bool) {
        if !quiet && findings.iter().any(Finding::is_error) {
            print_findings(&self.name, findings);
        }
    }
}

/// Storage findings on stderr, the way `validate` prints findings.
pub fn print_findings(name: &str, findings: &[Finding]) {
    let painter = Painter { color: false };
    for f in findings {
        crate::render::diag!("{}", human::finding(&painter, name, f));
    }
}

/// Any storage error refuses the session (exit 1; 3 for an unsupported code).
fn refuse_on_errors(name: &str, findings: &[Finding]) -> Result<()> {
    let Some(first) = findings.iter().find(|f| f.is_error()) else {
        return Ok(());
    };
    let outcome = match sqlite::combined_status(Status::Valid, findings) {
        Status::Unsupported => Outcome::Unsupported,
        _ => Outcome::Invalid,
    };
    Err(Failure::of(
        outcome,
        format!(
            "{} cannot be read the way DSH loads it: its storage layer has errors (see above; `dshs explain {}` says what they mean)",
            escape(name),
            first.code.as_str()
        ),
    ))
}

/// A session's logical log for one pass: header line, then one line per committed event,
/// under the name `store.db#ID` and without a path (no check of the pass looks at where its
/// lines came from; commands that read lines again spool them like a pipe's). The storage
/// layer's findings arrive in the [`StoreEnd`] once the stream is done.
///
/// A session DSH refuses before reading any event (an invalid `sessions` row, a
/// storage-class violation) is refused here, with its findings on stderr.
pub fn open_session(
    store: Store,
    shown: &str,
    id: &str,
    quiet: bool,
) -> Result<(Opened, StoreEnd)> {
    open_session_with(store, shown, id, quiet, false, 1, false)
}

/// [`open_session`], read first the fast way when `packed` and no test forces the exact read
/// (`dshs::log::scan::light::FULL_PASS_ENV`): a format 0/1 session's packed rows handed on
/// packed (`SessionReader::keep_packed_rows`) and, with `threads` above one, its stored texts
/// written by helper threads (`sqlite::Filled`; `parsing`: the consumer parses the stream on
/// threads of its own). [`StoreEnd::packed_read`] says whether that read can stand for the
/// exact one.
pub fn open_session_with(
    store: Store,
    shown: &str,
    id: &str,
    quiet: bool,
    packed: bool,
    threads: usize,
    parsing: bool,
) -> Result<(Opened, StoreEnd)> {
    let name = session_name(shown, id);
    let mut reader = store.into_reader(id).map_err(|e| store_failure(&e))?;
    // A first read is judged at its end (a violation ends it unclean, and the session is
    // read again the exact way): packed rows handed on packed, the rules checked row by row
    // without a pass over the table first, stored texts written by helper threads.
    // `DSHS_FULL_PASS=1` reads the exact way at once.
    let first = packed && !dshs::log::scan::light::full_pass_forced();
    let kept = first && reader.keep_packed_rows();
    if kept {
        reader.check_storage_class_inline();
    }
    let deferral = (first && threads > 1).then(|| reader.defer_decoding());
    // A format 0/1 read leaves few texts (its packed rows are read on the reader's turn):
    // beside a consumer that parses on threads of its own, more helpers only compete.
    let helpers = if kept && parsing { 1 } else { threads };
    // The storage-class pass and, for format 2+, the derived isSeeded (S11.5) come first.
    reader.derive_is_seeded().map_err(|e| store_failure(&e))?;
    if reader.findings().iter().any(Finding::is_error) {
        let findings = reader.finish().map_err(|e| store_failure(&e))?.findings;
        if !quiet {
            print_findings(&name, &findings);
        }
        refuse_on_errors(&name, &findings)?;
        return Err(Failure::usage(format!("{} cannot be read", escape(&name))));
    }
    let end = StoreEnd {
        name: name.clone(),
        slot: Arc::new(Mutex::new(None)),
    };
    let reader = match deferral {
        Some(deferral) => Source::Filled(
            sqlite::Filled::new(reader, deferral, helpers)
                .map_err(|e| Failure::usage(format!("cannot start a thread: {e}")))?,
        ),
        None => Source::Direct(Box::new(reader)),
    };
    let stream = Stream {
        reader: Some(reader),
        slot: end.slot.clone(),
    };
    let opened = Opened {
        name,
        path: None,
        reader: Box::new(stream),
        framing: None,
        older: Vec::new(),
        file: None,
        pipe: false,
    };
    Ok((opened, end))
}

/// The logical log as a `BufRead`, ending the read (and its transaction) when the pass has
/// read it all or lets it go.
struct Stream {
    reader: Option<Source>,
    slot: Arc<Mutex<Option<Result<ReadEnd, StoreError>>>>,
}

/// The session's reader, read by the pass's thread or by helper threads that write its
/// stored texts (see `sqlite::Filled`).
enum Source {
    Direct(Box<SessionReader<Connection>>),
    Filled(sqlite::Filled<SessionReader<Connection>>),
}

impl Source {
    fn get(&mut self) -> &mut dyn BufRead {
        match self {
            Source::Direct(r) => r,
            Source::Filled(r) => r,
        }
    }
}

impl Stream {
    fn end(&mut self) {
        let reader = match self.reader.take() {
            Some(Source::Direct(r)) => Some(*r),
            Some(Source::Filled(r)) => r.into_inner(),
            None => None,
        };
        // Without its reader (never so) the end stays unknown: "not read to its end".
        if let Some(r) = reader {
            let end = r.finish();
            *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(end);
        }
    }
}

impl Read for Stream {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        dshs::log::input::read_through_buffer(self, out)
    }
}

impl BufRead for Stream {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if let Some(r) = &mut self.reader
            && r.get().fill_buf()?.is_empty()
        {
            self.end();
        }
        match &mut self.reader {
            Some(r) => r.get().fill_buf(),
            None => Ok(&[]),
        }
    }

    fn consume(&mut self, amt: usize) {
        if let Some(r) = &mut self.reader {
            r.get().consume(amt);
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.end();
    }
}

/// A session opened to be changed (`repair`, `compact`): its logical log streamed to the
/// pass and copied to a spool as it is read, so the result can be checked — the spool plus
/// what would be appended, scanned like any log — before anything is written.
pub struct Change {
    /// `store.db#ID`.
    pub name: String,
    pub opened: Option<Opened>,
    pub spool: tempfile::NamedTempFile,
    pub end: StoreEnd,
}

/// A store session opened to be changed and read through once: what `repair` and `compact`
/// plan a change of a store from.
pub struct Scanned {
    pub change: Change,
    /// The session's name, escaped for the terminal.
    pub name: String,
    pub opts: dshs::log::scan::ScanOptions,
    pub errors: dshs::log::finding::ErrorList,
    pub scan: dshs::log::scan::Scan,
    pub end: ReadEnd,
}

impl Scanned {
    /// Open session `id` of the store at `db` for a change and pass over its logical log
    /// (with `observer`), then read the storage layer's end.
    pub fn read(
        db: &Path,
        shown: &str,
        id: Option<&str>,
        env: &super::Env,
        observer: &mut dyn dshs::log::scan::Observer,
    ) -> Result<Scanned> {
        let mut change = Change::open(db, shown, id, env.quiet)?;
        let name = escape(&change.name).into_owned();
        let opts = store_scan_options(env);
        let mut errors = dshs::log::finding::ErrorList::new(super::writing::SHOWN_ERRORS);
        let opened = change
            .opened
            .take()
            .ok_or_else(|| Failure::usage("the session was opened twice"))?;
        let scan = super::scan_source(opened, env, &opts, &mut errors, observer)
            .map_err(|e| super::writing::cannot_read(&name)(&e))?;
        let end = change.read_end()?;
        Ok(Scanned {
            change,
            name,
            opts,
            errors,
            scan,
            end,
        })
    }
}

impl Change {
    pub fn open(path: &Path, shown: &str, id: Option<&str>, quiet: bool) -> Result<Change> {
        let (store, id) = open_one(path, shown, id)?;
        let (mut opened, end) = open_session(store, shown, &id, quiet)?;
        let spool = dshs::log::input::tee_plaintext(&mut opened)
            .map_err(|e| Failure::usage(format!("cannot create a temporary file: {e}")))?
            .ok_or_else(|| Failure::usage("the logical log was not copied"))?;
        Ok(Change {
            name: opened.name.clone(),
            opened: Some(opened),
            spool,
            end,
        })
    }

    /// After the pass: the storage findings. A storage error is not crash damage a writer
    /// may touch (exit 1; 3 for an unsupported code), shown on stderr.
    pub fn read_end(&self) -> Result<ReadEnd> {
        let end = self.end.finished()?;
        if end.findings.iter().any(Finding::is_error) {
            print_findings(&self.name, &end.findings);
            refuse_on_errors(&self.name, &end.findings)?;
        }
        Ok(end)
    }

    /// Scan the logical log as it would be after `edit` (its committed lines, then what is
    /// appended), by the same rules as any log.
    pub fn verify(
        &self,
        edit: dshs::log::write::Edit<'_>,
        encoding: dshs::log::write::Encoding,
        opts: &dshs::log::scan::ScanOptions,
    ) -> io::Result<(dshs::log::scan::Scan, Vec<Finding>)> {
        let original = io::BufReader::new(std::fs::File::open(self.spool.path())?);
        dshs::log::append::scan_edit(original, edit, encoding, None, opts)
    }

    /// Write the logical log with `append` after its committed lines to a new file `dest`
    /// (`--output OUT.jsonl`), synced. Its length.
    pub fn write_jsonl(&self, committed: u64, append: &[u8], dest: &Path) -> Result<u64> {
        use std::io::Write as _;
        let failed = |e: io::Error| {
            Failure::usage(format!(
                "cannot write {}: {e}",
                escape(&dest.display().to_string())
            ))
        };
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dest)
            .map_err(|e| {
                if e.kind() == io::ErrorKind::AlreadyExists {
                    Failure::usage(format!(
                        "{} already exists; dshs never overwrites a file, choose another output path",
                        escape(&dest.display().to_string())
                    ))
                } else {
                    failed(e)
                }
            })?;
        let result = (|| -> io::Result<u64> {
            let mut from = std::fs::File::open(self.spool.path())?.take(committed);
            let n = io::copy(&mut from, &mut file)?;
            if n != committed {
                return Err(io::Error::other(
                    "the logical log changed while it was copied",
                ));
            }
            file.write_all(append)?;
            file.sync_all()?;
            Ok(n + append.len() as u64)
        })();
        result.map_err(|e| {
            let _ = std::fs::remove_file(dest);
            failed(e)
        })
    }
}

/// A write that did not happen: a refusal (exit 3: another connection, a change since the
/// plan, a schema-15 store), damage (exit 1) or a failure (exit 2). The message names it.
pub fn write_failed(e: &dshs::log::sqlite::write::WriteError) -> anyhow::Error {
    Failure::of(outcome_of_class(e.class()), e.to_string())
}

/// Whether `dest` names a JSONL file (`--output OUT.jsonl`: the logical log, not a copy of
/// the database).
pub fn is_jsonl_name(dest: &Path) -> bool {
    dest.extension().is_some_and(|x| x == "jsonl")
}

/// Write `plan` to session `id` of the store at `db` in place, say the writer's warnings, and
/// read the session back ([`recheck`]): the end of every change of a store.
pub fn write_checked(
    db: &Path,
    shown: &str,
    id: &str,
    plan: &sqlite::write::Plan,
    options: sqlite::write::Options,
    opts: &dshs::log::scan::ScanOptions,
) -> Result<sqlite::write::Written> {
    let written = sqlite::write::apply(db, plan, options).map_err(|e| write_failed(&e))?;
    for w in &written.warnings {
        crate::render::diag!("dshs: warning: {}", escape(w));
    }
    recheck(db, shown, id, opts)?;
    Ok(written)
}

/// S8.2 step 7: read the session again after a write; it must load with no error, no open
/// turn and no torn tail.
pub fn recheck(
    db: &Path,
    shown: &str,
    id: &str,
    opts: &dshs::log::scan::ScanOptions,
) -> Result<()> {
    let mut store = open_store(db).map_err(|e| store_failure(&e))?;
    let mut r = store.read(id).map_err(|e| store_failure(&e))?;
    r.derive_is_seeded().map_err(|e| store_failure(&e))?;
    let mut findings: Vec<Finding> = Vec::new();
    let scan = dshs::log::scan::scan(&mut r, None, opts, &mut findings, &mut ())
        .map_err(|e| Failure::usage(format!("cannot read {shown}#{id} again: {e}")))?;
    let end = r.finish().map_err(|e| store_failure(&e))?;
    let status = sqlite::combined_status(scan.status(), &end.findings);
    if status != Status::Valid || scan.open_turn() || end.snapshot.torn.is_some() {
        findings.extend(end.findings);
        print_findings(&session_name(shown, id), &findings);
        return Err(Failure::of(
            Outcome::Invalid,
            format!(
                "{} was written but does not read back as a clean session ({}); please report it",
                escape(&session_name(shown, id)),
                status.as_str()
            ),
        ));
    }
    Ok(())
}

/// Ready `r`, before it is read, for [`fast_scan`]: the options of the passes over it (the
/// fast one and, if that does not stand, the exact one), and whether to read it fast first
/// (not when `DSHS_FULL_PASS=1`, for the differential tests).
pub fn prepare_fast(
    r: &mut sqlite::StoreReader<'_>,
    env: &super::Env,
) -> (dshs::log::scan::ScanOptions, bool) {
    let mut opts = store_scan_options(env);
    if dshs::log::scan::light::full_pass_forced() {
        return (opts, false);
    }
    opts.deferred = Some(r.defer_decoding());
    if r.keep_packed_rows() {
        r.check_storage_class_inline();
    }
    (opts, true)
}

/// The pass over a session read the fast way: stored texts left for the parsing threads
/// (`SessionReader::defer_decoding`, when `opts` carries its handle) and, for format 0/1,
/// packed rows handed on packed (the pass folds them without building every member) and the
/// storage-class rules checked row by row. Its answer stands only when it is the answer of
/// the exact logical log: the read ended cleanly (so every text left was written as the exact
/// read writes it, every row passed the storage-class rules, and the storage layer has
/// nothing to say), every finding of the pass points at a line outside a packed row and
/// names no line in its message, so that it moves to its place in the expanded log, and they
/// are few enough to hold ([`HELD_FINDINGS`]). Then the findings go to `sink` and the scan
/// is returned. Otherwise (`None`) the reader starts over, in the same read transaction, the
/// exact way (storage-class pass first, packed rows expanded, nothing left for later),
/// nothing has been reported, and `observer` is as new.
pub fn fast_scan<O: Observer + Default>(
    r: &mut sqlite::StoreReader<'_>,
    opts: &dshs::log::scan::ScanOptions,
    sink: &mut dyn Sink,
    observer: &mut O,
) -> std::result::Result<Option<Scan>, StoreError> {
    let mut held = Held::default();
    let scan = dshs::log::scan::scan(&mut *r, None, opts, &mut held, &mut *observer);
    let ok = scan.is_ok()
        && !held.overflowed
        && r.ended_cleanly()
        && held.found.iter_mut().all(|f| r.move_finding(f));
    if !ok {
        *observer = O::default();
        r.restart_expanded()?;
        return Ok(None);
    }
    for f in held.found {
        sink.push(f);
    }
    Ok(scan.ok())
}

/// The most findings a fast read holds before it says them: past this many, the session is
/// read again the exact way, which says them as it finds them (memory stays bounded on a log
/// of junk).
pub const HELD_FINDINGS: usize = 10_000;

/// The findings of a fast read, held until it is known to stand.
#[derive(Default)]
struct Held {
    found: Vec<Finding>,
    overflowed: bool,
}

impl Sink for Held {
    fn push(&mut self, finding: Finding) {
        if self.found.len() < HELD_FINDINGS {
            self.found.push(finding);
        } else {
            self.overflowed = true;
        }
    }
}
