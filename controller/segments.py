"""Job and device segments as the controller uses them (over tgs.intercept).

Reads are the hot path (every period, every live slot): one struct.unpack_from
over the mapping per active slot instead of per-field cffi accesses, and one
F_OFD_GETLK per active slot with a prebuilt flock argument for liveness.
Writes (rare: only on change) go through intercept's cffi setters.
"""

from __future__ import annotations

import fcntl
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from tgs.intercept import segment as iseg
from tgs.intercept._header import ffi
from tgs.intercept.device import DeviceSegment, create_device, device_segment_path, open_device
from tgs.intercept.ofd import F_OFD_GETLK, _flock

from .state import JobRecord

_F = ffi()
_STATE = struct.Struct("<I")
NLANES = iseg.LANES
LOCK_EVERY = 4     # check each slot's lock every 4th period: dead within 4 periods (0.2 s)


def _slot_struct() -> tuple[struct.Struct, list[str]]:
    """A Struct that extracts only the fields the loop reads from a slot (pad bytes between)."""
    want: list[tuple[int, str, str]] = [
        (_F.offsetof("struct tgs_slot", f), c, f) for f, c in (
            ("state", "I"), ("pid", "i"), ("generation", "Q"), ("rate", "Q"), ("burst", "Q"),
            ("inflight_cap", "Q"), ("mem_used", "Q"), ("inflight_work", "Q"),
            ("dev_active", "I"))]
    lanes = _F.offsetof("struct tgs_slot", "lanes")
    lane = _F.sizeof("struct tgs_lane")
    for k in range(NLANES):
        for f, c in (("launches", "Q"), ("work", "Q"), ("throttled_ns", "Q")):
            want.append((lanes + k * lane + _F.offsetof("struct tgs_lane", f), c, f"{f}{k}"))
    fmt, pos, names = "<", 0, []
    for off, code, name in sorted(want):
        if off > pos:
            fmt += f"{off - pos}x"
        fmt += code
        pos = off + struct.calcsize("<" + code)
        names.append(name)
    return struct.Struct(fmt), names


_SLOT, _NAMES = _slot_struct()
_LANE0 = _NAMES.index("launches0")          # lanes come last, 3 values each
(I_STATE, I_PID, I_GEN, I_RATE, I_BURST, I_CAP, I_MEM, I_INFLIGHT, I_DEVACT) = (
    _NAMES.index(n) for n in ("state", "pid", "generation", "rate", "burst", "inflight_cap",
                              "mem_used", "inflight_work", "dev_active"))
_RETIRED_OFF = _F.offsetof("struct tgs_seg_header", "retired_launches")
assert _F.offsetof("struct tgs_seg_header", "retired_throttled_ns") == _RETIRED_OFF + 16
_RETIRED = struct.Struct("<3Q")
PRIORITY = {"production": iseg.PRIORITY_PRODUCTION, "opportunistic": iseg.PRIORITY_OPPORTUNISTIC}
GATE_DEFAULT = {"production": iseg.GATE_PUBLISH, "opportunistic": iseg.GATE_WAIT}
DEFAULT_WAIT_US = 50_000


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


class JobSeg:
    """One job's mapped segment."""

    def __init__(self, seg: iseg.Segment) -> None:
        self.seg = seg
        self.mm = seg._mm                       # the shared mapping: read with struct
        self.nslots = seg.nslots
        self._known: dict[int, int] = {}        # slot -> generation seen live
        self._getlk = [_flock(fcntl.F_WRLCK, iseg.LOCK_SLOT_BASE + i) for i in range(self.nslots)]

    def apply_identity(self, rec: JobRecord) -> None:
        self.seg.set_quota(iseg.QUOTA_UNLIMITED if rec.mem_quota is None else rec.mem_quota)
        self.seg.set_priority(PRIORITY[rec.priority], rec.weight)

    def close(self) -> None:
        self.seg.close()

    def retired(self) -> tuple[int, int, int]:
        """Lane totals of reclaimed slots (launches, work, throttled ns); read before scan()."""
        return _RETIRED.unpack_from(self.mm, _RETIRED_OFF)

    def _locked(self, i: int) -> bool:
        out = fcntl.fcntl(self.seg.fd, F_OFD_GETLK, self._getlk[i])
        return bool(_STATE.unpack_from(out, 0)[0] & 0xFFFF != fcntl.F_UNLCK)

    def scan(self, tick: int = 0) -> tuple[list[SlotSample], bool]:
        """Live slots' samples, and whether a dead (ACTIVE, unlocked) slot was seen.

        Slot locks are checked for a rotating quarter of the slots each call (tick), and
        always for a slot not seen live before, so a death is noticed within LOCK_EVERY
        periods while the lock syscalls cost a quarter."""
        mm, size, base = self.mm, iseg.SLOT_SIZE, iseg.HEADER_SIZE
        out: list[SlotSample] = []
        dead = False
        known = self._known
        for i in range(self.nslots):
            off = base + i * size
            if _STATE.unpack_from(mm, off)[0] != iseg.SLOT_ACTIVE:
                known.pop(i, None)
                continue
            w = _SLOT.unpack_from(mm, off)
            gen = w[I_GEN]
            if (known.get(i) != gen or (i + tick) % LOCK_EVERY == 0) and not self._locked(i):
                known.pop(i, None)
                dead = True
                continue
            known[i] = gen
            lanes = w[_LANE0:]
            out.append(SlotSample(
                i, gen, w[I_PID], sum(lanes[0::3]), sum(lanes[1::3]), sum(lanes[2::3]),
                w[I_MEM], w[I_INFLIGHT], w[I_DEVACT], w[I_RATE], w[I_BURST], w[I_CAP]))
        return out, dead


class SegmentFactory:
    """Creates/opens/removes job segments in the segment directory."""

    def __init__(self, seg_dir: Path) -> None:
        self.dir = Path(seg_dir)

    def create(self, rec: JobRecord) -> JobSeg:
        self.dir.mkdir(parents=True, exist_ok=True)
        seg = iseg.create(
            rec.segment, rec.name, device_index=rec.device_index, device_uuid=rec.device_uuid,
            mem_quota=iseg.QUOTA_UNLIMITED if rec.mem_quota is None else rec.mem_quota,
            priority=PRIORITY[rec.priority], weight=rec.weight, nslots=rec.nslots,
            gate_flags=GATE_DEFAULT[rec.priority],
            gate_max_wait_us=DEFAULT_WAIT_US if rec.priority == "opportunistic" else 0)
        return JobSeg(seg)

    def open(self, rec: JobRecord) -> JobSeg:
        seg = iseg.open_segment(rec.segment)
        if seg.job_name != rec.name or seg.nslots != rec.nslots:
            seg.close()
            raise iseg.SegmentError(f"{rec.segment} belongs to another job")
        return JobSeg(seg)

    def remove(self, rec: JobRecord) -> None:
        try:
            os.unlink(rec.segment)
        except FileNotFoundError:
            pass


def device_segment(seg_dir: Path, index: int) -> DeviceSegment:
    """Open the device segment, creating (or replacing an invalid) one."""
    Path(seg_dir).mkdir(parents=True, exist_ok=True)
    path = device_segment_path(seg_dir, index)
    if path.exists():
        try:
            return open_device(path)
        except iseg.SegmentError:
            pass
    return create_device(seg_dir, index)
