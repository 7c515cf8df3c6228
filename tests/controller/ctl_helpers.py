"""Test doubles shared by the controller tests (no sockets, no segments)."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from tgs.controller.devices import Device
from tgs.controller.registry import Registry
from tgs.controller.replies import DaemonInfo, LoopStatus, MetricsEntry
from tgs.controller.server import Handler
from tgs.controller.state import JobRecord, StateStore

GIB = 1 << 30
DEVICES = [Device(0, "GPU-sim-0", "Sim GPU", 16 * GIB, "sim"),
           Device(1, "GPU-sim-1", "Sim GPU", 16 * GIB, "sim")]


class FakeSeg:
    def __init__(self, rec: JobRecord) -> None:
        self.rec = rec
        self.closed = False

    def apply_identity(self, rec: JobRecord) -> None:
        self.rec = rec

    def close(self) -> None:
        self.closed = True


class FakeFactory:
    def __init__(self) -> None:
        self.files: set[str] = set()

    def create(self, rec: JobRecord) -> FakeSeg:
        self.files.add(rec.segment)
        return FakeSeg(rec)

    def open(self, rec: JobRecord) -> FakeSeg:
        if rec.segment not in self.files:
            raise FileNotFoundError(rec.segment)
        return FakeSeg(rec)

    def remove(self, rec: JobRecord) -> None:
        self.files.discard(rec.segment)


class FakeEngine:
    period = 0.05

    def __init__(self) -> None:
        self.changes = 0

    def step(self, now: float) -> list[MetricsEntry]:
        return []

    def status(self) -> LoopStatus:
        return LoopStatus(policy="fake", period_ms=50, steps=0, overruns=0, dead_seen=0,
                          busy_bias_changes=0, loop_ms_avg=0.0, loop_cpu_s=0.0, policy_state={})

    def on_change(self) -> None:
        self.changes += 1

    def idle(self, name: str) -> bool:
        return name not in self.busy

    busy: set[str] = set()


def make_handler(tmp: Path, factory: FakeFactory | None = None) -> Handler:
    reg = Registry(StateStore(tmp / "state"), DEVICES, tmp / "segs", factory or FakeFactory(),
                   {"LD_PRELOAD": "/x/libtgs.so"})
    reg.load()
    info = DaemonInfo(state_dir=str(tmp / "state"), segment_dir=str(tmp / "segs"),
                      runtime_dir=str(tmp), endpoints=[], metrics="")
    return Handler(reg, FakeEngine(), info)


# ------------------------------------------------------------------ daemons and fake processes

FAKE_PROC = r"""
import os, sys, time
from tgs.intercept import segment as S, ofd
seg = S.open_segment(sys.argv[1])
rate = float(sys.argv[2])
busy = int(sys.argv[3])
for i in range(seg.nslots):
    if ofd.try_lock(seg.fd, S.LOCK_SLOT_BASE + i):
        break
s = seg.slot(i)
s.pid = os.getpid(); s.generation += 1; s.mem_used = 0
s.state = S.SLOT_ACTIVE
s.dev_active = busy
print(i, flush=True)
t0 = time.monotonic()
while True:
    time.sleep(0.01)
    s.lanes[0].work = int((time.monotonic() - t0) * rate)
    s.lanes[0].launches = int((time.monotonic() - t0) * 100)
"""


def start_fake_proc(segment: str, work_rate: float = 1e6, busy: int = 0) -> subprocess.Popen:
    """A child that holds a slot lock like a shim and counts work; prints its slot."""
    p = subprocess.Popen([sys.executable, "-c", FAKE_PROC, segment, str(work_rate), str(busy)],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline() if p.stdout else ""
    if not line.strip():
        p.kill()
        p.wait()
        raise RuntimeError("fake process failed to claim a slot")
    return p


def stop(proc: subprocess.Popen | None, sig: int = signal.SIGKILL) -> None:
    if proc is not None and proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Daemon:
    """A tgs-controller subprocess with private dirs; stopped by pid."""

    def __init__(self, base: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.base = base
        self.state = base / "state"
        # ipc paths are limited to 107 bytes: keep the runtime dir short
        self.runtime = Path(tempfile.mkdtemp(prefix="tgs-rt-"))
        self.args = list(args)
        self.env = env
        self.proc: subprocess.Popen | None = None

    def start(self) -> Daemon:
        cmd = [sys.executable, "-m", "tgs.controller", "--state-dir", str(self.state),
               "--runtime-dir", str(self.runtime), "--sim", "--log-level", "debug", *self.args]
        self.log = open(self.base / "controller.log", "ab")
        self.proc = subprocess.Popen(cmd, stderr=self.log, env=self.env)
        from tgs.client import Client, ControllerUnavailable
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = (self.base / "controller.log").read_text()
                raise RuntimeError(f"controller exited: {log}")
            try:
                Client(runtime_dir=self.runtime, timeout=0.5).status()
                return self
            except ControllerUnavailable:
                time.sleep(0.1)
        raise RuntimeError("controller did not come up")

    def client(self, timeout: float = 5.0):
        from tgs.client import Client
        return Client(runtime_dir=self.runtime, timeout=timeout)

    def kill(self, sig: int = signal.SIGKILL) -> int | None:
        stop(self.proc, sig)
        rc = self.proc.returncode if self.proc else None
        self.proc = None
        return rc

    def close(self) -> None:
        self.kill()
        if hasattr(self, "log"):
            self.log.close()
        for f in self.runtime.iterdir():
            f.unlink()
        self.runtime.rmdir()


@contextmanager
def daemon(base: Path, *args: str, env: dict[str, str] | None = None):
    d = Daemon(base, *args, env=env)
    try:
        yield d.start()
    finally:
        d.close()


def wait_for(pred, timeout: float = 10.0, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        val = pred()
        if val or time.monotonic() > deadline:
            return val
        time.sleep(step)
