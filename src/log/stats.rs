//! What a log holds, in numbers (`dshs stats`): an observer of the pass that counts events
//! by type, turns and their end reasons, steps, tool calls and results, compactions, the
//! messages that report usage and models (the tokens themselves are counted by `log::usage`,
//! once per call). Only the committed prefix counts: what it gathers while a speculation
//! runs (rows after a bad row) is forgotten if the speculation is rolled back as a crash tail.

use std::collections::BTreeMap;

use super::event::Kind;
use super::json::Json;
use super::scan::{EventInfo, FoldState, Observer, Unusable};

/// Everything counted from events. Cloned when a speculation starts, restored on rollback.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    pub by_type: BTreeMap<String, u64>,
    pub first_time: Option<i64>,
    pub last_time: Option<i64>,
    pub turns_started: u64,
    pub turns_ended: u64,
    pub end_reasons: BTreeMap<String, u64>,
    pub steps: u64,
    /// `tool/call` events: calls the harness actually started.
    pub tool_calls: u64,
    /// `tool-call` blocks in assistant messages: calls the model asked for.
    pub advertised_calls: u64,
    pub tool_results: u64,
    /// Results with `data.error` or a set failure flag (`isError: true`).
    pub error_results: u64,
    pub failed_compactions: u64,
    pub assistant_messages: u64,
    /// Messages with `data.usage` (tokens are counted by `log::usage`, once per call).
    pub with_usage: u64,
    /// `provider/model` of assistant messages.
    pub models: BTreeMap<String, u64>,
    /// Rows or event slots that never reached the fold (see `Observer::unusable`).
    pub unusable: u64,
}

#[derive(Default)]
pub struct Counter {
    pub counts: Counts,
    saved: Option<Counts>,
}

impl Observer for Counter {
    fn event(&mut self, info: &EventInfo<'_, '_>, _state: &FoldState) {
        let c = &mut self.counts;
        let ev = info.event;
        let d = &ev.data;
        *c.by_type.entry(ev.ty.to_string()).or_default() += 1;
        c.first_time.get_or_insert(ev.time);
        c.last_time = Some(ev.time);
        match ev.kind {
            Kind::TurnStart => c.turns_started += 1,
            Kind::TurnEnd => {
                c.turns_ended += 1;
                let kind = d
                    .get("reason")
                    .and_then(|r| r.get("kind"))
                    .and_then(Json::as_str)
                    .unwrap_or("?");
                *c.end_reasons.entry(kind.to_owned()).or_default() += 1;
            }
            Kind::StepStart => c.steps += 1,
            Kind::ToolCall => c.tool_calls += 1,
            Kind::ToolResult => {
                c.tool_results += 1;
                if is_error_result(d) {
                    c.error_results += 1;
                }
            }
            Kind::CompactionEnd if d.has("error") => c.failed_compactions += 1,
            Kind::AssistantMessage => {
                c.assistant_messages += 1;
                let m = d.get("message");
                c.advertised_calls += ev.tool_call_blocks().count() as u64;
                if d.get("usage").is_some_and(Json::is_obj) {
                    c.with_usage += 1;
                }
                let source = m.and_then(|m| m.get("source"));
                let field = |k| source.and_then(|s| s.get(k)).and_then(Json::as_str);
                if let (Some(p), Some(model)) = (field("provider"), field("model")) {
                    *c.models.entry(format!("{p}/{model}")).or_default() += 1;
                }
            }
            _ => {}
        }
    }

    /// A packed row's later members are chunks, counted by type and time alone.
    fn members_passed(&mut self, members: u64, time: i64) {
        let c = &mut self.counts;
        *c.by_type
            .entry(Kind::AssistantChunk.name().to_owned())
            .or_default() += members;
        c.last_time = Some(time);
    }

    fn wants_each_event(&self) -> bool {
        false
    }

    fn reads_stream_records(&self) -> bool {
        false
    }

    fn unusable(&mut self, _row: &Unusable<'_>) {
        self.counts.unusable += 1;
    }

    fn speculation_started(&mut self) {
        self.saved = Some(self.counts.clone());
    }

    fn speculation_ended(&mut self, committed: bool) {
        let saved = self.saved.take();
        if !committed && let Some(s) = saved {
            self.counts = s;
        }
    }
}

/// A failed tool result, in either shape: `data.error`, v4 `message.isError`, or v0–v3
/// `message.content[0].isError` (the tool-result block).
fn is_error_result(d: &Json<'_>) -> bool {
    let m = d.get("message");
    let flag = |v: Option<&Json<'_>>| v.and_then(|v| v.get("isError")) == Some(&Json::Bool(true));
    d.has("error")
        || flag(m)
        || flag(
            m.and_then(|m| m.get("content"))
                .and_then(Json::as_arr)
                .and_then(|c| c.first()),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::Finding;
    use crate::log::scan::{ScanOptions, scan};

    const V4: &str = r#"{"type":"session","version":4,"id":"s","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;

    fn count(text: &str) -> Counts {
        let mut counter = Counter::default();
        let mut findings: Vec<Finding> = Vec::new();
        scan(
            text.as_bytes(),
            None,
            &ScanOptions::default(),
            &mut findings,
            &mut counter,
        )
        .unwrap();
        counter.counts
    }

    fn turn(seq0: u64, turn: u64, kind: &str) -> String {
        format!(
            "{{\"type\":\"turn/start\",\"seq\":{seq0},\"time\":5,\"data\":{{\"turn\":{turn}}}}}\n{{\"type\":\"turn/end\",\"seq\":{},\"time\":7,\"data\":{{\"turn\":{turn},\"reason\":{{\"kind\":\"{kind}\"}}}}}}\n",
            seq0 + 1
        )
    }

    #[test]
    fn crash_tail_rows_are_not_counted() {
        let text = format!(
            "{V4}\n{}not json\n{}",
            turn(0, 1, "completed"),
            // After the bad row, but no turn end follows: a crash tail.
            "{\"type\":\"turn/start\",\"seq\":3,\"time\":9,\"data\":{\"turn\":2}}\n"
        );
        let c = count(&text);
        assert_eq!((c.turns_started, c.turns_ended), (1, 1));
        assert_eq!(c.unusable, 0);
        assert_eq!(c.last_time, Some(7));
        assert_eq!(c.by_type.values().sum::<u64>(), 2);
    }

    #[test]
    fn committed_damage_is_counted() {
        let text = format!(
            "{V4}\n{}not json\n{}",
            turn(0, 1, "completed"),
            turn(3, 2, "aborted")
        );
        let c = count(&text);
        assert_eq!((c.turns_started, c.turns_ended), (2, 2));
        assert_eq!(c.unusable, 1);
        assert_eq!(
            c.end_reasons,
            BTreeMap::from([("aborted".into(), 1), ("completed".into(), 1)])
        );
    }

    #[test]
    fn error_results_in_both_shapes() {
        let v0 = crate::log::json::parse(
            br#"{"message":{"content":[{"type":"tool-result","toolCallId":"c","isError":true,"content":[]}]}}"#,
        )
        .unwrap();
        let v4 = crate::log::json::parse(br#"{"message":{"isError":true,"content":[]}}"#).unwrap();
        let by_error = crate::log::json::parse(br#"{"error":{"code":"X"},"message":{}}"#).unwrap();
        let ok = crate::log::json::parse(
            br#"{"message":{"isError":false,"content":[{"type":"text","text":"x"}]}}"#,
        )
        .unwrap();
        assert!(is_error_result(&v0) && is_error_result(&v4) && is_error_result(&by_error));
        assert!(!is_error_result(&ok));
    }
}
