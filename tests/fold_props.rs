//! Property tests of the surface fold: random *valid* logs of every format version (turns,
//! steps, assistant messages with tool calls, tool/call + tool/result, user, system and
//! developer messages, compaction checkpoints, tool-result prunes, v0/v1 packed chunk rows)
//! must validate without a single finding, fold to the surface an independent naive replay
//! computes, and replay a prefix (`stop_after`) exactly like the truncated log. Cut at any
//! byte, they repair to a valid log that keeps every committed event byte for byte (and
//! repair is idempotent); provenance lists survive the range encoding of §5.3.
//!
//! `Builder` (the generator) and `naive` (the reference replay, independent of the
//! production fold) are meant for reuse by further properties (e.g. `compact`).

use std::collections::HashMap;

use dshs::log::Finding;
use dshs::log::append::Planned;
use dshs::log::closers::CloserKind;
use dshs::log::compact::{self, Lookout, Minted, PlanError, Refusal as CRefusal, Request};
use dshs::log::derive::Deriver;
use dshs::log::input::zstd::{ZstdReader, encode_frame};
use dshs::log::scan::{self, Scan, ScanOptions, Status, scan};
use dshs::log::surface::Replacement;
use dshs::log::{json, repair, rows, write};
use proptest::prelude::*;
use serde_json::Value;

// ---------------------------------------------------------------------------------------
// What the generator draws
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Item {
    /// A user message between turns.
    User,
    /// A compaction between turns over a range picked by the two numbers.
    Compact(u8, u8),
    Turn(Vec<TurnItem>),
}

#[derive(Debug, Clone)]
enum TurnItem {
    Step(Vec<StepItem>),
    User,
    Compact(u8, u8),
    /// Prune the n-th tool result on the surface; `respell` rewrites the unchanged fields
    /// with other key order and number spelling.
    Prune {
        pick: u8,
        respell: bool,
    },
    RequestHeader,
}

#[derive(Debug, Clone)]
enum StepItem {
    /// An assistant message with `calls` tool calls (each started and answered), empty
    /// content when `empty` and no calls; v0/v1: preceded by a packed row of `chunks` deltas.
    Assistant { calls: u8, empty: bool, chunks: u8 },
    /// v3+: a system message; replaces a system head when `replace_head` (else appends).
    System { replace_head: bool },
    /// v4: a developer message.
    Developer,
}

fn step_item() -> impl Strategy<Value = StepItem> {
    prop_oneof![
        4 => (0u8..3, any::<bool>(), 0u8..4)
            .prop_map(|(calls, empty, chunks)| StepItem::Assistant { calls, empty, chunks }),
        1 => any::<bool>().prop_map(|replace_head| StepItem::System { replace_head }),
        1 => Just(StepItem::Developer),
    ]
}

fn turn_item() -> impl Strategy<Value = TurnItem> {
    prop_oneof![
        4 => prop::collection::vec(step_item(), 1..4).prop_map(TurnItem::Step),
        1 => Just(TurnItem::User),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| TurnItem::Compact(a, b)),
        2 => (any::<u8>(), any::<bool>()).prop_map(|(pick, respell)| TurnItem::Prune { pick, respell }),
        1 => Just(TurnItem::RequestHeader),
    ]
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        1 => Just(Item::User),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Item::Compact(a, b)),
        4 => prop::collection::vec(turn_item(), 0..6).prop_map(Item::Turn),
    ]
}

// ---------------------------------------------------------------------------------------
// Building a valid log of one version
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    User,
    Assistant,
    Result,
    System,
    Developer,
}

/// What a tool result was written with (to write its prune).
#[derive(Debug, Clone)]
struct ResultFields {
    turn: u64,
    step: u64,
    call: String,
    id: String,
}

struct Builder {
    v: usize,
    lines: Vec<String>,
    seq: u64,
    /// The generator's own view of the surface (to pick valid ranges).
    surface: Vec<(u64, Kind)>,
    results: HashMap<u64, ResultFields>,
    turn: u64,
    calls: u64,
    compactions: u64,
}

impl Builder {
    fn new(v: usize) -> Builder {
        let header = if v <= 1 {
            format!(
                r#"{{"type":"session","version":{v},"id":"prop","createdAt":1,"delegationDepth":0}}"#
            )
        } else {
            format!(
                r#"{{"type":"session","version":{v},"id":"prop","createdAt":1,"delegationDepth":0,"isSeeded":false}}"#
            )
        };
        Builder {
            v,
            lines: vec![header],
            seq: 0,
            surface: Vec::new(),
            results: HashMap::new(),
            turn: 0,
            calls: 0,
            compactions: 0,
        }
    }

    fn keys(&self) -> (&'static str, &'static str) {
        if self.v <= 2 {
            ("start", "end")
        } else {
            ("startSeq", "endSeq")
        }
    }

    /// Emit one event; `extra` holds further envelope members (with a leading comma).
    fn emit(&mut self, ty: &str, data: &str, extra: &str) -> u64 {
        let seq = self.seq;
        self.lines.push(format!(
            r#"{{"type":"{ty}","seq":{seq},"time":{},"data":{data}{extra}}}"#,
            1000 + seq
        ));
        self.seq += 1;
        seq
    }

    fn append(&mut self, ty: &str, data: &str, sources: Option<&[u64]>, kind: Kind) -> u64 {
        let extra = match sources {
            Some(s) => format!(r#","sourceEventSeqs":{},"surfaceOp":"append""#, list(s)),
            None => r#","surfaceOp":"append""#.to_owned(),
        };
        let seq = self.emit(ty, data, &extra);
        self.surface.push((seq, kind));
        seq
    }

    /// Replace surface positions `i..=j` by a new event.
    fn replace(
        &mut self,
        ty: &str,
        data: &str,
        i: usize,
        j: usize,
        lead: &[u64],
        kind: Kind,
    ) -> u64 {
        let shadowed: Vec<u64> = self.surface[i..=j].iter().map(|n| n.0).collect();
        let mut sources = lead.to_vec();
        sources.extend(&shadowed);
        let (sk, ek) = self.keys();
        let extra = format!(
            r#","sourceEventSeqs":{},"surfaceOp":{{"op":"replace","{sk}":{},"{ek}":{}}}"#,
            list(&sources),
            shadowed[0],
            shadowed[shadowed.len() - 1]
        );
        let seq = self.emit(ty, data, &extra);
        self.surface.splice(i..=j, [(seq, kind)]);
        seq
    }

    fn user(&mut self) {
        let s = self.seq;
        let data = format!(
            r#"{{"id":"u{s}","role":"user","content":[{{"type":"text","text":"question {s}"}}],"source":{{"kind":"user"}}}}"#
        );
        self.append("user/message", &data, None, Kind::User);
    }

    fn head_is_system(&self) -> bool {
        self.v >= 3 && self.surface.first().is_some_and(|n| n.1 == Kind::System)
    }

    /// A compaction bracket replacing a range of the current surface (§15.1).
    fn compact(&mut self, a: u8, b: u8, turn: Option<u64>) {
        let first = usize::from(self.head_is_system());
        if self.surface.len() <= first {
            return;
        }
        let i = first + usize::from(a) % (self.surface.len() - first);
        let j = i + usize::from(b) % (self.surface.len() - i);
        self.compactions += 1;
        let id = format!("cmp-{}", self.compactions);
        let turn = turn.map_or_else(|| "null".to_owned(), |t| t.to_string());
        let shadowed: Vec<u64> = self.surface[i..=j].iter().map(|n| n.0).collect();
        let start = self.emit(
            "compaction/start",
            &format!(r#"{{"compactionId":"{id}","turn":{turn}}}"#),
            "",
        );
        let summary = self.emit(
            "compaction/summary",
            &format!(
                r#"{{"compactionId":"{id}","summary":[{{"type":"text","text":"summary"}}],"shadowedRange":{{"start":{},"end":{}}},"shadowedSeqs":{},"shadowedTokenCount":10,"provider":"p","model":"m"}}"#,
                shadowed[0],
                shadowed[shadowed.len() - 1],
                list(&shadowed)
            ),
            "",
        );
        let source = if self.v >= 4 {
            format!(r#"{{"kind":"compact-checkpoint","compactionId":"{id}"}}"#)
        } else {
            format!(r#"{{"kind":"plugin","plugin":"compact","compactionId":"{id}"}}"#)
        };
        let data = format!(
            r#"{{"content":[{{"type":"text","text":"checkpoint"}}],"source":{source},"role":"user","id":"ckpt-{id}"}}"#
        );
        self.replace("user/message", &data, i, j, &[start, summary], Kind::User);
        self.emit(
            "compaction/end",
            &format!(r#"{{"compactionId":"{id}","turn":{turn}}}"#),
            "",
        );
    }

    fn result_data(&self, f: &ResultFields, text: &str, respell: bool) -> String {
        // With `respell` the step comes first and the numbers are spelled differently.
        let head = if respell {
            format!(r#""step":{}e0,"turn":{}.0"#, f.step, f.turn)
        } else {
            format!(r#""turn":{},"step":{}"#, f.turn, f.step)
        };
        let (call, id) = (&f.call, &f.id);
        let source = if respell {
            format!(r#"{{"callId":"{call}","kind":"tool"}}"#)
        } else {
            format!(r#"{{"kind":"tool","callId":"{call}"}}"#)
        };
        let blocks = format!(r#"[{{"type":"text","text":"{text}"}}]"#);
        if self.v <= 3 {
            format!(
                r#"{{{head},"message":{{"id":"{id}","role":"user","content":[{{"type":"tool-result","toolCallId":"{call}","content":{blocks},"isError":false}}],"source":{source}}}}}"#
            )
        } else {
            format!(
                r#"{{{head},"message":{{"id":"{id}","role":"tool","toolCallId":"{call}","isError":false,"content":{blocks},"source":{source}}}}}"#
            )
        }
    }

    /// A tool-result prune (§15.2): `compaction/prune`, then a one-node result replacement.
    fn prune(&mut self, pick: u8, respell: bool) {
        let results: Vec<usize> = (0..self.surface.len())
            .filter(|i| self.surface[*i].1 == Kind::Result)
            .collect();
        if results.is_empty() {
            return;
        }
        let i = results[usize::from(pick) % results.len()];
        let target = self.surface[i].0;
        self.emit(
            "compaction/prune",
            &format!(
                r#"{{"shadowedRange":{{"start":{target},"end":{target}}},"shadowedSeqs":[{target}],"shadowedTokenCount":5}}"#
            ),
            "",
        );
        let fields = self.results[&target].clone();
        let data = self.result_data(&fields, "[pruned]", respell);
        let seq = self.replace("tool/result", &data, i, i, &[], Kind::Result);
        self.results.insert(seq, fields);
    }

    fn step(&mut self, step: u64, items: &[StepItem]) {
        let turn = self.turn;
        let ts = format!(r#"{{"turn":{turn},"step":{step}}}"#);
        self.emit("step/start", &ts, "");
        for item in items {
            match *item {
                StepItem::Assistant {
                    calls,
                    empty,
                    chunks,
                } => self.assistant(step, calls, empty, chunks),
                StepItem::System { replace_head } if self.v >= 3 => {
                    let s = self.seq;
                    let source = if self.v >= 4 {
                        r#"{"kind":"system-prompt"}"#
                    } else {
                        r#"{"kind":"plugin","plugin":"@deepseek-ai/dsh-system-prompt"}"#
                    };
                    let data = format!(
                        r#"{{"turn":{turn},"step":{step},"message":{{"id":"s{s}","role":"system","content":[{{"type":"text","text":"be brief"}}],"source":{source}}}}}"#
                    );
                    if replace_head && self.head_is_system() {
                        self.replace("system/message", &data, 0, 0, &[], Kind::System);
                    } else {
                        self.append("system/message", &data, None, Kind::System);
                    }
                }
                StepItem::Developer if self.v >= 4 => {
                    let s = self.seq;
                    let data = format!(
                        r#"{{"turn":{turn},"step":{step},"message":{{"id":"d{s}","role":"developer","content":[{{"type":"text","text":"context"}}],"source":{{"kind":"runtime-context"}}}}}}"#
                    );
                    self.append("developer/message", &data, None, Kind::Developer);
                }
                StepItem::System { .. } | StepItem::Developer => self.user(),
            }
        }
        self.emit("step/end", &ts, "");
    }

    fn assistant(&mut self, step: u64, calls: u8, empty: bool, chunks: u8) {
        let turn = self.turn;
        // v0/v1: the streamed deltas, packed into one row (§5.2), cited as provenance.
        let mut sources = None;
        if self.v <= 1 && chunks > 0 {
            let n = u64::from(chunks);
            let texts: Vec<String> = (0..n).map(|k| format!(r#""t{k}""#)).collect();
            let dt: Vec<&str> = (1..n).map(|_| "1").collect();
            self.lines.push(format!(
                r#"{{"type":"text-chunks","seq0":{},"time0":5,"data":{{"turn":{turn},"step":{step},"index":0,"dt":[{}],"texts":[{}]}}}}"#,
                self.seq,
                dt.join(","),
                texts.join(",")
            ));
            sources = Some((self.seq..self.seq + n).collect::<Vec<u64>>());
            self.seq += n;
        }
        let ids: Vec<String> = (0..calls)
            .map(|_| {
                self.calls += 1;
                format!("call-{}", self.calls)
            })
            .collect();
        let mut blocks: Vec<String> = Vec::new();
        if !empty || calls > 0 {
            blocks.push(r#"{"type":"text","text":"answer"}"#.to_owned());
        }
        for id in &ids {
            blocks.push(format!(
                r#"{{"type":"tool-call","id":"{id}","name":"bash","arguments":"{{\"cmd\":\"ls\"}}"}}"#
            ));
        }
        let s = self.seq;
        let stream = if self.v >= 2 { r#","stream":[]"# } else { "" };
        let data = format!(
            r#"{{"turn":{turn},"step":{step},"message":{{"id":"a{s}","role":"assistant","content":[{}],"source":{{"kind":"model","provider":"p","model":"m"}}}}{stream}}}"#,
            blocks.join(",")
        );
        self.append(
            "assistant/message",
            &data,
            sources.as_deref(),
            Kind::Assistant,
        );
        for id in ids {
            let call = self.emit(
                "tool/call",
                &format!(
                    r#"{{"turn":{turn},"step":{step},"callId":"{id}","name":"bash","arguments":"{{\"cmd\":\"ls\"}}"}}"#
                ),
                "",
            );
            let fields = ResultFields {
                turn,
                step,
                call: id.clone(),
                id: format!("r-{id}"),
            };
            let data = self.result_data(&fields, "file.txt", false);
            let seq = self.append("tool/result", &data, Some(&[call]), Kind::Result);
            self.results.insert(seq, fields);
        }
    }

    fn turn(&mut self, items: &[TurnItem]) {
        self.turn += 1;
        let t = self.turn;
        self.emit("turn/start", &format!(r#"{{"turn":{t}}}"#), "");
        let mut step = 0;
        for item in items {
            match item {
                TurnItem::Step(steps) => {
                    step += 1;
                    self.step(step, steps);
                }
                TurnItem::User => self.user(),
                TurnItem::Compact(a, b) => self.compact(*a, *b, Some(t)),
                TurnItem::Prune { pick, respell } => self.prune(*pick, *respell),
                TurnItem::RequestHeader => {
                    self.emit(
                        "request/header",
                        r#"{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial"}"#,
                        "",
                    );
                }
            }
        }
        self.emit(
            "turn/end",
            &format!(r#"{{"turn":{t},"reason":{{"kind":"completed"}}}}"#),
            "",
        );
    }

    fn build(v: usize, items: &[Item]) -> Builder {
        let mut b = Builder::new(v);
        for item in items {
            match item {
                Item::User => b.user(),
                Item::Compact(x, y) => b.compact(*x, *y, None),
                Item::Turn(t) => b.turn(t),
            }
        }
        b
    }
}

fn list(seqs: &[u64]) -> String {
    let items: Vec<String> = seqs.iter().map(u64::to_string).collect();
    format!("[{}]", items.join(","))
}

// ---------------------------------------------------------------------------------------
// The independent model: a Vec replay of the surface markers, straight from the text
// ---------------------------------------------------------------------------------------

#[derive(Debug, Default)]
struct Naive {
    nodes: Vec<u64>,
    replacements: Vec<Replacement>,
    events: u64,
}

/// Replay the log's surface markers for every event with seq ≤ `upto`. The logs are valid,
/// so no rule needs checking: only the marker semantics of §11.2 step 7.
fn naive(v: usize, lines: &[String], upto: u64) -> Naive {
    let eligible: &[&str] = match v {
        0..=2 => &["user/message", "assistant/message", "tool/result"],
        3 => &[
            "user/message",
            "assistant/message",
            "tool/result",
            "system/message",
        ],
        _ => &[
            "user/message",
            "assistant/message",
            "tool/result",
            "system/message",
            "developer/message",
        ],
    };
    let (sk, ek) = if v <= 2 {
        ("start", "end")
    } else {
        ("startSeq", "endSeq")
    };
    let mut m = Naive::default();
    for line in &lines[1..] {
        let row: Value = serde_json::from_str(line).expect("generated JSON");
        if let Some(seq0) = row["seq0"].as_u64() {
            let members = row["data"]["texts"].as_array().map_or(0, Vec::len) as u64;
            m.events += members.min(upto.saturating_add(1).saturating_sub(seq0));
            continue;
        }
        let seq = row["seq"].as_u64().expect("seq");
        if seq > upto {
            break;
        }
        m.events += 1;
        let ty = row["type"].as_str().unwrap_or_default();
        if !eligible.contains(&ty) {
            continue;
        }
        match &row["surfaceOp"] {
            Value::String(s) if s == "append" => m.nodes.push(seq),
            Value::Object(op) => {
                let (s, e) = (op[sk].as_u64().unwrap(), op[ek].as_u64().unwrap());
                let i = m
                    .nodes
                    .iter()
                    .position(|n| *n == s)
                    .expect("start on surface");
                let j = m
                    .nodes
                    .iter()
                    .position(|n| *n == e)
                    .expect("end on surface");
                let shadowed: Vec<u64> = m.nodes.splice(i..=j, [seq]).collect();
                m.replacements.push(Replacement {
                    seq,
                    start: s,
                    end: e,
                    shadowed,
                });
            }
            other => panic!("generated an invalid surfaceOp {other}"),
        }
    }
    m
}

fn run(text: &str, stop_after: Option<u64>) -> (Scan, Vec<Finding>) {
    let opts = ScanOptions {
        stop_after,
        record_replacements: true,
        ..ScanOptions::default()
    };
    let mut findings = Vec::new();
    let s = scan(text.as_bytes(), None, &opts, &mut findings, &mut ()).expect("in memory");
    (s, findings)
}

fn text_of(lines: &[String]) -> String {
    let mut out = String::new();
    for l in lines {
        out.push_str(l);
        out.push('\n');
    }
    out
}

fn codes(f: &[Finding]) -> Vec<&'static str> {
    f.iter().map(|f| f.code.as_str()).collect()
}

// ---------------------------------------------------------------------------------------
// The properties
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn random_valid_logs_fold_like_the_naive_model(
        v in 0usize..5,
        items in prop::collection::vec(item(), 0..8),
        picks in prop::collection::vec(any::<u16>(), 0..6),
    ) {
        let b = Builder::build(v, &items);
        let text = text_of(&b.lines);

        // 1. Valid, without a single finding.
        let (s, f) = run(&text, None);
        prop_assert!(f.is_empty(), "v{}: {:#?}\n{}", v, f, text);
        prop_assert_eq!(s.status(), Status::Valid);
        prop_assert!(!s.open_turn());

        // 2. The surface of an independent replay.
        let model = naive(v, &b.lines, u64::MAX);
        let state = s.state.as_ref().unwrap();
        prop_assert_eq!(s.events(), b.seq);
        prop_assert_eq!(model.events, b.seq);
        prop_assert_eq!(state.surface.seqs(), model.nodes.clone());
        prop_assert_eq!(state.surface.seqs(), b.surface.iter().map(|n| n.0).collect::<Vec<_>>());
        prop_assert_eq!(state.surface.replacements().unwrap(), model.replacements.as_slice());
        prop_assert_eq!(state.surface.replace_generation(), model.replacements.len() as u64);
        prop_assert_eq!(s.surface_nodes(), model.nodes.len());

        if b.seq == 0 {
            return Ok(());
        }
        // Where each line ends, as the last seq it holds (packed rows hold several).
        let mut line_last = Vec::new();
        let mut next = 0u64;
        for l in &b.lines[1..] {
            let row: Value = serde_json::from_str(l).unwrap();
            next += row["data"]["texts"].as_array().filter(|_| row.get("seq0").is_some()).map_or(1, |t| t.len() as u64);
            line_last.push(next - 1);
        }
        for p in picks {
            // 3. `stop_after` = the naive replay of the prefix, even inside a packed row.
            let k = u64::from(p) % b.seq;
            let (at, f_at) = run(&text, Some(k));
            let prefix = naive(v, &b.lines, k);
            prop_assert!(!at.stop_not_reached);
            let at_state = at.state.as_ref().unwrap();
            prop_assert_eq!(at.events(), k + 1, "v{} --at {}", v, k);
            prop_assert_eq!(at.events(), prefix.events);
            prop_assert_eq!(at_state.surface.seqs(), prefix.nodes.clone(), "v{} --at {}", v, k);
            prop_assert_eq!(at_state.surface.replacements().unwrap(), prefix.replacements.as_slice());

            // 4. At a line boundary it is exactly the truncated log.
            let line = line_last.partition_point(|last| *last < k);
            let k = line_last[line];
            let (at, f_at2) = if k == u64::from(p) % b.seq { (at, f_at) } else { run(&text, Some(k)) };
            let (cut, f_cut) = run(&text_of(&b.lines[..line + 2]), None);
            prop_assert_eq!(codes(&f_at2), codes(&f_cut), "v{} --at {}", v, k);
            prop_assert_eq!(at.events(), cut.events());
            prop_assert_eq!(at.open_turn(), cut.open_turn());
            prop_assert_eq!(at.committed_bytes, cut.committed_bytes);
            prop_assert_eq!(at.status(), cut.status());
            let (a, c) = (at.state.as_ref().unwrap(), cut.state.as_ref().unwrap());
            prop_assert_eq!(a.surface.seqs(), c.surface.seqs());
            prop_assert_eq!(a.surface.replacements().unwrap(), c.surface.replacements().unwrap());
        }
    }
}

/// The generator really produces what the properties claim to cover (so they cannot pass
/// vacuously on trivial logs).
#[test]
fn generator_covers_every_feature_in_every_version() {
    let step = vec![
        StepItem::System {
            replace_head: false,
        },
        StepItem::Developer,
        StepItem::Assistant {
            calls: 2,
            empty: false,
            chunks: 3,
        },
        StepItem::Assistant {
            calls: 0,
            empty: true,
            chunks: 0,
        },
        StepItem::System { replace_head: true },
    ];
    let items = vec![
        Item::User,
        Item::Turn(vec![
            TurnItem::RequestHeader,
            TurnItem::Step(step.clone()),
            TurnItem::Prune {
                pick: 1,
                respell: true,
            },
            TurnItem::Prune {
                pick: 0,
                respell: false,
            },
            TurnItem::Compact(0, 1),
        ]),
        Item::Compact(3, 200),
        Item::Turn(vec![TurnItem::Step(step), TurnItem::User]),
    ];
    for v in 0..5 {
        let b = Builder::build(v, &items);
        let text = text_of(&b.lines);
        let (s, f) = run(&text, None);
        assert!(f.is_empty(), "v{v}: {f:#?}\n{text}");
        let state = s.state.unwrap();
        assert_eq!(state.surface.seqs(), naive(v, &b.lines, u64::MAX).nodes);
        // Two prunes and at least two compactions (plus a head swap in v3+).
        assert!(state.surface.replace_generation() >= 4, "v{v}");
        assert!(text.contains("compaction/prune") && text.contains("compaction/summary"));
        assert_eq!(text.contains("text-chunks"), v <= 1, "v{v}");
        assert_eq!(text.contains("system/message"), v >= 3, "v{v}");
        assert_eq!(text.contains("developer/message"), v >= 4, "v{v}");
        assert!(
            text.contains(r#""step":1e0,"turn":2.0"#) || text.contains(r#""step":1e0,"turn":1.0"#),
            "v{v}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Repair of a generated log cut at any byte (a crash at any moment of the writer)
// ---------------------------------------------------------------------------------------

/// Repair `text` cut after `cut` bytes, in memory and through the real writer; checks every
/// guarantee and returns the repaired log.
fn repair_cut(v: usize, b: &Builder, text: &str, cut: usize) -> Result<String, TestCaseError> {
    let torn = &text[..cut];
    let (s, f) = run(torn, None);
    let header_end = b.lines[0].len() + 1;
    if cut < header_end {
        // No complete header: not a log dshs can repair (nothing to keep).
        prop_assert!(repair::plan(&s).is_err(), "v{} cut {}", v, cut);
        return Ok(torn.to_owned());
    }
    let plan = match repair::plan(&s) {
        Ok(p) => p,
        Err(e) => return Err(TestCaseError::fail(format!("v{v} cut {cut}: {e:?} {f:#?}"))),
    };
    // Every complete line of a valid log is committed: only the torn fragment is cut.
    let complete = torn.rfind('\n').map_or(0, |i| i + 1);
    prop_assert_eq!(plan.keep, complete as u64, "v{} cut {}", v, cut);
    prop_assert_eq!(plan.cut.map_or(0, |c| c.len()), (cut - complete) as u64);
    let verdict =
        repair::verify(torn.as_bytes(), &plan, None, &ScanOptions::default()).expect("in memory");
    prop_assert!(verdict.ok, "v{} cut {}: {:#?}", v, cut, verdict.findings);

    let mut repaired = torn[..complete].to_owned();
    repaired.push_str(std::str::from_utf8(plan.append()).expect("closers are UTF-8"));
    // The committed events are byte-identical, and fold as the reference replay says; the
    // closers add only synthetic tool results to the surface.
    prop_assert!(repaired.starts_with(&torn[..complete]));
    let kept_lines: Vec<String> = torn[..complete].lines().map(str::to_owned).collect();
    let model = naive(v, &kept_lines, u64::MAX);
    let (r, rf) = run(&repaired, None);
    prop_assert!(
        rf.iter().all(|f| !f.is_error()),
        "v{} cut {}: {:#?}",
        v,
        cut,
        rf
    );
    prop_assert!(!r.open_turn() && r.torn.is_none() && r.crash.is_none());
    let mut want = model.nodes.clone();
    want.extend(
        plan.closers
            .iter()
            .filter(|c| matches!(c.kind, CloserKind::ToolResult { .. }))
            .map(|c| c.seq),
    );
    let state = r.state.as_ref().expect("folded");
    prop_assert_eq!(state.surface.seqs(), want, "v{} cut {}", v, cut);
    prop_assert_eq!(r.events(), model.events + plan.closers.len() as u64);

    // Idempotent: repairing the result plans nothing.
    prop_assert!(repair::plan(&r).expect("plannable").is_noop());

    // The real writer produces the same bytes, and the cut bytes are in the sidecar.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("session.jsonl");
    std::fs::write(&path, torn).expect("write");
    let stamp = write::Stamp::of(&path).expect("stat");
    if !plan.is_noop() {
        let done =
            write::apply_in_place(&path, stamp, plan.edit(), write::Fault::None).expect("written");
        let side = done.sidecar.map(|p| std::fs::read(p).expect("sidecar"));
        prop_assert_eq!(
            side.unwrap_or_default(),
            torn.as_bytes()[complete..].to_vec()
        );
    }
    prop_assert_eq!(
        std::fs::read(&path).expect("read"),
        repaired.as_bytes().to_vec()
    );
    Ok(repaired)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn repair_of_a_log_cut_anywhere_keeps_every_committed_event_and_validates(
        v in 0usize..5,
        items in prop::collection::vec(item(), 0..6),
        cuts in prop::collection::vec(any::<u32>(), 1..5),
        at_line in any::<bool>(),
    ) {
        let b = Builder::build(v, &items);
        let text = text_of(&b.lines);
        for c in cuts {
            let mut cut = c as usize % (text.len() + 1);
            if at_line {
                // A crash between two writes: the cut falls on a line end.
                cut = text[..cut].rfind('\n').map_or(0, |i| i + 1);
            }
            let repaired = repair_cut(v, &b, &text, cut)?;
            // Repairing twice is repairing once.
            if cut > b.lines[0].len() {
                let (r, _) = run(&repaired, None);
                prop_assert!(repair::plan(&r).expect("plannable").is_noop());
            }
        }
    }

    /// `decode(encode(list))` is the list, for any list a writer could store (unique seqs
    /// below the carrying event's), increasing or not; encoding is canonical.
    #[test]
    fn provenance_ranges_decode_to_what_was_encoded(
        set in prop::collection::btree_set(0u64..200, 0..40),
        shuffle in any::<bool>(),
        base in prop_oneof![Just(0u64), Just(9_007_199_254_740_000u64)],
    ) {
        let mut seqs: Vec<u64> = set.iter().map(|s| base + s).collect();
        if shuffle {
            seqs.reverse();
        }
        let stored = rows::encode_sources_json(&seqs);
        let parsed = json::parse(stored.as_bytes()).expect("encoder writes JSON");
        let carrier = seqs.iter().max().map_or(0, |m| m + 1);
        let decoded: Vec<u64> = rows::decode_sources(&parsed, Some(carrier))
            .expect("decodes")
            .iter()
            .collect();
        prop_assert_eq!(&decoded, &seqs, "{}", stored);
        prop_assert_eq!(rows::encode_sources_json(&decoded), stored.clone());
        // Runs of 3 or more, and only those, became pairs.
        let pairs = rows::encode_sources(&seqs)
            .into_iter()
            .filter(|i| matches!(i, rows::SourceItem::Run(..)))
            .count();
        let runs = if shuffle && seqs.len() > 1 {
            0
        } else {
            let mut n = 0;
            let mut len = 1;
            for w in seqs.windows(2) {
                if w[1] == w[0] + 1 { len += 1 } else { n += usize::from(len >= 3); len = 1 }
            }
            n + usize::from(!seqs.is_empty() && len >= 3)
        };
        prop_assert_eq!(pairs, runs, "{}", stored);
    }
}

// ---------------------------------------------------------------------------------------
// Compaction of any surface range (§15.3) and zstd storage (§3.3) of generated logs
// ---------------------------------------------------------------------------------------

/// Per surface node, independent of the production fold: its seq and the message `derive`
/// gives for it (the `data` of a user message, `data.message` otherwise), read from the line
/// with serde_json. Positions come from the reference replay.
fn derived_nodes(v: usize, lines: &[String]) -> Vec<(u64, Value)> {
    let by_seq: HashMap<u64, Value> = lines[1..]
        .iter()
        .filter_map(|l| {
            let row: Value = serde_json::from_str(l).ok()?;
            Some((row["seq"].as_u64()?, row))
        })
        .collect();
    naive(v, lines, u64::MAX)
        .nodes
        .iter()
        .map(|seq| {
            let row = &by_seq[seq];
            let msg = if row["type"] == "user/message" {
                row["data"].clone()
            } else {
                row["data"]["message"].clone()
            };
            (*seq, msg)
        })
        .collect()
}

/// What `derive` prints for a log: every deriving node's message, through the library.
fn derive_lib(path: &std::path::Path, s: &Scan) -> Vec<Value> {
    let mut d = Deriver::open(path).expect("deriver");
    s.state
        .as_ref()
        .expect("folded")
        .surface
        .iter()
        .filter(|n| n.derives)
        .map(|n| serde_json::from_slice(&d.message(&n).expect("message")).expect("JSON"))
        .collect()
}

/// Tool calls advertised minus tool results, per message (§15.3 rule 2), from the text.
fn pairing_delta(msg: &Value) -> i64 {
    if msg["source"]["callId"].is_string() || msg["role"] == "tool" {
        return -1;
    }
    msg["content"].as_array().map_or(0, |c| {
        c.iter().filter(|b| b["type"] == "tool-call").count() as i64
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// `compact` over any two surface nodes: refused exactly when §15.3 says (reversed, the
    /// protected v3+ system head, an unbalanced cut), otherwise the result validates without
    /// a finding, folds like the reference replay of the new bytes, and derives as "the
    /// messages before the range, the checkpoint message, the messages after".
    #[test]
    fn compacting_any_surface_range_keeps_derive_and_the_reference_fold(
        v in 0usize..5,
        items in prop::collection::vec(item(), 1..8),
        a in any::<u16>(),
        b in any::<u16>(),
        reversed in proptest::bool::weighted(0.1),
    ) {
        let built = Builder::build(v, &items);
        let nodes = derived_nodes(v, &built.lines);
        if nodes.is_empty() {
            return Ok(());
        }
        let (x, y) = (usize::from(a) % nodes.len(), usize::from(b) % nodes.len());
        let (lo, hi) = (x.min(y), x.max(y));
        let (i, j) = if reversed && lo != hi { (hi, lo) } else { (lo, hi) };
        let text = text_of(&built.lines);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("session.jsonl");
        std::fs::write(&path, &text).expect("write");

        let req = Request { start: nodes[i].0, end: nodes[j].0, summary: "the \"summary\"\nline 2".into() };
        let mut lookout = Lookout::new(&req);
        let s = scan(text.as_bytes(), None, &ScanOptions::default(), &mut Vec::new(), &mut lookout)
            .expect("in memory");
        let minted = Minted { compaction_id: "cid".into(), message_id: "mid".into(), time: 7 };
        let mut deriver = Deriver::open(&path).expect("deriver");
        let result = compact::plan(&s, &lookout, &req, minted, &mut deriver);

        // What §15.3 says, computed from the text.
        let deltas: Vec<i64> = nodes.iter().map(|n| pairing_delta(&n.1)).collect();
        let (first, last) = (i.min(j), i.max(j));
        let before: i64 = deltas[..first].iter().sum();
        let after: i64 = deltas[..=last].iter().sum();
        let head = v >= 3 && first == 0 && nodes[0].1["role"] == "system";
        // The generator's own compactions ignore pairing: a result may have lost its call.
        let orphan = deltas
            .iter()
            .scan(0i64, |c, d| {
                *c += d;
                Some(*c)
            })
            .any(|c| c < 0);
        let what = format!("v{v} range {}..{}\n{text}", req.start, req.end);
        let plan = match result {
            Err(PlanError::Refused(r)) => {
                match r {
                    CRefusal::Reversed { .. } => prop_assert!(i > j, "{}", what),
                    CRefusal::SystemHead { .. } => prop_assert!(i <= j && head, "{}", what),
                    CRefusal::OrphanResult { .. } => prop_assert!(i <= j && !head && orphan, "{}", what),
                    CRefusal::SplitsToolCall { .. } => {
                        prop_assert!(i <= j && !head && !orphan && (before != 0 || after != 0), "{}", what)
                    }
                    other => prop_assert!(false, "{}: refused: {:?}", what, other),
                }
                return Ok(());
            }
            Err(e) => return Err(TestCaseError::fail(format!("{what}: {e:?}"))),
            Ok(p) => p,
        };
        prop_assert!(i <= j && !head && !orphan && before == 0 && after == 0, "{}: planned", what);
        let verdict = compact::verify(text.as_bytes(), &plan, None, &ScanOptions::default())
            .expect("in memory");
        prop_assert!(verdict.ok, "{}: {:#?}", what, verdict.findings);

        // The compacted bytes: valid without a single finding, the reference fold.
        let mut new_text = text.clone();
        new_text.push_str(std::str::from_utf8(plan.append()).expect("UTF-8"));
        let (c, f) = run(&new_text, None);
        prop_assert!(f.is_empty(), "{}: {:#?}", what, f);
        prop_assert_eq!(c.status(), Status::Valid);
        let new_lines: Vec<String> = new_text.lines().map(str::to_owned).collect();
        let model = naive(v, &new_lines, u64::MAX);
        let state = c.state.as_ref().expect("folded");
        prop_assert_eq!(state.surface.seqs(), model.nodes.clone());
        prop_assert!(!state.compaction.is_active());

        // derive: before, the checkpoint message, after — as JSON values.
        let checkpoint: Value = serde_json::from_str(&plan.lines[2]).expect("JSON");
        prop_assert_eq!(checkpoint["seq"].as_u64(), Some(plan.checkpoint_seq()));
        prop_assert_eq!(&checkpoint["data"]["content"][1]["text"], &Value::from(req.summary.clone()));
        let mut want: Vec<Value> = nodes[..first].iter().map(|n| n.1.clone()).collect();
        want.push(checkpoint["data"].clone());
        want.extend(nodes[last + 1..].iter().map(|n| n.1.clone()));
        let got_model: Vec<Value> = derived_nodes(v, &new_lines).into_iter().map(|n| n.1).collect();
        prop_assert_eq!(&got_model, &want, "{}", what);
        // And what the library derives (what `dshs derive` prints) is the same, on the
        // nodes that derive (empty assistant messages do not).
        std::fs::write(&path, &new_text).expect("write");
        let derived = derive_lib(&path, &c);
        let old_derived = derive_lib_text(&text, dir.path());
        let mut want_lib: Vec<Value> = Vec::new();
        let old_state_nodes: Vec<u64> = s.state.as_ref().expect("folded").surface.iter().filter(|n| n.derives).map(|n| n.seq).collect();
        let pos = |seq: u64| nodes.iter().position(|n| n.0 == seq).expect("on the surface");
        for (seq, m) in old_state_nodes.iter().zip(&old_derived) {
            if pos(*seq) < first {
                want_lib.push(m.clone());
            }
        }
        want_lib.push(checkpoint["data"].clone());
        for (seq, m) in old_state_nodes.iter().zip(&old_derived) {
            if pos(*seq) > last {
                want_lib.push(m.clone());
            }
        }
        prop_assert_eq!(derived, want_lib, "{}", what);
    }

    /// A generated log stored as DSH stores zstd (the header alone in frame 1, then batches
    /// of lines per frame) reads exactly like the plain log: same findings, events, surface,
    /// replacements — whole, and cut at any line (an open turn, a crash tail).
    #[test]
    fn a_generated_log_reads_the_same_compressed_as_plain(
        v in 0usize..5,
        items in prop::collection::vec(item(), 0..6),
        batch in 1usize..6,
        cut in any::<u16>(),
    ) {
        let built = Builder::build(v, &items);
        let keep = 1 + usize::from(cut) % built.lines.len();
        for lines in [&built.lines[..], &built.lines[..keep]] {
            let text = text_of(lines);
            let (p, pf) = run(&text, None);
            let mut z = encode_frame(format!("{}\n", lines[0]).as_bytes()).expect("zstd");
            for group in lines[1..].chunks(batch) {
                z.extend(encode_frame(text_of(group).as_bytes()).expect("zstd"));
            }
            let (reader, framing) = ZstdReader::new(&z[..]).expect("zstd");
            let opts = ScanOptions { record_replacements: true, ..ScanOptions::default() };
            let mut zf = Vec::new();
            let zs = scan::scan_framed(std::io::BufReader::new(reader), Some(&framing), None, &opts, &mut zf, &mut ())
                .expect("in memory");
            prop_assert_eq!(&zf, &pf, "v{} batch {}", v, batch);
            prop_assert_eq!(zs.status(), p.status());
            prop_assert_eq!(zs.events(), p.events());
            prop_assert_eq!(zs.committed_bytes, p.committed_bytes);
            prop_assert_eq!(zs.physical_len(), z.len() as u64);
            let (a, b) = (zs.state.as_ref().expect("folded"), p.state.as_ref().expect("folded"));
            prop_assert_eq!(a.surface.seqs(), b.surface.seqs());
            prop_assert_eq!(a.surface.replacements().unwrap(), b.surface.replacements().unwrap());
        }
    }
}

fn derive_lib_text(text: &str, dir: &std::path::Path) -> Vec<Value> {
    let path = dir.join("before.jsonl");
    std::fs::write(&path, text).expect("write");
    let (s, _) = run(text, None);
    derive_lib(&path, &s)
}

// ---------------------------------------------------------------------------------------
// The light pass (`scan::light`) folds like the full pass
// ---------------------------------------------------------------------------------------

/// Every event the fold hands on, with its verdicts.
struct Events(Vec<String>);

impl scan::Observer for Events {
    fn event(&mut self, info: &scan::EventInfo<'_, '_>, state: &scan::FoldState) {
        let ev = info.event;
        self.0.push(format!(
            "{} {} {:?} {} {} turn {:?} step {:?} open {:?} surface {}",
            ev.seq,
            ev.ty,
            info.class,
            info.accepted,
            info.speculative,
            ev.turn(),
            ev.step(),
            state.lifecycle.open_turn(),
            state.surface.len()
        ));
    }
    fn unusable(&mut self, row: &scan::Unusable<'_>) {
        self.0.push(format!(
            "unusable {:?} {:?} {}",
            row.pos, row.seq, row.speculative
        ));
    }
    fn speculation_ended(&mut self, committed: bool) {
        self.0.push(format!("ended {committed}"));
    }
    fn reads_stream_records(&self) -> bool {
        false
    }
}

/// What a pass with `light` decided of `text`.
fn light_outcome(text: &str, light: scan::FullLines, threads: usize) -> String {
    let opts = ScanOptions {
        record_replacements: true,
        threads,
        block_bytes: 700,
        light: Some(light),
        ..ScanOptions::default()
    };
    let mut findings = Vec::new();
    let mut events = Events(Vec::new());
    let s = scan(text.as_bytes(), None, &opts, &mut findings, &mut events).expect("in memory");
    let surface = s.state.as_ref().map(|st| {
        (
            st.surface
                .iter()
                .map(|n| (n.seq, n.kind, n.op, n.tool_calls, n.result_shape))
                .collect::<Vec<_>>(),
            st.surface.replacements().unwrap(),
            st.closers.open_turn(),
        )
    });
    format!(
        "{:?} {:?} events {} committed {} torn {:?} crash {:?}\n{surface:?}\n{findings:#?}\n{:#?}",
        s.status(),
        s.tally,
        s.events(),
        s.committed_bytes,
        s.torn,
        s.crash,
        events.0
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Generated logs, damaged or not: the light pass (some lines whole, as `grep` asks for
    /// its candidates, or none) decides what the full pass decides, event by event.
    #[test]
    fn the_light_pass_folds_generated_logs_like_the_full_pass(
        v in 0usize..5,
        items in prop::collection::vec(item(), 0..6),
        damage in 0u8..4,
        at in any::<u32>(),
        whole in prop::collection::vec(any::<bool>(), 0..64),
        threads in 1usize..3,
    ) {
        let b = Builder::build(v, &items);
        let mut text = text_of(&b.lines);
        let pick = at as usize % (text.len() + 1);
        let line_start = text[..pick].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[pick..].find('\n').map_or(text.len(), |i| pick + i);
        match damage {
            // Cut anywhere (a torn line, a crash tail).
            1 => text.truncate(pick),
            // A line corrupted in the middle of the log.
            2 if line_start > b.lines[0].len() => text.replace_range(line_start..line_end, "{\"type\":"),
            // A line dropped (a seq gap).
            3 if line_start > b.lines[0].len() && line_end < text.len() => {
                text.replace_range(line_start..=line_end, "");
            }
            _ => {}
        }
        let starts: Vec<u64> = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i as u64 + 1))
            .zip(whole.iter().cycle())
            .filter_map(|(s, &w)| w.then_some(s))
            .collect();
        let full = light_outcome(&text, scan::FullLines::all(), threads);
        prop_assert_eq!(&light_outcome(&text, scan::FullLines::default(), threads), &full, "{}", text);
        prop_assert_eq!(&light_outcome(&text, scan::FullLines::new(starts, u64::MAX), threads), &full, "{}", text);
    }
}
