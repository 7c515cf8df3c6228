"""The job table of `tgsctl ls`, `set` and `top`: what holds each job back (the rule that
decided, its gate, token rate and in-flight cap), its memory limits, and a mark on a job whose
segment is damaged or tampered.  Fields: the job object of docs/protocol.md."""

from __future__ import annotations

import textwrap
from typing import Any

from .sizes import format_size

GATE_PUBLISH, GATE_WAIT, GATE_FIT = 1, 2, 4          # TGS_GATE_* of segment.h
_GATES = ((GATE_PUBLISH, "publish"), (GATE_WAIT, "wait"), (GATE_FIT, "fit"))
NONE = "-"
LEGEND = (
    "RATE: token rate granted (gated: no token limit, the gate holds the job; paused: while "
    "production is measured alone); WORK/S: measured{over}; CAP: in flight per process. Unit: "
    "work units, 1 = one GPU thread launched (grid blocks x threads per block). CONTROL: the "
    "policy's rule (docs/policy.md) and the gate (wait: while production is busy; fit: only "
    "kernels that fit its idle gap). THROTTLED: time waiting for tokens."
)
SHORT = ("RATE granted, WORK/S measured last period, CAP in flight: work units (1 = one GPU "
         "thread launched); gated: the gate holds the job, no token limit (tgsctl ls --help)")
WIDTH = 100


def amount(value: float) -> str:
    """1234567 -> '1.2M' (work units)."""
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= div:
            return f"{value / div:.1f}{unit}"
    return f"{value:.0f}"


def gate_text(gate: int | None) -> str:
    return "+".join(n for bit, n in _GATES if (gate or 0) & bit) or NONE


def control_text(job: dict[str, Any]) -> str:
    """'guard (wait+fit)': the rule that decided and, for a job it holds back, the gate."""
    ctl = job.get("control")
    if ctl is None:
        return NONE                          # the loop has not seen the job yet
    gate = job.get("gate") or 0
    if job.get("priority") == "production" or not gate & (GATE_WAIT | GATE_FIT):
        return str(ctl)
    return f"{ctl} ({gate_text(gate)})"


def granted_text(job: dict[str, Any]) -> str:
    """The token rate granted, said as what it means when no number limits the job."""
    if job.get("control") is None and job.get("rate") is None:
        return NONE
    if job.get("control") == "probe":
        return "paused"
    rate = job.get("rate")
    if rate is None:
        return "gated" if (job.get("gate") or 0) & GATE_WAIT else "unlimited"
    return f"{amount(rate)}/s"


def throttled_text(job: dict[str, Any], frac: float | None) -> str:
    if job.get("rate") is None:              # no token limit: nothing to wait for
        return NONE
    return f"{100 * (frac or 0):.0f}%"


def state_text(job: dict[str, Any]) -> str:
    marks = [m for m in ("damaged", "tampered") if job.get(f"segment_{m}")]
    return " ".join([str(job.get("state", "?")), *(f"!{m.upper()}" for m in marks)])


def _devices(job: dict[str, Any]) -> str:
    """The job's GPU, or its GPUs in order ("0,1") for a multi-device job."""
    parts = job.get("devices") or []
    if len(parts) > 1:
        return ",".join(str(d.get("device", "?")) for d in parts)
    return str(job.get("device", "?"))


Measured = dict[str, tuple[float, float]]    # name -> (work units/s, throttled share)


def job_table(jobs: list[dict[str, Any]],
              measured: Measured | None = None) -> tuple[list[str], list[list[str]]]:
    """(header, rows); MEM TOTAL and PINNED only when a job sets them."""
    measured = measured or {}
    total = any(j.get("mem_total") for j in jobs)
    pinned = any(j.get("host_pinned_max") for j in jobs)
    header = ["NAME", "PRIORITY", "W", "DEV", "PROCS", "MEM USED/QUOTA",
              *(["MEM TOTAL"] if total else []), *(["PINNED"] if pinned else []),
              "CONTROL", "RATE", "CAP", "WORK/S", "THROTTLED", "STATE"]
    rows = []
    for j in sorted(jobs, key=lambda j: (j.get("device", 0), j["priority"], j["name"])):
        work, frac = measured.get(j["name"], (j.get("work_rate") or 0.0,
                                              j.get("throttled_frac")))
        cap = j.get("inflight_cap")
        rows.append([
            j["name"], j["priority"], str(j["weight"]), _devices(j),
            str(j.get("processes", 0)),
            f"{format_size(j.get('mem_used', 0))}/{format_size(j.get('mem_quota'))}",
            *([format_size(j["mem_total"]) if j.get("mem_total") else NONE] if total else []),
            *([format_size(j["host_pinned_max"]) if j.get("host_pinned_max") else NONE]
              if pinned else []),
            control_text(j), granted_text(j), amount(cap) if cap else NONE, amount(work),
            throttled_text(j, frac), state_text(j),
        ])
    return header, rows


def job_warnings(jobs: list[dict[str, Any]]) -> list[str]:
    """One line per damaged or tampered segment: what the mark in STATE means."""
    out = []
    for j in jobs:
        if j.get("segment_damaged"):
            out.append(f"job {j['name']}: segment damaged ({j['segment_damaged']}): its figures "
                       "are unknown this period (docs/security.md)")
        if j.get("segment_tampered"):
            out.append(f"job {j['name']}: segment tampered ({j['segment_tampered']}): its "
                       "processes are counted live all the same (docs/security.md)")
    return out


def legend(over: str | None = None) -> list[str]:
    """The full legend (`top`: WORK/S measured `over`), or without `over` the short one."""
    return textwrap.wrap(SHORT if over is None else LEGEND.format(over=over), WIDTH)


class Meter:
    """Measured rates between two frames of `top`, from the exact totals (work_total,
    throttled_s_total) of jobs and their parts: the average over the interval, steadier than
    one control period's figure."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, float, float]] = {}

    def update(self, jobs: list[dict[str, Any]], now: float) -> Measured:
        out: Measured = {}
        seen: dict[str, tuple[float, float, float]] = {}
        units = [u for j in jobs for u in [j, *(j.get("devices") or [])]]
        for u in units:
            work, thr = u.get("work_total"), u.get("throttled_s_total")
            name = u.get("name")
            if work is None or name is None:
                continue
            seen[name] = (now, float(work), float(thr or 0.0))
            prev = self._last.get(name)
            if prev is None or now <= prev[0] or work < prev[1]:
                continue                     # first frame, or a job registered again
            dt = now - prev[0]
            n = max(1, int(u.get("processes") or 0))
            out[name] = ((float(work) - prev[1]) / dt,
                         min(1.0, max(0.0, (float(thr or 0.0) - prev[2]) / (dt * n))))
        self._last = seen
        return out
