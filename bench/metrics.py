"""Metric functions of the evaluation, pure (no processes): tested on synthetic series.

Series are lists of (t, value) with t in seconds (CLOCK_MONOTONIC) and increasing t.
Cumulative series (iterations done, busy seconds) are interpolated linearly between samples.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

Series = Sequence[tuple[float, float]]


def interp(series: Series, t: float) -> float:
    """Value of a cumulative series at t (linear between samples, clamped at the ends)."""
    if not series:
        return 0.0
    times = [p[0] for p in series]
    i = bisect.bisect_left(times, t)
    if i == 0:
        return series[0][1]
    if i >= len(series):
        return series[-1][1]
    (t0, v0), (t1, v1) = series[i - 1], series[i]
    if t1 <= t0:
        return v1
    return v0 + (v1 - v0) * (t - t0) / (t1 - t0)


def delta(series: Series, t0: float, t1: float) -> float:
    """Increase of a cumulative series between t0 and t1."""
    return interp(series, t1) - interp(series, t0)


def rate_series(cumulative: Series, window: float) -> list[tuple[float, float]]:
    """Sliding-window rate of a cumulative series, stamped at each window's midpoint.

    A rate over [t - window, t] is stamped at t - window / 2, so a step in the true rate shows as
    a ramp centred on the step: measuring does not add half a window of lag to reaction times.
    """
    if len(cumulative) < 2 or window <= 0:
        return []
    start = cumulative[0][0]
    out = []
    for t, _ in cumulative:
        if t - window < start - 1e-9:
            continue
        out.append((t - window / 2, delta(cumulative, t - window, t) / window))
    return out


@dataclass
class Reaction:
    """Settling after a change: seconds until a rate stays within `band` of its new steady
    state (the median of the last `steady_frac` of the interval).  settled=False: it never did
    before the interval's end, and seconds is the interval's length (a lower bound)."""

    seconds: float
    settled: bool
    steady: float


def reaction_time(rates: Series, t_change: float, t_end: float, band: float = 0.05,
                  steady_frac: float = 0.4, target: float | None = None,
                  hold: float = 1.0) -> Reaction | None:
    """Reaction of `rates` to a change at `t_change`, within [t_change, t_end]; None without data.

    The new steady state is `target` if given, else the median rate over the last
    `steady_frac` of the interval.  The reaction time is from t_change until the throughput is
    within +-band of it (the issue's definition) and stays there for `hold` seconds (or to the
    end of the interval), so one noisy window neither ends nor restarts the count: a dip
    seconds later (e.g. a policy's measurement pause) is not part of the reaction.
    """
    span = t_end - t_change
    inside = [(t, r) for t, r in rates if t_change <= t <= t_end]
    tail = [r for t, r in inside if t >= t_end - steady_frac * span]
    if span <= 0 or len(tail) < 2:
        return None
    steady = statistics.median(tail) if target is None else target
    if steady <= 0:
        return Reaction(0.0, True, 0.0)
    ok = [abs(r - steady) <= band * steady for _, r in inside]
    for i, (t, _) in enumerate(inside):
        if not ok[i]:
            continue
        until = min(t + hold, inside[-1][0])
        if all(ok[k] for k in range(i, len(inside)) if inside[k][0] <= until):
            # in the band from the first sample on: faster than the series can resolve
            return Reaction(0.0 if i == 0 else max(0.0, t - t_change), True, steady)
    return Reaction(span, False, steady)


def harvest(opp_busy_s: float, window_s: float, solo_util: float) -> float:
    """Opportunistic GPU-busy time / the GPU idle time production left when it ran alone.

    Above 1 means the opportunistic jobs also took time production used when alone.
    """
    idle = window_s * (1.0 - solo_util)
    if idle <= 1e-9:
        return 0.0
    return max(0.0, opp_busy_s) / idle


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 = equal, 1/n = one takes all."""
    if not values:
        return 1.0
    sq = sum(v * v for v in values)
    if sq <= 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * sq)


def weighted_fairness(busy: Sequence[float], weights: Sequence[float]) -> tuple[float, float]:
    """(Jain's index of busy/weight, largest |share - weighted share|) among opportunistic jobs."""
    if len(busy) != len(weights) or not busy:
        raise ValueError("busy and weights must be non-empty and of equal length")
    norm = [b / w for b, w in zip(busy, weights)]
    total, wsum = sum(busy), sum(weights)
    if total <= 0:
        return jain(norm), 0.0
    dev = max(abs(b / total - w / wsum) for b, w in zip(busy, weights))
    return jain(norm), dev


def ratio(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan
