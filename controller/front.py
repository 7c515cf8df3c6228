"""The --listen endpoints in a process of their own.

Descriptors are per process.  Every TCP connection libzmq accepts holds one until its CurveZMQ
handshake fails or its peer goes, whoever the peer is, and libzmq aborts a process whose ipc
accept fails with EMFILE.  Served by the controller itself, unauthenticated peers could fill its
table and so kill it; no guard inside one process can be fast enough for every flood.  So the
controller starts this process (listen.py) for its --listen endpoints: it is the CurveZMQ
server (its own ZAP handler, auth.py) and relays every request it admits, and its reply, over
one DEALER connected to the controller's owner-only `front.sock`.  What a flood can exhaust is
this process's table; it pauses its endpoints near the limit (fdguard.ListenGuard), and if it
dies anyway the controller starts it again.  The controller's ipc socket is never at stake.

Wire: request frames [client id, ...body] go to the controller as they are (its ROUTER prepends
this process's id); replies come back as [client id, ...reply].  [b"", JSON] to the controller
is this process's report (every REPORT_EVERY s, and the first message once bound).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import logging
import math
import os
import signal
import sys
import time
from pathlib import Path

import zmq
from tgs.client.keys import KeyFileError

from .auth import CurveGuard
from .fdguard import BACKLOG, HANDSHAKE_MS, ListenGuard, nofile_limit, open_fds

log = logging.getLogger("tgs.controller.front")       # also when run as __main__
MAX_WIRE_FRAME = 1 << 20      # as server.py
PEER_HWM = 16                 # messages queued per remote client each way
BACKEND_HWM = 1000            # the relay to the controller (every remote client's requests)
BATCH = 64
TICK_S = 0.02
REPORT_EVERY = 0.25
EXIT_KEYS, EXIT_BIND = 2, 3
PR_SET_PDEATHSIG = 1


class Front:
    def __init__(self, ctx: zmq.Context, guard: CurveGuard, endpoints: list[str],
                 backend: str) -> None:
        self.guard = guard
        self.back = ctx.socket(zmq.DEALER)
        self.back.setsockopt(zmq.LINGER, 0)
        self.back.setsockopt(zmq.SNDHWM, BACKEND_HWM)
        self.back.setsockopt(zmq.RCVHWM, BACKEND_HWM)
        self.back.connect(backend)
        s = self.secure = ctx.socket(zmq.ROUTER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.MAXMSGSIZE, MAX_WIRE_FRAME)
        s.setsockopt(zmq.ROUTER_MANDATORY, 1)         # a reply to a full peer raises: counted
        s.setsockopt(zmq.SNDHWM, PEER_HWM)
        s.setsockopt(zmq.RCVHWM, PEER_HWM)
        s.setsockopt(zmq.HANDSHAKE_IVL, HANDSHAKE_MS)  # an unknown peer's descriptor goes soon
        s.setsockopt(zmq.BACKLOG, BACKLOG)
        guard.secure(s)
        bound = []
        for ep in endpoints:
            s.bind(ep)
            last = s.getsockopt(zmq.LAST_ENDPOINT)
            bound.append(last.decode() if isinstance(last, bytes) and last else ep)
        self.listen = ListenGuard(s, bound)
        self.dropped = 0          # replies not delivered, requests the relay could not take
        self.parent = os.getppid()
        self.stopping = False
        self.poller = zmq.Poller()
        self.poller.register(s, zmq.POLLIN)
        self.poller.register(self.back, zmq.POLLIN)

    def run(self) -> None:
        self._report()            # the first message: bound and serving
        next_tick = last_report = time.monotonic()
        while not self.stopping:
            now = time.monotonic()
            if now >= next_tick:
                was = self.listen.bound
                self.listen.tick(now)
                try:
                    self.guard.refresh()
                except OSError as exc:         # e.g. no descriptor to list the keys with
                    log.error("authorized keys not re-read: %s", exc)
                if was != self.listen.bound or now - last_report >= REPORT_EVERY:
                    self._report()
                    last_report = now
                if os.getppid() != self.parent:
                    log.error("the controller is gone: stopping")
                    return
                next_tick = now + TICK_S
            # a flood wakes nothing here (libzmq accepts in its own thread): the guard looks
            # every tick and after every message; at the limit this process only spins a while
            try:
                ready = dict(self.poller.poll(max(0, math.ceil((next_tick - now) * 1000))))
            except zmq.ZMQError as exc:
                if exc.errno == zmq.EINTR:
                    continue
                raise
            self.listen.look(time.monotonic())
            if self.secure in ready:
                self._relay(self.secure, self.back)
            if self.back in ready:
                self._relay(self.back, self.secure)

    def _relay(self, src: zmq.Socket, dst: zmq.Socket) -> None:
        for _ in range(BATCH):
            try:
                frames = src.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if not frames or not frames[0]:
                continue                      # nothing to route (never sent by a peer)
            try:
                dst.send_multipart(frames, zmq.NOBLOCK)
            except zmq.ZMQError as exc:       # gone, does not read, or the relay is full
                self.dropped += 1
                log.debug("dropped: %s", exc)
            self.listen.look(time.monotonic())

    def _report(self) -> None:
        g = self.listen
        body = {"pid": os.getpid(), "paused": not g.bound, "pauses": g.pauses,
                "dropped": self.dropped, "fds": open_fds(g.limit), "fds_limit": g.limit}
        try:
            self.back.send_multipart([b"", json.dumps(body).encode()], zmq.NOBLOCK)
        except zmq.ZMQError:
            pass

    def close(self) -> None:
        self.secure.close(0)
        self.back.close(0)
        self.guard.stop()


def _die_with_parent() -> None:
    """SIGTERM when the controller dies, even by SIGKILL (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass                  # the parent check in run() still stops it


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tgs.controller.front")
    ap.add_argument("--state-dir", type=Path, required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--listen", action="append", required=True)
    ap.add_argument("--log-level", type=int, default=logging.INFO)
    args = ap.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    _die_with_parent()
    zmq.curve_keypair()      # the CURVE random source opened now, not at a full table
    ctx = zmq.Context()
    try:
        guard = CurveGuard(ctx, args.state_dir)
    except (OSError, KeyFileError) as exc:
        log.error("--listen needs CurveZMQ keys: %s", exc)
        return EXIT_KEYS
    try:
        front = Front(ctx, guard, args.listen, args.backend)
    except zmq.ZMQError as exc:
        log.error("cannot bind %s: %s", ", ".join(args.listen), exc)
        guard.stop()
        return EXIT_BIND

    def stop(*_: object) -> None:
        front.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("serving %s (CurveZMQ) for the controller, descriptor limit %d", ", ".join(
        front.listen.endpoints), nofile_limit())
    try:
        front.run()
    finally:
        front.close()
        ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
