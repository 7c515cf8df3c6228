"""`none`: no control at all (everything unlimited, no gating): the baseline."""

from __future__ import annotations

from .base import UNLIMITED, Decision, DeviceSignals, JobSignals, Policy


class NonePolicy(Policy):
    name = "none"

    def decide(self, now: float, dt: float, devices: dict[int, DeviceSignals],
               jobs: list[JobSignals]) -> dict[str, Decision]:
        return {j.name: UNLIMITED for j in jobs}
