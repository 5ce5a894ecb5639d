//! `dshs show`: the event log as people read it, one line per event (or JSON Lines).
//!
//! Marking a surface node as shadowed needs to know, when printing it, whether a *later*
//! replacement shadows it. So the log is read twice through the one streaming pass: pass 1
//! folds it with replacements recorded (memory: the shadowed seqs, not the log) and learns
//! where the committed prefix ends; pass 2 folds it again and prints from the observer.
//! Standard input is spooled to a temporary file first.

use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Result;
use owo_colors::Style;
use serde::Serialize;
use serde_json::value::RawValue;

use dshs::log::finding::{Discard, FirstError};
use dshs::log::json::Json;
use dshs::log::scan::{EventInfo, FoldState, Observer, Scan, ScanOptions, TornTail, Unusable};
use dshs::log::surface::Replacement;
use dshs::log::text::seq_list;
use dshs::log::vocab::TypeClass;

use crate::cli::{ReportFormat, ShowArgs, TurnRange};
use crate::exit::Outcome;
use crate::render::human::Painter;
use crate::render::{Clock, escape, summary};

use super::{Env, Seekable};

mod live;

/// What this command's output is like (for the progress bar).
pub fn output(args: &ShowArgs) -> super::Output {
    super::Output::report(args.format, true)
}

pub fn run(args: &ShowArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    let env = &env.for_output(output(args));
    if args.follow.follow {
        return live::run(args, env, out);
    }
    let (opened, store) = super::open_input(&args.file, args.session.as_deref(), env)?;
    let from_store = store.is_some();
    let name = opened.name.clone();
    let file = match Seekable::new(opened) {
        Ok(f) => f,
        Err(e) => return Err(super::read_failure(&name, &e)),
    };

    // Pass 1: what later events do to earlier ones, and where the committed prefix ends.
    let mut first_error = FirstError::default();
    let opts = ScanOptions {
        record_replacements: true,
        from_store,
        ..env.scan_options()
    };
    let first = file
        .open()
        .and_then(|o| super::scan_source(o, env, &opts, &mut first_error, &mut ()));
    let mut first = match first {
        Ok(s) => s,
        Err(e) => return Err(super::read_failure(&name, &e)),
    };
    let marks = match Marks::of(&first) {
        Ok(m) => m,
        Err(e) => return Err(super::read_failure(&name, &e)),
    };
    // Pass 2 builds its own fold state; do not hold two surfaces at once.
    first.state = None;

    // Pass 2: print. The printer goes with the pass (an observer is `Send`): it writes into
    // an outbox whose full buffers this thread writes out while the pass runs on another.
    let (mut printer, written) = Printer::new(args, env, &marks, None);
    let tap = printer.tap.clone();
    let torn = first.torn.filter(|_| printer.filter.is_empty());
    // The printer moves into the pass's thread: when it is dropped there, the outbox's
    // sender goes with it and the copying below ends.
    let ((second, error), failed) = dshs::log::limits::beside(
        move || {
            let second = file.open().and_then(|mut o| {
                o.reader = Box::new(Tap {
                    inner: o.reader,
                    state: tap,
                });
                o.file = None;
                // The tap names the line being folded: no reading ahead.
                let opts = ScanOptions {
                    threads: 1,
                    from_store,
                    ..env.scan_options()
                };
                super::scan_source(
                    o,
                    env,
                    &opts,
                    &mut Discard,
                    &mut printer as &mut dyn Observer,
                )
            });
            let torn = torn.filter(|_| second.is_ok());
            (second, printer.finish(torn))
        },
        || -> io::Result<()> {
            for chunk in written {
                // Dropping the receiver tells the printer nobody reads on.
                out.write_all(&chunk)?;
            }
            Ok(())
        },
    );
    let printed = failed.err().or(error);
    if let Some(e) = printed {
        return Err(e.into());
    }
    if let Err(e) = second {
        return Err(super::read_failure(&name, &e));
    }
    super::note_status(&name, &first, first_error.0.as_ref(), env.quiet);
    if let Some(store) = store {
        return Ok(super::outcome_of_status(
            store.status(first.status(), env.quiet)?,
        ));
    }
    Ok(super::outcome_of(&first))
}

/// What pass 1 learned.
struct Marks {
    /// Shadowed seq → the seq of the replacement that shadowed it.
    shadowed_by: HashMap<u64, u64>,
    /// Replacement seq → what it replaced.
    replaces: HashMap<u64, Replacement>,
    /// Rows from this byte on are a crash tail DSH drops on load.
    crash_from: Option<u64>,
    seq_width: usize,
}

impl Marks {
    fn of(scan: &Scan) -> std::io::Result<Marks> {
        let mut shadowed_by = HashMap::new();
        let mut replaces = HashMap::new();
        if let Some(state) = &scan.state {
            for r in state.surface.each_replacement() {
                let r = r?;
                for s in &r.shadowed {
                    shadowed_by.insert(*s, r.seq);
                }
                replaces.insert(r.seq, r);
            }
        }
        let last = scan
            .state
            .as_ref()
            .map_or(0, |s| s.surface.next_seq().saturating_sub(1));
        Ok(Marks {
            shadowed_by,
            replaces,
            crash_from: scan.crash.map(|c| c.byte),
            seq_width: last.to_string().len(),
        })
    }
}

struct Filter<'a> {
    types: &'a [String],
    turn: Option<TurnRange>,
    grep: Option<&'a str>,
}

impl Filter<'_> {
    fn is_empty(&self) -> bool {
        self.types.is_empty() && self.turn.is_none() && self.grep.is_none()
    }

    fn type_matches(&self, ty: &str) -> bool {
        dshs::log::event::type_matches(self.types, ty)
    }

    fn turn_matches(&self, turn: Option<i64>) -> bool {
        match self.turn {
            None => true,
            Some(range) => turn.is_some_and(|t| range.contains(t)),
        }
    }

    fn grep_matches(&self, line: &[u8]) -> bool {
        match self.grep {
            None => true,
            Some(needle) => String::from_utf8_lossy(line).contains(needle),
        }
    }
}

/// Shared between the reader pass 2 reads through and the printer: the line being folded
/// (for `--grep`), and a stop flag once the output is gone (`| head`).
#[derive(Default)]
struct TapState {
    keep_line: bool,
    line: Mutex<Vec<u8>>,
    line_done: AtomicBool,
    stop: AtomicBool,
}

/// A reader that remembers the last line consumed through it. The scan reads one line and
/// folds its events before reading the next, so while the observer runs, that line is the
/// one the events came from.
struct Tap<R> {
    inner: R,
    state: Arc<TapState>,
}

impl<R: BufRead> io::Read for Tap<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        dshs::log::input::read_through_buffer(self, buf)
    }
}

impl<R: BufRead> BufRead for Tap<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.state.stop.load(Ordering::Relaxed) {
            return Err(io::Error::other("output closed"));
        }
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        if self.state.keep_line {
            // The bytes were just returned by `fill_buf`; asking again reads nothing.
            if let Ok(buf) = self.inner.fill_buf() {
                let taken = &buf[..amt.min(buf.len())];
                let mut line = self
                    .state
                    .line
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if self.state.line_done.swap(false, Ordering::Relaxed) {
                    line.clear();
                }
                line.extend_from_slice(taken);
                if taken.last() == Some(&b'\n') {
                    self.state.line_done.store(true, Ordering::Relaxed);
                }
            }
        }
        self.inner.consume(amt);
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SurfaceMark {
    /// A log-only event (or one in the crash tail).
    None,
    Visible,
    Shadowed(u64),
    Rejected,
}

impl SurfaceMark {
    fn char(self) -> char {
        match self {
            SurfaceMark::None => ' ',
            SurfaceMark::Visible => '+',
            SurfaceMark::Shadowed(_) => '-',
            SurfaceMark::Rejected => '!',
        }
    }

    fn json(self) -> Option<&'static str> {
        match self {
            SurfaceMark::None => None,
            SurfaceMark::Visible => Some("visible"),
            SurfaceMark::Shadowed(_) => Some("shadowed"),
            SurfaceMark::Rejected => Some("rejected"),
        }
    }
}

/// Bytes the printer collects before handing them over to be written.
const OUTBOX: usize = 64 * 1024;

/// What the printer writes, collected and handed in buffers to the thread that writes
/// standard output. A closed receiver (that thread failed to write) is a broken pipe here.
struct Outbox {
    buf: Vec<u8>,
    to: crossbeam_channel::Sender<Vec<u8>>,
}

impl Write for Outbox {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= OUTBOX {
            self.flush()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let full = std::mem::replace(&mut self.buf, Vec::with_capacity(OUTBOX));
        self.to
            .send(full)
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))
    }
}

struct Printer<'m> {
    out: Outbox,
    error: Option<io::Error>,
    tap: Arc<TapState>,
    filter: Filter<'m>,
    marks: &'m Marks,
    format: ReportFormat,
    painter: Painter,
    clock: Clock,
    seq_width: usize,
    /// `--follow`: marks known only from what was folded so far (see [`Live`]).
    live: Option<Live>,
}

impl<'m> Printer<'m> {
    /// A printer of `args`' view whose full output buffers arrive on the receiver (the
    /// thread that holds the output writes them while the pass runs on another).
    fn new(
        args: &'m ShowArgs,
        env: &Env,
        marks: &'m Marks,
        live: Option<Live>,
    ) -> (Printer<'m>, crossbeam_channel::Receiver<Vec<u8>>) {
        let (to, written) = crossbeam_channel::bounded::<Vec<u8>>(4);
        let printer = Printer {
            out: Outbox {
                buf: Vec::with_capacity(OUTBOX),
                to,
            },
            error: None,
            tap: Arc::new(TapState {
                keep_line: args.grep.is_some(),
                ..TapState::default()
            }),
            filter: Filter {
                types: &args.types,
                turn: args.turn,
                grep: args.grep.as_deref(),
            },
            marks,
            format: args.format,
            painter: Painter {
                color: env.color_out && args.format == ReportFormat::Human,
            },
            clock: Clock::local(),
            seq_width: marks.seq_width,
            live,
        };
        (printer, written)
    }
}

/// How `show --follow` marks an event: a replacement shadows only later, so nodes are not
/// marked shadowed when printed, and the replacement's line says what it shadowed; rows in
/// doubt after a bad row are printed once their fate is known.
#[derive(Default)]
struct Live {
    /// Rows held back after a bad row are being folded as a crash tail.
    crash: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EventRecord<'a> {
    record: &'static str,
    seq: u64,
    time: i64,
    local_time: Option<String>,
    #[serde(rename = "type")]
    ty: &'a str,
    turn: Option<i64>,
    step: Option<i64>,
    line: u64,
    byte: u64,
    surface: Option<&'static str>,
    shadowed_by: Option<u64>,
    replaces: Option<ReplacesRecord<'a>>,
    crash_tail: bool,
    packed: bool,
    normalized: bool,
    summary: &'a str,
    data: Option<Box<RawValue>>,
    surface_op: Option<Box<RawValue>>,
    source_event_seqs: Option<Box<RawValue>>,
    ignorable: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplacesRecord<'a> {
    start_seq: u64,
    end_seq: u64,
    shadowed_seqs: &'a [u64],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BadRowRecord<'a> {
    record: &'static str,
    seq: Option<u64>,
    #[serde(rename = "type")]
    ty: Option<&'a str>,
    line: u64,
    byte: u64,
    crash_tail: bool,
    why: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TornRecord {
    record: &'static str,
    line: u64,
    byte: u64,
    bytes: u64,
}

fn raw(v: &Json<'_>) -> Option<Box<RawValue>> {
    RawValue::from_string(v.to_js_string()).ok()
}

/// The colour of an event type's family.
fn type_style(ty: &str) -> Style {
    let family = ty.split('/').next().unwrap_or_default();
    match family {
        "user" => Style::new().green(),
        "assistant" => Style::new().cyan(),
        "system" | "developer" => Style::new().magenta(),
        "tool" => Style::new().yellow(),
        "turn" | "step" => Style::new().bold(),
        "compaction" => Style::new().blue(),
        _ => Style::new(),
    }
}

const TIME_WIDTH: usize = 23;
const TYPE_WIDTH: usize = 19;
const TURN_WIDTH: usize = 5;

impl Printer<'_> {
    fn write(&mut self, f: impl FnOnce(&mut dyn Write) -> io::Result<()>) {
        if self.error.is_some() {
            return;
        }
        // Following: every event reaches the output at once, also into a pipe.
        let live = self.live.is_some();
        if let Err(e) = f(&mut self.out).and_then(|()| if live { self.out.flush() } else { Ok(()) })
        {
            self.error = Some(e);
            // Nobody reads what follows: stop the pass instead of folding the rest.
            self.tap.stop.store(true, Ordering::Relaxed);
        }
    }

    fn in_crash_tail(&self, byte: u64) -> bool {
        self.marks.crash_from.is_some_and(|from| byte >= from)
    }

    /// One human line: seq, time, mark, type, turn.step, summary, notes.
    #[allow(clippy::too_many_arguments)]
    fn line(
        &self,
        seq: &str,
        time: &str,
        mark: SurfaceMark,
        ty: &str,
        turn: &str,
        summary: &str,
        notes: &[(String, Style)],
        dim: bool,
    ) -> String {
        let p = &self.painter;
        let paint = |text: &str, style: Style| {
            if dim {
                p.dim(text)
            } else {
                p.paint(text, style)
            }
        };
        let mark_style = match mark {
            SurfaceMark::Visible => Style::new().green().bold(),
            SurfaceMark::Rejected => Style::new().red().bold(),
            SurfaceMark::Shadowed(_) | SurfaceMark::None => Style::new().dimmed(),
        };
        let summary_style = if matches!(mark, SurfaceMark::Shadowed(_)) {
            Style::new().dimmed()
        } else {
            Style::new()
        };
        let mut s = format!(
            "{} {} {} {} {} {}",
            paint(&format!("{seq:>w$}", w = self.seq_width), Style::new()),
            paint(&format!("{time:<TIME_WIDTH$}"), Style::new().dimmed()),
            paint(&mark.char().to_string(), mark_style),
            paint(&format!("{ty:<TYPE_WIDTH$}"), type_style(ty)),
            paint(&format!("{turn:<TURN_WIDTH$}"), Style::new()),
            paint(summary, summary_style),
        );
        for (note, style) in notes {
            s.push_str("  ");
            s.push_str(&paint(note, *style));
        }
        s.trim_end().to_owned()
    }

    /// The end of the printing: the torn final line, if one is to be shown, then a flush;
    /// the first write error of all the printing, if any.
    fn finish(mut self, torn: Option<TornTail>) -> Option<io::Error> {
        if let Some(t) = torn
            && let Err(e) = self.torn(t.line, t.byte, t.len)
        {
            self.error.get_or_insert(e);
        }
        if let Err(e) = self.out.flush() {
            self.error.get_or_insert(e);
        }
        self.error
    }

    fn torn(&mut self, line: u64, byte: u64, len: u64) -> io::Result<()> {
        let text = match self.format {
            ReportFormat::Json => serde_json::to_string(&TornRecord {
                record: "torn-line",
                line,
                byte,
                bytes: len,
            })
            .map_err(io::Error::from)?,
            ReportFormat::Human => self.painter.dim(&format!(
                "… line {line}: torn final line, {len} byte{} without a newline (never parsed)",
                if len == 1 { "" } else { "s" }
            )),
        };
        writeln!(self.out, "{text}")
    }
}

impl Observer for Printer<'_> {
    fn tail_decided(&mut self, committed: bool) {
        if let Some(live) = &mut self.live {
            live.crash = !committed;
        }
    }

    fn speculation_ended(&mut self, _committed: bool) {
        if let Some(live) = &mut self.live {
            live.crash = false;
        }
    }

    fn event(&mut self, info: &EventInfo<'_, '_>, state: &FoldState) {
        if self.error.is_some() {
            return;
        }
        let ev = info.event;
        let turn = ev.turn().or_else(|| state.lifecycle.open_turn());
        if !self.filter.type_matches(&ev.ty)
            || !self.filter.turn_matches(turn)
            || !self
                .filter
                .grep_matches(&self.tap.line.lock().unwrap_or_else(PoisonError::into_inner))
        {
            return;
        }
        let (crash, shadowed_by, replaces) = match &self.live {
            None => (
                self.in_crash_tail(ev.pos.byte),
                self.marks.shadowed_by.get(&ev.seq).copied(),
                self.marks.replaces.get(&ev.seq),
            ),
            Some(live) => (
                live.crash && info.speculative,
                None,
                state
                    .surface
                    .last_replacement()
                    .filter(|r| r.seq == ev.seq && info.accepted),
            ),
        };
        let replaces = replaces.filter(|_| !crash);
        let mark = if crash {
            SurfaceMark::None
        } else if !info.accepted {
            SurfaceMark::Rejected
        } else if let Some(by) = shadowed_by {
            SurfaceMark::Shadowed(by)
        } else if matches!(info.class, TypeClass::Surface(_)) {
            SurfaceMark::Visible
        } else {
            SurfaceMark::None
        };
        let step = ev.step();
        let text = summary::event(ev);
        match self.format {
            ReportFormat::Json => {
                let record = EventRecord {
                    record: "event",
                    seq: ev.seq,
                    time: ev.time,
                    local_time: self.clock.format(ev.time),
                    ty: &ev.ty,
                    turn,
                    step,
                    line: ev.pos.line,
                    byte: ev.pos.byte,
                    surface: mark.json(),
                    shadowed_by: match mark {
                        SurfaceMark::Shadowed(by) => Some(by),
                        _ => None,
                    },
                    replaces: replaces.map(|r| ReplacesRecord {
                        start_seq: r.start,
                        end_seq: r.end,
                        shadowed_seqs: &r.shadowed,
                    }),
                    crash_tail: crash,
                    packed: ev.packed,
                    normalized: ev.normalized,
                    summary: &text,
                    data: raw(&ev.data),
                    surface_op: ev.surface_op.as_ref().and_then(raw),
                    source_event_seqs: ev.source_seqs.as_ref().and_then(raw),
                    ignorable: ev.ignorable,
                };
                self.write(|out| {
                    serde_json::to_writer(&mut *out, &record)?;
                    out.write_all(b"\n")
                });
            }
            ReportFormat::Human => {
                let turn_step = match (turn, step.filter(|_| ev.turn().is_some())) {
                    (Some(t), Some(s)) => format!("{t}.{s}"),
                    (Some(t), None) => t.to_string(),
                    (None, _) => "-".into(),
                };
                let mut notes = Vec::new();
                if let Some(r) = replaces {
                    notes.push((
                        format!(
                            "[replaces {}..{}: {}]",
                            r.start,
                            r.end,
                            seq_list(&r.shadowed, 12)
                        ),
                        Style::new().yellow(),
                    ));
                }
                match mark {
                    SurfaceMark::Shadowed(by) => {
                        notes.push((format!("[shadowed by {by}]"), Style::new().dimmed()));
                    }
                    SurfaceMark::Rejected => {
                        notes.push(("[rejected]".into(), Style::new().red()));
                    }
                    _ => {}
                }
                if crash {
                    notes.push(("[crash tail]".into(), Style::new().yellow()));
                }
                let line = self.line(
                    &ev.seq.to_string(),
                    &self.clock.format_or_raw(ev.time),
                    mark,
                    &escape(&ev.ty),
                    &turn_step,
                    &text,
                    &notes,
                    crash,
                );
                self.write(|out| writeln!(out, "{line}"));
            }
        }
    }

    fn unusable(&mut self, row: &Unusable<'_>) {
        // Rows with no event to select by type or turn show only in an unfiltered listing
        // (or when --grep matches their text).
        if self.error.is_some()
            || !self.filter.types.is_empty()
            || self.filter.turn.is_some()
            || !self
                .filter
                .grep_matches(&self.tap.line.lock().unwrap_or_else(PoisonError::into_inner))
        {
            return;
        }
        let crash = match &self.live {
            None => self.in_crash_tail(row.pos.byte),
            Some(live) => live.crash && row.speculative,
        };
        match self.format {
            ReportFormat::Json => {
                let record = BadRowRecord {
                    record: "bad-row",
                    seq: row.seq,
                    ty: row.event_type,
                    line: row.pos.line,
                    byte: row.pos.byte,
                    crash_tail: crash,
                    why: row.why,
                };
                self.write(|out| {
                    serde_json::to_writer(&mut *out, &record)?;
                    out.write_all(b"\n")
                });
            }
            ReportFormat::Human => {
                let seq = row.seq.map_or_else(|| "?".into(), |s| s.to_string());
                let ty = row
                    .event_type
                    .map_or_else(|| "(unusable row)".to_owned(), |t| escape(t).into_owned());
                let why = format!(
                    "line {}: {}",
                    row.pos.line,
                    escape(&dshs::log::text::clip(row.why, 160))
                );
                let mut notes = vec![];
                if crash {
                    notes.push(("[crash tail]".to_owned(), Style::new().yellow()));
                }
                let line = self.line(
                    &seq,
                    "",
                    SurfaceMark::Rejected,
                    &ty,
                    "",
                    &why,
                    &notes,
                    crash,
                );
                self.write(|out| writeln!(out, "{line}"));
            }
        }
    }
}
