"""Byte sizes: the grammar of contracts/include/tgs/size.h, in Python (the tools, the
simulator's reader).  Both run the vectors of tests/abi/size_vectors.json; the grammar is
documented once, in docs/usage.md "Sizes".

    size   := ws* number ws* unit? ws*        at most MAX_LEN characters
    number := digit{1,20} ("." digit{1,20})?  ASCII digits
    unit   := B | K | KB | KiB | M | MB | MiB | G | GB | GiB | T | TB | TiB  (any case)
    ws     := space | tab

All units are binary (KB = KiB = 1024 bytes).  A fraction needs a unit above B and rounds
down to a byte; one that comes to less than a byte is refused (as a limit it would read as 0).
At most MAX_SIZE bytes.  A limit (parse_limit) also takes the word "unlimited", and 0 there
means unlimited too.

Only ASCII is accepted: not the other Unicode digits that `str.isdigit` and `int()` take, not
the Kelvin sign U+212A that a case-insensitive Unicode regex matches as "k"; the length is
bounded, so no input makes the parser slow or raise anything but SizeError.
"""

from __future__ import annotations

import re

MAX_LEN = 40
MAX_SIZE = (1 << 63) - 1
EXAMPLES = "512MiB, 1.5GiB, 8G or 4096"
UNLIMITED = "unlimited"
_SHIFT = {"": 0, "b": 0, "k": 10, "kb": 10, "kib": 10, "m": 20, "mb": 20, "mib": 20,
          "g": 30, "gb": 30, "gib": 30, "t": 40, "tb": 40, "tib": 40}
UNIT_WORDS = frozenset(u for u in _SHIFT if u)
# no IGNORECASE, no \d, no \s: every character class is spelled out in ASCII
_RE = re.compile(r"[ \t]*([0-9]{1,20})(?:\.([0-9]{1,20}))?[ \t]*([A-Za-z]{0,3})[ \t]*\Z",
                 re.ASCII)
_BARE = re.compile(r"[ \t]*[0-9]{1,20}(?:\.[0-9]{1,20})?[ \t]*\Z", re.ASCII)


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
    unit = m.group(3).lower() if m else ""
    if not m or unit not in _SHIFT:
        raise SizeError(f"{show(text)} is not a size (examples: {EXAMPLES}; units B, K, M, "
                        "G, T with or without B/iB, binary)")
    whole, frac, shift = m.group(1), m.group(2), _SHIFT[unit]
    if frac is not None and shift == 0:
        raise SizeError(f"{show(text)} is not a size: a fraction needs a unit (1.5GiB)")
    value = int(whole) << shift
    if frac is not None:
        value += (int(frac) << shift) // 10 ** len(frac)     # exact, rounded down
        if value == 0 and int(frac):
            raise SizeError(f"{show(text)} is less than a byte")
    if value > MAX_SIZE:
        raise SizeError(f"{show(text)} is too large (at most {MAX_SIZE} bytes)")
    return value


def is_unlimited(text: str) -> bool:
    return isinstance(text, str) and len(text) <= MAX_LEN \
        and text.strip(" \t").lower() == UNLIMITED


def parse_limit(text: str) -> int | None:
    """A limit: bytes, or None for "unlimited" and for 0."""
    if is_unlimited(text):
        return None
    try:
        return parse_size(text) or None
    except SizeError as exc:
        raise SizeError(f"{exc} (or '{UNLIMITED}')") from None


def is_unit_word(text: str) -> bool:
    """`GiB`, `k`, ...: what a size split over two words leaves as the second."""
    return len(text) <= 8 and text.strip(" \t").lower() in UNIT_WORDS


def is_bare_number(text: str) -> bool:
    """`4`, `1.5`: a size written without its unit."""
    return len(text) <= MAX_LEN and _BARE.match(text) is not None


def format_size(value: int | None) -> str:
    """1610612736 -> '1.5GiB'; None -> 'unlimited' (messages and tables, not a round trip)."""
    if value is None:
        return "unlimited"
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if value >= 1 << shift:
            q = value / (1 << shift)
            return f"{q:.0f}{unit}" if q == int(q) else f"{q:.1f}{unit}"
    return f"{value}B"
