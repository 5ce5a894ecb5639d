//! Command-line definitions (clap derive) and nothing else.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub const EXIT_CODES: &str = "\
Exit status:
  0  success; for validate: the log loads (warnings allowed)
  1  the log is invalid or corrupt; repair/compact refused because of it
  2  usage error, unreadable file, I/O failure
  3  refused as unsupported: unknown or newer format version, a V4-draft log,
     an unknown event type not marked ignorable, or a live writer holds the session";

#[derive(Debug, Parser)]
#[command(
    name = "dshs",
    version,
    about = "Validate, inspect and repair DeepSeek Harness (DSH) session logs",
    long_about = "Validate, inspect and repair DeepSeek Harness (DSH) session logs (formats 0–4).\n\n\
        A path of `-` reads the log from standard input; a session directory resolves to its \
        newest generation file.",
    after_help = EXIT_CODES
)]
pub struct Cli {
    /// When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, global = true)]
    pub color: ColorChoice,

    /// Print less: no progress, no summaries beyond what the command exists to print.
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// A file declaring extra log-only event types (one per line, optional version list).
    /// Repeatable; adds to the files listed in DSHS_KNOWN_TYPES.
    #[arg(long, value_name = "FILE", global = true)]
    pub known_types: Vec<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check every rule of the log's format version and report every finding.
    #[command(after_help = EXIT_CODES)]
    Validate(ValidateArgs),
    /// Explain a finding code (or list them all).
    Explain(ExplainArgs),
    /// Print the current surface: the events the model sees, in order.
    #[command(after_help = EXIT_CODES)]
    Surface(SurfaceArgs),
    /// Print the model-visible messages, byte-for-byte as stored.
    #[command(after_help = EXIT_CODES)]
    Derive(DeriveArgs),
    /// Print a shell completion script.
    Completions(CompletionsArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Human,
    Json,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Output format: human-readable lines, or JSON Lines (findings, then a summary per file).
    #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
    pub format: ReportFormat,
    /// Exit 1 when there are warnings, too.
    #[arg(long)]
    pub deny_warnings: bool,
    /// Print at most N findings per file (the summary still counts all of them).
    #[arg(long, value_name = "N")]
    pub max_findings: Option<usize>,
    /// Log files, session directories, or `-` for standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// A finding code such as `replace-start-not-on-surface`; omit to list all codes.
    pub code: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SurfaceFormat {
    Table,
    Json,
}

#[derive(Debug, Args)]
pub struct SurfaceArgs {
    /// Output format: a table with a preview of each message, or one JSON document.
    #[arg(long, value_enum, default_value_t = SurfaceFormat::Table)]
    pub format: SurfaceFormat,
    /// Show the surface as it stood right after event SEQ (replays the log up to SEQ).
    #[arg(long, value_name = "SEQ")]
    pub at: Option<u64>,
    /// Log file, session directory, or `-` for standard input.
    #[arg(value_name = "FILE")]
    pub file: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DeriveFormat {
    Json,
    Ndjson,
    Markdown,
}

#[derive(Debug, Args)]
pub struct DeriveArgs {
    /// One JSON array, one message per line, or a readable transcript.
    #[arg(long, value_enum, default_value_t = DeriveFormat::Json)]
    pub format: DeriveFormat,
    /// Derive the messages as they stood right after event SEQ (replays the log up to SEQ).
    #[arg(long, value_name = "SEQ")]
    pub at: Option<u64>,
    /// Log file, session directory, or `-` for standard input.
    #[arg(value_name = "FILE")]
    pub file: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to generate a completion script for.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
