"""Garbage collection by absence, not age (gc.py, jobs.py): a job goes once its shares have
been absent from the pod resources API for the grace period and from several Lists in a row,
and never while the plugin has no whole view of the node (before its first successful List,
after a failed one, after the socket was replaced, or while its own pod is not listed).

First the logic under a fake clock, then Jobs.collect against the test kubelet's pod resources
server with a scripted controller and a fake clock, then the plugin process through a kubelet
restart as upstream's (every socket gone while it is down, then no pods listed for a while)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fake_kubelet import FakeKubelet
from k8s_helpers import Controller, PluginProc, wait_for
from tgs.k8s import response
from tgs.k8s.api import dp
from tgs.k8s.config import Config
from tgs.k8s.gc import GC_LISTS, AbsenceClock
from tgs.k8s.jobs import Jobs

pytestmark = pytest.mark.timeout(120)
GRACE = 10.0


# ---------------------------------------------------------------- the logic, fake clock
def test_a_held_job_is_never_due_and_absence_counts_from_last_seen() -> None:
    c = AbsenceClock(GRACE)
    ages = {"a": 500.0, "b": 500.0}                 # both far older than the grace
    for t in range(0, 100, 5):                      # held throughout: never due
        assert c.due({"a", "b"}, ages, float(t)) == []
    # b's pod goes at t=100 (last seen at 95): due at 95 + grace, not before
    assert [t for t in range(100, 130) if c.due({"a"}, ages, float(t))] == list(range(105, 130))
    assert "a" not in c.due({"a"}, ages, 200.0)


def test_a_job_never_seen_counts_from_its_creation_but_not_before_the_first_list() -> None:
    c = AbsenceClock(GRACE)
    # at the first List (the plugin just started) a job created long ago and never held:
    # its absence counts from this List, since nothing was watched before
    assert c.due(set(), {"old": 3600.0}, 1000.0) == []
    assert c.due(set(), {"old": 3601.0}, 1001.0) == []
    assert c.due(set(), {"old": 3609.0}, 1009.0) == []
    assert c.due(set(), {"old": 3610.0}, 1010.0) == ["old"]
    # a job made later (Allocate) that no List ever names: from its creation
    c.forget("old")
    assert c.due(set(), {"new": 4.0}, 1020.0) == []
    assert c.due(set(), {"new": 9.0}, 1025.0) == []
    assert c.due(set(), {"new": 10.0}, 1026.0) == ["new"]


def test_several_lists_in_a_row_are_needed() -> None:
    c = AbsenceClock(0.0)                           # no grace: the Lists decide
    assert [c.due(set(), {"j": 9.0}, float(t)) for t in range(GC_LISTS)] == \
        [[]] * (GC_LISTS - 1) + [["j"]]
    c = AbsenceClock(0.0)
    for t in range(10):                             # absent from one List in two: kept
        assert c.due(set() if t % 2 else {"j"}, {"j": 9.0}, float(t)) == []


def test_no_collection_until_a_list_after_the_view_came_back() -> None:
    c = AbsenceClock(GRACE)
    ages = {"a": 500.0}
    assert c.due({"a"}, ages, 0.0) == []
    c.lost()                                        # the kubelet went down at t=1
    # upstream's restarted kubelet lists no pods for a while: absence counts from its
    # first List (t=30), not from when a was last seen (t=0)
    for t in range(30, 39):
        assert c.due(set(), ages, float(t)) == []
    assert c.due({"a"}, ages, 39.0) == []           # the pod manager is filled: a is back
    assert all(c.due({"a"}, ages, float(t)) == [] for t in range(40, 100))
    c.lost()                                        # a gone during the next restart
    assert c.due(set(), ages, 200.0) == []
    assert c.due(set(), ages, 209.0) == []
    assert c.due(set(), ages, 210.0) == ["a"]


def test_held_is_recorded_without_the_controllers_list() -> None:
    c = AbsenceClock(GRACE)
    assert c.due({"a"}, {"a": 1.0}, 0.0) == []
    assert c.due({"a"}, None, 50.0) == []           # the controller did not answer
    assert c.due(set(), {"a": 60.0}, 55.0) == []    # last seen at 50, not 0
    assert c.due(set(), {"a": 65.0}, 59.0) == []
    assert c.due(set(), {"a": 70.0}, 60.0) == ["a"]
    c.due(set(), {}, 61.0)                          # unregistered elsewhere: not tracked
    assert c.jobs == {}


# ---------------------------------------------------------------- Jobs.collect, fake clock
class Ctl:
    """The controller's answers to list and unregister."""

    def __init__(self) -> None:
        self.jobs: dict[str, float] = {}            # name -> created (wall clock)
        self.removed: list[str] = []

    def __call__(self, fn: str, *args: Any, **kw: Any) -> Any:
        if fn == "list":
            return [{"name": n, "created": c} for n, c in self.jobs.items()]
        assert fn == "unregister"
        del self.jobs[args[0]]
        self.removed.append(args[0])
        return {}


def _jobs(kubelet: FakeKubelet, tmp_path: Path, **kw: Any) -> tuple[Jobs, Ctl]:
    ctl = Ctl()
    cfg = Config(plugin_dir=tmp_path, pod_resources=str(kubelet.pod_resources),
                 gc_grace=GRACE, timeout=2.0, **kw)
    return Jobs(cfg, ctl), ctl


IDS_A, IDS_B = ["GPU-a-share-0"], ["GPU-a-share-1"]
A, B = response.job_name(IDS_A), response.job_name(IDS_B)


def test_collect_restarts_the_count_when_the_socket_is_replaced(
        kubelet: FakeKubelet, tmp_path: Path) -> None:
    jobs, ctl = _jobs(kubelet, tmp_path)
    ctl.jobs = {A: 0.0, B: 0.0, "not-ours": 0.0}
    kubelet.hold("ml", "a", "main", "tgs.io/gpu", IDS_A)
    kubelet.hold("ml", "b", "main", "tgs.io/gpu", IDS_B)
    assert jobs.collect(now=0.0, wall=1000.0) == []
    kubelet.release("ml", "b")
    # the kubelet restarts between two looks: a new socket, and b is gone from it
    kubelet.stop_pod_resources()
    kubelet.start_pod_resources()
    assert jobs.collect(now=5.0, wall=1005.0) == []
    assert jobs.collect(now=14.0, wall=1014.0) == []    # 14 s after b was last seen
    assert jobs.collect(now=15.0, wall=1015.0) == [B]   # GRACE after the new server's List
    assert ctl.removed == [B] and set(ctl.jobs) == {A, "not-ours"}


def test_collect_nothing_while_lists_fail(kubelet: FakeKubelet, tmp_path: Path) -> None:
    jobs, ctl = _jobs(kubelet, tmp_path)
    ctl.jobs = {B: 0.0}
    assert jobs.collect(now=0.0, wall=1000.0) == []
    kubelet.stop_pod_resources()                    # no socket: no view
    assert jobs.collect(now=50.0, wall=1050.0) == []
    kubelet.start_pod_resources()
    assert jobs.collect(now=60.0, wall=1060.0) == []
    assert jobs.collect(now=65.0, wall=1065.0) == []
    assert jobs.collect(now=70.0, wall=1070.0) == [B]


def test_collect_waits_for_a_list_with_the_plugins_own_pod(
        kubelet: FakeKubelet, tmp_path: Path) -> None:
    jobs, ctl = _jobs(kubelet, tmp_path, own_pod=("tgs", "tgs-node-x1"))
    ctl.jobs = {B: 0.0}
    # a partial List (the pod manager still filling): its own pod is not in it
    for t in range(0, 100, 10):
        assert jobs.collect(now=float(t), wall=1000.0 + t) == []
    kubelet.add_pod("tgs", "tgs-node-x1")
    assert jobs.collect(now=100.0, wall=1100.0) == []
    assert jobs.collect(now=105.0, wall=1105.0) == []
    assert jobs.collect(now=110.0, wall=1110.0) == [B]


# ---------------------------------------------------------------- the plugin process
def _allocate(stub: Any, ids: list[str]) -> str:
    req = dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=ids)])
    return str(stub.Allocate(req, timeout=15).container_responses[0].annotations["tgs.io/job"])


def test_jobs_survive_an_upstream_kubelet_restart(kubelet: FakeKubelet, ctl: Controller,
                                                  plugin_factory) -> None:  # type: ignore[no-untyped-def]
    """Jobs older than the grace, held by running pods, through a restart of the kubelet
    that lists no pods for a while: kept (they were all removed 0.05 s after the new server
    came up, when GC went by age). A pod that went during the restart: its job goes, a grace
    after the new server's first List."""
    grace, empty = 3.0, 2.0
    plugin: PluginProc = plugin_factory("--gc-grace", str(grace), "--gc-interval", "0.1")
    stub = kubelet.plugin(kubelet.next_registration(timeout=20).endpoint)
    keep_ids, gone_ids = ["GPU-sim-0-share-0"], ["GPU-sim-1-share-0"]
    keep, gone = _allocate(stub, keep_ids), _allocate(stub, gone_ids)
    kubelet.hold("ml", "serve", "main", "tgs.io/gpu", keep_ids)
    kubelet.hold("ml", "batch", "main", "tgs.io/gpu", gone_ids)
    time.sleep(grace + 0.5)                         # both older than the grace now
    assert {keep, gone} <= set(ctl.jobs()), plugin.log.read_text()[-2000:]
    kubelet.release("ml", "batch")                  # its pod ends while the kubelet is down
    kubelet.restart_like_upstream(down=1.0, empty_for=empty)
    up = kubelet.restarted_at                       # no List of the new server before it
    lists = kubelet.lists
    assert wait_for(lambda: kubelet.lists > lists, timeout=10)    # the plugin looks again
    gone_at = None
    while time.monotonic() - up < grace + empty + 1.5:
        jobs = ctl.jobs()
        assert keep in jobs, f"held job removed: {plugin.log.read_text()[-3000:]}"
        if gone_at is None and gone not in jobs:
            gone_at = time.monotonic() - up
        time.sleep(0.1)
    assert gone_at is not None, plugin.log.read_text()[-3000:]
    assert grace <= gone_at <= grace + 2.0, gone_at
