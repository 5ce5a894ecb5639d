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

# shellcheck source=benches/lib.sh
source benches/lib.sh
grep_bench_setup "${1:-}" 5
secs() { read -r s _ < <(measure "$@"); echo "$s"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

echo "machine: $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "dshs: $($bin --version), rg: $(rg --version 2>/dev/null | head -n 1)"
for sub in plain zstd; do
  [ "$sub" = zstd ] && [ "${ZSTD:-1}" = 0 ] && continue
  dir=$root/$sub
  [ -d "$dir" ] || continue
  bytes=$(find "$dir" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
  files=$(find "$dir" -type f | wc -l)
  z=(); [ "$sub" = zstd ] && z=(-z)
  echo
  echo "== $dir: $files logs, $bytes bytes stored"
  for entry in "${grep_patterns[@]}"; do
    read -r -a flags <<< "${entry%%|*}"
    p=${entry#*|}
    count() { awk -F: '{ n++; s += $NF } END { printf "%d logs, %d lines", n, s }'; }
    hits=$( { rg "${z[@]}" "${flags[@]}" -c "$p" "$dir" || true; } | count)
    found=$( { "$bin" grep "${flags[@]}" -c "$p" "$dir" || true; } | count)
    echo "-- ${flags[*]} '$p' (rg: $hits; dshs: $found)"
    printf '%-4s %7s %7s %6s | %7s %6s %6s | %7s %6s\n' run rg_c_s grep_c_s x_rg grep_s x_rg rss_MB json_s x_rg
    for r in $(seq 1 "$runs"); do
      settle_root "$dir"; rg_s=$(secs rg "${z[@]}" "${flags[@]}" -c "$p" "$dir")
      settle_root "$dir"; c_s=$(secs "$bin" grep "${flags[@]}" -c "$p" "$dir")
      settle_root "$dir"; read -r l_s l_k < <(measure "$bin" grep --color never "${flags[@]}" "$p" "$dir")
      settle_root "$dir"; j_s=$(secs "$bin" grep --format json "${flags[@]}" "$p" "$dir")
      printf '%-4s %7s %7s %6s | %7s %6s %6.1f | %7s %6s\n' "$r" "$rg_s" "$c_s" "$(ratio "$c_s" "$rg_s")" \
        "$l_s" "$(ratio "$l_s" "$rg_s")" "$(awk -v k="$l_k" 'BEGIN { print k * 1024 / 1e6 }')" \
        "$j_s" "$(ratio "$j_s" "$rg_s")"
    done
  done
done
