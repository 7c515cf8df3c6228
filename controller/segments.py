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
_SLOT_WORDS = iseg.SLOT_SIZE // 8
_SLOT_FMT = struct.Struct(f"<{_SLOT_WORDS}Q")
_STATE = struct.Struct("<I")


def _word(field: str) -> int:
    off = _F.offsetof("struct tgs_slot", field)
    assert off % 8 == 0, field
    return off // 8


W_STATE = _word("state")          # low 32 bits: state, high 32: pid
W_GEN = _word("generation")
W_RATE = _word("rate")
W_BURST = _word("burst")
W_CAP = _word("inflight_cap")
W_MEM = _word("mem_used")
W_INFLIGHT = _word("inflight_work")
W_OOM = _word("oom_count")
W_DEVACT = _word("dev_active")    # low 32 bits
W_LANES = _word("lanes")
LANE_WORDS = _F.sizeof("struct tgs_lane") // 8
NLANES = iseg.LANES
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
        self._getlk = [_flock(fcntl.F_WRLCK, iseg.LOCK_SLOT_BASE + i) for i in range(self.nslots)]

    def apply_identity(self, rec: JobRecord) -> None:
        self.seg.set_quota(iseg.QUOTA_UNLIMITED if rec.mem_quota is None else rec.mem_quota)
        self.seg.set_priority(PRIORITY[rec.priority], rec.weight)

    def close(self) -> None:
        self.seg.close()

    def _locked(self, i: int) -> bool:
        out = fcntl.fcntl(self.seg.fd, F_OFD_GETLK, self._getlk[i])
        return bool(_STATE.unpack_from(out, 0)[0] & 0xFFFF != fcntl.F_UNLCK)

    def scan(self) -> tuple[list[SlotSample], bool]:
        """Live slots' samples, and whether a dead (ACTIVE, unlocked) slot was seen."""
        mm, size = self.mm, iseg.SLOT_SIZE
        base = iseg.HEADER_SIZE
        out: list[SlotSample] = []
        dead = False
        for i in range(self.nslots):
            off = base + i * size
            if _STATE.unpack_from(mm, off)[0] != iseg.SLOT_ACTIVE:
                continue
            if not self._locked(i):
                dead = True
                continue
            w = _SLOT_FMT.unpack_from(mm, off)
            lanes = w[W_LANES:W_LANES + NLANES * LANE_WORDS]
            pid = w[W_STATE] >> 32
            out.append(SlotSample(
                i, w[W_GEN], pid - (1 << 32) if pid >= 1 << 31 else pid,
                sum(lanes[0::LANE_WORDS]), sum(lanes[1::LANE_WORDS]), sum(lanes[2::LANE_WORDS]),
                w[W_MEM], w[W_INFLIGHT], w[W_DEVACT] & 0xFFFFFFFF, w[W_RATE], w[W_BURST],
                w[W_CAP]))
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
