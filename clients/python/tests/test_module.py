"""The SDK's Module against the real daemon: called every tick, retried, abandoned at the
deadline, its breaker opened when it dies and closed again when it comes back."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable

import pytest

import cycled

from conftest import Daemon, eventually


def mark(daemon: Daemon) -> str:
    """The stream id of the latest tick (its ETag): following from it misses nothing after."""
    eventually("the first tick", lambda: daemon.client.wait(0, timeout=5))
    _, _, headers = daemon.client.request("GET", "/ticks/latest")
    return headers["ETag"].strip('"')


def follow(
    daemon: Daemon, cond: Callable[[cycled.Summary], bool], what: str, since: str | None = None, timeout: float = 10.0
) -> cycled.Summary:
    """Follows the stream (from the tick after since, else from now) until a tick summary
    satisfies cond; fails after timeout."""
    end = time.monotonic() + timeout
    stream = daemon.client.stream(last_event_id=since)
    try:
        for ev in stream:
            if ev.summary is not None and cond(ev.summary):
                return ev.summary
            if time.monotonic() > end:
                break
    finally:
        stream.close()
    pytest.fail("timed out waiting for " + what)


def status(name: str) -> Callable[[cycled.Summary], str]:
    def get(s: cycled.Summary) -> str:
        m = s.module(name)
        return m.status if m else ""

    return get


class Recorder:
    """Records the calls a module function receives."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[cycled.Call] = []

    def add(self, call: cycled.Call) -> None:
        with self.lock:
            self.calls.append(call)

    def ticks(self) -> list[int]:
        with self.lock:
            return [c.tick_id for c in self.calls]


def test_called_every_tick_with_inputs(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon()
    rec = Recorder()

    def recall(call: cycled.Call) -> dict[str, object]:
        rec.add(call)
        guard = call.inputs["guard.result"]
        return {"clear": guard.value["clear"], "source": guard.source, "tick": call.tick_id}

    with cycled.Module(recall, name="py-every", tier="knowledge", reads=["guard.result"], daemon=d.url) as m:
        assert m.registration["name"] == "py-every"
        first = follow(d, lambda s: status("py-every")(s) == "ok", "the module's first tick")
        last = follow(d, lambda s: s.tick_id >= first.tick_id + 20, "20 more ticks")
        seen = rec.ticks()
        want = list(range(first.tick_id, last.tick_id + 1))
        assert [t for t in seen if first.tick_id <= t <= last.tick_id] == want  # once per tick, none missed
        for s in (first, last):
            line = s.module("py-every")
            assert line is not None and line.status == "ok" and line.attempts == 1
        call = rec.calls[-1]
        guard = call.inputs["guard.result"]
        assert guard.live and guard.present and not guard.stale and guard.module == "guard"
        assert call.module == "py-every" and call.tier == 1 and call.attempt == 1
        assert 0 < call.timeout <= 0.1 and call.idempotency_key == "%d-py-every" % call.tick_id and call.run_id
        entry = d.client.blackboard("py-every.result")
        assert entry["value"]["clear"] is True and entry["value"]["source"] == "live"
    # Deregistered on exit.
    with pytest.raises(cycled.APIError) as e:
        d.client.module("py-every")
    assert e.value.status == 404


def test_retried_on_transient_error(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon()
    rec = Recorder()

    def flaky(call: cycled.Call) -> str:
        rec.add(call)
        if call.attempt == 1:
            raise cycled.TransientError("first attempt fails")
        return "second time lucky"

    since = mark(d)
    with cycled.Module(flaky, name="py-flaky", tier="knowledge", daemon=d.url):
        s = follow(d, lambda s: status("py-flaky")(s) == "retried", "a retried tick", since)
        assert s.retry_counts["py-flaky"] == 1
        attempts = [c.attempt for c in rec.calls if c.tick_id == s.tick_id]
        assert attempts == [1, 2]
        keys = {c.idempotency_key for c in rec.calls if c.tick_id == s.tick_id}
        assert keys == {"%d-py-flaky" % s.tick_id}


@pytest.mark.parametrize(
    "kind,exc",
    [
        ("validation", cycled.ValidationError("bad input")),
        ("contract", cycled.ContractError("broken")),
        ("downstream", cycled.DownstreamError("remote said 404")),
        ("internal", KeyError("a bug")),
    ],
)
def test_exceptions_map_to_fault_kinds(start_daemon: Callable[..., Daemon], kind: str, exc: Exception) -> None:
    d = start_daemon(cooldown="1m")
    rec = Recorder()

    def fails(call: cycled.Call) -> None:
        rec.add(call)
        raise exc

    since = mark(d)
    with cycled.Module(fails, name="py-fails", tier="knowledge", daemon=d.url):
        s = follow(d, lambda s: status("py-fails")(s) == "failed", "a failed tick", since)
        line = s.module("py-fails")
        assert line is not None and line.fault_kind == kind and line.attempts == 1  # not retried
        assert len([c for c in rec.calls if c.tick_id == s.tick_id]) == 1


def test_plain_function_ignoring_the_deadline_is_abandoned(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon(budget="60ms")

    def slow(call: cycled.Call) -> str:
        time.sleep(call.remaining() + 0.1)  # the module's own misbehaviour: it ignores its deadline
        return "too late"

    with cycled.Module(slow, name="py-slow", tier="knowledge", daemon=d.url):
        s = follow(d, lambda s: status("py-slow")(s) == "timed_out", "a timed-out tick")
        tier = next(t for t in s.tiers if t.name == "knowledge")
        assert tier.elapsed_ms < 60 + 30  # the tick did not wait for the module


def test_async_function_is_cancelled_at_the_deadline(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon(budget="60ms")
    cancelled = threading.Event()

    async def hangs(call: cycled.Call) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    with cycled.Module(hangs, name="py-async", tier="knowledge", daemon=d.url):
        follow(d, lambda s: status("py-async")(s) == "timed_out", "a timed-out tick")
        assert cancelled.wait(5), "the async function was not cancelled at its deadline"


def test_async_function_value(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon()

    async def quick(call: cycled.Call) -> dict[str, float]:
        await asyncio.sleep(0)
        return {"left_ms": call.remaining() * 1000}

    with cycled.Module(quick, name="py-quick", tier="knowledge", daemon=d.url):
        s = follow(d, lambda s: status("py-quick")(s) == "ok", "an ok tick")
        assert d.client.blackboard("py-quick.result")["value"]["left_ms"] > 0
        assert s.overall_severity == "ok"


def test_breaker_opens_when_killed_and_closes_when_restarted(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon(cooldown="30s")  # longer than the test: only the restart can close it
    m = cycled.Module(lambda call: "alive", name="py-phoenix", tier="knowledge", daemon=d.url).start()
    follow(d, lambda s: status("py-phoenix")(s) == "ok", "an ok tick")

    since = mark(d)
    m.close()  # dies without deregistering: connections are refused
    s = follow(d, lambda s: "py-phoenix" in s.open_circuits, "the breaker to open", since)
    assert status("py-phoenix")(s) in ("failed", "open")
    assert any(b["name"] == "py-phoenix" and b["state"] == "open" for b in d.client.breakers())

    # Restarted on another port: it replaces its stale registration, and the re-registration
    # starts a closed breaker (a restarted remote is a new process, not the one that failed).
    m2 = cycled.Module(lambda call: "back", name="py-phoenix", tier="knowledge", daemon=d.url)
    with m2:
        assert m2.replaced
        # The 201 reports breaker_reset when the old breaker was still there (no tick
        # boundary between the DELETE and the POST removed it); either way it is closed.
        assert m2.registration.get("breaker_reset", {"from": "open"})["from"] == "open"
        s = follow(d, lambda s: status("py-phoenix")(s) == "ok", "the restarted module's ok tick")
        line = s.module("py-phoenix")
        assert line is not None and line.circuit_state == "closed" and "py-phoenix" not in s.open_circuits
