//! `dshs show`: one line per event (or JSON Lines), selection filters, shadow and replace
//! marks, crash-tail rows, stdin, escaping, colour and closed pipes.

mod common;

use assert_cmd::Command;
use common::{dshs, json_lines, testdata};
use predicates::prelude::*;
use serde_json::{Value, json};

const SAMPLE: &str = "sample/session.v4.jsonl";
const PACKED: &str = "v0/packed-compaction.jsonl";

/// Every time is printed in UTC, whatever the machine's zone.
fn show() -> Command {
    let mut c = dshs();
    c.env("TZ", "UTC").arg("show");
    c
}

fn records(args: &[&str], file: &str) -> Vec<Value> {
    let out = show()
        .args(["--format", "json"])
        .args(args)
        .arg(testdata(file))
        .assert()
        .success();
    json_lines(&out.get_output().stdout)
}

fn seqs(records: &[Value]) -> Vec<u64> {
    records.iter().filter_map(|r| r["seq"].as_u64()).collect()
}

fn seqs_where(records: &[Value], key: &str, value: &Value) -> Vec<u64> {
    records
        .iter()
        .filter(|r| &r[key] == value)
        .filter_map(|r| r["seq"].as_u64())
        .collect()
}

fn stdout_lines(args: &[&str], file: &str) -> Vec<String> {
    let out = show().args(args).arg(testdata(file)).assert().success();
    String::from_utf8(out.get_output().stdout.clone())
        .expect("utf-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The human line of event `seq` (lines start with the right-aligned seq).
fn line_of(lines: &[String], seq: u64) -> &str {
    lines
        .iter()
        .find(|l| l.split_whitespace().next() == Some(&seq.to_string()))
        .unwrap_or_else(|| panic!("no line for seq {seq} in {lines:#?}"))
}

#[test]
fn sample_lists_every_event_with_time_type_turn_and_marks() {
    let lines = stdout_lines(&[], SAMPLE);
    assert_eq!(lines.len(), 27, "{lines:#?}");
    assert_eq!(
        line_of(&lines, 0),
        " 0 1970-01-01 00:00:01.000   permission/preset   -     {\"preset\":\"danger-full-access\"}"
    );
    let system = line_of(&lines, 7);
    assert!(system.contains(" + system/message      1.1 "), "{system}");
    for shadowed in [8, 9] {
        let l = line_of(&lines, shadowed);
        assert!(l.contains(" - user/message "), "{l}");
        assert!(l.ends_with("[shadowed by 21]"), "{l}");
    }
    let replacement = line_of(&lines, 21);
    assert!(replacement.contains(" + user/message "), "{replacement}");
    assert!(
        replacement.ends_with("[replaces 8..9: 8, 9]"),
        "{replacement}"
    );
    assert!(line_of(&lines, 15).contains("ok call_compaction_marker: \"alpha\""));
    assert!(line_of(&lines, 26).contains("turn 1 completed"));
    assert!(line_of(&lines, 24).contains("\"COMPACTION RECOVERED\" · 20 in / 4 out"));
}

#[test]
fn json_lines_carry_the_event_and_the_marks() {
    let recs = records(&[], SAMPLE);
    assert_eq!(seqs(&recs), (0..27).collect::<Vec<u64>>());
    assert!(recs.iter().all(|r| r["record"] == "event"));
    // The surface nodes still visible are exactly the final surface.
    assert_eq!(
        seqs_where(&recs, "surface", &json!("visible")),
        [7, 13, 15, 21, 24]
    );
    assert_eq!(seqs_where(&recs, "surface", &json!("shadowed")), [8, 9]);
    assert_eq!(seqs_where(&recs, "shadowedBy", &json!(21)), [8, 9]);
    let r21 = &recs[21];
    assert_eq!(
        r21["replaces"],
        json!({"startSeq": 8, "endSeq": 9, "shadowedSeqs": [8, 9]})
    );
    assert_eq!(r21["surfaceOp"]["op"], "replace");
    let r12 = &recs[12];
    assert_eq!(r12["type"], "session/title");
    assert_eq!(r12["time"], 1012);
    assert_eq!(r12["localTime"], "1970-01-01 00:00:01.012");
    assert_eq!(
        (r12["turn"].clone(), r12["step"].clone()),
        (json!(1), Value::Null)
    );
    assert_eq!(r12["line"], 14);
    assert_eq!(r12["surface"], Value::Null);
    assert_eq!(r12["crashTail"], false);
    // `data` is the stored payload (compared as JSON values, not text).
    let text = std::fs::read_to_string(testdata(SAMPLE)).unwrap();
    let stored: Value = serde_json::from_str(text.lines().nth(13).unwrap()).unwrap();
    assert_eq!(r12["data"], stored["data"]);
    assert_eq!(recs[15]["sourceEventSeqs"], json!([14]));
}

#[test]
fn v0_packed_rows_expand_and_a_compaction_shadows_its_span() {
    let recs = records(&[], PACKED);
    assert_eq!(seqs(&recs), (0..32).collect::<Vec<u64>>());
    assert_eq!(
        seqs_where(&recs, "packed", &json!(true)),
        [4, 5, 6, 16, 17, 18, 19]
    );
    assert_eq!(seqs_where(&recs, "shadowedBy", &json!(29)), [2, 10, 12]);
    assert_eq!(seqs_where(&recs, "surface", &json!("visible")), [23, 29]);
    assert_eq!(
        recs[29]["replaces"],
        json!({"startSeq": 2, "endSeq": 12, "shadowedSeqs": [2, 10, 12]})
    );
    // A packed member is the expanded event (§5.2).
    assert_eq!(
        recs[17]["data"],
        json!({"turn": 1, "step": 2, "chunk": {"type": "text-delta", "index": 0, "text": " files"}})
    );
    assert_eq!(recs[17]["time"], 1_767_225_601_600_i64);

    let lines = stdout_lines(&[], PACKED);
    assert!(line_of(&lines, 17).ends_with("text-delta #0 \" files\""));
    assert!(line_of(&lines, 2).ends_with("[shadowed by 29]"));
    assert!(line_of(&lines, 29).ends_with("[replaces 2..12: 2, 10, 12]"));
    assert!(line_of(&lines, 0).contains(" 2026-01-01 00:00:00.000 "));
}

#[test]
fn v0_fixture_with_a_compaction_marks_the_checkpoint() {
    let recs = records(
        &["--type", "user/message"],
        "fixtures/upstream__headless__snapshots__compaction-recovery__session.concrete.jsonl",
    );
    assert_eq!(seqs(&recs), [4, 21]);
    assert_eq!(recs[0]["shadowedBy"], 21);
    assert_eq!(
        recs[1]["replaces"],
        json!({"startSeq": 4, "endSeq": 4, "shadowedSeqs": [4]})
    );
}

#[test]
fn type_filters_match_exactly_or_by_family() {
    assert_eq!(seqs(&records(&["--type", "tool/"], SAMPLE)), [14, 15]);
    assert_eq!(
        seqs(&records(
            &["--type", "turn/start", "--type", "turn/end"],
            SAMPLE
        )),
        [4, 26]
    );
    // `tool` without the slash is a type name, and there is no such type.
    assert!(records(&["--type", "tool"], SAMPLE).is_empty());
}

#[test]
fn turn_filter_takes_the_open_turn_for_events_without_one() {
    // The user message (seq 2) has no data.turn but lies inside turn 1.
    assert_eq!(
        seqs(&records(&["--turn", "1"], PACKED)),
        (0..26).collect::<Vec<u64>>()
    );
    assert_eq!(
        seqs(&records(&["--turn", "2..2"], PACKED)),
        (26..32).collect::<Vec<u64>>()
    );
    assert_eq!(
        seqs(&records(&["--turn", "..1", "--type", "turn/"], PACKED)),
        [0, 25]
    );
    assert!(records(&["--turn", "3.."], PACKED).is_empty());
    // Events before the first turn belong to none.
    assert_eq!(
        seqs(&records(
            &["--turn", "1", "--type", "permission/preset"],
            SAMPLE
        )),
        [0u64; 0]
    );
}

#[test]
fn grep_matches_the_stored_line_case_sensitively() {
    // The packed tool-call row names call_ls once; each of its members matches.
    assert_eq!(
        seqs(&records(&["--grep", "call_ls"], PACKED)),
        [4, 5, 6, 7, 10, 11, 12]
    );
    assert!(records(&["--grep", "CALL_LS"], PACKED).is_empty());
    assert_eq!(
        seqs(&records(&["--grep", "call_ls", "--type", "tool/"], PACKED)),
        [11, 12]
    );
}

#[test]
fn bad_turn_ranges_are_usage_errors() {
    for (arg, why) in [
        ("3..1", "empty"),
        ("x", "not a turn number"),
        ("..", "names no turn"),
    ] {
        show()
            .args(["--turn", arg])
            .arg(testdata(SAMPLE))
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(why));
    }
}

#[test]
fn stdin_gives_the_same_selection_as_the_file() {
    let text = std::fs::read(testdata(PACKED)).unwrap();
    let out = show()
        .args(["--format", "json", "-"])
        .write_stdin(text)
        .assert()
        .success();
    assert_eq!(json_lines(&out.get_output().stdout), records(&[], PACKED));
}

const V3: &str =
    r#"{"type":"session","version":3,"id":"s","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;

fn turn_rows(seq0: u64, turn: u64) -> String {
    format!(
        "{{\"type\":\"turn/start\",\"seq\":{seq0},\"time\":0,\"data\":{{\"turn\":{turn}}}}}\n{{\"type\":\"turn/end\",\"seq\":{},\"time\":0,\"data\":{{\"turn\":{turn},\"reason\":{{\"kind\":\"completed\"}}}}}}\n",
        seq0 + 1
    )
}

#[test]
fn crash_tail_rows_are_marked_and_the_torn_line_noted() {
    let log = format!(
        "{V3}\n{}not json\n{{\"type\":\"turn/start\",\"seq\":3,\"time\":0,\"data\":{{\"turn\":2}}}}\n{{\"type\":\"turn/st",
        turn_rows(0, 1)
    );
    let out = show().arg("-").write_stdin(log.clone()).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(!lines[1].contains("[crash tail]"));
    assert!(lines[2].contains("(unusable row)") && lines[2].contains("line 4: invalid JSON"));
    assert!(lines[2].ends_with("[crash tail]") && lines[3].ends_with("[crash tail]"));
    assert!(
        lines[4].contains("line 6: torn final line, 16 bytes"),
        "{}",
        lines[4]
    );

    let out = show()
        .args(["--format", "json", "-"])
        .write_stdin(log)
        .assert()
        .success();
    let recs = json_lines(&out.get_output().stdout);
    let kinds: Vec<&str> = recs.iter().map(|r| r["record"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["event", "event", "bad-row", "event", "torn-line"]);
    assert_eq!(recs[2]["crashTail"], true);
    assert_eq!(recs[2]["line"], 4);
    assert_eq!(recs[3]["crashTail"], true);
    assert_eq!(recs[3]["seq"], 3);
    assert_eq!(recs[4]["bytes"], 16);
}

#[test]
fn committed_damage_still_lists_the_log_and_exits_1() {
    let log = format!("{V3}\n{}not json\n{}", turn_rows(0, 1), turn_rows(3, 2));
    let out = show()
        .args(["--format", "json", "-"])
        .write_stdin(log)
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("invalid log (1 error")
                .and(predicate::str::contains("committed-unparsable")),
        );
    let recs = json_lines(&out.get_output().stdout);
    assert_eq!(recs.len(), 5);
    assert_eq!(recs[2]["record"], "bad-row");
    assert_eq!(recs[2]["crashTail"], false);
    assert_eq!(seqs(&recs), [0, 1, 3, 4]);
    // --quiet drops the note, not the exit status.
    let log = format!("{V3}\n{}not json\n{}", turn_rows(0, 1), turn_rows(3, 2));
    show()
        .args(["-q", "-"])
        .write_stdin(log)
        .assert()
        .code(1)
        .stderr("");
}

#[test]
fn rejected_events_are_marked() {
    let log = format!(
        "{V3}\n{}\n{}\n{}\n{}\n",
        r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#,
        r#"{"type":"user/message","seq":1,"time":0,"data":{"id":"u","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        r#"{"type":"user/message","seq":2,"time":0,"data":{"id":"u2","role":"user","content":[{"type":"text","text":"bad"}],"source":{"kind":"user"}},"sourceEventSeqs":[0],"surfaceOp":{"op":"replace","startSeq":0,"endSeq":0}}"#,
        r#"{"type":"turn/end","seq":3,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    );
    let out = show()
        .arg("-")
        .write_stdin(log.clone())
        .assert()
        .code(1)
        .stderr(predicate::str::contains("[replace-start-not-on-surface]"));
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert!(line_of(&lines, 1).contains(" + user/message "));
    let rejected = line_of(&lines, 2);
    assert!(rejected.contains(" ! user/message ") && rejected.ends_with("[rejected]"));
    let out = show()
        .args(["--format", "json", "-"])
        .write_stdin(log)
        .assert()
        .code(1);
    let recs = json_lines(&out.get_output().stdout);
    assert_eq!(seqs_where(&recs, "surface", &json!("rejected")), [2]);
    assert_eq!(recs[2]["replaces"], Value::Null);
}

#[test]
fn unsupported_and_unreadable_logs() {
    show()
        .arg("-")
        .write_stdin("{\"type\":\"session\",\"version\":9,\"id\":\"s\"}\n")
        .assert()
        .code(3)
        .stdout("")
        .stderr(predicate::str::contains("unsupported"));
    show()
        .arg(testdata("no/such/file.jsonl"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("dshs: error: cannot open"));
}

#[test]
fn control_characters_from_the_log_never_reach_the_terminal() {
    let log = format!(
        "{V3}\n{{\"type\":\"session/title\",\"seq\":0,\"time\":0,\"data\":{{\"title\":\"evil \\u001b[31mred\\u0007 \\u202etitle\",\"messageSeqs\":[],\"source\":{{\"kind\":\"fallback\"}}}}}}\n{{\"type\":\"acme/x\\u001b]0;pwned\\u0007\",\"seq\":1,\"time\":0,\"data\":{{}},\"ignorable\":true}}\n"
    );
    for color in ["never", "always"] {
        let out = show()
            .args(["--color", color, "-"])
            .write_stdin(log.clone())
            .assert()
            .success();
        let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        assert!(
            text.contains(r"evil \u{1b}[31mred\u{7} \u{202e}title"),
            "{text}"
        );
        assert!(text.contains(r"acme/x\u{1b}]0;pwned\u{7}"), "{text}");
        assert!(
            !text.contains('\u{7}') && !text.contains('\u{202e}'),
            "{text:?}"
        );
        assert!(
            !text.contains("\u{1b}[31mred") && !text.contains("\u{1b}]0;"),
            "{text:?}"
        );
        if color == "never" {
            assert!(!text.contains('\u{1b}'), "{text:?}");
        }
    }
}

#[test]
fn colour_follows_the_colour_rules() {
    let run = |args: &[&str]| {
        let out = show().args(args).arg(testdata(SAMPLE)).assert().success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    assert!(run(&["--color", "always"]).contains("\u{1b}["));
    assert!(!run(&["--color", "never"]).contains('\u{1b}'));
    // auto: stdout is a pipe here, so no colour.
    assert!(!run(&[]).contains('\u{1b}'));
    // JSON is never coloured.
    assert!(!run(&["--color", "always", "--format", "json"]).contains('\u{1b}'));
}

#[test]
fn a_closed_pipe_ends_quietly_with_status_0() {
    // Enough events that the output cannot fit into the pipe before `head` goes away.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    let mut log = format!("{V3}\n");
    for t in 0..5000 {
        log.push_str(&turn_rows(t * 2, t + 1));
    }
    std::fs::write(&path, log).unwrap();
    let bin = assert_cmd::cargo::cargo_bin("dshs");
    let script = format!(
        "'{}' show '{}' | head -n 1; echo \"status=${{PIPESTATUS[0]}}\" >&2",
        bin.display(),
        path.display()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &script])
        .env_remove("NO_COLOR")
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert_eq!(stderr.trim(), "status=0", "{stderr}");
}
