"""CurveZMQ on --listen endpoints, metrics on loopback."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from ctl_helpers import daemon, wait_for
from tgs.client import Client, ControllerUnavailable
from tgs.client.keys import ClientKeys, read_key_file, write_keypair

pytestmark = pytest.mark.timeout(120)
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keys(d, tmp_path: Path, name: str, authorize: bool) -> ClientKeys:
    pub, sec = write_keypair(tmp_path / "keys", name)
    if authorize:
        shutil.copy(pub, d.state / "curve" / "authorized" / pub.name)
    public, secret = read_key_file(sec, need_secret=True)
    server = read_key_file(d.state / "curve" / "server.key", need_secret=False)[0]
    assert secret is not None
    return ClientKeys(server, public, secret)


def _names(d) -> set[str]:
    with d.client() as c:
        return {j["name"] for j in c.list()}


def test_tcp_endpoint_admits_only_authorized_keys(tmp_path: Path) -> None:
    port = free_port()
    tcp = f"tcp://127.0.0.1:{port}"
    with daemon(tmp_path, "--listen", str(port)) as d:
        curve = d.state / "curve"
        assert (curve / "server.key_secret").stat().st_mode & 0o777 == 0o600
        assert (curve / "authorized").is_dir()
        with d.client() as c:
            st = c.status()
        assert tcp in st["endpoints"] and len(st["curve_public_key"]) == 40
        # no keys at all (the NULL mechanism): no answer, no effect
        with Client(endpoint=tcp, timeout=1.0) as c:
            with pytest.raises(ControllerUnavailable):
                c.register("intruder1")
        # a well-formed key pair the controller does not know: no answer, no effect
        stranger = _keys(d, tmp_path, "stranger", authorize=False)
        with Client(endpoint=tcp, timeout=1.0, curve=stranger) as c:
            with pytest.raises(ControllerUnavailable):
                c.register("intruder2")
        # the right client key but a wrong server key: the handshake fails too
        good = _keys(d, tmp_path, "good", authorize=True)
        forged = ClientKeys(stranger.public, good.public, good.secret)
        with Client(endpoint=tcp, timeout=1.0, curve=forged) as c:
            with pytest.raises(ControllerUnavailable):
                c.register("intruder3")
        assert _names(d) == set()
        # an authorized key works (the directory is re-read within about a second)

        def works() -> bool:
            try:
                with Client(endpoint=tcp, timeout=1.0, curve=good) as c:
                    c.register("friend")
                return True
            except ControllerUnavailable:
                return False

        assert wait_for(works, timeout=10, step=0.2)
        assert _names(d) == {"friend"}
        # revoking it shuts it out again
        os.unlink(curve / "authorized" / "good.key")
        wait_for(lambda: not _answers(tcp, good), timeout=10, step=0.2)
        assert not _answers(tcp, good)
        log = (tmp_path / "controller.log").read_text()
        assert "no authorized client key" in log


def _answers(tcp: str, keys: ClientKeys) -> bool:
    try:
        with Client(endpoint=tcp, timeout=0.5, curve=keys) as c:
            c.status()
        return True
    except ControllerUnavailable:
        return False


def test_tools_use_keys_from_options_and_env(tmp_path: Path) -> None:
    port = free_port()
    with daemon(tmp_path, "--listen", str(port)) as d:
        pub, sec = write_keypair(tmp_path / "keys", "cli")
        shutil.copy(pub, d.state / "curve" / "authorized" / pub.name)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TGS_")}
        env["TGS_CONTROLLER"] = str(port)
        r = subprocess.run([str(BIN / "tgsctl"), "add", "nokeys"], env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2 and "needs CurveZMQ keys" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        env["TGS_SERVER_KEY"] = str(d.state / "curve" / "server.key")
        env["TGS_CLIENT_KEY"] = str(sec)

        def add() -> bool:
            r = subprocess.run([str(BIN / "tgsctl"), "--timeout", "1", "add", "withkeys"],
                               env=env, capture_output=True, text=True, timeout=60)
            return r.returncode == 0
        assert wait_for(add, timeout=15, step=0.2)
        assert "withkeys" in _names(d)
        # a secret key file others can read is refused on the client side too
        os.chmod(sec, 0o644)
        r = subprocess.run([str(BIN / "tgsctl"), "ls"], env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2 and "private" in r.stderr, r.stderr


def test_listen_refuses_a_readable_secret_key(tmp_path: Path) -> None:
    from ctl_helpers import Daemon
    curve = tmp_path / "state" / "curve"
    write_keypair(curve, "server")
    os.chmod(curve / "server.key_secret", 0o644)
    d = Daemon(tmp_path, "--listen", str(free_port()))
    try:
        with pytest.raises(RuntimeError, match="controller exited"):
            d.start()
        log = (tmp_path / "controller.log").read_text()
        assert "must be private" in log and "Traceback" not in log
    finally:
        d.close()


def _listening(port: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp{,6} print them) listening on `port`."""
    out = []
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            f = ln.split()
            addr, p = f[1].rsplit(":", 1)
            if int(p, 16) == port and f[3] == "0A":           # TCP_LISTEN
                out.append(addr)
    return out


@pytest.mark.parametrize("args,addr", [
    (["--metrics-port", "0"], "0100007F"),                     # 127.0.0.1 by default
    (["--metrics-port", "0", "--metrics-host", "0.0.0.0"], "00000000"),
])
def test_metrics_bind_loopback_unless_asked(tmp_path: Path, args: list[str], addr: str) -> None:
    with daemon(tmp_path, *args) as d:
        with d.client() as c:
            url = c.status()["metrics_url"]
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        assert _listening(port) == [addr], (url, _listening(port))
