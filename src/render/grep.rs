//! `dshs grep` output: ripgrep-like lines (`path:line: seq N turn T type role: text`, the
//! matches highlighted, everything from the log escaped), per-log counts or names, or JSON
//! Lines (`match` / `context` / `count` records, then one `summary`).

use std::io::{self, Write};

use owo_colors::Style;
use serde::Serialize;

use dshs::log::grep::{Hit, Mark, Matches, PartKind, Totals};
use regex::Regex;

use super::escape;
use super::human::Painter;
use crate::cli::ReportFormat;

/// What is printed per log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Each matching line (with context lines when asked for).
    Lines { context: bool },
    /// `path:count` for each log with a match.
    Count,
    /// The path of each log with a match.
    Files,
}

/// The counts of a whole run (the JSON summary).
#[derive(Debug, Default, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Logs searched (a raw pass at least; `--session` leaves others out).
    pub logs: u64,
    /// Logs folded by the full pass (those with a line that could match).
    pub parsed: u64,
    pub logs_with_matches: u64,
    /// Matching lines of text.
    #[serde(rename = "matches")]
    pub lines: u64,
    pub matched_events: u64,
    /// Logs that do not load as DSH would load them (searched as far as they could be read).
    pub not_valid: u64,
    /// Paths or logs that could not be read.
    pub errors: u64,
}

impl Summary {
    pub fn add(&mut self, t: &Totals) {
        if t.lines > 0 {
            self.logs_with_matches += 1;
        }
        self.lines += t.lines;
        self.matched_events += t.events;
    }
}

pub struct Printer<'o> {
    out: &'o mut dyn Write,
    painter: Painter,
    json: bool,
    mode: Mode,
    /// Something was printed (context groups are separated by `--`).
    printed: bool,
    /// The pattern: a whole line's matches (JSON) are found again as it is printed.
    regex: Regex,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HitRecord<'a> {
    #[serde(rename = "type")]
    record: &'static str,
    file: &'a str,
    line: u64,
    byte: u64,
    seq: u64,
    time: i64,
    turn: Option<i64>,
    event_type: &'a str,
    role: Option<&'static str>,
    part: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<&'a str>,
    text_line: u32,
    shadowed: bool,
    surface: Option<&'static str>,
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    submatches: Option<Submatches<'a>>,
}

/// A line's matches, written as they are found (a line may hold millions).
struct Submatches<'a> {
    regex: &'a Regex,
    line: &'a str,
}

impl Serialize for Submatches<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.regex.find_iter(self.line).map(|m| Submatch {
            start: m.start(),
            end: m.end(),
        }))
    }
}

#[derive(Serialize)]
struct Submatch {
    start: usize,
    end: usize,
}

#[derive(Serialize)]
struct CountRecord<'a> {
    #[serde(rename = "type")]
    record: &'static str,
    file: &'a str,
    matches: u64,
    #[serde(rename = "matchedEvents")]
    matched_events: u64,
}

#[derive(Serialize)]
struct SummaryRecord<'a> {
    #[serde(rename = "type")]
    record: &'static str,
    #[serde(flatten)]
    summary: &'a Summary,
}

/// What a part is, for a person (`None`: message text).
fn part_label(h: &Hit) -> Option<String> {
    let label = match h.kind {
        PartKind::Text => return None,
        PartKind::Reasoning => "reasoning".to_owned(),
        PartKind::ToolName => "tool name".to_owned(),
        PartKind::Arguments => {
            let mut s = "arguments".to_owned();
            for extra in [h.tool.as_deref(), h.key.as_deref()].into_iter().flatten() {
                s.push(' ');
                s.push_str(&escape(extra));
            }
            s
        }
        PartKind::Summary => "summary".to_owned(),
        PartKind::SystemPrompt => "system prompt".to_owned(),
        PartKind::Title => "title".to_owned(),
        PartKind::Todo => "todo".to_owned(),
    };
    Some(label)
}

impl<'o> Printer<'o> {
    pub fn new(
        out: &'o mut dyn Write,
        color: bool,
        format: ReportFormat,
        mode: Mode,
        regex: &Regex,
    ) -> Self {
        let json = format == ReportFormat::Json;
        Printer {
            out,
            painter: Painter {
                color: color && !json,
            },
            json,
            mode,
            printed: false,
            regex: regex.clone(),
        }
    }

    /// Everything found in one log, printed as it is read out; its counts.
    pub fn log(&mut self, name: &str, matches: Matches) -> io::Result<Totals> {
        if let Some(totals) = matches.counted() {
            self.counts(name, &totals)?;
            return Ok(totals);
        }
        let context = matches!(self.mode, Mode::Lines { context: true });
        let mut last: Option<u64> = None;
        matches.for_each(|h| {
            if context && !self.json && self.printed && last.is_none_or(|l| h.event_index > l + 1) {
                writeln!(self.out, "{}", self.painter.dim("--"))?;
            }
            last = Some(h.event_index);
            self.hit(name, h)?;
            self.printed = true;
            Ok(())
        })
    }

    /// A log's counts (`-c`, `-l`).
    fn counts(&mut self, name: &str, totals: &Totals) -> io::Result<()> {
        match self.mode {
            Mode::Files | Mode::Count if totals.lines > 0 => {
                if self.json {
                    let record = CountRecord {
                        record: "count",
                        file: name,
                        matches: totals.lines,
                        matched_events: totals.events,
                    };
                    serde_json::to_writer(&mut *self.out, &record)?;
                    writeln!(self.out)
                } else if self.mode == Mode::Files {
                    writeln!(
                        self.out,
                        "{}",
                        self.painter.paint(&escape(name), path_style())
                    )
                } else {
                    writeln!(
                        self.out,
                        "{}:{}",
                        self.painter.paint(&escape(name), path_style()),
                        totals.lines
                    )
                }
            }
            Mode::Files | Mode::Count | Mode::Lines { .. } => Ok(()),
        }
    }

    fn hit(&mut self, name: &str, h: &Hit) -> io::Result<()> {
        if self.json {
            let record = HitRecord {
                record: if h.is_match { "match" } else { "context" },
                file: name,
                line: h.pos.line,
                byte: h.pos.byte,
                seq: h.seq,
                time: h.time,
                turn: h.turn,
                event_type: &h.event_type,
                role: h.role.map(|r| r.as_str()),
                part: h.kind.as_str(),
                tool: h.tool.as_deref(),
                key: h.key.as_deref(),
                text_line: h.text_line,
                shadowed: h.mark == Mark::Shadowed,
                surface: h.mark.as_str(),
                text: &h.text,
                submatches: h.is_match.then_some(Submatches {
                    regex: &self.regex,
                    line: &h.text,
                }),
            };
            serde_json::to_writer(&mut *self.out, &record)?;
            return writeln!(self.out);
        }
        let p = &self.painter;
        let sep = if h.is_match { ':' } else { '-' };
        let mut meta = format!(
            "seq {} turn {} {} {}",
            h.seq,
            h.turn.map_or_else(|| "-".to_owned(), |t| t.to_string()),
            escape(&h.event_type),
            h.role.map_or("-", |r| r.as_str())
        );
        if let Some(label) = part_label(h) {
            meta.push_str(&format!(" [{label}]"));
        }
        let mark = match h.mark {
            Mark::Shadowed => Some(("[shadowed]", Style::new().dimmed())),
            Mark::Rejected => Some(("[rejected]", Style::new().red())),
            Mark::CrashTail => Some(("[crash tail]", Style::new().yellow())),
            Mark::Visible | Mark::LogOnly => None,
        };
        let mark = mark.map_or_else(String::new, |(m, s)| format!(" {}", p.paint(m, s)));
        writeln!(
            self.out,
            "{}{sep}{}{sep} {meta}{mark}{sep} {}",
            p.paint(&escape(name), path_style()),
            p.paint(&h.pos.line.to_string(), Style::new().green()),
            self.text(h)
        )
    }

    /// The line, escaped, its matches highlighted, `…` where it was cut.
    fn text(&self, h: &Hit) -> String {
        let p = &self.painter;
        let mut s = String::new();
        if h.clipped.0 {
            s.push_str(&p.dim("…"));
        }
        let mut at = 0;
        for r in &h.submatches {
            let (start, end) = (r.start.max(at), r.end.max(at));
            if let (Some(before), Some(m)) = (h.text.get(at..start), h.text.get(start..end)) {
                s.push_str(&escape(before));
                if !m.is_empty() {
                    s.push_str(&p.paint(&escape(m), Style::new().red().bold()));
                }
                at = end;
            }
        }
        s.push_str(&escape(h.text.get(at..).unwrap_or_default()));
        if h.clipped.1 {
            s.push_str(&p.dim("…"));
        }
        s
    }

    /// After the last log: the JSON summary.
    pub fn finish(&mut self, summary: &Summary) -> io::Result<()> {
        if self.json {
            serde_json::to_writer(
                &mut *self.out,
                &SummaryRecord {
                    record: "summary",
                    summary,
                },
            )?;
            writeln!(self.out)?;
        }
        Ok(())
    }
}

fn path_style() -> Style {
    Style::new().magenta()
}
