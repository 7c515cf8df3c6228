"""Linux open-file-description byte locks (fcntl F_OFD_*), as segment.h prescribes.

OFD locks belong to the open file description, so the kernel drops them when the owner dies (even by
SIGKILL) and they work across PID namespaces.  Note that a lock never conflicts with another lock on
the *same* description: a Segment does not see its own locks through ``is_locked``.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os


class _Flock(ctypes.Structure):
    # struct flock on Linux x86_64 / aarch64 (LP64): short, short, off_t, off_t, pid_t + padding.
    _fields_ = [
        ("l_type", ctypes.c_short),
        ("l_whence", ctypes.c_short),
        ("l_start", ctypes.c_int64),
        ("l_len", ctypes.c_int64),
        ("l_pid", ctypes.c_int32),
    ]


if ctypes.sizeof(_Flock) != 32:  # pragma: no cover - only LP64 Linux is supported
    raise ImportError(f"unexpected struct flock size {ctypes.sizeof(_Flock)}")

F_OFD_GETLK: int = getattr(fcntl, "F_OFD_GETLK", 36)
F_OFD_SETLK: int = getattr(fcntl, "F_OFD_SETLK", 37)
F_OFD_SETLKW: int = getattr(fcntl, "F_OFD_SETLKW", 38)


def lock_request(kind: int, byte: int) -> bytes:
    """The struct flock for fcntl(F_OFD_*) on one byte (kind: F_WRLCK, F_UNLCK, ...)."""
    fl = _Flock(l_type=kind, l_whence=os.SEEK_SET, l_start=byte, l_len=1, l_pid=0)
    return bytes(fl)


def lock_type(reply: bytes) -> int:
    """l_type of a struct flock that fcntl(F_OFD_GETLK) returned (F_UNLCK: nobody holds it)."""
    return int(_Flock.from_buffer_copy(reply).l_type)


def try_lock(fd: int, byte: int) -> bool:
    """Take a write lock on one byte without waiting; False if someone else holds it."""
    try:
        fcntl.fcntl(fd, F_OFD_SETLK, lock_request(fcntl.F_WRLCK, byte))
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def lock(fd: int, byte: int) -> None:
    """Take a write lock on one byte, waiting (the kernel frees a dead holder's lock)."""
    while True:
        try:
            fcntl.fcntl(fd, F_OFD_SETLKW, lock_request(fcntl.F_WRLCK, byte))
            return
        except InterruptedError:
            continue


def unlock(fd: int, byte: int) -> None:
    fcntl.fcntl(fd, F_OFD_SETLK, lock_request(fcntl.F_UNLCK, byte))


def is_locked(fd: int, byte: int) -> bool:
    """True if another open file description holds a lock on the byte."""
    out = fcntl.fcntl(fd, F_OFD_GETLK, lock_request(fcntl.F_WRLCK, byte))
    return _Flock.from_buffer_copy(out).l_type != fcntl.F_UNLCK
