//! `dshs compact`: append a manual compaction that replaces a surface range with a summary.
//! The plan is `log::compact`, the way in and out is `log::append` (the same path as
//! `repair`); this file reads the summary, prints, and decides the exit status.
//!
//! Human text follows `repair`: the summary of a compaction goes to stdout (`-q` silences
//! it); with `--dry-run`, stdout holds only the four events (JSON Lines) and the description
//! goes to stderr.

use std::io::{self, Read, Write};
use std::path::Path;

use anyhow::Result;

use dshs::log::append::{Mode, Planned};
use dshs::log::compact::{self, CompactPlan, Lookout, Minted, PlanError, Refusal, Request};
use dshs::log::derive::Deriver;
use dshs::log::finding::ErrorList;
use dshs::log::input;
use dshs::log::scan::ScanOptions;
use dshs::log::text;

use crate::cli::CompactArgs;
use crate::exit::{Failure, Outcome};
use crate::render::escape;
use crate::render::human::plural;

use super::Env;
use super::store;
use super::writing::{self, SHOWN_ERRORS};

pub fn run(args: &CompactArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    let stdin = args.file == "-";
    if stdin && !args.dry_run {
        return Err(Failure::usage(
            "standard input cannot be compacted in place: give the log's FILE path, or use --dry-run to see the compaction",
        ));
    }
    let summary_from_stdin = args.summary_file.as_deref() == Some(Path::new("-"));
    if stdin && summary_from_stdin {
        return Err(Failure::usage(
            "the log and the summary cannot both come from standard input: put the summary in a file, or pass it with --summary",
        ));
    }
    let summary = read_summary(args).map_err(Failure::usage)?;
    let req = Request {
        start: args.start,
        end: args.end,
        summary,
    };
    // No need to read a large log to refuse an empty summary.
    if let Err(r) = compact::check_summary(&req.summary) {
        return Err(refuse(&escape(&args.file), &r, &ErrorList::new(0)));
    }

    if let store::Named::Store { path, shown, id } =
        store::name(&args.file, args.session.as_deref())?
    {
        return compact_store(args, env, out, &req, &path, &shown, id.as_deref());
    }
    let mode = if args.dry_run {
        Mode::Look
    } else {
        Mode::InPlace
    };
    let fault = super::test_fault()?;
    let mut target = writing::open(&args.file, mode)?;
    let name = escape(&target.name).into_owned();
    let cannot_read = writing::cannot_read(&name);
    let mut opened = target.open_log().map_err(super::input_error)?;
    // A zstd log has no plaintext on disk to read messages back from: keep a copy of it.
    let plaintext = input::tee_plaintext(&mut opened).map_err(|e| cannot_read(&e))?;
    let opts: ScanOptions = env.scan_options();
    let mut errors = ErrorList::new(SHOWN_ERRORS);
    let mut lookout = Lookout::new(&req);
    let scan = super::scan_source(opened, env, &opts, &mut errors, &mut lookout)
        .map_err(|e| cannot_read(&e))?;
    let plain_path = plaintext
        .as_ref()
        .map_or(target.path.as_path(), |t| t.path());
    let plan = planned(&scan, &lookout, &req, plain_path, &name, &errors)?;
    target.planned_from(&scan).map_err(writing::write_failed)?;

    let verdict = target.verify(plan.edit(), plan.encoding, &opts);
    check_verified(&plan, verdict, &target.name, &name)?;

    if args.dry_run {
        return print_dry_run(&plan, &name, env, out);
    }
    target
        .write_in_place(plan.edit(), fault)
        .map_err(writing::write_failed)?;
    if !env.quiet {
        writeln!(out, "{name}: replaced {}", describe(&plan))?;
    }
    Ok(Outcome::Success)
}

/// One session of a SQLite store: today's compaction plan on its logical log, checked by
/// scanning the logical log with the four events appended, then inserted as scalar rows in
/// one transaction (SQLITE.md S8.2; the bracket's non-monotonic `sourceEventSeqs` is stored
/// with negative ZigZag deltas by the writer).
fn compact_store(
    args: &CompactArgs,
    env: &Env,
    out: &mut dyn Write,
    req: &Request,
    db: &Path,
    shown: &str,
    id: Option<&str>,
) -> Result<Outcome> {
    use dshs::log::sqlite::write::{self as store_write, Options};
    let fault = super::store_test_fault()?;
    let mut lookout = Lookout::new(req);
    let session = store::Scanned::read(db, shown, id, env, &mut lookout)?;
    let name = &session.name;
    if let Some(torn) = session.end.snapshot.torn {
        return Err(Failure::of(
            Outcome::Invalid,
            format!(
                "refusing to compact {name}: it has a torn tail of {} row{} from seq {} that DSH drops on load; run `dshs repair` first — nothing was written",
                torn.rows,
                plural(torn.rows),
                torn.seq
            ),
        ));
    }
    let plan = planned(
        &session.scan,
        &lookout,
        req,
        session.change.spool.path(),
        name,
        &session.errors,
    )?;
    let verdict = session
        .change
        .verify(plan.edit(), plan.encoding, &session.opts);
    check_verified(&plan, verdict, &session.change.name, name)?;
    if args.dry_run {
        return print_dry_run(&plan, name, env, out);
    }
    let id = session.end.snapshot.id.clone();
    let write_plan = store_write::Plan {
        snapshot: session.end.snapshot,
        cut: false,
        append: plan.lines.clone(),
    };
    let options = Options {
        allow_old_schema: args.allow_old_schema,
        fault,
    };
    let written = store::write_checked(db, shown, &id, &write_plan, options, &session.opts)?;
    if !env.quiet {
        writeln!(
            out,
            "{name}: replaced {}{}",
            describe(&plan),
            written
                .revision
                .map_or_else(String::new, |r| format!("; revision {r}"))
        )?;
    }
    Ok(Outcome::Success)
}

/// Debug builds only: `DSHS_TEST_MINT=TIME` fixes the fresh identities and the clock of a
/// compaction (two constant UUIDs, `time` = TIME), so that the crash-consistency tests can
/// compare an interrupted run with an uninterrupted one byte for byte. Release builds
/// ignore the variable.
/// The compaction planned over a scanned log whose plaintext is at `plain` (for the
/// messages), or the refusal.
fn planned(
    scan: &dshs::log::scan::Scan,
    lookout: &Lookout,
    req: &Request,
    plain: &Path,
    name: &str,
    errors: &ErrorList,
) -> Result<CompactPlan> {
    let cannot_read = writing::cannot_read(name);
    let minted = match test_minted() {
        Some(m) => m,
        None => Minted::fresh().map_err(|e| Failure::usage(e.to_string()))?,
    };
    let mut deriver = Deriver::open(plain).map_err(|e| cannot_read(&e))?;
    match compact::plan(scan, lookout, req, minted, &mut deriver) {
        Ok(p) => Ok(p),
        Err(PlanError::Refused(r)) => Err(refuse(name, &r, errors)),
        Err(PlanError::Read(e)) => Err(Failure::usage(format!("cannot read {name}: {e}"))),
        Err(e @ PlanError::Encode(_)) => Err(Failure::usage(format!("{name}: {e}"))),
    }
}

/// The refusal when the log with the compaction appended would not validate cleanly.
/// Refuse a compaction that would not validate cleanly with its events appended (a case
/// dshs does not handle), after showing that scan's findings under the log's own `log` name.
fn check_verified(
    plan: &CompactPlan,
    verdict: io::Result<(dshs::log::scan::Scan, Vec<dshs::log::Finding>)>,
    log: &str,
    name: &str,
) -> Result<()> {
    let (result, findings) = verdict.map_err(|e| writing::cannot_read(name)(&e))?;
    if !plan.verified(&result) {
        writing::print_findings(log, findings.iter());
        return Err(Failure::of(
            Outcome::Invalid,
            format!(
                "refusing to compact {name}: with the compaction appended it would not validate cleanly (a case dshs does not handle; please report it); nothing was written"
            ),
        ));
    }
    Ok(())
}

/// `--dry-run`: the events on stdout, what they would replace on stderr.
fn print_dry_run(
    plan: &CompactPlan,
    name: &str,
    env: &Env,
    out: &mut dyn Write,
) -> Result<Outcome> {
    for line in &plan.lines {
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    if !env.quiet {
        crate::render::diag!(
            "{name}: would replace {}; nothing was written",
            describe(plan)
        );
    }
    Ok(Outcome::Success)
}

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

fn refuse(name: &str, refusal: &Refusal, errors: &ErrorList) -> anyhow::Error {
    if matches!(refusal, Refusal::Invalid { .. } | Refusal::Unsupported) {
        writing::print_errors(name, errors);
    }
    let outcome = if refusal.is_unsupported() {
        Outcome::Unsupported
    } else {
        Outcome::Invalid
    };
    Failure::of(
        outcome,
        format!(
            "refusing to compact {name}: {}; nothing was written",
            refusal.describe(name)
        ),
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
