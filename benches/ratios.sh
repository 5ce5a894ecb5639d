#!/usr/bin/env bash
# Rounds of `validate -q`, `surface` and `derive --format ndjson` by one build on one log, each
# right after a read of the log (`settle`), output discarded: per round the wall-clock and CPU
# (user + system) ratios of `surface` and `derive` to `validate`, then their medians. Issue 23's
# goal for pathological surfaces is stated this way (within 1.5x of `validate`), and a ratio taken
# within a round cancels most of the shared VM's drift, which moves all three commands alike.
#
#   benches/ratios.sh BIN LOG [ROUNDS]    (ROUNDS defaults to 5)
#
# e.g. benches/ratios.sh target/release/dshs /tmp/path-1m.jsonl 10, on the log of
# `gen-log --version 3 --pathological 1000000,100000`.
set -euo pipefail
here=$(dirname "$0")
. "$here/lib.sh"
[ $# -ge 2 ] || { sed -n '2,11p' "$0"; exit 2; }
bin=$1 log=$2 rounds=${3:-5}
report=$(mktemp)
trap 'rm -f "$report" "$report.all"' EXIT
# "WALL CPU KIB" of one command.
timed() {
  settle "$log"
  /usr/bin/time -o "$report" -f '%e %U %S %M' "$bin" "$@" "$log" >/dev/null 2>&1 || true
  awk 'END { printf "%s %.2f %s", $1, $2 + $3, $4 }' "$report"
}
echo "machine: $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
printf '%-5s %-22s %-22s %-22s %s\n' round 'validate s/cpu/KiB' 'surface s/cpu/KiB' \
  'derive s/cpu/KiB' 'surface÷v wall cpu, derive÷v wall cpu'
for round in $(seq "$rounds"); do
  v=$(timed validate -q)
  s=$(timed surface)
  d=$(timed derive --format ndjson)
  echo "$round $v $s $d" | tee -a "$report.all" | awk '{
    printf "%-5s %-22s %-22s %-22s %.2f %.2f, %.2f %.2f\n", $1, $2 "/" $3 "/" $4, $5 "/" $6 "/" $7,
      $8 "/" $9 "/" $10, $5 / $2, $6 / $3, $8 / $2, $9 / $3 }'
done
# Medians of the four ratios over the rounds.
for col in '$5/$2' '$6/$3' '$8/$2' '$9/$3'; do
  awk "{ print $col }" "$report.all" | sort -n | awk '{ a[NR] = $1 } END {
    printf "%.2f ", (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
done | awk '{ printf "median: surface %s× wall, %s× cpu; derive %s× wall, %s× cpu\n", $1, $2, $3, $4 }'
echo "peak RSS: $(awk '{ for (i = 4; i <= 10; i += 3) if ($i > m) m = $i } END { print m }' "$report.all") KiB"
