//! Findings are data: a check produces them, a renderer prints them. Only conditions that
//! stop dshs from reading at all are `Err`.

use super::codes::{Code, Severity};
use super::dialect::Dialect;

/// Where in the file a finding points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    /// 1-based physical line.
    pub line: u64,
    /// Byte offset of the start of that line (in the plaintext).
    pub byte: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub code: Code,
    pub severity: Severity,
    pub pos: Pos,
    pub seq: Option<u64>,
    pub event_type: Option<String>,
    pub message: String,
}

impl Finding {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Where findings go: straight to the renderer, or held back while dshs does not yet know
/// whether the rows they concern are committed (see `scan`).
pub trait Sink {
    fn push(&mut self, finding: Finding);
}

impl<T: Sink + ?Sized> Sink for &mut T {
    fn push(&mut self, finding: Finding) {
        (**self).push(finding);
    }
}

impl Sink for Vec<Finding> {
    fn push(&mut self, finding: Finding) {
        Vec::push(self, finding);
    }
}

/// Builds findings for one event with the version-dependent severity filled in.
#[derive(Debug, Clone, Copy)]
pub struct Reporter<'t> {
    pub version: Option<u8>,
    pub pos: Pos,
    pub seq: Option<u64>,
    pub event_type: Option<&'t str>,
}

impl Reporter<'static> {
    /// A reporter for a line whose seq and type are not known or not wanted (the header, the
    /// checks that only ask which code a row breaks).
    #[inline]
    pub fn untyped(version: Option<u8>, pos: Pos) -> Self {
        Reporter {
            version,
            pos,
            seq: None,
            event_type: None,
        }
    }
}

impl Reporter<'_> {
    pub fn finding(&self, code: Code, message: impl Into<String>) -> Finding {
        Finding {
            code,
            severity: match self.version.and_then(Dialect::for_version) {
                Some(d) => d.severity(code),
                None => code.severity(),
            },
            pos: self.pos,
            seq: self.seq,
            event_type: self.event_type.map(str::to_owned),
            message: message.into(),
        }
    }
}

/// Keeps the first `limit` error findings and counts the rest (a refusal shows them);
/// warnings go nowhere.
#[derive(Debug)]
pub struct ErrorList {
    pub kept: Vec<Finding>,
    pub more: u64,
    limit: usize,
}

impl ErrorList {
    pub fn new(limit: usize) -> Self {
        ErrorList {
            kept: Vec::new(),
            more: 0,
            limit,
        }
    }

    /// Every error pushed, kept or not.
    pub fn total(&self) -> u64 {
        self.kept.len() as u64 + self.more
    }
}

impl Sink for ErrorList {
    fn push(&mut self, f: Finding) {
        if !f.is_error() {
            return;
        }
        if self.kept.len() < self.limit {
            self.kept.push(f);
        } else {
            self.more += 1;
        }
    }
}

/// Keeps the first error finding (for a note on stderr); counts are in the scan's tally.
#[derive(Debug, Default)]
pub struct FirstError(pub Option<Finding>);

impl Sink for FirstError {
    fn push(&mut self, f: Finding) {
        if self.0.is_none() && f.is_error() {
            self.0 = Some(f);
        }
    }
}

/// Findings that are only counted (in the scan's tally): nothing is kept.
#[derive(Debug, Default)]
pub struct Discard;

impl Sink for Discard {
    fn push(&mut self, _: Finding) {}
}
