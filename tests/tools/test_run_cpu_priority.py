"""tgs-run starts an opportunistic job at the lowest CPU priority (nice 19) and production at
its own: where they share CPUs, the opportunistic job uses the CPU production leaves idle."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
from click.testing import CliRunner
from tgs.tools import run as run_mod
from tools_helpers import Ctl, stop, tool, wait_for

NICE = [sys.executable, "-c", "import os; print(os.nice(0))"]
OWN = os.getpriority(os.PRIO_PROCESS, 0)      # what tgs-run inherits from this test


def _nice(ctl: Ctl, *opts: str) -> int:
    r = ctl.run("tgs-run", *opts, "--", *NICE)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.strip())


def test_opportunistic_jobs_get_the_lowest_cpu_priority_production_keeps_its_own(
        ctl: Ctl) -> None:
    assert _nice(ctl, "--priority", "opportunistic") == max(19, OWN)
    assert _nice(ctl) == max(19, OWN)                      # tgs-run's default role
    assert _nice(ctl, "--priority", "production") == OWN


def test_tgs_run_itself_keeps_its_priority(ctl: Ctl) -> None:
    """The command runs at nice 19, tgs-run's own threads at theirs: on a busy machine a
    thread at nice 19 gets the CPU last, and this one forwards signals and unregisters the
    job."""
    p = subprocess.Popen([tool("tgs-run"), "--", "sleep", "30"], env=ctl.env)
    children: list[psutil.Process] = []
    try:
        assert wait_for(lambda: children.extend(psutil.Process(p.pid).children()) or children)
        assert children[0].nice() == max(19, OWN)
        # the short-lived thread that spawned the command (at nice 19) outlives its join()
        # by a moment: the steady state is what counts, a thread left at 19 fails
        assert wait_for(lambda: _thread_priorities(p.pid) == {OWN}), _thread_priorities(p.pid)
        p.send_signal(signal.SIGTERM)           # forwarded: the command ends, then tgs-run
        assert p.wait(timeout=20) == 128 + signal.SIGTERM
    finally:
        stop(p)
        for c in children:                      # by pid, if tgs-run did not forward
            with contextlib.suppress(psutil.NoSuchProcess):
                c.kill()
                c.wait(5)


def _thread_priorities(pid: int) -> set[int]:
    """The nice values of process `pid`'s threads (a thread that ends meanwhile is left out)."""
    found = set()
    for t in psutil.Process(pid).threads():
        with contextlib.suppress(ProcessLookupError):
            found.add(os.getpriority(os.PRIO_PROCESS, t.id))
    return found


def test_cpu_nice_sets_it_and_never_raises_the_priority(ctl: Ctl) -> None:
    assert _nice(ctl, "--cpu-nice", "5") == max(5, OWN)
    assert _nice(ctl, "--priority", "production", "--cpu-nice", "3") == max(3, OWN)
    assert _nice(ctl, "--cpu-nice", "0") == OWN            # 0: the launcher's own


def test_standalone_changes_it_only_when_asked(sim_env: dict[str, str]) -> None:
    env = {**sim_env, "TGS_CONTROLLER": "ipc:///nonexistent/control.sock"}
    for opts, want in (((), OWN), (("--cpu-nice", "7"), max(7, OWN))):
        r = subprocess.run([tool("tgs-run"), "--standalone", *opts, "--", *NICE], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and int(r.stdout) == want, r.stderr


def test_a_nice_value_out_of_range_is_a_usage_error(tmp_path: Path) -> None:
    for bad in ("20", "-1", "x"):
        r = CliRunner().invoke(run_mod.cli, ["--controller", str(tmp_path / "c.sock"),
                                             "--cpu-nice", bad, "--", "true"])
        assert r.exit_code == run_mod.EXIT_WRAPPER and "--cpu-nice" in r.output, r.output
