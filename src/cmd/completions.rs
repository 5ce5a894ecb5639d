//! `dshs completions SHELL`: print a completion script generated from the CLI definition.
//!
//! clap_complete turns `ValueHint::AnyPath` into "any file or directory". For the log
//! arguments (every positional marked `AnyPath`) the bash, zsh and fish scripts are narrowed
//! here to what dshs reads: directories (session directories) and `*.jsonl`, `*.jsonl.zst`,
//! `*.jsonl.zstd` files. Each narrowing is a textual edit of clap_complete's output that must
//! match: [`script`] panics in debug builds (and the committed-scripts test fails) if a
//! clap_complete upgrade changes the text it edits. Elvish and PowerShell keep clap_complete's
//! behaviour (their generators offer no file completion to narrow).

use std::io::Write;

use anyhow::Result;
use clap::{CommandFactory, ValueHint};
use clap_complete::Shell as Target;

use crate::cli::{Cli, CompletionsArgs, Shell};
use crate::exit::Outcome;

/// The suffixes of the log files dshs reads (besides directories).
pub const LOG_SUFFIXES: [&str; 3] = [".jsonl", ".jsonl.zst", ".jsonl.zstd"];

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
    let text = String::from_utf8_lossy(&buf).into_owned();
    let logs = log_commands();
    let text = match shell {
        Shell::Bash => narrow_bash(&text, &logs),
        Shell::Zsh => narrow_zsh(&text),
        Shell::Fish => narrow_fish(&text, &logs),
        Shell::Elvish | Shell::Powershell => text,
    };
    text.into_bytes()
}

pub fn run(args: &CompletionsArgs, out: &mut dyn Write) -> Result<Outcome> {
    out.write_all(&script(args.shell))?;
    Ok(Outcome::Success)
}

/// The subcommands whose positional arguments are logs (`ValueHint::AnyPath`).
fn log_commands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .filter(|s| {
            s.get_positionals()
                .any(|a| a.get_value_hint() == ValueHint::AnyPath)
        })
        .map(|s| s.get_name().to_owned())
        .collect()
}

/// Replace `from` (which must occur) by `to`, everywhere.
fn edit(text: &str, from: &str, to: &str) -> String {
    debug_assert!(
        text.contains(from),
        "clap_complete output changed: `{from}` not found"
    );
    text.replace(from, to)
}

/// zsh: `_files` for a positional log argument becomes `_files -g PATTERN` (which still
/// offers directories to descend into).
fn narrow_zsh(text: &str) -> String {
    let pattern = format!(
        "*.jsonl(|{})",
        LOG_SUFFIXES[1..]
            .iter()
            .map(|s| &s[".jsonl".len()..])
            .collect::<Vec<_>>()
            .join("|")
    );
    let mut out = String::with_capacity(text.len() + 1024);
    let mut edited = false;
    for line in text.split_inclusive('\n') {
        // Positional specs look like `':file -- help:_files'` or `'*::files -- help:_files'`.
        let positional =
            line.trim_start().starts_with("':") || line.trim_start().starts_with("'*::");
        if positional && line.contains(":_files'") {
            out.push_str(&line.replace(":_files'", &format!(":_files -g \"{pattern}\"'")));
            edited = true;
        } else {
            out.push_str(line);
        }
    }
    debug_assert!(
        edited,
        "clap_complete zsh output changed: no positional _files"
    );
    out
}

/// fish: positional log arguments complete to directories and log files only (`-f` turns off
/// fish's default "any file" for the command; options taking a file keep their `-F`), and
/// positionals with a closed set of values (`completions SHELL`) complete to those values,
/// which clap_complete's fish script leaves out.
fn narrow_fish(text: &str, logs: &[String]) -> String {
    let pattern = LOG_SUFFIXES
        .iter()
        .map(|s| s.replace('.', "\\\\."))
        .collect::<Vec<_>>()
        .join("|");
    let mut out = text.to_owned();
    out.push_str(&format!(
        "\n# Log arguments: session directories and {} files.\n\
         function __fish_dshs_logs\n    \
             __fish_complete_path (commandline -ct) | string match -r -- '^[^\\t]*(?:/|{pattern})(?:\\t.*)?$'\n\
         end\n",
        LOG_SUFFIXES.map(|s| format!("*{s}")).join(", ")
    ));
    for cmd in logs {
        out.push_str(&format!(
            "complete -c dshs -n \"__fish_dshs_using_subcommand {cmd}\" -f -a \"(__fish_dshs_logs)\"\n"
        ));
    }
    for sub in Cli::command().get_subcommands() {
        for arg in sub.get_positionals() {
            let values: Vec<String> = arg
                .get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_owned())
                .collect();
            if !values.is_empty() {
                out.push_str(&format!(
                    "complete -c dshs -n \"__fish_dshs_using_subcommand {}\" -f -a \"{}\"\n",
                    sub.get_name(),
                    values.join(" ")
                ));
            }
        }
    }
    out
}

/// bash: a helper offers directories and log files; each log-taking subcommand calls it for a
/// word that is not an option (clap_complete's script offers only the options there, and
/// falls back to every file).
fn narrow_bash(text: &str, logs: &[String]) -> String {
    const FALLBACK: &str = "            COMPREPLY=( $(compgen -W \"${opts}\" -- \"${cur}\") )\n            return 0\n            ;;\n";
    const FIRST: &str = "if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then";
    let helper = format!(
        "# Log arguments: session directories and {} files.\n\
         _dshs_logs() {{\n    \
             local IFS=$'\\n'\n    \
             COMPREPLY=( $(compgen -d -- \"${{cur}}\")",
        LOG_SUFFIXES.map(|s| format!("*{s}")).join(", ")
    ) + &LOG_SUFFIXES
        .iter()
        .map(|s| format!(" $(compgen -f -X '!*{s}' -- \"${{cur}}\")"))
        .collect::<String>()
        + " )\n    \
           if [[ \"${BASH_VERSINFO[0]}\" -ge 4 ]]; then\n        \
               compopt -o filenames 2>/dev/null\n    \
           fi\n\
           }\n\n";
    let mut out = edit(text, "_dshs() {\n", &format!("{helper}_dshs() {{\n"));
    for cmd in logs {
        let label = format!("        dshs__subcmd__{cmd})\n");
        let Some(start) = out.find(&label) else {
            debug_assert!(
                false,
                "clap_complete bash output changed: no case for {cmd}"
            );
            continue;
        };
        let Some(len) = out[start..].find(FALLBACK) else {
            debug_assert!(
                false,
                "clap_complete bash output changed: no fallback for {cmd}"
            );
            continue;
        };
        let end = start + len + FALLBACK.len();
        let block = out[start..end]
            .replacen(FIRST, "if [[ ${cur} == -* ]] ; then", 1)
            .replacen(
                FALLBACK,
                "            _dshs_logs\n            return 0\n            ;;\n",
                1,
            );
        out.replace_range(start..end, &block);
    }
    out
}
