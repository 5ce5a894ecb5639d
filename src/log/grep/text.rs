//! The text an event carries, decoded, with who said it: what `dshs grep` searches.
//!
//! Per event type (all versions unless named; shapes of FORMAT.md §9, §10, §16):
//!
//! | event | searched | role |
//! |---|---|---|
//! | `user/message` | the message's content blocks | user |
//! | `system/message` (v3+), `developer/message` (v4) | `data.message` content | system, developer |
//! | `assistant/message` | `data.message` content: text, reasoning, tool calls (name, arguments) | assistant |
//! | `tool/result` | the output blocks: v0–v3 inside the one `tool-result` block, v4 the content itself | tool |
//! | `tool/call` | `name`, `arguments` | assistant |
//! | `assistant/attempt` (v2+) | its embedded `stream` (no message holds that text) | assistant |
//! | `compaction/summary` | `summary` blocks, and `rawOutput` blocks that say something else | none |
//! | `request/header` (v0–v2) | `header.system`, the system prompt of those versions | system |
//! | `agent/inbox/spliced` | the `inserted` messages' content | their role |
//! | `session/title` | `title` | none |
//! | `todo/write` | each todo's `content` | none |
//!
//! Content blocks: `text`, `reasoning`, `tool-call` (its `name`; its `arguments`, JSON text,
//! is parsed and each string in it searched decoded, under its key path — `command`,
//! `edits[0].old_string` — as are its keys, numbers, booleans and nulls; or searched as it is when it is not JSON), a `tool-result` block's
//! own content, and v4's `tool-addition`/`tool-removal` tool names. Images and files carry no
//! text. The streamed form of a model response — v0/v1 `assistant/chunk` events, the v2+
//! `stream` of an `assistant/message` — repeats what its message holds whole, so it is
//! searched only when asked for ([`Extract::chunks`]). A stream is searched as its
//! `block-end` blocks, whole, and the deltas of a block that never ended (a response cut
//! off) joined in order, as the block's text would have been (the raw-line test keeps every
//! line that holds such a stream, since a match may span two of its JSON strings). v0 pre-release shapes arrive normalized by the scan (§16), so
//! `steering/message`, messageless `user/message`, `assistant/message` and `tool/result`,
//! and `compact/*` are searched as their current shapes. Other types carry no text `grep`
//! knows of.

use std::borrow::Cow;

use crate::log::event::Kind;
use crate::log::json::{self, Json};
use crate::log::rows::Event;

/// Who a piece of text is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    User,
    Assistant,
    System,
    Tool,
    Developer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
            Role::Tool => "tool",
            Role::Developer => "developer",
        }
    }

    fn of_message(role: Option<&str>) -> Option<Role> {
        Some(match role? {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "system" => Role::System,
            "tool" => Role::Tool,
            "developer" => Role::Developer,
            _ => return None,
        })
    }
}

/// What a piece of text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartKind {
    /// A text block (a message, a tool's output).
    Text,
    Reasoning,
    /// A tool's name (a call, a v4 tool addition or removal).
    ToolName,
    /// A tool call's arguments (one string of them, or all of it when it is not JSON).
    Arguments,
    /// A compaction summary.
    Summary,
    /// A v0–v2 system prompt in a `request/header`.
    SystemPrompt,
    Title,
    Todo,
}

impl PartKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PartKind::Text => "text",
            PartKind::Reasoning => "reasoning",
            PartKind::ToolName => "tool-name",
            PartKind::Arguments => "arguments",
            PartKind::Summary => "summary",
            PartKind::SystemPrompt => "system-prompt",
            PartKind::Title => "title",
            PartKind::Todo => "todo",
        }
    }
}

/// One piece of decoded text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part<'e> {
    pub role: Option<Role>,
    pub kind: PartKind,
    /// The tool a call's name or arguments belong to.
    pub tool: Option<Cow<'e, str>>,
    /// Where in a call's JSON arguments the text sits (`command`, `edits[0].old_string`).
    pub key: Option<String>,
    pub text: Cow<'e, str>,
}

/// Options of the extraction.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extract {
    /// Also the streamed form of model responses (see the module documentation).
    pub chunks: bool,
}

/// Whether an event of this type can carry text `grep` searches (a cheap test before the
/// filters look at the event).
pub fn carries_text(kind: Kind, opts: &Extract) -> bool {
    matches!(
        kind,
        Kind::UserMessage
            | Kind::SystemMessage
            | Kind::DeveloperMessage
            | Kind::AssistantMessage
            | Kind::ToolResult
            | Kind::ToolCall
            | Kind::AssistantAttempt
            | Kind::CompactionSummary
            | Kind::RequestHeader
            | Kind::AgentInboxSpliced
            | Kind::SessionTitle
            | Kind::TodoWrite
    ) || (opts.chunks && kind == Kind::AssistantChunk)
}

/// What marks a raw line whose text is searched joined across its JSON strings (a stream's
/// cut-off deltas): an `assistant/attempt` (its stream is always searched), and with
/// `--chunks` any embedded stream run or delta. A `\/` may stand for the slash; `\u`
/// escapes are undone by the raw-line test before it looks.
pub fn joined_stream_markers(opts: &Extract) -> Vec<String> {
    let attempt = Kind::AssistantAttempt.name();
    let mut markers = vec![attempt.to_owned(), attempt.replace('/', "\\/")];
    if opts.chunks {
        markers.extend(["-chunks\"".to_owned(), "-delta\"".to_owned()]);
    }
    markers
}

/// The text of `ev`, in the order it appears, empty pieces left out.
pub fn parts<'e>(ev: &'e Event<'_>, opts: &Extract) -> Vec<Part<'e>> {
    let mut out = Parts { list: Vec::new() };
    let d = &ev.data;
    match ev.kind {
        Kind::UserMessage => out.blocks(content(Some(d)), Some(Role::User), PartKind::Text),
        Kind::SystemMessage => out.message(d, Role::System),
        Kind::DeveloperMessage => out.message(d, Role::Developer),
        Kind::ToolResult => out.message(d, Role::Tool),
        Kind::AssistantMessage => {
            out.message(d, Role::Assistant);
            if opts.chunks {
                out.stream(d.get("stream"));
            }
        }
        Kind::AssistantAttempt => out.stream(d.get("stream")),
        Kind::AssistantChunk if opts.chunks => {
            if let Some(c) = d.get("chunk") {
                out.chunk(c);
            }
        }
        Kind::ToolCall => {
            let name = str_at(d, "name");
            if let Some(n) = name {
                out.push(Role::Assistant, PartKind::ToolName, None, None, n.into());
            }
            if let Some(args) = d.get("arguments") {
                out.arguments_as(Some(Role::Assistant), name.map(Cow::Borrowed), args);
            }
        }
        Kind::CompactionSummary => {
            let summary = d.get("summary");
            out.blocks(summary, None, PartKind::Summary);
            // The raw output usually repeats the summary; only what it adds is searched.
            let said: Vec<&str> = blocks_of(summary)
                .iter()
                .filter_map(|b| str_at(b, "text"))
                .collect();
            for b in blocks_of(d.get("rawOutput")) {
                if let Some(t) = str_at(b, "text")
                    && !said.contains(&t)
                {
                    out.push_opt(None, PartKind::Summary, None, None, t.into());
                }
            }
        }
        Kind::RequestHeader => match d.get("header").and_then(|h| h.get("system")) {
            Some(Json::Str(s)) => out.push_opt(
                Some(Role::System),
                PartKind::SystemPrompt,
                None,
                None,
                s.as_str().into(),
            ),
            Some(blocks @ Json::Arr(_)) => {
                out.blocks(Some(blocks), Some(Role::System), PartKind::SystemPrompt);
            }
            _ => {}
        },
        Kind::AgentInboxSpliced => {
            for m in blocks_of(d.get("inserted")) {
                let role = Role::of_message(str_at(m, "role"));
                out.blocks(content(Some(m)), role, PartKind::Text);
            }
        }
        Kind::SessionTitle => {
            if let Some(t) = str_at(d, "title") {
                out.push_opt(None, PartKind::Title, None, None, t.into());
            }
        }
        Kind::TodoWrite => {
            for todo in blocks_of(d.get("todos")) {
                if let Some(t) = str_at(todo, "content") {
                    out.push_opt(None, PartKind::Todo, None, None, t.into());
                }
            }
        }
        _ => {}
    }
    out.list
}

fn str_at<'j>(v: &'j Json<'_>, key: &str) -> Option<&'j str> {
    v.get(key).and_then(Json::as_str)
}

fn content<'j, 'a>(message: Option<&'j Json<'a>>) -> Option<&'j Json<'a>> {
    message.and_then(|m| m.get("content"))
}

fn blocks_of<'j, 'a>(v: Option<&'j Json<'a>>) -> &'j [Json<'a>] {
    v.and_then(Json::as_arr).unwrap_or_default()
}

struct Parts<'e> {
    list: Vec<Part<'e>>,
}

impl<'e> Parts<'e> {
    fn push(
        &mut self,
        role: Role,
        kind: PartKind,
        tool: Option<Cow<'e, str>>,
        key: Option<String>,
        text: Cow<'e, str>,
    ) {
        self.push_opt(Some(role), kind, tool, key, text);
    }

    fn push_opt(
        &mut self,
        role: Option<Role>,
        kind: PartKind,
        tool: Option<Cow<'e, str>>,
        key: Option<String>,
        text: Cow<'e, str>,
    ) {
        if !text.is_empty() {
            self.list.push(Part {
                role,
                kind,
                tool,
                key,
                text,
            });
        }
    }

    /// `data.message` of a message event, with the event's role (a v0–v3 tool result is
    /// stored with role `user`, but it is the tool speaking).
    fn message(&mut self, d: &'e Json<'_>, role: Role) {
        self.blocks(content(d.get("message")), Some(role), PartKind::Text);
    }

    /// Content blocks; `text` blocks count as `kind`.
    fn blocks(&mut self, content: Option<&'e Json<'_>>, role: Option<Role>, kind: PartKind) {
        for b in blocks_of(content) {
            self.block(b, role, kind);
        }
    }

    fn block(&mut self, b: &'e Json<'_>, role: Option<Role>, kind: PartKind) {
        match b.get("type").and_then(Json::as_str) {
            Some("text") => {
                if let Some(t) = str_at(b, "text") {
                    self.push_opt(role, kind, None, None, t.into());
                }
            }
            Some("reasoning") => {
                if let Some(t) = str_at(b, "text") {
                    self.push_opt(role, PartKind::Reasoning, None, None, t.into());
                }
            }
            Some("tool-call") => {
                let name = str_at(b, "name");
                if let Some(n) = name {
                    self.push_opt(role, PartKind::ToolName, None, None, n.into());
                }
                if let Some(args) = b.get("arguments") {
                    self.arguments_as(role, name.map(Cow::Borrowed), args);
                }
            }
            Some("tool-result") => self.blocks(b.get("content"), role, kind),
            Some("tool-addition" | "tool-removal") => {
                if let Some(n) = str_at(b, "toolName") {
                    self.push_opt(role, PartKind::ToolName, None, None, n.into());
                }
            }
            _ => {}
        }
    }

    /// A call's arguments: JSON text (decoded, each string under its key path), or text
    /// searched as it is when it does not parse (a cut-off stream); an object stored as such
    /// is walked the same way.
    fn arguments_as(&mut self, role: Option<Role>, tool: Option<Cow<'e, str>>, args: &'e Json<'_>) {
        match args {
            Json::Str(s) => self.arguments_text(role, tool, Cow::Borrowed(s.as_str())),
            Json::Obj(_) | Json::Arr(_) => self.leaves(role, tool, args),
            _ => {}
        }
    }

    fn arguments_text(
        &mut self,
        role: Option<Role>,
        tool: Option<Cow<'e, str>>,
        text: Cow<'e, str>,
    ) {
        match json::parse_str(&text) {
            Ok(tree @ (Json::Obj(_) | Json::Arr(_))) => self.leaves(role, tool, &tree),
            Ok(Json::Str(inner)) => {
                let inner = inner.as_str().to_owned();
                self.push_opt(role, PartKind::Arguments, tool, None, inner.into());
            }
            _ => self.push_opt(role, PartKind::Arguments, tool, None, text),
        }
    }

    /// Each string of a JSON tree as arguments text, under its key path.
    fn leaves(&mut self, role: Option<Role>, tool: Option<Cow<'e, str>>, tree: &Json<'_>) {
        let mut leaves = Vec::new();
        leaves_of(tree, &mut String::new(), &mut leaves);
        for (key, leaf) in leaves {
            self.push_opt(
                role,
                PartKind::Arguments,
                tool.clone(),
                (!key.is_empty()).then_some(key),
                leaf.into(),
            );
        }
    }

    /// A v2+ embedded stream: each `block-end` block whole, and the pieces of a block that
    /// never ended (a response cut off) joined in order, as the block's text would have been:
    /// a word split across deltas is found, and `-w` sees whole words. Blocks come in the
    /// order they first appear. (The raw-line test keeps such lines: see
    /// [`crate::log::grep::prefilter::LinePrefilter::keeping`].)
    fn stream(&mut self, stream: Option<&'e Json<'_>>) {
        let records = blocks_of(stream);
        let ended: Vec<i64> = records
            .iter()
            .filter_map(|r| r.get("chunk"))
            .filter(|c| c.get("type").and_then(Json::as_str) == Some("block-end"))
            .map(|c| index_of(c))
            .collect();
        let mut joined = Joined {
            blocks: Vec::new(),
            at: self.list.len(),
        };
        for record in records {
            // A `chunk` record's index is its chunk's; a run's is its own.
            let index = record
                .get("chunk")
                .map_or_else(|| index_of(record), index_of);
            let open = !ended.contains(&index);
            match record.get("type").and_then(Json::as_str) {
                Some(t @ ("text-chunks" | "reasoning-chunks")) if open => {
                    let kind = if t == "text-chunks" {
                        PartKind::Text
                    } else {
                        PartKind::Reasoning
                    };
                    for piece in blocks_of(record.get("texts")) {
                        if let Some(p) = piece.as_str() {
                            joined.add(index, kind, None, p);
                        }
                    }
                }
                Some("tool-call-chunks") if open => {
                    let name = str_at(record, "name");
                    for piece in blocks_of(record.get("args")) {
                        if let Some(p) = piece.as_str() {
                            joined.add(index, PartKind::Arguments, name, p);
                        }
                    }
                    joined.add(index, PartKind::Arguments, name, "");
                }
                Some("chunk") => {
                    let Some(c) = record.get("chunk") else {
                        continue;
                    };
                    let text = str_at(c, "text").unwrap_or_default();
                    match c.get("type").and_then(Json::as_str) {
                        Some("block-end") => {
                            self.chunk(c);
                            joined.done(self.list.len());
                        }
                        Some("text-delta") if open => joined.add(index, PartKind::Text, None, text),
                        Some("reasoning-delta") if open => {
                            joined.add(index, PartKind::Reasoning, None, text);
                        }
                        Some("tool-call-delta") if open => {
                            let args = str_at(c, "argumentsDelta").unwrap_or_default();
                            joined.add(index, PartKind::Arguments, str_at(c, "name"), args);
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        // Each joined block goes where it first appeared among the whole ones.
        let whole = std::mem::take(&mut self.list);
        let mut whole = whole.into_iter().enumerate().peekable();
        for block in joined.blocks {
            while let Some((_, part)) = whole.next_if(|(i, _)| *i < block.at) {
                self.list.push(part);
            }
            let tool = block.name.map(Cow::Borrowed);
            if let Some(n) = tool.clone() {
                self.push(Role::Assistant, PartKind::ToolName, None, None, n);
            }
            match block.kind {
                PartKind::Arguments => {
                    self.arguments_text(Some(Role::Assistant), tool, block.text.into());
                }
                kind => self.push(Role::Assistant, kind, None, None, block.text.into()),
            }
        }
        self.list.extend(whole.map(|(_, p)| p));
    }

    /// One v0/v1 `assistant/chunk`: its delta on its own, or its `block-end` block whole.
    fn chunk(&mut self, c: &'e Json<'_>) {
        let text = str_at(c, "text").map(Cow::Borrowed);
        match c.get("type").and_then(Json::as_str) {
            Some("text-delta") => {
                if let Some(t) = text {
                    self.push(Role::Assistant, PartKind::Text, None, None, t);
                }
            }
            Some("reasoning-delta") => {
                if let Some(t) = text {
                    self.push(Role::Assistant, PartKind::Reasoning, None, None, t);
                }
            }
            Some("tool-call-delta") => {
                let name = str_at(c, "name").map(Cow::Borrowed);
                if let Some(n) = name.clone() {
                    self.push(Role::Assistant, PartKind::ToolName, None, None, n);
                }
                if let Some(a) = str_at(c, "argumentsDelta") {
                    self.push(Role::Assistant, PartKind::Arguments, name, None, a.into());
                }
            }
            Some("block-end") => {
                if let Some(b) = c.get("block") {
                    self.block(b, Some(Role::Assistant), PartKind::Text);
                }
            }
            _ => {}
        }
    }
}

/// The pieces of a stream's open blocks, each block's joined in order.
struct Joined<'e> {
    blocks: Vec<OpenBlock<'e>>,
    /// Parts (of the whole list) already in place when the next block first appears.
    at: usize,
}

struct OpenBlock<'e> {
    index: i64,
    kind: PartKind,
    name: Option<&'e str>,
    text: String,
    /// How many parts come before it.
    at: usize,
}

impl<'e> Joined<'e> {
    fn add(&mut self, index: i64, kind: PartKind, name: Option<&'e str>, piece: &str) {
        match self
            .blocks
            .iter_mut()
            .find(|b| b.index == index && b.kind == kind)
        {
            Some(b) => {
                b.text.push_str(piece);
                b.name = b.name.or(name);
            }
            None => self.blocks.push(OpenBlock {
                index,
                kind,
                name,
                text: piece.to_owned(),
                at: self.at,
            }),
        }
    }

    /// `parts` whole parts are now in place: later blocks come after them.
    fn done(&mut self, parts: usize) {
        self.at = parts;
    }
}

/// A stream record's or chunk's block index.
fn index_of(v: &Json<'_>) -> i64 {
    v.get("index").and_then(Json::safe_int).unwrap_or(0)
}

/// The strings of a JSON tree with their key paths (`a.b`, `list[2]`), in document order.
/// Every key is one too (under its own path), and so is every number (as dshs spells it),
/// `true`, `false` and `null`: `--timeout 30` is `timeout` and `30`, both searchable.
fn leaves_of(v: &Json<'_>, path: &mut String, out: &mut Vec<(String, String)>) {
    match v {
        Json::Str(s) => out.push((path.clone(), s.as_str().to_owned())),
        Json::Num(n) => out.push((path.clone(), n.to_string())),
        Json::Bool(b) => out.push((path.clone(), b.to_string())),
        Json::Null => out.push((path.clone(), "null".to_owned())),
        Json::Obj(members) => {
            for (k, child) in members.iter() {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                out.push((path.clone(), k.to_string()));
                leaves_of(child, path, out);
                path.truncate(len);
            }
        }
        Json::Arr(items) => {
            for (i, child) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                leaves_of(child, path, out);
                path.truncate(len);
            }
        }
    }
}
