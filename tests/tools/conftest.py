"""Fixtures for the tools tests (the helpers live in tools_helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tools_helpers import Ctl, Probe, probe_list, start_ctl


@pytest.fixture
def ctl(tmp_path: Path, sim_env: dict[str, str]) -> Iterator[Ctl]:
    """tgs-controller --sim with a metrics port and private dirs; stopped by pid at the end."""
    yield from start_ctl(tmp_path, sim_env)


@pytest.fixture
def probes() -> Iterator[list[Probe]]:
    """memprobe processes a test starts; killed by pid at the end."""
    yield from probe_list()
