//! `dshs stats`: what a log holds, in numbers — from one pass of the streaming scan with an
//! observer that counts. Only the committed prefix counts: what the observer gathers while
//! a speculation runs (rows after a bad row) is forgotten if the speculation is rolled back
//! as a crash tail.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::PoisonError;

use anyhow::{Context, Result};
use owo_colors::Style;
use serde::Serialize;

use dshs::log::dialect::SeedField;
use dshs::log::finding::{Finding, FirstError};
use dshs::log::scan::{Scan, ScanOptions};
use dshs::log::stats::{Counter, Counts};
use dshs::log::usage::{SessionUsage, Tap};

use crate::cli::{ReportFormat, StatsArgs};
use crate::exit::Outcome;
use crate::render::human::{Painter, plural};
use crate::render::{Clock, escape, human_bytes};

use super::Env;
use super::store::StoreEnd;

/// What this command's output is like (for the progress bar).
pub fn output(args: &StatsArgs) -> super::Output {
    super::Output::report(args.format, false)
}

pub fn run(args: &StatsArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    let env = &env.for_output(output(args));
    // A format 0/1 store session is read first with its packed rows kept packed (a 1 GiB
    // session of format 0 expands to 4 GiB of lines); that read stands when it says what
    // the expanded log says (see [`count`]), else the session is read again, expanded.
    let read = match count(args, env, true)? {
        Some(read) => read,
        None => count(args, env, false)?.context("the session could not be read")?,
    };
    let Read {
        name,
        scan,
        counts,
        calls,
        first_error,
        store,
    } = read;
    let report = Report::new(&name, &scan, &counts, &calls, &Clock::local());
    match args.format {
        ReportFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &report)?;
            out.write_all(b"\n")?;
        }
        ReportFormat::Human => {
            let painter = Painter {
                color: env.color_out,
            };
            write_human(out, &painter, &report)?;
        }
    }
    super::note_status(&name, &scan, first_error.as_ref(), env.quiet);
    if let Some(store) = store {
        return Ok(super::outcome_of_status(
            store.status(scan.status(), env.quiet)?,
        ));
    }
    Ok(super::outcome_of(&scan))
}

/// One pass over the log, and what it counted.
struct Read {
    name: String,
    scan: Scan,
    counts: Counts,
    calls: SessionUsage,
    first_error: Option<Finding>,
    store: Option<StoreEnd>,
}

/// The pass of `stats`; with `packed`, a format 0/1 store session is read with its packed
/// rows kept packed, and `None` says that read cannot stand for the expanded log: the read
/// did not end cleanly, the pass left a crash tail or a torn line (their sizes count a
/// packed row once), or the first error cannot be moved to its line of the expanded log.
/// Otherwise its byte counts are moved there (every other count is the expanded log's:
/// the pass folds a packed row's members as events, and the token count reads no member).
fn count(args: &StatsArgs, env: &Env, packed: bool) -> Result<Option<Read>> {
    let (mut opened, store) =
        super::open_input_with(&args.file, args.session.as_deref(), env, packed)?;
    let name = opened.name.clone();
    // Tokens are counted by `log::usage` from the bytes this pass reads (crash tail
    // included, each call once), so `stats` and `usage` never show two totals for one log.
    // Reads at positions would go around the tap.
    let (tap, feed) = Tap::new(opened.reader);
    opened.reader = Box::new(tap);
    opened.file = None;
    let mut counter = Counter::default();
    let mut first_error = FirstError::default();
    let scanned = super::scan_source(
        opened,
        env,
        &ScanOptions {
            from_store: store.is_some(),
            ..env.scan_options()
        },
        &mut first_error,
        &mut counter,
    );
    let packed_read = store.as_ref().and_then(StoreEnd::packed_read);
    let mut scan = match (scanned, &packed_read) {
        (Ok(s), _) => s,
        (Err(_), Some(_)) => return Ok(None),
        (Err(e), None) => return Err(super::read_failure(&name, &e)),
    };
    let mut first_error = first_error.0;
    if let Some(read) = packed_read {
        if !read.stands_with(&scan)
            || scan.committed_bytes != scan.total_bytes
            || first_error.as_mut().is_some_and(|f| !read.move_finding(f))
        {
            return Ok(None);
        }
        let Some(total) = scan.total_bytes.checked_add_signed(read.extra_bytes()) else {
            return Ok(None);
        };
        scan.total_bytes = total;
        scan.committed_bytes = total;
    }
    let feed = std::mem::take(&mut *feed.lock().unwrap_or_else(PoisonError::into_inner));
    Ok(Some(Read {
        name,
        scan,
        counts: counter.counts,
        calls: feed.finish(),
        first_error,
        store,
    }))
}

/// The JSON document (`--format json`); the human report shows the same facts.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub file: String,
    pub status: &'static str,
    pub errors: u64,
    pub warnings: u64,
    pub header: Option<HeaderFacts>,
    pub events: EventFacts,
    pub turns: TurnFacts,
    pub steps: u64,
    pub tools: ToolFacts,
    pub compaction: CompactionFacts,
    pub surface: SurfaceFacts,
    pub tokens: TokenFacts,
    pub models: BTreeMap<String, u64>,
    pub bytes: ByteFacts,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeaderFacts {
    pub id: Option<String>,
    pub version: Option<i64>,
    pub cwd: Option<String>,
    pub created_at: Option<i64>,
    pub created_at_local: Option<String>,
    pub parent_session: Option<String>,
    /// v0/v1: `seedLength > 0`; v2+: `isSeeded`.
    pub seeded: bool,
    /// Events inherited from the parent: v0/v1 `seedLength`; v2+ the seq of the last
    /// `session/end-seed {inherited: true}`.
    pub inherited_events: Option<u64>,
    pub origin: Option<String>,
    pub delegation_depth: Option<u64>,
    pub agent_preset: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventFacts {
    pub total: u64,
    pub by_type: BTreeMap<String, u64>,
    pub unusable_rows: u64,
    pub first_time: Option<i64>,
    pub last_time: Option<i64>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnFacts {
    pub started: u64,
    pub ended: u64,
    pub open: bool,
    pub end_reasons: BTreeMap<String, u64>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolFacts {
    pub calls: u64,
    pub advertised: u64,
    pub results: u64,
    pub error_results: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionFacts {
    pub compactions: u64,
    pub failed: u64,
    pub prunes: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SurfaceFacts {
    pub nodes: usize,
    pub messages: usize,
    pub replace_generation: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenFacts {
    pub assistant_messages: u64,
    pub with_usage: u64,
    /// Model calls, each counted once (USAGE.md, as `dshs usage` counts them).
    pub calls: u64,
    pub calls_without_usage: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub reasoning_tokens: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ByteFacts {
    pub total: u64,
    pub committed: u64,
    pub torn_tail: Option<u64>,
    pub crash_tail_rows: Option<u64>,
}

impl Report {
    pub fn new(file: &str, scan: &Scan, c: &Counts, u: &SessionUsage, clock: &Clock) -> Report {
        let tokens = u.tokens();
        let state = scan.state.as_ref();
        let header = scan.header.as_ref().map(|h| {
            let (seeded, inherited) = match scan.dialect.map(|d| d.seed_field) {
                Some(SeedField::Length) => (h.seed_length.is_some_and(|n| n > 0), h.seed_length),
                _ => (
                    h.is_seeded == Some(true),
                    state.and_then(|s| s.inherited_marker),
                ),
            };
            HeaderFacts {
                id: h.id.clone(),
                version: scan.version,
                cwd: h.cwd.clone(),
                created_at: h.created_at,
                created_at_local: h.created_at.and_then(|t| clock.format(t)),
                parent_session: h.parent_session.clone(),
                seeded,
                inherited_events: inherited,
                origin: h.origin.clone(),
                delegation_depth: h.delegation_depth,
                agent_preset: h.agent_preset.clone(),
            }
        });
        Report {
            file: file.to_owned(),
            status: scan.status().as_str(),
            errors: scan.tally.errors,
            warnings: scan.tally.warnings,
            header,
            events: EventFacts {
                total: scan.events(),
                by_type: c.by_type.clone(),
                unusable_rows: c.unusable,
                first_time: c.first_time,
                last_time: c.last_time,
            },
            turns: TurnFacts {
                started: c.turns_started,
                ended: c.turns_ended,
                open: scan.open_turn(),
                end_reasons: c.end_reasons.clone(),
            },
            steps: c.steps,
            tools: ToolFacts {
                calls: c.tool_calls,
                advertised: c.advertised_calls,
                results: c.tool_results,
                error_results: c.error_results,
            },
            compaction: CompactionFacts {
                compactions: state.map_or(0, |s| s.compaction.compactions),
                failed: c.failed_compactions,
                prunes: state.map_or(0, |s| s.compaction.prunes),
            },
            surface: SurfaceFacts {
                nodes: scan.surface_nodes(),
                messages: state.map_or(0, |s| s.surface.iter().filter(|n| n.derives).count()),
                replace_generation: state.map_or(0, |s| s.surface.replace_generation()),
            },
            tokens: TokenFacts {
                assistant_messages: c.assistant_messages,
                with_usage: c.with_usage,
                calls: u.calls.len() as u64,
                calls_without_usage: u.calls_without_usage(),
                input_tokens: tokens.input,
                output_tokens: tokens.output,
                cache_read_tokens: tokens.cache_read,
                cache_write_tokens: tokens.cache_write,
                reasoning_tokens: tokens.reasoning,
            },
            models: c.models.clone(),
            bytes: ByteFacts {
                total: scan.total_bytes,
                committed: scan.committed_bytes,
                torn_tail: scan.torn.map(|t| t.len),
                crash_tail_rows: scan.crash.map(|t| t.rows),
            },
        }
    }
}

/// `label  value` lines with the labels padded to one width (padding before colour, so
/// colour codes never break the alignment).
fn write_human(out: &mut dyn Write, p: &Painter, r: &Report) -> std::io::Result<()> {
    let clock = Clock::local();
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut row = |label: &str, value: String| rows.push((label.to_owned(), value));
    let opt = |v: &Option<String>| {
        v.as_deref()
            .map_or("-".to_owned(), |s| escape(s).into_owned())
    };

    row("file", escape(&r.file).into_owned());
    let status_style = match r.status {
        "valid" => Style::new().green().bold(),
        "unsupported" => Style::new().magenta().bold(),
        _ => Style::new().red().bold(),
    };
    row(
        "status",
        format!(
            "{} ({} error{}, {} warning{})",
            p.paint(r.status, status_style),
            r.errors,
            plural(r.errors),
            r.warnings,
            plural(r.warnings)
        ),
    );
    if let Some(h) = &r.header {
        row("session", opt(&h.id));
        row("version", h.version.map_or("-".into(), |v| v.to_string()));
        row("cwd", opt(&h.cwd));
        row(
            "created",
            match (&h.created_at_local, h.created_at) {
                (Some(local), _) => local.clone(),
                (None, Some(ms)) => format!("@{ms}"),
                (None, None) => "-".into(),
            },
        );
        row("parent", opt(&h.parent_session));
        row(
            "seeded",
            match (h.seeded, h.inherited_events) {
                (true, Some(n)) => format!("yes, {n} inherited event{}", plural(n)),
                (true, None) => "yes".into(),
                (false, _) => "no".into(),
            },
        );
        if h.origin.is_some() {
            row("origin", opt(&h.origin));
        }
        if let Some(depth) = h.delegation_depth {
            row("delegation", format!("depth {depth}"));
        }
        if h.agent_preset.is_some() {
            row("agent preset", opt(&h.agent_preset));
        }
    }
    let e = &r.events;
    let mut events = format!("{}", e.total);
    if let (Some(a), Some(b)) = (e.first_time, e.last_time) {
        events.push_str(&format!(
            ", {} → {}",
            clock.format_or_raw(a),
            clock.format_or_raw(b)
        ));
    }
    if e.unusable_rows > 0 {
        events.push_str(&format!(
            ", {} unusable row{}",
            e.unusable_rows,
            plural(e.unusable_rows)
        ));
    }
    row("events", events);
    for (ty, n) in &e.by_type {
        row(&format!("  {}", escape(ty)), n.to_string());
    }
    let t = &r.turns;
    let mut turns = format!("{} started, {} ended", t.started, t.ended);
    if !t.end_reasons.is_empty() {
        let reasons: Vec<String> = t
            .end_reasons
            .iter()
            .map(|(k, n)| format!("{} {n}", escape(k)))
            .collect();
        turns.push_str(&format!(" ({})", reasons.join(", ")));
    }
    if t.open {
        turns.push_str(", one open at the end");
    }
    row("turns", turns);
    row("steps", r.steps.to_string());
    let tl = &r.tools;
    row(
        "tool calls",
        format!(
            "{} started, {} asked for by the model",
            tl.calls, tl.advertised
        ),
    );
    row(
        "tool results",
        format!(
            "{}, {} error{}",
            tl.results,
            tl.error_results,
            plural(tl.error_results)
        ),
    );
    let c = &r.compaction;
    row(
        "compactions",
        format!(
            "{} ({} failed), {} prune{}",
            c.compactions,
            c.failed,
            c.prunes,
            plural(c.prunes)
        ),
    );
    let s = &r.surface;
    row(
        "surface",
        format!(
            "{} node{}, {} message{}, replace generation {}",
            s.nodes,
            plural(s.nodes as u64),
            s.messages,
            plural(s.messages as u64),
            s.replace_generation
        ),
    );
    let tk = &r.tokens;
    row(
        "tokens",
        format!(
            "{} in, {} out, {} cache read, {} cache write, {} reasoning ({} model call{}{}; `dshs usage` for costs)",
            tk.input_tokens,
            tk.output_tokens,
            tk.cache_read_tokens,
            tk.cache_write_tokens,
            tk.reasoning_tokens,
            tk.calls,
            plural(tk.calls),
            if tk.calls_without_usage > 0 {
                format!(", {} without usage", tk.calls_without_usage)
            } else {
                String::new()
            }
        ),
    );
    if !r.models.is_empty() {
        let models: Vec<String> = r
            .models
            .iter()
            .map(|(m, n)| format!("{} ({n})", escape(m)))
            .collect();
        row("models", models.join(", "));
    }
    let b = &r.bytes;
    let mut bytes = human_bytes(b.total);
    if b.committed != b.total {
        bytes.push_str(&format!(", {} committed", human_bytes(b.committed)));
    }
    if let Some(n) = b.crash_tail_rows {
        bytes.push_str(&format!(", crash tail of {n} row{}", plural(n)));
    }
    if let Some(n) = b.torn_tail {
        bytes.push_str(&format!(", torn final line of {n} byte{}", plural(n)));
    }
    row("bytes", bytes);

    let width = rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0);
    for (label, value) in rows {
        let pad = width - label.chars().count();
        let label = if label.starts_with(' ') {
            p.dim(&label)
        } else {
            p.bold(&label)
        };
        writeln!(out, "{label}{}  {value}", " ".repeat(pad))?;
    }
    Ok(())
}
