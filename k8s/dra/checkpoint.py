"""The prepared claims, kept in a file so that a restart of the driver (or of the kubelet)
keeps them: `<state dir>/checkpoint.json`, written atomically after every change.

Per claim uid: its namespace and name, its TGS jobs (name, settings, GPUs: enough to register
one again if the controller lost it) and the answer given to the kubelet (devices with their
CDI IDs), which a repeated NodePrepareResources gets again. A claim is written `pending`
before its jobs are registered and `prepared` after: a driver that died in between finds the
pending claim at start and removes its jobs (the kubelet, which got no answer, prepares it
again).

Beside it, `<state dir>/jobs/<job>.json` says which claim (namespace, name, uid) each job
was made for: one small file per job, written before the job is registered and removed once
it is unregistered. It outlives a lost checkpoint, so that a job no claim of the checkpoint
holds can still be traced to its claim, and removed once that claim is gone from the API
server (orphans.py).
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tgs.intercept.atomic_file import write_atomically

log = logging.getLogger("tgs.k8s.dra")
FILE = "checkpoint.json"
VERSION = 1
PENDING = "pending"
PREPARED = "prepared"


@dataclass
class JobEntry:
    name: str
    priority: str
    weight: int
    mem_quota: int | None
    gpus: list[str]                        # UUIDs, in the node's order


@dataclass
class ClaimEntry:
    namespace: str
    name: str
    state: str = PENDING
    jobs: list[JobEntry] = field(default_factory=list)
    devices: list[dict[str, Any]] = field(default_factory=list)   # request_names, pool_name,
    #                                                             device_name, cdi_device_ids


class CheckpointError(Exception):
    pass


class Checkpoint:
    def __init__(self, state_dir: str | Path) -> None:
        self.path = Path(state_dir) / FILE

    def load(self) -> dict[str, ClaimEntry]:
        """The claims recorded ({} without a file). A file that cannot be read is kept
        aside (<file>.bad) and reported: its claims' jobs stay in the controller."""
        try:
            raw = json.loads(self.path.read_text())
            if not isinstance(raw, dict) or raw.get("version") != VERSION:
                raise ValueError(f"not a version {VERSION} checkpoint")
            out = {}
            for uid, c in (raw.get("claims") or {}).items():
                jobs = [JobEntry(str(j["name"]), str(j["priority"]), int(j["weight"]),
                                 None if j["mem_quota"] is None else int(j["mem_quota"]),
                                 [str(u) for u in j["gpus"]]) for j in c.get("jobs") or []]
                out[str(uid)] = ClaimEntry(str(c["namespace"]), str(c["name"]),
                                           str(c.get("state", PENDING)), jobs,
                                           list(c.get("devices") or []))
            return out
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            bad = self.path.with_name(self.path.name + ".bad")
            try:
                os.replace(self.path, bad)
            except OSError:
                pass
            log.error("checkpoint %s unreadable (%s): kept as %s; the jobs of the claims it "
                      "held stay registered, each removed once its ResourceClaim is gone from "
                      "the API server (--gc-grace)", self.path, exc, bad)
            return {}

    def save(self, claims: dict[str, ClaimEntry]) -> None:
        data = {"version": VERSION, "claims": {uid: asdict(c) for uid, c in claims.items()}}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self.path, (json.dumps(data, indent=1) + "\n").encode(), 0o600)
        except OSError as exc:
            raise CheckpointError(f"cannot write {self.path}: {exc}") from exc


# ---------------------------------------------------------------- which claim a job is for
OWNERS_DIR = "jobs"
_JOB_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")


@dataclass(frozen=True)
class Owner:
    namespace: str
    name: str
    uid: str


class Owners:
    """<state dir>/jobs/<job>.json: the claim a job was made for. Best effort: a record
    that cannot be written or read only means that job is never removed by the driver's
    garbage collection."""

    def __init__(self, state_dir: str | Path) -> None:
        self.dir = Path(state_dir) / OWNERS_DIR

    def _path(self, job: str) -> Path | None:
        return self.dir / f"{job}.json" if _JOB_FILE.match(job) else None

    def write(self, job: str, owner: Owner) -> None:
        path = self._path(job)
        if path is None:
            return
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            write_atomically(path, (json.dumps(asdict(owner)) + "\n").encode(), 0o600)
        except OSError as exc:
            log.warning("cannot record the claim of job %s (%s): the job will not be "
                        "garbage-collected", job, exc)

    def get(self, job: str) -> Owner | None:
        path = self._path(job)
        if path is None:
            return None
        try:
            raw = json.loads(path.read_text())
            return Owner(str(raw["namespace"]), str(raw["name"]), str(raw["uid"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("record %s unreadable: %s", path, exc)
            return None

    def remove(self, job: str) -> None:
        path = self._path(job)
        if path is not None:
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                log.debug("cannot remove %s: %s", path, exc)

    def jobs(self) -> set[str]:
        """The jobs with a record."""
        try:
            return {p.name[:-len(".json")] for p in self.dir.iterdir()
                    if p.name.endswith(".json") and not p.name.startswith(".")}
        except OSError:
            return set()
