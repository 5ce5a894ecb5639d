//! Hostile and odd input through the binary: `dshs validate` must give the exit status of
//! CLI.md (0 valid, 1 invalid, 2 unreadable, 3 unsupported) and a clear message, and never
//! panic. The hostile-input corpus (odd encodings, huge and deep input, odd numbers,
//! duplicate keys, terminal escapes) is `testdata/hostile/`, driven by tests/hostile.rs.

mod common;

use std::path::{Path, PathBuf};

use assert_cmd::assert::Assert;
use common::{dshs, json_lines};
use serde_json::Value;

const HEADER: &str =
    r#"{"type":"session","version":3,"id":"s","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;
const START: &str = r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#;
const END: &str =
    r#"{"type":"turn/end","seq":1,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#;

/// A temporary directory holding one log file.
struct Log {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn write(bytes: &[u8]) -> Log {
    write_as("session.v3.jsonl", bytes)
}

fn write_as(name: &str, bytes: &[u8]) -> Log {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).expect("write log");
    Log { _dir: dir, path }
}

/// Header, then the given lines, each ended by `\n`.
fn lines(rows: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in rows {
        out.extend_from_slice(r.as_bytes());
        out.push(b'\n');
    }
    out
}

/// `dshs validate FILE` in human format; checks the exit code and that nothing panicked.
fn human(path: &Path, code: i32) -> (String, String) {
    let a = dshs().arg("validate").arg(path).assert().code(code);
    outputs(a)
}

/// `dshs validate --format json FILE`: the findings and the summary record.
fn json(path: &Path, code: i32) -> (Vec<Value>, Value) {
    let a = dshs()
        .args(["validate", "--format", "json"])
        .arg(path)
        .assert()
        .code(code);
    let out = a.get_output();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let mut records = json_lines(&out.stdout);
    let summary = records.pop().expect("a summary record");
    assert_eq!(summary["type"], "summary");
    assert!(records.iter().all(|r| r["type"] == "finding"));
    (records, summary)
}

fn outputs(a: Assert) -> (String, String) {
    let out = a.get_output();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stdout.contains("panicked"), "{stdout}");
    (stdout, stderr)
}

fn codes(findings: &[Value]) -> Vec<&str> {
    findings.iter().filter_map(|f| f["code"].as_str()).collect()
}

#[test]
fn empty_file_has_no_header() {
    let log = write(b"");
    let (stdout, _) = human(&log.path, 1);
    assert!(stdout.contains("file-no-header"), "{stdout}");
    assert!(stdout.contains("empty"), "{stdout}");
    let (f, s) = json(&log.path, 1);
    assert_eq!(codes(&f), ["file-no-header"]);
    assert_eq!(f[0]["line"], 1);
    assert_eq!(s["status"], "invalid");
    assert_eq!(s["version"], Value::Null);
    assert_eq!(s["events"], 0);
}

#[test]
fn header_without_newline_is_not_a_header() {
    let log = write(HEADER.as_bytes());
    let (f, s) = json(&log.path, 1);
    assert_eq!(codes(&f), ["file-no-header"]);
    assert!(
        f[0]["message"]
            .as_str()
            .unwrap()
            .contains("without a newline")
    );
    assert_eq!(s["status"], "invalid");
}

#[test]
fn header_only_is_a_valid_empty_session() {
    let log = write(&lines(&[HEADER]));
    let (f, s) = json(&log.path, 0);
    assert!(f.is_empty(), "{f:?}");
    assert_eq!(s["status"], "valid");
    assert_eq!(s["version"], 3);
    assert_eq!(s["events"], 0);
    assert_eq!(s["surfaceNodes"], 0);
    assert_eq!(s["openTurn"], false);
    assert_eq!(s["tornTail"], false);
}

#[test]
fn first_line_that_is_an_event_is_no_header() {
    let log = write(&lines(&[START, END]));
    let (stdout, _) = human(&log.path, 1);
    assert!(stdout.contains("header-field-invalid"), "{stdout}");
    assert!(stdout.contains("version"), "{stdout}");
    let (_, s) = json(&log.path, 1);
    assert_eq!(s["status"], "invalid");
    assert_eq!(s["events"], 0);
}

#[test]
fn binary_junk_is_an_unparsable_header() {
    let mut junk: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    junk.push(b'\n');
    let log = write(&junk);
    let (f, s) = json(&log.path, 1);
    assert_eq!(codes(&f), ["header-not-json"]);
    assert_eq!(s["status"], "invalid");
    let (stdout, _) = human(&log.path, 1);
    assert!(stdout.contains("not valid JSON"), "{stdout}");
    // Control characters from the file never reach the terminal raw.
    assert!(
        !stdout.bytes().any(|b| b < 0x20 && b != b'\n'),
        "{stdout:?}"
    );
}

#[test]
fn binary_junk_after_the_last_turn_end_is_a_crash_tail() {
    let mut bytes = lines(&[HEADER, START, END]);
    bytes.extend((0..=255u8).filter(|b| *b != b'\n'));
    bytes.push(b'\n');
    let log = write(&bytes);
    let (f, s) = json(&log.path, 0);
    assert_eq!(codes(&f), ["crash-tail"]);
    assert_eq!(s["events"], 2);
}

#[test]
fn invalid_utf8_inside_the_header_is_a_warning_and_the_log_loads() {
    let header = HEADER.replace(r#""id":"s""#, "\"id\":\"s\u{1}\"");
    let mut bytes = lines(&[&header, START, END]);
    let at = bytes.iter().position(|b| *b == 1).unwrap();
    bytes[at] = 0xFE;
    let log = write(&bytes);
    let (f, s) = json(&log.path, 0);
    assert_eq!(codes(&f), ["invalid-utf8"]);
    assert_eq!(f[0]["line"], 1);
    assert_eq!(s["status"], "valid");
    assert_eq!(s["version"], 3);
}

#[test]
fn torn_final_line_is_reported_in_the_summary() {
    let mut bytes = lines(&[HEADER, START, END]);
    bytes.extend_from_slice(br#"{"type":"turn/start","seq":2,"ti"#);
    let log = write(&bytes);
    let (f, s) = json(&log.path, 0);
    assert_eq!(codes(&f), ["torn-line"]);
    assert_eq!(s["tornTail"], true);
    assert_eq!(s["events"], 2);
    assert_eq!(s["openTurn"], false);
}

#[test]
fn open_final_turn_is_a_warning_in_the_summary() {
    let log = write(&lines(&[HEADER, START]));
    let (f, s) = json(&log.path, 0);
    assert_eq!(codes(&f), ["open-turn-at-end"]);
    assert_eq!(s["openTurn"], true);
    dshs()
        .args(["validate", "--deny-warnings"])
        .arg(&log.path)
        .assert()
        .code(1);
}

#[test]
fn directory_without_a_session_file_is_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello").unwrap();
    let (_, stderr) = outputs(dshs().arg("validate").arg(dir.path()).assert().code(2));
    assert!(stderr.starts_with("dshs: error:"), "{stderr}");
    assert!(stderr.contains("session"), "{stderr}");
    let (f, s) = json(dir.path(), 2);
    assert!(f.is_empty());
    assert_eq!(s["status"], "unreadable");
}

#[test]
fn session_directory_resolves_to_its_newest_generation() {
    let dir = tempfile::tempdir().unwrap();
    let v0 = r#"{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}"#;
    std::fs::write(dir.path().join("session.jsonl"), lines(&[v0])).unwrap();
    std::fs::write(
        dir.path().join("session.v3.jsonl"),
        lines(&[HEADER, START, END]),
    )
    .unwrap();
    let (_, s) = json(dir.path(), 0);
    assert_eq!(s["version"], 3);
    assert_eq!(s["events"], 2);
}

#[test]
fn missing_file_is_an_io_error_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.jsonl");
    let (stdout, stderr) = human(&missing, 2);
    assert!(stderr.starts_with("dshs: error:"), "{stderr}");
    assert!(stderr.contains("nope.jsonl"), "{stderr}");
    assert!(stdout.contains("unreadable"), "{stdout}");
    let (_, s) = json(&missing, 2);
    assert_eq!(s["status"], "unreadable");
}

#[test]
fn stdin_is_read_with_a_dash() {
    let text = String::from_utf8(lines(&[HEADER, START, END])).unwrap();
    let a = dshs()
        .args(["validate", "--format", "json", "-"])
        .write_stdin(text)
        .assert()
        .code(0);
    let records = json_lines(&a.get_output().stdout);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["file"], "-");
    assert_eq!(records[0]["events"], 2);
    assert_eq!(records[0]["status"], "valid");
    // A corrupt log on stdin fails the same way as a file.
    let a = dshs()
        .args(["validate", "--format", "json", "-"])
        .write_stdin(format!("{HEADER}\nnot json\n{START}\n{END}\n"))
        .assert()
        .code(1);
    let records = json_lines(&a.get_output().stdout);
    assert_eq!(records[0]["code"], "committed-unparsable");
    // Empty stdin has no header.
    let a = dshs()
        .args(["validate", "-"])
        .write_stdin("")
        .assert()
        .code(1);
    outputs(a);
}

#[test]
fn several_files_exit_with_the_worst_status() {
    let good = write(&lines(&[HEADER, START, END]));
    let bad = write(b"");
    let newer = write(&lines(&[r#"{"type":"session","version":9}"#]));
    dshs()
        .arg("validate")
        .arg(&good.path)
        .arg(&bad.path)
        .assert()
        .code(1);
    dshs()
        .arg("validate")
        .arg(&bad.path)
        .arg(&newer.path)
        .arg(&good.path)
        .assert()
        .code(3);
    let dir = tempfile::tempdir().unwrap();
    dshs()
        .arg("validate")
        .arg(&good.path)
        .arg(dir.path().join("missing.jsonl"))
        .assert()
        .code(2);
}

#[test]
fn unsupported_version_and_unknown_type_exit_3() {
    let log = write(&lines(&[r#"{"type":"session","version":5,"id":"s"}"#]));
    let (f, s) = json(&log.path, 3);
    assert_eq!(codes(&f), ["format-version-unsupported"]);
    assert_eq!(s["status"], "unsupported");
    assert_eq!(s["version"], 5);
    let unknown = r#"{"type":"acme/new","seq":1,"time":0,"data":{}}"#;
    let end = END.replace(r#""seq":1"#, r#""seq":2"#);
    let log = write(&lines(&[HEADER, START, unknown, &end]));
    let (f, s) = json(&log.path, 3);
    assert_eq!(codes(&f), ["unknown-event-type"]);
    assert_eq!(s["status"], "unsupported");
}

#[test]
fn control_characters_in_event_types_are_escaped_in_human_output() {
    let event = r#"{"type":"acme/\u001b[31mred","seq":1,"time":0,"data":{}}"#;
    let end = END.replace(r#""seq":1"#, r#""seq":2"#);
    let log = write(&lines(&[HEADER, START, event, &end]));
    let (stdout, _) = human(&log.path, 3);
    assert!(!stdout.contains('\u{1b}'), "{stdout:?}");
}

#[test]
fn summary_counts_packed_members_and_excludes_the_crash_tail() {
    let v0 = r#"{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}"#;
    let packed = r#"{"type":"text-chunks","seq0":2,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}"#;
    let rows = [
        v0,
        START,
        r#"{"type":"step/start","seq":1,"time":0,"data":{"turn":1,"step":1}}"#,
        packed,
        r#"{"type":"step/end","seq":5,"time":0,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"turn/end","seq":6,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        "garbage",
        r#"{"type":"turn/start","seq":8,"time":0,"data":{"turn":2}}"#,
    ];
    let mut bytes = lines(&rows);
    bytes.extend_from_slice(br#"{"type":"turn/end","seq":9"#);
    let log = write_as("session.jsonl", &bytes);
    let (f, s) = json(&log.path, 0);
    assert_eq!(codes(&f), ["crash-tail", "torn-line"]);
    // 7 events: 4 rows, one of them a packed row of 3; neither the tail nor the torn line.
    assert_eq!(s["events"], 7);
    assert_eq!(s["version"], 0);
    assert_eq!(s["openTurn"], false);
    assert_eq!(s["tornTail"], true);
    assert_eq!(s["warnings"], 2);
    assert_eq!(s["errors"], 0);
}
