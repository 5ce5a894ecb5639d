#!/usr/bin/env python3
"""`--follow` latency and cost: `dshs show -f` follows a log while this script appends one
event every INTERVAL ms for SECONDS; it reports the delay from each write to the printed line
(median, 99th percentile), the CPU time per appended event, the CPU time while idle, and the
follower's peak RSS. Linux only (reads /proc). The log is appended to: use a copy.

    cargo run --release --example gen-log -- --version 3 --size 1G > /tmp/big.jsonl
    benches/follow_latency.py --dshs target/release/dshs --log /tmp/big.jsonl [--poll MS]
"""
import argparse, os, re, signal, subprocess, threading, time

p = argparse.ArgumentParser()
p.add_argument("--dshs", default="target/release/dshs")
p.add_argument("--log", required=True)
p.add_argument("--poll", type=int)
p.add_argument("--seconds", type=int, default=30)
p.add_argument("--interval-ms", type=int, default=10)
p.add_argument("--idle", type=int, default=30)
a = p.parse_args()

SEQ = re.compile(rb'"seq":(\d+)')

def last_seq(path):
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - (1 << 20)))
        tail = f.read()
    for line in reversed(tail.split(b"\n")):
        m = SEQ.search(line)
        if m:
            return int(m.group(1))
    raise SystemExit("no seq near the end of the log")

def cpu(pid):
    """User plus system CPU seconds of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024

first = last_seq(a.log) + 1
# Only the appended events are printed: the initial read costs the fold, not output.
cmd = [a.dshs, "show", "--format", "json", "--type", "session/title", "-f"]
if a.poll:
    cmd += ["--poll", str(a.poll)]
child = subprocess.Popen(cmd + [a.log], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
seen = {}

def read():
    for line in child.stdout:
        m = SEQ.search(line)
        if m and int(m.group(1)) >= first:
            seen[int(m.group(1))] = time.monotonic()

threading.Thread(target=read, daemon=True).start()
log = open(a.log, "ab", buffering=0)

def event(seq, i):
    return b'{"type":"session/title","seq":%d,"time":%d,"data":{"title":"bench %d"}}\n' % (
        seq, 1_800_000_000_000 + i, i)

# The first appended event marks the end of the initial read.
start = time.monotonic()
log.write(event(first, 0))
while first not in seen:
    time.sleep(0.05)
print(f"initial read: {time.monotonic() - start:.1f} s, CPU {cpu(child.pid):.1f} s")

before = cpu(child.pid)
time.sleep(a.idle)
print(f"idle {a.idle} s: CPU {(cpu(child.pid) - before) * 1e3:.0f} ms")

n = a.seconds * 1000 // a.interval_ms
written = []
before = cpu(child.pid)
t0 = time.monotonic()
for i in range(n):
    due = t0 + i * a.interval_ms / 1e3
    wait = due - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    log.write(event(first + 1 + i, i + 1))
    written.append(time.monotonic())
deadline = time.monotonic() + 30
while len(seen) < n + 1 and time.monotonic() < deadline:
    time.sleep(0.02)
busy = cpu(child.pid) - before
rss = peak_rss_mib(child.pid)
child.send_signal(signal.SIGINT)
child.wait(timeout=60)
delays = sorted(seen[first + 1 + i] - written[i] for i in range(n) if first + 1 + i in seen)
print(f"events appended: {n}, printed: {len(delays)}")
if delays:
    pick = lambda q: delays[min(len(delays) - 1, round((len(delays) - 1) * q))] * 1e3
    print(f"delay write -> printed: median {pick(0.5):.1f} ms, p99 {pick(0.99):.1f} ms, max {delays[-1] * 1e3:.1f} ms")
print(f"CPU while appending: {busy * 1e3:.0f} ms in all, {busy * 1e3 / n:.3f} ms per event")
print(f"peak RSS: {rss:.0f} MiB")
