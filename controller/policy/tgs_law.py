"""`tgs`: the published TGS control law (NSDI'23), over our signals, for comparison.

As the field notes describe it: production's block rate (here: its work rate)
is sampled per WINDOW (5 s); the first PROFILE_S (25 s) profile production's
solo maximum; then each opportunistic job's limit follows slow start (x1.5 + 1
while production is within 3 % of its maximum), congestion avoidance (+max(
0.00025 * max, 1000) while fine, -8 % when not, back to slow start with limit/10
beyond 9 %), idle detection (>= 3 of the last 5 samples under 1000 -> unlimited),
re-profiling after a > 20 % shift, and a stale maximum decaying x0.8 after 20
bad steps.  No gate and no in-flight cap: that is the point of comparing.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .base import (
    OPPORTUNISTIC,
    PRODUCTION,
    PRODUCTION_DECISION,
    Decision,
    DeviceSignals,
    JobSignals,
    Policy,
    by_device,
)

WINDOW = 5.0
PROFILE_S = 25.0
THRESH = 0.03
THRESH_HIGH = 0.09
IDLE_RATE = 1000.0
SHIFT = 0.20
STALE_STEPS = 20
INITIAL_LIMIT = 1000.0


@dataclass
class _Law:
    start: float
    window_start: float
    acc: float = 0.0                 # production work in the current window
    samples: deque = field(default_factory=lambda: deque(maxlen=5))
    max_rate: float = 0.0
    profiling: bool = True
    slow_start: bool = True
    bad_steps: int = 0
    limits: dict[str, float] = field(default_factory=dict)


class TgsLawPolicy(Policy):
    name = "tgs"

    def __init__(self) -> None:
        super().__init__()
        self.laws: dict[int, _Law] = {}

    def forget(self, name: str) -> None:
        for law in self.laws.values():
            law.limits.pop(name, None)

    def decide(self, now: float, dt: float, devices: dict[int, DeviceSignals],
               jobs: list[JobSignals]) -> dict[str, Decision]:
        out: dict[str, Decision] = {}
        for index, djobs in by_device(jobs).items():
            law = self.laws.setdefault(index, _Law(start=now, window_start=now))
            prod = [j for j in djobs if j.priority == PRODUCTION]
            opp = [j for j in djobs if j.priority == OPPORTUNISTIC]
            for j in prod:
                out[j.name] = PRODUCTION_DECISION
            law.acc += sum(j.work_rate for j in prod) * dt
            if now - law.window_start >= WINDOW:
                rate = law.acc / (now - law.window_start)
                law.acc, law.window_start = 0.0, now
                self._step(law, now, rate, [j.name for j in opp])
            idle = sum(1 for s in law.samples if s < IDLE_RATE) >= 3 or \
                not any(j.nproc > 0 for j in prod)
            for j in opp:
                lim = law.limits.setdefault(j.name, INITIAL_LIMIT)
                rate_limit = None if idle and not law.profiling else lim
                out[j.name] = Decision(rate=rate_limit, burst_s=0.05,
                                       reason="profile" if law.profiling else "law")
            self.notes[index] = {"max_rate": law.max_rate, "profiling": float(law.profiling),
                                 "slow_start": float(law.slow_start)}
        return out

    def _step(self, law: _Law, now: float, rate: float, opp: list[str]) -> None:
        law.samples.append(rate)
        if law.profiling:
            law.max_rate = max(law.max_rate, rate)
            if now - law.start >= PROFILE_S:
                law.profiling = False
            return
        if law.max_rate <= 0:
            law.max_rate = rate
            return
        if rate > law.max_rate * (1 + SHIFT):      # production changed: profile again
            law.profiling, law.start, law.max_rate = True, now, rate
            return
        delta = abs(rate - law.max_rate) / law.max_rate
        for name in opp:
            lim = law.limits.setdefault(name, INITIAL_LIMIT)
            if law.slow_start:
                if delta <= THRESH:
                    lim = lim * 1.5 + 1
                else:
                    lim, law.slow_start = lim / 1.5, False
            elif delta >= THRESH_HIGH:
                lim, law.slow_start = lim / 10, True
            elif delta <= THRESH:
                lim += max(0.00025 * law.max_rate, 1000.0)
            else:
                lim *= 0.92
            law.limits[name] = max(lim, 1.0)
        law.bad_steps = law.bad_steps + 1 if delta > THRESH else 0
        if law.bad_steps >= STALE_STEPS:
            law.max_rate *= 0.8
            law.bad_steps = 0
