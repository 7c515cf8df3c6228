"""Job and device files as the controller uses them (over tgs.intercept).

The controller only maps what it owns: a job's ``.ctl`` and the device segments.  A job's
``.seg`` and ``.pub`` belong to the tenant: they are opened once (O_NOFOLLOW|O_NONBLOCK, regular
file checked), read with one ``pread`` per period, liveness-tested with F_OFD_GETLK only (never a
blocking lock), and every value read is validated and clamped.  A tenant that truncates or
scribbles over its files gets its job flagged ``segment_damaged`` and its figures treated as
unknown; nothing it does raises out of the control loop or blocks it.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from tgs.intercept import control as ictl
from tgs.intercept import segment as iseg
from tgs.intercept.devseg import DeviceSegment, create_device, device_segment_path, open_device
from tgs.intercept.header import ffi
from tgs.intercept.pub import create_pub, pub_path
from tgs.intercept.tenant import (
    HEADER_SIZE,
    LANE_FIELDS,
    LANES,
    PLAUSIBLE_BYTES,
    PUB_SIZE,
    SLOT_ACTIVE,
    SLOT_SIZE,
    SLOT_STATE,
    PubRead,
    SegReader,
    open_tenant_file,
    packed_struct,
    read_pub,
)

from . import disk
from .records import mem_total_of
from .state import JobRecord

log = logging.getLogger(__name__)
_F = ffi()
_RETIRED_OFF = _F.offsetof("struct tgs_seg_header", "retired_launches")
assert _F.offsetof("struct tgs_seg_header", "retired_throttled_ns") == _RETIRED_OFF + 16
assert _F.offsetof("struct tgs_seg_header", "retired_blocks") == _RETIRED_OFF + 24
_RETIRED = struct.Struct("<4Q")         # launches, work, throttled ns, blocks
_LINE_BASE = _F.sizeof("struct tgs_ctl_header")
_LINE_SIZE = _F.sizeof("struct tgs_ctl_slot")
assert (_F.offsetof("struct tgs_ctl_slot", "burst"), _F.offsetof("struct tgs_ctl_slot",
        "inflight_cap")) == (8, 16)
_LINE = struct.Struct("<3Q")            # rate, burst, inflight_cap of a control line


def _slot_struct() -> tuple[struct.Struct, list[str]]:
    """Only the fields the loop reads from a slot, one unpack per ACTIVE slot."""
    items = [(_F.offsetof("struct tgs_slot", f), c, f) for f, c in (
        ("state", "I"), ("pid", "i"), ("generation", "Q"), ("mem_used", "Q"),
        ("inflight_work", "Q"), ("dev_active", "I"), ("lanes_used", "I"))]
    lanes, lane = _F.offsetof("struct tgs_slot", "lanes"), _F.sizeof("struct tgs_lane")
    for k in range(LANES):
        for f in LANE_FIELDS:
            items.append((lanes + k * lane + _F.offsetof("struct tgs_lane", f), "Q", f"{f}{k}"))
    return packed_struct(items)


_SLOT, _NAMES = _slot_struct()
_LANE0 = _NAMES.index("launches0")          # lanes come last, _NL values each
_NL = len(LANE_FIELDS)
(I_PID, I_GEN, I_MEM, I_INFLIGHT, I_DEVACT, I_LANES) = (
    _NAMES.index(n) for n in ("pid", "generation", "mem_used", "inflight_work", "dev_active",
                              "lanes_used"))
LOCK_EVERY = 4     # check each slot's lock every 4th period: dead within 4 periods (0.2 s)
PRIORITY = {"production": iseg.PRIORITY_PRODUCTION, "opportunistic": iseg.PRIORITY_OPPORTUNISTIC}
GATE_DEFAULT = {"production": iseg.GATE_PUBLISH, "opportunistic": iseg.GATE_WAIT}
DEFAULT_WAIT_US = 50_000
GROWN_SHOWN_S = 10.0   # a cut-back file stays flagged this long after the last growth


@dataclass
class SlotSample:
    slot: int
    generation: int
    pid: int
    launches: int
    work: int
    throttled_ns: int
    mem_used: int
    inflight: int
    dev_active: int
    rate: int
    burst: int
    cap: int
    blocks: int = 0         # thread blocks launched (TGS's unit)


class JobSeg:
    """One job: its .ctl mapped (ours), its .seg and .pub read with pread (the tenant's)."""

    def __init__(self, ctl: ictl.ControlSegment, reader: SegReader, pub_fd: int,
                 pub_file: Path | None = None, device_mem: int = 0) -> None:
        self.ctl = ctl
        self.reader = reader
        self.pub_fd = pub_fd
        self.pub_file = pub_file
        self.grown: str | None = None           # a file held more than its size: cut back
        self.device_mem = device_mem            # the job's device's memory (mem_total_of)
        self._grown_at = 0.0
        self.nslots = ctl.nslots
        self.name = ctl.job_name
        self.generation = ctl.created_ns
        self.damaged: str | None = None
        # a slot whose lock is held while its state word says FREE: live all the same (the
        # lock is the kernel's word, the state the tenant's); seen twice running, it is a lie
        self.tampered: str | None = None
        self.lies_seen = 0                      # slots found lying, since the job was opened
        self._suspects: set[int] = set()
        self._lying: set[int] = set()
        self._retired: tuple[int, int, int, int] = (0, 0, 0, 0)
        self._known: dict[int, int] = {}        # slot -> generation seen live

    def apply_identity(self, rec: JobRecord) -> None:
        self.ctl.set_quota(iseg.QUOTA_UNLIMITED if rec.mem_quota is None else rec.mem_quota)
        self.ctl.set_priority(PRIORITY[rec.priority], rec.weight)
        self.ctl.set_mem_total(mem_total_of(rec, self.device_mem))
        self.ctl.set_host_pinned_max(rec.host_pinned_max)

    def close(self) -> None:
        self.ctl.close()
        self.reader.close()
        if self.pub_fd >= 0:
            os.close(self.pub_fd)
            self.pub_fd = -1

    def retired(self) -> tuple[int, int, int, int]:
        """Lane totals of reclaimed slots (launches, work, throttled ns, blocks) as of the last
        scan."""
        return self._retired

    def scan(self, tick: int = 0) -> tuple[list[SlotSample], bool]:
        """Live slots' samples, and whether a dead (ACTIVE, unlocked) slot was seen.

        One pread of the whole .seg (identity checked against our .ctl); one struct unpack per
        ACTIVE slot; slot locks are tested (F_OFD_GETLK) for a rotating quarter of the slots
        each call (tick), and always for a slot not seen live before.  A slot not marked ACTIVE
        is tested in the same rotation (and every call once found held): a held lock makes it
        live whatever its state word says, and sets ``tampered`` when seen twice running (a
        claim or a release holds the lock over a FREE word for microseconds only).  A damaged
        read sets ``damaged`` (the reason) and yields no samples."""
        buf, why = self.reader.fetch()
        if why:
            if why != self.damaged:
                log.warning("job %s: segment unusable (%s): its figures are unknown", self.name,
                            why)
            self.damaged = why
            self._known.clear()
            return [], False
        self.damaged = None
        self._retired = _RETIRED.unpack_from(buf, _RETIRED_OFF)
        out: list[SlotSample] = []
        dead = False
        known, nxt = self._known, {}
        ctl_mm, locked = self.ctl.mm, self.reader.locked
        suspects, held_free = self._suspects, set()
        for i in range(self.nslots):
            off = HEADER_SIZE + i * SLOT_SIZE
            if SLOT_STATE.unpack_from(buf, off)[0] != SLOT_ACTIVE:
                if not ((i in suspects or (i + tick) % LOCK_EVERY == 0) and locked(i)):
                    continue
                held_free.add(i)
            w = _SLOT.unpack_from(buf, off)
            gen = w[I_GEN]
            if (i not in held_free and (known.get(i) != gen or (i + tick) % LOCK_EVERY == 0)
                    and not locked(i)):
                dead = True
                continue
            nxt[i] = gen
            # only the lanes handed out (a thread's first launch takes one; the shim zeroes
            # them all at claim): a tenant that under-reports only hides its own work, which
            # its counters could hide anyway; the totals keep their high-water mark
            n = w[I_LANES]
            lanes = w[_LANE0:_LANE0 + (n if 0 < n <= LANES else LANES) * _NL]
            rate, burst, cap = _LINE.unpack_from(ctl_mm, _LINE_BASE + i * _LINE_SIZE)
            mem = w[I_MEM]
            out.append(SlotSample(i, gen, w[I_PID], sum(lanes[0::_NL]), sum(lanes[1::_NL]),
                                  sum(lanes[2::_NL]), mem if mem < PLAUSIBLE_BYTES
                                  else PLAUSIBLE_BYTES, w[I_INFLIGHT], 1 if w[I_DEVACT] else 0,
                                  rate, burst, cap, sum(lanes[3::_NL])))
        self._known = nxt
        self._note_lies(held_free)
        return out, dead

    def _note_lies(self, held_free: set[int]) -> None:
        lying = held_free & self._suspects
        self._suspects = held_free
        self.lies_seen += len(lying - self._lying)
        self._lying = lying
        if lying:
            why = (f"slot{'s' if len(lying) > 1 else ''} {','.join(map(str, sorted(lying)))} "
                   "held by a live process but marked free")
            if self.tampered is None:
                log.warning("job %s: segment tampered: %s (counted as live)", self.name, why)
            self.tampered = why
        elif self.tampered is not None and not held_free:
            log.info("job %s: its slots' state words agree with their locks again", self.name)
            self.tampered = None

    def cut_back_grown(self) -> int:
        """Cut the tenant's files back to their sizes (disk.py); the bytes freed."""
        freed, what = 0, []
        files = [(self.reader.fd, self.reader.path, self.reader.size, ".seg")]
        if self.pub_fd >= 0 and self.pub_file is not None:
            files.append((self.pub_fd, self.pub_file, PUB_SIZE, ".pub"))
        for fd, path, size, kind in files:
            try:
                n = disk.cut_back(fd, path, size)
            except OSError as exc:
                log.warning("job %s: cannot cut its grown %s back: %s", self.name, kind, exc)
                continue
            if n:
                freed += n
                what.append(f"{kind} held {n} bytes past its size")
        now = time.monotonic()
        if what:
            why = "; ".join(what) + ": cut back"
            if self.grown is None:
                log.warning("job %s: segment tampered: %s", self.name, why)
            self.grown, self._grown_at = why, now
        elif self.grown is not None and now - self._grown_at > GROWN_SHOWN_S:
            self.grown = None
        return freed

    def read_pub(self) -> PubRead | None:
        return read_pub(self.pub_fd, self.name) if self.pub_fd >= 0 else None


def _open_pub(rec: JobRecord) -> int:
    path = pub_path(rec.segment, rec.name)
    try:
        return open_tenant_file(path)
    except iseg.SegmentError:
        pass
    try:
        create_pub(path, rec.name)                # missing or replaced: a fresh one
        return open_tenant_file(path)
    except (OSError, iseg.SegmentError) as exc:
        log.warning("job %s: no publish page (%s): gating with it is off", rec.name, exc)
        return -1


class SegmentFactory:
    """Creates/opens/removes a job's files in the segment directory."""

    def __init__(self, seg_dir: Path, guard: disk.DiskGuard | None = None,
                 device_mem: dict[int, int] | None = None) -> None:
        self.dir = Path(seg_dir)
        self.guard = guard
        self.device_mem = device_mem or {}     # device index -> bytes (mem_total_of)

    def create(self, rec: JobRecord) -> JobSeg:
        if self.guard is not None:
            return self.guard.write(f"creating the files of job {rec.name}",
                                    lambda: self._create(rec))
        return self._create(rec)

    def _create(self, rec: JobRecord) -> JobSeg:
        self.dir.mkdir(parents=True, exist_ok=True)
        seg = iseg.create(
            rec.segment, rec.name, device_index=rec.device_index, device_uuid=rec.device_uuid,
            mem_quota=iseg.QUOTA_UNLIMITED if rec.mem_quota is None else rec.mem_quota,
            priority=PRIORITY[rec.priority], weight=rec.weight, nslots=rec.nslots,
            gate_flags=GATE_DEFAULT[rec.priority],
            gate_max_wait_us=DEFAULT_WAIT_US if rec.priority == "opportunistic" else 0)
        seg.set_mem_total(mem_total_of(rec, self.device_mem.get(rec.device_index, 0)))
        seg.set_host_pinned_max(rec.host_pinned_max)
        seg.close()
        return self.open(rec)

    def open(self, rec: JobRecord) -> JobSeg:
        ctl = ictl.open_control(ictl.ctl_path(rec.segment))
        try:
            if ctl.job_name != rec.name or ctl.nslots != rec.nslots:
                raise iseg.SegmentError(f"{ctl.path} belongs to another job")
            reader = SegReader.open(rec.segment, ctl.nslots, ctl.job_name, ctl.created_ns)
        except BaseException:
            ctl.close()
            raise
        return JobSeg(ctl, reader, _open_pub(rec), pub_path(rec.segment, rec.name),
                      self.device_mem.get(rec.device_index, 0))

    def remove(self, rec: JobRecord) -> None:
        for p in (Path(rec.segment), ictl.ctl_path(rec.segment), pub_path(rec.segment, rec.name)):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


def device_segment(seg_dir: Path, index: int) -> DeviceSegment:
    """Open the device segment, creating (or replacing an invalid) one."""
    Path(seg_dir).mkdir(parents=True, exist_ok=True)
    path = device_segment_path(seg_dir, index)
    if path.exists():
        try:
            dev = open_device(path)
            os.chmod(path, 0o644)
            return dev
        except (iseg.SegmentError, OSError):
            pass
    return create_device(seg_dir, index)
