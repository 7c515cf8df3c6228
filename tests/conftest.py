"""Shared fixtures: build artefact paths and a private simulated GPU per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
SIM_DIR = BUILD / "sim"
SIM_LIB = SIM_DIR / "libcuda.so.1"
SHIM_LIB = BUILD / "libtgs.so"
WORKLOAD = BUILD / "bin" / "tgs-workload"


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make` first (make test does)")
    return path


@pytest.fixture
def sim_lib() -> Path:
    return _require(SIM_LIB)


@pytest.fixture
def shim_lib() -> Path:
    return _require(SHIM_LIB)


@pytest.fixture
def workload_bin() -> Path:
    return _require(WORKLOAD)


@pytest.fixture
def sim_env(tmp_path: Path, sim_lib: Path) -> dict[str, str]:
    """Environment for a child process that uses a private simulated GPU.

    Each test gets its own state file, so tests can run in parallel.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TGS_", "LD_PRELOAD"))}
    env["TGS_SIM_STATE"] = str(tmp_path / "sim-state")
    env["LD_LIBRARY_PATH"] = str(SIM_DIR) + (
        ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else ""
    )
    return env
