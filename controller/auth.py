"""CurveZMQ for every request endpoint other than the owner-only ipc socket.

Files, under `<state dir>/curve/` (the state dir is owner-only):
  server.key          the controller's public key (give it to clients; also in `status`)
  server.key_secret   its secret key, mode 0600, created on first use
  authorized/*.key    the public keys of the clients allowed on --listen endpoints

A `--listen` endpoint is a CURVE server socket whose ZAP handler (pyzmq's
ThreadAuthenticator, started by the first `secure`: in the --listen process, front.py,
not in the controller) admits only the keys found in `authorized/`; the directory is
re-read when it changes (checked about once a second).  An empty directory admits
nobody: such an endpoint answers no one (fail closed).  A client without an
authorized key cannot complete the handshake: its requests never reach the handler.
Key files use ZeroMQ's certificate format (`tgsctl keygen` writes a client's pair).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import zmq
from tgs.client.keys import KeyFileError, read_key_file, write_keypair
from zmq.auth.thread import ThreadAuthenticator

log = logging.getLogger(__name__)
CURVE_DIR = "curve"
SERVER_NAME = "server"
AUTHORIZED_DIR = "authorized"
ZAP_DOMAIN = "tgs"
REFRESH_S = 1.0
DENY_WINDOW_S = 60.0                  # at most one denial line per peer address per window
DENY_PEERS = 256                      # peers tracked at once; more share one line


class DenialLog:
    """Refused handshakes at info, rate-limited: the first one from a peer address is logged
    at once, later ones within DENY_WINDOW_S only counted and logged as one line when the
    window ends (flush), so that a flood of wrong keys cannot flood the log."""

    def __init__(self, where: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.where = where
        self.clock = clock
        self._lock = threading.Lock()        # deny: the ZAP thread; flush: the server's
        self._peers: dict[str, list[float]] = {}     # peer -> [window start, count since]

    def deny(self, peer: str, key: bytes) -> None:
        now = self.clock()
        with self._lock:
            if peer not in self._peers and len(self._peers) >= DENY_PEERS:
                peer = "other peers"
            ent = self._peers.get(peer)
            if ent is not None and now - ent[0] < DENY_WINDOW_S:
                ent[1] += 1
                return
            self._peers[peer] = [now, 0]
            if ent is not None and ent[1]:
                self._more(peer, int(ent[1]))
        log.info("refused a CurveZMQ client from %s: its key %s is not in %s (tgsctl keygen, "
                 "docs/usage.md)", peer, key.decode("ascii", "replace"), self.where)

    def flush(self) -> None:
        """Log and forget the windows that ended."""
        now = self.clock()
        with self._lock:
            for peer, (start, count) in list(self._peers.items()):
                if now - start >= DENY_WINDOW_S:
                    del self._peers[peer]
                    if count:
                        self._more(peer, int(count))

    @staticmethod
    def _more(peer: str, count: int) -> None:
        log.info("refused %d more CurveZMQ handshake(s) from %s within %.0f s", count, peer,
                 DENY_WINDOW_S)


class _Zap(ThreadAuthenticator):
    """pyzmq's ZAP handler, remembering the peer address of the request it is deciding
    (the credentials callback is not given it)."""

    peer = "?"

    async def handle_zap_message(self, msg: list[bytes]) -> None:
        self.peer = msg[3].decode("utf-8", "replace")[:100] if len(msg) > 3 else "?"
        await super().handle_zap_message(msg)


class CurveGuard:
    """The controller's keys and the ZAP handler of its CURVE endpoints."""

    def __init__(self, ctx: zmq.Context, state_dir: Path) -> None:
        self.dir = Path(state_dir) / CURVE_DIR
        self.authorized = self.dir / AUTHORIZED_DIR
        sec = self.dir / f"{SERVER_NAME}.key_secret"
        if not sec.exists():
            write_keypair(self.dir, SERVER_NAME)
            log.info("created the controller's CurveZMQ key pair in %s", self.dir)
        self.public, secret = read_key_file(sec, need_secret=True)
        assert secret is not None
        self._secret = secret
        self.authorized.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._check_dir(self.authorized)
        self.keys: set[bytes] = set()
        self._stamp: tuple[int, int] | None = None
        self._next = 0.0
        self._ctx = ctx
        self.denials = DenialLog(str(self.authorized))
        # the ZAP handler runs where CURVE sockets are served: the --listen process (front.py)
        self.auth: ThreadAuthenticator | None = None

    @staticmethod
    def _check_dir(path: Path) -> None:
        st = path.stat()
        if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o022:
            raise KeyFileError(f"{path} must belong to the controller's user and be writable by "
                            "it alone")

    def callback(self, domain: str, key: bytes) -> bool:     # ZAP thread
        ok = domain == ZAP_DOMAIN and key in self.keys
        if not ok and isinstance(self.auth, _Zap):
            self.denials.deny(self.auth.peer, key)
        return ok

    def secure(self, sock: zmq.Socket) -> None:
        """Make `sock` (not yet bound) a CURVE server under this guard."""
        if self.auth is None:
            self.auth = _Zap(self._ctx, log=logging.getLogger(__name__ + ".zap"))
            self.auth.start()
            self.auth.configure_curve_callback(ZAP_DOMAIN, credentials_provider=self)
            self.refresh(force=True)
        sock.curve_server = True
        sock.curve_publickey = self.public
        sock.curve_secretkey = self._secret
        sock.zap_domain = ZAP_DOMAIN.encode()

    def refresh(self, force: bool = False) -> None:
        """Re-read authorized/ when it changed (cheap: one stat per REFRESH_S)."""
        now = time.monotonic()
        if not force and now < self._next:
            return
        self._next = now + REFRESH_S
        self.denials.flush()
        try:
            st = self.authorized.stat()
        except OSError as exc:
            log.error("authorized keys: %s: nobody is admitted", exc)
            self.keys = set()
            return
        stamp = (st.st_mtime_ns, st.st_ino)
        if stamp == self._stamp and not force:
            return
        self._stamp = stamp
        keys = set()
        for path in sorted(self.authorized.glob("*.key")):
            try:
                keys.add(read_key_file(path, need_secret=False)[0])
            except KeyFileError as exc:
                log.error("authorized keys: %s: skipped", exc)
        self.keys = keys                    # one assignment: the ZAP thread sees old or new
        log.info("%d authorized client key(s) in %s", len(keys), self.authorized)
        if not keys:
            log.warning("no authorized client key in %s: the --listen endpoints admit nobody "
                        "(add one: tgsctl keygen, docs/usage.md)", self.authorized)

    def stop(self) -> None:
        if self.auth is not None:
            self.auth.stop()
            self.auth = None
