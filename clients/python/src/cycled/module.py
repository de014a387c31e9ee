"""Serving a Python function as a cycled module over the ``http`` module protocol."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Mapping

from . import _attempt
from ._attempt import ModuleFunc
from ._wire import Headers
from .client import DEFAULT_URL, Client
from .errors import APIError
from .types import Call

__all__ = ["Module", "ModuleFunc"]

MAX_REQUEST = 1 << 20  # the largest tick request accepted
_ANSWERS_KEPT = 256  # answers remembered per (run, idempotency key), for retried requests


class Module:
    """A module written as a plain or ``async`` function of a Call.

    The module serves the daemon's ``http`` module protocol on ``listen`` (port 0: any
    free port), registers itself with the daemon at ``start()`` (``POST /modules``, kind
    ``http``, pointing at itself; a registration of the same name left by an earlier run
    is replaced) and deregisters at ``stop()``. ``run()`` does both around a wait for
    SIGINT or SIGTERM; ``with Module(...)`` starts and stops.

    Each attempt calls ``func(call)``: its return value (JSON-encodable) is the module's
    value; a ModuleError (TransientError, ValidationError, …) fails the attempt with its
    kind; any other exception is ``internal``. The deadline header becomes
    ``call.remaining()``: an ``async`` function is cancelled when it passes (the attempt
    is then ``transient``); a plain one runs on its own thread and should check it. The
    request's W3C trace context (``traceparent``, ``tracestate``) is on the Call, and the
    function runs in a span continuing that trace when ``opentelemetry`` is importable.

    ``spec`` adds registration fields (``ttl``, ``max_attempts``, ``policy``, ``every``,
    ``breaker``, ``idempotent``, …, as in the configuration file); ``timeout`` is the
    per-attempt ``http.timeout`` (e.g. ``"50ms"``).

    Fencing: a daemon of an active/standby group sends its epoch (``X-Cycled-Epoch``).
    With ``fence_epochs=True`` (the default) the module remembers the highest epoch it has
    seen and refuses, with 409 and without calling the function, a request from an older
    one: a deposed daemon that still believes it is active cannot act through it.
    """

    def __init__(
        self,
        func: ModuleFunc,
        *,
        name: str,
        tier: str,
        reads: list[str] | None = None,
        writes: str | None = None,
        daemon: str | None = None,
        token: str | None = None,
        listen: str = "127.0.0.1:0",
        advertise: str | None = None,
        timeout: str | None = None,
        spec: Mapping[str, Any] | None = None,
        register: bool = True,
        fence_epochs: bool = True,
    ) -> None:
        self.func = func
        self.name = name
        self.tier = tier
        self.reads = list(reads or [])
        self.writes = writes
        self.client = Client(daemon or os.environ.get("CYCLED_URL") or DEFAULT_URL, token or os.environ.get("CYCLED_ADMIN_TOKEN") or None)
        self.listen = listen
        self.advertise = advertise
        self.timeout = timeout
        self.extra = dict(spec or {})
        self.register_at_start = register
        self.registration: dict[str, Any] = {}
        self.replaced = False  # whether start() replaced an earlier registration
        self._is_async = _attempt.is_async(func)
        self._server: _Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._threads: list[threading.Thread] = []
        self._answers: collections.OrderedDict[tuple[str, str], dict[str, Any]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._registered = False
        self.fence_epochs = fence_epochs
        self.epoch = 0  # the highest X-Cycled-Epoch seen

    # -- lifecycle ------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The URL the daemon POSTs to (valid after start)."""
        if self._server is None:
            raise RuntimeError("module not started")
        host, port = self._server.server_address[:2]
        return "http://%s:%d/tick" % (self.advertise or str(host), port)

    def spec(self) -> dict[str, Any]:
        """The registration body sent to ``POST /modules``."""
        s: dict[str, Any] = {"name": self.name, "tier": self.tier, "kind": "http", "reads": self.reads}
        if self.writes:
            s["writes"] = self.writes
        s.update(self.extra)
        http_ = dict(s.get("http") or {})
        http_["url"] = self.url
        if self.timeout:
            http_["timeout"] = self.timeout
        s["http"] = http_
        return s

    def serve(self) -> None:
        """Starts serving the protocol (without registering)."""
        if self._server is not None:
            return
        host, _, port = self.listen.rpartition(":")
        self._server = _Server((host or "127.0.0.1", int(port)), _handler(self))
        self._server.daemon_threads = True
        t = threading.Thread(target=self._server.serve_forever, name="cycled-module-" + self.name, daemon=True)
        t.start()
        self._threads.append(t)
        if self._is_async:
            self._loop = asyncio.new_event_loop()
            lt = threading.Thread(target=self._loop.run_forever, name="cycled-loop-" + self.name, daemon=True)
            lt.start()
            self._threads.append(lt)

    def start(self) -> "Module":
        """Serves the protocol and registers with the daemon (replacing a stale
        registration of the same name). Raises APIError when the daemon refuses."""
        self.serve()
        if self.register_at_start:
            try:
                self._register()
            except BaseException:
                self.close()
                raise
        return self

    def _register(self) -> None:
        spec = self.spec()
        try:
            self.registration = self.client.register(spec)
        except APIError as e:
            if e.status != 409 or e.code != "duplicate":
                raise
            # A registration of this name is left from an earlier run (the daemon keeps
            # runtime registrations across restarts) and points at an old port: replace it.
            self.client.deregister(self.name)
            self.registration = self.client.register(spec)
            self.replaced = True
        self._registered = True

    def stop(self) -> None:
        """Deregisters (if registered) and stops serving."""
        if self._registered:
            self._registered = False
            try:
                self.client.deregister(self.name)
            except APIError as e:
                if e.status != 404:
                    print("cycled: deregistration of %s failed: %s" % (self.name, e), file=sys.stderr)
            except OSError as e:
                print("cycled: deregistration of %s failed: %s" % (self.name, e), file=sys.stderr)
        self.close()

    def close(self) -> None:
        """Stops serving without deregistering (as if the process had died)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server.close_connections()
            self._server = None
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop = None
        for t in self._threads:
            t.join(timeout=5)
        self._threads = []

    def run(self) -> None:
        """Starts, prints ``registered NAME at URL``, waits for SIGINT or SIGTERM, then
        deregisters and prints ``deregistered NAME``."""
        done = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: done.set())
        self.start()
        print("registered %s at %s" % (self.name, self.url), flush=True)
        try:
            while not done.wait(0.5):
                pass
        finally:
            self.stop()
        print("deregistered %s" % self.name, flush=True)

    def __enter__(self) -> "Module":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- one attempt ----------------------------------------------------------------

    def admit_epoch(self, headers: Mapping[str, str]) -> str | None:
        """Records the request's epoch; returns why it is refused (an epoch older than
        one seen, with ``fence_epochs``), or None."""
        try:
            epoch = int(headers.get(_attempt.HEADER_EPOCH) or 0)
        except ValueError:
            return "bad %s %r" % (_attempt.HEADER_EPOCH, headers.get(_attempt.HEADER_EPOCH))
        with self._lock:
            if self.fence_epochs and epoch < self.epoch:
                return "epoch %d is older than epoch %d already seen: the daemon asking is no longer the active one" % (epoch, self.epoch)
            self.epoch = max(self.epoch, epoch)
        return None

    def handle(self, req: Mapping[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
        """Answers one attempt: ``{"value": …}`` or ``{"error": {"kind", "message"}}``."""
        if not isinstance(headers, Headers):
            headers = Headers(headers.items())
        key = (headers.get(_attempt.HEADER_RUN, ""), headers.get(_attempt.HEADER_IDEMPOTENCY_KEY, ""))
        if key[1]:
            with self._lock:
                if key in self._answers:
                    return self._answers[key]
        call = _attempt.parse_call(req, headers)
        answer = self._invoke(call)
        if "error" in answer:
            return answer  # a failed attempt is run again when the daemon retries it
        if key[1]:
            with self._lock:
                self._answers[key] = answer
                while len(self._answers) > _ANSWERS_KEPT:
                    self._answers.popitem(last=False)
        return answer

    def _invoke(self, call: Call) -> dict[str, Any]:
        if not self._is_async:
            return _attempt.run_sync(self.func, call)
        loop = self._loop
        if loop is None:
            raise RuntimeError("module not started")
        return asyncio.run_coroutine_threadsafe(_attempt.run_async(self.func, call), loop).result()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conns: set[socket.socket] = set()
        self.conns_lock = threading.Lock()

    def close_connections(self) -> None:
        """Closes the daemon's keep-alive connections, whose threads outlive shutdown()."""
        with self.conns_lock:
            conns, self.conns = self.conns, set()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return  # the daemon closed a connection at a deadline or at shutdown
        super().handle_error(request, client_address)


def _handler(module: Module) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the daemon reuses its connection

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in two writes: without TCP_NODELAY the second waits
            # for the daemon's delayed ACK (tens of milliseconds of the tier's budget).
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            srv: _Server = self.server  # type: ignore[assignment]
            with srv.conns_lock:
                srv.conns.add(self.request)

        def finish(self) -> None:
            srv: _Server = self.server  # type: ignore[assignment]
            with srv.conns_lock:
                srv.conns.discard(self.request)
            super().finish()

        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > MAX_REQUEST:
                self._answer(413, {"error": {"kind": "contract", "message": "request too large"}})
                return
            try:
                req = json.loads(self.rfile.read(length))
                if not isinstance(req, dict) or "tick_id" not in req:
                    raise ValueError("not a tick request")
            except ValueError as e:
                self._answer(400, {"message": "bad request: %s" % e})  # downstream for the daemon
                return
            headers = Headers(self.headers.items())  # names are case-insensitive
            refused = module.admit_epoch(headers)
            if refused is not None:
                self._answer(409, {"message": refused})  # downstream for the deposed daemon
                return
            self._answer(200, module.handle(req, headers))

        def _answer(self, status: int, obj: Mapping[str, Any]) -> None:
            body = json.dumps(obj).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the daemon gave up on this attempt at its deadline

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # one line per attempt would be noise

    return Handler
