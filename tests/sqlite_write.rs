//! DSH's SQLite session store, write side (SQLITE.md S8.2): repair reproduces upstream's
//! own repair transaction, keeps the deleted rows in a sidecar and is idempotent; another
//! connection makes every write refuse untouched; the stale checks hold; a writer killed at
//! any point leaves the store untouched or fully repaired.

mod common;

#[path = "../benches/store/mod.rs"]
mod store;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use dshs::log::compact::{self, Lookout, Minted, Request};
use dshs::log::derive::Deriver;
use dshs::log::repair;
use dshs::log::scan::{ScanOptions, Status, scan};
use dshs::log::sqlite::write::{self, Fault, Options, Plan, Point, WriteError};
use dshs::log::sqlite::{ReadEnd, Store};
use rusqlite::Connection;

fn fixtures() -> PathBuf {
    common::testdata("sqlite")
}

fn copy_of(rel: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let to = dir.path().join(Path::new(rel).file_name().expect("name"));
    std::fs::copy(fixtures().join("db").join(rel), &to).expect("copy");
    (dir, to)
}

fn read_log(path: &Path, id: &str) -> (Vec<u8>, ReadEnd) {
    let mut s = Store::open(path).unwrap_or_else(|e| panic!("{e}"));
    let mut r = s.read(id).expect("read");
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut r, &mut out).expect("stream");
    (out, r.finish().expect("finish"))
}

/// What `dshs repair` plans for one session: the closers of the existing planner over the
/// rebuilt log, and the torn tail the storage layer found.
fn repair_plan(path: &Path, id: &str) -> Plan {
    let (log, end) = read_log(path, id);
    assert!(!end.refused, "{id}: {:?}", end.findings);
    let s = scan(
        &log[..],
        None,
        &ScanOptions::default(),
        &mut Vec::new(),
        &mut (),
    )
    .expect("scan");
    let p = repair::plan(&s).unwrap_or_else(|r| panic!("{id}: {r:?}"));
    assert!(p.cut.is_none(), "a rebuilt log has no tail of its own");
    Plan {
        snapshot: end.snapshot,
        cut: true,
        append: p.closers.iter().map(|c| c.line.clone()).collect(),
    }
}

fn index_of(name: &str) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_slice(
        &std::fs::read(fixtures().join("expected").join(name).join("index.json")).expect("index"),
    )
    .expect("JSON");
    v.as_array()
        .expect("list")
        .iter()
        .map(|s| {
            (
                s["id"].as_str().expect("id").to_owned(),
                s["file"].as_str().expect("file").to_owned(),
            )
        })
        .collect()
}

/// The rows of a session as stored, for comparing encodings.
/// seq, type, time, typeof(data), data (BLOBs in hex), hex(sources), surface_op, ignorable.
type StoredRow = (
    i64,
    String,
    i64,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<i64>,
);

fn rows(path: &Path, id: &str, from: i64) -> Vec<StoredRow> {
    let c = Connection::open_with_flags(
        format!("file:{}?immutable=1", path.display()),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
    )
    .expect("open");
    let mut st = c
        .prepare(
            "SELECT seq, type, time, typeof(data), CASE typeof(data) WHEN 'blob' THEN hex(data) ELSE data END, \
             hex(source_event_seqs), surface_op, ignorable FROM events WHERE session_id = ?1 AND seq >= ?2 ORDER BY seq",
        )
        .expect("prepare");
    st.query_map(rusqlite::params![id, from], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
        ))
    })
    .expect("query")
    .collect::<Result<_, _>>()
    .expect("rows")
}

fn revision(path: &Path, id: &str) -> i64 {
    let (_, end) = read_log(path, id);
    end.snapshot.revision.expect("revision")
}

#[test]
fn repair_reproduces_upstreams_repair_transaction_and_a_second_run_writes_nothing() {
    for (db, expected, repaired) in [
        ("open-turn.db", "open-turn", "open-turn.repaired"),
        (
            "torn-packed-tail.db",
            "torn-packed-tail",
            "torn-packed-tail.repaired",
        ),
    ] {
        let (dir, path) = copy_of(db);
        let upstream = fixtures().join("db").join(format!("{repaired}.db"));
        let mut sidecars = 0;
        for ((id, _), (rid, rfile)) in index_of(expected).into_iter().zip(index_of(repaired)) {
            assert_eq!(id, rid);
            let plan = repair_plan(&path, &id);
            let before = plan.snapshot.clone();
            let done = write::apply(&path, &plan, Options::default())
                .unwrap_or_else(|e| panic!("{db} {id}: {e}"));
            assert_eq!(
                done.revision,
                before.revision.map(|r| r + 1),
                "{db} {id}: one bump"
            );
            assert_eq!(done.inserted as usize, plan.append.len());
            let (log, end) = read_log(&path, &id);
            let want = std::fs::read(fixtures().join("expected").join(repaired).join(&rfile))
                .expect("repaired log");
            assert_eq!(
                String::from_utf8_lossy(&log),
                String::from_utf8_lossy(&want),
                "{db} {id}"
            );
            assert!(end.findings.is_empty(), "{db} {id}: {:?}", end.findings);
            // The closer rows are encoded exactly as upstream's commitRepair stored them.
            let from = before.last_seq.map_or(0, |s| s as i64 + 1);
            assert_eq!(
                rows(&path, &id, from),
                rows(&upstream, &id, from),
                "{db} {id}"
            );
            if let Some(torn) = before.torn {
                sidecars += 1;
                let side = done.sidecar.clone().expect("a sidecar");
                assert_eq!(side, dir.path().join(format!("{db}.dshs-cut-{sidecars}")));
                let saved = std::fs::read_to_string(&side).expect("sidecar");
                let lines: Vec<serde_json::Value> = saved
                    .lines()
                    .map(|l| serde_json::from_str(l).expect("JSON row"))
                    .collect();
                assert_eq!(lines.len() as u64, torn.rows);
                assert_eq!(done.cut_rows, torn.rows);
                assert_eq!(lines[0]["seq"], torn.seq);
                assert_eq!(lines[0]["session_id"], id.as_str());
                for key in [
                    "type",
                    "time",
                    "data",
                    "source_event_seqs",
                    "surface_op",
                    "ignorable",
                ] {
                    assert!(lines[0].get(key).is_some(), "{key} in {saved}");
                }
                // The source file's row, column for column.
                assert_eq!(lines[0]["ignorable"], 0);
                assert_eq!(lines[0]["type"], "tool-call-chunks");
            } else {
                assert_eq!(done.sidecar, None);
            }
            // Idempotent: a second plan is empty and nothing is opened for writing.
            let again = repair_plan(&path, &id);
            assert!(again.is_noop(), "{db} {id}: {again:?}");
            let bytes = std::fs::read(&path).expect("read");
            assert_eq!(
                write::apply(&path, &again, Options::default()).expect("noop"),
                write::Written::default()
            );
            assert_eq!(std::fs::read(&path).expect("read"), bytes);
            assert_eq!(revision(&path, &id), before.revision.expect("revision") + 1);
        }
        assert_eq!(sidecars, usize::from(db == "torn-packed-tail.db"));
    }
}

/// A plan that compacts the first compactable range of `id`'s surface (the existing planner).
fn compact_plan(path: &Path, id: &str, summary: &str) -> (Plan, Vec<String>) {
    let (log, end) = read_log(path, id);
    let file = tempfile::NamedTempFile::new().expect("temp");
    std::fs::write(file.path(), &log).expect("write");
    let mut base = Vec::new();
    let s = scan(&log[..], None, &ScanOptions::default(), &mut base, &mut ()).expect("scan");
    let seqs = s.state.as_ref().expect("state").surface.seqs();
    for i in 1..seqs.len() {
        for j in i..seqs.len().min(i + 4) {
            let req = Request {
                start: seqs[i],
                end: seqs[j],
                summary: summary.into(),
            };
            let mut lookout = Lookout::new(&req);
            let s = scan(
                &log[..],
                None,
                &ScanOptions::default(),
                &mut Vec::new(),
                &mut lookout,
            )
            .expect("scan");
            let minted = Minted {
                compaction_id: "11111111-2222-4333-8444-555555555555".into(),
                message_id: "66666666-7777-4888-9999-aaaaaaaaaaaa".into(),
                time: 1_790_000_000_000,
            };
            let mut deriver = Deriver::open(file.path()).expect("deriver");
            if let Ok(p) = compact::plan(&s, &lookout, &req, minted, &mut deriver) {
                return (
                    Plan {
                        snapshot: end.snapshot.clone(),
                        cut: false,
                        append: p.lines.clone(),
                    },
                    p.lines,
                );
            }
        }
    }
    panic!("{id}: nothing compactable");
}

/// A logical line as the SQLite reader rebuilds it (S4.4: `sourceEventSeqs` before
/// `surfaceOp`, then `ignorable`).
fn in_sqlite_order(line: &str) -> String {
    let e = store::events_of_line(line);
    assert_eq!(e.len(), 1);
    e[0].line()
}

#[test]
fn compaction_inserts_its_bracket_as_scalar_rows_with_varint_sources() {
    let (_dir, path) = copy_of("open-turn.repaired.db");
    let id = "open-before-turn-end";
    let summary = format!("summary {}", "of the earlier span ".repeat(300));
    let (plan, lines) = compact_plan(&path, id, &summary);
    let (before, _) = read_log(&path, id);
    write::apply(&path, &plan, Options::default()).expect("compact");
    let (after, end) = read_log(&path, id);
    assert!(end.findings.is_empty());
    let mut want = String::from_utf8(before).expect("UTF-8");
    for l in &lines {
        want.push_str(&in_sqlite_order(l));
        want.push('\n');
    }
    assert_eq!(String::from_utf8_lossy(&after), want);
    let (st, findings) = common::scan_text(&want);
    assert_eq!(st.status(), Status::Valid, "{findings:?}");
    // The checkpoint's non-monotonic list is one varint BLOB with negative ZigZag deltas;
    // the long summary is a zstd frame.
    let first = plan.snapshot.last_seq.expect("events") as i64 + 1;
    let stored = rows(&path, id, first);
    assert_eq!(stored.len(), 4);
    assert_eq!(
        stored[1].3, "blob",
        "the summary data ≥ 4096 bytes is compressed"
    );
    let sources = stored[2].5.clone().expect("checkpoint sources");
    let seqs: Vec<u64> =
        serde_json::from_str::<serde_json::Value>(&lines[2]).expect("line")["sourceEventSeqs"]
            .as_array()
            .expect("list")
            .iter()
            .map(|v| v.as_u64().expect("seq"))
            .collect();
    let mut enc = Vec::new();
    dshs::log::sqlite::encode_sources(&seqs, &mut enc);
    assert_eq!(
        sources,
        enc.iter().map(|b| format!("{b:02X}")).collect::<String>()
    );
    assert!(seqs[2] < seqs[1], "a negative delta was needed");
    assert!(
        stored.iter().all(|r| r.7.is_none()),
        "scalar rows, not ignorable"
    );
}

#[test]
fn another_open_connection_makes_repair_and_compact_refuse_untouched() {
    let (dir, path) = copy_of("torn-packed-tail.db");
    let id = "open-mid-tool-call-stream";
    let plan = repair_plan(&path, id);
    let holder = Connection::open(&path).expect("open");
    holder
        .query_row("SELECT count(*) FROM events", [], |r| r.get::<_, i64>(0))
        .expect("an idle reader");
    let bytes = std::fs::read(&path).expect("read");
    let e = write::apply(&path, &plan, Options::default()).expect_err("refused");
    assert!(matches!(e, WriteError::LiveOwner { .. }), "{e}");
    assert!(e.is_refusal());
    assert!(
        e.to_string()
            .contains("another process has the session database"),
        "{e}"
    );
    assert_eq!(std::fs::read(&path).expect("read"), bytes);
    assert!(
        !dir.path().join("torn-packed-tail.db.dshs-cut-1").exists(),
        "no sidecar either"
    );

    let (cplan, _) = compact_plan(
        &fixtures().join("db/open-turn.repaired.db"),
        "open-before-turn-end",
        "s",
    );
    let (_d2, p2) = copy_of("open-turn.repaired.db");
    let holder2 = Connection::open(&p2).expect("open");
    holder2
        .query_row("SELECT count(*) FROM sessions", [], |r| r.get::<_, i64>(0))
        .expect("query");
    let bytes2 = std::fs::read(&p2).expect("read");
    let e = write::apply(&p2, &cplan, Options::default()).expect_err("refused");
    assert!(matches!(e, WriteError::LiveOwner { .. }), "{e}");
    assert_eq!(std::fs::read(&p2).expect("read"), bytes2);
    drop((holder, holder2));
    // Once the other connection is gone the same plan goes through.
    write::apply(&path, &plan, Options::default()).expect("repair");
}

#[test]
fn a_rollback_journal_store_is_written_with_a_warning_instead_of_the_probe() {
    let (_dir, path) = copy_of("torn-packed-tail.db");
    Connection::open(&path)
        .expect("open")
        .pragma_update(None, "journal_mode", "DELETE")
        .expect("mode");
    let plan = repair_plan(&path, "open-mid-tool-call-stream");
    let done = write::apply(&path, &plan, Options::default()).expect("repair");
    assert_eq!(done.warnings.len(), 1);
    assert!(
        done.warnings[0].contains("delete journal mode"),
        "{:?}",
        done.warnings
    );
    let c = Connection::open(&path).expect("open");
    let mode: String = c
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .expect("mode");
    assert_eq!(mode, "delete", "the journal mode is kept");
}

#[test]
fn a_store_changed_since_planning_is_refused_with_nothing_written() {
    let id = "open-mid-tool-call-stream";
    let changes = [
        ("UPDATE sessions SET revision = revision + 1", "revision"),
        (
            "UPDATE sessions SET incarnation = '9cd7919e-ac77-44f7-b3fb-ced90fd8a49f'",
            "incarnation",
        ),
        // A foreign writer that did not bump the revision: the tail differs.
        ("DELETE FROM events WHERE seq = 45", "torn tail"),
    ];
    for (sql, says) in changes {
        let (_dir, path) = copy_of("torn-packed-tail.db");
        let plan = repair_plan(&path, id);
        Connection::open(&path)
            .expect("open")
            .execute_batch(sql)
            .expect(sql);
        let bytes = std::fs::read(&path).expect("read");
        let e = write::apply(&path, &plan, Options::default()).expect_err(sql);
        assert!(
            matches!(e, WriteError::Changed { .. }) && e.is_refusal(),
            "{sql}: {e}"
        );
        assert!(
            e.to_string().contains(says)
                && e.to_string().contains("changed while dshs worked on it")
                && !e.to_string().contains("Some(")
                && !e.to_string().contains("None"),
            "{sql}: {e}"
        );
        assert_eq!(std::fs::read(&path).expect("read"), bytes, "{sql}");
    }
    // New events while a torn tail stays would land after rows the reader drops.
    let (_dir, path) = copy_of("torn-packed-tail.db");
    let mut plan = repair_plan(&path, id);
    plan.cut = false;
    let e = write::apply(&path, &plan, Options::default()).expect_err("torn tail");
    assert!(matches!(e, WriteError::TornTail { seq: 45, .. }), "{e}");
    assert_eq!(e.class(), dshs::log::sqlite::Class::Invalid);
    // Events that do not continue the committed seqs are refused before anything opens.
    let (_dir, path) = copy_of("torn-packed-tail.db");
    let mut plan = repair_plan(&path, id);
    plan.append[0] = plan.append[0].replace("\"seq\":45", "\"seq\":46");
    assert!(matches!(
        write::apply(&path, &plan, Options::default()),
        Err(WriteError::BadEvent { .. })
    ));
}

#[test]
fn a_schema_15_store_is_written_only_when_asked_in_json_text() {
    let (_dir, path) = copy_of("schema15.db");
    let id = "open-after-first-tool-call";
    let plan = repair_plan(&path, id);
    assert!(!plan.append.is_empty());
    let bytes = std::fs::read(&path).expect("read");
    let e = write::apply(&path, &plan, Options::default()).expect_err("old schema");
    assert!(
        matches!(e, WriteError::OldSchema { .. }) && e.is_refusal(),
        "{e}"
    );
    assert_eq!(std::fs::read(&path).expect("read"), bytes);
    let opts = Options {
        allow_old_schema: true,
        ..Options::default()
    };
    write::apply(&path, &plan, opts).expect("allowed");
    let (log, end) = read_log(&path, id);
    assert!(end.findings.is_empty());
    let (st, _) = common::scan_text(std::str::from_utf8(&log).expect("UTF-8"));
    assert!(!st.open_turn() && st.status() == Status::Valid);
    let c = Connection::open(&path).expect("open");
    let (ty, op): (String, Option<String>) = c
        .query_row(
            "SELECT typeof(data), surface_op FROM events WHERE session_id = ?1 AND type = 'tool/result' ORDER BY seq DESC",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("closer");
    assert_eq!(ty, "text");
    assert_eq!(op.as_deref(), Some("\"append\""));
}

#[test]
fn a_repaired_copy_is_made_with_the_backup_api_and_never_overwrites() {
    let (dir, path) = copy_of("torn-packed-tail.db");
    let id = "open-mid-tool-call-stream";
    let original = std::fs::read(&path).expect("read");
    let out = dir.path().join("copy.db");
    write::backup_copy(&path, &out).expect("copy");
    let plan = repair_plan(&path, id);
    write::apply(&out, &plan, Options::default()).expect("repair the copy");
    assert_eq!(
        std::fs::read(&path).expect("read"),
        original,
        "the source is untouched"
    );
    let (log, _) = read_log(&out, id);
    let want =
        std::fs::read(fixtures().join("expected/torn-packed-tail.repaired/0.jsonl")).expect("log");
    assert_eq!(log, want);
    assert!(matches!(
        write::backup_copy(&path, &out),
        Err(WriteError::OutputExists { .. })
    ));
}

// ---------------------------------------------------------------------------------------
// Crash consistency: a child process repairs, killed at each point of its transaction
// ---------------------------------------------------------------------------------------

const CHILD_DB: &str = "DSHS_SQLITE_CRASH_DB";
const CHILD_FAULT: &str = "DSHS_SQLITE_CRASH_FAULT";

/// The child: repair one session of the database named by the environment (not a test on
/// its own: it returns at once when run by the harness).
#[test]
fn crash_child() {
    let Ok(db) = std::env::var(CHILD_DB) else {
        return;
    };
    let fault = std::env::var(CHILD_FAULT)
        .ok()
        .and_then(|f| Fault::parse(&f))
        .unwrap_or_default();
    let plan = repair_plan(Path::new(&db), "open-mid-tool-call-stream");
    let _ = write::apply(
        Path::new(&db),
        &plan,
        Options {
            fault,
            ..Options::default()
        },
    );
}

fn run_child(db: &Path, fault: Option<&str>, fsize: Option<u64>) -> std::process::ExitStatus {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_DB, db)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if let Some(f) = fault {
        cmd.env(CHILD_FAULT, f);
    }
    if let Some(limit) = fsize {
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd.status().expect("run the child")
}

/// After an interruption: the session is exactly as before or exactly repaired, the
/// revision says which, and a second (uninterrupted) run ends repaired.
fn check_after_crash(path: &Path, what: &str, original: &[u8], rev: i64) -> bool {
    let id = "open-mid-tool-call-stream";
    let repaired =
        std::fs::read(fixtures().join("expected/torn-packed-tail.repaired/0.jsonl")).expect("log");
    let (log, end) = read_log(path, id);
    let untouched = log == original;
    assert!(
        untouched || log == repaired,
        "{what}: neither untouched nor repaired"
    );
    assert_eq!(
        end.snapshot.revision,
        Some(if untouched { rev } else { rev + 1 }),
        "{what}"
    );
    let plan = repair_plan(path, id);
    write::apply(path, &plan, Options::default()).unwrap_or_else(|e| panic!("{what}: rerun: {e}"));
    assert_eq!(read_log(path, id).0, repaired, "{what}: rerun");
    untouched
}

#[test]
fn a_repair_killed_at_any_point_leaves_the_store_untouched_or_repaired() {
    let id = "open-mid-tool-call-stream";
    let (original, end) = read_log(&fixtures().join("db/torn-packed-tail.db"), id);
    let rev = end.snapshot.revision.expect("revision");
    let mut outcomes = Vec::new();
    for point in Point::ALL {
        let (_dir, path) = copy_of("torn-packed-tail.db");
        let status = run_child(&path, Some(&format!("kill:{}", point.name())), None);
        assert_eq!(
            status.signal(),
            Some(libc::SIGABRT),
            "{}: {status:?}",
            point.name()
        );
        outcomes.push((
            point.name(),
            check_after_crash(&path, point.name(), &original, rev),
        ));
    }
    // Killed before COMMIT: untouched; after: repaired.
    for (name, untouched) in &outcomes {
        assert_eq!(*untouched, *name != "committed", "{name}");
    }
    // Killed by the kernel at the write that passes N bytes of any file (sidecar, journal,
    // WAL): every byte of the transaction's writes is a crash point.
    let mut killed = 0;
    for n in (0..48 * 1024).step_by(1536) {
        let (_dir, path) = copy_of("torn-packed-tail.db");
        let status = run_child(&path, None, Some(n));
        if status.signal() == Some(libc::SIGXFSZ) {
            killed += 1;
        }
        check_after_crash(&path, &format!("RLIMIT_FSIZE {n}"), &original, rev);
    }
    assert!(
        killed > 5,
        "only {killed} runs were cut by the file size limit"
    );
}
