"""Memory oversubscription (libshim/oversub.c on sim/residency.c): an opportunistic job with
mem_total gets managed memory, holds more than the device has free, is evicted to the host
when production allocates, keeps working slower, and gets its pages back by prefetch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_helpers import Agent, mig_ms
from tgs.intercept import segment, simstate

pytestmark = pytest.mark.timeout(90)

MiB = 1 << 20
OOM = 2


@pytest.fixture
def env(shim_env: dict[str, str]) -> dict[str, str]:
    return {**shim_env, "TGS_SIM_MEM": "64MiB"}


def job(tmp_path: Path, closing: list[Any], env: dict[str, str], name: str, priority: int,
        mem_quota: int = segment.QUOTA_UNLIMITED, mem_total: int = 0) -> dict[str, str]:
    seg = segment.create(tmp_path / f"{name}.seg", name, mem_quota=mem_quota, priority=priority,
                         nslots=4)
    closing.append(seg)
    seg.set_mem_total(mem_total)
    return {**env, "TGS_SEGMENT": str(seg.path)}


def agent(closing: list[Any], env: dict[str, str]) -> Any:
    a = Agent(env)
    closing.append(a)
    return a


def dev0(env: dict[str, str]) -> simstate.DeviceInfo:
    return simstate.read_state(env["TGS_SIM_STATE"]).devices[0]


def test_opportunistic_job_is_evicted_for_production_and_recovers(
        tmp_path: Path, env: dict[str, str], closing: list[Any]) -> None:
    opp = agent(closing, job(tmp_path, closing, env, "opp", segment.PRIORITY_OPPORTUNISTIC,
                             mem_quota=96 * MiB, mem_total=96 * MiB))
    prod = agent(closing, job(tmp_path, closing, env, "prod", segment.PRIORITY_PRODUCTION))
    a = opp.ok("malloc", 40 * MiB)["ptr"]  # cuMemAlloc_v2 -> managed memory
    b = opp.ok("malloc", 16 * MiB)["ptr"]
    assert dev0(env).managed_used == 56 * MiB
    info = opp.ok("info")  # the job's budget, not the device
    assert (info["total"], info["free"]) == (96 * MiB, 40 * MiB)
    opp.ok("fill", a, 40 * MiB, 0xA5)
    opp.ok("kernel")
    assert dev0(env).managed_resident == 56 * MiB
    assert prod.ok("info")["free"] == 8 * MiB
    # mem_total bounds what it holds
    assert opp.ask("malloc", 48 * MiB)["r"] == OOM
    # production: 40 MiB fits the device (64) but not its free memory (8); it succeeds,
    # stays device memory, and the opportunistic pages move to the host
    d = prod.ok("malloc", 40 * MiB)["ptr"]
    snap = dev0(env)
    assert snap.managed_used == 56 * MiB
    assert snap.mem_used == 40 * MiB
    assert snap.managed_resident == 24 * MiB
    # the opportunistic job keeps working, slower, its data intact
    assert float(opp.ok("kernel")["ms"]) == pytest.approx(mig_ms(32 * MiB), rel=0.02)
    assert opp.ok("check", a, 40 * MiB, 0xA5)["ok"]
    # production leaves; prefetching brings the pages back, kernels are fast again
    prod.ok("free", d)
    opp.ok("prefetch", a, 40 * MiB, 0)
    opp.ok("prefetch", b, 16 * MiB, 0)
    assert dev0(env).managed_resident == 56 * MiB
    assert float(opp.ok("kernel")["ms"]) < 0.01


def test_production_never_gets_managed_memory(tmp_path: Path, env: dict[str, str],
                                              closing: list[Any]) -> None:
    prod = agent(closing, job(tmp_path, closing, env, "prod", segment.PRIORITY_PRODUCTION,
                              mem_total=96 * MiB))  # ignored for production
    prod.ok("malloc", 32 * MiB)
    assert dev0(env).managed_used == 0
    assert dev0(env).mem_used == 32 * MiB
    assert prod.ask("malloc", 40 * MiB)["r"] == OOM  # no oversubscription


def test_past_mem_quota_prefers_the_host(tmp_path: Path, env: dict[str, str],
                                         closing: list[Any]) -> None:
    opp = agent(closing, job(tmp_path, closing, env, "opp", segment.PRIORITY_OPPORTUNISTIC,
                             mem_quota=16 * MiB, mem_total=48 * MiB))
    opp.ok("malloc", 16 * MiB)  # within the resident budget
    opp.ok("malloc", 16 * MiB)  # past it: advised to the host
    assert float(opp.ok("kernel")["ms"]) == pytest.approx(mig_ms(32 * MiB), rel=0.02)
    assert float(opp.ok("kernel")["ms"]) == pytest.approx(mig_ms(16 * MiB), rel=0.02)
    assert dev0(env).managed_resident == 16 * MiB


def test_without_mem_total_the_quota_is_hard(tmp_path: Path, env: dict[str, str],
                                             closing: list[Any]) -> None:
    opp = agent(closing, job(tmp_path, closing, env, "opp", segment.PRIORITY_OPPORTUNISTIC,
                             mem_quota=16 * MiB))
    opp.ok("malloc", 16 * MiB)
    assert opp.ask("malloc", 4 * MiB)["r"] == OOM
    assert dev0(env).managed_used == 0
