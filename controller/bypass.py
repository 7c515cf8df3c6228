"""Processes that use a GPU without the shim (docs/security.md, "How the controller can see a
bypass").

About once a second (metrics.MetricsTap calls ``look``) the detector lists the processes the GPU
itself reports, independently of any shim: NVML's running compute processes (and per-process
utilisation when the driver offers it) on a real GPU, the simulator's per-process table (read
with pread, as gpustats reads its devices) on a simulated one.  Each such process (a host pid:
the controller runs in the host pid namespace) is then classified from /proc:

- *managed*: it has one of the job segment files (``<segment dir>/*.seg``, not the device
  segments) open; the shim keeps its job's .seg open for its life.  Files are compared by
  (st_dev, st_ino), so a container that mounts the directory elsewhere still matches.  The
  slots' own ``pid`` (the owner's namespace pid) is not used.
- *unknown*: it cannot be inspected (gone, permission): never reported.
- *unmanaged*: otherwise.  Reported once seen unmanaged in GRACE consecutive looks (a shim
  attaches lazily, at its first hooked call), with a log WARNING once per process.

By default report only: nothing is stopped and the policy is not changed.  With
``--on-bypass stop|kill`` an ``actor`` (bypass_action.py) signals, in the look that reports it,
a reported process that provably runs in a registered job's container (docs/security.md).
"""

from __future__ import annotations

import ctypes
import fcntl
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tgs.intercept import simstate as S
from tgs.intercept.devseg import is_device_segment
from tgs.intercept.ofd import F_OFD_GETLK, lock_request, lock_type

from .bypass_action import BypassActor, job_of_segment
from .devices import Device

log = logging.getLogger(__name__)
GRACE = 2                 # consecutive unmanaged looks before a process is reported
LOOK_EVERY = 1.0          # seconds between looks (metrics.MetricsTap)
MAX_FDS = 65536           # fds inspected per process (a bound, not a limit of the kernel)


@dataclass(frozen=True)
class GpuProcess:
    """One process the GPU reports on one device."""

    pid: int                     # host pid
    device: int
    mem_used: int | None = None  # bytes, None when the source does not say
    busy_ns: int | None = None   # cumulative GPU time (simulator)
    share: float | None = None   # 0..1 GPU time share when the source gives it (NVML smUtil)


@dataclass(frozen=True)
class Unmanaged:
    """One reported process: what status shows (replies.UnmanagedInfo)."""

    pid: int
    comm: str | None
    mem_used: int | None
    gpu_share: float | None
    first_seen: float            # unix time of the first look that saw it unmanaged
    start: int | None = None     # /proc/<pid>/stat start time: (pid, start) names the process
    job: str | None = None       # --on-bypass: the job whose container it runs in
    action: str | None = None    # --on-bypass: "stop", "kill" (or "failed") once taken


Lister = Callable[[list[Device]], list[GpuProcess]]


@dataclass
class _Seen:
    streak: int = 0
    first_seen: float = 0.0
    busy: tuple[float, int] | None = None     # (monotonic t, busy_ns) at the previous look
    share: float | None = None
    start: int | None = None                  # the process's start time (pid reuse)


@dataclass
class BypassDetector:
    devices: list[Device]
    seg_dir: Path
    lister: Lister | None = None              # default: list_gpu_processes
    proc_root: Path = Path("/proc")
    sim_path: Path | None = None
    clock: Callable[[], float] = time.time
    seen: dict[tuple[int, int], _Seen] = field(default_factory=dict)   # (device, pid)
    warned: set[int] = field(default_factory=set)
    # (pid, start time) -> the job segment it was seen holding: the shim keeps it open for the
    # process's life, so a managed process is not rescanned while that segment exists
    managed: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    last: dict[int, list[Unmanaged]] = field(default_factory=dict)
    looks: int = 0
    actor: BypassActor | None = None          # --on-bypass stop|kill (default: report only)

    def look(self, now: float | None = None) -> dict[int, list[Unmanaged]]:
        """One look: {device index: reported unmanaged processes} (also kept in ``last``)."""
        now = time.monotonic() if now is None else now
        wall = self.clock()
        lister = self.lister or (lambda devs: list_gpu_processes(devs, self.sim_path))
        try:
            procs = lister(self.devices)
        except Exception:                       # a source's failure must not stop the loop
            log.exception("cannot list the GPU processes")
            procs = []
        segs = seg_files(self.seg_dir)
        verdicts: dict[int, tuple[str, int | None]] = {}
        out: dict[int, list[Unmanaged]] = {d.index: [] for d in self.devices}
        keep: set[tuple[int, int]] = set()
        alive: set[tuple[int, int]] = set()
        for p in procs:
            if p.pid not in verdicts:
                verdicts[p.pid] = self._classify(p.pid, segs, alive)
            verdict, start = verdicts[p.pid]
            if verdict != "unmanaged":
                continue
            key = (p.device, p.pid)
            keep.add(key)
            s = self.seen.get(key)
            if s is None or s.start != start:   # a reused pid: a new process, a new grace
                s = self.seen[key] = _Seen(first_seen=wall, start=start)
            s.streak += 1
            s.share = p.share if p.share is not None else _share(s, now, p.busy_ns)
            if s.streak < GRACE:
                continue
            comm = read_comm(p.pid, self.proc_root)
            out.setdefault(p.device, []).append(
                Unmanaged(p.pid, comm, p.mem_used, s.share, round(s.first_seen, 3), start))
            if p.pid not in self.warned:
                self.warned.add(p.pid)
                log.warning("GPU %d: process %d (%s) uses the GPU without the TGS shim "
                            "(no job segment open): it is not limited by TGS",
                            p.device, p.pid, comm)
        for key in set(self.seen) - keep:
            del self.seen[key]
        self.warned &= {pid for _, pid in keep}
        self.managed = {k: v for k, v in self.managed.items() if k in alive}
        if self.actor is not None:            # acts in the look that reports, not later
            out = self.actor.act(out, {pid: (st, job_of_segment(segs[seg]))
                                       for (pid, st), seg in self.managed.items()})
        self.last = out
        self.looks += 1
        return out


    def _classify(self, pid: int, segs: Segs,
                  alive: set[tuple[int, int]]) -> tuple[str, int | None]:
        """(verdict, the start time it was read with)."""
        root = str(self.proc_root)
        start = start_time(pid, root)
        if start is None:
            return "unknown", None
        key = (pid, start)
        if self.managed.get(key) in segs:
            alive.add(key)
            return "managed", start
        verdict, seg = _scan(pid, segs, root)
        if seg is not None:
            self.managed[key] = seg
            alive.add(key)
        return verdict, start


def _share(s: _Seen, now: float, busy: int | None) -> float | None:
    """GPU time share from cumulative busy time between two looks."""
    prev, s.busy = s.busy, (None if busy is None else (now, busy))
    if busy is None or prev is None or busy < prev[1] or now - prev[0] < 0.2:
        return s.share
    return round(max(0.0, min(1.0, (busy - prev[1]) / 1e9 / (now - prev[0]))), 4)


# ---------------------------------------------------------------- matching (/proc)
Segs = dict[tuple[int, int], str]      # (st_dev, st_ino) -> file name


def seg_files(seg_dir: Path) -> Segs:
    """The job segments (``*.seg`` but the device tables ``device-<i>.seg``) by (st_dev,
    st_ino), with their file names (<job>.seg, a part's <job>@<k>.seg)."""
    out: Segs = {}
    try:
        entries = list(os.scandir(seg_dir))
    except OSError:
        return out
    for e in entries:
        if not e.name.endswith(".seg") or is_device_segment(e.name):
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        out[(st.st_dev, st.st_ino)] = e.name
    return out


def classify(pid: int, segs: Segs, proc_root: Path = Path("/proc")) -> str:
    """"managed" (a job segment open), "unmanaged", or "unknown" (cannot be inspected)."""
    return _scan(pid, segs, str(proc_root))[0]


def _scan(pid: int, segs: Segs, root: str) -> tuple[str, tuple[int, int] | None]:
    """(verdict, the open segment's (st_dev, st_ino) when managed)."""
    fd_dir = f"{root}/{pid}/fd/"
    try:
        names = os.listdir(fd_dir)
    except OSError:                 # gone, or not ours to read
        return "unknown", None
    for name in names[:MAX_FDS]:
        link = fd_dir + name
        try:
            if not os.readlink(link).endswith(".seg"):
                continue            # sockets, pipes, anything else: no stat needed
            st = os.stat(link)
        except OSError:
            continue                # closed meanwhile
        if (st.st_dev, st.st_ino) in segs:
            return "managed", (st.st_dev, st.st_ino)
    if not os.path.exists(f"{root}/{pid}"):
        return "unknown", None      # exited while we looked
    return "unmanaged", None


def start_time(pid: int, root: str) -> int | None:
    """The process's start time (/proc/<pid>/stat field 22): with the pid, names one process."""
    try:
        with open(f"{root}/{pid}/stat", "rb") as f:
            stat = f.read(4096)
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def read_comm(pid: int, proc_root: Path = Path("/proc")) -> str | None:
    try:
        return (proc_root / str(pid) / "comm").read_text(errors="replace").strip()[:64]
    except OSError:
        return None


# ---------------------------------------------------------------- sources
def list_gpu_processes(devices: list[Device], sim_path: Path | None = None) -> list[GpuProcess]:
    out: list[GpuProcess] = []
    sim = [d.index for d in devices if d.kind == "sim"]
    if sim:
        out += sim_processes(sim_path or S.state_path(), set(sim))
    nvml = [d.index for d in devices if d.kind == "nvml"]
    if nvml:
        out += nvml_processes(nvml)
    return out


_PROC_OFF = S.SimState.proc.offset
_PROC_SIZE = ctypes.sizeof(S.SimProc)
_READ = _PROC_OFF + S.SIM_MAX_PROCS * _PROC_SIZE


def sim_processes(path: Path, indexes: set[int]) -> list[GpuProcess]:
    """The simulator's live processes with memory or GPU time on the given devices.  Read with
    pread, never mapped (every simulated tenant may write or truncate the file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return []
    try:
        buf = os.pread(fd, _READ, 0)
        if len(buf) < _READ:
            return []
        h = S.SimHeader.from_buffer_copy(buf)
        if h.magic != S.SIM_STATE_MAGIC or h.version != S.SIM_STATE_VERSION or \
                not 0 < h.ndevices <= S.SIM_MAX_DEVICES:
            return []
        out = []
        for i in range(S.SIM_MAX_PROCS):
            p = S.SimProc.from_buffer_copy(buf, _PROC_OFF + i * _PROC_SIZE)
            if not p.in_use or p.pid <= 0 or not _sim_alive(fd, i):
                continue
            for k in sorted(indexes):
                if k >= h.ndevices:
                    continue
                d = p.dev[k]
                if d.mem_used or d.busy_ns:
                    out.append(GpuProcess(int(p.pid), k, int(d.mem_used), int(d.busy_ns)))
        return out
    except (OSError, ValueError):
        return []
    finally:
        os.close(fd)


def _sim_alive(fd: int, slot: int) -> bool:
    try:
        res = fcntl.fcntl(fd, F_OFD_GETLK, lock_request(fcntl.F_WRLCK, S.SIM_LOCK_SLOT_BASE + slot))
    except OSError:
        return True
    return lock_type(res) != fcntl.F_UNLCK


def nvml_processes(indexes: list[int]) -> list[GpuProcess]:
    """NVML's running compute processes (the newest call pynvml offers) with their used memory,
    and their SM utilisation when nvmlDeviceGetProcessUtilization answers."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:
        return []
    out: list[GpuProcess] = []
    try:
        get = next(getattr(pynvml, n) for n in (
            "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
            "nvmlDeviceGetComputeRunningProcesses") if hasattr(pynvml, n))
        for k in indexes:
            try:
                h = pynvml.nvmlDeviceGetHandleByIndex(k)
                procs = get(h)
            except Exception:
                continue
            util: dict[int, float] = {}
            try:
                for s in pynvml.nvmlDeviceGetProcessUtilization(
                        h, int((time.time() - 2) * 1e6)):
                    util[int(s.pid)] = max(util.get(int(s.pid), 0.0), s.smUtil / 100.0)
            except Exception:
                pass                 # not supported, or no sample yet: share unknown
            for p in procs:
                mem = getattr(p, "usedGpuMemory", None)
                out.append(GpuProcess(int(p.pid), k, mem if isinstance(mem, int) else None,
                                      share=util.get(int(p.pid))))
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return out
