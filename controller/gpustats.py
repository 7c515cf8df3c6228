"""Per-GPU utilisation and memory for status and metrics: NVML on real GPUs, the
simulator's state file (TGS_SIM_STATE) on simulated ones.

The simulator's state is read through tgs.intercept.simstate (its cffi binding of
contracts/include/tgs/sim_state.h).  Utilisation is busy time over wall time between two
samples at least MIN_WINDOW apart (the simulator updates busy_ns lazily).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from tgs.intercept.simstate import read_devices, state_path

from .devices import Device

MIN_WINDOW = 0.5


@dataclass(frozen=True)
class GpuSample:
    index: int
    utilization: float | None     # 0..1
    mem_used: int | None          # bytes the whole GPU has allocated (all processes)
    mem_total: int


class GpuSampler:
    def __init__(self, devices: list[Device], sim_path: Path | None = None) -> None:
        self.devices = devices
        self.sim_path = sim_path or state_path()
        self._prev: dict[int, tuple[float, int]] = {}     # index -> (t, busy_ns)
        self._util: dict[int, float | None] = {}
        self.last: list[GpuSample] = []

    def sample(self, now: float | None = None) -> list[GpuSample]:
        now = time.monotonic() if now is None else now
        sim = read_devices(self.sim_path) if any(d.kind == "sim" for d in self.devices) else None
        out = []
        for d in self.devices:
            used: int | None = None
            if d.kind == "sim" and sim and d.index in sim:
                _, used, busy = sim[d.index]
                self._sim_util(d.index, now, busy)
            elif d.kind == "nvml":
                self._util[d.index], used = _nvml(d.index)
            out.append(GpuSample(d.index, self._util.get(d.index), used, d.mem_total))
        self.last = out
        return out

    def _sim_util(self, index: int, now: float, busy: int) -> None:
        prev = self._prev.get(index)
        if prev is None or busy < prev[1]:
            self._prev[index] = (now, busy)
            return
        if now - prev[0] >= MIN_WINDOW:
            self._util[index] = max(0.0, min(1.0, (busy - prev[1]) / 1e9 / (now - prev[0])))
            self._prev[index] = (now, busy)


def _nvml(index: int) -> tuple[float | None, int | None]:
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(index)
            util = pynvml.nvmlDeviceGetUtilizationRates(h).gpu / 100.0
            return util, int(pynvml.nvmlDeviceGetMemoryInfo(h).used)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None, None
