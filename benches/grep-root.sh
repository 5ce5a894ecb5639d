#!/usr/bin/env bash
# Generate the storage roots `dshs grep` is benchmarked on (benches/grep.sh), with the bundled
# generator: ROOT/plain holds 64 plain sessions (formats 0-4 in turn, 4-36 MiB each, about
# 1.3 GB in all), ROOT/zstd 24 sessions stored as DSH stores them (zstd frames, 8-23 MiB of
# plaintext each). Each root has DSH's layout: <root>/--workspace-bench--/bench-<seed>/
# session[.vN].jsonl[.zstd] (the generator's logs have cwd /workspace/bench, id bench-<seed>).
# Sessions already there are kept.
#
#   benches/grep-root.sh [ROOT]        default /work/bench-data/grep-root
set -euo pipefail
cd "$(dirname "$0")/.."
root=${1:-/work/bench-data/grep-root}
cargo build --release --quiet --example gen-log --example zstd-log
gen=./target/release/examples/gen-log
zst=./target/release/examples/zstd-log

name() { # version -> canonical generation file name
  if [ "$1" = 0 ]; then echo session.jsonl; else echo "session.v$1.jsonl"; fi
}

for i in $(seq 1 64); do
  seed=$((1000 + i)); v=$((i % 5)); mib=$((4 + (i * 7919) % 33))
  dir=$root/plain/--workspace-bench--/bench-$seed
  file=$dir/$(name "$v")
  [ -s "$file" ] && continue
  mkdir -p "$dir"
  "$gen" --version "$v" --size "${mib}M" --seed "$seed" > "$file.tmp" 2>/dev/null
  mv "$file.tmp" "$file"
done

for i in $(seq 1 24); do
  seed=$((2000 + i)); v=$((i % 5)); mib=$((8 + (i * 104729) % 16))
  dir=$root/zstd/--workspace-bench--/bench-$seed
  file=$dir/$(name "$v").zstd
  [ -s "$file" ] && continue
  mkdir -p "$dir"
  "$gen" --version "$v" --size "${mib}M" --seed "$seed" > "$dir/plain.tmp" 2>/dev/null
  "$zst" --batch 16 "$dir/plain.tmp" "$file.tmp"
  rm "$dir/plain.tmp"
  mv "$file.tmp" "$file"
done

du -sh "$root/plain" "$root/zstd"
