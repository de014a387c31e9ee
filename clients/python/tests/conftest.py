"""Fixtures: the real cycled daemon, built from this repository, on a loopback port."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

import cycled

pytest_plugins = ["cycled.pytest_plugin"]  # the serve_module fixture, as an installed package provides it

REPO = Path(__file__).resolve().parents[3]

BASE_CONFIG = """
cycle: {{period: {period}}}
tiers:
  - name: safety
    budget: 50ms
  - name: knowledge
    budget: {budget}
    max_attempts: 3
    breaker: {{failure_threshold: 2, cooldown: {cooldown}, half_open_successes: 1}}
modules:
  - name: guard
    tier: safety
    builtin: {{value: {{clear: true}}}}
http: {{addr: "{addr}"}}
log: {{level: warn}}
state_dir: {state_dir}
recorder: {{enabled: {recorder}}}
"""


@pytest.fixture(scope="session")
def cycled_bin(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The daemon binary: $CYCLED_BIN, else built with go build from this repository."""
    if os.environ.get("CYCLED_BIN"):
        return os.environ["CYCLED_BIN"]
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not on PATH and CYCLED_BIN is not set")
    out = tmp_path_factory.mktemp("bin") / "cycled"
    subprocess.run([go, "build", "-o", str(out), "./cmd/cycled"], cwd=REPO, check=True)
    return str(out)


class Daemon:
    """A running daemon: ``url``, a ``client``, and ``stop()``."""

    def __init__(self, binary: str, config: str, workdir: Path) -> None:
        self.binary = binary
        self.path = workdir / "cycled.yaml"
        self.path.write_text(config)
        self._start()

    def _start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CYCLED_")}
        self.proc = subprocess.Popen(
            [self.binary, "run", "--config", str(self.path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        self.stderr: list[str] = []
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc.stdout, lines), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, None), daemon=True).start()
        try:
            first = lines.get(timeout=15)
        except queue.Empty:
            self.stop()
            raise RuntimeError("the daemon did not start:\n" + "".join(self.stderr))
        if not first.startswith("listening on "):
            self.stop()
            raise RuntimeError("unexpected first line %r:\n%s" % (first, "".join(self.stderr)))
        self.url = first[len("listening on ") :].strip()
        self.client = cycled.Client(self.url)

    def _read(self, pipe, lines) -> None:  # type: ignore[no-untyped-def]
        for line in pipe:
            if lines is not None:
                lines.put(line)
            else:
                self.stderr.append(line)

    def restart(self) -> None:
        """Stops the daemon and starts it again on the same configuration (the same
        address when it names a port)."""
        self.stop()
        self._start()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture
def start_daemon(cycled_bin: str) -> Iterator[Callable[..., Daemon]]:
    """Starts daemons on the test configuration (period, knowledge budget, breaker
    cooldown as arguments); all are stopped at the end of the test."""
    started: list[Daemon] = []
    dirs: list[tempfile.TemporaryDirectory[str]] = []

    def start(
        period: str = "20ms", budget: str = "100ms", cooldown: str = "200ms", addr: str = "127.0.0.1:0", recorder: bool = False
    ) -> Daemon:
        d = tempfile.TemporaryDirectory(prefix="cycled-py-")
        dirs.append(d)
        work = Path(d.name)
        cfg = BASE_CONFIG.format(
            period=period, budget=budget, cooldown=cooldown, state_dir=work / "state", addr=addr, recorder=str(recorder).lower()
        )
        daemon = Daemon(cycled_bin, cfg, work)
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.stop()
    for d in dirs:
        d.cleanup()


def free_port() -> int:
    """A loopback port free now (for a daemon that must come back on the same address)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def eventually(what: str, cond: Callable[[], object], timeout: float = 10.0, interval: float = 0.01) -> object:
    """Polls cond until it returns a true value (returned) or fails the test after timeout."""
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            pytest.fail("timed out waiting for " + what)
        time.sleep(interval)
