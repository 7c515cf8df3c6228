"""A job's control segment ``<job>.ctl`` (struct tgs_ctl_header + one tgs_ctl_slot per slot).

CONTROLLER-OWNED: created and written by the controller only, mounted read-only into the job's
containers; the shim maps it PROT_READ.  The controller may map it (a tenant cannot truncate or
lock it through a read-only mount).  Every control write is an aligned 64-bit store.
"""

from __future__ import annotations

import mmap
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .header import const, ffi
from .mapped import MappedStruct

CTL_MAGIC = const("TGS_CTL_MAGIC")
VERSION = const("TGS_SEG_VERSION")
MAX_SLOTS = const("TGS_SEG_MAX_SLOTS")
LANES = const("TGS_SEG_LANES")
RATE_UNLIMITED = const("TGS_RATE_UNLIMITED")
QUOTA_UNLIMITED = const("TGS_QUOTA_UNLIMITED")
PRIORITY_PRODUCTION = const("TGS_PRIORITY_PRODUCTION")
PRIORITY_OPPORTUNISTIC = const("TGS_PRIORITY_OPPORTUNISTIC")
GATE_PUBLISH = const("TGS_GATE_PUBLISH")
GATE_WAIT = const("TGS_GATE_WAIT")
GATE_FIT = const("TGS_GATE_FIT")
CTL_HEADER_SIZE = ffi().sizeof("struct tgs_ctl_header")
CTL_SLOT_SIZE = ffi().sizeof("struct tgs_ctl_slot")
NAME_MAX = const("TGS_SEG_NAME_MAX")
UUID_MAX = const("TGS_SEG_UUID_MAX")
MAX_DEVICES = const("TGS_MAX_DEVICES")          # every device index is below this
JOB_MAX_DEVICES = const("TGS_JOB_MAX_DEVICES")  # the devices one job may span
INTERFERENCE_PPM = const("TGS_INTERFERENCE_PPM")
INTERFERENCE_PPM_MAX = const("TGS_INTERFERENCE_PPM_MAX")
WAIT_STEP_NS = const("TGS_WAIT_STEP_NS")
FIT_STEP_NS = const("TGS_FIT_STEP_NS")
STEP_NS_MIN = const("TGS_STEP_NS_MIN")
STEP_NS_MAX = const("TGS_STEP_NS_MAX")
_U64_MAX = (1 << 64) - 1


class SegmentError(Exception):
    """A segment file is missing, malformed or incompatible; the message says why."""


@dataclass(frozen=True)
class SlotDefaults:
    """Control values every slot's line holds (work units per second, see segment.h)."""

    rate: int = RATE_UNLIMITED
    burst: int = 0  # 0: the shim picks 20 ms worth of rate
    inflight_cap: int = 0  # 0: no cap


@dataclass(frozen=True)
class GatePolicy:
    """The gate's policy values the shim obeys (segment.h: the .ctl's interference_ppm,
    wait_step_ns, fit_step_ns).  The defaults are the contract's: what a shim uses without a
    .ctl, with a 0 or with a value out of range."""

    interference_ppm: int = INTERFERENCE_PPM   # production's interference target (ppm)
    wait_step_ns: int = WAIT_STEP_NS           # a WAIT launch's longest sleep between looks
    fit_step_ns: int = FIT_STEP_NS             # a FIT launch asks this often whether it fits

    def __post_init__(self) -> None:
        if not 1 <= self.interference_ppm <= INTERFERENCE_PPM_MAX:
            raise ValueError(f"interference_ppm must be in [1, {INTERFERENCE_PPM_MAX}], "
                             f"got {self.interference_ppm}")
        for name in ("wait_step_ns", "fit_step_ns"):
            v = getattr(self, name)
            if not STEP_NS_MIN <= v <= STEP_NS_MAX:
                raise ValueError(f"{name} must be in [{STEP_NS_MIN}, {STEP_NS_MAX}], got {v}")

    @property
    def interference(self) -> float:
        """The target as a fraction of production's time."""
        return self.interference_ppm / 1e6


def u64(name: str, value: int) -> int:
    if not 0 <= value <= _U64_MAX:
        raise ValueError(f"{name} must be in [0, 2**64-1], got {value}")
    return value


def ctl_path(seg: str | os.PathLike[str]) -> Path:
    """The .ctl beside a .seg (the shim's default for TGS_CTL)."""
    p = Path(seg)
    return p.with_suffix(".ctl") if p.suffix == ".seg" else p.with_name(p.name + ".ctl")


def set_str(field: Any, text: str, size: int = NAME_MAX) -> None:
    """Store text in a char[size] field, truncated to leave room for the NUL, zero-padded."""
    raw = text.encode()[: size - 1]
    ffi().memmove(field, raw + b"\0" * (size - len(raw)), size)


def fill_ident(i: Any, magic: int, header_size: int, slot_size: int, nslots: int,
               device_index: int, created_ns: int, job_name: str, device_uuid: str) -> None:
    i.magic, i.version, i.header_size, i.slot_size = magic, VERSION, header_size, slot_size
    i.total_size = header_size + nslots * slot_size
    i.nslots, i.lanes, i.device_index, i.created_ns = nslots, LANES, device_index, created_ns
    set_str(i.job_name, job_name, NAME_MAX)
    set_str(i.device_uuid, device_uuid, UUID_MAX)


def build_ctl(job_name: str, device_index: int, device_uuid: str, nslots: int, created_ns: int,
              mem_quota: int, priority: int, weight: int, d: SlotDefaults, gate_flags: int,
              gate_max_wait_us: int, policy: GatePolicy | None = None) -> bytes:
    """The bytes of a new control segment (``policy``: the gate's policy values, default the
    contract's)."""
    buf = bytearray(CTL_HEADER_SIZE + nslots * CTL_SLOT_SIZE)
    f = ffi()
    h = f.cast("struct tgs_ctl_header *", f.from_buffer(buf))
    fill_ident(h.id, CTL_MAGIC, CTL_HEADER_SIZE, CTL_SLOT_SIZE, nslots, device_index, created_ns,
               job_name, device_uuid)
    h.mem_quota = u64("mem_quota", mem_quota)
    h.default_rate = u64("rate", d.rate)
    h.default_burst = u64("burst", d.burst)
    h.default_inflight_cap = u64("inflight_cap", d.inflight_cap)
    h.priority, h.weight = priority, weight
    h.controller_heartbeat_ns = time.monotonic_ns()
    h.gate_flags, h.gate_max_wait_us = gate_flags, gate_max_wait_us
    _write_policy(h, policy or GatePolicy())
    lines = f.cast("struct tgs_ctl_slot *", f.from_buffer(buf) + CTL_HEADER_SIZE)
    for i in range(nslots):
        lines[i].rate, lines[i].burst, lines[i].inflight_cap = d.rate, d.burst, d.inflight_cap
    del h, lines
    return bytes(buf)


def _write_policy(h: Any, p: GatePolicy) -> None:
    h.interference_ppm, h.wait_step_ns, h.fit_step_ns = (p.interference_ppm, p.wait_step_ns,
                                                         p.fit_step_ns)


def open_control(path: str | os.PathLike[str], readonly: bool = False) -> ControlSegment:
    """Map a .ctl (read-write for the controller; ``readonly`` for tools)."""
    p = Path(path)
    try:
        fd = os.open(p, (os.O_RDONLY if readonly else os.O_RDWR) | os.O_CLOEXEC | os.O_NOFOLLOW
                     | os.O_NONBLOCK)
    except OSError as exc:
        raise SegmentError(f"{p}: cannot open: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SegmentError(f"{p}: not a regular file")
        if st.st_size < CTL_HEADER_SIZE:
            raise SegmentError(f"{p}: file is {st.st_size} bytes, smaller than a header")
        mm = mmap.mmap(fd, st.st_size, mmap.MAP_SHARED,
                       mmap.PROT_READ | (0 if readonly else mmap.PROT_WRITE))
    finally:
        os.close(fd)
    ctl = ControlSegment(p, mm)
    try:
        ctl.validate(st.st_size)
    except BaseException:
        ctl.close()
        raise
    return ctl


class ControlSegment(MappedStruct):
    """A mapped .ctl (the controller's own file); ``header`` is its struct."""

    CTYPE = "struct tgs_ctl_header *"

    def __init__(self, path: Path, mm: mmap.mmap) -> None:
        super().__init__(path, mm)
        self.mm = mm                        # the controller reads control lines with struct
        self.nslots = 0

    @property
    def header(self) -> Any:
        return self.view

    def validate(self, size: int) -> None:
        i, p = self.header.id, self.path
        if i.magic != CTL_MAGIC:
            raise SegmentError(f"{p}: bad magic {i.magic:#x} (not a TGS control segment)")
        if i.version != VERSION:
            raise SegmentError(f"{p}: version {i.version}, this build understands {VERSION}")
        if (i.header_size, i.slot_size, i.lanes) != (CTL_HEADER_SIZE, CTL_SLOT_SIZE, LANES):
            raise SegmentError(f"{p}: layout mismatch")
        if not 1 <= i.nslots <= MAX_SLOTS:
            raise SegmentError(f"{p}: nslots {i.nslots} out of range [1, {MAX_SLOTS}]")
        if i.total_size != CTL_HEADER_SIZE + i.nslots * CTL_SLOT_SIZE or i.total_size != size:
            raise SegmentError(f"{p}: file is {size} bytes, header says {i.total_size}")
        self.nslots = int(i.nslots)

    def line(self, i: int) -> Any:
        if not 0 <= i < self.nslots:
            raise IndexError(f"slot {i} out of range [0, {self.nslots})")
        return self._ffi.cast("struct tgs_ctl_slot *",
                              self._buf + CTL_HEADER_SIZE + i * CTL_SLOT_SIZE)

    @property
    def job_name(self) -> str:
        return self._ffi.string(self.header.id.job_name).decode(errors="replace")

    @property
    def device_uuid(self) -> str:
        return self._ffi.string(self.header.id.device_uuid).decode(errors="replace")

    @property
    def created_ns(self) -> int:
        return int(self.header.id.created_ns)

    def _bump(self) -> None:
        self.header.control_seq += 1

    def set_quota(self, mem_quota: int) -> None:
        self.header.mem_quota = u64("mem_quota", mem_quota)
        self._bump()

    def set_mem_total(self, mem_total: int) -> None:
        """Oversubscription (docs/oversubscription.md): 0 = off."""
        self.header.mem_total = u64("mem_total", mem_total)
        self._bump()

    def set_host_pinned_max(self, host_pinned_max: int) -> None:
        """Page-locked host memory the job may hold (docs/oversubscription.md): 0 = no limit."""
        self.header.host_pinned_max = u64("host_pinned_max", host_pinned_max)
        self._bump()

    def set_defaults(self, defaults: SlotDefaults, lines: bool = True) -> None:
        """The job defaults, and (lines) every slot's line: a newly claimed slot is controlled
        from its first launch (the per-slot gap masks stay)."""
        h = self.header
        h.default_rate = u64("rate", defaults.rate)
        h.default_burst = u64("burst", defaults.burst)
        h.default_inflight_cap = u64("inflight_cap", defaults.inflight_cap)
        if lines:
            for i in range(self.nslots):
                self.set_rate(i, defaults.rate, defaults.burst, defaults.inflight_cap)
        self._bump()

    def set_rate(self, slot: int, rate: int, burst: int = 0, inflight_cap: int = 0) -> None:
        s = self.line(slot)
        s.burst = u64("burst", burst)
        s.inflight_cap = u64("inflight_cap", inflight_cap)
        s.rate = u64("rate", rate)
        s.control_seq += 1

    def set_gap_mask(self, slot: int, mask: int) -> None:
        """FIT gaps this process may open (bit gap_seq % 64); 0 = any (segment.h)."""
        s = self.line(slot)
        s.gap_mask = u64("gap_mask", mask)
        s.control_seq += 1

    def set_gate(self, flags: int, max_wait_us: int) -> None:
        if flags & ~(GATE_PUBLISH | GATE_WAIT | GATE_FIT):
            raise ValueError(f"unknown gate flags {flags:#x}")
        self.header.gate_max_wait_us = max_wait_us
        self.header.gate_flags = flags
        self._bump()

    def set_gate_policy(self, policy: GatePolicy) -> None:
        """The gate's policy values (validated by GatePolicy); the shims read them at every
        use."""
        _write_policy(self.header, policy)
        self._bump()

    @property
    def gate_policy(self) -> GatePolicy | None:
        """The policy values the file holds; None when one is 0 or out of range (the shim then
        uses the contract's default for it)."""
        h = self.header
        try:
            return GatePolicy(int(h.interference_ppm), int(h.wait_step_ns), int(h.fit_step_ns))
        except ValueError:
            return None

    def set_priority(self, priority: int, weight: int | None = None) -> None:
        self.header.priority = priority
        if weight is not None:
            self.header.weight = weight
        self._bump()

    def heartbeat(self) -> None:
        self.header.controller_heartbeat_ns = time.monotonic_ns()

