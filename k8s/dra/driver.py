"""The TGS DRA driver on one node: the kubelet plugin and the ResourceSlice publisher.

    <registrar dir>/<driver>-reg.sock   Registration (pluginregistration v1): the kubelet's
                                        plugin watcher finds it, GetInfo names the driver and
                                        the DRA socket, NotifyRegistrationStatus says the verdict
    <plugin dir>/dra.sock               DRAPlugin v1 and v1beta1 (the kubelet picks one)

NodePrepareResources, per claim: read the ResourceClaim from the API server (the kubelet
sends only its namespace, name and uid), take this driver's devices of its allocation (share
devices of this node's pool, slices.py), and per request of the claim register one TGS job
with the node controller: over the GPUs of its shares, with the claim's opaque config
(params.py: priority, weight, memory; a bad one is the claim's error and nothing is
registered). The answer names each device with its CDI IDs: the job's `tgs.io/gpu=<job>`,
whose spec (tools/cdi.py, from the injection plan as the device plugin writes it) mounts the
shim and the job's segment, plus the real GPU's hand-over (response.gpu_handoff).
NodeUnprepareResources unregisters the claim's jobs. Both are idempotent; the prepared claims
live in a checkpoint (checkpoint.py) so that a restart keeps them and their jobs.

Threads: the two gRPC servers, `poll` (the controller's status: GPUs, the slices, stale
checkpoint entries, prepared claims' jobs the controller lost) and `watch` (serves the sockets
again when they are removed, waits for the kubelet's registration directory).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from tgs.controller import paths
from tgs.controller.client import Client, ClientError, ControllerUnavailable
from tgs.intercept.sizes import format_size
from tgs.tools import cdi
from tgs.tools.injection import InjectError, make_plan

from .. import health, response
from ..config import Config as DevicePluginConfig
from ..jobs import Jobs
from ..shares import Gpu
from . import checkpoint as ckpt
from . import params, slices
from .api import PLUGIN_TYPE, SERVICES, dra, dra1, dra1_grpc, dra_grpc, reg, reg_grpc
from .checkpoint import Checkpoint, CheckpointError, ClaimEntry, JobEntry
from .config import DriverConfig
from .kube import Kube, KubeError

log = logging.getLogger("tgs.k8s.dra")
JOB_PREFIX = "dra-"


def job_name(claim_uid: str, request: str) -> str:
    """The TGS job of one request of a claim: the same claim and request always give the
    same name (a repeated prepare finds it), distinct ones differ. `dra-`, not the device
    plugin's `k8s-`: that plugin's garbage collection removes k8s-* jobs no pod holds."""
    digest = hashlib.sha256(f"{claim_uid}\n{request}".encode()).hexdigest()
    return f"{JOB_PREFIX}{digest[:16]}"


class ClaimError(Exception):
    """This claim cannot be prepared: the message is its error in the kubelet's answer."""


class Driver:
    def __init__(self, cfg: DriverConfig) -> None:
        self.cfg = cfg
        self.kube = Kube(cfg.api) if cfg.api is not None else None
        self.publisher = slices.Publisher(self.kube, cfg.node_name, cfg.driver,
                                          cfg.slice_interval) \
            if self.kube is not None and cfg.publish else None
        self.checkpoint = Checkpoint(cfg.state_dir)
        self.claims: dict[str, ClaimEntry] = {}
        self._lock = threading.Lock()                # the claims, the checkpoint
        self._glock = threading.Lock()               # what the controller said
        self._gpus: list[Gpu] = []
        self._sim = False
        self._dirs: list[str] = []
        self._stale: set[str] = set()                # pending at start: their jobs go
        self._last_resync = -float("inf")
        self._orphans_said = False
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._servers: dict[str, grpc.Server] = {}
        self._waited: str | None = None
        self.health = health.Hysteresis()
        self.registered: bool | None = None          # the kubelet's verdict
        self.registration_error = ""
        # the device plugin's job files (CDI spec, generated ld.so.preload): removed by its code
        self._files = Jobs(DevicePluginConfig(plugin_dir=cfg.plugin_dir, cdi_dir=cfg.cdi_dir,
                                              pod_resources=None), self._call)

    # ------------------------------------------------------------ controller
    def _call(self, fn: str, *args: Any, **kw: Any) -> Any:
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
            st = dict(self._call("status"))
            devs = st.get("devices") or []
            gpus = [Gpu(int(d["index"]), str(d["uuid"]), int(d["mem_total"])) for d in devs]
        except (ControllerUnavailable, ClientError, KeyError, TypeError, ValueError) as exc:
            self.health.failed()
            log.log(logging.WARNING if self.health.failures == self.health.after
                    else logging.DEBUG, "controller not answering (%d looks in a row): %s",
                    self.health.failures, exc)
            return None
        self.health.succeeded()
        with self._glock:
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
        with self._glock:
            gpus = list(self._gpus)
        if not gpus and self.poll() is not None:
            with self._glock:
                gpus = list(self._gpus)
        return gpus

    # ------------------------------------------------------------ claims
    def prepare(self, claims: list[tuple[str, str, str]]) -> dict[str, tuple[list[dict], str]]:
        """(namespace, uid, name) per claim -> (devices, error) per uid."""
        out: dict[str, tuple[list[dict], str]] = {}
        for ns, uid, name in claims:
            if uid in out:
                continue
            with self._lock:
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
            with self._lock:
                try:
                    self._unprepare(uid)
                    out[uid] = ""
                except ClaimError as exc:
                    log.warning("claim %s/%s (%s) not unprepared: %s", ns, name, uid, exc)
                    out[uid] = str(exc)
        return out

    def _save(self) -> None:
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
        plan = self._plan(ns, uid, name)
        if not plan:
            return []                                # no device of this driver here
        entry = ClaimEntry(ns, name, ckpt.PENDING, [j for j, _ in plan], [])
        self.claims[uid] = entry                     # pending: undone at start if we die
        try:
            self._save()
        except ClaimError:
            self._restore(uid, old)
            raise
        made: list[str] = []
        try:
            devices: list[dict] = []
            for job, results in plan:
                obj, new = self._ensure(job)
                if new:
                    made.append(job.name)
                cdi_name = self._materialize(obj)
                devices += self._devices(job, results, cdi_name)
            entry.state, entry.devices = ckpt.PREPARED, devices
            self._save()
        except (ControllerUnavailable, ClientError, InjectError, OSError, ClaimError) as exc:
            self._files.undo(made)
            for n in made:
                self._files.forget(n)
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

    def _plan(self, ns: str, uid: str, name: str) -> list[tuple[JobEntry, list[dict]]]:
        """The jobs of a claim (one per request with devices of this driver), each with its
        allocation results; ClaimError for anything that stops the claim, before any job is
        registered."""
        if self.kube is None:
            raise ClaimError("no API server to read the ResourceClaim from")
        try:
            claim = self.kube.get_claim(ns, name)
        except KubeError as exc:
            raise ClaimError(f"reading ResourceClaim {ns}/{name}: {exc}") from None
        meta = claim.get("metadata") or {}
        if meta.get("uid") != uid:
            raise ClaimError(f"ResourceClaim {ns}/{name} has uid {meta.get('uid')}, not {uid} "
                             "(deleted and created again?)")
        alloc = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
        results = [r for r in alloc.get("results") or []
                   if isinstance(r, dict) and r.get("driver") == self.cfg.driver]
        if not results:
            return []
        gpus = self.gpus()
        if not gpus:
            raise ClaimError("tgs-controller: no GPU list yet (is it running?)")
        known = slices.device_map(gpus, self.cfg.nshares)
        by_request: dict[str, list[dict]] = {}
        seen: set[str] = set()
        for r in results:
            dev, pool = str(r.get("device")), str(r.get("pool"))
            if pool != self.cfg.node_name:
                raise ClaimError(f"device {dev} is in pool {pool}, not this node's "
                                 f"({self.cfg.node_name})")
            if dev not in known:
                raise ClaimError(f"device {dev} is not published by this node (GPUs: "
                                 f"{', '.join(g.uuid for g in gpus)}; {self.cfg.nshares} "
                                 "shares each)")
            if r.get("adminAccess"):
                raise ClaimError(f"device {dev}: admin access is not supported by {PLUGIN_TYPE} "
                                 f"{self.cfg.driver}")
            if dev in seen:
                raise ClaimError(f"device {dev} is allocated twice in the claim")
            seen.add(dev)
            by_request.setdefault(str(r.get("request")), []).append(r)
        configs = [c for c in alloc.get("config") or [] if isinstance(c, dict)]
        plan = []
        for request, rs in by_request.items():
            count: dict[str, int] = {}
            for r in rs:
                g, _ = known[r["device"]]
                count[g.uuid] = count.get(g.uuid, 0) + 1
            held = sorted(((g, count[g.uuid]) for g in gpus if g.uuid in count),
                          key=lambda gn: gn[0].index)
            try:
                s = params.settings(params.effective(configs, request, self.cfg.driver), held,
                                    self.cfg.nshares,
                                    within_shares=not self.cfg.memory_above_shares,
                                    namespace=ns,
                                    production_namespaces=self.cfg.production_namespaces)
            except params.ConfigError as exc:
                raise ClaimError(f"request {request}: {exc}") from None
            plan.append((JobEntry(job_name(uid, request), s.priority, s.weight, s.mem_quota,
                                  [g.uuid for g, _ in held]), rs))
        return plan

    def _ensure(self, job: JobEntry) -> tuple[dict[str, Any], bool]:
        """Register the job, or find it registered: (the job object, whether made here)."""
        dev: str | list[str] = job.gpus[0] if len(job.gpus) == 1 else list(job.gpus)
        try:
            reply = self._call("register", job.name, priority=job.priority, weight=job.weight,
                               mem_quota=job.mem_quota, device=dev)
            return dict(reply["job"]), True
        except ClientError as exc:
            if exc.code != "exists":
                raise
        for j in self._call("list"):
            if j["name"] == job.name:
                return dict(j), False
        raise ClientError("not_found", f"job {job.name} vanished while being looked up")

    def _materialize(self, job: dict[str, Any]) -> str:
        """Write the job's CDI spec (and the files it names): its CDI device name."""
        sim = self.cfg.sim if self.cfg.sim is not None else self._sim
        plan = make_plan(job, sim=sim, preload_file=self.cfg.preload_file)
        if self.cfg.host_lib_dir:
            keep = [*self._dirs, str(paths.default_runtime_dir())]   # hostPaths already
            plan = response.relocate(plan, self.cfg.host_lib_dir, keep)
        env, _ = response.gpu_handoff(self._handoff(), *self._uuids(job))
        plan.env.update(env)
        cdi.write(plan, self.cfg.cdi_dir)
        return f"{cdi.KIND}={plan.job}"

    def _handoff(self) -> str:
        sim = self.cfg.sim if self.cfg.sim is not None else self._sim
        return self.cfg.gpu_handoff or ("none" if sim else "env")

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
        known = slices.device_map(self.gpus(), self.cfg.nshares)
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
            have = {str(j["name"]): dict(j) for j in self._call("list")}
            for job in entry.jobs:
                obj = have.get(job.name) or self._ensure(job)[0]
                self._materialize(obj)
        except (ControllerUnavailable, ClientError, InjectError, OSError) as exc:
            missing = [j.name for j in entry.jobs
                       if not cdi.spec_path(self.cfg.cdi_dir, j.name).exists()]
            if missing:
                raise ClaimError(f"jobs {', '.join(missing)}: cannot write their CDI specs: "
                                 f"{exc}") from None
            log.debug("claim %s/%s: answered from the checkpoint (%s)", entry.namespace,
                      entry.name, exc)

    def _unprepare(self, uid: str) -> None:
        entry = self.claims.get(uid)
        if entry is None:
            return                                   # unknown: nothing to undo
        for job in entry.jobs:
            try:
                self._call("unregister", job.name)
            except ClientError as exc:
                if exc.code != "not_found":
                    raise ClaimError(f"tgs-controller: {exc}") from None
            except ControllerUnavailable as exc:
                raise ClaimError(f"tgs-controller: {exc}") from None
            self._files.forget(job.name)
        del self.claims[uid]
        self._save()
        log.info("claim %s/%s (%s): jobs %s removed", entry.namespace, entry.name, uid,
                 ", ".join(j.name for j in entry.jobs) or "none")

    # ------------------------------------------------------------ housekeeping
    def load(self) -> None:
        """The checkpoint's claims; pending ones are undone by the poll loop."""
        self.claims = self.checkpoint.load()
        self._stale = {u for u, c in self.claims.items() if c.state != ckpt.PREPARED}
        prepared = len(self.claims) - len(self._stale)
        if self.claims:
            log.info("checkpoint %s: %d prepared claim(s), %d pending", self.checkpoint.path,
                     prepared, len(self._stale))

    def housekeeping(self, now: float | None = None) -> None:
        """Undo claims left pending by a previous run; register again the jobs of prepared
        claims that the controller no longer has (every resync interval); say once which
        dra-* jobs no claim holds."""
        now = time.monotonic() if now is None else now
        for uid in sorted(self._stale):
            with self._lock:
                entry = self.claims.get(uid)
                if entry is not None and entry.state == ckpt.PREPARED:
                    self._stale.discard(uid)         # prepared again meanwhile
                    continue
                try:
                    self._unprepare(uid)
                    self._stale.discard(uid)
                    log.info("claim %s: left pending by the previous run, undone", uid)
                except ClaimError as exc:
                    log.debug("pending claim %s: not undone yet: %s", uid, exc)
        if now - self._last_resync < self.cfg.resync_interval:
            return
        self._last_resync = now
        try:
            have = {str(j["name"]) for j in self._call("list")}
        except (ControllerUnavailable, ClientError) as exc:
            log.debug("no resync: %s", exc)
            return
        with self._lock:
            for entry in list(self.claims.values()):
                if entry.state != ckpt.PREPARED:
                    continue
                for job in entry.jobs:
                    if job.name in have:
                        continue
                    try:
                        self._materialize(self._ensure(job)[0])
                        log.warning("job %s of claim %s/%s was gone from the controller: "
                                    "registered again", job.name, entry.namespace, entry.name)
                    except (ControllerUnavailable, ClientError, InjectError, OSError) as exc:
                        log.warning("job %s of claim %s/%s is gone from the controller and "
                                    "cannot be registered again: %s", job.name,
                                    entry.namespace, entry.name, exc)
            ours = {j.name for c in self.claims.values() for j in c.jobs}
        orphans = sorted(n for n in have if n.startswith(JOB_PREFIX) and n not in ours)
        if orphans and not self._orphans_said:
            self._orphans_said = True
            log.warning("jobs %s are in no prepared claim of this driver (a lost checkpoint?):"
                        " left alone; tgsctl rm them once no pod uses them", ", ".join(orphans))

    # ------------------------------------------------------------ gRPC services
    def _serve(self, key: str, path: Path, add: Callable[[grpc.Server], None]) -> None:
        old = self._servers.pop(key, None)
        if old is not None:
            old.stop(0)
        path.unlink(missing_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        add(server)
        server.add_insecure_port(f"unix://{path}")
        server.start()
        self._servers[key] = server
        log.info("serving %s on %s", key, path)

    def _add_dra(self, server: grpc.Server) -> None:
        dra1_grpc.add_DRAPluginServicer_to_server(_DRAService(self, dra1), server)
        dra_grpc.add_DRAPluginServicer_to_server(_DRAService(self, dra), server)

    def _add_registration(self, server: grpc.Server) -> None:
        reg_grpc.add_RegistrationServicer_to_server(_Registration(self), server)

    def watch_once(self) -> None:
        """Serve the DRA socket, then the registration socket (the kubelet calls as soon as
        it sees the latter), each again when it was removed."""
        sock = self.cfg.dra_socket
        if "dra" not in self._servers or not sock.exists():
            sock.parent.mkdir(parents=True, exist_ok=True)
            self._serve("dra", sock, self._add_dra)
        reg_dir = self.cfg.registrar_dir
        if not reg_dir.is_dir():                     # the kubelet's: never created here
            self._waiting(f"no directory {reg_dir} (the kubelet's plugin watcher; "
                          "--registrar-dir)")
            return
        self._waited = None
        rsock = self.cfg.registration_socket
        if "registration" not in self._servers or not rsock.exists():
            self.registered = None
            self._serve("registration", rsock, self._add_registration)

    def _waiting(self, why: str) -> None:
        level = logging.DEBUG if self._waited == why else logging.WARNING
        self._waited = why
        log.log(level, "waiting for the kubelet: %s", why)

    def _loop(self, every: float, step: Callable[[], Any]) -> None:
        while not self._stop.is_set():
            try:
                step()
            except Exception:                       # a loop of the daemon never dies
                log.exception("unexpected error")
            self._stop.wait(every)

    def _poll_step(self) -> None:
        self.poll()
        self.housekeeping()

    def start(self) -> None:
        self.load()
        for every, step in ((self.cfg.health_interval, self._poll_step),
                            (self.cfg.watch_interval, self.watch_once)):
            t = threading.Thread(target=self._loop, args=(every, step), daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        """Stop serving and remove the slices; the prepared claims' jobs stay (a restarted
        driver finds them in its checkpoint)."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        for key in ("registration", "dra"):          # the kubelet first stops finding us
            server = self._servers.pop(key, None)
            if server is not None:
                server.stop(1).wait(5)
        for path in (self.cfg.registration_socket, self.cfg.dra_socket):
            path.unlink(missing_ok=True)
        if self.publisher is not None:
            self.publisher.delete()


class _DRAService:
    """DRAPlugin for one API version (`msgs`: that version's messages)."""

    def __init__(self, driver: Driver, msgs: Any) -> None:
        self.driver = driver
        self.msgs = msgs

    def NodePrepareResources(self, request: Any, context: Any) -> Any:  # noqa: N802
        m = self.msgs
        done = self.driver.prepare([(c.namespace, c.uid, c.name) for c in request.claims])
        resp = m.NodePrepareResourcesResponse()
        for uid, (devices, error) in done.items():
            r = resp.claims[uid]
            if error:
                r.error = error
            else:
                r.devices.extend(m.Device(**d) for d in devices)
        return resp

    def NodeUnprepareResources(self, request: Any, context: Any) -> Any:  # noqa: N802
        done = self.driver.unprepare([(c.namespace, c.uid, c.name) for c in request.claims])
        resp = self.msgs.NodeUnprepareResourcesResponse()
        for uid, error in done.items():
            resp.claims[uid].error = error
        return resp


class _Registration(reg_grpc.RegistrationServicer):
    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    def GetInfo(self, request: Any, context: Any) -> Any:  # noqa: N802
        cfg = self.driver.cfg
        return reg.PluginInfo(type=PLUGIN_TYPE, name=cfg.driver, endpoint=str(cfg.dra_socket),
                              supported_versions=list(SERVICES))

    def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:  # noqa: N802
        d = self.driver
        d.registered, d.registration_error = request.plugin_registered, request.error
        if request.plugin_registered:
            log.info("registered with the kubelet as %s %s", PLUGIN_TYPE, d.cfg.driver)
        else:
            log.error("the kubelet refused the registration: %s", request.error or "no reason")
        return reg.RegistrationStatusResponse()

