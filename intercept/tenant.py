"""Reading TENANT-OWNED files (a job's ``.seg`` and ``.pub``) the way the controller must.

A tenant can truncate, rewrite or lock its own files at any moment.  So: open once with
O_NOFOLLOW|O_NONBLOCK and check it is a regular file, then only ``os.pread`` into a buffer (a
truncated file gives a short read, never SIGBUS), test slot locks only with F_OFD_GETLK (which
never blocks), validate the identity against the controller's own ``.ctl`` on every read, and
clamp every value.  A bad read returns ``damaged`` with the reason instead of raising.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path

from .control import SegmentError
from .header import const, ffi
from .ofd import F_OFD_GETLK, lock_request, lock_type

_F = ffi()
SEG_MAGIC = const("TGS_SEG_MAGIC")
PUB_MAGIC = const("TGS_PUB_MAGIC")
VERSION = const("TGS_SEG_VERSION")
LANES = const("TGS_SEG_LANES")
SLOT_ACTIVE = const("TGS_SLOT_ACTIVE")
LOCK_SLOT_BASE = const("TGS_SEG_LOCK_SLOT_BASE")
HEADER_SIZE = _F.sizeof("struct tgs_seg_header")
SLOT_SIZE = _F.sizeof("struct tgs_slot")
PUB_SIZE = _F.sizeof("struct tgs_pub")
PLAUSIBLE_BYTES = 1 << 50        # no GPU has a PiB: a larger mem_used is a lie, clamped
SLOT_STATE = struct.Struct("<I")   # a slot's first word: its TGS_SLOT_* state


def packed_struct(items: list[tuple[int, str, str]]) -> tuple[struct.Struct, list[str]]:
    """A Struct extracting (offset, code, name) items in offset order, pad bytes between."""
    fmt, pos, names = "<", 0, []
    for off, code, name in sorted(items):
        if off > pos:
            fmt += f"{off - pos}x"
        fmt += code
        pos = off + struct.calcsize("<" + code)
        names.append(name)
    return struct.Struct(fmt), names


def _off(s: str, f: str) -> int:
    return int(_F.offsetof(s, f))


_IDENT, _ = packed_struct([(_off("struct tgs_ident", f), c, f) for f, c in (
    ("magic", "Q"), ("version", "I"), ("header_size", "I"), ("total_size", "Q"),
    ("slot_size", "I"), ("nslots", "I"), ("lanes", "I"), ("created_ns", "Q"),
    ("job_name", "64s"))])
_LEDGER, _ = packed_struct([(_off("struct tgs_seg_header", f), c, f) for f, c in (
    ("mem_used", "Q"), ("mem_peak", "Q"), ("ledger_dirty", "I"), ("retired_launches", "Q"),
    ("retired_work", "Q"), ("retired_throttled_ns", "Q"), ("retired_blocks", "Q"))])
# the lane counters read per lane, in this order (LANE_FIELDS values per lane, lanes last)
LANE_FIELDS = ("launches", "work", "throttled_ns", "blocks")


def _slot_struct() -> tuple[struct.Struct, list[str]]:
    items = [(_off("struct tgs_slot", f), c, f) for f, c in (
        ("state", "I"), ("pid", "i"), ("generation", "Q"), ("comm", "32s"), ("mem_used", "Q"),
        ("inflight_work", "Q"), ("oom_count", "Q"), ("alloc_count", "Q"), ("dev_active", "I"))]
    lanes, lane = _off("struct tgs_slot", "lanes"), _F.sizeof("struct tgs_lane")
    for k in range(LANES):
        for f in LANE_FIELDS:
            items.append((lanes + k * lane + _off("struct tgs_lane", f), "Q", f"{f}{k}"))
    return packed_struct(items)


_SLOT, _NAMES = _slot_struct()
_LANE0 = _NAMES.index("launches0")
_NL = len(LANE_FIELDS)
(I_STATE, I_PID, I_GEN, I_COMM, I_MEM, I_INFLIGHT, I_OOM, I_ALLOC, I_DEVACT) = (
    _NAMES.index(n) for n in ("state", "pid", "generation", "comm", "mem_used", "inflight_work",
                              "oom_count", "alloc_count", "dev_active"))
_PUB, _PUB_NAMES = packed_struct([(_off("struct tgs_pub", f), c, f) for f, c in (
    ("magic", "Q"), ("version", "I"), ("size", "I"), ("job_name", "64s"), ("busy", "Q"),
    ("idle_since_ns", "Q"), ("busy_seq", "Q"), ("gap_pred_ns", "Q"))])


@dataclass
class TenantSlot:
    """A live-looking slot as read (values clamped; liveness is the caller's lock test)."""

    slot: int
    generation: int
    pid: int
    comm: str
    launches: int
    work: int
    throttled_ns: int
    mem_used: int
    inflight: int
    oom_count: int
    alloc_count: int
    dev_active: int
    blocks: int = 0             # thread blocks launched (TGS's unit)


@dataclass
class SegRead:
    damaged: str | None = None               # why the read is unusable (then no figures)
    mem_used: int = 0
    mem_peak: int = 0
    retired: tuple[int, int, int, int] = (0, 0, 0, 0)   # launches, work, throttled ns, blocks
    slots: list[TenantSlot] = field(default_factory=list)   # ACTIVE slots, in slot order


def open_tenant_file(path: str | os.PathLike[str]) -> int:
    """O_RDONLY|O_NOFOLLOW|O_NONBLOCK (a FIFO or a symlink planted by a tenant cannot block or
    redirect us); SegmentError unless it is a regular file."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise SegmentError(f"{p}: cannot open: {exc.strerror}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SegmentError(f"{p}: not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


class SegReader:
    """A tenant's job segment, read with pread only (never mapped, never locked)."""

    def __init__(self, path: Path, fd: int, nslots: int, job_name: str, created_ns: int) -> None:
        self.path = path
        self.fd = fd
        self.nslots = nslots
        self._name = job_name.encode()[:63]
        self._created = created_ns
        self.size = HEADER_SIZE + nslots * SLOT_SIZE
        self._getlk = [lock_request(fcntl.F_WRLCK, LOCK_SLOT_BASE + i) for i in range(nslots)]

    @classmethod
    def open(cls, path: str | os.PathLike[str], nslots: int, job_name: str,
             created_ns: int) -> SegReader:
        return cls(Path(path), open_tenant_file(path), nslots, job_name, created_ns)

    def locked(self, i: int) -> bool:
        """Slot i's owner is alive: someone holds its lock byte (F_OFD_GETLK never blocks)."""
        try:
            out = fcntl.fcntl(self.fd, F_OFD_GETLK, self._getlk[i])
        except OSError:
            return False
        return lock_type(out) != fcntl.F_UNLCK

    def _ident_problem(self, buf: bytes) -> str | None:
        (magic, version, hsize, total, ssize, nslots, lanes, created, name) = \
            _IDENT.unpack_from(buf, 0)
        if magic != SEG_MAGIC or version != VERSION:
            return "bad magic or version"
        if (hsize, ssize, lanes, nslots, total) != (HEADER_SIZE, SLOT_SIZE, LANES, self.nslots,
                                                    self.size):
            return "layout changed"
        if created != self._created or name.split(b"\0", 1)[0] != self._name:
            return "identity differs from the job's control segment"
        return None

    def fetch(self) -> tuple[bytes, str | None]:
        """The whole file in one pread, and why it is unusable (None: identity checked)."""
        try:
            buf = os.pread(self.fd, self.size, 0)
        except OSError as exc:
            return b"", f"read failed: {errno.errorcode.get(exc.errno or 0, exc)}"
        if len(buf) < self.size:
            return buf, f"truncated to {len(buf)} of {self.size} bytes"
        return buf, self._ident_problem(buf)

    def read(self) -> SegRead:
        buf, why = self.fetch()
        if why:
            return SegRead(damaged=why)
        used, peak, _dirty, r0, r1, r2, r3 = _LEDGER.unpack_from(buf, 0)
        out = SegRead(mem_used=min(used, PLAUSIBLE_BYTES), mem_peak=min(peak, PLAUSIBLE_BYTES),
                      retired=(r0, r1, r2, r3))
        for i in range(self.nslots):
            off = HEADER_SIZE + i * SLOT_SIZE
            if SLOT_STATE.unpack_from(buf, off)[0] != SLOT_ACTIVE:
                continue
            w = _SLOT.unpack_from(buf, off)
            lanes = w[_LANE0:]
            out.slots.append(TenantSlot(
                i, w[I_GEN], w[I_PID], w[I_COMM].split(b"\0", 1)[0].decode(errors="replace"),
                sum(lanes[0::_NL]), sum(lanes[1::_NL]), sum(lanes[2::_NL]),
                min(w[I_MEM], PLAUSIBLE_BYTES), w[I_INFLIGHT], w[I_OOM], w[I_ALLOC],
                1 if w[I_DEVACT] else 0, sum(lanes[3::_NL])))
        return out

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@dataclass
class PubRead:
    busy: int
    idle_since_ns: int
    busy_seq: int
    gap_pred_ns: int


def read_pub(fd: int, job_name: str) -> PubRead | None:
    """A publish page's production figures, or None when it is not a valid pub of this job."""
    try:
        buf = os.pread(fd, PUB_SIZE, 0)
    except OSError:
        return None
    if len(buf) < PUB_SIZE:
        return None
    magic, version, size, name, busy, idle, seq, pred = _PUB.unpack_from(buf, 0)
    if (magic, version, size) != (PUB_MAGIC, VERSION, PUB_SIZE) or \
            name.split(b"\0", 1)[0] != job_name.encode()[:63]:
        return None
    return PubRead(busy, idle, seq, pred)


def live_processes(seg_path: str | os.PathLike[str], ctl_path: str | os.PathLike[str]
                   ) -> list[TenantSlot]:
    """Live processes of a job for tools (pread; [] when anything is unreadable or invalid)."""
    from .control import open_control

    try:
        ctl = open_control(ctl_path, readonly=True)
    except (SegmentError, OSError):
        return []
    try:
        rd = SegReader.open(seg_path, ctl.nslots, ctl.job_name, ctl.created_ns)
    except (SegmentError, OSError):
        ctl.close()
        return []
    try:
        r = rd.read()
        return [] if r.damaged else [s for s in r.slots if rd.locked(s.slot)]
    finally:
        rd.close()
        ctl.close()

