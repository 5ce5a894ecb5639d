#!/usr/bin/env bash
# Compare two dshs builds command by command: every read-only command, and the dry runs of the
# writers, on every log under testdata/ (plain, and a zstd copy made with the zstd-log
# example), with stdout, stderr and the exit status of each run compared byte for byte.
#
#   scripts/compare-builds.sh BEFORE AFTER [LOG...]
#
# BEFORE and AFTER are dshs binaries (debug builds: `compact --dry-run` mints fixed ids only
# there, through DSHS_TEST_MINT). Prints one line per difference and a count; exits 1 when
# anything differs. Used to show that a change of structure changes no behaviour.
set -euo pipefail
cd "$(dirname "$0")/.."
before=$1 after=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ $# -gt 0 ]; then
  logs=("$@")
else
  mapfile -t logs < <(find testdata -name '*.jsonl' -type f | sort)
  # zstd copies of the plain logs, as DSH stores them (16 lines per frame).
  cargo build -q --example zstd-log
  mkdir -p "$work/zstd"
  for log in "${logs[@]}"; do
    z="$work/zstd/$(echo "$log" | tr / _).zstd"
    ./target/debug/examples/zstd-log --batch 16 "$log" "$z" 2>/dev/null && logs+=("$z")
  done
fi

commands=(
  "validate"
  "validate --format json"
  "surface"
  "surface --format json"
  "surface --at 5"
  "derive"
  "derive --format ndjson"
  "derive --format markdown"
  "show"
  "show --format json"
  "stats"
  "stats --format json"
  "repair --dry-run"
)

run() { # BIN LOG ARGS... -> writes $work/out.N
  local bin=$1 log=$2 tag=$3
  shift 3
  # shellcheck disable=SC2086
  (TZ=UTC DSHS_TEST_MINT=1700000000000 COLUMNS=100 "$bin" "$@" "$log" >"$work/$tag.stdout" 2>"$work/$tag.stderr"; echo $? >"$work/$tag.status") || true
}

diffs=0 runs=0
for log in "${logs[@]}"; do
  cmds=("${commands[@]}")
  # A compaction of the first two surface nodes the before build shows, if any.
  nodes=$(TZ=UTC "$before" surface --format json "$log" 2>/dev/null | python3 -c 'import json,sys
try:
    n=[x["seq"] for x in json.load(sys.stdin)["nodes"]]
    print(*n[1:3]) if len(n) >= 3 else None
except Exception:
    pass' || true)
  if [ -n "$nodes" ]; then
    read -r s e <<<"$nodes"
    cmds+=("compact --dry-run --start $s --end $e --summary compared")
  fi
  for cmd in "${cmds[@]}"; do
    # shellcheck disable=SC2086
    run "$before" "$log" b $cmd
    # shellcheck disable=SC2086
    run "$after" "$log" a $cmd
    runs=$((runs + 1))
    for part in stdout stderr status; do
      if ! cmp -s "$work/b.$part" "$work/a.$part"; then
        diffs=$((diffs + 1))
        echo "DIFF $part: dshs $cmd $log"
        diff <(head -c 2000 "$work/b.$part") <(head -c 2000 "$work/a.$part") | head -8 || true
      fi
    done
  done
done
echo "$runs runs over ${#logs[@]} logs, $diffs differences"
[ "$diffs" -eq 0 ]
