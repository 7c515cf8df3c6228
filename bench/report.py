"""From run records to metrics per scenario and policy, a Markdown table and JSON.

Definitions (docs/benchmarks.md repeats them):
- window: the interval in which every production job ran (its first to last progress line);
- prod/solo: production it/s / its it/s in the production-only baseline (alone when it is the
  only production job); the worst production job counts;
- p99/solo: production's p99 iteration time / the baseline's (the worst job);
- harvest: opportunistic GPU-busy seconds in the window / the GPU idle seconds production left
  in the baseline over as long a window (> 1: it also took production's time);
- util: GPU-busy fraction of the window;
- opp/solo: opportunistic it/s in the window / its it/s alone (mean over the jobs);
- reaction: settling time (5 % band) of production's throughput after its demand rises (S3:
  light -> heavy; S4: its arrival), and of opportunistic throughput after production's demand
  falls (S3: heavy -> light; S4: production leaving);
- fairness (S2): Jain's index of busy/weight among opportunistic jobs, and the largest
  deviation of a job's share of their busy time from its weighted share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tgs.bench import metrics as M
from tgs.bench import paired
from tgs.bench.harness import JobRun, RunRecord
from tgs.bench.scenarios import Scenario

RATE_WINDOW_S = 0.25


@dataclass
class ScenarioResult:
    """Everything measured for one scenario: baselines and one run per policy."""

    key: str
    title: str
    scenarios: dict[str, Scenario]      # by policy (the tgs one may run longer)
    solo: dict[str, RunRecord]          # by job name: the job alone
    prod_only: RunRecord | None         # production jobs together (None: one production job)
    runs: dict[str, RunRecord]          # by policy
    failed: dict[str, str] = field(default_factory=dict)   # policy -> why its run failed


def _window(rec: RunRecord, names: list[str]) -> tuple[float, float]:
    starts, ends = [], []
    for n in names:
        cum = rec.jobs[n].cumulative()
        if cum:
            starts.append(cum[0][0])
            ends.append(cum[-1][0])
    if not starts or max(starts) >= min(ends):
        return math.nan, math.nan
    return max(starts), min(ends)


def _baseline(res: ScenarioResult, prod: list[str]) -> RunRecord:
    return res.prod_only if res.prod_only is not None else res.solo[prod[0]]


def _react(job: JobRun, changes: list[tuple[float, float]], target: float | None = None,
           floor: float = 0.0) -> list[M.Reaction]:
    """Reactions of a job's throughput to each change (tc, t_end).  A new steady state under
    `floor` counts as never reached (a job held at ~0 has nothing to settle to)."""
    rates = M.rate_series(job.cumulative(), RATE_WINDOW_S)
    out = []
    for tc, end in changes:
        te = end - RATE_WINDOW_S / 2      # later windows already see the next change
        r = M.reaction_time(rates, tc, te, target=target)
        if r is None and floor > 0:
            r = M.Reaction(te - tc, False, 0.0)     # no progress at all after the change
        if r is not None and r.steady < floor:
            r = M.Reaction(te - tc, False, r.steady)
        if r is not None:
            out.append(r)
    return out


def _phase_changes(job: JobRun, phase_s: float) -> tuple[list[tuple[float, float]],
                                                         list[tuple[float, float]]]:
    """(rising, falling) production demand changes of a light/heavy phased job: (t, t_end)."""
    cum = job.cumulative()
    if not cum or phase_s <= 0:
        return [], []
    start, end = cum[0][0], cum[-1][0]
    rising, falling = [], []
    k = 1
    while start + k * phase_s < end - 0.5:
        tc = start + k * phase_s
        (rising if k % 2 == 1 else falling).append((tc, min(tc + phase_s, end)))
        k += 1
    return rising, falling


def _reaction_summary(rs: list[M.Reaction]) -> dict[str, Any] | None:
    if not rs:
        return None
    worst = max(rs, key=lambda r: r.seconds)
    return {"seconds": round(worst.seconds, 3), "settled": all(r.settled for r in rs),
            "each": [round(r.seconds, 3) for r in rs]}


def reactions(sc: Scenario, rec: RunRecord, opp_solo: float = 0.0
              ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(production's reaction to rising demand, opportunistic reaction to falling demand).

    S4: the opportunistic job's target after production leaves is its solo throughput (it has
    the GPU alone); S3: its own steady state in the light phase, at least 5 % of solo."""
    prod, opp = sc.production, sc.opportunistic
    if sc.reaction is None or not prod:
        return None, None
    pj = rec.jobs[prod[0].name]
    if sc.reaction == "phases":
        rising, falling = _phase_changes(pj, sc.phase_s)
    else:
        cum = pj.cumulative()
        if not cum:
            return None, None
        rising = [(cum[0][0], cum[-1][0])]
        # the opportunistic job's scheduled end (a job held at ~0 may print nothing at all)
        opp_end = rec.t0 + opp[0].start_s + opp[0].seconds if opp else cum[-1][0]
        falling = [(cum[-1][0], opp_end)]
    p = _reaction_summary(_react(pj, rising))
    o = None
    if opp and opp[0].name in rec.jobs:
        target = opp_solo if sc.reaction == "arrival" and opp_solo > 0 else None
        o = _reaction_summary(_react(rec.jobs[opp[0].name], falling, target, 0.05 * opp_solo))
    return p, o


def run_metrics(res: ScenarioResult, policy: str) -> dict[str, Any]:
    sc, rec = res.scenarios[policy], res.runs[policy]
    prod = [j.name for j in sc.production]
    opp = [j.name for j in sc.opportunistic]
    errors = {n: j.error for n, j in rec.jobs.items() if j.error}
    w0, w1 = _window(rec, prod)
    span = w1 - w0
    base = _baseline(res, prod)
    b0, b1 = _window(base, prod)
    base_util = M.delta(base.device_busy, b0, b1) / (b1 - b0) if b1 > b0 else math.nan
    out: dict[str, Any] = {"policy": policy, "ran_s": round(sc.length_s, 1),
                           "window_s": round(span, 3) if span == span else None,
                           "wall_s": round(rec.wall_s, 2)}
    if errors:
        out["errors"] = errors
    prod_ratio = {n: M.ratio(rec.jobs[n].it_per_s, base.jobs[n].it_per_s) for n in prod}
    p99_ratio = {n: M.ratio(rec.jobs[n].p99_ms, base.jobs[n].p99_ms) for n in prod}
    out["prod_it_per_s"] = {n: rec.jobs[n].it_per_s for n in prod}
    out["prod_vs_solo"] = _min(prod_ratio.values())
    out["prod_vs_solo_each"] = prod_ratio
    out["p99_vs_solo"] = _max(p99_ratio.values())
    out["prod_lat_ms"] = {n: _lat(rec.jobs[n]) for n in prod}
    for q in ("p50", "p999"):
        out[f"{q}_vs_solo"] = _max(M.ratio(_lat(rec.jobs[n]).get(q, math.nan),
                                           _lat(base.jobs[n]).get(q, math.nan)) for n in prod)
    if span == span and span > 0:
        opp_busy = {n: M.delta(rec.busy_of(n), w0, w1) for n in opp}
        out["gpu_util"] = M.delta(rec.device_busy, w0, w1) / span
        out["prod_busy_frac"] = sum(M.delta(rec.busy_of(n), w0, w1) for n in prod) / span
        out["opp_busy_frac"] = sum(opp_busy.values()) / span
        out["harvest"] = M.harvest(sum(opp_busy.values()), span, base_util) if opp else None
        opp_rate = {n: M.delta(rec.jobs[n].cumulative(), w0, w1) / span for n in opp}
        out["opp_it_per_s"] = opp_rate
        out["opp_vs_solo"] = _mean([M.ratio(opp_rate[n], res.solo[n].jobs[n].it_per_s)
                                    for n in opp])
        if sc.fairness and len(opp) > 1 and sum(opp_busy.values()) > 0.01 * span:
            jain, dev = M.weighted_fairness([opp_busy[n] for n in opp],
                                            [j.weight for j in sc.opportunistic])
            out["fairness_jain"] = jain
            out["fairness_max_dev"] = dev
    out["baseline_util"] = base_util
    out["host_steal"] = rec.host_steal
    steps = (rec.jobs[prod[0]].summary or {}).get("steps") if prod else None
    if steps and opp and span == span and span > 0:        # T7-T11: one run, both halves
        out["paired"] = paired.paired(steps, paired.pauses_of(rec.jobs[opp[0]].events),
                                      (w0, w1), server=sc.latency)
    opp_solo = res.solo[opp[0]].jobs[opp[0]].it_per_s if opp else 0.0
    if policy == "tgs" and span == span and span > 0:
        out["tgs"] = tgs_convergence(res, rec, prod, opp, (w0, w1), base_util)
    p, o = reactions(sc, rec, opp_solo)
    out["reaction"] = p
    out["opp_reaction"] = o
    return json_safe(out)


def _lat(job: JobRun) -> dict[str, float]:
    lat = (job.summary or {}).get("lat_ms", {})
    return {q: float(lat[q]) for q in ("p50", "p99", "p999") if q in lat}


def tgs_convergence(res: ScenarioResult, rec: RunRecord, prod: list[str], opp: list[str],
                    window: tuple[float, float], base_util: float) -> dict[str, Any]:
    """The TGS law's profiling and convergence times (from its notes: seconds after production
    and opportunistic work met) and the metrics over the steady part of the window after it
    converged (None when it never did)."""
    note = (rec.policy_state or {}).get("0") or {}
    started = float(note.get("started", math.nan))
    prof, conv = float(note.get("profiled_s", -1)), float(note.get("converged_s", -1))
    out: dict[str, Any] = {"profiled_s": prof if prof >= 0 else None,
                           "converged_s": conv if conv >= 0 else None}
    w0, w1 = window
    if conv < 0 or started != started or started + conv >= w1 - 0.5:
        return out
    s0 = max(w0, started + conv)
    span = w1 - s0
    base = _baseline(res, prod)
    out["steady_s"] = span
    out["prod_vs_solo"] = _min([M.ratio(M.delta(rec.jobs[n].cumulative(), s0, w1) / span,
                                        base.jobs[n].it_per_s) for n in prod])
    busy = sum(M.delta(rec.busy_of(n), s0, w1) for n in opp)
    out["harvest"] = M.harvest(busy, span, base_util)
    out["opp_vs_solo"] = _mean([M.ratio(M.delta(rec.jobs[n].cumulative(), s0, w1) / span,
                                        res.solo[n].jobs[n].it_per_s) for n in opp])
    return out


def baseline_metrics(res: ScenarioResult) -> dict[str, Any]:
    sc = next(iter(res.scenarios.values()))
    prod = [j.name for j in sc.production]
    base = _baseline(res, prod)
    b0, b1 = _window(base, prod)
    alone = [*((f"solo:{k}", v) for k, v in res.solo.items()),
             *((("prod-only", res.prod_only),) if res.prod_only else ())]
    out: dict[str, Any] = {
        "prod_it_per_s": {n: base.jobs[n].it_per_s for n in prod},
        "prod_p99_ms": {n: base.jobs[n].p99_ms for n in prod},
        "prod_lat_ms": {n: _lat(base.jobs[n]) for n in prod},
        "gpu_util": M.delta(base.device_busy, b0, b1) / (b1 - b0) if b1 > b0 else None,
        "opp_solo_it_per_s": {j.name: res.solo[j.name].jobs[j.name].it_per_s
                              for j in sc.opportunistic if j.name in res.solo},
        "ran_s": {label: round(r.wall_s, 1) for label, r in alone},
        "host_steal": {label: r.host_steal for label, r in alone},
    }
    if sc.reaction == "phases":
        out["reaction"], _ = reactions(sc, base)
    return json_safe(out)


def summarise(results: list[ScenarioResult]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in results:
        sc = next(iter(r.scenarios.values()))
        out[r.key] = {"title": r.title, "baseline": baseline_metrics(r),
                      "latency": sc.latency,
                      "policies": {p: run_metrics(r, p) for p in r.runs}}
        if r.failed:
            out[r.key]["failed"] = r.failed
    return out


def _min(vals: Any) -> float:
    v = [x for x in vals if x == x]
    return min(v) if v else math.nan


def _max(vals: Any) -> float:
    v = [x for x in vals if x == x]
    return max(v) if v else math.nan


def _mean(vals: list[float]) -> float:
    v = [x for x in vals if x == x]
    return sum(v) / len(v) if v else math.nan


def json_safe(obj: Any) -> Any:
    """Rounds floats to 4 digits and turns NaN into None (JSON has no NaN)."""
    if isinstance(obj, float):
        return None if obj != obj or math.isinf(obj) else round(obj, 4)
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [json_safe(v) for v in obj]
    return obj


# ---------------------------------------------------------------- Markdown

COLUMNS = ("scenario", "policy", "ran (s)", "prod/solo", "p99/solo", "harvest", "GPU util",
           "opp/solo", "reaction (s)", "opp reaction (s)", "fairness")


def _f(v: Any, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def _r(v: dict[str, Any] | None) -> str:
    if not v:
        return "-"
    return f"{v['seconds']:.2f}" if v["settled"] else f">={v['seconds']:.1f}"


def markdown(summary: dict[str, Any]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for key, s in summary.items():
        b = s["baseline"]
        lines.append(f"| {key} | solo | - | 1.00 | 1.00 | - | {_f(b['gpu_util'])} | 1.00 | "
                     f"{_r(b.get('reaction'))} | - | - |")
        for pol, m in s["policies"].items():
            fair = "-"
            if m.get("fairness_jain") is not None:
                fair = f"{m['fairness_jain']:.3f} (dev {m['fairness_max_dev']:.2f})"
            err = " (errors)" if m.get("errors") else ""
            lines.append(
                f"| {key} | {pol}{err} | {_f(m['ran_s'], '{:.0f}')} | {_f(m['prod_vs_solo'])} | "
                f"{_f(m['p99_vs_solo'])} | {_f(m.get('harvest'))} | {_f(m.get('gpu_util'))} | "
                f"{_f(m.get('opp_vs_solo'))} | {_r(m['reaction'])} | {_r(m['opp_reaction'])} | "
                f"{fair} |")
        for pol in s.get("failed", {}):
            lines.append(f"| {key} | {pol} (failed) |" + " - |" * (len(COLUMNS) - 2))
    return "\n".join(lines) + "\n"


def latency_markdown(summary: dict[str, Any]) -> str:
    """Request latency of the inference scenarios: ms, and x solo in parentheses."""
    cols = ("scenario", "policy", "p50 ms", "p99 ms", "p99.9 ms", "served/offered", "harvest",
            "opp/solo")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for key, s in summary.items():
        if not s.get("latency"):
            continue
        base = next(iter(s["baseline"]["prod_lat_ms"].values()), {})
        cells = " | ".join(_f(base.get(q)) for q in ("p50", "p99", "p999"))
        lines.append(f"| {key} | solo | {cells} | 1.00 | - | - |")
        for pol, m in s["policies"].items():
            lat = next(iter(m.get("prod_lat_ms", {}).values()), {})
            cells = [f"{_f(lat.get(q))} (x{_f(m.get(q + '_vs_solo'))})"
                     for q in ("p50", "p99", "p999")]
            lines.append(f"| {key} | {pol} | " + " | ".join(cells) +
                         f" | {_f(m['prod_vs_solo'])} | {_f(m.get('harvest'))} | "
                         f"{_f(m.get('opp_vs_solo'))} |")
    return "\n".join(lines) + "\n" if len(lines) > 2 else ""


def tgs_markdown(summary: dict[str, Any]) -> str:
    """The TGS law's convergence and its steady state after it, per scenario."""
    cols = ("scenario", "ran (s)", "profiled (s)", "converged (s)", "steady (s)",
            "prod/solo", "harvest", "opp/solo")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for key, s in summary.items():
        m = s["policies"].get("tgs")
        if not m or "tgs" not in m:
            continue
        t = m["tgs"]
        one = "{:.1f}"
        lines.append(f"| {key} | {_f(m['ran_s'], '{:.0f}')} | {_f(t.get('profiled_s'), one)} | "
                     f"{_f(t.get('converged_s'), one)} | {_f(t.get('steady_s'), one)} | "
                     f"{_f(t.get('prod_vs_solo'))} | {_f(t.get('harvest'))} | "
                     f"{_f(t.get('opp_vs_solo'))} |")
    return "\n".join(lines) + "\n" if len(lines) > 2 else ""
