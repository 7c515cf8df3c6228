"""Opportunistic jobs among themselves: a stream of jobs of mixed lengths arriving over time,
under `las` (Tiresias's discretised 2D-LAS) and under the default policy with equal weights
(`adaptive`: the jobs share the GPU), compared on mean and p95 job completion time (JCT).

    python -m tgs.bench.las_compare [--quick] [--policy las --policy adaptive] [--out DIR]

Every job is tgs-workload with 10 x 0.5 ms kernels per iteration (5 ms of GPU, no host gap:
saturating) and a fixed number of iterations (its length in GPU-seconds / 5 ms).  The stream
(arrival s, GPU-s), documented and fixed so that runs compare: STREAM below; `--quick` scales
both by QUICK_SCALE.  No production job: the GPU is theirs (the default policy then splits it
by weight; LAS runs the job with the least attained service first, FIFO within a queue).
JCT = completion - arrival (the job's scheduled start); each job's length alone is the
lower bound (its "solo" JCT: GPU-seconds plus start-up).  Needs `make`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tgs.bench.harness import RunRecord, run_jobs
from tgs.bench.scenarios import OPP, OPPORTUNISTIC, REPORT_MS, JobDef

ITER_GPU_S = 10 * 500e-6
# (arrival s, GPU-seconds): a long job first, short ones arriving while it runs, two more
# long ones later: 13.5 GPU-s in all
STREAM = [(0.0, 4.0), (0.5, 0.5), (1.0, 0.5), (1.5, 2.0), (2.0, 0.5), (3.0, 1.0), (3.5, 0.5),
          (4.0, 3.0), (5.0, 0.5), (5.5, 1.0)]
QUICK_SCALE = 0.3
# LAS's queue thresholds: the policy's defaults (1 and 3 GPU-s), scaled with the stream
THRESHOLDS = (1.0, 3.0)
POLICIES = ("las", "adaptive")


def stream_jobs(scale: float = 1.0) -> list[JobDef]:
    total = sum(g for _, g in STREAM) * scale
    jobs = []
    for i, (arr, gpu_s) in enumerate(STREAM):
        name = f"j{i}"
        iters = max(1, round(gpu_s * scale / ITER_GPU_S))
        # the deadline: everything before it could run first, twice over
        spec = dataclasses.replace(OPP, name=name, report_ms=REPORT_MS)
        jobs.append(JobDef(name, OPPORTUNISTIC, spec, arr * scale,
                           2 * total + 10.0, iters=iters))
    return jobs


def completion(rec: RunRecord, job: JobDef) -> float | None:
    """Seconds from the job's scheduled arrival to its last iteration (None: unfinished)."""
    run = rec.jobs[job.name]
    cum = run.cumulative()
    if not run.summary or not cum or run.summary.get("interrupted"):
        return None
    end = cum[0][0] + float(run.summary["elapsed_s"])
    return end - (rec.t0 + job.start_s)


def quantile(values: list[float], q: float) -> float:
    """Nearest rank, as tgs-workload's percentiles."""
    v = sorted(values)
    if not v:
        return math.nan
    return v[max(1, math.ceil(q * len(v) - 1e-9)) - 1]


def summarise(rec: RunRecord, jobs: list[JobDef]) -> dict[str, Any]:
    jct = {j.name: completion(rec, j) for j in jobs}
    done = [v for v in jct.values() if v is not None]
    ideal = {j.name: (j.iters or 0) * ITER_GPU_S for j in jobs}
    slow = [jct[n] / ideal[n] for n in jct if jct[n] is not None and ideal[n] > 0]
    return {"jct_s": jct, "finished": len(done), "jobs": len(jobs),
            "mean_jct_s": sum(done) / len(done) if done else None,
            "p95_jct_s": quantile(done, 0.95) if done else None,
            "mean_slowdown": sum(slow) / len(slow) if slow else None,
            "makespan_s": max(done) if done else None, "wall_s": round(rec.wall_s, 1)}


def markdown(res: dict[str, dict[str, Any]], scale: float,
             thresholds: tuple[float, ...] = THRESHOLDS) -> str:
    lines = [f"Stream: {len(STREAM)} opportunistic jobs, "
             f"{sum(g for _, g in STREAM) * scale:.1f} GPU-s in all, arriving over "
             f"{STREAM[-1][0] * scale:.1f} s (lengths "
             + ", ".join(f"{g * scale:g}" for _, g in STREAM) + " GPU-s).", "",
             "LAS thresholds " + " and ".join(f"{t * scale:g}" for t in thresholds) + " GPU-s.",
             "",
             "| policy | finished | mean JCT (s) | p95 JCT (s) | mean slowdown | makespan (s) |",
             "|---|---|---|---|---|---|"]

    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.2f}"
    for pol, s in res.items():
        lines.append(f"| {pol} | {s['finished']}/{s['jobs']} | {f(s['mean_jct_s'])} | "
                     f"{f(s['p95_jct_s'])} | {f(s['mean_slowdown'])} | {f(s['makespan_s'])} |")
    return "\n".join(lines) + "\n"


def run(policies: list[str], quick: bool, out: Path, gpu: str = "sim",
        thresholds: tuple[float, ...] = THRESHOLDS) -> dict[str, Any]:
    """Both policies on the stream; `thresholds` (GPU-s, before --quick's scaling) for LAS."""
    scale = QUICK_SCALE if quick else 1.0
    jobs = stream_jobs(scale)
    work = Path(tempfile.mkdtemp(prefix="tgs-las-"))
    res: dict[str, dict[str, Any]] = {}
    try:
        for pol in policies:
            env = {"TGS_LAS_THRESHOLDS": ",".join(f"{t * scale:g}" for t in thresholds)}
            rec = run_jobs("LAS", pol, pol, jobs, gpu, out / "logs" / f"LAS-{pol}", work,
                           controller_env=env)
            res[pol] = summarise(rec, jobs)
            print(f"  LAS {pol:<10} {rec.wall_s:5.1f} s", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc = {"scale": scale, "stream": STREAM, "thresholds": [t * scale for t in thresholds],
           "results": res, "markdown": markdown(res, scale, thresholds)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "las.json").write_text(json.dumps(doc, indent=1))
    return doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", action="append", choices=list(POLICIES))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("results") / "las")
    ap.add_argument("--thresholds", default=",".join(f"{t:g}" for t in THRESHOLDS),
                    help="LAS queue thresholds in GPU-s (before --quick's scaling)")
    a = ap.parse_args()
    thresholds = tuple(float(x) for x in a.thresholds.split(","))
    doc = run(a.policy or list(POLICIES), a.quick, a.out, thresholds=thresholds)
    print(doc["markdown"])


if __name__ == "__main__":
    main()
