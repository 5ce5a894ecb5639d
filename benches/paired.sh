#!/usr/bin/env bash
# Paired runs of `validate -q` by two builds on the same log, alternating, each right after a
# read of the log (`settle`): wall time and peak RSS (GNU time) per run.
#
#   benches/paired.sh BEFORE AFTER LOG [RUNS]    (RUNS defaults to 5)
#
# BEFORE and AFTER are dshs binaries (keep a copy of the old build before rebuilding), LOG a
# plain or zstd log, e.g. the reference logs of shared/bench/gen.py --seed 1. ARGS replaces
# `validate -q` (e.g. ARGS="surface"); DSHS_THREADS and MIMALLOC_* pass through to both.
set -euo pipefail
here=$(dirname "$0")
. "$here/lib.sh"
[ $# -ge 3 ] || { sed -n '2,9p' "$0"; exit 2; }
before=$1 after=$2 log=$3 runs=${4:-5}
read -r -a args <<< "${ARGS:-validate -q}"
printf '%-4s %-7s %8s %10s\n' run build seconds 'peak KiB'
for run in $(seq "$runs"); do
  for build in before after; do
    bin=$before
    [ "$build" = after ] && bin=$after
    settle "$log"
    read -r secs kib < <(measure "$bin" "${args[@]}" "$log")
    printf '%-4s %-7s %8s %10s\n' "$run" "$build" "$secs" "$kib"
  done
done
