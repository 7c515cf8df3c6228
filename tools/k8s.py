"""Patch a Pod manifest (YAML or JSON) with a TGS job's volumes, mounts and environment."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from .injection import Plan

MAX_MANIFEST = 4 << 20      # characters: a Pod manifest is a few KiB


class ManifestError(Exception):
    pass


def _volume_name(i: int, container_path: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", container_path.lower()).strip("-")
    return f"tgs-{i}-{base}"[:63].rstrip("-")


def load(text: str) -> tuple[dict[str, Any], str]:
    """(manifest, 'json' | 'yaml')."""
    if len(text) > MAX_MANIFEST:
        raise ManifestError(f"the manifest is larger than {MAX_MANIFEST} characters")
    stripped = text.lstrip()
    try:
        if stripped.startswith("{"):
            return _pod(json.loads(text)), "json"
        return _pod(yaml.safe_load(text)), "yaml"
    except (ValueError, yaml.YAMLError, RecursionError) as exc:
        msg = " ".join(str(exc).split())[:200]
        raise ManifestError(f"not a valid manifest: {msg}") from None


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


def _pod(obj: Any) -> dict[str, Any]:
    """Check the shape of everything patch() reads or rewrites (a ManifestError otherwise)."""
    if not isinstance(obj, dict):
        raise ManifestError("the manifest is not an object")
    kind = obj.get("kind")
    if kind != "Pod":
        raise ManifestError(f"expected kind: Pod, got {str(kind)[:40]!r}")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise ManifestError("the Pod has no spec mapping")
    containers = _list_of_maps(spec.get("containers"), "spec.containers")
    if not containers:
        raise ManifestError("the Pod has no spec.containers")
    _list_of_maps(spec.get("volumes"), "spec.volumes", ("name",))
    for i, c in enumerate(containers):
        where = f"spec.containers[{i}]"
        if "name" in c and not isinstance(c["name"], str):
            raise ManifestError(f"{where}.name must be a string")
        for j, e in enumerate(_list_of_maps(c.get("env"), f"{where}.env", ("name",))):
            if "value" in e and not isinstance(e["value"], str):
                raise ManifestError(f"{where}.env[{j}].value must be a string")
        _list_of_maps(c.get("volumeMounts"), f"{where}.volumeMounts", ("name", "mountPath"))
    return obj


def dump(obj: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(obj, indent=2) + "\n"
    return yaml.safe_dump(obj, sort_keys=False)


def patch(pod: dict[str, Any], plan: Plan, container: str | None = None) -> dict[str, Any]:
    """hostPath volumes, volumeMounts and env for every container (or only `container`).
    Idempotent: patching twice gives the same manifest."""
    spec = pod["spec"]
    targets = [c for c in spec["containers"] if container is None or c.get("name") == container]
    if not targets:
        names = ", ".join(str(c.get("name")) for c in spec["containers"])
        raise ManifestError(f"no container named {container!r} (the Pod has: {names})")
    vols = [v for v in spec.get("volumes") or [] if not str(v.get("name", "")).startswith("tgs-")]
    mounts = []
    for i, m in enumerate(plan.mounts):
        name = _volume_name(i, m.container)
        vols.append({"name": name, "hostPath": {"path": m.host,
                                                "type": "Directory" if m.directory else "File"}})
        mounts.append({"name": name, "mountPath": m.container, "readOnly": m.readonly})
    spec["volumes"] = vols
    for c in targets:
        keep = [vm for vm in c.get("volumeMounts") or []
                if not str(vm.get("name", "")).startswith("tgs-")]
        c["volumeMounts"] = keep + [dict(m) for m in mounts]
        env = [e for e in c.get("env") or [] if e.get("name") not in plan.env]
        c["env"] = env + [{"name": k, "value": v} for k, v in sorted(plan.env.items())]
    return pod
