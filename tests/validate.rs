//! The `dshs validate` command-line contract (CLI.md "Global", "Exit status", "validate"):
//! JSON Lines shape, statuses, the human format, flags, several files, stdin, colour and
//! escaping of untrusted text.

mod common;

use std::path::{Path, PathBuf};

use common::{dshs, json_lines};
use predicates::prelude::*;
use serde_json::Value;

const H3: &str = r#"{"type":"session","version":3,"id":"s1","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;
const TURN_START: &str = r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#;
const TURN_END: &str =
    r#"{"type":"turn/end","seq":1,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#;

/// Log texts with a known verdict.
fn clean() -> String {
    format!("{H3}\n{TURN_START}\n{TURN_END}\n")
}
/// One warning (open turn at end), valid.
fn warning_only() -> String {
    format!("{H3}\n{TURN_START}\n")
}
/// One error (turn 2 first) and one warning (open turn).
fn invalid() -> String {
    format!(
        "{H3}\n{}\n",
        TURN_START.replace(r#""turn":1"#, r#""turn":2"#)
    )
}
/// Unsupported: an unknown required event type.
fn unsupported() -> String {
    format!(
        "{H3}\n{}\n",
        r#"{"type":"acme/new","seq":0,"time":0,"data":{}}"#
    )
}

struct Dir {
    dir: tempfile::TempDir,
}

impl Dir {
    fn new() -> Dir {
        Dir {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).expect("write log");
        p
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

fn validate_json(args: &[&str], files: &[&Path]) -> (i32, Vec<Value>) {
    let out = dshs()
        .arg("validate")
        .args(["--format", "json"])
        .args(args)
        .args(files)
        .output()
        .expect("runs");
    (out.status.code().unwrap_or(-1), json_lines(&out.stdout))
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    k.sort_unstable();
    k
}

// --- JSON Lines ------------------------------------------------------------------------------

#[test]
fn json_lines_have_exactly_the_contract_keys() {
    let d = Dir::new();
    let f = d.file("s.jsonl", &invalid());
    let (code, records) = validate_json(&[], &[&f]);
    assert_eq!(code, 1);
    assert_eq!(
        records.len(),
        3,
        "two findings then one summary: {records:#?}"
    );
    let mut finding_keys = vec![
        "type",
        "file",
        "code",
        "severity",
        "line",
        "byte",
        "seq",
        "eventType",
        "message",
    ];
    finding_keys.sort_unstable();
    for r in &records[..2] {
        assert_eq!(keys(r), finding_keys);
        assert_eq!(r["type"], "finding");
        assert_eq!(r["file"], f.to_str().expect("utf-8 path"));
        assert!(r["code"].is_string() && r["message"].is_string());
        assert!(r["severity"] == "error" || r["severity"] == "warning");
        assert!(r["line"].as_u64().is_some_and(|l| l >= 1));
        assert!(r["byte"].is_u64());
        assert!(r["seq"].is_u64() || r["seq"].is_null());
        assert!(r["eventType"].is_string() || r["eventType"].is_null());
    }
    assert_eq!(records[0]["code"], "turn-number-unexpected");
    assert_eq!(records[0]["severity"], "error");
    assert_eq!(records[0]["line"], 2);
    // The byte offset is where the line starts.
    assert_eq!(records[0]["byte"], H3.len() as u64 + 1);
    assert_eq!(records[0]["seq"], 0);
    assert_eq!(records[0]["eventType"], "turn/start");
    assert_eq!(records[1]["code"], "open-turn-at-end");
    assert_eq!(records[1]["severity"], "warning");

    let summary = &records[2];
    let mut summary_keys = vec![
        "type",
        "file",
        "status",
        "version",
        "events",
        "errors",
        "warnings",
        "surfaceNodes",
        "openTurn",
        "tornTail",
    ];
    summary_keys.sort_unstable();
    assert_eq!(keys(summary), summary_keys);
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["status"], "invalid");
    assert_eq!(summary["version"], 3);
    assert_eq!(summary["events"], 1);
    assert_eq!(summary["errors"], 1);
    assert_eq!(summary["warnings"], 1);
    assert_eq!(summary["surfaceNodes"], 0);
    assert_eq!(summary["openTurn"], true);
    assert_eq!(summary["tornTail"], false);
}

#[test]
fn a_finding_without_a_seq_or_type_has_nulls() {
    let d = Dir::new();
    let f = d.file("s.jsonl", &format!("{}\n", H3.replace(r#""id":"s1","#, "")));
    let (code, records) = validate_json(&[], &[&f]);
    assert_eq!(code, 1);
    assert_eq!(records[0]["code"], "header-field-invalid");
    assert_eq!(
        (records[0]["line"].clone(), records[0]["byte"].clone()),
        (1.into(), 0.into())
    );
    assert!(records[0]["seq"].is_null());
    assert!(records[0]["eventType"].is_null());
}

#[test]
fn summary_counts_describe_the_log_as_dsh_loads_it() {
    let d = Dir::new();
    // Two user messages (surface nodes), a closed turn, then a torn line.
    let user = |seq: u64| {
        format!(
            r#"{{"type":"user/message","seq":{seq},"time":0,"data":{{"id":"u{seq}","role":"user","content":[],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#
        )
    };
    let text = format!(
        "{H3}\n{}\n{}\n{}\n{}\n{{\"type\":\"turn/sta",
        user(0),
        TURN_START.replace(r#""seq":0"#, r#""seq":1"#),
        TURN_END.replace(r#""seq":1"#, r#""seq":2"#),
        user(3)
    );
    let f = d.file("s.jsonl", &text);
    let (code, records) = validate_json(&[], &[&f]);
    assert_eq!(code, 0);
    let summary = records.last().expect("summary");
    assert_eq!(summary["status"], "valid");
    assert_eq!(summary["events"], 4);
    assert_eq!(summary["surfaceNodes"], 2);
    assert_eq!(summary["openTurn"], false);
    assert_eq!(summary["tornTail"], true);
    assert_eq!(summary["warnings"], 1);
    assert_eq!(records[0]["code"], "torn-line");
}

#[test]
fn every_status_value_with_its_exit_code() {
    let d = Dir::new();
    let cases = [
        ("valid", clean(), 0),
        ("valid", warning_only(), 0),
        ("invalid", invalid(), 1),
        ("unsupported", unsupported(), 3),
        ("unsupported", "{\"version\":5}\n".to_owned(), 3),
        ("invalid", "not a header\n".to_owned(), 1),
        ("invalid", String::new(), 1),
    ];
    for (i, (status, text, exit)) in cases.iter().enumerate() {
        let f = d.file(&format!("s{i}.jsonl"), text);
        let (code, records) = validate_json(&[], &[&f]);
        assert_eq!(code, *exit, "{text:?}");
        assert_eq!(
            records.last().expect("summary")["status"],
            *status,
            "{text:?}"
        );
    }
    // A file that cannot be read: unreadable, exit 2, still a summary line.
    let missing = d.path().join("missing.jsonl");
    let (code, records) = validate_json(&[], &[&missing]);
    assert_eq!(code, 2);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["status"], "unreadable");
    assert!(records[0]["version"].is_null());
    let out = dshs().arg("validate").arg(&missing).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.starts_with("dshs: error: "), "{stderr}");
}

#[test]
fn refusals_exit_3_and_corruption_exits_1() {
    let d = Dir::new();
    // A type from a later version (v3's system/message in a v2 log) is unknown: exit 3.
    let v2 = r#"{"type":"session","version":2,"id":"s1","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;
    let f = d.file(
        "v2.jsonl",
        &format!(
            "{v2}\n{}\n",
            r#"{"type":"system/message","seq":0,"time":0,"data":{"turn":1,"step":1,"message":{"id":"s","role":"system","content":[],"source":{"kind":"plugin","plugin":"p"}}},"surfaceOp":"append"}"#
        ),
    );
    let (code, records) = validate_json(&[], &[&f]);
    assert_eq!(code, 3);
    assert_eq!(records[0]["code"], "unknown-event-type");
    // A V4 draft: exit 3.
    let v4 = H3.replace(r#""version":3"#, r#""version":4"#);
    let f = d.file(
        "draft.jsonl",
        &format!(
            "{v4}\n{}\n",
            r#"{"type":"user/message","seq":0,"time":0,"data":{"id":"u","role":"user","content":[],"source":{"kind":"plugin","plugin":"p"}},"surfaceOp":"append"}"#
        ),
    );
    let (code, records) = validate_json(&[], &[&f]);
    assert_eq!(
        (code, records[0]["code"].as_str()),
        (3, Some("format-v4-draft"))
    );
    // A retired v0 legacy event is corrupt, not unsupported: exit 1.
    let v0 = r#"{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":0}"#;
    let f = d.file(
        "v0.jsonl",
        &format!(
            "{v0}\n{}\n",
            r#"{"type":"mode/set","seq":0,"time":0,"data":{}}"#
        ),
    );
    let (code, records) = validate_json(&[], &[&f]);
    assert_eq!(
        (code, records[0]["code"].as_str()),
        (1, Some("retired-legacy-event"))
    );
}

// --- human format --------------------------------------------------------------------------

#[test]
fn human_lines_are_file_line_severity_code_seq_message() {
    let d = Dir::new();
    let f = d.file("s.jsonl", &invalid());
    let name = f.to_str().expect("utf-8 path");
    let out = dshs().arg("validate").arg(&f).assert().code(1);
    let stdout = String::from_utf8(out.get_output().stdout.clone()).expect("utf-8");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            format!(
                "{name}:2: error[turn-number-unexpected] seq 0: turn/start expected turn 1, got 2"
            ),
            format!(
                "{name}:2: warning[open-turn-at-end] seq 0: the log ends inside open turn 2 (1 closer would be appended by repair); DSH closes it on resume"
            ),
            format!(
                "{name}: v3, 1 event, 0 surface nodes, open turn: invalid (1 error, 1 warning)"
            ),
        ]
    );
    // A finding without a seq leaves the ` seq N` part out.
    let f = d.file("h.jsonl", &format!("{}\n", H3.replace(r#""id":"s1","#, "")));
    let out = dshs().arg("validate").arg(&f).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let first = stdout.lines().next().expect("a finding");
    let prefix = format!("{}:1: error[header-field-invalid]: ", f.display());
    assert!(first.starts_with(&prefix), "{first}");
}

#[test]
fn the_human_summary_line_per_file() {
    let d = Dir::new();
    let cases = [
        (
            clean(),
            "v3, 2 events, 0 surface nodes: valid (0 errors, 0 warnings)",
        ),
        (
            warning_only(),
            "v3, 1 event, 0 surface nodes, open turn: valid (0 errors, 1 warning)",
        ),
        (
            format!("{H3}\n{TURN_START}\n{{\"torn"),
            "v3, 1 event, 0 surface nodes, open turn, torn tail: valid (0 errors, 2 warnings)",
        ),
        (
            unsupported(),
            "v3, 1 event, 0 surface nodes: unsupported (1 error, 0 warnings)",
        ),
        (
            "{\"version\":9}\n".to_owned(),
            "v9, 0 events, 0 surface nodes: unsupported (1 error, 0 warnings)",
        ),
        (
            "{\"version\":\"x\"}\n".to_owned(),
            "version ?, 0 events, 0 surface nodes: invalid (1 error, 0 warnings)",
        ),
    ];
    for (i, (text, summary)) in cases.iter().enumerate() {
        let f = d.file(&format!("s{i}.jsonl"), text);
        let out = dshs().arg("validate").arg(&f).output().expect("runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let last = stdout.lines().last().expect("summary line");
        assert_eq!(last, format!("{}: {summary}", f.display()), "{text:?}");
    }
}

#[test]
fn quiet_prints_nothing_but_keeps_the_exit_status() {
    let d = Dir::new();
    let f = d.file("s.jsonl", &invalid());
    dshs()
        .args(["-q", "validate"])
        .arg(&f)
        .assert()
        .code(1)
        .stdout(predicate::str::is_empty());
    // JSON too: --quiet means the exit status only.
    dshs()
        .args(["--quiet", "validate", "--format", "json"])
        .arg(&f)
        .assert()
        .code(1)
        .stdout("")
        .stderr("");
}

// --- flags ---------------------------------------------------------------------------------

#[test]
fn deny_warnings_turns_warnings_into_a_failing_status() {
    let d = Dir::new();
    let warn = d.file("w.jsonl", &warning_only());
    let ok = d.file("c.jsonl", &clean());
    let bad = d.file("i.jsonl", &invalid());
    dshs().arg("validate").arg(&warn).assert().code(0);
    dshs()
        .args(["validate", "--deny-warnings"])
        .arg(&warn)
        .assert()
        .code(1);
    dshs()
        .args(["validate", "--deny-warnings"])
        .arg(&ok)
        .assert()
        .code(0);
    dshs()
        .args(["validate", "--deny-warnings"])
        .arg(&bad)
        .assert()
        .code(1);
    // Unsupported stays unsupported.
    let unsup = d.file("u.jsonl", &unsupported());
    dshs()
        .args(["validate", "--deny-warnings"])
        .arg(&unsup)
        .assert()
        .code(3);
    // The status reported is still "valid": the flag is about the exit status.
    let (code, records) = validate_json(&["--deny-warnings"], &[&warn]);
    assert_eq!(code, 1);
    assert_eq!(records.last().expect("summary")["status"], "valid");
}

#[test]
fn max_findings_limits_what_is_printed_not_what_is_counted() {
    let d = Dir::new();
    // Five turn-number errors and an open turn.
    let mut text = format!("{H3}\n");
    for seq in 0..5u64 {
        text.push_str(&format!(
            "{{\"type\":\"turn/start\",\"seq\":{seq},\"time\":0,\"data\":{{\"turn\":9}}}}\n"
        ));
    }
    let f = d.file("s.jsonl", &text);
    let (code, all) = validate_json(&[], &[&f]);
    assert_eq!(code, 1);
    let total = all.len() - 1;
    assert!(total >= 6, "{all:#?}");
    let (code, two) = validate_json(&["--max-findings", "2"], &[&f]);
    assert_eq!(code, 1);
    assert_eq!(two.len(), 3);
    assert_eq!(two[..2], all[..2]);
    let summary = two.last().expect("summary");
    assert_eq!(summary["type"], "summary");
    assert_eq!(
        summary["errors"].as_u64().unwrap_or(0) + summary["warnings"].as_u64().unwrap_or(0),
        total as u64
    );
    let (_, none) = validate_json(&["--max-findings", "0"], &[&f]);
    assert_eq!(none.len(), 1);
    assert_eq!(none[0]["type"], "summary");
    // Human output says how many were held back.
    dshs()
        .args(["validate", "--max-findings", "2"])
        .arg(&f)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(format!(
            "… {} more findings not shown (--max-findings 2)",
            total - 2
        )));
    // The limit is per file.
    let g = d.file("t.jsonl", &text);
    let (_, both) = validate_json(&["--max-findings", "1"], &[&f, &g]);
    assert_eq!(both.len(), 4);
    assert_eq!(both[0]["file"], both[1]["file"]);
    assert_eq!(both[2]["file"], both[3]["file"]);
}

#[test]
fn several_files_report_in_order_and_exit_with_the_worst_status() {
    let d = Dir::new();
    let ok = d.file("ok.jsonl", &clean());
    let warn = d.file("warn.jsonl", &warning_only());
    let bad = d.file("bad.jsonl", &invalid());
    let unsup = d.file("unsup.jsonl", &unsupported());
    let missing = d.path().join("missing.jsonl");
    let cases: [(&[&Path], i32); 7] = [
        (&[&ok, &warn], 0),
        (&[&ok, &bad], 1),
        (&[&bad, &ok], 1),
        (&[&bad, &unsup, &ok], 3),
        (&[&ok, &missing], 2),
        (&[&bad, &missing], 2),
        (&[&missing, &unsup], 3),
    ];
    for (files, exit) in cases {
        let (code, records) = validate_json(&[], files);
        assert_eq!(code, exit, "{files:?}");
        let summaries: Vec<&str> = records
            .iter()
            .filter(|r| r["type"] == "summary")
            .map(|r| r["file"].as_str().unwrap_or_default())
            .collect();
        let names: Vec<&str> = files
            .iter()
            .map(|p| p.to_str().unwrap_or_default())
            .collect();
        assert_eq!(summaries, names);
    }
    // Findings come before their own file's summary.
    let (_, records) = validate_json(&[], &[&bad, &ok]);
    let kinds: Vec<(&str, &str)> = records
        .iter()
        .map(|r| {
            (
                r["type"].as_str().unwrap_or(""),
                r["file"].as_str().unwrap_or(""),
            )
        })
        .collect();
    let (b, o) = (bad.to_str().unwrap_or(""), ok.to_str().unwrap_or(""));
    assert_eq!(
        kinds,
        [
            ("finding", b),
            ("finding", b),
            ("summary", b),
            ("summary", o)
        ]
    );
}

#[test]
fn a_dash_reads_the_log_from_stdin() {
    let out = dshs()
        .args(["validate", "--format", "json", "-"])
        .write_stdin(invalid())
        .assert()
        .code(1);
    let records = json_lines(&out.get_output().stdout);
    assert_eq!(records[0]["file"], "-");
    assert_eq!(records[0]["code"], "turn-number-unexpected");
    assert_eq!(records.last().expect("summary")["status"], "invalid");
    dshs()
        .args(["validate", "-"])
        .write_stdin(clean())
        .assert()
        .code(0)
        .stdout(predicate::str::starts_with("-: v3, 2 events"));
}

#[test]
fn usage_errors_exit_2() {
    dshs().arg("validate").assert().code(2);
    dshs()
        .args(["validate", "--format", "xml", "x"])
        .assert()
        .code(2);
    dshs()
        .args(["validate", "--max-findings", "many", "x"])
        .assert()
        .code(2);
    dshs()
        .args(["validate", "--color", "sometimes", "x"])
        .assert()
        .code(2);
    dshs()
        .args(["validate", "--frobnicate", "x"])
        .assert()
        .code(2);
}

// --- --known-types / DSHS_KNOWN_TYPES -----------------------------------------------------

#[test]
fn known_types_from_the_flag_and_the_environment_add_up() {
    let d = Dir::new();
    let log = d.file(
        "s.jsonl",
        &format!(
            "{H3}\n{}\n{}\n",
            r#"{"type":"acme/a","seq":0,"time":0,"data":{}}"#,
            r#"{"type":"acme/b","seq":1,"time":0,"data":{}}"#
        ),
    );
    let a = d.file("a.txt", "# fork types\nacme/a\n");
    let b = d.file("b.txt", "acme/b 3-4\n");
    let none = d.file("none.txt", "\n# nothing\n");
    dshs().arg("validate").arg(&log).assert().code(3);
    dshs()
        .arg("--known-types")
        .arg(&a)
        .arg("validate")
        .arg(&log)
        .assert()
        .code(3);
    dshs()
        .arg("--known-types")
        .arg(&a)
        .arg("--known-types")
        .arg(&b)
        .arg("validate")
        .arg(&log)
        .assert()
        .code(0);
    // The environment holds a path list; it adds to the flag.
    dshs()
        .env("DSHS_KNOWN_TYPES", &b)
        .arg("--known-types")
        .arg(&a)
        .arg("validate")
        .arg(&log)
        .assert()
        .code(0);
    let list = std::env::join_paths([&a, &none, &b]).expect("path list");
    dshs()
        .env("DSHS_KNOWN_TYPES", &list)
        .arg("validate")
        .arg(&log)
        .assert()
        .code(0);
    // A global option: it may follow the subcommand too.
    dshs()
        .args(["validate", "--known-types"])
        .arg(&a)
        .arg("--known-types")
        .arg(&b)
        .arg(&log)
        .assert()
        .code(0);
    // Version lists restrict a line: acme/b is declared for v3-4 only.
    let v2 = d.file(
        "v2.jsonl",
        &format!(
            "{}\n{}\n",
            H3.replace(r#""version":3"#, r#""version":2"#),
            r#"{"type":"acme/b","seq":0,"time":0,"data":{}}"#
        ),
    );
    dshs()
        .arg("--known-types")
        .arg(&b)
        .arg("validate")
        .arg(&v2)
        .assert()
        .code(3);
}

#[test]
fn a_malformed_or_missing_known_types_file_is_a_usage_error() {
    let d = Dir::new();
    let log = d.file("s.jsonl", &clean());
    let bad = d.file("bad.txt", "acme/a\nacme/b 7\n");
    dshs()
        .arg("--known-types")
        .arg(&bad)
        .arg("validate")
        .arg(&log)
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("bad.txt:2:"));
    dshs()
        .env("DSHS_KNOWN_TYPES", &bad)
        .arg("validate")
        .arg(&log)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("DSHS_KNOWN_TYPES"));
    dshs()
        .arg("--known-types")
        .arg(d.path().join("nope.txt"))
        .arg("validate")
        .arg(&log)
        .assert()
        .code(2);
}

// --- colour and escaping -------------------------------------------------------------------

const ESC: char = '\u{1b}';

#[test]
fn colour_only_when_asked_or_on_a_terminal() {
    let d = Dir::new();
    let f = d.file("s.jsonl", &invalid());
    let has_esc = |args: &[&str], no_color: Option<&str>| {
        let mut cmd = dshs();
        if let Some(v) = no_color {
            cmd.env("NO_COLOR", v);
        }
        let out = cmd.args(args).arg(&f).output().expect("runs");
        String::from_utf8_lossy(&out.stdout).contains(ESC)
    };
    assert!(has_esc(&["--color", "always", "validate"], None));
    assert!(has_esc(&["validate", "--color", "always"], None));
    // `always` means always, NO_COLOR or not.
    assert!(has_esc(&["--color", "always", "validate"], Some("1")));
    assert!(!has_esc(&["--color", "never", "validate"], None));
    // auto (the default) on a pipe: no colour; NO_COLOR does not turn it on either.
    assert!(!has_esc(&["validate"], None));
    assert!(!has_esc(&["--color", "auto", "validate"], Some("1")));
    // JSON is never coloured.
    assert!(!has_esc(
        &["--color", "always", "validate", "--format", "json"],
        None
    ));
    // Colour decorates; the text stays the same once escapes are stripped.
    let out = dshs()
        .args(["--color", "always", "validate"])
        .arg(&f)
        .output()
        .expect("runs");
    let coloured = String::from_utf8_lossy(&out.stdout).into_owned();
    let plain = dshs()
        .arg("validate")
        .arg(&f)
        .output()
        .expect("runs")
        .stdout;
    assert_eq!(strip_ansi(&coloured), String::from_utf8_lossy(&plain));
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == ESC {
            // CSI: ESC [ … final byte in @..~
            for d in chars.by_ref() {
                if ('@'..='~').contains(&d) && d != '[' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn untrusted_text_is_escaped_in_human_output_and_exact_in_json() {
    let d = Dir::new();
    // An event type and a cwd carrying a terminal escape and a newline.
    let header = H3.replace(
        r#""isSeeded":false"#,
        r#""isSeeded":false,"cwd":"rel\u001b]0;pwned\u0007\nx""#,
    );
    let text = format!(
        "{header}\n{}\n",
        r#"{"type":"acme/\u001b[31mred\nnext","seq":0,"time":0,"data":{}}"#
    );
    let f = d.file("s.jsonl", &text);
    // (A header error outranks the unknown type for the status, §21.6: invalid, exit 1.)
    let out = dshs().arg("validate").arg(&f).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        !stdout.contains(ESC),
        "raw ESC reached the terminal: {stdout:?}"
    );
    assert!(
        !stdout.contains('\u{7}'),
        "raw BEL reached the terminal: {stdout:?}"
    );
    // One line per finding plus the summary: no newline smuggled into a line.
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(lines[0].contains(r"\u{1b}]0;pwned\u{7}\nx"), "{}", lines[0]);
    assert!(
        lines[1].contains(r"acme/\u{1b}[31mred\nnext"),
        "{}",
        lines[1]
    );
    // JSON keeps the text exact (JSON-escaped, so still one record per line).
    let (_, records) = validate_json(&[], &[&f]);
    assert_eq!(records.len(), 3);
    assert_eq!(records[1]["eventType"], "acme/\u{1b}[31mred\nnext");
    assert!(
        records[0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("rel\u{1b}]0;pwned\u{7}\nx")
    );
}

#[test]
fn a_file_name_with_control_characters_is_escaped_too() {
    let d = Dir::new();
    let f = d.file("evil\u{1b}[2Jname\n.jsonl", &invalid());
    let out = dshs().arg("validate").arg(&f).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(!stdout.contains(ESC), "{stdout:?}");
    assert_eq!(stdout.lines().count(), 3, "{stdout:?}");
    assert!(stdout.contains(r"evil\u{1b}[2Jname\n.jsonl"), "{stdout}");
}

// --- inputs and pipes ----------------------------------------------------------------------

#[test]
fn a_session_directory_resolves_to_its_newest_generation() {
    let d = Dir::new();
    let session = d.path().join("--w--").join("s1");
    std::fs::create_dir_all(&session).expect("dirs");
    let v0 =
        r#"{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":0,"cwd":"/w"}"#;
    let v3 = H3.replace(r#""isSeeded":false"#, r#""isSeeded":false,"cwd":"/w""#);
    std::fs::write(session.join("session.jsonl"), format!("{v0}\n")).expect("write");
    std::fs::write(
        session.join("session.v3.jsonl"),
        format!("{v3}\n{TURN_START}\n"),
    )
    .expect("write");
    let (code, records) = validate_json(&[], &[&session]);
    assert_eq!(code, 0);
    let summary = records.last().expect("summary");
    assert_eq!(summary["version"], 3);
    assert_eq!(summary["events"], 1);
    // The layout checks run on the resolved file: the id and cwd match, so no warning
    // beyond the open turn.
    let codes: Vec<&str> = records.iter().filter_map(|r| r["code"].as_str()).collect();
    assert_eq!(codes, ["open-turn-at-end"]);
    // A directory without a log is unreadable.
    let empty = d.path().join("empty");
    std::fs::create_dir_all(&empty).expect("dir");
    let (code, records) = validate_json(&[], &[&empty]);
    assert_eq!(code, 2);
    assert_eq!(records[0]["status"], "unreadable");
}

#[test]
fn a_closed_pipe_ends_quietly_with_status_0() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let d = Dir::new();
    // Enough findings to overflow any pipe buffer (about a megabyte of output).
    let mut text = format!("{H3}\n");
    for seq in 0..6000u64 {
        text.push_str(&format!(
            "{{\"type\":\"turn/start\",\"seq\":{seq},\"time\":0,\"data\":{{\"turn\":9}}}}\n"
        ));
    }
    let f = d.file("big.jsonl", &text);
    let bin = assert_cmd::cargo::cargo_bin("dshs");
    let mut child = Command::new(bin)
        .arg("validate")
        .arg(&f)
        .env_remove("NO_COLOR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("piped");
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("one line");
    // The reader is gone now (`| head -1`).
    assert!(first.contains("turn-number-unexpected"), "{first}");
    let out = child.wait_with_output().expect("exits");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue 37 item 18: a session directory holding one generation both plain and compressed
/// does not call either "older": the note says they are the same generation, which one is
/// read and why; a truly older generation is still named as such.
#[test]
fn the_same_generation_plain_and_compressed_is_not_called_older() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("sess");
    std::fs::create_dir_all(&s).unwrap();
    let log = std::fs::read(common::testdata("sample/crashed.v3.jsonl")).unwrap();
    std::fs::write(s.join("session.v3.jsonl"), &log).unwrap();
    std::fs::write(s.join("session.v3.jsonl.zstd"), common::compress(&log, 3)).unwrap();
    std::fs::write(s.join("session.jsonl"), &log).unwrap();
    let out = common::dshs().arg("validate").arg(&s).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "session.v3.jsonl and session.v3.jsonl.zstd hold the same generation; reading session.v3.jsonl (the plain file is preferred"
        ),
        "{err}"
    );
    assert!(
        err.contains("older generation not read: session.jsonl\n"),
        "{err}"
    );
    assert!(!err.contains("not read: session.v3.jsonl.zstd"), "{err}");
}
