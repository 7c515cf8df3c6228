"""A request the client gave up on is never applied later: freeze
the controller, let the tools time out, thaw it, and check that nothing changed."""

from __future__ import annotations

import json
import signal
import time
import uuid

import pytest
import zmq
from tgs.client import ControllerUnavailable
from tgs.controller import protocol as P
from tools_helpers import Ctl, wait_for

GIB = 1 << 30
pytestmark = pytest.mark.timeout(120)


class Frozen:
    """SIGSTOP the controller (all its threads) for the block; SIGCONT even on failure."""

    def __init__(self, ctl: Ctl) -> None:
        self.pid = ctl.proc.pid

    def __enter__(self) -> Frozen:
        import os
        os.kill(self.pid, signal.SIGSTOP)
        return self

    def __exit__(self, *exc: object) -> None:
        import os
        os.kill(self.pid, signal.SIGCONT)


def _settle(ctl: Ctl) -> None:
    """Let the thawed controller read everything queued for it (a status round trip
    queued behind them, plus a few periods)."""
    ctl.status()
    time.sleep(0.3)


def test_tools_that_timed_out_change_nothing(ctl: Ctl) -> None:
    assert ctl.run("tgsctl", "add", "keep", "--mem", "1GiB").returncode == 0
    with Frozen(ctl):
        r1 = ctl.run("tgs-run", "--timeout", "1", "--name", "ghost", "--", "true")
        r2 = ctl.run("tgsctl", "--timeout", "1", "set", "keep", "--mem", "3GiB")
    assert r1.returncode == 125, r1.stderr           # tgs-run's own failure (docs/usage.md)
    assert r2.returncode == 2, r2.stderr
    for r in (r1, r2):
        assert "no reply from the controller" in r.stderr and "Traceback" not in r.stderr
    _settle(ctl)
    jobs = ctl.jobs()
    assert "ghost" not in jobs
    assert jobs["keep"]["mem_quota"] == GIB


def test_late_request_on_a_live_connection_expires(ctl: Ctl) -> None:
    """The request reaches the controller's socket (the connection was up before the
    freeze) and is read after the client gave up: refused as expired, not applied."""
    assert ctl.run("tgsctl", "add", "keep", "--mem", "1GiB").returncode == 0
    errors = ctl.status()["request_errors"]
    c1, c2 = ctl.client(timeout=1.0), ctl.client(timeout=1.0)
    try:
        c1.status()                                      # connected and handshaken
        c2.status()
        with Frozen(ctl):
            with pytest.raises(ControllerUnavailable):
                c1.set("keep", mem_quota=3 * GIB)
            with pytest.raises(ControllerUnavailable):
                c2.register("ghost", ephemeral=True)
    finally:
        c1.close()
        c2.close()
    _settle(ctl)
    assert wait_for(lambda: ctl.status()["request_errors"] >= errors + 2, timeout=5)
    jobs = ctl.jobs()
    assert "ghost" not in jobs and jobs["keep"]["mem_quota"] == GIB


def test_without_a_deadline_a_late_request_is_applied(ctl: Ctl) -> None:
    """The control case: the same late delivery without deadline_ms IS applied (this is
    what the deadline prevents, and shows the test above exercises the late path)."""
    assert ctl.run("tgsctl", "add", "keep", "--mem", "1GiB").returncode == 0
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(ctl.addr)
    try:
        sock.send(json.dumps({"v": P.PROTOCOL_VERSION, "id": "s", "type": "status"}).encode())
        assert sock.poll(10_000) and json.loads(sock.recv())["ok"]
        with Frozen(ctl):
            sock.send(json.dumps({"v": P.PROTOCOL_VERSION, "id": uuid.uuid4().hex,
                                  "type": "set", "name": "keep",
                                  "mem_quota": 3 * GIB}).encode())
            time.sleep(0.5)
    finally:
        sock.close(0)
    assert wait_for(lambda: ctl.jobs()["keep"]["mem_quota"] == 3 * GIB, timeout=5)
