#!/usr/bin/env bash
# End-to-end benchmark: generate large realistic logs, then time each read-only command
# with GNU time (wall clock and peak RSS). Usage: benches/run.sh [SIZE] [VERSIONS...]
#   SIZE defaults to 1G; VERSIONS to "0 3 4". Logs are cached under bench-data/.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-1G}
shift || true
versions=${*:-0 3 4}
cargo build --release --quiet --bin dshs --example gen-log --example zstd-log
mkdir -p bench-data
bin=./target/release/dshs
timecmd() { # label, command...
  local label=$1; shift
  local report
  report=$(mktemp)
  /usr/bin/time -o "$report" -f '%e %M' "$@" >/dev/null 2>&1 || true
  read -r secs kib < "$report"
  rm -f "$report"
  printf '%-28s %8s s %6s MiB   %s MiB/s\n' "$label" "$secs" "$(( kib / 1024 ))" \
    "$(awk -v b="$bytes" -v s="$secs" 'BEGIN { if (s > 0) printf "%.0f", b / 1048576 / s; else print "-" }')"
}
for v in $versions; do
  log=bench-data/v$v-$size.jsonl
  [ -s "$log" ] || ./target/release/examples/gen-log --version "$v" --size "$size" > "$log"
  bytes=$(stat -c %s "$log")
  echo "== v$v, $(( bytes / 1048576 )) MiB: $log"
  timecmd "validate" $bin validate -q "$log"
  timecmd "validate --format json" $bin validate --format json "$log"
  timecmd "surface" $bin surface "$log"
  timecmd "surface --format json" $bin surface --format json "$log"
  timecmd "derive --format ndjson" $bin derive --format ndjson "$log"
  timecmd "stats" $bin stats "$log"
  timecmd "show" $bin show "$log"
  # The same log as DSH stores it by default: zstd frames (header alone, then batches of
  # 16 lines). MiB/s is of the decompressed bytes.
  zlog=$log.zstd
  [ -s "$zlog" ] || ./target/release/examples/zstd-log --batch 16 "$log" "$zlog"
  echo "   zstd copy: $(( $(stat -c %s "$zlog") / 1048576 )) MiB compressed"
  timecmd "validate (zstd)" $bin validate -q "$zlog"
  timecmd "derive --format ndjson (zstd)" $bin derive --format ndjson "$zlog"
done
