"""Helpers for the device plugin tests: a controller on private simulated GPUs that a test
can stop and start again, and the plugin itself as a process (tgs-device-plugin)."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from fake_kubelet import FakeApiServer, FakeKubelet
from proc_helpers import stop, tool, wait_for


class Controller:
    """tgs-controller --sim with private dirs; stop() and start() keep its state."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.runtime = root / "rt"
        self.runtime.mkdir(mode=0o700)
        self.state = root / "state"
        self.log = root / "controller.log"
        self.env = dict(env, TGS_RUNTIME_DIR=str(self.runtime),
                        TGS_CONTROLLER=f"ipc://{self.runtime / 'control.sock'}")
        self.proc: subprocess.Popen | None = None

    def client(self, timeout: float = 5.0):  # type: ignore[no-untyped-def]
        from tgs.client import Client
        return Client(endpoint=self.env["TGS_CONTROLLER"], timeout=timeout)

    def jobs(self) -> dict[str, dict]:
        with self.client() as c:
            return {j["name"]: j for j in c.list()}

    def _answers(self) -> bool:
        from tgs.client import ControllerUnavailable
        try:
            with self.client(timeout=1.0) as c:
                c.status()
            return True
        except ControllerUnavailable:
            return False

    def start(self) -> None:
        cmd = [tool("tgs-controller"), "--foreground", "--sim", "--state-dir", str(self.state),
               "--runtime-dir", str(self.runtime), "--period-ms", "50"]
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(cmd, stderr=logf, env=self.env)
        up = wait_for(lambda: self.proc.poll() is not None or self._answers(), timeout=20,
                      step=0.1)
        if self.proc.poll() is not None or not up:
            pytest.fail(f"controller did not come up: {self.log.read_text()}")

    def stop(self) -> None:
        stop(self.proc, signal.SIGTERM)
        self.proc = None


class PluginProc:
    """tgs-device-plugin pointed at the test kubelet, the controller and the API server."""

    def __init__(self, root: Path, kubelet: FakeKubelet, ctl: Controller, api: FakeApiServer,
                 *extra: str) -> None:
        self.log = root / "plugin.log"
        self.endpoint = "tgs-test.sock"
        cmd = [tool("tgs-device-plugin"), "--plugin-dir", str(kubelet.dir), "--endpoint",
               self.endpoint, "--shares", "4", "--timeout", "1", "--health-interval", "0.2",
               "--pod-resources", str(kubelet.pod_resources), "--api-server", api.url,
               "--log-level", "debug", *extra]
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(cmd, stderr=logf, env=ctl.env)

    def close(self) -> None:
        stop(self.proc, signal.SIGTERM)
