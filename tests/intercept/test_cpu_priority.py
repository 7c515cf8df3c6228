"""The CPU side of a job's role (tgs.intercept.cpu_priority): the nice value a launcher gives
each role, and spawning a child at it without changing the caller's threads."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from tgs.intercept.cpu_priority import OPPORTUNISTIC_NICE, job_niceness, spawn_at


def test_each_role_has_its_nice_value_and_a_request_overrides_it() -> None:
    assert job_niceness("opportunistic") == OPPORTUNISTIC_NICE == 19
    assert job_niceness("production") == 0
    assert job_niceness("opportunistic", 0) == 0
    assert job_niceness("production", 10) == 10
    for bad in (-1, 20):
        with pytest.raises(ValueError, match="not within 0..19"):
            job_niceness("opportunistic", bad)


def _child_nice(nice: int) -> int:
    p = spawn_at(nice, lambda: subprocess.Popen(
        [sys.executable, "-c", "import os; print(os.nice(0))"], stdout=subprocess.PIPE,
        text=True))
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 0
    return int(out)


def test_the_child_runs_at_it_and_the_caller_keeps_its_own() -> None:
    own = os.getpriority(os.PRIO_PROCESS, 0)
    assert _child_nice(12) == max(12, own)
    assert _child_nice(0) == own
    assert os.getpriority(os.PRIO_PROCESS, 0) == own      # the spawning thread was another


def test_an_error_in_the_spawn_reaches_the_caller() -> None:
    def fails() -> None:
        raise FileNotFoundError("no such program")
    with pytest.raises(FileNotFoundError, match="no such program"):
        spawn_at(5, fails)
