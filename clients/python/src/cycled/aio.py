"""The asyncio client of the cycled daemon's HTTP API (standard library only).

It drives the same request programs as the synchronous Client (``_wire``) over an
asyncio HTTP/1.1 client with keep-alive connections (``_aio``).
"""

from __future__ import annotations

import asyncio
import ssl
from datetime import datetime
from typing import Any, AsyncIterator, Mapping, TypeVar

from . import _aio, _wire
from ._wire import DEFAULT_URL, Headers, Program, Request, Response
from .errors import ApiError, DaemonUnavailable
from .types import Breaker, Emergency, Event, RecordedEvent, Summary, TickPage

__all__ = ["AsyncClient"]

T = TypeVar("T")

_TRANSPORT_ERRORS = (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, _aio.ProtocolError, ssl.SSLError)


class AsyncClient:
    """An asyncio client of one daemon, with the calls of Client as coroutines.

    ``base_url`` is the daemon's address; ``token`` the admin bearer token; ``timeout``
    the deadline of ordinary requests, in seconds. An error answer raises ApiError
    (``code``, ``message``, ``field``, ``problems``); no answer at all raises
    DaemonUnavailable. Connections are kept alive and reused: close the client with
    ``await client.aclose()`` or ``async with AsyncClient(...) as client``.
    """

    def __init__(self, base_url: str = DEFAULT_URL, token: str | None = None, timeout: float = 10.0) -> None:
        self._wire = _wire.Wire(base_url, token)
        self.base_url = self._wire.base_url
        self.token = token
        self.timeout = timeout
        self._http = _aio.AsyncHTTP(self._wire.scheme, self._wire.host, self._wire.port)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the kept-alive connections."""
        await self._http.aclose()

    # -- plumbing -------------------------------------------------------------------

    async def _send(self, req: Request) -> Response:
        try:
            status, headers, raw = await self._http.request(req, req.timeout or self.timeout)
        except _TRANSPORT_ERRORS as e:
            raise DaemonUnavailable(self.base_url, e if str(e) else type(e).__name__) from e
        return self._wire.read(status, headers, raw)

    async def _run(self, prog: Program[T]) -> T:
        try:
            req = next(prog)
            while True:
                try:
                    resp = await self._send(req)
                except (ApiError, DaemonUnavailable) as e:
                    req = prog.throw(e)
                else:
                    req = prog.send(resp)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        admin: bool = False,
        timeout: float | None = None,
    ) -> tuple[int, Any, Headers]:
        """Sends one request; returns (status, decoded JSON or None, case-insensitive
        headers) for 2xx and 304 answers and raises ApiError for the others."""
        resp = await self._send(self._wire.build(method, path, body, params=params, admin=admin, timeout=timeout))
        return resp.status, resp.body, resp.headers

    # -- reads ----------------------------------------------------------------------

    async def latest(self) -> Summary:
        """The latest tick's summary (ApiError 503 ``no_tick_yet`` before the first)."""
        return await self._run(_wire.latest(self._wire))

    async def tick(self, tick_id: int) -> Summary:
        """The summary of one tick (ApiError 404 once it has left the history)."""
        return await self._run(_wire.tick(self._wire, tick_id))

    async def ticks(
        self,
        limit: int | None = None,
        before: int | None = None,
        *,
        severity: str | None = None,
        module: str | None = None,
        status: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> TickPage:
        """Searches the history, newest first (the filters of Client.ticks)."""
        return await self._run(
            _wire.ticks(self._wire, limit=limit, before=before, severity=severity, module=module, status=status, since=since, until=until)
        )

    async def wait(self, after: int, timeout: float = 30.0) -> Summary | None:
        """Long-polls for a tick newer than ``after`` (see Client.wait); None when
        ``timeout`` seconds pass without one."""
        return await self._run(_wire.wait(self._wire, after, timeout, self.timeout))

    async def stream(self, last_event_id: str | None = None, reconnect: bool = True, read_timeout: float = 10.0) -> AsyncIterator[Event]:
        """Iterates over ``GET /ticks/stream`` events (tick, breaker, emergency, shed).

        Reconnects as Client.stream does: with ``Last-Event-ID`` (the daemon replays the
        ticks missed, so the iteration has no gap), after ``read_timeout`` seconds
        without a byte (the daemon pings every 2 s), and, while the daemon is down, with
        a backoff up to 2 s (after a 429 or 5xx refusal, its Retry-After); a ``restart`` event announces a restarted daemon before its
        first tick. With ``reconnect=False`` it ends at the first disconnection
        (DaemonUnavailable when the first connection fails). Leave the ``async for``
        (or ``aclose()`` the iterator) to disconnect."""
        state = _wire.StreamState(last_event_id)
        while True:
            delay = None
            try:
                async for ev in self._stream_once(state, read_timeout):
                    yield ev
            except DaemonUnavailable:
                if not reconnect and state.connects == 0:
                    raise
            except ApiError as e:
                delay = state.refused_delay(e) if reconnect else None
                if delay is None:
                    raise
            except _TRANSPORT_ERRORS:
                pass
            if not reconnect:
                return
            await asyncio.sleep(delay if delay is not None else state.next_delay())

    async def _stream_once(self, state: _wire.StreamState, read_timeout: float) -> AsyncIterator[Event]:
        req = state.request(self._wire)
        try:
            status, headers, body, conn = await asyncio.wait_for(self._http.open(req), read_timeout)
        except _TRANSPORT_ERRORS as e:
            raise DaemonUnavailable(self.base_url, e if str(e) else type(e).__name__) from e
        try:
            if status != 200:
                raw = await asyncio.wait_for(body.read_all(), read_timeout)
                raise _wire.api_error(status, headers, raw, _wire._decode(raw))
            state.connected()
            parser = _wire.SSEParser()
            while True:
                chunk = await asyncio.wait_for(body.read(), read_timeout)
                if not chunk:
                    return  # the daemon ended the stream (shutdown)
                for ev in parser.feed(chunk):
                    for out in state.accept(ev):
                        yield out
        finally:
            conn.close()

    async def events(self, after: int | None = None, kind: str | None = None, limit: int | None = None) -> list[RecordedEvent]:
        """The flight recorder's events with ids above ``after``, of ``kind``, oldest
        first (ApiError 501 without a recorder)."""
        return await self._run(_wire.events(self._wire, after=after, kind=kind, limit=limit))

    async def modules(self) -> list[dict[str, Any]]:
        """Every module: spec, kind, breaker, last result, last-known-good."""
        return list((await self._run(_wire.as_dict(self._wire.build("GET", "/modules")))).get("modules", []))

    async def module(self, name: str) -> dict[str, Any]:
        """One module (ApiError 404 when unknown)."""
        return await self._run(_wire.as_dict(self._wire.build("GET", "/modules/" + _wire.quote(name))))

    async def breakers(self) -> list[Breaker]:
        """Every breaker with its state and counters."""
        return await self._run(_wire.breakers(self._wire))

    async def emergency(self) -> Emergency:
        """The emergency state (the last reason stays after recovery)."""
        return await self._run(_wire.emergency(self._wire))

    async def blackboard(self, key: str | None = None) -> Any:
        """The whole blackboard, or one key's entry."""
        path = "/blackboard" if key is None else "/blackboard/" + _wire.quote(key)
        return await self._run(_wire.call(self._wire.build("GET", path)))

    async def health(self) -> dict[str, Any]:
        """GET /healthz (ApiError 503 when the watchdog fired)."""
        return await self._run(_wire.as_dict(self._wire.build("GET", "/healthz")))

    # -- admin ----------------------------------------------------------------------

    async def step(self) -> Summary:
        """Runs one tick in step mode (``cycle.period: 0``) and returns its summary."""
        return await self._run(_wire.step(self._wire))

    async def register(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Registers a module (``POST /modules``); ApiError 422 lists ``problems``."""
        return await self._run(_wire.as_dict(self._wire.build("POST", "/modules", dict(spec), admin=True)))

    async def deregister(self, name: str) -> None:
        """Removes a runtime module (``DELETE /modules/{name}``)."""
        await self._run(_wire.call(self._wire.build("DELETE", "/modules/" + _wire.quote(name), admin=True)))

    async def reset_breaker(self, name: str) -> Breaker:
        """Closes a breaker (``POST /breakers/{name}/reset``); returns it after the reset."""
        return await self._run(_wire.reset_breaker(self._wire, name))

    async def reset_emergency(self) -> dict[str, Any]:
        """Resets a latched emergency (``POST /emergency/reset``)."""
        return await self._run(_wire.as_dict(self._wire.build("POST", "/emergency/reset", admin=True)))

    async def reload(self) -> dict[str, Any]:
        """Reloads the configuration file (``POST /config/reload``)."""
        return await self._run(_wire.as_dict(self._wire.build("POST", "/config/reload", admin=True)))

    async def inject(self, name: str, **faults: Any) -> dict[str, Any]:
        """Changes a builtin module's fault injection (``POST /modules/{name}/faults``)."""
        return await self._run(_wire.as_dict(self._wire.build("POST", "/modules/%s/faults" % _wire.quote(name), faults, admin=True)))
