"""When an orphan job may go: a dra-* job that the controller has and no claim of the
checkpoint holds (a checkpoint lost or unreadable, a state directory replaced).

Such a job goes only once its claim is gone from the API server: its record
(checkpoint.Owners: the namespace, name and uid of the claim it was made for) names the
ResourceClaim, and a GET of it answering 404, or a claim with another uid (deleted and
created again), counts as gone. It is removed once the claim has been gone for the grace
period (--gc-grace), counted from the first look that found it gone; a look that finds the
claim again starts over. A GET that gets no answer, or any other error, counts neither way
and removes nothing: no job goes while the API server is unreachable (the rest of that
round is skipped). A job without a record (made before records were kept, or its state
directory lost) is reported once and left alone: nothing says which claim it was for.

Pure bookkeeping apart from the GETs: the caller (reconcile.py) gives the time (monotonic
seconds) and removes the jobs returned.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from .checkpoint import Owner, Owners
from .kube import Kube, KubeError

log = logging.getLogger("tgs.k8s.dra")
PRESENT, GONE, UNKNOWN = "present", "gone", "unknown"


@dataclass
class Due:
    job: str
    owner: Owner
    why: str                     # how the claim is gone
    absent_for: float            # seconds since first found gone


class Orphans:
    def __init__(self, kube: Kube | None, owners: Owners, grace: float) -> None:
        self.kube = kube
        self.owners = owners
        self.grace = grace
        self.gone_since: dict[str, float] = {}      # job -> first look that found it gone
        self._said: set[str] = set()                # orphans already reported

    def look(self, orphans: Iterable[str], now: float) -> list[Due]:
        """One look at the orphan jobs of this round: the ones to remove now."""
        orphans = set(orphans)
        for job in set(self.gone_since) - orphans:   # held again, or gone from the controller
            del self.gone_since[job]
        self._said &= orphans
        unknown: list[tuple[str, str]] = []            # (job, how it is reported)
        kept: list[tuple[str, str]] = []
        due: list[Due] = []
        seen: dict[tuple[str, str], tuple[str, str, bool]] = {}   # one GET per claim
        for job in sorted(orphans):
            owner = self.owners.get(job)
            if owner is None or self.kube is None:
                unknown.append((job, job))
                continue
            key = (owner.namespace, owner.name)
            if key not in seen:
                seen[key] = self._claim(owner)
            state, why, answered = seen[key]
            if state == PRESENT:                        # compared with this job's uid
                if why != owner.uid:
                    state, why = GONE, f"is now uid {why} (created again)"
            if state == UNKNOWN:
                log.debug("orphan job %s: claim %s/%s not looked at: %s", job,
                          owner.namespace, owner.name, why)
                if not answered:
                    break                               # unreachable: no more looks now
                continue
            if state == PRESENT:
                self.gone_since.pop(job, None)
                kept.append((job, f"{job} (claim {owner.namespace}/{owner.name})"))
                continue
            since = self.gone_since.setdefault(job, now)
            if since == now:
                log.info("orphan job %s: its claim %s/%s (%s) %s: removed in %.0f s unless "
                         "it comes back", job, owner.namespace, owner.name, owner.uid, why,
                         self.grace)
            if now - since >= self.grace:
                due.append(Due(job, owner, why, now - since))
        self._report(unknown, "no record says which claim they were made for (made before "
                     "records were kept, or the state directory lost): left alone; tgsctl rm "
                     "them once no pod uses them")
        self._report(kept, "their claims still exist: kept until they are deleted")
        return due

    def _report(self, jobs: list[tuple[str, str]], what: str) -> None:
        """Say once per job (until it stops being an orphan) what is done with it."""
        new = [(j, text) for j, text in jobs if j not in self._said]
        if new:
            self._said.update(j for j, _ in new)
            log.warning("jobs in no prepared claim of this driver (a lost checkpoint?): %s; "
                        "%s", ", ".join(text for _, text in new), what)

    def _claim(self, owner: Owner) -> tuple[str, str, bool]:
        """(PRESENT, its uid, True) | (GONE, why, True) | (UNKNOWN, why, answered)."""
        assert self.kube is not None
        try:
            claim = self.kube.get_claim(owner.namespace, owner.name)
        except KubeError as exc:
            if exc.status == 404:
                return GONE, "is gone from the API server (404)", True
            return UNKNOWN, str(exc), exc.status is not None
        uid = str((claim.get("metadata") or {}).get("uid") or "")
        if not uid:
            return UNKNOWN, "the answer has no metadata.uid", True
        return PRESENT, uid, True

    def forget(self, job: str) -> None:
        """The job was removed."""
        self.gone_since.pop(job, None)
        self._said.discard(job)
