"""Sizes on the command line: the grammar of tgs.intercept.sizes (docs/usage.md "Sizes") as
click parameter types, and sizes as the tools print them."""

from __future__ import annotations

from typing import Any

import click
from tgs.intercept.sizes import (
    MAX_LEN,
    MAX_SIZE,
    SizeError,
    format_size,
    is_bare_number,
    is_unit_word,
    parse_limit,
    parse_size,
    show,
)

__all__ = ["LIMIT", "MAX_LEN", "MAX_SIZE", "SIZE", "UNLIMITED", "SizeError", "SizeParam",
           "format_size", "is_bare_number", "is_unit_word", "limit_value", "parse_size",
           "show"]

UNLIMITED = -1      # what LIMIT gives for "unlimited" and 0 (None stays "not given")


class SizeParam(click.ParamType):
    """A size; with limit=True also 'unlimited', and 0 means unlimited (UNLIMITED)."""

    name = "size"

    def __init__(self, limit: bool = False) -> None:
        self.limit = limit

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        try:
            if not self.limit:
                return parse_size(str(value))
            v = parse_limit(str(value))
            return UNLIMITED if v is None else v
        except SizeError as exc:
            self.fail(str(exc), param, ctx)


def limit_value(value: int | None) -> int | None:
    """A LIMIT option's bytes, None for unlimited or not given."""
    return None if value is None or value < 0 else value


SIZE = SizeParam()              # an amount: --mem-total (0 = off)
LIMIT = SizeParam(limit=True)   # a limit: --mem, --host-pinned (0 or 'unlimited': none)
