#!/usr/bin/env bash
# `dshs usage` against `rg -c '"usage"'` and `dshs validate -q` over the same storage roots,
# paired run by run (not a timed test): the three commands one after the other on the same
# files, each after a read of every file (same page-cache state), with wall clock and peak
# RSS from GNU time. rg only counts lines holding `"usage"` (the floor of any tool that reads
# every byte); validate checks every rule (what a report must not cost).
#
#   benches/usage.sh [ROOT]             default /work/bench-data/grep-root (benches/grep-root.sh)
#
# Environment: RUNS (default 3) paired runs; BIN the dshs binary (default target/release/dshs);
# BASE another dshs binary (the build before a change) whose `usage` is timed in the same
# rounds, and whose JSON report must be the same; ZSTD=0 skips the zstd root (rg runs with -z
# there: one zstd process per file), where `zstd -dc` of every file, as many at once as there
# are cores (decompression alone, which both dshs commands pay), is timed too.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=benches/lib.sh
source benches/lib.sh
grep_bench_setup "${1:-}" 3
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k * 1024 / 1e6 }'; }

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
  "$bin" usage --no-cost --format json "$dir" | tail -n 1
  if [ -n "${BASE:-}" ]; then
    cmp <("$BASE" usage --by session --format json "$dir" 2>&1) \
      <("$bin" usage --by session --format json "$dir" 2>&1) \
      || { echo "BASE and BIN report differently on $dir"; exit 1; }
  fi
  printf '%-4s %7s | %8s %6s %7s | %10s %6s %7s | %6s' run rg_s usage_s x_rg rss_MB validate_s x_rg rss_MB x_val
  [ -n "${BASE:-}" ] && printf ' | %7s %6s' base_s x_base
  [ "$sub" = zstd ] && printf ' | %7s %6s' unzstd_s x_val
  echo
  for r in $(seq 1 "$runs"); do
    settle_root "$dir"; read -r rg_s _ < <(measure rg "${z[@]}" -c '"usage"' "$dir")
    if [ -n "${BASE:-}" ]; then settle_root "$dir"; read -r b_s _ < <(measure "$BASE" usage "$dir"); fi
    settle_root "$dir"; read -r u_s u_k < <(measure "$bin" usage "$dir")
    settle_root "$dir"; read -r v_s v_k < <(measure "$bin" validate -q "$dir")
    printf '%-4s %7s | %8s %6s %7s | %10s %6s %7s | %6s' "$r" "$rg_s" \
      "$u_s" "$(ratio "$u_s" "$rg_s")" "$(mb "$u_k")" \
      "$v_s" "$(ratio "$v_s" "$rg_s")" "$(mb "$v_k")" "$(ratio "$u_s" "$v_s")"
    [ -n "${BASE:-}" ] && printf ' | %7s %6s' "$b_s" "$(ratio "$u_s" "$b_s")"
    if [ "$sub" = zstd ]; then
      settle_root "$dir"
      read -r d_s _ < <(measure sh -c 'find "$1" -type f -print0 | xargs -0 -P "$(nproc)" -n 1 zstd -dcq > /dev/null' sh "$dir")
      printf ' | %7s %6s' "$d_s" "$(ratio "$d_s" "$v_s")"
    fi
    echo
  done
done
