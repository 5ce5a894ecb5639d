
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'dshs' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'dshs'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'dshs' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never')
            [CompletionResult]::new('--known-types', '--known-types', [CompletionResultType]::ParameterName, 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('validate', 'validate', [CompletionResultType]::ParameterValue, 'Check every rule of the log''s format version and report every finding')
            [CompletionResult]::new('explain', 'explain', [CompletionResultType]::ParameterValue, 'Explain a finding code (or list them all)')
            [CompletionResult]::new('surface', 'surface', [CompletionResultType]::ParameterValue, 'Print the current surface: the events the model sees, in order')
            [CompletionResult]::new('derive', 'derive', [CompletionResultType]::ParameterValue, 'Print the model-visible messages, byte-for-byte as stored')
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'List events as people read them: one line per event')
            [CompletionResult]::new('stats', 'stats', [CompletionResultType]::ParameterValue, 'Summarize a log: header facts, event counts, turns, tools, compactions, tokens')
            [CompletionResult]::new('repair', 'repair', [CompletionResultType]::ParameterValue, 'Cut a torn tail and close an open turn the way DSH does on resume (append-only)')
            [CompletionResult]::new('compact', 'compact', [CompletionResultType]::ParameterValue, 'Replace a range of the surface with a summary, the way DSH''s compaction does (append-only)')
            [CompletionResult]::new('grep', 'grep', [CompletionResultType]::ParameterValue, 'Search the decoded text of logs: messages, reasoning, tool calls and results, summaries')
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List the sessions under a DSH storage root, each validated, newest activity first')
            [CompletionResult]::new('usage', 'usage', [CompletionResultType]::ParameterValue, 'Tokens and cost of the model calls in sessions, counted once per call, by day, week, month, session, model or turn')
            [CompletionResult]::new('export', 'export', [CompletionResultType]::ParameterValue, 'Write a session as one self-contained web page (or a directory of pages)')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script (bash, zsh, fish, elvish, powershell)')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'Print the manual page (roff) for dshs and all its commands')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'dshs;validate' {
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format: human-readable lines, or JSON Lines (findings, then a summary per file)')
            [CompletionResult]::new('--max-findings', '--max-findings', [CompletionResultType]::ParameterName, 'Print at most N findings per file (the summary still counts all of them)')
            [CompletionResult]::new('-j', '-j', [CompletionResultType]::ParameterName, 'Check N logs at a time (default: one per core)')
            [CompletionResult]::new('--jobs', '--jobs', [CompletionResultType]::ParameterName, 'Check N logs at a time (default: one per core)')
            [CompletionResult]::new('--session', '--session', [CompletionResultType]::ParameterName, 'Only session ID of each SQLite session store given (repeatable; default: every session, in rowid order)')
            [CompletionResult]::new('--poll', '--poll', [CompletionResultType]::ParameterName, 'With --follow: look for new data every MS milliseconds instead of watching file-system events (for network file systems)')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never')
            [CompletionResult]::new('--known-types', '--known-types', [CompletionResultType]::ParameterName, 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES')
            [CompletionResult]::new('--deny-warnings', '--deny-warnings', [CompletionResultType]::ParameterName, 'Exit 1 when there are warnings, too')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'Keep reading as the running session appends, until Ctrl-C: each new event is checked and folded once, from the state the previous ones left')
            [CompletionResult]::new('--follow', '--follow', [CompletionResultType]::ParameterName, 'Keep reading as the running session appends, until Ctrl-C: each new event is checked and folded once, from the state the previous ones left')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'dshs;explain' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never')
            [CompletionResult]::new('--known-types', '--known-types', [CompletionResultType]::ParameterName, 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'dshs;surface' {
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format: a table with a preview of each message, or one JSON document')
            [CompletionResult]::new('--at', '--at', [CompletionResultType]::ParameterName, 'Show the surface as it stood right after event SEQ (replays the log up to SEQ)')
            [CompletionResult]::new('--session', '--session', [CompletionResultType]::ParameterName, 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never')
            [CompletionResult]::new('--known-types', '--known-types', [CompletionResultType]::ParameterName, 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'dshs;derive' {
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'One JSON array, one message per line, or a readable transcript')
            [CompletionResult]::new('--at', '--at', [CompletionResultType]::ParameterName, 'Derive the messages as they stood right after event SEQ (replays the log up to SEQ)')
            [CompletionResult]::new('--session', '--session', [CompletionResultType]::ParameterName, 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never')
            [CompletionResult]::new('--known-types', '--known-types', [CompletionResultType]::ParameterName, 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'dshs;show' {
            [CompletionResult]::new('--type', '--type', [CompletionResultType]::ParameterName, 'Only events of type T (repeatable). A trailing `/` selects a family: `tool/` is tool/call, tool/result, …')
            [CompletionResult]::new('--turn', '--turn', [CompletionResultType]::ParameterName, 'Only events of turn N, or of turns A..B (inclusive; `A..` and `..B` are open). An event belongs to the turn its `data.turn` names, else to the turn open around it')
            [CompletionResult]::new('--grep', '--grep', [CompletionResultType]::ParameterName, 'Only events whose stored line contains TEXT (case-sensitive, raw JSON text: a packed chunk row matches as a whole)')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'One line per event, or the same selection as JSON Lines')
            [CompletionResult]::new('--session', '--session', [CompletionResultType]::ParameterName, 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one')
            [CompletionResult]::new('--poll', '--poll', [CompletionResultType]::ParameterName, 'With --follow: look for new data every MS milliseconds instead of watching file-system events (for network file systems)')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never')
            [CompletionResult]::new('--known-types', '--known-types', [CompletionResultType]::ParameterName, 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'Keep reading as the running session appends, until Ctrl-C: each new event is checked and folded once, from the state the previous ones left')
            [CompletionResult]::new('--follow', '--follow', [CompletionResultType]::ParameterName, 'Keep reading as the running session appends, until Ctrl-C: each new event is checked and folded once, from the state the previous ones left')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'dshs;stats' {
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'A report for people, or one JSON document')
            [CompletionResult]::new('--session', '--session', [CompletionResultType]::ParameterName, 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never')
            [CompletionResult]::new('--known-types', '--known-types', [CompletionResultType]::ParameterName, 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'dshs;repair' {
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Write the repaired log to OUT (a new file; never replaced) and leave FILE untouched. For a SQLite store: a repaired copy of the whole database (SQLite''s backup API), or with a `.jsonl` name the session''s repaired logical log')
            [CompletionResult]::new('--session', '--session', [CompletionResultType]::ParameterName, 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never')
            [CompletionResult]::new('--known-types', '--known-types', [CompletionResultType]::ParameterName, 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES')
            [CompletionResult]::new('--dry-run', '--dry-run', [CompletionResultType]::ParameterName, 'Change nothing: print the events that would be appended (JSON Lines, stdout) and what would be cut (stderr)')
            [CompletionResult]::new('--allow-old-schema', '--allow-old-schema', [CompletionResultType]::ParameterName, 'Write a schema-15 SQLite store (no running DSH reads that layout any more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'dshs;compact' {
            [CompletionResult]::new('--start', '--start', [CompletionResultType]::ParameterName, 'The first surface node to replace (a seq from `dshs surface`)')
            [CompletionResult]::new('--end', '--end', [CompletionResultType]::ParameterName, 'The last surface node to replace (inclusive; not before START in surface order)')
            [CompletionResult]::new('--summary', '--summary', [CompletionResultType]::ParameterName, 'The summary the model sees instead of the range')
            [CompletionResult]::new('--summary-file', '--summary-file', [CompletionResultType]::ParameterName, 'Read the summary from a UTF-8 file (`-`: standard input); trailing newlines are dropped')
            [CompletionResult]::new('--session', '--session', [CompletionResultType]::ParameterName, 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never')
            [CompletionResult]::new('--known-types', '--known-types', [CompletionResultType]::ParameterName, 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES')
            [CompletionResult]::new('--dry-run', '--dry-run', [CompletionResultType]::ParameterName, 'Change nothing: print the four events that would be appended, as JSON Lines')
            [CompletionResult]::new('--allow-old-schema', '--allow-old-schema', [CompletionResultType]::ParameterName, 'Write a schema-15 SQLite store (no running DSH reads that layout any more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'dshs;grep' {
            [CompletionResult]::new('--at', '--at', [CompletionResultType]::ParameterName, 'Search each log as it stood right after event SEQ (replays the prefix 0..=SEQ)')
            [CompletionResult]::new('--role', '--role', [CompletionResultType]::ParameterName, 'Only text from ROLE (repeatable). Tool output is `tool` in every format; tool calls are `assistant`; summaries, titles and todos have no role')
            [CompletionResult]::new('--type', '--type', [CompletionResultType]::ParameterName, 'Only events of type T (repeatable). A trailing `/` selects a family: `tool/` is tool/call, tool/result, …')
            [CompletionResult]::new('--turn', '--turn', [CompletionResultType]::ParameterName, 'Only events of turn N, or of turns A..B (inclusive; `A..` and `..B` are open). An event belongs to the turn its `data.turn` names, else to the turn open around it')
            [CompletionResult]::new('--since', '--since', [CompletionResultType]::ParameterName, 'Only events at or after TIME (event time): 2026-11-29, `2026-11-29 13:45` (local time, TZ applies), 2026-11-29T13:45:00Z, @EPOCH_MS, or a span ago such as 2h or 3d')
            [CompletionResult]::new('--until', '--until', [CompletionResultType]::ParameterName, 'Only events at or before TIME (same forms as --since; a date includes its whole day)')
            [CompletionResult]::new('--session', '--session', [CompletionResultType]::ParameterName, 'Only the session whose header id is ID, or starts with it (repeatable)')
            [CompletionResult]::new('-C', '-C ', [CompletionResultType]::ParameterName, 'Show N events of context before and after each matching one (their first line)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'Show N events of context before and after each matching one (their first line)')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Lines for people, or JSON Lines (match/context/count records, then a summary)')
            [CompletionResult]::new('-j', '-j', [CompletionResultType]::ParameterName, 'Search N logs at a time (default: one per core)')
            [CompletionResult]::new('--jobs', '--jobs', [CompletionResultType]::ParameterName, 'Search N logs at a time (default: one per core)')
            [CompletionResult]::new('--poll', '--poll', [CompletionResultType]::ParameterName, 'With --follow: look for new data every MS milliseconds instead of watching file-system events (for network file systems)')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never')
            [CompletionResult]::new('--known-types', '--known-types', [CompletionResultType]::ParameterName, 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES')
            [CompletionResult]::new('-F', '-F ', [CompletionResultType]::ParameterName, 'PATTERN is a fixed string, not a regular expression')
            [CompletionResult]::new('--fixed-strings', '--fixed-strings', [CompletionResultType]::ParameterName, 'PATTERN is a fixed string, not a regular expression')
            [CompletionResult]::new('-i', '-i', [CompletionResultType]::ParameterName, 'Match case-insensitively (Unicode case folding)')
            [CompletionResult]::new('--ignore-case', '--ignore-case', [CompletionResultType]::ParameterName, 'Match case-insensitively (Unicode case folding)')
            [CompletionResult]::new('-w', '-w', [CompletionResultType]::ParameterName, 'Match whole words only (no word character just before or after the match)')
            [CompletionResult]::new('--word-regexp', '--word-regexp', [CompletionResultType]::ParameterName, 'Match whole words only (no word character just before or after the match)')
            [CompletionResult]::new('--surface', '--surface', [CompletionResultType]::ParameterName, 'Only what the model sees now: the final surface of each log (and in formats 0-2 the latest request''s system prompt)')
            [CompletionResult]::new('-l', '-l', [CompletionResultType]::ParameterName, 'Print only the logs (session directories) with a match, each read only up to its first match (with --surface or --format json, whole)')
            [CompletionResult]::new('--files-with-matches', '--files-with-matches', [CompletionResultType]::ParameterName, 'Print only the logs (session directories) with a match, each read only up to its first match (with --surface or --format json, whole)')
            [CompletionResult]::new('-c', '-c', [CompletionResultType]::ParameterName, 'Print the number of matching lines of each log with a match (`PATH:COUNT`)')
            [CompletionResult]::new('--count', '--count', [CompletionResultType]::ParameterName, 'Print the number of matching lines of each log with a match (`PATH:COUNT`)')
            [CompletionResult]::new('--chunks', '--chunks', [CompletionResultType]::ParameterName, 'Also search streamed deltas (format 0/1 assistant/chunk events, the embedded stream of format 2+ assistant messages), each on its own')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'Keep reading as the running session appends, until Ctrl-C: each new event is checked and folded once, from the state the previous ones left')
            [CompletionResult]::new('--follow', '--follow', [CompletionResultType]::ParameterName, 'Keep reading as the running session appends, until Ctrl-C: each new event is checked and folded once, from the state the previous ones left')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'dshs;ls' {
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format: a table, or JSON Lines (one object per session)')
            [CompletionResult]::new('-j', '-j', [CompletionResultType]::ParameterName, 'Validate N sessions at a time (default: one per core)')
            [CompletionResult]::new('--jobs', '--jobs', [CompletionResultType]::ParameterName, 'Validate N sessions at a time (default: one per core)')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never')
            [CompletionResult]::new('--known-types', '--known-types', [CompletionResultType]::ParameterName, 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'dshs;usage' {
            [CompletionResult]::new('--by', '--by', [CompletionResultType]::ParameterName, 'One row per day, ISO week, month, session, model or turn (--by turn: one session)')
            [CompletionResult]::new('--since', '--since', [CompletionResultType]::ParameterName, 'Only calls on or after DATE (YYYY-MM-DD, in the report''s time zone)')
            [CompletionResult]::new('--until', '--until', [CompletionResultType]::ParameterName, 'Only calls on or before DATE (YYYY-MM-DD, inclusive)')
            [CompletionResult]::new('-z', '-z', [CompletionResultType]::ParameterName, 'The IANA time zone days are taken in (default: TZ, else the system''s)')
            [CompletionResult]::new('--timezone', '--timezone', [CompletionResultType]::ParameterName, 'The IANA time zone days are taken in (default: TZ, else the system''s)')
            [CompletionResult]::new('--pricing', '--pricing', [CompletionResultType]::ParameterName, 'A JSON price file adding or overriding prices (same fields as the shipped table)')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format: a table, or JSON Lines (one object per row, then a total)')
            [CompletionResult]::new('-j', '-j', [CompletionResultType]::ParameterName, 'Read N sessions at a time (default: one per core)')
            [CompletionResult]::new('--jobs', '--jobs', [CompletionResultType]::ParameterName, 'Read N sessions at a time (default: one per core)')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never')
            [CompletionResult]::new('--known-types', '--known-types', [CompletionResultType]::ParameterName, 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES')
            [CompletionResult]::new('--breakdown', '--breakdown', [CompletionResultType]::ParameterName, 'A line per model under each row')
            [CompletionResult]::new('--no-cost', '--no-cost', [CompletionResultType]::ParameterName, 'Leave costs out')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'dshs;export' {
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Write to OUT instead of standard output: a file for one session, a directory (made if needed) for several sessions or a storage root')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Write to OUT instead of standard output: a file for one session, a directory (made if needed) for several sessions or a storage root')
            [CompletionResult]::new('--at', '--at', [CompletionResultType]::ParameterName, 'The session as it stood right after event SEQ (replays the log up to SEQ)')
            [CompletionResult]::new('--turn', '--turn', [CompletionResultType]::ParameterName, 'Only these turns (inclusive): N, A..B, A.. or ..B')
            [CompletionResult]::new('--session', '--session', [CompletionResultType]::ParameterName, 'The session of a SQLite session store to read (the same as FILE#ID); needed when the store holds more than one')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never')
            [CompletionResult]::new('--known-types', '--known-types', [CompletionResultType]::ParameterName, 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES')
            [CompletionResult]::new('--no-redact', '--no-redact', [CompletionResultType]::ParameterName, 'Keep secrets as they are written (by default they are masked)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'dshs;completions' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never')
            [CompletionResult]::new('--known-types', '--known-types', [CompletionResultType]::ParameterName, 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'dshs;man' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never')
            [CompletionResult]::new('--known-types', '--known-types', [CompletionResultType]::ParameterName, 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing at all (no output, no errors, no progress); only the exit status speaks')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'dshs;help' {
            [CompletionResult]::new('validate', 'validate', [CompletionResultType]::ParameterValue, 'Check every rule of the log''s format version and report every finding')
            [CompletionResult]::new('explain', 'explain', [CompletionResultType]::ParameterValue, 'Explain a finding code (or list them all)')
            [CompletionResult]::new('surface', 'surface', [CompletionResultType]::ParameterValue, 'Print the current surface: the events the model sees, in order')
            [CompletionResult]::new('derive', 'derive', [CompletionResultType]::ParameterValue, 'Print the model-visible messages, byte-for-byte as stored')
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'List events as people read them: one line per event')
            [CompletionResult]::new('stats', 'stats', [CompletionResultType]::ParameterValue, 'Summarize a log: header facts, event counts, turns, tools, compactions, tokens')
            [CompletionResult]::new('repair', 'repair', [CompletionResultType]::ParameterValue, 'Cut a torn tail and close an open turn the way DSH does on resume (append-only)')
            [CompletionResult]::new('compact', 'compact', [CompletionResultType]::ParameterValue, 'Replace a range of the surface with a summary, the way DSH''s compaction does (append-only)')
            [CompletionResult]::new('grep', 'grep', [CompletionResultType]::ParameterValue, 'Search the decoded text of logs: messages, reasoning, tool calls and results, summaries')
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List the sessions under a DSH storage root, each validated, newest activity first')
            [CompletionResult]::new('usage', 'usage', [CompletionResultType]::ParameterValue, 'Tokens and cost of the model calls in sessions, counted once per call, by day, week, month, session, model or turn')
            [CompletionResult]::new('export', 'export', [CompletionResultType]::ParameterValue, 'Write a session as one self-contained web page (or a directory of pages)')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script (bash, zsh, fish, elvish, powershell)')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'Print the manual page (roff) for dshs and all its commands')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'dshs;help;validate' {
            break
        }
        'dshs;help;explain' {
            break
        }
        'dshs;help;surface' {
            break
        }
        'dshs;help;derive' {
            break
        }
        'dshs;help;show' {
            break
        }
        'dshs;help;stats' {
            break
        }
        'dshs;help;repair' {
            break
        }
        'dshs;help;compact' {
            break
        }
        'dshs;help;grep' {
            break
        }
        'dshs;help;ls' {
            break
        }
        'dshs;help;usage' {
            break
        }
        'dshs;help;export' {
            break
        }
        'dshs;help;completions' {
            break
        }
        'dshs;help;man' {
            break
        }
        'dshs;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
