//! `dshs grep`: every source of text per format version, decoded (never the escaped JSON),
//! shadowed text marked and left out by `--surface`, each option, plain and zstd logs,
//! storage roots, JSON Lines, exit codes, damaged logs.

mod common;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use common::{compress, dshs, json_lines};
use predicates::prelude::*;
use serde_json::Value;

/// A log being written by hand, one event at a time.
struct Log {
    v: u8,
    lines: Vec<String>,
    seq: u64,
}

const T0: u64 = 1_790_000_000_000;

impl Log {
    fn new(v: u8) -> Log {
        Log::with_id(v, &format!("grep-{v}"))
    }

    fn with_id(v: u8, id: &str) -> Log {
        let seeded = if v >= 2 { r#","isSeeded":false"# } else { "" };
        Log {
            v,
            lines: vec![format!(
                r#"{{"type":"session","version":{v},"id":"{id}","createdAt":{T0},"cwd":"/w"{seeded},"delegationDepth":0}}"#
            )],
            seq: 0,
        }
    }

    /// An event at time T0 + seq seconds; `tail` adds envelope members (`,"surfaceOp":…`).
    fn push(&mut self, ty: &str, data: &str, tail: &str) -> u64 {
        let seq = self.seq;
        self.seq += 1;
        let time = T0 + seq * 1000;
        self.lines.push(format!(
            r#"{{"type":"{ty}","seq":{seq},"time":{time},"data":{data}{tail}}}"#
        ));
        seq
    }

    fn append(&mut self, ty: &str, data: &str) -> u64 {
        self.push(ty, data, r#","surfaceOp":"append""#)
    }

    /// A packed text-chunks row (formats 0 and 1) of `texts`.
    fn packed(&mut self, turn: u64, step: u64, texts: &[&str]) -> u64 {
        let seq0 = self.seq;
        self.seq += texts.len() as u64;
        let dt = vec!["0"; texts.len() - 1].join(",");
        let texts: Vec<String> = texts.iter().map(|t| format!("\"{t}\"")).collect();
        self.lines.push(format!(
            r#"{{"type":"text-chunks","seq0":{seq0},"time0":{},"data":{{"turn":{turn},"step":{step},"index":0,"dt":[{dt}],"texts":[{}]}}}}"#,
            T0 + seq0 * 1000,
            texts.join(",")
        ));
        seq0
    }

    fn replace(&self, start: u64, end: u64) -> String {
        if self.v >= 3 {
            format!(r#"{{"op":"replace","startSeq":{start},"endSeq":{end}}}"#)
        } else {
            format!(r#"{{"op":"replace","start":{start},"end":{end}}}"#)
        }
    }

    fn stream(&self, texts: &str) -> String {
        if self.v >= 2 {
            format!(
                r#","stream":[{{"type":"text-chunks","time0":1,"index":0,"dt":[],"texts":[{texts}]}}]"#
            )
        } else {
            String::new()
        }
    }

    fn text(&self) -> String {
        let mut s = self.lines.join("\n");
        s.push('\n');
        s
    }
}

/// Tool-call arguments as stored: JSON text inside a JSON string, so `\"` inside the command
/// is stored `\\\"` and the é of the path `\\u00e9`.
const ARGS: &str = r#"{\"command\":\"echo \\\"hi\\\" && ls ARGWORD\",\"path\":\"caf\\u00e9\"}"#;

/// A valid log of format `v` with one of each source of text: turn 1 (a user message with
/// escapes, an assistant message with reasoning, text and a tool call, the call, its result)
/// compacted away between turns, then turn 2. Returns the log and the seqs of turn 1's user
/// message, assistant message and tool result.
fn rich(v: u8) -> (Log, [u64; 3]) {
    let mut l = Log::new(v);
    l.push("turn/start", r#"{"turn":1}"#, "");
    l.push("step/start", r#"{"turn":1,"step":1}"#, "");
    if v <= 2 {
        l.push(
            "request/header",
            r#"{"header":{"config":{"provider":"p","model":"m"},"system":"You are the PROMPTWORD harness"},"reason":"initial"}"#,
            "",
        );
    }
    if v >= 3 {
        let source = if v == 3 {
            r#"{"kind":"plugin","plugin":"@deepseek-ai/dsh-system-prompt"}"#
        } else {
            r#"{"kind":"system-prompt"}"#
        };
        l.append(
            "system/message",
            &format!(
                r#"{{"turn":1,"step":1,"message":{{"id":"s1","role":"system","content":[{{"type":"text","text":"system SYSWORD says"}}],"source":{source}}}}}"#
            ),
        );
    }
    let user = l.append(
        "user/message",
        r#"{"id":"u1","role":"user","content":[{"type":"text","text":"first line\nsecond \"quoted\" caf\u00e9 USERWORD"}],"source":{"kind":"user"}}"#,
    );
    if v >= 2 {
        l.push(
            "assistant/attempt",
            r#"{"turn":1,"step":1,"stream":[{"type":"text-chunks","time0":1,"index":0,"dt":[0],"texts":["ATTEMPT","WORD lost"]},{"type":"chunk","time":1,"chunk":{"type":"text-delta","index":0,"text":"GHOSTWORD"}},{"type":"chunk","time":1,"chunk":{"type":"block-end","index":0,"block":{"type":"text","text":"ATTEMPTWORD lost"}}},{"type":"text-chunks","time0":2,"index":1,"dt":[0],"texts":["CUT","OFFWORD"]},{"type":"chunk","time":2,"chunk":{"type":"text-delta","index":1,"text":"LONEWORD"}}]}"#,
            "",
        );
    } else {
        l.push(
            "assistant/chunk",
            r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"DELTAWORD one"}}"#,
            "",
        );
        l.packed(1, 1, &["pa", "cked PACKED", "WORD"]);
    }
    let stream = l.stream(r#""STREAMWORD said""#);
    let asst = l.append(
        "assistant/message",
        &format!(
            r#"{{"turn":1,"step":1,"message":{{"id":"a1","role":"assistant","content":[{{"type":"reasoning","text":"thinking REASONWORD"}},{{"type":"text","text":"answer ANSWERWORD"}},{{"type":"tool-call","id":"c1","name":"bash","arguments":"{ARGS}"}}],"source":{{"kind":"model","provider":"p","model":"m"}}}}{stream}}}"#
        ),
    );
    let call = l.push(
        "tool/call",
        &format!(r#"{{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{ARGS}"}}"#),
        "",
    );
    let message = if v >= 4 {
        r#"{"id":"r1","role":"tool","toolCallId":"c1","content":[{"type":"text","text":"OUTPUTWORD listed\nsecond"}],"source":{"kind":"tool","callId":"c1"}}"#
    } else {
        r#"{"id":"r1","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"OUTPUTWORD listed\nsecond"}]}],"source":{"kind":"tool","callId":"c1"}}"#
    };
    let result = l.push(
        "tool/result",
        &format!(r#"{{"turn":1,"step":1,"message":{message}}}"#),
        &format!(r#","sourceEventSeqs":[{call}],"surfaceOp":"append""#),
    );
    l.push("step/end", r#"{"turn":1,"step":1}"#, "");
    l.push(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        "",
    );
    let start = l.push(
        "compaction/start",
        r#"{"compactionId":"c1","turn":null}"#,
        "",
    );
    let summary = l.push(
        "compaction/summary",
        &format!(
            r#"{{"compactionId":"c1","summary":[{{"type":"text","text":"SUMMARYWORD of turn one"}}],"shadowedRange":{{"start":{user},"end":{result}}},"shadowedSeqs":[{user},{asst},{result}],"shadowedTokenCount":10,"provider":"p","model":"m"}}"#
        ),
        "",
    );
    let source = if v >= 4 {
        r#"{"kind":"compact-checkpoint","compactionId":"c1"}"#
    } else {
        r#"{"kind":"plugin","plugin":"compact","compactionId":"c1"}"#
    };
    let op = l.replace(user, result);
    l.push(
        "user/message",
        &format!(
            r#"{{"id":"k1","role":"user","content":[{{"type":"text","text":"CHECKPOINTWORD: turn one compacted"}}],"source":{source}}}"#
        ),
        &format!(
            r#","sourceEventSeqs":[{start},{summary},{user},{asst},{result}],"surfaceOp":{op}"#
        ),
    );
    l.push("compaction/end", r#"{"compactionId":"c1","turn":null}"#, "");
    l.push("turn/start", r#"{"turn":2}"#, "");
    l.push(
        "session/title",
        &format!(
            r#"{{"title":"TITLEWORD session","messageSeqs":[{user}],"source":{{"kind":"fallback"}}}}"#
        ),
        "",
    );
    l.push(
        "todo/write",
        r#"{"todos":[{"content":"TODOWORD item","status":"pending"}]}"#,
        "",
    );
    l.push("step/start", r#"{"turn":2,"step":1}"#, "");
    if v >= 4 {
        l.append(
            "developer/message",
            r#"{"turn":2,"step":1,"message":{"id":"d1","role":"developer","content":[{"type":"text","text":"DEVWORD note"}],"source":{"kind":"runtime-context"}}}"#,
        );
    }
    l.append(
        "user/message",
        r#"{"id":"u2","role":"user","content":[{"type":"text","text":"after the compaction LATEWORD"}],"source":{"kind":"user"}}"#,
    );
    l.push("step/end", r#"{"turn":2,"step":1}"#, "");
    l.push(
        "turn/end",
        r#"{"turn":2,"reason":{"kind":"completed"}}"#,
        "",
    );
    (l, [user, asst, result])
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, bytes).unwrap();
    path
}

fn grep() -> Command {
    let mut c = dshs();
    c.env_remove("DSH_HOME").arg("grep");
    c
}

/// JSON records of a run (any exit status) and that status.
fn run_json(args: &[&str], paths: &[&Path]) -> (Vec<Value>, i32) {
    let out = grep()
        .args(["--format", "json"])
        .args(args)
        .args(paths)
        .output()
        .unwrap();
    (json_lines(&out.stdout), out.status.code().unwrap_or(-1))
}

/// The match records (summary and context left out).
fn matches(args: &[&str], paths: &[&Path]) -> Vec<Value> {
    let (records, _) = run_json(args, paths);
    records
        .into_iter()
        .filter(|r| r["type"] == "match")
        .collect()
}

fn summary(records: &[Value]) -> &Value {
    let last = records.last().expect("a summary");
    assert_eq!(last["type"], "summary", "{records:#?}");
    last
}

fn validate_ok(path: &Path) {
    dshs()
        .args(["validate", "--deny-warnings"])
        .arg(path)
        .assert()
        .success();
}

/// (eventType, role, part, shadowed) of each match.
fn shapes(found: &[Value]) -> Vec<(String, Value, String, bool)> {
    found
        .iter()
        .map(|m| {
            (
                m["eventType"].as_str().unwrap().to_owned(),
                m["role"].clone(),
                m["part"].as_str().unwrap().to_owned(),
                m["shadowed"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn shape(
    ty: &str,
    role: Option<&str>,
    part: &str,
    shadowed: bool,
) -> (String, Value, String, bool) {
    (
        ty.to_owned(),
        role.map_or(Value::Null, |r| Value::String(r.to_owned())),
        part.to_owned(),
        shadowed,
    )
}

#[test]
fn every_source_of_text_is_found_in_every_format_version() {
    let dir = tempfile::tempdir().unwrap();
    for v in 0..=4u8 {
        let (log, _) = rich(v);
        let path = write(dir.path(), &format!("v{v}.jsonl"), log.text().as_bytes());
        validate_ok(&path);
        let p = [path.as_path()];
        let find = |word: &str| shapes(&matches(&[word], &p));
        let mut want = vec![
            (
                "USERWORD",
                vec![shape("user/message", Some("user"), "text", true)],
            ),
            (
                "ANSWERWORD",
                vec![shape("assistant/message", Some("assistant"), "text", true)],
            ),
            (
                "REASONWORD",
                vec![shape(
                    "assistant/message",
                    Some("assistant"),
                    "reasoning",
                    true,
                )],
            ),
            (
                "ARGWORD",
                vec![
                    shape("assistant/message", Some("assistant"), "arguments", true),
                    shape("tool/call", Some("assistant"), "arguments", false),
                ],
            ),
            (
                "^bash$",
                vec![
                    shape("assistant/message", Some("assistant"), "tool-name", true),
                    shape("tool/call", Some("assistant"), "tool-name", false),
                ],
            ),
            (
                "OUTPUTWORD",
                vec![shape("tool/result", Some("tool"), "text", true)],
            ),
            (
                "SUMMARYWORD",
                vec![shape("compaction/summary", None, "summary", false)],
            ),
            (
                "CHECKPOINTWORD",
                vec![shape("user/message", Some("user"), "text", false)],
            ),
            (
                "TITLEWORD",
                vec![shape("session/title", None, "title", false)],
            ),
            ("TODOWORD", vec![shape("todo/write", None, "todo", false)]),
            (
                "LATEWORD",
                vec![shape("user/message", Some("user"), "text", false)],
            ),
            // Streamed deltas are searched only with --chunks.
            ("STREAMWORD", vec![]),
            ("DELTAWORD", vec![]),
        ];
        match v {
            0..=2 => want.push((
                "PROMPTWORD",
                vec![shape(
                    "request/header",
                    Some("system"),
                    "system-prompt",
                    false,
                )],
            )),
            _ => want.push((
                "SYSWORD",
                vec![shape("system/message", Some("system"), "text", false)],
            )),
        }
        if v >= 2 {
            // An attempt's stream is the only copy of its text: its ended blocks whole, the
            // pieces of one cut off joined.
            for word in ["ATTEMPTWORD", "OFFWORD", "LONEWORD"] {
                want.push((
                    word,
                    vec![shape("assistant/attempt", Some("assistant"), "text", false)],
                ));
            }
            // A cut-off block's pieces are joined; a delta of a block that ended is its
            // block-end's.
            want.push((
                "CUTOFFWORDLONEWORD",
                vec![shape("assistant/attempt", Some("assistant"), "text", false)],
            ));
            want.push(("GHOSTWORD", vec![]));
        }
        if v >= 4 {
            want.push((
                "DEVWORD",
                vec![shape("developer/message", Some("developer"), "text", false)],
            ));
        }
        for (word, expected) in want {
            assert_eq!(find(word), expected, "format {v}, {word}");
        }
        // The surface mark of what is seen now.
        let visible = matches(&["CHECKPOINTWORD"], &p);
        assert_eq!(visible[0]["surface"], "visible", "format {v}");
        let log_only = matches(&["SUMMARYWORD"], &p);
        assert_eq!(log_only[0]["surface"], Value::Null, "format {v}");
    }
}

#[test]
fn streamed_deltas_are_searched_with_chunks_each_delta_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    for v in 0..=4u8 {
        let (log, _) = rich(v);
        let path = write(dir.path(), &format!("v{v}.jsonl"), log.text().as_bytes());
        let p = [path.as_path()];
        if v <= 1 {
            let delta = matches(&["--chunks", "DELTAWORD"], &p);
            assert_eq!(
                shapes(&delta),
                [shape("assistant/chunk", Some("assistant"), "text", false)]
            );
            // A packed row's members are events of their own (seq0 + k).
            let packed = matches(&["--chunks", "PACKED"], &p);
            assert_eq!(packed.len(), 1, "format {v}");
            assert_eq!(packed[0]["eventType"], "assistant/chunk");
            let line = packed[0]["line"].as_u64().unwrap();
            let member = &log.lines[line as usize - 1];
            assert!(member.starts_with(r#"{"type":"text-chunks""#), "{member}");
            let seq0 = serde_json::from_str::<Value>(member).unwrap()["seq0"]
                .as_u64()
                .unwrap();
            assert_eq!(packed[0]["seq"].as_u64(), Some(seq0 + 1));
            assert!(matches(&["--chunks", "PACKEDWORD"], &p).is_empty());
        } else {
            let stream = matches(&["--chunks", "STREAMWORD"], &p);
            assert_eq!(
                shapes(&stream),
                [shape("assistant/message", Some("assistant"), "text", true)],
                "format {v}"
            );
        }
    }
}

#[test]
fn text_shadowed_by_a_compaction_is_found_marked_and_left_out_by_surface() {
    let dir = tempfile::tempdir().unwrap();
    for v in 0..=4u8 {
        let (log, [user, _, _]) = rich(v);
        let path = write(dir.path(), &format!("v{v}.jsonl"), log.text().as_bytes());
        let p = [path.as_path()];
        let found = matches(&["USERWORD"], &p);
        assert_eq!(found.len(), 1, "format {v}");
        assert_eq!(found[0]["seq"].as_u64(), Some(user));
        assert_eq!(found[0]["shadowed"], true);
        assert_eq!(found[0]["surface"], "shadowed");
        let (records, status) = run_json(&["--surface", "USERWORD"], &p);
        assert_eq!(status, 1, "format {v}: nothing on the surface");
        assert_eq!(summary(&records)["matches"], 0);
        // The checkpoint that replaced it is what the model sees.
        let seen = matches(&["--surface", "CHECKPOINTWORD|LATEWORD"], &p);
        assert_eq!(seen.len(), 2, "format {v}");
        assert!(seen.iter().all(|m| m["shadowed"] == false));
        // Log-only text is not on the surface; a v0-v2 system prompt is what the model is
        // given now.
        assert!(matches(&["--surface", "SUMMARYWORD|TITLEWORD|ARGWORD"], &p).is_empty());
        let prompt = matches(&["--surface", "PROMPTWORD|SYSWORD"], &p);
        assert_eq!(prompt.len(), 1, "format {v}");
        // Human output marks it.
        grep()
            .args(["--color", "never", "USERWORD"])
            .arg(&path)
            .assert()
            .success()
            .stdout(predicate::str::contains(
                "user/message user [shadowed]: second",
            ));
    }
}

#[test]
fn at_seq_searches_the_log_as_it_stood_then() {
    let dir = tempfile::tempdir().unwrap();
    let (log, [user, _, result]) = rich(3);
    let path = write(dir.path(), "v3.jsonl", log.text().as_bytes());
    let p = [path.as_path()];
    // Right after the tool result, before the compaction: turn 1 is still on the surface.
    let at = result.to_string();
    let found = matches(&["--at", &at, "--surface", "USERWORD"], &p);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["seq"].as_u64(), Some(user));
    assert_eq!(found[0]["shadowed"], false);
    // Later events are not searched.
    assert!(matches(&["--at", &at, "LATEWORD"], &p).is_empty());
    // A seq the log does not reach: a note, everything searched.
    grep()
        .args(["--at", "9999", "LATEWORD"])
        .arg(&path)
        .assert()
        .success()
        .stderr(predicate::str::contains("has no event with seq 9999"));
    // Issue 37 item 16: said plainly, with where the log ends, in every output mode (the
    // count of events was that of a state already dropped: "all 0 of its events").
    let last = log.seq - 1;
    for args in [&["--at", "9999"][..], &["--at", "9999", "-c"]] {
        let out = grep()
            .args(args)
            .arg("LATEWORD")
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "has no event with seq 9999 (its last event is seq {last}); it was searched whole"
            )),
            "{args:?}: {err}"
        );
        assert!(!err.contains("all 0"), "{err}");
    }
}

#[test]
fn escaped_strings_are_matched_by_their_decoded_text() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = rich(4);
    let path = write(dir.path(), "v4.jsonl", log.text().as_bytes());
    let p = [path.as_path()];
    // `\n` splits the text into lines: the second line is its own.
    let found = matches(&["^second"], &p);
    let user: Vec<&Value> = found
        .iter()
        .filter(|m| m["eventType"] == "user/message")
        .collect();
    assert_eq!(user.len(), 1);
    assert_eq!(user[0]["textLine"], 2);
    assert_eq!(user[0]["text"], "second \"quoted\" café USERWORD");
    // `\"` is a quote, `\u00e9` an é.
    assert_eq!(matches(&["-F", r#""quoted" café"#], &p).len(), 1);
    // Twice escaped in tool-call arguments (`\\\"`, `\\u00e9`): decoded too.
    let args = matches(&["-F", r#"echo "hi" && ls"#], &p);
    assert_eq!(args.len(), 2);
    assert_eq!(args[0]["key"], "command");
    assert_eq!(args[0]["tool"], "bash");
    let path_arg = matches(&["^café$"], &p);
    assert_eq!(path_arg.len(), 2, "{path_arg:#?}");
    assert!(path_arg.iter().all(|m| m["key"] == "path"));
    // The escaped JSON itself is never matched.
    for raw in [r"caf\u00e9", r#"\"quoted\""#, r"line\nsecond", r#"\\\"hi"#] {
        let (records, status) = run_json(&["-F", raw], &p);
        assert_eq!(status, 1, "{raw} matched: {records:#?}");
    }
}

#[test]
fn zstd_logs_give_the_same_matches_as_plain_ones() {
    let dir = tempfile::tempdir().unwrap();
    for v in [0u8, 3, 4] {
        let (log, _) = rich(v);
        let plain = write(dir.path(), &format!("v{v}.jsonl"), log.text().as_bytes());
        let zstd = write(
            dir.path(),
            &format!("v{v}.jsonl.zstd"),
            &compress(log.text().as_bytes(), 3),
        );
        let strip = |mut records: Vec<Value>| {
            for r in &mut records {
                r.as_object_mut().unwrap().remove("file");
            }
            records
        };
        for args in [
            &["WORD"][..],
            &["--surface", "-i", "word"],
            &["-C", "2", "USERWORD"],
        ] {
            let (a, sa) = run_json(args, &[plain.as_path()]);
            let (b, sb) = run_json(args, &[zstd.as_path()]);
            assert_eq!((sa, sb), (0, 0));
            assert!(a.len() > 2, "{a:#?}");
            assert_eq!(strip(a), strip(b), "format {v}, {args:?}");
        }
    }
}

/// A storage root: two projects, three sessions (plain and zstd), one with an older
/// generation beside its newest.
fn root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let (a, _) = rich(3);
    write(r, "--w--/s-a/session.v3.jsonl", a.text().as_bytes());
    let (b, _) = rich(0);
    write(
        r,
        "--w--/s-b/session.jsonl.zstd",
        &compress(b.text().as_bytes(), 4),
    );
    let mut c = Log::with_id(4, "s-c");
    c.push("turn/start", r#"{"turn":1}"#, "");
    c.push("step/start", r#"{"turn":1,"step":1}"#, "");
    c.append(
        "user/message",
        r#"{"id":"u","role":"user","content":[{"type":"text","text":"nothing to see"}],"source":{"kind":"user"}}"#,
    );
    c.push("step/end", r#"{"turn":1,"step":1}"#, "");
    c.push(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        "",
    );
    write(r, "--x--/s-c/session.v4.jsonl", c.text().as_bytes());
    // An older generation: not read (it would match LATEWORD too).
    let (old, _) = rich(2);
    write(r, "--x--/s-c/session.v2.jsonl", old.text().as_bytes());
    dir
}

#[test]
fn a_storage_root_is_searched_session_by_session_in_path_order() {
    let dir = root();
    let r = dir.path();
    let sa = r.join("--w--/s-a").display().to_string();
    let sb = r.join("--w--/s-b").display().to_string();
    for jobs in ["1", "3"] {
        let (records, status) = run_json(&["-j", jobs, "LATEWORD"], &[r]);
        assert_eq!(status, 0);
        let files: Vec<&str> = records
            .iter()
            .filter(|m| m["type"] == "match")
            .map(|m| m["file"].as_str().unwrap())
            .collect();
        assert_eq!(files, [sa.as_str(), sb.as_str()], "-j {jobs}");
        let s = summary(&records);
        assert_eq!(s["logs"], 3);
        assert_eq!(s["logsWithMatches"], 2);
        // s-c holds no line that could match: it is never parsed.
        assert_eq!(s["parsed"], 2);
    }
    // -l: the sessions; -c: their counts.
    grep()
        .args(["-l", "WORD"])
        .arg(r)
        .assert()
        .success()
        .stdout(format!("{sa}\n{sb}\n"));
    let counts = grep()
        .args(["-c", "USERWORD|LATEWORD"])
        .arg(r)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(counts.stdout).unwrap(),
        format!("{sa}:2\n{sb}:2\n")
    );
    // --surface counts only what is seen now.
    let counts = grep()
        .args(["-c", "--surface", "USERWORD|LATEWORD"])
        .arg(r)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(counts.stdout).unwrap(),
        format!("{sa}:1\n{sb}:1\n")
    );
    // JSON counts.
    let (records, _) = run_json(&["-c", "USERWORD"], &[r]);
    assert_eq!(records[0]["type"], "count");
    assert_eq!(records[0]["matches"], 1);
    assert_eq!(records.len(), 3);
}

#[test]
fn without_a_path_dsh_s_own_root_is_searched() {
    let home = tempfile::tempdir().unwrap();
    let (a, _) = rich(3);
    write(
        home.path(),
        "sessions/--w--/s-a/session.v3.jsonl",
        a.text().as_bytes(),
    );
    dshs()
        .env("DSH_HOME", home.path())
        .args(["grep", "-l", "LATEWORD"])
        .assert()
        .success()
        .stdout(predicate::str::contains("s-a"));
    let empty = tempfile::tempdir().unwrap();
    dshs()
        .env("DSH_HOME", empty.path())
        .args(["grep", "x"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("does not exist"));
}

#[test]
fn session_selects_logs_by_header_id() {
    let dir = root();
    let r = dir.path();
    let (records, status) = run_json(&["--session", "grep-0", "LATEWORD"], &[r]);
    assert_eq!(status, 0);
    let files: Vec<&Value> = records.iter().filter(|m| m["type"] == "match").collect();
    assert_eq!(files.len(), 1);
    assert!(files[0]["file"].as_str().unwrap().ends_with("s-b"));
    assert_eq!(summary(&records)["logs"], 1);
    // A prefix selects; repeated values add up.
    let (records, _) = run_json(&["--session", "grep-", "--session", "s-c", "-c", "."], &[r]);
    assert_eq!(summary(&records)["logs"], 3);
    let (_, status) = run_json(&["--session", "nobody", "LATEWORD"], &[r]);
    assert_eq!(status, 1);
}

#[test]
fn role_and_type_filters_combine() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = rich(4);
    let path = write(dir.path(), "v4.jsonl", log.text().as_bytes());
    let p = [path.as_path()];
    let words = "USERWORD|ANSWERWORD|OUTPUTWORD|ARGWORD|SUMMARYWORD|SYSWORD|DEVWORD";
    let types_of = |args: &[&str]| -> Vec<String> {
        let mut a = args.to_vec();
        a.push(words);
        matches(&a, &p)
            .iter()
            .map(|m| {
                format!(
                    "{} {}",
                    m["eventType"].as_str().unwrap(),
                    m["part"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(types_of(&["--role", "tool"]), ["tool/result text"]);
    assert_eq!(
        types_of(&["--role", "assistant"]),
        [
            "assistant/message text",
            "assistant/message arguments",
            "tool/call arguments"
        ]
    );
    assert_eq!(
        types_of(&["--role", "system", "--role", "developer"]),
        ["system/message text", "developer/message text"]
    );
    assert_eq!(
        types_of(&["--type", "tool/"]),
        ["tool/call arguments", "tool/result text"]
    );
    assert_eq!(types_of(&["--type", "tool/call"]), ["tool/call arguments"]);
    assert_eq!(types_of(&["--type", "tool"]), Vec::<String>::new());
    assert_eq!(
        types_of(&["--type", "tool/", "--role", "assistant"]),
        ["tool/call arguments"]
    );
    // Summaries have no role: any --role leaves them out.
    assert_eq!(
        types_of(&["--type", "compaction/summary"]),
        ["compaction/summary summary"]
    );
    assert!(types_of(&["--type", "compaction/summary", "--role", "user"]).is_empty());
}

#[test]
fn turn_and_time_filters_select_events() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = rich(4);
    let path = write(dir.path(), "v4.jsonl", log.text().as_bytes());
    let p = [path.as_path()];
    let seqs = |args: &[&str]| -> Vec<u64> {
        let mut a = args.to_vec();
        a.push("USERWORD|LATEWORD|TITLEWORD");
        matches(&a, &p)
            .iter()
            .map(|m| m["seq"].as_u64().unwrap())
            .collect()
    };
    let all = seqs(&[]);
    assert_eq!(all.len(), 3);
    // A user message belongs to the turn open around it.
    assert_eq!(seqs(&["--turn", "1"]), [all[0]]);
    assert_eq!(seqs(&["--turn", "2.."]), [all[1], all[2]]);
    assert_eq!(seqs(&["--turn", "..1"]), [all[0]]);
    let at = |seq: u64| format!("@{}", T0 + seq * 1000);
    assert_eq!(seqs(&["--since", &at(all[1])]), [all[1], all[2]]);
    assert_eq!(seqs(&["--until", &at(all[1])]), [all[0], all[1]]);
    assert_eq!(
        seqs(&["--since", &at(all[1]), "--until", &at(all[1])]),
        [all[1]]
    );
    // RFC 3339 and dates work too (T0 is 2026-09-21T14:13:20Z).
    assert_eq!(seqs(&["--since", "2026-09-21T14:13:20Z"]).len(), 3);
    assert!(seqs(&["--since", "2026-09-22T00:00:00Z"]).is_empty());
    assert_eq!(seqs(&["--until", "2026-09-20"]).len(), 0);
    // Spans are back from now: these events are in the past.
    assert!(seqs(&["--since", "1h"]).is_empty());
    grep()
        .args(["--since", "soon", "x"])
        .arg(&path)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is not a time"));
    grep()
        .args(["--since", "@2000", "--until", "@1000", "x"])
        .arg(&path)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is after --until"));
}

#[test]
fn pattern_options_ignore_case_word_and_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = rich(3);
    let path = write(dir.path(), "v3.jsonl", log.text().as_bytes());
    let p = [path.as_path()];
    assert!(matches(&["userword"], &p).is_empty());
    assert_eq!(matches(&["-i", "userword"], &p).len(), 1);
    assert_eq!(matches(&["-i", "CAFÉ USERWORD"], &p).len(), 1);
    // -w: whole words only.
    assert_eq!(matches(&["USERWOR"], &p).len(), 1);
    assert!(matches(&["-w", "USERWOR"], &p).is_empty());
    assert_eq!(matches(&["-w", "USERWORD"], &p).len(), 1);
    // -F: no regex.
    assert!(matches(&["-F", "USER.ORD"], &p).is_empty());
    assert_eq!(matches(&["USER.ORD"], &p).len(), 1);
    // The submatches point at the match in the text.
    let m = &matches(&["-i", "Quoted"], &p)[0];
    let text = m["text"].as_str().unwrap();
    let sub = &m["submatches"][0];
    let (s, e) = (
        sub["start"].as_u64().unwrap() as usize,
        sub["end"].as_u64().unwrap() as usize,
    );
    assert_eq!(&text[s..e], "quoted");
    // Every match in the line is listed.
    let m = &matches(&["e"], &p)
        .into_iter()
        .find(|m| m["text"] == "after the compaction LATEWORD")
        .unwrap()
        .clone();
    assert_eq!(m["submatches"].as_array().unwrap().len(), 2);
}

#[test]
fn context_shows_neighbouring_events() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = rich(4);
    let path = write(dir.path(), "v4.jsonl", log.text().as_bytes());
    let (records, _) = run_json(&["-C", "1", "TITLEWORD"], &[path.as_path()]);
    let kinds: Vec<(&str, &str)> = records
        .iter()
        .filter(|r| r["type"] != "summary")
        .map(|r| {
            (
                r["type"].as_str().unwrap(),
                r["eventType"].as_str().unwrap(),
            )
        })
        .collect();
    // The event carrying text before the title (the checkpoint) and after it (the todos).
    assert_eq!(
        kinds,
        [
            ("context", "user/message"),
            ("match", "session/title"),
            ("context", "todo/write")
        ]
    );
    assert_eq!(records[0]["text"], "CHECKPOINTWORD: turn one compacted");
    let out = grep()
        .args(["--color", "never", "-C", "1", "USERWORD|LATEWORD"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let name = path.display().to_string();
    assert!(text.contains(&format!("{name}-")), "{text}");
    assert!(
        text.contains(" developer/message developer- DEVWORD note"),
        "{text}"
    );
    assert!(
        text.contains("\n--\n"),
        "groups apart are separated: {text}"
    );
}

#[test]
fn json_lines_have_the_documented_shape() {
    let dir = tempfile::tempdir().unwrap();
    let (log, [_, asst, _]) = rich(3);
    let path = write(dir.path(), "v3.jsonl", log.text().as_bytes());
    let (records, status) = run_json(&["ANSWERWORD"], &[path.as_path()]);
    assert_eq!(status, 0);
    assert_eq!(records.len(), 2);
    let m = &records[0];
    let line = log
        .lines
        .iter()
        .position(|l| l.contains("ANSWERWORD") && l.contains("assistant/message"))
        .unwrap();
    let byte: usize = log.lines[..line].iter().map(|l| l.len() + 1).sum();
    let want = serde_json::json!({
        "type": "match",
        "file": path.display().to_string(),
        "line": line + 1,
        "byte": byte,
        "seq": asst,
        "time": T0 + asst * 1000,
        "turn": 1,
        "eventType": "assistant/message",
        "role": "assistant",
        "part": "text",
        "textLine": 1,
        "shadowed": true,
        "surface": "shadowed",
        "text": "answer ANSWERWORD",
        "submatches": [{"start": 7, "end": 17}],
    });
    assert_eq!(m, &want);
    assert_eq!(
        records[1],
        serde_json::json!({
            "type": "summary", "logs": 1, "parsed": 1, "logsWithMatches": 1, "matches": 1,
            "matchedEvents": 1, "notValid": 0, "errors": 0
        })
    );
}

#[test]
fn exit_status_is_0_on_a_match_1_on_none_2_on_error() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = rich(3);
    let path = write(dir.path(), "v3.jsonl", log.text().as_bytes());
    grep().arg("LATEWORD").arg(&path).assert().code(0);
    grep().arg("NOWHERE").arg(&path).assert().code(1).stdout("");
    grep()
        .arg("a(")
        .arg(&path)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("invalid pattern"));
    grep()
        .args(["-F", "a\nb"])
        .arg(&path)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("line break"));
    // An unreadable log is an error, but the others are still searched.
    let missing = dir.path().join("missing.jsonl");
    grep()
        .arg("LATEWORD")
        .arg(&missing)
        .arg(&path)
        .assert()
        .code(2)
        .stdout(predicate::str::contains("LATEWORD"))
        .stderr(predicate::str::contains("missing.jsonl"));
    // With -q a match wins over the error.
    grep()
        .arg("-q")
        .arg("LATEWORD")
        .arg(&missing)
        .arg(&path)
        .assert()
        .code(0)
        .stdout("")
        .stderr("");
    grep().args(["--help"]).assert().success().stdout(
        predicate::str::contains("0  something matched")
            .and(predicate::str::contains("1  nothing matched"))
            .and(predicate::str::contains("2  an error")),
    );
}

#[test]
fn a_log_that_does_not_validate_is_searched_as_far_as_it_can_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = rich(3);
    // Committed damage: a line that is not JSON, followed by a turn end.
    let mut lines = log.lines.clone();
    let at = lines.len() - 3;
    lines.insert(at, "{not json".to_owned());
    let broken = write(
        dir.path(),
        "broken.jsonl",
        (lines.join("\n") + "\n").as_bytes(),
    );
    grep()
        .arg("LATEWORD|USERWORD")
        .arg(&broken)
        .assert()
        .success()
        .stdout(predicate::str::contains("LATEWORD").and(predicate::str::contains("USERWORD")))
        .stderr(predicate::str::contains("invalid log"));
    let (records, _) = run_json(&["LATEWORD"], &[broken.as_path()]);
    assert_eq!(summary(&records)["notValid"], 1);
    // An unsupported version is a note: nothing in it is searched.
    let future = write(
        dir.path(),
        "future.jsonl",
        log.text()
            .replacen(r#""version":3"#, r#""version":9"#, 1)
            .as_bytes(),
    );
    grep()
        .arg("LATEWORD")
        .arg(&future)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("unsupported log"));
}

#[test]
fn a_crash_tail_is_marked_and_not_on_the_surface() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = rich(3);
    // After the last turn end: an unusable row, then a message DSH drops on load.
    log.lines.push("{not json".to_owned());
    log.seq += 1;
    log.append(
        "user/message",
        r#"{"id":"u9","role":"user","content":[{"type":"text","text":"TAILWORD lost"}],"source":{"kind":"user"}}"#,
    );
    let path = write(dir.path(), "tail.jsonl", log.text().as_bytes());
    let found = matches(&["TAILWORD"], &[path.as_path()]);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["surface"], "crash-tail");
    assert_eq!(found[0]["shadowed"], false);
    assert!(matches(&["--surface", "TAILWORD"], &[path.as_path()]).is_empty());
    grep()
        .args(["--color", "never", "TAILWORD"])
        .arg(&path)
        .assert()
        .success()
        .stdout(predicate::str::contains("[crash tail]"));
}

#[test]
fn v0_legacy_shapes_are_searched_as_their_normalized_messages() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = Log::new(0);
    l.push("turn/start", r#"{"turn":1,"trigger":{"kind":"user"}}"#, "");
    l.push("step/start", r#"{"turn":1,"step":1}"#, "");
    l.push(
        "steering/message",
        r#"{"turn":1,"content":[{"type":"text","text":"STEERWORD now"}],"source":{"kind":"user"}}"#,
        r#","surfaceOp":"append""#,
    );
    l.append(
        "assistant/message",
        r#"{"turn":1,"step":1,"content":[{"type":"tool-call","id":"c1","name":"bash","arguments":"{\"command\":\"ls\"}"}],"provenance":{"provider":"p","model":"m"}}"#,
    );
    let call = l.push(
        "tool/call",
        r#"{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{\"command\":\"ls\"}"}"#,
        "",
    );
    l.push(
        "tool/result",
        r#"{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"LEGACYOUT here"}],"isError":false}"#,
        &format!(r#","sourceEventSeqs":[{call}],"surfaceOp":"append""#),
    );
    l.push("step/end", r#"{"turn":1,"step":1}"#, "");
    l.push(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        "",
    );
    let path = write(dir.path(), "legacy.jsonl", l.text().as_bytes());
    assert_eq!(
        shapes(&matches(&["STEERWORD"], &[path.as_path()])),
        [shape("user/message", Some("user"), "text", false)]
    );
    assert_eq!(
        shapes(&matches(
            &["--role", "tool", "LEGACYOUT"],
            &[path.as_path()]
        )),
        [shape("tool/result", Some("tool"), "text", false)]
    );
}

#[test]
fn text_from_the_log_is_escaped_and_matches_are_coloured_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = Log::new(3);
    l.push("turn/start", r#"{"turn":1}"#, "");
    l.push("step/start", r#"{"turn":1,"step":1}"#, "");
    l.append(
        "user/message",
        r#"{"id":"u","role":"user","content":[{"type":"text","text":"red \u001b[31mALERT\u001b[0m\tdone"}],"source":{"kind":"user"}}"#,
    );
    l.push("step/end", r#"{"turn":1,"step":1}"#, "");
    l.push(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        "",
    );
    let path = write(dir.path(), "esc.jsonl", l.text().as_bytes());
    let out = grep()
        .args(["--color", "never", "ALERT"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('\x1b'), "{text:?}");
    assert!(
        text.contains(r"red \u{1b}[31mALERT\u{1b}[0m\tdone"),
        "{text}"
    );
    let out = grep()
        .args(["--color", "always", "ALERT"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("\x1b[1;31mALERT\x1b[0m") || text.contains("\x1b[31;1mALERT"),
        "{text:?}"
    );
    // JSON is never coloured, and holds the decoded text.
    let found = matches(&["ALERT"], &[path.as_path()]);
    assert_eq!(found[0]["text"], "red \u{1b}[31mALERT\u{1b}[0m\tdone");
}

#[test]
fn long_lines_are_cut_around_the_match_on_a_terminal_but_whole_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = Log::new(4);
    l.push("turn/start", r#"{"turn":1}"#, "");
    l.push("step/start", r#"{"turn":1,"step":1}"#, "");
    let long = format!("{}NEEDLE{}", "a".repeat(5000), "b".repeat(5000));
    l.append(
        "user/message",
        &format!(
            r#"{{"id":"u","role":"user","content":[{{"type":"text","text":"{long}"}}],"source":{{"kind":"user"}}}}"#
        ),
    );
    l.push("step/end", r#"{"turn":1,"step":1}"#, "");
    l.push(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        "",
    );
    let path = write(dir.path(), "long.jsonl", l.text().as_bytes());
    let out = grep()
        .args(["--color", "never", "NEEDLE"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let shown = text.split(": ").last().unwrap().trim_end();
    assert!(shown.starts_with('…') && shown.ends_with('…'), "{shown}");
    assert!(shown.chars().count() <= 302, "{}", shown.chars().count());
    assert!(shown.contains("aNEEDLEb"));
    let found = matches(&["NEEDLE"], &[path.as_path()]);
    assert_eq!(found[0]["text"].as_str().unwrap(), long);
}

#[test]
fn standard_input_is_searched() {
    let (log, _) = rich(3);
    grep()
        .args(["--color", "never", "LATEWORD", "-"])
        .write_stdin(log.text())
        .assert()
        .success()
        .stdout(predicate::str::starts_with("-:"));
    grep()
        .args(["LATEWORD", "-"])
        .write_stdin(compress(log.text().as_bytes(), 2))
        .assert()
        .success();
}

#[test]
fn a_closed_pipe_ends_the_run_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = Log::new(3);
    l.push("turn/start", r#"{"turn":1}"#, "");
    l.push("step/start", r#"{"turn":1,"step":1}"#, "");
    for i in 0..3000 {
        l.append(
            "user/message",
            &format!(
                r#"{{"id":"u{i}","role":"user","content":[{{"type":"text","text":"line {i} match"}}],"source":{{"kind":"user"}}}}"#
            ),
        );
    }
    l.push("step/end", r#"{"turn":1,"step":1}"#, "");
    l.push(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        "",
    );
    let path = write(dir.path(), "many.jsonl", l.text().as_bytes());
    let bin = assert_cmd::cargo::cargo_bin("dshs");
    let mut child = std::process::Command::new(bin)
        .args(["grep", "match"])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
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

/// The texts `grep` searches in each event of a log, by the offset of the event's line.
struct Texts(Vec<(u64, Vec<String>)>);

impl dshs::log::Observer for Texts {
    fn event(&mut self, info: &dshs::log::scan::EventInfo<'_, '_>, _: &dshs::log::scan::FoldState) {
        let extract = dshs::log::grep::Extract { chunks: true };
        let parts = dshs::log::grep::text::parts(info.event, &extract);
        let texts = parts.iter().map(|p| p.text.to_string()).collect();
        self.0.push((info.event.pos.byte, texts));
    }
}

/// Substrings of a line of text to search for: short and long, from several places.
fn samples(line: &str) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    for len in [1, 3, 8, 40] {
        if len > chars.len() {
            break;
        }
        for start in [0, chars.len() / 2, chars.len() - len] {
            let start = start.min(chars.len() - len);
            out.push(chars[start..start + len].iter().collect());
        }
    }
    if chars.len() <= 200 && !chars.is_empty() {
        out.push(line.to_owned());
    }
    out
}

/// At most this many patterns per test log (spread over all of its text).
const PATTERNS_PER_LOG: usize = 80;

/// The raw-line test may let lines through that hold no match, but must never reject one
/// that does: for every piece of text of every event of the test logs, substrings of it (as
/// they are and upper-cased with -i) must pass the test on the event's stored line, and the
/// raw pass over the whole file must list that line.
#[test]
fn the_raw_line_test_never_rejects_a_line_whose_text_matches() {
    use dshs::log::grep::{Extract, Pattern, PatternOptions, prefilter};
    let dir = tempfile::tempdir().unwrap();
    let mut files: Vec<PathBuf> = Vec::new();
    for v in 0..=4u8 {
        let (log, _) = rich(v);
        files.push(write(
            dir.path(),
            &format!("v{v}.jsonl"),
            log.text().as_bytes(),
        ));
    }
    for sub in ["fixtures", "sample", "v0", "v3", "hostile"] {
        for entry in std::fs::read_dir(common::testdata(sub)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                files.push(path);
            }
        }
    }
    let mut checked = 0usize;
    for file in &files {
        let bytes = std::fs::read(file).unwrap();
        let mut texts = Texts(Vec::new());
        let opts = dshs::log::ScanOptions {
            threads: 1,
            ..Default::default()
        };
        let _ = dshs::log::scan(&bytes[..], None, &opts, &mut Vec::new(), &mut texts);
        // Each sample with the lines (offsets) its text came from.
        let mut wanted: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
        for (byte, pieces) in &texts.0 {
            for piece in pieces {
                for text_line in piece.split('\n') {
                    for sample in samples(text_line) {
                        wanted.entry(sample).or_default().push(*byte);
                    }
                }
            }
        }
        let step = wanted.len().div_ceil(PATTERNS_PER_LOG).max(1);
        for (i, (sample, lines)) in wanted.iter().enumerate().filter(|(i, _)| i % step == 0) {
            for ignore_case in [false, true] {
                let text = if ignore_case {
                    sample.to_uppercase()
                } else {
                    sample.clone()
                };
                let Ok(p) = Pattern::new(&PatternOptions {
                    pattern: text.clone(),
                    fixed: true,
                    ignore_case,
                    word: false,
                }) else {
                    continue;
                };
                // As `grep --chunks` runs it: lines whose text is searched joined are kept.
                let markers =
                    dshs::log::grep::text::joined_stream_markers(&Extract { chunks: true });
                let Some(f) = p.prefilter().map(|f| f.keeping(&markers)) else {
                    continue;
                };
                let f = &f;
                for &byte in lines {
                    let start = byte as usize;
                    let line = &bytes[start..memchr_newline(&bytes, start)];
                    assert!(
                        f.may_match(line),
                        "{}: {text:?} (-i {ignore_case}) rejected in line {}",
                        file.display(),
                        String::from_utf8_lossy(line)
                    );
                    checked += 1;
                }
                // The raw pass over the whole file, for some of them; the candidate lines it
                // keeps must confirm the match the text holds.
                if i % (4 * step) == 0 {
                    let mut kept = prefilter::Kept::with_budget(usize::MAX);
                    let mut version = None;
                    let c = prefilter::raw_pass(
                        &mut &bytes[..],
                        Some(f),
                        usize::MAX,
                        |h| {
                            version = serde_json::from_slice::<Value>(h)
                                .ok()
                                .and_then(|h| h["version"].as_u64());
                            true
                        },
                        &mut kept,
                        prefilter::OnEnough::Stop,
                        |_| false,
                    )
                    .unwrap()
                    .unwrap();
                    let query = dshs::log::grep::Query {
                        pattern: p.clone(),
                        types: vec![],
                        roles: vec![],
                        turns: None,
                        since: None,
                        until: None,
                        surface_only: false,
                        extract: dshs::log::grep::Extract { chunks: true },
                        context: 0,
                        keep: dshs::log::grep::Keep::Count,
                        first_match_only: false,
                    };
                    assert!(
                        dshs::log::grep::confirm(&query, version, &kept.lines),
                        "{}: {text:?} not confirmed",
                        file.display()
                    );
                    let mut cursor = 0;
                    for &byte in lines {
                        assert!(
                            c.contains(byte, &mut cursor),
                            "{}: {text:?} not a candidate at byte {byte}",
                            file.display()
                        );
                    }
                }
            }
        }
    }
    assert!(checked > 5_000, "only {checked} checks");
}

fn memchr_newline(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |i| from + i)
}

#[test]
fn ignore_case_follows_unicode_case_folding_past_the_raw_test() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = Log::new(3);
    l.push("turn/start", r#"{"turn":1}"#, "");
    l.push("step/start", r#"{"turn":1,"step":1}"#, "");
    // LONG S as itself, KELVIN SIGN escaped.
    l.append(
        "user/message",
        r#"{"id":"u","role":"user","content":[{"type":"text","text":"ſtop the \u212Aernel, CAFÉ"}],"source":{"kind":"user"}}"#,
    );
    l.push("step/end", r#"{"turn":1,"step":1}"#, "");
    l.push(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        "",
    );
    let path = write(dir.path(), "fold.jsonl", l.text().as_bytes());
    let p = [path.as_path()];
    for pattern in ["stop the kernel", "STOP THE KERNEL", "café"] {
        assert_eq!(matches(&["-i", pattern], &p).len(), 1, "{pattern}");
        assert!(matches(&[pattern], &p).is_empty(), "{pattern} without -i");
    }
}

#[test]
fn an_event_the_fold_rejects_is_marked_rejected_and_not_on_the_surface() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = Log::new(3);
    l.push("turn/start", r#"{"turn":1}"#, "");
    l.push("step/start", r#"{"turn":1,"step":1}"#, "");
    // A surface event without its surfaceOp: the fold refuses it.
    l.push(
        "user/message",
        r#"{"id":"u","role":"user","content":[{"type":"text","text":"REJECTWORD here"}],"source":{"kind":"user"}}"#,
        "",
    );
    l.push("step/end", r#"{"turn":1,"step":1}"#, "");
    l.push(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        "",
    );
    let path = write(dir.path(), "rejected.jsonl", l.text().as_bytes());
    let found = matches(&["REJECTWORD"], &[path.as_path()]);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["surface"], "rejected");
    assert_eq!(found[0]["shadowed"], false);
    assert!(matches(&["--surface", "REJECTWORD"], &[path.as_path()]).is_empty());
    grep()
        .args(["--color", "never", "REJECTWORD"])
        .arg(&path)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "user/message user [rejected]: REJECTWORD here",
        ))
        .stderr(predicate::str::contains("invalid log"));
}

#[cfg(unix)]
#[test]
fn quiet_stops_at_the_first_match() {
    let dir = root();
    // After s-a, which matches, a session whose log is a FIFO nobody writes: opening it would
    // wait forever, so the run must end before it.
    let fifo = dir.path().join("--w--/s-b/session.jsonl.zstd");
    std::fs::remove_file(&fifo).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    dshs()
        .args(["-q", "grep", "-j", "1", "LATEWORD"])
        .arg(dir.path())
        .timeout(std::time::Duration::from_secs(20))
        .assert()
        .code(0)
        .stdout("")
        .stderr("");
    std::fs::remove_file(&fifo).unwrap();
    dshs()
        .args(["-q", "grep", "NOWHERE"])
        .arg(dir.path())
        .assert()
        .code(1);
}

#[test]
fn files_with_matches_reads_each_log_only_up_to_its_first_match() {
    let dir = tempfile::tempdir().unwrap();
    for v in 0..=4u8 {
        let (log, _) = rich(v);
        // Committed damage after the user message (a line that is not JSON, then a turn
        // end): seen only by a pass that reads past USERWORD.
        let mut lines = log.lines.clone();
        let at = lines.len() - 3;
        lines.insert(at, "{not json".to_owned());
        let text = lines.join("\n") + "\n";
        let plain = write(dir.path(), &format!("v{v}.jsonl"), text.as_bytes());
        let zstd = write(
            dir.path(),
            &format!("v{v}.jsonl.zstd"),
            &compress(text.as_bytes(), 2),
        );
        for path in [&plain, &zstd] {
            let what = format!("format {v}, {}", path.display());
            // Read to the end (-c), the damage is noted; -l stops at the first match.
            grep()
                .args(["-c", "USERWORD"])
                .arg(path)
                .assert()
                .success()
                .stderr(predicate::str::contains("invalid log"));
            grep()
                .args(["-l", "USERWORD"])
                .arg(path)
                .assert()
                .success()
                .stdout(format!("{}\n", path.display()))
                .stderr("");
            // A match past the damage (in rows in doubt until the turn end commits them): the
            // part read holds it, and the note says so.
            grep()
                .args(["-l", "LATEWORD"])
                .arg(path)
                .assert()
                .success()
                .stdout(format!("{}\n", path.display()))
                .stderr(predicate::str::contains("invalid log"));
            // As JSON, -l reports each log's counts: the whole log is read.
            let (records, status) = run_json(&["-l", "USERWORD|LATEWORD"], &[path.as_path()]);
            assert_eq!(status, 0, "{what}");
            assert_eq!(records[0]["type"], "count", "{what}");
            assert_eq!(records[0]["matches"], 2, "{what}");
            assert_eq!(summary(&records)["notValid"], 1, "{what}");
        }
        // With --surface a match counts only if nothing later shadows it: USERWORD, which
        // the compaction further on replaces, is not listed.
        let (log, _) = rich(v);
        let whole = write(
            dir.path(),
            &format!("whole-v{v}.jsonl"),
            log.text().as_bytes(),
        );
        grep()
            .args(["-l", "--surface", "USERWORD"])
            .arg(&whole)
            .assert()
            .code(1)
            .stdout("");
        grep()
            .args(["-l", "--surface", "LATEWORD"])
            .arg(&whole)
            .assert()
            .success()
            .stdout(format!("{}\n", whole.display()));
    }
}

#[test]
fn files_with_matches_past_the_raw_pass_s_first_confirmed_block_are_still_found() {
    // -l ends the raw pass at the first block with a candidate line that holds a match when
    // decoded alone; that test knows no turns, so with --turn 2 the fold must go on past it
    // to the match in turn 2, beyond the first 256 KiB.
    let dir = tempfile::tempdir().unwrap();
    let mut l = Log::new(3);
    l.push("turn/start", r#"{"turn":1}"#, "");
    let message = |id: &str, text: &str| {
        format!(
            r#"{{"id":"{id}","role":"user","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}}"#
        )
    };
    l.append("user/message", &message("u0", "NEEDLE in turn one"));
    let filler = "hay ".repeat(256);
    for i in 1..=400 {
        l.append("user/message", &message(&format!("u{i}"), &filler));
    }
    l.push(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        "",
    );
    l.push("turn/start", r#"{"turn":2}"#, "");
    l.append("user/message", &message("u401", "NEEDLE in turn two"));
    l.push(
        "turn/end",
        r#"{"turn":2,"reason":{"kind":"completed"}}"#,
        "",
    );
    let text = l.text();
    assert!(text.find("turn two").unwrap() > 256 * 1024);
    let path = write(dir.path(), "long.jsonl", text.as_bytes());
    validate_ok(&path);
    for turn in ["1", "2"] {
        grep()
            .args(["-l", "--turn", turn, "NEEDLE"])
            .arg(&path)
            .assert()
            .success()
            .stdout(format!("{}\n", path.display()));
    }
    grep()
        .args(["-l", "--turn", "3", "NEEDLE"])
        .arg(&path)
        .assert()
        .code(1)
        .stdout("");
}

#[test]
fn a_log_whose_candidate_lines_hold_no_match_is_not_folded() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = Log::new(3);
    l.push("turn/start", r#"{"turn":1}"#, "");
    l.push("step/start", r#"{"turn":1,"step":1}"#, "");
    // The literal only where grep does not look: a tool definition, a message id.
    l.push(
        "request/header",
        r#"{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"t","description":"HIDDENWORD tool","parameters":{}}]},"reason":"initial"}"#,
        "",
    );
    l.append(
        "user/message",
        r#"{"id":"HIDDENWORD-1","role":"user","content":[{"type":"text","text":"SEENWORDS here"}],"source":{"kind":"user"}}"#,
    );
    l.push("step/end", r#"{"turn":1,"step":1}"#, "");
    l.push(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        "",
    );
    let path = write(dir.path(), "hidden.jsonl", l.text().as_bytes());
    for args in [
        &["HIDDENWORD"][..],
        &["-w", "SEENWORD"],
        &["--type", "tool/", "SEENWORD"],
        &["--role", "tool", "SEENWORD"],
    ] {
        let (records, status) = run_json(args, &[path.as_path()]);
        assert_eq!(status, 1, "{args:?}");
        assert_eq!(summary(&records)["parsed"], 0, "{args:?}");
    }
    let (records, status) = run_json(&["SEENWORD"], &[path.as_path()]);
    assert_eq!((status, summary(&records)["parsed"].as_u64()), (0, Some(1)));
}

/// Issue 37 item 10: a text that ends in a line break has no empty line after it, so `^$`
/// matches only the empty lines a text really has, in every kind of text.
#[test]
fn a_final_line_break_adds_no_empty_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = Log::new(3);
    l.push("turn/start", r#"{"turn":1}"#, "");
    l.append(
        "user/message",
        r#"{"content":[{"type":"text","text":"one line\n"}],"source":{"kind":"user"},"role":"user","id":"u1"}"#,
    );
    l.append(
        "user/message",
        r#"{"content":[{"type":"text","text":"two\n\nparagraphs\r\n"}],"source":{"kind":"user"},"role":"user","id":"u2"}"#,
    );
    l.push("session/title", r#"{"title":"a title\n"}"#, "");
    l.push(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        "",
    );
    let path = write(dir.path(), "s.jsonl", l.text().as_bytes());
    let found = matches(&["^$"], &[path.as_path()]);
    let lines: Vec<(u64, u64)> = found
        .iter()
        .map(|m| (m["seq"].as_u64().unwrap(), m["textLine"].as_u64().unwrap()))
        .collect();
    assert_eq!(lines, [(2, 2)], "{found:#?}");
    grep()
        .args(["-c", "^$"])
        .arg(&path)
        .assert()
        .success()
        .stdout(format!("{}:1\n", path.display()));
}

/// Issue 37 item 9: a cut-off block of a stream is searched as its deltas joined, in order:
/// text split across deltas (and across runs and delta chunks) is found, `-w` sees whole
/// words, not fragments, and a tool call's streamed arguments are searched as the JSON they
/// add up to. The raw-line test keeps such lines though no needle is in them.
#[test]
fn a_cut_off_stream_is_searched_with_its_deltas_joined() {
    let dir = tempfile::tempdir().unwrap();
    for v in 2..=4u8 {
        let mut l = Log::new(v);
        l.push("turn/start", r#"{"turn":1}"#, "");
        l.push("step/start", r#"{"turn":1,"step":1}"#, "");
        l.push(
            "assistant/attempt",
            r#"{"turn":1,"step":1,"stream":[{"type":"text-chunks","time0":1,"index":0,"dt":[0,0],"texts":["The quick br","own fo","x jum"]},{"type":"reasoning-chunks","time0":1,"index":1,"dt":[],"texts":["thin"]},{"type":"chunk","time":1,"chunk":{"type":"text-delta","index":0,"text":"ped over"}},{"type":"chunk","time":1,"chunk":{"type":"reasoning-delta","index":1,"text":"king hard"}},{"type":"tool-call-chunks","time0":1,"index":2,"id":"c1","name":"bash","dt":[0],"args":["{\"comm","and\":\"rm -rf /tm"]},{"type":"chunk","time":1,"chunk":{"type":"tool-call-delta","index":2,"argumentsDelta":"p/x\"}"}}]}"#,
            "",
        );
        l.push("step/end", r#"{"turn":1,"step":1,"reason":"error"}"#, "");
        l.push(
            "turn/end",
            r#"{"turn":1,"reason":{"kind":"completed"}}"#,
            "",
        );
        let path = write(dir.path(), &format!("v{v}.jsonl"), l.text().as_bytes());
        let p = [path.as_path()];
        let one = |args: &[&str]| -> Vec<(String, String)> {
            matches(args, &p)
                .iter()
                .map(|m| {
                    (
                        m["part"].as_str().unwrap().to_owned(),
                        m["text"].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        };
        let text = "The quick brown fox jumped over".to_owned();
        assert_eq!(
            one(&["brown fox jumped"]),
            [("text".to_owned(), text.clone())],
            "v{v}"
        );
        assert_eq!(
            one(&["-F", "fox jumped over"]),
            [("text".to_owned(), text)],
            "v{v}"
        );
        assert_eq!(
            one(&["thinking"]),
            [("reasoning".to_owned(), "thinking hard".to_owned())],
            "v{v}"
        );
        // Fragments of the pieces are not words of the text.
        assert!(one(&["-w", "own"]).is_empty(), "v{v}");
        assert!(one(&["-w", "jum"]).is_empty(), "v{v}");
        assert_eq!(one(&["-w", "jumped"]).len(), 1, "v{v}");
        // The arguments add up to JSON: its string, under its key.
        let args = matches(&["rm -rf /tmp/x"], &p);
        assert_eq!(args.len(), 1, "v{v}: {args:#?}");
        assert_eq!(args[0]["part"], "arguments");
        assert_eq!(args[0]["key"], "command");
        assert_eq!(args[0]["tool"], "bash");
        // -c, -l and the terminal output agree.
        grep()
            .args(["-c", "quick brown"])
            .arg(&path)
            .assert()
            .success()
            .stdout(format!("{}:1\n", path.display()));
    }
}

/// Issue 37 item 18: a date bound is inclusive of its whole day, in the zone times are
/// shown in (TZ): `--since D --until D` selects every event of D, and nothing of the days
/// around it. Issue 37 item 16: a date past what dshs can compare gets our words, not jiff's.
#[test]
fn a_date_bound_covers_its_whole_day() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = rich(4);
    let path = write(dir.path(), "v4.jsonl", log.text().as_bytes());
    let count = |tz: &str, args: &[&str]| -> usize {
        let out = grep()
            .env("TZ", tz)
            .args(["--format", "json"])
            .args(args)
            .arg("USERWORD|LATEWORD|TITLEWORD")
            .arg(&path)
            .output()
            .unwrap();
        json_lines(&out.stdout)
            .iter()
            .filter(|r| r["type"] == "match")
            .count()
    };
    // T0 is 2026-09-21T14:13:20Z: the 21st in UTC, in Tokyo (23:13) too; the 22nd in
    // Auckland (02:13 the next day).
    for (tz, day) in [
        ("UTC", "2026-09-21"),
        ("Asia/Tokyo", "2026-09-21"),
        ("Pacific/Auckland", "2026-09-22"),
    ] {
        assert_eq!(count(tz, &["--since", day, "--until", day]), 3, "{tz}");
        assert_eq!(count(tz, &["--until", day]), 3, "{tz}");
        assert_eq!(count(tz, &["--since", day]), 3, "{tz}");
    }
    assert_eq!(count("Pacific/Auckland", &["--until", "2026-09-21"]), 0);
    assert_eq!(count("UTC", &["--since", "2026-09-22"]), 0);
    let out = grep()
        .args(["--since", "9999-12-31", "x"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("outside the times dshs can compare"), "{err}");
}

/// Issue 37 item 18: a tool call's arguments are searched whole: its keys (under their own
/// path), its numbers, booleans and nulls, not only its strings; in a message's tool-call
/// block and in a `tool/call` event alike.
#[test]
fn keys_numbers_and_booleans_of_tool_call_arguments_are_searched() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = Log::new(3);
    l.push("turn/start", r#"{"turn":1}"#, "");
    l.push("step/start", r#"{"turn":1,"step":1}"#, "");
    let args = r#"{\"command\":\"sleep\",\"timeout_ms\":4567,\"recursive\":true,\"opts\":{\"depth\":-2.5,\"cwd\":null}}"#;
    l.append(
        "assistant/message",
        &format!(
            r#"{{"turn":1,"step":1,"message":{{"id":"a1","role":"assistant","content":[{{"type":"tool-call","id":"c1","name":"bash","arguments":"{args}"}}]}},"stream":[]}}"#
        ),
    );
    l.push(
        "tool/call",
        &format!(r#"{{"turn":1,"step":1,"id":"c1","name":"bash","arguments":"{args}"}}"#),
        "",
    );
    let path = write(dir.path(), "s.jsonl", l.text().as_bytes());
    let found = |pattern: &str| -> Vec<(String, String, String)> {
        matches(&["-w", pattern], &[path.as_path()])
            .iter()
            .map(|m| {
                (
                    m["eventType"].as_str().unwrap().to_owned(),
                    m["key"].as_str().unwrap_or_default().to_owned(),
                    m["text"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let both = |key: &str, text: &str| {
        vec![
            (
                "assistant/message".to_owned(),
                key.to_owned(),
                text.to_owned(),
            ),
            ("tool/call".to_owned(), key.to_owned(), text.to_owned()),
        ]
    };
    assert_eq!(found("4567"), both("timeout_ms", "4567"));
    assert_eq!(found("timeout_ms"), both("timeout_ms", "timeout_ms"));
    assert_eq!(found("true"), both("recursive", "true"));
    assert_eq!(found("depth"), both("opts.depth", "depth"));
    assert_eq!(found("2.5"), both("opts.depth", "-2.5"));
    assert_eq!(found("null"), both("opts.cwd", "null"));
    assert_eq!(found("sleep"), both("command", "sleep"));
}

/// Issue 37 item 18: with `--surface`, `-C N` shows the N nearest neighbours on the final
/// surface (an event off it is passed over, not dropped from the count), one group when they
/// are neighbours on the surface; with `--role`, neighbours are events with text from those
/// roles.
#[test]
fn context_follows_the_surface_and_role_filters() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = rich(4);
    let path = write(dir.path(), "v4.jsonl", log.text().as_bytes());
    let p = [path.as_path()];
    let records = |args: &[&str]| -> Vec<(String, String, String)> {
        run_json(args, &p)
            .0
            .iter()
            .filter(|r| r["type"] != "summary")
            .map(|r| {
                (
                    r["type"].as_str().unwrap().to_owned(),
                    r["eventType"].as_str().unwrap().to_owned(),
                    r["surface"].as_str().unwrap_or("-").to_owned(),
                )
            })
            .collect()
    };
    let rec = |t: &str, e: &str, s: &str| (t.to_owned(), e.to_owned(), s.to_owned());
    // Between the system message and the checkpoint lie shadowed and log-only events; after
    // the checkpoint, a title and todos (log-only), then the developer message.
    assert_eq!(
        records(&["--surface", "-C", "1", "CHECKPOINTWORD"]),
        [
            rec("context", "system/message", "visible"),
            rec("match", "user/message", "visible"),
            rec("context", "developer/message", "visible"),
        ]
    );
    assert_eq!(
        records(&["--surface", "-C", "2", "LATEWORD"]),
        [
            rec("context", "user/message", "visible"),
            rec("context", "developer/message", "visible"),
            rec("match", "user/message", "visible"),
        ]
    );
    // Neighbours on the surface are one group, whatever left the surface between them.
    let out = grep()
        .args([
            "--color",
            "never",
            "--surface",
            "-C",
            "1",
            "SYSWORD|LATEWORD",
        ])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(!text.contains("\n--\n"), "{text}");
    // --role: the neighbour before the late user message is the checkpoint (a user message),
    // not the developer message, the todos or the title.
    assert_eq!(
        records(&["--role", "user", "-C", "1", "LATEWORD"]),
        [
            rec("context", "user/message", "visible"),
            rec("match", "user/message", "visible"),
        ]
    );
    let (all, _) = run_json(&["--role", "user", "-C", "1", "LATEWORD"], &p);
    assert_eq!(all[0]["text"], "CHECKPOINTWORD: turn one compacted");
}

/// Issue 37 item 18: a log nested deeper than a storage root's sessions are looked for (or
/// lying loose) is not read by `ls ROOT` and `grep ROOT` either; like `validate ROOT`, they
/// say so, naming it.
#[test]
fn ls_and_grep_name_the_logs_a_root_walk_leaves_out() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let (log, _) = rich(3);
    write(&root, "proj/sess/session.v3.jsonl", log.text().as_bytes());
    let deep = write(
        &root,
        "proj/a/b/c/d/session.v3.jsonl",
        log.text().as_bytes(),
    );
    let loose = write(&root, "proj/loose.jsonl", log.text().as_bytes());
    for args in [
        &["validate"][..],
        &["ls"],
        &["grep", "LATEWORD"],
        &["grep", "-c", "LATEWORD"],
    ] {
        let out = dshs()
            .env_remove("DSH_HOME")
            .args(args)
            .arg(&root)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("2 log files below it were not read"),
            "{args:?}: {err}"
        );
        for p in [&deep, &loose] {
            assert!(err.contains(&p.display().to_string()), "{args:?}: {err}");
        }
    }
    // Only loose logs, no session: the same note, not "no sessions" alone.
    let bare = dir.path().join("bare");
    write(&bare, "x/y.jsonl", log.text().as_bytes());
    for args in [&["ls"][..], &["grep", "LATEWORD"]] {
        let out = dshs().args(args).arg(&bare).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("not a DSH storage root"), "{args:?}: {err}");
    }
}

/// `--surface` keeps only what may still be on the final surface as the log is read (the
/// matches counted by `-c`, the neighbours of `-C`): many events, most of them compacted
/// away, give the counts and neighbours of the final surface.
#[test]
fn surface_counts_and_neighbours_stay_right_past_many_events() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = Log::new(3);
    l.push("turn/start", r#"{"turn":1}"#, "");
    let mut users = Vec::new();
    for i in 0..300 {
        users.push(l.append(
            "user/message",
            &format!(
                r#"{{"id":"u{i}","role":"user","content":[{{"type":"text","text":"word {i}"}}],"source":{{"kind":"user"}}}}"#
            ),
        ));
    }
    l.push(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        "",
    );
    let (first, last) = (users[0], users[249]);
    let start = l.push(
        "compaction/start",
        r#"{"compactionId":"c1","turn":null}"#,
        "",
    );
    let shadowed: Vec<String> = users[..250].iter().map(u64::to_string).collect();
    let summary = l.push(
        "compaction/summary",
        &format!(
            r#"{{"compactionId":"c1","summary":[{{"type":"text","text":"a summary"}}],"shadowedRange":{{"start":{first},"end":{last}}},"shadowedSeqs":[{}],"shadowedTokenCount":10,"provider":"p","model":"m"}}"#,
            shadowed.join(",")
        ),
        "",
    );
    let op = l.replace(first, last);
    l.push(
        "user/message",
        r#"{"id":"k1","role":"user","content":[{"type":"text","text":"checkpoint"}],"source":{"kind":"plugin","plugin":"compact","compactionId":"c1"}}"#,
        &format!(
            r#","sourceEventSeqs":[{start},{summary},{}],"surfaceOp":{op}"#,
            shadowed.join(",")
        ),
    );
    l.push("compaction/end", r#"{"compactionId":"c1","turn":null}"#, "");
    let path = write(dir.path(), "s.jsonl", l.text().as_bytes());
    validate_ok(&path);
    let p = [path.as_path()];
    grep()
        .args(["-c", "--surface", "word"])
        .arg(&path)
        .assert()
        .success()
        .stdout(format!("{}:50\n", path.display()));
    grep()
        .args(["-c", "word"])
        .arg(&path)
        .assert()
        .success()
        .stdout(format!("{}:300\n", path.display()));
    // In log order the surface holds "word 250" to "word 299", then the checkpoint (it
    // comes later in the log): nothing before "word 250", the checkpoint after "word 299".
    let (records, _) = run_json(&["--surface", "-C", "1", "^word (250|299)$"], &p);
    let texts: Vec<&str> = records
        .iter()
        .filter(|r| r["type"] != "summary")
        .map(|r| r["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        ["word 250", "word 251", "word 298", "word 299", "checkpoint"]
    );
}
