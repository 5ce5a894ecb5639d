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
    // Without an observer that sees each event (packed rows then fold their members
    // together), and on one thread reading line by line (no block-wide UTF-8 check, types
    // classified in the fold), the pass concludes exactly the same.
    for (threads, observed) in [(0, false), (1, true)] {
        let opts = ScanOptions {
            threads,
            ..opts.clone()
        };
        let mut again = Vec::new();
        let observer: &mut dyn Observer = if observed { &mut Touch } else { &mut () };
        let s2 =
            scan::scan(&input.log[..], None, &opts, &mut again, observer).expect("reading memory");
        assert_eq!(
            outcome(&s2, &again),
            outcome(&s, &findings),
            "threads {threads}, observed {observed}"
        );
    }
}

/// What a pass concluded: its verdict, counts, fold state and findings.
fn outcome(s: &Scan, findings: &[Finding]) -> String {
    let state = s.state.as_ref();
    format!(
        "{:?} events {} bytes {}/{} closers {:?} next {:?} surface {:?}\n{findings:#?}",
        s.status(),
        s.events(),
        s.committed_bytes,
        s.total_bytes,
        state.map(|st| st.closers.last()),
        state.map(|st| st.surface.next_seq()),
        state.map(|st| st.surface.seqs()),
    )
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

// -------------------------------------------------------------------------------------------
// Target `zstd`: the Zstandard reader under the scan.

/// The longest decompressed line the zstd target accepts: low, so a frame that decompresses
/// to one huge line (a "zstd bomb") stops early and memory stays bounded.
pub const FUZZ_MAX_LINE: u64 = 64 * 1024;

/// Plaintext kept for the derive check of [`check_scan`] (a bomb of short lines is scanned
/// but not kept).
const KEEP_PLAIN: usize = 8 << 20;

/// A `Read` that copies what it reads (up to [`KEEP_PLAIN`] bytes).
struct Tee<R> {
    inner: R,
    copy: Vec<u8>,
    overflow: bool,
}

impl<R: std::io::Read> std::io::Read for Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if self.copy.len() + n <= KEEP_PLAIN {
            self.copy.extend_from_slice(&buf[..n]);
        } else {
            self.overflow = true;
        }
        Ok(n)
    }
}

/// Scan a zstd log from memory, as `dshs validate` reads a `.zstd` file, with the line limit
/// [`FUZZ_MAX_LINE`]. `None`: reading stopped with an error (a bomb, or no zstd at all) — a
/// clear error, never a panic. Also returns the plaintext when it was small enough to keep.
pub fn scan_zstd(z: &[u8], opts: &ScanOptions) -> Option<(Scan, Vec<Finding>, Option<Vec<u8>>)> {
    use dshs::log::input::zstd::ZstdReader;
    let (reader, framing) = ZstdReader::with_max_line(z, FUZZ_MAX_LINE).ok()?;
    let mut tee = Tee {
        inner: reader,
        copy: Vec::new(),
        overflow: false,
    };
    let mut findings = Vec::new();
    let s = scan::scan_framed(
        std::io::BufReader::new(&mut tee),
        Some(&framing),
        None,
        opts,
        &mut findings,
        &mut Touch,
    );
    let s = match s {
        Ok(s) => s,
        Err(e) => {
            assert!(!e.to_string().is_empty(), "an error says what went wrong");
            return None;
        }
    };
    let plain = (!tee.overflow).then_some(tee.copy);
    Some((s, findings, plain))
}

/// Compress a plain log the way DSH stores it: the header line alone in the first frame,
/// then batches of `batch` lines per frame (a final line without newline joins the last).
pub fn compress(plain: &[u8], batch: usize) -> Vec<u8> {
    use dshs::log::input::zstd::encode_frame;
    let mut lines: Vec<&[u8]> = plain.split_inclusive(|&b| b == b'\n').collect();
    let mut out = Vec::new();
    if lines.is_empty() {
        return out;
    }
    let header = lines.remove(0);
    out.extend(encode_frame(header).expect("compressing memory"));
    for group in lines.chunks(batch.max(1)) {
        out.extend(encode_frame(&group.concat()).expect("compressing memory"));
    }
    out
}

/// Every check of one zstd log: the scan (no panic, bounded, [`check_scan`]'s invariants on
/// the plaintext) and `repair` (a verified plan's result validates and is a fixed point; an
/// unverified one fails only on what it appends). Returns the scan's error count (`None`:
/// reading stopped with an error).
pub fn check_zstd(z: &[u8]) -> Option<u64> {
    let opts = ScanOptions::default();
    let (s, findings, plain) = scan_zstd(z, &opts)?;
    if let Some(plain) = &plain {
        check_scan(plain, &s, &findings, true);
    }
    let errors = s.tally.errors;
    let Ok(mut plan) = repair::plan(&s) else {
        return Some(errors);
    };
    // As `dshs repair` does: read back the committed lines of a torn final frame.
    if plan.recover_from(std::io::Cursor::new(z)).is_err() {
        return Some(errors);
    }
    let keep = usize::try_from(plan.keep).expect("offset fits");
    assert!(keep <= z.len(), "repair keeps more than the file holds");
    // A torn final frame is cut at its start, never inside a complete frame.
    if let Some(t) = s.zstd.as_ref().and_then(|e| e.torn.as_ref()) {
        assert_eq!(
            plan.keep, t.start,
            "repair cuts the torn frame at its start"
        );
    }
    let verdict = repair::verify(z, &plan, None, &opts).expect("reading memory");
    if !verdict.ok {
        for f in verdict.findings.iter().filter(|f| f.is_error()) {
            assert!(
                f.pos.byte >= s.committed_bytes,
                "repair would make the committed part invalid: {f:#?}"
            );
        }
        return Some(errors);
    }
    let mut repaired = z[..keep].to_vec();
    repaired.extend_from_slice(plan.append());
    let (again, f2, _) = scan_zstd(&repaired, &opts).expect("a verified repair reads back");
    assert_eq!(again.tally.errors, 0, "verified repair has errors: {f2:#?}");
    assert!(again.zstd.as_ref().is_some_and(|e| e.torn.is_none()));
    let second = repair::plan(&again).expect("a repaired log can be planned again");
    assert!(second.is_noop(), "repair is not idempotent: {second:?}");
    Some(errors)
}

/// Target `zstd`: the first byte selects how the rest becomes a zstd log —
/// - `sel % 4 == 0`: a valid header frame (version `(sel >> 2) % 5`), then arbitrary bytes;
/// - `sel % 4 == 1`: the zstd magic, then arbitrary bytes;
/// - `sel % 4 == 2`: a structured log (header of that version + the rest as its body, after
///   five parameter bytes) compressed DSH-style, then cut at any byte: the cut may only add a
///   torn final frame, never an error the uncut log did not have;
/// - `sel % 4 == 3`: the same, with one byte flipped (and cut): any verdict, no panic.
///
/// Every log goes through [`check_zstd`].
pub fn zstd_target(data: &[u8]) {
    use dshs::log::input::ZSTD_MAGIC;
    use dshs::log::input::zstd::encode_frame;
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let header = HEADERS[usize::from(sel >> 2) % 5];
    match sel % 4 {
        0 => {
            let mut z = encode_frame(format!("{header}\n").as_bytes()).expect("compressing");
            z.extend_from_slice(rest);
            check_zstd(&z);
        }
        1 => {
            let mut z = ZSTD_MAGIC.to_vec();
            z.extend_from_slice(rest);
            check_zstd(&z);
        }
        mode => {
            if rest.len() < 5 {
                return;
            }
            let (params, body) = rest.split_at(5);
            let mut plain = format!("{header}\n").into_bytes();
            plain.extend_from_slice(body);
            let full = compress(&plain, usize::from(params[4] % 4) + 1);
            let whole = check_zstd(&full);
            let at = usize::from(u16::from_le_bytes([params[0], params[1]]));
            let cut = usize::from(u16::from_le_bytes([params[2], params[3]])) % (full.len() + 1);
            if mode == 2 {
                let cut_errors = check_zstd(&full[..cut]);
                // Cutting a log whose every frame read cleanly, past its header frame, only
                // tears the final frame: crash damage (warnings), never a new error. (Cut
                // inside the header frame, there is no header: an error, rightly.)
                let header_frame = encode_frame(format!("{header}\n").as_bytes())
                    .expect("compressing")
                    .len();
                if whole == Some(0) && cut >= header_frame {
                    assert_eq!(cut_errors, Some(0), "a cut at {cut} made errors");
                }
            } else if !full.is_empty() {
                let mut z = full.clone();
                let i = at % z.len();
                z[i] ^= params[3] | 1;
                check_zstd(&z);
                z.truncate(cut.max(i + 1));
                check_zstd(&z);
            }
        }
    }
}

// -------------------------------------------------------------------------------------------
// Target `compact`: compaction planning on arbitrary logs.

/// Target `compact`: the first two bytes pick a range among the surface nodes (any two
/// nodes, either order), the rest is a log as for [`input`]. Whenever `compact::plan` makes a
/// plan, `compact::verify` must prove it (`dshs compact` refuses an unproven plan with "a
/// case dshs does not handle"), and the compacted bytes validate with no error, no open turn
/// or compaction, and the planned surface.
pub fn compact_target(data: &[u8]) {
    use dshs::log::compact::{self, Lookout, Minted, Request};
    use dshs::log::derive::Deriver;
    if data.len() < 2 {
        return;
    }
    let (a, b) = (usize::from(data[0]), usize::from(data[1]));
    let log = input(&data[2..]).log;
    let opts = ScanOptions::default();
    let (s, findings) = scan_bytes(&log, &opts);
    check_scan(&log, &s, &findings, true);
    let Some(state) = &s.state else {
        return;
    };
    let nodes = state.surface.seqs();
    let pick = |k: usize| {
        nodes
            .get(k % nodes.len().max(1))
            .copied()
            .unwrap_or(k as u64)
    };
    let req = Request {
        start: pick(a),
        end: pick(b),
        summary: "fuzz \"summary\"\n\u{1b}".into(),
    };
    let mut lookout = Lookout::new(&req);
    let s = scan::scan(&log[..], None, &opts, &mut Vec::new(), &mut lookout).expect("memory");
    // The deriver reads messages back from a file: one per fuzzing process.
    let path = std::env::temp_dir().join(format!("dshs-fuzz-compact-{}.jsonl", std::process::id()));
    let _removed = RemovedOnDrop(path.clone());
    std::fs::write(&path, &log[..]).expect("temp file");
    let mut deriver = Deriver::open(&path).expect("temp file");
    let minted = Minted {
        compaction_id: "c".into(),
        message_id: "m".into(),
        time: 1,
    };
    let Ok(plan) = compact::plan(&s, &lookout, &req, minted, &mut deriver) else {
        return;
    };
    let verdict = compact::verify(&log[..], &plan, None, &opts).expect("reading memory");
    assert!(
        verdict.ok,
        "a compaction plan does not verify: {:#?}",
        verdict.findings
    );
    let mut out = log[..usize::try_from(plan.keep).expect("fits")].to_vec();
    out.extend_from_slice(plan.append());
    let (c, f) = scan_bytes(&out, &opts);
    check_scan(&out, &c, &f, true);
    assert_eq!(c.tally.errors, 0, "{f:#?}");
    assert!(!c.open_turn() && c.torn.is_none() && c.crash.is_none());
    let cs = c.state.as_ref().expect("folded");
    assert!(!cs.compaction.is_active());
    assert_eq!(cs.surface.seqs(), plan.expected_surface);
}

/// A temporary file removed when this goes out of scope, a failed check included.
struct RemovedOnDrop(std::path::PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
