"""Per-GPU utilisation and memory for status and metrics: NVML on real GPUs, the
simulator's state file (TGS_SIM_STATE) on simulated ones.

The simulator's layout (sim/sim_state.h) is read at four fixed offsets,
checked against its magic and version; tests/tools checks them against the
header with a C compiler.  Utilisation is busy time over wall time between two
samples at least MIN_WINDOW apart (the simulator updates busy_ns lazily).
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from .devices import Device

SIM_MAGIC = 0x314D4953534754
SIM_VERSION = 1
SIM_HDR = struct.Struct("<QII")            # magic, version, ndevices
SIM_DEV_BASE, SIM_DEV_SIZE = 120, 144      # offsetof(struct sim_state, dev), sizeof(sim_device)
SIM_DEV = struct.Struct("<64xQQ8xQ")       # mem_total, mem_used, busy_ns
MIN_WINDOW = 0.5


@dataclass(frozen=True)
class GpuSample:
    index: int
    utilization: float | None     # 0..1
    mem_used: int | None          # bytes the whole GPU has allocated (all processes)
    mem_total: int


def sim_state_path() -> Path:
    env = os.environ.get("TGS_SIM_STATE")
    return Path(env) if env and env.startswith("/") else Path(f"/dev/shm/tgs-sim-{os.getuid()}")


def read_sim(path: Path) -> dict[int, tuple[int, int, int]] | None:
    """{index: (mem_total, mem_used, busy_ns)} from the simulator's state, None if unreadable.

    Read with pread, never mapped: in simulated mode every container gets this file read-write
    (as a real GPU is shared), so a tenant may truncate it under us."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        buf = os.pread(fd, SIM_DEV_BASE + 8 * SIM_DEV_SIZE, 0)
        magic, version, ndev = SIM_HDR.unpack_from(buf, 0)
        if magic != SIM_MAGIC or version != SIM_VERSION or not 0 < ndev <= 8:
            return None
        return {i: SIM_DEV.unpack_from(buf, SIM_DEV_BASE + i * SIM_DEV_SIZE)
                for i in range(ndev)}
    except (OSError, ValueError, struct.error):
        return None
    finally:
        os.close(fd)


class GpuSampler:
    def __init__(self, devices: list[Device], sim_path: Path | None = None) -> None:
        self.devices = devices
        self.sim_path = sim_path or sim_state_path()
        self._prev: dict[int, tuple[float, int]] = {}     # index -> (t, busy_ns)
        self._util: dict[int, float | None] = {}
        self.last: list[GpuSample] = []

    def sample(self, now: float | None = None) -> list[GpuSample]:
        now = time.monotonic() if now is None else now
        sim = read_sim(self.sim_path) if any(d.kind == "sim" for d in self.devices) else None
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
