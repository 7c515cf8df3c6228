"""What every tool shares: the controller address, the client, errors that exit 2."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import NoReturn

import click
from tgs.client import Client, ClientError, ControllerUnavailable, HandshakeFailed, paths
from tgs.client.keys import KeyFileError, client_keys

from .params import DEVICES, EXIT_USAGE, AsciiFloat, own_status
from .sizes import LIMIT

ADDR_ENV = "TGS_CONTROLLER"
SERVER_KEY_ENV = "TGS_SERVER_KEY"
CLIENT_KEY_ENV = "TGS_CLIENT_KEY"
START_HINT = "start one with `tgs-controller` (see docs/usage.md)"
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


def make_client(addr: str | None, timeout: float, server_key: str | None = None,
                client_key: str | None = None, prog: str = "tgs") -> Client:
    """A client for --controller ADDR; an endpoint other than an ipc socket is a CurveZMQ
    one and needs the server's public key and our own key pair (exit 2 without them)."""
    endpoint = endpoint_for(addr)
    curve = None
    if endpoint is not None and not endpoint.startswith("ipc://"):
        if not server_key or not client_key:
            fail(prog, f"{endpoint[:200]} needs CurveZMQ keys: --server-key (${SERVER_KEY_ENV}) "
                       f"and --client-key (${CLIENT_KEY_ENV}), see docs/usage.md")
        try:
            curve = client_keys(server_key, client_key)
        except KeyFileError as exc:
            fail(prog, str(exc))
    return Client(endpoint=endpoint, timeout=timeout, curve=curve)


def fail(prog: str, message: str, code: int = EXIT_USAGE) -> NoReturn:
    click.echo(f"{prog}: error: {message}", err=True)
    sys.exit(own_status(prog, code))


def unavailable(prog: str, exc: ControllerUnavailable, extra: str = "") -> NoReturn:
    if isinstance(exc, HandshakeFailed):     # a controller is there: it did not let us in
        fail(prog, f"{exc} (docs/usage.md, Remote control)")
    fail(prog, f"{exc}\n{prog}: no controller reachable: {START_HINT}{extra}")


def client_error(prog: str, exc: ClientError) -> NoReturn:
    fail(prog, f"the controller refused: {exc.message} ({exc.code})",
         1 if exc.code == "internal" else EXIT_USAGE)


def job_name_from(cmd: str, suffix: str) -> str:
    """A valid job name from a command's basename plus a suffix ('python3-1a2b')."""
    base = _NAME_BAD.sub("-", os.path.basename(cmd)).strip("._-") or "job"
    return f"{base[:63 - len(suffix) - 1]}-{suffix}"


def controller_options(f):  # type: ignore[no-untyped-def]
    """--controller, --timeout and the CurveZMQ keys, shared by tgs-run, tgsctl and
    tgs-inject."""
    f = click.option("--client-key", envvar=CLIENT_KEY_ENV, default=None, metavar="FILE",
                     help="Our CurveZMQ key pair (a secret key file, mode 0600: `tgsctl "
                          f"keygen`) for a tcp controller (${CLIENT_KEY_ENV}).")(f)
    f = click.option("--server-key", envvar=SERVER_KEY_ENV, default=None, metavar="KEY|FILE",
                     help="The controller's CurveZMQ public key for a tcp controller "
                          f"(${SERVER_KEY_ENV}): its server.key file (an existing file, or a "
                          "value starting with / ./ ../ ~, or file:PATH), else the "
                          "40-character key (key:KEY to be explicit).")(f)
    f = click.option("--timeout", type=AsciiFloat(0.1, 600), default=3.0,
                     show_default=True, help="Seconds to wait for the controller.")(f)
    f = click.option("--controller", "controller", envvar=ADDR_ENV, default=None,
                     metavar="ADDR",
                     help="Controller endpoint: ipc://PATH, tcp://HOST:PORT, a socket path, a "
                          "runtime dir, PORT or HOST:PORT (default: the local controller, "
                          f"${ADDR_ENV}).")(f)
    return f


def placement_options(f):  # type: ignore[no-untyped-def]
    """--host-pinned and --device, shared by tgs-run and tgsctl add."""
    f = click.option("--device", type=DEVICES, default="0", show_default=True,
                     metavar="IDX|UUID[,...]",
                     help="The job's GPU, or several separated by commas (one job over them: "
                          "--mem is per device).")(f)
    f = click.option("--host-pinned", type=LIMIT, default=None,
                     help="Page-locked host memory the job may hold (cuMemAllocHost, "
                          "cuMemHostAlloc, cuMemHostRegister; default, 0 or 'unlimited': no "
                          "limit; docs/oversubscription.md).")(f)
    return f
