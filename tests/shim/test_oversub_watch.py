"""Oversubscription's watch (libshim/oversub_watch.c on sim/residency.c): an opportunistic
job's evicted managed memory comes back as a bulk prefetch on its synchronize when the GPU
has room again (not by its next kernels' faults), and the thrashing guard holds its
synchronize while its working set does not fit what production left, then resumes."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import OversubAgent, mig_ms
from tgs.intercept import segment, simstate

pytestmark = pytest.mark.timeout(90)

MiB = 1 << 20


@pytest.fixture
def env(shim_env: dict[str, str]) -> dict[str, str]:
    return {**shim_env, "TGS_SIM_MEM": "64MiB", "TGS_OVERSUB_CHECK_MS": "0"}


def job(tmp_path: Path, closing: list[Any], env: dict[str, str], name: str, priority: int,
        mem_total: int = 0) -> tuple[Any, dict[str, str]]:
    seg = segment.create(tmp_path / f"{name}.seg", name, mem_quota=segment.QUOTA_UNLIMITED,
                         priority=priority, nslots=4)
    closing.append(seg)
    seg.set_mem_total(mem_total)
    return seg, {**env, "TGS_SEGMENT": str(seg.path)}


def agent(closing: list[Any], env: dict[str, str]) -> Any:
    a = OversubAgent(env)
    closing.append(a)
    return a


def dev0(env: dict[str, str]) -> simstate.DeviceInfo:
    return simstate.read_state(env["TGS_SIM_STATE"]).devices[0]


def busy_of(env: dict[str, str], pid: int) -> int:
    procs = simstate.read_state(env["TGS_SIM_STATE"]).processes
    return next(p.busy_ns[0] for p in procs if p.pid == pid)


def pair(tmp_path: Path, closing: list[Any], env: dict[str, str],
         **opp_env: str) -> tuple[Any, Any]:
    _, oe = job(tmp_path, closing, env, "opp", segment.PRIORITY_OPPORTUNISTIC, 96 * MiB)
    _, pe = job(tmp_path, closing, env, "prod", segment.PRIORITY_PRODUCTION)
    return agent(closing, {**oe, **opp_env}), agent(closing, pe)


def test_evicted_memory_comes_back_by_prefetch_not_faults(
        tmp_path: Path, env: dict[str, str], closing: list[Any]) -> None:
    opp, prod = pair(tmp_path, closing, env, TGS_OVERSUB_PAUSE_MS="0")  # no guard here
    opp.ok("malloc", 40 * MiB)
    opp.ok("malloc", 16 * MiB)
    opp.ok("sync")  # the device has room: both come in by prefetch, on the job's own stream
    opp.ok("sync")
    assert dev0(env).managed_resident == 56 * MiB
    assert float(opp.ok("kernel")["ms"]) < 0.01  # no faults after it
    d = prod.ok("malloc", 40 * MiB)["ptr"]  # evicts 32 MiB
    assert float(opp.ok("kernel")["ms"]) == pytest.approx(mig_ms(32 * MiB), rel=0.02)
    migrated = dev0(env).managed_migrated
    prod.ok("free", d)
    before = int(opp.ok("busy")["ns"])
    opp.ok("sync")  # room again: the look prefetches what is missing
    opp.ok("sync")  # (waits for the prefetch stream)
    prefetch_ms = (int(opp.ok("busy")["ns"]) - before) / 1e6
    assert prefetch_ms == pytest.approx(mig_ms(32 * MiB), rel=0.05)  # the bus time, modelled
    assert dev0(env).managed_resident == 56 * MiB
    assert dev0(env).managed_migrated == migrated + 32 * MiB
    assert float(opp.ok("kernel")["ms"]) < 0.01  # recovered: the kernel paid no fault


def test_guard_off_for_a_job_that_fits(tmp_path: Path, env: dict[str, str],
                                       closing: list[Any]) -> None:
    opp, prod = pair(tmp_path, closing, env, TGS_OVERSUB_PAUSE_MS="60000")
    opp.ok("malloc", 16 * MiB)
    prod.ok("malloc", 40 * MiB)
    opp.ok("sync")  # prefetched in (into the 24 MiB production left)
    opp.ok("sync")
    for _ in range(5):  # it fits what production left: never held, never faulting
        t0 = time.monotonic()
        assert float(opp.ok("kernel")["ms"]) < 0.01
        assert time.monotonic() - t0 < 5.0


def test_killed_mid_prefetch_leaks_nothing(tmp_path: Path, env: dict[str, str],
                                           closing: list[Any]) -> None:
    """SIGKILL while the job's prefetch is on the bus: its residency, host memory and
    ledger come back; production's allocation of the whole device succeeds."""
    slow = {"TGS_SIM_PCIE_GBPS": "0.05", "TGS_OVERSUB_PAUSE_MS": "0"}  # 48 MiB: ~1 s
    seg, oe = job(tmp_path, closing, env, "opp", segment.PRIORITY_OPPORTUNISTIC, 96 * MiB)
    _, pe = job(tmp_path, closing, env, "prod", segment.PRIORITY_PRODUCTION)
    opp = agent(closing, {**oe, **slow})
    opp.ok("malloc", 48 * MiB)
    opp.ok("sync")  # the prefetch is queued: ~1 s of bus time on the job's stream
    assert seg.ledger()[0] == 48 * MiB
    opp.p.send_signal(signal.SIGKILL)
    opp.p.wait(timeout=10)
    prod = agent(closing, pe)
    prod.ok("malloc", 64 * MiB)  # the whole device: the dead job's pages are gone
    snap = simstate.read_state(env["TGS_SIM_STATE"])
    assert (snap.devices[0].managed_used, snap.devices[0].managed_resident) == (0, 0)
    assert snap.host_used == 0
    assert float(prod.ok("kernel")["ms"]) < 0.01  # production unaffected
    again = agent(closing, {**oe, **slow})  # the job's next process reclaims the slot
    again.ok("info")
    assert seg.ledger()[0] == 0


def test_stream_ordered_allocations_become_managed(
        tmp_path: Path, env: dict[str, str], closing: list[Any]) -> None:
    slow = {"TGS_SIM_NS_PER_THREAD": "200000000", "TGS_OVERSUB_PAUSE_MS": "0"}  # 0.2 s kernel
    seg, oe = job(tmp_path, closing, env, "opp", segment.PRIORITY_OPPORTUNISTIC, 96 * MiB)
    pseg, pe = job(tmp_path, closing, env, "prod", segment.PRIORITY_PRODUCTION)
    opp, prod = agent(closing, {**oe, **slow}), agent(closing, pe)
    p = opp.ok("amalloc", 80 * MiB)["ptr"]  # more than the device: managed, admitted
    assert (dev0(env).managed_used, dev0(env).mem_used) == (80 * MiB, 0)
    assert seg.ledger()[0] == 80 * MiB
    before = int(opp.ok("busy")["ns"])
    opp.ok("launch")  # queued work that may use it
    opp.ok("afree", p)  # returns at once: the free waits for that work, not the caller
    assert dev0(env).managed_used == 80 * MiB
    assert seg.ledger()[0] == 80 * MiB
    opp.ok("sync")  # the work is done: the deferred free happens
    assert int(opp.ok("busy")["ns"]) - before == pytest.approx(200e6 + mig_ms(80 * MiB) * 1e6,
                                                               rel=0.01)
    assert dev0(env).managed_used == 0
    assert seg.ledger()[0] == 0
    # an allocation the ledger would refuse first waits for the pending frees
    p = opp.ok("amalloc", 80 * MiB)["ptr"]
    opp.ok("launch")
    opp.ok("afree", p)
    opp.ok("amalloc", 80 * MiB)  # 80 + 80 > 96 until the first one is freed
    assert (dev0(env).managed_used, seg.ledger()[0]) == (80 * MiB, 80 * MiB)
    q = prod.ok("amalloc", 16 * MiB)["ptr"]  # production: device memory, as before
    assert dev0(env).mem_used == 16 * MiB
    prod.ok("afree", q)
    prod.ok("sync")
    assert pseg.ledger()[0] == 0


def test_legacy_32bit_allocation_falls_back_to_device_memory(
        tmp_path: Path, env: dict[str, str], closing: list[Any]) -> None:
    """cuMemAlloc (32-bit) would be managed memory if its address fitted in 32 bits; the
    simulator's (like a 64-bit driver's) never does: the managed try is given back and the
    call gets device memory, admitted against mem_total, with nothing left behind."""
    seg, oe = job(tmp_path, closing, env, "opp", segment.PRIORITY_OPPORTUNISTIC, 96 * MiB)
    opp = agent(closing, oe)
    got = opp.ok("malloc32", 8 * MiB)
    assert 0 < int(got["ptr"]) <= 0xFFFFFFFF
    assert (dev0(env).mem_used, dev0(env).managed_used) == (8 * MiB, 0)
    assert simstate.read_state(env["TGS_SIM_STATE"]).host_used == 0
    assert seg.ledger()[0] == 8 * MiB
    opp.ok("sync")  # nothing of it is tracked for prefetch
    opp.ok("free32", got["ptr"])
    assert seg.ledger()[0] == 0
    assert dev0(env).mem_used == 0


def test_host_ranges_come_to_the_device_when_mem_quota_has_room(
        tmp_path: Path, env: dict[str, str], closing: list[Any]) -> None:
    """A range made past mem_quota lives on the host; once the job frees under the quota,
    a look unsets its advice and prefetches it: its kernels stop paying the bus."""
    seg, oe = job(tmp_path, closing, env, "opp", segment.PRIORITY_OPPORTUNISTIC, 48 * MiB)
    seg.set_quota(16 * MiB)
    opp = agent(closing, {**oe, "TGS_OVERSUB_PAUSE_MS": "0"})
    a = opp.ok("malloc", 16 * MiB)["ptr"]  # within the resident budget
    opp.ok("malloc", 16 * MiB)  # past it: on the host
    opp.ok("sync")
    opp.ok("sync")
    for _ in range(2):  # still past the quota: the host range stays there
        assert float(opp.ok("kernel")["ms"]) == pytest.approx(mig_ms(16 * MiB), rel=0.02)
    opp.ok("free", a)
    opp.ok("sync")  # room under the quota: advice unset, prefetched
    opp.ok("sync")
    assert dev0(env).managed_resident == 16 * MiB
    assert float(opp.ok("kernel")["ms"]) < 0.01


def test_prefetch_goes_to_the_device_of_the_range(
        tmp_path: Path, env: dict[str, str], closing: list[Any]) -> None:
    """A look concerns the current context's device: a range made on device 1 is not
    prefetched to device 0 by a synchronize there, and comes in on device 1's."""
    two = {**env, "TGS_SIM_DEVICES": "2", "TGS_OVERSUB_PAUSE_MS": "0"}
    _, oe = job(tmp_path, closing, two, "opp", segment.PRIORITY_OPPORTUNISTIC, 96 * MiB)
    opp = agent(closing, oe)
    opp.ok("ctx", 1)
    opp.ok("malloc", 16 * MiB)  # on device 1
    opp.ok("ctx", 0)
    opp.ok("sync")
    opp.ok("sync")
    devs = simstate.read_state(env["TGS_SIM_STATE"]).devices
    assert (devs[0].managed_resident, devs[1].managed_resident) == (0, 0)
    opp.ok("ctx", 1)
    opp.ok("sync")
    opp.ok("sync")
    devs = simstate.read_state(env["TGS_SIM_STATE"]).devices
    assert (devs[0].managed_resident, devs[1].managed_resident) == (0, 16 * MiB)
