"""A job's settings from its pod's annotations.

  tgs.io/priority   production | opportunistic          (default: opportunistic)
  tgs.io/weight     1-1000, share among opportunistic jobs (default: 1)
  tgs.io/memory     a size (8GiB, 512MiB, 4096) or "unlimited" (0: unlimited too)
  gpu-memory        KAI-Scheduler's: MiB (a plain number) or a size with a unit
  gpu-fraction      KAI-Scheduler's: a fraction of the GPU's memory, 0 < f <= 1

Memory: tgs.io/memory wins, then gpu-memory, then gpu-fraction; with none of them the
job gets its shares' part of the GPU (k of N shares: k/N of its memory).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tgs.tools.sizes import SizeError, parse_size

PRIORITY = "tgs.io/priority"
WEIGHT = "tgs.io/weight"
MEMORY = "tgs.io/memory"
KAI_MEMORY = "gpu-memory"
KAI_FRACTION = "gpu-fraction"
PRIORITIES = ("production", "opportunistic")
MIB = 1 << 20


class AnnotationError(ValueError):
    pass


@dataclass(frozen=True)
class JobSettings:
    priority: str = "opportunistic"
    weight: int = 1
    mem_quota: int | None = None         # bytes; None: unlimited

    def changes(self) -> dict[str, Any]:
        """Fields for the controller's `set`."""
        return {"priority": self.priority, "weight": self.weight, "mem_quota": self.mem_quota}


def share_quota(mem_total: int, shares: int, nshares: int) -> int:
    return mem_total * shares // nshares


def settings(ann: Mapping[str, str], *, mem_total: int, shares: int, nshares: int,
             within_shares: bool = True) -> JobSettings:
    """JobSettings for a container holding `shares` of the `nshares` shares of a GPU with
    `mem_total` bytes; AnnotationError names the bad annotation. With `within_shares` a
    quota may not exceed the shares' part of the GPU: the scheduler, which counts shares,
    then never promises a GPU's memory twice."""
    prio = ann.get(PRIORITY, "opportunistic").strip()
    if prio not in PRIORITIES:
        raise AnnotationError(f"{PRIORITY}: {prio!r} is not one of {', '.join(PRIORITIES)}")
    text = ann.get(WEIGHT, "1").strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 1000:
        raise AnnotationError(f"{WEIGHT}: {text!r} is not an integer from 1 to 1000")
    mem = _memory(ann, mem_total, shares, nshares)
    part = share_quota(mem_total, shares, nshares)
    if within_shares and (mem is None or mem > part):
        raise AnnotationError(
            f"memory quota {'unlimited' if mem is None else mem} is above the {part} bytes of "
            f"the {shares} of {nshares} shares this container holds: ask for more tgs.io/gpu "
            "shares (or run the plugin with --memory-above-shares)")
    return JobSettings(prio, int(text), mem)


def _memory(ann: Mapping[str, str], mem_total: int, shares: int, nshares: int) -> int | None:
    if MEMORY in ann:
        text = ann[MEMORY].strip()
        if text.lower() == "unlimited":
            return None
        return _size(MEMORY, text) or None      # a limit: 0 is unlimited (docs/usage.md)
    if KAI_MEMORY in ann:
        text = ann[KAI_MEMORY].strip()
        if text.isascii() and text.isdigit():
            return int(text) * MIB
        return _size(KAI_MEMORY, text)
    if KAI_FRACTION in ann:
        text = ann[KAI_FRACTION].strip()
        try:
            frac = float(text)
        except ValueError:
            frac = math.nan
        if not 0 < frac <= 1:
            raise AnnotationError(f"{KAI_FRACTION}: {text!r} is not a fraction in (0, 1]")
        return int(mem_total * frac)
    return share_quota(mem_total, shares, nshares)


def _size(key: str, text: str) -> int:
    try:
        return parse_size(text)
    except SizeError as exc:
        raise AnnotationError(f"{key}: {exc}") from None
