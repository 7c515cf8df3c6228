"""The controller's side of its --listen process (front.py): the owner-only ipc socket the
process relays through, the process itself (started with the server, started again after a
death, stopped with the server) and what it last reported (status: listen_paused, ...).

The process inherits the controller's descriptor limit but has a table of its own: a flood of
TCP connections can exhaust only that.  The relay's frames reach the server's poll loop as
[process id, client id, ...body]; server.Server serves them like its own requests.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import zmq

log = logging.getLogger(__name__)
FRONT_SOCK = "front.sock"     # the relay, in the runtime directory
UP_TIMEOUT_S = 20.0           # the process's first report, once its endpoints are bound
BACKOFF_S = (0.5, 30.0)       # first and longest wait before a restart
STEADY_S = 60.0               # a process that ran this long restarts with no wait
RELAY_HWM = 1000              # as front.BACKEND_HWM


class ListenFront:
    def __init__(self, ctx: zmq.Context, state_dir: Path, runtime_dir: Path,
                 endpoints: list[str], max_wire_frame: int) -> None:
        self.state_dir = state_dir
        self.endpoints = endpoints
        self.path = runtime_dir / FRONT_SOCK
        b = self.backend = ctx.socket(zmq.ROUTER)
        b.setsockopt(zmq.LINGER, 0)
        b.setsockopt(zmq.MAXMSGSIZE, max_wire_frame)
        b.setsockopt(zmq.ROUTER_MANDATORY, 1)
        b.setsockopt(zmq.SNDHWM, RELAY_HWM)
        b.setsockopt(zmq.RCVHWM, RELAY_HWM)
        b.bind(f"ipc://{self.path}")
        self.proc: subprocess.Popen[bytes] | None = None
        self.report: dict[str, Any] = {}
        self.restarts = 0
        self._before = {"pauses": 0, "dropped": 0}     # counted by processes that died
        self._started = 0.0
        self._backoff = BACKOFF_S[0]
        self._restart_at: float | None = None
        try:
            self._start()
            self._wait_up()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ the process
    def _start(self) -> None:
        level = logging.getLogger("tgs.controller").getEffectiveLevel()
        cmd = [sys.executable, "-m", "tgs.controller.front", "--state-dir", str(self.state_dir),
               "--backend", f"ipc://{self.path}", "--log-level", str(level)]
        for ep in self.endpoints:
            cmd += ["--listen", ep]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, close_fds=True)
        self._started = time.monotonic()

    def _wait_up(self) -> None:
        """The process's first message says its endpoints are bound (the DEALER's queue is
        in order: nothing it relays comes before)."""
        assert self.proc is not None
        deadline = time.monotonic() + UP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.backend.poll(100, zmq.POLLIN):
                frames = self.backend.recv_multipart()
                if len(frames) == 3 and not frames[1]:
                    self.note(frames[2])
                    return
            rc = self.proc.poll()
            if rc is not None:
                raise RuntimeError(f"the --listen process exited ({rc}): see the log above")
        raise RuntimeError("the --listen process did not come up")

    def tick(self, now: float) -> None:
        """Once a period: restart a process that died (after a back-off)."""
        if self.proc is None or self.proc.poll() is None:
            return
        if self._restart_at is None:
            ran = now - self._started
            if ran >= STEADY_S:
                self._backoff = BACKOFF_S[0]
            log.warning("the --listen process (pid %d) exited with %s after %.1f s: starting "
                        "it again in %.1f s (the ipc socket is not affected)", self.proc.pid,
                        self.proc.returncode, ran, self._backoff)
            self._restart_at = now + self._backoff
            self._backoff = min(BACKOFF_S[1], self._backoff * 2)
            for key in self._before:
                self._before[key] += self._int(key)
            self.report = {"paused": True}
            return
        if now >= self._restart_at:
            self._restart_at = None
            self.restarts += 1
            try:
                self._start()
            except OSError as exc:
                log.error("cannot start the --listen process: %s", exc)

    def note(self, payload: bytes) -> None:
        """A report from the process."""
        try:
            body = json.loads(payload)
        except ValueError:
            return
        if isinstance(body, dict):
            self.report = body

    # ------------------------------------------------------------ status
    def _int(self, key: str) -> int:
        v = self.report.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else 0

    @property
    def paused(self) -> bool:              # also read by the metrics thread: one read of proc
        p = self.proc
        return bool(self.report.get("paused", True)) or p is None or p.poll() is not None

    @property
    def pauses(self) -> int:
        return self._before["pauses"] + self._int("pauses")

    @property
    def dropped(self) -> int:
        return self._before["dropped"] + self._int("dropped")

    def close(self) -> None:
        p, self.proc = self.proc, None
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.backend.close(0)
        try:
            self.path.unlink()
        except OSError:
            pass
