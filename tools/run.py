"""`tgs-run`: run one command as a TGS job (register, inject the shim, forward signals)."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Mapping

import click
from tgs.client import Client, ClientError, ControllerUnavailable
from tgs.controller.lease import LeaseError
from tgs.controller.lease import take as take_lease
from tgs.intercept import injection_env
from tgs.intercept.cpu_priority import NICE_MAX, NICE_MIN, job_niceness, spawn_at
from tgs.intercept.locate import prepend_path

from tgs.version import version_option

from .common import (
    client_error,
    controller_options,
    fail,
    job_name_from,
    make_client,
    placement_options,
    unavailable,
)
from .params import EXIT_WRAPPER, JOB_NAME, WEIGHT, Command, DeviceArg
from .sizes import LIMIT, SIZE, limit_value
from .supervise import SpawnError, Supervisor, spawn

PROG = "tgs-run"


def job_env(base: Mapping[str, str], reply_env: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: ours plus the register reply's, through the exported
    injection_env (the reply's LD_PRELOAD prepended, or our shim when it names none; a
    simulating controller's LD_LIBRARY_PATH prepended too, its TGS_SIM_STATE taken as is: the
    job runs on the GPUs the controller serves)."""
    rest = {k: v for k, v in reply_env.items() if k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    env = injection_env(rest.get("TGS_SEGMENT"), reply_env.get("LD_PRELOAD"), base)
    env.update(rest)
    if reply_env.get("LD_LIBRARY_PATH"):
        env["LD_LIBRARY_PATH"] = prepend_path(env.get("LD_LIBRARY_PATH", ""),
                                              reply_env["LD_LIBRARY_PATH"])
    return env


def standalone_env(base: Mapping[str, str], mem: int | None) -> dict[str, str]:
    return injection_env(None, base=base, mem_limit=None if mem is None else str(mem))


@click.command(PROG, cls=Command, context_settings={"help_option_names": ["-h", "--help"],
                                            "allow_interspersed_args": False})
@version_option(PROG)
@click.option("--name", type=JOB_NAME,
              help="Job name (default: the command's basename + a random suffix).")
@click.option("--priority", type=click.Choice(["production", "opportunistic"]),
              default="opportunistic", show_default=True)
@click.option("--weight", type=WEIGHT, default=1, show_default=True,
              help="Share among opportunistic jobs.")
@click.option("--mem", type=LIMIT, default=None,
              help="GPU memory quota: 512MiB, 8GiB, 8G, 1.5GiB or bytes (default, 0 or "
                   "'unlimited': no quota).")
@click.option("--mem-total", type=SIZE, default=None,
              help="Oversubscription (opportunistic jobs): what the job may hold in all, on "
                   "the GPU or in host memory; --mem is then what it may keep resident.")
@click.option("--mem-fixed", is_flag=True,
              help="Opportunistic jobs: keep the job's allocations in device memory (by "
                   "default they are evictable: production takes their place, they move to "
                   "host memory; docs/oversubscription.md).")
@click.option("--cpu-nice", type=click.IntRange(NICE_MIN, NICE_MAX), default=None,
              metavar="N",
              help="The command's CPU nice value (default: 19 for opportunistic jobs, so they "
                   "use the CPU production leaves idle too; production's unchanged). It only "
                   "ever lowers the CPU priority tgs-run itself has.")
@placement_options
@click.option("--standalone", is_flag=True,
              help="No controller: only a static memory quota (TGS_MEM_LIMIT), no rate control.")
@controller_options
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def cli(name: str | None, priority: str, weight: int, mem: int | None, mem_total: int | None,
        mem_fixed: bool, cpu_nice: int | None, host_pinned: int | None, device: DeviceArg,
        standalone: bool, controller: str | None,
        timeout: float, server_key: str | None, client_key: str | None,
        cmd: tuple[str, ...]) -> None:
    """Run CMD as a TGS job: tgs-run [OPTIONS] -- CMD [ARGS...]

    The job is registered with the controller and lives exactly as long as CMD's process
    tree (its lease, inherited by every process CMD starts; see docs/usage.md), CMD runs
    with the shim preloaded, signals reach CMD, and CMD's exit status is returned (128+N
    when signal N killed it); tgs-run's own failures exit 125, a CMD that cannot run 126/127."""
    mem, host_pinned = limit_value(mem), limit_value(host_pinned)
    if mem_total and priority == "production":
        fail(PROG, "--mem-total (oversubscription) is for opportunistic jobs only: "
             "production memory stays on the GPU")
    if mem_total and standalone:
        fail(PROG, "--mem-total needs the controller (not --standalone)")
    if host_pinned and standalone:
        fail(PROG, "--host-pinned needs the controller (not --standalone)")
    with Supervisor() as sup:
        keys = (server_key, client_key)
        mems = (mem, mem_total or 0, host_pinned or 0)
        # standalone: no sharing role, so no CPU priority unless asked for
        nice = cpu_nice if standalone else job_niceness(priority, cpu_nice)
        sys.exit(_run(sup, name, priority, weight, mems, device, standalone,
                      controller, timeout, keys, list(cmd), mem_fixed, nice or 0))


def _run(sup: Supervisor, name: str | None, priority: str, weight: int,
         mems: tuple[int | None, int, int], device: DeviceArg, standalone: bool,
         controller: str | None, timeout: float, keys: tuple[str | None, str | None],
         cmd: list[str], mem_fixed: bool = False, nice: int = 0) -> int:
    mem, mem_total, host_pinned = mems
    if standalone:
        try:
            env = standalone_env(os.environ, mem)
        except FileNotFoundError as exc:
            fail(PROG, str(exc))
        return _spawn(sup, cmd, env, nice)
    name = name if name is not None else job_name_from(cmd[0], secrets.token_hex(2))
    client = make_client(controller, timeout, *keys, PROG)
    try:
        reply = client.register(name, priority=priority, weight=weight, mem_quota=mem,
                                device=device, ephemeral=True, lease_uid=os.geteuid(),
                                mem_total=mem_total, host_pinned_max=host_pinned,
                                mem_fixed=mem_fixed)
    except ControllerUnavailable as exc:
        client.close()
        unavailable(PROG, exc, " (or use --standalone for a static quota)")
    except ClientError as exc:
        client.close()
        client_error(PROG, exc)
    lease_fd = _take_lease(reply.get("lease"))
    try:
        early = sup.pending()
        if early is not None:                    # Ctrl-C while registering: do not start
            return 128 + early
        try:
            env = job_env(os.environ, reply.get("env") or {})
        except FileNotFoundError as exc:
            fail(PROG, str(exc))
        return _spawn(sup, cmd, env, nice)
    finally:
        if lease_fd is not None:
            os.close(lease_fd)                   # processes of the tree may still hold it
        _release(client, name, when_idle=lease_fd is not None)


def _take_lease(path: str | None) -> int | None:
    """Hold the job's lease with a descriptor the command's processes inherit: the job
    lives while any of them holds it (controller/lease.py)."""
    if not path:
        return None
    try:
        return take_lease(path)
    except (OSError, LeaseError) as exc:
        click.echo(f"{PROG}: warning: cannot hold the job's lease ({exc}): the job ends "
                   "with its last CUDA process", err=True)
        return None


def _release(client: Client, name: str, when_idle: bool) -> None:
    """Unregister at the end; with a lease only if nothing of the tree is left (otherwise
    the controller removes the job when the last holder or process is gone)."""
    try:
        client.unregister(name, when_idle=when_idle)
    except ClientError as exc:
        if exc.code != "not_found":          # an ephemeral job may already be gone
            click.echo(f"{PROG}: warning: unregister {name}: {exc.message}", err=True)
    except ControllerUnavailable as exc:
        click.echo(f"{PROG}: warning: unregister {name}: {exc}", err=True)
    finally:
        client.close()


def _spawn(sup: Supervisor, cmd: list[str], env: dict[str, str], nice: int) -> int:
    """The command at CPU nice value `nice`, started from a short-lived thread at that value
    (it inherits it): tgs-run's own thread, which forwards signals and unregisters the job at
    the end, keeps its priority and answers at once however busy the CPUs are."""
    try:
        pid = spawn_at(nice, lambda: spawn(cmd, env))
    except SpawnError as exc:
        click.echo(f"{PROG}: {exc}", err=True)
        return exc.code
    except OSError as exc:
        click.echo(f"{PROG}: warning: cannot set the CPU nice value {nice} ({exc}): the "
                   "command runs at tgs-run's", err=True)
        try:
            pid = spawn(cmd, env)
        except SpawnError as exc2:
            click.echo(f"{PROG}: {exc2}", err=True)
            return exc2.code
    return sup.wait(pid)


def main() -> None:
    cli(prog_name=PROG)


__all__ = ["EXIT_WRAPPER", "cli", "main"]
