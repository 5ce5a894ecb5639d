//! JSON shapes of the CLI contract (CLI.md). Built with serde so escaping is always right.

use serde::Serialize;

use dshs::log::Finding;

use super::human::SummaryLine;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FindingRecord<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub file: &'a str,
    pub code: &'static str,
    pub severity: &'static str,
    /// Null for a finding of a SQLite store's storage layer (it points at a row by `seq`).
    pub line: Option<u64>,
    pub byte: Option<u64>,
    pub seq: Option<u64>,
    pub event_type: Option<&'a str>,
    pub message: &'a str,
    /// zstd logs only: the 1-based frame holding the line (an addition to CLI.md's shape).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame: Option<u64>,
}

impl<'a> FindingRecord<'a> {
    pub fn new(file: &'a str, f: &'a Finding) -> Self {
        FindingRecord {
            kind: "finding",
            file,
            code: f.code.as_str(),
            severity: f.severity.as_str(),
            line: (f.pos.line != 0).then_some(f.pos.line),
            byte: (f.pos.line != 0).then_some(f.pos.byte),
            seq: f.seq,
            event_type: f.event_type.as_deref(),
            message: &f.message,
            frame: None,
        }
    }
}

/// A `summary` record (CLI.md): the type, then the summary's facts.
#[derive(Serialize)]
pub struct SummaryRecord<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(flatten)]
    pub line: &'a SummaryLine<'a>,
}
