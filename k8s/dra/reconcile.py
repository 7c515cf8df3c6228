"""The claims' jobs kept in line with the checkpoint, from the poll loop: claims a previous
run left pending have their jobs undone; every --resync-interval, prepared claims' jobs that
the controller lost are registered again, and dra-* jobs that no claim holds are removed
once their claim is gone from the API server (orphans.py says when)."""

from __future__ import annotations

import logging
import time

from tgs.client import ClientError, ControllerUnavailable
from tgs.tools.injection import InjectError

from . import checkpoint as ckpt
from .claims import Claims
from .config import DriverConfig
from .kube import Kube
from .node import NodeController
from .orphans import Orphans
from .plan import JOB_PREFIX, ClaimError

log = logging.getLogger("tgs.k8s.dra")


class Reconciler:
    def __init__(self, cfg: DriverConfig, node: NodeController, claims: Claims,
                 kube: Kube | None) -> None:
        self.cfg = cfg
        self.node = node
        self.claims = claims
        self.orphans = Orphans(kube, claims.owners, cfg.gc_grace)
        self._stale: set[str] = set()                # pending at start: their jobs go
        self._last_resync = -float("inf")

    def load(self) -> None:
        """The checkpoint's claims; pending ones are undone by housekeeping."""
        self._stale = self.claims.load()

    def housekeeping(self, now: float | None = None) -> None:
        """Undo claims left pending by a previous run; every resync interval, register again
        the jobs of prepared claims that the controller no longer has, and remove the dra-*
        jobs no claim holds whose claims are gone (orphans.py)."""
        now = time.monotonic() if now is None else now
        self._undo_stale()
        if now - self._last_resync < self.cfg.resync_interval:
            return
        self._last_resync = now
        try:
            have = {str(j["name"]) for j in self.node.call("list")}
        except (ControllerUnavailable, ClientError) as exc:
            log.debug("no resync: %s", exc)
            return
        ours = self._resync(have)
        orphans = sorted(n for n in have if n.startswith(JOB_PREFIX) and n not in ours)
        log.debug("resync: %d job(s) of claims, orphans: %s", len(ours),
                  ", ".join(orphans) or "none")
        self._collect(orphans, now)

    def _undo_stale(self) -> None:
        c = self.claims
        for uid in sorted(self._stale):
            with c.lock:
                entry = c.claims.get(uid)
                if entry is not None and entry.state == ckpt.PREPARED:
                    self._stale.discard(uid)         # prepared again meanwhile
                    continue
                try:
                    c.unprepare_one(uid)
                    self._stale.discard(uid)
                    log.info("claim %s: left pending by the previous run, undone", uid)
                except ClaimError as exc:
                    log.debug("pending claim %s: not undone yet: %s", uid, exc)

    def _resync(self, have: set[str]) -> set[str]:
        """Register again the prepared claims' jobs missing from `have` (the controller's
        jobs): the names of every claim's jobs."""
        c = self.claims
        with c.lock:
            for entry in list(c.claims.values()):
                if entry.state != ckpt.PREPARED:
                    continue
                for job in entry.jobs:
                    if job.name in have:
                        continue
                    try:
                        c.materialize(c.ensure(job)[0])
                        log.warning("job %s of claim %s/%s was gone from the controller: "
                                    "registered again", job.name, entry.namespace, entry.name)
                    except (ControllerUnavailable, ClientError, InjectError, OSError) as exc:
                        log.warning("job %s of claim %s/%s is gone from the controller and "
                                    "cannot be registered again: %s", job.name,
                                    entry.namespace, entry.name, exc)
            ours = {j.name for e in c.claims.values() for j in e.jobs}
            for job in c.owners.jobs() - have - ours:  # neither registered nor held
                c.owners.remove(job)
            return ours

    def _collect(self, orphans: list[str], now: float) -> None:
        """Remove the orphan jobs whose claims have been gone for the grace period."""
        c = self.claims
        for due in self.orphans.look(orphans, now):
            with c.lock:
                if any(j.name == due.job for e in c.claims.values() for j in e.jobs):
                    continue                         # prepared again meanwhile
                try:
                    self.node.call("unregister", due.job)
                except ClientError as exc:
                    if exc.code != "not_found":
                        log.warning("orphan job %s: not removed yet: %s", due.job, exc)
                        continue
                except ControllerUnavailable as exc:
                    log.debug("orphan job %s: not removed yet: %s", due.job, exc)
                    continue
                c.files.forget(due.job)
                c.owners.remove(due.job)
                self.orphans.forget(due.job)
            o = due.owner
            log.info("job %s: in no prepared claim, and its ResourceClaim %s/%s (uid %s) %s "
                     "for %.0f s: removed", due.job, o.namespace, o.name, o.uid, due.why,
                     due.absent_for)
