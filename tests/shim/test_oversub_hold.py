"""The thrashing guard (libshim/oversub_hold.c on sim/residency.c): once production has
taken the memory an oversubscribed opportunistic job's working set needs, the job's launches
wait (instead of each paying its migration and sharing the GPU with production) until the
memory is back; then its pages are prefetched back first and it resumes by itself, data
intact.  A wait is bounded: a job whose memory never comes back runs one kernel per pause."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

import pytest
from shim_helpers import list_jobs
from tgs.intercept import devseg, segment

_spec = importlib.util.spec_from_file_location(
    "oversub_watch_tests", Path(__file__).resolve().parent / "test_oversub_watch.py")
assert _spec and _spec.loader
ow: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ow)
MiB, agent, busy_of, dev0, job, mig_ms, pair = (ow.MiB, ow.agent, ow.busy_of, ow.dev0, ow.job,
                                                ow.mig_ms, ow.pair)


@pytest.fixture
def env(shim_env: dict[str, str]) -> dict[str, str]:
    return {**shim_env, "TGS_SIM_MEM": "64MiB", "TGS_OVERSUB_CHECK_MS": "0"}


pytestmark = pytest.mark.timeout(120)

KERNEL_T = 2_000_000       # threads: a 2 ms kernel on the simulator
SLOW_BUS = "1.0"           # GB/s: the opportunistic job's evicted 24 MiB cost ~25 ms a kernel


def test_launches_wait_while_production_holds_the_memory(
        tmp_path: Path, env: dict[str, str], closing: list[Any]) -> None:
    opp, prod = pair(tmp_path, closing, env, TGS_OVERSUB_PAUSE_MS="60000")
    m = opp.ok("malloc", 48 * MiB)["ptr"]
    opp.ok("fill", m, 48 * MiB, 0x3C)
    opp.ok("sync")  # prefetched in
    opp.ok("sync")  # (its stream done)
    assert dev0(env).managed_resident == 48 * MiB
    d = prod.ok("malloc", 40 * MiB)["ptr"]  # 24 MiB of the 48 go to the host
    time.sleep(0.2)  # the watcher sees it within a few ms
    busy = busy_of(env, opp.p.pid)
    opp.send("launch")  # its working set (48) no longer fits what is left (24): held
    assert not opp.ready(1.0)
    for _ in range(3):  # production runs at its solo cost, the opportunistic job takes none
        assert float(prod.ok("kernel")["ms"]) < 0.01
    assert busy_of(env, opp.p.pid) == busy
    assert not opp.ready(0.2)
    prod.ok("free", d)  # production gives the memory back: the job resumes by itself
    assert opp.ready(10.0)
    assert opp.recv()["r"] == 0
    opp.ok("sync")
    # prefetched back before the launch went: the bus time once, as a bulk copy
    assert (busy_of(env, opp.p.pid) - busy) / 1e6 == pytest.approx(mig_ms(24 * MiB), rel=0.05)
    assert dev0(env).managed_resident == 48 * MiB
    assert float(opp.ok("kernel")["ms"]) < 0.01
    assert opp.ok("check", m, 48 * MiB, 0x3C)["ok"]


def test_production_keeps_its_speed_while_the_job_is_evicted(
        tmp_path: Path, env: dict[str, str], closing: list[Any]) -> None:
    """Production's kernel throughput while it holds the evicting memory and the
    opportunistic job keeps launching, against its solo figure measured here first."""
    slow = {**env, "TGS_SIM_PCIE_GBPS": SLOW_BUS}
    opp, prod = pair(tmp_path, closing, slow, TGS_OVERSUB_PAUSE_MS="60000")
    m = opp.ok("malloc", 48 * MiB)["ptr"]
    opp.ok("fill", m, 48 * MiB, 0x5A)
    opp.ok("sync")
    opp.ok("sync")
    n = 150
    solo = n / float(prod.ok("kernels", n, KERNEL_T)["s"])
    d = prod.ok("malloc", 40 * MiB)["ptr"]
    time.sleep(0.2)
    opp.send("kernels", 400, KERNEL_T)  # runs on (held) while production works
    time.sleep(0.2)
    busy = busy_of(slow, opp.p.pid)
    shared = n / float(prod.ok("kernels", n, KERNEL_T)["s"])
    assert busy_of(slow, opp.p.pid) == busy  # held: none of its kernels ran meanwhile
    assert shared >= 0.7 * solo, (shared, solo)     # and so production was not slowed much
    assert not opp.ready(0.0)
    prod.ok("free", d)
    assert opp.ready(30.0)  # resumed and finished its kernels
    assert opp.recv()["r"] == 0
    assert dev0(slow).managed_resident == 48 * MiB
    assert opp.ok("check", m, 48 * MiB, 0x5A)["ok"]


def test_without_the_guard_production_shares_the_gpu(
        tmp_path: Path, env: dict[str, str], closing: list[Any]) -> None:
    """The same scene without the guard (TGS_OVERSUB_PAUSE_MS=0): the evicted job's kernels
    run, each paying its migration, and production loses throughput (what the test above
    protects against)."""
    slow = {**env, "TGS_SIM_PCIE_GBPS": SLOW_BUS}
    opp, prod = pair(tmp_path, closing, slow, TGS_OVERSUB_PAUSE_MS="0")
    opp.ok("malloc", 48 * MiB)
    opp.ok("sync")
    opp.ok("sync")
    n = 150
    solo = n / float(prod.ok("kernels", n, KERNEL_T)["s"])
    prod.ok("malloc", 40 * MiB)
    opp.send("kernels", 40, KERNEL_T)
    time.sleep(0.2)
    busy = busy_of(slow, opp.p.pid)
    shared = n / float(prod.ok("kernels", n, KERNEL_T)["s"])
    assert busy_of(slow, opp.p.pid) - busy > 100e6  # its kernels ran, paying the bus
    assert shared < 0.85 * solo, (shared, solo)
    assert opp.ready(60.0)
    assert opp.recv()["r"] == 0


def test_held_launches_go_one_per_pause_and_never_wedge(
        tmp_path: Path, env: dict[str, str], closing: list[Any]) -> None:
    opp, prod = pair(tmp_path, closing, env, TGS_OVERSUB_PAUSE_MS="300")
    opp.ok("malloc", 48 * MiB)
    opp.ok("sync")
    prod.ok("malloc", 40 * MiB)  # and never frees
    time.sleep(0.2)
    for _ in range(2):  # each launch waits out one pause, then goes (paying the bus)
        t0 = time.monotonic()
        opp.send("launch")
        assert opp.ready(10.0)
        assert opp.recv()["r"] == 0
        assert time.monotonic() - t0 >= 0.3


def test_no_watcher_the_synchronize_sets_the_hold(
        tmp_path: Path, env: dict[str, str], closing: list[Any]) -> None:
    """TGS_OVERSUB_WATCH_MS=0: no thread; the first synchronize that finds the working set
    short puts the job on hold, and its next launch waits."""
    opp, prod = pair(tmp_path, closing, env, TGS_OVERSUB_PAUSE_MS="60000",
                     TGS_OVERSUB_WATCH_MS="0")
    opp.ok("malloc", 48 * MiB)
    opp.ok("sync")
    opp.ok("launch")  # the thread's first launch (slow path: it takes its lane)
    opp.ok("sync")
    d = prod.ok("malloc", 40 * MiB)["ptr"]
    t0 = time.monotonic()
    opp.ok("launch")  # on the fast path nobody looks: it goes (and pays)
    assert time.monotonic() - t0 < 5.0
    opp.ok("sync")  # the look: short
    opp.send("launch")
    assert not opp.ready(1.0)
    prod.ok("free", d)
    assert opp.ready(10.0)
    assert opp.recv()["r"] == 0


def test_production_never_holds(tmp_path: Path, env: dict[str, str],
                                closing: list[Any]) -> None:
    """A production job has no managed memory: no watcher, never held, even on a full
    device."""
    _, pe = job(tmp_path, closing, env, "prod", segment.PRIORITY_PRODUCTION)
    prod = agent(closing, pe)
    prod.ok("malloc", 64 * MiB)
    time.sleep(0.1)
    t0 = time.monotonic()
    for _ in range(5):
        prod.ok("kernel")
    assert time.monotonic() - t0 < 5.0


def test_no_hold_without_production_on_the_device(
        tmp_path: Path, env: dict[str, str], closing: list[Any]) -> None:
    """With a device table that lists no production job, a full device is the job's own
    affair (or other opportunistic jobs'): its launches are not held; listed, they are."""
    oseg, oe = job(tmp_path, closing, env, "opp", segment.PRIORITY_OPPORTUNISTIC, 96 * MiB)
    pseg, pe = job(tmp_path, closing, env, "prod", segment.PRIORITY_PRODUCTION)
    dev = devseg.create_device(tmp_path, 0)
    closing.append(dev)
    list_jobs(dev, oseg)
    opp = agent(closing, {**oe, "TGS_OVERSUB_PAUSE_MS": "60000"})
    prod = agent(closing, pe)
    opp.ok("malloc", 48 * MiB)
    opp.ok("sync")
    d = prod.ok("malloc", 40 * MiB)["ptr"]
    time.sleep(0.2)
    opp.send("launch")
    assert opp.ready(5.0)  # not held (it pays its migration)
    assert opp.recv()["r"] == 0
    list_jobs(dev, oseg, pseg)  # production appears in the table
    time.sleep(0.3)  # the shim re-reads the table at most 100 ms late
    opp.send("launch")
    assert not opp.ready(1.0)
    prod.ok("free", d)
    assert opp.ready(10.0)
    assert opp.recv()["r"] == 0
