"""deploy/tgs-dra.yaml holds together: valid against the API schemas of the Kubernetes
versions that have resource.k8s.io/v1 (1.34-1.37; tests/k8s/test_deploy.py skips it for its
1.29-1.33), hostPaths at their own path and shared with the controller of deploy/tgs.yaml, a
command with arguments tgs-dra-plugin accepts, RBAC no wider than reading claims and writing
slices, the hardening of the device plugin (no privilege, every capability dropped, read-only
root, seccomp), probes that ask the driver (run here against a test driver), and the DRA
examples of docs/kubernetes.md valid too, their configs accepted by the driver."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from dra_helpers import DraKubelet, DraPluginProc
from k8s_helpers import Controller
from proc_helpers import wait_for
from tgs.k8s.dra import params
from tgs.k8s.dra.main import cli

ROOT = Path(__file__).resolve().parents[2]
DRA_VERSIONS = ["1.34", "1.35", "1.36", "1.37"]      # resource.k8s.io/v1 is GA from 1.34
DOCS = [d for d in yaml.safe_load_all((ROOT / "deploy" / "tgs-dra.yaml").read_text()) if d]
BASE = [d for d in yaml.safe_load_all((ROOT / "deploy" / "tgs.yaml").read_text()) if d]


def _one(kind: str, docs: list[dict] = DOCS) -> dict:
    (doc,) = [d for d in docs if d["kind"] == kind]
    return doc


def _spec() -> dict:
    return _one("DaemonSet")["spec"]["template"]["spec"]


def _container() -> dict:
    (c,) = _spec()["containers"]
    return c


def _args() -> dict[str, str]:
    return dict(a.split("=", 1) for a in _container()["command"][1:] if "=" in a)


def _doc_examples() -> list[dict]:
    """The YAML blocks of docs/kubernetes.md's DRA section."""
    text = (ROOT / "docs" / "kubernetes.md").read_text()
    section = text[text.index("## The DRA driver"):text.index("## Testing it without")]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    return [d for b in blocks for d in yaml.safe_load_all(b) if d]


@pytest.mark.parametrize("version", DRA_VERSIONS)
@pytest.mark.parametrize("what", ["deploy", "docs"])
def test_valid_for_versions_with_dra(what: str, version: str) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    docs = DOCS if what == "deploy" else _doc_examples()
    assert docs
    for doc in docs:
        kv.validate(doc, version, strict=True)          # raises on any schema error


def test_doc_examples_configs_are_accepted_by_the_driver() -> None:
    templates = [d for d in _doc_examples() if d["kind"] == "ResourceClaimTemplate"]
    assert {t["metadata"]["name"] for t in templates} == {"serve-gpu", "train-gpu"}
    got = {}
    for t in templates:
        devices = t["spec"]["spec"]["devices"]
        for c in devices["config"]:
            assert c["opaque"]["driver"] == "gpu.tgs.io"
            got[t["metadata"]["name"]] = params.parse(c["opaque"]["parameters"], "gpu.tgs.io")
        for r in devices["requests"]:
            for sub in [r.get("exactly")] + (r.get("firstAvailable") or []):
                if sub:
                    assert sub["deviceClassName"] == _one("DeviceClass")["metadata"]["name"]
    assert got["serve-gpu"] == {"priority": "production", "memory": 30 << 30}
    assert got["train-gpu"] == {"priority": "opportunistic", "weight": 2, "memory": 10 << 30}
    pods = {d["metadata"]["name"]: d for d in _doc_examples() if d["kind"] == "Pod"}
    assert set(pods) == {"serve", "train"}


def test_device_class_and_driver_name() -> None:
    dc = _one("DeviceClass")
    assert dc["apiVersion"] == "resource.k8s.io/v1"
    assert dc["spec"]["selectors"] == [{"cel": {"expression": "device.driver == 'gpu.tgs.io'"}}]
    assert _args()["--driver"] == dc["metadata"]["name"] == "gpu.tgs.io"


def test_command_is_our_script_with_valid_arguments() -> None:
    name, *args = _container()["command"]
    assert name == "tgs-dra-plugin"
    cli.make_context(name, list(args))                  # raises on an unknown/invalid option
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in _container()["env"]}
    assert env == {"NODE_NAME": "spec.nodeName"}
    assert _args()["--node-name"] == "$(NODE_NAME)"


def test_hostpaths_at_their_own_path_and_shared_with_the_controller() -> None:
    spec = _spec()
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    mounts = {m["name"]: m["mountPath"] for m in _container()["volumeMounts"]}
    for name, path in host.items():
        assert mounts[name] == path, name
    args = _args()
    paths = set(host.values())
    for opt in ("--registrar-dir", "--plugin-dir", "--cdi-dir", "--runtime-dir"):
        assert args[opt] in paths, opt
    assert any(args["--host-lib-dir"].startswith(p + "/") for p in paths)
    assert args["--plugin-dir"] == f"/var/lib/kubelet/plugins/{args['--driver']}"
    # the controller's directories of deploy/tgs.yaml, and its runtime dir
    (ctl,) = [d for d in BASE if d["kind"] == "DaemonSet"
              and d["metadata"]["name"] == "tgs-controller"]
    ctl_spec = ctl["spec"]["template"]["spec"]
    ctl_host = {v["hostPath"]["path"] for v in ctl_spec["volumes"] if "hostPath" in v}
    assert ctl_host <= paths
    ctl_args = dict(a.split("=", 1) for a in ctl_spec["containers"][0]["command"][1:]
                    if "=" in a)
    assert ctl_args["--runtime-dir"] == args["--runtime-dir"]
    assert _one("DaemonSet")["metadata"]["namespace"] == ctl["metadata"]["namespace"]


def test_rbac_reads_claims_and_writes_slices_only() -> None:
    assert _one("ClusterRole")["rules"] == [
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
         "verbs": ["get", "list", "create", "update", "delete"]}]
    sa = _one("ServiceAccount")["metadata"]
    assert _one("ClusterRoleBinding")["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}]
    assert not any(d["kind"] in ("Role", "RoleBinding") for d in DOCS)
    assert _spec()["serviceAccountName"] == sa["name"]
    # its slice writes narrowed to its own node and driver
    policy = _one("ValidatingAdmissionPolicy")
    assert _one("ValidatingAdmissionPolicyBinding")["spec"] == {
        "policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    (cond,) = policy["spec"]["matchConditions"]
    assert f"system:serviceaccount:{sa['namespace']}:{sa['name']}" in cond["expression"]
    text = " ".join(v["expression"] for v in policy["spec"]["validations"])
    assert "authentication.kubernetes.io/node-name" in text and "'gpu.tgs.io'" in text


def test_least_privilege() -> None:
    spec = _spec()
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not spec.get("hostPID") and not spec.get("hostNetwork") and not spec.get("hostIPC")
    sc = _container()["securityContext"]
    assert sc.get("privileged", False) is False
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    tmp = next(m for m in _container()["volumeMounts"] if m["mountPath"] == "/tmp")
    (vol,) = [v for v in spec["volumes"] if v["name"] == tmp["name"]]
    assert "emptyDir" in vol
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in spec["tolerations"]
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["nodeSelector"]["tgs.io/dra"] == "true"     # one path per node (the docs)


def _probes() -> list[list[str]]:
    c = _container()
    keys = ("startupProbe", "readinessProbe", "livenessProbe")
    assert all(c[k]["timeoutSeconds"] >= 5 for k in keys)
    assert c["livenessProbe"]["failureThreshold"] >= 3
    return [c[k]["exec"]["command"] for k in keys]


@pytest.mark.timeout(120)
def test_probe_asks_the_driver(dra_kubelet: DraKubelet, ctl: Controller,
                               dra_factory) -> None:  # type: ignore[no-untyped-def]
    """The manifest's probe, pointed at a test driver's sockets: 0 once it serves, 1 after it
    stopped."""
    proc: DraPluginProc = dra_factory()
    args = _args()
    ours = {f"{args['--plugin-dir']}/dra.sock": proc.endpoint,
            f"{args['--registrar-dir']}/{args['--driver']}-reg.sock":
                str(dra_kubelet.socket())}
    assert wait_for(lambda: dra_kubelet.socket().exists(), timeout=30, step=0.1), proc.tail()
    for cmd in _probes():
        assert cmd[:3] == ["python", "-m", "tgs.k8s.dra.probe"]
        local = [sys.executable] + [
            ours.get(a, a) if not a.startswith("--registration=")
            else "--registration=" + ours[a.split("=", 1)[1]] for a in cmd[1:]]
        assert proc.endpoint in local and f"--registration={dra_kubelet.socket()}" in local
        r = subprocess.run(local, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    proc.close()
    r = subprocess.run(local, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "tgs-dra-plugin probe" in r.stderr
