"""Paired tail latency: production's steps while the opportunistic job runs against its steps
while that job pauses, in one run (the paired scenarios T7-T11: bench/torch_scenarios.py).
For a server (T9-T11) a step is a request: it begins at its arrival and ends at its reply.

A solo baseline measured in another run compares two stretches of a machine whose speed moves
by more than the 5 % the p99 target allows (docs/benchmarks.md); here the opportunistic job
alternates ON_S of work with OFF_S of pause (torch_train --duty, a `pause` line each), so both
halves come from the same minutes.  A step counts for a half only if it lies wholly inside it,
MARGIN_S away from a switch: the paused job synchronized before its pause, so the GPU holds
none of its work there, and the margin keeps the policy's re-adaptation out of both halves.
"""

from __future__ import annotations

import math
from typing import Any

from tgs.bench.job_report import quantile

MARGIN_S = 0.1
Span = tuple[float, float]


def split_steps(steps: list[list[float]], pauses: list[Span], window: Span,
                margin_s: float = MARGIN_S) -> tuple[list[float], list[float]]:
    """(lengths in ms of the steps while the other job ran, while it paused) among `steps`
    ([end s, length ms]) inside `window` (the other job's run: before and after it,
    production is alone but not paired with anything)."""
    on: list[float] = []
    off: list[float] = []
    w0, w1 = window
    for end, ms in steps:
        begin = end - ms / 1000.0
        if begin < w0 or end > w1:
            continue
        if any(p0 + margin_s <= begin and end <= p1 for p0, p1 in pauses):
            off.append(ms)
        elif all(end <= p0 or begin >= p1 + margin_s for p0, p1 in pauses):
            on.append(ms)
    return on, off


def _half(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    return {"n": len(s), "mean": sum(s) / len(s), "p50": quantile(s, 0.5),
            "p99": quantile(s, 0.99), "p999": quantile(s, 0.999)}


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def compare(on: list[float], off: list[float], server: bool = False) -> dict[str, Any]:
    """Both halves' quantiles and their ratios; rate_on_vs_off: production's steps per second
    beside the opportunistic job against its own while that job pauses (the mean step times'
    inverse ratio), its throughput in one run.  A server's rate is its arrivals': it gets
    mean_on_vs_off (latency) instead."""
    a, b = _half(on), _half(off)
    speed = ({"mean_on_vs_off": _ratio(a["mean"], b["mean"])} if server else
             {"rate_on_vs_off": _ratio(b["mean"], a["mean"])})
    return {"on": a, "off": b, **speed,
            "p50_on_vs_off": _ratio(a["p50"], b["p50"]),
            "p99_on_vs_off": _ratio(a["p99"], b["p99"]),
            "p999_on_vs_off": _ratio(a["p999"], b["p999"])}


def paired(steps: list[list[float]], pauses: list[Span], window: Span,
           server: bool = False) -> dict[str, Any] | None:
    """compare() of the steps in either half, None without pauses or steps; on_ms and off_ms
    keep the halves' step times, so that runs can be pooled (pool())."""
    if not pauses or not steps:
        return None
    on, off = split_steps(steps, pauses, window)
    if not on or not off:
        return None
    return {**compare(on, off, server), "on_ms": [round(ms, 3) for ms in on],
            "off_ms": [round(ms, 3) for ms in off]}


def pool(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """compare() of the halves of several runs' paired() results pooled: N runs of one
    scenario are one run N times as long, whose tail holds N times the steps (a run's p99 at
    60 % load rests on a few long busy periods).  None unless every run kept its halves."""
    if not runs or not all(isinstance(r.get("on_ms"), list) and isinstance(r.get("off_ms"), list)
                           and r["on_ms"] and r["off_ms"] for r in runs):
        return None
    on = [float(ms) for r in runs for ms in r["on_ms"]]
    off = [float(ms) for r in runs for ms in r["off_ms"]]
    return {**compare(on, off, server="mean_on_vs_off" in runs[0]), "runs": len(runs)}


def pauses_of(events: list[dict[str, Any]]) -> list[Span]:
    return [(float(e["from_s"]), float(e["to_s"])) for e in events
            if e.get("type") == "pause" and "from_s" in e and "to_s" in e]


def _speed(p: dict[str, Any]) -> str:
    if "mean_on_vs_off" in p:
        return f"mean {p['mean_on_vs_off']:.3f}"
    return f"{p.get('rate_on_vs_off', math.nan):.3f}"


def markdown(summary: dict[str, Any]) -> str:
    """Every paired run: production's steps with the opportunistic job running and paused."""
    cols = ("scenario", "policy", "steps on / off", "p50 ms on / off", "p99 ms on / off",
            "p99.9 ms on / off", "rate on/off (server: mean)", "p50 on/off", "p99 on/off",
            "p99.9 on/off")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for key, s in summary.items():
        for pol, m in s["policies"].items():
            p = m.get("paired")
            if not p:
                continue
            a, b = p["on"], p["off"]
            lines.append(
                f"| {key} | {pol} | {a['n']} / {b['n']} | " + " | ".join(
                    f"{a[q]:.2f} / {b[q]:.2f}" for q in ("p50", "p99", "p999")) +
                f" | {_speed(p)} | " +
                " | ".join(f"{p[q + '_on_vs_off']:.3f}" for q in ("p50", "p99", "p999")) + " |")
    return "\n".join(lines) + "\n" if len(lines) > 2 else ""
