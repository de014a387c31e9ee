"""Client of the cycled daemon's HTTP API (standard library only)."""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Iterator, Mapping

from .errors import APIError
from .types import Event, Summary

__all__ = ["Client", "DEFAULT_URL"]

DEFAULT_URL = "http://127.0.0.1:8080"


class Client:
    """A client of one daemon.

    ``base_url`` is the daemon's address; ``token`` the admin bearer token (None for a
    token-less daemon on loopback); ``timeout`` the socket timeout of ordinary requests,
    in seconds. Error answers raise APIError with the daemon's code, message and field.
    """

    def __init__(self, base_url: str = DEFAULT_URL, token: str | None = None, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    # -- plumbing -------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        admin: bool = False,
        timeout: float | None = None,
    ) -> tuple[int, Any, Any]:
        """Sends one request; returns (status, decoded JSON or None, headers: a
        case-insensitive http.client.HTTPMessage) for 2xx and
        304 answers and raises APIError for the others."""
        url = self.base_url + path
        if params:
            q = {k: v for k, v in params.items() if v is not None}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        data = None
        req = urllib.request.Request(url, method=method)
        if body is not None:
            data = json.dumps(body).encode()
            req.add_header("Content-Type", "application/json")
        elif method in ("POST", "PUT", "PATCH"):
            req.add_header("Content-Type", "application/json")
        if admin and self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, data=data, timeout=timeout or self.timeout) as resp:
                raw = resp.read()
                return resp.status, _decode(raw), resp.headers  # case-insensitive
        except urllib.error.HTTPError as e:
            raw = e.read()
            if e.code == 304:
                return 304, None, e.headers
            decoded = _decode(raw)
            err = decoded.get("error") if isinstance(decoded, dict) else None
            if isinstance(err, dict):
                raise APIError(e.code, str(err.get("code", "")), str(err.get("message", "")), str(err.get("field") or ""), decoded) from None
            raise APIError(e.code, "http_%d" % e.code, raw[:200].decode(errors="replace"), body=decoded) from None

    def _get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params)[1]

    # -- reads ----------------------------------------------------------------------

    def latest(self) -> Summary:
        """The latest tick's summary (APIError 503 ``no_tick_yet`` before the first)."""
        return Summary.from_dict(self._get("/ticks/latest"))

    def tick(self, tick_id: int) -> Summary:
        """The summary of one tick (APIError 404 once it has left the history)."""
        return Summary.from_dict(self._get("/ticks/%d" % tick_id))

    def ticks(self, limit: int | None = None, before: int | None = None) -> list[Summary]:
        """Up to ``limit`` summaries with ids below ``before``, newest first."""
        body = self._get("/ticks", limit=limit, before=before)
        return [Summary.from_dict(s) for s in body.get("ticks", [])]

    def wait(self, after: int, timeout: float = 30.0) -> Summary | None:
        """Long-polls for a tick newer than ``after``: returns it (the tick after
        ``after`` if the history still has it, else the latest), or None when
        ``timeout`` seconds (at most 30 per request; longer waits poll again) pass
        without one."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None
            wait = min(left, 30.0)
            try:
                status, body, _ = self.request(
                    "GET", "/ticks/latest", params={"wait": "%.3fs" % wait, "after": after}, timeout=wait + self.timeout
                )
            except APIError as e:
                if e.status != 503:  # 503: no tick yet, keep waiting
                    raise
                continue
            if status == 200 and body and int(body.get("tick_id", 0)) > after:
                s = Summary.from_dict(body)
                if s.tick_id != after + 1:
                    try:
                        return self.tick(after + 1)
                    except APIError:
                        pass
                return s

    def stream(self, last_event_id: str | None = None, reconnect: bool = True, read_timeout: float = 10.0) -> Iterator[Event]:
        """Iterates over ``GET /ticks/stream`` events (tick, breaker, emergency).

        On a dropped connection (or none within ``read_timeout``: the daemon pings every
        2 s) it reconnects with ``Last-Event-ID``, and the daemon replays the ticks
        missed (up to 256) so that the iteration has no gap; with ``reconnect=False`` it
        ends instead. Close the iterator (or break out of the loop) to disconnect.
        """
        last = last_event_id
        backoff = 0.05
        while True:
            try:
                for ev in self._stream_once(last, read_timeout):
                    backoff = 0.05
                    if ev.id:
                        last = ev.id
                    yield ev
            except (OSError, http.client.HTTPException):
                pass
            if not reconnect:
                return
            time.sleep(backoff)
            backoff = min(backoff * 2, 2.0)

    def _stream_once(self, last: str | None, read_timeout: float) -> Iterator[Event]:
        u = urllib.parse.urlsplit(self.base_url)
        conn_cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        conn = conn_cls(u.hostname or "127.0.0.1", u.port, timeout=read_timeout)
        try:
            headers = {"Accept": "text/event-stream"}
            if last:
                headers["Last-Event-ID"] = last
            conn.request("GET", (u.path or "") + "/ticks/stream", headers=headers)
            resp = conn.getresponse()
            if resp.status != 200:
                raw = resp.read()
                raise APIError(resp.status, "http_%d" % resp.status, raw[:200].decode(errors="replace"))
            type_, id_, data = "", "", []
            while True:
                line = resp.readline()
                if not line:
                    return  # the daemon ended the stream (shutdown)
                text = line.decode("utf-8").rstrip("\r\n")
                if text == "":
                    if data or type_:
                        yield Event.parse(type_, id_, "\n".join(data))
                    type_, id_, data = "", "", []
                    continue
                if text.startswith(":"):
                    continue  # a comment: the daemon's ping
                name, _, value = text.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    type_ = value
                elif name == "id":
                    id_ = value
                elif name == "data":
                    data.append(value)
        finally:
            conn.close()

    def modules(self) -> list[dict[str, Any]]:
        """Every module: spec, kind, breaker, last result, last-known-good."""
        return list(self._get("/modules").get("modules", []))

    def module(self, name: str) -> dict[str, Any]:
        """One module (APIError 404 when unknown)."""
        return dict(self._get("/modules/" + urllib.parse.quote(name, safe="")))

    def breakers(self) -> list[dict[str, Any]]:
        """Every breaker with its state and counters."""
        return list(self._get("/breakers").get("breakers", []))

    def emergency(self) -> dict[str, Any]:
        """The emergency state (the last reason stays after recovery)."""
        return dict(self._get("/emergency"))

    def blackboard(self, key: str | None = None) -> Any:
        """The whole blackboard, or one key's entry."""
        if key is None:
            return self._get("/blackboard")
        return self._get("/blackboard/" + urllib.parse.quote(key, safe=""))

    # -- admin ----------------------------------------------------------------------

    def step(self) -> Summary:
        """Runs one tick in step mode (``cycle.period: 0``) and returns its summary."""
        return Summary.from_dict(self.request("POST", "/ticks", admin=True)[1])

    def register(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Registers a module (``POST /modules``); the answer describes it."""
        return dict(self.request("POST", "/modules", dict(spec), admin=True)[1] or {})

    def deregister(self, name: str) -> None:
        """Removes a runtime module (``DELETE /modules/{name}``)."""
        self.request("DELETE", "/modules/" + urllib.parse.quote(name, safe=""), admin=True)

    def reset_breaker(self, name: str) -> dict[str, Any]:
        """Closes a breaker (``POST /breakers/{name}/reset``)."""
        return dict(self.request("POST", "/breakers/%s/reset" % urllib.parse.quote(name, safe=""), admin=True)[1] or {})

    def reset_emergency(self) -> dict[str, Any]:
        """Resets a latched emergency (``POST /emergency/reset``)."""
        return dict(self.request("POST", "/emergency/reset", admin=True)[1] or {})

    def reload(self) -> dict[str, Any]:
        """Reloads the configuration file (``POST /config/reload``)."""
        return dict(self.request("POST", "/config/reload", admin=True)[1] or {})

    def inject_faults(self, name: str, **faults: Any) -> Any:
        """Changes a builtin module's fault injection, e.g. ``fail_rate=1`` or ``reset=True``."""
        return self.request("POST", "/modules/%s/faults" % urllib.parse.quote(name, safe=""), faults, admin=True)[1]


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None
