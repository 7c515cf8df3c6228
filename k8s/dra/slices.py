"""The node's ResourceSlice(s): every GPU the controller reports, as share devices.

One pool per node (named after the node) of driver gpu.tgs.io, published as one
ResourceSlice (more only past the API's 128 devices per slice), resource.k8s.io/v1. Each GPU
is N devices `<uuid as a DNS label>-share-<k>` (k = 0..N-1), as the device plugin advertises
N shares of `tgs.io/gpu`: a claim asks for `count` shares, the scheduler counts them, and
one GPU's shares go to several claims (docs/kubernetes.md, "Sharing" says why not
consumable capacity). Each device carries:

  attributes  uuid (string), productName (string), index (int), share (int: k),
              shares (int: N), and the placement signal of the controller's status
              (controller/placement.py, the figures of the device plugin's node label):
              productionDutyPct (int, 0-100, in steps of 10) and idlePct (100 minus it);
              a GPU without a figure yet counts as idle, as for the node label
  capacity    memory: the share's part of the GPU (1/N of its memory)

Publisher.update republishes when the devices change (a GPU came or went: at once) or the
signal moved by a step (at most every `interval`), and repairs what it finds changed or
missing on the API server at the same pace, and at once after `check_soon` (the kubelet
registered the driver: a starting kubelet deletes its node's slices); `delete` removes the
slices at shutdown.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from typing import Any

from .. import signals
from ..shares import Gpu
from .kube import GROUP_VERSION, Kube, KubeError

log = logging.getLogger("tgs.k8s.dra")
MAX_DEVICES = 128                   # devices per ResourceSlice (resource.k8s.io/v1)
_LABEL_MAX = 63
_BAD = re.compile(r"[^a-z0-9-]+")
SIGNALS = ("productionDutyPct", "idlePct")
_UNITS = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))
_DEC = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
        **{u: 1 << s for u, s in _UNITS}}


def gpu_label(gpu: Gpu, nshares: int) -> str:
    """The GPU part of its devices' names: its UUID as a DNS label (lowercase, other
    characters as '-'), or gpu-<index> when that does not fit."""
    text = _BAD.sub("-", gpu.uuid.lower()).strip("-")
    if not text or len(text) + len(f"-share-{nshares - 1}") > _LABEL_MAX:
        return f"gpu-{gpu.index}"
    return text


def device_name(gpu: Gpu, k: int, nshares: int) -> str:
    return f"{gpu_label(gpu, nshares)}-share-{k}"


def device_map(gpus: Sequence[Gpu], nshares: int) -> dict[str, tuple[Gpu, int]]:
    """Device name -> (GPU, share index), for the names this node publishes."""
    return {device_name(g, k, nshares): (g, k) for g in gpus for k in range(nshares)}


def quantity(n: int) -> str:
    """Bytes as a Kubernetes quantity, in the API server's canonical form for binary
    suffixes (the largest unit that divides it), so what is read back compares equal."""
    for unit, shift in _UNITS:
        if n and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def parse_quantity(text: str) -> int | None:
    """A quantity's value as an integer (the forms this module and the API server write);
    None for anything else."""
    m = re.fullmatch(r"([0-9]+)(Ei|Pi|Ti|Gi|Mi|Ki|k|M|G|T|P|E|)", str(text).strip())
    return int(m.group(1)) * _DEC[m.group(2)] if m else None


def _pct(v: float) -> int:
    return int(round(v * 10)) * 10


def devices(gpus: Sequence[Gpu], nshares: int, status: dict[str, Any]) -> list[dict[str, Any]]:
    """The devices of the node's pool, in the node's order (GPU index, then share)."""
    duties = signals._duties(status)     # per GPU index; None: the controller has none
    names = {d.get("index"): d.get("name") for d in status.get("devices") or []
             if isinstance(d, dict)}
    out = []
    for g in sorted(gpus, key=lambda g: g.index):
        attrs: dict[str, Any] = {"uuid": {"string": g.uuid}, "index": {"int": g.index},
                                 "shares": {"int": nshares}}
        if names.get(g.index):
            attrs["productName"] = {"string": str(names[g.index])[:64]}
        if duties is not None:
            duty = _pct(duties.get(g.index, 0.0))          # no figure yet: idle
            attrs["productionDutyPct"] = {"int": duty}
            attrs["idlePct"] = {"int": 100 - duty}
        for k in range(nshares):
            out.append({"name": device_name(g, k, nshares),
                        "attributes": {**attrs, "share": {"int": k}},
                        "capacity": {"memory": {"value": quantity(g.mem_total // nshares)}}})
    return out


def slice_name(node: str, driver: str, i: int) -> str:
    return f"{node}-{driver}-{i}"[:253]


def desired(node: str, driver: str, devs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The slices' specs (without the pool's generation): devices in chunks of MAX_DEVICES."""
    chunks = [devs[i:i + MAX_DEVICES] for i in range(0, len(devs), MAX_DEVICES)] or [[]]
    return [{"driver": driver, "nodeName": node,
             "pool": {"name": node, "resourceSliceCount": len(chunks)}, "devices": chunk}
            for chunk in chunks]


def _norm_device(d: dict[str, Any]) -> dict[str, Any]:
    cap = {k: parse_quantity((v or {}).get("value", "")) for k, v in
           (d.get("capacity") or {}).items()}
    attrs = {k: {t: x for t, x in (v or {}).items() if x is not None}
             for k, v in (d.get("attributes") or {}).items()}
    return {"name": d.get("name"), "attributes": attrs, "capacity": cap}


def _norm(spec: dict[str, Any]) -> tuple[Any, ...]:
    """What this module sets in a slice's spec, comparable with what the API server
    returns (quantities in any form, defaulted fields left out)."""
    pool = spec.get("pool") or {}
    return (spec.get("driver"), spec.get("nodeName"), pool.get("name"),
            pool.get("resourceSliceCount"),
            [_norm_device(d) for d in spec.get("devices") or []])


def _structure(specs: list[dict[str, Any]]) -> list[Any]:
    """The specs without the placement signal: a change here is published at once."""
    out = []
    for s in specs:
        devs = [{**d, "attributes": {k: v for k, v in d["attributes"].items()
                                     if k not in SIGNALS}} for d in s["devices"]]
        out.append({**s, "devices": devs})
    return out


class Publisher:
    """Keeps the node's slices on the API server equal to the controller's figures."""

    def __init__(self, kube: Kube, node: str, driver: str, interval: float = 30.0) -> None:
        self.kube = kube
        self.node = node
        self.driver = driver
        self.interval = interval
        self.writes = 0                         # slices created or updated (for tests)
        self._want: list[dict[str, Any]] | None = None
        self._synced: list[dict[str, Any]] | None = None   # last specs written or found
        self._next = 0.0                        # monotonic: next look at the API server
        self._soon = False                      # check_soon: look at the next update

    def update(self, gpus: Sequence[Gpu], nshares: int, status: dict[str, Any],
               now: float | None = None) -> bool:
        """Called with every status poll: publish when due. Whether it wrote."""
        now = time.monotonic() if now is None else now
        want = desired(self.node, self.driver, devices(gpus, nshares, status))
        urgent = self._synced is None or _structure(want) != _structure(self._synced)
        if not urgent and not self._soon and now < self._next:
            return False
        self._soon = False                      # a check_soon from now on: another look
        try:
            wrote = self.sync(want)
        except KubeError as exc:
            log.warning("cannot publish the ResourceSlice of %s: %s", self.node, exc)
            self._synced = None                 # try again, after a pause
            self._next = now + min(self.interval, 5.0)
            return False
        self._synced = want
        self._next = now + self.interval
        return wrote

    def check_soon(self) -> None:
        """Look at the API server's slices at the next update rather than after the
        interval: a kubelet deletes its node's slices when it starts, so a restarted one
        that registers the driver again finds none."""
        self._soon = True

    def sync(self, want: list[dict[str, Any]]) -> bool:
        """Make the API server's slices of this node and driver be `want`: nothing when they
        are; else a new pool generation in every slice, extra slices deleted."""
        have = {s["metadata"]["name"]: s for s in self.kube.list_slices(self.node, self.driver)
                if isinstance(s.get("metadata"), dict)}
        names = [slice_name(self.node, self.driver, i) for i in range(len(want))]
        gens = {((s.get("spec") or {}).get("pool") or {}).get("generation") for s in have.values()}
        same = set(have) == set(names) and len(gens) == 1 and all(
            _norm(have[n].get("spec") or {}) == _norm(w) for n, w in zip(names, want))
        if same:
            return False
        gen = 1 + max((g for g in gens if isinstance(g, int)), default=0)
        for name, spec in zip(names, want):
            spec = {**spec, "pool": {**spec["pool"], "generation": gen}}
            obj: dict[str, Any] = {"apiVersion": GROUP_VERSION, "kind": "ResourceSlice",
                                   "metadata": {"name": name}, "spec": spec}
            if name in have:
                obj["metadata"]["resourceVersion"] = have[name]["metadata"].get(
                    "resourceVersion")
                self.kube.update_slice(obj)
            else:
                self.kube.create_slice(obj)
            self.writes += 1
        for name in set(have) - set(names):
            self.kube.delete_slice(name)
        log.info("published ResourceSlice %s: %d devices, pool generation %d",
                 ", ".join(names), sum(len(w["devices"]) for w in want), gen)
        return True

    def delete(self) -> None:
        """Remove this node's slices (at shutdown)."""
        try:
            for s in self.kube.list_slices(self.node, self.driver):
                self.kube.delete_slice(s["metadata"]["name"])
                log.info("deleted ResourceSlice %s", s["metadata"]["name"])
        except (KubeError, KeyError, TypeError) as exc:
            log.warning("cannot delete the ResourceSlices of %s: %s", self.node, exc)
        self._synced = None
