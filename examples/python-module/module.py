#!/usr/bin/env python3
"""A cycled remote module in Python, standard library only.

It serves the http module protocol, registers itself with a running daemon on start
(POST /modules, kind http, pointing at itself), answers one POST per attempt, and
deregisters on SIGTERM or Ctrl-C (DELETE /modules/{name}).

    python3 module.py --daemon http://127.0.0.1:8080 --name py-recall \
        --tier knowledge --reads guard.result

The admin token, if the daemon has one, is read from CYCLED_ADMIN_TOKEN.

Protocol (see the README of this directory):
  request  POST {"tick_id", "module", "tier", "attempt", "deadline", "inputs": {key: entry}}
           headers X-Cycled-Deadline, X-Cycled-Budget-Ms, Idempotency-Key: <tick>-<module>,
           X-Cycled-Run (the daemon process: tick ids restart with it)
  answer   200 {"value": ...}                                  success
           200 {"error": {"kind": "transient", "message": ...}} a classified failure
           408/429/5xx: transient; other 4xx and malformed bodies: downstream
"""

import argparse
import collections
import json
import os
import signal
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_REQUEST = 1 << 20  # the largest tick request accepted


def log(*args):
    print(*args, file=sys.stderr, flush=True)


class Module:
    """The module's logic: called once per attempt with the decoded request."""

    def __init__(self, reads, fail_every):
        self.reads = reads
        self.fail_every = fail_every
        self.lock = threading.Lock()
        self.count = 0
        # Answers already given, by (X-Cycled-Run, Idempotency-Key): an attempt that repeats
        # a tick whose answer was lost gets the same value instead of a second side effect.
        # The run id matters: tick ids restart at 1 when the daemon restarts.
        self.done = collections.OrderedDict()

    def tick(self, req, key, budget_ms):
        with self.lock:
            if key in self.done:
                return self.done[key]
        if self.fail_every and req["tick_id"] % self.fail_every == 0 and req["attempt"] == 1:
            # A transient failure: the daemon retries it within the tier budget.
            return {"error": {"kind": "transient", "message": "first attempt of tick %d fails (--fail-every)" % req["tick_id"]}}
        inputs = req.get("inputs", {})
        first = inputs.get(self.reads[0], {}) if self.reads else {}
        with self.lock:
            self.count += 1
            count = self.count
        value = {
            "echo": first.get("value"),           # the value read, as served
            "source": first.get("source"),        # live, last_good or none
            "stale": first.get("stale", False),  # a last-known-good value stands in
            "count": count,
            "budget_ms": budget_ms,
            "lang": "python",
        }
        answer = {"value": value}
        with self.lock:
            self.done[key] = answer
            while len(self.done) > 256:
                self.done.popitem(last=False)
        return answer


def make_handler(module):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the daemon reuses its connection

        def do_POST(self):
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > MAX_REQUEST:
                return self.answer(413, {"error": {"kind": "contract", "message": "request too large"}})
            try:
                req = json.loads(self.rfile.read(length))
                req["tick_id"], req["attempt"]
            except (ValueError, KeyError, TypeError) as e:
                # A 4xx is a downstream fault for the daemon (not retried).
                return self.answer(400, {"message": "bad request: %s" % e})
            try:
                budget = float(self.headers.get("X-Cycled-Budget-Ms") or 0)
            except ValueError:
                budget = 0.0
            key = (self.headers.get("X-Cycled-Run", ""), self.headers.get("Idempotency-Key", ""))
            try:
                return self.answer(200, module.tick(req, key, budget))
            except Exception as e:  # a bug: report it as such rather than a 500 (transient)
                return self.answer(200, {"error": {"kind": "internal", "message": repr(e)}})

        def answer(self, status, obj):
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt, *args):
            pass  # one line per tick would be noise

    return Handler


def admin(daemon, method, path, body=None, token=None):
    """Calls an admin route; returns (status, decoded JSON or None)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(daemon.rstrip("/") + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            raw = resp.read()
            return resp.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, None


def register(args, url, token):
    spec = {"name": args.name, "tier": args.tier, "kind": "http", "reads": args.reads,
            "http": {"url": url}}
    if args.timeout:
        spec["http"]["timeout"] = args.timeout
    status, body = admin(args.daemon, "POST", "/modules", spec, token)
    if status == 409:
        # A registration of this name exists, e.g. restored from state_dir after a restart
        # and pointing at an old port: replace it.
        log("%s is already registered; replacing it" % args.name)
        admin(args.daemon, "DELETE", "/modules/" + urllib.parse.quote(args.name), None, token)
        status, body = admin(args.daemon, "POST", "/modules", spec, token)
    if status != 201:
        raise SystemExit("registration refused (%d): %s" % (status, json.dumps(body)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--daemon", default=os.environ.get("CYCLED_URL", "http://127.0.0.1:8080"), help="the daemon's base URL")
    p.add_argument("--name", default="py-recall", help="module name")
    p.add_argument("--tier", default="knowledge", help="tier to run in")
    p.add_argument("--reads", default="guard.result", help="comma-separated keys read")
    p.add_argument("--listen", default="127.0.0.1:0", help="host:port to serve on (port 0: any)")
    p.add_argument("--advertise", default="", help="host the daemon reaches this module at (default: the listen host)")
    p.add_argument("--timeout", default="", help="per-attempt timeout given at registration, e.g. 50ms")
    p.add_argument("--fail-every", type=int, default=0, help="fail the first attempt of every N-th tick (transient)")
    args = p.parse_args()
    args.reads = [k for k in args.reads.split(",") if k]
    token = os.environ.get("CYCLED_ADMIN_TOKEN") or None

    host, _, port = args.listen.rpartition(":")
    server = ThreadingHTTPServer((host or "127.0.0.1", int(port)), make_handler(Module(args.reads, args.fail_every)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://%s:%d/tick" % (args.advertise or server.server_address[0], server.server_address[1])

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    try:
        register(args, url, token)
    except (OSError, SystemExit) as e:
        server.shutdown()
        raise SystemExit("cannot register with %s: %s" % (args.daemon, e))
    print("registered %s at %s" % (args.name, url), flush=True)

    stop.wait()
    status, body = admin(args.daemon, "DELETE", "/modules/" + urllib.parse.quote(args.name), None, token)
    if status not in (204, 404):
        log("deregistration failed (%d): %s" % (status, json.dumps(body)))
    else:
        print("deregistered %s" % args.name, flush=True)
    server.shutdown()


if __name__ == "__main__":
    main()
