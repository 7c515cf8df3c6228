"""deploy/tgs.yaml holds together: hostPaths mounted at the same path (the plugin hands
those paths to the kubelet), commands that are this package's scripts with arguments they
accept, and RBAC no wider than reading pods and labelling nodes."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click
import pytest
import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:                                                   # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
DOCS = list(yaml.safe_load_all((ROOT / "deploy" / "tgs.yaml").read_text()))


def _one(kind: str) -> dict:
    (doc,) = [d for d in DOCS if d and d["kind"] == kind]
    return doc


def test_hostpaths_mounted_at_their_own_path() -> None:
    spec = _one("DaemonSet")["spec"]["template"]["spec"]
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    mounted = set()
    for c in spec["containers"]:
        for m in c["volumeMounts"]:
            if m["name"] in host:
                assert m["mountPath"] == host[m["name"]], (c["name"], m)
                mounted.add(m["name"])
    assert mounted == set(host)
    plugin = next(c for c in spec["containers"] if c["name"] == "device-plugin")
    paths = {m["mountPath"] for m in plugin["volumeMounts"]}
    args = dict(a.split("=", 1) for a in plugin["command"][1:] if "=" in a)
    assert args["--plugin-dir"] in paths
    assert str(Path(args["--pod-resources"]).parent) in paths
    assert any(args["--host-lib-dir"].startswith(p + "/") for p in paths)


def test_commands_are_our_scripts_with_valid_arguments() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    spec = _one("DaemonSet")["spec"]["template"]["spec"]
    for c in spec["containers"]:
        name, *args = c["command"]
        module, func = scripts[name].split(":")
        cmd = getattr(importlib.import_module(module), func.replace("main", "cli"))
        assert isinstance(cmd, click.Command)
        cmd.make_context(name, list(args))            # raises on an unknown/invalid option


def test_rbac_reads_pods_and_labels_nodes_only() -> None:
    assert _one("ClusterRole")["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}]
    sa = _one("ServiceAccount")["metadata"]
    binding = _one("ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["name"],
                                    "namespace": sa["namespace"]}]
    ds = _one("DaemonSet")
    assert ds["spec"]["template"]["spec"]["serviceAccountName"] == sa["name"]
    assert ds["metadata"]["namespace"] == sa["namespace"]


def test_plugin_knows_its_own_pod() -> None:
    """POD_NAME/POD_NAMESPACE (--pod-name/--pod-namespace): a pod resources List without the
    plugin's own pod is partial and removes no job (k8s/gc.py)."""
    spec = _one("DaemonSet")["spec"]["template"]["spec"]
    plugin = next(c for c in spec["containers"] if c["name"] == "device-plugin")
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
           for e in plugin["env"]}
    assert env["POD_NAME"] == "metadata.name" and env["POD_NAMESPACE"] == "metadata.namespace"
