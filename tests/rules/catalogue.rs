//! Every code of the finding catalogue is produced by at least one minimal log.
//!
//! The table below maps each code to the smallest log that triggers it, so it doubles as
//! documentation: "what does a log with this finding look like?". A code that the pipeline
//! cannot produce by design is listed in [`UNREACHABLE`] with the reason; the test fails
//! when a code is neither produced nor listed there, or when a listed one shows up. The
//! codes of SQLite's storage layer come from small databases instead (`sqlite.rs`).

use std::collections::BTreeSet;

use dshs::log::codes::CATALOGUE;
use dshs::log::input::zstd::encode_frame;
use dshs::log::scan::ScanOptions;
use dshs::log::vocab::KnownTypes;
use dshs::log::write::Encoding;

use crate::build::{Run, header, header_with, run_bytes, run_file};

/// Codes no log can produce today, and why.
const UNREACHABLE: &[(&str, &str)] = &[
    // A row breaking a storage rule (§5.2 packed rows, §5.3 range lists) is one bad row:
    // reported once, by its §6 verdict (committed-malformed-row, whose message names the
    // rule) or as part of a crash tail — not a second time under the rule's own code.
    (
        "packed-row-malformed",
        "reported as committed-malformed-row naming the rule (one finding per bad row)",
    ),
    (
        "source-ranges-malformed",
        "reported as committed-malformed-row naming the rule (one finding per bad row)",
    ),
    // Not about a log's bytes: a session directory whose newest generation is a FIFO
    // (tests/pipes.rs makes one with mkfifo).
    (
        "file-not-regular",
        "needs a FIFO in a session directory (tests/pipes.rs)",
    ),
    // The fold's step 1 and provenance checks b, e, f repeat what the row decoder already
    // refused (§5.3, §11.2 step 6): a seq gap or a non-array / duplicate / not-earlier
    // `sourceEventSeqs` makes the row bad (committed-seq-gap, source-ranges-malformed) and
    // it never reaches the fold in that shape.
    (
        "seq-not-contiguous",
        "a seq gap is a bad row (rows.rs) before the fold sees it",
    ),
    (
        "source-seqs-not-array",
        "decode_sources refuses it as source-ranges-malformed",
    ),
    (
        "source-seqs-duplicate",
        "decode_sources refuses it as source-ranges-malformed",
    ),
    (
        "source-seqs-not-earlier",
        "decode_sources refuses it as source-ranges-malformed",
    ),
    // Every place a v4 `plugin` source kind can appear (a surface message) is also a
    // V4-draft tell-tale (§21.2); the draft check runs first and mutes the event's other
    // findings (§9.2 "Precedence").
    (
        "source-kind-plugin",
        "a plugin source in v4 is reported as format-v4-draft",
    ),
];

/// What a table row feeds the scanner.
enum Input {
    Text(String),
    Bytes(Vec<u8>),
    /// A file at this path (relative to a temp dir), for the name and layout checks.
    File(&'static str, String),
    /// Zstd-framed bytes (§3.3), read the way a `.zstd` log is.
    Zstd(Vec<u8>),
}

/// One zstd frame per part, as DSH writes them (frame 1: the header line alone).
fn frames(parts: &[String]) -> Vec<u8> {
    parts
        .iter()
        .flat_map(|p| encode_frame(p.as_bytes()).expect("compress"))
        .collect()
}

/// A v3 header frame, then a frame per line (each with its newline).
fn zstd_lines(lines: &[&str]) -> Vec<String> {
    let mut parts = vec![header(3) + "\n"];
    parts.extend(lines.iter().map(|l| format!("{l}\n")));
    parts
}

/// Offset of the first block header of the frame starting at `frame` (§3.3).
fn first_block_header(bytes: &[u8], frame: usize) -> usize {
    let d = bytes[frame + 4];
    let single = d & 0x20 != 0;
    let dict = [0, 1, 2, 4][usize::from(d & 3)];
    let content_size = match d >> 6 {
        0 => usize::from(single),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    frame + 5 + usize::from(!single) + dict + content_size
}

/// The zstd rows of the table.
fn zstd_rows() -> Vec<(&'static str, Input)> {
    let turn = zstd_lines(&[TURN_0, TURN_1]);
    let mut bad_magic = frames(&turn);
    bad_magic.extend_from_slice(b"junk");
    // Frame 3's checksum (its last byte) flipped.
    let mut bad_checksum = frames(&turn);
    let last = bad_checksum.len() - 1;
    bad_checksum[last] ^= 0xFF;
    // The header and the first event in frame 1.
    let header_frame = frames(&[format!("{}\n{TURN_0}\n", header(3)), format!("{TURN_1}\n")]);
    // The last complete frame ends inside a line.
    let torn_record = frames(&[header(3) + "\n", format!("{TURN_0}\n{{\"type\"")]);
    // The final frame cut short: a write cut by a crash.
    let mut torn_frame = frames(&turn);
    torn_frame.truncate(torn_frame.len() - 2);
    // Frame 2's block size made to run past EOF while the complete frame 3 follows it.
    let mut damaged = frames(&turn);
    let frame_2 = encode_frame(turn[0].as_bytes()).expect("compress").len();
    let at = first_block_header(&damaged, frame_2);
    let h = u32::from_le_bytes([damaged[at], damaged[at + 1], damaged[at + 2], 0]);
    let h = (h & 7) | (u32::try_from(damaged.len()).expect("small") << 3);
    damaged[at..at + 3].copy_from_slice(&h.to_le_bytes()[..3]);
    vec![
        ("zstd-bad-magic", Input::Zstd(bad_magic)),
        ("zstd-frame-invalid", Input::Zstd(bad_checksum)),
        ("zstd-committed-damage", Input::Zstd(damaged)),
        ("zstd-header-frame", Input::Zstd(header_frame)),
        ("zstd-torn-record-in-frame", Input::Zstd(torn_record)),
        ("zstd-torn-frame", Input::Zstd(torn_frame)),
    ]
}

fn run_input(dir: &std::path::Path, input: Input) -> Run {
    match input {
        Input::Text(t) => run_bytes(t.as_bytes(), &KnownTypes::default()),
        Input::Bytes(b) => run_bytes(&b, &KnownTypes::default()),
        Input::File(rel, t) => run_file(dir, rel, &t),
        Input::Zstd(b) => {
            let mut findings = Vec::new();
            let scan = Encoding::Zstd
                .scan(&b[..], None, &ScanOptions::default(), &mut findings)
                .expect("in-memory scan");
            Run { scan, findings }
        }
    }
}

/// Join a header and event lines into a log.
fn log(header: String, events: &[&str]) -> Input {
    let mut t = header;
    t.push('\n');
    for e in events {
        t.push_str(e);
        t.push('\n');
    }
    Input::Text(t)
}

const TURN_0: &str = r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#;
const TURN_1: &str =
    r#"{"type":"turn/end","seq":1,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#;
const USER_0: &str = r#"{"type":"user/message","seq":0,"time":0,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}"#;
const USER_1: &str = r#"{"type":"user/message","seq":1,"time":0,"data":{"id":"u1","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}"#;

/// A turn around one event of turn 1 / step 1 at seq 2.
fn in_step(v: u8, event: &str) -> Input {
    log(
        header(v),
        &[
            TURN_0,
            r#"{"type":"step/start","seq":1,"time":0,"data":{"turn":1,"step":1}}"#,
            event,
            r#"{"type":"step/end","seq":3,"time":0,"data":{"turn":1,"step":1}}"#,
            r#"{"type":"turn/end","seq":4,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        ],
    )
}

/// One event at seq 0 followed by a committed turn (so a v3+ canonical violation in it is
/// in the committed region, not a crash tail).
fn then_turn(v: u8, event: &str) -> Input {
    log(
        header(v),
        &[
            event,
            r#"{"type":"turn/start","seq":1,"time":0,"data":{"turn":1}}"#,
            r#"{"type":"turn/end","seq":2,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        ],
    )
}

fn request_header(v: u8, header_json: &str) -> Input {
    then_turn(
        v,
        &format!(
            r#"{{"type":"request/header","seq":0,"time":0,"data":{{"header":{header_json},"reason":"initial"}}}}"#
        ),
    )
}

fn user_msg(v: u8, data: &str) -> Input {
    log(
        header(v),
        &[&format!(
            r#"{{"type":"user/message","seq":0,"time":0,"data":{data},"surfaceOp":"append"}}"#
        )],
    )
}

fn tool_result(seq: u64, message: &str, extra: &str) -> String {
    format!(
        r#"{{"type":"tool/result","seq":{seq},"time":0,"data":{{"turn":1,"step":1,"message":{message}}}{extra}}}"#
    )
}

fn wrapped(id: &str, call: &str, block_call: &str, text: &str) -> String {
    format!(
        r#"{{"id":"{id}","role":"user","source":{{"kind":"tool","callId":"{call}"}},"content":[{{"type":"tool-result","toolCallId":"{block_call}","content":[{{"type":"text","text":"{text}"}}]}}]}}"#
    )
}

fn developer(v: u8, message: &str, extra_data: &str, before: &[&str]) -> Input {
    let mut events: Vec<String> = before.iter().map(|s| (*s).to_owned()).collect();
    let seq = events.len();
    events.push(format!(
        r#"{{"type":"developer/message","seq":{seq},"time":0,"data":{{"turn":1,"step":1,"message":{message}{extra_data}}},"surfaceOp":"append"}}"#
    ));
    let refs: Vec<&str> = events.iter().map(String::as_str).collect();
    log(header(v), &refs)
}

const V4_TOOLS_HEADER: &str = r#"{"type":"request/header","seq":0,"time":0,"data":{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"other","description":"d","parameters":{}}]},"reason":"initial"}}"#;

/// A compaction between turns that replaces the user node at seq 0 (no system head).
fn compaction(v: u8, start: &str, summary: &str, end: &str, checkpoint_source: &str) -> Input {
    let (s, e) = if v >= 3 {
        ("startSeq", "endSeq")
    } else {
        ("start", "end")
    };
    let checkpoint = format!(
        r#"{{"type":"user/message","seq":3,"time":0,"data":{{"content":[],"source":{checkpoint_source},"role":"user","id":"cp"}},"sourceEventSeqs":[1,2,0],"surfaceOp":{{"op":"replace","{s}":0,"{e}":0}}}}"#
    );
    log(
        header(v),
        &[
            USER_0,
            &format!(r#"{{"type":"compaction/start","seq":1,"time":0,"data":{start}}}"#),
            &format!(r#"{{"type":"compaction/summary","seq":2,"time":0,"data":{summary}}}"#),
            &checkpoint,
            &format!(r#"{{"type":"compaction/end","seq":4,"time":0,"data":{end}}}"#),
        ],
    )
}

const C_START: &str = r#"{"compactionId":"k","turn":null}"#;
const C_SUMMARY: &str = r#"{"compactionId":"k","summary":[],"shadowedRange":{"start":0,"end":0},"shadowedSeqs":[0],"shadowedTokenCount":1,"provider":"p","model":"m"}"#;
const C_END: &str = r#"{"compactionId":"k","turn":null}"#;
const V4_CHECKPOINT: &str = r#"{"kind":"compact-checkpoint","compactionId":"k"}"#;

/// The table: each code with the minimal log that produces it.
fn table() -> Vec<(&'static str, Input)> {
    let assistant_c1 = |seq: u64| {
        format!(
            r#"{{"type":"assistant/message","seq":{seq},"time":0,"data":{{"turn":1,"step":1,"message":{{"id":"a","role":"assistant","content":[{{"type":"tool-call","id":"c1","name":"x","arguments":"{{}}"}}],"source":{{"kind":"model","provider":"p","model":"m"}}}},"stream":[]}},"surfaceOp":"append"}}"#
        )
    };
    let mut invalid_utf8 = header(3).into_bytes();
    invalid_utf8.extend_from_slice(
        b"\n{\"type\":\"goal/change\",\"seq\":0,\"time\":0,\"data\":{\"goal\":\"\xff\"}}\n",
    );
    vec![
        // --- file and lines -------------------------------------------------------------
        ("file-no-header", Input::Text(String::new())),
        ("invalid-utf8", Input::Bytes(invalid_utf8)),
        ("duplicate-json-key", log(header(3), &[r#"{"type":"goal/change","seq":0,"time":0,"data":{"a":1,"a":2}}"#])),
        ("json-not-lossless", log(header(3), &[r#"{"type":"goal/change","seq":0,"time":0,"data":{"a":-0}}"#])),
        ("torn-line", Input::Text(format!("{}\n{{\"type\":\"turn/st", header(3)))),
        ("crash-tail", log(header(3), &[TURN_0, TURN_1, "not json"])),
        ("committed-unparsable", log(header(3), &["not json", TURN_0, TURN_1])),
        ("committed-not-event", log(header(3), &["[1]", TURN_0, TURN_1])),
        (
            "committed-malformed-row",
            log(header(3), &[r#"{"type":"goal/change","seq":0,"time":0,"data":{},"sourceEventSeqs":[[2,1]]}"#, r#"{"type":"turn/start","seq":1,"time":0,"data":{"turn":1}}"#, r#"{"type":"turn/end","seq":2,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#]),
        ),
        ("committed-seq-gap", log(header(3), &[r#"{"type":"turn/start","seq":5,"time":0,"data":{"turn":1}}"#, r#"{"type":"turn/end","seq":6,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#])),
        ("generation-name-mismatch", Input::File("p/session.jsonl", header(3) + "\n")),
        ("header-id-path-mismatch", Input::File("--w--/not-s1/session.v3.jsonl", header_with(3, r#","cwd":"/w""#) + "\n")),
        // --- zstd framing: see zstd_rows ---------------------------------------------------
        // --- format version --------------------------------------------------------------
        ("format-version-unsupported", Input::Text("{\"version\":5}\n".into())),
        ("format-v4-draft", in_step(4, &tool_result(2, &wrapped("r", "c1", "c1", "x"), r#","surfaceOp":"append""#))),
        // --- header ----------------------------------------------------------------------
        ("header-not-json", Input::Text("{\n".into())),
        ("header-field-invalid", Input::Text(header(3).replace(r#""id":"s1","#, "") + "\n")),
        ("header-cwd-not-absolute", Input::Text(header_with(3, r#","cwd":"rel""#) + "\n")),
        ("header-retired-field", Input::Text(header_with(0, r#","sandboxMode":"x""#) + "\n")),
        ("header-unexpected-field", Input::Text(header_with(1, r#","extra":1"#) + "\n")),
        ("header-seed-field", Input::Text(header_with(2, r#","seedLength":0"#) + "\n")),
        ("seed-length-exceeds-events", Input::Text(header_with(0, r#","seedLength":1"#) + "\n")),
        ("seed-marker-mismatch", Input::Text(header(2).replace(r#""isSeeded":false"#, r#""isSeeded":true"#) + "\n")),
        // --- rows and envelope --------------------------------------------------------------
        ("envelope-invalid", log(header(3), &[r#"{"type":"goal/change","seq":0,"time":0,"data":{},"extra":1}"#])),
        // --- vocabulary ------------------------------------------------------------------
        ("unknown-event-type", log(header(3), &[r#"{"type":"acme/new","seq":0,"time":0,"data":{}}"#])),
        ("retired-event-type", log(header(3), &[r#"{"type":"tool/code-dispatch","seq":0,"time":0,"data":{}}"#])),
        ("retired-legacy-event", log(header(0), &[r#"{"type":"mode/set","seq":0,"time":0,"data":{}}"#])),
        ("legacy-shape-normalized", log(header(0), &[r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1,"trigger":{"kind":"user"}}}"#, TURN_1])),
        ("legacy-shape-malformed", log(header(0), &[TURN_0, r#"{"type":"turn/end","seq":1,"time":0,"data":{"turn":1}}"#])),
        // --- messages ----------------------------------------------------------------------
        ("message-id-missing", user_msg(3, r#"{"role":"user","content":[],"source":{"kind":"user"}}"#)),
        ("message-role-mismatch", user_msg(3, r#"{"id":"u","role":"tool","content":[],"source":{"kind":"user"}}"#)),
        ("message-source-invalid", user_msg(3, r#"{"id":"u","role":"user","content":[],"source":{}}"#)),
        ("message-content-invalid", user_msg(3, r#"{"id":"u","role":"user","content":"hi","source":{"kind":"user"}}"#)),
        (
            "assistant-source-invalid",
            in_step(2, r#"{"type":"assistant/message","seq":2,"time":0,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model"}},"stream":[]},"surfaceOp":"append"}"#),
        ),
        ("tool-result-source-invalid", in_step(2, &tool_result(2, r#"{"id":"r","role":"user","source":{"kind":"user"},"content":[]}"#, r#","surfaceOp":"append""#))),
        ("tool-result-block-invalid", in_step(2, &tool_result(2, r#"{"id":"r","role":"user","source":{"kind":"tool","callId":"c1"},"content":[]}"#, r#","surfaceOp":"append""#))),
        ("tool-result-call-id-mismatch", in_step(2, &tool_result(2, &wrapped("r", "c1", "c2", "x"), r#","surfaceOp":"append""#))),
        (
            "system-source-invalid",
            in_step(3, r#"{"type":"system/message","seq":2,"time":0,"data":{"turn":1,"step":1,"message":{"id":"s","role":"system","content":[],"source":{"kind":"system-prompt"}}},"surfaceOp":"append"}"#),
        ),
        ("retired-tool-result-block", user_msg(4, r#"{"id":"u","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]}],"source":{"kind":"user"}}"#)),
        (
            "tool-result-error-without-flag",
            then_turn(3, &format!(r#"{{"type":"tool/result","seq":0,"time":0,"data":{{"turn":1,"step":1,"message":{},"error":{{"name":"E","code":"E"}}}},"surfaceOp":"append"}}"#, wrapped("r", "c1", "c1", "x"))),
        ),
        ("assistant-stream-missing", in_step(2, r#"{"type":"assistant/message","seq":2,"time":0,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}"#)),
        // --- request header --------------------------------------------------------------
        ("request-header-provider-model", request_header(2, r#"{"config":{"model":"m"}}"#)),
        ("request-header-reasoning-effort", request_header(2, r#"{"config":{"provider":"p","model":"m","reasoningEffort":""}}"#)),
        ("request-header-adapter-defaults", request_header(2, r#"{"config":{"provider":"p","model":"m"},"adapterDefaults":{"maxTokens":true}}"#)),
        ("request-header-system-retired", request_header(3, r#"{"config":{"provider":"p","model":"m"},"system":"be brief"}"#)),
        ("request-header-empty-optional", request_header(3, r#"{"config":{"provider":"p","model":"m"},"tools":[]}"#)),
        ("request-header-defer-loading", request_header(4, r#"{"config":{"provider":"p","model":"m"},"tools":[{"name":"t","description":"d","parameters":{},"deferLoading":false}]}"#)),
        // --- developer messages (v4) --------------------------------------------------------
        ("developer-role-mismatch", developer(4, r#"{"id":"d","role":"user","content":[],"source":{"kind":"user"}}"#, "", &[])),
        ("tool-change-block-misplaced", user_msg(4, r#"{"id":"u","role":"user","content":[{"type":"tool-removal","toolName":"t"}],"source":{"kind":"user"}}"#)),
        ("tool-change-block-invalid", developer(4, r#"{"id":"d","role":"developer","content":[{"type":"tool-removal"}],"source":{"kind":"agent-instructions"}}"#, "", &[])),
        ("developer-header-seq", developer(4, r#"{"id":"d","role":"developer","content":[{"type":"tool-addition","toolName":"t"}],"source":{"kind":"agent-instructions"}}"#, "", &[])),
        (
            "developer-tool-binding",
            developer(4, r#"{"id":"d","role":"developer","content":[{"type":"tool-addition","toolName":"t"}],"source":{"kind":"agent-instructions"}}"#, r#","headerSeq":0"#, &[V4_TOOLS_HEADER]),
        ),
        // --- surface fold ------------------------------------------------------------------
        ("surface-metadata-on-log-only", log(header(2), &[r#"{"type":"goal/change","seq":0,"time":0,"data":{},"surfaceOp":"append"}"#])),
        ("surface-op-missing", log(header(2), &[r#"{"type":"user/message","seq":0,"time":0,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}}}"#])),
        ("surface-op-invalid", log(header(2), &[&USER_0.replace(r#""append""#, r#""prepend""#)])),
        ("replace-op-invalid", log(header(2), &[USER_0, &USER_1.replace(r#""append""#, r#"{"op":"replace","startSeq":0,"endSeq":0}"#)])),
        (
            "replace-endpoint-not-earlier",
            log(header(3), &[USER_0, &USER_1.replace(r#""surfaceOp":"append""#, r#""sourceEventSeqs":[0],"surfaceOp":{"op":"replace","startSeq":0,"endSeq":1}"#), TURN_0.replace(r#""seq":0"#, r#""seq":2"#).as_str(), TURN_1.replace(r#""seq":1"#, r#""seq":3"#).as_str()]),
        ),
        ("replace-start-not-on-surface", log(header(2), &[USER_0, &USER_1.replace(r#""surfaceOp":"append""#, r#""sourceEventSeqs":[0],"surfaceOp":{"op":"replace","start":9,"end":0}"#)])),
        ("replace-end-not-on-surface", log(header(2), &[USER_0, &USER_1.replace(r#""surfaceOp":"append""#, r#""sourceEventSeqs":[0],"surfaceOp":{"op":"replace","start":0,"end":9}"#)])),
        (
            "replace-range-reversed",
            log(header(2), &[USER_0, USER_1, &USER_1.replace(r#""seq":1"#, r#""seq":2"#).replace(r#""surfaceOp":"append""#, r#""sourceEventSeqs":[0,1],"surfaceOp":{"op":"replace","start":1,"end":0}"#)]),
        ),
        (
            "source-seqs-on-assistant",
            then_turn(3, r#"{"type":"assistant/message","seq":0,"time":0,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}},"stream":[]},"sourceEventSeqs":[],"surfaceOp":"append"}"#),
        ),
        ("source-seqs-empty", log(header(2), &[&USER_0.replace(r#""surfaceOp""#, r#""sourceEventSeqs":[],"surfaceOp""#)])),
        // v3+ refuse `-0` in the fold (the storage decoder reads it as 0).
        ("source-seqs-invalid-element", log(header(3), &[USER_0, &USER_1.replace(r#""surfaceOp""#, r#""sourceEventSeqs":[-0],"surfaceOp""#)])),
        ("replace-missing-shadowed-source", log(header(2), &[USER_0, &USER_1.replace(r#""append""#, r#"{"op":"replace","start":0,"end":0}"#)])),
        (
            "tool-result-replace-not-single",
            log(header(2), &[USER_0, USER_1, &tool_result(2, &wrapped("r", "c1", "c1", "x"), r#","sourceEventSeqs":[0,1],"surfaceOp":{"op":"replace","start":0,"end":1}"#)]),
        ),
        ("tool-result-replace-target-not-result", log(header(2), &[USER_0, &tool_result(1, &wrapped("r", "c1", "c1", "x"), r#","sourceEventSeqs":[0],"surfaceOp":{"op":"replace","start":0,"end":0}"#)])),
        (
            "tool-result-replace-changes-more",
            // A prune that also changes the message id.
            log(
                header(2),
                &[
                    TURN_0,
                    r#"{"type":"step/start","seq":1,"time":0,"data":{"turn":1,"step":1}}"#,
                    &assistant_c1(2),
                    r#"{"type":"tool/call","seq":3,"time":0,"data":{"turn":1,"step":1,"callId":"c1","name":"x","arguments":"{}"}}"#,
                    &tool_result(4, &wrapped("r", "c1", "c1", "x"), r#","sourceEventSeqs":[3],"surfaceOp":"append""#),
                    &tool_result(5, &wrapped("r2", "c1", "c1", ""), r#","sourceEventSeqs":[4],"surfaceOp":{"op":"replace","start":4,"end":4}"#),
                ],
            ),
        ),
        (
            "system-head-protected",
            log(header(3), &[r#"{"type":"system/message","seq":0,"time":0,"data":{"turn":1,"step":1,"message":{"id":"s","role":"system","content":[],"source":{"kind":"plugin","plugin":"p"}}},"surfaceOp":"append"}"#, &USER_1.replace(r#""surfaceOp":"append""#, r#""sourceEventSeqs":[0],"surfaceOp":{"op":"replace","startSeq":0,"endSeq":0}"#)]),
        ),
        ("message-projection-not-applied", log(header(4), &[r#"{"type":"image/offload","seq":0,"time":0,"data":{}}"#])),
        // --- lifecycle ---------------------------------------------------------------------
        ("turn-start-while-open", log(header(3), &[TURN_0, &TURN_0.replace(r#""seq":0"#, r#""seq":1"#)])),
        ("turn-number-unexpected", log(header(3), &[&TURN_0.replace(r#""turn":1"#, r#""turn":2"#)])),
        ("turn-end-mismatch", log(header(3), &[TURN_0, &TURN_1.replace(r#""turn":1"#, r#""turn":2"#)])),
        ("turn-end-with-open-step", log(header(3), &[TURN_0, r#"{"type":"step/start","seq":1,"time":0,"data":{"turn":1,"step":1}}"#, &TURN_1.replace(r#""seq":1"#, r#""seq":2"#)])),
        ("step-start-wrong-turn", log(header(3), &[r#"{"type":"step/start","seq":0,"time":0,"data":{"turn":1,"step":1}}"#])),
        ("step-start-while-open", log(header(3), &[TURN_0, r#"{"type":"step/start","seq":1,"time":0,"data":{"turn":1,"step":1}}"#, r#"{"type":"step/start","seq":2,"time":0,"data":{"turn":1,"step":1}}"#])),
        ("step-number-unexpected", log(header(3), &[TURN_0, r#"{"type":"step/start","seq":1,"time":0,"data":{"turn":1,"step":2}}"#])),
        ("event-outside-open-step", log(header(3), &[TURN_0, &assistant_c1(1)])),
        ("event-outside-turn", log(header(3), &[r#"{"type":"request/context","seq":0,"time":0,"data":{"provider":"p","model":"m"}}"#])),
        ("tool-result-without-call", in_step(3, &tool_result(2, &wrapped("r", "c1", "c1", "x"), r#","surfaceOp":"append""#))),
        ("tool-result-replace-outside-turn", log(header(3), &[&tool_result(0, &wrapped("r", "c1", "c1", "x"), r#","surfaceOp":"append""#), &tool_result(1, &wrapped("r", "c1", "c1", "y"), r#","sourceEventSeqs":[0],"surfaceOp":{"op":"replace","startSeq":0,"endSeq":0}"#)])),
        ("unresolved-call-at-boundary", in_step(3, &assistant_c1(2))),
        ("duplicate-call-id", log(header(3), &[TURN_0, r#"{"type":"step/start","seq":1,"time":0,"data":{"turn":1,"step":1}}"#, &assistant_c1(2), &assistant_c1(3)])),
        ("tool-call-mismatch", in_step(3, r#"{"type":"tool/call","seq":2,"time":0,"data":{"turn":1,"step":1,"callId":"c9","name":"x","arguments":"{}"}}"#)),
        (
            "tool-result-before-start",
            log(header(3), &[TURN_0, r#"{"type":"step/start","seq":1,"time":0,"data":{"turn":1,"step":1}}"#, &assistant_c1(2), &tool_result(3, &wrapped("r", "c1", "c1", "x"), r#","surfaceOp":"append""#)]),
        ),
        ("command-done-without-run", log(header(3), &[r#"{"type":"command/done","seq":0,"time":0,"data":{"commandId":"k"}}"#])),
        ("open-turn-at-end", log(header(3), &[TURN_0])),
        // --- compaction --------------------------------------------------------------------
        ("compaction-mismatch", compaction(3, C_START, &C_SUMMARY.replace(r#""k""#, r#""k2""#), C_END, r#"{"kind":"plugin","plugin":"compact"}"#)),
        ("compaction-span-invalid", compaction(3, C_START, &C_SUMMARY.replace(r#""shadowedSeqs":[0]"#, r#""shadowedSeqs":[]"#), C_END, r#"{"kind":"plugin","plugin":"compact"}"#)),
        (
            "compaction-summary-count",
            log(header(3), &[r#"{"type":"compaction/start","seq":0,"time":0,"data":{"compactionId":"k","turn":null}}"#, r#"{"type":"compaction/end","seq":1,"time":0,"data":{"compactionId":"k","turn":null}}"#]),
        ),
        ("compaction-checkpoint-source", compaction(4, C_START, C_SUMMARY, C_END, &V4_CHECKPOINT.replace(r#""k""#, r#""k2""#))),
        ("compaction-open-at-end", log(header(0), &[r#"{"type":"compaction/start","seq":0,"time":0,"data":{"compactionId":"k","turn":null}}"#])),
    ]
    .into_iter()
    .chain(zstd_rows())
    .collect()
}

#[test]
fn every_catalogue_code_is_produced_by_a_minimal_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut produced = BTreeSet::new();
    let mut rows = BTreeSet::new();
    for (code, input) in table() {
        assert!(rows.insert(code), "{code} appears twice in the table");
        let run = run_input(dir.path(), input);
        assert!(
            run.has(code),
            "the log for {code} produced {:?}",
            run.codes()
        );
        produced.extend(run.codes());
    }
    produced.extend(crate::sqlite::produced());
    let catalogue: BTreeSet<&str> = CATALOGUE.iter().map(|c| c.name).collect();
    let unreachable: BTreeSet<&str> = UNREACHABLE.iter().map(|(c, _)| *c).collect();
    assert!(
        unreachable.is_subset(&catalogue),
        "UNREACHABLE names unknown codes"
    );
    let expected: BTreeSet<&str> = catalogue.difference(&unreachable).copied().collect();
    let missing: Vec<&&str> = expected.difference(&produced).collect();
    assert!(
        missing.is_empty(),
        "codes no test log produces: {missing:?}"
    );
    let surprising: Vec<&&str> = produced.intersection(&unreachable).collect();
    assert!(
        surprising.is_empty(),
        "listed as unreachable but produced: {surprising:?}"
    );
    // Every row is named for a catalogue code, so the table stays in sync with it.
    assert!(
        rows.is_subset(&catalogue),
        "table rows outside the catalogue: {:?}",
        rows.difference(&catalogue).collect::<Vec<_>>()
    );
}

#[test]
fn the_minimal_logs_of_the_table_are_minimal() {
    // A row produces its code and little else (an open turn, the lifecycle rule an
    // out-of-context event breaks): it does not hide its point behind unrelated noise.
    let dir = tempfile::tempdir().expect("tempdir");
    for (code, input) in table() {
        let run = run_input(dir.path(), input);
        assert!(run.findings.len() <= 3, "{code}: {:?}", run.codes());
    }
}
