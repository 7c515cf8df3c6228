"""The DRA driver as a process, driven by a test kubelet (registration through the plugin
watcher's socket, then NodePrepareResources / NodeUnprepareResources on the DRA socket) with
ResourceClaims on a fake API server and a controller on two simulated GPUs (8 GiB each, 4
share devices per GPU: 2 GiB a share)."""

from __future__ import annotations

import json
import signal

import pytest
from dra_helpers import (
    DRIVER,
    NODE,
    DraKubelet,
    DraPluginProc,
    FakeResourceApi,
    claim,
    devices,
    prepare,
    unprepare,
)
from k8s_helpers import Controller, wait_for
from tgs.k8s.dra.plan import job_name

pytestmark = pytest.mark.timeout(150)
GIB = 1 << 30
G0, G1 = "gpu-sim-0", "gpu-sim-1"          # the device names' GPU part (GPU-sim-0 lowercased)


def _client(kubelet: DraKubelet, proc: DraPluginProc, version: str = "v1beta1"):  # type: ignore[no-untyped-def]
    info = kubelet.register(proc)
    return kubelet.dra(info.endpoint, version)


def _cdi(proc: DraPluginProc, job: str) -> dict:
    return json.loads((proc.cdi_dir / f"tgs.io-gpu-{job}.json").read_text())


def test_registration_through_the_plugin_watcher(dra_kubelet: DraKubelet, ctl: Controller,
                                                 dra_factory) -> None:  # type: ignore[no-untyped-def]
    proc = dra_factory()
    info = dra_kubelet.register(proc)
    assert info.type == "DRAPlugin" and info.name == DRIVER
    assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
    assert dra_kubelet.chosen == "v1.DRAPlugin"        # the order decides (upstream's rule)
    assert info.endpoint == proc.endpoint
    assert wait_for(lambda: "registered with the kubelet" in proc.log.read_text(), timeout=10)
    # both API versions answer on the endpoint (an empty call prepares nothing)
    for version in ("v1", "v1beta1"):
        assert prepare(dra_kubelet.dra(info.endpoint, version)) == {}
    # its sockets removed (a cleaned-up directory): served again, and registered again
    dra_kubelet.socket().unlink()
    (proc.plugin_dir / "dra.sock").unlink()
    assert wait_for(lambda: dra_kubelet.socket().exists() and
                    (proc.plugin_dir / "dra.sock").exists(), timeout=10), proc.tail()
    info = dra_kubelet.register(proc)
    assert prepare(dra_kubelet.dra(info.endpoint, "v1")) == {}
    # a refused registration is said
    dra_kubelet.register(proc, accept=False)
    assert wait_for(lambda: "refused the registration" in proc.log.read_text(), timeout=10)
    proc.close()                                   # SIGTERM: a clean exit, sockets removed
    assert proc.proc.returncode == 0, proc.tail()
    assert not dra_kubelet.socket().exists() and not (proc.plugin_dir / "dra.sock").exists()


def test_prepare_registers_the_job_and_unprepare_removes_it(
        dra_kubelet: DraKubelet, ctl: Controller, dra_api: FakeResourceApi,
        dra_factory) -> None:  # type: ignore[no-untyped-def]
    proc = dra_factory()
    client = _client(dra_kubelet, proc)
    uid = "0b5c7ae2-1d4f-4c8e-9d55-000000000001"
    dra_api.claims[("ml", "serve-gpu")] = claim(
        "ml", "serve-gpu", uid, [("gpu", f"{G0}-share-0"), ("gpu", f"{G0}-share-1")],
        [("FromClass", [], {"priority": "opportunistic", "weight": 5}),
         ("FromClaim", ["gpu"], {"apiVersion": "gpu.tgs.io/v1", "kind": "GpuConfig",
                                 "priority": "production", "memory": "3GiB"})])
    ref = ("ml", uid, "serve-gpu")
    answer = prepare(client, ref)[uid]
    assert answer.error == "", answer.error
    job = job_name(uid, "gpu")
    cdi_id = f"tgs.io/gpu={job}"
    assert devices(answer) == [(["gpu"], NODE, f"{G0}-share-0", [cdi_id]),
                               (["gpu"], NODE, f"{G0}-share-1", [])]
    # the controller has the job: the claim's priority and memory, the class's weight
    j = ctl.jobs()[job]
    assert (j["priority"], j["weight"], j["mem_quota"], j["device_uuid"]) == (
        "production", 5, 3 * GIB, "GPU-sim-0")
    # its CDI spec: the job's segment and the shim, with the simulated driver
    spec = _cdi(proc, job)
    assert spec["kind"] == "tgs.io/gpu" and spec["devices"][0]["name"] == job
    edits = spec["devices"][0]["containerEdits"]
    mounts = {m["containerPath"]: m["hostPath"] for m in edits["mounts"]}
    assert j["segment"] in mounts.values()
    assert "/usr/local/lib/tgs/libtgs.so" in mounts
    assert any(e.startswith("TGS_SEGMENT=") for e in edits["env"])
    # the same claim again, in either API version: the same answer, the same one job
    for version in ("v1beta1", "v1"):
        again = prepare(dra_kubelet.dra(proc.endpoint, version), ref)[uid]
        assert devices(again) == devices(answer) and again.error == ""
    assert [n for n in ctl.jobs() if n.startswith("dra-")] == [job]
    # the API server was asked once: the second answer came from the checkpoint
    assert dra_api.requests.count(("GET", "/apis/resource.k8s.io/v1/namespaces/ml/"
                                          "resourceclaims/serve-gpu")) == 1
    # unprepare: the job and its CDI spec are gone; again, and an unknown claim: success
    assert unprepare(client, ref) == {uid: ""}
    assert job not in ctl.jobs()
    assert not (proc.cdi_dir / f"tgs.io-gpu-{job}.json").exists()
    assert unprepare(client, ref, ("ml", "no-such-uid", "gone")) == {uid: "", "no-such-uid": ""}


def test_bad_claims_rejected_one_by_one_nothing_registered(
        dra_kubelet: DraKubelet, ctl: Controller, dra_api: FakeResourceApi,
        dra_factory) -> None:  # type: ignore[no-untyped-def]
    proc = dra_factory("--production-namespace", "serving")
    client = _client(dra_kubelet, proc, "v1")
    before = set(ctl.jobs())
    bad = {
        "unknown-key": ({"priority": "production", "cores": 4}, "unknown key \"cores\""),
        "weight-0": ({"weight": 0}, "weight 0 is not an integer from 1 to 1000"),
        "weight-str": ({"weight": "3"}, "weight \"3\" is not an integer"),
        "bad-size": ({"memory": "3XB"}, "memory:"),
        "bad-prio": ({"priority": "high"}, "priority \"high\" is not one of"),
        "above-shares": ({"memory": "3GiB"}, "above the 2147483648 bytes of the 1 of 4 shares"),
        "unlimited": ({"memory": "unlimited"}, "memory unlimited is above"),
        "not-object": (["production"], "parameters must be a JSON object"),
        "wrong-api": ({"apiVersion": "gpu.tgs.io/v9"}, "this driver reads gpu.tgs.io/v1"),
        "prod-ns": ({"priority": "production"}, "namespace 'ml' may not run production"),
    }
    refs = []
    for i, (name, (params, _)) in enumerate(bad.items()):
        uid = f"bad-{i}"
        dra_api.claims[("ml", name)] = claim("ml", name, uid, [("gpu", f"{G1}-share-{i % 4}")],
                                             [("FromClaim", [], params)])
        refs.append(("ml", uid, name))
    # not configs, but claims this node cannot prepare either
    dra_api.claims[("ml", "other-pool")] = claim("ml", "other-pool", "bad-pool",
                                                 [("gpu", f"{G0}-share-0")], node="node-2")
    dra_api.claims[("ml", "unknown-dev")] = claim("ml", "unknown-dev", "bad-dev",
                                                  [("gpu", f"{G0}-share-7")])
    dra_api.claims[("ml", "recreated")] = claim("ml", "recreated", "new-uid",
                                                [("gpu", f"{G0}-share-0")])
    refs += [("ml", "bad-pool", "other-pool"), ("ml", "bad-dev", "unknown-dev"),
             ("ml", "old-uid", "recreated"), ("ml", "bad-missing", "not-there")]
    # one good claim in the same call, and one of another driver only (nothing to do)
    dra_api.claims[("ml", "good")] = claim("ml", "good", "good-1", [("gpu", f"{G0}-share-3")],
                                           [("FromClaim", [], {"weight": 7, "memory": "1GiB"})])
    dra_api.claims[("ml", "foreign")] = claim("ml", "foreign", "foreign-1",
                                              [("nic", "eth0")], driver="net.example.com")
    answers = prepare(client, *refs, ("ml", "good-1", "good"), ("ml", "foreign-1", "foreign"))
    for i, (name, (_, want)) in enumerate(bad.items()):
        a = answers[f"bad-{i}"]
        assert want in a.error and not a.devices, (name, a.error)
    assert "pool node-2, not this node's (node-1)" in answers["bad-pool"].error
    assert f"device {G0}-share-7 is not published by this node" in answers["bad-dev"].error
    assert "has uid new-uid, not old-uid" in answers["old-uid"].error
    assert "404" in answers["bad-missing"].error
    assert answers["good-1"].error == "" and len(answers["good-1"].devices) == 1
    assert answers["foreign-1"].error == "" and not answers["foreign-1"].devices
    good = job_name("good-1", "gpu")
    assert set(ctl.jobs()) == before | {good}              # nothing for the bad claims
    j = ctl.jobs()[good]
    assert (j["priority"], j["weight"], j["mem_quota"]) == ("opportunistic", 7, GIB)
    assert sorted(p.name for p in proc.cdi_dir.iterdir()) == [f"tgs.io-gpu-{good}.json"]
    # a bad claim fixed (the kubelet retries): prepared
    dra_api.claims[("ml", "weight-0")] = claim("ml", "weight-0", "bad-1",
                                               [("gpu", f"{G1}-share-1")],
                                               [("FromClaim", [], {"weight": 2})])
    assert prepare(client, ("ml", "bad-1", "weight-0"))["bad-1"].error == ""
    assert ctl.jobs()[job_name("bad-1", "gpu")]["weight"] == 2


def test_claims_over_two_gpus_and_with_two_requests(
        dra_kubelet: DraKubelet, ctl: Controller, dra_api: FakeResourceApi,
        dra_factory) -> None:  # type: ignore[no-untyped-def]
    """Shares of both GPUs in one request: one job over both GPUs (the memory per GPU from
    the GPU with the fewest shares); two requests: a job each, with its own config."""
    proc = dra_factory()
    client = _client(dra_kubelet, proc)
    dra_api.claims[("ml", "ddp")] = claim(
        "ml", "ddp", "uid-ddp", [("gpus", f"{G1}-share-0"), ("gpus", f"{G0}-share-0"),
                                 ("gpus", f"{G1}-share-1")])
    dra_api.claims[("ml", "pair")] = claim(
        "ml", "pair", "uid-pair", [("serve", f"{G0}-share-2"), ("train/small", f"{G0}-share-3")],
        [("FromClaim", ["serve"], {"priority": "production", "memory": "1GiB"}),
         ("FromClaim", ["train"], {"weight": 4})])
    answers = prepare(client, ("ml", "uid-ddp", "ddp"), ("ml", "uid-pair", "pair"))
    assert answers["uid-ddp"].error == "" and answers["uid-pair"].error == ""
    ddp = ctl.jobs()[job_name("uid-ddp", "gpus")]
    assert [d["device_uuid"] for d in ddp["devices"]] == ["GPU-sim-0", "GPU-sim-1"]
    assert ddp["mem_quota"] == 2 * GIB                    # 1 share of GPU 0: 2 GiB per GPU
    # one CDI ID for the job, on its first device only
    ids = [d[3] for d in devices(answers["uid-ddp"])]
    assert ids == [[f"tgs.io/gpu={job_name('uid-ddp', 'gpus')}"], [], []]
    env = _cdi(proc, job_name("uid-ddp", "gpus"))["devices"][0]["containerEdits"]["env"]
    cuda = ",".join(d["cuda_uuid"] for d in ddp["devices"])      # as CUDA reports them
    assert f"CUDA_VISIBLE_DEVICES={cuda}" in env
    serve = ctl.jobs()[job_name("uid-pair", "serve")]
    train = ctl.jobs()[job_name("uid-pair", "train/small")]
    assert (serve["priority"], serve["mem_quota"]) == ("production", GIB)
    assert (train["priority"], train["weight"], train["mem_quota"]) == ("opportunistic", 4,
                                                                        2 * GIB)
    # a subrequest's device names its main request too (a container asks for `train`)
    names = {d[2]: d[0] for d in devices(answers["uid-pair"])}
    assert names == {f"{G0}-share-2": ["serve"], f"{G0}-share-3": ["train/small", "train"]}
    assert unprepare(client, ("ml", "uid-pair", "pair")) == {"uid-pair": ""}
    assert not {serve["name"], train["name"]} & set(ctl.jobs())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_restart_keeps_prepared_claims(dra_kubelet: DraKubelet, ctl: Controller,
                                       dra_api: FakeResourceApi, dra_factory,  # type: ignore[no-untyped-def]
                                       sig: int) -> None:
    proc = dra_factory()
    client = _client(dra_kubelet, proc)
    dra_api.claims[("ml", "train")] = claim("ml", "train", "uid-t", [("gpu", f"{G1}-share-2")],
                                            [("FromClaim", [], {"weight": 9})])
    first = prepare(client, ("ml", "uid-t", "train"))["uid-t"]
    assert first.error == ""
    job = job_name("uid-t", "gpu")
    proc.close(sig)                                  # the driver goes (a restart, an update)
    assert job in ctl.jobs()                         # its claim is prepared: the job stays
    if sig == signal.SIGTERM:
        assert proc.proc.returncode == 0, proc.tail()
    proc.start()
    client = _client(dra_kubelet, proc)
    assert job in ctl.jobs()
    again = prepare(client, ("ml", "uid-t", "train"))["uid-t"]   # the kubelet asks again
    assert devices(again) == devices(first) and again.error == ""
    assert ctl.jobs()[job]["weight"] == 9
    assert unprepare(client, ("ml", "uid-t", "train")) == {"uid-t": ""}
    assert job not in ctl.jobs()


def test_jobs_kept_registered_and_pending_claims_undone(
        dra_kubelet: DraKubelet, ctl: Controller, dra_api: FakeResourceApi,
        dra_factory, k8s_root) -> None:  # type: ignore[no-untyped-def]
    """A prepared claim's job the controller lost is registered again; a claim a dead driver
    left pending (registered, no answer given) has its job removed at the next start."""
    proc = dra_factory()
    client = _client(dra_kubelet, proc)
    dra_api.claims[("ml", "keep")] = claim("ml", "keep", "uid-k", [("gpu", f"{G0}-share-1")],
                                           [("FromClaim", [], {"priority": "production",
                                                               "memory": "512MiB"})])
    assert prepare(client, ("ml", "uid-k", "keep"))["uid-k"].error == ""
    job = job_name("uid-k", "gpu")
    with ctl.client() as c:
        c.unregister(job)                            # lost behind the driver's back
    assert wait_for(lambda: job in ctl.jobs(), timeout=20, step=0.2), proc.tail()
    j = ctl.jobs()[job]
    assert (j["priority"], j["mem_quota"]) == ("production", 512 << 20)
    # a claim left pending by a driver that died between register and answer
    proc.close(signal.SIGKILL)
    stale = job_name("uid-dead", "gpu")
    with ctl.client() as c:
        c.register(stale, device="GPU-sim-1")
    path = proc.state_dir / "checkpoint.json"
    data = json.loads(path.read_text())
    data["claims"]["uid-dead"] = {"namespace": "ml", "name": "dead", "state": "pending",
                                  "jobs": [{"name": stale, "priority": "opportunistic",
                                            "weight": 1, "mem_quota": None,
                                            "gpus": ["GPU-sim-1"]}], "devices": []}
    path.write_text(json.dumps(data))
    proc.start()
    assert wait_for(lambda: stale not in ctl.jobs(), timeout=20, step=0.2), proc.tail()
    assert job in ctl.jobs()                         # the prepared claim's job stays
    # the checkpoint is saved after the job is unregistered: wait for it, not for the job
    assert wait_for(lambda: set(json.loads(path.read_text())["claims"]) == {"uid-k"},
                    timeout=20, step=0.1), path.read_text()


def test_controller_down_fails_claims_not_the_driver(
        dra_kubelet: DraKubelet, ctl: Controller, dra_api: FakeResourceApi,
        dra_factory) -> None:  # type: ignore[no-untyped-def]
    """With the controller down a new claim fails with the reason (the kubelet retries), a
    prepared one is answered from the checkpoint, an unprepare fails and is kept for the
    retry; with the controller back both go through."""
    proc = dra_factory()
    client = _client(dra_kubelet, proc)
    dra_api.claims[("ml", "a")] = claim("ml", "a", "uid-a", [("gpu", f"{G0}-share-0")])
    dra_api.claims[("ml", "b")] = claim("ml", "b", "uid-b", [("gpu", f"{G1}-share-0")])
    first = prepare(client, ("ml", "uid-a", "a"))["uid-a"]
    assert first.error == ""
    ctl.stop()
    again = prepare(client, ("ml", "uid-a", "a"))["uid-a"]
    assert again.error == "" and devices(again) == devices(first)
    b = prepare(client, ("ml", "uid-b", "b"))["uid-b"]
    assert "tgs-controller" in b.error and not b.devices
    assert "tgs-controller" in unprepare(client, ("ml", "uid-a", "a"))["uid-a"]
    assert "uid-a" in json.loads((proc.state_dir / "checkpoint.json").read_text())["claims"]
    ctl.start()
    assert unprepare(client, ("ml", "uid-a", "a")) == {"uid-a": ""}
    assert prepare(client, ("ml", "uid-b", "b"))["uid-b"].error == ""
    jobs = ctl.jobs()
    assert job_name("uid-a", "gpu") not in jobs and job_name("uid-b", "gpu") in jobs
    assert "unexpected error" not in proc.log.read_text()


def test_unwritable_checkpoint_fails_the_claim(dra_kubelet: DraKubelet, ctl: Controller,
                                               dra_api: FakeResourceApi, dra_factory,  # type: ignore[no-untyped-def]
                                               k8s_root) -> None:
    """A claim whose preparation cannot be recorded is not prepared (a restart would lose
    its job): the reason is its error and nothing is registered."""
    blocker = k8s_root / "not-a-dir"
    blocker.write_text("")
    proc = dra_factory("--state-dir", str(blocker / "state"))
    client = _client(dra_kubelet, proc)
    dra_api.claims[("ml", "a")] = claim("ml", "a", "uid-a", [("gpu", f"{G0}-share-0")])
    before = set(ctl.jobs())
    a = prepare(client, ("ml", "uid-a", "a"))["uid-a"]
    assert "cannot write" in a.error and "checkpoint.json" in a.error
    assert set(ctl.jobs()) == before
    assert unprepare(client, ("ml", "uid-a", "a")) == {"uid-a": ""}
