//! `--follow`: scripted writers append to a log while `validate -f` and `show -f` follow it;
//! each test then stops them with Ctrl-C (SIGINT) and checks that following the log and
//! reading it whole afterwards give the same findings and the same events.
#![cfg(unix)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The longest any wait in these tests lasts (generous: CI runs them on 2 busy cores).
const LIMIT: Duration = Duration::from_secs(20);

/// A pause between two writes of a scripted writer.
const PAUSE: Duration = Duration::from_millis(120);

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_dshs"))
}

/// A `dshs … -f` child; killed if a test ends without stopping it.
struct Follower {
    child: Child,
    out: Arc<Mutex<Vec<String>>>,
    err: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Follower {
    fn start(args: &[&str], path: &Path) -> Follower {
        let mut cmd = Command::new(bin());
        cmd.args(args)
            .arg(path)
            .env_remove("NO_COLOR")
            .env_remove("DSHS_KNOWN_TYPES")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("dshs starts");
        let out = Arc::new(Mutex::new(Vec::new()));
        let err = Arc::new(Mutex::new(String::new()));
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let o = Arc::clone(&out);
        let e = Arc::clone(&err);
        let readers = vec![
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    o.lock().unwrap().push(line);
                }
            }),
            std::thread::spawn(move || {
                let mut s = String::new();
                let mut r = BufReader::new(stderr);
                let mut buf = [0; 4096];
                while let Ok(n) = r.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                    e.lock().unwrap().clone_from(&s);
                }
            }),
        ];
        Follower {
            child,
            out,
            err,
            readers,
        }
    }

    fn lines(&self) -> Vec<String> {
        self.out.lock().unwrap().clone()
    }

    fn stderr(&self) -> String {
        self.err.lock().unwrap().clone()
    }

    /// Wait until `cond` holds for the lines printed so far (fails after [`LIMIT`]).
    fn wait_for(&self, what: &str, cond: impl Fn(&[String]) -> bool) {
        let start = Instant::now();
        while !cond(&self.lines()) {
            assert!(
                start.elapsed() < LIMIT,
                "timed out waiting for {what}; printed so far:\n{}\nstderr:\n{}",
                self.lines().join("\n"),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait_stderr(&self, what: &str) {
        let start = Instant::now();
        while !self.stderr().contains(what) {
            assert!(
                start.elapsed() < LIMIT,
                "timed out waiting for `{what}` on stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait until the follower has read `path` to its current end (its file offset, from
    /// /proc; elsewhere a pause): a follower that prints nothing yet is caught up before the
    /// file is cut or replaced.
    fn wait_read(&self, path: &Path) {
        let len = std::fs::metadata(path).expect("log").len();
        let fds = PathBuf::from(format!("/proc/{}/fd", self.child.id()));
        if !fds.exists() {
            std::thread::sleep(PAUSE * 4);
            return;
        }
        let start = Instant::now();
        let target = path.canonicalize().expect("log path");
        loop {
            let at = std::fs::read_dir(&fds)
                .into_iter()
                .flatten()
                .flatten()
                .find_map(|fd| {
                    (std::fs::read_link(fd.path()).ok()? == target).then(|| {
                        let info = format!(
                            "/proc/{}/fdinfo/{}",
                            self.child.id(),
                            fd.file_name().to_string_lossy()
                        );
                        std::fs::read_to_string(info)
                            .ok()?
                            .lines()
                            .find_map(|l| l.strip_prefix("pos:"))?
                            .trim()
                            .parse::<u64>()
                            .ok()
                    })?
                });
            if at == Some(len) {
                return;
            }
            assert!(
                start.elapsed() < LIMIT,
                "the follower never read {} to its end",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Ctrl-C, then its exit status and everything it printed.
    fn interrupt(mut self) -> (i32, Vec<String>, String) {
        let sent = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "SIGINT sent");
        let start = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s;
            }
            assert!(start.elapsed() < LIMIT, "dshs did not stop after Ctrl-C");
            std::thread::sleep(Duration::from_millis(20));
        };
        for r in self.readers.drain(..) {
            r.join().expect("reader");
        }
        (
            status.code().expect("exited, not killed"),
            self.lines(),
            self.stderr(),
        )
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A scripted writer: appends and flushes (each write is visible at once to readers).
struct Writer(std::fs::File);

impl Writer {
    fn create(path: &Path) -> Writer {
        Writer(std::fs::File::create(path).expect("log created"))
    }

    fn append(path: &Path) -> Writer {
        Writer(
            std::fs::OpenOptions::new()
                .append(true)
                .open(path)
                .expect("log opened"),
        )
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.write_all(bytes).expect("written");
        self.0.flush().expect("flushed");
    }
}

fn json(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

/// Findings (sorted: following prints them as found, a one-shot run in line order) and the
/// summary of `validate --format json` output.
fn findings_and_summary(lines: &[String]) -> (Vec<Value>, Option<Value>) {
    let mut findings = Vec::new();
    let mut summary = None;
    for v in json(lines) {
        match v["type"].as_str() {
            Some("finding") => findings.push(v),
            Some("summary") => summary = Some(v),
            other => panic!("unexpected record {other:?}"),
        }
    }
    findings.sort_by_key(|f| {
        (
            f["line"].as_u64(),
            f["byte"].as_u64(),
            f["code"].as_str().map(str::to_owned),
            f["message"].as_str().map(str::to_owned),
        )
    });
    (findings, summary)
}

/// What `show --format json` says of each row that does not depend on later events (a node
/// is marked shadowed only once a later replacement exists).
fn events(lines: &[String]) -> Vec<Value> {
    json(lines)
        .into_iter()
        .map(|mut v| {
            if let Some(o) = v.as_object_mut() {
                o.remove("shadowedBy");
                if o.get("surface").and_then(Value::as_str) == Some("shadowed") {
                    o.insert("surface".into(), "visible".into());
                }
            }
            v
        })
        .collect()
}

fn one_shot(args: &[&str], path: &Path) -> (i32, Vec<String>) {
    let out = Command::new(bin())
        .args(args)
        .arg(path)
        .env_remove("NO_COLOR")
        .env_remove("DSHS_KNOWN_TYPES")
        .output()
        .expect("dshs runs");
    let text = String::from_utf8_lossy(&out.stdout);
    (
        out.status.code().expect("exited"),
        text.lines().map(str::to_owned).collect(),
    )
}

const VALIDATE: &[&str] = &["validate", "--format", "json", "-f"];
const SHOW: &[&str] = &["show", "--format", "json", "-f"];

/// Both followers, started on `path`.
fn follow_both(path: &Path, extra: &[&str]) -> (Follower, Follower) {
    let v: Vec<&str> = VALIDATE.iter().chain(extra).copied().collect();
    let s: Vec<&str> = SHOW.iter().chain(extra).copied().collect();
    (Follower::start(&v, path), Follower::start(&s, path))
}

/// Stop both followers; check that what they printed is what one-shot runs over the final
/// file print. Returns the validate follower's stdout and stderr.
fn stop_and_compare(validate: Follower, show: Follower, path: &Path) -> (Vec<String>, String) {
    let (v_rc, v_out, v_err) = validate.interrupt();
    let (s_rc, s_out, _) = show.interrupt();
    let (once_rc, once) = one_shot(&["validate", "--format", "json"], path);
    assert_eq!(
        findings_and_summary(&v_out),
        findings_and_summary(&once),
        "validate -f and validate over the final file"
    );
    assert_eq!(v_rc, once_rc, "validate -f exits with the log's status");
    assert_eq!(s_rc, 0, "show -f exits 0 on Ctrl-C");
    let (_, once) = one_shot(&["show", "--format", "json"], path);
    assert_eq!(
        events(&s_out),
        events(&once),
        "show -f and show over the final file"
    );
    (v_out, v_err)
}

fn fixture(rel: &str) -> Vec<String> {
    std::fs::read_to_string(common::testdata(rel))
        .expect("fixture")
        .lines()
        .map(|l| format!("{l}\n"))
        .collect()
}

fn seqs_shown(lines: &[String]) -> Vec<u64> {
    json(lines)
        .iter()
        .filter_map(|v| v["seq"].as_u64())
        .collect()
}

#[test]
fn a_line_written_in_two_halves_is_pending_then_one_event_and_no_finding() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let lines = fixture("v3/nested-replace.jsonl");
    let mut w = Writer::create(&path);
    w.write(lines[..4].concat().as_bytes());
    let (validate, show) = follow_both(&path, &[]);
    show.wait_for("seqs 0..2", |l| seqs_shown(l) == [0, 1, 2]);
    for (round, line) in lines.iter().enumerate().skip(4) {
        let (a, b) = line.split_at(line.len() / 2);
        w.write(a.as_bytes());
        std::thread::sleep(PAUSE / 2);
        assert_eq!(
            seqs_shown(&show.lines()).len(),
            round - 1,
            "half a line is pending, not an event (round {round})"
        );
        w.write(b.as_bytes());
        show.wait_for("the completed line", |l| seqs_shown(l).len() == round);
    }
    assert!(validate.lines().is_empty(), "no finding while following");
    let (v_out, _) = stop_and_compare(validate, show, &path);
    assert_eq!(v_out.len(), 1, "only the summary: {v_out:?}");
}

#[test]
fn a_partial_last_line_becomes_a_torn_line_only_when_following_stops() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let lines = fixture("v3/nested-replace.jsonl");
    let mut w = Writer::create(&path);
    w.write(lines[..6].concat().as_bytes());
    let (validate, show) = follow_both(&path, &[]);
    show.wait_for("seqs 0..4", |l| seqs_shown(l).len() == 5);
    w.write(&lines[6].as_bytes()[..20]);
    std::thread::sleep(PAUSE);
    assert!(validate.lines().is_empty(), "a pending line is no finding");
    let (v_out, _) = stop_and_compare(validate, show, &path);
    let (findings, _) = findings_and_summary(&v_out);
    let codes: Vec<&str> = findings.iter().filter_map(|f| f["code"].as_str()).collect();
    assert!(codes.contains(&"torn-line"), "{codes:?}");
}

#[test]
fn a_zstd_frame_written_in_pieces_is_read_once_it_is_whole() {
    use dshs::log::input::zstd::encode_frame;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl.zstd");
    let lines = fixture("v3/nested-replace.jsonl");
    let mut w = Writer::create(&path);
    w.write(&encode_frame(lines[0].as_bytes()).unwrap());
    w.write(&encode_frame(lines[1..3].concat().as_bytes()).unwrap());
    let (validate, show) = follow_both(&path, &[]);
    show.wait_for("seqs 0..1", |l| seqs_shown(l) == [0, 1]);
    let mut shown = 2;
    for batch in lines[3..].chunks(3) {
        let frame = encode_frame(batch.concat().as_bytes()).unwrap();
        let (a, b) = frame.split_at(frame.len() - 5);
        w.write(a);
        std::thread::sleep(PAUSE / 2);
        assert_eq!(
            seqs_shown(&show.lines()).len(),
            shown,
            "a partial frame is pending"
        );
        w.write(b);
        shown += batch.len();
        show.wait_for("the whole frame", |l| seqs_shown(l).len() == shown);
    }
    assert!(validate.lines().is_empty(), "no finding while following");
    stop_and_compare(validate, show, &path);
}

#[test]
fn a_turn_end_after_a_bad_row_makes_it_committed_damage_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let lines = fixture("v3/nested-replace.jsonl");
    let mut w = Writer::create(&path);
    // Seqs 0..6, then a row DSH cannot parse: a crash tail, unless a turn end follows.
    w.write(lines[..8].concat().as_bytes());
    let (validate, show) = follow_both(&path, &[]);
    show.wait_for("seqs 0..6", |l| seqs_shown(l).len() == 7);
    w.write(b"{not json\n");
    w.write(lines[8].as_bytes());
    std::thread::sleep(PAUSE);
    assert!(
        validate.lines().is_empty(),
        "rows in doubt are held back, no finding yet: {:?}",
        validate.lines()
    );
    w.write(lines[9].as_bytes()); // turn/end
    validate.wait_for("the committed damage", |l| {
        l.iter().any(|l| l.contains("committed-unparsable"))
    });
    validate.wait_stderr("they are in the committed region");
    let (v_out, _) = stop_and_compare(validate, show, &path);
    assert!(v_out.iter().any(|l| l.contains("\"status\":\"invalid\"")));
}

#[test]
fn a_bad_row_with_no_turn_end_after_it_is_a_crash_tail_when_following_stops() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let lines = fixture("v3/nested-replace.jsonl");
    let mut w = Writer::create(&path);
    w.write(lines[..8].concat().as_bytes());
    let (validate, show) = follow_both(&path, &[]);
    show.wait_for("seqs 0..6", |l| seqs_shown(l).len() == 7);
    w.write(b"{not json\n");
    w.write(lines[8].as_bytes());
    std::thread::sleep(PAUSE);
    assert!(validate.lines().is_empty());
    let (v_out, _) = stop_and_compare(validate, show, &path);
    assert!(v_out.iter().any(|l| l.contains("crash-tail")), "{v_out:?}");
}

#[test]
fn a_replacement_is_printed_with_what_it_shadowed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let lines = fixture("v3/nested-replace.jsonl");
    let mut w = Writer::create(&path);
    w.write(lines[..12].concat().as_bytes());
    let (validate, show) = follow_both(&path, &[]);
    show.wait_for("seqs 0..10", |l| seqs_shown(l).len() == 11);
    w.write(lines[12].as_bytes()); // seq 11 replaces 3..4
    show.wait_for("the replacement", |l| seqs_shown(l).len() == 12);
    let last = json(&show.lines()).pop().unwrap();
    assert_eq!(last["replaces"]["shadowedSeqs"], serde_json::json!([3, 4]));
    for l in &lines[13..] {
        w.write(l.as_bytes());
    }
    show.wait_for("every event", |l| seqs_shown(l).len() == lines.len() - 1);
    stop_and_compare(validate, show, &path);
}

#[test]
fn a_rejected_replace_is_reported_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut lines = fixture("v3/nested-replace.jsonl");
    lines[12] = lines[12].replace("\"startSeq\":3", "\"startSeq\":7");
    let mut w = Writer::create(&path);
    w.write(lines[..12].concat().as_bytes());
    let (validate, show) = follow_both(&path, &[]);
    show.wait_for("seqs 0..10", |l| seqs_shown(l).len() == 11);
    assert!(validate.lines().is_empty());
    w.write(lines[12].as_bytes());
    validate.wait_for("the rejected replace", |l| {
        l.iter().any(|l| l.contains("\"severity\":\"error\""))
    });
    show.wait_for("the rejected event", |l| {
        json(l).iter().any(|v| v["surface"] == "rejected")
    });
    stop_and_compare(validate, show, &path);
}

/// Wait until both followers show `n` events and no findings... of the current file.
fn wait_events(show: &Follower, n: usize) {
    show.wait_for(&format!("{n} events"), |l| seqs_shown(l).len() >= n);
}

#[test]
fn a_truncated_file_is_noted_and_read_again_from_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let lines = fixture("v3/nested-replace.jsonl");
    let mut w = Writer::create(&path);
    w.write(lines[..10].concat().as_bytes());
    let (validate, show) = follow_both(&path, &[]);
    wait_events(&show, 9);
    validate.wait_read(&path);
    // Cut back to seq 2, then the session goes on differently.
    let keep = lines[..4].concat();
    w.0.set_len(keep.len() as u64).unwrap();
    let mut w = Writer::append(&path);
    w.write(lines[4].as_bytes());
    validate.wait_stderr("shrank");
    show.wait_stderr("reading it again from its start");
    wait_events(&show, 9 + 4);
    let (_, v_err) = stop_after_replacement(validate, show, &path, 9);
    assert!(v_err.contains("shrank"), "{v_err}");
}

/// [`stop_and_compare`] for a follower that read an earlier file first: its first `before`
/// events are of that file.
fn stop_after_replacement(
    validate: Follower,
    show: Follower,
    path: &Path,
    before: usize,
) -> (Vec<String>, String) {
    let (v_rc, v_out, v_err) = validate.interrupt();
    let (s_rc, s_out, s_err) = show.interrupt();
    assert_eq!(s_rc, 0, "{s_err}");
    let (once_rc, once) = one_shot(&["validate", "--format", "json"], path);
    assert_eq!(findings_and_summary(&v_out), findings_and_summary(&once));
    assert_eq!(v_rc, once_rc);
    let (_, once) = one_shot(&["show", "--format", "json"], path);
    assert_eq!(events(&s_out[before..]), events(&once));
    (v_out, v_err)
}

#[test]
fn a_renamed_and_recreated_file_is_noted_and_followed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let lines = fixture("v3/nested-replace.jsonl");
    let mut w = Writer::create(&path);
    w.write(lines[..6].concat().as_bytes());
    let (validate, show) = follow_both(&path, &[]);
    wait_events(&show, 5);
    validate.wait_read(&path);
    std::fs::rename(&path, dir.path().join("s.jsonl.old")).unwrap();
    std::thread::sleep(PAUSE);
    let mut w = Writer::create(&path);
    w.write(lines[..3].concat().as_bytes());
    validate.wait_stderr("replaced by another one");
    wait_events(&show, 5 + 2);
    w.write(lines[3..8].concat().as_bytes());
    wait_events(&show, 5 + 7);
    stop_after_replacement(validate, show, &path, 5);
}

#[test]
fn a_new_generation_in_a_session_directory_is_noted_and_followed_from_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("session");
    std::fs::create_dir(&session).unwrap();
    let v3 = fixture("v3/nested-replace.jsonl");
    let v4 = fixture("sample/session.v4.jsonl");
    let mut w = Writer::create(&session.join("session.v3.jsonl"));
    w.write(v3[..6].concat().as_bytes());
    let (validate, show) = follow_both(&session, &[]);
    wait_events(&show, 5);
    validate.wait_read(&session.join("session.v3.jsonl"));
    // DSH upgrades the session: the next generation, in the next format version.
    let mut w = Writer::create(&session.join("session.v4.jsonl"));
    w.write(v4[..3].concat().as_bytes());
    validate.wait_stderr("a new generation appeared");
    wait_events(&show, 5 + 2);
    for l in &v4[3..] {
        w.write(l.as_bytes());
    }
    wait_events(&show, 5 + v4.len() - 1);
    stop_after_replacement(validate, show, &session, 5);
}

#[test]
fn polling_only_follows_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let lines = fixture("sample/crashed.v3.jsonl");
    let mut w = Writer::create(&path);
    w.write(lines[0].as_bytes());
    let (validate, show) = follow_both(&path, &["--poll", "50"]);
    for (i, l) in lines[1..].iter().enumerate() {
        w.write(l.as_bytes());
        if i % 4 == 0 {
            std::thread::sleep(PAUSE / 2);
        }
    }
    wait_events(&show, 18);
    let (v_out, _) = stop_and_compare(validate, show, &path);
    assert!(v_out.iter().any(|l| l.contains("open-turn-at-end")));
}

#[test]
fn following_standard_input_is_refused() {
    common::dshs()
        .args(["validate", "-f", "-"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("not standard input"));
}

/// The matches of `grep --format json` output, without what depends on later events.
fn matches(lines: &[String]) -> Vec<Value> {
    json(lines)
        .into_iter()
        .filter(|v| v["type"] == "match")
        .map(|mut v| {
            if let Some(o) = v.as_object_mut() {
                o.remove("surface");
                o.remove("shadowed");
            }
            v
        })
        .collect()
}

#[test]
fn grep_follow_prints_each_match_as_its_event_lands() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let lines = fixture("v3/nested-replace.jsonl");
    let mut w = Writer::create(&path);
    w.write(lines[..4].concat().as_bytes());
    let grep = Follower::start(&["grep", "--format", "json", "-f", "question|files"], &path);
    std::thread::sleep(PAUSE);
    assert!(grep.lines().is_empty());
    w.write(lines[4].as_bytes()); // seq 3: "first question"
    grep.wait_for("the first match", |l| matches(l).len() == 1);
    let (a, b) = lines[5].split_at(10);
    w.write(a.as_bytes());
    std::thread::sleep(PAUSE / 2);
    w.write(b.as_bytes());
    w.write(lines[6].as_bytes()); // seq 5: "second question"
    grep.wait_for("the second match", |l| matches(l).len() == 2);
    w.write(lines[7..].concat().as_bytes());
    grep.wait_for("every match", |l| matches(l).len() >= 3);
    let (rc, out, err) = grep.interrupt();
    assert_eq!(rc, 0, "matches found: {err}");
    let (_, once) = one_shot(&["grep", "--format", "json", "question|files"], &path);
    assert_eq!(matches(&out), matches(&once));
}

#[test]
fn grep_follow_refuses_what_needs_the_end_of_the_log() {
    common::dshs()
        .args(["grep", "-f", "-c", "x"])
        .arg(common::testdata("v3/nested-replace.jsonl"))
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "--count needs the end of the log",
        ));
}

#[test]
fn a_sqlite_session_appended_to_by_another_connection_is_followed() {
    use rusqlite::types::Value as Sql;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.db");
    std::fs::copy(
        common::testdata("sqlite/db/per-fixture/deepseek-ai--multi-turn-session.db"),
        &db,
    )
    .unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let id: String = conn
        .query_row("SELECT id FROM sessions", [], |r| r.get(0))
        .unwrap();
    let rows: Vec<Vec<Sql>> = {
        let mut st = conn
            .prepare("SELECT * FROM events WHERE seq >= 20 ORDER BY seq")
            .unwrap();
        st.query_map([], |r| (0..8).map(|i| r.get::<_, Sql>(i)).collect())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert!(rows.len() > 10, "rows to append");
    conn.execute("DELETE FROM events WHERE seq >= 20", [])
        .unwrap();
    let named = PathBuf::from(format!("{}#{id}", db.display()));
    let (validate, show) = follow_both(&named, &[]);
    wait_events(&show, 20);
    for (i, row) in rows.iter().enumerate() {
        conn.execute(
            "INSERT INTO events VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            rusqlite::params_from_iter(row.iter()),
        )
        .unwrap();
        if i % 3 == 0 {
            std::thread::sleep(PAUSE / 4);
        }
    }
    wait_events(&show, 20 + rows.len());
    drop(conn);
    stop_and_compare(validate, show, &named);
}

#[test]
fn a_storage_root_is_followed_with_the_sessions_that_appear_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let first = root.join("project/one");
    std::fs::create_dir_all(&first).unwrap();
    let lines = fixture("sample/crashed.v3.jsonl");
    let mut w = Writer::create(&first.join("session.v3.jsonl"));
    w.write(lines[..5].concat().as_bytes());
    let (validate, show) = follow_both(&root, &[]);
    show.wait_for("the first session's events", |l| l.len() == 4);
    // A session created while following.
    let second = root.join("project/two");
    std::fs::create_dir_all(&second).unwrap();
    let mut w2 = Writer::create(&second.join("session.v3.jsonl"));
    w2.write(lines[..3].concat().as_bytes());
    show.wait_for("the new session's events", |l| l.len() == 4 + 2);
    show.wait_stderr("a new session; following it");
    w.write(lines[5..].concat().as_bytes());
    w2.write(lines[3..10].concat().as_bytes());
    show.wait_for("every event", |l| l.len() >= 4 + 2 + 14 + 7);
    let (v_rc, v_out, _) = validate.interrupt();
    let (s_rc, s_out, _) = show.interrupt();
    assert_eq!(s_rc, 0);
    let mut worst = 0;
    for session in [&first, &second] {
        let name = session.display().to_string();
        let (rc, once) = one_shot(&["validate", "--format", "json"], session);
        worst = worst.max(rc);
        let mine: Vec<String> = v_out
            .iter()
            .filter(|l| json(std::slice::from_ref(l))[0]["file"] == name.as_str())
            .cloned()
            .collect();
        assert_eq!(
            findings_and_summary(&mine),
            findings_and_summary(&once),
            "{name}"
        );
        let (_, once) = one_shot(&["show", "--format", "json"], session);
        let mine: Vec<String> = json(&s_out)
            .into_iter()
            .filter(|v| v["session"] == name.as_str())
            .map(|mut v| {
                v.as_object_mut().unwrap().remove("session");
                v.to_string()
            })
            .collect();
        assert_eq!(events(&mine), events(&once), "{name}");
    }
    assert_eq!(v_rc, worst, "the worst status of the sessions");
}

#[test]
fn a_closed_output_pipe_ends_following_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let lines = fixture("v3/nested-replace.jsonl");
    let mut w = Writer::create(&path);
    w.write(lines[..3].concat().as_bytes());
    for args in [&["show", "-f"][..], &["validate", "-f"][..]] {
        let mut child = Command::new(bin())
            .args(args)
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Like `| head -1`: the reader goes away.
        drop(child.stdout.take());
        std::thread::sleep(PAUSE);
        // What follows has something to print at once (a show line; a validate finding: an
        // event without `data`). One per round: the seqs go on.
        let seq = if args[0] == "show" { 2 } else { 3 };
        w.write(format!("{{\"type\":\"turn/start\",\"seq\":{seq},\"time\":1}}\n").as_bytes());
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if start.elapsed() > LIMIT {
                let _ = child.kill();
                panic!("{args:?} kept following into a closed pipe");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(0), "{args:?}");
    }
}

#[test]
fn a_partial_zstd_frame_becomes_a_torn_frame_only_when_following_stops() {
    use dshs::log::input::zstd::encode_frame;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl.zstd");
    let lines = fixture("v3/nested-replace.jsonl");
    let mut w = Writer::create(&path);
    w.write(&encode_frame(lines[0].as_bytes()).unwrap());
    w.write(&encode_frame(lines[1..6].concat().as_bytes()).unwrap());
    let (validate, show) = follow_both(&path, &[]);
    show.wait_for("seqs 0..4", |l| seqs_shown(l).len() == 5);
    let frame = encode_frame(lines[6..9].concat().as_bytes()).unwrap();
    w.write(&frame[..frame.len() / 2]);
    std::thread::sleep(PAUSE);
    assert!(validate.lines().is_empty(), "a pending frame is no finding");
    let (v_out, _) = stop_and_compare(validate, show, &path);
    assert!(
        v_out.iter().any(|l| l.contains("zstd-torn-frame")),
        "{v_out:?}"
    );
}

#[test]
fn a_sqlite_session_with_a_torn_tail_gives_the_storage_findings_when_following_stops() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.db");
    std::fs::copy(common::testdata("sqlite/db/torn-packed-tail.db"), &db).unwrap();
    let id: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT id FROM sessions", [], |r| r.get(0))
        .unwrap();
    let named = PathBuf::from(format!("{}#{id}", db.display()));
    let (validate, show) = follow_both(&named, &[]);
    show.wait_for("the session's events", |l| !l.is_empty());
    let (v_out, _) = stop_and_compare(validate, show, &named);
    assert!(v_out.iter().any(|l| l.contains("crash-tail")), "{v_out:?}");
}

#[test]
fn a_line_nested_up_to_the_raised_depth_guard_is_followed_without_overflowing_a_stack() {
    // The following pass walks trees on a thread of its own: it needs the stack the depth
    // guard is sized for, as the one-shot pass's threads have (issue 37 item 2).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.jsonl");
    let deep = format!("{}{}", "[".repeat(1_900), "]".repeat(1_900));
    let mut log = fixture("v3/nested-replace.jsonl")[..1].concat();
    log.push_str(&format!(
        r#"{{"type":"user/message","seq":0,"time":1,"data":{{"message":{{"id":"u","role":"user","content":[{{"type":"text","text":"hello"}}],"source":{{"kind":"user"}},"deep":{deep}}}}},"surfaceOp":"append"}}"#
    ));
    log.push('\n');
    std::fs::write(&path, log).unwrap();
    for args in [
        &["show", "--format", "json", "-f"][..],
        &["validate", "--format", "json", "-f"],
        &["grep", "--format", "json", "-f", "hello"],
    ] {
        let mut child = Command::new(bin())
            .args(args)
            .arg(&path)
            .env("DSHS_MAX_JSON_DEPTH", "2000")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dshs starts");
        std::thread::sleep(PAUSE * 8);
        let sent = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break s;
            }
            if start.elapsed() > LIMIT {
                let _ = child.kill();
                panic!("{args:?} did not stop after Ctrl-C");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        let _ = child.stderr.take().map(|mut e| e.read_to_string(&mut err));
        assert!(
            status.code().is_some_and(|c| c <= 1),
            "{args:?}: {status:?} {err}"
        );
    }
}
