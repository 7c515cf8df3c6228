"""Who waited behind whom on the simulated GPU, from the simulator's kernel trace.

Run a scenario with the trace on (and, to see why the neighbour's kernels were there, the
opportunistic job's FIT trace), then read it:

    TGS_SIM_TRACE=/tmp/k.txt TGS_FIT_TRACE=/tmp/f.txt tgs-bench --gpu sim --scenario T10 \\
        --policy adaptive --no-plots --out /tmp/r
    python -m tgs.bench.wait_accounting /tmp/k.txt --fit /tmp/f.txt

Per process (one pid of the trace: a benchmark run appends the solo runs and the shared one to
the same file): its kernels, and the time each waited for the device while it was its
context's turn (its own earlier kernels done) and another context ran, before it started or
preempted at a time slice's end: `end - max(queued, own previous end) - device time`.
Kernels queued when the process's own queue was empty ("returns": a server's next request, a
training step after its host work) are counted apart, since that is where a neighbour's queue
meets production.  With --fit, each wait is split between the neighbours' kernels that ran
during it, by the FIT verdict each of those went with (the FIT line of its process just
before it was queued; "not gated" where there is none: a production job's, or a launch the
gate did not hold).  Trace formats: sim/trace.c, libshim/fit.c (trace_locked).
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click

MATCH_NS = 1_000_000        # a FIT line of its process this close before a kernel is its verdict
VERDICT_NAMES = {"F": "fits the gap", "N": "no gap history", "P": "first sample",
                 "O": "outlasted gap", "S": "start of a gap", "L": "late in a gap",
                 "B": "budget", "X": "starvation bound", "T": "trickle", "-": "not gated"}


@dataclass(frozen=True)
class Kernel:
    pid: int
    queued: int
    started: int
    ended: int
    device_ns: int


@dataclass
class Waits:
    """One process's kernels and what the device made them wait."""
    pid: int
    kernels: int = 0
    device_ms: float = 0.0
    returns: int = 0                  # kernels queued onto an empty own queue
    delayed: int = 0                  # kernels that waited behind another context
    delayed_returns: int = 0
    wait_ms: float = 0.0              # total wait behind other contexts (queued or preempted)
    wait_us: list[float] = field(default_factory=list)   # each delayed kernel's wait
    by_verdict_ms: dict[str, float] = field(default_factory=dict)


def parse(lines: list[str]) -> dict[int, list[Kernel]]:
    """The trace's kernels per pid, each pid's in queueing order; malformed lines skipped."""
    out: dict[int, list[Kernel]] = defaultdict(list)
    for line in lines:
        f = line.split()
        if len(f) != 5 or not all(x.isdigit() for x in f):
            continue
        k = Kernel(*(int(x) for x in f))
        out[k.pid].append(k)
    for ks in out.values():
        ks.sort(key=lambda k: k.queued)
    return dict(out)


Verdicts = dict[int, tuple[list[int], list[str]]]   # pid -> (times, verdicts), in time order


def parse_fit(lines: list[str]) -> Verdicts:
    """Each process's FIT lines: (times, verdicts) per pid (columns: libshim/fit.c)."""
    lines_of: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for line in lines:
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[12].isdigit():
            lines_of[int(f[12])].append((int(f[0]), f[2]))
    return {pid: ([t for t, _ in sorted(xs)], [v for _, v in sorted(xs)])
            for pid, xs in lines_of.items()}


def _verdict(fit: Verdicts, pid: int, queued: int) -> str:
    times, verdicts = fit.get(pid, ([], []))
    i = bisect.bisect_right(times, queued) - 1
    return verdicts[i] if i >= 0 and queued - times[i] <= MATCH_NS else "-"


def account(kernels: dict[int, list[Kernel]], fit: Verdicts | None = None) -> list[Waits]:
    """Each process's waits behind the others (and, with the FIT lines, by verdict)."""
    others = sorted((k.started, k.ended, k.pid, k.queued) for ks in kernels.values() for k in ks)
    starts = [o[0] for o in others]
    longest = max((o[1] - o[0] for o in others), default=0)
    result = []
    for pid, ks in kernels.items():
        w = Waits(pid)
        prev_end = 0
        blame: dict[str, float] = defaultdict(float)
        for k in ks:
            w.kernels += 1
            w.device_ms += k.device_ns / 1e6
            ret = k.queued >= prev_end
            w.returns += ret
            ready = max(k.queued, prev_end)
            prev_end = max(prev_end, k.ended)
            wait = k.ended - ready - k.device_ns      # before it started, and preempted
            if wait <= 0:
                continue
            w.delayed += 1
            w.delayed_returns += ret
            w.wait_ms += wait / 1e6
            w.wait_us.append(wait / 1e3)
            if fit is None:
                continue
            i = bisect.bisect_left(starts, ready - longest)
            while i < len(others) and others[i][0] < k.ended:
                s, e, opid, oq = others[i]
                overlap = min(e, k.ended) - max(s, ready)
                if opid != pid and overlap > 0:
                    blame[_verdict(fit, opid, oq)] += overlap / 1e6
                i += 1
        w.by_verdict_ms = dict(sorted(blame.items(), key=lambda kv: -kv[1]))
        result.append(w)
    result.sort(key=lambda w: min(k.queued for k in kernels[w.pid]))
    return result


def _q(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))] if s else 0.0


def markdown(waits: list[Waits]) -> str:
    rows = ["| pid | kernels | device ms | returns | delayed (of returns) | wait ms | "
            "wait us p50 / p99 / max |", "|---|---|---|---|---|---|---|"]
    for w in waits:
        rows.append(f"| {w.pid} | {w.kernels} | {w.device_ms:.1f} | {w.returns} | "
                    f"{w.delayed} ({w.delayed_returns}) | {w.wait_ms:.1f} | "
                    f"{_q(w.wait_us, .5):.0f} / {_q(w.wait_us, .99):.0f} / "
                    f"{max(w.wait_us, default=0):.0f} |")
    blamed = [w for w in waits if w.by_verdict_ms]
    for w in blamed:
        rows.append(f"\npid {w.pid} waited behind kernels that went with: " + ", ".join(
            f"{v} ({VERDICT_NAMES.get(v, '?')}) {ms:.1f} ms" for v, ms in w.by_verdict_ms.items()))
    return "\n".join(rows)


@click.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--fit", "fit_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="the opportunistic jobs' TGS_FIT_TRACE, to split waits by verdict")
@click.option("--json", "as_json", is_flag=True, help="one JSON document instead of a table")
def main(trace: Path, fit_path: Path | None, as_json: bool) -> None:
    """Per process, how long its kernels waited behind other contexts' (TGS_SIM_TRACE)."""
    kernels = parse(trace.read_text().splitlines())
    if not kernels:
        raise click.UsageError(f"{trace}: no kernel lines (was TGS_SIM_TRACE set?)")
    fit = parse_fit(fit_path.read_text().splitlines()) if fit_path else None
    waits = account(kernels, fit)
    if as_json:
        docs = []
        for w in waits:
            d = asdict(w)
            d.pop("wait_us")
            d.update(wait_us_p50=_q(w.wait_us, .5), wait_us_p99=_q(w.wait_us, .99),
                     wait_us_max=max(w.wait_us, default=0.0))
            docs.append(d)
        click.echo(json.dumps(docs))
    else:
        click.echo(markdown(waits))


if __name__ == "__main__":
    main()
