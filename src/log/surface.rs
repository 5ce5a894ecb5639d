//! The `SurfaceManager` (§11): the ordered list of surface nodes, folded one event at a time.
//!
//! Each event is first validated into a [`Plan`] without touching the state, then the plan is
//! committed; a rejected event leaves the state exactly as before. The surface is a doubly
//! linked list keyed by seq, so a replacement costs O(length of the replaced range) and
//! locating a node is O(1) — never a rescan, however long the log.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use super::codes::Code;
use super::dialect::{Dialect, SurfaceKind, ToolResultShape};
use super::finding::{Finding, Pos, Reporter, Sink};
use super::json::{self, Json, Seg};
use super::rows::{Event, SourceError, decode_sources};
use super::text::seq_list;
use super::vocab::TypeClass;

const NIL: u64 = u64::MAX;

/// How a node entered the surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryOp {
    Append,
    Replace,
}

impl EntryOp {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryOp::Append => "append",
            EntryOp::Replace => "replace",
        }
    }
}

/// One surface node: enough to fold, derive and display it without holding its bytes.
#[derive(Debug, Clone)]
pub struct Node {
    prev: u64,
    next: u64,
    pub seq: u64,
    pub kind: SurfaceKind,
    pub op: EntryOp,
    /// The message role as stored (None when missing or not a string).
    pub role: Option<Arc<str>>,
    /// Where the event's line starts (for fetching the message when it is emitted).
    pub pos: Pos,
    /// Whether the node derives a message (§12.1): false for an assistant, system or
    /// developer message with empty content.
    pub derives: bool,
    /// Tool-call blocks in an assistant message (pairing balance, §15.3).
    pub tool_calls: u32,
    /// For tool results: hash of `data` with the result content blanked (§11.2 step 7.3).
    pub result_shape: u64,
    /// v0 only (boxed: most nodes never need it, and memory follows the surface).
    legacy: Option<Box<LegacyNode>>,
}

/// What a v0 node needs beyond the file's bytes (§16).
#[derive(Debug, Clone, Default)]
struct LegacyNode {
    /// The normalized message of a pre-release shape: the file holds none to copy.
    message: Option<Box<str>>,
    /// A tool result's message id, which a legacy replacement reuses.
    message_id: Option<Box<str>>,
}

impl Node {
    /// v0 legacy shapes: the normalized message to derive instead of the stored bytes.
    pub fn legacy_message(&self) -> Option<&str> {
        self.legacy.as_ref()?.message.as_deref()
    }
}

/// The common roles share one allocation each, so a node's role costs no heap memory.
fn intern_role(role: &str) -> Arc<str> {
    static COMMON: std::sync::OnceLock<[Arc<str>; 5]> = std::sync::OnceLock::new();
    let common =
        COMMON.get_or_init(|| ["system", "developer", "user", "assistant", "tool"].map(Arc::from));
    common
        .iter()
        .find(|r| r.as_ref() == role)
        .cloned()
        .unwrap_or_else(|| Arc::from(role))
}

/// A replacement as recorded for `surface --format json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    pub seq: u64,
    pub start: u64,
    pub end: u64,
    pub shadowed: Vec<u64>,
}

/// A validated change, ready to commit.
#[derive(Debug)]
pub enum Plan {
    /// Not a surface action.
    Nothing,
    Append(Node),
    Replace {
        node: Node,
        start: u64,
        end: u64,
        shadowed: Vec<u64>,
    },
}

/// Why a range of the surface cannot be taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeError {
    StartMissing,
    EndMissing,
    Reversed,
}

/// A tool definition from a `request/header` (for v4 developer binding, §9.3).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ToolDef {
    name: String,
    complete: bool,
    defer_loading_ok: bool,
}

/// Which seqs are `request/header` events and the tool list each carries. One bit per event
/// marks the headers; tool lists are kept as runs (a new run only when the list changes) and
/// identical lists share one allocation, so memory follows the number of tool-set changes,
/// not the number of requests.
#[derive(Debug, Clone, Default)]
struct HeaderTools {
    is_header: Vec<u64>,
    /// (first header seq of the run, its tools), in seq order.
    runs: Vec<(u64, Arc<[ToolDef]>)>,
    distinct: HashMap<u64, Arc<[ToolDef]>>,
}

impl HeaderTools {
    fn record(&mut self, seq: u64, data: &Json<'_>) {
        let tools: Vec<ToolDef> = data
            .get("header")
            .and_then(|h| h.get("tools"))
            .and_then(Json::as_arr)
            .unwrap_or_default()
            .iter()
            .map(|t| ToolDef {
                name: t
                    .get("name")
                    .and_then(Json::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                complete: t.get("description").is_some_and(|d| d.as_str().is_some())
                    && t.get("parameters").is_some_and(Json::is_obj),
                defer_loading_ok: t.get("deferLoading").is_none_or(|d| d == &Json::Bool(true)),
            })
            .collect();
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if self.is_header.len() <= word {
            self.is_header.resize(word + 1, 0);
        }
        self.is_header[word] |= 1 << bit;
        if self
            .runs
            .last()
            .is_some_and(|(_, last)| last.as_ref() == tools.as_slice())
        {
            return;
        }
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&tools, &mut h);
        let key = h.finish();
        let shared = match self.distinct.get(&key) {
            Some(existing) if existing.as_ref() == tools.as_slice() => existing.clone(),
            _ => {
                let arc: Arc<[ToolDef]> = tools.into();
                self.distinct.insert(key, arc.clone());
                arc
            }
        };
        self.runs.push((seq, shared));
    }

    /// The tools of the `request/header` at `seq`, or None when that event is not one.
    fn get(&self, seq: u64) -> Option<&Arc<[ToolDef]>> {
        let word = self.is_header.get(usize::try_from(seq / 64).ok()?)?;
        if word & (1 << (seq % 64)) == 0 {
            return None;
        }
        let i = self.runs.partition_point(|(first, _)| *first <= seq);
        self.runs.get(i.checked_sub(1)?).map(|(_, tools)| tools)
    }
}

/// Seqs are dense integers: a multiplicative hash is enough and much cheaper than SipHash.
#[derive(Default, Clone, Copy)]
pub struct SeqHasher(u64);

impl Hasher for SeqHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    }
}

pub type SeqHash = BuildHasherDefault<SeqHasher>;

/// A set of seqs (or seq-like digests) with [`SeqHash`].
pub type SeqSet = std::collections::HashSet<u64, SeqHash>;

/// The digest of a `tool/result`'s rewrite-invariant part: its data with the result text
/// blanked (a prune may rewrite only that, §12). `keys_unique`: as for
/// [`json::canonical_hash`].
pub fn result_digest(dialect: &Dialect, data: &Json<'_>, keys_unique: bool) -> u64 {
    let blank: &[Seg] = match dialect.tool_result_shape {
        ToolResultShape::Wrapped => &[
            Seg::Key("message"),
            Seg::Key("content"),
            Seg::Index(0),
            Seg::Key("content"),
        ],
        ToolResultShape::ToolRole => &[Seg::Key("message"), Seg::Key("content")],
    };
    json::canonical_hash(data, Some(blank), keys_unique)
}

#[derive(Debug, Clone)]
pub struct SurfaceManager {
    dialect: &'static Dialect,
    nodes: HashMap<u64, Node, SeqHash>,
    head: u64,
    tail: u64,
    next_seq: u64,
    generation: u64,
    replacements: Option<Vec<Replacement>>,
    /// The endpoints of the replacement nodes now on the surface (bounded by the surface).
    live_ranges: HashMap<u64, (u64, u64), SeqHash>,
    /// The highest seq ever linked: no node has a higher one.
    top: Option<u64>,
    headers: HeaderTools,
}

impl SurfaceManager {
    pub fn new(dialect: &'static Dialect) -> Self {
        SurfaceManager {
            dialect,
            nodes: HashMap::default(),
            head: NIL,
            tail: NIL,
            next_seq: 0,
            generation: 0,
            replacements: None,
            live_ranges: HashMap::default(),
            top: None,
            headers: HeaderTools::default(),
        }
    }

    /// Keep every replacement (for `surface --format json`); off by default to keep memory
    /// independent of the log's history.
    pub fn record_replacements(&mut self) {
        self.replacements.get_or_insert_with(Vec::new);
    }

    /// The range a node on the surface replaced (`None` for appended nodes).
    pub fn replaced_range(&self, seq: u64) -> Option<(u64, u64)> {
        self.live_ranges.get(&seq).copied()
    }

    pub fn replacements(&self) -> &[Replacement] {
        self.replacements.as_deref().unwrap_or_default()
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn replace_generation(&self) -> u64 {
        self.generation
    }

    /// The seq the next event must carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// After a seq gap in damaged input, continue from the observed seq (§6.3).
    pub fn resync(&mut self, seq: u64) {
        self.next_seq = seq;
    }

    /// An event that occupies a seq but is never folded (bad envelope).
    pub fn skip(&mut self, seq: u64) {
        self.next_seq = seq.saturating_add(1);
    }

    /// The highest seq ever linked onto the surface.
    pub fn top(&self) -> Option<u64> {
        self.top
    }

    pub fn contains(&self, seq: u64) -> bool {
        self.nodes.contains_key(&seq)
    }

    pub fn node(&self, seq: u64) -> Option<&Node> {
        self.nodes.get(&seq)
    }

    pub fn head(&self) -> Option<&Node> {
        self.nodes.get(&self.head)
    }

    /// Nodes in model order.
    pub fn iter(&self) -> impl Iterator<Item = &Node> + '_ {
        let mut cur = self.head;
        std::iter::from_fn(move || {
            let n = self.nodes.get(&cur)?;
            cur = n.next;
            Some(n)
        })
    }

    pub fn seqs(&self) -> Vec<u64> {
        self.iter().map(|n| n.seq).collect()
    }

    /// 0-based position of a node (O(n); for messages only).
    pub fn index_of(&self, seq: u64) -> Option<usize> {
        self.iter().position(|n| n.seq == seq)
    }

    /// The nodes from `start` to `end` inclusive, in surface order. Searches outward from
    /// `start` in both directions, so the cost is the distance between the two nodes.
    pub fn range(&self, start: u64, end: u64) -> Result<Vec<u64>, RangeError> {
        if !self.nodes.contains_key(&start) {
            return Err(RangeError::StartMissing);
        }
        if !self.nodes.contains_key(&end) {
            return Err(RangeError::EndMissing);
        }
        let mut forward = vec![start];
        if start == end {
            return Ok(forward);
        }
        let (mut fwd, mut bwd) = (self.nodes[&start].next, self.nodes[&start].prev);
        loop {
            if fwd != NIL {
                forward.push(fwd);
                if fwd == end {
                    return Ok(forward);
                }
                fwd = self.nodes[&fwd].next;
            }
            if bwd != NIL {
                if bwd == end {
                    return Err(RangeError::Reversed);
                }
                bwd = self.nodes[&bwd].prev;
            }
            if fwd == NIL && bwd == NIL {
                // Both ends of the list reached without meeting `end`: cannot happen for a
                // consistent list, but never loop forever on a bug.
                return Err(RangeError::EndMissing);
            }
        }
    }

    /// Pairing balance of the cuts before `start` and after `end` (§15.3): the running count
    /// of open tool calls (assistant tool-call blocks minus tool results) is zero at both.
    /// Returns the counter before `start` and after `end`; a negative counter anywhere is
    /// reported as `Err(seq)` of the node where it went negative.
    pub fn balance_around(&self, start: u64, end: u64) -> Result<(i64, i64), u64> {
        let mut count: i64 = 0;
        let mut before = None;
        let mut after = None;
        for n in self.iter() {
            if n.seq == start {
                before = Some(count);
            }
            count += i64::from(n.tool_calls);
            if n.kind == SurfaceKind::ToolResult {
                count -= 1;
            }
            if count < 0 {
                return Err(n.seq);
            }
            if n.seq == end {
                after = Some(count);
            }
        }
        Ok((before.unwrap_or(0), after.unwrap_or(0)))
    }

    /// Fold one event: plan, then commit or reject. Returns whether the event was accepted.
    pub fn fold(&mut self, ev: &Event<'_>, class: TypeClass, sink: &mut dyn Sink) -> bool {
        let at = Reporter {
            version: Some(self.dialect.version),
            pos: ev.pos,
            seq: Some(ev.seq),
            event_type: Some(&ev.ty),
        };
        if ev.ty == "request/header" && self.dialect.developer {
            self.headers.record(ev.seq, &ev.data);
        }
        let planned = self.plan(ev, class, &at);
        self.next_seq = ev.seq.saturating_add(1);
        match planned {
            Ok((plan, warnings)) => {
                for w in warnings {
                    sink.push(w);
                }
                self.commit(plan);
                true
            }
            Err(f) => {
                sink.push(f);
                false
            }
        }
    }

    /// Validate an event into a plan (§11.2) without changing anything.
    pub fn plan(
        &self,
        ev: &Event<'_>,
        class: TypeClass,
        at: &Reporter<'_>,
    ) -> Result<(Plan, Vec<Finding>), Finding> {
        let d = self.dialect;
        // Step 1 — seq.
        if ev.seq != self.next_seq {
            return Err(at.finding(
                Code::SeqNotContiguous,
                format!(
                    "session event seq {} is not contiguous; expected {}",
                    ev.seq, self.next_seq
                ),
            ));
        }
        // A scan resynchronises on the observed seq after a gap (§6.3), which in damaged
        // input can go back to a seq already on the surface: folding it would link the node
        // twice (found by fuzzing, testdata/fuzz/repeated-seq-on-surface). Only a seq no
        // higher than the highest ever linked can be on it: the lookup is skipped otherwise.
        if self.top.is_some_and(|t| ev.seq <= t) && self.nodes.contains_key(&ev.seq) {
            return Err(at.finding(
                Code::SeqNotContiguous,
                format!(
                    "session event seq {} repeats the seq of an event already on the surface",
                    ev.seq
                ),
            ));
        }
        // Step 2 — eligibility and marker shape.
        let kind = match class {
            TypeClass::Surface(kind) => kind,
            TypeClass::Opaque if d.opaque_unknown_metadata => return Ok((Plan::Nothing, vec![])),
            // Refused types were reported by the vocabulary check; never interpret them.
            TypeClass::UnknownRequired | TypeClass::RetiredRequired => {
                return Ok((Plan::Nothing, vec![]));
            }
            TypeClass::LogOnly | TypeClass::Opaque => {
                return self.plan_log_only(ev, class, at);
            }
        };
        let endpoints = marker(d, ev, at)?;
        // Step 3 — event-local references (v3+).
        let mut sources = None;
        if d.canonical {
            if let Some((s, e)) = endpoints
                && (s >= ev.seq || e >= ev.seq)
            {
                return Err(at.finding(
                        Code::ReplaceEndpointNotEarlier,
                        format!(
                            "surface replace at seq {}: startSeq and endSeq must reference earlier events (got {s}..{e})",
                            ev.seq
                        ),
                    ));
            }
            sources = self.provenance(ev, kind, at)?;
        }
        // Step 4 — developer binding (v4).
        if d.developer {
            self.developer_binding(ev, kind, at)?;
        }
        // Step 6 for v0–v2 appends.
        if !d.canonical && endpoints.is_none() {
            self.provenance(ev, kind, at)?;
        }
        let node = self.node_for(ev, kind, endpoints.is_some());
        let Some((start, end)) = endpoints else {
            return Ok((Plan::Append(node), vec![]));
        };
        // Step 7.1 — the range, by surface position.
        let shadowed = self.range(start, end).map_err(|e| match e {
            RangeError::StartMissing => at.finding(
                Code::ReplaceStartNotOnSurface,
                format!("surface replace: start seq {start} not found in surface"),
            ),
            RangeError::EndMissing => at.finding(
                Code::ReplaceEndNotOnSurface,
                format!("surface replace: end seq {end} not found in surface"),
            ),
            RangeError::Reversed => at.finding(
                Code::ReplaceRangeReversed,
                format!(
                    "surface replace: start seq {start} (index {}) is after end seq {end} (index {})",
                    self.index_of(start).unwrap_or_default(),
                    self.index_of(end).unwrap_or_default()
                ),
            ),
        })?;
        // Step 7.2 — provenance (v0–v2: a–g; v3+: g).
        if !d.canonical {
            sources = self.provenance(ev, kind, at)?;
        }
        let missing = match &sources {
            Some(list) => list.missing(&shadowed),
            None => shadowed.clone(),
        };
        if !missing.is_empty() {
            return Err(at.finding(
                Code::ReplaceMissingShadowedSource,
                format!(
                    "surface replace: sourceEventSeqs must include every shadowed surface node; missing {}",
                    seq_list(&missing, 20)
                ),
            ));
        }
        // Step 7.3 — tool-result rule.
        if kind == SurfaceKind::ToolResult {
            if shadowed.len() != 1 {
                return Err(at.finding(
                    Code::ToolResultReplaceNotSingle,
                    format!(
                        "tool/result surface replacement must rewrite exactly one current node, but {start}..{end} covers {} nodes",
                        shadowed.len()
                    ),
                ));
            }
            let target = &self.nodes[&shadowed[0]];
            if target.kind != SurfaceKind::ToolResult {
                return Err(at.finding(
                    Code::ToolResultReplaceTargetNotResult,
                    format!(
                        "tool/result surface replacement must target a current tool/result, but seq {} is a {}",
                        target.seq,
                        target.kind.type_name()
                    ),
                ));
            }
            if target.result_shape != node.result_shape {
                return Err(at.finding(
                    Code::ToolResultReplaceChangesMore,
                    format!(
                        "tool/result surface replacement may change only content, but its data differs from seq {} elsewhere (turn, step, error, meta, message id, source, toolCallId or isError)",
                        target.seq
                    ),
                ));
            }
        }
        // Step 7.4 — protected system head (v3+).
        if d.system_head && self.head == start {
            let head_is_system = self.nodes[&start].kind == SurfaceKind::System;
            if head_is_system && (kind != SurfaceKind::System || shadowed.len() != 1) {
                return Err(at.finding(
                    Code::SystemHeadProtected,
                    format!(
                        "surface replace: node 0 holds the system prompt and may be rewritten only by a system/message over exactly that node (this {} covers {} node{})",
                        kind.type_name(),
                        shadowed.len(),
                        if shadowed.len() == 1 { "" } else { "s" }
                    ),
                ));
            }
        }
        Ok((
            Plan::Replace {
                node,
                start,
                end,
                shadowed,
            },
            vec![],
        ))
    }

    fn plan_log_only(
        &self,
        ev: &Event<'_>,
        class: TypeClass,
        at: &Reporter<'_>,
    ) -> Result<(Plan, Vec<Finding>), Finding> {
        let what = if class == TypeClass::Opaque {
            "an unknown ignorable event"
        } else {
            "not surface-eligible"
        };
        if ev.surface_op.is_some() {
            return Err(at.finding(
                Code::SurfaceMetadataOnLogOnly,
                format!(
                    "session event \"{}\" is {what} and cannot carry surfaceOp",
                    ev.ty
                ),
            ));
        }
        if ev.source_seqs.is_some() {
            return Err(at.finding(
                Code::SurfaceMetadataOnLogOnly,
                format!(
                    "session event \"{}\" is {what} and cannot carry sourceEventSeqs",
                    ev.ty
                ),
            ));
        }
        let mut warnings = vec![];
        // Step 5 — message projections (v4).
        if self.dialect.message_projections && ev.ty == "image/offload" {
            warnings.push(at.finding(
                Code::MessageProjectionNotApplied,
                "image/offload rewrites derived messages through its owning plugin, which dshs does not have; derive shows the stored messages",
            ));
        }
        Ok((Plan::Nothing, warnings))
    }

    /// Step 6 a–f: the local provenance rules. Returns the decoded list, if any.
    fn provenance(
        &self,
        ev: &Event<'_>,
        kind: SurfaceKind,
        at: &Reporter<'_>,
    ) -> Result<Option<super::rows::SeqList>, Finding> {
        let d = self.dialect;
        let Some(stored) = &ev.source_seqs else {
            return Ok(None);
        };
        if d.canonical && kind == SurfaceKind::Assistant {
            return Err(at.finding(
                Code::SourceSeqsOnAssistant,
                "assistant/message embeds its source stream and cannot carry sourceEventSeqs",
            ));
        }
        let Some(items) = stored.as_arr() else {
            return Err(at.finding(
                Code::SourceSeqsNotArray,
                format!(
                    "sourceEventSeqs on event at seq {} must be an array when present",
                    ev.seq
                ),
            ));
        };
        if items.is_empty() && (d.canonical || kind != SurfaceKind::Assistant) {
            let msg = if d.canonical {
                "sourceEventSeqs must not be empty"
            } else {
                "sourceEventSeqs must not be empty except on assistant/message"
            };
            return Err(at.finding(Code::SourceSeqsEmpty, msg));
        }
        let neg_zero = |v: &Json<'_>| match v {
            Json::Arr(pair) => pair.iter().any(Json::is_neg_zero),
            other => other.is_neg_zero(),
        };
        let invalid = |why: String| {
            at.finding(
                Code::SourceSeqsInvalidElement,
                format!(
                    "session event \"{}\" sourceEventSeqs must densely contain non-negative safe integers ({why})",
                    ev.ty
                ),
            )
        };
        if d.canonical && items.iter().any(neg_zero) {
            return Err(invalid("found -0".into()));
        }
        match decode_sources(stored, Some(ev.seq)) {
            Ok(list) => Ok(Some(list)),
            Err(SourceError::NotArray) => unreachable_not_array(at, ev),
            Err(SourceError::BadElement(why)) => Err(invalid(why)),
            Err(SourceError::NotIncreasing) => Err(invalid(
                "a range-encoded list must be strictly increasing".into(),
            )),
            Err(SourceError::Duplicate(v)) => Err(at.finding(
                Code::SourceSeqsDuplicate,
                format!("sourceEventSeqs must not contain duplicates ({v} repeats)"),
            )),
            Err(SourceError::NotEarlier { value, seq }) => Err(at.finding(
                Code::SourceSeqsNotEarlier,
                format!(
                    "sourceEventSeqs must reference earlier events: {value} >= current seq {seq}"
                ),
            )),
        }
    }

    /// §9.3: developer messages and tool-change blocks (v4).
    fn developer_binding(
        &self,
        ev: &Event<'_>,
        kind: SurfaceKind,
        at: &Reporter<'_>,
    ) -> Result<(), Finding> {
        let message = ev.message();
        let role_is_developer =
            message.and_then(|m| m.get("role")).and_then(Json::as_str) == Some("developer");
        if (kind == SurfaceKind::Developer) != role_is_developer {
            return Err(at.finding(
                Code::DeveloperRoleMismatch,
                "developer/message and developer role must occur together",
            ));
        }
        let blocks = message
            .and_then(|m| m.get("content"))
            .and_then(Json::as_arr)
            .unwrap_or_default();
        let changes: Vec<&Json<'_>> = blocks
            .iter()
            .filter(|b| {
                matches!(
                    b.get("type").and_then(Json::as_str),
                    Some("tool-addition" | "tool-removal")
                )
            })
            .collect();
        if kind != SurfaceKind::Developer {
            if !changes.is_empty() {
                return Err(at.finding(
                    Code::ToolChangeBlockMisplaced,
                    format!(
                        "tool-change blocks require developer role (found in {})",
                        ev.ty
                    ),
                ));
            }
            return Ok(());
        }
        let mut additions = Vec::new();
        for b in &changes {
            let block_type = b.get("type").and_then(Json::as_str).unwrap_or_default();
            let Some(name) = b.get("toolName").and_then(Json::as_text) else {
                return Err(at.finding(
                    Code::ToolChangeBlockInvalid,
                    format!("{block_type} requires a nonempty toolName"),
                ));
            };
            if block_type == "tool-addition" {
                if b.has("tool") {
                    return Err(at.finding(
                        Code::ToolChangeBlockInvalid,
                        "tool-addition must omit inline tool definitions",
                    ));
                }
                additions.push(name);
            }
        }
        let header_seq = ev.data.get("headerSeq");
        if header_seq.is_some() == additions.is_empty() {
            return Err(at.finding(
                Code::DeveloperHeaderSeq,
                "developer/message requires headerSeq exactly when tool additions are present",
            ));
        }
        let Some(header_seq) = header_seq else {
            return Ok(());
        };
        let Some(hs) = header_seq.safe_uint() else {
            return Err(at.finding(
                Code::DeveloperHeaderSeq,
                "developer/message headerSeq must be a safe integer ≥ 0",
            ));
        };
        let tools = match self.headers.get(hs) {
            Some(tools) if hs < ev.seq => tools,
            _ => {
                return Err(at.finding(
                    Code::DeveloperHeaderSeq,
                    format!(
                        "developer/message headerSeq must reference an earlier request/header (seq {hs} is not one)"
                    ),
                ));
            }
        };
        for name in additions {
            let matching: Vec<&ToolDef> = tools.iter().filter(|t| t.name == name).collect();
            let [tool] = matching.as_slice() else {
                return Err(at.finding(
                    Code::DeveloperToolBinding,
                    format!(
                        "developer/message tool-addition \"{}\" must name exactly one tool in headerSeq {hs} (found {})",
                        crate::log::text::clip(name, 80),
                        matching.len()
                    ),
                ));
            };
            if !tool.complete {
                return Err(at.finding(
                    Code::DeveloperToolBinding,
                    format!(
                        "developer/message tool-addition \"{}\" requires a complete tool definition in headerSeq {hs} (string description and object parameters)",
                        crate::log::text::clip(name, 80)
                    ),
                ));
            }
            if !tool.defer_loading_ok {
                return Err(at.finding(
                    Code::DeveloperToolBinding,
                    "developer/message referenced tool deferLoading must be true when present",
                ));
            }
        }
        Ok(())
    }

    fn node_for(&self, ev: &Event<'_>, kind: SurfaceKind, replace: bool) -> Node {
        let message = ev.message();
        let content = message.and_then(|m| m.get("content"));
        let empty = content
            .and_then(Json::as_arr)
            .is_some_and(<[Json<'_>]>::is_empty);
        let derives = match kind {
            SurfaceKind::User | SurfaceKind::ToolResult => true,
            SurfaceKind::Assistant | SurfaceKind::System | SurfaceKind::Developer => !empty,
        };
        let tool_calls = if kind == SurfaceKind::Assistant {
            ev.tool_call_blocks().count() as u32
        } else {
            0
        };
        let result_shape = if kind == SurfaceKind::ToolResult {
            ev.result_digest
                .unwrap_or_else(|| result_digest(self.dialect, &ev.data, false))
        } else {
            0
        };
        Node {
            prev: NIL,
            next: NIL,
            seq: ev.seq,
            kind,
            op: if replace {
                EntryOp::Replace
            } else {
                EntryOp::Append
            },
            role: message
                .and_then(|m| m.get("role"))
                .and_then(Json::as_str)
                .map(intern_role),
            pos: ev.pos,
            derives,
            tool_calls,
            result_shape,
            legacy: self
                .dialect
                .legacy_v0
                .then(|| LegacyNode {
                    message: ev
                        .normalized
                        .then(|| message.map(|m| m.to_js_string().into()))
                        .flatten(),
                    message_id: (kind == SurfaceKind::ToolResult)
                        .then(|| {
                            message
                                .and_then(|m| m.get("id"))
                                .and_then(Json::as_str)
                                .map(Box::from)
                        })
                        .flatten(),
                })
                .filter(|l| l.message.is_some() || l.message_id.is_some())
                .map(Box::new),
        }
    }

    /// Apply a plan.
    pub fn commit(&mut self, plan: Plan) {
        match plan {
            Plan::Nothing => {}
            Plan::Append(node) => self.push_back(node),
            Plan::Replace {
                mut node,
                start,
                end,
                shadowed,
            } => {
                let (prev, next) = (self.nodes[&start].prev, self.nodes[&end].next);
                for s in &shadowed {
                    self.nodes.remove(s);
                    self.live_ranges.remove(s);
                }
                self.live_ranges.insert(node.seq, (start, end));
                let seq = node.seq;
                node.prev = prev;
                node.next = next;
                self.top = self.top.max(Some(seq));
                self.nodes.insert(seq, node);
                match prev {
                    NIL => self.head = seq,
                    p => self.link_mut(p).next = seq,
                }
                match next {
                    NIL => self.tail = seq,
                    n => self.link_mut(n).prev = seq,
                }
                self.generation += 1;
                if let Some(r) = &mut self.replacements {
                    r.push(Replacement {
                        seq,
                        start,
                        end,
                        shadowed,
                    });
                }
            }
        }
    }

    fn link_mut(&mut self, seq: u64) -> &mut Node {
        self.nodes
            .get_mut(&seq)
            .expect("linked surface node exists")
    }

    fn push_back(&mut self, mut node: Node) {
        let seq = node.seq;
        node.prev = self.tail;
        node.next = NIL;
        if self.tail == NIL {
            self.head = seq;
        } else {
            let tail = self.tail;
            self.link_mut(tail).next = seq;
        }
        self.tail = seq;
        self.top = self.top.max(Some(seq));
        self.nodes.insert(seq, node);
    }
}

/// Step 2 for a surface-eligible event: `None` for append, `Some((start, end))` for replace.
fn marker(d: &Dialect, ev: &Event<'_>, at: &Reporter<'_>) -> Result<Option<(u64, u64)>, Finding> {
    let Some(op) = &ev.surface_op else {
        return Err(at.finding(
            Code::SurfaceOpMissing,
            format!(
                "session event \"{}\" is surface-eligible and requires a surfaceOp marker",
                ev.ty
            ),
        ));
    };
    match op {
        Json::Str(s) if s == "append" => Ok(None),
        Json::Obj(_) => {
            let (sk, ek) = d.replace_keys;
            let keys = op.keys();
            let endpoint = |k: &str| -> Option<u64> {
                let v = op.get(k)?;
                if d.canonical && v.is_neg_zero() {
                    return None;
                }
                v.safe_uint()
            };
            let shaped = keys.len() == 3
                && op.get("op").and_then(Json::as_str) == Some("replace")
                && keys.contains(&sk)
                && keys.contains(&ek);
            match (shaped, endpoint(sk), endpoint(ek)) {
                (true, Some(s), Some(e)) => Ok(Some((s, e))),
                _ => Err(at.finding(
                    Code::ReplaceOpInvalid,
                    format!(
                        "session event \"{}\" carries an invalid replace surfaceOp {}: format v{} needs exactly {{\"op\":\"replace\",\"{sk}\":S,\"{ek}\":E}} with safe integers ≥ 0",
                        ev.ty,
                        crate::log::text::clip(&op.to_js_string(), 80),
                        d.version
                    ),
                )),
            }
        }
        other => Err(at.finding(
            Code::SurfaceOpInvalid,
            format!(
                "session event \"{}\" carries an invalid surfaceOp {}",
                ev.ty,
                crate::log::text::clip(&other.to_js_string(), 80)
            ),
        )),
    }
}

/// §8 C1–C5: the event-local surface rules of the canonical envelope (v3+). A violation
/// makes the row bad (§6.1 B5); the fold reports it when the row turns out to be committed.
pub fn canonical_violation(d: &Dialect, ev: &Event<'_>, class: TypeClass) -> Option<Code> {
    if !d.canonical {
        return None;
    }
    let at = Reporter {
        version: Some(d.version),
        pos: ev.pos,
        seq: None,
        event_type: None,
    };
    match class {
        TypeClass::Surface(kind) => {
            match marker(d, ev, &at) {
                Err(f) => return Some(f.code),
                Ok(Some((s, e))) if s >= ev.seq || e >= ev.seq => {
                    return Some(Code::ReplaceEndpointNotEarlier);
                }
                Ok(_) => {}
            }
            (kind == SurfaceKind::Assistant && ev.source_seqs.is_some())
                .then_some(Code::SourceSeqsOnAssistant)
        }
        TypeClass::LogOnly => (ev.surface_op.is_some() || ev.source_seqs.is_some())
            .then_some(Code::SurfaceMetadataOnLogOnly),
        _ => None,
    }
}

impl super::legacy::MessageIds for SurfaceManager {
    fn message_id(&self, seq: u64) -> Option<String> {
        let legacy = self.nodes.get(&seq)?.legacy.as_ref()?;
        legacy.message_id.as_deref().map(str::to_owned)
    }
}

fn unreachable_not_array(
    at: &Reporter<'_>,
    ev: &Event<'_>,
) -> Result<Option<super::rows::SeqList>, Finding> {
    // `provenance` checked the array shape before decoding; keep a finding, not a panic.
    Err(at.finding(
        Code::SourceSeqsNotArray,
        format!(
            "sourceEventSeqs on event at seq {} must be an array when present",
            ev.seq
        ),
    ))
}

#[cfg(test)]
mod tests;
