"""Testing a module function without a daemon, and serving one to a real daemon in tests.

``call(func, inputs, ...)`` runs one attempt of a module function as the daemon would: it
builds the daemon's request (the inputs with their provenance, the attempt, a deadline
``timeout`` seconds away, the protocol's headers), runs the function through the module
server's own code (an ``async`` function is cancelled at the deadline; a plain one is
abandoned there, as the daemon stops waiting), and reads the answer as the daemon reads
it. ``await acall(...)`` does the same inside a running event loop::

    from cycled import testing

    def test_recall():
        a = testing.call(recall, {"collision_guard.result": testing.last_good({"clear": True}, age_ms=80)})
        assert a.status == "ok" and a.value["stale"] is True

``serve_module(func, name=..., tier=..., daemon=url)`` serves the function on a local
port (and registers it with the daemon at ``daemon``) for the length of a ``with``
block; the ``serve_module`` pytest fixture (``pytest_plugins = ["cycled.pytest_plugin"]``,
or installed with the package) does the same and stops what it started after the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator, Mapping

from . import _attempt
from ._attempt import ModuleFunc
from ._wire import Headers
from .module import Module
from .types import Call

__all__ = ["Answer", "call", "acall", "live", "last_good", "missing", "serve_module", "KINDS"]

# The fault kinds a module can report; the daemon takes any other as downstream.
KINDS = ("validation", "contract", "control", "transient", "downstream", "internal")

LATE_GRACE = 1.0  # how long call() waits for a plain function past its deadline, for its late answer


def live(value: Any, *, module: str = "", tick_id: int = 1) -> dict[str, Any]:
    """An input written in this tick by ``module``."""
    return {"value": value, "module": module, "tick_id": tick_id, "source": "live", "stale": False, "expired": False, "age_ms": 0}


def last_good(value: Any, *, age_ms: float, module: str = "", tick_id: int = 0, derived_from_stale: bool = False) -> dict[str, Any]:
    """A last-known-good value standing in for a key not written this tick, ``age_ms`` old."""
    return {
        "value": value,
        "module": module,
        "tick_id": tick_id,
        "source": "last_good",
        "stale": True,
        "expired": False,
        "age_ms": age_ms,
        "derived_from_stale": derived_from_stale,
    }


def missing(*, expired: bool = False) -> dict[str, Any]:
    """Nothing to serve: never written, or (``expired``) a value that outlived its TTL."""
    return {"value": None, "source": "none", "stale": False, "expired": expired, "age_ms": 0}


@dataclasses.dataclass(frozen=True)
class Answer:
    """One attempt as the daemon reads it.

    ``status`` is the module line's status for this attempt: ``ok`` (a value, or a
    ``control`` short-circuit, where the daemon keeps serving the last value), ``failed``
    (an error answer: ``fault_kind`` and ``message`` as the daemon reports them) or
    ``timed_out`` (no answer before the deadline). ``value`` is the value the daemon
    decodes (None unless ok). ``cancelled``: an async function was cancelled at the
    deadline. ``late``: the function answered after the deadline (the daemon discarded
    it); ``body`` is the protocol answer the module server sent or would have sent.
    """

    status: str
    value: Any
    fault_kind: str
    message: str
    latency_ms: float
    cancelled: bool
    late: bool
    body: Mapping[str, Any] | None
    call: Call

    @property
    def retryable(self) -> bool:
        """Whether the daemon runs another attempt (while the tier's budget lasts)."""
        return self.fault_kind == "transient"


def _request(
    func: ModuleFunc,
    inputs: Mapping[str, Any] | None,
    module: str,
    tier: int,
    tick_id: int,
    attempt: int,
    timeout: float,
    run_id: str,
    epoch: int,
    traceparent: str,
    tracestate: str,
) -> Call:
    """The Call the module server makes of the daemon's request for these arguments."""
    entries: dict[str, Any] = {}
    for key, v in (inputs or {}).items():
        e = dict(v) if isinstance(v, Mapping) and "source" in v else live(v)
        e.setdefault("key", key)
        e.setdefault("module", "")
        e.setdefault("tick_id", 0)
        e.setdefault("derived_from_stale", False)
        entries[key] = e
    deadline = (datetime.now(timezone.utc) + timedelta(seconds=timeout)).isoformat()
    body = {"tick_id": tick_id, "module": module, "tier": tier, "attempt": attempt, "deadline": deadline, "inputs": entries}
    headers = {
        _attempt.HEADER_DEADLINE: deadline,
        _attempt.HEADER_BUDGET: "%.3f" % (timeout * 1000),
        _attempt.HEADER_IDEMPOTENCY_KEY: "%d-%s" % (tick_id, module),
        _attempt.HEADER_RUN: run_id,
    }
    if epoch:
        headers[_attempt.HEADER_EPOCH] = str(epoch)
    if traceparent:
        headers[_attempt.HEADER_TRACEPARENT] = traceparent
        if tracestate:
            headers[_attempt.HEADER_TRACESTATE] = tracestate
    wire = json.loads(json.dumps(body))  # what arrives is JSON: a value that is not fails here
    return _attempt.parse_call(wire, Headers(headers.items()))


def read(body: Mapping[str, Any] | None, call: Call, started: float, answered: float, cancelled: bool) -> Answer:
    """The daemon's reading of an answer (None: none came)."""
    latency = (answered - started) * 1000
    late = body is not None and answered > call._expires
    if body is None or late or cancelled:
        return Answer("timed_out", None, "transient", "deadline passed", latency, cancelled, late, body, call)
    raw = json.loads(json.dumps(body))  # the bytes on the wire
    has_value, err = "value" in raw, raw.get("error")
    if has_value and err is not None:
        return Answer("failed", None, "downstream", 'malformed answer: both "value" and "error"', latency, False, False, body, call)
    if err is None:
        return Answer("ok", raw.get("value"), "", "", latency, False, False, body, call)
    kind, message = err.get("kind"), err.get("message") or "(no message)"
    k = kind.strip().lower() if isinstance(kind, str) else None
    k = "contract" if k == "permanent" else k
    if k not in KINDS:
        return Answer("failed", None, "downstream", "remote error of kind %r (taken as downstream): %s" % (kind, message), latency, False, False, body, call)
    return Answer("ok" if k == "control" else "failed", None, k, message, latency, False, False, body, call)


def call(
    func: ModuleFunc,
    inputs: Mapping[str, Any] | None = None,
    *,
    module: str = "test-module",
    tier: int = 0,
    tick_id: int = 1,
    attempt: int = 1,
    timeout: float = 0.1,
    run_id: str = "test-run",
    epoch: int = 0,
    traceparent: str = "",
    tracestate: str = "",
) -> Answer:
    """Runs one attempt of func as the daemon would and returns its Answer.

    ``inputs`` maps the keys the module reads to entries made by live(), last_good() or
    missing() (any other value is taken as a live one); ``timeout`` is the time left to
    the deadline, in seconds. An async function runs on a new event loop (use acall()
    inside one) and is cancelled at the deadline; a plain one runs on a thread that is
    abandoned at the deadline (waited for up to LATE_GRACE more, for ``body``)."""
    c = _request(func, inputs, module, tier, tick_id, attempt, timeout, run_id, epoch, traceparent, tracestate)
    if _attempt.is_async(func):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(_acall(func, c))
        raise RuntimeError("cycled.testing.call() inside a running event loop: use await cycled.testing.acall()")
    return _call_sync(func, c)


async def acall(
    func: ModuleFunc,
    inputs: Mapping[str, Any] | None = None,
    *,
    module: str = "test-module",
    tier: int = 0,
    tick_id: int = 1,
    attempt: int = 1,
    timeout: float = 0.1,
    run_id: str = "test-run",
    epoch: int = 0,
    traceparent: str = "",
    tracestate: str = "",
) -> Answer:
    """call() for a running event loop: an async function runs on it; a plain one on a
    thread of the loop's executor."""
    c = _request(func, inputs, module, tier, tick_id, attempt, timeout, run_id, epoch, traceparent, tracestate)
    if _attempt.is_async(func):
        return await _acall(func, c)
    return await asyncio.get_running_loop().run_in_executor(None, _call_sync, func, c)


async def _acall(func: ModuleFunc, c: Call) -> Answer:
    cancelled = False

    async def watched(c: Call) -> Any:
        nonlocal cancelled
        try:
            return await func(c)
        except asyncio.CancelledError:
            cancelled = True
            raise

    started = time.monotonic()
    body = await _attempt.run_async(watched, c)
    return read(body, c, started, time.monotonic(), cancelled)


def _call_sync(func: ModuleFunc, c: Call) -> Answer:
    box: list[dict[str, Any]] = []
    answered = [0.0]

    def run() -> None:
        box.append(_attempt.run_sync(func, c))
        answered[0] = time.monotonic()

    started = time.monotonic()
    t = threading.Thread(target=run, name="cycled-testing-" + c.module, daemon=True)
    t.start()
    t.join(c.remaining())
    if not box:
        t.join(LATE_GRACE)  # the daemon has stopped waiting; the late answer is for body
        if not box:
            return read(None, c, started, time.monotonic(), False)
    return read(box[0], c, started, answered[0], False)


@contextlib.contextmanager
def serve_module(
    func: ModuleFunc,
    *,
    name: str,
    tier: str,
    daemon: str | None = None,
    reads: list[str] | None = None,
    token: str | None = None,
    **kwargs: Any,
) -> Iterator[Module]:
    """Serves func as a module on a local port for the length of the block: registered
    with the daemon at ``daemon`` (and deregistered at the end), or, without one, only
    served (its ``url`` takes the daemon's requests). Other arguments are Module's."""
    m = Module(func, name=name, tier=tier, reads=reads, daemon=daemon, token=token, register=daemon is not None, **kwargs)
    m.start()
    try:
        yield m
    finally:
        m.stop()
