//! The fuzz targets' bodies, and what they share. The targets in `fuzz_targets/` are
//! one-line wrappers, and `tests/fuzz_regressions.rs` (main crate) includes this file to
//! replay every saved input of `testdata/fuzz/` through the same checks under `cargo test`.
//!
//! What the fuzz targets share: how a fuzz input becomes a log, and the checks every target
//! runs. A new target (e.g. the zstd reader) is one more file in `fuzz_targets/` plus a
//! `[[bin]]` entry in `Cargo.toml`; it can reuse [`input`] and [`check_scan`].

use std::borrow::Cow;

use dshs::log::Finding;
use dshs::log::derive::message_span;
use dshs::log::repair;
use dshs::log::scan::{self, EventInfo, FoldState, Observer, Scan, ScanOptions, Status};

/// One header line per format version, so most inputs get past the header at once.
pub const HEADERS: [&str; 5] = [
    r#"{"type":"session","version":0,"id":"f","createdAt":1,"delegationDepth":0}"#,
    r#"{"type":"session","version":1,"id":"f","createdAt":1,"delegationDepth":0}"#,
    r#"{"type":"session","version":2,"id":"f","createdAt":1,"delegationDepth":0,"isSeeded":false}"#,
    r#"{"type":"session","version":3,"id":"f","createdAt":1,"delegationDepth":0,"isSeeded":false}"#,
    r#"{"type":"session","version":4,"id":"f","createdAt":1,"delegationDepth":0,"isSeeded":false}"#,
];

/// The first byte of a fuzz input is a selector, the rest is the log body:
/// `sel % 8` in 0..=4 prefixes the header of that version (5..=7: the body is the whole log,
/// header included); bit 3 set replays only the prefix up to seq `sel >> 4` (`--at`).
pub struct Input<'a> {
    pub log: Cow<'a, [u8]>,
    pub stop_after: Option<u64>,
}

pub fn input(data: &[u8]) -> Input<'_> {
    let Some((&sel, body)) = data.split_first() else {
        return Input {
            log: Cow::Borrowed(data),
            stop_after: None,
        };
    };
    let log = match HEADERS.get(usize::from(sel % 8)) {
        Some(h) => {
            let mut v = Vec::with_capacity(h.len() + 1 + body.len());
            v.extend_from_slice(h.as_bytes());
            v.push(b'\n');
            v.extend_from_slice(body);
            Cow::Owned(v)
        }
        None => Cow::Borrowed(body),
    };
    let stop_after = (sel & 8 != 0).then_some(u64::from(sel >> 4));
    Input { log, stop_after }
}

/// Touches what commands read from each event (message, tool calls, turn/step, the JSON
/// tree re-serialized), so a panic in any accessor on hostile data is found.
struct Touch;

impl Observer for Touch {
    fn event(&mut self, info: &EventInfo<'_, '_>, state: &FoldState) {
        let e = info.event;
        let _ = e.message();
        let _ = e.tool_call_blocks().count();
        let _ = (e.turn(), e.step());
        let _ = e.data.to_js_string();
        let _ = state.surface.len();
    }
}

/// Scan `log` from memory (never an I/O error).
pub fn scan_bytes(log: &[u8], opts: &ScanOptions) -> (Scan, Vec<Finding>) {
    let mut findings = Vec::new();
    let s = scan::scan(log, None, opts, &mut findings, &mut Touch).expect("reading memory");
    (s, findings)
}

/// Invariants of any scan, on any bytes.
pub fn check_scan(log: &[u8], s: &Scan, findings: &[Finding], full: bool) {
    assert_eq!(
        s.tally.errors,
        findings.iter().filter(|f| f.is_error()).count() as u64,
        "the tally counts every error finding it reports"
    );
    assert!(s.committed_bytes <= s.total_bytes);
    if full && s.state.is_some() {
        // (A header that stops the pass leaves the rest unread.)
        assert_eq!(
            s.total_bytes,
            log.len() as u64,
            "a full scan reads every byte"
        );
    }
    // What `derive` does for a log it accepts: every deriving node's message is found, byte
    // for byte, on the line the node points at.
    if s.status() == Status::Valid
        && s.tally.blocking == 0
        && let Some(state) = &s.state
    {
        for node in state.surface.iter() {
            if !node.derives || node.legacy_message().is_some() {
                continue;
            }
            let start = usize::try_from(node.pos.byte).expect("offset fits");
            let rest = &log[start..];
            let line = rest.split(|b| *b == b'\n').next().unwrap_or_default();
            if let Err(e) = message_span(line, node.kind) {
                panic!("seq {}: no message to derive: {e:?}", node.seq);
            }
        }
    }
}

/// Target `scan`: the reader, the fold and the lifecycle on arbitrary bytes — no panic, and
/// the invariants of [`check_scan`].
pub fn scan_target(data: &[u8]) {
    let input = input(data);
    let opts = ScanOptions {
        stop_after: input.stop_after,
        record_replacements: true,
        ..ScanOptions::default()
    };
    let (s, findings) = scan_bytes(&input.log, &opts);
    check_scan(&input.log, &s, &findings, input.stop_after.is_none());
}

/// Target `repair`: repair planning on arbitrary logs. Whenever a plan is made and verified
/// (what `dshs repair` writes), the repaired bytes (committed prefix + closers) validate with
/// no error, no open turn, no torn line and no crash tail, and planning again on them changes
/// nothing (idempotence). A plan that fails verification may only fail on the closers.
pub fn repair_target(data: &[u8]) {
    let log = input(data).log;
    let opts = ScanOptions::default();
    let (s, findings) = scan_bytes(&log, &opts);
    check_scan(&log, &s, &findings, true);
    let Ok(plan) = repair::plan(&s) else {
        return;
    };
    let keep = usize::try_from(plan.keep).expect("offset fits");
    assert!(keep <= log.len());
    let verdict = repair::verify(&log[..], &plan, None, &opts).expect("reading memory");
    if !verdict.ok {
        // `dshs repair` refuses such a plan and writes nothing. It may only happen when the
        // closers themselves break a rule the kept prefix only bent (e.g. a v0 turn numbered
        // 0: a warning on `turn/start`, an error on the closing `turn/end`, §16): every error
        // is on an appended line, never in the committed prefix.
        for f in verdict.findings.iter().filter(|f| f.is_error()) {
            assert!(
                f.pos.byte >= plan.keep,
                "repair would make the committed prefix invalid: {f:#?}"
            );
        }
        return;
    }
    let mut repaired = log[..keep].to_vec();
    repaired.extend_from_slice(plan.append());
    let (again, f2) = scan_bytes(&repaired, &opts);
    check_scan(&repaired, &again, &f2, true);
    let second = repair::plan(&again).expect("a repaired log can be planned again");
    assert!(second.is_noop(), "repair is not idempotent: {second:?}");
}
