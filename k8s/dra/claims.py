"""The claims of this node: NodePrepareResources and NodeUnprepareResources.

Prepare, per claim: its jobs (plan.py: the ResourceClaim read from the API server), each
registered with the node controller (or found registered), its CDI spec written (tools/cdi.py,
from the injection plan as the device plugin writes it: the shim and the job's segment, plus
the real GPU's hand-over, response.gpu_handoff), and the answer's devices with their CDI IDs.
Unprepare unregisters the claim's jobs. Both are idempotent; the prepared claims live in the
checkpoint (checkpoint.py): `pending` before any job is registered, `prepared` with the
answer, which a repeated prepare gets again. Each job's claim is also recorded on its own
(checkpoint.Owners), for the garbage collection of jobs a lost checkpoint leaves (orphans.py).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from tgs.client import ClientError, ControllerUnavailable, paths
from tgs.intercept.sizes import format_size
from tgs.tools import cdi
from tgs.tools.injection import InjectError, make_plan

from .. import response
from ..config import Config as DevicePluginConfig
from ..jobs import Jobs
from . import checkpoint as ckpt
from . import slices
from .checkpoint import Checkpoint, CheckpointError, ClaimEntry, JobEntry, Owner, Owners
from .config import DriverConfig
from .kube import Kube
from .node import NodeController
from .plan import ClaimError, plan

log = logging.getLogger("tgs.k8s.dra")


class Claims:
    def __init__(self, cfg: DriverConfig, kube: Kube | None, node: NodeController) -> None:
        self.cfg = cfg
        self.kube = kube
        self.node = node
        self.checkpoint = Checkpoint(cfg.state_dir)
        self.owners = Owners(cfg.state_dir)
        self.claims: dict[str, ClaimEntry] = {}
        self.lock = threading.Lock()                 # the claims, the checkpoint
        # the device plugin's job files (CDI spec, generated ld.so.preload): removed by its code
        self.files = Jobs(DevicePluginConfig(plugin_dir=cfg.plugin_dir, cdi_dir=cfg.cdi_dir,
                                             pod_resources=None), node.call)

    def load(self) -> set[str]:
        """The checkpoint's claims; the uids of those left pending (to be undone)."""
        self.claims = self.checkpoint.load()
        stale = {u for u, c in self.claims.items() if c.state != ckpt.PREPARED}
        for uid, c in self.claims.items():           # a checkpoint older than the records
            for job in c.jobs:
                if self.owners.get(job.name) is None:
                    self.owners.write(job.name, Owner(c.namespace, c.name, uid))
        if self.claims:
            log.info("checkpoint %s: %d prepared claim(s), %d pending", self.checkpoint.path,
                     len(self.claims) - len(stale), len(stale))
        return stale

    # ------------------------------------------------------------ the kubelet's calls
    def prepare(self, claims: list[tuple[str, str, str]]) -> dict[str, tuple[list[dict], str]]:
        """(namespace, uid, name) per claim -> (devices, error) per uid."""
        out: dict[str, tuple[list[dict], str]] = {}
        for ns, uid, name in claims:
            if uid in out:
                continue
            with self.lock:
                try:
                    out[uid] = (self._prepare(ns, uid, name), "")
                except ClaimError as exc:
                    log.warning("claim %s/%s (%s) not prepared: %s", ns, name, uid, exc)
                    out[uid] = ([], str(exc))
        return out

    def unprepare(self, claims: list[tuple[str, str, str]]) -> dict[str, str]:
        """(namespace, uid, name) per claim -> error ('' when done) per uid."""
        out: dict[str, str] = {}
        for ns, uid, name in claims:
            if uid in out:
                continue
            with self.lock:
                try:
                    self.unprepare_one(uid)
                    out[uid] = ""
                except ClaimError as exc:
                    log.warning("claim %s/%s (%s) not unprepared: %s", ns, name, uid, exc)
                    out[uid] = str(exc)
        return out

    # ------------------------------------------------------------ with the lock held
    def save(self) -> None:
        try:
            self.checkpoint.save(self.claims)
        except CheckpointError as exc:
            raise ClaimError(str(exc)) from None

    def _prepare(self, ns: str, uid: str, name: str) -> list[dict]:
        if not uid or not name or not ns:
            raise ClaimError("the claim's namespace, name and uid are all required")
        old = self.claims.get(uid)
        if old is not None and old.state == ckpt.PREPARED:
            self._refresh(old)                       # the same answer, its files in place
            return old.devices
        jobs = plan(self.cfg, self.kube, self.node, ns, uid, name)
        if not jobs:
            return []                                # no device of this driver here
        entry = ClaimEntry(ns, name, ckpt.PENDING, [j for j, _ in jobs], [])
        self.claims[uid] = entry                     # pending: undone at start if we die
        try:
            self.save()
        except ClaimError:
            self._restore(uid, old)
            raise
        for job in entry.jobs:                       # stale ones pruned by reconcile.py
            self.owners.write(job.name, Owner(ns, name, uid))
        made: list[str] = []
        try:
            devices: list[dict] = []
            for job, results in jobs:
                obj, new = self.ensure(job)
                if new:
                    made.append(job.name)
                cdi_name = self.materialize(obj)
                devices += self._devices(job, results, cdi_name)
            entry.state, entry.devices = ckpt.PREPARED, devices
            self.save()
        except (ControllerUnavailable, ClientError, InjectError, OSError, ClaimError) as exc:
            self.files.undo(made)
            for n in made:
                self.files.forget(n)
            self._restore(uid, old)
            try:
                self.checkpoint.save(self.claims)
            except CheckpointError as exc2:
                log.error("%s", exc2)
            if isinstance(exc, (ControllerUnavailable, ClientError)):
                raise ClaimError(f"tgs-controller: {exc}") from None
            if isinstance(exc, ClaimError):
                raise
            raise ClaimError(f"injection: {exc}") from None
        for job in entry.jobs:
            log.info("claim %s/%s (%s): job %s on %s, %s, weight %d, memory %s", ns, name,
                     uid, job.name, ",".join(job.gpus), job.priority, job.weight,
                     format_size(job.mem_quota))
        return devices

    def _restore(self, uid: str, old: ClaimEntry | None) -> None:
        """A prepare that failed: the claim as it was (an entry left pending by a previous
        run stays, for the start-up clean-up to undo its jobs)."""
        if old is not None:
            self.claims[uid] = old
        else:
            self.claims.pop(uid, None)

    def ensure(self, job: JobEntry) -> tuple[dict[str, Any], bool]:
        """Register the job, or find it registered: (the job object, whether made here)."""
        call = self.node.call
        dev: str | list[str] = job.gpus[0] if len(job.gpus) == 1 else list(job.gpus)
        try:
            reply = call("register", job.name, priority=job.priority, weight=job.weight,
                         mem_quota=job.mem_quota, device=dev)
            return dict(reply["job"]), True
        except ClientError as exc:
            if exc.code != "exists":
                raise
        for j in call("list"):
            if j["name"] == job.name:
                return dict(j), False
        raise ClientError("not_found", f"job {job.name} vanished while being looked up")

    def materialize(self, job: dict[str, Any]) -> str:
        """Write the job's CDI spec (and the files it names): its CDI device name."""
        plan_ = make_plan(job, sim=self.node.sim, preload_file=self.cfg.preload_file)
        if self.cfg.host_lib_dir:
            keep = [*self.node.dirs, str(paths.default_runtime_dir())]   # hostPaths already
            plan_ = response.relocate(plan_, self.cfg.host_lib_dir, keep)
        env, _ = response.gpu_handoff(self._handoff(), *self._uuids(job))
        plan_.env.update(env)
        cdi.write(plan_, self.cfg.cdi_dir)
        return f"{cdi.KIND}={plan_.job}"

    def _handoff(self) -> str:
        return self.cfg.gpu_handoff or ("none" if self.node.sim else "env")

    @staticmethod
    def _uuids(job: dict[str, Any]) -> list[str]:
        parts = job.get("devices") or []
        return [str(p["device_uuid"]) for p in parts] if parts else [str(job["device_uuid"])]

    def _devices(self, job: JobEntry, results: list[dict], cdi_name: str) -> list[dict]:
        """The answer's devices of one job: the job's CDI device on its first device, each
        GPU's CDI hand-over (--gpu-handoff=cdi) on the first device of that GPU (a device
        named twice would have its edits applied twice)."""
        _, gpu_cdi = response.gpu_handoff(self._handoff(), *job.gpus)
        first_of_gpu: dict[str, str] = dict(zip(job.gpus, gpu_cdi))
        known = slices.device_map(self.node.gpus(), self.cfg.nshares)
        out = []
        for i, r in enumerate(results):
            request = str(r["request"])
            names = [request] + ([request.split("/", 1)[0]] if "/" in request else [])
            ids = [cdi_name] if i == 0 else []
            uuid = known[r["device"]][0].uuid
            if uuid in first_of_gpu:
                ids.append(first_of_gpu.pop(uuid))
            out.append({"request_names": names, "pool_name": str(r["pool"]),
                        "device_name": str(r["device"]), "cdi_device_ids": ids})
        return out

    def _refresh(self, entry: ClaimEntry) -> None:
        """A prepared claim asked for again (a kubelet restart, a node reboot): its jobs
        registered and its CDI specs written (/var/run/cdi does not survive a reboot). With
        the controller down the answer stands if the specs are there."""
        try:
            have = {str(j["name"]): dict(j) for j in self.node.call("list")}
            for job in entry.jobs:
                obj = have.get(job.name) or self.ensure(job)[0]
                self.materialize(obj)
        except (ControllerUnavailable, ClientError, InjectError, OSError) as exc:
            missing = [j.name for j in entry.jobs
                       if not cdi.spec_path(self.cfg.cdi_dir, j.name).exists()]
            if missing:
                raise ClaimError(f"jobs {', '.join(missing)}: cannot write their CDI specs: "
                                 f"{exc}") from None
            log.debug("claim %s/%s: answered from the checkpoint (%s)", entry.namespace,
                      entry.name, exc)

    def unprepare_one(self, uid: str) -> None:
        """Unregister the claim's jobs and forget it (an unknown claim: nothing to do)."""
        entry = self.claims.get(uid)
        if entry is None:
            return
        for job in entry.jobs:
            try:
                self.node.call("unregister", job.name)
            except ClientError as exc:
                if exc.code != "not_found":
                    raise ClaimError(f"tgs-controller: {exc}") from None
            except ControllerUnavailable as exc:
                raise ClaimError(f"tgs-controller: {exc}") from None
            self.files.forget(job.name)
            self.owners.remove(job.name)
        del self.claims[uid]
        self.save()
        log.info("claim %s/%s (%s): jobs %s removed", entry.namespace, entry.name, uid,
                 ", ".join(j.name for j in entry.jobs) or "none")
