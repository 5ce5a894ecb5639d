//! Writers against writers, many rounds, through the binary: two `dshs compact`, two `dshs
//! repair`, and `dshs` against a process that appends the way DSH does (taking the session's
//! lock first). Whatever the interleaving, every write a command reports as done must be in
//! the file, and the log must still validate. Each case runs with and without a
//! `session.lock` present beforehand (dshs creates it), and for a log outside a session
//! directory (dshs locks the file itself).
//!
//! There is no timing here: the processes simply run at once, and each round checks what
//! every finished process said against the bytes left behind. One deterministic case holds a
//! writer paused inside its write (debug-only hook) while the other tries.

mod common;

use std::fs::{self, TryLockError};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

const ROUNDS: usize = 24;

fn dshs_bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("dshs")
}

/// Where a round's log lives, and how its writers lock it.
#[derive(Debug, Clone, Copy)]
enum Layout {
    /// A canonical generation file with no `session.lock` yet.
    SessionDir,
    /// The same with a `session.lock` already there (left by an earlier DSH).
    SessionDirWithLock,
    /// Any other name: writers lock the file itself.
    Bare,
}

const LAYOUTS: [Layout; 3] = [Layout::SessionDir, Layout::SessionDirWithLock, Layout::Bare];

impl Layout {
    fn place(self, dir: &Path, bytes: &[u8], canonical: &str) -> PathBuf {
        let path = dir.join(match self {
            Layout::Bare => "s.jsonl",
            _ => canonical,
        });
        fs::write(&path, bytes).expect("log");
        if matches!(self, Layout::SessionDirWithLock) {
            fs::write(dir.join("session.lock"), b"").expect("lock file");
        }
        path
    }

    /// What a cooperating writer locks.
    fn lock_file(self, log: &Path) -> PathBuf {
        match self {
            Layout::Bare => log.to_owned(),
            _ => log.with_file_name("session.lock"),
        }
    }
}

fn spawn(args: &[&str], log: &Path) -> Child {
    Command::new(dshs_bin())
        .args(args)
        .arg(log)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dshs")
}

fn validates(log: &Path) -> Output {
    Command::new(dshs_bin())
        .args(["validate", "--format", "json"])
        .arg(log)
        .output()
        .expect("dshs")
}

fn assert_valid(log: &Path, context: &str) {
    let o = validates(log);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{context}: the log no longer validates:\n{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// A refusal is fine (the other writer had the lock, or changed the log first); anything
/// else than success or a refusal is not.
fn assert_success_or_refusal(o: &Output, context: &str) {
    let code = o.status.code();
    assert!(
        matches!(code, Some(0 | 1 | 3)),
        "{context}: exit {code:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn occurrences(hay: &[u8], needle: &str) -> usize {
    hay.windows(needle.len())
        .filter(|w| *w == needle.as_bytes())
        .count()
}

fn sidecars(dir: &Path) -> usize {
    fs::read_dir(dir)
        .expect("dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().contains(".dshs-cut-"))
        })
        .count()
}

#[test]
fn two_compactions_at_once_never_report_a_write_that_is_not_in_the_file() {
    let sample = fs::read(common::testdata("sample/session.v4.jsonl")).expect("sample");
    for layout in LAYOUTS {
        for round in 0..ROUNDS {
            let dir = tempfile::tempdir().expect("tempdir");
            let log = layout.place(dir.path(), &sample, "session.v4.jsonl");
            let (a, b) = ("summary-from-writer-A", "summary-from-writer-B");
            let ca = spawn(
                &["compact", "--start", "21", "--end", "15", "--summary", a],
                &log,
            );
            let cb = spawn(
                &["compact", "--start", "21", "--end", "15", "--summary", b],
                &log,
            );
            let (oa, ob) = (
                ca.wait_with_output().expect("a"),
                cb.wait_with_output().expect("b"),
            );
            let context = format!("{layout:?} round {round}");
            assert_success_or_refusal(&oa, &context);
            assert_success_or_refusal(&ob, &context);
            let bytes = fs::read(&log).expect("log");
            for (o, summary) in [(&oa, a), (&ob, b)] {
                if o.status.success() {
                    assert_eq!(
                        occurrences(&bytes, summary),
                        2,
                        "{context}: compact reported success but its summary is not in the file (stderr: {})",
                        String::from_utf8_lossy(&o.stderr)
                    );
                } else {
                    assert_eq!(occurrences(&bytes, summary), 0, "{context}");
                }
            }
            // The same range cannot be compacted twice: exactly one of them did it.
            assert_eq!(
                [&oa, &ob].iter().filter(|o| o.status.success()).count(),
                1,
                "{context}: {oa:?} {ob:?}"
            );
            assert_valid(&log, &context);
            if !matches!(layout, Layout::Bare) {
                assert!(dir.path().join("session.lock").exists(), "{context}");
            }
        }
    }
}

#[test]
fn two_repairs_at_once_repair_once() {
    // A v3 crash, and a v0 one after a packed row (whose closers a repair plans from the
    // row's tally).
    for (sample, canonical) in [
        ("sample/crashed.v3.jsonl", "session.v3.jsonl"),
        ("v0/crashed-packed.jsonl", "session.jsonl"),
    ] {
        two_repairs_of(sample, canonical);
    }
}

fn two_repairs_of(sample: &str, canonical: &str) {
    let crashed = fs::read(common::testdata(sample)).expect("sample");
    // The result of one repair, alone.
    let alone = tempfile::tempdir().expect("tempdir");
    let reference = Layout::SessionDir.place(alone.path(), &crashed, canonical);
    let o = Command::new(dshs_bin())
        .arg("repair")
        .arg(&reference)
        .output()
        .expect("dshs");
    assert!(o.status.success(), "{o:?}");
    let repaired = fs::read(&reference).expect("repaired");
    for layout in LAYOUTS {
        for round in 0..ROUNDS {
            let dir = tempfile::tempdir().expect("tempdir");
            let log = layout.place(dir.path(), &crashed, canonical);
            let ca = spawn(&["repair"], &log);
            let cb = spawn(&["repair"], &log);
            let (oa, ob) = (
                ca.wait_with_output().expect("a"),
                cb.wait_with_output().expect("b"),
            );
            let context = format!("{sample} {layout:?} round {round}: {oa:?} {ob:?}");
            for o in [&oa, &ob] {
                assert!(matches!(o.status.code(), Some(0 | 3)), "{context}");
            }
            assert!(oa.status.success() || ob.status.success(), "{context}");
            // Repaired exactly once: the bytes of one repair, one sidecar.
            assert_eq!(fs::read(&log).expect("log"), repaired, "{context}");
            assert_eq!(sidecars(dir.path()), 1, "{context}");
            assert_valid(&log, &context);
        }
    }
}

/// Appends one complete turn to `log` the way a DSH writer would: under the writer's lock
/// (retried while another holds it), with the next seq, time and turn number of what the
/// file holds. Returns the turn number it appended.
fn append_turn_like_dsh(lock: &Path, log: &Path) -> u64 {
    let file = loop {
        let f = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(lock)
            .expect("lock file");
        match f.try_lock() {
            Ok(()) => break f,
            Err(TryLockError::WouldBlock) => {
                std::thread::sleep(std::time::Duration::from_millis(1))
            }
            Err(TryLockError::Error(e)) => panic!("lock: {e}"),
        }
    };
    let text = fs::read_to_string(log).expect("log");
    let (mut seq, mut time, mut turn) = (0u64, 0u64, 0u64);
    for line in text.lines().skip(1) {
        let v: serde_json::Value = serde_json::from_str(line).expect("committed lines");
        seq = v["seq"].as_u64().expect("seq") + 1;
        time = v["time"].as_u64().expect("time");
        if v["type"] == "turn/start" {
            turn = v["data"]["turn"].as_u64().expect("turn");
        }
    }
    let next = turn + 1;
    let lines = format!(
        "{{\"type\":\"turn/start\",\"seq\":{seq},\"time\":{time},\"data\":{{\"turn\":{next}}}}}\n{{\"type\":\"turn/end\",\"seq\":{},\"time\":{time},\"data\":{{\"turn\":{next},\"reason\":{{\"kind\":\"completed\"}}}}}}\n",
        seq + 1
    );
    let mut f = fs::OpenOptions::new().append(true).open(log).expect("log");
    f.write_all(lines.as_bytes()).expect("append");
    f.sync_all().expect("sync");
    drop(file);
    next
}

#[test]
fn a_compaction_and_a_dsh_style_appender_at_once_lose_nothing() {
    let sample = fs::read(common::testdata("sample/session.v4.jsonl")).expect("sample");
    for layout in LAYOUTS {
        for round in 0..ROUNDS {
            let dir = tempfile::tempdir().expect("tempdir");
            let log = layout.place(dir.path(), &sample, "session.v4.jsonl");
            let lock = layout.lock_file(&log);
            let stop = AtomicBool::new(false);
            let (compacted, appended) = std::thread::scope(|s| {
                let appender = s.spawn(|| {
                    let mut turns = Vec::new();
                    while !stop.load(Ordering::Relaxed) && turns.len() < 50 {
                        turns.push(append_turn_like_dsh(&lock, &log));
                    }
                    turns
                });
                let o = spawn(
                    &[
                        "compact",
                        "--start",
                        "21",
                        "--end",
                        "15",
                        "--summary",
                        "raced",
                    ],
                    &log,
                )
                .wait_with_output()
                .expect("dshs");
                stop.store(true, Ordering::Relaxed);
                (o, appender.join().expect("appender"))
            });
            let context = format!("{layout:?} round {round}");
            assert_success_or_refusal(&compacted, &context);
            let text = fs::read_to_string(&log).expect("log");
            if compacted.status.success() {
                assert_eq!(
                    occurrences(text.as_bytes(), "raced"),
                    2,
                    "{context}: compact reported success but its summary is not in the file"
                );
            }
            for turn in &appended {
                assert!(
                    text.contains(&format!("\"data\":{{\"turn\":{turn},\"reason\"")),
                    "{context}: the appender's turn {turn} is gone"
                );
            }
            assert_valid(&log, &context);
        }
    }
}

#[cfg(debug_assertions)]
#[test]
fn a_writer_holding_the_lock_inside_its_write_keeps_every_other_writer_out() {
    let sample = fs::read(common::testdata("sample/session.v4.jsonl")).expect("sample");
    for layout in LAYOUTS {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = layout.place(dir.path(), &sample, "session.v4.jsonl");
        // A stops inside its write (its plan made, the lock held).
        let mut a = Command::new(dshs_bin())
            .args([
                "compact",
                "--start",
                "21",
                "--end",
                "15",
                "--summary",
                "first",
            ])
            .arg(&log)
            .env("DSHS_TEST_FAULT", "pause:start")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dshs");
        let mut err = BufReader::new(a.stderr.take().expect("stderr"));
        let mut line = String::new();
        err.read_line(&mut line).expect("read");
        assert_eq!(line.trim(), "dshs-test: paused at start", "{layout:?}");
        // B, and a repair, are refused as long as A holds the lock: nothing written.
        let before = fs::read(&log).expect("log");
        for args in [
            &[
                "compact",
                "--start",
                "21",
                "--end",
                "15",
                "--summary",
                "second",
            ][..],
            &["repair"][..],
        ] {
            let o = Command::new(dshs_bin())
                .args(args)
                .arg(&log)
                .output()
                .expect("dshs");
            assert_eq!(o.status.code(), Some(3), "{layout:?} {args:?}: {o:?}");
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert!(stderr.contains("live writer holds the session"), "{stderr}");
            assert_eq!(fs::read(&log).expect("log"), before, "{layout:?} {args:?}");
        }
        // A goes on and finishes its write.
        a.stdin
            .take()
            .expect("stdin")
            .write_all(b"\n")
            .expect("resume");
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut err, &mut rest).expect("stderr");
        assert!(a.wait().expect("exits").success(), "{layout:?}: {rest}");
        assert_eq!(occurrences(&fs::read(&log).expect("log"), "first"), 2);
        assert_valid(&log, &format!("{layout:?}"));
        // The lock file stays, as DSH leaves it.
        if !matches!(layout, Layout::Bare) {
            assert!(dir.path().join("session.lock").exists());
        }
    }
}
