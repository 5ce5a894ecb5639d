//! Logs that can be read only once, named by path: a FIFO (`mkfifo`), `/dev/stdin`. Each is
//! read like standard input — one pass, and a temporary copy where a command reads lines a
//! second time — so every command gives exactly what it gives for the regular file: never a
//! hang, never a wrong verdict, never half a document. Under a storage root, a session whose
//! log is a FIFO is reported and skipped without being opened.
//!
//! Every command runs under a deadline: a hang fails the test instead of stalling it.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(60);

fn dshs_bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("dshs")
}

/// Wait for `child`, killing it (and failing) if it outlives the deadline.
fn finish(mut child: Child, what: &str) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {DEADLINE:?} (hung)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run(args: &[&str], path: &Path) -> Output {
    let child = Command::new(dshs_bin())
        .args(args)
        .arg(path)
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dshs");
    finish(child, &format!("dshs {args:?} {}", path.display()))
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success(), "mkfifo");
}

/// `cat LOG > FIFO` in the background; killed when dropped (it blocks until read).
struct Feeder(Child);

impl Feeder {
    fn start(log: &Path, fifo: &Path) -> Feeder {
        Feeder(
            Command::new("sh")
                .arg("-c")
                .arg("cat \"$1\" > \"$2\"")
                .arg("feeder")
                .arg(log)
                .arg(fifo)
                .spawn()
                .expect("sh"),
        )
    }
}

impl Drop for Feeder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The same output as for the regular file, but for the name the log was given under.
fn same(regular: &Output, other: &Output, log: &Path, name: &Path, what: &str) {
    assert_eq!(
        other.status.code(),
        regular.status.code(),
        "{what}: exit status\n{}",
        String::from_utf8_lossy(&other.stderr)
    );
    let expected = String::from_utf8_lossy(&regular.stdout)
        .replace(&log.display().to_string(), &name.display().to_string());
    assert_eq!(
        String::from_utf8_lossy(&other.stdout),
        expected,
        "{what}: stdout"
    );
}

/// Read-only commands, and the writers' looks (`--dry-run`), on a FIFO: exactly what they
/// print for the same log in a regular file.
#[test]
fn a_fifo_named_by_path_is_read_like_standard_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    for sample in ["sample/session.v4.jsonl", "sample/crashed.v3.jsonl"] {
        // Outside a session directory: no name checks differ between the two.
        let log = dir.path().join("log.jsonl");
        std::fs::copy(common::testdata(sample), &log).expect("copy");
        let commands: &[&[&str]] = &[
            &["validate"],
            &["validate", "--format", "json"],
            &["surface"],
            &["surface", "--format", "json"],
            &["surface", "--at", "10"],
            &["derive"],
            &["derive", "--format", "markdown"],
            &["show"],
            &["show", "--format", "json"],
            &["stats", "--format", "json"],
            &["repair", "--dry-run"],
            &[
                "compact",
                "--dry-run",
                "--start",
                "21",
                "--end",
                "15",
                "--summary",
                "s",
            ],
        ];
        for args in commands {
            let regular = run(args, &log);
            let fifo = dir.path().join("fifo");
            let _ = std::fs::remove_file(&fifo);
            mkfifo(&fifo);
            let _feeder = Feeder::start(&log, &fifo);
            let piped = run(args, &fifo);
            let what = format!("{sample}: {args:?}");
            // compact --dry-run mints fresh ids: compare all but those.
            if args[0] == "compact" {
                assert_eq!(piped.status.code(), regular.status.code(), "{what}");
                assert_eq!(
                    String::from_utf8_lossy(&piped.stdout).lines().count(),
                    String::from_utf8_lossy(&regular.stdout).lines().count(),
                    "{what}"
                );
            } else {
                same(&regular, &piped, &log, &fifo, &what);
            }
        }
    }
}

#[test]
fn dev_stdin_by_path_is_read_like_standard_input() {
    let log = common::testdata("sample/crashed.v3.jsonl");
    let stdin = Path::new("/dev/stdin");
    let commands: &[&[&str]] = &[
        &["surface"],
        &["derive"],
        &["show"],
        &["validate", "--format", "json"],
        &["repair", "--dry-run"],
    ];
    for args in commands {
        let regular = run(args, &log);
        let child = Command::new(dshs_bin())
            .args(*args)
            .arg(stdin)
            .stdin(std::fs::File::open(&log).expect("log"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dshs");
        let piped = finish(child, &format!("{args:?} /dev/stdin"));
        // Through a pipe, not a file: `cat LOG | dshs … /dev/stdin`.
        let cat = Command::new("sh")
            .arg("-c")
            .arg(format!("cat \"$1\" | \"$2\" {} /dev/stdin", args.join(" ")))
            .arg("sh")
            .arg(&log)
            .arg(dshs_bin())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sh");
        let through_pipe = finish(cat, &format!("cat | {args:?} /dev/stdin"));
        for (o, how) in [(&piped, "redirected"), (&through_pipe, "piped")] {
            same(&regular, o, &log, stdin, &format!("{args:?} {how}"));
        }
    }
}

#[test]
fn a_fifo_cannot_be_changed_in_place_and_nothing_waits_for_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("log.jsonl");
    mkfifo(&fifo);
    // No writer: opening the FIFO would block, so refusing must not open it.
    for args in [
        &["repair"][..],
        &["compact", "--start", "1", "--end", "2", "--summary", "s"][..],
    ] {
        let o = run(args, &fifo);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("is a FIFO (named pipe), not a regular file"),
            "{stderr}"
        );
        assert!(stderr.contains("--dry-run"), "{stderr}");
    }
}

/// A storage root with a healthy session and one whose `session.jsonl` is a FIFO (no writer:
/// opening it would wait forever).
fn root_with_a_fifo_session() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = tempfile::tempdir().expect("tempdir");
    let good = root.path().join("--workspace--").join("good");
    std::fs::create_dir_all(&good).expect("dir");
    std::fs::copy(
        common::testdata("sample/session.v4.jsonl"),
        good.join("session.v4.jsonl"),
    )
    .expect("copy");
    let bad = root.path().join("--workspace--").join("stuck");
    std::fs::create_dir_all(&bad).expect("dir");
    mkfifo(&bad.join("session.jsonl"));
    (root, good, bad)
}

#[test]
fn ls_and_validate_of_a_root_skip_a_fifo_session_with_a_finding_and_go_on() {
    let (root, good, bad) = root_with_a_fifo_session();
    let o = run(&["validate", "--format", "json"], root.path());
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let records = common::json_lines(&o.stdout);
    let fifo = bad.join("session.jsonl").display().to_string();
    let finding = records
        .iter()
        .find(|r| r["type"] == "finding" && r["code"] == "file-not-regular")
        .unwrap_or_else(|| panic!("no file-not-regular finding: {records:?}"));
    assert_eq!(finding["file"], bad.display().to_string());
    assert!(
        finding["message"]
            .as_str()
            .is_some_and(|m| m.contains(&fifo)),
        "{finding}"
    );
    let summary = |dir: &Path| {
        records
            .iter()
            .find(|r| r["type"] == "summary" && r["file"] == dir.display().to_string())
            .unwrap_or_else(|| panic!("no summary for {}: {records:?}", dir.display()))
            .clone()
    };
    assert_eq!(summary(&bad)["status"], "unreadable");
    assert_eq!(summary(&bad)["errors"], 1);
    assert_eq!(summary(&good)["status"], "valid");

    let human = run(&["validate"], root.path());
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("error[file-not-regular]"), "{text}");

    let o = run(&["ls", "--format", "json"], root.path());
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let rows = common::json_lines(&o.stdout);
    assert_eq!(rows.len(), 2, "{rows:?}");
    let stuck = rows
        .iter()
        .find(|r| r["path"] == bad.display().to_string())
        .expect("the FIFO session is listed");
    assert_eq!(stuck["status"], "unreadable");
    assert!(
        stuck["problem"]
            .as_str()
            .is_some_and(|p| p.contains("not a regular file")),
        "{stuck}"
    );
    assert!(rows.iter().any(|r| r["status"] == "valid"));
    let o = run(&["ls"], root.path());
    assert_eq!(o.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not a regular file"),
        "{o:?}"
    );
}

/// Issue 37 item 8: `grep` read a path twice (a raw pass, then the fold), so a FIFO hung
/// and `<(cat log)` came back empty (a false "no match", exit 1). Such a path is read once,
/// like standard input, and gives what the regular file gives, in every output mode.
#[test]
fn grep_reads_a_fifo_or_a_pipe_by_path_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("log.jsonl");
    std::fs::copy(common::testdata("sample/session.v4.jsonl"), &log).expect("copy");
    let commands: &[&[&str]] = &[
        &["grep", "e"],
        &["grep", "--format", "json", "e"],
        &["grep", "-c", "e"],
        &["grep", "-l", "e"],
        // No literal to test raw lines with: the fold alone reads it.
        &["grep", "."],
        &["grep", "NOSUCHWORD"],
    ];
    for args in commands {
        let regular = run(args, &log);
        let fifo = dir.path().join("fifo");
        let _ = std::fs::remove_file(&fifo);
        mkfifo(&fifo);
        let _feeder = Feeder::start(&log, &fifo);
        let piped = run(args, &fifo);
        same(&regular, &piped, &log, &fifo, &format!("{args:?} FIFO"));
        // `dshs grep e <(cat log)`, as a shell gives it: a pipe named by a path.
        let cat = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "cat \"$1\" | \"$2\" {} /dev/stdin",
                args.iter()
                    .map(|a| format!("'{a}'"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ))
            .arg("sh")
            .arg(&log)
            .arg(dshs_bin())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sh");
        let through_pipe = finish(cat, &format!("cat | {args:?} /dev/stdin"));
        same(
            &regular,
            &through_pipe,
            &log,
            Path::new("/dev/stdin"),
            &format!("{args:?} pipe"),
        );
    }
}

/// Issue 37 item 17: a session found below a root that is gone when its turn comes (removed
/// or moved while the run reads others) is a note, not the end of the run: `grep ROOT` and
/// `validate ROOT` go on with the rest and keep the status the rest gives, as `ls` does.
/// A FIFO named first holds the run after the root is listed: the writer's open returns only
/// once dshs has opened it, and the session is removed then, before the FIFO is fed.
#[test]
fn a_session_gone_in_the_middle_of_a_root_is_a_note() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("root");
    let sample = std::fs::read(common::testdata("sample/session.v4.jsonl")).expect("sample");
    for s in ["a", "b", "c"] {
        let d = root.join("proj").join(s);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("session.v4.jsonl"), &sample).expect("write");
    }
    let log = dir.path().join("log.jsonl");
    std::fs::write(&log, &sample).expect("write");
    let gone = root.join("proj").join("b");
    let commands: &[&[&str]] = &[
        &["grep", "-j", "1", "--format", "json", "e"],
        &["grep", "-j", "1", "-c", "e"],
        &["validate", "-j", "1", "--format", "json"],
        &["validate", "-j", "1"],
    ];
    for args in commands {
        let d = root.join("proj").join("b");
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("session.v4.jsonl"), &sample).expect("write");
        let fifo = dir.path().join("gate");
        let _ = std::fs::remove_file(&fifo);
        mkfifo(&fifo);
        let child = Command::new(dshs_bin())
            .args(*args)
            .arg(&fifo)
            .arg(&root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dshs");
        // Opening the FIFO for writing returns once dshs has it open: the root is listed.
        let (tx, rx) = std::sync::mpsc::channel();
        let f = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(std::fs::OpenOptions::new().write(true).open(&f));
        });
        let mut writer = rx
            .recv_timeout(DEADLINE)
            .expect("dshs opens the FIFO in time")
            .expect("open the FIFO");
        std::fs::remove_dir_all(&gone).expect("remove a session");
        std::io::Write::write_all(&mut writer, &sample).expect("feed");
        drop(writer);
        let out = finish(child, &format!("{args:?}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(
            stderr.contains("the session is gone") && stderr.contains(&gone.display().to_string()),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("error"), "{args:?}: {stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        // The others are all read.
        for s in ["a", "c"] {
            let p = root.join("proj").join(s).display().to_string();
            assert!(stdout.contains(&p), "{args:?}: {s} missing: {stdout}");
        }
    }
}
