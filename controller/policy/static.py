"""`static`: a fixed share per opportunistic job, as HAMi-core's SM limit does.

rate = share x the job's own solo work rate estimate (its peak observed rate
while unthrottled), no gate, no in-flight cap.  Until a job has been measured
for WARMUP_S it runs unlimited, so the estimate is a solo-ish one.
"""

from __future__ import annotations

from .base import OPPORTUNISTIC, PRODUCTION_DECISION, Decision, DeviceSignals, JobSignals, Policy

WARMUP_S = 1.0
THROTTLED = 0.05


class StaticPolicy(Policy):
    name = "static"

    def __init__(self, share: float = 0.3) -> None:
        super().__init__()
        if not 0 < share <= 1:
            raise ValueError(f"static share must be in (0, 1], got {share}")
        self.share = share
        self.peak: dict[str, float] = {}
        self.first_seen: dict[str, float] = {}

    def forget(self, name: str) -> None:
        self.peak.pop(name, None)
        self.first_seen.pop(name, None)

    def decide(self, now: float, dt: float, devices: dict[int, DeviceSignals],
               jobs: list[JobSignals]) -> dict[str, Decision]:
        out: dict[str, Decision] = {}
        for j in jobs:
            if j.priority != OPPORTUNISTIC:
                out[j.name] = PRODUCTION_DECISION
                continue
            if j.nproc == 0:
                out[j.name] = Decision(reason="static")
                continue
            first = self.first_seen.setdefault(j.name, now)
            if j.throttled_frac <= THROTTLED:
                self.peak[j.name] = max(self.peak.get(j.name, 0.0), j.work_rate)
            peak = self.peak.get(j.name, 0.0)
            if now - first < WARMUP_S or peak <= 0:
                out[j.name] = Decision(reason="static-warmup")
            else:
                out[j.name] = Decision(rate=max(1.0, self.share * peak), reason="static")
        return out
