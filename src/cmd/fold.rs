//! Shared by `surface` and `derive`: fold a log the way DSH loads it (optionally only up to
//! `--at SEQ`), or say why it cannot be folded (CLI.md "surface": unsupported → 3, a header
//! error, fatal damage or a fold rejection → 1 with those findings, `--at` past the end → 2).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use dshs::log::derive::DeriveError;
use dshs::log::scan::{FoldState, Scan, ScanOptions, Status};
use dshs::log::surface::Node;
use dshs::log::{Finding, Sink, input};

use crate::exit::Outcome;
use crate::render::escape;
use crate::render::human::{self, Painter};

use super::Env;

/// A log folded as DSH would load it.
pub struct Folded {
    /// The name the user gave (`-` for standard input).
    pub name: String,
    pub scan: Scan,
    pub state: FoldState,
    /// The plaintext to fetch lines from: the log itself, or the spooled copy of stdin.
    pub lines: Option<PathBuf>,
    /// Keeps the spooled copy of standard input alive while lines are fetched.
    _spool: Option<tempfile::NamedTempFile>,
}

impl Folded {
    /// The seq the surface stands after: `--at SEQ`, or the last committed event.
    pub fn after_seq(&self) -> Option<u64> {
        self.state.surface.next_seq().checked_sub(1)
    }
}

pub enum Loaded {
    Folded(Box<Folded>),
    /// The log could not be folded; the reason was printed on stderr.
    Refused(Outcome),
}

/// What the caller needs besides the fold.
pub struct Want {
    pub at: Option<u64>,
    /// Lines will be fetched by offset afterwards (standard input is spooled to a file).
    pub lines: bool,
    pub replacements: bool,
}

/// At most this many refusing findings are kept for the report (the count is exact).
const KEEP_FINDINGS: usize = 1000;

/// Keeps the findings that stop the fold or make the log unsupported; counts the rest.
#[derive(Default)]
struct Refusals {
    kept: Vec<Finding>,
    more: u64,
}

impl Sink for Refusals {
    fn push(&mut self, f: Finding) {
        if !(f.is_error() && f.code.info().blocks_fold) {
            return;
        }
        if self.kept.len() < KEEP_FINDINGS {
            self.kept.push(f);
        } else {
            self.more += 1;
        }
    }
}

pub fn load(file: &str, want: &Want, env: &Env) -> Result<Loaded> {
    let mut spool = None;
    let mut opened = match super::open(file) {
        Ok(o) => o,
        Err(e) => {
            complain(&escape(&e.to_string()));
            return Ok(Loaded::Refused(super::input_failure(&e)));
        }
    };
    if want.lines {
        // No plaintext file to fetch lines from (zstd, standard input, a FIFO): keep a copy
        // of what the one pass reads.
        match input::tee_plaintext(&mut opened) {
            Ok(Some(copy)) => spool = Some(copy),
            Ok(None) => {}
            Err(e) => {
                complain(&format!("cannot create a temporary file: {e}"));
                return Ok(Loaded::Refused(Outcome::Failure));
            }
        }
    }
    let lines = match &spool {
        Some(copy) => Some(copy.path().to_path_buf()),
        None => opened.path.clone(),
    };
    let name = opened.name.clone();
    let opts = ScanOptions {
        stop_after: want.at,
        record_replacements: want.replacements,
        ..env.scan_options()
    };
    let mut refusals = Refusals::default();
    let mut scan = match super::scan_source(opened, env, &opts, &mut refusals, &mut ()) {
        Ok(s) => s,
        Err(e) => {
            complain(&format!("cannot read {}: {e}", escape(&name)));
            return Ok(Loaded::Refused(Outcome::Failure));
        }
    };
    let unsupported = scan.status() == Status::Unsupported;
    if unsupported || scan.tally.blocking > 0 || scan.state.is_none() {
        report(&name, &refusals, &scan, unsupported);
        return Ok(Loaded::Refused(if unsupported {
            Outcome::Unsupported
        } else {
            Outcome::Invalid
        }));
    }
    let Some(state) = scan.state.take() else {
        return Ok(Loaded::Refused(Outcome::Invalid));
    };
    if scan.stop_not_reached {
        let at = want.at.unwrap_or_default();
        let last = match state.surface.next_seq().checked_sub(1) {
            Some(last) => format!("its last event is seq {last}"),
            None => "it has no events".to_owned(),
        };
        complain(&format!(
            "--at {at}: {} has no event with seq {at} ({last})",
            escape(&name)
        ));
        return Ok(Loaded::Refused(Outcome::Failure));
    }
    Ok(Loaded::Folded(Box::new(Folded {
        name,
        scan,
        state,
        lines,
        _spool: spool,
    })))
}

/// A message could not be read back from its line after the pass: say where, and the likely
/// reason (the file changed underneath).
pub fn reread_failure(name: &str, node: &Node, e: &DeriveError) -> anyhow::Error {
    let why = match e {
        DeriveError::Io { source, .. } => format!("cannot read the line again: {source}"),
        DeriveError::Message { source, .. } => source.to_string(),
    };
    anyhow::anyhow!(
        "{}: line {}, seq {}: {why}; did the log change while dshs read it? run the command again",
        escape(name),
        node.pos.line,
        node.seq
    )
}

/// `dshs: error: …` on stderr. A closed stderr is not worth failing over.
pub fn complain(message: &str) {
    let _ = writeln!(crate::render::diag_stream(), "dshs: error: {message}");
}

/// The findings that stop the fold, as `validate` prints them, then why nothing is shown.
fn report(name: &str, refusals: &Refusals, scan: &Scan, unsupported: bool) {
    let painter = Painter { color: false };
    let mut err = crate::render::diag_stream();
    for f in &refusals.kept {
        let _ = writeln!(err, "{}", human::finding(&painter, name, f));
    }
    if refusals.more > 0 {
        let _ = writeln!(
            err,
            "{}: … {} more finding{} not shown",
            escape(name),
            refusals.more,
            human::plural(refusals.more)
        );
    }
    let explain = refusals.kept.first().map_or_else(String::new, |f| {
        format!(", `dshs explain {}` how to fix it", f.code.as_str())
    });
    let why = if unsupported {
        match refusals.kept.first() {
            Some(f) => format!(
                "is not supported (see above; `dshs explain {}` says what to do)",
                f.code.as_str()
            ),
            None => "is not supported (see above)".to_owned(),
        }
    } else {
        let n = scan.tally.blocking.max(1);
        format!(
            "cannot be folded the way DSH loads it ({n} blocking error{}; `dshs validate` lists every finding{explain})",
            human::plural(n)
        )
    };
    let _ = writeln!(err, "dshs: error: {} {why}", escape(name));
}
