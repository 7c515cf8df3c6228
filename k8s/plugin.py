"""The device plugin: a DevicePlugin gRPC server on a unix socket in the kubelet's
device-plugins directory, its registration, and the loops that keep both current.

Threads: the gRPC server's pool (one worker per ListAndWatch stream, plus the calls),
`health` (polls the controller: GPUs, their health with hysteresis (health.py), the node
label, garbage collection of the jobs of gone pods, see jobs.py and gc.py)
and `watch` (re-registers when the kubelet's socket is recreated, restarts the server
when its own socket is removed, as a restarting kubelet does)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from tgs.client import Client, ClientError, ControllerUnavailable, paths
from tgs.tools.injection import InjectError, make_plan

from . import annotations as ann
from . import health, podinfo, response, shares, signals
from .api import API_VERSION, dp, dp_grpc
from .config import Config
from .daemon import start_loops
from .jobs import Jobs
from .shares import Gpu, ShareError

log = logging.getLogger("tgs.k8s")
KUBELET_SOCKET = "kubelet.sock"
# where other distributions keep the kubelet's device-plugins directory (a hint for --plugin-dir)
OTHER_PLUGIN_DIRS = ("/var/snap/microk8s/common/var/lib/kubelet/device-plugins",   # MicroK8s
                     "/var/lib/k0s/kubelet/device-plugins")                         # k0s


def plugin_dir_hint() -> str:
    """Why the kubelet may not be found, and where it may be instead (one clause)."""
    found = [d for d in OTHER_PLUGIN_DIRS if Path(d, KUBELET_SOCKET).exists()]
    if found:
        return f"this node's kubelet listens in {found[0]}: start with --plugin-dir {found[0]}"
    return (f"no kubelet on this node yet, or its device-plugins directory is elsewhere "
            f"(MicroK8s: {OTHER_PLUGIN_DIRS[0]}, k0s: {OTHER_PLUGIN_DIRS[1]}; --plugin-dir)")


class Plugin(dp_grpc.DevicePluginServicer):
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self._cond = threading.Condition()
        self._gpus: list[Gpu] = []
        self._healthy: dict[str, bool] = {}
        self._sim = False
        self._dirs: list[str] = []
        self._version = 0                          # bumped on every change of the list
        self._stop = threading.Event()
        self._server: grpc.Server | None = None
        self._kubelet_id: tuple[int, int, int] | None = None     # registered with
        self._seen_kubelet: tuple[int, int, int] | None = None
        self._failed_for: tuple[int, int, int] | None = None
        self._waited: str | None = None                  # why we wait for the kubelet (said once)
        self._threads: list[threading.Thread] = []
        self.registrations = 0                     # successful Register calls (for tests)
        self._last_gc = 0.0
        self._label: int | None = None             # the label value last published
        self._label_t = -float("inf")
        self.jobs = Jobs(cfg, lambda *a, **kw: self._call(*a, **kw))
        self.health = health.Hysteresis(cfg.unhealthy_after)

    # ------------------------------------------------------------ controller
    def _client(self) -> Client:
        return Client(endpoint=self.cfg.controller, runtime_dir=self.cfg.runtime_dir,
                      timeout=self.cfg.timeout)

    def _call(self, fn: str, *args: Any, **kw: Any) -> Any:
        with self._client() as c:
            why = health.refused(c.endpoint)        # a dead controller: no need to wait
            if why is not None:
                raise ControllerUnavailable(why)
            return getattr(c, fn)(*args, **kw)

    def _status(self) -> dict[str, Any]:
        return dict(self._call("status"))

    def poll_health(self) -> None:
        """One look at the controller: GPUs present and the controller up, or not (once
        cfg.unhealthy_after looks in a row failed: one lost poll changes nothing)."""
        try:
            st = self._status()
            devs = st.get("devices") or []
            seen = {str(d["uuid"]): Gpu(int(d["index"]), str(d["uuid"]), int(d["mem_total"]))
                    for d in devs}
            sim = bool(devs) and all(d.get("kind") == "sim" for d in devs)
            dirs = [str(st[k]) for k in ("segment_dir", "runtime_dir", "state_dir") if st.get(k)]
        except (ControllerUnavailable, ClientError, KeyError, TypeError, ValueError) as exc:
            down = self.health.failed()
            log.log(logging.WARNING if self.health.failures == self.health.after
                    else logging.DEBUG, "controller not answering (%d polls in a row%s): %s",
                    self.health.failures, ", shares Unhealthy" if down else "", exc)
            if not down:
                return
            seen, sim, dirs, st = None, self._sim, self._dirs, None
        if st is not None:
            self.health.succeeded()
            self._publish(st)
        with self._cond:
            gpus = list(self._gpus)
            known = {g.uuid for g in gpus}
            if seen:
                gpus += [g for u, g in seen.items() if u not in known]
            healthy = {g.uuid: bool(seen) and g.uuid in seen for g in gpus}
            if gpus != self._gpus or healthy != self._healthy:
                for g in gpus:
                    if healthy[g.uuid] != self._healthy.get(g.uuid):
                        log.info("GPU %s: %s", g.uuid,
                                 shares.HEALTHY if healthy[g.uuid] else shares.UNHEALTHY)
                self._gpus, self._healthy = gpus, healthy
                self._version += 1
                self._cond.notify_all()
            self._sim, self._dirs = sim, dirs

    def _publish(self, status: dict[str, Any]) -> None:
        """The node's placement label, when it changed and not more often than asked."""
        if not self.cfg.node_name or self.cfg.api is None:
            return
        value = signals.idle_pct(status)
        now = time.monotonic()
        if value is None or value == self._label or now - self._label_t < self.cfg.label_interval:
            return
        self._label_t = now
        try:
            self.cfg.api.label_node(self.cfg.node_name, {signals.LABEL: str(value)})
            self._label = value
        except podinfo.PodInfoError as exc:
            log.warning("cannot label node %s: %s", self.cfg.node_name, exc)

    def devices(self) -> list[dp.Device]:
        with self._cond:
            return [dp.Device(ID=shares.share_id(g.uuid, k),
                              health=shares.HEALTHY if self._healthy.get(g.uuid)
                              else shares.UNHEALTHY)
                    for g in self._gpus for k in range(self.cfg.nshares)]

    # ------------------------------------------------------------ DevicePlugin service
    def GetDevicePluginOptions(self, request: Any, context: Any) -> Any:
        return dp.DevicePluginOptions(pre_start_required=True,
                                      get_preferred_allocation_available=True)

    def ListAndWatch(self, request: Any, context: Any) -> Iterator[Any]:
        seen = -1
        while not self._stop.is_set() and context.is_active():
            with self._cond:
                self._cond.wait_for(lambda s=seen: self._version != s or self._stop.is_set(),
                                    timeout=0.5)
                if self._stop.is_set() or self._version == seen or not self._gpus:
                    continue
                seen = self._version
            yield dp.ListAndWatchResponse(devices=self.devices())

    def GetPreferredAllocation(self, request: Any, context: Any) -> Any:
        try:
            gpus = self._gpus_now()
            self._check_containers(len(request.container_requests), gpus)
            for r in request.container_requests:
                self._check_preferred(r, gpus)
        except ShareError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return dp.PreferredAllocationResponse(container_responses=[
            dp.ContainerPreferredAllocationResponse(deviceIDs=shares.preferred(
                r.available_deviceIDs, r.must_include_deviceIDs, r.allocation_size))
            for r in request.container_requests])

    def Allocate(self, request: Any, context: Any) -> Any:
        done: list[str] = []
        out = []
        try:
            # every container checked before any job is registered: a bad one costs nothing
            gpus_now, n = self._gpus_now(), len(request.container_requests)
            self._check_containers(n, gpus_now)
            plan = []
            for i, c in enumerate(request.container_requests):
                ids = list(c.devices_ids)
                what = "the container request" if n == 1 else f"container request {i + 1}/{n}"
                plan.append((ids, *self._job_for(ids, gpus_now, what)))
            for ids, name, gpus in plan:
                job, made = self.jobs.ensure(name, gpus)
                if made:                            # undone if a later container fails
                    done.append(name)
                out.append(self._response(job, [g for g, _ in gpus]))
                log.info("allocated %s on %s to job %s", sorted(ids),
                         ",".join(g.uuid for g, _ in gpus), name)
        except ShareError as exc:
            self.jobs.undo(done)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except (ControllerUnavailable, ClientError) as exc:
            self.jobs.undo(done)
            context.abort(grpc.StatusCode.UNAVAILABLE, f"tgs-controller: {exc}")
        except (InjectError, OSError) as exc:
            self.jobs.undo(done)
            context.abort(grpc.StatusCode.INTERNAL, f"injection: {exc}")
        return dp.AllocateResponse(container_responses=out)

    def PreStartContainer(self, request: Any, context: Any) -> Any:
        ids = list(request.devices_ids)
        try:
            name, gpus = self._job_for(ids, self._gpus_now(), "the PreStartContainer request")
            settings = self.jobs.settings(ids, gpus)
            self.jobs.ensure(name, gpus)                # again, if it was lost meanwhile
            self._call("set", name, **settings.changes())
            log.info("job %s: %s", name, settings)
        except (ShareError, ann.AnnotationError) as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except (ControllerUnavailable, ClientError) as exc:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"tgs-controller: {exc}")
        return dp.PreStartContainerResponse()

    # ------------------------------------------------------------ jobs
    def _gpus_now(self) -> list[Gpu]:
        with self._cond:
            return list(self._gpus)

    def _job_for(self, ids: list[str], gpus: list[Gpu],
                 what: str) -> tuple[str, list[tuple[Gpu, int]]]:
        """The job for a container's IDs; ShareError unless they are advertised shares."""
        shares.check_ids(ids, gpus, self.cfg.nshares, what=what)
        return response.job_name(ids), shares.gpus_of(ids, gpus)

    def _check_containers(self, n: int, gpus: list[Gpu]) -> None:
        # each container holds at least one share, and the kubelet sends one per call
        if n > len(gpus) * self.cfg.nshares:
            raise ShareError(f"{n} container requests in one call: this plugin advertises "
                             f"{len(gpus) * self.cfg.nshares} shares")

    def _check_preferred(self, r: Any, gpus: list[Gpu]) -> None:
        avail, must = list(r.available_deviceIDs), list(r.must_include_deviceIDs)
        shares.check_ids(avail, gpus, self.cfg.nshares, what="the available IDs")
        shares.check_ids(must, gpus, self.cfg.nshares, what="the must-include IDs",
                         empty_ok=True)
        offered = len(set(avail) | set(must))
        if not max(1, len(must)) <= r.allocation_size <= offered:
            raise ShareError(f"allocation_size {r.allocation_size} with {len(must)} "
                             f"must-include and {offered} available IDs")

    def _response(self, job: dict[str, Any], gpus: list[Gpu]) -> Any:
        sim = self.cfg.sim if self.cfg.sim is not None else self._sim
        plan = make_plan(job, sim=sim, preload_file=self.cfg.preload_file)
        if self.cfg.host_lib_dir:
            keep = [*self._dirs, str(paths.default_runtime_dir())]    # hostPaths already
            plan = response.relocate(plan, self.cfg.host_lib_dir, keep)
        how = self.cfg.gpu_handoff or ("none" if sim else "env")
        env, names = response.gpu_handoff(how, *(g.uuid for g in gpus))
        return response.container_response(plan, self.cfg.cdi_dir, extra_env=env,
                                           extra_cdi=names)

    # ------------------------------------------------------------ server and registration
    @property
    def socket_path(self) -> Path:
        return self.cfg.plugin_dir / self.cfg.endpoint

    def _serve(self) -> None:
        if self._server is not None:
            self._server.stop(0)
        path = self.socket_path
        path.unlink(missing_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        dp_grpc.add_DevicePluginServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{path}")
        server.start()
        self._server = server
        log.info("serving %s on %s", self.cfg.resource, path)

    def register(self) -> bool:
        kubelet = self.cfg.plugin_dir / KUBELET_SOCKET
        req = dp.RegisterRequest(
            version=API_VERSION, endpoint=self.cfg.endpoint, resource_name=self.cfg.resource,
            options=dp.DevicePluginOptions(pre_start_required=True,
                                           get_preferred_allocation_available=True))
        try:
            with grpc.insecure_channel(f"unix://{kubelet}") as ch:
                dp_grpc.RegistrationStub(ch).Register(req, timeout=self.cfg.timeout)
        except grpc.RpcError as exc:
            # said once per kubelet socket; the retries every watch interval go to debug
            level = logging.DEBUG if self._failed_for == self._seen_kubelet else logging.WARNING
            self._failed_for = self._seen_kubelet
            log.log(level, "registration with the kubelet failed (retrying): %s %s",
                    exc.code().name, exc.details())
            return False
        self._failed_for = None
        self.registrations += 1
        log.info("registered %s with the kubelet (%s)", self.cfg.resource, kubelet)
        return True

    def watch_once(self) -> None:
        """Restart the server if its socket is gone; register when the kubelet's socket is
        new (first start, or a kubelet restart), retrying until the kubelet accepts."""
        with self._cond:
            ready = bool(self._gpus)
        if not ready:
            return                                  # nothing to advertise yet
        if not self.cfg.plugin_dir.is_dir():        # never created here: it is the kubelet's
            self._waiting(f"no directory {self.cfg.plugin_dir}")
            return
        # the kubelet's socket first: a restarting kubelet removes every socket before it
        # makes its new one, so once the new one is seen our socket's removal is seen too
        # (looked at the other way round, a restart in between would register an endpoint
        # whose socket is gone)
        ident = podinfo.identity(self.cfg.plugin_dir / KUBELET_SOCKET)
        if self._server is None or not self.socket_path.exists():
            self._serve()
            self._kubelet_id = None                 # a new endpoint must be registered
        self._seen_kubelet = ident
        if ident is None:
            self._waiting(f"no {KUBELET_SOCKET} in {self.cfg.plugin_dir}")
            return
        self._waited = None
        if ident != self._kubelet_id and self.register():
            self._kubelet_id = ident

    def _waiting(self, why: str) -> None:
        """Waiting for the kubelet: said once at WARNING with a hint, then at debug."""
        level = logging.DEBUG if self._waited == why else logging.WARNING
        self._waited = why
        log.log(level, "waiting for the kubelet: %s (%s)", why,
                plugin_dir_hint())

    def _health_step(self) -> None:
        self.poll_health()
        if time.monotonic() - self._last_gc >= self.cfg.gc_interval:
            self._last_gc = time.monotonic()
            self.jobs.collect(controller_up=self.health.failures == 0)

    def start(self) -> None:
        self._threads += start_loops(self._stop, ((self.cfg.health_interval, self._health_step),
                                                  (self.cfg.watch_interval, self.watch_once)))

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=5)
        if self._server is not None:
            self._server.stop(1).wait(5)
            self._server = None
        self.socket_path.unlink(missing_ok=True)
