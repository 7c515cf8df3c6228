"""intercept.segment: create/open round trip, validation, ledger and slot-lock handling."""

from __future__ import annotations

import os
import stat
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from tgs.intercept import control, devseg, ofd, pub, segment, tenant
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
    ctl, pubf = tmp_path / "job.ctl", tmp_path / "pub" / "job-a.pub"
    assert stat.S_IMODE(ctl.stat().st_mode) == 0o660 and pubf.stat().st_size == pub.PUB_SIZE
    assert ctl.stat().st_size == segment.CTL_HEADER_SIZE + 8 * segment.CTL_SLOT_SIZE
    with segment.open(p) as seg:
        h = seg.header
        assert (seg.seg_header.id.magic, h.version) == (segment.MAGIC, segment.VERSION)
        assert h.magic == control.CTL_MAGIC                   # identity fields: the .ctl's
        assert seg.job_name == "job-a" and seg.device_uuid == "GPU-x"
        assert (h.mem_quota, h.priority, h.weight) == (1 << 30, 1, 3)
        assert (h.default_rate, h.default_burst, h.default_inflight_cap) == (1000, 50, 7)
        assert (seg.slot(5).rate, seg.slot(5).inflight_cap) == (1000, 7)   # lines = defaults
        seq = h.control_seq
        seg.set_quota(123)
        seg.set_rate(2, 500, 10, 4)
        seg.set_gate(segment.GATE_WAIT, 900)
        seg.set_defaults(SlotDefaults(rate=77))
        assert seg.header.control_seq == seq + 3
        assert seg.ledger() == (0, 123, 0)
        s = seg.slot(2)
        assert (s.rate, s.burst, s.inflight_cap) == (77, 0, 0)   # set_defaults rewrote lines
        seg.set_rate(2, 500, 10, 4)
        assert (s.rate, s.burst, s.inflight_cap, s.control_seq) == (500, 10, 4, 3)
        assert seg.ctl.default_rate == 77 and seg.seg_header.mem_used == 0
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
     ("missing", "cannot open"), ("ctl", "not a TGS control segment"),
     ("other_job", "does not belong")],
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
    elif what == "ctl":
        _corrupt(tmp_path / "job.ctl", 0, "<Q", 0x1234)
    elif what == "other_job":
        _corrupt(p, 40, "<Q", 5)                     # created_ns differs from the .ctl's
    with pytest.raises(SegmentError, match=needle):
        segment.open(p)


_HOLDER = r"""
import os, sys
sys.path[:0] = [{root!r}]
from tgs.intercept import ofd, segment
seg = segment.open({path!r})
i = {slot}
assert ofd.try_lock(seg.fd, segment.LOCK_SLOT_BASE + i)
s = seg.tenant_slot(i)
s.pid = os.getpid(); s.generation += 1; s.mem_used = {used}
seg.seg_header.mem_used += {used}
s.dev_active = 1
s.lanes[0].launches = 5; s.lanes[3].launches = 2; s.lanes[3].work = 77
s.state = segment.SLOT_ACTIVE
print("ready", flush=True)
sys.stdin.read()
"""


def _reader(seg: segment.Segment) -> tenant.SegReader:
    return tenant.SegReader.open(seg.path, seg.nslots, seg.job_name, seg.control.created_ns)


def test_tenant_reader_sees_live_slots_and_never_reclaims(tmp_path: Path) -> None:
    """A second process claims slots as the shim does; the pread reader sees them live, and
    after SIGKILL sees the slot dead; nothing of the tenant's file is written."""
    seg = _make(tmp_path, nslots=4, mem_quota=1 << 20)
    rd = _reader(seg)
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
        r = rd.read()
        assert r.damaged is None and r.mem_used == 1024
        assert [s.slot for s in r.slots] == [1, 3] and all(rd.locked(s.slot) for s in r.slots)
        s3 = r.slots[1]
        assert (s3.launches, s3.work, s3.mem_used, s3.dev_active) == (7, 77, 24, 1)
        before = seg.path.read_bytes()
        procs[0].kill()
        procs[0].wait(10)
        assert not rd.locked(1) and rd.locked(3)
        assert seg.path.read_bytes() == before            # read-only: nothing reclaimed here
    finally:
        for pr in procs:
            if pr.poll() is None:
                pr.kill()
            pr.wait(10)
        rd.close()
        seg.close()


def test_tenant_reader_flags_damage_and_clamps(tmp_path: Path) -> None:
    seg = _make(tmp_path, nslots=4)
    rd = _reader(seg)
    try:
        s = seg.tenant_slot(2)
        s.state, s.mem_used, s.dev_active = segment.SLOT_ACTIVE, (1 << 64) - 1, 77
        seg.seg_header.mem_used = (1 << 64) - 1
        r = rd.read()
        assert r.damaged is None and r.mem_used == tenant.PLAUSIBLE_BYTES
        assert r.slots[0].mem_used == tenant.PLAUSIBLE_BYTES and r.slots[0].dev_active == 1
        seg.seg_header.id.created_ns += 1                  # not the job of the .ctl any more
        assert "identity" in (rd.read().damaged or "")
        seg.seg_header.id.created_ns -= 1
        os.truncate(seg.path, 1000)                        # partial
        assert "truncated" in (rd.read().damaged or "")
        os.truncate(seg.path, 0)
        assert "truncated" in (rd.read().damaged or "")
    finally:
        rd.close()
        seg.close()


def test_tenant_files_refused_unless_regular(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.seg"
    os.mkfifo(fifo)
    with pytest.raises(SegmentError, match="regular"):
        tenant.open_tenant_file(fifo)                      # and it did not block
    (tmp_path / "link.seg").symlink_to(fifo)
    with pytest.raises(SegmentError, match="cannot open"):
        tenant.open_tenant_file(tmp_path / "link.seg")     # O_NOFOLLOW


def test_read_pub_validates(tmp_path: Path) -> None:
    p = tmp_path / "pub" / "j.pub"
    pub.create_pub(p, "j")
    fd = os.open(p, os.O_RDONLY)
    try:
        with pub.open_pub(p) as w:
            w.view.busy, w.view.busy_seq = 3, 9
            assert tenant.read_pub(fd, "j") == tenant.PubRead(3, 0, 9, 0)
            assert tenant.read_pub(fd, "other") is None     # another job's page
        os.truncate(p, 10)
        assert tenant.read_pub(fd, "j") is None
    finally:
        os.close(fd)


def test_device_segment(tmp_path: Path) -> None:
    with devseg.create_device(tmp_path, 2) as dev:
        assert dev.path.name == "device-2.seg" and dev.device_index == 2
        assert stat.S_IMODE(dev.path.stat().st_mode) == 0o644     # read-only for tenants
        jobs = [devseg.DevJob("b", 1, 5, gap_mask=3), devseg.DevJob("a", 0, 4, busy_bias=1)]
        assert dev.set_jobs(jobs) and dev.list_seq == 2
        assert dev.jobs() == [jobs[1], jobs[0]]                   # production first
        assert not dev.set_jobs(jobs) and dev.list_seq == 2       # unchanged: not rewritten
        assert dev.set_jobs(jobs[:1]) and dev.list_seq == 4 and dev.jobs() == jobs[:1]
        assert dev.set_jobs([devseg.DevJob(f"j{i}", 1) for i in range(40)])
        assert len(dev.jobs()) == devseg.MAX_JOBS
    bad = tmp_path / "device-3.seg"
    bad.write_bytes(b"\0" * devseg.DEV_SIZE)
    with pytest.raises(SegmentError):
        devseg.open_device(bad)
    bad.write_bytes(b"\0" * 7)
    with pytest.raises(SegmentError):
        devseg.open_device(bad)


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
