"""Production's memory priority holds with the default flags.

On the simulator's 16 GiB GPU an opportunistic job started with no memory flags holds 9.5 GiB;
a production job then allocates 11 GiB: every allocation succeeds (the opportunistic job's
memory is evictable by default and goes to the host).  With --mem-fixed the opportunistic
memory is device memory, as before, and production's allocation fails there."""

from __future__ import annotations

import pytest
from tools_helpers import Ctl, Probe, probe_cmd

pytestmark = pytest.mark.timeout(120)
GIB = 1 << 30


def _hold(ctl: Ctl, probes: list[Probe], *flags: str) -> Probe:
    opp = Probe(probe_cmd("--name", "opp", *flags), ctl.env)
    probes.append(opp)
    for _ in range(19):                              # 19 x 0.5 GiB = 9.5 GiB
        assert opp.ask(f"alloc {GIB // 2}") == "alloc 0"
    return opp


def test_production_gets_its_memory_with_default_flags(ctl: Ctl, probes: list[Probe]) -> None:
    opp = _hold(ctl, probes)
    assert ctl.jobs()["opp"]["mem_evictable"] is True
    prod = Probe(probe_cmd("--name", "prod", "--priority", "production", "--mem", "11GiB"),
                 ctl.env)
    probes.append(prod)
    for _ in range(11):
        assert prod.ask(f"alloc {GIB}") == "alloc 0"
    assert ctl.jobs()["prod"]["mem_evictable"] is False
    assert prod.close() == 0 and opp.close() == 0


def test_fixed_opportunistic_memory_is_the_former_behaviour(ctl: Ctl,
                                                            probes: list[Probe]) -> None:
    opp = _hold(ctl, probes, "--mem-fixed")
    assert ctl.jobs()["opp"]["mem_fixed"] is True
    assert ctl.jobs()["opp"]["mem_evictable"] is False
    prod = Probe(probe_cmd("--name", "prod", "--priority", "production", "--mem", "11GiB"),
                 ctl.env)
    probes.append(prod)
    codes = [prod.ask(f"alloc {GIB}") for _ in range(11)]
    assert "alloc 2" in codes                         # out of device memory before 11 GiB
    assert prod.close() == 0 and opp.close() == 0
