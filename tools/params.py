"""Strict command-line input for every tool: ASCII numbers, job names, device references,
and commands whose usage errors are one line on stderr with exit status 2.

click's INT/FLOAT types go through `int()`/`float()`, which accept every Unicode digit
("١٢" is 12) and arbitrarily long digit strings (a 5000-digit int raises ValueError on
Python >= 3.11); these types accept ASCII digits only, with a bounded length.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import click
from tgs.controller.protocol import DEVICE_INDEX_LIMIT, MAX_WEIGHT, NAME_RE, UUID_RE
from tgs.controller.protocol import MAX_DEVICES as MAX_JOB_DEVICES

from .sizes import SizeParam, is_bare_number, is_unit_word, show

EXIT_USAGE = 2
_INT_RE = re.compile(r"[0-9]{1,12}\Z", re.ASCII)
_FLOAT_RE = re.compile(r"(?:[0-9]{1,9}(?:\.[0-9]{0,9})?|\.[0-9]{1,9})\Z", re.ASCII)
MAX_DEVICES = DEVICE_INDEX_LIMIT   # a device index is below this (segment.h)


class AsciiInt(click.ParamType):
    """An integer in [lo, hi] written with ASCII digits only."""

    name = "integer"

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        elif isinstance(value, str) and _INT_RE.match(value):
            n = int(value)
        else:
            self.fail(f"{show(str(value))} is not an integer (ASCII digits 0-9)", param, ctx)
        if not self.lo <= n <= self.hi:
            self.fail(f"{n} is not in [{self.lo}, {self.hi}]", param, ctx)
        return n


class AsciiFloat(click.ParamType):
    """A decimal number in [lo, hi] written with ASCII digits and at most one point."""

    name = "number"

    def __init__(self, lo: float, hi: float) -> None:
        self.lo, self.hi = lo, hi

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            x = float(value)
        elif isinstance(value, str) and _FLOAT_RE.match(value):
            x = float(value)
        else:
            self.fail(f"{show(str(value))} is not a number (ASCII digits, one '.')", param, ctx)
        if not self.lo <= x <= self.hi:
            self.fail(f"{x:g} is not in [{self.lo:g}, {self.hi:g}]", param, ctx)
        return x


class JobName(click.ParamType):
    """A job name: 1-63 of [A-Za-z0-9._-], starting with a letter or digit."""

    name = "name"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        if not isinstance(value, str) or not NAME_RE.match(value):
            self.fail(f"{show(str(value), 70)} is not a job name (1-63 of A-Z a-z 0-9 . _ -, "
                      "starting with a letter or a digit)", param, ctx)
        return value


class DeviceRef(click.ParamType):
    """A device: an index (ASCII digits, 0-63) or a UUID (GPU-...)."""

    name = "IDX|UUID"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int | str:
        text = str(value)
        if _INT_RE.match(text):
            n = int(text)
            if n < MAX_DEVICES:
                return n
            self.fail(f"device index {n} is out of range (0-{MAX_DEVICES - 1})", param, ctx)
        if UUID_RE.match(text) and not text.isdigit():
            return text
        self.fail(f"{show(text, 60)} is neither a device index nor a device UUID", param, ctx)


DeviceArg = int | str | tuple[int | str, ...]


class DeviceList(click.ParamType):
    """One device (IDX|UUID), or several separated by commas (a job over several GPUs):
    a list of references, distinct as written (the controller also refuses one device
    named twice, by index and by UUID)."""

    name = "IDX|UUID[,...]"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> DeviceArg:
        if isinstance(value, (int, tuple)):
            return value
        text = str(value)
        items = text.split(",")
        if len(items) == 1:
            return DEVICE.convert(text, param, ctx)
        if len(items) > MAX_JOB_DEVICES:
            self.fail(f"at most {MAX_JOB_DEVICES} devices, got {len(items)}", param, ctx)
        out: list[int | str] = []
        for item in items:
            if not item:
                self.fail(f"{show(text, 60)}: an empty device in the list", param, ctx)
            ref = DEVICE.convert(item, param, ctx)
            if ref in out:
                self.fail(f"device {show(item, 60)} is listed twice", param, ctx)
            out.append(ref)
        return tuple(out)


WEIGHT = AsciiInt(1, MAX_WEIGHT)
JOB_NAME = JobName()
DEVICE = DeviceRef()
DEVICES = DeviceList()


EXIT_WRAPPER = 125     # a command wrapper's own failure, as env, timeout and podman run use it
WRAPPERS = frozenset({"tgs-run"})   # tools whose exit status is otherwise their command's


def own_status(prog: str, code: int) -> int:
    """The exit status of a tool's own failure: EXIT_WRAPPER for a wrapper (docs/usage.md),
    else ``code`` (2 usage or refused, 1 internal)."""
    return EXIT_WRAPPER if prog in WRAPPERS else code


def _one_line(prog: str, exc: click.ClickException) -> None:
    msg = " ".join(exc.format_message().split())
    click.echo(f"{prog}: error: {msg}", err=True)


class _OneLineMain:
    """click's main() with usage errors as one line: `PROG: error: MESSAGE`, exit 2
    (other ClickExceptions keep their own exit status, 1; a wrapper's: own_status)."""

    def main(self, args: Any = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        base = super()
        if not standalone_mode:
            return base.main(args, prog_name, complete_var, False, **extra)  # type: ignore[misc]
        prog = prog_name or getattr(self, "name", None) or "tgs"
        try:
            rv = base.main(args, prog_name, complete_var, False, **extra)  # type: ignore[misc]
        except click.ClickException as exc:
            _one_line(prog, exc)
            sys.exit(own_status(prog, exc.exit_code))
        except click.Abort:
            click.echo(f"{prog}: aborted", err=True)
            sys.exit(own_status(prog, 1))
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)


def split_size(cmd: click.Command, ctx: click.Context, args: list[str]) -> str | None:
    """`--mem 4 GiB`: click takes `4` and leaves `GiB` as an argument (for tgs-run the
    command to run, under a 4-byte quota).  The message for a size option whose value is a
    bare number followed by a unit word, before the command or a `--`; else None."""
    takes_value: set[str] = set()
    sizes: set[str] = set()
    for p in cmd.params:
        if isinstance(p, click.Option) and not p.is_flag and not p.count:
            takes_value.update(p.opts)
            if isinstance(p.type, SizeParam):
                sizes.update(p.opts)
    i = 0
    while i < len(args) and args[i] != "--":
        a, step = args[i], 1
        opt, eq, value = a.partition("=")
        if a in takes_value:
            opt, value, step = a, (args[i + 1] if i + 1 < len(args) else ""), 2
        after = args[i + step] if i + step < len(args) else ""
        if opt in sizes and (eq or step == 2) and is_bare_number(value) and is_unit_word(after):
            return (f"{opt} {value} {after}: write a size as one word "
                    f"({opt} {value.strip()}{after.strip()})")
        if not a.startswith("-") and not ctx.allow_interspersed_args:
            return None                  # the command starts here
        i += step
    return None


class Command(_OneLineMain, click.Command):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        msg = split_size(self, ctx, args)
        if msg:
            raise click.UsageError(msg, ctx)
        return super().parse_args(ctx, args)


class Group(_OneLineMain, click.Group):
    command_class = Command
