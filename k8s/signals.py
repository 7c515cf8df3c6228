"""A placement signal on the node object: how much of its best GPU's time production leaves.

    tgs.io/gpu-idle-pct = max over the node's GPUs of (1 - production duty), in steps of 10

The production duty is the controller's per-GPU figure (status ``placement[].production_duty``,
controller/placement.py: the share of time production had work queued, averaged over 30 s),
the same one it exports as the ``tgs_gpu_production_duty`` metric, under every policy; a GPU
the controller has no figure for yet counts as idle. A controller without ``placement`` (older)
is read through the adaptive policy's duty (``policy_state[gpu].duty``); without either nothing
is published. A scheduler steers opportunistic pods with a preferred node affinity on this
label (numeric `Gt`), see docs/kubernetes.md.
"""

from __future__ import annotations

from typing import Any

LABEL = "tgs.io/gpu-idle-pct"


def _number(v: Any) -> float | None:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    return min(1.0, max(0.0, float(v)))


def _duties(status: dict[str, Any]) -> dict[int, float] | None:
    """Production duty per GPU index, from status; None when the controller gives none."""
    placement = status.get("placement")
    if isinstance(placement, list):
        out: dict[int, float] = {}
        for g in placement:
            duty = _number(g.get("production_duty")) if isinstance(g, dict) else None
            if duty is None or not isinstance(g.get("index"), int):
                return None
            out[g["index"]] = duty
        return out
    notes = status.get("policy_state")
    if not isinstance(notes, dict):
        return None
    out = {}
    for key, note in notes.items():
        duty = _number(note.get("duty")) if isinstance(note, dict) else None
        if duty is None or not str(key).isdigit():
            return None                                  # this policy keeps no duty
        out[int(key)] = duty
    return out


def idle_pct(status: dict[str, Any]) -> int | None:
    devs = status.get("devices") or []
    duties = _duties(status)
    if not devs or duties is None:
        return None
    best = 0.0
    for d in devs:
        duty = duties.get(d.get("index")) if isinstance(d, dict) else None
        best = max(best, 1.0 if duty is None else 1.0 - duty)   # no figure yet: all idle
    return int(round(best * 10)) * 10
