//! DSH's SQLite session store, read side (SQLITE.md S1–S7): the fixture databases written
//! by upstream's own store code read back as exactly the logical logs upstream's read path
//! returned, and every storage rule dshs enforces, each on a small database built here.

mod common;

#[path = "../benches/store/mod.rs"]
mod store;

use std::path::{Path, PathBuf};

use dshs::log::Finding;
use dshs::log::codes::Code;
use dshs::log::scan::{ScanOptions, scan};
use dshs::log::sqlite::{Class, ReadEnd, Store, StoreError, split_session_path};
use rusqlite::{Connection, params};

fn fixtures() -> PathBuf {
    common::testdata("sqlite")
}

/// Every `.db` of the fixture set, relative to `db/`.
fn databases() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let db = fixtures().join("db");
    for dir in [db.clone(), db.join("per-fixture")] {
        for e in std::fs::read_dir(&dir).expect("fixture dir") {
            let p = e.expect("entry").path();
            if p.extension().is_some_and(|x| x == "db") {
                out.push(p.strip_prefix(&db).expect("under db").to_owned());
            }
        }
    }
    out.sort();
    out
}

/// A fixture database copied into a temporary directory (the originals stay untouched).
fn copy_of(rel: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let to = dir.path().join(Path::new(rel).file_name().expect("name"));
    std::fs::copy(fixtures().join("db").join(rel), &to).expect("copy");
    (dir, to)
}

/// The rebuilt logical log of one session: the `BufRead` stream, whole.
fn logical(store: &mut Store, id: &str) -> (Vec<u8>, ReadEnd) {
    let mut r = store.read(id).expect("read");
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut r, &mut out).expect("stream");
    (out, r.finish().expect("finish"))
}

fn read_one(path: &Path, id: &str) -> (String, ReadEnd) {
    let mut store = Store::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (bytes, end) = logical(&mut store, id);
    (String::from_utf8(bytes).expect("UTF-8 lines"), end)
}

/// What `dshs::log::scan::scan` says about a log, in the terms a summary shows.
fn summary(log: &[u8]) -> (String, u64, usize, bool, Vec<&'static str>) {
    let mut findings: Vec<Finding> = Vec::new();
    let s = scan(log, None, &ScanOptions::default(), &mut findings, &mut ()).expect("in memory");
    (
        s.status().as_str().to_owned(),
        s.events(),
        s.surface_nodes(),
        s.open_turn(),
        common::codes(&findings),
    )
}

fn codes(f: &[Finding]) -> Vec<&'static str> {
    common::codes(f)
}

#[test]
fn every_fixture_session_rebuilds_its_expected_logical_log_byte_for_byte() {
    let mut compared = 0;
    let mut packed_rows = 0;
    for rel in databases() {
        let path = fixtures().join("db").join(&rel);
        let name = rel.to_string_lossy().trim_end_matches(".db").to_owned();
        let expected = fixtures().join("expected").join(&name);
        if !expected.join("index.json").exists() {
            // Refused by upstream's read path: see the next test.
            continue;
        }
        let index: serde_json::Value =
            serde_json::from_slice(&std::fs::read(expected.join("index.json")).expect("index"))
                .expect("index JSON");
        let index = index.as_array().expect("a list");
        let mut store = Store::open(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(store.findings().is_empty(), "{name}");
        let listed: Vec<String> = store
            .sessions()
            .expect("sessions")
            .into_iter()
            .map(|s| s.row.id)
            .collect();
        let ids: Vec<&str> = index
            .iter()
            .map(|s| s["id"].as_str().expect("id"))
            .collect();
        assert_eq!(listed, ids, "{name}: the sessions in rowid order");
        for s in index {
            let id = s["id"].as_str().expect("id");
            let want = std::fs::read(expected.join(s["file"].as_str().expect("file")))
                .expect("expected log");
            let (got, end) = logical(&mut store, id);
            if got != want {
                let (g, w) = (
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&want),
                );
                for (i, (a, b)) in g.lines().zip(w.lines()).enumerate() {
                    assert_eq!(a, b, "{name} {id}: line {}", i + 1);
                }
                panic!(
                    "{name} {id}: {} lines, expected {}",
                    g.lines().count(),
                    w.lines().count()
                );
            }
            assert_eq!(
                end.events,
                s["events"].as_u64().expect("events"),
                "{name} {id}"
            );
            assert_eq!(
                end.snapshot.torn.map(|t| t.seq),
                s["tornMarker"].as_i64(),
                "{name} {id}"
            );
            assert!(!end.refused, "{name} {id}");
            // The same answers as the JSONL log, from the one pass above the storage layer.
            assert_eq!(summary(&got), summary(&want), "{name} {id}");
            // The torn tail is the storage layer's finding (a crash-tail warning by seq).
            let torn: Vec<_> = end
                .findings
                .iter()
                .filter(|f| f.code == Code::CrashTail)
                .collect();
            assert_eq!(
                torn.len(),
                usize::from(end.snapshot.torn.is_some()),
                "{name} {id}"
            );
            assert!(
                end.findings.iter().all(|f| !f.is_error()),
                "{name} {id}: {:?}",
                end.findings
            );
            // Packed rows handed on packed (format 0/1): the same answers again.
            let mut r = store.read(id).expect("read");
            let v01 = r.session_row().version.is_some_and(|v| v <= 1);
            assert_eq!(r.keep_packed_rows(), v01, "{name} {id}");
            let mut kept = Vec::new();
            std::io::Read::read_to_end(&mut r, &mut kept).expect("stream");
            let kept_end = r.finish().expect("finish");
            assert_eq!(
                summary(&kept),
                summary(&want),
                "{name} {id}: packed rows kept"
            );
            assert_eq!(kept_end.events, end.events, "{name} {id}");
            packed_rows += u64::from(kept.len() < got.len());
            compared += 1;
        }
    }
    assert!(compared >= 70, "only {compared} sessions compared");
    assert!(
        packed_rows >= 20,
        "only {packed_rows} sessions had packed rows"
    );
}

#[test]
fn the_line_by_line_reader_gives_the_same_lines_with_their_rows() {
    let path = fixtures().join("db/torn-packed-tail.db");
    let mut store = Store::open(&path).expect("open");
    let mut r = store.read("open-mid-tool-call-stream").expect("read");
    let mut text = String::new();
    let mut rows = Vec::new();
    while let Some(l) = r.next_line().expect("line") {
        text.push_str(std::str::from_utf8(l.bytes).expect("UTF-8"));
        text.push('\n');
        rows.push((l.row_seq, l.member));
    }
    r.finish().expect("finish");
    let want =
        std::fs::read_to_string(fixtures().join("expected/torn-packed-tail/0.jsonl")).expect("log");
    assert_eq!(text, want);
    // Header, then rows 0..=9 scalar, then the packed row at seq 10 with its 17 members.
    assert_eq!(rows[0], (None, 0));
    assert_eq!(rows[11], (Some(10), 0));
    assert_eq!(rows[12], (Some(10), 1));
    assert_eq!(rows[27], (Some(10), 16));
    assert_eq!(rows[28], (Some(27), 0));
}

#[test]
fn refused_fixtures_are_refused_with_their_classification_and_reason() {
    let cases: [(&str, Code, Class, &str); 3] = [
        (
            "identity-foreign-application-id.db",
            Code::SqliteNotSessionStore,
            Class::Unsupported,
            "has application id 12345 (0x00003039), expected 1146308688",
        ),
        (
            "identity-user-version-16.db",
            Code::SqliteSchemaUnsupported,
            Class::Unsupported,
            "schema version 16 (never released",
        ),
        (
            "identity-user-version-16.db",
            Code::SqliteSchemaUnsupported,
            Class::Unsupported,
            "dshs reads 17",
        ),
    ];
    for (db, code, class, text) in cases {
        let e = Store::open(&fixtures().join("db").join(db)).expect_err(db);
        assert_eq!(e.code(), Some(code), "{db}: {e}");
        assert_eq!(e.class(), class, "{db}");
        assert!(e.to_string().contains(text), "{db}: {e}");
    }

    // Upstream: "stored data must be a string or blob" — the whole session, before decoding.
    let (text, end) = read_one(
        &fixtures().join("db/storage-class-integer-data.db"),
        &only_id("storage-class-integer-data.db"),
    );
    assert!(text.is_empty(), "a refused session streams nothing");
    assert!(end.refused);
    assert_eq!(codes(&end.findings), ["sqlite-storage-class"]);
    assert!(
        end.findings[0]
            .message
            .contains("stored data must be a string or blob"),
        "{}",
        end.findings[0].message
    );

    // Upstream: "corrupt session log: invalid committed physical row at seq 10".
    let (_, end) = read_one(
        &fixtures().join("db/committed-corrupt-packed.db"),
        &only_id("committed-corrupt-packed.db"),
    );
    assert!(end.refused);
    let f = &end.findings[0];
    assert_eq!((f.code, f.seq), (Code::CommittedMalformedRow, Some(10)));
    assert!(
        f.message
            .contains("invalid committed physical row at seq 10"),
        "{}",
        f.message
    );

    // A current store that holds no session at all is not an empty store.
    let store =
        Store::open(&fixtures().join("db/per-fixture/deepseek-ai--tool-outcome-unknown-replay.db"))
            .expect("open");
    assert!(store.sessions().expect("sessions").is_empty());
    assert!(store.findings().is_empty());
}

fn only_id(db: &str) -> String {
    let store = Store::open(&fixtures().join("db").join(db)).expect("open");
    let s = store.sessions().expect("sessions");
    assert_eq!(s.len(), 1, "{db}");
    s[0].row.id.clone()
}

/// The files of a directory with their bytes.
fn snapshot_dir(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| {
            let p = e.expect("entry").path();
            (
                p.file_name().expect("name").to_string_lossy().into_owned(),
                std::fs::read(&p).expect("read"),
            )
        })
        .collect();
    out.sort();
    out
}

fn read_everything(path: &Path) {
    let mut store = Store::open(path).expect("open");
    for s in store.sessions().expect("sessions") {
        let (_, end) = logical(&mut store, &s.row.id);
        assert!(!end.refused);
    }
}

#[test]
fn a_read_leaves_the_database_byte_identical_and_at_most_sqlites_own_side_files() {
    // No -wal: read with SQLite's locks all the same (a writer may start meanwhile), which
    // makes the -shm and an empty -wal that a read-only connection cannot remove.
    let (dir, path) = copy_of("many-sessions.db");
    let before = std::fs::read(&path).expect("read");
    let store = Store::open(&path).expect("open");
    assert_eq!(store.mode(), dshs::log::sqlite::ReadMode::ReadOnly);
    assert!(store.notes().is_empty(), "{:?}", store.notes());
    drop(store);
    read_everything(&path);
    assert_eq!(std::fs::read(&path).expect("read"), before);
    let files: Vec<String> = snapshot_dir(dir.path()).into_iter().map(|f| f.0).collect();
    assert_eq!(
        files,
        [
            "many-sessions.db",
            "many-sessions.db-shm",
            "many-sessions.db-wal"
        ]
    );
    assert_eq!(
        std::fs::metadata(dir.path().join("many-sessions.db-wal"))
            .expect("wal")
            .len(),
        0
    );

    // Where SQLite cannot make its side files (a read-only file system; here a directory in
    // the -wal's place), the file is read immutable, and a note says so.
    let (dir, path) = copy_of("many-sessions.db");
    std::fs::create_dir(dir.path().join("many-sessions.db-wal")).expect("mkdir");
    let store = Store::open(&path).expect("open");
    assert_eq!(store.mode(), dshs::log::sqlite::ReadMode::Immutable);
    assert!(
        store.notes().iter().any(|n| n.contains("immutable")),
        "{:?}",
        store.notes()
    );
    drop(store);
    read_everything(&path);
    assert_eq!(std::fs::read(&path).expect("read"), before);

    // A -wal (a DSH connection is open): read-only, and what exists stays as it was.
    let (dir, path) = copy_of("open-turn.db");
    let holder = Connection::open(&path).expect("open");
    holder
        .query_row("SELECT count(*) FROM sessions", [], |r| r.get::<_, i64>(0))
        .expect("query");
    assert!(dir.path().join("open-turn.db-wal").exists());
    let before = snapshot_dir(dir.path());
    let store = Store::open(&path).expect("open");
    assert_eq!(store.mode(), dshs::log::sqlite::ReadMode::ReadOnly);
    drop(store);
    read_everything(&path);
    assert_eq!(snapshot_dir(dir.path()), before);
    drop(holder);

    // A rollback-journal database is read with its locks, which leave no file either.
    let (dir, path) = copy_of("many-sessions.db");
    Connection::open(&path)
        .expect("open")
        .pragma_update(None, "journal_mode", "DELETE")
        .expect("mode");
    let before = snapshot_dir(dir.path());
    assert_eq!(
        Store::open(&path).expect("open").mode(),
        dshs::log::sqlite::ReadMode::ReadOnly
    );
    read_everything(&path);
    assert_eq!(snapshot_dir(dir.path()), before);
}

// ---------------------------------------------------------------------------------------
// Small databases, one rule each
// ---------------------------------------------------------------------------------------

const TURN_START: &str = r#"{"turn":1}"#;
const TURN_END: &str = r#"{"turn":1,"reason":{"kind":"completed"}}"#;

/// A store with one session `s` (a valid row) and no events, schema `version`.
struct Db {
    _dir: tempfile::TempDir,
    path: PathBuf,
    conn: Option<Connection>,
}

fn db(version: i64) -> Db {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.db");
    let conn = store::create(&path, version).expect("create");
    conn.pragma_update(None, "journal_mode", "DELETE")
        .expect("journal mode");
    store::insert_session(
        &conn,
        r#"{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/w","delegationDepth":0}"#,
    )
    .expect("session");
    Db {
        _dir: dir,
        path,
        conn: Some(conn),
    }
}

impl Db {
    fn sql(&self, sql: &str) -> &Self {
        self.conn
            .as_ref()
            .expect("open")
            .execute_batch(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        self
    }

    /// Insert a raw row (any storage class): one argument per column.
    #[allow(clippy::too_many_arguments)]
    fn raw(
        &self,
        seq: i64,
        ty: &str,
        time: i64,
        data: rusqlite::types::Value,
        sources: rusqlite::types::Value,
        op: Option<&str>,
        ignorable: Option<i64>,
    ) -> &Self {
        self.conn
            .as_ref()
            .expect("open")
            .execute(
                "INSERT INTO events VALUES ('s', ?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![seq, ty, time, data, sources, op, ignorable],
            )
            .unwrap_or_else(|e| panic!("row {seq}: {e}"));
        self
    }

    /// A scalar row with TEXT data and nothing else.
    fn ev(&self, seq: i64, ty: &str, data: &str) -> &Self {
        self.raw(
            seq,
            ty,
            seq,
            tv(data),
            rusqlite::types::Value::Null,
            None,
            None,
        )
    }

    fn turn(&self, from: i64) -> &Self {
        self.ev(from, "turn/start", TURN_START)
            .ev(from + 1, "turn/end", TURN_END)
    }

    fn open(&mut self) -> Result<Store, StoreError> {
        self.conn.take();
        Store::open(&self.path)
    }

    fn read(&mut self) -> (String, ReadEnd) {
        self.conn.take();
        read_one(&self.path, "s")
    }
}

fn tv(s: &str) -> rusqlite::types::Value {
    rusqlite::types::Value::Text(s.to_owned())
}

fn blob(b: &[u8]) -> rusqlite::types::Value {
    rusqlite::types::Value::Blob(b.to_vec())
}

const NULL: rusqlite::types::Value = rusqlite::types::Value::Null;

fn event_lines(text: &str) -> Vec<&str> {
    text.lines().skip(1).collect()
}

fn refusal(r: Result<Store, StoreError>) -> (Option<Code>, Class, String) {
    let e = r.expect_err("refused");
    (e.code(), e.class(), e.to_string())
}

#[test]
fn an_empty_database_is_an_empty_store_with_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let zero = dir.path().join("zero.db");
    std::fs::write(&zero, b"").expect("write");
    let pristine = dir.path().join("pristine.db");
    Connection::open(&pristine)
        .expect("open")
        .execute_batch("VACUUM")
        .expect("a page");
    assert!(std::fs::metadata(&pristine).expect("meta").len() > 0);
    for p in [&zero, &pristine] {
        let store = Store::open(p).expect("open");
        assert_eq!(codes(store.findings()), ["sqlite-store-empty"]);
        assert!(store.sessions().expect("sessions").is_empty());
    }
    // Recognition is by magic: the 0-byte file has none, the initialised one does.
    assert!(!dshs::log::sqlite::has_magic(&zero).expect("read"));
    assert!(dshs::log::sqlite::has_magic(&pristine).expect("read"));
    let jsonl = dir.path().join("log.db");
    std::fs::write(&jsonl, b"{\"type\":\"session\"}\n").expect("write");
    assert!(!dshs::log::sqlite::has_magic(&jsonl).expect("read"));
    assert!(matches!(
        Store::open(&jsonl),
        Err(StoreError::NotDatabase { .. })
    ));
}

#[test]
fn a_search_index_or_a_foreign_database_is_not_a_session_store() {
    let mut d = db(17);
    d.sql("PRAGMA application_id = 1146308689");
    let (code, class, msg) = refusal(d.open());
    assert_eq!(
        (code, class),
        (Some(Code::SqliteNotSessionStore), Class::Unsupported)
    );
    assert!(msg.contains("search index"), "{msg}");

    let mut d = db(17);
    d.sql("PRAGMA application_id = 0");
    let (code, _, msg) = refusal(d.open());
    assert_eq!(code, Some(Code::SqliteNotSessionStore));
    assert!(msg.contains("application id 0 "), "{msg}");

    // No version but tables: the generic storage backend, or anything else.
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("kv.db");
    Connection::open(&p)
        .expect("open")
        .execute_batch("CREATE TABLE u_unit_t (k TEXT, v TEXT)")
        .expect("create");
    let (code, class, msg) = refusal(Store::open(&p));
    assert_eq!(
        (code, class),
        (Some(Code::SqliteNotSessionStore), Class::Unsupported)
    );
    assert!(msg.contains("no schema version"), "{msg}");
}

#[test]
fn other_layout_versions_are_unsupported_and_named_from_the_history() {
    for (v, says) in [
        (16, "never released"),
        (19, "cyg720/deepseek-harness"),
        (20, "gmnstr/deepseek-harness"),
        (14, "older one-row-per-event layout"),
        (99, "newer than any layout"),
    ] {
        let mut d = db(17);
        d.sql(&format!("PRAGMA user_version = {v}"));
        let (code, class, msg) = refusal(d.open());
        assert_eq!(
            (code, class),
            (Some(Code::SqliteSchemaUnsupported), Class::Unsupported),
            "{v}"
        );
        assert!(
            msg.contains(says) && msg.contains(&format!("schema version {v}")),
            "{v}: {msg}"
        );
    }
    // Before 10 a store carried no application id: still named as an old DSH layout.
    let mut d = db(17);
    d.sql("PRAGMA user_version = 5; PRAGMA application_id = 0");
    let (code, _, msg) = refusal(d.open());
    assert_eq!(code, Some(Code::SqliteSchemaUnsupported));
    assert!(msg.contains("before the application id"), "{msg}");
}

#[test]
fn schema_17_objects_must_be_exactly_upstreams() {
    let changes = [
        (
            "CREATE INDEX events_type ON events(type)",
            "extra index \"events_type\" on \"events\"",
        ),
        (
            "CREATE TABLE folders (id TEXT) STRICT",
            "extra table folders",
        ),
        (
            "ALTER TABLE sessions ADD COLUMN tenant TEXT",
            "table sessions is",
        ),
        ("CREATE VIEW v AS SELECT 1", "extra view v"),
    ];
    for (sql, says) in changes {
        let mut d = db(17);
        d.sql(sql);
        let (code, class, msg) = refusal(d.open());
        assert_eq!(
            (code, class),
            (Some(Code::SqliteSchemaMismatch), Class::Unsupported),
            "{sql}"
        );
        assert!(msg.contains(says), "{sql}: {msg}");
    }
    // A table that is not STRICT (same columns) fails too.
    let mut d = db(17);
    d.sql(
        "DROP TABLE events; CREATE TABLE events (session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE, \
         seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data ANY NOT NULL, source_event_seqs ANY, \
         surface_op TEXT, ignorable INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)), PRIMARY KEY (session_id, seq))",
    );
    assert_eq!(refusal(d.open()).0, Some(Code::SqliteSchemaMismatch));
    // Whitespace is not a difference.
    let mut d = db(17);
    d.sql(
        "DROP TABLE events; CREATE TABLE events (\n\n  session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,\n  seq INTEGER NOT NULL,\n  type TEXT NOT NULL,\n  time INTEGER NOT NULL,\n  data ANY NOT NULL,\n  source_event_seqs ANY,\n  surface_op TEXT,\n  ignorable INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)),\n  PRIMARY KEY (session_id, seq)\n)   STRICT",
    );
    d.open().expect("only whitespace differs");
}

#[test]
fn schema_15_tolerates_extra_objects_but_not_other_tables() {
    let mut d = db(15);
    d.sql("CREATE INDEX events_type ON events(type); CREATE TABLE notes (x TEXT)");
    d.open().expect("extra objects are tolerated in schema 15");
    let mut d = db(15);
    d.sql("ALTER TABLE events ADD COLUMN tenant TEXT");
    let (code, _, msg) = refusal(d.open());
    assert_eq!(code, Some(Code::SqliteSchemaMismatch));
    assert!(
        msg.contains("schema version 15") && msg.contains("table events is"),
        "{msg}"
    );
}

#[test]
fn the_store_identity_must_be_present_and_in_17_a_uuid() {
    for (sql, says) in [
        ("DELETE FROM persistence_state", "no persistence_state row"),
        (
            "UPDATE persistence_state SET store_id = ''",
            "store_id is empty",
        ),
        (
            "UPDATE persistence_state SET store_id = 'store-1'",
            "is not a UUID",
        ),
    ] {
        let mut d = db(17);
        d.sql(sql);
        let (code, class, msg) = refusal(d.open());
        assert_eq!(
            (code, class),
            (Some(Code::SqliteStoreIdentityInvalid), Class::Invalid),
            "{sql}"
        );
        assert!(msg.contains(says), "{sql}: {msg}");
    }
    // Schema 15 (and the Rust port's 32 hex digits) needs only a non-empty store_id.
    let mut d = db(15);
    d.sql("UPDATE persistence_state SET store_id = '0b6a3e623c1f4d5e9a7b2f1e4c5d6a7b'");
    d.open().expect("schema 15 store id");
    let mut d = db(15);
    d.sql("UPDATE persistence_state SET store_id = ''");
    assert_eq!(refusal(d.open()).0, Some(Code::SqliteStoreIdentityInvalid));
}

#[test]
fn the_sessions_row_becomes_the_header_line_in_to_header_line_order() {
    let mut d = db(17);
    d.sql(
        "UPDATE sessions SET parent_session = 'p\"1', seed_length = 3, origin = 'subagent', \
         delegation_depth = NULL, agent_preset = 'coder', cwd = 'C:\\w'",
    );
    let (text, end) = d.read();
    assert_eq!(
        text,
        "{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1,\"cwd\":\"C:\\\\w\",\"parentSession\":\"p\\\"1\",\"seedLength\":3,\"origin\":\"subagent\",\"delegationDepth\":0,\"agentPreset\":\"coder\"}\n"
    );
    assert!(end.findings.is_empty() && !end.refused);
    assert_eq!(end.events, 0);
}

#[test]
fn an_invalid_sessions_row_refuses_the_session_before_any_event() {
    let cases = [
        ("UPDATE sessions SET created_at = -1", "created_at is -1"),
        (
            "UPDATE sessions SET created_at = 9007199254740992",
            "created_at is 9007199254740992",
        ),
        (
            "UPDATE sessions SET cwd = 'relative/dir'",
            "cwd \"relative/dir\" is not an absolute path",
        ),
        ("UPDATE sessions SET origin = 'fork'", "origin is \"fork\""),
        (
            "UPDATE sessions SET delegation_depth = -2",
            "delegation_depth is -2",
        ),
        ("UPDATE sessions SET seed_length = -1", "seed_length is -1"),
        (
            "UPDATE sessions SET incarnation = 'x'",
            "incarnation \"x\" is not a UUID",
        ),
        ("UPDATE sessions SET revision = -1", "revision is -1"),
        (
            "UPDATE sessions SET version = 9007199254740993",
            "version is 9007199254740993",
        ),
        (
            "PRAGMA foreign_keys = OFF; UPDATE sessions SET id = ''; UPDATE events SET session_id = ''",
            "id is empty",
        ),
    ];
    for (sql, says) in cases {
        let mut d = db(17);
        d.turn(0).sql(sql);
        d.conn.take();
        let id = if says == "id is empty" { "" } else { "s" };
        let (text, end) = read_one(&d.path, id);
        assert!(text.is_empty(), "{sql}");
        assert!(end.refused, "{sql}");
        assert_eq!(
            codes(&end.findings),
            ["sqlite-session-row-invalid"],
            "{sql}"
        );
        assert!(
            end.findings[0].message.contains(says),
            "{sql}: {}",
            end.findings[0].message
        );
    }
    // Schema 15's open code checked created_at only: the rest reaches the header checks.
    let mut d = db(15);
    d.sql("UPDATE sessions SET origin = 'fork', incarnation = 'x'");
    let (text, end) = d.read();
    assert!(!end.refused);
    assert!(text.contains("\"origin\":\"fork\""));
    assert_eq!(summary(text.as_bytes()).4, ["header-field-invalid"]);
    let mut d = db(15);
    d.sql("UPDATE sessions SET created_at = -5");
    assert_eq!(codes(&d.read().1.findings), ["sqlite-session-row-invalid"]);
}

#[test]
fn a_storage_class_violation_anywhere_refuses_the_whole_session() {
    type AddRow = Box<dyn Fn(&Db)>;
    let cases: Vec<(AddRow, &str)> = vec![
        (
            Box::new(|d: &Db| {
                d.raw(
                    2,
                    "x/y",
                    2,
                    rusqlite::types::Value::Integer(7),
                    NULL,
                    None,
                    None,
                );
            }),
            "data is INTEGER",
        ),
        (
            Box::new(|d: &Db| {
                d.raw(
                    2,
                    "x/y",
                    2,
                    rusqlite::types::Value::Real(1.5),
                    NULL,
                    None,
                    None,
                );
            }),
            "data is REAL",
        ),
        (
            Box::new(|d: &Db| {
                d.raw(2, "x/y", 2, tv("{}"), tv("[1]"), None, None);
            }),
            "source_event_seqs is TEXT",
        ),
        (
            Box::new(|d: &Db| {
                d.raw(-1, "x/y", 2, tv("{}"), NULL, None, None);
            }),
            "seq -1 is not a safe integer",
        ),
        (
            Box::new(|d: &Db| {
                d.raw(1 << 53, "x/y", 2, tv("{}"), NULL, None, None);
            }),
            "seq 9007199254740992",
        ),
        (
            Box::new(|d: &Db| {
                d.raw(2, "", 2, tv("{}"), NULL, None, None);
            }),
            "type is empty",
        ),
        (
            Box::new(|d: &Db| {
                d.raw(2, "x/y", 1 << 60, tv("{}"), NULL, None, None);
            }),
            "time is not a safe integer",
        ),
    ];
    for (add, says) in cases {
        let mut d = db(17);
        // The violating row is the last one, after the committed turn: still fatal.
        d.turn(0);
        add(&d);
        let (text, end) = d.read();
        assert!(text.is_empty(), "{says}");
        assert!(end.refused, "{says}");
        assert_eq!(codes(&end.findings), ["sqlite-storage-class"], "{says}");
        assert!(
            end.findings[0].message.contains(says),
            "{says}: {}",
            end.findings[0].message
        );
    }
    // Checked row by row instead: the stream ends at the violation, the session is refused.
    let mut d = db(17);
    d.turn(0).raw(
        2,
        "x/y",
        2,
        rusqlite::types::Value::Integer(7),
        NULL,
        None,
        None,
    );
    d.conn.take();
    let mut s = Store::open(&d.path).expect("open");
    let mut r = s.read("s").expect("read");
    r.check_storage_class_inline();
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut r, &mut text).expect("stream");
    let end = r.finish().expect("finish");
    assert_eq!(
        String::from_utf8_lossy(&text).lines().count(),
        3,
        "header and the turn"
    );
    assert!(end.refused);
    assert_eq!(codes(&end.findings), ["sqlite-storage-class"]);
    assert!(
        end.findings[0].message.contains("data is INTEGER"),
        "{}",
        end.findings[0].message
    );
    // Schema 15 has no such pass: its JSON text sources are simply its encoding.
    let mut d = db(15);
    d.turn(0).raw(
        2,
        "user/message",
        2,
        tv("{}"),
        tv("[0,1]"),
        Some("\"append\""),
        None,
    );
    let (text, end) = d.read();
    assert!(end.findings.is_empty());
    assert!(
        text.contains("\"sourceEventSeqs\":[0,1],\"surfaceOp\":\"append\""),
        "{text}"
    );
}

#[test]
fn data_is_text_or_a_zstd_blob_of_strict_utf8_without_a_bom() {
    let big = format!("{{\"text\":\"{}\"}}", "a".repeat(5000));
    let frame = zstd::bulk::compress(big.as_bytes(), 3).expect("zstd");
    let mut bom = vec![0xEF, 0xBB, 0xBF];
    bom.extend_from_slice(b"{\"b\":1}");
    let mut d = db(17);
    d.turn(0)
        .raw(2, "x/a", 2, blob(&frame), NULL, None, Some(1))
        .raw(
            3,
            "x/b",
            3,
            blob(&zstd::bulk::compress(&bom, 3).expect("zstd")),
            NULL,
            None,
            Some(1),
        )
        // TEXT is decoded lossily, as Node does.
        .raw(
            4,
            "x/c",
            4,
            rusqlite::types::Value::Blob(b"".to_vec()),
            NULL,
            None,
            Some(1),
        );
    d.sql("UPDATE events SET data = CAST(X'7B2278223A2261FF62227D' AS TEXT) WHERE seq = 4");
    let (text, end) = d.read();
    let lines = event_lines(&text);
    assert!(end.findings.is_empty(), "{:?}", end.findings);
    assert_eq!(
        lines[2],
        format!("{{\"type\":\"x/a\",\"seq\":2,\"time\":2,\"data\":{big},\"ignorable\":true}}")
    );
    assert_eq!(
        lines[3],
        "{\"type\":\"x/b\",\"seq\":3,\"time\":3,\"data\":{\"b\":1},\"ignorable\":true}"
    );
    assert_eq!(
        lines[4],
        "{\"type\":\"x/c\",\"seq\":4,\"time\":4,\"data\":{\"x\":\"a\u{fffd}b\"},\"ignorable\":true}"
    );

    // Undecodable BLOBs: invalid UTF-8 after decompression, not a zstd frame; and a BOM in TEXT.
    for (data, says) in [
        (
            blob(&zstd::bulk::compress(b"{\"x\":\"\xff\"}", 3).expect("zstd")),
            "invalid UTF-8",
        ),
        (blob(b"not zstd"), "data BLOB"),
        (tv("\u{feff}{}"), "data is not JSON"),
    ] {
        let mut d = db(17);
        d.turn(0).raw(2, "x/a", 2, data, NULL, None, Some(1));
        let (text, end) = d.read();
        assert_eq!(event_lines(&text).len(), 2, "{says}");
        assert_eq!(codes(&end.findings), ["crash-tail"], "{says}");
        assert!(
            end.findings[0].message.contains(says),
            "{says}: {}",
            end.findings[0].message
        );
    }
}

#[test]
fn data_is_written_back_as_json_stringify_would_write_the_parsed_value() {
    let mut d = db(17);
    d.ev(
        0,
        "x/a",
        "{ \"b\" : 1.50, \"a\":-0, \"b\":[1e2], \"7\":\"\\u0041\" }",
    );
    let (text, _) = d.read();
    assert_eq!(
        event_lines(&text),
        ["{\"type\":\"x/a\",\"seq\":0,\"time\":0,\"data\":{\"7\":\"A\",\"b\":[100],\"a\":0}}"]
    );
}

#[test]
fn scalar_rows_rebuild_envelopes_in_upstreams_key_order() {
    let mut d = db(17);
    d.raw(
        0,
        "user/message",
        5,
        tv("{}"),
        blob(&[0x13, 0x02, 0x1F]),
        Some("{\"op\":\"replace\",\"start\":1,\"end\":2}"),
        Some(1),
    )
    .raw(1, "x/y", 6, tv("[]"), blob(&[]), None, None);
    let (text, end) = d.read();
    assert!(end.findings.is_empty());
    assert_eq!(
        event_lines(&text),
        [
            "{\"type\":\"user/message\",\"seq\":0,\"time\":5,\"data\":{},\"sourceEventSeqs\":[19,20,4],\"surfaceOp\":{\"op\":\"replace\",\"start\":1,\"end\":2},\"ignorable\":true}",
            // An empty BLOB is an empty list, not an absent one.
            "{\"type\":\"x/y\",\"seq\":1,\"time\":6,\"data\":[],\"sourceEventSeqs\":[]}",
        ]
    );
}

#[test]
fn a_bad_varint_or_surface_op_makes_the_row_undecodable() {
    for (sources, op, says) in [
        (blob(&[0x80]), None, "truncated varint"),
        (blob(&[0x81, 0x00]), None, "non-canonical varint"),
        (blob(&[0x05, 0x0D]), None, "decoded seq is out of range"),
        (NULL, Some("{oops"), "surface_op is not JSON"),
    ] {
        let mut d = db(17);
        d.turn(0).raw(2, "x/a", 2, tv("{}"), sources, op, None);
        let (_, end) = d.read();
        assert_eq!(codes(&end.findings), ["crash-tail"], "{says}");
        assert_eq!(end.findings[0].seq, Some(2));
        assert!(
            end.findings[0].message.contains(says),
            "{says}: {}",
            end.findings[0].message
        );
    }
}

fn run_data(n: usize, text_len: usize) -> String {
    let texts: Vec<String> = (0..n)
        .map(|i| format!("\"{}{i}\"", "t".repeat(text_len)))
        .collect();
    let dt: Vec<&str> = (1..n).map(|_| "1").collect();
    format!(
        "{{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[{}],\"texts\":[{}]}}",
        dt.join(","),
        texts.join(",")
    )
}

#[test]
fn packed_rows_expand_into_chunk_events() {
    let mut d = db(17);
    d.raw(0, "text-chunks", 100, tv("{\"turn\":1,\"step\":2,\"index\":0,\"dt\":[5,-2],\"texts\":[\"a\",\"b\\n\",\"c\"]}"), NULL, None, Some(0))
        .raw(3, "tool-call-chunks", 200, tv("{\"turn\":1,\"step\":2,\"index\":1,\"id\":\"c1\",\"name\":\"bash\",\"dt\":[0,0],\"args\":[\"{\",\"}\",\"\"]}"), NULL, None, Some(0))
        .raw(6, "reasoning-chunks", 300, blob(&zstd::bulk::compress(run_data(3, 1).as_bytes(), 3).expect("zstd")), NULL, None, Some(0))
        // A row named like a packed row but not marked packed is an ordinary event.
        .raw(9, "text-chunks", 400, tv("{}"), NULL, None, Some(1));
    let (text, end) = d.read();
    assert!(end.findings.is_empty(), "{:?}", end.findings);
    let lines = event_lines(&text);
    assert_eq!(lines.len(), 10);
    assert_eq!(
        lines[0],
        "{\"type\":\"assistant/chunk\",\"seq\":0,\"time\":100,\"data\":{\"turn\":1,\"step\":2,\"chunk\":{\"type\":\"text-delta\",\"index\":0,\"text\":\"a\"}}}"
    );
    assert_eq!(
        lines[1],
        "{\"type\":\"assistant/chunk\",\"seq\":1,\"time\":105,\"data\":{\"turn\":1,\"step\":2,\"chunk\":{\"type\":\"text-delta\",\"index\":0,\"text\":\"b\\n\"}}}"
    );
    assert_eq!(
        lines[2],
        "{\"type\":\"assistant/chunk\",\"seq\":2,\"time\":103,\"data\":{\"turn\":1,\"step\":2,\"chunk\":{\"type\":\"text-delta\",\"index\":0,\"text\":\"c\"}}}"
    );
    assert_eq!(
        lines[3],
        "{\"type\":\"assistant/chunk\",\"seq\":3,\"time\":200,\"data\":{\"turn\":1,\"step\":2,\"chunk\":{\"type\":\"tool-call-delta\",\"index\":1,\"id\":\"c1\",\"name\":\"bash\",\"argumentsDelta\":\"{\"}}}"
    );
    assert!(lines[6].contains("\"reasoning-delta\""), "{}", lines[6]);
    assert_eq!(
        lines[9],
        "{\"type\":\"text-chunks\",\"seq\":9,\"time\":400,\"data\":{},\"ignorable\":true}"
    );
    assert_eq!(end.events, 10);
    assert_eq!(end.last_time, Some(400));

    // Kept packed: one JSONL v0 packed row per packed row, the same events to the pass.
    d.conn.take();
    let mut s = Store::open(&d.path).expect("open");
    let mut r = s.read("s").expect("read");
    assert!(r.keep_packed_rows());
    let mut kept = Vec::new();
    std::io::Read::read_to_end(&mut r, &mut kept).expect("stream");
    let end = r.finish().expect("finish");
    let kept = String::from_utf8(kept).expect("UTF-8");
    assert_eq!(
        event_lines(&kept)[0],
        "{\"type\":\"text-chunks\",\"seq0\":0,\"time0\":100,\"data\":{\"turn\":1,\"step\":2,\"index\":0,\"dt\":[5,-2],\"texts\":[\"a\",\"b\\n\",\"c\"]}}"
    );
    assert_eq!(event_lines(&kept).len(), 4);
    assert_eq!((end.events, end.last_time), (10, Some(400)));
    let (a, b) = (summary(kept.as_bytes()), summary(text.as_bytes()));
    assert_eq!((a.0, a.1), (b.0, b.1));
}

#[test]
fn packed_rows_outside_sqlites_bounds_are_malformed() {
    let cases = [
        (run_data(2, 1), "holds 2 members"),
        (run_data(1025, 1), "holds 1025 members"),
        (run_data(3, 400_000), "more than 1048576"),
        ("{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[1],\"texts\":[\"a\",\"b\",\"c\"]}".to_owned(), "dt has 1 entries"),
        ("{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[1,1.5],\"texts\":[\"a\",\"b\",\"c\"]}".to_owned(), "dt[1] is not a safe integer"),
        ("{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[1,1],\"texts\":[\"a\",2,\"c\"]}".to_owned(), "member 1 is not a string"),
        ("{\"turn\":\"1\",\"step\":1,\"index\":0,\"dt\":[1,1],\"texts\":[\"a\",\"b\",\"c\"]}".to_owned(), "turn is not a number"),
        ("{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[1,1],\"texts\":[\"a\",\"b\",\"c\"],\"x\":1}".to_owned(), "exactly the keys"),
    ];
    for (data, says) in cases {
        let mut d = db(17);
        d.turn(0)
            .raw(2, "text-chunks", 2, tv(&data), NULL, None, Some(0));
        let (text, end) = d.read();
        assert_eq!(event_lines(&text).len(), 2, "{says}");
        assert_eq!(codes(&end.findings), ["crash-tail"], "{says}");
        assert!(
            end.findings[0].message.contains(says),
            "{says}: {}",
            end.findings[0].message
        );
    }
    // 1,024 members fit; ignorable 0 on another type, or with surface columns, does not.
    let mut d = db(17);
    d.raw(
        0,
        "text-chunks",
        0,
        tv(&run_data(1024, 1)),
        NULL,
        None,
        Some(0),
    );
    assert_eq!(d.read().1.events, 1024);
    for (ty, op, says) in [
        ("user/message", None, "not a packed-row tag"),
        ("text-chunks", Some("\"append\""), "must have NULL"),
    ] {
        let mut d = db(17);
        d.turn(0)
            .raw(2, ty, 2, tv(&run_data(3, 1)), NULL, op, Some(0));
        let (_, end) = d.read();
        assert!(
            end.findings[0].message.contains(says),
            "{says}: {}",
            end.findings[0].message
        );
    }
}

#[test]
fn seqs_must_be_contiguous_across_rows() {
    // A gap after the last turn end is a torn tail from the gap row's seq.
    let mut d = db(17);
    d.turn(0).ev(3, "x/a", "{}").ev(4, "x/b", "{}");
    let (text, end) = d.read();
    assert_eq!(event_lines(&text).len(), 2);
    assert_eq!(end.snapshot.torn.map(|t| (t.seq, t.rows)), Some((3, 2)));
    assert!(
        end.findings[0].message.contains("expects 2"),
        "{}",
        end.findings[0].message
    );
    // A scalar row inside a packed row's span is an overlap.
    let mut d = db(17);
    d.turn(0)
        .raw(
            2,
            "text-chunks",
            2,
            tv(&run_data(3, 1)),
            NULL,
            None,
            Some(0),
        )
        .ev(3, "x/a", "{}");
    let (text, end) = d.read();
    assert_eq!(event_lines(&text).len(), 5);
    assert_eq!(end.snapshot.torn.map(|t| t.seq), Some(3));
    assert_eq!(end.snapshot.last_seq, Some(4));
}

#[test]
fn damage_before_the_last_turn_end_is_committed_after_it_a_torn_tail() {
    // Before: committed damage, the session is refused; every damaged committed row named.
    let mut d = db(17);
    d.ev(0, "turn/start", TURN_START)
        .ev(1, "x/a", "{bad")
        .ev(2, "x/b", "{}")
        .ev(4, "x/c", "{}")
        .ev(5, "turn/end", TURN_END);
    let (text, end) = d.read();
    assert!(end.refused);
    assert_eq!(
        event_lines(&text).len(),
        4,
        "the stream goes on past the damage (FORMAT.md §6.3), without the bad row"
    );
    let found: Vec<_> = end
        .findings
        .iter()
        .map(|f| (f.code.as_str(), f.seq))
        .collect();
    assert_eq!(
        found,
        [
            ("committed-malformed-row", Some(1)),
            ("committed-seq-gap", Some(4))
        ]
    );
    // A seq gap right before the turn end row is committed too.
    let mut d = db(17);
    d.ev(0, "turn/start", TURN_START)
        .ev(2, "turn/end", TURN_END);
    let (_, end) = d.read();
    assert_eq!(codes(&end.findings), ["committed-seq-gap"]);

    // After: a torn tail, however valid the later rows are; an undecodable turn/end row does
    // not count as a boundary.
    let mut d = db(17);
    d.turn(0)
        .ev(2, "x/a", "{bad")
        .ev(3, "x/b", "{}")
        .ev(4, "turn/end", "{bad");
    let (text, end) = d.read();
    assert!(!end.refused);
    assert_eq!(event_lines(&text).len(), 2);
    assert_eq!(end.snapshot.torn.map(|t| (t.seq, t.rows)), Some((2, 3)));
    assert_eq!(end.findings[0].code, Code::CrashTail);
    assert!(
        end.findings[0]
            .message
            .contains("3 rows of session \"s\" from seq 2"),
        "{}",
        end.findings[0].message
    );
    // No turn end at all: every failure is a torn tail, and an open turn stays committed.
    let mut d = db(17);
    d.ev(0, "turn/start", TURN_START)
        .ev(1, "x/a", "{}")
        .ev(2, "x/b", "{bad");
    let (text, end) = d.read();
    assert_eq!(event_lines(&text).len(), 2);
    assert_eq!(end.snapshot.torn.map(|t| t.seq), Some(2));
    assert!(
        summary(text.as_bytes()).3,
        "the interrupted turn stays, open"
    );
    // The message says why nothing commits them, not that rows "hold no turn/end" (issue 37
    // item 16): the session has none that decodes.
    let says = &end.findings[0].message;
    assert!(
        says.contains("no turn/end commits them") && !says.contains("hold no committed"),
        "{says}"
    );
}

#[test]
fn schema_15_reads_json_text_and_has_no_packed_rows() {
    let mut d = db(15);
    d.turn(0)
        .raw(2, "text-chunks", 2, tv("{}"), NULL, None, Some(0))
        .raw(3, "x/a", 3, tv("{ }"), tv("[ 1 ]"), None, Some(1))
        .raw(4, "x/b", 4, tv("{}"), NULL, None, Some(7));
    let (text, end) = d.read();
    assert!(end.findings.is_empty());
    assert_eq!(
        event_lines(&text)[2..],
        [
            "{\"type\":\"text-chunks\",\"seq\":2,\"time\":2,\"data\":{}}",
            "{\"type\":\"x/a\",\"seq\":3,\"time\":3,\"data\":{},\"sourceEventSeqs\":[1],\"ignorable\":true}",
            "{\"type\":\"x/b\",\"seq\":4,\"time\":4,\"data\":{}}",
        ]
    );
    // Unparsable JSON text is a bad row as in 17.
    let mut d = db(15);
    d.turn(0).raw(2, "x/a", 2, tv("{}"), tv("[1,"), None, None);
    assert_eq!(codes(&d.read().1.findings), ["crash-tail"]);
}

#[test]
fn is_seeded_is_derived_only_when_asked_and_warned() {
    let mut d = db(17);
    d.sql("UPDATE sessions SET version = 3");
    d.ev(0, "session/end-seed", "{\"inherited\":true}");
    d.conn.take();
    let mut s = Store::open(&d.path).expect("open");
    let mut r = s.read("s").expect("read");
    assert!(!String::from_utf8_lossy(r.header_line()).contains("isSeeded"));
    assert_eq!(r.derive_is_seeded().expect("derive"), Some(true));
    assert_eq!(
        String::from_utf8_lossy(r.header_line()),
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"createdAt\":1,\"cwd\":\"/w\",\"isSeeded\":true,\"delegationDepth\":0}"
    );
    let end = r.finish().expect("finish");
    assert_eq!(codes(&end.findings), ["sqlite-is-seeded-derived"]);
    // A marker only in the torn tail does not count.
    let mut d = db(17);
    d.sql("UPDATE sessions SET version = 2");
    d.ev(0, "x/a", "{}")
        .ev(2, "session/end-seed", "{\"inherited\":true}");
    d.conn.take();
    let mut s = Store::open(&d.path).expect("open");
    let mut r = s.read("s").expect("read");
    assert_eq!(r.derive_is_seeded().expect("derive"), Some(false));
    // Versions 0 and 1 have no such field.
    let mut d = db(17);
    d.conn.take();
    let mut s = Store::open(&d.path).expect("open");
    assert_eq!(
        s.read("s")
            .expect("read")
            .derive_is_seeded()
            .expect("derive"),
        None
    );
}

/// The storage-class pass gathers the markers in the same scan (schema 17): a session that
/// breaks the rules is refused before any marker counts, a marker row that breaks them is
/// not read as a marker, and without the pass (schema 15) the markers are found alone.
#[test]
fn is_seeded_is_derived_from_the_class_pass_scan_and_never_for_a_refused_session() {
    let derived = |d: &mut Db| {
        d.conn.take();
        let mut s = Store::open(&d.path).expect("open");
        let mut r = s.read("s").expect("read");
        let seeded = r.derive_is_seeded().expect("derive");
        (seeded, r.finish().expect("finish"))
    };
    // A row whose `data` has a storage class the rules refuse.
    let breaking = |d: &Db, seq: i64, ty: &str, data: rusqlite::types::Value| {
        d.raw(seq, ty, 2, data, NULL, None, None);
    };
    // Two rows break the rules after an inherited marker: refused, nothing derived.
    let mut d = db(17);
    d.sql("UPDATE sessions SET version = 3");
    d.ev(0, "session/end-seed", "{\"inherited\":true}");
    for seq in [1, 2] {
        breaking(&d, seq, "x/y", rusqlite::types::Value::Integer(7));
    }
    let (seeded, end) = derived(&mut d);
    assert_eq!(seeded, None);
    assert!(end.refused);
    assert_eq!(codes(&end.findings), ["sqlite-storage-class"]);
    let says = &end.findings[0].message;
    assert!(
        says.contains("seq 1 ") && says.contains("(1 more row break"),
        "{says}"
    );
    // The marker row itself breaks them: refused, not read as a marker.
    let mut d = db(17);
    d.sql("UPDATE sessions SET version = 3");
    breaking(&d, 0, "session/end-seed", rusqlite::types::Value::Real(1.5));
    let (seeded, end) = derived(&mut d);
    assert_eq!((seeded, end.refused), (None, true));
    assert!(end.findings[0].message.contains("data is REAL"));
    // Only inherited markers count.
    let mut d = db(17);
    d.sql("UPDATE sessions SET version = 3");
    d.ev(0, "session/end-seed", "{\"inherited\":false}")
        .ev(1, "x/a", "{}");
    let (seeded, end) = derived(&mut d);
    assert_eq!(seeded, Some(false));
    assert_eq!(codes(&end.findings), ["sqlite-is-seeded-derived"]);
    // Schema 15 has no class pass: the markers are read in a scan of their own.
    for inherited in [true, false] {
        let mut d = db(15);
        d.sql("UPDATE sessions SET version = 3");
        d.ev(0, "x/a", "{}").ev(
            1,
            "session/end-seed",
            &format!("{{\"inherited\":{inherited}}}"),
        );
        let (seeded, end) = derived(&mut d);
        assert_eq!(seeded, Some(inherited));
        assert_eq!(codes(&end.findings), ["sqlite-is-seeded-derived"]);
    }
}

#[test]
fn a_missing_session_is_named_with_the_ids_there_are() {
    let mut store = Store::open(&fixtures().join("db/open-turn.db")).expect("open");
    let e = store.read("nope").expect_err("no such session");
    assert_eq!(e.class(), Class::Failure);
    assert!(
        e.to_string().contains("\"open-after-first-tool-call\""),
        "{e}"
    );
}

#[test]
fn path_hash_id_splits_at_the_first_hash_after_an_existing_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("a#b.db");
    std::fs::copy(fixtures().join("db/torn-packed-tail.db"), &db).expect("copy");
    let arg = format!("{}#id#1", db.display());
    assert_eq!(
        split_session_path(&arg),
        Some((db.clone(), "id#1".to_owned()))
    );
    // An existing file of that whole name is the path; a missing database splits nowhere.
    assert_eq!(split_session_path(&db.display().to_string()), None);
    assert_eq!(
        split_session_path(&format!("{}/none.db#x", dir.path().display())),
        None
    );
}

/// `dshs validate --format json` of session `s`: (finding codes, summary, exit code).
fn validate_json(path: &Path) -> (Vec<String>, serde_json::Value, Option<i32>) {
    let out = common::dshs()
        .args(["validate", "--format", "json"])
        .arg(format!("{}#s", path.display()))
        .output()
        .expect("run dshs");
    let lines = common::json_lines(&out.stdout);
    let mut codes: Vec<String> = lines
        .iter()
        .filter(|l| l["type"] == "finding")
        .map(|l| l["code"].as_str().expect("code").to_owned())
        .collect();
    codes.sort();
    let summary = lines
        .into_iter()
        .find(|l| l["type"] == "summary")
        .expect("a summary");
    (codes, summary, out.status.code())
}

/// Item 7 of issue 37: after committed damage the pass still reads the rows that follow, as
/// on a JSONL log, so nothing is made up from a log cut short at the damage (an open turn, a
/// seed longer than the events).
#[test]
fn committed_damage_reports_what_the_jsonl_log_reports_and_nothing_made_up() {
    for (bad, note) in [("{bad", "a row that does not decode"), ("gap", "a seq gap")] {
        let mut d = db(17);
        d.sql("UPDATE sessions SET seed_length = 5");
        d.ev(0, "turn/start", TURN_START);
        if bad == "gap" {
            d.ev(2, "x/b", "{}");
        } else {
            d.ev(1, "x/a", bad).ev(2, "x/b", "{}");
        }
        d.ev(3, "turn/end", TURN_END)
            .ev(4, "turn/start", r#"{"turn":2}"#)
            .ev(5, "turn/end", r#"{"turn":2,"reason":{"kind":"completed"}}"#);
        d.conn.take();
        let (codes, summary, _) = validate_json(&d.path);
        // The same log as JSONL, the bad row as a line that does not parse.
        let mut jsonl = String::from(
            r#"{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/w","seedLength":5,"delegationDepth":0}"#,
        );
        jsonl.push('\n');
        for (seq, ty, data) in [
            (0, "turn/start", TURN_START),
            (1, "x/a", "{bad"),
            (2, "x/b", "{}"),
            (3, "turn/end", TURN_END),
            (4, "turn/start", r#"{"turn":2}"#),
            (5, "turn/end", r#"{"turn":2,"reason":{"kind":"completed"}}"#),
        ] {
            if seq == 1 && bad == "gap" {
                continue;
            }
            jsonl.push_str(&format!(
                r#"{{"type":"{ty}","seq":{seq},"time":{seq},"data":{data}}}"#
            ));
            jsonl.push('\n');
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("s.jsonl");
        std::fs::write(&log, jsonl).expect("write");
        let out = common::dshs()
            .args(["validate", "--format", "json"])
            .arg(&log)
            .output()
            .expect("run dshs");
        let lines = common::json_lines(&out.stdout);
        let mut want: Vec<String> = lines
            .iter()
            .filter(|l| l["type"] == "finding")
            .map(|l| l["code"].as_str().expect("code").to_owned())
            .collect();
        want.sort();
        let jsonl_summary = lines
            .into_iter()
            .find(|l| l["type"] == "summary")
            .expect("a summary");
        // The damage itself has its storage-layer name; everything else is the same.
        let damage = |c: &String| c.starts_with("committed-");
        assert!(codes.iter().any(damage), "{note}: {codes:?}");
        assert!(want.iter().any(damage), "{note}: {want:?}");
        let rest = |v: &[String]| v.iter().filter(|c| !damage(c)).cloned().collect::<Vec<_>>();
        assert_eq!(rest(&codes), rest(&want), "{note}");
        for c in ["open-turn-at-end", "seed-length-exceeds-events"] {
            assert!(!codes.iter().any(|x| x == c), "{note}: {codes:?}");
        }
        for key in ["status", "openTurn", "events", "tornTail"] {
            assert_eq!(summary[key], jsonl_summary[key], "{note}: {key}");
        }
    }
}

/// Item 6 of issue 37: schema 15 finds the committed boundary by the `type` column alone
/// (its `scanRows`), so a `turn/end` row that does not decode still closes the committed
/// region there; schema 17 skips such a row (its rule: the last row that decodes).
#[test]
fn schema_15_finds_the_boundary_by_the_type_column() {
    for (version, committed) in [(15, true), (17, false)] {
        let mut d = db(version);
        d.turn(0)
            .ev(2, "turn/start", r#"{"turn":2}"#)
            .ev(3, "turn/end", "{bad");
        let (_, end) = d.read();
        if committed {
            assert!(end.refused, "{version}");
            assert_eq!(
                codes(&end.findings),
                ["committed-malformed-row"],
                "{version}"
            );
            assert_eq!(end.snapshot.torn, None, "{version}");
        } else {
            assert!(!end.refused, "{version}");
            assert_eq!(codes(&end.findings), ["crash-tail"], "{version}");
            assert_eq!(end.snapshot.torn.map(|t| t.seq), Some(3), "{version}");
        }
        // repair deletes nothing from a schema-15 store: the damage is committed.
        let before = d.path.clone();
        let r = common::dshs()
            .args(["repair", "--allow-old-schema"])
            .arg(format!("{}#s", before.display()))
            .output()
            .expect("run dshs");
        let rows: i64 = Connection::open(&d.path)
            .expect("open")
            .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
            .expect("count");
        if committed {
            assert_eq!(r.status.code(), Some(1), "{version}");
            assert_eq!(rows, 4, "{version}: nothing deleted");
        } else {
            assert_eq!(r.status.code(), Some(0), "{version}");
        }
    }
}

/// Item 5 of issue 37: the discriminator, not the type, makes a packed row (S4.3). A scalar
/// row typed like a packed row is an ordinary event of that type: with `ignorable = 1` an
/// ignorable event DSH skips, with `ignorable` NULL an unknown type DSH refuses (exit 3) —
/// in the committed rows or at the end, on both schemas.
#[test]
fn a_scalar_row_typed_like_a_packed_row_is_an_ordinary_event() {
    for version in [15, 17] {
        for tag in ["text-chunks", "reasoning-chunks", "tool-call-chunks"] {
            for (ignorable, status, exit) in [(Some(1), "valid", 0), (None, "unsupported", 3)] {
                for at_end in [false, true] {
                    let what = format!(
                        "schema {version}, {tag}, ignorable {ignorable:?}, at end {at_end}"
                    );
                    let mut d = db(version);
                    d.turn(0);
                    let seq = if at_end { 2 } else { 3 };
                    if !at_end {
                        d.ev(2, "turn/start", r#"{"turn":2}"#);
                    }
                    d.raw(
                        seq,
                        tag,
                        seq,
                        tv(r#"{"turn":1,"x":[1]}"#),
                        NULL,
                        None,
                        ignorable,
                    );
                    if !at_end {
                        d.ev(4, "turn/end", r#"{"turn":2,"reason":{"kind":"completed"}}"#);
                    }
                    d.conn.take();
                    let (codes, summary, code) = validate_json(&d.path);
                    assert_eq!(summary["status"], status, "{what}: {codes:?}");
                    assert_eq!(code, Some(exit), "{what}");
                    assert!(
                        !codes
                            .iter()
                            .any(|c| c.starts_with("committed-") || c == "crash-tail"),
                        "{what}: {codes:?}"
                    );
                    assert_eq!(summary["tornTail"], false, "{what}");
                }
            }
        }
    }
}

/// Items 5 and 7 for the commands that show a store session (`stats`, `show`, `surface`):
/// their pass reads the store's stream by the store's rules too.
#[test]
fn showing_commands_read_a_store_session_by_the_stores_rules() {
    let mut d = db(17);
    d.turn(0)
        .ev(2, "turn/start", r#"{"turn":2}"#)
        .raw(3, "text-chunks", 3, tv(r#"{"x":1}"#), NULL, None, Some(1))
        .ev(4, "turn/end", r#"{"turn":2,"reason":{"kind":"completed"}}"#);
    d.conn.take();
    let name = format!("{}#s", d.path.display());
    for cmd in ["stats", "show", "surface"] {
        let out = common::dshs()
            .args([cmd, &name])
            .output()
            .expect("run dshs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The data forms a deferred read leaves for the parsing threads and those it decodes at
/// once, each as it is stored: (label, data, whether the deferred read stands: all is
/// upstream's own form, or decoded at once). A BLOB that is not zstd
/// stands for the TEXT of its bytes (see [`deferred_db`]).
fn deferred_forms() -> Vec<(&'static str, rusqlite::types::Value, bool)> {
    let text = r#"{"7":null,"text":"été \u0001 \"q\" 💡","n":[1,2.5,-3e-7],"a":{}}"#;
    let zstd = |s: &[u8]| blob(&zstd::bulk::compress(s, 3).expect("zstd"));
    // The streaming encoder does not state the frame's size: decoded at once.
    let no_size = blob(&zstd::stream::encode_all(text.as_bytes(), 3).expect("zstd"));
    let mut bom = "\u{feff}".as_bytes().to_vec();
    bom.extend_from_slice(text.as_bytes());
    let mut two = zstd::bulk::compress(text.as_bytes(), 3).expect("zstd");
    two.extend_from_slice(&zstd::bulk::compress(b" ", 3).expect("zstd"));
    vec![
        ("TEXT", tv(text), true),
        ("zstd", zstd(text.as_bytes()), true),
        (
            "long zstd",
            zstd(format!(r#"{{"s":"{}"}}"#, "x".repeat(70_000)).as_bytes()),
            true,
        ),
        ("zstd of no stated size", no_size, true),
        ("two frames", blob(&two), true),
        ("TEXT with spaces", tv(r#"{ "a": 1 }"#), false),
        ("TEXT of a newline", tv("{\n}"), true),
        ("TEXT not UTF-8", blob(b"{\"a\":\"\xff\"}"), false),
        ("zstd with spaces", zstd(br#"{"a" : 1}"#), false),
        (
            "zstd with a BOM",
            blob(&zstd::bulk::compress(&bom, 3).expect("zstd")),
            false,
        ),
        ("zstd of \\u0041", zstd(br#"{"a":"\u0041"}"#), false),
        ("zstd not UTF-8", zstd(b"{\"a\":\"\xff\"}"), false),
        ("zstd of 1.0", zstd(br#"{"a":1.0}"#), false),
        ("zstd of repeated keys", zstd(br#"{"a":1,"a":2}"#), false),
        ("zstd, not JSON", zstd(b"{bad"), false),
    ]
}

/// A store whose session holds `rows` scalar rows of `data` among turns, then `tail` rows; a
/// BLOB that is not a zstd frame is stored as the TEXT of its bytes, UTF-8 or not.
fn deferred_db(rows: usize, data: &rusqlite::types::Value, tail: &[rusqlite::types::Value]) -> Db {
    let d = db(17);
    let mut seq = 0;
    for k in 0..rows {
        if k % 7 == 0 {
            d.turn(seq);
            seq += 2;
        }
        d.raw(seq, "x/a", seq, data.clone(), NULL, None, Some(1));
        seq += 1;
    }
    for data in tail {
        d.raw(seq, "x/b", seq, data.clone(), NULL, None, Some(1));
        seq += 1;
    }
    d.turn(seq);
    d.sql("UPDATE events SET data = CAST(data AS TEXT) WHERE typeof(data) = 'blob' AND substr(data, 1, 4) != X'28B52FFD'");
    d
}

/// The stream of session `s` read with its texts deferred, then filled in blocks cut at line
/// ends, in an order that is not the stream's; and whether the read ended cleanly.
fn deferred_stream(path: &Path, block: usize) -> (Vec<u8>, bool) {
    use dshs::log::scan::Deferred;
    let mut store = Store::open(path).expect("open");
    let mut r = store.read("s").expect("read");
    let deferral = r.defer_decoding();
    let mut out = Vec::new();
    // The header's fill is read before the threads are armed, as `scan` does it.
    std::io::BufRead::fill_buf(&mut r).expect("header");
    deferral.arm();
    std::io::Read::read_to_end(&mut r, &mut out).expect("stream");
    let mut cuts = vec![0];
    for (i, &b) in out.iter().enumerate() {
        if b == b'\n' && i + 1 - cuts[cuts.len() - 1] >= block {
            cuts.push(i + 1);
        }
    }
    if cuts[cuts.len() - 1] != out.len() {
        cuts.push(out.len());
    }
    let mut blocks: Vec<(usize, usize)> = cuts.windows(2).map(|w| (w[0], w[1])).collect();
    blocks.reverse();
    let third = blocks.len() / 3;
    blocks.rotate_left(third);
    for (start, end) in blocks {
        deferral.fill(start as u64, &mut out[start..end]);
    }
    let clean = r.ended_cleanly();
    if !clean {
        // Read again the exact way: what it gives is the exact read's.
        r.restart_expanded().expect("restart");
        out.clear();
        std::io::Read::read_to_end(&mut r, &mut out).expect("stream");
    }
    r.finish().expect("finish");
    (out, clean)
}

#[test]
fn a_deferred_read_writes_what_the_exact_read_writes_or_is_done_again() {
    let forms = deferred_forms();
    for (label, data, own) in &forms {
        for block in [1, 200, 1 << 20] {
            // Every row in this form; and rows in upstream's forms with one such row last.
            let many = deferred_db(40, data, &[]);
            let one = deferred_db(40, &forms[1].1, &[forms[0].1.clone(), data.clone()]);
            for mut d in [many, one] {
                let (exact, _) = d.read();
                let (read, clean) = deferred_stream(&d.path, block);
                assert_eq!(
                    String::from_utf8_lossy(&read),
                    exact,
                    "{label}, blocks of {block}"
                );
                assert_eq!(clean, *own, "{label}, blocks of {block}");
            }
        }
    }
    // A job the blocks never reach, or one cut by a block's end, leaves the read unsettled.
    use dshs::log::scan::Deferred;
    let mut d = deferred_db(3, &forms[1].1, &[]);
    d.conn.take();
    for cut in [None, Some(30)] {
        let mut store = Store::open(&d.path).expect("open");
        let mut r = store.read("s").expect("read");
        let deferral = r.defer_decoding();
        std::io::BufRead::fill_buf(&mut r).expect("header");
        deferral.arm();
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut r, &mut out).expect("stream");
        if let Some(cut) = cut {
            let at = out.iter().position(|&b| b == 0).expect("a reserved text") + cut;
            let (a, b) = out.split_at_mut(at);
            deferral.fill(0, a);
            deferral.fill(at as u64, b);
        }
        assert!(!r.ended_cleanly(), "{cut:?}");
    }
}

#[test]
fn a_scan_of_a_deferred_read_on_many_threads_is_the_exact_scan() {
    let forms = deferred_forms();
    for (label, data, own) in [&forms[0], &forms[1], &forms[2], &forms[5], &forms[9]] {
        let mut d = deferred_db(300, &forms[1].1, &[data.clone(), forms[0].1.clone()]);
        let (exact, _) = d.read();
        let want = summary(exact.as_bytes());
        for threads in [2, 3] {
            let mut store = Store::open(&d.path).expect("open");
            let mut r = store.read("s").expect("read");
            let opts = ScanOptions {
                from_store: true,
                threads,
                block_bytes: 300,
                deferred: Some(r.defer_decoding()),
                ..ScanOptions::default()
            };
            let mut found = Vec::new();
            let scan = scan(&mut r, None, &opts, &mut found, &mut ()).expect("scan");
            assert_eq!(r.ended_cleanly(), *own, "{label}, {threads} threads");
            if *own {
                let got = (
                    scan.status().as_str().to_owned(),
                    scan.events(),
                    scan.surface_nodes(),
                    scan.open_turn(),
                    codes(&found),
                );
                assert_eq!(got, want, "{label}, {threads} threads");
            }
            r.finish().expect("finish");
        }
    }
}

/// The same reads through helper threads that write the texts (`sqlite::Filled`), which a
/// command that taps or copies the stream reads: the exact bytes when the read stands, and a
/// read that does not stand says so at its end.
#[test]
fn a_read_filled_by_helper_threads_is_the_exact_read_or_says_it_is_not() {
    use dshs::log::sqlite::Filled;
    let forms = deferred_forms();
    for (label, data, own) in &forms {
        let mut d = deferred_db(200, &forms[1].1, &[data.clone(), forms[0].1.clone()]);
        let (exact, _) = d.read();
        for threads in [1, 2, 4] {
            let store = Store::open(&d.path).expect("open");
            let mut r = store.into_reader("s").expect("read");
            let deferral = r.defer_decoding();
            let mut filled = Filled::new(r, deferral, threads).expect("threads");
            let mut out = Vec::new();
            std::io::Read::read_to_end(&mut filled, &mut out).expect("stream");
            let r = filled.into_inner().expect("the reader back");
            let end = r.finish().expect("finish");
            let clean = end.packed.as_ref().is_some_and(|p| p.clean);
            assert_eq!(clean, *own, "{label}, {threads} threads");
            if *own {
                assert_eq!(
                    String::from_utf8_lossy(&out),
                    exact,
                    "{label}, {threads} threads"
                );
            }
        }
    }
    // Let go early: the threads stop, and the read, not at its end (4 MiB of rows: more than
    // the threads read ahead), is not clean.
    let d = deferred_db(60, &forms[2].1, &[]);
    let store = Store::open(&d.path).expect("open");
    let mut r = store.into_reader("s").expect("read");
    let deferral = r.defer_decoding();
    let mut filled = Filled::new(r, deferral, 3).expect("threads");
    let mut some = vec![0; 1000];
    std::io::Read::read_exact(&mut filled, &mut some).expect("some");
    let r = filled.into_inner().expect("the reader back");
    assert!(!r.ended_cleanly());
    drop(r);
    // Let go before reading a byte.
    let store = Store::open(&d.path).expect("open");
    let mut r = store.into_reader("s").expect("read");
    let deferral = r.defer_decoding();
    drop(Filled::new(r, deferral, 2).expect("threads"));
}
