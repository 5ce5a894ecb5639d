//! §9/§10 payload rules: message shapes per version, the V4 admission that keeps a failed
//! message off the surface, C6/C7/C8, request headers, embedded streams, the retired
//! `tool-result` block of v4 and V4-draft detection (§21.2).

use dshs::log::codes::Area;
use dshs::log::{Severity, Status};

use crate::build::{APPEND, Log, Run, assistant_data, system_data, tool_result_data};

/// Scan a log whose turn 1 / step 1 holds one event of `ty` with `data`.
fn one(v: u8, ty: &str, data: &str, extra: &str) -> Run {
    let mut log = Log::new(v);
    log.in_step(|l| {
        l.ev(ty, data, extra);
    });
    log.scan()
}

fn messages(v: u8, ty: &str, data: &str) -> Vec<&'static str> {
    one(v, ty, data, APPEND).codes_in(Area::Messages)
}

const USER_OK: &str =
    r#"{"id":"u","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}"#;

#[test]
fn well_formed_messages_pass_in_their_versions() {
    for v in 0..=4u8 {
        assert_eq!(
            messages(v, "user/message", USER_OK),
            Vec::<&str>::new(),
            "v{v}"
        );
        let r = one(
            v,
            "assistant/message",
            &assistant_data(v, "a", 1, 1, &[]),
            APPEND,
        );
        r.assert_clean();
    }
    for v in 3..=4u8 {
        one(v, "system/message", &system_data(v, "s", 1, 1), APPEND).assert_clean();
    }
    // v4 producer-owned and third-party source kinds, unknown kinds and extra fields survive.
    for kind in [
        "runtime-context",
        "compact-basic",
        "goal",
        "plugin:acme",
        "brand-new",
    ] {
        let data = USER_OK.replace(
            r#"{"kind":"user"}"#,
            &format!(r#"{{"kind":"{kind}","extra":1}}"#),
        );
        assert_eq!(
            messages(4, "user/message", &data),
            Vec::<&str>::new(),
            "{kind}"
        );
    }
    // v4 tool messages may have empty content.
    let data = tool_result_data(4, "r", 1, 1, "c1", "x").replace(
        r#""content":[{"type":"text","text":"x"}]"#,
        r#""content":[]"#,
    );
    assert_eq!(messages(4, "tool/result", &data), Vec::<&str>::new());
}

#[test]
fn user_message_shape_codes_in_every_version() {
    let cases: &[(&str, &str)] = &[
        (
            r#"{"role":"user","content":[],"source":{"kind":"user"}}"#,
            "message-id-missing",
        ),
        (
            r#"{"id":"","role":"user","content":[],"source":{"kind":"user"}}"#,
            "message-id-missing",
        ),
        (
            r#"{"id":5,"role":"user","content":[],"source":{"kind":"user"}}"#,
            "message-id-missing",
        ),
        (
            r#"{"id":"u","role":"assistant","content":[],"source":{"kind":"user"}}"#,
            "message-role-mismatch",
        ),
        (
            r#"{"id":"u","content":[],"source":{"kind":"user"}}"#,
            "message-role-mismatch",
        ),
        (
            r#"{"id":"u","role":"user","content":[]}"#,
            "message-source-invalid",
        ),
        (
            r#"{"id":"u","role":"user","content":[],"source":"user"}"#,
            "message-source-invalid",
        ),
        (
            r#"{"id":"u","role":"user","content":[],"source":{"kind":""}}"#,
            "message-source-invalid",
        ),
        (
            r#"{"id":"u","role":"user","content":[],"source":{"kind":7}}"#,
            "message-source-invalid",
        ),
        (
            r#"{"id":"u","role":"user","content":"hi","source":{"kind":"user"}}"#,
            "message-content-invalid",
        ),
        (
            r#"{"id":"u","role":"user","source":{"kind":"user"}}"#,
            "message-content-invalid",
        ),
        // First failure only, in DSH's order: id, role, source, content.
        (
            r#"{"role":"system","content":7,"source":5}"#,
            "message-id-missing",
        ),
        (
            r#"{"id":"u","role":"system","content":7,"source":5}"#,
            "message-role-mismatch",
        ),
        (
            r#"{"id":"u","role":"user","content":7,"source":5}"#,
            "message-source-invalid",
        ),
    ];
    for v in 0..=4u8 {
        for (data, code) in cases {
            assert_eq!(messages(v, "user/message", data), [*code], "v{v} {data}");
        }
    }
}

fn assistant_with(v: u8, message: &str) -> String {
    let stream = if v >= 2 { r#","stream":[]"# } else { "" };
    format!(r#"{{"turn":1,"step":1,"message":{message}{stream}}}"#)
}

#[test]
fn assistant_message_shape_codes_in_every_version() {
    let cases: &[(&str, &str)] = &[
        ("null", "message-id-missing"),
        (r#""text""#, "message-id-missing"),
        (
            r#"{"role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}"#,
            "message-id-missing",
        ),
        (
            r#"{"id":"a","role":"user","content":[],"source":{"kind":"model","provider":"p","model":"m"}}"#,
            "message-role-mismatch",
        ),
        (
            r#"{"id":"a","role":"assistant","content":[],"source":null}"#,
            "message-source-invalid",
        ),
        (
            r#"{"id":"a","role":"assistant","content":{},"source":{"kind":"model","provider":"p","model":"m"}}"#,
            "message-content-invalid",
        ),
        (
            r#"{"id":"a","role":"assistant","content":[],"source":{"kind":"user","provider":"p","model":"m"}}"#,
            "assistant-source-invalid",
        ),
        (
            r#"{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"","model":"m"}}"#,
            "assistant-source-invalid",
        ),
        (
            r#"{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p"}}"#,
            "assistant-source-invalid",
        ),
        // Content is checked before the model source.
        (
            r#"{"id":"a","role":"assistant","content":1,"source":{"kind":"user"}}"#,
            "message-content-invalid",
        ),
    ];
    for v in 0..=4u8 {
        for (message, code) in cases {
            let data = assistant_with(v, message);
            assert_eq!(
                messages(v, "assistant/message", &data),
                [*code],
                "v{v} {message}"
            );
        }
        // No message at all (and not a v0 legacy shape: no content/provenance).
        let data = if v >= 2 {
            r#"{"turn":1,"step":1,"stream":[]}"#
        } else {
            r#"{"turn":1,"step":1}"#
        };
        assert_eq!(
            messages(v, "assistant/message", data),
            ["message-id-missing"],
            "v{v}"
        );
    }
}

fn result_with(message: &str) -> String {
    format!(r#"{{"turn":1,"step":1,"message":{message}}}"#)
}

#[test]
fn wrapped_tool_result_shape_codes_in_v0_to_v3() {
    let block = |inner: &str| {
        format!(
            r#"{{"id":"r","role":"user","source":{{"kind":"tool","callId":"c1"}},"content":{inner}}}"#
        )
    };
    let cases: Vec<(String, &str)> = vec![
        (block(r#"[{"type":"tool-result","toolCallId":"c1","content":[]}]"#), ""),
        (
            r#"{"id":"r","role":"tool","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[]}]}"#.into(),
            "message-role-mismatch",
        ),
        (
            r#"{"id":"r","role":"user","source":{"kind":"user","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[]}]}"#.into(),
            "tool-result-source-invalid",
        ),
        (
            r#"{"id":"r","role":"user","source":{"kind":"tool","callId":""},"content":[{"type":"tool-result","toolCallId":"","content":[]}]}"#.into(),
            "tool-result-source-invalid",
        ),
        (
            r#"{"id":"r","role":"user","source":{"kind":"tool"},"content":[]}"#.into(),
            "tool-result-source-invalid",
        ),
        (block("[]"), "tool-result-block-invalid"),
        (
            block(r#"[{"type":"tool-result","toolCallId":"c1","content":[]},{"type":"tool-result","toolCallId":"c1","content":[]}]"#),
            "tool-result-block-invalid",
        ),
        (block(r#"[{"type":"text","text":"x"}]"#), "tool-result-block-invalid"),
        (block(r#"[{"type":"tool-result","toolCallId":"c1","content":"x"}]"#), "tool-result-block-invalid"),
        (block(r#"[{"type":"tool-result","toolCallId":"c1"}]"#), "tool-result-block-invalid"),
        (block(r#"[{"type":"tool-result","toolCallId":"c2","content":[]}]"#), "tool-result-call-id-mismatch"),
        (block(r#"[{"type":"tool-result","content":[]}]"#), "tool-result-call-id-mismatch"),
        (block("{}"), "message-content-invalid"),
    ];
    for v in 0..=3u8 {
        for (message, code) in &cases {
            let want: Vec<&str> = if code.is_empty() { vec![] } else { vec![*code] };
            assert_eq!(
                messages(v, "tool/result", &result_with(message)),
                want,
                "v{v} {message}"
            );
        }
    }
}

#[test]
fn tool_role_result_shape_codes_in_v4() {
    let msg = |parts: &str| format!(r#"{{{parts}}}"#);
    let cases: &[(&str, &str)] = &[
        (
            r#""id":"r","role":"tool","toolCallId":"c1","source":{"kind":"tool","callId":"c1"},"content":[]"#,
            "",
        ),
        (
            r#""id":"r","role":"tool","toolCallId":"c1","isError":true,"source":{"kind":"tool","callId":"c1"},"content":[{"type":"text","text":"x"}]"#,
            "",
        ),
        (
            r#""id":"","role":"tool","toolCallId":"c1","source":{"kind":"tool","callId":"c1"},"content":[]"#,
            "message-id-missing",
        ),
        (
            r#""id":"r","role":"assistant","toolCallId":"c1","source":{"kind":"tool","callId":"c1"},"content":[]"#,
            "message-role-mismatch",
        ),
        (
            r#""id":"r","role":"tool","toolCallId":"c1","source":{"kind":"user","callId":"c1"},"content":[]"#,
            "tool-result-source-invalid",
        ),
        (
            r#""id":"r","role":"tool","toolCallId":"c1","source":{"kind":"tool"},"content":[]"#,
            "tool-result-source-invalid",
        ),
        (
            r#""id":"r","role":"tool","toolCallId":"c2","source":{"kind":"tool","callId":"c1"},"content":[]"#,
            "tool-result-call-id-mismatch",
        ),
        (
            r#""id":"r","role":"tool","source":{"kind":"tool","callId":"c1"},"content":[]"#,
            "tool-result-call-id-mismatch",
        ),
        (
            r#""id":"r","role":"tool","toolCallId":"c1","isError":"yes","source":{"kind":"tool","callId":"c1"},"content":[]"#,
            "message-content-invalid",
        ),
        (
            r#""id":"r","role":"tool","toolCallId":"c1","source":{"kind":"tool","callId":"c1"},"content":{}"#,
            "message-content-invalid",
        ),
        // A text-only content with a `tool-result` type is the wrapper: that is a V4 draft
        // (see below), so here only non-wrapper content is used.
    ];
    for (parts, code) in cases {
        let want: Vec<&str> = if code.is_empty() { vec![] } else { vec![*code] };
        assert_eq!(
            messages(4, "tool/result", &result_with(&msg(parts))),
            want,
            "{parts}"
        );
    }
}

#[test]
fn system_message_source_is_plugin_in_v3_and_system_prompt_in_v4() {
    let sys = |v: u8, source: &str, turn_step: &str| {
        let data = system_data(v, "s", 1, 1).replace(r#""turn":1,"step":1"#, turn_step);
        let data = match v {
            4 => data.replace(r#"{"kind":"system-prompt"}"#, source),
            _ => data.replace(
                r#"{"kind":"plugin","plugin":"@deepseek-ai/dsh-system-prompt"}"#,
                source,
            ),
        };
        messages(v, "system/message", &data)
    };
    let ts = r#""turn":1,"step":1"#;
    // v3: {kind:"plugin", plugin}.
    assert_eq!(
        sys(3, r#"{"kind":"plugin","plugin":"x"}"#, ts),
        Vec::<&str>::new()
    );
    assert_eq!(
        sys(3, r#"{"kind":"system-prompt"}"#, ts),
        ["system-source-invalid"]
    );
    assert_eq!(
        sys(3, r#"{"kind":"plugin"}"#, ts),
        ["system-source-invalid"]
    );
    assert_eq!(
        sys(3, r#"{"kind":"plugin","plugin":""}"#, ts),
        ["system-source-invalid"]
    );
    // v4: {kind:"system-prompt"} and positive turn/step.
    assert_eq!(
        sys(4, r#"{"kind":"system-prompt"}"#, ts),
        Vec::<&str>::new()
    );
    assert_eq!(sys(4, r#"{"kind":"user"}"#, ts), ["system-source-invalid"]);
    assert_eq!(
        sys(4, r#"{"kind":"plugin:acme"}"#, ts),
        ["system-source-invalid"]
    );
    // (turn/step 0 also breaks the lifecycle; only the message rule is looked at here)
    assert_eq!(
        sys(4, r#"{"kind":"system-prompt"}"#, r#""turn":0,"step":1"#),
        ["system-source-invalid"]
    );
    assert_eq!(
        sys(4, r#"{"kind":"system-prompt"}"#, r#""turn":1"#),
        ["system-source-invalid"]
    );
    // Role first.
    let wrong_role = system_data(3, "s", 1, 1).replace(r#""role":"system""#, r#""role":"user""#);
    assert_eq!(
        messages(3, "system/message", &wrong_role),
        ["message-role-mismatch"]
    );
}

#[test]
fn v4_admission_keeps_a_failed_message_off_the_surface_but_v0_to_v3_do_not() {
    for v in 0..=4u8 {
        let mut log = Log::new(v);
        let good = log.user("a");
        let bad = log.ev(
            "user/message",
            r#"{"role":"user","content":[],"source":{"kind":"user"}}"#,
            APPEND,
        );
        let bad_assistant = log.ev(
            "assistant/message",
            &assistant_with(
                v,
                r#"{"id":"a","role":"assistant","content":[],"source":{"kind":"user"}}"#,
            ),
            APPEND,
        );
        let r = log.scan();
        assert_eq!(
            r.codes_in(Area::Messages),
            ["message-id-missing", "assistant-source-invalid"],
            "v{v}"
        );
        assert_eq!(r.status(), Status::Invalid);
        let want = if v == 4 {
            vec![good]
        } else {
            vec![good, bad, bad_assistant]
        };
        assert_eq!(r.surface(), want, "v{v}");
    }
}

// --- §8 C8 ---------------------------------------------------------------------------------

fn failed_result(v: u8, flag_block: Option<bool>, flag_message: Option<bool>) -> String {
    let block_flag = flag_block.map_or_else(String::new, |f| format!(r#","isError":{f}"#));
    let msg_flag = flag_message.map_or_else(String::new, |f| format!(r#","isError":{f}"#));
    let message = if v >= 4 {
        format!(
            r#"{{"id":"r","role":"tool","toolCallId":"c1"{msg_flag},"source":{{"kind":"tool","callId":"c1"}},"content":[{{"type":"text","text":"boom"}}]}}"#
        )
    } else {
        format!(
            r#"{{"id":"r","role":"user","source":{{"kind":"tool","callId":"c1"}},"content":[{{"type":"tool-result","toolCallId":"c1"{block_flag},"content":[]}}]}}"#
        )
    };
    format!(r#"{{"turn":1,"step":1,"message":{message},"error":{{"name":"Boom","code":"BOOM"}}}}"#)
}

#[test]
fn c8_a_failed_result_sets_its_flag_from_v3_on() {
    let c8 = |v: u8, data: &str| {
        one(v, "tool/result", data, APPEND)
            .of("tool-result-error-without-flag")
            .len()
    };
    for v in 0..=2u8 {
        assert_eq!(c8(v, &failed_result(v, Some(false), None)), 0, "v{v}");
        assert_eq!(c8(v, &failed_result(v, None, None)), 0, "v{v}");
    }
    // v3: the flag lives on the tool-result block.
    assert_eq!(c8(3, &failed_result(3, Some(true), None)), 0);
    assert_eq!(c8(3, &failed_result(3, Some(false), None)), 1);
    assert_eq!(c8(3, &failed_result(3, None, None)), 1);
    // v4: on the message.
    assert_eq!(c8(4, &failed_result(4, None, Some(true))), 0);
    assert_eq!(c8(4, &failed_result(4, None, Some(false))), 1);
    assert_eq!(c8(4, &failed_result(4, None, None)), 1);
    // A failed result may omit `error`.
    for v in 3..=4u8 {
        let data = failed_result(v, Some(true), Some(true))
            .replace(r#","error":{"name":"Boom","code":"BOOM"}"#, "");
        assert_eq!(c8(v, &data), 0, "v{v}");
    }
}

#[test]
fn c8_is_tolerated_in_a_crash_tail_and_fatal_before_a_turn_end() {
    for v in 3..=4u8 {
        // In a crash tail (no turn end follows): dropped like DSH does.
        let mut log = Log::new(v);
        log.turn_start(1);
        log.turn_end(1);
        log.ev(
            "tool/result",
            &failed_result(v, Some(false), Some(false)),
            APPEND,
        );
        let r = log.scan();
        assert_eq!(r.codes(), ["crash-tail"], "v{v}");
        assert_eq!(r.status(), Status::Valid);
        assert_eq!(r.scan.events(), 2);
        // Before a turn end: committed, so fatal.
        log.turn_start(2);
        log.turn_end(2);
        let r = log.scan();
        assert!(
            r.has("tool-result-error-without-flag"),
            "v{v}: {:?}",
            r.codes()
        );
        assert_eq!(r.status(), Status::Invalid);
    }
}

// --- request/header (§10.1, §8 C6/C7, §9.3) -------------------------------------------------

fn header_event(v: u8, header: &str) -> Run {
    one(
        v,
        "request/header",
        &format!(r#"{{"header":{header},"reason":"initial"}}"#),
        "",
    )
}

fn header_codes(v: u8, header: &str) -> Vec<&'static str> {
    header_event(v, header).codes_in(Area::RequestHeader)
}

#[test]
fn request_header_rules_in_every_version() {
    let cases: &[(&str, &str)] = &[
        (r#"{"config":{"provider":"p","model":"m"}}"#, ""),
        (
            r#"{"config":{"provider":"p","model":"m","reasoningEffort":"high","maxTokens":8},"adapterDefaults":{"reasoningEffort":true,"maxTokens":true}}"#,
            "",
        ),
        (r#"{}"#, "request-header-provider-model"),
        (
            r#"{"config":{"model":"m"}}"#,
            "request-header-provider-model",
        ),
        (
            r#"{"config":{"provider":"","model":"m"}}"#,
            "request-header-provider-model",
        ),
        (
            r#"{"config":{"provider":"p","model":3}}"#,
            "request-header-provider-model",
        ),
        (
            r#"{"config":{"provider":"p","model":"m","reasoningEffort":""}}"#,
            "request-header-reasoning-effort",
        ),
        (
            r#"{"config":{"provider":"p","model":"m","reasoningEffort":2}}"#,
            "request-header-reasoning-effort",
        ),
        (
            r#"{"config":{"provider":"p","model":"m"},"adapterDefaults":[]}"#,
            "request-header-adapter-defaults",
        ),
        (
            r#"{"config":{"provider":"p","model":"m","temperature":1},"adapterDefaults":{"temperature":true}}"#,
            "request-header-adapter-defaults",
        ),
        (
            r#"{"config":{"provider":"p","model":"m","maxTokens":8},"adapterDefaults":{"maxTokens":false}}"#,
            "request-header-adapter-defaults",
        ),
        (
            r#"{"config":{"provider":"p","model":"m"},"adapterDefaults":{"maxTokens":true}}"#,
            "request-header-adapter-defaults",
        ),
    ];
    for v in 0..=4u8 {
        for (header, code) in cases {
            let want: Vec<&str> = if code.is_empty() { vec![] } else { vec![*code] };
            assert_eq!(header_codes(v, header), want, "v{v} {header}");
        }
        // Independent rules all report.
        assert_eq!(
            header_codes(
                v,
                r#"{"config":{"reasoningEffort":""},"adapterDefaults":7}"#
            ),
            [
                "request-header-provider-model",
                "request-header-reasoning-effort",
                "request-header-adapter-defaults"
            ],
            "v{v}"
        );
    }
}

#[test]
fn c6_header_system_is_retired_from_v3() {
    for system in [r#""be brief""#, r#""""#, "null"] {
        let header = format!(r#"{{"config":{{"provider":"p","model":"m"}},"system":{system}}}"#);
        for v in 0..=2u8 {
            assert_eq!(header_codes(v, &header), Vec::<&str>::new(), "v{v}");
        }
        for v in 3..=4u8 {
            let r = header_event(v, &header);
            assert_eq!(
                r.codes(),
                ["request-header-system-retired"],
                "v{v} {system}"
            );
            assert_eq!(r.status(), Status::Invalid);
        }
    }
}

#[test]
fn c6_is_fatal_even_in_a_crash_tail() {
    for v in 3..=4u8 {
        let mut log = Log::new(v);
        log.turn_start(1);
        log.turn_end(1);
        log.junk("{broken");
        log.turn_start(2);
        log.ev(
            "request/header",
            r#"{"header":{"config":{"provider":"p","model":"m"},"system":"x"},"reason":"initial"}"#,
            "",
        );
        let r = log.scan();
        assert_eq!(
            r.codes(),
            ["request-header-system-retired", "crash-tail"],
            "v{v}"
        );
        assert_eq!(r.status(), Status::Invalid);
    }
}

#[test]
fn c7_empty_tools_or_adapter_defaults_are_refused_from_v3() {
    for header in [
        r#"{"config":{"provider":"p","model":"m"},"tools":[]}"#,
        r#"{"config":{"provider":"p","model":"m"},"adapterDefaults":{}}"#,
    ] {
        for v in 0..=2u8 {
            assert_eq!(header_codes(v, header), Vec::<&str>::new(), "v{v} {header}");
        }
        for v in 3..=4u8 {
            assert_eq!(
                header_codes(v, header),
                ["request-header-empty-optional"],
                "v{v} {header}"
            );
            // A B5 row: a crash tail when nothing committed follows (the committed prefix
            // then ends inside turn 1).
            let mut log = Log::new(v);
            log.turn_start(1);
            log.ev(
                "request/header",
                &format!(r#"{{"header":{header},"reason":"initial"}}"#),
                "",
            );
            assert_eq!(
                log.scan().codes(),
                ["crash-tail", "open-turn-at-end"],
                "v{v} {header}"
            );
        }
    }
}

#[test]
fn v4_tool_defer_loading_must_be_true_when_present() {
    let tools = |defer: &str| {
        format!(
            r#"{{"config":{{"provider":"p","model":"m"}},"tools":[{{"name":"t","description":"d","parameters":{{}}{defer}}},{{"name":"u","description":"d","parameters":{{}}}}]}}"#
        )
    };
    for v in 0..=4u8 {
        assert_eq!(header_codes(v, &tools("")), Vec::<&str>::new());
        assert_eq!(
            header_codes(v, &tools(r#","deferLoading":true"#)),
            Vec::<&str>::new()
        );
        for bad in [
            r#","deferLoading":false"#,
            r#","deferLoading":"true""#,
            r#","deferLoading":null"#,
        ] {
            let want: Vec<&str> = if v == 4 {
                vec!["request-header-defer-loading"]
            } else {
                vec![]
            };
            assert_eq!(header_codes(v, &tools(bad)), want, "v{v} {bad}");
        }
    }
}

// --- embedded streams (§10.1) -----------------------------------------------------------------

#[test]
fn assistant_stream_missing_is_a_warning_from_v2() {
    let with_stream = |v: u8, stream: Option<&str>| {
        let data = assistant_data(v, "a", 1, 1, &[]).replace(r#","stream":[]"#, "");
        let data = match stream {
            Some(s) => format!(
                r#"{},"stream":{s}}}"#,
                data.strip_suffix('}').unwrap_or(&data)
            ),
            None => data,
        };
        one(v, "assistant/message", &data, APPEND)
    };
    let records = r#"[{"type":"text-chunks","time0":0,"index":0,"dt":[],"texts":["a"]},{"type":"reasoning-chunks","time0":0,"index":1,"dt":[0],"texts":["b","c"]},{"type":"tool-call-chunks","time0":0,"index":2,"dt":[],"id":"c","args":["{}"]},{"type":"chunk","time":0,"chunk":{"type":"finish","reason":{"kind":"stop"}}}]"#;
    for v in 0..=1u8 {
        with_stream(v, None).assert_clean();
    }
    for v in 2..=4u8 {
        with_stream(v, Some(records)).assert_clean();
        with_stream(v, Some("[]")).assert_clean();
        for stream in [
            None,
            Some("{}"),
            Some("null"),
            Some(r#"[{"type":"text-delta"}]"#),
            Some("[1]"),
        ] {
            let r = with_stream(v, stream);
            assert_eq!(
                r.graded(),
                [("assistant-stream-missing", Severity::Warning)],
                "v{v} {stream:?}"
            );
            assert_eq!(r.status(), Status::Valid);
        }
        // assistant/attempt too.
        let r = one(v, "assistant/attempt", r#"{"turn":1,"step":1}"#, "");
        assert_eq!(r.codes(), ["assistant-stream-missing"], "v{v}");
        one(
            v,
            "assistant/attempt",
            r#"{"turn":1,"step":1,"stream":[]}"#,
            "",
        )
        .assert_clean();
    }
}

// --- v4 retired tool-result block (§9.2) ---------------------------------------------------

const TR_BLOCK: &str = r#"{"type":"tool-result","toolCallId":"c1","content":[]}"#;

/// Every place §9.2 lists (except `tool/result`, where the block is a V4-draft tell-tale),
/// as (event type, data, extra envelope, where the finding points).
fn retired_block_places() -> Vec<(&'static str, String, &'static str, &'static str)> {
    let chunk = |c: &str| format!(r#"[{{"type":"chunk","time":0,"chunk":{c}}}]"#);
    let asst = |content: &str, stream: &str| {
        format!(
            r#"{{"turn":1,"step":1,"message":{{"id":"a","role":"assistant","content":{content},"source":{{"kind":"model","provider":"p","model":"m"}}}},"stream":{stream}}}"#
        )
    };
    vec![
        (
            "user/message",
            format!(
                r#"{{"id":"u","role":"user","content":[{TR_BLOCK}],"source":{{"kind":"user"}}}}"#
            ),
            APPEND,
            "message.content",
        ),
        (
            "system/message",
            system_data(4, "s", 1, 1).replace(r#"{"type":"text","text":"be brief"}"#, TR_BLOCK),
            APPEND,
            "message.content",
        ),
        (
            "developer/message",
            format!(
                r#"{{"turn":1,"step":1,"message":{{"id":"d","role":"developer","content":[{TR_BLOCK}],"source":{{"kind":"agent-instructions"}}}}}}"#
            ),
            APPEND,
            "message.content",
        ),
        (
            "assistant/message",
            asst(&format!("[{TR_BLOCK}]"), "[]"),
            APPEND,
            "message.content",
        ),
        (
            "assistant/message",
            asst(
                "[]",
                &chunk(r#"{"type":"block-start","index":0,"blockType":"tool-result"}"#),
            ),
            APPEND,
            "data.stream[0].chunk",
        ),
        (
            "assistant/message",
            asst(
                "[]",
                &chunk(&format!(
                    r#"{{"type":"block-end","index":0,"block":{TR_BLOCK}}}"#
                )),
            ),
            APPEND,
            "data.stream[0].chunk",
        ),
        (
            "assistant/attempt",
            format!(
                r#"{{"turn":1,"step":1,"stream":{}}}"#,
                chunk(r#"{"type":"block-start","index":0,"blockType":"tool-result"}"#)
            ),
            "",
            "data.stream[0].chunk",
        ),
        (
            "agent/inbox/spliced",
            format!(
                r#"{{"target":"next-turn","start":0,"inserted":[{{"content":[]}},{{"content":[{TR_BLOCK}],"source":{{"kind":"user"}}}}]}}"#
            ),
            "",
            "data.inserted[1].content",
        ),
        (
            "session/title-llm-request",
            format!(r#"{{"messages":[{{"role":"user","content":[{TR_BLOCK}]}}]}}"#),
            "",
            "data.messages[0].content",
        ),
        (
            "team/message/queued",
            format!(r#"{{"message":{{"content":[{TR_BLOCK}]}}}}"#),
            "",
            "data.message.content",
        ),
        (
            "compaction/summary",
            format!(r#"{{"compactionId":"k","summary":[{TR_BLOCK}]}}"#),
            "",
            "data.summary",
        ),
        (
            "compaction/summary",
            format!(r#"{{"compactionId":"k","summary":[],"rawOutput":[{TR_BLOCK}]}}"#),
            "",
            "data.rawOutput",
        ),
        (
            "tool/ptc-dispatch",
            format!(r#"{{"content":[{TR_BLOCK}]}}"#),
            "",
            "data.content",
        ),
    ]
}

#[test]
fn v4_refuses_a_tool_result_block_in_every_listed_place() {
    for (ty, data, extra, place) in retired_block_places() {
        let r = one(4, ty, &data, extra);
        let found = r.of("retired-tool-result-block");
        assert_eq!(found.len(), 1, "{ty} {place}: {:?}", r.codes());
        assert!(
            found[0].message.contains(place),
            "{ty}: {}",
            found[0].message
        );
        assert_eq!(r.status(), Status::Invalid);
        assert!(!r.has("format-v4-draft"), "{ty} {place}");
        // The same payload is not a v4 rule in v3 (the types exist there, except developer).
        if ty != "developer/message" {
            let data3 = data.replace(
                r#"{"kind":"system-prompt"}"#,
                r#"{"kind":"plugin","plugin":"x"}"#,
            );
            let r3 = one(3, ty, &data3, extra);
            assert!(!r3.has("retired-tool-result-block"), "v3 {ty} {place}");
        }
    }
}

#[test]
fn a_retired_tool_result_block_is_fatal_even_in_a_crash_tail() {
    let mut log = Log::new(4);
    log.turn_start(1);
    log.turn_end(1);
    log.junk("[]");
    log.ev(
        "user/message",
        &format!(r#"{{"id":"u","role":"user","content":[{TR_BLOCK}],"source":{{"kind":"user"}}}}"#),
        APPEND,
    );
    let r = log.scan();
    assert_eq!(r.codes(), ["retired-tool-result-block", "crash-tail"]);
    assert_eq!(r.status(), Status::Invalid);
}

// --- V4 draft (§21.2) -------------------------------------------------------------------------

/// The tell-tales of a V4-draft log, as (event type, data, extra).
fn draft_signals() -> Vec<(&'static str, String, &'static str)> {
    let plugin = r#"{"kind":"plugin","plugin":"compact"}"#;
    vec![
        // (a) a tool/result with role user (the V3 wrapper) …
        (
            "tool/result",
            tool_result_data(3, "r", 1, 1, "c1", "x"),
            APPEND,
        ),
        // … or role tool still holding a tool-result block.
        (
            "tool/result",
            result_with(&format!(
                r#"{{"id":"r","role":"tool","toolCallId":"c1","source":{{"kind":"tool","callId":"c1"}},"content":[{TR_BLOCK}]}}"#
            )),
            APPEND,
        ),
        // (b) a plugin source in a surface message, an inbox insertion or a title request.
        (
            "user/message",
            format!(r#"{{"id":"u","role":"user","content":[],"source":{plugin}}}"#),
            APPEND,
        ),
        (
            "assistant/message",
            assistant_data(4, "a", 1, 1, &[])
                .replace(r#"{"kind":"model","provider":"p","model":"m"}"#, plugin),
            APPEND,
        ),
        (
            "system/message",
            system_data(4, "s", 1, 1).replace(r#"{"kind":"system-prompt"}"#, plugin),
            APPEND,
        ),
        (
            "developer/message",
            format!(
                r#"{{"turn":1,"step":1,"message":{{"id":"d","role":"developer","content":[],"source":{plugin}}}}}"#
            ),
            APPEND,
        ),
        (
            "tool/result",
            result_with(&format!(
                r#"{{"id":"r","role":"tool","toolCallId":"c1","source":{plugin},"content":[]}}"#
            )),
            APPEND,
        ),
        (
            "agent/inbox/spliced",
            format!(
                r#"{{"target":"next-turn","start":0,"inserted":[{{"content":[],"source":{plugin}}}]}}"#
            ),
            "",
        ),
        (
            "session/title-llm-request",
            format!(r#"{{"messages":[{{"role":"user","content":[],"source":{plugin}}}]}}"#),
            "",
        ),
    ]
}

#[test]
fn v4_draft_tell_tales_make_the_log_unsupported() {
    for (ty, data, extra) in draft_signals() {
        let mut log = Log::new(4);
        log.turn_start(1);
        log.step_start(1, 1);
        let at = log.ev(ty, &data, extra);
        let r = log.scan();
        // Only the draft refusal: it takes precedence over the v4 message rules for that
        // event (no role mismatch, retired block or source-kind-plugin), and checking stops.
        assert_eq!(r.codes(), ["format-v4-draft"], "{ty} {data}");
        assert_eq!(r.findings[0].seq, Some(at));
        assert_eq!(r.status(), Status::Unsupported, "{ty}");
        // The same payload is ordinary in v3 (where those are the current shapes).
        if ty != "developer/message" && !data.contains(r#""role":"tool""#) {
            let mut log3 = Log::new(3);
            log3.turn_start(1);
            log3.step_start(1, 1);
            log3.ev(
                ty,
                &data.replace(r#""role":"tool""#, r#""role":"user""#),
                extra,
            );
            let r3 = log3.scan();
            assert!(!r3.has("format-v4-draft"), "v3 {ty}");
            assert_ne!(
                r3.status(),
                Status::Unsupported,
                "v3 {ty}: {:?}",
                r3.codes()
            );
        }
    }
}

#[test]
fn after_a_v4_draft_tell_tale_later_findings_are_muted() {
    let mut log = Log::new(4);
    log.turn_start(2); // turn-number-unexpected: before the tell-tale, so reported
    log.ev(
        "user/message",
        r#"{"id":"u","role":"user","content":[],"source":{"kind":"plugin"}}"#,
        APPEND,
    );
    log.ev("acme/unknown", "{}", ""); // would be unknown-event-type
    log.ev("user/message", r#"{"role":"user"}"#, APPEND); // would be message-id-missing
    log.turn_end(7); // would be turn-end-mismatch
    let r = log.scan();
    assert_eq!(r.codes(), ["turn-number-unexpected", "format-v4-draft"]);
    assert_eq!(r.status(), Status::Unsupported);
    // The summary still describes the whole log.
    assert_eq!(r.scan.events(), 5);
}

#[test]
fn a_v4_draft_outranks_header_errors_for_the_status() {
    let header = crate::build::header_with(4, r#","extra":1"#);
    let mut log = Log::with_header(4, &header);
    log.ev(
        "tool/result",
        &tool_result_data(3, "r", 1, 1, "c1", "x"),
        APPEND,
    );
    let r = log.scan();
    assert_eq!(r.codes(), ["header-unexpected-field", "format-v4-draft"]);
    assert_eq!(r.status(), Status::Unsupported);
}

#[test]
fn third_party_plugin_kinds_are_not_draft_tell_tales() {
    let mut log = Log::new(4);
    log.ev(
        "agent/inbox/spliced",
        r#"{"target":"next-turn","start":0,"inserted":[{"content":[],"source":{"kind":"plugin:acme"}}]}"#,
        "",
    );
    log.ev(
        "user/message",
        r#"{"id":"u","role":"user","content":[],"source":{"kind":"plugin:acme"}}"#,
        APPEND,
    );
    log.scan().assert_clean();
}

#[test]
fn a_malformed_system_message_is_fatal_even_in_a_crash_tail() {
    // §6.2 step 6: unlike other message-shape errors, which a crash tail drops.
    for v in 3..=4u8 {
        let system = system_data(v, "s", 1, 1);
        let broken = if v == 4 {
            system.replace(r#"{"kind":"system-prompt"}"#, r#"{"kind":"user"}"#)
        } else {
            system.replace(
                r#""plugin":"@deepseek-ai/dsh-system-prompt""#,
                r#""plugin":"""#,
            )
        };
        let tail = |data: &str, ty: &str| {
            let mut log = Log::new(v);
            log.turn_start(1);
            log.turn_end(1);
            log.junk("{");
            log.turn_start(2);
            log.step_start(2, 1);
            log.ev(ty, &data.replace(r#""turn":1"#, r#""turn":2"#), APPEND);
            log.scan()
        };
        let r = tail(&broken, "system/message");
        assert_eq!(r.codes(), ["system-source-invalid", "crash-tail"], "v{v}");
        assert_eq!(r.status(), Status::Invalid);
        // A broken user message in the same place is dropped with the tail.
        let r = tail(
            r#"{"role":"user","content":[],"source":{"kind":"user"}}"#,
            "user/message",
        );
        assert_eq!(r.codes(), ["crash-tail"], "v{v}");
        assert_eq!(r.status(), Status::Valid);
    }
}
