//! `dshs completions SHELL`: print a completion script generated from the CLI definition.

use std::io::Write;

use anyhow::Result;
use clap::CommandFactory;
use clap_complete::Shell as Target;

use crate::cli::{Cli, CompletionsArgs, Shell};
use crate::exit::Outcome;

pub fn script(shell: Shell) -> Vec<u8> {
    let target = match shell {
        Shell::Bash => Target::Bash,
        Shell::Zsh => Target::Zsh,
        Shell::Fish => Target::Fish,
        Shell::Elvish => Target::Elvish,
        Shell::Powershell => Target::PowerShell,
    };
    let mut buf = Vec::new();
    clap_complete::generate(target, &mut Cli::command(), "dshs", &mut buf);
    buf
}

pub fn run(args: &CompletionsArgs, out: &mut dyn Write) -> Result<Outcome> {
    out.write_all(&script(args.shell))?;
    Ok(Outcome::Success)
}
