"""Named fields of the TGS shared files, found through tgs.intercept's cffi layout (segment.h).

Nothing here hard-codes an offset or a file name: a file is identified by its leading magic
number (segment.h names the constant beside each struct's ``magic`` field), and a field is
looked up by name in that struct, in its slots (a struct with ``header_size``, ``slot_size`` and
``nslots``) or in their lanes.  So the hostile suite's field-level lies work on whatever layout
segment.h declares, before and after a redesign; a lie whose field no writable file has is
reported as not expressible.

Only the tenant process (hostile_tenant.py) maps files; the test process reads with pread.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tgs.intercept._header import const, ffi, find_header

_MAGIC_RE = re.compile(
    r"struct\s+(\w+)\s*\{\s*(?:/\*(?:[^*]|\*(?!/))*\*/\s*)*uint64_t\s+magic;\s*/\*\s*(TGS_\w+)\s*\*/")
_CONST_RE = re.compile(r"#define\s+(TGS_\w*MAGIC\w*)\s")


@lru_cache(maxsize=1)
def magic_table() -> dict[int, str]:
    """Magic value -> the struct type that starts a file with it."""
    text = find_header().read_text()
    out: dict[int, str] = {}
    for m in _MAGIC_RE.finditer(text):
        try:
            out[const(m.group(2))] = f"struct {m.group(1)}"
        except (AttributeError, TypeError):
            continue
    structs = [f"struct {n}" for n in ffi().list_types()[1]]
    for name in _CONST_RE.findall(text):         # a magic whose struct the comments do not name
        try:
            value = const(name)
        except (AttributeError, TypeError):
            continue
        if value in out:
            continue
        token = name[len("TGS_"):-len("_MAGIC")].lower() if name.endswith("_MAGIC") else ""
        cands = [s for s in structs if _has_field(s, "magic") and token and token in s]
        if len(cands) == 1:
            out[value] = cands[0]
    return out


def _fields(ctype: str) -> dict[str, Any]:
    t = ffi().typeof(ctype)
    return dict(t.fields or [])


def _has_field(ctype: str, name: str) -> bool:
    try:
        return name in _fields(ctype)
    except Exception:
        return False


def file_struct(path: str) -> str | None:
    """The struct type at the start of a file (by its magic), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        head = os.pread(fd, 8, 0)
    finally:
        os.close(fd)
    if len(head) < 8:
        return None
    return magic_table().get(struct.unpack("<Q", head)[0])


@dataclass(frozen=True)
class FieldRef:
    """Where one named field lives in a file: byte offset, size, and the C type name."""

    path: str
    name: str
    offset: int
    size: int
    ctype: str


def _slot_type() -> str | None:
    for s in ffi().list_types()[1]:
        if _has_field(f"struct {s}", "lanes") and _has_field(f"struct {s}", "state"):
            return f"struct {s}"
    return None


def _read_u32(fd: int, off: int) -> int:
    b = os.pread(fd, 4, off)
    return struct.unpack("<I", b)[0] if len(b) == 4 else 0


def find_fields(path: str, name: str) -> list[FieldRef]:
    """Every occurrence of field ``name`` in a file: in its top struct, in each slot and in each
    lane of each slot (counters live there).  Empty when the file has no such field."""
    top = file_struct(path)
    if top is None:
        return []
    f = ffi()
    out: list[FieldRef] = []
    tf = _fields(top)
    if name in tf:
        out.append(FieldRef(path, name, tf[name].offset, f.sizeof(tf[name].type),
                            tf[name].type.cname))
    slot = _slot_type()
    if slot is None or not all(k in tf for k in ("header_size", "slot_size", "nslots")):
        return out
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        hsize = _read_u32(fd, tf["header_size"].offset)
        ssize = _read_u32(fd, tf["slot_size"].offset)
        nslots = _read_u32(fd, tf["nslots"].offset)
    finally:
        os.close(fd)
    if ssize != f.sizeof(slot) or not 0 < nslots <= 4096:
        return out
    sf = _fields(slot)
    lane_t = sf["lanes"].type.item if "lanes" in sf else None
    lf = _fields(lane_t.cname) if lane_t is not None else {}
    for i in range(nslots):
        base = hsize + i * ssize
        if name in sf:
            out.append(FieldRef(path, name, base + sf[name].offset, f.sizeof(sf[name].type),
                                sf[name].type.cname))
        elif name in lf and lane_t is not None:
            for k in range(sf["lanes"].type.length):
                off = base + sf["lanes"].offset + k * f.sizeof(lane_t) + lf[name].offset
                out.append(FieldRef(path, name, off, f.sizeof(lf[name].type),
                                    lf[name].type.cname))
    return out


def first_field(paths: list[str], names: tuple[str, ...]) -> Iterator[FieldRef]:
    """For each name in order, its occurrences across paths; stops at the first name found."""
    for name in names:
        refs = [r for p in paths for r in find_fields(p, name)]
        if refs:
            yield from refs
            return


def read_field(ref: FieldRef) -> int | None:
    """The field's current value (pread; None if the file is shorter)."""
    fmt = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}.get(ref.size)
    if fmt is None:
        return None
    try:
        fd = os.open(ref.path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        b = os.pread(fd, ref.size, ref.offset)
    finally:
        os.close(fd)
    return struct.unpack(fmt, b)[0] if len(b) == ref.size else None
