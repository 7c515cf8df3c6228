"""Acting on a process that uses the GPU without the shim (``tgs-controller --on-bypass``;
docs/security.md "Acting on a bypass").

Off by default (``report``).  With ``stop`` (SIGSTOP) or ``kill`` (SIGKILL) the detector
(bypass.py) hands each look's reported processes here, in the look that reports them, and a
process is signalled only when it provably runs in the container of a registered TGS job:

- its *container* is (mount namespace, pid namespace, cgroup) read from /proc/<pid>/ns/mnt,
  /proc/<pid>/ns/pid and /proc/<pid>/cgroup;
- it equals the container of a *managed* process the same look saw on the GPU holding a job's
  segment (the job: that segment's name, a part's ``@k`` dropped);
- and its mount namespace is neither the controller's nor that of the host's pid 1: a job run
  on the host (tgs-run) has no container, so nothing there is ever attributed.

Never pid 0 or 1, the controller or its parent.  Identity: a process is (pid, start time), the
start time the detector read when it classified it.  The pidfd is opened first, then
/proc/<pid> as a directory whose start time must still be that one; the pidfd then names the
same process (a pid is not handed back to the process it left), every read goes through the
directory (a dead process's directory reads nothing, even if the pid is reused) and the signal
through the pidfd (ESRCH once the process is gone, never a newcomer's).  Without pidfd_open
(old kernels) the start time is re-checked just before kill(2): a narrow race, documented.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .bypass import Unmanaged

log = logging.getLogger("tgs.controller.bypass")
MODES = ("report", "stop", "kill")
SIGNALS = {"stop": signal.SIGSTOP, "kill": signal.SIGKILL}
CGROUP_MAX = 65536        # bytes of /proc/<pid>/cgroup read (a bound, not a kernel limit)


@dataclass(frozen=True)
class Container:
    """What makes two processes "in the same container", as the controller sees them."""

    mnt: str               # readlink /proc/<pid>/ns/mnt, e.g. "mnt:[4026532178]"
    pid_ns: str            # readlink /proc/<pid>/ns/pid
    cgroup: str            # /proc/<pid>/cgroup (paths as the controller's cgroup ns sees them)


Sender = Callable[[int, int], None]       # (pid, signal): tests on a fake /proc


def _stat_start(dirfd: int) -> int | None:
    """Field 22 of <dir>/stat (the start time), read through the process's directory."""
    try:
        fd = os.open("stat", os.O_RDONLY | os.O_CLOEXEC, dir_fd=dirfd)
        try:
            stat = os.read(fd, 4096)
        finally:
            os.close(fd)
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def read_container(pid: int, start: int | None, root: str = "/proc") -> Container | None:
    """The container of the process (pid, start); None when it is not that process (gone,
    pid reused) or cannot be read."""
    try:
        dirfd = os.open(f"{root}/{pid}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if start is None or _stat_start(dirfd) != start:
            return None
        mnt = os.readlink("ns/mnt", dir_fd=dirfd)
        pid_ns = os.readlink("ns/pid", dir_fd=dirfd)
        fd = os.open("cgroup", os.O_RDONLY | os.O_CLOEXEC, dir_fd=dirfd)
        try:
            cgroup = os.read(fd, CGROUP_MAX).decode(errors="replace")
        finally:
            os.close(fd)
    except OSError:
        return None
    finally:
        os.close(dirfd)
    return Container(mnt, pid_ns, cgroup)


def host_mounts(root: str = "/proc") -> set[str]:
    """Mount namespaces that are not a container's: the controller's own and pid 1's (the
    host's, when the controller runs in the host pid namespace as it must)."""
    out = set()
    for path in ("/proc/self/ns/mnt", f"{root}/1/ns/mnt"):
        try:
            out.add(os.readlink(path))
        except OSError:
            pass                    # pid 1 unreadable (not root): the controller's own stays
    return out


def job_of_segment(name: str) -> str:
    """The job a segment file belongs to: ``<job>.seg`` or a part's ``<job>@<k>.seg``."""
    return name.removesuffix(".seg").split("@", 1)[0]


def attribute(pid: int, start: int | None, managed: Mapping[int, tuple[int, str]],
              root: str = "/proc", host: set[str] | None = None,
              known: dict[int, Container | None] | None = None) -> str | None:
    """The job(s) ("a" or "a,b") whose container the process (pid, start) runs in: the
    container of a managed process ({pid: (start, job)}) outside the host's mount namespace;
    None when it cannot be proved.  ``known``: the managed processes' containers, filled as
    read (one read per look however many processes are attributed)."""
    target = read_container(pid, start, root)
    if target is None or target.mnt in (host_mounts(root) if host is None else host):
        return None
    known = {} if known is None else known
    jobs = set()
    for mpid, (mstart, job) in managed.items():
        if mpid not in known:
            known[mpid] = read_container(mpid, mstart, root)
        if mpid != pid and known[mpid] == target:
            jobs.add(job)
    return ",".join(sorted(jobs)) or None


def _pidfd_open(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):     # Python < 3.9, kernel < 5.3, or gone
        return None


@dataclass
class BypassActor:
    """--on-bypass stop|kill: the signal for reported processes of a job's container."""

    mode: str                                 # "stop" or "kill"
    proc_root: Path = Path("/proc")
    sender: Sender | None = None              # None: the real pidfd path
    # (pid, start) -> (what was done: "stop", "kill" or "failed", not retried; the job)
    done: dict[tuple[int, int], tuple[str, str]] = field(default_factory=dict)
    unattributed: set[tuple[int, int]] = field(default_factory=set)   # logged once
    counts: dict[int, int] = field(default_factory=dict)              # GPU -> actions taken
    known: dict[int, Container | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in SIGNALS:
            raise ValueError(f"--on-bypass {self.mode!r}: expected one of {', '.join(MODES)}")

    def act(self, reported: dict[int, list[Unmanaged]],
            managed: Mapping[int, tuple[int, str]]) -> dict[int, list[Unmanaged]]:
        """Signal what can be attributed; the reports, each with its job and action."""
        root = str(self.proc_root)
        host = host_mounts(root)
        self.known = {}                     # managed processes' containers, this look
        keys: set[tuple[int, int]] = set()
        out: dict[int, list[Unmanaged]] = {}
        for dev in sorted(reported):
            out[dev] = []
            for u in reported[dev]:
                if u.start is None:
                    out[dev].append(u)
                    continue
                key = (u.pid, u.start)
                if key not in keys:
                    keys.add(key)
                    self._one(u, dev, managed, root, host)
                action, job = self.done.get(key, (None, None))
                out[dev].append(replace(u, job=job, action=action))
        # forget what is no longer reported (gone, or a pid now naming another process)
        self.done = {k: v for k, v in self.done.items() if k in keys}
        self.unattributed &= keys
        return out

    def _one(self, u: Unmanaged, dev: int, managed: Mapping[int, tuple[int, str]],
             root: str, host: set[str]) -> None:
        assert u.start is not None
        key = (u.pid, u.start)
        if key in self.done or u.pid <= 1 or u.pid in (os.getpid(), os.getppid()):
            return                            # acted on already (a stopped one stays); never
        pidfd = None if self.sender is not None else _pidfd_open(u.pid)
        try:
            # after pidfd_open: a container read for (pid, start) proves the pidfd's process
            job = attribute(u.pid, u.start, managed, root, host, self.known)
            if job is None:
                if key not in self.unattributed:
                    self.unattributed.add(key)
                    log.info("GPU %d: process %d (%s) is not attributable to a TGS job's "
                             "container: reported only", dev, u.pid, u.comm)
                return
            action = self._send(u, dev, pidfd, root)
            self.done[key] = (action, job)
            if action != "failed":
                self.counts[dev] = self.counts.get(dev, 0) + 1
                log.warning("GPU %d: process %d (%s) of job %s's container uses the GPU "
                            "without the TGS shim: sent %s (--on-bypass %s)", dev, u.pid,
                            u.comm, job, SIGNALS[self.mode].name, self.mode)
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def _send(self, u: Unmanaged, dev: int, pidfd: int | None, root: str) -> str:
        sig = SIGNALS[self.mode]
        try:
            if self.sender is not None:
                self.sender(u.pid, sig)
            elif pidfd is not None:
                signal.pidfd_send_signal(pidfd, sig)
            elif read_container(u.pid, u.start, root) is not None:
                os.kill(u.pid, sig)           # no pidfd: the start time was just re-checked
            else:
                raise ProcessLookupError(u.pid)
            return self.mode
        except ProcessLookupError:
            return "failed"                   # exited meanwhile: nothing to do
        except OSError as exc:
            log.warning("GPU %d: cannot send %s to process %d (job container): %s",
                        dev, sig.name, u.pid, exc)
            return "failed"
