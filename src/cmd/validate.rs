//! `dshs validate`: every finding of every file, then one summary per file.

use std::io::{self, Write};

use anyhow::Result;

use dshs::log::input::{Framing, InputError};
use dshs::log::scan::{Scan, Status};
use dshs::log::{Code, Finding, Pos, Severity, Sink};

use crate::cli::{ReportFormat, ValidateArgs};
use crate::exit::Outcome;
use crate::render::human::{self, Painter, SummaryLine};
use crate::render::json::{FindingRecord, SummaryRecord};

use super::Env;

/// Renders the findings of one log in line order, up to `--max-findings`.
///
/// Findings are held until the log is read, then printed sorted by (line, byte), stably: the
/// findings of one line keep the order the checks found them. The checks that run at the end
/// of the log (an open final turn, the tally of each legacy shape, seed counts) point back at
/// earlier lines, so printing findings as they arrived showed lines 15, 17, 2, 3. Memory: the
/// findings of one log; with `--max-findings N`, about 2N.
struct Report<'o> {
    out: &'o mut dyn Write,
    file: String,
    format: ReportFormat,
    painter: Painter,
    quiet: bool,
    limit: Option<usize>,
    /// A zstd log: names the frame of each finding.
    framing: Option<Framing>,
    held: Vec<Finding>,
    shown: usize,
    hidden: usize,
    error: Option<io::Error>,
}

impl Sink for Report<'_> {
    fn push(&mut self, f: Finding) {
        self.held.push(f);
        if let Some(n) = self.limit
            && self.held.len() >= n.max(1) * 2
        {
            self.keep_first(n);
        }
    }
}

impl Report<'_> {
    /// Sort the held findings into line order and keep the first `n`.
    fn keep_first(&mut self, n: usize) {
        self.held.sort_by_key(|f| (f.pos.line, f.pos.byte));
        if self.held.len() > n {
            self.hidden += self.held.len() - n;
            self.held.truncate(n);
        }
    }

    /// Print the held findings, in line order.
    fn flush(&mut self) {
        self.keep_first(self.limit.unwrap_or(usize::MAX));
        for f in std::mem::take(&mut self.held) {
            if self.error.is_none() {
                self.write(&f);
            }
        }
    }

    fn write(&mut self, f: &Finding) {
        self.shown += 1;
        let frame = self.framing.as_ref().and_then(|z| z.frame_of(f.pos.byte));
        let written = match self.format {
            ReportFormat::Json => {
                let record = FindingRecord {
                    frame,
                    ..FindingRecord::new(&self.file, f)
                };
                serde_json::to_writer(&mut *self.out, &record)
                    .map_err(io::Error::from)
                    .and_then(|()| self.out.write_all(b"\n"))
            }
            ReportFormat::Human if self.quiet => Ok(()),
            ReportFormat::Human => writeln!(
                self.out,
                "{}",
                human::finding_in_frame(&self.painter, &self.file, f, frame)
            ),
        };
        if let Err(e) = written {
            self.error = Some(e);
        }
    }
}

/// What this command's output is like (for the progress bar).
pub fn output(args: &ValidateArgs) -> super::Output {
    super::Output {
        json: args.format == crate::cli::ReportFormat::Json,
        writes_while_reading: true,
    }
}

pub fn run(args: &ValidateArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    let env = &env.for_output(output(args));
    let painter = Painter {
        color: env.color_out && args.format == ReportFormat::Human,
    };
    let mut worst = Outcome::Success;
    let files = super::expand_paths(&args.files);
    let jobs = super::jobs(args.jobs);
    if jobs <= 1 || files.len() <= 1 {
        // One at a time, findings streamed as they are found.
        for file in &files {
            let outcome = validate_one(file, args, env, painter, out)?;
            worst = worst.worst(outcome);
        }
        return Ok(worst);
    }
    // Several logs on several threads: each report is buffered and printed in order.
    let env = &env.for_parallel_logs();
    super::in_parallel(
        &files,
        jobs,
        |file| {
            let mut buf = Vec::new();
            let outcome = validate_one(file, args, env, painter, &mut buf);
            (buf, outcome)
        },
        |(buf, outcome)| {
            out.write_all(&buf)?;
            worst = worst.worst(outcome?);
            Ok(())
        },
    )?;
    Ok(worst)
}

fn validate_one(
    file: &str,
    args: &ValidateArgs,
    env: &Env,
    painter: Painter,
    out: &mut dyn Write,
) -> Result<Outcome> {
    let opened = match super::open(file) {
        Ok(o) => o,
        Err(e) => {
            let outcome = super::input_failure(&e);
            let status = if outcome == Outcome::Unsupported {
                Status::Unsupported
            } else {
                Status::Unreadable
            };
            let mut summary = empty_summary(file, status);
            if let InputError::NotRegular { .. } = e {
                // Found under a root or in a session directory: a finding, and on to the next.
                let mut report = report(None, out, file, args, env, painter);
                report.push(Finding {
                    code: Code::FileNotRegular,
                    severity: Severity::Error,
                    pos: Pos { line: 1, byte: 0 },
                    seq: None,
                    event_type: None,
                    message: e.to_string(),
                });
                report.flush();
                if let Some(e) = report.error.take() {
                    return Err(e.into());
                }
                summary.errors = 1;
            } else {
                crate::render::error_message(&e.to_string());
            }
            write_summary(out, args.format, painter, env.quiet, &summary)?;
            return Ok(outcome);
        }
    };
    let mut report = report(opened.framing.clone(), out, file, args, env, painter);
    let scanned = super::scan_source(opened, env, &env.scan_options(), &mut report, &mut ());
    report.flush();

    if let Some(e) = report.error.take() {
        return Err(e.into());
    }
    let (hidden, quiet) = (report.hidden, report.quiet);
    let scan = match scanned {
        Ok(s) => s,
        Err(e) => {
            crate::render::error_message(&format!("cannot read {file}: {e}"));
            write_summary(
                out,
                args.format,
                painter,
                env.quiet,
                &empty_summary(file, Status::Unreadable),
            )?;
            return Ok(Outcome::Failure);
        }
    };
    if hidden > 0 && args.format == ReportFormat::Human && !quiet {
        writeln!(
            out,
            "{}",
            painter.dim(&format!(
                "{}: … {hidden} more finding{} not shown (--max-findings {})",
                crate::render::escape(file),
                human::plural(hidden as u64),
                args.max_findings.unwrap_or_default()
            ))
        )?;
    }
    let summary = summary_of(file, &scan);
    write_summary(out, args.format, painter, env.quiet, &summary)?;
    Ok(match scan.status() {
        Status::Valid if args.deny_warnings && scan.tally.warnings > 0 => Outcome::Invalid,
        Status::Valid => Outcome::Success,
        Status::Invalid => Outcome::Invalid,
        Status::Unsupported => Outcome::Unsupported,
        Status::Unreadable => Outcome::Failure,
    })
}

fn report<'o>(
    framing: Option<Framing>,
    out: &'o mut dyn Write,
    file: &str,
    args: &ValidateArgs,
    env: &Env,
    painter: Painter,
) -> Report<'o> {
    Report {
        framing,
        out,
        file: file.to_owned(),
        format: args.format,
        painter,
        quiet: env.quiet,
        limit: args.max_findings,
        held: Vec::new(),
        shown: 0,
        hidden: 0,
        error: None,
    }
}

fn summary_of<'a>(file: &'a str, scan: &Scan) -> SummaryLine<'a> {
    SummaryLine {
        file,
        version: scan.version,
        events: scan.events(),
        surface_nodes: scan.surface_nodes(),
        status: scan.status(),
        errors: scan.tally.errors,
        warnings: scan.tally.warnings,
        open_turn: scan.open_turn(),
        torn_tail: scan.torn.is_some(),
    }
}

fn empty_summary(file: &str, status: Status) -> SummaryLine<'_> {
    SummaryLine {
        file,
        version: None,
        events: 0,
        surface_nodes: 0,
        status,
        errors: 0,
        warnings: 0,
        open_turn: false,
        torn_tail: false,
    }
}

fn write_summary(
    out: &mut dyn Write,
    format: ReportFormat,
    painter: Painter,
    quiet: bool,
    s: &SummaryLine<'_>,
) -> Result<()> {
    match format {
        ReportFormat::Json => {
            let record = SummaryRecord {
                kind: "summary",
                file: s.file,
                status: s.status.as_str(),
                version: s.version,
                events: s.events,
                errors: s.errors,
                warnings: s.warnings,
                surface_nodes: s.surface_nodes,
                open_turn: s.open_turn,
                torn_tail: s.torn_tail,
            };
            serde_json::to_writer(&mut *out, &record)?;
            out.write_all(b"\n")?;
        }
        ReportFormat::Human if quiet => {}
        ReportFormat::Human => writeln!(out, "{}", human::summary(&painter, s))?,
    }
    Ok(())
}
