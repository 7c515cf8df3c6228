"""Byte sizes on the command line: 512MiB, 8GiB, 8G, 1.5GiB, 4096 (one parser for every tool).

K/M/G/T/P are binary multiples with or without "iB"/"B", as the shim's TGS_MEM_LIMIT
parser reads them; a fraction is allowed with a unit and rounds down to a byte.
Only ASCII is accepted: digits 0-9 (not the other Unicode digits that `str.isdigit`
and `int()` take), the ASCII unit letters (not the Kelvin sign U+212A, which a
case-insensitive Unicode regex matches as "k"), spaces and tabs; at most MAX_LEN
characters, so no input can make the parser slow or raise anything but SizeError.
"""

from __future__ import annotations

import re
from typing import Any

import click

_UNITS = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40, "P": 50}
MAX_LEN = 40
# no IGNORECASE, no \d, no \s: every character class is spelled out in ASCII
_RE = re.compile(r"[ \t]*([0-9]{1,20}(?:\.[0-9]{1,20})?|\.[0-9]{1,20})[ \t]*"
                 r"([KMGTPkmgtp]?)([iI]?[bB])?[ \t]*\Z", re.ASCII)
MAX_SIZE = (1 << 63) - 1
UNLIMITED_WORDS = ("unlimited", "none", "inf")


class SizeError(ValueError):
    pass


def show(text: str, limit: int = MAX_LEN) -> str:
    """An input as an error message quotes it: ASCII only (escapes show Unicode tricks),
    cut to `limit` characters."""
    cut = text[:limit]
    return ascii(cut) + (f"... ({len(text)} characters)" if len(text) > limit else "")


def parse_size(text: str) -> int:
    """Bytes for `text`; SizeError with a readable reason otherwise."""
    if not isinstance(text, str) or len(text) > MAX_LEN:
        raise SizeError(f"{show(str(text))} is not a size: at most {MAX_LEN} characters")
    m = _RE.match(text)
    if not m:
        raise SizeError(f"{show(text)} is not a size (examples: 512MiB, 8GiB, 8G, 1.5GiB, 4096)")
    num, unit, suffix = m.group(1), m.group(2).upper(), m.group(3)
    if suffix and suffix.upper() == "IB" and not unit:
        raise SizeError(f"{show(text)} is not a size: 'iB' needs a unit (KiB, MiB, GiB, TiB)")
    if "." in num and not unit:
        raise SizeError(f"{show(text)} is not a size: a fraction of a byte")
    if "." in num:
        whole, _, frac = num.partition(".")
        # exact: (whole + frac / 10^len) * 2^unit, rounded down
        value = (int(whole or "0") << _UNITS[unit]) + \
            (int(frac) << _UNITS[unit]) // 10 ** len(frac)
    else:
        value = int(num) << _UNITS[unit]
    if value > MAX_SIZE:
        raise SizeError(f"{show(text)} is too large (at most {MAX_SIZE} bytes)")
    return value


def format_size(value: int | None) -> str:
    """1610612736 -> '1.5GiB'; None -> 'unlimited'."""
    if value is None:
        return "unlimited"
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if value >= 1 << shift:
            q = value / (1 << shift)
            return f"{q:.0f}{unit}" if q == int(q) else f"{q:.1f}{unit}"
    return f"{value}B"


class SizeParam(click.ParamType):
    """A click parameter type; with allow_unlimited, 'unlimited' gives -1."""

    name = "size"

    def __init__(self, allow_unlimited: bool = False) -> None:
        self.allow_unlimited = allow_unlimited

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        text = str(value)
        if self.allow_unlimited and len(text) <= MAX_LEN \
                and text.strip(" \t").lower() in UNLIMITED_WORDS:
            return -1
        try:
            return parse_size(text)
        except SizeError as exc:
            self.fail(str(exc), param, ctx)


SIZE = SizeParam()
SIZE_OR_UNLIMITED = SizeParam(allow_unlimited=True)
