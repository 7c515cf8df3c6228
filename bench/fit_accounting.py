"""Where production's idle gaps go, from an opportunistic job's FIT trace (`TGS_FIT_TRACE`).

Run a scenario with the trace on, then read it:

    TGS_FIT_TRACE=/tmp/t.txt python -m tgs.bench.main --quick --gpu sim --scenario S1 \\
        --policy adaptive --no-plots --no-las --out /tmp/r
    python -m tgs.bench.fit_accounting /tmp/t.txt --prod-gpu-ms 4

Per gap of production (one gap sequence number): the gap as production's shim published it
(idle_since to its next launch), FIT's predicted gap, the reaction (first launch into the gap
after idle_since), the GPU time the launches into it queued, the unused tail (the gap less the
predicted end of that queue) and how many kernels went.  With --prod-gpu-ms (production's GPU
time per iteration) also the GPU-side idle per cycle, of which the published gap is a part: the
rest is production's synchronize returning and its next launch reaching the GPU.  Columns of
the trace: libshim/fit.c (trace_locked).
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import click

RUN_BREAK_NS = 1_000_000_000


@dataclass
class Launch:
    now: int
    reason: str
    seq: int
    busy: bool
    idle: int
    gap_end: int
    run_ns: float
    queue_end: int
    last_gap: int


def parse(path: Path) -> list[list[Launch]]:
    """The trace's launches, split into runs (a benchmark invocation appends one run per
    scenario to the same file): a new run starts where the gap sequence goes back or the
    clock jumps by more than a second."""
    runs: list[list[Launch]] = []
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) < 12:
            continue
        x = Launch(int(f[0]), f[2], int(f[3]), f[4] == "1", int(f[5]), int(f[6]),
                   float(f[7]) * int(f[8]), int(f[9]), int(f[11]))
        if not runs or x.seq < runs[-1][-1].seq or x.now - runs[-1][-1].now > RUN_BREAK_NS:
            runs.append([])
        runs[-1].append(x)
    return runs


@dataclass
class Gap:
    length: int        # published gap (ns)
    pred: int          # FIT's predicted gap at the first launch
    reaction: int      # first launch after idle_since
    work: float        # GPU time queued into it (ns)
    tail: int          # length less the predicted end of our queue
    kernels: int


def gaps(launches: list[Launch]) -> tuple[list[Gap], list[int]]:
    """Gaps with at least one launch that went while production was idle, and the published
    cycle lengths (idle_since to idle_since)."""
    by_seq: dict[int, list[Launch]] = defaultdict(list)
    last_gap: dict[int, int] = {}
    for x in launches:
        by_seq[x.seq].append(x)
        last_gap[x.seq] = x.last_gap
    out = []
    seqs = sorted(by_seq)
    for s in seqs:
        idle = [x for x in by_seq[s] if not x.busy and x.idle and x.gap_end]
        if not idle or s + 1 not in last_gap:       # the gap's length is known at seq + 1
            continue
        first = idle[0]
        length = last_gap[s + 1]
        end = max(x.queue_end for x in idle)
        out.append(Gap(length, first.gap_end - first.idle, first.now - first.idle,
                       sum(x.run_ns for x in idle), length - (end - first.idle), len(idle)))
    starts = sorted({x.idle for x in launches if x.idle})
    cycles = [b - a for a, b in zip(starts, starts[1:]) if b - a < 50_000_000]
    return out, cycles


def _row(name: str, vals: list[float]) -> str:
    v = sorted(vals)
    n = len(v)
    return (f"| {name} | {statistics.mean(v) / 1e3:.0f} | {v[n // 10] / 1e3:.0f} | "
            f"{v[n // 2] / 1e3:.0f} | {v[9 * n // 10] / 1e3:.0f} |")


@click.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--prod-gpu-ms", type=float, default=None,
              help="Production's GPU time per iteration (S1: 4), for the GPU-side idle.")
@click.option("--run", "only", type=int, default=None,
              help="Only this run of the trace (1 = the first scenario that traced).")
def cli(trace: Path, prod_gpu_ms: float | None, only: int | None) -> None:
    """Per-gap accounting of production's idle time from a FIT trace (Markdown)."""
    runs = parse(trace)
    for i, launches in enumerate(runs, 1):
        if only is None or only == i:
            click.echo(f"\n## run {i} of {len(runs)}")
            report(launches, prod_gpu_ms)


def report(launches: list[Launch], prod_gpu_ms: float | None) -> None:
    gs, cycles = gaps(launches)
    click.echo(f"launches {len(launches)}, by reason: "
               + ", ".join(f"{k} {n}" for k, n in sorted(Counter(x.reason for x in launches)
                                                         .items())))
    if not gs:
        click.echo("no gap with a FIT launch that went while production was idle")
        return
    kern = Counter(g.kernels for g in gs)
    click.echo(f"gaps with launches: {len(gs)}; launches per gap: "
               + ", ".join(f"{k}: {n}" for k, n in sorted(kern.items())))
    click.echo("\n| per gap (us) | mean | p10 | p50 | p90 |\n|---|---|---|---|---|")
    rows = [("published gap", [g.length for g in gs]), ("predicted gap", [g.pred for g in gs]),
            ("reaction", [g.reaction for g in gs]), ("queued GPU time", [g.work for g in gs]),
            ("unused tail (gap - queue end)", [g.tail for g in gs])]
    if cycles:
        rows.append(("cycle (idle_since to idle_since)", cycles))
    for name, vals in rows:
        click.echo(_row(name, [float(v) for v in vals]))
    if prod_gpu_ms is not None and cycles:
        cyc = statistics.median(cycles) / 1e6
        idle = cyc - prod_gpu_ms
        pub = statistics.median([g.length for g in gs]) / 1e6
        work = statistics.mean([g.work for g in gs]) / 1e6
        click.echo(f"\nGPU-side idle per cycle {idle:.3f} ms (cycle {cyc:.3f} - production "
                   f"{prod_gpu_ms:.3f}); published gap {pub:.3f} ms, so {idle - pub:.3f} ms "
                   f"before production's shim publishes idle and after its next launch; queued "
                   f"{work:.3f} ms per gap: steady-state harvest {work / idle:.3f}")


if __name__ == "__main__":
    cli()
