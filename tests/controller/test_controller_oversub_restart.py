"""A controller restart mid-migration: the opportunistic job's pages are on the host
because production holds the device when the controller is killed; nothing is lost, the
limits (mem_total, host_pinned_max) keep working without the controller and after its
restart, and the pages come back when production frees."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import OversubAgent
from ctl_helpers import daemon
from tgs.intercept import control, simstate

pytestmark = pytest.mark.timeout(120)

MiB = 1 << 20
OOM = 2


@pytest.fixture
def agents() -> Iterator[list[Any]]:
    made: list[Any] = []
    yield made
    for a in made:
        a.close()


def test_controller_restart_mid_migration(tmp_path: Path, sim_env: dict[str, str],
                                          shim_lib: Path, agents: list[Any]) -> None:
    base = {**sim_env, "TGS_SIM_MEM": "64MiB"}
    job_env = {**base, "LD_PRELOAD": str(shim_lib), "TGS_OVERSUB_CHECK_MS": "0",
               "TGS_OVERSUB_PAUSE_MS": "0"}
    with daemon(tmp_path, env=base) as d:
        c = d.client()
        opp_seg = c.register("opp", mem_quota=64 * MiB, mem_total=96 * MiB,
                             host_pinned_max=8 * MiB)["segment"]
        prod_seg = c.register("prod", priority="production", mem_quota=48 * MiB)["segment"]
        opp = OversubAgent({**job_env, "TGS_SEGMENT": opp_seg})
        agents.append(opp)
        prod = OversubAgent({**job_env, "TGS_SEGMENT": prod_seg})
        agents.append(prod)
        m = opp.ok("malloc", 48 * MiB)["ptr"]
        opp.ok("fill", m, 48 * MiB, 0x6B)
        opp.ok("sync")
        d_ptr = prod.ok("malloc", 40 * MiB)["ptr"]  # 24 MiB of the job go to the host
        assert simstate.read_state(base["TGS_SIM_STATE"]).devices[0].managed_resident == \
            24 * MiB
        d.kill(signal.SIGKILL)  # the controller dies with the job's pages on the host
        # without it: the job works (slower), its data intact, its limits in force
        assert float(opp.ok("kernel")["ms"]) > 0.5
        assert opp.ok("check", m, 48 * MiB, 0x6B)["ok"]
        opp.ok("hostalloc", 8 * MiB)
        assert opp.ask("hostalloc", 4 * MiB)["r"] == OOM
        assert opp.ask("malloc", 64 * MiB)["r"] == OOM  # mem_total: 48 + 64 > 96
        d.start()
        jobs = {j["name"]: j for j in d.client().list()}
        assert (jobs["opp"]["mem_total"], jobs["opp"]["host_pinned_max"]) == (96 * MiB, 8 * MiB)
        ctl = control.open_control(control.ctl_path(opp_seg), readonly=True)
        try:
            assert (int(ctl.header.mem_total), int(ctl.header.host_pinned_max)) == \
                (96 * MiB, 8 * MiB)
        finally:
            ctl.close()
        prod.ok("free", d_ptr)
        opp.ok("sync")  # room again: prefetched back
        opp.ok("sync")
        assert simstate.read_state(base["TGS_SIM_STATE"]).devices[0].managed_resident == \
            48 * MiB
        assert float(opp.ok("kernel")["ms"]) < 0.01
        assert opp.ok("check", m, 48 * MiB, 0x6B)["ok"]
