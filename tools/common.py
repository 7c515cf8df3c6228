"""What every tool shares: the controller address, the client, errors that exit 2."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import NoReturn

import click
from tgs.controller import paths
from tgs.controller.client import Client, ClientError, ControllerUnavailable

from .params import AsciiFloat

ADDR_ENV = "TGS_CONTROLLER"
START_HINT = "start one with `tgs-controller --foreground` (see docs/usage.md)"
EXIT_USAGE = 2
_NAME_BAD = re.compile(r"[^A-Za-z0-9._-]+")


def endpoint_for(addr: str | None) -> str | None:
    """--controller ADDR -> a ZeroMQ endpoint (None: the controller's default).

    ADDR is a ZeroMQ endpoint (ipc://..., tcp://...), a socket path, a runtime
    directory holding control.sock, a port (loopback) or HOST:PORT."""
    if not addr:
        return None
    if "://" in addr:
        return addr
    if addr.startswith(("/", ".")) or os.sep in addr:
        p = Path(addr)
        if p.is_dir():
            p = p / paths.CONTROL_SOCK
        return f"ipc://{p.resolve()}"
    return paths.listen_endpoint(addr)


def make_client(addr: str | None, timeout: float) -> Client:
    return Client(endpoint=endpoint_for(addr), timeout=timeout)


def fail(prog: str, message: str, code: int = EXIT_USAGE) -> NoReturn:
    click.echo(f"{prog}: error: {message}", err=True)
    sys.exit(code)


def unavailable(prog: str, exc: ControllerUnavailable, extra: str = "") -> NoReturn:
    fail(prog, f"{exc}\n{prog}: no controller reachable: {START_HINT}{extra}")


def client_error(prog: str, exc: ClientError) -> NoReturn:
    fail(prog, f"the controller refused: {exc.message} ({exc.code})",
         1 if exc.code == "internal" else EXIT_USAGE)


def job_name_from(cmd: str, suffix: str) -> str:
    """A valid job name from a command's basename plus a suffix ('python3-1a2b')."""
    base = _NAME_BAD.sub("-", os.path.basename(cmd)).strip("._-") or "job"
    return f"{base[:63 - len(suffix) - 1]}-{suffix}"


def controller_options(f):  # type: ignore[no-untyped-def]
    """--controller and --timeout, shared by tgs-run, tgsctl and tgs-inject."""
    f = click.option("--timeout", type=AsciiFloat(0.1, 600), default=3.0,
                     show_default=True, help="Seconds to wait for the controller.")(f)
    f = click.option("--controller", "controller", envvar=ADDR_ENV, default=None,
                     metavar="ADDR",
                     help="Controller endpoint: ipc://PATH, tcp://HOST:PORT, a socket path, a "
                          "runtime dir, PORT or HOST:PORT (default: the local controller, "
                          f"${ADDR_ENV}).")(f)
    return f
