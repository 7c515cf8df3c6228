"""The gate's policy values reach the shims through the .ctl: a new job's file holds the
contract's defaults, and the control loop writes its policy's values (and again after a change)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ctl_helpers import DEVICES
from tgs.controller import protocol as P
from tgs.controller.loop import ControlLoop
from tgs.controller.policy import POLICIES, make_policy
from tgs.controller.policy.adaptive import INTERFERENCE
from tgs.controller.registry import Registry
from tgs.controller.segments import SegmentFactory
from tgs.controller.state import StateStore
from tgs.intercept.control import GatePolicy, ctl_path, open_control
from tgs.intercept.header import const


def test_defaults_are_the_contracts() -> None:
    g = GatePolicy()
    assert (g.interference_ppm, g.wait_step_ns, g.fit_step_ns) == (
        const("TGS_INTERFERENCE_PPM"), const("TGS_WAIT_STEP_NS"), const("TGS_FIT_STEP_NS"))
    assert INTERFERENCE == g.interference == 0.03
    for name in POLICIES:
        assert make_policy(name, 0.3).gate_policy == g, name


@pytest.mark.parametrize("bad", [dict(interference_ppm=0), dict(interference_ppm=1_000_001),
                                 dict(wait_step_ns=999), dict(fit_step_ns=10_000_001)])
def test_values_out_of_range_are_refused(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        GatePolicy(**bad)


def test_the_loop_writes_its_policys_values(tmp_path: Path) -> None:
    segs = tmp_path / "segs"
    reg = Registry(StateStore(tmp_path / "state"), DEVICES, segs, SegmentFactory(segs))
    reg.register(P.Register(id="1", name="opp", priority="opportunistic"))
    ctl = open_control(ctl_path(segs / "opp.seg"), readonly=True)
    try:
        assert ctl.gate_policy == GatePolicy()                 # at creation
        policy = make_policy("adaptive", 0.3)
        policy.gate_policy = GatePolicy(interference_ppm=50_000, wait_step_ns=20_000,
                                        fit_step_ns=30_000)
        loop = ControlLoop(reg, policy, {}, 0.05)
        loop.step(100.0)
        assert ctl.gate_policy == policy.gate_policy           # its first period
        seq = ctl.header.control_seq
        loop.step(100.05)
        assert ctl.header.control_seq == seq                   # written once, not every period
        policy.gate_policy = GatePolicy(interference_ppm=10_000)
        loop.step(100.1)
        assert ctl.gate_policy == policy.gate_policy           # and when they change
    finally:
        ctl.close()
        reg.close()
