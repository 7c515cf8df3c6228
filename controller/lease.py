"""Job leases: a job started by `tgs-run` lives exactly as long as its command's process tree.

The controller creates `<segment dir>/<job>.lease` (empty, mode 0400, owned by the
uid the register request named) and keeps a descriptor on it.  `tgs-run` opens it
O_RDONLY and takes an OFD *read* lock on byte 0 with a descriptor its children
inherit (not close-on-exec): the lock lives on the open file description, which
every process of the tree shares, so it is held while any of them keeps the
descriptor, and the kernel drops it when the last one closes it or dies (SIGKILL
included).  The controller only ever *tests* the lock (F_OFD_GETLK: never blocks,
never takes a lock a tenant could hold against it).

An ephemeral job with a lease is removed when nobody holds the lease AND none of its
processes is live (a process that closed its inherited descriptors still counts
through its segment slot), once it was held or had a live process, or LEASE_GRACE
seconds after registration if it never was (a wrapper killed before taking it).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import stat
import time
from pathlib import Path

from tgs.intercept.ofd import F_OFD_GETLK, F_OFD_SETLK, lock_request, lock_type

log = logging.getLogger(__name__)
LEASE_BYTE = 0
LEASE_GRACE = 30.0                           # s: a lease nobody ever took


class LeaseError(Exception):
    pass


def _flock(kind: int) -> bytes:
    return lock_request(kind, LEASE_BYTE)


class Lease:
    """The controller's side: create or re-open the file, test whether it is held."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.born = time.monotonic()
        self.used = False            # held once, or the job had a live process
        self._test = _flock(fcntl.F_WRLCK)
        self._failed = False

    @classmethod
    def create(cls, path: Path, uid: int | None) -> Lease:
        """A new lease file (a stale one of the same name is replaced)."""
        flags = os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        fd = os.open(path, flags, 0o400)
        try:
            if uid is not None and uid != os.geteuid():
                try:
                    os.fchown(fd, uid, -1)
                except PermissionError:
                    raise LeaseError(f"cannot hand the lease to uid {uid}: the controller is "
                                     "not root") from None
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        return cls(Path(path), fd)

    @classmethod
    def open(cls, path: Path) -> Lease:
        """Re-open a recorded lease (controller restart): a regular file, no symlink."""
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise LeaseError(f"{path} is not a regular file")
        lease = cls(Path(path), fd)
        lease.used = True            # it may have been held before the restart
        return lease

    def held(self) -> bool:
        """Whether any process holds the lease (one non-blocking syscall).  Should the test
        itself fail, the lease counts as held: the job keeps its limits (fail closed)."""
        try:
            out = fcntl.fcntl(self.fd, F_OFD_GETLK, self._test)
        except OSError as exc:
            if not self._failed:
                log.error("lease %s: cannot test it (%s): keeping the job", self.path, exc)
                self._failed = True
            return True
        return lock_type(out) != fcntl.F_UNLCK

    def expired(self, live: bool) -> bool:
        """The job's end: nobody holds the lease and no process is live, after it was used
        (or LEASE_GRACE after registration if it never was)."""
        if live or self.held():
            self.used = True
            return False
        return self.used or time.monotonic() - self.born > LEASE_GRACE

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def remove(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def take(path: str | Path) -> int:
    """The wrapper's side: open the lease and hold a read lock on it with a descriptor that
    children inherit.  Returns the descriptor (close it to let go)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LeaseError(f"{path} is not a regular file")
        try:
            fcntl.fcntl(fd, F_OFD_SETLK, _flock(fcntl.F_RDLCK))
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise LeaseError(f"{path} is write-locked by another process") from None
            raise
        os.set_inheritable(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd
