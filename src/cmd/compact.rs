//! `dshs compact`: append a manual compaction that replaces a surface range with a summary.
//! The plan is `log::compact`, the write is `log::write` (the same writer as `repair`, whose
//! plumbing — opening the target under the session lock, fault injection, refusals — this
//! file shares); this file reads the summary, prints, and maps outcomes to exit codes.
//!
//! Human text follows `repair`: the summary of a compaction goes to stdout (`-q` silences
//! it); with `--dry-run`, stdout holds only the four events (JSON Lines) and the description
//! goes to stderr.

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::Path;

use anyhow::Result;

use dshs::log::compact::{self, CompactPlan, Lookout, Minted, PlanError, Refusal, Request};
use dshs::log::derive::Deriver;
use dshs::log::input::{self, Opened, Source};
use dshs::log::scan::ScanOptions;
use dshs::log::text;
use dshs::log::write::{self, WriteError};

use crate::cli::CompactArgs;
use crate::exit::Outcome;
use crate::render::escape;
use crate::render::human::plural;

use super::Env;
use super::repair::{Errors, fail, open_target, print_errors, write_failed};
use super::test_fault;

pub fn run(args: &CompactArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    let fault = match test_fault() {
        Ok(f) => f,
        Err(msg) => return Ok(fail(&msg, Outcome::Failure)),
    };
    let stdin = args.file == "-";
    if stdin && !args.dry_run {
        return Ok(fail(
            "standard input cannot be compacted in place: give the log's FILE path, or use --dry-run to see the compaction",
            Outcome::Failure,
        ));
    }
    let summary_from_stdin = args.summary_file.as_deref() == Some(Path::new("-"));
    if stdin && summary_from_stdin {
        return Ok(fail(
            "the log and the summary cannot both come from standard input: put the summary in a file, or pass it with --summary",
            Outcome::Failure,
        ));
    }
    let summary = match read_summary(args) {
        Ok(s) => s,
        Err(msg) => return Ok(fail(&msg, Outcome::Failure)),
    };
    let req = Request {
        start: args.start,
        end: args.end,
        summary,
    };
    // No need to read a large log to refuse an empty summary.
    if let Err(r) = compact::check_summary(&req.summary) {
        return Ok(refuse(&escape(&args.file), &r, &Errors::default()));
    }

    let target = match open_target(&args.file, stdin, !args.dry_run) {
        Ok(t) => t,
        Err(outcome) => return Ok(outcome),
    };
    let name = escape(&target.name).into_owned();
    let mut opened = match input::open(&Source::Path(target.path.clone())) {
        Ok(o) => Opened {
            name: target.name.clone(),
            path: target.is_log_file.then(|| target.path.clone()),
            ..o
        },
        Err(e) => return Ok(fail(&e.to_string(), super::input_failure(&e))),
    };
    // A zstd log has no plaintext on disk to read messages back from: keep a copy of it.
    let plaintext = match input::tee_plaintext(&mut opened) {
        Ok(copy) => copy,
        Err(e) => return Ok(fail(&format!("cannot read {name}: {e}"), Outcome::Failure)),
    };
    let opts: ScanOptions = env.scan_options();
    let mut errors = Errors::default();
    let mut lookout = Lookout::new(&req);
    let scan = match super::scan_source(opened, env, &opts, &mut errors, &mut lookout) {
        Ok(s) => s,
        Err(e) => return Ok(fail(&format!("cannot read {name}: {e}"), Outcome::Failure)),
    };
    let minted = match test_minted().map_or_else(Minted::fresh, Ok) {
        Ok(m) => m,
        Err(e) => return Ok(fail(&e.to_string(), Outcome::Failure)),
    };
    let plain_path = plaintext
        .as_ref()
        .map_or(target.path.as_path(), |t| t.path());
    let mut deriver = match Deriver::open(plain_path) {
        Ok(d) => d,
        Err(e) => return Ok(fail(&format!("cannot read {name}: {e}"), Outcome::Failure)),
    };
    let plan = match compact::plan(&scan, &lookout, &req, minted, &mut deriver) {
        Ok(p) => p,
        Err(PlanError::Refused(r)) => return Ok(refuse(&name, &r, &errors)),
        Err(PlanError::Read(e)) => {
            return Ok(fail(&format!("cannot read {name}: {e}"), Outcome::Failure));
        }
        Err(e @ PlanError::Encode(_)) => {
            return Ok(fail(&format!("{name}: {e}"), Outcome::Failure));
        }
    };
    // The plan covers the log as it was read: it must be the file that was stamped.
    if scan.physical_len() != target.stamp.len {
        let e = WriteError::Changed {
            path: target.path.clone(),
        };
        return Ok(fail(&e.to_string(), Outcome::Unsupported));
    }

    let original = match File::open(&target.path) {
        Ok(f) => BufReader::new(f),
        Err(e) => return Ok(fail(&format!("cannot read {name}: {e}"), Outcome::Failure)),
    };
    let scan_path = target.is_log_file.then_some(target.path.as_path());
    let verdict = match compact::verify(original, &plan, scan_path, &opts) {
        Ok(v) => v,
        Err(e) => return Ok(fail(&format!("cannot read {name}: {e}"), Outcome::Failure)),
    };
    if !verdict.ok {
        print_errors(&target.name, verdict.findings.iter());
        return Ok(fail(
            &format!(
                "refusing to compact {name}: with the compaction appended it would not validate cleanly (a case dshs does not handle; please report it); nothing was written"
            ),
            Outcome::Invalid,
        ));
    }

    if args.dry_run {
        for line in &plan.lines {
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        if !env.quiet {
            crate::render::diag!(
                "{name}: would replace {}; nothing was written",
                describe(&plan)
            );
        }
        return Ok(Outcome::Success);
    }
    let mut target = target;
    if let Err(outcome) = target.lock_for_write() {
        return Ok(outcome);
    }
    match write::apply_in_place(&target.path, target.stamp, plan.edit(), fault) {
        Ok(_) => {
            if !env.quiet {
                writeln!(out, "{name}: replaced {}", describe(&plan))?;
            }
            Ok(Outcome::Success)
        }
        Err(e) => Ok(write_failed(&e)),
    }
}

/// Debug builds only: `DSHS_TEST_MINT=TIME` fixes the fresh identities and the clock of a
/// compaction (two constant UUIDs, `time` = TIME), so that the crash-consistency tests can
/// compare an interrupted run with an uninterrupted one byte for byte. Release builds
/// ignore the variable.
fn test_minted() -> Option<Minted> {
    #[cfg(debug_assertions)]
    if let Some(time) = std::env::var("DSHS_TEST_MINT")
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
    {
        return Some(Minted {
            compaction_id: compact::uuid_v4(&[0x11; 16]),
            message_id: compact::uuid_v4(&[0x22; 16]),
            time,
        });
    }
    None
}

/// The summary text: `--summary` as given, or a UTF-8 file (or standard input) without its
/// trailing line breaks. Errors are usage errors (exit 2).
fn read_summary(args: &CompactArgs) -> Result<String, String> {
    if let Some(text) = &args.summary {
        return Ok(text.clone());
    }
    let Some(path) = &args.summary_file else {
        return Err("give the summary with --summary TEXT or --summary-file PATH".into());
    };
    let (shown, bytes) = if path == Path::new("-") {
        let mut buf = Vec::new();
        io::stdin()
            .lock()
            .read_to_end(&mut buf)
            .map_err(|e| format!("cannot read the summary from standard input: {e}"))?;
        ("standard input".to_owned(), buf)
    } else {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path)
            .map_err(|e| format!("cannot read the summary file {shown}: {e}"))?;
        (shown, bytes)
    };
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "the summary in {shown} is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}

fn refuse(name: &str, refusal: &Refusal, errors: &Errors) -> Outcome {
    if matches!(refusal, Refusal::Invalid { .. } | Refusal::Unsupported) {
        print_errors(name, errors.kept.iter());
        if errors.more > 0 {
            crate::render::diag!(
                "{name}: … {} more error{} not shown (dshs validate lists them all)",
                errors.more,
                plural(errors.more)
            );
        }
    }
    let outcome = if refusal.is_unsupported() {
        Outcome::Unsupported
    } else {
        Outcome::Invalid
    };
    fail(
        &format!(
            "refusing to compact {name}: {}; nothing was written",
            refusal.describe(name)
        ),
        outcome,
    )
}

/// `21..15 (3 surface nodes: 21, 13, 15; ~540 tokens) with the summary at
/// user/message seq 27 (appended seq 25–28: compaction/start, compaction/summary,
/// user/message, compaction/end)`
fn describe(plan: &CompactPlan) -> String {
    let n = plan.shadowed.len() as u64;
    format!(
        "{}..{} ({n} surface node{}: {}; ~{} token{}) with the summary at user/message seq {} (appended seq {}–{}: compaction/start, compaction/summary, user/message, compaction/end)",
        plan.start,
        plan.end,
        plural(n),
        text::seq_list(&plan.shadowed, 12),
        plan.shadowed_tokens,
        plural(plan.shadowed_tokens),
        plan.checkpoint_seq(),
        plan.first_seq,
        plan.last_seq()
    )
}
