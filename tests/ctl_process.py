"""A real tgs-controller on a private simulated GPU for tests of the tools and the frameworks
tier (tests/tools, tests/frameworks): its address, an environment pointing tools at it."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from proc_helpers import stop, tool, wait_for


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
        from tgs.client import Client
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


def start_ctl(tmp_path: Path, sim_env: dict[str, str], *args: str,
              preexec_fn: Callable[[], None] | None = None) -> Iterator[Ctl]:
    """tgs-controller --sim with a metrics port, private dirs; killed by pid at the end.
    `preexec_fn` runs in the child before the exec (e.g. a lower descriptor limit)."""
    runtime = Path(tempfile.mkdtemp(prefix="tgs-rt-"))     # ipc paths: 107 bytes at most
    log = tmp_path / "controller.log"
    env = dict(sim_env)
    env["TGS_CONTROLLER"] = f"ipc://{runtime / 'control.sock'}"
    env["TGS_RUNTIME_DIR"] = str(runtime)        # tgs-inject writes generated files here
    cmd = [tool("tgs-controller"), "--foreground", "--sim", "--state-dir",
           str(tmp_path / "state"), "--runtime-dir", str(runtime), "--metrics-port",
           "127.0.0.1:0", "--period-ms", "50", "--log-level", "debug", *args]
    with open(log, "wb") as logf:
        proc = subprocess.Popen(cmd, stderr=logf, env=env, preexec_fn=preexec_fn)
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
    from tgs.client import ControllerUnavailable
    try:
        c.status()
        return True
    except ControllerUnavailable:
        return False
