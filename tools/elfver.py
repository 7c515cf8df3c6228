"""glibc versions from ELF files, read in Python (no objdump): what a library needs
(.gnu.version_r) and what a libc provides (.gnu.version_d).  64- and 32-bit, either byte order."""

from __future__ import annotations

import re
import struct
from pathlib import Path

SHT_GNU_VERDEF = 0x6FFFFFFD
SHT_GNU_VERNEED = 0x6FFFFFFE
_GLIBC = re.compile(r"GLIBC_(\d+)\.(\d+)(?:\.(\d+))?\Z")
LIBC_PLACES = ("lib/x86_64-linux-gnu/libc.so.6", "usr/lib/x86_64-linux-gnu/libc.so.6",
               "lib/aarch64-linux-gnu/libc.so.6", "usr/lib/aarch64-linux-gnu/libc.so.6",
               "lib64/libc.so.6", "usr/lib64/libc.so.6", "lib/libc.so.6", "usr/lib/libc.so.6")

Version = tuple[int, ...]


class ElfError(Exception):
    pass


def _sections(data: bytes) -> tuple[str, list[tuple[int, int, int, int, int]]]:
    """(byte order, [(type, offset, size, link, info)])."""
    if data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    bits, order = data[4], "<" if data[5] == 1 else ">"
    if bits == 2:
        shoff, = struct.unpack_from(order + "Q", data, 0x28)
        shentsize, shnum = struct.unpack_from(order + "HH", data, 0x3A)
        fmt, idx = order + "IIQQQQIIQQ", (1, 4, 5, 6, 7)
    elif bits == 1:
        shoff, = struct.unpack_from(order + "I", data, 0x20)
        shentsize, shnum = struct.unpack_from(order + "HH", data, 0x2E)
        fmt, idx = order + "IIIIIIIIII", (1, 4, 5, 6, 7)
    else:
        raise ElfError("unknown ELF class")
    out = []
    for i in range(shnum):
        f = struct.unpack_from(fmt, data, shoff + i * shentsize)
        out.append(tuple(f[k] for k in idx))
    return order, out  # type: ignore[return-value]


def _cstr(data: bytes, off: int) -> str:
    return data[off:data.index(b"\0", off)].decode(errors="replace")


def version_names(path: str | Path, kind: int) -> set[str]:
    """Version names an ELF file needs (SHT_GNU_VERNEED) or defines (SHT_GNU_VERDEF)."""
    data = Path(path).read_bytes()
    try:
        order, secs = _sections(data)
        names: set[str] = set()
        for typ, off, _size, link, count in secs:
            if typ != kind:
                continue
            strtab = secs[link][1]
            pos = off
            for _ in range(count):
                if kind == SHT_GNU_VERNEED:      # Verneed: version, cnt, file, aux, next
                    _v, cnt, _file, aux, nxt = struct.unpack_from(order + "HHIII", data, pos)
                    apos = pos + aux
                    for _ in range(cnt):          # Vernaux: hash, flags, other, name, next
                        _h, _f, _o, name, anext = struct.unpack_from(order + "IHHII", data, apos)
                        names.add(_cstr(data, strtab + name))
                        apos += anext
                else:                            # Verdef: ver, flags, ndx, cnt, hash, aux, next
                    _v, _f, _n, cnt, _h, aux, nxt = struct.unpack_from(order + "HHHHIII",
                                                                       data, pos)
                    name, = struct.unpack_from(order + "I", data, pos + aux)
                    names.add(_cstr(data, strtab + name))
                if not nxt:
                    break
                pos += nxt
        return names
    except (struct.error, IndexError, ValueError) as exc:
        raise ElfError(f"{path}: malformed ELF ({exc})") from None


def glibc_max(names: set[str]) -> Version | None:
    found = [tuple(int(x) for x in m.groups() if x is not None)
             for m in map(_GLIBC.match, names) if m]
    return max(found) if found else None


def glibc_needed(path: str | Path) -> Version | None:
    """The newest GLIBC_x.y a library needs (its glibc baseline)."""
    return glibc_max(version_names(path, SHT_GNU_VERNEED))


def glibc_provided(libc: str | Path) -> Version | None:
    """The newest GLIBC_x.y a libc.so.6 defines (its version)."""
    return glibc_max(version_names(libc, SHT_GNU_VERDEF))


def find_libc(rootfs: str | Path) -> Path | None:
    root = Path(rootfs)
    for rel in LIBC_PLACES:
        p = root / rel
        if p.exists():
            # a symlink inside the rootfs points inside it: resolve relative to the root
            while p.is_symlink():
                target = Path(p.readlink() if hasattr(p, "readlink") else p.resolve())
                p = root / str(target).lstrip("/") if target.is_absolute() else p.parent / target
            if p.is_file():
                return p
    return None


def vstr(v: Version | None) -> str:
    return "unknown" if v is None else ".".join(map(str, v))
