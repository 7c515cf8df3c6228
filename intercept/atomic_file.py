"""Creating a shared file atomically: readers see nothing or the whole, initialised file."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path


def write_atomically(final: Path, data: bytes, mode: int = 0o660) -> None:
    """Write ``data`` to a temp name beside ``final``, fsync, rename over it, fsync the dir."""
    fd, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    tmp = Path(name)
    try:
        os.fchmod(fd, mode)  # the umask must not narrow it
        view = memoryview(data)
        while view:          # a short write (a file system filling up) is not the whole file
            n = os.write(fd, view)
            if n <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            view = view[n:]
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
