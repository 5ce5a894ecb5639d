#!/usr/bin/env python3
"""Writes hostile.v4.jsonl: the compaction-recovery fixture with every text a person or a
model wrote (texts, ids, tool names, arguments, titles, model names, cwd) carrying markup,
script, a javascript: URL, a comment end, U+2028, a lone surrogate and a terminal escape.
Equal strings stay equal, so the log still folds. Run from the repository root:
  python3 testdata/export/make-hostile.py"""
import json

SRC = "testdata/fixtures/zhengxuyu__snapshots__session__compaction-recovery__session.v4.concrete.jsonl"
OUT = "testdata/export/hostile.v4.jsonl"
EVIL = ('</script><script>alert(1)</script><img src=x onerror="alert(2)">'
        '<a href="javascript:alert(3)">x</a> --> <!-- \u2028\u2029 @@SURROGATE@@ \x1b[31mRED\x1b[0m &amp;')
KEYS = {"text", "name", "arguments", "id", "callId", "toolCallId", "compactionId", "model",
        "provider", "title", "cwd", "description"}


def taint(v, key=None):
    if isinstance(v, dict):
        return {k: taint(x, k) for k, x in v.items()}
    if isinstance(v, list):
        return [taint(x, key) for x in v]
    if isinstance(v, str) and key in KEYS:
        return v + EVIL
    return v


with open(SRC, encoding="utf-8") as f, open(OUT, "w", encoding="utf-8") as out:
    for line in f:
        row = json.loads(line)
        if row.get("type") == "request/header":
            row["data"]["header"]["tools"] = [{"name": "bash", "description": "Run a command",
                                               "parameters": {"type": "object", "title": "t"}}]
        row = taint(row)
        text = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
        out.write(text.replace("@@SURROGATE@@", "\\ud800") + "\n")
