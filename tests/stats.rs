//! `dshs stats`: numbers checked by hand against the fixtures (the comments say where each
//! comes from), the committed-prefix rule, stdin, colour and closed pipes.

mod common;

use assert_cmd::Command;
use common::{dshs, testdata};
use predicates::prelude::*;
use serde_json::{Value, json};

fn stats() -> Command {
    let mut c = dshs();
    c.env("TZ", "UTC").arg("stats");
    c
}

fn report(file: &str) -> Value {
    let out = stats()
        .args(["--format", "json"])
        .arg(testdata(file))
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).expect("one JSON document")
}

#[test]
fn sample_v4_numbers() {
    let r = report("sample/session.v4.jsonl");
    assert_eq!(r["status"], "valid");
    assert_eq!(
        (r["errors"].clone(), r["warnings"].clone()),
        (json!(0), json!(0))
    );
    assert_eq!(
        r["header"],
        json!({
            "id": "{{session:1}}", "version": 4, "cwd": "/workspace", "createdAt": 0,
            "createdAtLocal": "1970-01-01 00:00:00.000", "parentSession": null,
            "seeded": false, "inheritedEvents": null, "origin": null, "delegationDepth": 0,
            "agentPreset": null
        })
    );
    // 27 event lines (seq 0..26); three user messages (8, 9, 21), two requests (10, 23).
    let e = &r["events"];
    assert_eq!(e["total"], 27);
    assert_eq!(e["byType"]["user/message"], 3);
    assert_eq!(e["byType"]["request/header"], 2);
    assert_eq!(e["byType"].as_object().unwrap().len(), 20);
    assert_eq!(
        e["byType"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum::<u64>(),
        27
    );
    assert_eq!(
        (e["firstTime"].clone(), e["lastTime"].clone()),
        (json!(1000), json!(1026))
    );
    assert_eq!(
        r["turns"],
        json!({"started": 1, "ended": 1, "open": false, "endReasons": {"completed": 1}})
    );
    assert_eq!(r["steps"], 2);
    // seq 13 advertises call_compaction_marker, seq 14 starts it, seq 15 answers it.
    assert_eq!(
        r["tools"],
        json!({"calls": 1, "advertised": 1, "results": 1, "errorResults": 0})
    );
    assert_eq!(
        r["compaction"],
        json!({"compactions": 1, "failed": 0, "prunes": 0})
    );
    // Surface: 7 (system), 21 (checkpoint over 8..9), 13, 15, 24.
    assert_eq!(
        r["surface"],
        json!({"nodes": 5, "messages": 5, "replaceGeneration": 1})
    );
    // Counted as `dshs usage` counts (USAGE.md): seq 13: 24 in / 6 out; seq 18 an
    // assistant/attempt without usage; seq 20 the compaction summary's call, 20 / 4; seq 24:
    // 20 / 4 (its stream's usage record is the same call).
    assert_eq!(
        r["tokens"],
        json!({"assistantMessages": 2, "withUsage": 2, "calls": 4, "callsWithoutUsage": 1,
               "inputTokens": 64, "outputTokens": 14,
               "cacheReadTokens": 0, "cacheWriteTokens": 0, "reasoningTokens": 0})
    );
    assert_eq!(
        r["models"],
        json!({"deepseek-official/deepseek-v4-flash": 2})
    );
    let size = std::fs::metadata(testdata("sample/session.v4.jsonl"))
        .unwrap()
        .len();
    assert_eq!(
        r["bytes"],
        json!({"total": size, "committed": size, "tornTail": null, "crashTailRows": null})
    );
}

#[test]
fn v0_packed_rows_count_as_their_members() {
    let r = report("v0/packed-compaction.jsonl");
    // 25 event rows + 2 packed rows of 3 and 4 members = 32 events; 7 + 8 chunks.
    assert_eq!(r["events"]["total"], 32);
    assert_eq!(r["events"]["byType"]["assistant/chunk"], 15);
    assert_eq!(
        r["turns"]["endReasons"],
        json!({"aborted": 1, "completed": 1})
    );
    assert_eq!(
        (r["turns"]["started"].clone(), r["steps"].clone()),
        (json!(2), json!(2))
    );
    // The checkpoint at 29 replaces 2, 10, 12; 23 stays.
    assert_eq!(
        r["surface"],
        json!({"nodes": 2, "messages": 2, "replaceGeneration": 1})
    );
    // Assistant messages 10 (100/10, cache read 50) and 23 (120/5, reasoning 2); the
    // chunk-level usage events are the same calls. The compaction summary at 28 names a
    // model but no usage: a call with unknown tokens.
    assert_eq!(
        r["tokens"],
        json!({"assistantMessages": 2, "withUsage": 2, "calls": 3, "callsWithoutUsage": 1,
               "inputTokens": 220, "outputTokens": 15,
               "cacheReadTokens": 50, "cacheWriteTokens": 0, "reasoningTokens": 2})
    );
    assert_eq!(r["header"]["createdAtLocal"], "2026-01-01 00:00:00.000");
    assert_eq!(r["header"]["seeded"], false);
}

#[test]
fn error_results_and_tokens_of_a_real_v0_log() {
    let r = report("fixtures/upstream__acp-agent__packed-chunks__session.concrete.jsonl");
    // seq 61: the hook blocked bash, the tool-result block has isError: true.
    assert_eq!(
        r["tools"],
        json!({"calls": 1, "advertised": 1, "results": 1, "errorResults": 1})
    );
    // seq 57: 2878 in / 83 out / 17 reasoning; seq 121: 167 / 52 / 2816 cache read / 21.
    assert_eq!(
        r["tokens"],
        json!({"assistantMessages": 2, "withUsage": 2, "calls": 2, "callsWithoutUsage": 0,
               "inputTokens": 3045, "outputTokens": 135,
               "cacheReadTokens": 2816, "cacheWriteTokens": 0, "reasoningTokens": 38})
    );
    assert_eq!(r["events"]["total"], 124);
    assert_eq!(r["events"]["byType"]["assistant/chunk"], 105);
}

#[test]
fn seeded_sessions_per_version() {
    // v0: seedLength 42 in the header.
    let r =
        report("fixtures/upstream__acp-agent__subagent-fork-in-process__session.1.concrete.jsonl");
    let h = &r["header"];
    assert_eq!(
        (h["seeded"].clone(), h["inheritedEvents"].clone()),
        (json!(true), json!(42))
    );
    assert_eq!(h["parentSession"], "96cf59c9-b347-48b9-b234-a5200913ad05");
    assert_eq!(
        (h["origin"].clone(), h["delegationDepth"].clone()),
        (json!("subagent"), json!(1))
    );
    // v3: isSeeded, and the inherited marker session/end-seed at seq 169.
    let r = report("fixtures/zdsh__vfs__preview-architecture-review__session.v3.raw.jsonl");
    let h = &r["header"];
    assert_eq!(
        (h["seeded"].clone(), h["inheritedEvents"].clone()),
        (json!(true), json!(169))
    );
    assert_eq!(h["agentPreset"], "standard");
    assert_eq!(r["turns"]["started"], 29);
}

const V3: &str =
    r#"{"type":"session","version":3,"id":"s","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;

fn turn_rows(seq0: u64, turn: u64, kind: &str) -> String {
    format!(
        "{{\"type\":\"turn/start\",\"seq\":{seq0},\"time\":0,\"data\":{{\"turn\":{turn}}}}}\n{{\"type\":\"turn/end\",\"seq\":{},\"time\":0,\"data\":{{\"turn\":{turn},\"reason\":{{\"kind\":\"{kind}\"}}}}}}\n",
        seq0 + 1
    )
}

#[test]
fn only_the_committed_prefix_counts() {
    let log = format!(
        "{V3}\n{}not json\n{}{{\"type\":\"tur",
        turn_rows(0, 1, "completed"),
        "{\"type\":\"turn/start\",\"seq\":3,\"time\":0,\"data\":{\"turn\":2}}\n"
    );
    let out = stats()
        .args(["--format", "json", "-"])
        .write_stdin(log)
        .assert()
        .success();
    let r: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(r["status"], "valid");
    assert_eq!(r["warnings"], 2);
    assert_eq!(r["events"]["total"], 2);
    assert_eq!(r["events"]["unusableRows"], 0);
    assert_eq!(r["turns"]["started"], 1);
    assert_eq!(r["bytes"]["crashTailRows"], 2);
    assert_eq!(r["bytes"]["tornTail"], 12);
    assert_eq!(
        r["bytes"]["committed"],
        V3.len() + 1 + turn_rows(0, 1, "completed").len()
    );
}

#[test]
fn committed_damage_is_counted_and_exits_1() {
    let log = format!(
        "{V3}\n{}not json\n{}",
        turn_rows(0, 1, "completed"),
        turn_rows(3, 2, "blocked")
    );
    let out = stats()
        .args(["--format", "json", "-"])
        .write_stdin(log)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("invalid log"));
    let r: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(r["status"], "invalid");
    assert_eq!(r["events"]["unusableRows"], 1);
    assert_eq!(
        r["turns"]["endReasons"],
        json!({"blocked": 1, "completed": 1})
    );
}

#[test]
fn human_report_is_aligned_and_stdin_matches_the_file() {
    let path = testdata("sample/session.v4.jsonl");
    let out = stats().arg(&path).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let value_column = |label: &str| {
        let line = text
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} line in {text}"));
        line[label.len()..].len() - line[label.len()..].trim_start().len() + label.len()
    };
    assert_eq!(value_column("status"), value_column("tokens"));
    assert!(
        text.contains("turns                  1 started, 1 ended (completed 1)\n"),
        "{text}"
    );
    assert!(
        text.contains("\ncompactions            1 (0 failed), 0 prunes\n"),
        "{text}"
    );
    assert!(text.contains("\nsurface                5 nodes, 5 messages, replace generation 1\n"));
    assert!(text.contains("\ntokens                 64 in, 14 out,"));

    let json_file = report("sample/session.v4.jsonl");
    let out = stats()
        .args(["--format", "json", "-"])
        .write_stdin(std::fs::read(&path).unwrap())
        .assert()
        .success();
    let mut json_stdin: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(json_stdin["file"], "-");
    json_stdin["file"] = json_file["file"].clone();
    assert_eq!(json_stdin, json_file);
}

#[test]
fn colour_and_escaping() {
    let log = concat!(
        r#"{"type":"session","version":3,"id":"evil\u001b[2J","createdAt":1,"#,
        r#""delegationDepth":0,"isSeeded":false}"#,
        "\n"
    );
    for color in ["always", "never"] {
        let out = stats()
            .args(["--color", color, "-"])
            .write_stdin(log)
            .assert()
            .success();
        let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        assert!(text.contains(r"evil\u{1b}[2J"), "{text}");
        assert!(!text.contains("\u{1b}[2J"), "{text:?}");
        assert_eq!(text.contains('\u{1b}'), color == "always", "{text:?}");
    }
    let out = stats()
        .args(["--color", "always", "--format", "json", "-"])
        .write_stdin(log)
        .assert()
        .success();
    assert!(!out.get_output().stdout.contains(&0x1b));
}

#[test]
fn a_closed_pipe_ends_quietly_with_status_0() {
    let bin = assert_cmd::cargo::cargo_bin("dshs");
    let script = format!(
        "'{}' stats --format json '{}' | head -c 1 >/dev/null; echo \"status=${{PIPESTATUS[0]}}\" >&2",
        bin.display(),
        testdata("sample/session.v4.jsonl").display()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &script])
        .output()
        .expect("bash runs");
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), "status=0");
}

#[test]
fn unreadable_and_unsupported_inputs() {
    stats()
        .arg(testdata("no/such.jsonl"))
        .assert()
        .code(2)
        .stdout("");
    let out = stats()
        .args(["--format", "json", "-"])
        .write_stdin("{\"type\":\"session\",\"version\":5,\"id\":\"s\"}\n")
        .assert()
        .code(3);
    let r: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(r["status"], "unsupported");
    assert_eq!(r["header"], Value::Null);
    assert_eq!(r["events"]["total"], 0);
}

/// A packed row's members after the first are counted without being folded one by one:
/// every one by type, and the last one's time as the log's last.
#[test]
fn a_packed_row_last_gives_its_last_members_time() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("session.jsonl");
    std::fs::write(
        &log,
        concat!(
            "{\"type\":\"session\",\"version\":0,\"id\":\"packed\",\"createdAt\":2000,\"delegationDepth\":0}\n",
            "{\"type\":\"turn/start\",\"seq\":0,\"time\":3000,\"data\":{\"turn\":1}}\n",
            "{\"type\":\"step/start\",\"seq\":1,\"time\":3001,\"data\":{\"turn\":1,\"step\":1}}\n",
            "{\"type\":\"text-chunks\",\"seq0\":2,\"time0\":3010,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[5,7],\"texts\":[\"a\",\"b\",\"c\"]}}\n",
        ),
    )
    .unwrap();
    let out = stats()
        .args(["--format", "json"])
        .arg(&log)
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["events"]["total"], 5);
    assert_eq!(r["events"]["byType"]["assistant/chunk"], 3);
    assert_eq!(r["events"]["firstTime"], 3000);
    assert_eq!(r["events"]["lastTime"], 3022);
}
