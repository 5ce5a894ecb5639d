#!/usr/bin/env bash
# Regenerates the committed page of tests/export.rs's golden test after a deliberate change
# to the page (assets/export/, src/render/export.rs) or to what `export` puts in it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run -q -- export testdata/fixtures/zhengxuyu__snapshots__session__compaction-recovery__session.v4.concrete.jsonl \
  > testdata/export/compaction-recovery.v4.html
echo "wrote testdata/export/compaction-recovery.v4.html"
