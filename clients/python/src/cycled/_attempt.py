"""One attempt of a module function, as the module server runs it and as cycled.testing
runs it: the Call made from the daemon's request, the function run (cancelled at the
deadline when it is async) inside a trace span when OpenTelemetry is importable, and the
protocol's answer, ``{"value": …}`` or ``{"error": {"kind", "message"}}``."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import json
import time
from typing import Any, Awaitable, Callable, Iterator, Mapping, Union

from .errors import ModuleError
from .types import Call, Input, parse_time

ModuleFunc = Callable[[Call], Union[Any, Awaitable[Any]]]

# The request headers of the protocol (names are case-insensitive).
HEADER_DEADLINE = "X-Cycled-Deadline"
HEADER_BUDGET = "X-Cycled-Budget-Ms"
HEADER_RUN = "X-Cycled-Run"
HEADER_EPOCH = "X-Cycled-Epoch"
HEADER_IDEMPOTENCY_KEY = "Idempotency-Key"
HEADER_TRACEPARENT = "traceparent"
HEADER_TRACESTATE = "tracestate"


def parse_call(req: Mapping[str, Any], headers: Mapping[str, str]) -> Call:
    """The Call of a tick request; headers must look names up case-insensitively."""
    now = time.monotonic()
    budget_ms: float | None = None
    try:
        if headers.get(HEADER_BUDGET):
            budget_ms = float(headers[HEADER_BUDGET])
    except ValueError:
        budget_ms = None
    deadline = parse_time(headers.get(HEADER_DEADLINE) or req.get("deadline"))
    if budget_ms is None:
        # No budget header: derive it from the deadline and the wall clock.
        budget_ms = max(0.0, (deadline.timestamp() - time.time()) * 1000) if deadline else 0.0
    raw_inputs = req.get("inputs") or {}
    inputs = {k: Input.from_dict(k, v or {}) for k, v in raw_inputs.items()}
    return Call(
        tick_id=int(req.get("tick_id", 0)),
        module=str(req.get("module", "")),
        tier=int(req.get("tier", 0)),
        attempt=int(req.get("attempt", 1)),
        deadline=deadline,
        timeout=budget_ms / 1000.0,
        inputs=inputs,
        idempotency_key=headers.get(HEADER_IDEMPOTENCY_KEY, ""),
        run_id=headers.get(HEADER_RUN, ""),
        epoch=_int(headers.get(HEADER_EPOCH)),
        raw=dict(req),
        _expires=now + budget_ms / 1000.0,
        traceparent=headers.get(HEADER_TRACEPARENT, ""),
        tracestate=headers.get(HEADER_TRACESTATE, ""),
    )


def _int(v: str | None) -> int:
    try:
        return int(v or 0)
    except ValueError:
        return 0


def is_async(func: ModuleFunc) -> bool:
    """Whether func is a coroutine function (a functools.partial of one included)."""
    while isinstance(func, functools.partial):
        func = func.func
    return asyncio.iscoroutinefunction(func) or asyncio.iscoroutinefunction(getattr(func, "__call__", None))


@functools.lru_cache(maxsize=1)
def _otel() -> Any:
    """OpenTelemetry's propagate and trace modules, or None when it is not importable."""
    try:
        return importlib.import_module("opentelemetry.propagate"), importlib.import_module("opentelemetry.trace")
    except ImportError:
        return None


@contextlib.contextmanager
def span(call: Call) -> Iterator[None]:
    """A server span "cycled.module NAME" around the function, child of the daemon's
    trace (the request's traceparent and tracestate), when OpenTelemetry is importable;
    nothing otherwise. An exception leaving the function marks the span failed."""
    ot = _otel()
    if ot is None:
        yield
        return
    propagate, trace = ot
    carrier = {}
    if call.traceparent:
        carrier["traceparent"] = call.traceparent
        if call.tracestate:
            carrier["tracestate"] = call.tracestate
    ctx = propagate.extract(carrier)
    attrs = {"cycled.module": call.module, "cycled.tick_id": call.tick_id, "cycled.attempt": call.attempt, "cycled.tier": call.tier}
    with trace.get_tracer("cycled").start_as_current_span("cycled.module " + call.module, context=ctx, kind=trace.SpanKind.SERVER, attributes=attrs):
        yield


def answer(value: Any) -> dict[str, Any]:
    """The answer of a function that returned value ({"error"} when it is not JSON)."""
    a = {"value": value}
    try:
        json.dumps(a)
    except (TypeError, ValueError) as e:  # the module's bug
        return {"error": {"kind": "internal", "message": "the value is not JSON: %s" % e}}
    return a


def failure(e: BaseException, call: Call) -> dict[str, Any]:
    """The answer of a function that raised e."""
    if isinstance(e, ModuleError):
        return {"error": {"kind": e.kind, "message": str(e) or type(e).__name__}}
    if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
        return {"error": {"kind": "transient", "message": "deadline passed after %.1f ms" % (call.timeout * 1000)}}
    return {"error": {"kind": "internal", "message": "%s: %s" % (type(e).__name__, e)}}


def run_sync(func: ModuleFunc, call: Call) -> dict[str, Any]:
    """Runs a plain function on this thread and returns its answer."""
    try:
        with span(call):
            value = func(call)
    except Exception as e:  # noqa: BLE001 - any exception is answered
        return failure(e, call)
    return answer(value)


async def run_async(func: ModuleFunc, call: Call) -> dict[str, Any]:
    """Runs an async function on the running loop, cancelled when the call's deadline
    passes, and returns its answer."""

    async def traced() -> Any:
        with span(call):
            return await func(call)

    try:
        value = await asyncio.wait_for(traced(), timeout=call.remaining())
    except Exception as e:  # noqa: BLE001 - any exception is answered
        return failure(e, call)
    return answer(value)
