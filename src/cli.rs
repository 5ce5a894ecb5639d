//! Command-line definitions (clap derive) and nothing else.

use std::path::PathBuf;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum, ValueHint};

/// THE exit-status table. `--help` of the top level and of every command that can end in any
/// of these shows it; the man page's EXIT STATUS section is rendered from it
/// ([`exit_table`]). One entry per line `  N  meaning`, continuation lines indented further.
pub const EXIT_CODES: &str = "\
Exit status:
  0  success; for validate: the log loads (warnings allowed)
  1  the log is invalid or corrupt; repair/compact refused because of it
  2  usage error, unreadable file, I/O failure
  3  refused as unsupported: unknown or newer format version, a V4-draft log,
     an unknown event type not marked ignorable, or a live writer holds the session
  4  a line or row past one of dshs's own guards (line size: DSHS_MAX_LINE_BYTES;
     JSON depth: DSHS_MAX_JSON_DEPTH): not read, never called damage, nothing cut";

/// `(code, meaning)` rows of an exit-status text such as [`EXIT_CODES`], continuation lines
/// joined: the man page renders these as a table.
pub fn exit_table(text: &str) -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> = Vec::new();
    for line in text.lines().skip(1) {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match trimmed.split_once("  ") {
            Some((code, meaning)) if indent == 2 && code.parse::<u8>().is_ok() => {
                rows.push((code.to_owned(), meaning.trim().to_owned()))
            }
            _ => {
                if let Some(last) = rows.last_mut() {
                    last.1.push(' ');
                    last.1.push_str(trimmed);
                }
            }
        }
    }
    rows
}

/// Examples for the whole tool: the end of `dshs --help` and the man page's EXAMPLES.
pub const EXAMPLES: &str = "\
Examples:
  dshs validate ~/.dsh/sessions/abc/session.v3.jsonl
  dshs validate --format json sessions/*/session*.jsonl | jq 'select(.type==\"summary\")'
  dshs -q validate s.jsonl || dshs -q repair s.jsonl   # a pre-resume hook
  dshs show --type tool/ --turn 3.. session.jsonl
  dshs derive session.jsonl | jq length                # what the model sees
  dshs repair --dry-run session.jsonl                  # what repair would do
  dshs compact --start 5 --end 12 --summary-file notes.md session.jsonl
  dshs ls                                              # every session, newest first
  dshs grep -i 'cargo test' --role assistant           # where the model ran it, in every session
  dshs explain replace-start-not-on-surface
  dshs man | man -l -                                  # this manual";

/// The end of a command's long help: its examples (one command line per line, indented
/// here), then an exit-status table.
pub fn examples_then(examples: &str, exit_codes: &str) -> String {
    let mut text = String::from("Examples:\n");
    for line in examples.lines() {
        text.push_str("  ");
        text.push_str(line.trim_start());
        text.push('\n');
    }
    text.push('\n');
    text.push_str(exit_codes);
    text
}

/// What `FILE` accepts, shared by every command that reads a log.
const FILE_HELP: &str = "Log file, session directory, SQLite session store (STORE.db or STORE.db#SESSION_ID), or `-` for standard input";

/// `--session ID`, shared by every command that reads one session.
const SESSION_HELP: &str = "The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one";

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
        decompressed text, and findings also name the zstd frame. A file that starts with \
        the SQLite magic is a DSH SQLite session store, whatever its name: `STORE.db#ID` \
        (or --session ID) names one of its sessions, which every command reads as the \
        logical log the JSONL backend would hold; `validate` and `ls` on the bare store \
        cover every session. `dshs help COMMAND` (or \
        `dshs COMMAND --help`) explains a command with examples; `dshs man` prints the manual \
        page.",
    after_help = EXIT_CODES,
    after_long_help = format!("{EXAMPLES}

{EXIT_CODES}"),
)]
pub struct Cli {
    /// When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto, global = true)]
    pub color: ColorChoice,

    /// Print nothing at all (no output, no errors, no progress); only the exit status speaks.
    #[arg(
        short,
        long,
        global = true,
        long_help = "Print nothing at all, on stdout or stderr: no output, no findings, no \
            error messages, no progress; only the exit status speaks (for scripts and \
            pre-resume hooks). Every command still does its work: `repair -q` repairs, \
            `derive -q` exits 1 when the log cannot be derived. Usage errors (a wrong flag) \
            and --help/--version still print.\n\n\
            Example: `dshs -q validate session.jsonl || dshs repair session.jsonl`"
    )]
    pub quiet: bool,

    /// A file declaring extra log-only event types (one per line, optional version list).
    /// Repeatable; adds to the files listed in DSHS_KNOWN_TYPES.
    #[arg(long, value_name = "FILE", global = true, value_hint = ValueHint::FilePath)]
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
    #[command(
        long_about = "Check every rule of the log's format version and report every finding.\n\n\
            The log is read once, streaming. Each finding has a stable code (`dshs explain \
            CODE` says what it means and how to fix it), a severity, the file, the 1-based \
            line, and the event seq when known. A torn final line or an open last turn is a \
            warning: that is what a crash leaves, and `dshs repair` fixes it.",
        after_help = EXIT_CODES,
        after_long_help = examples_then(VALIDATE_EXAMPLES, EXIT_CODES)
    )]
    Validate(ValidateArgs),
    /// Explain a finding code (or list them all).
    #[command(
        long_about = "Explain a finding code: its severity, the FORMAT.md rule, what it means \
            and how to fix it. Without CODE, list every code with a one-line meaning.",
        after_long_help = examples_then(EXPLAIN_EXAMPLES, EXPLAIN_EXIT_CODES)
    )]
    Explain(ExplainArgs),
    /// Print the current surface: the events the model sees, in order.
    #[command(
        long_about = "Print the current surface: the events the model sees, in order, with \
            type, role, how each entered (append or replace) and a preview of its text.\n\n\
            A log that DSH could not load (header error, fatal damage in the committed part, \
            an event the fold rejects) is refused with those findings (exit 1).",
        after_help = EXIT_CODES,
        after_long_help = examples_then(SURFACE_EXAMPLES, EXIT_CODES)
    )]
    Surface(SurfaceArgs),
    /// Print the model-visible messages, byte-for-byte as stored.
    #[command(
        long_about = "Print the model-visible messages in surface order, each byte-for-byte \
            the message object stored in the log.\n\n\
            Refused like `surface` when DSH could not load the log (exit 1).",
        after_help = EXIT_CODES,
        after_long_help = examples_then(DERIVE_EXAMPLES, EXIT_CODES)
    )]
    Derive(DeriveArgs),
    /// List events as people read them: one line per event.
    #[command(
        after_help = INSPECT_EXIT_CODES,
        long_about = SHOW_ABOUT,
        after_long_help = examples_then(SHOW_EXAMPLES, INSPECT_EXIT_CODES)
    )]
    Show(ShowArgs),
    /// Summarize a log: header facts, event counts, turns, tools, compactions, tokens.
    #[command(
        after_help = INSPECT_EXIT_CODES,
        long_about = "Summarize a log: header facts, event counts by type, turns and steps, \
            tool calls, compactions, token usage. What can be read is summarized even when the \
            log is invalid; the exit status says whether it is.",
        after_long_help = examples_then(STATS_EXAMPLES, INSPECT_EXIT_CODES)
    )]
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
            Writers exclude each other with an exclusive flock: on session.lock beside a log \
            in a session directory (created if absent, never deleted, as DSH does), on the \
            log file itself otherwise; holding it, dshs checks the log is still the one it \
            planned against.\n\n\
            Refused, with nothing written: a log whose committed part has errors (exit 1); an \
            unsupported log, or a session whose lock another process holds, or a file that \
            changes while dshs works on it (exit 3). Standard input (`-`) cannot be repaired \
            in place: use --dry-run or --output.\n\n\
            A session of a SQLite store (STORE.db#ID) is repaired in place in one transaction \
            (SQLITE.md S8.2): refused (exit 3) while another connection has the database open \
            (a running DSH keeps one), re-checked under the write lock, the torn-tail rows saved \
            to STORE.db.dshs-cut-N before they are deleted, the closers inserted as rows, and \
            the session's revision bumped once. A schema-15 store is written only with \
            --allow-old-schema.",
        after_help = EXIT_CODES,
        after_long_help = examples_then(REPAIR_EXAMPLES, EXIT_CODES)
    )]
    Repair(RepairArgs),
    /// Replace a range of the surface with a summary, the way DSH's compaction does (append-only).
    #[command(
        long_about = COMPACT_ABOUT,
        after_help = COMPACT_EXIT_CODES,
        after_long_help = examples_then(COMPACT_EXAMPLES, COMPACT_EXIT_CODES)
    )]
    Compact(CompactArgs),
    /// Search the decoded text of logs: messages, reasoning, tool calls and results, summaries.
    #[command(
        long_about = GREP_ABOUT,
        after_help = GREP_EXIT_CODES,
        after_long_help = examples_then(GREP_EXAMPLES, GREP_EXIT_CODES)
    )]
    Grep(GrepArgs),
    /// List the sessions under a DSH storage root, each validated, newest activity first.
    #[command(
        long_about = LS_ABOUT,
        after_help = LS_EXIT_CODES,
        after_long_help = examples_then(LS_EXAMPLES, LS_EXIT_CODES)
    )]
    Ls(LsArgs),
    /// Tokens and cost of the model calls in sessions, counted once per call, by day, week,
    /// month, session, model or turn.
    #[command(
        long_about = USAGE_ABOUT,
        after_help = USAGE_EXIT_CODES,
        after_long_help = examples_then(USAGE_EXAMPLES, USAGE_EXIT_CODES)
    )]
    Usage(UsageArgs),
    /// Write a session as one self-contained web page (or a directory of pages).
    #[command(
        long_about = EXPORT_ABOUT,
        after_help = EXIT_CODES,
        after_long_help = examples_then(EXPORT_EXAMPLES, EXIT_CODES)
    )]
    Export(ExportArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(
        long_about = "Print a shell completion script generated from this command-line \
            definition. The same scripts ship in the source tree under completions/.",
        after_long_help = examples_then(COMPLETIONS_EXAMPLES, PRINT_EXIT_CODES)
    )]
    Completions(CompletionsArgs),
    /// Print the manual page (roff) for dshs and all its commands.
    #[command(
        long_about = "Print the manual page for dshs and all its commands, as roff. The same \
            page ships in the source tree as doc/dshs.1.",
        after_long_help = examples_then(MAN_EXAMPLES, PRINT_EXIT_CODES)
    )]
    Man,
}

const VALIDATE_EXAMPLES: &str = "\
  dshs validate session.v3.jsonl
  dshs validate ~/.dsh/sessions/abc              # a session directory: its newest log
  dshs validate ~/.dsh/sessions                  # every session below a storage root
  dshs validate session.jsonl.zstd               # zstd: read transparently
  dshs validate --deny-warnings --max-findings 20 a.jsonl b.jsonl
  dshs validate --format json s.jsonl | jq -c 'select(.type==\"finding\")'
  cat s.jsonl | dshs validate -
  dshs validate store.db                         # a SQLite store: every session
  dshs validate store.db#SESSION_ID              # one session of it";

const EXPLAIN_EXAMPLES: &str = "\
  dshs explain                                   # every code, one line each
  dshs explain committed-seq-gap";

/// Exit status of `explain`.
const EXPLAIN_EXIT_CODES: &str = "\
Exit status:
  0  the code was explained (or all were listed)
  2  unknown code, or a usage error";

const SURFACE_EXAMPLES: &str = "\
  dshs surface session.v4.jsonl
  dshs surface --at 120 session.v4.jsonl         # as it stood right after seq 120
  dshs surface --format json s.jsonl | jq '.nodes | length'";

const DERIVE_EXAMPLES: &str = "\
  dshs derive session.jsonl > messages.json
  dshs derive --format ndjson s.jsonl | head -3
  dshs derive --format markdown --at 40 s.jsonl | less";

const EXPORT_ABOUT: &str = "Write a session as one self-contained web page: the messages \
    the model sees now (the surface) in order, each compaction's summary with the history it \
    replaced folded under it, tool calls joined to their results, reasoning and prompts \
    collapsed, validation findings at their events, times in the reader's time zone, a search \
    box (also `page.html#q=TEXT`), light and dark themes.\n\n\
    The page needs nothing else and makes no request of any kind (its \
    Content-Security-Policy forbids them); every text from the log is escaped. Secrets (API \
    keys and tokens of the common providers, bearer tokens, private key blocks, passwords in \
    URLs) are masked unless --no-redact; the page says how many. The same log gives the same \
    bytes.\n\n\
    One session goes to standard output, or to -o FILE (written to a temporary file and \
    renamed). Several sessions, a storage root, or -o naming a directory write -o DIR: \
    index.html and one page per session, sub-agents linked from their parents.\n\n\
    Refused like `derive` when DSH could not load the log (exit 1).";

const EXPORT_EXAMPLES: &str = "\
  dshs export session.jsonl > session.html
  dshs export -o page.html ~/.dsh/sessions/proj/0b9f3c1e
  dshs export -o site/ ~/.dsh/sessions
  dshs export --turn 2..4 --no-redact s.jsonl > turns.html";

const SHOW_EXAMPLES: &str = "\
  dshs show session.jsonl
  dshs show --type tool/ --turn 3..5 session.jsonl
  dshs show --grep 'cargo test' --format json s.jsonl";

const STATS_EXAMPLES: &str = "\
  dshs stats session.jsonl
  dshs stats --format json s.jsonl | jq .tokens";

const REPAIR_EXAMPLES: &str = "\
  dshs repair --dry-run session.jsonl            # closers on stdout, the cut on stderr
  dshs repair session.jsonl                      # in place; the cut is kept in a sidecar
  dshs repair --output fixed.jsonl session.jsonl
  dshs repair store.db#SESSION_ID                # a SQLite store: one transaction
  dshs repair --output fixed.jsonl store.db#SESSION_ID   # the repaired logical log";

const COMPLETIONS_EXAMPLES: &str = "\
  dshs completions bash > ~/.local/share/bash-completion/completions/dshs
  dshs completions zsh > ~/.zfunc/_dshs          # with fpath+=(~/.zfunc) in .zshrc
  dshs completions fish > ~/.config/fish/completions/dshs.fish";

const MAN_EXAMPLES: &str = "\
  dshs man | man -l -
  dshs man > ~/.local/share/man/man1/dshs.1";

/// Exit status of the commands that only print something built in (`completions`, `man`).
const PRINT_EXIT_CODES: &str = "\
Exit status:
  0  printed
  2  usage error, or the output could not be written";

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
    #[arg(long, value_name = "N", value_parser = parse_count, value_hint = ValueHint::Other)]
    pub max_findings: Option<usize>,
    /// Check N logs at a time (default: one per core).
    #[arg(short = 'j', long, value_name = "N", value_parser = parse_count, value_hint = ValueHint::Other)]
    pub jobs: Option<usize>,
    /// Only session ID of each SQLite session store given (repeatable; default: every
    /// session, in rowid order).
    #[arg(long = "session", value_name = "ID", value_hint = ValueHint::Other)]
    pub sessions: Vec<String>,
    /// Log files (plain or zstd), session directories (their newest generation), storage
    /// roots (every session below), SQLite session stores (every session; STORE.db#ID for
    /// one), or `-` for standard input.
    #[arg(required = true, value_name = "FILE", value_hint = ValueHint::AnyPath)]
    pub files: Vec<String>,
    #[command(flatten)]
    pub follow: FollowArgs,
}

/// `--follow` and `--poll` (show, validate, grep).
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct FollowArgs {
    /// Keep reading as the running session appends, until Ctrl-C: each new event is checked
    /// and folded once, from the state the previous ones left.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// With --follow: look for new data every MS milliseconds instead of watching
    /// file-system events (for network file systems).
    #[arg(long, value_name = "MS", requires = "follow", value_parser = parse_count, value_hint = ValueHint::Other)]
    pub poll: Option<usize>,
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
    ROOT may also be a SQLite session store (a file starting with the SQLite magic): one row \
    per session in it, path STORE.db#ID, with its physical row count; dshs never scans a \
    root for databases.";

const LS_EXAMPLES: &str = "\
  dshs ls                                        # $DSH_HOME/sessions or ~/.dsh/sessions
  dshs ls -j 1 /srv/dsh/sessions
  dshs ls --format json | jq -r 'select(.status!=\"valid\") | .path'
  dshs ls /srv/dsh/store.db                      # the sessions of a SQLite store";

/// Exit status of `ls`.
const LS_EXIT_CODES: &str = "\
Exit status:
  0  the root was listed (whatever state the sessions are in; see the status column)
  2  the root cannot be read, or a usage error";

#[derive(Debug, Args)]
pub struct LsArgs {
    /// Output format: a table, or JSON Lines (one object per session).
    #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
    pub format: ReportFormat,
    /// Validate N sessions at a time (default: one per core).
    #[arg(short = 'j', long, value_name = "N", value_parser = parse_count, value_hint = ValueHint::Other)]
    pub jobs: Option<usize>,
    /// The storage root (default: $DSH_HOME/sessions, else ~/.dsh/sessions), or a SQLite
    /// session store (one row per session).
    #[arg(value_name = "ROOT", value_hint = ValueHint::DirPath)]
    pub root: Option<PathBuf>,
}

pub const GREP_ABOUT: &str = "\
Search the decoded text of logs: message text, reasoning, tool-call names and arguments,
tool output, compaction summaries, titles, todos, format 0-2 system prompts. PATTERN is
a regular expression (Rust regex
syntax; -F for a fixed string), matched one line of decoded text at a time: never the
escaped JSON, so `\\n`, `\\\"` and `\\u00e9` in the file are a line break, a quote and an é.
A tool call's JSON arguments are decoded too; each string of them is searched under its
key (`command`, `edits[0].old_string`).

What each event type contributes (every format unless named; roles as --role knows them):
  user/message                  message text (user)
  system/message (3+)           message text (system)
  developer/message (4)         message text and tool names (developer)
  assistant/message             text, reasoning, tool calls: name and arguments (assistant)
  tool/result                   the tool's output (tool, though formats 0-3 store it as user)
  tool/call                     name and arguments (assistant)
  assistant/attempt (2+)        its stream: a response that produced no message (assistant)
  compaction/summary            the summary, and raw output that differs from it (no role)
  request/header (0-2)          the system prompt (system)
  agent/inbox/spliced           the queued messages (their role)
  session/title, todo/write     the title, each todo (no role)
Format 0 pre-release shapes are searched as DSH normalizes them (steering/message as a
user/message, compact/* as compaction/*).

PATH is a log, a session directory (its newest generation), a storage root (every session
below it, plain or zstd, several at a time: -j), or `-`; without PATH, DSH's own root
($DSH_HOME/sessions, else ~/.dsh/sessions).

Every event that carries text is searched, each log folded exactly as DSH loads it: a
match in a surface node that a later replacement took off the surface (a compacted or
pruned message) is marked [shadowed], one the fold rejected [rejected], one after the
committed prefix [crash tail]. --surface keeps only what the model sees now (the final
surface, and in formats 0-2 the latest request's system prompt); --at SEQ searches the log
as it stood right after event SEQ. Filters combine with AND; repeated --role and --type
values with OR.

Output: one line per matching line of text,
  PATH:LINE: seq N turn T TYPE ROLE [PART] [MARK]: TEXT
LINE being the log's line holding the event (zstd: of the decompressed text), TEXT the
line of text with its matches highlighted (cut to 300 characters around the first one;
everything from the log is escaped for the terminal). -C N adds the N events before and
after (PATH-LINE- ...- first line). --format json prints JSON Lines: `match` (and
`context`) records {file, line, byte, seq, time, turn, eventType, role, part, tool?,
key?, textLine, shadowed, surface, text, submatches: [{start, end}] as byte offsets in
text}, `count` records with -c/-l, then one `summary`.

Each log is first read raw: the literals the pattern requires (every match holds one)
are looked for in the stored bytes, their escaped spellings included, so a log without a
line that could match is never parsed (nor validated); nor is one whose candidate lines,
decoded alone, hold no match. A log that does not load as DSH would
load it is still searched as far as it can be read, with a note on stderr; one that
cannot be read is an error (the others are still searched). With -l (not as JSON) and
with -q, a log is read only up to its first match, so the note covers only that part of it
(--surface reads every log whole: a later replacement may shadow any match).

Streamed deltas (format 0/1 assistant/chunk events, the embedded stream of format 2+
assistant/message) repeat their message and are searched only with --chunks; the stream
of a format 2+ assistant/attempt (a response that produced no message) always is.";

const GREP_EXAMPLES: &str = "\
  dshs grep 'cargo test'                          # every session under DSH's root
  dshs grep -F 'rm -rf' --role assistant --type tool/ ~/.dsh/sessions
  dshs grep -i -w timeout --turn 3..5 -C 1 session.v4.jsonl
  dshs grep --surface 'API key' s.jsonl           # only what the model still sees
  dshs grep -l 'ENOSPC' --since 2d                # sessions of the last two days
  dshs grep --format json 'panicked at' | jq -r 'select(.type==\"match\") | .file'";

/// Exit status of `grep` (the grep convention).
const GREP_EXIT_CODES: &str = "\
Exit status:
  0  something matched (with -q: even when a log could not be read)
  1  nothing matched
  2  an error: a bad pattern or option, a path or log that could not be read (the
     others are still searched), an I/O failure";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GrepRole {
    User,
    Assistant,
    System,
    Tool,
    Developer,
}

/// `--since`/`--until`: an instant as Unix epoch milliseconds, with what was typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTime {
    /// The first instant TIME stands for (what `--since` compares with).
    pub ms: i64,
    /// The last instant it stands for (what `--until` compares with): the same, except for
    /// a date, which is inclusive of its whole day: 23:59:59.999 in the zone times are shown
    /// in.
    pub last_ms: i64,
    pub text: String,
}

impl EventTime {
    /// `@MS` (epoch milliseconds), an RFC 3339 instant (`2026-11-29T13:45:00Z`), a local
    /// date-time or date (`2026-11-29 13:45`, `2026-11-29`: the whole day; TZ applies), or a
    /// span back from now (`90m`, `2h`, `3 days`, `1w`).
    pub fn parse(text: &str) -> Result<EventTime, String> {
        Self::parse_in(text, &jiff::tz::TimeZone::system())
    }

    /// [`EventTime::parse`] with local dates and times in `zone`.
    pub fn parse_in(text: &str, zone: &jiff::tz::TimeZone) -> Result<EventTime, String> {
        let t = text.trim();
        let at = |ms: i64, last_ms: i64| {
            Ok(EventTime {
                ms,
                last_ms,
                text: text.to_owned(),
            })
        };
        // jiff's own words for an instant past its range name its internals: say ours.
        let out_of_range = || {
            format!(
                "`{text}` is outside the times dshs can compare (from year -9999 to 9999-12-30 in UTC); use @MS or a nearer date"
            )
        };
        if let Some(ms) = t.strip_prefix('@') {
            return ms.parse::<i64>().map_or_else(
                |_| Err(format!("`{text}`: expected @ and epoch milliseconds")),
                |ms| at(ms, ms),
            );
        }
        if let Ok(ts) = t.parse::<jiff::Timestamp>() {
            return at(ts.as_millisecond(), ts.as_millisecond());
        }
        let instant = |dt: jiff::civil::DateTime| {
            dt.to_zoned(zone.clone())
                .map(|z| z.timestamp().as_millisecond())
                .map_err(|_| out_of_range())
        };
        // A date alone first (jiff reads it as a date-time at midnight too, and a date-time
        // as its date).
        let date_alone = !t.contains([':', ' ', 'T', 't']);
        if let Some(d) = date_alone
            .then(|| t.parse::<jiff::civil::Date>().ok())
            .flatten()
        {
            let first = instant(d.to_datetime(jiff::civil::Time::midnight()))?;
            // The day ends where the next begins (a day of 23 or 25 hours included); the
            // last day jiff knows ends at the end of its range.
            let last = match d.tomorrow() {
                Ok(next) => instant(next.to_datetime(jiff::civil::Time::midnight()))
                    .map_or(jiff::Timestamp::MAX.as_millisecond(), |ms| ms - 1),
                Err(_) => jiff::Timestamp::MAX.as_millisecond(),
            };
            return at(first, last);
        }
        if let Ok(dt) = t.parse::<jiff::civil::DateTime>() {
            let ms = instant(dt)?;
            return at(ms, ms);
        }
        if let Ok(span) = t.parse::<jiff::Span>() {
            return jiff::Zoned::now().checked_sub(span.abs()).map_or_else(
                |_| Err(out_of_range()),
                |z| {
                    let ms = z.timestamp().as_millisecond();
                    at(ms, ms)
                },
            );
        }
        Err(format!(
            "`{text}` is not a time: expected a date (2026-11-29), a local date-time (2026-11-29 13:45), an RFC 3339 instant (2026-11-29T13:45:00Z), @MS (epoch milliseconds) or a span ago (2h, 3d)"
        ))
    }
}

#[derive(Debug, Args)]
pub struct GrepArgs {
    /// The regular expression (Rust regex syntax), matched one line of decoded text at a time
    /// (one that starts with `-` goes after `--`: `dshs grep -- -v`).
    #[arg(value_name = "PATTERN", value_hint = ValueHint::Other)]
    pub pattern: String,
    /// Logs, session directories, storage roots (every session below), or `-` for standard
    /// input (default: DSH's root, $DSH_HOME/sessions else ~/.dsh/sessions).
    #[arg(value_name = "PATH", value_hint = ValueHint::AnyPath)]
    pub paths: Vec<String>,
    /// PATTERN is a fixed string, not a regular expression.
    #[arg(short = 'F', long)]
    pub fixed_strings: bool,
    /// Match case-insensitively (Unicode case folding).
    #[arg(short = 'i', long)]
    pub ignore_case: bool,
    /// Match whole words only (no word character just before or after the match).
    #[arg(short = 'w', long)]
    pub word_regexp: bool,
    /// Only what the model sees now: the final surface of each log (and in formats 0-2 the
    /// latest request's system prompt).
    #[arg(long)]
    pub surface: bool,
    /// Search each log as it stood right after event SEQ (replays the prefix 0..=SEQ).
    #[arg(long, value_name = "SEQ", value_parser = parse_seq, value_hint = ValueHint::Other)]
    pub at: Option<u64>,
    /// Only text from ROLE (repeatable). Tool output is `tool` in every format; tool calls
    /// are `assistant`; summaries, titles and todos have no role.
    #[arg(long, value_enum, value_name = "ROLE")]
    pub role: Vec<GrepRole>,
    /// Only events of type T (repeatable). A trailing `/` selects a family: `tool/` is
    /// tool/call, tool/result, …
    #[arg(long = "type", value_name = "T", value_hint = ValueHint::Other)]
    pub types: Vec<String>,
    /// Only events of turn N, or of turns A..B (inclusive; `A..` and `..B` are open). An
    /// event belongs to the turn its `data.turn` names, else to the turn open around it.
    #[arg(long, value_name = "N|A..B", value_parser = TurnRange::parse, value_hint = ValueHint::Other)]
    pub turn: Option<TurnRange>,
    /// Only events at or after TIME (event time): 2026-11-29, `2026-11-29 13:45` (local
    /// time, TZ applies), 2026-11-29T13:45:00Z, @EPOCH_MS, or a span ago such as 2h or 3d.
    #[arg(long, value_name = "TIME", value_parser = EventTime::parse, value_hint = ValueHint::Other)]
    pub since: Option<EventTime>,
    /// Only events at or before TIME (same forms as --since; a date includes its whole day).
    #[arg(long, value_name = "TIME", value_parser = EventTime::parse, value_hint = ValueHint::Other)]
    pub until: Option<EventTime>,
    /// Only the session whose header id is ID, or starts with it (repeatable).
    #[arg(long, value_name = "ID", value_hint = ValueHint::Other)]
    pub session: Vec<String>,
    /// Show N events of context before and after each matching one (their first line).
    #[arg(short = 'C', long, value_name = "N", value_parser = parse_count, value_hint = ValueHint::Other)]
    pub context: Option<usize>,
    /// Print only the logs (session directories) with a match, each read only up to its first
    /// match (with --surface or --format json, whole).
    #[arg(short = 'l', long, conflicts_with = "count")]
    pub files_with_matches: bool,
    /// Print the number of matching lines of each log with a match (`PATH:COUNT`).
    #[arg(short = 'c', long)]
    pub count: bool,
    /// Also search streamed deltas (format 0/1 assistant/chunk events, the embedded stream
    /// of format 2+ assistant messages), each on its own.
    #[arg(long)]
    pub chunks: bool,
    /// Lines for people, or JSON Lines (match/context/count records, then a summary).
    #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
    pub format: ReportFormat,
    /// Search N logs at a time (default: one per core).
    #[arg(short = 'j', long, value_name = "N", value_parser = parse_count, value_hint = ValueHint::Other)]
    pub jobs: Option<usize>,
    #[command(flatten)]
    pub follow: FollowArgs,
}

/// Exit status of the read-only inspection commands (`show`, `stats`).
pub const INSPECT_EXIT_CODES: &str = "\
Exit status (what can be read is printed in every case):
  0  the log loads (warnings allowed)
  1  the log is invalid or corrupt (run `dshs validate` for the findings)
  2  usage error, unreadable file, I/O failure
  3  refused as unsupported: unknown or newer format version, a V4-draft log,
     an unknown event type not marked ignorable
  4  a line or row past one of dshs's own guards (DSHS_MAX_LINE_BYTES,
     DSHS_MAX_JSON_DEPTH): not read, never called damage";

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Only events of type T (repeatable). A trailing `/` selects a family: `tool/` is
    /// tool/call, tool/result, …
    #[arg(long = "type", value_name = "T", value_hint = ValueHint::Other)]
    pub types: Vec<String>,
    /// Only events of turn N, or of turns A..B (inclusive; `A..` and `..B` are open). An
    /// event belongs to the turn its `data.turn` names, else to the turn open around it.
    #[arg(long, value_name = "N|A..B", value_parser = TurnRange::parse, value_hint = ValueHint::Other)]
    pub turn: Option<TurnRange>,
    /// Only events whose stored line contains TEXT (case-sensitive, raw JSON text: a packed
    /// chunk row matches as a whole).
    #[arg(long, value_name = "TEXT", value_hint = ValueHint::Other)]
    pub grep: Option<String>,
    /// One line per event, or the same selection as JSON Lines.
    #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
    pub format: ReportFormat,
    #[arg(long, value_name = "ID", help = SESSION_HELP, value_hint = ValueHint::Other)]
    pub session: Option<String>,
    #[arg(value_name = "FILE", help = FILE_HELP, value_hint = ValueHint::AnyPath)]
    pub file: String,
    #[command(flatten)]
    pub follow: FollowArgs,
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

/// `--at SEQ`: an event seq.
fn parse_seq(text: &str) -> Result<u64, String> {
    text.trim().parse().map_err(|_| {
        format!("`{text}` is not an event seq (a whole number ≥ 0, as `dshs show` lists them)")
    })
}

/// `--max-findings N`.
fn parse_count(text: &str) -> Result<usize, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a count (a whole number ≥ 0)"))
}

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
    #[arg(long, value_name = "ID", help = SESSION_HELP, value_hint = ValueHint::Other)]
    pub session: Option<String>,
    #[arg(value_name = "FILE", help = FILE_HELP, value_hint = ValueHint::AnyPath)]
    pub file: String,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// A finding code such as `replace-start-not-on-surface`; omit to list all codes.
    #[arg(value_parser = FindingCode, hide_possible_values = true)]
    pub code: Option<String>,
}

/// `explain CODE`: any text is accepted (explain itself says "unknown code; did you mean …"),
/// but the catalogue's codes are offered as possible values, so shells complete them.
#[derive(Debug, Clone, Copy)]
struct FindingCode;

impl clap::builder::TypedValueParser for FindingCode {
    type Value = String;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        Ok(value.to_string_lossy().into_owned())
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            dshs::log::codes::CATALOGUE
                .iter()
                .map(|c| clap::builder::PossibleValue::new(c.name)),
        ))
    }
}

#[derive(Debug, Args)]
pub struct RepairArgs {
    /// Change nothing: print the events that would be appended (JSON Lines, stdout) and what
    /// would be cut (stderr).
    #[arg(long, conflicts_with = "output")]
    pub dry_run: bool,
    /// Write the repaired log to OUT (a new file; never replaced) and leave FILE untouched.
    /// For a SQLite store: a repaired copy of the whole database (SQLite's backup API), or
    /// with a `.jsonl` name the session's repaired logical log.
    #[arg(long, value_name = "OUT", value_hint = ValueHint::FilePath)]
    pub output: Option<PathBuf>,
    /// Write a schema-15 SQLite store (no running DSH reads that layout any more).
    #[arg(long)]
    pub allow_old_schema: bool,
    #[arg(long, value_name = "ID", help = SESSION_HELP, value_hint = ValueHint::Other)]
    pub session: Option<String>,
    /// The log file (or session directory, or STORE.db#ID) to repair; `-` with --dry-run or
    /// --output.
    #[arg(value_name = "FILE", value_hint = ValueHint::AnyPath)]
    pub file: String,
}

pub const COMPACT_ABOUT: &str = "\
Replace a range of the surface with a summary, the way DSH's compaction does (append-only).

Appends four events in the log's own format version: compaction/start, compaction/summary,
a user/message checkpoint carrying the summary that replaces the surface nodes START..END
(inclusive, in surface order: `dshs surface FILE` lists them), and compaction/end. The
original events stay in the log; `dshs derive` shows the summary in their place. Committed
bytes are never rewritten; the file is synced, and restored on any failure. The result is
checked by a full validation pass before anything is written.

Refused, with nothing written (exit 1): START or END not on the current surface, START after
END, a range that would separate a tool call from its result, a range covering the protected
system prompt (format 3+), an open last turn or a torn tail (run `dshs repair` first), a
compaction still running, an empty summary, a log with errors. Exit 3: an unsupported log, or
a session whose session.lock another process holds.";

const COMPACT_EXAMPLES: &str = "\
  dshs compact --start 21 --end 15 --summary 'Printed alpha with bash.' session.v4.jsonl
  dshs surface session.v4.jsonl          # pick START and END from the seq column
  dshs compact --dry-run --start 5 --end 12 --summary-file notes.md session.jsonl
  pbpaste | dshs compact --start 5 --end 12 --summary-file - ~/.dsh/sessions/--work--/s1";

/// Exit status of `compact`.
const COMPACT_EXIT_CODES: &str = "\
Exit status:
  0  compacted (or, with --dry-run, the events were printed)
  1  refused: the range or the log does not allow it (the message says why)
  2  usage error, unreadable file or summary, I/O failure
  3  unsupported log (format version, V4 draft, unknown event type), or a live
     writer holds the session";

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("summary_text").required(true).args(["summary", "summary_file"])))]
pub struct CompactArgs {
    /// The first surface node to replace (a seq from `dshs surface`).
    #[arg(long, value_name = "SEQ", value_parser = parse_seq, value_hint = ValueHint::Other)]
    pub start: u64,
    /// The last surface node to replace (inclusive; not before START in surface order).
    #[arg(long, value_name = "SEQ", value_parser = parse_seq, value_hint = ValueHint::Other)]
    pub end: u64,
    /// The summary the model sees instead of the range.
    #[arg(long, value_name = "TEXT", value_hint = ValueHint::Other)]
    pub summary: Option<String>,
    /// Read the summary from a UTF-8 file (`-`: standard input); trailing newlines are dropped.
    #[arg(long, value_name = "PATH", value_hint = ValueHint::FilePath)]
    pub summary_file: Option<PathBuf>,
    /// Change nothing: print the four events that would be appended, as JSON Lines.
    #[arg(long)]
    pub dry_run: bool,
    /// Write a schema-15 SQLite store (no running DSH reads that layout any more).
    #[arg(long)]
    pub allow_old_schema: bool,
    #[arg(long, value_name = "ID", help = SESSION_HELP, value_hint = ValueHint::Other)]
    pub session: Option<String>,
    /// The log file (or session directory, or STORE.db#ID) to compact; `-` (standard input)
    /// with --dry-run.
    #[arg(value_name = "FILE", value_hint = ValueHint::AnyPath)]
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
    #[arg(long, value_name = "SEQ", value_parser = parse_seq, value_hint = ValueHint::Other)]
    pub at: Option<u64>,
    #[arg(long, value_name = "ID", help = SESSION_HELP, value_hint = ValueHint::Other)]
    pub session: Option<String>,
    #[arg(value_name = "FILE", help = FILE_HELP, value_hint = ValueHint::AnyPath)]
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
    #[arg(long, value_name = "SEQ", value_parser = parse_seq, value_hint = ValueHint::Other)]
    pub at: Option<u64>,
    #[arg(long, value_name = "ID", help = SESSION_HELP, value_hint = ValueHint::Other)]
    pub session: Option<String>,
    #[arg(value_name = "FILE", help = FILE_HELP, value_hint = ValueHint::AnyPath)]
    pub file: String,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Write to OUT instead of standard output: a file for one session, a directory (made
    /// if needed) for several sessions or a storage root.
    #[arg(short = 'o', long = "output", value_name = "OUT", value_hint = ValueHint::AnyPath)]
    pub output: Option<PathBuf>,
    /// Keep secrets as they are written (by default they are masked).
    #[arg(long)]
    pub no_redact: bool,
    /// The session as it stood right after event SEQ (replays the log up to SEQ).
    #[arg(long, value_name = "SEQ", value_parser = parse_seq, value_hint = ValueHint::Other)]
    pub at: Option<u64>,
    /// Only these turns (inclusive): N, A..B, A.. or ..B.
    #[arg(long, value_name = "N|A..B", value_parser = TurnRange::parse, value_hint = ValueHint::Other)]
    pub turn: Option<TurnRange>,
    #[arg(long, value_name = "ID", help = SESSION_HELP, value_hint = ValueHint::Other)]
    pub session: Option<String>,
    /// Logs, session directories, `STORE.db#ID`, or storage roots.
    #[arg(value_name = "PATH", required = true, num_args = 1.., value_hint = ValueHint::AnyPath)]
    pub paths: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
}

const USAGE_ABOUT: &str = "Tokens and cost of the model calls in DSH sessions, counted once per call.\n\n\
    PATH: logs (plain or zstd), session directories (their newest generation), storage roots \
    (every session below), SQLite session stores (every session; STORE.db#ID for one), or `-`; \
    default DSH's root ($DSH_HOME/sessions, else ~/.dsh/sessions). A session found twice \
    (two inputs, a store and a log) counts once.\n\n\
    Each model call counts once, although most logs write its usage twice (a usage chunk in \
    the stream and the message's data.usage): the message's usage replaces its attempt's; \
    failed attempts, compaction summaries, crash tails and compacted events count; the events \
    a seeded session inherited from its parent do not. Days, ISO weeks and months are local \
    (TZ, or --timezone). Costs use DeepSeek's dated prices shipped with dshs, each call at \
    its own time; --pricing FILE adds or overrides prices; a model without a price is shown \
    as unpriced, never as $0.\n\n\
    This is not a validation: lines are read as written, and only the lines that can hold a \
    call, a model, a turn, a title or a seed boundary are parsed.";

const USAGE_EXAMPLES: &str = "\
  dshs usage                                     # by day, every session under DSH's root
  dshs usage --by month --breakdown
  dshs usage --by session --since 2026-11-01 -z Europe/Berlin
  dshs usage --by turn ~/.dsh/sessions/p/abc     # one session, turn by turn
  dshs usage --format json | jq -c 'select(.type==\"total\")'";

/// Exit status of `usage`.
const USAGE_EXIT_CODES: &str = "\
Exit status:
  0  the report was made (sessions with damage still count, with a note)
  2  a usage error, or nothing could be read";

/// How `usage` groups calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UsageBy {
    Day,
    Week,
    Month,
    Session,
    Model,
    Turn,
}

/// `usage --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UsageFormat {
    Table,
    Json,
}

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// One row per day, ISO week, month, session, model or turn (--by turn: one session).
    #[arg(long, value_enum, default_value_t = UsageBy::Day)]
    pub by: UsageBy,
    /// Only calls on or after DATE (YYYY-MM-DD, in the report's time zone).
    #[arg(long, value_name = "DATE", value_hint = ValueHint::Other)]
    pub since: Option<String>,
    /// Only calls on or before DATE (YYYY-MM-DD, inclusive).
    #[arg(long, value_name = "DATE", value_hint = ValueHint::Other)]
    pub until: Option<String>,
    /// The IANA time zone days are taken in (default: TZ, else the system's).
    #[arg(short = 'z', long, value_name = "TZ", value_hint = ValueHint::Other)]
    pub timezone: Option<String>,
    /// A line per model under each row.
    #[arg(long)]
    pub breakdown: bool,
    /// A JSON price file adding or overriding prices (same fields as the shipped table).
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub pricing: Option<PathBuf>,
    /// Leave costs out.
    #[arg(long)]
    pub no_cost: bool,
    /// Output format: a table, or JSON Lines (one object per row, then a total).
    #[arg(long, value_enum, default_value_t = UsageFormat::Table)]
    pub format: UsageFormat,
    /// Read N sessions at a time (default: one per core).
    #[arg(short = 'j', long, value_name = "N", value_parser = parse_count, value_hint = ValueHint::Other)]
    pub jobs: Option<usize>,
    /// Logs, session directories, storage roots, SQLite stores (STORE.db#ID for one session),
    /// or `-` (default: DSH's root).
    #[arg(value_name = "PATH", value_hint = ValueHint::AnyPath)]
    pub paths: Vec<String>,
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
    fn a_date_bound_spans_its_whole_day_in_the_zone_of_the_times_shown() {
        let utc = jiff::tz::TimeZone::UTC;
        let d = EventTime::parse_in("2026-09-21", &utc).unwrap();
        assert_eq!(d.ms, 1_789_948_800_000);
        assert_eq!(d.last_ms, d.ms + 86_400_000 - 1);
        // A day of 25 hours (New York leaves daylight time on 2026-11-01).
        let ny = jiff::tz::TimeZone::get("America/New_York").unwrap();
        let fall = EventTime::parse_in("2026-11-01", &ny).unwrap();
        assert_eq!(fall.last_ms - fall.ms + 1, 25 * 3_600_000);
        // Other forms are one instant.
        for t in ["2026-09-21 13:45", "2026-09-21T13:45:00Z", "@5"] {
            let e = EventTime::parse_in(t, &ny).unwrap();
            assert_eq!(e.ms, e.last_ms, "{t}");
        }
        // Past jiff's range: our words, not jiff's.
        for t in ["9999-12-31", "9999-12-31 10:00"] {
            let err = EventTime::parse_in(t, &ny).unwrap_err();
            assert!(
                err.contains("outside the times dshs can compare"),
                "{t}: {err}"
            );
        }
        // The last day jiff knows ends with its range.
        let last = EventTime::parse_in("9999-12-30", &utc).unwrap();
        assert_eq!(last.last_ms, jiff::Timestamp::MAX.as_millisecond());
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn exit_tables_parse_into_rows_with_continuations_joined() {
        let rows = exit_table(EXIT_CODES);
        let codes: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        assert_eq!(codes, ["0", "1", "2", "3", "4"]);
        assert!(rows[3].1.starts_with("refused as unsupported"));
        assert!(rows[3].1.ends_with("or a live writer holds the session"));
        assert!(rows[4].1.ends_with("nothing cut"));
        assert!(
            !rows[3].1.contains("  "),
            "continuation joined with one space"
        );
        assert_eq!(exit_table(INSPECT_EXIT_CODES).len(), 5);
    }

    #[test]
    fn examples_are_indented_under_their_heading() {
        let text = examples_then("a b\n   c d", "Exit status:\n  0  ok");
        assert_eq!(text, "Examples:\n  a b\n  c d\n\nExit status:\n  0  ok");
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
