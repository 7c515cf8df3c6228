"""Memory by process over time, for the oversubscription benchmark (tgs.bench.oversub).

`--gpu sim`: from the simulator's state file (the same facts its NVML serves): per process its
device allocations (`mem_used`), and from the residency table its managed bytes resident on the
device and those on the host.  `--gpu real`: NVML's per-process used GPU memory only (what the
driver reports; where managed pages live is not visible there, so resident/host stay 0).

A sample: (CLOCK_MONOTONIC s, {pid: MemUse}).
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass
from pathlib import Path

from tgs.intercept.simstate import (
    SIM_MAX_MRANGES,
    SIM_MAX_PROCS,
    SimProc,
    SimResidency,
    SimState,
)
from tgs.testbed.gpu import Sampler, StateFileSampler


@dataclass(frozen=True)
class MemUse:
    """One process's memory on one device at one time (bytes)."""

    device: int = 0      # device allocations (never evicted)
    resident: int = 0    # managed memory resident on the device
    host: int = 0        # managed memory on the host (evicted or not yet touched)

    @property
    def on_gpu(self) -> int:
        return self.device + self.resident

    def to_list(self) -> list[int]:
        return [self.device, self.resident, self.host]


MemSeries = list[tuple[float, dict[int, MemUse]]]


def sim_memory(buf: bytes | bytearray, res: SimResidency | None, index: int = 0
               ) -> dict[int, MemUse]:
    """{pid: MemUse} from a copy of the state file's start (header, devices, processes) and its
    residency table (None: no managed memory known)."""
    procs = (SimProc * SIM_MAX_PROCS).from_buffer_copy(bytes(buf), SimState.proc.offset)
    out: dict[int, list[int]] = {}
    slots: dict[int, int] = {}
    for i, p in enumerate(procs):
        if p.in_use:
            slots[i] = int(p.pid)
            out[int(p.pid)] = [int(p.dev[index].mem_used), 0, 0]
    if res is not None:
        for m in res.r[:min(int(res.hwm), SIM_MAX_MRANGES)]:
            if not m.in_use or m.dev != index or m.proc not in slots:
                continue
            use = out[slots[m.proc]]
            resident = min(int(m.resident), int(m.size))
            use[1] += resident
            use[2] += int(m.size) - resident
    return {pid: MemUse(*v) for pid, v in out.items()}


class SimMemSampler(StateFileSampler):
    """Memory by process from the state file every `every` seconds."""

    def __init__(self, path: Path, device: int = 0, every: float = 0.05) -> None:
        super().__init__(path, device, every)
        self.series: MemSeries = []

    def _sample(self) -> None:
        mm = self._map()
        if mm is None:
            return
        t = time.monotonic()
        off = SimState.res.offset
        res = SimResidency.from_buffer_copy(mm[off:off + ctypes.sizeof(SimResidency)])
        self.series.append((t, sim_memory(mm[:SimState.ctx.offset], res, self.index)))


class NvmlMemSampler(Sampler):
    """Real GPU: NVML's used GPU memory per compute process (device bytes only)."""

    def __init__(self, device: int = 0, every: float = 0.1) -> None:
        super().__init__(every)
        import pynvml

        self._nv = pynvml
        pynvml.nvmlInit()
        self._h = pynvml.nvmlDeviceGetHandleByIndex(device)
        self.series: MemSeries = []

    def _sample(self) -> None:
        procs = self._nv.nvmlDeviceGetComputeRunningProcesses(self._h)
        self.series.append((time.monotonic(), {
            int(p.pid): MemUse(device=int(p.usedGpuMemory or 0)) for p in procs}))

    def _close(self) -> None:
        try:
            self._nv.nvmlShutdown()
        except Exception:
            pass


def make_mem_sampler(gpu: str, sim_state: Path | None) -> SimMemSampler | NvmlMemSampler:
    if gpu == "sim":
        if sim_state is None:
            raise ValueError("the simulator needs a state file path")
        return SimMemSampler(sim_state)
    return NvmlMemSampler()


def device_total(gpu: str, sim_mem: int) -> int:
    """The device memory the plan's fractions apply to: the simulated size, or NVML's total of
    device 0."""
    if gpu == "sim":
        return sim_mem
    import pynvml

    pynvml.nvmlInit()
    try:
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).total)
    finally:
        pynvml.nvmlShutdown()
