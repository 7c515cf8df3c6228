"""`tgs-device-plugin`: advertise each GPU as shares of `tgs.io/gpu` to the kubelet."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import click

from tgs.version import version_option

from . import podinfo
from .config import Config
from .daemon import serve_until_signalled
from .health import UNHEALTHY_AFTER
from .plugin import Plugin

PROG = "tgs-device-plugin"


def _defaults(items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for kv in items:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{kv!r} is not KEY=VALUE", param_hint="--default")
        out[key] = value
    return out


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@version_option(PROG)
@click.option("--plugin-dir", type=click.Path(file_okay=False, path_type=Path),
              default="/var/lib/kubelet/device-plugins", show_default=True,
              help="The kubelet's device-plugins directory (its kubelet.sock is there).")
@click.option("--resource", default="tgs.io/gpu", show_default=True,
              help="Extended resource name to advertise.")
@click.option("--shares", "nshares", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Shares advertised per GPU (a share's default memory: 1/N of the GPU).")
@click.option("--endpoint", default="tgs-gpu.sock", show_default=True,
              help="This plugin's socket name in --plugin-dir.")
@click.option("--controller", envvar="TGS_CONTROLLER", default=None,
              help="Controller endpoint (default: the ipc socket in the runtime dir).")
@click.option("--runtime-dir", envvar="TGS_RUNTIME_DIR", default=None,
              help="The controller's runtime directory.")
@click.option("--timeout", type=click.FloatRange(0.1, 60), default=3.0, show_default=True,
              help="Seconds per controller or kubelet call.")
@click.option("--health-interval", type=click.FloatRange(0.05, 60), default=1.0,
              show_default=True, help="Seconds between two looks at the controller.")
@click.option("--unhealthy-after", type=click.IntRange(1, 100), default=UNHEALTHY_AFTER,
              show_default=True, help="Failed looks at the controller in a row before the "
                                      "shares are reported Unhealthy.")
@click.option("--pod-resources", default=podinfo.POD_RESOURCES_SOCKET, show_default=True,
              help="The kubelet's pod resources socket ('' to not use it).")
@click.option("--api-server", default=None,
              help="API server URL to read pod annotations (default: in-cluster, when the "
                   "pod has a service account; 'none' to not ask).")
@click.option("--kubeconfig", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Read pod annotations with this kubeconfig's current context (instead "
                   "of the in-cluster service account).")
@click.option("--token-file", type=click.Path(dir_okay=False), default=None,
              help="Bearer token for --api-server.")
@click.option("--ca-file", type=click.Path(dir_okay=False), default=None,
              help="CA bundle for --api-server.")
@click.option("--default", "defaults", multiple=True, metavar="KEY=VALUE",
              help="An annotation a pod without it gets (e.g. tgs.io/priority=production).")
@click.option("--memory-above-shares", is_flag=True,
              help="Let annotations ask for more memory than the container's shares of the "
                   "GPU (overcommit; default: refused at container start).")
@click.option("--production-namespace", "production_namespaces", multiple=True,
              metavar="NS", help="Only pods of these namespaces may ask for tgs.io/priority="
                                 "production (repeatable; default: any namespace).")
@click.option("--cdi-dir", default=None,
              help="Answer with CDI device names and write the specs here (the runtime "
                   "must support CDI); default: mounts and env.")
@click.option("--preload-file/--preload-env", default=True, show_default=True,
              help="Preload the shim through a read-only /etc/ld.so.preload (also covers "
                   "processes that reset their environment) or through LD_PRELOAD.")
@click.option("--host-lib-dir", default=None,
              help="Copy the shim and the other files from this plugin's image here (a "
                   "hostPath at the same path on the node) and mount them from there.")
@click.option("--gpu-handoff", type=click.Choice(["env", "cdi", "none"]), default=None,
              help="How the container gets the real GPU: NVIDIA_VISIBLE_DEVICES=<uuid> for the "
                   "NVIDIA container runtime (env), the CDI device nvidia.com/gpu=<uuid> (cdi), "
                   "or nothing (none). Default: env, none with simulated GPUs.")
@click.option("--sim/--no-sim", default=None,
              help="Hand containers the simulated driver (default: when the GPUs are).")
@click.option("--gc-grace", type=click.FloatRange(0), default=60.0, show_default=True,
              help="Seconds a job's shares must be absent from the pod resources API "
                   "before it is unregistered (longer than a restarted kubelet takes to "
                   "list its pods again).")
@click.option("--gc-interval", type=click.FloatRange(0.05), default=10.0, show_default=True,
              help="Seconds between two looks for such jobs (pod resources API).")
@click.option("--pod-name", envvar="POD_NAME", default=None,
              help="This plugin's own pod (downward API): a pod resources list without it "
                   "is partial and removes nothing. Needs --pod-namespace.")
@click.option("--pod-namespace", envvar="POD_NAMESPACE", default=None,
              help="The namespace of --pod-name.")
@click.option("--node-name", envvar="NODE_NAME", default=None,
              help="This node's name: label it with tgs.io/gpu-idle-pct (needs the API "
                   "server and the right to patch nodes); default: no label.")
@click.option("--label-interval", type=click.FloatRange(0), default=30.0, show_default=True,
              help="Seconds between two updates of the node label, at most.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
def cli(plugin_dir: Path, resource: str, nshares: int, endpoint: str, controller: str | None,
        runtime_dir: str | None, timeout: float, health_interval: float, unhealthy_after: int,
        pod_resources: str,
        api_server: str | None, kubeconfig: str | None, token_file: str | None, ca_file: str | None,
        defaults: tuple[str, ...], memory_above_shares: bool,
        production_namespaces: tuple[str, ...], cdi_dir: str | None, preload_file: bool,
        host_lib_dir: str | None, gpu_handoff: str | None, sim: bool | None,
        gc_grace: float, gc_interval: float, pod_name: str | None, pod_namespace: str | None,
        node_name: str | None, label_interval: float, log_level: str) -> None:
    """Kubelet device plugin for TGS (device plugin API v1beta1)."""
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s tgs-device-plugin %(levelname)s %(message)s")
    if runtime_dir:             # the injection's generated files go there too
        os.environ["TGS_RUNTIME_DIR"] = runtime_dir
    api: podinfo.ApiServer | None
    if api_server == "none":
        api = None
    elif api_server:
        token = Path(token_file).read_text().strip() if token_file else None
        api = podinfo.ApiServer(api_server, token, ca_file)
    elif kubeconfig:
        try:
            api = podinfo.ApiServer.from_kubeconfig(kubeconfig)
        except podinfo.PodInfoError as exc:
            raise click.BadParameter(str(exc), param_hint="--kubeconfig") from None
    else:
        api = podinfo.ApiServer.in_cluster()
    if bool(pod_name) != bool(pod_namespace):
        raise click.BadParameter("give both or neither", param_hint="--pod-name/--pod-namespace")
    cfg = Config(plugin_dir=plugin_dir, resource=resource, nshares=nshares, endpoint=endpoint,
                 controller=controller, runtime_dir=runtime_dir, timeout=timeout,
                 health_interval=health_interval, unhealthy_after=unhealthy_after,
                 own_pod=(pod_namespace, pod_name) if pod_name and pod_namespace else None,
                 pod_resources=pod_resources or None, api=api,
                 defaults=_defaults(defaults), memory_above_shares=memory_above_shares,
                 production_namespaces=frozenset(production_namespaces), cdi_dir=cdi_dir,
                 preload_file=preload_file,
                 host_lib_dir=host_lib_dir, gpu_handoff=gpu_handoff, sim=sim, gc_grace=gc_grace,
                 gc_interval=gc_interval, node_name=node_name, label_interval=label_interval)
    run(cfg)


def run(cfg: Config) -> None:
    serve_until_signalled(Plugin(cfg))


def main() -> None:
    cli(prog_name=PROG)
