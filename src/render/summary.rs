//! One short line that says what an event is about (`dshs show`): the first text of a
//! message, a tool call's name and arguments, a result's outcome, a turn's end reason, a
//! compaction's span, a request's model. Everything comes from the log, so the line is
//! clipped, its whitespace runs are collapsed and it is escaped before it is returned.

use std::fmt::Write;

use dshs::log::event::Kind;
use dshs::log::json::Json;
use dshs::log::rows::Event;
use dshs::log::text::clip;

use super::escape;

/// Longest quoted text in a summary, in characters.
const TEXT: usize = 72;
/// Longest JSON preview (tool arguments, unknown payloads).
const PREVIEW: usize = 60;

/// The summary of one event, safe for a terminal.
pub fn event(ev: &Event<'_>) -> String {
    let d = &ev.data;
    let s = match ev.kind {
        Kind::UserMessage
        | Kind::SystemMessage
        | Kind::DeveloperMessage
        | Kind::AssistantMessage => message(ev),
        Kind::ToolResult => tool_result(d),
        Kind::ToolCall => call(
            str_at(d, "name").unwrap_or("?"),
            d.get("arguments"),
            str_at(d, "callId"),
        ),
        Kind::TurnStart => format!("turn {} started", num_at(d, "turn")),
        Kind::TurnEnd => format!(
            "turn {} {}",
            num_at(d, "turn"),
            d.get("reason")
                .map_or_else(|| "(no reason)".into(), end_reason)
        ),
        Kind::StepStart => format!("step {}.{} started", num_at(d, "turn"), num_at(d, "step")),
        Kind::StepEnd => format!("step {}.{} ended", num_at(d, "turn"), num_at(d, "step")),
        Kind::AssistantChunk => d.get("chunk").map_or_else(|| preview(d), chunk),
        Kind::AssistantAttempt => attempt(d),
        Kind::RequestHeader => request_header(d),
        Kind::RequestContext => request_context(d),
        Kind::CompactionStart => {
            let mut s = format!("compaction {}", text_or(d.get("compactionId"), "?"));
            if let Some(t) = d.get("turn").and_then(Json::safe_int) {
                let _ = write!(s, " in turn {t}");
            }
            s
        }
        Kind::CompactionSummary => {
            let mut s = span(d);
            if let Some(text) = d.get("summary").and_then(first_text) {
                let _ = write!(s, ": {}", quote(text));
            }
            s
        }
        Kind::CompactionPrune => span(d),
        Kind::CompactionEnd => match d.get("error") {
            Some(e) => format!("failed: {}", text_or(Some(e), "?")),
            None => "done".into(),
        },
        Kind::SessionTitle => quote(str_at(d, "title").unwrap_or_default()),
        Kind::SessionEndSeed => {
            if d.get("inherited") == Some(&Json::Bool(true)) {
                "end of the inherited seed".into()
            } else {
                "end of seed".into()
            }
        }
        Kind::TodoWrite => todos(d),
        Kind::AgentInboxSpliced => {
            let inserted = d.get("inserted").and_then(Json::as_arr).unwrap_or_default();
            let mut s = format!(
                "{} inserted for {}",
                inserted.len(),
                text_or(d.get("target"), "?")
            );
            if let Some(n) = d.get("removedCount").and_then(Json::safe_int) {
                let _ = write!(s, ", {n} removed");
            }
            if let Some(text) = inserted
                .first()
                .and_then(|m| m.get("content"))
                .and_then(first_text)
            {
                let _ = write!(s, ": {}", quote(text));
            }
            s
        }
        Kind::HookInvoked | Kind::HookResult => {
            let mut parts = vec![];
            for key in ["point", "handlerId", "decision"] {
                if let Some(v) = str_at(d, key) {
                    parts.push(flat(v, 40));
                }
            }
            if parts.is_empty() {
                preview(d)
            } else {
                parts.join(" ")
            }
        }
        _ => preview(d),
    };
    escape(&s).into_owned()
}

/// The message of a message event: its first text, tool calls, other blocks, source.
fn message(ev: &Event<'_>) -> String {
    let Some(m) = ev.message() else {
        return "(no message)".into();
    };
    let mut parts: Vec<String> = Vec::new();
    let blocks = m.get("content").and_then(Json::as_arr).unwrap_or_default();
    if let Some(text) = blocks
        .iter()
        .find(|b| block_type(b) == Some("text"))
        .and_then(|b| str_at(b, "text"))
    {
        parts.push(quote(text));
    } else if let Some(text) = blocks
        .iter()
        .find(|b| block_type(b) == Some("reasoning"))
        .and_then(|b| str_at(b, "text"))
    {
        parts.push(format!("(reasoning) {}", quote(text)));
    }
    let mut calls = 0;
    let mut others: Vec<String> = Vec::new();
    for b in blocks {
        match block_type(b) {
            Some("text" | "reasoning") => {}
            Some("tool-call") => {
                calls += 1;
                if calls <= 2 {
                    parts.push(call(
                        str_at(b, "name").unwrap_or("?"),
                        b.get("arguments"),
                        None,
                    ));
                }
            }
            Some(t @ ("tool-addition" | "tool-removal")) => others.push(format!(
                "{}{}",
                if t == "tool-addition" { "+" } else { "-" },
                flat(str_at(b, "toolName").unwrap_or("?"), 40)
            )),
            Some(t) => others.push(format!("[{}]", flat(t, 24))),
            None => others.push("[?]".into()),
        }
    }
    if calls > 2 {
        parts.push(format!("… {} tool calls in all", calls));
    }
    if !others.is_empty() {
        let n = others.len();
        others.truncate(4);
        if n > 4 {
            others.push(format!("… {n} blocks"));
        }
        parts.push(others.join(" "));
    }
    if blocks.is_empty() {
        parts.push("(empty)".into());
    }
    let mut s = parts.join(" ");
    if let Some(kind) = m
        .get("source")
        .and_then(|src| src.get("kind"))
        .and_then(Json::as_str)
        .filter(|k| !matches!(*k, "user" | "model" | "tool" | "system-prompt"))
    {
        let _ = write!(s, " ({}", flat(kind, 32));
        if let Some(plugin) = m
            .get("source")
            .and_then(|src| src.get("plugin"))
            .and_then(Json::as_str)
        {
            let _ = write!(s, " {}", flat(plugin, 40));
        }
        s.push(')');
    }
    if ev.kind == Kind::AssistantMessage {
        if let Some(u) = ev.data.get("usage") {
            let _ = write!(s, " · {}", usage(u));
        }
        if ev.data.get("interrupted") == Some(&Json::Bool(true)) {
            s.push_str(" (interrupted)");
        }
    }
    s
}

/// `ok call_1: "text"` / `error E_CODE call_1: "text"`, for both result shapes (v0–v3 wrapped
/// in a tool-result block, v4 role `tool`).
fn tool_result(d: &Json<'_>) -> String {
    let m = d.get("message");
    let wrapped = m
        .and_then(|m| m.get("content"))
        .and_then(Json::as_arr)
        .and_then(|c| c.first())
        .filter(|b| block_type(b) == Some("tool-result"));
    let flagged = m.and_then(|m| m.get("isError")) == Some(&Json::Bool(true))
        || wrapped.and_then(|b| b.get("isError")) == Some(&Json::Bool(true));
    let error = d.get("error");
    let mut s = if error.is_some() || flagged {
        let code = error
            .and_then(|e| e.get("code").or_else(|| e.get("name")))
            .and_then(Json::as_str);
        match code {
            Some(c) => format!("error {}", flat(c, 40)),
            None => "error".into(),
        }
    } else {
        "ok".into()
    };
    let id = m
        .and_then(|m| m.get("toolCallId"))
        .or_else(|| wrapped.and_then(|b| b.get("toolCallId")))
        .or_else(|| {
            m.and_then(|m| m.get("source"))
                .and_then(|s| s.get("callId"))
        })
        .and_then(Json::as_str);
    if let Some(id) = id {
        let _ = write!(s, " {}", flat(id, 40));
    }
    let content = match wrapped {
        Some(b) => b.get("content"),
        None => m.and_then(|m| m.get("content")),
    };
    if let Some(text) = content.and_then(first_text) {
        let _ = write!(s, ": {}", quote(text));
    }
    s
}

/// `name {args…}` (and the call id for `tool/call`).
fn call(name: &str, arguments: Option<&Json<'_>>, id: Option<&str>) -> String {
    let args = match arguments {
        Some(Json::Str(raw)) => flat(raw, PREVIEW),
        Some(other) => flat(&other.to_js_string(), PREVIEW),
        None => String::new(),
    };
    let mut s = format!("→ {}", flat(name, 40));
    if !args.is_empty() {
        let _ = write!(s, " {args}");
    }
    if let Some(id) = id {
        let _ = write!(s, " ({})", flat(id, 40));
    }
    s
}

fn end_reason(r: &Json<'_>) -> String {
    let kind = str_at(r, "kind").unwrap_or("?");
    match kind {
        "aborted" => match r.get("reason") {
            Some(why) => format!("aborted ({})", text_or(why.get("kind"), "?")),
            None => "aborted".into(),
        },
        "error" => match r.get("error") {
            Some(e) => format!("error: {}", failure(e)),
            None => "error".into(),
        },
        k => flat(k, 40),
    }
}

/// An `LlmFailure`: `CODE: message`.
fn failure(e: &Json<'_>) -> String {
    match (str_at(e, "code"), str_at(e, "message")) {
        (Some(c), Some(m)) => format!("{}: {}", flat(c, 40), flat(m, TEXT)),
        (Some(c), None) => flat(c, 40),
        (None, Some(m)) => flat(m, TEXT),
        (None, None) => preview(e),
    }
}

/// A v0/v1 stream chunk.
fn chunk(c: &Json<'_>) -> String {
    let ty = str_at(c, "type").unwrap_or("?");
    let index = c.get("index").and_then(Json::safe_int);
    let at = index.map_or_else(String::new, |i| format!(" #{i}"));
    match ty {
        "text-delta" | "reasoning-delta" => {
            format!(
                "{ty}{at} {}",
                quote_delta(str_at(c, "text").unwrap_or_default())
            )
        }
        "tool-call-delta" => {
            let mut s = format!("{ty}{at}");
            if let Some(n) = str_at(c, "name") {
                let _ = write!(s, " {}", flat(n, 40));
            }
            let _ = write!(
                s,
                " {}",
                quote_delta(str_at(c, "argumentsDelta").unwrap_or_default())
            );
            s
        }
        "block-start" => format!("{ty}{at} {}", text_or(c.get("blockType"), "?")),
        "block-end" => {
            let block = c.get("block");
            let mut s = format!(
                "{ty}{at} {}",
                text_or(block.and_then(|b| b.get("type")), "?")
            );
            if let Some(t) = block.and_then(|b| str_at(b, "text")) {
                let _ = write!(s, " {}", quote(t));
            } else if let Some(n) = block.and_then(|b| str_at(b, "name")) {
                let _ = write!(s, " {}", flat(n, 40));
            }
            s
        }
        "usage" => format!("usage {}", c.get("usage").map_or_else(String::new, usage)),
        "finish" => format!(
            "finish {}",
            c.get("reason").map_or_else(|| "?".into(), finish_reason)
        ),
        other => format!("{}{at}", flat(other, 40)),
    }
}

fn finish_reason(r: &Json<'_>) -> String {
    let kind = str_at(r, "kind").unwrap_or("?");
    match r.get("failure") {
        Some(f) if matches!(kind, "error" | "aborted") => format!("{kind}: {}", failure(f)),
        _ => flat(kind, 40),
    }
}

/// An `assistant/attempt` (v2+): how its stream finished.
fn attempt(d: &Json<'_>) -> String {
    let stream = d.get("stream").and_then(Json::as_arr).unwrap_or_default();
    let finish = stream.iter().rev().find_map(|r| {
        let c = r.get("chunk")?;
        (str_at(c, "type") == Some("finish")).then_some(c)
    });
    match finish.and_then(|c| c.get("reason")) {
        Some(reason) => format!("attempt finished {}", finish_reason(reason)),
        None => format!(
            "attempt, {} stream record{}",
            stream.len(),
            if stream.len() == 1 { "" } else { "s" }
        ),
    }
}

fn request_header(d: &Json<'_>) -> String {
    let h = d.get("header");
    let config = h.and_then(|h| h.get("config"));
    let mut s = model(config);
    if let Some(r) = str_at(d, "reason") {
        let _ = write!(s, " ({})", flat(r, 24));
    }
    if let Some(tools) = h.and_then(|h| h.get("tools")).and_then(Json::as_arr) {
        let _ = write!(
            s,
            ", {} tool{}",
            tools.len(),
            if tools.len() == 1 { "" } else { "s" }
        );
    }
    if let Some(effort) = config.and_then(|c| str_at(c, "reasoningEffort")) {
        let _ = write!(s, ", effort {}", flat(effort, 16));
    }
    s
}

fn request_context(d: &Json<'_>) -> String {
    let mut s = model(Some(d));
    if let Some(w) = d.get("contextWindow").and_then(Json::safe_int) {
        let _ = write!(s, ", window {w}");
    }
    s
}

/// `provider/model` of an object with those keys.
fn model(o: Option<&Json<'_>>) -> String {
    let get = |k| {
        o.and_then(|o| str_at(o, k))
            .map_or("?".into(), |v| flat(v, 40))
    };
    format!("{}/{}", get("provider"), get("model"))
}

/// The span of a compaction summary or prune.
fn span(d: &Json<'_>) -> String {
    let range = d.get("shadowedRange");
    let end = |k| {
        range
            .and_then(|r| r.get(k))
            .and_then(Json::safe_int)
            .map_or("?".into(), |v| v.to_string())
    };
    let mut s = format!("span {}..{}", end("start"), end("end"));
    if let Some(n) = d.get("shadowedSeqs").and_then(Json::as_arr) {
        let _ = write!(
            s,
            ", {} node{}",
            n.len(),
            if n.len() == 1 { "" } else { "s" }
        );
    }
    if let Some(t) = d.get("shadowedTokenCount").and_then(Json::safe_int) {
        let _ = write!(s, ", {t} tokens");
    }
    s
}

fn todos(d: &Json<'_>) -> String {
    let list = d.get("todos").and_then(Json::as_arr).unwrap_or_default();
    let count = |st: &str| {
        list.iter()
            .filter(|t| str_at(t, "status") == Some(st))
            .count()
    };
    format!(
        "{} todo{}: {} completed, {} in progress, {} pending",
        list.len(),
        if list.len() == 1 { "" } else { "s" },
        count("completed"),
        count("in_progress"),
        count("pending")
    )
}

/// Token usage as `12 in / 3 out` plus whatever cache and reasoning counts are present.
pub fn usage(u: &Json<'_>) -> String {
    let n = |k| u.get(k).and_then(Json::safe_int);
    let mut s = format!(
        "{} in / {} out",
        n("inputTokens").map_or("?".into(), |v| v.to_string()),
        n("outputTokens").map_or("?".into(), |v| v.to_string())
    );
    for (key, label) in [
        ("cacheReadTokens", "cache read"),
        ("cacheWriteTokens", "cache write"),
        ("reasoningTokens", "reasoning"),
    ] {
        if let Some(v) = n(key).filter(|v| *v != 0) {
            let _ = write!(s, ", {v} {label}");
        }
    }
    s
}

fn block_type<'j>(b: &'j Json<'_>) -> Option<&'j str> {
    str_at(b, "type")
}

fn str_at<'j>(o: &'j Json<'_>, key: &str) -> Option<&'j str> {
    o.get(key).and_then(Json::as_str)
}

fn num_at(o: &Json<'_>, key: &str) -> String {
    match o.get(key) {
        Some(v) => v
            .safe_int()
            .map_or_else(|| flat(&v.to_js_string(), 16), |n| n.to_string()),
        None => "?".into(),
    }
}

/// A string value, or the JSON of anything else.
fn text_or(v: Option<&Json<'_>>, missing: &str) -> String {
    match v {
        Some(Json::Str(s)) => flat(s, 48),
        Some(other) => flat(&other.to_js_string(), 48),
        None => missing.into(),
    }
}

/// The first `text` block of a content array (or a plain string).
fn first_text<'j>(content: &'j Json<'_>) -> Option<&'j str> {
    match content {
        Json::Str(s) => Some(s),
        Json::Arr(blocks) => blocks
            .iter()
            .find(|b| block_type(b) == Some("text"))
            .and_then(|b| str_at(b, "text")),
        _ => None,
    }
}

fn preview(v: &Json<'_>) -> String {
    flat(&v.to_js_string(), PREVIEW)
}

fn quote(text: &str) -> String {
    format!("\"{}\"", flat(text, TEXT))
}

/// A stream delta keeps its edge spaces: they are part of the text it adds.
fn quote_delta(text: &str) -> String {
    format!("\"{}\"", squeeze(text, TEXT, false))
}

/// Whitespace runs (newlines included) become one space, ends trimmed; then at most `max`
/// characters.
fn flat(text: &str, max: usize) -> String {
    squeeze(text, max, true)
}

fn squeeze(text: &str, max: usize, trim: bool) -> String {
    let text = if trim { text.trim() } else { text };
    let mut out = String::with_capacity(text.len().min(max * 4));
    let mut space = false;
    let mut chars = 0;
    for c in text.chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space {
            out.push(' ');
            chars += 1;
            space = false;
        }
        out.push(c);
        chars += 1;
        if chars > max {
            break;
        }
    }
    if space && chars <= max {
        out.push(' ');
    }
    clip(&out, max).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dshs::log::finding::Pos;
    use std::borrow::Cow;

    fn ev<'a>(ty: &'a str, data: &'a str) -> Event<'a> {
        Event {
            pos: Pos::default(),
            seq: 0,
            time: 0,
            kind: dshs::log::event::Kind::of(ty),
            ty: Cow::Borrowed(ty),
            data: dshs::log::json::parse(data.as_bytes()).unwrap(),
            surface_op: None,
            source_seqs: None,
            ignorable: false,
            packed: false,
            normalized: false,
            result_digest: None,
            line: None,
        }
    }

    #[test]
    fn messages_show_first_text_calls_and_source() {
        let e = ev(
            "user/message",
            r#"{"id":"u","role":"user","content":[{"type":"text","text":"  hello\n\n  world "}],"source":{"kind":"compact-basic"}}"#,
        );
        assert_eq!(event(&e), r#""hello world" (compact-basic)"#);
        let e = ev(
            "assistant/message",
            r#"{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"reasoning","text":"hmm"},{"type":"tool-call","id":"c1","name":"bash","arguments":"{\"command\":\"ls\"}"}],"source":{"kind":"model"}},"usage":{"inputTokens":20,"outputTokens":4,"cacheReadTokens":0,"reasoningTokens":3}}"#,
        );
        assert_eq!(
            event(&e),
            r#"(reasoning) "hmm" → bash {"command":"ls"} · 20 in / 4 out, 3 reasoning"#
        );
        let e = ev(
            "assistant/message",
            r#"{"message":{"role":"assistant","content":[]}}"#,
        );
        assert_eq!(event(&e), "(empty)");
    }

    #[test]
    fn tool_results_in_both_shapes() {
        let v0 = ev(
            "tool/result",
            r#"{"message":{"role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","isError":true,"content":[{"type":"text","text":"denied"}]}]}}"#,
        );
        assert_eq!(event(&v0), r#"error c1: "denied""#);
        let v4 = ev(
            "tool/result",
            r#"{"message":{"role":"tool","toolCallId":"c2","content":[{"type":"text","text":"alpha\n"}],"isError":false},"error":{"name":"X","code":"TOOL_NOT_STARTED"}}"#,
        );
        assert_eq!(event(&v4), r#"error TOOL_NOT_STARTED c2: "alpha""#);
        let ok = ev(
            "tool/result",
            r#"{"message":{"role":"tool","toolCallId":"c3","content":[]}}"#,
        );
        assert_eq!(event(&ok), "ok c3");
    }

    #[test]
    fn stream_deltas_keep_their_edge_spaces() {
        let e = ev(
            "assistant/chunk",
            r#"{"chunk":{"type":"text-delta","index":1,"text":" files\n"}}"#,
        );
        assert_eq!(event(&e), r#"text-delta #1 " files ""#);
    }

    #[test]
    fn lifecycle_and_compaction_events() {
        assert_eq!(
            event(&ev(
                "turn/end",
                r#"{"turn":2,"reason":{"kind":"aborted","reason":{"kind":"user"}}}"#
            )),
            "turn 2 aborted (user)"
        );
        assert_eq!(
            event(&ev(
                "turn/end",
                r#"{"turn":1,"reason":{"kind":"error","error":{"message":"boom","code":"E"}}}"#
            )),
            "turn 1 error: E: boom"
        );
        assert_eq!(
            event(&ev(
                "compaction/summary",
                r#"{"summary":[{"type":"text","text":"short"}],"shadowedRange":{"start":4,"end":9},"shadowedSeqs":[4,5,9],"shadowedTokenCount":120}"#
            )),
            r#"span 4..9, 3 nodes, 120 tokens: "short""#
        );
        assert_eq!(
            event(&ev(
                "request/header",
                r#"{"header":{"config":{"provider":"p","model":"m"},"tools":[{}]},"reason":"initial"}"#
            )),
            "p/m (initial), 1 tool"
        );
        assert_eq!(
            event(&ev(
                "assistant/chunk",
                r#"{"chunk":{"type":"finish","reason":{"kind":"error","failure":{"message":"too long","code":"CTX"}}}}"#
            )),
            "finish error: CTX: too long"
        );
    }

    #[test]
    fn unknown_payloads_are_previewed_and_everything_is_escaped() {
        let s = event(&ev("acme/thing", r#"{"a":"\u001b[31mred","b":2}"#));
        assert_eq!(s, r#"{"a":"\u001b[31mred","b":2}"#);
        let s = event(&ev("session/title", r#"{"title":"\u001b[31mred\u202e"}"#));
        assert!(!s.contains('\u{1b}'), "{s:?}");
        assert_eq!(s, r#""\u{1b}[31mred\u{202e}""#);
        let long = format!(r#"{{"title":"{}"}}"#, "x".repeat(500));
        let s = event(&ev("session/title", &long));
        assert!(s.chars().count() < 90, "{s}");
        assert!(s.ends_with("…\""), "{s}");
    }
}
