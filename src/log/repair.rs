//! Crash repair (§14): from one scan, decide what to cut (everything after the committed
//! prefix: a torn line and any crash tail, §6.2) and what to append (the closers of
//! §14.2–§14.4); then prove the result valid by scanning the exact bytes it will hold,
//! before anything is written. Writing itself is `write.rs`.

use std::io::{self, BufReader, Read, Seek, SeekFrom};

/// The check before writing, as for every writer (the plan is a [`RepairPlan`]).
pub use super::append::{Planned, Verdict, verify};
use super::closers::{Closer, CloserKind};
use super::input::zstd::ZstdReader;
use super::scan::{CrashTail, Scan, Status, TornTail};
use super::write::{Edit, Encoding};

/// Why a log is not repaired (nothing is written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Unsupported version, V4 draft, unknown required event type (exit 3).
    Unsupported,
    /// The committed part has error findings: not crash damage (exit 1).
    Invalid,
}

/// The bytes after the committed prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    pub start: u64,
    pub end: u64,
    /// Complete rows DSH drops (§6.2 step 4), if any.
    pub crash: Option<CrashTail>,
    /// The final fragment without a newline, if any.
    pub torn: Option<TornTail>,
    /// zstd: the torn final frame cut off (offsets above are compressed): its number and the
    /// plaintext bytes of committed lines recovered from it (appended again as a new frame).
    pub frame: Option<(u64, u64)>,
}

impl Cut {
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

/// Everything a repair does, decided before anything is written.
#[derive(Debug, Clone)]
pub struct RepairPlan {
    pub version: u8,
    /// Bytes `[0, keep)` are the committed prefix: never rewritten.
    pub keep: u64,
    pub cut: Option<Cut>,
    pub closers: Vec<Closer>,
    /// The bytes appended: the closer lines (each ending in `\n`), or for a zstd log the
    /// recovered lines of a torn final frame as one frame and the closers as another.
    append: Vec<u8>,
    pub encoding: Encoding,
    /// zstd: committed lines recovered from the torn final frame, to be re-appended as a new
    /// frame (§14.5): (compressed start of that frame, plaintext length to take from it).
    recover: Option<(u64, u64)>,
    recovered: bool,
    /// Plaintext length of the repaired log.
    plain_len: u64,
}

impl RepairPlan {
    /// Nothing to cut and no open turn: the log is left exactly as it is.
    pub fn is_noop(&self) -> bool {
        self.cut.is_none() && self.closers.is_empty()
    }

    /// The plaintext lines appended (what `--dry-run` prints is only the closers).
    pub fn plain_len(&self) -> u64 {
        self.plain_len
    }

    /// The bytes appended after the committed prefix.
    pub fn append(&self) -> &[u8] {
        &self.append
    }

    /// Length of the repaired log.
    pub fn repaired_len(&self) -> u64 {
        self.keep + self.append.len() as u64
    }

    /// The call ids answered with a synthetic `tool/result`, with whether each had started.
    pub fn answered_calls(&self) -> impl Iterator<Item = (&str, bool)> {
        self.closers.iter().filter_map(|c| match &c.kind {
            CloserKind::ToolResult { call_id, started } => Some((call_id.as_str(), *started)),
            _ => None,
        })
    }
}

/// Decide the repair from a full scan of the log (not a `--at` replay). Refuses, rather than
/// guesses, when the committed part has any error (§14.6).
pub fn plan(scan: &Scan) -> Result<RepairPlan, Refusal> {
    match scan.status() {
        Status::Unsupported => return Err(Refusal::Unsupported),
        Status::Invalid | Status::Unreadable => return Err(Refusal::Invalid),
        Status::Valid => {}
    }
    let (Some(dialect), Some(state)) = (scan.dialect, &scan.state) else {
        return Err(Refusal::Invalid);
    };
    if scan.tally.errors > 0 {
        return Err(Refusal::Invalid);
    }
    let closers = state.closers.closers();
    let mut lines = Vec::with_capacity(closers.iter().map(|c| c.line.len() + 1).sum());
    for c in &closers {
        lines.extend_from_slice(c.line.as_bytes());
        lines.push(b'\n');
    }
    let plain_len = scan.committed_bytes + lines.len() as u64;
    let encoding = Encoding::of(scan);
    if let Some(z) = &scan.zstd {
        // §14.5: complete frames are kept whole; a torn final frame is cut at its start and
        // its committed lines are re-appended as a frame of their own.
        let (keep, recover) = match &z.torn {
            Some(t) => (
                t.start,
                Some((t.start, scan.committed_bytes.saturating_sub(t.plain_start))),
            ),
            None => (z.compressed_len, None),
        };
        let cut = (z.compressed_len > keep).then_some(Cut {
            start: keep,
            end: z.compressed_len,
            crash: scan.crash,
            torn: scan.torn,
            frame: z
                .torn
                .as_ref()
                .map(|t| (t.frame, scan.committed_bytes.saturating_sub(t.plain_start))),
        });
        let append = encoding.encode(&lines).map_err(|_| Refusal::Invalid)?;
        let recover = recover.filter(|&(_, len)| len > 0);
        return Ok(RepairPlan {
            version: dialect.version,
            keep,
            cut,
            closers,
            append,
            encoding,
            recovered: recover.is_none(),
            recover,
            plain_len,
        });
    }
    let cut = (scan.total_bytes > scan.committed_bytes).then_some(Cut {
        start: scan.committed_bytes,
        end: scan.total_bytes,
        crash: scan.crash,
        torn: scan.torn,
        frame: None,
    });
    Ok(RepairPlan {
        version: dialect.version,
        keep: scan.committed_bytes,
        cut,
        closers,
        append: lines,
        encoding,
        recover: None,
        recovered: true,
        plain_len,
    })
}

impl RepairPlan {
    /// zstd only: read the committed lines of the torn final frame from `log` (the file
    /// scanned) and put them, as one new frame, before the closers' frame (§14.5). A no-op
    /// for plain logs and zstd logs without recovered lines. Must run before writing.
    pub fn recover_from(&mut self, mut log: impl Read + Seek) -> io::Result<()> {
        let Some((start, len)) = self.recover.take() else {
            return Ok(());
        };
        log.seek(SeekFrom::Start(start))?;
        let (reader, _) = ZstdReader::new(BufReader::new(log))?;
        let mut lines = Vec::new();
        reader.take(len).read_to_end(&mut lines)?;
        if lines.len() as u64 != len || lines.last() != Some(&b'\n') {
            return Err(io::Error::other(
                "the recovered lines of the torn zstd frame could not be read back",
            ));
        }
        let mut append = self.encoding.encode(&lines)?;
        append.extend_from_slice(&self.append);
        self.append = append;
        self.recovered = true;
        Ok(())
    }
}

impl Planned for RepairPlan {
    fn edit(&self) -> Edit<'_> {
        Edit {
            keep: self.keep,
            append: &self.append,
            // Re-appended committed lines of a torn zstd frame: journaled, so a crash between
            // the cut and the append cannot leave them only in the sidecar.
            journal: self
                .cut
                .and_then(|c| c.frame)
                .is_some_and(|(_, recovered)| recovered > 0),
        }
    }

    fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Whether the scan of the repaired log ([`super::append::scan_edit`]) is what the repair
    /// promises: valid with no error, no open turn, no torn line and no crash tail, of the
    /// planned length.
    fn verified(&self, repaired: &Scan) -> bool {
        self.recovered
            && repaired.is_clean_write(self.repaired_len(), self.plain_len)
            && !repaired.open_turn()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::scan::ScanOptions;

    fn scan_text(text: &str) -> Scan {
        crate::log::scan::scan(
            text.as_bytes(),
            None,
            &ScanOptions::default(),
            &mut Vec::new(),
            &mut (),
        )
        .unwrap()
    }

    const V3: &str = r#"{"type":"session","version":3,"id":"s","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;
    const V4: &str = r#"{"type":"session","version":4,"id":"s","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;
    const V0: &str = r#"{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}"#;

    fn open_turn_log(header: &str) -> String {
        format!(
            "{header}\n{}\n{}\n",
            r#"{"type":"turn/start","seq":0,"time":10,"data":{"turn":1}}"#,
            r#"{"type":"step/start","seq":1,"time":11,"data":{"turn":1,"step":1}}"#,
        )
    }

    fn repaired(text: &str, plan: &RepairPlan) -> String {
        let mut s = text[..plan.keep as usize].to_owned();
        s.push_str(std::str::from_utf8(plan.append()).unwrap());
        s
    }

    #[test]
    fn a_healthy_log_plans_nothing() {
        for h in [V0, V3, V4] {
            let text = format!("{h}\n");
            let p = plan(&scan_text(&text)).unwrap();
            assert!(p.is_noop());
            assert_eq!(p.keep, text.len() as u64);
        }
    }

    #[test]
    fn torn_line_and_open_turn_are_cut_and_closed_in_every_version() {
        for h in [V0, V3, V4] {
            let log = open_turn_log(h);
            let text = format!("{log}{{\"type\":\"assis");
            let s = scan_text(&text);
            let p = plan(&s).unwrap();
            let cut = p.cut.unwrap();
            assert_eq!((cut.start, cut.len()), (log.len() as u64, 14));
            assert!(cut.torn.is_some() && cut.crash.is_none());
            let lines: Vec<_> = p.closers.iter().map(|c| c.line.as_str()).collect();
            assert_eq!(
                lines,
                [
                    r#"{"type":"step/end","seq":2,"time":11,"data":{"turn":1,"step":1}}"#,
                    r#"{"type":"turn/end","seq":3,"time":11,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#
                ]
            );
            let out = repaired(&text, &p);
            let v = verify(text.as_bytes(), &p, None, &ScanOptions::default()).unwrap();
            assert!(v.ok, "{h}: {:?}", v.findings);
            // Repairing the result changes nothing.
            assert!(plan(&scan_text(&out)).unwrap().is_noop());
        }
    }

    #[test]
    fn a_crash_tail_and_a_torn_line_are_cut_together() {
        let text = format!(
            "{V3}\n{}\n{}\nnot json\n{{\"type\":\"x",
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
            r#"{"type":"turn/end","seq":1,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        );
        let p = plan(&scan_text(&text)).unwrap();
        let cut = p.cut.unwrap();
        assert_eq!(cut.end, text.len() as u64);
        assert_eq!(&text[cut.start as usize..], "not json\n{\"type\":\"x");
        assert!(cut.crash.is_some() && cut.torn.is_some());
        assert!(p.closers.is_empty());
    }

    #[test]
    fn committed_corruption_and_unsupported_logs_are_refused() {
        let corrupt = format!(
            "{V3}\nnot json\n{}\n",
            r#"{"type":"turn/end","seq":1,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}"#
        );
        assert_eq!(plan(&scan_text(&corrupt)).unwrap_err(), Refusal::Invalid);
        let newer = "{\"type\":\"session\",\"version\":9}\n";
        assert_eq!(plan(&scan_text(newer)).unwrap_err(), Refusal::Unsupported);
        assert_eq!(plan(&scan_text("")).unwrap_err(), Refusal::Invalid);
    }

    #[test]
    fn verify_rejects_a_plan_that_would_not_close_the_turn() {
        let text = open_turn_log(V3);
        let mut p = plan(&scan_text(&text)).unwrap();
        p.append.clear();
        let v = verify(text.as_bytes(), &p, None, &ScanOptions::default()).unwrap();
        assert!(!v.ok);
    }
}
