//! `dshs derive`: the model-visible messages, byte-for-byte as stored (§12.1), per format
//! version; the three output formats; standard input; a closed pipe.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{dshs, testdata};
use serde_json::Value;

fn derive(path: &Path, format: &str) -> Vec<u8> {
    let out = dshs()
        .args(["derive", "--format", format])
        .arg(path)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "derive {format} {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn ndjson(path: &Path) -> Vec<Vec<u8>> {
    derive(path, "ndjson")
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

/// Every event line of a log by seq (packed rows, which hold no messages, are skipped).
fn lines_by_seq(path: &Path) -> HashMap<u64, (String, Value)> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).ok()?;
            Some((v["seq"].as_u64()?, (l.to_owned(), v)))
        })
        .collect()
}

/// §12.1, independently: the message of each surface node, or nothing for an assistant,
/// system or developer message with empty content.
fn expected(path: &Path, surface: &[u64]) -> Vec<(u64, String, Value)> {
    let lines = lines_by_seq(path);
    surface
        .iter()
        .filter_map(|seq| {
            let (line, ev) = &lines[seq];
            let ty = ev["type"].as_str().unwrap();
            let msg = if ty == "user/message" {
                ev["data"].clone()
            } else {
                ev["data"]["message"].clone()
            };
            let empty = msg["content"].as_array().is_some_and(Vec::is_empty);
            let silent = matches!(
                ty,
                "assistant/message" | "system/message" | "developer/message"
            ) && empty;
            (!silent).then(|| (*seq, line.clone(), msg))
        })
        .collect()
}

/// The derived messages are the stored ones: as many, same values and roles, and each is a
/// verbatim slice of its line right after `"data":` or `"message":`.
fn check_version(file: &str, version: u64, surface: &[u64]) {
    let path = testdata(file);
    assert_eq!(lines_header_version(&path), version, "{file}");
    let want = expected(&path, surface);
    let got = ndjson(&path);
    assert_eq!(got.len(), want.len(), "{file}: message count");
    for (bytes, (seq, line, msg)) in got.iter().zip(&want) {
        let text = std::str::from_utf8(bytes).unwrap();
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(&value, msg, "{file} seq {seq}");
        assert_eq!(value["role"], msg["role"], "{file} seq {seq}");
        let key = if line.contains(r#""type":"user/message""#) {
            "data"
        } else {
            "message"
        };
        assert!(
            line.contains(&format!("\"{key}\":{text}")),
            "{file} seq {seq}: not the stored bytes: {text}"
        );
    }
    // The JSON array holds the same messages.
    let array: Vec<Value> = serde_json::from_slice(&derive(&path, "json")).unwrap();
    let values: Vec<Value> = want.iter().map(|(_, _, m)| m.clone()).collect();
    assert_eq!(array, values, "{file}: json array");
    jq_round_trip(&path, want.len());
}

fn lines_header_version(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap();
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    header["version"].as_u64().unwrap()
}

fn jq_available() -> bool {
    Command::new("jq")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn jq(filter: &str, input: &[u8]) -> Vec<u8> {
    let mut child = Command::new("jq")
        .args(["-c", filter])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "jq rejected the output");
    out.stdout
}

/// Both output formats parse in jq and hold the same messages (skipped without jq).
fn jq_round_trip(path: &Path, count: usize) {
    if !jq_available() {
        eprintln!("jq not installed: skipping the jq round trip");
        return;
    }
    let from_array = jq(".[]", &derive(path, "json"));
    let from_lines = jq(".", &derive(path, "ndjson"));
    assert_eq!(from_array, from_lines);
    assert_eq!(from_array.iter().filter(|b| **b == b'\n').count(), count);
}

#[test]
fn v0_messages_are_the_stored_bytes() {
    check_version(
        "fixtures/upstream__acp-agent__tool-call-turn__session.concrete.jsonl",
        0,
        &[4, 5, 63, 65, 101],
    );
    check_version(
        "fixtures/upstream__acp-agent__parallel-tool-calls__session.concrete.jsonl",
        0,
        &[4, 5, 17, 20, 21, 29],
    );
}

#[test]
fn v0_max_tokens_continue_messages_are_the_stored_bytes() {
    check_version(
        "fixtures/upstream__acp-agent__max-tokens-continue__session.concrete.jsonl",
        0,
        &[4, 5, 16, 23, 29],
    );
}

#[test]
fn v2_messages_are_the_stored_bytes() {
    check_version(
        "fixtures/zdsh__vfs__preview-follow-up-builder__session.v2.raw.jsonl",
        2,
        &[1, 4],
    );
}

#[test]
fn v3_empty_system_head_keeps_its_place_but_derives_nothing() {
    let file = "fixtures/zdsh__cli__subagent-inheritance__child.replay.v3.raw.jsonl";
    check_version(file, 3, &[2, 3, 4, 6, 9]);
    let got = ndjson(&testdata(file));
    assert_eq!(got.len(), 4);
    assert!(!String::from_utf8_lossy(&got[0]).contains("\"role\":\"system\""));
}

#[test]
fn v3_nested_replacements_derive_the_final_surface() {
    check_version("v3/nested-replace.jsonl", 3, &[2, 32, 27]);
}

#[test]
fn v4_messages_are_the_stored_bytes() {
    check_version(
        "fixtures/zhengxuyu__snapshots__session__compaction-recovery__session.v4.concrete.jsonl",
        4,
        &[7, 21, 13, 15, 24],
    );
    check_version(
        "fixtures/zhengxuyu__snapshots__session__packed-chunks__writer.expected.concrete.jsonl",
        4,
        &[7, 8, 9, 13, 17, 20],
    );
    let roles: Vec<Value> =
        serde_json::from_slice::<Vec<Value>>(&derive(&testdata("sample/session.v4.jsonl"), "json"))
            .unwrap()
            .into_iter()
            .map(|m| m["role"].clone())
            .collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"]);
}

fn temp_log(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn v0_legacy_shapes_derive_the_normalized_message() {
    let dir = tempfile::tempdir().unwrap();
    let log = [
        r#"{"type":"session","version":0,"id":"old","createdAt":1,"cwd":"/w","delegationDepth":0}"#,
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        r#"{"type":"user/message","seq":1,"time":1,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        r#"{"type":"step/start","seq":2,"time":1,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"assistant/message","seq":3,"time":1,"data":{"turn":1,"step":1,"content":[{"type":"text","text":"yo"}],"provenance":{"provider":"p","model":"m"}},"surfaceOp":"append"}"#,
        r#"{"type":"step/end","seq":4,"time":1,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"turn/end","seq":5,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ]
    .join("\n")
        + "\n";
    let p = temp_log(dir.path(), "legacy.jsonl", log.as_bytes());
    let got: Vec<Value> = serde_json::from_slice(&derive(&p, "json")).unwrap();
    assert_eq!(
        got,
        [
            serde_json::json!({"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"id":"legacy-message:old:1","role":"user"}),
            serde_json::json!({"id":"legacy-message:old:3","role":"assistant","content":[{"type":"text","text":"yo"}],"source":{"provider":"p","model":"m","kind":"model"}}),
        ]
    );
}

#[test]
fn v0_legacy_messages_spell_numbers_as_javascript_does() {
    // A normalized legacy message is JSON.stringify(JSON.parse(stored)): its numbers take
    // Number.prototype.toString's spelling, exponent boundaries included.
    let dir = tempfile::tempdir().unwrap();
    let log = [
        r#"{"type":"session","version":0,"id":"old","createdAt":1,"cwd":"/w","delegationDepth":0}"#,
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        r#"{"type":"user/message","seq":1,"time":1,"data":{"content":[{"type":"text","text":"hi","a":1e-7,"b":1e21,"c":1E20,"d":0.000001,"e":25e-1}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        r#"{"type":"turn/end","seq":2,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ]
    .join("\n")
        + "\n";
    let p = temp_log(dir.path(), "legacy.jsonl", log.as_bytes());
    let got = String::from_utf8(derive(&p, "ndjson")).unwrap();
    assert!(
        got.contains(r#""a":1e-7,"b":1e+21,"c":100000000000000000000,"d":0.000001,"e":2.5"#),
        "{got}"
    );
}

/// A v4 log whose messages use odd key order, `1.0`, `1e2`, `\u00e9` escapes, raw
/// unicode, and (on one line) bytes that are not UTF-8.
fn odd_log() -> (Vec<u8>, Vec<Vec<u8>>) {
    let user = r#"{"source":{"kind":"user"},"n":1.0,"content":[{"text":"caf\u00e9 / café — 日本語 🎉","type":"text"}],"big":1e2,"id":"u1","neg":-2.50E-3,"role":"user"}"#;
    let empty = r#"{"role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"},"id":"a-empty"}"#;
    let asst = r#"{"id":"a1","content":[{"type":"text","text":"\u00e9\ud83c\udf89 \"quoted\" \\ back"}],"role":"assistant","source":{"model":"m","kind":"model","provider":"p"},"score":0.10}"#;
    let mut raw_user =
        br#"{"id":"u2","role":"user","content":[{"type":"text","text":"bad "#.to_vec();
    raw_user.extend_from_slice(&[0xff, 0xfe, b' ', 0xc3]);
    raw_user.extend_from_slice(br#" bytes"}],"source":{"kind":"user"}}"#);
    let mut log = Vec::new();
    let mut line = |s: &[u8]| {
        log.extend_from_slice(s);
        log.push(b'\n');
    };
    line(br#"{"type":"session","version":4,"id":"odd","createdAt":1,"cwd":"/w","isSeeded":false,"delegationDepth":0}"#);
    line(br#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#);
    line(
        format!(r#"{{"type":"user/message","seq":1,"time":1,"data":{user},"surfaceOp":"append"}}"#)
            .as_bytes(),
    );
    line(br#"{"type":"step/start","seq":2,"time":1,"data":{"turn":1,"step":1}}"#);
    line(format!(r#"{{"type":"assistant/message","seq":3,"time":1,"data":{{"turn":1,"step":1,"message":{empty},"stream":[]}},"surfaceOp":"append"}}"#).as_bytes());
    line(format!(r#"{{"surfaceOp":"append","data":{{"message":{asst},"step":1,"turn":1,"stream":[]}},"time":1,"seq":4,"type":"assistant/message"}}"#).as_bytes());
    let mut raw = br#"{"type":"user/message","seq":5,"time":1,"data":"#.to_vec();
    raw.extend_from_slice(&raw_user);
    raw.extend_from_slice(br#","surfaceOp":"append"}"#);
    line(&raw);
    line(br#"{"type":"step/end","seq":6,"time":1,"data":{"turn":1,"step":1}}"#);
    line(
        br#"{"type":"turn/end","seq":7,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    );
    (
        log,
        vec![user.as_bytes().to_vec(), asst.as_bytes().to_vec(), raw_user],
    )
}

#[test]
fn derived_bytes_keep_key_order_number_spelling_escapes_and_raw_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (log, want) = odd_log();
    let p = temp_log(dir.path(), "odd.jsonl", &log);
    dshs().arg("validate").arg(&p).assert().code(0);
    // The assistant message with empty content (seq 3) derives nothing.
    assert_eq!(ndjson(&p), want, "ndjson is the stored bytes, one per line");
    let mut array = b"[\n".to_vec();
    array.extend_from_slice(&want.join(&b",\n"[..]));
    array.extend_from_slice(b"\n]\n");
    assert_eq!(derive(&p, "json"), array, "json array of the stored bytes");
    // The UTF-8 messages parse and keep their values.
    let first: Value = serde_json::from_slice(&want[0]).unwrap();
    assert_eq!(first["content"][0]["text"], "café / café — 日本語 🎉");
    if jq_available() {
        for w in &want[..2] {
            assert_eq!(
                jq(".", w),
                jq(".", &ndjson(&p)[want.iter().position(|x| x == w).unwrap()])
            );
        }
    }
}

#[test]
fn standard_input_derives_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = odd_log();
    let p = temp_log(dir.path(), "odd.jsonl", &log);
    for format in ["json", "ndjson", "markdown"] {
        let out = dshs()
            .args(["derive", "--format", format, "-"])
            .write_stdin(log.clone())
            .output()
            .unwrap();
        assert!(out.status.success(), "{format}");
        assert_eq!(out.stdout, derive(&p, format), "{format}");
    }
}

#[test]
fn an_empty_surface_derives_an_empty_array() {
    let p = testdata(
        "fixtures/upstream__headless__semantic-checkpoint-snapshots__tool-outcome-unknown__replay.raw.jsonl",
    );
    assert_eq!(derive(&p, "json"), b"[]\n");
    assert_eq!(derive(&p, "ndjson"), b"");
}

#[test]
fn markdown_is_a_readable_transcript() {
    let md = String::from_utf8(derive(&testdata("sample/session.v4.jsonl"), "markdown")).unwrap();
    let headings: Vec<&str> = md.lines().filter(|l| l.starts_with("## ")).collect();
    assert_eq!(
        headings,
        [
            "## system · seq 7",
            "## user · seq 21",
            "## assistant · seq 13",
            "## tool · seq 15 · tool result for `call_compaction_marker`",
            "## assistant · seq 24",
        ]
    );
    assert!(md.contains("**tool call** `bash` (`call_compaction_marker`)\n\n```json\n{\n  \"command\": \"printf 'alpha\\n'\","));
    assert!(md.contains("```text\nalpha\n```"));
    assert!(md.contains("COMPACTION RECOVERED"));
    // Reasoning is folded away.
    let v0 = String::from_utf8(derive(
        &testdata("fixtures/upstream__acp-agent__text-turn__session.concrete.jsonl"),
        "markdown",
    ))
    .unwrap();
    assert!(v0.contains("<details><summary>reasoning</summary>"), "{v0}");
}

/// A log with many long messages: far more output than a pipe buffers.
fn big_log(dir: &Path) -> PathBuf {
    let mut log = String::from(
        r#"{"type":"session","version":3,"id":"big","createdAt":1,"cwd":"/w","isSeeded":false,"delegationDepth":0}"#,
    );
    log.push('\n');
    log.push_str(r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#);
    log.push('\n');
    let text = "lorem ipsum ".repeat(40);
    let n = 4000;
    for seq in 1..=n {
        log.push_str(&format!(
            r#"{{"type":"user/message","seq":{seq},"time":1,"data":{{"content":[{{"type":"text","text":"{seq} {text}"}}],"source":{{"kind":"user"}},"role":"user","id":"u{seq}"}},"surfaceOp":"append"}}"#
        ));
        log.push('\n');
    }
    log.push_str(&format!(
        r#"{{"type":"turn/end","seq":{},"time":1,"data":{{"turn":1,"reason":{{"kind":"completed"}}}}}}"#,
        n + 1
    ));
    log.push('\n');
    temp_log(dir, "big.jsonl", log.as_bytes())
}

/// `dshs … | head -1`: the reader goes away after one line; dshs exits 0 without a word.
#[test]
fn a_closed_pipe_exits_quietly_with_status_0() {
    let dir = tempfile::tempdir().unwrap();
    let p = big_log(dir.path());
    let bin = assert_cmd::cargo::cargo_bin("dshs");
    for args in [
        &["derive", "--format", "ndjson"][..],
        &["derive", "--format", "json"][..],
        &["derive", "--format", "markdown"][..],
        &["surface"][..],
    ] {
        let mut child = Command::new(&bin)
            .args(args)
            .arg(&p)
            .env_remove("NO_COLOR")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty(), "{args:?}");
        // The reader is dropped here: the pipe is closed with most output unread.
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{args:?}");
    }
    // Read to the end, the same run writes every message.
    assert_eq!(ndjson(&p).len(), 4000);
}
