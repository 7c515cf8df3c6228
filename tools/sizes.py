"""Byte sizes on the command line: 512MiB, 8GiB, 8G, 1.5GiB, 4096 (one parser for every tool).

K/M/G/T are binary multiples with or without "iB"/"B", as the shim's TGS_MEM_LIMIT
parser reads them; a fraction is allowed with a unit and rounds down to a byte.
"""

from __future__ import annotations

import re
from typing import Any

import click

_UNITS = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40, "P": 50}
_RE = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*([KMGTP]?)(I?B)?\s*\Z", re.IGNORECASE)
MAX_SIZE = (1 << 63) - 1
UNLIMITED_WORDS = ("unlimited", "none", "inf")


class SizeError(ValueError):
    pass


def parse_size(text: str) -> int:
    """Bytes for `text`; SizeError with a readable reason otherwise."""
    m = _RE.match(text or "")
    if not m:
        raise SizeError(f"{text!r} is not a size (examples: 512MiB, 8GiB, 8G, 1.5GiB, 4096)")
    num, unit, suffix = m.group(1), m.group(2).upper(), m.group(3)
    if suffix and suffix.upper() == "IB" and not unit:
        raise SizeError(f"{text!r} is not a size: 'iB' needs a unit (KiB, MiB, GiB, TiB)")
    if "." in num and not unit:
        raise SizeError(f"{text!r} is not a size: a fraction of a byte")
    value = int(float(num) * (1 << _UNITS[unit])) if "." in num else int(num) << _UNITS[unit]
    if value > MAX_SIZE:
        raise SizeError(f"{text!r} is too large (at most {MAX_SIZE} bytes)")
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
        if isinstance(value, int):
            return value
        if self.allow_unlimited and str(value).strip().lower() in UNLIMITED_WORDS:
            return -1
        try:
            return parse_size(str(value))
        except SizeError as exc:
            self.fail(str(exc), param, ctx)


SIZE = SizeParam()
SIZE_OR_UNLIMITED = SizeParam(allow_unlimited=True)
