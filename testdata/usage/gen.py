#!/usr/bin/env python3
"""Writes the logs of testdata/usage/ (see testdata/README.md); run from the repository root."""
import datetime, json, os

def ms(s):
    return int(datetime.datetime.fromisoformat(s.replace('Z', '+00:00')).timestamp() * 1000)

def dump(e):
    return json.dumps(e, separators=(',', ':'))

class Log:
    def __init__(self, version, id, **header):
        h = {"type": "session", "version": version, "id": id, "createdAt": 0}
        if version >= 2:
            h["isSeeded"] = header.pop("isSeeded", False)
        h.update(header)
        h.setdefault("delegationDepth", 0)
        self.v, self.lines, self.seq = version, [dump(h)], 0

    def ev(self, ty, time, data, **extra):
        e = {"type": ty, "seq": self.seq, "time": time, "data": data, **extra}
        self.seq += 1
        self.lines.append(dump(e))
        return self

    def turn(self, time, turn, steps, model="deepseek-v4-flash"):
        """A turn: a user message, then one step per usage tuple (input, output[, cache read])."""
        self.ev("turn/start", time, {"turn": turn})
        self.ev("user/message", time, {"id": f"u{self.seq}", "role": "user", "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}}, surfaceOp="append")
        for i, u in enumerate(steps, 1):
            m = model if isinstance(u, tuple) else u["model"]
            u = u if isinstance(u, tuple) else u["usage"]
            t = time + i * 1000
            self.ev("step/start", t, {"turn": turn, "step": i})
            self.message(t, turn, i, u, m)
            self.ev("step/end", t, {"turn": turn, "step": i})
        self.ev("turn/end", time + 60000, {"turn": turn, "reason": {"kind": "completed"}})
        return self

    def message(self, time, turn, step, u, model="deepseek-v4-flash"):
        usage = {"inputTokens": u[0], "outputTokens": u[1]}
        if len(u) > 2:
            usage["cacheReadTokens"] = u[2]
        d = {"turn": turn, "step": step, "message": {"id": f"m{self.seq}", "role": "assistant", "content": [{"type": "text", "text": "ok"}], "source": {"kind": "model", "provider": "deepseek-official", "model": model}}, "usage": usage}
        if self.v >= 2:
            d["stream"] = [{"type": "chunk", "time": time, "chunk": {"type": "usage", "usage": usage}}, {"type": "chunk", "time": time, "chunk": {"type": "finish", "reason": {"kind": "stop"}}}]
        return self.ev("assistant/message", time, d, surfaceOp="append")

    def write(self, path, tail=""):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("\n".join(self.lines) + "\n" + tail)

D = "testdata/usage/"
T = ms("2026-11-30T10:00:00Z")

# A v4 fork child: its inherited prefix (before the inherited end-seed) holds the parent's
# call of 1000/100 tokens, which is not the child's; the child's own call is 7/3.
child = Log(4, "usage-child", isSeeded=True, parentSession="usage-parent").turn(T, 1, [(1000, 100)])
child.ev("session/end-seed", T + 70000, {"inherited": True}).turn(T + 80000, 2, [(7, 3)])
child.write(D + "seeded-child.v4.jsonl")

# A crash tail: turn 1 committed (1/1); in turn 2 a line is damaged and the call after it
# (5/5) is a crash tail, no turn/end follows; the torn final line (100/100) is not an event.
crash = Log(4, "usage-crash").turn(T, 1, [(1, 1)])
crash.ev("turn/start", T + 70000, {"turn": 2}).ev("step/start", T + 70000, {"turn": 2, "step": 1})
crash.lines.append('{"type":"step/end","seq":8,"time"')
crash.seq += 1
crash.message(T + 71000, 2, 1, (5, 5))
torn = Log(4, "x")
torn.seq = crash.seq
torn.message(T + 72000, 2, 2, (100, 100))
crash.write(D + "crash-tail.v4.jsonl", torn.lines[1][:-5])

# A model without a price next to a priced one (2026-05-01: v4-flash 0.14 per 1M input).
P = ms("2026-05-01T08:00:00Z")
Log(4, "usage-unpriced").turn(P, 1, [(1000000, 0), {"model": "my-own-model", "usage": (500, 50)}]).write(D + "unpriced.v4.jsonl")

# A v0 call streamed across midnight in +09:00: usage chunk 23:59:50 local, finish 23:59:54,
# message (which concludes the call) 00:00:05 on 2026-12-01 local (2026-11-30 15:00:05 UTC).
M = ms("2026-11-30T14:59:50Z")
mid = Log(0, "usage-midnight")
mid.ev("turn/start", M - 5000, {"turn": 1})
mid.ev("user/message", M - 5000, {"id": "u1", "role": "user", "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}}, surfaceOp="append")
mid.ev("request/header", M - 4000, {"header": {"config": {"provider": "deepseek-official", "model": "deepseek-v4-flash"}}, "reason": "initial"})
mid.ev("step/start", M - 3000, {"turn": 1, "step": 1})
mid.ev("assistant/chunk", M, {"turn": 1, "step": 1, "chunk": {"type": "usage", "usage": {"inputTokens": 40, "outputTokens": 2}}})
mid.ev("assistant/chunk", M + 4000, {"turn": 1, "step": 1, "chunk": {"type": "finish", "reason": {"kind": "stop"}}})
mid.message(M + 15000, 1, 1, (40, 2))
mid.ev("step/end", M + 15000, {"turn": 1, "step": 1})
mid.ev("turn/end", M + 15000, {"turn": 1, "reason": {"kind": "completed"}})
mid.write(D + "midnight.v0.jsonl")

# The 2026-04-26 12:15 UTC price change: a call on each side, 1M input + 1M cache read each:
# 0.14 + 0.028 = 0.168 before, 0.14 + 0.0028 = 0.1428 after.
C = ms("2026-04-26T12:13:00Z")
Log(4, "usage-price-change").turn(C, 1, [(1000000, 0, 1000000)]).turn(C + 180000, 2, [(1000000, 0, 1000000)]).write(D + "price-change.v4.jsonl")

# A storage root: a session directory with two generations (v0 before a migration: 10/1; v4
# after: the same call and one more, 20/2), and another session (3/3).
G = ms("2026-11-29T09:00:00Z")
Log(0, "usage-two-gens").turn(G, 1, [(10, 1)]).write(D + "root/--proj--/two-gens/session.jsonl")
Log(4, "usage-two-gens").turn(G, 1, [(10, 1)]).turn(G + 100000, 2, [(20, 2)]).write(D + "root/--proj--/two-gens/session.v4.jsonl")
Log(4, "usage-other").turn(T, 1, [(3, 3)]).write(D + "root/--proj--/other/session.v4.jsonl")
