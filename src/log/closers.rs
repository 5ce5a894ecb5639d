//! The closers DSH synthesizes for an open final turn (§14.2–§14.4), computed in the same
//! streaming pass as everything else. `validate` uses it for `openTurn`; `repair` writes
//! the lines it produces.

use super::dialect::{Dialect, ToolResultShape};
use super::event::{Kind, row};
use super::json::{Json, OwnedJson, write_js_str};
use super::lifecycle::{NOT_STARTED_TEXT, OUTCOME_UNKNOWN_TEXT};
use super::rows::Event;

#[derive(Debug, Clone)]
struct Pending {
    call_id: String,
    /// `data.step` of the advertising message; `None` when absent (JavaScript `undefined`:
    /// the key is then left out of the closer, as `JSON.stringify` does).
    step: Option<OwnedJson>,
    call_seq: Option<u64>,
}

/// What one closer closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloserKind {
    /// An error result for an unanswered call; `started` when a `tool/call` was recorded.
    ToolResult {
        call_id: String,
        started: bool,
    },
    StepEnd,
    TurnEnd,
}

/// One synthesized event, serialized exactly as DSH writes it (no trailing newline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closer {
    pub seq: u64,
    pub kind: CloserKind,
    pub line: String,
}

#[derive(Debug, Clone)]
pub struct CloserPlanner {
    dialect: &'static Dialect,
    open_turn: Option<OwnedJson>,
    open_step: Option<OwnedJson>,
    /// Unanswered advertised calls, in insertion order.
    pending: Vec<Pending>,
    /// Seq and time of the last committed event of any type.
    last: Option<(u64, i64)>,
}

impl CloserPlanner {
    pub fn new(dialect: &'static Dialect) -> Self {
        CloserPlanner {
            dialect,
            open_turn: None,
            open_step: None,
            pending: Vec::new(),
            last: None,
        }
    }

    /// Every committed event, in seq order (replacements and opaque events included).
    pub fn observe(&mut self, ev: &Event<'_>) {
        self.last = Some((ev.seq, ev.time));
        let d = &ev.data;
        match ev.kind {
            Kind::TurnStart => {
                // A missing or null turn is no open turn (`open_turn is None`, §14.2).
                self.open_turn = present(d.get("turn"));
                self.open_step = None;
                self.pending.clear();
            }
            Kind::TurnEnd => {
                self.open_turn = None;
                self.open_step = None;
                self.pending.clear();
            }
            Kind::StepStart => {
                self.open_step = present(d.get("step"));
            }
            Kind::StepEnd => {
                self.pending.clear();
                self.open_step = None;
            }
            Kind::AssistantMessage => {
                let step = d.get("step").cloned().map(OwnedJson::new);
                for b in ev.tool_call_blocks() {
                    let Some(id) = b.get("id").and_then(Json::as_str) else {
                        continue;
                    };
                    match self.pending.iter_mut().find(|p| p.call_id == id) {
                        // An existing key keeps its position; its call seq is reset.
                        Some(p) => {
                            p.step = step.clone();
                            p.call_seq = None;
                        }
                        None => self.pending.push(Pending {
                            call_id: id.to_owned(),
                            step: step.clone(),
                            call_seq: None,
                        }),
                    }
                }
            }
            Kind::ToolCall => {
                if let Some(id) = d.get("callId").and_then(Json::as_str)
                    && let Some(p) = self.pending.iter_mut().find(|p| p.call_id == id)
                {
                    p.call_seq = Some(ev.seq);
                }
            }
            Kind::ToolResult => {
                let id = ev
                    .message()
                    .and_then(|m| m.get("source"))
                    .and_then(|s| s.get("callId"))
                    .and_then(Json::as_str);
                if let Some(id) = id {
                    self.pending.retain(|p| p.call_id != id);
                }
            }
            _ => {}
        }
    }

    /// Events that change nothing here went by, the last at `seq` and `time` (what
    /// [`CloserPlanner::observe`] does with an `assistant/chunk`).
    pub fn passed(&mut self, seq: u64, time: i64) {
        self.last = Some((seq, time));
    }

    /// The committed prefix ends inside an open turn: the closers are not empty.
    pub fn is_open(&self) -> bool {
        self.open_turn.is_some() && self.last.is_some()
    }

    /// The turn number left open, for messages.
    pub fn open_turn(&self) -> Option<String> {
        self.open_turn.as_ref().map(|t| t.to_js_string())
    }

    /// Seq and time of the last committed event.
    pub fn last(&self) -> Option<(u64, i64)> {
        self.last
    }

    /// The events DSH would append to close the open turn (empty when none is open).
    pub fn closers(&self) -> Vec<Closer> {
        let (Some(turn), Some((last_seq, time))) = (&self.open_turn, self.last) else {
            return Vec::new();
        };
        let turn = turn.to_js_string();
        let mut seq = last_seq + 1;
        let mut out = Vec::new();
        for p in &self.pending {
            out.push(Closer {
                seq,
                kind: CloserKind::ToolResult {
                    call_id: p.call_id.clone(),
                    started: p.call_seq.is_some(),
                },
                line: self.tool_result(&turn, p, seq, time),
            });
            seq += 1;
        }
        if let Some(step) = &self.open_step {
            out.push(Closer {
                seq,
                kind: CloserKind::StepEnd,
                line: row(
                    Kind::StepEnd,
                    seq,
                    time,
                    &format!(r#"{{"turn":{turn},"step":{}}}"#, step.to_js_string()),
                    "",
                ),
            });
            seq += 1;
        }
        out.push(Closer {
            seq,
            kind: CloserKind::TurnEnd,
            line: row(
                Kind::TurnEnd,
                seq,
                time,
                &format!(r#"{{"turn":{turn},"reason":{{"kind":"interrupted"}}}}"#),
                "",
            ),
        });
        out
    }

    fn tool_result(&self, turn: &str, p: &Pending, seq: u64, time: i64) -> String {
        let mut call_id = String::new();
        write_js_str(&p.call_id, &mut call_id);
        let mut msg_id = String::new();
        write_js_str(
            &format!("interrupted-tool-result-{}-{seq}", p.call_id),
            &mut msg_id,
        );
        let mut text = String::new();
        let (body, error) = match p.call_seq {
            Some(_) => (
                OUTCOME_UNKNOWN_TEXT,
                r#"{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}"#,
            ),
            None => (
                NOT_STARTED_TEXT,
                r#"{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}"#,
            ),
        };
        write_js_str(body, &mut text);
        let source = format!(r#"{{"kind":"tool","callId":{call_id}}}"#);
        let message = match self.dialect.tool_result_shape {
            ToolResultShape::Wrapped => format!(
                r#"{{"id":{msg_id},"role":"user","source":{source},"content":[{{"type":"tool-result","toolCallId":{call_id},"isError":true,"content":[{{"type":"text","text":{text}}}]}}]}}"#
            ),
            ToolResultShape::ToolRole => format!(
                r#"{{"id":{msg_id},"role":"tool","toolCallId":{call_id},"isError":true,"source":{source},"content":[{{"type":"text","text":{text}}}]}}"#
            ),
        };
        let sources = p
            .call_seq
            .map_or_else(String::new, |s| format!(r#","sourceEventSeqs":[{s}]"#));
        let step = p
            .step
            .as_ref()
            .map_or_else(String::new, |s| format!(r#","step":{}"#, s.to_js_string()));
        row(
            Kind::ToolResult,
            seq,
            time,
            &format!(r#"{{"turn":{turn}{step},"message":{message},"error":{error}}}"#),
            &format!(r#","surfaceOp":"append"{sources}"#),
        )
    }
}

/// A member that JavaScript would see as a value: absent and `null` are both "none".
fn present(v: Option<&Json<'_>>) -> Option<OwnedJson> {
    v.filter(|v| **v != Json::Null).cloned().map(OwnedJson::new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::dialect::DIALECTS;
    use crate::log::finding::Pos;
    use crate::log::rows::{Row, decode};

    fn plan(version: usize, lines: &[&str]) -> Vec<String> {
        let mut p = CloserPlanner::new(&DIALECTS[version]);
        for l in lines {
            let Row::Events(evs, _) = decode(l.as_bytes(), Pos::default(), &DIALECTS[version])
            else {
                panic!("{l}")
            };
            for c in evs {
                p.observe(&c.event.unwrap());
            }
        }
        p.closers().into_iter().map(|c| c.line).collect()
    }

    #[test]
    fn worked_examples_match_the_spec_bytes() {
        // v0–v3: an advertised call never started, wrapped result; v4: a started call, role `tool`.
        let cases: [(usize, &[&str], &[&str]); 2] = [
            (
                3,
                &[
                    r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":2}}"#,
                    r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":2,"step":1}}"#,
                    r#"{"type":"assistant/message","seq":2,"time":2,"data":{"turn":2,"step":1,"message":{"id":"m","role":"assistant","content":[{"type":"tool-call","id":"call-1","name":"x","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}},"stream":[]},"surfaceOp":"append"}"#,
                ],
                &[
                    r#"{"type":"tool/result","seq":3,"time":2,"data":{"turn":2,"step":1,"message":{"id":"interrupted-tool-result-call-1-3","role":"user","source":{"kind":"tool","callId":"call-1"},"content":[{"type":"tool-result","toolCallId":"call-1","isError":true,"content":[{"type":"text","text":"The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."}]}]},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}},"surfaceOp":"append"}"#,
                    r#"{"type":"step/end","seq":4,"time":2,"data":{"turn":2,"step":1}}"#,
                    r#"{"type":"turn/end","seq":5,"time":2,"data":{"turn":2,"reason":{"kind":"interrupted"}}}"#,
                ],
            ),
            (
                4,
                &[
                    r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#,
                    r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#,
                    r#"{"type":"assistant/message","seq":2,"time":2,"data":{"turn":1,"step":1,"message":{"id":"m","role":"assistant","content":[{"type":"tool-call","id":"call-1","name":"x","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}},"stream":[]},"surfaceOp":"append"}"#,
                    r#"{"type":"tool/call","seq":3,"time":3,"data":{"turn":1,"step":1,"callId":"call-1","name":"x","arguments":"{}"}}"#,
                ],
                &[
                    r#"{"type":"tool/result","seq":4,"time":3,"data":{"turn":1,"step":1,"message":{"id":"interrupted-tool-result-call-1-4","role":"tool","toolCallId":"call-1","isError":true,"source":{"kind":"tool","callId":"call-1"},"content":[{"type":"text","text":"The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly."}]},"error":{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}},"surfaceOp":"append","sourceEventSeqs":[3]}"#,
                    r#"{"type":"step/end","seq":5,"time":3,"data":{"turn":1,"step":1}}"#,
                    r#"{"type":"turn/end","seq":6,"time":3,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#,
                ],
            ),
        ];
        for (version, lines, want) in cases {
            assert_eq!(plan(version, lines), want, "v{version}");
        }
    }

    #[test]
    fn balanced_and_closed_step_calls_yield_nothing_or_only_turn_end() {
        assert!(plan(0, &[]).is_empty());
        assert!(
            plan(
                0,
                &[
                    r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}"#,
                    r#"{"type":"turn/end","seq":1,"time":6,"data":{"turn":1,"reason":{"kind":"completed"}}}"#
                ]
            )
            .is_empty()
        );
        // Calls of a step that already ended get no result; no step is open.
        let got = plan(
            0,
            &[
                r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}"#,
                r#"{"type":"step/start","seq":1,"time":5,"data":{"turn":1,"step":1}}"#,
                r#"{"type":"assistant/message","seq":2,"time":5,"data":{"turn":1,"step":1,"message":{"content":[{"type":"tool-call","id":"c"}]}},"surfaceOp":"append"}"#,
                r#"{"type":"step/end","seq":3,"time":9,"data":{"turn":1,"step":1}}"#,
            ],
        );
        assert_eq!(
            got,
            vec![
                r#"{"type":"turn/end","seq":4,"time":9,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#
            ]
        );
    }

    #[test]
    fn a_turn_without_a_number_is_not_open_and_a_missing_step_is_left_out() {
        assert!(plan(0, &[r#"{"type":"turn/start","seq":0,"time":1,"data":{}}"#]).is_empty());
        let got = plan(
            0,
            &[
                r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
                r#"{"type":"assistant/message","seq":1,"time":1,"data":{"message":{"content":[{"type":"tool-call","id":"c"}]}},"surfaceOp":"append"}"#,
            ],
        );
        assert!(
            got[0].contains(r#""data":{"turn":1,"message":"#),
            "{}",
            got[0]
        );
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn pending_calls_keep_advertisement_order_and_answered_calls_are_skipped() {
        let got = plan(
            2,
            &[
                r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
                r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#,
                r#"{"type":"assistant/message","seq":2,"time":1,"data":{"turn":1,"step":1,"message":{"content":[{"type":"tool-call","id":"b"},{"type":"tool-call","id":"a"},{"type":"tool-call","id":"c"}]}},"surfaceOp":"append"}"#,
                r#"{"type":"tool/call","seq":3,"time":1,"data":{"callId":"a"}}"#,
                r#"{"type":"tool/call","seq":4,"time":1,"data":{"callId":"zzz"}}"#,
                r#"{"type":"tool/result","seq":5,"time":1,"data":{"message":{"source":{"callId":"c"}}}}"#,
            ],
        );
        assert_eq!(got.len(), 4);
        assert!(got[0].contains(r#""callId":"b""#) && got[0].contains("TOOL_NOT_STARTED"));
        assert!(
            got[1].contains(r#""callId":"a""#) && got[1].ends_with(r#""sourceEventSeqs":[3]}"#)
        );
        assert!(got[2].starts_with(r#"{"type":"step/end","seq":8,"#));
    }
}
