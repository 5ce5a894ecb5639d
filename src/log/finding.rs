//! Findings are data: a check produces them, a renderer prints them. Only conditions that
//! stop dshs from reading at all are `Err`.

use super::codes::{Code, Severity};

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

impl Reporter<'_> {
    pub fn finding(&self, code: Code, message: impl Into<String>) -> Finding {
        Finding {
            code,
            severity: code.severity(self.version),
            pos: self.pos,
            seq: self.seq,
            event_type: self.event_type.map(str::to_owned),
            message: message.into(),
        }
    }
}
