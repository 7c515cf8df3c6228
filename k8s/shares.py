"""GPUs as shares of an extended resource: IDs, health, preferred allocations.

Each GPU is advertised as N shares `<uuid>-share-<k>` (k = 0..N-1) of `tgs.io/gpu`; a
container that asks for `tgs.io/gpu: 2` gets two shares. GetPreferredAllocation packs a
container's shares on one GPU when one has enough; shares on several GPUs make one TGS job over
those GPUs (gpus_of: their GPUs in a stable order), with a part per GPU.

check_ids is the gate in front of every call that takes IDs from the kubelet: only IDs this
plugin advertises (ASCII, a known GPU, k below the share count, each once, no more of them
than there are shares) get as far as a job.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
# re.ASCII: \d would otherwise take Arabic-Indic or fullwidth digits, which int() accepts
# \Z, not $: $ also matches before a trailing newline
_SUFFIX = re.compile(r"^(?P<uuid>.+)-share-(?P<k>\d+)\Z", re.ASCII)
MAX_ID = 63
_SHOWN = 70                                       # of an ID quoted in an error


class ShareError(ValueError):
    """Device IDs the plugin cannot serve (unknown, malformed, or spanning GPUs)."""


@dataclass(frozen=True)
class Gpu:
    """A GPU as the controller reports it (status: devices)."""

    index: int
    uuid: str
    mem_total: int


def share_id(uuid: str, k: int) -> str:
    sid = f"{uuid}-share-{k}"
    if len(sid) > MAX_ID:
        raise ShareError(f"device ID {sid!r} is longer than the kubelet's {MAX_ID} characters")
    return sid


def split_id(sid: str) -> tuple[str, int]:
    m = _SUFFIX.match(sid)
    if not m:
        raise ShareError(f"{sid!r} is not a TGS share ID (<gpu uuid>-share-<k>)")
    return m.group("uuid"), int(m.group("k"))


def all_ids(gpus: Sequence[Gpu], nshares: int) -> list[str]:
    return [share_id(g.uuid, k) for g in gpus for k in range(nshares)]


def shown(sid: str) -> str:
    """An ID as an error quotes it: ASCII, one line, bounded (it comes from the caller)."""
    return ascii(sid[:_SHOWN]) + ("..." if len(sid) > _SHOWN else "")


def check_ids(ids: Sequence[str], gpus: Sequence[Gpu], nshares: int, *,
              what: str = "the container request", empty_ok: bool = False) -> None:
    """ShareError (one line) unless every ID is one this plugin advertises for `gpus`, each
    at most once, and there are no more than the advertised shares; duplicates and the count
    are checked first, so a huge request costs no parsing."""
    total = len(gpus) * nshares
    if not ids and not empty_ok:
        raise ShareError(f"no device IDs in {what}")
    if len(set(ids)) < len(ids):
        counts = Counter(ids)
        sid, n = counts.most_common(1)[0]
        raise ShareError(f"device ID {shown(sid)} is in {what} {n} times")
    if len(ids) > total:
        raise ShareError(f"{len(ids)} device IDs in {what}: this plugin advertises {total} "
                         f"shares ({len(gpus)} GPUs x {nshares})")
    known = {g.uuid for g in gpus}
    for sid in ids:
        m = _SUFFIX.match(sid) if sid.isascii() and len(sid) <= MAX_ID else None
        if m is None:
            raise ShareError(f"{shown(sid)} in {what} is not a TGS share ID "
                             "(<gpu uuid>-share-<k>, ASCII, at most 63 characters)")
        uuid, k = m.group("uuid"), m.group("k")
        if uuid not in known:
            raise ShareError(f"device ID {shown(sid)} in {what}: GPU {shown(uuid)} is not on "
                             "this node (or the controller does not report it)")
        if k != str(int(k)) or int(k) >= nshares:       # leading zeros were never advertised
            raise ShareError(f"device ID {shown(sid)} in {what}: not advertised (each GPU "
                             f"has shares 0-{nshares - 1})")


def gpu_of(ids: Sequence[str], gpus: Sequence[Gpu]) -> Gpu:
    """The one GPU these shares are on; ShareError when they span several or none."""
    if not ids:
        raise ShareError("no device IDs in the request")
    uuids = {split_id(i)[0] for i in ids}
    if len(uuids) > 1:
        raise ShareError(
            f"the shares {sorted(ids)} lie on {len(uuids)} GPUs ({', '.join(sorted(uuids))}): "
            "a TGS job is bound to one GPU for now; ask for shares of one GPU (the plugin's "
            "preferred allocation packs them) or use one container per GPU")
    (uuid,) = uuids
    for g in gpus:
        if g.uuid == uuid:
            return g
    raise ShareError(f"GPU {uuid} is not on this node (or the controller does not report it)")


def gpus_of(ids: Sequence[str], gpus: Sequence[Gpu]) -> list[tuple[Gpu, int]]:
    """The GPUs these shares are on, in the node's order (by index, a stable order whatever
    order the kubelet lists the IDs in), each with its number of shares; ShareError for
    none, an unknown GPU or a malformed ID."""
    if not ids:
        raise ShareError("no device IDs in the request")
    count: dict[str, int] = {}
    for i in dict.fromkeys(ids):
        uuid = split_id(i)[0]
        count[uuid] = count.get(uuid, 0) + 1
    known = {g.uuid: g for g in gpus}
    for uuid in count:
        if uuid not in known:
            raise ShareError(f"GPU {uuid} is not on this node (or the controller does not "
                             "report it)")
    return sorted(((known[u], n) for u, n in count.items()), key=lambda gn: gn[0].index)


def preferred(available: Iterable[str], must: Iterable[str], size: int) -> list[str]:
    """`size` shares, all on one GPU when possible: the GPU of the must-include shares,
    else the one with the most available shares (least loaded, ties by UUID); spills
    over to other GPUs only when no single GPU has enough."""
    must_l = list(dict.fromkeys(must))
    avail = [a for a in dict.fromkeys(available) if a not in must_l]
    by_gpu: dict[str, list[str]] = {}
    for a in avail:
        try:
            by_gpu.setdefault(split_id(a)[0], []).append(a)
        except ShareError:
            continue
    for ids in by_gpu.values():
        ids.sort(key=lambda s: split_id(s)[1])
    need = size - len(must_l)
    if need <= 0:
        return must_l[:size]
    must_gpus = {split_id(m)[0] for m in must_l if _SUFFIX.match(m)}
    order = sorted(by_gpu, key=lambda u: (u not in must_gpus, -len(by_gpu[u]), u))
    fits = [u for u in order if len(by_gpu[u]) >= need and (not must_gpus or u in must_gpus)]
    if fits:
        return must_l + by_gpu[fits[0]][:need]
    out = list(must_l)
    for u in order:
        out += by_gpu[u][: size - len(out)]
        if len(out) >= size:
            break
    return out
