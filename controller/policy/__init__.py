"""Allocation policies: adaptive (default), las (Tiresias order among opportunistic jobs),
tgs (published law), static, none."""

from __future__ import annotations

from .adaptive import AdaptivePolicy
from .base import Decision, DeviceSignals, JobSignals, Policy
from .las import LasPolicy
from .none import NonePolicy
from .static import StaticPolicy
from .tgs_law import TgsLawPolicy

POLICIES = ("adaptive", "las", "tgs", "static", "none")


def make_policy(name: str, static_share: float = 0.3) -> Policy:
    if name == "adaptive":
        return AdaptivePolicy()
    if name == "las":
        return LasPolicy()
    if name == "tgs":
        return TgsLawPolicy()
    if name == "static":
        return StaticPolicy(static_share)
    if name == "none":
        return NonePolicy()
    raise ValueError(f"unknown policy {name!r} (choose from {', '.join(POLICIES)})")


__all__ = ["POLICIES", "Decision", "DeviceSignals", "JobSignals", "Policy", "make_policy"]
