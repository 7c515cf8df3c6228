"""Patch Kubernetes manifests (YAML or JSON) with a TGS job's volumes, mounts and environment.

A manifest is one document or several (YAML `---`, or a `kind: List`); every Pod and every
workload's pod template (WORKLOADS) is patched, every other document (a Service, a
ConfigMap, ...) is written back as it was read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from .injection import Plan

MAX_MANIFEST = 4 << 20      # characters: a manifest is a few KiB

# kind -> the keys from the document to its pod spec
WORKLOADS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
KINDS = ", ".join(list(WORKLOADS)[:-1]) + " or " + list(WORKLOADS)[-1]


class ManifestError(Exception):
    pass


@dataclass
class PodSpec:
    """One pod spec to patch: `spec` is the mapping inside the manifest (patched in place)."""

    name: str       # 'Deployment web', as messages name it
    where: str      # 'spec.template.spec'
    spec: dict[str, Any]


@dataclass
class Manifest:
    docs: list[Any]                 # every document, in order (patched in place)
    fmt: str                        # 'json' | 'yaml'
    pods: list[PodSpec] = field(default_factory=list)


def _volume_name(i: int, container_path: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", container_path.lower()).strip("-")
    return f"tgs-{i}-{base}"[:63].rstrip("-")


def load(text: str) -> Manifest:
    """Every document of `text`, its format, and the pod specs to patch (checked)."""
    if len(text) > MAX_MANIFEST:
        raise ManifestError(f"the manifest is larger than {MAX_MANIFEST} characters")
    try:
        if text.lstrip().startswith("{"):
            docs, fmt = [json.loads(text)], "json"
        else:
            docs, fmt = [d for d in yaml.safe_load_all(text) if d is not None], "yaml"
    except (ValueError, yaml.YAMLError, RecursionError) as exc:
        msg = " ".join(str(exc).split())[:200]
        raise ManifestError(f"not a valid manifest: {msg}") from None
    if not docs:
        raise ManifestError("the manifest is empty")
    m = Manifest(docs, fmt)
    many = len(docs) > 1
    for i, doc in enumerate(docs):
        label = f"document {i + 1}: " if many else ""
        if isinstance(doc, dict) and doc.get("kind") == "List":
            items = _list_of_maps(doc.get("items"), f"{label}items")
            for j, item in enumerate(items):
                _workload(m, item, f"{label}items[{j}]: ")
        else:
            _workload(m, doc, label)
    if not m.pods:
        kinds = sorted({str(d.get("kind"))[:40] for d in _flat(docs)})
        raise ManifestError(f"nothing to patch: expected kind: {KINDS} "
                            f"(got {', '.join(kinds)})")
    return m


def _flat(docs: list[Any]) -> list[dict[str, Any]]:
    """The objects of checked documents, a List's items in its place."""
    out: list[dict[str, Any]] = []
    for d in docs:
        if isinstance(d, dict) and d.get("kind") == "List" and isinstance(d.get("items"), list):
            out += d["items"]
        else:
            out.append(d)
    return out


def _workload(m: Manifest, doc: Any, label: str) -> None:
    """Record doc's pod spec when it is a workload; other objects pass through."""
    if not isinstance(doc, dict):
        raise ManifestError(f"{label}the manifest is not an object")
    kind = doc.get("kind")
    if kind not in WORKLOADS:
        if not isinstance(kind, str) or not kind:
            raise ManifestError(f"{label}the manifest has no kind")
        return
    meta = doc.get("metadata")
    name = f"{kind} {meta['name']}" if isinstance(meta, dict) and \
        isinstance(meta.get("name"), str) else str(kind)
    node: Any = doc
    path = WORKLOADS[kind]
    for depth, key in enumerate(path):
        node = node.get(key)
        if not isinstance(node, dict):
            raise ManifestError(f"{label}the {kind} has no {'.'.join(path[:depth + 1])} "
                                "mapping")
    where = ".".join(path)
    _pod_spec(node, f"{label}{where}")
    m.pods.append(PodSpec(name, where, node))


def _list_of_maps(obj: Any, where: str, keys: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """`obj` must be absent (None), or a list of mappings whose `keys` are strings."""
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise ManifestError(f"{where} must be a list, not {type(obj).__name__}")
    for i, item in enumerate(obj):
        if not isinstance(item, dict):
            raise ManifestError(f"{where}[{i}] must be a mapping, not {type(item).__name__}")
        for k in keys:
            if not isinstance(item.get(k), str):
                raise ManifestError(f"{where}[{i}].{k} must be a string")
    return obj


def _pod_spec(spec: dict[str, Any], where: str) -> None:
    """Check the shape of everything patch() reads or rewrites (a ManifestError otherwise)."""
    containers = _list_of_maps(spec.get("containers"), f"{where}.containers")
    if not containers:
        raise ManifestError(f"{where}.containers is missing or empty")
    _list_of_maps(spec.get("volumes"), f"{where}.volumes", ("name",))
    for i, c in enumerate(containers):
        at = f"{where}.containers[{i}]"
        if "name" in c and not isinstance(c["name"], str):
            raise ManifestError(f"{at}.name must be a string")
        for j, e in enumerate(_list_of_maps(c.get("env"), f"{at}.env", ("name",))):
            if "value" in e and not isinstance(e["value"], str):
                raise ManifestError(f"{at}.env[{j}].value must be a string")
        _list_of_maps(c.get("volumeMounts"), f"{at}.volumeMounts", ("name", "mountPath"))


def dump(m: Manifest) -> str:
    if m.fmt == "json":
        return json.dumps(m.docs[0], indent=2) + "\n"
    return yaml.safe_dump_all(m.docs, sort_keys=False)


def patch(m: Manifest, plan: Plan, container: str | None = None) -> Manifest:
    """Every pod spec of `m` (each must have `container` when it is given), in place."""
    for pod in m.pods:
        patch_spec(pod, plan, container)
    return m


def patch_spec(pod: PodSpec, plan: Plan, container: str | None = None) -> None:
    """hostPath volumes, volumeMounts and env for every container (or only `container`).
    Idempotent: patching twice gives the same manifest."""
    spec = pod.spec
    targets = [c for c in spec["containers"] if container is None or c.get("name") == container]
    if not targets:
        names = ", ".join(str(c.get("name")) for c in spec["containers"])
        raise ManifestError(f"no container named {container!r} in the {pod.name} "
                            f"(it has: {names})")
    vols = [v for v in spec.get("volumes") or [] if not str(v.get("name", "")).startswith("tgs-")]
    mounts = []
    for i, mnt in enumerate(plan.mounts):
        name = _volume_name(i, mnt.container)
        vols.append({"name": name, "hostPath": {"path": mnt.host,
                                                "type": "Directory" if mnt.directory else "File"}})
        mounts.append({"name": name, "mountPath": mnt.container, "readOnly": mnt.readonly})
    spec["volumes"] = vols
    for c in targets:
        keep = [vm for vm in c.get("volumeMounts") or []
                if not str(vm.get("name", "")).startswith("tgs-")]
        c["volumeMounts"] = keep + [dict(mnt) for mnt in mounts]
        env = [e for e in c.get("env") or [] if e.get("name") not in plan.env]
        c["env"] = env + [{"name": k, "value": v} for k, v in sorted(plan.env.items())]
