//! Turn, step and tool-call lifecycle (§13): the v0 companion rules (warnings in v0–v2) and
//! the v3/v4 restore-time rules (errors). Findings take their severity from the dialect.

use std::collections::HashSet;

use super::idset::{self, IdSet};

use super::codes::Code;
use super::dialect::Dialect;
use super::event::Kind;
use super::finding::{Finding, Reporter, Sink};
use super::json::{self, Json};
use super::rows::Event;
use super::vocab::TypeClass;

/// The exact model-visible text of a not-started crash-repair result (§14.3).
pub const NOT_STARTED_TEXT: &str = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";
/// The exact text of a started-but-unknown crash-repair result (§14.3).
pub const OUTCOME_UNKNOWN_TEXT: &str = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";

/// A call advertised by an assistant message in the open step (v3+).
#[derive(Debug, Clone)]
struct Advertised {
    id: String,
    name: Option<String>,
    /// Only compared, never shown: its digest ([`Json::text_digest`]; arguments can be long).
    arguments: Option<u64>,
    started: bool,
    settled: bool,
}

#[derive(Debug, Clone)]
pub struct Lifecycle {
    dialect: &'static Dialect,
    open_turn: Option<i64>,
    open_step: Option<i64>,
    next_turn: i64,
    next_step: i64,
    /// v0–v2: call ids started (`tool/call`) in the open step.
    started: HashSet<String>,
    /// v3+: calls advertised in the open step, in order.
    calls: Vec<Advertised>,
    /// v3+: every advertised call id of the session (hashed: memory stays small on huge logs).
    call_ids: IdSet,
    /// v3+: every `command/run` id seen (hashed).
    command_runs: IdSet,
}

impl Lifecycle {
    pub fn new(dialect: &'static Dialect) -> Self {
        Lifecycle {
            dialect,
            open_turn: None,
            open_step: None,
            next_turn: 1,
            next_step: 1,
            started: HashSet::new(),
            calls: Vec::new(),
            call_ids: IdSet::default(),
            command_runs: IdSet::default(),
        }
    }

    pub fn open_turn(&self) -> Option<i64> {
        self.open_turn
    }

    /// Apply the rules to one event. Even a failing event updates the state as if it were
    /// valid (§13.1), so one mistake does not cascade.
    pub fn observe(&mut self, ev: &Event<'_>, class: TypeClass, sink: &mut dyn Sink) {
        if matches!(
            class,
            TypeClass::Opaque | TypeClass::UnknownRequired | TypeClass::RetiredRequired
        ) {
            return;
        }
        let at = Reporter {
            version: Some(self.dialect.version),
            pos: ev.pos,
            seq: Some(ev.seq),
            event_type: Some(&ev.ty),
        };
        let mut out = Vec::new();
        match ev.kind {
            Kind::TurnStart => self.turn_start(ev, &at, &mut out),
            Kind::TurnEnd => self.turn_end(ev, &at, &mut out),
            Kind::StepStart => self.step_start(ev, &at, &mut out),
            Kind::StepEnd => {
                self.in_open_step(ev, &at, &mut out);
                self.close_calls(&at, Kind::StepEnd, &mut out);
                self.started.clear();
                self.open_step = None;
                self.next_step += 1;
            }
            Kind::AssistantChunk => self.in_open_step(ev, &at, &mut out),
            Kind::AssistantMessage => {
                self.in_open_step(ev, &at, &mut out);
                if self.dialect.restore_lifecycle {
                    self.advertise(ev, &at, &mut out);
                }
            }
            Kind::ToolCall => {
                self.in_open_step(ev, &at, &mut out);
                self.tool_call(ev, &at, &mut out);
            }
            Kind::ToolResult => {
                if ev.is_replacement() {
                    if self.open_turn.is_none() {
                        out.push(at.finding(
                            Code::ToolResultReplaceOutsideTurn,
                            "tool/result surface replacement appended outside any open turn",
                        ));
                    }
                } else {
                    self.in_open_step(ev, &at, &mut out);
                    self.tool_result(ev, &at, &mut out);
                }
            }
            Kind::SystemMessage | Kind::DeveloperMessage | Kind::AssistantAttempt
                if self.dialect.restore_lifecycle =>
            {
                self.in_open_step(ev, &at, &mut out)
            }
            Kind::RequestHeader | Kind::RequestContext => self.in_turn(&ev.ty, &at, &mut out),
            Kind::TodoWrite if !self.dialect.restore_lifecycle => {
                self.in_turn(&ev.ty, &at, &mut out)
            }
            Kind::CommandRun | Kind::CommandDone if self.dialect.restore_lifecycle => {
                self.command(ev, &at, &mut out)
            }
            _ => {}
        }
        for f in out {
            sink.push(self.explain_old_version(f));
        }
    }

    /// v0–v2 lifecycle findings are warnings: DSH of that version loads the log, but a
    /// current DSH migrating it forward applies the V4 rules (§13.3).
    fn explain_old_version(&self, mut f: Finding) -> Finding {
        if !self.dialect.restore_lifecycle {
            f.message.push_str(
                " (a warning in this format version; a current DSH upgrading the log would probably refuse it)",
            );
        }
        f
    }

    fn turn_start(&mut self, ev: &Event<'_>, at: &Reporter<'_>, out: &mut Vec<Finding>) {
        let turn = ev.turn();
        self.still_open(at, out, Code::TurnStartWhileOpen, ev, turn, Unit::Turn);
        expect_next(
            at,
            out,
            Code::TurnNumberUnexpected,
            turn,
            self.next_turn,
            |next, got| format!("turn/start expected turn {next}, got {got}"),
        );
        self.open_turn = turn;
        self.next_step = 1;
    }

    fn turn_end(&mut self, ev: &Event<'_>, at: &Reporter<'_>, out: &mut Vec<Finding>) {
        let turn = ev.turn();
        self.names_open_turn(at, out, Code::TurnEndMismatch, turn, |turn, open| {
            format!("turn/end {turn} does not match open turn {open}")
        });
        self.still_open(at, out, Code::TurnEndWithOpenStep, ev, turn, Unit::Step);
        self.close_calls(at, Kind::TurnEnd, out);
        self.started.clear();
        self.open_turn = None;
        self.open_step = None;
        self.next_turn += 1;
    }

    fn step_start(&mut self, ev: &Event<'_>, at: &Reporter<'_>, out: &mut Vec<Finding>) {
        let (turn, step) = (ev.turn(), ev.step());
        self.names_open_turn(at, out, Code::StepStartWrongTurn, turn, |turn, open| {
            format!("step/start in turn {turn} but open turn is {open}")
        });
        self.still_open(at, out, Code::StepStartWhileOpen, ev, step, Unit::Step);
        expect_next(
            at,
            out,
            Code::StepNumberUnexpected,
            step,
            self.next_step,
            |next, got| {
                format!(
                    "step/start expected step {next} in turn {}, got {got}",
                    show(turn)
                )
            },
        );
        self.open_step = step;
    }

    /// An event that opens or closes something (`n` is the number it names) came while a
    /// `unit` was still open.
    fn still_open(
        &self,
        at: &Reporter<'_>,
        out: &mut Vec<Finding>,
        code: Code,
        ev: &Event<'_>,
        n: Option<i64>,
        unit: Unit,
    ) {
        let (name, open) = match unit {
            Unit::Turn => ("turn", self.open_turn),
            Unit::Step => ("step", self.open_step),
        };
        if let Some(open) = open {
            out.push(at.finding(
                code,
                format!(
                    "{} {} while {name} {open} is still open",
                    ev.kind.name(),
                    show(n)
                ),
            ));
        }
    }

    /// The event names the open turn: else a finding, its message made from the turn named
    /// and the open one.
    fn names_open_turn(
        &self,
        at: &Reporter<'_>,
        out: &mut Vec<Finding>,
        code: Code,
        turn: Option<i64>,
        message: impl FnOnce(String, String) -> String,
    ) {
        if turn.is_none() || turn != self.open_turn {
            out.push(at.finding(code, message(show(turn), show(self.open_turn))));
        }
    }

    /// The event names the open turn and the open step.
    fn in_open_step(&self, ev: &Event<'_>, at: &Reporter<'_>, out: &mut Vec<Finding>) {
        let (turn, step) = (ev.turn(), ev.step());
        let open = self.open_turn.is_some() && self.open_step.is_some();
        if !open || turn != self.open_turn || step != self.open_step {
            out.push(at.finding(
                Code::EventOutsideOpenStep,
                format!(
                    "{} names turn {}/step {} but open is turn {}/step {}",
                    ev.ty,
                    show(turn),
                    show(step),
                    show(self.open_turn),
                    show(self.open_step)
                ),
            ));
        }
    }

    fn in_turn(&self, ty: &str, at: &Reporter<'_>, out: &mut Vec<Finding>) {
        if self.open_turn.is_none() {
            out.push(at.finding(
                Code::EventOutsideTurn,
                format!(
                    "{ty} appended outside any open turn (core execution events must be turn-enclosed)"
                ),
            ));
        }
    }

    /// v3+: no advertised or started call may stay unanswered at a closing boundary.
    fn close_calls(&mut self, at: &Reporter<'_>, boundary: Kind, out: &mut Vec<Finding>) {
        if !self.dialect.restore_lifecycle {
            return;
        }
        let open: Vec<&str> = self
            .calls
            .iter()
            .filter(|c| !c.settled)
            .map(|c| c.id.as_str())
            .collect();
        if !open.is_empty() {
            let ids: Vec<String> = open
                .iter()
                .take(10)
                .map(|id| format!("\"{}\"", crate::log::text::clip(id, 60)))
                .collect();
            out.push(at.finding(
                Code::UnresolvedCallAtBoundary,
                format!(
                    "{} leaves {} tool call{} unresolved: {}{}",
                    boundary.name(),
                    open.len(),
                    if open.len() == 1 { "" } else { "s" },
                    ids.join(", "),
                    if open.len() > 10 { ", …" } else { "" }
                ),
            ));
        }
        self.calls.clear();
    }

    fn advertise(&mut self, ev: &Event<'_>, at: &Reporter<'_>, out: &mut Vec<Finding>) {
        for b in ev.tool_call_blocks() {
            let Some(id) = b.get("id").and_then(Json::as_str) else {
                continue;
            };
            if !self.call_ids.insert(idset::digest(id)) {
                out.push(at.finding(
                    Code::DuplicateCallId,
                    format!(
                        "tool call id \"{}\" is advertised more than once in this session",
                        crate::log::text::clip(id, 80)
                    ),
                ));
            }
            self.calls.push(Advertised {
                id: id.to_owned(),
                name: b.get("name").and_then(Json::as_str).map(str::to_owned),
                arguments: b.get("arguments").and_then(Json::text_digest),
                started: false,
                settled: false,
            });
        }
    }

    fn tool_call(&mut self, ev: &Event<'_>, at: &Reporter<'_>, out: &mut Vec<Finding>) {
        let id = ev.data.get("callId").and_then(Json::as_str);
        if !self.dialect.restore_lifecycle {
            if let Some(id) = id {
                self.started.insert(id.to_owned());
            }
            return;
        }
        let name = ev.data.get("name").and_then(Json::as_str);
        let arguments = ev.data.get("arguments").and_then(Json::text_digest);
        // The first unsettled call with this id that has not started yet (else the first
        // unsettled one): the same order `tool_result` settles in, so a repeated id (already
        // reported as duplicate-call-id) does not cascade into tool-result-before-start.
        let call = id.and_then(|id| {
            let open = |c: &&mut Advertised| c.id == id && !c.settled;
            let fresh = self
                .calls
                .iter()
                .position(|c| c.id == id && !c.settled && !c.started);
            match fresh {
                Some(i) => self.calls.get_mut(i),
                None => self.calls.iter_mut().find(open),
            }
        });
        let problem = match call {
            None => Some(format!(
                "tool/call \"{}\" does not name an advertised, unsettled call of this step",
                crate::log::text::clip(id.unwrap_or("?"), 80)
            )),
            Some(c) => {
                c.started = true;
                if c.name.as_deref() != name {
                    Some(format!(
                        "tool/call \"{}\" names tool {} but the assistant advertised {}",
                        crate::log::text::clip(&c.id, 80),
                        quote(name),
                        quote(c.name.as_deref())
                    ))
                } else if c.arguments != arguments {
                    Some(format!(
                        "tool/call \"{}\" does not repeat the advertised arguments exactly",
                        crate::log::text::clip(&c.id, 80)
                    ))
                } else {
                    None
                }
            }
        };
        if let Some(why) = problem {
            out.push(at.finding(Code::ToolCallMismatch, why));
        }
    }

    fn tool_result(&mut self, ev: &Event<'_>, at: &Reporter<'_>, out: &mut Vec<Finding>) {
        let id = ev
            .message()
            .and_then(|m| m.get("source"))
            .and_then(|s| s.get("callId"))
            .and_then(Json::as_str);
        // Only for a finding's text.
        let shown = crate::log::text::clip(id.unwrap_or("?"), 80);
        if !self.dialect.restore_lifecycle {
            let known = id.is_some_and(|id| self.started.remove(id));
            if !known && !self.is_not_started_repair_v0(ev) {
                out.push(at.finding(
                    Code::ToolResultWithoutCall,
                    format!("tool/result for \"{shown}\" with no prior tool/call in this step"),
                ));
            }
            return;
        }
        let call = id.and_then(|id| self.calls.iter_mut().find(|c| c.id == id && !c.settled));
        let Some(call) = call else {
            out.push(at.finding(
                Code::ToolResultWithoutCall,
                format!(
                    "tool/result for \"{shown}\" does not settle an advertised, unsettled call of this step"
                ),
            ));
            return;
        };
        call.settled = true;
        let started = call.started;
        if !started && let Err(why) = self.is_not_started_repair(ev) {
            out.push(at.finding(
                    Code::ToolResultBeforeStart,
                    format!(
                        "tool/result for \"{shown}\" arrives before any tool/call started it, so it must be the exact not-started repair result: {why}"
                    ),
                ));
        }
    }

    /// §13.1: the v0 companion accepts a not-started repair result without a prior call.
    fn is_not_started_repair_v0(&self, ev: &Event<'_>) -> bool {
        let flagged = ev
            .message()
            .and_then(|m| m.get("content"))
            .and_then(Json::as_arr)
            .and_then(|c| c.first())
            .and_then(|b| b.get("isError"))
            == Some(&Json::Bool(true));
        let code = ev
            .data
            .get("error")
            .and_then(|e| e.get("code"))
            .and_then(Json::as_str);
        flagged && code == Some("TOOL_NOT_STARTED")
    }

    /// §13.2: the exact not-started repair result (interrupted, or v4 forked).
    fn is_not_started_repair(&self, ev: &Event<'_>) -> Result<(), String> {
        let m = ev.message().ok_or("it has no message")?;
        let call_id = m
            .get("source")
            .and_then(|s| s.get("callId"))
            .and_then(Json::as_str)
            .unwrap_or_default();
        let id = m.get("id").and_then(Json::as_str).unwrap_or_default();
        let interrupted = format!("interrupted-tool-result-{call_id}-{}", ev.seq);
        let forked = format!("forked-tool-result-{call_id}-{}", ev.seq);
        let is_forked = self.dialect.developer && id == forked;
        if id != interrupted && !is_forked {
            return Err(format!("its id must be \"{interrupted}\""));
        }
        if ev.source_seqs.is_some() {
            return Err("it must not carry sourceEventSeqs".into());
        }
        let expected_error =
            json::parse(br#"{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}"#)
                .unwrap_or(Json::Null);
        if !ev
            .data
            .get("error")
            .is_some_and(|e| json::json_equal(e, &expected_error))
        {
            return Err(
                "its error must be {name:\"ToolNotStartedError\",code:\"TOOL_NOT_STARTED\"}".into(),
            );
        }
        let (flag, blocks) = match self.dialect.tool_result_shape {
            super::dialect::ToolResultShape::Wrapped => {
                let block = m
                    .get("content")
                    .and_then(Json::as_arr)
                    .and_then(|c| c.first());
                (
                    block.and_then(|b| b.get("isError")),
                    block.and_then(|b| b.get("content")).and_then(Json::as_arr),
                )
            }
            super::dialect::ToolResultShape::ToolRole => {
                (m.get("isError"), m.get("content").and_then(Json::as_arr))
            }
        };
        if flag != Some(&Json::Bool(true)) {
            return Err("it must set isError: true".into());
        }
        let text = match blocks {
            Some([b]) if b.get("type").and_then(Json::as_str) == Some("text") => {
                b.get("text").and_then(Json::as_str)
            }
            _ => None,
        };
        match text {
            None => Err("its content must be exactly one text block".into()),
            Some(t) if !is_forked && t != NOT_STARTED_TEXT => {
                Err("its text must be the exact interrupted-before-start text".into())
            }
            Some(_) => Ok(()),
        }
    }

    fn command(&mut self, ev: &Event<'_>, at: &Reporter<'_>, out: &mut Vec<Finding>) {
        let id = ev.data.get("commandId").and_then(Json::as_str);
        let Some(id) = id else {
            out.push(at.finding(
                Code::CommandDoneWithoutRun,
                format!("{} has no string commandId", ev.ty),
            ));
            return;
        };
        let key = idset::digest(id);
        if ev.kind == Kind::CommandRun {
            if !self.command_runs.insert(key) {
                out.push(at.finding(
                    Code::CommandDoneWithoutRun,
                    format!(
                        "command/run id \"{}\" is used twice (run ids must be unique)",
                        crate::log::text::clip(id, 80)
                    ),
                ));
            }
        } else if !self.command_runs.contains(key) {
            out.push(at.finding(
                Code::CommandDoneWithoutRun,
                format!(
                    "command/done \"{}\" has no prior command/run with that id",
                    crate::log::text::clip(id, 80)
                ),
            ));
        }
    }
}

/// A turn or step opened with number `n` must be the `next` one: else a finding, its message
/// made from the two.
fn expect_next(
    at: &Reporter<'_>,
    out: &mut Vec<Finding>,
    code: Code,
    n: Option<i64>,
    next: i64,
    message: impl FnOnce(i64, String) -> String,
) {
    if n != Some(next) {
        out.push(at.finding(code, message(next, show(n))));
    }
}

/// The two things that open and close: a turn, and a step inside it.
#[derive(Debug, Clone, Copy)]
enum Unit {
    Turn,
    Step,
}

fn show(v: Option<i64>) -> String {
    v.map_or_else(|| "none".to_owned(), |v| v.to_string())
}

fn quote(v: Option<&str>) -> String {
    v.map_or_else(
        || "none".to_owned(),
        |s| format!("\"{}\"", crate::log::text::clip(s, 60)),
    )
}

#[cfg(test)]
mod tests;
