#!/usr/bin/env bash
# Seed the fuzz corpora from testdata/. Each seed starts with the selector byte of
# dshs_fuzz::input: 0x07 = "the body is the whole log"; 0x00..0x04 = "prefix the header of
# version N" (seeded with the same log minus its own header line, so mutations start past it).
# Usage: fuzz/seed.sh            (writes fuzz/corpus/<target>/ for scan, repair, zstd, compact; existing files are kept)
set -euo pipefail
cd "$(dirname "$0")"
root=..
for target in scan repair; do
  out=corpus/$target
  mkdir -p "$out"
  find "$root/testdata" -type f \( -name '*.jsonl' -o -name '*.log' -o -name '*.bin' \) -size -256k -print0 |
    while IFS= read -r -d '' f; do
      name=$(echo "${f#"$root"/testdata/}" | tr '/' '_')
      { printf '\x07'; cat "$f"; } > "$out/raw_$name"
      v=$(head -c 4096 "$f" | head -n 1 | grep -o '"version":[0-4]\b' | head -n 1 | cut -d: -f2 || true)
      if [ -n "$v" ]; then
        { printf "\\x0$v"; tail -n +2 "$f"; } > "$out/v${v}_$name"
      fi
    done
done
# zstd: mode 2 (compress DSH-style, cut at the end) and 3 (plus a flipped byte) per version,
# and mode 0 (a header frame, then the body compressed as one frame) when zstd is installed.
mkdir -p corpus/zstd corpus/compact
find "$root/testdata" -type f -name '*.jsonl' -size -64k -print0 |
  while IFS= read -r -d '' f; do
    name=$(echo "${f#"$root"/testdata/}" | tr '/' '_')
    # compact: start and end picks (first node; second to fourth node), then the whole log.
    { printf '\x00\x00\x07'; cat "$f"; } > "corpus/compact/00_$name"
    { printf '\x01\x03\x07'; cat "$f"; } > "corpus/compact/13_$name"
    v=$(head -c 4096 "$f" | head -n 1 | grep -o '"version":[0-4]\b' | head -n 1 | cut -d: -f2 || true)
    [ -n "$v" ] || continue
    for mode in 2 3; do
      sel=$(printf '%02x' $(( (v << 2) | mode )))
      { printf "\\x$sel\x10\x02\xff\xff\x01"; tail -n +2 "$f"; } > "corpus/zstd/m${mode}_$name"
    done
    if command -v zstd > /dev/null; then
      sel=$(printf '%02x' $(( v << 2 )))
      { printf "\\x$sel"; tail -n +2 "$f" | zstd -q -c --check; } > "corpus/zstd/m0_$name"
    fi
  done
echo "seeded: $(ls corpus/scan | wc -l) scan, $(ls corpus/repair | wc -l) repair, $(ls corpus/zstd | wc -l) zstd, $(ls corpus/compact | wc -l) compact inputs"
