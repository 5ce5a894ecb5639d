//! `dshs usage [PATH...]`: tokens and cost of the model calls of every session below the
//! paths (default: DSH's root), each call counted once (USAGE.md), grouped by day, week,
//! month, session, model or turn.
//!
//! Each session is read by `log::usage` (a raw pass that parses only the lines that can hold
//! a call), several at a time; a worker reduces its calls to per-row, per-model sums at once,
//! so memory holds one session's calls and the sums, never the logs. A session id seen in
//! more than one input counts once: the copy with the most lines (the most complete) is used,
//! and stderr says so.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use dshs::log::input::{self, Source};
use dshs::log::usage::{self, PriceTable, SessionUsage};

use crate::cli::{UsageArgs, UsageBy, UsageFormat};
use crate::exit::{Failure, Outcome};
use crate::render::usage::{Report, Row, Sums, Table};
use crate::render::{Progress, diag, escape};

use super::Env;
use super::targets::{Target, targets};

/// What this command's output is like (for the progress bar).
pub fn output(args: &UsageArgs) -> super::Output {
    super::Output {
        json: args.format == UsageFormat::Json,
        writes_while_reading: false,
    }
}

/// How calls are placed in rows: the zone days are taken in, the date range, the prices.
struct Plan {
    by: UsageBy,
    zone: jiff::tz::TimeZone,
    /// Calls at or after this instant (ms) …
    since: Option<i64>,
    /// … and before this one.
    until: Option<i64>,
    prices: Option<PriceTable>,
}

pub fn run(args: &UsageArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    let env = &env.for_output(output(args));
    let plan = plan_of(args).map_err(Failure::usage)?;
    let (targets, mut errors) = targets(&args.paths, "read").map_err(Failure::usage)?;
    if args.by == UsageBy::Turn && targets.len() != 1 {
        return Err(Failure::usage(format!(
            "--by turn needs one session; the paths hold {}",
            targets.len()
        )));
    }
    let jobs = super::jobs(args.jobs);
    let total_bytes: u64 = targets.iter().map(Target::size).sum();
    let mut progress = Progress::new(
        (),
        "usage",
        Some(total_bytes),
        env.progress.wants(Some(total_bytes)),
    );
    let mut done_bytes = 0;
    let mut sessions: Vec<Counted> = Vec::new();
    super::in_parallel(
        &targets,
        jobs,
        |t| count_target(t, &plan, env),
        |read| {
            done_bytes += read.size;
            progress.advance_to(done_bytes);
            match read.result {
                Err(message) => {
                    errors += 1;
                    crate::render::error_message(&message);
                }
                Ok(c) => sessions.push(c),
            }
            Ok(())
        },
    )?;
    drop(progress);
    let read_any = !sessions.is_empty();
    let sessions = once_each(sessions, env.quiet);
    let report = report_of(&plan, sessions);
    match args.format {
        UsageFormat::Json => crate::render::usage::write_json(out, &report, args.breakdown)?,
        UsageFormat::Table => {
            let table = Table {
                color: env.color_out,
                breakdown: args.breakdown,
                width: table_width(),
            };
            table.write(out, &report)?;
        }
    }
    if !read_any && errors > 0 {
        return Err(Failure::usage("no session could be read"));
    }
    Ok(Outcome::Success)
}

/// The terminal's width, else `COLUMNS`; none in a pipe.
fn table_width() -> Option<usize> {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal()
        && let Some(w) = comfy_table::Table::new().width()
    {
        return Some(usize::from(w));
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse().ok())
        .filter(|&w: &usize| w > 0)
}

/// `-z`: an IANA name, `UTC`, or a fixed offset (`+09:00`); default `TZ`, else the system's.
fn zone_of(name: Option<&str>) -> Result<jiff::tz::TimeZone, String> {
    let Some(name) = name else {
        return Ok(jiff::tz::TimeZone::system());
    };
    if let Ok(z) = jiff::tz::TimeZone::get(name) {
        return Ok(z);
    }
    if let Some(offset) = fixed_offset(name) {
        return Ok(jiff::tz::TimeZone::fixed(offset));
    }
    Err(format!(
        "--timezone {}: not a time zone (an IANA name like Europe/Berlin, UTC, or an offset like +09:00)",
        escape(name)
    ))
}

/// `+HH:MM`, `-HH:MM`, `+HH`.
fn fixed_offset(s: &str) -> Option<jiff::tz::Offset> {
    let (sign, rest) = match s.as_bytes().first()? {
        b'+' => (1, &s[1..]),
        b'-' => (-1, &s[1..]),
        _ => return None,
    };
    let (h, m) = rest.split_once(':').unwrap_or((rest, "0"));
    let (h, m): (i32, i32) = (h.parse().ok()?, m.parse().ok()?);
    if !(0..=18).contains(&h) || !(0..60).contains(&m) {
        return None;
    }
    jiff::tz::Offset::from_seconds(sign * (h * 3600 + m * 60)).ok()
}

/// A date of `--since`/`--until`: `YYYY-MM-DD` or `YYYYMMDD`.
fn date_of(flag: &str, text: &str) -> Result<jiff::civil::Date, String> {
    let t = text.trim();
    let iso = if t.len() == 8 && t.bytes().all(|b| b.is_ascii_digit()) {
        format!("{}-{}-{}", &t[..4], &t[4..6], &t[6..])
    } else {
        t.to_owned()
    };
    iso.parse::<jiff::civil::Date>()
        .map_err(|_| format!("{flag} {}: not a date (YYYY-MM-DD)", escape(text)))
}

/// The first instant of `date` in `zone`, in ms.
fn start_of(date: jiff::civil::Date, zone: &jiff::tz::TimeZone) -> Result<i64, String> {
    date.to_zoned(zone.clone())
        .map(|z| z.timestamp().as_millisecond())
        .map_err(|e| format!("{date}: {e}"))
}

fn plan_of(args: &UsageArgs) -> Result<Plan, String> {
    let zone = zone_of(args.timezone.as_deref())?;
    let since = args
        .since
        .as_deref()
        .map(|s| date_of("--since", s))
        .transpose()?;
    let until = args
        .until
        .as_deref()
        .map(|s| date_of("--until", s))
        .transpose()?;
    if let (Some(a), Some(b)) = (since, until)
        && a > b
    {
        return Err(format!(
            "--since {a} is after --until {b}: no call can be in between"
        ));
    }
    let until = match until {
        Some(d) => Some(
            d.tomorrow()
                .map_err(|e| format!("--until {d}: {e}"))
                .and_then(|next| start_of(next, &zone))?,
        ),
        None => None,
    };
    let prices = if args.no_cost {
        None
    } else {
        let mut t = PriceTable::shipped();
        if let Some(path) = &args.pricing {
            t.load(path).map_err(|e| format!("--pricing: {e}"))?;
        }
        Some(t)
    };
    Ok(Plan {
        by: args.by,
        since: since.map(|d| start_of(d, &zone)).transpose()?,
        until,
        zone,
        prices,
    })
}

/// One session, read and reduced to its rows.
struct Counted {
    name: String,
    id: Option<String>,
    parent: Option<String>,
    title: Option<String>,
    /// Lines read: the most complete of two copies of a session has the most.
    lines: u64,
    /// Row key → model → sums.
    rows: BTreeMap<Key, BTreeMap<String, Sums>>,
}

/// A row's key, in report order: turns by number, the others by text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    Turn(Option<u64>),
    Text(String),
}

impl Key {
    pub fn text(&self) -> String {
        match self {
            Key::Turn(Some(n)) => n.to_string(),
            Key::Turn(None) => "-".to_owned(),
            Key::Text(t) => t.clone(),
        }
    }
}

struct Read {
    size: u64,
    result: Result<Counted, String>,
}

fn count_target(target: &Target, plan: &Plan, env: &Env) -> Read {
    let size = target.size();
    let read = |opened: input::Opened| -> Result<(String, SessionUsage), String> {
        let name = opened.name.clone();
        usage::read(opened.reader)
            .map(|u| (name.clone(), u))
            .map_err(|e| format!("cannot read {name}: {e}"))
    };
    let result = match target {
        Target::Path { name, .. } => input::open(&Source::Path(PathBuf::from(name)))
            .map_err(|e| e.to_string())
            .and_then(read),
        Target::Stdin => input::open(&Source::Stdin)
            .map_err(|e| e.to_string())
            .and_then(read),
        Target::Session { path, shown, id } => {
            let session = |packed: bool| {
                super::store::open_one(path, shown, Some(id))
                    .and_then(|(db, id)| {
                        super::store::open_session_with(
                            db,
                            shown,
                            &id,
                            true,
                            packed,
                            env.scan_options().parse_threads(),
                            false,
                        )
                    })
                    .map_err(|e| e.to_string())
                    .map(|(opened, end)| {
                        let r = read(opened);
                        let packed = end.packed_read();
                        drop(end.take());
                        (r, packed)
                    })
            };
            // A format 0/1 session is read first with its packed rows kept packed: no call
            // is in a packed row, so the calls are the expanded log's; its line and byte
            // counts are moved there. That read stands when it ended cleanly and every line
            // was read as an object (a note names the first other one by its line);
            // else the session is read again, expanded.
            match session(true) {
                Ok((Ok((name, mut u)), Some(p)))
                    if p.clean && u.unreadable_lines == 0 && !u.torn_line =>
                {
                    u.lines += p.extra_lines();
                    u.bytes = u.bytes.saturating_add_signed(p.extra_bytes());
                    Ok((name, u))
                }
                Ok((r, None)) => r,
                Ok((_, Some(_))) => session(false).and_then(|(r, _)| r),
                Err(e) => Err(e),
            }
        }
    };
    Read {
        size,
        result: result.and_then(|(name, u)| {
            notes(&name, &u, env.quiet);
            match &u.refused {
                Some(why) => Err(format!("{}: not counted: {why}", escape(&name))),
                None => Ok(reduce(name, u, plan)),
            }
        }),
    }
}

/// What stderr says about a session counted with reservations.
fn notes(name: &str, u: &SessionUsage, quiet: bool) {
    if quiet {
        return;
    }
    let name = escape(name);
    let at = |seq: Option<u64>| seq.map_or(String::new(), |s| format!(" (first at seq {s})"));
    if u.invalid_usage.count > 0 {
        diag!(
            "dshs: note: {name}: {} call(s) not counted: a usage whose token counts are not whole numbers ≥ 0{}",
            u.invalid_usage.count,
            at(u.invalid_usage.first_seq)
        );
    }
    if u.total_mismatch.count > 0 {
        diag!(
            "dshs: warning: {name}: {} usage record(s) whose totalTokens is not the sum of the buckets; the sum is counted{}",
            u.total_mismatch.count,
            at(u.total_mismatch.first_seq)
        );
    }
    if u.unreadable_lines > 0 {
        diag!(
            "dshs: note: {name}: {} line(s) are not JSON objects (first: line {}); the rest is counted",
            u.unreadable_lines,
            u.first_unreadable_line.unwrap_or(0)
        );
    }
}

/// A session's calls → row key → model → sums, within the dates asked for.
fn reduce(name: String, u: SessionUsage, plan: &Plan) -> Counted {
    let mut rows: BTreeMap<Key, BTreeMap<String, Sums>> = BTreeMap::new();
    let session_key = Key::Text(u.header.id.clone().unwrap_or_else(|| name.clone()));
    // The key of the last call placed by date, and the instants [from, to) of its day: the
    // next calls of that day take it without a time-zone conversion or a string each.
    let mut day: Option<(i64, i64, Key)> = None;
    for call in &u.calls {
        if plan.since.is_some_and(|s| call.time < s) || plan.until.is_some_and(|e| call.time >= e) {
            continue;
        }
        let model = call.model.as_deref().unwrap_or("unknown");
        let fresh;
        let key = match plan.by {
            UsageBy::Turn => {
                fresh = Key::Turn(call.turn);
                &fresh
            }
            UsageBy::Session => &session_key,
            UsageBy::Model => {
                fresh = Key::Text(model.to_owned());
                &fresh
            }
            UsageBy::Day | UsageBy::Week | UsageBy::Month => {
                match &day {
                    Some((from, to, _)) if (*from..*to).contains(&call.time) => {}
                    _ => {
                        let (key, range) = date_key(plan.by, call.time, &plan.zone);
                        let (from, to) = range.unwrap_or((call.time, call.time));
                        day = Some((from, to, Key::Text(key)));
                    }
                }
                match &day {
                    Some((_, _, key)) => key,
                    None => continue,
                }
            }
        };
        // Looked up first, so that a row or model already there costs no allocation.
        if !rows.contains_key(key) {
            rows.insert(key.clone(), BTreeMap::new());
        }
        let Some(models) = rows.get_mut(key) else {
            continue;
        };
        if !models.contains_key(model) {
            models.insert(model.to_owned(), Sums::default());
        }
        let Some(sums) = models.get_mut(model) else {
            continue;
        };
        add_call(sums, call, plan.prices.as_ref());
    }
    let counted = Counted {
        name,
        id: u.header.id,
        parent: u.header.parent_session,
        title: u.title,
        lines: u.lines,
        rows,
    };
    usage::recycle(u.calls);
    counted
}

/// The day (`2026-11-30`), ISO week (`2026-W48`) or month (`2026-11`) of `ms` in `zone`, and
/// the instants (ms) from the start of that day to the start of the next, when they exist.
fn date_key(by: UsageBy, ms: i64, zone: &jiff::tz::TimeZone) -> (String, Option<(i64, i64)>) {
    let Ok(ts) = jiff::Timestamp::from_millisecond(ms) else {
        return (format!("@{ms}"), None);
    };
    let zoned = ts.to_zoned(zone.clone());
    let date = zoned.date();
    let key = match by {
        UsageBy::Week => {
            let w = date.iso_week_date();
            format!("{:04}-W{:02}", w.year(), w.week())
        }
        UsageBy::Month => format!("{:04}-{:02}", date.year(), date.month()),
        _ => format!("{:04}-{:02}-{:02}", date.year(), date.month(), date.day()),
    };
    let day = zoned.start_of_day().ok().and_then(|start| {
        let next = start.tomorrow().ok()?.start_of_day().ok()?;
        let (from, to) = (
            start.timestamp().as_millisecond(),
            next.timestamp().as_millisecond(),
        );
        (from <= ms && ms < to).then_some((from, to))
    });
    (key, day)
}

fn add_call(s: &mut Sums, call: &usage::Call, prices: Option<&PriceTable>) {
    s.calls += 1;
    if let Some(t) = &call.tokens {
        s.tokens.add(t);
    } else {
        s.calls_without_usage += 1;
    }
    let Some(prices) = prices else { return };
    let price = call
        .model
        .as_deref()
        .and_then(|m| prices.price_at(m, call.provider.as_deref(), call.time));
    match (&call.tokens, price) {
        (Some(t), Some(p)) => {
            s.cost += p.rates_at(call.time).cost(t);
            s.priced_tokens += t.total();
            s.priced_calls += 1;
        }
        (Some(t), None) => {
            s.unpriced_tokens += t.total();
            s.unpriced_calls += 1;
        }
        (None, None) => s.unpriced_calls += 1,
        // Unknown tokens of a priced model: nothing to add (the call is in callsWithoutUsage).
        (None, Some(_)) => {}
    }
}

/// One copy of each session id: the one with the most lines (the first of equals).
fn once_each(sessions: Vec<Counted>, quiet: bool) -> Vec<Counted> {
    let mut kept: Vec<Counted> = Vec::with_capacity(sessions.len());
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for s in sessions {
        let Some(id) = s.id.clone() else {
            kept.push(s);
            continue;
        };
        match by_id.get(&id) {
            None => {
                by_id.insert(id, kept.len());
                kept.push(s);
            }
            Some(&i) => {
                let (used, other) = if s.lines > kept[i].lines {
                    let old = std::mem::replace(&mut kept[i], s);
                    (&kept[i].name, old.name)
                } else {
                    (&kept[i].name, s.name)
                };
                if !quiet {
                    diag!(
                        "dshs: note: session {} is in {} and {}; counted once, from {}",
                        escape(&id),
                        escape(used),
                        escape(&other),
                        escape(used)
                    );
                }
            }
        }
    }
    kept
}

fn report_of(plan: &Plan, sessions: Vec<Counted>) -> Report {
    let by = plan.by;
    let mut total = Sums::default();
    let mut rows: Vec<Row> = Vec::new();
    let n = sessions.len() as u64;
    if by == UsageBy::Session {
        for s in order_sessions(sessions) {
            let (counted, depth) = s;
            let Some((key, models)) = counted.rows.into_iter().next() else {
                continue;
            };
            let row = Row::new(key.text(), models);
            total.add(&row.sums);
            rows.push(Row {
                file: Some(counted.name),
                session: counted.id,
                parent_session: counted.parent,
                title: counted.title,
                depth,
                ..row
            });
        }
    } else {
        let mut merged: BTreeMap<Key, BTreeMap<String, Sums>> = BTreeMap::new();
        for s in sessions {
            for (key, models) in s.rows {
                let into = merged.entry(key).or_default();
                for (model, sums) in models {
                    into.entry(model).or_default().add(&sums);
                }
            }
        }
        for (key, models) in merged {
            let row = Row::new(key.text(), models);
            total.add(&row.sums);
            rows.push(row);
        }
    }
    Report {
        by: match by {
            UsageBy::Day => "day",
            UsageBy::Week => "week",
            UsageBy::Month => "month",
            UsageBy::Session => "session",
            UsageBy::Model => "model",
            UsageBy::Turn => "turn",
        },
        rows,
        total,
        sessions: n,
        costs: plan.prices.is_some(),
    }
}

/// Sessions in report order: each sub-agent session right under its parent (when the parent
/// is in the report), parents in the order read; with their depth below a listed parent.
fn order_sessions(sessions: Vec<Counted>) -> Vec<(Counted, usize)> {
    let ids: HashMap<String, usize> = sessions
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.id.clone().map(|id| (id, i)))
        .collect();
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    for (i, s) in sessions.iter().enumerate() {
        match s.parent.as_ref().and_then(|p| ids.get(p)) {
            Some(&p) if p != i => children.entry(p).or_default().push(i),
            _ => roots.push(i),
        }
    }
    let mut order = Vec::with_capacity(sessions.len());
    let mut seen = vec![false; sessions.len()];
    let mut stack: Vec<(usize, usize)> = roots.iter().rev().map(|&i| (i, 0)).collect();
    while let Some((i, depth)) = stack.pop() {
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        order.push((i, depth));
        if let Some(c) = children.get(&i) {
            stack.extend(c.iter().rev().map(|&k| (k, depth + 1)));
        }
    }
    // A cycle of parents has no root: list what is left at the top.
    for (i, s) in seen.iter().enumerate() {
        if !s {
            order.push((i, 0));
        }
    }
    let mut slots: Vec<Option<Counted>> = sessions.into_iter().map(Some).collect();
    order
        .into_iter()
        .filter_map(|(i, d)| slots[i].take().map(|c| (c, d)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_offsets_and_dates_parse() {
        assert_eq!(fixed_offset("+09:00").map(|o| o.seconds()), Some(9 * 3600));
        assert_eq!(fixed_offset("-05").map(|o| o.seconds()), Some(-5 * 3600));
        assert!(fixed_offset("9").is_none() && fixed_offset("+25:00").is_none());
        assert_eq!(
            date_of("--since", "20261130").unwrap(),
            jiff::civil::date(2026, 11, 30)
        );
        assert!(date_of("--since", "yesterday").is_err());
    }

    #[test]
    fn weeks_are_iso_weeks_monday_first() {
        let utc = jiff::tz::TimeZone::UTC;
        let ms = |s: &str| s.parse::<jiff::Timestamp>().unwrap().as_millisecond();
        // 2026-11-29 is a Sunday (week 48), 2026-11-30 a Monday (week 49).
        assert_eq!(
            date_key(UsageBy::Week, ms("2026-11-29T12:00:00Z"), &utc).0,
            "2026-W48"
        );
        assert_eq!(
            date_key(UsageBy::Week, ms("2026-11-30T12:00:00Z"), &utc).0,
            "2026-W49"
        );
        assert_eq!(
            date_key(UsageBy::Month, ms("2026-11-30T12:00:00Z"), &utc).0,
            "2026-11"
        );
    }

    /// The day a call is placed in is the one `date_key` gives it, however the calls of a
    /// session go back and forth across midnights (the reduce reuses the last call's day).
    #[test]
    fn calls_are_placed_in_their_own_day_whatever_the_order() {
        let zone = jiff::tz::TimeZone::get("America/New_York").unwrap();
        // Around the 2026-03-08 DST change and two midnights, in a scrambled order.
        let base = "2026-03-07T23:30:00-05:00"
            .parse::<jiff::Timestamp>()
            .unwrap()
            .as_millisecond();
        let mut state = 17u64;
        let times: Vec<i64> = (0..400)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                base + (state % (50 * 3_600_000)) as i64
            })
            .collect();
        let calls: Vec<usage::Call> = times
            .iter()
            .map(|&time| usage::Call {
                seq: 0,
                time,
                turn: None,
                step: None,
                provider: None,
                model: None,
                tokens: None,
                rule: usage::Rule::NoUsage,
                concluded: usage::Concluded::AssistantMessage,
            })
            .collect();
        for by in [UsageBy::Day, UsageBy::Week, UsageBy::Month] {
            let plan = Plan {
                by,
                zone: zone.clone(),
                since: None,
                until: None,
                prices: None,
            };
            let u = SessionUsage {
                calls: calls.clone(),
                ..SessionUsage::default()
            };
            let got: BTreeMap<String, u64> = reduce("s".into(), u, &plan)
                .rows
                .into_iter()
                .map(|(k, models)| (k.text(), models.values().map(|s| s.calls).sum()))
                .collect();
            let mut want: BTreeMap<String, u64> = BTreeMap::new();
            for &t in &times {
                *want.entry(date_key(by, t, &zone).0).or_default() += 1;
            }
            assert_eq!(got, want, "{by:?}");
            assert!(by != UsageBy::Day || want.len() == 4, "{want:?}");
        }
    }
}
