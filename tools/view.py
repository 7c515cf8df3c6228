"""Text rendering for tgsctl: job tables, status, the `top` frame (plain ANSI, no curses)."""

from __future__ import annotations

from typing import Any

from .jobview import Measured, amount, job_table, job_warnings, legend
from .sizes import format_size

CLEAR = "\x1b[H\x1b[2J"
BOLD, DIM, RESET = "\x1b[1m", "\x1b[2m", "\x1b[0m"


def job_processes(segment: str | None) -> list[dict[str, Any]]:
    """Live processes of a job, read from its segment with pread (a tenant's file: never
    mapped; pid in its own namespace, comm, memory); [] when the segment is not readable here
    (another user, another node, damaged)."""
    if not segment:
        return []
    try:
        from tgs.intercept.control import ctl_path
        from tgs.intercept.tenant import live_processes
        return [{"slot": s.slot, "pid": s.pid, "comm": s.comm, "mem_used": s.mem_used,
                 "work": s.work, "oom_count": s.oom_count}
                for s in live_processes(segment, ctl_path(segment))]
    except Exception:
        return []


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    for r in rows:
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return out


def jobs_text(jobs: list[dict[str, Any]], procs: bool = True, notes: bool = True) -> str:
    """The job table; with notes, the warnings of damaged or tampered segments and the
    legend (units, CONTROL, RATE)."""
    if not jobs:
        return "no jobs"
    header, rows = job_table(jobs)
    lines = _table(rows, header)
    if procs:
        for j in jobs:
            for p in j.get("process_list", []):
                lines.append(f"  {j['name']}: pid {p['pid']} ({p['comm']}) "
                             f"{format_size(p['mem_used'])}")
    if notes:
        lines += [f"WARNING {w}" for w in job_warnings(jobs)] + ["", *legend()]
    return "\n".join(lines)


def devices_rows(status: dict[str, Any], jobs: list[dict[str, Any]],
                 measured: Measured | None = None) -> list[list[str]]:
    """One row per GPU; `measured` (top): work rates over the last frame, by job part."""
    measured = measured or {}
    rows = []
    gpus = {g.get("index"): g for g in status.get("gpus", [])}
    for d in status.get("devices", []):
        # a multi-device job counts on each GPU with that GPU's part
        mine = [u for j in jobs for u in (j.get("devices") or [j])
                if u.get("device") == d["index"]]
        used = sum(j.get("mem_used", 0) for j in mine)
        work = sum(measured.get(u.get("name", ""), (u.get("work_rate") or 0.0, 0))[0]
                   for u in mine)
        util = gpus.get(d["index"], {}).get("utilization")
        rows.append([str(d["index"]), d["name"], d["uuid"], d["kind"],
                     f"{format_size(used)}/{format_size(d['mem_total'])}",
                     "-" if util is None else f"{100 * util:.0f}%",
                     str(len(mine)), amount(work)])
    return rows


def unmanaged_lines(status: dict[str, Any]) -> list[str]:
    """One line per process that uses a GPU without the shim (status.gpus[].unmanaged)."""
    out = []
    for g in status.get("gpus") or []:
        for p in g.get("unmanaged") or []:
            share = p.get("gpu_share")
            mem = p.get("mem_used")
            out.append(f"GPU {g.get('index')}: pid {p.get('pid')} ({p.get('comm') or '?'}) uses "
                       f"the GPU without the TGS shim: mem "
                       f"{'?' if mem is None else format_size(mem)}, GPU time "
                       f"{'?' if share is None else f'{100 * share:.0f}%'} (not limited)"
                       + _action(p))
    return out


def _action(p: dict[str, Any]) -> str:
    """--on-bypass: what the controller did to it, and why (its job's container)."""
    done = {"stop": "stopped (SIGSTOP)", "kill": "killed (SIGKILL)",
            "failed": "signal failed"}.get(p.get("action") or "")
    return f"; {done} by TGS: in job {p.get('job')}'s container" if done else ""


DEV_HEADER = ["GPU", "NAME", "UUID", "KIND", "MEM (JOBS)/TOTAL", "UTIL", "JOBS", "WORK/S"]


def status_text(status: dict[str, Any], jobs: list[dict[str, Any]]) -> str:
    lines = [
        f"controller: up {status.get('uptime_s', 0):.0f} s, pid {status.get('pid')}, "
        f"protocol {status.get('protocol')}",
        f"policy: {status.get('policy')}, period {status.get('period_ms')} ms, "
        f"loop {status.get('loop_ms_avg', 0)} ms avg, {status.get('overruns', 0)} overrun(s)",
        f"jobs: {status.get('jobs', 0)}, requests {status.get('requests', 0)} "
        f"({status.get('request_errors', 0)} refused)",
        f"endpoints: {', '.join(status.get('endpoints', []))}",
        "",
        *_table(devices_rows(status, jobs), DEV_HEADER),
        *[f"WARNING {w}" for w in unmanaged_lines(status)],
    ]
    return "\n".join(lines)


def top_frame(status: dict[str, Any], jobs: list[dict[str, Any]], when: str,
              color: bool = True, measured: Measured | None = None) -> str:
    """One frame; `measured` (Meter): work rates over the last interval instead of the last
    period's."""
    b, d, r = (BOLD, DIM, RESET) if color else ("", "", "")
    head = (f"{b}tgsctl top{r}  {when}  policy {status.get('policy')}  "
            f"period {status.get('period_ms')} ms  jobs {len(jobs)}  {d}(Ctrl-C quits){r}")
    gpu = _table(devices_rows(status, jobs, measured), DEV_HEADER)
    header, rows = job_table(jobs, measured)
    job = _table(rows, header) if jobs else ["no jobs"]
    warn = [f"{b}WARNING{r} {w}" for w in unmanaged_lines(status)]
    jwarn = [f"{b}WARNING{r} {w}" for w in job_warnings(jobs)]
    over = " since the last frame" if measured else " last period"
    return "\n".join([head, "", f"{b}{gpu[0]}{r}", *gpu[1:], *warn, "", f"{b}{job[0]}{r}",
                      *job[1:], *jwarn, "", *(f"{d}{ln}{r}" for ln in legend(over))])
