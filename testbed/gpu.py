"""Which GPU a benchmark runs on, and GPU-busy samplers for it.

`--gpu sim`: the simulated driver (build/sim/libcuda.so.1), busy times from its state file's
per-device and per-process counters (exact).  `--gpu real`: an NVIDIA GPU seen through NVML
and a loadable libcuda.so.1; busy times integrate NVML's per-process SM utilisation samples
(approximate: NVML's sampling, not the driver's own accounting).  `--gpu auto`: real when
both are there, else sim.  Asking for `real` without a GPU fails with a clear message.

A sampler runs a thread that records cumulative busy seconds: one series for the device and
one per process id, each as (CLOCK_MONOTONIC seconds, busy seconds).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import threading
import time
from pathlib import Path

from tgs.intercept.locate import build_path
from tgs.intercept.simstate import SIM_MAX_DEVICES, STATE_ENV, SimState, default_path, map_state

SIM_DIR = build_path("sim")
GPU_MODES = ("auto", "sim", "real")
SIM_GPU_NAME = "TGS Simulated GPU"    # what the simulated driver and NVML call their devices


class GpuUnavailable(RuntimeError):
    """--gpu real was asked for and no usable GPU is there."""


def real_gpu_problem() -> str | None:
    """None when NVML sees a GPU and the real driver loads; else why not."""
    try:
        import pynvml
    except ImportError:
        return "pynvml is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return f"NVML is not usable ({exc.__class__.__name__}: {exc}): no NVIDIA driver here"
    try:
        if pynvml.nvmlDeviceGetCount() < 1:
            return "NVML sees no GPU"
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        if (name.decode() if isinstance(name, bytes) else name) == SIM_GPU_NAME:
            return "NVML is the simulator's (build/sim is on LD_LIBRARY_PATH): no real GPU"
    except Exception as exc:
        return f"NVML cannot count GPUs ({exc})"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return f"the CUDA driver (libcuda.so.1) does not load: {exc}"
    return None


def resolve_gpu(mode: str) -> str:
    """'sim' or 'real' for --gpu auto|sim|real; raises GpuUnavailable for an absent real GPU."""
    if mode not in GPU_MODES:
        raise ValueError(f"--gpu must be one of {GPU_MODES}, not {mode!r}")
    if mode == "sim":
        return "sim"
    problem = real_gpu_problem()
    if problem is None:
        return "real"
    if mode == "real":
        raise GpuUnavailable(f"--gpu real: {problem} (use --gpu sim for the simulated GPU)")
    return "sim"


# Shim settings (and the simulator's kernel trace, TGS_SIM_TRACE: docs/simulator.md) a benchmark
# run passes on to its processes, for side-by-side runs (e.g.
# `TGS_DRAIN=0 python -m tgs.bench.main ...`: production seen idle at its synchronize calls
# only; docs/segment.md "Gating"), and the shim itself: `TGS_SHIM_LIB=<another libtgs.so>`
# reaches the controller, whose replies name the library every job preloads.
SHIM_KNOBS = ("TGS_DRAIN", "TGS_DRAIN_SETTLE_US", "TGS_DRAIN_SETTLE_MAX_US", "TGS_DRAIN_POLL_US",
              "TGS_FIT_BUDGET", "TGS_FIT_TRACE", "TGS_SHIM_LIB", "TGS_SIM_TRACE")


def job_env(gpu: str, sim_state: Path | None) -> dict[str, str]:
    """The environment of a benchmark's processes: ours less any TGS or preload setting
    (except SHIM_KNOBS); on the simulator a private state file and build/sim first on the
    library path."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TGS_", "LD_PRELOAD")) or k in SHIM_KNOBS}
    if gpu == "sim":
        if sim_state is None:
            raise ValueError("the simulator needs a state file path")
        env[STATE_ENV] = str(sim_state)
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = f"{SIM_DIR}:{old}" if old else str(SIM_DIR)
    return env


BusySeries = list[tuple[float, float]]


FIRST_SAMPLE_S = 0.005


class Sampler:
    """Base: a thread calling _sample() every `every` seconds until stop()."""

    def __init__(self, every: float = 0.1) -> None:
        self.every = every
        self.device: BusySeries = []
        self.procs: dict[int, BusySeries] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tgs-bench-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self._close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._sample()
            except Exception as exc:     # never take the benchmark down: record and go on
                self.error = f"{exc.__class__.__name__}: {exc}"
            # until the first sample, look often: a window that starts before it would read
            # the busy time in between as idle (the series is clamped at its first sample)
            self._stop.wait(self.every if self.device else min(self.every, FIRST_SAMPLE_S))

    def _add(self, t: float, dev_busy: float, procs: dict[int, float]) -> None:
        if self.device and t <= self.device[-1][0]:
            return
        self.device.append((t, dev_busy))
        for pid, busy in procs.items():
            self.procs.setdefault(pid, []).append((t, busy))

    def _sample(self) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        pass


class StateFileSampler(Sampler):
    """A sampler of one device in the simulator's state file, mapped read-only on first use
    and read without its lock (a torn read costs one sample's precision)."""

    def __init__(self, path: Path | None, device: int, every: float) -> None:
        super().__init__(every)
        self.path = str(path) if path is not None else default_path()
        self.index = device
        self._mm: mmap.mmap | None = None

    def _map(self) -> mmap.mmap | None:
        if self._mm is None:
            self._mm = map_state(self.path)
        return self._mm

    def _close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None


class SimSampler(StateFileSampler):
    """Busy counters from the state file.  Only the header, devices and process slots are
    copied (28 KB), stamped with the device's t_last_ns: the time they are exact as of."""

    def __init__(self, path: Path | None = None, device: int = 0, every: float = 0.1) -> None:
        super().__init__(path, device, every)
        self._prefix = SimState.ctx.offset

    def _sample(self) -> None:
        mm = self._map()
        if mm is None:
            return
        buf = bytearray(ctypes.sizeof(SimState))
        buf[:self._prefix] = mm[:self._prefix]
        st = SimState.from_buffer(buf)
        if not 0 <= self.index < min(int(st.hdr.ndevices), SIM_MAX_DEVICES):
            return
        dev = st.dev[self.index]
        procs = {int(p.pid): p.dev[self.index].busy_ns / 1e9 for p in st.proc if p.in_use}
        self._add(dev.t_last_ns / 1e9, dev.busy_ns / 1e9, procs)


class NvmlSampler(Sampler):
    """Real GPU: integrates NVML utilisation (device) and per-process SM utilisation samples.

    Approximate: NVML reports percentages over its own sampling periods (about 1/6 s on recent
    drivers); a process's busy time is the integral of its smUtil.  Not runnable without a GPU.
    """

    def __init__(self, device: int = 0, every: float = 0.2) -> None:
        super().__init__(every)
        import pynvml

        self._nv = pynvml
        pynvml.nvmlInit()
        self._h = pynvml.nvmlDeviceGetHandleByIndex(device)
        self._last_ts = 0
        self._dev_busy = 0.0
        self._busy: dict[int, float] = {}
        self._t_prev = time.monotonic()

    def _sample(self) -> None:
        nv, now = self._nv, time.monotonic()
        dt, self._t_prev = now - self._t_prev, now
        self._dev_busy += nv.nvmlDeviceGetUtilizationRates(self._h).gpu / 100.0 * dt
        try:
            samples = nv.nvmlDeviceGetProcessUtilization(self._h, self._last_ts)
        except nv.NVMLError:
            samples = []         # NVML_ERROR_NOT_FOUND: no new sample since last_ts
        for s in samples:
            self._busy[int(s.pid)] = self._busy.get(int(s.pid), 0.0) + s.smUtil / 100.0 * dt
            self._last_ts = max(self._last_ts, int(s.timeStamp))
        self._add(now, self._dev_busy, dict(self._busy))

    def _close(self) -> None:
        try:
            self._nv.nvmlShutdown()
        except Exception:
            pass


def make_sampler(gpu: str, sim_state: Path | None, device: int = 0) -> Sampler:
    if gpu == "sim":
        return SimSampler(sim_state, device)
    return NvmlSampler(device)
