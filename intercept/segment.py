"""Python side of the job segment (libshim/include/tgs/segment.h), for the controller and tools.

``create`` writes a new segment atomically (temp file, fsync, rename); ``open_segment`` maps an
existing one after validating it.  ``Segment.header`` and ``Segment.slot(i)`` are cffi views over
the shared mapping: reads see the shims' updates live, and writes go straight to shared memory,
so only write the fields segment.h gives to the controller.  Views are invalid after ``close()``.
"""

from __future__ import annotations

import mmap
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import ofd
from ._header import const, ffi
from .atomic_file import write_atomically

MAGIC = const("TGS_SEG_MAGIC")
VERSION = const("TGS_SEG_VERSION")
MAX_SLOTS = const("TGS_SEG_MAX_SLOTS")
LANES = const("TGS_SEG_LANES")
LOCK_LEDGER = const("TGS_SEG_LOCK_LEDGER")
LOCK_SLOT_BASE = const("TGS_SEG_LOCK_SLOT_BASE")
RATE_UNLIMITED = const("TGS_RATE_UNLIMITED")
QUOTA_UNLIMITED = const("TGS_QUOTA_UNLIMITED")
SLOT_FREE = const("TGS_SLOT_FREE")
SLOT_ACTIVE = const("TGS_SLOT_ACTIVE")
PRIORITY_PRODUCTION = const("TGS_PRIORITY_PRODUCTION")
PRIORITY_OPPORTUNISTIC = const("TGS_PRIORITY_OPPORTUNISTIC")
GATE_PUBLISH = const("TGS_GATE_PUBLISH")
GATE_WAIT = const("TGS_GATE_WAIT")
GATE_FIT = const("TGS_GATE_FIT")

HEADER_SIZE = ffi().sizeof("struct tgs_seg_header")
SLOT_SIZE = ffi().sizeof("struct tgs_slot")
_U64_MAX = (1 << 64) - 1


class SegmentError(Exception):
    """A segment file is missing, malformed or incompatible; the message says why."""


@dataclass(frozen=True)
class SlotDefaults:
    """Control values a newly claimed slot starts with (work units per second, see segment.h)."""

    rate: int = RATE_UNLIMITED
    burst: int = 0  # 0: the shim picks 20 ms worth of rate
    inflight_cap: int = 0  # 0: no cap


@dataclass(frozen=True)
class SlotCounters:
    """One slot's status and lane sums at one moment."""

    slot: int
    state: int
    pid: int
    generation: int
    comm: str
    heartbeat_ns: int
    launches: int
    work: int
    throttled_ns: int
    throttled: int
    mem_used: int
    inflight_work: int
    oom_count: int
    alloc_count: int
    dev_active: int


@dataclass(frozen=True)
class Reclaimed:
    """A dead process's slot that ``reclaim_dead`` freed, and the memory returned to the job."""

    slot: int
    pid: int
    generation: int
    mem_used: int
    was_dev_active: bool


def _u64(name: str, value: int) -> int:
    if not 0 <= value <= _U64_MAX:
        raise ValueError(f"{name} must be in [0, 2**64-1], got {value}")
    return value


def _set_str(field: Any, text: str, size: int) -> None:
    raw = text.encode()[: size - 1]
    ffi().memmove(field, raw + b"\0" * (size - len(raw)), size)


def create(
    path: str | os.PathLike[str],
    job_name: str,
    device_index: int = 0,
    device_uuid: str = "",
    mem_quota: int = QUOTA_UNLIMITED,
    priority: int = PRIORITY_PRODUCTION,
    weight: int = 1,
    nslots: int = 64,
    defaults: SlotDefaults | None = None,
    gate_flags: int = 0,
    gate_max_wait_us: int = 0,
) -> Segment:
    """Create a segment file atomically (mode 0660) and return it opened."""
    if not 1 <= nslots <= MAX_SLOTS:
        raise ValueError(f"nslots must be in [1, {MAX_SLOTS}], got {nslots}")
    if priority not in (PRIORITY_PRODUCTION, PRIORITY_OPPORTUNISTIC):
        raise ValueError(f"priority must be 0 (production) or 1 (opportunistic), got {priority}")
    d = defaults or SlotDefaults()
    total = HEADER_SIZE + nslots * SLOT_SIZE
    buf = bytearray(total)
    f = ffi()
    h = f.cast("struct tgs_seg_header *", f.from_buffer(buf))
    h.magic, h.version, h.header_size, h.total_size = MAGIC, VERSION, HEADER_SIZE, total
    h.slot_size, h.nslots, h.lanes, h.device_index = SLOT_SIZE, nslots, LANES, device_index
    h.created_ns = time.time_ns()
    _set_str(h.job_name, job_name, 64)
    _set_str(h.device_uuid, device_uuid, 48)
    h.mem_quota = _u64("mem_quota", mem_quota)
    h.default_rate = _u64("rate", d.rate)
    h.default_burst = _u64("burst", d.burst)
    h.default_inflight_cap = _u64("inflight_cap", d.inflight_cap)
    h.priority, h.weight = priority, weight
    h.controller_heartbeat_ns = time.monotonic_ns()
    h.gate_flags, h.gate_max_wait_us = gate_flags, gate_max_wait_us
    del h
    final = Path(path)
    write_atomically(final, bytes(buf))
    return open_segment(final)


def open_segment(path: str | os.PathLike[str]) -> Segment:
    """Map an existing segment; SegmentError says what is wrong with a bad one."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        raise SegmentError(f"{p}: cannot open: {exc.strerror}") from exc
    try:
        return Segment(p, fd)
    except BaseException:
        os.close(fd)
        raise


open = open_segment  # noqa: A001 - the documented name: intercept.segment.open(path)


def _validate(p: Path, h: Any, size: int) -> None:
    if h.magic != MAGIC:
        raise SegmentError(f"{p}: bad magic {h.magic:#x} (not a TGS segment)")
    if h.version != VERSION:
        raise SegmentError(f"{p}: version {h.version}, this build understands {VERSION}")
    if h.header_size != HEADER_SIZE or h.slot_size != SLOT_SIZE or h.lanes != LANES:
        raise SegmentError(
            f"{p}: layout mismatch (header {h.header_size}/{HEADER_SIZE}, "
            f"slot {h.slot_size}/{SLOT_SIZE}, lanes {h.lanes}/{LANES})"
        )
    if not 1 <= h.nslots <= MAX_SLOTS:
        raise SegmentError(f"{p}: nslots {h.nslots} out of range [1, {MAX_SLOTS}]")
    if h.total_size != HEADER_SIZE + h.nslots * SLOT_SIZE:
        raise SegmentError(f"{p}: total_size {h.total_size} does not match {h.nslots} slots")
    if h.total_size != size:
        raise SegmentError(f"{p}: file is {size} bytes, header says {h.total_size} (truncated?)")


class Segment:
    """An open, mapped job segment.  Use as a context manager or call ``close()``."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        size = os.fstat(fd).st_size
        if size < HEADER_SIZE:
            raise SegmentError(f"{path}: file is {size} bytes, smaller than a header (truncated?)")
        self._mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self._ffi = ffi()
        self._buf = self._ffi.from_buffer(self._mm)
        self.header: Any = self._ffi.cast("struct tgs_seg_header *", self._buf)
        try:
            _validate(path, self.header, size)
        except BaseException:
            self._unmap()  # the caller owns fd until we are fully constructed
            raise
        self.nslots: int = int(self.header.nslots)

    # -- views ---------------------------------------------------------------------------------
    def slot(self, i: int) -> Any:
        if not 0 <= i < self.nslots:
            raise IndexError(f"slot {i} out of range [0, {self.nslots})")
        return self._ffi.cast("struct tgs_slot *", self._buf + HEADER_SIZE + i * SLOT_SIZE)

    @property
    def job_name(self) -> str:
        return self._ffi.string(self.header.job_name).decode(errors="replace")

    @property
    def device_uuid(self) -> str:
        return self._ffi.string(self.header.device_uuid).decode(errors="replace")

    # -- controller writes ---------------------------------------------------------------------
    def _bump(self) -> None:
        self.header.control_seq += 1

    def set_quota(self, mem_quota: int) -> None:
        self.header.mem_quota = _u64("mem_quota", mem_quota)
        self._bump()

    def set_defaults(self, defaults: SlotDefaults) -> None:
        h = self.header
        h.default_rate = _u64("rate", defaults.rate)
        h.default_burst = _u64("burst", defaults.burst)
        h.default_inflight_cap = _u64("inflight_cap", defaults.inflight_cap)
        self._bump()

    def set_rate(self, slot: int, rate: int, burst: int = 0, inflight_cap: int = 0) -> None:
        s = self.slot(slot)
        s.burst = _u64("burst", burst)
        s.inflight_cap = _u64("inflight_cap", inflight_cap)
        s.rate = _u64("rate", rate)
        s.control_seq += 1

    def set_gap_mask(self, slot: int, mask: int) -> None:
        """FIT gaps this process may open (bit busy_seq % 64); 0 = any (segment.h)."""
        s = self.slot(slot)
        s.gap_mask = _u64("gap_mask", mask)
        s.control_seq += 1

    def set_gate(self, flags: int, max_wait_us: int) -> None:
        if flags & ~(GATE_PUBLISH | GATE_WAIT | GATE_FIT):
            raise ValueError(f"unknown gate flags {flags:#x}")
        self.header.gate_max_wait_us = max_wait_us
        self.header.gate_flags = flags
        self._bump()

    def set_priority(self, priority: int, weight: int | None = None) -> None:
        self.header.priority = priority
        if weight is not None:
            self.header.weight = weight
        self._bump()

    def heartbeat(self) -> None:
        self.header.controller_heartbeat_ns = time.monotonic_ns()

    # -- liveness and the ledger ---------------------------------------------------------------
    def slot_lock_held(self, i: int) -> bool:
        return ofd.is_locked(self.fd, LOCK_SLOT_BASE + i)

    def live_slots(self) -> list[int]:
        """Slots that are ACTIVE and whose owner still holds the slot lock."""
        return [
            i
            for i in range(self.nslots)
            if self.slot(i).state == SLOT_ACTIVE and self.slot_lock_held(i)
        ]

    def _ledger_enter(self) -> None:
        ofd.lock(self.fd, LOCK_LEDGER)
        h = self.header
        if h.ledger_dirty:  # the previous holder died mid-update
            h.mem_used = sum(int(self.slot(i).mem_used) for i in range(self.nslots))
        h.ledger_dirty = 1

    def _ledger_exit(self) -> None:
        self.header.ledger_dirty = 0
        ofd.unlock(self.fd, LOCK_LEDGER)

    def ledger(self) -> tuple[int, int, int]:
        """(mem_used, mem_quota, mem_peak) read consistently under the ledger lock."""
        ofd.lock(self.fd, LOCK_LEDGER)
        try:
            h = self.header
            if h.ledger_dirty:
                h.mem_used = sum(int(self.slot(i).mem_used) for i in range(self.nslots))
                h.ledger_dirty = 0
            return int(h.mem_used), int(h.mem_quota), int(h.mem_peak)
        finally:
            ofd.unlock(self.fd, LOCK_LEDGER)

    def reclaim_dead(self, device: Any = None) -> list[Reclaimed]:
        """Free ACTIVE slots whose owner died; return their memory to the job's ledger.

        ``device`` (a DeviceSegment) also gets a dead production process's prod_active count back.
        """
        out: list[Reclaimed] = []
        for i in range(self.nslots):
            s = self.slot(i)
            if s.state != SLOT_ACTIVE or not ofd.try_lock(self.fd, LOCK_SLOT_BASE + i):
                continue
            try:
                if s.state != SLOT_ACTIVE:  # its owner released it cleanly meanwhile
                    continue
                out.append(self._reclaim_locked(i, device))
            finally:
                ofd.unlock(self.fd, LOCK_SLOT_BASE + i)
        return out

    def _reclaim_locked(self, i: int, device: Any) -> Reclaimed:
        s = self.slot(i)
        self._ledger_enter()
        try:
            used = int(s.mem_used)
            h = self.header
            h.mem_used = int(h.mem_used) - used if int(h.mem_used) >= used else 0
            s.mem_used = 0
            for lane in s.lanes:
                h.retired_launches += lane.launches
                h.retired_work += lane.work
                h.retired_throttled_ns += lane.throttled_ns
        finally:
            self._ledger_exit()
        was_active = bool(s.dev_active)
        if was_active and device is not None:
            device.release_one()
        rec = Reclaimed(i, int(s.pid), int(s.generation), used, was_active)
        s.heartbeat_ns = s.inflight_work = s.oom_count = s.alloc_count = 0
        s.dev_active = 0
        s.pid = 0
        s.lanes_used = 0
        self._ffi.memmove(s.lanes, b"\0" * self._ffi.sizeof(s.lanes), self._ffi.sizeof(s.lanes))
        s.state = SLOT_FREE
        return rec

    # -- counters ------------------------------------------------------------------------------
    def counters(self, i: int) -> SlotCounters:
        s = self.slot(i)
        sums = [0, 0, 0, 0]
        for lane in s.lanes:
            sums[0] += lane.launches
            sums[1] += lane.work
            sums[2] += lane.throttled_ns
            sums[3] += lane.throttled
        return SlotCounters(
            slot=i,
            state=int(s.state),
            pid=int(s.pid),
            generation=int(s.generation),
            comm=self._ffi.string(s.comm).decode(errors="replace"),
            heartbeat_ns=int(s.heartbeat_ns),
            launches=sums[0],
            work=sums[1],
            throttled_ns=sums[2],
            throttled=sums[3],
            mem_used=int(s.mem_used),
            inflight_work=int(s.inflight_work),
            oom_count=int(s.oom_count),
            alloc_count=int(s.alloc_count),
            dev_active=int(s.dev_active),
        )

    def snapshot(self) -> list[SlotCounters]:
        """Counters of every slot that is not FREE."""
        return [self.counters(i) for i in range(self.nslots) if self.slot(i).state != SLOT_FREE]

    # -- lifetime ------------------------------------------------------------------------------
    def _unmap(self) -> None:
        if self._mm is None:
            return
        self.header = None
        self._ffi.release(self._buf)
        self._mm.close()
        self._mm = None  # type: ignore[assignment]

    def close(self) -> None:
        self._unmap()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Segment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
