"""The controller's client library: a small blocking client (used by the tools, the device
plugins, the benchmarks and the tests).  It imports nothing of the controller: the shared
contract is here (protocol.py: the version and defaults; paths.py: where the sockets are;
keys.py: CurveZMQ key files), and the controller imports it.

Every call has a timeout: with no controller up, a call fails with
ControllerUnavailable after at most `timeout` seconds, never hangs.  Every request
that changes something carries a deadline (`deadline_ms`, the node's CLOCK_REALTIME)
a little before the client stops waiting: a controller that reads it later refuses
it (`expired`) instead of applying it, so a request the client reported as failed
is never applied afterwards.  Sockets close with linger 0: an unsent request is
dropped.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import zmq

from .keys import ClientKeys
from .paths import control_endpoint, default_runtime_dir, metrics_endpoint
from .protocol import DEFAULT_SLOTS, PROTOCOL_VERSION


class ClientError(Exception):
    """The controller answered with an error reply."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class ControllerUnavailable(Exception):
    """No answer from the controller within the timeout."""


class HandshakeFailed(ControllerUnavailable):
    """A CurveZMQ endpoint took the TCP connection but the handshake failed or never ended:
    our key is not authorized, or the server key is wrong (the controller is up)."""


# what a CURVE client's socket monitor reports (libzmq >= 4.3)
_WATCH = (zmq.EVENT_CONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH
          | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)


MUTATING = ("register", "unregister", "set")     # the requests that carry a deadline


def deadline_ms(timeout: float, now: float | None = None) -> int:
    """The deadline a request carries: the client waits `timeout` s for the reply; the
    controller must have read the request a margin before that (a quarter of the
    timeout, at most 0.5 s), leaving the rest for applying it and replying."""
    now = time.time() if now is None else now
    return int((now + timeout - min(0.5, timeout / 4)) * 1000)


class Client:
    def __init__(self, endpoint: str | None = None, runtime_dir: str | Path | None = None,
                 timeout: float = 3.0, curve: ClientKeys | None = None) -> None:
        rdir = Path(runtime_dir) if runtime_dir else default_runtime_dir()
        self.endpoint = endpoint or control_endpoint(rdir)
        self.metrics = metrics_endpoint(rdir)
        self.timeout = timeout
        self.curve = curve                   # CurveZMQ keys for a --listen endpoint (keys.py)
        self._ctx = zmq.Context.instance()
        self._sock: zmq.Socket | None = None
        self._monitor: zmq.Socket | None = None   # CURVE only: tells a refused handshake apart
        self._seen = 0                             # the monitor's events so far (_WATCH bits)

    def _socket(self) -> zmq.Socket:
        if self._sock is None:
            if self.endpoint.startswith("ipc://") and not os.path.exists(self.endpoint[6:]):
                raise ControllerUnavailable(
                    f"no controller socket at {self.endpoint[6:]}: is tgs-controller running?")
            s = self._ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            try:
                if self.curve is not None:
                    self.curve.apply(s)
                    self._monitor = s.get_monitor_socket(_WATCH)
                    self._seen = 0
                s.connect(self.endpoint)
            except zmq.ZMQError as exc:
                self._close_monitor(s)
                s.close(0)
                raise ControllerUnavailable(
                    f"cannot connect to {self.endpoint[:200]!r}: {exc}") from None
            self._sock = s
        return self._sock

    def close(self) -> None:
        if self._sock is not None:
            self._close_monitor(self._sock)
            self._sock.close(0)
            self._sock = None

    def _close_monitor(self, sock: zmq.Socket) -> None:
        if self._monitor is not None:
            try:
                sock.disable_monitor()
            except zmq.ZMQError:
                pass
            self._monitor.close(0)
            self._monitor = None

    def _handshake(self) -> str | None:
        """Why a CURVE endpoint did not answer, from the monitor's events: None when no TCP
        connection was made or the handshake succeeded (then it is only slow)."""
        mon = self._monitor
        if mon is None:
            return None
        from zmq.utils.monitor import recv_monitor_message
        while mon.poll(0, zmq.POLLIN):
            try:
                self._seen |= int(recv_monitor_message(mon, zmq.NOBLOCK)["event"])
            except (zmq.ZMQError, ValueError, KeyError):
                break
        seen, where = self._seen, self.endpoint[:200]
        if seen & zmq.EVENT_HANDSHAKE_SUCCEEDED:
            return None
        if seen & zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            return (f"the controller at {where} refused our CurveZMQ key: not authorized (copy "
                    "our public .key into its <state dir>/curve/authorized/)")
        if seen & (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL):
            return (f"the CurveZMQ handshake with {where} failed: is --server-key that "
                    "controller's public key?")
        if seen & zmq.EVENT_CONNECTED:
            return (f"connected to {where}, but the CurveZMQ handshake did not complete within "
                    f"{self.timeout} s: a wrong --server-key, or our key is not authorized")
        return None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call_raw(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Send one request object; return the reply object (ok or not)."""
        sock = self._socket()
        rid = msg.get("id")
        sock.send(json.dumps(msg).encode())
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not sock.poll(int(left * 1000) + 1, zmq.POLLIN):
                why = self._handshake()
                self.close()     # drop a late reply with the socket
                if why is not None:
                    raise HandshakeFailed(why)
                raise ControllerUnavailable(
                    f"no reply from the controller at {self.endpoint} within {self.timeout} s")
            frames = sock.recv_multipart()
            try:
                reply = json.loads(frames[-1])
            except ValueError:
                continue
            if isinstance(reply, dict) and (rid is None or reply.get("id") == rid):
                return reply

    def call(self, type_: str, **fields: Any) -> dict[str, Any]:
        msg = {"v": PROTOCOL_VERSION, "id": uuid.uuid4().hex, "type": type_, **fields}
        if type_ in MUTATING:
            msg["deadline_ms"] = deadline_ms(self.timeout)
        reply = self.call_raw(msg)
        if not reply.get("ok"):
            err = reply.get("error") or {}
            raise ClientError(str(err.get("code", "?")), str(err.get("message", "")))
        return reply

    # ------------------------------------------------------------ verbs
    def register(self, name: str, priority: str = "opportunistic", weight: int = 1,
                 mem_quota: int | None = None,
                 device: int | str | tuple[int | str, ...] | list[int | str] = 0,
                 ephemeral: bool = False, nslots: int = DEFAULT_SLOTS,
                 lease_uid: int | None = None, mem_total: int = 0,
                 host_pinned_max: int = 0, mem_fixed: bool = False) -> dict[str, Any]:
        """Register a job; `device` is one device, or a sequence of them (protocol 1.2
        `devices`: a job over several GPUs)."""
        extra: dict[str, Any] = {} if lease_uid is None else {"lease_uid": lease_uid}
        if mem_total:
            extra["mem_total"] = mem_total
        if host_pinned_max:
            extra["host_pinned_max"] = host_pinned_max
        if mem_fixed:
            extra["mem_fixed"] = True
        if isinstance(device, (tuple, list)):
            extra["devices"] = list(device)
        else:
            extra["device"] = device
        return self.call("register", name=name, priority=priority, weight=weight,
                         mem_quota=mem_quota, ephemeral=ephemeral, nslots=nslots, **extra)

    def unregister(self, name: str, when_idle: bool = False) -> dict[str, Any]:
        """Remove a job; with when_idle, only if nobody holds its lease and none of its
        processes is live (reply field `removed`)."""
        return self.call("unregister", name=name, **({"when_idle": True} if when_idle else {}))

    def set(self, name: str, **changes: Any) -> dict[str, Any]:
        return self.call("set", name=name, **changes)

    def list(self) -> list[dict[str, Any]]:
        return list(self.call("list")["jobs"])

    def status(self) -> dict[str, Any]:
        return self.call("status")

    def subscribe(self) -> zmq.Socket:
        """A SUB socket on the metrics stream (caller closes it)."""
        s = self._ctx.socket(zmq.SUB)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.SUBSCRIBE, b"")
        s.connect(self.metrics)
        return s
