"""A suite: scenarios x policies plus their solo baselines, written to a results folder.

Solo baselines are measured in the same invocation (a job alone, no shim, no controller);
identical jobs of different scenarios share one solo run.  The production-only baseline of a
scenario with several production jobs runs them together without the opportunistic jobs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tgs.bench import host_steal, oversub, paired, plots
from tgs.bench.harness import RunRecord, run_jobs, save_run
from tgs.bench.numba_job import available as numba_available
from tgs.bench.overhead import cpu_model
from tgs.bench.report import ScenarioResult, latency_markdown, markdown, summarise, tgs_markdown
from tgs.bench.scenarios import (
    FULL,
    OV_KEYS,
    POLICIES,
    Budget,
    JobDef,
    Scenario,
    build,
    needs_numba,
    needs_torch,
    use_torch,
)
from tgs.intercept.cpu_priority import OPPORTUNISTIC_NICE
from tgs.testbed.frameworks_venv import torch_available


@dataclass
class SuiteConfig:
    keys: list[str]
    policies: list[str] = field(default_factory=lambda: list(POLICIES))
    budget: Budget = FULL
    gpu: str = "sim"
    out: Path = Path("results")
    torch: bool = False
    static_share: float = 0.3
    opp_nice: int = OPPORTUNISTIC_NICE   # opportunistic jobs' CPU nice value, as tgs-run's
    plots: bool = True
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True)


def interrupt_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, through every cleanup handler (processes, temp dirs)."""
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)


def machine() -> dict[str, Any]:
    return {"nproc": os.cpu_count(), "cpu": cpu_model(), "python": platform.python_version(),
            "kernel": platform.release()}


def _solo_key(job: JobDef, seconds: float) -> str:
    spec = dataclasses.replace(job.spec, name="solo", seconds=seconds)
    torch = [job.torch.program, *job.torch.argv()] if job.torch else None
    return json.dumps([torch, job.numba, *spec.argv()[1:]])


def _renamed(rec: RunRecord, old: str, new: str) -> RunRecord:
    jobs = {new: dataclasses.replace(rec.jobs[old], name=new)}
    return dataclasses.replace(rec, jobs=jobs)


class Suite:
    def __init__(self, cfg: SuiteConfig) -> None:
        self.cfg = cfg
        self.solo_cache: dict[str, tuple[RunRecord, str]] = {}
        self.work = Path(tempfile.mkdtemp(prefix="tgs-bench-"))
        (cfg.out / "runs").mkdir(parents=True, exist_ok=True)
        (cfg.out / "logs").mkdir(parents=True, exist_ok=True)

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)

    def _scenario(self, key: str, policy: str | None) -> Scenario:
        sc = build(key, self.cfg.budget, policy)
        return use_torch(sc) if self.cfg.torch else sc

    def _run(self, key: str, label: str, policy: str | None, jobs: list[JobDef]) -> RunRecord:
        t = time.monotonic()
        logdir = self.cfg.out / "logs" / f"{key}-{label.replace(':', '-')}"
        rec = run_jobs(key, label, policy, jobs, self.cfg.gpu, logdir, self.work,
                       self.cfg.static_share, opp_nice=self.cfg.opp_nice)
        save_run(rec, self.cfg.out / "runs" / f"{key}-{label.replace(':', '-')}.json")
        bad = {n: j.error for n, j in rec.jobs.items() if j.error}
        self.cfg.log(f"  {key} {label:<14} {time.monotonic() - t:5.1f} s"
                     + (f"  errors: {bad}" if bad else ""))
        return rec

    def solo(self, key: str, job: JobDef) -> RunRecord:
        seconds = job.seconds if job.spec.phases else min(job.seconds, self.cfg.budget.solo_s)
        ck = _solo_key(job, seconds)
        if ck in self.solo_cache:
            rec, name = self.solo_cache[ck]
            return _renamed(rec, name, job.name)
        alone = dataclasses.replace(job, start_s=0.0, seconds=seconds)
        rec = self._run(key, f"solo:{job.name}", None, [alone])
        self.solo_cache[ck] = (rec, job.name)
        return rec

    def scenario(self, key: str) -> ScenarioResult | None:
        """One scenario's runs; None when it cannot run here (said in the log)."""
        base = self._scenario(key, None)
        if needs_numba(base) and not numba_available():
            self.cfg.log(f"{key}: skipped: numba-cuda is not installed "
                         "(pip install -e '.[test]' installs it)")
            return None
        no_torch = torch_available() if needs_torch(base) else None
        if no_torch is not None:
            self.cfg.log(f"{key}: skipped: its jobs are PyTorch programs and {no_torch}")
            return None
        self.cfg.log(f"{key}: {base.title}")
        solo = {j.name: self.solo(key, j) for j in base.jobs}
        prod_only = None
        if len(base.production) > 1:
            lead = min(j.start_s for j in base.production)
            prods = [dataclasses.replace(j, start_s=j.start_s - lead) for j in base.production]
            prod_only = self._run(key, "prod-only", None, prods)
        scs = {p: self._scenario(key, p) for p in self.cfg.policies}
        runs, failed = {}, {}
        for p in self.cfg.policies:
            try:
                runs[p] = self._run(key, p, p, scs[p].jobs)
            except Exception as exc:      # one broken run must not lose the whole suite
                failed[p] = f"{exc.__class__.__name__}: {exc}"
                self.cfg.log(f"  {key} {p:<14} FAILED: {failed[p]}")
        return ScenarioResult(key, base.title, scs, solo, prod_only, runs, failed)


def run_suite(cfg: SuiteConfig, micro: dict[str, str] | None = None) -> dict[str, Any]:
    """Runs everything, writes results.json, results.md and the plots; returns the JSON."""
    t0 = time.monotonic()
    suite = Suite(cfg)
    results: list[ScenarioResult] = []
    ov: list[oversub.OvResult] = []
    try:
        for key in cfg.keys:
            if key in OV_KEYS:      # its own memory policies (tgs-workload jobs, also --torch)
                ov.append(oversub.run(key, cfg.budget, cfg.gpu, cfg.out, suite.work, cfg.log))
                continue
            res = suite.scenario(key)
            if res is not None:
                results.append(res)
    finally:
        suite.close()
    summary = summarise(results)
    doc: dict[str, Any] = {
        "machine": machine(), "gpu": cfg.gpu, "torch": cfg.torch,
        "command": " ".join(sys.argv), "budget": dataclasses.asdict(cfg.budget),
        "policies": cfg.policies, "static_share": cfg.static_share, "opp_cpu_nice": cfg.opp_nice,
        "wall_s": round(time.monotonic() - t0, 1), "scenarios": summary,
    }
    if ov:
        doc["oversub"] = {r.key: oversub.summarise(r) for r in ov}
    if micro:
        doc["micro"] = micro
    pngs = []
    if cfg.plots:
        if results:
            pngs.append(plots.headline_bars(summary, cfg.out / "headline.png"))
        for r in results:
            runs = {"solo (prod)": _solo_view(r), **r.runs}
            pngs.append(plots.timeline(r.key, r.title, runs, cfg.out / f"{r.key}.png"))
        for o in ov:
            pngs.append(plots.oversub_timeline(o.key, oversub.TITLE, o.runs,
                                               cfg.out / f"{o.key}.png"))
    doc["plots"] = [str(p) for p in pngs]
    (cfg.out / "results.json").write_text(json.dumps(doc, indent=1))
    (cfg.out / "results.md").write_text(render_markdown(doc))
    return doc


def _solo_view(r: ScenarioResult) -> RunRecord:
    """The production baseline as a plot panel."""
    if r.prod_only is not None:
        return r.prod_only
    first = next(iter(r.scenarios.values())).production[0].name
    return r.solo[first]


def render_markdown(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    out = [f"Machine: nproc={m['nproc']}, CPU \"{m['cpu']}\", Python {m['python']}; "
           f"GPU: {doc['gpu']}{' (PyTorch jobs)' if doc['torch'] else ''}; "
           f"suite wall time {doc['wall_s']:.0f} s."]
    if doc["scenarios"]:
        out += ["", markdown(doc["scenarios"])]
    if doc.get("oversub"):
        out += ["", "### Memory oversubscription (tgs.bench.oversub)", "",
                oversub.markdown(doc["oversub"])]
    lat = latency_markdown(doc["scenarios"])
    if lat:
        out += ["", "Inference (production = a server): request latency, ms (x solo)", "", lat]
    pair = paired.markdown(doc["scenarios"])
    if pair:
        out += ["", "Paired (T7-T11): production's step times (a server's: request latencies) "
                "with the opportunistic job running and paused, in the same run", "", pair]
    tgs = tgs_markdown(doc["scenarios"])
    if tgs:
        out += ["", "`tgs`: profiling and convergence (s after production and opportunistic "
                "work met) and the steady state after convergence", "", tgs]
    for key, s in doc["scenarios"].items():
        ran = ", ".join(f"{p} {m_['ran_s']:.0f} s" for p, m_ in s["policies"].items())
        out.append(f"- {key} ({s['title']}): runs {ran}; baselines "
                   + ", ".join(f"{k} {v:.0f} s" for k, v in s["baseline"]["ran_s"].items()))
    steal = host_steal.markdown(doc["scenarios"])
    if steal:
        out += ["", steal]
    for name, text in (doc.get("micro") or {}).items():
        out += ["", f"### {name}", "", text.strip()]
    return "\n".join(out) + "\n"
