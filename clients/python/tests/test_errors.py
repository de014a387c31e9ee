"""DaemonUnavailable where no daemon answers; ApiError with its code, field and problems
where the daemon answers an error."""

from __future__ import annotations

import asyncio
import socket
from typing import Any, Callable

import pytest

import cycled

from conftest import Daemon


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return "http://127.0.0.1:%d" % port  # nothing listens there once the socket is closed


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_no_daemon_is_daemon_unavailable() -> None:
    url = closed_port_url()
    c = cycled.Client(url, timeout=2)
    for call in (c.latest, lambda: c.wait(0, timeout=1), c.breakers, lambda: c.register({"name": "m"})):
        with pytest.raises(cycled.DaemonUnavailable) as e:
            call()
        assert e.value.url == url and isinstance(e.value, ConnectionError)
        assert isinstance(e.value.__cause__, ConnectionRefusedError)
    with pytest.raises(cycled.DaemonUnavailable):
        next(c.stream(reconnect=False))

    async def async_calls() -> None:
        async with cycled.AsyncClient(url, timeout=2) as ac:
            with pytest.raises(cycled.DaemonUnavailable) as e:
                await ac.latest()
            assert isinstance(e.value.__cause__, ConnectionRefusedError)
            with pytest.raises(cycled.DaemonUnavailable):
                await ac.inject("m", reset=True)
            with pytest.raises(cycled.DaemonUnavailable):
                async for _ in ac.stream(reconnect=False):
                    pass

    run(async_calls())


def test_stopped_daemon_is_daemon_unavailable(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon()
    c = cycled.Client(d.url)
    assert c.wait(0, timeout=5) is not None
    ac = cycled.AsyncClient(d.url)

    async def before() -> None:
        assert (await ac.wait(0, timeout=5)) is not None  # leaves a kept-alive connection

    async def after() -> None:
        with pytest.raises(cycled.DaemonUnavailable):
            await ac.latest()
        await ac.aclose()

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(before())
        d.stop()
        loop.run_until_complete(after())
    finally:
        loop.close()
    with pytest.raises(cycled.DaemonUnavailable):
        c.latest()


INVALID = {"name": "bad", "tier": "knowledge", "kind": "http", "http": {"url": "ftp://x"}, "max_attempts": -1}


def test_api_error_carries_every_problem(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon()
    c = cycled.Client(d.url)
    with pytest.raises(cycled.ApiError) as e:
        c.register(INVALID)
    err = e.value
    assert err.status == 422 and err.code == "invalid" and err.field == "http.url"
    assert [p.field for p in err.problems] == ["http.url", "max_attempts"]
    assert all(isinstance(p, cycled.Problem) and p.message and not p.warning for p in err.problems)
    assert "must be between" in err.problems[1].message

    async def async_register() -> cycled.ApiError:
        async with cycled.AsyncClient(d.url) as ac:
            try:
                await ac.register(INVALID)
            except cycled.ApiError as e:
                return e
        raise AssertionError("no ApiError")

    aerr = run(async_register())
    assert (aerr.status, aerr.code, aerr.field, aerr.problems) == (err.status, err.code, err.field, err.problems)

    # One error without several findings: field set, problems empty.
    with pytest.raises(cycled.ApiError) as e:
        c.ticks(severity="bogus")
    assert e.value.status == 400 and e.value.field == "severity" and e.value.problems == []
    assert cycled.APIError is cycled.ApiError  # the former name still catches it


def test_module_start_raises_the_problems(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon()
    m = cycled.Module(lambda call: 1, name="py-bad", tier="knowledge", daemon=d.url, spec={"max_attempts": -1})
    with pytest.raises(cycled.ApiError) as e:
        m.start()
    assert [p.field for p in e.value.problems] == ["max_attempts"] or e.value.field == "max_attempts"
    with pytest.raises(RuntimeError):
        m.url  # not serving: start() closed the server again


def test_module_without_a_daemon_is_daemon_unavailable(capsys: pytest.CaptureFixture[str]) -> None:
    url = closed_port_url()
    m = cycled.Module(lambda call: 1, name="py-alone", tier="knowledge", daemon=url)
    with pytest.raises(cycled.DaemonUnavailable):
        m.start()
    with pytest.raises(RuntimeError):
        m.url  # start() closed the server again


def test_module_stop_survives_a_daemon_gone(start_daemon: Callable[..., Daemon], capsys: pytest.CaptureFixture[str]) -> None:
    d = start_daemon()
    m = cycled.Module(lambda call: 1, name="py-orphan", tier="knowledge", daemon=d.url).start()
    d.stop()
    m.stop()  # the deregistration fails; the module still stops
    assert "deregistration of py-orphan failed" in capsys.readouterr().err
