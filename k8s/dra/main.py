"""`tgs-dra-plugin`: the TGS DRA driver of a node (kubelet plugin and ResourceSlice publisher).

    tgs-dra-plugin --node-name NODE [options]           run (until SIGTERM)
    tgs-dra-plugin --node-name NODE --print-slices      the slices it would publish now
    tgs-dra-plugin --list-prepared [--state-dir DIR]    the prepared claims of its checkpoint
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from dataclasses import asdict
from pathlib import Path

import click
from tgs.tools.sizes import format_size

from tgs.version import version_option

from .. import podinfo, response
from ..daemon import serve_until_signalled
from . import slices
from .checkpoint import Checkpoint
from .config import CDI_DIR, DRIVER, REGISTRAR_DIR, DriverConfig, plugin_dir_for
from .driver import Driver

PROG = "tgs-dra-plugin"
# a driver name is a DNS subdomain (lowercase), at most 63 characters (resource.k8s.io)
_DRIVER_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_NODE_RE = _DRIVER_RE


def _api(api_server: str | None, kubeconfig: str | None, token_file: str | None,
         ca_file: str | None) -> podinfo.ApiServer | None:
    if api_server == "none":
        return None
    if api_server:
        token = Path(token_file).read_text().strip() if token_file else None
        return podinfo.ApiServer(api_server, token, ca_file)
    if kubeconfig:
        try:
            return podinfo.ApiServer.from_kubeconfig(kubeconfig)
        except podinfo.PodInfoError as exc:
            raise click.BadParameter(str(exc), param_hint="--kubeconfig") from None
    return podinfo.ApiServer.in_cluster()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@version_option(PROG)
@click.option("--driver", default=DRIVER, show_default=True,
              help="The DRA driver name (the DeviceClass selects it, the slices carry it).")
@click.option("--node-name", envvar="NODE_NAME", default=None,
              help="This node's name: the pool of its devices. [env NODE_NAME; required]")
@click.option("--registrar-dir", type=click.Path(file_okay=False, path_type=Path),
              default=REGISTRAR_DIR, show_default=True,
              help="The kubelet's plugin watcher directory: <driver>-reg.sock goes there.")
@click.option("--plugin-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the DRA socket (dra.sock) goes. [default: "
                   "/var/lib/kubelet/plugins/<driver>]")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the prepared claims are kept (checkpoint.json). [default: "
                   "--plugin-dir]")
@click.option("--shares", "nshares", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Share devices published per GPU (a share's memory: 1/N of the GPU).")
@click.option("--controller", envvar="TGS_CONTROLLER", default=None,
              help="Controller endpoint (default: the ipc socket in the runtime dir).")
@click.option("--runtime-dir", envvar="TGS_RUNTIME_DIR", default=None,
              help="The controller's runtime directory.")
@click.option("--timeout", type=click.FloatRange(0.1, 60), default=3.0, show_default=True,
              help="Seconds per controller call.")
@click.option("--api-server", default=None,
              help="API server URL (default: in-cluster, from the pod's service account).")
@click.option("--kubeconfig", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Use this kubeconfig's current context instead of the service account.")
@click.option("--token-file", type=click.Path(dir_okay=False), default=None,
              help="Bearer token for --api-server.")
@click.option("--ca-file", type=click.Path(dir_okay=False), default=None,
              help="CA bundle for --api-server.")
@click.option("--cdi-dir", default=CDI_DIR, show_default=True,
              help="Where the jobs' CDI specs are written (the runtime's CDI spec directory).")
@click.option("--preload-file/--preload-env", default=True, show_default=True,
              help="Preload the shim through a read-only /etc/ld.so.preload or LD_PRELOAD.")
@click.option("--host-lib-dir", default=None,
              help="Copy the shim and the other files from this image here (a hostPath at the "
                   "same path on the node) and mount them from there.")
@click.option("--gpu-handoff", type=click.Choice(list(response.HANDOFFS)), default=None,
              help="How a container gets the real GPU: NVIDIA_VISIBLE_DEVICES in the CDI spec "
                   "(env), the CDI device nvidia.com/gpu=<uuid> (cdi), or nothing (none). "
                   "Default: env, none with simulated GPUs.")
@click.option("--sim/--no-sim", default=None,
              help="Hand containers the simulated driver (default: when the GPUs are).")
@click.option("--memory-above-shares", is_flag=True,
              help="Let a claim's config ask for more memory than its shares of the GPU.")
@click.option("--production-namespace", "production_namespaces", multiple=True, metavar="NS",
              help="Only claims of these namespaces may ask for priority production "
                   "(repeatable; default: any namespace).")
@click.option("--health-interval", type=click.FloatRange(0.05, 60), default=1.0,
              show_default=True, help="Seconds between two looks at the controller.")
@click.option("--slice-interval", type=click.FloatRange(0.05), default=30.0, show_default=True,
              help="Seconds between two republications of the placement signal, at most (a "
                   "GPU that comes or goes is published at once).")
@click.option("--resync-interval", type=click.FloatRange(0.05), default=10.0,
              show_default=True, help="Seconds between two checks that the prepared claims' "
                                      "jobs are registered.")
@click.option("--gc-grace", type=click.FloatRange(0), default=60.0, show_default=True,
              help="Seconds a dra-* job that no prepared claim holds waits, once its "
                   "ResourceClaim is seen gone from the API server (404, or another uid), "
                   "before it is unregistered (checked every --resync-interval; never while "
                   "the API server does not answer).")
@click.option("--publish/--no-publish", default=True, show_default=True,
              help="Publish the node's ResourceSlice (needs the API server).")
@click.option("--print-slices", is_flag=True,
              help="Print the ResourceSlices the driver would publish now and exit.")
@click.option("--list-prepared", is_flag=True,
              help="Print the prepared claims of the checkpoint and exit.")
@click.option("--json", "as_json", is_flag=True,
              help="With --print-slices or --list-prepared: JSON.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
def cli(driver: str, node_name: str | None, registrar_dir: Path, plugin_dir: Path | None,
        state_dir: Path | None, nshares: int, controller: str | None, runtime_dir: str | None,
        timeout: float, api_server: str | None, kubeconfig: str | None, token_file: str | None,
        ca_file: str | None, cdi_dir: str, preload_file: bool, host_lib_dir: str | None,
        gpu_handoff: str | None, sim: bool | None, memory_above_shares: bool,
        production_namespaces: tuple[str, ...], health_interval: float, slice_interval: float,
        resync_interval: float, gc_grace: float, publish: bool, print_slices: bool,
        list_prepared: bool, as_json: bool, log_level: str) -> None:
    """Kubernetes DRA driver for TGS (kubelet plugin API v1 and v1beta1, resource.k8s.io/v1)."""
    if not _DRIVER_RE.match(driver) or len(driver) > 63:
        raise click.BadParameter(f"{driver!r} is not a DNS subdomain of at most 63 lowercase "
                                 "characters", param_hint="--driver")
    plugin_dir = plugin_dir or plugin_dir_for(driver)
    state_dir = state_dir or plugin_dir
    if as_json and not (print_slices or list_prepared):
        raise click.UsageError("--json goes with --print-slices or --list-prepared")
    if print_slices and list_prepared:
        raise click.UsageError("give --print-slices or --list-prepared, not both")
    if list_prepared:
        _list_prepared(state_dir, as_json)
        return
    if not node_name:
        raise click.UsageError("--node-name (or NODE_NAME) is required: it names this node's "
                               "pool")
    if not _NODE_RE.match(node_name) or len(node_name) > 253:
        raise click.BadParameter(f"{node_name!r} is not a node name", param_hint="--node-name")
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format=f"%(asctime)s {PROG} %(levelname)s %(message)s")
    if runtime_dir:                     # the injection's generated files go there too
        os.environ["TGS_RUNTIME_DIR"] = runtime_dir
    api = None if print_slices else _api(api_server, kubeconfig, token_file, ca_file)
    if api is None and not print_slices:
        raise click.UsageError("no API server: the driver reads ResourceClaims from it (run "
                               "in a pod with a service account, or give --api-server or "
                               "--kubeconfig)")
    cfg = DriverConfig(node_name=node_name, api=api, driver=driver,
                       registrar_dir=registrar_dir, plugin_dir=plugin_dir, state_dir=state_dir,
                       nshares=nshares, controller=controller, runtime_dir=runtime_dir,
                       timeout=timeout, health_interval=health_interval,
                       slice_interval=slice_interval, resync_interval=resync_interval,
                       gc_grace=gc_grace,
                       publish=publish, cdi_dir=cdi_dir, preload_file=preload_file,
                       host_lib_dir=host_lib_dir, gpu_handoff=gpu_handoff, sim=sim,
                       memory_above_shares=memory_above_shares,
                       production_namespaces=frozenset(production_namespaces))
    if print_slices:
        _print_slices(cfg, as_json)
        return
    run(cfg)


def _print_slices(cfg: DriverConfig, as_json: bool) -> None:
    node = Driver(cfg).node
    st = node.poll()
    if st is None:
        raise click.ClickException("the controller does not answer")
    gpus = node.gpus()
    specs = slices.desired(cfg.node_name, cfg.driver, slices.devices(gpus, cfg.nshares, st))
    objs = [{"apiVersion": slices.GROUP_VERSION, "kind": "ResourceSlice",
             "metadata": {"name": slices.slice_name(cfg.node_name, cfg.driver, i)},
             "spec": s} for i, s in enumerate(specs)]
    if as_json:
        click.echo(json.dumps(objs, indent=2))
        return
    rows = [("DEVICE", "GPU", "SHARE", "MEMORY", "IDLE%")]
    for o in objs:
        for dev in o["spec"]["devices"]:
            a = dev["attributes"]
            mem = slices.parse_quantity(dev["capacity"]["memory"]["value"]) or 0
            rows.append((dev["name"], a["uuid"]["string"], str(a["share"]["int"]),
                         format_size(mem), str(a.get("idlePct", {}).get("int", "-"))))
    _table(rows)


def _list_prepared(state_dir: Path, as_json: bool) -> None:
    claims = Checkpoint(state_dir).load()
    if as_json:
        click.echo(json.dumps({u: asdict(c) for u, c in claims.items()}, indent=2))
        return
    rows = [("CLAIM", "UID", "STATE", "JOBS")]
    for uid, c in sorted(claims.items(), key=lambda kv: (kv[1].namespace, kv[1].name)):
        jobs = ", ".join(f"{j.name} ({j.priority}, {','.join(j.gpus)})" for j in c.jobs)
        rows.append((f"{c.namespace}/{c.name}", uid, c.state, jobs or "-"))
    _table(rows)


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def run(cfg: DriverConfig) -> None:
    serve_until_signalled(Driver(cfg))


def main() -> None:
    cli(prog_name=PROG)
