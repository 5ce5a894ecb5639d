
use builtin;
use str;

set edit:completion:arg-completer[dshs] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'dshs'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'dshs'= {
            cand --color 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never'
            cand --known-types 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES'
            cand -q 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand --quiet 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
            cand validate 'Check every rule of the log''s format version and report every finding'
            cand explain 'Explain a finding code (or list them all)'
            cand surface 'Print the current surface: the events the model sees, in order'
            cand derive 'Print the model-visible messages, byte-for-byte as stored'
            cand show 'List events as people read them: one line per event'
            cand stats 'Summarize a log: header facts, event counts, turns, tools, compactions, tokens'
            cand repair 'Cut a torn tail and close an open turn the way DSH does on resume (append-only)'
            cand compact 'Replace a range of the surface with a summary, the way DSH''s compaction does (append-only)'
            cand grep 'Search the decoded text of logs: messages, reasoning, tool calls and results, summaries'
            cand ls 'List the sessions under a DSH storage root, each validated, newest activity first'
            cand usage 'Tokens and cost of the model calls in sessions, counted once per call, by day, week, month, session, model or turn'
            cand export 'Write a session as one self-contained web page (or a directory of pages)'
            cand completions 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
            cand man 'Print the manual page (roff) for dshs and all its commands'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'dshs;validate'= {
            cand --format 'Output format: human-readable lines, or JSON Lines (findings, then a summary per file)'
            cand --max-findings 'Print at most N findings per file (the summary still counts all of them)'
            cand -j 'Check N logs at a time (default: one per core)'
            cand --jobs 'Check N logs at a time (default: one per core)'
            cand --session 'Only session ID of each SQLite session store given (repeatable; default: every session, in rowid order)'
            cand --poll 'With --follow: look for new data every MS milliseconds instead of watching file-system events (for network file systems)'
            cand --color 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never'
            cand --known-types 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES'
            cand --deny-warnings 'Exit 1 when there are warnings, too'
            cand -f 'Keep reading as the running session appends, until Ctrl-C: each new event is checked and folded once, from the state the previous ones left'
            cand --follow 'Keep reading as the running session appends, until Ctrl-C: each new event is checked and folded once, from the state the previous ones left'
            cand -q 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand --quiet 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'dshs;explain'= {
            cand --color 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never'
            cand --known-types 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES'
            cand -q 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand --quiet 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'dshs;surface'= {
            cand --format 'Output format: a table with a preview of each message, or one JSON document'
            cand --at 'Show the surface as it stood right after event SEQ (replays the log up to SEQ)'
            cand --session 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one'
            cand --color 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never'
            cand --known-types 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES'
            cand -q 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand --quiet 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'dshs;derive'= {
            cand --format 'One JSON array, one message per line, or a readable transcript'
            cand --at 'Derive the messages as they stood right after event SEQ (replays the log up to SEQ)'
            cand --session 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one'
            cand --color 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never'
            cand --known-types 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES'
            cand -q 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand --quiet 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'dshs;show'= {
            cand --type 'Only events of type T (repeatable). A trailing `/` selects a family: `tool/` is tool/call, tool/result, …'
            cand --turn 'Only events of turn N, or of turns A..B (inclusive; `A..` and `..B` are open). An event belongs to the turn its `data.turn` names, else to the turn open around it'
            cand --grep 'Only events whose stored line contains TEXT (case-sensitive, raw JSON text: a packed chunk row matches as a whole)'
            cand --format 'One line per event, or the same selection as JSON Lines'
            cand --session 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one'
            cand --poll 'With --follow: look for new data every MS milliseconds instead of watching file-system events (for network file systems)'
            cand --color 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never'
            cand --known-types 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES'
            cand -f 'Keep reading as the running session appends, until Ctrl-C: each new event is checked and folded once, from the state the previous ones left'
            cand --follow 'Keep reading as the running session appends, until Ctrl-C: each new event is checked and folded once, from the state the previous ones left'
            cand -q 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand --quiet 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'dshs;stats'= {
            cand --format 'A report for people, or one JSON document'
            cand --session 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one'
            cand --color 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never'
            cand --known-types 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES'
            cand -q 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand --quiet 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'dshs;repair'= {
            cand --output 'Write the repaired log to OUT (a new file; never replaced) and leave FILE untouched. For a SQLite store: a repaired copy of the whole database (SQLite''s backup API), or with a `.jsonl` name the session''s repaired logical log'
            cand --session 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one'
            cand --color 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never'
            cand --known-types 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES'
            cand --dry-run 'Change nothing: print the events that would be appended (JSON Lines, stdout) and what would be cut (stderr)'
            cand --allow-old-schema 'Write a schema-15 SQLite store (no running DSH reads that layout any more)'
            cand -q 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand --quiet 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'dshs;compact'= {
            cand --start 'The first surface node to replace (a seq from `dshs surface`)'
            cand --end 'The last surface node to replace (inclusive; not before START in surface order)'
            cand --summary 'The summary the model sees instead of the range'
            cand --summary-file 'Read the summary from a UTF-8 file (`-`: standard input); trailing newlines are dropped'
            cand --session 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one'
            cand --color 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never'
            cand --known-types 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES'
            cand --dry-run 'Change nothing: print the four events that would be appended, as JSON Lines'
            cand --allow-old-schema 'Write a schema-15 SQLite store (no running DSH reads that layout any more)'
            cand -q 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand --quiet 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'dshs;grep'= {
            cand --at 'Search each log as it stood right after event SEQ (replays the prefix 0..=SEQ)'
            cand --role 'Only text from ROLE (repeatable). Tool output is `tool` in every format; tool calls are `assistant`; summaries, titles and todos have no role'
            cand --type 'Only events of type T (repeatable). A trailing `/` selects a family: `tool/` is tool/call, tool/result, …'
            cand --turn 'Only events of turn N, or of turns A..B (inclusive; `A..` and `..B` are open). An event belongs to the turn its `data.turn` names, else to the turn open around it'
            cand --since 'Only events at or after TIME (event time): 2026-11-29, `2026-11-29 13:45` (local time, TZ applies), 2026-11-29T13:45:00Z, @EPOCH_MS, or a span ago such as 2h or 3d'
            cand --until 'Only events at or before TIME (same forms as --since; a date includes its whole day)'
            cand --session 'Only the session whose header id is ID, or starts with it (repeatable)'
            cand -C 'Show N events of context before and after each matching one (their first line)'
            cand --context 'Show N events of context before and after each matching one (their first line)'
            cand --format 'Lines for people, or JSON Lines (match/context/count records, then a summary)'
            cand -j 'Search N logs at a time (default: one per core)'
            cand --jobs 'Search N logs at a time (default: one per core)'
            cand --poll 'With --follow: look for new data every MS milliseconds instead of watching file-system events (for network file systems)'
            cand --color 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never'
            cand --known-types 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES'
            cand -F 'PATTERN is a fixed string, not a regular expression'
            cand --fixed-strings 'PATTERN is a fixed string, not a regular expression'
            cand -i 'Match case-insensitively (Unicode case folding)'
            cand --ignore-case 'Match case-insensitively (Unicode case folding)'
            cand -w 'Match whole words only (no word character just before or after the match)'
            cand --word-regexp 'Match whole words only (no word character just before or after the match)'
            cand --surface 'Only what the model sees now: the final surface of each log (and in formats 0-2 the latest request''s system prompt)'
            cand -l 'Print only the logs (session directories) with a match, each read only up to its first match (with --surface or --format json, whole)'
            cand --files-with-matches 'Print only the logs (session directories) with a match, each read only up to its first match (with --surface or --format json, whole)'
            cand -c 'Print the number of matching lines of each log with a match (`PATH:COUNT`)'
            cand --count 'Print the number of matching lines of each log with a match (`PATH:COUNT`)'
            cand --chunks 'Also search streamed deltas (format 0/1 assistant/chunk events, the embedded stream of format 2+ assistant messages), each on its own'
            cand -f 'Keep reading as the running session appends, until Ctrl-C: each new event is checked and folded once, from the state the previous ones left'
            cand --follow 'Keep reading as the running session appends, until Ctrl-C: each new event is checked and folded once, from the state the previous ones left'
            cand -q 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand --quiet 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'dshs;ls'= {
            cand --format 'Output format: a table, or JSON Lines (one object per session)'
            cand -j 'Validate N sessions at a time (default: one per core)'
            cand --jobs 'Validate N sessions at a time (default: one per core)'
            cand --color 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never'
            cand --known-types 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES'
            cand -q 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand --quiet 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'dshs;usage'= {
            cand --by 'One row per day, ISO week, month, session, model or turn (--by turn: one session)'
            cand --since 'Only calls on or after DATE (YYYY-MM-DD, in the report''s time zone)'
            cand --until 'Only calls on or before DATE (YYYY-MM-DD, inclusive)'
            cand -z 'The IANA time zone days are taken in (default: TZ, else the system''s)'
            cand --timezone 'The IANA time zone days are taken in (default: TZ, else the system''s)'
            cand --pricing 'A JSON price file adding or overriding prices (same fields as the shipped table)'
            cand --format 'Output format: a table, or JSON Lines (one object per row, then a total)'
            cand -j 'Read N sessions at a time (default: one per core)'
            cand --jobs 'Read N sessions at a time (default: one per core)'
            cand --color 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never'
            cand --known-types 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES'
            cand --breakdown 'A line per model under each row'
            cand --no-cost 'Leave costs out'
            cand -q 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand --quiet 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'dshs;export'= {
            cand -o 'Write to OUT instead of standard output: a file for one session, a directory (made if needed) for several sessions or a storage root'
            cand --output 'Write to OUT instead of standard output: a file for one session, a directory (made if needed) for several sessions or a storage root'
            cand --at 'The session as it stood right after event SEQ (replays the log up to SEQ)'
            cand --turn 'Only these turns (inclusive): N, A..B, A.. or ..B'
            cand --session 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one'
            cand --color 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never'
            cand --known-types 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES'
            cand --no-redact 'Keep secrets as they are written (by default they are masked)'
            cand -q 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand --quiet 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'dshs;completions'= {
            cand --color 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never'
            cand --known-types 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES'
            cand -q 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand --quiet 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'dshs;man'= {
            cand --color 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never'
            cand --known-types 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES'
            cand -q 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand --quiet 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'dshs;help'= {
            cand validate 'Check every rule of the log''s format version and report every finding'
            cand explain 'Explain a finding code (or list them all)'
            cand surface 'Print the current surface: the events the model sees, in order'
            cand derive 'Print the model-visible messages, byte-for-byte as stored'
            cand show 'List events as people read them: one line per event'
            cand stats 'Summarize a log: header facts, event counts, turns, tools, compactions, tokens'
            cand repair 'Cut a torn tail and close an open turn the way DSH does on resume (append-only)'
            cand compact 'Replace a range of the surface with a summary, the way DSH''s compaction does (append-only)'
            cand grep 'Search the decoded text of logs: messages, reasoning, tool calls and results, summaries'
            cand ls 'List the sessions under a DSH storage root, each validated, newest activity first'
            cand usage 'Tokens and cost of the model calls in sessions, counted once per call, by day, week, month, session, model or turn'
            cand export 'Write a session as one self-contained web page (or a directory of pages)'
            cand completions 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
            cand man 'Print the manual page (roff) for dshs and all its commands'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'dshs;help;validate'= {
        }
        &'dshs;help;explain'= {
        }
        &'dshs;help;surface'= {
        }
        &'dshs;help;derive'= {
        }
        &'dshs;help;show'= {
        }
        &'dshs;help;stats'= {
        }
        &'dshs;help;repair'= {
        }
        &'dshs;help;compact'= {
        }
        &'dshs;help;grep'= {
        }
        &'dshs;help;ls'= {
        }
        &'dshs;help;usage'= {
        }
        &'dshs;help;export'= {
        }
        &'dshs;help;completions'= {
        }
        &'dshs;help;man'= {
        }
        &'dshs;help;help'= {
        }
    ]
    $completions[$command]
}
