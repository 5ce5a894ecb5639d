//! v0 pre-release shapes (§16, §7.3): what the v0 reader refuses, and what it upgrades in
//! memory before any other check. The file is never rewritten.

use std::borrow::Cow;

use super::event::Kind;
use super::json::{Json, Members};
use super::rows::Event;

/// What the v0 reader does with one event.
#[derive(Debug, PartialEq, Eq)]
pub enum Legacy {
    Unchanged,
    /// Upgraded in memory; the label names the legacy shape (for the one warning per kind).
    Normalized(&'static str),
    /// A retired pre-release event the v0 reader refuses (§7.3).
    Retired(String),
    /// Matches a legacy trigger but not its exact shape.
    Malformed(String),
}

/// The id of the message of an earlier event, for legacy tool-result replacements.
pub trait MessageIds {
    fn message_id(&self, seq: u64) -> Option<String>;
}

fn exact_keys(v: &Json<'_>, keys: &[&str]) -> bool {
    let mut have = v.keys();
    have.sort_unstable();
    let mut want = keys.to_vec();
    want.sort_unstable();
    v.as_obj().is_some_and(|m| m.len() == keys.len()) && have == want
}

fn s<'a>(text: &'a str) -> Json<'a> {
    Json::Str(text.into())
}

fn obj<'a>(members: Vec<(&'a str, Json<'a>)>) -> Json<'a> {
    Json::Obj(
        members
            .into_iter()
            .map(|(k, v)| (Cow::Borrowed(k), v))
            .collect(),
    )
}

fn positive_turn(v: Option<&Json<'_>>) -> bool {
    v.and_then(Json::safe_int).is_some_and(|t| t >= 1)
}

/// `data` is exactly `{turn, KEY}` with turn ≥ 1 and a `KEY.kind` that `kind` reads as a
/// string (the v0 `turn/start` trigger and `turn/end` reason).
fn turn_and_kind<'j, 'a>(
    data: &'j Json<'a>,
    key: &str,
    kind: impl FnOnce(&'j Json<'a>) -> Option<&'j str>,
) -> bool {
    exact_keys(data, &["turn", key])
        && positive_turn(data.get("turn"))
        && data
            .get(key)
            .and_then(|t| t.get("kind"))
            .and_then(kind)
            .is_some()
}

fn is_llm_failure(v: &Json<'_>) -> bool {
    v.is_obj()
        && v.get("message").and_then(Json::as_str).is_some()
        && v.get("code").and_then(Json::as_str).is_some()
}

/// Apply the v0 reader's legacy handling to one event.
pub fn normalize(ev: &mut Event<'_>, session_id: &str, ids: &dyn MessageIds) -> Legacy {
    // Minted only for the shapes that need an id: most events never do.
    let seq = ev.seq;
    let minted = || format!("legacy-message:{session_id}:{seq}");
    match (ev.kind, ev.ty.as_ref()) {
        (_, "request/header-delta" | "mode/set") => {
            return Legacy::Retired(format!(
                "session contains unsupported legacy {} event at seq {}",
                ev.ty, ev.seq
            ));
        }
        (Kind::RequestHeader, _)
            if ev.data.get("reason").and_then(Json::as_str) == Some("fallback") =>
        {
            return Legacy::Retired(format!(
                "session contains unsupported legacy request/header (reason \"fallback\") event at seq {}",
                ev.seq
            ));
        }
        (_, "compact/start" | "compact/summary" | "compact/end" | "compact/prune") => {
            let renamed = format!("compaction/{}", &ev.ty["compact/".len()..]);
            ev.set_type(Cow::Owned(renamed));
            return normalized(ev, "compact/*");
        }
        (Kind::TurnStart, _) if ev.data.has("trigger") => {
            if !turn_and_kind(&ev.data, "trigger", Json::as_text) {
                return malformed(
                    ev,
                    "data must be exactly {turn, trigger} with turn ≥ 1 and a trigger.kind",
                );
            }
            ev.data.take("trigger");
            return normalized(ev, "turn/start.trigger");
        }
        (Kind::TurnEnd, _) => return turn_end(ev),
        (_, "steering/message") => {
            let data = std::mem::replace(&mut ev.data, Json::Null);
            let mut data = data;
            if exact_keys(&data, &["turn", "message"]) {
                ev.data = data.take("message").unwrap_or(Json::Null);
            } else if exact_keys(&data, &["turn", "content", "source"]) {
                let content = data.take("content").unwrap_or(Json::Null);
                let source = data.take("source").unwrap_or(Json::Null);
                ev.data = Json::Obj(
                    vec![
                        (Cow::Borrowed("content"), content),
                        (Cow::Borrowed("source"), source),
                        (Cow::Borrowed("id"), Json::Str(minted().into())),
                        (Cow::Borrowed("role"), s("user")),
                    ]
                    .into(),
                );
            } else {
                ev.data = data;
                return malformed(
                    ev,
                    "data must be exactly {turn, message} or {turn, content, source}",
                );
            }
            ev.set_type(Cow::Borrowed(Kind::UserMessage.name()));
            return normalized(ev, "steering/message");
        }
        (Kind::UserMessage, _) => {
            let d = &ev.data;
            if d.is_obj()
                && !d.has("id")
                && !d.has("role")
                && !d.has("message")
                && d.has("content")
                && d.has("source")
            {
                if let Json::Obj(m) = &mut ev.data {
                    let m = m.to_mut();
                    m.push((Cow::Borrowed("id"), Json::Str(minted().into())));
                    m.push((Cow::Borrowed("role"), s("user")));
                }
                return normalized(ev, "user/message without id/role");
            }
        }
        (Kind::AssistantMessage, _) => {
            let d = &ev.data;
            if d.is_obj() && !d.has("message") && d.has("content") && d.has("provenance") {
                let content = ev.data.take("content").unwrap_or(Json::Null);
                let provenance = ev.data.take("provenance").unwrap_or(Json::Null);
                let mut source: Members<'_> = match provenance {
                    Json::Obj(m) => m.into_vec(),
                    _ => return malformed(ev, "provenance must be an object"),
                };
                source.retain(|(k, _)| k != "kind");
                source.push((Cow::Borrowed("kind"), s("model")));
                let message = Json::Obj(
                    vec![
                        (Cow::Borrowed("id"), Json::Str(minted().into())),
                        (Cow::Borrowed("role"), s("assistant")),
                        (Cow::Borrowed("content"), content),
                        (Cow::Borrowed("source"), Json::Obj(source.into())),
                    ]
                    .into(),
                );
                if let Json::Obj(m) = &mut ev.data {
                    m.to_mut().push((Cow::Borrowed("message"), message));
                }
                return normalized(ev, "assistant/message {content, provenance}");
            }
        }
        (Kind::ToolResult, _) => {
            let d = &ev.data;
            if d.is_obj()
                && !d.has("message")
                && d.has("callId")
                && d.has("content")
                && d.has("isError")
            {
                let replaced = ev
                    .surface_op
                    .as_ref()
                    .and_then(|op| op.get("start"))
                    .and_then(Json::safe_uint);
                let id = match replaced {
                    Some(start) => ids.message_id(start).unwrap_or_else(minted),
                    None => minted(),
                };
                let call_id = ev.data.take("callId").unwrap_or(Json::Null);
                let content = ev.data.take("content").unwrap_or(Json::Null);
                let is_error = ev.data.take("isError").unwrap_or(Json::Null);
                let message = obj(vec![
                    ("id", Json::Str(id.into())),
                    ("role", s("user")),
                    (
                        "content",
                        Json::Arr(
                            vec![obj(vec![
                                ("type", s("tool-result")),
                                ("toolCallId", call_id.clone()),
                                ("content", content),
                                ("isError", is_error),
                            ])]
                            .into(),
                        ),
                    ),
                    (
                        "source",
                        obj(vec![("kind", s("tool")), ("callId", call_id)]),
                    ),
                ]);
                if let Json::Obj(m) = &mut ev.data {
                    m.to_mut().push((Cow::Borrowed("message"), message));
                }
                return normalized(ev, "tool/result {callId, content, isError}");
            }
        }
        _ => {}
    }
    Legacy::Unchanged
}

/// The event was upgraded in place to today's shape (`what`: from which old one).
fn normalized(ev: &mut Event<'_>, what: &'static str) -> Legacy {
    ev.normalized = true;
    Legacy::Normalized(what)
}

fn malformed(ev: &Event<'_>, why: &str) -> Legacy {
    Legacy::Malformed(format!(
        "session contains malformed pre-react-loop {} at seq {}: {why}",
        ev.ty, ev.seq
    ))
}

/// Every v0 `turn/end` passes through the legacy reader: a shape check plus upgrades.
fn turn_end(ev: &mut Event<'_>) -> Legacy {
    if !turn_and_kind(&ev.data, "reason", Json::as_str) {
        return malformed(
            ev,
            "data must be exactly {turn, reason} with turn ≥ 1 and a string reason.kind",
        );
    }
    let reason = ev.data.get("reason").cloned().unwrap_or(Json::Null);
    let kind = reason
        .get("kind")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_owned();
    let only_kind = exact_keys(&reason, &["kind"]);
    let upgraded = match kind.as_str() {
        "completed" | "blocked" | "max-tokens" | "interrupted" => {
            if !only_kind {
                return malformed(
                    ev,
                    "a completed/blocked/max-tokens/interrupted reason must be exactly {kind}",
                );
            }
            None
        }
        "aborted" if only_kind => Some(obj(vec![
            ("kind", s("aborted")),
            ("reason", obj(vec![("kind", s("legacy"))])),
        ])),
        "disposed" => {
            if !only_kind {
                return malformed(ev, "a disposed reason must be exactly {kind}");
            }
            Some(obj(vec![
                ("kind", s("aborted")),
                ("reason", obj(vec![("kind", s("disposed"))])),
            ]))
        }
        "error" if !reason.has("error") => {
            let step_ok = reason.get("step").and_then(Json::safe_uint).is_some();
            if step_ok && exact_keys(&reason, &["kind", "step", "failure"]) {
                let failure = reason.get("failure").cloned().unwrap_or(Json::Null);
                if !is_llm_failure(&failure) {
                    return malformed(
                        ev,
                        "reason.failure must be an LlmFailure {message, code, …}",
                    );
                }
                Some(obj(vec![("kind", s("error")), ("error", failure)]))
            } else if step_ok
                && reason.get("message").and_then(Json::as_str).is_some()
                && (exact_keys(&reason, &["kind", "step", "message"])
                    || (exact_keys(&reason, &["kind", "step", "message", "code"])
                        && reason.get("code").and_then(Json::as_str).is_some()))
            {
                let message = reason.get("message").cloned().unwrap_or(Json::Null);
                let code = reason.get("code").cloned().unwrap_or_else(|| s("UNKNOWN"));
                Some(obj(vec![
                    ("kind", s("error")),
                    ("error", obj(vec![("message", message), ("code", code)])),
                ]))
            } else {
                return malformed(
                    ev,
                    "an error reason without `error` needs `step` and either `failure` or `message` (+ optional `code`)",
                );
            }
        }
        _ => None,
    };
    match upgraded {
        None => Legacy::Unchanged,
        Some(r) => {
            let r = r.into_owned();
            if let Some(slot) = ev.data.get_mut("reason") {
                *slot = r;
            }
            normalized(ev, "turn/end reason")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::dialect::DIALECTS;
    use crate::log::finding::Pos;
    use crate::log::rows::{Row, decode};

    struct NoIds;
    impl MessageIds for NoIds {
        fn message_id(&self, seq: u64) -> Option<String> {
            (seq == 4).then(|| "orig-4".to_owned())
        }
    }

    fn run(line: &str) -> (Legacy, String, String) {
        let Row::Events(mut evs, _) = decode(line.as_bytes(), Pos::default(), &DIALECTS[0]) else {
            panic!()
        };
        let mut ev = evs.remove(0).event.unwrap();
        let out = normalize(&mut ev, "S", &NoIds);
        (out, ev.ty.to_string(), ev.data.to_js_string())
    }

    #[test]
    fn turn_start_trigger_is_dropped() {
        let (l, _, d) = run(
            r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1,"trigger":{"kind":"message"}}}"#,
        );
        assert_eq!(l, Legacy::Normalized("turn/start.trigger"));
        assert_eq!(d, r#"{"turn":1}"#);
        let (l, _, _) =
            run(r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1,"trigger":{}}}"#);
        assert!(matches!(l, Legacy::Malformed(_)));
    }

    #[test]
    fn turn_end_reasons_are_checked_and_upgraded() {
        let case = |reason: &str| {
            run(&format!(
                r#"{{"type":"turn/end","seq":3,"time":0,"data":{{"turn":1,"reason":{reason}}}}}"#
            ))
        };
        assert_eq!(case(r#"{"kind":"completed"}"#).0, Legacy::Unchanged);
        assert!(matches!(
            case(r#"{"kind":"completed","x":1}"#).0,
            Legacy::Malformed(_)
        ));
        assert_eq!(
            case(r#"{"kind":"aborted"}"#).2,
            r#"{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"legacy"}}}"#
        );
        assert_eq!(
            case(r#"{"kind":"disposed"}"#).2,
            r#"{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"disposed"}}}"#
        );
        assert_eq!(
            case(r#"{"kind":"error","step":1,"message":"boom"}"#).2,
            r#"{"turn":1,"reason":{"kind":"error","error":{"message":"boom","code":"UNKNOWN"}}}"#
        );
        assert_eq!(
            case(r#"{"kind":"error","step":1,"failure":{"message":"m","code":"C"}}"#).2,
            r#"{"turn":1,"reason":{"kind":"error","error":{"message":"m","code":"C"}}}"#
        );
        assert!(matches!(
            case(r#"{"kind":"error","message":"no step"}"#).0,
            Legacy::Malformed(_)
        ));
        assert_eq!(
            case(r#"{"kind":"error","error":{"message":"m","code":"C"}}"#).0,
            Legacy::Unchanged
        );
        assert!(matches!(
            run(r#"{"type":"turn/end","seq":3,"time":0,"data":{"turn":0,"reason":{"kind":"completed"}}}"#).0,
            Legacy::Malformed(_)
        ));
    }

    #[test]
    fn message_shapes_are_upgraded_with_minted_ids() {
        let (_, _, d) = run(
            r#"{"type":"user/message","seq":7,"time":0,"data":{"content":[],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        );
        assert_eq!(
            d,
            r#"{"content":[],"source":{"kind":"user"},"id":"legacy-message:S:7","role":"user"}"#
        );
        let (_, _, d) = run(
            r#"{"type":"assistant/message","seq":8,"time":0,"data":{"turn":1,"step":1,"content":[],"provenance":{"provider":"p","model":"m"},"usage":{}},"surfaceOp":"append"}"#,
        );
        assert_eq!(
            d,
            r#"{"turn":1,"step":1,"usage":{},"message":{"id":"legacy-message:S:8","role":"assistant","content":[],"source":{"provider":"p","model":"m","kind":"model"}}}"#
        );
        let (_, _, d) = run(
            r#"{"type":"tool/result","seq":9,"time":0,"data":{"turn":1,"step":1,"callId":"c","content":[],"isError":false},"surfaceOp":"append"}"#,
        );
        assert_eq!(
            d,
            r#"{"turn":1,"step":1,"message":{"id":"legacy-message:S:9","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[],"isError":false}],"source":{"kind":"tool","callId":"c"}}}"#
        );
        let (_, _, d) = run(
            r#"{"type":"tool/result","seq":9,"time":0,"data":{"callId":"c","content":[],"isError":false},"surfaceOp":{"op":"replace","start":4,"end":4}}"#,
        );
        assert!(d.contains(r#""id":"orig-4""#), "{d}");
        let (l, t, d) = run(
            r#"{"type":"steering/message","seq":2,"time":0,"data":{"turn":1,"content":[],"source":{"kind":"user"}}}"#,
        );
        assert_eq!(
            (l, t.as_str()),
            (Legacy::Normalized("steering/message"), "user/message")
        );
        assert_eq!(
            d,
            r#"{"content":[],"source":{"kind":"user"},"id":"legacy-message:S:2","role":"user"}"#
        );
    }

    #[test]
    fn retired_legacy_events_and_compact_renames() {
        assert!(matches!(
            run(r#"{"type":"mode/set","seq":0,"time":0,"data":{}}"#).0,
            Legacy::Retired(_)
        ));
        assert!(matches!(
            run(r#"{"type":"request/header","seq":0,"time":0,"data":{"reason":"fallback"}}"#).0,
            Legacy::Retired(_)
        ));
        let (l, t, _) = run(r#"{"type":"compact/start","seq":0,"time":0,"data":{}}"#);
        assert_eq!(
            (l, t.as_str()),
            (Legacy::Normalized("compact/*"), "compaction/start")
        );
    }
}
