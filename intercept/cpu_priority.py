"""The host-CPU side of a job's role: an opportunistic job's processes run at a lower CPU
priority (a higher nice value) than production's, so that where they share CPUs it cannot slow
production through the host CPU either (a PyTorch job spends a core launching kernels).

A launcher sets it in the thread that spawns the job (on Linux the nice value is per thread and
a child inherits its parent thread's): tgs-run does, with --cpu-nice to change it.  It orders
the CPU only among processes of one CPU cgroup and one autogroup (one container, one batch job,
one shell session); between containers the CPU cgroup's weight does (tgs-inject run gives an
opportunistic container the lowest; a pod's comes from its CPU requests).
An unprivileged process cannot lower its nice value again: a job promoted to production while
it runs keeps its CPU priority until it is started again (docs/usage.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

OPPORTUNISTIC_NICE = 19    # the lowest CPU priority: the CPU that production leaves idle
NICE_MIN, NICE_MAX = 0, 19


def job_niceness(priority: str, requested: int | None = None) -> int:
    """The nice value a job of `priority` starts at: `requested` when given, else 19 for an
    opportunistic job and 0 (unchanged) for production."""
    if requested is not None:
        if not NICE_MIN <= requested <= NICE_MAX:
            raise ValueError(f"nice value {requested} is not within {NICE_MIN}..{NICE_MAX}")
        return requested
    return OPPORTUNISTIC_NICE if priority == "opportunistic" else 0


def lower_cpu_priority(niceness: int) -> int:
    """Raise the calling thread's nice value to `niceness` (never lower it: a launcher that
    already runs at nice 5 starts a production job at 5); what the thread spawns afterwards
    inherits it.  Returns the nice value now in effect."""
    current = os.getpriority(os.PRIO_PROCESS, 0)
    if niceness > current:
        os.setpriority(os.PRIO_PROCESS, 0, niceness)
    return os.getpriority(os.PRIO_PROCESS, 0)


def spawn_at(niceness: int, spawn: Callable[[], T]) -> T:
    """`spawn()` (which starts a process) from a short-lived thread at `niceness`: the child
    inherits the thread's nice value and the caller's threads keep theirs (a launcher that
    starts production jobs too)."""
    if niceness <= 0:
        return spawn()
    box: list[T] = []
    err: list[BaseException] = []

    def run() -> None:
        try:
            lower_cpu_priority(niceness)
            box.append(spawn())
        except BaseException as exc:      # re-raised in the caller
            err.append(exc)
    t = threading.Thread(target=run, name="spawn-at-nice")
    t.start()
    t.join()
    if err:
        raise err[0]
    return box[0]
