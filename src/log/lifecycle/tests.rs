use super::*;
use crate::log::dialect::DIALECTS;
use crate::log::finding::Pos;
use crate::log::rows::{Row, decode};
use crate::log::vocab::{KnownTypes, Vocabulary};

fn run(version: usize, lines: &[&str]) -> Vec<Finding> {
    let d = &DIALECTS[version];
    let vocab = Vocabulary::new(d, &KnownTypes::default());
    let mut l = Lifecycle::new(d);
    let mut out = Vec::new();
    for line in lines {
        let Row::Events(evs, _) = decode(line.as_bytes(), Pos::default(), d) else {
            panic!("{line}")
        };
        for c in evs {
            let ev = c.event.unwrap();
            let class = vocab.classify(&ev.ty, ev.ignorable);
            l.observe(&ev, class, &mut out);
        }
    }
    out
}

const TURN2: &str = r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":2}}"#;

#[test]
fn turn_numbering_is_a_warning_before_v3_and_an_error_after() {
    let v0 = run(0, &[TURN2]);
    assert_eq!(v0.len(), 1);
    assert_eq!(
        (v0[0].code, v0[0].severity),
        (Code::TurnNumberUnexpected, crate::log::Severity::Warning)
    );
    let v3 = run(3, &[TURN2]);
    assert_eq!(
        (v3[0].code, v3[0].severity),
        (Code::TurnNumberUnexpected, crate::log::Severity::Error)
    );
}

#[test]
fn a_repeated_call_id_does_not_cascade_into_other_findings() {
    // Two tool-call blocks with one id, each started and answered in turn: the repeat is
    // reported once; calls and results pair up in advertising order.
    let asst = r#"{"type":"assistant/message","seq":2,"time":0,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"x","arguments":"{}"},{"type":"tool-call","id":"c1","name":"x","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}},"stream":[]},"surfaceOp":"append"}"#;
    let call = |seq: u64| {
        format!(
            r#"{{"type":"tool/call","seq":{seq},"time":0,"data":{{"turn":1,"step":1,"callId":"c1","name":"x","arguments":"{{}}"}}}}"#
        )
    };
    let result = |seq: u64| {
        format!(
            r#"{{"type":"tool/result","seq":{seq},"time":0,"data":{{"turn":1,"step":1,"message":{{"id":"r{seq}","role":"user","source":{{"kind":"tool","callId":"c1"}},"content":[{{"type":"tool-result","toolCallId":"c1","content":[]}}]}}}},"surfaceOp":"append"}}"#
        )
    };
    let lines = [
        r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#.to_owned(),
        r#"{"type":"step/start","seq":1,"time":0,"data":{"turn":1,"step":1}}"#.to_owned(),
        asst.to_owned(),
        call(3),
        result(4),
        call(5),
        result(6),
        r#"{"type":"step/end","seq":7,"time":0,"data":{"turn":1,"step":1}}"#.to_owned(),
    ];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let codes: Vec<Code> = run(3, &refs).iter().map(|f| f.code).collect();
    assert_eq!(codes, vec![Code::DuplicateCallId]);
}

#[test]
fn a_tool_call_repeats_the_advertised_arguments_by_text_not_by_escaping() {
    // Advertised as `{"cmd":"ls"}` with `\"` escapes; the tool/call writes the same text with
    // `\u0022` and `\/`-free escapes, then with a different text.
    let asst = r#"{"type":"assistant/message","seq":2,"time":0,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"x","arguments":"{\"cmd\":\"ls\"}"}],"source":{"kind":"model","provider":"p","model":"m"}},"stream":[]},"surfaceOp":"append"}"#;
    let run_with = |arguments: &str| {
        let call = format!(
            r#"{{"type":"tool/call","seq":3,"time":0,"data":{{"turn":1,"step":1,"callId":"c1","name":"x","arguments":"{arguments}"}}}}"#
        );
        let lines = [
            r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#,
            r#"{"type":"step/start","seq":1,"time":0,"data":{"turn":1,"step":1}}"#,
            asst,
            &call,
        ];
        run(3, &lines).iter().map(|f| f.code).collect::<Vec<_>>()
    };
    assert_eq!(run_with(r#"{\"cmd\":\"ls\"}"#), vec![]);
    assert_eq!(run_with(r#"{\u0022cmd\u0022:\"l\u0073\"}"#), vec![]);
    assert_eq!(
        run_with(r#"{\"cmd\":\"ls -l\"}"#),
        vec![Code::ToolCallMismatch]
    );
    assert_eq!(
        run_with(r#"{\"cmd\":\"ls\"} "#),
        vec![Code::ToolCallMismatch]
    );
}

#[test]
fn a_turn_end_or_step_start_naming_no_turn_never_matches_the_open_turn() {
    // Even with no turn open (None = None), a missing turn number is a mismatch.
    let lines = [
        r#"{"type":"step/start","seq":0,"time":0,"data":{"step":1}}"#,
        r#"{"type":"turn/end","seq":1,"time":0,"data":{}}"#,
    ];
    let codes: Vec<Code> = run(3, &lines).iter().map(|f| f.code).collect();
    assert!(codes.contains(&Code::StepStartWrongTurn), "{codes:?}");
    assert!(codes.contains(&Code::TurnEndMismatch), "{codes:?}");
}
