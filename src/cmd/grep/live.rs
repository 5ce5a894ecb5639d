//! `dshs grep --follow PATTERN PATH`: `tail -f | grep` on the decoded text — each match
//! printed (and flushed) when the event that holds it is folded.

use std::io::Write;

use anyhow::{Result, anyhow};

use dshs::log::finding::Discard;
use dshs::log::grep::{Candidates, Query, Search};
use dshs::log::scan::{EventInfo, FoldState, Observer, Unusable};

use crate::cli::{GrepArgs, ReportFormat};
use crate::cmd::follow::{self as following, Session};
use crate::exit::{Failure, Outcome};
use crate::render::grep::{Mode, Printer};

use super::super::Env;

/// What needs the end of the log, which a followed log does not have.
fn refused(args: &GrepArgs) -> Option<&'static str> {
    if args.count {
        Some("--count")
    } else if args.files_with_matches {
        Some("--files-with-matches")
    } else if args.surface {
        Some("--surface")
    } else if args.at.is_some() {
        Some("--at")
    } else if args.context.is_some_and(|c| c > 0) {
        Some("--context")
    } else if !args.session.is_empty() {
        Some("--session")
    } else {
        None
    }
}

/// Searches each event as it is folded and hands its matches over, printed.
struct Live<'q> {
    search: Search<'q>,
    regex: &'q regex::Regex,
    name: String,
    color: bool,
    format: ReportFormat,
    to: crossbeam_channel::Sender<Vec<u8>>,
    /// Rows held back after a bad row are being dropped as a crash tail.
    crash: bool,
    matches: u64,
    gone: bool,
}

impl Live<'_> {
    fn print(&mut self, state: &FoldState, speculative: bool) {
        if self.gone {
            return;
        }
        let Some(found) = self.search.take_live(state, self.crash && speculative) else {
            return;
        };
        let mut buf = Vec::new();
        let printed = Printer::new(
            &mut buf,
            self.color,
            self.format,
            Mode::Lines { context: false },
            self.regex,
        )
        .log(&self.name, found);
        match printed {
            Ok(totals) => self.matches += totals.lines,
            Err(_) => self.gone = true,
        }
        if !buf.is_empty() && self.to.send(buf).is_err() {
            self.gone = true;
        }
    }
}

impl Observer for Live<'_> {
    fn event(&mut self, info: &EventInfo<'_, '_>, state: &FoldState) {
        self.search.event(info, state);
        self.print(state, info.speculative);
    }
    fn wants_each_event(&self) -> bool {
        self.search.wants_each_event()
    }
    fn reads_stream_records(&self) -> bool {
        self.search.reads_stream_records()
    }
    fn unusable(&mut self, row: &Unusable<'_>) {
        self.search.unusable(row);
    }
    fn speculation_started(&mut self) {
        self.search.speculation_started();
    }
    fn speculation_ended(&mut self, committed: bool) {
        self.search.speculation_ended(committed);
        self.crash = false;
    }
    fn tail_decided(&mut self, committed: bool) {
        self.crash = !committed;
    }
}

pub(super) fn run(
    args: &GrepArgs,
    query: &Query,
    env: &Env,
    out: &mut dyn Write,
) -> Result<Outcome> {
    if let Some(flag) = refused(args) {
        return Err(Failure::usage(format!(
            "--follow prints each match as it is found; {flag} needs the end of the log, which a followed log does not have"
        )));
    }
    let [path] = args.paths.as_slice() else {
        return Err(Failure::usage(
            "--follow follows one log: name one file or session directory",
        ));
    };
    let mut session = Session::start(path, &args.follow)?;
    let mut matches = 0;
    loop {
        let (opened, ended) = session.open(None)?;
        let (to, written) = crossbeam_channel::bounded::<Vec<u8>>(16);
        let mut live = Live {
            search: Search::new(query, Candidates::All),
            regex: query.pattern.regex(),
            name: opened.name.clone(),
            color: env.color_out,
            format: args.format,
            to,
            crash: false,
            matches: 0,
            gone: false,
        };
        let session_ref = &session;
        let ((scanned, found), failed) = dshs::log::limits::beside(
            move || {
                let scanned = following::scan(opened, env.scan_options(), &mut Discard, &mut live);
                (scanned, live.matches)
            },
            || session_ref.pump(written, out),
        );
        if let Some(e) = failed {
            return Err(e.into());
        }
        matches += found;
        if session.again(&ended, env.quiet) {
            continue;
        }
        if let Err(e) = scanned {
            return Err(anyhow!("cannot read {path}: {e}"));
        }
        return Ok(if matches > 0 {
            Outcome::Success
        } else {
            Outcome::NoMatch
        });
    }
}
