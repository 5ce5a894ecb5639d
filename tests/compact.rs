//! `dshs compact` (CLI.md "compact", FORMAT.md §15): the bracket DSH's compaction writes,
//! appended in the log's own format version; the result validates, `surface` shows the
//! checkpoint where the range was and `derive` shows the summary in place of the range;
//! nested and repeated compactions and a later repair all validate; every refusal leaves the
//! file byte-identical.

#[path = "../benches/gen/mod.rs"]
mod generator;

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::{dshs, json_lines, scan_file, testdata};
use dshs::log::dialect::SurfaceKind;
use dshs::log::scan::Status;
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// A tiny log writer: the shapes of each format version, one line per event.

struct Log {
    v: u8,
    seq: u64,
    turn: u64,
    step: u64,
    text: String,
}

impl Log {
    fn new(v: u8) -> Log {
        let seeded = if v >= 2 { r#","isSeeded":false"# } else { "" };
        Log {
            v,
            seq: 0,
            turn: 0,
            step: 0,
            text: format!(
                "{{\"type\":\"session\",\"version\":{v},\"id\":\"s\",\"createdAt\":1,\"delegationDepth\":0{seeded}}}\n"
            ),
        }
    }

    fn ev(&mut self, ty: &str, data: &str, tail: &str) -> u64 {
        let seq = self.seq;
        self.text.push_str(&format!(
            "{{\"type\":\"{ty}\",\"seq\":{seq},\"time\":{},\"data\":{data}{tail}}}\n",
            1_000 + seq
        ));
        self.seq += 1;
        seq
    }

    fn ts(&self) -> String {
        format!("\"turn\":{},\"step\":{}", self.turn, self.step)
    }

    fn turn_start(&mut self) -> u64 {
        self.turn += 1;
        self.step = 0;
        self.ev("turn/start", &format!("{{\"turn\":{}}}", self.turn), "")
    }

    fn turn_end(&mut self) -> u64 {
        let d = format!(
            "{{\"turn\":{},\"reason\":{{\"kind\":\"completed\"}}}}",
            self.turn
        );
        self.ev("turn/end", &d, "")
    }

    fn step_start(&mut self) -> u64 {
        self.step += 1;
        let d = format!("{{{}}}", self.ts());
        self.ev("step/start", &d, "")
    }

    fn step_end(&mut self) -> u64 {
        let d = format!("{{{}}}", self.ts());
        self.ev("step/end", &d, "")
    }

    /// The system prompt node (v3+ only).
    fn system(&mut self) -> u64 {
        let source = if self.v >= 4 {
            r#"{"kind":"system-prompt"}"#
        } else {
            r#"{"kind":"plugin","plugin":"@deepseek-ai/dsh-system-prompt"}"#
        };
        let d = format!(
            r#"{{{},"message":{{"id":"sys","role":"system","content":[{{"type":"text","text":"be terse"}}],"source":{source}}}}}"#,
            self.ts()
        );
        self.ev("system/message", &d, r#","surfaceOp":"append""#)
    }

    fn user(&mut self, text: &str) -> u64 {
        let d = format!(
            r#"{{"id":"u{}","role":"user","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}}"#,
            self.seq
        );
        self.ev("user/message", &d, r#","surfaceOp":"append""#)
    }

    fn assistant(&mut self, text: &str, calls: &[&str]) -> u64 {
        let mut content = vec![format!(r#"{{"type":"text","text":"{text}"}}"#)];
        for id in calls {
            content.push(format!(
                r#"{{"type":"tool-call","id":"{id}","name":"bash","arguments":"{{}}"}}"#
            ));
        }
        let stream = if self.v >= 2 { r#","stream":[]"# } else { "" };
        let d = format!(
            r#"{{{},"message":{{"id":"a{}","role":"assistant","content":[{}],"source":{{"kind":"model","provider":"p","model":"m"}}}}{stream}}}"#,
            self.ts(),
            self.seq,
            content.join(",")
        );
        self.ev("assistant/message", &d, r#","surfaceOp":"append""#)
    }

    fn call(&mut self, id: &str) -> u64 {
        let d = format!(
            r#"{{{},"callId":"{id}","name":"bash","arguments":"{{}}"}}"#,
            self.ts()
        );
        self.ev("tool/call", &d, "")
    }

    fn result(&mut self, id: &str, call_seq: u64) -> u64 {
        let msg = if self.v >= 4 {
            format!(
                r#"{{"id":"r{}","role":"tool","toolCallId":"{id}","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"text","text":"ok"}}]}}"#,
                self.seq
            )
        } else {
            format!(
                r#"{{"id":"r{}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":"ok"}}]}}]}}"#,
                self.seq
            )
        };
        let d = format!(r#"{{{},"message":{msg}}}"#, self.ts());
        self.ev(
            "tool/result",
            &d,
            &format!(r#","surfaceOp":"append","sourceEventSeqs":[{call_seq}]"#),
        )
    }
}

/// The surface nodes of the standard test session.
struct Nodes {
    system: Option<u64>,
    ask: u64,
    calling: u64,
    result: u64,
    answer: u64,
    ask2: u64,
    answer2: u64,
}

/// Two closed turns: (v3+ system prompt,) a question, a tool call and its result, an answer;
/// then a second question and answer.
fn session(v: u8) -> (Log, Nodes) {
    let mut l = Log::new(v);
    l.turn_start();
    l.step_start();
    let system = (v >= 3).then(|| l.system());
    let ask = l.user("list the files");
    let calling = l.assistant("looking", &["call_abc"]);
    let c = l.call("call_abc");
    let result = l.result("call_abc", c);
    l.step_end();
    l.step_start();
    let answer = l.assistant("two files", &[]);
    l.step_end();
    l.turn_end();
    l.turn_start();
    let ask2 = l.user("and now?");
    l.step_start();
    let answer2 = l.assistant("done", &[]);
    l.step_end();
    l.turn_end();
    let nodes = Nodes {
        system,
        ask,
        calling,
        result,
        answer,
        ask2,
        answer2,
    };
    (l, nodes)
}

const VERSIONS: [u8; 3] = [0, 3, 4];

// ---------------------------------------------------------------------------------------------
// Helpers.

struct Case {
    tmp: tempfile::TempDir,
    path: PathBuf,
}

impl Case {
    fn new(text: &str) -> Case {
        Case::named("session.jsonl", text.as_bytes())
    }

    fn named(name: &str, bytes: &[u8]) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        fs::write(&path, bytes).unwrap();
        Case { tmp: dir, path }
    }

    fn copy_of(rel: &str) -> Case {
        Case::named("session.jsonl", &fs::read(testdata(rel)).unwrap())
    }

    fn bytes(&self) -> Vec<u8> {
        fs::read(&self.path).unwrap()
    }

    fn text(&self) -> String {
        String::from_utf8(self.bytes()).unwrap()
    }

    fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(self.tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

/// `dshs compact --start S --end E --summary TEXT FILE`, expected to succeed; returns the seq of
/// the new checkpoint node (from the appended events).
fn compact(path: &Path, start: u64, end: u64, summary: &str) -> u64 {
    let before = fs::read(path).unwrap();
    let out = dshs()
        .args([
            "compact",
            "--start",
            &start.to_string(),
            "--end",
            &end.to_string(),
        ])
        .args(["--summary", summary])
        .arg(path)
        .assert()
        .code(0);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains(&format!("replaced {start}..{end}")),
        "{stdout}"
    );
    let after = fs::read(path).unwrap();
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "committed bytes changed"
    );
    let appended = json_lines(&after[before.len()..]);
    assert_eq!(appended.len(), 4);
    assert_valid(path);
    appended[2]["seq"].as_u64().unwrap()
}

/// `dshs validate --format json` says valid with no error and no warning about an open turn
/// or compaction; the in-process scan agrees.
fn assert_valid(path: &Path) {
    let out = dshs()
        .args(["validate", "--format", "json"])
        .arg(path)
        .assert()
        .code(0);
    let records = json_lines(&out.get_output().stdout);
    let summary = records.last().unwrap();
    assert_eq!(summary["status"], "valid", "{records:#?}");
    assert_eq!(summary["errors"], 0, "{records:#?}");
    assert_eq!(summary["openTurn"], false, "{records:#?}");
    let (scan, findings) = scan_file(path);
    assert_eq!(scan.status(), Status::Valid, "{findings:#?}");
    assert!(
        !findings
            .iter()
            .any(|f| f.code.as_str() == "compaction-open-at-end"),
        "{findings:#?}"
    );
}

fn surface_json(path: &Path) -> Value {
    let out = dshs()
        .args(["surface", "--format", "json"])
        .arg(path)
        .assert()
        .code(0);
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

fn surface_seqs(path: &Path) -> Vec<u64> {
    surface_json(path)["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["seq"].as_u64().unwrap())
        .collect()
}

fn derive(path: &Path) -> Vec<Value> {
    let out = dshs().arg("derive").arg(path).assert().code(0);
    serde_json::from_slice::<Value>(&out.get_output().stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The text of a checkpoint message's summary block.
fn summary_of(message: &Value) -> &str {
    message["content"][1]["text"].as_str().unwrap()
}

/// Run a compaction that must be refused with `code`; the file and its directory are
/// untouched; stderr mentions `says`.
fn refused(case: &Case, args: &[&str], code: i32, says: &str) {
    let before = case.bytes();
    let files = case.files();
    let out = dshs()
        .arg("compact")
        .args(args)
        .arg(&case.path)
        .assert()
        .code(code);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains(says), "expected {says:?} in: {stderr}");
    assert!(
        out.get_output().stdout.is_empty(),
        "refusal printed on stdout"
    );
    assert_eq!(case.bytes(), before, "a refusal changed the file");
    assert_eq!(case.files(), files, "a refusal created a file");
}

fn range(start: u64, end: u64) -> Vec<String> {
    vec![
        "--start".into(),
        start.to_string(),
        "--end".into(),
        end.to_string(),
        "--summary".into(),
        "s".into(),
    ]
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

// ---------------------------------------------------------------------------------------------
// Compaction per version.

#[test]
fn the_checkpoint_replaces_the_range_on_the_surface_and_in_derive_per_version() {
    for v in VERSIONS {
        let (log, n) = session(v);
        let case = Case::new(&log.text);
        let before_surface = surface_seqs(&case.path);
        let before_messages = derive(&case.path);
        let i = before_surface.iter().position(|&s| s == n.ask).unwrap();
        let j = before_surface.iter().position(|&s| s == n.answer).unwrap();

        let summary = "Listed the files: a.txt and b.txt.";
        let new = compact(&case.path, n.ask, n.answer, summary);
        assert_eq!(new, log.seq + 2, "v{v}: checkpoint seq");

        // surface: the new node exactly where the range was.
        let mut expected = before_surface[..i].to_vec();
        expected.push(new);
        expected.extend_from_slice(&before_surface[j + 1..]);
        assert_eq!(surface_seqs(&case.path), expected, "v{v}");
        let s = surface_json(&case.path);
        let node = &s["nodes"][i];
        assert_eq!(node["type"], "user/message");
        assert_eq!(node["op"], "replace");
        let shadowed = vec![n.ask, n.calling, n.result, n.answer];
        let rep = s["replacements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["seq"] == new)
            .unwrap_or_else(|| panic!("v{v}: no replacement record in {s}"));
        assert_eq!(rep["startSeq"], n.ask);
        assert_eq!(rep["endSeq"], n.answer);
        assert_eq!(rep["shadowedSeqs"], serde_json::json!(shadowed));

        // derive: the messages before, the summary, the messages after.
        let after = derive(&case.path);
        let k = n.system.map_or(0, |_| 1);
        assert_eq!(after[..k], before_messages[..k], "v{v}");
        assert_eq!(after[k]["role"], "user");
        assert_eq!(summary_of(&after[k]), summary);
        assert_eq!(
            after[k + 1..],
            before_messages[k + 4..],
            "v{v}: the messages after the range"
        );
        assert_eq!(after.len(), before_messages.len() - 3);
    }
}

#[test]
fn nested_and_repeated_compactions_then_repair_all_validate() {
    for v in VERSIONS {
        let (log, n) = session(v);
        let case = Case::new(&log.text);
        // Twice in a row; the second range holds the first checkpoint (nested).
        let first = compact(&case.path, n.ask, n.answer, "first summary");
        let second = compact(&case.path, first, n.ask2, "second summary");
        let mut expected: Vec<u64> = n.system.into_iter().collect();
        expected.extend([second, n.answer2]);
        assert_eq!(surface_seqs(&case.path), expected, "v{v}");
        let s = surface_json(&case.path);
        let rep = s["replacements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["seq"] == second)
            .unwrap();
        assert_eq!(rep["shadowedSeqs"], serde_json::json!([first, n.ask2]));
        let messages = derive(&case.path);
        assert_eq!(
            summary_of(&messages[n.system.map_or(0, |_| 1)]),
            "second summary"
        );

        // A healthy compacted log: repair changes nothing.
        let healthy = case.bytes();
        let out = dshs().arg("repair").arg(&case.path).assert().code(0);
        assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("nothing to repair"));
        assert_eq!(case.bytes(), healthy);

        // A crash in the next turn: an open step with an advertised call, and a torn line.
        let mut more = Log {
            v,
            seq: log.seq + 8,
            turn: log.turn,
            step: 0,
            text: String::new(),
        };
        more.turn_start();
        more.step_start();
        let asked = more.user("again");
        more.assistant("calling", &["call_late"]);
        let mut crashed = case.text();
        crashed.push_str(&more.text);
        crashed.push_str("{\"type\":\"tool/ca");
        fs::write(&case.path, &crashed).unwrap();
        refused(&case, &args(&range(asked, asked)), 1, "run `dshs repair");
        dshs().arg("repair").arg(&case.path).assert().code(0);
        assert_valid(&case.path);
        // And once repaired, the new turn can be compacted too.
        let third = compact(&case.path, second, asked, "third summary");
        assert!(surface_seqs(&case.path).contains(&third), "v{v}");
    }
}

#[test]
fn logs_from_the_generator_compact_cleanly_in_every_version() {
    // Range-encoded provenance, packed chunk rows (v0/v1), prunes and DSH compactions.
    for version in 0..=4u8 {
        let mut buf = Vec::new();
        let mut g = generator::Generator::new(&mut buf, version, 7);
        g.run(120_000).expect("generate");
        let case = Case::named("session.jsonl", &buf);
        let (scan, findings) = scan_file(&case.path);
        assert_eq!(scan.status(), Status::Valid, "v{version}: {findings:#?}");
        if scan.open_turn() {
            dshs().arg("repair").arg(&case.path).assert().code(0);
        }
        let (scan, _) = scan_file(&case.path);
        let state = scan.state.unwrap();
        // The longest balanced range after the head (§15.3): counter 0 before and after.
        let nodes: Vec<_> = state.surface.iter().collect();
        let mut count = 0i64;
        let mut zero_before = Vec::new();
        let mut zero_after = Vec::new();
        for (k, node) in nodes.iter().enumerate() {
            zero_before.push(count == 0);
            count += i64::from(node.tool_calls);
            if node.kind == SurfaceKind::ToolResult {
                count -= 1;
            }
            zero_after.push(count == 0);
            let _ = k;
        }
        let first = (1..nodes.len()).find(|&k| zero_before[k]).unwrap();
        let last = (first..nodes.len()).rev().find(|&k| zero_after[k]).unwrap();
        let (start, end) = (nodes[first].seq, nodes[last].seq);
        let mut expected: Vec<u64> = nodes[..first].iter().map(|n| n.seq).collect();
        let tail: Vec<u64> = nodes[last + 1..].iter().map(|n| n.seq).collect();
        let new = compact(&case.path, start, end, "generated summary");
        expected.push(new);
        expected.extend(tail);
        assert_eq!(surface_seqs(&case.path), expected, "v{version}");
    }
}

#[test]
fn bundled_samples_compact_across_earlier_replacements() {
    // v4 sample: 21 is DSH's own checkpoint; 21..15 holds it, a call and its result.
    let case = Case::copy_of("sample/session.v4.jsonl");
    let new = compact(&case.path, 21, 15, "Printed alpha with bash.");
    assert_eq!(surface_seqs(&case.path), [7, new, 24]);
    // v0 with packed chunk rows and a pre-existing compaction; v3 with nested replacements.
    let case = Case::copy_of("v0/packed-compaction.jsonl");
    let new = compact(&case.path, 29, 23, "everything so far");
    assert_eq!(surface_seqs(&case.path), [new]);
    let case = Case::copy_of("v3/nested-replace.jsonl");
    let new = compact(&case.path, 32, 27, "everything after the prompt");
    assert_eq!(surface_seqs(&case.path), [2, new]);
}

// ---------------------------------------------------------------------------------------------
// --dry-run and the §15.5 shapes.

fn is_uuid_v4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.iter().map(|p| p.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && s.chars()
            .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
        && parts[2].starts_with('4')
        && matches!(&parts[3][..1], "8" | "9" | "a" | "b")
}

/// The key order of an object as written (serde_json's map sorts keys).
fn keys_in_order(line: &str, keys: &[&str]) -> bool {
    let at: Vec<usize> = keys
        .iter()
        .map(|k| line.find(&format!("\"{k}\":")).unwrap_or(usize::MAX))
        .collect();
    at.windows(2).all(|w| w[0] < w[1]) && !at.contains(&usize::MAX)
}

#[test]
fn dry_run_prints_the_four_events_of_15_5_and_writes_nothing() {
    for v in VERSIONS {
        let (log, n) = session(v);
        let case = Case::new(&log.text);
        let out = dshs()
            .args(["compact", "--dry-run"])
            .args(args(&range(n.ask, n.answer)))
            .arg(&case.path)
            .assert()
            .code(0);
        assert_eq!(case.bytes(), log.text.as_bytes(), "v{v}: --dry-run wrote");
        assert_eq!(case.files(), ["session.jsonl"]);
        let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let ev = json_lines(text.as_bytes());
        assert_eq!(ev.len(), 4, "{text}");
        let types: Vec<&str> = ev.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "compaction/start",
                "compaction/summary",
                "user/message",
                "compaction/end"
            ]
        );
        let first = log.seq;
        let time = ev[0]["time"].as_i64().unwrap();
        assert!(time > 1_700_000_000_000, "wall-clock ms");
        for (k, e) in ev.iter().enumerate() {
            assert_eq!(e["seq"], first + k as u64);
            assert_eq!(e["time"], time, "the same time on all four events");
        }
        let id = ev[0]["data"]["compactionId"].as_str().unwrap();
        assert!(is_uuid_v4(id), "{id}");
        for k in [0, 3] {
            assert_eq!(
                ev[k]["data"],
                serde_json::json!({"compactionId": id, "turn": null})
            );
        }
        let shadowed = serde_json::json!([n.ask, n.calling, n.result, n.answer]);
        let s = &ev[1]["data"];
        assert_eq!(s["compactionId"], id);
        assert_eq!(
            s["summary"],
            serde_json::json!([{"type":"text","text":"s"}])
        );
        assert_eq!(
            s["shadowedRange"],
            serde_json::json!({"start": n.ask, "end": n.answer})
        );
        assert_eq!(s["shadowedSeqs"], shadowed);
        assert!(s["shadowedTokenCount"].as_u64().unwrap() > 0);
        assert_eq!(s["provider"], "dshs");
        assert_eq!(s["model"], "manual");
        assert_eq!(s.as_object().unwrap().len(), 7, "no optional keys: {s}");
        assert!(keys_in_order(
            lines[1],
            &[
                "compactionId",
                "summary",
                "shadowedRange",
                "shadowedSeqs",
                "shadowedTokenCount",
                "provider",
                "model"
            ]
        ));

        let m = &ev[2];
        let d = &m["data"];
        assert_eq!(d["role"], "user");
        assert!(is_uuid_v4(d["id"].as_str().unwrap()));
        assert_ne!(d["id"], id);
        let content = d["content"].as_array().unwrap();
        assert_eq!(content.len(), 3);
        assert!(
            content[0]["text"]
                .as_str()
                .unwrap()
                .ends_with("\n\n<compacted-summary>")
        );
        assert_eq!(content[1], serde_json::json!({"type":"text","text":"s"}));
        assert_eq!(content[2]["text"], "</compacted-summary>");
        let source = if v >= 4 {
            serde_json::json!({"kind":"compact-checkpoint","compactionId":id})
        } else {
            serde_json::json!({"kind":"plugin","plugin":"compact","compactionId":id})
        };
        assert_eq!(d["source"], source, "v{v}");
        assert!(keys_in_order(
            lines[2],
            &["content", "source", "role", "id"]
        ));
        let mut sources = vec![serde_json::json!(first), serde_json::json!(first + 1)];
        sources.extend(shadowed.as_array().unwrap().iter().cloned());
        assert_eq!(m["sourceEventSeqs"], Value::Array(sources));
        let (ks, ke) = if v >= 3 {
            ("startSeq", "endSeq")
        } else {
            ("start", "end")
        };
        assert_eq!(
            m["surfaceOp"],
            serde_json::json!({"op":"replace", ks: n.ask, ke: n.answer}),
            "v{v}"
        );
        assert!(keys_in_order(
            lines[2],
            &[
                "type",
                "seq",
                "time",
                "data",
                "sourceEventSeqs",
                "surfaceOp"
            ]
        ));
        assert!(keys_in_order(lines[1], &["type", "seq", "time", "data"]));
    }
}

#[test]
fn dry_run_reads_standard_input_but_a_write_needs_a_file() {
    let (log, n) = session(4);
    let out = dshs()
        .args(["compact", "--dry-run"])
        .args(args(&range(n.ask, n.answer)))
        .arg("-")
        .write_stdin(log.text.clone())
        .assert()
        .code(0);
    assert_eq!(json_lines(&out.get_output().stdout).len(), 4);
    let out = dshs()
        .arg("compact")
        .args(args(&range(n.ask, n.answer)))
        .arg("-")
        .write_stdin(log.text.clone())
        .assert()
        .code(2);
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("--dry-run"));
}

#[test]
fn the_summary_comes_from_a_file_or_standard_input_without_trailing_newlines() {
    let (log, n) = session(3);
    let case = Case::new(&log.text);
    let file = case.tmp.path().join("summary.md");
    fs::write(&file, "Line one.\nLine two.\n\n").unwrap();
    let out = dshs()
        .args([
            "compact",
            "--dry-run",
            "--start",
            &n.ask.to_string(),
            "--end",
            &n.answer.to_string(),
        ])
        .arg("--summary-file")
        .arg(&file)
        .arg(&case.path)
        .assert()
        .code(0);
    let ev = json_lines(&out.get_output().stdout);
    assert_eq!(ev[1]["data"]["summary"][0]["text"], "Line one.\nLine two.");
    let out = dshs()
        .args([
            "compact",
            "--dry-run",
            "--start",
            &n.ask.to_string(),
            "--end",
            &n.answer.to_string(),
        ])
        .args(["--summary-file", "-"])
        .arg(&case.path)
        .write_stdin("from stdin\r\n")
        .assert()
        .code(0);
    let ev = json_lines(&out.get_output().stdout);
    assert_eq!(ev[2]["data"]["content"][1]["text"], "from stdin");
    assert_eq!(case.bytes(), log.text.as_bytes());
}

#[test]
fn usage_errors_exit_2_and_write_nothing() {
    let (log, n) = session(4);
    let case = Case::new(&log.text);
    let (s, e) = (n.ask.to_string(), n.answer.to_string());
    let bad_utf8 = case.tmp.path().join("bad.txt");
    fs::write(&bad_utf8, b"ok \xff no").unwrap();
    for extra in [
        vec!["--summary", "a", "--summary-file", "x"],
        vec![],
        vec!["--summary-file", "/nonexistent/summary"],
        vec!["--summary-file", bad_utf8.to_str().unwrap()],
    ] {
        let before = case.files();
        dshs()
            .args(["compact", "--start", &s, "--end", &e])
            .args(&extra)
            .arg(&case.path)
            .assert()
            .code(2);
        assert_eq!(case.bytes(), log.text.as_bytes(), "{extra:?}");
        assert_eq!(case.files(), before);
    }
    // Both the log and the summary from standard input.
    dshs()
        .args([
            "compact",
            "--dry-run",
            "--start",
            &s,
            "--end",
            &e,
            "--summary-file",
            "-",
            "-",
        ])
        .write_stdin(log.text.clone())
        .assert()
        .code(2);
}

// ---------------------------------------------------------------------------------------------
// Refusals: exit 1 (or 3), a precise message, the file byte-identical.

#[test]
fn ranges_the_surface_does_not_allow_are_refused_per_version() {
    for v in VERSIONS {
        let (log, n) = session(v);
        let case = Case::new(&log.text);
        let call_seq = n.calling + 1;
        refused(
            &case,
            &args(&range(call_seq, n.answer)),
            1,
            &format!(
                "--start {call_seq}: seq {call_seq} (tool/call) is not a message the model sees"
            ),
        );
        refused(
            &case,
            &args(&range(n.ask, 999)),
            1,
            &format!(
                "--end 999: the log has no seq 999 (its last event is seq {})",
                log.seq - 1
            ),
        );
        refused(
            &case,
            &args(&range(n.answer, n.ask)),
            1,
            &format!(
                "--start {} comes after --end {} on the surface",
                n.answer, n.ask
            ),
        );
        refused(
            &case,
            &args(&range(n.ask, n.calling)),
            1,
            &format!(
                "range {}..{} splits tool call call_abc (assistant seq {}) from its result (seq {})",
                n.ask, n.calling, n.calling, n.result
            ),
        );
        refused(
            &case,
            &args(&range(n.result, n.answer2)),
            1,
            "splits tool call call_abc",
        );
        if let Some(sys) = n.system {
            refused(
                &case,
                &args(&range(sys, n.answer)),
                1,
                &format!("covers the protected system prompt at seq {sys}"),
            );
        }
        refused(
            &case,
            &[
                "--start",
                &n.ask.to_string(),
                "--end",
                &n.answer.to_string(),
                "--summary",
                " \n ",
            ],
            1,
            "the summary is empty",
        );

        // Endpoints shadowed by an earlier compaction name the replacement.
        let new = compact(&case.path, n.ask, n.answer, "first");
        refused(
            &case,
            &args(&range(n.calling, n.answer2)),
            1,
            &format!(
                "--start {}: seq {} is not on the current surface (it was replaced by seq {new})",
                n.calling, n.calling
            ),
        );
        refused(
            &case,
            &args(&range(new, n.answer)),
            1,
            &format!(
                "--end {}: seq {} is not on the current surface (it was replaced by seq {new})",
                n.answer, n.answer
            ),
        );
    }
}

#[test]
fn logs_that_must_be_repaired_or_fixed_first_are_refused() {
    for v in VERSIONS {
        // An open last turn.
        let (mut log, n) = session(v);
        log.turn_start();
        log.step_start();
        let case = Case::new(&log.text);
        refused(
            &case,
            &args(&range(n.ask, n.answer)),
            1,
            &format!("the last turn (3, started at seq {}) is open", log.seq - 2),
        );
        // A torn final line.
        let (log, n) = session(v);
        let case = Case::new(&format!("{}{{\"type\":\"us", log.text));
        refused(&case, &args(&range(n.ask, n.answer)), 1, "torn line");
        // An error in the committed part: a user message without a message id.
        let (mut log, n) = session(v);
        log.turn_start();
        log.ev(
            "user/message",
            r#"{"role":"user","content":[],"source":{"kind":"user"}}"#,
            r#","surfaceOp":"append""#,
        );
        log.turn_end();
        let case = Case::new(&log.text);
        refused(
            &case,
            &args(&range(n.ask, n.answer)),
            1,
            "message-id-missing",
        );
        refused(&case, &args(&range(n.ask, n.answer)), 1, "error");
        // A compaction that never ended.
        let (mut log, n) = session(v);
        log.ev(
            "compaction/start",
            r#"{"compactionId":"k","turn":null}"#,
            "",
        );
        let case = Case::new(&log.text);
        refused(
            &case,
            &args(&range(n.ask, n.answer)),
            1,
            "another compaction is still running",
        );
    }
}

#[test]
fn unsupported_logs_and_live_writers_exit_3_and_write_nothing() {
    let case = Case::new(
        "{\"type\":\"session\",\"version\":7,\"id\":\"s\",\"createdAt\":1,\"delegationDepth\":0}\n",
    );
    refused(&case, &args(&range(0, 0)), 3, "refusing to compact");
    // zstd logs are read now (tests/store.rs compacts one); a damaged one is refused as
    // invalid, not unsupported, and left alone.
    let mut zstd = vec![0x28, 0xB5, 0x2F, 0xFD];
    zstd.extend_from_slice(b"\x00\x00junk");
    let case = Case::named("session.jsonl.zstd", &zstd);
    refused(&case, &args(&range(0, 0)), 1, "refusing to compact");

    let (log, n) = session(4);
    let case = Case::new(&log.text);
    let lock = case.tmp.path().join("session.lock");
    fs::write(&lock, b"").unwrap();
    let held = fs::File::open(&lock).unwrap();
    held.lock().unwrap();
    refused(
        &case,
        &args(&range(n.ask, n.answer)),
        3,
        "a live writer holds the session",
    );
    refused(
        &case,
        &[
            "--dry-run",
            "--start",
            &n.ask.to_string(),
            "--end",
            &n.answer.to_string(),
            "--summary",
            "s",
        ],
        3,
        "a live writer holds the session",
    );
    drop(held);
    compact(&case.path, n.ask, n.answer, "released");
}

#[test]
fn a_failed_append_restores_the_original_bytes() {
    let (log, n) = session(3);
    let case = Case::new(&log.text);
    for fault in ["append:0", "append:100", "sync"] {
        let out = dshs()
            .env("DSHS_TEST_FAULT", fault)
            .arg("compact")
            .args(args(&range(n.ask, n.answer)))
            .arg(&case.path)
            .assert()
            .code(2);
        assert!(
            String::from_utf8_lossy(&out.get_output().stderr).contains("restored"),
            "{fault}"
        );
        assert_eq!(case.bytes(), log.text.as_bytes(), "{fault}");
        // The lock taken for the write stays, as DSH leaves it (FORMAT.md §2.1).
        assert_eq!(case.files(), ["session.jsonl", "session.lock"], "{fault}");
    }
}

// ---------------------------------------------------------------------------------------------
// Property: on any generated log, any range is either compacted into a log that validates
// with the expected surface, or refused for the reason §15.3 gives.

mod property {
    use super::*;
    use dshs::log::compact::{self, Lookout, Minted, PlanError, Refusal, Request};
    use dshs::log::derive::Deriver;
    use dshs::log::scan::{ScanOptions, scan};
    use proptest::prelude::*;

    fn check(version: u8, seed: u64, a: usize, b: usize, reversed: bool) {
        let mut buf = Vec::new();
        generator::Generator::new(&mut buf, version, seed)
            .run(30_000)
            .expect("generate");
        // Close an open final turn first (compaction happens between turns).
        let case = Case::named("session.jsonl", &buf);
        let (s, _) = scan_file(&case.path);
        if s.open_turn() {
            dshs().arg("repair").arg(&case.path).assert().code(0);
        }
        let bytes = case.bytes();
        let (s, _) = scan_file(&case.path);
        let nodes: Vec<(u64, i64, bool)> = s
            .state
            .as_ref()
            .unwrap()
            .surface
            .iter()
            .map(|n| {
                let delta = i64::from(n.tool_calls) - i64::from(n.kind == SurfaceKind::ToolResult);
                (n.seq, delta, n.kind == SurfaceKind::System)
            })
            .collect();
        // Mostly in surface order; sometimes reversed on purpose.
        let (lo, hi) = {
            let (x, y) = (a % nodes.len(), b % nodes.len());
            (x.min(y), x.max(y))
        };
        let (i, j) = if reversed { (hi, lo) } else { (lo, hi) };
        let req = Request {
            start: nodes[i].0,
            end: nodes[j].0,
            summary: "property summary".into(),
        };
        let mut lookout = Lookout::new(&req);
        let s = scan(
            bytes.as_slice(),
            Some(&case.path),
            &ScanOptions::default(),
            &mut Vec::new(),
            &mut lookout,
        )
        .unwrap();
        let mut deriver = Deriver::open(&case.path).unwrap();
        let minted = Minted::fresh().unwrap();
        let result = compact::plan(&s, &lookout, &req, minted, &mut deriver);
        let before: i64 = nodes[..i.min(j)].iter().map(|n| n.1).sum();
        let after: i64 = nodes[..=i.max(j)].iter().map(|n| n.1).sum();
        let what = format!("v{version} seed {seed} range {}..{}", req.start, req.end);
        match result {
            Ok(p) => {
                assert!(i <= j, "{what}: reversed range planned");
                assert_eq!((before, after), (0, 0), "{what}: unbalanced range planned");
                assert!(
                    !(version >= 3 && i == 0 && nodes[0].2),
                    "{what}: head planned"
                );
                let v = compact::verify(
                    bytes.as_slice(),
                    &p,
                    Some(&case.path),
                    &ScanOptions::default(),
                )
                .unwrap();
                assert!(v.ok, "{what}: {:#?}", v.findings);
            }
            Err(PlanError::Refused(Refusal::Reversed { .. })) => assert!(i > j, "{what}"),
            Err(PlanError::Refused(Refusal::SplitsToolCall { .. }))
                if i > j || (version >= 3 && i == 0 && nodes[0].2) =>
            {
                panic!("{what}: refused for the wrong reason")
            }
            Err(PlanError::Refused(Refusal::SystemHead { .. })) => {
                assert!(version >= 3 && i == 0 && nodes[0].2, "{what}")
            }
            Err(PlanError::Refused(Refusal::SplitsToolCall { .. })) => {
                assert!(before != 0 || after != 0, "{what}")
            }
            Err(e) => panic!("{what}: unexpected {e:?}"),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]
        #[test]
        fn any_range_is_compacted_validly_or_refused_for_its_reason(
            version in 0u8..=4,
            seed in 1u64..10_000,
            a in 0usize..1000,
            b in 0usize..1000,
            reversed in proptest::bool::weighted(0.1),
        ) {
            check(version, seed, a, b, reversed);
        }
    }
}
