//! One module per subcommand, each `run(args, env, out) -> Result<Outcome>`; shared plumbing
//! (global options, opening and scanning a log) lives here.

pub mod completions;
pub mod derive;
pub mod explain;
mod fold;
pub mod repair;
pub mod show;
pub mod stats;
pub mod surface;
pub mod validate;

use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};

use dshs::log::Finding;
use dshs::log::Sink;
use dshs::log::input::{self, InputError, Opened, Source};
use dshs::log::scan::{self, Observer, Scan, ScanOptions, Status};
use dshs::log::vocab::KnownTypes;

use crate::cli::{Cli, Command};
use crate::exit::Outcome;
use crate::render::{Progress, use_color};

/// Global options, decided once; commands never see clap types for them.
pub struct Env {
    pub color_out: bool,
    pub quiet: bool,
    pub known_types: KnownTypes,
}

impl Env {
    fn from_cli(cli: &Cli) -> Result<Env> {
        let mut known = KnownTypes::default();
        if let Some(list) = std::env::var_os("DSHS_KNOWN_TYPES") {
            for path in std::env::split_paths(&list).filter(|p| !p.as_os_str().is_empty()) {
                known.load(&path).context("DSHS_KNOWN_TYPES")?;
            }
        }
        for path in &cli.known_types {
            known.load(path)?;
        }
        Ok(Env {
            color_out: use_color(cli.color, io::stdout().is_terminal()),
            quiet: cli.quiet,
            known_types: known,
        })
    }

    pub fn scan_options(&self) -> ScanOptions {
        ScanOptions {
            known_types: self.known_types.clone(),
            ..ScanOptions::default()
        }
    }
}

pub fn run(cli: Cli, out: &mut dyn Write) -> Result<Outcome> {
    let env = match Env::from_cli(&cli) {
        Ok(env) => env,
        Err(e) => {
            eprintln!("dshs: error: {e:#}");
            return Ok(Outcome::Failure);
        }
    };
    match cli.command {
        Command::Validate(args) => validate::run(&args, &env, out),
        Command::Explain(args) => explain::run(&args, &env, out),
        Command::Repair(args) => repair::run(&args, &env, out),
        Command::Show(args) => show::run(&args, &env, out),
        Command::Stats(args) => stats::run(&args, &env, out),
        Command::Surface(args) => surface::run(&args, &env, out),
        Command::Derive(args) => derive::run(&args, &env, out),
        Command::Completions(args) => completions::run(&args, out),
    }
}

/// Open a log for one pass and run the scan over it, with progress on long reads.
pub fn scan_source(
    opened: Opened,
    env: &Env,
    opts: &ScanOptions,
    sink: &mut dyn Sink,
    observer: &mut dyn Observer,
) -> io::Result<Scan> {
    let size = opened
        .path
        .as_deref()
        .and_then(|p| std::fs::metadata(p).ok())
        .map(|m| m.len());
    let reader = Progress::new(opened.reader, &opened.name, size, env.quiet);
    scan::scan(reader, opened.path.as_deref(), opts, sink, observer)
}

/// Open `arg` (a file, a session directory, or `-`).
pub fn open(arg: &str) -> Result<Opened, InputError> {
    input::open(&Source::from_arg(arg))
}

/// Open `arg`, or say on stderr why it cannot be read and return the exit status for that
/// (3 for an unsupported encoding, 2 otherwise).
pub fn open_or_report(arg: &str) -> Result<Opened, Outcome> {
    open(arg).map_err(|e| {
        eprintln!("dshs: error: {}", crate::render::escape(&e.to_string()));
        input_failure(&e)
    })
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
        let Opened { name, path, reader } = opened;
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

    /// A fresh reader from the start.
    pub fn open(&self) -> io::Result<Opened> {
        Ok(Opened {
            name: self.name.clone(),
            path: self.named.then(|| self.path.clone()),
            reader: Box::new(BufReader::with_capacity(
                256 * 1024,
                File::open(&self.path)?,
            )),
        })
    }
}

/// Reading failed part-way: report it and exit 2.
pub fn read_failure(name: &str, e: &io::Error) -> Outcome {
    eprintln!(
        "dshs: error: cannot read {}: {}",
        crate::render::escape(name),
        crate::render::escape(&e.to_string())
    );
    Outcome::Failure
}

/// The exit status of an inspection command: what `validate` would say about the log.
pub fn outcome_of(scan: &Scan) -> Outcome {
    match scan.status() {
        Status::Valid => Outcome::Success,
        Status::Invalid => Outcome::Invalid,
        Status::Unsupported => Outcome::Unsupported,
        Status::Unreadable => Outcome::Failure,
    }
}

/// For inspection commands: say on stderr when the log is not valid (they print what they
/// can and leave the findings to `validate`).
pub fn note_status(name: &str, scan: &Scan, first_error: Option<&Finding>, quiet: bool) {
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
    eprintln!(
        "dshs: {}: {} log ({} error{}, {} warning{}){first}; run `dshs validate` for every finding",
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
pub fn test_fault() -> Result<dshs::log::write::Fault, String> {
    #[cfg(debug_assertions)]
    if let Some(v) = std::env::var_os("DSHS_TEST_FAULT") {
        let v = v.to_string_lossy();
        return dshs::log::write::Fault::parse(&v).ok_or_else(|| {
            format!(
                "DSHS_TEST_FAULT={}: expected append:N, sidecar, sync, kill:POINT or pause:POINT",
                crate::render::escape(&v)
            )
        });
    }
    Ok(dshs::log::write::Fault::None)
}
