"""Protocol 1.1: request deadlines (expired requests are never applied), leases and
unregister when_idle, at the handler level (no sockets)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from ctl_helpers import FakeEngine, make_handler
from tgs.client import MUTATING, deadline_ms
from tgs.client.protocol import PROTOCOL_MINOR
from tgs.controller import protocol as P
from tgs.controller.lease import Lease, take

ID = [b"peer-1"]


def call(handler, obj: dict) -> dict:
    out = handler.handle(ID + [json.dumps(obj).encode()])
    return json.loads(out[-1])


def req(type_: str, **fields) -> dict:
    return {"v": P.PROTOCOL_VERSION, "id": "r1", "type": type_, **fields}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.mark.parametrize("bad", [True, -1, 1.5, "1", None, P.MAX_DEADLINE_MS + 1])
def test_deadline_must_be_an_integer(tmp_path: Path, bad) -> None:
    h = make_handler(tmp_path)
    r = call(h, req("register", name="a", deadline_ms=bad))
    assert r["error"]["code"] == P.E_BAD_REQUEST and not h.registry.jobs


def test_expired_requests_are_refused_before_anything(tmp_path: Path) -> None:
    h = make_handler(tmp_path)
    assert call(h, req("register", name="keep", mem_quota=1 << 30))["ok"]
    before = (tmp_path / "state" / "controller.json").read_bytes()
    past = now_ms() - 1
    for r in (req("register", name="ghost", deadline_ms=past),
              req("set", name="keep", mem_quota=3 << 30, deadline_ms=past),
              req("unregister", name="keep", deadline_ms=past),
              req("status", deadline_ms=past)):
        reply = call(h, r)
        assert reply["ok"] is False and reply["error"]["code"] == P.E_EXPIRED, reply
        assert reply["id"] == "r1" and "not applied" in reply["error"]["message"]
    assert set(h.registry.jobs) == {"keep"}
    assert h.registry.jobs["keep"].rec.mem_quota == 1 << 30
    assert (tmp_path / "state" / "controller.json").read_bytes() == before
    assert h.engine.changes == 1


def test_future_deadline_is_applied(tmp_path: Path) -> None:
    h = make_handler(tmp_path)
    assert call(h, req("register", name="a", deadline_ms=now_ms() + 5000))["ok"]
    assert "a" in h.registry.jobs


def test_client_deadline_leaves_a_margin() -> None:
    assert deadline_ms(1.0, now=1000.0) == 1000_750        # 1/4 of the timeout
    assert deadline_ms(10.0, now=1000.0) == 1009_500       # at most 0.5 s
    assert set(MUTATING) == {"register", "unregister", "set"}


def test_status_reports_the_minor_version(tmp_path: Path) -> None:
    st = call(make_handler(tmp_path), req("status"))
    assert (st["protocol"], st["protocol_minor"]) == (1, PROTOCOL_MINOR)


def test_lease_register_and_when_idle(tmp_path: Path) -> None:
    h = make_handler(tmp_path)
    (tmp_path / "segs").mkdir()
    r = call(h, req("register", name="w", ephemeral=True, lease_uid=os.geteuid()))
    assert r["ok"], r
    lease = Path(r["lease"])
    assert lease == tmp_path / "segs" / "w.lease" and lease.stat().st_mode & 0o777 == 0o400
    assert h.registry.jobs["w"].rec.lease == str(lease)
    assert isinstance(h.engine, FakeEngine)
    h.engine.busy = {"w"}
    r = call(h, req("unregister", name="w", when_idle=True))
    assert r["ok"] and r["removed"] is False and "w" in h.registry.jobs
    h.engine.busy = set()
    r = call(h, req("unregister", name="w", when_idle=True))
    assert r["ok"] and r["removed"] is True and "w" not in h.registry.jobs
    assert not lease.exists()
    r = call(h, req("unregister", name="w", when_idle=True))
    assert r["error"]["code"] == P.E_NOT_FOUND


def test_lease_needs_ephemeral(tmp_path: Path) -> None:
    h = make_handler(tmp_path)
    r = call(h, req("register", name="w", lease_uid=0))
    assert r["error"]["code"] == P.E_BAD_REQUEST and not h.registry.jobs


@pytest.mark.skipif(os.geteuid() == 0, reason="root may hand a lease to any uid")
def test_lease_for_another_uid_needs_root(tmp_path: Path) -> None:
    h = make_handler(tmp_path)
    (tmp_path / "segs").mkdir()
    r = call(h, req("register", name="w", ephemeral=True, lease_uid=os.geteuid() + 1))
    assert r["error"]["code"] == P.E_BAD_REQUEST and not h.registry.jobs
    assert not (tmp_path / "segs" / "w.lease").exists()


def test_lease_held_through_inherited_descriptor(tmp_path: Path) -> None:
    import subprocess
    lease = Lease.create(tmp_path / "j.lease", None)
    try:
        assert not lease.held() and not lease.expired(live=True)   # a live process: used
        fd = take(lease.path)
        assert lease.held() and os.get_inheritable(fd)
        child = subprocess.Popen(["sleep", "30"], pass_fds=(fd,))
        os.close(fd)
        try:
            assert lease.held() and not lease.expired(live=False)
        finally:
            child.kill()
            child.wait()
        assert not lease.held() and lease.expired(live=False)
    finally:
        lease.remove()
    assert not (tmp_path / "j.lease").exists()


def test_unused_lease_expires_after_the_grace(tmp_path: Path, monkeypatch) -> None:
    from tgs.controller import lease as L
    lease = Lease.create(tmp_path / "j.lease", None)
    try:
        assert not lease.expired(live=False)                      # young, never held
        monkeypatch.setattr(L.time, "monotonic", lambda: lease.born + L.LEASE_GRACE + 1)
        assert lease.expired(live=False)
    finally:
        lease.remove()


def test_lease_that_cannot_be_tested_counts_as_held(tmp_path: Path) -> None:
    lease = Lease.create(tmp_path / "j.lease", None)
    real = lease.fd
    lease.fd = 1_000_000                # no such descriptor: the test fails with EBADF
    try:
        assert lease.held() and not lease.expired(live=False)
    finally:
        lease.fd = real
        lease.remove()


def test_internal_error_echoes_the_id(tmp_path: Path, monkeypatch) -> None:
    """A bug while handling a valid request gives an `internal` reply with the request's id
    (a client waits for its own id: without it, it would time out instead)."""
    h = make_handler(tmp_path)
    assert call(h, req("register", name="w"))["ok"]

    def boom(name: str) -> bool:
        raise RuntimeError("bug")

    monkeypatch.setattr(h.engine, "idle", boom)
    r = call(h, req("unregister", name="w", when_idle=True))
    assert r["ok"] is False and r["error"]["code"] == P.E_INTERNAL and r["id"] == "r1"
    assert "w" in h.registry.jobs


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"),
                    reason="needs root to run children as other users")
def test_lease_opens_for_its_uid_only() -> None:
    """As root the controller hands the lease to the job's uid: that user can hold it,
    another user cannot even open it (so cannot keep someone else's job alive)."""
    import shutil
    import subprocess
    import tempfile
    d = Path(tempfile.mkdtemp(prefix="tgs-lease-"))          # traversable by other users
    d.chmod(0o755)
    lease = Lease.create(d / "j.lease", 12345)
    code = ("import fcntl, os, struct, sys\n"
            "try:\n    fd = os.open(sys.argv[1], os.O_RDONLY)\n"
            "except PermissionError:\n    sys.exit(13)\n"
            "fcntl.fcntl(fd, 37, struct.pack('hhqqi4x', fcntl.F_RDLCK, 0, 0, 1, 0))\n")
    try:
        st = lease.path.stat()
        assert (st.st_uid, st.st_mode & 0o777) == (12345, 0o400)
        for uid, rc in ((12345, 0), (12346, 13)):
            r = subprocess.run(["/usr/bin/python3", "-c", code, str(lease.path)], user=uid,
                               capture_output=True, text=True, timeout=60, cwd="/")
            assert r.returncode == rc, (uid, r.stderr)
    finally:
        lease.remove()
        shutil.rmtree(d, ignore_errors=True)
