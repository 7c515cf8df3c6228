"""Managed-memory residency, continued (sim/residency.c): prefetch costs bus time on its
stream, and the host memory limit (TGS_SIM_HOST_MEM) covers managed bytes on the host and
page-locked host memory, with evictions that fail cleanly when the host is full."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from agent_helpers import OversubAgent as Agent
from agent_helpers import mig_ms
from agent_helpers import spawn as _spawn
from tgs.intercept import simstate

pytestmark = pytest.mark.timeout(60)

MiB = 1 << 20
OOM = 2
HOST = -1


@pytest.fixture
def env(sim_env: dict[str, str]) -> dict[str, str]:
    return {**sim_env, "TGS_SIM_MEM": "64MiB"}


def spawn(agents: list[Agent], env: dict[str, str]) -> Agent:
    return _spawn(agents, env, Agent)


@pytest.fixture
def agents() -> Iterator[list[Agent]]:
    made: list[Agent] = []
    yield made
    for a in made:
        a.close()


def snap(env: dict[str, str]) -> simstate.SimSnapshot:
    return simstate.read_state(env["TGS_SIM_STATE"])


def test_prefetch_pays_the_bus_on_its_stream(env: dict[str, str], agents: list[Agent]) -> None:
    a = spawn(agents, env)
    p = a.ok("managed", 32 * MiB)["ptr"]
    assert float(a.ok("pstream", p, 32 * MiB, 0)["ms"]) == pytest.approx(mig_ms(32 * MiB),
                                                                         rel=0.02)
    assert snap(env).devices[0].managed_resident == 32 * MiB
    assert float(a.ok("pstream", p, 32 * MiB, 0)["ms"]) < 0.01  # nothing left to move
    assert float(a.ok("kernel")["ms"]) < 0.01  # and no fault after it
    # to the host: the write-back costs the same
    assert float(a.ok("pstream", p, 32 * MiB, HOST)["ms"]) == pytest.approx(mig_ms(32 * MiB),
                                                                            rel=0.02)
    assert snap(env).devices[0].managed_resident == 0


def test_host_limit_covers_managed_and_page_locked_memory(env: dict[str, str],
                                                         agents: list[Agent]) -> None:
    a = spawn(agents, {**env, "TGS_SIM_HOST_MEM": "48MiB"})
    m = a.ok("managed", 32 * MiB)["ptr"]  # on the host until touched
    assert snap(env).host_used == 32 * MiB
    h = a.ok("hostalloc", 16 * MiB)["ptr"]
    assert snap(env).host_used == 48 * MiB
    assert a.ask("hostmalloc", 4 * MiB)["r"] == OOM
    assert a.ask("hostreg", 4 * MiB)["r"] == OOM
    assert a.ask("managed", 4 * MiB)["r"] == OOM
    assert snap(env).host_used == 48 * MiB  # the refusals took nothing
    a.ok("freehost", h)
    assert snap(env).host_used == 32 * MiB
    a.ok("kernel")  # the managed pages move to the device: the host has room again
    assert snap(env).host_used == 0
    r = a.ok("hostreg", 8 * MiB)["ptr"]
    a.ok("hostmalloc", 40 * MiB)
    assert snap(env).host_used == 48 * MiB
    a.ok("unreg", r)
    a.ok("free", m)
    assert snap(env).host_used == 40 * MiB


def test_eviction_that_the_host_cannot_take_fails_cleanly(env: dict[str, str],
                                                          agents: list[Agent]) -> None:
    """Host memory runs out while production evicts: its allocation fails only when the
    pages it would push out have nowhere to go; the opportunistic data stays intact."""
    lim = {**env, "TGS_SIM_HOST_MEM": "56MiB"}
    opp, prod = spawn(agents, lim), spawn(agents, lim)
    m = opp.ok("managed", 48 * MiB)["ptr"]
    opp.ok("fill", m, 48 * MiB, 0x5A)
    opp.ok("kernel")
    opp.ok("hostalloc", 40 * MiB)  # the host has 16 MiB left
    assert snap(env).devices[0].managed_resident == 48 * MiB
    # 40 MiB needs 24 MiB evicted: more than the host can take -> OOM, nothing moved
    assert prod.ask("malloc", 40 * MiB)["r"] == OOM
    d = snap(env).devices[0]
    assert (d.managed_resident, d.mem_used, d.managed_evicted) == (48 * MiB, 0, 0)
    # what fits the free device memory needs no eviction; 8 MiB more evicts 8 MiB
    prod.ok("malloc", 16 * MiB)
    prod.ok("malloc", 8 * MiB)
    d = snap(env).devices[0]
    assert (d.managed_resident, d.mem_used) == (40 * MiB, 24 * MiB)
    assert snap(env).host_used == 40 * MiB + 8 * MiB
    assert opp.ok("check", m, 48 * MiB, 0x5A)["ok"]


def test_killed_process_host_memory_is_reclaimed(env: dict[str, str],
                                                 agents: list[Agent]) -> None:
    a = spawn(agents, env)
    a.ok("managed", 16 * MiB)
    a.ok("hostalloc", 8 * MiB)
    a.ok("hostreg", 4 * MiB)
    assert snap(env).host_used == 28 * MiB
    a.p.kill()
    a.p.wait(timeout=10)
    spawn(agents, env).ok("info")  # a new process reaps the dead one's slot
    assert snap(env).host_used == 0
