"""The oversubscription agent (kept for tests that load it by path): tests/agent_helpers.py."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from agent_helpers import OversubAgent as Agent  # noqa: E402

__all__ = ["Agent"]
