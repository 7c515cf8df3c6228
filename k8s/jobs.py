"""The TGS jobs the plugin makes: one per container's set of shares, named after them.

Registered at Allocate with defaults, set from the pod's annotations at PreStartContainer,
removed once the kubelet's pod resources API has not listed their shares for the grace period
(gc.py says when that is)."""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from typing import Any

from tgs.client import ClientError, ControllerUnavailable, paths
from tgs.tools import cdi

from . import annotations as ann
from . import podinfo, response
from .config import Config
from .gc import AbsenceClock
from .shares import Gpu

log = logging.getLogger("tgs.k8s")


class Jobs:
    def __init__(self, cfg: Config, call: Callable[..., Any]) -> None:
        self.cfg = cfg
        self.call = call                    # call("verb", *args, **kw): one controller call
        self.absence = AbsenceClock(cfg.gc_grace)
        self._socket_id: tuple[int, int, int] | None = None    # the pod resources server's

    def ensure(self, name: str, gpus: list[tuple[Gpu, int]]) -> tuple[dict[str, Any], bool]:
        """Register the job (opportunistic, its shares' memory; over several GPUs one job with
        a part per GPU, the quota per GPU the smallest of its GPUs' shares) or find it
        registered: (the job object, whether this call registered it)."""
        quota = min(ann.share_quota(g.mem_total, n, self.cfg.nshares) for g, n in gpus)
        dev: str | list[str | int] = gpus[0][0].uuid if len(gpus) == 1 else \
            [g.uuid for g, _ in gpus]
        try:
            return dict(self.call("register", name, priority="opportunistic", weight=1,
                                  mem_quota=quota, device=dev)["job"]), True
        except ClientError as exc:
            if exc.code != "exists":
                raise
        for j in self.call("list"):
            if j["name"] == name:
                return dict(j), False
        raise ClientError("not_found", f"job {name} vanished while being looked up")

    def undo(self, names: list[str]) -> None:
        for n in names:
            try:
                self.call("unregister", n)
            except (ControllerUnavailable, ClientError):
                pass

    def settings(self, ids: list[str], gpus: list[tuple[Gpu, int]]) -> ann.JobSettings:
        pod: dict[str, str] = {}
        ref = None
        for attempt in range(3 if self.cfg.pod_resources else 0):
            try:            # recorded by the kubelet before this call; a retry costs little
                ref = podinfo.owner(self.cfg.pod_resources or "", self.cfg.resource, ids,
                                    self.cfg.timeout)
            except podinfo.PodInfoError as exc:
                log.warning("cannot tell which pod holds %s: %s", sorted(ids), exc)
                break
            if ref is not None:
                break
            time.sleep(0.2 * (attempt + 1))
        else:
            if self.cfg.pod_resources:
                log.warning("no pod holds %s in the pod resources API: defaults", sorted(ids))
        if ref is not None and self.cfg.api is not None:
            try:
                pod = self.cfg.api.annotations(ref.namespace, ref.name)
            except podinfo.PodInfoError as exc:
                log.warning("pod %s: annotations not readable (%s): using defaults", ref, exc)
        if ref is not None:
            log.info("shares %s belong to %s", sorted(ids), ref)
        allowed = self.cfg.production_namespaces
        if allowed and ann.PRIORITY in pod and pod[ann.PRIORITY].strip() == "production" \
                and (ref is None or ref.namespace not in allowed):
            raise ann.AnnotationError(
                f"{ann.PRIORITY}: namespace {ref.namespace if ref else '?'} may not run "
                f"production jobs (allowed: {', '.join(sorted(allowed))})")
        merged = {**self.cfg.defaults, **pod}
        # several GPUs: the memory is per GPU, bounded by the GPU where the job holds least
        gpu, n = min(gpus, key=lambda gn: ann.share_quota(gn[0].mem_total, gn[1],
                                                          self.cfg.nshares))
        return ann.settings(merged, mem_total=gpu.mem_total, shares=n,
                            nshares=self.cfg.nshares,
                            within_shares=not self.cfg.memory_above_shares)

    def collect(self, now: float | None = None, wall: float | None = None,
                controller_up: bool = True) -> list[str]:
        """Unregister this plugin's jobs (k8s-*) whose shares the pod resources API has not
        listed for gc_grace (gc.py); without that API nothing is removed. With the controller
        known down only the List is recorded (a call would wait out its timeout in the health
        loop). `now` (monotonic) and `wall` (the controller's clock, for the jobs' ages) for
        tests. The names removed."""
        now = time.monotonic() if now is None else now
        wall = time.time() if wall is None else wall
        view = self._view()
        if view is None:
            self.absence.lost()
            return []
        held = {response.job_name(ids) for ids in view.holders}
        if not controller_up:
            self.absence.due(held, None, now)
            return []
        try:
            jobs = [j for j in self.call("list")
                    if str(j.get("name", "")).startswith(response.JOB_PREFIX)]
        except (ControllerUnavailable, ClientError) as exc:
            log.debug("no garbage collection this time: %s", exc)
            self.absence.due(held, None, now)
            return []
        ages = {str(j["name"]): wall - float(j.get("created") or wall) for j in jobs}
        gone = []
        for name in self.absence.due(held, ages, now):
            try:
                self.call("unregister", name)
            except (ControllerUnavailable, ClientError):
                continue                    # tried again at the next look
            self.absence.forget(name)
            self.forget(name)
            gone.append(name)
            log.info("job %s: no container has held its shares for %.0f s: removed", name,
                     self.cfg.gc_grace)
        return gone

    def _view(self) -> podinfo.Listing | None:
        """The pod resources List, or None when it is not a whole view of the node: no
        socket, a failed List, or one without this plugin's own pod (when it knows it). A
        socket replaced since the last look (a kubelet restart) starts the absences anew."""
        sock = self.cfg.pod_resources
        ident = podinfo.identity(sock) if sock else None
        if sock is None or ident is None:
            return None
        if ident != self._socket_id:
            if self._socket_id is not None:
                log.info("pod resources socket replaced: absences count anew")
            self._socket_id = ident
            self.absence.lost()
        try:
            view = podinfo.listing(sock, self.cfg.resource, self.cfg.timeout)
        except podinfo.PodInfoError as exc:
            log.debug("no garbage collection this time: %s", exc)
            return None
        own = self.cfg.own_pod
        if own is not None and own not in view.pods:
            log.debug("pod resources do not list this plugin's pod %s/%s yet: a partial "
                      "view, no garbage collection", *own)
            return None
        return view

    def forget(self, name: str) -> None:
        """Files made for a removed job: its CDI spec, its generated ld.so.preload."""
        if self.cfg.cdi_dir:
            cdi.spec_path(self.cfg.cdi_dir, name).unlink(missing_ok=True)
        shutil.rmtree(paths.default_runtime_dir() / "inject" / name, ignore_errors=True)
