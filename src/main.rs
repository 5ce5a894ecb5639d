//! `dshs`: parse arguments, run the command, map the outcome to an exit code.

mod alloc;
mod cli;
mod cmd;
mod exit;
mod render;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    alloc::tune();
    let cli = cli::Cli::parse();
    // --quiet: nothing on stdout or stderr, whatever the command; only the exit status.
    let mut out: Box<dyn Write> = if cli.quiet {
        render::silence();
        Box::new(std::io::sink())
    } else {
        Box::new(std::io::BufWriter::with_capacity(
            64 * 1024,
            std::io::stdout().lock(),
        ))
    };
    let result = cmd::run(cli, &mut out).and_then(|o| {
        out.flush()?;
        Ok(o)
    });
    match result {
        Ok(outcome) => outcome.into(),
        // `dshs derive x | head -1`: the reader went away; that is not a failure.
        Err(e) if render::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            drop(out);
            // The one place a command's error is said, and its exit status decided.
            render::error(&e);
            exit::Failure::outcome_of(&e).into()
        }
    }
}
