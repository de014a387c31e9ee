#!/usr/bin/env python3
"""Peer C of the cycled comparison harness: the asyncio sketch of the tick design.

Stdlib only. Same semantics as the Go peers as far as asyncio allows: five tiers run in
order; inside a tier every admitted module runs as its own task (create_task per module)
and the tier waits for all of them (gather per tier); each attempt runs under
asyncio.wait_for with the time left in the tier's budget (wait_for per attempt); transient
failures are retried with exponential backoff while attempts and time remain; a
tick-granular breaker per module; last-known-good values in a dict, served stale (or
nothing, expired) for a module that produced no value; a summary per tick kept in a
bounded history.

What the sketch cannot do: abandon a module that ignores cancellation. wait_for cancels the
attempt at the deadline and then waits until the task has actually finished (Python 3.11:
_cancel_and_wait), and gather waits for every task, so a module that swallows
CancelledError holds the whole tier past its budget, and its late value is even returned
as a success.

Driven by the Go harness (bench/cmd/compare) over stdin/stdout, one JSON object per line:

    python3 sketch.py serve        # read {"cmd": ...} lines, answer one JSON line each

or run once from the command line:

    python3 sketch.py tickcost --n 500 [--failing | --open] [--min-ticks 20] [--max-time 1.0]
    python3 sketch.py deadline [--ticks 10] [--gap-ms 5]
"""

import argparse
import asyncio
import collections
import json
import random
import sys
import time

TTL = 5.0


class TransientError(Exception):
    """A transient fault: retried."""


class Breaker:
    """Tick-granular breaker: opens after `threshold` consecutive failed ticks."""

    __slots__ = ("state", "fails", "succ", "probing", "opened_at", "threshold", "successes", "cooldown")

    def __init__(self, threshold, cooldown, successes):
        self.state = "closed"
        self.fails = 0
        self.succ = 0
        self.probing = False
        self.opened_at = 0.0
        self.threshold = threshold
        self.successes = successes
        self.cooldown = cooldown

    def acquire(self, now):
        if self.state == "closed":
            return True
        if self.state == "open":
            if now - self.opened_at < self.cooldown:
                return False
            self.state, self.succ = "half_open", 0
        if self.probing:
            return False
        self.probing = True
        return True

    def success(self):
        self.fails = 0
        if self.state == "half_open":
            self.probing = False
            self.succ += 1
            if self.succ >= self.successes:
                self.state = "closed"

    def failure(self, now):
        self.fails += 1
        if self.state == "half_open" or self.fails >= self.threshold:
            self.state, self.opened_at, self.probing = "open", now, False


class Tier:
    __slots__ = ("name", "budget", "max_attempts", "base", "factor", "max_delay", "jitter",
                 "threshold", "cooldown", "successes")

    def __init__(self, name, budget, max_attempts=1, base=0.01, factor=2.0, max_delay=0.1, jitter=0.0,
                 threshold=1 << 30, cooldown=30.0, successes=1):
        self.name, self.budget, self.max_attempts = name, budget, max_attempts
        self.base, self.factor, self.max_delay, self.jitter = base, factor, max_delay, jitter
        self.threshold, self.cooldown, self.successes = threshold, cooldown, successes

    def delay(self, n):
        d = min(self.base * self.factor ** (n - 1), self.max_delay)
        if self.jitter > 0:
            d += d * self.jitter * (2 * random.random() - 1)
        return max(d, 0.0)


class Module:
    __slots__ = ("name", "tier", "fn", "key", "breaker")

    def __init__(self, name, tier, fn, t):
        self.name, self.tier, self.fn, self.key = name, tier, fn, name + ".result"
        self.breaker = Breaker(t.threshold, t.cooldown, t.successes)


class Engine:
    def __init__(self, tiers, modules, history=16):
        self.tiers = tiers
        self.by_tier = [[] for _ in tiers]
        for m in modules:
            self.by_tier[m.tier].append(m)
        self.last_good = {}
        self.history = collections.deque(maxlen=history)
        self.tick_id = 0

    async def run_module(self, m, t, deadline, loop):
        start = loop.time()
        attempts = 0
        exhausted = False
        err = None
        kind = ""
        while True:
            attempts += 1
            left = deadline - loop.time()
            if left <= 0:
                err, kind, exhausted = "deadline exceeded", "transient", True
                break
            try:
                v = await asyncio.wait_for(m.fn(), left)
                return ("ok" if attempts == 1 else "retried", v, attempts, start, loop.time(), "", "", exhausted)
            except asyncio.TimeoutError:
                err, kind, exhausted = "deadline exceeded", "transient", True
                break
            except TransientError as e:
                err, kind = str(e), "transient"
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a bug in a module
                err, kind = repr(e), "internal"
                break
            if attempts >= t.max_attempts:
                break
            d = t.delay(attempts)
            if d >= deadline - loop.time():
                exhausted = True
                break
            await asyncio.sleep(d)
        return ("failed", None, attempts, start, loop.time(), kind, err, exhausted)

    def fallback(self, s, line, m, now):
        e = self.last_good.get(m.key)
        if e is not None and now - e[1] < TTL:
            line["served"] = {"key": m.key, "source": "last_good", "stale": True, "age_ms": (now - e[1]) * 1e3}
            s["degraded_keys"].append(m.key)
        else:
            line["served"] = {"key": m.key, "source": "none", "stale": False, "expired": True}
            s["degraded_keys"].append(m.key + " (expired)")

    async def tick(self):
        loop = asyncio.get_running_loop()
        self.tick_id += 1
        s = {"tick_id": self.tick_id, "started_at": time.time(), "tiers": [], "modules": [],
             "degraded_keys": [], "retry_counts": {}}
        for ti, t in enumerate(self.tiers):
            t0 = loop.time()
            deadline = t0 + t.budget
            mods = self.by_tier[ti]
            tasks = []
            admitted = []
            for m in mods:
                if m.breaker.acquire(t0):
                    tasks.append(asyncio.create_task(self.run_module(m, t, deadline, loop)))
                    admitted.append(True)
                else:
                    admitted.append(False)
            results = await asyncio.gather(*tasks)
            t1 = loop.time()
            status = "ok"
            exhausted_tier = False
            k = 0
            for j, m in enumerate(mods):
                line = {"name": m.name, "tier": t.name}
                if not admitted[j]:
                    line["status"] = "open"
                    self.fallback(s, line, m, t1)
                else:
                    st, v, attempts, start, end, kind, err, exhausted = results[k]
                    k += 1
                    exhausted_tier = exhausted_tier or exhausted
                    line.update(status=st, attempts=attempts, latency_ms=(end - start) * 1e3, fault_kind=kind, error=err)
                    if attempts > 1:
                        s["retry_counts"][m.name] = attempts - 1
                    if st in ("ok", "retried"):
                        m.breaker.success()
                        self.last_good[m.key] = (v, end, self.tick_id)
                        line["served"] = {"key": m.key, "source": "live"}
                    else:
                        m.breaker.failure(t1)
                        self.fallback(s, line, m, t1)
                line["circuit_state"] = m.breaker.state
                if line["status"] not in ("ok", "retried"):
                    status = "degraded"
                s["modules"].append(line)
            s["tiers"].append({"index": ti, "name": t.name, "budget_ms": t.budget * 1e3,
                               "elapsed_ms": (t1 - t0) * 1e3, "status": status,
                               "budget_exhausted": exhausted_tier or (t1 - t0) > t.budget})
        s["finished_at"] = time.time()
        self.history.append(s)
        return s


FAIL_ON = [False]


async def trivial():
    return 1


async def failing():
    if FAIL_ON[0]:
        raise TransientError("injected transient failure")
    return 1


def five_tiers(budget, attempts, base, max_delay, threshold):
    return [Tier(n, budget, attempts, base, 2.0, max_delay, 0.0, threshold)
            for n in ("safety", "knowledge", "perception", "planning", "execution")]


def trivial_engine(n, fail, threshold=1 << 30):
    """n trivial modules over five tiers, as peers.TrivialSpec (cycle/bench_test.go), with
    breakers that open after `threshold` consecutive failed ticks (30 s cooldown)."""
    tiers = five_tiers(1.0, 1, 0.001, 0.001, threshold)
    mods = []
    for i in range(n):
        tier = i % len(tiers)
        if fail and tier == 0:
            tier = 1
        fn = failing if (fail and i % 10 == 3) else trivial
        mods.append(Module("m%d" % i, tier, fn, tiers[tier]))
    return Engine(tiers, mods)


async def tickcost(n, failing_mods=False, warmup=4, min_ticks=20, max_ticks=20000, min_time=0.3, max_time=1.0,
                   open_breakers=False, threshold=5):
    """Per-tick wall times (µs) of back-to-back ticks with n trivial modules.

    open_breakers: the failing modules fail from the first tick on (they never have a
    value) and their breakers open after `threshold` failed ticks, during the warm-up, so
    that the measured ticks refuse them (the harness's open-10% state)."""
    if open_breakers:
        eng = trivial_engine(n, True, threshold)
        warmup = max(warmup, threshold + 1)
    else:
        eng = trivial_engine(n, failing_mods)
    FAIL_ON[0] = open_breakers
    for _ in range(warmup):
        await eng.tick()
    FAIL_ON[0] = failing_mods
    out = []
    t_start = time.perf_counter()
    while len(out) < max_ticks:
        t0 = time.perf_counter_ns()
        s = await eng.tick()
        out.append((time.perf_counter_ns() - t0) / 1e3)
        el = time.perf_counter() - t_start
        if (len(out) >= min_ticks and el >= min_time) or el >= max_time:
            break
    FAIL_ON[0] = False
    bad = sum(1 for m in s["modules"] if m["status"] != "ok")
    refused = sum(1 for m in s["modules"] if m["status"] == "open")
    return {"tick_us": out, "not_ok_last_tick": bad, "open_last_tick": refused}


def deadline_engine(hang, honour):
    tiers = [Tier("safety", 0.05, 1), Tier("work", 0.05, 2, 0.01, 2.0, 0.1, 0.2)]
    mods = [Module("guard", 0, trivial, tiers[0])]
    for i in range(48):
        mods.append(Module("w%d" % i, 1, trivial, tiers[1]))
    mods.append(Module("hung", 1, hang, tiers[1]))
    mods.append(Module("honour", 1, honour, tiers[1]))
    return Engine(tiers, mods)


async def deadline(ticks=10, gap_ms=5.0, block=0.5):
    """A tier of 50 modules, budget 50 ms: one blocks 500 ms ignoring cancellation, one
    honours it. Per tick: the work tier's overshoot past its budget and the statuses."""
    loop = asyncio.get_running_loop()
    state = {"cur": 0, "max": 0}

    async def hung():
        state["cur"] += 1
        state["max"] = max(state["max"], state["cur"])
        end = loop.time() + block
        try:
            while True:
                try:
                    await asyncio.sleep(max(0.0, end - loop.time()))
                    return 1
                except asyncio.CancelledError:
                    continue  # ignores its cancellation, like a blocking call
        finally:
            state["cur"] -= 1

    async def honour():
        await asyncio.sleep(block)
        return 1

    eng = deadline_engine(hung, honour)
    out = []
    for _ in range(ticks):
        await asyncio.sleep(gap_ms / 1e3)
        s = await eng.tick()
        work = s["tiers"][1]
        st = {m["name"]: m["status"] for m in s["modules"]}
        out.append({"overshoot_ms": work["elapsed_ms"] - work["budget_ms"],
                    "hung": st["hung"], "honour": st["honour"],
                    "others_ok": all(v == "ok" for k, v in st.items() if k not in ("hung", "honour")),
                    "tier_status": work["status"], "budget_exhausted": work["budget_exhausted"]})
    return {"ticks": out, "hung_max_concurrent": state["max"]}


def dispatch(req):
    cmd = req.get("cmd")
    if cmd == "tickcost":
        return asyncio.run(tickcost(req["n"], req.get("failing", False), req.get("warmup", 4),
                                    req.get("min_ticks", 20), req.get("max_ticks", 20000),
                                    req.get("min_time", 0.3), req.get("max_time", 1.0),
                                    req.get("open", False), req.get("threshold", 5)))
    if cmd == "deadline":
        return asyncio.run(deadline(req.get("ticks", 10), req.get("gap_ms", 5.0), req.get("block", 0.5)))
    if cmd == "version":
        return {"python": sys.version.split()[0]}
    raise ValueError("unknown cmd %r" % cmd)


def serve():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            out = dispatch(json.loads(line))
        except Exception as e:  # report, keep serving
            out = {"error": repr(e)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("serve")
    tc = sub.add_parser("tickcost")
    tc.add_argument("--n", type=int, default=500)
    tc.add_argument("--failing", action="store_true")
    tc.add_argument("--open", action="store_true", help="the failing modules' breakers open during the warm-up")
    tc.add_argument("--min-ticks", type=int, default=20)
    tc.add_argument("--max-time", type=float, default=1.0)
    dl = sub.add_parser("deadline")
    dl.add_argument("--ticks", type=int, default=10)
    dl.add_argument("--gap-ms", type=float, default=5.0)
    a = ap.parse_args()
    if a.cmd == "serve":
        serve()
        return
    if a.cmd == "tickcost":
        out = dispatch({"cmd": "tickcost", "n": a.n, "failing": a.failing or a.open, "open": a.open,
                        "min_ticks": a.min_ticks, "max_time": a.max_time})
    else:
        out = dispatch({"cmd": "deadline", "ticks": a.ticks, "gap_ms": a.gap_ms})
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
