"""`tgsctl`: inspect and steer the jobs of the local TGS controller.

Shell completion (click): eval "$(_TGSCTL_COMPLETE=bash_source tgsctl)"
(zsh_source / fish_source for the other shells).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from tgs.client import Client, ClientError, ControllerUnavailable
from tgs.client.keys import write_keypair

from tgs.version import version_option

from .common import (
    client_error,
    controller_options,
    fail,
    make_client,
    placement_options,
    unavailable,
)
from .jobview import Meter
from .params import JOB_NAME, WEIGHT, AsciiFloat, DeviceArg, Group
from .sizes import LIMIT, SIZE, limit_value
from .view import CLEAR, job_processes, jobs_text, status_text, top_frame

PROG = "tgsctl"
MEM_TOTAL_PRODUCTION = ("--mem-total (oversubscription) is for opportunistic jobs only: "
                        "production memory stays on the GPU")
T = TypeVar("T")


def _call(ctx: click.Context, fn: Callable[[Client], T]) -> T:
    """One controller call with the tool's error handling (exit 2, a clear message)."""
    client: Client = ctx.obj
    try:
        return fn(client)
    except ControllerUnavailable as exc:
        unavailable(PROG, exc)
    except ClientError as exc:
        client_error(PROG, exc)


def _jobs(ctx: click.Context, procs: bool) -> list[dict[str, Any]]:
    jobs = _call(ctx, lambda c: c.list())
    if procs:
        for j in jobs:
            parts = j.get("devices") or [{"segment": j.get("segment")}]   # one per GPU
            j["process_list"] = [p for d in parts for p in job_processes(d.get("segment"))]
    return jobs


def _dump(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=True))


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@version_option(PROG)
@controller_options
@click.pass_context
def cli(ctx: click.Context, controller: str | None, timeout: float, server_key: str | None,
        client_key: str | None) -> None:
    """Inspect and steer TGS jobs.

    Completion: eval "$(_TGSCTL_COMPLETE=bash_source tgsctl)"."""
    if ctx.invoked_subcommand == "keygen":
        return
    ctx.obj = make_client(controller, timeout, server_key, client_key, PROG)
    ctx.call_on_close(ctx.obj.close)


@cli.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def ls_cmd(ctx: click.Context, as_json: bool) -> None:
    """Jobs: processes, priority, weight, memory used/quota (and --mem-total, --host-pinned
    when set), what holds each job back (CONTROL: the policy's rule and the gate; RATE: the
    token rate granted, 'gated' when only the gate holds it; CAP: work units in flight per
    process), throughput (WORK/S), and a !DAMAGED or !TAMPERED mark on a job whose segment is.

    RATE, CAP and WORK/S count work units: 1 unit = 1 GPU thread launched (grid blocks x
    threads per block)."""
    jobs = _jobs(ctx, procs=True)
    if as_json:
        _dump({"jobs": jobs})
    else:
        click.echo(jobs_text(jobs))


@cli.command("set")
@click.argument("job", type=JOB_NAME)
@click.option("--mem", type=LIMIT, default=None,
              help="New memory quota (a size; 0 or 'unlimited': none).")
@click.option("--priority", type=click.Choice(["production", "opportunistic"]), default=None)
@click.option("--weight", type=WEIGHT, default=None)
@click.option("--mem-total", type=SIZE, default=None,
              help="Oversubscription: what an opportunistic job may hold in all, resident or "
                   "on the host (0 = off; docs/oversubscription.md).")
@click.option("--host-pinned", type=LIMIT, default=None,
              help="Page-locked host memory the job may hold (cuMemAllocHost, cuMemHostAlloc, "
                   "cuMemHostRegister; 0 or 'unlimited': no limit; docs/oversubscription.md).")
@click.option("--mem-fixed/--mem-evictable", default=None,
              help="An opportunistic job's allocations in device memory, or evictable (the "
                   "default); for the job's processes started afterwards.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def set_cmd(ctx: click.Context, job: str, mem: int | None, priority: str | None,
            weight: int | None, mem_total: int | None, host_pinned: int | None,
            mem_fixed: bool | None, as_json: bool) -> None:
    """Change a job live: its processes see the new quota and rate within one period.

    A quota below the current usage refuses new allocations; existing ones stay."""
    changes: dict[str, Any] = {}
    if mem is not None:
        changes["mem_quota"] = limit_value(mem)
    if priority is not None:
        changes["priority"] = priority
    if weight is not None:
        changes["weight"] = weight
    if mem_total is not None:
        if priority == "production" and mem_total:
            fail(PROG, MEM_TOTAL_PRODUCTION)
        changes["mem_total"] = mem_total
    if host_pinned is not None:
        changes["host_pinned_max"] = limit_value(host_pinned) or 0
    if mem_fixed is not None:
        changes["mem_fixed"] = mem_fixed
    if not changes:
        raise click.UsageError("nothing to change: give --mem, --priority, --weight, "
                               "--mem-total, --host-pinned or --mem-fixed/--mem-evictable")
    info = _call(ctx, lambda c: c.set(job, **changes))["job"]
    if as_json:
        _dump({"job": info})
    else:
        click.echo(jobs_text([info], procs=False, notes=False))


@cli.command("add")
@click.argument("job", type=JOB_NAME)
@click.option("--priority", type=click.Choice(["production", "opportunistic"]),
              default="opportunistic", show_default=True)
@click.option("--weight", type=WEIGHT, default=1, show_default=True)
@click.option("--mem", type=LIMIT, default=None,
              help="Memory quota (default, 0 or 'unlimited': none).")
@click.option("--mem-total", type=SIZE, default=None,
              help="Oversubscription: what the (opportunistic) job may hold in all; --mem is "
                   "then what it may keep resident (docs/oversubscription.md).")
@click.option("--mem-fixed", is_flag=True,
              help="Opportunistic jobs: allocations in device memory (by default evictable: "
                   "they move to host memory when production needs the GPU's).")
@placement_options
@click.option("--ephemeral", is_flag=True, help="Remove the job when its last process ends.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def add_cmd(ctx: click.Context, job: str, priority: str, weight: int, mem: int | None,
            mem_total: int | None, mem_fixed: bool, host_pinned: int | None,
            device: DeviceArg, ephemeral: bool, as_json: bool) -> None:
    """Register a job (for containers: then `tgs-inject cdi/k8s --job JOB`)."""
    if mem_total and priority == "production":
        fail(PROG, MEM_TOTAL_PRODUCTION)
    reply = _call(ctx, lambda c: c.register(job, priority=priority, weight=weight,
                                            mem_quota=limit_value(mem), device=device,
                                            ephemeral=ephemeral, mem_total=mem_total or 0,
                                            host_pinned_max=limit_value(host_pinned) or 0,
                                            mem_fixed=mem_fixed))
    if as_json:
        _dump({k: reply[k] for k in ("job", "segment", "shim", "env") if k in reply})
    else:
        click.echo(f"registered {job}: segment {reply.get('segment')}")


@cli.command("rm")
@click.argument("job", type=JOB_NAME)
@click.pass_context
def rm_cmd(ctx: click.Context, job: str) -> None:
    """Unregister a job (its processes run on without limits)."""
    _call(ctx, lambda c: c.unregister(job))
    click.echo(f"removed {job}")


@cli.command("status")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def status_cmd(ctx: click.Context, as_json: bool) -> None:
    """Controller health, devices, policy."""
    st = _call(ctx, lambda c: c.status())
    st.pop("v", None)
    st.pop("id", None)
    st.pop("ok", None)
    if as_json:
        _dump(st)
    else:
        click.echo(status_text(st, _jobs(ctx, procs=False)))


@cli.command("top")
@click.option("--once", is_flag=True, help="Print one frame and exit.")
@click.option("--interval", type=AsciiFloat(0.1, 60), default=1.0, show_default=True,
              help="Seconds between frames.")
@click.option("--color/--no-color", default=None, help="Default: when stdout is a terminal.")
@click.pass_context
def top_cmd(ctx: click.Context, once: bool, interval: float, color: bool | None) -> None:
    """A live view of GPUs and jobs (Ctrl-C quits): the columns of `ls`; WORK/S and
    THROTTLED are measured over the interval between frames (work units per second: 1 unit
    = 1 GPU thread launched)."""
    tty = sys.stdout.isatty()
    color = tty if color is None else color
    meter = Meter()
    try:
        while True:
            st = _call(ctx, lambda c: c.status())
            jobs = _jobs(ctx, procs=False)
            measured = meter.update(jobs, time.monotonic())
            frame = top_frame(st, jobs, time.strftime("%H:%M:%S"), color, measured)
            click.echo(frame if once or not tty else CLEAR + frame)
            if once:
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        click.echo("")


@cli.command("keygen")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", type=JOB_NAME, default="client", show_default=True,
              help="Key pair file names: NAME.key (public) and NAME.key_secret (0600).")
def keygen_cmd(directory: Path, name: str) -> None:
    """Create a CurveZMQ key pair for talking to a controller's --listen endpoint: copy
    NAME.key into the controller's <state dir>/curve/authorized/, then use
    --client-key DIRECTORY/NAME.key_secret and --server-key <its server.key or key>."""
    try:
        pub, sec = write_keypair(directory, name)
    except FileExistsError as exc:
        raise click.UsageError(f"{exc.filename} exists: not overwritten") from None
    except OSError as exc:
        raise click.UsageError(f"cannot write the key pair into {directory}: {exc.strerror}") \
            from None
    click.echo(f"public key {pub} (authorize it on the controller), secret key {sec}")


def main() -> None:
    cli(prog_name=PROG)
