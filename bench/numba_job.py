"""A numba-cuda job (``@cuda.jit`` kernels launched from Python), reporting like tgs-workload.

    python -m tgs.bench.numba_job [--seconds 10 | --iters N] [--kernels 10] [--kernel-us 500]
                                  [--gap-ms 0] [--report-ms 50] [--name numba]

Each iteration launches --kernels kernels of one ``@cuda.jit`` function on the default stream,
synchronizes, then sleeps --gap-ms (host work).  A kernel's grid is sized for --kernel-us on the
simulated GPU (docs/simulator.md: a kernel occupies the device grid x block x 1 ns; on a real GPU
the same grid takes what it takes).  The kernel is compiled and launched once before the start
line, so the JIT's start-up (about 1.5 s here) is outside the measured run.
Prints JSON lines: start, progress (every --report-ms), summary (it_per_s, lat_ms
mean/p50/p99/p999), or error with exit 1; exit 2 on bad arguments.  SIGTERM ends the run early
with its summary.  Needs numba-cuda (the test extra installs it: pip install -e '.[test]').
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import warnings

if __package__:
    from .job_report import Progress, emit
else:   # run as a script by a framework's own interpreter: bench/ is on sys.path
    from job_report import Progress, emit  # type: ignore[no-redef]

BLOCK = 256                 # threads per block
NS_PER_THREAD = 1.0         # the simulator's default time model (TGS_SIM_NS_PER_THREAD)


def available() -> bool:
    """numba-cuda is importable (without importing it)."""
    import importlib.util
    return importlib.util.find_spec("numba_cuda") is not None


def grid_for(kernel_us: float, block: int = BLOCK) -> int:
    """Blocks of `block` threads that keep the simulated device busy for kernel_us."""
    return max(1, round(kernel_us * 1000 / NS_PER_THREAD / block))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="numba-cuda job reporting like tgs-workload")
    ap.add_argument("--name", default="numba")
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--kernels", type=int, default=10)
    ap.add_argument("--kernel-us", type=float, default=500.0)
    ap.add_argument("--gap-ms", type=float, default=0.0)
    ap.add_argument("--report-ms", type=float, default=0.0)
    a = ap.parse_args(argv)
    if a.seconds is not None and a.iters is not None:
        ap.error("give --seconds or --iters, not both")
    if a.seconds is None and a.iters is None:
        a.seconds = 10.0
    if (a.seconds is not None and not a.seconds > 0) or (a.iters is not None and a.iters < 1):
        ap.error("--seconds must be positive, --iters at least 1")
    if a.kernels < 1 or not a.kernel_us > 0 or a.gap_ms < 0 or a.report_ms < 0:
        ap.error("--kernels >= 1, --kernel-us > 0, --gap-ms >= 0, --report-ms >= 0")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    warnings.simplefilter("ignore")          # numba's performance / linker warnings
    try:
        import numpy as np
        from numba import cuda
    except ImportError:
        emit("error", a.name, error="numba-cuda is not installed (pip install -e '.[test]')")
        return 1

    @cuda.jit
    def step(x):  # noqa: ANN001, ANN202 - a numba kernel
        i = cuda.grid(1)
        if i < x.size:
            x[i] = x[i] * 0.5 + 1.0

    grid = grid_for(a.kernel_us)
    try:
        buf = cuda.device_array(1 << 16, dtype=np.float32)
        step[grid, BLOCK](buf)                # JIT compile + first launch
        cuda.synchronize()
        dev = cuda.get_current_device()
    except Exception as exc:                  # numba's CudaSupportError / CudaAPIError
        emit("error", a.name, error=f"{type(exc).__name__}: {exc}")
        return 1
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    emit("start", a.name, pid=os.getpid(), device=int(dev.id), device_name=name,
         config={"kernels": a.kernels, "kernel_us": a.kernel_us, "gap_ms": a.gap_ms,
                 "seconds": a.seconds or 0, "iters": a.iters or 0, "report_ms": a.report_ms},
         geometry={"grid": grid, "block": BLOCK})
    start = time.monotonic()
    run = Progress(a.name, a.report_ms, start)
    while not stop["now"]:
        if a.iters is not None and len(run.lat) >= a.iters:
            break
        if a.seconds is not None and time.monotonic() - start >= a.seconds:
            break
        t0 = time.monotonic()
        for _ in range(a.kernels):
            step[grid, BLOCK](buf)
        cuda.synchronize()
        if a.gap_ms > 0:
            time.sleep(a.gap_ms / 1000)
        now = time.monotonic()
        run.step(now, (now - t0) * 1000)
    n = len(run.lat)
    run.summary(time.monotonic() - start, kernels=n * a.kernels,
                work_units=n * a.kernels * grid * BLOCK, interrupted=stop["now"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
