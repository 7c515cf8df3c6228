"""`tgs-controller`: the node daemon (always runs in the foreground; systemd supervises it)."""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path

import click
import zmq
from tgs.client import paths
from tgs.client.keys import KeyFileError

from tgs.version import version_option

from .auth import CurveGuard
from .devices import DeviceError, discover
from .fdguard import raise_nofile
from .loop import ControlLoop
from .policy import POLICIES, make_policy
from .registry import Registry
from .replies import DaemonInfo
from .server import Handler, Server
from .state import StateError, StateStore, default_state_dir

log = logging.getLogger("tgs.controller")
PROG = "tgs-controller"


def _lock(path: Path) -> int:
    """Hold an exclusive lock for the daemon's life: one controller per directory.  The
    holder writes its pid into the file, so that a second controller can name it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise click.ClickException(f"cannot open {path}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = _holder(fd)
        os.close(fd)
        raise click.ClickException(f"another tgs-controller ({holder}) holds {path}: one "
                                   "controller per state and runtime directory") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:                   # only the message of a second controller suffers
        log.warning("cannot write the pid into %s: %s", path, exc.strerror)
    return fd


def _holder(fd: int) -> str:
    """'pid N' from a held lock file, or why it is not known."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "pid unknown"


def sim_launch_env() -> dict[str, str]:
    """What a job needs to run on the simulated GPUs this controller serves: their state file
    and the simulated driver's directory (tgs-run puts it first on LD_LIBRARY_PATH)."""
    from tgs.intercept import simstate
    from tgs.intercept.locate import find_sim_lib_dir

    raw = os.environ.get(simstate.STATE_ENV, "")
    path = simstate.state_path()
    if raw and not raw.startswith("/"):
        log.warning("%s=%s is not an absolute path: the simulator ignores it, serving %s",
                    simstate.STATE_ENV, raw, path)
    lib = find_sim_lib_dir()
    log.info("simulated GPUs: state file %s, driver %s", path,
             lib / "libcuda.so.1" if lib else "not found (jobs need libcuda.so.1 on their "
             "LD_LIBRARY_PATH)")
    env = {simstate.STATE_ENV: str(path)}
    if lib is not None:
        env["LD_LIBRARY_PATH"] = str(lib)
    return env


@click.command(PROG, context_settings={"help_option_names": ["-h", "--help"]})
@version_option(PROG)
# accepted and ignored: the controller always runs in the foreground (older unit files and
# manifests pass it)
@click.option("--foreground", is_flag=True, hidden=True)
@click.option("--policy", type=click.Choice(POLICIES), default="adaptive", show_default=True)
@click.option("--period-ms", type=click.FloatRange(1, 100), default=50, show_default=True,
              help="Control period.")
@click.option("--state-dir", type=click.Path(path_type=Path), default=None,
              help="Durable state (default $TGS_STATE_DIR, else /var/lib/tgs as root, else "
                   "$XDG_STATE_HOME/tgs).")
@click.option("--segment-dir", type=click.Path(path_type=Path), default=None,
              help="Job and device segments (default <state dir>/segments).")
@click.option("--runtime-dir", type=click.Path(path_type=Path), default=None,
              help="Sockets (default $TGS_RUNTIME_DIR, else /run/tgs as root, else "
                   "$XDG_RUNTIME_DIR/tgs or /tmp/tgs-UID).")
@click.option("--listen", multiple=True,
              help="Extra request endpoint: PORT or HOST:PORT (tcp, loopback unless a host is "
                   "given) or a ZeroMQ endpoint. Repeatable. Served with CurveZMQ: only the "
                   "clients whose public keys are in <state dir>/curve/authorized/ get in.")
@click.option("--sim", is_flag=True, envvar="TGS_SIM",
              help="Use the simulated GPUs even if NVML is present ($TGS_SIM=1).")
@click.option("--static-share", type=click.FloatRange(0, 1, min_open=True), default=0.3,
              show_default=True, help="Share per opportunistic job for --policy static.")
@click.option("--metrics-port", default=None, metavar="[HOST:]PORT",
              help="Serve Prometheus metrics over HTTP on 127.0.0.1 unless a host is given "
                   "(0: a free port, see status).")
@click.option("--metrics-host", default=None, metavar="HOST",
              help="Address for --metrics-port (e.g. 0.0.0.0 for every interface).")
@click.option("--on-bypass", type=click.Choice(["report", "stop", "kill"]), default="report",
              show_default=True,
              help="A process using the GPU without the shim in a TGS job's container: "
                   "report it only, SIGSTOP it or SIGKILL it (docs/security.md).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default="info", show_default=True)
def cli(foreground: bool, policy: str, period_ms: float, state_dir: Path | None,
        segment_dir: Path | None, runtime_dir: Path | None, listen: tuple[str, ...], sim: bool,
        static_share: float, metrics_port: str | None, metrics_host: str | None,
        on_bypass: str, log_level: str) -> None:
    """TGS node controller: job registry, GPU-time allocation, ZeroMQ control plane.

    It always runs in the foreground (systemd or the DaemonSet supervise it)."""
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, log_level.upper()),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    raise_nofile()               # the soft descriptor limit up to the hard one (floods)
    state_dir = state_dir or default_state_dir()
    runtime_dir = runtime_dir or paths.default_runtime_dir()
    seg_dir = segment_dir or state_dir / "segments"
    try:
        paths.private_dir(state_dir)
        paths.private_dir(runtime_dir)
        seg_dir.mkdir(parents=True, exist_ok=True)
        for name in (paths.CONTROL_SOCK, paths.METRICS_SOCK):
            paths.check_ipc_path(runtime_dir / name)
    except (OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    locks = [_lock(state_dir / "controller.lock"), _lock(runtime_dir / "controller.lock")]
    try:
        devices = discover(force_sim=sim)
    except DeviceError as exc:
        raise click.ClickException(str(exc)) from exc
    # imported late: intercept parses segment.h, which a --help run does not need
    from tgs.intercept.locate import find_shim

    from .segments import SegmentFactory, device_segment

    try:
        launch_env = {"LD_PRELOAD": str(find_shim())}
    except FileNotFoundError as exc:
        log.warning("%s: register replies will carry no LD_PRELOAD", exc)
        launch_env = {}
    if devices[0].kind == "sim":
        launch_env.update(sim_launch_env())
    dev_segs = {d.index: device_segment(seg_dir, d.index) for d in devices}
    # disk.py: a tenant filling the disk: its grown files cut back, space held in reserve
    from .disk import DiskGuard

    disk = DiskGuard([state_dir, seg_dir], lambda: loop.cut_back_grown())
    disk.replenish()
    store = StateStore(state_dir, disk)
    factory = SegmentFactory(seg_dir, disk, {d.index: d.mem_total for d in devices})
    registry = Registry(store, devices, seg_dir, factory, launch_env)
    try:
        registry.load()
    except StateError as exc:
        raise click.ClickException(str(exc)) from exc
    loop = ControlLoop(registry, make_policy(policy, static_share), dev_segs, period_ms / 1000)
    loop.disk = disk
    from .bypass import BypassDetector
    from .bypass_action import BypassActor
    from .gpustats import GpuSampler
    from .metrics import MetricsServer, MetricsTap, parse_listen
    # adds gpus to status, with the processes that use them without the shim (acted on with
    # --on-bypass stop|kill)
    actor = None if on_bypass == "report" else BypassActor(on_bypass)
    engine = MetricsTap(loop, registry, GpuSampler(devices),
                        BypassDetector(devices, seg_dir, actor=actor))
    metrics_http = None
    if metrics_port is None and metrics_host is not None:
        raise click.UsageError("--metrics-host needs --metrics-port")
    if metrics_port is not None:
        try:
            host, port = parse_listen(metrics_port, metrics_host)
            metrics_http = MetricsServer(engine, port, host)
        except (OSError, ValueError) as exc:
            raise click.ClickException(f"metrics: {exc}") from exc
    endpoints = [paths.control_endpoint(runtime_dir)]
    secure = [paths.listen_endpoint(x) for x in listen]
    info = DaemonInfo(state_dir=str(state_dir), segment_dir=str(seg_dir),
                      runtime_dir=str(runtime_dir), endpoints=endpoints + secure,
                      metrics=paths.metrics_endpoint(runtime_dir))
    ctx = zmq.Context()
    guard = None
    if secure:
        try:
            guard = CurveGuard(ctx, state_dir)
        except (OSError, KeyFileError) as exc:
            ctx.term()
            raise click.ClickException(f"--listen needs CurveZMQ keys: {exc}") from exc
        info = replace(info, curve_endpoints=secure, curve_public_key=guard.public.decode(),
                       curve_authorized_dir=str(guard.authorized))
    try:
        server = Server(Handler(registry, engine, info), endpoints, info.metrics,
                        secure, guard, ctx)
    except Exception as exc:
        if guard is not None:
            guard.stop()
        raise click.ClickException(f"cannot bind {endpoints + secure}: {exc}") from exc
    engine.server_status = server.handler.server_status     # Prometheus: what floods cost
    signal.signal(signal.SIGTERM, server.stop)
    signal.signal(signal.SIGINT, server.stop)
    log.info("tgs-controller up: policy %s, period %g ms, %d device(s) (%s), %d job(s), %s",
             policy, period_ms, len(devices), devices[0].kind, len(registry.jobs),
             ", ".join(endpoints + [f"{e} (CurveZMQ)" for e in secure]))
    try:
        server.serve()
    finally:
        server.close()
        if metrics_http is not None:
            metrics_http.close()
        registry.close()
        for d in dev_segs.values():
            d.close()
        for name in (paths.CONTROL_SOCK, paths.METRICS_SOCK):
            try:
                os.unlink(runtime_dir / name)
            except OSError:
                pass
        for fd in locks:
            os.close(fd)
        log.info("tgs-controller stopped (state kept in %s)", state_dir)


def main() -> None:
    """Errors as one line, `tgs-controller: error: MESSAGE`, as the tools write them (exit 2
    for a usage error, 1 otherwise)."""
    try:
        rv = cli.main(prog_name=PROG, standalone_mode=False)
    except click.ClickException as exc:
        click.echo(f"{PROG}: error: {' '.join(exc.format_message().split())}", err=True)
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo(f"{PROG}: aborted", err=True)
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)
