"""Only the share IDs the plugin advertised get as far as a job: IDs past the share count,
non-ASCII digits, leading zeros, unknown GPUs, duplicates and more IDs than there are shares
fail Allocate, GetPreferredAllocation and PreStartContainer with INVALID_ARGUMENT and a
one-line reason, and register nothing, also when only one container of a request is bad.

In process with a recording controller (no register call at all may happen), then through
the test kubelet against the plugin process and a real controller."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest
from fake_kubelet import FakeKubelet
from k8s_helpers import Controller, PluginProc
from tgs.k8s.api import dp
from tgs.k8s.config import Config
from tgs.k8s.plugin import Plugin

pytestmark = pytest.mark.timeout(120)
GPU0, GPU1 = "GPU-sim-0", "GPU-sim-1"
OK = f"{GPU0}-share-1"

# (IDs of one container request, a word of the reason)
BAD: list[tuple[list[str], str]] = [
    ([f"{GPU0}-share-999999999999"], "not advertised"),
    ([f"{GPU0}-share-4"], "not advertised"),                      # 4 shares: 0-3
    ([f"{GPU0}-share-01"], "not advertised"),                     # never advertised so
    ([f"{GPU0}-share-\u0661"], "not a TGS share ID"),             # Arabic-Indic one
    ([f"{GPU0}-share-\uff11"], "not a TGS share ID"),             # fullwidth one
    (["GPU-sim-\u0660-share-0"], "not a TGS share ID"),          # non-ASCII UUID
    ([f"{GPU0}-share--1"], "not a TGS share ID"),
    (["GPU-not-here-share-0"], "not on this node"),
    ([f"{GPU0}-share-0", f"{GPU0}-share-1\n"], "not a TGS share ID"),
    ([f"{GPU0}-share-" + "1" * 5000], "not a TGS share ID"),      # long (int() refuses it)
    ([f"{GPU0}-share-{k}" for k in range(10_000)], "advertises 8 shares"),
    ([OK] * 50, "50 times"),
    ([OK, f"{GPU0}-share-2", OK], "2 times"),
    ([], "no device IDs"),
]


class Ctx:
    """A servicer context whose abort raises, as grpc's does."""

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class Recording(Plugin):
    """Two GPUs of 4 shares; every controller call recorded (and refused: none is due)."""

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        self.calls: list[str] = []

    def _status(self) -> dict[str, Any]:
        return {"devices": [{"index": i, "uuid": u, "mem_total": 1 << 33, "kind": "sim"}
                            for i, u in enumerate((GPU0, GPU1))]}

    def _call(self, fn: str, *args: Any, **kw: Any) -> Any:
        self.calls.append(fn)
        raise AssertionError(f"controller call {fn} for a refused request")


def _one_line(details: str) -> None:
    assert "\n" not in details and len(details) < 300 and details.isascii(), details


def _alloc(*containers: list[str]) -> Any:
    return dp.AllocateRequest(container_requests=[
        dp.ContainerAllocateRequest(devices_ids=ids) for ids in containers])


def _pref(avail: list[str], must: list[str], size: int) -> Any:
    return dp.PreferredAllocationRequest(container_requests=[
        dp.ContainerPreferredAllocationRequest(available_deviceIDs=avail,
                                               must_include_deviceIDs=must,
                                               allocation_size=size)])


@pytest.fixture
def rec(tmp_path: Path) -> Recording:
    p = Recording(Config(plugin_dir=tmp_path, nshares=4, pod_resources=None))
    p.poll_health()
    return p


@pytest.mark.parametrize("ids,word", BAD, ids=range(len(BAD)))
def test_allocate_and_prestart_refuse_unadvertised_ids(rec: Recording, ids: list[str],
                                                       word: str) -> None:
    for call, req in ((rec.Allocate, _alloc(ids)),
                      (rec.Allocate, _alloc([f"{GPU1}-share-0"], ids)),   # the 2nd one bad
                      (rec.Allocate, _alloc(ids, [f"{GPU1}-share-0"])),
                      (rec.PreStartContainer, dp.PreStartContainerRequest(devices_ids=ids))):
        with pytest.raises(Aborted) as err:
            call(req, Ctx())
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert word in err.value.details
        _one_line(err.value.details)
    assert rec.calls == []                          # nothing registered, nothing undone


def test_allocate_bounds_the_number_of_containers(rec: Recording) -> None:
    with pytest.raises(Aborted) as err:
        rec.Allocate(_alloc(*[[OK]] * 9), Ctx())    # 8 shares: at most 8 containers
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "9 container requests" in err.value.details
    assert rec.calls == []


@pytest.mark.parametrize("avail,must,size,word", [
    ([f"{GPU0}-share-0", f"{GPU0}-share-999999999999"], [], 1, "not advertised"),
    ([f"{GPU0}-share-0", f"{GPU0}-share-\u0661"], [], 1, "not a TGS share ID"),
    ([f"{GPU0}-share-0"] * 50, [], 1, "50 times"),
    ([f"{GPU0}-share-{k}" for k in range(10_000)], [], 1, "advertises 8 shares"),
    ([f"{GPU0}-share-0"], ["GPU-gone-share-0"], 1, "must-include"),
    ([f"{GPU0}-share-0"], [f"{GPU0}-share-1"] * 2, 2, "2 times"),
    ([f"{GPU0}-share-0", f"{GPU0}-share-1"], [], 3, "allocation_size 3"),
    ([f"{GPU0}-share-0"], [], 0, "allocation_size 0"),
    ([f"{GPU0}-share-0", f"{GPU0}-share-1"], [f"{GPU0}-share-0", f"{GPU0}-share-1"], 1,
     "allocation_size 1"),
    ([], [], 1, "no device IDs in the available IDs"),
])
def test_preferred_allocation_refuses_unadvertised_ids(rec: Recording, avail: list[str],
                                                       must: list[str], size: int,
                                                       word: str) -> None:
    with pytest.raises(Aborted) as err:
        rec.GetPreferredAllocation(_pref(avail, must, size), Ctx())
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert word in err.value.details
    _one_line(err.value.details)


def test_preferred_allocation_of_good_ids_still_answers(rec: Recording) -> None:
    (r,) = rec.GetPreferredAllocation(_pref(
        [f"{GPU0}-share-0", f"{GPU1}-share-2", f"{GPU1}-share-1"], [f"{GPU1}-share-3"], 2),
        Ctx()).container_responses
    assert list(r.deviceIDs) == [f"{GPU1}-share-3", f"{GPU1}-share-1"]


def test_refusals_through_the_kubelet(kubelet: FakeKubelet, ctl: Controller,
                                      plugin: PluginProc) -> None:
    """The same inputs over gRPC to the plugin process: INVALID_ARGUMENT, and the
    controller's jobs unchanged; then a good request is still served."""
    reg = kubelet.next_registration(timeout=20)
    stub = kubelet.plugin(reg.endpoint)
    before = set(ctl.jobs())
    for ids, word in BAD:
        for req in (_alloc(ids), _alloc([f"{GPU1}-share-0"], ids)):
            with pytest.raises(grpc.RpcError) as err:
                stub.Allocate(req, timeout=15)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
            assert word in err.value.details()
            _one_line(err.value.details())
        with pytest.raises(grpc.RpcError) as err:
            stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=ids), timeout=15)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as err:
        stub.GetPreferredAllocation(_pref([f"{GPU0}-share-7"], [], 1), timeout=15)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert set(ctl.jobs()) == before
    assert "allocated" not in plugin.log.read_text()
    (resp,) = stub.Allocate(_alloc([OK]), timeout=15).container_responses
    assert resp.annotations["tgs.io/job"] in ctl.jobs()
