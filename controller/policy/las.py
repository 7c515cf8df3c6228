"""`las`: opportunistic jobs ordered among themselves by attained service (Tiresias, NSDI'19).

Discretised 2D-LAS: a job's attained service is GPU time x GPUs: the seconds it was allowed to
run (and had a live process) times the GPUs it holds (one device per job here).  Priority
queues by attained service: queue q holds jobs whose service since they entered the queue ladder
(arrival, or their last promotion) has crossed `thresholds[q - 1]`; jobs only move down, except
by promotion.  Per device, the jobs of the highest non-empty queue run in arrival order (FIFO
within a queue): the first one runs exclusively, as Tiresias gives a job its GPUs; jobs ahead of
it that have nothing to run (no work for IDLE_PERIODS periods while allowed) do not hold the GPU.
The others are paused (rate 1 work unit/s: at most one kernel slips through per pause).
Starvation bound: a job that has waited longer than `starve_k` x its executed time (and at least
`starve_min_s`) is promoted to the top queue.  Production is untouched: the jobs allowed to run
are passed to the default policy (`adaptive`), which protects production exactly as without LAS.

Tiresias's public simulator uses 3 queues with thresholds in thousands of GPU-seconds (hours-long
jobs); THRESHOLDS here are scaled to the benchmark's jobs (seconds), as a constructor argument.
"""

from __future__ import annotations

from dataclasses import dataclass

from .adaptive import AdaptivePolicy
from .base import (
    GATE_WAIT,
    OPPORTUNISTIC,
    Decision,
    DeviceSignals,
    JobSignals,
    Policy,
)

THRESHOLDS = (1.0, 3.0)    # GPU-seconds: 3 queues
STARVE_K = 4.0             # promote after waiting this many times its executed time
STARVE_MIN_S = 2.0         # ... and at least this long
IDLE_PERIODS = 4           # allowed but no work this many periods: does not hold the GPU
PAUSE_RATE = 1.0


@dataclass
class _Job:
    arrival: float
    order: int                 # tie-break for equal arrival times
    attained: float = 0.0      # GPU-seconds
    executed: float = 0.0      # seconds allowed to run
    base: float = 0.0          # attained service when it entered the ladder (promotion)
    queue: int = 0
    waiting_since: float | None = None
    idle: int = 0              # periods allowed without work
    allowed: bool = False


class LasPolicy(Policy):
    name = "las"

    def __init__(self, thresholds: tuple[float, ...] = THRESHOLDS, starve_k: float = STARVE_K,
                 starve_min_s: float = STARVE_MIN_S) -> None:
        super().__init__()
        if list(thresholds) != sorted(thresholds) or any(t <= 0 for t in thresholds):
            raise ValueError(f"LAS thresholds must be positive and increasing: {thresholds}")
        self.thresholds = tuple(thresholds)
        self.starve_k = starve_k
        self.starve_min_s = starve_min_s
        self.inner = AdaptivePolicy()
        self.jobs: dict[str, _Job] = {}
        self._seen = 0

    def forget(self, name: str) -> None:
        self.jobs.pop(name, None)
        self.inner.forget(name)

    def decide(self, now: float, dt: float, devices: dict[int, DeviceSignals],
               jobs: list[JobSignals]) -> dict[str, Decision]:
        opp = [j for j in jobs if j.priority == OPPORTUNISTIC and j.nproc > 0]
        for j in jobs:
            if j.priority == OPPORTUNISTIC and j.nproc == 0 and j.name in self.jobs:
                self.jobs.pop(j.name)          # ended: its service no longer matters
        self._account(now, dt, opp)
        allowed = self._choose(now, opp)
        paused = {j.name for j in opp} - allowed
        passed = [j for j in jobs if j.name not in paused]
        out = self.inner.decide(now, dt, devices, passed)
        for name in paused:
            out[name] = Decision(rate=PAUSE_RATE, gate=GATE_WAIT, reason="las-wait")
        self.notes = {k: dict(v) for k, v in self.inner.notes.items()}
        for j in opp:
            st = self.jobs[j.name]
            self.notes.setdefault(j.device, {})[f"q:{j.name}"] = float(st.queue)
        return out

    def _account(self, now: float, dt: float, opp: list[JobSignals]) -> None:
        """Service for last period's allowed jobs, queues, starvation promotion."""
        for j in opp:
            st = self.jobs.get(j.name)
            if st is None:
                st = self.jobs[j.name] = _Job(arrival=now, order=self._seen)
                self._seen += 1
                continue
            if st.allowed:
                st.executed += dt
                st.attained += dt * 1          # GPUs held: one device per job
                st.idle = st.idle + 1 if j.work_rate <= 0 else 0
                st.waiting_since = None
            elif st.waiting_since is None:
                st.waiting_since = now
            since = st.attained - st.base
            st.queue = max(st.queue, sum(1 for t in self.thresholds if since >= t))
            if st.waiting_since is not None and st.queue > 0:
                waited = now - st.waiting_since
                if waited >= max(self.starve_min_s, self.starve_k * st.executed):
                    st.queue, st.base, st.waiting_since = 0, st.attained, now

    def _choose(self, now: float, opp: list[JobSignals]) -> set[str]:
        """Per device: jobs in (queue, arrival) order up to and including the first one that
        has work to run."""
        allowed: set[str] = set()
        devices: dict[int, list[JobSignals]] = {}
        for j in opp:
            devices.setdefault(j.device, []).append(j)
        for djobs in devices.values():
            order = sorted(djobs, key=lambda j: (self.jobs[j.name].queue,
                                                 self.jobs[j.name].arrival,
                                                 self.jobs[j.name].order))
            for j in order:
                allowed.add(j.name)
                if self.jobs[j.name].idle < IDLE_PERIODS:
                    break
        for j in opp:
            self.jobs[j.name].allowed = j.name in allowed
        return allowed
