//! `dshs grep PATTERN [PATH...]`: find where something was said or done, in the decoded text
//! of every log below the paths (default: DSH's storage root), several logs at a time.
//!
//! Each log is first read raw: the pattern's literal test (`log::grep::prefilter`) says which
//! lines could hold a match, and a log with none is done without being parsed; nor is one
//! whose candidate lines, decoded alone ([`confirm`]), hold no match. Any other log is folded
//! by the one pass (`scan`) with a [`Search`] observer, which searches the text of those
//! lines' events and holds the matches until the end of the log, where the final surface says
//! which are shadowed. Output keeps the order of the paths.

use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::Result;

use dshs::log::Finding;
use dshs::log::finding::FirstError;
use dshs::log::grep::{
    Candidates, Extract, Keep, Matches, Pattern, PatternOptions, Query, Role, Search, Turns,
    confirm, prefilter, text,
};
use dshs::log::input::{self, Opened, Source};
use dshs::log::scan::{FullLines, Scan, ScanOptions, Status};

use super::targets::{Target, targets};
use crate::cli::{GrepArgs, GrepRole, ReportFormat};
use crate::exit::{Failure, Outcome};
use crate::render::grep::{Printer, Summary};
use crate::render::{diag, escape};

use super::{Env, Seekable};

mod live;

/// Candidate lines remembered per log; a log with more is searched event by event.
const MAX_CANDIDATES: usize = 1 << 18;

/// Bytes of candidate lines kept per log to confirm, before the fold, that one matches; a log
/// with more is folded without asking.
const CONFIRM_BYTES: usize = 8 << 20;

/// Characters of a matching line shown on a terminal (the JSON output has all of it).
const WINDOW: usize = 300;

/// What this command's output is like (for the progress bar).
pub fn output(args: &GrepArgs) -> super::Output {
    super::Output::report(args.format, false)
}

pub fn run(args: &GrepArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    let env = &env.for_output(output(args));
    let query = query_of(args, env.quiet).map_err(Failure::usage)?;
    if args.follow.follow {
        return live::run(args, &query, env, out);
    }
    let (targets, mut errors) = targets(&args.paths, "search").map_err(Failure::usage)?;
    let jobs = super::jobs(args.jobs);
    let env = &env.for_jobs(jobs, targets.len());
    let opts = ScanOptions {
        stop_after: args.at,
        ..env.scan_options()
    };
    let mut printer = Printer::new(
        out,
        env.color_out,
        args.format,
        mode(args),
        query.pattern.regex(),
    );
    let mut summary = Summary::default();
    // The exit status of the logs that could not be searched: 2, or 4 at a limit of dshs's own.
    let mut failed = Outcome::Failure;
    let result = super::in_parallel(
        &targets,
        jobs,
        |t| match search_target(t, &query, env, &opts, &args.session, true) {
            Found::Expand => search_target(t, &query, env, &opts, &args.session, false),
            found => found,
        },
        |found| {
            summary.logs += u64::from(!matches!(found, Found::NotWanted | Found::Vanished));
            match found {
                Found::NotWanted | Found::Expand => {}
                Found::Unreadable(message, why) => {
                    errors += 1;
                    failed = failed.worst(why);
                    crate::render::error_message(&message);
                }
                Found::Nothing | Found::Vanished => {}
                Found::Searched(log) => {
                    summary.parsed += 1;
                    report_state(&log, args.at, env.quiet, &mut summary);
                    let Searched { name, matches, .. } = *log;
                    let totals = printer.log(&name, matches)?;
                    summary.add(&totals);
                    // `-q`: the first match decides the exit status; the rest is not read.
                    if env.quiet && summary.lines > 0 {
                        return Err(anyhow::Error::new(QuietMatch));
                    }
                }
            }
            Ok(())
        },
    );
    match result {
        Err(e) if e.is::<QuietMatch>() => return Ok(Outcome::Success),
        other => other?,
    }
    summary.errors = errors;
    printer.finish(&summary)?;
    let matched = summary.lines > 0;
    Ok(if errors > 0 && !(env.quiet && matched) {
        failed
    } else if matched {
        Outcome::Success
    } else {
        Outcome::NoMatch
    })
}

/// Ends the run at the first match under `-q`.
#[derive(Debug, thiserror::Error)]
#[error("a match was found (quiet)")]
struct QuietMatch;

/// What is printed for each log.
fn mode(args: &GrepArgs) -> crate::render::grep::Mode {
    use crate::render::grep::Mode;
    if args.files_with_matches {
        Mode::Files
    } else if args.count {
        Mode::Count
    } else {
        Mode::Lines {
            context: args.context.unwrap_or(0) > 0,
        }
    }
}

fn query_of(args: &GrepArgs, quiet: bool) -> Result<Query, String> {
    let pattern = Pattern::new(&PatternOptions {
        pattern: args.pattern.clone(),
        fixed: args.fixed_strings,
        ignore_case: args.ignore_case,
        word: args.word_regexp,
    })
    .map_err(|e| format!("invalid pattern: {e}"))?;
    let counting = args.count || args.files_with_matches;
    if let (Some(since), Some(until)) = (&args.since, &args.until)
        && since.ms > until.last_ms
    {
        return Err(format!(
            "--since {} is after --until {}: no event can be in between",
            escape(&since.text),
            escape(&until.text)
        ));
    }
    Ok(Query {
        pattern,
        types: args.types.clone(),
        roles: args
            .role
            .iter()
            .map(|r| match r {
                GrepRole::User => Role::User,
                GrepRole::Assistant => Role::Assistant,
                GrepRole::System => Role::System,
                GrepRole::Tool => Role::Tool,
                GrepRole::Developer => Role::Developer,
            })
            .collect(),
        turns: args.turn.map(|t| Turns {
            first: t.first,
            last: t.last,
        }),
        since: args.since.as_ref().map(|t| t.ms),
        until: args.until.as_ref().map(|t| t.last_ms),
        surface_only: args.surface,
        extract: Extract {
            chunks: args.chunks,
        },
        context: if counting {
            0
        } else {
            args.context.unwrap_or(0)
        },
        keep: if counting {
            Keep::Count
        } else if args.format == ReportFormat::Json {
            Keep::Line
        } else {
            Keep::Window(WINDOW)
        },
        // `-l` as JSON still reports each log's counts.
        first_match_only: quiet || (args.files_with_matches && args.format != ReportFormat::Json),
    })
}

/// One log's search, handed to the printer in path order.
enum Found {
    /// `--session` names other sessions.
    NotWanted,
    /// Not searched: what to say, and why (2, or 4 at one of dshs's own limits).
    Unreadable(String, Outcome),
    /// No line of it could hold a match (it was not parsed).
    Nothing,
    /// Found below a root, gone when it was read (a note has said so).
    Vanished,
    Searched(Box<Searched>),
    /// A store session read with its packed rows kept packed, whose search cannot stand for
    /// the expanded log's: to be searched again, expanded (nothing was said of it).
    Expand,
}

struct Searched {
    name: String,
    matches: Matches,
    scan: Scan,
    first_error: Option<Finding>,
    /// The seq of the log's last event read (the fold's state is dropped before printing).
    last_seq: Option<u64>,
}

/// A log that can be opened again from the start.
enum Reopen {
    Path(PathBuf, String),
    Spool(Seekable),
}

impl Reopen {
    fn open(&self) -> io::Result<Opened> {
        match self {
            Reopen::Path(p, name) => input::open(&Source::Path(p.clone()))
                .map(|mut o| {
                    o.name = name.clone();
                    o
                })
                .map_err(|e| match &e {
                    // The kind says whether the log is gone.
                    input::InputError::Open { source, .. } => {
                        io::Error::new(source.kind(), e.to_string())
                    }
                    _ => io::Error::other(e.to_string()),
                }),
            Reopen::Spool(s) => s.open(),
        }
    }
}

fn search_target(
    target: &Target,
    query: &Query,
    env: &Env,
    opts: &ScanOptions,
    sessions: &[String],
    packed: bool,
) -> Found {
    let mut moved = None;
    let (first, again) = match target {
        Target::Path { name, listed } => {
            let path = PathBuf::from(name);
            let open = || input::open(&Source::Path(path.clone()));
            let opened = if *listed {
                super::open_listed(name, open).transpose()
            } else {
                Some(open())
            };
            let Some(opened) = opened else {
                return Found::Vanished;
            };
            match opened {
                // A path that is not a regular file (a FIFO, `<(…)`, `/dev/stdin`) can be
                // read once: spooled like standard input, never opened a second time.
                Ok(o) if o.path.is_none() => match spool(o, name) {
                    Ok(pair) => pair,
                    Err((e, why)) => return Found::Unreadable(e, why),
                },
                Ok(o) => (o, Reopen::Path(path, name.clone())),
                Err(e) => return Found::Unreadable(e.to_string(), Outcome::Failure),
            }
        }
        Target::Session { path, shown, id } => {
            // The logical log, spooled like standard input: it is read twice. A format 0/1
            // session is first read with its packed rows kept packed (a quarter of the bytes
            // to spool and search) unless chunks are searched: only chunks are in packed
            // rows, so no match or neighbour is, and each is moved to its place in the
            // expanded log (see `Search::moving`).
            let packed = packed && !query.extract.chunks && opts.stop_after.is_none();
            let spooled = super::store::open_one(path, shown, Some(id))
                .and_then(|(db, id)| {
                    super::store::open_session_with(
                        db,
                        shown,
                        &id,
                        env.quiet,
                        packed,
                        env.scan_options().parse_threads(),
                        false,
                    )
                })
                .map_err(|e| (e.to_string(), Failure::outcome_of(&e)))
                .and_then(|(o, end)| {
                    let name = o.name.clone();
                    Seekable::new(o)
                        .map(|spool| (spool, end.packed_read()))
                        .map_err(|e| (format!("cannot read {name}: {e}"), Outcome::of_read(&e)))
                });
            let spool = match spooled {
                Ok((_, Some(read))) if !read.clean => return Found::Expand,
                Ok((s, read)) => {
                    moved = read;
                    s
                }
                Err((e, why)) => return Found::Unreadable(e, why),
            };
            match spool.open() {
                Ok(o) => (o, Reopen::Spool(spool)),
                Err(e) => return Found::Unreadable(e.to_string(), Outcome::of_read(&e)),
            }
        }
        Target::Stdin => match input::open(&Source::Stdin)
            .map_err(|e| (e.to_string(), Outcome::Failure))
            .and_then(|o| spool(o, "-"))
        {
            Ok(pair) => pair,
            Err((e, why)) => return Found::Unreadable(e, why),
        },
    };
    let name = first.name.clone();
    let filter = query
        .pattern
        .prefilter()
        .map(|f| f.keeping(&text::joined_stream_markers(&query.extract)));
    let filter = filter.as_ref();
    let candidates = if filter.is_some() || !sessions.is_empty() {
        let mut reader = first.reader;
        let version = std::cell::Cell::new(None);
        let wanted = |header: &[u8]| {
            let h = serde_json::from_slice::<serde_json::Value>(header).ok();
            version.set(h.as_ref().and_then(|h| h.get("version")?.as_u64()));
            sessions.is_empty() || h.is_some_and(|h| session_wanted(&h, sessions))
        };
        // Each kept line is confirmed as the pass keeps it, once: when the first match ends
        // the search, the first candidate line that holds one ends the pass (the fold reads
        // no further than that unless it must: lines after it are all candidates); else the
        // pass reads on for the candidates but keeps no more lines.
        let on_enough = match query.ends_at_first_match() {
            true => prefilter::OnEnough::Stop,
            false => prefilter::OnEnough::StopKeeping,
        };
        let confirmed = std::cell::Cell::new(false);
        let enough = |lines: &[(u64, Vec<u8>)]| {
            let found = confirm(query, version.get(), lines);
            confirmed.set(confirmed.get() || found);
            found
        };
        let mut kept = prefilter::Kept::with_budget(CONFIRM_BYTES);
        let raw = prefilter::raw_pass(
            &mut reader,
            filter,
            MAX_CANDIDATES,
            wanted,
            &mut kept,
            on_enough,
            enough,
        );
        match raw {
            Ok(None) => return Found::NotWanted,
            Ok(Some(Candidates::None)) => return Found::Nothing,
            // Candidate lines, every one kept and confirmed, and none whose decoded text
            // matches: nothing to fold for.
            Ok(Some(c @ Candidates::Lines { .. })) if !kept.overflowed && !confirmed.get() => {
                drop(c);
                return Found::Nothing;
            }
            Ok(Some(c)) => c,
            // The scan reads as far as it can and says what is wrong.
            Err(_) => Candidates::All,
        }
    } else {
        drop(first);
        Candidates::All
    };
    let opened = match again.open() {
        Ok(o) => o,
        Err(e) => {
            // Gone between the raw pass and the fold.
            if let (Target::Path { listed: true, .. }, Reopen::Path(..)) = (target, &again)
                && e.kind() == io::ErrorKind::NotFound
                && !input::is_session_dir(std::path::Path::new(&name))
            {
                super::note_vanished(&name);
                return Found::Vanished;
            }
            return Found::Unreadable(format!("cannot read {name}: {e}"), Outcome::of_read(&e));
        }
    };
    // The light pass: only the candidate lines are read whole (their text is searched), or
    // every line when a match's neighbours are shown.
    let full = match (&candidates, query.context) {
        (Candidates::Lines { offsets, end }, 0) => FullLines::new(offsets.clone(), *end),
        _ => FullLines::all(),
    };
    let opts = &ScanOptions {
        light: Some(full),
        ..opts.clone()
    };
    let mut search = Search::new(query, candidates);
    if let Some(read) = moved {
        search.moving(read);
    }
    let mut first_error = FirstError::default();
    let scan = super::scan_source(opened, env, opts, &mut first_error, &mut search);
    let mut scan = match scan {
        Ok(s) => s,
        Err(_) if search.moved_by().is_some() => return Found::Expand,
        Err(e) => {
            let why = Outcome::of_read(&e);
            return Found::Unreadable(format!("cannot read {name}: {e}"), why);
        }
    };
    let mut first_error = first_error.0;
    if let Some(read) = search.moved_by() {
        // The packed read stands when every match and neighbour moved to the expanded
        // log, and so does what the note says.
        if search.unmoved()
            || !read.stands_with(&scan)
            || first_error.as_mut().is_some_and(|f| !read.move_finding(f))
        {
            return Found::Expand;
        }
    }
    let matches = search.finish(scan.state.as_ref());
    let last_seq = scan
        .state
        .as_ref()
        .and_then(|s| s.surface.next_seq().checked_sub(1));
    // The surface is not needed any more; the result may wait a while to be printed.
    scan.state = None;
    Found::Searched(Box::new(Searched {
        name,
        matches,
        scan,
        first_error,
        last_seq,
    }))
}

/// A log that can be read only once, copied to a temporary file: a reader of the copy, and
/// the copy to read it again.
fn spool(opened: Opened, name: &str) -> Result<(Opened, Reopen), (String, Outcome)> {
    let failed = |e: io::Error| (format!("cannot read {name}: {e}"), Outcome::of_read(&e));
    let spool = Seekable::new(opened).map_err(failed)?;
    match spool.open() {
        Ok(o) => Ok((o, Reopen::Spool(spool))),
        Err(e) => Err(failed(e)),
    }
}

/// Is the header's `id` one of `sessions` (or does it start with one)?
fn session_wanted(header: &serde_json::Value, sessions: &[String]) -> bool {
    header
        .get("id")
        .and_then(serde_json::Value::as_str)
        .is_some_and(|id| sessions.iter().any(|s| id.starts_with(s.as_str())))
}

/// Notes on stderr for a log that does not load as DSH would load it, or that ended before
/// `--at`. A log read only up to its first match (`-l`) is noted for what that part holds.
fn report_state(log: &Searched, at: Option<u64>, quiet: bool, summary: &mut Summary) {
    if log.scan.status() != Status::Valid {
        summary.not_valid += 1;
    }
    let light = format!(
        "checked for every rule but {}",
        dshs::log::scan::light::unchecked_summary()
    );
    super::note_status_checked(
        &log.name,
        &log.scan,
        log.first_error.as_ref(),
        quiet,
        Some(&light),
    );
    if let Some(at) = at
        && log.scan.stop_not_reached
        && !log.scan.ended_early
        && !quiet
    {
        let last = match log.last_seq {
            Some(last) => format!("its last event is seq {last}"),
            None => "it has no events".to_owned(),
        };
        diag!(
            "dshs: note: --at {at}: {} has no event with seq {at} ({last}); it was searched whole, as it stands at its end",
            escape(&log.name),
        );
    }
}
