"""The controller's disk against a tenant that fills it (docs/security.md, "Disk").

A tenant can write past the end of its own files (`.seg`, `.pub`), or allocate blocks past
the end with fallocate(KEEP_SIZE), until the file system under the segment directory is full;
with the default layout that is also where the controller saves its state.  Two defences:

- **Grown files are cut back.** Every few periods the loop fstats each job's files through
  the descriptors it holds; a file that holds more than its size (a page of slack) is cut
  back to it (ftruncate, then the blocks past it punched out) through a descriptor opened on
  the same inode (st_dev/st_ino checked) in the controller's own directory, which no
  container mounts, so no tenant can swap the entry.  The shims map only the file's size, so
  a cut never takes anything from them.  The job is flagged (`segment_tampered`).
- **Space held back.** A reserve file in each directory the controller writes (state,
  segments) holds RESERVE_BYTES.  A write of the controller that meets a full disk first cuts
  back every grown file, then gives up the reserves, and tries once more; the reserves come
  back when there is room (`replenish`, from the loop).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")
RESERVE_NAME = ".tgs-reserve"
RESERVE_BYTES = 16 << 20          # a few hundred registrations' files, and many state saves
SLACK = 4096                      # blocks a file may hold past its size (one page)
REPLENISH_S = 5.0                 # how often a released reserve is tried again
FULL = (errno.ENOSPC, errno.EDQUOT)
_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE = 0x01, 0x02
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]


def holds(fd: int, size: int) -> int:
    """Bytes the file behind fd holds beyond `size` (its length or its blocks), 0 if none."""
    st = os.fstat(fd)
    held = max(st.st_size, st.st_blocks * 512)
    return held - size if held > size + SLACK or st.st_size > size else 0


def cut_back(fd: int, path: Path, size: int) -> int:
    """Cut the file behind fd (read-only) back to `size` bytes; the bytes it held beyond."""
    extra = holds(fd, size)
    if not extra:
        return 0
    st = os.fstat(fd)
    wfd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        w = os.fstat(wfd)
        if (w.st_dev, w.st_ino) != (st.st_dev, st.st_ino):
            raise OSError(errno.ESTALE, f"{path} is no longer the file the controller opened")
        if w.st_size > size:
            os.ftruncate(wfd, size)
        # blocks past the end (fallocate KEEP_SIZE) survive a truncate on some file systems
        if _libc.fallocate(wfd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, size,
                           (1 << 62) - size) != 0:
            e = ctypes.get_errno()
            if e not in (errno.EOPNOTSUPP, errno.ENOSYS):
                raise OSError(e, os.strerror(e))
    finally:
        os.close(wfd)
    return extra


class Reserve:
    """RESERVE_BYTES held in one directory, given up when the disk is full."""

    def __init__(self, directory: Path, size: int = RESERVE_BYTES) -> None:
        self.path = Path(directory) / RESERVE_NAME
        self.size = size
        self.held = False

    def replenish(self) -> bool:
        if self.held:
            return True
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                         0o600)
        except OSError as exc:
            log.debug("reserve %s: %s", self.path, exc)
            return False
        try:
            os.posix_fallocate(fd, 0, self.size)
            self.held = True
        except OSError as exc:
            os.ftruncate(fd, 0)
            log.debug("reserve %s: %s", self.path, exc)
        finally:
            os.close(fd)
        return self.held

    def release(self) -> bool:
        """Give the space back to the file system; True if there was some."""
        if not self.held:
            return False
        self.path.unlink(missing_ok=True)
        self.held = False
        return True


class DiskGuard:
    """Runs the controller's writes; a full disk gets one more try after the defences."""

    def __init__(self, dirs: list[Path], cut_grown: Callable[[], int] = lambda: 0) -> None:
        seen: set[int] = set()
        self.reserves: list[Reserve] = []
        for d in dirs:
            try:
                dev = os.stat(d).st_dev
            except OSError:
                continue
            if dev not in seen:                 # one reserve per file system
                seen.add(dev)
                self.reserves.append(Reserve(d))
        self.cut_grown = cut_grown
        self.full_writes = 0                    # writes that met a full disk (status)
        self._next_try = 0.0

    def replenish(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if now < self._next_try or all(r.held for r in self.reserves):
            return
        self._next_try = now + REPLENISH_S
        for r in self.reserves:
            if not r.held and r.replenish():
                log.info("disk reserve %s held again", r.path)

    def write(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except OSError as exc:
            if exc.errno not in FULL:
                raise
        self.full_writes += 1
        freed = self.cut_grown()
        released = [str(r.path) for r in self.reserves if r.release()]
        log.warning("disk full while %s: cut back %d bytes of grown tenant files, released "
                    "reserve %s; trying once more", what, freed, ", ".join(released) or "(none)")
        self._next_try = time.monotonic() + REPLENISH_S
        return fn()
