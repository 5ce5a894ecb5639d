//! One module per subcommand, each `run(args, env, out) -> Result<Outcome>`; shared plumbing
//! (global options, opening and scanning a log) lives here.

pub mod compact;
pub mod completions;
pub mod derive;
pub mod explain;
pub mod export;
mod fold;
mod follow;
pub mod grep;
pub mod ls;
pub mod man;
pub mod repair;
pub mod show;
pub mod stats;
mod store;
pub mod surface;
mod targets;
pub mod usage;
pub mod validate;
mod writing;

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use anyhow::Result;

use dshs::log::Finding;
use dshs::log::Sink;
use dshs::log::input::{self, InputError, Opened, Source};
use dshs::log::scan::{self, Observer, Scan, ScanOptions, Status};
use dshs::log::vocab::KnownTypes;

use crate::cli::{Cli, Command, ReportFormat};
use crate::exit::{Failure, Outcome};
use crate::render::{Progress, ProgressPolicy, use_color};

/// Global options, decided once; commands never see clap types for them.
pub struct Env {
    pub color_out: bool,
    /// `--quiet`: stdout is already a sink and diagnostics are off (main); commands may use
    /// this to skip work whose only purpose is output.
    pub quiet: bool,
    pub known_types: KnownTypes,
    /// When a long read may show a progress bar on stderr (see [`Env::for_output`]).
    pub progress: ProgressPolicy,
    /// Parsing threads per log (see [`ScanOptions::threads`]): 0 picks by itself; 1 when
    /// several logs are already read in parallel.
    pub threads: usize,
    stdout_is_terminal: bool,
}

/// What a command's output is like, for the progress bar: JSON output never comes with one,
/// and a command that writes while it reads (validate's findings, show's lines) gets none
/// when that goes to the same terminal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Output {
    pub json: bool,
    pub writes_while_reading: bool,
}

impl Output {
    /// The output of a command with `--format human|json`, which is all most commands need
    /// to say about it.
    pub fn report(format: ReportFormat, writes_while_reading: bool) -> Output {
        Output {
            json: format == ReportFormat::Json,
            writes_while_reading,
        }
    }
}

impl Env {
    fn from_cli(cli: &Cli) -> Result<Env> {
        let mut known = KnownTypes::default();
        if let Some(list) = std::env::var_os("DSHS_KNOWN_TYPES") {
            for path in std::env::split_paths(&list).filter(|p| !p.as_os_str().is_empty()) {
                known.load(&path).map_err(|e| {
                    Failure::usage(format!(
                        "{e} (listed in DSHS_KNOWN_TYPES; fix the file or the variable)"
                    ))
                })?;
            }
        }
        for path in &cli.known_types {
            known
                .load(path)
                .map_err(|e| Failure::usage(format!("--known-types: {e}")))?;
        }
        let stdout_is_terminal = io::stdout().is_terminal();
        Ok(Env {
            color_out: use_color(cli.color, stdout_is_terminal),
            quiet: cli.quiet,
            known_types: known,
            progress: ProgressPolicy {
                stderr_is_terminal: io::stderr().is_terminal(),
                quiet: cli.quiet,
                json: false,
                interleaves: false,
            },
            threads: 0,
            stdout_is_terminal,
        })
    }

    /// The same options for a command whose output is like `output` (see [`Output`]).
    pub fn for_output(&self, output: Output) -> Env {
        Env {
            known_types: self.known_types.clone(),
            progress: ProgressPolicy {
                json: output.json,
                interleaves: output.writes_while_reading && self.stdout_is_terminal,
                ..self.progress
            },
            ..*self
        }
    }

    /// For logs read several at once, one per worker thread: each is parsed on its worker
    /// alone (no parsing threads of its own), and no progress bar is drawn (several threads
    /// would draw over each other).
    pub fn for_parallel_logs(&self) -> Env {
        Env {
            threads: 1,
            known_types: self.known_types.clone(),
            progress: ProgressPolicy {
                interleaves: true,
                ..self.progress
            },
            ..*self
        }
    }

    /// The options for reading `logs` logs on `jobs` threads: those of
    /// [`Env::for_parallel_logs`] when several logs are read at once, else these.
    pub fn for_jobs(&self, jobs: usize, logs: usize) -> Env {
        if jobs > 1 && logs > 1 {
            self.for_parallel_logs()
        } else {
            Env {
                known_types: self.known_types.clone(),
                ..*self
            }
        }
    }

    pub fn scan_options(&self) -> ScanOptions {
        ScanOptions {
            known_types: self.known_types.clone(),
            threads: self.threads,
            ..ScanOptions::default()
        }
    }
}

pub fn run(cli: Cli, out: &mut dyn Write) -> Result<Outcome> {
    let env = Env::from_cli(&cli)?;
    QUIET_NOTES.store(env.quiet, Ordering::Relaxed);
    match cli.command {
        Command::Ls(args) => ls::run(&args, &env, out),
        Command::Grep(args) => grep::run(&args, &env, out),
        Command::Validate(args) => validate::run(&args, &env, out),
        Command::Explain(args) => explain::run(&args, &env, out),
        Command::Repair(args) => repair::run(&args, &env, out),
        Command::Compact(args) => compact::run(&args, &env, out),
        Command::Show(args) => show::run(&args, &env, out),
        Command::Stats(args) => stats::run(&args, &env, out),
        Command::Surface(args) => surface::run(&args, &env, out),
        Command::Derive(args) => derive::run(&args, &env, out),
        Command::Usage(args) => usage::run(&args, &env, out),
        Command::Export(args) => export::run(&args, &env, out),
        Command::Completions(args) => completions::run(&args, out),
        Command::Man => man::run(out),
    }
}

/// DSH's default storage root: `$DSH_HOME/sessions`, else `~/.dsh/sessions` (§2.1).
pub fn default_root() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("DSH_HOME").filter(|h| !h.is_empty()) {
        return Some(PathBuf::from(home).join("sessions"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".dsh").join("sessions"))
}

/// Open a log for one pass and run the scan over it, with progress on long reads.
pub fn scan_source(
    opened: Opened,
    env: &Env,
    opts: &ScanOptions,
    sink: &mut dyn Sink,
    observer: &mut dyn Observer,
) -> io::Result<Scan> {
    // Progress counts plaintext bytes: the size of a compressed file says nothing about them.
    let size = opened
        .path
        .as_deref()
        .filter(|_| opened.framing.is_none())
        .and_then(|p| std::fs::metadata(p).ok())
        .map(|m| m.len());
    let wants = env.progress.wants(size);
    // Read at positions, the progress bar is told how far the fold has come (the reader's
    // count stops after the header).
    let positional = opened.file.clone().map(|file| scan::Positional {
        file,
        progress: wants.then(|| {
            let meter = std::sync::Mutex::new(Progress::new(io::empty(), &opened.name, size, true));
            Arc::new(move |done: u64| {
                meter
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .advance_to(done);
            }) as Arc<dyn Fn(u64) + Send + Sync>
        }),
    });
    let reader = Progress::new(opened.reader, &opened.name, size, wants);
    let opts = &ScanOptions {
        from_pipe: opened.pipe,
        positional,
        ..opts.clone()
    };
    scan::scan_framed(
        reader,
        opened.framing.as_ref(),
        opened.path.as_deref(),
        opts,
        sink,
        observer,
    )
}

/// `-q` silences notes printed while opening (set once by [`run`]).
static QUIET_NOTES: AtomicBool = AtomicBool::new(false);

/// Open `arg` (a file, a session directory, or `-`). For a session directory holding older
/// generations too, a note on stderr says which file is read and which are not.
pub fn open(arg: &str) -> Result<Opened, InputError> {
    let opened = input::open(&Source::from_arg(arg))?;
    if let Some(log) = &opened.path
        && !QUIET_NOTES.load(Ordering::Relaxed)
    {
        let journal = dshs::log::write::journal_path(log);
        if journal.exists() {
            crate::render::diag!(
                "dshs: note: {}: an earlier dshs repair was interrupted; {} records how to finish it — `dshs repair {}` does",
                crate::render::escape(arg),
                crate::render::escape(&journal.display().to_string()),
                crate::render::escape(arg)
            );
        }
    }
    if !opened.older.is_empty()
        && !QUIET_NOTES.load(Ordering::Relaxed)
        && let Some(newest) = &opened.path
    {
        let name = |p: &std::path::Path| {
            p.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        };
        let generation = |p: &std::path::Path| input::generation_of_name(&name(p));
        // The same generation plain and compressed is not an older one: say which is read
        // and why.
        let (same, older): (Vec<&PathBuf>, Vec<&PathBuf>) = opened
            .older
            .iter()
            .partition(|p| generation(p) == generation(newest));
        let (same, older): (Vec<String>, Vec<String>) = (
            same.iter().map(|p| name(p)).collect(),
            older.iter().map(|p| name(p)).collect(),
        );
        if !same.is_empty() {
            let read = name(newest);
            let why = if read.ends_with(".jsonl") {
                "the plain file is preferred"
            } else {
                "the first by name"
            };
            crate::render::diag!(
                "dshs: note: {}: {} and {} hold the same generation; reading {} ({why}; DSH writes one of them, so the other is likely a copy: check they agree)",
                crate::render::escape(arg),
                crate::render::escape(&read),
                crate::render::escape(&same.join(", ")),
                crate::render::escape(&read),
            );
        }
        if !older.is_empty() {
            crate::render::diag!(
                "dshs: note: {}: reading the newest generation {}; older generation{} not read: {}",
                crate::render::escape(arg),
                crate::render::escape(&name(newest)),
                if older.len() == 1 { "" } else { "s" },
                crate::render::escape(&older.join(", "))
            );
        }
    }
    Ok(opened)
}

/// Expand command-line paths into logs: `-` and files stay as they are, a session
/// directory is one log (its newest generation), any other directory is a storage root
/// standing for every session directory below it (§2.1).
/// Each path comes with whether it was found below a storage root (rather than named on the
/// command line): such a session may be gone by the time it is read.
pub fn expand_paths_listed(args: &[String]) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for arg in args {
        let path = std::path::Path::new(arg);
        if arg == "-" || !path.is_dir() || input::is_session_dir(path) {
            out.push((arg.clone(), false));
            continue;
        }
        match input::find_sessions(path) {
            Ok(found) if !found.is_empty() => {
                note_strays(arg, &input::stray_logs(path, &found), true);
                out.extend(found.into_iter().map(|p| (p.display().to_string(), true)));
            }
            // Nothing found (or unreadable): opening it reports why.
            _ => {
                note_strays(arg, &input::stray_logs(path, &[]), false);
                out.push((arg.clone(), false));
            }
        }
    }
    out
}

/// Did opening the session directory `dir`, found below a storage root, fail because the
/// session is gone (removed or moved since the root was listed)? Such a session is a note,
/// not the end of the run: the root was read as it stood.
pub fn vanished(dir: &str, e: &InputError) -> bool {
    let gone = match e {
        InputError::NoGeneration { .. } => true,
        InputError::Open { source, .. } => source.kind() == io::ErrorKind::NotFound,
        _ => false,
    };
    gone && !input::is_session_dir(std::path::Path::new(dir))
}

/// Open a session found below a storage root with `open`: None when it is gone (see
/// [`vanished`]; a note says so). A generation file that went away while the directory
/// still holds a session (DSH started a newer generation) is looked up once more.
pub fn open_listed<T>(
    dir: &str,
    open: impl Fn() -> Result<T, InputError>,
) -> Result<Option<T>, InputError> {
    let retry = |e: &InputError| matches!(e, InputError::Open { source, .. } if source.kind() == io::ErrorKind::NotFound);
    let result = match open() {
        Err(e) if retry(&e) && !vanished(dir, &e) => open(),
        other => other,
    };
    match result {
        Err(e) if vanished(dir, &e) => {
            note_vanished(dir);
            Ok(None)
        }
        other => other.map(Some),
    }
}

/// The note for a session that is gone.
pub fn note_vanished(dir: &str) {
    if !QUIET_NOTES.load(Ordering::Relaxed) {
        crate::render::diag!(
            "dshs: note: {}: the session is gone (removed or moved since the storage root was listed); skipped",
            crate::render::escape(dir)
        );
    }
}

/// Say on stderr which log files below the directory `arg` a walk of it as a storage root
/// (its session directories, §2.1) leaves out, and how to read them. `sessions`: whether it
/// held any session directory at all.
pub fn note_strays(arg: &str, strays: &[std::path::PathBuf], sessions: bool) {
    if strays.is_empty() || QUIET_NOTES.load(Ordering::Relaxed) {
        return;
    }
    const NAMED: usize = 3;
    let mut named: Vec<String> = strays
        .iter()
        .take(NAMED)
        .map(|p| crate::render::escape(&p.display().to_string()).into_owned())
        .collect();
    if strays.len() > NAMED {
        named.push(format!("{} more", strays.len() - NAMED));
    }
    let what = if sessions {
        "read as a storage root (only the newest generation of each session directory below it)"
    } else {
        "not a DSH storage root: no session directory (`session[.vN].jsonl[.zstd]`) below it"
    };
    let glob = strays[0]
        .parent()
        .map_or_else(|| ".".to_owned(), |d| d.display().to_string());
    crate::render::diag!(
        "dshs: note: {} is {what}; {} log file{} below it {} not read: {}; name files to check them (`dshs validate {}/*.jsonl`)",
        crate::render::escape(arg),
        strays.len(),
        if strays.len() == 1 { "" } else { "s" },
        if strays.len() == 1 { "was" } else { "were" },
        named.join(", "),
        crate::render::escape(&glob)
    );
}

/// The number of worker threads: `--jobs N`, else one per core.
pub fn jobs(requested: Option<usize>) -> usize {
    requested
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Run `work` over `items` on `jobs` threads (a shared queue: each worker takes the next
/// index), handing each result to `emit` in item order as soon as it and all before it are
/// done. Output stays in the order of the command line however the work is scheduled.
pub fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    work: impl Fn(&T) -> R + Sync,
    mut emit: impl FnMut(R) -> Result<()>,
) -> Result<()> {
    if jobs <= 1 || items.len() <= 1 {
        for item in items {
            emit(work(item))?;
        }
        return Ok(());
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // Results wait for their turn in memory: a worker starts item i only once fewer than
    // `window` items before it are still unprinted, so a slow first log cannot make the
    // others' buffered reports pile up.
    let window = 2 * jobs;
    let emitted = (std::sync::Mutex::new(0usize), std::sync::Condvar::new());
    let wake_all = |emitted: &(std::sync::Mutex<usize>, std::sync::Condvar)| emitted.1.notify_all();
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel::<(usize, R)>();
        for _ in 0..jobs.min(items.len()) {
            let tx = tx.clone();
            let (next, stop, work, emitted) = (&next, &stop, &work, &emitted);
            dshs::log::limits::spawn_scoped(scope, move || {
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let mut done = emitted.0.lock().unwrap_or_else(|p| p.into_inner());
                    while i >= *done + window && !stop.load(Ordering::Relaxed) {
                        done = emitted.1.wait(done).unwrap_or_else(|p| p.into_inner());
                    }
                    drop(done);
                    if stop.load(Ordering::Relaxed) || tx.send((i, work(item))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut pending = std::collections::BTreeMap::new();
        let mut due = 0;
        for (i, r) in rx {
            pending.insert(i, r);
            while let Some(r) = pending.remove(&due) {
                due += 1;
                let result = emit(r);
                *emitted.0.lock().unwrap_or_else(|p| p.into_inner()) = due;
                if let Err(e) = result {
                    // Stop the workers (a closed pipe, say) and report the first error.
                    stop.store(true, Ordering::Relaxed);
                    wake_all(&emitted);
                    return Err(e);
                }
                wake_all(&emitted);
            }
        }
        Ok(())
    })
}

/// Open what a command that reads one log is given: a log (see [`open_log`]), or one
/// session of a SQLite session store (`STORE.db#ID`, `--session ID`, or a store holding one
/// session), streamed as its logical log; its storage findings come in the
/// [`store::StoreEnd`] once the pass is done. A database on standard input is a usage error.
pub fn open_input(
    arg: &str,
    session: Option<&str>,
    env: &Env,
) -> Result<(Opened, Option<store::StoreEnd>)> {
    open_input_with(arg, session, env, false)
}

/// [`open_input`]; a store session of format 0/1 has its packed rows handed on packed when
/// `packed` (see [`store::open_session_with`]).
pub fn open_input_with(
    arg: &str,
    session: Option<&str>,
    env: &Env,
    packed: bool,
) -> Result<(Opened, Option<store::StoreEnd>)> {
    match store::name(arg, session)? {
        store::Named::Log => {
            let mut opened = open_log(arg)?;
            store::refuse_streamed_database(&mut opened)?;
            Ok((opened, None))
        }
        store::Named::Store { path, shown, id } => {
            let (db, id) = store::open_one(&path, &shown, id.as_deref())?;
            let (opened, end) = store::open_session_with(
                db,
                &shown,
                &id,
                env.quiet,
                packed,
                env.scan_options().parse_threads(),
                true,
            )?;
            Ok((opened, Some(end)))
        }
    }
}

/// Open `arg` (see [`open`]); an input that cannot be opened is the command's error.
pub fn open_log(arg: &str) -> Result<Opened> {
    open(arg).map_err(input_error)
}

/// The command's error for an input that could not be opened.
pub fn input_error(e: InputError) -> anyhow::Error {
    Failure::of(input_failure(&e), e.to_string())
}

/// The exit status for an input that could not be opened.
pub fn input_failure(e: &InputError) -> Outcome {
    if e.is_unsupported() {
        Outcome::Unsupported
    } else {
        Outcome::Failure
    }
}

/// A log that can be read more than once: the file itself, or standard input spooled to a
/// temporary file (deleted on drop). The spool keeps no path, so the file-name checks of the
/// pass are skipped for it exactly as for a single pass over stdin.
pub struct Seekable {
    name: String,
    path: PathBuf,
    named: bool,
    _spool: Option<tempfile::NamedTempFile>,
}

impl Seekable {
    pub fn new(opened: Opened) -> io::Result<Seekable> {
        let Opened {
            name, path, reader, ..
        } = opened;
        if let Some(path) = path {
            return Ok(Seekable {
                name,
                path,
                named: true,
                _spool: None,
            });
        }
        // Copy from the opened reader, not from stdin: it already holds the peeked bytes.
        let mut reader = reader;
        let mut tmp = tempfile::NamedTempFile::new()?;
        io::copy(&mut reader, tmp.as_file_mut())?;
        tmp.as_file_mut().flush()?;
        Ok(Seekable {
            name,
            path: tmp.path().to_path_buf(),
            named: false,
            _spool: Some(tmp),
        })
    }

    /// A fresh reader from the start (a zstd log is decoded again).
    pub fn open(&self) -> io::Result<Opened> {
        let mut opened = input::open_file(&self.path, self.name.clone()).map_err(|e| match e {
            InputError::Open { source, .. } | InputError::Read { source, .. } => source,
            other => io::Error::other(other.to_string()),
        })?;
        if !self.named {
            opened.path = None;
        }
        Ok(opened)
    }
}

/// Reading failed part-way: the command's error (exit 2).
pub fn read_failure(name: &str, e: &io::Error) -> anyhow::Error {
    Failure::of(
        Outcome::of_read(e),
        format!("cannot read {}: {e}", crate::render::escape(name)),
    )
}

/// The exit status of an inspection command: what `validate` would say about the log.
pub fn outcome_of(scan: &Scan) -> Outcome {
    outcome_of_status(scan.status())
}

/// The exit status of an inspection command for a log's status.
pub fn outcome_of_status(status: Status) -> Outcome {
    match status {
        Status::Valid => Outcome::Success,
        Status::Invalid => Outcome::Invalid,
        Status::Unsupported => Outcome::Unsupported,
        Status::Unreadable => Outcome::Failure,
    }
}

/// For inspection commands: say on stderr when the log is not valid (they print what they
/// can and leave the findings to `validate`).
pub fn note_status(name: &str, scan: &Scan, first_error: Option<&Finding>, quiet: bool) {
    note_status_checked(name, scan, first_error, quiet, None);
}

/// [`note_status`] for a pass that made only some checks (the light pass): `checked` says
/// which.
pub fn note_status_checked(
    name: &str,
    scan: &Scan,
    first_error: Option<&Finding>,
    quiet: bool,
    checked: Option<&str>,
) {
    let status = scan.status();
    if quiet || status == Status::Valid {
        return;
    }
    let first = first_error.map_or_else(String::new, |f| {
        format!(
            "; first: line {}: [{}] {}",
            f.pos.line,
            f.code.as_str(),
            crate::render::escape(&dshs::log::text::clip(&f.message, 160))
        )
    });
    let checked = checked.map_or_else(String::new, |c| format!("; {c}"));
    crate::render::diag!(
        "dshs: {}: {} log ({} error{}, {} warning{}){first}{checked}; run `dshs validate` for every finding",
        crate::render::escape(name),
        status.as_str(),
        scan.tally.errors,
        crate::render::human::plural(scan.tally.errors),
        scan.tally.warnings,
        crate::render::human::plural(scan.tally.warnings),
    );
}

/// Debug builds only: `DSHS_TEST_FAULT` makes a command that writes (`repair`, `compact`)
/// fail, die or pause on purpose at a point of the write, so the tests can prove the
/// rollback, crash consistency and the live-writer checks (`write::Fault::parse` lists the
/// values). Release builds ignore the variable.
pub fn test_fault() -> Result<dshs::log::write::Fault> {
    #[cfg(debug_assertions)]
    if let Some(v) = std::env::var_os("DSHS_TEST_FAULT") {
        let v = v.to_string_lossy();
        return dshs::log::write::Fault::parse(&v).ok_or_else(|| {
            Failure::usage(format!(
                "DSHS_TEST_FAULT={}: expected append:N, sidecar, sync, kill:POINT or pause:POINT",
                crate::render::escape(&v)
            ))
        });
    }
    Ok(dshs::log::write::Fault::None)
}

/// [`test_fault`] for a write to a SQLite store: `kill:POINT` or `pause:POINT` at a point of
/// its one transaction (`sqlite::write::Point` names them). Release builds ignore it.
pub fn store_test_fault() -> Result<dshs::log::sqlite::write::Fault> {
    #[cfg(debug_assertions)]
    if let Some(v) = std::env::var_os("DSHS_TEST_FAULT") {
        let v = v.to_string_lossy();
        return dshs::log::sqlite::write::Fault::parse(&v).ok_or_else(|| {
            Failure::usage(format!(
                "DSHS_TEST_FAULT={}: expected kill:POINT or pause:POINT (planned, checked, sidecar-synced, deleted, inserted, bumped, committed)",
                crate::render::escape(&v)
            ))
        });
    }
    Ok(dshs::log::sqlite::write::Fault::None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The options a command runs with: the global ones, for its kind of output.
    fn env(args: &[&str]) -> Env {
        let cli = Cli::try_parse_from(args).expect("valid arguments");
        let env = Env::from_cli(&cli).expect("no known-types files");
        let output = match &cli.command {
            Command::Validate(a) => validate::output(a),
            Command::Show(a) => show::output(a),
            Command::Stats(a) => stats::output(a),
            Command::Surface(a) => surface::output(a),
            Command::Derive(a) => derive::output(a),
            Command::Repair(a) => repair::output(a),
            Command::Grep(a) => grep::output(a),
            _ => Output::default(),
        };
        env.for_output(output)
    }

    #[test]
    fn json_output_never_gets_a_progress_bar() {
        for (args, json) in [
            (&["dshs", "validate", "x"][..], false),
            (&["dshs", "validate", "--format", "json", "x"], true),
            (&["dshs", "show", "--format", "json", "x"], true),
            (&["dshs", "stats", "--format", "json", "x"], true),
            (&["dshs", "stats", "x"], false),
            (&["dshs", "surface", "--format", "json", "x"], true),
            (&["dshs", "surface", "x"], false),
            (&["dshs", "derive", "x"], true),
            (&["dshs", "derive", "--format", "ndjson", "x"], true),
            (&["dshs", "derive", "--format", "markdown", "x"], false),
            (&["dshs", "repair", "--dry-run", "x"], true),
            (&["dshs", "repair", "x"], false),
        ] {
            let e = env(args);
            assert_eq!(e.progress.json, json, "{args:?}");
            assert!(!e.progress.quiet);
        }
        let e = env(&["dshs", "-q", "stats", "x"]);
        assert!(e.quiet && e.progress.quiet && !e.progress.wants(None));
    }

    #[test]
    fn in_parallel_keeps_the_order_and_never_runs_far_ahead_of_the_output() {
        let items: Vec<usize> = (0..200).collect();
        let printed = AtomicUsize::new(0);
        let mut seen = Vec::new();
        in_parallel(
            &items,
            3,
            |&i| {
                // A worker starts item i only when fewer than 2 × jobs earlier ones are unprinted.
                assert!(i < printed.load(Ordering::SeqCst) + 6, "item {i} ran ahead");
                if i % 7 == 0 {
                    std::thread::yield_now();
                }
                i
            },
            |i| {
                seen.push(i);
                printed.fetch_add(1, Ordering::SeqCst);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(seen, items);
    }
}
