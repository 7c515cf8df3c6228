"""The ZeroMQ side of the daemon: one ROUTER for requests, one PUB for metrics.

Single-threaded: one poll loop serves requests and runs the control period,
so the registry and the segments need no locks.  Floods cannot
hold the control loop back or grow the daemon without bound:

- requests get at most REQUEST_SHARE of each period (then they wait for the
  next one), and a batch of them is saved once (group commit, commit.py),
  before any of its replies;
- every peer has small queues both ways (ROUTER_HWM) and ROUTER_MANDATORY:
  a reply to a client that is gone or does not read is dropped and counted;
- the --listen endpoints are served by a process of their own (front.py,
  listen.py), so a flood of TCP connections cannot take the descriptors the
  ipc socket needs; its requests arrive here through one owner-only relay.
"""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path
from typing import Any, Protocol

import zmq
from tgs.client.protocol import PROTOCOL_MINOR

from . import protocol as P
from .fdguard import nofile_limit, open_fds
from .listen import ListenFront
from .registry import Registry
from .replies import (
    DaemonInfo,
    DeviceInfo,
    ListReply,
    LoopStatus,
    MetricsEntry,
    MetricsMessage,
    RegisterReply,
    ServerStatus,
    SetReply,
    StatusReply,
    UnregisterReply,
)

log = logging.getLogger(__name__)

MAX_BATCH = 64
MAX_WIRE_FRAME = 1 << 20      # bigger frames make ZeroMQ drop the peer (documented)
REQUEST_SHARE = 0.5           # of each period, at most, for requests; the rest is the loop's
ROUTER_HWM = 16               # messages queued per peer each way: memory bounded per client
MUTATING = (P.Register, P.Unregister, P.Set)


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
        self.replies_dropped = 0        # counted by the server (ROUTER_MANDATORY)
        self.budget_exhausted = 0       # periods whose share for requests ran out
        self.listen: ListenFront | None = None     # the --listen process
        self._out: list[list[bytes]] = []
        self._pending: list[tuple[int, list[bytes], str | None]] = []   # ok, not yet saved

    def handle(self, frames: list[bytes]) -> list[bytes]:
        """One request, saved before its reply is returned."""
        self.begin()
        self.add(frames)
        return self.finish()[0]

    # A batch: begin(), add() each request, finish() -> the replies, in order, once the
    # changes among them are saved (one save: commit.py).
    def begin(self) -> None:
        self.registry.group.begin()

    def add(self, frames: list[bytes]) -> None:
        self.served += 1
        identity, body = frames[:1], frames[1:]
        if not body or len(frames) > P.MAX_FRAMES or any(f for f in body[:-1]):
            self.errors += 1
            self._out.append(identity + [P.error_reply(
                None, P.E_BAD_FRAME,
                "a request is one payload frame, optionally after one empty delimiter")])
            return
        envelope = identity + body[:-1]
        req_id = None
        group = self.registry.group
        mark, ok = 0, False
        req: P.Request | None = None
        try:
            req = P.parse_payload(body[-1])
            req_id = req.id
            P.check_deadline(req, time.time_ns() // 1_000_000)
            self._commit_before(req)
            mark = group.size
            reply = self.dispatch(req)
            ok = True
        except P.ProtocolError as exc:
            self.errors += 1
            reply = P.error_reply(exc.req_id, exc.code, exc.message)
            if isinstance(req, (P.Register, P.Set, P.Unregister)):   # a refused change
                log.info("refused %s %s: %s: %s", type(req).__name__.lower(), req.name,
                         exc.code, exc.message)
        except Exception as exc:       # a bug must not take the daemon down
            self.errors += 1
            log.exception("request failed")
            # with the id: a client waits for its own id (and would time out otherwise)
            reply = P.error_reply(req_id, P.E_INTERNAL, f"internal error: {type(exc).__name__}")
        self._out.append(envelope + [reply])
        if ok and group.size != mark:
            self._pending.append((len(self._out) - 1, envelope, req_id))

    def finish(self) -> list[list[bytes]]:
        self._commit()
        out, self._out = self._out, []
        return out

    def _commit_before(self, req: P.Request) -> None:
        """Save the group first when `req` reads the registry (a reply tells only what is
        saved) or changes a job the group changed already."""
        group = self.registry.group
        if group.size and (not isinstance(req, MUTATING) or group.touched(req.name)):
            self._commit()
            group.begin()

    def _commit(self) -> None:
        err = self.registry.group.commit()
        if err is not None:           # all undone: each of those replies says so
            log.error("cannot save state: %s (%d change(s) undone)", err, len(self._pending))
            for idx, envelope, req_id in self._pending:
                self.errors += 1
                self._out[idx] = envelope + [P.error_reply(req_id, P.E_INTERNAL,
                                                           f"cannot save state: {err}")]
            try:
                self.engine.on_change()
            except Exception:
                log.exception("after undoing changes")
        self._pending = []

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
            protocol=P.PROTOCOL_VERSION, protocol_minor=PROTOCOL_MINOR, pid=os.getpid(),
            uptime_s=round(time.time() - self.started, 3),
            devices=[DeviceInfo(d.index, d.uuid, d.name, d.mem_total, d.kind)
                     for d in self.registry.devices],
            jobs=len(self.registry.jobs), requests=self.served, request_errors=self.errors,
            daemon=self.info, loop=self.engine.status(), server=self.server_status())

    def server_status(self) -> ServerStatus:
        limit, g = nofile_limit(), self.listen
        if g is None:
            return ServerStatus(self.replies_dropped, self.budget_exhausted, open_fds(limit),
                                limit)
        return ServerStatus(self.replies_dropped + g.dropped, self.budget_exhausted,
                            open_fds(limit), limit, g.paused, g.pauses, g.restarts)


class Server:
    """`endpoints` are served as they are (the owner-only ipc socket); `secure_endpoints`
    (--listen) by the --listen process (front.py), a CurveZMQ server with `guard`'s keys
    (auth.py), through its relay socket beside the first ipc endpoint."""

    def __init__(self, handler: Handler, endpoints: list[str], metrics_endpoint: str,
                 secure_endpoints: list[str] | None = None, guard: Any = None,
                 ctx: zmq.Context | None = None) -> None:
        self.handler = handler
        self.ctx = ctx or zmq.Context()
        self.guard = guard
        self.router = self._router(endpoints)
        self.routers = [self.router]
        self.front: ListenFront | None = None
        if secure_endpoints:
            if guard is None:
                raise ValueError("endpoints other than the ipc socket need CurveZMQ keys")
            ipc = next((e for e in endpoints if e.startswith("ipc://")), None)
            if ipc is None:
                raise ValueError("--listen needs an ipc endpoint (for its relay)")
            try:
                self.front = handler.listen = ListenFront(
                    self.ctx, Path(guard.dir).parent, Path(ipc[6:]).parent, secure_endpoints,
                    MAX_WIRE_FRAME)
            except BaseException:
                self.router.close(0)
                raise
            self.routers.append(self.front.backend)
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.setsockopt(zmq.LINGER, 0)
        self.pub.setsockopt(zmq.SNDHWM, 100)
        self.pub.bind(metrics_endpoint)
        self.poller = zmq.Poller()
        for r in self.routers:
            self.poller.register(r, zmq.POLLIN)
        self.stopping = False

    def _router(self, endpoints: list[str]) -> zmq.Socket:
        r = self.ctx.socket(zmq.ROUTER)
        r.setsockopt(zmq.LINGER, 0)
        r.setsockopt(zmq.MAXMSGSIZE, MAX_WIRE_FRAME)
        # a reply to a full or unknown peer raises (and is counted) instead of queueing
        r.setsockopt(zmq.ROUTER_MANDATORY, 1)
        r.setsockopt(zmq.SNDHWM, ROUTER_HWM)
        r.setsockopt(zmq.RCVHWM, ROUTER_HWM)
        try:
            for ep in endpoints:
                r.bind(ep)
        except zmq.ZMQError:
            r.close(0)
            raise
        return r

    def stop(self, *_: object) -> None:
        self.stopping = True

    def close(self) -> None:
        if self.front is not None:
            self.front.close()            # its relay socket with it
        for r in self.routers:
            r.close(0)
        self.pub.close(0)
        if self.guard is not None:
            self.guard.stop()
        self.ctx.term()

    def serve(self) -> None:
        engine = self.handler.engine
        next_tick = time.monotonic()
        spent = 0.0                           # time requests used in this period
        turn = 0
        while not self.stopping:
            now = time.monotonic()
            if now >= next_tick:
                self._step(now)
                # a late period is not made up for: keep the cadence from now (the loop
                # counts what was missed)
                next_tick = max(next_tick + engine.period, time.monotonic())
                spent = 0.0
                continue
            share = REQUEST_SHARE * engine.period
            wait = next_tick - now
            if spent >= share:                # requests had their share: next period
                time.sleep(wait)
                continue
            ready = self._poll(wait)
            if not ready:
                continue
            t0 = time.monotonic()
            until = min(next_tick, t0 + share - spent)
            turn += 1                         # neither router goes first every time
            for sock in self.routers[::1 if turn % 2 else -1]:
                if sock in ready:
                    self._serve_batch(sock, until)
            spent += time.monotonic() - t0
            if spent >= share:
                self.handler.budget_exhausted += 1

    def _step(self, now: float) -> None:
        self._publish(self.handler.engine.step(now))
        if self.front is not None:
            self.front.tick(time.monotonic())

    def _poll(self, wait: float) -> dict[Any, int]:
        try:
            # rounded up: a wait cut to 0 ms would spin until the tick
            return dict(self.poller.poll(max(0, math.ceil(wait * 1000))))
        except zmq.ZMQError as exc:
            if exc.errno == zmq.EINTR:
                return {}
            raise

    def _serve_batch(self, sock: zmq.Socket, until: float) -> None:
        """Requests until the queue is empty, MAX_BATCH or `until`; saved once, then the
        replies.  From the --listen relay a request comes after the process's id."""
        h, front = self.handler, self.front
        relay = front is not None and sock is front.backend
        routes: list[bytes] = []
        h.begin()
        try:
            for i in range(MAX_BATCH):
                if i and time.monotonic() >= until:
                    break
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                if front is not None and relay:
                    if len(frames) == 3 and not frames[1]:
                        front.note(frames[2])           # its report, not a request
                        continue
                    routes.append(frames[0])
                    frames = frames[1:]
                h.add(frames)
        finally:
            replies = h.finish()
        for k, reply in enumerate(replies):
            if relay:
                reply = [routes[k], *reply]
            try:
                sock.send_multipart(reply, zmq.NOBLOCK)
            except zmq.ZMQError as exc:   # the client is gone or does not read: drop it
                h.replies_dropped += 1
                log.debug("reply dropped: %s", exc)

    def _publish(self, metrics: list[MetricsEntry]) -> None:
        if not metrics:
            return
        try:
            msg = MetricsMessage(time.time(), metrics).to_dict()
            self.pub.send_multipart([b"metrics", P.encode(msg)], zmq.NOBLOCK)
        except zmq.ZMQError:
            pass
