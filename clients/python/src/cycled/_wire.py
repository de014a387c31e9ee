"""What the synchronous and the asynchronous client share: building requests, reading
answers, parsing the event stream, and each API call as a program of requests.

Nothing here does I/O. An API call is a generator that yields Requests and receives
Responses (or has the transport's exception thrown into it) and returns the call's
result; Client and AsyncClient each drive the same programs over their own transport, so
a call's logic (paths, parameters, decoding, the long-poll loop of wait) has one home.
"""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.parse
from datetime import datetime
from typing import Any, Generator, Iterable, Iterator, Mapping, TypeVar

from .errors import ApiError
from .types import Breaker, Emergency, Event, Problem, RecordedEvent, Summary, TickPage

T = TypeVar("T")

USER_AGENT = "cycled-python"
DEFAULT_URL = "http://127.0.0.1:8080"
MAX_WAIT = 30.0  # the daemon's longest long-poll, in seconds


class Headers(Mapping[str, str]):
    """Response headers: a read-only mapping with case-insensitive names (the last value
    of a repeated header wins)."""

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        self._d: dict[str, tuple[str, str]] = {}
        for k, v in items:
            self._d[k.lower()] = (k, v)

    def __getitem__(self, key: str) -> str:
        return self._d[key.lower()][1]

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._d.values())

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._d

    def __repr__(self) -> str:
        return "Headers(%r)" % dict(self._d.values())


@dataclasses.dataclass(frozen=True)
class Request:
    """One HTTP request to the daemon: ``target`` is the path with its query, relative
    to the base URL's path; ``timeout`` (seconds) overrides the client's when set."""

    method: str
    target: str
    headers: Mapping[str, str]
    body: bytes | None = None
    timeout: float | None = None


@dataclasses.dataclass(frozen=True)
class Response:
    """A decoded 2xx or 304 answer: ``body`` is the JSON (None when empty, the text when
    the body is not JSON)."""

    status: int
    headers: Headers
    body: Any


Program = Generator[Request, Response, T]


class Wire:
    """Builds the requests of one daemon and reads its answers."""

    def __init__(self, base_url: str, token: str | None) -> None:
        self.base_url = base_url.rstrip("/")
        u = urllib.parse.urlsplit(self.base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("daemon URL %r: want http://host:port or https://host:port" % base_url)
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.prefix = u.path.rstrip("/")
        self.token = token

    def build(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        admin: bool = False,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Request:
        """The request of ``method path``; None-valued params are left out, datetimes
        are sent as RFC 3339, booleans as true/false."""
        target = self.prefix + path
        if params:
            q = {k: _param(v) for k, v in params.items() if v is not None}
            if q:
                target += "?" + urllib.parse.urlencode(q)
        h = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        elif method in ("POST", "PUT", "PATCH"):
            h["Content-Type"] = "application/json"
            data = b""
        if admin and self.token:
            h["Authorization"] = "Bearer " + self.token
        if headers:
            h.update(headers)
        return Request(method, target, h, data, timeout)

    def read(self, status: int, headers: Headers, raw: bytes) -> Response:
        """The Response of a 2xx or 304 answer; raises ApiError for any other."""
        body = _decode(raw)
        if 200 <= status < 300 or status == 304:
            return Response(status, headers, body)
        raise api_error(status, headers, raw, body)


def api_error(status: int, headers: Mapping[str, str], raw: bytes, body: Any) -> ApiError:
    """The ApiError of an error answer (the daemon's error object, or the status and an
    excerpt of the body of an answer that has none, e.g. from a proxy)."""
    retry_after = None
    try:
        if headers.get("Retry-After"):
            retry_after = float(headers["Retry-After"])
    except ValueError:
        pass
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        problems = [Problem.from_dict(p) for p in err.get("problems") or [] if isinstance(p, dict)]
        return ApiError(
            status,
            str(err.get("code") or ""),
            str(err.get("message") or ""),
            str(err.get("field") or ""),
            body,
            problems=problems,
            retry_after=retry_after,
        )
    return ApiError(status, "http_%d" % status, raw[:200].decode(errors="replace"), body=body, retry_after=retry_after)


def _param(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, datetime):
        if v.tzinfo is None:
            raise ValueError("a naive datetime has no time zone: give since/until with tzinfo")
        return v.isoformat()
    return str(v)


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def quote(name: str) -> str:
    """A path segment: a module, breaker or key name with every reserved byte escaped."""
    return urllib.parse.quote(name, safe="")


# -- the API's calls, as programs ------------------------------------------------------


def call(req: Request) -> Program[Any]:
    """One request; returns its decoded body."""
    resp = yield req
    return resp.body


def latest(w: Wire) -> Program[Summary]:
    """GET /ticks/latest."""
    resp = yield w.build("GET", "/ticks/latest")
    return Summary.from_dict(resp.body)


def tick(w: Wire, tick_id: int) -> Program[Summary]:
    """GET /ticks/{id}."""
    resp = yield w.build("GET", "/ticks/%d" % tick_id)
    return Summary.from_dict(resp.body)


def ticks(w: Wire, **params: Any) -> Program[TickPage]:
    """GET /ticks with the API's filters."""
    resp = yield w.build("GET", "/ticks", params=params)
    body = resp.body or {}
    return TickPage(
        [Summary.from_dict(s) for s in body.get("ticks") or []],
        int(body.get("next_before") or 0),
        int(body.get("history_cap") or 0),
    )


def wait(w: Wire, after: int, timeout: float, grace: float) -> Program[Summary | None]:
    """Long-polls GET /ticks/latest for a tick newer than after (see Client.wait)."""
    end = time.monotonic() + timeout
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return None
        step = min(left, MAX_WAIT)
        req = w.build("GET", "/ticks/latest", params={"wait": "%.3fs" % step, "after": after}, timeout=step + grace)
        try:
            resp = yield req
        except ApiError as e:
            if e.status != 503 or e.code == "closed":  # 503 no tick yet: keep waiting
                raise
            continue
        if resp.status != 200 or not isinstance(resp.body, dict) or int(resp.body.get("tick_id") or 0) <= after:
            continue
        s = Summary.from_dict(resp.body)
        if s.tick_id != after + 1:
            # A long-poll answers the latest; the tick right after `after` is the one
            # asked for while the history still has it.
            try:
                resp = yield w.build("GET", "/ticks/%d" % (after + 1))
                return Summary.from_dict(resp.body)
            except ApiError:
                pass
        return s


def events(w: Wire, **params: Any) -> Program[list[RecordedEvent]]:
    """GET /events."""
    resp = yield w.build("GET", "/events", params=params)
    return [RecordedEvent.from_dict(e) for e in (resp.body or {}).get("events") or []]


def breakers(w: Wire) -> Program[list[Breaker]]:
    """GET /breakers."""
    resp = yield w.build("GET", "/breakers")
    return [Breaker.from_dict(b) for b in (resp.body or {}).get("breakers") or []]


def emergency(w: Wire) -> Program[Emergency]:
    """GET /emergency."""
    resp = yield w.build("GET", "/emergency")
    return Emergency.from_dict(resp.body or {})


def step(w: Wire) -> Program[Summary]:
    """POST /ticks."""
    resp = yield w.build("POST", "/ticks", admin=True)
    return Summary.from_dict(resp.body)


def reset_breaker(w: Wire, name: str) -> Program[Breaker]:
    """POST /breakers/{name}/reset."""
    resp = yield w.build("POST", "/breakers/%s/reset" % quote(name), admin=True)
    return Breaker.from_dict(resp.body or {})


def as_dict(req: Request) -> Program[dict[str, Any]]:
    """One request whose answer is a JSON object (an empty one for 204)."""
    resp = yield req
    return dict(resp.body) if isinstance(resp.body, dict) else {}


# -- the event stream ------------------------------------------------------------------


class SSEParser:
    """Parses a text/event-stream fed in pieces of any size into Events."""

    def __init__(self) -> None:
        self._buf = b""
        self._type = ""
        self._id = ""
        self._data: list[str] = []
        self.retry: float | None = None  # the server's reconnection delay, in seconds
        self.comments = 0  # comment lines seen (the daemon's pings among them)

    def feed(self, chunk: bytes) -> list[Event]:
        """Adds bytes of the stream; returns the events they complete."""
        self._buf += chunk
        out: list[Event] = []
        while True:
            i = self._buf.find(b"\n")
            if i < 0:
                return out
            line, self._buf = self._buf[:i], self._buf[i + 1 :]
            ev = self._line(line.rstrip(b"\r").decode("utf-8", errors="replace"))
            if ev is not None:
                out.append(ev)

    def _line(self, text: str) -> Event | None:
        if text == "":
            ev = None
            if self._data or self._type:
                ev = Event.parse(self._type, self._id, "\n".join(self._data))
            self._type, self._id, self._data = "", "", []
            return ev
        if text.startswith(":"):
            self.comments += 1
            return None
        name, _, value = text.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._type = value
        elif name == "id":
            self._id = value
        elif name == "data":
            self._data.append(value)
        elif name == "retry" and value.isdigit():
            self.retry = int(value) / 1000.0
        return None


def event_run(event_id: str) -> str:
    """The daemon process (boot) part of a stream event id "<boot>-<tick id>"."""
    boot, sep, _ = event_id.partition("-")
    return boot if sep else ""


class StreamState:
    """What a reconnecting stream remembers across connections: the last event id (sent
    as Last-Event-ID, for the daemon to replay the ticks missed), the daemon process it
    came from (a restarted daemon cannot replay: the client announces it with a
    ``restart`` event), and the reconnection backoff."""

    MIN_BACKOFF = 0.05
    MAX_BACKOFF = 2.0

    def __init__(self, last_event_id: str | None) -> None:
        self.last_event_id = last_event_id or ""
        self.run = event_run(self.last_event_id)
        self.last_tick = _tick_of(self.last_event_id)
        self.backoff = self.MIN_BACKOFF
        self.connects = 0

    def request(self, w: Wire) -> Request:
        """The request of the next connection."""
        h = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if self.last_event_id:
            h["Last-Event-ID"] = self.last_event_id
        return w.build("GET", "/ticks/stream", headers=h)

    def connected(self) -> None:
        """Records an established connection: the backoff starts over."""
        self.connects += 1
        self.backoff = self.MIN_BACKOFF

    def accept(self, ev: Event) -> list[Event]:
        """The events to deliver for ev: ev, preceded by a ``restart`` event when its id
        comes from another daemon process than the previous one."""
        if not ev.id:
            return [ev]
        run = event_run(ev.id)
        out = []
        if self.run and run and run != self.run:
            out.append(Event("restart", "", {"previous_run": self.run, "run": run, "last_tick": self.last_tick}))
        self.last_event_id, self.run = ev.id, run or self.run
        self.last_tick = _tick_of(ev.id) or self.last_tick
        out.append(ev)
        return out

    def refused_delay(self, err: ApiError) -> float | None:
        """The delay before trying again after the daemon refused the stream with err
        (429 paced, 503 not ready: its Retry-After, at least the backoff), or None when
        the refusal will not pass by waiting."""
        if err.status != 429 and err.status < 500:
            return None
        return max(err.retry_after or 0.0, self.next_delay())

    def next_delay(self) -> float:
        """The delay before the next reconnection (doubling, capped)."""
        d = self.backoff
        self.backoff = min(self.backoff * 2, self.MAX_BACKOFF)
        return d


def _tick_of(event_id: str) -> int:
    _, _, n = event_id.partition("-")
    return int(n) if n.isdigit() else 0

