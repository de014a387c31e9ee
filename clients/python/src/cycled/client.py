"""The synchronous client of the cycled daemon's HTTP API (standard library only).

It drives the same request programs as AsyncClient (``_wire``) over ``http.client``.
"""

from __future__ import annotations

import http.client
import ssl
import time
from datetime import datetime
from typing import Any, Iterator, Mapping, TypeVar

from . import _wire
from ._wire import DEFAULT_URL, Headers, Program, Request, Response
from .errors import ApiError, DaemonUnavailable
from .types import Breaker, Emergency, Event, RecordedEvent, Summary, TickPage

__all__ = ["Client", "DEFAULT_URL"]

T = TypeVar("T")


class Client:
    """A client of one daemon.

    ``base_url`` is the daemon's address; ``token`` the admin bearer token (None for a
    token-less daemon on loopback); ``timeout`` the socket timeout of ordinary requests,
    in seconds. An error answer raises ApiError (``code``, ``message``, ``field``,
    ``problems``); no answer at all raises DaemonUnavailable.
    """

    def __init__(self, base_url: str = DEFAULT_URL, token: str | None = None, timeout: float = 10.0) -> None:
        self._wire = _wire.Wire(base_url, token)
        self.base_url = self._wire.base_url
        self.token = token
        self.timeout = timeout

    # -- plumbing -------------------------------------------------------------------

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        w = self._wire
        if w.scheme == "https":
            return http.client.HTTPSConnection(w.host, w.port, timeout=timeout, context=ssl.create_default_context())
        return http.client.HTTPConnection(w.host, w.port, timeout=timeout)

    def _send(self, req: Request) -> Response:
        conn = self._connection(req.timeout or self.timeout)
        try:
            try:
                conn.request(req.method, req.target, body=req.body, headers=dict(req.headers))
                resp = conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException) as e:
                raise DaemonUnavailable(self.base_url, e) from e
            return self._wire.read(resp.status, Headers(resp.getheaders()), raw)
        finally:
            conn.close()

    def _run(self, prog: Program[T]) -> T:
        try:
            req = next(prog)
            while True:
                try:
                    resp = self._send(req)
                except (ApiError, DaemonUnavailable) as e:
                    req = prog.throw(e)
                else:
                    req = prog.send(resp)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    def request(
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
        resp = self._send(self._wire.build(method, path, body, params=params, admin=admin, timeout=timeout))
        return resp.status, resp.body, resp.headers

    # -- reads ----------------------------------------------------------------------

    def latest(self) -> Summary:
        """The latest tick's summary (ApiError 503 ``no_tick_yet`` before the first)."""
        return self._run(_wire.latest(self._wire))

    def tick(self, tick_id: int) -> Summary:
        """The summary of one tick (ApiError 404 once it has left the history)."""
        return self._run(_wire.tick(self._wire, tick_id))

    def ticks(
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
        """Searches the history, newest first: up to ``limit`` summaries with ids below
        ``before``, of overall ``severity`` (ok, degraded, critical), in which ``module``'s
        line is not nominal, with a line in ``status`` (retried, failed, timed_out, …),
        started in [``since``, ``until``) (aware datetimes or RFC 3339). The filters
        combine; the page's ``next_before`` continues it."""
        return self._run(
            _wire.ticks(self._wire, limit=limit, before=before, severity=severity, module=module, status=status, since=since, until=until)
        )

    def wait(self, after: int, timeout: float = 30.0) -> Summary | None:
        """Long-polls for a tick newer than ``after``: returns it (the tick after
        ``after`` if the history still has it, else the latest), or None when
        ``timeout`` seconds (at most 30 per request; longer waits poll again) pass
        without one."""
        return self._run(_wire.wait(self._wire, after, timeout, self.timeout))

    def stream(self, last_event_id: str | None = None, reconnect: bool = True, read_timeout: float = 10.0) -> Iterator[Event]:
        """Iterates over ``GET /ticks/stream`` events (tick, breaker, emergency, shed).

        On a dropped connection (or none within ``read_timeout``: the daemon pings every
        2 s) it reconnects with ``Last-Event-ID``, and the daemon replays the ticks
        missed (up to 256) so that the iteration has no gap; while the daemon is down it
        keeps trying (backoff up to 2 s), and after a 429 or 5xx refusal it waits as
        told (Retry-After) and tries again; other refusals raise ApiError. When the daemon on the other end is another
        process (it was restarted), a ``restart`` event comes before its first tick. With
        ``reconnect=False`` it ends instead (DaemonUnavailable when the first connection
        fails). Close the iterator (or break out of the loop) to disconnect.
        """
        state = _wire.StreamState(last_event_id)
        while True:
            delay = None
            try:
                for ev in self._stream_once(state, read_timeout):
                    yield ev
            except DaemonUnavailable:
                if not reconnect and state.connects == 0:
                    raise
            except ApiError as e:
                delay = state.refused_delay(e) if reconnect else None
                if delay is None:
                    raise
            except (OSError, http.client.HTTPException):
                pass
            if not reconnect:
                return
            time.sleep(delay if delay is not None else state.next_delay())

    def _stream_once(self, state: _wire.StreamState, read_timeout: float) -> Iterator[Event]:
        req = state.request(self._wire)
        conn = self._connection(read_timeout)
        try:
            try:
                conn.request(req.method, req.target, headers=dict(req.headers))
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                raise DaemonUnavailable(self.base_url, e) from e
            if resp.status != 200:
                raw = resp.read()
                raise _wire.api_error(resp.status, Headers(resp.getheaders()), raw, _wire._decode(raw))
            state.connected()
            parser = _wire.SSEParser()
            while True:
                line = resp.readline()
                if not line:
                    return  # the daemon ended the stream (shutdown)
                for ev in parser.feed(line):
                    yield from state.accept(ev)
        finally:
            conn.close()

    def events(self, after: int | None = None, kind: str | None = None, limit: int | None = None) -> list[RecordedEvent]:
        """The flight recorder's events with ids above ``after``, of ``kind``, oldest
        first (ApiError 501 without a recorder)."""
        return self._run(_wire.events(self._wire, after=after, kind=kind, limit=limit))

    def modules(self) -> list[dict[str, Any]]:
        """Every module: spec, kind, breaker, last result, last-known-good."""
        return list(self._run(_wire.as_dict(self._wire.build("GET", "/modules"))).get("modules", []))

    def module(self, name: str) -> dict[str, Any]:
        """One module (ApiError 404 when unknown)."""
        return self._run(_wire.as_dict(self._wire.build("GET", "/modules/" + _wire.quote(name))))

    def breakers(self) -> list[Breaker]:
        """Every breaker with its state and counters."""
        return self._run(_wire.breakers(self._wire))

    def emergency(self) -> Emergency:
        """The emergency state (the last reason stays after recovery)."""
        return self._run(_wire.emergency(self._wire))

    def blackboard(self, key: str | None = None) -> Any:
        """The whole blackboard, or one key's entry."""
        path = "/blackboard" if key is None else "/blackboard/" + _wire.quote(key)
        return self._run(_wire.call(self._wire.build("GET", path)))

    def health(self) -> dict[str, Any]:
        """GET /healthz: status, version, mode, last tick (ApiError 503 when the
        watchdog fired)."""
        return self._run(_wire.as_dict(self._wire.build("GET", "/healthz")))

    # -- admin ----------------------------------------------------------------------

    def step(self) -> Summary:
        """Runs one tick in step mode (``cycle.period: 0``) and returns its summary."""
        return self._run(_wire.step(self._wire))

    def register(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Registers a module (``POST /modules``); the answer describes it. An invalid
        module raises ApiError 422 with every finding in ``problems``."""
        return self._run(_wire.as_dict(self._wire.build("POST", "/modules", dict(spec), admin=True)))

    def deregister(self, name: str) -> None:
        """Removes a runtime module (``DELETE /modules/{name}``)."""
        self._run(_wire.call(self._wire.build("DELETE", "/modules/" + _wire.quote(name), admin=True)))

    def reset_breaker(self, name: str) -> Breaker:
        """Closes a breaker (``POST /breakers/{name}/reset``); returns it after the reset."""
        return self._run(_wire.reset_breaker(self._wire, name))

    def reset_emergency(self) -> dict[str, Any]:
        """Resets a latched emergency (``POST /emergency/reset``)."""
        return self._run(_wire.as_dict(self._wire.build("POST", "/emergency/reset", admin=True)))

    def reload(self) -> dict[str, Any]:
        """Reloads the configuration file (``POST /config/reload``)."""
        return self._run(_wire.as_dict(self._wire.build("POST", "/config/reload", admin=True)))

    def inject(self, name: str, **faults: Any) -> dict[str, Any]:
        """Changes a builtin module's fault injection (``POST /modules/{name}/faults``),
        e.g. ``fail_rate=1``, ``latency="20ms"`` or ``reset=True``."""
        return self._run(_wire.as_dict(self._wire.build("POST", "/modules/%s/faults" % _wire.quote(name), faults, admin=True)))

    inject_faults = inject
