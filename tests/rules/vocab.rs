//! §7 vocabulary: the per-version known types, `ignorable`, retired types, v0 retired
//! legacy events and user extensions (§21.4).

use dshs::log::vocab::KnownTypes;
use dshs::log::{Severity, Status};

use crate::build::{APPEND, Log, user_data};

/// §7.2, typed from the spec (not from the dialect table, so a slip there shows up here).
const COMMON: &[&str] = &[
    "agent-preset/selected",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "assistant/message",
    "command/done",
    "command/run",
    "compaction/end",
    "compaction/prune",
    "compaction/start",
    "compaction/summary",
    "feedback/record",
    "goal/change",
    "hook/invoked",
    "hook/result",
    "llm/retry",
    "llm/retry-started",
    "model/selection",
    "permission/preset",
    "plan/mode",
    "request/context",
    "request/header",
    "sandbox/mode",
    "schedule/change",
    "session-log-deepseek/delivery-accepted",
    "session/end-seed",
    "session/title",
    "session/title-llm-request",
    "step/end",
    "step/start",
    "subagent/descriptor",
    "subagent/model-selection-policy",
    "team/member",
    "team/message/delivered",
    "team/message/queued",
    "team/task",
    "todo/write",
    "tool-workflow/agent-end",
    "tool-workflow/agent-start",
    "tool-workflow/run-end",
    "tool-workflow/run-start",
    "tool/call",
    "tool/result",
    "turn/end",
    "turn/start",
    "user/message",
    "web/deepseek-search-llm-request",
];

/// The per-version additions of §7.2 as (type, versions that know it).
const ADDED: &[(&str, &[u8])] = &[
    ("assistant/chunk", &[0, 1]),
    ("tool/code-dispatch", &[0, 1, 2]),
    ("tool/code-dispatch-start", &[0, 1, 2]),
    ("assistant/attempt", &[2, 3, 4]),
    ("feedback/message-put", &[2, 3, 4]),
    ("feedback/message-delete", &[2, 3, 4]),
    ("system/message", &[3, 4]),
    ("tool/ptc-dispatch", &[3, 4]),
    ("tool/ptc-dispatch-start", &[3, 4]),
    ("deliverables/presented", &[3, 4]),
    ("image/offload", &[3, 4]),
    ("subagent/catalog", &[3, 4]),
    ("developer/message", &[4]),
    ("workspace/changes", &[4]),
];

const RETIRED_V3: &[&str] = &["tool/code-dispatch", "tool/code-dispatch-start"];

/// Types no version knows (fork types, typos, v0 legacy names outside v0).
const FOREIGN: &[&str] = &[
    "slots/dispatch",
    "acme/ping",
    "plugin:acme/x",
    "user/messages",
    "context/message",
];

fn one_event(v: u8, ty: &str, ignorable: bool) -> crate::build::Run {
    let mut log = Log::new(v);
    let flag = if ignorable {
        r#","ignorable":true"#
    } else {
        ""
    };
    log.ev(ty, "{}", flag);
    log.scan()
}

#[test]
fn spec_totals_per_version() {
    assert_eq!(COMMON.len(), 48);
    let totals: Vec<usize> = (0..=4u8)
        .map(|v| COMMON.len() + ADDED.iter().filter(|(_, vs)| vs.contains(&v)).count())
        .collect();
    // The spec's totals leave the retired `tool/code-dispatch*` out of v3 and v4.
    assert_eq!(totals, [51, 51, 53, 57, 59]);
}

#[test]
fn known_types_per_version_are_never_unknown() {
    for v in 0..=4u8 {
        let known = COMMON.iter().copied().chain(
            ADDED
                .iter()
                .filter(|(_, vs)| vs.contains(&v))
                .map(|(t, _)| *t),
        );
        for ty in known {
            let r = one_event(v, ty, false);
            assert!(
                !r.has("unknown-event-type") && !r.has("retired-event-type"),
                "v{v} {ty}: {:?}",
                r.codes()
            );
            assert_ne!(r.status(), Status::Unsupported, "v{v} {ty}");
        }
    }
}

#[test]
fn types_outside_a_version_are_unknown_and_make_the_log_unsupported() {
    for v in 0..=4u8 {
        let missing = ADDED
            .iter()
            .filter(|(t, vs)| !(vs.contains(&v) || (v >= 3 && RETIRED_V3.contains(t))))
            .map(|(t, _)| *t)
            .chain(FOREIGN.iter().copied());
        for ty in missing {
            let r = one_event(v, ty, false);
            assert_eq!(r.codes(), ["unknown-event-type"], "v{v} {ty}");
            assert_eq!(r.status(), Status::Unsupported, "v{v} {ty}");
            assert_eq!(r.findings[0].seq, Some(0));
            assert_eq!(r.findings[0].event_type.as_deref(), Some(ty));
        }
    }
}

#[test]
fn notable_version_boundaries() {
    // system/message arrived in v3, assistant/chunk left in v2, developer/message is v4 only.
    let unknown = |v: u8, ty: &str| one_event(v, ty, false).has("unknown-event-type");
    assert!(unknown(2, "system/message"));
    assert!(!unknown(3, "system/message"));
    assert!(!unknown(1, "assistant/chunk"));
    assert!(unknown(2, "assistant/chunk"));
    assert!(unknown(4, "assistant/chunk"));
    assert!(unknown(3, "developer/message"));
    assert!(!unknown(4, "developer/message"));
}

#[test]
fn an_ignorable_unknown_event_is_opaque_in_every_version() {
    for v in 0..=4u8 {
        for ty in FOREIGN
            .iter()
            .chain(["system/message", "assistant/chunk"].iter())
        {
            let known_here = ADDED.iter().any(|(t, vs)| t == ty && vs.contains(&v));
            if known_here {
                continue;
            }
            let mut log = Log::new(v);
            log.user("a");
            // Payload that would fail every check if it were interpreted.
            log.ev(ty, r#"{"turn":"x","message":7}"#, r#","ignorable":true"#);
            log.user("b");
            let r = log.scan();
            r.assert_clean();
            assert_eq!(r.scan.events(), 3);
            assert_eq!(
                r.surface(),
                [0, 2],
                "v{v} {ty}: opaque events never join the surface"
            );
        }
    }
}

#[test]
fn surface_metadata_on_ignorable_unknowns_is_refused_before_v3_and_opaque_after() {
    for v in 0..=4u8 {
        for extra in [APPEND, r#","surfaceOp":42"#, r#","sourceEventSeqs":[0]"#] {
            let mut log = Log::new(v);
            log.user("a");
            log.ev("acme/thing", "{}", &format!(r#","ignorable":true{extra}"#));
            let r = log.scan();
            if v >= 3 {
                r.assert_clean();
            } else {
                assert_eq!(r.codes(), ["surface-metadata-on-log-only"], "v{v} {extra}");
            }
        }
        // Storage decoding of sourceEventSeqs runs on every row, opaque ones included.
        let mut log = Log::new(v);
        log.ev(
            "acme/thing",
            "{}",
            r#","ignorable":true,"sourceEventSeqs":[5]"#,
        );
        log.turn_start(1);
        log.turn_end(1);
        let r = log.scan();
        assert_eq!(r.codes(), ["committed-malformed-row"], "v{v}");
    }
}

#[test]
fn a_known_log_only_type_with_surface_metadata_is_refused_even_when_ignorable() {
    for v in 0..=4u8 {
        let mut log = Log::new(v);
        log.user("a");
        log.ev(
            "goal/change",
            "{}",
            &format!(r#","ignorable":true{APPEND}"#),
        );
        log.turn_start(1);
        log.turn_end(1);
        let r = log.scan();
        assert_eq!(r.codes(), ["surface-metadata-on-log-only"], "v{v}");
        assert_eq!(r.status(), Status::Invalid);
    }
}

#[test]
fn code_dispatch_is_retired_in_v3_and_later_but_known_before() {
    for ty in RETIRED_V3 {
        for v in 0..=2u8 {
            one_event(v, ty, false).assert_clean();
        }
        for v in 3..=4u8 {
            let r = one_event(v, ty, false);
            assert_eq!(r.codes(), ["retired-event-type"], "v{v} {ty}");
            assert_eq!(r.findings[0].severity, Severity::Error);
            // Corrupt, not unsupported.
            assert_eq!(r.status(), Status::Invalid);
            // An ignorable occurrence stays opaque.
            one_event(v, ty, true).assert_clean();
        }
    }
}

#[test]
fn a_retired_event_in_a_crash_tail_is_still_fatal() {
    // §6.2 step 6: fatal wherever it appears, even among rows DSH would drop.
    for v in 3..=4u8 {
        let mut log = Log::new(v);
        log.turn_start(1);
        log.turn_end(1);
        log.junk("not json");
        log.ev("tool/code-dispatch", "{}", "");
        let r = log.scan();
        assert_eq!(r.codes(), ["retired-event-type", "crash-tail"], "v{v}");
        assert_eq!(r.status(), Status::Invalid);
        assert_eq!(r.scan.events(), 2);
    }
}

#[test]
fn v0_retired_legacy_events_are_invalid_not_unsupported() {
    let cases = [
        ("request/header-delta", "{}"),
        ("mode/set", r#"{"mode":"plan"}"#),
        (
            "request/header",
            r#"{"header":{"config":{"provider":"p","model":"m"}},"reason":"fallback"}"#,
        ),
    ];
    for (ty, data) in cases {
        let mut log = Log::new(0);
        log.turn_start(1);
        log.ev(ty, data, "");
        log.turn_end(1);
        let r = log.scan();
        // Reported only as retired-legacy-event, never also as unknown-event-type.
        assert_eq!(r.codes(), ["retired-legacy-event"], "{ty}");
        assert_eq!(r.findings[0].seq, Some(1));
        assert_eq!(r.status(), Status::Invalid, "{ty}");
    }
    // In v1 there is no legacy reader: the same names are simply unknown, and a fallback
    // header is an ordinary header.
    for ty in ["request/header-delta", "mode/set"] {
        assert_eq!(
            one_event(1, ty, false).codes(),
            ["unknown-event-type"],
            "{ty}"
        );
    }
    let mut log = Log::new(1);
    log.turn_start(1);
    log.ev(
        "request/header",
        r#"{"header":{"config":{"provider":"p","model":"m"}},"reason":"fallback"}"#,
        "",
    );
    log.turn_end(1);
    log.scan().assert_clean();
}

// --- §21.4 user extensions ----------------------------------------------------------------

fn known(text: &str) -> KnownTypes {
    let mut k = KnownTypes::default();
    k.parse("test", text).expect("valid known-types text");
    k
}

#[test]
fn declared_types_are_known_log_only_types_for_their_versions() {
    let k = known("# fork types\nslots/dispatch 3-4\nacme/ping 0,2\n\nacme/all   \n");
    for v in 0..=4u8 {
        for (ty, versions) in [
            ("slots/dispatch", &[3u8, 4][..]),
            ("acme/ping", &[0, 2]),
            ("acme/all", &[0, 1, 2, 3, 4]),
        ] {
            let mut log = Log::new(v);
            log.ev(ty, r#"{"anything":[1,2]}"#, "");
            let r = log.scan_with(&k);
            if versions.contains(&v) {
                r.assert_clean();
            } else {
                assert_eq!(r.codes(), ["unknown-event-type"], "v{v} {ty}");
            }
        }
    }
}

#[test]
fn an_extension_cannot_make_a_type_surface_eligible() {
    // Declared types are log-only: surface metadata is refused, and they never join the
    // surface (v2 does not get system/message by declaring it).
    let k = known("system/message 2\nacme/msg\n");
    let mut log = Log::new(2);
    log.ev(
        "system/message",
        r#"{"turn":1,"step":1,"message":{"id":"m","role":"system","content":[],"source":{"kind":"plugin","plugin":"p"}}}"#,
        APPEND,
    );
    log.ev("acme/msg", &user_data("x", "hi"), APPEND);
    let r = log.scan_with(&k);
    assert_eq!(
        r.codes(),
        [
            "surface-metadata-on-log-only",
            "surface-metadata-on-log-only"
        ]
    );
    assert_eq!(r.surface(), Vec::<u64>::new());
    // In v3 too, where surface metadata on unknown ignorables is opaque: a declared type is
    // *known*, so the metadata is refused (a canonical-envelope violation: fatal because a
    // turn end follows, a dropped crash tail otherwise).
    let k = known("acme/msg\n");
    let mut log = Log::new(3);
    log.ev("acme/msg", "{}", &format!(r#","ignorable":true{APPEND}"#));
    assert_eq!(log.scan_with(&k).codes(), ["crash-tail"]);
    log.turn_start(1);
    log.turn_end(1);
    assert_eq!(log.scan_with(&k).codes(), ["surface-metadata-on-log-only"]);
}

#[test]
fn an_extension_cannot_unretire_code_dispatch() {
    let k = known("tool/code-dispatch\ntool/code-dispatch-start 3-4\n");
    for v in 3..=4u8 {
        for ty in RETIRED_V3 {
            let mut log = Log::new(v);
            log.ev(ty, "{}", "");
            assert_eq!(
                log.scan_with(&k).codes(),
                ["retired-event-type"],
                "v{v} {ty}"
            );
        }
    }
}

#[test]
fn malformed_known_types_lines_are_refused_with_their_line_number() {
    for (text, line) in [
        ("ok/type\nslots/dispatch 5\n", 2),
        ("slots/dispatch 4-3", 1),
        ("# c\n\nnodelimiter", 3),
        ("a/b 1 extra", 1),
        ("a/b 1,,2", 1),
        ("a/b x", 1),
    ] {
        let mut k = KnownTypes::default();
        let err = k.parse("kt.txt", text).expect_err(text).to_string();
        assert!(
            err.starts_with(&format!("kt.txt:{line}:")),
            "{text:?} → {err}"
        );
    }
}
