#!/usr/bin/env bash
# End-to-end benchmark, paired run by run: on the same file, time `wc -l`, `jq -c empty`,
# `dshs validate` (on its default parsing threads, and with DSHS_THREADS=1: one thread reads,
# parses and folds), `dshs surface` and `dshs derive --format ndjson` (output to /dev/null) with
# GNU time (wall clock and peak RSS), then print each run's throughput and ratios.
#
#   benches/run.sh [SIZE] [VERSIONS...]        e.g. benches/run.sh 1G 0 3
#
# Environment: RUNS (default 3) paired runs per file; DATA (default bench-data) where the
# generated logs are cached as vN-SIZE.jsonl (generated when missing); FRESH=0 skips rewriting
# each log before timing it (see fresh in benches/lib.sh), SETTLE=0 reading it once before each
# timed command (see settle); NO_JQ=1 skips jq (it needs ~20 s
# per GiB); ZSTD=1 also times validate and derive on a copy stored the way DSH stores logs
# (zstd frames; made with the zstd-log example), and `zstd -dc | validate -`.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-1G}
shift || true
versions=${*:-0 3}
runs=${RUNS:-3}
data=${DATA:-bench-data}
cargo build --release --quiet --bin dshs --example gen-log --example zstd-log
mkdir -p "$data"
bin=${BIN:-./target/release/dshs}

# shellcheck source=benches/lib.sh
source benches/lib.sh

echo "machine: $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(uname -sr)"
for v in $versions; do
  log=$data/v$v-$size.jsonl
  [ -s "$log" ] || ./target/release/examples/gen-log --version "$v" --size "$size" > "$log"
  bytes=$(stat -c %s "$log")
  mb() { awk -v b="$bytes" -v s="$1" 'BEGIN { if (s > 0) printf "%.0f", b / 1e6 / s; else print "-" }'; }
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
  fresh "$log"
  echo
  echo "== format v$v: $log, $bytes bytes ($(( bytes / 1048576 )) MiB)"
  printf '%-4s %7s %7s | %7s %7s %6s %6s %6s | %7s %6s %6s | %7s %6s | %7s %6s | %s\n' \
    run wc_s jq_s val_s MB/s xwc xjq rss_MB val1_s xjq rss_MB sur_s x_val der_s x_val "peak RSS MB (surface, derive)"
  for r in $(seq 1 "$runs"); do
    settle "$log"; read -r wc_s _ < <(measure wc -l "$log")
    if [ -n "${NO_JQ:-}" ]; then jq_s=0; else settle "$log"; read -r jq_s _ < <(measure jq -c empty "$log"); fi
    settle "$log"; read -r val_s val_k < <(measure "$bin" validate -q "$log")
    settle "$log"; read -r one_s one_k < <(DSHS_THREADS=1 measure "$bin" validate -q "$log")
    settle "$log"; read -r sur_s sur_k < <(measure "$bin" surface "$log")
    settle "$log"; read -r der_s der_k < <(measure "$bin" derive --format ndjson "$log")
    printf '%-4s %7s %7s | %7s %7s %6s %6s %6.1f | %7s %6s %6.1f | %7s %6s | %7s %6s | %.1f, %.1f\n' \
      "$r" "$wc_s" "$jq_s" "$val_s" "$(mb "$val_s")" "$(ratio "$wc_s" "$val_s")" \
      "$(ratio "$jq_s" "$val_s")" "$(awk -v k="$val_k" 'BEGIN { print k * 1024 / 1e6 }')" \
      "$one_s" "$(ratio "$jq_s" "$one_s")" "$(awk -v k="$one_k" 'BEGIN { print k * 1024 / 1e6 }')" \
      "$sur_s" "$(ratio "$sur_s" "$val_s")" "$der_s" "$(ratio "$der_s" "$val_s")" \
      "$(awk -v k="$sur_k" 'BEGIN { print k * 1024 / 1e6 }')" "$(awk -v k="$der_k" 'BEGIN { print k * 1024 / 1e6 }')"
  done
  if [ -n "${ZSTD:-}" ]; then
    # The same log as DSH stores it: zstd frames with checksums, the header alone in frame 1,
    # then batches of 16 lines. MB/s is of the decompressed (plain) bytes.
    zlog=$log.zstd
    [ -s "$zlog" ] || ./target/release/examples/zstd-log --batch 16 "$log" "$zlog"
    fresh "$zlog"
    zbytes=$(stat -c %s "$zlog")
    for r in $(seq 1 "$runs"); do
      settle "$zlog"; read -r z_s z_k < <(measure "$bin" validate -q "$zlog")
      settle "$zlog"; read -r zd_s zd_k < <(measure "$bin" derive --format ndjson "$zlog")
      settle "$zlog"; read -r p_s p_k < <(measure bash -c "zstd -dcq '$zlog' | '$bin' validate -q -")
      echo "zstd run $r ($zbytes bytes compressed): validate FILE $z_s s = $(mb "$z_s") MB/s, $(awk -v k="$z_k" 'BEGIN { print k * 1024 / 1e6 }') MB RSS; derive ndjson $zd_s s; zstd -dc | validate - $p_s s = $(mb "$p_s") MB/s"
    done
  fi
done
echo
echo "xwc = validate time / wc -l time as a speed ratio (wc_s / val_s); xjq = jq_s / val_s (how many times faster than jq);"
echo "x_val = surface or derive time / validate time. MB = 10^6 bytes."
