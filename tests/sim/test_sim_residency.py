"""Managed-memory residency (sim/residency.c): eviction for device allocations,
migration cost of kernels, prefetch and advice, reclaim from killed processes."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_helpers import Agent, mig_ms, spawn
from tgs.intercept import simstate

pytestmark = pytest.mark.timeout(60)

MiB = 1 << 20
PREFERRED = 3  # CU_MEM_ADVISE_SET_PREFERRED_LOCATION
HOST = -1  # CU_DEVICE_CPU



@pytest.fixture
def env(sim_env: dict[str, str]) -> dict[str, str]:
    return {**sim_env, "TGS_SIM_MEM": "64MiB"}


@pytest.fixture
def agents(env: dict[str, str]) -> Iterator[list[Agent]]:
    made: list[Agent] = []
    yield made
    for a in made:
        a.close()



def resident(env: dict[str, str]) -> int:
    return simstate.read_state(env["TGS_SIM_STATE"]).devices[0].managed_resident


def test_kernel_pays_for_non_resident_pages_once(env: dict[str, str],
                                                 agents: list[Agent]) -> None:
    a = spawn(agents, env)
    total = int(a.ok("info")["total"])
    p = a.ok("managed", 32 * MiB)["ptr"]
    assert a.ok("info")["free"] == total  # first touch populates: not resident yet
    first = float(a.ok("kernel")["ms"])
    assert first == pytest.approx(mig_ms(32 * MiB), rel=0.02)
    assert float(a.ok("kernel")["ms"]) < 0.01
    assert a.ok("info")["free"] == total - 32 * MiB
    assert resident(env) == 32 * MiB
    a.ok("free", p)
    assert a.ok("info")["free"] == total
    assert resident(env) == 0


def test_device_allocation_evicts_other_process_managed_pages(env: dict[str, str],
                                                              agents: list[Agent]) -> None:
    opp, prod = spawn(agents, env), spawn(agents, env)
    m = opp.ok("managed", 48 * MiB)["ptr"]
    opp.ok("fill", m, 48 * MiB, 0x5A)
    opp.ok("kernel")
    assert resident(env) == 48 * MiB
    # 48 MiB resident + 40 MiB does not fit 64 MiB: the managed pages make room
    got = prod.ok("malloc", 40 * MiB)
    d = got["ptr"]
    assert resident(env) == 24 * MiB
    assert float(got["us"]) >= mig_ms(24 * MiB) * 1000  # it waited for the write-back
    assert prod.ok("info")["free"] == 0
    # device allocations alone still cannot exceed the device
    assert prod.ask("malloc", 30 * MiB)["r"] == 2  # CUDA_ERROR_OUT_OF_MEMORY
    # the evicted process keeps working, slower, with its data intact
    assert float(opp.ok("kernel")["ms"]) == pytest.approx(mig_ms(24 * MiB), rel=0.02)
    assert float(opp.ok("kernel")["ms"]) == pytest.approx(mig_ms(24 * MiB), rel=0.02)
    assert opp.ok("check", m, 48 * MiB, 0x5A)["ok"]
    # production leaves; a prefetch brings the pages back
    prod.ok("free", d)
    opp.ok("prefetch", m, 48 * MiB, 0)
    assert resident(env) == 48 * MiB
    assert float(opp.ok("kernel")["ms"]) < 0.01
    snap = simstate.read_state(env["TGS_SIM_STATE"]).devices[0]
    assert snap.managed_evicted == 24 * MiB
    assert snap.managed_migrated == 48 * MiB + 24 * MiB


def test_eviction_takes_least_recently_used_and_preferred_device_last(
        env: dict[str, str], agents: list[Agent]) -> None:
    old, new, pref, prod = (spawn(agents, env) for _ in range(4))
    pref_p = pref.ok("managed", 16 * MiB)["ptr"]
    pref.ok("advise", pref_p, 16 * MiB, PREFERRED, 0)
    pref.ok("kernel")  # least recently used, but prefers the device
    old.ok("managed", 16 * MiB)
    old.ok("kernel")
    new.ok("managed", 16 * MiB)
    new.ok("kernel")
    prod.ok("malloc", 24 * MiB)  # 48 resident + 24: evict 8 MiB, from `old`
    assert float(new.ok("kernel")["ms"]) < 0.01
    assert float(pref.ok("kernel")["ms"]) < 0.01
    assert float(old.ok("kernel")["ms"]) == pytest.approx(mig_ms(8 * MiB), rel=0.02)


def test_preferred_host_stays_on_host_and_prefetch_to_host(env: dict[str, str],
                                                           agents: list[Agent]) -> None:
    a = spawn(agents, env)
    total = int(a.ok("info")["total"])
    p = a.ok("managed", 8 * MiB)["ptr"]
    a.ok("advise", p, 8 * MiB, PREFERRED, HOST)
    for _ in range(2):  # paid at every launch: remote access over the bus
        assert float(a.ok("kernel")["ms"]) == pytest.approx(mig_ms(8 * MiB), rel=0.02)
    assert a.ok("info")["free"] == total
    q = a.ok("managed", 4 * MiB)["ptr"]
    a.ok("prefetch", q, 4 * MiB, 0)
    assert a.ok("info")["free"] == total - 4 * MiB
    a.ok("prefetch", q, 4 * MiB, HOST)
    assert a.ok("info")["free"] == total


def test_prefetch_fills_only_free_memory(env: dict[str, str], agents: list[Agent]) -> None:
    a, b = spawn(agents, env), spawn(agents, env)
    b.ok("malloc", 40 * MiB)
    p = a.ok("managed", 32 * MiB)["ptr"]
    a.ok("prefetch", p, 32 * MiB, 0)
    assert resident(env) == 24 * MiB  # it evicts nobody: what fits
    assert b.ok("info")["free"] == 0


def test_killed_process_resident_pages_are_reclaimed(env: dict[str, str],
                                                     agents: list[Agent]) -> None:
    a, b = spawn(agents, env), spawn(agents, env)
    a.ok("managed", 32 * MiB)
    a.ok("kernel")
    assert resident(env) == 32 * MiB
    a.p.kill()
    a.p.wait(timeout=10)
    b.ok("malloc", 64 * MiB)  # the failed first try reaps the dead process
    assert resident(env) == 0


def test_pcie_bandwidth_option(env: dict[str, str], agents: list[Agent],
                               tmp_path: Path) -> None:
    a = spawn(agents, {**env, "TGS_SIM_PCIE_GBPS": "5"})
    a.ok("managed", 10 * MiB)
    assert float(a.ok("kernel")["ms"]) == pytest.approx(10 * MiB / 5 / 1e6, rel=0.02)


def test_preferred_device_fault_evicts_other_processes_unpreferred_pages(
        env: dict[str, str], agents: list[Agent]) -> None:
    """TGS's own scheme: production's managed memory prefers the GPU; its kernels' faults
    push the opportunistic pages out (and pay their write-back), never the reverse."""
    opp, prod = spawn(agents, env), spawn(agents, env)
    opp.ok("managed", 48 * MiB)
    opp.ok("kernel")
    p = prod.ok("managed", 32 * MiB)["ptr"]
    prod.ok("advise", p, 32 * MiB, PREFERRED, 0)
    assert float(prod.ok("kernel")["ms"]) == pytest.approx(mig_ms(48 * MiB), rel=0.02)
    assert float(prod.ok("kernel")["ms"]) < 0.01
    for _ in range(2):  # the opportunistic job cannot take the room back
        assert float(opp.ok("kernel")["ms"]) == pytest.approx(mig_ms(16 * MiB), rel=0.02)
    assert float(prod.ok("kernel")["ms"]) < 0.01
    assert resident(env) == 64 * MiB


def test_reader_layout_matches_the_compiler(tmp_path: Path) -> None:
    """tgs.intercept.simstate's binding of tgs/sim_state.h (with the residency table): the
    compiler's offsets."""
    facts = {k: v for k, v in simstate.offsets().items() if "sim_mrange" in k or "sim_res" in k}
    assert facts
    body = "".join(f'printf("%zu\\n", (size_t){k});' for k in facts)
    src = tmp_path / "layout.c"
    src.write_text('#include <stdio.h>\n#include <stddef.h>\n#include "tgs/sim_state.h"\n'
                   f"int main(void){{{body}return 0;}}\n")
    exe = tmp_path / "layout"
    root = Path(__file__).resolve().parents[2]
    subprocess.run(["gcc", f"-I{root / 'contracts' / 'include'}", str(src), "-o", str(exe)],
                   check=True)
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert dict(zip(facts, (int(x) for x in got), strict=True)) == facts
