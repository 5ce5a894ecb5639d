#!/usr/bin/env bash
# End-to-end benchmark: generate large realistic logs, then time each read-only command
# with GNU time (wall clock and peak RSS). Usage: benches/run.sh [SIZE] [VERSIONS...]
#   SIZE defaults to 1G; VERSIONS to "0 3 4". Logs are cached under bench-data/.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-1G}
shift || true
versions=${*:-0 3 4}
cargo build --release --quiet --bin dshs --example gen-log
mkdir -p bench-data
bin=./target/release/dshs
timecmd() { # label, command...
  local label=$1; shift
  local out
  out=$( { /usr/bin/time -f '%e %M' "$@" >/dev/null 2>/dev/null; } 2>&1 | tail -1 )
  # shellcheck disable=SC2086
  set -- $out
  printf '%-28s %8s s %8s MiB\n' "$label" "$1" "$(( $2 / 1024 ))"
}
for v in $versions; do
  log=bench-data/v$v-$size.jsonl
  [ -s "$log" ] || ./target/release/examples/gen-log --version "$v" --size "$size" > "$log"
  bytes=$(stat -c %s "$log")
  echo "== v$v, $(( bytes / 1048576 )) MiB: $log"
  timecmd "validate" $bin validate -q "$log"
  timecmd "validate --format json" $bin validate --format json "$log"
  if $bin surface --help >/dev/null 2>&1; then
    timecmd "surface" $bin surface "$log"
    timecmd "surface --format json" $bin surface --format json "$log"
  fi
  if $bin derive --help >/dev/null 2>&1; then
    timecmd "derive --format ndjson" $bin derive --format ndjson "$log"
  fi
  if $bin stats --help >/dev/null 2>&1; then
    timecmd "stats" $bin stats "$log"
  fi
done
