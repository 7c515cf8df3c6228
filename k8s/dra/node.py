"""The node controller as the DRA driver sees it: one call at a time, and its status (the
GPUs, kept while it does not answer; whether they are simulated; its directories), which
also drives the ResourceSlice publisher."""

from __future__ import annotations

import logging
import threading
from typing import Any

from tgs.client import Client, ClientError, ControllerUnavailable

from .. import health
from ..shares import Gpu
from . import slices
from .config import DriverConfig

log = logging.getLogger("tgs.k8s.dra")


class NodeController:
    def __init__(self, cfg: DriverConfig, publisher: slices.Publisher | None) -> None:
        self.cfg = cfg
        self.publisher = publisher
        self.health = health.Hysteresis()
        self._lock = threading.Lock()                # what the controller said
        self._gpus: list[Gpu] = []
        self._sim = False
        self._dirs: list[str] = []

    def call(self, fn: str, *args: Any, **kw: Any) -> Any:
        """One controller call (`fn` a Client method)."""
        with Client(endpoint=self.cfg.controller, runtime_dir=self.cfg.runtime_dir,
                    timeout=self.cfg.timeout) as c:
            why = health.refused(c.endpoint)         # a dead controller: no need to wait
            if why is not None:
                raise ControllerUnavailable(why)
            return getattr(c, fn)(*args, **kw)

    def poll(self) -> dict[str, Any] | None:
        """One look at the controller: its GPUs (kept while it does not answer), the
        slices; None when it did not answer."""
        try:
            st = dict(self.call("status"))
            devs = st.get("devices") or []
            gpus = [Gpu(int(d["index"]), str(d["uuid"]), int(d["mem_total"])) for d in devs]
        except (ControllerUnavailable, ClientError, KeyError, TypeError, ValueError) as exc:
            self.health.failed()
            log.log(logging.WARNING if self.health.failures == self.health.after
                    else logging.DEBUG, "controller not answering (%d looks in a row): %s",
                    self.health.failures, exc)
            return None
        self.health.succeeded()
        with self._lock:
            if [g.uuid for g in gpus] != [g.uuid for g in self._gpus]:
                log.info("GPUs: %s", ", ".join(g.uuid for g in gpus) or "none")
            self._gpus = gpus
            self._sim = bool(devs) and all(d.get("kind") == "sim" for d in devs)
            self._dirs = [str(st[k]) for k in ("segment_dir", "runtime_dir", "state_dir")
                          if st.get(k)]
        if self.publisher is not None and gpus:
            self.publisher.update(gpus, self.cfg.nshares, st)
        return st

    def gpus(self) -> list[Gpu]:
        """The GPUs last reported (asked for now when none is known yet)."""
        with self._lock:
            gpus = list(self._gpus)
        if not gpus and self.poll() is not None:
            with self._lock:
                gpus = list(self._gpus)
        return gpus

    @property
    def sim(self) -> bool:
        """Whether the containers get the simulated driver (--sim, else the GPUs' kind)."""
        if self.cfg.sim is not None:
            return self.cfg.sim
        with self._lock:
            return self._sim

    @property
    def dirs(self) -> list[str]:
        """The controller's segment, runtime and state directories (hostPaths already)."""
        with self._lock:
            return list(self._dirs)
