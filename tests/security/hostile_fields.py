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

from tgs.intercept.header import const, ffi, find_header

_MAGIC_RE = re.compile(
    r"struct\s+(\w+)\s*\{\s*(?:/\*(?:[^*]|\*(?!/))*\*/\s*)*uint64_t\s+magic;\s*/\*\s*(TGS_\w+)\s*\*/")
_CONST_RE = re.compile(r"#define\s+(TGS_\w*MAGIC\w*)\s")


def walk(ctype: str, base: int = 0) -> Iterator[tuple[str, int, Any]]:
    """Every scalar field of a struct, depth first: (name, offset, cffi type); nested structs
    and arrays of structs are descended into (so a field is found wherever the layout nests it).
    """
    f = ffi()
    for name, fld in ffi().typeof(ctype).fields or []:
        t, off = fld.type, base + fld.offset
        if t.kind == "struct":
            yield from walk(t.cname, off)
        elif t.kind == "array" and t.item.kind == "struct":
            for k in range(t.length):
                yield from walk(t.item.cname, off + k * f.sizeof(t.item))
        else:
            yield name, off, t


def _starts_with_magic(ctype: str) -> bool:
    first = next(walk(ctype), None)
    return first is not None and first[0] == "magic" and first[1] == 0


@lru_cache(maxsize=1)
def magic_table() -> dict[int, str]:
    """Magic value -> the struct type that starts a file with it: TGS_<X>_MAGIC goes with the
    one magic-first struct whose name has the component <x> (tgs_seg_header, tgs_dev_segment),
    else with the struct whose magic field's comment names the constant."""
    text = find_header().read_text()
    tops = [f"struct {n}" for n in ffi().list_types()[1] if _starts_with_magic(f"struct {n}")]
    out: dict[int, str] = {}
    for name in _CONST_RE.findall(text):
        try:
            value = const(name)
        except (AttributeError, TypeError):
            continue
        token = name[len("TGS_"):-len("_MAGIC")].lower() if name.endswith("_MAGIC") else ""
        cands = [s for s in tops if token and token in s.split()[1].split("_")]
        if len(cands) == 1:
            out[value] = cands[0]
    for m in _MAGIC_RE.finditer(text):
        try:
            out.setdefault(const(m.group(2)), f"struct {m.group(1)}")
        except (AttributeError, TypeError):
            continue
    return out


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
    """The per-process slot: the struct with a ``state`` and an array of ``lanes``."""
    for s in ffi().list_types()[1]:
        top = dict(ffi().typeof(f"struct {s}").fields or [])
        if "lanes" in top and any(n == "state" for n, _, _ in walk(f"struct {s}")):
            return f"struct {s}"
    return None


def _read_u32(fd: int, off: int) -> int:
    b = os.pread(fd, 4, off)
    return struct.unpack("<I", b)[0] if len(b) == 4 else 0


def _refs(path: str, ctype: str, base: int, name: str) -> list[FieldRef]:
    f = ffi()
    return [FieldRef(path, name, off, f.sizeof(t), t.cname)
            for n, off, t in walk(ctype, base) if n == name]


def find_fields(path: str, name: str) -> list[FieldRef]:
    """Every occurrence of field ``name`` in a file: in its top struct (nested structs and
    arrays included) and, for a file whose header has ``header_size``, ``slot_size`` and
    ``nslots``, in each slot that follows it.  Empty when the file has no such field."""
    top = file_struct(path)
    if top is None:
        return []
    out = _refs(path, top, 0, name)
    slot = _slot_type()
    tf = {n: off for n, off, _ in walk(top)}
    if slot is None or not all(k in tf for k in ("header_size", "slot_size", "nslots")):
        return out
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        hsize = _read_u32(fd, tf["header_size"])
        ssize = _read_u32(fd, tf["slot_size"])
        nslots = _read_u32(fd, tf["nslots"])
    finally:
        os.close(fd)
    if ssize != ffi().sizeof(slot) or not 0 < nslots <= 4096:
        return out
    for i in range(nslots):
        out += _refs(path, slot, hsize + i * ssize, name)
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
