#!/usr/bin/env python3
"""Follows a fleet's tick summaries on NATS JetStream, as the daemons' export.nats
publishes them: one line per summary, and the events between them.

Standard library only: it speaks the NATS client protocol over one TCP connection and
pulls from an ephemeral JetStream consumer (the JetStream API is plain request and reply
on $JS.API subjects). A program of your own would rather use the nats-py client; this
shows what a consumer does. JetStream already dropped the duplicates of retried
publishes (Nats-Msg-Id "epoch:tick"); like the Python SDK's modules, the consumer also
refuses a summary from an epoch older than one it has seen (a deposed daemon's late
publish).

    python3 examples/nats-consumer/consumer.py --url nats://127.0.0.1:4222 --stream CYCLED --subject cycled
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import uuid


class Conn:
    """A minimal NATS connection: publish with a reply subject, read messages."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=10)
        self.buf = self.sock.makefile("rb")
        self._line()  # INFO {...}
        self._send(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\nPING\r\n')
        while self._line() != b"PONG":
            pass
        self.inbox = "_INBOX." + uuid.uuid4().hex
        self._send(("SUB %s.> 1\r\n" % self.inbox).encode())

    def _send(self, b: bytes) -> None:
        self.sock.sendall(b)

    def _line(self) -> bytes:
        line = self.buf.readline()
        if not line:
            raise ConnectionError("connection closed by the server")
        return line.rstrip(b"\r\n")

    def publish(self, subject: str, reply: str, payload: bytes) -> None:
        self._send(b"PUB %s %s %d\r\n%s\r\n" % (subject.encode(), reply.encode(), len(payload), payload))

    def next_message(self) -> tuple[str, dict[str, str], bytes]:
        """Returns (subject, headers, payload) of the next message; a status such as 404
        (no message) is in headers["Status"]."""
        while True:
            line = self._line()
            if line == b"PING":
                self._send(b"PONG\r\n")
                continue
            if line.startswith(b"-ERR"):
                raise ConnectionError(line.decode())
            parts = line.split()
            if parts[0] == b"MSG":
                data = self.buf.read(int(parts[-1]) + 2)[:-2]
                return parts[1].decode(), {}, data
            if parts[0] == b"HMSG":
                hlen, total = int(parts[-2]), int(parts[-1])
                raw = self.buf.read(total + 2)[:-2]
                return parts[1].decode(), parse_headers(raw[:hlen]), raw[hlen:]

    def request(self, subject: str, payload: dict) -> dict:
        reply = "%s.%s" % (self.inbox, uuid.uuid4().hex)
        self.publish(subject, reply, json.dumps(payload).encode())
        while True:
            subj, _, data = self.next_message()
            if subj == reply:
                return json.loads(data)


def parse_headers(raw: bytes) -> dict[str, str]:
    lines = raw.decode().split("\r\n")
    out = {}
    status = lines[0].split()  # NATS/1.0 [code [description]]
    if len(status) > 1:
        out["Status"] = status[1]
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            out[k.strip()] = v.strip()
    return out


def follow(url: str, stream: str, subject: str, count: int, out=sys.stdout) -> None:
    hostport = url.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    conn = Conn(host or "127.0.0.1", int(port or 4222))
    created = conn.request("$JS.API.CONSUMER.CREATE." + stream, {"stream_name": stream, "config": {
        "deliver_policy": "all", "ack_policy": "none", "filter_subject": subject + ".>",
        "inactive_threshold": 60_000_000_000}})
    if "error" in created:
        raise RuntimeError("create the consumer: %s" % created["error"])
    pull = "$JS.API.CONSUMER.MSG.NEXT.%s.%s" % (stream, created["name"])
    reply = conn.inbox + ".pull"
    highest, printed = 0, 0
    while count == 0 or printed < count:
        conn.publish(pull, reply, json.dumps({"batch": 100, "expires": 1_000_000_000}).encode())
        while True:
            subj, headers, data = conn.next_message()
            if headers.get("Status"):  # 404 no messages, 408 the pull expired: pull again
                break
            if not subj.endswith(".ticks"):
                print("event %s %s" % (headers.get("Cycled-Kind", "?"), data.decode()), file=out)
                continue
            s = json.loads(data)
            epoch = int(s.get("epoch", 0))
            if epoch < highest:
                print("ignored tick %d of epoch %d: epoch %d is newer" % (s["tick_id"], epoch, highest), file=out)
                continue
            highest = epoch
            print("epoch %d tick %d %s %s emergency=%s" % (epoch, s["tick_id"], s["started_at"],
                  s["overall_severity"], str(s["emergency"]["active"]).lower()), file=out)
            printed += 1
            if count and printed >= count:
                return


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="nats://127.0.0.1:4222")
    p.add_argument("--stream", default="CYCLED")
    p.add_argument("--subject", default="cycled")
    p.add_argument("-n", type=int, default=0, help="stop after this many summaries (0: follow)")
    a = p.parse_args()
    try:
        follow(a.url, a.stream, a.subject, a.n)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
