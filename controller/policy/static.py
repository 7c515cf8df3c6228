"""`static`: a fixed share per opportunistic job, as HAMi-core's SM limit does.

rate = share x the job's peak work rate, no gate, no in-flight cap.  The peak must be measured
fairly (it is a baseline): a job's first second after it attached is framework start-up and
never counts; after WARMUP_S the job runs unlimited for MEASURE_PERIODS periods every
REFRESH_S (MEASURE_PERIODS / (REFRESH_S / period) of its time, 5 % at 50 ms), and each period
of such a burst after its first (the token bucket's backlog drains) in which the job worked is
one sample: its rate.  A burst in which it did no work (it paused, or was between steps) says
nothing and is tried again after RETRY_S: a job that works 1 s in 2 would otherwise be
measured in its pauses, held to a share of nearly nothing, and measured again only in the
sliver of a step that the limit let through.  Any other period in which the job was not held
by its limit (throttled under 5 %) is a sample too.  The peak is the largest sample of the
last HORIZON_S, so a job that speeds up after its start-up, or that ran alone within the
horizon, is limited to its share of what it can do.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .base import OPPORTUNISTIC, PRODUCTION_DECISION, Decision, DeviceSignals, JobSignals, Policy

WARMUP_S = 1.0            # after attaching: start-up, not measured
REFRESH_S = 3.0           # an unlimited measurement burst this often
MEASURE_PERIODS = 3       # periods per burst (the first is not counted)
RETRY_S = 1.0             # after a burst without work
HORIZON_S = 10.0          # the peak is the largest sample this recent
THROTTLED = 0.05


@dataclass
class _Job:
    first: float
    samples: deque = field(default_factory=deque)   # (time, rate)
    next_measure: float = 0.0
    measuring: int = 0        # periods left in the current burst
    sampled: bool = False     # the current burst gave a sample

    def peak(self, now: float) -> float:
        while self.samples and self.samples[0][0] < now - HORIZON_S:
            self.samples.popleft()
        return max((r for _, r in self.samples), default=0.0)


class StaticPolicy(Policy):
    name = "static"

    def __init__(self, share: float = 0.3) -> None:
        super().__init__()
        if not 0 < share <= 1:
            raise ValueError(f"static share must be in (0, 1], got {share}")
        self.share = share
        self.jobs: dict[str, _Job] = {}

    def forget(self, name: str) -> None:
        self.jobs.pop(name, None)

    def decide(self, now: float, dt: float, devices: dict[int, DeviceSignals],
               jobs: list[JobSignals]) -> dict[str, Decision]:
        out: dict[str, Decision] = {}
        for j in jobs:
            if j.priority != OPPORTUNISTIC:
                out[j.name] = PRODUCTION_DECISION
                continue
            if j.nproc == 0:
                self.jobs.pop(j.name, None)
                out[j.name] = Decision(reason="static")
                continue
            st = self.jobs.setdefault(j.name, _Job(first=now, next_measure=now + WARMUP_S))
            out[j.name] = self._one(st, j, now)
        return out

    def _one(self, st: _Job, j: JobSignals, now: float) -> Decision:
        if now - st.first < WARMUP_S:
            return Decision(reason="static-warmup")
        if st.measuring:                      # the last period ran unlimited
            if st.measuring < MEASURE_PERIODS and j.work_rate > 0:
                st.samples.append((now, j.work_rate))
                st.sampled = True
            st.measuring -= 1
            if st.measuring == 0 and not st.sampled:
                st.next_measure = now + RETRY_S
        elif j.throttled_frac <= THROTTLED and j.work_rate > 0:
            st.samples.append((now, j.work_rate))
        if not st.measuring and now >= st.next_measure:
            st.measuring, st.sampled = MEASURE_PERIODS, False
            st.next_measure = now + REFRESH_S
        if st.measuring:
            return Decision(reason="static-measure")
        peak = st.peak(now)
        if peak <= 0:
            return Decision(reason="static-warmup")
        return Decision(rate=max(1.0, self.share * peak), reason="static")
