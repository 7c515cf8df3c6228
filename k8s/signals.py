"""A placement signal on the node object: how much of its best GPU's time production leaves.

    tgs.io/gpu-idle-pct = max over the node's GPUs of (1 - production duty), in steps of 10

The production duty is the adaptive policy's per-GPU EWMA of "production busy" (the
controller's status, policy_state[gpu].duty); a GPU without jobs counts as idle. A
scheduler steers opportunistic pods with a preferred node affinity on this label (numeric
`Gt`), see docs/kubernetes.md. Policies that keep no duty publish nothing.
"""

from __future__ import annotations

from typing import Any

LABEL = "tgs.io/gpu-idle-pct"


def idle_pct(status: dict[str, Any]) -> int | None:
    devs = status.get("devices") or []
    notes = status.get("policy_state") or {}
    if not devs or not isinstance(notes, dict):
        return None
    best = 0.0
    for d in devs:
        note = notes.get(str(d.get("index")))
        if note is None:
            best = 1.0                                   # no jobs on it: all idle
            continue
        duty = note.get("duty") if isinstance(note, dict) else None
        if not isinstance(duty, (int, float)) or isinstance(duty, bool):
            return None                                  # this policy keeps no duty
        best = max(best, 1.0 - min(1.0, max(0.0, float(duty))))
    return int(round(best * 10)) * 10
