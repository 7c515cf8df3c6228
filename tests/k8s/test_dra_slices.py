"""The ResourceSlice the DRA driver publishes: its content (the controller's GPUs as share
devices with their attributes, memory capacity and placement signal, valid for the
resource.k8s.io/v1 schema), kept on the API server (no write while nothing changes, repaired
when deleted or altered, republished when the figures move, split past 128 devices) and
deleted at shutdown. The driver as a process against a controller on two simulated GPUs, and
the publisher in process with scripted controller figures."""

from __future__ import annotations

import time

import pytest
from dra_helpers import DRIVER, NODE, DraKubelet, FakeResourceApi
from k8s_helpers import Controller, wait_for
from tgs.k8s.dra import slices
from tgs.k8s.dra.kube import Kube
from tgs.k8s.podinfo import ApiServer
from tgs.k8s.shares import Gpu

pytestmark = pytest.mark.timeout(120)
GIB = 1 << 30
SCHEMAS = ["1.34", "1.35", "1.36", "1.37"]     # resource.k8s.io/v1 (docs/kubernetes.md)


def _validate(obj: dict) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    for version in SCHEMAS:
        kv.validate(obj, version, strict=True)


def test_published_slice(dra_kubelet: DraKubelet, ctl: Controller, dra_api: FakeResourceApi,
                         dra_factory) -> None:  # type: ignore[no-untyped-def]
    proc = dra_factory()
    assert wait_for(lambda: dra_api.node_slices(), timeout=30, step=0.1), proc.tail()
    (s,) = dra_api.node_slices()
    assert s["metadata"]["name"] == f"{NODE}-{DRIVER}-0"
    spec = s["spec"]
    assert (spec["driver"], spec["nodeName"]) == (DRIVER, NODE)
    assert spec["pool"] == {"name": NODE, "generation": 1, "resourceSliceCount": 1}
    devs = {d["name"]: d for d in spec["devices"]}
    assert list(devs) == [f"gpu-sim-{g}-share-{k}" for g in (0, 1) for k in range(4)]
    d = devs["gpu-sim-1-share-2"]
    assert d["capacity"] == {"memory": {"value": "2Gi"}}          # 8 GiB / 4 shares
    a = d["attributes"]
    assert a["uuid"] == {"string": "GPU-sim-1"} and a["index"] == {"int": 1}
    assert a["share"] == {"int": 2} and a["shares"] == {"int": 4}
    assert a["productName"] == {"string": "TGS simulated GPU"}
    # the placement signal: no production job, the GPU all idle
    assert a["productionDutyPct"] == {"int": 0} and a["idlePct"] == {"int": 100}
    _validate({k: v for k, v in s.items() if k != "status"})
    # nothing changes: nothing written (the driver looks every 0.5 s)
    writes = dra_api.writes()
    time.sleep(2.0)
    assert dra_api.writes() == writes
    # deleted behind its back: published again; altered: repaired, a new generation
    with dra_api.lock:
        dra_api.slices.clear()
    assert wait_for(lambda: dra_api.node_slices(), timeout=20, step=0.1), proc.tail()
    with dra_api.lock:
        dra_api.slices[f"{NODE}-{DRIVER}-0"]["spec"]["devices"].pop()
    assert wait_for(lambda: len(dra_api.node_slices()[0]["spec"]["devices"]) == 8,
                    timeout=20, step=0.1), proc.tail()
    assert dra_api.node_slices()[0]["spec"]["pool"]["generation"] >= 2
    # a slice of another node is not the driver's
    with dra_api.lock:
        other = {**dra_api.node_slices()[0]}
        other["metadata"] = {"name": "node-2-gpu.tgs.io-0", "resourceVersion": "1"}
        other["spec"] = {**other["spec"], "nodeName": "node-2"}
        dra_api.slices["node-2-gpu.tgs.io-0"] = other
    proc.close()                                      # SIGTERM: its slice is deleted
    assert proc.proc.returncode == 0, proc.tail()
    assert dra_api.node_slices() == []
    assert list(dra_api.slices) == ["node-2-gpu.tgs.io-0"]


def _status(duties: dict[int, float], gpus: list[Gpu]) -> dict:
    return {"devices": [{"index": g.index, "uuid": g.uuid, "mem_total": g.mem_total,
                         "name": "NVIDIA H100 80GB HBM3", "kind": "nvml"} for g in gpus],
            "placement": [{"index": i, "production_duty": d} for i, d in duties.items()]}


def test_publisher_republishes_when_figures_move(dra_api: FakeResourceApi) -> None:
    pub = slices.Publisher(Kube(ApiServer(dra_api.url)), NODE, DRIVER, interval=30.0)
    gpus = [Gpu(0, "GPU-8a1e3c55-0d2b-4f1e-9a77-3c1d2e4f5a6b", 80 * GIB)]
    t = 1000.0
    assert pub.update(gpus, 4, _status({0: 0.0}, gpus), now=t)
    (s,) = dra_api.node_slices()
    dev = s["spec"]["devices"][0]
    assert dev["name"] == "gpu-8a1e3c55-0d2b-4f1e-9a77-3c1d2e4f5a6b-share-0"
    assert dev["capacity"]["memory"]["value"] == "20Gi"
    assert dev["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    _validate({k: v for k, v in s.items() if k != "status"})
    # a small move (same step of 10 %), or a step before the interval: nothing written
    assert not pub.update(gpus, 4, _status({0: 0.04}, gpus), now=t + 31)
    assert not pub.update(gpus, 4, _status({0: 0.5}, gpus), now=t + 40)
    assert pub.update(gpus, 4, _status({0: 0.5}, gpus), now=t + 62)
    (s,) = dra_api.node_slices()
    assert s["spec"]["pool"]["generation"] == 2
    assert s["spec"]["devices"][0]["attributes"]["idlePct"] == {"int": 50}
    assert s["spec"]["devices"][0]["attributes"]["productionDutyPct"] == {"int": 50}
    # a GPU that comes: at once, whatever the interval
    gpus2 = [*gpus, Gpu(1, "GPU-11111111-2222-3333-4444-555555555555", 80 * GIB)]
    assert pub.update(gpus2, 4, _status({0: 0.5}, gpus2), now=t + 63)
    (s,) = dra_api.node_slices()
    assert len(s["spec"]["devices"]) == 8 and s["spec"]["pool"]["generation"] == 3
    # the second GPU has no duty figure yet: idle, as for the device plugin's node label
    assert s["spec"]["devices"][4]["attributes"]["idlePct"] == {"int": 100}
    # a controller without any placement figure: no signal attributes (not a zero)
    assert pub.update(gpus2, 4, {"devices": _status({}, gpus2)["devices"]}, now=t + 100)
    (s,) = dra_api.node_slices()
    assert "idlePct" not in s["spec"]["devices"][0]["attributes"]
    pub.delete()
    assert dra_api.node_slices() == []


def test_publisher_splits_past_128_devices_and_survives_conflicts(
        dra_api: FakeResourceApi) -> None:
    pub = slices.Publisher(Kube(ApiServer(dra_api.url)), NODE, DRIVER, interval=5.0)
    gpus = [Gpu(i, f"GPU-{i}", 24 * GIB) for i in range(3)]
    assert pub.update(gpus, 64, _status({}, gpus), now=0.0)       # 192 devices
    got = sorted(dra_api.node_slices(), key=lambda s: s["metadata"]["name"])
    assert [len(s["spec"]["devices"]) for s in got] == [128, 64]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in got} == {2}
    assert {s["spec"]["pool"]["generation"] for s in got} == {1}
    for s in got:
        _validate(s)
    # another writer changed one slice meanwhile (a stale resourceVersion would be a 409):
    # the publisher reads before it writes, so its update goes through
    with dra_api.lock:
        dra_api.slices[f"{NODE}-{DRIVER}-1"]["metadata"]["resourceVersion"] = "999"
    assert pub.update(gpus[:1], 64, _status({}, gpus[:1]), now=1.0)
    (s,) = dra_api.node_slices()                                  # the extra slice deleted
    assert s["spec"]["pool"] == {"name": NODE, "generation": 2, "resourceSliceCount": 1}
    # the API server away: no exception, tried again after a pause
    dra_api.close()
    assert not pub.update(gpus, 64, _status({}, gpus), now=2.0)


def test_names_and_quantities() -> None:
    assert slices.quantity(8 * GIB) == "8Gi" and slices.quantity(1536 << 20) == "1536Mi"
    assert slices.quantity(12345) == "12345" and slices.quantity(0) == "0"
    for n in (8 * GIB, 1536 << 20, 12345, 85520809984 // 4):
        assert slices.parse_quantity(slices.quantity(n)) == n
    assert slices.parse_quantity("2G") == 2 * 10**9 and slices.parse_quantity("x") is None
    long = Gpu(3, "GPU-" + "a" * 70, GIB)
    assert slices.device_name(long, 15, 16) == "gpu-3-share-15"          # too long: the index
    odd = Gpu(0, "MIG-GPU_1/2", GIB)
    assert slices.device_name(odd, 0, 4) == "mig-gpu-1-2-share-0"
    assert slices.device_map([odd], 2) == {"mig-gpu-1-2-share-0": (odd, 0),
                                           "mig-gpu-1-2-share-1": (odd, 1)}
