"""The TGS DRA driver on one node: the kubelet plugin and the ResourceSlice publisher.

Its parts, one module each:

    node.py        the node controller: calls, and its status (GPUs; feeds slices.py)
    plan.py        a claim's jobs, from the ResourceClaim on the API server (kube.py) and
                   its opaque config (params.py)
    claims.py      NodePrepareResources / NodeUnprepareResources: the jobs registered, their
                   CDI specs, the answer; the checkpoint (checkpoint.py)
    reconcile.py   the checkpoint's claims and the controller's jobs kept in line; orphan
                   jobs removed once their claims are gone (orphans.py)
    service.py     the gRPC sockets: registration (plugin watcher) and DRAPlugin

Threads: the two gRPC servers, `poll` (the controller's status: GPUs, the slices; then the
reconciliation) and `watch` (serves the sockets again when they are removed, waits for the
kubelet's registration directory).
"""

from __future__ import annotations

import threading

from ..daemon import start_loops
from . import slices
from .claims import Claims
from .config import DriverConfig
from .kube import Kube
from .node import NodeController
from .reconcile import Reconciler
from .service import Sockets


class Driver:
    def __init__(self, cfg: DriverConfig) -> None:
        self.cfg = cfg
        self.kube = Kube(cfg.api) if cfg.api is not None else None
        self.publisher = slices.Publisher(self.kube, cfg.node_name, cfg.driver,
                                          cfg.slice_interval) \
            if self.kube is not None and cfg.publish else None
        self.node = NodeController(cfg, self.publisher)
        self.claims = Claims(cfg, self.kube, self.node)
        self.reconciler = Reconciler(cfg, self.node, self.claims, self.kube)
        self.sockets = Sockets(cfg, self.claims, self._registered)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _registered(self) -> None:
        """The kubelet accepted the driver (at start, or again after a restart of the
        kubelet, which deletes the node's slices when it starts): the slices looked at on
        the next poll."""
        if self.publisher is not None:
            self.publisher.check_soon()

    def _poll_step(self) -> None:
        self.node.poll()
        self.reconciler.housekeeping()

    def start(self) -> None:
        self.reconciler.load()
        self._threads += start_loops(self._stop, ((self.cfg.health_interval, self._poll_step),
                                                  (self.cfg.watch_interval,
                                                   self.sockets.watch_once)))

    def stop(self) -> None:
        """Stop serving and remove the slices; the prepared claims' jobs stay (a restarted
        driver finds them in its checkpoint)."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        self.sockets.stop()
        if self.publisher is not None:
            self.publisher.delete()
