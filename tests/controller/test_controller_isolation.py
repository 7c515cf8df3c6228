"""A tenant attacks its own files; the controller (a subprocess) must keep serving everyone.

Truncating the job segment (a controller that mapped it would die of SIGBUS); holding OFD
locks on the job segment (a controller that waited in F_OFD_SETLKW would hang).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ctl_helpers import daemon, start_fake_proc, stop, wait_for
from tgs.intercept import control, pub

pytestmark = pytest.mark.timeout(90)


def _heartbeat(seg_path: str) -> int:
    c = control.open_control(control.ctl_path(seg_path))
    try:
        return int(c.header.controller_heartbeat_ns)
    finally:
        c.close()


def _still_serving(c, other_seg: str) -> None:  # type: ignore[no-untyped-def]
    """status answers, steps advance and another job's control segment is still written."""
    s0, h0 = c.status()["steps"], _heartbeat(other_seg)
    assert wait_for(lambda: c.status()["steps"] >= s0 + 5, timeout=5)
    assert wait_for(lambda: _heartbeat(other_seg) > h0, timeout=5)


@pytest.mark.parametrize("size", [0, 1000, 300])
def test_truncated_job_segment_flags_the_job_only(tmp_path: Path, size: int) -> None:
    with daemon(tmp_path) as d:
        c = d.client()
        bad = c.register("vandal", priority="production", mem_quota=1 << 30)["segment"]
        good = c.register("victim")["segment"]
        procs = [start_fake_proc(bad), start_fake_proc(good)]
        try:
            assert wait_for(lambda: all(j.get("processes") == 1 for j in c.list()))
            os.truncate(bad, size)                      # the tenant truncates its own .seg
            os.truncate(pub.pub_path(bad, "vandal"), 0)  # ... and its pub
            assert wait_for(lambda: "truncated" in (
                {j["name"]: j for j in c.list()}["vandal"].get("segment_damaged") or ""))
            jobs = {j["name"]: j for j in c.list()}
            assert jobs["vandal"]["processes"] == 0     # figures unknown, not believed
            assert jobs["victim"]["processes"] == 1 and jobs["victim"]["segment_damaged"] is None
            _still_serving(c, good)
            assert d.proc is not None and d.proc.poll() is None
            c.set("victim", weight=2)                   # requests still served
            c.unregister("vandal")
            assert [j["name"] for j in c.list()] == ["victim"]
        finally:
            for p in procs:
                stop(p)


def test_scribbled_job_segment_is_not_believed(tmp_path: Path) -> None:
    with daemon(tmp_path) as d:
        c = d.client()
        bad = c.register("vandal")["segment"]
        good = c.register("victim")["segment"]
        size = os.path.getsize(bad)
        with open(bad, "r+b") as f:
            f.write(os.urandom(size))
        assert wait_for(lambda: {j["name"]: j for j in c.list()}["vandal"].get(
            "segment_damaged") is not None)
        _still_serving(c, good)


_LOCKER = r"""
import fcntl, os, struct, sys, time
from tgs.intercept import ofd
seg, ctl, whole = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
fds = []
def lock(path, flags, kind, start, length):
    fd = os.open(path, flags)
    fds.append(fd)
    fcntl.fcntl(fd, ofd.F_OFD_SETLK, struct.pack("hhqqi4x", kind, 0, start, length, 0))
size = os.path.getsize(seg)
if whole:
    lock(seg, os.O_RDWR, fcntl.F_WRLCK, 0, 0)       # write lock on every byte of the .seg
else:                                               # the old ledger byte and the header,
    lock(seg, os.O_RDWR, fcntl.F_WRLCK, 0, 64)      # read locks on the slot bytes' tail
    lock(seg, os.O_RDONLY, fcntl.F_RDLCK, 100, 0)
lock(ctl, os.O_RDONLY, fcntl.F_RDLCK, 0, 0)         # read lock on its read-only .ctl
print("locked", size, flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("whole", [True, False])
def test_tenant_locks_cannot_block_the_controller(tmp_path: Path, whole: bool) -> None:
    with daemon(tmp_path) as d:
        c = d.client(timeout=3.0)
        bad = c.register("vandal", mem_quota=1 << 30)["segment"]
        good = c.register("victim")["segment"]
        dead = start_fake_proc(bad)                     # a slot whose owner died: the old
        assert wait_for(lambda: c.list()[0].get("processes") == 1)   # controller reclaimed
        stop(dead)                                      # it under a blocking ledger lock
        locker = subprocess.Popen([sys.executable, "-c", _LOCKER, bad,
                                   str(control.ctl_path(bad)), "1" if whole else "0"],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert locker.stdout is not None
            assert locker.stdout.readline().startswith("locked")
            t0 = time.monotonic()
            _still_serving(c, good)
            c.set("vandal", mem_quota=2 << 30)          # its own .ctl is ours: still written
            assert {j["name"]: j for j in c.list()}["vandal"]["mem_quota"] == 2 << 30
            assert c.status()["dead_seen"] >= (0 if whole else 1)
            c.unregister("vandal")
            assert time.monotonic() - t0 < 15
        finally:
            stop(locker)


def test_read_lock_layout_matches_flock() -> None:
    """The locker above packs struct flock by hand: same bytes as intercept.ofd's."""
    import struct

    from tgs.intercept import ofd
    assert struct.calcsize("hhqqi4x") == 32
    assert ofd.lock_request(fcntl.F_WRLCK, 5) == struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 5, 1, 0)


def test_busy_count_left_by_dead_processes_is_discounted(tmp_path: Path) -> None:
    """A production pub whose busy count stays above its live busy processes (processes that
    died busy, or a lie) gets the excess as busy_bias in the device table; when the count comes
    back, so does the bias."""
    from tgs.intercept import devseg

    with daemon(tmp_path) as d:
        c = d.client()
        seg = c.register("prod", priority="production")["segment"]
        c.register("opp")
        dev_path = devseg.device_segment_path(Path(seg).parent, 0)

        def table() -> dict[str, devseg.DevJob]:
            with devseg.open_device(dev_path) as dv:
                return {j.name: j for j in dv.jobs()}

        assert wait_for(lambda: set(table()) == {"prod", "opp"})
        assert table()["prod"].priority == 0 and table()["opp"].priority == 1
        with pub.open_pub(pub.pub_path(seg, "prod")) as pp:
            pp.view.busy = 2
            assert wait_for(lambda: table()["prod"].busy_bias == 2)
            pp.view.busy = 0
            assert wait_for(lambda: table()["prod"].busy_bias == 0)
        assert c.status()["busy_bias_changes"] >= 2
        c.unregister("opp")
        assert wait_for(lambda: set(table()) == {"prod"})


_CLAIM = r"""
import sys, time
from tgs.intercept import ofd, segment
seg = segment.open_segment(sys.argv[1])
assert ofd.try_lock(seg.fd, segment.LOCK_SLOT_BASE + 0)
s = seg.tenant_slot(0)
s.generation, s.state = 1, segment.SLOT_ACTIVE
print("ready", flush=True)
time.sleep(120)
"""


def test_lying_counters_are_limited_not_believed(tmp_path: Path) -> None:
    from tgs.controller.loop import MAX_WORK_RATE
    from tgs.intercept import segment as S
    from tgs.intercept.tenant import PLAUSIBLE_BYTES

    with daemon(tmp_path) as d:
        c = d.client()
        seg_path = c.register("liar")["segment"]
        holder = subprocess.Popen([sys.executable, "-c", _CLAIM, seg_path], text=True,
                                  stdout=subprocess.PIPE)
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
            assert wait_for(lambda: c.list()[0].get("processes") == 1)
            with S.open_segment(seg_path) as seg:
                s = seg.tenant_slot(0)
                s.mem_used = (1 << 64) - 1
                s.lanes[0].work = 1 << 63             # a jump no GPU can make
                # the rate shows the jump for one control period only (a poll can miss it on a
                # loaded machine); the total keeps growing, plausibly, while the lie stands
                assert wait_for(lambda: (c.list()[0].get("work_total") or 0) > 0)
                rates = []
                for _ in range(5):
                    j = c.list()[0]
                    rates.append(j["work_rate"])
                    assert j["mem_used"] <= PLAUSIBLE_BYTES
                    time.sleep(0.05)
                assert max(rates) <= MAX_WORK_RATE * 1.01
                total = c.list()[0]["work_total"]
                assert total <= MAX_WORK_RATE * 5             # grows at a plausible rate only
                s.lanes[0].work = 0                   # backwards: a delta of 0, never negative
                time.sleep(0.3)
                j = c.list()[0]
                assert j["work_rate"] == 0 and j["work_total"] >= total
                assert j["segment_damaged"] is None
        finally:
            stop(holder)


def test_slots_marked_free_by_their_tenant_stay_live(tmp_path: Path) -> None:
    """The tenant writes FREE into the state words of its live processes'
    slots.  A held slot lock is the kernel's word: the slots stay live (their work counted) and
    the job is flagged, until the processes are gone."""
    from tgs.intercept import segment as S

    with daemon(tmp_path) as d:
        c = d.client()
        seg_path = c.register("hider")["segment"]
        procs = [start_fake_proc(seg_path) for _ in range(2)]
        try:
            assert wait_for(lambda: c.list()[0].get("processes") == 2)
            assert c.list()[0].get("segment_tampered") is None
            with S.open_segment(seg_path) as seg:
                for i in range(seg.nslots):
                    seg.tenant_slot(i).state = S.SLOT_FREE
            assert wait_for(lambda: c.list()[0].get("segment_tampered") is not None)
            w0 = c.list()[0]["work_total"]
            time.sleep(0.5)
            j = c.list()[0]
            assert j["processes"] == 2 and j["work_total"] > w0        # still seen, counted
            assert "marked free" in j["segment_tampered"] and j["segment_lies"] == 2
        finally:
            for p in procs:
                stop(p)
        assert wait_for(lambda: c.list()[0].get("segment_tampered") is None)
        assert c.list()[0]["processes"] == 0
