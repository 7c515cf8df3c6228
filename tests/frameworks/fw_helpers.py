"""Helpers of the frameworks tier: run a probe in the frameworks venv, bare or under tgs-run."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proc_helpers import tool

HERE = Path(__file__).resolve().parent
JOBS = HERE / "jobs"
MiB = 1 << 20


@dataclass
class Result:
    rc: int
    out: dict[str, Any]
    stderr: str


def run_probe(py: Path, script: str, check: str | None, env: dict[str, str],
              wrap: list[str] | None = None, timeout: float = 240) -> Result:
    """jobs/<script> [check] with the frameworks venv's python, under `wrap` (a tgs-run
    command line ending in --) when given; its last stdout line is JSON."""
    argv = [str(py), str(JOBS / script), *([check] if check else [])]
    if wrap:
        argv = [tool("tgs-run"), *wrap, "--", *argv]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    lines = p.stdout.strip().splitlines()
    out = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    return Result(p.returncode, out, p.stderr)


def ok(r: Result) -> dict[str, Any]:
    assert r.rc == 0 and "error" not in r.out, f"rc {r.rc} {r.out}\n{r.stderr[-4000:]}"
    return r.out
