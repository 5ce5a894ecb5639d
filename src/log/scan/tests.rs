use super::*;
use crate::log::finding::Finding;

const V3: &str =
    r#"{"type":"session","version":3,"id":"s","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;

fn run(text: &str) -> (Scan, Vec<Finding>) {
    let mut findings = Vec::new();
    let s = scan(
        text.as_bytes(),
        None,
        &ScanOptions::default(),
        &mut findings,
        &mut (),
    )
    .unwrap();
    (s, findings)
}

fn codes(f: &[Finding]) -> Vec<&'static str> {
    f.iter().map(|f| f.code.as_str()).collect()
}

fn turn(seq0: u64, turn: u64) -> String {
    format!(
        "{{\"type\":\"turn/start\",\"seq\":{seq0},\"time\":0,\"data\":{{\"turn\":{turn}}}}}\n{{\"type\":\"turn/end\",\"seq\":{},\"time\":0,\"data\":{{\"turn\":{turn},\"reason\":{{\"kind\":\"completed\"}}}}}}\n",
        seq0 + 1
    )
}

#[test]
fn empty_file_has_no_header() {
    let (s, f) = run("");
    assert_eq!(codes(&f), ["file-no-header"]);
    assert_eq!(s.status(), Status::Invalid);
}

#[test]
fn header_only_is_valid_with_zero_events() {
    let (s, f) = run(&format!("{V3}\n"));
    assert!(f.is_empty(), "{f:?}");
    assert_eq!((s.status(), s.events()), (Status::Valid, 0));
}

#[test]
fn torn_final_line_is_a_warning_and_never_parsed() {
    let (s, f) = run(&format!("{V3}\n{}{{\"type\":\"turn/sta", turn(0, 1)));
    assert_eq!(codes(&f), ["torn-line"]);
    assert_eq!((s.status(), s.events()), (Status::Valid, 2));
    assert!(s.torn.is_some());
    assert_eq!(s.committed_bytes, (V3.len() + 1 + turn(0, 1).len()) as u64);
}

#[test]
fn damage_after_the_last_turn_end_is_a_crash_tail() {
    let text = format!(
        "{V3}\n{}not json\n{{\"type\":\"turn/start\",\"seq\":2,\"time\":0,\"data\":{{\"turn\":2}}}}\n",
        turn(0, 1)
    );
    let (s, f) = run(&text);
    assert_eq!(codes(&f), ["crash-tail"]);
    assert_eq!((s.status(), s.events()), (Status::Valid, 2));
    let tail = s.crash.unwrap();
    assert_eq!((tail.line, tail.rows), (4, 2));
}

#[test]
fn damage_before_a_later_turn_end_is_corruption() {
    let text = format!("{V3}\nnot json\n{}", turn(0, 1));
    let (s, f) = run(&text);
    assert_eq!(codes(&f), ["committed-unparsable"]);
    assert_eq!(s.status(), Status::Invalid);
    // Checking went on after the damage: both events were folded.
    assert_eq!(s.events(), 2);
}

#[test]
fn seq_gap_before_a_turn_end_is_fatal_and_resynchronises() {
    let text = format!("{V3}\n{}", turn(5, 1));
    let (s, f) = run(&text);
    assert_eq!(codes(&f), ["committed-seq-gap"]);
    assert_eq!(s.status(), Status::Invalid);
    assert_eq!(f[0].seq, Some(5));
}

#[test]
fn seq_gap_at_the_end_is_a_crash_tail() {
    let text = format!(
        "{V3}\n{}{{\"type\":\"turn/start\",\"seq\":7,\"time\":0,\"data\":{{\"turn\":2}}}}\n",
        turn(0, 1)
    );
    let (s, f) = run(&text);
    assert_eq!(codes(&f), ["crash-tail"]);
    assert_eq!(s.events(), 2);
}

#[test]
fn unsupported_version_stops_before_other_header_rules() {
    let (s, f) = run("{\"type\":\"session\",\"version\":7}\n{\"junk\":1}\n");
    assert_eq!(codes(&f), ["format-version-unsupported"]);
    assert_eq!((s.status(), s.version), (Status::Unsupported, Some(7)));
}

#[test]
fn unknown_required_type_is_unsupported_but_ignorable_is_opaque() {
    let text = format!(
        "{V3}\n{{\"type\":\"acme/new\",\"seq\":0,\"time\":0,\"data\":1}}\n{{\"type\":\"acme/other\",\"seq\":1,\"time\":0,\"data\":1,\"ignorable\":true,\"surfaceOp\":5}}\n"
    );
    let (s, f) = run(&text);
    assert_eq!(codes(&f), ["unknown-event-type"]);
    assert_eq!((s.status(), s.events()), (Status::Unsupported, 2));
}

#[test]
fn stop_after_replays_a_prefix() {
    let text = format!("{V3}\n{}{}", turn(0, 1), turn(2, 2));
    let mut findings = Vec::new();
    let opts = ScanOptions {
        stop_after: Some(1),
        ..ScanOptions::default()
    };
    let s = scan(text.as_bytes(), None, &opts, &mut findings, &mut ()).unwrap();
    assert_eq!(s.events(), 2);
    assert!(!s.stop_not_reached);
}

#[test]
fn a_malformed_legacy_only_event_is_corrupt_not_unsupported() {
    // v0 `steering/message` is only a legacy shape: when it is malformed, DSH's legacy
    // reader refuses the log before the vocabulary check ever sees the type.
    let text = "{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1,\"delegationDepth\":0}\n\
        {\"type\":\"steering/message\",\"seq\":0,\"time\":0,\"data\":{\"turn\":1},\"surfaceOp\":\"append\"}\n";
    let (s, f) = run(text);
    assert_eq!(codes(&f), ["legacy-shape-malformed"]);
    assert_eq!(s.status(), Status::Invalid);
}

#[test]
fn committed_canonical_violations_and_malformed_system_messages_block_the_fold() {
    // CLI.md: surface/derive refuse a log with fatal damage in the committed region,
    // including v3+ canonical violations (§8 C7, C8) and a malformed system/message
    // (always fatal, §6.2 step 6). Plain message-shape errors do not block.
    let committed = |event: &str| {
        format!(
            "{V3}\n{event}\n{{\"type\":\"turn/start\",\"seq\":1,\"time\":0,\"data\":{{\"turn\":1}}}}\n{{\"type\":\"turn/end\",\"seq\":2,\"time\":0,\"data\":{{\"turn\":1,\"reason\":{{\"kind\":\"completed\"}}}}}}\n"
        )
    };
    let c7 = r#"{"type":"request/header","seq":0,"time":0,"data":{"header":{"config":{"provider":"p","model":"m"},"tools":[]},"reason":"initial"}}"#;
    let c8 = r#"{"type":"tool/result","seq":0,"time":0,"data":{"turn":1,"step":1,"message":{"id":"r","role":"user","source":{"kind":"tool","callId":"c"},"content":[{"type":"tool-result","toolCallId":"c","content":[]}]},"error":{"name":"E","code":"E"}},"surfaceOp":"append"}"#;
    let system = r#"{"type":"system/message","seq":0,"time":0,"data":{"turn":1,"step":1,"message":{"id":"s","role":"system","content":[],"source":{"kind":"user"}}},"surfaceOp":"append"}"#;
    let user = r#"{"type":"user/message","seq":0,"time":0,"data":{"role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}"#;
    for (event, code, blocks) in [
        (c7, "request-header-empty-optional", true),
        (c8, "tool-result-error-without-flag", true),
        (system, "system-source-invalid", true),
        (user, "message-id-missing", false),
    ] {
        let (s, f) = run(&committed(event));
        assert!(codes(&f).contains(&code), "{code}: {f:?}");
        assert_eq!(s.tally.blocking > 0, blocks, "{code}: {f:?}");
    }
}
