"""The SDK's Client against the real daemon."""

from __future__ import annotations

from typing import Callable

import pytest

import cycled

from conftest import Daemon, eventually


def test_stream_follows_100_ticks_without_a_gap(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon()
    ids: list[int] = []
    stream = d.client.stream()
    last_id = ""
    for ev in stream:
        if ev.type == "tick":
            assert ev.summary is not None and ev.summary.schema == "cycled.fault_summary/v1"
            ids.append(ev.summary.tick_id)
            last_id = ev.id
            if len(ids) == 50:
                break
    stream.close()
    # Reconnect where it left off: the daemon replays the ticks missed meanwhile.
    eventually("ticks to pass while disconnected", lambda: d.client.latest().tick_id >= ids[-1] + 5)
    for ev in d.client.stream(last_event_id=last_id):
        if ev.type == "tick":
            assert ev.summary is not None
            ids.append(ev.summary.tick_id)
            if len(ids) == 100:
                break
    assert ids == list(range(ids[0], ids[0] + 100))


def test_reads(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon()
    c = d.client
    first = eventually("the first tick", lambda: c.wait(0, timeout=5))
    assert isinstance(first, cycled.Summary) and first.tick_id == 1  # the tick after 0
    eventually("three ticks", lambda: c.latest().tick_id >= 3)
    latest = c.latest()
    assert latest.tick_id >= first.tick_id and latest.finish == "completed"
    assert [t.name for t in latest.tiers] == ["safety", "knowledge"]
    guard = latest.module("guard")
    assert guard is not None and guard.status == "ok" and guard.served is not None and guard.served.source == "live"
    assert latest.started_at is not None and latest.finished_at is not None and latest.finished_at >= latest.started_at
    assert c.tick(latest.tick_id).tick_id == latest.tick_id
    page = c.ticks(limit=3)
    assert len(page) == 3 and page[0].tick_id > page[1].tick_id > page[2].tick_id
    # wait() for a tick still to come returns that tick.
    nxt = c.wait(latest.tick_id + 3, timeout=5)
    assert nxt is not None and nxt.tick_id == latest.tick_id + 4
    assert [m["name"] for m in c.modules()] == ["guard"]
    assert {b["name"] for b in c.breakers()} == {"guard"}
    assert c.emergency()["active"] is False
    with pytest.raises(cycled.APIError) as e:
        c.tick(10**9)
    assert e.value.status == 404 and e.value.code == "not_found"


def test_admin_calls(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon()
    c = d.client
    with pytest.raises(cycled.APIError) as e:
        c.step()  # not in step mode
    assert e.value.status == 409 and e.value.code == "not_step_mode"
    c.register({"name": "extra", "tier": "knowledge", "builtin": {"value": 7}})
    eventually("the registration to apply", lambda: c.module("extra")["pending"] is False)
    with pytest.raises(cycled.APIError) as e:
        c.register({"name": "extra", "tier": "knowledge"})
    assert e.value.status == 409 and e.value.code == "duplicate"
    c.inject_faults("extra", fail_rate=1)
    eventually("a failed tick", lambda: c.module("extra")["breaker"]["total_failures"] >= 1)
    c.inject_faults("extra", reset=True)
    c.reset_breaker("extra")
    assert c.module("extra")["breaker"]["state"] == "closed"
    c.deregister("extra")
    with pytest.raises(cycled.APIError) as e:
        c.register({"name": "bad", "tier": "nope"})
    assert e.value.status == 422 and e.value.field == "tier"
