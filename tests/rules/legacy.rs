//! §16 v0 legacy shapes: normalized in memory (one `legacy-shape-normalized` warning per
//! kind, with a count), malformed triggers refused, `compact/*` renamed. v1+ have no
//! legacy reader.

use dshs::log::{Severity, Status};

use crate::build::{APPEND, Log};

/// A v0-era log using every legacy shape twice. Returns the log and the seqs that join
/// the surface.
fn legacy_log(v: u8) -> (Log, Vec<u64>) {
    let mut l = Log::new(v);
    let mut surface = Vec::new();
    l.ev("turn/start", r#"{"turn":1,"trigger":{"kind":"user"}}"#, "");
    l.step_start(1, 1);
    surface.push(l.ev(
        "steering/message",
        r#"{"turn":1,"message":{"id":"m1","role":"user","content":[{"type":"text","text":"a"}],"source":{"kind":"user"}}}"#,
        APPEND,
    ));
    surface.push(l.ev(
        "steering/message",
        r#"{"turn":1,"content":[{"type":"text","text":"b"}],"source":{"kind":"user"}}"#,
        APPEND,
    ));
    for text in ["c", "d"] {
        surface.push(l.ev(
            "user/message",
            &format!(
                r#"{{"content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}}"#
            ),
            APPEND,
        ));
    }
    for call in ["c1", "c2"] {
        surface.push(l.ev(
            "assistant/message",
            &format!(
                r#"{{"turn":1,"step":1,"content":[{{"type":"tool-call","id":"{call}","name":"bash","arguments":"{{}}"}}],"provenance":{{"provider":"p","model":"m"}}}}"#
            ),
            APPEND,
        ));
        let c = l.tool_call(1, 1, call, "bash", "{}");
        surface.push(l.ev(
            "tool/result",
            &format!(r#"{{"turn":1,"step":1,"callId":"{call}","content":[{{"type":"text","text":"ok"}}],"isError":false}}"#),
            &format!(r#","sourceEventSeqs":[{c}],"surfaceOp":"append""#),
        ));
    }
    l.step_end(1, 1);
    l.ev("turn/end", r#"{"turn":1,"reason":{"kind":"aborted"}}"#, "");
    l.ev(
        "turn/start",
        r#"{"turn":2,"trigger":{"kind":"schedule"}}"#,
        "",
    );
    l.ev("compact/start", r#"{"compactionId":"k","turn":2}"#, "");
    l.ev(
        "compact/end",
        r#"{"compactionId":"k","turn":2,"error":"declined"}"#,
        "",
    );
    l.ev("turn/end", r#"{"turn":2,"reason":{"kind":"disposed"}}"#, "");
    (l, surface)
}

#[test]
fn every_legacy_shape_is_normalized_with_one_warning_per_kind() {
    let (log, surface) = legacy_log(0);
    let r = log.scan();
    let graded = r.graded();
    assert!(
        graded
            .iter()
            .all(|g| *g == ("legacy-shape-normalized", Severity::Warning)),
        "{graded:?}"
    );
    let mut kinds: Vec<&str> = r.findings.iter().map(|f| f.message.as_str()).collect();
    kinds.sort_unstable();
    let expected = [
        ("assistant/message {content, provenance}", 2),
        ("compact/*", 2),
        ("steering/message", 2),
        ("tool/result {callId, content, isError}", 2),
        ("turn/end reason", 2),
        ("turn/start.trigger", 2),
        ("user/message without id/role", 2),
    ];
    assert_eq!(kinds.len(), expected.len(), "{kinds:#?}");
    for (label, count) in expected {
        assert!(
            r.findings.iter().any(|f| f.message.starts_with(&format!(
                "{count} events in the pre-release shape `{label}`"
            ))),
            "{label}: {kinds:#?}"
        );
    }
    // The upgraded events behave like current ones: they fold onto the surface and pass the
    // message, lifecycle and compaction rules.
    assert_eq!(r.status(), Status::Valid);
    assert_eq!(r.surface(), surface);
    let state = r.scan.state.as_ref().expect("folded");
    assert!(state.surface.iter().all(|n| n.legacy_message().is_some()));
    assert!(!r.scan.open_turn());
}

#[test]
fn a_single_legacy_event_is_counted_once() {
    let mut l = Log::new(0);
    let at = l.ev("turn/start", r#"{"turn":1,"trigger":{"kind":"user"}}"#, "");
    l.turn_end(1);
    let r = l.scan();
    assert_eq!(r.codes(), ["legacy-shape-normalized"]);
    assert!(
        r.findings[0]
            .message
            .starts_with("1 event in the pre-release shape `turn/start.trigger`")
    );
    assert_eq!(r.findings[0].seq, Some(at));
}

#[test]
fn minted_ids_and_replacement_ids_follow_dsh() {
    let mut l = Log::new(0);
    l.turn_start(1);
    l.step_start(1, 1);
    let user = l.ev(
        "user/message",
        r#"{"content":[],"source":{"kind":"user"}}"#,
        APPEND,
    );
    l.assistant(1, 1, &[("c1", "bash", "{}")]);
    let c = l.tool_call(1, 1, "c1", "bash", "{}");
    let result = l.ev(
        "tool/result",
        r#"{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"long"}],"isError":false}"#,
        &format!(r#","sourceEventSeqs":[{c}],"surfaceOp":"append""#),
    );
    // A legacy prune reuses the id of the result it replaces.
    let prune = l.ev(
        "tool/result",
        r#"{"turn":1,"step":1,"callId":"c1","content":[],"isError":false}"#,
        &format!(r#","sourceEventSeqs":[{result}],"surfaceOp":{{"op":"replace","start":{result},"end":{result}}}"#),
    );
    l.step_end(1, 1);
    l.turn_end(1);
    let r = l.scan();
    assert_eq!(
        r.codes(),
        ["legacy-shape-normalized", "legacy-shape-normalized"]
    );
    let state = r.scan.state.as_ref().expect("folded");
    let message = |seq: u64| {
        let node = state.surface.node(seq).expect("on the surface");
        serde_json::from_str::<serde_json::Value>(node.legacy_message().expect("legacy"))
            .expect("json")
    };
    assert_eq!(message(user)["id"], format!("legacy-message:s1:{user}"));
    assert_eq!(message(prune)["id"], format!("legacy-message:s1:{result}"));
    assert_eq!(message(prune)["content"][0]["toolCallId"], "c1");
    assert!(state.surface.node(result).is_none());
}

#[test]
fn legacy_shapes_are_not_normalized_after_v0() {
    let (log, _) = legacy_log(1);
    let r = log.scan();
    assert!(!r.has("legacy-shape-normalized"));
    // v1 has no steering/message or compact/* types.
    assert_eq!(r.of("unknown-event-type").len(), 4, "{:?}", r.codes());
    assert_eq!(r.status(), Status::Unsupported);
    assert!(r.has("message-id-missing"));
}

#[test]
fn compact_events_are_renamed_in_v0() {
    // Renamed, the bracket counts as a compaction (an unfinished one is reported).
    let mut l = Log::new(0);
    let at = l.ev("compact/start", r#"{"compactionId":"k","turn":null}"#, "");
    let r = l.scan();
    assert_eq!(
        r.codes(),
        ["compaction-open-at-end", "legacy-shape-normalized"]
    );
    assert_eq!(r.of("compaction-open-at-end")[0].seq, Some(at));
    // A legacy prune reaches the compaction tracker too.
    let mut l = Log::new(0);
    l.ev(
        "compact/prune",
        r#"{"shadowedRange":{"start":0,"end":0},"shadowedSeqs":[],"shadowedTokenCount":0}"#,
        "",
    );
    let r = l.scan();
    assert_eq!(r.codes(), ["legacy-shape-normalized"]);
    assert_eq!(r.scan.state.as_ref().map(|s| s.compaction.prunes), Some(1));
}

#[test]
fn malformed_legacy_triggers_are_errors() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "turn/start",
            r#"{"turn":1,"trigger":{"kind":"user"},"x":1}"#,
            "",
        ),
        ("turn/start", r#"{"turn":0,"trigger":{"kind":"user"}}"#, ""),
        (
            "turn/start",
            r#"{"turn":1.5,"trigger":{"kind":"user"}}"#,
            "",
        ),
        ("turn/start", r#"{"turn":1,"trigger":{"kind":""}}"#, ""),
        ("turn/start", r#"{"turn":1,"trigger":"user"}"#, ""),
        ("turn/end", r#"{"turn":1}"#, ""),
        (
            "turn/end",
            r#"{"turn":1,"reason":{"kind":"completed"},"x":1}"#,
            "",
        ),
        ("turn/end", r#"{"turn":1,"reason":{"kind":5}}"#, ""),
        (
            "turn/end",
            r#"{"turn":1,"reason":{"kind":"completed","at":3}}"#,
            "",
        ),
        (
            "turn/end",
            r#"{"turn":1,"reason":{"kind":"interrupted","why":"x"}}"#,
            "",
        ),
        (
            "turn/end",
            r#"{"turn":1,"reason":{"kind":"disposed","by":"x"}}"#,
            "",
        ),
        (
            "turn/end",
            r#"{"turn":1,"reason":{"kind":"error","message":"boom"}}"#,
            "",
        ),
        (
            "turn/end",
            r#"{"turn":1,"reason":{"kind":"error","step":-1,"message":"boom"}}"#,
            "",
        ),
        (
            "turn/end",
            r#"{"turn":1,"reason":{"kind":"error","step":1,"failure":{"message":"m"}}}"#,
            "",
        ),
        (
            "turn/end",
            r#"{"turn":1,"reason":{"kind":"error","step":1,"message":"m","code":5}}"#,
            "",
        ),
        (
            "turn/end",
            r#"{"turn":1,"reason":{"kind":"error","step":1,"message":"m","extra":1}}"#,
            "",
        ),
        ("steering/message", r#"{"turn":1}"#, APPEND),
        (
            "steering/message",
            r#"{"turn":1,"message":{},"x":1}"#,
            APPEND,
        ),
        (
            "assistant/message",
            r#"{"turn":1,"step":1,"content":[],"provenance":"model"}"#,
            APPEND,
        ),
    ];
    for (ty, data, extra) in cases {
        let mut l = Log::new(0);
        l.turn_start(1);
        l.step_start(1, 1);
        let at = l.ev(ty, data, extra);
        l.step_end(1, 1);
        if *ty != "turn/end" {
            l.turn_end(1);
        }
        let r = l.scan();
        let found = r.of("legacy-shape-malformed");
        assert_eq!(found.len(), 1, "{ty} {data}: {:?}", r.codes());
        assert_eq!(found[0].seq, Some(at));
        assert_eq!(found[0].severity, Severity::Error);
        assert!(
            found[0]
                .message
                .contains(&format!("malformed pre-react-loop {ty} at seq {at}")),
            "{}",
            found[0].message
        );
        // Corrupt, not unsupported: DSH's legacy reader fails before its vocabulary check.
        assert_eq!(r.status(), Status::Invalid, "{ty} {data}: {:?}", r.codes());
        assert!(!r.has("unknown-event-type"), "{ty} {data}");
    }
}

#[test]
fn current_shapes_in_v0_are_left_alone() {
    // Well-formed current turn ends of every kind are no legacy shape.
    for reason in [
        r#"{"kind":"completed"}"#,
        r#"{"kind":"blocked"}"#,
        r#"{"kind":"max-tokens"}"#,
        r#"{"kind":"interrupted"}"#,
        r#"{"kind":"aborted","reason":{"kind":"user"}}"#,
        r#"{"kind":"error","error":{"message":"m","code":"C"}}"#,
        r#"{"kind":"hook-defined","detail":1}"#,
    ] {
        let mut l = Log::new(0);
        l.turn_start(1);
        l.ev(
            "turn/end",
            &format!(r#"{{"turn":1,"reason":{reason}}}"#),
            "",
        );
        l.scan().assert_clean();
    }
    // A user message with an id is current, even without a role (then the message rule
    // speaks, not the legacy reader).
    let mut l = Log::new(0);
    l.ev(
        "user/message",
        r#"{"id":"u","content":[],"source":{"kind":"user"}}"#,
        APPEND,
    );
    assert_eq!(l.scan().codes(), ["message-role-mismatch"]);
}
