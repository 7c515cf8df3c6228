"""Helpers shared by the simulator tests."""

from __future__ import annotations

import time


def start_at(delay: float = 0.4) -> str:
    """A CLOCK_REALTIME instant shortly ahead, for starting processes together."""
    return f"{time.time() + delay:.6f}"
