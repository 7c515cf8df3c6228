"""Python side of a job's files (contracts/include/tgs/segment.h), for the controller and tools.

A job has three files: ``<job>.ctl`` (controller-owned control segment), ``<job>.seg``
(tenant-owned job segment: ledger and slots) and ``pub/<job>.pub`` (tenant-owned publish page).
``create`` writes all three atomically (temp file, fsync, rename); ``open_segment`` maps an
existing pair after validating it.

``Segment`` MAPS the files and trusts them: it is for the creator, tests and tools that own the
files.  The controller never maps a tenant file: it reads ``.seg`` and ``.pub`` with
``tgs.intercept.tenant`` (pread, validated, clamped) and writes the ``.ctl`` through
``ControlSegment``.  ``Segment.header`` and ``Segment.slot(i)`` are views that join the two
files: control fields (quota, defaults, gate, per-slot rate/burst/cap/gap mask) live in the
``.ctl``, the rest in the ``.seg``.  Views are invalid after ``close()``.
"""

from __future__ import annotations

import mmap
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import ofd
from .atomic_file import write_atomically
from .control import (
    CTL_HEADER_SIZE,
    CTL_SLOT_SIZE,
    GATE_FIT,
    GATE_PUBLISH,
    GATE_WAIT,
    PRIORITY_OPPORTUNISTIC,
    PRIORITY_PRODUCTION,
    QUOTA_UNLIMITED,
    RATE_UNLIMITED,
    ControlSegment,
    GatePolicy,
    SegmentError,
    SlotDefaults,
    build_ctl,
    ctl_path,
    fill_ident,
    open_control,
)
from .header import const, ffi
from .pub import create_pub, pub_path

MAGIC = const("TGS_SEG_MAGIC")
VERSION = const("TGS_SEG_VERSION")
MAX_SLOTS = const("TGS_SEG_MAX_SLOTS")
LANES = const("TGS_SEG_LANES")
LOCK_SLOT_BASE = const("TGS_SEG_LOCK_SLOT_BASE")
SLOT_FREE = const("TGS_SLOT_FREE")
SLOT_ACTIVE = const("TGS_SLOT_ACTIVE")
HEADER_SIZE = ffi().sizeof("struct tgs_seg_header")
SLOT_SIZE = ffi().sizeof("struct tgs_slot")
CONTROL_FIELDS = frozenset(("rate", "burst", "inflight_cap", "control_seq", "gap_mask"))
LEDGER_FIELDS = frozenset(("ledger_lock", "mem_used", "mem_peak", "ledger_dirty",
                           "retired_launches", "retired_work", "retired_throttled_ns",
                           "retired_blocks", "pinned_used"))

__all__ = [
    "CTL_HEADER_SIZE", "CTL_SLOT_SIZE", "GATE_FIT", "GATE_PUBLISH", "GATE_WAIT", "HEADER_SIZE",
    "LANES", "LOCK_SLOT_BASE", "MAGIC", "MAX_SLOTS", "PRIORITY_OPPORTUNISTIC",
    "PRIORITY_PRODUCTION", "QUOTA_UNLIMITED", "RATE_UNLIMITED", "SLOT_ACTIVE", "SLOT_FREE",
    "SLOT_SIZE", "VERSION", "ControlSegment", "GatePolicy", "Segment", "SegmentError",
    "SlotCounters",
    "SlotDefaults", "create", "ctl_path", "open_segment", "pub_path",
]


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
    blocks: int = 0             # thread blocks launched (grid sizes summed: TGS's unit)


class _Joined:
    """Attribute access over two cffi views: names in ``first_names`` go to ``first``."""

    def __init__(self, first: Any, first_names: frozenset[str], rest: Any,
                 ident: Any = None) -> None:
        object.__setattr__(self, "_v", (first, first_names, rest, ident))

    def _target(self, name: str) -> Any:
        first, names, rest, ident = object.__getattribute__(self, "_v")
        if name in names:
            return first
        if ident is not None and name in _IDENT_FIELDS:
            return ident
        return rest

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(name), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target(name), name, value)


_IDENT_FIELDS = frozenset(n for n, _ in ffi().typeof("struct tgs_ident").fields)


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
    gate_policy: GatePolicy | None = None,
) -> Segment:
    """Create a job's .ctl, .seg and pub/<job>.pub atomically (mode 0660) and return them mapped."""
    if not 1 <= nslots <= MAX_SLOTS:
        raise ValueError(f"nslots must be in [1, {MAX_SLOTS}], got {nslots}")
    if priority not in (PRIORITY_PRODUCTION, PRIORITY_OPPORTUNISTIC):
        raise ValueError(f"priority must be 0 (production) or 1 (opportunistic), got {priority}")
    final = Path(path)
    created = time.time_ns()
    ctl = build_ctl(job_name, device_index, device_uuid, nslots, created, mem_quota, priority,
                    weight, defaults or SlotDefaults(), gate_flags, gate_max_wait_us,
                    gate_policy)
    total = HEADER_SIZE + nslots * SLOT_SIZE
    buf = bytearray(total)
    f = ffi()
    h = f.cast("struct tgs_seg_header *", f.from_buffer(buf))
    fill_ident(h.id, MAGIC, HEADER_SIZE, SLOT_SIZE, nslots, device_index, created, job_name,
               device_uuid)
    del h
    write_atomically(ctl_path(final), ctl)
    write_atomically(final, bytes(buf))
    create_pub(pub_path(final, job_name), job_name)
    return open_segment(final)


def open_segment(path: str | os.PathLike[str]) -> Segment:
    """Map an existing job (.seg and its .ctl); SegmentError says what is wrong with a bad one."""
    p = Path(path)
    ctl = open_control(ctl_path(p))
    try:
        fd = os.open(p, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        ctl.close()
        raise SegmentError(f"{p}: cannot open: {exc.strerror}") from exc
    try:
        return Segment(p, fd, ctl)
    except BaseException:
        os.close(fd)
        ctl.close()
        raise


open = open_segment  # noqa: A001 - the documented name: intercept.segment.open(path)


def _validate(p: Path, h: Any, size: int, ctl: ControlSegment) -> None:
    i = h.id
    if i.magic != MAGIC:
        raise SegmentError(f"{p}: bad magic {i.magic:#x} (not a TGS job segment)")
    if i.version != VERSION:
        raise SegmentError(f"{p}: version {i.version}, this build understands {VERSION}")
    if i.header_size != HEADER_SIZE or i.slot_size != SLOT_SIZE or i.lanes != LANES:
        raise SegmentError(f"{p}: layout mismatch (header {i.header_size}/{HEADER_SIZE}, "
                           f"slot {i.slot_size}/{SLOT_SIZE}, lanes {i.lanes}/{LANES})")
    if not 1 <= i.nslots <= MAX_SLOTS:
        raise SegmentError(f"{p}: nslots {i.nslots} out of range [1, {MAX_SLOTS}]")
    if i.total_size != HEADER_SIZE + i.nslots * SLOT_SIZE or i.total_size != size:
        raise SegmentError(f"{p}: file is {size} bytes, header says {i.total_size} (truncated?)")
    c = ctl.header.id
    if (i.nslots, i.created_ns) != (c.nslots, c.created_ns) or bytes(
            ffi().buffer(i.job_name)) != bytes(ffi().buffer(c.job_name)):
        raise SegmentError(f"{p}: does not belong to the job of {ctl.path}")


class Segment:
    """A job's mapped .ctl and .seg.  Use as a context manager or call ``close()``."""

    def __init__(self, path: Path, fd: int, ctl: ControlSegment) -> None:
        self.path = path
        self.fd = fd
        self.control = ctl
        size = os.fstat(fd).st_size
        if size < HEADER_SIZE:
            raise SegmentError(f"{path}: file is {size} bytes, smaller than a header (truncated?)")
        self._mm: mmap.mmap | None = mmap.mmap(fd, size, mmap.MAP_SHARED,
                                               mmap.PROT_READ | mmap.PROT_WRITE)
        self._ffi = ffi()
        self._buf = self._ffi.from_buffer(self._mm)
        self.seg_header: Any = self._ffi.cast("struct tgs_seg_header *", self._buf)
        try:
            _validate(path, self.seg_header, size, ctl)
        except BaseException:
            self._unmap()  # the caller owns fd and ctl until we are fully constructed
            raise
        self.nslots: int = int(self.seg_header.id.nslots)
        self.ctl: Any = ctl.header
        self.header: Any = _Joined(self.seg_header, LEDGER_FIELDS, ctl.header, ctl.header.id)

    # -- views ---------------------------------------------------------------------------------
    def tenant_slot(self, i: int) -> Any:
        if not 0 <= i < self.nslots:
            raise IndexError(f"slot {i} out of range [0, {self.nslots})")
        return self._ffi.cast("struct tgs_slot *", self._buf + HEADER_SIZE + i * SLOT_SIZE)

    def slot(self, i: int) -> Any:
        """Slot i: control fields from its .ctl line, the rest from the .seg."""
        return _Joined(self.control.line(i), CONTROL_FIELDS, self.tenant_slot(i))

    @property
    def job_name(self) -> str:
        return self.control.job_name

    @property
    def device_uuid(self) -> str:
        return self.control.device_uuid

    # -- controller writes (to the .ctl) -------------------------------------------------------
    def set_quota(self, mem_quota: int) -> None:
        self.control.set_quota(mem_quota)

    def set_mem_total(self, mem_total: int) -> None:
        self.control.set_mem_total(mem_total)

    def set_host_pinned_max(self, host_pinned_max: int) -> None:
        self.control.set_host_pinned_max(host_pinned_max)

    def set_defaults(self, defaults: SlotDefaults) -> None:
        self.control.set_defaults(defaults)

    def set_rate(self, slot: int, rate: int, burst: int = 0, inflight_cap: int = 0) -> None:
        self.control.set_rate(slot, rate, burst, inflight_cap)

    def set_gap_mask(self, slot: int, mask: int) -> None:
        self.control.set_gap_mask(slot, mask)

    def set_gate(self, flags: int, max_wait_us: int) -> None:
        self.control.set_gate(flags, max_wait_us)

    def set_gate_policy(self, policy: GatePolicy) -> None:
        self.control.set_gate_policy(policy)

    def set_priority(self, priority: int, weight: int | None = None) -> None:
        self.control.set_priority(priority, weight)

    def heartbeat(self) -> None:
        self.control.heartbeat()

    # -- liveness and the ledger ---------------------------------------------------------------
    def slot_lock_held(self, i: int) -> bool:
        return ofd.is_locked(self.fd, LOCK_SLOT_BASE + i)

    def live_slots(self) -> list[int]:
        """Slots that are ACTIVE and whose owner still holds the slot lock."""
        return [i for i in range(self.nslots)
                if self.tenant_slot(i).state == SLOT_ACTIVE and self.slot_lock_held(i)]

    def ledger(self) -> tuple[int, int, int]:
        """(mem_used, mem_quota, mem_peak); a dirty ledger (a holder died mid-update) is
        summed from the slots, as its next taker will (nothing is written here)."""
        h = self.seg_header
        used = int(h.mem_used)
        if h.ledger_dirty and not h.ledger_lock:
            used = sum(int(self.tenant_slot(i).mem_used) for i in range(self.nslots))
        return used, int(self.ctl.mem_quota), int(h.mem_peak)

    def pinned(self) -> tuple[int, int]:
        """(page-locked host bytes the job holds, its host_pinned_max; 0 = no limit)."""
        return int(self.seg_header.pinned_used), int(self.ctl.host_pinned_max)

    # -- counters ------------------------------------------------------------------------------
    def counters(self, i: int) -> SlotCounters:
        s = self.tenant_slot(i)
        sums = [0, 0, 0, 0, 0]
        for lane in s.lanes:
            sums[0] += lane.launches
            sums[1] += lane.work
            sums[2] += lane.throttled_ns
            sums[3] += lane.throttled
            sums[4] += lane.blocks
        return SlotCounters(
            slot=i, state=int(s.state), pid=int(s.pid), generation=int(s.generation),
            comm=self._ffi.string(s.comm).decode(errors="replace"),
            heartbeat_ns=int(s.heartbeat_ns), launches=sums[0], work=sums[1],
            throttled_ns=sums[2], throttled=sums[3], mem_used=int(s.mem_used),
            inflight_work=int(s.inflight_work), oom_count=int(s.oom_count),
            alloc_count=int(s.alloc_count), dev_active=int(s.dev_active), blocks=sums[4])

    def snapshot(self) -> list[SlotCounters]:
        """Counters of every slot that is not FREE."""
        return [self.counters(i) for i in range(self.nslots)
                if self.tenant_slot(i).state != SLOT_FREE]

    # -- lifetime ------------------------------------------------------------------------------
    def _unmap(self) -> None:
        if self._mm is None:
            return
        self.seg_header = None
        self.header = None
        self._ffi.release(self._buf)
        self._mm.close()
        self._mm = None

    def close(self) -> None:
        self._unmap()
        self.control.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Segment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

