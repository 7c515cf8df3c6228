"""The JSON lines every benchmark job program prints (tgs-workload's format), in one place.

Python job programs (bench/numba_job.py, bench/torch_train.py, bench/torch_infer.py) emit
`start`, `progress` every report_ms, one `summary` (it_per_s and latency quantiles), or
`error`; the suite's samplers read them (bench/metrics.py).  With a go signal (--go-signal:
the harness's PyTorch jobs) a job prints `ready` after its warm-up and starts its run on
SIGUSR1.  Run as a script by a framework's own interpreter, so it imports nothing from tgs.
"""

from __future__ import annotations

import json
import math
import signal
from typing import Any

GO_SIGNAL = signal.SIGUSR1


def emit(kind: str, name: str, **fields: Any) -> None:
    print(json.dumps({"type": kind, "name": name, **fields}), flush=True)


def arm_go() -> None:
    """Blocks the go signal before anything slow: one that arrives early stays pending
    (its default action would end the process)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {GO_SIGNAL})


def wait_go(name: str, stop: dict[str, bool]) -> None:
    """After the warm-up: `ready`, then the go signal (or a stop: SIGTERM's handler)."""
    emit("ready", name)
    while not stop["now"] and signal.sigtimedwait({GO_SIGNAL}, 0.1) is None:
        pass


def quantile(s: list[float], p: float) -> float:
    """The p-quantile of the sorted list s (nearest rank), 0 when s is empty."""
    return s[min(len(s) - 1, max(0, math.ceil(p * len(s)) - 1))] if s else 0.0


class Progress:
    """Iteration latencies of one run, a `progress` line every report_ms, the `summary`."""

    def __init__(self, name: str, report_ms: float, start: float,
                 step_times: bool = False) -> None:
        self.name, self.report_ms, self.start = name, report_ms, start
        self.lat: list[float] = []
        # with step_times: each step's (end, CLOCK_MONOTONIC s; ms) in the summary's `steps`
        self.steps: list[list[float]] | None = [] if step_times else None
        self._last, self._last_iters = start, 0

    def step(self, now: float, lat_ms: float) -> None:
        self.lat.append(lat_ms)
        if self.steps is not None:
            self.steps.append([round(now, 5), round(lat_ms, 4)])
        if self.report_ms > 0 and (now - self._last) * 1000 >= self.report_ms:
            emit("progress", self.name, t_s=now - self.start, iters=len(self.lat),
                 window_s=now - self._last, window_iters=len(self.lat) - self._last_iters,
                 it_per_s=(len(self.lat) - self._last_iters) / (now - self._last), mono_s=now)
            self._last, self._last_iters = now, len(self.lat)

    def summary(self, elapsed: float, **extra: Any) -> None:
        s = sorted(self.lat)
        emit("summary", self.name, iters=len(s), elapsed_s=elapsed,
             it_per_s=len(s) / elapsed if elapsed > 0 else 0.0,
             lat_ms={"mean": sum(s) / len(s) if s else 0.0, "p50": quantile(s, 0.5),
                     "p99": quantile(s, 0.99), "p999": quantile(s, 0.999),
                     "min": s[0] if s else 0.0, "max": s[-1] if s else 0.0},
             **({"steps": self.steps} if self.steps is not None else {}), **extra)
