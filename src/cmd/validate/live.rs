//! `dshs validate --follow`: each finding printed when it is found; what holds only at the end
//! of the log so far (an open turn, a crash tail, a torn line) shows in a status line and is
//! reported only if it still holds when following stops.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Result;

use dshs::log::finding::{Finding, Pos, Sink};
use dshs::log::follow::{Ended, Idle, Pending};
use dshs::log::scan::{EventInfo, FoldState, Observer};

use crate::cli::ValidateArgs;
use crate::cmd::follow::{self as following, Session, StatusLine};
use crate::exit::Outcome;
use crate::render::human::{self, Painter};

use super::super::Env;

/// What a status line says, kept up to date by the pass.
#[derive(Default)]
struct Live {
    status: StatusLine,
    /// Status lines are shown (stderr is a terminal).
    enabled: bool,
    events: u64,
    errors: u64,
    warnings: u64,
    /// The line of the turn/start of a turn still open.
    open_turn: Option<u64>,
    /// Rows held back after a bad row: (first line, rows).
    tail: Option<(u64, u64)>,
}

impl Live {
    fn text(&self, name: &str, pending: Pending) -> String {
        let mut s = format!(
            "following {}: {} event{}, {} error{}, {} warning{}",
            crate::render::escape(name),
            self.events,
            human::plural(self.events),
            self.errors,
            human::plural(self.errors),
            self.warnings,
            human::plural(self.warnings),
        );
        if let Some(line) = self.open_turn {
            s.push_str(&format!("; turn open since line {line}"));
        }
        if let Some((line, rows)) = self.tail {
            s.push_str(&format!(
                "; {rows} row{} from line {line} held back after a bad row (a crash tail unless a turn/end follows)",
                human::plural(rows)
            ));
        }
        if let Some(p) = following::pending_words(pending) {
            s.push_str("; ");
            s.push_str(&p);
        }
        s
    }
}

fn lock(live: &Mutex<Live>) -> std::sync::MutexGuard<'_, Live> {
    live.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Prints each finding at once (flushed), unless the pass ended because the file was
/// replaced: then what the pass concludes about the old file is moot.
struct LiveReport<'o> {
    /// Prints; nothing is held back.
    report: super::Report<'o>,
    ended: Arc<Mutex<Option<Ended>>>,
    live: Arc<Mutex<Live>>,
}

impl Sink for LiveReport<'_> {
    fn push(&mut self, f: Finding) {
        let moot = matches!(
            *self.ended.lock().unwrap_or_else(PoisonError::into_inner),
            Some(Ended::Replaced(_) | Ended::NewGeneration(_))
        );
        if moot {
            return;
        }
        {
            let mut live = lock(&self.live);
            if f.is_error() {
                live.errors += 1;
            } else {
                live.warnings += 1;
            }
            live.status.clear();
        }
        let r = &mut self.report;
        if r.quiet || r.error.is_some() {
            return;
        }
        if r.limit.is_some_and(|n| r.shown >= n) {
            r.hidden += 1;
            return;
        }
        r.write(&f);
        if r.error.is_none()
            && let Err(e) = r.out.flush()
        {
            r.error = Some(e);
        }
        if r.error.is_some() {
            // Nobody reads on (`| head`): stop following so the pass ends.
            if let Ok(c) = following::control() {
                c.stop();
            }
        }
    }
}

/// Keeps the status line's view of the fold, and says when rows held back after a bad row
/// turn out to be committed.
struct LiveObserver {
    live: Arc<Mutex<Live>>,
    name: String,
    quiet: bool,
    ended: Arc<Mutex<Option<Ended>>>,
}

impl Observer for LiveObserver {
    fn event(&mut self, info: &EventInfo<'_, '_>, state: &FoldState) {
        if info.speculative {
            return;
        }
        let mut live = lock(&self.live);
        live.events = state.events;
        live.open_turn = state
            .closers
            .is_open()
            .then(|| state.last_turn_start.map_or(0, |(pos, _)| pos.line));
    }

    fn wants_each_event(&self) -> bool {
        false
    }

    fn reads_stream_records(&self) -> bool {
        false
    }

    fn tail_pending(&mut self, first: Pos, rows: u64) {
        lock(&self.live).tail = Some((first.line, rows));
    }

    fn tail_decided(&mut self, committed: bool) {
        let held = {
            let mut live = lock(&self.live);
            live.status.clear();
            live.tail.take()
        };
        let following = self
            .ended
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none();
        if committed
            && following
            && let Some((line, rows)) = held
        {
            following::note(
                &format!(
                    "{}: a turn/end arrived after the {rows} row{} held back from line {line}: they are in the committed region, so the bad row there is damage, not a crash tail",
                    crate::render::escape(&self.name),
                    human::plural(rows)
                ),
                self.quiet,
            );
        }
    }
}

/// `validate --follow PATH`.
pub(super) fn run(
    args: &ValidateArgs,
    env: &Env,
    painter: Painter,
    out: &mut dyn Write,
) -> Result<Outcome> {
    let [file] = args.files.as_slice() else {
        return Err(anyhow::anyhow!(
            "--follow follows one log, session directory or storage root: name one"
        ));
    };
    if following::is_root(file) {
        let outcomes =
            following::follow_root(file, &args.follow, env.quiet, None, out, |name, lines| {
                follow_one(name, args, env, painter, lines)
            })?;
        return Ok(outcomes.into_iter().fold(Outcome::Success, Outcome::worst));
    }
    follow_one(file, args, env, painter, out)
}

/// One log followed (a file, a session directory, `store.db#ID`).
fn follow_one(
    file: &str,
    args: &ValidateArgs,
    env: &Env,
    painter: Painter,
    out: &mut dyn Write,
) -> Result<Outcome> {
    let mut session = Session::start(file, &args.follow)?;
    let name = session.name.clone();
    loop {
        let live = Arc::new(Mutex::new(Live {
            enabled: StatusLine::wanted(env.quiet),
            ..Live::default()
        }));
        let idle: Idle = {
            let live = Arc::clone(&live);
            let name = name.clone();
            Arc::new(move |pending: Pending| {
                let mut l = lock(&live);
                if l.enabled {
                    let text = l.text(&name, pending);
                    l.status.show(&text);
                }
            })
        };
        let (opened, ended) = session.open(Some(idle))?;
        let mut report = LiveReport {
            report: super::report(opened.framing.clone(), &mut *out, &name, args, env, painter),
            ended: Arc::clone(&ended),
            live: Arc::clone(&live),
        };
        let mut observer = LiveObserver {
            live: Arc::clone(&live),
            name: name.clone(),
            quiet: env.quiet,
            ended: Arc::clone(&ended),
        };
        let scanned = following::scan(opened, env.scan_options(), &mut report, &mut observer);
        lock(&live).status.clear();
        if let Some(e) = report.report.error.take() {
            return Err(e.into());
        }
        if session.again(&ended, env.quiet) {
            continue;
        }
        let scan = match scanned {
            Ok(s) => s,
            Err(e) => {
                let message = format!("cannot read {name}: {e}");
                super::write_unreadable(&message, &name, args, env, painter, out)?;
                return Ok(Outcome::Failure);
            }
        };
        if !session.stopped() {
            following::note_unreadable(&name, env.quiet);
        }
        let mut summary = super::summary_of(&name, &scan);
        // A store session: the storage layer's findings, merged as a one-shot run merges them.
        if let Some(end) = session.storage_end() {
            let (errors, warnings) = super::push_counted(&mut report, &end.findings);
            summary.status = dshs::log::sqlite::combined_status(summary.status, &end.findings);
            summary.errors += errors;
            summary.warnings += warnings;
            summary.torn_tail |= end.torn;
        }
        if let Some(e) = report.report.error.take() {
            return Err(e.into());
        }
        super::write_hidden_note(report.report.hidden, env.quiet, &name, args, painter, out)?;
        super::write_summary(out, args.format, painter, env.quiet, &summary)?;
        out.flush()?;
        return Ok(super::outcome(args, summary.status, summary.warnings));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_names_what_is_pending_at_the_end_so_far() {
        let live = Live {
            events: 12,
            errors: 1,
            open_turn: Some(40),
            tail: Some((44, 2)),
            ..Live::default()
        };
        let text = live.text(
            "s.jsonl",
            Pending {
                line_bytes: 31,
                frame_bytes: 0,
            },
        );
        assert_eq!(
            text,
            "following s.jsonl: 12 events, 1 error, 0 warnings; turn open since line 40; 2 rows from line 44 held back after a bad row (a crash tail unless a turn/end follows); 31 bytes of an incomplete line pending"
        );
    }
}
