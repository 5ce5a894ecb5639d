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
complete -c dshs -n "__fish_dshs_needs_command" -s q -l quiet -d 'Print less: no progress, no summaries beyond what the command exists to print'
complete -c dshs -n "__fish_dshs_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_needs_command" -s V -l version -d 'Print version'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "validate" -d 'Check every rule of the log\'s format version and report every finding'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "explain" -d 'Explain a finding code (or list them all)'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "surface" -d 'Print the current surface: the events the model sees, in order'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "derive" -d 'Print the model-visible messages, byte-for-byte as stored'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "show" -d 'List events as people read them: one line per event'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "stats" -d 'Summarize a log: header facts, event counts, turns, tools, compactions, tokens'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "repair" -d 'Cut a torn tail and close an open turn the way DSH does on resume (append-only)'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "ls" -d 'List the sessions under a DSH storage root, each validated, newest activity first'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "completions" -d 'Print a shell completion script'
complete -c dshs -n "__fish_dshs_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dshs -n "__fish_dshs_using_subcommand validate" -l format -d 'Output format: human-readable lines, or JSON Lines (findings, then a summary per file)' -r -f -a "human\t''
json\t''"
complete -c dshs -n "__fish_dshs_using_subcommand validate" -l max-findings -d 'Print at most N findings per file (the summary still counts all of them)' -r
complete -c dshs -n "__fish_dshs_using_subcommand validate" -s j -l jobs -d 'Check N logs at a time (default: one per core)' -r
complete -c dshs -n "__fish_dshs_using_subcommand validate" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand validate" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand validate" -l deny-warnings -d 'Exit 1 when there are warnings, too'
complete -c dshs -n "__fish_dshs_using_subcommand validate" -s q -l quiet -d 'Print less: no progress, no summaries beyond what the command exists to print'
complete -c dshs -n "__fish_dshs_using_subcommand validate" -s h -l help -d 'Print help'
complete -c dshs -n "__fish_dshs_using_subcommand explain" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand explain" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand explain" -s q -l quiet -d 'Print less: no progress, no summaries beyond what the command exists to print'
complete -c dshs -n "__fish_dshs_using_subcommand explain" -s h -l help -d 'Print help'
complete -c dshs -n "__fish_dshs_using_subcommand surface" -l format -d 'Output format: a table with a preview of each message, or one JSON document' -r -f -a "table\t''
json\t''"
complete -c dshs -n "__fish_dshs_using_subcommand surface" -l at -d 'Show the surface as it stood right after event SEQ (replays the log up to SEQ)' -r
complete -c dshs -n "__fish_dshs_using_subcommand surface" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand surface" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand surface" -s q -l quiet -d 'Print less: no progress, no summaries beyond what the command exists to print'
complete -c dshs -n "__fish_dshs_using_subcommand surface" -s h -l help -d 'Print help'
complete -c dshs -n "__fish_dshs_using_subcommand derive" -l format -d 'One JSON array, one message per line, or a readable transcript' -r -f -a "json\t''
ndjson\t''
markdown\t''"
complete -c dshs -n "__fish_dshs_using_subcommand derive" -l at -d 'Derive the messages as they stood right after event SEQ (replays the log up to SEQ)' -r
complete -c dshs -n "__fish_dshs_using_subcommand derive" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand derive" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand derive" -s q -l quiet -d 'Print less: no progress, no summaries beyond what the command exists to print'
complete -c dshs -n "__fish_dshs_using_subcommand derive" -s h -l help -d 'Print help'
complete -c dshs -n "__fish_dshs_using_subcommand show" -l type -d 'Only events of type T (repeatable). A trailing `/` selects a family: `tool/` is tool/call, tool/result, …' -r
complete -c dshs -n "__fish_dshs_using_subcommand show" -l turn -d 'Only events of turn N, or of turns A..B (inclusive; `A..` and `..B` are open). An event belongs to the turn its `data.turn` names, else to the turn open around it' -r
complete -c dshs -n "__fish_dshs_using_subcommand show" -l grep -d 'Only events whose stored line contains TEXT (case-sensitive, raw JSON text: a packed chunk row matches as a whole)' -r
complete -c dshs -n "__fish_dshs_using_subcommand show" -l format -d 'One line per event, or the same selection as JSON Lines' -r -f -a "human\t''
json\t''"
complete -c dshs -n "__fish_dshs_using_subcommand show" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand show" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand show" -s q -l quiet -d 'Print less: no progress, no summaries beyond what the command exists to print'
complete -c dshs -n "__fish_dshs_using_subcommand show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand stats" -l format -d 'A report for people, or one JSON document' -r -f -a "human\t''
json\t''"
complete -c dshs -n "__fish_dshs_using_subcommand stats" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand stats" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand stats" -s q -l quiet -d 'Print less: no progress, no summaries beyond what the command exists to print'
complete -c dshs -n "__fish_dshs_using_subcommand stats" -s h -l help -d 'Print help'
complete -c dshs -n "__fish_dshs_using_subcommand repair" -l output -d 'Write the repaired log to OUT (a new file; never replaced) and leave FILE untouched' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand repair" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand repair" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand repair" -l dry-run -d 'Change nothing: print the events that would be appended (JSON Lines, stdout) and what would be cut (stderr)'
complete -c dshs -n "__fish_dshs_using_subcommand repair" -s q -l quiet -d 'Print less: no progress, no summaries beyond what the command exists to print'
complete -c dshs -n "__fish_dshs_using_subcommand repair" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand ls" -l format -d 'Output format: a table, or JSON Lines (one object per session)' -r -f -a "human\t''
json\t''"
complete -c dshs -n "__fish_dshs_using_subcommand ls" -s j -l jobs -d 'Validate N sessions at a time (default: one per core)' -r
complete -c dshs -n "__fish_dshs_using_subcommand ls" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand ls" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand ls" -s q -l quiet -d 'Print less: no progress, no summaries beyond what the command exists to print'
complete -c dshs -n "__fish_dshs_using_subcommand ls" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dshs -n "__fish_dshs_using_subcommand completions" -l color -d 'When to colour output: auto (terminal, NO_COLOR unset, TERM not dumb), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c dshs -n "__fish_dshs_using_subcommand completions" -l known-types -d 'A file declaring extra log-only event types (one per line, optional version list). Repeatable; adds to the files listed in DSHS_KNOWN_TYPES' -r -F
complete -c dshs -n "__fish_dshs_using_subcommand completions" -s q -l quiet -d 'Print less: no progress, no summaries beyond what the command exists to print'
complete -c dshs -n "__fish_dshs_using_subcommand completions" -s h -l help -d 'Print help'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair ls completions help" -f -a "validate" -d 'Check every rule of the log\'s format version and report every finding'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair ls completions help" -f -a "explain" -d 'Explain a finding code (or list them all)'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair ls completions help" -f -a "surface" -d 'Print the current surface: the events the model sees, in order'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair ls completions help" -f -a "derive" -d 'Print the model-visible messages, byte-for-byte as stored'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair ls completions help" -f -a "show" -d 'List events as people read them: one line per event'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair ls completions help" -f -a "stats" -d 'Summarize a log: header facts, event counts, turns, tools, compactions, tokens'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair ls completions help" -f -a "repair" -d 'Cut a torn tail and close an open turn the way DSH does on resume (append-only)'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair ls completions help" -f -a "ls" -d 'List the sessions under a DSH storage root, each validated, newest activity first'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair ls completions help" -f -a "completions" -d 'Print a shell completion script'
complete -c dshs -n "__fish_dshs_using_subcommand help; and not __fish_seen_subcommand_from validate explain surface derive show stats repair ls completions help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
