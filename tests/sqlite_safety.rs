//! What dshs does to a SQLite store that is not quiet (issue 37): another process commits and
//! checkpoints while dshs reads; a write of dshs's own is killed and leaves its journal; the
//! store holds triggers that would run inside dshs's write; and the messages of the writes
//! that fail.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::{dshs, json_lines};
use rusqlite::Connection;

fn db(rel: &str) -> PathBuf {
    common::testdata("sqlite").join("db").join(rel)
}

/// A fixture database copied into a temporary directory (the originals stay untouched).
fn copy_of(rel: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let to = dir.path().join(Path::new(rel).file_name().expect("name"));
    std::fs::copy(db(rel), &to).expect("copy");
    (dir, to)
}

fn arg(p: &Path) -> String {
    p.display().to_string()
}

struct Run {
    code: i32,
    stdout: Vec<u8>,
    stderr: String,
}

fn run(args: &[&str]) -> Run {
    let out = dshs().args(args).output().expect("run dshs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn integrity(path: &Path) -> String {
    let c = Connection::open(path).expect("open");
    c.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check")
}

// ---------------------------------------------------------------------------------------
// Item 3: reads that race a writer's commits and checkpoints
// ---------------------------------------------------------------------------------------

/// The session the writer copies (41 physical rows, packed ones among them).
const SOURCE: &str = "ada8966c-9fa3-441b-8721-37ff1e795e6a";

/// Another process's writes, round after round until `stop`: open the store, copy
/// [`SOURCE`] under a new id in one transaction, delete the copy before last in another,
/// checkpoint, close (the last close deletes the `-wal`, so a reader often finds none).
fn churn(path: PathBuf, stop: Arc<AtomicBool>, rounds: Arc<AtomicU64>) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let mut c = Connection::open(&path).expect("writer open");
        c.busy_timeout(std::time::Duration::from_secs(5))
            .expect("busy");
        c.pragma_update(None, "foreign_keys", "ON").expect("fk");
        let id = format!("copy-{n}");
        let tx = c.transaction().expect("begin");
        tx.execute(
            "INSERT INTO sessions SELECT ?1, version, created_at, cwd, parent_session, seed_length, \
             origin, delegation_depth, agent_preset, incarnation, 0 FROM sessions WHERE id = ?2",
            [&id, SOURCE],
        )
        .expect("copy row");
        tx.execute(
            "INSERT INTO events SELECT ?1, seq, type, time, data, source_event_seqs, surface_op, \
             ignorable FROM events WHERE session_id = ?2",
            [&id, SOURCE],
        )
        .expect("copy events");
        tx.commit().expect("commit");
        if n >= 2 {
            let old = format!("copy-{}", n - 2);
            let tx = c.transaction().expect("begin");
            tx.execute("DELETE FROM sessions WHERE id = ?1", [&old])
                .expect("delete");
            tx.commit().expect("commit");
        }
        let _ = c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        drop(c);
        n += 1;
        rounds.store(n, Ordering::Relaxed);
    }
}

#[test]
fn reads_and_copies_racing_a_writers_commits_and_checkpoints_see_one_committed_state() {
    let (dir, path) = copy_of("many-sessions.db");
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let store = arg(&path);
    let one = format!("{store}#{SOURCE}");
    // What an undisturbed read says of each session (a copy says what its source says).
    let verdicts = |v: &Run| -> std::collections::BTreeMap<String, (String, Vec<String>)> {
        let mut out = std::collections::BTreeMap::new();
        for l in json_lines(&v.stdout) {
            let file = l["file"].as_str().expect("file");
            let id = file.rsplit_once('#').expect("STORE#ID").1;
            let id = if id.starts_with("copy-") { SOURCE } else { id };
            let e: &mut (String, Vec<String>) = out.entry(id.to_owned()).or_default();
            match l["type"].as_str() {
                Some("summary") => e.0 = l["status"].as_str().expect("status").to_owned(),
                _ => e.1.push(l["code"].as_str().expect("code").to_owned()),
            }
        }
        for e in out.values_mut() {
            e.1.sort();
            e.1.dedup();
        }
        out
    };
    let statuses = |l: &Run| -> std::collections::BTreeMap<String, String> {
        json_lines(&l.stdout)
            .iter()
            .map(|r| {
                let id = r["id"].as_str().expect("id");
                let id = if id.starts_with("copy-") { SOURCE } else { id };
                (
                    id.to_owned(),
                    r["status"].as_str().expect("status").to_owned(),
                )
            })
            .collect()
    };
    let quiet_v = run(&["validate", "--format", "json", &store]);
    let quiet_l = run(&["ls", "--format", "json", &store]);
    let (want_v, want_l) = (verdicts(&quiet_v), statuses(&quiet_l));
    assert!(want_v.len() > 9, "{want_v:?}");
    let writer = {
        let (path, stop, rounds) = (path.clone(), stop.clone(), rounds.clone());
        std::thread::spawn(move || churn(path, stop, rounds))
    };
    // At least 12 rounds of reads, and on until the writer has committed 25 rounds: how many
    // fit in 12 depends on the machine, and the race is the point, not the count.
    let started = std::time::Instant::now();
    let mut copies = 0;
    let mut round = 0;
    while round < 12 || rounds.load(Ordering::Relaxed) <= 24 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(240),
            "the writer ran only {} rounds in {round} rounds of reads",
            rounds.load(Ordering::Relaxed)
        );
        let v = run(&["validate", "--format", "json", &store]);
        assert_eq!(
            v.code, quiet_v.code,
            "round {round}: validate: {}",
            v.stderr
        );
        assert_eq!(verdicts(&v), want_v, "round {round}: validate");
        let l = run(&["ls", "--format", "json", &store]);
        assert_eq!(l.code, quiet_l.code, "round {round}: ls: {}", l.stderr);
        assert_eq!(statuses(&l), want_l, "round {round}: ls");

        let out = dir.path().join(format!("copy-{round}.db"));
        let r = run(&["repair", "--output", &arg(&out), &one]);
        assert_eq!(r.code, 0, "round {round}: repair --output: {}", r.stderr);
        assert_eq!(integrity(&out), "ok", "round {round}: the copy");
        let v = run(&["validate", "-q", &format!("{}#{SOURCE}", arg(&out))]);
        assert_eq!(v.code, 0, "round {round}: the copy validates: {}", v.stderr);
        copies += 1;
        round += 1;
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
    assert_eq!(copies, round);
    assert!(rounds.load(Ordering::Relaxed) > 24);
}

// ---------------------------------------------------------------------------------------
// Item 4: a write of dshs's own killed with -9, in both journal modes
// ---------------------------------------------------------------------------------------

const TORN: &str = "open-mid-tool-call-stream";

/// `torn-packed-tail.db` (one session with a torn tail and an open turn) in `mode`.
fn torn_store(mode: &str) -> (tempfile::TempDir, PathBuf) {
    let (dir, path) = copy_of("torn-packed-tail.db");
    let c = Connection::open(&path).expect("open");
    let got: String = c
        .query_row(&format!("PRAGMA journal_mode = {mode}"), [], |r| r.get(0))
        .expect("journal mode");
    assert_eq!(got, mode);
    drop(c);
    (dir, path)
}

/// `validate --format json` of the store's session, its paths made `STORE`.
fn verdict(path: &Path) -> (i32, String) {
    let r = run(&[
        "validate",
        "--format",
        "json",
        &format!("{}#{TORN}", arg(path)),
    ]);
    (
        r.code,
        String::from_utf8_lossy(&r.stdout).replace(&arg(path), "STORE"),
    )
}

/// Run `dshs repair` on the store, paused at `point` of its transaction, and kill it with
/// SIGKILL there.
fn repair_killed_at(path: &Path, point: &str) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("dshs"))
        .args(["repair", &format!("{}#{TORN}", arg(path))])
        .env("DSHS_TEST_FAULT", format!("pause:{point}"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut err = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut said = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).expect("stderr") == 0 {
            break;
        }
        said.push_str(&line);
        if line.starts_with("dshs-test: paused at") {
            break;
        }
    }
    assert!(said.contains("paused at"), "{point}: {said}");
    child.kill().expect("kill -9");
    let status = child.wait().expect("wait");
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{point}");
}

/// Run `dshs repair` on the store with its file size limit at `limit` bytes: the kernel
/// kills it (SIGXFSZ, no cleanup, like -9) at the write that passes it in any file (sidecar,
/// journal, WAL, database).
fn repair_with_fsize(path: &Path, limit: u64) -> std::process::ExitStatus {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("dshs"));
    cmd.args(["repair", &format!("{}#{TORN}", arg(path))])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
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
    cmd.status().expect("run dshs")
}

/// Whether `<db>-journal` is hot: it exists and its header is not zeroed (SQLite zeroes the
/// magic until the journal is synced, so a journal of a write killed before its commit
/// began is not hot).
fn hot_journal(path: &Path) -> bool {
    std::fs::read(path.with_extension("db-journal"))
        .is_ok_and(|j| j.first().is_some_and(|&b| b != 0))
}

#[test]
fn after_a_repair_killed_anywhere_reads_give_the_committed_state_and_repair_goes_on() {
    for mode in ["wal", "delete"] {
        let (_d, untouched) = torn_store(mode);
        let original = verdict(&untouched);
        let (_d, done) = torn_store(mode);
        let r = run(&["repair", &format!("{}#{TORN}", arg(&done))]);
        assert_eq!(r.code, 0, "{mode}: {}", r.stderr);
        let repaired = verdict(&done);
        assert_ne!(original, repaired);
        let mut hot = 0;
        let mut kills: Vec<(String, Option<bool>)> = [
            "checked",
            "sidecar-synced",
            "deleted",
            "inserted",
            "bumped",
            "committed",
        ]
        .into_iter()
        .map(|p| (p.to_owned(), Some(p == "committed")))
        .collect();
        kills.extend(
            (0..36 * 1024)
                .step_by(2048)
                .map(|n| (format!("fsize {n}"), None)),
        );
        for (kill, committed) in kills {
            let what = format!("{mode}, killed at {kill}");
            let (_d, path) = torn_store(mode);
            match kill.strip_prefix("fsize ") {
                Some(n) => {
                    repair_with_fsize(&path, n.parse().expect("limit"));
                }
                None => repair_killed_at(&path, &kill),
            }
            let was_hot = hot_journal(&path);
            hot += u32::from(was_hot);
            // A read-only command gives the committed state (rolling a hot journal back,
            // said in a note).
            let r = run(&["validate", &format!("{}#{TORN}", arg(&path))]);
            assert_eq!(
                was_hot,
                r.stderr.contains("hot journal") && r.stderr.contains("rolled the database back"),
                "{what}: {}",
                r.stderr
            );
            let got = verdict(&path);
            assert!(
                got == original || got == repaired,
                "{what}: validate: {got:?}"
            );
            if let Some(c) = committed {
                assert_eq!(got == repaired, c, "{what}");
            }
            // repair rolls back what is left and goes on.
            let r = run(&["repair", &format!("{}#{TORN}", arg(&path))]);
            assert_eq!(r.code, 0, "{what}: repair: {}", r.stderr);
            assert_eq!(verdict(&path), repaired, "{what}: repaired");
            assert_eq!(integrity(&path), "ok", "{what}");
        }
        if mode == "delete" {
            assert!(hot > 2, "{mode}: only {hot} kills left a hot journal");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Item 1: no SQL of the store's own runs inside dshs's write
// ---------------------------------------------------------------------------------------

/// Every row of every session, as stored (to see that nothing changed).
fn all_rows(path: &Path) -> Vec<(String, i64, String)> {
    let c = Connection::open(path).expect("open");
    let mut st = c
        .prepare(
            "SELECT session_id, seq, type FROM events UNION ALL \
             SELECT id, revision, 'sessions' FROM sessions ORDER BY 1, 3, 2",
        )
        .expect("prepare");
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

/// (fixture, session repair would write to, the extra argument its schema needs).
const WRITABLE: [(&str, &str, Option<&str>); 2] = [
    (
        "schema15.db",
        "open-after-first-tool-call",
        Some("--allow-old-schema"),
    ),
    ("torn-packed-tail.db", TORN, None),
];

#[test]
fn a_store_with_any_trigger_is_never_written_on_either_schema() {
    for (fixture, id, extra) in WRITABLE {
        for table in ["events", "sessions"] {
            for when in ["BEFORE", "AFTER"] {
                for event in ["INSERT", "UPDATE", "DELETE"] {
                    let what = format!("{fixture}: {when} {event} ON {table}");
                    let (_d, path) = copy_of(fixture);
                    let name = format!("t_{}_{}", when.to_lowercase(), event.to_lowercase());
                    // What the trial's trigger did: delete every other session's rows.
                    Connection::open(&path)
                        .expect("open")
                        .execute_batch(&format!(
                            "CREATE TRIGGER {name} {when} {event} ON {table} BEGIN \
                             DELETE FROM events WHERE session_id <> '{id}'; END;"
                        ))
                        .expect("trigger");
                    let before = all_rows(&path);
                    let target = format!("{}#{id}", arg(&path));
                    let mut args = vec!["repair", target.as_str()];
                    args.extend(extra);
                    let r = run(&args);
                    assert_eq!(r.code, 3, "{what}: {}", r.stderr);
                    assert!(
                        r.stderr.contains(&format!("\"{name}\" on \"{table}\"")),
                        "{what}: {}",
                        r.stderr
                    );
                    assert_eq!(all_rows(&path), before, "{what}");
                    // Nor a copy: it holds the trigger too.
                    let out = path.with_file_name("out.db");
                    let mut args = vec!["repair", "--output", out.to_str().expect("utf-8")];
                    args.push(target.as_str());
                    args.extend(extra);
                    let r = run(&args);
                    assert_eq!(r.code, 3, "{what}: --output: {}", r.stderr);
                    assert!(!out.exists(), "{what}: --output left a copy");
                }
            }
        }
    }
}

#[test]
fn a_trigger_made_between_the_plan_and_the_write_is_seen_under_the_lock() {
    use std::io::{BufRead, Write};
    for (fixture, id, extra) in WRITABLE {
        let (_d, path) = copy_of(fixture);
        let target = format!("{}#{id}", arg(&path));
        let mut args = vec!["repair", target.as_str()];
        args.extend(extra);
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("dshs"))
            .args(&args)
            .env("DSHS_TEST_FAULT", "pause:planned")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut err = std::io::BufReader::new(child.stderr.take().expect("stderr"));
        let mut line = String::new();
        while !line.starts_with("dshs-test: paused at planned") {
            line.clear();
            assert!(err.read_line(&mut line).expect("stderr") > 0, "{fixture}");
        }
        Connection::open(&path)
            .expect("open")
            .execute_batch(&format!(
                "CREATE TRIGGER late AFTER INSERT ON events BEGIN \
                 DELETE FROM events WHERE session_id <> '{id}'; END;"
            ))
            .expect("trigger");
        let before = all_rows(&path);
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(b"\n")
            .expect("go on");
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut err, &mut rest).expect("stderr");
        let status = child.wait().expect("wait");
        assert_eq!(status.code(), Some(3), "{fixture}: {rest}");
        assert!(rest.contains("\"late\" on \"events\""), "{fixture}: {rest}");
        assert_eq!(all_rows(&path), before, "{fixture}");
    }
}

// ---------------------------------------------------------------------------------------
// Item 16: what a failed write says is what happened
// ---------------------------------------------------------------------------------------

/// The files of a directory whose names hold `.dshs-cut-`.
fn sidecars(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().contains(".dshs-cut-"))
        .collect()
}

#[test]
fn a_write_that_fails_after_its_sidecar_leaves_no_sidecar_behind() {
    // A schema-15 store (extra objects allowed) whose torn row is pinned by another table's
    // foreign key: the DELETE fails once the sidecar is saved.
    let (dir, path) = copy_of("schema15.db");
    let id = "open-after-first-tool-call";
    Connection::open(&path)
        .expect("open")
        .execute_batch(&format!(
            "INSERT INTO events (session_id, seq, type, time, data) VALUES ('{id}', 19, 'x', 1, 'not json'); \
             CREATE TABLE pin (s TEXT, q INTEGER, FOREIGN KEY (s, q) REFERENCES events (session_id, seq) ON DELETE RESTRICT); \
             INSERT INTO pin VALUES ('{id}', 19);"
        ))
        .expect("set up");
    let before = all_rows(&path);
    let r = run(&[
        "repair",
        "--allow-old-schema",
        &format!("{}#{id}", arg(&path)),
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("FOREIGN KEY") && r.stderr.contains("nothing was written"),
        "{}",
        r.stderr
    );
    assert_eq!(sidecars(dir.path()), Vec::<PathBuf>::new(), "{}", r.stderr);
    assert_eq!(all_rows(&path), before);
}

#[test]
fn side_files_that_cannot_be_made_are_named_not_unable_to_open_the_database() {
    for side in ["-wal", "-shm"] {
        let (dir, path) = copy_of("torn-packed-tail.db");
        std::fs::create_dir(dir.path().join(format!("torn-packed-tail.db{side}"))).expect("mkdir");
        let r = run(&["repair", &format!("{}#{TORN}", arg(&path))]);
        assert_eq!(r.code, 2, "{side}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("cannot create, open or write its side files")
                && r.stderr.contains(&format!("torn-packed-tail.db{side}"))
                && r.stderr.contains("nothing was written"),
            "{side}: {}",
            r.stderr
        );
        assert_eq!(sidecars(dir.path()), Vec::<PathBuf>::new(), "{side}");
    }
}

#[test]
fn an_output_in_a_missing_directory_says_so_and_no_transaction() {
    let (dir, path) = copy_of("torn-packed-tail.db");
    let out = dir.path().join("no-such-dir").join("out.db");
    let r = run(&[
        "repair",
        "--output",
        &arg(&out),
        &format!("{}#{TORN}", arg(&path)),
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("cannot create")
            && r.stderr.contains("No such file or directory")
            && !r.stderr.contains("transaction"),
        "{}",
        r.stderr
    );
}

/// Fill the file system of `path` with it until `room` bytes are left (at most).
fn fill_but(path: &Path, room: u64) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).expect("fill");
    let block = [0u8; 1024];
    let mut len = 0u64;
    while f.write_all(&block).is_ok() {
        len += 1024;
    }
    f.set_len(len.saturating_sub(room)).expect("room");
}

/// A full disk at every point of a repair (a small tmpfs filled to a different level each
/// run): each run repairs, or fails saying the disk is full with nothing written and no
/// sidecar left — never "no transaction is active". Needs a tmpfs mount (root); says so and
/// returns where it cannot make one.
#[test]
fn a_full_disk_anywhere_in_a_repair_is_said_as_such() {
    let mnt = tempfile::tempdir().expect("tempdir");
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=100k", "tmpfs"])
        .arg(mnt.path())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    }
    /// Unmounts the tmpfs however the test ends.
    struct Mounted<'a>(&'a Path);
    impl Drop for Mounted<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).status();
        }
    }
    let _mounted = Mounted(mnt.path());
    let (_d, reference) = torn_store("wal");
    let original = verdict(&reference);
    let mut failed = 0;
    for mode in ["wal", "delete"] {
        for room in (0..64).step_by(2) {
            for e in std::fs::read_dir(mnt.path()).expect("dir") {
                std::fs::remove_file(e.expect("entry").path()).expect("clean");
            }
            let path = mnt.path().join("torn-packed-tail.db");
            std::fs::copy(db("torn-packed-tail.db"), &path).expect("copy");
            let c = Connection::open(&path).expect("open");
            let _: String = c
                .query_row(&format!("PRAGMA journal_mode = {mode}"), [], |r| r.get(0))
                .expect("mode");
            drop(c);
            fill_but(&mnt.path().join("fill"), room * 1024);
            let r = run(&["repair", &format!("{}#{TORN}", arg(&path))]);
            let what = format!("{mode}, {room} KiB left");
            assert!(
                !r.stderr.contains("no transaction is active"),
                "{what}: {}",
                r.stderr
            );
            if r.code != 0 {
                failed += 1;
                assert_eq!(r.code, 2, "{what}: {}", r.stderr);
                assert!(
                    r.stderr.contains("full")
                        || r.stderr.contains("No space left")
                        || r.stderr.contains("free space"),
                    "{what}: {}",
                    r.stderr
                );
                assert_eq!(sidecars(mnt.path()), Vec::<PathBuf>::new(), "{what}");
                std::fs::remove_file(mnt.path().join("fill")).expect("room");
                let (code, text) = verdict(&path);
                assert_eq!(
                    (code, text.replace(&arg(&path), "STORE")),
                    (original.0, original.1.replace(&arg(&reference), "STORE")),
                    "{what}: untouched"
                );
            }
        }
    }
    assert!(failed > 3, "only {failed} runs met the full disk");
}

#[test]
fn a_foreign_key_that_would_act_on_dshs_s_delete_is_refused_like_a_trigger() {
    // Another table's ON DELETE CASCADE onto events: dshs's cut of the torn row would delete
    // that table's rows in the same transaction.
    let (_dir, path) = copy_of("schema15.db");
    let id = "open-after-first-tool-call";
    Connection::open(&path)
        .expect("open")
        .execute_batch(&format!(
            "INSERT INTO events (session_id, seq, type, time, data) VALUES ('{id}', 19, 'x', 1, 'not json'); \
             CREATE TABLE notes (s TEXT, q INTEGER, FOREIGN KEY (s, q) REFERENCES events (session_id, seq) ON DELETE CASCADE); \
             INSERT INTO notes VALUES ('{id}', 19);"
        ))
        .expect("set up");
    let before = all_rows(&path);
    let r = run(&[
        "repair",
        "--allow-old-schema",
        &format!("{}#{id}", arg(&path)),
    ]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("\"notes\" → \"events\" ON DELETE CASCADE"),
        "{}",
        r.stderr
    );
    assert_eq!(all_rows(&path), before);
    let notes: i64 = Connection::open(&path)
        .expect("open")
        .query_row("SELECT count(*) FROM notes", [], |r| r.get(0))
        .expect("count");
    assert_eq!(notes, 1);
}
