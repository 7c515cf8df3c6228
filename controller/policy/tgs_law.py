"""`tgs`: the published TGS control law (NSDI'23), in TGS's own units, for comparison.

What TGS's public code does (docs/policy.md has the sources and the one scaled constant):

- Production's signal is CUDA *blocks* launched (gridX x gridY x gridZ), one count per
  sample (5 s in TGS).  The shims count blocks per launch beside work (threads) in their lanes
  (segment.h `tgs_lane.blocks`, graph launches counting their kernel nodes' grids), so the law
  reads real blocks; samples are expressed in blocks per 5 s whatever the sample length, so
  every threshold keeps TGS's value.
- Profiling: at least PROFILE_SAMPLES samples, and on while the maximum still moves; the
  maximum is the largest mean of two consecutive samples of the last WINDOW (5); a window
  maximum more than 5 % off moves it (to 0.975 x / 1.025 x the window maximum).  Meanwhile
  the opportunistic job's limit is 0 (one launch per 50 ms window gets through).
- Then per sample: a window maximum within 10 % raises the maximum, beyond 20 % re-profiles
  (the limit is kept).  The first sample sets the limit to LIMIT_INIT blocks per 50 ms (slow
  start); then, while fewer than 3 of the window's samples are idle (< 1000 blocks) or fewer
  than IDLE_AFTER samples have passed: slow start x1.5 + 1 while production is within 3 % of
  its maximum, else / 1.5 and congestion avoidance (+max(0.00025 x max, 1000) while within,
  -max(8 %, 1000) when not; >= 9 % off: back to slow start with limit / 10); 2 idle samples
  reset the limit to LIMIT_INIT; 3 or more (after IDLE_AFTER samples): unlimited.  20
  samples in a row >= 12 % off: the maximum decays x0.8, slow start, limit / 2.
- The opportunistic side counts its blocks per 50 ms window and sleeps while the count is over
  the limit (one kernel may overshoot): here a token rate of (limit x block size + one
  kernel) per 50 ms with a 50 ms bucket, in the work units the shim throttles, the block size
  being the opportunistic job's own measured threads per block (work / blocks).

One law per device; each opportunistic job gets its limit (TGS has one opportunistic job per
GPU; with several, each of their libraries would compute the same limit from the same input).
No gate and no in-flight cap: that is what the comparison is for.
"""

from __future__ import annotations

import math
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

TGS_SAMPLE_S = 5.0        # TGS's sample period (production side)
SAMPLE_S = 1.0            # ours: scaled 5x down so profiling + slow start fit a 25 s run
THREADS_PER_BLOCK = 256   # an opportunistic job's block size until its blocks are measured
WINDOW = 5                # samples in the sliding window
PROFILE_SAMPLES = 5
PROFILE_BAND = 0.05
KEEP_BAND = 0.10
REPROFILE = 0.20
LIMIT_WINDOW_S = 0.05     # the opportunistic side's counter window (limit: blocks per window)
LIMIT_INIT = 20000.0
RATE_MIN = 1000.0
THRESH = 0.03
IDLE_BLOCKS = 1000.0      # a sample under this (blocks per 5 s) counts as idle
IDLE_AFTER = 15           # samples before idle windows may lift the limit
STALE_DELTA = 0.12
STALE_STEPS = 20
SS_CAP = float(1 << 40)
CA_CAP = float(1 << 32)


@dataclass
class _Law:
    sample_start: float
    acc: float = 0.0                  # production blocks in the current sample
    window: deque = field(default_factory=lambda: deque([0.0] * WINDOW, maxlen=WINDOW))
    max_rate: float = 0.0
    phase: str = "profile"            # profile | run
    t: int = 0                        # samples in this profiling round
    more: bool = True                 # profiling goes on (the maximum still moves)
    cnt: int = 0                      # samples since profiling first ended
    slow_start: bool = True
    sign: int = 0
    stale: int = 0
    limit: float | None = 0.0         # blocks per LIMIT_WINDOW_S; None = unlimited
    started: float = 0.0              # when production and opportunistic work met
    profiled_s: float | None = None   # profiling's first end, s after `started`
    converged_s: float | None = None  # slow start's first end (or first lift), s after `started`


def window_max(window: deque) -> float:
    """The largest mean of two consecutive samples (TGS's smoothed maximum)."""
    w = list(window)
    return max((w[i] + w[i + 1]) / 2 for i in range(len(w) - 1))


class TgsLawPolicy(Policy):
    name = "tgs"

    def __init__(self, sample_s: float = SAMPLE_S,
                 threads_per_block: int = THREADS_PER_BLOCK) -> None:
        super().__init__()
        self.sample_s = sample_s
        self.tpb = threads_per_block        # fallback block size (nothing measured yet)
        self.laws: dict[int, _Law] = {}
        self.opp_tpb: dict[str, float] = {}  # opportunistic job -> its last measured block size

    def forget(self, name: str) -> None:
        self.opp_tpb.pop(name, None)

    def decide(self, now: float, dt: float, devices: dict[int, DeviceSignals],
               jobs: list[JobSignals]) -> dict[str, Decision]:
        out: dict[str, Decision] = {}
        for index, djobs in by_device(jobs).items():
            prod = [j for j in djobs if j.priority == PRODUCTION]
            opp = [j for j in djobs if j.priority == OPPORTUNISTIC]
            for j in prod:
                out[j.name] = PRODUCTION_DECISION
            live = any(j.nproc > 0 for j in prod) and any(j.nproc > 0 for j in opp)
            law = self.laws.get(index)
            if not live:                  # the socket is closed: no control
                self.laws.pop(index, None)
                for j in opp:
                    out[j.name] = Decision(reason="tgs-off")
                continue
            if law is None:     # samples start now (this period's work came before)
                law = self.laws[index] = _Law(sample_start=now, started=now)
            else:
                law.acc += sum(j.block_rate for j in prod) * dt
            if now - law.sample_start >= self.sample_s - 1e-9:
                # blocks per TGS sample (5 s), whatever our sample length
                sample = law.acc * TGS_SAMPLE_S / (now - law.sample_start)
                law.acc, law.sample_start = 0.0, now
                self._sample(law, now, sample)
            for j in opp:
                out[j.name] = self._decision(law, j)
            self.notes[index] = {
                "max_rate": law.max_rate, "profiling": float(law.phase == "profile"),
                "slow_start": float(law.slow_start),
                "limit": -1.0 if law.limit is None else law.limit,
                "started": law.started,
                "profiled_s": -1.0 if law.profiled_s is None else law.profiled_s,
                "converged_s": -1.0 if law.converged_s is None else law.converged_s}
        return out

    def _decision(self, law: _Law, j: JobSignals) -> Decision:
        reason = "profile" if law.phase == "profile" else "law"
        if law.limit is None:
            return Decision(reason=reason + "-idle")
        # the counter lets one more kernel through per window once under the limit
        if j.threads_per_block > 0:
            self.opp_tpb[j.name] = j.threads_per_block
        tpb = self.opp_tpb.get(j.name, float(self.tpb))
        kernel = j.work_per_launch if j.work_per_launch > 0 else tpb
        rate = (law.limit * tpb + kernel) / LIMIT_WINDOW_S
        return Decision(rate=max(1.0, rate), burst_s=LIMIT_WINDOW_S, reason=reason)

    # ------------------------------------------------------------ the law, per sample
    def _sample(self, law: _Law, now: float, sample: float) -> None:
        mwr = window_max(law.window)      # over the window before this sample
        law.window.appendleft(sample)
        if law.phase == "profile":
            self._profile(law, now, mwr)
            return
        d = (mwr - law.max_rate) / law.max_rate if law.max_rate > 0 else math.inf
        if abs(d) <= KEEP_BAND:
            law.max_rate = max(law.max_rate, mwr)
        elif abs(d) > REPROFILE:
            law.max_rate = _moved(law.max_rate, mwr, d)
            law.phase, law.t, law.more = "profile", 0, True
            return
        law.cnt += 1
        if law.cnt == 1:
            law.limit, law.slow_start = LIMIT_INIT, True
            return
        idle = sum(1 for s in law.window if s < IDLE_BLOCKS)
        if idle <= 2 or law.cnt < IDLE_AFTER:
            if idle == 2 and law.cnt > IDLE_AFTER:
                law.limit, law.slow_start = LIMIT_INIT, True
            else:
                self._update(law, now, sample)
        else:
            law.limit, law.slow_start = None, True
            if law.converged_s is None:
                law.converged_s = now - law.started

    def _profile(self, law: _Law, now: float, mwr: float) -> None:
        law.t += 1
        d = (mwr - law.max_rate) / law.max_rate if law.max_rate > 0 else math.inf
        if abs(d) <= PROFILE_BAND:
            law.max_rate = max(law.max_rate, mwr)
            # TGS: on while the window maximum is the maximum (less than one block apart)
            law.more = abs(law.max_rate - mwr) < 1.0
        else:
            law.max_rate = _moved(law.max_rate, mwr, d)
            law.more = True
        if law.t >= PROFILE_SAMPLES and not law.more:
            law.phase = "run"
            if law.profiled_s is None:
                law.profiled_s = now - law.started

    @staticmethod
    def _update(law: _Law, now: float, recv: float) -> None:
        """One step of slow start / congestion avoidance on the limit."""
        lim = law.limit if law.limit is not None else CA_CAP
        delta = abs(recv - law.max_rate) / law.max_rate if law.max_rate > 0 else math.inf
        if law.slow_start:
            if delta <= THRESH:
                lim = min(lim * 1.5 + 1, SS_CAP)
            else:
                lim, law.sign, law.slow_start = lim / 1.5, -1, False
                if law.converged_s is None:
                    law.converged_s = now - law.started
        else:
            if (law.sign == -1 and delta <= THRESH) or (law.sign == 1 and delta < THRESH):
                lim = min(lim + max(law.max_rate * 0.00025, RATE_MIN), CA_CAP)
                law.sign = 1
            else:
                lim = min(lim - max(lim * 0.08, RATE_MIN), CA_CAP)
                law.sign = -1
            if delta >= 3 * THRESH:
                law.slow_start, lim = True, lim / 10
        if delta >= STALE_DELTA:
            law.stale += 1
            if law.stale >= STALE_STEPS:
                law.max_rate *= 0.8
                law.stale, law.slow_start, lim = 0, True, lim / 2
        else:
            law.stale = 0
        law.limit = max(0.0, lim)


def _moved(max_rate: float, mwr: float, d: float) -> float:
    """A window maximum far from the maximum moves it part of the way."""
    if d > 0:
        return max(max_rate, mwr * 0.975)
    return min(max_rate, mwr * 1.025)
