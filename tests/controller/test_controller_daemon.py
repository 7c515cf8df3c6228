"""The daemon as a subprocess: socket protocol, liveness reclaim, restart after kill -9."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import zmq
from ctl_helpers import daemon, start_fake_proc, stop, wait_for
from tgs.client import Client, ClientError, ControllerUnavailable
from tgs.controller import protocol as P
from tgs.intercept import segment as S

pytestmark = pytest.mark.timeout(90)


def test_client_fails_fast_without_controller(tmp_path: Path) -> None:
    with pytest.raises(ControllerUnavailable, match="tgs-controller"):
        Client(runtime_dir=tmp_path, timeout=0.5).status()
    ctx = zmq.Context.instance()
    s = ctx.socket(zmq.ROUTER)          # a socket that never answers
    s.bind(f"ipc://{tmp_path}/control.sock")
    try:
        with pytest.raises(ControllerUnavailable, match="within"):
            Client(runtime_dir=tmp_path, timeout=0.3).status()
    finally:
        s.close(0)


def test_socket_garbage_and_metrics(tmp_path: Path) -> None:
    with daemon(tmp_path) as d:
        c = d.client()
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVTIMEO, 5000)
        sock.connect(c.endpoint)
        try:
            for frames in ([b"\xff" * 10], [b"a", b"b", b"c"], [b"x" * (P.MAX_FRAME + 1)],
                           [b"[]"], [b'{"v":1,"id":"q","type":"status","x":NaN}']):
                sock.send_multipart(frames)
                reply = json.loads(sock.recv_multipart()[-1])
                assert reply["ok"] is False and reply["error"]["code"] in P.ERROR_CODES
        finally:
            sock.close(0)
        c.register("m1")
        sub = c.subscribe()
        try:
            assert sub.poll(5000)
            topic, body = sub.recv_multipart()
            assert topic == b"metrics" and json.loads(body)["jobs"][0]["name"] == "m1"
        finally:
            sub.close(0)
        st = c.status()
        assert st["policy"] == "adaptive" and st["request_errors"] >= 5 and st["steps"] > 0


def test_dead_process_seen_and_job_done(tmp_path: Path) -> None:
    with daemon(tmp_path) as d:
        c = d.client()
        seg_path = c.register("eph", ephemeral=True)["segment"]
        c.register("keep", priority="production", mem_quota=1 << 30)
        keep = c.list()[1]["segment"]
        p1 = p2 = p3 = None
        try:
            p1 = start_fake_proc(seg_path)
            p3 = start_fake_proc(keep, busy=1)
            with S.open_segment(seg_path) as seg:
                seg.slot(0).mem_used = 1 << 20
                seg.header.mem_used = 1 << 20
            assert wait_for(lambda: c.list()[0]["state"] == "running")
            assert wait_for(lambda: c.list()[0].get("mem_used") == 1 << 20)
            p2 = start_fake_proc(seg_path)
            assert wait_for(lambda: c.list()[0].get("processes") == 2)
            stop(p1)                         # kill -9: the kernel drops its slot lock
            assert wait_for(lambda: c.list()[0].get("processes") == 1, timeout=1.5)
            # usage = the live slots' sum; the dead slot itself is left to the job's next
            # process (the controller never writes a tenant's segment)
            assert c.list()[0]["mem_used"] == 0
            with S.open_segment(seg_path) as seg:
                assert seg.ledger()[0] == 1 << 20
            assert c.status()["dead_seen"] >= 1
            stop(p3)
            assert wait_for(lambda: [j["state"] for j in c.list() if j["name"] == "keep"]
                            == ["done"])
            stop(p2)                         # last process of an ephemeral job: removed
            assert wait_for(lambda: [j["name"] for j in c.list()] == ["keep"])
            assert not os.path.exists(seg_path)
        finally:
            for p in (p1, p2, p3):
                stop(p)


def test_restart_after_kill9_keeps_jobs_and_control(tmp_path: Path) -> None:
    proc = None
    with daemon(tmp_path) as d:
        try:
            c = d.client()
            c.register("prod", priority="production", mem_quota=2 << 30)
            seg_path = c.register("opp", weight=3, mem_quota=1 << 30)["segment"]
            proc = start_fake_proc(seg_path, work_rate=1e6)
            assert wait_for(lambda: c.list()[1].get("processes") == 1)
            with S.open_segment(seg_path) as seg:
                assert seg.header.gate_flags == S.GATE_WAIT
            d.kill(signal.SIGKILL)
            with pytest.raises((ControllerUnavailable, ClientError)):
                Client(runtime_dir=d.runtime, timeout=0.3).status()
            with S.open_segment(seg_path) as seg:   # fail static: controls stay in place
                assert seg.header.gate_flags == S.GATE_WAIT
                seg.header.gate_flags = 0            # damage it: the new daemon must repair
                seg.header.mem_quota = 5
            d.start()
            c = d.client()
            jobs = {j["name"]: j for j in c.list()}
            assert set(jobs) == {"prod", "opp"} and jobs["opp"]["weight"] == 3
            with S.open_segment(seg_path) as seg:
                assert wait_for(lambda: seg.header.gate_flags == S.GATE_WAIT, timeout=2)
                assert seg.header.mem_quota == 1 << 30
            assert wait_for(lambda: c.list()[1].get("processes") == 1, timeout=2)
            # SIGTERM: clean shutdown, state kept
            assert d.kill(signal.SIGTERM) == 0
            d.start()
            assert len(d.client().list()) == 2
        finally:
            stop(proc)


def test_second_daemon_on_same_state_refused(tmp_path: Path) -> None:
    with daemon(tmp_path):
        import subprocess
        import sys
        r = subprocess.run([sys.executable, "-m", "tgs.controller", "--state-dir",
                            str(tmp_path / "state"), "--runtime-dir", str(tmp_path / "rt2"),
                            "--sim"], capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and "another tgs-controller" in r.stderr
