"""Placement signals per GPU (controller/placement.py): production duty and the time production
leaves idle, driven by a fake clock and scripted device states, then end to end through a
controller under two policies (status and the same figure in the plugin's node label)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from ctl_helpers import daemon, stop, wait_for
from tgs.controller.placement import DUTY_TAU_S, MAX_PERIOD_S, PlacementTracker
from tgs.controller.policy.base import DeviceSignals
from tgs.k8s import signals

DT = 0.05


def run(tr: PlacementTracker, seconds: float, busy: dict[int, object]) -> None:
    """seconds of periods; busy[gpu]: a bool, or a callable of the period number."""
    for k in range(round(seconds / DT)):
        devs = {}
        for i, b in busy.items():
            on = b(k) if callable(b) else b
            devs[i] = DeviceSignals(i, prod_active=1 if on else 0)
        tr.update(DT, devs)


def info(tr: PlacementTracker) -> dict[int, dict]:
    return {g.index: g.to_dict() for g in tr.info({0: "GPU-a", 1: "GPU-b"})}


def test_duty_and_idle_time_per_gpu() -> None:
    tr = PlacementTracker()
    # GPU 0: production busy 7 periods of 10 (70 % duty); GPU 1: no production at all
    run(tr, 60.0, {0: lambda k: k % 10 < 7, 1: False})
    g = info(tr)
    assert g[0]["uuid"] == "GPU-a" and g[1]["uuid"] == "GPU-b"
    assert g[0]["production_duty"] == pytest.approx(0.7, abs=0.05)
    assert g[0]["production_busy_s"] == pytest.approx(42.0, abs=0.01)
    assert g[0]["production_idle_s"] == pytest.approx(18.0, abs=0.01)
    assert g[1]["production_duty"] == 0.0
    assert g[1]["production_idle_s"] == pytest.approx(60.0, abs=0.01)
    assert g[1]["production_busy_s"] == 0.0
    assert g[0]["duty_tau_s"] == DUTY_TAU_S


def test_duty_follows_a_change_with_its_time_constant() -> None:
    tr = PlacementTracker()
    run(tr, 120.0, {0: True})
    assert info(tr)[0]["production_duty"] == pytest.approx(1.0)
    run(tr, DUTY_TAU_S, {0: False})                 # production stops: one time constant
    assert info(tr)[0]["production_duty"] == pytest.approx(math.exp(-1), abs=0.01)
    run(tr, 2 * DUTY_TAU_S, {0: False})
    assert info(tr)[0]["production_duty"] == pytest.approx(math.exp(-3), abs=0.01)
    assert info(tr)[0]["production_busy_s"] == pytest.approx(120.0, abs=0.01)


def test_a_fresh_tracker_reports_what_it_saw_not_idle() -> None:
    tr = PlacementTracker()
    run(tr, 2.0, {0: True})
    assert info(tr)[0]["production_duty"] == pytest.approx(1.0)
    run(tr, 2.0, {0: False})                        # the mean of 4 s, before tau has passed
    assert info(tr)[0]["production_duty"] == pytest.approx(0.5, abs=0.01)


def test_a_stalled_loop_counts_a_bounded_period() -> None:
    tr = PlacementTracker()
    tr.update(100.0, {0: DeviceSignals(0, prod_active=1)})
    tr.update(-1.0, {0: DeviceSignals(0, prod_active=0)})   # a clock step back: nothing
    assert info(tr)[0]["production_busy_s"] == MAX_PERIOD_S
    assert info(tr)[0]["production_idle_s"] == 0.0


def test_node_label_uses_the_controllers_duty() -> None:
    tr = PlacementTracker()
    run(tr, 60.0, {0: lambda k: k % 10 < 8, 1: lambda k: k % 10 < 4})
    status = {"devices": [{"index": 0}, {"index": 1}],
              "placement": list(info(tr).values()),
              "policy_state": {"0": {"duty": 0.0}}}   # ignored: the controller's figure wins
    assert signals.idle_pct(status) == 60              # best GPU: 1 - 0.4


# ------------------------------------------------------------------ end to end

_CLAIM = r"""
import sys, time
from tgs.intercept import ofd, segment
seg = segment.open_segment(sys.argv[1])
assert ofd.try_lock(seg.fd, segment.LOCK_SLOT_BASE + 0)
s = seg.tenant_slot(0)
s.generation, s.state = 1, segment.SLOT_ACTIVE
print("ready", flush=True)
sys.stdin.readline()
"""


@pytest.mark.timeout(90)
@pytest.mark.parametrize("policy", ["none", "adaptive"])
def test_controller_reports_placement_under_any_policy(tmp_path: Path, policy: str) -> None:
    """A production process (the test plays its shim: a claimed slot whose dev_active it
    toggles) makes GPU 0 busy; the status shows it, whatever the policy."""
    from tgs.intercept import segment as S

    with daemon(tmp_path, "--policy", policy) as d:
        c = d.client()
        seg_path = c.register("prod", priority="production")["segment"]
        holder = subprocess.Popen([sys.executable, "-c", _CLAIM, seg_path], text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
            assert wait_for(lambda: c.list()[0].get("processes") == 1)

            def gpu0() -> dict:
                return next(g for g in c.status()["placement"] if g["index"] == 0)

            with S.open_segment(seg_path) as seg:
                seg.tenant_slot(0).dev_active = 1            # busy from now on
                busy0 = gpu0()["production_busy_s"]
                assert wait_for(lambda: gpu0()["production_busy_s"] >= busy0 + 0.5)
                assert gpu0()["production_duty"] > 0.2
                idle0 = gpu0()["production_idle_s"]
                seg.tenant_slot(0).dev_active = 0            # idle
                assert wait_for(lambda: gpu0()["production_idle_s"] >= idle0 + 0.5)
                st = c.status()
            g = {p["index"]: p for p in st["placement"]}
            assert set(g) == {dv["index"] for dv in st["devices"]}
            assert 0.0 <= g[0]["production_duty"] <= 1.0
            assert g[0]["uuid"] == next(dv["uuid"] for dv in st["devices"] if dv["index"] == 0)
            # the node label is computed from this figure
            assert signals.idle_pct(st) == int(round(max(
                1 - p["production_duty"] for p in st["placement"]) * 10)) * 10
        finally:
            if holder.stdin:
                holder.stdin.close()
            stop(holder)
