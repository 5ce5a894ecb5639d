//! Payload rules that do not depend on fold state: message shapes (§9), `request/header`
//! (§10.1, §8 C6/C7, §9.3 deferLoading), the tool-result failure flag (§8 C8), embedded
//! assistant streams (§10.1), V4 retired shapes (§9.2) and V4-draft detection (§21.2).

use super::codes::Code;
use super::dialect::{Dialect, SurfaceKind, ToolResultShape};
use super::event::Kind;
use super::finding::{Finding, Reporter};
use super::json::Json;
use super::rows::Event;
use super::vocab::TypeClass;

/// Check one event's payload. Message-shape checks stop at the first failure, as DSH's
/// assertions do; the other rules report independently.
pub fn check(d: &Dialect, ev: &Event<'_>, class: TypeClass, at: &Reporter<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    if let TypeClass::Surface(kind) = class {
        if let Err(f) = message_shape(d, ev, kind, at) {
            out.push(f);
        }
        if kind == SurfaceKind::ToolResult
            && let Some(f) = error_without_flag(d, ev, at)
        {
            out.push(f);
        }
    }
    if class == TypeClass::LogOnly || matches!(class, TypeClass::Surface(_)) {
        match ev.kind {
            Kind::RequestHeader => request_header(d, ev, at, &mut out),
            Kind::AssistantAttempt if d.embedded_stream => stream(ev, at, &mut out),
            _ => {}
        }
        if ev.kind == Kind::AssistantMessage && d.embedded_stream {
            stream(ev, at, &mut out);
        }
        if d.v4_payloads
            && let Some(path) = retired_block_path(ev)
        {
            out.push(at.finding(
                    Code::RetiredToolResultBlock,
                    format!(
                        "{} holds a retired `tool-result` content block at {path}; format v4 stores tool results as role `tool` messages",
                        ev.ty
                    ),
                ));
        }
    }
    out
}

/// §8 C7 and C8: the payload parts of the canonical envelope, which make a v3+ row bad.
pub fn payload_violation(d: &Dialect, ev: &Event<'_>, class: TypeClass) -> Option<Code> {
    if !d.canonical {
        return None;
    }
    let at = Reporter::untyped(Some(d.version), ev.pos);
    if class == TypeClass::Surface(SurfaceKind::ToolResult)
        && error_without_flag(d, ev, &at).is_some()
    {
        return Some(Code::ToolResultErrorWithoutFlag);
    }
    if ev.kind == Kind::RequestHeader && empty_optional(ev).is_some() {
        return Some(Code::RequestHeaderEmptyOptional);
    }
    None
}

fn message_shape(
    d: &Dialect,
    ev: &Event<'_>,
    kind: SurfaceKind,
    at: &Reporter<'_>,
) -> Result<(), Finding> {
    // The message is written only for a finding (not for every message checked).
    let fail = |code: Code, what: String| {
        Err(at.finding(code, format!("seed {} at seq {} {what}", ev.ty, ev.seq)))
    };
    let Some(m) = ev.message().filter(|m| m.is_obj()) else {
        return fail(
            Code::MessageIdMissing,
            "lacks an identified message (no message object)".into(),
        );
    };
    if m.get("id").and_then(Json::as_text).is_none() {
        return fail(
            Code::MessageIdMissing,
            "lacks an identified message (message `id` must be a non-empty string)".into(),
        );
    }
    let role = m.get("role").and_then(Json::as_str);
    let want = d.role_of(kind);
    // v4: a developer/role disagreement is the fold's developer rule (§9.3), not reported twice.
    let developer_rule =
        d.developer && (kind == SurfaceKind::Developer || role == Some("developer"));
    if role != Some(want) && !developer_rule {
        return fail(
            Code::MessageRoleMismatch,
            format!(
                "message must have role \"{want}\" (found {})",
                role.map_or_else(
                    || "none".to_owned(),
                    |r| format!("\"{}\"", crate::log::text::clip(r, 40))
                )
            ),
        );
    }
    let source = m.get("source").filter(|s| s.is_obj());
    let Some(source_kind) = source.and_then(|s| s.get("kind")).and_then(Json::as_text) else {
        return fail(
            Code::MessageSourceInvalid,
            "message has invalid source (an object with a non-empty string `kind` is required)"
                .into(),
        );
    };
    let source = source.unwrap_or(&Json::Null);
    if d.v4_payloads && source_kind == "plugin" {
        return fail(
            Code::SourceKindPlugin,
            "message source kind \"plugin\" is retired in format v4 (third parties use \"plugin:<name>\")".into(),
        );
    }
    let Some(content) = m.get("content").and_then(Json::as_arr) else {
        return fail(
            Code::MessageContentInvalid,
            "message has invalid content (must be an array)".into(),
        );
    };
    match kind {
        SurfaceKind::Assistant => {
            let ok = source_kind == "model"
                && source.get("provider").and_then(Json::as_text).is_some()
                && source.get("model").and_then(Json::as_text).is_some();
            if !ok {
                return fail(
                    Code::AssistantSourceInvalid,
                    "message must have model source ({kind:\"model\", provider, model})".into(),
                );
            }
        }
        SurfaceKind::ToolResult => {
            let call_id = source.get("callId").and_then(Json::as_text);
            let Some(call_id) = call_id.filter(|_| source_kind == "tool") else {
                return fail(
                    Code::ToolResultSourceInvalid,
                    "message must have tool source ({kind:\"tool\", callId})".into(),
                );
            };
            match d.tool_result_shape {
                ToolResultShape::Wrapped => {
                    let block = match content {
                        [b] if b.get("type").and_then(Json::as_str) == Some("tool-result")
                            && b.get("content").and_then(Json::as_arr).is_some() =>
                        {
                            b
                        }
                        _ => {
                            return fail(
                                Code::ToolResultBlockInvalid,
                                "message must contain one tool-result block (with an array `content`)"
                                    .into(),
                            );
                        }
                    };
                    if block.get("toolCallId").and_then(Json::as_str) != Some(call_id) {
                        return fail(
                            Code::ToolResultCallIdMismatch,
                            "message has mismatched tool call ids (block toolCallId ≠ source.callId)".into(),
                        );
                    }
                }
                ToolResultShape::ToolRole => {
                    if m.get("toolCallId").and_then(Json::as_str) != Some(call_id) {
                        return fail(
                            Code::ToolResultCallIdMismatch,
                            "message has mismatched tool call ids (toolCallId ≠ source.callId)"
                                .into(),
                        );
                    }
                    if m.get("isError").is_some_and(|e| e.as_bool().is_none()) {
                        return fail(
                            Code::MessageContentInvalid,
                            "tool message `isError` must be a boolean when present".into(),
                        );
                    }
                }
            }
        }
        SurfaceKind::System => {
            if d.v4_payloads {
                if source_kind != "system-prompt" {
                    return fail(
                        Code::SystemSourceInvalid,
                        format!(
                            "system message must have source {{kind:\"system-prompt\"}} (found \"{}\")",
                            crate::log::text::clip(source_kind, 40)
                        ),
                    );
                }
                let positive = |k: &str| {
                    ev.data
                        .get(k)
                        .and_then(Json::safe_int)
                        .is_some_and(|v| v > 0)
                };
                if !positive("turn") || !positive("step") {
                    return fail(
                        Code::SystemSourceInvalid,
                        "system message needs positive data.turn and data.step".into(),
                    );
                }
            } else if source_kind != "plugin"
                || source.get("plugin").and_then(Json::as_text).is_none()
            {
                return fail(
                    Code::SystemSourceInvalid,
                    "message must have plugin source ({kind:\"plugin\", plugin})".into(),
                );
            }
        }
        SurfaceKind::User | SurfaceKind::Developer => {}
    }
    Ok(())
}

/// §8 C8: a failed result (`data.error` present) sets its failure flag.
fn error_without_flag(d: &Dialect, ev: &Event<'_>, at: &Reporter<'_>) -> Option<Finding> {
    if !d.canonical || !ev.data.has("error") {
        return None;
    }
    let m = ev.message()?;
    let flagged = match d.tool_result_shape {
        ToolResultShape::Wrapped => {
            m.get("content")
                .and_then(Json::as_arr)
                .and_then(|c| c.first())
                .and_then(|b| b.get("isError"))
                == Some(&Json::Bool(true))
        }
        ToolResultShape::ToolRole => m.get("isError") == Some(&Json::Bool(true)),
    };
    (!flagged).then(|| {
        at.finding(
            Code::ToolResultErrorWithoutFlag,
            "tool/result has data.error but its failure flag is not set (isError must be true)",
        )
    })
}

fn empty_optional(ev: &Event<'_>) -> Option<&'static str> {
    let header = ev.data.get("header")?;
    if header
        .get("tools")
        .and_then(Json::as_arr)
        .is_some_and(<[Json<'_>]>::is_empty)
    {
        return Some("tools");
    }
    if header
        .get("adapterDefaults")
        .and_then(Json::as_obj)
        .is_some_and(<[_]>::is_empty)
    {
        return Some("adapterDefaults");
    }
    None
}

fn request_header(d: &Dialect, ev: &Event<'_>, at: &Reporter<'_>, out: &mut Vec<Finding>) {
    let header = ev.data.get("header");
    let config = header.and_then(|h| h.get("config"));
    let provider = config
        .and_then(|c| c.get("provider"))
        .and_then(Json::as_text);
    let model = config.and_then(|c| c.get("model")).and_then(Json::as_text);
    if provider.is_none() || model.is_none() {
        out.push(at.finding(
            Code::RequestHeaderProviderModel,
            format!(
                "seed request/header at seq {} lacks provider/model (data.header.config needs non-empty `provider` and `model`)",
                ev.seq
            ),
        ));
    }
    if let Some(effort) = config.and_then(|c| c.get("reasoningEffort"))
        && effort.as_text().is_none()
    {
        out.push(at.finding(
            Code::RequestHeaderReasoningEffort,
            "config.reasoningEffort must be a non-empty string when present",
        ));
    }
    if let Some(defaults) = header.and_then(|h| h.get("adapterDefaults")) {
        let problem = match defaults.as_obj() {
            None => Some(format!("must be an object, found {}", defaults.kind_name())),
            Some(_) => defaults.keys().into_iter().find_map(|k| {
                if k != "reasoningEffort" && k != "maxTokens" {
                    Some(format!(
                        "has unknown key `{}`",
                        crate::log::text::clip(k, 40)
                    ))
                } else if defaults.get(k) != Some(&Json::Bool(true)) {
                    Some(format!("`{k}` must be true"))
                } else if config.and_then(|c| c.get(k)).is_none() {
                    Some(format!("marks `{k}` as a default but config has no `{k}`"))
                } else {
                    None
                }
            }),
        };
        if let Some(why) = problem {
            out.push(at.finding(
                Code::RequestHeaderAdapterDefaults,
                format!("request/header adapterDefaults {why}"),
            ));
        }
    }
    if d.canonical {
        if header.is_some_and(|h| h.has("system")) {
            out.push(at.finding(
                Code::RequestHeaderSystemRetired,
                format!(
                    "request/header carries header.system; in format v{} the system prompt lives in system/message",
                    d.version
                ),
            ));
        }
        if let Some(member) = empty_optional(ev) {
            let empty = if member == "tools" { "[]" } else { "{}" };
            out.push(at.finding(
                Code::RequestHeaderEmptyOptional,
                format!(
                    "request/header has {member}: {empty}; canonical format v{} omits it instead",
                    d.version
                ),
            ));
        }
    }
    if d.developer {
        let tools = header
            .and_then(|h| h.get("tools"))
            .and_then(Json::as_arr)
            .unwrap_or_default();
        for t in tools {
            if t.get("deferLoading")
                .is_some_and(|v| v != &Json::Bool(true))
            {
                out.push(at.finding(
                    Code::RequestHeaderDeferLoading,
                    format!(
                        "request/header tool \"{}\" has deferLoading other than true",
                        crate::log::text::clip(
                            t.get("name").and_then(Json::as_str).unwrap_or("?"),
                            60
                        )
                    ),
                ));
            }
        }
    }
}

const STREAM_RECORDS: [&str; 4] = [
    "text-chunks",
    "reasoning-chunks",
    "tool-call-chunks",
    "chunk",
];

fn stream(ev: &Event<'_>, at: &Reporter<'_>, out: &mut Vec<Finding>) {
    match ev.data.get("stream") {
        None => out.push(at.finding(
            Code::AssistantStreamMissing,
            format!(
                "{} has no embedded `stream` (DSH always writes it from format v2 on)",
                ev.ty
            ),
        )),
        Some(Json::Arr(records)) => {
            if let Some(i) = records.iter().position(|r| {
                !r.get("type")
                    .and_then(Json::as_str)
                    .is_some_and(|t| STREAM_RECORDS.contains(&t))
            }) {
                out.push(at.finding(
                    Code::AssistantStreamMissing,
                    format!(
                        "{} stream record {i} is not a text-chunks, reasoning-chunks, tool-call-chunks or chunk object",
                        ev.ty
                    ),
                ));
            }
        }
        Some(other) => out.push(at.finding(
            Code::AssistantStreamMissing,
            format!(
                "{} `stream` must be an array, found {}",
                ev.ty,
                other.kind_name()
            ),
        )),
    }
}

fn has_tool_result_block(content: Option<&Json<'_>>) -> bool {
    content.and_then(Json::as_arr).is_some_and(|blocks| {
        blocks
            .iter()
            .any(|b| b.get("type").and_then(Json::as_str) == Some("tool-result"))
    })
}

/// Where a v4 payload still holds a retired `tool-result` block (§9.2), if anywhere.
fn retired_block_path(ev: &Event<'_>) -> Option<String> {
    let data = &ev.data;
    let each = |list: Option<&Json<'_>>, inner: &dyn Fn(&Json<'_>) -> Option<&'static str>| {
        list.and_then(Json::as_arr)
            .unwrap_or_default()
            .iter()
            .enumerate()
            .find_map(|(i, item)| inner(item).map(|p| format!("[{i}]{p}")))
    };
    match ev.kind {
        Kind::UserMessage
        | Kind::SystemMessage
        | Kind::DeveloperMessage
        | Kind::AssistantMessage
        | Kind::ToolResult => {
            if has_tool_result_block(ev.message().and_then(|m| m.get("content"))) {
                return Some("message.content".into());
            }
            if ev.kind == Kind::AssistantMessage {
                return stream_block(data.get("stream"));
            }
            None
        }
        Kind::AssistantAttempt => stream_block(data.get("stream")),
        Kind::AgentInboxSpliced => each(data.get("inserted"), &|m| {
            has_tool_result_block(m.get("content")).then_some(".content")
        })
        .map(|p| format!("data.inserted{p}")),
        Kind::SessionTitleLlmRequest => each(data.get("messages"), &|m| {
            has_tool_result_block(m.get("content")).then_some(".content")
        })
        .map(|p| format!("data.messages{p}")),
        Kind::TeamMessageQueued => {
            has_tool_result_block(data.get("message").and_then(|m| m.get("content")))
                .then(|| "data.message.content".into())
        }
        Kind::CompactionSummary => {
            if has_tool_result_block(data.get("summary")) {
                Some("data.summary".into())
            } else if has_tool_result_block(data.get("rawOutput")) {
                Some("data.rawOutput".into())
            } else {
                None
            }
        }
        Kind::ToolPtcDispatch => {
            has_tool_result_block(data.get("content")).then(|| "data.content".into())
        }
        _ => None,
    }
}

fn stream_block(stream: Option<&Json<'_>>) -> Option<String> {
    stream
        .and_then(Json::as_arr)?
        .iter()
        .enumerate()
        .find_map(|(i, r)| {
            let chunk = r.get("chunk")?;
            let hit = match chunk.get("type").and_then(Json::as_str) {
                Some("block-start") => {
                    chunk.get("blockType").and_then(Json::as_str) == Some("tool-result")
                }
                Some("block-end") => {
                    chunk
                        .get("block")
                        .and_then(|b| b.get("type"))
                        .and_then(Json::as_str)
                        == Some("tool-result")
                }
                _ => false,
            };
            hit.then(|| format!("data.stream[{i}].chunk"))
        })
}

/// §21.2: in a version-4 log, the pre-release V3 shapes that identify a draft log.
pub fn v4_draft_signal(ev: &Event<'_>) -> Option<String> {
    let plugin_source = |m: &Json<'_>| {
        m.get("source")
            .and_then(|s| s.get("kind"))
            .and_then(Json::as_str)
            == Some("plugin")
    };
    // A list of messages in `data` (an inbox insertion, a title request) with one from a plugin.
    let plugin_in = |key: &str, place: &str| {
        ev.data
            .get(key)
            .and_then(Json::as_arr)
            .unwrap_or_default()
            .iter()
            .any(plugin_source)
            .then(|| format!("the V3 `{{kind:\"plugin\"}}` source in {place}"))
    };
    match ev.kind {
        Kind::ToolResult => {
            let m = ev.message()?;
            if m.get("role").and_then(Json::as_str) == Some("user")
                || has_tool_result_block(m.get("content"))
            {
                return Some(
                    "the V3 tool-result shape (role user with a tool-result block)".into(),
                );
            }
            plugin_source(m).then(|| "the V3 `{kind:\"plugin\"}` message source".into())
        }
        Kind::UserMessage
        | Kind::AssistantMessage
        | Kind::SystemMessage
        | Kind::DeveloperMessage => ev
            .message()
            .filter(|m| plugin_source(m))
            .map(|_| "the V3 `{kind:\"plugin\"}` message source".into()),
        Kind::AgentInboxSpliced => plugin_in("inserted", "an inbox insertion"),
        Kind::SessionTitleLlmRequest => plugin_in("messages", "a title request"),
        _ => None,
    }
}
