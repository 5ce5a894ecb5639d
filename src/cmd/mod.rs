//! One module per subcommand, each `run(args, env, out) -> Result<Outcome>`; shared plumbing
//! (global options, opening and scanning a log) lives here.

pub mod completions;
pub mod derive;
pub mod explain;
mod fold;
pub mod surface;
pub mod validate;

use std::io::{self, IsTerminal, Write};

use anyhow::{Context, Result};

use dshs::log::Sink;
use dshs::log::input::{self, InputError, Opened, Source};
use dshs::log::scan::{self, Observer, Scan, ScanOptions};
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

/// The exit status for an input that could not be opened.
pub fn input_failure(e: &InputError) -> Outcome {
    if e.is_unsupported() {
        Outcome::Unsupported
    } else {
        Outcome::Failure
    }
}
