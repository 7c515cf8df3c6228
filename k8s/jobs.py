"""The TGS jobs the plugin makes: one per container's set of shares, named after them.

Registered at Allocate with defaults, set from the pod's annotations at PreStartContainer,
removed when the kubelet's pod resources API no longer lists their shares."""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from typing import Any

from tgs.controller import paths
from tgs.controller.client import ClientError, ControllerUnavailable
from tgs.tools import cdi

from . import annotations as ann
from . import podinfo, response
from .config import Config
from .shares import Gpu

log = logging.getLogger("tgs.k8s")


class Jobs:
    def __init__(self, cfg: Config, call: Callable[..., Any]) -> None:
        self.cfg = cfg
        self.call = call                    # call("verb", *args, **kw): one controller call

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

    def collect(self, now: float | None = None) -> list[str]:
        """Unregister this plugin's jobs (k8s-*) that no container holds any more, once they
        are older than gc_grace; needs the pod resources API. Returns the names removed."""
        sock = self.cfg.pod_resources
        if not sock or not os.path.exists(sock):
            return []
        try:
            held = {response.job_name(ids)
                    for ids in podinfo.holders(sock, self.cfg.resource, self.cfg.timeout)}
            jobs = self.call("list")
        except (podinfo.PodInfoError, ControllerUnavailable, ClientError) as exc:
            log.debug("no garbage collection this time: %s", exc)
            return []
        now = time.time() if now is None else now
        gone = []
        for j in jobs:
            name = str(j.get("name", ""))
            if name.startswith(response.JOB_PREFIX) and name not in held \
                    and now - float(j.get("created", now)) > self.cfg.gc_grace:
                try:
                    self.call("unregister", name)
                    self.forget(name)
                    gone.append(name)
                    log.info("job %s: no container holds its shares any more: removed", name)
                except (ControllerUnavailable, ClientError):
                    pass
        return gone

    def forget(self, name: str) -> None:
        """Files made for a removed job: its CDI spec, its generated ld.so.preload."""
        if self.cfg.cdi_dir:
            cdi.spec_path(self.cfg.cdi_dir, name).unlink(missing_ok=True)
        shutil.rmtree(paths.default_runtime_dir() / "inject" / name, ignore_errors=True)
