"""A file mapped MAP_SHARED and viewed as one struct of segment.h through cffi: the common
part of the control segment, the device segment and the publish page views."""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Any, TypeVar

from .header import ffi

T = TypeVar("T", bound="MappedStruct")


class MappedStruct:
    """``view`` is the struct (a cffi pointer into the mapping) until ``close()``."""

    CTYPE = ""   # e.g. "struct tgs_pub *", set by each subclass

    def __init__(self, path: Path, mm: mmap.mmap) -> None:
        self.path = path
        self._mm: mmap.mmap | None = mm
        self._ffi = ffi()
        self._buf = self._ffi.from_buffer(mm)
        self.view: Any = self._ffi.cast(self.CTYPE, self._buf)

    def close(self) -> None:
        if self._mm is None:
            return
        self.view = None
        self._ffi.release(self._buf)
        self._mm.close()
        self._mm = None

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
