"""Memory capacity shared across processes, reclaimed from killed processes."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from tgs.intercept import simstate

pytestmark = pytest.mark.timeout(60)

MiB = 1 << 20


def _alloc(prog: Path, env: dict[str, str], nbytes: int) -> tuple[int, int]:
    r = subprocess.run([str(prog), str(nbytes)], env=env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    code, free, _total = (int(x) for x in r.stdout.split())
    return code, free


def _holder(prog: Path, env: dict[str, str], nbytes: int) -> subprocess.Popen[str]:
    p = subprocess.Popen([str(prog), str(nbytes), "hold"], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.split()[0] == "0", line
    return p


def _stop(p: subprocess.Popen[str]) -> None:
    if p.poll() is None:
        p.kill()
    p.wait(timeout=10)


def test_capacity_enforced_across_processes(
    sim_progs: dict[str, Path], sim_env: dict[str, str]
) -> None:
    env = dict(sim_env, TGS_SIM_MEM="512MiB")
    holder = _holder(sim_progs["memhold"], env, 300 * MiB)
    try:
        code, free = _alloc(sim_progs["memhold"], env, 300 * MiB)
        assert code == 2  # CUDA_ERROR_OUT_OF_MEMORY
        assert free == 212 * MiB
        assert _alloc(sim_progs["memhold"], env, 200 * MiB)[0] == 0
        snap = simstate.read_state(env["TGS_SIM_STATE"])
        assert snap.devices[0].mem_total == 512 * MiB
        assert snap.devices[0].mem_used == 300 * MiB
        mine = [p for p in snap.processes if p.pid == holder.pid]
        assert mine and mine[0].alive and mine[0].mem_used[0] == 300 * MiB
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        _stop(holder)


def test_killed_process_memory_is_reclaimed(
    sim_progs: dict[str, Path], sim_env: dict[str, str]
) -> None:
    env = dict(sim_env, TGS_SIM_MEM="512MiB")
    holder = _holder(sim_progs["memhold"], env, 400 * MiB)
    try:
        assert _alloc(sim_progs["memhold"], env, 400 * MiB)[0] == 2
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        snap = simstate.read_state(env["TGS_SIM_STATE"])
        assert [p.alive for p in snap.processes if p.pid == holder.pid] == [False]
        code, free = _alloc(sim_progs["memhold"], env, 400 * MiB)
        assert code == 0
        assert free == 112 * MiB
    finally:
        _stop(holder)


def test_killed_process_pending_work_does_not_wedge(
    sim_progs: dict[str, Path], sim_env: dict[str, str]
) -> None:
    """A process killed with a full queue neither blocks the device nor the lock."""
    env = dict(sim_env, TGS_SIM_QUEUE_DEPTH="1000")
    victim = subprocess.Popen([str(sim_progs["load"]), "-t", "30", "-g", "65535"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)  # it has queued minutes of work by now
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        time.sleep(0.15)  # past the reaper's period
        t0 = time.monotonic()
        r = subprocess.run([str(sim_progs["load"]), "-n", "20"], env=env, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert time.monotonic() - t0 < 5
    finally:
        _stop(victim)  # type: ignore[arg-type]
