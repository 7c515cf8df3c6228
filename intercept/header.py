"""Bind the contract headers (contracts/include/tgs/) through cffi: no layout is copied into Python.

A header that Python binds keeps its layout between ``/* CDEF-BEGIN */`` and ``/* CDEF-END */``;
that text, stripped of comments, is handed to cffi's ``cdef``.  ``ffi()`` and ``const()`` are
segment.h's (the shared files of the shim and the controller); ``bind(name)`` binds any other
contract header the same way (tgs.intercept.simstate binds sim_state.h).
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

import cffi

from .locate import source_root

HEADER_ENV = "TGS_SEGMENT_HEADER"   # segment.h elsewhere (the other headers sit beside it)
SEGMENT_H = "segment.h"
_BEGIN = "/* CDEF-BEGIN */"
_END = "/* CDEF-END */"


def contracts_dir() -> Path:
    """contracts/include/tgs of the source tree this package runs from (an editable install or
    the checkout itself); it may be absent in an installed copy."""
    return source_root() / "contracts" / "include" / "tgs"


def header_candidates(name: str = SEGMENT_H) -> list[Path]:
    """Where a contract header may live, in order: beside $TGS_SEGMENT_HEADER, the source tree,
    installed copies."""
    here = Path(__file__).resolve().parent
    out: list[Path] = []
    env = os.environ.get(HEADER_ENV)
    if env:
        out.append(Path(env) if name == SEGMENT_H else Path(env).with_name(name))
    out.append(contracts_dir() / name)  # source / editable
    out.append(here / "include" / name)  # package data, if a wheel ships it
    for prefix in ("/usr/local", "/usr"):
        out.append(Path(prefix) / "include" / "tgs" / name)
    return out


def find_header(name: str = SEGMENT_H) -> Path:
    for cand in header_candidates(name):
        if cand.is_file():
            return cand
    tried = ", ".join(str(c) for c in header_candidates(name))
    raise FileNotFoundError(f"tgs: {name} not found (tried {tried}); set {HEADER_ENV}")


def extract_cdef(text: str, name: str = SEGMENT_H) -> str:
    """The CDEF block of a header, without comments."""
    try:
        start = text.index(_BEGIN) + len(_BEGIN)
        end = text.index(_END, start)
    except ValueError as exc:
        raise ValueError(f"{name} has no CDEF-BEGIN/CDEF-END block") from exc
    body = text[start:end]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    body = re.sub(r"//[^\n]*", "", body)
    return body


@cache
def bind(name: str, prelude: str = "") -> cffi.FFI:
    """An FFI with the CDEF block of contract header ``name`` declared; ``prelude`` declares
    what the block uses but does not define (platform types, declared opaque)."""
    f = cffi.FFI()
    f.cdef(prelude + extract_cdef(find_header(name).read_text(), name))
    return f


@cache
def constants(name: str, prelude: str = "") -> object:
    """The integer #defines of a bound header (ABI mode: dlopen(None) gives the constants)."""
    return bind(name, prelude).dlopen(None)


def ffi() -> cffi.FFI:
    """The process-wide FFI with the segment layout declared."""
    return bind(SEGMENT_H)


def const(name: str) -> int:
    """An integer #define of segment.h's CDEF block (e.g. ``TGS_SEG_MAGIC``)."""
    return int(getattr(constants(SEGMENT_H), name))


@cache
def string_const(name: str, header: str = SEGMENT_H) -> str:
    """A string #define of a contract header (``#define NAME "text"``, outside the CDEF block:
    cffi's cdef takes integers only)."""
    m = re.search(rf'^#define {re.escape(name)} "([^"\\]*)"', find_header(header).read_text(),
                  re.M)
    if m is None:
        raise ValueError(f"{header} has no string #define {name}")
    return m.group(1)
