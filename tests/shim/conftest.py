"""Shim test fixtures: C probes built once per session, segments, and an injected environment."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shim_helpers import Job
from tgs.intercept import segment

ROOT = Path(__file__).resolve().parents[2]
PROGS = Path(__file__).resolve().parent / "progs"
COMMON = ROOT / "tests" / "progs"  # probe_common.h, shared with tests/sim/progs
OUT = ROOT / "build" / "tests"


def _build(name: str) -> Path:
    """gcc progs/<name>.c -> build/tests/<name>, atomically (parallel sessions may race)."""
    src = PROGS / f"{name}.c"
    exe = OUT / name
    deps = (src, ROOT / "libshim" / "shim.h", ROOT / "libshim" / "state.h",
            COMMON / "probe_common.h")
    if exe.exists() and exe.stat().st_mtime >= max(d.stat().st_mtime for d in deps):
        return exe
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = OUT / f".{name}.{os.getpid()}"
    cmd = [
        "gcc", "-std=gnu11", "-O1", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
        f"-I{ROOT / 'contracts' / 'include'}", f"-I{ROOT / 'libshim'}", f"-I{COMMON}",
        str(src), "-o", str(tmp),
        "-Wl,--no-as-needed", f"-L{ROOT / 'build' / 'sim'}", "-lcuda", "-ldl", "-lpthread",
    ]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    os.replace(tmp, exe)
    return exe


@pytest.fixture(scope="session")
def probe_bin() -> Path:
    return _build("probe")


@pytest.fixture(scope="session")
def resolve_bin() -> Path:
    return _build("resolve")


@pytest.fixture(scope="session")
def capture_bin() -> Path:
    return _build("capture")


@pytest.fixture(scope="session")
def drain_bin() -> Path:
    return _build("drain")


@pytest.fixture
def shim_env(sim_env: dict[str, str], shim_lib: Path) -> dict[str, str]:
    env = dict(sim_env)
    env["LD_PRELOAD"] = str(shim_lib)
    return env


@pytest.fixture
def job(tmp_path: Path, shim_env: dict[str, str]) -> Iterator[Job]:
    seg = segment.create(tmp_path / "job.seg", "test-job", mem_quota=1 << 20, nslots=8)
    env = dict(shim_env)
    env["TGS_SEGMENT"] = str(seg.path)
    try:
        yield Job(seg, env)
    finally:
        seg.close()


@pytest.fixture
def closing() -> Iterator[list[Any]]:
    """Things with close() (agents, segments) closed in reverse order after the test."""
    things: list[Any] = []
    yield things
    for t in reversed(things):
        t.close()
