//! `dshs repair`: cut what a crash left after the committed prefix and close the open turn, as
//! DSH does on resume. The plan is `log::repair`, the write is `log::write`; this file opens
//! the log, takes the session lock, prints, and maps outcomes to exit codes.
//!
//! Human text: the summary of a repair goes to stdout; with `--dry-run`, stdout holds only the
//! closers (JSON Lines) and what would be cut goes to stderr. `-q` silences all of it (main
//! sends stdout to a sink and `render::diag!` prints nothing); the repair itself still runs.

use std::fs::File;
use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};

use anyhow::Result;

use dshs::log::closers::CloserKind;
use dshs::log::input::{self, FileKind, InputError, Opened, Source};
use dshs::log::repair::{self, Cut, Refusal, RepairPlan};
use dshs::log::write::{self, Stamp, WriteError, WriterLock};
use dshs::log::{Finding, Sink};

use crate::cli::RepairArgs;
use crate::exit::Outcome;
use crate::render::escape;
use crate::render::human::{self, Painter, plural};

use super::Env;

/// How many error findings a refusal prints (the count covers all of them).
const SHOWN_ERRORS: usize = 50;

/// Keeps the error findings (a refusal shows them); warnings are crash damage repair fixes.
/// (`compact` shares this and the other plumbing below marked `pub(super)`.)
#[derive(Default)]
pub(super) struct Errors {
    pub(super) kept: Vec<Finding>,
    pub(super) more: u64,
}

impl Sink for Errors {
    fn push(&mut self, f: Finding) {
        if !f.is_error() {
            return;
        }
        if self.kept.len() < SHOWN_ERRORS {
            self.kept.push(f);
        } else {
            self.more += 1;
        }
    }
}

/// The log being repaired, opened once, with the session lock held while dshs works.
pub(super) struct Target {
    /// What the user typed.
    pub(super) name: String,
    /// The file read: the log itself, or a spooled copy of standard input.
    pub(super) path: PathBuf,
    /// Name and layout checks apply (false for a spooled copy).
    pub(super) is_log_file: bool,
    pub(super) stamp: Stamp,
    lock: Option<WriterLock>,
    _spool: Option<tempfile::NamedTempFile>,
}

pub fn run(args: &RepairArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    let fault = match super::test_fault() {
        Ok(f) => f,
        Err(msg) => return Ok(fail(&msg, Outcome::Failure)),
    };
    let stdin = args.file == "-";
    if stdin && !args.dry_run && args.output.is_none() {
        return Ok(fail(
            "standard input cannot be repaired in place: use --dry-run to see the repair, or --output OUT to write the repaired log",
            Outcome::Failure,
        ));
    }
    // --dry-run and --output change nothing in FILE, not even to finish an interrupted write.
    let resume = !args.dry_run && args.output.is_none();
    let target = match open_target(&args.file, stdin, resume) {
        Ok(t) => t,
        Err(outcome) => return Ok(outcome),
    };
    let name = escape(&target.name).into_owned();

    let opened = match input::open(&Source::Path(target.path.clone())) {
        Ok(o) => Opened {
            name: target.name.clone(),
            path: target.is_log_file.then(|| target.path.clone()),
            ..o
        },
        Err(e) => return Ok(fail(&e.to_string(), super::input_failure(&e))),
    };
    let opts = env.scan_options();
    let mut errors = Errors::default();
    let scan = match super::scan_source(opened, env, &opts, &mut errors, &mut ()) {
        Ok(s) => s,
        Err(e) => return Ok(fail(&format!("cannot read {name}: {e}"), Outcome::Failure)),
    };
    let mut plan = match repair::plan(&scan) {
        Ok(p) => p,
        Err(refusal) => return Ok(refuse(&target.name, refusal, &errors)),
    };
    // A plan exists only for a log read to its end: it must be the file that was stamped.
    if scan.physical_len() != target.stamp.len {
        let e = WriteError::Changed {
            path: target.path.clone(),
        };
        return Ok(fail(&e.to_string(), Outcome::Unsupported));
    }

    // zstd: the committed lines of a torn final frame are re-appended as a new frame.
    if let Err(e) = File::open(&target.path).and_then(|f| plan.recover_from(f)) {
        return Ok(fail(&format!("cannot read {name}: {e}"), Outcome::Failure));
    }

    if !plan.is_noop() {
        let original = match File::open(&target.path) {
            Ok(f) => BufReader::new(f),
            Err(e) => return Ok(fail(&format!("cannot read {name}: {e}"), Outcome::Failure)),
        };
        let scan_path = target.is_log_file.then_some(target.path.as_path());
        let verdict = match repair::verify(original, &plan, scan_path, &opts) {
            Ok(v) => v,
            Err(e) => return Ok(fail(&format!("cannot read {name}: {e}"), Outcome::Failure)),
        };
        if !verdict.ok {
            let errors: Vec<&Finding> = verdict.findings.iter().filter(|f| f.is_error()).collect();
            print_errors(&target.name, errors.iter().copied());
            // Errors only on the appended closers: the log's own rules reject the events DSH
            // would write (a v0 turn numbered 0, say), so DSH could not load the result either.
            let on_closers =
                !errors.is_empty() && errors.iter().all(|f| f.pos.byte >= scan.committed_bytes);
            let why = if on_closers {
                "the closers DSH would append break this format's own rules (see above), so the open turn cannot be closed the way DSH closes it and DSH could not load the result either; close or remove the open turn by hand"
            } else {
                "with the closers appended it would still not validate cleanly (a case dshs does not handle; please report it)"
            };
            return Ok(fail(
                &format!("refusing to repair {name}: {why}; nothing was written"),
                Outcome::Invalid,
            ));
        }
    }

    if args.dry_run {
        for c in &plan.closers {
            out.write_all(c.line.as_bytes())?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        crate::render::diag!("{name}: {}", would_cut(plan.cut.as_ref()));
        if !env.quiet {
            crate::render::diag!("{name}: {}", would_append(&plan));
        }
        return Ok(Outcome::Success);
    }

    if let Some(dest) = &args.output {
        return match write::write_copy(&target.path, target.stamp, plan.edit(), dest, fault) {
            Ok(len) => {
                if !env.quiet {
                    writeln!(out, "{}", copy_summary(&name, dest, len, &plan))?;
                }
                Ok(Outcome::Success)
            }
            Err(e) => Ok(write_failed(&e)),
        };
    }

    if plan.is_noop() {
        if !env.quiet {
            writeln!(
                out,
                "{name}: nothing to repair (no torn line, no crash tail, no open turn)"
            )?;
        }
        return Ok(Outcome::Success);
    }
    let mut target = target;
    if let Err(outcome) = target.lock_for_write() {
        return Ok(outcome);
    }
    match write::apply_in_place(&target.path, target.stamp, plan.edit(), fault) {
        Ok(done) => {
            if !env.quiet {
                writeln!(
                    out,
                    "{name}: {}",
                    in_place_summary(&plan, done.sidecar.as_deref())
                )?;
            }
            Ok(Outcome::Success)
        }
        Err(e) => Ok(write_failed(&e)),
    }
}

/// Open the log to change: resolve it (a session directory → its newest generation), probe
/// the writer's lock, and stamp the file. Standard input, or a FIFO named as FILE, is
/// spooled to a temporary file first (it cannot be read twice, nor changed in place). With
/// `resume`, first finish (or drop) a write an interrupted earlier run journaled; without it
/// (a dry run, or `--output`), refuse while such a journal exists: planning on the
/// half-written log would describe the wrong repair.
pub(super) fn open_target(arg: &str, stdin: bool, resume: bool) -> Result<Target, Outcome> {
    let spooled = |spool: io::Result<tempfile::NamedTempFile>, what: &str| {
        let spool =
            spool.map_err(|e| fail(&format!("cannot read {what}: {e}"), Outcome::Failure))?;
        let path = spool.path().to_owned();
        let stamp = Stamp::of(&path)
            .map_err(|e| fail(&format!("cannot read {what}: {e}"), Outcome::Failure))?;
        Ok(Target {
            name: arg.to_owned(),
            path,
            is_log_file: false,
            stamp,
            lock: None,
            _spool: Some(spool),
        })
    };
    if stdin {
        return spooled(input::spool_stdin(), "standard input");
    }
    let named = Path::new(arg);
    let path = input::resolve(named).map_err(|e| fail(&e.to_string(), super::input_failure(&e)))?;
    match FileKind::of(&path) {
        Ok(FileKind::Regular) | Err(_) => {}
        Ok(kind) if path != named => {
            let e = InputError::NotRegular {
                path: path.display().to_string(),
                kind: kind.describe(),
            };
            return Err(fail(&e.to_string(), Outcome::Failure));
        }
        Ok(kind) if resume => {
            return Err(fail(
                &format!(
                    "{arg} is {}, not a regular file: it can be read once but not changed in place; use --dry-run to see the change, or --output OUT to write the result",
                    kind.describe()
                ),
                Outcome::Failure,
            ));
        }
        Ok(_) => {
            let spool = File::open(&path).and_then(input::spool);
            return spooled(spool, arg);
        }
    }
    // A live writer refuses the command at once; a free lock that exists is held while
    // dshs plans. A missing one is created only when there is something to write (see
    // `Target::lock_for_write`), so a refusal or a no-op leaves no file behind.
    let mut lock = WriterLock::probe(&path).map_err(|e| write_failed(&e))?;
    let journal = write::journal_path(&path);
    if !resume && journal.exists() {
        return Err(fail(
            &format!(
                "{} records a write an earlier dshs run left unfinished; run `dshs repair {arg}` (without --dry-run or --output) to finish it first — nothing was written",
                journal.display()
            ),
            Outcome::Failure,
        ));
    }
    // Finish (or drop) what an interrupted earlier run journaled, before reading the log:
    // that writes, so it takes the lock first.
    if resume && journal.exists() && lock.is_none() {
        lock = Some(WriterLock::acquire(&path).map_err(|e| write_failed(&e))?);
    }
    match write::resume_interrupted(&path).map_err(|e| write_failed(&e))? {
        write::Resumed::Nothing => {}
        write::Resumed::Discarded(journal) => crate::render::diag!(
            "dshs: note: {}: removed {}, left by an earlier run interrupted before it changed the log",
            escape(arg),
            escape(&journal.display().to_string())
        ),
        write::Resumed::Completed { journal, appended } => crate::render::diag!(
            "dshs: note: {}: finished the write an earlier run left interrupted (appended the last {appended} bytes recorded in {}, and removed it)",
            escape(arg),
            escape(&journal.display().to_string())
        ),
    }
    let stamp = Stamp::of(&path).map_err(|e| {
        fail(
            &format!("cannot open {}: {e}", path.display()),
            Outcome::Failure,
        )
    })?;
    Ok(Target {
        name: arg.to_owned(),
        path,
        is_log_file: true,
        stamp,
        lock,
        _spool: None,
    })
}

impl Target {
    /// Before writing in place: hold the writer's lock (taken now if planning did not hold
    /// it, creating `session.lock` if needed) and make sure the log is still the one the plan
    /// was made from (length, modification time and tail): another writer may have changed
    /// it before the lock was ours. Changed: exit 3, nothing written.
    pub(super) fn lock_for_write(&mut self) -> Result<(), Outcome> {
        if self.lock.is_none() {
            self.lock = Some(WriterLock::acquire(&self.path).map_err(|e| write_failed(&e))?);
        }
        let now = Stamp::of(&self.path).map_err(|e| {
            fail(
                &format!("cannot read {}: {e}", self.path.display()),
                Outcome::Failure,
            )
        })?;
        if now != self.stamp {
            let e = WriteError::Changed {
                path: self.path.clone(),
            };
            return Err(write_failed(&e));
        }
        Ok(())
    }
}

pub(super) fn fail(message: &str, outcome: Outcome) -> Outcome {
    crate::render::diag!("dshs: error: {}", escape(message));
    outcome
}

pub(super) fn write_failed(e: &WriteError) -> Outcome {
    let outcome = if e.is_live_writer() {
        Outcome::Unsupported
    } else {
        Outcome::Failure
    };
    // The message already names the cause (`WriteError` formats its source).
    fail(&e.to_string(), outcome)
}

pub(super) fn print_errors<'f>(name: &str, findings: impl Iterator<Item = &'f Finding>) {
    let painter = Painter { color: false };
    for f in findings {
        crate::render::diag!("{}", human::finding(&painter, name, f));
    }
}

fn refuse(name: &str, refusal: Refusal, errors: &Errors) -> Outcome {
    print_errors(name, errors.kept.iter());
    if errors.more > 0 {
        crate::render::diag!(
            "{name}: … {} more error{} not shown (dshs validate lists them all)",
            errors.more,
            plural(errors.more)
        );
    }
    let total = errors.kept.len() as u64 + errors.more;
    let code = errors.kept.first().map(|f| f.code.as_str());
    match refusal {
        Refusal::Unsupported => fail(
            &format!(
                "refusing to repair {name}: dshs does not support this log (see above{}); nothing was written",
                code.map_or_else(String::new, |c| format!(
                    "; `dshs explain {c}` says what to do"
                ))
            ),
            Outcome::Unsupported,
        ),
        Refusal::Invalid => fail(
            &format!(
                "refusing to repair {name}: its committed part has {total} error{} — that is not crash damage, and guessing could lose data; nothing was written{}",
                plural(total),
                code.map_or_else(String::new, |c| format!(
                    ". `dshs explain {c}` says how to fix it by hand"
                ))
            ),
            Outcome::Invalid,
        ),
    }
}

/// `57 bytes (crash tail of 2 rows from line 10 and torn line at line 12)`
fn describe_cut(cut: &Cut) -> String {
    format!(
        "{} byte{} ({})",
        cut.len(),
        plural(cut.len()),
        cut_parts(cut)
    )
}

/// `crash tail of 2 rows from line 10 and torn line at line 12`
fn cut_parts(cut: &Cut) -> String {
    let mut what = Vec::new();
    if let Some(c) = cut.crash {
        what.push(format!(
            "crash tail of {} row{} from line {}",
            c.rows,
            plural(c.rows),
            c.line
        ));
    }
    match (cut.frame, cut.torn) {
        (Some((frame, 0)), _) => what.push(format!("torn final zstd frame {frame}")),
        (Some((frame, recovered)), _) => what.push(format!(
            "torn final zstd frame {frame}; the {recovered} byte{} of complete lines recovered from it are appended again as a new frame",
            plural(recovered)
        )),
        (None, Some(t)) => what.push(format!("torn line at line {}", t.line)),
        (None, None) => {}
    }
    what.join(" and ")
}

/// `3 events (seq 40–42): tool/result for call-1 (TOOL_NOT_STARTED), step/end, turn/end interrupted`
fn describe_closers(plan: &RepairPlan) -> String {
    let (Some(first), Some(last)) = (plan.closers.first(), plan.closers.last()) else {
        return "no events".into();
    };
    let seqs = if first.seq == last.seq {
        format!("seq {}", first.seq)
    } else {
        format!("seq {}–{}", first.seq, last.seq)
    };
    let what: Vec<String> = plan
        .closers
        .iter()
        .map(|c| match &c.kind {
            CloserKind::ToolResult { call_id, started } => format!(
                "tool/result for {} ({})",
                escape(call_id),
                if *started {
                    "TOOL_OUTCOME_UNKNOWN"
                } else {
                    "TOOL_NOT_STARTED"
                }
            ),
            CloserKind::StepEnd => "step/end".into(),
            CloserKind::TurnEnd => "turn/end interrupted".into(),
        })
        .collect();
    let n = plan.closers.len() as u64;
    format!("{n} event{} ({seqs}): {}", plural(n), what.join(", "))
}

fn would_cut(cut: Option<&Cut>) -> String {
    match cut {
        Some(c) => format!(
            "would cut {} byte{} from byte {} to the end ({}); they would be saved to a sidecar first",
            c.len(),
            plural(c.len()),
            c.start,
            cut_parts(c)
        ),
        None => "nothing to cut".into(),
    }
}

fn would_append(plan: &RepairPlan) -> String {
    if plan.closers.is_empty() {
        "nothing to append (no open turn)".into()
    } else {
        format!("would append {}", describe_closers(plan))
    }
}

fn in_place_summary(plan: &RepairPlan, sidecar: Option<&Path>) -> String {
    let mut parts = Vec::new();
    if let Some(cut) = &plan.cut {
        let saved = sidecar.map_or_else(
            || "?".to_owned(),
            |p| escape(&p.display().to_string()).into_owned(),
        );
        parts.push(format!("cut {} → saved to {saved}", describe_cut(cut)));
    }
    if !plan.closers.is_empty() {
        parts.push(format!("appended {}", describe_closers(plan)));
    }
    parts.join("; ")
}

fn copy_summary(name: &str, dest: &Path, len: u64, plan: &RepairPlan) -> String {
    let mut s = format!(
        "wrote {} ({len} byte{}) from {name}",
        escape(&dest.display().to_string()),
        plural(len)
    );
    if let Some(cut) = &plan.cut {
        s.push_str(&format!("; left out {}", describe_cut(cut)));
    }
    if plan.closers.is_empty() {
        if plan.cut.is_none() {
            s.push_str("; nothing to repair, an exact copy");
        }
    } else {
        s.push_str(&format!("; appended {}", describe_closers(plan)));
    }
    s.push_str(&format!("; {name} is untouched"));
    s
}
