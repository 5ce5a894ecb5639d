#!/usr/bin/env bash
# Seed the fuzz corpora from testdata/. Each seed starts with the selector byte of
# dshs_fuzz::input: 0x07 = "the body is the whole log"; 0x00..0x04 = "prefix the header of
# version N" (seeded with the same log minus its own header line, so mutations start past it).
# Usage: fuzz/seed.sh            (writes fuzz/corpus/<target>/, existing files are kept)
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
echo "seeded: $(ls corpus/scan | wc -l) scan, $(ls corpus/repair | wc -l) repair inputs"
