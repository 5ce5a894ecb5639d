//! A generator of large, realistic, *valid* DSH logs for benchmarks and tests.
//!
//! It writes turns with steps, request headers, assistant messages (v0/v1 with chunk events
//! and packed chunk rows, v2+ with embedded streams), parallel tool calls with results,
//! tool outputs of realistic sizes (mostly ~1–2 KB, a tail to hundreds of KB), tool-result
//! prunes inside turns, system-prompt replacements (v3+) and compactions between turns, in the shapes of the
//! chosen format version, tracking the surface so every replacement is well-formed.
#![allow(dead_code)]

use std::io::{self, Write};

/// A tiny deterministic PRNG (xorshift64*): benchmarks must be reproducible.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const WORDS: &[&str] = &[
    "the",
    "session",
    "surface",
    "compaction",
    "tool",
    "result",
    "model",
    "replace",
    "append",
    "context",
    "harness",
    "log",
    "seq",
    "turn",
    "step",
    "call",
    "file",
    "read",
    "write",
    "patch",
    "test",
    "build",
    "error",
    "fixed",
    "value",
    "config",
    "path",
    "src/main.rs",
    "cargo",
    "line",
    "é",
    "naïve",
    "日本語",
    "quote\"d",
    "back\\slash",
    "tab\tstop",
    "new\nline",
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    System,
    User,
    Assistant,
    ToolResult,
}

#[derive(Clone)]
struct NodeInfo {
    seq: u64,
    kind: Kind,
    tool_calls: u32,
}

pub struct Generator<W: Write> {
    out: W,
    version: u8,
    rng: Rng,
    seq: u64,
    time: u64,
    bytes: u64,
    surface: Vec<NodeInfo>,
    turn: u64,
    /// Tool results on the surface that may be pruned: (seq, turn, step, call id, failed).
    prunable: Vec<(u64, u64, u64, String, bool)>,
    call_counter: u64,
    compaction_counter: u64,
    /// Pathological mode (see [`Generator::pathological`]): no compactions, small outputs,
    /// prunes picked uniformly over the whole surface, nodes indexed by seq.
    spread: Option<Spread>,
}

struct Spread {
    /// seq → position in `surface` (positions never move: no compactions in this mode).
    index: std::collections::HashMap<u64, usize>,
    /// Prunes (tool-result replacements) wanted over the whole log, and written so far.
    replaces: u64,
    done: u64,
    nodes: usize,
}

fn esc(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

impl<W: Write> Generator<W> {
    pub fn new(out: W, version: u8, seed: u64) -> Self {
        Generator {
            out,
            version,
            rng: Rng::new(seed),
            seq: 0,
            time: 1_790_000_000_000,
            bytes: 0,
            surface: Vec::new(),
            turn: 0,
            prunable: Vec::new(),
            call_counter: 0,
            compaction_counter: 0,
            spread: None,
        }
    }

    pub fn bytes_written(&self) -> u64 {
        self.bytes
    }

    pub fn events(&self) -> u64 {
        self.seq
    }

    fn line(&mut self, s: &str) -> io::Result<()> {
        self.out.write_all(s.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.bytes += s.len() as u64 + 1;
        Ok(())
    }

    fn text(&mut self, words: u64) -> String {
        let n = 1 + self.rng.below(words);
        let mut s = String::new();
        for i in 0..n {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(WORDS[self.rng.below(WORDS.len() as u64) as usize]);
        }
        s
    }

    fn event(&mut self, ty: &str, data: &str, tail: &str) -> io::Result<u64> {
        let seq = self.seq;
        self.time += 1 + self.rng.below(50);
        let line = format!(
            r#"{{"type":"{ty}","seq":{seq},"time":{},"data":{data}{tail}}}"#,
            self.time
        );
        self.line(&line)?;
        self.seq += 1;
        Ok(seq)
    }

    fn replace_op(&self, start: u64, end: u64) -> String {
        if self.version >= 3 {
            format!(r#"{{"op":"replace","startSeq":{start},"endSeq":{end}}}"#)
        } else {
            format!(r#"{{"op":"replace","start":{start},"end":{end}}}"#)
        }
    }

    pub fn header(&mut self) -> io::Result<()> {
        let seed = if self.version >= 2 {
            r#","isSeeded":false"#
        } else {
            ""
        };
        let h = format!(
            r#"{{"type":"session","version":{},"id":"bench-{}","createdAt":1790000000000,"cwd":"/workspace/bench"{seed},"delegationDepth":0}}"#,
            self.version, self.version
        );
        self.line(&h)
    }

    /// Write whole turns until at least `target` bytes are written.
    /// A pathological log for the growth benchmark: turns until the surface holds `nodes`
    /// nodes, with `replaces` tool-result replacements (prune + replacing `tool/result`)
    /// spread uniformly over the whole surface as it grows. Tool outputs are short so the
    /// file stays a few hundred MB.
    pub fn pathological(&mut self, nodes: usize, replaces: u64) -> io::Result<()> {
        self.spread = Some(Spread {
            index: std::collections::HashMap::new(),
            replaces,
            done: 0,
            nodes,
        });
        self.header()?;
        while self.surface.len() < nodes {
            self.one_turn()?;
        }
        Ok(())
    }

    /// A log for the rejected-replace benchmark: turns until the surface holds `nodes` nodes
    /// (the only replacements are the occasional system-prompt rewrites), then `replaces` replace markers spanning the whole surface after
    /// the system head, each of which the fold rejects. `reversed`: the endpoints are swapped
    /// (`replace-range-reversed`); otherwise the provenance cites every shadowed seq but the
    /// one in the middle (`replace-missing-shadowed-source`), as two runs.
    pub fn rejected_replaces(
        &mut self,
        nodes: usize,
        replaces: u64,
        reversed: bool,
    ) -> io::Result<()> {
        self.pathological(nodes, 0)?;
        let skip = usize::from(self.surface.first().is_some_and(|n| n.kind == Kind::System));
        let span: Vec<u64> = self.surface[skip..].iter().map(|n| n.seq).collect();
        let (Some(&first), Some(&last)) = (span.first(), span.last()) else {
            return Ok(());
        };
        let mid = span[span.len() / 2];
        let sources = if reversed {
            encode_ranges(&[first])
        } else {
            let mut runs = Vec::new();
            if mid > first {
                runs.push(format!("[{first},{}]", mid - 1));
            }
            if last > mid {
                runs.push(format!("[{},{last}]", mid + 1));
            }
            format!("[{}]", runs.join(","))
        };
        let (start, end) = if reversed {
            (last, first)
        } else {
            (first, last)
        };
        let op = self.replace_op(start, end);
        for _ in 0..replaces {
            let data = format!(
                r#"{{"content":[{{"type":"text","text":"summary"}}],"role":"user","id":"rejected-{}"}}"#,
                self.seq
            );
            self.event(
                "user/message",
                &data,
                &format!(r#","sourceEventSeqs":{sources},"surfaceOp":{op}"#),
            )?;
        }
        Ok(())
    }

    fn push_node(&mut self, node: NodeInfo) {
        if let Some(sp) = &mut self.spread {
            sp.index.insert(node.seq, self.surface.len());
        }
        self.surface.push(node);
    }

    /// Should this step prune? Normal logs: 8%; pathological: keep pace with the target.
    fn want_prune(&mut self) -> bool {
        match &self.spread {
            None => self.rng.chance(8) && self.prunable.len() > 4,
            Some(sp) => {
                !self.prunable.is_empty()
                    && (sp.done as f64)
                        < sp.replaces as f64 * self.surface.len() as f64 / sp.nodes as f64
            }
        }
    }

    pub fn run(&mut self, target: u64) -> io::Result<()> {
        self.header()?;
        while self.bytes < target {
            self.one_turn()?;
            if self.rng.chance(10) && self.surface.len() > 12 {
                self.compaction()?;
            }
        }
        Ok(())
    }

    /// A tool output of realistic size: mostly ~1–2 KB, some larger, a tail to hundreds of KB.
    fn tool_output(&mut self) -> String {
        if self.spread.is_some() {
            return self.text(12);
        }
        let target = match self.rng.below(1000) {
            0..=879 => 900 + self.rng.below(1200),
            880..=979 => 2_000 + self.rng.below(18_000),
            980..=997 => 20_000 + self.rng.below(80_000),
            _ => 100_000 + self.rng.below(300_000),
        } as usize;
        let mut b = String::with_capacity(target + 200);
        while b.len() < target {
            b.push_str(&self.text(24));
            b.push('\n');
        }
        b
    }

    /// v3+: a new system prompt replacing the head system node (as a plugin or a resumed
    /// session does), with the shadowed seq as its provenance.
    fn replace_system_prompt(&mut self, turn: u64, step: u64) -> io::Result<()> {
        let Some(head) = self.surface.first().filter(|n| n.kind == Kind::System) else {
            return Ok(());
        };
        let h = head.seq;
        let source = if self.version >= 4 {
            r#"{"kind":"system-prompt"}"#
        } else {
            r#"{"kind":"plugin","plugin":"@deepseek-ai/dsh-system-prompt"}"#
        };
        let prompt = self.text(200);
        let data = format!(
            r#"{{"turn":{turn},"step":{step},"message":{{"id":"system-{}","role":"system","content":[{{"type":"text","text":{}}}],"source":{source}}}}}"#,
            self.seq,
            esc(&prompt)
        );
        let op = self.replace_op(h, h);
        let s = self.event(
            "system/message",
            &data,
            &format!(r#","sourceEventSeqs":[{h}],"surfaceOp":{op}"#),
        )?;
        if let Some(sp) = &mut self.spread {
            sp.index.remove(&h);
            sp.index.insert(s, 0);
        }
        self.surface[0].seq = s;
        Ok(())
    }

    fn tool_result_message(&mut self, call_id: &str, content: &str, is_error: bool) -> String {
        let id = format!("result-{}", self.seq);
        if self.version >= 4 {
            format!(
                r#"{{"id":"{id}","role":"tool","toolCallId":"{call_id}","isError":{is_error},"source":{{"kind":"tool","callId":"{call_id}"}},"content":[{{"type":"text","text":{content}}}]}}"#
            )
        } else {
            format!(
                r#"{{"id":"{id}","role":"user","source":{{"kind":"tool","callId":"{call_id}"}},"content":[{{"type":"tool-result","toolCallId":"{call_id}","isError":{is_error},"content":[{{"type":"text","text":{content}}}]}}]}}"#
            )
        }
    }

    fn one_turn(&mut self) -> io::Result<()> {
        self.turn += 1;
        let turn = self.turn;
        self.event("turn/start", &format!(r#"{{"turn":{turn}}}"#), "")?;
        let steps = 1 + self.rng.below(4);
        for step in 1..=steps {
            self.step(turn, step, step == steps)?;
        }
        self.event(
            "turn/end",
            &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
            "",
        )?;
        Ok(())
    }

    fn step(&mut self, turn: u64, step: u64, last: bool) -> io::Result<()> {
        self.event(
            "step/start",
            &format!(r#"{{"turn":{turn},"step":{step}}}"#),
            "",
        )?;
        if self.version >= 3 && self.surface.first().is_none_or(|n| n.kind != Kind::System) {
            let source = if self.version >= 4 {
                r#"{"kind":"system-prompt"}"#
            } else {
                r#"{"kind":"plugin","plugin":"@deepseek-ai/dsh-system-prompt"}"#
            };
            let data = format!(
                r#"{{"turn":{turn},"step":{step},"message":{{"id":"system-{}","role":"system","content":[{{"type":"text","text":"You are a coding agent."}}],"source":{source}}}}}"#,
                self.seq
            );
            let s = self.event("system/message", &data, r#","surfaceOp":"append""#)?;
            self.push_node(NodeInfo {
                seq: s,
                kind: Kind::System,
                tool_calls: 0,
            });
        }
        if self.version >= 3 && step == 1 && self.rng.chance(3) {
            self.replace_system_prompt(turn, step)?;
        }
        if step == 1 {
            let words = self.text(60);
            let user = format!(
                r#"{{"id":"user-{}","role":"user","content":[{{"type":"text","text":{}}}],"source":{{"kind":"user"}}}}"#,
                self.seq,
                esc(&words)
            );
            let s = self.event("user/message", &user, r#","surfaceOp":"append""#)?;
            self.push_node(NodeInfo {
                seq: s,
                kind: Kind::User,
                tool_calls: 0,
            });
        }
        let system = if self.version <= 2 {
            r#","system":"You are a coding agent.""#
        } else {
            ""
        };
        let reason = if step == 1 {
            "initial"
        } else if self.version >= 2 {
            "series"
        } else {
            "resume"
        };
        self.event(
            "request/header",
            &format!(
                r#"{{"header":{{"config":{{"provider":"deepseek","model":"deepseek-v4"}}{system}}},"reason":"{reason}"}}"#
            ),
            "",
        )?;
        self.event(
            "request/context",
            r#"{"provider":"deepseek","model":"deepseek-v4"}"#,
            "",
        )?;
        // A prune of an old tool result, inside the turn.
        while self.want_prune() {
            self.prune()?;
        }
        let calls = if last { 0 } else { 1 + self.rng.below(3) };
        let mut content = Vec::new();
        let reasoning = self.text(40);
        content.push(format!(
            r#"{{"type":"reasoning","text":{}}}"#,
            esc(&reasoning)
        ));
        let answer = self.text(80);
        content.push(format!(r#"{{"type":"text","text":{}}}"#, esc(&answer)));
        let mut ids = Vec::new();
        for _ in 0..calls {
            self.call_counter += 1;
            let id = format!("call-{}", self.call_counter);
            let args = format!(r#"{{"path":"src/file{}.rs"}}"#, self.rng.below(100));
            content.push(format!(
                r#"{{"type":"tool-call","id":"{id}","name":"read","arguments":{}}}"#,
                esc(&args)
            ));
            ids.push((id, args));
        }
        let chunk_seqs = if self.version <= 1 {
            self.chunks(turn, step, &answer)?
        } else {
            Vec::new()
        };
        let stream = if self.version >= 2 {
            format!(
                r#","stream":[{{"type":"chunk","time":0,"chunk":{{"type":"block-start","index":0,"blockType":"text"}}}},{{"type":"text-chunks","time0":0,"index":0,"dt":[],"texts":[{}]}}]"#,
                esc(&answer)
            )
        } else {
            String::new()
        };
        let message = format!(
            r#"{{"turn":{turn},"step":{step},"message":{{"id":"assistant-{}","role":"assistant","content":[{}],"source":{{"kind":"model","provider":"deepseek","model":"deepseek-v4"}}}},"usage":{{"inputTokens":{},"outputTokens":{}}}{stream}}}"#,
            self.seq,
            content.join(","),
            1000 + self.rng.below(9000),
            10 + self.rng.below(500)
        );
        let provenance = if self.version <= 2 && !chunk_seqs.is_empty() {
            format!(r#","sourceEventSeqs":{}"#, encode_ranges(&chunk_seqs))
        } else {
            String::new()
        };
        let s = self.event(
            "assistant/message",
            &message,
            &format!(r#"{provenance},"surfaceOp":"append""#),
        )?;
        self.push_node(NodeInfo {
            seq: s,
            kind: Kind::Assistant,
            tool_calls: calls as u32,
        });
        for (id, args) in ids {
            let call = self.event(
                "tool/call",
                &format!(
                    r#"{{"turn":{turn},"step":{step},"callId":"{id}","name":"read","arguments":{}}}"#,
                    esc(&args)
                ),
                "",
            )?;
            let body = self.tool_output();
            let is_error = self.rng.chance(5);
            let message = self.tool_result_message(&id, &esc(&body), is_error);
            let error = if is_error {
                r#","error":{"name":"ToolError","code":"READ_FAILED"}"#
            } else {
                ""
            };
            let r = self.event(
                "tool/result",
                &format!(r#"{{"turn":{turn},"step":{step},"message":{message}{error}}}"#),
                &format!(r#","sourceEventSeqs":[{call}],"surfaceOp":"append""#),
            )?;
            self.push_node(NodeInfo {
                seq: r,
                kind: Kind::ToolResult,
                tool_calls: 0,
            });
            self.prunable.push((r, turn, step, id, is_error));
        }
        self.event(
            "step/end",
            &format!(r#"{{"turn":{turn},"step":{step}}}"#),
            "",
        )?;
        Ok(())
    }

    /// v0/v1: the assistant stream as chunk events, with runs stored as packed rows.
    fn chunks(&mut self, turn: u64, step: u64, text: &str) -> io::Result<Vec<u64>> {
        let mut seqs = Vec::new();
        let start = format!(
            r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"block-start","index":0,"blockType":"text"}}}}"#
        );
        seqs.push(self.event("assistant/chunk", &start, "")?);
        let pieces: Vec<&str> = text.split(' ').collect();
        if pieces.len() >= 3 {
            let seq0 = self.seq;
            let time0 = self.time + 1;
            let dt: Vec<String> = (1..pieces.len()).map(|_| "1".to_owned()).collect();
            let texts: Vec<String> = pieces.iter().map(|p| esc(&format!("{p} "))).collect();
            let row = format!(
                r#"{{"type":"text-chunks","seq0":{seq0},"time0":{time0},"data":{{"turn":{turn},"step":{step},"index":0,"dt":[{}],"texts":[{}]}}}}"#,
                dt.join(","),
                texts.join(",")
            );
            self.line(&row)?;
            for k in 0..pieces.len() as u64 {
                seqs.push(seq0 + k);
            }
            self.seq += pieces.len() as u64;
            self.time = time0 + pieces.len() as u64 - 1;
        }
        let end = format!(
            r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"finish","reason":{{"kind":"stop"}}}}}}"#
        );
        seqs.push(self.event("assistant/chunk", &end, "")?);
        Ok(seqs)
    }

    fn prune(&mut self) -> io::Result<()> {
        let (r, turn, step, id, is_error) = if self.spread.is_some() {
            let i = self.rng.below(self.prunable.len() as u64) as usize;
            self.prunable.swap_remove(i)
        } else {
            let i = self.rng.below(self.prunable.len() as u64 / 2) as usize;
            self.prunable.remove(i)
        };
        let at = match &mut self.spread {
            Some(sp) => {
                sp.done += 1;
                sp.index.remove(&r)
            }
            None => self.surface.iter().position(|n| n.seq == r),
        };
        let Some(at) = at else {
            return Ok(());
        };
        let tokens = 100 + self.rng.below(900);
        self.event(
            "compaction/prune",
            &format!(
                r#"{{"shadowedRange":{{"start":{r},"end":{r}}},"shadowedSeqs":[{r}],"shadowedTokenCount":{tokens}}}"#
            ),
            "",
        )?;
        // Same data as the pruned result except the content; ids must match the original.
        let message = self.tool_result_message(&id, r#""[pruned]""#, is_error);
        let message = message.replacen(&format!("result-{}", self.seq), &format!("result-{r}"), 1);
        let error = if is_error {
            r#","error":{"name":"ToolError","code":"READ_FAILED"}"#
        } else {
            ""
        };
        let op = self.replace_op(r, r);
        let s = self.event(
            "tool/result",
            &format!(r#"{{"turn":{turn},"step":{step},"message":{message}{error}}}"#),
            &format!(r#","sourceEventSeqs":[{r}],"surfaceOp":{op}"#),
        )?;
        self.surface[at].seq = s;
        if let Some(sp) = &mut self.spread {
            sp.index.insert(s, at);
        }
        Ok(())
    }

    /// A compaction between turns over a balanced range of older nodes.
    fn compaction(&mut self) -> io::Result<()> {
        // Balanced cut points: before a user message (every turn starts balanced).
        let first = usize::from(self.surface.first().is_some_and(|n| n.kind == Kind::System));
        let users: Vec<usize> = (first..self.surface.len())
            .filter(|&i| self.surface[i].kind == Kind::User)
            .collect();
        if users.len() < 3 {
            return Ok(());
        }
        let a = users[0];
        let b = users[users.len() / 2] - 1; // end just before a later turn's user message
        if b < a {
            return Ok(());
        }
        let shadowed: Vec<u64> = self.surface[a..=b].iter().map(|n| n.seq).collect();
        let (start, end) = (shadowed[0], shadowed[shadowed.len() - 1]);
        self.compaction_counter += 1;
        let cid = format!("compaction-{}", self.compaction_counter);
        let st = self.event(
            "compaction/start",
            &format!(r#"{{"compactionId":"{cid}","turn":null}}"#),
            "",
        )?;
        let list: Vec<String> = shadowed.iter().map(u64::to_string).collect();
        let summary_text = self.text(120);
        let sm = self.event(
            "compaction/summary",
            &format!(
                r#"{{"compactionId":"{cid}","summary":[{{"type":"text","text":{}}}],"shadowedRange":{{"start":{start},"end":{end}}},"shadowedSeqs":[{}],"shadowedTokenCount":{},"provider":"deepseek","model":"deepseek-v4"}}"#,
                esc(&summary_text),
                list.join(","),
                shadowed.len() * 300
            ),
            "",
        )?;
        let source = if self.version >= 4 {
            format!(r#"{{"kind":"compact-checkpoint","compactionId":"{cid}"}}"#)
        } else {
            format!(r#"{{"kind":"plugin","plugin":"compact","compactionId":"{cid}"}}"#)
        };
        let data = format!(
            r#"{{"content":[{{"type":"text","text":"<compacted-summary>"}},{{"type":"text","text":{}}},{{"type":"text","text":"</compacted-summary>"}}],"source":{source},"role":"user","id":"checkpoint-{}"}}"#,
            esc(&summary_text),
            self.seq
        );
        let op = self.replace_op(start, end);
        let s = self.event(
            "user/message",
            &data,
            &format!(
                r#","sourceEventSeqs":[{st},{sm},{}],"surfaceOp":{op}"#,
                list.join(",")
            ),
        )?;
        self.surface.splice(
            a..=b,
            [NodeInfo {
                seq: s,
                kind: Kind::User,
                tool_calls: 0,
            }],
        );
        self.prunable.retain(|(r, ..)| !shadowed.contains(r));
        self.event(
            "compaction/end",
            &format!(r#"{{"compactionId":"{cid}","turn":null}}"#),
            "",
        )?;
        Ok(())
    }
}

/// Range-encode a strictly increasing list as DSH writers do (§5.3): runs of ≥ 3 → pairs.
pub fn encode_ranges(seqs: &[u64]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < seqs.len() {
        let mut j = i;
        while j + 1 < seqs.len() && seqs[j + 1] == seqs[j] + 1 {
            j += 1;
        }
        if j - i + 1 >= 3 {
            parts.push(format!("[{},{}]", seqs[i], seqs[j]));
        } else {
            for s in &seqs[i..=j] {
                parts.push(s.to_string());
            }
        }
        i = j + 1;
    }
    format!("[{}]", parts.join(","))
}
