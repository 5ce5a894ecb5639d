//! CLI.md MUST: writing into a closed pipe exits quietly, status 0 — for every command and
//! every path of its output: JSON records written with serde_json straight into the output,
//! tables, reports of a storage root read by parallel workers, and a closed stderr too.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::testdata;

const DEADLINE: Duration = Duration::from_secs(60);

/// A storage root of `n` copies of a sample session: more output than a pipe and the
/// output buffer hold, so the closed pipe is met while writing, not only at the last flush.
fn root(dir: &Path, n: usize) -> PathBuf {
    let root = dir.join("root");
    let log = std::fs::read(testdata("sample/session.v4.jsonl")).expect("sample");
    for i in 0..n {
        let s = root.join("proj").join(format!("s{i:04}"));
        std::fs::create_dir_all(&s).expect("mkdir");
        std::fs::write(s.join("session.v4.jsonl"), &log).expect("write");
    }
    root
}

/// Run dshs with its stdout (and, with `close_stderr`, its stderr) closed before it
/// writes: the first write that reaches the pipe fails with EPIPE.
fn closed(args: &[&str], close_stderr: bool) -> (Option<i32>, String) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("dshs"))
        .args(args)
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dshs");
    drop(child.stdout.take());
    if close_stderr {
        drop(child.stderr.take());
    }
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?}: hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_command_into_a_closed_pipe_exits_0_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = root(dir.path(), 400);
    let r = root.to_str().expect("utf-8");
    let log = testdata("sample/session.v4.jsonl");
    let l = log.to_str().expect("utf-8");
    let commands: Vec<Vec<&str>> = vec![
        vec!["ls", "--format", "json", r],
        vec!["ls", r],
        vec!["ls", "-j", "2", "--format", "json", r],
        vec!["validate", "--format", "json", r],
        vec!["validate", r],
        vec!["grep", "--format", "json", "e", r],
        vec!["grep", "-j", "2", "--format", "json", "e", r],
        vec!["grep", "e", r],
        vec!["grep", "-c", "e", r],
        vec!["grep", "-l", "e", r],
        vec!["grep", "-C", "2", "e", r],
        vec!["stats", "--format", "json", l],
        vec!["surface", "--format", "json", l],
        vec!["show", "--format", "json", l],
        vec!["show", l],
        vec!["derive", l],
        vec!["explain"],
    ];
    for args in &commands {
        for close_stderr in [false, true] {
            let (code, stderr) = closed(args, close_stderr);
            assert_eq!(
                code,
                Some(0),
                "{args:?} (stderr closed: {close_stderr}): {stderr}"
            );
            assert_eq!(stderr, "", "{args:?}");
        }
    }
}
