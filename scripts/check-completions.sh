#!/usr/bin/env bash
# Load the committed completion scripts (completions/) into real shells and check what they
# offer: log arguments complete to session directories and *.jsonl[.zst|.zstd] files, and
# enumerated values (--format, --color, shell names) to their values.
#
#   scripts/check-completions.sh [bash|zsh|fish]...     (default: all three)
#
# A shell that is not installed is skipped with a message (exit 0). Exit 1 on a failed check.
# tests/shell.rs runs this per shell.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
comp="$root/completions"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/logs/sub" "$work/zfunc"
touch "$work/logs/a.jsonl" "$work/logs/b.jsonl.zst" "$work/logs/c.jsonl.zstd" \
      "$work/logs/notes.txt" "$work/logs/d.jsonl.bak"
failed=0

# expect NAME "got words" "wanted words" — same set, order ignored.
expect() {
    local got want
    got=$(tr ' ' '\n' <<<"$2" | sed '/^$/d' | sort | tr '\n' ' ')
    want=$(tr ' ' '\n' <<<"$3" | sed '/^$/d' | sort | tr '\n' ' ')
    if [[ "$got" == "$want" ]]; then
        echo "ok   $1"
    else
        echo "FAIL $1: got [$got], want [$want]"
        failed=1
    fi
}

check_bash() {
    local out
    out=$(cd "$work/logs" && bash --norc --noprofile -c '
        source "$1"
        complete -p dshs
        t() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); COMPREPLY=()
              _dshs dshs "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null
              echo "${COMPREPLY[*]}"; }
        t dshs derive ""
        t dshs validate a.jsonl ""
        t dshs derive --format ""
        t dshs --color ""
        t dshs validate --format ""
        t dshs completions ""' _ "$comp/dshs.bash" 2>&1)
    local -a lines
    mapfile -t lines <<<"$out"
    expect "bash: complete -p dshs" "${lines[0]:-}" "complete -o bashdefault -o default -o nosort -F _dshs dshs"
    expect "bash: derive FILE" "${lines[1]:-}" "sub a.jsonl b.jsonl.zst c.jsonl.zstd"
    expect "bash: validate FILE..." "${lines[2]:-}" "sub a.jsonl b.jsonl.zst c.jsonl.zstd"
    expect "bash: derive --format" "${lines[3]:-}" "json ndjson markdown"
    expect "bash: --color" "${lines[4]:-}" "auto always never"
    expect "bash: validate --format" "${lines[5]:-}" "human json"
    [[ "${lines[6]:-}" == *"bash zsh fish elvish powershell"* ]] && echo "ok   bash: completions SHELL" \
        || { echo "FAIL bash: completions SHELL: ${lines[6]}"; failed=1; }
}

check_fish() {
    local out
    out=$(cd "$work/logs" && fish --no-config -c '
        source $argv[1]
        for line in "dshs derive " "dshs validate a.jsonl " "dshs derive --format " "dshs --color=" "dshs completions "
            echo (complete -C "$line" | string replace -r "\t.*" "")
        end' "$comp/dshs.fish" 2>&1)
    local -a lines
    mapfile -t lines <<<"$out"
    expect "fish: derive FILE" "${lines[0]:-}" "sub/ a.jsonl b.jsonl.zst c.jsonl.zstd"
    expect "fish: validate FILE..." "${lines[1]:-}" "sub/ a.jsonl b.jsonl.zst c.jsonl.zstd"
    expect "fish: derive --format" "${lines[2]:-}" "json ndjson markdown"
    expect "fish: --color=" "${lines[3]:-}" "--color=auto --color=always --color=never"
    expect "fish: completions SHELL" "${lines[4]:-}" "bash zsh fish elvish powershell"
}

# offers NAME "listing" "wanted words" "unwanted words" — each wanted word is in the listing,
# no unwanted one is.
offers() {
    local w ok=1
    for w in $3; do [[ " $2 " == *" $w "* ]] || { ok=0; echo "FAIL $1: no $w in [$2]"; }; done
    for w in $4; do [[ " $2 " != *" $w "* ]] || { ok=0; echo "FAIL $1: $w offered in [$2]"; }; done
    if [[ $ok == 1 ]]; then echo "ok   $1"; else failed=1; fi
}

check_zsh() {
    cp "$comp/_dshs" "$work/zfunc/_dshs"
    # An interactive zsh in a pseudo-terminal, driven by zpty: type `dshs derive <TAB>`, then
    # read until a marker printed after the listing shows up (no sleeps; the timeout only
    # ends a hung check). The markers are typed as `@"@…` so the echo of the typed line does
    # not match them.
    local out
    out=$(cd "$work/logs" && timeout 60 zsh -f -c '
        zmodload zsh/zpty || exit 3
        zpty z "zsh -f -i"
        zpty -w z "PS1=\"RE\"\"ADY> \"; fpath=($1 \$fpath); autoload -U compinit; compinit -u -D; unsetopt beep; print -r -- @\"@\${_comps[dshs]}@\"@"
        # Type only once the line editor shows its prompt: typed ahead into the cooked
        # terminal, ^U would erase the line before zle ever sees the TAB.
        zpty -r z got "*@@_*@@*READY>*" && { got=${got%@@*}; print -r -- "${got##*@@}"; }
        for line in "dshs derive " "dshs derive --format " "dshs completions "; do
            zpty -w -n z "$line"$'"'"'\t'"'"'
            zpty -w -n z $'"'"'\C-u'"'"'
            zpty -w z "print M\"\"ARK"
            zpty -r z got "*MARK*READY>*"
            print -r -- "$got" | tr "\r\n" "  " | sed "s/\x1b\[[0-9;?]*[a-zA-Z]/ /g"
            print
        done
        zpty -d z' _ "$work/zfunc" 2>&1)
    local -a lines
    mapfile -t lines <<<"$out"
    expect "zsh: compdef" "${lines[0]:-}" "_dshs"
    offers "zsh: derive FILE" "${lines[1]:-}" "a.jsonl b.jsonl.zst c.jsonl.zstd sub/" "notes.txt d.jsonl.bak"
    offers "zsh: derive --format" "${lines[2]:-}" "json ndjson markdown" ""
    offers "zsh: completions SHELL" "${lines[3]:-}" "bash zsh fish elvish powershell" ""
}

shells=("$@")
[[ ${#shells[@]} -eq 0 ]] && shells=(bash zsh fish)
for sh in "${shells[@]}"; do
    if ! command -v "$sh" >/dev/null 2>&1; then
        echo "skip $sh: not installed"
        continue
    fi
    "check_$sh"
done
exit $failed
