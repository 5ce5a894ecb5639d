//! Shared by `surface` and `derive`: fold a log the way DSH loads it (optionally only up to
//! `--at SEQ`), or say why it cannot be folded (CLI.md "surface": unsupported → 3, a header
//! error, fatal damage or a fold rejection → 1 with those findings, `--at` past the end → 2).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};

use dshs::log::derive::DeriveError;
use dshs::log::scan::{FoldState, Scan, ScanOptions, Status};
use dshs::log::sqlite::PackedRead;
use dshs::log::surface::Node;
use dshs::log::{Finding, Sink, input};

use crate::exit::{Failure, Outcome};
use crate::render::escape;
use crate::render::human::{self, Painter};

use super::Env;

/// A log folded as DSH would load it.
pub struct Folded {
    /// The name the user gave (`-` for standard input).
    pub name: String,
    pub scan: Scan,
    pub state: FoldState,
    /// The plaintext to fetch lines from: the log itself, or the spooled copy of stdin.
    pub lines: Option<PathBuf>,
    /// Keeps the spooled copy of standard input alive while lines are fetched.
    _spool: Option<tempfile::NamedTempFile>,
    /// DSH refuses the log, but only for a header it cannot load (one without
    /// `delegationDepth`): the fold is shown anyway, the error was said on stderr, and the
    /// command exits 1 after its output (the log is invalid, CLI.md exit status).
    pub invalid: bool,
    /// A store session read with its packed rows handed on packed: the nodes' positions
    /// are in that stream (and in `lines`), and are moved by this to say them.
    packed: Option<PackedRead>,
}

impl Folded {
    /// The seq the surface stands after: `--at SEQ`, or the last committed event.
    pub fn after_seq(&self) -> Option<u64> {
        self.state.surface.next_seq().checked_sub(1)
    }

    /// What names a node's place in the log (shareable with the threads that read nodes).
    pub fn place(&self) -> Place<'_> {
        Place {
            name: &self.name,
            packed: self.packed.as_ref(),
        }
    }

    /// A node's message could not be read back from its line: see [`reread_failure_at`].
    pub fn reread_failure(&self, node: &Node, e: &DeriveError) -> anyhow::Error {
        self.place().reread_failure(node, e)
    }
}

/// The log's name, and how its nodes' positions move to the log a user reads.
#[derive(Clone, Copy)]
pub struct Place<'f> {
    name: &'f str,
    packed: Option<&'f PackedRead>,
}

impl Place<'_> {
    /// See [`reread_failure_at`].
    pub fn reread_failure(&self, node: &Node, e: &DeriveError) -> anyhow::Error {
        let line = match self.packed {
            Some(read) => read
                .expanded_pos(node.pos)
                .map_or(node.pos.line, |p| p.line),
            None => node.pos.line,
        };
        reread_failure_at(self.name, line, node.seq, e)
    }
}

/// What the caller needs besides the fold.
pub struct Want {
    pub at: Option<u64>,
    /// Lines will be fetched by offset afterwards (standard input is spooled to a file).
    pub lines: bool,
    pub replacements: bool,
}

/// At most this many refusing findings are kept for the report (the count is exact).
const KEEP_FINDINGS: usize = 1000;

/// Keeps the findings that stop the fold or make the log unsupported; counts the rest.
#[derive(Default)]
struct Refusals {
    kept: Vec<Finding>,
    more: u64,
    /// Blocking findings other than `surface-op-missing` (kept or not).
    not_marker: u64,
}

impl Sink for Refusals {
    fn push(&mut self, f: Finding) {
        if !(f.is_error() && f.code.info().blocks_fold) {
            return;
        }
        if f.code != dshs::log::Code::SurfaceOpMissing {
            self.not_marker += 1;
        }
        if self.kept.len() < KEEP_FINDINGS {
            self.kept.push(f);
        } else {
            self.more += 1;
        }
    }
}

pub fn load(file: &str, session: Option<&str>, want: &Want, env: &Env) -> Result<Box<Folded>> {
    load_packed_first((file, session), want, env, false)
}

/// [`load`] by the light pass (`dshs::log::scan::light`), for a command whose output
/// depends on no check that pass leaves out (`surface`: none of them blocks the fold).
pub fn load_light(
    file: &str,
    session: Option<&str>,
    want: &Want,
    env: &Env,
) -> Result<Box<Folded>> {
    load_packed_first((file, session), want, env, true)
}

/// A format 0/1 store session is read first with its packed rows handed on packed: the
/// pass folds such a row without writing and parsing a line per member (a 1 GiB session
/// of format 0 expands to 4 GiB of lines), and every rule answers as on the expanded log
/// (`validate` reads it so). That read stands when [`packed_read_stands`] says so; else the
/// session is read again, expanded, and nothing of the first read is said. A JSONL log, a
/// later format or `--at` (a read that stops early) is read once, as it is.
fn load_packed_first(
    input: (&str, Option<&str>),
    want: &Want,
    env: &Env,
    light: bool,
) -> Result<Box<Folded>> {
    let packed = want.at.is_none();
    match load_with(input, want, env, None, &mut (), light, packed)? {
        Some(folded) => Ok(folded),
        None => load_with(input, want, env, None, &mut (), light, false)?
            .context("the session could not be read"),
    }
}

/// Sends every finding to both: the refusals and the caller's sink.
struct Both<'a, 'b> {
    refusals: &'a mut Refusals,
    also: Option<&'b mut dyn Sink>,
}

impl Sink for Both<'_, '_> {
    fn push(&mut self, f: Finding) {
        if let Some(also) = self.also.as_deref_mut() {
            also.push(f.clone());
        }
        self.refusals.push(f);
    }
}

/// [`load`], with every finding of the pass also sent to `sink` and every event to
/// `observer` (`export` shows findings and turns beside the surface).
pub fn load_observed(
    file: &str,
    session: Option<&str>,
    want: &Want,
    env: &Env,
    sink: Option<&mut dyn Sink>,
    observer: &mut dyn dshs::log::scan::Observer,
) -> Result<Box<Folded>> {
    load_with((file, session), want, env, sink, observer, false, false)?
        .context("the session could not be read")
}

/// [`load_observed`] by the light pass or not; `input`: the file and the session in it.
/// With `packed`, a format 0/1 store session is read with its packed rows handed on packed,
/// and `None` means that read cannot stand for the expanded log (see [`load_packed_first`]).
#[allow(clippy::too_many_arguments)]
fn load_with(
    (file, session): (&str, Option<&str>),
    want: &Want,
    env: &Env,
    sink: Option<&mut dyn Sink>,
    observer: &mut dyn dshs::log::scan::Observer,
    light: bool,
    packed: bool,
) -> Result<Option<Box<Folded>>> {
    let mut spool = None;
    let (mut opened, store) = super::open_input_with(file, session, env, packed)?;
    if want.lines {
        // No plaintext file to fetch lines from (zstd, standard input, a FIFO): keep a copy
        // of what the one pass reads.
        spool = input::tee_plaintext(&mut opened)
            .map_err(|e| Failure::usage(format!("cannot create a temporary file: {e}")))?;
    }
    let lines = match &spool {
        Some(copy) => Some(copy.path().to_path_buf()),
        None => opened.path.clone(),
    };
    let name = opened.name.clone();
    let opts = ScanOptions {
        stop_after: want.at,
        record_replacements: want.replacements,
        from_store: store.is_some(),
        light: light.then(dshs::log::scan::FullLines::default),
        ..env.scan_options()
    };
    let mut refusals = Refusals::default();
    let scanned = {
        let mut both = Both {
            refusals: &mut refusals,
            also: sink,
        };
        super::scan_source(opened, env, &opts, &mut both, observer)
    };
    let packed_read = store.as_ref().and_then(super::store::StoreEnd::packed_read);
    if let Some(read) = &packed_read
        && !scanned
            .as_ref()
            .is_ok_and(|scan| packed_read_stands(read, scan, &mut refusals))
    {
        return Ok(None);
    }
    let mut scan = scanned.map_err(|e| super::read_failure(&name, &e))?;
    if let Some(store) = &store {
        // DSH refuses a session whose storage layer has errors; a torn tail it drops is said.
        store.check(env.quiet)?;
    }
    let mut linear = false;
    if scan.tally.blocking > 0
        && refusals.not_marker == 0
        && scan.status() != Status::Unsupported
        && let Some(path) = &lines
        && let Some(unmarked) = fold_linearly(path, &name, &opts, env)?
    {
        // §21.9a: no event carries a surfaceOp (a log from before DSH's surface).
        scan = unmarked;
        linear = true;
        crate::render::diag!(
            "dshs: warning: {}: no event carries a surfaceOp marker (a log written before DSH's surface existed): shown by the linear scan of FORMAT.md §21.9a — every surface-eligible event in log order. DSH refuses such a log (`dshs validate`: {} surface-op-missing error{})",
            escape(&name),
            refusals.kept.len() as u64 + refusals.more,
            human::plural(refusals.kept.len() as u64 + refusals.more)
        );
    }
    let unsupported = scan.status() == Status::Unsupported;
    let header_only = !unsupported && header_lacks_only_delegation_depth(&scan, &refusals);
    if header_only {
        show_anyway(&name, &refusals);
    }
    if unsupported || (scan.tally.blocking > 0 && !header_only && !linear) || scan.state.is_none() {
        return Err(refuse(&name, &refusals, &scan, unsupported));
    }
    let Some(state) = scan.state.take() else {
        return Err(refuse(&name, &refusals, &scan, unsupported));
    };
    if scan.stop_not_reached {
        let at = want.at.unwrap_or_default();
        let last = match state.surface.next_seq().checked_sub(1) {
            Some(last) => format!("its last event is seq {last}"),
            None => "it has no events".to_owned(),
        };
        return Err(Failure::usage(format!(
            "--at {at}: {name} has no event with seq {at} ({last})"
        )));
    }
    Ok(Some(Box::new(Folded {
        name,
        scan,
        state,
        lines,
        _spool: spool,
        invalid: header_only || linear,
        packed: packed_read,
    })))
}

/// Whether a pass over a read with packed rows handed on packed gives what the pass over the
/// expanded log gives, as far as this command says it: the read ended cleanly, the pass left
/// no crash tail or torn line (their row counts count a packed row once), and each finding
/// to be printed moves to its line in the expanded log (and names no line in its words).
/// The findings are moved there.
fn packed_read_stands(read: &PackedRead, scan: &Scan, refusals: &mut Refusals) -> bool {
    read.stands_with(scan) && refusals.kept.iter_mut().all(|f| read.move_finding(f))
}

/// Counts events that carry a `surfaceOp`, of any type.
#[derive(Default)]
struct Markers(u64);

impl dshs::log::scan::Observer for Markers {
    fn reads_stream_records(&self) -> bool {
        false
    }
    fn event(&mut self, info: &dshs::log::scan::EventInfo<'_, '_>, _: &FoldState) {
        if info.event.surface_op.is_some() {
            self.0 += 1;
        }
    }
}

/// Fold the log at `path` again by the linear scan of §21.9a, if it is a log without any
/// `surfaceOp` marker whose one obstacle was the missing markers: `None` when it carries a
/// marker anywhere (then it is not a pre-surface log: no fallback, §21.9a) or still does not
/// fold.
fn fold_linearly(
    path: &std::path::Path,
    name: &str,
    opts: &ScanOptions,
    env: &Env,
) -> Result<Option<Scan>> {
    let Ok(opened) = input::open_file(path, name.to_owned()) else {
        return Ok(None);
    };
    let opts = ScanOptions {
        linear_surface: true,
        ..opts.clone()
    };
    let mut markers = Markers::default();
    let scan = super::scan_source(
        opened,
        env,
        &opts,
        &mut dshs::log::finding::Discard,
        &mut markers,
    )
    .map_err(|e| super::read_failure(name, &e))?;
    Ok((markers.0 == 0 && scan.tally.blocking == 0 && scan.state.is_some()).then_some(scan))
}

/// The one thing that stops the fold is a header without `delegationDepth` (early v0
/// snapshots, and 40+ real web-seed and replay logs): DSH refuses the log (§4.2, and
/// `validate` says invalid), yet its events fold like any other, so the read-only commands
/// show them, with the error stated.
fn header_lacks_only_delegation_depth(scan: &Scan, refusals: &Refusals) -> bool {
    scan.header
        .as_ref()
        .is_some_and(|h| h.lacks_delegation_depth)
        && scan.tally.blocking == 1
        && refusals.more == 0
        && matches!(refusals.kept.as_slice(), [f] if f.code == dshs::log::Code::HeaderFieldInvalid)
}

fn show_anyway(name: &str, refusals: &Refusals) {
    let painter = Painter { color: false };
    let mut err = crate::render::diag_stream();
    for f in &refusals.kept {
        let _ = writeln!(err, "{}", human::finding(&painter, name, f));
    }
    let _ = writeln!(
        err,
        "dshs: note: {}: DSH refuses this header, so the log is invalid (exit 1); shown anyway as the events fold",
        escape(name)
    );
}

/// A message could not be read back from `line` after the pass: say where, and the likely
/// reason (the file changed underneath). For a node kept past its surface (`export` shows
/// the history a replacement shadowed), or of a [`Folded`] ([`Folded::reread_failure`]).
pub fn reread_failure_at(name: &str, line: u64, seq: u64, e: &DeriveError) -> anyhow::Error {
    let why = match e {
        DeriveError::Io { source, .. } => format!("cannot read the line again: {source}"),
        DeriveError::Message { source, .. } => source.to_string(),
    };
    anyhow::anyhow!(
        "{}: line {}, seq {}: {why}; did the log change while dshs read it? run the command again",
        escape(name),
        line,
        seq
    )
}

/// The findings that stop the fold, printed as `validate` prints them; the error says why
/// nothing is shown (exit 3 for an unsupported log, 1 otherwise).
fn refuse(name: &str, refusals: &Refusals, scan: &Scan, unsupported: bool) -> anyhow::Error {
    let painter = Painter { color: false };
    let mut err = crate::render::diag_stream();
    // In line order, as `validate` prints them (end-of-log checks point back at earlier lines).
    let mut in_order: Vec<&Finding> = refusals.kept.iter().collect();
    in_order.sort_by_key(|f| (f.pos.line, f.pos.byte));
    for f in in_order {
        let _ = writeln!(err, "{}", human::finding(&painter, name, f));
    }
    if refusals.more > 0 {
        let _ = writeln!(
            err,
            "{}: … {} more finding{} not shown",
            escape(name),
            refusals.more,
            human::plural(refusals.more)
        );
    }
    let explain = refusals.kept.first().map_or_else(String::new, |f| {
        format!(", `dshs explain {}` how to fix it", f.code.as_str())
    });
    let why = if unsupported {
        match refusals.kept.first() {
            Some(f) => format!(
                "is not supported (see above; `dshs explain {}` says what to do)",
                f.code.as_str()
            ),
            None => "is not supported (see above)".to_owned(),
        }
    } else {
        let n = scan.tally.blocking.max(1);
        format!(
            "cannot be folded the way DSH loads it ({n} blocking error{}; `dshs validate` lists every finding{explain})",
            human::plural(n)
        )
    };
    let outcome = if unsupported {
        Outcome::Unsupported
    } else {
        Outcome::Invalid
    };
    Failure::of(outcome, format!("{name} {why}"))
}
