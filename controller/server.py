"""The ZeroMQ side of the daemon: one ROUTER for requests, one PUB for metrics.

Single-threaded: one poll loop serves requests and runs the control period,
so the registry and the segments need no locks.  A request is handled in
microseconds (plus one fsync for a change), and at most MAX_BATCH requests
are served between two periods, so no client can stall the control loop.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Protocol

import zmq

from . import protocol as P
from .registry import Registry
from .replies import (
    DaemonInfo,
    DeviceInfo,
    ListReply,
    LoopStatus,
    MetricsEntry,
    MetricsMessage,
    RegisterReply,
    SetReply,
    StatusReply,
    UnregisterReply,
)

log = logging.getLogger(__name__)

MAX_BATCH = 64
MAX_WIRE_FRAME = 1 << 20      # bigger frames make ZeroMQ drop the peer (documented)


class Engine(Protocol):
    """What the server needs from the control loop."""

    period: float

    def step(self, now: float) -> list[MetricsEntry]: ...
    def status(self) -> LoopStatus: ...
    def on_change(self) -> None: ...
    def idle(self, name: str) -> bool: ...     # no lease holder and no live process


class Handler:
    """Frames in, frames out: everything about one request, without sockets."""

    def __init__(self, registry: Registry, engine: Engine, info: DaemonInfo) -> None:
        self.registry = registry
        self.engine = engine
        self.info = info            # static facts for status (policy, dirs, endpoints...)
        self.started = time.time()
        self.served = 0
        self.errors = 0

    def handle(self, frames: list[bytes]) -> list[bytes]:
        self.served += 1
        identity, body = frames[:1], frames[1:]
        if not body or len(frames) > P.MAX_FRAMES or any(f for f in body[:-1]):
            self.errors += 1
            return identity + [P.error_reply(
                None, P.E_BAD_FRAME,
                "a request is one payload frame, optionally after one empty delimiter")]
        envelope = identity + body[:-1]
        req_id = None
        try:
            req = P.parse_payload(body[-1])
            req_id = req.id
            P.check_deadline(req, time.time_ns() // 1_000_000)
            reply = self.dispatch(req)
        except P.ProtocolError as exc:
            self.errors += 1
            reply = P.error_reply(exc.req_id, exc.code, exc.message)
        except Exception as exc:       # a bug must not take the daemon down
            self.errors += 1
            log.exception("request failed")
            # with the id: a client waits for its own id (and would time out otherwise)
            reply = P.error_reply(req_id, P.E_INTERNAL, f"internal error: {type(exc).__name__}")
        return envelope + [reply]

    def dispatch(self, req: P.Request) -> bytes:
        reg = self.registry
        if isinstance(req, P.Register):
            job = reg.register(req)
            self.engine.on_change()
            return P.ok_reply(req.id, RegisterReply(job.info(), **reg.launch_info(job)))
        if isinstance(req, P.Unregister):
            if req.when_idle and req.name in reg.jobs and not self.engine.idle(req.name):
                return P.ok_reply(req.id, UnregisterReply(removed=False))   # the loop will
            reg.unregister(req)
            self.engine.on_change()
            return P.ok_reply(req.id, UnregisterReply(removed=True))
        if isinstance(req, P.Set):
            job = reg.update(req)
            self.engine.on_change()
            return P.ok_reply(req.id, SetReply(job.info()))
        if isinstance(req, P.List):
            return P.ok_reply(req.id, ListReply([j.info() for j in reg.jobs.values()]))
        if isinstance(req, P.Status):
            return P.ok_reply(req.id, self.status())
        raise P.ProtocolError(P.E_UNKNOWN_TYPE, "unhandled message type", req.id)

    def status(self) -> StatusReply:
        return StatusReply(
            protocol=P.PROTOCOL_VERSION, protocol_minor=P.PROTOCOL_MINOR, pid=os.getpid(),
            uptime_s=round(time.time() - self.started, 3),
            devices=[DeviceInfo(d.index, d.uuid, d.name, d.mem_total, d.kind)
                     for d in self.registry.devices],
            jobs=len(self.registry.jobs), requests=self.served, request_errors=self.errors,
            daemon=self.info, loop=self.engine.status())


class Server:
    """`endpoints` are served as they are (the owner-only ipc socket); `secure_endpoints`
    (--listen) by a second ROUTER that is a CurveZMQ server under `guard` (auth.py)."""

    def __init__(self, handler: Handler, endpoints: list[str], metrics_endpoint: str,
                 secure_endpoints: list[str] | None = None, guard: Any = None,
                 ctx: zmq.Context | None = None) -> None:
        self.handler = handler
        self.ctx = ctx or zmq.Context()
        self.guard = guard
        self.router = self._router(endpoints)
        self.routers = [self.router]
        if secure_endpoints:
            if guard is None:
                raise ValueError("endpoints other than the ipc socket need CurveZMQ keys")
            self.routers.append(self._router(secure_endpoints, guard))
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.setsockopt(zmq.LINGER, 0)
        self.pub.setsockopt(zmq.SNDHWM, 100)
        self.pub.bind(metrics_endpoint)
        self.poller = zmq.Poller()
        for r in self.routers:
            self.poller.register(r, zmq.POLLIN)
        self.stopping = False

    def _router(self, endpoints: list[str], guard: Any = None) -> zmq.Socket:
        r = self.ctx.socket(zmq.ROUTER)
        r.setsockopt(zmq.LINGER, 0)
        r.setsockopt(zmq.MAXMSGSIZE, MAX_WIRE_FRAME)
        r.setsockopt(zmq.ROUTER_MANDATORY, 0)
        r.setsockopt(zmq.SNDHWM, 1000)
        if guard is not None:
            guard.secure(r)
        for ep in endpoints:
            r.bind(ep)
        return r

    def stop(self, *_: object) -> None:
        self.stopping = True

    def close(self) -> None:
        for r in self.routers:
            r.close(0)
        self.pub.close(0)
        if self.guard is not None:
            self.guard.stop()
        self.ctx.term()

    def serve(self) -> None:
        engine = self.handler.engine
        next_tick = time.monotonic()
        while not self.stopping:
            now = time.monotonic()
            if now >= next_tick:
                metrics = engine.step(now)
                self._publish(metrics)
                if self.guard is not None:
                    self.guard.refresh()
                # a late period is not made up for: keep the cadence from now
                next_tick = max(next_tick + engine.period, time.monotonic())
                continue
            wait_ms = max(0, int((next_tick - now) * 1000))
            try:
                ready = dict(self.poller.poll(wait_ms))
            except zmq.ZMQError as exc:
                if exc.errno == zmq.EINTR:
                    continue
                raise
            for sock in self.routers:
                if sock in ready:
                    self._serve_batch(sock)

    def _serve_batch(self, sock: zmq.Socket) -> None:
        for _ in range(MAX_BATCH):
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            reply = self.handler.handle(frames)
            try:
                sock.send_multipart(reply, zmq.NOBLOCK)
            except zmq.ZMQError as exc:   # peer gone or its queue full: drop the reply
                log.debug("reply dropped: %s", exc)

    def _publish(self, metrics: list[MetricsEntry]) -> None:
        if not metrics:
            return
        try:
            msg = MetricsMessage(time.time(), metrics).to_dict()
            self.pub.send_multipart([b"metrics", P.encode(msg)], zmq.NOBLOCK)
        except zmq.ZMQError:
            pass
