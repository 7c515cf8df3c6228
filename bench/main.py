"""`tgs-bench` (and `make bench`): the evaluation suite.

Scenarios S1-S15 under the policies none, static (30 % share), tgs and adaptive (the default),
each job also alone as the baseline, and OV1 (memory oversubscription: tgs.bench.oversub), on
the simulated GPU or a real one; a Markdown table, JSON, PNG plots in a results folder.  The
PyTorch scenarios T1-T11 (tgs.bench.torch_scenarios) are part of the full run (no --quick, no
filter) where the frameworks venv has PyTorch, and run when named otherwise; S16 only when
named.  The full run also runs the shim-overhead, controller-cost and gate-reaction
micro-benchmarks.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import click
from tgs.bench import host_steal, las_compare, repeat
from tgs.bench.scenarios import (
    ALL_KEYS,
    EXTRA_KEYS,
    FULL,
    OV_KEYS,
    POLICIES,
    QUICK,
    QUICK_KEYS,
    TORCH_KEYS,
)
from tgs.bench.suite import SuiteConfig, interrupt_on_sigterm, run_suite
from tgs.intercept.cpu_priority import NICE_MAX, NICE_MIN, OPPORTUNISTIC_NICE
from tgs.intercept.locate import build_path
from tgs.testbed.frameworks_venv import torch_available
from tgs.testbed.gpu import GPU_MODES, GpuUnavailable, resolve_gpu

from tgs.version import version_option

ROOT = Path(__file__).resolve().parents[1]
MICRO = {
    "Shim overhead": [sys.executable, "-m", "tgs.bench.overhead", "--rounds", "5"],
    "Controller cost": [sys.executable, "-m", "tgs.bench.controller_cost"],
    "Gate reaction": [sys.executable, "-m", "tgs.bench.gate_reaction"],
}


def run_micro() -> dict[str, str]:
    """The micro-benchmarks' own tables (their stdout), or their error."""
    out = {}
    for name, argv in MICRO.items():
        click.echo(f"{name}: {' '.join(argv[1:])}", err=True)
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=240,
                                 stdin=subprocess.DEVNULL)
            out[name] = res.stdout if res.returncode == 0 else \
                f"failed (exit {res.returncode}): {res.stderr.strip()[-500:]}"
        except subprocess.TimeoutExpired:
            out[name] = "failed: timed out after 240 s"
    return out


def suite_keys(named: tuple[str, ...], quick: bool, full: bool, no_torch: str | None
               ) -> list[str]:
    """What a run measures: the named scenarios, else the quick or the full suite; the full
    suite with the PyTorch scenarios where PyTorch is installed (no_torch: why it is not)."""
    keys = [k.upper() for k in named] or list(QUICK_KEYS if quick else ALL_KEYS)
    if full and no_torch is None:
        keys += [k for k in TORCH_KEYS if k not in keys]
    return keys


def _check_built(gpu: str) -> None:
    need = [build_path("libtgs.so"), build_path("bin", "tgs-workload")]
    if gpu == "sim":
        need.append(build_path("sim", "libcuda.so.1"))
    missing = [str(p) for p in need if not p.exists()]
    if missing:
        raise click.ClickException(f"missing {', '.join(missing)}: run `make` first")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@version_option("tgs-bench")
@click.option("--scenario", "scenarios", multiple=True,
              type=click.Choice(ALL_KEYS + EXTRA_KEYS, case_sensitive=False),
              help="Only these (repeatable; OV1: memory oversubscription; S16 runs only "
                   "when named, the PyTorch scenarios T1-T11 also in the full run where "
                   "PyTorch is installed: make frameworks).")
@click.option("--policy", "policies", multiple=True, type=click.Choice(POLICIES),
              help="Only these policies (repeatable; solo baselines always run; OV1 always "
                   "runs its memory policies none, tgs, ours).")
@click.option("--quick", is_flag=True, help="Much shorter runs (a smoke run: noisier figures).")
@click.option("--gpu", type=click.Choice(GPU_MODES), default="auto", show_default=True,
              help="Simulated GPU, a real one (through NVML and the driver), or real if present.")
@click.option("--torch", "use_torch", is_flag=True,
              help="Run the PyTorch training loop (bench/torch_train.py) as every job, on a "
                   "real GPU or the simulator (the frameworks venv: make frameworks).")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Results folder (default results/<timestamp>).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON summary, not Markdown.")
@click.option("--micro/--no-micro", default=None,
              help="Also run the overhead and controller-cost benchmarks (default: on for the "
                   "full suite, off with --quick or filters).")
@click.option("--no-plots", is_flag=True, help="Skip the PNG plots.")
@click.option("--las/--no-las", "las", default=None,
              help="Also run the LAS comparison (a stream of opportunistic jobs: las vs "
                   "adaptive, mean/p95 JCT; default: on without filters).")
@click.option("--repeat", "repeats", type=click.IntRange(1, 20), default=1, show_default=True,
              help="Run the scenarios this many times (each with its own solo baselines, in "
                   "run-<i>/) and report each figure's median and spread, and the paired "
                   "scenarios' halves pooled over the runs (repeat.md).")
@click.option("--opp-cpu-nice", "opp_nice", type=click.IntRange(NICE_MIN, NICE_MAX),
              default=OPPORTUNISTIC_NICE, show_default=True, metavar="N",
              help="Opportunistic jobs' CPU nice value under a controller, as tgs-run's "
                   "default (0: the bench's own; `none` runs never change it).")
def cli(scenarios: tuple[str, ...], policies: tuple[str, ...], quick: bool, gpu: str,
        use_torch: bool, out: Path | None, as_json: bool, micro: bool | None,
        no_plots: bool, las: bool | None, repeats: int, opp_nice: int) -> None:
    """Evaluate TGS policies on a (simulated) GPU: production vs solo, harvest, utilisation,
    reaction time, tail latency, weighted fairness."""
    try:
        mode = resolve_gpu(gpu)
    except GpuUnavailable as exc:
        raise click.ClickException(str(exc)) from None
    if use_torch and torch_available() is not None:
        raise click.ClickException(f"--torch: {torch_available()}")
    _check_built(mode)
    full = not quick and not scenarios and not policies
    no_torch = torch_available() if full else None
    if full and no_torch is not None:
        click.echo(f"tgs-bench: the PyTorch scenarios T1-T11 are left out: {no_torch}", err=True)
    keys = suite_keys(scenarios, quick, full, no_torch)
    out = out or ROOT / "results" / time.strftime("%Y%m%d-%H%M%S")
    cfg = SuiteConfig(keys=keys, policies=list(policies) or list(POLICIES),
                      budget=QUICK if quick else FULL, gpu=mode, out=out, torch=use_torch,
                      plots=not no_plots, opp_nice=opp_nice)
    interrupt_on_sigterm()
    ov = [k for k in keys if k in OV_KEYS]
    plan = ", ".join(p for p in (
        f"{', '.join(k for k in keys if k not in ov)} x {', '.join(cfg.policies)}"
        if len(ov) < len(keys) else "", f"{', '.join(ov)} x none, tgs, ours" if ov else "") if p)
    click.echo(f"tgs-bench: {plan} on the {'simulated' if mode == 'sim' else 'real'} GPU "
               f"-> {out}", err=True)
    try:
        micro_out = run_micro() if (full if micro is None else micro) else None
        docs = []
        for i in range(1, repeats + 1):
            if repeats > 1:
                click.echo(f"tgs-bench: run {i} of {repeats}", err=True)
                cfg = dataclasses.replace(cfg, out=out / f"run-{i}")
            docs.append(run_suite(cfg, micro_out if i == 1 else None))
        if (not scenarios and not policies) if las is None else las:
            click.echo("LAS: a stream of opportunistic jobs, las vs adaptive", err=True)
            las_doc = las_compare.run(list(las_compare.POLICIES), quick, out, mode)
            with open(cfg.out / "results.md", "a") as f:
                f.write("\n### Opportunistic jobs among themselves: las vs adaptive "
                        "(tgs.bench.las_compare)\n\n" + las_doc["markdown"])
    except KeyboardInterrupt:
        click.echo("tgs-bench: interrupted; every process it started was stopped", err=True)
        sys.exit(130)
    if repeats > 1:
        summary = repeat.summarise(docs)
        pool = repeat.pooled(docs)
        quiet = repeat.pooled(docs, max_steal=host_steal.NOTABLE)
        stolen = repeat.stolen_runs(docs, host_steal.NOTABLE)
        doc = {"runs": [str(out / f"run-{i}") for i in range(1, repeats + 1)],
               "command": " ".join(sys.argv), "machine": docs[0].get("machine"),
               "repeat": repeat.as_json(summary), "pooled": pool,
               "pooled_quiet": {"max_steal": host_steal.NOTABLE, "left_out": stolen,
                                "pooled": quiet}}
        (out / "repeat.json").write_text(json.dumps(doc, indent=1) + "\n")
        (out / "repeat.md").write_text(repeat.markdown(summary, repeats) +
                                       repeat.pooled_markdown(pool, repeats) +
                                       repeat.quiet_markdown(quiet, stolen, host_steal.NOTABLE))
        text = (out / "repeat.md").read_text()
    else:
        doc, text = docs[0], (out / "results.md").read_text()
    click.echo(json.dumps(doc, indent=1) if as_json else text)
    click.echo(f"results: {out}", err=True)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
