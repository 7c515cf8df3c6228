"""Descriptor headroom for the --listen endpoints.

Every TCP connection libzmq accepts on a --listen endpoint holds a descriptor until its
CurveZMQ handshake fails or its peer goes, whoever the peer is.  So the endpoints live in a
process of their own (front.py), and there:

- the soft RLIMIT_NOFILE is raised to the hard limit (`raise_nofile`, by the controller at
  start: its children inherit it);
- the CURVE router has a short handshake timeout (HANDSHAKE_MS) and a short backlog;
- `ListenGuard` unbinds the endpoints (libzmq then closes every connection they accepted) as
  soon as descriptors reach a high-water mark, a reserve below the limit, and binds them again
  once the count is back under a low mark, HOLD_S later at the earliest.  A WARNING is logged
  for the first pause (and at most once a minute after), every pause is counted (status
  `listen_pauses`).  That keeps the process serving and off the limit, where libzmq would spin
  on failing accepts (and would abort at an ipc accept: why the controller is not that process).

The guard looks often and cheaply: descriptors are numbered lowest-first, so one in use at the
high mark or just above means the table is that full (a few fcntl calls, `look`); the exact
count (/proc/self/fd, a listing of every descriptor) is taken every COUNT_EVERY (`tick`).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import resource
from pathlib import Path

import zmq

log = logging.getLogger(__name__)
HANDSHAKE_MS = 2000      # an unauthenticated peer holds its descriptor this long at most
BACKLOG = 32             # connections the kernel queues before libzmq accepts them
RESERVE_MIN = 64         # descriptors kept for the ipc socket, the state file, segments...
HOLD_S = 2.0             # an unbound endpoint stays down this long at least
WARN_EVERY = 60.0        # seconds between WARNINGs of repeated pauses
PROBE = 8                # descriptor numbers tried at the high mark
COUNT_EVERY = 0.25       # seconds between exact counts while the endpoints are bound


def nofile_limit() -> int:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else _nr_open()


def _nr_open() -> int:
    try:
        return int(Path("/proc/sys/fs/nr_open").read_text())
    except (OSError, ValueError):
        return 1 << 20


def raise_nofile() -> int:
    """Raise the soft descriptor limit to the hard one (what this daemon may use, so a flood
    needs that many); the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = _nr_open() if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and want > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the descriptor limit from %d to %d: %s", soft, want, exc)
    return nofile_limit()


def open_fds(limit: int) -> int:
    """Descriptors open in this process; `limit` when the table is full, -1 when unknown."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1       # less listdir's own
    except OSError as exc:
        return limit if exc.errno in (errno.EMFILE, errno.ENFILE) else -1


class ListenGuard:
    """Pauses the --listen endpoints of `sock` while descriptors are near the limit."""

    def __init__(self, sock: zmq.Socket, endpoints: list[str], limit: int | None = None) -> None:
        self.sock = sock
        self.endpoints = endpoints           # as bound (a port 0 resolved)
        self.limit = limit or nofile_limit()
        reserve = max(RESERVE_MIN, self.limit // 4)
        self.high = max(1, self.limit - reserve)
        self.low = max(0, self.high - max(RESERVE_MIN // 2, reserve // 2))
        self.bound = True
        self.pauses = 0
        self.fds = open_fds(self.limit)
        self._counted = float("-inf")
        self._since = 0.0                    # when the endpoints were unbound
        self._warned = float("-inf")
        self._loud = False                   # the last pause was logged as a WARNING

    def full(self) -> bool:
        """A descriptor numbered at the high mark or just above is in use."""
        for fd in range(self.high, min(self.high + PROBE, self.limit)):
            try:
                fcntl.fcntl(fd, fcntl.F_GETFD)
                return True
            except OSError:
                pass
        return False

    def look(self, now: float) -> None:
        """The cheap look (between requests, at every wake-up)."""
        if self.bound and self.full():
            self._pause(now, f"descriptor #{self.high} in use")       # the table is that full

    def tick(self, now: float) -> None:
        """Once a period: the exact count (every COUNT_EVERY: it lists every descriptor);
        pause, or resume once it is low again."""
        if self.bound:
            if now - self._counted >= COUNT_EVERY:
                self._count(now)
                if self.fds >= self.high:
                    self._pause(now, f"{self.fds} descriptors open")
            self.look(now)
        elif now - self._since >= HOLD_S:
            self._count(now)
            if 0 <= self.fds <= self.low and not self.full():
                self._resume(now)

    def _count(self, now: float) -> None:
        self.fds = open_fds(self.limit)
        self._counted = now

    def _pause(self, now: float, why: str) -> None:
        for ep in self.endpoints:
            try:
                self.sock.unbind(ep)
            except zmq.ZMQError as exc:
                log.error("cannot unbind %s: %s", ep, exc)
        self.bound = False
        self.pauses += 1
        self._since = now
        self._loud = now - self._warned >= WARN_EVERY
        if self._loud:
            self._warned = now
        log.log(logging.WARNING if self._loud else logging.DEBUG,
                "descriptors near the limit (%s, limit %d, high-water mark %d): the --listen "
                "endpoints %s are closed for now and their connections dropped (pause %d); the "
                "controller's ipc socket is not affected",
                why, self.limit, self.high, ", ".join(self.endpoints), self.pauses)

    def _resume(self, now: float) -> None:
        done: list[str] = []
        try:
            for ep in self.endpoints:
                self.sock.bind(ep)
                done.append(ep)
        except zmq.ZMQError as exc:              # e.g. the port was taken: try again later
            log.error("cannot bind %s again: %s", self.endpoints[len(done)], exc)
            for ep in done:
                try:
                    self.sock.unbind(ep)
                except zmq.ZMQError:
                    pass
            self._since = now
            return
        self.bound = True
        log.log(logging.INFO if self._loud else logging.DEBUG,
                "%d descriptors open: the --listen endpoints are bound again", self.fds)
