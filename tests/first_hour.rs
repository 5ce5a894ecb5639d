//! What a newcomer meets in the first hour (issue 24): commands say what they read and what
//! they left out, findings come in file order and once per cause, and messages tell the truth
//! about what a log is.

mod common;

use std::fs;
use std::path::Path;

use common::{dshs, json_lines, testdata};

const H3: &str = r#"{"type":"session","version":3,"id":"s1","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;
const TURN_START: &str = r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#;
const TURN_END: &str =
    r#"{"type":"turn/end","seq":1,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#;

fn clean() -> String {
    format!("{H3}\n{TURN_START}\n{TURN_END}\n")
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, text).expect("write log");
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = dshs().args(args).output().expect("run dshs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// Finding 4: a directory argument is a storage root; what a walk of it leaves out is said.

#[test]
fn validate_of_a_root_names_the_loose_logs_it_does_not_read() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    write(&root.join("--p--/s1/session.v3.jsonl"), &clean());
    write(&root.join("loose/a.jsonl"), &clean());
    write(&root.join("--p--/s1/copy.v3.jsonl"), &clean());
    let (code, stdout, stderr) = run(&["validate", root.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let summaries = stdout.lines().filter(|l| l.contains(": valid (")).count();
    assert_eq!(summaries, 1, "one session validated: {stdout}");
    assert!(
        stderr.contains("2 log files below it were not read")
            && stderr.contains("a.jsonl")
            && stderr.contains("copy.v3.jsonl"),
        "the skipped logs are named: {stderr}"
    );
}

#[test]
fn ls_of_a_directory_of_loose_logs_says_it_is_not_a_storage_root() {
    let (code, stdout, stderr) = run(&["ls", testdata("fixtures").to_str().expect("utf-8")]);
    assert_eq!(code, 0, "the directory could be listed: {stderr}");
    assert!(stdout.contains("0 sessions"), "{stdout}");
    assert!(
        stderr.contains("is not a DSH storage root") && stderr.contains("log files below it"),
        "{stderr}"
    );
}

#[test]
fn a_real_storage_root_gets_no_note() {
    let (code, _, stderr) = run(&["ls", testdata("home/.dsh/sessions").to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(stderr.is_empty(), "{stderr}");
}

// Finding 5: the findings of one file come in line order, also those found at the end.

#[test]
fn findings_are_printed_in_line_order() {
    for rel in [
        "fixtures/upstream__web__fresh-round-trip__session.concrete.jsonl",
        "sample/crashed.v3.jsonl",
    ] {
        let file = testdata(rel);
        let out = dshs()
            .args(["validate", "--format", "json"])
            .arg(&file)
            .output()
            .expect("run dshs");
        let positions: Vec<(u64, u64)> = json_lines(&out.stdout)
            .iter()
            .filter(|r| r["type"] == "finding")
            .map(|r| {
                (
                    r["line"].as_u64().expect("line"),
                    r["byte"].as_u64().expect("byte"),
                )
            })
            .collect();
        assert!(positions.len() >= 2, "{rel}: {positions:?}");
        let mut sorted = positions.clone();
        sorted.sort();
        assert_eq!(positions, sorted, "{rel}");
    }
}

#[test]
fn max_findings_keeps_the_first_in_line_order() {
    let file = testdata("fixtures/upstream__web__fresh-round-trip__session.concrete.jsonl");
    let out = dshs()
        .args(["validate", "--format", "json", "--max-findings", "2"])
        .arg(&file)
        .output()
        .expect("run dshs");
    let lines: Vec<u64> = json_lines(&out.stdout)
        .iter()
        .filter(|r| r["type"] == "finding")
        .filter_map(|r| r["line"].as_u64())
        .collect();
    assert_eq!(lines, [1, 2]);
}

// Finding 9: one bad row, one finding.

#[test]
fn a_malformed_committed_row_is_one_finding_naming_its_rule() {
    let text = format!(
        "{H3}\n{}\n{}\n{}\n",
        r#"{"type":"goal/change","seq":0,"time":0,"data":{},"sourceEventSeqs":[[2,1]]}"#,
        TURN_START.replace(r#""seq":0"#, r#""seq":1"#),
        TURN_END.replace(r#""seq":1"#, r#""seq":2"#),
    );
    let out = dshs()
        .args(["validate", "--format", "json", "-"])
        .write_stdin(text)
        .output()
        .expect("run dshs");
    let records = json_lines(&out.stdout);
    let findings: Vec<_> = records.iter().filter(|r| r["type"] == "finding").collect();
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0]["code"], "committed-malformed-row");
    let message = findings[0]["message"].as_str().expect("message");
    assert!(
        message.contains("rule source-ranges-malformed"),
        "{message}"
    );
    assert_eq!(records.last().expect("summary")["errors"], 1);
}

// Finding 10: `ls` rows name the session directory, so two holding one id differ.

#[test]
fn ls_rows_name_their_session_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    write(&root.join("--p--/s1/session.v3.jsonl"), &clean());
    write(&root.join("--p--/s1-backup/session.v3.jsonl"), &clean());
    let (code, stdout, stderr) = run(&["ls", root.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].ends_with("PATH"), "{stdout}");
    assert!(
        lines[1].ends_with("--p--/s1") || lines[2].ends_with("--p--/s1"),
        "{stdout}"
    );
    assert!(
        lines.iter().any(|l| l.ends_with("--p--/s1-backup")),
        "{stdout}"
    );
    assert_ne!(lines[1], lines[2], "the same id, told apart: {stdout}");
    let out = dshs()
        .args(["ls", "--format", "json"])
        .arg(root)
        .output()
        .expect("run dshs");
    let paths: Vec<String> = json_lines(&out.stdout)
        .iter()
        .filter_map(|r| r["path"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(paths.len(), 2);
    assert!(
        paths.iter().all(|p| p.starts_with(root.to_str().unwrap())),
        "{paths:?}"
    );
}

// Finding 6: a V4-draft log is described as what it is (FORMAT.md §21.2's wording).

#[test]
fn a_v4_draft_log_is_called_format_3_bodies_under_a_version_4_header() {
    let file = testdata("fixtures/wangnaiyu__snapshots__sdk__text-turn__session.v4.concrete.jsonl");
    let out = dshs()
        .args(["validate", "--format", "json"])
        .arg(&file)
        .output()
        .expect("run dshs");
    assert_eq!(out.status.code(), Some(3));
    let records = json_lines(&out.stdout);
    let draft = records
        .iter()
        .find(|r| r["code"] == "format-v4-draft")
        .expect("a format-v4-draft finding");
    let message = draft["message"].as_str().expect("message");
    for part in [
        "header says version 4",
        "format-3 bodies under a version-4 header",
        "\"legacy V4\"",
        "dshs does not read this variant",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    assert!(!message.contains("no released DSH can open"), "{message}");
    let (_, explain, _) = run(&["explain", "format-v4-draft"]);
    assert!(explain.contains("legacy V4"), "{explain}");
}

// Finding 7: an unknown type is told apart from a retired one.

fn unknown_type_message(version: u8, event_type: &str, extra: &[&str]) -> (i32, String) {
    let header = H3.replace(r#""version":3"#, &format!(r#""version":{version}"#));
    let text =
        format!("{header}\n{{\"type\":\"{event_type}\",\"seq\":0,\"time\":0,\"data\":{{}}}}\n");
    let out = dshs()
        .args(extra)
        .args(["validate", "--format", "json", "-"])
        .write_stdin(text)
        .output()
        .expect("run dshs");
    let records = json_lines(&out.stdout);
    let message = records
        .iter()
        .find(|r| r["code"] == "unknown-event-type")
        .and_then(|r| r["message"].as_str())
        .unwrap_or_default()
        .to_owned();
    (out.status.code().unwrap_or(-1), message)
}

#[test]
fn a_retired_type_is_not_blamed_on_a_newer_harness() {
    for (version, ty) in [
        (3, "context/message"),
        (3, "bash/sandbox-mode"),
        (4, "prompt/blocked"),
        (3, "session/inherited"),
        (2, "usage"),
        (3, "assistant/chunk"),
        (2, "mode/set"),
    ] {
        let (code, message) = unknown_type_message(version, ty, &[]);
        assert_eq!(code, 3, "{ty}: still refused as unsupported (§7.1)");
        assert!(message.contains("retired type"), "{ty}: {message}");
        assert!(!message.contains("newer harness"), "{ty}: {message}");
    }
    let (_, message) = unknown_type_message(3, "assistant/chunk", &[]);
    assert!(message.contains("v0–v1"), "{message}");
}

#[test]
fn an_unknown_type_points_at_newer_harnesses_forks_and_known_types() {
    let (code, message) = unknown_type_message(3, "run/task-profile", &[]);
    assert_eq!(code, 3);
    assert!(
        message.contains("newer harness") && message.contains("fork"),
        "{message}"
    );
    assert!(message.contains("--known-types"), "{message}");
    assert!(!message.contains("retired"), "{message}");
    let (_, message) = unknown_type_message(2, "system/message", &[]);
    assert!(message.contains("format v3 and later"), "{message}");
}

// Finding 8: a header without `delegationDepth` — invalid, yet the inspection commands show
// what is there; the early-v0 hint only for what is otherwise a DSH header.

#[test]
fn a_header_without_delegation_depth_is_invalid_but_its_surface_and_messages_show() {
    let file = testdata("fixtures/upstream__web__fresh-round-trip__session.concrete.jsonl");
    let f = file.to_str().expect("utf-8");
    let (code, _, _) = run(&["validate", f]);
    assert_eq!(code, 1, "validate's verdict stays");
    let (code, stdout, stderr) = run(&["surface", "--format", "json", f]);
    assert_eq!(code, 1, "the log is invalid (CLI.md exit status)");
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("a surface document");
    let seqs: Vec<u64> = doc["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["seq"].as_u64())
        .collect();
    assert_eq!(seqs, [1, 55, 57, 91]);
    assert!(
        stderr.contains("header-field-invalid") && stderr.contains("delegationDepth"),
        "the error is stated: {stderr}"
    );
    let (code, stdout, stderr) = run(&["derive", "--format", "ndjson", f]);
    assert_eq!(code, 1);
    assert_eq!(stdout.lines().count(), 4, "{stdout}");
    assert!(stderr.contains("delegationDepth"), "{stderr}");
    let (code, stdout, stderr) = run(&["stats", f]);
    assert_eq!(code, 1);
    assert!(stdout.contains("surface"), "{stdout}");
    assert!(stderr.contains("invalid"), "{stderr}");
}

#[test]
fn other_header_errors_still_stop_surface() {
    let text = format!("{}\n{TURN_START}\n", H3.replace(r#""id":"s1","#, ""));
    let out = dshs()
        .args(["surface", "-"])
        .write_stdin(text)
        .output()
        .expect("run dshs");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
}

#[test]
fn the_early_v0_hint_is_only_for_a_dsh_header() {
    let hint = "early v0 snapshots";
    let out = dshs()
        .args(["validate", "-"])
        .write_stdin("{\"type\":\"session\",\"version\":0,\"id\":\"x\",\"createdAt\":1}\n")
        .output()
        .expect("run dshs");
    let dsh = String::from_utf8_lossy(&out.stdout);
    assert!(dsh.contains(hint), "{dsh}");
    for text in [
        "{\"version\":0,\"kind\":\"session\"}\n",
        "{\"version\":0}\n",
    ] {
        let out = dshs()
            .args(["validate", "-"])
            .write_stdin(text)
            .output()
            .expect("run dshs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("`delegationDepth` is missing"), "{stdout}");
        assert!(!stdout.contains(hint), "{text}: {stdout}");
    }
}

// Finding 11: a log with no surfaceOp anywhere is shown by the linear scan of §21.9a.

#[test]
fn a_log_without_any_surface_marker_is_shown_by_the_linear_scan() {
    let file = testdata("v0/no-surface-markers.jsonl");
    let f = file.to_str().expect("utf-8");
    let (code, stdout, _) = run(&["validate", f]);
    assert_eq!(code, 1, "validate's verdict stays: {stdout}");
    assert!(stdout.contains("surface-op-missing"), "{stdout}");
    let (code, stdout, stderr) = run(&["surface", "--format", "json", f]);
    assert_eq!(code, 1, "{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("a surface document");
    let seqs: Vec<u64> = doc["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["seq"].as_u64())
        .collect();
    // The same nodes as the marked original (every marker there is an append).
    assert_eq!(seqs, [4, 5, 37]);
    assert!(
        stderr.contains("warning") && stderr.contains("§21.9a"),
        "{stderr}"
    );
    let (code, stdout, stderr) = run(&["derive", "--format", "ndjson", f]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
    assert!(stderr.contains("§21.9a"), "{stderr}");
}

#[test]
fn a_log_with_some_markers_gets_no_fallback() {
    let marked = fs::read_to_string(testdata(
        "fixtures/upstream__acp-agent__text-turn__session.concrete.jsonl",
    ))
    .expect("fixture");
    // Drop only the first marker: a log with markers is not a pre-surface log.
    let text = marked.replacen(r#","surfaceOp":"append""#, "", 1);
    assert_ne!(text, marked);
    let out = dshs()
        .args(["surface", "-"])
        .write_stdin(text)
        .output()
        .expect("run dshs");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "no surface shown");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("surface-op-missing") && !stderr.contains("§21.9a"),
        "{stderr}"
    );
}
