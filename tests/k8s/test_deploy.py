"""deploy/ holds together: every Kubernetes manifest valid against the API schemas of the
supported versions (strict: no unknown field); hostPaths mounted at the same path (the plugin
hands those paths to the kubelet); commands that are this package's scripts with arguments
they accept; RBAC no wider than reading pods and labelling nodes; and the hardening: no
privileged container, every capability dropped but the documented ones, probes that really
ask the controller and the plugin (run here against both), the host pid namespace for the
controller only, the CDI mount only in deploy/tgs-cdi.yaml."""

from __future__ import annotations

import copy
import importlib
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml
from fake_kubelet import FakeKubelet
from k8s_helpers import Controller, PluginProc
from proc_helpers import BIN, wait_for

if sys.version_info >= (3, 11):
    import tomllib
else:                                                   # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S_VERSIONS = ["1.29", "1.30", "1.31", "1.32", "1.33"]   # supported (docs/kubernetes.md)
POLICY_SINCE = "1.30"               # deploy/tgs-node-policy.yaml: admissionregistration/v1 VAP
# deploy/tgs-dra.yaml: resource.k8s.io/v1 (DeviceClass), validated against the versions that
# have it in tests/k8s/test_dra_deploy.py
SINCE = {"tgs-node-policy.yaml": POLICY_SINCE, "tgs-dra.yaml": "1.34"}
NOT_K8S = {"prometheus-scrape.yaml"}        # a Prometheus scrape job, not an API object
CRDS = {"monitoring.coreos.com/v1"}         # the Prometheus Operator's: no schema in the set


def _load(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


DOCS = _load("tgs.yaml")
CDI = _load("tgs-cdi.yaml")
# what each container may add to `drop: [ALL]`, and the options that need the others
CAPS = {"controller": {"SYS_PTRACE", "DAC_READ_SEARCH"}, "device-plugin": set()}


def _one(kind: str, docs: list[dict] = DOCS) -> dict:
    (doc,) = [d for d in docs if d["kind"] == kind]
    return doc


def _daemonsets(docs: list[dict] = DOCS) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "DaemonSet"}


def _pods(docs: list[dict] = DOCS) -> dict[str, dict]:
    """container name -> its pod spec (one container per pod)."""
    out = {}
    for ds in _daemonsets(docs).values():
        spec = ds["spec"]["template"]["spec"]
        (c,) = spec["containers"]
        out[c["name"]] = spec
    return out


def _container(name: str, docs: list[dict] = DOCS) -> dict:
    (c,) = _pods(docs)[name]["containers"]
    return c


def _manifests() -> list[str]:
    return sorted(str(p.relative_to(DEPLOY)) for p in DEPLOY.rglob("*.yaml")
                  if p.name not in NOT_K8S)


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("name", _manifests())
def test_manifests_valid_for_supported_versions(name: str, version: str) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    if name in SINCE and kv.utils.major_minor(version) < kv.utils.major_minor(SINCE[name]):
        pytest.skip(f"{name} is for Kubernetes >= {SINCE[name]}")
    docs = _load(name)
    assert docs
    for doc in docs:
        if doc["apiVersion"] in CRDS:
            continue
        kv.validate(doc, version, strict=True)          # raises on any schema error


def test_every_pod_spec_checked_here_is_every_daemonset() -> None:
    assert set(_daemonsets()) == {"tgs-controller", "tgs-device-plugin"}
    assert set(_daemonsets(CDI)) == {"tgs-device-plugin"}
    for ds in [*_daemonsets().values(), *_daemonsets(CDI).values()]:
        assert ds["metadata"]["namespace"] == "tgs-system"
        labels = ds["spec"]["template"]["metadata"]["labels"]
        assert ds["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_hostpaths_mounted_at_their_own_path() -> None:
    for docs in (DOCS, CDI):
        for spec in _pods(docs).values():
            host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
            mounted = set()
            (c,) = spec["containers"]
            for m in c["volumeMounts"]:
                if m["name"] in host:
                    assert m["mountPath"] == host[m["name"]], (c["name"], m)
                    mounted.add(m["name"])
            assert mounted == set(host)
        plugin = _container("device-plugin", docs)
        paths = {m["mountPath"] for m in plugin["volumeMounts"]}
        args = dict(a.split("=", 1) for a in plugin["command"][1:] if "=" in a)
        assert args["--plugin-dir"] in paths
        assert str(Path(args["--pod-resources"]).parent) in paths
        assert any(args["--host-lib-dir"].startswith(p + "/") for p in paths)


def test_controller_and_plugin_share_the_node_directories() -> None:
    """The plugin reaches the controller's ipc socket (/run/tgs) and hands out its segments
    (/var/lib/tgs): the same hostPaths in both pods."""
    def dirs(spec: dict) -> dict[str, str]:
        return {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    ctl, plugin = dirs(_pods()["controller"]), dirs(_pods()["device-plugin"])
    assert ctl == {"state": "/var/lib/tgs", "run": "/run/tgs"}
    assert ctl.items() <= plugin.items()
    ctl_args = dict(a.split("=", 1) for a in _container("controller")["command"][1:] if "=" in a)
    plugin_args = dict(a.split("=", 1) for a in _container("device-plugin")["command"][1:]
                       if "=" in a)
    assert ctl_args["--runtime-dir"] == plugin_args["--runtime-dir"] == ctl["run"]


def test_commands_are_our_scripts_with_valid_arguments() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for docs in (DOCS, CDI):
        for spec in _pods(docs).values():
            for c in spec["containers"]:
                name, *args = c["command"]
                module, func = scripts[name].split(":")
                cmd = getattr(importlib.import_module(module), func.replace("main", "cli"))
                assert isinstance(cmd, click.Command)
                cmd.make_context(name, list(args))    # raises on an unknown/invalid option


def test_rbac_reads_pods_and_labels_nodes_only() -> None:
    assert _one("ClusterRole")["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}]
    accounts = {d["metadata"]["name"]: d for d in DOCS if d["kind"] == "ServiceAccount"}
    binding = _one("ClusterRoleBinding")
    sa = accounts["tgs-device-plugin"]["metadata"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["name"],
                                    "namespace": sa["namespace"]}]
    assert [d["kind"] for d in DOCS].count("ClusterRoleBinding") == 1
    assert not any(d["kind"] in ("RoleBinding", "Role") for d in DOCS)
    pods = _pods()
    assert pods["device-plugin"]["serviceAccountName"] == sa["name"]
    assert _pods(CDI)["device-plugin"]["serviceAccountName"] == sa["name"]
    # the controller talks to no API server: an account with no permission and no token
    assert pods["controller"]["serviceAccountName"] == "tgs-controller"
    assert pods["controller"]["automountServiceAccountToken"] is False
    assert accounts["tgs-controller"]["automountServiceAccountToken"] is False


def test_node_policy_narrows_the_plugin_to_its_own_node() -> None:
    docs = _load("tgs-node-policy.yaml")
    policy, binding = _one("ValidatingAdmissionPolicy", docs), \
        _one("ValidatingAdmissionPolicyBinding", docs)
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert policy["spec"]["failurePolicy"] == "Fail"
    (cond,) = policy["spec"]["matchConditions"]
    assert "system:serviceaccount:tgs-system:tgs-device-plugin" in cond["expression"]
    text = " ".join(v["expression"] for v in policy["spec"]["validations"])
    assert "authentication.kubernetes.io/node-name" in text and "tgs.io/gpu-idle-pct" in text


def test_plugin_knows_its_own_pod() -> None:
    """POD_NAME/POD_NAMESPACE (--pod-name/--pod-namespace): a pod resources List without the
    plugin's own pod is partial and removes no job (k8s/gc.py)."""
    for docs in (DOCS, CDI):
        env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
               for e in _container("device-plugin", docs)["env"]}
        assert env["POD_NAME"] == "metadata.name"
        assert env["POD_NAMESPACE"] == "metadata.namespace"
        assert env["NODE_NAME"] == "spec.nodeName"


# ---------------------------------------------------------------- hardening

@pytest.mark.parametrize("docs", [DOCS, CDI], ids=["tgs", "tgs-cdi"])
def test_least_privilege(docs: list[dict]) -> None:
    for name, spec in _pods(docs).items():
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert not spec.get("hostNetwork") and not spec.get("hostIPC")
        assert spec.get("hostPID", False) is (name == "controller"), name
        for c in spec["containers"] + spec.get("initContainers", []):
            sc = c["securityContext"]
            assert sc.get("privileged", False) is False, name
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["readOnlyRootFilesystem"] is True, name
            assert sc["capabilities"]["drop"] == ["ALL"], name
            assert set(sc["capabilities"].get("add", [])) == CAPS[name], name
            assert "seccompProfile" not in sc or sc["seccompProfile"]["type"] == "RuntimeDefault"
            # a read-only root: Python's temp files go to an emptyDir
            tmp = next(m for m in c["volumeMounts"] if m["mountPath"] == "/tmp")
            (vol,) = [v for v in spec["volumes"] if v["name"] == tmp["name"]]
            assert "emptyDir" in vol


def test_on_bypass_documented_with_the_kill_capability() -> None:
    """--on-bypass signals processes of other uids: the manifest says to add KILL with it."""
    text = (DEPLOY / "tgs.yaml").read_text()
    assert "--on-bypass" in text and "KILL" in text
    assert not any(a.startswith("--on-bypass") for a in _container("controller")["command"])


@pytest.mark.parametrize("docs", [DOCS, CDI], ids=["tgs", "tgs-cdi"])
def test_tolerations(docs: list[dict]) -> None:
    for name, spec in _pods(docs).items():
        assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in spec["tolerations"], name
        assert spec["priorityClassName"] == "system-node-critical"


def test_cdi_mount_only_in_the_cdi_manifest() -> None:
    for spec in _pods().values():
        assert not any(v.get("hostPath", {}).get("path") == "/var/run/cdi"
                       for v in spec["volumes"])
        (c,) = spec["containers"]
        assert not any(a.startswith("--cdi-dir") for a in c["command"])
    plugin = _container("device-plugin", CDI)
    assert "--cdi-dir=/var/run/cdi" in plugin["command"]
    assert {"name": "cdi", "mountPath": "/var/run/cdi"} in plugin["volumeMounts"]


def test_cdi_manifest_is_the_plugin_plus_cdi() -> None:
    """deploy/tgs-cdi.yaml replaces the plugin DaemonSet of deploy/tgs.yaml: the same object
    but for --cdi-dir and its mount (no drift between the two)."""
    (cdi,) = CDI
    plain = copy.deepcopy(_daemonsets()["tgs-device-plugin"])
    cdi = copy.deepcopy(cdi)
    spec = cdi["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    c["command"].remove("--cdi-dir=/var/run/cdi")
    c["volumeMounts"].remove({"name": "cdi", "mountPath": "/var/run/cdi"})
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "cdi"]
    assert cdi == plain


def _probes(c: dict) -> list[list[str]]:
    probes = [c[k]["exec"]["command"] for k in ("startupProbe", "readinessProbe",
                                                "livenessProbe")]
    assert all(c[k]["timeoutSeconds"] >= 5 for k in ("startupProbe", "readinessProbe",
                                                     "livenessProbe"))
    assert c["livenessProbe"]["failureThreshold"] >= 3
    return probes


def test_probes_present_and_not_trivial() -> None:
    for docs in (DOCS, CDI):
        for name, spec in _pods(docs).items():
            (c,) = spec["containers"]
            for cmd in _probes(c):
                assert cmd[0] not in ("true", "/bin/true", "sh", "/bin/sh"), (name, cmd)
    ctl_probe = _probes(_container("controller"))[0]
    assert ctl_probe[0] == "tgsctl" and "status" in ctl_probe
    plugin = _container("device-plugin")
    args = dict(a.split("=", 1) for a in plugin["command"][1:] if "=" in a)
    plugin_probe = _probes(plugin)[0]
    assert plugin_probe[:3] == ["python", "-m", "tgs.k8s.probe"]
    assert f"{args['--plugin-dir']}/{args['--endpoint']}" in plugin_probe


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_controller_probe_asks_the_controller(ctl: Controller) -> None:
    """The manifest's probe command, pointed at a test controller: 0 while it answers, not 0
    once it is gone."""
    for cmd in _probes(_container("controller")):
        local = [str(BIN / cmd[0])] + [a.replace("/run/tgs", str(ctl.runtime)) for a in cmd[1:]]
        r = _run(local)
        assert r.returncode == 0, r.stderr
        assert isinstance(json.loads(r.stdout), dict)       # the controller's status
    ctl.stop()
    r = _run(local)
    assert r.returncode != 0


def test_plugin_probe_asks_the_plugin(kubelet: FakeKubelet, ctl: Controller,
                                      plugin: PluginProc) -> None:
    """The manifest's probe, pointed at a test plugin's socket: 0 once it serves, not 0 after
    it stopped (its socket removed)."""
    sock = str(kubelet.dir / plugin.endpoint)
    probe = _probes(_container("device-plugin"))
    assert wait_for(lambda: Path(sock).exists(), timeout=20, step=0.1), \
        plugin.log.read_text()
    ours = "/var/lib/kubelet/device-plugins/tgs-gpu.sock"
    for cmd in probe:
        local = [sys.executable] + [sock if a == ours else a for a in cmd[1:]]
        r = _run(local)
        assert r.returncode == 0, r.stderr
    plugin.close()
    r = _run(local)
    assert r.returncode == 1 and "tgs-device-plugin probe" in r.stderr
