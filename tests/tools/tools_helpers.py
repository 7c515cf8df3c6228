"""Helpers for the tools tests: a real controller on a private simulated GPU, probes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# re-exported: the tools tests import the controller and process helpers from here
from ctl_process import Ctl, start_ctl  # noqa: F401
from proc_helpers import stop, tool, wait_for  # noqa: F401

HERE = Path(__file__).resolve().parent
MEMPROBE = HERE / "memprobe.py"


def cdi_spec(ctl: Ctl, job: str, out: Path, *extra: str) -> Path:
    """`tgs-inject cdi` for job into out (extra: e.g. --rootfs DIR): the spec's path; skips
    the test where out cannot be written."""
    r = ctl.run("tgs-inject", "cdi", "--job", job, "--out", str(out), *extra)
    if r.returncode != 0 and "cannot write" in r.stderr:
        pytest.skip(f"cannot write a CDI spec into {out}: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    return Path(r.stdout.split(":")[0])


class Probe:
    """memprobe.py under tgs-run (or any wrapper): send a command, read its answer line."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.read()
        if line != "ready":
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            raise AssertionError(f"probe did not start: {line!r} {err}")

    def read(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def ask(self, cmd: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self.read()

    def info(self) -> tuple[int, int]:
        words = self.ask("info").split()
        assert words[0] == "info", words
        return int(words[1]), int(words[2])

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=30)


def probe_list() -> Iterator[list[Probe]]:
    made: list[Probe] = []
    try:
        yield made
    finally:
        for p in made:
            stop(p.proc)


def probe_cmd(*run_args: str) -> list[str]:
    return [tool("tgs-run"), *run_args, "--", sys.executable, str(MEMPROBE)]

