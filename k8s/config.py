"""The device plugin's settings (tgs-device-plugin's options)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import podinfo
from .health import UNHEALTHY_AFTER


@dataclass
class Config:
    plugin_dir: Path                              # the kubelet's device-plugins directory
    resource: str = "tgs.io/gpu"
    nshares: int = 4                              # shares advertised per GPU
    endpoint: str = "tgs-gpu.sock"                # our socket's name in plugin_dir
    controller: str | None = None                 # the controller's endpoint (default: its own)
    runtime_dir: str | None = None
    timeout: float = 3.0                          # per controller / kubelet call
    health_interval: float = 1.0
    unhealthy_after: int = UNHEALTHY_AFTER        # failed polls in a row before Unhealthy
    watch_interval: float = 0.5
    pod_resources: str | None = podinfo.POD_RESOURCES_SOCKET
    api: podinfo.ApiServer | None = None
    defaults: dict[str, str] = field(default_factory=dict)   # annotations a pod lacks
    cdi_dir: str | None = None                    # answer with CDI device names
    preload_file: bool = True                     # /etc/ld.so.preload rather than LD_PRELOAD
    host_lib_dir: str | None = None               # see response.relocate
    sim: bool | None = None                       # hand over the simulated driver (default:
    gc_grace: float = 60.0                        #   when the controller's GPUs are simulated)
    gc_interval: float = 10.0
    own_pod: tuple[str, str] | None = None        # (namespace, name): a List without it is
                                                  #   partial (gc.py)
    node_name: str | None = None                  # label this node with signals.LABEL
    label_interval: float = 30.0                  # at most one label update per interval
    memory_above_shares: bool = False             # quotas may exceed the shares' part
    production_namespaces: frozenset[str] = frozenset()   # empty: every namespace may
    gpu_handoff: str | None = None                # response.HANDOFFS (default: env, or none
                                                  #   with the simulated GPU)
