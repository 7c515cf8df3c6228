"""The device plugin driven by a test kubelet: registration, ListAndWatch and its health
updates, Allocate and PreStartContainer for one GPU and for two, refusals, a kubelet restart and the
garbage collection of jobs whose pod is gone."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from fake_kubelet import FakeApiServer, FakeKubelet, Watch
from k8s_helpers import Controller, PluginProc, wait_for
from tgs.k8s.api import dp

pytestmark = pytest.mark.timeout(120)
GIB = 1 << 30
GPU0, GPU1 = "GPU-sim-0", "GPU-sim-1"
IDS = [f"{g}-share-{k}" for g in (GPU0, GPU1) for k in range(4)]


def _registered(kubelet: FakeKubelet, plugin: PluginProc):  # type: ignore[no-untyped-def]
    try:
        return kubelet.next_registration(timeout=20)
    except Exception:
        pytest.fail(f"the plugin did not register: {plugin.log.read_text()[-3000:]}")


def _allocate(stub, *ids: str):  # type: ignore[no-untyped-def]
    req = dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=ids)])
    return stub.Allocate(req, timeout=15)


def test_register_and_health_updates(kubelet: FakeKubelet, ctl: Controller,
                                     plugin: PluginProc) -> None:
    reg = _registered(kubelet, plugin)
    assert reg.version == "v1beta1" and reg.resource_name == "tgs.io/gpu"
    assert reg.endpoint == plugin.endpoint and (kubelet.dir / reg.endpoint).is_socket()
    assert reg.options.pre_start_required and reg.options.get_preferred_allocation_available
    stub = kubelet.plugin(reg.endpoint)
    opts = stub.GetDevicePluginOptions(dp.Empty(), timeout=5)
    assert opts.pre_start_required
    watch = Watch(stub)
    try:
        first = watch.next()
        assert first == dict.fromkeys(IDS, "Healthy")
        ctl.stop()                                   # the controller goes down
        down = watch.until(lambda d: set(d.values()) == {"Unhealthy"})
        assert sorted(down) == sorted(IDS)           # same devices, now unhealthy
        ctl.start()                                  # and comes back
        watch.until(lambda d: d == dict.fromkeys(IDS, "Healthy"))
    finally:
        watch.close()
    plugin.close()                                   # SIGTERM: a clean exit, socket removed
    assert plugin.proc.returncode == 0, plugin.log.read_text()[-2000:]
    assert not (kubelet.dir / reg.endpoint).exists()


def test_allocate_one_gpu_and_prestart_settings(kubelet: FakeKubelet, ctl: Controller,
                                                apiserver: FakeApiServer,
                                                plugin_factory) -> None:  # type: ignore[no-untyped-def]
    plugin = plugin_factory("--production-namespace", "ml")
    stub = kubelet.plugin(_registered(kubelet, plugin).endpoint)
    ids = [f"{GPU0}-share-1", f"{GPU0}-share-2"]
    (resp,) = _allocate(stub, *ids).container_responses
    job_name = resp.annotations["tgs.io/job"]
    job = ctl.jobs()[job_name]
    # registered with the controller, on that GPU, with its shares' memory (2 of 4 of 8 GiB)
    assert job["device_uuid"] == GPU0 and job["mem_quota"] == 4 * GIB
    assert job["priority"] == "opportunistic"
    mounts = {m.container_path: m for m in resp.mounts}
    seg = mounts[resp.envs["TGS_SEGMENT"]]
    assert seg.host_path == job["segment"] and not seg.read_only
    assert mounts["/etc/ld.so.preload"].read_only                # the preload, read-only
    assert mounts["/usr/local/lib/tgs/libtgs.so"].read_only
    assert "LD_PRELOAD" not in resp.envs
    assert "NVIDIA_VISIBLE_DEVICES" not in resp.envs        # simulated: its driver is mounted
    assert mounts["/usr/local/lib/tgs/sim/libcuda.so.1"].read_only
    # the same allocation asked again: the same job
    (again,) = _allocate(stub, *ids).container_responses
    assert again.annotations["tgs.io/job"] == job_name
    # PreStartContainer: the pod is found through the pod resources API, its annotations
    # through the API server, and applied before the container starts
    kubelet.hold("ml", "serve-0", "main", "tgs.io/gpu", ids)
    apiserver.pods[("ml", "serve-0")] = {"tgs.io/priority": "production", "tgs.io/weight": "3",
                                         "tgs.io/memory": "3GiB"}
    stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=ids), timeout=15)
    job = ctl.jobs()[job_name]
    assert (job["priority"], job["weight"], job["mem_quota"]) == ("production", 3, 3 * GIB)
    assert apiserver.requests == ["/api/v1/namespaces/ml/pods/serve-0"]
    # KAI-Scheduler's annotations on another pod
    kai = [f"{GPU1}-share-0"]
    (r2,) = _allocate(stub, *kai).container_responses
    kubelet.hold("ml", "train-0", "main", "tgs.io/gpu", kai)
    apiserver.pods[("ml", "train-0")] = {"gpu-fraction": "0.25"}
    stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=kai), timeout=15)
    assert ctl.jobs()[r2.annotations["tgs.io/job"]]["mem_quota"] == 2 * GIB
    # bad annotations: the container is not started, the reason is said
    for bad, word in (({"tgs.io/weight": "0"}, "tgs.io/weight"),
                      ({"tgs.io/memory": "3GiB"}, "shares")):        # 1 share: 2 GiB
        apiserver.pods[("ml", "train-0")] = bad
        with pytest.raises(grpc.RpcError) as err:
            stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=kai), timeout=15)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert word in err.value.details()
    # production is reserved to the namespaces the plugin was given
    other = [f"{GPU1}-share-1"]
    _allocate(stub, *other)
    kubelet.hold("dev", "mine", "main", "tgs.io/gpu", other)
    apiserver.pods[("dev", "mine")] = {"tgs.io/priority": "production"}
    with pytest.raises(grpc.RpcError) as err:
        stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=other), timeout=15)
    assert "namespace dev may not run production" in err.value.details()


def test_allocate_refusals_and_preferred(kubelet: FakeKubelet, ctl: Controller,
                                         plugin: PluginProc) -> None:
    stub = kubelet.plugin(_registered(kubelet, plugin).endpoint)
    before = set(ctl.jobs())
    # a GPU this node does not have: refused, said clearly, nothing registered
    with pytest.raises(grpc.RpcError) as err:
        _allocate(stub, "GPU-not-here-share-0")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert set(ctl.jobs()) == before
    # a pod whose second container fails: the first one's new job is undone, a job that was
    # there before (the same shares allocated earlier) is kept
    kept = _allocate(stub, f"{GPU0}-share-1").container_responses[0].annotations["tgs.io/job"]
    bad = dp.ContainerAllocateRequest(devices_ids=[f"{GPU0}-share-0", "GPU-gone-share-0"])
    for first in ([f"{GPU0}-share-1"], [f"{GPU1}-share-1"]):
        req = dp.AllocateRequest(container_requests=[
            dp.ContainerAllocateRequest(devices_ids=first), bad])
        with pytest.raises(grpc.RpcError):
            stub.Allocate(req, timeout=15)
    assert set(ctl.jobs()) == before | {kept}
    # the preferred allocation keeps a container's shares on one GPU
    req = dp.PreferredAllocationRequest(container_requests=[
        dp.ContainerPreferredAllocationRequest(
            available_deviceIDs=[f"{GPU0}-share-0", f"{GPU1}-share-0", f"{GPU1}-share-3",
                                 f"{GPU1}-share-2"], allocation_size=2)])
    (pref,) = stub.GetPreferredAllocation(req, timeout=5).container_responses
    assert list(pref.deviceIDs) == [f"{GPU1}-share-0", f"{GPU1}-share-2"]


def test_allocate_two_gpus_registers_one_job_over_both(
        kubelet: FakeKubelet, ctl: Controller, apiserver: FakeApiServer,
        plugin: PluginProc) -> None:
    """Shares of two GPUs (listed in any order): one job over both GPUs in the node's order,
    a part per GPU with its files mounted, CUDA_VISIBLE_DEVICES by UUID, the quota per GPU
    from the GPU where the container holds the fewest shares."""
    stub = kubelet.plugin(_registered(kubelet, plugin).endpoint)
    ids = [f"{GPU1}-share-2", f"{GPU0}-share-0", f"{GPU1}-share-3"]
    (resp,) = _allocate(stub, *ids).container_responses
    name = resp.annotations["tgs.io/job"]
    job = ctl.jobs()[name]
    assert [d["device_uuid"] for d in job["devices"]] == [GPU0, GPU1]
    assert [d["name"] for d in job["devices"]] == [f"{name}@0", f"{name}@1"]
    assert job["mem_quota"] == 2 * GIB                   # 1 of 4 shares of GPU0's 8 GiB
    env = resp.envs
    mounts = {m.container_path: m for m in resp.mounts}
    parts = env["TGS_PARTS"].split(";")
    assert parts == [f"/run/tgs/seg/{name}@{k}.seg" for k in range(2)]
    for k, d in enumerate(job["devices"]):
        seg = mounts[parts[k]]
        assert seg.host_path == d["segment"] and not seg.read_only
        assert mounts[f"/run/tgs/seg/{name}@{k}.ctl"].read_only
        assert not mounts[f"/run/tgs/own/{name}@{k}.pub"].read_only
        assert mounts[f"/run/tgs/seg/device-{d['device']}.seg"].read_only
    assert env["TGS_SEGMENT"] == parts[0] and env["TGS_PUB"] == f"/run/tgs/own/{name}@0.pub"
    assert "TGS_CTL" not in env and "TGS_DEVICE_SEG" not in env
    # the simulator's own UUIDs (what cuDeviceGetUuid says), in the job's order
    cuda = [d["cuda_uuid"] for d in job["devices"]]
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(cuda) and all(
        u.startswith("GPU-") and u not in (GPU0, GPU1) for u in cuda)
    # asked again (the kubelet retries): the same job; PreStartContainer sets it over both
    (again,) = _allocate(stub, *reversed(ids)).container_responses
    assert again.annotations["tgs.io/job"] == name
    kubelet.hold("ml", "ddp-0", "main", "tgs.io/gpu", ids)
    apiserver.pods[("ml", "ddp-0")] = {"tgs.io/weight": "4", "tgs.io/memory": "1GiB"}
    stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=ids), timeout=15)
    job = ctl.jobs()[name]
    assert (job["weight"], job["mem_quota"], len(job["devices"])) == (4, GIB, 2)


def test_kubelet_restart_registers_again(kubelet: FakeKubelet, ctl: Controller,
                                         plugin: PluginProc) -> None:
    _registered(kubelet, plugin)
    kubelet.stop()
    kubelet.restart()                    # every socket removed, kubelet.sock created anew
    reg = _registered(kubelet, plugin)
    assert reg.resource_name == "tgs.io/gpu"
    stub = kubelet.plugin(reg.endpoint)  # the plugin serves again on a new socket
    watch = Watch(stub, wait_for_ready=True)  # once it has made it again
    try:
        assert watch.next() == dict.fromkeys(IDS, "Healthy")
    finally:
        watch.close()
    assert "registered tgs.io/gpu" in plugin.log.read_text()


def test_waits_for_the_controller_before_registering(kubelet: FakeKubelet, ctl: Controller,
                                                     plugin_factory) -> None:  # type: ignore[no-untyped-def]
    ctl.stop()
    plugin = plugin_factory()                        # nothing to advertise yet
    assert not wait_for(lambda: kubelet.attempts, timeout=2)
    assert plugin.proc.poll() is None
    ctl.start()
    stub = kubelet.plugin(_registered(kubelet, plugin).endpoint)
    watch = Watch(stub)
    try:
        assert watch.next() == dict.fromkeys(IDS, "Healthy")
    finally:
        watch.close()


def test_refused_registration_is_retried_quietly(kubelet: FakeKubelet, ctl: Controller,
                                                 plugin_factory) -> None:  # type: ignore[no-untyped-def]
    kubelet.reject = True
    plugin = plugin_factory()
    assert wait_for(lambda: kubelet.attempts >= 4, timeout=20), plugin.log.read_text()
    warned = [ln for ln in plugin.log.read_text().splitlines()
              if "WARNING registration with the kubelet failed" in ln]
    assert len(warned) == 1, warned                  # said once, retried in silence
    kubelet.reject = False
    assert _registered(kubelet, plugin).resource_name == "tgs.io/gpu"


def test_jobs_of_gone_pods_are_removed(kubelet: FakeKubelet, ctl: Controller, k8s_root: Path,
                                       plugin_factory) -> None:  # type: ignore[no-untyped-def]
    # a grace of a few seconds: the kubelet records an allocation just after Allocate
    cdi = k8s_root / "cdi"
    plugin = plugin_factory("--gc-grace", "3", "--gc-interval", "0.2", "--cdi-dir", str(cdi))
    stub = kubelet.plugin(_registered(kubelet, plugin).endpoint)
    held, gone = [f"{GPU0}-share-0"], [f"{GPU0}-share-3"]
    keep = _allocate(stub, *held).container_responses[0].annotations["tgs.io/job"]
    kubelet.hold("ml", "a", "main", "tgs.io/gpu", held)
    drop = _allocate(stub, *gone).container_responses[0].annotations["tgs.io/job"]
    with ctl.client() as c:
        c.register("not-ours")                       # a job the plugin did not make
    assert drop in ctl.jobs()                        # within its grace
    assert wait_for(lambda: drop not in ctl.jobs(), timeout=20), plugin.log.read_text()
    jobs = ctl.jobs()
    assert keep in jobs and "not-ours" in jobs
    assert sorted(p.name for p in cdi.iterdir()) == [f"tgs.io-gpu-{keep}.json"]


def test_node_labelled_with_idle_time(kubelet: FakeKubelet, ctl: Controller,
                                      apiserver: FakeApiServer,
                                      plugin_factory) -> None:  # type: ignore[no-untyped-def]
    plugin = plugin_factory("--node-name", "gpu-node-1", "--label-interval", "0")
    _registered(kubelet, plugin)
    # no jobs on the simulated GPUs yet: all of their time is free
    assert wait_for(lambda: apiserver.node_patches, timeout=15), plugin.log.read_text()
    assert apiserver.node_patches[0] == (
        "gpu-node-1", {"metadata": {"labels": {"tgs.io/gpu-idle-pct": "100"}}})


def test_real_gpu_handed_over_by_uuid(kubelet: FakeKubelet, ctl: Controller,
                                      plugin_factory) -> None:  # type: ignore[no-untyped-def]
    # as on a real node: no simulated driver; the NVIDIA runtime gets the GPU's UUID
    plugin = plugin_factory("--no-sim")
    stub = kubelet.plugin(_registered(kubelet, plugin).endpoint)
    (resp,) = _allocate(stub, f"{GPU1}-share-0").container_responses
    assert resp.envs["NVIDIA_VISIBLE_DEVICES"] == GPU1
    assert not [m for m in resp.mounts if "/sim/" in m.container_path]
