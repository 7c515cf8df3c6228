"""Load the segment layout from libshim/include/tgs/segment.h (the single source of truth).

The text between ``/* CDEF-BEGIN */`` and ``/* CDEF-END */`` is stripped of comments and handed to
cffi's ``cdef``; no copy of the layout lives in Python.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

import cffi

HEADER_ENV = "TGS_SEGMENT_HEADER"
_BEGIN = "/* CDEF-BEGIN */"
_END = "/* CDEF-END */"


def header_candidates() -> list[Path]:
    """Where segment.h may live, in order: env override, source checkout, installed copies."""
    here = Path(__file__).resolve().parent
    out: list[Path] = []
    env = os.environ.get(HEADER_ENV)
    if env:
        out.append(Path(env))
    out.append(here.parent / "libshim" / "include" / "tgs" / "segment.h")  # source / editable
    out.append(here / "include" / "segment.h")  # package data, if a wheel ships it
    for prefix in ("/usr/local", "/usr"):
        out.append(Path(prefix) / "include" / "tgs" / "segment.h")
    return out


def find_header() -> Path:
    for cand in header_candidates():
        if cand.is_file():
            return cand
    tried = ", ".join(str(c) for c in header_candidates())
    raise FileNotFoundError(f"tgs: segment.h not found (tried {tried}); set {HEADER_ENV}")


def extract_cdef(text: str) -> str:
    """The CDEF block of the header, without comments."""
    try:
        start = text.index(_BEGIN) + len(_BEGIN)
        end = text.index(_END, start)
    except ValueError as exc:
        raise ValueError("segment.h has no CDEF-BEGIN/CDEF-END block") from exc
    body = text[start:end]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    body = re.sub(r"//[^\n]*", "", body)
    return body


@lru_cache(maxsize=1)
def ffi() -> cffi.FFI:
    """The process-wide FFI with the segment layout declared."""
    f = cffi.FFI()
    f.cdef(extract_cdef(find_header().read_text()))
    return f


def const(name: str) -> int:
    """An integer #define of the CDEF block (e.g. ``TGS_SEG_MAGIC``)."""
    value = getattr(_lib(), name)
    return int(value)


@lru_cache(maxsize=1)
def _lib() -> object:
    # ABI mode: dlopen(None) gives access to the integer constants only.
    return ffi().dlopen(None)
