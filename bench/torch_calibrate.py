"""Measures PyTorch jobs alone, to size the T scenarios (tgs.bench.torch_scenarios).

    python -m tgs.bench.torch_calibrate [--seconds 4] [--gpu sim] [--job SPEC ...]

Each job runs alone (no shim, no controller, the harness's own run) and prints its it/s, the
GPU-busy milliseconds per iteration (the device's busy time over the job's run / its
iterations: on the simulator exact, kernels take threads x 1 ns) and the GPU utilisation.
SPEC is PROGRAM:NAME=VALUE,... (train or infer; options as the program's flags with
underscores: "train:optim=adam,hidden=1024,gap_ms=4", "train:graph=1,hidden=4096"); without
--job, the T scenarios' jobs, the server at a saturating arrival rate (its capacity: the
requests/s it then serves).
"""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

import click
from tgs.bench import metrics as M
from tgs.bench import torch_scenarios as T
from tgs.bench.harness import JobRun, RunRecord, run_jobs
from tgs.bench.scenarios import PRODUCTION, REPORT_MS, JobDef, TorchJob, TorchOpt, torch_job
from tgs.testbed.frameworks_venv import torch_available
from tgs.testbed.gpu import GPU_MODES, resolve_gpu
from tgs.testbed.workload import WorkloadSpec

SATURATING_RPS = 1e5    # arrivals far beyond any capacity: the server never idles


def default_jobs() -> dict[str, TorchJob]:
    server = dict(T.infer_job(1.0).options)
    server["rate"] = SATURATING_RPS
    return {"T1/T3 production": T.PROD_TRAIN, "T2 production": T.PROD_AHEAD,
            "T1/T2/T4-T6 opportunistic": T.OPP_TRAIN, "T3 opportunistic": T.OPP_GRAPH,
            "T4-T6 server, saturated": torch_job("infer", **server)}


def _value(text: str) -> TorchOpt:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_job(text: str) -> TorchJob:
    """PROGRAM:NAME=VALUE,...; a value 1 of graph is the bare flag."""
    program, _, rest = text.partition(":")
    opts: dict[str, TorchOpt] = {}
    for part in filter(None, rest.split(",")):
        name, eq, value = part.partition("=")
        if not eq:
            raise click.BadParameter(f"{part!r}: want NAME=VALUE")
        opts[name.strip()] = True if name.strip() == "graph" else _value(value.strip())
    try:
        return torch_job(program, **opts)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def measure(job: TorchJob, seconds: float, gpu: str, work: Path) -> dict[str, float]:
    """One run of `job` alone: it/s, GPU ms per iteration, GPU utilisation."""
    jd = JobDef("cal", PRODUCTION, WorkloadSpec(name="cal", report_ms=REPORT_MS), 0.0,
                seconds, torch=job)
    rec: RunRecord = run_jobs("cal", "solo:cal", None, [jd], gpu, work / "logs", work)
    run: JobRun = rec.jobs["cal"]
    if run.error:
        raise click.ClickException(f"{job.program} {' '.join(job.argv())}: {run.error}")
    cum = run.cumulative()
    if len(cum) < 2:
        return {"it_per_s": math.nan, "gpu_ms_per_it": math.nan, "util": math.nan}
    (w0, i0), (w1, i1) = cum[0], cum[-1]
    busy = M.delta(rec.device_busy, w0, w1)
    return {"it_per_s": (i1 - i0) / (w1 - w0), "gpu_ms_per_it": 1000 * busy / max(i1 - i0, 1),
            "util": busy / (w1 - w0)}


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--seconds", type=float, default=4.0, show_default=True)
@click.option("--gpu", type=click.Choice(GPU_MODES), default="sim", show_default=True)
@click.option("--job", "jobs", multiple=True, help="PROGRAM:NAME=VALUE,... (repeatable)")
def cli(seconds: float, gpu: str, jobs: tuple[str, ...]) -> None:
    """GPU time per iteration of PyTorch jobs, alone."""
    why = torch_available()
    if why is not None:
        raise click.ClickException(why)
    todo = {j: parse_job(j) for j in jobs} if jobs else default_jobs()
    mode = resolve_gpu(gpu)
    work = Path(tempfile.mkdtemp(prefix="tgs-torch-cal-"))
    try:
        click.echo("| job | options | it/s | GPU ms / it | GPU util |\n|---|---|---|---|---|")
        for label, job in todo.items():
            m = measure(job, seconds, mode, work)
            click.echo(f"| {label} | `{job.program} {' '.join(job.argv())}` | "
                       f"{m['it_per_s']:.1f} | {m['gpu_ms_per_it']:.3f} | {m['util']:.2f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    cli()
