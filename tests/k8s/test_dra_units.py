"""The DRA driver's parts in process: the wire contract of its .proto files (the kubelet's
package, service, method and field names and numbers), the claim config's validation and
merging, the checkpoint file, job names, and the command line (version, usage errors, the
data it prints)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from proc_helpers import tool
from tgs.k8s.dra import api, params
from tgs.k8s.dra.checkpoint import Checkpoint, ClaimEntry, JobEntry
from tgs.k8s.dra.plan import job_name
from tgs.k8s.shares import Gpu

GIB = 1 << 30
GPU = Gpu(0, "GPU-0", 8 * GIB)


# ---------------------------------------------------------------- the wire contract
# Transcribed from k8s.io/kubelet pkg/apis/dra/v1beta1/api.proto, dra/v1/api.proto and
# pluginregistration/v1/api.proto: what a real kubelet sends and expects.
DRA_FIELDS = {
    "NodePrepareResourcesRequest": {"claims": 1},
    "NodePrepareResourcesResponse": {"claims": 1},
    "NodePrepareResourceResponse": {"devices": 1, "error": 2},
    "Device": {"request_names": 1, "pool_name": 2, "device_name": 3, "cdi_device_ids": 4},
    "NodeUnprepareResourcesRequest": {"claims": 1},
    "NodeUnprepareResourcesResponse": {"claims": 1},
    "NodeUnprepareResourceResponse": {"error": 1},
    "Claim": {"namespace": 1, "uid": 2, "name": 3},
}
REG_FIELDS = {
    "PluginInfo": {"type": 1, "name": 2, "endpoint": 3, "supported_versions": 4},
    "RegistrationStatus": {"plugin_registered": 1, "error": 2},
    "RegistrationStatusResponse": {},
    "InfoRequest": {},
}


def _fields(module, name: str) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {f.name: f.number for f in getattr(module, name).DESCRIPTOR.fields}


@pytest.mark.parametrize("module,package,extra", [
    (api.dra, "k8s.io.kubelet.pkg.apis.dra.v1beta1", {}),
    (api.dra1, "k8s.io.kubelet.pkg.apis.dra.v1", {"Device": {"share_id": 5}}),
], ids=["v1beta1", "v1"])
def test_dra_proto_matches_the_kubelets(module, package: str, extra: dict) -> None:  # type: ignore[no-untyped-def]
    assert module.DESCRIPTOR.package == package
    (svc,) = module.DESCRIPTOR.services_by_name.values()
    assert svc.full_name == f"{package}.DRAPlugin"
    assert {m.name: (m.input_type.name, m.output_type.name) for m in svc.methods} == {
        "NodePrepareResources": ("NodePrepareResourcesRequest", "NodePrepareResourcesResponse"),
        "NodeUnprepareResources": ("NodeUnprepareResourcesRequest",
                                   "NodeUnprepareResourcesResponse")}
    for msg, fields in DRA_FIELDS.items():
        assert _fields(module, msg) == {**fields, **extra.get(msg, {})}, msg
    claims = module.NodePrepareResourcesResponse.DESCRIPTOR.fields_by_name["claims"]
    assert claims.message_type.GetOptions().map_entry                 # map<string, ...>


def test_registration_proto_matches_the_kubelets() -> None:
    assert api.reg.DESCRIPTOR.package == "pluginregistration"
    (svc,) = api.reg.DESCRIPTOR.services_by_name.values()
    assert svc.full_name == "pluginregistration.Registration"
    assert [m.name for m in svc.methods] == ["GetInfo", "NotifyRegistrationStatus"]
    for msg, fields in REG_FIELDS.items():
        assert _fields(api.reg, msg) == fields, msg
    assert api.SERVICES == ("v1.DRAPlugin", "v1beta1.DRAPlugin")
    assert api.PLUGIN_TYPE == "DRAPlugin"


# ---------------------------------------------------------------- the claim's config
def test_config_parsing() -> None:
    assert params.parse({}, "gpu.tgs.io") == {}
    assert params.parse({"apiVersion": "gpu.tgs.io/v1", "kind": "GpuConfig",
                         "priority": "production", "weight": 1000, "memory": "1.5GiB"},
                        "gpu.tgs.io") == {"priority": "production", "weight": 1000,
                                          "memory": 3 << 29}
    assert params.parse({"memory": "unlimited"}, "d.io")["memory"] is None
    assert params.parse({"memory": 0}, "d.io")["memory"] is None         # 0: unlimited
    assert params.parse({"memory": 4096}, "d.io")["memory"] == 4096
    assert params.parse({"apiVersion": "other.io/v1"}, "other.io") == {}
    for bad, word in (({"weight": True}, "weight true"), ({"weight": 1.5}, "weight 1.5"),
                      ({"weight": 1001}, "weight 1001"), ({"memory": True}, "memory true"),
                      ({"memory": "8 GiB GiB"}, "memory:"), ({"memory": "-1"}, "memory:"),
                      ({"memory": "\uff18GiB"}, "memory:"), ({"priority": None}, "priority null"),
                      ({"kind": "Other"}, 'kind "Other"'), (None, "JSON object"),
                      ({"x" * 100: 1}, "unknown key"), ("production", "JSON object")):
        with pytest.raises(params.ConfigError) as err:
            params.parse(bad, "gpu.tgs.io")
        assert word in str(err.value), (bad, str(err.value))
        assert str(err.value).isascii() and len(str(err.value)) < 300


def test_config_merging_class_then_claim_per_request() -> None:
    def cfg(src: str, reqs: list[str], p: dict, driver: str = "gpu.tgs.io") -> dict:
        return {"source": src, "requests": reqs, "opaque": {"driver": driver, "parameters": p}}

    configs = [cfg("FromClaim", ["train"], {"weight": 4}),
               cfg("FromClass", [], {"priority": "production", "weight": 2}),
               cfg("FromClaim", [], {"memory": "1GiB"}),
               cfg("FromClaim", [], {"weight": "not mine"}, driver="other.io")]
    assert params.effective(configs, "serve", "gpu.tgs.io") == {
        "priority": "production", "weight": 2, "memory": GIB}
    # the claim's config for the main request applies to its subrequest, after the class's
    assert params.effective(configs, "train/small", "gpu.tgs.io") == {
        "priority": "production", "weight": 4, "memory": GIB}
    with pytest.raises(params.ConfigError, match="from the DeviceClass: weight 0"):
        params.effective([cfg("FromClass", [], {"weight": 0})], "gpu", "gpu.tgs.io")


def test_settings_from_config() -> None:
    s = params.settings({}, [(GPU, 1)], 4)
    assert (s.priority, s.weight, s.mem_quota) == ("opportunistic", 1, 2 * GIB)
    s = params.settings({"priority": "production", "memory": GIB, "weight": 3}, [(GPU, 2)], 4)
    assert (s.priority, s.weight, s.mem_quota) == ("production", 3, GIB)
    # over several GPUs: the GPU where the request holds the fewest shares bounds it
    big = Gpu(1, "GPU-1", 80 * GIB)
    assert params.settings({}, [(GPU, 1), (big, 4)], 4).mem_quota == 2 * GIB
    with pytest.raises(params.ConfigError, match="above the"):
        params.settings({"memory": 3 * GIB}, [(GPU, 1), (big, 4)], 4)
    with pytest.raises(params.ConfigError, match="memory unlimited is above"):
        params.settings({"memory": None}, [(GPU, 4)], 4)
    assert params.settings({"memory": None}, [(GPU, 1)], 4, within_shares=False).mem_quota \
        is None
    with pytest.raises(params.ConfigError, match="namespace 'dev' may not run production"):
        params.settings({"priority": "production"}, [(GPU, 1)], 4, namespace="dev",
                        production_namespaces=frozenset({"serving"}))
    assert params.settings({"priority": "production"}, [(GPU, 1)], 4, namespace="serving",
                           production_namespaces=frozenset({"serving"})).priority == "production"


# ---------------------------------------------------------------- checkpoint, names
def test_checkpoint_round_trip_and_a_bad_file(tmp_path: Path) -> None:
    ck = Checkpoint(tmp_path / "state")
    assert ck.load() == {}
    claims = {"u1": ClaimEntry("ml", "a", "prepared",
                               [JobEntry("dra-1", "production", 2, None, ["GPU-0", "GPU-1"])],
                               [{"request_names": ["gpu"], "pool_name": "n", "device_name": "d",
                                 "cdi_device_ids": ["tgs.io/gpu=dra-1"]}])}
    ck.save(claims)
    assert ck.load() == claims
    assert (ck.path.stat().st_mode & 0o777) == 0o600
    ck.path.write_text("{not json")
    assert ck.load() == {}                               # reported, kept aside
    assert ck.path.with_name("checkpoint.json.bad").read_text() == "{not json"
    assert not ck.path.exists()


def test_job_names() -> None:
    a = job_name("8f1c-uid", "gpu")
    assert a == job_name("8f1c-uid", "gpu") and a.startswith("dra-") and len(a) == 20
    assert len({a, job_name("8f1c-uid", "gpu2"), job_name("other", "gpu")}) == 3
    assert not a.startswith("k8s-")           # the device plugin's garbage collection's prefix


# ---------------------------------------------------------------- the command line
def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([tool("tgs-dra-plugin"), *args], capture_output=True, text=True,
                          timeout=60)


def test_cli_version_usage_errors_and_prepared_list(tmp_path: Path) -> None:
    r = _cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("tgs-dra-plugin ")
    for args, word in ((["--api-server", "http://127.0.0.1:9"], "--node-name"),
                       (["--node-name", "n", "--driver", "Bad_Driver"], "--driver"),
                       (["--node-name", "n", "--shares", "0"], "--shares"),
                       (["--node-name", "n", "--json"], "--json goes with"),
                       (["--node-name", "Not A Node", "--api-server", "http://x"], "node name"),
                       (["--print-slices", "--list-prepared"], "not both")):
        r = _cli(*args)
        assert r.returncode == 2 and word in r.stderr, (args, r.stderr)
    Checkpoint(tmp_path).save({"u1": ClaimEntry("ml", "train", "prepared", [
        JobEntry("dra-abc", "opportunistic", 2, GIB, ["GPU-sim-0"])], [])})
    r = _cli("--list-prepared", "--state-dir", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["u1"]["jobs"][0]["name"] == "dra-abc"
    r = _cli("--list-prepared", "--state-dir", str(tmp_path))
    assert r.returncode == 0 and "ml/train" in r.stdout and "dra-abc" in r.stdout


def test_cli_print_slices(ctl) -> None:  # type: ignore[no-untyped-def]
    env_args = ["--node-name", "node-1", "--controller", ctl.env["TGS_CONTROLLER"]]
    r = subprocess.run([tool("tgs-dra-plugin"), *env_args, "--print-slices", "--json"],
                       capture_output=True, text=True, timeout=60, env=ctl.env)
    assert r.returncode == 0, r.stderr
    (s,) = json.loads(r.stdout)
    assert s["kind"] == "ResourceSlice" and s["spec"]["pool"]["name"] == "node-1"
    assert len(s["spec"]["devices"]) == 8
    r = subprocess.run([tool("tgs-dra-plugin"), *env_args, "--print-slices"],
                       capture_output=True, text=True, timeout=60, env=ctl.env)
    assert r.returncode == 0 and "gpu-sim-1-share-3" in r.stdout and "2GiB" in r.stdout
    ctl.stop()
    r = subprocess.run([tool("tgs-dra-plugin"), *env_args, "--print-slices", "--timeout", "0.5"],
                       capture_output=True, text=True, timeout=60, env=ctl.env)
    assert r.returncode == 1 and "does not answer" in r.stderr
