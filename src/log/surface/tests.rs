//! Unit tests of the `SurfaceManager`: every fold check of FORMAT.md §11.2, per format
//! version, with the rule that a rejected event leaves the surface exactly as it was (only
//! `next_seq` moves on).

use std::borrow::Cow;

use super::*;
use crate::log::dialect::DIALECTS;
use crate::log::finding::Finding;
use crate::log::json;
use crate::log::rows::{BadKind, Row, decode};
use crate::log::test_support::{Rng, replace_keys};
use crate::log::vocab::{KnownTypes, Vocabulary};

const ALL: [usize; 5] = [0, 1, 2, 3, 4];
const LEGACY: [usize; 3] = [0, 1, 2];
const CANONICAL: [usize; 2] = [3, 4];

// ---------------------------------------------------------------------------------------
// Building event lines
// ---------------------------------------------------------------------------------------

/// One event line, built field by field.
#[derive(Clone, Debug)]
struct L {
    seq: u64,
    ty: String,
    data: String,
    op: Option<String>,
    src: Option<String>,
    ignorable: bool,
}

impl L {
    fn new(seq: u64, ty: &str, data: impl Into<String>) -> L {
        L {
            seq,
            ty: ty.to_owned(),
            data: data.into(),
            op: None,
            src: None,
            ignorable: false,
        }
    }

    /// `surfaceOp` given as raw JSON.
    fn op(mut self, op: &str) -> L {
        self.op = Some(op.to_owned());
        self
    }

    fn append(self) -> L {
        self.op(r#""append""#)
    }

    /// A replace marker with the endpoint keys of version `v` (§11.1).
    fn replace(self, v: usize, start: u64, end: u64) -> L {
        let (s, e) = replace_keys(v);
        let op = format!(r#"{{"op":"replace","{s}":{start},"{e}":{end}}}"#);
        self.op(&op)
    }

    /// `sourceEventSeqs` given as raw JSON.
    fn src(mut self, src: &str) -> L {
        self.src = Some(src.to_owned());
        self
    }

    fn ignorable(mut self) -> L {
        self.ignorable = true;
        self
    }

    /// Replace a piece of `data` (asserting the piece is there, so a typo cannot make a
    /// test vacuous).
    fn edit(mut self, from: &str, to: &str) -> L {
        assert!(self.data.contains(from), "{from} not in {}", self.data);
        self.data = self.data.replacen(from, to, 1);
        self
    }

    fn text(&self) -> String {
        let mut out = format!(
            r#"{{"type":"{}","seq":{},"time":0,"data":{}"#,
            self.ty, self.seq, self.data
        );
        if let Some(s) = &self.src {
            out.push_str(&format!(r#","sourceEventSeqs":{s}"#));
        }
        if let Some(op) = &self.op {
            out.push_str(&format!(r#","surfaceOp":{op}"#));
        }
        if self.ignorable {
            out.push_str(r#","ignorable":true"#);
        }
        out.push('}');
        out
    }
}

/// The `data` of a tool result for call `call` in version `v`'s shape (§9.1, §9.2).
fn result_data(v: usize, call: &str, id: &str, text: &str) -> String {
    if v <= 3 {
        format!(
            r#"{{"turn":1,"step":1,"message":{{"id":"{id}","role":"user","content":[{{"type":"tool-result","toolCallId":"{call}","content":[{{"type":"text","text":"{text}"}}],"isError":false}}],"source":{{"kind":"tool","callId":"{call}"}}}}}}"#
        )
    } else {
        format!(
            r#"{{"turn":1,"step":1,"message":{{"id":"{id}","role":"tool","toolCallId":"{call}","isError":false,"content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"tool","callId":"{call}"}}}}}}"#
        )
    }
}

// ---------------------------------------------------------------------------------------
// The harness: a manager of one version, with an invariant check on every rejection
// ---------------------------------------------------------------------------------------

struct H {
    v: usize,
    vocab: Vocabulary,
    m: SurfaceManager,
}

/// Everything a rejection must leave untouched.
#[derive(Debug, PartialEq)]
struct Snapshot {
    seqs: Vec<u64>,
    generation: u64,
    replacements: Vec<Replacement>,
    len: usize,
}

impl H {
    fn new(v: usize) -> H {
        H::with_types(v, &KnownTypes::default())
    }

    fn with_types(v: usize, known: &KnownTypes) -> H {
        let d = &DIALECTS[v];
        let mut m = SurfaceManager::new(d);
        m.record_replacements();
        H {
            v,
            vocab: Vocabulary::new(d, known),
            m,
        }
    }

    fn seq(&self) -> u64 {
        self.m.next_seq()
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            seqs: self.m.seqs(),
            generation: self.m.replace_generation(),
            replacements: self.m.replacements().unwrap(),
            len: self.m.len(),
        }
    }

    // -- builders (each takes the next seq) --

    fn user(&self) -> L {
        let s = self.seq();
        L::new(
            s,
            "user/message",
            format!(
                r#"{{"id":"u{s}","role":"user","content":[{{"type":"text","text":"hi"}}],"source":{{"kind":"user"}}}}"#
            ),
        )
    }

    /// An assistant message advertising the given tool calls.
    fn assistant(&self, calls: &[&str]) -> L {
        let s = self.seq();
        let blocks: Vec<String> = calls
            .iter()
            .map(|c| {
                format!(r#"{{"type":"tool-call","id":"{c}","name":"bash","arguments":"{{}}"}}"#)
            })
            .collect();
        L::new(
            s,
            "assistant/message",
            format!(
                r#"{{"turn":1,"step":1,"message":{{"id":"a{s}","role":"assistant","content":[{}],"source":{{"kind":"model","provider":"p","model":"m"}}}},"stream":[]}}"#,
                blocks.join(",")
            ),
        )
    }

    fn result(&self, call: &str) -> L {
        L::new(
            self.seq(),
            "tool/result",
            result_data(self.v, call, &format!("r-{call}"), "out"),
        )
    }

    fn system(&self) -> L {
        let s = self.seq();
        L::new(
            s,
            "system/message",
            format!(
                r#"{{"turn":1,"step":1,"message":{{"id":"s{s}","role":"system","content":[{{"type":"text","text":"be brief"}}],"source":{{"kind":"system-prompt"}}}}}}"#
            ),
        )
    }

    /// A v4 developer message with the given content blocks and extra `data` members.
    fn developer(&self, blocks: &str, extra: &str) -> L {
        let s = self.seq();
        L::new(
            s,
            "developer/message",
            format!(
                r#"{{"turn":1,"step":1,"message":{{"id":"d{s}","role":"developer","content":[{blocks}],"source":{{"kind":"runtime-context"}}}}{extra}}}"#
            ),
        )
    }

    /// A `request/header` whose `header.tools` is the given JSON array.
    fn request_header(&self, tools: &str) -> L {
        L::new(
            self.seq(),
            "request/header",
            format!(
                r#"{{"header":{{"config":{{"provider":"p","model":"m"}},"tools":{tools}}},"reason":"initial"}}"#
            ),
        )
    }

    fn log_only(&self, ty: &str) -> L {
        L::new(self.seq(), ty, "{}")
    }

    // -- folding --

    fn decode_line(&self, l: &L) -> Event<'static> {
        let text = l.text();
        match decode(text.as_bytes(), Pos::default(), &DIALECTS[self.v]) {
            Row::Events(mut evs, _) => {
                assert_eq!(evs.len(), 1);
                let ev = evs.remove(0).event.expect("valid envelope");
                owned(ev)
            }
            Row::Packed(..) => panic!("decode does not return a packed row"),
            Row::Bad(b) => panic!("v{}: storage rejects {text}: {}", self.v, b.why),
        }
    }

    fn fold_event(&mut self, ev: &Event<'_>) -> (bool, Vec<Finding>) {
        let class = self.vocab.classify(&ev.ty, ev.ignorable);
        let mut findings = Vec::new();
        let accepted = self.m.fold(ev, class, &mut findings);
        (accepted, findings)
    }

    /// Fold a line that must be accepted without any finding; returns its seq.
    fn ok(&mut self, l: L) -> u64 {
        let ev = self.decode_line(&l);
        let (accepted, findings) = self.fold_event(&ev);
        assert!(
            accepted && findings.is_empty(),
            "v{}: expected {} to be accepted, got {findings:?}",
            self.v,
            l.text()
        );
        l.seq
    }

    /// Fold a line that must be rejected; checks that exactly one error was reported and
    /// that nothing but `next_seq` changed. Returns the code.
    fn rejects(&mut self, l: L) -> Code {
        let ev = self.decode_line(&l);
        self.rejects_event(&ev, &l.text())
    }

    /// [`H::rejects`] with `code`.
    #[track_caller]
    fn rejects_with(&mut self, l: L, code: Code) {
        let got = self.rejects(l);
        assert_eq!(got, code, "v{}", self.v);
    }

    /// Like [`H::rejects`], for an event built without the storage decoding of §5.3 (the
    /// provenance checks b, d, e and f only fire for such events).
    fn rejects_raw(&mut self, l: L) -> Code {
        let ev = raw_event(&l.text());
        self.rejects_event(&ev, &l.text())
    }

    fn rejects_event(&mut self, ev: &Event<'_>, shown: &str) -> Code {
        let before = self.snapshot();
        let (accepted, findings) = self.fold_event(ev);
        assert!(!accepted, "v{}: expected a rejection of {shown}", self.v);
        assert_eq!(findings.len(), 1, "v{}: {findings:?}", self.v);
        assert!(findings[0].is_error());
        assert_eq!(findings[0].seq, Some(ev.seq));
        assert_eq!(
            self.snapshot(),
            before,
            "v{}: rejected event changed the surface",
            self.v
        );
        assert_eq!(self.m.next_seq(), ev.seq + 1, "next_seq must move on");
        findings[0].code
    }

    /// Whether the storage decoding of §5.3 already makes the line a bad row.
    fn storage_rejects(&self, l: &L) -> bool {
        let text = l.text();
        matches!(
            decode(text.as_bytes(), Pos::default(), &DIALECTS[self.v]),
            Row::Bad(b) if b.kind == BadKind::Malformed(Code::SourceRangesMalformed)
        )
    }

    /// Append `n` user messages; returns their seqs.
    fn users(&mut self, n: usize) -> Vec<u64> {
        (0..n).map(|_| self.ok(self.user().append())).collect()
    }

    /// Fold `n` log-only events (to move seqs on without touching the surface).
    fn skip(&mut self, n: usize) {
        for _ in 0..n {
            self.ok(self.log_only("todo/write"));
        }
    }
}

fn owned(ev: Event<'_>) -> Event<'static> {
    Event {
        pos: ev.pos,
        seq: ev.seq,
        time: ev.time,
        kind: ev.kind,
        ty: Cow::Owned(ev.ty.into_owned()),
        data: ev.data.into_owned(),
        surface_op: ev.surface_op.map(Json::into_owned),
        source_seqs: ev.source_seqs.map(Json::into_owned),
        ignorable: ev.ignorable,
        packed: ev.packed,
        normalized: ev.normalized,
        result_digest: ev.result_digest,
        line: None,
    }
}

/// An event taken straight from the JSON, without rows.rs's storage decoding.
fn raw_event(line: &str) -> Event<'static> {
    let mut v = json::parse(line.as_bytes())
        .expect("test line is JSON")
        .into_owned();
    let seq = v.get("seq").and_then(Json::safe_uint).expect("seq");
    let ty = v
        .take("type")
        .and_then(|t| t.as_str().map(str::to_owned))
        .expect("type");
    Event {
        pos: Pos::default(),
        seq,
        time: 0,
        kind: crate::log::event::Kind::of(&ty),
        ty: Cow::Owned(ty),
        data: v.take("data").expect("data"),
        surface_op: v.take("surfaceOp"),
        source_seqs: v.take("sourceEventSeqs"),
        ignorable: v.take("ignorable").is_some(),
        packed: false,
        normalized: false,
        result_digest: None,
        line: None,
    }
}

// ---------------------------------------------------------------------------------------
// Appends and positions (kept from the first version of this file)
// ---------------------------------------------------------------------------------------

#[test]
fn appends_build_the_surface_in_order() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(2);
        assert_eq!(h.m.seqs(), vec![0, 1]);
        assert_eq!(h.m.replace_generation(), 0);
    }
}

#[test]
fn replace_uses_surface_positions_not_numbers() {
    for v in ALL {
        // 0 1 2, then 3 replaces 1..2 → 0 3; 4 appended → 0 3 4; 5 replaces 3..4 → 0 5.
        let mut h = H::new(v);
        h.users(3);
        h.ok(h.user().replace(v, 1, 2).src("[1,2]"));
        h.ok(h.user().append());
        h.ok(h.user().replace(v, 3, 4).src("[3,4]"));
        assert_eq!(h.m.seqs(), vec![0, 5]);
        assert_eq!(h.m.replace_generation(), 2);
        assert_eq!(h.m.replacements().unwrap()[1].shadowed, vec![3, 4]);
        assert_eq!(h.m.node(5).map(|n| n.op), Some(EntryOp::Replace));
    }
}

#[test]
fn parts_of_the_surface_read_by_position_are_the_surface_in_order() {
    // 0..9, then 10 replaces 2..4 and 11 replaces 7..7: live labels with gaps between them.
    let v = 4;
    let mut h = H::new(v);
    h.users(10);
    h.ok(h.user().replace(v, 2, 4).src("[2,3,4]"));
    h.ok(h.user().replace(v, 7, 7).src("[7]"));
    let all: Vec<(u64, EntryOp)> = h.m.iter().map(|n| (n.seq, n.op)).collect();
    assert_eq!(all.len(), h.m.len());
    for size in 1..=all.len() + 1 {
        let mut parts = Vec::new();
        for start in (0..all.len()).step_by(size) {
            parts.extend(h.m.iter_at(start..start + size).map(|n| (n.seq, n.op)));
        }
        assert_eq!(parts, all, "in parts of {size}");
    }
    assert_eq!(h.m.iter_at(all.len()..all.len() + 3).count(), 0);
    assert_eq!(h.m.iter_at(3..3).count(), 0);
}

// ---------------------------------------------------------------------------------------
// Step 1 — seq
// ---------------------------------------------------------------------------------------

#[test]
fn seq_not_following_the_previous_event_is_rejected() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(1);
        let mut late = h.user().append();
        late.seq = 5;
        h.rejects_with(late, Code::SeqNotContiguous);
        // The fold goes on from the observed seq.
        assert_eq!(h.m.next_seq(), 6);
        let mut repeat = h.user().append();
        repeat.seq = 0;
        h.rejects_with(repeat, Code::SeqNotContiguous);
    }
}

#[test]
fn a_resync_back_to_a_seq_on_the_surface_is_rejected() {
    // A scan resynchronises on the observed seq after a gap; a repeated seq must not link
    // a second node under the same seq (the list would be corrupt).
    for v in ALL {
        let mut h = H::new(v);
        h.users(2);
        h.m.resync(1);
        let mut again = h.user().append();
        again.seq = 1;
        h.rejects_with(again, Code::SeqNotContiguous);
        assert_eq!(h.m.seqs(), vec![0, 1]);
    }
}

// ---------------------------------------------------------------------------------------
// Step 2 — eligibility and marker shape
// ---------------------------------------------------------------------------------------

#[test]
fn known_log_only_event_with_surface_metadata_is_rejected_in_every_version() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(1);
        let code = h.rejects(h.log_only("turn/start").append());
        assert_eq!(code, Code::SurfaceMetadataOnLogOnly, "v{v}");
        let code = h.rejects(h.log_only("tool/call").src("[0]"));
        assert_eq!(code, Code::SurfaceMetadataOnLogOnly, "v{v}");
        // An empty list is still metadata.
        let code = h.rejects(h.log_only("compaction/start").src("[]"));
        assert_eq!(code, Code::SurfaceMetadataOnLogOnly, "v{v}");
        h.ok(h.log_only("turn/start"));
    }
}

#[test]
fn known_log_only_event_with_metadata_is_rejected_even_when_ignorable() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(1);
        let code = h.rejects(h.log_only("todo/write").ignorable().append());
        assert_eq!(code, Code::SurfaceMetadataOnLogOnly, "v{v}");
        let code = h.rejects(h.log_only("todo/write").ignorable().src("[0]"));
        assert_eq!(code, Code::SurfaceMetadataOnLogOnly, "v{v}");
    }
}

#[test]
fn user_declared_types_are_log_only_and_may_not_carry_metadata() {
    let mut known = KnownTypes::default();
    known.parse("test", "slots/dispatch\n").unwrap();
    for v in ALL {
        let mut h = H::with_types(v, &known);
        let code = h.rejects(h.log_only("slots/dispatch").ignorable().op("5"));
        assert_eq!(code, Code::SurfaceMetadataOnLogOnly, "v{v}");
        h.ok(h.log_only("slots/dispatch"));
    }
}

#[test]
fn unknown_ignorable_event_with_metadata_is_rejected_in_v0_to_v2() {
    for v in LEGACY {
        let mut h = H::new(v);
        h.users(1);
        let code = h.rejects(h.log_only("acme/ping").ignorable().append());
        assert_eq!(code, Code::SurfaceMetadataOnLogOnly, "v{v}");
        let code = h.rejects(h.log_only("acme/ping").ignorable().src("[0]"));
        assert_eq!(code, Code::SurfaceMetadataOnLogOnly, "v{v}");
        // Without metadata it is an opaque record.
        h.ok(h.log_only("acme/ping").ignorable());
        assert_eq!(h.m.seqs(), vec![0]);
    }
}

#[test]
fn unknown_ignorable_event_is_opaque_in_v3_and_v4_even_with_garbage_metadata() {
    for v in CANONICAL {
        let mut h = H::new(v);
        h.users(1);
        for op in [
            r#""append""#,
            r#"{"op":"explode","startSeq":-4}"#,
            r#"{"op":"replace","startSeq":0,"endSeq":0}"#,
            "null",
            "[1,2]",
        ] {
            h.ok(h.log_only("acme/ping").ignorable().op(op));
        }
        h.ok(h.log_only("acme/ping").ignorable().src("[0]"));
        h.ok(h.log_only("acme/ping").ignorable().src("[]"));
        // Never joins the surface, never replaces anything.
        assert_eq!(h.m.seqs(), vec![0]);
        assert_eq!(h.m.replace_generation(), 0);
    }
}

#[test]
fn surface_event_without_surface_op_is_rejected_in_every_version() {
    for v in ALL {
        let mut h = H::new(v);
        h.rejects_with(h.user(), Code::SurfaceOpMissing);
        h.rejects_with(h.assistant(&[]), Code::SurfaceOpMissing);
        h.rejects_with(h.result("c1"), Code::SurfaceOpMissing);
        if v >= 3 {
            h.rejects_with(h.system(), Code::SurfaceOpMissing);
        }
        if v >= 4 {
            let code = h.rejects(h.developer("", ""));
            assert_eq!(code, Code::SurfaceOpMissing, "v{v}");
        }
        assert!(h.m.is_empty());
    }
}

#[test]
fn surface_op_that_is_neither_append_nor_an_object_is_rejected() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(1);
        for op in [
            "null",
            "[]",
            r#"["append"]"#,
            "0",
            "1",
            "true",
            r#""replace""#,
            r#""Append""#,
            r#""""#,
        ] {
            assert_eq!(
                h.rejects(h.user().op(op)),
                Code::SurfaceOpInvalid,
                "v{v} {op}"
            );
        }
    }
}

#[test]
fn replace_marker_must_use_the_endpoint_keys_of_the_version() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(2);
        let (good, bad) = if v <= 2 {
            (("start", "end"), ("startSeq", "endSeq"))
        } else {
            (("startSeq", "endSeq"), ("start", "end"))
        };
        let other = format!(r#"{{"op":"replace","{}":0,"{}":0}}"#, bad.0, bad.1);
        h.rejects_with(h.user().op(&other).src("[0]"), Code::ReplaceOpInvalid);
        let mixed = format!(r#"{{"op":"replace","{}":0,"{}":0}}"#, good.0, bad.1);
        h.rejects_with(h.user().op(&mixed).src("[0]"), Code::ReplaceOpInvalid);
        let mixed = format!(r#"{{"op":"replace","{}":0,"{}":0}}"#, bad.0, good.1);
        h.rejects_with(h.user().op(&mixed).src("[0]"), Code::ReplaceOpInvalid);
        h.ok(h.user().replace(v, 0, 0).src("[0]"));
    }
}

#[test]
fn replace_marker_shape_errors_are_rejected() {
    for v in ALL {
        let (s, e) = replace_keys(v);
        let mut h = H::new(v);
        h.users(2);
        let cases = [
            format!(r#"{{"op":"replace","{s}":0,"{e}":1,"extra":1}}"#),
            format!(r#"{{"{s}":0,"{e}":1}}"#),
            format!(r#"{{"op":"append","{s}":0,"{e}":1}}"#),
            format!(r#"{{"op":"Replace","{s}":0,"{e}":1}}"#),
            format!(r#"{{"op":"replace","{s}":0}}"#),
            format!(r#"{{"op":"replace","{s}":-1,"{e}":1}}"#),
            format!(r#"{{"op":"replace","{s}":0,"{e}":1.5}}"#),
            format!(r#"{{"op":"replace","{s}":"0","{e}":1}}"#),
            format!(r#"{{"op":"replace","{s}":null,"{e}":1}}"#),
            format!(r#"{{"op":"replace","{s}":9007199254740992,"{e}":1}}"#),
            "{}".to_owned(),
        ];
        for op in &cases {
            assert_eq!(
                h.rejects(h.user().op(op).src("[0,1]")),
                Code::ReplaceOpInvalid,
                "v{v} {op}"
            );
        }
    }
}

#[test]
fn replace_endpoints_are_compared_by_value_not_spelling() {
    for v in ALL {
        let (s, e) = replace_keys(v);
        let mut h = H::new(v);
        h.users(2);
        let op = format!(r#"{{"{e}":1e0,"op":"replace","{s}":0.0}}"#);
        h.ok(h.user().op(&op).src("[0,1]"));
        assert_eq!(h.m.seqs(), vec![2]);
    }
}

#[test]
fn negative_zero_endpoint_is_refused_only_in_v3_and_v4() {
    for v in ALL {
        let (s, e) = replace_keys(v);
        let mut h = H::new(v);
        h.users(2);
        let op = format!(r#"{{"op":"replace","{s}":-0,"{e}":1}}"#);
        if v >= 3 {
            h.rejects_with(h.user().op(&op).src("[0,1]"), Code::ReplaceOpInvalid);
            let op = format!(r#"{{"op":"replace","{s}":0,"{e}":-0}}"#);
            h.rejects_with(h.user().op(&op).src("[0,1]"), Code::ReplaceOpInvalid);
        } else {
            // v0–v2 check only the value: -0 is the seq 0.
            h.ok(h.user().op(&op).src("[0,1]"));
            assert_eq!(h.m.seqs(), vec![2]);
        }
    }
}

#[test]
fn duplicate_keys_in_a_replace_marker_resolve_last_wins() {
    for v in ALL {
        let (s, e) = replace_keys(v);
        let mut h = H::new(v);
        h.users(3);
        // JSON.parse keeps three keys, the last `start` wins: the range is 1..2.
        let op = format!(r#"{{"op":"replace","{s}":0,"{e}":2,"{s}":1}}"#);
        h.ok(h.user().op(&op).src("[1,2]"));
        assert_eq!(h.m.seqs(), vec![0, 3]);
    }
}

// ---------------------------------------------------------------------------------------
// Step 3 — endpoints earlier than the event (v3+)
// ---------------------------------------------------------------------------------------

#[test]
fn replace_endpoint_not_before_the_event_is_rejected_in_v3_and_v4() {
    for v in CANONICAL {
        let mut h = H::new(v);
        h.users(2);
        let next = h.seq();
        h.rejects_with(
            h.user().replace(v, 0, next).src("[0,1]"),
            Code::ReplaceEndpointNotEarlier,
        );
        let next = h.seq();
        h.rejects_with(
            h.user().replace(v, next + 7, 1).src("[0,1]"),
            Code::ReplaceEndpointNotEarlier,
        );
    }
}

#[test]
fn v0_to_v2_have_no_endpoint_step_and_report_the_range_lookup_instead() {
    for v in LEGACY {
        let mut h = H::new(v);
        h.users(2);
        let next = h.seq();
        h.rejects_with(
            h.user().replace(v, 0, next).src("[0,1]"),
            Code::ReplaceEndNotOnSurface,
        );
        let next = h.seq();
        h.rejects_with(
            h.user().replace(v, next + 7, 1).src("[0,1]"),
            Code::ReplaceStartNotOnSurface,
        );
    }
}

// ---------------------------------------------------------------------------------------
// Step 7.1 — the range, by surface position
// ---------------------------------------------------------------------------------------

#[test]
fn replace_start_not_on_surface_is_rejected() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(1);
        h.skip(1); // seq 1: log-only, never a node
        h.users(1); // seq 2
        h.rejects_with(
            h.user().replace(v, 1, 2).src("[1,2]"),
            Code::ReplaceStartNotOnSurface,
        );
        // A shadowed node is no longer on the surface either.
        h.ok(h.user().replace(v, 0, 0).src("[0]")); // seq 4 (seq 3 was rejected)
        assert_eq!(h.m.seqs(), vec![4, 2]);
        h.rejects_with(
            h.user().replace(v, 0, 2).src("[0,2]"),
            Code::ReplaceStartNotOnSurface,
        );
        // Both ends missing: the start is reported.
        h.rejects_with(
            h.user().replace(v, 1, 3).src("[1,3]"),
            Code::ReplaceStartNotOnSurface,
        );
    }
}

#[test]
fn replace_end_not_on_surface_is_rejected() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(1);
        h.skip(1);
        h.rejects_with(
            h.user().replace(v, 0, 1).src("[0,1]"),
            Code::ReplaceEndNotOnSurface,
        );
    }
}

#[test]
fn replace_end_before_start_in_surface_order_is_rejected() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(2);
        h.rejects_with(
            h.user().replace(v, 1, 0).src("[0,1]"),
            Code::ReplaceRangeReversed,
        );
    }
}

#[test]
fn replace_range_order_is_by_position_so_start_9_end_4_can_be_valid() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(5); // 0 1 2 3 4
        h.skip(4); // 5..=8
        h.ok(h.user().replace(v, 0, 3).src("[0,1,2,3]")); // 9 replaces 0..3 → 9 4
        assert_eq!(h.m.seqs(), vec![9, 4]);
        // Numerically 4 < 9, but on the surface 4 comes after 9.
        h.rejects_with(
            h.user().replace(v, 4, 9).src("[4,9]"),
            Code::ReplaceRangeReversed,
        );
        h.ok(h.user().replace(v, 9, 4).src("[4,9]"));
        assert_eq!(h.m.seqs(), vec![11]);
        assert_eq!(h.m.replacements().unwrap()[1].shadowed, vec![9, 4]);
    }
}

// ---------------------------------------------------------------------------------------
// Step 6 — provenance
// ---------------------------------------------------------------------------------------

#[test]
fn source_seqs_on_assistant_are_rejected_in_v3_and_v4_even_empty() {
    for v in CANONICAL {
        let mut h = H::new(v);
        h.users(1);
        for src in ["[0]", "[]"] {
            assert_eq!(
                h.rejects(h.assistant(&[]).append().src(src)),
                Code::SourceSeqsOnAssistant,
                "v{v} {src}"
            );
        }
        // Not an array either: check a comes first.
        assert_eq!(
            h.rejects_raw(h.assistant(&[]).append().src("5")),
            Code::SourceSeqsOnAssistant
        );
        h.ok(h.assistant(&[]).append());
    }
}

#[test]
fn v0_to_v2_allow_source_seqs_on_assistant_including_empty() {
    for v in LEGACY {
        let mut h = H::new(v);
        h.users(1);
        h.ok(h.assistant(&[]).append().src("[]"));
        h.ok(h.assistant(&[]).append().src("[0]"));
        assert_eq!(h.m.seqs(), vec![0, 1, 2]);
    }
}

#[test]
fn source_seqs_that_are_not_an_array_are_rejected_by_the_manager() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(1);
        for src in ["5", "{}", "null", r#""0""#] {
            let l = h.user().append().src(src);
            // Storage decoding already makes this a bad row (§5.3); the manager check is
            // the same rule, reached only when the manager is called directly.
            assert!(h.storage_rejects(&l), "v{v} {src}");
            assert_eq!(h.rejects_raw(l), Code::SourceSeqsNotArray, "v{v} {src}");
        }
    }
}

#[test]
fn empty_source_seqs_are_allowed_only_on_v0_to_v2_assistant_messages() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(1);
        h.rejects_with(h.user().append().src("[]"), Code::SourceSeqsEmpty);
        h.rejects_with(h.result("c").append().src("[]"), Code::SourceSeqsEmpty);
        if v >= 3 {
            h.rejects_with(h.system().append().src("[]"), Code::SourceSeqsEmpty);
        }
        if v >= 4 {
            h.rejects_with(
                h.developer("", "").append().src("[]"),
                Code::SourceSeqsEmpty,
            );
        }
    }
}

#[test]
fn source_seqs_with_invalid_elements_are_rejected_by_the_manager() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(2);
        for src in [
            "[-1]",
            "[1.5]",
            r#"["0"]"#,
            "[null]",
            "[[1,0]]",
            "[[0,1,1]]",
            "[9007199254740992]",
        ] {
            let l = h.user().append().src(src);
            assert!(h.storage_rejects(&l), "v{v} {src}");
            assert_eq!(
                h.rejects_raw(l),
                Code::SourceSeqsInvalidElement,
                "v{v} {src}"
            );
        }
        // An invalid element is reported even when a not-earlier element precedes it.
        let l = h.user().append().src("[99,-1]");
        assert_eq!(h.rejects_raw(l), Code::SourceSeqsInvalidElement, "v{v}");
    }
}

#[test]
fn negative_zero_source_seq_is_refused_only_in_v3_and_v4() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(2);
        for src in ["[-0]", "[1,-0]", "[[-0,1]]"] {
            let l = h.user().append().src(src);
            // -0 is the safe integer 0 for the storage decoding: not a bad row.
            assert!(!h.storage_rejects(&l), "v{v} {src}");
            if v >= 3 {
                assert_eq!(h.rejects(l), Code::SourceSeqsInvalidElement, "v{v} {src}");
            } else {
                h.ok(l);
            }
        }
    }
}

#[test]
fn duplicate_source_seqs_are_rejected_by_the_manager() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(2);
        for src in ["[0,0]", "[1,0,1]"] {
            let l = h.user().append().src(src);
            assert!(h.storage_rejects(&l), "v{v} {src}");
            assert_eq!(h.rejects_raw(l), Code::SourceSeqsDuplicate, "v{v} {src}");
        }
        // Duplicates (e) are checked before not-earlier (f).
        let l = h.user().append().src("[50,0,0]");
        assert_eq!(h.rejects_raw(l), Code::SourceSeqsDuplicate, "v{v}");
    }
}

#[test]
fn source_seqs_not_before_the_event_are_rejected_by_the_manager() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(2);
        let cases: [fn(u64) -> String; 3] = [
            |own| format!("[{own}]"),
            |own| format!("[0,{}]", own + 3),
            |own| format!("[[0,{own}]]"),
        ];
        for case in cases {
            let src = case(h.seq());
            let l = h.user().append().src(&src);
            assert!(h.storage_rejects(&l), "v{v} {src}");
            let ev = raw_event(&l.text());
            let before = h.snapshot();
            let (accepted, f) = h.fold_event(&ev);
            assert!(!accepted);
            assert_eq!(f.len(), 1);
            assert_eq!(f[0].code, Code::SourceSeqsNotEarlier, "v{v} {src}");
            assert_eq!(h.snapshot(), before);
        }
        // The message names the first offender in list order.
        let own = h.seq();
        let l = h.user().append().src(&format!("[{},{}]", own + 5, own + 1));
        let ev = raw_event(&l.text());
        let (_, f) = h.fold_event(&ev);
        assert!(
            f[0].message
                .contains(&format!("{} >= current seq {own}", own + 5)),
            "{}",
            f[0].message
        );
    }
}

#[test]
fn sources_may_cite_any_earlier_event_not_only_surface_nodes() {
    for v in ALL {
        let mut h = H::new(v);
        h.skip(2);
        h.ok(h.user().append().src("[0,1]"));
        h.ok(h.result("c").append().src("[[0,2]]"));
    }
}

#[test]
fn replace_without_every_shadowed_node_in_its_sources_is_rejected() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(3);
        h.skip(1); // seq 3
        // An absent list counts as empty: every shadowed node is missing.
        let l = h.user().replace(v, 0, 2);
        let missing = {
            let ev = h.decode_line(&l);
            let (_, f) = h.fold_event(&ev);
            assert_eq!(f[0].code, Code::ReplaceMissingShadowedSource, "v{v}");
            f[0].message.clone()
        };
        assert!(missing.ends_with("missing 0, 1, 2"), "{missing}");
        h.rejects_with(
            h.user().replace(v, 0, 2).src("[0,2,3]"),
            Code::ReplaceMissingShadowedSource,
        );
        // Extra citations are fine; order does not matter.
        h.ok(h.user().replace(v, 0, 2).src("[3,2,1,0]"));
        assert_eq!(h.m.seqs(), vec![6]);
    }
}

// ---------------------------------------------------------------------------------------
// Step 7.3 — tool-result replacements
// ---------------------------------------------------------------------------------------

/// A surface `[0 user, 1 assistant(c1,c2), 2 result c1, 3 result c2]`.
fn with_two_results(v: usize) -> H {
    let mut h = H::new(v);
    h.users(1);
    h.ok(h.assistant(&["c1", "c2"]).append());
    h.ok(h.result("c1").append());
    h.ok(h.result("c2").append());
    h
}

/// A replacement of result seq 2 (call c1) whose data is the original's, edited.
fn prune(h: &H, edits: &[(&str, &str)]) -> L {
    let mut l = h.result("c1").replace(h.v, 2, 2).src("[2]");
    for (from, to) in edits {
        l = l.edit(from, to);
    }
    l
}

#[test]
fn tool_result_replacing_more_than_one_node_is_rejected() {
    for v in ALL {
        let mut h = with_two_results(v);
        h.rejects_with(
            h.result("c1").replace(v, 2, 3).src("[2,3]"),
            Code::ToolResultReplaceNotSingle,
        );
    }
}

#[test]
fn tool_result_replacing_a_node_that_is_not_a_result_is_rejected() {
    for v in ALL {
        let mut h = with_two_results(v);
        for target in [0, 1] {
            h.rejects_with(
                h.result("c1")
                    .replace(v, target, target)
                    .src(&format!("[{target}]")),
                Code::ToolResultReplaceTargetNotResult,
            );
        }
    }
}

#[test]
fn tool_result_replacement_may_change_the_result_content() {
    for v in ALL {
        let mut h = with_two_results(v);
        h.ok(prune(&h, &[(r#""text":"out""#, r#""text":"[pruned]""#)]));
        assert_eq!(h.m.seqs(), vec![0, 1, 4, 3]);
        // A second prune of the replacement is again a one-node result replacement.
        h.ok(h.result("c1").replace(v, 4, 4).src("[4]"));
        assert_eq!(h.m.seqs(), vec![0, 1, 5, 3]);
    }
}

#[test]
fn tool_result_content_may_change_shape_entirely() {
    for v in ALL {
        let mut h = with_two_results(v);
        let two_blocks = r#"[{"type":"text","text":"a"},{"type":"text","text":"b"}]"#;
        h.ok(prune(
            &h,
            &[(r#"[{"type":"text","text":"out"}]"#, two_blocks)],
        ));
        let mut h = with_two_results(v);
        h.ok(prune(&h, &[(r#"[{"type":"text","text":"out"}]"#, "[]")]));
    }
}

#[test]
fn key_order_and_number_spelling_do_not_count_as_a_change() {
    for v in ALL {
        let mut h = with_two_results(v);
        let l = prune(
            &h,
            &[
                (r#""turn":1,"step":1"#, r#""step":1e0,"turn":1.0"#),
                (
                    r#""source":{"kind":"tool","callId":"c1"}"#,
                    r#""source":{"callId":"c1","kind":"tool"}"#,
                ),
            ],
        );
        h.ok(l);
    }
}

/// A repeated key in a result's data counts once, with its last value (JavaScript's
/// `JSON.parse`), in the original and in its replacement: the decoder digests a line whose
/// keys it saw repeat the careful way.
#[test]
fn repeated_keys_in_a_tool_result_count_with_their_last_value() {
    let repeat = (r#""step":1"#, r#""step":9,"step":1"#);
    for v in ALL {
        let mut h = H::new(v);
        h.users(1);
        h.ok(h.assistant(&["c1", "c2"]).append());
        h.ok(h.result("c1").edit(repeat.0, repeat.1).append());
        h.ok(h.result("c2").append());
        h.ok(prune(&h, &[(r#""text":"out""#, r#""text":"[pruned]""#)]));
        h.ok(h
            .result("c1")
            .replace(v, 4, 4)
            .src("[4]")
            .edit(repeat.0, repeat.1));
        // The losing value still counts as a change when it is the last one.
        let last = h.result("c1").replace(v, 5, 5).src("[5]");
        h.rejects_with(
            last.edit(repeat.0, r#""step":1,"step":9"#),
            Code::ToolResultReplaceChangesMore,
        );
    }
}

#[test]
fn tool_result_replacement_that_changes_more_than_content_is_rejected() {
    for v in ALL {
        let mut edits: Vec<(&str, &str, &str)> = vec![
            ("turn", r#""turn":1"#, r#""turn":2"#),
            ("step", r#""step":1"#, r#""step":2"#),
            (
                "error",
                r#""step":1"#,
                r#""step":1,"error":{"name":"E","code":"X"}"#,
            ),
            ("meta", r#""step":1"#, r#""step":1,"meta":{}"#),
            ("message id", r#""id":"r-c1""#, r#""id":"other""#),
            (
                "source",
                r#""source":{"kind":"tool","callId":"c1"}"#,
                r#""source":{"kind":"tool","callId":"c1","x":1}"#,
            ),
            ("toolCallId", r#""toolCallId":"c1""#, r#""toolCallId":"c9""#),
            ("isError", r#""isError":false"#, r#""isError":true"#),
            ("isError removed", r#","isError":false"#, ""),
            ("role", r#""role":"#, r#""x":0,"role":"#),
        ];
        if v <= 3 {
            // Only the first block's `content` is blanked: another block is a change.
            edits.push((
                "second block",
                r#""isError":false}]"#,
                r#""isError":false},{"type":"text","text":"x"}]"#,
            ));
        }
        for (what, from, to) in edits {
            let mut h = with_two_results(v);
            let l = prune(&h, &[(from, to)]);
            assert_eq!(
                h.rejects(l),
                Code::ToolResultReplaceChangesMore,
                "v{v}: changing {what} must be refused"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Step 7.4 — the protected system head (v3+)
// ---------------------------------------------------------------------------------------

#[test]
fn system_head_may_be_replaced_only_by_one_system_message_over_exactly_node_0() {
    for v in CANONICAL {
        let mut h = H::new(v);
        h.ok(h.system().append()); // 0
        h.users(2); // 1 2
        h.rejects_with(
            h.user().replace(v, 0, 0).src("[0]"),
            Code::SystemHeadProtected,
        );
        h.rejects_with(
            h.system().replace(v, 0, 1).src("[0,1]"),
            Code::SystemHeadProtected,
        );
        if v >= 4 {
            h.rejects_with(
                h.developer("", "").replace(v, 0, 0).src("[0]"),
                Code::SystemHeadProtected,
            );
        }
        let new_head = h.ok(h.system().replace(v, 0, 0).src("[0]"));
        assert_eq!(h.m.seqs(), vec![new_head, 1, 2]);
        // The new head is protected in turn.
        h.rejects_with(
            h.user()
                .replace(v, new_head, 2)
                .src(&format!("[{new_head},1,2]")),
            Code::SystemHeadProtected,
        );
    }
}

#[test]
fn empty_system_head_is_still_protected() {
    for v in CANONICAL {
        let mut h = H::new(v);
        h.ok(h
            .system()
            .edit(r#"[{"type":"text","text":"be brief"}]"#, "[]")
            .append());
        h.users(1);
        assert!(!h.m.node(0).unwrap().derives);
        h.rejects_with(
            h.user().replace(v, 0, 1).src("[0,1]"),
            Code::SystemHeadProtected,
        );
    }
}

#[test]
fn system_node_not_at_position_0_has_no_protection() {
    for v in CANONICAL {
        let mut h = H::new(v);
        h.users(1); // 0
        h.ok(h.system().append()); // 1
        h.users(1); // 2
        h.ok(h.user().replace(v, 1, 2).src("[1,2]"));
        assert_eq!(h.m.seqs(), vec![0, 3]);
        // A system message may replace other ranges too.
        h.ok(h.system().replace(v, 0, 3).src("[0,3]"));
        assert_eq!(h.m.seqs(), vec![4]);
    }
}

#[test]
fn user_head_is_not_protected() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(2);
        h.ok(h.user().replace(v, 0, 1).src("[0,1]"));
        assert_eq!(h.m.seqs(), vec![2]);
    }
}

#[test]
fn v0_to_v2_have_no_system_surface_type_and_no_head_rule() {
    for v in LEGACY {
        let mut h = H::new(v);
        // system/message is not a v0–v2 type: marked ignorable it is an opaque record, and
        // as such it may not even carry surface metadata.
        h.rejects_with(
            h.system().append().ignorable(),
            Code::SurfaceMetadataOnLogOnly,
        );
        h.ok(h.system().ignorable());
        assert!(h.m.is_empty());
        h.users(2);
        h.ok(h.user().replace(v, 2, 3).src("[2,3]"));
    }
}

// ---------------------------------------------------------------------------------------
// Order of the checks
// ---------------------------------------------------------------------------------------

#[test]
fn v3_endpoint_check_comes_before_the_range_lookup() {
    // startSeq 99 is both later than the event and not on the surface.
    let mut h = H::new(3);
    h.users(2);
    h.rejects_with(
        h.user().replace(3, 99, 0).src("[0]"),
        Code::ReplaceEndpointNotEarlier,
    );
    let mut h = H::new(2);
    h.users(2);
    h.rejects_with(
        h.user().replace(2, 99, 0).src("[0]"),
        Code::ReplaceStartNotOnSurface,
    );
}

#[test]
fn v3_provenance_runs_before_the_range_lookup_but_v0_to_v2_after_it() {
    for v in ALL {
        let mut h = H::new(v);
        h.users(2);
        h.skip(1); // seq 2: not a node
        let code = h.rejects(h.user().replace(v, 2, 1).src("[]"));
        let expected = if v >= 3 {
            Code::SourceSeqsEmpty
        } else {
            Code::ReplaceStartNotOnSurface
        };
        assert_eq!(code, expected, "v{v}");
        let code = h.rejects(h.user().replace(v, 1, 0).src("[]"));
        let expected = if v >= 3 {
            Code::SourceSeqsEmpty
        } else {
            Code::ReplaceRangeReversed
        };
        assert_eq!(code, expected, "v{v}");
        // With a good range both report the provenance.
        let code = h.rejects(h.user().replace(v, 0, 1).src("[]"));
        assert_eq!(code, Code::SourceSeqsEmpty, "v{v}");
    }
}

#[test]
fn v3_assistant_replace_fails_on_provenance_before_the_range() {
    for v in CANONICAL {
        let mut h = H::new(v);
        h.users(1);
        h.rejects_with(
            h.assistant(&[]).replace(v, 5, 5).src("[0]"),
            Code::ReplaceEndpointNotEarlier,
        );
        h.rejects_with(
            h.assistant(&[]).replace(v, 0, 0).src("[0]"),
            Code::SourceSeqsOnAssistant,
        );
        // Without a list it cannot cite the shadowed node: an assistant never replaces.
        h.rejects_with(
            h.assistant(&[]).replace(v, 0, 0),
            Code::ReplaceMissingShadowedSource,
        );
    }
    for v in LEGACY {
        let mut h = H::new(v);
        h.users(1);
        h.ok(h.assistant(&[]).replace(v, 0, 0).src("[0]"));
    }
}

#[test]
fn missing_sources_are_reported_before_the_tool_result_rule() {
    for v in ALL {
        let mut h = with_two_results(v);
        h.rejects_with(
            h.result("c1").replace(v, 0, 3).src("[0]"),
            Code::ReplaceMissingShadowedSource,
        );
    }
}

#[test]
fn tool_result_rule_is_checked_before_the_head_rule() {
    for v in CANONICAL {
        let mut h = H::new(v);
        h.ok(h.system().append());
        h.rejects_with(
            h.result("c").replace(v, 0, 0).src("[0]"),
            Code::ToolResultReplaceTargetNotResult,
        );
    }
}

#[test]
fn v0_to_v2_append_provenance_runs_in_step_6() {
    for v in LEGACY {
        let mut h = H::new(v);
        h.users(1);
        h.rejects_with(h.result("c").append().src("[]"), Code::SourceSeqsEmpty);
        assert_eq!(
            h.rejects_raw(h.result("c").append().src("[7]")),
            Code::SourceSeqsNotEarlier,
            "v{v}"
        );
    }
}

#[test]
fn v4_developer_binding_runs_after_provenance_and_before_the_range() {
    let mut h = H::new(4);
    h.users(1);
    h.skip(1); // seq 1: not a node
    // Role mismatch (step 4) and a start not on the surface (step 7): step 4 wins.
    let wrong_role = h
        .developer("", "")
        .edit(r#""role":"developer""#, r#""role":"user""#);
    h.rejects_with(
        wrong_role.replace(4, 1, 0).src("[0,1]"),
        Code::DeveloperRoleMismatch,
    );
    let wrong_role = h
        .developer("", "")
        .edit(r#""role":"developer""#, r#""role":"user""#);
    // Empty provenance (step 3) comes before the role (step 4).
    h.rejects_with(wrong_role.append().src("[]"), Code::SourceSeqsEmpty);
}

// ---------------------------------------------------------------------------------------
// Step 4 — developer binding (v4, §9.3)
// ---------------------------------------------------------------------------------------

const TOOL: &str = r#"{"name":"grep","description":"search","parameters":{"type":"object"}}"#;

fn addition(name: &str) -> String {
    format!(r#"{{"type":"tool-addition","toolName":"{name}"}}"#)
}

#[test]
fn developer_type_and_developer_role_must_occur_together() {
    let mut h = H::new(4);
    let l = h
        .developer("", "")
        .edit(r#""role":"developer""#, r#""role":"user""#);
    h.rejects_with(l.append(), Code::DeveloperRoleMismatch);
    let l = h.user().edit(r#""role":"user""#, r#""role":"developer""#);
    h.rejects_with(l.append(), Code::DeveloperRoleMismatch);
    let l = h
        .assistant(&[])
        .edit(r#""role":"assistant""#, r#""role":"developer""#);
    h.rejects_with(l.append(), Code::DeveloperRoleMismatch);
    h.ok(h.developer(r#"{"type":"text","text":"note"}"#, "").append());
}

#[test]
fn developer_rules_do_not_exist_before_v4() {
    for v in [0, 1, 2, 3] {
        let mut h = H::new(v);
        let l = h.user().edit(r#""role":"user""#, r#""role":"developer""#);
        h.ok(l.append());
        let l = h
            .user()
            .edit(r#"{"type":"text","text":"hi"}"#, &addition("grep"));
        h.ok(l.append());
    }
}

#[test]
fn tool_change_blocks_outside_developer_messages_are_rejected() {
    let mut h = H::new(4);
    let l = h
        .user()
        .edit(r#"{"type":"text","text":"hi"}"#, &addition("grep"));
    h.rejects_with(l.append(), Code::ToolChangeBlockMisplaced);
    let l = h.user().edit(
        r#"{"type":"text","text":"hi"}"#,
        r#"{"type":"tool-removal","toolName":"x"}"#,
    );
    h.rejects_with(l.append(), Code::ToolChangeBlockMisplaced);
    let l = h
        .system()
        .edit(r#"{"type":"text","text":"be brief"}"#, &addition("grep"));
    h.rejects_with(l.append(), Code::ToolChangeBlockMisplaced);
}

#[test]
fn tool_change_blocks_need_a_nonempty_tool_name_and_no_inline_tool() {
    let mut h = H::new(4);
    h.ok(h.request_header(&format!("[{TOOL}]")));
    for block in [
        r#"{"type":"tool-removal"}"#,
        r#"{"type":"tool-removal","toolName":""}"#,
        r#"{"type":"tool-removal","toolName":5}"#,
        r#"{"type":"tool-addition","toolName":""}"#,
    ] {
        assert_eq!(
            h.rejects(h.developer(block, r#","headerSeq":0"#).append()),
            Code::ToolChangeBlockInvalid,
            "{block}"
        );
    }
    let inline = format!(r#"{{"type":"tool-addition","toolName":"grep","tool":{TOOL}}}"#);
    h.rejects_with(
        h.developer(&inline, r#","headerSeq":0"#).append(),
        Code::ToolChangeBlockInvalid,
    );
    h.ok(h
        .developer(r#"{"type":"tool-removal","toolName":"grep"}"#, "")
        .append());
    h.ok(h.developer(&addition("grep"), r#","headerSeq":0"#).append());
}

#[test]
fn header_seq_is_required_exactly_when_tools_are_added() {
    let mut h = H::new(4);
    h.ok(h.request_header(&format!("[{TOOL}]")));
    h.rejects_with(
        h.developer(&addition("grep"), "").append(),
        Code::DeveloperHeaderSeq,
    );
    h.rejects_with(
        h.developer(r#"{"type":"text","text":"x"}"#, r#","headerSeq":0"#)
            .append(),
        Code::DeveloperHeaderSeq,
    );
    h.rejects_with(
        h.developer(
            r#"{"type":"tool-removal","toolName":"grep"}"#,
            r#","headerSeq":0"#,
        )
        .append(),
        Code::DeveloperHeaderSeq,
    );
}

#[test]
fn header_seq_must_be_a_safe_integer_naming_an_earlier_request_header() {
    let mut h = H::new(4);
    h.users(1); // 0
    h.ok(h.request_header(&format!("[{TOOL}]"))); // 1
    let own = h.seq();
    for hs in [
        "-1".to_owned(),
        "1.5".to_owned(),
        r#""1""#.to_owned(),
        "null".to_owned(),
        "0".to_owned(), // a user message, not a request/header
        own.to_string(),
        (own + 1).to_string(),
    ] {
        assert_eq!(
            h.rejects(
                h.developer(&addition("grep"), &format!(r#","headerSeq":{hs}"#))
                    .append()
            ),
            Code::DeveloperHeaderSeq,
            "headerSeq {hs}"
        );
    }
    h.ok(h
        .developer(&addition("grep"), r#","headerSeq":1.0"#)
        .append());
}

#[test]
fn header_seq_must_be_earlier_even_after_a_resync_backwards() {
    // After damage the fold may resynchronise to a lower seq (§6.3); a header recorded at a
    // later seq is then not "earlier" than the developer message.
    let mut h = H::new(4);
    h.users(1); // 0
    h.m.skip(2); // 1 and 2 are not on the surface (e.g. log-only events)
    h.ok(h.request_header(&format!("[{TOOL}]"))); // 3
    h.m.resync(1);
    h.rejects_with(
        h.developer(&addition("grep"), r#","headerSeq":3"#).append(),
        Code::DeveloperHeaderSeq,
    );
}

#[test]
fn added_tool_must_be_defined_exactly_once_and_completely_in_the_header() {
    let cases = [
        ("[]".to_owned(), "absent"),
        (format!("[{TOOL},{TOOL}]"), "twice"),
        (
            r#"[{"name":"grep","parameters":{}}]"#.to_owned(),
            "no description",
        ),
        (
            r#"[{"name":"grep","description":"d","parameters":[]}]"#.to_owned(),
            "array parameters",
        ),
        (
            r#"[{"name":"grep","description":5,"parameters":{}}]"#.to_owned(),
            "numeric description",
        ),
        (
            r#"[{"name":"grep","description":"d","parameters":{},"deferLoading":false}]"#
                .to_owned(),
            "deferLoading false",
        ),
        (
            r#"[{"name":"grep","description":"d","parameters":{},"deferLoading":"yes"}]"#
                .to_owned(),
            "deferLoading not a boolean",
        ),
    ];
    for (tools, what) in cases {
        let mut h = H::new(4);
        h.ok(h.request_header(&tools));
        assert_eq!(
            h.rejects(h.developer(&addition("grep"), r#","headerSeq":0"#).append()),
            Code::DeveloperToolBinding,
            "{what}"
        );
    }
    let mut h = H::new(4);
    h.ok(h.request_header(
        r#"[{"name":"grep","description":"d","parameters":{},"deferLoading":true},{"name":"ls","description":"","parameters":{}}]"#,
    ));
    h.ok(h
        .developer(
            &format!("{},{}", addition("grep"), addition("ls")),
            r#","headerSeq":0"#,
        )
        .append());
}

#[test]
fn header_seq_binds_to_the_named_header_not_the_latest() {
    let mut h = H::new(4);
    h.ok(h.request_header(&format!("[{TOOL}]"))); // 0: has grep
    h.ok(h.request_header("[]")); // 1: has nothing
    h.rejects_with(
        h.developer(&addition("grep"), r#","headerSeq":1"#).append(),
        Code::DeveloperToolBinding,
    );
    h.ok(h.developer(&addition("grep"), r#","headerSeq":0"#).append());
}

// ---------------------------------------------------------------------------------------
// Step 5 — message projections (v4)
// ---------------------------------------------------------------------------------------

#[test]
fn image_offload_warns_in_v4_only_and_leaves_the_surface_alone() {
    for v in [3, 4] {
        let mut h = H::new(v);
        h.users(1);
        let ev = h.decode_line(&h.log_only("image/offload"));
        let (accepted, f) = h.fold_event(&ev);
        assert!(accepted);
        if v == 4 {
            assert_eq!(f.len(), 1);
            assert_eq!(f[0].code, Code::MessageProjectionNotApplied);
            assert!(!f[0].is_error());
        } else {
            assert!(f.is_empty(), "{f:?}");
        }
        assert_eq!(h.m.seqs(), vec![0]);
        // With surface metadata it is rejected (step 2) and no warning is added.
        h.rejects_with(
            h.log_only("image/offload").append(),
            Code::SurfaceMetadataOnLogOnly,
        );
    }
}

// ---------------------------------------------------------------------------------------
// range() and balance_around()
// ---------------------------------------------------------------------------------------

#[test]
fn range_walks_surface_order_and_reports_each_failure() {
    let mut h = H::new(3);
    h.users(5); // 0..=4
    h.ok(h.user().replace(3, 1, 2).src("[1,2]")); // 5 → 0 5 3 4
    assert_eq!(h.m.seqs(), vec![0, 5, 3, 4]);
    assert_eq!(h.m.range(0, 4), Ok(vec![0, 5, 3, 4]));
    assert_eq!(h.m.range(5, 3), Ok(vec![5, 3]));
    assert_eq!(h.m.range(3, 3), Ok(vec![3]));
    assert_eq!(h.m.range(4, 4), Ok(vec![4]));
    assert_eq!(h.m.range(3, 5), Err(RangeError::Reversed));
    assert_eq!(h.m.range(4, 0), Err(RangeError::Reversed));
    assert_eq!(h.m.range(1, 4), Err(RangeError::StartMissing));
    assert_eq!(h.m.range(0, 2), Err(RangeError::EndMissing));
    assert_eq!(h.m.range(9, 9), Err(RangeError::StartMissing));
    assert_eq!(h.m.index_of(3), Some(2));
    assert_eq!(h.m.head().map(|n| n.seq), Some(0));
}

#[test]
fn range_is_consistent_after_replacing_the_head_and_the_tail() {
    let mut h = H::new(2);
    h.users(4); // 0 1 2 3
    h.ok(h.user().replace(2, 0, 1).src("[0,1]")); // 4 2 3
    h.ok(h.user().replace(2, 2, 3).src("[2,3]")); // 4 5
    h.ok(h.user().append()); // 4 5 6
    assert_eq!(h.m.seqs(), vec![4, 5, 6]);
    assert_eq!(h.m.range(4, 6), Ok(vec![4, 5, 6]));
    assert_eq!(h.m.range(6, 4), Err(RangeError::Reversed));
    // Shadowed nodes are gone from the list.
    assert!(!h.m.contains(0) && !h.m.contains(3));
    let back: Vec<u64> = h.m.iter().map(|n| n.seq).collect();
    assert_eq!(back, vec![4, 5, 6]);
}

#[test]
fn balance_counts_open_tool_calls_around_a_range() {
    let mut h = H::new(3);
    h.users(1); // 0
    h.ok(h.assistant(&["c1", "c2"]).append()); // 1: +2
    h.ok(h.result("c1").append()); // 2: 1 open
    h.ok(h.result("c2").append()); // 3: 0 open
    h.users(1); // 4
    assert_eq!(h.m.balance_around(0, 4), Ok((0, 0)));
    assert_eq!(h.m.balance_around(1, 1), Ok((0, 2)));
    assert_eq!(h.m.balance_around(2, 2), Ok((2, 1)));
    assert_eq!(h.m.balance_around(0, 3), Ok((0, 0)));
    assert_eq!(h.m.balance_around(4, 4), Ok((0, 0)));
}

#[test]
fn balance_reports_a_result_without_a_call_on_the_surface() {
    let mut h = H::new(2);
    h.users(1); // 0
    h.ok(h.result("c").append()); // 1: counter goes negative
    h.users(1); // 2
    assert_eq!(h.m.balance_around(0, 2), Err(1));
}

// ---------------------------------------------------------------------------------------
// Rejected replaces cost no walk (issue 20, finding 4); a brute-force model of the fold
// ---------------------------------------------------------------------------------------

impl H {
    fn visits(&self) -> u64 {
        self.m.visits.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Fold a line that must be rejected; returns its one finding's message.
    fn rejection_message(&mut self, l: L) -> String {
        let ev = self.decode_line(&l);
        let (accepted, findings) = self.fold_event(&ev);
        assert!(
            !accepted && findings.len() == 1,
            "v{}: {} gave {findings:?}",
            self.v,
            l.text()
        );
        findings[0].message.clone()
    }
}

/// `sourceEventSeqs` citing every seq in `[from, to]` except `skip`, as runs.
fn runs_except(from: u64, to: u64, skip: &[u64]) -> String {
    let mut runs = Vec::new();
    let mut next = from;
    for &s in skip {
        if s > next {
            runs.push(format!("[{next},{}]", s - 1));
        }
        next = s + 1;
    }
    if next <= to {
        runs.push(format!("[{next},{to}]"));
    }
    format!("[{}]", runs.join(","))
}

#[test]
fn a_rejected_replace_does_not_walk_its_range() {
    let mut h = H::new(3);
    let users = h.users(20_000);
    // Displaced nodes (replacing nodes) spread over the range, more than are checked one by
    // one, so both ways of counting them are used.
    for i in (100..20_000).step_by(97) {
        let s = users[i];
        h.ok(h.user().replace(3, s, s).src(&format!("[{s}]")));
    }
    let surface = h.m.seqs();
    let (first, last) = (surface[0], surface[surface.len() - 1]);
    let regular = surface[10_001];
    let displaced = surface[(0..surface.len())
        .find(|&i| i > 5_000 && surface[i] > users[19_999])
        .unwrap()];
    let top = h.seq() - 1;
    let expect_missing = |missing: &[u64]| {
        format!(
            "surface replace: sourceEventSeqs must include every shadowed surface node; missing {}",
            crate::log::text::seq_list(missing, 20)
        )
    };
    let before = h.visits();
    for _ in 0..50 {
        // One regular node left out.
        let l = h
            .user()
            .replace(3, first, last)
            .src(&runs_except(0, top, &[regular]));
        assert_eq!(h.rejection_message(l), expect_missing(&[regular]));
        // One displaced node and one regular node left out.
        let mut skip = [regular, displaced];
        skip.sort_unstable();
        let l = h
            .user()
            .replace(3, first, last)
            .src(&runs_except(0, top, &skip));
        let mut want = vec![regular, displaced];
        want.sort_by_key(|s| surface.iter().position(|x| x == s));
        assert_eq!(h.rejection_message(l), expect_missing(&want));
        // Nothing cited: the first 20 and the count.
        let l = h.user().replace(3, first, last);
        assert_eq!(h.rejection_message(l), expect_missing(&surface));
        // Endpoints reversed.
        let l = h
            .user()
            .replace(3, last, first)
            .src(&format!("[[0,{top}]]"));
        assert_eq!(
            h.rejection_message(l),
            format!(
                "surface replace: start seq {last} (index {}) is after end seq {first} (index 0)",
                surface.len() - 1
            )
        );
    }
    assert!(h.m.points.is_some(), "the displaced nodes were counted");
    assert!(
        h.visits() - before < 100,
        "200 rejected replaces over {} nodes visited {} nodes",
        surface.len(),
        h.visits() - before
    );
    // An accepted replace of the same range visits each node it shadows once.
    let before = h.visits();
    h.ok(h
        .user()
        .replace(3, first, last)
        .src(&format!("[[0,{top}]]")));
    assert!(h.visits() - before <= surface.len() as u64 + 1);
    assert_eq!(h.m.len(), 1);
}

#[test]
fn replaces_match_a_brute_force_model_of_the_fold() {
    for (v, seed) in [(3, 7u64), (2, 11), (4, 13)] {
        let mut h = H::new(v);
        let mut rng = Rng(seed);
        let mut model: Vec<u64> = h.users(600);
        for round in 0..1500 {
            let n = model.len();
            if round == 700 {
                // A long accepted replace: thousands of dead labels (slab compaction).
                model.extend(h.users(2 * SLACK));
                let (i, j) = (1, model.len() - 2);
                let src = crate::log::rows::encode_sources_json(&{
                    let mut s = model[i..=j].to_vec();
                    s.sort_unstable();
                    s
                });
                let seq = h.ok(h.user().replace(v, model[i], model[j]).src(&src));
                model.splice(i..=j, [seq]);
                assert_eq!(h.m.slots.len(), h.m.len(), "the dead labels were dropped");
                continue;
            }
            match rng.below(10) {
                0..=1 => model.push(h.ok(h.user().append())),
                2..=5 => {
                    // An accepted replace of a short range, citing it and some other seqs.
                    let i = rng.below(n);
                    let j = (i + rng.below(3)).min(n - 1);
                    let mut src = model[i..=j].to_vec();
                    src.extend((0..rng.below(3)).map(|_| rng.below(h.seq() as usize) as u64));
                    src.sort_unstable();
                    src.dedup();
                    let src = crate::log::rows::encode_sources_json(&src);
                    let seq = h.ok(h.user().replace(v, model[i], model[j]).src(&src));
                    model.splice(i..=j, [seq]);
                }
                _ => {
                    // A replace that is rejected: some shadowed seqs left out, or reversed.
                    let (mut i, mut j) = (rng.below(n), rng.below(n));
                    let reversed = i > j;
                    if i == j {
                        j = (j + 1).min(n - 1);
                        i = i.saturating_sub(1);
                    }
                    let shadowed: Vec<u64> = if reversed {
                        vec![]
                    } else {
                        model[i..=j].to_vec()
                    };
                    let shadowed_set: std::collections::HashSet<u64> =
                        shadowed.iter().copied().collect();
                    // Cite most shadowed seqs, and runs of other seqs around them.
                    let mut src: std::collections::BTreeSet<u64> = shadowed
                        .iter()
                        .copied()
                        .filter(|_| rng.below(4) != 0)
                        .collect();
                    for _ in 0..rng.below(4) {
                        let a = rng.below(h.seq() as usize) as u64;
                        let b = (a + rng.below(50) as u64).min(h.seq() - 1);
                        src.extend((a..=b).filter(|s| !shadowed_set.contains(s)));
                    }
                    if !reversed && shadowed.iter().all(|s| src.contains(s)) {
                        src.remove(&shadowed[rng.below(shadowed.len())]);
                    }
                    let src: Vec<u64> = src.into_iter().collect();
                    let want = if reversed {
                        format!(
                            "surface replace: start seq {} (index {i}) is after end seq {} (index {j})",
                            model[i], model[j]
                        )
                    } else {
                        let missing: Vec<u64> = shadowed
                            .iter()
                            .copied()
                            .filter(|s| src.binary_search(s).is_err())
                            .collect();
                        format!(
                            "surface replace: sourceEventSeqs must include every shadowed surface node; missing {}",
                            crate::log::text::seq_list(&missing, 20)
                        )
                    };
                    let mut l = h.user().replace(v, model[i], model[j]);
                    if !src.is_empty() {
                        l = l.src(&crate::log::rows::encode_sources_json(&src));
                    }
                    assert_eq!(h.rejection_message(l), want, "v{v} round {round}");
                }
            }
            if round % 100 == 0 {
                assert_eq!(h.m.seqs(), model, "v{v} round {round}");
                for (i, s) in model.iter().enumerate().step_by(37) {
                    assert_eq!(h.m.index_of(*s), Some(i));
                }
                let (a, b) = (rng.below(model.len()), rng.below(model.len()));
                let (a, b) = (a.min(b), a.max(b));
                assert_eq!(h.m.range(model[a], model[b]), Ok(model[a..=b].to_vec()));
            }
        }
        assert_eq!(h.m.seqs(), model);
        assert_eq!(h.m.len(), model.len());
        assert!(
            h.m.points.is_some(),
            "v{v}: displaced nodes were also counted"
        );
    }
}

#[test]
fn the_spooled_history_reads_back_and_forks_cleanly() {
    let rec = |i: u64| Replacement {
        seq: i,
        start: i / 2,
        end: i / 2 + i % 7,
        shadowed: (0..i % 50).map(|k| i * 100 + k).collect(),
    };
    let mut a = History::default();
    for i in 0..3000 {
        a.push(&rec(i));
    }
    assert!(
        a.spool.is_some() && a.spooled > 0,
        "batches went to the spool"
    );
    // A speculation's copy: the live state writes on first, then the copy does.
    let mut b = a.clone();
    for i in 3000..6000 {
        a.push(&rec(i));
    }
    for i in 10_000..12_000 {
        b.push(&rec(i));
    }
    let back = |h: &History| h.iter().collect::<io::Result<Vec<_>>>().unwrap();
    assert_eq!(back(&a), (0..6000).map(rec).collect::<Vec<_>>());
    let want_b: Vec<Replacement> = (0..3000).chain(10_000..12_000).map(rec).collect();
    assert_eq!(back(&b), want_b);
    assert!(!Arc::ptr_eq(
        a.spool.as_ref().unwrap(),
        b.spool.as_ref().unwrap()
    ));
}

#[test]
fn a_message_offset_rides_with_the_line_start_only_where_both_fit() {
    for (byte, at) in [
        (0, Some(0)),
        (12_345, Some(17)),
        ((1 << 40) - 1, Some((1 << 23) - 1)),
        (99, None),
    ] {
        assert_eq!(unpack_byte(pack_byte(byte, at)), (byte, at));
    }
    // Too far into the file, or into the line: the start alone, the message found in the line.
    assert_eq!(unpack_byte(pack_byte(1 << 40, Some(5))), (1 << 40, None));
    assert_eq!(unpack_byte(pack_byte(7, Some(1 << 23))), (7, None));
    assert_eq!(
        unpack_byte(pack_byte(u64::MAX >> 1, Some(5))),
        (u64::MAX >> 1, None)
    );
}
