"""CurveZMQ: which --server-key values are files and which are keys, what a refused client is
told, and the controller's (rate-limited) log of refused keys."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from ctl_helpers import daemon, wait_for
from tgs.client import keys
from tgs.client.keys import KeyFileError, parse_public_key, write_keypair
from tgs.controller import auth
from tgs.controller.auth import DenialLog

pytestmark = pytest.mark.timeout(120)
BIN = Path(sys.executable).parent
NAME40 = "keys/controller-node-0001.server.key.pub"      # 40 characters, all of them Z85


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_40_character_path_is_a_file_not_a_key(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert len(NAME40) == 40 and keys.z85_ok(NAME40.encode())       # the ambiguity
    monkeypatch.chdir(tmp_path)
    pub, _ = write_keypair(tmp_path / "made", "server")
    os.makedirs("keys")
    shutil.copy(pub, NAME40)
    real = keys.read_key_file(pub, need_secret=False)[0]
    assert parse_public_key(NAME40) == real                         # an existing file wins
    assert parse_public_key(f"file:{NAME40}") == real
    bare = real.decode()                    # a bare key, unless it starts like a path
    assert parse_public_key(bare if not bare.startswith(keys._PATH_START)
                            else f"key:{bare}") == real
    assert parse_public_key(f"key:{real.decode()}") == real
    # a missing file that looks like a path is an error, never a key
    missing = "/etc/tgs/keys/controller-public-0001.key"
    assert len(missing) == 40 and keys.z85_ok(missing.encode())
    with pytest.raises(KeyFileError, match="no server key file"):
        parse_public_key(missing)
    with pytest.raises(KeyFileError, match="neither a key file nor"):
        parse_public_key("not-a-key")
    with pytest.raises(KeyFileError, match="key:"):
        parse_public_key("key:short")
    os.unlink(NAME40)
    assert parse_public_key(NAME40) == NAME40.encode()              # no such file: a key


def test_denials_are_rate_limited_per_peer(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    d = DenialLog("/state/curve/authorized", clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="tgs.controller.auth"):
        for _ in range(500):
            d.deny("10.0.0.9", b"K" * 40)
        d.deny("10.0.0.10", b"L" * 40)
        d.flush()                                   # windows still open: nothing more
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 2 and all(r.levelno == logging.INFO for r in caplog.records)
        assert "from 10.0.0.9" in lines[0] and "K" * 40 in lines[0]
        now[0] = auth.DENY_WINDOW_S + 1
        d.flush()
        more = [r.getMessage() for r in caplog.records][2:]
        assert more == [f"refused 499 more CurveZMQ handshake(s) from 10.0.0.9 within "
                        f"{auth.DENY_WINDOW_S:.0f} s"]
        for i in range(auth.DENY_PEERS + 50):           # many peers: bounded, one shared line
            d.deny(f"10.1.{i // 256}.{i % 256}", b"M" * 40)
        assert len(caplog.records) <= 3 + auth.DENY_PEERS + 1


def test_unauthorized_tool_is_told_so_and_the_controller_logs_it(tmp_path: Path) -> None:
    port = _free_port()
    with daemon(tmp_path, "--listen", str(port)) as d:
        _, sec = write_keypair(tmp_path / "keys", "stranger")
        env = {k: v for k, v in os.environ.items() if not k.startswith("TGS_")}
        env.update(TGS_CONTROLLER=str(port), TGS_CLIENT_KEY=str(sec),
                   TGS_SERVER_KEY=str(d.state / "curve" / "server.key"))
        for _ in range(3):
            r = subprocess.run([str(BIN / "tgsctl"), "--timeout", "1", "ls"], env=env,
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 2, r.stderr
            assert "refused our CurveZMQ key: not authorized" in r.stderr, r.stderr
            assert "no controller reachable" not in r.stderr
        # a wrong server key: the handshake fails, said so
        other, _ = write_keypair(tmp_path / "keys", "other")
        env["TGS_SERVER_KEY"] = str(other)
        r = subprocess.run([str(BIN / "tgsctl"), "--timeout", "1", "ls"], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "CurveZMQ handshake" in r.stderr, r.stderr
        assert "no controller reachable" not in r.stderr
        log = tmp_path / "controller.log"

        def refused() -> list[str]:
            return [ln for ln in log.read_text().splitlines()
                    if " INFO refused a CurveZMQ client from 127.0.0.1" in ln]
        assert wait_for(refused, timeout=5)
        assert len(refused()) == 1                    # three refusals, one line a minute
        # nothing listening: still "no controller reachable"
        env["TGS_CONTROLLER"] = str(_free_port())
        r = subprocess.run([str(BIN / "tgsctl"), "--timeout", "0.5", "ls"], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "no controller reachable" in r.stderr, r.stderr
