"""Fixtures of the frameworks tier: the pinned venv (installed on first use, never skipped),
a private simulated GPU with a controller on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ctl_process import Ctl, start_ctl
from tgs.testbed import frameworks_venv


@pytest.fixture(scope="session")
def fw_python() -> Path:
    try:
        return frameworks_venv.ensure()
    except SystemExit as exc:             # a failed install fails the tier loudly
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def fw_env(sim_env: dict[str, str], tmp_path: Path, fw_python: Path) -> dict[str, str]:
    """sim_env for framework children: their caches inside the test's directory, the venv named
    (HOME moves)."""
    env = dict(sim_env)
    env["TGS_FRAMEWORKS_VENV"] = str(fw_python.parents[1])
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "inductor")
    env["CUPY_CACHE_DIR"] = str(tmp_path / "cupy")
    env["HOME"] = str(tmp_path)           # anything else a framework caches under ~
    return env


@pytest.fixture
def ctl(tmp_path: Path, fw_env: dict[str, str]) -> Iterator[Ctl]:
    yield from start_ctl(tmp_path, fw_env)
