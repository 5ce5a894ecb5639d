#!/usr/bin/env bash
# Two dshs builds against `rg -c`, paired run by run on the same files (not a timed test): for
# each pattern of benches/grep.sh and each round, `rg -c`, `BEFORE grep -c` and `AFTER grep -c`
# one after the other, each right after a `cat` of every file, with wall clock, CPU (user +
# system) and peak RSS from GNU time. The order of the two builds alternates round by round.
#
#   BEFORE=/work/bench-bin/dshs-main AFTER=target/release/dshs benches/grep-paired.sh [ROOT]
#
# Environment: RUNS (default 5) rounds per pattern; ROOT default /work/bench-data/grep-root/plain.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:-/work/bench-data/grep-root/plain}
runs=${RUNS:-5}
before=${BEFORE:?the build before}
after=${AFTER:-target/release/dshs}
z=(); case "$dir" in *zstd*) z=(-z) ;; esac
# shellcheck source=benches/lib.sh
source benches/lib.sh
# "SECS CPU MB" of one command, right after a read of every file.
timed() {
  settle_root "$dir"
  awk '{ printf "%s %.2f %.1f\n", $1, $2 + $3, $4 * 1024 / 1e6 }' < <(measure_cpu "$@")
}
echo "machine: $(nproc) vCPU, load $(cut -d' ' -f1-3 /proc/loadavg); root $dir"
for entry in "${grep_patterns[@]}"; do
  read -r -a flags <<< "${entry%%|*}"
  p=${entry#*|}
  same=$(cmp <("$before" grep "${flags[@]}" -c "$p" "$dir" 2>&1) <("$after" grep "${flags[@]}" -c "$p" "$dir" 2>&1) > /dev/null && echo same || echo DIFFERENT)
  echo "-- ${flags[*]} '$p' (output of the two builds: $same)"
  echo "run rg_s | before_s cpu_s rss_MB x_rg | after_s cpu_s rss_MB x_rg | after/before"
  for r in $(seq 1 "$runs"); do
    read -r rg_s _ _ < <(timed rg "${z[@]}" "${flags[@]}" -c "$p" "$dir")
    if [ $((r % 2)) = 1 ]; then
      read -r b_s b_c b_m < <(timed "$before" grep "${flags[@]}" -c "$p" "$dir")
      read -r a_s a_c a_m < <(timed "$after" grep "${flags[@]}" -c "$p" "$dir")
    else
      read -r a_s a_c a_m < <(timed "$after" grep "${flags[@]}" -c "$p" "$dir")
      read -r b_s b_c b_m < <(timed "$before" grep "${flags[@]}" -c "$p" "$dir")
    fi
    awk -v r="$r" -v g="$rg_s" -v bs="$b_s" -v bc="$b_c" -v bm="$b_m" -v as="$a_s" -v ac="$a_c" -v am="$a_m" \
      'BEGIN { printf "%d %.2f | %.2f %.2f %.1f %.2f | %.2f %.2f %.1f %.2f | %.2f\n", r, g, bs, bc, bm, bs / g, as, ac, am, as / g, as / bs }'
  done
done
