"""The per-GPU device segment ("device-<index>.seg", struct tgs_dev_segment in segment.h).

Production shims add/subtract ``prod_active`` atomically on idle<->busy transitions (and keep the
gap history the FIT gate predicts from); the controller creates the file and recomputes the count
from the live slots' ``dev_active`` flags.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ._header import const, ffi
from .atomic_file import write_atomically
from .segment import SegmentError

DEV_MAGIC = const("TGS_DEV_MAGIC")
DEV_VERSION = const("TGS_DEV_VERSION")
DEV_SIZE = ffi().sizeof("struct tgs_dev_segment")


def device_segment_path(segment_dir: str | os.PathLike[str], device_index: int) -> Path:
    """Where the shims look for device ``device_index``: next to the job segments."""
    return Path(segment_dir) / f"device-{device_index}.seg"


def create_device(segment_dir: str | os.PathLike[str], device_index: int) -> DeviceSegment:
    """Create (atomically, mode 0660) the device segment in ``segment_dir`` and open it."""
    final = device_segment_path(segment_dir, device_index)
    buf = bytearray(DEV_SIZE)
    f = ffi()
    d = f.cast("struct tgs_dev_segment *", f.from_buffer(buf))
    d.magic, d.version, d.size, d.device_index = DEV_MAGIC, DEV_VERSION, DEV_SIZE, device_index
    del d
    write_atomically(final, bytes(buf))
    return open_device(final)


def open_device(path: str | os.PathLike[str]) -> DeviceSegment:
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        raise SegmentError(f"{p}: cannot open: {exc.strerror}") from exc
    try:
        size = os.fstat(fd).st_size
        if size != DEV_SIZE:
            raise SegmentError(f"{p}: file is {size} bytes, a device segment is {DEV_SIZE}")
        mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)  # the mapping keeps the file; no lock lives on it
    dev = DeviceSegment(p, mm)
    h = dev.view
    if h.magic != DEV_MAGIC or h.version != DEV_VERSION or h.size != DEV_SIZE:
        dev.close()
        raise SegmentError(f"{p}: not a version-{DEV_VERSION} TGS device segment")
    return dev


class DeviceSegment:
    """A mapped device segment."""

    def __init__(self, path: Path, mm: mmap.mmap) -> None:
        self.path = path
        self._mm: mmap.mmap | None = mm
        self._ffi = ffi()
        self._buf = self._ffi.from_buffer(mm)
        self.view: Any = self._ffi.cast("struct tgs_dev_segment *", self._buf)

    @property
    def device_index(self) -> int:
        return int(self.view.device_index)

    @property
    def prod_active(self) -> int:
        return int(self.view.prod_active)

    @property
    def idle_since_ns(self) -> int:
        """CLOCK_MONOTONIC ns when production last went idle device-wide (0 = never)."""
        return int(self.view.idle_since_ns)

    @property
    def busy_seq(self) -> int:
        """Production's idle -> busy transitions so far (one per gap that ended)."""
        return int(self.view.busy_seq)

    @property
    def gap_pred_ns(self) -> int:
        """The conservative next-gap prediction the FIT gate uses (0 = no history)."""
        return int(self.view.gap_pred_ns)

    @property
    def gaps_ns(self) -> list[int]:
        """The gap ring, most recent last (only entries written so far)."""
        n, ring = int(self.view.gap_idx), const("TGS_GAP_RING")
        return [int(self.view.gap_ns[i % ring]) for i in range(max(0, n - ring), n)]

    def set_prod_active(self, value: int) -> None:
        self.view.prod_active = value

    def release_one(self) -> None:
        """Drop one count (a dead production process's); not atomic against the shims, which is why
        ``recompute`` exists."""
        if self.view.prod_active > 0:
            self.view.prod_active -= 1

    def recompute(self, segments: Iterable[Any]) -> int:
        """Set prod_active to the number of live slots with dev_active = 1 over ``segments``."""
        total = 0
        for seg in segments:
            for i in seg.live_slots():
                total += int(seg.slot(i).dev_active != 0)
        self.view.prod_active = total
        return total

    def close(self) -> None:
        if self._mm is None:
            return
        self.view = None
        self._ffi.release(self._buf)
        self._mm.close()
        self._mm = None

    def __enter__(self) -> DeviceSegment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
