"""Page-locked host memory (libshim/pinned.c): the job's host_pinned_max bounds
cuMemAllocHost_v2 / cuMemHostAlloc / cuMemHostRegister_v2 across its processes; a refusal
is CUDA_ERROR_OUT_OF_MEMORY and takes nothing, a driver failure undoes the ledger, a killed
process's pinned bytes come back to the job."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import OversubAgent
from tgs.intercept import segment, simstate

pytestmark = pytest.mark.timeout(60)

MiB = 1 << 20
OOM = 2


def make_job(tmp_path: Path, closing: list[Any], env: dict[str, str],
             pinned_max: int) -> tuple[Any, dict[str, str]]:
    seg = segment.create(tmp_path / "job.seg", "pinned-job", mem_quota=64 * MiB,
                         priority=segment.PRIORITY_OPPORTUNISTIC, nslots=4)
    closing.append(seg)
    seg.set_host_pinned_max(pinned_max)
    return seg, {**env, "TGS_SEGMENT": str(seg.path)}


def agent(closing: list[Any], env: dict[str, str]) -> Any:
    a = OversubAgent(env)
    closing.append(a)
    return a


def test_pinned_limit_is_job_wide(tmp_path: Path, shim_env: dict[str, str],
                                  closing: list[Any]) -> None:
    seg, env = make_job(tmp_path, closing, shim_env, 24 * MiB)
    a, b = agent(closing, env), agent(closing, env)
    h = a.ok("hostalloc", 16 * MiB)["ptr"]
    assert b.ask("hostmalloc", 16 * MiB)["r"] == OOM  # the job's, not the process's
    assert seg.pinned() == (16 * MiB, 24 * MiB)  # the refusal took nothing
    r = b.ok("hostreg", 8 * MiB)["ptr"]
    assert a.ask("hostreg", 4 * MiB)["r"] == OOM
    assert seg.pinned()[0] == 24 * MiB
    a.ok("freehost", h)
    assert seg.pinned()[0] == 8 * MiB
    b.ok("unreg", r)
    assert seg.pinned()[0] == 0
    b.ok("hostmalloc", 24 * MiB)
    assert simstate.read_state(env["TGS_SIM_STATE"]).host_used == 24 * MiB


def test_driver_refusal_undoes_the_ledger(tmp_path: Path, shim_env: dict[str, str],
                                          closing: list[Any]) -> None:
    seg, env = make_job(tmp_path, closing, {**shim_env, "TGS_SIM_HOST_MEM": "8MiB"}, 0)
    a = agent(closing, env)
    assert a.ask("hostalloc", 16 * MiB)["r"] == OOM  # the host has no room: the driver says
    assert seg.pinned()[0] == 0
    a.ok("hostalloc", 8 * MiB)  # no limit of the job's own (0)
    assert seg.pinned() == (8 * MiB, 0)


def test_killed_process_pinned_bytes_come_back(tmp_path: Path, shim_env: dict[str, str],
                                               closing: list[Any]) -> None:
    seg, env = make_job(tmp_path, closing, shim_env, 16 * MiB)
    a = agent(closing, env)
    a.ok("hostalloc", 16 * MiB)
    a.p.send_signal(signal.SIGKILL)
    a.p.wait(timeout=10)
    b = agent(closing, env)
    b.ok("hostalloc", 16 * MiB)  # the refusal reclaims the dead slot first, then admits
    assert seg.pinned()[0] == 16 * MiB
    assert simstate.read_state(env["TGS_SIM_STATE"]).host_used == 16 * MiB
