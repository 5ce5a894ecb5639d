#compdef dshs

autoload -U is-at-least

_dshs() {
    typeset -A opt_args
    typeset -a _arguments_options
    local ret=1

    if is-at-least 5.2; then
        _arguments_options=(-s -S -C)
    else
        _arguments_options=(-s -C)
    fi

    local context curcontext="$curcontext" state line
    _arguments "${_arguments_options[@]}" : \
'--color=[When to colour output\: auto (terminal, NO_COLOR unset, TERM not dumb), always, never]:COLOR:(auto always never)' \
'*--known-types=[A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES]:FILE:_files' \
'-q[Print less\: no progress, no summaries beyond what the command exists to print]' \
'--quiet[Print less\: no progress, no summaries beyond what the command exists to print]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
'-V[Print version]' \
'--version[Print version]' \
":: :_dshs_commands" \
"*::: :->dshs" \
&& ret=0
    case $state in
    (dshs)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:dshs-command-$line[1]:"
        case $line[1] in
            (validate)
_arguments "${_arguments_options[@]}" : \
'--format=[Output format\: human-readable lines, or JSON Lines (findings, then a summary per file)]:FORMAT:(human json)' \
'--max-findings=[Print at most N findings per file (the summary still counts all of them)]:N:_default' \
'-j+[Check N logs at a time (default\: one per core)]:N:_default' \
'--jobs=[Check N logs at a time (default\: one per core)]:N:_default' \
'--color=[When to colour output\: auto (terminal, NO_COLOR unset, TERM not dumb), always, never]:COLOR:(auto always never)' \
'*--known-types=[A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES]:FILE:_files' \
'--deny-warnings[Exit 1 when there are warnings, too]' \
'-q[Print less\: no progress, no summaries beyond what the command exists to print]' \
'--quiet[Print less\: no progress, no summaries beyond what the command exists to print]' \
'-h[Print help]' \
'--help[Print help]' \
'*::files -- Log files (plain or zstd), session directories (their newest generation), storage roots (every session below), or `-` for standard input:_default' \
&& ret=0
;;
(explain)
_arguments "${_arguments_options[@]}" : \
'--color=[When to colour output\: auto (terminal, NO_COLOR unset, TERM not dumb), always, never]:COLOR:(auto always never)' \
'*--known-types=[A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES]:FILE:_files' \
'-q[Print less\: no progress, no summaries beyond what the command exists to print]' \
'--quiet[Print less\: no progress, no summaries beyond what the command exists to print]' \
'-h[Print help]' \
'--help[Print help]' \
'::code -- A finding code such as `replace-start-not-on-surface`; omit to list all codes:_default' \
&& ret=0
;;
(surface)
_arguments "${_arguments_options[@]}" : \
'--format=[Output format\: a table with a preview of each message, or one JSON document]:FORMAT:(table json)' \
'--at=[Show the surface as it stood right after event SEQ (replays the log up to SEQ)]:SEQ:_default' \
'--color=[When to colour output\: auto (terminal, NO_COLOR unset, TERM not dumb), always, never]:COLOR:(auto always never)' \
'*--known-types=[A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES]:FILE:_files' \
'-q[Print less\: no progress, no summaries beyond what the command exists to print]' \
'--quiet[Print less\: no progress, no summaries beyond what the command exists to print]' \
'-h[Print help]' \
'--help[Print help]' \
':file -- Log file, session directory, or `-` for standard input:_default' \
&& ret=0
;;
(derive)
_arguments "${_arguments_options[@]}" : \
'--format=[One JSON array, one message per line, or a readable transcript]:FORMAT:(json ndjson markdown)' \
'--at=[Derive the messages as they stood right after event SEQ (replays the log up to SEQ)]:SEQ:_default' \
'--color=[When to colour output\: auto (terminal, NO_COLOR unset, TERM not dumb), always, never]:COLOR:(auto always never)' \
'*--known-types=[A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES]:FILE:_files' \
'-q[Print less\: no progress, no summaries beyond what the command exists to print]' \
'--quiet[Print less\: no progress, no summaries beyond what the command exists to print]' \
'-h[Print help]' \
'--help[Print help]' \
':file -- Log file, session directory, or `-` for standard input:_default' \
&& ret=0
;;
(show)
_arguments "${_arguments_options[@]}" : \
'*--type=[Only events of type T (repeatable). A trailing \`/\` selects a family\: \`tool/\` is tool/call, tool/result, …]:T:_default' \
'--turn=[Only events of turn N, or of turns A..B (inclusive; \`A..\` and \`..B\` are open). An event belongs to the turn its \`data.turn\` names, else to the turn open around it]:N|A..B:_default' \
'--grep=[Only events whose stored line contains TEXT (case-sensitive, raw JSON text\: a packed chunk row matches as a whole)]:TEXT:_default' \
'--format=[One line per event, or the same selection as JSON Lines]:FORMAT:(human json)' \
'--color=[When to colour output\: auto (terminal, NO_COLOR unset, TERM not dumb), always, never]:COLOR:(auto always never)' \
'*--known-types=[A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES]:FILE:_files' \
'-q[Print less\: no progress, no summaries beyond what the command exists to print]' \
'--quiet[Print less\: no progress, no summaries beyond what the command exists to print]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
':file -- Log file, session directory, or `-` for standard input:_default' \
&& ret=0
;;
(stats)
_arguments "${_arguments_options[@]}" : \
'--format=[A report for people, or one JSON document]:FORMAT:(human json)' \
'--color=[When to colour output\: auto (terminal, NO_COLOR unset, TERM not dumb), always, never]:COLOR:(auto always never)' \
'*--known-types=[A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES]:FILE:_files' \
'-q[Print less\: no progress, no summaries beyond what the command exists to print]' \
'--quiet[Print less\: no progress, no summaries beyond what the command exists to print]' \
'-h[Print help]' \
'--help[Print help]' \
':file -- Log file, session directory, or `-` for standard input:_default' \
&& ret=0
;;
(repair)
_arguments "${_arguments_options[@]}" : \
'--output=[Write the repaired log to OUT (a new file; never replaced) and leave FILE untouched]:OUT:_files' \
'--color=[When to colour output\: auto (terminal, NO_COLOR unset, TERM not dumb), always, never]:COLOR:(auto always never)' \
'*--known-types=[A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES]:FILE:_files' \
'(--output)--dry-run[Change nothing\: print the events that would be appended (JSON Lines, stdout) and what would be cut (stderr)]' \
'-q[Print less\: no progress, no summaries beyond what the command exists to print]' \
'--quiet[Print less\: no progress, no summaries beyond what the command exists to print]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
':file -- The log file (or session directory) to repair; `-` with --dry-run or --output:_default' \
&& ret=0
;;
(ls)
_arguments "${_arguments_options[@]}" : \
'--format=[Output format\: a table, or JSON Lines (one object per session)]:FORMAT:(human json)' \
'-j+[Validate N sessions at a time (default\: one per core)]:N:_default' \
'--jobs=[Validate N sessions at a time (default\: one per core)]:N:_default' \
'--color=[When to colour output\: auto (terminal, NO_COLOR unset, TERM not dumb), always, never]:COLOR:(auto always never)' \
'*--known-types=[A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES]:FILE:_files' \
'-q[Print less\: no progress, no summaries beyond what the command exists to print]' \
'--quiet[Print less\: no progress, no summaries beyond what the command exists to print]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
'::root -- The storage root (default\: $DSH_HOME/sessions, else ~/.dsh/sessions):_files' \
&& ret=0
;;
(completions)
_arguments "${_arguments_options[@]}" : \
'--color=[When to colour output\: auto (terminal, NO_COLOR unset, TERM not dumb), always, never]:COLOR:(auto always never)' \
'*--known-types=[A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES]:FILE:_files' \
'-q[Print less\: no progress, no summaries beyond what the command exists to print]' \
'--quiet[Print less\: no progress, no summaries beyond what the command exists to print]' \
'-h[Print help]' \
'--help[Print help]' \
':shell -- The shell to generate a completion script for:(bash zsh fish elvish powershell)' \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_dshs__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:dshs-help-command-$line[1]:"
        case $line[1] in
            (validate)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(explain)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(surface)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(derive)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(show)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(stats)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(repair)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(ls)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(completions)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
        esac
    ;;
esac
}

(( $+functions[_dshs_commands] )) ||
_dshs_commands() {
    local commands; commands=(
'validate:Check every rule of the log'\''s format version and report every finding' \
'explain:Explain a finding code (or list them all)' \
'surface:Print the current surface\: the events the model sees, in order' \
'derive:Print the model-visible messages, byte-for-byte as stored' \
'show:List events as people read them\: one line per event' \
'stats:Summarize a log\: header facts, event counts, turns, tools, compactions, tokens' \
'repair:Cut a torn tail and close an open turn the way DSH does on resume (append-only)' \
'ls:List the sessions under a DSH storage root, each validated, newest activity first' \
'completions:Print a shell completion script' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'dshs commands' commands "$@"
}
(( $+functions[_dshs__subcmd__completions_commands] )) ||
_dshs__subcmd__completions_commands() {
    local commands; commands=()
    _describe -t commands 'dshs completions commands' commands "$@"
}
(( $+functions[_dshs__subcmd__derive_commands] )) ||
_dshs__subcmd__derive_commands() {
    local commands; commands=()
    _describe -t commands 'dshs derive commands' commands "$@"
}
(( $+functions[_dshs__subcmd__explain_commands] )) ||
_dshs__subcmd__explain_commands() {
    local commands; commands=()
    _describe -t commands 'dshs explain commands' commands "$@"
}
(( $+functions[_dshs__subcmd__help_commands] )) ||
_dshs__subcmd__help_commands() {
    local commands; commands=(
'validate:Check every rule of the log'\''s format version and report every finding' \
'explain:Explain a finding code (or list them all)' \
'surface:Print the current surface\: the events the model sees, in order' \
'derive:Print the model-visible messages, byte-for-byte as stored' \
'show:List events as people read them\: one line per event' \
'stats:Summarize a log\: header facts, event counts, turns, tools, compactions, tokens' \
'repair:Cut a torn tail and close an open turn the way DSH does on resume (append-only)' \
'ls:List the sessions under a DSH storage root, each validated, newest activity first' \
'completions:Print a shell completion script' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'dshs help commands' commands "$@"
}
(( $+functions[_dshs__subcmd__help__subcmd__completions_commands] )) ||
_dshs__subcmd__help__subcmd__completions_commands() {
    local commands; commands=()
    _describe -t commands 'dshs help completions commands' commands "$@"
}
(( $+functions[_dshs__subcmd__help__subcmd__derive_commands] )) ||
_dshs__subcmd__help__subcmd__derive_commands() {
    local commands; commands=()
    _describe -t commands 'dshs help derive commands' commands "$@"
}
(( $+functions[_dshs__subcmd__help__subcmd__explain_commands] )) ||
_dshs__subcmd__help__subcmd__explain_commands() {
    local commands; commands=()
    _describe -t commands 'dshs help explain commands' commands "$@"
}
(( $+functions[_dshs__subcmd__help__subcmd__help_commands] )) ||
_dshs__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'dshs help help commands' commands "$@"
}
(( $+functions[_dshs__subcmd__help__subcmd__ls_commands] )) ||
_dshs__subcmd__help__subcmd__ls_commands() {
    local commands; commands=()
    _describe -t commands 'dshs help ls commands' commands "$@"
}
(( $+functions[_dshs__subcmd__help__subcmd__repair_commands] )) ||
_dshs__subcmd__help__subcmd__repair_commands() {
    local commands; commands=()
    _describe -t commands 'dshs help repair commands' commands "$@"
}
(( $+functions[_dshs__subcmd__help__subcmd__show_commands] )) ||
_dshs__subcmd__help__subcmd__show_commands() {
    local commands; commands=()
    _describe -t commands 'dshs help show commands' commands "$@"
}
(( $+functions[_dshs__subcmd__help__subcmd__stats_commands] )) ||
_dshs__subcmd__help__subcmd__stats_commands() {
    local commands; commands=()
    _describe -t commands 'dshs help stats commands' commands "$@"
}
(( $+functions[_dshs__subcmd__help__subcmd__surface_commands] )) ||
_dshs__subcmd__help__subcmd__surface_commands() {
    local commands; commands=()
    _describe -t commands 'dshs help surface commands' commands "$@"
}
(( $+functions[_dshs__subcmd__help__subcmd__validate_commands] )) ||
_dshs__subcmd__help__subcmd__validate_commands() {
    local commands; commands=()
    _describe -t commands 'dshs help validate commands' commands "$@"
}
(( $+functions[_dshs__subcmd__ls_commands] )) ||
_dshs__subcmd__ls_commands() {
    local commands; commands=()
    _describe -t commands 'dshs ls commands' commands "$@"
}
(( $+functions[_dshs__subcmd__repair_commands] )) ||
_dshs__subcmd__repair_commands() {
    local commands; commands=()
    _describe -t commands 'dshs repair commands' commands "$@"
}
(( $+functions[_dshs__subcmd__show_commands] )) ||
_dshs__subcmd__show_commands() {
    local commands; commands=()
    _describe -t commands 'dshs show commands' commands "$@"
}
(( $+functions[_dshs__subcmd__stats_commands] )) ||
_dshs__subcmd__stats_commands() {
    local commands; commands=()
    _describe -t commands 'dshs stats commands' commands "$@"
}
(( $+functions[_dshs__subcmd__surface_commands] )) ||
_dshs__subcmd__surface_commands() {
    local commands; commands=()
    _describe -t commands 'dshs surface commands' commands "$@"
}
(( $+functions[_dshs__subcmd__validate_commands] )) ||
_dshs__subcmd__validate_commands() {
    local commands; commands=()
    _describe -t commands 'dshs validate commands' commands "$@"
}

if [ "$funcstack[1]" = "_dshs" ]; then
    _dshs "$@"
else
    compdef _dshs dshs
fi
