//! `dshs repair`: cut what a crash left after the committed prefix and close the open turn, as
//! DSH does on resume. The plan is `log::repair`, the way in and out is `log::append`; this
//! file prints and decides the exit status.
//!
//! Human text: the summary of a repair goes to stdout; with `--dry-run`, stdout holds only the
//! closers (JSON Lines) and what would be cut goes to stderr. `-q` silences all of it (main
//! sends stdout to a sink and `render::diag!` prints nothing); the repair itself still runs.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use anyhow::Result;

use dshs::log::append::{Mode, Planned};
use dshs::log::closers::CloserKind;
use dshs::log::event::Kind;
use dshs::log::finding::ErrorList;
use dshs::log::repair::{self, Cut, Refusal, RepairPlan};

use crate::cli::RepairArgs;
use crate::exit::{Failure, Outcome};
use crate::render::escape;
use crate::render::human::plural;

use super::Env;
use super::store;
use super::writing::{self, SHOWN_ERRORS};

/// What this command's output is like (for the progress bar).
pub fn output(args: &RepairArgs) -> super::Output {
    super::Output {
        json: args.dry_run,
        writes_while_reading: false,
    }
}

pub fn run(args: &RepairArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    let env = &env.for_output(output(args));
    if let store::Named::Store { path, shown, id } =
        store::name(&args.file, args.session.as_deref())?
    {
        return repair_store(args, env, out, &path, &shown, id.as_deref());
    }
    let fault = super::test_fault()?;
    let stdin = args.file == "-";
    if stdin && !args.dry_run && args.output.is_none() {
        return Err(Failure::usage(
            "standard input cannot be repaired in place: use --dry-run to see the repair, or --output OUT to write the repaired log",
        ));
    }
    // --dry-run and --output change nothing in FILE, not even to finish an interrupted write.
    let mode = if args.dry_run || args.output.is_some() {
        Mode::Look
    } else {
        Mode::InPlace
    };
    let mut target = writing::open(&args.file, mode)?;
    let name = escape(&target.name).into_owned();
    let cannot_read = writing::cannot_read(&name);

    let opened = target
        .open_log()
        .map_err(|e| Failure::of(super::input_failure(&e), e.to_string()))?;
    let opts = env.scan_options();
    let mut errors = ErrorList::new(SHOWN_ERRORS);
    let scan = super::scan_source(opened, env, &opts, &mut errors, &mut ())
        .map_err(|e| cannot_read(&e))?;
    let mut plan = match repair::plan(&scan) {
        Ok(p) => p,
        Err(refusal) => return Err(refuse(&target.name, refusal, &errors)),
    };
    target.planned_from(&scan).map_err(writing::write_failed)?;

    // zstd: the committed lines of a torn final frame are re-appended as a new frame.
    File::open(&target.path)
        .and_then(|f| plan.recover_from(f))
        .map_err(|e| cannot_read(&e))?;

    if !plan.is_noop() {
        let (result, findings) = target
            .verify(plan.edit(), plan.encoding, &opts)
            .map_err(|e| cannot_read(&e))?;
        if !plan.verified(&result) {
            let errors: Vec<_> = findings.iter().filter(|f| f.is_error()).collect();
            writing::print_findings(&target.name, errors.iter().copied());
            // Errors only on the appended closers: the log's own rules reject the events DSH
            // would write (a v0 turn numbered 0, say), so DSH could not load the result either.
            let on_closers =
                !errors.is_empty() && errors.iter().all(|f| f.pos.byte >= scan.committed_bytes);
            let why = if on_closers {
                "the closers DSH would append break this format's own rules (see above), so the open turn cannot be closed the way DSH closes it and DSH could not load the result either; close or remove the open turn by hand"
            } else {
                "with the closers appended it would still not validate cleanly (a case dshs does not handle; please report it)"
            };
            return Err(Failure::of(
                Outcome::Invalid,
                format!("refusing to repair {name}: {why}; nothing was written"),
            ));
        }
    }

    if args.dry_run {
        write_closers(&plan, out)?;
        crate::render::diag!("{name}: {}", would_cut(plan.cut.as_ref()));
        if !env.quiet {
            crate::render::diag!("{name}: {}", would_append(&plan));
        }
        return Ok(Outcome::Success);
    }

    if let Some(dest) = &args.output {
        let len = target
            .write_copy(plan.edit(), dest, fault)
            .map_err(writing::write_failed)?;
        if !env.quiet {
            writeln!(out, "{}", copy_summary(&name, dest, len, &plan))?;
        }
        return Ok(Outcome::Success);
    }

    if plan.is_noop() {
        let none = "no torn line, no crash tail, no open turn";
        return nothing_to_repair(&name, none, env, out);
    }
    let done = target
        .write_in_place(plan.edit(), fault)
        .map_err(writing::write_failed)?;
    if !env.quiet {
        writeln!(
            out,
            "{name}: {}",
            in_place_summary(&plan, done.sidecar.as_deref())
        )?;
    }
    Ok(Outcome::Success)
}

/// One session of a SQLite store (SQLITE.md S8.2): the plan is today's, made on the
/// session's logical log; the torn tail the storage layer drops is what is cut (whole rows,
/// saved to a sidecar first), the closers are inserted as rows, all in one transaction.
fn repair_store(
    args: &RepairArgs,
    env: &Env,
    out: &mut dyn Write,
    db: &Path,
    shown: &str,
    id: Option<&str>,
) -> Result<Outcome> {
    use dshs::log::sqlite::write::{self as store_write, Options};
    let fault = super::store_test_fault()?;
    let session = store::Scanned::read(db, shown, id, env, &mut ())?;
    let name = &session.name;
    let cannot_read = writing::cannot_read(name);
    let plan = match repair::plan(&session.scan) {
        Ok(p) => p,
        Err(refusal) => return Err(refuse(&session.change.name, refusal, &session.errors)),
    };
    if let Some(cut) = &plan.cut {
        // Rows the storage layer keeps but the logical pass would drop: not a torn tail of
        // rows, and cutting inside committed rows is not what DSH does.
        return Err(Failure::of(
            Outcome::Invalid,
            format!(
                "refusing to repair {name}: its logical log ends in lines DSH would drop ({}), but the storage layer holds them as committed rows; nothing was written",
                cut_parts(cut)
            ),
        ));
    }
    let snapshot = session.end.snapshot.clone();
    let id = snapshot.id.clone();
    if !plan.closers.is_empty() {
        let (result, findings) = session
            .change
            .verify(plan.edit(), plan.encoding, &session.opts)
            .map_err(|e| cannot_read(&e))?;
        if !plan.verified(&result) {
            let errors: Vec<_> = findings.iter().filter(|f| f.is_error()).collect();
            writing::print_findings(&session.change.name, errors.iter().copied());
            return Err(Failure::of(
                Outcome::Invalid,
                format!(
                    "refusing to repair {name}: with the closers appended it would not validate cleanly (see above); nothing was written"
                ),
            ));
        }
    }
    let write_plan = store_write::Plan {
        snapshot,
        cut: true,
        append: plan.closers.iter().map(|c| c.line.clone()).collect(),
    };
    let torn = write_plan.snapshot.torn;
    let cut_text = |verb: &str| {
        torn.map(|t| {
            format!(
                "{verb} {} row{} from seq {} (the torn tail DSH drops on load)",
                t.rows,
                plural(t.rows),
                t.seq
            )
        })
    };

    if args.dry_run {
        write_closers(&plan, out)?;
        crate::render::diag!(
            "{name}: {}",
            cut_text("would delete").map_or_else(
                || "nothing to cut".to_owned(),
                |t| format!("{t}; they would be saved to a sidecar first")
            )
        );
        if !env.quiet {
            crate::render::diag!("{name}: {}", would_append(&plan));
        }
        return Ok(Outcome::Success);
    }
    let allow = Options {
        allow_old_schema: args.allow_old_schema,
        fault,
    };
    let mut parts = Vec::new();
    if let Some(dest) = &args.output {
        let dest_shown = escape(&dest.display().to_string()).into_owned();
        if store::is_jsonl_name(dest) {
            let len =
                session
                    .change
                    .write_jsonl(session.scan.committed_bytes, plan.append(), dest)?;
            parts.push(format!(
                "wrote {dest_shown} ({len} byte{}): the repaired logical log of {name}",
                plural(len)
            ));
            parts.extend(cut_text("left out"));
        } else {
            store_write::backup_copy(db, dest).map_err(|e| store::write_failed(&e))?;
            let written = store_write::apply(dest, &write_plan, allow).map_err(|e| {
                let _ = std::fs::remove_file(dest);
                store::write_failed(&e)
            })?;
            // The copy counts only once it reads back clean and passes SQLite's own check.
            store::recheck(dest, &dest.display().to_string(), &id, &session.opts)
                .and_then(|()| store_write::verify_copy(dest).map_err(|e| store::write_failed(&e)))
                .inspect_err(|_| {
                    let _ = std::fs::remove_file(dest);
                })?;
            parts.push(format!(
                "wrote {dest_shown}, a copy of {} made with SQLite's backup API, with session {} repaired",
                escape(shown),
                escape(&id)
            ));
            parts.extend(cut_text("deleted").map(|t| match &written.sidecar {
                Some(p) => format!("{t} → saved to {}", escape(&p.display().to_string())),
                None => t,
            }));
        }
        if !plan.closers.is_empty() {
            parts.push(format!("appended {}", describe_closers(&plan)));
        } else if torn.is_none() {
            parts.push("nothing to repair, an exact copy".into());
        }
        parts.push(format!("{} is untouched", escape(shown)));
        if !env.quiet {
            writeln!(out, "{}", parts.join("; "))?;
        }
        return Ok(Outcome::Success);
    }
    if write_plan.is_noop() {
        return nothing_to_repair(name, "no torn tail, no open turn", env, out);
    }
    let written = store::write_checked(db, shown, &id, &write_plan, allow, &session.opts)?;
    if !env.quiet {
        parts.extend(cut_text("deleted").map(|t| match &written.sidecar {
            Some(p) => format!("{t} → saved to {}", escape(&p.display().to_string())),
            None => t,
        }));
        if !plan.closers.is_empty() {
            parts.push(format!("appended {}", describe_closers(&plan)));
        }
        if let Some(r) = written.revision {
            parts.push(format!("revision {r}"));
        }
        writeln!(out, "{name}: {}", parts.join("; "))?;
    }
    Ok(Outcome::Success)
}

/// A log that needs no repair: said on stdout unless quiet (`none`: what it does not have).
fn nothing_to_repair(name: &str, none: &str, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    if !env.quiet {
        writeln!(out, "{name}: nothing to repair ({none})")?;
    }
    Ok(Outcome::Success)
}

/// `--dry-run`: the closers on stdout, one JSON line each.
fn write_closers(plan: &RepairPlan, out: &mut dyn Write) -> std::io::Result<()> {
    for c in &plan.closers {
        out.write_all(c.line.as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

fn refuse(name: &str, refusal: Refusal, errors: &ErrorList) -> anyhow::Error {
    writing::print_errors(name, errors);
    let total = errors.total();
    let code = errors.kept.first().map(|f| f.code.as_str());
    match refusal {
        Refusal::Unsupported => Failure::of(
            Outcome::Unsupported,
            format!(
                "refusing to repair {name}: dshs does not support this log (see above{}); nothing was written",
                code.map_or_else(String::new, |c| format!(
                    "; `dshs explain {c}` says what to do"
                ))
            ),
        ),
        Refusal::Invalid => Failure::of(
            Outcome::Invalid,
            format!(
                "refusing to repair {name}: its committed part has {total} error{} — that is not crash damage, and guessing could lose data; nothing was written{}",
                plural(total),
                code.map_or_else(String::new, |c| format!(
                    ". `dshs explain {c}` says how to fix it by hand"
                ))
            ),
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
                "{} for {} ({})",
                Kind::ToolResult.name(),
                escape(call_id),
                if *started {
                    "TOOL_OUTCOME_UNKNOWN"
                } else {
                    "TOOL_NOT_STARTED"
                }
            ),
            CloserKind::StepEnd => Kind::StepEnd.name().into(),
            CloserKind::TurnEnd => format!("{} interrupted", Kind::TurnEnd.name()),
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
