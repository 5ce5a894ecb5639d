//! Issue 37 item 14: `grep`'s memory is bounded by the work, not by how much it finds. A
//! log's matches wait for the end of its fold (the surface decides their marks) and for their
//! turn to be printed; held whole, one text of many matching lines cost hundreds of bytes a
//! line, and `-c` collected every match of a line it only counted. Each case runs dshs in a
//! child whose address space is capped (`setrlimit(RLIMIT_AS)`) at the same bound for an
//! input and for inputs 10× and 100× larger; the output is checked whole.
#![cfg(unix)]

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};

/// The cap, the same for every size: a run over the smallest input needs well under it. It
/// counts address space, and the pass's threads reserve 8 MiB stacks (the depth guard's).
const ADDRESS_SPACE: u64 = 96 * 1000 * 1000;

const HEADER: &str = r#"{"type":"session","version":3,"id":"m","createdAt":1,"cwd":"/w","delegationDepth":0,"isSeeded":false}"#;

/// A valid log of one user message holding `text` (JSON-escaped already).
fn one_message(text: &str) -> String {
    format!(
        "{HEADER}\n{}\n{}\n{}\n",
        r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#,
        format_args!(
            r#"{{"type":"user/message","seq":1,"time":0,"data":{{"id":"u","role":"user","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#
        ),
        r#"{"type":"turn/end","seq":2,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    )
}

/// Run `dshs grep ARGS LOG` under the cap, its stdout into a file; the output, or a panic
/// naming the signal that ended it.
fn capped_grep(args: &[&str], log: &Path, out: &Path) -> String {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("dshs"));
    cmd.arg("grep")
        .args(args)
        .arg(log)
        .env_remove("NO_COLOR")
        .stdout(std::fs::File::create(out).expect("output file"))
        .stderr(Stdio::piped());
    // SAFETY: only setrlimit, which is async-signal-safe, runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: ADDRESS_SPACE as libc::rlim_t,
                rlim_max: ADDRESS_SPACE as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let run = cmd.output().expect("run dshs");
    assert!(
        run.status.signal().is_none() && run.status.code() == Some(0),
        "grep {args:?} {}: {:?} under a {ADDRESS_SPACE}-byte address-space cap\nstderr: {}",
        log.display(),
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    std::fs::read_to_string(out).expect("output")
}

/// One text of N matching lines: every line is printed (terminal lines and JSON records
/// alike), in order, with memory that does not grow with N.
#[test]
fn a_text_of_many_matching_lines_is_printed_with_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    for n in [2_000usize, 20_000, 200_000] {
        let log = dir.path().join(format!("lines-{n}.jsonl"));
        std::fs::write(&log, one_message(&"hit here\\n".repeat(n))).expect("write");
        let out = dir.path().join("out");
        let human = capped_grep(&["--color", "never", "hit"], &log, &out);
        assert_eq!(human.lines().count(), n, "{n} lines");
        let last = human.lines().last().expect("a line");
        assert!(
            last.ends_with(": seq 1 turn 1 user/message user: hit here"),
            "{last}"
        );
        let json = capped_grep(&["--format", "json", "hit"], &log, &out);
        let records: Vec<&str> = json.lines().collect();
        assert_eq!(records.len(), n + 1, "{n} records and the summary");
        let last: serde_json::Value = serde_json::from_str(records[n - 1]).expect("JSON");
        assert_eq!(last["textLine"], n as u64);
        assert_eq!(
            last["submatches"],
            serde_json::json!([{"start": 0, "end": 3}])
        );
        let summary: serde_json::Value = serde_json::from_str(records[n]).expect("JSON");
        assert_eq!(summary["matches"], n as u64);
        // --surface marks each match at the end, also those held on disk.
        let surface = capped_grep(&["--surface", "-c", "hit"], &log, &out);
        assert_eq!(surface, format!("{}:{n}\n", log.display()));
    }
}

/// One line of N matches: `-c` counts the line without collecting its matches, and a
/// terminal line collects only those its window shows.
#[test]
fn a_line_of_many_matches_is_counted_and_shown_with_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    for n in [40_000usize, 400_000, 4_000_000] {
        let log = dir.path().join(format!("long-{n}.jsonl"));
        std::fs::write(&log, one_message(&"a".repeat(n))).expect("write");
        let out = dir.path().join("out");
        let count = capped_grep(&["-c", "a"], &log, &out);
        assert_eq!(count, format!("{}:1\n", log.display()));
        let shown = capped_grep(&["--color", "never", "a"], &log, &out);
        assert_eq!(shown.lines().count(), 1);
        assert!(
            shown.trim_end().ends_with(&format!("{}…", "a".repeat(300))),
            "{shown}"
        );
    }
}
