"""A small asyncio HTTP/1.1 client on asyncio streams: keep-alive connections kept in a
pool, Content-Length, chunked and read-to-close bodies, a deadline per request, and a
streamed body for the event stream. Standard library only."""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Any

from ._wire import Headers, Request

MAX_HEADER_BYTES = 64 << 10  # the most header bytes read from one answer
MAX_BODY = 64 << 20  # the largest body read into memory
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


class ProtocolError(Exception):
    """The daemon's answer is not HTTP/1.1 the client understands."""


class _Conn:
    """One connection; ``reused`` once it has carried an exchange."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reused = False
        self.idle_since = 0.0

    def usable(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        self.writer.close()


class Body:
    """A streamed response body; ``read()`` returns the next bytes, b"" at its end."""

    def __init__(self, conn: _Conn, headers: Headers, status: int, method: str) -> None:
        self._conn = conn
        self._left: int | None = None
        self._chunked = False
        self.done = False
        self.keep_alive = headers.get("Connection", "").lower() != "close"
        te = headers.get("Transfer-Encoding", "").lower()
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            self.done = True
        elif "chunked" in te:
            self._chunked = True
        elif "Content-Length" in headers:
            try:
                self._left = int(headers["Content-Length"])
            except ValueError:
                raise ProtocolError("bad Content-Length %r" % headers["Content-Length"]) from None
            if self._left < 0:
                raise ProtocolError("negative Content-Length")
            self.done = self._left == 0
        else:
            self.keep_alive = False  # read to the end of the connection

    async def read(self) -> bytes:
        """The next bytes of the body (b"" when it is complete)."""
        if self.done:
            return b""
        r = self._conn.reader
        if self._chunked:
            line = await r.readline()
            if not line.endswith(b"\n"):
                raise asyncio.IncompleteReadError(line, None)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ProtocolError("bad chunk size %r" % line[:40]) from None
            if size == 0:
                while (await r.readline()).strip():  # trailers
                    pass
                self.done = True
                return b""
            data = await r.readexactly(size)
            await r.readexactly(2)
            return data
        if self._left is not None:
            data = await r.read(min(self._left, 1 << 16))
            if not data:
                raise asyncio.IncompleteReadError(b"", self._left)
            self._left -= len(data)
            self.done = self._left == 0
            return data
        data = await r.read(1 << 16)
        if not data:
            self.done = True
        return data

    async def read_all(self, limit: int = MAX_BODY) -> bytes:
        """The rest of the body (ProtocolError past limit bytes)."""
        parts: list[bytes] = []
        n = 0
        while True:
            b = await self.read()
            if not b:
                return b"".join(parts)
            n += len(b)
            if n > limit:
                raise ProtocolError("body larger than %d bytes" % limit)
            parts.append(b)


class AsyncHTTP:
    """Connections to one host; at most ``max_idle`` idle ones are kept for reuse."""

    def __init__(self, scheme: str, host: str, port: int, max_idle: int = 4) -> None:
        self.scheme, self.host, self.port = scheme, host, port
        self.max_idle = max_idle
        self._idle: list[_Conn] = []
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop the idle connections belong to
        self._ssl: ssl.SSLContext | None = ssl.create_default_context() if scheme == "https" else None

    async def _connect(self) -> _Conn:
        reader, writer = await asyncio.open_connection(self.host, self.port, ssl=self._ssl, limit=1 << 20)
        return _Conn(reader, writer)

    def _take(self) -> _Conn | None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # Connections belong to the loop that opened them (a client used by two
            # asyncio.run calls in turn): the old loop's are abandoned, not reused.
            self._idle, self._loop = [], loop
        while self._idle:
            c = self._idle.pop()
            if c.usable():
                return c
            c.close()
        return None

    def _put(self, c: _Conn) -> None:
        if len(self._idle) >= self.max_idle or not c.usable():
            c.close()
            return
        c.reused = True
        c.idle_since = time.monotonic()
        self._idle.append(c)

    async def request(self, req: Request, timeout: float) -> tuple[int, Headers, bytes]:
        """Sends req and reads the whole answer within timeout seconds (TimeoutError
        after). A pooled connection the daemon closed meanwhile is replaced, and an
        idempotent request is sent again once on a fresh connection."""
        return await asyncio.wait_for(self._request(req), timeout)

    async def _request(self, req: Request) -> tuple[int, Headers, bytes]:
        conn = self._take()
        if conn is not None:
            try:
                return await self._exchange(conn, req)
            except (ConnectionError, asyncio.IncompleteReadError):
                if req.method not in IDEMPOTENT:
                    raise
                # The daemon closed the kept-alive connection before answering: once more
                # on a new connection.
        return await self._exchange(await self._connect(), req)

    async def _exchange(self, conn: _Conn, req: Request) -> tuple[int, Headers, bytes]:
        try:
            status, headers, body = await self.send(conn, req)
            raw = await body.read_all()
        except BaseException:
            conn.close()
            raise
        if body.keep_alive:
            self._put(conn)
        else:
            conn.close()
        return status, headers, raw

    async def open(self, req: Request) -> tuple[int, Headers, Body, _Conn]:
        """Sends req on a connection of its own and returns the answer's status,
        headers and body to be read as it comes; the caller closes the connection."""
        conn = await self._connect()
        try:
            status, headers, body = await self.send(conn, req)
        except BaseException:
            conn.close()
            raise
        return status, headers, body, conn

    async def send(self, conn: _Conn, req: Request) -> tuple[int, Headers, Body]:
        """Writes req on conn and reads the answer's head."""
        host = self.host if ":" not in self.host else "[%s]" % self.host
        default = 443 if self.scheme == "https" else 80
        lines = ["%s %s HTTP/1.1" % (req.method, req.target), "Host: %s" % (host if self.port == default else "%s:%d" % (host, self.port))]
        for k, v in req.headers.items():
            lines.append("%s: %s" % (k, v))
        if req.body is not None:
            lines.append("Content-Length: %d" % len(req.body))
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        conn.writer.write(head + (req.body or b""))
        await conn.writer.drain()
        while True:
            status, headers = await _read_head(conn.reader)
            if status != 100:
                return status, headers, Body(conn, headers, status, req.method)

    async def aclose(self) -> None:
        """Closes the idle connections."""
        idle, self._idle = self._idle, []
        for c in idle:
            c.close()
        for c in idle:
            try:
                await c.writer.wait_closed()
            except (OSError, ssl.SSLError):
                pass


async def _read_head(r: asyncio.StreamReader) -> tuple[int, Headers]:
    line = await r.readline()
    if not line:
        raise asyncio.IncompleteReadError(b"", None)
    parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError("bad status line %r" % line[:80])
    status = int(parts[1])
    items: list[tuple[str, Any]] = []
    n = len(line)
    while True:
        h = await r.readline()
        n += len(h)
        if n > MAX_HEADER_BYTES:
            raise ProtocolError("answer headers larger than %d bytes" % MAX_HEADER_BYTES)
        if not h.endswith(b"\n"):
            raise asyncio.IncompleteReadError(h, None)
        text = h.decode("latin-1").rstrip("\r\n")
        if not text:
            return status, Headers(items)
        name, sep, value = text.partition(":")
        if not sep:
            raise ProtocolError("bad header line %r" % text[:80])
        items.append((name.strip(), value.strip()))
