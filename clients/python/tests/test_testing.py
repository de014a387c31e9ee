"""cycled.testing: a module function called as the daemon would, without a daemon; and
served to the real daemon with the serve_module fixture."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

import pytest

import cycled
from cycled import _attempt, testing

from conftest import Daemon


def test_async_function_is_cancelled_at_the_deadline() -> None:
    cancelled = threading.Event()

    async def hangs(call: cycled.Call) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    start = time.monotonic()
    a = testing.call(hangs, timeout=0.05)
    took = time.monotonic() - start
    assert a.status == "timed_out" and a.cancelled and a.fault_kind == "transient" and a.value is None
    assert cancelled.is_set()
    assert 0.05 <= took < 1.0 and 45 <= a.latency_ms < 1000


def test_transient_error_is_retried_by_the_next_attempt() -> None:
    def flaky(call: cycled.Call) -> str:
        if call.attempt == 1:
            raise cycled.TransientError("downstream busy")
        return "second time lucky"

    first = testing.call(flaky, attempt=1)
    assert (first.status, first.fault_kind, first.message, first.retryable) == ("failed", "transient", "downstream busy", True)
    assert first.body == {"error": {"kind": "transient", "message": "downstream busy"}}
    second = testing.call(flaky, attempt=2)
    assert (second.status, second.value, second.fault_kind, second.retryable) == ("ok", "second time lucky", "", False)


def test_inputs_with_provenance_and_the_protocol_headers() -> None:
    seen: list[cycled.Call] = []

    def recall(call: cycled.Call) -> dict[str, Any]:
        seen.append(call)
        return {k: [i.source, i.stale, i.age_ms, i.value] for k, i in call.inputs.items()}

    a = testing.call(
        recall,
        {
            "guard.result": testing.live({"clear": True}, module="guard", tick_id=7),
            "map.result": testing.last_good([1, 2], age_ms=80, module="map", tick_id=5),
            "gone.result": testing.missing(expired=True),
            "plain.result": 3,
        },
        module="py-recall",
        tier=1,
        tick_id=7,
        attempt=2,
        timeout=0.2,
        epoch=4,
    )
    assert a.status == "ok"
    assert a.value == {
        "guard.result": ["live", False, 0.0, {"clear": True}],
        "map.result": ["last_good", True, 80.0, [1, 2]],
        "gone.result": ["none", False, 0.0, None],
        "plain.result": ["live", False, 0.0, 3],
    }
    c = seen[0]
    assert (c.module, c.tier, c.tick_id, c.attempt, c.epoch) == ("py-recall", 1, 7, 2, 4)
    assert c.idempotency_key == "7-py-recall" and c.run_id == "test-run"
    assert c.inputs["gone.result"].expired and not c.inputs["gone.result"].present
    assert c.inputs["guard.result"].live and c.inputs["guard.result"].module == "guard"
    assert 0 < c.timeout <= 0.2 and c.deadline is not None


def test_the_deadline_really_runs_out() -> None:
    def careful(call: cycled.Call) -> int:
        loops = 0
        while call.remaining() > 0.1:  # stops with time to answer
            loops += 1
            time.sleep(0.005)
        return loops

    start = time.monotonic()
    a = testing.call(careful, timeout=0.2)
    assert time.monotonic() - start >= 0.1  # remaining() counted the time down
    assert a.status == "ok" and a.value > 0 and not a.late
    time.sleep(0.1)
    assert a.call.remaining() == 0 and a.call.expired

    def ignores(call: cycled.Call) -> str:
        time.sleep(call.remaining() + 0.05)  # its own misbehaviour: it ignores the deadline
        return "too late"

    a = testing.call(ignores, timeout=0.05)
    assert a.status == "timed_out" and a.late and not a.cancelled and a.value is None
    assert a.body == {"value": "too late"}  # what it answered, discarded by the daemon


class Unencodable:
    pass


@pytest.mark.parametrize(
    "raised,status,kind",
    [
        (cycled.ValidationError("bad input"), "failed", "validation"),
        (cycled.ContractError("broken"), "failed", "contract"),
        (cycled.DownstreamError("remote said 404"), "failed", "downstream"),
        (cycled.NothingToDo("gated off"), "ok", "control"),  # not a fault: the last value is kept
        (cycled.ModuleError("x", kind="permanent"), "failed", "contract"),
        (cycled.ModuleError("x", kind="bogus"), "failed", "downstream"),  # a kind the daemon does not know
        (cycled.ModuleError("x", kind="canceled"), "failed", "downstream"),  # one a module cannot report
        (KeyError("a bug"), "failed", "internal"),
        (TimeoutError(), "failed", "transient"),
        (None, "failed", "internal"),  # returned a value that is not JSON
    ],
)
def test_answers_as_the_daemon_reads_them(raised: BaseException | None, status: str, kind: str) -> None:
    def f(call: cycled.Call) -> Any:
        if raised is None:
            return Unencodable()
        raise raised

    a = testing.call(f)
    assert (a.status, a.fault_kind, a.value) == (status, kind, None)
    assert a.message


def test_acall_in_a_running_loop() -> None:
    async def double(call: cycled.Call) -> int:
        await asyncio.sleep(0)
        return 2 * int(call.value("n.result"))

    def plain(call: cycled.Call) -> int:
        return 1

    async def main() -> tuple[testing.Answer, testing.Answer]:
        with pytest.raises(RuntimeError):
            testing.call(double)  # an event loop runs here: acall is the way
        return await testing.acall(double, {"n.result": 21}), await testing.acall(plain)

    a, b = asyncio.run(main())
    assert (a.status, a.value, b.value) == ("ok", 42, 1)


def test_serve_module_fixture_against_the_daemon(start_daemon: Callable[..., Daemon], serve_module: Callable[..., cycled.Module]) -> None:
    d = start_daemon()

    async def recall(call: cycled.Call) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"clear": call.value("guard.result")["clear"], "tick": call.tick_id}

    m = serve_module(recall, name="py-served", tier="knowledge", reads=["guard.result"], daemon=d.url)
    assert m.registration["name"] == "py-served"

    async def follow() -> cycled.Summary:
        async with cycled.AsyncClient(d.url) as c:
            async with contextlib.aclosing(c.stream()) as events:
                async for ev in events:
                    line = ev.summary.module("py-served") if ev.summary else None
                    if line is not None and line.status == "ok":
                        return ev.summary  # type: ignore[return-value]
        raise AssertionError("the stream ended")

    s = asyncio.run(asyncio.wait_for(follow(), 10))
    assert d.client.blackboard("py-served.result")["value"]["clear"] is True
    assert s.module("py-served").served.source == "live"  # type: ignore[union-attr]


def post(url: str, headers: dict[str, str]) -> dict[str, Any]:
    body = json.dumps({"tick_id": 1, "module": "m", "tier": 0, "inputs": {}}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return dict(json.loads(resp.read()))


TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_trace_context_reaches_the_function() -> None:
    def traced(call: cycled.Call) -> list[str]:
        return [call.traceparent, call.tracestate]

    with testing.serve_module(traced, name="m", tier="safety") as m:
        assert post(m.url, {"traceparent": TRACEPARENT, "tracestate": "vendor=1"}) == {"value": [TRACEPARENT, "vendor=1"]}
        assert post(m.url, {"Traceparent": TRACEPARENT}) == {"value": [TRACEPARENT, ""]}  # names are case-insensitive
        assert post(m.url, {}) == {"value": ["", ""]}


@pytest.mark.skipif(importlib.util.find_spec("opentelemetry") is not None, reason="opentelemetry is installed here")
def test_without_opentelemetry_nothing_breaks() -> None:
    _attempt._otel.cache_clear()
    assert _attempt._otel() is None
    a = testing.call(lambda call: call.traceparent, traceparent=TRACEPARENT)
    assert (a.status, a.value) == ("ok", TRACEPARENT)


# A stand-in for the opentelemetry API (Debian packages no Python OpenTelemetry): it
# records what the module server asks of it.
OTEL_STUB = {
    "opentelemetry/__init__.py": "",
    "opentelemetry/propagate.py": "carriers = []\ndef extract(carrier):\n    carriers.append(dict(carrier))\n    return {'parent': carrier.get('traceparent')}\n",
    "opentelemetry/trace.py": """
import contextlib
spans = []
class SpanKind:
    SERVER = 'server'
class _Tracer:
    @contextlib.contextmanager
    def start_as_current_span(self, name, context=None, kind=None, attributes=None):
        rec = {'name': name, 'context': context, 'kind': kind, 'attributes': attributes, 'error': None}
        spans.append(rec)
        try:
            yield rec
        except BaseException as e:
            rec['error'] = type(e).__name__
            raise
def get_tracer(name):
    return _Tracer()
""",
}


def test_trace_continues_with_opentelemetry_when_importable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for rel, text in OTEL_STUB.items():
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [n for n in sys.modules if n == "opentelemetry" or n.startswith("opentelemetry.")]:
        monkeypatch.delitem(sys.modules, name)
    _attempt._otel.cache_clear()
    try:
        import opentelemetry.propagate as propagate  # the stub
        import opentelemetry.trace as trace

        def fails(call: cycled.Call) -> None:
            raise cycled.TransientError("busy")

        a = testing.call(lambda call: "ok", module="py-t", tick_id=9, traceparent=TRACEPARENT, tracestate="v=1")
        b = testing.call(fails, module="py-t", traceparent=TRACEPARENT)
        assert a.status == "ok" and b.fault_kind == "transient"
        assert propagate.carriers[0] == {"traceparent": TRACEPARENT, "tracestate": "v=1"}  # type: ignore[attr-defined]
        first, second = trace.spans  # type: ignore[attr-defined]
        assert first["name"] == "cycled.module py-t" and first["kind"] == "server"
        assert first["context"] == {"parent": TRACEPARENT} and first["attributes"]["cycled.tick_id"] == 9
        assert first["error"] is None and second["error"] == "TransientError"
    finally:
        _attempt._otel.cache_clear()
