"""Identical runs side by side (`tgs-bench --repeat N`): each figure's runs, median and spread.

A single run on a small, shared machine moves with the machine: the solo baseline's own p99
changes by several percent from one run to the next.  A target such as "harvest >= 0.6 with a
spread <= 0.1 over three identical runs" is checked on N whole runs (each with its own solo
baselines, as a user repeating the command would get), summarised here per scenario and policy.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from tgs.bench import paired, resample

# (key in a policy's results, column title): the figures the targets are stated in
METRICS = (
    ("prod_vs_solo", "prod/solo"),
    ("p99_vs_solo", "p99/solo"),
    ("p999_vs_solo", "p99.9/solo"),
    ("harvest", "harvest"),
    ("opp_vs_solo", "opp/solo"),
    ("paired.rate_on_vs_off", "prod rate on/off (T7, T8)"),  # bench/paired.py
    ("paired.mean_on_vs_off", "server mean latency on/off (T9-T11)"),
    ("paired.p99_on_vs_off", "p99 on/off (T7-T11)"),
    ("host_steal", "host CPU steal"),                        # bench/host_steal.py
)


def _figure(results: dict[str, Any], path: str) -> Any:
    """results["a"]["b"] for "a.b" (None where a step is missing)."""
    v: Any = results
    for part in path.split("."):
        v = v.get(part) if isinstance(v, dict) else None
    return v


@dataclass(frozen=True)
class Spread:
    """One figure over the runs that measured it."""
    runs: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def spread(self) -> float:
        return max(self.runs) - min(self.runs)

    def cell(self) -> str:
        each = " / ".join(f"{v:.2f}" for v in self.runs)
        return f"{self.median:.2f} ({each}; spread {self.spread:.2f})"


def summarise(docs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Spread]]]:
    """scenario -> policy -> metric -> Spread, over the runs' results.json documents.  A figure
    a run did not measure (no opportunistic job, a run that failed) is left out of that run's
    column; a figure no run measured is left out."""
    out: dict[str, dict[str, dict[str, Spread]]] = {}
    for key in dict.fromkeys(k for d in docs for k in d.get("scenarios", {})):
        policies = dict.fromkeys(p for d in docs
                                 for p in d.get("scenarios", {}).get(key, {}).get("policies", {}))
        for pol in policies:
            figures: dict[str, Spread] = {}
            for metric, _ in METRICS:
                vals = tuple(float(v) for d in docs
                             if isinstance(v := _figure(d.get("scenarios", {}).get(key, {})
                                                        .get("policies", {}).get(pol, {}),
                                                        metric),
                                           (int, float)) and not isinstance(v, bool))
                if vals:
                    figures[metric] = Spread(vals)
            if figures:
                out.setdefault(key, {})[pol] = figures
    return out


def _stolen(res: dict[str, Any], max_steal: float | None) -> bool:
    """Did the hypervisor take max_steal of the CPUs or more during this run?"""
    v = res.get("host_steal")
    return max_steal is not None and isinstance(v, (int, float)) and v >= max_steal


def pooled(docs: list[dict[str, Any]], max_steal: float | None = None
           ) -> dict[str, dict[str, dict[str, Any]]]:
    """scenario -> policy -> paired.pool() of the paired halves of every run that has them
    (T7-T11): the runs as one run N times as long, with its figures' intervals over resampled
    runs (bench/resample.py); with max_steal, only the runs during which the hypervisor took
    less than that share of the CPUs (bench/host_steal.py)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for key in dict.fromkeys(k for d in docs for k in d.get("scenarios", {})):
        runs: dict[str, list[dict[str, Any]]] = {}
        for d in docs:
            for pol, res in d.get("scenarios", {}).get(key, {}).get("policies", {}).items():
                if isinstance(res, dict) and isinstance(res.get("paired"), dict) and \
                        not _stolen(res, max_steal):
                    runs.setdefault(pol, []).append(res["paired"])
        for pol, each in runs.items():
            if (p := paired.pool(each)) is not None:
                out.setdefault(key, {})[pol] = {**p, "intervals": resample.intervals(each)}
    return out


def _pool_table(pool: dict[str, dict[str, dict[str, Any]]]) -> str:
    """The paired table (bench/paired.py) of pooled halves; empty without paired runs."""
    return paired.markdown({k: {"policies": {pol: {"paired": p} for pol, p in pols.items()}}
                            for k, pols in pool.items()})


def pooled_markdown(pool: dict[str, dict[str, dict[str, Any]]], runs: int) -> str:
    """The pooled halves' table; empty without paired runs."""
    table = _pool_table(pool)
    return (f"\n### The paired halves of the {runs} runs pooled (one run {runs} times as "
            "long)\n\n" + table + resample.markdown(pool)) if table else ""


def stolen_runs(docs: list[dict[str, Any]], max_steal: float) -> list[str]:
    """The paired runs pooled(docs, max_steal) leaves out: "T10 adaptive, run 2 (12.6 %)"."""
    out = []
    for i, d in enumerate(docs, 1):
        for key, sc in d.get("scenarios", {}).items():
            for pol, res in sc.get("policies", {}).items():
                if isinstance(res, dict) and isinstance(res.get("paired"), dict) and \
                        _stolen(res, max_steal):
                    out.append(f"{key} {pol}, run {i} ({100 * res['host_steal']:.1f} %)")
    return out


def quiet_markdown(pool: dict[str, dict[str, dict[str, Any]]], left_out: list[str],
                   max_steal: float) -> str:
    """The pooled table of the runs the hypervisor left alone; empty when none was left out."""
    if not left_out:
        return ""
    table = _pool_table(pool)
    return (f"\n### Pooled again without the runs with host CPU steal of {100 * max_steal:.0f} "
            f"% or more\n\nLeft out: {'; '.join(left_out)}.\n\n" +
            (table + resample.markdown(pool) if table else "(none left)\n"))


def markdown(summary: dict[str, dict[str, dict[str, Spread]]], runs: int) -> str:
    """The table: median (each run; spread) per figure."""
    cols = [title for _, title in METRICS]
    lines = [f"### {runs} identical runs: median (each run; spread)", "",
             "| scenario | policy | " + " | ".join(cols) + " |",
             "|---|---|" + "---|" * len(cols)]
    for key, policies in summary.items():
        for pol, figures in policies.items():
            cells = [figures[m].cell() if m in figures else "-" for m, _ in METRICS]
            lines.append(f"| {key} | {pol} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def as_json(summary: dict[str, dict[str, dict[str, Spread]]]) -> dict[str, Any]:
    return {key: {pol: {m: {"runs": list(s.runs), "median": s.median, "spread": s.spread}
                        for m, s in figures.items()}
                  for pol, figures in policies.items()}
            for key, policies in summary.items()}
