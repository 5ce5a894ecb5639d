#!/usr/bin/env bash
# Regenerate everything derived from the CLI definition (src/cli.rs): the completion scripts
# under completions/ and the man page doc/dshs.1. Run after any change to commands, flags or
# help texts; tests/shell.rs fails until the committed files match.
#
#   scripts/gen-shell.sh            # uses `cargo run`
#   DSHS=target/release/dshs scripts/gen-shell.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -n "${DSHS:-}" ]]; then dshs=("$DSHS"); else cargo build -q; dshs=(target/debug/dshs); fi
mkdir -p completions doc
for pair in bash:dshs.bash zsh:_dshs fish:dshs.fish elvish:dshs.elv powershell:_dshs.ps1; do
    "${dshs[@]}" completions "${pair%%:*}" > "completions/${pair#*:}"
done
"${dshs[@]}" man > doc/dshs.1
echo "regenerated completions/{dshs.bash,_dshs,dshs.fish,dshs.elv,_dshs.ps1} and doc/dshs.1"
