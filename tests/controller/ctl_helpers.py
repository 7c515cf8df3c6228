"""Test doubles shared by the controller tests (no sockets, no segments)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tgs.controller.devices import Device
from tgs.controller.registry import Registry
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

    def step(self, now: float) -> list[dict[str, Any]]:
        return []

    def status(self) -> dict[str, Any]:
        return {"policy": "fake", "period_ms": 50}

    def on_change(self) -> None:
        self.changes += 1


def make_handler(tmp: Path, factory: FakeFactory | None = None) -> Handler:
    reg = Registry(StateStore(tmp / "state"), DEVICES, tmp / "segs", factory or FakeFactory(),
                   {"LD_PRELOAD": "/x/libtgs.so"})
    reg.load()
    return Handler(reg, FakeEngine(), {"state_dir": str(tmp / "state")})
