#!/usr/bin/env bash
# Growth benchmark: `dshs validate` time and peak RSS on generated logs of 100 MB, 1 GB and
# 4 GB (formats 3 and 0), and validate/surface/derive on two pathological logs (a surface of
# 100,000 and of 1,000,000 nodes with 10,000 and 100,000 replacements spread over it). Memory
# should stay flat as the file grows; time should grow linearly.
#
#   benches/scale.sh [SIZES...]        e.g. benches/scale.sh 100M 1G 4G (the default)
#
# Environment: RUNS (default 2) runs per file; DATA (default bench-data) where the generated
# logs are cached (vN-SIZE.jsonl, path-100k.jsonl, path-1m.jsonl); FRESH=0 skips rewriting
# each log before timing it (see fresh in benches/lib.sh); NO_PATH=1 skips the pathological
# logs; NO_REJECTED=1 skips the rejected-replace logs (100,000 nodes and 1,000 replaces over all
# of them that the fold rejects, see benches/README.md; rej-none.jsonl is the same surface
# without them).
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=${*:-100M 1G 4G}
runs=${RUNS:-2}
data=${DATA:-bench-data}
cargo build --release --quiet --bin dshs --example gen-log
mkdir -p "$data"
bin=${BIN:-./target/release/dshs}
gen=./target/release/examples/gen-log

# shellcheck source=benches/lib.sh
source benches/lib.sh

# "SECS s, RSS MB" of one command.
measured() {
  measure "$@" | awk '{ printf "%s s, %.1f MB", $1, $2 * 1024 / 1e6 }'
}

echo "machine: $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(uname -sr)"
for v in 3 0; do
  for s in $sizes; do
    log=$data/v$v-$s.jsonl
    [ -s "$log" ] || "$gen" --version "$v" --size "$s" > "$log"
    fresh "$log"
    line="format $v, $s ($(stat -c %s "$log") bytes, $(($(wc -l < "$log") - 1)) lines): validate"
    for r in $(seq 1 "$runs"); do line="$line | $(measured "$bin" validate -q "$log")"; done
    echo "$line"
  done
done
if [ -z "${NO_PATH:-}" ]; then
  for spec in 100000,10000:path-100k 1000000,100000:path-1m; do
    log=$data/${spec#*:}.jsonl
    [ -s "$log" ] || "$gen" --version 3 --pathological "${spec%:*}" > "$log"
    fresh "$log"
    echo "pathological ${spec%:*} nodes,replaces ($(stat -c %s "$log") bytes):" \
      "validate $(measured "$bin" validate -q "$log")" \
      "| surface $(measured "$bin" surface "$log")" \
      "| derive --format ndjson $(measured "$bin" derive --format ndjson "$log")"
  done
fi
if [ -z "${NO_REJECTED:-}" ]; then
  for spec in 100000,0:rej-none 100000,1000,missing:rej-missing 100000,1000,reversed:rej-reversed; do
    log=$data/${spec#*:}.jsonl
    [ -s "$log" ] || "$gen" --version 3 --rejected-replaces "${spec%:*}" > "$log"
    fresh "$log"
    echo "rejected replaces ${spec%:*} ($(stat -c %s "$log") bytes): validate $(measured "$bin" validate -q "$log")"
  done
fi
