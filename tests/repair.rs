//! `dshs repair` (CLI.md "repair", FORMAT.md §14): what a crash leaves behind is cut (saved to
//! a sidecar) and the open turn closed exactly as DSH does, per format version; committed
//! bytes never change; failures roll back; refusals write nothing.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::{codes, dshs, json_lines, scan_file, testdata};
use dshs::log::append::Planned;
use dshs::log::repair;
use dshs::log::scan::{ScanOptions, Status};
use dshs::log::write::{self, Fault, Stamp};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// A tiny log writer: every event shape per format version, one line per event.

const NOT_STARTED: &str = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";
const OUTCOME_UNKNOWN: &str = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";

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

    fn time(&self) -> u64 {
        1_000 + self.seq * 7
    }

    fn ev(&mut self, ty: &str, data: &str, tail: &str) -> u64 {
        let seq = self.seq;
        self.text.push_str(&format!(
            "{{\"type\":\"{ty}\",\"seq\":{seq},\"time\":{},\"data\":{data}{tail}}}\n",
            self.time()
        ));
        self.seq += 1;
        seq
    }

    fn ts(&self) -> String {
        format!("\"turn\":{},\"step\":{}", self.turn, self.step)
    }

    fn turn_start(&mut self) -> &mut Self {
        self.turn += 1;
        self.step = 0;
        self.ev("turn/start", &format!("{{\"turn\":{}}}", self.turn), "");
        self
    }

    fn turn_end(&mut self) -> &mut Self {
        self.ev(
            "turn/end",
            &format!(
                "{{\"turn\":{},\"reason\":{{\"kind\":\"completed\"}}}}",
                self.turn
            ),
            "",
        );
        self
    }

    fn step_start(&mut self) -> &mut Self {
        self.step += 1;
        let d = format!("{{{}}}", self.ts());
        self.ev("step/start", &d, "");
        self
    }

    fn step_end(&mut self) -> &mut Self {
        let d = format!("{{{}}}", self.ts());
        self.ev("step/end", &d, "");
        self
    }

    fn user(&mut self, text: &str) -> &mut Self {
        let d = format!(
            "{{\"id\":\"u{}\",\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}],\"source\":{{\"kind\":\"user\"}}}}",
            self.seq
        );
        self.ev("user/message", &d, r#","surfaceOp":"append""#);
        self
    }

    /// An assistant message advertising `calls` (tool name `bash`, arguments `{}`).
    fn assistant(&mut self, calls: &[&str]) -> &mut Self {
        let mut content = vec![r#"{"type":"text","text":"working"}"#.to_owned()];
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
        self.ev("assistant/message", &d, r#","surfaceOp":"append""#);
        self
    }

    /// `tool/call` for `id`; returns its seq.
    fn call(&mut self, id: &str) -> u64 {
        let d = format!(
            r#"{{{},"callId":"{id}","name":"bash","arguments":"{{}}"}}"#,
            self.ts()
        );
        self.ev("tool/call", &d, "")
    }

    /// A successful result for a started call.
    fn result(&mut self, id: &str, call_seq: u64) -> &mut Self {
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
        );
        self
    }

    /// A closed first turn with one answered call.
    fn closed_turn(&mut self) -> &mut Self {
        let id = format!("done-{}", self.seq);
        self.turn_start().step_start().user("hi").assistant(&[&id]);
        let c = self.call(&id);
        self.result(&id, c).step_end().step_start().assistant(&[]);
        self.step_end().turn_end()
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers.

struct Case {
    tmp: tempfile::TempDir,
    path: PathBuf,
}

impl Case {
    fn new(text: &str) -> Case {
        Case::named("session.jsonl", text)
    }

    fn named(name: &str, text: &str) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        fs::write(&path, text).unwrap();
        Case { tmp: dir, path }
    }

    fn dir(&self) -> &Path {
        self.tmp.path()
    }

    fn bytes(&self) -> Vec<u8> {
        fs::read(&self.path).unwrap()
    }

    fn sidecar(&self, n: u32) -> PathBuf {
        let mut name = self.path.file_name().unwrap().to_os_string();
        name.push(format!(".dshs-cut-{n}"));
        self.path.with_file_name(name)
    }

    /// Every file in the directory, sorted by name.
    fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(self.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

/// The repaired file validates with no error and no open turn, in-process and through the CLI.
fn assert_valid_and_closed(path: &Path) {
    let (scan, findings) = scan_file(path);
    assert_eq!(scan.status(), Status::Valid, "{findings:#?}");
    assert_eq!(scan.tally.errors, 0, "{findings:#?}");
    assert!(!scan.open_turn(), "{findings:#?}");
    assert!(scan.torn.is_none() && scan.crash.is_none());
    let c = codes(&findings);
    assert!(
        !c.contains(&"open-turn-at-end") && !c.contains(&"torn-line") && !c.contains(&"crash-tail"),
        "{c:?}"
    );
    let out = dshs()
        .args(["validate", "--format", "json"])
        .arg(path)
        .assert()
        .code(0);
    let records = json_lines(&out.get_output().stdout);
    let summary = records.last().unwrap();
    assert_eq!(summary["errors"], 0, "{records:#?}");
    assert_eq!(summary["openTurn"], false);
    assert_eq!(summary["tornTail"], false);
}

/// Repair in place; exit 0; the result validates; a second repair changes nothing.
fn repair_ok(case: &Case) -> String {
    let out = dshs()
        .arg("repair")
        .arg(&case.path)
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    assert_valid_and_closed(&case.path);
    let after = case.bytes();
    let files = case.files();
    let again = dshs().arg("repair").arg(&case.path).assert().code(0);
    assert!(
        String::from_utf8_lossy(&again.get_output().stdout).contains("nothing to repair"),
        "second run: {:?}",
        again.get_output()
    );
    assert_eq!(case.bytes(), after, "a second repair changed the file");
    assert_eq!(case.files(), files, "a second repair created a file");
    String::from_utf8(out).unwrap()
}

/// The closers `--dry-run` would append, as parsed JSON.
fn dry_run(case: &Case) -> Vec<serde_json::Value> {
    let before = case.bytes();
    let out = dshs()
        .args(["repair", "--dry-run"])
        .arg(&case.path)
        .assert()
        .code(0);
    assert_eq!(case.bytes(), before, "--dry-run changed the file");
    assert_eq!(case.files().len(), 1, "--dry-run created a file");
    json_lines(&out.get_output().stdout)
}

fn appended(before: &str, case: &Case) -> String {
    let after = String::from_utf8(case.bytes()).unwrap();
    let keep = before.rfind('\n').map_or(0, |i| i + 1);
    assert_eq!(&after[..keep], &before[..keep], "committed bytes changed");
    after[keep..].to_owned()
}

const VERSIONS: [u8; 3] = [0, 3, 4];

// ---------------------------------------------------------------------------------------------
// The closers, byte for byte.

#[test]
fn worked_example_v0_to_v3_is_reproduced_byte_for_byte() {
    // FORMAT.md §14.4: turn 2, step 1, call-1 advertised at seq 2, never started, time 2.
    // (Turn 2 first is only a lifecycle warning in v0, so the example runs as a whole log.)
    let log = concat!(
        r#"{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}"#,
        "\n",
        r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":2}}"#,
        "\n",
        r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":2,"step":1}}"#,
        "\n",
        r#"{"type":"assistant/message","seq":2,"time":2,"data":{"turn":2,"step":1,"message":{"id":"m","role":"assistant","content":[{"type":"tool-call","id":"call-1","name":"x","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}"#,
        "\n",
    );
    let expected = concat!(
        r#"{"type":"tool/result","seq":3,"time":2,"data":{"turn":2,"step":1,"message":{"id":"interrupted-tool-result-call-1-3","role":"user","source":{"kind":"tool","callId":"call-1"},"content":[{"type":"tool-result","toolCallId":"call-1","isError":true,"content":[{"type":"text","text":"The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."}]}]},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}},"surfaceOp":"append"}"#,
        "\n",
        r#"{"type":"step/end","seq":4,"time":2,"data":{"turn":2,"step":1}}"#,
        "\n",
        r#"{"type":"turn/end","seq":5,"time":2,"data":{"turn":2,"reason":{"kind":"interrupted"}}}"#,
        "\n",
    );
    let case = Case::new(log);
    let out = dshs()
        .args(["repair", "--dry-run"])
        .arg(&case.path)
        .assert()
        .code(0);
    assert_eq!(String::from_utf8_lossy(&out.get_output().stdout), expected);
    repair_ok(&case);
    assert_eq!(appended(log, &case), expected);
}

#[test]
fn worked_example_v4_is_reproduced_byte_for_byte() {
    let log = concat!(
        r#"{"type":"session","version":4,"id":"s","createdAt":1,"delegationDepth":0,"isSeeded":false}"#,
        "\n",
        r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#,
        "\n",
        r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#,
        "\n",
        r#"{"type":"assistant/message","seq":2,"time":2,"data":{"turn":1,"step":1,"message":{"id":"m","role":"assistant","content":[{"type":"tool-call","id":"call-1","name":"x","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}},"stream":[]},"surfaceOp":"append"}"#,
        "\n",
        r#"{"type":"tool/call","seq":3,"time":3,"data":{"turn":1,"step":1,"callId":"call-1","name":"x","arguments":"{}"}}"#,
        "\n",
    );
    let expected = concat!(
        r#"{"type":"tool/result","seq":4,"time":3,"data":{"turn":1,"step":1,"message":{"id":"interrupted-tool-result-call-1-4","role":"tool","toolCallId":"call-1","isError":true,"source":{"kind":"tool","callId":"call-1"},"content":[{"type":"text","text":"The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly."}]},"error":{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}},"surfaceOp":"append","sourceEventSeqs":[3]}"#,
        "\n",
        r#"{"type":"step/end","seq":5,"time":3,"data":{"turn":1,"step":1}}"#,
        "\n",
        r#"{"type":"turn/end","seq":6,"time":3,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#,
        "\n",
    );
    let case = Case::new(log);
    let out = dshs()
        .args(["repair", "--dry-run"])
        .arg(&case.path)
        .assert()
        .code(0);
    assert_eq!(String::from_utf8_lossy(&out.get_output().stdout), expected);
    repair_ok(&case);
    assert_eq!(appended(log, &case), expected);
}

// ---------------------------------------------------------------------------------------------
// Per version: torn tail, open turns, closed steps, healthy logs, corruption.

#[test]
fn a_torn_tail_alone_is_cut_to_a_sidecar_in_every_version() {
    for v in VERSIONS {
        let mut log = Log::new(v);
        log.closed_turn();
        let committed = log.text.clone();
        let fragment = r#"{"type":"turn/start","seq":99,"ti"#;
        let case = Case::new(&format!("{committed}{fragment}"));
        assert!(
            dry_run(&case).is_empty(),
            "v{v}: no closers for a closed log"
        );
        let summary = repair_ok(&case);
        assert_eq!(case.bytes(), committed.as_bytes(), "v{v}");
        assert_eq!(
            fs::read(case.sidecar(1)).unwrap(),
            fragment.as_bytes(),
            "v{v}"
        );
        assert!(
            summary.contains(&format!("cut {} bytes (torn line at line", fragment.len())),
            "{summary}"
        );
        assert!(summary.contains("dshs-cut-1"), "{summary}");
    }
}

#[test]
fn an_open_turn_gets_one_result_per_unanswered_call_in_advertisement_order() {
    for v in VERSIONS {
        let mut log = Log::new(v);
        log.closed_turn();
        log.turn_start().step_start().user("go");
        // Two assistant messages in the open step: a, b, then c, d.
        log.assistant(&["a", "b"]);
        let call_a = log.call("a");
        let call_b = log.call("b");
        log.result("a", call_a);
        log.assistant(&["c", "d"]);
        let call_d = log.call("d");
        let before = log.text.clone();
        let last_time = 1_000 + call_d * 7;
        let case = Case::new(&before);

        let closers = dry_run(&case);
        let kinds: Vec<_> = closers
            .iter()
            .map(|c| {
                let id = c["data"]["message"]["source"]["callId"]
                    .as_str()
                    .unwrap_or("-")
                    .to_owned();
                (c["type"].as_str().unwrap().to_owned(), id)
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("tool/result".into(), "b".into()),
                ("tool/result".into(), "c".into()),
                ("tool/result".into(), "d".into()),
                ("step/end".into(), "-".into()),
                ("turn/end".into(), "-".into()),
            ],
            "v{v}"
        );
        for (i, c) in closers.iter().enumerate() {
            assert_eq!(
                c["seq"],
                call_d + 1 + i as u64,
                "v{v}: seqs continue the log"
            );
            assert_eq!(
                c["time"], last_time,
                "v{v}: every closer reuses the last time"
            );
        }
        // b and d were started: outcome unknown, citing their tool/call.
        assert_eq!(closers[0]["sourceEventSeqs"], serde_json::json!([call_b]));
        assert_eq!(closers[0]["data"]["error"]["code"], "TOOL_OUTCOME_UNKNOWN");
        assert_eq!(closers[2]["sourceEventSeqs"], serde_json::json!([call_d]));
        // c was only advertised: not started, no sourceEventSeqs.
        assert!(closers[1].get("sourceEventSeqs").is_none());
        assert_eq!(closers[1]["data"]["error"]["code"], "TOOL_NOT_STARTED");
        assert_eq!(
            closers[1]["data"]["message"]["id"],
            format!("interrupted-tool-result-c-{}", call_d + 2)
        );
        let text = |c: &serde_json::Value| {
            let m = &c["data"]["message"];
            if v >= 4 {
                assert_eq!(m["role"], "tool");
                m["content"][0]["text"].clone()
            } else {
                assert_eq!(m["role"], "user");
                m["content"][0]["content"][0]["text"].clone()
            }
        };
        assert_eq!(text(&closers[0]), OUTCOME_UNKNOWN);
        assert_eq!(text(&closers[1]), NOT_STARTED);
        assert_eq!(closers[4]["data"]["reason"]["kind"], "interrupted");

        let summary = repair_ok(&case);
        assert!(
            summary.contains(&format!(
                "appended 5 events (seq {}–{}): tool/result for b (TOOL_OUTCOME_UNKNOWN), tool/result for c (TOOL_NOT_STARTED), tool/result for d (TOOL_OUTCOME_UNKNOWN), step/end, turn/end interrupted",
                call_d + 1,
                call_d + 5
            )),
            "{summary}"
        );
        // Nothing was cut, so no sidecar; the lock taken to write stays (FORMAT.md §2.1).
        assert_eq!(case.files(), ["session.jsonl", "session.lock"]);
        // The appended lines are exactly what --dry-run printed.
        let tail: Vec<serde_json::Value> = json_lines(appended(&before, &case).as_bytes());
        assert_eq!(tail, closers);
    }
}

#[test]
fn an_open_turn_without_an_open_step_gets_only_turn_end() {
    for v in VERSIONS {
        let mut log = Log::new(v);
        log.closed_turn();
        log.turn_start().step_start().assistant(&["x"]);
        let c = log.call("x");
        log.result("x", c).step_end();
        let case = Case::new(&log.text);
        let closers = dry_run(&case);
        assert_eq!(closers.len(), 1, "v{v}: {closers:?}");
        assert_eq!(closers[0]["type"], "turn/end");
        assert_eq!(closers[0]["data"]["turn"], 2);
        repair_ok(&case);
    }
}

#[test]
fn an_open_step_without_pending_calls_gets_step_end_and_turn_end() {
    for v in VERSIONS {
        let mut log = Log::new(v);
        log.turn_start().step_start().user("hello");
        let case = Case::new(&log.text);
        let closers = dry_run(&case);
        let types: Vec<_> = closers.iter().map(|c| c["type"].clone()).collect();
        assert_eq!(types, ["step/end", "turn/end"], "v{v}");
        assert_eq!(
            closers[0]["data"],
            serde_json::json!({"turn": 1, "step": 1})
        );
        repair_ok(&case);
    }
}

#[test]
fn calls_of_an_already_closed_step_are_left_alone_in_v0() {
    let mut log = Log::new(0);
    log.turn_start().step_start().assistant(&["old"]);
    log.call("old");
    log.step_end().step_start().assistant(&["new"]);
    let case = Case::new(&log.text);
    let closers = dry_run(&case);
    let types: Vec<_> = closers.iter().map(|c| c["type"].clone()).collect();
    assert_eq!(types, ["tool/result", "step/end", "turn/end"]);
    assert_eq!(closers[0]["data"]["message"]["source"]["callId"], "new");
    assert_eq!(closers[0]["data"]["step"], 2);
    repair_ok(&case);
}

#[test]
fn calls_left_open_at_a_step_end_make_v3_and_v4_logs_invalid_so_repair_refuses() {
    for v in [3, 4] {
        let mut log = Log::new(v);
        log.turn_start().step_start().assistant(&["old"]);
        log.call("old");
        log.step_end().step_start().assistant(&["new"]);
        let case = Case::new(&log.text);
        let before = case.bytes();
        let out = dshs().arg("repair").arg(&case.path).assert().code(1);
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(err.contains("unresolved-call-at-boundary"), "v{v}: {err}");
        assert!(err.contains("refusing to repair"), "{err}");
        assert_eq!(case.bytes(), before);
        assert_eq!(case.files(), ["session.jsonl"]);
        dshs()
            .args(["repair", "--dry-run"])
            .arg(&case.path)
            .assert()
            .code(1)
            .stdout("");
    }
}

#[test]
fn a_healthy_log_is_left_untouched() {
    for v in VERSIONS {
        let mut log = Log::new(v);
        log.closed_turn().closed_turn();
        let case = Case::new(&log.text);
        assert!(dry_run(&case).is_empty());
        let out = dshs().arg("repair").arg(&case.path).assert().code(0);
        assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("nothing to repair"));
        assert_eq!(case.bytes(), log.text.as_bytes(), "v{v}");
        assert_eq!(case.files(), ["session.jsonl"]);
        // A header-only log is healthy too.
        let empty = Case::new(&Log::new(v).text);
        dshs().arg("repair").arg(&empty.path).assert().code(0);
        assert_eq!(empty.bytes(), Log::new(v).text.as_bytes());
    }
}

#[test]
fn a_crash_tail_of_complete_rows_is_cut_with_the_torn_line() {
    for v in VERSIONS {
        let mut log = Log::new(v);
        log.closed_turn();
        log.turn_start().step_start().assistant(&["q"]);
        let committed = log.text.clone();
        // A seq gap with no turn end after it: crash damage, dropped by DSH (§6.2 step 4).
        let tail =
            "{\"type\":\"tool/call\",\"seq\":500,\"time\":1,\"data\":{}}\nnot json\n{\"type\":\"x";
        let case = Case::new(&format!("{committed}{tail}"));
        let summary = repair_ok(&case);
        assert!(
            summary.contains("crash tail of 2 rows from line") && summary.contains("and torn line"),
            "{summary}"
        );
        assert_eq!(fs::read(case.sidecar(1)).unwrap(), tail.as_bytes());
        let after = String::from_utf8(case.bytes()).unwrap();
        assert!(after.starts_with(&committed));
        assert_eq!(after[committed.len()..].lines().count(), 3, "v{v}: {after}");
    }
}

#[test]
fn committed_corruption_is_refused_and_nothing_is_written() {
    for v in VERSIONS {
        let mut log = Log::new(v);
        log.turn_start();
        // Damage followed by a turn end lies in the committed region: fatal (§6.2 step 3).
        let text = format!(
            "{}not json\n{{\"type\":\"turn/end\",\"seq\":1,\"time\":1,\"data\":{{\"turn\":1,\"reason\":{{\"kind\":\"completed\"}}}}}}\n{{\"torn",
            log.text
        );
        let case = Case::new(&text);
        for args in [&["repair"][..], &["repair", "--dry-run"]] {
            let out = dshs().args(args).arg(&case.path).assert().code(1);
            let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
            assert!(err.contains("committed-unparsable"), "v{v}: {err}");
            assert!(err.contains("nothing was written"), "{err}");
            assert!(out.get_output().stdout.is_empty());
            assert_eq!(case.bytes(), text.as_bytes(), "v{v}");
            assert_eq!(case.files(), ["session.jsonl"]);
        }
        let out_path = case.dir().join("out.jsonl");
        dshs()
            .args(["repair", "--output"])
            .arg(&out_path)
            .arg(&case.path)
            .assert()
            .code(1);
        assert!(!out_path.exists());
    }
}

#[test]
fn unsupported_logs_are_refused_with_exit_3() {
    let newer = "{\"type\":\"session\",\"version\":7,\"id\":\"s\"}\n{\"type\":\"x";
    let case = Case::new(newer);
    let out = dshs().arg("repair").arg(&case.path).assert().code(3);
    assert!(
        String::from_utf8_lossy(&out.get_output().stderr).contains("format-version-unsupported")
    );
    assert_eq!(case.bytes(), newer.as_bytes());
    assert_eq!(case.files(), ["session.jsonl"]);

    let mut log = Log::new(3);
    log.turn_start();
    log.ev("acme/new-thing", "{}", "");
    let case = Case::new(&log.text);
    dshs().arg("repair").arg(&case.path).assert().code(3);
    assert_eq!(case.bytes(), log.text.as_bytes());

    // A zstd file whose only frame is cut before the header line is complete: no header,
    // so nothing committed to repair — refused as invalid, untouched.
    let mut zstd = vec![0x28, 0xB5, 0x2F, 0xFD];
    zstd.extend_from_slice(b"\x00\x00junk");
    let case = Case::named("session.jsonl.zstd", "");
    fs::write(&case.path, &zstd).unwrap();
    dshs().arg("repair").arg(&case.path).assert().code(1);
    assert_eq!(case.bytes(), zstd);
}

// ---------------------------------------------------------------------------------------------
// Writing safely: live writers, rollback, --output, stdin.

fn crashed_v3() -> String {
    let mut log = Log::new(3);
    log.closed_turn();
    log.turn_start().step_start().assistant(&["k"]);
    format!("{}{{\"type\":\"tool/c", log.text)
}

#[test]
fn a_held_session_lock_means_a_live_writer_and_nothing_is_written() {
    let text = crashed_v3();
    let case = Case::new(&text);
    let lock = case.dir().join("session.lock");
    fs::write(&lock, b"").unwrap();
    let held = fs::File::open(&lock).unwrap();
    held.lock().unwrap();
    for args in [&["repair"][..], &["repair", "--dry-run"]] {
        let out = dshs().args(args).arg(&case.path).assert().code(3);
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(err.contains("live writer"), "{err}");
        assert!(out.get_output().stdout.is_empty());
    }
    let out_path = case.dir().join("out.jsonl");
    dshs()
        .args(["repair", "--output"])
        .arg(&out_path)
        .arg(&case.path)
        .assert()
        .code(3);
    assert_eq!(case.bytes(), text.as_bytes());
    assert_eq!(case.files(), ["session.jsonl", "session.lock"]);

    // Released: the file alone proves nothing (a crashed holder's lock dies with it).
    drop(held);
    repair_ok(&case);
    assert!(lock.exists(), "dshs never deletes the lock file");
}

#[test]
fn a_session_directory_is_repaired_in_its_newest_generation() {
    let text = crashed_v3();
    let case = Case::named("session.v3.jsonl", &text);
    fs::write(case.dir().join("session.jsonl"), Log::new(0).text).unwrap();
    dshs().arg("repair").arg(case.dir()).assert().code(0);
    assert_valid_and_closed(&case.path);
    assert!(case.sidecar(1).exists());
    assert_eq!(
        fs::read(case.dir().join("session.jsonl")).unwrap(),
        Log::new(0).text.as_bytes()
    );
}

#[test]
fn a_failing_append_restores_the_file_byte_for_byte() {
    if !cfg!(debug_assertions) {
        // The fault hook exists only in debug builds; the unit tests of write.rs cover it too.
        return;
    }
    let text = crashed_v3();
    let cut = text.len() - text.rfind('\n').unwrap() - 1;
    for fault in ["append:0", "append:40", "append:200", "sync"] {
        let case = Case::new(&text);
        let out = dshs()
            .env("DSHS_TEST_FAULT", fault)
            .arg("repair")
            .arg(&case.path)
            .assert()
            .code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(err.contains("restored to its original"), "{fault}: {err}");
        assert_eq!(case.bytes(), text.as_bytes(), "{fault}");
        // The cut bytes were saved before anything changed, and the sidecar stays.
        assert_eq!(
            fs::read(case.sidecar(1)).unwrap(),
            &text.as_bytes()[text.len() - cut..]
        );
        // A later repair without the fault succeeds and uses the next sidecar name.
        repair_ok(&case);
        assert_eq!(
            fs::read(case.sidecar(2)).unwrap(),
            fs::read(case.sidecar(1)).unwrap()
        );
    }
    // A failing sidecar stops everything before the log is touched.
    let case = Case::new(&text);
    dshs()
        .env("DSHS_TEST_FAULT", "sidecar")
        .arg("repair")
        .arg(&case.path)
        .assert()
        .code(2);
    assert_eq!(case.bytes(), text.as_bytes());
    // No partial sidecar; the lock taken to write stays (FORMAT.md §2.1).
    assert_eq!(case.files(), ["session.jsonl", "session.lock"]);
    // --output: a failed write leaves no partial output.
    let out_path = case.dir().join("out.jsonl");
    dshs()
        .env("DSHS_TEST_FAULT", "append:10")
        .args(["repair", "--output"])
        .arg(&out_path)
        .arg(&case.path)
        .assert()
        .code(2);
    assert!(!out_path.exists());
    assert_eq!(case.bytes(), text.as_bytes());
}

#[test]
fn output_writes_the_repaired_log_elsewhere_and_never_replaces_a_file() {
    let text = crashed_v3();
    let case = Case::new(&text);
    let out_path = case.dir().join("repaired.jsonl");
    let out = dshs()
        .args(["repair", "--output"])
        .arg(&out_path)
        .arg(&case.path)
        .assert()
        .code(0);
    let summary = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        summary.contains("left out") && summary.contains("untouched"),
        "{summary}"
    );
    assert_eq!(case.bytes(), text.as_bytes(), "FILE is untouched");
    assert_valid_and_closed(&out_path);
    // Same bytes as an in-place repair.
    let in_place = Case::new(&text);
    repair_ok(&in_place);
    assert_eq!(fs::read(&out_path).unwrap(), in_place.bytes());
    // An existing OUT is never replaced.
    let again = dshs()
        .args(["repair", "--output"])
        .arg(&out_path)
        .arg(&case.path)
        .assert()
        .code(2);
    assert!(String::from_utf8_lossy(&again.get_output().stderr).contains("already exists"));
    assert_eq!(fs::read(&out_path).unwrap(), in_place.bytes());
    // --dry-run and --output do not go together.
    dshs()
        .args(["repair", "--dry-run", "--output", "x", "y"])
        .assert()
        .code(2);
}

#[test]
fn standard_input_is_repaired_only_by_dry_run_or_output() {
    let text = crashed_v3();
    let out = dshs()
        .args(["repair", "-"])
        .write_stdin(text.clone())
        .assert()
        .code(2);
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("--dry-run"));
    let dry = dshs()
        .args(["repair", "--dry-run", "-"])
        .write_stdin(text.clone())
        .assert()
        .code(0);
    let closers = json_lines(&dry.get_output().stdout);
    assert_eq!(closers.len(), 3);
    assert!(String::from_utf8_lossy(&dry.get_output().stderr).contains("would cut"));
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out.jsonl");
    dshs()
        .args(["repair", "--output"])
        .arg(&out_path)
        .arg("-")
        .write_stdin(text.clone())
        .assert()
        .code(0);
    assert_valid_and_closed(&out_path);
}

/// `-q` prints nothing at all (not even the dry run's closers): the exit status says whether
/// the log can be repaired; without --dry-run the repair still happens.
#[test]
fn quiet_prints_nothing_and_still_repairs() {
    let text = crashed_v3();
    let case = Case::new(&text);
    dshs()
        .args(["-q", "repair", "--dry-run"])
        .arg(&case.path)
        .assert()
        .code(0)
        .stdout("")
        .stderr("");
    assert_eq!(
        fs::read_to_string(&case.path).unwrap(),
        text,
        "a dry run writes nothing"
    );
    dshs()
        .args(["-q", "repair"])
        .arg(&case.path)
        .assert()
        .code(0)
        .stdout("")
        .stderr("");
    assert_valid_and_closed(&case.path);
}

#[test]
fn the_sample_crashed_log_repairs_as_documented() {
    let text = fs::read_to_string(testdata("sample/crashed.v3.jsonl")).unwrap();
    let case = Case::named("session.v3.jsonl", &text);
    let closers = dry_run(&case);
    let ids: Vec<_> = closers
        .iter()
        .map(|c| c["data"]["message"]["id"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        ids,
        [
            "interrupted-tool-result-call-2-18",
            "interrupted-tool-result-call-3-19",
            "",
            ""
        ]
    );
    let summary = repair_ok(&case);
    assert!(
        summary.contains("appended 4 events (seq 18–21): tool/result for call-2 (TOOL_OUTCOME_UNKNOWN), tool/result for call-3 (TOOL_NOT_STARTED), step/end, turn/end interrupted"),
        "{summary}"
    );
}

// ---------------------------------------------------------------------------------------------
// Property: any valid log cut by a crash at any byte repairs to a valid, closed log, and a
// second repair is a no-op. Runs the library path (scan → plan → verify → write) in-process.

#[derive(Debug, Clone)]
struct Turn {
    /// Per step: per assistant message, per call: (started, answered).
    steps: Vec<Vec<Vec<(bool, bool)>>>,
}

fn turns() -> impl Strategy<Value = Vec<Turn>> {
    let call = (any::<bool>(), any::<bool>());
    let message = prop::collection::vec(call, 0..3);
    let step = prop::collection::vec(message, 1..3);
    let turn = prop::collection::vec(step, 1..3).prop_map(|steps| Turn { steps });
    prop::collection::vec(turn, 1..4)
}

/// A valid log of version `v`: in v3+ every call is answered before its step ends (the rule of
/// §13.2); in v0 calls may be left unanswered or unstarted (allowed there).
fn build(v: u8, turns: &[Turn]) -> String {
    let mut log = Log::new(v);
    let mut n = 0;
    for t in turns {
        log.turn_start().user("task");
        for step in &t.steps {
            log.step_start();
            for message in step {
                let ids: Vec<String> = message
                    .iter()
                    .map(|_| {
                        n += 1;
                        format!("call-{n}")
                    })
                    .collect();
                let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
                log.assistant(&refs);
                for (id, &(started, answered)) in ids.iter().zip(message) {
                    if v >= 3 || started {
                        let c = log.call(id);
                        if v >= 3 || answered {
                            log.result(id, c);
                        }
                    }
                }
            }
            log.step_end();
        }
        log.turn_end();
    }
    log.text
}

fn repair_in_process(path: &Path) -> repair::RepairPlan {
    let (scan, findings) = scan_file(path);
    let plan = repair::plan(&scan).unwrap_or_else(|r| panic!("{r:?}: {findings:#?}"));
    if !plan.is_noop() {
        let file = fs::File::open(path).unwrap();
        let verdict = repair::verify(file, &plan, Some(path), &ScanOptions::default()).unwrap();
        assert!(verdict.ok, "{:#?}", verdict.findings);
        let stamp = Stamp::of(path).unwrap();
        write::apply_in_place(path, stamp, plan.edit(), Fault::None).unwrap();
    }
    plan
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn any_crash_point_repairs_to_a_valid_closed_log(
        v in prop::sample::select(vec![0u8, 1, 2, 3, 4]),
        turns in turns(),
        at in any::<prop::sample::Index>(),
        garbage in any::<bool>(),
    ) {
        let full = build(v, &turns);
        let header = full.find('\n').unwrap() + 1;
        let cut = header + at.index(full.len() - header + 1);
        let mut text = full[..cut].to_owned();
        if garbage {
            // A complete unusable row where the crash hit: a crash tail, then a fragment.
            let line_start = text.rfind('\n').map_or(0, |i| i + 1);
            let fragment = text.split_off(line_start);
            text.push_str("{\"broken\n");
            text.push_str(&fragment);
        }
        let case = Case::new(&text);
        let (before, _) = scan_file(&case.path);
        prop_assert_eq!(before.status(), Status::Valid);
        let plan = repair_in_process(&case.path);
        let keep = plan.keep as usize;
        // Committed bytes are untouched, the cut bytes are in the sidecar.
        let after = case.bytes();
        prop_assert_eq!(&after[..keep], &text.as_bytes()[..keep]);
        if keep < text.len() {
            prop_assert_eq!(fs::read(case.sidecar(1)).unwrap(), text.as_bytes()[keep..].to_vec());
        }
        let (scan, findings) = scan_file(&case.path);
        prop_assert_eq!(scan.tally.errors, 0, "{:#?}", findings);
        prop_assert!(!scan.open_turn());
        prop_assert!(scan.torn.is_none() && scan.crash.is_none());
        // Idempotent.
        let second = repair_in_process(&case.path);
        prop_assert!(second.is_noop());
        prop_assert_eq!(case.bytes(), after);
    }
}

// ---------------------------------------------------------------------------------------------
// Real DSH logs: every fixture is repaired (or refused) as its verdict says, and every fixture
// cut by a simulated crash after any line, or in the middle of any line, repairs to a valid,
// closed log.

fn fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(testdata("fixtures"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_fixture_is_repaired_or_refused_according_to_its_verdict() {
    let mut repaired = 0;
    for fixture in fixtures() {
        let text = fs::read(&fixture).unwrap();
        let (scan, _) = scan_file(&fixture);
        let case = Case::new("");
        fs::write(&case.path, &text).unwrap();
        let expected = match scan.status() {
            Status::Valid => 0,
            Status::Invalid => 1,
            Status::Unsupported => 3,
            Status::Unreadable => 2,
        };
        dshs().arg("repair").arg(&case.path).assert().code(expected);
        if expected == 0 {
            assert_valid_and_closed(&case.path);
            if scan.open_turn() {
                repaired += 1;
            } else {
                assert_eq!(case.bytes(), text, "{}", fixture.display());
            }
        } else {
            assert_eq!(case.bytes(), text, "{}", fixture.display());
            assert_eq!(case.files(), ["session.jsonl"]);
        }
    }
    assert!(repaired >= 3, "the open-turn fixtures were repaired");
}

#[test]
fn every_valid_fixture_cut_anywhere_repairs_to_a_valid_closed_log() {
    let mut closed = 0;
    for fixture in fixtures() {
        let (scan, _) = scan_file(&fixture);
        if scan.status() != Status::Valid {
            continue;
        }
        let text = fs::read(&fixture).unwrap();
        let ends: Vec<usize> = (0..text.len()).filter(|&i| text[i] == b'\n').collect();
        let mut cuts = Vec::new();
        for w in ends.windows(2) {
            cuts.push(w[0] + 1); // after a line
            cuts.push((w[0] + 1 + w[1]) / 2); // inside the next one
        }
        for cut in cuts {
            let case = Case::new("");
            fs::write(&case.path, &text[..cut]).unwrap();
            let (scan, _) = scan_file(&case.path);
            if scan.tally.errors > 0 {
                // A prefix can break an end-of-log rule of the whole file (e.g. a seeded log
                // cut before its end-seed marker): not crash damage, refused like any error.
                assert!(repair::plan(&scan).is_err());
                continue;
            }
            let plan = repair_in_process(&case.path);
            assert_eq!(
                &case.bytes()[..plan.keep as usize],
                &text[..plan.keep as usize]
            );
            let (after, findings) = scan_file(&case.path);
            assert_eq!(
                after.tally.errors,
                0,
                "{} @{cut}: {findings:#?}",
                fixture.display()
            );
            assert!(!after.open_turn() && after.torn.is_none());
            if !plan.closers.is_empty() {
                closed += 1;
            }
        }
    }
    assert!(closed > 50, "only {closed} cuts needed closers");
}

#[test]
fn closers_the_format_itself_rejects_are_refused_with_the_reason() {
    // v0 accepts a turn numbered 0 with a warning, but DSH's closer for it, turn/end
    // {turn:0}, is a malformed legacy turn end (§16): repair refuses and says why.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("s.jsonl");
    fs::copy(testdata("hostile/v0-open-turn-numbered-zero.jsonl"), &log).unwrap();
    let before = fs::read(&log).unwrap();
    let out = dshs().arg("repair").arg(&log).assert().code(1);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("error[legacy-shape-malformed] seq 1"), "{err}");
    assert!(
        err.contains("the closers DSH would append break this format's own rules"),
        "{err}"
    );
    assert!(!err.contains("please report it"), "{err}");
    assert_eq!(fs::read(&log).unwrap(), before);
}

#[test]
fn an_interrupted_journaled_write_is_finished_by_repair_and_never_by_a_dry_run() {
    // The state a crash leaves inside a journaled edit: the log truncated to the committed
    // prefix plus a few bytes of the append, and FILE.dshs-journal holding the whole append.
    let dir = tempfile::tempdir().unwrap();
    let original = fs::read(testdata("sample/crashed.v3.jsonl")).unwrap();
    let clean = dir.path().join("clean.jsonl");
    fs::write(&clean, &original).unwrap();
    dshs().arg("repair").arg(&clean).assert().code(0);
    let result = fs::read(&clean).unwrap();
    let keep = original
        .iter()
        .zip(&result)
        .take_while(|(a, b)| a == b)
        .count();
    let keep = original[..keep]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let append = &result[keep..];
    let log = dir.path().join("session.v3.jsonl");
    let mut partial = original[..keep].to_vec();
    partial.extend_from_slice(&append[..5]);
    fs::write(&log, &partial).unwrap();
    let journal = dir.path().join("session.v3.jsonl.dshs-journal");
    let mut j = format!(
        "dshs-journal 1 keep={keep} original={} append={}\n",
        original.len(),
        append.len()
    )
    .into_bytes();
    j.extend_from_slice(append);
    fs::write(&journal, &j).unwrap();

    // Read-only commands point at it; --dry-run and --output refuse and change nothing.
    let v = dshs().arg("validate").arg(&log).output().unwrap();
    assert!(String::from_utf8_lossy(&v.stderr).contains("dshs-journal"));
    for extra in [&["--dry-run"][..], &["--output", "out.jsonl"][..]] {
        let out = dshs()
            .current_dir(dir.path())
            .arg("repair")
            .args(extra)
            .arg(&log)
            .assert()
            .code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(err.contains("left unfinished"), "{err}");
        assert_eq!(fs::read(&log).unwrap(), partial);
        assert!(journal.exists());
        assert!(!dir.path().join("out.jsonl").exists());
    }
    // A real repair finishes the journaled write: exactly the uninterrupted result.
    let out = dshs().arg("repair").arg(&log).assert().code(0);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("finished the write"), "{err}");
    assert_eq!(fs::read(&log).unwrap(), result);
    assert!(!journal.exists());
}
