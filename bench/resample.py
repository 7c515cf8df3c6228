"""How far a pooled paired figure could move with the runs it was pooled from.

The requests of one run are not independent draws: a run's p99 at 60 % load rests on a few long
busy periods, and a host that stalls stalls a whole run.  So the interval resamples whole runs
with replacement, pools each resample as paired.pool() pools the runs, and keeps the central
LEVEL of the figure over RESAMPLES resamples (a fixed seed: the same runs give the same
interval).  Three runs give a rough interval; it narrows as runs are added (`python -m
tgs.bench.pool DIR...` pools the runs of several invocations).
"""

from __future__ import annotations

import math
import random
from typing import Any

from tgs.bench import paired
from tgs.bench.job_report import quantile

RESAMPLES = 400
LEVEL = 0.9
# the pooled figures given an interval: a server's mean latency, a training job's rate, the p99
FIGURES = ("mean_on_vs_off", "rate_on_vs_off", "p99_on_vs_off")


def intervals(runs: list[dict[str, Any]], resamples: int = RESAMPLES, level: float = LEVEL,
              seed: int = 0) -> dict[str, list[float]]:
    """figure -> [low, high]: the central `level` of paired.pool(resample)[figure] over
    `resamples` resamples of the runs (paired() results), for each of FIGURES the resampled
    pools have; empty with fewer than two runs."""
    if len(runs) < 2:
        return {}
    rng = random.Random(seed)
    values: dict[str, list[float]] = {f: [] for f in FIGURES}
    for _ in range(resamples):
        p = paired.pool([runs[rng.randrange(len(runs))] for _ in runs])
        for figure, vs in values.items():
            v = p.get(figure) if p else None
            if isinstance(v, (int, float)) and math.isfinite(v):
                vs.append(float(v))
    tail = (1.0 - level) / 2.0
    return {f: [round(quantile(sorted(vs), tail), 4), round(quantile(sorted(vs), 1.0 - tail), 4)]
            for f, vs in values.items() if vs}


def markdown(pool: dict[str, dict[str, dict[str, Any]]]) -> str:
    """One line per pooled scenario and policy with intervals; empty when none has one."""
    names = {"mean_on_vs_off": "mean latency on/off", "rate_on_vs_off": "rate on/off",
             "p99_on_vs_off": "p99 on/off"}
    lines = []
    for key, policies in pool.items():
        for pol, p in policies.items():
            ivs = p.get("intervals") or {}
            parts = [f"{names[f]} {p[f]:.3f} ({ivs[f][0]:.3f}-{ivs[f][1]:.3f})"
                     for f in FIGURES if f in ivs and isinstance(p.get(f), (int, float))]
            if parts:
                lines.append(f"- {key} {pol}, {p.get('runs', '?')} runs: " + ", ".join(parts))
    if not lines:
        return ""
    return (f"\nWith the central {100 * LEVEL:.0f} % of {RESAMPLES} resamples of whole runs "
            "(tgs.bench.resample):\n\n" + "\n".join(lines) + "\n")
