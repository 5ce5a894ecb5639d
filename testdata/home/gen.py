#!/usr/bin/env python3
"""Regenerate the storage root under testdata/home (the README's `ls`, zstd and session
directory examples). Frames as DSH's JSONL backend writes them (FORMAT.md §3.3): the header
line alone in frame 1, then one frame per append (here: per line), each with a checksum.
Needs the `zstd` command. Run from the repository root: python3 testdata/home/gen.py"""
import json
import os
import shutil
import subprocess

# DSH's layout (FORMAT.md §2.1): <root>/--<project key of cwd>--/<encoded id>/session[.vN].jsonl[.zstd]
ROOT = "testdata/home/.dsh/sessions/--home-ana-shop--"


def frame(data: bytes) -> bytes:
    return subprocess.run(["zstd", "-q", "-c", "--check", "--no-content-size", "-3"],
                          input=data, stdout=subprocess.PIPE, check=True).stdout


def log(path: str, session_id: str) -> list[bytes]:
    """The lines of a sample log, its header naming `session_id` in /home/ana/shop."""
    with open(path, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["id"] = session_id
    header["cwd"] = "/home/ana/shop"
    lines[0] = json.dumps(header, separators=(",", ":")).encode() + b"\n"
    return lines


def frames(lines: list[bytes]) -> list[bytes]:
    return [frame(line) for line in lines]


def write(rel: str, data: bytes) -> None:
    path = os.path.join(ROOT, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


shutil.rmtree("testdata/home/.dsh", ignore_errors=True)
# A plain log cut by a crash (torn final line, open turn).
write("demo-crashed/session.v3.jsonl", b"".join(log("testdata/sample/crashed.v3.jsonl", "demo-crashed")))
# The same session compressed; the crash cut the last frame short.
fs = frames(log("testdata/sample/crashed.v3.jsonl", "demo-zstd"))
write("demo-zstd/session.v3.jsonl.zstd", b"".join(fs[:-1]) + fs[-1][: len(fs[-1]) // 2])
# A v4 log whose frame 5 was damaged on disk (a flipped byte: the checksum fails).
fs = frames(log("testdata/sample/session.v4.jsonl", "demo-damaged"))
bad = bytearray(fs[4])
bad[len(bad) // 2] ^= 0x5A
write("demo-damaged/session.v4.jsonl.zstd", b"".join(fs[:4]) + bytes(bad) + b"".join(fs[5:]))
# Two generations; the newest (v3) is the one read.
write("demo-upgraded/session.jsonl.zstd", b"".join(frames(log("testdata/sample/warn.v2.jsonl", "demo-upgraded"))))
write("demo-upgraded/session.v3.jsonl.zstd", b"".join(frames(log("testdata/sample/session.v4.jsonl".replace("session.v4", "crashed.v3"), "demo-upgraded")[:-1])))
