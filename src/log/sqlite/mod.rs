//! DSH's SQLite session store as a source of logical logs (SQLITE.md).
//!
//! A store is recognised by the SQLite magic ([`has_magic`]), checked for identity when
//! opened ([`Store::open`], S1–S2), and lists its sessions ([`Store::sessions`]). Reading
//! one session ([`Store::read`]) yields the logical log the JSONL backend would have written
//! for it — the header line of the `sessions` row (S3), then one line per logical event in
//! seq order (S4–S6) — streamed row by row, with the storage layer's own findings (storage
//! class, invalid session row, torn tail, committed damage: S7) kept apart for the caller.
//! Everything above the storage layer is the ordinary pass over those lines.
//!
//! Reads never change the database: it is opened read-only with SQLite's locks, and one read
//! transaction spans every read of a [`Store`], so what it reports is one committed state
//! whatever another process commits or checkpoints meanwhile. Two exceptions, each said in a
//! note ([`Store::notes`]): a hot journal is rolled back first (SQLite's recovery of the
//! last committed state, which every reader must do and which needs write access), and where
//! SQLite cannot make its side files (a read-only file system) the file is read immutable.
//! Writing (`repair`, `compact`) is [`write`] (S8.2).

use std::borrow::Borrow;
use std::fs::{self, File};
use std::io::{self, BufRead, Read};
use std::path::{Path, PathBuf};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use crate::log::codes::{Code, SeverityRule};
use crate::log::event::Kind;
use crate::log::finding::{Finding, Pos};
use crate::log::limits::LimitHit;
use crate::log::scan::Status;

mod decode;
mod deferred;
pub mod identity;
mod js;
mod session;
pub mod write;

pub use decode::{decode_sources, encode_sources};
pub use deferred::{Deferral, Filled};
pub use identity::Identity;
pub use session::SessionRow;

/// The first 16 bytes of every SQLite database file.
pub const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// How many bytes of logical lines a refill gathers before handing them out.
const FILL_TARGET: usize = 256 * 1024;

/// The layout versions dshs reads (S1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    /// One row per event, JSON text columns.
    V15,
    /// Packed chunk rows, `data` TEXT or zstd BLOB, varint `source_event_seqs`.
    V17,
}

impl Schema {
    pub fn user_version(self) -> i64 {
        match self {
            Schema::V15 => 15,
            Schema::V17 => 17,
        }
    }
}

/// How a failure maps onto dshs's outcomes (CLI.md exit codes 1, 2, 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Exit 1: the database or session is damaged.
    Invalid,
    /// Exit 2: cannot read (I/O, not a database, no such session).
    Failure,
    /// Exit 3: a database dshs does not read, or one in use by another process.
    Unsupported,
    /// Exit 4: a row past one of dshs's own guards (not damage: DSH reads it).
    Limit,
}

/// Why a store, or a session in it, cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The identity checks refused the database (S2); `code` says how.
    #[error("{message}")]
    Refused { code: Code, message: String },
    /// The file does not start with the SQLite magic.
    #[error("{path} is not a SQLite database (its first 16 bytes are not \"SQLite format 3\\0\")")]
    NotDatabase { path: String },
    /// No `sessions` row has this id.
    #[error("{path} holds no session {id:?}{}", known_ids(ids))]
    NoSession {
        path: String,
        id: String,
        ids: Vec<String>,
    },
    /// SQLite itself failed (`corrupt`: the file is damaged).
    #[error("cannot read {path}: {message}")]
    Sqlite {
        path: String,
        message: String,
        corrupt: bool,
    },
    /// A row past one of dshs's own guards ([`crate::log::limits`]): not read, not judged.
    #[error("cannot read {path}: {hit}")]
    Limit { path: String, hit: LimitHit },
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
}

fn known_ids(ids: &[String]) -> String {
    if ids.is_empty() {
        return " (it holds no session)".into();
    }
    let shown: Vec<_> = ids.iter().take(20).map(|i| format!("{i:?}")).collect();
    let more = ids.len().saturating_sub(20);
    format!(
        "; its sessions: {}{}",
        shown.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

impl StoreError {
    pub(crate) fn sqlite(path: &str, e: rusqlite::Error) -> StoreError {
        let corrupt = matches!(
            e.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
        );
        StoreError::Sqlite {
            path: path.to_owned(),
            message: e.to_string(),
            corrupt,
        }
    }

    /// The finding code of a refusal (`None` for plain read failures).
    pub fn code(&self) -> Option<Code> {
        match self {
            StoreError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub fn class(&self) -> Class {
        match self {
            StoreError::Refused { code, .. } => {
                if code.info().severity == SeverityRule::Unsupported {
                    Class::Unsupported
                } else {
                    Class::Invalid
                }
            }
            StoreError::Sqlite { corrupt: true, .. } => Class::Invalid,
            StoreError::Limit { .. } => Class::Limit,
            _ => Class::Failure,
        }
    }
}

/// Whether `path` starts with the SQLite magic (a 0-byte file does not; see [`Store::open`]).
pub fn has_magic(path: &Path) -> io::Result<bool> {
    let mut head = [0u8; 16];
    let mut f = File::open(path)?;
    let mut got = 0;
    while got < head.len() {
        match f.read(&mut head[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got == head.len() && &head == MAGIC)
}

/// How long a reader waits for a writer's lock (DSH's own busy timeout): a rollback-journal
/// writer holds the database exclusively while it commits.
const READ_BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(5000);

/// Open `path` for reading with SQLite's locks and begin the one read transaction every read
/// of the store runs in (one snapshot, whatever another process commits or checkpoints
/// meanwhile), then check the identity in it. A hot journal is rolled back first (SQLite's
/// own recovery, which needs write access); without a way to make SQLite's side files the
/// file is read immutable, said in a note.
fn open_read(
    path: &Path,
    shown: &str,
) -> Result<(Connection, ReadMode, Vec<String>, Identity), StoreError> {
    let sql = |e| StoreError::sqlite(shown, e);
    let mut notes = Vec::new();
    let conn = match begin_read(path, "mode=ro") {
        Ok(conn) => Ok(conn),
        Err(e) if extended_code(&e) == Some(rusqlite::ffi::SQLITE_READONLY_ROLLBACK) => {
            roll_back_hot_journal(path, shown)?;
            notes.push(format!(
                "{shown}: found a hot journal ({shown}-journal) left by a write that was interrupted before it committed; SQLite rolled the database back to its last committed state (what any reader of it must do first) before dshs read it"
            ));
            begin_read(path, "mode=ro")
        }
        Err(e) if cannot_make_side_files(&e) => {
            let wal = sibling(path, "-wal");
            if fs::metadata(&wal).is_ok_and(|m| m.is_file() && m.len() > 0) {
                return Err(StoreError::Sqlite {
                    path: shown.to_owned(),
                    message: format!(
                        "SQLite cannot open its WAL index {} ({e}), which it needs to read the transactions committed in {} (read-only file system or directory?); run dshs where the directory is writable",
                        sibling(path, "-shm").display(),
                        wal.display()
                    ),
                    corrupt: false,
                });
            }
            let conn = begin_read(path, "immutable=1").map_err(sql)?;
            notes.push(format!(
                "{shown}: SQLite cannot create or open its side files beside it ({e}; a read-only file system or directory, or a full disk?), so dshs read it without locks (immutable), which is exact only while no other process writes it"
            ));
            return finish_open(conn, ReadMode::Immutable, notes, shown);
        }
        Err(e) => Err(e),
    }
    .map_err(sql)?;
    finish_open(conn, ReadMode::ReadOnly, notes, shown)
}

fn finish_open(
    conn: Connection,
    mode: ReadMode,
    notes: Vec<String>,
    shown: &str,
) -> Result<(Connection, ReadMode, Vec<String>, Identity), StoreError> {
    let identity = identity::check(&conn, shown)?;
    Ok((conn, mode, notes, identity))
}

/// A read-only connection (`query`: its URI parameters) inside a read transaction that has
/// read the schema, so its snapshot is taken.
fn begin_read(path: &Path, query: &str) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        uri(path, query),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.pragma_update(None, "trusted_schema", "OFF")?;
    conn.busy_timeout(READ_BUSY_TIMEOUT)?;
    conn.execute_batch("BEGIN")?;
    conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| {
        r.get::<_, i64>(0)
    })?;
    Ok(conn)
}

pub(crate) fn extended_code(e: &rusqlite::Error) -> Option<std::ffi::c_int> {
    e.sqlite_error().map(|x| x.extended_code)
}

/// SQLite could not create or open `-shm`/`-wal` (a read-only file system or directory, a
/// full disk).
fn cannot_make_side_files(e: &rusqlite::Error) -> bool {
    use rusqlite::ffi;
    matches!(
        extended_code(e),
        Some(
            ffi::SQLITE_CANTOPEN
                | ffi::SQLITE_READONLY_CANTINIT
                | ffi::SQLITE_READONLY_DIRECTORY
                | ffi::SQLITE_READONLY_RECOVERY
                | ffi::SQLITE_READONLY_CANTLOCK
                | ffi::SQLITE_IOERR_SHMOPEN
                | ffi::SQLITE_IOERR_SHMSIZE
                | ffi::SQLITE_IOERR_SHMMAP
        )
    )
}

/// Let SQLite roll a hot journal back, on a read-write connection that reads only: the
/// rollback restores the last committed state, which any reader must do before reading.
fn roll_back_hot_journal(path: &Path, shown: &str) -> Result<(), StoreError> {
    let result = (|| -> rusqlite::Result<()> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.pragma_update(None, "trusted_schema", "OFF")?;
        conn.busy_timeout(READ_BUSY_TIMEOUT)?;
        conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| {
            r.get::<_, i64>(0)
        })?;
        Ok(())
    })();
    result.map_err(|e| StoreError::Sqlite {
        path: shown.to_owned(),
        message: format!(
            "{shown}-journal is a hot journal: a write to {shown} was interrupted before it committed, and SQLite must roll it back to the last committed state before anyone can read the database; that needs write access to {shown} and its directory, which dshs does not have here ({e}); run dshs (or sqlite3) as a user who can write them"
        ),
        corrupt: false,
    })
}

/// Split `A#B` per S11.3: `A#B` itself when it exists; otherwise at the first `#` whose
/// left part is an existing SQLite file. `None`: no session is named.
pub fn split_session_path(arg: &str) -> Option<(PathBuf, String)> {
    if Path::new(arg).exists() {
        return None;
    }
    for (i, _) in arg.match_indices('#') {
        let (left, right) = (&arg[..i], &arg[i + 1..]);
        let p = Path::new(left);
        if p.is_file() && has_magic(p).unwrap_or(false) {
            return Some((p.to_owned(), right.to_owned()));
        }
    }
    None
}

/// A storage-layer finding: it points at a row by `seq`, never at a line.
fn finding(code: Code, seq: Option<u64>, event_type: Option<&str>, message: String) -> Finding {
    Finding {
        code,
        severity: code.severity(),
        pos: Pos::default(),
        seq,
        event_type: event_type.map(str::to_owned),
        message,
    }
}

/// How the status of a session read from a store combines the pass over its logical log
/// with the storage layer's findings: an unsupported storage code makes it unsupported, any
/// other storage error invalid (like a header or physical error of a JSONL log, it outranks
/// the logical pass's own unsupported unknown type).
pub fn combined_status(logical: Status, storage: &[Finding]) -> Status {
    if storage
        .iter()
        .any(|f| f.is_error() && f.code.is_unsupported())
    {
        return Status::Unsupported;
    }
    if storage.iter().any(Finding::is_error) {
        return match logical {
            Status::Unsupported | Status::Valid => Status::Invalid,
            other => other,
        };
    }
    logical
}

/// `file:` URI of `path` with `query` (every byte outside the unreserved set escaped).
fn uri(path: &Path, query: &str) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut s = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-' | b'~') {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s.push('?');
    s.push_str(query);
    s
}

/// `<db>-wal` / `<db>-journal` beside the database.
pub(crate) fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// How a read opened the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    /// `immutable=1`, no lock: only when SQLite cannot make its side files (a read-only file
    /// system or directory), where no WAL writer can run either; or an empty file.
    Immutable,
    /// Read-only with SQLite's locks, in one read transaction for the life of the [`Store`]
    /// (or of the reader it hands its connection to). In WAL mode this creates `-shm` and
    /// `-wal` when they are missing (a read-only connection leaves them, the `-wal` empty).
    ReadOnly,
}

/// One session as `sessions` lists it, with its physical row count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    pub row: SessionRow,
    /// Physical rows in `events` (a packed row counts once).
    pub rows: u64,
}

/// An open session store (or an empty database).
#[derive(Debug)]
pub struct Store {
    conn: Option<Connection>,
    path: PathBuf,
    shown: String,
    identity: Identity,
    mode: ReadMode,
    findings: Vec<Finding>,
    notes: Vec<String>,
    max_scalar_bytes: u64,
}

impl Store {
    /// Open `path` for reading and run the identity checks (S2). A 0-byte file is an empty
    /// store; a file without the SQLite magic is [`StoreError::NotDatabase`].
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let shown = path.display().to_string();
        let io_err = |source| StoreError::Io {
            path: shown.clone(),
            source,
        };
        let meta = fs::metadata(path).map_err(io_err)?;
        if !meta.is_file() {
            return Err(io_err(io::Error::other("not a regular file")));
        }
        let max_scalar_bytes = crate::log::input::zstd::max_line_bytes();
        if meta.len() == 0 {
            return Ok(Store {
                conn: None,
                path: path.to_owned(),
                findings: vec![empty_finding(&shown)],
                shown,
                identity: Identity::Empty,
                mode: ReadMode::Immutable,
                notes: Vec::new(),
                max_scalar_bytes,
            });
        }
        if !has_magic(path).map_err(io_err)? {
            return Err(StoreError::NotDatabase { path: shown });
        }
        let (conn, mode, notes, identity) = open_read(path, &shown)?;
        let findings = match identity {
            Identity::Empty => vec![empty_finding(&shown)],
            Identity::Store { .. } => Vec::new(),
        };
        Ok(Store {
            conn: Some(conn),
            path: path.to_owned(),
            shown,
            identity,
            mode,
            findings,
            notes,
            max_scalar_bytes,
        })
    }

    /// What the open had to do that a user should hear of (a hot journal rolled back, a
    /// read without locks), one sentence each.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    pub fn schema(&self) -> Option<Schema> {
        match self.identity {
            Identity::Store { schema, .. } => Some(schema),
            Identity::Empty => None,
        }
    }

    pub fn mode(&self) -> ReadMode {
        self.mode
    }

    /// Store-level findings (`sqlite-store-empty`).
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// Refuse scalar `data` BLOBs that decompress to more than `bytes` (default: the zstd
    /// reader's line limit, `DSHS_MAX_LINE_BYTES`).
    pub fn set_max_scalar_bytes(&mut self, bytes: u64) {
        self.max_scalar_bytes = bytes;
    }

    /// Every session, in rowid order (the order `validate` reports them in, S9).
    pub fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let Some(conn) = &self.conn else {
            return Ok(Vec::new());
        };
        if self.identity == Identity::Empty {
            return Ok(Vec::new());
        }
        let sql = |e| StoreError::sqlite(&self.shown, e);
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {}, (SELECT count(*) FROM events WHERE session_id = sessions.id) \
                 FROM sessions ORDER BY rowid",
                session::COLUMNS
            ))
            .map_err(sql)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(SessionInfo {
                    row: SessionRow::from_row(r)?,
                    rows: r.get::<_, i64>(11)?.max(0) as u64,
                })
            })
            .map_err(sql)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(sql)
    }

    /// Read session `id`, in the store's read transaction (the snapshot [`Store::open`] took).
    pub fn read(&mut self, id: &str) -> Result<StoreReader<'_>, StoreError> {
        let schema = match (&self.conn, &self.identity) {
            (Some(_), Identity::Store { schema, .. }) => *schema,
            _ => return Err(self.no_session(id, Vec::new())),
        };
        self.known(id)?;
        let (shown, max) = (self.shown.clone(), self.max_scalar_bytes);
        let missing = self.no_session(id, Vec::new());
        let Some(conn) = self.conn.as_mut() else {
            return Err(missing);
        };
        SessionReader::begin(conn, &shown, id, schema, max, false)?.ok_or(missing)
    }

    /// Read session `id` like [`Store::read`], handing the store's connection to the reader:
    /// a reader that owns its connection can go where a `'static` stream is needed (a pass
    /// that spools or tees what it reads). The read transaction ends with the reader.
    pub fn into_reader(mut self, id: &str) -> Result<SessionReader<Connection>, StoreError> {
        let schema = match (&self.conn, &self.identity) {
            (Some(_), Identity::Store { schema, .. }) => *schema,
            _ => return Err(self.no_session(id, Vec::new())),
        };
        self.known(id)?;
        let Some(conn) = self.conn.take() else {
            return Err(self.no_session(id, Vec::new()));
        };
        SessionReader::begin(conn, &self.shown, id, schema, self.max_scalar_bytes, true)?
            .ok_or_else(|| self.no_session(id, Vec::new()))
    }

    /// `Ok` when session `id` exists, else [`StoreError::NoSession`] listing those that do.
    fn known(&self, id: &str) -> Result<(), StoreError> {
        let sql = |e| StoreError::sqlite(&self.shown, e);
        let found = match &self.conn {
            Some(conn) => SessionRow::read(conn, id).map_err(sql)?.is_some(),
            None => false,
        };
        if found {
            return Ok(());
        }
        let ids = self
            .sessions()
            .map(|s| s.into_iter().map(|i| i.row.id).collect())
            .unwrap_or_default();
        Err(self.no_session(id, ids))
    }

    fn no_session(&self, id: &str, ids: Vec<String>) -> StoreError {
        StoreError::NoSession {
            path: self.shown.clone(),
            id: id.to_owned(),
            ids,
        }
    }
}

fn empty_finding(shown: &str) -> Finding {
    finding(
        Code::SqliteStoreEmpty,
        None,
        None,
        format!(
            "{shown} is an empty SQLite database (no schema version, application id or table): DSH would initialise it on first use; it holds no session"
        ),
    )
}

/// Where the forward pass over the rows stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Rows are being read; the next starts at this row seq.
    Rows(i64),
    /// The stream ended (end of rows, torn tail, committed damage, or a refused session).
    Ended,
}

/// The rows cut off as a torn tail (S7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornRows {
    /// The `seq` of the first dropped row (where a repair deletes from; negative only in a
    /// schema-15 store, which has no storage-class pass).
    pub seq: i64,
    /// Physical rows from there on.
    pub rows: u64,
}

/// What a read saw that a writer must find unchanged under its write lock (S8.2 step 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub id: String,
    pub schema: Schema,
    pub incarnation: Option<String>,
    pub revision: Option<i64>,
    pub torn: Option<TornRows>,
    /// The last logical seq of the committed events (`None`: no event).
    pub last_seq: Option<u64>,
}

/// A session read to its end.
#[derive(Debug, Clone)]
pub struct ReadEnd {
    /// The storage layer's findings (S7, S11.6), in the order found.
    pub findings: Vec<Finding>,
    /// DSH refuses this session (invalid `sessions` row, storage class, committed damage):
    /// its stream ended early or was empty.
    pub refused: bool,
    /// Logical events streamed.
    pub events: u64,
    /// Time of the last logical event streamed.
    pub last_time: Option<i64>,
    /// Physical rows of the session.
    pub rows: u64,
    pub snapshot: Snapshot,
    /// For a read that handed packed rows on packed: where its lines lie in the expanded
    /// logical log, and whether it can stand for that log.
    pub packed: Option<PackedRead>,
}

/// How a read that handed packed rows on packed (see [`SessionReader::keep_packed_rows`])
/// relates to the expanded logical log a JSONL reader of the session sees.
#[derive(Debug, Clone, Default)]
pub struct PackedRead {
    map: Vec<PackedLine>,
    /// Every row was read and handed out with nothing for the storage layer to say after
    /// the first line (see [`SessionReader::ended_cleanly`]): a pass over the stream gives
    /// the answers of a pass over the expanded log, its positions moved by
    /// [`PackedRead::expanded_pos`].
    pub clean: bool,
}

impl PackedRead {
    /// Where `pos` of the stream read lies in the expanded log (see
    /// [`SessionReader::move_finding`]); `None` on a packed row.
    pub fn expanded_pos(&self, pos: Pos) -> Option<Pos> {
        expanded_pos(&self.map, pos)
    }

    /// See [`SessionReader::move_finding`].
    pub fn move_finding(&self, f: &mut Finding) -> bool {
        move_finding(&self.map, f)
    }

    /// Whether a pass over this read can stand for the pass over the expanded log, as far as
    /// the read and the pass's end go: the read ended cleanly, and the pass left no crash
    /// tail or torn line (their sizes count a packed row once). Each finding a command says
    /// must move too ([`PackedRead::move_finding`]).
    pub fn stands_with(&self, scan: &crate::log::scan::Scan) -> bool {
        self.clean && scan.crash.is_none() && scan.torn.is_none()
    }

    /// How many more bytes the expanded log holds than the stream read.
    pub fn extra_bytes(&self) -> i64 {
        self.map.last().map_or(0, |e| e.extra_bytes)
    }

    /// How many more lines the expanded log holds than the stream read.
    pub fn extra_lines(&self) -> u64 {
        self.map.last().map_or(0, |e| e.extra_lines)
    }
}

/// Move `f` from a stream whose packed rows are listed in `map` to its line of the expanded
/// log: false (and `f` as it was) when it is on a packed row or its words name a line, which
/// only a read of the expanded log says right.
fn move_finding(map: &[PackedLine], f: &mut Finding) -> bool {
    match expanded_pos(map, f.pos) {
        Some(pos) if !f.message.contains("line") => {
            f.pos = pos;
            true
        }
        _ => false,
    }
}

/// Where `pos` of a stream whose packed rows are listed in `map` lies in the expanded log:
/// the same line shifted by the member lines of the packed rows before it; `None` on a
/// packed row itself.
fn expanded_pos(map: &[PackedLine], pos: Pos) -> Option<Pos> {
    let at = map.partition_point(|e| e.line < pos.line);
    if map.get(at).is_some_and(|e| e.line == pos.line) {
        return None;
    }
    let (lines, bytes) = match at.checked_sub(1) {
        Some(i) => (map[i].extra_lines, map[i].extra_bytes),
        None => (0, 0),
    };
    Some(Pos {
        line: pos.line + lines,
        byte: u64::try_from(pos.byte as i64 + bytes).ok()?,
    })
}

/// One logical line of the stream with where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// The physical row's `seq` (`None` for the header line).
    pub row_seq: Option<u64>,
    /// The member of a packed row (0 for a scalar row).
    pub member: u32,
    /// The line, without its newline.
    pub bytes: &'a [u8],
}

#[derive(Debug, Clone, Copy)]
struct Span {
    row_seq: Option<u64>,
    member: u32,
    start: usize,
    end: usize,
}

const EVENT_COLUMNS: &str = "seq, type, time, data, source_event_seqs, surface_op, ignorable";

/// The session a [`SessionReader`] reads: what stays the same however far it has read (a
/// probe reading ahead starts from a copy).
#[derive(Debug, Clone)]
struct Session {
    /// The store as messages name it.
    shown: String,
    id: String,
    schema: Schema,
    max_scalar_bytes: u64,
    row: SessionRow,
}

/// The logical log of one session, streamed (see the module doc). Read it as a
/// [`BufRead`] of lines (header first, each line ending in `\n`) or line by line with
/// [`SessionReader::next_line`] — one or the other — then call [`SessionReader::finish`].
pub struct SessionReader<C: Borrow<Connection>> {
    conn: C,
    session: Session,
    header: Vec<u8>,
    header_sent: bool,
    findings: Vec<Finding>,
    refused: bool,
    /// The seq of the last decodable row holding a `turn/end` (S7 step 1).
    boundary: Option<i64>,
    phase: Phase,
    /// The next logical seq a row must start at (S6).
    expected: u64,
    events: u64,
    last_time: Option<i64>,
    torn: Option<TornRows>,
    scratch: decode::Scratch,
    buf: Vec<u8>,
    pos: usize,
    spans: Vec<Span>,
    span_at: usize,
    finished: bool,
    /// The reader opened the read transaction and ends it (a writer's re-scan does not).
    owns_txn: bool,
    /// The row seq of the first committed damage.
    damage_at: Option<i64>,
    /// After committed damage the rows go on, and the next row's seq is taken as it comes
    /// (see [`Resync`]).
    resync: Option<Resync>,
    /// Packed rows are handed on packed (see [`SessionReader::keep_packed_rows`]).
    keep_packed: bool,
    /// The storage-class rules: not yet checked, checked by one pass before the first line,
    /// or row by row as the rows are read (see [`SessionReader::check_storage_class_inline`]).
    class_check: ClassCheck,
    /// Lines handed out so far (the header is line 1).
    stream_lines: u64,
    /// Each packed row kept packed, in stream order (see [`SessionReader::move_finding`]).
    packed_map: Vec<PackedLine>,
    /// The state before the first line: (storage findings, refused, boundary).
    first: Option<(usize, bool, Option<i64>)>,
    /// The member lines of a packed row not handed out yet, and its row seq: written a
    /// few at a time, so a row of 1 MiB never becomes hundreds of MB of lines at once.
    pending: Option<(decode::Expansion, u64)>,
    /// The `data` texts left for the parsing threads (see [`SessionReader::defer_decoding`]).
    deferral: Option<std::sync::Arc<Deferral>>,
    /// The stream offset of `buf[0]`.
    buf_base: u64,
}

/// A packed row handed on packed: its line in the stream, and how many lines and bytes the
/// expanded logical log holds more than the stream up to and including it.
#[derive(Debug, Clone, Copy)]
struct PackedLine {
    line: u64,
    extra_lines: u64,
    extra_bytes: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClassCheck {
    Pending,
    Done,
    Inline,
}

/// The session/end-seed markers the storage-class pass gathered: the seqs of the inherited
/// ones, or the limit a marker hit (the first: no more are read).
#[derive(Debug, Default)]
struct SeedMarkers {
    inherited: Vec<i64>,
    limit: Option<LimitHit>,
}

/// A session being read from a [`Store`] (it holds the store's connection, so it can move to
/// another thread with the pass).
pub type StoreReader<'s> = SessionReader<&'s mut Connection>;

impl<C: Borrow<Connection>> std::fmt::Debug for SessionReader<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionReader")
            .field("id", &self.session.id)
            .field("schema", &self.session.schema)
            .field("phase", &self.phase)
            .finish()
    }
}

impl<C: Borrow<Connection>> SessionReader<C> {
    /// A reader of `row`'s events before any is read: the one place that knows the start
    /// state of every field, for the reader and for the probe that reads ahead of it.
    fn at_start(conn: C, session: Session) -> Self {
        SessionReader {
            conn,
            session,
            header: Vec::new(),
            header_sent: false,
            findings: Vec::new(),
            refused: false,
            boundary: None,
            phase: Phase::Rows(i64::MIN),
            expected: 0,
            events: 0,
            last_time: None,
            torn: None,
            scratch: decode::Scratch::default(),
            buf: Vec::new(),
            pos: 0,
            spans: Vec::new(),
            span_at: 0,
            finished: false,
            owns_txn: false,
            damage_at: None,
            resync: None,
            keep_packed: false,
            class_check: ClassCheck::Done,
            stream_lines: 0,
            packed_map: Vec::new(),
            first: None,
            pending: None,
            deferral: None,
            buf_base: 0,
        }
    }

    /// Inside an open read transaction: the session row, the storage-class pass and the
    /// committed boundary. `None`: no such session.
    fn begin(
        conn: C,
        shown: &str,
        id: &str,
        schema: Schema,
        max_scalar_bytes: u64,
        owns_txn: bool,
    ) -> Result<Option<SessionReader<C>>, StoreError> {
        let sql = |e| StoreError::sqlite(shown, e);
        let row = match SessionRow::read(conn.borrow(), id) {
            Ok(Some(row)) => row,
            found => {
                if owns_txn {
                    let _ = conn.borrow().execute_batch("COMMIT");
                }
                found.map_err(sql)?;
                return Ok(None);
            }
        };
        let session = Session {
            shown: shown.to_owned(),
            id: id.to_owned(),
            schema,
            max_scalar_bytes,
            row,
        };
        let mut r = SessionReader::at_start(conn, session);
        r.owns_txn = owns_txn;
        if schema == Schema::V17 {
            r.class_check = ClassCheck::Pending;
        }
        // S7 step 3: fatal wherever the row is, checked before any event is decoded.
        let problems = r.session.row.problems(schema);
        if !problems.is_empty() {
            r.refuse(finding(
                Code::SqliteSessionRowInvalid,
                None,
                None,
                format!(
                    "session {:?}: its sessions row is invalid ({}); DSH refuses the session before reading any event",
                    r.session.id,
                    problems.join("; ")
                ),
            ));
            return Ok(Some(r));
        }
        r.header = r.session.row.header_line(None);
        Ok(Some(r))
    }

    fn refuse(&mut self, f: Finding) {
        self.findings.push(f);
        self.refused = true;
        self.phase = Phase::Ended;
    }

    /// Hand each valid packed chunk row on as one JSONL packed row (`{"type":"text-chunks",
    /// "seq0":…,"time0":…,"data":…}`, FORMAT.md §5.2) instead of one line per member: the
    /// pass folds such rows without building every member (the JSONL path's fast way), and
    /// every rule gives the same answer, SQLite's bounds (3–1,024 members, 1 MiB) being
    /// stricter than JSONL's. Only for sessions of format version 0 or 1, the versions whose
    /// JSONL has packed rows; call before reading. Whether it applies.
    pub fn keep_packed_rows(&mut self) -> bool {
        let applies = !self.header_sent && matches!(self.session.row.version, Some(0 | 1));
        self.keep_packed = applies;
        applies
    }

    /// Check S4's storage-class rules on each row as it is read instead of in one pass over
    /// the session before the first line (a pass that costs about as much as SQLite's own
    /// reading of the rows). A violation then ends the stream where it is found and
    /// [`SessionReader::finish`] reports the session refused: for a consumer that decides
    /// only at the end (`validate`, a repair plan), not for one that prints as it reads.
    /// Call before reading.
    pub fn check_storage_class_inline(&mut self) {
        if self.class_check == ClassCheck::Pending {
            self.class_check = ClassCheck::Inline;
        }
    }

    /// Move a finding of the pass over the stream read so far to its place in the logical
    /// log with packed rows expanded (the log a JSONL reader of this session sees): the same
    /// line shifted by the member lines of the packed rows before it. False, and the finding
    /// as it was, when it is on a packed row handed on packed (see
    /// [`SessionReader::keep_packed_rows`]) or its words name a line (of the stream, not of
    /// that log).
    pub fn move_finding(&self, f: &mut Finding) -> bool {
        move_finding(&self.packed_map, f)
    }

    /// Whether every row was read and handed out with nothing for the storage layer to say
    /// (no torn tail, no damage, no refusal, no new finding).
    pub fn ended_cleanly(&self) -> bool {
        self.phase == Phase::Ended
            && self.span_at >= self.spans.len()
            && self.torn.is_none()
            && self.damage_at.is_none()
            && !self.refused
            && self.first.is_some_and(|(n, _, _)| n == self.findings.len())
            && self.deferral.as_ref().is_none_or(|d| d.settled())
    }

    /// Leave the `data` texts upstream stores in its own form (see [`deferred`]) for the
    /// parsing threads, once a pass over this stream arms the returned handle (through
    /// [`crate::log::scan::ScanOptions::deferred`]). For a consumer that can read the session
    /// again: unless the read [ended cleanly](SessionReader::ended_cleanly), it calls
    /// [`SessionReader::restart_expanded`], which reads the exact way. Call before reading.
    pub fn defer_decoding(&mut self) -> std::sync::Arc<Deferral> {
        self.deferral
            .get_or_insert_with(|| std::sync::Arc::new(Deferral::default()))
            .clone()
    }

    /// Read the session again from its header, in the same read transaction, with packed rows
    /// expanded and the storage-class rules checked in one pass first (as a reader that was
    /// given neither [`SessionReader::keep_packed_rows`] nor
    /// [`SessionReader::check_storage_class_inline`]): for a consumer that read it the fast
    /// way and needs the exact stream after all. The storage findings of the first read are
    /// dropped.
    pub fn restart_expanded(&mut self) -> Result<(), StoreError> {
        if let Some((n, refused, boundary)) = self.first.take() {
            self.findings.truncate(n);
            self.refused = refused;
            self.boundary = boundary;
        }
        self.phase = if self.refused {
            Phase::Ended
        } else {
            Phase::Rows(i64::MIN)
        };
        self.expected = 0;
        self.events = 0;
        self.last_time = None;
        self.torn = None;
        self.damage_at = None;
        self.resync = None;
        self.header_sent = false;
        if let Some(deferral) = self.deferral.take() {
            deferral.spend();
        }
        self.buf_base = 0;
        self.buf.clear();
        self.spans.clear();
        self.pos = 0;
        self.span_at = 0;
        self.keep_packed = false;
        self.packed_map = Vec::new();
        self.stream_lines = 0;
        self.pending = None;
        if self.class_check == ClassCheck::Inline {
            self.class_check = ClassCheck::Pending;
        }
        self.class_pass_if_due(false).map(drop)
    }

    /// The storage-class pass, if it is still due (before the first line); asked to, the
    /// same scan also gathers the session/end-seed markers (see [`SeedMarkers`]), which it
    /// returns when it ran.
    fn class_pass_if_due(&mut self, markers: bool) -> Result<Option<SeedMarkers>, StoreError> {
        if self.class_check != ClassCheck::Pending {
            return Ok(None);
        }
        self.class_check = ClassCheck::Done;
        let (violation, markers) = self.storage_class_pass(markers)?;
        if let Some(f) = violation {
            self.refuse(f);
        }
        Ok(markers)
    }

    fn mode(&self) -> decode::Mode {
        decode::Mode {
            schema: self.session.schema,
            max_scalar_bytes: self.session.max_scalar_bytes,
            keep_packed: self.keep_packed,
            defer: self.deferral.as_ref().is_some_and(|d| d.armed()),
        }
    }

    /// The header line (no newline); empty for a refused session.
    pub fn header_line(&self) -> &[u8] {
        &self.header
    }

    pub fn session_row(&self) -> &SessionRow {
        &self.session.row
    }

    pub fn schema(&self) -> Schema {
        self.session.schema
    }

    /// Storage findings so far.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// S4's storage-class rules over every row of the session, in SQL (reading only the
    /// record headers of large values), and with `markers` the session/end-seed markers of
    /// isSeeded (S11.5) from the same scan: each read of the table costs as much as SQLite's
    /// reading of the rows, and the markers have no index to find them by.
    fn storage_class_pass(
        &mut self,
        markers: bool,
    ) -> Result<(Option<Finding>, Option<SeedMarkers>), StoreError> {
        let shown = self.session.shown.clone();
        let sql = |e| StoreError::sqlite(&shown, e);
        let mode = self.mode();
        let conn = self.conn.borrow();
        let ok = "seq BETWEEN 0 AND 9007199254740991 \
             AND typeof(type) = 'text' AND type <> '' \
             AND typeof(time) = 'integer' AND time BETWEEN -9007199254740991 AND 9007199254740991 \
             AND typeof(data) IN ('text', 'blob') \
             AND (source_event_seqs IS NULL OR typeof(source_event_seqs) = 'blob') \
             AND (surface_op IS NULL OR typeof(surface_op) = 'text') \
             AND (ignorable IS NULL OR (typeof(ignorable) = 'integer' AND ignorable IN (0, 1)))";
        // The event's columns come first, as `raw_row` reads them (for a marker).
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {EVENT_COLUMNS}, NOT ({ok}), typeof(type), type = '', typeof(data), \
                 typeof(source_event_seqs), typeof(surface_op) FROM events \
                 WHERE session_id = ?1 AND (NOT ({ok}){}) ORDER BY seq",
                if markers { " OR type = ?2" } else { "" }
            ))
            .map_err(sql)?;
        let seed = Kind::SessionEndSeed.name();
        let mut rows = if markers {
            stmt.query(rusqlite::params![self.session.id, seed])
        } else {
            stmt.query([&self.session.id])
        }
        .map_err(sql)?;
        let mut first: Option<(i64, String)> = None;
        let mut count = 0u64;
        let mut found = markers.then(SeedMarkers::default);
        let mut line = Vec::new();
        while let Some(r) = rows.next().map_err(sql)? {
            let violates: bool = r.get(7).map_err(sql)?;
            if !violates {
                // A marker: read as `is_seeded` read them in a scan of its own. A limit hit
                // is an error only if no row breaks the rules (the refusal comes first).
                if let Some(found) = &mut found
                    && found.limit.is_none()
                {
                    let raw = raw_row(r).map_err(sql)?;
                    match decode_line(&mut self.scratch, &raw, mode, &mut line) {
                        Err(hit) => found.limit = Some(hit),
                        Ok(true) if inherited(&line) => found.inherited.push(raw.seq),
                        Ok(_) => {}
                    }
                }
                continue;
            }
            count += 1;
            if first.is_some() {
                continue;
            }
            let seq: i64 = r.get(0).map_err(sql)?;
            let ty: String = r.get(8).map_err(sql)?;
            let empty: Option<bool> = r.get(9).map_err(sql)?;
            let time = r.get_ref(2).map_err(sql)?;
            let data: String = r.get(10).map_err(sql)?;
            let sources: String = r.get(11).map_err(sql)?;
            let op: String = r.get(12).map_err(sql)?;
            let ignorable = r.get_ref(6).map_err(sql)?;
            let why = if !(0..=crate::log::json::MAX_SAFE as i64).contains(&seq) {
                format!("seq {seq} is not a safe integer ≥ 0")
            } else if ty != "text" {
                format!("type is {}, not TEXT", ty.to_uppercase())
            } else if empty == Some(true) {
                "type is empty".to_owned()
            } else if !matches!(time, ValueRef::Integer(t) if t.unsigned_abs() <= crate::log::json::MAX_SAFE)
            {
                format!("time is not a safe integer ({})", value_text(time))
            } else if data != "text" && data != "blob" {
                format!(
                    "data is {} (stored data must be a string or blob: TEXT or BLOB)",
                    data.to_uppercase()
                )
            } else if sources != "null" && sources != "blob" {
                format!(
                    "source_event_seqs is {}, not NULL or BLOB (schema 17 stores the varint list)",
                    sources.to_uppercase()
                )
            } else if op != "null" && op != "text" {
                format!("surface_op is {}, not NULL or TEXT", op.to_uppercase())
            } else {
                format!("ignorable is {}, not NULL, 0 or 1", value_text(ignorable))
            };
            first = Some((seq, why));
        }
        drop(rows);
        drop(stmt);
        let violation = first.map(|(seq, why)| self.class_finding(seq, &why, count - 1));
        Ok((violation, found))
    }

    fn class_finding(&self, seq: i64, why: &str, others: u64) -> Finding {
        {
            finding(
                Code::SqliteStorageClass,
                u64::try_from(seq).ok(),
                None,
                format!(
                    "session {:?}: the events row at seq {seq} breaks the storage-class rules: {why}{}; DSH refuses the whole session wherever such a row is",
                    self.session.id,
                    if others > 0 {
                        format!(
                            " ({others} more row{} break them too)",
                            if others == 1 { "" } else { "s" }
                        )
                    } else {
                        String::new()
                    }
                ),
            )
        }
    }

    /// S7 step 1: the last row that decodes and holds a `turn/end` (only a scalar row can;
    /// schema 15: the last row whose type is `turn/end`), looked for only among rows from
    /// `from` on. Asked only when a row fails: the failing
    /// row lies at or before the boundary exactly when such a row exists there, so a
    /// session without damage never pays for this pass.
    fn find_boundary(&mut self, from: i64) -> rusqlite::Result<Option<i64>> {
        let mode = self.mode();
        let mut stmt = self.conn.borrow().prepare(&format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ?1 AND type = ?2 \
             AND seq >= ?3 ORDER BY seq DESC"
        ))?;
        let mut rows = stmt.query(rusqlite::params![
            self.session.id,
            Kind::TurnEnd.name(),
            from
        ])?;
        let mut sink = Vec::new();
        while let Some(r) = rows.next()? {
            let raw = raw_row(r)?;
            // Schema 15's scanRows looks at the type column alone: that row is the boundary
            // whether or not it decodes.
            if self.session.schema == Schema::V15 {
                return Ok(Some(raw.seq));
            }
            sink.clear();
            if let Ok(d) = decode::decode_row(&raw, mode, &mut self.scratch, &mut sink)
                && d.turn_end
            {
                return Ok(Some(raw.seq));
            }
        }
        Ok(None)
    }

    /// S11.5, on request: a session of format version ≥ 2 needs `isSeeded` in its header,
    /// which no column holds. Derive it (whether a committed `session/end-seed {inherited:
    /// true}` exists), put it into the header line (before `delegationDepth`), and warn
    /// (`sqlite-is-seeded-derived`). Call before reading; `None` (nothing changed) for
    /// versions 0–1 or a refused session. Without this call the header is exactly what
    /// upstream's `toHeaderLine` writes, which a v2+ header check refuses for the missing
    /// field.
    pub fn derive_is_seeded(&mut self) -> Result<Option<bool>, StoreError> {
        // Only for a version dshs reads: an unsupported one is refused by the header check,
        // and a derived field would be a warning about a header nobody reads.
        let supported = self.session.row.version.is_some_and(|v| {
            u8::try_from(v).is_ok_and(|v| crate::log::dialect::Dialect::for_version(v).is_some())
        });
        let derives =
            !self.header_sent && supported && self.session.row.version.is_some_and(|v| v >= 2);
        let markers = self.class_pass_if_due(derives)?;
        if self.refused || !derives {
            return Ok(None);
        }
        let markers = match markers {
            Some(SeedMarkers {
                limit: Some(hit), ..
            }) => return Err(self.limit(hit)),
            Some(m) => m.inherited,
            None => self.seed_markers()?,
        };
        let seeded = self.is_seeded(markers)?;
        self.header = self.session.row.header_line(Some(seeded));
        Ok(Some(seeded))
    }

    /// The seqs of the inherited session/end-seed markers, in a scan of their own (when the
    /// storage-class pass had already run).
    fn seed_markers(&mut self) -> Result<Vec<i64>, StoreError> {
        let mut markers: Vec<i64> = Vec::new();
        self.each_row_of(Kind::SessionEndSeed, None, |seq, line| {
            if line.is_some_and(inherited) {
                markers.push(seq);
            }
        })?;
        Ok(markers)
    }

    /// Whether one of the inherited `markers` lies before the first row the stream drops:
    /// reads the session once more to find where the committed rows end, only when a
    /// marker exists.
    fn is_seeded(&mut self, markers: Vec<i64>) -> Result<bool, StoreError> {
        let seeded = if markers.is_empty() {
            false
        } else {
            // Only markers before the first row the stream would drop count.
            let mut probe = SessionReader::at_start(self.conn.borrow(), self.session.clone());
            probe.header_sent = true;
            probe.boundary = self.boundary;
            while probe.phase != Phase::Ended {
                probe.buf.clear();
                probe.spans.clear();
                probe.fill_rows()?;
            }
            let end = probe.expected;
            markers.iter().any(|&m| m >= 0 && (m as u64) < end)
        };
        self.findings.push(finding(
            Code::SqliteIsSeededDerived,
            None,
            None,
            format!(
                "session {:?} has format version {}, whose header requires isSeeded, but no column holds it: derived isSeeded:{seeded} from {}",
                self.session.id,
                self.session.row.version.unwrap_or(0),
                if seeded {
                    "its inherited session/end-seed marker"
                } else {
                    "the absence of an inherited session/end-seed marker"
                }
            ),
        ));
        Ok(seeded)
    }

    /// Decode rows into the buffer until it holds [`FILL_TARGET`] bytes or the stream ends.
    fn fill_rows(&mut self) -> Result<(), StoreError> {
        let mode = self.mode();
        let Phase::Rows(from) = self.phase else {
            return Ok(());
        };
        if !write_pending(&mut self.pending, &mut self.buf, &mut self.spans) {
            return Ok(());
        }
        let shown = self.session.shown.clone();
        let sql = |e| StoreError::sqlite(&shown, e);
        let mut stmt = select_events_from(self.conn.borrow(), "").map_err(sql)?;
        let mut rows = stmt
            .query(rusqlite::params![self.session.id, from])
            .map_err(sql)?;
        loop {
            if self.buf.len() >= FILL_TARGET {
                return Ok(());
            }
            let Some(r) = rows.next().map_err(sql)? else {
                self.phase = Phase::Ended;
                return Ok(());
            };
            let raw = raw_row(r).map_err(sql)?;
            // The next fill starts after this row, whatever happens to it.
            self.phase = Phase::Rows(raw.seq.saturating_add(1));
            if self.class_check == ClassCheck::Inline
                && let Some(why) = decode::class_violation(&raw)
            {
                let seq = raw.seq;
                drop(rows);
                drop(stmt);
                let f = self.class_finding(seq, &why, 0);
                self.refuse(f);
                return Ok(());
            }
            let start = self.buf.len();
            self.scratch.lazy = true;
            let result = decode::decode_row(&raw, mode, &mut self.scratch, &mut self.buf);
            self.scratch.lazy = false;
            if let Some(hit) = self.scratch.limit.take() {
                // Not read, so not judged: neither torn nor damaged (issue 37 item 2).
                self.phase = Phase::Ended;
                return Err(self.limit(hit));
            }
            let resync = match self.resync.take() {
                Some(Resync::Forward) => raw.seq >= 0 && raw.seq as u64 > self.expected,
                Some(Resync::At(at)) => at == raw.seq,
                None => false,
            };
            if resync && result.is_ok() {
                self.expected = raw.seq as u64;
            }
            let failure = match result {
                Err(why) => Some(Failure::Malformed(why)),
                Ok(_) if raw.seq < 0 || raw.seq as u64 != self.expected => {
                    self.buf.truncate(start);
                    self.scratch.pending = None;
                    Some(Failure::Gap)
                }
                Ok(d) if self.scratch.pending.is_some() => {
                    // A packed row, valid and in sequence: its member lines follow, a few at a
                    // time.
                    if let Some(e) = self.scratch.pending.take() {
                        self.pending = Some((e, raw.seq as u64));
                    }
                    self.stream_lines += d.lines;
                    self.expected += d.members;
                    self.events += d.members;
                    self.last_time = Some(d.last_time);
                    // With room left once they are written, the rows go on from the same
                    // statement; otherwise the next fill writes the rest first.
                    if !write_pending(&mut self.pending, &mut self.buf, &mut self.spans) {
                        return Ok(());
                    }
                    None
                }
                Ok(d) => {
                    if let (Some(mut job), Some(deferral)) =
                        (self.scratch.deferred.take(), &self.deferral)
                    {
                        job.at += self.buf_base;
                        deferral.push(job);
                    }
                    let mut at = start;
                    for member in 0..d.lines as u32 {
                        let end = at
                            + memchr::memchr(b'\n', &self.buf[at..]).unwrap_or(self.buf.len() - at);
                        self.spans.push(Span {
                            row_seq: Some(raw.seq as u64),
                            member,
                            start: at,
                            end,
                        });
                        at = end + 1;
                    }
                    self.stream_lines += d.lines;
                    if d.expanded_bytes > 0 {
                        let written = (self.buf.len() - start) as i64;
                        let (l, b) = self
                            .packed_map
                            .last()
                            .map_or((0, 0), |e| (e.extra_lines, e.extra_bytes));
                        self.packed_map.push(PackedLine {
                            line: self.stream_lines,
                            extra_lines: l + d.members - 1,
                            extra_bytes: b + d.expanded_bytes as i64 - written,
                        });
                    }
                    self.expected += d.members;
                    self.events += d.members;
                    self.last_time = Some(d.last_time);
                    None
                }
            };
            if let Some(f) = failure {
                let ty = raw.type_text();
                let seq = raw.seq;
                drop(rows);
                drop(stmt);
                // Whether this row is committed may hang on a later turn/end past a guard:
                // that is asked once, at the first failure, for every later one.
                if self.damage_at.is_none() {
                    self.no_limit_decides(seq)?;
                }
                self.failed(seq, ty.as_deref(), f)?;
                return Ok(());
            }
        }
    }

    /// The error of a row past a guard of dshs's own.
    fn limit(&self, hit: LimitHit) -> StoreError {
        let at = format!("{} of session {:?}", hit.at, self.session.id);
        StoreError::Limit {
            path: self.session.shown.clone(),
            hit: hit.at(at),
        }
    }

    /// Before a row from `from` on is judged (torn tail or damage, S7): whether it is
    /// committed depends on the `turn/end` rows after it, so none of them may be one dshs
    /// cannot read for a reason of its own — that refuses the read instead.
    fn no_limit_decides(&mut self, from: i64) -> Result<(), StoreError> {
        self.each_row_of(Kind::TurnEnd, Some(from), |_, _| {})
    }

    /// Decodes, in seq order, the session's rows of type `kind` (only those after seq `after`
    /// when given), handing `each` a row's seq and its line (`None`: it does not decode). A
    /// row dshs cannot read for a reason of its own refuses the read instead.
    fn each_row_of(
        &mut self,
        kind: Kind,
        after: Option<i64>,
        mut each: impl FnMut(i64, Option<&[u8]>),
    ) -> Result<(), StoreError> {
        let mode = self.mode();
        let shown = self.session.shown.clone();
        let sql = |e| StoreError::sqlite(&shown, e);
        let above = if after.is_some() { " AND seq > ?3" } else { "" };
        let mut stmt = self
            .conn
            .borrow()
            .prepare(&format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ?1 AND type = ?2{above} \
                 ORDER BY seq"
            ))
            .map_err(sql)?;
        let ty = kind.name();
        let mut params: Vec<&dyn rusqlite::ToSql> = vec![&self.session.id, &ty];
        if let Some(after) = &after {
            params.push(after);
        }
        let mut rows = stmt.query(params.as_slice()).map_err(sql)?;
        let mut line = Vec::new();
        while let Some(r) = rows.next().map_err(sql)? {
            let raw = raw_row(r).map_err(sql)?;
            let decoded = decode_line(&mut self.scratch, &raw, mode, &mut line)
                .map_err(|hit| self.limit(hit))?;
            each(raw.seq, decoded.then_some(line.as_slice()));
        }
        Ok(())
    }

    /// A row that fails to decode or breaks contiguity (S7 step 2).
    fn failed(&mut self, seq: i64, ty: Option<&str>, f: Failure) -> Result<(), StoreError> {
        // Found at the first failure; later ones lie after it, within what it looked at.
        if self.damage_at.is_none() {
            self.boundary = self
                .find_boundary(seq)
                .map_err(|e| StoreError::sqlite(&self.session.shown, e))?;
        }
        let sql = |e| StoreError::sqlite(&self.session.shown, e);
        let why = match &f {
            Failure::Malformed(why) => why.clone(),
            Failure::Gap => format!(
                "seq {seq} where the logical sequence expects {} (S6: no gap, no overlap)",
                self.expected
            ),
        };
        if self.boundary.is_some_and(|b| seq <= b) {
            let (code, what) = match f {
                Failure::Malformed(_) => (
                    Code::CommittedMalformedRow,
                    "invalid committed physical row",
                ),
                Failure::Gap => (Code::CommittedSeqGap, "seq gap in the committed rows"),
            };
            // The rows go on (FORMAT.md §6.3): a row that does not decode is skipped, a gap is
            // taken at the row's own seq, a row that overlaps the ones before is skipped.
            (self.phase, self.resync) = match f {
                Failure::Malformed(_) => {
                    (Phase::Rows(seq.saturating_add(1)), Some(Resync::Forward))
                }
                Failure::Gap if seq >= 0 && seq as u64 > self.expected => {
                    (Phase::Rows(seq), Some(Resync::At(seq)))
                }
                Failure::Gap => (Phase::Rows(seq.saturating_add(1)), Some(Resync::Forward)),
            };
            self.refused = true;
            self.damage_at.get_or_insert(seq);
            self.findings.push(finding(
                code,
                u64::try_from(seq).ok(),
                ty,
                format!(
                    "corrupt session log: {what} at seq {seq} of session {:?}: {why}; the row lies at or before the last committed turn/end (row seq {}), so DSH refuses the session",
                    self.session.id,
                    self.boundary.unwrap_or_default()
                ),
            ));
            return Ok(());
        }
        self.phase = Phase::Ended;
        let rows: i64 = self
            .conn
            .borrow()
            .query_row(
                "SELECT count(*) FROM events WHERE session_id = ?1 AND seq >= ?2",
                rusqlite::params![self.session.id, seq],
                |r| r.get(0),
            )
            .map_err(sql)?;
        let rows = rows.max(1) as u64;
        self.torn = Some(TornRows { seq, rows });
        let after = match self.boundary {
            Some(b) => format!("follow the last committed turn/end (row seq {b})"),
            None => {
                "lie where no turn/end commits them (the session holds no turn/end that decodes)"
                    .to_owned()
            }
        };
        self.findings.push(finding(
            Code::CrashTail,
            u64::try_from(seq).ok(),
            ty,
            format!(
                "torn tail: {rows} row{} of session {:?} from seq {seq} {after} and are dropped on load; first bad row: {why}",
                if rows == 1 { "" } else { "s" },
                self.session.id
            ),
        ));
        Ok(())
    }

    /// The next logical line (the header first), or `None` at the end of the stream.
    pub fn next_line(&mut self) -> Result<Option<Line<'_>>, StoreError> {
        if self.span_at >= self.spans.len() {
            self.refill()?;
            if self.span_at >= self.spans.len() {
                return Ok(None);
            }
        }
        let s = self.spans[self.span_at];
        self.span_at += 1;
        self.pos = s.end + 1;
        Ok(Some(Line {
            row_seq: s.row_seq,
            member: s.member,
            bytes: &self.buf[s.start..s.end],
        }))
    }

    fn refill(&mut self) -> Result<(), StoreError> {
        self.class_pass_if_due(false)?;
        self.buf_base += self.buf.len() as u64;
        self.buf.clear();
        self.spans.clear();
        self.pos = 0;
        self.span_at = 0;
        if !self.header_sent {
            self.header_sent = true;
            self.first = Some((self.findings.len(), self.refused, self.boundary));
            if !self.refused {
                self.stream_lines = 1;
                self.buf.extend_from_slice(&self.header);
                self.spans.push(Span {
                    row_seq: None,
                    member: 0,
                    start: 0,
                    end: self.header.len(),
                });
                self.buf.push(b'\n');
                // The header alone: a pass reads it before it arms a deferral, and the
                // rows after it are then all read armed.
                return Ok(());
            }
        }
        while self.buf.len() < FILL_TARGET && self.phase != Phase::Ended {
            self.fill_rows()?;
        }
        Ok(())
    }

    /// Read the rest (if the caller stopped early) and end the read transaction.
    pub fn finish(mut self) -> Result<ReadEnd, StoreError> {
        // A read with texts left for later can stand for the exact read only when it was
        // clean, like one with packed rows kept packed: both are judged by it.
        let first = self.keep_packed || self.deferral.is_some();
        let packed = first.then(|| PackedRead {
            clean: self.ended_cleanly(),
            map: std::mem::take(&mut self.packed_map),
        });
        self.class_pass_if_due(false)?;
        while self.phase != Phase::Ended {
            self.buf.clear();
            self.spans.clear();
            self.fill_rows()?;
        }
        let sql = |e| StoreError::sqlite(&self.session.shown, e);
        let rows: i64 = self
            .conn
            .borrow()
            .query_row(
                "SELECT count(*) FROM events WHERE session_id = ?1",
                [&self.session.id],
                |r| r.get(0),
            )
            .map_err(sql)?;
        self.finished = true;
        if self.owns_txn {
            self.conn.borrow().execute_batch("COMMIT").map_err(sql)?;
        }
        let last_seq = self.expected.checked_sub(1);
        Ok(ReadEnd {
            findings: std::mem::take(&mut self.findings),
            refused: self.refused,
            events: self.events,
            last_time: self.last_time,
            rows: rows.max(0) as u64,
            snapshot: Snapshot {
                id: self.session.id.clone(),
                schema: self.session.schema,
                incarnation: self.session.row.incarnation.clone(),
                revision: self.session.row.revision,
                torn: self.torn,
                last_seq,
            },
            packed,
        })
    }
}

impl<C: Borrow<Connection>> Drop for SessionReader<C> {
    fn drop(&mut self) {
        if self.owns_txn && !self.finished {
            let _ = self.conn.borrow().execute_batch("COMMIT");
        }
    }
}

enum Failure {
    Malformed(String),
    Gap,
}

/// How the rows go on after committed damage (FORMAT.md §6.3, as a JSONL log's pass does):
/// after a row that does not decode, the next row's seq is taken as it comes; after a seq
/// gap, the row that made it is taken at its own seq.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resync {
    Forward,
    At(i64),
}

/// Write the pending member lines of a packed row until the buffer holds [`FILL_TARGET`]
/// bytes; whether none is left. A function of the reader's fields, not a method, so that a
/// fill can call it while its statement still borrows the connection.
fn write_pending(
    pending: &mut Option<(decode::Expansion, u64)>,
    buf: &mut Vec<u8>,
    spans: &mut Vec<Span>,
) -> bool {
    let Some((e, row_seq)) = pending else {
        return true;
    };
    while buf.len() < FILL_TARGET {
        let (start, member) = (buf.len(), e.next_member() as u32);
        if !e.write_next(buf) {
            *pending = None;
            return true;
        }
        spans.push(Span {
            row_seq: Some(*row_seq),
            member,
            start,
            end: buf.len() - 1,
        });
    }
    false
}

/// The rows of session ?1 from seq ?2 on, in seq order, as [`raw_row`] reads them; `and`
/// narrows the range (`" AND seq <= ?3"`).
fn select_events_from<'c>(
    conn: &'c Connection,
    and: &str,
) -> rusqlite::Result<rusqlite::Statement<'c>> {
    conn.prepare(&format!(
        "SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ?1 AND seq >= ?2{and} ORDER BY seq"
    ))
}

/// `raw` decoded into `line` (cleared first) for a scan that reads rows by themselves: whether
/// it decoded, or the limit it hit.
fn decode_line(
    scratch: &mut decode::Scratch,
    raw: &decode::RawRow<'_>,
    mode: decode::Mode,
    line: &mut Vec<u8>,
) -> Result<bool, LimitHit> {
    line.clear();
    let decoded = decode::decode_row(raw, mode, scratch, line);
    match scratch.limit.take() {
        Some(hit) => Err(hit),
        None => Ok(decoded.is_ok()),
    }
}

fn raw_row<'r>(r: &'r rusqlite::Row<'_>) -> rusqlite::Result<decode::RawRow<'r>> {
    Ok(decode::RawRow {
        seq: r.get(0)?,
        ty: r.get_ref(1)?,
        time: r.get_ref(2)?,
        data: r.get_ref(3)?,
        sources: r.get_ref(4)?,
        surface_op: r.get_ref(5)?,
        ignorable: r.get_ref(6)?,
    })
}

fn value_text(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => "NULL".into(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => format!("REAL {f}"),
        ValueRef::Text(_) => "TEXT".into(),
        ValueRef::Blob(_) => "BLOB".into(),
    }
}

/// Whether a logical line's `data` has `inherited: true` at its top level.
fn inherited(line: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(line.strip_suffix(b"\n").unwrap_or(line)) else {
        return false;
    };
    let Ok(v) = js::Value::parse(text, 64) else {
        return false;
    };
    matches!(
        v.get("data").and_then(|d| d.get("inherited")),
        Some(js::Value::Bool(true))
    )
}

impl<C: Borrow<Connection>> Read for SessionReader<C> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        crate::log::input::read_through_buffer(self, out)
    }
}

impl<C: Borrow<Connection>> BufRead for SessionReader<C> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos >= self.buf.len() {
            self.refill().map_err(|e| match e {
                // What a line reader says of a line past a guard, said of a row.
                StoreError::Limit { hit, .. } => hit.into_io(),
                e => io::Error::other(e),
            })?;
        }
        Ok(&self.buf[self.pos..])
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.buf.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_escape_what_sqlite_would_read_as_syntax() {
        assert_eq!(
            uri(Path::new("/a b/x#1?.db"), "mode=ro"),
            "file:/a%20b/x%231%3F.db?mode=ro"
        );
    }
}
