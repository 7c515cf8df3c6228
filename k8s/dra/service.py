"""The driver's two gRPC sockets and what they serve.

    <registrar dir>/<driver>-reg.sock   Registration (pluginregistration v1): the kubelet's
                                        plugin watcher finds it, GetInfo names the driver and
                                        the DRA socket, NotifyRegistrationStatus says the verdict
    <plugin dir>/dra.sock               DRAPlugin v1 and v1beta1 (the kubelet picks one)

`Sockets.watch_once` (the driver's `watch` thread) serves each socket, and again when it was
removed; it waits for the kubelet's registration directory, which it never creates.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from .api import PLUGIN_TYPE, SERVICES, dra, dra1, dra1_grpc, dra_grpc, reg, reg_grpc
from .claims import Claims
from .config import DriverConfig

log = logging.getLogger("tgs.k8s.dra")


class Sockets:
    def __init__(self, cfg: DriverConfig, claims: Claims,
                 on_registered: Callable[[], None] | None = None) -> None:
        self.cfg = cfg
        self.claims = claims
        self.on_registered = on_registered           # each time the kubelet accepts us
        self._servers: dict[str, grpc.Server] = {}
        self._waited: str | None = None
        self.registered: bool | None = None          # the kubelet's verdict
        self.registration_error = ""

    def _serve(self, key: str, path: Path, add: Callable[[grpc.Server], None]) -> None:
        old = self._servers.pop(key, None)
        if old is not None:
            old.stop(0)
        path.unlink(missing_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        add(server)
        try:
            server.add_insecure_port(f"unix://{path}")
        except RuntimeError as exc:                  # its directory gone meanwhile
            server.stop(0)
            log.warning("cannot serve %s on %s (tried again): %s", key, path, exc)
            return
        server.start()
        self._servers[key] = server
        log.info("serving %s on %s", key, path)

    def _add_dra(self, server: grpc.Server) -> None:
        dra1_grpc.add_DRAPluginServicer_to_server(DRAService(self.claims, dra1), server)
        dra_grpc.add_DRAPluginServicer_to_server(DRAService(self.claims, dra), server)

    def _add_registration(self, server: grpc.Server) -> None:
        reg_grpc.add_RegistrationServicer_to_server(Registration(self), server)

    def watch_once(self) -> None:
        """Serve the DRA socket, then the registration socket (the kubelet calls as soon as
        it sees the latter), each again when it was removed. A restarting kubelet leaves
        both alone: its plugin watcher finds the registration socket already there and
        registers the driver again; one whose registration directory was removed and made
        again (the watcher makes it when missing) gets a new socket within a look."""
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

    def notified(self, registered: bool, error: str) -> None:
        """The kubelet's NotifyRegistrationStatus."""
        self.registered, self.registration_error = registered, error
        if registered:
            log.info("registered with the kubelet as %s %s", PLUGIN_TYPE, self.cfg.driver)
            if self.on_registered is not None:
                self.on_registered()
        else:
            log.error("the kubelet refused the registration: %s", error or "no reason")

    def stop(self) -> None:
        """Stop serving (the registration first: the kubelet stops finding us) and remove
        the sockets."""
        for key in ("registration", "dra"):
            server = self._servers.pop(key, None)
            if server is not None:
                server.stop(1).wait(5)
        for path in (self.cfg.registration_socket, self.cfg.dra_socket):
            path.unlink(missing_ok=True)


class DRAService:
    """DRAPlugin for one API version (`msgs`: that version's messages)."""

    def __init__(self, claims: Claims, msgs: Any) -> None:
        self.claims = claims
        self.msgs = msgs

    def NodePrepareResources(self, request: Any, context: Any) -> Any:  # noqa: N802
        m = self.msgs
        done = self.claims.prepare([(c.namespace, c.uid, c.name) for c in request.claims])
        resp = m.NodePrepareResourcesResponse()
        for uid, (devices, error) in done.items():
            r = resp.claims[uid]
            if error:
                r.error = error
            else:
                r.devices.extend(m.Device(**d) for d in devices)
        return resp

    def NodeUnprepareResources(self, request: Any, context: Any) -> Any:  # noqa: N802
        done = self.claims.unprepare([(c.namespace, c.uid, c.name) for c in request.claims])
        resp = self.msgs.NodeUnprepareResourcesResponse()
        for uid, error in done.items():
            resp.claims[uid].error = error
        return resp


class Registration(reg_grpc.RegistrationServicer):
    def __init__(self, sockets: Sockets) -> None:
        self.sockets = sockets

    def GetInfo(self, request: Any, context: Any) -> Any:  # noqa: N802
        cfg = self.sockets.cfg
        return reg.PluginInfo(type=PLUGIN_TYPE, name=cfg.driver, endpoint=str(cfg.dra_socket),
                              supported_versions=list(SERVICES))

    def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:  # noqa: N802
        self.sockets.notified(request.plugin_registered, request.error)
        return reg.RegistrationStatusResponse()
