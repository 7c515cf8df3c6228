"""What a claim asks of this node: read the ResourceClaim, take this driver's devices of its
allocation, and make one TGS job per request of the claim (its GPUs, and the settings of its
opaque config, params.py). Anything that stops the claim is a ClaimError, raised before any
job is registered."""

from __future__ import annotations

import hashlib

from . import params, slices
from .api import PLUGIN_TYPE
from .checkpoint import JobEntry
from .config import DriverConfig
from .kube import Kube, KubeError
from .node import NodeController

JOB_PREFIX = "dra-"


def job_name(claim_uid: str, request: str) -> str:
    """The TGS job of one request of a claim: the same claim and request always give the
    same name (a repeated prepare finds it), distinct ones differ. `dra-`, not the device
    plugin's `k8s-`: that plugin's garbage collection removes k8s-* jobs no pod holds."""
    digest = hashlib.sha256(f"{claim_uid}\n{request}".encode()).hexdigest()
    return f"{JOB_PREFIX}{digest[:16]}"


class ClaimError(Exception):
    """This claim cannot be prepared: the message is its error in the kubelet's answer."""


def plan(cfg: DriverConfig, kube: Kube | None, node: NodeController, ns: str, uid: str,
         name: str) -> list[tuple[JobEntry, list[dict]]]:
    """The jobs of a claim (one per request with devices of this driver), each with its
    allocation results; ClaimError for anything that stops the claim, before any job is
    registered."""
    if kube is None:
        raise ClaimError("no API server to read the ResourceClaim from")
    try:
        claim = kube.get_claim(ns, name)
    except KubeError as exc:
        raise ClaimError(f"reading ResourceClaim {ns}/{name}: {exc}") from None
    meta = claim.get("metadata") or {}
    if meta.get("uid") != uid:
        raise ClaimError(f"ResourceClaim {ns}/{name} has uid {meta.get('uid')}, not {uid} "
                         "(deleted and created again?)")
    alloc = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
    results = [r for r in alloc.get("results") or []
               if isinstance(r, dict) and r.get("driver") == cfg.driver]
    if not results:
        return []
    gpus = node.gpus()
    if not gpus:
        raise ClaimError("tgs-controller: no GPU list yet (is it running?)")
    known = slices.device_map(gpus, cfg.nshares)
    by_request: dict[str, list[dict]] = {}
    seen: set[str] = set()
    for r in results:
        dev, pool = str(r.get("device")), str(r.get("pool"))
        if pool != cfg.node_name:
            raise ClaimError(f"device {dev} is in pool {pool}, not this node's "
                             f"({cfg.node_name})")
        if dev not in known:
            raise ClaimError(f"device {dev} is not published by this node (GPUs: "
                             f"{', '.join(g.uuid for g in gpus)}; {cfg.nshares} "
                             "shares each)")
        if r.get("adminAccess"):
            raise ClaimError(f"device {dev}: admin access is not supported by {PLUGIN_TYPE} "
                             f"{cfg.driver}")
        if dev in seen:
            raise ClaimError(f"device {dev} is allocated twice in the claim")
        seen.add(dev)
        by_request.setdefault(str(r.get("request")), []).append(r)
    configs = [c for c in alloc.get("config") or [] if isinstance(c, dict)]
    out = []
    for request, rs in by_request.items():
        count: dict[str, int] = {}
        for r in rs:
            g, _ = known[r["device"]]
            count[g.uuid] = count.get(g.uuid, 0) + 1
        held = sorted(((g, count[g.uuid]) for g in gpus if g.uuid in count),
                      key=lambda gn: gn[0].index)
        try:
            s = params.settings(params.effective(configs, request, cfg.driver), held,
                                cfg.nshares, within_shares=not cfg.memory_above_shares,
                                namespace=ns, production_namespaces=cfg.production_namespaces)
        except params.ConfigError as exc:
            raise ClaimError(f"request {request}: {exc}") from None
        out.append((JobEntry(job_name(uid, request), s.priority, s.weight, s.mem_quota,
                             [g.uuid for g, _ in held]), rs))
    return out
