"""The simulator's facts for Python: its state file's path, the environment it reads when it
creates that file, and the file's layout (sim/sim_state.h).

The simulated driver keeps one state file per simulated device set (``STATE_ENV``, default
/dev/shm/tgs-sim-<uid>).  This module is the only Python copy of those facts: the layout below
mirrors the C header with ctypes, and tests/sim/test_simstate_layout.py compiles the header to
prove every size, offset and constant equal.  ``read_state`` maps the file (benchmarks, tests,
tools); ``read_devices`` reads it with pread only (the controller: in simulated mode a tenant
may write or truncate it).  Counters advance lazily: they are exact as of each device's
``t_last_ns`` (CLOCK_MONOTONIC), the last time any process touched it.
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .ofd import F_OFD_GETLK, lock_request, lock_type
from .sizes import SizeError, parse_size

SIM_STATE_MAGIC = 0x314D4953534754
SIM_STATE_VERSION = 2
SIM_MAX_DEVICES = 8
SIM_MAX_PROCS = 128
SIM_MAX_CTXS = 256
SIM_RING = 2048
SIM_MARKER_RING = 2048
SIM_LOCK_SLOT_BASE = 0
SIM_MAX_MRANGES = 1024

# The environment the simulator reads (sim/state.c, sim/env.c; docs/simulator.md).
STATE_ENV = "TGS_SIM_STATE"        # state file: an absolute path, else the default below
DEVICES_ENV = "TGS_SIM_DEVICES"    # devices of a new state file: 1..SIM_MAX_DEVICES
MEM_ENV = "TGS_SIM_MEM"            # memory per device of a new state file (bytes, 16GiB, ...)
DEFAULT_DEVICES = 1
DEFAULT_MEM = 16 << 30
MIN_MEM = 1 << 20                  # the simulator's least capacity (sim/env.c)


def state_path(env: Mapping[str, str] | None = None) -> Path:
    """The state file the simulator uses under ``env`` (default: ours): STATE_ENV when it is an
    absolute path, else /dev/shm/tgs-sim-<uid> (the simulator's own rule)."""
    value = (os.environ if env is None else env).get(STATE_ENV)
    return Path(value) if value and value.startswith("/") else \
        Path(f"/dev/shm/tgs-sim-{os.getuid()}")


def default_path() -> str:
    return str(state_path())


def env_bytes(text: str, default: int) -> int:
    """A capacity as the simulator reads TGS_SIM_MEM: a size (sizes.py) of at least MIN_MEM,
    else ``default`` (the simulator says so on stderr and uses its default)."""
    try:
        value = parse_size(text)
    except SizeError:
        return default
    return value if value >= MIN_MEM else default


def env_devices(env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(devices, memory per device) a new state file would get under ``env``."""
    e = os.environ if env is None else env
    try:
        n = max(1, min(SIM_MAX_DEVICES, int(e.get(DEVICES_ENV, str(DEFAULT_DEVICES)))))
    except ValueError:
        n = DEFAULT_DEVICES
    return n, env_bytes(e.get(MEM_ENV, ""), DEFAULT_MEM)


u32, i32, u64 = ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64


class SimItem(ctypes.Structure):
    _fields_ = [("remaining_ns", u64), ("marker", u64)]


class SimMarker(ctypes.Structure):
    _fields_ = [("id", u64), ("t_ns", u64)]


class SimCtx(ctypes.Structure):
    _fields_ = [
        ("in_use", u32), ("proc", i32), ("dev", i32), ("gen", u32),
        ("head", u64), ("tail", u64), ("busy_ns", u64), ("last_done_ns", u64),
        ("pending_ns", u64),
        ("items", SimItem * SIM_RING), ("markers", SimMarker * SIM_MARKER_RING),
    ]


class SimProcDev(ctypes.Structure):
    _fields_ = [("mem_used", u64), ("managed_used", u64), ("busy_ns", u64)]


class SimProc(ctypes.Structure):
    _fields_ = [("in_use", u32), ("pid", i32), ("started_ns", u64),
                ("dev", SimProcDev * SIM_MAX_DEVICES)]


class SimDevice(ctypes.Structure):
    _fields_ = [
        ("lock_pad", ctypes.c_char * 64),
        ("mem_total", u64), ("mem_used", u64), ("managed_used", u64), ("busy_ns", u64),
        ("t_last_ns", u64), ("slice_end_ns", u64), ("cur_ctx", i32), ("pad0", u32),
        ("kernels_done", u64), ("switches", u64), ("last_reap_ns", u64),
    ]


class SimHeader(ctypes.Structure):
    _fields_ = [
        ("magic", u64), ("version", u32), ("ndevices", u32), ("mem_per_device", u64),
        ("timeslice_ns", u64), ("file_size", u64), ("created_ns", u64), ("uuid_seed", u64),
        ("host_used", u64), ("reserved", u64 * 7),
    ]


class SimMrange(ctypes.Structure):
    _fields_ = [("in_use", u32), ("proc", i32), ("dev", i32), ("preferred", i32),
                ("base", u64), ("size", u64), ("resident", u64), ("last_use_ns", u64)]


class SimResidency(ctypes.Structure):
    _fields_ = [
        ("resident", u64 * SIM_MAX_DEVICES), ("evicted", u64 * SIM_MAX_DEVICES),
        ("migrated", u64 * SIM_MAX_DEVICES), ("hwm", u32), ("pad0", u32),
        ("r", SimMrange * SIM_MAX_MRANGES),
    ]


class SimState(ctypes.Structure):
    _fields_ = [
        ("hdr", SimHeader),
        ("dev", SimDevice * SIM_MAX_DEVICES),
        ("proc", SimProc * SIM_MAX_PROCS),
        ("ctx", SimCtx * SIM_MAX_CTXS),
        ("res", SimResidency),
    ]


@dataclass
class DeviceInfo:
    index: int
    mem_total: int
    mem_used: int
    managed_used: int
    busy_ns: int
    t_last_ns: int
    kernels_done: int
    switches: int
    managed_resident: int = 0  # managed bytes in device memory (residency.c)
    managed_evicted: int = 0   # managed bytes moved to the host, ever
    managed_migrated: int = 0  # managed bytes moved to the device, ever


@dataclass
class ProcessInfo:
    slot: int
    pid: int
    alive: bool
    busy_ns: list[int] = field(default_factory=list)
    mem_used: list[int] = field(default_factory=list)


@dataclass
class SimSnapshot:
    path: str
    ndevices: int
    timeslice_ns: int
    devices: list[DeviceInfo]
    processes: list[ProcessInfo]
    host_used: int = 0  # host bytes: managed memory not resident + page-locked (residency.c)


def _slot_alive(fd: int, slot: int) -> bool:
    """True when some process holds slot's OFD lock (F_OFD_GETLK)."""
    try:
        res = fcntl.fcntl(fd, F_OFD_GETLK, lock_request(fcntl.F_WRLCK, SIM_LOCK_SLOT_BASE + slot))
    except OSError:
        return True
    return lock_type(res) != fcntl.F_UNLCK


def map_state(path: str) -> mmap.mmap | None:
    """The state file mapped read-only, or None while it is missing or still being created
    (readers poll: the first simulated process creates it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        if os.fstat(fd).st_size != ctypes.sizeof(SimState):
            return None
        return mmap.mmap(fd, ctypes.sizeof(SimState), prot=mmap.PROT_READ)
    finally:
        os.close(fd)


def read_state(path: str | os.PathLike[str] | None = None) -> SimSnapshot:
    """Snapshot of a state file (mapped; trusted callers); raises FileNotFoundError or
    ValueError."""
    p = str(path) if path is not None else default_path()
    size = ctypes.sizeof(SimState)
    fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if os.fstat(fd).st_size != size:
            raise ValueError(f"{p}: size {os.fstat(fd).st_size}, expected {size}")
        with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mm:
            st = SimState.from_buffer_copy(mm)
        if st.hdr.magic != SIM_STATE_MAGIC or st.hdr.version != SIM_STATE_VERSION:
            raise ValueError(f"{p}: not a version-{SIM_STATE_VERSION} simulator state file")
        nd = min(int(st.hdr.ndevices), SIM_MAX_DEVICES)
        devices = [
            DeviceInfo(i, d.mem_total, d.mem_used, d.managed_used, d.busy_ns, d.t_last_ns,
                       d.kernels_done, d.switches, st.res.resident[i], st.res.evicted[i],
                       st.res.migrated[i])
            for i, d in enumerate(st.dev[:nd])
        ]
        procs = []
        for i, pr in enumerate(st.proc):
            if not pr.in_use:
                continue
            procs.append(ProcessInfo(
                slot=i, pid=pr.pid, alive=_slot_alive(fd, i),
                busy_ns=[pr.dev[k].busy_ns for k in range(nd)],
                mem_used=[pr.dev[k].mem_used for k in range(nd)],
            ))
        return SimSnapshot(p, nd, int(st.hdr.timeslice_ns), devices, procs, int(st.hdr.host_used))
    finally:
        os.close(fd)


_DEV_OFF = SimState.dev.offset
_DEV_SIZE = ctypes.sizeof(SimDevice)


def read_devices(path: str | os.PathLike[str]) -> dict[int, tuple[int, int, int]] | None:
    """{index: (mem_total, mem_used, busy_ns)} of a state file, None if it is not one.

    Read with one pread, never mapped: in simulated mode every container gets this file
    read-write (as a real GPU is shared), so a tenant may truncate it under the reader."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        buf = os.pread(fd, _DEV_OFF + SIM_MAX_DEVICES * _DEV_SIZE, 0)
        if len(buf) < _DEV_OFF + SIM_MAX_DEVICES * _DEV_SIZE:
            return None
        h = SimHeader.from_buffer_copy(buf)
        if h.magic != SIM_STATE_MAGIC or h.version != SIM_STATE_VERSION or \
                not 0 < h.ndevices <= SIM_MAX_DEVICES:
            return None
        out = {}
        for i in range(h.ndevices):
            d = SimDevice.from_buffer_copy(buf, _DEV_OFF + i * _DEV_SIZE)
            out[i] = (int(d.mem_total), int(d.mem_used), int(d.busy_ns))
        return out
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


STRUCTS: dict[str, type[ctypes.Structure]] = {
    "sim_item": SimItem, "sim_marker": SimMarker, "sim_ctx": SimCtx,
    "sim_proc_dev": SimProcDev, "sim_proc": SimProc, "sim_device": SimDevice,
    "sim_header": SimHeader, "sim_state": SimState, "sim_mrange": SimMrange,
    "sim_residency": SimResidency,
}
CONSTANTS = {
    "SIM_STATE_MAGIC": SIM_STATE_MAGIC, "SIM_STATE_VERSION": SIM_STATE_VERSION,
    "SIM_MAX_DEVICES": SIM_MAX_DEVICES, "SIM_MAX_PROCS": SIM_MAX_PROCS,
    "SIM_MAX_CTXS": SIM_MAX_CTXS, "SIM_RING": SIM_RING, "SIM_MARKER_RING": SIM_MARKER_RING,
    "SIM_LOCK_SLOT_BASE": SIM_LOCK_SLOT_BASE, "SIM_MAX_MRANGES": SIM_MAX_MRANGES,
}


def offsets() -> dict[str, int]:
    """Every size and field offset of the mirrored layout, keyed by the C expression that
    gives it (tests compile these against sim_state.h)."""
    out: dict[str, int] = {}
    for cname, cls in STRUCTS.items():
        out[f"sizeof(struct {cname})"] = ctypes.sizeof(cls)
        for fname, *_ in cls._fields_:
            out[f"offsetof(struct {cname}, {fname})"] = getattr(cls, fname).offset
    return out


def main() -> None:
    """Print a snapshot (python -m tgs.intercept.simstate [path])."""
    import sys

    snap = read_state(sys.argv[1] if len(sys.argv) > 1 else None)
    for d in snap.devices:
        print(f"gpu{d.index}: mem {d.mem_used}/{d.mem_total} busy_ns {d.busy_ns} "
              f"kernels {d.kernels_done}")
    for p in snap.processes:
        print(f"  slot {p.slot} pid {p.pid} alive={p.alive} busy_ns {p.busy_ns} "
              f"mem {p.mem_used}")


if __name__ == "__main__":
    main()


__all__ = ["CONSTANTS", "DEFAULT_DEVICES", "DEFAULT_MEM", "DEVICES_ENV", "MEM_ENV", "STATE_ENV",
           "STRUCTS", "DeviceInfo", "ProcessInfo", "SimSnapshot", "default_path", "env_bytes",
           "env_devices", "offsets", "read_devices", "read_state", "state_path"]
