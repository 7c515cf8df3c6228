"""The per-GPU device segment ("device-<index>.seg", struct tgs_dev_segment in segment.h).

CONTROLLER-OWNED, read-only for every tenant: the jobs on the device (their pub names, priority,
the union of an opportunistic job's gap masks, production's busy bias).  The controller rewrites
the table under a sequence lock: ``list_seq`` is odd while it writes and changes on every change,
so shims re-read the table (and re-map pubs) only when it moved.
"""

from __future__ import annotations

import mmap
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .atomic_file import write_atomically
from .control import NAME_MAX, SegmentError, set_str
from .header import const, ffi, string_const
from .mapped import MappedStruct

DEV_MAGIC = const("TGS_DEV_MAGIC")
DEV_VERSION = const("TGS_DEV_VERSION")
DEV_SIZE = ffi().sizeof("struct tgs_dev_segment")
MAX_JOBS = const("TGS_DEV_MAX_JOBS")
JOB_USED = const("TGS_DEV_JOB_USED")
# The file name, segment.h's TGS_DEV_SEG_NAME (a printf format of the device index).
_NAME_FORMAT = string_const("TGS_DEV_SEG_NAME")
_NAME_PREFIX, _NAME_SUFFIX = _NAME_FORMAT.split("%d")
DEVICE_SEG_RE = re.compile(re.escape(_NAME_PREFIX) + "([0-9]+)" + re.escape(_NAME_SUFFIX))


@dataclass(frozen=True)
class DevJob:
    """One entry of the device table."""

    name: str
    priority: int
    generation: int = 0
    gap_mask: int = 0
    busy_bias: int = 0


def device_segment_name(device_index: int) -> str:
    """The device segment's file name ("device-<index>.seg": TGS_DEV_SEG_NAME)."""
    return _NAME_FORMAT % device_index


def is_device_segment(name: str) -> bool:
    """Whether a file name is a device segment's (not a job's .seg)."""
    return DEVICE_SEG_RE.fullmatch(name) is not None


def device_segment_path(segment_dir: str | os.PathLike[str], device_index: int) -> Path:
    """Where the shims look for device ``device_index``: next to the job segments."""
    return Path(segment_dir) / device_segment_name(device_index)


def create_device(segment_dir: str | os.PathLike[str], device_index: int) -> DeviceSegment:
    """Create (atomically, mode 0644: read-only for tenants) the device segment and open it."""
    final = device_segment_path(segment_dir, device_index)
    buf = bytearray(DEV_SIZE)
    f = ffi()
    d = f.cast("struct tgs_dev_segment *", f.from_buffer(buf))
    d.magic, d.version, d.size, d.device_index = DEV_MAGIC, DEV_VERSION, DEV_SIZE, device_index
    del d
    write_atomically(final, bytes(buf), mode=0o644)
    return open_device(final)


def open_device(path: str | os.PathLike[str]) -> DeviceSegment:
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise SegmentError(f"{p}: cannot open: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != DEV_SIZE:
            raise SegmentError(f"{p}: file is {st.st_size} bytes, a device segment is {DEV_SIZE}")
        mm = mmap.mmap(fd, DEV_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    dev = DeviceSegment(p, mm)
    h = dev.view
    if h.magic != DEV_MAGIC or h.version != DEV_VERSION or h.size != DEV_SIZE:
        dev.close()
        raise SegmentError(f"{p}: not a version-{DEV_VERSION} TGS device segment")
    return dev


class DeviceSegment(MappedStruct):
    """A mapped device segment (the controller's own file)."""

    CTYPE = "struct tgs_dev_segment *"

    def __init__(self, path: Path, mm: mmap.mmap) -> None:
        super().__init__(path, mm)
        self._jobs: tuple[DevJob, ...] | None = None

    @property
    def device_index(self) -> int:
        return int(self.view.device_index)

    @property
    def list_seq(self) -> int:
        return int(self.view.list_seq)

    def jobs(self) -> list[DevJob]:
        v, out = self.view, []
        for k in range(min(int(v.njobs), MAX_JOBS)):
            j = v.jobs[k]
            if j.flags & JOB_USED:
                out.append(DevJob(self._ffi.string(j.name).decode(errors="replace"),
                                  int(j.priority), int(j.generation), int(j.gap_mask),
                                  int(j.busy_bias)))
        return out

    def set_jobs(self, jobs: Sequence[DevJob]) -> bool:
        """Rewrite the table (at most MAX_JOBS entries, production first); False if unchanged."""
        want = tuple(sorted(jobs, key=lambda j: (j.priority, j.name))[:MAX_JOBS])
        if want == self._jobs:
            return False
        v = self.view
        v.list_seq = v.list_seq + 1 | 1          # odd: being written
        for k in range(MAX_JOBS):
            e = v.jobs[k]
            if k < len(want):
                j = want[k]
                set_str(e.name, j.name, NAME_MAX)
                e.generation, e.gap_mask, e.busy_bias = j.generation, j.gap_mask, j.busy_bias
                e.priority, e.flags = j.priority, JOB_USED
            else:
                set_str(e.name, "", NAME_MAX)
                e.generation = e.gap_mask = e.busy_bias = e.priority = e.flags = 0
        v.njobs = len(want)
        v.list_seq = v.list_seq + 1              # even: done, and changed
        self._jobs = want
        return True

