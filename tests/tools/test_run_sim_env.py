"""A job started by tgs-run runs on the simulated GPUs its controller serves:
the register reply hands it the simulator's state file and driver directory, whatever the
caller's own environment says."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tools_helpers import Ctl, tool

pytestmark = pytest.mark.timeout(60)

SHOW = "import os; print(os.environ.get('TGS_SIM_STATE')); print(os.environ['LD_LIBRARY_PATH'])"


def test_the_job_gets_the_controllers_simulator(ctl: Ctl) -> None:
    served = ctl.env["TGS_SIM_STATE"]
    env = {k: v for k, v in ctl.env.items() if k not in ("TGS_SIM_STATE", "LD_LIBRARY_PATH")}
    env["LD_LIBRARY_PATH"] = "/opt/mine"
    r = subprocess.run([tool("tgs-run"), "--", sys.executable, "-c", SHOW], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    state, ld = r.stdout.splitlines()
    assert state == served
    first, *rest = ld.split(":")
    assert first.endswith("/build/sim") and rest == ["/opt/mine"]


def test_the_controller_says_which_state_file_it_serves(ctl: Ctl) -> None:
    log = ctl.log.read_text()
    assert f"simulated GPUs: state file {ctl.env['TGS_SIM_STATE']}" in log
