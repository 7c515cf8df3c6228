"""Creating a shared file atomically: readers see nothing or the whole, initialised file."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(final: Path, data: bytes, mode: int = 0o660) -> None:
    """Write ``data`` to a temp name beside ``final``, fsync, rename over it, fsync the dir."""
    tmp = final.with_name(f".{final.name}.tmp.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)  # the umask must not narrow it
        os.write(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, final)
    dfd = os.open(final.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
