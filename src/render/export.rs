//! `dshs export`: one self-contained HTML page per session. The page's HTML, CSS and script
//! are files in `assets/export/`; this module fills the template with the session's data
//! (one JSON document, each message byte-for-byte as `derive` gives it) and nothing else.
//!
//! Safety: the data sits in a `<script type="application/json">`, where the only way out is
//! `</script`; every `<`, `>` and `&` of it is written as a JSON escape (so no `</script`,
//! `<!--` or `-->` survives), and U+2028/U+2029 likewise. The title is HTML-escaped. The
//! script builds the page with `textContent` only, and a Content-Security-Policy allows
//! exactly the page's own script and style (by hash) and no request of any kind.

pub mod redact;
pub mod sha256;

use std::fmt::Write as _;
use std::io::{self, Write};

use serde::Serialize;
use serde_json::value::RawValue;

use crate::render::usage::TokenColumns;

pub const HTML: &str = include_str!("../../assets/export/page.html");
pub const CSS: &str = include_str!("../../assets/export/page.css");
pub const JS: &str = include_str!("../../assets/export/page.js");
pub const INDEX: &str = include_str!("../../assets/export/index.html");

/// One node of the page: a surface node (depth 0) or one a replacement shadowed (depth of
/// the replacing node + 1), in surface order with each replacement's history after it.
pub struct Node<'a> {
    pub seq: u64,
    pub event_type: &'a str,
    pub time: i64,
    pub turn: Option<i64>,
    pub depth: u32,
    /// How many nodes this one replaced (listed right after it, one level deeper).
    pub replaced: usize,
    /// The derived message as stored; None for a node that derives none (§12.1).
    pub message: Option<&'a [u8]>,
}

/// Token counts of a turn or a session, as `USAGE.md` counts them. The seam for the
/// counting library: the page shows them when given, and nothing when not.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tokens {
    pub calls: u64,
    pub calls_without_usage: u64,
    #[serde(flatten)]
    pub tokens: TokenColumns,
    /// The priced tokens' cost; None when no token is priced (never shown as 0).
    #[serde(rename = "costUSD")]
    pub cost_usd: Option<f64>,
    pub unpriced_tokens: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Turn {
    pub n: i64,
    pub start: i64,
    pub end: Option<i64>,
    /// `turn/end`'s `reason.kind`.
    pub reason: Option<String>,
    pub usage: Option<Tokens>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub seq: Option<u64>,
    pub line: u64,
    pub severity: &'static str,
    pub code: &'static str,
    pub message: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Link {
    pub label: String,
    /// A file name of the export directory (`[A-Za-z0-9._-]+.html`).
    pub href: String,
}

/// Everything of the page but its nodes.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Facts {
    pub title: Option<String>,
    pub session: Option<String>,
    pub version: Option<u8>,
    pub file: String,
    pub at: Option<u64>,
    pub created: Option<i64>,
    pub cwd: Option<String>,
    /// The latest `request/header`'s `header.tools`, as stored.
    pub tools: Option<Box<RawValue>>,
    /// Formats 0–2: that header's `system` prompt, as stored.
    pub system: Option<Box<RawValue>>,
    pub turns: Vec<Turn>,
    pub tokens: Option<Tokens>,
    pub findings: Vec<Finding>,
    pub findings_omitted: u64,
    pub parent_page: Option<Link>,
    pub children: Vec<Link>,
}

/// Writes a page as it goes: the template up to the data, then the nodes as a
/// [`NodeEncoder`] encoded them (a few at a time, in page order), then the rest. Memory holds
/// a few nodes, never the page.
pub struct PageWriter<W: Write> {
    out: W,
    encoder: NodeEncoder,
    redacted: u64,
    first: bool,
    /// The template after the data.
    tail: String,
}

impl<W: Write> PageWriter<W> {
    /// Writes the page up to its first node. `title` is shown as written (escaped, and
    /// redacted unless `redact` is false).
    pub fn start(mut out: W, title: &str, redact: bool) -> io::Result<Self> {
        let title = if redact {
            redact::redact(title).0
        } else {
            title.into()
        };
        let csp = format!(
            "default-src 'none'; script-src {}; style-src {}; img-src 'none'; base-uri 'none'; form-action 'none'",
            sha256::csp_source(JS),
            sha256::csp_source(CSS)
        );
        let title = html_text(&title);
        let fill = |part: &str| {
            let mut html = String::with_capacity(part.len() + CSS.len() + JS.len());
            let mut rest = part;
            while let Some(open) = rest.find("{{") {
                html.push_str(&rest[..open]);
                let after = &rest[open + 2..];
                let Some(close) = after.find("}}") else {
                    break;
                };
                match &after[..close] {
                    "TITLE" => html.push_str(&title),
                    "CSP" => html.push_str(&csp),
                    "CSS" => html.push_str(CSS),
                    "JS" => html.push_str(JS),
                    other => {
                        html.push_str("{{");
                        html.push_str(other);
                        html.push_str("}}");
                    }
                }
                rest = &after[close + 2..];
            }
            html.push_str(rest);
            html
        };
        let (head, tail) = HTML.split_once("{{DATA}}").unwrap_or((HTML, ""));
        out.write_all(fill(head).as_bytes())?;
        out.write_all(b"{\"nodes\":[")?;
        Ok(PageWriter {
            out,
            encoder: NodeEncoder::new(redact),
            redacted: 0,
            first: true,
            tail: fill(tail),
        })
    }

    /// Writes `nodes` nodes that a [`NodeEncoder`] encoded (the first of them told whether it
    /// is the page's first), with the secrets it masked in them.
    pub fn encoded(&mut self, bytes: &[u8], nodes: usize, masked: u64) -> io::Result<()> {
        self.first &= nodes == 0;
        self.redacted += masked;
        self.out.write_all(bytes)
    }

    /// Writes the rest of the page; returns the writer and how many secrets the page masks
    /// (None: `--no-redact`).
    pub fn finish(mut self, facts: &Facts) -> io::Result<(W, Option<u64>)> {
        let rest = serde_json::to_string(facts).unwrap_or_else(|_| "{}".into());
        let members = rest
            .strip_prefix('{')
            .and_then(|r| r.strip_suffix('}'))
            .unwrap_or("");
        let sep = if members.is_empty() { "" } else { "," };
        let mut end = Vec::with_capacity(rest.len() + 8);
        self.redacted += self.encoder.emit(&format!("]{sep}{members}"), &mut end);
        self.out.write_all(&end)?;
        let redact = self.encoder.redact;
        let count = if redact {
            self.redacted.to_string()
        } else {
            "null".to_owned()
        };
        write!(self.out, ",\"redacted\":{count}}}")?;
        let tail = std::mem::take(&mut self.tail);
        self.out.write_all(tail.as_bytes())?;
        self.out.flush()?;
        Ok((self.out, redact.then_some(self.redacted)))
    }
}

/// Encodes nodes of the page's data, each a piece of JSON redacted on its own (a secret
/// never spans two JSON values) and made safe for the script element. Needs no writer, so
/// threads can encode nodes ahead of the one that writes them.
pub struct NodeEncoder {
    redact: bool,
    buf: String,
}

impl NodeEncoder {
    pub fn new(redact: bool) -> Self {
        NodeEncoder {
            redact,
            buf: String::new(),
        }
    }

    /// Appends node `n` to `out` (after a comma unless it is the page's `first`); returns
    /// how many secrets were masked in it.
    pub fn encode(&mut self, n: &Node<'_>, first: bool, out: &mut Vec<u8>) -> u64 {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        if !first {
            buf.push(',');
        }
        buf.push_str("{\"seq\":");
        push_int(&mut buf, n.seq);
        buf.push_str(",\"type\":");
        push_json_string(&mut buf, n.event_type);
        buf.push_str(",\"time\":");
        push_int(&mut buf, n.time);
        buf.push_str(",\"depth\":");
        push_int(&mut buf, n.depth);
        buf.push_str(",\"replaced\":");
        push_int(&mut buf, n.replaced);
        if let Some(t) = n.turn {
            buf.push_str(",\"turn\":");
            push_int(&mut buf, t);
        }
        buf.push_str(",\"m\":");
        match n.message {
            // A line that was not UTF-8 was read lossily by the fold as well.
            Some(bytes) => match simdutf8::basic::from_utf8(bytes) {
                Ok(text) => buf.push_str(text),
                Err(_) => buf.push_str(&String::from_utf8_lossy(bytes)),
            },
            None => buf.push_str("null"),
        }
        buf.push('}');
        let masked = self.emit(&buf, out);
        self.buf = buf;
        masked
    }

    /// A piece of the data's JSON: redacted, made safe, appended.
    fn emit(&self, json: &str, out: &mut Vec<u8>) -> u64 {
        if !self.redact {
            script_safe_into(out, json);
            return 0;
        }
        let (text, n) = redact::redact(json);
        script_safe_into(out, &text);
        n
    }
}

fn push_int(buf: &mut String, n: impl itoa::Integer) {
    buf.push_str(itoa::Buffer::new().format(n));
}

/// `text` as a JSON string (an event type: plain ASCII but for a type a log made up).
fn push_json_string(buf: &mut String, text: &str) {
    if text
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        buf.push('"');
        buf.push_str(text);
        buf.push('"');
    } else {
        buf.push_str(&serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into()));
    }
}

/// The index of a directory export around `table` (markup made by the caller, every text
/// in it escaped with [`html_text`]). It has no script.
pub fn index(table: &str) -> String {
    let csp = format!(
        "default-src 'none'; style-src {}; img-src 'none'; base-uri 'none'; form-action 'none'",
        sha256::csp_source(CSS)
    );
    INDEX
        .replacen("{{CSP}}", &csp, 1)
        .replacen("{{CSS}}", CSS, 1)
        .replacen("{{TABLE}}", table, 1)
}

/// JSON text made safe inside `<script>`: the characters that could end the element, start
/// a comment or end a line in old parsers are written as the escapes JSON gives them. They
/// occur only inside strings (JSON has them nowhere else), so the value is unchanged.
/// Untouched runs between them are copied whole.
pub fn script_safe_into(out: &mut Vec<u8>, json: &str) {
    let b = json.as_bytes();
    out.reserve(b.len());
    let mut from = 0;
    // U+2028 and U+2029 are E2 80 A8 / E2 80 A9: found by their first byte.
    let mut next_markup = memchr::memchr3(b'<', b'>', b'&', b);
    let mut next_sep = memchr::memchr(0xE2, b);
    loop {
        let i = match (next_markup, next_sep) {
            (None, None) => break,
            (Some(m), Some(e)) => m.min(e),
            (Some(m), None) => m,
            (None, Some(e)) => e,
        };
        let (esc, len): (&[u8], usize) = match b[i] {
            b'<' => (b"\\u003c", 1),
            b'>' => (b"\\u003e", 1),
            b'&' => (b"\\u0026", 1),
            _ if b.get(i + 1) == Some(&0x80) && b.get(i + 2) == Some(&0xA8) => (b"\\u2028", 3),
            _ if b.get(i + 1) == Some(&0x80) && b.get(i + 2) == Some(&0xA9) => (b"\\u2029", 3),
            _ => (b"", 0),
        };
        if len > 0 {
            out.extend_from_slice(&b[from..i]);
            out.extend_from_slice(esc);
            from = i + len;
        }
        let after = i + len.max(1);
        if next_markup == Some(i) {
            next_markup = memchr::memchr3(b'<', b'>', b'&', &b[after..]).map(|k| k + after);
        }
        if next_sep.is_some_and(|e| e < after) {
            next_sep = memchr::memchr(0xE2, &b[after..]).map(|k| k + after);
        }
    }
    out.extend_from_slice(&b[from..]);
}

/// [`script_safe_into`] into a string.
#[cfg(test)]
fn script_safe(json: &str) -> String {
    let mut out = Vec::with_capacity(json.len());
    script_safe_into(&mut out, json);
    String::from_utf8(out).unwrap_or_default()
}

/// Text for an HTML element or attribute: markup characters as references, control
/// characters (terminal escapes) as visible `\u{…}` text.
pub fn html_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_safe_escapes_each_occurrence_and_nothing_else() {
        assert_eq!(
            script_safe("a<b>&c\u{2028}\u{2029}é€<"),
            "a\\u003cb\\u003e\\u0026c\\u2028\\u2029é€\\u003c"
        );
        // E2 that starts another character (€ is E2 82 AC) is left alone.
        assert_eq!(script_safe("€€<"), "€€\\u003c");
        assert_eq!(script_safe(""), "");
    }

    #[test]
    fn script_safe_leaves_no_way_out_of_the_element() {
        let json = r#"{"t":"</script><script>alert(1)</script><!-- & -->  "}"#;
        let safe = script_safe(json);
        for bad in ["<", ">", "&", "\u{2028}", "\u{2029}"] {
            assert!(!safe.contains(bad), "{bad:?} in {safe}");
        }
        let a: serde_json::Value = serde_json::from_str(json).unwrap();
        let b: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn the_template_has_every_slot_filled() {
        let mut w = PageWriter::start(Vec::new(), "<b>t</b>\u{1b}[31m", true).unwrap();
        let mut node = Vec::new();
        let masked = NodeEncoder::new(true).encode(
            &Node {
            seq: 3,
            event_type: dshs::log::event::Kind::UserMessage.name(),
            time: 1,
            turn: Some(1),
            depth: 0,
            replaced: 0,
            message: Some(br#"{"role":"user","content":[{"type":"text","text":"sk-0123456789abcdef0123456789abcdef"}]}"#),
            },
            true,
            &mut node,
        );
        w.encoded(&node, 1, masked).unwrap();
        let (html, redacted) = w.finish(&Facts::default()).unwrap();
        let html = String::from_utf8(html).unwrap();
        assert!(!html.contains("{{"), "an unfilled slot");
        assert!(html.contains("<title>&lt;b&gt;t&lt;/b&gt;\\u{1b}[31m · dshs</title>"));
        assert_eq!(html.matches("<script").count(), 2);
        assert_eq!(redacted, Some(1));
        let open = "id=\"data\">";
        let start = html.find(open).unwrap() + open.len();
        let data = &html[start..start + html[start..].find("</script>").unwrap()];
        let v: serde_json::Value = serde_json::from_str(data).expect("the data is JSON");
        assert_eq!(v["redacted"], 1);
        assert_eq!(v["nodes"][0]["seq"], 3);
    }
}
