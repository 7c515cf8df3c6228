"""Read-only view of the simulator's shared state file (sim/sim_state.h).

The simulated driver keeps one state file per simulated device set
(TGS_SIM_STATE, default /dev/shm/tgs-sim-<uid>).  This module mirrors the C
layout with ctypes (tests/sim checks the offsets against the C compiler) and
exposes per-device busy time and memory, and per-process busy time, for tools
and the controller.  Counters advance lazily: they are exact as of each
device's ``t_last_ns`` (CLOCK_MONOTONIC), the last time any process touched it.
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import struct
from dataclasses import dataclass, field

SIM_STATE_MAGIC = 0x314D4953534754
SIM_STATE_VERSION = 1
SIM_MAX_DEVICES = 8
SIM_MAX_PROCS = 128
SIM_MAX_CTXS = 256
SIM_RING = 2048
SIM_MARKER_RING = 512
SIM_LOCK_SLOT_BASE = 0

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
        ("reserved", u64 * 8),
    ]


class SimState(ctypes.Structure):
    _fields_ = [
        ("hdr", SimHeader),
        ("dev", SimDevice * SIM_MAX_DEVICES),
        ("proc", SimProc * SIM_MAX_PROCS),
        ("ctx", SimCtx * SIM_MAX_CTXS),
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


def default_path() -> str:
    env = os.environ.get("TGS_SIM_STATE")
    if env and env.startswith("/"):
        return env
    return f"/dev/shm/tgs-sim-{os.getuid()}"


def _slot_alive(fd: int, slot: int) -> bool:
    """True when some process holds slot's OFD lock (F_OFD_GETLK)."""
    getlk = getattr(fcntl, "F_OFD_GETLK", 36)
    req = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, SIM_LOCK_SLOT_BASE + slot, 1, 0)
    try:
        res = fcntl.fcntl(fd, getlk, req)
    except OSError:
        return True
    return struct.unpack("hhqqi4x", res)[0] != fcntl.F_UNLCK


def read_state(path: str | os.PathLike[str] | None = None) -> SimSnapshot:
    """Snapshot of a state file; raises FileNotFoundError or ValueError."""
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
                       d.kernels_done, d.switches)
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
        return SimSnapshot(p, nd, int(st.hdr.timeslice_ns), devices, procs)
    finally:
        os.close(fd)


def offsets() -> dict[str, int]:
    """Layout facts that tests compare with the C compiler's."""
    return {
        "sizeof(struct sim_state)": ctypes.sizeof(SimState),
        "sizeof(struct sim_ctx)": ctypes.sizeof(SimCtx),
        "sizeof(struct sim_proc)": ctypes.sizeof(SimProc),
        "sizeof(struct sim_device)": ctypes.sizeof(SimDevice),
        "offsetof(struct sim_state, dev)": SimState.dev.offset,
        "offsetof(struct sim_state, proc)": SimState.proc.offset,
        "offsetof(struct sim_state, ctx)": SimState.ctx.offset,
        "offsetof(struct sim_device, mem_total)": SimDevice.mem_total.offset,
        "offsetof(struct sim_device, busy_ns)": SimDevice.busy_ns.offset,
        "offsetof(struct sim_device, kernels_done)": SimDevice.kernels_done.offset,
        "offsetof(struct sim_device, last_reap_ns)": SimDevice.last_reap_ns.offset,
        "offsetof(struct sim_ctx, items)": SimCtx.items.offset,
        "offsetof(struct sim_ctx, markers)": SimCtx.markers.offset,
        "offsetof(struct sim_proc, dev)": SimProc.dev.offset,
        "offsetof(struct sim_header, uuid_seed)": SimHeader.uuid_seed.offset,
    }


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


__all__ = ["DeviceInfo", "ProcessInfo", "SimSnapshot", "default_path", "read_state", "offsets"]
