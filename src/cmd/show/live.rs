//! `dshs show --follow`: each event printed (and flushed) as it is folded.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use anyhow::{Result, anyhow};

use dshs::log::finding::Discard;
use dshs::log::follow::Ended;
use dshs::log::scan::{Observer, ScanOptions};

use crate::cli::{ReportFormat, ShowArgs};
use crate::cmd::follow::{self as following, Session};
use crate::exit::Outcome;

use super::super::Env;
use super::{Live, Marks, Printer, Tap};

/// Seq column width while following (the last seq is not known in advance).
const SEQ_WIDTH: usize = 4;

pub(super) fn run(args: &ShowArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    if args.session.is_some() {
        return Err(anyhow!(
            "--follow with --session is not supported: name the store's session as STORE.db#ID"
        ));
    }
    if following::is_root(&args.file) {
        let json = args.format == ReportFormat::Json;
        following::follow_root(
            &args.file,
            &args.follow,
            env.quiet,
            Some(json),
            out,
            |name, lines| follow_one(name, args, env, lines),
        )?;
        // Ctrl-C ends `show --follow` successfully (CLI.md).
        return Ok(Outcome::Success);
    }
    follow_one(&args.file, args, env, out)
}

/// One log followed (a file, a session directory, `store.db#ID`), named `file`.
fn follow_one(file: &str, args: &ShowArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    let mut session = Session::start(file, &args.follow)?;
    let marks = Marks {
        shadowed_by: HashMap::new(),
        replaces: HashMap::new(),
        crash_from: None,
        seq_width: SEQ_WIDTH,
    };
    loop {
        let (opened, ended) = session.open(None)?;
        let (mut printer, written) = Printer::new(args, env, &marks, Some(Live::default()));
        let tap = printer.tap.clone();
        let unfiltered = printer.filter.is_empty();
        let stopped_by_us = &session;
        let pass_ended = Arc::clone(&ended);
        let ((scanned, error), failed) = dshs::log::limits::beside(
            move || {
                let mut o = opened;
                o.reader = Box::new(Tap {
                    inner: o.reader,
                    state: tap,
                });
                let opts = ScanOptions {
                    keep_last_replacement: true,
                    ..env.scan_options()
                };
                let scanned =
                    following::scan(o, opts, &mut Discard, &mut printer as &mut dyn Observer);
                let stopped = matches!(
                    *pass_ended
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner),
                    Some(Ended::Stopped) | None
                );
                let torn = scanned
                    .as_ref()
                    .ok()
                    .and_then(|s| s.torn)
                    .filter(|_| unfiltered && stopped);
                (scanned, printer.finish(torn))
            },
            || stopped_by_us.pump(written, out),
        );
        let printed = failed.or(error);
        if let Some(e) = printed {
            return Err(e.into());
        }
        if session.again(&ended, env.quiet) {
            continue;
        }
        let scan = match scanned {
            Ok(s) => s,
            Err(e) => return Err(super::super::read_failure(file, &e)),
        };
        if !session.stopped() {
            following::note_unreadable(file, env.quiet);
            return Ok(super::super::outcome_of(&scan));
        }
        // Ctrl-C ends `show --follow` successfully (CLI.md).
        return Ok(Outcome::Success);
    }
}
