"""The simulator's facts for Python: its state file's path, the environment it reads when it
creates that file, and the file's layout (contracts/include/tgs/sim_state.h).

The simulated driver keeps one state file per simulated device set (``STATE_ENV``, default
/dev/shm/tgs-sim-<uid>).  The layout is not copied here: ``ffi()`` binds the header's CDEF block
through cffi, as tgs.intercept.header binds segment.h, and the ctypes classes below (``SimState``
and the structs it holds) are built from that binding, field by field at cffi's offsets;
tests/sim/test_simstate_layout.py checks the binding against the compiler.  ``read_state`` maps
the file (benchmarks, tests, tools); ``read_devices`` reads it with pread only (the controller: in
simulated mode a tenant may write or truncate it).  Counters advance lazily: they are exact as of
each device's ``t_last_ns`` (CLOCK_MONOTONIC), the last time any process touched it.
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cffi

from .header import bind, constants, extract_cdef, find_header
from .ofd import F_OFD_GETLK, lock_request, lock_type
from .sizes import SizeError, parse_size

HEADER = "sim_state.h"
# The CDEF block names pthread_mutex_t only inside a union with char lock_pad[64], which fixes
# the union's size; the binding needs the type to exist, not its platform size.
_PRELUDE = "typedef struct { uint64_t opaque; } pthread_mutex_t;\n"


def ffi() -> cffi.FFI:
    """The FFI with sim_state.h's layout declared."""
    return bind(HEADER, _PRELUDE)


def _const(name: str) -> int:
    return int(getattr(constants(HEADER, _PRELUDE), name))


CONSTANTS: dict[str, int] = {
    n: _const(n) for n in re.findall(r"^\s*#define\s+(\w+)",
                                     extract_cdef(find_header(HEADER).read_text(), HEADER), re.M)}
SIM_STATE_MAGIC = CONSTANTS["SIM_STATE_MAGIC"]
SIM_STATE_VERSION = CONSTANTS["SIM_STATE_VERSION"]
SIM_MAX_DEVICES = CONSTANTS["SIM_MAX_DEVICES"]
SIM_MAX_PROCS = CONSTANTS["SIM_MAX_PROCS"]
SIM_MAX_CTXS = CONSTANTS["SIM_MAX_CTXS"]
SIM_RING = CONSTANTS["SIM_RING"]
SIM_MARKER_RING = CONSTANTS["SIM_MARKER_RING"]
SIM_LOCK_SLOT_BASE = CONSTANTS["SIM_LOCK_SLOT_BASE"]
SIM_MAX_MRANGES = CONSTANTS["SIM_MAX_MRANGES"]

# The environment the simulator reads (sim/state.c, sim/env.c; docs/simulator.md).
STATE_ENV = "TGS_SIM_STATE"        # state file: an absolute path, else the default below
DEVICES_ENV = "TGS_SIM_DEVICES"    # devices of a new state file: 1..SIM_MAX_DEVICES
MEM_ENV = "TGS_SIM_MEM"            # memory per device of a new state file (bytes, 16GiB, ...)
DEFAULT_DEVICES = 1
DEFAULT_MEM = 16 << 30
MIN_MEM = 1 << 20                  # the simulator's least capacity (sim/env.c)
STATE_PATH_MAX = 4000              # a longer TGS_SIM_STATE is refused (tgs/state_path.h)


def state_path(env: Mapping[str, str] | None = None) -> Path:
    """The state file the simulator uses under ``env`` (default: ours): STATE_ENV when it is an
    absolute path shorter than STATE_PATH_MAX bytes, else /dev/shm/tgs-sim-<uid>
    (tgs/state_path.h, the simulator's own rule)."""
    value = (os.environ if env is None else env).get(STATE_ENV)
    if value and value.startswith("/") and len(os.fsencode(value)) < STATE_PATH_MAX:
        return Path(value)
    return Path(f"/dev/shm/tgs-sim-{os.getuid()}")


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


_PRIMITIVES: dict[str, Any] = {
    "char": ctypes.c_char, "int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32,
    "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64,
}


def _ctypes_of(t: Any, made: dict[str, type[ctypes.Structure]]) -> Any:
    """The ctypes type of a cffi type of the layout."""
    if t.kind == "primitive":
        return _PRIMITIVES[t.cname]
    if t.kind == "array":
        return _ctypes_of(t.item, made) * t.length
    if t.kind == "struct":
        return _structure(t, made)
    raise TypeError(f"{HEADER}: no ctypes type for {t.cname}")


def _structure(t: Any, made: dict[str, type[ctypes.Structure]]) -> type[ctypes.Structure]:
    """A ctypes Structure for a cffi struct: its fields at cffi's offsets.  Of the members of an
    anonymous union (the same offset) the largest is kept: a device's lock_pad, not the mutex
    it pads (the file is only read here)."""
    if t.cname in made:
        return made[t.cname]
    f = ffi()
    by_offset: dict[int, tuple[str, Any]] = {}
    for name, fld in t.fields:
        kept = by_offset.get(fld.offset)
        if kept is None or f.sizeof(fld.type) > f.sizeof(kept[1]):
            by_offset[fld.offset] = (name, fld.type)
    fields = [(name, _ctypes_of(ft, made)) for _, (name, ft) in sorted(by_offset.items())]
    cls = type(_class_name(t.cname), (ctypes.Structure,), {"_fields_": fields})
    for name, fld in t.fields:
        if name in dict(fields) and getattr(cls, name).offset != fld.offset:
            raise TypeError(f"{HEADER}: {t.cname}.{name} lands at a different offset in ctypes")
    if ctypes.sizeof(cls) != f.sizeof(t):
        raise TypeError(f"{HEADER}: {t.cname} has a different size in ctypes")
    made[t.cname] = cls
    return cls


def _class_name(cname: str) -> str:
    """``struct sim_proc_dev`` -> ``SimProcDev``."""
    return "".join(w.capitalize() for w in cname.removeprefix("struct ").split("_"))


def _structs() -> dict[str, type[ctypes.Structure]]:
    made: dict[str, type[ctypes.Structure]] = {}
    names = sorted(n for n in ffi().list_types()[1] if n.startswith("sim_"))
    return {n: _structure(ffi().typeof(f"struct {n}"), made) for n in names}


# Every struct of the header, by its C name, as ctypes (the public names below are these).
STRUCTS: dict[str, type[ctypes.Structure]] = _structs()
SimItem = STRUCTS["sim_item"]
SimMarker = STRUCTS["sim_marker"]
SimCtx = STRUCTS["sim_ctx"]
SimProcDev = STRUCTS["sim_proc_dev"]
SimProc = STRUCTS["sim_proc"]
SimDevice = STRUCTS["sim_device"]
SimHeader = STRUCTS["sim_header"]
SimMrange = STRUCTS["sim_mrange"]
SimResidency = STRUCTS["sim_residency"]
SimState = STRUCTS["sim_state"]


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


def offsets() -> dict[str, int]:
    """Every size and field offset of the bound layout (cffi's), keyed by the C expression that
    gives it (tests compile these against sim_state.h)."""
    f = ffi()
    out: dict[str, int] = {}
    for cname in STRUCTS:
        t = f.typeof(f"struct {cname}")
        out[f"sizeof(struct {cname})"] = f.sizeof(t)
        for fname, fld in t.fields:
            out[f"offsetof(struct {cname}, {fname})"] = fld.offset
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


__all__ = ["CONSTANTS", "DEFAULT_DEVICES", "DEFAULT_MEM", "DEVICES_ENV", "HEADER", "MEM_ENV",
           "STATE_ENV", "STATE_PATH_MAX", "STRUCTS", "DeviceInfo", "ProcessInfo", "SimSnapshot",
           "default_path", "env_bytes", "env_devices", "ffi", "offsets", "read_devices",
           "read_state", "state_path"]
