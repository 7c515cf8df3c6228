"""Helpers shared by the shim tests (imported by name: tests/shim is on sys.path)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tgs.intercept import segment


@dataclass
class Job:
    """A segment plus the environment that injects the shim into a child using it."""

    seg: segment.Segment
    env: dict[str, str]


def run_probe(exe: Path, env: dict[str, str], *cmds: str, timeout: float = 60) -> list[str]:
    """Run the probe to completion; its stdout lines (asserts a clean exit)."""
    p = subprocess.run([str(exe), *cmds], env=env, capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"probe failed rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout.splitlines()


def tgs_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("tgs: ")]


def finish(p: subprocess.Popen[str], timeout: float = 20) -> None:
    """Close a probe's stdin (its "ready" waits end) and reap it; kill it if it hangs."""
    if p.stdin:
        p.stdin.close()
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
