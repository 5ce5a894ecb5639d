#!/usr/bin/env bash
# `dshs export -o` by two builds on the same log, paired and alternating, each run right after
# a read of the log (`settle`), with `validate -q` and `derive` of the same log by the AFTER
# build as the floor (the fold every export starts with; derive also reads every surface
# message back): wall clock, user and system CPU, peak RSS (GNU time), and MB/s of the log
# by wall and by CPU (user + system). Not a timed test.
#
#   benches/export.sh BEFORE AFTER LOG [RUNS]    (RUNS defaults to 3)
#
# BEFORE and AFTER are dshs binaries (keep a copy of the old build before rebuilding), LOG a
# log, e.g. the format-3 reference logs of shared/bench/gen.py --version 3 --seed 1. The
# pages go to OUT (default /tmp/dshs-export-bench), and the two builds' pages are compared
# byte for byte after every pair. DSHS_THREADS passes through.
set -euo pipefail
here=$(dirname "$0")
. "$here/lib.sh"
[ $# -ge 3 ] || { sed -n '2,13p' "$0"; exit 2; }
before=$1 after=$2 log=$3 runs=${4:-3}
out=${OUT:-/tmp/dshs-export-bench}
mkdir -p "$out"
bytes=$(stat -c %s "$log")

row() {
  awk -v run="$1" -v what="$2" -v w="$3" -v u="$4" -v s="$5" -v k="$6" -v b="$bytes" 'BEGIN {
    printf "%-4s %-9s %7.2f %6.2f %6.2f %8.1f %9.0f %9.0f\n", run, what, w, u, s, k / 1024,
      b / 1e6 / w, b / 1e6 / (u + s) }'
}

echo "machine: $(nproc) vCPU, load $(cut -d' ' -f1-3 /proc/loadavg); log $log, $bytes bytes"
printf '%-4s %-9s %7s %6s %6s %8s %9s %9s\n' run build wall_s user_s sys_s rss_MiB MB/s_wall MB/s_cpu
for run in $(seq "$runs"); do
  for build in before after; do
    bin=$before
    [ "$build" = after ] && bin=$after
    settle "$log"
    read -r w u s k < <(measure_cpu "$bin" export -o "$out/$build.html" "$log")
    row "$run" "$build" "$w" "$u" "$s" "$k"
  done
  cmp -s "$out/before.html" "$out/after.html" || echo "run $run: the pages differ"
  for floor in validate derive; do
    settle "$log"
    case $floor in
      validate) read -r w u s k < <(measure_cpu "$after" validate -q "$log") ;;
      derive) read -r w u s k < <(measure_cpu "$after" derive "$log") ;;
    esac
    row "$run" "$floor" "$w" "$u" "$s" "$k"
  done
done
echo "page: $(stat -c %s "$out/after.html") bytes"
