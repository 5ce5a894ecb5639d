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

mod live;

/// Renders the findings of one log in line order, up to `--max-findings`.
///
/// Findings are held until the log is read, then printed sorted by (line, byte), stably: the
/// findings of one line keep the order the checks found them. The checks that run at the end
/// of the log (an open final turn, the tally of each legacy shape, seed counts) point back at
/// earlier lines, so printing findings as they arrived showed lines 15, 17, 2, 3. Memory is
/// bounded whatever the log holds: at most [`HELD`] findings wait (with `--max-findings N`,
/// about 2N); a log with more is printed in sorted runs of that many.
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

/// The most findings held back for sorting: a log of junk lines has one per line.
const HELD: usize = 4096;

impl Sink for Report<'_> {
    fn push(&mut self, f: Finding) {
        if self.quiet || self.limit.is_some_and(|n| self.shown >= n) {
            // Nothing of it is printed: counted, not held.
            self.hidden += usize::from(!self.quiet);
            return;
        }
        self.held.push(f);
        match self.limit {
            Some(n) if self.held.len() >= n.max(1) * 2 => self.keep_first(n - self.shown),
            None if self.held.len() >= HELD => self.flush(),
            _ => {}
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

    /// Print what is held; the first write error, if any.
    fn finish(&mut self) -> Option<io::Error> {
        self.flush();
        self.error.take()
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
    super::Output::report(args.format, true)
}

pub fn run(args: &ValidateArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    let env = &env.for_output(output(args));
    let painter = Painter {
        color: env.color_out && args.format == ReportFormat::Human,
    };
    if args.follow.follow {
        return live::run(args, env, painter, out);
    }
    let mut worst = Outcome::Success;
    let files = super::expand_paths_listed(&args.files);
    let jobs = super::jobs(args.jobs);
    if jobs <= 1 || files.len() <= 1 {
        // One at a time, findings streamed as they are found.
        for (file, listed) in &files {
            let outcome = validate_one(file, *listed, args, env, painter, out)?;
            worst = worst.worst(outcome);
        }
        return Ok(worst);
    }
    // Several logs on several threads: each report is buffered and printed in order.
    let env = &env.for_parallel_logs();
    super::in_parallel(
        &files,
        jobs,
        |(file, listed)| {
            let mut buf = Vec::new();
            let outcome = validate_one(file, *listed, args, env, painter, &mut buf);
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

/// `listed`: the log was found below a storage root (it may be gone by now: a note).
fn validate_one(
    file: &str,
    listed: bool,
    args: &ValidateArgs,
    env: &Env,
    painter: Painter,
    out: &mut dyn Write,
) -> Result<Outcome> {
    if let super::store::Named::Store { path, shown, id } = super::store::name(file, None)? {
        let ids = match id {
            Some(id) => vec![id],
            None => args.sessions.clone(),
        };
        return validate_store(&path, &shown, &ids, args, env, painter, out);
    }
    let opened = if listed {
        super::open_listed(file, || super::open(file)).transpose()
    } else {
        Some(super::open(file))
    };
    let Some(opened) = opened else {
        return Ok(Outcome::Success);
    };
    let opened = match opened {
        Ok(mut o) => match super::store::refuse_streamed_database(&mut o) {
            Ok(()) => o,
            Err(e) => {
                write_unreadable(&e.to_string(), file, args, env, painter, out)?;
                return Ok(Outcome::Failure);
            }
        },
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
                if let Some(e) = report.finish() {
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

    if let Some(e) = report.finish() {
        return Err(e.into());
    }
    let (hidden, quiet) = (report.hidden, report.quiet);
    let scan = match scanned {
        Ok(s) => s,
        Err(e) => {
            let message = format!("cannot read {file}: {e}");
            write_unreadable(&message, file, args, env, painter, out)?;
            return Ok(Outcome::of_read(&e));
        }
    };
    write_hidden_note(hidden, quiet, file, args, painter, out)?;
    let summary = summary_of(file, &scan);
    write_summary(out, args.format, painter, env.quiet, &summary)?;
    Ok(outcome(args, scan.status(), scan.tally.warnings))
}

/// The exit of a log with this status and this many warnings (`--deny-warnings` makes any
/// warning fail it).
fn outcome(args: &ValidateArgs, status: Status, warnings: u64) -> Outcome {
    match status {
        Status::Valid if args.deny_warnings && warnings > 0 => Outcome::Invalid,
        other => super::outcome_of_status(other),
    }
}

/// Report a storage layer's findings; how many are errors and how many warnings.
fn push_counted(report: &mut dyn Sink, findings: &[Finding]) -> (u64, u64) {
    let errors = findings.iter().filter(|f| f.is_error()).count() as u64;
    for f in findings {
        report.push(f.clone());
    }
    (errors, findings.len() as u64 - errors)
}

/// A SQLite session store (SQLITE.md S9): its identity, then each session (`ids`, or every
/// one in rowid order) as one log named `store.db#ID` — the pass over its logical log, with
/// the storage layer's findings (row seqs, no lines) merged into the report and summary.
fn validate_store(
    path: &std::path::Path,
    shown: &str,
    ids: &[String],
    args: &ValidateArgs,
    env: &Env,
    painter: Painter,
    out: &mut dyn Write,
) -> Result<Outcome> {
    use dshs::log::sqlite::{self, StoreError};
    let mut store = match super::store::open_store(path) {
        Ok(s) => s,
        Err(e) => {
            // Refused (another schema, a foreign application id, a search index): the
            // refusal is the store's one finding.
            let outcome = super::store::outcome_of_class(e.class());
            let status = status_of(outcome);
            let mut summary = empty_summary(shown, status);
            match (&e, e.code()) {
                (StoreError::Refused { message, .. }, Some(code)) => {
                    let mut report = report(None, out, shown, args, env, painter);
                    report.push(store_finding(code, message.clone()));
                    if let Some(e) = report.finish() {
                        return Err(e.into());
                    }
                    summary.errors = 1;
                }
                _ => crate::render::error_message(&e.to_string()),
            }
            write_summary(out, args.format, painter, env.quiet, &summary)?;
            return Ok(outcome);
        }
    };
    let mut worst = Outcome::Success;
    if !store.findings().is_empty() {
        // An empty database: no session, one warning.
        let mut report = report(None, out, shown, args, env, painter);
        for f in store.findings() {
            report.push(f.clone());
        }
        if let Some(e) = report.finish() {
            return Err(e.into());
        }
        let mut summary = empty_summary(shown, Status::Valid);
        summary.warnings = store.findings().len() as u64;
        write_summary(out, args.format, painter, env.quiet, &summary)?;
        if args.deny_warnings {
            worst = Outcome::Invalid;
        }
    }
    let ids = if ids.is_empty() {
        match store.sessions() {
            Ok(s) => s.into_iter().map(|i| i.row.id).collect(),
            Err(e) => {
                write_unreadable(&e.to_string(), shown, args, env, painter, out)?;
                return Ok(Outcome::Failure);
            }
        }
    } else {
        ids.to_vec()
    };
    for id in &ids {
        let name = super::store::session_name(shown, id);
        let mut r = match store.read(id) {
            Ok(r) => r,
            Err(e) => {
                crate::render::error_message(&e.to_string());
                let status = status_of(super::store::outcome_of_class(e.class()));
                write_summary(
                    out,
                    args.format,
                    painter,
                    env.quiet,
                    &empty_summary(&name, status),
                )?;
                worst = worst.worst(super::store::outcome_of_class(e.class()));
                continue;
            }
        };
        let mut report = report(None, out, &name, args, env, painter);
        // First the fast way, then the exact way unless it stands (`store::fast_scan`).
        let (opts, fast) = super::store::prepare_fast(&mut r, env);
        // The storage-class pass, and isSeeded for format 2+ (S11.5), before any line.
        let mut refused = match r.derive_is_seeded() {
            Ok(_) => r.findings().iter().any(Finding::is_error),
            Err(e) => return Err(super::store::store_failure(&e)),
        };
        let row_version = r.session_row().version;
        let mut scanned = None;
        if fast && !refused {
            match super::store::fast_scan(&mut r, &opts, &mut report, &mut ()) {
                Ok(Some(scan)) => scanned = Some(Ok(scan)),
                Ok(None) => {
                    refused = r.findings().iter().any(Finding::is_error);
                }
                Err(e) => return Err(super::store::store_failure(&e)),
            }
        }
        if scanned.is_none() && !refused {
            scanned = Some(dshs::log::scan::scan(
                &mut r,
                None,
                &opts,
                &mut report,
                &mut (),
            ));
        }
        let end = r.finish();
        if let Some(e) = report.finish() {
            return Err(e.into());
        }
        let scan = match scanned.transpose() {
            Ok(s) => s,
            Err(e) => {
                let message = format!("cannot read {name}: {e}");
                write_unreadable(&message, &name, args, env, painter, out)?;
                worst = worst.worst(Outcome::of_read(&e));
                continue;
            }
        };
        let end = end.map_err(|e| super::store::store_failure(&e))?;
        let (errors, warnings) = push_counted(&mut report, &end.findings);
        if let Some(e) = report.finish() {
            return Err(e.into());
        }
        let (hidden, quiet) = (report.hidden, report.quiet);
        write_hidden_note(hidden, quiet, &name, args, painter, out)?;
        let mut summary = match &scan {
            Some(scan) => summary_of(&name, scan),
            None => SummaryLine {
                version: row_version,
                ..empty_summary(&name, Status::Valid)
            },
        };
        let logical = scan.as_ref().map_or(Status::Valid, Scan::status);
        summary.status = sqlite::combined_status(logical, &end.findings);
        summary.errors += errors;
        summary.warnings += warnings;
        summary.torn_tail |= end.snapshot.torn.is_some();
        write_summary(out, args.format, painter, env.quiet, &summary)?;
        worst = worst.worst(outcome(args, summary.status, summary.warnings));
    }
    Ok(worst)
}

/// A store-level finding (the identity checks): no line, no seq.
fn store_finding(code: Code, message: String) -> Finding {
    Finding {
        code,
        severity: code.severity(),
        pos: Pos::default(),
        seq: None,
        event_type: None,
        message,
    }
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

/// The note after a report that --max-findings cut short (human format only).
fn write_hidden_note(
    hidden: usize,
    quiet: bool,
    file: &str,
    args: &ValidateArgs,
    painter: Painter,
    out: &mut dyn Write,
) -> Result<()> {
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
    Ok(())
}

/// The status a summary shows for a log refused with `outcome` before any scan.
fn status_of(outcome: Outcome) -> Status {
    match outcome {
        Outcome::Unsupported => Status::Unsupported,
        Outcome::Invalid => Status::Invalid,
        _ => Status::Unreadable,
    }
}

/// Says why `file` could not be read, then writes its summary: unreadable, nothing counted.
fn write_unreadable(
    message: &str,
    file: &str,
    args: &ValidateArgs,
    env: &Env,
    painter: Painter,
    out: &mut dyn Write,
) -> Result<()> {
    crate::render::error_message(message);
    let summary = empty_summary(file, Status::Unreadable);
    write_summary(out, args.format, painter, env.quiet, &summary)
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
                line: s,
            };
            serde_json::to_writer(&mut *out, &record)?;
            out.write_all(b"\n")?;
        }
        ReportFormat::Human if quiet => {}
        ReportFormat::Human => writeln!(out, "{}", human::summary(&painter, s))?,
    }
    Ok(())
}
