//! What the two commands that write (`repair`, `compact`) share: opening the log on the
//! library's append path with its notes said, the exit status of a write that did not
//! happen, and refusals shown with the findings behind them. Not a command.

use dshs::log::append::{Mode, OpenError, Target};
use dshs::log::finding::ErrorList;
use dshs::log::write::{Resumed, WriteError};

use crate::exit::{Failure, Outcome};
use crate::render::escape;
use crate::render::human::{self, Painter, plural};

/// How many error findings a refusal prints (the count covers all of them).
pub const SHOWN_ERRORS: usize = 50;

/// The usage failure of a log `name` (shown, escaped) that could not be read, for
/// `map_err` wherever a writing command reads it.
pub fn cannot_read(name: &str) -> impl Fn(&std::io::Error) -> anyhow::Error + '_ {
    // A read stopped at one of dshs's limits is exit 4, never a verdict on the log.
    move |e| Failure::of(Outcome::of_read(e), format!("cannot read {name}: {e}"))
}

/// Open `arg` to be changed as `mode` says, saying on stderr what finishing an earlier,
/// interrupted write did.
pub fn open(arg: &str, mode: Mode) -> anyhow::Result<Target> {
    let target = Target::open(arg, mode).map_err(|e| match e {
        OpenError::Write(w) => write_failed(w),
        OpenError::Input(i) => Failure::of(crate::cmd::input_failure(&i), i.to_string()),
        other => Failure::usage(other.to_string()),
    })?;
    match &target.resumed {
        Resumed::Nothing => {}
        Resumed::Discarded(journal) => crate::render::diag!(
            "dshs: note: {}: removed {}, left by an earlier run interrupted before it changed the log",
            escape(arg),
            escape(&journal.display().to_string())
        ),
        Resumed::Completed { journal, appended } => crate::render::diag!(
            "dshs: note: {}: finished the write an earlier run left interrupted (appended the last {appended} bytes recorded in {}, and removed it)",
            escape(arg),
            escape(&journal.display().to_string())
        ),
    }
    Ok(target)
}

/// A write that did not happen, or was undone: a refusal because someone else is writing
/// (exit 3), or an I/O failure (exit 2). The message names the cause.
pub fn write_failed(e: WriteError) -> anyhow::Error {
    let outcome = if e.is_live_writer() {
        Outcome::Unsupported
    } else {
        Outcome::Failure
    };
    Failure::of(outcome, e.to_string())
}

/// Print findings on stderr the way `validate` prints them (no colour).
pub fn print_findings<'f>(name: &str, findings: impl Iterator<Item = &'f dshs::log::Finding>) {
    let painter = Painter { color: false };
    for f in findings {
        crate::render::diag!("{}", human::finding(&painter, name, f));
    }
}

/// Print the error findings a refusal rests on (and how many more there are).
pub fn print_errors(name: &str, errors: &ErrorList) {
    print_findings(name, errors.kept.iter());
    if errors.more > 0 {
        crate::render::diag!(
            "{name}: … {} more error{} not shown (dshs validate lists them all)",
            errors.more,
            plural(errors.more)
        );
    }
}
