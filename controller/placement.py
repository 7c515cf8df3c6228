"""Placement signals per GPU: how much of its time production uses, and how much it leaves.

Policy-independent: the control loop feeds every period's device signals (production's live
busy processes, from the shims' `dev_active`: production has work queued on the GPU), whatever
the policy, so a cluster scheduler gets the same figures under `none`, `static`, `tgs` or
`adaptive`.  Per GPU:

- ``production_duty``: the share of time production was busy, an exponentially weighted
  average over DUTY_TAU_S (time-weighted: each period counts its length; a period is busy
  when production had work queued at its end, so over many periods the average is unbiased);
- ``production_busy_s`` / ``production_idle_s``: seconds of controller time the GPU was busy
  with production / not (a GPU without production jobs is idle), exact sums of the periods:
  Prometheus counters whose rate over any window is that window's busy / idle share.

The status reply carries them per device (``placement``), the metrics endpoint exports them
(``tgs_gpu_production_duty``, ``tgs_gpu_production_busy_seconds_total``,
``tgs_gpu_production_idle_seconds_total``) and the device plugin's node label is computed from
``production_duty`` (k8s/signals.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .policy.base import DeviceSignals
from .replies import PlacementInfo

DUTY_TAU_S = 30.0      # the duty's averaging time constant (the node label's interval)
MAX_PERIOD_S = 5.0     # a longer gap between periods (a stalled loop) counts this much


@dataclass
class _Gpu:
    duty: float = 0.0
    busy_s: float = 0.0
    idle_s: float = 0.0
    seen_s: float = 0.0        # time accumulated: the first DUTY_TAU_S weighs evenly


class PlacementTracker:
    """Per-GPU production duty and idle time, updated once per control period."""

    def __init__(self, tau_s: float = DUTY_TAU_S) -> None:
        self.tau_s = tau_s
        self.gpus: dict[int, _Gpu] = {}

    def update(self, dt: float, devices: dict[int, DeviceSignals]) -> None:
        """One period of length dt (s) ended; devices: production's activity at its end."""
        dt = min(max(dt, 0.0), MAX_PERIOD_S)
        if dt <= 0:
            return
        for index, sig in devices.items():
            g = self.gpus.setdefault(index, _Gpu())
            busy = sig.prod_active > 0
            if busy:
                g.busy_s += dt
            else:
                g.idle_s += dt
            g.seen_s += dt
            # until tau has passed, the mean of what was seen; then an EWMA with time constant
            # tau (so a fresh controller does not start from "idle")
            w = max(1.0 - math.exp(-dt / self.tau_s), dt / g.seen_s)
            g.duty += w * ((1.0 if busy else 0.0) - g.duty)

    def info(self, uuids: dict[int, str]) -> list[PlacementInfo]:
        return [PlacementInfo(index=i, uuid=uuids.get(i, "?"),
                              production_duty=round(min(1.0, max(0.0, g.duty)), 4),
                              production_busy_s=round(g.busy_s, 3),
                              production_idle_s=round(g.idle_s, 3), duty_tau_s=self.tau_s)
                for i, g in sorted(self.gpus.items())]
