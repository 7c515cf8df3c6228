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
gate did not hold).  With --requests <runs/<run>.json> (a job that kept its requests' times:
the paired scenarios' server), its slowest requests, each request's span split into the
server's own GPU time, its wait behind others and the rest, host time (its Python, a late
wake-up, CPU the hypervisor took); a wait early in a busy period reaches the requests behind it
as the server's own GPU time.  Trace formats: sim/trace.c, libshim/fit.c (trace_locked).
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

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


def _own_turns(ks: list[Kernel]) -> list[tuple[Kernel, int, int]]:
    """(kernel, ready, wait) of one process's kernels in queueing order: ready when its own
    earlier kernels had ended, wait what it spent behind other contexts after that (before it
    started, and preempted): end - ready - device time, at least 0."""
    out, prev_end = [], 0
    for k in ks:
        ready = max(k.queued, prev_end)
        prev_end = max(prev_end, k.ended)
        out.append((k, ready, max(0, k.ended - ready - k.device_ns)))
    return out


def account(kernels: dict[int, list[Kernel]], fit: Verdicts | None = None) -> list[Waits]:
    """Each process's waits behind the others (and, with the FIT lines, by verdict)."""
    others = sorted((k.started, k.ended, k.pid, k.queued) for ks in kernels.values() for k in ks)
    starts = [o[0] for o in others]
    longest = max((o[1] - o[0] for o in others), default=0)
    result = []
    for pid, ks in kernels.items():
        w = Waits(pid)
        blame: dict[str, float] = defaultdict(float)
        for k, ready, wait in _own_turns(ks):
            w.kernels += 1
            w.device_ms += k.device_ns / 1e6
            ret = ready == k.queued               # its own queue was empty: a return
            w.returns += ret
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


@dataclass(frozen=True)
class Request:
    """One request of a server job, and where its time went on the GPU."""
    end_s: float          # its reply, CLOCK_MONOTONIC s (the job's `steps`)
    latency_ms: float
    device_ms: float      # the server's kernels ran this long within the request's span
    wait_ms: float        # ... and waited this long behind other contexts
    host_ms: float        # the rest: the server neither ran nor waited on the GPU (its host)


def requests_of(record: dict[str, Any]) -> dict[int, list[tuple[float, float]]]:
    """pid -> [(reply s, latency ms)] of each job in a run record (runs/<run>.json) that kept
    its requests' times (--step-times: the paired scenarios' production job)."""
    out = {}
    for job in record.get("jobs", {}).values():
        steps = (job.get("summary") or {}).get("steps")
        if steps and job.get("pid"):
            out[int(job["pid"])] = [(float(t), float(ms)) for t, ms in steps]
    return out


def explain(kernels: list[Kernel], steps: list[tuple[float, float]]) -> list[Request]:
    """Each request's span split into the server's device time, its wait behind others and the
    rest (host time: its Python, a late wake-up, CPU the hypervisor took); slowest first."""
    ks = sorted(kernels, key=lambda k: k.started)
    starts = [k.started for k in ks]
    longest = max((k.ended - k.started for k in ks), default=0)
    waits = sorted((ready, k.started, k.ended, wait)
                   for k, ready, wait in _own_turns(sorted(kernels, key=lambda k: k.queued)))
    readies = [w[0] for w in waits]
    out = []
    for end_s, lat_ms in steps:
        b = int(end_s * 1e9)
        a = b - int(lat_ms * 1e6)
        dev = 0
        for k in ks[bisect.bisect_left(starts, a - longest):bisect.bisect_left(starts, b)]:
            run = min(k.ended, b) - max(k.started, a)
            # device time inside the span: a preempted kernel's span holds others' time too
            dev += max(0, run) * k.device_ns // max(1, k.ended - k.started)
        wait = sum(min(w, max(0, min(e, b) - max(r, a)))
                   for r, _, e, w in waits[bisect.bisect_left(readies, a - longest):
                                            bisect.bisect_left(readies, b)])
        out.append(Request(end_s, lat_ms, dev / 1e6, wait / 1e6,
                           max(0.0, lat_ms - dev / 1e6 - wait / 1e6)))
    out.sort(key=lambda r: -r.latency_ms)
    return out


def requests_markdown(pid: int, reqs: list[Request], top: int) -> str:
    if not reqs:
        return ""
    lat = sorted(r.latency_ms for r in reqs)
    slow = [r for r in reqs if r.latency_ms >= 3 * lat[len(lat) // 2]]
    tot = sum(r.latency_ms for r in slow) or 1.0
    def share(ms: float) -> str:
        return f"{100 * ms / tot:.0f} %"

    rows = [f"\npid {pid}: {len(reqs)} requests, median {lat[len(lat) // 2]:.1f} ms; the "
            f"{len(slow)} at 3x the median or more spent "
            f"{share(sum(r.device_ms for r in slow))} of their time running on the GPU, "
            f"{share(sum(r.wait_ms for r in slow))} waiting behind others there, "
            f"{share(sum(r.host_ms for r in slow))} on the host", "",
            "| reply s | latency ms | on the GPU ms | waiting there ms | host ms |",
            "|---|---|---|---|---|"]
    rows += [f"| {r.end_s:.3f} | {r.latency_ms:.1f} | {r.device_ms:.1f} | {r.wait_ms:.2f} | "
             f"{r.host_ms:.1f} |" for r in reqs[:top]]
    return "\n".join(rows)


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
@click.option("--requests", "record_path",
              type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="a run's record (runs/<run>.json): its server's slowest requests, split into "
                   "GPU time, GPU wait and host time")
@click.option("--top", type=click.IntRange(1, 10_000), default=10,
              help="how many of the slowest requests to list")
@click.option("--json", "as_json", is_flag=True, help="one JSON document instead of a table")
def main(trace: Path, fit_path: Path | None, record_path: Path | None, top: int,
         as_json: bool) -> None:
    """Per process, how long its kernels waited behind other contexts' (TGS_SIM_TRACE)."""
    kernels = parse(trace.read_text().splitlines())
    if not kernels:
        raise click.UsageError(f"{trace}: no kernel lines (was TGS_SIM_TRACE set?)")
    fit = parse_fit(fit_path.read_text().splitlines()) if fit_path else None
    served: dict[int, list[Request]] = {}
    if record_path is not None:
        try:
            record = json.loads(record_path.read_text())
        except ValueError as e:
            raise click.UsageError(f"{record_path}: not a run record ({e})") from None
        served = {pid: explain(kernels[pid], steps)
                  for pid, steps in requests_of(record).items() if pid in kernels}
        if not served:
            raise click.UsageError(f"{record_path}: no job with request times whose pid is "
                                   "in the trace")
    waits = account(kernels, fit)
    if as_json:
        docs = []
        for w in waits:
            d = asdict(w)
            d.pop("wait_us")
            d.update(wait_us_p50=_q(w.wait_us, .5), wait_us_p99=_q(w.wait_us, .99),
                     wait_us_max=max(w.wait_us, default=0.0))
            docs.append(d)
        click.echo(json.dumps({"processes": docs,
                               "requests": {str(pid): [asdict(r) for r in reqs[:top]]
                                            for pid, reqs in served.items()}}))
    else:
        click.echo(markdown(waits) + "".join(requests_markdown(pid, reqs, top)
                                             for pid, reqs in served.items()))


if __name__ == "__main__":
    main()
