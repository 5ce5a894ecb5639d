//! A small builder for test logs: one method per event kind, shaped for the log's format
//! version, so one test body can build "the same log" under several versions and change
//! exactly one thing.

use dshs::log::codes::Area;
use dshs::log::scan::{Scan, ScanOptions, scan};
use dshs::log::vocab::KnownTypes;
use dshs::log::{Finding, Severity, Status};

/// A test log under construction: the header line, then event lines with dense seqs.
#[derive(Debug, Clone)]
pub struct Log {
    pub v: u8,
    pub header: String,
    pub lines: Vec<String>,
    next: u64,
}

/// The header fields every version requires, without the seed field.
const BASE_HEADER: &str = r#""type":"session","id":"s1","createdAt":1,"delegationDepth":0"#;

/// A valid header for format `v` (v2+ carry `isSeeded:false`).
pub fn header(v: u8) -> String {
    header_with(v, "")
}

/// A valid header for format `v` plus `extra` members (text starting with `,`).
pub fn header_with(v: u8, extra: &str) -> String {
    let seed = if v >= 2 { r#","isSeeded":false"# } else { "" };
    format!("{{{BASE_HEADER},\"version\":{v}{seed}{extra}}}")
}

impl Log {
    pub fn new(v: u8) -> Log {
        Log::with_header(v, &header(v))
    }

    pub fn with_header(v: u8, header: &str) -> Log {
        Log {
            v,
            header: header.to_owned(),
            lines: Vec::new(),
            next: 0,
        }
    }

    /// The seq the next event will get.
    pub fn seq(&self) -> u64 {
        self.next
    }

    /// Append an event: `data` is JSON text, `extra` envelope members (`,"surfaceOp":…`).
    pub fn ev(&mut self, ty: &str, data: &str, extra: &str) -> u64 {
        let seq = self.next;
        self.lines.push(format!(
            r#"{{"type":"{ty}","seq":{seq},"time":{seq},"data":{data}{extra}}}"#
        ));
        self.next += 1;
        seq
    }

    /// Append a line that occupies no seq (damage, packed rows handled by the caller).
    pub fn junk(&mut self, line: &str) {
        self.lines.push(line.to_owned());
    }

    pub fn text(&self) -> String {
        let mut t = String::with_capacity(self.header.len() + 1);
        t.push_str(&self.header);
        t.push('\n');
        for l in &self.lines {
            t.push_str(l);
            t.push('\n');
        }
        t
    }

    pub fn scan(&self) -> Run {
        run_text(&self.text(), &KnownTypes::default())
    }

    pub fn scan_with(&self, known: &KnownTypes) -> Run {
        run_text(&self.text(), known)
    }

    // --- lifecycle -------------------------------------------------------------------

    pub fn turn_start(&mut self, turn: i64) -> u64 {
        self.ev("turn/start", &format!(r#"{{"turn":{turn}}}"#), "")
    }

    pub fn turn_end(&mut self, turn: i64) -> u64 {
        self.ev(
            "turn/end",
            &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
            "",
        )
    }

    pub fn step_start(&mut self, turn: i64, step: i64) -> u64 {
        self.ev(
            "step/start",
            &format!(r#"{{"turn":{turn},"step":{step}}}"#),
            "",
        )
    }

    pub fn step_end(&mut self, turn: i64, step: i64) -> u64 {
        self.ev(
            "step/end",
            &format!(r#"{{"turn":{turn},"step":{step}}}"#),
            "",
        )
    }

    // --- messages --------------------------------------------------------------------

    /// An appended user message with one text block.
    pub fn user(&mut self, text: &str) -> u64 {
        let id = format!("u{}", self.next);
        self.ev("user/message", &user_data(&id, text), APPEND)
    }

    /// An appended assistant message: one text block plus one tool-call block per call
    /// `(id, name, arguments)`. v2+ embed an (empty) stream.
    pub fn assistant(&mut self, turn: i64, step: i64, calls: &[(&str, &str, &str)]) -> u64 {
        let data = assistant_data(self.v, &format!("a{}", self.next), turn, step, calls);
        self.ev("assistant/message", &data, APPEND)
    }

    pub fn tool_call(&mut self, turn: i64, step: i64, id: &str, name: &str, args: &str) -> u64 {
        self.ev(
            "tool/call",
            &format!(
                r#"{{"turn":{turn},"step":{step},"callId":"{id}","name":"{name}","arguments":{}}}"#,
                js(args)
            ),
            "",
        )
    }

    /// An appended successful tool result for `call` citing `call_seq` when given.
    pub fn tool_result(&mut self, turn: i64, step: i64, call: &str, call_seq: Option<u64>) -> u64 {
        let data = tool_result_data(self.v, &format!("r{}", self.next), turn, step, call, "ok");
        let extra = match call_seq {
            Some(s) => format!(r#","sourceEventSeqs":[{s}],"surfaceOp":"append""#),
            None => APPEND.to_owned(),
        };
        self.ev("tool/result", &data, &extra)
    }

    /// A system prompt message (v3: plugin source; v4: system-prompt source).
    pub fn system(&mut self, turn: i64, step: i64) -> u64 {
        let data = system_data(self.v, &format!("sys{}", self.next), turn, step);
        self.ev("system/message", &data, APPEND)
    }

    pub fn request_header(&mut self) -> u64 {
        self.ev(
            "request/header",
            r#"{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial"}"#,
            "",
        )
    }

    /// Turn 1 with step 1 open around whatever `body` appends, then both closed.
    pub fn in_step(&mut self, body: impl FnOnce(&mut Log)) {
        self.turn_start(1);
        self.step_start(1, 1);
        body(self);
        self.step_end(1, 1);
        self.turn_end(1);
    }

    /// One whole turn: a step in which the assistant calls one tool that runs and answers.
    pub fn tool_turn(&mut self, turn: i64, call: &str) {
        self.turn_start(turn);
        self.step_start(turn, 1);
        self.request_header();
        self.assistant(turn, 1, &[(call, "bash", r#"{"cmd":"ls"}"#)]);
        let c = self.tool_call(turn, 1, call, "bash", r#"{"cmd":"ls"}"#);
        self.tool_result(turn, 1, call, Some(c));
        self.step_end(turn, 1);
        self.turn_end(turn);
    }
}

pub const APPEND: &str = r#","surfaceOp":"append""#;

/// A JSON string literal for `s` (test inputs are plain; quotes and backslashes escaped).
pub fn js(s: &str) -> String {
    serde_json::to_string(s).expect("string serializes")
}

pub fn user_data(id: &str, text: &str) -> String {
    format!(
        r#"{{"id":"{id}","role":"user","content":[{{"type":"text","text":{}}}],"source":{{"kind":"user"}}}}"#,
        js(text)
    )
}

pub fn assistant_message(id: &str, calls: &[(&str, &str, &str)]) -> String {
    let mut content = vec![r#"{"type":"text","text":"hi"}"#.to_owned()];
    for (cid, name, args) in calls {
        content.push(format!(
            r#"{{"type":"tool-call","id":"{cid}","name":"{name}","arguments":{}}}"#,
            js(args)
        ));
    }
    format!(
        r#"{{"id":"{id}","role":"assistant","content":[{}],"source":{{"kind":"model","provider":"p","model":"m"}}}}"#,
        content.join(",")
    )
}

pub fn assistant_data(
    v: u8,
    id: &str,
    turn: i64,
    step: i64,
    calls: &[(&str, &str, &str)],
) -> String {
    let stream = if v >= 2 { r#","stream":[]"# } else { "" };
    format!(
        r#"{{"turn":{turn},"step":{step},"message":{}{stream}}}"#,
        assistant_message(id, calls)
    )
}

/// The tool-result message of this version: v0–v3 role `user` with one `tool-result`
/// block; v4 role `tool` with the blocks directly.
pub fn tool_result_message(v: u8, id: &str, call: &str, text: &str) -> String {
    if v >= 4 {
        format!(
            r#"{{"id":"{id}","role":"tool","toolCallId":"{call}","isError":false,"source":{{"kind":"tool","callId":"{call}"}},"content":[{{"type":"text","text":{}}}]}}"#,
            js(text)
        )
    } else {
        format!(
            r#"{{"id":"{id}","role":"user","source":{{"kind":"tool","callId":"{call}"}},"content":[{{"type":"tool-result","toolCallId":"{call}","isError":false,"content":[{{"type":"text","text":{}}}]}}]}}"#,
            js(text)
        )
    }
}

pub fn tool_result_data(v: u8, id: &str, turn: i64, step: i64, call: &str, text: &str) -> String {
    format!(
        r#"{{"turn":{turn},"step":{step},"message":{}}}"#,
        tool_result_message(v, id, call, text)
    )
}

pub fn system_data(v: u8, id: &str, turn: i64, step: i64) -> String {
    let source = if v >= 4 {
        r#"{"kind":"system-prompt"}"#
    } else {
        r#"{"kind":"plugin","plugin":"@deepseek-ai/dsh-system-prompt"}"#
    };
    format!(
        r#"{{"turn":{turn},"step":{step},"message":{{"id":"{id}","role":"system","content":[{{"type":"text","text":"be brief"}}],"source":{source}}}}}"#
    )
}

/// The outcome of one scan: the result plus every finding, in order.
pub struct Run {
    pub scan: Scan,
    pub findings: Vec<Finding>,
}

impl Run {
    pub fn codes(&self) -> Vec<&'static str> {
        self.findings.iter().map(|f| f.code.as_str()).collect()
    }

    /// Codes with their severity, e.g. `("turn-end-mismatch", Severity::Warning)`.
    pub fn graded(&self) -> Vec<(&'static str, Severity)> {
        self.findings
            .iter()
            .map(|f| (f.code.as_str(), f.severity))
            .collect()
    }

    pub fn status(&self) -> Status {
        self.scan.status()
    }

    pub fn surface(&self) -> Vec<u64> {
        self.scan
            .state
            .as_ref()
            .map(|s| s.surface.seqs())
            .unwrap_or_default()
    }

    /// The codes of the findings owned by one stage (e.g. only the message rules).
    pub fn codes_in(&self, area: Area) -> Vec<&'static str> {
        self.findings
            .iter()
            .filter(|f| f.code.info().area == area)
            .map(|f| f.code.as_str())
            .collect()
    }

    pub fn has(&self, code: &str) -> bool {
        self.findings.iter().any(|f| f.code.as_str() == code)
    }

    /// The findings of one code.
    pub fn of(&self, code: &str) -> Vec<&Finding> {
        self.findings
            .iter()
            .filter(|f| f.code.as_str() == code)
            .collect()
    }

    /// Asserts the log is valid with no finding at all.
    #[track_caller]
    pub fn assert_clean(&self) {
        assert!(
            self.findings.is_empty() && self.status() == Status::Valid,
            "expected a clean log, got {:?}: {:#?}",
            self.status(),
            self.findings
        );
    }
}

pub fn run_text(text: &str, known: &KnownTypes) -> Run {
    run_bytes(text.as_bytes(), known)
}

pub fn run_bytes(bytes: &[u8], known: &KnownTypes) -> Run {
    let mut findings = Vec::new();
    let opts = ScanOptions {
        known_types: known.clone(),
        ..ScanOptions::default()
    };
    let scan = scan(bytes, None, &opts, &mut findings, &mut ()).expect("in-memory scan");
    Run { scan, findings }
}

/// The lifecycle severity of format `v` (§13.3).
pub fn lifecycle_severity(v: u8) -> Severity {
    if v >= 3 {
        Severity::Error
    } else {
        Severity::Warning
    }
}

/// Write `text` to `dir/rel` (creating directories) and scan it by path, so the file-name
/// and directory-layout checks run.
pub fn run_file(dir: &std::path::Path, rel: &str, text: &str) -> Run {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create test dirs");
    }
    std::fs::write(&path, text).expect("write test log");
    let mut findings = Vec::new();
    let file = std::fs::File::open(&path).expect("open test log");
    let scan = scan(
        std::io::BufReader::new(file),
        Some(&path),
        &ScanOptions::default(),
        &mut findings,
        &mut (),
    )
    .expect("readable");
    Run { scan, findings }
}
