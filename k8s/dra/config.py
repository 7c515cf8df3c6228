"""The DRA driver's settings (tgs-dra-plugin's options)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..podinfo import ApiServer

DRIVER = "gpu.tgs.io"
REGISTRAR_DIR = Path("/var/lib/kubelet/plugins_registry")
PLUGINS_DIR = Path("/var/lib/kubelet/plugins")
CDI_DIR = "/var/run/cdi"


def plugin_dir_for(driver: str) -> Path:
    return PLUGINS_DIR / driver


@dataclass
class DriverConfig:
    node_name: str
    api: ApiServer | None
    driver: str = DRIVER
    registrar_dir: Path = REGISTRAR_DIR           # the kubelet's plugin watcher looks here
    plugin_dir: Path = PLUGINS_DIR / DRIVER       # our DRA service socket
    state_dir: Path = PLUGINS_DIR / DRIVER        # checkpoint.json
    nshares: int = 4                              # share devices per GPU
    controller: str | None = None                 # the controller's endpoint (default: its own)
    runtime_dir: str | None = None
    timeout: float = 3.0                          # per controller call
    health_interval: float = 1.0                  # between two looks at the controller
    slice_interval: float = 30.0                  # signal republish / repair, at most every
    resync_interval: float = 10.0                 # prepared claims' jobs checked every
    gc_grace: float = 60.0                        # an orphan job's claim gone this long: removed
    watch_interval: float = 0.5                   # our sockets checked every
    publish: bool = True                          # ResourceSlices (needs api)
    cdi_dir: str = CDI_DIR
    preload_file: bool = True                     # /etc/ld.so.preload rather than LD_PRELOAD
    host_lib_dir: str | None = None               # response.relocate
    gpu_handoff: str | None = None                # response.HANDOFFS (default: env, none sim)
    sim: bool | None = None                       # hand over the simulated driver
    memory_above_shares: bool = False
    production_namespaces: frozenset[str] = frozenset()

    @property
    def registration_socket(self) -> Path:
        return self.registrar_dir / f"{self.driver}-reg.sock"

    @property
    def dra_socket(self) -> Path:
        return self.plugin_dir / "dra.sock"
