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
        newest generation file (older generations are named in a note on stderr). Logs \
        compressed with zstd (`.jsonl.zstd`, `.jsonl.zst`, or any file starting with the zstd \
        magic) are read transparently; finding positions are lines and byte offsets of the \
        decompressed text, and findings also name the zstd frame.",
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
    /// List events as people read them: one line per event.
    #[command(after_help = INSPECT_EXIT_CODES, long_about = SHOW_ABOUT)]
    Show(ShowArgs),
    /// Summarize a log: header facts, event counts, turns, tools, compactions, tokens.
    #[command(after_help = INSPECT_EXIT_CODES)]
    Stats(StatsArgs),
    /// Cut a torn tail and close an open turn the way DSH does on resume (append-only).
    #[command(
        long_about = "Cut a torn tail and close an open turn the way DSH does on resume \
            (append-only).\n\n\
            Everything after the committed prefix (a torn final line, a crash tail) is cut off \
            and saved first to a new sidecar beside the log, FILE.dshs-cut-N (the first free N; \
            an existing file is never overwritten). If the last turn is open, the closers DSH \
            would synthesize are appended in the log's own format version: one error \
            tool/result per unanswered call, step/end if a step is open, then turn/end \
            interrupted. Committed bytes are never rewritten; the file is synced, and restored \
            to its original bytes on any failure. The result is checked by a full validation \
            pass before anything is written.\n\n\
            Refused, with nothing written: a log whose committed part has errors (exit 1); an \
            unsupported log, or a session whose session.lock another process holds, or a file \
            that changes while dshs works on it (exit 3). Standard input (`-`) cannot be \
            repaired in place: use --dry-run or --output.",
        after_help = EXIT_CODES
    )]
    Repair(RepairArgs),
    /// List the sessions under a DSH storage root, each validated, newest activity first.
    #[command(long_about = LS_ABOUT)]
    Ls(LsArgs),
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
    /// Check N logs at a time (default: one per core).
    #[arg(short = 'j', long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Log files (plain or zstd), session directories (their newest generation), storage
    /// roots (every session below), or `-` for standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
}

const LS_ABOUT: &str = "List the sessions under a DSH storage root, each validated, newest activity first.\n\n\
    ROOT defaults to DSH's own: $DSH_HOME/sessions, else ~/.dsh/sessions. Every session \
    directory below it (<root>/<project>/<session>/) is read at its newest generation \
    (plain or zstd) and validated, several at a time (--jobs, default one per core). One row \
    per session: last event time, status (valid, interrupted = an open turn that `dshs \
    repair` closes, torn = a torn tail or crash tail that repair cuts, invalid, unsupported, \
    unreadable), format version, events, turns, id, project cwd, creation time. Rows are \
    sorted by last activity, newest first (sessions without any time last). \
    --format json prints JSON Lines, one object per session.\n\n\
    Exit status: 0 when the root could be listed (whatever the sessions' states), 2 when it \
    cannot be read.";

#[derive(Debug, Args)]
pub struct LsArgs {
    /// Output format: a table, or JSON Lines (one object per session).
    #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
    pub format: ReportFormat,
    /// Validate N sessions at a time (default: one per core).
    #[arg(short = 'j', long, value_name = "N")]
    pub jobs: Option<usize>,
    /// The storage root (default: $DSH_HOME/sessions, else ~/.dsh/sessions).
    #[arg(value_name = "ROOT")]
    pub root: Option<PathBuf>,
}

/// Exit status of the read-only inspection commands (`show`, `stats`).
pub const INSPECT_EXIT_CODES: &str = "\
Exit status (what can be read is printed in every case):
  0  the log loads (warnings allowed)
  1  the log is invalid or corrupt (run `dshs validate` for the findings)
  2  usage error, unreadable file, I/O failure
  3  refused as unsupported: unknown or newer format version, a V4-draft log,
     an unknown event type not marked ignorable";

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Only events of type T (repeatable). A trailing `/` selects a family: `tool/` is
    /// tool/call, tool/result, …
    #[arg(long = "type", value_name = "T")]
    pub types: Vec<String>,
    /// Only events of turn N, or of turns A..B (inclusive; `A..` and `..B` are open). An
    /// event belongs to the turn its `data.turn` names, else to the turn open around it.
    #[arg(long, value_name = "N|A..B", value_parser = TurnRange::parse)]
    pub turn: Option<TurnRange>,
    /// Only events whose stored line contains TEXT (case-sensitive, raw JSON text: a packed
    /// chunk row matches as a whole).
    #[arg(long, value_name = "TEXT")]
    pub grep: Option<String>,
    /// One line per event, or the same selection as JSON Lines.
    #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
    pub format: ReportFormat,
    /// Log file, session directory, or `-` for standard input.
    #[arg(value_name = "FILE")]
    pub file: String,
}

pub const SHOW_ABOUT: &str = "\
List events as people read them: one line per event.

Columns: seq, time (local time zone; TZ applies), mark, type, turn.step, summary. Marks:
  +      a surface node the model still sees
  -      a surface node shadowed by a later replacement ([shadowed by N])
  !      an event the fold rejected, or a row that could not be used at all
  blank  a log-only event
Replacements say what they shadow ([replaces A..B: seqs]); rows after the committed prefix,
which DSH drops on load, are dimmed and marked [crash tail]. Filters combine with AND;
repeated --type values with OR.";

/// `--turn N`, `--turn A..B`, `--turn A..`, `--turn ..B` (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnRange {
    pub first: Option<i64>,
    pub last: Option<i64>,
}

impl TurnRange {
    pub fn parse(text: &str) -> Result<TurnRange, String> {
        let number = |s: &str| {
            s.trim()
                .parse::<i64>()
                .map_err(|_| format!("`{s}` is not a turn number (expected N, A..B, A.. or ..B)"))
        };
        let range = match text.split_once("..") {
            None => {
                let n = number(text)?;
                TurnRange {
                    first: Some(n),
                    last: Some(n),
                }
            }
            Some((a, b)) => TurnRange {
                first: if a.is_empty() { None } else { Some(number(a)?) },
                last: if b.is_empty() { None } else { Some(number(b)?) },
            },
        };
        match range {
            TurnRange {
                first: None,
                last: None,
            } => Err("`..` names no turn (expected N, A..B, A.. or ..B)".into()),
            TurnRange {
                first: Some(a),
                last: Some(b),
            } if a > b => Err(format!(
                "the range {a}..{b} is empty (first turn after last)"
            )),
            r => Ok(r),
        }
    }

    pub fn contains(&self, turn: i64) -> bool {
        self.first.is_none_or(|a| turn >= a) && self.last.is_none_or(|b| turn <= b)
    }
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// A report for people, or one JSON document.
    #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
    pub format: ReportFormat,
    /// Log file, session directory, or `-` for standard input.
    #[arg(value_name = "FILE")]
    pub file: String,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// A finding code such as `replace-start-not-on-surface`; omit to list all codes.
    pub code: Option<String>,
}

#[derive(Debug, Args)]
pub struct RepairArgs {
    /// Change nothing: print the events that would be appended (JSON Lines, stdout) and what
    /// would be cut (stderr).
    #[arg(long, conflicts_with = "output")]
    pub dry_run: bool,
    /// Write the repaired log to OUT (a new file; never replaced) and leave FILE untouched.
    #[arg(long, value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// The log file (or session directory) to repair; `-` with --dry-run or --output.
    #[arg(value_name = "FILE")]
    pub file: String,
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

    #[test]
    fn turn_ranges_parse_and_contain() {
        let r = TurnRange::parse("3").unwrap();
        assert!(r.contains(3) && !r.contains(2) && !r.contains(4));
        let r = TurnRange::parse("2..4").unwrap();
        assert!(r.contains(2) && r.contains(4) && !r.contains(5) && !r.contains(1));
        let r = TurnRange::parse("2..").unwrap();
        assert!(r.contains(2) && r.contains(99) && !r.contains(1));
        let r = TurnRange::parse("..2").unwrap();
        assert!(r.contains(-1) && r.contains(2) && !r.contains(3));
        for bad in ["", "x", "..", "1..x", "4..2", "1...2", "1.5"] {
            assert!(TurnRange::parse(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
