//! Human-readable lines: findings as `file:line: severity[code] seq N: message`, one summary
//! line per file. Everything from the log is escaped; colour only when asked for.

use owo_colors::{OwoColorize, Style};
use serde::Serialize;

use dshs::log::scan::Status;
use dshs::log::{Finding, Severity};

use super::escape;

#[derive(Debug, Clone, Copy)]
pub struct Painter {
    pub color: bool,
}

impl Painter {
    pub fn paint(&self, text: &str, style: Style) -> String {
        if self.color {
            text.style(style).to_string()
        } else {
            text.to_owned()
        }
    }

    pub fn severity(&self, s: Severity) -> String {
        match s {
            Severity::Error => self.paint("error", Style::new().red().bold()),
            Severity::Warning => self.paint("warning", Style::new().yellow().bold()),
        }
    }

    pub fn status(&self, s: Status) -> String {
        let style = match s {
            Status::Valid => Style::new().green().bold(),
            Status::Invalid => Style::new().red().bold(),
            Status::Unsupported => Style::new().magenta().bold(),
            Status::Unreadable => Style::new().red(),
        };
        self.paint(s.as_str(), style)
    }

    pub fn dim(&self, text: &str) -> String {
        self.paint(text, Style::new().dimmed())
    }

    pub fn bold(&self, text: &str) -> String {
        self.paint(text, Style::new().bold())
    }
}

/// `file:line: severity[code] seq N: message`
pub fn finding(p: &Painter, file: &str, f: &Finding) -> String {
    finding_in_frame(p, file, f, None)
}

/// [`finding`] for a zstd log: `file:line (frame N): …`.
pub fn finding_in_frame(p: &Painter, file: &str, f: &Finding, frame: Option<u64>) -> String {
    let seq = f.seq.map_or_else(String::new, |s| format!(" seq {s}"));
    let frame = frame.map_or_else(String::new, |n| format!(" (frame {n})"));
    // Line 0: a finding of a SQLite store's storage layer, which points at rows by seq only.
    let line = if f.pos.line == 0 {
        String::new()
    } else {
        format!(":{}", f.pos.line)
    };
    format!(
        "{}{line}{frame}: {}[{}]{}: {}",
        escape(file),
        p.severity(f.severity),
        p.bold(f.code.as_str()),
        seq,
        escape(&f.message)
    )
}

/// The facts of one file's summary line; serialized, the members of CLI.md's `summary`
/// record, in its order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SummaryLine<'a> {
    pub file: &'a str,
    #[serde(serialize_with = "status_name")]
    pub status: Status,
    pub version: Option<i64>,
    pub events: u64,
    pub errors: u64,
    pub warnings: u64,
    pub surface_nodes: usize,
    pub open_turn: bool,
    pub torn_tail: bool,
}

fn status_name<S: serde::Serializer>(status: &Status, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(status.as_str())
}

pub fn summary(p: &Painter, s: &SummaryLine<'_>) -> String {
    let version = s
        .version
        .map_or_else(|| "version ?".to_owned(), |v| format!("v{v}"));
    let mut extra = String::new();
    if s.open_turn {
        extra.push_str(", open turn");
    }
    if s.torn_tail {
        extra.push_str(", torn tail");
    }
    format!(
        "{}: {version}, {} event{}, {} surface node{}{extra}: {} ({} error{}, {} warning{})",
        escape(s.file),
        s.events,
        plural(s.events),
        s.surface_nodes,
        plural(s.surface_nodes as u64),
        p.status(s.status),
        s.errors,
        plural(s.errors),
        s.warnings,
        plural(s.warnings)
    )
}

pub fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}
