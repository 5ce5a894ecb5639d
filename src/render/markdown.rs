//! `dshs derive --format markdown`: the derived messages as a transcript people read. Roles
//! are headings, tool calls and results are fenced blocks, reasoning is folded away in
//! `<details>`. Text from the log keeps its lines but never carries terminal controls.

use std::fmt::Write;

use dshs::log::dialect::SurfaceKind;
use dshs::log::json::Json;

use super::escape_keeping_lines;

/// One message of the transcript, ending in a blank line.
pub fn message(seq: u64, kind: SurfaceKind, msg: &Json<'_>) -> String {
    let mut out = String::new();
    let role = msg
        .get("role")
        .and_then(Json::as_str)
        .unwrap_or_else(|| kind.type_name());
    let _ = write!(out, "## {} · seq {seq}", one_line(role));
    let blocks = msg
        .get("content")
        .and_then(Json::as_arr)
        .unwrap_or_default();
    if kind == SurfaceKind::ToolResult {
        // v4 keeps the call id and error flag on the message; v0–v3 on the one wrapper block.
        let wrapper = blocks
            .first()
            .filter(|b| b.get("type").and_then(Json::as_str) == Some("tool-result"));
        let holder = wrapper.unwrap_or(msg);
        let call = holder.get("toolCallId").and_then(Json::as_str).or_else(|| {
            msg.get("source")
                .and_then(|s| s.get("callId"))
                .and_then(Json::as_str)
        });
        out.push_str(" · tool result");
        if let Some(call) = call {
            let _ = write!(out, " for {}", code_span(call));
        }
        if holder.get("isError") == Some(&Json::Bool(true)) {
            out.push_str(" · error");
        }
    }
    out.push_str("\n\n");
    if blocks.is_empty() {
        out.push_str("*(no content)*\n\n");
    }
    let result = kind == SurfaceKind::ToolResult;
    for b in blocks {
        block(&mut out, b, result);
    }
    out
}

fn block(out: &mut String, b: &Json<'_>, in_result: bool) {
    let text = b.get("text").and_then(Json::as_str).unwrap_or_default();
    match b.get("type").and_then(Json::as_str) {
        Some("text") if in_result => fenced(out, "text", text),
        Some("text") => {
            out.push_str(&escape_keeping_lines(text));
            out.push_str("\n\n");
        }
        Some("reasoning") => {
            // A literal closing tag in the text must not end the fold early.
            let safe = escape_keeping_lines(text).replace("</details", "&lt;/details");
            let _ = write!(
                out,
                "<details><summary>reasoning</summary>\n\n{safe}\n\n</details>\n\n"
            );
        }
        Some("tool-call") => {
            let name = b.get("name").and_then(Json::as_str).unwrap_or("?");
            let _ = write!(out, "**tool call** {}", code_span(name));
            if let Some(id) = b.get("id").and_then(Json::as_str) {
                let _ = write!(out, " ({})", code_span(id));
            }
            out.push_str("\n\n");
            match b.get("arguments") {
                Some(Json::Str(args)) => match dshs::log::json::parse(args.as_bytes()) {
                    Ok(parsed) => fenced(out, "json", &pretty(&parsed)),
                    Err(_) => fenced(out, "text", args),
                },
                Some(other) => fenced(out, "json", &pretty(other)),
                None => {}
            }
        }
        Some("tool-result") => {
            for inner in b.get("content").and_then(Json::as_arr).unwrap_or_default() {
                block(out, inner, true);
            }
        }
        Some(kind @ ("image" | "file")) => {
            let att = b.get("attachment");
            let field = |k: &str| att.and_then(|a| a.get(k)).and_then(Json::as_str);
            let what = [field("name"), field("filename"), field("mediaType")]
                .into_iter()
                .flatten()
                .map(one_line)
                .collect::<Vec<_>>()
                .join(", ");
            if what.is_empty() {
                let _ = write!(out, "*[{kind}]*\n\n");
            } else {
                let _ = write!(out, "*[{kind}: {what}]*\n\n");
            }
        }
        Some(change @ ("tool-addition" | "tool-removal")) => {
            let name = b.get("toolName").and_then(Json::as_str).unwrap_or("?");
            let verb = if change == "tool-addition" {
                "tool added"
            } else {
                "tool removed"
            };
            let _ = write!(out, "*{verb}:* {}\n\n", code_span(name));
        }
        _ => fenced(out, "json", &pretty(b)),
    }
}

/// A fenced code block whose fence is longer than any backtick run inside.
fn fenced(out: &mut String, info: &str, body: &str) {
    let longest = longest_run(body, '`');
    let fence = "`".repeat(longest.max(2) + 1);
    let body = escape_keeping_lines(body);
    let _ = write!(out, "{fence}{info}\n{}", body.trim_end_matches('\n'));
    let _ = write!(out, "\n{fence}\n\n");
}

/// Inline code that survives backticks inside it.
fn code_span(text: &str) -> String {
    let text = one_line(text);
    let ticks = "`".repeat(longest_run(&text, '`') + 1);
    if text.starts_with('`') || text.ends_with('`') {
        format!("{ticks} {text} {ticks}")
    } else {
        format!("{ticks}{text}{ticks}")
    }
}

fn longest_run(text: &str, c: char) -> usize {
    let (mut best, mut cur) = (0, 0);
    for ch in text.chars() {
        cur = if ch == c { cur + 1 } else { 0 };
        best = best.max(cur);
    }
    best
}

/// A heading or a name: one line, escaped.
fn one_line(text: &str) -> String {
    super::escape(text).into_owned()
}

/// JSON indented by two spaces, members in their stored order.
pub fn pretty(v: &Json<'_>) -> String {
    let mut out = String::new();
    pretty_into(v, 0, &mut out);
    out
}

fn pretty_into(v: &Json<'_>, depth: usize, out: &mut String) {
    let pad = |out: &mut String, d: usize| out.push_str(&"  ".repeat(d));
    match v {
        Json::Arr(items) if !items.is_empty() => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                pad(out, depth + 1);
                pretty_into(item, depth + 1, out);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            pad(out, depth);
            out.push(']');
        }
        Json::Obj(members) if !members.is_empty() => {
            out.push_str("{\n");
            for (i, (k, item)) in members.iter().enumerate() {
                pad(out, depth + 1);
                dshs::log::json::write_js_str(k, out);
                out.push_str(": ");
                pretty_into(item, depth + 1, out);
                out.push_str(if i + 1 < members.len() { ",\n" } else { "\n" });
            }
            pad(out, depth);
            out.push('}');
        }
        other => out.push_str(&other.to_js_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dshs::log::json::parse;

    fn md(seq: u64, kind: SurfaceKind, msg: &str) -> String {
        message(seq, kind, &parse(msg.as_bytes()).unwrap())
    }

    #[test]
    fn assistant_text_reasoning_and_tool_call() {
        let got = md(
            4,
            SurfaceKind::Assistant,
            r#"{"role":"assistant","content":[{"type":"reasoning","text":"hmm </details> x"},{"type":"text","text":"Let me look."},{"type":"tool-call","id":"c1","name":"bash","arguments":"{\"command\":\"ls ```\",\"n\":1.0}"}]}"#,
        );
        assert_eq!(
            got,
            "## assistant · seq 4\n\n\
             <details><summary>reasoning</summary>\n\nhmm &lt;/details> x\n\n</details>\n\n\
             Let me look.\n\n\
             **tool call** `bash` (`c1`)\n\n\
             ````json\n{\n  \"command\": \"ls ```\",\n  \"n\": 1\n}\n````\n\n"
        );
    }

    #[test]
    fn tool_results_of_v3_and_v4_name_the_call() {
        let v3 = md(
            9,
            SurfaceKind::ToolResult,
            r#"{"role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"out\n"}],"isError":true}]}"#,
        );
        assert_eq!(
            v3,
            "## user · seq 9 · tool result for `c1` · error\n\n```text\nout\n```\n\n"
        );
        let v4 = md(
            9,
            SurfaceKind::ToolResult,
            r#"{"role":"tool","toolCallId":"c2","content":[{"type":"text","text":"ok"}],"source":{"kind":"tool","callId":"c2"}}"#,
        );
        assert_eq!(
            v4,
            "## tool · seq 9 · tool result for `c2`\n\n```text\nok\n```\n\n"
        );
    }

    #[test]
    fn log_text_cannot_reach_the_terminal_raw() {
        let got = md(
            1,
            SurfaceKind::User,
            r#"{"role":"us\u001ber","content":[{"type":"text","text":"a\u001b[2Jb\nc"}]}"#,
        );
        assert_eq!(got, "## us\\u{1b}er · seq 1\n\na\\u{1b}[2Jb\nc\n\n");
        assert_eq!(code_span("a`b"), "``a`b``");
        assert_eq!(code_span("`x"), "`` `x ``");
    }

    #[test]
    fn empty_and_unknown_content() {
        assert_eq!(
            md(2, SurfaceKind::User, r#"{"role":"user","content":[]}"#),
            "## user · seq 2\n\n*(no content)*\n\n"
        );
        assert_eq!(
            md(
                2,
                SurfaceKind::Developer,
                r#"{"role":"developer","content":[{"type":"tool-addition","toolName":"grep"},{"type":"mystery","v":[]}]}"#
            ),
            "## developer · seq 2\n\n*tool added:* `grep`\n\n```json\n{\n  \"type\": \"mystery\",\n  \"v\": []\n}\n```\n\n"
        );
    }
}
