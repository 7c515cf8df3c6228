"""Metrics of the oversubscription benchmark (tgs.bench.oversub), pure functions tested on
synthetic series (tests/bench/test_bench_oversub.py).

Inputs are what a run records: production's "alloc"/"free"/"check" lines (tgs-workload's memory
schedule), each job's cumulative iterations over CLOCK_MONOTONIC seconds, memory by process.
Definitions (docs/benchmarks.md, "Memory oversubscription", repeats them):
- allocation latency: the wall time of each production cuMemAlloc call (p50, max; successful
  calls only; a failed call is an OOM, reported with its step and time);
- production's throughput: iterations/s during its ramp (first to last successful allocation)
  and at its peak (last successful allocation to the start of its free), each against the same
  window of its solo run;
- opportunistic throughput: iterations/s over `before` (its loop start to production's first
  allocation), `during` (production's last successful allocation to its free: production at
  its peak, the opportunistic job evicted when its memory is managed) and `after` (the second
  half of the time between production's free and the job's end: its new steady state);
- recovery: from the end of production's free (its memory is free) until the opportunistic
  job's throughput over a sliding RECOVERY_WINDOW_S window first reaches RECOVERY_TARGET of its
  `before` (the window's end: an upper bound, at most one window late); None when it never
  does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tgs.bench import metrics as M

Series = Sequence[tuple[float, float]]
RECOVERY_TARGET = 0.95
RECOVERY_WINDOW_S = 0.2


def quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile (q in [0, 1]); NaN when empty."""
    if not values:
        return math.nan
    v = sorted(values)
    return v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))]


def alloc_stats(events: Sequence[dict[str, Any]], t0: float | None = None) -> dict[str, Any]:
    """Production's allocation outcomes from its "alloc" lines: how many ran and succeeded,
    the first failure (step, result, time since t0 in s: default its first allocation), and
    the latency of the successful calls (ms)."""
    allocs = [e for e in events if e.get("type") == "alloc"]
    ok = [e for e in allocs if e.get("ok")]
    start = t0 if t0 is not None else (float(allocs[0]["mono_s"]) if allocs else math.nan)
    fail = next((e for e in allocs if not e.get("ok")), None)
    lat = [float(e["us"]) / 1e3 for e in ok]
    return {
        "steps": len(allocs), "ok": len(ok),
        "oom": None if fail is None else {
            "step": int(fail["step"]), "result": fail.get("result"),
            "held_mib": int(fail.get("held", 0)) >> 20,
            "t_s": float(fail["mono_s"]) - start},
        "lat_ms_p50": quantile(lat, 0.5), "lat_ms_max": max(lat) if lat else math.nan,
    }


def event_time(events: Sequence[dict[str, Any]], kind: str, ok_only: bool = False,
               last: bool = False, begin: bool = False) -> float | None:
    """CLOCK_MONOTONIC time of the first (or last) event of a kind (begin: when it began, for a
    free: before its check and the free calls, where the line says)."""
    hits = [float(e["begin_mono_s"] if begin and "begin_mono_s" in e else e["mono_s"])
            for e in events if e.get("type") == kind and (e.get("ok", True) or not ok_only)]
    if not hits:
        return None
    return hits[-1] if last else hits[0]


def window_rate(cum: Series, t0: float | None, t1: float | None) -> float:
    """Iterations/s of a cumulative series over [t0, t1]; NaN for an empty or missing window."""
    if not cum or t0 is None or t1 is None or t1 <= t0:
        return math.nan
    t0, t1 = max(t0, cum[0][0]), min(t1, cum[-1][0])
    return M.delta(cum, t0, t1) / (t1 - t0) if t1 > t0 else math.nan


def phase_rates(cum: Series, t_ramp: float | None, t_peak: float | None,
                t_free: float | None) -> dict[str, float]:
    """The opportunistic job's throughput before, during and after (module docstring)."""
    end = cum[-1][0] if cum else None
    start = cum[0][0] if cum else None
    after0 = None if t_free is None or end is None else t_free + (end - t_free) / 2
    return {"before": window_rate(cum, start, t_ramp),
            "during": window_rate(cum, t_peak, t_free),
            "after": window_rate(cum, after0, end)}


def prod_rates(cum: Series, events: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Production's iterations/s during its ramp (first to last successful allocation) and at
    its peak (last successful allocation to the start of its free): windows that leave out its
    own set-up and its check and free."""
    first = event_time(events, "alloc")
    peak = event_time(events, "alloc", ok_only=True, last=True)
    return {"ramp": window_rate(cum, first, peak),
            "peak": window_rate(cum, peak, event_time(events, "free", begin=True))}


def recovery_time(cum: Series, t_change: float | None, target: float,
                  window: float = RECOVERY_WINDOW_S) -> float | None:
    """Seconds from t_change until the rate over a sliding `window` first reaches `target`
    (stamped at the window's end); None without data or when it never does."""
    if not cum or t_change is None or not target > 0:
        return None
    for t, _ in cum:
        if t < t_change + window:
            continue
        if M.delta(cum, t - window, t) / window >= target:
            return t - t_change
    return None


def memory_by_job(series: Sequence[tuple[float, dict[int, Any]]], pids: dict[str, int],
                  t0: float = 0.0) -> dict[str, list[tuple[float, int, int, int]]]:
    """{job: [(t - t0, device, resident, host)]} from samples of {pid: MemUse or [d, r, h]};
    a job absent from a sample (not started, or gone) counts as holding nothing."""
    out: dict[str, list[tuple[float, int, int, int]]] = {n: [] for n in pids}
    for t, procs in series:
        for name, pid in pids.items():
            u = procs.get(pid)
            d, r, h = (0, 0, 0) if u is None else (
                tuple(u) if isinstance(u, (list, tuple)) else (u.device, u.resident, u.host))
            out[name].append((t - t0, int(d), int(r), int(h)))
    return out


def peak(mem: Sequence[tuple[float, int, int, int]]) -> dict[str, int]:
    """The largest on-GPU (device + resident) and on-host bytes of one job's memory series."""
    return {"gpu": max((d + r for _, d, r, _ in mem), default=0),
            "host": max((h for _, _, _, h in mem), default=0)}
