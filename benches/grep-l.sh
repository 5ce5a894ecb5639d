#!/usr/bin/env bash
# `dshs grep -l` against `rg -l` (and optionally an earlier dshs build) over the storage roots
# of benches/grep-root.sh, paired run by run, each command right after a `cat` of every file.
# Not a timed test.
#
#   benches/grep-l.sh [ROOT]     default /work/bench-data/grep-root
#
# Environment: RUNS (default 3); BIN the dshs binary (default target/release/dshs); BEFORE a
# second dshs binary timed in the same rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
source benches/lib.sh
grep_bench_setup "${1:-}" 3
echo "machine: $(nproc) vCPU, load $(cut -d' ' -f1-3 /proc/loadavg); rg: $(rg --version | head -n 1)"
for sub in plain zstd; do
  dir=$root/$sub
  [ -d "$dir" ] || continue
  z=(); [ "$sub" = zstd ] && z=(-z)
  echo "== $dir"
  for entry in '-F|src/main.rs cargo' '-F|cargo naïve harness log' '|harness \w+ seq turn step' \
    '-F|compaction error fixed value config'; do
    read -r -a flags <<< "${entry%%|*}"
    p=${entry#*|}
    listed=$("$bin" grep "${flags[@]}" -l "$p" "$dir" | wc -l || true)
    echo "-- ${flags[*]} '$p': $listed sessions (rg: $(rg "${z[@]}" "${flags[@]}" -l "$p" "$dir" | wc -l || true))"
    for r in $(seq 1 "$runs"); do
      settle_root "$dir"; a=$(measure rg "${z[@]}" "${flags[@]}" -l "$p" "$dir")
      b=-
      if [ -n "${BEFORE:-}" ]; then settle_root "$dir"; b=$(measure "$BEFORE" grep "${flags[@]}" -l "$p" "$dir"); fi
      settle_root "$dir"; c=$(measure "$bin" grep "${flags[@]}" -l "$p" "$dir")
      echo "run $r: rg -l $a | before $b | dshs grep -l $c   (seconds, peak KiB)"
    done
  done
done
