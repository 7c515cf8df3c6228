"""A job's publish page ``pub/<job>.pub`` (struct tgs_pub in segment.h).

TENANT-OWNED: the controller creates it (identity only); then the job's own shims write it
(production: busy count, gap history, idle futex; opportunistic: gap claim).  Other tenants' shims
map it read-only; the controller reads it with ``tgs.intercept.tenant.read_pub`` (pread).  The
``Pub`` class here maps it read-write: for the creator and tests only.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from .atomic_file import write_atomically
from .control import NAME_MAX, set_str
from .header import const, ffi
from .mapped import MappedStruct

PUB_MAGIC = const("TGS_PUB_MAGIC")
VERSION = const("TGS_SEG_VERSION")
PUB_SIZE = ffi().sizeof("struct tgs_pub")
GAP_RING = const("TGS_GAP_RING")
PUB_DIR = "pub"


def pub_dir(seg_dir: str | os.PathLike[str]) -> Path:
    return Path(seg_dir) / PUB_DIR


def pub_path(seg: str | os.PathLike[str], job_name: str) -> Path:
    """The pub of a job whose .seg is ``seg`` (the shim's default for TGS_PUB)."""
    return pub_dir(Path(seg).parent) / f"{job_name}.pub"


def pub_bytes(job_name: str) -> bytes:
    buf = bytearray(PUB_SIZE)
    f = ffi()
    p = f.cast("struct tgs_pub *", f.from_buffer(buf))
    p.magic, p.version, p.size = PUB_MAGIC, VERSION, PUB_SIZE
    set_str(p.job_name, job_name, NAME_MAX)
    del p
    return bytes(buf)


def create_pub(path: str | os.PathLike[str], job_name: str) -> None:
    """Create (atomically, mode 0664: the job writes it, every tenant reads it) a zeroed
    publish page for ``job_name``."""
    p = Path(path)
    p.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    write_atomically(p, pub_bytes(job_name), mode=0o664)   # every tenant reads it


def open_pub(path: str | os.PathLike[str]) -> Pub:
    p = Path(path)
    fd = os.open(p, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        mm = mmap.mmap(fd, PUB_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    return Pub(p, mm)


class Pub(MappedStruct):
    """A publish page mapped read-write (tests, tools that own it)."""

    CTYPE = "struct tgs_pub *"

    @property
    def busy(self) -> int:
        return int(self.view.busy)

    @property
    def idle_since_ns(self) -> int:
        """CLOCK_MONOTONIC ns when the job last went idle (0 = never)."""
        return int(self.view.idle_since_ns)

    @property
    def busy_seq(self) -> int:
        return int(self.view.busy_seq)

    @property
    def gap_pred_ns(self) -> int:
        return int(self.view.gap_pred_ns)

    @property
    def gaps_ns(self) -> list[int]:
        """The gap ring, most recent last (only entries written so far)."""
        n = int(self.view.gap_idx)
        return [int(self.view.gap_ns[i % GAP_RING]) for i in range(max(0, n - GAP_RING), n)]

