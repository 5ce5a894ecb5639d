//! `dshs ls [ROOT]`: every session under a DSH storage root (§2.1), one row each, each
//! validated (in parallel, one log per worker) to give its state.
//!
//! Rows are sorted by last activity, newest first (the last committed event's time, else
//! the header's `createdAt`; sessions with neither come last), then by path. The exit status
//! is 0 whenever the root could be listed — the states are the listing's content — and 2
//! when it cannot be read.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use dshs::log::event::Kind;
use dshs::log::finding::Discard;
use dshs::log::input::{self, Source};
use dshs::log::scan::{EventInfo, FoldState, Observer, Status};

use crate::cli::{LsArgs, ReportFormat};
use crate::exit::{Failure, Outcome};
use crate::render::human::{Painter, plural};
use crate::render::{Clock, escape};

use super::Env;

/// One session's row.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    #[serde(rename = "type")]
    kind: &'static str,
    /// The session directory.
    path: String,
    /// The generation file read (the newest).
    file: Option<String>,
    /// Canonical generation files in the directory (the newest is read).
    generations: usize,
    /// A session of a SQLite store: its physical rows in `events` (a packed row counts once).
    #[serde(skip_serializing_if = "Option::is_none")]
    rows: Option<u64>,
    id: Option<String>,
    cwd: Option<String>,
    version: Option<i64>,
    created_at: Option<i64>,
    last_event_time: Option<i64>,
    events: u64,
    turns: u64,
    /// valid / interrupted (open turn) / torn (torn tail or crash tail) / invalid /
    /// unsupported / unreadable.
    status: &'static str,
    errors: u64,
    warnings: u64,
    /// Why the session could not be read (its log is not a regular file, say).
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
}

impl Row {
    /// A session at `path` before anything of it is read: unreadable until a read says more.
    fn unread(path: String) -> Row {
        Row {
            kind: "session",
            path,
            file: None,
            generations: 0,
            rows: None,
            id: None,
            cwd: None,
            version: None,
            created_at: None,
            last_event_time: None,
            events: 0,
            turns: 0,
            status: Status::Unreadable.as_str(),
            errors: 0,
            warnings: 0,
            problem: None,
        }
    }

    fn last_activity(&self) -> Option<i64> {
        self.last_event_time.or(self.created_at)
    }
}

/// Counts turns and remembers the last event time of the committed prefix.
#[derive(Default)]
struct Activity {
    turns: u64,
    last_time: Option<i64>,
    saved: Option<(u64, Option<i64>)>,
}

impl Observer for Activity {
    fn event(&mut self, info: &EventInfo<'_, '_>, _state: &FoldState) {
        if info.event.kind == Kind::TurnStart {
            self.turns += 1;
        }
        self.last_time = Some(info.event.time);
    }

    /// A packed row's later members are chunks: no turn starts, and only the last one's
    /// time counts.
    fn members_passed(&mut self, _members: u64, time: i64) {
        self.last_time = Some(time);
    }

    fn wants_each_event(&self) -> bool {
        false
    }

    fn reads_stream_records(&self) -> bool {
        false
    }

    fn speculation_started(&mut self) {
        self.saved = Some((self.turns, self.last_time));
    }

    fn speculation_ended(&mut self, committed: bool) {
        if let Some((turns, last)) = self.saved.take()
            && !committed
        {
            self.turns = turns;
            self.last_time = last;
        }
    }
}

pub fn run(args: &LsArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    let Some(root) = args.root.clone().or_else(super::default_root) else {
        return Err(Failure::usage(
            "no ROOT given and neither DSH_HOME nor HOME is set",
        ));
    };
    if super::store::empty_store(&root) {
        // As `validate` says (sqlite-store-empty): DSH would initialise it; no session yet.
        crate::render::diag!(
            "dshs: note: {} is an empty SQLite store: it holds no session",
            crate::render::escape(&root.display().to_string())
        );
        return print_rows(&mut Vec::new(), &root, args, env, out);
    }
    if root.is_file() && dshs::log::sqlite::has_magic(&root).unwrap_or(false) {
        let mut rows = store_rows(&root, env)?;
        return print_rows(&mut rows, &root, args, env, out);
    }
    let sessions = match input::find_sessions(&root) {
        Ok(s) => s,
        Err(e) => {
            return Err(Failure::usage(format!(
                "cannot list {}: {e}",
                root.display()
            )));
        }
    };
    // Logs the walk does not read (loose, or nested deeper than sessions are looked for)
    // are named, as `validate ROOT` names them.
    super::note_strays(
        &root.display().to_string(),
        &input::stray_logs(&root, &sessions),
        !sessions.is_empty(),
    );
    let mut rows = Vec::with_capacity(sessions.len());
    let jobs = super::jobs(args.jobs);
    let env = &env.for_jobs(jobs, sessions.len());
    super::in_parallel(
        &sessions,
        jobs,
        // The table shows no warning count, the only thing the light pass may count
        // differently (see `dshs::log::scan::light`).
        |dir| row_of(dir, env, args.format == ReportFormat::Human),
        |row| {
            rows.push(row);
            Ok(())
        },
    )?;
    print_rows(&mut rows, &root, args, env, out)
}

fn print_rows(
    rows: &mut [Row],
    root: &Path,
    args: &LsArgs,
    env: &Env,
    out: &mut dyn Write,
) -> Result<Outcome> {
    rows.sort_by(|a, b| {
        b.last_activity()
            .cmp(&a.last_activity())
            .then_with(|| a.path.cmp(&b.path))
    });
    match args.format {
        ReportFormat::Json => {
            for row in rows.iter() {
                serde_json::to_writer(&mut *out, row)?;
                out.write_all(b"\n")?;
            }
        }
        ReportFormat::Human => {
            print_table(rows, root, env, out)?;
            for row in rows.iter() {
                if let Some(problem) = &row.problem {
                    crate::render::diag!("dshs: note: {}: {}", escape(&row.path), escape(problem));
                }
            }
        }
    }
    Ok(Outcome::Success)
}

/// One row per session of a SQLite store (SQLITE.md S11.7), each validated the way
/// `validate STORE.db#ID` does: the pass over its logical log and the storage findings.
fn store_rows(path: &Path, env: &Env) -> Result<Vec<Row>> {
    use dshs::log::sqlite::combined_status;
    let shown = path.display().to_string();
    let refused = |e: dshs::log::sqlite::StoreError| {
        Failure::of(super::store::outcome_of_class(e.class()), e.to_string())
    };
    let mut store = super::store::open_store(path).map_err(refused)?;
    let sessions = store.sessions().map_err(refused)?;
    let mut rows = Vec::with_capacity(sessions.len());
    for info in sessions {
        let s = &info.row;
        let mut row = Row {
            rows: Some(info.rows),
            id: Some(s.id.clone()),
            cwd: s.cwd.clone(),
            version: s.version,
            created_at: s.created_at,
            ..Row::unread(super::store::session_name(&shown, &s.id))
        };
        let mut r = match store.read(&s.id) {
            Ok(r) => r,
            Err(e) => {
                row.problem = Some(e.to_string());
                rows.push(row);
                continue;
            }
        };
        // First the fast way, as `validate` reads it (see `store::fast_scan`).
        let (opts, fast) = super::store::prepare_fast(&mut r, env);
        let mut refused_early = match r.derive_is_seeded() {
            Ok(_) => r.findings().iter().any(dshs::log::Finding::is_error),
            Err(e) => {
                row.problem = Some(e.to_string());
                rows.push(row);
                continue;
            }
        };
        let mut activity = Activity::default();
        let mut scan = None;
        if fast && !refused_early {
            match super::store::fast_scan(&mut r, &opts, &mut Discard, &mut activity) {
                Ok(Some(s)) => scan = Some(s),
                Ok(None) => refused_early = r.findings().iter().any(dshs::log::Finding::is_error),
                Err(e) => {
                    row.problem = Some(e.to_string());
                    rows.push(row);
                    continue;
                }
            }
        }
        if scan.is_none() && !refused_early {
            match dshs::log::scan::scan(&mut r, None, &opts, &mut Discard, &mut activity) {
                Ok(s) => scan = Some(s),
                Err(e) => {
                    row.problem = Some(format!("cannot read it: {e}"));
                    rows.push(row);
                    continue;
                }
            }
        }
        let end = match r.finish() {
            Ok(end) => end,
            Err(e) => {
                row.problem = Some(e.to_string());
                rows.push(row);
                continue;
            }
        };
        let storage_errors = end.findings.iter().filter(|f| f.is_error()).count() as u64;
        row.errors = storage_errors;
        row.warnings = end.findings.len() as u64 - storage_errors;
        let logical = scan.as_ref().map_or(Status::Valid, |s| s.status());
        if let Some(scan) = &scan {
            row.events = scan.events();
            row.errors += scan.tally.errors;
            row.warnings += scan.tally.warnings;
        }
        row.turns = activity.turns;
        row.last_event_time = activity.last_time;
        let torn = end.snapshot.torn.is_some()
            || scan
                .as_ref()
                .is_some_and(|s| s.torn.is_some() || s.crash.is_some());
        row.status = match combined_status(logical, &end.findings) {
            Status::Valid if torn => "torn",
            Status::Valid if scan.as_ref().is_some_and(|s| s.open_turn()) => "interrupted",
            other => other.as_str(),
        };
        rows.push(row);
    }
    Ok(rows)
}

fn row_of(dir: &Path, env: &Env, light: bool) -> Row {
    let mut row = Row {
        generations: input::generations(dir).map_or(0, |g| g.len()),
        ..Row::unread(dir.display().to_string())
    };
    // A generation that is not a regular file (a FIFO would block the open) is refused by
    // `open` before it is opened.
    let opened = match input::open(&Source::Path(dir.to_path_buf())) {
        Ok(o) => o,
        Err(e) => {
            row.problem = Some(e.to_string());
            return row;
        }
    };
    row.file = opened
        .path
        .as_deref()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned());
    let mut activity = Activity::default();
    let scan = match dshs::log::scan::scan_framed(
        opened.reader,
        opened.framing.as_ref(),
        opened.path.as_deref(),
        &dshs::log::scan::ScanOptions {
            light: light.then(dshs::log::scan::FullLines::default),
            ..env.scan_options()
        },
        &mut Discard,
        &mut activity,
    ) {
        Ok(s) => s,
        Err(e) => {
            row.problem = Some(format!("cannot read it: {e}"));
            return row;
        }
    };
    if let Some(h) = &scan.header {
        row.id = h.id.clone();
        row.cwd = h.cwd.clone();
        row.created_at = h.created_at;
    } else {
        // An unsupported (or broken) header is not checked, but its facts still name the
        // session in a listing when they have the usual types.
        lenient_header(dir, &mut row);
    }
    row.version = scan.version;
    row.events = scan.events();
    row.turns = activity.turns;
    row.last_event_time = activity.last_time;
    row.errors = scan.tally.errors;
    row.warnings = scan.tally.warnings;
    row.status = match scan.status() {
        Status::Valid if scan.torn.is_some() || scan.crash.is_some() => "torn",
        Status::Valid if scan.open_turn() => "interrupted",
        other => other.as_str(),
    };
    row
}

/// The longest header line read for [`lenient_header`].
const HEADER_LIMIT: u64 = 1 << 20;

fn lenient_header(dir: &Path, row: &mut Row) {
    let Ok(opened) = input::open(&Source::Path(dir.to_path_buf())) else {
        return;
    };
    let mut line = Vec::new();
    if std::io::BufRead::read_until(
        &mut std::io::Read::take(opened.reader, HEADER_LIMIT),
        b'\n',
        &mut line,
    )
    .is_err()
    {
        return;
    }
    let Ok(serde_json::Value::Object(h)) = serde_json::from_slice(&line) else {
        return;
    };
    row.id = h.get("id").and_then(|v| v.as_str()).map(str::to_owned);
    row.cwd = h.get("cwd").and_then(|v| v.as_str()).map(str::to_owned);
    row.created_at = h.get("createdAt").and_then(serde_json::Value::as_i64);
}

fn print_table(rows: &[Row], root: &Path, env: &Env, out: &mut dyn Write) -> Result<()> {
    let painter = Painter {
        color: env.color_out,
    };
    let clock = Clock::local();
    let time = |ms: Option<i64>| ms.map_or_else(|| "-".to_owned(), |t| clock.format_or_raw(t));
    // A SQLite store's sessions also show their physical rows (S11.7), after EVENTS.
    let with_rows = rows.iter().any(|r| r.rows.is_some());
    let mut header = vec!["LAST EVENT", "STATUS", "V", "EVENTS"];
    if with_rows {
        header.push("ROWS");
    }
    header.extend(["TURNS", "ID", "CWD", "CREATED", "PATH"]);
    let numbers = 2..=if with_rows { 5 } else { 4 };
    // The session directory, below the root the summary line names: two directories holding
    // the same session id (a copy, a backup) are told apart by it.
    let path_of = |r: &Row| {
        let dir = Path::new(&r.path);
        let shown = dir.strip_prefix(root).unwrap_or(dir).display().to_string();
        escape(&shown).into_owned()
    };
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut c = vec![
                // Seconds are enough in a listing.
                time(r.last_event_time)
                    .get(..19)
                    .map_or_else(|| time(r.last_event_time), str::to_owned),
                r.status.to_owned(),
                r.version.map_or_else(|| "-".to_owned(), |v| v.to_string()),
                r.events.to_string(),
            ];
            if with_rows {
                c.push(r.rows.map_or_else(|| "-".to_owned(), |n| n.to_string()));
            }
            c.extend([
                r.turns.to_string(),
                escape(r.id.as_deref().unwrap_or("-")).into_owned(),
                escape(r.cwd.as_deref().unwrap_or("-")).into_owned(),
                time(r.created_at)
                    .get(..19)
                    .map_or_else(|| time(r.created_at), str::to_owned),
                path_of(r),
            ]);
            c
        })
        .collect();
    // Cells are measured in terminal columns (a CJK character or an emoji takes two), as
    // `surface` measures its previews.
    let width_of = crate::render::surface::width_of;
    let mut widths: Vec<usize> = header.iter().map(|h| width_of(h)).collect();
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(width_of(c));
        }
    }
    let last = header.len() - 1;
    // Numbers right-aligned, text left-aligned; the last column is not padded.
    let line = |cols: &[&str]| -> String {
        let mut s = String::new();
        for (i, (c, w)) in cols.iter().zip(&widths).enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            let pad = w.saturating_sub(width_of(c));
            if numbers.contains(&i) {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            } else if i == last {
                s.push_str(c);
            } else {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            }
        }
        s
    };
    if !rows.is_empty() {
        writeln!(out, "{}", painter.bold(&line(&header)))?;
    }
    for row in &cells {
        let text = line(&row.iter().map(String::as_str).collect::<Vec<_>>());
        let text = match row[1].as_str() {
            "invalid" | "unsupported" | "unreadable" => {
                painter.paint(&text, owo_colors::Style::new().red())
            }
            "torn" | "interrupted" => painter.paint(&text, owo_colors::Style::new().yellow()),
            _ => text,
        };
        writeln!(out, "{text}")?;
    }
    if !env.quiet {
        let mut counts: Vec<(&str, u64)> = Vec::new();
        for r in rows {
            match counts.iter_mut().find(|(s, _)| *s == r.status) {
                Some((_, n)) => *n += 1,
                None => counts.push((r.status, 1)),
            }
        }
        counts.sort_by_key(|(s, _)| status_rank(s));
        let parts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
        let n = rows.len() as u64;
        writeln!(
            out,
            "{}",
            painter.dim(&format!(
                "{n} session{} under {}{}{}",
                plural(n),
                escape(&root.display().to_string()),
                if parts.is_empty() { "" } else { ": " },
                parts.join(", ")
            ))
        )?;
    }
    Ok(())
}

fn status_rank(s: &str) -> u8 {
    match s {
        "valid" => 0,
        "interrupted" => 1,
        "torn" => 2,
        "invalid" => 3,
        "unsupported" => 4,
        _ => 5,
    }
}
