"""Patch a Pod manifest (YAML or JSON) with a TGS job's volumes, mounts and environment."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from .injection import Plan


class ManifestError(Exception):
    pass


def _volume_name(i: int, container_path: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", container_path.lower()).strip("-")
    return f"tgs-{i}-{base}"[:63].rstrip("-")


def load(text: str) -> tuple[dict[str, Any], str]:
    """(manifest, 'json' | 'yaml')."""
    stripped = text.lstrip()
    try:
        if stripped.startswith("{"):
            return _pod(json.loads(text)), "json"
        return _pod(yaml.safe_load(text)), "yaml"
    except (ValueError, yaml.YAMLError) as exc:
        raise ManifestError(f"not a valid manifest: {exc}") from None


def _pod(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ManifestError("the manifest is not an object")
    kind = obj.get("kind")
    if kind != "Pod":
        raise ManifestError(f"expected kind: Pod, got {kind!r}")
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list) \
            or not spec["containers"]:
        raise ManifestError("the Pod has no spec.containers")
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
