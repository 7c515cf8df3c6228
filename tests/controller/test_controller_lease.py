"""Leases through a controller restart: the holders' locks outlive the daemon."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from ctl_helpers import daemon, wait_for
from tgs.controller.lease import take

pytestmark = pytest.mark.timeout(120)


def _names(d) -> set[str]:
    with d.client() as c:
        return {j["name"] for j in c.list()}


def test_leased_job_survives_a_controller_restart(tmp_path: Path) -> None:
    with daemon(tmp_path) as d:
        with d.client() as c:
            reply = c.register("held", ephemeral=True, lease_uid=os.geteuid())
            c.register("dropped", ephemeral=True, lease_uid=os.geteuid())
        fd = take(reply["lease"])
        try:
            time.sleep(0.3)
            d.kill(signal.SIGKILL)
            d.start()
            time.sleep(0.5)                          # ten periods of the new daemon
            # the held lease keeps its job; the one nobody took is gone (after a restart
            # an untaken lease is not given the grace again)
            assert _names(d) == {"held"}
        finally:
            os.close(fd)
        assert wait_for(lambda: _names(d) == set(), timeout=5)
        assert not Path(reply["lease"]).exists()
