"""CPU time the hypervisor took from this machine during a run (/proc/stat's `steal`).

On a virtual machine the host may run other guests on our CPUs: a run during which it did reads
the host, not the policy (a server's p99 on a 2-core VM moved 2x in runs with 5-7 % steal).
Each benchmark run records the share of its CPU time stolen, so an outlier run can be told
from a regression.  None where the kernel does not say (not Linux, no steal column).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROC_STAT = Path("/proc/stat")
STEAL_COLUMN = 8          # cpu user nice system idle iowait irq softirq steal ...


@dataclass(frozen=True)
class Reading:
    t: float              # time.monotonic()
    steal_ticks: int      # all CPUs together, in clock ticks
    cpus: int


def parse(text: str) -> tuple[int, int] | None:
    """(steal ticks of all CPUs, number of CPUs) from /proc/stat's text."""
    steal, cpus = None, 0
    for line in text.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "cpu" and len(f) > STEAL_COLUMN and f[STEAL_COLUMN].isdigit():
            steal = int(f[STEAL_COLUMN])
        elif f[0].startswith("cpu") and f[0][3:].isdigit():
            cpus += 1
    return (steal, cpus) if steal is not None and cpus else None


def read(path: Path = PROC_STAT) -> Reading | None:
    try:
        got = parse(path.read_text())
    except OSError:
        return None
    return Reading(time.monotonic(), *got) if got else None


def share(before: Reading | None, after: Reading | None,
          ticks_per_s: float | None = None) -> float | None:
    """The share of the CPUs' time stolen between two readings (0-1)."""
    if before is None or after is None or after.t <= before.t:
        return None
    hz = ticks_per_s or float(os.sysconf("SC_CLK_TCK"))
    stolen_s = max(0, after.steal_ticks - before.steal_ticks) / hz
    return min(1.0, stolen_s / ((after.t - before.t) * after.cpus))


NOTABLE = 0.02            # a run with this share stolen or more is named in results.md


def markdown(scenarios: dict[str, Any]) -> str:
    """One line for results.md: the runs whose CPUs the hypervisor took NOTABLE or more of."""
    seen: list[tuple[str, float]] = []
    for key, s in scenarios.items():
        for label, v in (s.get("baseline", {}).get("host_steal") or {}).items():
            seen.append((f"{key} {label}", v))
        for pol, m in s.get("policies", {}).items():
            seen.append((f"{key} {pol}", m.get("host_steal")))
    known = [(name, v) for name, v in seen if isinstance(v, (int, float))]
    if not known:
        return ""
    high = [f"{name} {100 * v:.1f} %" for name, v in known if v >= NOTABLE]
    if not high:
        return (f"Host CPU steal (the hypervisor's share of the CPUs) under {100 * NOTABLE:.0f} % "
                f"in every run (at most {100 * max(v for _, v in known):.1f} %).")
    return (f"Host CPU steal (the hypervisor's share of the CPUs) of {100 * NOTABLE:.0f} % or "
            f"more in: {', '.join(high)}: those runs read the host as well as the policy.")
