//! Changing a session in a store the way SQLITE.md S8.2 prescribes: in place, one
//! transaction, the live-owner probe, the stale checks under the write lock, the rows to be
//! deleted saved to a sidecar first, new events as scalar rows in the schema's encodings,
//! one revision bump. What to cut and append is decided by the planners above the storage
//! layer (the closers of `repair`, the bracket of `compact`) from a read's [`Snapshot`].

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::types::{Value, ValueRef};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::identity::{self, Identity};
use super::session::SessionRow;
use super::{Class, Schema, SessionReader, Snapshot, StoreError, js};

/// `data` texts from this many bytes on are stored zstd-compressed when that is smaller
/// (upstream's `ZSTD_DATA_THRESHOLD_BYTES`, level 3; S4.1).
pub const ZSTD_THRESHOLD: usize = 4096;
pub const ZSTD_LEVEL: i32 = 3;

/// The busy timeout of the write transaction (DSH's default).
const BUSY_TIMEOUT: Duration = Duration::from_millis(5000);

/// What to change in one session.
#[derive(Debug, Clone)]
pub struct Plan {
    /// What the read the plan was made from saw; the writer insists on finding it again.
    pub snapshot: Snapshot,
    /// Delete the torn tail the snapshot found (`DELETE … WHERE seq >= torn seq`).
    pub cut: bool,
    /// Logical events to insert after the committed ones, one JSON object per line.
    pub append: Vec<String>,
}

impl Plan {
    /// Nothing to cut, nothing to append: the database is not even opened for writing.
    pub fn is_noop(&self) -> bool {
        !(self.cut && self.snapshot.torn.is_some()) && self.append.is_empty()
    }
}

/// Named points of [`apply`], for crash tests ([`Fault`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// The plan is made; the database is not open for writing yet.
    Planned,
    /// The write transaction is open and the stale checks passed.
    Checked,
    /// The sidecar is durable.
    SidecarSynced,
    /// The torn tail is deleted (uncommitted).
    Deleted,
    /// Every new row is inserted (uncommitted).
    Inserted,
    /// The revision is bumped; `COMMIT` comes next.
    Bumped,
    /// Committed.
    Committed,
}

impl Point {
    pub const ALL: [Point; 7] = [
        Point::Planned,
        Point::Checked,
        Point::SidecarSynced,
        Point::Deleted,
        Point::Inserted,
        Point::Bumped,
        Point::Committed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Point::Planned => "planned",
            Point::Checked => "checked",
            Point::SidecarSynced => "sidecar-synced",
            Point::Deleted => "deleted",
            Point::Inserted => "inserted",
            Point::Bumped => "bumped",
            Point::Committed => "committed",
        }
    }

    pub fn parse(s: &str) -> Option<Point> {
        Point::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// A failure injected on purpose (tests only; commands pass [`Fault::None`] in release
/// builds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Fault {
    #[default]
    None,
    /// Die here like a crash (`abort`: no destructor, no rollback).
    Kill(Point),
    /// Stop here until a line arrives on standard input (said on standard error first).
    Pause(Point),
}

impl Fault {
    fn at(self, point: Point) {
        if let Fault::Kill(p) | Fault::Pause(p) = self
            && p == point
        {
            crate::log::write::stop(matches!(self, Fault::Kill(_)), point.name());
        }
    }

    /// `kill:POINT` or `pause:POINT` (see [`Point::name`]).
    pub fn parse(s: &str) -> Option<Fault> {
        if let Some(p) = s.strip_prefix("kill:") {
            Point::parse(p).map(Fault::Kill)
        } else {
            s.strip_prefix("pause:")
                .and_then(Point::parse)
                .map(Fault::Pause)
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Write a schema-15 store (S11.8: refused unless asked; no running DSH reads it).
    pub allow_old_schema: bool,
    pub fault: Fault,
}

/// What [`apply`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Written {
    /// Physical rows deleted (all saved in `sidecar`).
    pub cut_rows: u64,
    pub sidecar: Option<PathBuf>,
    /// Rows inserted.
    pub inserted: u64,
    /// The session's revision after the write (`None`: nothing was written).
    pub revision: Option<i64>,
    /// Said to the user: the live-owner probe was not possible (rollback-journal mode).
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Another connection is attached (S8.2 step 2): a running DSH, or any reader.
    #[error(
        "another process has the session database {path} open (a running DSH keeps its connection while it lives); stop it and try again — nothing was written"
    )]
    LiveOwner { path: String },
    /// The stale checks failed (S8.2 step 3).
    #[error(
        "session {id:?} in {path} changed while dshs worked on it ({what}); nothing was written"
    )]
    Changed {
        path: String,
        id: String,
        what: String,
    },
    /// The store holds triggers: SQL of its own that SQLite would run inside dshs's write
    /// (it cannot turn them off for one connection).
    #[error(
        "{path} holds {}: SQL of the store's own that SQLite would run inside dshs's write transaction (it cannot turn triggers off for one connection), so dshs does not write to it — nothing was written; look at them with `sqlite3 {path} .schema`, and drop them if they do not belong there",
        describe_triggers(triggers)
    )]
    Triggers {
        path: String,
        /// (trigger, table or view) pairs.
        triggers: Vec<(String, String)>,
    },
    /// Another table's foreign key onto `events` or `sessions` acts on a change (S8.2: no
    /// change of the store's own inside dshs's write).
    #[error(
        "{path} has foreign keys that SQLite would act on inside dshs's write transaction ({}), so dshs does not write to it — nothing was written",
        keys.join("; ")
    )]
    ForeignKeyActions { path: String, keys: Vec<String> },
    #[error(
        "{path} is a schema-15 store, which no running DSH reads any more; dshs writes it only when asked to explicitly — nothing was written"
    )]
    OldSchema { path: String },
    /// The identity checks fail now.
    #[error("{0}; nothing was written")]
    Refused(StoreError),
    /// An event to insert is not a logical event line (a bug of the caller).
    #[error("event {index} to insert is not a valid event line ({why}); nothing was written")]
    BadEvent { index: usize, why: String },
    #[error(
        "cannot save the rows to delete to a sidecar beside {path}: {source}; nothing was written"
    )]
    Sidecar {
        path: String,
        #[source]
        source: io::Error,
    },
    /// New events after a torn tail that stays: DSH refuses such an append ("invalid
    /// physical tail") until the tail is repaired.
    #[error(
        "session {id:?} in {path} has a torn tail from seq {seq}; appending after it would not be read back — run `dshs repair` first; nothing was written"
    )]
    TornTail { path: String, id: String, seq: i64 },
    /// The write failed after its sidecar was saved, and the sidecar could not be removed.
    #[error(
        "{cause} (the rows saved to {sidecar} before the failure are all still in the store; that sidecar could not be removed: {why})"
    )]
    SidecarLeft {
        cause: Box<WriteError>,
        sidecar: String,
        why: io::Error,
    },
    #[error("{path} already exists; dshs never overwrites a file, choose another output path")]
    OutputExists { path: String },
    /// The output file cannot be created (a missing directory, no permission).
    #[error("cannot create {path}: {source}; nothing was written")]
    Output {
        path: String,
        #[source]
        source: io::Error,
    },
    /// The copy could not be made or does not check out; it was removed.
    #[error("cannot make the copy {path}: {message}; it was removed")]
    Copy { path: String, message: String },
    #[error("cannot write {path}: {message}; nothing was written")]
    Sqlite { path: String, message: String },
}

impl WriteError {
    /// A refusal (exit 3): someone else has the database, it changed, or it is old.
    pub fn is_refusal(&self) -> bool {
        self.class() == Class::Unsupported
    }

    pub fn class(&self) -> Class {
        match self {
            WriteError::LiveOwner { .. }
            | WriteError::Changed { .. }
            | WriteError::OldSchema { .. }
            | WriteError::Triggers { .. }
            | WriteError::ForeignKeyActions { .. } => Class::Unsupported,
            WriteError::Refused(e) => e.class(),
            WriteError::SidecarLeft { cause, .. } => cause.class(),
            WriteError::TornTail { .. } => Class::Invalid,
            WriteError::BadEvent { .. }
            | WriteError::Sidecar { .. }
            | WriteError::OutputExists { .. }
            | WriteError::Output { .. }
            | WriteError::Copy { .. }
            | WriteError::Sqlite { .. } => Class::Failure,
        }
    }
}

/// Apply `plan` to the store at `path` (S8.2). Nothing happens, not even an open, for a
/// plan with nothing to do.
pub fn apply(path: &Path, plan: &Plan, opts: Options) -> Result<Written, WriteError> {
    if plan.is_noop() {
        return Ok(Written::default());
    }
    let mut saved = None;
    apply_saving(path, plan, opts, &mut saved).map_err(|e| {
        // The transaction did not commit, so the rows are still in the store and the sidecar
        // holds nothing that is not there: it goes, or the message says where it stays.
        match saved {
            Some(side) => match std::fs::remove_file(&side) {
                Ok(()) => e,
                Err(why) => WriteError::SidecarLeft {
                    cause: Box::new(e),
                    sidecar: side.display().to_string(),
                    why,
                },
            },
            None => e,
        }
    })
}

/// [`apply`], telling `saved` where the sidecar is once it exists.
fn apply_saving(
    path: &Path,
    plan: &Plan,
    opts: Options,
    saved: &mut Option<PathBuf>,
) -> Result<Written, WriteError> {
    let shown = path.display().to_string();
    // A busy or locked database at any step is another connection holding it (the probe of
    // S8.2 step 2 is only the first place that can meet it): a refusal, never an I/O failure.
    let sql = |e: rusqlite::Error| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            WriteError::LiveOwner {
                path: shown.clone(),
            }
        }
        _ => WriteError::Sqlite {
            path: shown.clone(),
            message: sqlite_message(path, &e),
        },
    };
    if let Some(torn) = plan.snapshot.torn
        && !plan.cut
        && !plan.append.is_empty()
    {
        return Err(WriteError::TornTail {
            path: shown,
            id: plan.snapshot.id.clone(),
            seq: torn.seq,
        });
    }
    let rows = encode_events(plan)?;
    opts.fault.at(Point::Planned);

    // Step 1: in place, the file's own journal mode, DSH's pragmas.
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql)?;
    conn.busy_timeout(Duration::ZERO).map_err(sql)?;
    conn.pragma_update(None, "trusted_schema", "OFF")
        .map_err(sql)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(sql)?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(sql)?;
    let journal: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .map_err(sql)?;
    let mut written = Written::default();
    // Step 2: the live-owner probe.
    let behavior = if journal.eq_ignore_ascii_case("wal") {
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")
            .map_err(sql)?;
        TransactionBehavior::Exclusive
    } else {
        written.warnings.push(format!(
            "{shown} is in {journal} journal mode, where an idle DSH connection holds no lock: dshs cannot tell whether a DSH process has it open, and relies on the revision and tail checks"
        ));
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
        TransactionBehavior::Immediate
    };
    let tx = match conn.transaction_with_behavior(behavior) {
        Ok(tx) => tx,
        Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => {
            return Err(WriteError::LiveOwner { path: shown });
        }
        Err(e) => return Err(sql(e)),
    };
    tx.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;

    // Step 3: identity, session row, tail — all as the plan saw them.
    // Every check below refuses the same way: the store is not as the plan saw it.
    let since_planned = |what: String| changed(&shown, plan, what);
    let schema = match identity::check(&tx, &shown).map_err(WriteError::Refused)? {
        Identity::Store { schema, .. } => schema,
        Identity::Empty => {
            return Err(since_planned("the database is empty now".into()));
        }
    };
    if schema != plan.snapshot.schema {
        return Err(since_planned(format!(
            "its schema version is {} now",
            schema.user_version()
        )));
    }
    if schema == Schema::V15 && !opts.allow_old_schema {
        return Err(WriteError::OldSchema { path: shown });
    }
    // Under the lock, so a trigger made after the plan is seen too (schema 17's exact object
    // check refuses one already; schema 15 tolerates extra objects).
    let triggers = triggers(&tx).map_err(sql)?;
    if !triggers.is_empty() {
        return Err(WriteError::Triggers {
            path: shown,
            triggers,
        });
    }
    let keys = acting_foreign_keys(&tx).map_err(sql)?;
    if !keys.is_empty() {
        return Err(WriteError::ForeignKeyActions { path: shown, keys });
    }
    let id = &plan.snapshot.id;
    let Some(row) = SessionRow::read(&tx, id).map_err(sql)? else {
        return Err(since_planned("its sessions row is gone".into()));
    };
    if row.incarnation != plan.snapshot.incarnation || row.revision != plan.snapshot.revision {
        return Err(since_planned(format!(
            "it is at {} now, planned on {}",
            row_state(row.incarnation.as_deref(), row.revision),
            row_state(plan.snapshot.incarnation.as_deref(), plan.snapshot.revision)
        )));
    }
    let now = rescan(&tx, &shown, id, schema).map_err(|e| match e {
        StoreError::Sqlite { path, message, .. } => WriteError::Sqlite { path, message },
        other => WriteError::Refused(other),
    })?;
    if now.torn != plan.snapshot.torn || now.last_seq != plan.snapshot.last_seq {
        return Err(since_planned(format!(
            "it has {} now, planned on {}",
            tail_state(now.torn, now.last_seq),
            tail_state(plan.snapshot.torn, plan.snapshot.last_seq)
        )));
    }
    opts.fault.at(Point::Checked);

    // Step 4: the rows to delete, saved first.
    if plan.cut
        && let Some(torn) = plan.snapshot.torn
    {
        let (side, n) =
            save_cut(&tx, path, id, torn.seq).map_err(|source| WriteError::Sidecar {
                path: shown.clone(),
                source,
            })?;
        *saved = Some(side.clone());
        opts.fault.at(Point::SidecarSynced);
        let deleted = tx
            .execute(
                "DELETE FROM events WHERE session_id = ?1 AND seq >= ?2",
                rusqlite::params![id, torn.seq],
            )
            .map_err(sql)?;
        if deleted as u64 != n {
            return Err(since_planned(format!(
                "{deleted} rows to delete, {n} saved"
            )));
        }
        opts.fault.at(Point::Deleted);
        written.cut_rows = n;
        written.sidecar = Some(side);
    }

    // Step 5: scalar rows in the schema's encodings.
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .map_err(sql)?;
        for r in &rows {
            let (data, sources) = match schema {
                Schema::V17 => (
                    r.data17(),
                    r.sources.as_ref().map(|s| {
                        let mut b = Vec::new();
                        super::encode_sources(s, &mut b);
                        Value::Blob(b)
                    }),
                ),
                Schema::V15 => (
                    Value::Text(r.data.clone()),
                    r.sources.as_ref().map(|s| {
                        Value::Text(format!(
                            "[{}]",
                            s.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
                        ))
                    }),
                ),
            };
            insert
                .execute(rusqlite::params![
                    id,
                    r.seq as i64,
                    r.ty,
                    r.time,
                    data,
                    sources,
                    r.surface_op,
                    r.ignorable.then_some(1i64),
                ])
                .map_err(sql)?;
            written.inserted += 1;
        }
    }
    opts.fault.at(Point::Inserted);

    // Step 6: one revision bump, commit.
    tx.execute(
        "UPDATE sessions SET revision = revision + 1 WHERE id = ?1",
        [id],
    )
    .map_err(sql)?;
    let revision: i64 = tx
        .query_row("SELECT revision FROM sessions WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .map_err(sql)?;
    opts.fault.at(Point::Bumped);
    if tx.is_autocommit() {
        // SQLite ends a transaction on its own after some failures (a full disk, an I/O
        // error); a COMMIT would only say that none is active.
        return Err(WriteError::Sqlite {
            path: shown,
            message: "SQLite rolled the transaction back on its own after a failed write (a full disk or an I/O error)".into(),
        });
    }
    tx.commit().map_err(sql)?;
    *saved = None;
    opts.fault.at(Point::Committed);
    written.revision = Some(revision);
    // Closing the connection leaves exclusive mode.
    drop(conn);
    Ok(written)
}

/// Every trigger of the database (an `INSTEAD OF` trigger of a view included), as
/// (trigger, table) pairs.
fn triggers(conn: &Connection) -> rusqlite::Result<Vec<(String, String)>> {
    let mut stmt = conn.prepare(
        "SELECT name, tbl_name FROM sqlite_schema WHERE type = 'trigger' ORDER BY tbl_name, name",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// Foreign keys of the store's other tables onto `events` or `sessions` with an action
/// (`CASCADE`, `SET NULL`, `SET DEFAULT`): changes of the store's own that a change of
/// dshs's would set off in the same transaction. (`RESTRICT` and `NO ACTION` only make the
/// write fail, and it rolls back.) As `table → parent ON DELETE action` texts.
fn acting_foreign_keys(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT m.name, f.\"table\", f.on_delete, f.on_update \
         FROM sqlite_schema AS m JOIN pragma_foreign_key_list(m.name) AS f \
         WHERE m.type = 'table' AND m.name NOT IN ('events', 'sessions', 'persistence_state') \
         AND f.\"table\" IN ('events', 'sessions') \
         AND (f.on_delete NOT IN ('NO ACTION', 'RESTRICT') OR f.on_update NOT IN ('NO ACTION', 'RESTRICT')) \
         ORDER BY m.name",
    )?;
    let rows = stmt.query_map([], |r| {
        let (table, parent, del, upd): (String, String, String, String) =
            (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
        Ok(format!(
            "{} → {} ON DELETE {del} ON UPDATE {upd}",
            quoted(&table),
            quoted(&parent)
        ))
    })?;
    rows.collect()
}

/// `trigger "t" on "events"`, `2 triggers: "a" on "events", "b" on "sessions"`.
fn describe_triggers(triggers: &[(String, String)]) -> String {
    let list: Vec<String> = triggers
        .iter()
        .map(|(name, table)| format!("{} on {}", quoted(name), quoted(table)))
        .collect();
    match list.as_slice() {
        [one] => format!("trigger {one}"),
        _ => format!("{} triggers: {}", list.len(), list.join(", ")),
    }
}

/// A name as SQL writes an identifier: in double quotes, inner quotes doubled.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `incarnation 0f…, revision 3` (a NULL column said as such).
fn row_state(incarnation: Option<&str>, revision: Option<i64>) -> String {
    format!(
        "incarnation {}, revision {}",
        incarnation.unwrap_or("NULL"),
        revision.map_or_else(|| "NULL".to_owned(), |r| r.to_string())
    )
}

/// `a torn tail of 2 rows from seq 45 and last seq 44`, `no torn tail and no event`.
fn tail_state(torn: Option<super::TornRows>, last_seq: Option<u64>) -> String {
    let torn = match torn {
        Some(t) => format!(
            "a torn tail of {} row{} from seq {}",
            t.rows,
            if t.rows == 1 { "" } else { "s" },
            t.seq
        ),
        None => "no torn tail".to_owned(),
    };
    match last_seq {
        Some(s) => format!("{torn} and last seq {s}"),
        None => format!("{torn} and no event"),
    }
}

/// SQLite's message, or what it means where SQLite's own words hide it: a side file it cannot
/// create says only "unable to open database file" (the database itself is open by then).
fn sqlite_message(db: &Path, e: &rusqlite::Error) -> String {
    use rusqlite::ffi;
    let code = super::extended_code(e);
    // Plain "readonly" while the file itself can be written: SQLite fell back to a read-only
    // -shm it could not create or write.
    let side_file_readonly =
        code == Some(ffi::SQLITE_READONLY) && OpenOptions::new().write(true).open(db).is_ok();
    if side_file_readonly {
        return side_files_message(db, e);
    }
    match code {
        Some(
            ffi::SQLITE_CANTOPEN
            | ffi::SQLITE_IOERR_SHMOPEN
            | ffi::SQLITE_IOERR_SHMSIZE
            | ffi::SQLITE_IOERR_SHMMAP
            | ffi::SQLITE_READONLY_CANTINIT
            | ffi::SQLITE_READONLY_CANTLOCK
            | ffi::SQLITE_READONLY_RECOVERY
            | ffi::SQLITE_READONLY_DIRECTORY,
        ) => side_files_message(db, e),
        Some(ffi::SQLITE_FULL) => format!("the disk is full ({e})"),
        _ => e.to_string(),
    }
}

fn side_files_message(db: &Path, e: &rusqlite::Error) -> String {
    format!(
        "SQLite cannot create, open or write its side files beside the database ({}, {} or {}; SQLite says: {e}); check that the directory is writable and has free space",
        super::sibling(db, "-wal").display(),
        super::sibling(db, "-shm").display(),
        super::sibling(db, "-journal").display()
    )
}

fn changed(path: &str, plan: &Plan, what: String) -> WriteError {
    WriteError::Changed {
        path: path.to_owned(),
        id: plan.snapshot.id.clone(),
        what,
    }
}

/// The storage pass again, inside the write transaction.
fn rescan(
    conn: &Connection,
    shown: &str,
    id: &str,
    schema: Schema,
) -> Result<Snapshot, StoreError> {
    let max = crate::log::input::zstd::max_line_bytes();
    let Some(mut r) = SessionReader::begin(conn, shown, id, schema, max, false)? else {
        return Err(StoreError::NoSession {
            path: shown.to_owned(),
            id: id.to_owned(),
            ids: Vec::new(),
        });
    };
    while r.next_line()?.is_some() {}
    let end = r.finish()?;
    if end.refused {
        let why = end
            .findings
            .iter()
            .find(|f| f.is_error())
            .map_or_else(String::new, |f| f.message.clone());
        return Err(StoreError::Sqlite {
            path: shown.to_owned(),
            message: format!("the session is refused by the storage layer now: {why}"),
            corrupt: true,
        });
    }
    Ok(end.snapshot)
}

/// A new event as it is inserted.
struct NewRow {
    seq: u64,
    ty: String,
    time: i64,
    /// `JSON.stringify` of `data`.
    data: String,
    sources: Option<Vec<u64>>,
    surface_op: Option<String>,
    ignorable: bool,
}

impl NewRow {
    /// Schema 17's `data`: TEXT, or a zstd frame when the text is long and the frame shorter.
    fn data17(&self) -> Value {
        if self.data.len() >= ZSTD_THRESHOLD
            && let Ok(frame) = zstd::bulk::compress(self.data.as_bytes(), ZSTD_LEVEL)
            && frame.len() < self.data.len()
        {
            return Value::Blob(frame);
        }
        Value::Text(self.data.clone())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope<'a> {
    #[serde(rename = "type")]
    ty: String,
    seq: u64,
    time: i64,
    #[serde(borrow)]
    data: &'a RawValue,
    #[serde(rename = "sourceEventSeqs", default)]
    sources: Option<Vec<serde_json::Value>>,
    #[serde(rename = "surfaceOp", default, borrow)]
    surface_op: Option<&'a RawValue>,
    #[serde(default)]
    ignorable: Option<bool>,
}

/// Parse the lines to insert; they must continue the committed seqs without a gap.
fn encode_events(plan: &Plan) -> Result<Vec<NewRow>, WriteError> {
    let first = plan.snapshot.last_seq.map_or(0, |s| s + 1);
    let mut rows = Vec::with_capacity(plan.append.len());
    for (next, (index, line)) in (first..).zip(plan.append.iter().enumerate()) {
        let bad = |why: String| WriteError::BadEvent { index, why };
        let e: Envelope<'_> = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        if e.seq != next {
            return Err(bad(format!("seq {} where {next} comes next", e.seq)));
        }
        let canon = |raw: &RawValue| -> Result<String, WriteError> {
            let mut out = Vec::new();
            js::write_value(raw.get(), &mut out).map_err(|w| bad(w.clone()))?;
            String::from_utf8(out).map_err(|w| bad(w.to_string()))
        };
        let sources = match &e.sources {
            None => None,
            Some(list) => {
                let mut seqs = Vec::with_capacity(list.len());
                for v in list {
                    match v {
                        serde_json::Value::Number(n) if n.as_u64().is_some() => {
                            seqs.push(n.as_u64().unwrap_or_default());
                        }
                        // The JSONL range form never reaches SQLite: stored expanded.
                        serde_json::Value::Array(pair) if pair.len() == 2 => {
                            let (Some(a), Some(b)) = (pair[0].as_u64(), pair[1].as_u64()) else {
                                return Err(bad("a sourceEventSeqs pair is not two seqs".into()));
                            };
                            if a > b || b - a > 1 << 20 {
                                return Err(bad(
                                    "a sourceEventSeqs pair is not a short ascending range".into(),
                                ));
                            }
                            seqs.extend(a..=b);
                        }
                        _ => {
                            return Err(bad(
                                "sourceEventSeqs holds something other than seqs".into()
                            ));
                        }
                    }
                }
                Some(seqs)
            }
        };
        if e.ignorable == Some(false) {
            return Err(bad("ignorable must be true when present".into()));
        }
        rows.push(NewRow {
            seq: e.seq,
            data: canon(e.data)?,
            surface_op: e.surface_op.map(&canon).transpose()?,
            ty: e.ty,
            time: e.time,
            sources,
            ignorable: e.ignorable == Some(true),
        });
    }
    Ok(rows)
}

/// Save the rows from `seq` on to a new `<db>.dshs-cut-<N>` (one JSON object per row, every
/// column, BLOBs as `{"hex": …}`), synced with its directory. The row count saved.
fn save_cut(conn: &Connection, db: &Path, id: &str, seq: i64) -> io::Result<(PathBuf, u64)> {
    let (path, mut file) = crate::log::write::create_sidecar(db)?;
    let result = (|| -> io::Result<u64> {
        let mut stmt = conn
            .prepare(
                "SELECT session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable \
                 FROM events WHERE session_id = ?1 AND seq >= ?2 ORDER BY seq",
            )
            .map_err(io::Error::other)?;
        let mut rows = stmt
            .query(rusqlite::params![id, seq])
            .map_err(io::Error::other)?;
        let names = [
            "session_id",
            "seq",
            "type",
            "time",
            "data",
            "source_event_seqs",
            "surface_op",
            "ignorable",
        ];
        let mut out = io::BufWriter::new(&mut file);
        let mut n = 0;
        while let Some(r) = rows.next().map_err(io::Error::other)? {
            let mut obj = serde_json::Map::new();
            for (i, name) in names.iter().enumerate() {
                let v = r.get_ref(i).map_err(io::Error::other)?;
                obj.insert((*name).to_owned(), column_json(v));
            }
            serde_json::to_writer(&mut out, &obj)?;
            out.write_all(b"\n")?;
            n += 1;
        }
        out.flush()?;
        drop(out);
        file.sync_all()?;
        crate::log::write::sync_dir(&path)?;
        Ok(n)
    })();
    match result {
        Ok(n) => Ok((path, n)),
        Err(e) => {
            // Nothing was deleted: the partial copy means nothing.
            let _ = std::fs::remove_file(&path);
            Err(e)
        }
    }
}

/// A column value in a sidecar: TEXT as a string (as `{"hex"}` when not UTF-8), BLOB as
/// `{"hex": …}`, numbers and NULL as themselves.
fn column_json(v: ValueRef<'_>) -> serde_json::Value {
    let hex = |b: &[u8]| {
        let mut s = String::with_capacity(b.len() * 2);
        for x in b {
            s.push_str(&format!("{x:02x}"));
        }
        serde_json::json!({ "hex": s })
    };
    match v {
        ValueRef::Null => serde_json::Value::Null,
        ValueRef::Integer(i) => i.into(),
        ValueRef::Real(f) => {
            serde_json::Number::from_f64(f).map_or(serde_json::Value::Null, Into::into)
        }
        ValueRef::Text(t) => match std::str::from_utf8(t) {
            Ok(s) => s.into(),
            Err(_) => hex(t),
        },
        ValueRef::Blob(b) => hex(b),
    }
}

/// Copy the store at `src` to a new file `dest` with SQLite's backup API (`--output`): the
/// pages of the one committed state the read transaction of [`super::Store::open`] sees,
/// checked with `PRAGMA integrity_check` before it counts as made. `dest` must not exist;
/// on any failure it is removed again.
pub fn backup_copy(src: &Path, dest: &Path) -> Result<(), WriteError> {
    let shown = dest.display().to_string();
    match OpenOptions::new().write(true).create_new(true).open(dest) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(WriteError::OutputExists { path: shown });
        }
        Err(source) => {
            return Err(WriteError::Output {
                path: shown,
                source,
            });
        }
    }
    let remove = |e: WriteError| {
        let _ = std::fs::remove_file(dest);
        remove_side_files(dest);
        e
    };
    let store = super::Store::open(src).map_err(|e| remove(WriteError::Refused(e)))?;
    let result = (|| -> rusqlite::Result<()> {
        let Some(from) = &store.conn else {
            return Ok(());
        };
        let mut to = Connection::open_with_flags(
            dest,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        let backup = rusqlite::backup::Backup::new(from, &mut to)?;
        // One step copies every page within the source's read transaction: one snapshot.
        backup.run_to_completion(i32::MAX, Duration::ZERO, None)?;
        Ok(())
    })();
    drop(store);
    result.map_err(|e| {
        remove(WriteError::Copy {
            path: shown.clone(),
            message: e.to_string(),
        })
    })?;
    verify_copy(dest).map_err(remove)
}

/// `PRAGMA integrity_check` of a copy dshs wrote: `ok`, or the copy is not to be trusted.
pub fn verify_copy(dest: &Path) -> Result<(), WriteError> {
    let shown = dest.display().to_string();
    let bad = |message: String| WriteError::Copy {
        path: shown.clone(),
        message,
    };
    let conn = Connection::open_with_flags(
        dest,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| bad(e.to_string()))?;
    let mut stmt = conn
        .prepare("PRAGMA integrity_check(20)")
        .map_err(|e| bad(e.to_string()))?;
    let lines: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .and_then(|rows| rows.collect())
        .map_err(|e| bad(e.to_string()))?;
    if lines != ["ok"] {
        return Err(bad(format!(
            "the copy fails SQLite's integrity check: {}",
            lines.join("; ")
        )));
    }
    Ok(())
}

/// The `-wal`/`-shm`/`-journal` a removed copy may have left.
fn remove_side_files(db: &Path) {
    for suffix in ["-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(super::sibling(db, suffix));
    }
}
