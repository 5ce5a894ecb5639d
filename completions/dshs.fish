# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_dshs_global_optspecs
    string join \n color= q/quiet known-types= h/help V/version
end

function __fish_dshs_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_dshs_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_dshs_using_subcommand
    set -l cmd (__fish_dshs_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c dshs -n "__fish_dshs_needs_command" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_needs_command" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_needs_command" -s q -l quiet -d 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
complete -c dshs -n "__fish_dshs_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_needs_command" -s V -l version -d 'Print version'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "validate" -d 'Check every rule of the log\'s format version and report every finding'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "explain" -d 'Explain a finding code (or list them all)'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "surface" -d 'Print the current surface: the events the model sees, in order'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "derive" -d 'Print the model-visible messages, byte-for-byte as stored'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "show" -d 'List events as people read them: one line per event'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "stats" -d 'Summarize a log: header facts, event counts, turns, tools, compactions, tokens'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "repair" -d 'Cut a torn tail and close an open turn the way DSH does on resume (append-only)'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "compact" -d 'Replace a range of the surface with a summary, the way DSH\'s compaction does (append-only)'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "grep" -d 'Search the decoded text of logs: messages, reasoning, tool calls and results, summaries'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "ls" -d 'List the sessions under a DSH storage root, each validated, newest activity first'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "usage" -d 'Tokens and cost of the model calls in sessions, counted once per call, by day, week, month, session, model or turn'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "export" -d 'Write a session as one self-contained web page (or a directory of pages)'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "man" -d 'Print the manual page (roff) for dshs and all its commands'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dshs -n "__fish_dshs_using_subcommand validate" -l format -d 'Output format: human-readable lines, or JSON Lines (findings, then a summary per file)' -r -f -a "human\t''
json\t''"
complete -c dshs -n "__fish_dshs_using_subcommand validate" -l max-findings -d 'Print at most N findings per file (the summary still counts all of them)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand validate" -s j -l jobs -d 'Check N logs at a time (default: one per core)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand validate" -l session -d 'Only session ID of each SQLite session store given (repeatable; default: every session, in rowid order)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand validate" -l poll -d 'With --follow: look for new data every MS milliseconds instead of watching file-system events (for network file systems)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand validate" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand validate" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand validate" -l deny-warnings -d 'Exit 1 when there are warnings, too'
complete -c dshs -n "__fish_dshs_using_subcommand validate" -s f -l follow -d 'Keep reading as the running session appends, until Ctrl-C: each new event is checked and folded once, from the state the previous ones left'
complete -c dshs -n "__fish_dshs_using_subcommand validate" -s q -l quiet -d 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
complete -c dshs -n "__fish_dshs_using_subcommand validate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand explain" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand explain" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand explain" -s q -l quiet -d 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
complete -c dshs -n "__fish_dshs_using_subcommand explain" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand surface" -l format -d 'Output format: a table with a preview of each message, or one JSON document' -r -f -a "table\t''
json\t''"
complete -c dshs -n "__fish_dshs_using_subcommand surface" -l at -d 'Show the surface as it stood right after event SEQ (replays the log up to SEQ)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand surface" -l session -d 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand surface" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand surface" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand surface" -s q -l quiet -d 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
complete -c dshs -n "__fish_dshs_using_subcommand surface" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand derive" -l format -d 'One JSON array, one message per line, or a readable transcript' -r -f -a "json\t''
ndjson\t''
markdown\t''"
complete -c dshs -n "__fish_dshs_using_subcommand derive" -l at -d 'Derive the messages as they stood right after event SEQ (replays the log up to SEQ)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand derive" -l session -d 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand derive" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand derive" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand derive" -s q -l quiet -d 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
complete -c dshs -n "__fish_dshs_using_subcommand derive" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand show" -l type -d 'Only events of type T (repeatable). A trailing `/` selects a family: `tool/` is tool/call, tool/result, …' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand show" -l turn -d 'Only events of turn N, or of turns A..B (inclusive; `A..` and `..B` are open). An event belongs to the turn its `data.turn` names, else to the turn open around it' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand show" -l grep -d 'Only events whose stored line contains TEXT (case-sensitive, raw JSON text: a packed chunk row matches as a whole)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand show" -l format -d 'One line per event, or the same selection as JSON Lines' -r -f -a "human\t''
json\t''"
complete -c dshs -n "__fish_dshs_using_subcommand show" -l session -d 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand show" -l poll -d 'With --follow: look for new data every MS milliseconds instead of watching file-system events (for network file systems)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand show" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand show" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand show" -s f -l follow -d 'Keep reading as the running session appends, until Ctrl-C: each new event is checked and folded once, from the state the previous ones left'
complete -c dshs -n "__fish_dshs_using_subcommand show" -s q -l quiet -d 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
complete -c dshs -n "__fish_dshs_using_subcommand show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand stats" -l format -d 'A report for people, or one JSON document' -r -f -a "human\t''
json\t''"
complete -c dshs -n "__fish_dshs_using_subcommand stats" -l session -d 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand stats" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand stats" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand stats" -s q -l quiet -d 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
complete -c dshs -n "__fish_dshs_using_subcommand stats" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand repair" -l output -d 'Write the repaired log to OUT (a new file; never replaced) and leave FILE untouched. For a SQLite store: a repaired copy of the whole database (SQLite\'s backup API), or with a `.jsonl` name the session\'s repaired logical log' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand repair" -l session -d 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand repair" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand repair" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand repair" -l dry-run -d 'Change nothing: print the events that would be appended (JSON Lines, stdout) and what would be cut (stderr)'
complete -c dshs -n "__fish_dshs_using_subcommand repair" -l allow-old-schema -d 'Write a schema-15 SQLite store (no running DSH reads that layout any more)'
complete -c dshs -n "__fish_dshs_using_subcommand repair" -s q -l quiet -d 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
complete -c dshs -n "__fish_dshs_using_subcommand repair" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand compact" -l start -d 'The first surface node to replace (a seq from `dshs surface`)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand compact" -l end -d 'The last surface node to replace (inclusive; not before START in surface order)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand compact" -l summary -d 'The summary the model sees instead of the range' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand compact" -l summary-file -d 'Read the summary from a UTF-8 file (`-`: standard input); trailing newlines are dropped' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand compact" -l session -d 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand compact" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand compact" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand compact" -l dry-run -d 'Change nothing: print the four events that would be appended, as JSON Lines'
complete -c dshs -n "__fish_dshs_using_subcommand compact" -l allow-old-schema -d 'Write a schema-15 SQLite store (no running DSH reads that layout any more)'
complete -c dshs -n "__fish_dshs_using_subcommand compact" -s q -l quiet -d 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
complete -c dshs -n "__fish_dshs_using_subcommand compact" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand grep" -l at -d 'Search each log as it stood right after event SEQ (replays the prefix 0..=SEQ)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand grep" -l role -d 'Only text from ROLE (repeatable). Tool output is `tool` in every format; tool calls are `assistant`; summaries, titles and todos have no role' -r -f -a "user\t''
assistant\t''
system\t''
tool\t''
developer\t''"
complete -c dshs -n "__fish_dshs_using_subcommand grep" -l type -d 'Only events of type T (repeatable). A trailing `/` selects a family: `tool/` is tool/call, tool/result, …' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand grep" -l turn -d 'Only events of turn N, or of turns A..B (inclusive; `A..` and `..B` are open). An event belongs to the turn its `data.turn` names, else to the turn open around it' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand grep" -l since -d 'Only events at or after TIME (event time): 2026-11-29, `2026-11-29 13:45` (local time, TZ applies), 2026-11-29T13:45:00Z, @EPOCH_MS, or a span ago such as 2h or 3d' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand grep" -l until -d 'Only events at or before TIME (same forms as --since; a date includes its whole day)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand grep" -l session -d 'Only the session whose header id is ID, or starts with it (repeatable)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand grep" -s C -l context -d 'Show N events of context before and after each matching one (their first line)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand grep" -l format -d 'Lines for people, or JSON Lines (match/context/count records, then a summary)' -r -f -a "human\t''
json\t''"
complete -c dshs -n "__fish_dshs_using_subcommand grep" -s j -l jobs -d 'Search N logs at a time (default: one per core)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand grep" -l poll -d 'With --follow: look for new data every MS milliseconds instead of watching file-system events (for network file systems)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand grep" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand grep" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand grep" -s F -l fixed-strings -d 'PATTERN is a fixed string, not a regular expression'
complete -c dshs -n "__fish_dshs_using_subcommand grep" -s i -l ignore-case -d 'Match case-insensitively (Unicode case folding)'
complete -c dshs -n "__fish_dshs_using_subcommand grep" -s w -l word-regexp -d 'Match whole words only (no word character just before or after the match)'
complete -c dshs -n "__fish_dshs_using_subcommand grep" -l surface -d 'Only what the model sees now: the final surface of each log (and in formats 0-2 the latest request\'s system prompt)'
complete -c dshs -n "__fish_dshs_using_subcommand grep" -s l -l files-with-matches -d 'Print only the logs (session directories) with a match, each read only up to its first match (with --surface or --format json, whole)'
complete -c dshs -n "__fish_dshs_using_subcommand grep" -s c -l count -d 'Print the number of matching lines of each log with a match (`PATH:COUNT`)'
complete -c dshs -n "__fish_dshs_using_subcommand grep" -l chunks -d 'Also search streamed deltas (format 0/1 assistant/chunk events, the embedded stream of format 2+ assistant messages), each on its own'
complete -c dshs -n "__fish_dshs_using_subcommand grep" -s f -l follow -d 'Keep reading as the running session appends, until Ctrl-C: each new event is checked and folded once, from the state the previous ones left'
complete -c dshs -n "__fish_dshs_using_subcommand grep" -s q -l quiet -d 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
complete -c dshs -n "__fish_dshs_using_subcommand grep" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand ls" -l format -d 'Output format: a table, or JSON Lines (one object per session)' -r -f -a "human\t''
json\t''"
complete -c dshs -n "__fish_dshs_using_subcommand ls" -s j -l jobs -d 'Validate N sessions at a time (default: one per core)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand ls" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand ls" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand ls" -s q -l quiet -d 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
complete -c dshs -n "__fish_dshs_using_subcommand ls" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand usage" -l by -d 'One row per day, ISO week, month, session, model or turn (--by turn: one session)' -r -f -a "day\t''
week\t''
month\t''
session\t''
model\t''
turn\t''"
complete -c dshs -n "__fish_dshs_using_subcommand usage" -l since -d 'Only calls on or after DATE (YYYY-MM-DD, in the report\'s time zone)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand usage" -l until -d 'Only calls on or before DATE (YYYY-MM-DD, inclusive)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand usage" -s z -l timezone -d 'The IANA time zone days are taken in (default: TZ, else the system\'s)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand usage" -l pricing -d 'A JSON price file adding or overriding prices (same fields as the shipped table)' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand usage" -l format -d 'Output format: a table, or JSON Lines (one object per row, then a total)' -r -f -a "table\t''
json\t''"
complete -c dshs -n "__fish_dshs_using_subcommand usage" -s j -l jobs -d 'Read N sessions at a time (default: one per core)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand usage" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand usage" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand usage" -l breakdown -d 'A line per model under each row'
complete -c dshs -n "__fish_dshs_using_subcommand usage" -l no-cost -d 'Leave costs out'
complete -c dshs -n "__fish_dshs_using_subcommand usage" -s q -l quiet -d 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
complete -c dshs -n "__fish_dshs_using_subcommand usage" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand export" -s o -l output -d 'Write to OUT instead of standard output: a file for one session, a directory (made if needed) for several sessions or a storage root' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand export" -l at -d 'The session as it stood right after event SEQ (replays the log up to SEQ)' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand export" -l turn -d 'Only these turns (inclusive): N, A..B, A.. or ..B' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand export" -l session -d 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one' -r -f
complete -c dshs -n "__fish_dshs_using_subcommand export" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand export" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand export" -l no-redact -d 'Keep secrets as they are written (by default they are masked)'
complete -c dshs -n "__fish_dshs_using_subcommand export" -s q -l quiet -d 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
complete -c dshs -n "__fish_dshs_using_subcommand export" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand completions" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand completions" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand completions" -s q -l quiet -d 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
complete -c dshs -n "__fish_dshs_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand man" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand man" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand man" -s q -l quiet -d 'Print nothing at all (no output, no errors, no progress); only the exit status speaks'
complete -c dshs -n "__fish_dshs_using_subcommand man" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair compact grep ls usage export completions man help" -f -a "validate" -d 'Check every rule of the log\'s format version and report every finding'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair compact grep ls usage export completions man help" -f -a "explain" -d 'Explain a finding code (or list them all)'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair compact grep ls usage export completions man help" -f -a "surface" -d 'Print the current surface: the events the model sees, in order'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair compact grep ls usage export completions man help" -f -a "derive" -d 'Print the model-visible messages, byte-for-byte as stored'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair compact grep ls usage export completions man help" -f -a "show" -d 'List events as people read them: one line per event'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair compact grep ls usage export completions man help" -f -a "stats" -d 'Summarize a log: header facts, event counts, turns, tools, compactions, tokens'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair compact grep ls usage export completions man help" -f -a "repair" -d 'Cut a torn tail and close an open turn the way DSH does on resume (append-only)'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair compact grep ls usage export completions man help" -f -a "compact" -d 'Replace a range of the surface with a summary, the way DSH\'s compaction does (append-only)'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair compact grep ls usage export completions man help" -f -a "grep" -d 'Search the decoded text of logs: messages, reasoning, tool calls and results, summaries'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair compact grep ls usage export completions man help" -f -a "ls" -d 'List the sessions under a DSH storage root, each validated, newest activity first'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair compact grep ls usage export completions man help" -f -a "usage" -d 'Tokens and cost of the model calls in sessions, counted once per call, by day, week, month, session, model or turn'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair compact grep ls usage export completions man help" -f -a "export" -d 'Write a session as one self-contained web page (or a directory of pages)'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair compact grep ls usage export completions man help" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair compact grep ls usage export completions man help" -f -a "man" -d 'Print the manual page (roff) for dshs and all its commands'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair compact grep ls usage export completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'

# Log arguments: session directories and *.jsonl, *.jsonl.zst, *.jsonl.zstd files.
function __fish_dshs_logs
    __fish_complete_path (commandline -ct) | string match -r -- '^[^\t]*(?:/|\\.jsonl|\\.jsonl\\.zst|\\.jsonl\\.zstd)(?:\t.*)?$'
end
complete -c dshs -n "__fish_dshs_using_subcommand validate" -f -a "(__fish_dshs_logs)"
complete -c dshs -n "__fish_dshs_using_subcommand surface" -f -a "(__fish_dshs_logs)"
complete -c dshs -n "__fish_dshs_using_subcommand derive" -f -a "(__fish_dshs_logs)"
complete -c dshs -n "__fish_dshs_using_subcommand show" -f -a "(__fish_dshs_logs)"
complete -c dshs -n "__fish_dshs_using_subcommand stats" -f -a "(__fish_dshs_logs)"
complete -c dshs -n "__fish_dshs_using_subcommand repair" -f -a "(__fish_dshs_logs)"
complete -c dshs -n "__fish_dshs_using_subcommand compact" -f -a "(__fish_dshs_logs)"
complete -c dshs -n "__fish_dshs_using_subcommand grep" -f -a "(__fish_dshs_logs)"
complete -c dshs -n "__fish_dshs_using_subcommand usage" -f -a "(__fish_dshs_logs)"
complete -c dshs -n "__fish_dshs_using_subcommand export" -f -a "(__fish_dshs_logs)"
complete -c dshs -n "__fish_dshs_using_subcommand explain" -f -a "file-no-header invalid-utf8 duplicate-json-key json-not-lossless torn-line crash-tail committed-unparsable committed-not-event committed-malformed-row committed-seq-gap generation-name-mismatch header-id-path-mismatch file-not-regular zstd-bad-magic zstd-frame-invalid zstd-committed-damage zstd-header-frame zstd-torn-record-in-frame zstd-torn-frame format-version-unsupported format-v4-draft header-not-json header-field-invalid header-cwd-not-absolute header-retired-field header-unexpected-field header-seed-field seed-length-exceeds-events seed-marker-mismatch packed-row-malformed source-ranges-malformed envelope-invalid seq-not-contiguous unknown-event-type retired-event-type retired-legacy-event legacy-shape-normalized legacy-shape-malformed message-id-missing message-role-mismatch message-source-invalid message-content-invalid assistant-source-invalid tool-result-source-invalid tool-result-block-invalid tool-result-call-id-mismatch system-source-invalid source-kind-plugin retired-tool-result-block tool-result-error-without-flag assistant-stream-missing request-header-provider-model request-header-reasoning-effort request-header-adapter-defaults request-header-system-retired request-header-empty-optional request-header-defer-loading developer-role-mismatch tool-change-block-misplaced tool-change-block-invalid developer-header-seq developer-tool-binding surface-metadata-on-log-only surface-op-missing surface-op-invalid replace-op-invalid replace-endpoint-not-earlier replace-start-not-on-surface replace-end-not-on-surface replace-range-reversed source-seqs-on-assistant source-seqs-not-array source-seqs-empty source-seqs-invalid-element source-seqs-duplicate source-seqs-not-earlier replace-missing-shadowed-source tool-result-replace-not-single tool-result-replace-target-not-result tool-result-replace-changes-more system-head-protected message-projection-not-applied turn-start-while-open turn-number-unexpected turn-end-mismatch turn-end-with-open-step step-start-wrong-turn step-start-while-open step-number-unexpected event-outside-open-step event-outside-turn tool-result-without-call tool-result-replace-outside-turn unresolved-call-at-boundary duplicate-call-id tool-call-mismatch tool-result-before-start command-done-without-run open-turn-at-end compaction-mismatch compaction-span-invalid compaction-summary-count compaction-checkpoint-source compaction-open-at-end sqlite-store-empty sqlite-not-session-store sqlite-schema-unsupported sqlite-schema-mismatch sqlite-store-identity-invalid sqlite-storage-class sqlite-session-row-invalid sqlite-is-seeded-derived"
complete -c dshs -n "__fish_dshs_using_subcommand completions" -f -a "bash zsh fish elvish powershell"
