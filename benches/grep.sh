#!/usr/bin/env bash
# `dshs grep` against `rg` over the same storage roots, paired run by run (not a timed test):
# for each pattern, `rg -c -F` and `dshs grep -c -F` one after the other on the same files
# (both read every session's log; the root holds nothing else), then `dshs grep` printing its
# lines and its JSON (to /dev/null), with wall clock and peak RSS from GNU time.
#
#   benches/grep.sh [ROOT]              default /work/bench-data/grep-root (benches/grep-root.sh)
#
# Environment: RUNS (default 5) paired runs per pattern; BIN the dshs binary (default
# target/release/dshs); ZSTD=0 skips the zstd root (timed against `rg -z -c`, which runs one
# zstd process per file); SETTLE=0 skips reading the files once before each timed command.
set -euo pipefail
cd "$(dirname "$0")/.."
root=${1:-/work/bench-data/grep-root}
runs=${RUNS:-5}
bin=${BIN:-./target/release/dshs}
[ -n "${BIN:-}" ] || cargo build --release --quiet --bin dshs
[ -d "$root/plain" ] || benches/grep-root.sh "$root"
command -v rg > /dev/null || { echo "ripgrep (rg) is needed: apt-get install ripgrep"; exit 2; }

# shellcheck source=benches/lib.sh
source benches/lib.sh
settle_root() { if [ "${SETTLE:-1}" != 0 ]; then find "$1" -type f -exec cat {} + > /dev/null; fi; }
secs() { read -r s _ < <(measure "$@"); echo "$s"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

echo "machine: $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "dshs: $($bin --version), rg: $(rg --version 2>/dev/null | head -n 1)"
# Patterns over the generator's vocabulary, from absent to in every session (the counts are
# printed for each root).
patterns=(
  'deadbeef'
  'compaction error fixed value config'
  'cargo naïve harness log'
  'src/main.rs cargo'
)
for sub in plain zstd; do
  [ "$sub" = zstd ] && [ "${ZSTD:-1}" = 0 ] && continue
  dir=$root/$sub
  [ -d "$dir" ] || continue
  bytes=$(find "$dir" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
  files=$(find "$dir" -type f | wc -l)
  z=(); [ "$sub" = zstd ] && z=(-z)
  echo
  echo "== $dir: $files logs, $bytes bytes stored"
  for p in "${patterns[@]}"; do
    count() { awk -F: '{ n++; s += $NF } END { printf "%d logs, %d lines", n, s }'; }
    hits=$( { rg "${z[@]}" -c -F "$p" "$dir" || true; } | count)
    found=$( { "$bin" grep -c -F "$p" "$dir" || true; } | count)
    echo "-- '$p' (rg: $hits; dshs: $found)"
    printf '%-4s %7s %7s %6s | %7s %6s | %7s %6s\n' run rg_c_s grep_c_s x_rg grep_s x_rg json_s x_rg
    for r in $(seq 1 "$runs"); do
      settle_root "$dir"; rg_s=$(secs rg "${z[@]}" -c -F "$p" "$dir")
      settle_root "$dir"; c_s=$(secs "$bin" grep -c -F "$p" "$dir")
      settle_root "$dir"; l_s=$(secs "$bin" grep --color never -F "$p" "$dir")
      settle_root "$dir"; j_s=$(secs "$bin" grep --format json -F "$p" "$dir")
      printf '%-4s %7s %7s %6s | %7s %6s | %7s %6s\n' "$r" "$rg_s" "$c_s" "$(ratio "$c_s" "$rg_s")" \
        "$l_s" "$(ratio "$l_s" "$rg_s")" "$j_s" "$(ratio "$j_s" "$rg_s")"
    done
  done
done
