"""AsyncClient against the real daemon: the stream followed without a gap and across a
daemon restart, the filtered search, the reads and the admin calls."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any, Callable

import pytest

import cycled
from cycled import _wire

from conftest import Daemon, eventually, free_port


def run(coro: Any, timeout: float = 60) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


def test_stream_follows_20_ticks(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon()

    async def follow() -> list[cycled.Summary]:
        out: list[cycled.Summary] = []
        async with cycled.AsyncClient(d.url) as c:
            async with contextlib.aclosing(c.stream()) as events:
                async for ev in events:
                    if ev.type == "tick":
                        assert ev.summary is not None and ev.id.endswith("-%d" % ev.summary.tick_id)
                        out.append(ev.summary)
                        if len(out) == 20:
                            break
        return out

    got = run(follow())
    ids = [s.tick_id for s in got]
    assert ids == list(range(ids[0], ids[0] + 20))
    assert all(s.schema == "cycled.fault_summary/v1" and s.finish == "completed" for s in got)
    assert all(isinstance(s.tiers[0], cycled.TierLine) and s.module("guard") is not None for s in got)


def test_stream_survives_a_daemon_restart(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon(addr="127.0.0.1:%d" % free_port())

    async def follow() -> tuple[list[cycled.Event], cycled.Summary | None]:
        seen: list[cycled.Event] = []
        async with cycled.AsyncClient(d.url, timeout=5) as c:
            await c.wait(0, timeout=5)  # a kept-alive connection the restart breaks
            restarting: asyncio.Task[None] | None = None
            after_restart = 0
            async with contextlib.aclosing(c.stream(read_timeout=3)) as events:
                async for ev in events:
                    seen.append(ev)
                    ticks = [e for e in seen if e.type == "tick"]
                    if len(ticks) == 5 and restarting is None:
                        restarting = asyncio.create_task(asyncio.to_thread(d.restart))
                    if any(e.type == "restart" for e in seen) and ev.type == "tick":
                        after_restart += 1
                        if after_restart == 5:
                            break
            assert restarting is not None
            await restarting
            # The same client goes on with the new process (its pooled connection is dead).
            latest = await c.wait(0, timeout=5)
        return seen, latest

    seen, latest = run(follow())
    i = next(i for i, e in enumerate(seen) if e.type == "restart")
    before = [e for e in seen[:i] if e.type == "tick"]
    after = [e for e in seen[i + 1 :] if e.type == "tick"]
    assert len(before) >= 5 and len(after) == 5
    restart = seen[i].data
    assert restart["previous_run"] == _wire.event_run(before[-1].id)
    assert restart["run"] == _wire.event_run(after[0].id) != restart["previous_run"]
    assert restart["last_tick"] == before[-1].summary.tick_id  # type: ignore[union-attr]
    ids_before = [e.summary.tick_id for e in before]  # type: ignore[union-attr]
    ids_after = [e.summary.tick_id for e in after]  # type: ignore[union-attr]
    assert ids_before == list(range(ids_before[0], ids_before[0] + len(ids_before)))  # no gap before
    assert ids_after == list(range(ids_after[0], ids_after[0] + 5))  # nor after
    assert latest is not None


def test_filtered_search(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon(cooldown="1m")

    async def search() -> None:
        async with cycled.AsyncClient(d.url) as c:
            await c.register({"name": "extra", "tier": "knowledge", "builtin": {"value": 7}})
            first = await c.wait(0, timeout=5)
            assert first is not None
            await c.inject("extra", fail_rate=1)
            deadline = asyncio.get_running_loop().time() + 10
            while not (failed := await c.ticks(status="failed", module="extra")):
                assert asyncio.get_running_loop().time() < deadline, "no failed tick of extra"
                await asyncio.sleep(0.02)
            for s in failed:
                line = s.module("extra")
                assert line is not None and line.status == "failed" and line.fault_kind
            # The breaker opened after two failures: later ticks are "open", not "failed".
            opened = await c.ticks(status="open", module="extra", limit=3)
            assert all(s.module("extra").status == "open" for s in opened)  # type: ignore[union-attr]
            ok = await c.ticks(severity="ok", limit=5)
            assert ok and all(s.overall_severity == "ok" for s in ok)
            # A time window: the ticks started in [since, until).
            since = failed[-1].started_at
            assert since is not None
            until = since + timedelta(milliseconds=100)
            window = await c.ticks(since=since, until=until, limit=100)
            assert window and all(s.started_at is not None and since <= s.started_at < until for s in window)
            await c.wait(first.tick_id + 10, timeout=5)
            page = await c.ticks(limit=3)
            assert len(page) == 3 and page.next_before == page[-1].tick_id and page.history_cap > 0
            older = await c.ticks(limit=3, before=page.next_before)
            assert older[0].tick_id < page[-1].tick_id
            with pytest.raises(cycled.ApiError) as e:
                await c.ticks(status="ok")
            assert e.value.status == 400 and e.value.field == "status"

    run(search())


def test_reads_and_admin_calls(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon(cooldown="1m", recorder=True)

    async def calls() -> None:
        async with cycled.AsyncClient(d.url) as c:
            first = await c.wait(0, timeout=5)
            assert first is not None and first.tick_id == 1
            latest = await c.latest()
            nxt = await c.wait(latest.tick_id + 2, timeout=5)
            assert nxt is not None and nxt.tick_id == latest.tick_id + 3
            assert (await c.tick(latest.tick_id)).tick_id == latest.tick_id
            assert await c.wait(10**9, timeout=0.2) is None
            # Concurrent requests share the client.
            many = await asyncio.gather(*(c.latest() for _ in range(20)))
            assert all(s.tick_id >= latest.tick_id for s in many)
            status, body, headers = await c.request("GET", "/ticks/latest")
            assert status == 200 and headers["etag"].strip('"').endswith("-%d" % body["tick_id"])

            reg = await c.register({"name": "extra", "tier": "knowledge", "builtin": {"value": 7}})
            assert reg["name"] == "extra"
            with pytest.raises(cycled.ApiError) as e:
                await c.register({"name": "extra", "tier": "knowledge"})
            assert e.value.status == 409 and e.value.code == "duplicate"
            assert (await c.inject("extra", fail_rate=1))["module"] == "extra"
            deadline = asyncio.get_running_loop().time() + 10
            while True:
                bs = {b.name: b for b in await c.breakers()}
                if "extra" in bs and bs["extra"].state == "open":
                    break
                assert asyncio.get_running_loop().time() < deadline, "the breaker did not open"
                await asyncio.sleep(0.02)
            assert bs["extra"].settings.failure_threshold == 2 and bs["extra"].opened_at is not None
            await c.inject("extra", reset=True)
            b = await c.reset_breaker("extra")
            assert isinstance(b, cycled.Breaker) and b.state == "closed" and b.consecutive_failures == 0
            em = await c.emergency()
            assert isinstance(em, cycled.Emergency) and em.active is False
            assert (await c.reset_emergency())["applies"] == "next_tick"
            await c.deregister("extra")
            deadline = asyncio.get_running_loop().time() + 10
            while True:  # removed at the next tick boundary
                try:
                    await c.module("extra")
                except cycled.ApiError as e:
                    assert e.status == 404
                    break
                assert asyncio.get_running_loop().time() < deadline, "extra was not removed"
                await asyncio.sleep(0.02)

            # The recorder's events: the registration, the breaker, the operator's actions.
            deadline = asyncio.get_running_loop().time() + 10
            while True:
                evs = await c.events(limit=200)
                kinds = {e.kind for e in evs}
                if {"module_registered", "breaker", "admin", "module_removed"} <= kinds:
                    break
                assert asyncio.get_running_loop().time() < deadline, "events missing: %s" % kinds
                await asyncio.sleep(0.05)
            assert [e.id for e in evs] == sorted(e.id for e in evs) and all(e.at is not None for e in evs)
            admin = await c.events(kind="admin")
            assert admin and all(e.kind == "admin" for e in admin)
            later = await c.events(after=evs[0].id)
            assert later and all(e.id > evs[0].id for e in later)
            assert len(await c.events(limit=1)) == 1

    run(calls())


def test_keep_alive_connections_are_reused(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon()

    async def sequential() -> int:
        async with cycled.AsyncClient(d.url) as c:
            await c.wait(0, timeout=5)
            for _ in range(50):
                await c.latest()
            return len(c._http._idle)

    assert run(sequential()) == 1  # one connection carried every request


def test_sync_client_reports_a_restart_too(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon(addr="127.0.0.1:%d" % free_port())
    eventually("the first tick", lambda: d.client.wait(0, timeout=5))
    stream = d.client.stream(read_timeout=3)
    try:
        types: list[str] = []
        for ev in stream:
            types.append(ev.type)
            if types.count("tick") == 3:
                d.restart()
            if "restart" in types and types[-1] == "tick":
                break
    finally:
        stream.close()
    assert types.index("restart") > types.index("tick")
