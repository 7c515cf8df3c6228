"""intercept.segment: create/open round trip, validation, ledger and slot-lock handling."""

from __future__ import annotations

import os
import stat
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from tgs.intercept import device, ofd, segment
from tgs.intercept.segment import SegmentError, SlotDefaults

pytestmark = pytest.mark.timeout(60)


def _make(tmp_path: Path, **kw: object) -> segment.Segment:
    args: dict[str, object] = {"job_name": "job-a", "device_index": 0, "device_uuid": "GPU-x"}
    args.update(kw)
    return segment.create(tmp_path / "job.seg", **args)  # type: ignore[arg-type]


def test_round_trip(tmp_path: Path) -> None:
    d = SlotDefaults(rate=1000, burst=50, inflight_cap=7)
    with _make(tmp_path, mem_quota=1 << 30, priority=1, weight=3, nslots=8, defaults=d) as seg:
        assert seg.nslots == 8
    p = tmp_path / "job.seg"
    assert stat.S_IMODE(p.stat().st_mode) == 0o660
    assert p.stat().st_size == segment.HEADER_SIZE + 8 * segment.SLOT_SIZE
    assert not [x for x in tmp_path.iterdir() if x.name.startswith(".")]  # temp file renamed
    with segment.open(p) as seg:
        h = seg.header
        assert (h.magic, h.version) == (segment.MAGIC, segment.VERSION)
        assert seg.job_name == "job-a" and seg.device_uuid == "GPU-x"
        assert (h.mem_quota, h.priority, h.weight) == (1 << 30, 1, 3)
        assert (h.default_rate, h.default_burst, h.default_inflight_cap) == (1000, 50, 7)
        seq = h.control_seq
        seg.set_quota(123)
        seg.set_rate(2, 500, 10, 4)
        seg.set_gate(segment.GATE_WAIT, 900)
        seg.set_defaults(SlotDefaults())
        assert seg.header.control_seq == seq + 3
        assert seg.ledger() == (0, 123, 0)
        s = seg.slot(2)
        assert (s.rate, s.burst, s.inflight_cap, s.control_seq) == (500, 10, 4, 1)
        assert seg.header.default_rate == segment.RATE_UNLIMITED
        assert seg.live_slots() == [] and seg.snapshot() == []
        with pytest.raises(IndexError):
            seg.slot(8)
        with pytest.raises(ValueError):
            seg.set_rate(0, -1)


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        _make(tmp_path, nslots=0)
    with pytest.raises(ValueError):
        _make(tmp_path, nslots=segment.MAX_SLOTS + 1)
    with pytest.raises(ValueError):
        _make(tmp_path, priority=7)


def _corrupt(p: Path, offset: int, fmt: str, value: int) -> None:
    with p.open("r+b") as f:
        f.seek(offset)
        f.write(struct.pack(fmt, value))


@pytest.mark.parametrize(
    ("what", "needle"),
    [("magic", "bad magic"), ("version", "version"), ("truncate", "truncated"),
     ("tiny", "smaller than a header"), ("slot_size", "layout"), ("nslots", "nslots"),
     ("missing", "cannot open")],
)
def test_open_rejects(tmp_path: Path, what: str, needle: str) -> None:
    _make(tmp_path, nslots=4).close()
    p = tmp_path / "job.seg"
    if what == "magic":
        _corrupt(p, 0, "<Q", 0x1234)
    elif what == "version":
        _corrupt(p, 8, "<I", 99)
    elif what == "truncate":
        os.truncate(p, p.stat().st_size - 10)
    elif what == "tiny":
        os.truncate(p, 100)
    elif what == "slot_size":
        _corrupt(p, 24, "<I", 1000)
    elif what == "nslots":
        _corrupt(p, 28, "<I", 0)
    elif what == "missing":
        p = tmp_path / "nope.seg"
    with pytest.raises(SegmentError, match=needle):
        segment.open(p)


_HOLDER = r"""
import os, sys
sys.path[:0] = [{root!r}]
from tgs.intercept import ofd, segment
seg = segment.open({path!r})
i = {slot}
assert ofd.try_lock(seg.fd, segment.LOCK_SLOT_BASE + i)
s = seg.slot(i)
s.pid = os.getpid(); s.generation += 1; s.mem_used = {used}
ofd.lock(seg.fd, segment.LOCK_LEDGER)
seg.header.mem_used += {used}
ofd.unlock(seg.fd, segment.LOCK_LEDGER)
s.dev_active = 1
s.lanes[0].launches = 5; s.lanes[3].launches = 2; s.lanes[3].work = 77
s.state = segment.SLOT_ACTIVE
print("ready", flush=True)
sys.stdin.read()
"""


def test_live_and_reclaim_python_holder(tmp_path: Path) -> None:
    """A second process claims slots as the shim does; after SIGKILL they are reclaimed."""
    seg = _make(tmp_path, nslots=4, mem_quota=1 << 20)
    dev = device.create_device(tmp_path, 0)
    procs: list[subprocess.Popen[str]] = []
    try:
        root = str(Path(segment.__file__).resolve().parents[1].parent)
        for i, used in ((1, 1000), (3, 24)):
            code = _HOLDER.format(root=root, path=str(seg.path), slot=i, used=used)
            pr = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
            procs.append(pr)
            assert pr.stdout is not None and pr.stdout.readline().strip() == "ready"
        assert seg.live_slots() == [1, 3]
        assert seg.reclaim_dead() == []  # everyone is alive
        assert seg.ledger()[0] == 1024
        c = seg.counters(3)
        assert (c.launches, c.work, c.mem_used, c.dev_active) == (7, 77, 24, 1)
        assert dev.recompute([seg]) == 2
        procs[0].kill()
        procs[0].wait(10)
        assert seg.live_slots() == [3]
        rec = seg.reclaim_dead(device=dev)
        assert [(r.slot, r.mem_used, r.was_dev_active) for r in rec] == [(1, 1000, True)]
        assert dev.prod_active == 1
        assert seg.ledger()[0] == 24
        assert seg.slot(1).state == segment.SLOT_FREE and seg.counters(1).launches == 0
        # the dead process's counters live on in the job's retired totals (same as slot 3's)
        h = seg.header
        assert (h.retired_launches, h.retired_work) == (7, 77)
        # a dirty ledger (holder died mid-update) is recomputed from the slots
        seg.header.ledger_dirty = 1
        seg.header.mem_used = 999999
        assert seg.ledger()[0] == 24
    finally:
        for pr in procs:
            if pr.poll() is None:
                pr.kill()
            pr.wait(10)
        seg.close()
        dev.close()


def test_device_segment(tmp_path: Path) -> None:
    with device.create_device(tmp_path, 2) as dev:
        assert dev.path.name == "device-2.seg" and dev.device_index == 2
        dev.set_prod_active(3)
        dev.release_one()
        assert dev.prod_active == 2
    bad = tmp_path / "device-3.seg"
    bad.write_bytes(b"\0" * device.DEV_SIZE)
    with pytest.raises(SegmentError):
        device.open_device(bad)
    bad.write_bytes(b"\0" * 7)
    with pytest.raises(SegmentError):
        device.open_device(bad)


def test_ofd_lock_conflicts_between_descriptions(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"\0" * 128)
    a = os.open(p, os.O_RDWR)
    b = os.open(p, os.O_RDWR)
    try:
        assert ofd.try_lock(a, 70)
        assert ofd.is_locked(b, 70) and not ofd.is_locked(a, 70)
        assert not ofd.try_lock(b, 70)
        ofd.unlock(a, 70)
        assert ofd.try_lock(b, 70)
    finally:
        os.close(a)
        os.close(b)
