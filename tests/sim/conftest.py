"""Fixtures for the simulator tests: C helper programs built once per session."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from nvml_helpers import NVML_LIB

ROOT = Path(__file__).resolve().parents[2]
PROGS = Path(__file__).resolve().parent / "progs"
COMMON = ROOT / "tests" / "progs"  # probe_common.h, shared with tests/shim/progs
OUT = ROOT / "build" / "tests"

# name -> extra link flags
_PROGS = {
    "load": ["-ldl"],
    "smoke": ["-L" + str(ROOT / "build" / "sim"), "-lcuda"],
    "api": ["-L" + str(ROOT / "build" / "sim"), "-lcuda", "-ldl"],
    "memhold": ["-L" + str(ROOT / "build" / "sim"), "-lcuda"],
    "capture": ["-L" + str(ROOT / "build" / "sim"), "-lcuda", "-lpthread"],
    "export": ["-L" + str(ROOT / "build" / "sim"), "-lcuda", "-lpthread"],
}


def _build(name: str, flags: list[str]) -> Path:
    src = PROGS / f"{name}.c"
    out = OUT / f"sim-{name}"
    newest = max(src.stat().st_mtime, (COMMON / "probe_common.h").stat().st_mtime)
    if out.exists() and out.stat().st_mtime >= newest:
        return out
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    cmd = ["gcc", "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
           "-I", str(ROOT / "contracts" / "include"), "-I", str(COMMON),
           "-o", str(tmp), str(src), *flags]
    subprocess.run(cmd, check=True)
    os.replace(tmp, out)  # atomic: parallel sessions never see half a binary
    return out


@pytest.fixture(scope="session")
def sim_progs() -> dict[str, Path]:
    if not (ROOT / "build" / "sim" / "libcuda.so.1").exists():
        pytest.fail("build/sim/libcuda.so.1 is missing: run `make` first")
    return {name: _build(name, flags) for name, flags in _PROGS.items()}


@pytest.fixture
def nvml_env(sim_env: dict[str, str]) -> dict[str, str]:
    """sim_env for pynvml children: the simulated NVML built, pynvml installed."""
    if not NVML_LIB.exists():
        pytest.fail(f"{NVML_LIB} is missing: run `make` first")
    pytest.importorskip("pynvml")
    return sim_env
