"""Allocation policies: adaptive (default), las (Tiresias order among opportunistic jobs),
tgs (published law), static, none."""

from __future__ import annotations

import os

from .adaptive import AdaptivePolicy
from .base import Decision, DeviceSignals, JobSignals, Policy
from .las import THRESHOLDS, LasPolicy
from .none import NonePolicy
from .static import StaticPolicy
from .tgs_law import TgsLawPolicy

POLICIES = ("adaptive", "las", "tgs", "static", "none")


def make_policy(name: str, static_share: float = 0.3) -> Policy:
    if name == "adaptive":
        return AdaptivePolicy()
    if name == "las":
        return LasPolicy(las_thresholds())
    if name == "tgs":
        return TgsLawPolicy()
    if name == "static":
        return StaticPolicy(static_share)
    if name == "none":
        return NonePolicy()
    raise ValueError(f"unknown policy {name!r} (choose from {', '.join(POLICIES)})")


def las_thresholds() -> tuple[float, ...]:
    """TGS_LAS_THRESHOLDS ("1,3": GPU-seconds between queues) or LAS's defaults."""
    text = os.environ.get("TGS_LAS_THRESHOLDS", "").strip()
    if not text:
        return THRESHOLDS
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"TGS_LAS_THRESHOLDS wants GPU-seconds like 1,3 (got {text!r})") from None


__all__ = ["POLICIES", "Decision", "DeviceSignals", "JobSignals", "Policy", "make_policy"]
