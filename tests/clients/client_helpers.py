"""Helpers for the third-party client tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from tgs.intercept import segment

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE / "scripts"
PROGS = HERE / "progs"
MiB = 1 << 20
QUOTA = 64 * MiB



def nvcc_path() -> str | None:
    return shutil.which("nvcc") or (
        "/usr/local/bin/nvcc" if Path("/usr/local/bin/nvcc").exists() else None
    )


def require_module(name: str, package: str) -> None:
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{package} is not installed (pip install -e '.[test]' installs it)")


@dataclass
class Result:
    rc: int
    out: dict[str, object]
    stderr: str


def run_json(script: str, env: dict[str, str], *args: str, timeout: float = 150) -> Result:
    """Run tests/clients/scripts/<script> in a child; its last stdout line is JSON."""
    p = subprocess.run([sys.executable, str(SCRIPTS / script), *args], env=env,
                       capture_output=True, text=True, timeout=timeout)
    lines = p.stdout.strip().splitlines()
    assert p.returncode == 0 and lines, f"rc {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return Result(p.returncode, json.loads(lines[-1]), p.stderr)




@dataclass
class QuotaJob:
    seg: segment.Segment
    env: dict[str, str]


def quota_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "quota refused" in line]
