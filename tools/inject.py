"""`tgs-inject`: hand TGS jobs to containers (docker/podman command lines, CDI, Kubernetes)."""

from __future__ import annotations

import os
import secrets
import shlex
import sys
from typing import Any

import click
from tgs.client import Client, ClientError, ControllerUnavailable
from tgs.controller.lease import LEASE_GRACE

from tgs.version import version_option

from . import cdi, k8s
from .common import client_error, controller_options, fail, make_client, unavailable
from .elfver import vstr
from .injection import InjectError, Plan, check_rootfs, make_plan
from .params import DEVICES, JOB_NAME, WEIGHT, DeviceArg, Group
from .sizes import LIMIT, limit_value
from .supervise import SpawnError, Supervisor

PROG = "tgs-inject"
ENGINES = ("docker", "podman", "nerdctl")
DETACH = ("-d", "--detach", "--detach=true")


def _call(client: Client, fn: str, *args: Any, **kw: Any) -> Any:
    try:
        return getattr(client, fn)(*args, **kw)
    except ControllerUnavailable as exc:
        unavailable(PROG, exc)
    except ClientError as exc:
        client_error(PROG, exc)


def _sim_mode(client: Client, sim: bool | None) -> bool:
    if sim is not None:
        return sim
    devs = _call(client, "status").get("devices", [])
    return bool(devs) and all(d.get("kind") == "sim" for d in devs)


def _job(client: Client, name: str) -> dict[str, Any]:
    for j in _call(client, "list"):
        if j["name"] == name:
            return j
    fail(PROG, f"no job named {name!r}: register it first (tgsctl add {name} ...)")


def _plan(job: dict[str, Any], sim: bool, preload_file: bool, shim: str | None = None) -> Plan:
    try:
        return make_plan(job, sim=sim, preload_file=preload_file, shim=shim)
    except InjectError as exc:
        fail(PROG, str(exc))


sim_option = click.option(
    "--sim/--no-sim", default=None,
    help="Also hand the container the simulated driver and its state (default: when the "
         "controller's GPUs are simulated).")
preload_option = click.option(
    "--preload-file", is_flag=True,
    help="Preload through a generated read-only /etc/ld.so.preload instead of LD_PRELOAD "
         "(covers processes that reset their environment).")


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@version_option(PROG)
@controller_options
@click.pass_context
def cli(ctx: click.Context, controller: str | None, timeout: float, server_key: str | None,
        client_key: str | None) -> None:
    """Inject TGS into containers.

    The shim needs glibc in the container at least as new as the one it was built against
    (`tgs-inject baseline` prints it); a --rootfs is checked, images are not."""
    ctx.obj = make_client(controller, timeout, server_key, client_key, PROG)
    ctx.call_on_close(ctx.obj.close)


@cli.command("baseline")
def baseline_cmd() -> None:
    """Print the glibc version the shim (and the simulated driver) need in a container."""
    from tgs.intercept.locate import find_shim

    from .elfver import glibc_needed
    click.echo(f"shim {find_shim()}: needs glibc >= {vstr(glibc_needed(find_shim()))}")


def split_engine(cmd: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """`podman [global opts] run ARGS` -> (up to and including 'run', the rest)."""
    if not cmd or os.path.basename(cmd[0]) not in ENGINES:
        raise click.UsageError(f"expected `-- {'|'.join(ENGINES)} run ...`, got {' '.join(cmd)!r}")
    if "run" not in cmd[1:]:
        raise click.UsageError("the container command has no `run`")
    i = cmd.index("run", 1)
    return list(cmd[: i + 1]), list(cmd[i + 1:])


# an opportunistic container's CPU weight: the lowest share (cgroup v2: weight 1 of the default
# 100), the container side of tgs-run's nice 19 (intercept/cpu_priority.py); the engines take
# the last of a repeated flag, so the user's own --cpu-shares after `run` wins
OPPORTUNISTIC_CPU_SHARES = 2


def engine_flags(plan: Plan, priority: str = "production") -> list[str]:
    out: list[str] = []
    if priority == "opportunistic":
        out += ["--cpu-shares", str(OPPORTUNISTIC_CPU_SHARES)]
    for m in plan.mounts:
        out += ["-v", f"{m.host}:{m.container}:{'ro' if m.readonly else 'rw'}"]
    for kv in plan.env_list():
        out += ["-e", kv]
    return out


def rootfs_of(args: list[str]) -> str | None:
    for i, a in enumerate(args):
        if a == "--rootfs" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--rootfs="):
            return a.split("=", 1)[1]
    return None


@cli.command("run", context_settings={"allow_interspersed_args": False})
@click.option("--name", type=JOB_NAME, help="Job name (default: container-<random>).")
@click.option("--priority", type=click.Choice(["production", "opportunistic"]),
              default="opportunistic", show_default=True)
@click.option("--weight", type=WEIGHT, default=1, show_default=True)
@click.option("--mem", type=LIMIT, default=None,
              help="Memory quota (default, 0 or 'unlimited': none).")
@click.option("--device", type=DEVICES, default="0", show_default=True,
              metavar="IDX|UUID[,...]", help="The job's GPU, or several (one job over them).")
@sim_option
@preload_option
@click.option("--print", "print_only", is_flag=True,
              help="Print the rewritten command instead of running it. Run it at once: "
                   f"the job is dropped {LEASE_GRACE:.0f} s after this unless a process of "
                   "the container has attached by then (then it ends with its last "
                   "process); for a job that waits use `tgsctl add` and `tgs-inject cdi`.")
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def run_cmd(ctx: click.Context, name: str | None, priority: str, weight: int,
            mem: int | None, device: DeviceArg, sim: bool | None, preload_file: bool,
            print_only: bool, cmd: tuple[str, ...]) -> None:
    """Register a job and run `docker|podman run ...` with it injected:
    tgs-inject run [OPTIONS] -- podman run [ARGS...] IMAGE [CMD...]"""
    head, rest = split_engine(cmd)
    client: Client = ctx.obj
    with Supervisor() as sup:
        name = name if name is not None else f"container-{secrets.token_hex(3)}"
        sim_mode = _sim_mode(client, sim)
        # --print: a lease nobody takes, so that a command never run leaves no job behind
        # (controller/lease.py: dropped LEASE_GRACE after registration if no process came)
        lease = {"lease_uid": os.geteuid()} if print_only else {}
        reply = _call(client, "register", name, priority=priority, weight=weight,
                      mem_quota=limit_value(mem), device=device, ephemeral=True, **lease)
        keep = print_only or any(a in DETACH for a in rest)
        code = 2
        try:
            plan = _plan(reply["job"], sim_mode, preload_file, reply.get("shim"))
            rootfs = rootfs_of(rest)
            if rootfs is not None:
                try:
                    check_rootfs(plan, rootfs)
                except InjectError as exc:
                    keep = False
                    fail(PROG, str(exc))
            new = head + engine_flags(plan, priority) + rest
            if print_only:
                click.echo(shlex.join(new))
                code = 0
            else:
                try:
                    code = sup.run(new, os.environ)
                except SpawnError as exc:
                    click.echo(f"{PROG}: {exc}", err=True)
                    code = exc.code
        finally:
            if not keep:
                try:
                    client.unregister(name)
                except (ClientError, ControllerUnavailable):
                    pass
    sys.exit(code)


@cli.command("cdi")
@click.option("--job", type=JOB_NAME, required=True, help="A registered job (tgsctl add JOB ...).")
@click.option("--out", "out_dir", default=cdi.DEFAULT_DIR, show_default=True,
              help="Spec directory ('-': print the spec).")
@sim_option
@preload_option
@click.option("--rootfs", type=click.Path(exists=True, file_okay=False), default=None,
              help="Check this root file system's glibc against the shim's baseline.")
@click.pass_context
def cdi_cmd(ctx: click.Context, job: str, out_dir: str, sim: bool | None,
            preload_file: bool, rootfs: str | None) -> None:
    """Write a CDI spec so that `--device tgs.io/gpu=JOB` injects the job
    (podman, containerd >= 1.7, CRI-O >= 1.24, Docker with CDI)."""
    client: Client = ctx.obj
    plan = _plan(_job(client, job), _sim_mode(client, sim), preload_file)
    if rootfs:
        try:
            check_rootfs(plan, rootfs)
        except InjectError as exc:
            fail(PROG, str(exc))
    if out_dir == "-":
        import json
        click.echo(json.dumps(cdi.spec(plan), indent=2))
        return
    try:
        path = cdi.write(plan, out_dir)
    except OSError as exc:
        fail(PROG, f"cannot write the spec into {out_dir}: {exc}")
    click.echo(f"{path}: use --device {cdi.KIND}={job}")


@cli.command("k8s")
@click.option("--job", type=JOB_NAME, required=True, help="A registered job (tgsctl add JOB ...).")
@click.option("-f", "--file", "src", type=click.File("r"), default="-", show_default=True,
              help="Manifest, YAML (one document or several) or JSON ('-': stdin); written "
                   "back in the same format.")
@click.option("--container", default=None, help="Patch only this container (default: all).")
@sim_option
@preload_option
@click.pass_context
def k8s_cmd(ctx: click.Context, job: str, src: Any, container: str | None,
            sim: bool | None, preload_file: bool) -> None:
    """Patch a manifest's Pods and workloads' pod templates (Deployment, StatefulSet,
    DaemonSet, ReplicaSet, Job, CronJob) with the job's hostPath volumes, mounts and
    environment; other documents are written back unchanged."""
    try:
        manifest = k8s.load(src.read(k8s.MAX_MANIFEST + 1))
    except (k8s.ManifestError, UnicodeDecodeError) as exc:
        fail(PROG, str(exc) if isinstance(exc, k8s.ManifestError) else "the manifest is not UTF-8")
    client: Client = ctx.obj
    plan = _plan(_job(client, job), _sim_mode(client, sim), preload_file)
    try:
        k8s.patch(manifest, plan, container)
    except k8s.ManifestError as exc:
        fail(PROG, str(exc))
    click.echo(k8s.dump(manifest), nl=False)


def main() -> None:
    cli(prog_name=PROG)
