//! The compaction bracket (§15.4): agreement of start/summary/end (v3+), spans that name the
//! current surface exactly (v3+), and an unfinished compaction at the end (all versions).

use super::codes::Code;
use super::dialect::{Dialect, SurfaceKind};
use super::event::Kind;
use super::finding::{Finding, Pos, Reporter, Sink};
use super::json::{self, Json, OwnedJson};
use super::rows::Event;
use super::surface::{RangeError, SurfaceManager};
use super::text::seq_list;

#[derive(Debug, Clone)]
struct Active {
    id: OwnedJson,
    source_command: Option<OwnedJson>,
    turn: OwnedJson,
    summaries: u32,
    pos: Pos,
    seq: u64,
}

#[derive(Debug, Clone)]
pub struct CompactionTracker {
    dialect: &'static Dialect,
    active: Option<Active>,
    pub compactions: u64,
    pub prunes: u64,
}

impl CompactionTracker {
    pub fn new(dialect: &'static Dialect) -> Self {
        CompactionTracker {
            dialect,
            active: None,
            compactions: 0,
            prunes: 0,
        }
    }

    /// Whether a compaction is running (an unmatched start not expired by an end-seed).
    pub fn is_active(&self) -> bool {
        self.active.is_some()
    }

    /// Observe one event. `open_turn` is the lifecycle's open turn *before* this event;
    /// `surface` is the surface *before* this event was folded.
    pub fn observe(
        &mut self,
        ev: &Event<'_>,
        open_turn: Option<i64>,
        surface: &SurfaceManager,
        sink: &mut dyn Sink,
    ) {
        let strict = self.dialect.restore_lifecycle;
        let at = Reporter {
            version: Some(self.dialect.version),
            pos: ev.pos,
            seq: Some(ev.seq),
            event_type: Some(&ev.ty),
        };
        let d = &ev.data;
        match ev.kind {
            Kind::CompactionStart => {
                if strict {
                    if let Some(a) = &self.active {
                        sink.push(at.finding(
                            Code::CompactionMismatch,
                            format!(
                                "compaction/start while compaction {} (seq {}) is still active",
                                a.id.to_js_string(),
                                a.seq
                            ),
                        ));
                    }
                    self.check_turn(d, open_turn, &at, sink);
                }
                self.active = Some(Active {
                    id: OwnedJson::new(d.get("compactionId").cloned().unwrap_or(Json::Null)),
                    source_command: d.get("sourceCommandId").cloned().map(OwnedJson::new),
                    turn: OwnedJson::new(d.get("turn").cloned().unwrap_or(Json::Null)),
                    summaries: 0,
                    pos: ev.pos,
                    seq: ev.seq,
                });
            }
            Kind::CompactionSummary => {
                if strict {
                    self.check_member(d, Kind::CompactionSummary, &at, sink);
                    self.check_span(d, surface, &at, sink);
                }
                if let Some(a) = &mut self.active {
                    a.summaries += 1;
                }
            }
            Kind::CompactionEnd => {
                if strict {
                    self.check_member(d, Kind::CompactionEnd, &at, sink);
                    if let Some(a) = &self.active {
                        if !json::json_equal(d.get("turn").unwrap_or(&Json::Null), &a.turn) {
                            sink.push(at.finding(
                                Code::CompactionMismatch,
                                format!(
                                    "compaction/end turn {} differs from its compaction/start turn {}",
                                    js_or(d.get("turn"), "(missing)"),
                                    a.turn.to_js_string()
                                ),
                            ));
                        }
                        if !d.has("error") && a.summaries != 1 {
                            sink.push(at.finding(
                                Code::CompactionSummaryCount,
                                format!(
                                    "successful compaction/end has {} summaries; exactly one is required",
                                    a.summaries
                                ),
                            ));
                        }
                    }
                }
                if self.active.take().is_some() && !d.has("error") {
                    self.compactions += 1;
                }
            }
            Kind::CompactionPrune => {
                if strict {
                    self.check_span(d, surface, &at, sink);
                }
                self.prunes += 1;
            }
            Kind::SessionEndSeed => {
                // A resume proves an unmatched start belongs to an ended lifecycle.
                self.active = None;
            }
            Kind::UserMessage if strict && self.dialect.v4_payloads => {
                let source = d.get("source");
                if source.and_then(|s| s.get("kind")).and_then(Json::as_str)
                    == Some("compact-checkpoint")
                {
                    let named = source.and_then(|s| s.get("compactionId"));
                    let active = self.active.as_ref().map(|a| &*a.id);
                    if !matches!((active, named), (Some(a), Some(n)) if json::json_equal(a, n)) {
                        sink.push(at.finding(
                            Code::CompactionCheckpointSource,
                            format!(
                                "compact-checkpoint message names compaction {} but the active one is {}",
                                js_or(named, "(none)"),
                                js_or(active, "(none)")
                            ),
                        ));
                    }
                }
            }
            _ => {}
        }
    }

    fn check_turn(
        &self,
        d: &Json<'_>,
        open_turn: Option<i64>,
        at: &Reporter<'_>,
        sink: &mut dyn Sink,
    ) {
        let turn = d.get("turn");
        let ok = match (open_turn, turn) {
            (None, Some(Json::Null)) => true,
            (Some(t), Some(v)) => v.safe_int() == Some(t),
            _ => false,
        };
        if !ok {
            sink.push(at.finding(
                Code::CompactionMismatch,
                format!(
                    "compaction/start turn must be {} (found {})",
                    open_turn.map_or_else(
                        || "null outside a turn".into(),
                        |t| format!("the open turn {t}")
                    ),
                    js_or(turn, "(missing)")
                ),
            ));
        }
    }

    fn check_member(&self, d: &Json<'_>, kind: Kind, at: &Reporter<'_>, sink: &mut dyn Sink) {
        let what = kind.name();
        let Some(a) = &self.active else {
            sink.push(at.finding(
                Code::CompactionMismatch,
                format!("{what} without an active compaction/start"),
            ));
            return;
        };
        let id_ok = d
            .get("compactionId")
            .is_some_and(|v| json::json_equal(v, &a.id));
        let cmd_ok = match (d.get("sourceCommandId"), &a.source_command) {
            (None, None) => true,
            (Some(x), Some(y)) => json::json_equal(x, y),
            _ => false,
        };
        if !id_ok || !cmd_ok {
            sink.push(at.finding(
                Code::CompactionMismatch,
                format!(
                    "{what} compactionId/sourceCommandId do not match the active compaction {} started at seq {} (line {})",
                    a.id.to_js_string(),
                    a.seq,
                    a.pos.line
                ),
            ));
        }
    }

    /// A span names exactly the current surface nodes between its endpoints and excludes
    /// the protected system head.
    fn check_span(
        &self,
        d: &Json<'_>,
        surface: &SurfaceManager,
        at: &Reporter<'_>,
        sink: &mut dyn Sink,
    ) {
        let range = d.get("shadowedRange");
        let start = range.and_then(|r| r.get("start")).and_then(Json::safe_uint);
        let end = range.and_then(|r| r.get("end")).and_then(Json::safe_uint);
        let listed: Option<Vec<u64>> = d
            .get("shadowedSeqs")
            .and_then(Json::as_arr)
            .and_then(|a| a.iter().map(Json::safe_uint).collect());
        let (Some(start), Some(end), Some(listed)) = (start, end, listed) else {
            sink.push(at.finding(
                Code::CompactionSpanInvalid,
                "span needs shadowedRange {start, end} and shadowedSeqs as seqs",
            ));
            return;
        };
        let actual = match surface.range(start, end) {
            Ok(nodes) => nodes,
            Err(e) => {
                let why = match e {
                    RangeError::StartMissing => {
                        format!("start {start} is not a current surface node")
                    }
                    RangeError::EndMissing => format!("end {end} is not a current surface node"),
                    RangeError::Reversed => {
                        format!("start {start} comes after end {end} on the surface")
                    }
                };
                sink.push(at.finding(
                    Code::CompactionSpanInvalid,
                    format!("span {start}..{end}: {why}"),
                ));
                return;
            }
        };
        if actual != listed {
            sink.push(at.finding(
                Code::CompactionSpanInvalid,
                format!(
                    "shadowedSeqs [{}] differ from the surface nodes between {start} and {end}: [{}]",
                    seq_list(&listed, 20),
                    seq_list(&actual, 20)
                ),
            ));
            return;
        }
        let head = surface.head();
        if head.is_some_and(|h| h.seq == start && h.kind == SurfaceKind::System) {
            sink.push(at.finding(
                Code::CompactionSpanInvalid,
                format!("span {start}..{end} covers the protected system head"),
            ));
        }
    }

    /// End of the committed prefix: a compaction still running is a crash during compaction.
    pub fn finish(&self, version: u8) -> Option<Finding> {
        let a = self.active.as_ref()?;
        Some(
            Reporter {
                version: Some(version),
                pos: a.pos,
                seq: Some(a.seq),
                event_type: Some(Kind::CompactionStart.name()),
            }
            .finding(
                Code::CompactionOpenAtEnd,
                format!(
                    "compaction {} started at seq {} never ended (a crash during compaction; DSH expires it on the next resume)",
                    a.id.to_js_string(),
                    a.seq
                ),
            ),
        )
    }
}

/// A JSON value in a message as JavaScript writes it, or `absent` when there is none.
fn js_or(v: Option<&Json<'_>>, absent: &str) -> String {
    v.map_or_else(|| absent.to_owned(), Json::to_js_string)
}
