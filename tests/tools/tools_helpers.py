"""Helpers for the tools tests: a real controller on a private simulated GPU, probes."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from proc_helpers import stop, tool, wait_for

HERE = Path(__file__).resolve().parent
MEMPROBE = HERE / "memprobe.py"


@dataclass
class Ctl:
    """A running tgs-controller: its address and an environment that points tools at it."""

    proc: subprocess.Popen
    runtime: Path
    env: dict[str, str]
    log: Path

    @property
    def addr(self) -> str:
        return f"ipc://{self.runtime / 'control.sock'}"

    def client(self, timeout: float = 5.0):  # type: ignore[no-untyped-def]
        from tgs.controller.client import Client
        return Client(endpoint=self.addr, timeout=timeout)

    def status(self) -> dict:
        with self.client() as c:
            return c.status()

    def jobs(self) -> dict[str, dict]:
        with self.client() as c:
            return {j["name"]: j for j in c.list()}

    def run(self, name: str, *args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
        return subprocess.run([tool(name), *args], env=self.env, capture_output=True,
                              text=True, timeout=timeout, **kw)

    def json(self, name: str, *args: str) -> dict:
        r = self.run(name, *args)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


def cdi_spec(ctl: Ctl, job: str, out: Path, *extra: str) -> Path:
    """`tgs-inject cdi` for job into out (extra: e.g. --rootfs DIR): the spec's path; skips
    the test where out cannot be written."""
    r = ctl.run("tgs-inject", "cdi", "--job", job, "--out", str(out), *extra)
    if r.returncode != 0 and "cannot write" in r.stderr:
        pytest.skip(f"cannot write a CDI spec into {out}: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    return Path(r.stdout.split(":")[0])


def start_ctl(tmp_path: Path, sim_env: dict[str, str], *args: str) -> Iterator[Ctl]:
    """tgs-controller --sim with a metrics port, private dirs; killed by pid at the end."""
    runtime = Path(tempfile.mkdtemp(prefix="tgs-rt-"))     # ipc paths: 107 bytes at most
    log = tmp_path / "controller.log"
    env = dict(sim_env)
    env["TGS_CONTROLLER"] = f"ipc://{runtime / 'control.sock'}"
    env["TGS_RUNTIME_DIR"] = str(runtime)        # tgs-inject writes generated files here
    cmd = [tool("tgs-controller"), "--foreground", "--sim", "--state-dir",
           str(tmp_path / "state"), "--runtime-dir", str(runtime), "--metrics-port",
           "127.0.0.1:0", "--period-ms", "50", "--log-level", "debug", *args]
    with open(log, "wb") as logf:
        proc = subprocess.Popen(cmd, stderr=logf, env=env)
    c = Ctl(proc, runtime, env, log)
    try:
        up = wait_for(lambda: proc.poll() is not None or _answers(c), timeout=20, step=0.1)
        if proc.poll() is not None or not up:
            pytest.fail(f"controller did not come up: {log.read_text()}")
        yield c
    finally:
        stop(proc, signal.SIGTERM)
        shutil.rmtree(runtime, ignore_errors=True)


def _answers(c: Ctl) -> bool:
    from tgs.controller.client import ControllerUnavailable
    try:
        c.status()
        return True
    except ControllerUnavailable:
        return False


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

